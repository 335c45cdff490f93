//===- Mesh.h - Device mesh specification -----------------------*- C++ -*-===//
//
// A named device mesh as MaxDiffusion builds it: every axis has an ICI part
// (devices inside one process / slice) and a DCN part (across processes), and
// the axis size is their product. This header is MLIR-free so that the
// runtime and the sdrun driver can use it without the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SHARDING_MESH_H
#define SD_SHARDING_MESH_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sd {

/// The extent of every device's block of a dimension of `size` elements
/// split over `shards` devices: ceil(size / shards). A dimension the devices
/// do not divide is padded to shards · extent (as GSPMD pads): the last
/// blocks hold fewer valid elements (`validExtent`), possibly none.
constexpr int64_t blockExtent(int64_t size, int64_t shards) {
  return shards <= 1 ? size : (size + shards - 1) / shards;
}

/// The valid (unpadded) elements of block `index` of that split.
constexpr int64_t validExtent(int64_t size, int64_t shards, int64_t index) {
  int64_t extent = blockExtent(size, shards);
  int64_t rest = size - index * extent;
  return rest <= 0 ? 0 : (rest < extent ? rest : extent);
}

/// One named mesh axis. Keeping ICI and DCN apart (rather than only the
/// product) lets the runtime and the cost model tell cheap intra-process
/// collectives from expensive cross-process ones.
struct MeshAxis {
  std::string name;
  int64_t ici = 1;
  int64_t dcn = 1;

  int64_t size() const { return ici * dcn; }
  bool operator==(const MeshAxis &other) const {
    return name == other.name && ici == other.ici && dcn == other.dcn;
  }
  bool operator!=(const MeshAxis &other) const { return !(*this == other); }
};

/// An ordered list of mesh axes (major to minor) plus the device numbering
/// that goes with it. Built by parseMesh, which validates it; the constructor
/// trusts its input so tests and other libraries can build meshes directly.
class MeshSpec {
public:
  MeshSpec() = default;
  explicit MeshSpec(std::vector<MeshAxis> axes) : meshAxes(std::move(axes)) {}

  const std::vector<MeshAxis> &axes() const { return meshAxes; }
  /// Lookup by name; nullptr lets callers drop axes a mesh does not have.
  const MeshAxis *findAxis(std::string_view name) const;

  int64_t numDevices() const;
  int64_t numProcesses() const;
  int64_t devicesPerProcess() const;

  /// Device ids are process-major so that the devices of one process are
  /// contiguous: id = process * devicesPerProcess() + local, with process
  /// row-major over the axes' DCN coordinates and local row-major over their
  /// ICI coordinates. The coordinate on an axis is dcnCoord * ici + iciCoord,
  /// i.e. the DCN part is the major part of each axis (as in
  /// jax mesh_utils.create_hybrid_device_mesh). An id out of range yields an
  /// empty vector.
  std::vector<int64_t> coordinates(int64_t deviceId) const;
  /// Inverse of coordinates(); -1 when coords has the wrong rank or a
  /// coordinate is out of range.
  int64_t deviceId(const std::vector<int64_t> &coords) const;
  /// The process that owns a device; -1 when the id is out of range.
  int64_t processOf(int64_t deviceId) const;

  /// "data:8,fsdp:4"; an axis with a DCN part prints as "data:8(dcn=2)",
  /// where 8 is the whole axis size. Used in diagnostics and IR dumps.
  std::string toString() const;

  bool operator==(const MeshSpec &other) const {
    return meshAxes == other.meshAxes;
  }
  bool operator!=(const MeshSpec &other) const { return !(*this == other); }

private:
  std::vector<MeshAxis> meshAxes;
};

/// The most devices a mesh may have: far beyond any real cluster, and small
/// enough that every product of axis sizes, coordinates and per-device
/// tables stays cheap (`x:99999999999` is an error, not hours of work).
constexpr int64_t kMaxMeshDevices = int64_t(1) << 20;

/// The most devices sdrun runs in one process: each is a thread team with
/// its own memory pools, so `foo:4096` in one process would start thousands
/// of threads instead of training. Callers that run the devices pass it as
/// MeshOptions::maxDevicesPerProcess; sdopt, which only compiles, does not.
constexpr int64_t kMaxDevicesPerProcess = 512;

/// What is known about the machine; needed to fill -1 axes and to check that
/// the mesh covers exactly the devices / processes there are.
struct MeshOptions {
  std::optional<int64_t> devices;
  std::optional<int64_t> processes;
  /// When set, a mesh whose ICI product (devices per process) is larger is
  /// an error.
  std::optional<int64_t> maxDevicesPerProcess;
  /// `processes` is the size of an MPI job (mpirun -np), which messages
  /// then name instead of --processes.
  bool processesFromMpi = false;
};

/// Checks axes that did not come from parseMesh (an IR mesh attribute, a
/// checkpoint manifest): names non-empty and distinct, ICI and DCN parts
/// positive, and at most kMaxMeshDevices devices in all (so numDevices()
/// cannot overflow). InvalidArgument quoting the axis or the mesh.
absl::Status verifyMeshAxes(const std::vector<MeshAxis> &axes);

/// Parses `--mesh` (ICI sizes) and `--dcn-mesh` (DCN sizes, may be empty),
/// each a comma-separated list of `axis:size`, with MaxDiffusion's semantics:
/// each axis size is ici * dcn, axes come in order of first appearance (ICI
/// spec first), and one -1 per spec is filled from opts. The mesh has at
/// most kMaxMeshDevices devices (and opts.maxDevicesPerProcess per process
/// when set). All problems are
/// reported as InvalidArgument with a message that quotes the bad value.
absl::StatusOr<MeshSpec> parseMesh(std::string_view ici,
                                   std::string_view dcn = "",
                                   const MeshOptions &opts = {});

} // namespace sd

#endif // SD_SHARDING_MESH_H
