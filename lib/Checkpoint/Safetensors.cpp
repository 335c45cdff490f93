//===- Safetensors.cpp - Reading and writing safetensors files ------------===//

#include "sd/Checkpoint/Safetensors.h"
#include "sd/Runtime/BFloat16.h"
#include "sd/Sharding/YamlDiagnostics.h"
#include "sd/Support/Files.h"
#include "sd/Support/InputLimits.h"

#include "llvm/Support/MemoryBuffer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/JSON.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

namespace sd::ckpt {

// Tensor data is copied between files and memory as is.
static_assert(llvm::endianness::native == llvm::endianness::little,
              "safetensors data is little-endian");

namespace {

/// An OS error on `path`, keeping errno's meaning in the status code.
absl::Status osError(int error, const std::string &what,
                     const std::string &path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " '", path, "'"));
}

/// Closes a file descriptor when it goes out of scope.
class FileCloser {
public:
  explicit FileCloser(int fd) : fd(fd) {}
  ~FileCloser() {
    if (fd >= 0)
      ::close(fd);
  }
  /// Gives up the descriptor without closing it.
  void disown() { fd = -1; }
  /// Closes now and reports the error (close can report a failed write).
  int release() {
    int result = ::close(fd);
    fd = -1;
    return result;
  }

private:
  int fd;
};

/// Writes everything, retrying partial writes and EINTR.
bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    // Large writes in pieces: some systems cap one write at 2 GiB.
    size_t piece = std::min<size_t>(size, size_t(1) << 30);
    ssize_t written = ::write(fd, data, piece);
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

/// Sequential writes into a .tmp file, with the running CRC-32 and the test
/// hook that fires when half of the expected bytes are written.
class TmpWriter {
public:
  TmpWriter(int fd, int64_t total, const std::function<void()> &halfWritten)
      : fd(fd), half(total / 2), halfWritten(halfWritten) {}

  bool append(const char *data, size_t size) {
    crc = llvm::crc32(crc, llvm::ArrayRef<uint8_t>(
                               reinterpret_cast<const uint8_t *>(data), size));
    if (halfWritten && !hookCalled &&
        position + static_cast<int64_t>(size) >= half) {
      size_t first = static_cast<size_t>(half - position);
      if (!writeAll(fd, data, first))
        return false;
      position += static_cast<int64_t>(first);
      data += first;
      size -= first;
      hookCalled = true;
      // The half must be in the file (not only in a buffer) when the hook
      // runs: a crash test kills the process there.
      ::fsync(fd);
      halfWritten();
    }
    if (!writeAll(fd, data, size))
      return false;
    position += static_cast<int64_t>(size);
    return true;
  }

  int64_t written() const { return position; }
  uint32_t checksum() const { return crc; }

private:
  int fd;
  int64_t half;
  const std::function<void()> &halfWritten;
  bool hookCalled = false;
  int64_t position = 0;
  uint32_t crc = 0;
};

/// Appends `text` as a JSON string the way serde_json (Python's safetensors)
/// writes it: short escapes where JSON has them, \u00XX for other control
/// characters, everything else (UTF-8 included) as is. (Not llvm::json's
/// writer: its Value trips GCC's -Wmaybe-uninitialized under ASan.)
void appendJsonString(std::string &out, std::string_view text) {
  out += '"';
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20)
        absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
      else
        out += c;
    }
  }
  out += '"';
}

/// The directory part of `path` ("." when it has none).
std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

/// Removes a temporary file when the write it belongs to fails (after a
/// successful rename there is nothing left to remove).
class TmpRemover {
public:
  explicit TmpRemover(const std::string &tmp) : tmp(tmp) {}
  ~TmpRemover() { ::unlink(tmp.c_str()); }
  TmpRemover(const TmpRemover &) = delete;
  TmpRemover &operator=(const TmpRemover &) = delete;

private:
  const std::string &tmp;
};

/// Opens `path + ".tmp"` for writing, replacing any such file.
absl::StatusOr<int> openTmp(const std::string &tmp) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return osError(errno, "cannot create", tmp);
  return fd;
}

/// fsyncs and closes a fully written .tmp file, then renames it to `path`
/// and fsyncs the directory.
absl::Status finishTmp(int fd, FileCloser &closer, const std::string &tmp,
                       const std::string &path,
                       const std::function<void()> &beforeRename) {
  if (::fsync(fd) != 0)
    return osError(errno, "cannot fsync", tmp);
  if (closer.release() != 0)
    return osError(errno, "cannot close", tmp);
  if (beforeRename)
    beforeRename();
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  return syncDirectory(parentDirectory(path));
}

/// Writes `path` by way of `path + ".tmp"`: `write(fd)` fills the .tmp file
/// (false after a failed write, errno set), which `finishTmp` then puts in
/// place; the .tmp file is removed whatever happens.
absl::Status writeThroughTmp(const std::string &path,
                             const std::function<bool(int)> &write,
                             const std::function<void()> &beforeRename) {
  std::string tmp = path + ".tmp";
  absl::StatusOr<int> fd = openTmp(tmp);
  if (!fd.ok())
    return fd.status();
  TmpRemover remover(tmp);
  FileCloser closer(*fd);
  if (!write(*fd))
    return osError(errno, "cannot write", tmp);
  return finishTmp(*fd, closer, tmp, path, beforeRename);
}

std::string formatShape(const std::vector<int64_t> &shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

/// Elements of `shape`, or -1 for a negative size or an overflow.
int64_t checkedElements(const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (int64_t size : shape) {
    if (size < 0 || __builtin_mul_overflow(elements, size, &elements))
      return -1;
  }
  return elements;
}

/// IEEE binary16 → binary32 (exact).
float halfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half >> 15) << 31;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa × 2^-24.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits;
  if (exponent == 31)
    bits = sign | 0x7f800000u | (mantissa << 13);
  else
    bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  return llvm::bit_cast<float>(bits);
}

/// Bytes per element of a dtype sd reads; 0 for any other.
int64_t dtypeSize(std::string_view dtype) {
  if (dtype == "F32")
    return 4;
  if (dtype == "F16" || dtype == "BF16")
    return 2;
  if (dtype == "F64" || dtype == "I64")
    return 8;
  return 0;
}

/// The dtypes of the format that sd does not read (for a clearer error than
/// "unknown dtype").
bool isKnownUnsupportedDtype(std::string_view dtype) {
  static const char *const kOthers[] = {"BOOL",    "U8",     "I8",  "I16",
                                        "U16",     "I32",    "U32", "U64",
                                        "F8_E5M2", "F8_E4M3"};
  for (const char *other : kOthers)
    if (dtype == other)
      return true;
  return false;
}

/// Converts `elements` values of `dtype` at `data` to f32.
void convertToFloat(std::string_view dtype, const char *data, int64_t elements,
                    float *out) {
  if (elements == 0)
    return;
  if (dtype == "F32") {
    std::memcpy(out, data, static_cast<size_t>(elements) * sizeof(float));
  } else if (dtype == "F64") {
    for (int64_t i = 0; i < elements; ++i) {
      double value;
      std::memcpy(&value, data + i * 8, sizeof(value));
      out[i] = static_cast<float>(value);
    }
  } else if (dtype == "I64") {
    // Class labels: exact below 2^24 (the readers of such tensors check
    // their range).
    for (int64_t i = 0; i < elements; ++i)
      out[i] = static_cast<float>(
          static_cast<int64_t>(llvm::support::endian::read64le(data + i * 8)));
  } else if (dtype == "BF16") {
    for (int64_t i = 0; i < elements; ++i) {
      uint16_t bits = llvm::support::endian::read16le(data + i * 2);
      out[i] = llvm::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
    }
  } else {
    for (int64_t i = 0; i < elements; ++i)
      out[i] = halfToFloat(llvm::support::endian::read16le(data + i * 2));
  }
}

/// Reads a JSON array of non-negative integers.
std::optional<std::vector<int64_t>>
integerArray(const llvm::json::Value *value) {
  if (!value)
    return std::nullopt;
  const llvm::json::Array *array = value->getAsArray();
  if (!array)
    return std::nullopt;
  std::vector<int64_t> result;
  for (const llvm::json::Value &element : *array) {
    std::optional<int64_t> integer = element.getAsInteger();
    if (!integer || *integer < 0)
      return std::nullopt;
    result.push_back(*integer);
  }
  return result;
}

} // namespace

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

absl::StatusOr<std::string> readFileBytes(const std::string &path,
                                          std::string_view what,
                                          uint64_t maxBytes) {
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      ::sd::readRegularFile(path, what, maxBytes);
  if (!buffer.ok())
    return buffer.status();
  return (*buffer)->getBuffer().str();
}

absl::Status syncDirectory(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return osError(errno, "cannot open directory", path);
  FileCloser closer(fd);
  if (::fsync(fd) != 0)
    return osError(errno, "cannot fsync directory", path);
  return absl::OkStatus();
}

absl::Status writeFileAtomically(const std::string &path,
                                 std::string_view bytes,
                                 const std::function<void()> &beforeRename) {
  return writeThroughTmp(
      path, [&](int fd) { return writeAll(fd, bytes.data(), bytes.size()); },
      beforeRename);
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

namespace {

/// The header of a file of `entries` (validated: UTF-8 names, unique, not
/// "__metadata__", valid shapes), compact, in Python's order: __metadata__
/// first, then the tensors in the order of their bytes; padded to 8 bytes.
absl::StatusOr<std::string>
buildHeader(const std::string &path,
            const std::vector<SafetensorsStreamWriter::Entry> &entries,
            const std::map<std::string, std::string> &metadata,
            int64_t &dataBytes) {
  std::set<std::string_view> names;
  for (const SafetensorsStreamWriter::Entry &tensor : entries) {
    if (tensor.name.empty() || tensor.name == "__metadata__" ||
        !llvm::json::isUTF8(tensor.name))
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write '", path, "': bad tensor name '", tensor.name, "'"));
    if (!names.insert(tensor.name).second)
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write '", path, "': two tensors named '", tensor.name, "'"));
    int64_t bytes = 0;
    if (checkedElements(tensor.shape) < 0 ||
        __builtin_mul_overflow(checkedElements(tensor.shape), 4, &bytes))
      return absl::InvalidArgumentError(
          absl::StrCat("cannot write '", path, "': tensor '", tensor.name,
                       "' has a bad shape ", formatShape(tensor.shape)));
  }
  for (const auto &[key, value] : metadata)
    if (!llvm::json::isUTF8(key) || !llvm::json::isUTF8(value))
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write '", path, "': metadata '", key, "' is not UTF-8"));
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata) {
      if (header.back() != '{')
        header += ',';
      appendJsonString(header, key);
      header += ':';
      appendJsonString(header, value);
    }
    header += '}';
  }
  int64_t offset = 0;
  for (const SafetensorsStreamWriter::Entry &tensor : entries) {
    int64_t bytes = checkedElements(tensor.shape) * (tensor.bf16 ? 2 : 4);
    if (header.back() != '{')
      header += ',';
    appendJsonString(header, tensor.name);
    absl::StrAppend(&header, ":{\"dtype\":\"", tensor.bf16 ? "BF16" : "F32",
                    "\",\"shape\":[", absl::StrJoin(tensor.shape, ","),
                    "],\"data_offsets\":[", offset, ",", offset + bytes, "]}");
    offset += bytes;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  dataBytes = offset;
  return header;
}

} // namespace

struct SafetensorsStreamWriter::State {
  std::string path, tmp;
  std::vector<Entry> entries;
  std::function<void()> halfWritten;
  int fd = -1;
  std::optional<TmpWriter> writer;
  size_t next = 0;
  bool finished = false;
};

SafetensorsStreamWriter::SafetensorsStreamWriter(std::unique_ptr<State> state)
    : state(std::move(state)) {}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (!state->finished) {
    if (state->fd >= 0)
      ::close(state->fd);
    ::unlink(state->tmp.c_str());
  }
}

absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>>
SafetensorsStreamWriter::create(
    const std::string &path, const std::vector<Entry> &entries,
    const std::map<std::string, std::string> &metadata,
    std::function<void()> halfWritten) {
  int64_t dataBytes = 0;
  absl::StatusOr<std::string> header =
      buildHeader(path, entries, metadata, dataBytes);
  if (!header.ok())
    return header.status();
  auto state = std::make_unique<State>();
  state->path = path;
  state->tmp = path + ".tmp";
  state->entries = entries;
  state->halfWritten = std::move(halfWritten);
  absl::StatusOr<int> fd = openTmp(state->tmp);
  if (!fd.ok())
    return fd.status();
  state->fd = *fd;
  std::unique_ptr<SafetensorsStreamWriter> writer(
      new SafetensorsStreamWriter(std::move(state)));
  State &st = *writer->state;
  int64_t total = 8 + static_cast<int64_t>(header->size()) + dataBytes;
  st.writer.emplace(st.fd, total, st.halfWritten);
  char length[8];
  llvm::support::endian::write64le(length, header->size());
  if (!st.writer->append(length, sizeof(length)) ||
      !st.writer->append(header->data(), header->size()))
    return osError(errno, "cannot write", st.tmp);
  return writer;
}

absl::Status SafetensorsStreamWriter::append(const float *values) {
  State &st = *state;
  if (st.next >= st.entries.size())
    return absl::FailedPreconditionError(
        absl::StrCat("'", st.path, "' has all its tensors already"));
  int64_t elements = checkedElements(st.entries[st.next].shape);
  if (elements > 0 && !values)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write '", st.path, "': tensor '",
                     st.entries[st.next].name, "' has no data"));
  bool ok;
  if (st.entries[st.next].bf16) {
    std::vector<rt::BFloat16> rounded(static_cast<size_t>(elements));
    rt::convertToBFloat16(values, rounded.data(), elements);
    ok = st.writer->append(reinterpret_cast<const char *>(rounded.data()),
                           rounded.size() * sizeof(rt::BFloat16));
  } else {
    ok = st.writer->append(reinterpret_cast<const char *>(values),
                           static_cast<size_t>(elements) * sizeof(float));
  }
  if (!ok)
    return osError(errno, "cannot write", st.tmp);
  ++st.next;
  return absl::OkStatus();
}

absl::StatusOr<WrittenFile> SafetensorsStreamWriter::finish() {
  State &st = *state;
  if (st.next != st.entries.size())
    return absl::FailedPreconditionError(absl::StrCat(
        "'", st.path, "' is missing tensor '", st.entries[st.next].name, "'"));
  // The closer owns the descriptor now; the remover removes the .tmp file
  // if the rename does not happen.
  int fd = st.fd;
  FileCloser closer(fd);
  st.fd = -1;
  TmpRemover remover(st.tmp);
  if (absl::Status status = finishTmp(fd, closer, st.tmp, st.path, nullptr);
      !status.ok())
    return status;
  st.finished = true;
  return WrittenFile{st.writer->written(), st.writer->checksum()};
}

absl::StatusOr<WrittenFile>
writeSafetensors(const std::string &path,
                 const std::vector<SafetensorsTensorView> &tensors,
                 const std::map<std::string, std::string> &metadata,
                 const std::function<void()> &halfWritten) {
  std::vector<SafetensorsStreamWriter::Entry> entries;
  for (const SafetensorsTensorView &tensor : tensors) {
    if (!tensor.data && checkedElements(tensor.shape) > 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write '", path, "': tensor '", tensor.name, "' has no data"));
    entries.push_back({tensor.name, tensor.shape});
  }
  absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> writer =
      SafetensorsStreamWriter::create(path, entries, metadata, halfWritten);
  if (!writer.ok())
    return writer.status();
  for (const SafetensorsTensorView &tensor : tensors)
    if (absl::Status status = (*writer)->append(tensor.data); !status.ok())
      return status;
  return (*writer)->finish();
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

const SafetensorsTensor *SafetensorsFile::find(std::string_view name) const {
  for (const SafetensorsTensor &tensor : tensors)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

absl::StatusOr<SafetensorsFile>
parseSafetensorsHeader(std::string_view headerText, int64_t dataSize,
                       const std::string &fileName) {
  auto dataLoss = [&](auto &&...parts) {
    return absl::DataLossError(
        absl::StrCat("safetensors file '", fileName, "' ", parts...));
  };
  int64_t headerSize = static_cast<int64_t>(headerText.size());
  // llvm::json::parse recurses per level: thousands of nested arrays would
  // overflow the stack. A real header nests three levels.
  if (absl::Status deep = checkNestingDepth(headerText, "header"); !deep.ok())
    return dataLoss("has a malformed header: ", deep.message());
  llvm::Expected<llvm::json::Value> header =
      llvm::json::parse(llvm::StringRef(headerText.data(), headerText.size()));
  if (!header)
    return dataLoss("has a malformed header: ",
                    llvm::toString(header.takeError()));
  const llvm::json::Object *entries = header->getAsObject();
  if (!entries)
    return dataLoss("has a malformed header: not a JSON object");

  int64_t dataStart = 8 + headerSize;
  SafetensorsFile file;
  // Entries sorted by name, so that errors do not depend on hash order.
  std::vector<std::string> keys;
  for (const auto &entry : *entries)
    keys.push_back(entry.first.str());
  std::sort(keys.begin(), keys.end());
  struct Range {
    int64_t begin, end;
    size_t tensor;
  };
  std::vector<Range> ranges;
  for (const std::string &key : keys) {
    const llvm::json::Value &value = *entries->get(key);
    if (key == "__metadata__") {
      const llvm::json::Object *metadata = value.getAsObject();
      if (!metadata)
        return dataLoss("has a malformed header: __metadata__ is not an "
                        "object");
      for (const auto &[name, text] : *metadata) {
        std::optional<llvm::StringRef> string = text.getAsString();
        if (!string)
          return dataLoss("has a malformed header: __metadata__ '", name.str(),
                          "' is not a string");
        file.metadata[name.str()] = string->str();
      }
      continue;
    }
    const llvm::json::Object *info = value.getAsObject();
    if (!info)
      return dataLoss("has a malformed entry for tensor '", key,
                      "': not an object");
    std::optional<llvm::StringRef> dtype = info->getString("dtype");
    if (!dtype)
      return dataLoss("has a malformed entry for tensor '", key, "': no dtype");
    int64_t elementSize = dtypeSize(*dtype);
    if (elementSize == 0) {
      if (isKnownUnsupportedDtype(*dtype))
        return absl::InvalidArgumentError(absl::StrCat(
            "safetensors file '", fileName, "': tensor '", key, "' has dtype ",
            dtype->str(), "; sd reads F32, F16, BF16 and F64"));
      return dataLoss("has a malformed entry for tensor '", key,
                      "': unknown dtype '", dtype->str(), "'");
    }
    std::optional<std::vector<int64_t>> shape =
        integerArray(info->get("shape"));
    if (!shape)
      return dataLoss("has a malformed entry for tensor '", key,
                      "': shape is not a list of non-negative integers");
    std::optional<std::vector<int64_t>> offsets =
        integerArray(info->get("data_offsets"));
    if (!offsets || offsets->size() != 2)
      return dataLoss("has a malformed entry for tensor '", key,
                      "': data_offsets is not two non-negative integers");
    int64_t begin = (*offsets)[0], end = (*offsets)[1];
    if (begin > end || end > dataSize)
      return dataLoss("is truncated or corrupt: tensor '", key,
                      "' has data_offsets [", begin, ", ", end,
                      "] but the data section has ", dataSize, " bytes");
    int64_t elements = checkedElements(*shape);
    int64_t expected = 0;
    if (elements < 0 ||
        __builtin_mul_overflow(elements, elementSize, &expected) ||
        expected != end - begin)
      return dataLoss("is corrupt: tensor '", key, "' of shape ",
                      formatShape(*shape), " and dtype ", dtype->str(),
                      " does not fit its data_offsets [", begin, ", ", end,
                      "] of ", end - begin, " bytes");
    SafetensorsTensor tensor;
    tensor.name = key;
    tensor.dtype = dtype->str();
    tensor.shape = std::move(*shape);
    tensor.fileBegin = dataStart + begin;
    tensor.fileEnd = dataStart + end;
    ranges.push_back({begin, end, file.tensors.size()});
    file.tensors.push_back(std::move(tensor));
  }

  // The ranges must cover the data section back to back.
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  int64_t expectedBegin = 0;
  for (const Range &range : ranges) {
    const std::string &name = file.tensors[range.tensor].name;
    if (range.begin < expectedBegin)
      return dataLoss("is corrupt: tensor '", name, "' at [", range.begin, ", ",
                      range.end, "] overlaps the tensor before it");
    if (range.begin > expectedBegin)
      return dataLoss("is corrupt: a gap of ", range.begin - expectedBegin,
                      " bytes before tensor '", name, "'");
    expectedBegin = range.end;
  }
  if (expectedBegin != dataSize)
    return dataLoss("is corrupt: its tensors end at byte ", expectedBegin,
                    " of the data section but it has ", dataSize, " bytes");

  // In file order.
  std::vector<SafetensorsTensor> ordered;
  ordered.reserve(ranges.size());
  for (const Range &range : ranges)
    ordered.push_back(std::move(file.tensors[range.tensor]));
  file.tensors = std::move(ordered);
  return file;
}

absl::StatusOr<SafetensorsFile> parseSafetensors(std::string_view bytes,
                                                 const std::string &fileName) {
  auto dataLoss = [&](auto &&...parts) {
    return absl::DataLossError(
        absl::StrCat("safetensors file '", fileName, "' ", parts...));
  };
  if (bytes.size() < 8)
    return dataLoss("is truncated: ", bytes.size(),
                    " bytes, too short for the header length");
  uint64_t headerSize = llvm::support::endian::read64le(bytes.data());
  if (headerSize > bytes.size() - 8)
    return dataLoss("is truncated: its header has ", headerSize,
                    " bytes but the file only ", bytes.size());
  absl::StatusOr<SafetensorsFile> file = parseSafetensorsHeader(
      bytes.substr(8, headerSize),
      static_cast<int64_t>(bytes.size() - 8 - headerSize), fileName);
  if (!file.ok())
    return file.status();
  for (SafetensorsTensor &tensor : file->tensors) {
    int64_t elements = checkedElements(tensor.shape);
    tensor.values.resize(static_cast<size_t>(elements));
    convertToFloat(tensor.dtype, bytes.data() + tensor.fileBegin, elements,
                   tensor.values.data());
  }
  return file;
}

//===----------------------------------------------------------------------===//
// Ranged reading
//===----------------------------------------------------------------------===//

namespace {

/// Reads exactly `size` bytes at `offset`, retrying short reads and EINTR;
/// false with errno set (0 at an early end of file).
bool preadAll(int fd, char *out, int64_t size, int64_t offset) {
  while (size > 0) {
    ssize_t got = ::pread(
        fd, out, static_cast<size_t>(std::min<int64_t>(size, int64_t(1) << 30)),
        offset);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    if (got == 0) {
      errno = 0;
      return false;
    }
    out += got;
    size -= got;
    offset += got;
  }
  return true;
}

} // namespace

SafetensorsReader::SafetensorsReader(std::string path, int fd,
                                     SafetensorsFile header,
                                     int64_t headerBytes)
    : filePath(std::move(path)), fd(fd), header(std::move(header)),
      read(headerBytes) {}

SafetensorsReader::~SafetensorsReader() { ::close(fd); }

absl::StatusOr<std::unique_ptr<SafetensorsReader>>
SafetensorsReader::open(const std::string &path) {
  auto dataLoss = [&](auto &&...parts) {
    return absl::DataLossError(
        absl::StrCat("safetensors file '", path, "' ", parts...));
  };
  // A FIFO would block and a device never end: regular files only.
  if (absl::Status status = checkRegularFile(path, "safetensors file");
      !status.ok())
    return status;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return osError(errno, "cannot open", path);
  FileCloser closer(fd);
  struct stat info;
  if (::fstat(fd, &info) != 0)
    return osError(errno, "cannot stat", path);
  int64_t size = static_cast<int64_t>(info.st_size);
  char length[8];
  if (size < 8 || !preadAll(fd, length, 8, 0))
    return dataLoss("is truncated: ", size,
                    " bytes, too short for the header length");
  uint64_t headerSize = llvm::support::endian::read64le(length);
  if (headerSize > static_cast<uint64_t>(size - 8))
    return dataLoss("is truncated: its header has ", headerSize,
                    " bytes but the file only ", size);
  if (headerSize > static_cast<uint64_t>(kMaxSafetensorsHeaderBytes))
    return dataLoss("has a header of ", headerSize, " bytes, more than the ",
                    kMaxSafetensorsHeaderBytes, " a safetensors file may have");
  std::string text(static_cast<size_t>(headerSize), '\0');
  if (!preadAll(fd, text.data(), static_cast<int64_t>(headerSize), 8))
    return osError(errno, "cannot read", path);
  absl::StatusOr<SafetensorsFile> header = parseSafetensorsHeader(
      text, size - 8 - static_cast<int64_t>(headerSize), path);
  if (!header.ok())
    return header.status();
  int owned = fd;
  closer.disown();
  return std::unique_ptr<SafetensorsReader>(new SafetensorsReader(
      path, owned, std::move(*header), 8 + static_cast<int64_t>(headerSize)));
}

int64_t SafetensorsReader::bytesRead() const { return read.load(); }

absl::Status SafetensorsReader::readBytes(int64_t begin, int64_t size,
                                          char *out) const {
  if (!preadAll(fd, out, size, begin))
    return errno ? osError(errno, "cannot read", filePath)
                 : absl::DataLossError(
                       absl::StrCat("safetensors file '", filePath,
                                    "' ends before byte ", begin + size));
  read += size;
  return absl::OkStatus();
}

absl::Status SafetensorsReader::readBlock(const SafetensorsTensor &tensor,
                                          const std::vector<int64_t> &offsets,
                                          const std::vector<int64_t> &shape,
                                          float *out) const {
  size_t rank = tensor.shape.size();
  if (offsets.size() != rank || shape.size() != rank)
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", tensor.name, "' of '", filePath, "' has rank ", rank));
  for (size_t d = 0; d < rank; ++d)
    if (offsets[d] < 0 || shape[d] < 0 ||
        offsets[d] + shape[d] > tensor.shape[d])
      return absl::InvalidArgumentError(absl::StrCat(
          "block ", formatShape(shape), " at ", formatShape(offsets),
          " is outside tensor '", tensor.name, "' ", formatShape(tensor.shape),
          " of '", filePath, "'"));
  int64_t elements = checkedElements(shape);
  if (elements == 0)
    return absl::OkStatus();
  int64_t elementSize = dtypeSize(tensor.dtype);
  // The block's trailing dimensions that span the whole tensor are read
  // with their row: a run of `run` contiguous elements per outer index.
  size_t split = rank;
  int64_t run = 1;
  while (split > 0) {
    run *= shape[split - 1];
    --split;
    if (shape[split] != tensor.shape[split])
      break;
  }
  if (rank == 0)
    run = 1;
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank; d-- > 1;)
    strides[d - 1] = strides[d] * tensor.shape[d];
  std::vector<char> bytes(static_cast<size_t>(run * elementSize));
  std::vector<int64_t> index(split, 0);
  for (int64_t done = 0; done < elements; done += run) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d)
      at += (offsets[d] + (d < split ? index[d] : 0)) * strides[d];
    if (absl::Status status = readBytes(tensor.fileBegin + at * elementSize,
                                        run * elementSize, bytes.data());
        !status.ok())
      return status;
    convertToFloat(tensor.dtype, bytes.data(), run, out + done);
    for (size_t d = split; d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsFile> readSafetensors(const std::string &path,
                                                uint64_t maxBytes) {
  absl::StatusOr<std::string> bytes =
      readFileBytes(path, "safetensors file", maxBytes);
  if (!bytes.ok())
    return bytes.status();
  return parseSafetensors(*bytes, path);
}

} // namespace sd::ckpt
