//===- ReferenceTables.h - checkpoint tensors sd computes --------*- C++
//-*-===//
//
// A reference checkpoint may hold tensors that sd's program computes rather
// than loads: facebookresearch/DiT saves its fixed 2-D sin-cos position
// table as `pos_embed` [1, T, D]. Such a tensor is not loaded, but it is not
// ignored either: its values are checked against the table the program
// computes, so a checkpoint whose table differs (another grid, a learned or
// interpolated table) is refused instead of loading into a model that
// would compute something else.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_REFERENCETABLES_H
#define SD_DRIVER_REFERENCETABLES_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include "absl/status/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::sd {

/// A tensor the program computes: its name in the reference's checkpoint,
/// its shape there and its values (f32).
struct ComputedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// The tensors `module`'s program computes that its reference's checkpoint
/// holds (DiT: pos_embed for the program's grid and width); none for other
/// programs.
std::vector<ComputedTensor> computedTensors(ModuleOp module);

/// The largest difference allowed between a checkpoint's copy of a computed
/// table and sd's: BF16 storage rounds values in [-1, 1] by up to 2^-9.
constexpr double kComputedTableTolerance = 4e-3;

/// OK when the checkpoint's `values` of `shape` (`source` names the file)
/// are `expected`'s to within kComputedTableTolerance; otherwise
/// InvalidArgument naming the tensor, the shapes or the largest
/// difference and where it is.
absl::Status checkComputedTensor(const ComputedTensor &expected,
                                 llvm::ArrayRef<int64_t> shape,
                                 llvm::ArrayRef<float> values,
                                 llvm::StringRef source);

} // namespace mlir::sd

#endif // SD_DRIVER_REFERENCETABLES_H
