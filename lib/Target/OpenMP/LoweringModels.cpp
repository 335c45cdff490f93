//===- LoweringModels.cpp - how each sd op becomes OpenMP C++ -------------===//
//
// The external models of OpenMPLoweringOpInterface for the sd ops that fuse
// into kernels: one small overload per op (its scalar expression, the
// positions at which it reads its operands, or its reduction), and one model
// template per family of ops that forwards the interface to those
// overloads, as the evaluator does (lib/Evaluator/EvaluableOps.cpp). The ops
// that become calls of their own (library calls, memory moves, collectives)
// have theirs in CallModels.cpp; the registration of every model is at the
// end. A new op is one overload and one entry in the registration (here, or
// in attachCallModels).
//
//===----------------------------------------------------------------------===//

#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"

#include "LoweringModels.h"

#include "sd/IR/SDOps.h"
#include "sd/Target/OpenMP/OpenMPDialect.h"

#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.cpp.inc"

namespace {
using Scalars = ArrayRef<std::string>;
using Positions = SmallVectorImpl<OperandPosition>;
} // namespace

/// "f(a)".
static std::string call(StringRef f, Scalars a) {
  return (f + "(" + a[0] + ")").str();
}
/// "f(a, b)".
static std::string call2(StringRef f, Scalars a) {
  return (f + "(" + a[0] + ", " + a[1] + ")").str();
}
static std::string infix(StringRef o, Scalars a) {
  return a[0] + " " + o.str() + " " + a[1];
}

//===----------------------------------------------------------------------===//
// Elementwise ops: the scalar expression from the operands
//===----------------------------------------------------------------------===//

static std::string scalarOf(NegOp, Scalars a) { return "-" + a[0]; }
static std::string scalarOf(ExpOp, Scalars a) { return call("sd_exp", a); }
static std::string scalarOf(LogOp, Scalars a) { return call("sd_log", a); }
static std::string scalarOf(SqrtOp, Scalars a) { return call("sd_sqrt", a); }
static std::string scalarOf(RsqrtOp, Scalars a) {
  return "1.0f / " + call("sd_sqrt", a);
}
static std::string scalarOf(TanhOp, Scalars a) { return call("sd_tanh", a); }
static std::string scalarOf(SinOp, Scalars a) { return call("sd_sin", a); }
static std::string scalarOf(CosOp, Scalars a) { return call("sd_cos", a); }
static std::string scalarOf(ErfOp, Scalars a) { return call("sd_erf", a); }
static std::string scalarOf(SigmoidOp, Scalars a) {
  return call("sd_sigmoid", a);
}
static std::string scalarOf(SiluOp, Scalars a) {
  return a[0] + " * " + call("sd_sigmoid", a);
}
static std::string scalarOf(GeluOp op, Scalars a) {
  return call(op.getApproximate() ? "sd_gelu_tanh" : "sd_gelu_erf", a);
}
static std::string scalarOf(AddOp, Scalars a) { return infix("+", a); }
static std::string scalarOf(SubOp, Scalars a) { return infix("-", a); }
static std::string scalarOf(MulOp, Scalars a) { return infix("*", a); }
static std::string scalarOf(DivOp, Scalars a) { return infix("/", a); }
static std::string scalarOf(MaxOp, Scalars a) { return call2("sd_max", a); }
static std::string scalarOf(MinOp, Scalars a) { return call2("sd_min", a); }
static std::string scalarOf(PowOp, Scalars a) { return call2("sd_pow", a); }
static std::string scalarOf(CompareOp op, Scalars a) {
  static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
  return infix(ops[static_cast<int>(op.getDirection())], a);
}
static std::string scalarOf(SelectOp, Scalars a) {
  return a[0] + " ? " + a[1] + " : " + a[2];
}
static std::string scalarOf(ConvertOp op, Scalars a) {
  return isPred(op.getOperand()) ? "(" + a[0] + " ? 1.0f : 0.0f)" : a[0];
}
/// Shardings do not change values.
static std::string scalarOf(ShardingConstraintOp, Scalars a) { return a[0]; }

//===----------------------------------------------------------------------===//
// Index maps: where the operands are read, and the value there
//===----------------------------------------------------------------------===//

static void addPerDim(Positions &out, Value v, SmallVector<Index> dims) {
  Position p;
  p.dims = std::move(dims);
  out.push_back({v, p});
}

/// A reshape reads its operand at the same row-major offset.
static void positionsOf(ReshapeOp op, KernelBuilder &kb, const Position &pos,
                        Positions &out) {
  Position p;
  p.linear = true;
  p.offset = kb.offsetOf(pos, shapeOf(op.getResult()));
  out.push_back({op.getOperand(), p});
}

static void positionsOf(BroadcastInDimOp op, KernelBuilder &kb,
                        const Position &pos, Positions &out) {
  ArrayRef<int64_t> outShape = shapeOf(op.getResult());
  ArrayRef<int64_t> opShape = shapeOf(op.getOperand());
  SmallVector<Index> in = kb.dimsOf(pos, outShape), dims;
  for (auto [i, d] : llvm::enumerate(op.getDims()))
    dims.push_back(opShape[i] == 1 && outShape[d] != 1 ? kb.constantIndex(0)
                                                       : in[d]);
  addPerDim(out, op.getOperand(), dims);
}

static void positionsOf(SliceOp op, KernelBuilder &kb, const Position &pos,
                        Positions &out) {
  SmallVector<Index> in = kb.dimsOf(pos, shapeOf(op.getResult())), dims;
  for (auto [d, i] : llvm::enumerate(in))
    dims.push_back(scaleAdd(i, op.getStrides()[d], op.getStart()[d]));
  addPerDim(out, op.getOperand(), dims);
}

static void positionsOf(PadOp op, KernelBuilder &kb, const Position &pos,
                        Positions &out) {
  SmallVector<Index> in = kb.dimsOf(pos, shapeOf(op.getResult())), dims;
  ArrayRef<int64_t> opShape = shapeOf(op.getOperand());
  for (auto [d, i] : llvm::enumerate(in)) {
    if (op.getLow()[d] == 0 && op.getHigh()[d] == 0) {
      dims.push_back(i);
      continue;
    }
    dims.push_back(
        clampIndex("(" + kb.print(i) + ") - " + std::to_string(op.getLow()[d]),
                   opShape[d]));
  }
  addPerDim(out, op.getOperand(), dims);
}

static void positionsOf(ConcatOp op, KernelBuilder &kb, const Position &pos,
                        Positions &out) {
  SmallVector<Index> in = kb.dimsOf(pos, shapeOf(op.getResult()));
  int64_t dim = op.getDim(), offset = 0;
  for (Value input : op.getInputs()) {
    SmallVector<Index> dims = in;
    int64_t size = shapeOf(input)[dim];
    dims[dim] = clampIndex(
        "(" + kb.print(in[dim]) + ") - " + std::to_string(offset), size);
    offset += size;
    addPerDim(out, input, dims);
  }
}

static void positionsOf(UpsampleNearestOp op, KernelBuilder &kb,
                        const Position &pos, Positions &out) {
  SmallVector<Index> dims = kb.dimsOf(pos, shapeOf(op.getResult()));
  for (int d = 0; d < 2; ++d)
    dims[1 + d] = Index::opaque("((" + kb.print(dims[1 + d]) + ") / " +
                                std::to_string(op.getScale()[d]) + ")");
  addPerDim(out, op.getOperand(), dims);
}

/// Most index maps are their operand read at the mapped position.
template <typename OpTy>
static std::string indexScalarOf(OpTy, KernelBuilder &, const Position &,
                                 Scalars a) {
  return a[0];
}

/// Inside the operand's bounds the operand, else the padding value.
static std::string indexScalarOf(PadOp op, KernelBuilder &kb,
                                 const Position &pos, Scalars a) {
  kb.markOpaque();
  SmallVector<Index> dims = kb.dimsOf(pos, shapeOf(op.getResult()));
  ArrayRef<int64_t> opShape = shapeOf(op.getOperand());
  std::string cond;
  for (auto [d, i] : llvm::enumerate(dims)) {
    int64_t lo = op.getLow()[d];
    if (lo == 0 && op.getHigh()[d] == 0)
      continue;
    std::string x = "(" + kb.print(i) + ")";
    cond += (cond.empty() ? "" : " && ") + x + " >= " + std::to_string(lo) +
            " && " + x + " < " + std::to_string(lo + opShape[d]);
  }
  if (cond.empty())
    return a[0];
  return "(" + cond + ") ? " + a[0] + " : " +
         floatLiteral(op.getPaddingValue().convertToDouble());
}

/// The input whose range holds the position along the concatenated
/// dimension.
static std::string indexScalarOf(ConcatOp op, KernelBuilder &kb,
                                 const Position &pos, Scalars a) {
  kb.markOpaque();
  SmallVector<Index> dims = kb.dimsOf(pos, shapeOf(op.getResult()));
  std::string x = "(" + kb.print(dims[op.getDim()]) + ")", e;
  int64_t offset = 0;
  auto inputs = op.getInputs();
  for (unsigned k = 0; k + 1 < inputs.size(); ++k) {
    offset += shapeOf(inputs[k])[op.getDim()];
    e += x + " < " + std::to_string(offset) + " ? " + a[k] + " : ";
  }
  return e + a.back();
}

/// Only a reshape's result is its operand's buffer as it is.
template <typename OpTy> static bool isViewOf(OpTy) { return false; }
static bool isViewOf(ReshapeOp) { return true; }

//===----------------------------------------------------------------------===//
// Cheap ops and constants
//===----------------------------------------------------------------------===//

static std::string cheapScalarOf(IotaOp op, KernelBuilder &kb,
                                 const Position &pos) {
  SmallVector<Index> dims = kb.dimsOf(pos, shapeOf(op.getResult()));
  kb.useIndex(dims[op.getDim()]);
  return "static_cast<float>(" + kb.print(dims[op.getDim()]) + ")";
}

static DenseElementsAttr denseValue(ConstantOp op) {
  return dyn_cast<DenseElementsAttr>(op.getValue());
}

/// A non-splat constant is a static array in the program.
static LogicalResult emitConstant(ConstantOp op, ProgramBuilder &pb) {
  DenseElementsAttr dense = denseValue(op);
  if (!dense)
    return op.emitOpError("has a constant the OpenMP emitter cannot read");
  std::string name = "cst" + pb.freshTag();
  llvm::raw_ostream &os = pb.sharedStatics();
  StringRef type = cElementType(op.getType());
  bool bf16 = isBF16(op.getResult());
  os << "// " << pb.names.op(op) << "\nstatic const " << type << " " << name
     << "[] = {";
  int64_t i = 0;
  for (APFloat value : dense.getValues<APFloat>()) {
    os << (i++ % 8 ? " " : "\n    ");
    // A bf16 attribute holds bf16 values: its bits are the element.
    if (bf16)
      os << "{0x" << llvm::utohexstr(value.bitcastToAPInt().getZExtValue())
         << "}";
    else
      os << floatLiteral(value.convertToDouble());
    os << ",";
  }
  os << "\n};\n";
  pb.setBuffer(op.getResult(),
               ("const_cast<" + type + " *>(" + name + ")").str());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static ReductionInfo reductionOf(ReduceSumOp op) {
  return {llvm::to_vector(op.getDims()), false, false, false};
}
static ReductionInfo reductionOf(ReduceMaxOp op) {
  return {llvm::to_vector(op.getDims()), false, /*max=*/true, false};
}
static ReductionInfo reductionOf(ReduceMeanOp op) {
  return {llvm::to_vector(op.getDims()), false, false, /*mean=*/true};
}
/// The mean over every element of the squared difference.
static ReductionInfo reductionOf(MseLossOp) {
  return {{}, /*allDims=*/true, false, /*mean=*/true};
}

/// What a reduction accumulates: its input as read.
template <typename OpTy>
static std::string reducedScalarOf(OpTy, KernelBuilder &, Scalars a) {
  return a[0];
}
static std::string reducedScalarOf(MseLossOp, KernelBuilder &kb, Scalars a) {
  std::string d = kb.bind(a[0] + " - " + a[1]);
  return d + " * " + d;
}

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

namespace {

/// Elementwise ops: `scalarOf` of the operands at the same position.
template <typename OpTy>
struct ElementwiseModel : Base<ElementwiseModel<OpTy>, OpTy> {
  LoweringKind getLoweringKind(Operation *) const {
    return LoweringKind::Elementwise;
  }
  std::string buildScalar(Operation *op, KernelBuilder &, const Position &,
                          Scalars operands) const {
    return scalarOf(cast<OpTy>(op), operands);
  }
};

/// Index maps: operands read at `positionsOf`, combined by `indexScalarOf`.
template <typename OpTy>
struct IndexMapModel : Base<IndexMapModel<OpTy>, OpTy> {
  LoweringKind getLoweringKind(Operation *) const {
    return LoweringKind::IndexMap;
  }
  bool isBufferView(Operation *op) const { return isViewOf(cast<OpTy>(op)); }
  void getOperandPositions(Operation *op, KernelBuilder &kernel,
                           const Position &pos, Positions &positions) const {
    positionsOf(cast<OpTy>(op), kernel, pos, positions);
  }
  std::string buildScalar(Operation *op, KernelBuilder &kernel,
                          const Position &pos, Scalars operands) const {
    return indexScalarOf(cast<OpTy>(op), kernel, pos, operands);
  }
};

/// Iota: the index along its dimension, recomputed wherever read.
struct IotaModel : Base<IotaModel, IotaOp> {
  LoweringKind getLoweringKind(Operation *) const {
    return LoweringKind::Cheap;
  }
  std::string buildScalar(Operation *op, KernelBuilder &kernel,
                          const Position &pos, Scalars) const {
    return cheapScalarOf(cast<IotaOp>(op), kernel, pos);
  }
};

/// Constants: a splat is a literal recomputed wherever read; anything else
/// a static array.
struct ConstantModel : Base<ConstantModel, ConstantOp> {
  LoweringKind getLoweringKind(Operation *op) const {
    DenseElementsAttr dense = denseValue(cast<ConstantOp>(op));
    return dense && dense.isSplat() ? LoweringKind::Cheap
                                    : LoweringKind::Constant;
  }
  std::string buildScalar(Operation *op, KernelBuilder &, const Position &,
                          Scalars) const {
    DenseElementsAttr dense = denseValue(cast<ConstantOp>(op));
    return floatLiteral(dense.getSplatValue<APFloat>().convertToDouble());
  }
  LogicalResult emitCall(Operation *op, ProgramBuilder &program) const {
    return emitConstant(cast<ConstantOp>(op), program);
  }
};

/// Reductions: `reductionOf` says what is reduced and how,
/// `reducedScalarOf` what is accumulated.
template <typename OpTy>
struct ReductionModel : Base<ReductionModel<OpTy>, OpTy> {
  LoweringKind getLoweringKind(Operation *) const {
    return LoweringKind::Reduction;
  }
  ReductionInfo getReduction(Operation *op) const {
    return reductionOf(cast<OpTy>(op));
  }
  std::string buildScalar(Operation *op, KernelBuilder &kernel,
                          const Position &, Scalars operands) const {
    return reducedScalarOf(cast<OpTy>(op), kernel, operands);
  }
};

} // namespace

template <template <typename> class Model, typename... OpTys>
static void attach(MLIRContext *context) {
  (OpTys::template attachInterface<Model<OpTys>>(*context), ...);
}

void mlir::sd::registerOpenMPLoweringInterfaces(DialectRegistry &registry) {
  registry.insert<SDOMPDialect>();
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    attach<ElementwiseModel, SD_ELEMENTWISE_MATH_OPS, CompareOp, SelectOp,
           ConvertOp, ShardingConstraintOp>(context);
    attach<IndexMapModel, BroadcastInDimOp, ReshapeOp, SliceOp, PadOp, ConcatOp,
           UpsampleNearestOp>(context);
    IotaOp::attachInterface<IotaModel>(*context);
    ConstantOp::attachInterface<ConstantModel>(*context);
    attach<ReductionModel, ReduceSumOp, ReduceMaxOp, ReduceMeanOp, MseLossOp>(
        context);
    attachCallModels(context);
  });
}
