//===- Passes.h - passes of the OpenMP target -------------------*- C++ -*-===//
#ifndef SD_TARGET_OPENMP_PASSES_H
#define SD_TARGET_OPENMP_PASSES_H

#include "sd/IR/SDDialect.h"
#include "sd/Target/OpenMP/OpenMPDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::sd {

#define GEN_PASS_DECL
#include "sd/Target/OpenMP/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "sd/Target/OpenMP/Passes.h.inc"

} // namespace mlir::sd

#endif // SD_TARGET_OPENMP_PASSES_H
