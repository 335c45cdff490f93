//===- SDOps.h - sd operations ----------------------------------*- C++ -*-===//
#ifndef SD_IR_SDOPS_H
#define SD_IR_SDOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"

#include "sd/IR/SDInterfaces.h.inc"

namespace mlir::sd {
/// Shared result-type inference of the reductions: the operand shape without
/// `dims`. Reports through `loc` as `opName`.
LogicalResult inferReduceType(StringRef opName, std::optional<Location> loc,
                              Type operandType, ArrayRef<int64_t> dims,
                              SmallVectorImpl<Type> &types);

/// The mesh a symbol reference names, looked up from `from`; null (after an
/// error through `emitError`) when there is none.
MeshAttr lookupMesh(Operation *from, FlatSymbolRefAttr meshName,
                    function_ref<InFlightDiagnostic()> emitError);
} // namespace mlir::sd

#define GET_OP_CLASSES
#include "sd/IR/SDOps.h.inc"

#endif // SD_IR_SDOPS_H
