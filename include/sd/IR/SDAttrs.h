//===- SDAttrs.h - sd attributes --------------------------------*- C++ -*-===//
#ifndef SD_IR_SDATTRS_H
#define SD_IR_SDATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

#include "sd/IR/SDEnums.h.inc"

#include <optional>
#include <string>

namespace mlir::sd {
/// What an op does along a factor of its sharding rule; decides what a
/// sharding along the factor costs (see #sd.sharding_rule).
enum class FactorKind {
  /// Operands and results sharded alike along it need no communication.
  PassThrough,
  /// Summed (or maxed) over: sharding it leaves a partial result.
  Reduction,
  /// The op cannot run with it sharded: it must be gathered first.
  NeedReplication,
};

/// The printed name of factor `index`: i, j, ..., z, then z_1, z_2, ...
/// Names are fixed by position so that rules print deterministically.
std::string getFactorName(int64_t index);

/// The index of the factor called `name`, or nullopt for a string that is no
/// factor name.
std::optional<int64_t> getFactorIndex(llvm::StringRef name);
} // namespace mlir::sd

#define GET_ATTRDEF_CLASSES
#include "sd/IR/SDAttrs.h.inc"

#endif // SD_IR_SDATTRS_H
