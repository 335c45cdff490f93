//===- FlagChecks.cpp - A flag's value against its setting's row ---------===//
//
// checkFlagValues (sd/Config/Settings.h): every numeric flag given is
// checked against its row's requirement and limit, with the flag's name in
// the message.
//
//===----------------------------------------------------------------------===//

#include "sd/Config/Settings.h"

#include "absl/strings/str_format.h"

#include <cmath>
#include <type_traits>

using namespace sd;

namespace {

/// "--adam-b1 must be in [0, 1), not 5".
absl::Status flagError(const SettingRow &row, std::string_view requirement,
                       const std::string &value) {
  return absl::InvalidArgumentError(
      absl::StrFormat("--%s %s, not %s", row.flag, requirement, value));
}

/// Checks a numeric flag's value against its row.
template <typename T> absl::Status checkFlag(const SettingRow &row, T value) {
  auto shown = [&] {
    if constexpr (std::is_floating_point_v<T>)
      return absl::StrFormat("%g", value);
    else
      return std::to_string(value);
  };
  if constexpr (std::is_floating_point_v<T>)
    if (row.hasKey() && !std::isfinite(value))
      return flagError(row, "must be a finite number", shown());
  if (std::string_view requirement = row.flagRequirement(double(value));
      !requirement.empty())
    return flagError(row, requirement, shown());
  if (row.flagMax > 0 && double(value) > double(row.flagMax))
    return flagError(row, absl::StrFormat("must be at most %d", row.flagMax),
                     shown());
  return absl::OkStatus();
}

} // namespace

absl::Status sd::checkFlagValues(const RunSpecFlags &flags) {
  for (const SettingRow &row : settingRows()) {
    absl::Status status = std::visit(
        [&](auto field) -> absl::Status {
          using Field = decltype(field);
          if constexpr (std::is_same_v<Field, std::monostate>) {
            return absl::OkStatus();
          } else {
            using Value =
                typename std::decay_t<decltype(flags.*field)>::value_type;
            if constexpr (std::is_arithmetic_v<Value> &&
                          !std::is_same_v<Value, bool>)
              if (flags.*field)
                return checkFlag(row, *(flags.*field));
            return absl::OkStatus();
          }
        },
        row.flagField);
    if (!status.ok())
      return status;
  }
  return absl::OkStatus();
}
