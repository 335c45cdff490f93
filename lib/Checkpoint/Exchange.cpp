//===- Exchange.cpp - Parameters in and out as plain safetensors ----------===//

#include "sd/Checkpoint/Exchange.h"

#include "ManifestIO.h"

#include "sd/Support/Files.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

namespace sd::ckpt {

/// A shard index lists tensor names and files: 64 MiB is far above any.
constexpr uint64_t kMaxIndexBytes = uint64_t(64) << 20;

absl::Status checkLayoutOf(const std::string &path,
                           const std::map<std::string, std::string> &metadata) {
  if (!metadata.count("model") || !metadata.count("step"))
    return absl::OkStatus();
  auto layout = metadata.find(kLayoutKey);
  if (layout == metadata.end())
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        " was exported by an older sd, whose Linear weights are [in, out]; "
        "sd's weights now have the reference layouts ([out, in], as "
        "PyTorch's): export the weights again with this sd, or transpose "
        "each Linear weight"));
  if (layout->second != kLayoutReference)
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has an unknown weight layout '", layout->second, "' (metadata ",
        kLayoutKey, "); this sd reads '", kLayoutReference, "'"));
  return absl::OkStatus();
}

absl::StatusOr<ShardIndex> readShardIndex(const std::string &path) {
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> text =
      ::sd::readRegularFile(path, "shard index", kMaxIndexBytes);
  if (!text.ok())
    return text.status();
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*text)->getBuffer());
  if (!parsed) {
    std::string message = llvm::toString(parsed.takeError());
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not JSON: ", message));
  }
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Object *map =
      root ? root->getObject("weight_map") : nullptr;
  if (!map)
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has no \"weight_map\" object (a sharded checkpoint's index "
              "maps each tensor to its file)"));
  // Shard files in name order, each with its tensors.
  ShardIndex index;
  std::map<std::string, std::vector<std::string>> namesOf;
  for (const auto &[name, value] : *map) {
    std::optional<llvm::StringRef> file = value.getAsString();
    if (!file || file->empty() || file->contains('/') || *file == "..")
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map entry '", name.str(),
                       "' must name a file beside the index"));
    namesOf[file->str()].push_back(name.str());
  }
  std::string dir = path.substr(0, path.find_last_of('/') + 1);
  for (auto &[file, names] : namesOf) {
    index.files.push_back(dir + file);
    index.tensorsOf[dir + file] = std::move(names);
  }
  return index;
}

/// The shards of the diffusers index at `path`, opened, each holding the
/// tensors the map gives it.
static absl::StatusOr<std::vector<std::unique_ptr<SafetensorsReader>>>
openShards(const std::string &path) {
  absl::StatusOr<ShardIndex> index = readShardIndex(path);
  if (!index.ok())
    return index.status();
  std::vector<std::unique_ptr<SafetensorsReader>> readers;
  for (const std::string &file : index->files) {
    absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader =
        SafetensorsReader::open(file);
    if (!reader.ok())
      return reader.status();
    for (const std::string &name : index->tensorsOf.at(file))
      if (!(*reader)->find(name))
        return absl::InvalidArgumentError(absl::StrCat(
            path, " maps tensor '", name, "' to ",
            file.substr(file.find_last_of('/') + 1), ", which does not hold it"));
    readers.push_back(std::move(*reader));
  }
  return readers;
}

namespace {

/// A LoRA adapter's base module ("blocks.0.attn.qkv" of
/// "blocks.0.attn.qkv.lora_A.weight") and which of the pair it is.
std::optional<std::pair<std::string, bool>>
loraAdapterOf(const std::string &name) {
  for (auto [suffix, isA] :
       {std::pair{".lora_A.weight", true}, std::pair{".lora_B.weight", false}})
    if (absl::EndsWith(name, suffix))
      return std::pair{name.substr(0, name.size() - strlen(suffix)), isA};
  return std::nullopt;
}

} // namespace

absl::StatusOr<ParameterImport>
openParameterImport(const std::string &path, const rt::ProgramSpec &spec) {
  ParameterImport import;
  import.path = path;
  if (llvm::StringRef(path).ends_with(".index.json")) {
    absl::StatusOr<std::vector<std::unique_ptr<SafetensorsReader>>> shards =
        openShards(path);
    if (!shards.ok())
      return shards.status();
    import.readers = std::move(*shards);
  } else {
    absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader =
        SafetensorsReader::open(path);
    if (!reader.ok())
      return reader.status();
    import.readers.push_back(std::move(*reader));
  }
  // Each tensor by name, from the reader that holds it.
  std::map<std::string,
           std::pair<const SafetensorsTensor *, const SafetensorsReader *>>
      byName;
  for (const std::unique_ptr<SafetensorsReader> &reader : import.readers) {
    if (absl::Status status = checkLayoutOf(reader->path(), reader->metadata());
        !status.ok())
      return status;
    for (const SafetensorsTensor &tensor : reader->tensors())
      byName.try_emplace(tensor.name, &tensor, reader.get());
  }
  import.tensors.assign(spec.arguments.size(), nullptr);
  import.tensorReaders.assign(spec.arguments.size(), nullptr);
  std::set<std::string> unused;
  for (const auto &[name, found] : byName)
    unused.insert(name);
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    bool ema = arg.kind == rt::ArgumentKind::OptimizerState &&
               arg.moment == rt::MomentKind::Ema;
    if (arg.kind != rt::ArgumentKind::Parameter && !ema)
      continue;
    auto found = byName.find(arg.parameter);
    if (found == byName.end()) {
      // New LoRA adapters start from their initializers (B zero).
      if (!ema && !loraAdapterOf(arg.parameter))
        import.missing.push_back(arg.name);
      continue;
    }
    const SafetensorsTensor *tensor = found->second.first;
    if (!isFloatingDtype(tensor->dtype))
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", arg.parameter, "' is ", tensor->dtype,
          "; parameters are read from F32, F16, "
          "BF16 or F64"));
    // The reference layout, or sd's view of it (the same elements in the
    // same order).
    const std::vector<int64_t> &stored =
        arg.storedShape.empty() ? arg.globalShape : arg.storedShape;
    if (tensor->shape != stored && tensor->shape != arg.globalShape)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", arg.parameter, "' has shape ",
                       formatShape(tensor->shape), ", but the model's is ",
                       formatShape(stored)));
    import.tensors[i] = tensor;
    import.tensorReaders[i] = found->second.second;
    unused.erase(arg.parameter);
    import.loaded += !ema;
  }
  if (import.loaded == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has none of the model's parameters (such as '",
        import.missing.empty() ? std::string() : import.missing.front(),
        "'); tensors are matched by name"));
  import.unused.assign(unused.begin(), unused.end());
  return import;
}

absl::Status readImportedBlock(const ParameterImport &import, size_t index,
                               const rt::ArgumentSpec &arg,
                               const std::vector<int64_t> &offsets,
                               float *out) {
  const SafetensorsTensor &tensor = *import.tensors[index];
  const SafetensorsReader &reader = *import.tensorReaders[index];
  // The file's tensor viewed as the argument's global shape (the import
  // matched the element counts).
  SafetensorsTensor view = tensor;
  view.shape = arg.globalShape;
  // A padded block reads its valid part, which then moves to its rows.
  std::vector<int64_t> valid = arg.validShapeAt(offsets);
  int64_t elements = rt::numElements(arg.localShape);
  if (valid != arg.localShape) {
    std::vector<float> part(static_cast<size_t>(rt::numElements(valid)));
    if (!part.empty())
      if (absl::Status status =
              reader.readBlock(view, offsets, valid, part.data());
          !status.ok())
        return status;
    std::fill(out, out + elements, 0.0f);
    const float *next = part.data();
    arg.forEachValidRowAt(offsets, [&](int64_t at, int64_t, int64_t count) {
      std::copy(next, next + count, out + at);
      next += count;
    });
  } else if (absl::Status status =
                 reader.readBlock(view, offsets, arg.localShape, out);
             !status.ok()) {
    return status;
  }
  float *bad = std::find_if(out, out + elements,
                            [](float v) { return !std::isfinite(v); });
  if (bad == out + elements)
    return absl::OkStatus();
  // The element's global row-major index.
  int64_t local = bad - out, global = 0, inner = elements;
  for (size_t d = 0; d < arg.localShape.size(); ++d) {
    inner /= std::max<int64_t>(arg.localShape[d], 1);
    int64_t index = local / inner % arg.localShape[d] + offsets[d];
    global = global * arg.globalShape[d] + index;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(reader.path(), ": tensor '", tensor.name, "' holds ", *bad,
                   " at element ", global, "; weights must be finite"));
}

void mergeLoraPair(float *base, const float *a, const float *b, int64_t outSize,
                   int64_t inSize, int64_t rank, double scale) {
  std::vector<double> row(inSize);
  for (int64_t o = 0; o < outSize; ++o) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < rank; ++k) {
      double coefficient = b[o * rank + k];
      const float *aRow = a + k * inSize;
      for (int64_t i = 0; i < inSize; ++i)
        row[i] += coefficient * aRow[i];
    }
    for (int64_t i = 0; i < inSize; ++i)
      base[o * inSize + i] += static_cast<float>(scale * row[i]);
  }
}

absl::Status
exportParameters(rt::TrainingSession &session, const std::string &path,
                 ExportedValues values,
                 const std::map<std::string, std::string> &metadata, bool bf16,
                 ExportedTensors which, double loraScale) {
  const rt::ProgramSpec &spec = session.spec();
  // The shape reference checkpoints store each parameter under; EMA
  // weights are written under their parameter's.
  std::map<std::string, std::vector<int64_t>> stored;
  // Per parameter, the argument holding the values written: the parameter,
  // or its EMA (a frozen parameter has none: it is its own average).
  std::map<std::string, size_t> source;
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    if (arg.kind == rt::ArgumentKind::Parameter) {
      stored[arg.parameter] =
          arg.storedShape.empty() ? arg.globalShape : arg.storedShape;
      source.try_emplace(arg.parameter, i);
    }
  }
  if (values == ExportedValues::Ema)
    for (size_t i = 0; i < spec.arguments.size(); ++i) {
      const rt::ArgumentSpec &arg = spec.arguments[i];
      if (arg.kind == rt::ArgumentKind::OptimizerState &&
          arg.moment == rt::MomentKind::Ema)
        source[arg.parameter] = i;
    }
  // Per LoRA base module, the arguments of its A and B.
  std::map<std::string, std::pair<size_t, size_t>> pairs;
  for (const auto &[name, i] : source)
    if (auto adapter = loraAdapterOf(name))
      (adapter->second ? pairs[adapter->first].first
                       : pairs[adapter->first].second) = i;
  std::vector<const rt::ArgumentSpec *> selected;
  std::vector<SafetensorsStreamWriter::Entry> entries;
  for (const rt::ArgumentSpec &arg : spec.arguments) {
    if (arg.kind != rt::ArgumentKind::Parameter)
      continue;
    bool adapter = loraAdapterOf(arg.parameter).has_value();
    if ((which == ExportedTensors::Trained && arg.frozen) ||
        (which == ExportedTensors::Merged && adapter))
      continue;
    selected.push_back(&arg);
    entries.push_back({arg.parameter, stored[arg.parameter], bf16});
  }
  bool writes = session.runtime().process() <= 0;
  absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> writer =
      absl::FailedPreconditionError("not written by this process");
  if (writes)
    writer = SafetensorsStreamWriter::create(path, entries, metadata);
  absl::Status written = writer.status();
  auto gather = [&](size_t i) {
    return session.gatherArgument(static_cast<int64_t>(i));
  };
  for (const rt::ArgumentSpec *arg : selected) {
    absl::StatusOr<rt::HostTensor> gathered = gather(source[arg->parameter]);
    if (!gathered.ok())
      return gathered.status();
    absl::string_view module = arg->parameter;
    if (which == ExportedTensors::Merged &&
        absl::ConsumeSuffix(&module, ".weight"))
      if (auto pair = pairs.find(std::string(module)); pair != pairs.end()) {
        absl::StatusOr<rt::HostTensor> a = gather(pair->second.first);
        if (!a.ok())
          return a.status();
        absl::StatusOr<rt::HostTensor> b = gather(pair->second.second);
        if (!b.ok())
          return b.status();
        const std::vector<int64_t> &aShape =
            spec.arguments[pair->second.first].globalShape;
        int64_t rank = aShape[0], in = aShape[1];
        int64_t out = rt::numElements(arg->globalShape) / in;
        if (writes)
          mergeLoraPair(gathered->f32().data(), a->f32().data(),
                        b->f32().data(), out, in, rank, loraScale);
      }
    if (writes && written.ok())
      written = (*writer)->append(gathered->f32().data());
  }
  if (!writes)
    return absl::OkStatus();
  if (!written.ok())
    return written;
  return (*writer)->finish().status();
}

absl::StatusOr<DirectoryLock> DirectoryLock::acquire(const std::string &dir) {
  std::string lock = dir + "/.lock";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (fd >= 0)
      ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "'", dir, "' is in use by another sdrun (", lock, " is locked)"));
  }
  return DirectoryLock(fd);
}

DirectoryLock &DirectoryLock::operator=(DirectoryLock &&other) noexcept {
  if (this != &other) {
    if (fd >= 0)
      ::close(fd);
    fd = other.fd;
    other.fd = -1;
  }
  return *this;
}

DirectoryLock::~DirectoryLock() {
  if (fd >= 0)
    ::close(fd);
}

} // namespace sd::ckpt
