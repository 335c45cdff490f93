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

enum class Family { DiT, Wan, Flux, UNet };

struct ProgramFacts {
  Family family = Family::DiT;
  /// Each parameter's reference shape (stored when it differs).
  std::map<std::string, std::vector<int64_t>, std::less<>> shapes;
  int64_t heads = 0;
  /// @loss's latents [B, ...] and pooled text vector [B, P] (SDXL, Flux).
  std::vector<int64_t> latents, pooled;
  /// UNet: the heads of the attention of each width (its transformer
  /// blocks' functions), the groups of its group norms.
  std::map<int64_t, int64_t> headsByWidth;
  int64_t normGroups = 0;

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
  else if (llvm::any_of(module.getOps<func::FuncOp>(), [](func::FuncOp f) {
             return f.getName().starts_with("resnet_");
           }))
    facts.family = Family::UNet;
  else
    return invalid("pretrained_model_name_or_path: the model program is not "
                   "one of sdgen's DiT, Wan, Flux or UNet programs (it has no "
                   "@dit_block, @wan_block, @flux_double_block or @resnet_*), "
                   "so its config cannot be checked");
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
    auto input = loss.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
    if (input && input.getKind() == InputKind::latents)
      facts.latents.assign(type.getShape().begin(), type.getShape().end());
    if (input && input.getKind() == InputKind::pooled)
      facts.pooled.assign(type.getShape().begin(), type.getShape().end());
  }
  module.walk([&](AttentionOp op) {
    auto q = cast<RankedTensorType>(op->getOperand(0).getType());
    facts.heads = q.getDimSize(1);
    // [B, heads, S, Dh]: the width is heads · Dh.
    facts.headsByWidth[q.getDimSize(1) * q.getDimSize(3)] = q.getDimSize(1);
  });
  module.walk([&](GroupNormOp op) {
    facts.normGroups = static_cast<int64_t>(op.getNumGroups());
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

/// Entry `i` of a per-level config key that may be one number for every
/// level (diffusers' attention_head_dim, transformer_layers_per_block), or
/// `fallback`.
llvm::json::Value levelEntry(const llvm::json::Object &config,
                             llvm::StringRef key, size_t i,
                             llvm::json::Value fallback) {
  const llvm::json::Value *value = config.get(key);
  if (!value)
    return fallback;
  if (const llvm::json::Array *list = value->getAsArray())
    return i < list->size() ? (*list)[i] : fallback;
  return *value;
}

std::vector<KeyCheck> unetChecks(const ProgramFacts &p,
                                 const llvm::json::Object &config) {
  int64_t levels = p.layers("down_blocks.", ".resnets.0.conv1.weight");
  llvm::json::Array channels, down, up, heads, layers;
  std::vector<bool> attention;
  for (int64_t level = 0; level < levels; ++level) {
    std::string prefix = "down_blocks." + std::to_string(level) + ".";
    int64_t width = p.dim(prefix + "resnets.0.conv1.weight", 0);
    bool attends = !p.shape(prefix + "attentions.0.norm.weight").empty();
    bool last = level + 1 == levels;
    channels.push_back(width);
    attention.push_back(attends);
    down.push_back(attends ? "CrossAttnDownBlock2D" : "DownBlock2D");
    // A level without attention has no heads or depth in the program (the
    // last level's are the mid block's): the config's entry stands.
    std::string blocks = attends ? prefix + "attentions.0.transformer_blocks."
                         : last  ? "mid_block.attentions.0.transformer_blocks."
                                 : "";
    auto it = p.headsByWidth.find(width);
    heads.push_back((attends || last) && it != p.headsByWidth.end()
                        ? llvm::json::Value(it->second)
                        : levelEntry(config, "attention_head_dim", level, 8));
    layers.push_back(
        blocks.empty()
            ? levelEntry(config, "transformer_layers_per_block", level, 1)
            : llvm::json::Value(p.layers(blocks, ".norm1.weight")));
  }
  for (int64_t level = levels - 1; level >= 0; --level)
    up.push_back(attention[level] ? "CrossAttnUpBlock2D" : "UpBlock2D");
  int64_t cross = 0;
  for (const auto &[name, shape] : p.shapes)
    if (llvm::StringRef(name).ends_with(".attn2.to_k.weight") &&
        shape.size() == 2)
      cross = shape[1];
  int64_t addedIn = p.dim("add_embedding.linear_1.weight", 1);
  bool added = addedIn > 0;
  int64_t pooled = p.pooled.size() == 2 ? p.pooled[1] : 0;
  auto orNull = [&](int64_t value) {
    return added ? llvm::json::Value(value) : llvm::json::Value(nullptr);
  };
  return {
      {"in_channels", p.dim("conv_in.weight", 1), 4,
       "conv_in.weight's channels"},
      {"out_channels", p.dim("conv_out.weight", 0), 4,
       "conv_out.weight's outputs"},
      {"block_out_channels", std::move(channels), ints({320, 640, 1280, 1280}),
       "its down blocks' ResNet widths"},
      {"down_block_types", std::move(down),
       llvm::json::Array({"CrossAttnDownBlock2D", "CrossAttnDownBlock2D",
                          "CrossAttnDownBlock2D", "DownBlock2D"}),
       "which down blocks have attention"},
      {"up_block_types", std::move(up),
       llvm::json::Array({"UpBlock2D", "CrossAttnUpBlock2D",
                          "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"}),
       "which up blocks have attention"},
      {"mid_block_type", "UNetMidBlock2DCrossAttn", "UNetMidBlock2DCrossAttn",
       "its mid block with attention"},
      {"layers_per_block", p.layers("down_blocks.0.resnets.", ".conv1.weight"),
       2, "down_blocks.0's ResNet blocks"},
      {"attention_head_dim", std::move(heads), 8,
       "its attention's heads per level (diffusers counts heads here)"},
      {"num_attention_heads", nullptr, nullptr,
       "heads given by attention_head_dim"},
      {"transformer_layers_per_block", std::move(layers), 1,
       "its transformer blocks per level"},
      {"cross_attention_dim", cross, 1280, "attn2.to_k.weight's inputs"},
      {"use_linear_projection", true, false, "its Linear proj_in / proj_out"},
      {"norm_num_groups", p.normGroups, 32, "its group norms' groups"},
      {"norm_eps", 1e-5, 1e-5, "its ResNet norms' epsilon"},
      {"act_fn", "silu", "silu", "its activation"},
      {"flip_sin_to_cos", true, true, "its time features: cosines first"},
      {"freq_shift", 0, 0, "its time features' frequency shift"},
      {"time_embedding_type", "positional", "positional",
       "its sinusoidal time features"},
      {"center_input_sample", false, false, "its input taken as it is"},
      {"conv_in_kernel", 3, 3, "conv_in.weight's kernel"},
      {"conv_out_kernel", 3, 3, "conv_out.weight's kernel"},
      {"resnet_time_scale_shift", "default", "default",
       "its time embedding added to the ResNet features"},
      {"dual_cross_attention", false, false, "one cross-attention"},
      {"only_cross_attention", false, false, "self- and cross-attention"},
      {"class_embed_type", nullptr, nullptr, "no class embedding"},
      {"num_class_embeds", nullptr, nullptr, "no class embedding"},
      {"encoder_hid_dim", nullptr, nullptr, "no projection of the text"},
      {"time_cond_proj_dim", nullptr, nullptr, "no guidance embedding"},
      {"addition_embed_type", added ? llvm::json::Value("text_time") : nullptr,
       nullptr, "add_embedding (SDXL's text_time)"},
      {"projection_class_embeddings_input_dim", orNull(addedIn), nullptr,
       "add_embedding.linear_1.weight's inputs"},
      {"addition_time_embed_dim", orNull(pooled ? (addedIn - pooled) / 6 : 0),
       nullptr, "the size and crop ids' feature width"},
      {"dropout", 0.0, 0.0, "no dropout"},
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
  case Family::UNet:
    return "UNet2DConditionModel";
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
  if (*name == "UNet2DConditionModel")
    return Family::UNet;
  if (*name == "DiTTransformer2DModel")
    return invalid(absl::StrFormat(
        "%s is diffusers' DiTTransformer2DModel, whose parameter names are "
        "not facebookresearch/DiT's, which sd's DiT has: use the reference "
        "checkpoint (its state_dict) with --init-from",
        folder.configPath));
  return invalid(absl::StrFormat(
      "%s is a %s; sd's programs are DiT, WanTransformer3DModel, "
      "FluxTransformer2DModel and UNet2DConditionModel",
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
  std::string unet = pathIn(path, "unet");
  if (fs::is_directory(transformer))
    folder.dir = transformer;
  else if (fs::is_directory(unet))
    folder.dir = unet;
  else if (fs::exists(pathIn(path, "config.json")))
    folder.dir = path;
  else
    return invalid(absl::StrFormat(
        "%s'%s' is not a diffusers model folder: it has neither transformer/, "
        "unet/ nor config.json",
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
      facts->family == Family::DiT    ? ditChecks(*facts)
      : facts->family == Family::Wan  ? wanChecks(*facts)
      : facts->family == Family::Flux ? fluxChecks(*facts)
                                      : unetChecks(*facts, folder.config);
  for (const KeyCheck &check : checks) {
    const llvm::json::Value *given = folder.config.get(check.key);
    llvm::json::Value value = given ? *given : check.fallback;
    // One number for a per-level list means it for every level.
    if (const llvm::json::Array *levels = check.program.getAsArray();
        levels && value.getAsNumber())
      value = llvm::json::Array(
          std::vector<llvm::json::Value>(levels->size(), value));
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
