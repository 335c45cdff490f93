//===- SDOpsHelpers.h - What the op verifiers share -------------*- C++ -*-===//
//
// The helpers of result-type inference and verification shared by the files
// that define the ops' methods (SDOps.cpp, SDLayerOps.cpp): reporting before
// an op exists, dynamic sizes, and lists of dimensions in messages.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_IR_SDOPSHELPERS_H
#define SD_LIB_IR_SDOPSHELPERS_H

#include "sd/IR/SDOps.h"

#include <optional>
#include <string>

namespace mlir::sd::ops_detail {

/// Emits `'sd.op' op <message>` at an optional location, like emitOpError
/// does for an op that already exists.
class InferError {
public:
  InferError(std::optional<Location> loc, StringRef opName)
      : loc(loc), opName(opName) {}
  template <typename... Args> LogicalResult operator()(Args &&...args) const {
    return emitOptionalError(loc, "'", opName, "' op ",
                             std::forward<Args>(args)...);
  }

private:
  std::optional<Location> loc;
  StringRef opName;
};

inline bool isDyn(int64_t size) { return ShapedType::isDynamic(size); }

/// Two sizes that may be equal once dynamic ones are known.
inline bool compatible(int64_t a, int64_t b) {
  return isDyn(a) || isDyn(b) || a == b;
}

/// `values` as `[1, ?, 3]`, a dynamic size as `?`.
std::string formatList(ArrayRef<int64_t> values);

/// Checks that `dims` are distinct and in `[0, rank)`; `what` names them.
LogicalResult checkDimList(const InferError &error, StringRef what,
                           ArrayRef<int64_t> dims, int64_t rank);

} // namespace mlir::sd::ops_detail

#endif // SD_LIB_IR_SDOPSHELPERS_H
