//===- LogicalRules.cpp - Logical axis rules ------------------------------===//
//
// Presets, the YAML reader and flax-style resolution of logical axis rules.
//
//===----------------------------------------------------------------------===//

#include "sd/Sharding/LogicalRules.h"
#include "sd/Sharding/YamlDiagnostics.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <algorithm>
#include <optional>

using namespace sd;
namespace yaml = llvm::yaml;

//===----------------------------------------------------------------------===//
// Resolution
//===----------------------------------------------------------------------===//

absl::StatusOr<std::vector<std::vector<std::string>>>
LogicalAxisRules::resolve(const MeshSpec &mesh, std::string_view tensorName,
                          const std::vector<std::string> &logicalNames,
                          const std::vector<int64_t> &shape) const {
  size_t rank = logicalNames.size();
  if (shape.size() != rank)
    return absl::InvalidArgumentError(
        absl::StrFormat("tensor \"%s\" has %d logical names but rank %d",
                        tensorName, rank, shape.size()));
  for (size_t i = 0; i < rank; ++i)
    for (size_t j = i + 1; j < rank; ++j)
      if (!logicalNames[i].empty() && logicalNames[i] == logicalNames[j])
        return absl::InvalidArgumentError(absl::StrFormat(
            "tensor \"%s\" has logical name \"%s\" on dimensions %d and %d",
            tensorName, logicalNames[i], i, j));

  // Rules are the outer loop, as in flax: an earlier rule takes its mesh
  // axes first even when it is for a later dimension.
  std::vector<const LogicalAxisRule *> chosen(rank, nullptr);
  std::vector<std::string_view> taken;
  for (const LogicalAxisRule &rule : rules) {
    auto dim =
        std::find(logicalNames.begin(), logicalNames.end(), rule.logicalName);
    if (rule.logicalName.empty() || dim == logicalNames.end() ||
        chosen[dim - logicalNames.begin()])
      continue;
    bool free = std::none_of(
        rule.meshAxes.begin(), rule.meshAxes.end(), [&](const std::string &a) {
          return std::find(taken.begin(), taken.end(), a) != taken.end();
        });
    if (!free)
      continue;
    chosen[dim - logicalNames.begin()] = &rule;
    taken.insert(taken.end(), rule.meshAxes.begin(), rule.meshAxes.end());
  }

  // A dimension its axes do not divide is padded (sd::blockExtent).
  std::vector<std::vector<std::string>> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (!chosen[i])
      continue;
    for (const std::string &axisName : chosen[i]->meshAxes)
      if (mesh.findAxis(axisName))
        result[i].push_back(axisName);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

std::vector<std::string> sd::presetRuleNames() {
  return {"dit", "sdxl", "flux", "wan"};
}

absl::StatusOr<LogicalAxisRules> sd::presetRules(std::string_view preset) {
  LogicalAxisRules result;
  result.name = std::string(preset);
  // Each table is the logical_axis_rules of a MaxDiffusion config, in the
  // file's order (LogicalRulesTest checks them against the files).
  if (preset == "sdxl") // base_xl.yml
    result.rules = {{"batch", {"data"}},
                    {"activation_batch", {"data", "fsdp"}},
                    {"activation_heads", {"tensor"}},
                    {"activation_kv", {"tensor"}},
                    {"embed", {"fsdp"}},
                    {"heads", {"tensor"}},
                    {"conv_batch", {"data", "fsdp"}},
                    {"out_channels", {"tensor"}},
                    {"conv_out", {"fsdp"}}};
  else if (preset == "flux" || preset == "dit") // base_flux_dev.yml
    result.rules = {{"batch", {"data", "fsdp"}},
                    {"activation_batch", {"data", "fsdp"}},
                    {"activation_heads", {"tensor"}},
                    {"activation_length", {"context"}},
                    {"activation_kv_length", {"context"}},
                    {"activation_kv", {"tensor"}},
                    {"mlp", {"tensor"}},
                    {"embed", {"fsdp"}},
                    {"heads", {"tensor"}},
                    {"conv_batch", {"data", "fsdp"}},
                    {"out_channels", {"tensor"}},
                    {"conv_out", {"fsdp"}}};
  else if (preset == "wan") // base_wan_14b.yml
    result.rules = {{"batch", {"data", "fsdp"}},
                    {"activation_batch", {"data", "fsdp"}},
                    {"activation_self_attn_heads", {"context", "tensor"}},
                    {"activation_cross_attn_q_length", {"context", "tensor"}},
                    {"activation_length", {"context"}},
                    {"activation_heads", {"tensor"}},
                    {"mlp", {"tensor"}},
                    {"embed", {"context", "fsdp"}},
                    {"heads", {"tensor"}},
                    {"norm", {"tensor"}},
                    {"conv_batch", {"data", "context", "fsdp"}},
                    {"out_channels", {"tensor"}},
                    {"conv_out", {"context"}}};
  else
    return absl::InvalidArgumentError(absl::StrFormat(
        "unknown logical axis rules preset \"%s\"; expected one of %s", preset,
        absl::StrJoin(presetRuleNames(), ", ")));
  return result;
}

//===----------------------------------------------------------------------===//
// YAML
//===----------------------------------------------------------------------===//

namespace {

/// Reads one YAML text of rules.
class RulesReader : public YamlReaderBase {
public:
  RulesReader(std::string_view text, std::string_view fileName)
      : YamlReaderBase(fileName), text(text) {}

  absl::StatusOr<LogicalAxisRules> read();

private:
  /// YAML's null spellings (plain only: a quoted 'null' is a string).
  static bool isNull(const yaml::Node *node) {
    if (llvm::isa<yaml::NullNode>(node))
      return true;
    auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(node);
    if (!scalar)
      return false;
    llvm::StringRef raw = scalar->getRawValue();
    return raw == "null" || raw == "Null" || raw == "NULL" || raw == "~";
  }

  /// A non-null scalar's value, or nullopt.
  static std::optional<std::string> stringValue(yaml::Node *node) {
    auto *scalar = llvm::dyn_cast_or_null<yaml::ScalarNode>(node);
    if (!scalar || isNull(scalar))
      return std::nullopt;
    llvm::SmallString<32> storage;
    return scalar->getValue(storage).str();
  }

  absl::StatusOr<std::vector<std::string>>
  readMeshAxes(yaml::Node *node, yaml::Node *rule, std::string_view name);
  absl::StatusOr<LogicalAxisRule> readRule(yaml::Node *node);
  absl::Status readRuleList(yaml::Node *node, yaml::Node *key,
                            LogicalAxisRules &out);

  std::string_view text;
};

absl::StatusOr<std::vector<std::string>>
RulesReader::readMeshAxes(yaml::Node *node, yaml::Node *rule,
                          std::string_view name) {
  std::string bad = absl::StrFormat(
      "mesh axes of \"%s\" must be a name, a list of names or null", name);
  std::vector<std::string> axes;
  if (isNull(node))
    return axes;
  if (std::optional<std::string> axis = stringValue(node)) {
    if (axis->empty())
      return error(rule, bad);
    axes.push_back(*axis);
  } else if (auto *list = llvm::dyn_cast<yaml::SequenceNode>(node)) {
    for (yaml::Node &item : *list) {
      std::optional<std::string> axis = stringValue(&item);
      if (!axis || axis->empty())
        return error(rule, bad);
      if (std::find(axes.begin(), axes.end(), *axis) != axes.end())
        return error(rule,
                     absl::StrFormat("mesh axis \"%s\" appears twice in the "
                                     "rule for \"%s\"",
                                     *axis, name));
      axes.push_back(*axis);
    }
  } else {
    return error(rule, bad);
  }
  return axes;
}

absl::StatusOr<LogicalAxisRule> RulesReader::readRule(yaml::Node *node) {
  constexpr std::string_view kShape = "rule must be [logical_name, mesh_axes]";
  auto *list = llvm::dyn_cast<yaml::SequenceNode>(node);
  if (!list)
    return error(node, kShape);
  LogicalAxisRule rule;
  int count = 0;
  // Elements are handled as the iteration reaches them: llvm::yaml parses
  // lazily and cannot revisit a nested list once it has moved past it.
  for (yaml::Node &item : *list) {
    if (count == 0) {
      std::optional<std::string> name = stringValue(&item);
      if (!name || name->empty())
        return error(node, kShape);
      rule.logicalName = *name;
    } else if (count == 1) {
      absl::StatusOr<std::vector<std::string>> axes =
          readMeshAxes(&item, node, rule.logicalName);
      if (!axes.ok())
        return axes.status();
      rule.meshAxes = *std::move(axes);
    }
    ++count;
  }
  if (count != 2)
    return error(node, kShape);
  return rule;
}

absl::Status RulesReader::readRuleList(yaml::Node *node, yaml::Node *key,
                                       LogicalAxisRules &out) {
  auto *list = llvm::dyn_cast_or_null<yaml::SequenceNode>(node);
  if (!list || isNull(node))
    return error(key, "logical_axis_rules must be a list of [logical_name, "
                      "mesh_axes] rules");
  for (yaml::Node &item : *list) {
    absl::StatusOr<LogicalAxisRule> rule = readRule(&item);
    if (!rule.ok())
      return rule.status();
    out.rules.push_back(*std::move(rule));
  }
  return syntaxError ? *syntaxError : absl::OkStatus();
}

absl::StatusOr<LogicalAxisRules> RulesReader::read() {
  if (absl::Status s = checkYamlStructure(text, fileName); !s.ok())
    return s;
  yaml::Stream stream(llvm::MemoryBufferRef(llvm::StringRef(text), fileName),
                      sourceMgr);
  LogicalAxisRules result;
  result.name = fileName;
  bool found = false;
  for (yaml::Document &doc : stream) {
    yaml::Node *root = doc.getRoot();
    if (syntaxError)
      return *syntaxError;
    if (!root || llvm::isa<yaml::NullNode>(root))
      continue; // An empty document has no keys at all.
    auto *map = llvm::dyn_cast<yaml::MappingNode>(root);
    if (!map)
      return error(root, "expected a mapping at the top level");
    // Every key is visited (unwanted values are skipped by the iterator) so
    // that a syntax error anywhere in the file is reported.
    for (yaml::KeyValueNode &entry : *map) {
      std::optional<std::string> key = stringValue(entry.getKey());
      if (syntaxError)
        return *syntaxError;
      if (key != "logical_axis_rules")
        continue;
      if (found)
        return error(entry.getKey(), "duplicate logical_axis_rules key");
      found = true;
      if (absl::Status s =
              readRuleList(entry.getValue(), entry.getKey(), result);
          !s.ok())
        return s;
    }
  }
  if (syntaxError)
    return *syntaxError;
  if (!found)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: no logical_axis_rules key", fileName));
  return result;
}

bool looksLikePresetName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '-';
  });
}

} // namespace

absl::StatusOr<LogicalAxisRules> sd::parseRulesYaml(std::string_view text,
                                                    std::string_view fileName) {
  return RulesReader(text, fileName).read();
}

std::string_view sd::ruleVariantName(RuleVariant variant) {
  switch (variant) {
  case RuleVariant::FsdpSequence:
    return "fsdp-seq";
  case RuleVariant::ContextEmbed:
    return "ctx-embed";
  }
  return "";
}

namespace {
/// `axis` first in the mesh axes of every rule for `name`; a rule of its
/// own (first, or last) where there is none.
void putFirst(LogicalAxisRules &rules, std::string_view name,
              std::string_view axis, bool newRuleFirst) {
  bool found = false;
  for (LogicalAxisRule &rule : rules.rules) {
    if (rule.logicalName != name)
      continue;
    found = true;
    if (std::find(rule.meshAxes.begin(), rule.meshAxes.end(), axis) ==
        rule.meshAxes.end())
      rule.meshAxes.insert(rule.meshAxes.begin(), std::string(axis));
  }
  if (found)
    return;
  LogicalAxisRule rule{std::string(name), {std::string(axis)}};
  if (newRuleFirst)
    rules.rules.insert(rules.rules.begin(), rule);
  else
    rules.rules.push_back(rule);
}
} // namespace

LogicalAxisRules sd::applyRuleVariant(LogicalAxisRules rules,
                                      RuleVariant variant) {
  switch (variant) {
  case RuleVariant::FsdpSequence:
    for (LogicalAxisRule &rule : rules.rules)
      if (rule.logicalName == "batch" ||
          rule.logicalName == "activation_batch" ||
          rule.logicalName == "conv_batch")
        llvm::erase(rule.meshAxes, "fsdp");
    putFirst(rules, "activation_length", "fsdp", /*newRuleFirst=*/true);
    break;
  case RuleVariant::ContextEmbed:
    putFirst(rules, "embed", "context", /*newRuleFirst=*/false);
    break;
  }
  rules.name += "+" + std::string(ruleVariantName(variant));
  return rules;
}

absl::StatusOr<LogicalAxisRules> sd::loadRules(std::string_view presetOrPath) {
  // Variants from the end: "dit+fsdp-seq+ctx-embed".
  for (RuleVariant variant :
       {RuleVariant::FsdpSequence, RuleVariant::ContextEmbed}) {
    std::string suffix = "+" + std::string(ruleVariantName(variant));
    if (presetOrPath.size() > suffix.size() &&
        presetOrPath.substr(presetOrPath.size() - suffix.size()) == suffix) {
      absl::StatusOr<LogicalAxisRules> base = loadRules(
          presetOrPath.substr(0, presetOrPath.size() - suffix.size()));
      if (!base.ok())
        return base.status();
      return applyRuleVariant(*std::move(base), variant);
    }
  }
  for (const std::string &preset : presetRuleNames())
    if (preset == presetOrPath)
      return presetRules(preset);
  absl::StatusOr<std::string> text = readYamlFile(presetOrPath, "rules file");
  if (!text.ok()) {
    // "dti" is more likely a misspelt preset than a missing file.
    if (absl::IsNotFound(text.status()) && looksLikePresetName(presetOrPath))
      return absl::InvalidArgumentError(absl::StrFormat(
          "unknown logical axis rules preset \"%s\"; expected one of %s, or "
          "the path of a rules file",
          presetOrPath, absl::StrJoin(presetRuleNames(), ", ")));
    return absl::InvalidArgumentError(text.status().message());
  }
  return parseRulesYaml(*text, presetOrPath);
}
