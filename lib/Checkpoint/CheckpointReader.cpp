//===- CheckpointReader.cpp - Blocks read from a checkpoint's files -------===//
//
// CheckpointReader (sd/Checkpoint/Checkpoint.h): a checkpoint's manifest
// and shard headers checked once, then any block of a tensor read from the
// stored blocks it overlaps, each stored block's CRC checked as it is read.
//
//===----------------------------------------------------------------------===//

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Safetensors.h"

#include "CheckpointDetail.h"
#include "ManifestIO.h"

#include "absl/strings/str_cat.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CRC.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

namespace sd::ckpt {

namespace proto = ::sd::checkpoint;

//===----------------------------------------------------------------------===//
// Reading blocks
//===----------------------------------------------------------------------===//

struct CheckpointReader::Impl {
  proto::Manifest manifest;
  /// Tensor index by name, and per shard file its header's tensors.
  std::unordered_map<std::string, int> tensors;
  std::map<std::string, std::unique_ptr<SafetensorsReader>> files;
};

CheckpointReader::CheckpointReader(std::string stepDir,
                                   std::unique_ptr<Impl> impl)
    : stepDir(std::move(stepDir)), impl(std::move(impl)) {}

CheckpointReader::~CheckpointReader() = default;

absl::StatusOr<std::unique_ptr<CheckpointReader>>
CheckpointReader::open(const std::string &stepDir) {
  absl::StatusOr<proto::Manifest> manifest = readCheckedManifest(stepDir);
  if (!manifest.ok())
    return manifest.status();
  auto impl = std::make_unique<Impl>();
  for (const proto::ShardFile &file : manifest->files()) {
    std::string path = stepDir + "/" + file.name();
    absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader =
        SafetensorsReader::open(path);
    if (!reader.ok()) {
      if (absl::IsNotFound(reader.status()))
        return absl::DataLossError(
            absl::StrCat("checkpoint shard '", path, "' is missing"));
      if (absl::IsDataLoss(reader.status()))
        return absl::DataLossError(
            absl::StrCat("checkpoint shard '", path,
                         "' is corrupt: ", reader.status().message()));
      return reader.status();
    }
    impl->files[file.name()] = std::move(*reader);
  }
  // Every block the manifest puts in a file is there, as F32 of its shape.
  for (int t = 0; t < manifest->tensors_size(); ++t) {
    const proto::Tensor &tensor = manifest->tensors(t);
    impl->tensors[tensor.name()] = t;
    for (const proto::Block &block : tensor.blocks()) {
      const SafetensorsReader &file = *impl->files.at(block.file());
      const SafetensorsTensor *stored = file.find(tensor.name());
      std::vector<int64_t> shape(block.shape().begin(), block.shape().end());
      if (!stored || stored->shape != shape || stored->dtype != "F32")
        return absl::DataLossError(
            absl::StrCat("checkpoint shard '", file.path(),
                         "' does not hold tensor '", tensor.name(), "' as F32 ",
                         formatShape(shape), ", where the manifest puts it"));
    }
  }
  impl->manifest = std::move(*manifest);
  std::unique_ptr<CheckpointReader> reader(
      new CheckpointReader(stepDir, std::move(impl)));
  reader->checkpointMeta = metaOf(reader->impl->manifest);
  reader->writtenMesh = meshOf(reader->impl->manifest);
  return reader;
}

absl::Status CheckpointReader::check(const rt::ProgramSpec &spec) const {
  for (const rt::ArgumentSpec &arg : spec.arguments) {
    if (arg.kind == rt::ArgumentKind::Input || !arg.isStored())
      continue;
    auto it = impl->tensors.find(arg.name);
    if (it == impl->tensors.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint '", stepDir, "' has no tensor '", arg.name, "'"));
    const proto::Tensor &tensor = impl->manifest.tensors(it->second);
    std::vector<int64_t> shape(tensor.global_shape().begin(),
                               tensor.global_shape().end());
    if (shape != arg.globalShape)
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", arg.name, "' is ", formatShape(shape), " in checkpoint '",
          stepDir, "' but ", formatShape(arg.globalShape), " in the program"));
  }
  return absl::OkStatus();
}

bool CheckpointReader::holds(const std::string &name,
                             const std::vector<int64_t> &shape) const {
  auto it = impl->tensors.find(name);
  if (it == impl->tensors.end())
    return false;
  const proto::Tensor &tensor = impl->manifest.tensors(it->second);
  return std::vector<int64_t>(tensor.global_shape().begin(),
                              tensor.global_shape().end()) == shape;
}

int64_t CheckpointReader::bytesRead() const {
  int64_t bytes = 0;
  for (const auto &[name, file] : impl->files)
    bytes += file->bytesRead();
  return bytes;
}

absl::Status CheckpointReader::readBlock(const std::string &name,
                                         const std::vector<int64_t> &offsets,
                                         const std::vector<int64_t> &shape,
                                         float *out) const {
  auto it = impl->tensors.find(name);
  if (it == impl->tensors.end())
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint '", stepDir, "' has no tensor '", name, "'"));
  const proto::Tensor &tensor = impl->manifest.tensors(it->second);
  size_t rank = shape.size();
  // What no stored block covers is the padding of a block past the end of
  // the tensor: zeros.
  std::fill(out, out + checkedElements(shape), 0.0f);
  if (static_cast<size_t>(tensor.global_shape_size()) != rank ||
      offsets.size() != rank)
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", name, "' of checkpoint '", stepDir, "' has rank ",
        tensor.global_shape_size(), ", not ", rank));
  for (const proto::Block &block : tensor.blocks()) {
    std::vector<int64_t> from(block.offset().begin(), block.offset().end());
    std::vector<int64_t> size(block.shape().begin(), block.shape().end());
    // The overlap of the stored block with the one asked for.
    bool overlaps = true;
    for (size_t d = 0; d < rank; ++d)
      overlaps &= from[d] < offsets[d] + shape[d] &&
                  offsets[d] < from[d] + size[d] && size[d] > 0;
    if (!overlaps && rank > 0)
      continue;
    const SafetensorsReader &file = *impl->files.at(block.file());
    const SafetensorsTensor &stored = *file.find(name);
    auto corrupt = [&](auto &&...parts) {
      return absl::DataLossError(absl::StrCat("checkpoint shard '", file.path(),
                                              "' is corrupt: tensor '", name,
                                              "' ", parts...));
    };
    if (rank == 0) {
      if (absl::Status status = file.readBytes(stored.fileBegin, 4,
                                               reinterpret_cast<char *>(out));
          !status.ok())
        return status;
      uint32_t crc = crcOf(reinterpret_cast<const char *>(out), 4);
      if (crc != block.crc32())
        return corrupt("has crc32 ", hex32(crc), " != manifest's ",
                       hex32(block.crc32()));
      continue;
    }
    // Whole rows of the stored block, up to 1 MiB at a time: the CRC runs
    // over all of them, the overlap's parts are copied out.
    int64_t inner = size[rank - 1];
    int64_t rowBytes = inner * 4;
    int64_t rows = checkedElements(size) / std::max<int64_t>(inner, 1);
    int64_t perRead = std::max<int64_t>(1, (int64_t(1) << 20) /
                                               std::max<int64_t>(rowBytes, 1));
    std::vector<float> piece(
        static_cast<size_t>(std::min(rows, perRead) * inner));
    std::vector<int64_t> outStrides(rank, 1);
    for (size_t d = rank - 1; d-- > 0;)
      outStrides[d] = outStrides[d + 1] * shape[d + 1];
    int64_t lo = std::max(from[rank - 1], offsets[rank - 1]);
    int64_t hi =
        std::min(from[rank - 1] + inner, offsets[rank - 1] + shape[rank - 1]);
    uint32_t crc = 0;
    std::vector<int64_t> index(rank, 0);
    for (int64_t row = 0; row < rows; row += perRead) {
      int64_t count = std::min(perRead, rows - row);
      if (absl::Status status = file.readBytes(
              stored.fileBegin + row * rowBytes, count * rowBytes,
              reinterpret_cast<char *>(piece.data()));
          !status.ok())
        return status;
      crc =
          llvm::crc32(crc, llvm::ArrayRef<uint8_t>(
                               reinterpret_cast<const uint8_t *>(piece.data()),
                               static_cast<size_t>(count * rowBytes)));
      for (int64_t r = 0; r < count; ++r) {
        // Is this row (global coordinates from + index) inside the block?
        bool inside = lo < hi;
        int64_t at = 0;
        for (size_t d = 0; inside && d + 1 < rank; ++d) {
          int64_t g = from[d] + index[d];
          inside = g >= offsets[d] && g < offsets[d] + shape[d];
          at += (g - offsets[d]) * outStrides[d];
        }
        if (inside)
          std::memcpy(out + at + (lo - offsets[rank - 1]),
                      piece.data() + r * inner + (lo - from[rank - 1]),
                      static_cast<size_t>(hi - lo) * sizeof(float));
        for (size_t d = rank - 1; d-- > 0;) {
          if (++index[d] < size[d])
            break;
          index[d] = 0;
        }
      }
    }
    if (crc != block.crc32())
      return corrupt("has crc32 ", hex32(crc), " != manifest's ",
                     hex32(block.crc32()));
  }
  return absl::OkStatus();
}

} // namespace sd::ckpt
