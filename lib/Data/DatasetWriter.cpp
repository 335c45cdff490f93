//===- DatasetWriter.cpp - Writing sd datasets sample by sample -----------===//

#include "sd/Data/DatasetWriter.h"

#include "ShardWriter.h"

#include "sd/Checkpoint/Safetensors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <set>

namespace sd::data {

absl::Status checkHeldoutFraction(double fraction) {
  if (std::isfinite(fraction) && fraction >= 0 && fraction < 1)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "held-out fraction %g must be in [0, 1)", fraction));
}

namespace {

/// Whether `dir` has no entries.
absl::StatusOr<bool> isEmptyDirectory(const std::string &dir) {
  std::error_code error;
  llvm::sys::fs::directory_iterator it(dir, error);
  if (error)
    return absl::UnknownError(
        absl::StrCat("cannot list '", dir, "': ", error.message()));
  return it == llvm::sys::fs::directory_iterator();
}

/// Checks that `dir` may take a dataset named `name` (see
/// DatasetWriter::create) and returns the files of the dataset it holds
/// (index and shards), which the new one replaces; nothing is changed.
absl::StatusOr<std::set<std::string>>
checkTarget(const std::string &dir, const std::string &name, bool force) {
  if (!llvm::sys::fs::exists(dir))
    return std::set<std::string>();
  if (!llvm::sys::fs::is_directory(dir))
    return absl::FailedPreconditionError(
        absl::StrCat("'", dir, "' exists and is not a directory"));
  absl::StatusOr<bool> empty = isEmptyDirectory(dir);
  if (!empty.ok())
    return empty.status();
  if (*empty)
    return std::set<std::string>();

  absl::StatusOr<DatasetIndex> old = readDatasetIndex(dir);
  std::set<std::string> replaced;
  if (old.ok()) {
    if (old->name != name && !force)
      return absl::FailedPreconditionError(
          absl::StrCat("'", dir, "' holds dataset '", old->name,
                       "'; pass --force to replace it with '", name, "'"));
    replaced.insert(kIndexFileName);
    for (const auto &[splitName, split] : old->splits)
      for (const ShardInfo &shard : split.shards)
        replaced.insert(shard.file);
  } else if (!force) {
    if (absl::IsNotFound(old.status()))
      return absl::FailedPreconditionError(
          absl::StrCat("'", dir,
                       "' is not empty and holds no sd dataset; pass --force "
                       "to write into it"));
    return absl::FailedPreconditionError(
        absl::StrCat(old.status().message(), "; pass --force to replace it"));
  }
  return replaced;
}

absl::Status fileError(const std::string &what, const std::string &path,
                       std::error_code error) {
  return absl::UnknownError(
      absl::StrCat(what, " '", path, "': ", error.message()));
}

} // namespace

/// The directory a dataset is built in, beside its target (in the same
/// parent, so that a rename puts it in place), and the target's parents
/// that had to be made for it. Destroyed before commit(), it removes all of
/// that again.
class BuildDirectory {
public:
  /// Makes the build directory for `target`, whose files in `replaced` are
  /// the old dataset's.
  static absl::StatusOr<std::unique_ptr<BuildDirectory>>
  create(const std::string &target, std::set<std::string> replaced);

  BuildDirectory(const BuildDirectory &) = delete;
  BuildDirectory &operator=(const BuildDirectory &) = delete;
  ~BuildDirectory();

  const std::string &path() const { return buildPath; }

  /// Puts the build directory in place of the target: renamed to it when
  /// there is none, else exchanged with it (one atomic rename), the old
  /// directory's other files moved into the new one, and the old dataset
  /// removed.
  absl::Status commit();

private:
  BuildDirectory() = default;

  std::string target;
  std::string buildPath;
  /// The outermost parent of the target that create() made, or empty.
  std::string madeParent;
  std::set<std::string> replaced;
  bool committed = false;
};

absl::StatusOr<std::unique_ptr<BuildDirectory>>
BuildDirectory::create(const std::string &target,
                       std::set<std::string> replaced) {
  std::unique_ptr<BuildDirectory> build(new BuildDirectory());
  build->replaced = std::move(replaced);
  // Absolute, without `.`, `..` or a trailing '/', and the directory a
  // symbolic link names rather than the link, so that the new dataset goes
  // where the old one is.
  llvm::SmallString<256> path(target);
  if (std::error_code error = llvm::sys::fs::make_absolute(path))
    return fileError("cannot resolve", target, error);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  while (path.size() > 1 && llvm::sys::path::is_separator(path.back()))
    path.pop_back();
  if (llvm::sys::fs::exists(path)) {
    llvm::SmallString<256> real;
    if (std::error_code error = llvm::sys::fs::real_path(path, real))
      return fileError("cannot resolve", target, error);
    path = real;
  }
  build->target = std::string(path);
  std::string parent = llvm::sys::path::parent_path(path).str();
  std::string name = llvm::sys::path::filename(path).str();
  if (parent.empty() || name.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write a dataset to '", target, "'"));

  // The parents that do not exist yet, made now and removed on failure.
  std::string missing;
  for (std::string dir = parent; !dir.empty() && !llvm::sys::fs::exists(dir);
       dir = llvm::sys::path::parent_path(dir).str())
    missing = dir;
  if (std::error_code error = llvm::sys::fs::create_directories(parent))
    return fileError("cannot create", parent, error);
  build->madeParent = missing;

  std::string model =
      (llvm::Twine(parent) + "/." + name + ".sddata-XXXXXX").str();
  if (!::mkdtemp(model.data()))
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create a directory "
                                                   "beside '",
                                                   build->target, "'"));
  build->buildPath = model;
  return build;
}

BuildDirectory::~BuildDirectory() {
  if (committed)
    return;
  if (!buildPath.empty())
    llvm::sys::fs::remove_directories(buildPath, /*IgnoreErrors=*/true);
  // The parents made for the target, innermost first, as long as they are
  // empty (llvm::sys::fs::remove does not remove a full directory).
  if (madeParent.empty())
    return;
  for (std::string dir = llvm::sys::path::parent_path(target).str();
       dir.size() >= madeParent.size();
       dir = llvm::sys::path::parent_path(dir).str())
    if (llvm::sys::fs::remove(dir))
      break;
}

absl::Status BuildDirectory::commit() {
  std::string parent = llvm::sys::path::parent_path(target).str();
  if (!llvm::sys::fs::exists(target)) {
    if (::rename(buildPath.c_str(), target.c_str()) != 0)
      return absl::ErrnoToStatus(
          errno,
          absl::StrCat("cannot rename '", buildPath, "' to '", target, "'"));
    committed = true;
    return ckpt::syncDirectory(parent);
  }
  // One atomic exchange: at every moment `target` holds a whole dataset,
  // the old one or the new one. File systems without RENAME_EXCHANGE get
  // two renames, and the old directory back if the second fails.
  std::string old = buildPath;
  if (::renameat2(AT_FDCWD, buildPath.c_str(), AT_FDCWD, target.c_str(),
                  RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS)
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("cannot put '", buildPath,
                                              "' in place of '", target, "'"));
    old = buildPath + "-old";
    if (::rename(target.c_str(), old.c_str()) != 0)
      return absl::ErrnoToStatus(
          errno, absl::StrCat("cannot rename '", target, "' to '", old, "'"));
    if (::rename(buildPath.c_str(), target.c_str()) != 0) {
      int error = errno;
      ::rename(old.c_str(), target.c_str());
      return absl::ErrnoToStatus(
          error,
          absl::StrCat("cannot rename '", buildPath, "' to '", target, "'"));
    }
  }
  committed = true;
  // The old directory's files that were not its dataset's (--force) move
  // into the new one, unless the new dataset has a file of that name.
  std::error_code error;
  for (llvm::sys::fs::directory_iterator it(old, error), end;
       !error && it != end; it.increment(error)) {
    std::string file = llvm::sys::path::filename(it->path()).str();
    std::string moved = target + "/" + file;
    if (replaced.count(file) || llvm::sys::fs::exists(moved))
      continue;
    if (std::error_code renameError = llvm::sys::fs::rename(it->path(), moved))
      return fileError("cannot move", it->path(), renameError);
  }
  if (error)
    return fileError("cannot list", old, error);
  if (std::error_code removeError = llvm::sys::fs::remove_directories(old))
    return fileError("cannot remove", old, removeError);
  return ckpt::syncDirectory(parent);
}

absl::StatusOr<DatasetWriter>
DatasetWriter::create(const std::string &dir, DatasetIndex header,
                      const DatasetWriterOptions &options) {
  if (options.shardSize < 1)
    return absl::InvalidArgumentError(absl::StrFormat(
        "shard size %d must be positive", options.shardSize));
  for (auto &[name, split] : header.splits)
    split = SplitInfo();
  if (header.splits.empty())
    return absl::InvalidArgumentError("a dataset needs at least one split");
  // The header must make a valid index (checked by the index's own parser).
  llvm::SmallString<256> indexPath(dir);
  llvm::sys::path::append(indexPath, kIndexFileName);
  absl::StatusOr<DatasetIndex> checked = parseDatasetIndex(
      formatDatasetIndex(header), std::string(indexPath));
  if (!checked.ok())
    return checked.status();

  absl::StatusOr<std::set<std::string>> replaced =
      checkTarget(dir, header.name, options.force);
  if (!replaced.ok())
    return replaced.status();
  absl::StatusOr<std::unique_ptr<BuildDirectory>> build =
      BuildDirectory::create(dir, std::move(*replaced));
  if (!build.ok())
    return build.status();
  header.dir = (*build)->path();
  DatasetWriter writer(std::move(header), options);
  writer.build = std::move(*build);
  writer.targetDir = dir;
  for (const auto &[name, split] : writer.index.splits)
    writer.open[name];
  return writer;
}

DatasetWriter::DatasetWriter(DatasetIndex index,
                             const DatasetWriterOptions &options)
    : index(std::move(index)), options(options) {}
DatasetWriter::DatasetWriter(DatasetWriter &&) noexcept = default;
DatasetWriter &DatasetWriter::operator=(DatasetWriter &&) noexcept = default;
DatasetWriter::~DatasetWriter() = default;

/// An error naming sample `sample` of `split` when `values` (its `what`)
/// are not all finite.
static absl::Status checkFinite(absl::Span<const float> values,
                                const std::string &split, int64_t sample,
                                const std::string &what) {
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      return absl::InvalidArgumentError(absl::StrFormat(
          "sample %d of split '%s' has %g in its %s (value %d); sd trains on "
          "finite values only",
          sample, split, values[i], what, i));
  return absl::OkStatus();
}

absl::Status DatasetWriter::add(const std::string &split,
                                absl::Span<const float> sample,
                                std::optional<int64_t> label,
                                absl::Span<const float> embedding) {
  if (finished)
    return absl::FailedPreconditionError("the dataset is finished already");
  auto it = open.find(split);
  if (it == open.end())
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", index.name, "' has no split '", split, "'"));
  if (static_cast<int64_t>(sample.size()) != index.sampleElements())
    return absl::InvalidArgumentError(absl::StrFormat(
        "a sample of %d values does not have the shape %s", sample.size(),
        formatShape(index.sampleShape)));
  int64_t numClasses = static_cast<int64_t>(index.classNames.size());
  if (label.has_value() != index.hasLabels)
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", index.name, "' ",
                     index.hasLabels ? "needs a label for every sample"
                                     : "has no labels"));
  if (label && (*label < 0 || *label >= numClasses))
    return absl::InvalidArgumentError(absl::StrFormat(
        "label %d is not a class index in [0, %d)", *label, numClasses));
  if (static_cast<int64_t>(embedding.size()) != index.embeddingElements())
    return absl::InvalidArgumentError(absl::StrFormat(
        "an embedding of %d values does not have %d", embedding.size(),
        index.embeddingElements()));
  std::unique_ptr<ShardWriter> &shard = it->second;
  SplitInfo &info = index.splits[split];
  int64_t number = info.count + (shard ? shard->count() : 0);
  if (absl::Status status =
          checkFinite(sample, split, number, index.sampleFeature);
      !status.ok())
    return status;
  if (absl::Status status = checkFinite(embedding, split, number, "embeddings");
      !status.ok())
    return status;

  if (!shard) {
    ShardInfo next;
    next.file =
        absl::StrFormat("%s-%05d.safetensors", split, info.shards.size());
    // The metadata says where the shard belongs, for a reader without the
    // index.
    std::map<std::string, std::string> metadata = {
        {"format", std::string(kDatasetFormat)},
        {"dataset", index.name},
        {"split", split},
        {"first_sample", absl::StrCat(info.count)}};
    absl::StatusOr<std::unique_ptr<ShardWriter>> created = ShardWriter::create(
        index.shardPath(next), index, options.shardSize, metadata);
    if (!created.ok())
      return created.status();
    shard = std::move(*created);
  }
  if (absl::Status status = shard->add(sample, label, embedding); !status.ok())
    return status;
  if (shard->count() == options.shardSize)
    return finishShard(split);
  return absl::OkStatus();
}

absl::Status DatasetWriter::finishShard(const std::string &split) {
  std::unique_ptr<ShardWriter> shard = std::move(open[split]);
  SplitInfo &info = index.splits[split];
  ShardInfo done;
  done.file = absl::StrFormat("%s-%05d.safetensors", split, info.shards.size());
  if (absl::Status status = shard->finish(done); !status.ok())
    return status;
  info.count += done.count;
  info.shards.push_back(std::move(done));
  return absl::OkStatus();
}

absl::StatusOr<DatasetIndex> DatasetWriter::finish() {
  if (finished)
    return absl::FailedPreconditionError("the dataset is finished already");
  // Done whatever happens below: a failed finish removes what it built.
  finished = true;
  std::unique_ptr<BuildDirectory> building = std::move(build);
  for (const auto &[split, shard] : open)
    if (shard)
      if (absl::Status status = finishShard(split); !status.ok())
        return status;
  if (absl::Status status = writeDatasetIndex(index, building->path());
      !status.ok())
    return status;
  if (absl::Status status = building->commit(); !status.ok())
    return status;
  index.dir = targetDir;
  return index;
}

} // namespace sd::data
