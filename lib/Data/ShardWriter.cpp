//===- ShardWriter.cpp - One dataset shard, written sample by sample ------===//

#include "ShardWriter.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "llvm/Support/Endian.h"

#include <zlib.h>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace sd::data {

namespace {

absl::Status osError(int error, const std::string &what,
                     const std::string &path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " '", path, "'"));
}

/// Writes all of `size` bytes to `fd` at its offset.
bool writeAll(int fd, const char *bytes, size_t size) {
  while (size > 0) {
    ssize_t done = ::write(fd, bytes, size);
    if (done < 0 && errno == EINTR)
      continue;
    if (done <= 0)
      return false;
    bytes += done;
    size -= static_cast<size_t>(done);
  }
  return true;
}

/// `text` as a JSON string (quotes, backslashes and control characters
/// escaped).
void appendJsonString(std::string &out, const std::string &text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\')
      absl::StrAppend(&out, "\\", std::string(1, c));
    else if (static_cast<unsigned char>(c) < 0x20)
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
    else
      out += c;
  }
  out += '"';
}

/// `count` followed by `shape`, as a JSON array.
std::string shapeOf(int64_t count, const std::vector<int64_t> &shape) {
  return absl::StrCat("[", count, shape.empty() ? "" : ",",
                      absl::StrJoin(shape, ","), "]");
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (int64_t size : shape)
    elements *= size;
  return elements;
}

} // namespace

ShardWriter::ShardWriter(std::string path, const DatasetIndex &index,
                         int64_t capacity,
                         std::map<std::string, std::string> metadata)
    : path(std::move(path)), feature(index.sampleFeature),
      sampleShape(index.sampleShape), embeddingShape(index.embeddingShape),
      hasLabels(index.hasLabels), capacity(capacity),
      metadata(std::move(metadata)) {}

ShardWriter::~ShardWriter() {
  if (fd >= 0)
    ::close(fd);
  if (embeddingFd >= 0)
    ::close(embeddingFd);
}

absl::StatusOr<std::unique_ptr<ShardWriter>>
ShardWriter::create(const std::string &path, const DatasetIndex &index,
                    int64_t capacity,
                    const std::map<std::string, std::string> &metadata) {
  std::unique_ptr<ShardWriter> writer(
      new ShardWriter(path, index, capacity, metadata));
  // Shapes and offsets only get shorter for fewer samples.
  uint64_t size = writer->header(capacity).size();
  writer->reserved = (size + 7) / 8 * 8;
  writer->fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (writer->fd < 0)
    return osError(errno, "cannot create", path);
  off_t dataBegin = static_cast<off_t>(8 + writer->reserved);
  if (::lseek(writer->fd, dataBegin, SEEK_SET) != dataBegin)
    return osError(errno, "cannot write", path);
  if (index.embeddingShape) {
    std::string side = path + ".embeddings";
    writer->embeddingFd =
        ::open(side.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (writer->embeddingFd < 0)
      return osError(errno, "cannot create", side);
    // Unlinked at once: the descriptor keeps it until the writer is gone.
    ::unlink(side.c_str());
  }
  return writer;
}

std::string ShardWriter::header(int64_t count) const {
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
  auto tensor = [&](const std::string &name,
                    const std::vector<int64_t> &shape) {
    int64_t bytes = count * product(shape) * 4;
    if (header.back() != '{')
      header += ',';
    appendJsonString(header, name);
    absl::StrAppend(&header,
                    ":{\"dtype\":\"F32\",\"shape\":", shapeOf(count, shape),
                    ",\"data_offsets\":[", offset, ",", offset + bytes, "]}");
    offset += bytes;
  };
  tensor(feature, sampleShape);
  if (hasLabels)
    tensor("labels", {});
  if (embeddingShape)
    tensor("embeddings", *embeddingShape);
  header += '}';
  return header;
}

absl::Status ShardWriter::append(const char *bytes, size_t size) {
  // zlib's crc32 of a null buffer is its initial value, not `crc`.
  if (size == 0)
    return absl::OkStatus();
  if (!writeAll(fd, bytes, size))
    return osError(errno, "cannot write", path);
  crc = static_cast<uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef *>(bytes), size));
  written += size;
  return absl::OkStatus();
}

absl::Status ShardWriter::add(absl::Span<const float> sample,
                              std::optional<int64_t> label,
                              absl::Span<const float> embedding) {
  if (samples == capacity)
    return absl::InternalError(
        absl::StrCat("dataset shard '", path, "' is full"));
  if (absl::Status status =
          append(reinterpret_cast<const char *>(sample.data()),
                 sample.size() * sizeof(float));
      !status.ok())
    return status;
  if (label)
    labels.push_back(static_cast<float>(*label));
  if (embeddingFd >= 0 &&
      !writeAll(embeddingFd, reinterpret_cast<const char *>(embedding.data()),
                embedding.size() * sizeof(float)))
    return osError(errno, "cannot write", path + ".embeddings");
  ++samples;
  return absl::OkStatus();
}

absl::Status ShardWriter::finish(ShardInfo &shard) {
  if (absl::Status status =
          append(reinterpret_cast<const char *>(labels.data()),
                 labels.size() * sizeof(float));
      !status.ok())
    return status;
  if (embeddingFd >= 0) {
    if (::lseek(embeddingFd, 0, SEEK_SET) != 0)
      return osError(errno, "cannot read", path + ".embeddings");
    char chunk[1 << 16];
    while (true) {
      ssize_t got = ::read(embeddingFd, chunk, sizeof(chunk));
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        return osError(errno, "cannot read", path + ".embeddings");
      if (got == 0)
        break;
      if (absl::Status status = append(chunk, static_cast<size_t>(got));
          !status.ok())
        return status;
    }
  }
  // The header now that the count is known, in the room kept for it.
  std::string prefix(8, '\0');
  llvm::support::endian::write64le(prefix.data(), reserved);
  prefix += header(samples);
  prefix.resize(8 + reserved, ' ');
  for (size_t done = 0; done < prefix.size();) {
    ssize_t put = ::pwrite(fd, prefix.data() + done, prefix.size() - done,
                           static_cast<off_t>(done));
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0)
      return osError(errno, "cannot write", path);
    done += static_cast<size_t>(put);
  }
  if (::fsync(fd) != 0)
    return osError(errno, "cannot fsync", path);
  int closing = fd;
  fd = -1;
  if (::close(closing) != 0)
    return osError(errno, "cannot close", path);
  uLong prefixCrc =
      crc32_z(0, reinterpret_cast<const Bytef *>(prefix.data()), prefix.size());
  shard.count = samples;
  shard.sizeBytes = static_cast<int64_t>(prefix.size() + written);
  shard.crc32 = static_cast<uint32_t>(
      crc32_combine(prefixCrc, crc, static_cast<z_off_t>(written)));
  return absl::OkStatus();
}

} // namespace sd::data
