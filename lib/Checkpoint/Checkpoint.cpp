//===- Checkpoint.cpp - Sharded checkpoints of training sessions ----------===//

#include "sd/Checkpoint/Checkpoint.h"
#include "sd/Checkpoint/Safetensors.h"

#include "CheckpointDetail.h"
#include "ManifestIO.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CRC.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <thread>
#include <unordered_map>

namespace sd::ckpt {

namespace proto = ::sd::checkpoint;

std::string hex32(uint32_t value) { return absl::StrFormat("0x%08x", value); }

uint32_t crcOf(const char *data, size_t size) {
  return llvm::crc32(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(data), size));
}

namespace {

//===----------------------------------------------------------------------===//
// Manifest helpers
//===----------------------------------------------------------------------===//

proto::Tensor::Kind toProto(rt::ArgumentKind kind) {
  switch (kind) {
  case rt::ArgumentKind::Parameter:
    return proto::Tensor::PARAMETER;
  case rt::ArgumentKind::OptimizerState:
    return proto::Tensor::OPTIMIZER_STATE;
  case rt::ArgumentKind::Input:
    return proto::Tensor::INPUT;
  case rt::ArgumentKind::Step:
    return proto::Tensor::STEP;
  case rt::ArgumentKind::Hyperparameters:
    // Not stored: the run gives them.
    break;
  }
  return proto::Tensor::KIND_UNSPECIFIED;
}

std::optional<rt::ArgumentKind> fromProto(proto::Tensor::Kind kind) {
  switch (kind) {
  case proto::Tensor::PARAMETER:
    return rt::ArgumentKind::Parameter;
  case proto::Tensor::OPTIMIZER_STATE:
    return rt::ArgumentKind::OptimizerState;
  case proto::Tensor::INPUT:
    return rt::ArgumentKind::Input;
  case proto::Tensor::STEP:
    return rt::ArgumentKind::Step;
  default:
    return std::nullopt;
  }
}

/// Reads, parses and verifies `stepDir`'s manifest (parseManifest):
/// NotFound when it is missing, DataLoss when it is damaged.
absl::StatusOr<proto::Manifest> readManifest(const std::string &stepDir) {
  absl::StatusOr<std::string> bytes = readFileBytes(
      stepDir + "/" + kManifestName, "checkpoint manifest", uint64_t(64) << 20);
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status()))
      return absl::NotFoundError(absl::StrCat(
          "checkpoint '", stepDir, "' has no manifest (an incomplete write?)"));
    return bytes.status();
  }
  return parseManifest(*bytes, stepDir);
}

//===----------------------------------------------------------------------===//
// Blocks
//===----------------------------------------------------------------------===//

/// Identifies a device's block of `spec`: its coordinates on the axes that
/// split the tensor (devices that differ only on other axes hold replicas).
std::vector<int64_t> blockKey(const rt::ArgumentSpec &spec,
                              const std::vector<int64_t> &coords) {
  std::vector<int64_t> key;
  for (const std::vector<int32_t> &axes : spec.dimAxes)
    for (int32_t axis : axes)
      key.push_back(coords[axis]);
  return key;
}

/// Copies a row-major block of `shape` at `offset` into the global tensor.
void placeBlock(const std::vector<int64_t> &globalShape,
                const std::vector<int64_t> &offset,
                const std::vector<int64_t> &shape, const float *block,
                float *global) {
  size_t rank = shape.size();
  if (rank == 0) {
    *global = *block;
    return;
  }
  int64_t elements = checkedElements(shape);
  if (elements == 0)
    return;
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank - 1; d-- > 0;)
    strides[d] = strides[d + 1] * globalShape[d + 1];
  int64_t inner = shape[rank - 1];
  int64_t rows = elements / inner;
  std::vector<int64_t> index(rank, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t at = offset[rank - 1];
    for (size_t d = 0; d + 1 < rank; ++d)
      at += (offset[d] + index[d]) * strides[d];
    std::memcpy(global + at, block + row * inner, inner * sizeof(float));
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

/// Runs `fn(0)` ... `fn(n - 1)` on up to `maxThreads` threads (inline when
/// one suffices) and waits for all.
void parallelFor(int64_t n, int64_t maxThreads,
                 const std::function<void(int64_t)> &fn) {
  int64_t workers = std::min(n, maxThreads);
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (int64_t i = next++; i < n; i = next++)
        fn(i);
    });
  for (std::thread &thread : threads)
    thread.join();
}

} // namespace

std::string stepDirectoryName(int64_t step) {
  return absl::StrFormat("step_%08d", step);
}

//===----------------------------------------------------------------------===//
// Saving
//===----------------------------------------------------------------------===//

namespace {

/// This process's devices' blocks of every argument (blocks[local device]
/// [argument]), and which device of the mesh owns each distinct block:
/// owned[device id] lists the arguments whose block that device writes (the
/// lowest-numbered device of the whole mesh holding the block).
struct ShardPlan {
  std::vector<std::vector<const float *>> blocks;
  std::vector<std::vector<size_t>> owned;
  /// The valid parts of padded blocks (blocks[d][i] points into one).
  std::vector<std::unique_ptr<std::vector<float>>> compacted;
};

/// The valid elements of `arg`'s padded block at `coords`, row-major in its
/// valid shape.
std::vector<float> compactBlock(const rt::ArgumentSpec &arg,
                                const std::vector<int64_t> &coords,
                                const float *block) {
  std::vector<float> valid(
      static_cast<size_t>(rt::numElements(arg.validShape(coords))));
  float *next = valid.data();
  arg.forEachValidRow(coords, [&](int64_t at, int64_t, int64_t count) {
    next = std::copy(block + at, block + at + count, next);
  });
  return valid;
}

absl::StatusOr<ShardPlan> planShards(rt::TrainingSession &session) {
  const rt::ProgramSpec &spec = session.spec();
  rt::MeshRuntime &runtime = session.runtime();
  const MeshSpec &mesh = runtime.mesh();
  int64_t numDevices = runtime.numDevices();
  // A runtime of one process of a multi-process mesh still plans the whole
  // mesh: ownership does not depend on which process asks.
  int64_t meshDevices = runtime.process() < 0 ? numDevices : mesh.numDevices();
  std::vector<std::vector<int64_t>> coords(meshDevices);
  for (int64_t g = 0; g < meshDevices; ++g)
    coords[g] = mesh.coordinates(g);
  ShardPlan plan;
  plan.blocks.resize(numDevices);
  plan.owned.resize(meshDevices);
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    for (int64_t d = 0; d < numDevices; ++d) {
      absl::StatusOr<rt::ConstBlock> block =
          session.deviceBlock(d, static_cast<int64_t>(i));
      if (!block.ok())
        return block.status();
      const rt::ArgumentSpec &arg = spec.arguments[i];
      const float *data = block->f32();
      const std::vector<int64_t> &at = coords[runtime.firstDeviceId() + d];
      if (arg.validShape(at) != arg.localShape) {
        plan.compacted.push_back(
            std::make_unique<std::vector<float>>(compactBlock(arg, at, data)));
        data = plan.compacted.back()->data();
      }
      plan.blocks[d].push_back(data);
    }
    // Each block once, by the first device that holds it; padding alone is
    // not stored.
    std::set<std::vector<int64_t>> seen;
    const rt::ArgumentSpec &arg = spec.arguments[i];
    for (int64_t g = 0; g < meshDevices && arg.isStored(); ++g)
      if (rt::numElements(arg.validShape(coords[g])) != 0 &&
          seen.insert(blockKey(arg, coords[g])).second)
        plan.owned[g].push_back(i);
  }
  return plan;
}

/// Creates `stepDir` and removes what an earlier, interrupted write of the
/// step left there, so that it holds only the files of this write (a stale
/// shard of a larger mesh would otherwise stay). AlreadyExists when the step
/// is complete.
absl::Status prepareStepDirectory(const std::string &stepDir) {
  if (std::error_code error = llvm::sys::fs::create_directories(stepDir))
    return absl::ErrnoToStatus(
        error.value(),
        absl::StrCat("cannot create checkpoint directory '", stepDir, "'"));
  if (llvm::sys::fs::exists(stepDir + "/" + kManifestName))
    return absl::AlreadyExistsError(
        absl::StrCat("checkpoint '", stepDir, "' already exists"));
  std::error_code error;
  std::vector<std::string> leftovers;
  for (llvm::sys::fs::directory_iterator it(stepDir, error), end;
       !error && it != end; it.increment(error)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name.ends_with(".tmp") ||
        (name.starts_with("device_") && name.ends_with(".safetensors")))
      leftovers.push_back(it->path());
  }
  if (error)
    return absl::ErrnoToStatus(error.value(),
                               absl::StrCat("cannot list '", stepDir, "'"));
  for (const std::string &path : leftovers)
    if (std::error_code removeError = llvm::sys::fs::remove(path))
      return absl::ErrnoToStatus(removeError.value(),
                                 absl::StrCat("cannot remove '", path, "'"));
  return absl::OkStatus();
}

/// What the shard writers produced: per device its file, and crcs[device][k]
/// the CRC-32 of the device's k-th owned block (by local index after
/// writeShards, by mesh id once every process's are gathered).
struct WrittenShards {
  std::vector<WrittenFile> files;
  std::vector<std::vector<uint32_t>> crcs;
};

std::string shardFileName(int64_t device) {
  return absl::StrCat("device_", device, ".safetensors");
}

/// Writes this process's devices' shard files into `stepDir`, one thread
/// per device (the writes overlap their fsyncs).
absl::StatusOr<WrittenShards>
writeShards(const std::string &stepDir, rt::TrainingSession &session,
            const ShardPlan &plan, int64_t step,
            const CheckpointWriteOptions &options) {
  const rt::ProgramSpec &spec = session.spec();
  int64_t numDevices = session.runtime().numDevices();
  int64_t first = session.runtime().firstDeviceId();
  std::string meshText = session.runtime().mesh().toString();
  std::vector<absl::StatusOr<WrittenFile>> written(
      numDevices, absl::UnknownError("not written"));
  WrittenShards shards;
  shards.crcs.resize(numDevices);
  auto writeShard = [&](int64_t d) {
    int64_t id = first + d;
    std::vector<SafetensorsTensorView> tensors;
    for (size_t i : plan.owned[id]) {
      const rt::ArgumentSpec &arg = spec.arguments[i];
      std::vector<int64_t> shape =
          arg.validShape(session.runtime().mesh().coordinates(id));
      shards.crcs[d].push_back(
          crcOf(reinterpret_cast<const char *>(plan.blocks[d][i]),
                rt::numElements(shape) * sizeof(float)));
      tensors.push_back({arg.name, std::move(shape), plan.blocks[d][i]});
    }
    std::map<std::string, std::string> metadata = {
        {"format", "sd"},
        {"sd.device", std::to_string(id)},
        {"sd.mesh", meshText},
        {"sd.step", std::to_string(step)}};
    std::function<void()> halfWritten;
    if (options.atPoint && id == 0)
      halfWritten = [&] { options.atPoint(WritePoint::Shard); };
    written[d] = writeSafetensors(stepDir + "/" + shardFileName(id), tensors,
                                  metadata, halfWritten);
  };
  parallelFor(numDevices, numDevices, writeShard);
  for (absl::StatusOr<WrittenFile> &file : written) {
    if (!file.ok())
      return file.status();
    shards.files.push_back(*file);
  }
  return shards;
}

//===----------------------------------------------------------------------===//
// Agreement between the processes of a multi-process mesh
//===----------------------------------------------------------------------===//

/// `status` into a process's message (code 0 when OK), and back.
void encodeStatus(const absl::Status &status, proto::ProcessShards &message) {
  message.set_error_code(static_cast<int32_t>(status.code()));
  message.set_error(std::string(status.message()));
}

absl::Status decodeStatus(const proto::ProcessShards &message) {
  return absl::Status(static_cast<absl::StatusCode>(message.error_code()),
                      message.error());
}

/// The first failure among every process's `status` (in rank order), the
/// same on every process; `status` itself without a group.
absl::Status agree(rt::ProcessGroup *group, const absl::Status &status) {
  if (!group)
    return status;
  proto::ProcessShards message;
  encodeStatus(status, message);
  absl::StatusOr<std::vector<std::string>> all =
      group->allGather(message.SerializeAsString());
  if (!all.ok())
    return all.status();
  for (const std::string &bytes : *all) {
    proto::ProcessShards part;
    if (!part.ParseFromString(bytes))
      return absl::DataLossError("a process sent an unreadable status");
    if (part.error_code() != 0)
      return decodeStatus(part);
  }
  return absl::OkStatus();
}

/// Every process's WrittenShards by mesh id, from this process's `mine`
/// (or its failure); the first failure in rank order on every process.
absl::StatusOr<WrittenShards>
gatherShards(rt::ProcessGroup *group, int64_t devicesPerProcess,
             const absl::StatusOr<WrittenShards> &mine) {
  if (!group)
    return mine;
  proto::ProcessShards message;
  if (!mine.ok()) {
    encodeStatus(mine.status(), message);
  } else {
    for (size_t d = 0; d < mine->files.size(); ++d) {
      proto::ShardFile *file = message.add_files();
      file->set_size_bytes(mine->files[d].sizeBytes);
      file->set_crc32(mine->files[d].crc32);
      proto::BlockCrcs *crcs = message.add_block_crcs();
      for (uint32_t crc : mine->crcs[d])
        crcs->add_crc32(crc);
    }
  }
  absl::StatusOr<std::vector<std::string>> all =
      group->allGather(message.SerializeAsString());
  if (!all.ok())
    return all.status();
  WrittenShards shards;
  for (size_t rank = 0; rank < all->size(); ++rank) {
    proto::ProcessShards part;
    if (!part.ParseFromString((*all)[rank]))
      return absl::DataLossError(absl::StrCat(
          "process ", rank, " sent an unreadable list of its shard files"));
    if (part.error_code() != 0)
      return decodeStatus(part);
    if (part.files_size() != devicesPerProcess ||
        part.block_crcs_size() != devicesPerProcess)
      return absl::DataLossError(
          absl::StrCat("process ", rank, " wrote ", part.files_size(),
                       " shard files, not ", devicesPerProcess));
    for (int64_t d = 0; d < devicesPerProcess; ++d) {
      shards.files.push_back(
          {part.files(d).size_bytes(), part.files(d).crc32()});
      const auto &crcs = part.block_crcs(d).crc32();
      shards.crcs.emplace_back(crcs.begin(), crcs.end());
    }
  }
  return shards;
}

/// The manifest of a checkpoint of `session` whose shards were written.
proto::Manifest buildManifest(rt::TrainingSession &session,
                              const CheckpointMeta &meta, const ShardPlan &plan,
                              const WrittenShards &shards) {
  const rt::ProgramSpec &spec = session.spec();
  rt::MeshRuntime &runtime = session.runtime();
  const MeshSpec &mesh = runtime.mesh();
  proto::Manifest manifest;
  manifest.set_format_version(kFormatVersion);
  manifest.set_step(meta.step);
  for (const MeshAxis &axis : mesh.axes()) {
    proto::MeshAxis *entry = manifest.add_mesh();
    entry->set_name(axis.name);
    entry->set_size(axis.size());
    entry->set_dcn(axis.dcn);
  }
  manifest.mutable_rng()->set_seed(meta.seed);
  manifest.mutable_rng()->set_data_seed(meta.dataSeed);
  manifest.mutable_rng()->set_data_position(meta.dataPosition);
  manifest.mutable_rng()->set_data_epoch(meta.dataEpoch);
  for (const auto &[name, value] : meta.hyperparameters)
    (*manifest.mutable_hyperparameters())[name] = value;
  manifest.set_model(meta.model);
  manifest.set_frozen_from(meta.frozenFrom);
  std::vector<proto::Tensor *> tensors;
  for (const rt::ArgumentSpec &arg : spec.arguments) {
    // A frozen parameter is not stored: it is where the run read it.
    if (!arg.isStored()) {
      tensors.push_back(nullptr);
      continue;
    }
    proto::Tensor *tensor = manifest.add_tensors();
    tensor->set_name(arg.name);
    tensor->set_kind(toProto(arg.kind));
    tensor->set_dtype("F32");
    for (int64_t size : arg.globalShape)
      tensor->add_global_shape(size);
    for (const std::vector<int32_t> &axes : arg.dimAxes) {
      proto::DimSharding *dim = tensor->add_sharding();
      for (int32_t axis : axes)
        dim->add_axes(mesh.axes()[axis].name);
    }
    tensors.push_back(tensor);
  }
  for (int64_t d = 0; d < static_cast<int64_t>(plan.owned.size()); ++d) {
    std::string fileName = shardFileName(d);
    std::vector<int64_t> coords = mesh.coordinates(d);
    for (size_t k = 0; k < plan.owned[d].size(); ++k) {
      const rt::ArgumentSpec &arg = spec.arguments[plan.owned[d][k]];
      proto::Block *block = tensors[plan.owned[d][k]]->add_blocks();
      block->set_file(fileName);
      for (int64_t start : arg.blockOffsets(coords))
        block->add_offset(start);
      for (int64_t size : arg.validShape(coords))
        block->add_shape(size);
      block->set_crc32(shards.crcs[d][k]);
    }
    proto::ShardFile *file = manifest.add_files();
    file->set_name(fileName);
    file->set_device(d);
    file->set_size_bytes(shards.files[d].sizeBytes);
    file->set_crc32(shards.files[d].crc32);
  }
  manifest.set_written_unix_micros(
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  return manifest;
}

} // namespace

const char *writePointName(WritePoint point) {
  return point == WritePoint::Shard ? "shard" : "manifest";
}

std::function<void(WritePoint)> stallAt(WritePoint point) {
  return [point](WritePoint reached) {
    if (reached != point)
      return;
    std::fprintf(stderr, "sd: checkpoint write stalled at %s (pid %d)\n",
                 writePointName(point), static_cast<int>(::getpid()));
    std::fflush(stderr);
    while (true)
      ::pause();
  };
}

absl::Status saveCheckpoint(const std::string &dir,
                            rt::TrainingSession &session,
                            const CheckpointMeta &meta,
                            const CheckpointWriteOptions &options) {
  if (meta.step < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot checkpoint step ", meta.step));
  rt::MeshRuntime &runtime = session.runtime();
  // Processes of a multi-process mesh each write their devices' files, and
  // agree at each stage, so that every process returns the same result.
  rt::ProcessGroup *group =
      runtime.process() >= 0 && runtime.mesh().numProcesses() > 1
          ? runtime.processGroup()
          : nullptr;
  if (runtime.process() >= 0 && runtime.mesh().numProcesses() > 1 && !group)
    return absl::FailedPreconditionError(
        "a checkpoint of one process of a multi-process mesh needs a process "
        "group (MeshRuntimeOptions::processGroup)");
  bool root = runtime.process() <= 0;
  absl::StatusOr<ShardPlan> plan = planShards(session);
  if (absl::Status status = agree(group, plan.status()); !status.ok())
    return status;
  std::string stepDir = dir + "/" + stepDirectoryName(meta.step);
  // One process clears the step directory before anyone writes into it.
  absl::Status prepared =
      root ? prepareStepDirectory(stepDir) : absl::OkStatus();
  if (absl::Status status = agree(group, prepared); !status.ok())
    return status;
  absl::StatusOr<WrittenShards> shards =
      gatherShards(group, runtime.mesh().devicesPerProcess(),
                   writeShards(stepDir, session, *plan, meta.step, options));
  if (!shards.ok())
    return shards.status();

  // The manifest comes last, once every process's files are durable: its
  // rename completes the step.
  absl::Status written = absl::OkStatus();
  if (root) {
    std::function<void()> beforeRename;
    if (options.atPoint)
      beforeRename = [&] { options.atPoint(WritePoint::Manifest); };
    written = writeFileAtomically(
        stepDir + "/" + kManifestName,
        serializeManifest(buildManifest(session, meta, *plan, *shards)),
        beforeRename);
    // The manifest's rename is durable (writeFileAtomically synced
    // stepDir); now the step directory's entry in `dir`.
    if (written.ok())
      written = syncDirectory(dir);
  }
  return agree(group, written);
}

//===----------------------------------------------------------------------===//
// Listing
//===----------------------------------------------------------------------===//

absl::StatusOr<std::vector<std::string>>
listCheckpoints(const std::string &dir) {
  if (!llvm::sys::fs::exists(dir))
    return std::vector<std::string>();
  std::vector<std::pair<int64_t, std::string>> steps;
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(dir, error), end;
       !error && it != end; it.increment(error)) {
    int64_t step = stepOfDirectoryName(llvm::sys::path::filename(it->path()));
    if (step < 0)
      continue;
    // A step without a manifest is an interrupted write. A manifest that
    // does not parse is listed: it was renamed into place whole, so it is
    // corrupt, and loading it reports that instead of silently going back
    // to an earlier step.
    if (!absl::IsNotFound(readManifest(it->path()).status()))
      steps.emplace_back(step, it->path());
  }
  if (error)
    return absl::ErrnoToStatus(error.value(),
                               absl::StrCat("cannot list '", dir, "'"));
  std::sort(steps.begin(), steps.end());
  std::vector<std::string> paths;
  for (auto &[step, path] : steps)
    paths.push_back(std::move(path));
  return paths;
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

absl::StatusOr<proto::Manifest>
readCheckedManifest(const std::string &stepDir) {
  absl::StatusOr<proto::Manifest> manifest = readManifest(stepDir);
  if (!manifest.ok())
    return manifest.status();
  if (absl::Status status = checkShardSizesOnDisk(*manifest, stepDir);
      !status.ok())
    return status;
  return manifest;
}

CheckpointMeta metaOf(const proto::Manifest &manifest) {
  CheckpointMeta meta;
  meta.step = manifest.step();
  meta.seed = manifest.rng().seed();
  meta.dataSeed = manifest.rng().data_seed();
  meta.dataPosition = manifest.rng().data_position();
  meta.dataEpoch = manifest.rng().data_epoch();
  meta.model = manifest.model();
  meta.frozenFrom = manifest.frozen_from();
  for (const auto &[name, value] : manifest.hyperparameters())
    meta.hyperparameters[name] = value;
  return meta;
}

MeshSpec meshOf(const proto::Manifest &manifest) {
  std::vector<MeshAxis> axes;
  for (const proto::MeshAxis &axis : manifest.mesh())
    axes.push_back(MeshAxis{axis.name(), axis.size() / axis.dcn(), axis.dcn()});
  return MeshSpec(std::move(axes));
}

const LoadedTensor *LoadedCheckpoint::find(const std::string &name) const {
  for (const LoadedTensor &tensor : tensors)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

absl::StatusOr<LoadedCheckpoint> loadCheckpoint(const std::string &stepDir) {
  absl::StatusOr<proto::Manifest> manifest = readCheckedManifest(stepDir);
  if (!manifest.ok())
    return manifest.status();

  LoadedCheckpoint ckpt;
  ckpt.path = stepDir;
  ckpt.meta = metaOf(*manifest);
  ckpt.writtenUnixMicros = manifest->written_unix_micros();
  ckpt.mesh = meshOf(*manifest);

  // The tensors, and per file the blocks (tensor, block) it holds (an entry
  // for every file, so that the loading threads only read the map).
  std::map<std::string, std::vector<std::pair<size_t, int>>> blocksOfFile;
  for (const proto::ShardFile &file : manifest->files())
    blocksOfFile[file.name()];
  for (const proto::Tensor &tensor : manifest->tensors()) {
    LoadedTensor loaded;
    loaded.name = tensor.name();
    loaded.kind = *fromProto(tensor.kind());
    loaded.globalShape.assign(tensor.global_shape().begin(),
                              tensor.global_shape().end());
    for (const proto::DimSharding &dim : tensor.sharding())
      loaded.sharding.emplace_back(dim.axes().begin(), dim.axes().end());
    for (int b = 0; b < tensor.blocks_size(); ++b)
      blocksOfFile[tensor.blocks(b).file()].emplace_back(ckpt.tensors.size(),
                                                         b);
    loaded.values.resize(
        static_cast<size_t>(checkedElements(loaded.globalShape)));
    ckpt.tensors.push_back(std::move(loaded));
  }

  // Each file (in parallel; their blocks are disjoint parts of the global
  // tensors): check it whole against the manifest, then its blocks.
  auto loadFile = [&](int64_t index) -> absl::Status {
    const proto::ShardFile &file = manifest->files(static_cast<int>(index));
    std::string path = stepDir + "/" + file.name();
    auto shardError = [&](auto &&...parts) {
      return absl::DataLossError(
          absl::StrCat("checkpoint shard '", path, "' ", parts...));
    };
    absl::StatusOr<std::string> bytes = readFileBytes(
        path, "checkpoint shard", static_cast<uint64_t>(file.size_bytes()));
    if (!bytes.ok()) {
      if (absl::IsNotFound(bytes.status()))
        return shardError("is missing");
      return bytes.status();
    }
    if (absl::Status status =
            checkShardSize(path, static_cast<int64_t>(bytes->size()), file);
        !status.ok())
      return status;
    uint32_t crc = crcOf(bytes->data(), bytes->size());
    if (crc != file.crc32())
      return shardError("is corrupt: crc32 ", hex32(crc), " != manifest's ",
                        hex32(file.crc32()));
    absl::StatusOr<SafetensorsFile> shard = parseSafetensors(*bytes, path);
    if (!shard.ok())
      return shard.status();
    for (auto [t, b] : blocksOfFile.at(file.name())) {
      LoadedTensor &tensor = ckpt.tensors[t];
      const proto::Block &block =
          manifest->tensors(static_cast<int>(t)).blocks(b);
      const SafetensorsTensor *stored = shard->find(tensor.name);
      if (!stored)
        return shardError("has no tensor '", tensor.name,
                          "', which the manifest puts there");
      std::vector<int64_t> shape(block.shape().begin(), block.shape().end());
      if (stored->shape != shape || stored->dtype != "F32")
        return shardError("holds tensor '", tensor.name, "' as ", stored->dtype,
                          " ", formatShape(stored->shape),
                          "; the manifest says F32 ", formatShape(shape));
      uint32_t blockCrc = crcOf(bytes->data() + stored->fileBegin,
                                stored->fileEnd - stored->fileBegin);
      if (blockCrc != block.crc32())
        return shardError("is corrupt: tensor '", tensor.name, "' has crc32 ",
                          hex32(blockCrc), " != manifest's ",
                          hex32(block.crc32()));
      std::vector<int64_t> offset(block.offset().begin(), block.offset().end());
      placeBlock(tensor.globalShape, offset, shape, stored->values.data(),
                 tensor.values.data());
    }
    return absl::OkStatus();
  };
  std::vector<absl::Status> loaded(manifest->files_size());
  parallelFor(manifest->files_size(),
              std::max<int64_t>(1, std::thread::hardware_concurrency()),
              [&](int64_t index) { loaded[index] = loadFile(index); });
  for (const absl::Status &status : loaded)
    if (!status.ok())
      return status;
  return ckpt;
}

absl::StatusOr<std::vector<rt::HostTensor>>
argumentsFromCheckpoint(const LoadedCheckpoint &ckpt,
                        const rt::ProgramSpec &spec) {
  std::unordered_map<std::string, const LoadedTensor *> byName;
  for (const LoadedTensor &tensor : ckpt.tensors)
    byName.emplace(tensor.name, &tensor);
  std::vector<rt::HostTensor> globals;
  for (const rt::ArgumentSpec &arg : spec.arguments) {
    auto it = byName.find(arg.name);
    if (it == byName.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint '", ckpt.path, "' has no tensor '", arg.name, "'"));
    const LoadedTensor &tensor = *it->second;
    if (tensor.globalShape != arg.globalShape)
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", arg.name, "' is ", formatShape(tensor.globalShape),
          " in checkpoint '", ckpt.path, "' but ", formatShape(arg.globalShape),
          " in the program"));
    if (arg.elementType != rt::ElementType::F32)
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", arg.name, "' is f32 in checkpoint '", ckpt.path, "' but ",
          rt::elementTypeName(arg.elementType), " in the program"));
    globals.push_back(tensor.values);
  }
  return globals;
}

} // namespace sd::ckpt
