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
// sd writes F32 (and, for --export-dtype=bfloat16, BF16) and reads F32,
// F16, BF16 and F64, converted to f32, and I64 (class labels: exact below
// 2^24), which parameters may not be (isFloatingDtype).
//
// No MLIR here (sd's checkpoint library is used by the MLIR-free runtime side).
//
//===----------------------------------------------------------------------===//

#ifndef SD_CHECKPOINT_SAFETENSORS_H
#define SD_CHECKPOINT_SAFETENSORS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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

/// Whether a dtype of the file holds real numbers (F32, F16, BF16, F64):
/// what parameters and activations are read from.
inline bool isFloatingDtype(std::string_view dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64";
}

/// A tensor read from a file, converted to f32.
struct SafetensorsTensor {
  std::string name;
  /// The dtype in the file: "F32", "F16", "BF16", "F64" or "I64".
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

/// Parses a safetensors header (the JSON after the 8-byte length) of a file
/// whose data section has `dataSize` bytes, with parseSafetensors's checks;
/// the tensors come in file order without their values.
absl::StatusOr<SafetensorsFile>
parseSafetensorsHeader(std::string_view headerText, int64_t dataSize,
                       const std::string &fileName);

/// The largest safetensors header sd reads (the format's reference reader
/// refuses more than 100 MB): a larger length is a damaged or hostile file.
constexpr int64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// A safetensors file opened for reading parts of its tensors: only the
/// header is read when it opens, then each readBlock reads the bytes of the
/// rows it asks for (pread, so many threads may read at once).
class SafetensorsReader {
public:
  /// Opens `path`, which must be a regular file, and reads and checks its
  /// header (parseSafetensorsHeader) against the file's size.
  static absl::StatusOr<std::unique_ptr<SafetensorsReader>>
  open(const std::string &path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader &) = delete;
  SafetensorsReader &operator=(const SafetensorsReader &) = delete;

  const std::string &path() const { return filePath; }
  /// The tensors in file order, without values.
  const std::vector<SafetensorsTensor> &tensors() const {
    return header.tensors;
  }
  const std::map<std::string, std::string> &metadata() const {
    return header.metadata;
  }
  const SafetensorsTensor *find(std::string_view name) const {
    return header.find(name);
  }
  /// Reads the block of `tensor` (one of tensors()) at `offsets` of
  /// `shape` into `out` as f32, converting from the file's dtype: the bytes
  /// of its rows only, a run of whole rows in one read.
  absl::Status readBlock(const SafetensorsTensor &tensor,
                         const std::vector<int64_t> &offsets,
                         const std::vector<int64_t> &shape, float *out) const;
  /// Reads `size` bytes at file offset `begin` into `out`.
  absl::Status readBytes(int64_t begin, int64_t size, char *out) const;
  /// Bytes the reads have read so far (the header included).
  int64_t bytesRead() const;

private:
  SafetensorsReader(std::string path, int fd, SafetensorsFile header,
                    int64_t headerBytes);
  std::string filePath;
  int fd;
  SafetensorsFile header;
  mutable std::atomic<int64_t> read{0};
};

/// A safetensors file written tensor by tensor: the header (every name and
/// shape, F32) first, then each tensor's values in order as they come, so
/// that a caller holds one tensor at a time. Written to `path.tmp` and
/// renamed into place by finish(); destroyed unfinished, it removes the
/// `.tmp` file and leaves whatever was at `path` as it was.
class SafetensorsStreamWriter {
public:
  struct Entry {
    std::string name;
    std::vector<int64_t> shape;
    /// How the file stores it: F32, or BF16 (append rounds each value to
    /// nearest, ties to even).
    bool bf16 = false;
  };
  static absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>>
  create(const std::string &path, const std::vector<Entry> &entries,
         const std::map<std::string, std::string> &metadata,
         std::function<void()> halfWritten = nullptr);
  ~SafetensorsStreamWriter();
  /// Writes the next tensor's values (its shape's elements), in its
  /// entry's dtype.
  absl::Status append(const float *values);
  /// After the last tensor: fsync, rename, fsync of the directory.
  absl::StatusOr<WrittenFile> finish();

private:
  struct State;
  explicit SafetensorsStreamWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state;
};

/// Reads and parses the file at `path`, a regular file of at most
/// `maxBytes` (0: any size; NotFound when it does not exist).
absl::StatusOr<SafetensorsFile> readSafetensors(const std::string &path,
                                                uint64_t maxBytes = 0);

//===----------------------------------------------------------------------===//
// File helpers shared with the checkpoint code
//===----------------------------------------------------------------------===//

/// The whole content of `what` at `path`, a regular file of at most
/// `maxBytes` (0: any size; sd::readRegularFile); NotFound when it is
/// missing, other errors naming `what` and the path.
absl::StatusOr<std::string> readFileBytes(const std::string &path,
                                          std::string_view what,
                                          uint64_t maxBytes);

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
