//===- CheckpointDetail.h - What the checkpoint files share -----*- C++ -*-===//
//
// Helpers of Checkpoint.cpp that CheckpointReader.cpp reads manifests and
// checks blocks with. Private to lib/Checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_CHECKPOINT_CHECKPOINTDETAIL_H
#define SD_LIB_CHECKPOINT_CHECKPOINTDETAIL_H

#include "sd/Checkpoint/Checkpoint.h"

#include "Manifest.pb.h"

#include "absl/status/statusor.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace sd::ckpt {

/// "0x0000abcd", for messages about checksums.
std::string hex32(uint32_t value);

/// The CRC-32 of `size` bytes at `data`.
uint32_t crcOf(const char *data, size_t size);

/// `stepDir`'s manifest (parseManifest), with every shard file's size on
/// disk checked against it: parseManifest verified the manifest, and its
/// sizes are trusted once the files have them, before anything is
/// allocated or read from them.
absl::StatusOr<checkpoint::Manifest>
readCheckedManifest(const std::string &stepDir);

/// What `manifest` says of its training session.
CheckpointMeta metaOf(const checkpoint::Manifest &manifest);

/// The mesh `manifest` was written on.
MeshSpec meshOf(const checkpoint::Manifest &manifest);

} // namespace sd::ckpt

#endif // SD_LIB_CHECKPOINT_CHECKPOINTDETAIL_H
