//===- OpenMPLoweringOpInterface.td - ops as OpenMP C++ ----*- tablegen -*-===//
//
// How an op becomes C++/OpenMP code. Every sd op that may appear in a
// per-device function implements it as an external model attached by
// `registerOpenMPLoweringInterfaces` (lib/Target/OpenMP), so the planning
// pass and the emitter know no op names.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TARGET_OPENMP_OPENMPLOWERINGOPINTERFACE_TD
#define SD_TARGET_OPENMP_OPENMPLOWERINGOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def SDOMP_OpenMPLoweringOpInterface
    : OpInterface<"OpenMPLoweringOpInterface"> {
  let cppNamespace = "::mlir::sd::openmp";
  let description = [{
    An op that the OpenMP lowering can write. Its kind (`LoweringKind`)
    decides how sd-lower-to-openmp plans it: fusible ops (elementwise, index
    maps, cheap ops) and reductions become scalar code inside a kernel's
    loop nest, written by `buildScalar` at positions that
    `getOperandPositions` maps; every other op writes its own step of the
    program (a BLAS or runtime call, a collective, a static array, a memory
    move) through `emitCall`.
  }];
  let methods = [
    InterfaceMethod<[{
        How the op is planned: fused into loops, a reduction, or a call of
        its own.
      }],
      "::mlir::sd::openmp::LoweringKind", "getLoweringKind", (ins)>,
    InterfaceMethod<[{
        Whether the op's step reads and writes bf16 buffers itself. Calls
        that take f32 only (most runtime kernels) say no: sd-lower-to-openmp
        then computes them in f32 between `sd.convert`s, which is the op's
        meaning (ops compute in f32 and round their result to its type).
        Fused and reduction kernels convert on load and store, and moves
        and collectives move any element type.
      }],
      "bool", "takesBF16", (ins), [{}], [{
        return ::llvm::cast<::mlir::sd::openmp::OpenMPLoweringOpInterface>(
                   $_op.getOperation())
                   .getLoweringKind() !=
               ::mlir::sd::openmp::LoweringKind::Library;
      }]>,
    InterfaceMethod<[{
        Whether the result is the operand's buffer read in row-major order
        (a reshape): materialized, it aliases that buffer.
      }],
      "bool", "isBufferView", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<[{
        Calls whose result is completed in the buffer of one of their
        operands (sd.collective_permute_done fills its start's): that
        operand's index, else -1. The result then shares that buffer, which
        lives until the result's last reader.
      }],
      "int64_t", "getResultBufferOperand", (ins), [{}], [{ return -1; }]>,
    InterfaceMethod<[{
        Fusible ops and reductions: the position at which the op reads each
        of its operands when a kernel computes its result at `pos` (or, for
        a reduction, reads its input at `pos`). The default reads every
        operand at `pos` (elementwise).
      }],
      "void", "getOperandPositions",
      (ins "::mlir::sd::openmp::KernelBuilder &":$kernel,
           "const ::mlir::sd::openmp::Position &":$pos,
           "::llvm::SmallVectorImpl<::mlir::sd::openmp::OperandPosition> &":$positions),
      [{}], [{
        for (::mlir::Value operand : $_op->getOperands())
          positions.push_back({operand, pos});
      }]>,
    InterfaceMethod<[{
        Fusible ops and reductions: the C++ scalar expression of the result
        at `pos`, given the variables holding the operands read at the
        positions of `getOperandPositions` (a reduction: the value it
        accumulates at `pos`). The default is the first operand (index maps,
        identities).
      }],
      "std::string", "buildScalar",
      (ins "::mlir::sd::openmp::KernelBuilder &":$kernel,
           "const ::mlir::sd::openmp::Position &":$pos,
           "::llvm::ArrayRef<std::string>":$operands),
      [{}], [{ return operands.front(); }]>,
    InterfaceMethod<[{
        Reductions: which dimensions of the first operand are reduced and
        how the values are combined.
      }],
      "::mlir::sd::openmp::ReductionInfo", "getReduction", (ins), [{}],
      [{ return {}; }]>,
    InterfaceMethod<[{
        Library calls, collectives, constants and memory moves: writes the
        op's step of the program through `program` (its result's buffer,
        the call, its trace span). Fails after an error on the op.
      }],
      "::llvm::LogicalResult", "emitCall",
      (ins "::mlir::sd::openmp::ProgramBuilder &":$program), [{}], [{
        return $_op->emitOpError("has no OpenMP call");
      }]>,
  ];
}

#endif // SD_TARGET_OPENMP_OPENMPLOWERINGOPINTERFACE_TD
