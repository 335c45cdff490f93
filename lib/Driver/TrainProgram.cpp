//===- TrainProgram.cpp - From a model to a runnable training step --------===//

#include "sd/Driver/TrainProgram.h"

#include "sd/Analysis/CostModel.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"
#include "sd/Target/OpenMP/OpenMPEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sd;

namespace {

/// Runs `pm` on `module` and verifies the result once, not after every
/// pass: on a program of hundreds of thousands of ops each verification
/// costs a large part of a pass. sdopt verifies after every pass, and the
/// tests run each pass there.
LogicalResult runAndVerify(PassManager &pm, ModuleOp module) {
  pm.enableVerifier(false);
  if (failed(pm.run(module)))
    return failure();
  return verify(module);
}

bool hasCalls(ModuleOp module) {
  return module.walk([](CallOpInterface) { return WalkResult::interrupt(); })
      .wasInterrupted();
}

/// Inlines what calls are left in `module`: none, after a training
/// pipeline that inlined the model's blocks, and then the inliner (and the
/// canonicalization it runs on every function) is skipped.
LogicalResult inlineCalls(ModuleOp module) {
  if (!hasCalls(module))
    return success();
  PassManager pm(module.getContext());
  pm.addPass(createInlinerPass());
  return runAndVerify(pm, module);
}

/// The training step's module after the default pipeline: partitioned for
/// `options.mesh`, or the single-device step (inlined) without one.
FailureOr<OwningOpRef<ModuleOp>>
runPipeline(ModuleOp module, PipelineOptions options, bool train = true) {
  OwningOpRef<ModuleOp> clone(module.clone());
  options.train = train;
  options.propagate = options.partition = !options.mesh.empty();
  PassManager pm(module.getContext());
  buildDefaultPipeline(pm, options);
  if (failed(runAndVerify(pm, *clone)))
    return failure();
  // With a mesh the pipeline inlined the blocks before propagation.
  if (options.mesh.empty() && failed(inlineCalls(*clone)))
    return failure();
  return clone;
}

func::FuncOp findTrainStep(ModuleOp module) {
  auto func = module.lookupSymbol<func::FuncOp>("train_step");
  if (!func)
    module.emitError("the pipeline produced no @train_step (does the model "
                     "define @loss?)");
  return func;
}

/// Fills `arg`'s global shape and split axes from its local shape, its
/// `sd.local_sharding` (if any) and, for padded blocks, its
/// `sd.global_shape`.
LogicalResult describeSharding(func::FuncOp func, ShardingAttr sharding,
                               DenseI64ArrayAttr globalShape,
                               const ::sd::MeshSpec &mesh,
                               ::sd::rt::ArgumentSpec &arg) {
  arg.dimAxes.assign(arg.localShape.size(), {});
  arg.globalShape = arg.localShape;
  if (!sharding)
    return success();
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDimShardings())) {
    for (StringAttr name : dimSharding.getAxes()) {
      int32_t index = -1;
      for (auto [a, axis] : llvm::enumerate(mesh.axes()))
        if (axis.name == name.getValue())
          index = static_cast<int32_t>(a);
      if (index < 0)
        return func.emitError()
               << "'" << arg.name << "' is sharded over unknown mesh axis '"
               << name.getValue() << "'";
      arg.dimAxes[dim].push_back(index);
      arg.globalShape[dim] *= mesh.axes()[index].size();
    }
  }
  if (globalShape) {
    if (globalShape.size() != static_cast<int64_t>(arg.localShape.size()))
      return func.emitError() << "'" << arg.name << "' has a global shape of "
                              << globalShape.size() << " dimensions for rank "
                              << arg.localShape.size();
    arg.globalShape.assign(globalShape.asArrayRef().begin(),
                           globalShape.asArrayRef().end());
  }
  return success();
}

/// How a parameter starts, in the runtime's terms.
::sd::rt::InitSpec initSpec(InitAttr init) {
  ::sd::rt::InitSpec spec;
  spec.scale = init.getScale().convertToDouble();
  switch (init.getKind()) {
  case InitKind::zeros:
    spec.kind = ::sd::rt::InitKind::Zeros;
    break;
  case InitKind::ones:
    spec.kind = ::sd::rt::InitKind::Ones;
    break;
  case InitKind::constant:
    spec.kind = ::sd::rt::InitKind::Constant;
    break;
  case InitKind::normal:
    spec.kind = ::sd::rt::InitKind::Normal;
    break;
  case InitKind::uniform:
    spec.kind = ::sd::rt::InitKind::Uniform;
    break;
  case InitKind::xavier_uniform:
    spec.kind = ::sd::rt::InitKind::XavierUniform;
    break;
  }
  return spec;
}

/// What describeRole has seen of the arguments before the current one.
struct SeenArguments {
  /// How each parameter starts, by name (a program lists its parameters
  /// before their EMA).
  llvm::StringMap<::sd::rt::InitSpec> parameterInits;
  /// The next ordinal of each input kind.
  llvm::StringMap<int64_t> inputOrdinals;
};

/// Fills `arg`'s kind, name and typed role from argument `i`'s `sd.role`
/// (and its element type); an error on `func` for what the runtime cannot
/// hold or start.
LogicalResult describeRole(func::FuncOp func, unsigned i,
                           ::sd::rt::ArgumentSpec &arg, SeenArguments &seen) {
  auto type = cast<RankedTensorType>(func.getArgument(i).getType());
  if (!type.getElementType().isF32()) {
    InFlightDiagnostic error = func.emitError() << "argument #" << i;
    if (auto param =
            func.getArgAttrOfType<ParamAttr>(i, SDDialect::kRoleAttrName))
      error << " (parameter '" << param.getName().getValue() << "')";
    return error << " has element type " << type.getElementType()
                 << "; the runtime holds f32 arguments and computes in bf16 "
                    "from them with weights_dtype and activations_dtype "
                    "bfloat16 (write the program with sdgen --dtype=f32)";
  }
  arg.elementType = ::sd::rt::ElementType::F32;
  Attribute role = func.getArgAttr(i, SDDialect::kRoleAttrName);
  if (auto param = dyn_cast_if_present<ParamAttr>(role)) {
    arg.kind = ::sd::rt::ArgumentKind::Parameter;
    arg.name = arg.parameter = param.getName().str();
    arg.frozen =
        static_cast<bool>(func.getArgAttr(i, SDDialect::kFrozenAttrName));
    arg.storedShape.assign(param.getStoredShape().begin(),
                           param.getStoredShape().end());
    arg.init = initSpec(param.getInit());
    if (!std::isfinite(static_cast<float>(arg.init.scale)))
      return func.emitError()
             << "argument #" << i << " (\"" << arg.name
             << "\") is initialized with "
             << stringifyInitKind(param.getInit().getKind()) << "("
             << arg.init.scale << "), whose scale is not a finite f32 number";
    if (arg.init.kind == ::sd::rt::InitKind::XavierUniform &&
        type.getRank() < 2)
      return func.emitError()
             << "argument #" << i << " (\"" << arg.name
             << "\") is initialized with xavier_uniform, which needs rank >= "
                "2, not rank "
             << type.getRank();
    seen.parameterInits.try_emplace(arg.parameter, arg.init);
    return success();
  }
  if (auto state = dyn_cast_if_present<OptimizerStateAttr>(role)) {
    arg.kind = ::sd::rt::ArgumentKind::OptimizerState;
    arg.parameter = state.getParam().str();
    arg.name =
        (stringifyMomentKind(state.getKind()) + " " + arg.parameter).str();
    arg.moment = state.getKind() == MomentKind::mu ? ::sd::rt::MomentKind::Mu
                 : state.getKind() == MomentKind::nu
                     ? ::sd::rt::MomentKind::Nu
                     : ::sd::rt::MomentKind::Ema;
    // An EMA starts at its parameter (the step lists parameters first).
    if (auto found = seen.parameterInits.find(arg.parameter);
        found != seen.parameterInits.end())
      arg.init = found->second;
    return success();
  }
  auto input = dyn_cast_if_present<InputAttr>(role);
  if (!input)
    return func.emitError() << "argument #" << i << " has no sd.role";
  StringRef kind = stringifyInputKind(input.getKind());
  int64_t ordinal = seen.inputOrdinals[kind]++;
  arg.name = (kind + "." + Twine(ordinal)).str();
  arg.ordinal = ordinal;
  if (input.getKind() == InputKind::step) {
    arg.kind = ::sd::rt::ArgumentKind::Step;
    return success();
  }
  if (input.getKind() == InputKind::hyperparameters) {
    arg.kind = ::sd::rt::ArgumentKind::Hyperparameters;
    return success();
  }
  arg.kind = ::sd::rt::ArgumentKind::Input;
  std::optional<::sd::rt::InputRole> parsed = ::sd::rt::parseInputRole(kind);
  if (!parsed)
    return func.emitError() << "argument #" << i << " is an input of kind '"
                            << kind << "', which the runtime cannot feed";
  arg.role = *parsed;
  return success();
}

/// The runtime's description of `func`'s arguments and results. A training
/// step returns the scalar loss first; a `forward` model function returns
/// the loss (@loss) or tensors the caller reads (@denoise), which the
/// session keeps.
FailureOr<::sd::rt::ProgramSpec>
describe(func::FuncOp func, const ::sd::MeshSpec &mesh, bool forward = false) {
  ::sd::rt::ProgramSpec spec;
  SeenArguments seen;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    ::sd::rt::ArgumentSpec arg;
    auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
    if (!type || !type.hasStaticShape())
      return func.emitError()
             << "argument #" << i << " is not a statically shaped tensor";
    arg.localShape.assign(type.getShape().begin(), type.getShape().end());
    if (failed(describeRole(func, i, arg, seen)))
      return failure();
    if (failed(describeSharding(func,
                                func.getArgAttrOfType<ShardingAttr>(
                                    i, SDDialect::kLocalShardingAttrName),
                                func.getArgAttrOfType<DenseI64ArrayAttr>(
                                    i, SDDialect::kGlobalShapeAttrName),
                                mesh, arg)))
      return failure();
    spec.arguments.push_back(std::move(arg));
  }
  for (unsigned r = 0; r < func.getNumResults(); ++r) {
    auto alias =
        func.getResultAttrOfType<IntegerAttr>(r, SDDialect::kAliasesAttrName);
    spec.resultAliases.push_back(alias ? alias.getInt() : -1);
  }
  spec.lossResult = 0;
  auto first = func.getNumResults() > 0
                   ? dyn_cast<RankedTensorType>(func.getResultTypes()[0])
                   : RankedTensorType();
  if (forward && !(first && first.getRank() == 0)) {
    spec.lossResult = -1;
    spec.keepResults = true;
    for (unsigned r = 0; r < func.getNumResults(); ++r) {
      auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[r]);
      if (!type || !type.hasStaticShape())
        return func.emitError()
               << "result #" << r << " is not a statically shaped tensor";
      ::sd::rt::ArgumentSpec result;
      result.name = "result #" + std::to_string(r);
      result.localShape.assign(type.getShape().begin(), type.getShape().end());
      if (failed(describeSharding(func,
                                  func.getResultAttrOfType<ShardingAttr>(
                                      r, SDDialect::kLocalShardingAttrName),
                                  func.getResultAttrOfType<DenseI64ArrayAttr>(
                                      r, SDDialect::kGlobalShapeAttrName),
                                  mesh, result)))
        return failure();
      spec.results.push_back(std::move(result));
    }
    return spec;
  }
  auto lossType = func.getNumResults() > 0
                      ? dyn_cast<RankedTensorType>(func.getResultTypes()[0])
                      : RankedTensorType();
  if (!lossType || lossType.getRank() != 0 || spec.resultAliases[0] != -1)
    return func.emitError() << "result #0 of the training step is not the "
                               "scalar loss";
  return spec;
}

/// The mesh `options` describe (one `data:1` axis without one); an error on
/// `module` when it does not parse.
FailureOr<::sd::MeshSpec> programMesh(ModuleOp module,
                                      const PipelineOptions &options) {
  if (options.mesh.empty())
    return ::sd::MeshSpec({::sd::MeshAxis{"data", 1, 1}});
  ::sd::MeshOptions meshOptions;
  if (options.devices > 0)
    meshOptions.devices = options.devices;
  if (options.processes > 0)
    meshOptions.processes = options.processes;
  absl::StatusOr<::sd::MeshSpec> mesh =
      ::sd::parseMesh(options.mesh, options.dcnMesh, meshOptions);
  if (!mesh.ok())
    return module.emitError() << mesh.status().message();
  return *mesh;
}

} // namespace

/// A cost report's per-device memory.
static DeviceMemory deviceMemory(const CostReport &report) {
  DeviceMemory memory;
  memory.parameters = report.parameterBytes;
  memory.optimizerState = report.optimizerStateBytes;
  memory.inputs = report.inputBytes;
  memory.activationPeak = report.peakActivationBytes;
  memory.hostPeak = report.peakHostBytes;
  return memory;
}

/// The global batch: dimension 0 of the first input but the step counter.
static int64_t globalBatch(func::FuncOp step) {
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto input = step.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
    auto type = cast<RankedTensorType>(step.getArgument(i).getType());
    if (input && input.getKind() != InputKind::step &&
        input.getKind() != InputKind::hyperparameters && type.getRank() > 0)
      return type.getDimSize(0);
  }
  return 0;
}

FailureOr<TrainProgram>
mlir::sd::buildTrainProgram(ModuleOp module, const PipelineOptions &options) {
  TrainProgram program;
  FailureOr<::sd::MeshSpec> mesh = programMesh(module, options);
  if (failed(mesh))
    return failure();
  program.mesh = *mesh;
  // One module through the pipeline: the training step on global shapes
  // first, where the whole model's FLOPs and the global batch are read,
  // then (with a mesh) partitioned in place.
  OwningOpRef<ModuleOp> lowered(module.clone());
  PipelineOptions global = options;
  global.train = true;
  global.propagate = global.partition = false;
  PassManager pm(module.getContext());
  buildDefaultPipeline(pm, global);
  if (failed(runAndVerify(pm, *lowered)) || failed(inlineCalls(*lowered)))
    return failure();
  // The gradients' reduction dtype, on the inlined step that both the
  // one-device and the partitioned program start from.
  PassManager widen(module.getContext());
  addGradientReductionPasses(widen, global);
  if (widen.size() > 0 && failed(runAndVerify(widen, *lowered)))
    return failure();
  func::FuncOp step = findTrainStep(*lowered);
  if (!step)
    return failure();
  FailureOr<CostReport> cost = computeCostReport(step, LayoutChoice::Auto);
  if (failed(cost))
    return failure();
  program.modelFlops = cost->flops;
  program.batch = globalBatch(step);
  if (!options.mesh.empty()) {
    PassManager partition(module.getContext());
    PipelineOptions partitioned = options;
    partitioned.train = true;
    partitioned.propagate = partitioned.partition = true;
    partitioned.callFree = !hasCalls(*lowered);
    buildPartitionPipeline(partition, partitioned);
    if (failed(runAndVerify(partition, *lowered)))
      return failure();
    step = findTrainStep(*lowered);
    if (!step)
      return failure();
    FailureOr<CostReport> local = computeCostReport(step, LayoutChoice::Auto);
    if (failed(local))
      return failure();
    program.predictedCommBytes = local->collectiveBytesPerDevice;
    program.predictedCommunication =
        predictCommunication(*local, options.network);
    program.memory = deviceMemory(*local);
  } else {
    program.memory = deviceMemory(*cost);
  }
  FailureOr<::sd::rt::ProgramSpec> spec = describe(step, program.mesh);
  if (failed(spec))
    return failure();
  program.spec = std::move(*spec);
  ProgramMemory allocated;
  FailureOr<std::string> source =
      lowerToOpenMP(*lowered, "train_step", &allocated);
  if (failed(source))
    return failure();
  program.source = std::move(*source);
  // What the emitted program allocates is what the devices will hold beside
  // the arguments: the cost model's activation peak counts every value,
  // also those the fused kernels keep in registers.
  program.memory.activationPeak = allocated.devicePeakBytes;
  program.memory.hostPeak = allocated.hostPeakBytes;
  for (const ProgramMemory::Buffer &buffer : allocated.devicePeakBuffers)
    program.memory.peakBuffers.push_back({buffer.name, buffer.bytes});
  return program;
}

FailureOr<TrainProgram>
mlir::sd::buildModelProgram(ModuleOp module, const PipelineOptions &options,
                            StringRef function) {
  TrainProgram program;
  FailureOr<::sd::MeshSpec> mesh = programMesh(module, options);
  if (failed(mesh))
    return failure();
  program.mesh = *mesh;
  if (!module.lookupSymbol<func::FuncOp>(function))
    return module.emitError() << "the model has no @" << function;
  FailureOr<OwningOpRef<ModuleOp>> lowered =
      runPipeline(module, options, /*train=*/false);
  if (failed(lowered))
    return failure();
  auto func = (*lowered)->lookupSymbol<func::FuncOp>(function);
  FailureOr<::sd::rt::ProgramSpec> spec =
      describe(func, program.mesh, /*forward=*/true);
  if (failed(spec))
    return failure();
  program.spec = std::move(*spec);
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto input = func.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
    const ::sd::rt::ArgumentSpec &arg = program.spec.arguments[i];
    if (input && !arg.globalShape.empty()) {
      program.batch = arg.globalShape[0];
      break;
    }
  }
  FailureOr<CostReport> local = computeCostReport(func, LayoutChoice::Auto);
  if (failed(local))
    return failure();
  program.predictedCommBytes = local->collectiveBytesPerDevice;
  program.predictedCommunication =
      predictCommunication(*local, options.network);
  FailureOr<std::string> source = lowerToOpenMP(**lowered, function);
  if (failed(source))
    return failure();
  program.source = std::move(*source);
  return program;
}

absl::StatusOr<::sd::rt::CompiledProgram>
mlir::sd::compileDeviceProgram(const std::string &source,
                               const DeviceSettings &settings) {
  // Refuse a team the CPUs cannot serve before minutes of compiling.
  if (absl::Status threads =
          ::sd::rt::checkThreadsPerDevice(settings.threadsPerDevice);
      !threads.ok())
    return threads;
  ::sd::rt::CompileOptions compileOptions;
  compileOptions.cacheDir = settings.cacheDir;
  // What is being compiled and how far along it is, a line a file (only
  // when the program is not in the cache).
  if (settings.printCompilation)
    compileOptions.progress = [](const ::sd::rt::CompileProgress &progress) {
      llvm::raw_ostream &os = llvm::outs();
      if (progress.done == 0)
        os << "compiling the device program: " << progress.total
           << (progress.total == 1 ? " file, " : " files, ") << progress.jobs
           << " at a time (" << progress.directory << ")\n";
      else
        os << "  [" << progress.done << "/" << progress.total << "] "
           << progress.file << " " << llvm::format("%.1f", progress.seconds)
           << " s\n";
      os.flush();
    };
  absl::StatusOr<::sd::rt::CompiledProgram> compiled =
      ::sd::rt::compileProgram(source, compileOptions);
  if (compiled.ok() && !compiled->cacheHit && settings.printCompilation)
    llvm::outs() << "compiled the device program in "
                 << llvm::format("%.1f", compiled->compileSeconds) << " s\n";
  return compiled;
}

absl::StatusOr<std::unique_ptr<::sd::rt::TrainingSession>>
mlir::sd::startProgramSession(const TrainProgram &program,
                              const DeviceSettings &settings) {
  absl::StatusOr<::sd::rt::CompiledProgram> compiled =
      compileDeviceProgram(program.source, settings);
  if (!compiled.ok())
    return compiled.status();
  absl::StatusOr<std::unique_ptr<::sd::rt::LoadedProgram>> loaded =
      ::sd::rt::LoadedProgram::load(compiled->libraryPath);
  if (!loaded.ok())
    return loaded.status();
  ::sd::rt::MeshRuntimeOptions runtime;
  runtime.mesh = program.mesh;
  // A one-device program (--verify's) runs in this process alone.
  if (program.mesh.numProcesses() > 1) {
    runtime.process = settings.process;
    runtime.transportFactory = settings.transportFactory;
    runtime.processGroup = settings.processGroup;
  }
  runtime.threadsPerDevice = settings.threadsPerDevice;
  runtime.deviceMemoryBudget = settings.deviceMemoryBudget;
  runtime.hostMemoryBudget = settings.hostMemoryBudget;
  return ::sd::rt::TrainingSession::create(runtime, program.spec,
                                           std::move(*loaded));
}
