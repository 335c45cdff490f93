//===- ManifestIO.cpp - Checkpoint manifests as bytes ---------------------===//
//
// The seal, the parse and the verification of a manifest, and the checks of
// its shard files' sizes. Every value a manifest declares is checked here
// before the loader sizes anything from it.
//
//===----------------------------------------------------------------------===//

#include "ManifestIO.h"

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Sharding/Mesh.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace sd::ckpt {

namespace proto = ::sd::checkpoint;

namespace {

/// The key of Manifest.manifest_crc32 (field 100, wire type fixed32) and
/// the bytes it takes with its value.
constexpr uint8_t kSealTag[2] = {0xa5, 0x06};
constexpr size_t kSealBytes = 6;

/// a + b, saturating at INT64_MAX (sizes to compare, never to allocate).
int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum)
             ? std::numeric_limits<int64_t>::max()
             : sum;
}

/// Checks the seal and parses; the message names the manifest's path.
absl::StatusOr<proto::Manifest> unseal(std::string_view data,
                                       const std::string &path) {
  bool sealed = data.size() >= kSealBytes &&
                static_cast<uint8_t>(data[data.size() - 6]) == kSealTag[0] &&
                static_cast<uint8_t>(data[data.size() - 5]) == kSealTag[1];
  if (!sealed)
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest '", path,
                     "' is truncated or corrupt (no checksum at its end)"));
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i)
    stored |=
        static_cast<uint32_t>(static_cast<uint8_t>(data[data.size() - 4 + i]))
        << (8 * i);
  uint32_t actual = llvm::crc32(llvm::arrayRefFromStringRef(
      llvm::StringRef(data.data(), data.size() - kSealBytes)));
  if (stored != actual)
    return absl::DataLossError(absl::StrFormat(
        "checkpoint manifest '%s' is corrupt: crc32 0x%08x != stored 0x%08x",
        path, actual, stored));
  proto::Manifest manifest;
  // Protobuf logs invalid UTF-8 in string fields to stderr; the one error
  // the caller reports is enough.
  google::protobuf::LogSilencer quiet;
  if (data.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !manifest.ParseFromArray(data.data(), static_cast<int>(data.size())))
    return absl::DataLossError(
        absl::StrCat("checkpoint manifest '", path, "' does not parse"));
  return manifest;
}

/// Checks that `tensor`'s blocks lie inside it, one per file, and form a
/// grid that tiles it: along each dimension the blocks' extents chain from
/// 0 to the size, and every cell of that grid is one block. sd writes such
/// grids (a block per coordinate of the splitting axes); sorting the extents
/// keeps the check O(blocks log blocks) where comparing every pair of
/// blocks took minutes for large meshes.
absl::Status checkTiling(const proto::Tensor &tensor,
                         const std::vector<int64_t> &globalShape,
                         const std::string &stepDir) {
  auto bad = [&](auto &&...parts) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", stepDir, "': tensor '", tensor.name(), "' ", parts...));
  };
  size_t rank = globalShape.size();
  std::set<std::string> files;
  // Per dimension, the extents [offset, offset + size) of non-empty blocks.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> extents(rank);
  std::vector<const proto::Block *> nonEmpty;
  for (const proto::Block &block : tensor.blocks()) {
    if (static_cast<size_t>(block.offset_size()) != rank ||
        static_cast<size_t>(block.shape_size()) != rank)
      return bad("has a block of rank ", block.shape_size(), " in '",
                 block.file(), "' for a tensor of rank ", rank);
    std::vector<int64_t> offset(block.offset().begin(), block.offset().end());
    std::vector<int64_t> shape(block.shape().begin(), block.shape().end());
    for (size_t d = 0; d < rank; ++d)
      if (offset[d] < 0 || shape[d] < 0 ||
          offset[d] > globalShape[d] - shape[d])
        return bad("has a block at ", formatShape(offset), " of shape ",
                   formatShape(shape), " in '", block.file(),
                   "' outside its shape ", formatShape(globalShape));
    if (!files.insert(block.file()).second)
      return bad("has two blocks in '", block.file(), "'");
    // An empty block holds nothing to place (an empty tensor's are all so).
    if (checkedElements(shape) == 0)
      continue;
    nonEmpty.push_back(&block);
    for (size_t d = 0; d < rank; ++d)
      extents[d].emplace_back(offset[d], shape[d]);
  }
  if (checkedElements(globalShape) == 0)
    return absl::OkStatus();

  int64_t cells = 1;
  for (size_t d = 0; d < rank; ++d) {
    std::vector<std::pair<int64_t, int64_t>> &along = extents[d];
    std::sort(along.begin(), along.end());
    along.erase(std::unique(along.begin(), along.end()), along.end());
    int64_t end = 0;
    for (auto [offset, size] : along) {
      if (offset != end)
        return bad("has blocks that do not tile dimension ", d, " of size ",
                   globalShape[d], ": ",
                   offset < end ? "an extent overlaps the one before it at "
                                : "nothing covers ",
                   offset < end ? offset : end);
      end = offset + size;
    }
    if (end != globalShape[d])
      return bad("has blocks that do not tile dimension ", d, " of size ",
                 globalShape[d], ": nothing covers ", end);
    if (__builtin_mul_overflow(cells, static_cast<int64_t>(along.size()),
                               &cells))
      cells = std::numeric_limits<int64_t>::max();
  }
  // Each non-empty block is one cell of the grid; distinct cells, as many
  // as the grid has, cover the tensor exactly.
  std::map<std::vector<size_t>, const proto::Block *> cellOf;
  for (const proto::Block *block : nonEmpty) {
    std::vector<size_t> cell(rank);
    for (size_t d = 0; d < rank; ++d)
      cell[d] =
          std::lower_bound(extents[d].begin(), extents[d].end(),
                           std::make_pair(block->offset(d), block->shape(d))) -
          extents[d].begin();
    auto [it, inserted] = cellOf.emplace(std::move(cell), block);
    if (!inserted)
      return bad("has overlapping blocks in '", it->second->file(), "' and '",
                 block->file(), "'");
  }
  if (static_cast<int64_t>(nonEmpty.size()) != cells)
    return bad("has ", nonEmpty.size(), " blocks that do not cover its shape ",
               formatShape(globalShape), " (a grid of ", cells, " blocks)");
  return absl::OkStatus();
}

/// The checks of parseManifest after the parse.
absl::Status verifyManifest(const proto::Manifest &manifest,
                            const std::string &stepDir) {
  auto bad = [&](auto &&...parts) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", stepDir, "': ", parts...));
  };
  if (manifest.format_version() != kFormatVersion)
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint '", stepDir, "' has format version ",
        manifest.format_version(), "; this sd reads version ", kFormatVersion));
  // A negative step would train from step -5 (or ~1e19 steps from
  // INT64_MIN); a name that disagrees would send --resume to the wrong step.
  if (manifest.step() < 0)
    return bad("its manifest says step ", manifest.step(),
               "; steps are never negative");
  int64_t named = stepOfDirectoryName(llvm::sys::path::filename(stepDir));
  if (named >= 0 && named != manifest.step())
    return bad("the directory is named for step ", named,
               " but its manifest says step ", manifest.step(), "; rename it to ",
               stepDirectoryName(manifest.step()), " or remove it");

  std::vector<MeshAxis> axes;
  for (const proto::MeshAxis &axis : manifest.mesh()) {
    if (axis.dcn() <= 0 || axis.size() <= 0 || axis.size() % axis.dcn() != 0)
      return bad("mesh axis '", axis.name(), "' has size ", axis.size(),
                 " and DCN part ", axis.dcn(),
                 "; the DCN part must divide the size");
    axes.push_back(MeshAxis{axis.name(), axis.size() / axis.dcn(), axis.dcn()});
  }
  if (absl::Status status = verifyMeshAxes(axes); !status.ok())
    return bad(status.message());

  std::set<std::string> files;
  int64_t fileBytes = 0;
  for (const proto::ShardFile &file : manifest.files()) {
    if (file.name().empty() || file.name().find('/') != std::string::npos ||
        file.name() == "." || file.name() == "..")
      return bad("bad shard file name '", file.name(), "'");
    if (!files.insert(file.name()).second)
      return bad("shard file '", file.name(), "' is listed twice");
    if (file.size_bytes() < 0)
      return bad("shard file '", file.name(), "' has size ", file.size_bytes());
    fileBytes = saturatingAdd(fileBytes, file.size_bytes());
  }

  std::set<std::string> names;
  int64_t tensorBytes = 0;
  for (const proto::Tensor &tensor : manifest.tensors()) {
    if (!names.insert(tensor.name()).second)
      return bad("tensor '", tensor.name(), "' is listed twice");
    if (!proto::Tensor::Kind_IsValid(tensor.kind()) ||
        tensor.kind() == proto::Tensor::KIND_UNSPECIFIED)
      return bad("tensor '", tensor.name(), "' has an unknown kind ",
                 static_cast<int>(tensor.kind()));
    if (tensor.dtype() != "F32")
      return bad("tensor '", tensor.name(), "' has dtype '", tensor.dtype(),
                 "'; sd checkpoints are F32");
    std::vector<int64_t> shape(tensor.global_shape().begin(),
                               tensor.global_shape().end());
    int64_t elements = checkedElements(shape);
    if (elements < 0)
      return bad("tensor '", tensor.name(), "' has a bad shape ",
                 formatShape(shape));
    if (absl::Status status = checkTiling(tensor, shape, stepDir); !status.ok())
      return status;
    for (const proto::Block &block : tensor.blocks())
      if (!files.count(block.file()))
        return bad("tensor '", tensor.name(), "' has a block in '",
                   block.file(), "', which the manifest does not list");
    // The blocks hold the tensor once, in the shard files: a tensor larger
    // than all of them is a lie that would be allocated before any file
    // is read.
    int64_t bytes = 0;
    if (__builtin_mul_overflow(elements, int64_t(sizeof(float)), &bytes))
      bytes = std::numeric_limits<int64_t>::max();
    tensorBytes = saturatingAdd(tensorBytes, bytes);
    if (tensorBytes > fileBytes)
      return bad("tensor '", tensor.name(), "' of shape ", formatShape(shape),
                 " does not fit in the shard files, which hold ", fileBytes,
                 " bytes in all");
  }
  return absl::OkStatus();
}

} // namespace

std::string formatShape(const std::vector<int64_t> &shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t checkedElements(const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (int64_t size : shape)
    if (size < 0 || __builtin_mul_overflow(elements, size, &elements))
      return -1;
  return elements;
}

int64_t stepOfDirectoryName(std::string_view text) {
  llvm::StringRef name(text.data(), text.size());
  if (!name.consume_front("step_") || name.empty() ||
      name.find_first_not_of("0123456789") != llvm::StringRef::npos)
    return -1;
  int64_t step = 0;
  if (name.getAsInteger(10, step))
    return -1;
  return step;
}

std::string serializeManifest(const proto::Manifest &manifest) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    manifest.SerializeToCodedStream(&coded);
  }
  uint32_t crc = llvm::crc32(llvm::arrayRefFromStringRef(bytes));
  bytes.push_back(static_cast<char>(kSealTag[0]));
  bytes.push_back(static_cast<char>(kSealTag[1]));
  for (int i = 0; i < 4; ++i)
    bytes.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  return bytes;
}

absl::StatusOr<proto::Manifest> parseManifest(std::string_view bytes,
                                              const std::string &stepDir) {
  absl::StatusOr<proto::Manifest> manifest =
      unseal(bytes, stepDir + "/" + kManifestName);
  if (!manifest.ok())
    return manifest.status();
  if (absl::Status status = verifyManifest(*manifest, stepDir); !status.ok())
    return status;
  return manifest;
}

absl::Status checkShardSize(const std::string &path, int64_t size,
                            const proto::ShardFile &file) {
  if (size < file.size_bytes())
    return absl::DataLossError(
        absl::StrCat("checkpoint shard '", path, "' is truncated: ", size,
                     " bytes, manifest says ", file.size_bytes()));
  if (size != file.size_bytes())
    return absl::DataLossError(
        absl::StrCat("checkpoint shard '", path, "' has ", size,
                     " bytes, manifest says ", file.size_bytes()));
  return absl::OkStatus();
}

absl::Status checkShardSizesOnDisk(const proto::Manifest &manifest,
                                   const std::string &stepDir) {
  for (const proto::ShardFile &file : manifest.files()) {
    std::string path = stepDir + "/" + file.name();
    uint64_t size = 0;
    if (llvm::sys::fs::file_size(path, size))
      return absl::DataLossError(
          absl::StrCat("checkpoint shard '", path, "' is missing"));
    if (absl::Status status =
            checkShardSize(path, static_cast<int64_t>(size), file);
        !status.ok())
      return status;
  }
  return absl::OkStatus();
}

} // namespace sd::ckpt
