//===- OpenMPDialect.td - the OpenMP target's plan attributes -*- tablegen -*-===//
//
// The `sd_omp` dialect holds no ops: only the typed attributes in which
// sd-lower-to-openmp records its kernel plan on the ops of a function, for
// the emitter (OpenMPEmitter.h) to read.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TARGET_OPENMP_OPENMPDIALECT_TD
#define SD_TARGET_OPENMP_OPENMPDIALECT_TD

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/DialectBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def SDOMP_Dialect : Dialect {
  let name = "sd_omp";
  let cppNamespace = "::mlir::sd::openmp";
  let summary = "The kernel plan of sd's OpenMP lowering";
  let description = [{
    Attributes that `sd-lower-to-openmp` puts on every op of a planned
    function under the name `sd_omp.plan`, and that the OpenMP emitter
    reads: which kernel each op runs in and what kind of kernel that is.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The discardable attribute that carries an op's plan.
    static constexpr ::llvm::StringLiteral kPlanAttrName = "sd_omp.plan";
  }];
}

def SDOMP_KernelKind : I32EnumAttr<"KernelKind", "kind of kernel", [
    I32EnumAttrCase<"fused", 0>,
    I32EnumAttrCase<"reduce", 1>,
    I32EnumAttrCase<"alias", 2>,
    I32EnumAttrCase<"library", 3>,
    I32EnumAttrCase<"collective", 4>,
    I32EnumAttrCase<"constant", 5>,
    I32EnumAttrCase<"memory", 6>]> {
  let cppNamespace = "::mlir::sd::openmp";
  let genSpecializedAttr = 0;
}

class SDOMP_Attr<string name, string attrMnemonic>
    : AttrDef<SDOMP_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def SDOMP_KernelAttr : SDOMP_Attr<"Kernel", "kernel"> {
  let summary = "The root of a kernel: the op whose result it writes";
  let description = [{
    `#sd_omp.kernel<3, fused>` marks the op that kernel 3 ends in: the
    kernel computes (and materializes) this op's result. Kernels are
    numbered in program order from 0. The kind says how it runs:

    * `fused`: a loop nest over the result computing this op and every op
      marked `#sd_omp.in_kernel<3>` at each point.
    * `reduce`: a reduction whose input loop computes its fused producers.
    * `alias`: no code; the result is the operand's buffer (a reshape of a
      materialized value).
    * `library`, `collective`, `constant`, `memory`: the op writes its own
      call (a BLAS GEMM or a runtime kernel, a collective, a static array,
      a move between device and host memory) through its
      `OpenMPLoweringOpInterface`.

    Constraints:

    * The id is not negative.
  }];
  let parameters = (ins "int64_t":$id,
                        EnumParameter<SDOMP_KernelKind>:$kind);
  let assemblyFormat = "`<` $id `,` $kind `>`";
  let genVerifyDecl = 1;
}

def SDOMP_InKernelAttr : SDOMP_Attr<"InKernel", "in_kernel"> {
  let summary = "An op fused into the kernel that all its users are in";
  let description = [{
    `#sd_omp.in_kernel<3>`: the op is computed inside kernel 3, at the
    positions where that kernel reads it; its result has no buffer.

    Constraints:

    * The id is not negative.
  }];
  let parameters = (ins "int64_t":$id);
  let assemblyFormat = "`<` $id `>`";
  let genVerifyDecl = 1;
}

def SDOMP_KernelOutputAttr : SDOMP_Attr<"KernelOutput", "kernel_output"> {
  let summary = "An op computed inside a later kernel that also stores it";
  let description = [{
    `#sd_omp.kernel_output<3>`: a multi-output fusion (XLA's term). The op
    is computed inside kernel 3 (a `fused` kernel whose loop space is this
    op's shape), which also stores it, at every point, into a buffer of
    its own; kernels after kernel 3 read that buffer. This is how a value
    that the forward pass uses at once and the backward pass again later
    (the input of a GELU, Adam's new moments) costs one pass over memory
    instead of two.

    Constraints:

    * The id is not negative.
  }];
  let parameters = (ins "int64_t":$id);
  let assemblyFormat = "`<` $id `>`";
  let genVerifyDecl = 1;
}

def SDOMP_InlineAttr : SDOMP_Attr<"Inline", "inline"> {
  let summary = "A cheap op recomputed in every kernel that reads it";
  let description = [{
    `#sd_omp.inline`: a splat constant, an iota, or an index op such as a
    broadcast of a materialized value, recomputed inside each kernel that
    reads it instead of being materialized.
  }];
}

#endif // SD_TARGET_OPENMP_OPENMPDIALECT_TD
