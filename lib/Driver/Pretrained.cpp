//===- Pretrained.cpp - a local diffusers model folder to start from ------===//
//
// The folder is found and its config read (openPretrainedFolder), then the
// config is checked against facts read off the model program: the family
// from its block functions, sizes from its parameters' reference shapes
// (their names and layouts are the reference's, see ModelGen.h) and the
// heads from its attention. A key the config omits is compared at the
// reference class's default, as diffusers would construct the model.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Pretrained.h"

#include "sd/Config/RunSpec.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"
#include "sd/Support/Files.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "absl/strings/str_format.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

using namespace mlir;
using namespace mlir::sd;

namespace fs = llvm::sys::fs;

namespace {

constexpr uint64_t kMaxConfigBytes = uint64_t(1) << 20;
constexpr llvm::StringLiteral kWeightsFile =
    "diffusion_pytorch_model.safetensors";
constexpr llvm::StringLiteral kIndexFile =
    "diffusion_pytorch_model.safetensors.index.json";

std::string pathIn(llvm::StringRef dir, llvm::StringRef name) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  return std::string(path);
}

absl::Status invalid(const std::string &message) {
  return absl::InvalidArgumentError(message);
}

//===----------------------------------------------------------------------===//
// What the model program is
//===----------------------------------------------------------------------===//

enum class Family { DiT, Wan, Flux };

struct ProgramFacts {
  Family family = Family::DiT;
  /// Each parameter's reference shape (stored when it differs).
  std::map<std::string, std::vector<int64_t>, std::less<>> shapes;
  int64_t heads = 0;
  /// @loss's latents [B, ...].
  std::vector<int64_t> latents;

  /// The shape of `name`, which a program of this family has.
  const std::vector<int64_t> &shape(llvm::StringRef name) const {
    static const std::vector<int64_t> none;
    auto it = shapes.find(name);
    return it == shapes.end() ? none : it->second;
  }
  int64_t dim(llvm::StringRef name, size_t d) const {
    const std::vector<int64_t> &s = shape(name);
    return d < s.size() ? s[d] : 0;
  }
  /// The layers N with a parameter `prefix` N `suffix`.
  int64_t layers(llvm::StringRef prefix, llvm::StringRef suffix) const {
    std::set<std::string> seen;
    for (const auto &[name, shape] : shapes) {
      llvm::StringRef rest(name);
      if (!rest.consume_front(prefix) || !rest.consume_back(suffix))
        continue;
      unsigned index;
      if (!rest.getAsInteger(10, index))
        seen.insert(rest.str());
    }
    return static_cast<int64_t>(seen.size());
  }
};

absl::StatusOr<ProgramFacts> programFacts(ModuleOp module) {
  ProgramFacts facts;
  if (module.lookupSymbol<func::FuncOp>("dit_block"))
    facts.family = Family::DiT;
  else if (module.lookupSymbol<func::FuncOp>("wan_block"))
    facts.family = Family::Wan;
  else if (module.lookupSymbol<func::FuncOp>("flux_double_block"))
    facts.family = Family::Flux;
  else
    return invalid("pretrained_model_name_or_path: the model program is not "
                   "one of sdgen's DiT, Wan or Flux programs (it has no "
                   "@dit_block, @wan_block or @flux_double_block), so its "
                   "config cannot be checked");
  auto loss = module.lookupSymbol<func::FuncOp>("loss");
  if (!loss)
    return invalid("pretrained_model_name_or_path: the model has no @loss");
  for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
    auto type = dyn_cast<RankedTensorType>(loss.getArgument(i).getType());
    if (!type)
      continue;
    if (auto param =
            loss.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName)) {
      ArrayRef<int64_t> stored = param.getStoredShape();
      ArrayRef<int64_t> shape = stored.empty() ? type.getShape() : stored;
      facts.shapes[param.getName().str()] = {shape.begin(), shape.end()};
    }
    if (auto input =
            loss.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
        input && input.getKind() == InputKind::latents)
      facts.latents.assign(type.getShape().begin(), type.getShape().end());
  }
  module.walk([&](AttentionOp op) {
    facts.heads =
        cast<RankedTensorType>(op->getOperand(0).getType()).getDimSize(1);
  });
  return facts;
}

//===----------------------------------------------------------------------===//
// The config against the facts
//===----------------------------------------------------------------------===//

/// One config key: the program's value (null: the key must be null or
/// absent), the class's default when the config omits it, and what the
/// program's value is.
struct KeyCheck {
  const char *key;
  llvm::json::Value program;
  llvm::json::Value fallback;
  const char *what;
};

bool sameValue(const llvm::json::Value &a, const llvm::json::Value &b) {
  if (auto x = a.getAsNumber())
    if (auto y = b.getAsNumber())
      return std::fabs(*x - *y) <= 1e-9 * std::max(std::fabs(*x), 1.0);
  const llvm::json::Array *xs = a.getAsArray(), *ys = b.getAsArray();
  if (xs && ys) {
    if (xs->size() != ys->size())
      return false;
    for (size_t i = 0; i < xs->size(); ++i)
      if (!sameValue((*xs)[i], (*ys)[i]))
        return false;
    return true;
  }
  return a == b;
}

std::string shown(const llvm::json::Value &value) {
  return llvm::formatv("{0}", value).str();
}

llvm::json::Value ints(std::initializer_list<int64_t> values) {
  llvm::json::Array array;
  for (int64_t v : values)
    array.push_back(v);
  return array;
}

std::vector<KeyCheck> ditChecks(const ProgramFacts &p) {
  int64_t hidden = p.dim("x_embedder.proj.weight", 0);
  int64_t channels = p.dim("x_embedder.proj.weight", 1);
  int64_t patch = p.dim("x_embedder.proj.weight", 2);
  int64_t out = p.dim("final_layer.linear.weight", 0);
  double ratio =
      hidden ? static_cast<double>(p.dim("blocks.0.mlp.fc1.weight", 0)) /
                   static_cast<double>(hidden)
             : 0;
  return {
      {"input_size", p.latents.size() == 4 ? p.latents[1] : 0, 32,
       "its latents' height"},
      {"patch_size", patch, 2, "x_embedder.proj.weight's kernel"},
      {"in_channels", channels, 4, "x_embedder.proj.weight's channels"},
      {"hidden_size", hidden, 1152, "x_embedder.proj.weight's outputs"},
      {"depth", p.layers("blocks.", ".attn.qkv.weight"), 28, "its blocks"},
      {"num_heads", p.heads, 16, "its attention's heads"},
      {"mlp_ratio", ratio, 4.0, "blocks.0.mlp.fc1.weight's width / hidden"},
      {"num_classes", p.dim("y_embedder.embedding_table.weight", 0) - 1, 1000,
       "y_embedder.embedding_table.weight's rows, less the null class"},
      {"learn_sigma", out == 2 * patch * patch * channels, true,
       "final_layer.linear.weight's outputs are twice the channels"},
  };
}

std::vector<KeyCheck> wanChecks(const ProgramFacts &p) {
  const char *embed = "patch_embedding.weight";
  int64_t hidden = p.dim(embed, 0);
  int64_t pt = p.dim(embed, 2), ph = p.dim(embed, 3), pw = p.dim(embed, 4);
  int64_t volume = std::max<int64_t>(pt * ph * pw, 1);
  return {
      {"patch_size", ints({pt, ph, pw}), ints({1, 2, 2}),
       "patch_embedding.weight's kernel"},
      {"num_attention_heads", p.heads, 40, "its attention's heads"},
      {"attention_head_dim", p.heads ? hidden / p.heads : 0, 128,
       "its width / heads"},
      {"in_channels", p.dim(embed, 1), 16, "patch_embedding.weight's channels"},
      {"out_channels", p.dim("proj_out.weight", 0) / volume, 16,
       "proj_out.weight's outputs / patch"},
      {"text_dim", p.dim("condition_embedder.text_embedder.linear_1.weight", 1),
       4096, "the text embedder's inputs"},
      {"freq_dim", p.dim("condition_embedder.time_embedder.linear_1.weight", 1),
       256, "the time embedder's inputs"},
      {"ffn_dim", p.dim("blocks.0.ffn.net.0.proj.weight", 0), 13824,
       "blocks.0.ffn.net.0.proj.weight's outputs"},
      {"num_layers", p.layers("blocks.", ".attn1.to_q.weight"), 40,
       "its blocks"},
      {"cross_attn_norm", true, true,
       "its affine norm2 before cross-attention"},
      {"qk_norm", "rms_norm_across_heads", "rms_norm_across_heads",
       "its RMS norms of q and k over the full width"},
      {"eps", 1e-6, 1e-6, "its norms' epsilon"},
      {"image_dim", nullptr, nullptr, "text-to-video: no image embedder"},
      {"added_kv_proj_dim", nullptr, nullptr,
       "text-to-video: no image keys and values"},
      {"pos_embed_seq_len", nullptr, nullptr, "no image position embedding"},
  };
}

std::vector<KeyCheck> fluxChecks(const ProgramFacts &p) {
  int64_t hidden = p.dim("x_embedder.weight", 0);
  int64_t dh = p.heads ? hidden / p.heads : 0, s = (7 * dh) / 32;
  return {
      {"patch_size", 1, 1, "the packed 2×2 patches x_embedder takes"},
      {"in_channels", p.dim("x_embedder.weight", 1), 64,
       "x_embedder.weight's inputs"},
      {"out_channels", p.dim("proj_out.weight", 0), nullptr,
       "proj_out.weight's outputs"},
      {"num_layers", p.layers("transformer_blocks.", ".norm1.linear.weight"),
       19, "its double-stream blocks"},
      {"num_single_layers",
       p.layers("single_transformer_blocks.", ".norm.linear.weight"), 38,
       "its single-stream blocks"},
      {"attention_head_dim", dh, 128, "its width / heads"},
      {"num_attention_heads", p.heads, 24, "its attention's heads"},
      {"joint_attention_dim", p.dim("context_embedder.weight", 1), 4096,
       "context_embedder.weight's inputs"},
      {"pooled_projection_dim",
       p.dim("time_text_embed.text_embedder.linear_1.weight", 1), 768,
       "the pooled text embedder's inputs"},
      {"guidance_embeds", true, false, "its guidance embedder (Flux.1-dev)"},
      {"axes_dims_rope", ints({dh - 4 * s, 2 * s, 2 * s}), ints({16, 56, 56}),
       "its RoPE split of the head"},
  };
}

const char *familyName(Family family) {
  switch (family) {
  case Family::DiT:
    return "DiT (facebookresearch/DiT)";
  case Family::Wan:
    return "WanTransformer3DModel";
  case Family::Flux:
    return "FluxTransformer2DModel";
  }
  return "";
}

/// The family the config describes, from its `_class_name` (a DiT config
/// of facebookresearch/DiT's arguments has none).
absl::StatusOr<Family> configFamily(const PretrainedFolder &folder) {
  std::optional<llvm::StringRef> name = folder.config.getString("_class_name");
  if (!name) {
    if (folder.config.get("depth") && folder.config.get("hidden_size"))
      return Family::DiT;
    return invalid(absl::StrFormat(
        "%s has no \"_class_name\" (diffusers' config names its model "
        "class)",
        folder.configPath));
  }
  if (*name == "DiT")
    return Family::DiT;
  if (*name == "WanTransformer3DModel")
    return Family::Wan;
  if (*name == "FluxTransformer2DModel")
    return Family::Flux;
  if (*name == "DiTTransformer2DModel")
    return invalid(absl::StrFormat(
        "%s is diffusers' DiTTransformer2DModel, whose parameter names are "
        "not facebookresearch/DiT's, which sd's DiT has: use the reference "
        "checkpoint (its state_dict) with --init-from",
        folder.configPath));
  return invalid(absl::StrFormat(
      "%s is a %s; sd's programs are DiT, WanTransformer3DModel and "
      "FluxTransformer2DModel",
      folder.configPath, name->str()));
}

} // namespace

absl::StatusOr<PretrainedFolder>
mlir::sd::openPretrainedFolder(const std::string &path,
                               const std::string &origin) {
  std::string where = origin.empty() ? "" : origin + ": ";
  PretrainedFolder folder;
  folder.given = path;
  if (absl::Status status = ::sd::checkPretrainedPath(path, origin);
      !status.ok())
    return status;
  std::string transformer = pathIn(path, "transformer");
  if (fs::is_directory(transformer))
    folder.dir = transformer;
  else if (fs::is_directory(pathIn(path, "unet")))
    return invalid(absl::StrFormat(
        "%s'%s' holds a UNet (unet/), and sd has no UNet programs yet", where,
        path));
  else if (fs::exists(pathIn(path, "config.json")))
    folder.dir = path;
  else
    return invalid(absl::StrFormat(
        "%s'%s' is not a diffusers model folder: it has neither transformer/ "
        "nor config.json",
        where, path));

  folder.configPath = pathIn(folder.dir, "config.json");
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      ::sd::readRegularFile(folder.configPath, "model config", kMaxConfigBytes);
  if (!text.ok())
    return text.status();
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*text)->getBuffer());
  if (!parsed)
    return invalid(absl::StrFormat("%s is not JSON: %s", folder.configPath,
                                   llvm::toString(parsed.takeError())));
  llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return invalid(
        absl::StrFormat("%s is not a JSON object", folder.configPath));
  folder.config = std::move(*object);

  std::string index = pathIn(folder.dir, kIndexFile);
  std::string single = pathIn(folder.dir, kWeightsFile);
  if (fs::exists(index))
    folder.weightsPath = index;
  else if (fs::exists(single))
    folder.weightsPath = single;
  else
    return invalid(absl::StrFormat("%s has no %s (or its sharded %s)",
                                   folder.dir, kWeightsFile.str(),
                                   kIndexFile.str()));
  return folder;
}

absl::Status mlir::sd::checkPretrainedConfig(ModuleOp module,
                                             const PretrainedFolder &folder) {
  absl::StatusOr<ProgramFacts> facts = programFacts(module);
  if (!facts.ok())
    return facts.status();
  absl::StatusOr<Family> family = configFamily(folder);
  if (!family.ok())
    return family.status();
  if (*family != facts->family)
    return invalid(absl::StrFormat(
        "%s describes a %s, but the model program is a %s", folder.configPath,
        familyName(*family), familyName(facts->family)));
  std::vector<KeyCheck> checks =
      facts->family == Family::DiT   ? ditChecks(*facts)
      : facts->family == Family::Wan ? wanChecks(*facts)
                                     : fluxChecks(*facts);
  for (const KeyCheck &check : checks) {
    const llvm::json::Value *given = folder.config.get(check.key);
    const llvm::json::Value &value = given ? *given : check.fallback;
    // Flux's out_channels null means in_channels.
    if (value.kind() == llvm::json::Value::Null &&
        check.program.kind() != llvm::json::Value::Null &&
        llvm::StringRef(check.key) == "out_channels") {
      const llvm::json::Value *in = folder.config.get("in_channels");
      if (in && sameValue(*in, check.program))
        continue;
    }
    if (sameValue(value, check.program))
      continue;
    return invalid(absl::StrFormat(
        "%s: %s is %s%s, but the model program's is %s (%s)", folder.configPath,
        check.key, shown(value), given ? "" : " (absent: the class's default)",
        shown(check.program), check.what));
  }
  // DiT's label table has the null class's row only when classes drop out.
  if (facts->family == Family::DiT)
    if (std::optional<double> dropout =
            folder.config.getNumber("class_dropout_prob");
        dropout && *dropout <= 0)
      return invalid(absl::StrFormat(
          "%s: class_dropout_prob is %g, so its label table has no null-class "
          "row, which the model program's has",
          folder.configPath, *dropout));
  return absl::OkStatus();
}

absl::StatusOr<std::string>
mlir::sd::pretrainedWeightsFor(ModuleOp module, const std::string &path,
                               const std::string &origin) {
  absl::StatusOr<PretrainedFolder> folder = openPretrainedFolder(path, origin);
  if (!folder.ok())
    return folder.status();
  if (absl::Status status = checkPretrainedConfig(module, *folder);
      !status.ok())
    return status;
  return folder->weightsPath;
}
