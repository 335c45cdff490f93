//===- ArgumentSpec.h - What each argument of a device program is -*- C++
//-*-===//
//
// The runtime's typed description of a compiled step's arguments, made by
// the compiler side (sd/Driver/TrainProgram.h) from the partitioned
// function's `sd.role` and `sd.local_sharding` attributes. Everything a
// driver asks about an argument is a field here (its kind, the parameter it
// belongs to, its input role and ordinal, its moment, its element type, how
// its values start), so no layer splits a name string to find it out.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_ARGUMENTSPEC_H
#define SD_RUNTIME_ARGUMENTSPEC_H

#include "sd/Runtime/ElementType.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sd::rt {

/// What an argument of the step is.
/// (Hyperparameters: the optimizer's values, #sd.input<hyperparameters>,
/// fixed for a run and never stored in checkpoints.)
enum class ArgumentKind {
  Parameter,
  OptimizerState,
  Input,
  Step,
  Hyperparameters
};

/// What an input argument holds (the model's `#sd.input<...>` kinds but the
/// step counter, which is ArgumentKind::Step): the clean latents, the noise,
/// the timestep, the text-encoder states (context), one-hot class labels,
/// a pooled text vector (Flux's CLIP projection) and a guidance strength
/// per sample (Flux.1-dev's distilled guidance).
enum class InputRole {
  Latents,
  Noise,
  Timestep,
  Context,
  Labels,
  Pooled,
  Guidance,
  TimeIds
};

/// "latents", "noise", "timestep", "context", "labels", "pooled",
/// "guidance", "time_ids".
const char *inputRoleName(InputRole role);
/// The role named `name`; nullopt for any other name.
std::optional<InputRole> parseInputRole(std::string_view name);

/// Which optimizer state an OptimizerState argument is.
enum class MomentKind { Mu, Nu, Ema };
/// "mu", "nu", "ema".
const char *momentKindName(MomentKind kind);

/// How a parameter's values start (the model's `#sd.init<...>`).
enum class InitKind { Zeros, Ones, Constant, Normal, Uniform, XavierUniform };

struct InitSpec {
  InitKind kind = InitKind::Zeros;
  /// constant(c): c; normal(s): the standard deviation; uniform(a): the
  /// bound; unused otherwise.
  double scale = 0;
};

/// One argument of the per-device step function.
struct ArgumentSpec {
  /// The name checkpoints and messages use: "x_embedder.proj.weight",
  /// "mu x_embedder.proj.weight", "latents.0".
  std::string name;
  ArgumentKind kind = ArgumentKind::Input;
  ElementType elementType = ElementType::F32;
  /// Parameter and OptimizerState: the parameter's name.
  std::string parameter;
  /// OptimizerState: which one.
  MomentKind moment = MomentKind::Mu;
  /// Input: what it holds, and its ordinal among the inputs of that role
  /// (argument order).
  InputRole role = InputRole::Latents;
  int64_t ordinal = 0;
  /// Parameter: whether the step trains it (false) or only reads it (a
  /// frozen parameter: no optimizer state, no update, and checkpoints do
  /// not store it).
  bool frozen = false;
  /// Parameter, and the EMA state of one: how the parameter starts (AdamW's
  /// moments and the step counter start at zero).
  InitSpec init;
  std::vector<int64_t> globalShape;
  std::vector<int64_t> localShape;
  /// Parameter: the shape exported files hold it under (#sd.param's
  /// `stored`: the reference layout, of which globalShape is a row-major
  /// view), or empty when that is globalShape.
  std::vector<int64_t> storedShape;
  /// Per dimension, the mesh axes (indices into the mesh) that split it,
  /// major to minor; a device's block along the dimension is the row-major
  /// index of its coordinates on those axes.
  std::vector<std::vector<int32_t>> dimAxes;
  /// The mesh's axis sizes (filled by TrainingSession::create).
  std::vector<int64_t> axisSizes;

  /// Hyperparameters: the values (a replicated vector), which
  /// initialBlock copies.
  std::vector<float> values;

  /// Whether checkpoints store it: everything but frozen parameters and
  /// the run's hyperparameters.
  bool isStored() const {
    return !(kind == ArgumentKind::Parameter && frozen) &&
           kind != ArgumentKind::Hyperparameters;
  }
  /// Bytes of the global tensor and of one device's block.
  int64_t globalBytes() const;
  int64_t localBytes() const;
  /// The global offsets of the block of the device at `coords` (one per
  /// mesh axis).
  std::vector<int64_t> blockOffsets(const std::vector<int64_t> &coords) const;
  /// The valid extent of each dimension of that block: its local shape, less
  /// the padding of a block that reaches past the end of a dimension its
  /// devices do not divide (sd::blockExtent).
  std::vector<int64_t> validShape(const std::vector<int64_t> &coords) const;
  /// Likewise for the block at the global `offsets` (blockOffsets').
  std::vector<int64_t> validShapeAt(const std::vector<int64_t> &offsets) const;
  /// Calls `copy(localOffset, globalOffset, count)` (in elements) for every
  /// run of valid elements of the block at `coords`, in row-major order:
  /// the rows of its innermost dimension, cut at the global tensor's end.
  void forEachValidRow(
      const std::vector<int64_t> &coords,
      const std::function<void(int64_t, int64_t, int64_t)> &copy) const;
  /// Likewise for the block at the global `offsets`.
  void forEachValidRowAt(
      const std::vector<int64_t> &offsets,
      const std::function<void(int64_t, int64_t, int64_t)> &copy) const;
};

struct ProgramSpec {
  std::vector<ArgumentSpec> arguments;
  /// Per result, the argument it is donated into, or -1.
  std::vector<int64_t> resultAliases;
  /// The result holding the scalar loss (replicated on every device); -1
  /// for a program without one (a model's forward function).
  int64_t lossResult = 0;
  /// Per result, its shapes and sharding (kind and name unused); needed
  /// only with `keepResults`.
  std::vector<ArgumentSpec> results;
  /// Keep the results that are not donated after each step, for
  /// TrainingSession::gatherResult (a sampler's predictions).
  bool keepResults = false;

  /// The index of the Parameter argument called `name`, or -1.
  int64_t findParameter(std::string_view name) const;
};

/// Elements of a shape.
int64_t numElements(const std::vector<int64_t> &shape);

/// Fills `out` (`arg.localShape` elements) with the block at `offsets` of
/// `arg`'s starting value under the run's `seed`, drawn per element from the
/// counter-based generator (sd/Reference/Random.h) exactly as the evaluator
/// draws the whole tensor (sd/Evaluator/Evaluator.h): a block made alone is
/// bitwise the same as that part of the global tensor, whatever the mesh.
/// Parameters follow their InitSpec (under the stream of their name), an
/// EMA state its parameter's, hyperparameters are their `values`, every
/// other argument starts at zero (inputs are fed before each step).
void initialBlock(const ArgumentSpec &arg, uint64_t seed,
                  const std::vector<int64_t> &offsets, float *out);

} // namespace sd::rt

#endif // SD_RUNTIME_ARGUMENTSPEC_H
