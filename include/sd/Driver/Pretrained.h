//===- Pretrained.h - a diffusers model folder to start from ---*- C++ -*-===//
//
// MaxDiffusion's `pretrained_model_name_or_path` names a diffusers model
// repository. sd reads it when it is a local folder: the denoiser's
// component folder (`transformer/` or `unet/`, or the folder itself when it
// holds the config), its `config.json` checked against the model program
// (family, depth, widths, heads, patch and input sizes; a UNet's levels,
// block types, heads and transformer depth per level, text width and added
// embedding) before anything compiles,
// and its weights (`diffusion_pytorch_model.safetensors` or the sharded
// `diffusion_pytorch_model.safetensors.index.json`) loaded as --init-from
// loads a file. A hub id cannot be downloaded here: one error says to
// download it first.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_PRETRAINED_H
#define SD_DRIVER_PRETRAINED_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include "absl/status/statusor.h"

#include <string>

namespace mlir::sd {

/// A diffusers component folder, found and read.
struct PretrainedFolder {
  /// The folder as given and the component folder within it.
  std::string given, dir;
  /// dir/config.json, parsed (an object).
  std::string configPath;
  llvm::json::Object config;
  /// The weights: the single file or the sharded index.
  std::string weightsPath;
};

/// Finds the transformer's component folder in `path` (`origin` is where
/// the setting came from, "base_flux_dev.yml:30"). InvalidArgument for a
/// hub id that is not a local path, a file, a UNet-only repository, a
/// folder without config.json or weights, or a config that is not a JSON
/// object of at most 1 MiB.
absl::StatusOr<PretrainedFolder>
openPretrainedFolder(const std::string &path, const std::string &origin);

/// Checks the folder's config.json against the model program `module`
/// (its @loss): the class against the program's family, then each size
/// the config gives against the program's. The error names the config
/// key and both values: `.../config.json: num_attention_heads is 4, but
/// the model program's attention has 2 heads`.
absl::Status checkPretrainedConfig(ModuleOp module,
                                   const PretrainedFolder &folder);

/// openPretrainedFolder, then checkPretrainedConfig against `module`: the
/// folder's weights file (single or index) for a model they fit.
absl::StatusOr<std::string> pretrainedWeightsFor(ModuleOp module,
                                                 const std::string &path,
                                                 const std::string &origin);

} // namespace mlir::sd

#endif // SD_DRIVER_PRETRAINED_H
