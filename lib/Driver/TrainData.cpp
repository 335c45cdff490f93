//===- TrainData.cpp - What each step of a run trains on ------------------===//

#include "TrainRunImpl.h"

#include "sd/IR/SDOps.h"

namespace mlir::sd::train {

/// The inputs of the model's @loss that a data set feeds, from its argument
/// types (the batch dimension may be dynamic), named as the step names
/// them; an input whose other dimensions are not all static is left to
/// the batch maker.
static std::vector<data::StepInput> modelInputs(ModuleOp module) {
  std::vector<data::StepInput> inputs;
  auto loss = module.lookupSymbol<func::FuncOp>("loss");
  if (!loss)
    return inputs;
  llvm::StringMap<int64_t> ordinals;
  for (BlockArgument arg : loss.getArguments()) {
    auto input = loss.getArgAttrOfType<InputAttr>(arg.getArgNumber(),
                                                  SDDialect::kRoleAttrName);
    if (!input)
      continue;
    StringRef kind = stringifyInputKind(input.getKind());
    int64_t ordinal = ordinals[kind]++;
    std::optional<rt::InputRole> role = rt::parseInputRole(kind);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!role || !type || type.getRank() == 0 ||
        llvm::any_of(type.getShape().drop_front(), ShapedType::isDynamic))
      continue;
    inputs.push_back(
        {arg.getArgNumber(), *role, (kind + "." + Twine(ordinal)).str(),
         std::vector<int64_t>(type.getShape().begin(), type.getShape().end())});
  }
  return inputs;
}

absl::Status TrainRun::openDataset() {
  if (options.datasetType != DatasetType::Sd)
    return absl::OkStatus();
  absl::StatusOr<data::DatasetIndex> index =
      data::readDatasetIndex(options.trainDataDir);
  if (!index.ok())
    return index.status();
  // Every shard's size, checksum and shapes, before anything compiles: a
  // damaged data set is one error naming the file, not a failure at some
  // step of the run.
  if (absl::Status status = data::verifyDataset(*index); !status.ok())
    return status;
  // The samples' shape and classes against the model's inputs, before a
  // compile that would be wasted on them.
  if (absl::Status status = data::checkDatasetFits(modelInputs(module), *index);
      !status.ok())
    return status;
  absl::StatusOr<data::DatasetReader> reader =
      data::DatasetReader::open(*index, "train");
  if (!reader.ok())
    return reader.status();
  dataset = std::make_shared<const data::DatasetReader>(std::move(*reader));
  datasetIndex = std::move(*index);
  return absl::OkStatus();
}

/// The guidance strength @loss records for its guidance input (Flux's
/// sd.guidance); 0 for a model without one.
static double trainingGuidance(ModuleOp module) {
  auto loss = module.lookupSymbol<func::FuncOp>("loss");
  auto guidance =
      loss ? loss->getAttrOfType<FloatAttr>(SDDialect::kGuidanceAttrName)
           : FloatAttr();
  return guidance ? guidance.getValueAsDouble() : 0.0;
}

/// The inputs of a step or model program that sdrun feeds, by role.
static absl::StatusOr<std::vector<data::StepInput>>
stepInputs(const rt::ProgramSpec &spec) {
  std::vector<data::StepInput> inputs;
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    if (arg.kind == rt::ArgumentKind::Input)
      inputs.push_back({i, arg.role, arg.name, arg.globalShape});
  }
  return inputs;
}

void TrainRun::timestepOptions(data::BatchOptions &batch) const {
  batch.timesteps = options.timestepSampling;
  batch.logitMean = options.logitMean;
  batch.logitStd = options.logitStd;
  batch.shift = options.flowShift;
  batch.bias = options.timestepBias;
}

absl::Status TrainRun::checkLossSettings() const {
  auto loss = ModuleOp(module).lookupSymbol<func::FuncOp>("loss");
  auto prediction = loss ? loss->getAttrOfType<PredictionTypeAttr>(
                               SDDialect::kPredictionTypeAttrName)
                         : PredictionTypeAttr();
  // The model decides what it predicts; a config that says otherwise was
  // written for another model.
  if (prediction && !options.predictionType.empty() &&
      stringifyPredictionType(prediction.getValue()) != options.predictionType)
    return absl::InvalidArgumentError(
        "prediction_type " + options.predictionType +
        " is not what the model predicts: its @loss is " +
        stringifyPredictionType(prediction.getValue()).str() +
        " (sdgen --prediction-type)");
  bool flow = prediction && prediction.getValue() == PredictionType::flow;
  // The schedules of epsilon and v models count discrete steps, which
  // MaxDiffusion samples uniformly.
  if (options.timestepSampling != data::TimestepSampling::Uniform && !flow)
    return absl::InvalidArgumentError(
        std::string("timestep_sampling ") +
        data::timestepSamplingName(options.timestepSampling) +
        " applies to flow-matching models (#sd.prediction<flow>); " +
        options.modelPath + " is not one: give timestep_sampling uniform");
  // Min-SNR weighs by the cosine schedule of epsilon and v models.
  if (options.pipeline.snrGamma && (!prediction || flow))
    return absl::InvalidArgumentError(absl::StrFormat(
        "snr_gamma %g weights the loss of epsilon and v_prediction models; "
        "%s %s: give snr_gamma -1%s",
        *options.pipeline.snrGamma, options.modelPath,
        flow ? "predicts flow (#sd.prediction<flow>)"
             : "does not say what its @loss predicts (sd.prediction_type)",
        flow ? " (a flow model's timesteps are weighted by "
               "timestep_sampling)"
             : ""));
  return checkUNetSettings();
}

absl::Status TrainRun::checkUNetSettings() const {
  // A UNet config describes its UNet: the image size it trains at and the
  // groups of its norms. A program without group norms is no UNet, and the
  // keys say nothing about it.
  int64_t groups = 0;
  ModuleOp(module).walk([&](GroupNormOp op) {
    groups = static_cast<int64_t>(op.getNumGroups());
  });
  if (groups == 0)
    return absl::OkStatus();
  if (options.normNumGroups > 0 && options.normNumGroups != groups)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: norm_num_groups %d is not the model's: %s's group norms have %d "
        "groups (give norm_num_groups=%d, or sdgen --norm-groups=%d)",
        options.normNumGroupsOrigin, options.normNumGroups, options.modelPath,
        groups, groups, options.normNumGroups));
  auto loss = ModuleOp(module).lookupSymbol<func::FuncOp>("loss");
  if (options.resolution <= 0 || !loss)
    return absl::OkStatus();
  for (unsigned i = 0; i < loss.getNumArguments(); ++i) {
    auto input = loss.getArgAttrOfType<InputAttr>(i, SDDialect::kRoleAttrName);
    auto type = dyn_cast<RankedTensorType>(loss.getArgument(i).getType());
    if (!input || input.getKind() != InputKind::latents || !type ||
        type.getRank() != 4)
      continue;
    int64_t height = type.getDimSize(1) * data::kVaeFactor;
    int64_t width = type.getDimSize(2) * data::kVaeFactor;
    if (options.resolution != height || options.resolution != width)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: resolution %d is not the model's: %s's latents are %d×%d, "
          "images of %d×%d pixels (give resolution=%d, or sdgen "
          "--latent-size=%d)",
          options.resolutionOrigin, options.resolution, options.modelPath,
          type.getDimSize(1), type.getDimSize(2), height, width, height,
          options.resolution / data::kVaeFactor));
  }
  return absl::OkStatus();
}

absl::Status TrainRun::makeBatches() {
  absl::StatusOr<std::vector<data::StepInput>> inputs =
      stepInputs(program.spec);
  if (!inputs.ok())
    return inputs.status();
  data::BatchOptions batchOptions;
  batchOptions.seed = seed;
  timestepOptions(batchOptions);
  batchOptions.labelDropout = options.classDropoutProb;
  batchOptions.dataset = dataset;
  batchOptions.index = datasetIndex;
  batchOptions.guidance = trainingGuidance(module);
  // Synthetic data: a generated data set of one global batch, as the
  // model's default batch once was (fresh noise and timesteps each step).
  batchOptions.syntheticSamples = program.batch;
  absl::StatusOr<std::unique_ptr<data::BatchMaker>> maker =
      data::BatchMaker::create(std::move(*inputs), program.batch,
                               std::move(batchOptions));
  if (!maker.ok())
    return maker.status();
  batches = std::move(*maker);
  if (options.evalEvery > 0)
    if (absl::Status status = prepareEvaluation(); !status.ok())
      return status;
  if (datasetIndex)
    outs() << "data: " << datasetIndex->name << " (" << options.trainDataDir
           << "), " << dataset->size() << " training samples of "
           << data::formatShape(datasetIndex->sampleShape) << ", "
           << llvm::format("%.1f", static_cast<double>(dataset->size()) /
                                       static_cast<double>(program.batch))
           << " steps per epoch\n";
  return absl::OkStatus();
}

absl::Status TrainRun::prepareEvaluation() {
  const data::SplitInfo *split =
      datasetIndex ? datasetIndex->findSplit("heldout") : nullptr;
  if (!split || split->count == 0)
    return absl::InvalidArgumentError(
        "eval_every needs held-out samples: dataset_type sd with a non-empty "
        "'heldout' split (sddata --heldout)" +
        std::string(datasetIndex ? " ('" + options.trainDataDir + "' has none)"
                                 : ""));
  // @loss's forward program on the step's mesh, at the step's global batch.
  PipelineOptions forward = options.pipeline;
  forward.batch = program.batch;
  FailureOr<TrainProgram> built = buildModelProgram(module, forward, "loss");
  if (failed(built))
    return compilerFailure("could not build the held-out loss's program");
  absl::StatusOr<std::unique_ptr<rt::TrainingSession>> session =
      startProgramSession(*built, options.device);
  if (!session.ok())
    return session.status();
  evalSession = std::move(*session);
  // Buffers for its arguments: evaluate() fills them before each use.
  if (absl::Status status = evalSession->fillArguments(
          [&](int64_t, const std::vector<int64_t> &, rt::Block out) {
            std::fill_n(static_cast<char *>(out.data),
                        out.elements * rt::elementBytes(out.elementType), 0);
            return absl::OkStatus();
          });
      !status.ok())
    return status;
  absl::StatusOr<data::DatasetReader> reader =
      data::DatasetReader::open(*datasetIndex, "heldout");
  if (!reader.ok())
    return reader.status();
  absl::StatusOr<std::vector<data::StepInput>> inputs = stepInputs(built->spec);
  if (!inputs.ok())
    return inputs.status();
  data::BatchOptions heldout;
  heldout.seed = seed;
  // The held-out loss weighs the timesteps as training does.
  timestepOptions(heldout);
  heldout.dataset =
      std::make_shared<const data::DatasetReader>(std::move(*reader));
  heldout.index = datasetIndex;
  heldout.guidance = trainingGuidance(module);
  absl::StatusOr<std::unique_ptr<data::BatchMaker>> maker =
      data::BatchMaker::create(std::move(*inputs), built->batch,
                               std::move(heldout));
  if (!maker.ok())
    return maker.status();
  heldoutBatches = std::move(*maker);
  heldoutBatchCount =
      (split->count + heldoutBatches->batch() - 1) / heldoutBatches->batch();
  outs() << "held-out loss every " << count(options.evalEvery, "step") << ": "
         << count(heldoutBatchCount, "batch") << " of "
         << heldoutBatches->batch() << " from " << split->count
         << " held-out samples, fixed noise\n";
  return absl::OkStatus();
}

absl::StatusOr<double> TrainRun::evaluate() {
  // The step's parameters, by name.
  const rt::ProgramSpec &evalSpec = evalSession->spec();
  for (size_t i = 0; i < evalSpec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = evalSpec.arguments[i];
    if (arg.kind != rt::ArgumentKind::Parameter)
      continue;
    auto it = llvm::find_if(
        program.spec.arguments, [&](const rt::ArgumentSpec &trained) {
          return trained.kind == rt::ArgumentKind::Parameter &&
                 trained.name == arg.name;
        });
    if (it == program.spec.arguments.end())
      return absl::InternalError("the training step has no parameter '" +
                                 arg.name + "'");
    absl::StatusOr<rt::HostTensor> values = session->gatherArgument(
        static_cast<int64_t>(it - program.spec.arguments.begin()));
    if (!values.ok())
      return values.status();
    if (absl::Status status =
            evalSession->setArgument(static_cast<int64_t>(i), *values);
        !status.ok())
      return status;
  }
  double sum = 0;
  for (int64_t k = 0; k < heldoutBatchCount; ++k) {
    absl::StatusOr<std::vector<std::vector<float>>> batch =
        heldoutBatches->make(k * heldoutBatches->batch());
    if (!batch.ok())
      return batch.status();
    for (size_t n = 0; n < batch->size(); ++n)
      if (absl::Status status = evalSession->setArgument(
              static_cast<int64_t>(heldoutBatches->inputs()[n].argument),
              (*batch)[n]);
          !status.ok())
        return status;
    absl::StatusOr<rt::TrainingSession::StepResult> result =
        evalSession->step(0);
    if (!result.ok())
      return result.status();
    sum += result->loss;
  }
  return sum / static_cast<double>(heldoutBatchCount);
}

absl::Status
TrainRun::feedBatch(rt::TrainingSession &target,
                    const std::vector<std::vector<float>> &inputs) {
  for (size_t k = 0; k < inputs.size(); ++k)
    if (absl::Status status = target.setArgument(
            static_cast<int64_t>(batches->inputs()[k].argument), inputs[k]);
        !status.ok())
      return status;
  return absl::OkStatus();
}

} // namespace mlir::sd::train
