//===- Exchange.cpp - Parameters in and out as plain safetensors ----------===//

#include "sd/Checkpoint/Exchange.h"

#include "ManifestIO.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>
#include <fcntl.h>
#include <set>
#include <sys/file.h>
#include <unistd.h>

namespace sd::ckpt {

absl::Status
checkLayoutOf(const std::string &path,
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
        path, " has an unknown weight layout '", layout->second,
        "' (metadata ", kLayoutKey, "); this sd reads '", kLayoutReference,
        "'"));
  return absl::OkStatus();
}

absl::StatusOr<ParameterImport>
openParameterImport(const std::string &path, const rt::ProgramSpec &spec) {
  absl::StatusOr<std::unique_ptr<SafetensorsReader>> reader =
      SafetensorsReader::open(path);
  if (!reader.ok())
    return reader.status();
  if (absl::Status status = checkLayoutOf(path, (*reader)->metadata());
      !status.ok())
    return status;
  ParameterImport import;
  import.tensors.assign(spec.arguments.size(), nullptr);
  std::set<std::string> unused;
  for (const SafetensorsTensor &tensor : (*reader)->tensors())
    unused.insert(tensor.name);
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    bool ema = arg.kind == rt::ArgumentKind::OptimizerState &&
               arg.moment == rt::MomentKind::Ema;
    if (arg.kind != rt::ArgumentKind::Parameter && !ema)
      continue;
    const SafetensorsTensor *tensor = (*reader)->find(arg.parameter);
    if (!tensor) {
      if (!ema)
        import.missing.push_back(arg.name);
      continue;
    }
    if (!isFloatingDtype(tensor->dtype))
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", arg.parameter, "' is ",
                       tensor->dtype, "; parameters are read from F32, F16, "
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
    unused.erase(arg.parameter);
    import.loaded += !ema;
  }
  if (import.loaded == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has none of the model's parameters (such as '",
        import.missing.empty() ? std::string() : import.missing.front(),
        "'); tensors are matched by name"));
  import.unused.assign(unused.begin(), unused.end());
  import.reader = std::move(*reader);
  return import;
}

absl::Status readImportedBlock(const ParameterImport &import,
                               const SafetensorsTensor &tensor,
                               const rt::ArgumentSpec &arg,
                               const std::vector<int64_t> &offsets,
                               float *out) {
  // The file's tensor viewed as the argument's global shape (the import
  // matched the element counts).
  SafetensorsTensor view = tensor;
  view.shape = arg.globalShape;
  if (absl::Status status =
          import.reader->readBlock(view, offsets, arg.localShape, out);
      !status.ok())
    return status;
  int64_t elements = rt::numElements(arg.localShape);
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
      absl::StrCat(import.reader->path(), ": tensor '", tensor.name, "' holds ",
                   *bad, " at element ", global, "; weights must be finite"));
}

absl::Status
exportParameters(rt::TrainingSession &session, const std::string &path,
                 ExportedValues values,
                 const std::map<std::string, std::string> &metadata,
                 bool bf16) {
  const rt::ProgramSpec &spec = session.spec();
  std::vector<size_t> selected;
  std::vector<SafetensorsStreamWriter::Entry> entries;
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    if (values == ExportedValues::Ema
            ? arg.kind != rt::ArgumentKind::OptimizerState ||
                  arg.moment != rt::MomentKind::Ema
            : arg.kind != rt::ArgumentKind::Parameter)
      continue;
    selected.push_back(i);
    entries.push_back({arg.parameter,
                       arg.storedShape.empty() ? arg.globalShape
                                               : arg.storedShape,
                       bf16});
  }
  bool writes = session.runtime().process() <= 0;
  absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> writer =
      absl::FailedPreconditionError("not written by this process");
  if (writes)
    writer = SafetensorsStreamWriter::create(path, entries, metadata);
  absl::Status written = writer.status();
  for (size_t i : selected) {
    absl::StatusOr<rt::HostTensor> gathered =
        session.gatherArgument(static_cast<int64_t>(i));
    if (!gathered.ok())
      return gathered.status();
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
