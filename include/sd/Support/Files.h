//===- Files.h - Reading the files sd is given, bounded ---------*- C++ -*-===//
//
// Every file sd reads comes from a user, so it may be anything a path can
// name: a directory, a FIFO that blocks until a writer comes, /dev/zero that
// never ends, or a sparse file of many GiB where a small JSON is expected.
// The readers of sd's formats go through readRegularFile, which takes only a
// regular file and refuses, by its size on disk, one larger than its format
// allows, before reading a byte. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SUPPORT_FILES_H
#define SD_SUPPORT_FILES_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string_view>

namespace llvm {
class MemoryBuffer;
} // namespace llvm

namespace sd {

/// The largest program text (.mlir) sd reads: generated models are a few
/// MiB; 1 GiB leaves room for constants written out in the IR.
constexpr uint64_t kMaxProgramFileBytes = uint64_t(1) << 30;

/// An error unless `path` is a regular file of at most `maxBytes` (0: any
/// size), checked without opening it, so that a directory, a FIFO or
/// /dev/zero neither blocks nor reads without end:
/// `cannot read rules file "/dev/zero": not a regular file` (`what` is
/// "rules file"); `... "big.json": 8589934592 bytes is above the limit of
/// 67108864`. A missing file is NotFound.
absl::Status checkRegularFile(std::string_view path, std::string_view what,
                              uint64_t maxBytes = 0);

/// The bytes of the regular file at `path` (checkRegularFile with
/// `maxBytes`, then checked again on the opened file, which is opened
/// without blocking), mapped or read, with a NUL after the last byte when
/// `nullTerminated`. Errors name `what` and `path` as checkRegularFile's do.
absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>>
readRegularFile(std::string_view path, std::string_view what, uint64_t maxBytes,
                bool nullTerminated = false);

/// readRegularFile, or for "-" standard input, read to its end but refused
/// (InvalidArgument) as soon as it passes `maxBytes`.
absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>>
readRegularFileOrStdin(std::string_view path, std::string_view what,
                       uint64_t maxBytes, bool nullTerminated = false);

} // namespace sd

#endif // SD_SUPPORT_FILES_H
