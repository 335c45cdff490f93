//===- Network.cpp - What the mesh's links cost ---------------------------===//

#include "sd/Sharding/Network.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cmath>
#include <optional>
#include <string>
#include <utility>

using namespace sd;

namespace {

/// `text` as a positive finite number followed by one of `units` (suffix,
/// factor; "" for a plain number), or nullopt.
std::optional<double>
parseWithUnit(std::string_view text,
              std::initializer_list<std::pair<std::string_view, double>> units) {
  for (auto [suffix, factor] : units) {
    // The longest suffixes come first, so "" is tried last.
    if (text.size() < suffix.size() ||
        text.substr(text.size() - suffix.size()) != suffix)
      continue;
    std::string_view number = text.substr(0, text.size() - suffix.size());
    while (!number.empty() && number.back() == ' ')
      number.remove_suffix(1);
    double value = 0;
    if (number.empty() || !absl::SimpleAtod(std::string(number), &value) ||
        !std::isfinite(value) || value < 0)
      return std::nullopt;
    return value * factor;
  }
  return std::nullopt;
}

} // namespace

absl::StatusOr<double> sd::parseBandwidth(std::string_view text,
                                          std::string_view flag) {
  std::optional<double> value =
      parseWithUnit(text, {{"GB/s", 1e9},
                           {"Gb/s", 1e9 / 8},
                           {"MB/s", 1e6},
                           {"Mb/s", 1e6 / 8},
                           {"", 1e9}});
  if (!value || !(*value > 0))
    return absl::InvalidArgumentError(absl::StrCat(
        "--", std::string(flag), "='", std::string(text),
        "' is not a bandwidth above zero (e.g. 100GB/s, 25Gb/s, 800MB/s; a "
        "plain number is GB/s)"));
  return *value;
}

absl::StatusOr<double> sd::parseLatency(std::string_view text,
                                        std::string_view flag) {
  std::optional<double> value = parseWithUnit(
      text, {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"", 1e-6}});
  if (!value)
    return absl::InvalidArgumentError(absl::StrCat(
        "--", std::string(flag), "='", std::string(text),
        "' is not a latency (e.g. 25us, 1.5ms, 800ns; a plain number is "
        "microseconds)"));
  return *value;
}

std::string sd::formatBandwidth(double bytesPerSecond) {
  if (bytesPerSecond >= 1e9)
    return absl::StrFormat("%.1f GB/s", bytesPerSecond / 1e9);
  return absl::StrFormat("%.1f MB/s", bytesPerSecond / 1e6);
}

std::string sd::formatSeconds(double seconds) {
  if (seconds < 1e-3)
    return absl::StrFormat("%.1f µs", seconds * 1e6);
  if (seconds < 1)
    return absl::StrFormat("%.2f ms", seconds * 1e3);
  return absl::StrFormat("%.2f s", seconds);
}

const char *sd::linkName(Link link) {
  switch (link) {
  case Link::None:
    return "-";
  case Link::Ici:
    return "ICI";
  case Link::Dcn:
    return "DCN";
  case Link::IciAndDcn:
    return "ICI+DCN";
  }
  return "?";
}

GroupShape sd::groupShape(const MeshSpec &mesh, const std::vector<int> &axes) {
  GroupShape shape;
  for (int axis : axes) {
    if (axis < 0 || axis >= static_cast<int>(mesh.axes().size()))
      continue;
    shape.size *= mesh.axes()[axis].size();
    shape.perProcess *= mesh.axes()[axis].ici;
  }
  bool ici = shape.perProcess > 1;
  bool dcn = shape.size > shape.perProcess;
  shape.link = ici && dcn ? Link::IciAndDcn
               : dcn      ? Link::Dcn
               : ici      ? Link::Ici
                          : Link::None;
  return shape;
}

int64_t sd::ringSteps(std::string_view kind, int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  if (kind == "all_reduce")
    return 2 * (groupSize - 1);
  if (kind == "all_gather" || kind == "reduce_scatter" || kind == "all_to_all")
    return groupSize - 1;
  if (kind == "collective_permute")
    return 1;
  return 0;
}

double sd::predictCollectiveSeconds(const MeshSpec &mesh,
                                    const std::vector<int> &axes,
                                    std::string_view kind, int64_t count,
                                    int64_t bytesPerDevice,
                                    const NetworkModel &network) {
  GroupShape group = groupShape(mesh, axes);
  if (group.size <= 1)
    return 0;
  double bytes = static_cast<double>(bytesPerDevice);
  double others = static_cast<double>(group.size - 1);
  double iciBytes = bytes * static_cast<double>(group.perProcess - 1) / others;
  double dcnBytes = bytes * static_cast<double>(group.size - group.perProcess) /
                    others;
  double seconds = iciBytes / network.iciBandwidth +
                   static_cast<double>(mesh.devicesPerProcess()) * dcnBytes /
                       network.dcnBandwidth;
  double latency = group.size > group.perProcess ? network.dcnLatency
                                                 : network.iciLatency;
  return seconds + static_cast<double>(count * ringSteps(kind, group.size)) *
                       latency;
}
