//===- MeshFuzzer.cpp - Fuzzes the --mesh / --dcn-mesh grammar ------------===//
//
// Input: up to four lines, `--mesh`, `--dcn-mesh`, `--devices` and
// `--processes` (the last two optional integers). A mesh that parses must
// keep parseMesh's promises: it passes verifyMeshAxes and its device
// numbering round-trips.
//
//===----------------------------------------------------------------------===//

#include "FuzzUtils.h"

#include "sd/Sharding/Mesh.h"

#include <charconv>

using namespace sd;

namespace {

std::optional<int64_t> parseCount(std::string_view text) {
  int64_t value = 0;
  if (text.empty() ||
      std::from_chars(text.data(), text.data() + text.size(), value).ec !=
          std::errc())
    return std::nullopt;
  return value;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string_view> lines =
      fuzz::splitLines(fuzz::asText(data, size), 4);
  MeshOptions opts{parseCount(lines[2]), parseCount(lines[3]),
                   kMaxDevicesPerProcess};
  absl::StatusOr<MeshSpec> mesh = parseMesh(lines[0], lines[1], opts);
  fuzz::check(mesh.ok() || !mesh.status().message().empty(),
              "an error without a message");
  if (!mesh.ok())
    return 0;
  fuzz::check(verifyMeshAxes(mesh->axes()).ok(),
              "parseMesh built a mesh that verifyMeshAxes rejects");
  int64_t devices = mesh->numDevices();
  fuzz::check(devices >= 1 && devices <= kMaxMeshDevices, "device count");
  fuzz::check(!opts.devices || devices == *opts.devices, "--devices");
  fuzz::check(devices == mesh->numProcesses() * mesh->devicesPerProcess(),
              "processes times devices per process");
  // The first, last and a middle device round-trip through coordinates.
  for (int64_t id : {int64_t(0), devices / 2, devices - 1}) {
    std::vector<int64_t> coords = mesh->coordinates(id);
    fuzz::check(mesh->deviceId(coords) == id, "deviceId(coordinates(id))");
    fuzz::check(mesh->processOf(id) >= 0 &&
                    mesh->processOf(id) < mesh->numProcesses(),
                "processOf");
  }
  fuzz::check(mesh->coordinates(devices).empty(), "an id out of range");
  return 0;
}
