//===- LogicalRules.h - Logical axis rules ----------------------*- C++ -*-===//
//
// MaxDiffusion names tensor dimensions logically ("embed", "heads", ...) and
// maps those names to mesh axes with an ordered rule list
// (`logical_axis_rules`). This header holds that list, the presets taken from
// MaxDiffusion's configs, a reader for its YAML files, and the resolution of
// one tensor's logical names to mesh axes. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SHARDING_LOGICALRULES_H
#define SD_SHARDING_LOGICALRULES_H

#include "sd/Sharding/Mesh.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sd {

/// One `[logical_name, mesh_axes]` rule; the mesh axes are major to minor,
/// and an empty list means "replicate" (YAML null or []), which still counts
/// as a match and so stops later rules for the same name.
struct LogicalAxisRule {
  std::string logicalName;
  std::vector<std::string> meshAxes;

  bool operator==(const LogicalAxisRule &other) const {
    return logicalName == other.logicalName && meshAxes == other.meshAxes;
  }
  bool operator!=(const LogicalAxisRule &other) const {
    return !(*this == other);
  }
};

/// An ordered rule list. Order is priority, and the same logical name may
/// appear in several rules so that a fallback applies when the preferred
/// mesh axes are already taken by another dimension of the tensor.
class LogicalAxisRules {
public:
  std::vector<LogicalAxisRule> rules;
  /// Preset name or file path, so diagnostics can say which rules applied.
  std::string name;

  /// Mesh axes for each dimension of one tensor, with flax's
  /// logical_to_mesh_axes semantics (what MaxDiffusion uses): rules are
  /// tried in order, and a rule assigns its mesh axes to the dimension with
  /// its logical name when that dimension is still unassigned and none of
  /// the rule's mesh axes is already assigned to another dimension of the
  /// tensor. Mesh axes that `mesh` lacks are then dropped; they still count
  /// as taken, so a mesh without an axis behaves exactly like MaxDiffusion's
  /// mesh with that axis of size 1. Dimensions no rule assigns, and those
  /// with logical name "", are replicated (empty list).
  ///
  /// logicalNames[i] names dimension i; shape[i] < 0 marks a dynamic size.
  /// A dimension its mesh axes do not divide keeps them: it is padded to a
  /// multiple (sd::blockExtent), as GSPMD pads. Errors (InvalidArgument):
  /// rank mismatch between logicalNames and shape, and a logical name used
  /// by two dimensions (as flax rejects it).
  absl::StatusOr<std::vector<std::vector<std::string>>>
  resolve(const MeshSpec &mesh, std::string_view tensorName,
          const std::vector<std::string> &logicalNames,
          const std::vector<int64_t> &shape) const;

  /// Compares the rules only: a preset equals the file it was taken from.
  bool operator==(const LogicalAxisRules &other) const {
    return rules == other.rules;
  }
  bool operator!=(const LogicalAxisRules &other) const {
    return !(*this == other);
  }
};

/// Names accepted by presetRules, default ("dit") first.
std::vector<std::string> presetRuleNames();

/// The rules of MaxDiffusion's configs: "sdxl" (base_xl.yml), "flux"
/// (base_flux_dev.yml), "wan" (base_wan_14b.yml), and "dit" (the default for
/// DiT transformers, equal to "flux").
absl::StatusOr<LogicalAxisRules> presetRules(std::string_view preset);

/// Reads the top-level `logical_axis_rules` key of a YAML document (a whole
/// MaxDiffusion config, whose other keys are ignored, or a file with only
/// that key). fileName is used in messages and as the rules' name; errors
/// are prefixed with `fileName:line: `.
absl::StatusOr<LogicalAxisRules> parseRulesYaml(std::string_view text,
                                                std::string_view fileName);

/// The variants of a rule list the planner tries (MaxDiffusion's configs
/// use both by hand).
enum class RuleVariant {
  /// fsdp splits the sequence rather than the batch ("fsdp as sequence
  /// parallelism", the Wan2.1 recipes): fsdp leaves the rules of `batch`,
  /// `activation_batch` and `conv_batch` and goes first in those of
  /// `activation_length` (a rule of its own, first, where there is none).
  FsdpSequence,
  /// The parameters' `embed` dimension is split over context too
  /// (base_wan_14b.yml's `embed: [context, fsdp]`): context goes first in
  /// the rules of `embed` (a rule of its own, last, where there is none).
  ContextEmbed,
};

/// "fsdp-seq", "ctx-embed": the suffix loadRules reads.
std::string_view ruleVariantName(RuleVariant variant);

/// `rules` changed as `variant` says; the name gets "+" and the variant's.
LogicalAxisRules applyRuleVariant(LogicalAxisRules rules, RuleVariant variant);

/// A preset name, or else the path of a YAML rules file, each optionally
/// followed by variants ("dit+fsdp-seq", "wan.yml+fsdp-seq+ctx-embed").
absl::StatusOr<LogicalAxisRules> loadRules(std::string_view presetOrPath);

} // namespace sd

#endif // SD_SHARDING_LOGICALRULES_H
