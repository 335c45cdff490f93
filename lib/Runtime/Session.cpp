//===- Session.cpp - Running a compiled training step on a mesh -----------===//

#include "sd/Runtime/Session.h"

#include "sd/Reference/Tensor.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

namespace sd::rt {

void copyBlock(const ArgumentSpec &spec, const std::vector<int64_t> &coords,
               void *globalData, void *localData, bool toGlobal) {
  size_t elementSize = static_cast<size_t>(elementBytes(spec.elementType));
  auto *global = static_cast<char *>(globalData);
  auto *local = static_cast<char *>(localData);
  // A padded block's padding starts as zeros.
  if (!toGlobal)
    std::memset(local, 0, static_cast<size_t>(spec.localBytes()));
  spec.forEachValidRow(coords, [&](int64_t at, int64_t from, int64_t count) {
    char *localRow = local + at * elementSize;
    char *globalRow = global + from * elementSize;
    if (toGlobal)
      std::memcpy(globalRow, localRow, count * elementSize);
    else
      std::memcpy(localRow, globalRow, count * elementSize);
  });
}

TrainingSession::TrainingSession(std::unique_ptr<MeshRuntime> mesh,
                                 ProgramSpec spec,
                                 std::unique_ptr<LoadedProgram> program)
    : mesh(std::move(mesh)), programSpec(std::move(spec)),
      program(std::move(program)) {}

TrainingSession::~TrainingSession() {
  releaseResults();
  releaseArguments();
}

void TrainingSession::releaseResults() {
  for (int64_t d = 0; d < static_cast<int64_t>(kept.size()); ++d) {
    Device &device = mesh->device(d);
    for (void *buffer : kept[d]) {
      if (!buffer)
        continue;
      if (device.pool(SD_DEVICE_MEMORY).owns(buffer))
        device.pool(SD_DEVICE_MEMORY).release(buffer);
      else
        device.pool(SD_HOST_MEMORY).release(buffer);
    }
  }
  kept.clear();
}

void TrainingSession::releaseArguments() {
  for (int64_t d = 0; d < static_cast<int64_t>(buffers.size()); ++d) {
    Device &device = mesh->device(d);
    for (void *buffer : buffers[d]) {
      if (device.pool(SD_DEVICE_MEMORY).owns(buffer))
        device.pool(SD_DEVICE_MEMORY).release(buffer);
      else
        device.pool(SD_HOST_MEMORY).release(buffer);
    }
  }
  buffers.clear();
}

void TrainingSession::resetAfterFailure() {
  // A failed step leaves intermediates allocated and donated arguments
  // half-updated, and devices may disagree: drop everything.
  buffers.clear();
  kept.clear();
  for (int64_t d = 0; d < mesh->numDevices(); ++d) {
    mesh->device(d).pool(SD_DEVICE_MEMORY).releaseAll();
    mesh->device(d).pool(SD_HOST_MEMORY).releaseAll();
  }
}

/// InvalidArgument unless `signature` has the arguments and results of
/// `spec`, each of the element type the spec gives it (the loss f32).
static absl::Status checkSignature(const ProgramSpec &spec,
                                   const ProgramSignature &signature) {
  auto mismatch = [](const std::string &what, ElementType program,
                     ElementType expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", elementTypeName(program), " in the device program but ",
        elementTypeName(expected), " in its spec"));
  };
  if (signature.arguments.size() != spec.arguments.size() ||
      signature.results.size() != spec.resultAliases.size())
    return absl::InvalidArgumentError(
        absl::StrCat("the device program takes ", signature.arguments.size(),
                     " arguments and returns ", signature.results.size(),
                     " results, but its spec has ", spec.arguments.size(),
                     " and ", spec.resultAliases.size()));
  for (size_t i = 0; i < spec.arguments.size(); ++i)
    if (signature.arguments[i] != spec.arguments[i].elementType)
      return mismatch("argument '" + spec.arguments[i].name + "'",
                      signature.arguments[i], spec.arguments[i].elementType);
  for (size_t r = 0; r < spec.results.size(); ++r)
    if (signature.results[r] != spec.results[r].elementType)
      return mismatch("result #" + std::to_string(r), signature.results[r],
                      spec.results[r].elementType);
  if (spec.lossResult >= 0 &&
      signature.results[spec.lossResult] != ElementType::F32)
    return mismatch("the loss", signature.results[spec.lossResult],
                    ElementType::F32);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TrainingSession>>
TrainingSession::create(MeshRuntimeOptions options, ProgramSpec spec,
                        std::unique_ptr<LoadedProgram> program) {
  std::vector<int64_t> axisSizes;
  for (const MeshAxis &axis : options.mesh.axes())
    axisSizes.push_back(axis.size());
  for (ArgumentSpec &arg : spec.arguments) {
    arg.axisSizes = axisSizes;
    if (arg.globalShape.size() != arg.localShape.size() ||
        arg.dimAxes.size() != arg.localShape.size())
      return absl::InvalidArgumentError(
          absl::StrCat("argument '", arg.name, "' has inconsistent ranks"));
    for (size_t d = 0; d < arg.localShape.size(); ++d) {
      int64_t factor = 1;
      for (int32_t axis : arg.dimAxes[d]) {
        if (axis < 0 || axis >= static_cast<int32_t>(axisSizes.size()))
          return absl::InvalidArgumentError(
              absl::StrCat("argument '", arg.name, "' names mesh axis ", axis,
                           " of a mesh with ", axisSizes.size(), " axes"));
        factor *= axisSizes[axis];
      }
      if (blockExtent(arg.globalShape[d], factor) != arg.localShape[d])
        return absl::InvalidArgumentError(absl::StrCat(
            "argument '", arg.name, "': dimension ", d, " is ",
            arg.globalShape[d], " globally but ", arg.localShape[d],
            " per device on ", factor, " devices"));
    }
  }
  int64_t numArgs = static_cast<int64_t>(spec.arguments.size());
  int64_t numResults = static_cast<int64_t>(spec.resultAliases.size());
  std::vector<bool> donated(numArgs, false);
  for (int64_t r = 0; r < numResults; ++r) {
    int64_t alias = spec.resultAliases[r];
    if (alias < -1 || alias >= numArgs)
      return absl::InvalidArgumentError(
          absl::StrCat("result #", r, " is donated into argument #", alias,
                       " of ", numArgs));
    if (alias >= 0 && donated[alias])
      return absl::InvalidArgumentError(
          absl::StrCat("two results are donated into argument '",
                       spec.arguments[alias].name, "'"));
    if (alias >= 0)
      donated[alias] = true;
  }
  if (spec.keepResults) {
    if (static_cast<int64_t>(spec.results.size()) != numResults)
      return absl::InvalidArgumentError(
          absl::StrCat("the program keeps its results but describes ",
                       spec.results.size(), " of its ", numResults));
    for (ArgumentSpec &result : spec.results)
      result.axisSizes = axisSizes;
  }
  if (spec.lossResult == -1 && spec.keepResults) {
    // A forward program: its results are read with gatherResult.
  } else if (spec.lossResult < 0 || spec.lossResult >= numResults ||
             spec.resultAliases[spec.lossResult] != -1)
    return absl::InvalidArgumentError(
        absl::StrCat("result #", spec.lossResult, " cannot be the loss"));
  // (A session without a program holds and compares arguments only.)
  if (program)
    if (absl::Status status = checkSignature(spec, program->signature());
        !status.ok())
      return status;
  auto runtime = MeshRuntime::create(std::move(options));
  if (!runtime.ok())
    return runtime.status();
  return std::unique_ptr<TrainingSession>(new TrainingSession(
      std::move(*runtime), std::move(spec), std::move(program)));
}

absl::Status TrainingSession::checkGlobal(int64_t index,
                                          const HostTensor &global) const {
  const ArgumentSpec &arg = programSpec.arguments[index];
  if (global.elementType() != arg.elementType)
    return absl::InvalidArgumentError(absl::StrCat(
        "argument '", arg.name, "' holds ", elementTypeName(arg.elementType),
        " elements, not ", elementTypeName(global.elementType())));
  if (global.size() != numElements(arg.globalShape))
    return absl::InvalidArgumentError(
        absl::StrCat("argument '", arg.name, "' has ", global.size(),
                     " elements, expected ", numElements(arg.globalShape)));
  return absl::OkStatus();
}

absl::Status
TrainingSession::setArguments(const std::vector<HostTensor> &globals) {
  const std::vector<ArgumentSpec> &args = programSpec.arguments;
  if (globals.size() != args.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", args.size(), " arguments, got ", globals.size()));
  for (size_t i = 0; i < args.size(); ++i)
    if (absl::Status status = checkGlobal(static_cast<int64_t>(i), globals[i]);
        !status.ok())
      return status;
  return fillArguments([&](int64_t index, const std::vector<int64_t> &coords,
                           Block out) {
    copyBlock(args[index], coords, const_cast<void *>(globals[index].data()),
              out.data, /*toGlobal=*/false);
    return absl::OkStatus();
  });
}

absl::Status TrainingSession::fillArguments(const BlockFiller &fill) {
  const std::vector<ArgumentSpec> &args = programSpec.arguments;
  releaseArguments();
  buffers.assign(mesh->numDevices(), std::vector<void *>(args.size(), nullptr));
  // first[d][i]: the lowest local device holding the same block of argument
  // i as device d. Only those fill; the others copy from them after.
  int64_t numDevices = mesh->numDevices();
  std::vector<std::vector<int64_t>> first(numDevices,
                                          std::vector<int64_t>(args.size()));
  for (size_t i = 0; i < args.size(); ++i)
    for (int64_t d = 0; d < numDevices; ++d) {
      std::vector<int64_t> offsets =
          args[i].blockOffsets(mesh->device(d).coordinates());
      first[d][i] = d;
      for (int64_t e = 0; e < d; ++e)
        if (first[e][i] == e &&
            args[i].blockOffsets(mesh->device(e).coordinates()) == offsets) {
          first[d][i] = e;
          break;
        }
    }
  absl::Status status = mesh->runOnDevices([&](Device &device) -> absl::Status {
    std::vector<void *> &mine = buffers[local(device)];
    for (size_t i = 0; i < args.size(); ++i) {
      auto buffer = device.pool(SD_DEVICE_MEMORY)
                        .allocate(args[i].localBytes(), args[i].name);
      if (!buffer.ok())
        return buffer.status();
      mine[i] = *buffer;
    }
    return absl::OkStatus();
  });
  // The distinct blocks, shared out over every device's thread (a block
  // replicated on all devices would otherwise be made by device 0 alone).
  std::vector<std::pair<int64_t, size_t>> jobs;
  for (int64_t d = 0; d < numDevices; ++d)
    for (size_t i = 0; i < args.size(); ++i)
      if (first[d][i] == d)
        jobs.push_back({d, i});
  if (status.ok())
    status = mesh->runOnDevices([&](Device &device) -> absl::Status {
      for (size_t j = local(device); j < jobs.size();
           j += static_cast<size_t>(numDevices)) {
        auto [d, i] = jobs[j];
        Block block{args[i].elementType, buffers[d][i],
                    numElements(args[i].localShape)};
        if (absl::Status filled = fill(static_cast<int64_t>(i),
                                       mesh->device(d).coordinates(), block);
            !filled.ok())
          return filled;
      }
      return absl::OkStatus();
    });
  // Each device copies its replicas itself, all devices at once.
  if (status.ok())
    status = mesh->runOnDevices([&](Device &device) -> absl::Status {
      int64_t d = local(device);
      for (size_t i = 0; i < args.size(); ++i)
        if (first[d][i] != d)
          std::memcpy(buffers[d][i], buffers[first[d][i]][i],
                      args[i].localBytes());
      return absl::OkStatus();
    });
  if (!status.ok())
    resetAfterFailure();
  return status;
}

absl::Status TrainingSession::setArgument(int64_t index,
                                          const HostTensor &global) {
  if (buffers.empty())
    return absl::FailedPreconditionError("the session has no arguments");
  if (index < 0 || index >= static_cast<int64_t>(programSpec.arguments.size()))
    return absl::OutOfRangeError(absl::StrCat("no argument #", index));
  if (absl::Status status = checkGlobal(index, global); !status.ok())
    return status;
  const ArgumentSpec &arg = programSpec.arguments[index];
  for (int64_t d = 0; d < mesh->numDevices(); ++d)
    copyBlock(arg, mesh->device(d).coordinates(),
              const_cast<void *>(global.data()), buffers[d][index],
              /*toGlobal=*/false);
  return absl::OkStatus();
}

absl::StatusOr<TrainingSession::StepResult>
TrainingSession::step(int64_t stepsTaken) {
  if (buffers.empty())
    return absl::FailedPreconditionError(
        "the session has no arguments (setArguments failed or was not called, "
        "or a step failed)");
  const std::vector<ArgumentSpec> &args = programSpec.arguments;
  size_t numResults = programSpec.resultAliases.size();
  std::vector<double> losses(mesh->numDevices(), 0.0);
  std::vector<int64_t> comm(mesh->numDevices(), 0);
  releaseResults();
  if (programSpec.keepResults)
    kept.assign(mesh->numDevices(), std::vector<void *>(numResults, nullptr));
  const SdApi *api = MeshRuntime::api();
  SdProgramEntry entry = program->entry();
  auto start = std::chrono::steady_clock::now();
  absl::Status status = mesh->runOnDevices([&](Device &device) -> absl::Status {
    std::vector<void *> &mine = buffers[local(device)];
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i].kind == ArgumentKind::Step)
        *static_cast<float *>(mine[i]) = static_cast<float>(stepsTaken);
    int64_t commBefore = device.counters().commBytes;
    std::vector<void *> results(numResults, nullptr);
    device.clearError();
    if (entry(api, reinterpret_cast<SdDevice *>(&device), mine.data(),
              results.data()) != 0) {
      absl::Status error = device.error();
      // A failed step leaves the device's buffers in an unknown state.
      if (error.ok())
        error = absl::InternalError(absl::StrCat(
            "device ", device.id(), ": the program failed without a reason"));
      return error;
    }
    if (!device.error().ok())
      return device.error();
    for (void *result : results)
      if (!result)
        return absl::InternalError(absl::StrCat(
            "device ", device.id(), ": the program returned a null result"));
    comm[local(device)] = device.counters().commBytes - commBefore;
    MemoryPool &pool = device.pool(SD_DEVICE_MEMORY);
    for (size_t r = 0; r < numResults; ++r) {
      int64_t alias = programSpec.resultAliases[r];
      if (static_cast<int64_t>(r) == programSpec.lossResult)
        losses[local(device)] = *static_cast<float *>(results[r]);
      if (alias >= 0) {
        if (results[r] != mine[alias]) {
          if (pool.owns(mine[alias]))
            pool.release(mine[alias]);
          else
            device.pool(SD_HOST_MEMORY).release(mine[alias]);
          mine[alias] = results[r];
        }
        continue;
      }
      // Results nobody keeps (the loss), unless the caller reads them.
      bool isArgument =
          std::find(mine.begin(), mine.end(), results[r]) != mine.end();
      if (programSpec.keepResults) {
        // An argument returned as it is stays the argument's: keep a copy.
        if (isArgument) {
          int64_t bytes = programSpec.results[r].localBytes();
          absl::StatusOr<void *> copy = pool.allocate(bytes, "result");
          if (!copy.ok())
            return copy.status();
          std::memcpy(*copy, results[r], bytes);
          kept[local(device)][r] = *copy;
        } else {
          kept[local(device)][r] = results[r];
        }
        continue;
      }
      if (!isArgument) {
        if (pool.owns(results[r]))
          pool.release(results[r]);
        else
          device.pool(SD_HOST_MEMORY).release(results[r]);
      }
    }
    return absl::OkStatus();
  });
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (!status.ok()) {
    resetAfterFailure();
    return status;
  }
  lastCommBytes = *std::max_element(comm.begin(), comm.end());
  double loss = programSpec.lossResult >= 0
                    ? losses[0]
                    : std::numeric_limits<double>::quiet_NaN();
  return StepResult{loss, seconds};
}

absl::StatusOr<HostTensor> TrainingSession::gatherBlocks(
    const ArgumentSpec &arg,
    const std::function<const void *(int64_t)> &blockOf) {
  const MeshSpec &meshSpec = mesh->mesh();
  size_t blockBytes = static_cast<size_t>(arg.localBytes());
  // Every device's block with its mesh id: this process's, and with a
  // process group the other processes' too (each sends its devices'
  // blocks, in id order).
  std::vector<std::pair<int64_t, const void *>> blocks;
  std::vector<std::string> parts;
  if (mesh->process() >= 0 && meshSpec.numProcesses() > 1) {
    ProcessGroup *group = mesh->processGroup();
    if (!group)
      return absl::FailedPreconditionError(absl::StrCat(
          "gathering '", arg.name,
          "' needs the other processes' blocks, but the runtime has no "
          "process group (MeshRuntimeOptions::processGroup)"));
    std::string mine;
    mine.reserve(blockBytes * mesh->numDevices());
    for (int64_t d = 0; d < mesh->numDevices(); ++d)
      mine.append(reinterpret_cast<const char *>(blockOf(d)), blockBytes);
    absl::StatusOr<std::vector<std::string>> gathered = group->allGather(mine);
    if (!gathered.ok())
      return gathered.status();
    parts = std::move(*gathered);
    int64_t perProcess = meshSpec.devicesPerProcess();
    for (size_t p = 0; p < parts.size(); ++p) {
      if (parts[p].size() != blockBytes * perProcess)
        return absl::DataLossError(absl::StrCat(
            "process ", p, " sent ", parts[p].size(), " bytes of '", arg.name,
            "', expected ", blockBytes * perProcess));
      for (int64_t d = 0; d < perProcess; ++d)
        blocks.emplace_back(static_cast<int64_t>(p) * perProcess + d,
                            parts[p].data() + d * blockBytes);
    }
  } else {
    for (int64_t d = 0; d < mesh->numDevices(); ++d)
      blocks.emplace_back(mesh->firstDeviceId() + d, blockOf(d));
  }
  HostTensor global(arg.elementType, numElements(arg.globalShape));
  // (copyBlock only reads the block when it writes the global tensor.)
  for (auto [id, data] : blocks)
    copyBlock(arg, meshSpec.coordinates(id), global.data(),
              const_cast<void *>(data), /*toGlobal=*/true);
  // Replicas must agree bitwise (a missing all-reduce would not); padding
  // holds anything.
  size_t elementSize = static_cast<size_t>(elementBytes(arg.elementType));
  for (const auto &[id, data] : blocks) {
    const char *block = static_cast<const char *>(data);
    bool same = true;
    arg.forEachValidRow(
        meshSpec.coordinates(id), [&](int64_t at, int64_t from, int64_t count) {
          same = same && std::memcmp(block + at * elementSize,
                                     static_cast<const char *>(global.data()) +
                                         from * elementSize,
                                     count * elementSize) == 0;
        });
    if (!same)
      return absl::DataLossError(absl::StrCat("the replicas of '", arg.name,
                                              "' differ (device ", id, ")"));
  }
  return global;
}

absl::StatusOr<HostTensor> TrainingSession::gatherArgument(int64_t index) {
  if (buffers.empty())
    return absl::FailedPreconditionError("the session has no arguments");
  if (index < 0 || index >= static_cast<int64_t>(programSpec.arguments.size()))
    return absl::OutOfRangeError(absl::StrCat("no argument #", index));
  return gatherBlocks(
      programSpec.arguments[index],
      [&](int64_t d) -> const void * { return buffers[d][index]; });
}

absl::StatusOr<HostTensor> TrainingSession::gatherResult(int64_t index) {
  if (kept.empty())
    return absl::FailedPreconditionError(
        "the session keeps no results (ProgramSpec::keepResults, after a "
        "step)");
  if (index < 0 || index >= static_cast<int64_t>(programSpec.results.size()) ||
      !kept[0][index])
    return absl::OutOfRangeError(absl::StrCat("no kept result #", index));
  return gatherBlocks(
      programSpec.results[index],
      [&](int64_t d) -> const void * { return kept[d][index]; });
}

absl::StatusOr<ConstBlock> TrainingSession::deviceBlock(int64_t device,
                                                        int64_t index) {
  if (buffers.empty())
    return absl::FailedPreconditionError("the session has no arguments");
  if (device < 0 || device >= mesh->numDevices())
    return absl::OutOfRangeError(absl::StrCat("no device ", device));
  if (index < 0 || index >= static_cast<int64_t>(programSpec.arguments.size()))
    return absl::OutOfRangeError(absl::StrCat("no argument #", index));
  const ArgumentSpec &arg = programSpec.arguments[index];
  return ConstBlock{arg.elementType, buffers[device][index],
                    numElements(arg.localShape)};
}

int64_t TrainingSession::peakDeviceBytes() {
  int64_t peak = 0;
  for (int64_t d = 0; d < mesh->numDevices(); ++d)
    peak = std::max(peak, mesh->device(d).pool(SD_DEVICE_MEMORY).peakBytes());
  return peak;
}

int64_t TrainingSession::peakHostBytes() {
  int64_t peak = 0;
  for (int64_t d = 0; d < mesh->numDevices(); ++d)
    peak = std::max(peak, mesh->device(d).pool(SD_HOST_MEMORY).peakBytes());
  return peak;
}

absl::StatusOr<ParameterComparison>
compareParameters(TrainingSession &actual, TrainingSession &expected) {
  const std::vector<ArgumentSpec> &actualArgs = actual.spec().arguments;
  const std::vector<ArgumentSpec> &expectedArgs = expected.spec().arguments;
  if (actualArgs.size() != expectedArgs.size())
    return absl::InvalidArgumentError(
        absl::StrCat("the sessions have ", actualArgs.size(), " and ",
                     expectedArgs.size(), " arguments"));
  for (size_t i = 0; i < actualArgs.size(); ++i) {
    if (actualArgs[i].name != expectedArgs[i].name)
      return absl::InvalidArgumentError(absl::StrCat(
          "argument #", i, " is '", actualArgs[i].name,
          "' in one session but '", expectedArgs[i].name, "' in the other"));
    if (actualArgs[i].globalShape != expectedArgs[i].globalShape)
      return absl::InvalidArgumentError(
          absl::StrCat("argument '", actualArgs[i].name,
                       "' has different global shapes in the two sessions"));
  }
  // The parameters form one vector: the largest element difference over
  // the largest parameter magnitude. (Per tensor, a zero-initialized
  // weight after a few AdamW steps holds values of the order of the
  // learning rate, where m/sqrt(v) turns f32 rounding in near-zero
  // gradients into relative differences of 1e-4 without anything wrong.)
  ParameterComparison comparison;
  double worstDiff = 0, scale = 0;
  for (size_t i = 0; i < actualArgs.size(); ++i) {
    if (actualArgs[i].kind != ArgumentKind::Parameter)
      continue;
    absl::StatusOr<HostTensor> actualValues =
        actual.gatherArgument(static_cast<int64_t>(i));
    if (!actualValues.ok())
      return actualValues.status();
    absl::StatusOr<HostTensor> expectedValues =
        expected.gatherArgument(static_cast<int64_t>(i));
    if (!expectedValues.ok())
      return expectedValues.status();
    const std::vector<float> &actualF32 = actualValues->f32();
    const std::vector<float> &expectedF32 = expectedValues->f32();
    for (size_t e = 0; e < expectedF32.size(); ++e) {
      double a = actualF32[e], b = expectedF32[e];
      comparison.finite &= std::isfinite(a) && std::isfinite(b);
      double diff = std::fabs(a - b);
      scale = std::max(scale, std::fabs(b));
      if (diff > worstDiff) {
        worstDiff = diff;
        comparison.worstTensor = actualArgs[i].name;
      }
    }
  }
  comparison.relativeDifference = worstDiff / std::max(scale, 1e-30);
  return comparison;
}

} // namespace sd::rt
