//===- SDDialect.h - the sd dialect -----------------------------*- C++ -*-===//
#ifndef SD_IR_SDDIALECT_H
#define SD_IR_SDDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Allocator.h"

#include <mutex>

namespace mlir {
class FunctionOpInterface;
} // namespace mlir

#include "sd/IR/SDOpsDialect.h.inc"

#endif // SD_IR_SDDIALECT_H
