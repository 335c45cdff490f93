//===- EvaluableOpInterface.td - reference evaluation ------*- tablegen -*-===//
//
// How an op computes its results in the reference evaluator. Every sd op that
// may appear in a function body implements one of the two interfaces (as an
// external model attached by `registerEvaluatorInterfaces`), so the evaluator
// driver knows no op names: it looks operands up, calls the interface, and
// rounds the results.
//
//===----------------------------------------------------------------------===//

#ifndef SD_EVALUATOR_EVALUABLEOPINTERFACE_TD
#define SD_EVALUATOR_EVALUABLEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def SD_EvaluableOpInterface : OpInterface<"EvaluableOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    An op that one device can evaluate on its own, from its operands' values
    alone (every op except the collectives, which see all devices' operands
    at once through a separate interface).

    The evaluator passes one tensor per operand, in operand order (absent
    optional operands are simply not there: use the ODS operand segments to
    find an optional operand), and expects one tensor per result. Results
    are in double and need not be rounded or tagged with their element type:
    the driver does both according to its precision mode.
  }];
  let methods = [
    InterfaceMethod<[{
        Computes the results from `operands` (one per operand, never null).
        Fails, after an error on the op, on what the reference cannot
        evaluate (e.g. an unsupported constant attribute).
      }],
      "::llvm::LogicalResult", "evaluate",
      (ins "::llvm::ArrayRef<const ::sd::ref::Tensor *>":$operands,
           "::llvm::SmallVectorImpl<::sd::ref::Tensor> &":$results)>,
  ];
}

def SD_CollectiveEvaluableOpInterface
    : OpInterface<"CollectiveEvaluableOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    A collective: an op whose results on one device depend on other
    devices' operands. The evaluator calls it once for all devices, which
    must be exactly the devices of the op's mesh (device `i` is the mesh
    device with id `i`, see `::sd::MeshSpec::coordinates`). The driver
    checks that before it evaluates anything and dispatches to this
    interface before `EvaluableOpInterface`.

    As for `EvaluableOpInterface`, results are in double and need not be
    rounded or tagged: the driver does both.
  }];
  let methods = [
    InterfaceMethod<[{
        The mesh the collective communicates over. Null, after an error on
        the op, when its mesh symbol names no `sd.mesh`.
      }],
      "::mlir::sd::MeshAttr", "getCollectiveMesh", (ins)>,
    InterfaceMethod<[{
        Computes `results[device][result]` for every device of `mesh` from
        `operands[device][operand]` (never null). Fails, after an error on
        the op, on what the reference cannot evaluate.
      }],
      "::llvm::LogicalResult", "evaluateCollective",
      (ins "const ::sd::MeshSpec &":$mesh,
           "::llvm::ArrayRef<::llvm::SmallVector<const ::sd::ref::Tensor *>>":$operands,
           "std::vector<std::vector<::sd::ref::Tensor>> &":$results)>,
  ];
}

#endif // SD_EVALUATOR_EVALUABLEOPINTERFACE_TD
