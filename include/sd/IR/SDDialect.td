//===- SDDialect.td - the sd dialect ------------------------*- tablegen -*-===//
//
// The sd dialect: diffusion-model programs (forward loss, later the training
// step) over static-shape tensors, with the mesh and shardings that the
// propagation and partitioning passes work on.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDDIALECT_TD
#define SD_IR_SDDIALECT_TD

include "mlir/IR/OpBase.td"

def SD_Dialect : Dialect {
  let name = "sd";
  let cppNamespace = "::mlir::sd";
  let summary = "Diffusion-model programs and their shardings over a device mesh";
  let description = [{
    A model is a `func.func @loss(params..., inputs...) -> tensor<f32>`. Its
    arguments carry discardable attributes of this dialect:

    * `sd.role`: `#sd.param<"name", init>` for a trainable parameter, or
      `#sd.input<kind>` for a model input (`latents`, `noise`, `timestep`,
      `context`, `labels`).
    * `sd.logical_axes`: `#sd.logical_axes<[batch, _, embed]>`, one logical
      axis name per dimension (`_` = unnamed); logical axis rules turn them
      into shardings.
    * `sd.sharding`: `#sd.sharding<@mesh, [{"data"}, {}, {"fsdp"} ]>`, the
      per-dimension mesh axes of the argument.

    Any op may carry `sd.sharding_rule`, a `#sd.sharding_rule` for its
    operand and result types (the test pass `sd-test-print-sharding-rules`
    records each op's rule this way).

    After `sd-propagate-sharding`, every op carries `sd.sharding`, a
    `#sd.sharding_per_value` with one sharding per result, and, when asked
    for, `sd.provenance`: an array of strings saying which annotation each
    sharded dimension of its results came from.

    Any op result may be named with `sd.name = "query_proj"` so that remat
    policies can refer to it. The function may carry `sd.default_batch` (an
    integer), the batch used when a program with a dynamic batch dimension is
    specialized without an explicit `--batch`.

    Pipeline stages: ops are valid from the start unless their description
    says otherwise; `sd.mesh` is created by `sd-materialize-mesh` (or written
    by hand); shardings appear after `sd-apply-logical-rules`.

    Constraints (every sd program):
    * each tensor an sd op takes or yields, and the type of each function
      argument or result that carries an sd attribute, has a number of
      elements and a size in bytes that a signed 64-bit integer holds
      (static dimensions; a dynamic batch dimension is checked once
      `sd-specialize-batch` fixes it).

    Constraints (discardable attributes):
    * `sd.role` and `sd.logical_axes` may only appear as function argument
      attributes, each with its own attribute kind.
    * `sd.sharding` is a `#sd.sharding` on a function argument or result,
      and a `#sd.sharding_per_value` on an op, with one sharding per op
      result, each of which fits its result's type.
    * `sd.provenance` is an array of strings on an op.
    * `sd.local_sharding` is a `#sd.sharding` on an argument or result of
      a partitioned function (after `sd-partition`): the argument is each
      device's block of a global tensor laid out so (its global shape is
      the local one times the dimensions' axes), the constraints of
      `#sd.sharding` holding for that global shape.
    * `sd.logical_axes` and `sd.sharding` have one entry per dimension of the
      argument's tensor type.
    * `sd.name` is a string attribute.
    * `sd.backward` and `sd.recompute` are unit attributes.
    * `sd.vjp_group` and `sd.layer` (the gradient function's structure,
      see `sd-differentiate`) are integers on ops, `sd.layers` an array of
      strings on a function.
    * `sd.sample_block` (the planner's sample program) is an
      `array<i64: chain, position>` of two non-negative integers on a
      `func.call`.
    * `sd.aliases` on a function result is the index of an argument of the
      same type (the argument's buffer is reused for the result).
    * `sd.default_batch` is a positive integer on a function.
    * `sd.prediction_type` is a `#sd.prediction<...>` (`epsilon`,
      `v_prediction` or `flow`) on a function: what a model's @loss
      regresses, as sdgen writes it.
    * `sd.guidance` is a finite float on a function: the guidance strength
      a Flux program embeds as a constant, as sdgen writes it.
    * `sd.sharding_rule` is a `#sd.sharding_rule` that fits the op's
      operand and result types (see the attribute's constraints).
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Names of the discardable attributes this dialect understands.
    static constexpr ::llvm::StringLiteral kRoleAttrName = "sd.role";
    static constexpr ::llvm::StringLiteral kLogicalAxesAttrName = "sd.logical_axes";
    static constexpr ::llvm::StringLiteral kShardingAttrName = "sd.sharding";
    static constexpr ::llvm::StringLiteral kNameAttrName = "sd.name";
    static constexpr ::llvm::StringLiteral kDefaultBatchAttrName = "sd.default_batch";
    /// On @loss: what the network predicts (diffusers' prediction_type).
    static constexpr ::llvm::StringLiteral kPredictionTypeAttrName = "sd.prediction_type";
    /// On Flux's functions: the distilled guidance strength the program
    /// embeds as a constant (diffusers' `guidance` input, times 1000).
    static constexpr ::llvm::StringLiteral kGuidanceAttrName = "sd.guidance";
    static constexpr ::llvm::StringLiteral kShardingRuleAttrName = "sd.sharding_rule";
    static constexpr ::llvm::StringLiteral kProvenanceAttrName = "sd.provenance";
    /// On a function sd-propagate-sharding ran on with
    /// `record-size-queries`: `array<i64: ...>`, the comparisons of mesh
    /// axis sizes the propagation made (propagation::MeshShape::Query).
    static constexpr ::llvm::StringLiteral kSizeQueriesAttrName = "sd.size_queries";
    static constexpr ::llvm::StringLiteral kLocalShardingAttrName = "sd.local_sharding";
    /// Beside sd.local_sharding where a dimension is padded (its devices do
    /// not divide it): the global shape, which the local shape times the
    /// devices no longer gives.
    static constexpr ::llvm::StringLiteral kGlobalShapeAttrName = "sd.global_shape";
    /// On a partitioned function with padded blocks: `array<i64: padded,
    /// elements>`, the elements its ops compute per device (on average over
    /// the devices) and how many of them are padding (the report's padding
    /// overhead).
    static constexpr ::llvm::StringLiteral kPaddingAttrName = "sd.padding";
    /// On ops sd-differentiate builds for the backward pass and the
    /// optimizer update (sharding propagation shares reshards only among
    /// ops of one pass, so FSDP gathers a parameter again for backward).
    static constexpr ::llvm::StringLiteral kBackwardAttrName = "sd.backward";
    /// On ops that recompute a forward value for the backward pass (the
    /// remat policy did not keep it); the cost model counts their FLOPs.
    static constexpr ::llvm::StringLiteral kRecomputeAttrName = "sd.recompute";
    /// On the backward converts that widen a bf16 value for an elementwise
    /// derivative computed in f32 (GELU's, SiLU's: sd-differentiate's
    /// unaryVjpInF32). They widen activations' cotangents, not parameters'
    /// gradients, so sd-widen-gradients leaves their producers bf16.
    static constexpr ::llvm::StringLiteral kDerivativeAttrName = "sd.derivative";
    /// On the adds of a training step with microbatches that sum a
    /// parameter's gradients across them: their operands and results are
    /// the f32 gradient accumulator the memory report shows apart from
    /// the activations.
    static constexpr ::llvm::StringLiteral kGradientSumAttrName = "sd.gradient_sum";
    /// On the collective_permutes sd-partition builds to exchange the halo
    /// rows of a spatially sharded convolution: the report shows their
    /// bytes apart from the other permutes.
    static constexpr ::llvm::StringLiteral kHaloAttrName = "sd.halo";
    /// The gradient function's structure, from sd-differentiate to
    /// sd-remat and sd-build-train-step: the VJP group of an op, the layer
    /// (inlined call) a forward op came from, and the callee of each layer.
    static constexpr ::llvm::StringLiteral kVjpGroupAttrName = "sd.vjp_group";
    static constexpr ::llvm::StringLiteral kLayerAttrName = "sd.layer";
    static constexpr ::llvm::StringLiteral kLayersAttrName = "sd.layers";
    /// On a call of a repeated block in the planner's sample program:
    /// `array<i64: chain, position>`, the chain the call belongs to and its
    /// place in it. sd-differentiate moves it into the locations of the
    /// ops it inlines (see sd/Analysis/SampleBlocks.h).
    static constexpr ::llvm::StringLiteral kSampleBlockAttrName =
        "sd.sample_block";
    /// On a function result: the index of the argument whose buffer it
    /// reuses (a donated argument, as JAX's donate_argnums): the training
    /// step writes new parameters and optimizer state in place.
    static constexpr ::llvm::StringLiteral kAliasesAttrName = "sd.aliases";
    /// On an #sd.param argument: the parameter is not trained (frozen by
    /// sd-freeze-parameters, or the base weight of LoRA adapters): it gets
    /// no gradient, no optimizer state and no update, and the step reads
    /// it without writing it.
    static constexpr ::llvm::StringLiteral kFrozenAttrName = "sd.frozen";

    /// The first argument of `func` whose #sd.param name an earlier
    /// argument has, or its argument count: computed once per array of
    /// argument attributes, so that checking every argument's name stays
    /// linear in their number.
    unsigned getFirstDuplicateParam(::mlir::FunctionOpInterface func);

    /// The sharding rule of `op` (an op of ShardingRuleOpInterface): the one
    /// made for an earlier op of the same name, operand and result types
    /// and inherent attributes, which is all a rule depends on, or
    /// `make()`'s, kept when it is not null. The planner partitions the
    /// same ops on many meshes; each rule is made once per context.
    ::mlir::Attribute getShardingRule(::mlir::Operation *op,
                                      ::llvm::function_ref<::mlir::Attribute()> make);

  private:
    void registerAttributes();
    /// getShardingRule's rules by op signature (opaque pointers of uniqued
    /// names, types and attributes; the keys' storage in ruleKeys).
    ::llvm::DenseMap<::llvm::ArrayRef<const void *>, ::mlir::Attribute> shardingRules;
    ::llvm::BumpPtrAllocator ruleKeys;
    ::std::mutex shardingRulesMutex;
    /// getFirstDuplicateParam's answers for the latest arrays. Functions
    /// are verified in parallel, hence the mutex.
    ::llvm::DenseMap<::mlir::ArrayAttr, unsigned> firstDuplicateParams;
    ::std::mutex firstDuplicateParamsMutex;
  public:
  }];
}

// Every sd op: each tensor it takes or yields has an element count and a
// byte size that int64 holds (mlir::sd::TensorSizesFit in SDOps.h). First,
// so that no other trait or verifier multiplies such a shape's dimensions.
def SD_TensorSizesFit : NativeOpTrait<"TensorSizesFit"> {
  let cppNamespace = "::mlir::sd";
}

class SD_Op<string mnemonic, list<Trait> traits = []>
    : Op<SD_Dialect, mnemonic, !listconcat([SD_TensorSizesFit], traits)>;

#endif // SD_IR_SDDIALECT_TD
