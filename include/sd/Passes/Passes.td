//===- Passes.td - sd passes --------------------------------*- tablegen -*-===//

#ifndef SD_PASSES_TD
#define SD_PASSES_TD

include "mlir/Pass/PassBase.td"

def MaterializeMesh : Pass<"sd-materialize-mesh", "::mlir::ModuleOp"> {
  let summary = "Create the sd.mesh op from a mesh specification";
  let description = [{
    Parses a mesh in MaxDiffusion's terms — ICI axis sizes (`mesh`), an
    optional DCN part (`dcn-mesh`), `-1` filled from the device count — and
    adds (or replaces) `sd.mesh @<mesh-name>` at the top of the module.

    ```mlir
    // sd-materialize-mesh{mesh=data:2,fsdp:-1 devices=8}
    module {}
    // becomes
    module { sd.mesh @mesh = <["data"=2, "fsdp"=4]> }
    ```

    A malformed specification, two `-1` axes, or a device count the mesh
    does not match is an error on the module.
  }];
  let options = [
    Option<"meshSpec", "mesh", "std::string", "\"\"",
           "ICI mesh: comma-separated axis:size, e.g. data:8,fsdp:4 (-1 fills)">,
    Option<"dcnMeshSpec", "dcn-mesh", "std::string", "\"\"",
           "DCN mesh (across processes/hosts), e.g. data:2">,
    Option<"devices", "devices", "int64_t", "0",
           "Total device count (0: the product of the mesh)">,
    Option<"processes", "processes", "int64_t", "0",
           "Process count, to fill a -1 DCN axis (0: unknown)">,
    Option<"meshName", "mesh-name", "std::string", "\"mesh\"",
           "Symbol name of the mesh op">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def ApplyLogicalRules : Pass<"sd-apply-logical-rules", "::mlir::func::FuncOp"> {
  let summary = "Turn logical axis names into mesh shardings";
  let description = [{
    For every function argument with `sd.logical_axes` and every
    `sd.sharding_constraint` with `logical`, resolves the logical names
    with the logical axis rules (a preset — `dit`, `sdxl`, `flux`, `wan` — or
    a MaxDiffusion YAML file) against the module's mesh, and records the
    resulting `#sd.sharding` (closed dimensions). An argument that already
    has `sd.sharding` keeps it. Rules follow flax/MaxDiffusion: for each
    dimension the first rule for its name whose mesh axes are not yet used
    by the tensor wins; mesh axes absent from the mesh are dropped.

    ```mlir
    func.func @loss(%w: tensor<384x1536xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>})
    // with rules=dit on sd.mesh @mesh = <["fsdp"=4, "tensor"=2]> becomes
    func.func @loss(%w: tensor<384x1536xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>,
                                              sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"tensor"} ]>})
    ```

    A dimension whose size is not divisible by the product of its mesh axes
    is an error naming the tensor, dimension, size and axes.
  }];
  let options = [
    Option<"rules", "rules", "std::string", "\"dit\"",
           "Logical axis rules: dit, sdxl, flux, wan, or a YAML file path">,
    Option<"meshName", "mesh-name", "std::string", "\"mesh\"",
           "Symbol name of the mesh op">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def SpecializeBatch : Pass<"sd-specialize-batch", "::mlir::ModuleOp"> {
  let summary = "Fix the dynamic batch dimension and make all shapes static";
  let description = [{
    sd programs may leave the batch dimension dynamic (`?`). This pass sets
    every dynamic dimension of the entry functions' arguments (functions no
    other function calls) to `batch`, or to the function's
    `sd.default_batch` when `batch` is 0, then recomputes every result type
    in order: through InferTypeOpInterface, through RefineShapesOpInterface,
    and through calls (each callee is specialized once; calls with other
    types are an error). Function signatures are updated.

    ```mlir
    func.func @loss(%x: tensor<?x16xf32>) ... { %y = sd.exp %x : tensor<?x16xf32> ... }
    // with batch=8 becomes
    func.func @loss(%x: tensor<8x16xf32>) ... { %y = sd.exp %x : tensor<8x16xf32> ... }
    ```

    A program already static at another batch size, a non-positive batch,
    or no batch at all is an error.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", "0",
           "Global batch size (0: the function's sd.default_batch)">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def PropagateSharding
    : Pass<"sd-propagate-sharding", "::mlir::func::FuncOp"> {
  let summary = "Propagate shardings through the program with factor rules";
  let description = [{
    Gives every op result a sharding (`sd.sharding`, a
    `#sd.sharding_per_value`) from the annotations: argument shardings
    (from the logical axis rules), `sd.sharding_constraint`s, function
    result shardings and op results that carry `sd.sharding` already. Open
    dimensions may gain mesh axes; closed ones never change.

    The algorithm is Shardy's: each op's sharding rule
    (ShardingRuleOpInterface) maps its dimensions to factors; shardings are
    projected onto the factors, merged (a prefix merges with its extension;
    on a conflict the larger tensor wins, or the common prefix stays), and
    projected back, forward and backward to a fixed point. User priorities
    (`p0` first) are propagated in order, and within each, pass-through
    ops first, then the pass-through factors of all ops (broadcasts only
    backward), then everything. A mesh axis is used once per tensor,
    dimensions stay divisible by their axes, need_replication factors stay
    unsharded, and a sharded reduction factor makes the op's results
    partial sums (`unreduced`).

    Where an operand still disagrees with what its op's rule requires, an
    `sd.reshard` to the required sharding is inserted before the op (and
    after it for a result that its consumers want sharded otherwise).

    ```mlir
    func.func @f(%x: tensor<8x16xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {} ]>},
                 %w: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {"tensor"} ]>}) -> tensor<8x32xf32> {
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0] : ...
    // becomes
      %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
          {sd.sharding = #sd.sharding_per_value<[<@mesh, [{"data", ?}, {"tensor", ?} ]>]>} : ...
    ```

    With `record-provenance`, each op gets `sd.provenance`: for each sharded
    result dimension, which annotation the axes came from and through which
    op. `explain=<name>` reports (as remarks) how the value or parameter of
    that name got its sharding.

    The program must be static and free of calls (run `--inline` and
    `sd-specialize-batch` first) and the module must have the mesh.
  }];
  let options = [
    Option<"meshName", "mesh-name", "std::string", "\"mesh\"",
           "Symbol name of the mesh op">,
    Option<"recordProvenance", "record-provenance", "bool", "false",
           "Record in sd.provenance where each sharding came from">,
    Option<"explain", "explain", "std::string", "\"\"",
           "Emit remarks on how the named value (sd.name, parameter name "
           "or input kind) got its sharding">,
  ];
  let statistics = [
    Statistic<"numReshards", "num-reshards", "Number of sd.reshard ops inserted">,
    Statistic<"numVisits", "num-visits", "Number of op visits until the fixed point">,
  ];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

def TestPrintShardingRules
    : Pass<"sd-test-print-sharding-rules", "::mlir::func::FuncOp"> {
  let summary = "Test only: record each op's sharding rule on the op";
  let description = [{
    Sets `sd.sharding_rule` on every op that implements
    `ShardingRuleOpInterface` to the rule the op states, so that FileCheck
    tests can check the rules that propagation will use.

    ```mlir
    %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
        : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    // becomes
    %y = sd.dot_general %x, %w batch = [] x [] contract = [1] x [0]
        {sd.sharding_rule = #sd.sharding_rule<([i, j], [j, k]) -> ([i, k])
                                              {i=8, j=16, k=32}, reduction={j}>}
        : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
    ```

    An sd op without the interface, or one that cannot give a rule (a
    dynamic shape), is an error.
  }];
  let dependentDialects = ["::mlir::sd::SDDialect"];
}

#endif // SD_PASSES_TD
