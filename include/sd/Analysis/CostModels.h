//===- CostModels.h - what each sd op costs ---------------------*- C++ -*-===//
//
// The CostOpInterface implementations of the sd ops, attached as external
// models by the cost model's library (as the evaluator attaches its own),
// and the byte counts they and the cost model share.
//
//===----------------------------------------------------------------------===//

#ifndef SD_ANALYSIS_COSTMODELS_H
#define SD_ANALYSIS_COSTMODELS_H

#include "mlir/IR/Types.h"

#include <cstdint>

namespace mlir {
class DialectRegistry;

namespace sd {
/// Attaches CostOpInterface to every sd op but `sd.mesh`. Add to the
/// registry before the context loads the dialect (or append it between
/// passes).
void registerCostModels(DialectRegistry &registry);

/// Bytes of one element of `type`'s element type: whole bytes, so i1 is 1.
int64_t getElementBytes(Type type);

/// Bytes of a static-shape tensor type.
int64_t getTensorBytes(Type type);
} // namespace sd
} // namespace mlir

#endif // SD_ANALYSIS_COSTMODELS_H
