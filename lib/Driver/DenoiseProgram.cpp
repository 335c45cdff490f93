//===- DenoiseProgram.cpp - @denoise on a mesh, and its guided prediction ===//
//
// The model's @denoise built, compiled and loaded for a mesh
// (DenoiseProgram), and the classifier-free-guided prediction of a chunk of
// samples that the sampler loop calls. sdsample's run is in SampleRun.cpp,
// the sampler math in Sample.cpp.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/Sample.h"

#include "sd/Data/Batches.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/Runtime/Program.h"

#include "llvm/ADT/StringExtras.h"

#include "absl/strings/str_format.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::sampling;

namespace rt = ::sd::rt;

//===----------------------------------------------------------------------===//
// @denoise (or @forward) on a mesh
//===----------------------------------------------------------------------===//

std::string mlir::sd::shapeString(llvm::ArrayRef<int64_t> shape) {
  return "[" +
         llvm::join(llvm::map_range(
                        shape, [](int64_t d) { return std::to_string(d); }),
                    ", ") +
         "]";
}

DenoiseProgram::~DenoiseProgram() = default;

const ::sd::MeshSpec &DenoiseProgram::mesh() const {
  return trainingSession->runtime().mesh();
}

absl::StatusOr<std::unique_ptr<DenoiseProgram>>
DenoiseProgram::create(ModuleOp module, const PipelineOptions &pipeline,
                       const DeviceSettings &settings, StringRef entry) {
  std::string fn = ("@" + entry).str();
  FailureOr<TrainProgram> built = buildModelProgram(module, pipeline, entry);
  if (failed(built))
    return absl::InvalidArgumentError("could not build the model's " + fn);
  std::unique_ptr<DenoiseProgram> program(new DenoiseProgram());
  const rt::ProgramSpec &spec = built->spec;
  if (spec.results.size() != 1)
    return absl::InvalidArgumentError(fn + " must return one output");
  for (size_t i = 0; i < spec.arguments.size(); ++i) {
    const rt::ArgumentSpec &arg = spec.arguments[i];
    if (arg.kind == rt::ArgumentKind::Parameter)
      continue;
    if (arg.kind == rt::ArgumentKind::Input &&
        (arg.role == rt::InputRole::Context ||
         arg.role == rt::InputRole::Pooled)) {
      program->contextArgs.push_back(static_cast<int64_t>(i));
      program->contexts.push_back(arg.globalShape);
      program->roles.push_back(arg.role);
      continue;
    }
    bool input = arg.kind == rt::ArgumentKind::Input;
    int64_t *slot =
        !input                                ? nullptr
        : arg.role == rt::InputRole::Latents  ? &program->latentsArg
        : arg.role == rt::InputRole::Timestep ? &program->timestepArg
        : arg.role == rt::InputRole::Labels   ? &program->labelsArg
        : arg.role == rt::InputRole::Guidance ? &program->guidanceArg
        : arg.role == rt::InputRole::TimeIds  ? &program->timeIdsArg
                                              : nullptr;
    if (!slot || *slot >= 0)
      return absl::InvalidArgumentError(
          fn + "'s input '" + arg.name +
          "' is not one sdsample can feed (it feeds one latents, one "
          "timestep, one labels, one guidance, one time_ids and any context "
          "and pooled inputs)");
    *slot = static_cast<int64_t>(i);
  }
  if (program->latentsArg < 0 || program->timestepArg < 0)
    return absl::InvalidArgumentError(fn +
                                      " needs a latents and a timestep input");
  const std::vector<int64_t> &latents =
      spec.arguments[program->latentsArg].globalShape;
  const std::vector<int64_t> &output = spec.results[0].globalShape;
  // @denoise predicts the latents; @forward may return more channels (DiT's
  // learned sigma).
  bool sameShape = latents == output;
  bool moreChannels =
      entry != "denoise" && latents.size() == output.size() &&
      std::equal(latents.begin(), latents.end() - 1, output.begin());
  bool image = latents.size() == 4 || latents.size() == 5;
  if (!image || !(sameShape || moreChannels))
    return absl::InvalidArgumentError(
        fn + "'s latents " + shapeString(latents) + " and output " +
        shapeString(output) +
        " must be one shape [B, H, W, C] (video: [B, F, H, W, C])");
  program->outputShape.assign(output.begin() + 1, output.end());
  program->batchSize = latents[0];
  program->shape.assign(latents.begin() + 1, latents.end());
  program->elements = rt::numElements(program->shape);
  if (program->timeIdsArg >= 0) {
    // SDXL's size and crop ids of an uncropped image of the latents' size.
    const rt::ArgumentSpec &ids = spec.arguments[program->timeIdsArg];
    std::optional<std::array<float, 6>> row = ::sd::data::sdxlTimeIds(latents);
    if (ids.globalShape != std::vector<int64_t>{program->batchSize, 6} || !row)
      return absl::InvalidArgumentError(
          fn + "'s time_ids " + shapeString(ids.globalShape) +
          " are not [B, 6] ids of image latents [B, H, W, C]");
    for (int64_t r = 0; r < program->batchSize; ++r)
      program->timeIds.insert(program->timeIds.end(), row->begin(), row->end());
  }
  if (program->labelsArg >= 0) {
    const std::vector<int64_t> &labels =
        spec.arguments[program->labelsArg].globalShape;
    if (labels.size() != 2 || labels[1] < 2)
      return absl::InvalidArgumentError(
          "@denoise's labels " + shapeString(labels) +
          " are not [B, classes + 1] one-hot rows");
    program->classes = labels[1] - 1;
  }

  absl::StatusOr<std::unique_ptr<rt::TrainingSession>> session =
      startProgramSession(*built, settings);
  if (!session.ok())
    return session.status();
  program->trainingSession = std::move(*session);
  return program;
}

absl::Status DenoiseProgram::setTimeIds(std::vector<float> ids) {
  if (timeIdsArg < 0 || ids.size() != timeIds.size())
    return absl::InternalError(
        absl::StrFormat("the model takes %d time ids, %d were given",
                        timeIds.size(), ids.size()));
  timeIds = std::move(ids);
  return absl::OkStatus();
}

std::vector<ParameterShape> DenoiseProgram::parameters() const {
  std::vector<ParameterShape> params;
  for (const rt::ArgumentSpec &arg : trainingSession->spec().arguments)
    if (arg.kind == rt::ArgumentKind::Parameter)
      params.push_back(
          {arg.name, arg.globalShape,
           arg.storedShape.empty() ? arg.globalShape : arg.storedShape});
  return params;
}

int64_t DenoiseProgram::parameterCount() const {
  int64_t count = 0;
  for (const ParameterShape &param : parameters())
    count += rt::numElements(param.shape);
  return count;
}

absl::Status DenoiseProgram::setWeights(
    const std::map<std::string, std::vector<float>> &weights) {
  std::vector<rt::HostTensor> values;
  for (const rt::ArgumentSpec &arg : trainingSession->spec().arguments) {
    size_t elements = static_cast<size_t>(rt::numElements(arg.globalShape));
    if (arg.kind != rt::ArgumentKind::Parameter) {
      values.emplace_back(arg.elementType, rt::numElements(arg.globalShape));
      continue;
    }
    auto it = weights.find(arg.name);
    if (it == weights.end())
      return absl::InvalidArgumentError("no weights for parameter '" +
                                        arg.name + "'");
    if (it->second.size() != elements)
      return absl::InvalidArgumentError(
          absl::StrFormat("parameter '%s' has %d elements, its weights %d",
                          arg.name, elements, it->second.size()));
    values.push_back(it->second);
  }
  return trainingSession->setArguments(values);
}

absl::StatusOr<std::vector<float>>
DenoiseProgram::predict(const std::vector<float> &x,
                        const std::vector<float> &t,
                        const std::vector<float> &labels,
                        const std::vector<std::vector<float>> &contextValues,
                        const std::vector<float> &guidance) {
  if (contextValues.size() != contextArgs.size())
    return absl::InternalError(
        absl::StrFormat("the model takes %d context inputs, %d were given",
                        contextArgs.size(), contextValues.size()));
  if (guidanceArg >= 0 && guidance.size() != static_cast<size_t>(batchSize))
    return absl::InternalError(
        absl::StrFormat("the model takes a guidance per row (%d), %d were "
                        "given",
                        batchSize, guidance.size()));
  std::vector<std::pair<int64_t, const std::vector<float> *>> inputs = {
      {latentsArg, &x},
      {timestepArg, &t},
      {labelsArg, &labels},
      {guidanceArg, &guidance},
      {timeIdsArg, &timeIds}};
  for (auto [arg, values] : llvm::zip_equal(contextArgs, contextValues))
    inputs.push_back({arg, &values});
  for (auto [index, value] : inputs) {
    if (index < 0)
      continue;
    if (absl::Status status = trainingSession->setArgument(index, *value);
        !status.ok())
      return status;
  }
  if (absl::StatusOr<rt::TrainingSession::StepResult> step =
          trainingSession->step(0);
      !step.ok())
    return step.status();
  absl::StatusOr<rt::HostTensor> prediction = trainingSession->gatherResult(0);
  if (!prediction.ok())
    return prediction.status();
  return std::move(prediction->f32());
}

int64_t mlir::sd::samplesPerCall(const DenoiseProgram &program,
                                 double guidanceScale) {
  bool conditioned =
      program.numClasses() > 0 || !program.contextShapes().empty();
  bool guided = conditioned && guidanceScale != 1.0;
  return guided ? program.batch() / 2 : program.batch();
}

sampling::Denoiser mlir::sd::guidedDenoiser(DenoiseProgram &program,
                                            ChunkConditions conditions) {
  return [&program, conditions = std::move(conditions)](
             llvm::ArrayRef<float> x,
             double t) -> absl::StatusOr<std::vector<float>> {
    const std::vector<int64_t> &classes = conditions.rows;
    const PromptStates *prompts = conditions.prompts;
    double scale = conditions.guidanceScale;
    int64_t n = static_cast<int64_t>(classes.size());
    int64_t batch = program.batch(), elements = program.sampleElements();
    int64_t columns = program.numClasses() > 0 ? program.numClasses() + 1 : 0;
    size_t numContexts = program.contextShapes().size();
    bool guided = (columns > 0 || prompts) && scale != 1.0;
    if (n > samplesPerCall(program, scale) ||
        x.size() != static_cast<size_t>(n * elements))
      return absl::InternalError(absl::StrFormat(
          "a chunk of %d samples does not fit a call of batch %d", n, batch));
    if (numContexts > 0 &&
        (!prompts || prompts->positive.size() != numContexts ||
         (guided && prompts->negative.size() != numContexts)))
      return absl::InternalError("the prompt states do not fit the model");
    std::vector<float> rows(static_cast<size_t>(batch * elements), 0.0f);
    std::vector<float> times(static_cast<size_t>(batch), static_cast<float>(t));
    std::vector<float> labels(static_cast<size_t>(batch * columns), 0.0f);
    std::vector<float> guidance;
    if (program.hasGuidanceInput())
      guidance.assign(static_cast<size_t>(batch),
                      static_cast<float>(conditions.distilledGuidance));
    // Every row not conditioned on a class (unconditional and padding rows)
    // holds the null class.
    for (int64_t r = 0; r < batch && columns > 0; ++r)
      labels[r * columns + columns - 1] = 1.0f;
    // Text states: row r holds prompt `prompt` of `table` (padding rows the
    // first prompt's).
    std::vector<std::vector<float>> contexts(numContexts);
    auto setContext = [&](int64_t r,
                          const std::vector<std::vector<float>> &table,
                          int64_t prompt) {
      for (size_t k = 0; k < numContexts; ++k) {
        int64_t per = rt::numElements(program.contextShapes()[k]) / batch;
        std::copy_n(table[k].begin() + prompt * per, per,
                    contexts[k].begin() + r * per);
      }
    };
    for (size_t k = 0; k < numContexts; ++k)
      contexts[k].assign(
          static_cast<size_t>(rt::numElements(program.contextShapes()[k])),
          0.0f);
    for (int64_t r = 0; r < batch && numContexts > 0; ++r)
      setContext(r, prompts->positive, 0);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(x.begin() + i * elements, elements,
                  rows.begin() + i * elements);
      if (guided)
        std::copy_n(x.begin() + i * elements, elements,
                    rows.begin() + (n + i) * elements);
      if (columns > 0) {
        labels[i * columns + columns - 1] = 0.0f;
        labels[i * columns + classes[i]] = 1.0f;
      }
      if (numContexts > 0) {
        setContext(i, prompts->positive, classes[i]);
        if (guided)
          setContext(n + i, prompts->negative,
                     prompts->negatives == 1 ? 0 : classes[i]);
      }
    }
    absl::StatusOr<std::vector<float>> pred =
        program.predict(rows, times, labels, contexts, guidance);
    if (!pred.ok())
      return pred.status();
    std::vector<float> out(pred->begin(), pred->begin() + n * elements);
    if (guided)
      applyGuidance(
          out, llvm::ArrayRef<float>(*pred).slice(n * elements, n * elements),
          scale, out);
    return out;
  };
}
