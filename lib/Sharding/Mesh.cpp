//===- Mesh.cpp - Device mesh specification -------------------------------===//
//
// Parsing of `--mesh` / `--dcn-mesh` and the device numbering of a mesh.
//
//===----------------------------------------------------------------------===//

#include "sd/Sharding/Mesh.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <charconv>
#include <cstddef>

using namespace sd;

namespace {

/// Words that differ between the ICI and the DCN spec in diagnostics, so one
/// parser serves both and the user sees which flag is wrong.
struct SpecWords {
  const char *mesh;  // "mesh" or "dcn mesh"
  const char *level; // "ICI" or "DCN"
};
constexpr SpecWords kIciWords{"mesh", "ICI"};
constexpr SpecWords kDcnWords{"dcn mesh", "DCN"};

// Debian's abseil has its own string_view type, so the helpers below work on
// std::string_view directly instead of going through absl::StrSplit & co.
std::string_view trim(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && absl::ascii_isspace(s.back()))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> splitCommas(std::string_view s) {
  std::vector<std::string_view> parts;
  for (size_t comma; (comma = s.find(',')) != std::string_view::npos;
       s.remove_prefix(comma + 1))
    parts.push_back(s.substr(0, comma));
  parts.push_back(s);
  return parts;
}

bool isIdentifier(std::string_view s) {
  if (s.empty() || !(absl::ascii_isalpha(s[0]) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(absl::ascii_isalnum(c) || c == '_'))
      return false;
  return true;
}

/// Only [-]digits counts as a number; anything else ("4x", "+4", "0x10") is
/// reported as non-numeric instead of being half-parsed.
bool isInteger(std::string_view s) {
  if (!s.empty() && s[0] == '-')
    s.remove_prefix(1);
  if (s.empty())
    return false;
  for (char c : s)
    if (!absl::ascii_isdigit(c))
      return false;
  return true;
}

/// Multiplies with an overflow check; sizes come from the command line, so an
/// absurd value must give an error rather than a wrapped product.
bool checkedMul(int64_t a, int64_t b, int64_t &result) {
  return !__builtin_mul_overflow(a, b, &result);
}

/// One parsed spec (`--mesh` or `--dcn-mesh`): its `axis:size` entries, the
/// index of its -1 entry if any, and the product of its other sizes.
struct Spec {
  struct Entry {
    std::string name;
    int64_t size;
  };
  std::string_view text;
  const SpecWords *words;
  std::vector<Entry> entries;
  std::optional<size_t> fill;
  int64_t known = 1;

  absl::Status tooLarge() const {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s \"%s\" is too large: the product of its sizes "
                        "overflows 64 bits",
                        words->mesh, text));
  }

  /// Fills the -1 so that known * fill * outside == total; `outside` is what
  /// the other spec contributes (1 when filling from the process count).
  absl::Status fillTo(int64_t total, int64_t outside, const char *unit,
                      const char *othersWhat) {
    int64_t others = 0;
    if (!checkedMul(known, outside, others))
      return tooLarge();
    if (total % others != 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot fill %s axis \"%s\": %d %s are not divisible by %d (the "
          "product of the other %s)",
          words->mesh, entries[*fill].name, total, unit, others, othersWhat));
    entries[*fill].size = total / others;
    known *= entries[*fill].size;
    fill.reset();
    return absl::OkStatus();
  }

  std::string toString() const {
    return absl::StrJoin(entries, ",", [](std::string *out, const Entry &e) {
      absl::StrAppend(out, e.name, ":", e.size);
    });
  }
};

absl::Status parseEntry(std::string_view item, Spec &spec) {
  const char *mesh = spec.words->mesh;
  size_t colon = item.find(':');
  if (colon == std::string_view::npos ||
      item.find(':', colon + 1) != std::string_view::npos)
    return absl::InvalidArgumentError(absl::StrFormat(
        "malformed %s entry \"%s\"; expected axis:size", mesh, item));
  std::string_view name = trim(item.substr(0, colon));
  std::string_view size = trim(item.substr(colon + 1));
  if (!isIdentifier(name))
    return absl::InvalidArgumentError(absl::StrFormat(
        "malformed %s axis name \"%s\" in entry \"%s\"; expected an "
        "identifier ([A-Za-z_][A-Za-z0-9_]*)",
        mesh, name, item));
  if (!isInteger(size))
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s axis \"%s\" has non-numeric size \"%s\"", mesh, name, size));
  int64_t value = 0;
  if (std::from_chars(size.data(), size.data() + size.size(), value).ec !=
      std::errc())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s axis \"%s\" has size %s which is too large", mesh, name, size));
  if (value <= 0 && value != -1)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s axis \"%s\" has size %d; sizes must be "
                        "positive or -1",
                        mesh, name, value));
  for (const Spec::Entry &e : spec.entries)
    if (e.name == name)
      return absl::InvalidArgumentError(
          absl::StrFormat("%s axis \"%s\" appears twice", mesh, name));
  if (value == -1 && spec.fill)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s axes \"%s\" and \"%s\" are both -1; at most one %s axis may "
        "be -1",
        mesh, spec.entries[*spec.fill].name, name, spec.words->level));
  if (value == -1)
    spec.fill = spec.entries.size();
  else if (!checkedMul(spec.known, value, spec.known))
    return spec.tooLarge();
  spec.entries.push_back({std::string(name), value});
  return absl::OkStatus();
}

/// An all-blank spec has no entries (the DCN spec is optional).
absl::StatusOr<Spec> parseSpec(std::string_view text, const SpecWords &words) {
  Spec spec{text, &words, {}, std::nullopt, 1};
  if (trim(text).empty())
    return spec;
  for (std::string_view item : splitCommas(text))
    if (absl::Status s = parseEntry(trim(item), spec); !s.ok())
      return s;
  return spec;
}

} // namespace

const MeshAxis *MeshSpec::findAxis(std::string_view name) const {
  for (const MeshAxis &axis : meshAxes)
    if (axis.name == name)
      return &axis;
  return nullptr;
}

int64_t MeshSpec::numDevices() const {
  int64_t n = 1;
  for (const MeshAxis &axis : meshAxes)
    n *= axis.size();
  return n;
}

int64_t MeshSpec::numProcesses() const {
  int64_t n = 1;
  for (const MeshAxis &axis : meshAxes)
    n *= axis.dcn;
  return n;
}

int64_t MeshSpec::devicesPerProcess() const {
  int64_t n = 1;
  for (const MeshAxis &axis : meshAxes)
    n *= axis.ici;
  return n;
}

std::vector<int64_t> MeshSpec::coordinates(int64_t deviceId) const {
  if (deviceId < 0 || deviceId >= numDevices())
    return {};
  int64_t perProcess = devicesPerProcess();
  int64_t process = deviceId / perProcess;
  int64_t local = deviceId % perProcess;
  std::vector<int64_t> coords(meshAxes.size());
  // Row-major: the last axis varies fastest in both the process and the
  // local index.
  for (size_t i = meshAxes.size(); i-- > 0;) {
    const MeshAxis &axis = meshAxes[i];
    int64_t iciCoord = local % axis.ici;
    int64_t dcnCoord = process % axis.dcn;
    local /= axis.ici;
    process /= axis.dcn;
    coords[i] = dcnCoord * axis.ici + iciCoord;
  }
  return coords;
}

int64_t MeshSpec::deviceId(const std::vector<int64_t> &coords) const {
  if (coords.size() != meshAxes.size())
    return -1;
  int64_t process = 0;
  int64_t local = 0;
  for (size_t i = 0; i < meshAxes.size(); ++i) {
    const MeshAxis &axis = meshAxes[i];
    if (coords[i] < 0 || coords[i] >= axis.size())
      return -1;
    process = process * axis.dcn + coords[i] / axis.ici;
    local = local * axis.ici + coords[i] % axis.ici;
  }
  return process * devicesPerProcess() + local;
}

int64_t MeshSpec::processOf(int64_t deviceId) const {
  if (deviceId < 0 || deviceId >= numDevices())
    return -1;
  return deviceId / devicesPerProcess();
}

absl::Status sd::verifyMeshAxes(const std::vector<MeshAxis> &axes) {
  int64_t devices = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    const MeshAxis &axis = axes[i];
    if (axis.name.empty())
      return absl::InvalidArgumentError("mesh axis with an empty name");
    for (size_t j = 0; j < i; ++j)
      if (axes[j].name == axis.name)
        return absl::InvalidArgumentError(
            absl::StrFormat("mesh axis \"%s\" appears twice", axis.name));
    if (axis.ici <= 0 || axis.dcn <= 0)
      return absl::InvalidArgumentError(absl::StrFormat(
          "mesh axis \"%s\" has ICI part %d and DCN part %d; both must be "
          "positive",
          axis.name, axis.ici, axis.dcn));
    int64_t size = 0;
    if (!checkedMul(axis.ici, axis.dcn, size) ||
        !checkedMul(devices, size, devices) || devices > kMaxMeshDevices)
      return absl::InvalidArgumentError(absl::StrFormat(
          "mesh has more than %d devices, the most sd supports, by mesh axis "
          "\"%s\" (ICI part %d, DCN part %d)",
          kMaxMeshDevices, axis.name, axis.ici, axis.dcn));
  }
  return absl::OkStatus();
}

std::string MeshSpec::toString() const {
  return absl::StrJoin(meshAxes, ",", [](std::string *out, const MeshAxis &a) {
    absl::StrAppend(out, a.name, ":", a.size());
    if (a.dcn > 1)
      absl::StrAppend(out, "(dcn=", a.dcn, ")");
  });
}

absl::StatusOr<MeshSpec> sd::parseMesh(std::string_view ici,
                                       std::string_view dcn,
                                       const MeshOptions &opts) {
  if (trim(ici).empty())
    return absl::InvalidArgumentError("empty mesh specification");
  if (opts.devices && *opts.devices <= 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--devices=%d is invalid; the device count must be positive",
        *opts.devices));
  if (opts.processes && *opts.processes <= 0)
    return absl::InvalidArgumentError(absl::StrFormat(
        "--processes=%d is invalid; the process count must be positive",
        *opts.processes));

  absl::StatusOr<Spec> iciOr = parseSpec(ici, kIciWords);
  if (!iciOr.ok())
    return iciOr.status();
  absl::StatusOr<Spec> dcnOr = parseSpec(dcn, kDcnWords);
  if (!dcnOr.ok())
    return dcnOr.status();
  Spec &iciSpec = *iciOr;
  Spec &dcnSpec = *dcnOr;

  // The DCN -1 is filled from the process count when there is one, since it
  // does not depend on the ICI spec; otherwise it is filled last, from the
  // device count, once the ICI product is known.
  if (dcnSpec.fill && opts.processes)
    if (absl::Status s =
            dcnSpec.fillTo(*opts.processes, 1, "processes", "dcn axes");
        !s.ok())
      return s;
  auto processUnknown = [&]() {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dcn mesh axis \"%s\" is -1 but the process count is unknown; pass "
        "--processes=N",
        dcnSpec.entries[*dcnSpec.fill].name));
  };
  if (iciSpec.fill) {
    if (!opts.devices)
      return absl::InvalidArgumentError(absl::StrFormat(
          "mesh axis \"%s\" is -1 but the device count is unknown; pass "
          "--devices=N",
          iciSpec.entries[*iciSpec.fill].name));
    if (dcnSpec.fill)
      return processUnknown();
    if (absl::Status s =
            iciSpec.fillTo(*opts.devices, dcnSpec.known, "devices", "axes");
        !s.ok())
      return s;
  }
  if (dcnSpec.fill) {
    if (!opts.devices)
      return processUnknown();
    if (absl::Status s =
            dcnSpec.fillTo(*opts.devices, iciSpec.known, "devices", "axes");
        !s.ok())
      return s;
  }
  int64_t devices = 0;
  if (!checkedMul(iciSpec.known, dcnSpec.known, devices))
    return absl::InvalidArgumentError(absl::StrFormat(
        "mesh \"%s\" with dcn mesh \"%s\" is too large: the product of its "
        "sizes overflows 64 bits",
        ici, dcn));

  // Merge: ICI order first, then axes that only the DCN spec names.
  std::vector<MeshAxis> axes;
  for (const Spec::Entry &e : iciSpec.entries)
    axes.push_back({e.name, e.size, 1});
  for (const Spec::Entry &e : dcnSpec.entries) {
    auto it = std::find_if(axes.begin(), axes.end(),
                           [&](const MeshAxis &a) { return a.name == e.name; });
    if (it != axes.end())
      it->dcn = e.size;
    else
      axes.push_back({e.name, 1, e.size});
  }
  MeshSpec mesh(std::move(axes));
  if (devices > kMaxMeshDevices)
    return absl::InvalidArgumentError(
        absl::StrFormat("mesh %s has %d devices; sd supports at most %d",
                        mesh.toString(), devices, kMaxMeshDevices));
  if (opts.maxDevicesPerProcess &&
      mesh.devicesPerProcess() > *opts.maxDevicesPerProcess)
    return absl::InvalidArgumentError(absl::StrFormat(
        "mesh %s has %d devices per process; at most %d can run in one "
        "process (spread the mesh over processes with --dcn-mesh)",
        mesh.toString(), mesh.devicesPerProcess(), *opts.maxDevicesPerProcess));
  if (opts.devices && devices != *opts.devices)
    return absl::InvalidArgumentError(absl::StrFormat(
        "mesh %s has %d device%s but --devices=%d", mesh.toString(), devices,
        devices == 1 ? "" : "s", *opts.devices));
  if (opts.processes && mesh.numProcesses() != *opts.processes) {
    std::string what = dcnSpec.entries.empty()
                           ? std::string("an empty dcn mesh")
                           : "dcn mesh " + dcnSpec.toString();
    std::string given =
        opts.processesFromMpi
            ? absl::StrFormat("mpirun started %d", *opts.processes)
            : absl::StrFormat("--processes=%d", *opts.processes);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s has %d process%s but %s", what, mesh.numProcesses(),
        mesh.numProcesses() == 1 ? "" : "es", given));
  }
  return mesh;
}
