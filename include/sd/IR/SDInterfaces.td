//===- SDInterfaces.td - sd op interfaces -------------------*- tablegen -*-===//
//
// Interfaces through which ops state their own rules, so that passes stay
// generic. Later stages add sharding rules, VJPs, partitioning and cost.
//
//===----------------------------------------------------------------------===//

#ifndef SD_IR_SDINTERFACES_TD
#define SD_IR_SDINTERFACES_TD

include "mlir/IR/OpBase.td"

def SD_RefineShapesOpInterface : OpInterface<"RefineShapesOpInterface"> {
  let cppNamespace = "::mlir::sd";
  let description = [{
    Ops whose result type is written out (not inferred from the operands)
    but may still hold dynamic dimensions implement this so that
    `sd-specialize-batch` can compute static result types once the operand
    types became static. Ops with `InferTypeOpInterface` need nothing more.
  }];
  let methods = [
    InterfaceMethod<[{
        Computes the result types from the current operand types. Fails
        (after emitting an error) when a dynamic result dimension cannot be
        determined.
      }],
      "::llvm::LogicalResult", "refineResultTypes",
      (ins "::llvm::SmallVectorImpl<::mlir::Type> &":$types)>,
  ];
}

#endif // SD_IR_SDINTERFACES_TD
