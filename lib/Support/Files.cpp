//===- Files.cpp - Reading the files sd is given, bounded -----------------===//
//
// The path's status decides before anything is opened; the opened file's
// status is checked again, so that a path replaced in between (by a FIFO or
// a larger file) is refused all the same. The file is opened with
// O_NONBLOCK, which makes opening a FIFO return at once instead of waiting
// for a writer.
//
//===----------------------------------------------------------------------===//

#include "sd/Support/Files.h"

#include "absl/strings/str_format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {

std::string cannotRead(std::string_view what, std::string_view path,
                       std::string_view reason) {
  return absl::StrFormat("cannot read %s \"%s\": %s", what, path, reason);
}

/// The error for a file of `type` and `size` that `maxBytes` refuses, or
/// OK.
absl::Status checkStatus(std::string_view path, std::string_view what,
                         llvm::sys::fs::file_type type, uint64_t size,
                         uint64_t maxBytes) {
  if (type == llvm::sys::fs::file_type::directory_file)
    return absl::InvalidArgumentError(
        cannotRead(what, path, "it is a directory"));
  if (type != llvm::sys::fs::file_type::regular_file)
    return absl::InvalidArgumentError(
        cannotRead(what, path, "not a regular file"));
  if (maxBytes && size > maxBytes)
    return absl::InvalidArgumentError(cannotRead(
        what, path,
        absl::StrFormat("%d bytes is above the limit of %d", size, maxBytes)));
  return absl::OkStatus();
}

/// Closes a descriptor when it goes out of scope.
class FdCloser {
public:
  explicit FdCloser(int fd) : fd(fd) {}
  ~FdCloser() { ::close(fd); }
  FdCloser(const FdCloser &) = delete;
  FdCloser &operator=(const FdCloser &) = delete;

private:
  int fd;
};

} // namespace

absl::Status sd::checkRegularFile(std::string_view path, std::string_view what,
                                  uint64_t maxBytes) {
  // The status, not the file: opening a FIFO would wait for a writer.
  llvm::sys::fs::file_status status;
  if (std::error_code error = llvm::sys::fs::status(llvm::Twine(path), status))
    return absl::NotFoundError(cannotRead(what, path, error.message()));
  return checkStatus(path, what, status.type(), status.getSize(), maxBytes);
}

absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>>
sd::readRegularFile(std::string_view path, std::string_view what,
                    uint64_t maxBytes, bool nullTerminated) {
  if (absl::Status status = checkRegularFile(path, what, maxBytes);
      !status.ok())
    return status;
  std::string name(path);
  int fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return absl::ErrnoToStatus(errno,
                               cannotRead(what, path, std::strerror(errno)));
  FdCloser closer(fd);
  struct stat info;
  if (::fstat(fd, &info) != 0)
    return absl::ErrnoToStatus(errno,
                               cannotRead(what, path, std::strerror(errno)));
  llvm::sys::fs::file_type type =
      S_ISREG(info.st_mode)   ? llvm::sys::fs::file_type::regular_file
      : S_ISDIR(info.st_mode) ? llvm::sys::fs::file_type::directory_file
                              : llvm::sys::fs::file_type::type_unknown;
  uint64_t size = static_cast<uint64_t>(info.st_size);
  if (absl::Status status = checkStatus(path, what, type, size, maxBytes);
      !status.ok())
    return status;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getOpenFile(fd, name, size, nullTerminated);
  if (!buffer)
    return absl::UnknownError(
        cannotRead(what, path, buffer.getError().message()));
  return std::move(*buffer);
}

absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>>
sd::readRegularFileOrStdin(std::string_view path, std::string_view what,
                           uint64_t maxBytes, bool nullTerminated) {
  if (path != "-")
    return readRegularFile(path, what, maxBytes, nullTerminated);
  std::string text;
  char chunk[1 << 16];
  while (true) {
    ssize_t got = ::read(STDIN_FILENO, chunk, sizeof(chunk));
    if (got < 0) {
      if (errno == EINTR)
        continue;
      return absl::ErrnoToStatus(
          errno, absl::StrFormat("cannot read %s from standard input: %s", what,
                                 std::strerror(errno)));
    }
    if (got == 0)
      break;
    text.append(chunk, static_cast<size_t>(got));
    if (maxBytes && text.size() > maxBytes)
      return absl::InvalidArgumentError(absl::StrFormat(
          "cannot read %s from standard input: more than the limit of %d "
          "bytes",
          what, maxBytes));
  }
  // A copy is always NUL-terminated.
  return llvm::MemoryBuffer::getMemBufferCopy(text, "<stdin>");
}
