//===- ManifestIO.h - Checkpoint manifests as bytes --------------*- C++
//-*-===//
//
// Serializing a checkpoint manifest (Manifest.proto) and parsing and
// verifying one from its bytes, apart from the file system, so that every
// check a hostile manifest must pass is in one function that the loader and
// the fuzzer (fuzz/ManifestFuzzer.cpp) both call. Private to lib/Checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_CHECKPOINT_MANIFESTIO_H
#define SD_LIB_CHECKPOINT_MANIFESTIO_H

#include "Manifest.pb.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sd::ckpt {

/// The manifest's file name in a step directory.
constexpr const char *kManifestName = "manifest.pb";

/// "[2, 3]", for messages.
std::string formatShape(const std::vector<int64_t> &shape);

/// Elements of `shape`, or -1 for a negative size or an overflow.
int64_t checkedElements(const std::vector<int64_t> &shape);

/// The step of a directory called "step_<digits>", or -1.
int64_t stepOfDirectoryName(std::string_view name);

/// Serializes with sorted map keys, so equal manifests are equal bytes, and
/// appends manifest_crc32 over those bytes (the seal).
std::string serializeManifest(const checkpoint::Manifest &manifest);

/// Parses the bytes of `stepDir`'s manifest and verifies everything that
/// can be checked without the shard files, before anything is allocated
/// from it:
/// - the seal (the final manifest_crc32) matches; the bytes parse;
/// - the format version is kFormatVersion (FailedPrecondition otherwise);
/// - the step is not negative, and equals N when stepDir is "step_N";
/// - the mesh's axes pass verifyMeshAxes (sizes divisible by their DCN part);
/// - shard file names are plain and distinct; tensor names distinct, kinds
///   known, dtypes F32, shapes non-negative without overflow;
/// - each tensor's blocks lie in listed files, one per file, and form a grid
///   that tiles it exactly (checked in O(blocks log blocks));
/// - the tensors' bytes fit in the shard files' declared sizes, so loading
///   allocates no more than the files hold.
/// Everything else is DataLoss naming the step directory (the manifest's
/// path for the seal).
absl::StatusOr<checkpoint::Manifest> parseManifest(std::string_view bytes,
                                                   const std::string &stepDir);

/// The error for shard file `path` of `size` bytes when the manifest says
/// otherwise ("... is truncated: 100 bytes, manifest says 120"); OK when the
/// sizes agree.
absl::Status checkShardSize(const std::string &path, int64_t size,
                            const checkpoint::ShardFile &file);

/// checkShardSize for every shard file of `manifest` as it is on disk in
/// `stepDir` (DataLoss "... is missing" when one is not there), so that a
/// manifest's sizes are trusted only once the files are known to have them.
absl::Status checkShardSizesOnDisk(const checkpoint::Manifest &manifest,
                                   const std::string &stepDir);

} // namespace sd::ckpt

#endif // SD_LIB_CHECKPOINT_MANIFESTIO_H
