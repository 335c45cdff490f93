//===- OpenMPLoweringOpInterface.h - ops as OpenMP C++ ----------*- C++ -*-===//
//
// The op interface through which each sd op says how it becomes C++/OpenMP
// code (see OpenMPLoweringOpInterface.td), and the registration of its
// external models.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TARGET_OPENMP_OPENMPLOWERINGOPINTERFACE_H
#define SD_TARGET_OPENMP_OPENMPLOWERINGOPINTERFACE_H

#include "sd/Target/OpenMP/KernelBuilder.h"
#include "sd/Target/OpenMP/ProgramBuilder.h"

#include "mlir/IR/OpDefinition.h"

#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h.inc"

namespace mlir {
class DialectRegistry;

namespace sd {
/// Attaches `OpenMPLoweringOpInterface` to every sd op the OpenMP lowering
/// supports and adds the `sd_omp` dialect. sd-lower-to-openmp calls it from
/// getDependentDialects; tools that parse planned IR call it too.
void registerOpenMPLoweringInterfaces(DialectRegistry &registry);
} // namespace sd
} // namespace mlir

#endif // SD_TARGET_OPENMP_OPENMPLOWERINGOPINTERFACE_H
