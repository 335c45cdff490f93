//===- LoweringModels.h - what the lowering models share --------*- C++ -*-===//
//
// What the files that define OpenMPLoweringOpInterface's external models
// share: LoweringModels.cpp (the ops that fuse into kernels, and the
// registration of every model) and CallModels.cpp (the ops that become calls
// of their own: library calls, memory moves, collectives). Internal to
// lib/Target/OpenMP.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_TARGET_OPENMP_LOWERINGMODELS_H
#define SD_LIB_TARGET_OPENMP_LOWERINGMODELS_H

#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"

namespace mlir {
class MLIRContext;

namespace sd::openmp {

/// The base every model derives from.
template <typename Model, typename OpTy>
using Base = OpenMPLoweringOpInterface::ExternalModel<Model, OpTy>;

/// Attaches the models of the ops that become calls of their own (library
/// calls, collectives, memory moves) to those ops;
/// registerOpenMPLoweringInterfaces calls it after attaching the others.
void attachCallModels(MLIRContext *context);

} // namespace sd::openmp
} // namespace mlir

#endif // SD_LIB_TARGET_OPENMP_LOWERINGMODELS_H
