//===- ConfigMappings.cpp - Config keys whose values are mappings --------===//
//
// ConfigReader's readers of MaxDiffusion's `timestep_bias` and `lora_config`
// mappings: each field checked as it is read, an unknown field an error
// naming the fields there are.
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "YamlValues.h"

#include "absl/strings/str_format.h"

using namespace sd;
using namespace sd::detail;

absl::StatusOr<TimestepBiasConfig>
ConfigReader::readTimestepBias(std::string_view key, yaml::Node *node) {
  TimestepBiasConfig bias;
  if (isNull(node))
    return bias;
  auto *map = llvm::dyn_cast<yaml::MappingNode>(node);
  if (!map)
    return error(node, key, "expected a mapping, got " + describe(node));
  for (yaml::KeyValueNode &entry : *map) {
    yaml::Node *fieldNode = entry.getKey();
    std::string field = scalarText(fieldNode).value_or("");
    yaml::Node *value = entry.getValue();
    if (absl::Status s = pending(); !s.ok())
      return s;
    std::string fieldKey = absl::StrFormat("%s: %s", key, field);
    // A number the requirement `valid` (quoted as `text`) accepts.
    auto number = [&](auto &into, auto valid,
                      std::string_view text) -> absl::Status {
      using T = typename std::decay_t<decltype(into)>::value_type;
      absl::StatusOr<T> read = readNumeric<T>(fieldKey, value);
      if (!read.ok())
        return read.status();
      if (!valid(double(*read)))
        return error(value, fieldKey,
                     describe(value) + " " + std::string(text));
      into = *read;
      return absl::OkStatus();
    };
    absl::Status status;
    if (field == "strategy") {
      absl::StatusOr<std::string> strategy = readString(fieldKey, value);
      if (!strategy.ok())
        return strategy.status();
      if (*strategy != "none" && *strategy != "earlier" &&
          *strategy != "later" && *strategy != "range")
        return error(value, fieldKey,
                     "unknown strategy " + describe(value) +
                         "; expected one of none, earlier, later, range");
      bias.strategy = *strategy;
    } else if (field == "multiplier") {
      status = number(
          bias.multiplier, [](double v) { return v > 0; }, "must be positive");
    } else if (field == "portion") {
      status = number(
          bias.portion, [](double v) { return v > 0 && v <= 1; },
          "must be in (0, 1]");
    } else if (field == "begin" || field == "end") {
      status = number(
          field == "begin" ? bias.begin : bias.end,
          [](double v) { return v >= 0 && v <= 1000; }, "must be in [0, 1000]");
    } else {
      return error(fieldNode, key,
                   absl::StrFormat("unknown field %s; expected strategy, "
                                   "multiplier, begin, end or portion",
                                   describe(fieldNode)));
    }
    if (!status.ok())
      return status;
  }
  if (absl::Status s = pending(); !s.ok())
    return s;
  return bias;
}

absl::StatusOr<LoraConfig> ConfigReader::readLoraConfig(std::string_view key,
                                                        yaml::Node *node) {
  LoraConfig lora;
  if (isNull(node))
    return lora;
  auto *map = llvm::dyn_cast<yaml::MappingNode>(node);
  if (!map)
    return error(node, key, "expected a mapping, got " + describe(node));
  // A number, or MaxDiffusion's list of one per adapter.
  auto readOne = [&](const std::string &fieldKey, yaml::Node *value,
                     auto read) -> absl::Status {
    if (auto *list = llvm::dyn_cast<yaml::SequenceNode>(value)) {
      int count = 0;
      for (yaml::Node &item : *list) {
        if (++count > 1)
          return error(value, fieldKey,
                       "trains one adapter: give one value, not " +
                           describe(value));
        if (absl::Status s = read(&item); !s.ok())
          return s;
      }
      if (count == 0)
        return error(value, fieldKey, "is an empty list");
      return absl::OkStatus();
    }
    return read(value);
  };
  for (yaml::KeyValueNode &entry : *map) {
    yaml::Node *fieldNode = entry.getKey();
    std::optional<std::string> field = scalarText(fieldNode);
    yaml::Node *value = entry.getValue();
    if (absl::Status s = pending(); !s.ok())
      return s;
    std::string fieldKey = absl::StrFormat("%s: %s", key, field.value_or(""));
    if (field && *field == "rank") {
      absl::Status s = readOne(fieldKey, value, [&](yaml::Node *item) {
        absl::StatusOr<int64_t> rank = readInteger(fieldKey, item);
        if (!rank.ok())
          return rank.status();
        if (*rank < 1)
          return error(item, fieldKey, describe(item) + " must be at least 1");
        lora.rank = *rank;
        return absl::OkStatus();
      });
      if (!s.ok())
        return s;
    } else if (field && (*field == "lora_alpha" || *field == "alpha")) {
      absl::Status s = readOne(fieldKey, value, [&](yaml::Node *item) {
        absl::StatusOr<double> alpha = readNumeric<double>(fieldKey, item);
        if (!alpha.ok())
          return alpha.status();
        if (!(*alpha > 0))
          return error(item, fieldKey, describe(item) + " must be positive");
        lora.alpha = *alpha;
        return absl::OkStatus();
      });
      if (!s.ok())
        return s;
    } else if (field && *field == "target_modules") {
      // PEFT: a list of names, or a string that is a regular expression.
      if (std::optional<std::string> regex = scalarText(value);
          regex && !isNull(value)) {
        lora.targetRegex = *regex;
      } else {
        absl::StatusOr<std::vector<std::string>> names =
            readNames(fieldKey, value);
        if (!names.ok())
          return names.status();
        if (names->empty())
          return error(value, fieldKey, "names no module");
        lora.targetModules = *std::move(names);
      }
    } else if (field && *field == "lora_model_name_or_path") {
      absl::StatusOr<std::vector<std::string>> names =
          readNames(fieldKey, value);
      if (!names.ok())
        return names.status();
      lora.load = *std::move(names);
    } else if (!field || (*field != "weight_name" && *field != "adapter_name" &&
                          *field != "scale" && *field != "from_pt")) {
      return error(
          fieldNode, key,
          absl::StrFormat("unknown field %s; expected rank, lora_alpha, "
                          "target_modules, lora_model_name_or_path, "
                          "weight_name, adapter_name, scale or from_pt",
                          describe(fieldNode)));
    }
  }
  if (absl::Status s = pending(); !s.ok())
    return s;
  return lora;
}
