//===- RunConfig.cpp - MaxDiffusion-style run configs ---------------------===//
//
// Reads MaxDiffusion config files and command-line overrides with
// llvm::yaml, flash_block_sizes JSON strings with llvm::json, and the
// logical axis rules with sd::parseRulesYaml; checks each key against the
// catalogue of ConfigKeys.cpp.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/RunConfig.h"
#include "ConfigKeys.h"
#include "ConfigReader.h"
#include "YamlValues.h"
#include "sd/Config/Settings.h"
#include "sd/Sharding/YamlDiagnostics.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <algorithm>
#include <cmath>

using namespace sd;
using namespace sd::detail;
namespace yaml = llvm::yaml;

//===----------------------------------------------------------------------===//
// FlashBlockSizes
//===----------------------------------------------------------------------===//

namespace {

/// The integer fields of flash_block_sizes, in MaxDiffusion's order.
struct FlashField {
  std::string_view name;
  int64_t FlashBlockSizes::*member;
};
constexpr FlashField kFlashFields[] = {
    {"block_q", &FlashBlockSizes::blockQ},
    {"block_kv_compute", &FlashBlockSizes::blockKvCompute},
    {"block_kv", &FlashBlockSizes::blockKv},
    {"block_q_dkv", &FlashBlockSizes::blockQDkv},
    {"block_kv_dkv", &FlashBlockSizes::blockKvDkv},
    {"block_kv_dkv_compute", &FlashBlockSizes::blockKvDkvCompute},
    {"block_q_dq", &FlashBlockSizes::blockQDq},
    {"block_kv_dq", &FlashBlockSizes::blockKvDq}};
constexpr std::string_view kFusedField = "use_fused_bwd_kernel";

/// The fields a flash_block_sizes value gave, before defaults.
struct GivenFlashSizes {
  std::optional<int64_t> sizes[std::size(kFlashFields)];
  std::optional<bool> fused;

  /// MaxDiffusion's defaults: 512 forward, backward sizes follow forward.
  FlashBlockSizes resolve() const {
    auto get = [&](size_t i, int64_t fallback) {
      return sizes[i].value_or(fallback);
    };
    FlashBlockSizes result;
    result.blockQ = get(0, 512);
    result.blockKvCompute = get(1, 512);
    result.blockKv = get(2, 512);
    result.blockQDkv = get(3, result.blockQ);
    result.blockKvDkv = get(4, result.blockKv);
    result.blockKvDkvCompute = get(5, result.blockKvCompute);
    result.blockQDq = get(6, result.blockQ);
    result.blockKvDq = get(7, result.blockKv);
    result.useFusedBwdKernel = fused.value_or(false);
    return result;
  }
};

/// "a, b, c". Debian's absl::string_view is not std::string_view, so
/// absl::StrJoin cannot take std::string_view ranges.
template <typename Range> std::string joinNames(const Range &names) {
  std::string result;
  for (std::string_view name : names)
    result.append(result.empty() ? "" : ", ").append(name);
  return result;
}

std::string flashFieldList() {
  std::vector<std::string_view> names;
  for (const FlashField &field : kFlashFields)
    names.push_back(field.name);
  names.push_back(kFusedField);
  return joinNames(names);
}

} // namespace

std::string FlashBlockSizes::toString() const {
  std::vector<std::string> parts;
  for (const FlashField &field : kFlashFields)
    parts.push_back(
        absl::StrFormat("\"%s\": %d", field.name, this->*field.member));
  parts.push_back(absl::StrFormat("\"%s\": %s", kFusedField,
                                  useFusedBwdKernel ? "true" : "false"));
  return "{" + absl::StrJoin(parts, ", ") + "}";
}

bool FlashBlockSizes::operator==(const FlashBlockSizes &other) const {
  for (const FlashField &field : kFlashFields)
    if (this->*field.member != other.*field.member)
      return false;
  return useFusedBwdKernel == other.useFusedBwdKernel;
}

//===----------------------------------------------------------------------===//
// RunConfig
//===----------------------------------------------------------------------===//

namespace {

constexpr std::string_view kCommandLine = "command line";

std::string meshKey(bool dcn, size_t axis) {
  return absl::StrFormat("%s_%s_parallelism", dcn ? "dcn" : "ici",
                         kConfigMeshAxes[axis]);
}

std::string meshString(const std::array<std::optional<int64_t>, 4> &sizes,
                       bool always) {
  if (!always && std::none_of(sizes.begin(), sizes.end(),
                              [](const auto &s) { return s.has_value(); }))
    return "";
  std::vector<std::string> parts;
  for (size_t i = 0; i < sizes.size(); ++i)
    parts.push_back(
        absl::StrFormat("%s:%d", kConfigMeshAxes[i], sizes[i].value_or(1)));
  return absl::StrJoin(parts, ",");
}

} // namespace

std::string RunConfig::iciMeshString() const { return meshString(ici, false); }

std::string RunConfig::dcnMeshString() const { return meshString(dcn, false); }

absl::StatusOr<MeshSpec> RunConfig::buildMesh(const MeshOptions &opts) const {
  // MaxDiffusion always builds all four axes; unset ones have size 1.
  return parseMesh(meshString(ici, true), dcnMeshString(), opts);
}

std::string RunConfig::originOf(std::string_view key) const {
  auto it = origins.find(key);
  return it == origins.end() ? "" : it->second;
}

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

namespace {

/// The rules key: read from the file's text by parseRulesYaml.
bool isRulesKey(std::string_view key) {
  const SettingRow *row = findKeyRow(key);
  return row &&
         std::holds_alternative<std::optional<LogicalAxisRules> RunConfig::*>(
             row->keyField);
}

/// The keys sd reads, from the settings table.
const std::vector<std::string> &sdKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> result;
    for (const SettingRow &row : settingRows())
      if (row.hasKey())
        result.emplace_back(row.key);
    return result;
  }();
  return keys;
}

/// `unknown key 'K'; did you mean 'N'?`, or without a near key why it is
/// unknown.
std::string unknownKeyMessage(std::string_view key) {
  std::string nearest = nearestConfigKey(key);
  if (!nearest.empty())
    return absl::StrFormat("unknown key '%s'; did you mean '%s'?", key,
                           nearest);
  return absl::StrFormat(
      "unknown key '%s': neither sd nor MaxDiffusion's configs have it", key);
}

} // namespace

template <typename T>
absl::StatusOr<T> ConfigReader::readNumeric(std::string_view key,
                                            yaml::Node *node) {
  using Kind = NumericKind<T>;
  if (std::optional<std::string> plain = plainText(node)) {
    if (std::optional<T> value = Kind::parse(*plain))
      return *value;
    return error(node, key,
                 absl::StrFormat("%s is not %s", describe(node), Kind::noun));
  }
  if (scalarText(node))
    return error(node, key,
                 absl::StrFormat("%s is a string; write %s without quotes",
                                 describe(node), Kind::plural));
  return error(
      node, key,
      absl::StrFormat("expected %s, got %s", Kind::noun, describe(node)));
}
// The mapping readers (ConfigMappings.cpp) read numbers too.
template absl::StatusOr<double>
ConfigReader::readNumeric<double>(std::string_view, yaml::Node *);
template absl::StatusOr<int64_t>
ConfigReader::readNumeric<int64_t>(std::string_view, yaml::Node *);

absl::StatusOr<bool> ConfigReader::readBool(std::string_view key,
                                            yaml::Node *node) {
  if (std::optional<std::string> plain = plainText(node))
    if (std::optional<bool> value = parseBool(*plain))
      return *value;
  return error(node, key, describe(node) + " is not a boolean (true or false)");
}

absl::StatusOr<std::string> ConfigReader::readString(std::string_view key,
                                                     yaml::Node *node) {
  // PyYAML reads an empty value as None; for a name or path that is "".
  if (isNull(node))
    return std::string();
  if (std::optional<std::string> value = scalarText(node))
    return *value;
  return error(node, key, "expected a string, got " + describe(node));
}

absl::StatusOr<std::vector<std::string>>
ConfigReader::readNames(std::string_view key, yaml::Node *node) {
  std::vector<std::string> names;
  if (isNull(node))
    return names;
  if (auto *list = llvm::dyn_cast<yaml::SequenceNode>(node)) {
    for (yaml::Node &item : *list) {
      std::optional<std::string> name = scalarText(&item);
      if (!name || name->empty())
        return error(&item, key,
                     "expected a name, got " +
                         (name ? std::string("''") : describe(&item)));
      names.push_back(*name);
    }
    if (absl::Status s = pending(); !s.ok())
      return s;
    return names;
  }
  // "attn_output,query_proj" (the command-line spelling).
  if (std::optional<std::string> value = scalarText(node)) {
    for (absl::string_view part : absl::StrSplit(*value, ','))
      if (absl::string_view name = absl::StripAsciiWhitespace(part);
          !name.empty())
        names.emplace_back(name.data(), name.size());
    return names;
  }
  return error(node, key,
               "expected a list of names or a comma-separated string, got " +
                   describe(node));
}

absl::StatusOr<FlashBlockSizes>
ConfigReader::readFlashJson(std::string_view key, yaml::Node *node,
                            const std::string &json) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed)
    return error(node, key,
                 absl::StrFormat("invalid JSON: %s",
                                 llvm::toString(parsed.takeError())));
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return error(node, key, "expected a JSON object of block sizes");
  // json::Object is a hash map; sort so the first error is deterministic.
  std::vector<std::string> fields;
  for (const auto &entry : *object)
    fields.push_back(entry.first.str());
  std::sort(fields.begin(), fields.end());
  GivenFlashSizes given;
  for (const std::string &field : fields) {
    const llvm::json::Value &value = *object->get(field);
    if (field == kFusedField) {
      std::optional<bool> fused = value.getAsBoolean();
      if (!fused)
        return error(node, key,
                     absl::StrFormat("%s must be true or false", kFusedField));
      given.fused = *fused;
      continue;
    }
    auto it =
        std::find_if(std::begin(kFlashFields), std::end(kFlashFields),
                     [&](const FlashField &f) { return f.name == field; });
    if (it == std::end(kFlashFields))
      return error(node, key,
                   absl::StrFormat("unknown field '%s'; expected one of %s",
                                   field, flashFieldList()));
    std::optional<int64_t> size = value.getAsInteger();
    if (!size || *size <= 0)
      return error(node, key,
                   absl::StrFormat("%s must be a positive integer", field));
    given.sizes[it - std::begin(kFlashFields)] = *size;
  }
  return given.resolve();
}

absl::StatusOr<FlashBlockSizes>
ConfigReader::readFlashSizes(std::string_view key, yaml::Node *node) {
  // '{"block_q": 1024}' as MaxDiffusion's command line passes it.
  if (std::optional<std::string> json = scalarText(node))
    return readFlashJson(key, node, *json);
  // A value the parser could not read (a stray directive) is null here.
  auto *map = llvm::dyn_cast_or_null<yaml::MappingNode>(node);
  if (!map)
    return error(node, key,
                 "expected a mapping or a JSON string of block sizes, got " +
                     describe(node));
  GivenFlashSizes given;
  for (yaml::KeyValueNode &entry : *map) {
    yaml::Node *fieldNode = entry.getKey();
    std::optional<std::string> field = scalarText(fieldNode);
    yaml::Node *value = entry.getValue();
    if (absl::Status s = pending(); !s.ok())
      return s;
    if (field && *field == kFusedField) {
      absl::StatusOr<bool> fused =
          readBool(absl::StrFormat("%s: %s", key, kFusedField), value);
      if (!fused.ok())
        return fused.status();
      given.fused = *fused;
      continue;
    }
    auto it = std::find_if(
        std::begin(kFlashFields), std::end(kFlashFields),
        [&](const FlashField &f) { return field && f.name == *field; });
    if (it == std::end(kFlashFields))
      return error(fieldNode, key,
                   absl::StrFormat("unknown field %s; expected one of %s",
                                   describe(fieldNode), flashFieldList()));
    std::string fieldKey = absl::StrFormat("%s: %s", key, it->name);
    absl::StatusOr<int64_t> size = readInteger(fieldKey, value);
    if (!size.ok())
      return size.status();
    if (*size <= 0)
      return error(value, fieldKey, describe(value) + " must be positive");
    given.sizes[it - std::begin(kFlashFields)] = *size;
  }
  if (absl::Status s = pending(); !s.ok())
    return s;
  return given.resolve();
}

absl::StatusOr<ModelKeyValue> ConfigReader::readModelKey(const ModelKey &model,
                                                         yaml::Node *node) {
  std::string_view key = model.name;
  ModelKeyValue result;
  switch (model.kind) {
  case ModelKeyKind::Name: {
    absl::StatusOr<std::string> name = readString(key, node);
    if (!name.ok())
      return name.status();
    result.active = !name->empty();
    result.shown = describe(node);
    return result;
  }
  case ModelKeyKind::Flag: {
    absl::StatusOr<bool> flag = readBool(key, node);
    if (!flag.ok())
      return flag.status();
    result.active = *flag;
    result.shown = *flag ? "True" : "False";
    return result;
  }
  }
  return result;
}

absl::Status ConfigReader::readRules(std::string_view rulesKey,
                                     std::string_view rulesText,
                                     std::string_view where) {
  absl::StatusOr<LogicalAxisRules> rules = parseRulesYaml(rulesText, label);
  if (!rules.ok()) {
    if (withLines)
      return rules.status();
    // The override text is one line; "command line:1:" would mislead.
    std::string message(rules.status().message());
    std::string prefix = label + ":1: ";
    if (message.rfind(prefix, 0) == 0)
      message = label + ": " + message.substr(prefix.size());
    return absl::InvalidArgumentError(message);
  }
  config.rules = *std::move(rules);
  config.origins[std::string(rulesKey)] = std::string(where);
  return absl::OkStatus();
}

absl::Status ConfigReader::checkNumber(const SettingRow &row, double number,
                                       yaml::Node *value) const {
  std::string_view requirement = row.keyRequirement(number);
  if (requirement.empty())
    return absl::OkStatus();
  return error(value, row.key,
               absl::StrFormat("%s %s", describe(value), requirement));
}

template <typename T>
absl::Status ConfigReader::store(const SettingRow &row,
                                 std::optional<T> RunConfig::*field,
                                 yaml::Node *value) {
  std::string_view key = row.key;
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                std::is_same_v<T, uint64_t>) {
    // The seed is read as an integer, which its requirement keeps >= 0.
    using Read = std::conditional_t<std::is_same_v<T, double>, double, int64_t>;
    absl::StatusOr<Read> number = readNumeric<Read>(key, value);
    if (!number.ok())
      return number.status();
    if (absl::Status s = checkNumber(row, double(*number), value); !s.ok())
      return s;
    config.*field = static_cast<T>(*number);
  } else if constexpr (std::is_same_v<T, bool>) {
    absl::StatusOr<bool> flag = readBool(key, value);
    if (!flag.ok())
      return flag.status();
    config.*field = *flag;
  } else if constexpr (std::is_same_v<T, std::string>) {
    absl::StatusOr<std::string> string = readString(key, value);
    if (!string.ok())
      return string.status();
    if (!row.choices.empty() &&
        llvm::find(row.choices, *string) == row.choices.end())
      return error(value, key,
                   absl::StrFormat("unknown %s %s; expected one of %s",
                                   row.choiceNoun, describe(value),
                                   joinNames(row.choices)));
    config.*field = *std::move(string);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    absl::StatusOr<std::vector<std::string>> names = readNames(key, value);
    if (!names.ok())
      return names.status();
    config.*field = *std::move(names);
  } else if constexpr (std::is_same_v<T, LoraConfig>) {
    absl::StatusOr<LoraConfig> lora = readLoraConfig(key, value);
    if (!lora.ok())
      return lora.status();
    config.*field = *std::move(lora);
  } else if constexpr (std::is_same_v<T, TimestepBiasConfig>) {
    absl::StatusOr<TimestepBiasConfig> bias = readTimestepBias(key, value);
    if (!bias.ok())
      return bias.status();
    config.*field = *std::move(bias);
  } else if constexpr (std::is_same_v<T, FlashBlockSizes>) {
    absl::StatusOr<FlashBlockSizes> sizes = readFlashSizes(key, value);
    if (!sizes.ok())
      return sizes.status();
    config.*field = *sizes;
  } else {
    // logical_axis_rules is read from the text (readRules).
    static_assert(std::is_same_v<T, LogicalAxisRules>);
    return error(value, key, "is read from the config's text");
  }
  return absl::OkStatus();
}

absl::Status ConfigReader::store(const SettingRow &row, MeshAxisField field,
                                 yaml::Node *value) {
  absl::StatusOr<int64_t> size = readInteger(row.key, value);
  if (!size.ok())
    return size.status();
  if (absl::Status s = checkNumber(row, double(*size), value); !s.ok())
    return s;
  (field.dcn ? config.dcn : config.ici)[field.axis] = *size;
  return absl::OkStatus();
}

absl::Status ConfigReader::store(const SettingRow &row, std::monostate,
                                 yaml::Node *value) {
  return error(value, row.key, "is not a config key");
}

absl::Status ConfigReader::setValue(std::string_view key, yaml::Node *value,
                                    bool &known) {
  std::string origin = where(value);
  if (const SettingRow *row = findKeyRow(key)) {
    known = true;
    absl::Status status = std::visit(
        [&](auto field) { return store(*row, field, value); }, row->keyField);
    if (status.ok())
      config.origins[std::string(key)] = origin;
    return status;
  }
  known = false;
  if (const ModelKey *model = findModelKey(key)) {
    absl::StatusOr<ModelKeyValue> read = readModelKey(*model, value);
    if (!read.ok())
      return read.status();
    auto &modelKeys = config.modelKeys;
    auto it =
        std::find_if(modelKeys.begin(), modelKeys.end(),
                     [&](const auto &entry) { return entry.first == key; });
    if (it == modelKeys.end())
      modelKeys.emplace_back(std::string(key), *std::move(read));
    else
      it->second = *std::move(read);
  }
  // The warning about keys sd does not use names where each came from.
  config.origins[std::string(key)] = origin;
  return absl::OkStatus();
}

absl::Status ConfigReader::readFile() {
  if (absl::Status s = checkYamlStructure(text, label, withLines); !s.ok())
    return s;
  yaml::Stream stream(llvm::MemoryBufferRef(llvm::StringRef(text), label),
                      sourceMgr);
  auto offsetOf = [&](const yaml::Node *node) -> size_t {
    return node->getSourceRange().Start.getPointer() - text.data();
  };
  auto addIgnored = [&](const std::string &key) {
    if (std::find(config.ignoredKeys.begin(), config.ignoredKeys.end(), key) ==
        config.ignoredKeys.end())
      config.ignoredKeys.push_back(key);
  };

  int documents = 0;
  for (yaml::Document &doc : stream) {
    yaml::Node *root = doc.getRoot();
    if (absl::Status s = pending(); !s.ok())
      return s;
    if (!root || llvm::isa<yaml::NullNode>(root))
      continue; // Only comments: no keys at all.
    if (++documents > 1)
      return error(root, "", "expected one YAML document, found several");
    auto *map = llvm::dyn_cast<yaml::MappingNode>(root);
    if (!map)
      return error(root, "",
                   "expected a mapping of config keys at the top "
                   "level");
    // MappingNode does not say its style, and its range starts after a
    // flow mapping's '{'; look back for one.
    size_t start = offsetOf(map);
    size_t before =
        start == 0 ? text.npos : text.find_last_not_of(" \t\r\n", start - 1);
    bool flowRoot = before != text.npos && text[before] == '{';

    // logical_axis_rules goes to parseRulesYaml as the text from its key to
    // the next key, padded so that line numbers stay those of the file.
    // Taking one entry (rather than the whole file) makes the last of
    // duplicate keys win, as for every other key.
    const yaml::Node *rulesKey = nullptr;
    std::string rulesName;
    auto flushRules = [&](size_t end) -> absl::Status {
      if (!rulesKey)
        return absl::OkStatus();
      std::string origin = where(rulesKey);
      if (flowRoot) {
        rulesKey = nullptr;
        return readRules(rulesName, text, origin);
      }
      size_t begin = offsetOf(rulesKey);
      auto [line, column] =
          sourceMgr.getLineAndColumn(rulesKey->getSourceRange().Start);
      std::string entry(line - 1, '\n');
      entry.append(column - 1, ' ');
      entry.append(text, begin, end - begin);
      rulesKey = nullptr;
      return readRules(rulesName, entry, origin);
    };

    for (yaml::KeyValueNode &entry : *map) {
      yaml::Node *keyNode = entry.getKey();
      if (absl::Status s = pending(); !s.ok())
        return s;
      // The parser gives no node for a key it could not read (an explicit
      // `?` with nothing after it, at the end of the text).
      if (!keyNode)
        return error(&entry, "", "expected a config key");
      if (absl::Status s = flushRules(offsetOf(keyNode)); !s.ok())
        return s;
      std::optional<std::string> key = scalarText(keyNode);
      if (!key || key->empty())
        return error(keyNode, "",
                     "expected a config key, got " + describe(keyNode));
      if (!isConfigKey(*key))
        return error(keyNode, "", unknownKeyMessage(*key));
      if (isRulesKey(*key)) {
        rulesKey = keyNode; // The iterator skips the value.
        rulesName = *key;
        continue;
      }
      yaml::Node *value = entry.getValue();
      if (absl::Status s = pending(); !s.ok())
        return s;
      bool known = false;
      currentKey = keyNode;
      absl::Status status = setValue(*key, value, known);
      currentKey = nullptr;
      if (!status.ok())
        return status;
      if (absl::Status s = pending(); !s.ok())
        return s;
      if (!known)
        addIgnored(*key);
    }
    if (absl::Status s = pending(); !s.ok())
      return s;
    if (absl::Status s = flushRules(text.size()); !s.ok())
      return s;
  }
  return pending();
}

absl::Status ConfigReader::readOverride(std::string_view key) {
  // MaxDiffusion refuses a key its config does not have; sd refuses one
  // that no config has.
  if (!isConfigKey(key))
    return error(nullptr, "", unknownKeyMessage(key));
  if (isRulesKey(key))
    return readRules(key, absl::StrFormat("%s: %s", key, text), label);
  if (absl::Status s = checkYamlStructure(text, label, withLines); !s.ok())
    return s;
  yaml::Stream stream(llvm::MemoryBufferRef(llvm::StringRef(text), label),
                      sourceMgr);
  // An empty value is one document whose root is null, as in PyYAML.
  bool known = false;
  for (yaml::Document &doc : stream) {
    yaml::Node *value = doc.getRoot();
    if (absl::Status s = pending(); !s.ok())
      return s;
    if (absl::Status s = setValue(key, value, known); !s.ok())
      return s;
    // Visit the rest so that a syntax error anywhere is reported.
    doc.skip();
    if (absl::Status s = pending(); !s.ok())
      return s;
    break;
  }
  if (!known && std::find(config.ignoredKeys.begin(), config.ignoredKeys.end(),
                          key) == config.ignoredKeys.end())
    config.ignoredKeys.emplace_back(key);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

namespace {

/// At most one ICI and one DCN axis set to -1.
absl::Status verifyMeshFill(const RunConfig &config) {
  for (bool dcn : {false, true}) {
    const auto &sizes = dcn ? config.dcn : config.ici;
    std::optional<size_t> fill;
    for (size_t axis = 0; axis < sizes.size(); ++axis) {
      if (sizes[axis] != -1)
        continue;
      if (!fill) {
        fill = axis;
        continue;
      }
      std::string key = meshKey(dcn, axis);
      std::string other = meshKey(dcn, *fill);
      std::string origin = config.originOf(key);
      std::string otherOrigin = config.originOf(other);
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s%s: only one %s axis may be -1, but %s is -1 too%s",
          origin.empty() ? "" : origin + ": ", key, dcn ? "DCN" : "ICI", other,
          otherOrigin.empty() ? "" : " (" + otherOrigin + ")"));
    }
  }
  return absl::OkStatus();
}

} // namespace

const std::vector<std::string> &sd::detail::sdConfigKeys() { return sdKeys(); }

absl::Status sd::verifyRunConfig(const RunConfig &config) {
  if (absl::Status s = verifyMeshFill(config); !s.ok())
    return s;
  return verifyModelKeys(config);
}

absl::StatusOr<RunConfig> sd::parseRunConfig(std::string_view yamlText,
                                             std::string_view fileName) {
  RunConfig config;
  config.fileName = std::string(fileName);
  if (absl::Status s =
          ConfigReader(yamlText, fileName, /*withLines=*/true, config)
              .readFile();
      !s.ok())
    return s;
  // The keys that ask for what sd cannot do wait for the overrides.
  if (absl::Status s = verifyMeshFill(config); !s.ok())
    return s;
  return config;
}

absl::StatusOr<RunConfig> sd::loadRunConfig(std::string_view path) {
  absl::StatusOr<std::string> text = readYamlFile(path, "config file");
  if (!text.ok())
    return text.status();
  return parseRunConfig(*text, path);
}

absl::Status sd::applyOverride(RunConfig &config,
                               std::string_view keyEqualsValue) {
  size_t eq = keyEqualsValue.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: override '%s' is not key=value", kCommandLine, keyEqualsValue));
  std::string_view key = keyEqualsValue.substr(0, eq);
  std::string_view value = keyEqualsValue.substr(eq + 1);
  return ConfigReader(value, kCommandLine, /*withLines=*/false, config)
      .readOverride(key);
}

absl::Status sd::applyOverrides(RunConfig &config,
                                const std::vector<std::string> &overrides) {
  for (const std::string &item : overrides)
    if (absl::Status s = applyOverride(config, item); !s.ok())
      return s;
  return verifyRunConfig(config);
}
