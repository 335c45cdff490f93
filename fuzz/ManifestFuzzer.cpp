//===- ManifestFuzzer.cpp - Fuzzes checkpoint manifests -------------------===//
//
// Input: the bytes of a manifest.pb. The fuzzer skips the seal (the final
// CRC-32, which random bytes never match) by sealing the input itself unless
// it already ends in a valid seal, so that it reaches the verification of
// what the manifest declares. A manifest that verifies must be safe to load:
// its tensors fit the declared files and its mesh numbers its devices.
//
//===----------------------------------------------------------------------===//

#include "FuzzUtils.h"

#include "ManifestIO.h"

#include "sd/Sharding/Mesh.h"

#include "google/protobuf/stubs/logging.h"

using namespace sd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Invalid UTF-8 in string fields is common in fuzzed bytes; protobuf's
  // log line for each would drown the fuzzer's output.
  google::protobuf::LogSilencer quiet;
  std::string_view bytes = fuzz::asText(data, size);
  absl::StatusOr<checkpoint::Manifest> manifest =
      ckpt::parseManifest(bytes, "fuzz/step_00000002");
  if (!manifest.ok()) {
    // Reseal whatever parses, so the checks after the seal get fuzzed too.
    checkpoint::Manifest parsed;
    if (!parsed.ParseFromArray(data, static_cast<int>(size)))
      return 0;
    parsed.clear_manifest_crc32();
    manifest = ckpt::parseManifest(ckpt::serializeManifest(parsed),
                                   "fuzz/step_00000002");
    if (!manifest.ok())
      return 0;
  }
  fuzz::check(manifest->step() == 2, "step differs from the directory's");
  // Sums in 128 bits: the manifest's values are only bounded by int64.
  __int128 fileBytes = 0;
  for (const checkpoint::ShardFile &file : manifest->files())
    fileBytes += file.size_bytes();
  __int128 tensorBytes = 0;
  for (const checkpoint::Tensor &tensor : manifest->tensors()) {
    std::vector<int64_t> shape(tensor.global_shape().begin(),
                               tensor.global_shape().end());
    tensorBytes += static_cast<__int128>(ckpt::checkedElements(shape)) * 4;
  }
  fuzz::check(tensorBytes <= fileBytes, "tensors larger than the files");
  std::vector<MeshAxis> axes;
  for (const checkpoint::MeshAxis &axis : manifest->mesh())
    axes.push_back({axis.name(), axis.size() / axis.dcn(), axis.dcn()});
  fuzz::check(MeshSpec(axes).numDevices() <= kMaxMeshDevices, "mesh size");
  return 0;
}
