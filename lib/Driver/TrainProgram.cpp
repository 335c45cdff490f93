//===- TrainProgram.cpp - From a model to a runnable training step --------===//

#include "sd/Driver/TrainProgram.h"

#include "sd/Analysis/CostModel.h"
#include "sd/Evaluator/Evaluator.h"
#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"
#include "sd/Target/OpenMP/OpenMPEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sd;

namespace {

/// The training step's module after the default pipeline: partitioned for
/// `options.mesh`, or the single-device step (inlined) without one.
FailureOr<OwningOpRef<ModuleOp>> runPipeline(ModuleOp module,
                                             PipelineOptions options,
                                             bool train = true) {
  OwningOpRef<ModuleOp> clone(module.clone());
  options.train = train;
  options.propagate = options.partition = !options.mesh.empty();
  PassManager pm(module.getContext());
  buildDefaultPipeline(pm, options);
  // With a mesh the pipeline inlines the blocks before propagation.
  if (options.mesh.empty())
    pm.addPass(createInlinerPass());
  if (failed(pm.run(*clone)))
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

/// The single-device training step of `options` (its mesh ignored), and the
/// module holding it.
struct SingleDeviceStep {
  OwningOpRef<ModuleOp> module;
  func::FuncOp step;
};
FailureOr<SingleDeviceStep> buildSingleDeviceStep(ModuleOp module,
                                                  PipelineOptions options) {
  options.mesh.clear();
  options.dcnMesh.clear();
  FailureOr<OwningOpRef<ModuleOp>> single = runPipeline(module, options);
  if (failed(single))
    return failure();
  func::FuncOp step = findTrainStep(**single);
  if (!step)
    return failure();
  return SingleDeviceStep{std::move(*single), step};
}

/// Fills `arg`'s global shape and split axes from its local shape and its
/// `sd.local_sharding` (if any).
LogicalResult describeSharding(func::FuncOp func, ShardingAttr sharding,
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
  return success();
}

/// The runtime's description of `func`'s arguments and results. A training
/// step returns the scalar loss first; a `forward` model function returns
/// the loss (@loss) or tensors the caller reads (@denoise), which the
/// session keeps.
FailureOr<::sd::rt::ProgramSpec> describe(func::FuncOp func,
                                          const ::sd::MeshSpec &mesh,
                                          bool forward = false) {
  ::sd::rt::ProgramSpec spec;
  llvm::StringMap<int64_t> inputOrdinals;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    ::sd::rt::ArgumentSpec arg;
    auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
    if (!type || !type.hasStaticShape())
      return func.emitError() << "argument #" << i
                              << " is not a statically shaped tensor";
    arg.localShape.assign(type.getShape().begin(), type.getShape().end());
    Attribute role = func.getArgAttr(i, SDDialect::kRoleAttrName);
    if (auto param = dyn_cast_if_present<ParamAttr>(role)) {
      arg.kind = ::sd::rt::ArgumentKind::Parameter;
      arg.name = param.getName().str();
    } else if (auto state = dyn_cast_if_present<OptimizerStateAttr>(role)) {
      arg.kind = ::sd::rt::ArgumentKind::OptimizerState;
      arg.name = (stringifyMomentKind(state.getKind()) + " " +
                  state.getParam().getValue())
                     .str();
    } else if (auto input = dyn_cast_if_present<InputAttr>(role)) {
      StringRef kind = stringifyInputKind(input.getKind());
      arg.kind = input.getKind() == InputKind::step
                     ? ::sd::rt::ArgumentKind::Step
                     : ::sd::rt::ArgumentKind::Input;
      arg.name = (kind + "." + Twine(inputOrdinals[kind]++)).str();
    } else {
      return func.emitError() << "argument #" << i << " has no sd.role";
    }
    if (failed(describeSharding(func,
                                func.getArgAttrOfType<ShardingAttr>(
                                    i, SDDialect::kLocalShardingAttrName),
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
      if (failed(describeSharding(
              func,
              func.getResultAttrOfType<ShardingAttr>(
                  r, SDDialect::kLocalShardingAttrName),
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

FailureOr<TrainProgram>
mlir::sd::buildTrainProgram(ModuleOp module, const PipelineOptions &options) {
  TrainProgram program;
  // The whole model's FLOPs come from the single-device step.
  FailureOr<SingleDeviceStep> single = buildSingleDeviceStep(module, options);
  if (failed(single))
    return failure();
  func::FuncOp singleStep = single->step;
  FailureOr<CostReport> cost =
      computeCostReport(singleStep, LayoutChoice::Auto);
  if (failed(cost))
    return failure();
  program.modelFlops = cost->flops;
  for (unsigned i = 0; i < singleStep.getNumArguments(); ++i) {
    auto input = singleStep.getArgAttrOfType<InputAttr>(
        i, SDDialect::kRoleAttrName);
    auto type = cast<RankedTensorType>(singleStep.getArgument(i).getType());
    if (input && input.getKind() != InputKind::step && type.getRank() > 0) {
      program.batch = type.getDimSize(0);
      break;
    }
  }

  FailureOr<::sd::MeshSpec> mesh = programMesh(module, options);
  if (failed(mesh))
    return failure();
  program.mesh = *mesh;
  OwningOpRef<ModuleOp> lowered;
  if (options.mesh.empty()) {
    lowered = std::move(single->module);
  } else {
    FailureOr<OwningOpRef<ModuleOp>> meshModule = runPipeline(module, options);
    if (failed(meshModule))
      return failure();
    lowered = std::move(*meshModule);
  }
  func::FuncOp step = findTrainStep(*lowered);
  if (!step)
    return failure();
  FailureOr<::sd::rt::ProgramSpec> spec = describe(step, program.mesh);
  if (failed(spec))
    return failure();
  program.spec = std::move(*spec);
  // Arguments are initialized in the single-device step's order: the
  // partitioned step must have the same arguments in the same order.
  if (!options.mesh.empty()) {
    FailureOr<::sd::rt::ProgramSpec> singleSpec =
        describe(singleStep, ::sd::MeshSpec({::sd::MeshAxis{"data", 1, 1}}));
    if (failed(singleSpec))
      return failure();
    const auto &a = program.spec.arguments, &b = singleSpec->arguments;
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
      if (i >= a.size() || i >= b.size() || a[i].name != b[i].name ||
          a[i].globalShape != b[i].globalShape)
        return step.emitError()
               << "the partitioned step's argument #" << i
               << " does not match the single-device step's";
  }
  if (!options.mesh.empty()) {
    FailureOr<CostReport> local = computeCostReport(step, LayoutChoice::Auto);
    if (failed(local))
      return failure();
    program.predictedCommBytes = local->collectiveBytesPerDevice;
    program.predictedCommunication =
        predictCommunication(*local, options.network);
  }
  FailureOr<std::string> source = lowerToOpenMP(*lowered, "train_step");
  if (failed(source))
    return failure();
  program.source = std::move(*source);
  return program;
}

FailureOr<std::vector<std::vector<float>>>
mlir::sd::initialTrainArguments(ModuleOp module, const PipelineOptions &options,
                                uint64_t seed) {
  FailureOr<SingleDeviceStep> single = buildSingleDeviceStep(module, options);
  if (failed(single))
    return failure();
  FailureOr<std::vector<::sd::ref::Tensor>> tensors =
      initializeArguments(single->step, seed);
  if (failed(tensors))
    return failure();
  std::vector<std::vector<float>> values;
  values.reserve(tensors->size());
  for (::sd::ref::Tensor &tensor : *tensors) {
    const std::vector<double> &v = tensor.values();
    values.emplace_back(v.begin(), v.end());
    tensor = ::sd::ref::Tensor();
  }
  return values;
}

FailureOr<TrainProgram> mlir::sd::buildModelProgram(ModuleOp module,
                                                    const PipelineOptions &options,
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
