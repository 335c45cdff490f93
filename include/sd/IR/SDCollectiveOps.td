//===- SDCollectiveOps.td - collectives and reshards --------*- tablegen -*-===//
//
// The communication of a partitioned program: collectives over named mesh
// axes that act on local (per-device) tensors, and `sd.reshard`, the
// global-level op that sharding propagation inserts where shardings conflict
// and that the partitioner turns into collectives. Included from SDOps.td.
//
// Conventions shared by every collective:
// * A tensor dimension sharded over mesh axes `[a, b]` (major to minor) is
//   split into size(a)·size(b) blocks; the device with coordinates
//   (ca, cb) on those axes holds block ca·size(b) + cb.
// * A collective over axes A communicates within *groups*: the devices
//   whose coordinates differ only on the axes of A.
// * Device numbering (ids ↔ coordinates) is the mesh's (sd/Sharding/Mesh.h).
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDCOLLECTIVEOPS_TD
#define SD_IR_SDCOLLECTIVEOPS_TD

include "sd/IR/SDOps.td"

// Collectives exist only after partitioning, where every shape is static.
def SD_LocalTensor : StaticShapeTensorOf<[F32, BF16]>;

// Mesh axes per tensor dimension, major to minor within a dimension:
// printed `[{"data"}, {}, {"fsdp", "tensor"}]`.
def SD_DimAxesAttr
    : TypedArrayAttrBase<StrArrayAttr, "mesh axes per tensor dimension">;

// A collective: pure (every device runs the same program, so CSE and DCE
// stay SPMD-consistent) and a user of the mesh symbol it names.
class SD_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : SD_Op<mnemonic, !listconcat([Pure,
          DeclareOpInterfaceMethods<SymbolUserOpInterface>],
          traits)>;

// all_gather, all_slice and reduce_scatter: one list of axes per dimension,
// a result of the operand's rank and element type.
class SD_PerDimCollectiveOp<string mnemonic>
    : SD_CollectiveOp<mnemonic, [AllElementTypesMatch<["operand", "result"]>,
                                 AllRanksMatch<["operand", "result"]>]> {
  let arguments = (ins SD_LocalTensor:$operand, FlatSymbolRefAttr:$mesh,
                       SD_DimAxesAttr:$dim_axes);
  let results = (outs SD_LocalTensor:$result);
  let assemblyFormat = [{
    $operand $mesh custom<DimAxes>($dim_axes) attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The axes of each dimension, major to minor.
    ::llvm::SmallVector<::llvm::SmallVector<::llvm::StringRef>> getAxesPerDim();
    /// The `custom<DimAxes>` directive (see SDCollectiveOps.cpp).
    static ::mlir::ParseResult parseDimAxes(::mlir::OpAsmParser &parser,
                                            ::mlir::ArrayAttr &dimAxes);
    static void printDimAxes(::mlir::OpAsmPrinter &printer,
                             ::mlir::Operation *op, ::mlir::ArrayAttr dimAxes);
  }];
}

//===----------------------------------------------------------------------===//
// Collectives (per-device programs)
//===----------------------------------------------------------------------===//

def SD_AllGatherOp : SD_PerDimCollectiveOp<"all_gather"> {
  let summary = "Gathers the blocks of sharded dimensions from a group";
  let description = [{
    ```mlir
    %y = sd.all_gather %x @mesh [{"fsdp"}, {} ] : (tensor<2x8xf32>) -> tensor<4x8xf32>
    ```
    Removes, per dimension, the listed axes from the *minor* end of the
    dimension's sharding: a dimension sharded `{"data", "fsdp"}` gathered
    over `{"fsdp"}` ends up sharded `{"data"}`. Result dimension `d` is the
    operand's times the product of its axes' sizes; its block
    `ca·size(b) + cb` (axes `[a, b]`) comes from the group member with
    coordinates `(ca, cb)` on `a` and `b`. Every device of a group ends up
    with the same value. The group is formed by all listed axes together.

    Pipeline stage: after sd-partition (local types).

    Constraints:
    * operand and result are static f32 or bf16 tensors of one rank and
      element type
    * the axes list has one entry per operand dimension
    * at least one axis is listed
    * no axis is listed twice
    * the mesh symbol names an `sd.mesh`
    * every listed axis exists in the mesh
    * each result dimension is the operand's times the product of its
      axes' sizes (the operand's for a dimension without axes)
  }];
}

def SD_AllSliceOp : SD_PerDimCollectiveOp<"all_slice"> {
  let summary = "Keeps each device's block of newly sharded dimensions";
  let description = [{
    ```mlir
    %y = sd.all_slice %x @mesh [{"fsdp"}, {} ] : (tensor<4x8xf32>) -> tensor<2x8xf32>
    ```
    Appends, per dimension, the listed axes at the *minor* end of the
    dimension's sharding: the inverse of `sd.all_gather`. Dimension `d` is
    split into the product of its axes' sizes; a device with coordinates
    `(ca, cb)` on the axes `[a, b]` keeps block `ca·size(b) + cb`. Local:
    no communication.

    Pipeline stage: after sd-partition (local types).

    Constraints:
    * operand and result are static f32 or bf16 tensors of one rank and
      element type
    * the axes list has one entry per operand dimension
    * at least one axis is listed
    * no axis is listed twice
    * the mesh symbol names an `sd.mesh`
    * every listed axis exists in the mesh
    * each operand dimension is divisible by the product of its axes' sizes,
      and the result dimension is the quotient (the operand's for a
      dimension without axes)
  }];
}

def SD_ReduceScatterOp : SD_PerDimCollectiveOp<"reduce_scatter"> {
  let summary = "Sums over a group, then keeps each device's block";
  let description = [{
    ```mlir
    %y = sd.reduce_scatter %x @mesh [{"fsdp"}, {} ] : (tensor<4x8xf32>) -> tensor<2x8xf32>
    ```
    Sums the operands of each group formed by all listed axes, in the fixed
    order of `sd.all_reduce`, then slices the sum like `sd.all_slice` with
    the same axes: a device with coordinates `(ca, cb)` on a dimension's
    axes `[a, b]` keeps block `ca·size(b) + cb`. Resolves a partial sum
    (e.g. a gradient under data or FSDP parallelism) into a sharded value.

    Pipeline stage: after sd-partition (local types).

    Constraints:
    * operand and result are static f32 or bf16 tensors of one rank and
      element type
    * the axes list has one entry per operand dimension
    * at least one axis is listed
    * no axis is listed twice
    * the mesh symbol names an `sd.mesh`
    * every listed axis exists in the mesh
    * each operand dimension is divisible by the product of its axes' sizes,
      and the result dimension is the quotient (the operand's for a
      dimension without axes)
  }];
}

def SD_AllReduceOp : SD_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "Sums over the devices that differ only in some axes";
  let description = [{
    ```mlir
    %y = sd.all_reduce %x @mesh axes = ["data", "fsdp"] : tensor<4x8xf32>
    ```
    Every device receives the sum of the operands of its group (the devices
    whose coordinates differ only on `axes`). The sum is taken in a fixed
    order, ascending in the members' mesh coordinates (major axis first),
    whatever the order of `axes`, so every member of a group gets bitwise
    the same result and repeated runs agree.

    Pipeline stage: after sd-partition (local types).

    Constraints:
    * operand and result are one static f32 or bf16 tensor type
    * at least one axis is listed
    * no axis is listed twice
    * the mesh symbol names an `sd.mesh`
    * every listed axis exists in the mesh
  }];
  let arguments = (ins SD_LocalTensor:$operand, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$reduction_axes);
  let results = (outs SD_LocalTensor:$result);
  let assemblyFormat = [{
    $operand $mesh `axes` `=` $reduction_axes attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def SD_AllToAllOp : SD_CollectiveOp<"all_to_all",
    [AllElementTypesMatch<["operand", "result"]>,
     AllRanksMatch<["operand", "result"]>]> {
  let summary = "Moves mesh axes from one dimension's sharding to another's";
  let description = [{
    ```mlir
    %y = sd.all_to_all %x @mesh axes = ["tensor"] src_dim = 1 tgt_dim = 2
        : (tensor<8x64x16xf32>) -> tensor<8x128x8xf32>
    ```
    Removes `axes` (major to minor, product `n`) from the minor end of
    `src_dim`'s sharding and appends them at the minor end of `tgt_dim`'s:
    the result's `src_dim` is `n` times the operand's, its `tgt_dim` `n`
    times smaller. A device whose coordinates on `axes` have row-major
    index `g` in its group receives, as block `j` of `src_dim`, block `g`
    of `tgt_dim` of the group member with index `j`. Equal to an
    `sd.all_gather` of `src_dim` followed by an `sd.all_slice` of
    `tgt_dim`, with `1/n` of the traffic (Ulysses context parallelism,
    switching between sequence and head sharding).

    With `subgroup_size = m`, the members of each group (numbered row-major
    on `axes`) form consecutive subgroups of `m` (members `0..m-1`,
    `m..2m-1`, ...: the minor part of the axes, as a Shardy sub-axis) and
    the exchange runs within each subgroup: `n` is `m` above and `g`, `j`
    are indices within the subgroup. Hybrid Ulysses-ring attention uses it
    for the Ulysses groups of `ulysses_shards` devices.

    Pipeline stage: after sd-partition (local types).

    Constraints:
    * operand and result are static f32 or bf16 tensors of one rank and
      element type
    * `src_dim` and `tgt_dim` are in range and differ
    * at least one axis is listed
    * no axis is listed twice
    * the mesh symbol names an `sd.mesh`
    * every listed axis exists in the mesh
    * `subgroup_size`, if present, is positive and divides the product of
      the axes' sizes
    * the operand's `tgt_dim` is divisible by `n` (the product of the axes'
      sizes, or `subgroup_size`); the result is the operand with `src_dim`
      times `n` and `tgt_dim` divided by `n`
  }];
  let arguments = (ins SD_LocalTensor:$operand, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, I64Attr:$src_dim, I64Attr:$tgt_dim,
                       OptionalAttr<I64Attr>:$subgroup_size);
  let results = (outs SD_LocalTensor:$result);
  let assemblyFormat = [{
    $operand $mesh `axes` `=` $axes `src_dim` `=` $src_dim `tgt_dim` `=` $tgt_dim
    (`subgroup_size` `=` $subgroup_size^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The number of members that exchange blocks: `subgroup_size`, else
    /// `groupSize` (the product of the axes' sizes).
    int64_t getExchangeSize(int64_t groupSize) {
      std::optional<uint64_t> subgroup = getSubgroupSize();
      return subgroup ? static_cast<int64_t>(*subgroup) : groupSize;
    }
  }];
  let hasVerifier = 1;
}

def SD_CollectivePermuteOp : SD_CollectiveOp<"collective_permute",
    [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "Sends whole blocks between the members of each group";
  let description = [{
    ```mlir
    %y = sd.collective_permute %x @mesh axes = ["data", "fsdp"] pairs = [[1, 2], [2, 1]] : tensor<4x8xf32>
    ```
    Within each group (the devices whose coordinates differ only on
    `axes`), a member is numbered by the row-major index of its
    coordinates on `axes`, major to minor as listed (with `data`=2,
    `fsdp`=2, the device at data 1, fsdp 0 is member 2). A pair `[s, t]`
    makes member `s` send its operand to member `t`, whose result it
    becomes. A member that no pair targets keeps its own operand (so
    `[s, s]` and a permute without pairs change nothing). The pairs are
    the same for every group.

    sd-partition emits it where a layout change moves whole blocks: an axis
    replaced by another of the same size, the axes of a dimension
    reordered, axes trading dimensions (see ReshardPlanner.h). A ring shift
    by `k` along an axis of size `n` (ring attention's K/V rotation) is the
    pairs `[i, (i + k) mod n]` (`getRingShiftPairs`).

    Pipeline stage: after sd-partition (local types).

    Constraints:
    * operand and result are one static f32 or bf16 tensor type
    * at least one axis is listed
    * no axis is listed twice
    * `pairs` holds an even number of integers (printed as pairs)
    * no member is the source of two pairs
    * no member is the target of two pairs
    * the mesh symbol names an `sd.mesh`
    * every listed axis exists in the mesh
    * every source and target is a member index in `[0, N)`, N the product
      of the axes' sizes
  }];
  let arguments = (ins SD_LocalTensor:$operand, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DenseI64ArrayAttr:$pairs);
  let results = (outs SD_LocalTensor:$result);
  let assemblyFormat = [{
    $operand $mesh `axes` `=` $axes `pairs` `=` custom<PermutePairs>($pairs)
    attr-dict `:` type($result)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$operand,
                   "::mlir::FlatSymbolRefAttr":$mesh,
                   "::llvm::ArrayRef<::llvm::StringRef>":$axes,
                   "::llvm::ArrayRef<std::pair<int64_t, int64_t>>":$pairs)>
  ];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The (source, target) pairs of member indices.
    ::llvm::SmallVector<std::pair<int64_t, int64_t>> getPairList() {
      return pairList(getPairs());
    }
    /// `flat` ([s0, t0, s1, t1, ...]) as (source, target) pairs.
    static ::llvm::SmallVector<std::pair<int64_t, int64_t>>
    pairList(::llvm::ArrayRef<int64_t> flat);
    /// The pairs of a rotation by `shift` (any sign) along a group of
    /// `size` members: `[i, (i + shift) mod size]`; none for a multiple of
    /// `size`.
    static ::llvm::SmallVector<std::pair<int64_t, int64_t>>
    getRingShiftPairs(int64_t size, int64_t shift);
    /// The `custom<PermutePairs>` directive: `[[0, 1], [1, 0]]`.
    static ::mlir::ParseResult
    parsePermutePairs(::mlir::OpAsmParser &parser,
                      ::mlir::DenseI64ArrayAttr &pairs);
    static void printPermutePairs(::mlir::OpAsmPrinter &printer,
                                  ::mlir::Operation *op,
                                  ::mlir::DenseI64ArrayAttr pairs);
  }];
}

def SD_AxisIndexOp : SD_CollectiveOp<"axis_index"> {
  let summary = "The device's block index along some mesh axes";
  let description = [{
    ```mlir
    %i = sd.axis_index @mesh axes = ["data", "fsdp"] : tensor<f32>
    ```
    The row-major index of the device's coordinates on `axes` (major to
    minor as listed), as an f32 scalar: the block a device holds of a
    dimension sharded over `axes` (with `data`=2, `fsdp`=2, the device at
    data 1, fsdp 0 gets 2). sd-partition multiplies it by a block's size to
    give iota and the rng ops the offset of the device's block. Sends
    nothing, but depends on the device, so it is evaluated with the
    collectives.

    Pipeline stage: after sd-partition (local types).

    Constraints:
    * at least one axis is listed
    * no axis is listed twice
    * the mesh symbol names an `sd.mesh`
    * every listed axis exists in the mesh
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrArrayAttr:$axes);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "$mesh `axes` `=` $axes attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Asynchronous collective_permute (start / done)
//===----------------------------------------------------------------------===//

def SD_CollectivePermuteStartOp : SD_Op<"collective_permute_start",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     AllTypesMatch<["operand", "result"]>]> {
  let summary = "Issues a collective_permute whose result a later done completes";
  let description = [{
    ```mlir
    %p = sd.collective_permute_start %x @mesh axes = ["context"] pairs = [[0, 1], [1, 0]] : tensor<4x8xf32>
    %y = sd.collective_permute_done %p, %x : tensor<4x8xf32>
    ```
    The first half of an `sd.collective_permute` with the same operands and
    attributes (same groups, pairs and semantics): it sends the operand and
    posts the receive, and returns at once. Its result is the buffer the
    block arrives in; nothing may read it but the matching
    `sd.collective_permute_done`, whose result is the permute's. Work
    placed between the two overlaps the transfer (ring attention's next K/V
    block travels while the current one is computed: double buffering).
    sd-async-collectives creates the pair from a `sd.collective_permute`.
    It has side effects, so that no pass merges or drops an issued
    transfer.
    Pipeline stage: after sd-async-collectives (local types).
    Constraints: those of `sd.collective_permute`, and
    * its only user is one `sd.collective_permute_done` (whose second
      operand is this op's operand)
  }];
  let arguments = (ins SD_LocalTensor:$operand, FlatSymbolRefAttr:$mesh,
                       StrArrayAttr:$axes, DenseI64ArrayAttr:$pairs);
  let results = (outs SD_LocalTensor:$result);
  let assemblyFormat = [{
    $operand $mesh `axes` `=` $axes `pairs` `=`
    custom<PermutePairs>($pairs) attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The (source, target) pairs of member indices.
    ::llvm::SmallVector<std::pair<int64_t, int64_t>> getPairList() {
      return CollectivePermuteOp::pairList(getPairs());
    }
    /// The done that completes it, if its only user is one.
    CollectivePermuteDoneOp getDone();
    static ::mlir::ParseResult parsePermutePairs(::mlir::OpAsmParser &parser,
                                                 ::mlir::DenseI64ArrayAttr &pairs) {
      return CollectivePermuteOp::parsePermutePairs(parser, pairs);
    }
    static void printPermutePairs(::mlir::OpAsmPrinter &printer,
                                  ::mlir::Operation *op,
                                  ::mlir::DenseI64ArrayAttr pairs) {
      CollectivePermuteOp::printPermutePairs(printer, op, pairs);
    }
  }];
}

def SD_CollectivePermuteDoneOp : SD_Op<"collective_permute_done",
    [AllTypesMatch<["pending", "source", "result"]>]> {
  let summary = "Waits for a collective_permute_start and yields its result";
  let description = [{
    ```mlir
    %y = sd.collective_permute_done %p, %x : tensor<4x8xf32>
    ```
    Waits until the block `%p`'s start receives has arrived and until the
    start's operand `%x` (the second operand, which it keeps alive) has
    been taken by the member it was sent to; the result is the received
    block, in `%p`'s buffer. It has side effects (see the start).
    Pipeline stage: after sd-async-collectives (local types).
    Constraints:
    * `pending` is the result of an `sd.collective_permute_start` whose
      operand is `source`
  }];
  let arguments = (ins SD_LocalTensor:$pending, SD_LocalTensor:$source);
  let results = (outs SD_LocalTensor:$result);
  let assemblyFormat = "$pending `,` $source attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start this op completes, if its pending value is one's.
    CollectivePermuteStartOp getStart();
  }];
}

//===----------------------------------------------------------------------===//
// Reshard (global programs)
//===----------------------------------------------------------------------===//

def SD_ReshardOp : SD_SameTypeOp<"reshard",
    [SameOperandsAndResultType,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     SD_ElementwiseShardingRule]> {
  let summary = "Changes the sharding of a value";
  let description = [{
    ```mlir
    %y = sd.reshard %x sharding = <@mesh, [{}, {"fsdp"} ]> : tensor<8x384xf32>
    ```
    The result has `sharding`, whatever the operand's: sharding propagation
    inserts it where the shardings that reach a value conflict, and the
    partitioner turns it into collectives (all-gather, all-slice,
    all-to-all, collective-permute). Numerically the identity; its sharding
    rule is elementwise.

    Pipeline stage: global programs, from sharding propagation until
    sd-partition replaces it.

    Constraints:
    * `sharding` satisfies the `#sd.sharding` constraints for the type
    * every dimension of `sharding` is closed and has no priority (a
      reshard states a decided layout)
  }];
  let arguments = (ins SD_FloatTensor:$input, SD_ShardingAttr:$sharding);
  let results = (outs SD_FloatTensor:$result);
  let assemblyFormat = "$input `sharding` `=` $sharding attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // SD_IR_SDCOLLECTIVEOPS_TD
