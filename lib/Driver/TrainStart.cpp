//===- TrainStart.cpp - The starting values of a run ----------------------===//

#include "TrainRunImpl.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mlir::sd::train {

/// What --init-from's file gave (matched before compiling): a line, and
/// warnings for what it lacks (with --allow-missing) or has beyond the
/// model.
static void reportImport(const ckpt::ParameterImport &import,
                         llvm::ArrayRef<std::string> computed) {
  const std::string &path = import.path;
  outs() << "initialized " << count(import.loaded, "parameter") << " from "
         << path << "\n";
  if (!computed.empty())
    outs() << "checked " << llvm::join(computed, ", ")
           << " against the table the model computes\n";
  if (!import.missing.empty())
    warn(Twine(path) + " has no tensor for " +
         count(import.missing.size(), "parameter") +
         ", which keep their seeded values: " +
         llvm::join(import.missing, ", "));
  if (!import.unused.empty())
    warn(Twine(path) + " has " + count(import.unused.size(), "tensor") +
         " the model does not have: " + llvm::join(import.unused, ", "));
}

std::string TrainRun::frozenSource() const {
  if (llvm::none_of(program.spec.arguments, [](const rt::ArgumentSpec &arg) {
        return arg.kind == rt::ArgumentKind::Parameter && arg.frozen;
      }))
    return "";
  if (initFromPath.empty())
    return "seed " + std::to_string(seed);
  uint64_t size = 0;
  (void)llvm::sys::fs::file_size(initFromPath, size);
  return "init-from " + llvm::sys::path::filename(initFromPath).str() + " (" +
         std::to_string(size) + " bytes)";
}

absl::Status TrainRun::restore() {
  // The session's spec: it knows the mesh's axis sizes.
  const rt::ProgramSpec &spec = session->spec();
  rt::TrainingSession::BlockFiller fill;
  // A fresh start's block: drawn alone from the counter-based generator,
  // or read from --init-from's file.
  auto start = [&](int64_t i, const std::vector<int64_t> &coords,
                   rt::Block block) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    float *out = block.f32();
    std::vector<int64_t> offsets = arg.blockOffsets(coords);
    if (initFrom && initFrom->tensors[i])
      return ckpt::readImportedBlock(*initFrom, static_cast<size_t>(i), arg,
                                     offsets, out);
    rt::initialBlock(arg, seed, offsets, out);
    return absl::OkStatus();
  };
  if (resumed) {
    if (absl::Status status = restoreCheckpoint(); !status.ok())
      return status;
    // Every block from the checkpoint's blocks that overlap it. Inputs are
    // replaced by each step's batch, but are read too where their shape is
    // the run's, so that every stored byte is checked by the process that
    // holds it; with another batch they start at zero.
    fill = [&](int64_t i, const std::vector<int64_t> &coords, rt::Block block) {
      const rt::ArgumentSpec &arg = spec.arguments[i];
      float *out = block.f32();
      // Frozen parameters are not in checkpoints: they start as they did.
      if (!arg.isStored())
        return start(i, coords, block);
      if (arg.kind == rt::ArgumentKind::Input &&
          !resumed->holds(arg.name, arg.globalShape)) {
        std::fill(out, out + rt::numElements(arg.localShape), 0.0f);
        return absl::OkStatus();
      }
      return resumed->readBlock(arg.name, arg.blockOffsets(coords),
                                arg.localShape, out);
    };
  } else {
    if (initFrom)
      reportImport(*initFrom, computedChecked);
    fill = start;
  }
  Clock::time_point begin = Clock::now();
  if (absl::Status status = session->fillArguments(fill); !status.ok())
    return status;
  restoreSeconds = secondsSince(begin);
  if (options.verify)
    if (absl::Status status = gatherStart(); !status.ok())
      return status;
  if (firstStep >= options.steps)
    outs() << "nothing to run: the checkpoint is at step " << firstStep
           << ", max_train_steps is " << options.steps << "\n";
  return absl::OkStatus();
}

absl::Status TrainRun::gatherStart() {
  outs() << "verify: every process holds the whole model (the one-device "
            "reference starts from the run's values)\n";
  const rt::ProgramSpec &spec = program.spec;
  start.assign(spec.arguments.size(), {});
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    absl::StatusOr<rt::HostTensor> values =
        session->gatherArgument(static_cast<int64_t>(i));
    if (!values.ok())
      return values.status();
    start[i] = std::move(*values);
  }
  return absl::OkStatus();
}

absl::Status TrainRun::restoreCheckpoint() {
  firstStep = resumed->meta().step;
  seed = resumed->meta().seed;
  // The data stream continues where the checkpoint left it, whatever this
  // run's batch; the inputs themselves are made anew for every step.
  firstPosition = resumed->meta().dataPosition;
  // Adapters (or a partial fine-tune) continue on the base they were
  // trained on, which the checkpoint names but does not hold.
  std::string frozen = frozenSource();
  if (frozen != resumed->meta().frozenFrom)
    return absl::FailedPreconditionError(
        "checkpoint '" + resumed->path() + "' was trained " +
        (resumed->meta().frozenFrom.empty()
             ? std::string("with every parameter trained")
             : "on frozen parameters from " + resumed->meta().frozenFrom) +
        ", but this run's " +
        (frozen.empty() ? std::string("trains every parameter")
                        : "frozen parameters come from " + frozen) +
        ": resume with the run's --init-from, seed and frozen parameters");
  if (absl::Status status = resumed->check(program.spec); !status.ok())
    return status;
  // What differs from the run that wrote the checkpoint.
  std::vector<std::string> changed;
  for (const auto &[key, value] : hyperparameters(options.pipeline)) {
    auto it = resumed->meta().hyperparameters.find(key);
    if (it != resumed->meta().hyperparameters.end() && it->second != value)
      changed.push_back(formatv("{0} {1} -> {2}", key, format("%g", it->second),
                                format("%g", value))
                            .str());
  }
  if (!changed.empty())
    warn("resuming with other optimizer settings than the checkpoint's "
         "(the run is then not the one that was interrupted): " +
         llvm::join(changed, ", "));
  if (options.seed != resumed->meta().seed)
    warn(formatv("the run continues with the checkpoint's seed {0}, not {1}",
                 resumed->meta().seed, options.seed));
  if (resumed->meta().model != model)
    warn("the checkpoint was written for model '" + resumed->meta().model +
         "', this is '" + model + "'");
  std::string savedMesh = resumed->mesh().toString();
  std::string resumeNote = "resumed from " + resumed->path() + " (step " +
                           std::to_string(firstStep) + ", saved on mesh " +
                           savedMesh;
  if (savedMesh != program.mesh.toString())
    resumeNote += ", resharded onto " + program.mesh.toString();
  outs() << resumeNote << ")\n";
  if (datasetIndex)
    outs() << "data: continuing at sample " << firstPosition << " of the "
           << "stream (epoch " << batches->epochOf(firstPosition) << ")\n";
  return absl::OkStatus();
}

} // namespace mlir::sd::train
