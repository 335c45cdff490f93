//===- ReferenceTables.cpp - checkpoint tensors sd computes ---------------===//
//
// DiT's position table, as facebookresearch/DiT's get_2d_sincos_pos_embed
// builds it (in float64, stored as f32): for token t = i·gw + j of the
// gh × gw patch grid, the first D/2 values encode the column j and the last
// D/2 the row i, each as [sin(p·ω), cos(p·ω)] with ω_k = 10000^(−k/(D/4)).
// sd's program computes the same table (modelgen::sinCos2D).
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/ReferenceTables.h"

#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace {

std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  return "[" + absl::StrJoin(shape, ", ") + "]";
}

/// DiT's table [1, gh·gw, dim].
ComputedTensor ditPositionTable(int64_t gh, int64_t gw, int64_t dim) {
  ComputedTensor table;
  table.name = "pos_embed";
  table.shape = {1, gh * gw, dim};
  table.values.resize(static_cast<size_t>(gh * gw * dim));
  int64_t quarter = dim / 4;
  for (int64_t i = 0; i < gh; ++i)
    for (int64_t j = 0; j < gw; ++j) {
      float *row = table.values.data() + (i * gw + j) * dim;
      for (int64_t k = 0; k < quarter; ++k) {
        double omega =
            1.0 / std::pow(10000.0, static_cast<double>(k) /
                                        static_cast<double>(quarter));
        double col = static_cast<double>(j) * omega;
        double rowAngle = static_cast<double>(i) * omega;
        row[k] = static_cast<float>(std::sin(col));
        row[quarter + k] = static_cast<float>(std::cos(col));
        row[2 * quarter + k] = static_cast<float>(std::sin(rowAngle));
        row[3 * quarter + k] = static_cast<float>(std::cos(rowAngle));
      }
    }
  return table;
}

} // namespace

std::vector<ComputedTensor> mlir::sd::computedTensors(ModuleOp module) {
  auto loss = module.lookupSymbol<func::FuncOp>("loss");
  if (!loss || !module.lookupSymbol<func::FuncOp>("dit_block"))
    return {};
  // The grid from the latents [B, H, W, C] and the patch embedding's
  // reference shape [D, C, p, p].
  int64_t height = 0, width = 0, patch = 0, dim = 0;
  for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
    auto type = dyn_cast<RankedTensorType>(loss.getArgument(i).getType());
    if (!type)
      continue;
    if (auto input =
            loss.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
        input && input.getKind() == InputKind::latents && type.getRank() == 4) {
      height = type.getDimSize(1);
      width = type.getDimSize(2);
    }
    if (auto param =
            loss.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName);
        param && param.getName() == "x_embedder.proj.weight" &&
        param.getStoredShape().size() == 4) {
      dim = param.getStoredShape()[0];
      patch = param.getStoredShape()[2];
    }
  }
  if (patch <= 0 || dim % 4 != 0 || height % patch != 0 || width % patch != 0)
    return {};
  return {ditPositionTable(height / patch, width / patch, dim)};
}

absl::Status mlir::sd::checkComputedTensor(const ComputedTensor &expected,
                                           llvm::ArrayRef<int64_t> shape,
                                           llvm::ArrayRef<float> values,
                                           llvm::StringRef source) {
  if (shape != llvm::ArrayRef<int64_t>(expected.shape))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor '%s' has shape %s, but the table the model computes "
        "instead of loading it is %s (another grid or width)",
        source.str(), expected.name, shapeText(shape),
        shapeText(expected.shape)));
  double worst = 0;
  size_t where = 0;
  for (size_t e = 0; e < values.size(); ++e) {
    double diff = std::fabs(static_cast<double>(values[e]) -
                            static_cast<double>(expected.values[e]));
    if (!(diff <= worst)) {
      worst = diff;
      where = e;
    }
  }
  if (!(worst <= kComputedTableTolerance))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: tensor '%s' is not the fixed sin-cos table the model computes "
        "instead of loading it: element %d is %g, the table's %g (a learned "
        "or resized table cannot load into this model)",
        source.str(), expected.name, where, values[where],
        expected.values[where]));
  return absl::OkStatus();
}
