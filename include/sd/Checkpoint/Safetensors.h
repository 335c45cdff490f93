//===- Safetensors.h - Reading and writing safetensors files ----*- C++ -*-===//
//
// The Hugging Face safetensors format: an 8-byte little-endian header length
// N, N bytes of JSON header
//
//   {"__metadata__": {"format": "pt"},
//    "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//
// padded with spaces to a multiple of 8, then the tensors' bytes (row-major,
// little-endian; offsets relative to the end of the header) back to back.
// sd writes F32 only and reads F32, F16, BF16 and F64, converted to f32.
//
// No MLIR here (sd's checkpoint library is used by the MLIR-free runtime side).
//
//===----------------------------------------------------------------------===//

#ifndef SD_CHECKPOINT_SAFETENSORS_H
#define SD_CHECKPOINT_SAFETENSORS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sd::ckpt {

/// A tensor to write: `shape`'s elements of f32 at `data` (row-major), which
/// must stay valid during the write.
struct SafetensorsTensorView {
  std::string name;
  std::vector<int64_t> shape;
  const float *data = nullptr;
};

/// What was written: the file's size and the CRC-32 (zlib's) of all its
/// bytes, as a manifest records them.
struct WrittenFile {
  int64_t sizeBytes = 0;
  uint32_t crc32 = 0;
};

/// Writes `tensors` (F32, in this order, names distinct and not
/// "__metadata__") and `metadata` (omitted when empty) as a safetensors file
/// laid out as Python's `safetensors` writes one. The write is atomic: the
/// bytes go to `path + ".tmp"` (replacing any such file), which is fsynced
/// and renamed to `path`, and then the directory is fsynced. A crash leaves
/// either the old file (if any) or the new one, never a partial `path`.
///
/// `halfWritten` is a test hook for crash tests: when set, it is called once
/// the first half of the file's bytes is in the .tmp file, before the rest.
///
/// InvalidArgument for bad names or shapes; the OS error (with the path)
/// when a file operation fails.
absl::StatusOr<WrittenFile>
writeSafetensors(const std::string &path,
                 const std::vector<SafetensorsTensorView> &tensors,
                 const std::map<std::string, std::string> &metadata,
                 const std::function<void()> &halfWritten = nullptr);

/// A tensor read from a file, converted to f32.
struct SafetensorsTensor {
  std::string name;
  /// The dtype in the file: "F32", "F16", "BF16" or "F64".
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<float> values;
  /// Where its bytes are in the file: [begin, end) from the start of the
  /// file (not of the data section).
  int64_t fileBegin = 0;
  int64_t fileEnd = 0;
};

struct SafetensorsFile {
  /// In the order of their bytes in the file.
  std::vector<SafetensorsTensor> tensors;
  std::map<std::string, std::string> metadata;
  /// The tensor called `name`, or nullptr.
  const SafetensorsTensor *find(std::string_view name) const;
};

/// Parses the bytes of a safetensors file; `fileName` names it in errors.
/// Checks everything the format promises: the header length fits the file,
/// the header is a JSON object whose entries have a known dtype, a shape of
/// non-negative sizes and two data offsets; `__metadata__` maps strings to
/// strings; the tensors' byte ranges are in range, do not overlap, leave no
/// gap and cover the data section exactly, and each range has shape × dtype
/// size bytes. Malformed or truncated content is DataLoss; a dtype sd does
/// not read is InvalidArgument. Messages name the file and the tensor.
absl::StatusOr<SafetensorsFile> parseSafetensors(std::string_view bytes,
                                                 const std::string &fileName);

/// Reads and parses the file at `path` (NotFound when it does not exist).
absl::StatusOr<SafetensorsFile> readSafetensors(const std::string &path);

//===----------------------------------------------------------------------===//
// File helpers shared with the checkpoint code
//===----------------------------------------------------------------------===//

/// The whole content of the file at `path`; NotFound when it is missing,
/// other OS errors as Internal/PermissionDenied, each naming the path.
absl::StatusOr<std::string> readFileBytes(const std::string &path);

/// Writes `bytes` to `path` atomically, like writeSafetensors: `path.tmp`,
/// fsync, (`beforeRename`, a test hook, if set), rename, fsync of the
/// directory.
absl::Status
writeFileAtomically(const std::string &path, std::string_view bytes,
                    const std::function<void()> &beforeRename = nullptr);

/// fsyncs the directory `path` so that renames and creations in it are
/// durable.
absl::Status syncDirectory(const std::string &path);

} // namespace sd::ckpt

#endif // SD_CHECKPOINT_SAFETENSORS_H
