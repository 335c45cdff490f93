//===- Evaluator.h - Reference evaluator of sd programs ---------*- C++ -*-===//
//
// Runs a `func.func` of the sd dialect with the naive reference kernels: the
// numerical oracle of every test. The program runs on N simulated devices;
// each holds its own value of every SSA value, and each op is evaluated for
// every device in turn. Ops evaluate themselves through
// `EvaluableOpInterface`, collectives (after partitioning) through
// `CollectiveEvaluableOpInterface`, which sees all devices at once; the
// driver only looks operands up, rounds results to their element types and
// frees values after their last use, so a DiT-S/2-sized program fits in
// memory.
//
// Also here: the deterministic initialization of a model's arguments from
// their `sd.role` attributes (see `initializeArguments`).
//
//===----------------------------------------------------------------------===//

#ifndef SD_EVALUATOR_EVALUATOR_H
#define SD_EVALUATOR_EVALUATOR_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Types.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMap.h"

#include "sd/IR/SDAttrs.h"
#include "sd/Reference/Tensor.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace mlir::sd {

class CollectiveEvaluableOpInterface;

/// How results are rounded.
enum class Precision {
  /// Every op result is rounded to its element type (f32, bf16), as the
  /// compiled program would store it; kernels still compute in double.
  Native,
  /// Nothing is rounded: the whole program runs in double. For gradient
  /// checks against finite differences. Values keep their element type tag.
  F64,
};

struct EvalOptions {
  Precision precision = Precision::Native;
  /// Number of simulated devices; each gets its own arguments. A function
  /// with collectives runs on exactly its mesh's devices: device i is the
  /// mesh device with id i (`::sd::MeshSpec::coordinates`).
  int64_t numDevices = 1;
};

/// Tensors of every device: `[device][index]`.
using PerDeviceTensors = std::vector<std::vector<::sd::ref::Tensor>>;

/// The reference element type of an MLIR element type (f32, bf16, f64, i1);
/// failure for any other type.
FailureOr<::sd::ref::DType> getReferenceDType(Type elementType);

/// Runs functions on `options.numDevices` simulated devices. One evaluator
/// may run many functions; it caches each function's liveness plan, so the
/// functions must not change while it is in use.
class Evaluator {
public:
  explicit Evaluator(EvalOptions options);
  ~Evaluator();
  Evaluator(const Evaluator &) = delete;
  Evaluator &operator=(const Evaluator &) = delete;

  /// Runs `func` with `args[device][argument]` and returns
  /// `results[device][result]`. Fails, after an error on the function or on
  /// the offending op, on a wrong number of devices or arguments (a
  /// collective's mesh must have exactly `numDevices` devices), an
  /// argument of the wrong shape or element type, a dynamic shape (run
  /// `sd-specialize-batch` first), or an op without a reference evaluation.
  /// In Native mode arguments are rounded to their element types first.
  FailureOr<PerDeviceTensors>
  run(func::FuncOp func, ArrayRef<std::vector<::sd::ref::Tensor>> args);
  /// The same with `args[device]` viewing that device's arguments, which are
  /// only borrowed (never copied, unless Native mode must round them).
  FailureOr<PerDeviceTensors> run(func::FuncOp func,
                                  ArrayRef<ArrayRef<::sd::ref::Tensor>> args);

  const EvalOptions &getOptions() const { return options; }

  /// The most tensor elements that op results held at once during the last
  /// `run` (over all devices; arguments, which the caller owns, excluded).
  /// Shows that values are freed after their last use.
  int64_t getPeakLiveElements() const { return peakLiveElements; }

private:
  struct Frame;
  struct FunctionPlan;

  /// Evaluates `func`'s body with borrowed arguments `args[device][arg]`.
  /// Nested calls re-enter here: the recursion depth is the program's call
  /// depth, never the length of a use-def chain.
  FailureOr<PerDeviceTensors>
  runBody(func::FuncOp func,
          ArrayRef<SmallVector<const ::sd::ref::Tensor *>> args);
  /// Evaluates one op of the current frame for every device.
  LogicalResult evaluateOp(Operation *op, Frame &frame);
  /// Evaluates a collective for all devices at once.
  LogicalResult evaluateCollective(CollectiveEvaluableOpInterface collective,
                                   Frame &frame);
  LogicalResult evaluateCall(func::CallOp call, Frame &frame);
  /// Sets the element type tag of each of `results` of `op` on one device
  /// and rounds it in Native mode; fails when there are not as many as the
  /// op has results or a shape is not its result's.
  LogicalResult
  finalizeResults(Operation *op,
                  MutableArrayRef<::sd::ref::Tensor> results) const;
  FailureOr<const FunctionPlan *> getPlan(func::FuncOp func);

  EvalOptions options;
  /// Liveness plans, by function.
  DenseMap<Operation *, std::unique_ptr<FunctionPlan>> plans;
  /// Functions being evaluated, outermost first (to reject recursion).
  SmallVector<Operation *> callStack;
  /// Elements held by op results now, and the most so far in this run.
  int64_t liveElements = 0;
  int64_t peakLiveElements = 0;
};

/// Runs `func` on one device (`options.numDevices` must be 1).
FailureOr<std::vector<::sd::ref::Tensor>>
evaluate(func::FuncOp func, ArrayRef<::sd::ref::Tensor> args,
         const EvalOptions &options = {});

/// Runs `func` on `options.numDevices` devices with `args[device][argument]`.
FailureOr<PerDeviceTensors>
evaluatePerDevice(func::FuncOp func,
                  ArrayRef<std::vector<::sd::ref::Tensor>> args,
                  const EvalOptions &options);

//===----------------------------------------------------------------------===//
// Argument initialization
//===----------------------------------------------------------------------===//
//
// Every random value is drawn from the counter-based generator of
// sd/Reference/Random.h: element i (row-major over the argument's global
// shape) of a tensor drawn from stream s is `uniformAt(s, i)` or
// `normalAt(s, i)`, so a device can draw its own shard and the values never
// depend on the mesh. The stream of each argument depends only on the run's
// seed and on what the argument *is*, never on its position:
//
//   splitmix64(x):  z = x + 0x9e3779b97f4a7c15
//                   z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
//                   z = (z ^ (z >> 27)) * 0x94d049bb133111eb
//                   return z ^ (z >> 31)             (arithmetic mod 2^64)
//   fnv1a64(bytes) = FNV-1a, 64-bit: h = 0xcbf29ce484222325; for each byte
//                    b: h = (h ^ b) * 0x100000001b3
//   deriveSeed(seed, key) = splitmix64(seed ^ splitmix64(fnv1a64(key)))
//
//   parameter named N:             deriveSeed(seed, N)
//   k-th input (k = 0, 1, ... in argument order among the inputs of the
//   same kind K):                  deriveSeed(seed, "input.K.k")
//                                  e.g. "input.latents.0"
//
// Values, before rounding to the argument's element type:
//   zeros / ones / constant(c):  0 / 1 / c
//   normal(s):         s * normalAt(stream, i)
//   uniform(a):        -a + 2a * uniformAt(stream, i)
//   xavier_uniform:    as uniform(a) with a = sqrt(6 / (fan_in + fan_out)),
//                      fan_in dimension 0 and fan_out the product of the
//                      others (rank >= 2: [in, out], or a fused projection
//                      [in, k, out] as the Linear(in, k·out) it replaces)
//   latents, noise, context: normalAt(stream, i)
//   timestep:          uniformAt(stream, i), in [0, 1)
//   labels:            one-hot over the last dimension (C classes): sample j
//                      (row-major over the leading dimensions) has class
//                      min(C - 1, floor(C * uniformAt(stream, j)))
//
// Values are then rounded to the argument's element type (bf16 parameters
// hold bf16 values in every precision mode).

/// The 64-bit seed of stream `key` under `seed` (see above).
uint64_t deriveSeed(uint64_t seed, StringRef key);
/// The stream of the parameter called `name`.
uint64_t parameterSeed(uint64_t seed, StringRef name);
/// The stream of the `ordinal`-th input of `kind`.
uint64_t inputSeed(uint64_t seed, InputKind kind, int64_t ordinal);

/// Builds every argument of `func` from its `sd.role` as described above.
/// Fails, after an error on the function naming the argument, on an
/// argument without a role, with a dynamic shape, a non-float element type,
/// or an initializer that does not fit its shape (xavier_uniform of rank < 2,
/// labels of rank 0).
FailureOr<std::vector<::sd::ref::Tensor>> initializeArguments(func::FuncOp func,
                                                              uint64_t seed);

} // namespace mlir::sd

#endif // SD_EVALUATOR_EVALUATOR_H
