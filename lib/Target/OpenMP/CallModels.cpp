//===- CallModels.cpp - sd ops that become runtime calls ------------------===//
//
// The external models of OpenMPLoweringOpInterface for the sd ops that the
// OpenMP lowering does not fuse into a kernel but writes as a step of their
// own (emitCall): calls into the BLAS and the runtime's kernels, memory moves
// between device and host, and collectives with their static SdCollective
// descriptors. One `emitCallOf` overload per op, and one model template,
// CallModel, that forwards the interface to it. LoweringModels.cpp holds the
// models of the ops that fuse, and registers these through attachCallModels.
//
//===----------------------------------------------------------------------===//

#include "LoweringModels.h"

#include "sd/Analysis/CostModel.h"
#include "sd/IR/SDOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

/// A double literal with every digit an f64 needs.
static std::string doubleLiteral(double value) {
  return llvm::formatv("{0:e17}", value).str();
}

//===----------------------------------------------------------------------===//
// Library calls: the BLAS and the runtime's kernels
//===----------------------------------------------------------------------===//

/// Copies `v` of `op` into a temporary with its dimensions permuted by
/// `perm` (a GEMM operand whose layout the BLAS cannot read directly).
static std::string transposeInto(DotGeneralOp op, Value v,
                                 ArrayRef<int64_t> perm, ProgramBuilder &pb) {
  llvm::raw_ostream &entry = pb.entry();
  std::string tmp = pb.freshLocal("t");
  int64_t bytes = bufferBytes(v.getType());
  StringRef type = cElementType(v.getType());
  std::string shape = pb.staticShape(shapeOf(v));
  std::string permName = pb.staticShape(perm);
  pb.countTemporary(op, bytes);
  entry << "  " << type << " *" << tmp << " = static_cast<" << type
        << " *>(api->alloc(dev, " << bytes << ", SD_DEVICE_MEMORY, "
        << cString(pb.names.op(op) + " (transposed operand)") << "));\n"
        << "  if (!" << tmp << ") return 1;\n";
  pb.traceBegin({"transpose", shapeText(shapeOf(v)), "(gemm operand)",
                 pb.names.label(op)},
                "kernel", 0, 2 * bytes);
  entry << "  api->transpose(dev, " << pb.buffer(v) << ", " << tmp << ", "
        << perm.size() << ", " << shape << ", " << permName << ", "
        << (isBF16(v) ? 2 : 4) << ");\n";
  pb.traceEnd();
  return tmp;
}

/// One (batched) GEMM: lhs [batch, M, K] or [batch, K, M] (trans_a), rhs
/// [batch, K, N] or [batch, N, K] (trans_b); an operand in any other layout
/// is transposed first.
static LogicalResult emitCallOf(DotGeneralOp op, ProgramBuilder &pb) {
  ArrayRef<int64_t> ls = shapeOf(op.getLhs()), rs = shapeOf(op.getRhs());
  ArrayRef<int64_t> lb = op.getLhsBatch(), rb = op.getRhsBatch();
  ArrayRef<int64_t> lc = op.getLhsContract(), rc = op.getRhsContract();
  SmallVector<int64_t> lf = op.getLhsFreeDims(), rf = op.getRhsFreeDims();
  int64_t batch = 1, m = 1, n = 1, k = 1;
  for (int64_t d : lb)
    batch *= ls[d];
  for (int64_t d : lf)
    m *= ls[d];
  for (int64_t d : rf)
    n *= rs[d];
  for (int64_t d : lc)
    k *= ls[d];
  DotGeneralOp::GemmOperands gemm = op.getGemmOperands();
  int transA = gemm.transLhs ? 1 : 0, transB = gemm.transRhs ? 1 : 0;
  std::string lhs = pb.buffer(op.getLhs()), rhs = pb.buffer(op.getRhs());
  SmallVector<std::string> temps;
  if (gemm.copyLhs) {
    SmallVector<int64_t> perm(lb);
    perm.append(lf);
    perm.append(lc.begin(), lc.end());
    lhs = transposeInto(op, op.getLhs(), perm, pb);
    temps.push_back(lhs);
  }
  if (gemm.copyRhs) {
    SmallVector<int64_t> perm(rb);
    perm.append(rc.begin(), rc.end());
    perm.append(rf);
    rhs = transposeInto(op, op.getRhs(), perm, pb);
    temps.push_back(rhs);
  }
  std::string out = pb.allocate(op.getResult());
  int64_t lda = transA ? m : k, ldb = transB ? k : n;
  std::string mnk = llvm::formatv("{0}x{1}x{2}", m, n, k).str();
  pb.traceBegin({"gemm",
                 batch > 1 ? std::to_string(batch) + "x[" + mnk + "]" : mnk,
                 pb.names.label(op)},
                "gemm", costFlops(op), costBytes(op));
  // bf16 operands: products on the CPU's bf16 units, accumulated in f32,
  // into an f32 or bf16 result.
  bool bf16 = isBF16(op.getLhs());
  pb.entry() << "  // batch=" << batch << " M=" << m << " N=" << n << " K=" << k
             << "\n  api->" << (bf16 ? "gemm_bf16" : "gemm") << "(dev, "
             << batch << ", " << transA << ", " << transB << ", " << m << ", "
             << n << ", " << k << ", " << lhs << ", " << lda << ", " << m * k
             << ", " << rhs << ", " << ldb << ", " << k * n << ", ";
  if (bf16)
    pb.entry() << out << ", " << abiElementType(op.getType()) << ", " << n
               << ", " << m * n << ");\n";
  else
    pb.entry() << "0.0f, " << out << ", " << n << ", " << m * n << ");\n";
  pb.traceEnd();
  for (const std::string &t : temps)
    pb.entry() << "  api->release(dev, " << t << ");\n";
  return success();
}

/// Rows (all dimensions but the last) and columns (the last).
static std::pair<int64_t, int64_t> rowsAndColumns(Value v) {
  ArrayRef<int64_t> s = shapeOf(v);
  return {product(s.drop_back()), s.back()};
}

static LogicalResult emitCallOf(TransposeOp op, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    os << "  api->transpose(dev, " << pb.buffer(op.getOperand()) << ", " << o
       << ", " << shapeOf(op.getResult()).size() << ", "
       << pb.staticShape(shapeOf(op.getOperand())) << ", "
       << pb.staticShape(op.getPermutation()) << ", "
       << (isBF16(op.getResult()) ? 2 : 4) << ");\n";
  });
  return success();
}

static LogicalResult emitCallOf(SoftmaxOp op, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    ArrayRef<int64_t> shape = shapeOf(op.getResult());
    os << "  api->" << (isBF16(op.getResult()) ? "softmax_bf16" : "softmax")
       << "(dev, " << pb.buffer(op.getOperand()) << ", " << o << ", "
       << shape.size() << ", " << pb.staticShape(shape) << ", " << op.getDim()
       << ");\n";
  });
  return success();
}

/// layer_norm and rms_norm: each row (all dimensions but the last) of
/// `operand` normalized, then scaled (and shifted) by the optional `affine`
/// operands.
static LogicalResult emitRowNorm(Operation *op, StringRef function,
                                 Value operand, ArrayRef<Value> affine,
                                 APFloat epsilon, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    auto [rows, cols] = rowsAndColumns(op->getResult(0));
    os << "  api->" << function << (isBF16(op->getResult(0)) ? "_bf16" : "")
       << "(dev, " << pb.buffer(operand) << ", ";
    for (Value v : affine)
      os << pb.optionalBuffer(v) << ", ";
    os << o << ", " << rows << ", " << cols << ", "
       << doubleLiteral(epsilon.convertToDouble()) << ");\n";
  });
  return success();
}
static LogicalResult emitCallOf(LayerNormOp op, ProgramBuilder &pb) {
  return emitRowNorm(op, "layer_norm", op.getOperand(),
                     {op.getScale(), op.getBias()}, op.getEpsilon(), pb);
}
static LogicalResult emitCallOf(RmsNormOp op, ProgramBuilder &pb) {
  return emitRowNorm(op, "rms_norm", op.getOperand(), {op.getScale()},
                     op.getEpsilon(), pb);
}

static LogicalResult emitCallOf(GroupNormOp op, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    ArrayRef<int64_t> s = shapeOf(op.getResult());
    os << "  api->group_norm" << (isBF16(op.getResult()) ? "_bf16" : "")
       << "(dev, " << pb.buffer(op.getOperand()) << ", "
       << pb.optionalBuffer(op.getScale()) << ", "
       << pb.optionalBuffer(op.getBias()) << ", " << o << ", " << s.front()
       << ", " << product(s.drop_front().drop_back()) << ", " << s.back()
       << ", " << op.getNumGroups() << ", "
       << doubleLiteral(op.getEpsilon().convertToDouble()) << ");\n";
  });
  return success();
}

static LogicalResult emitCallOf(AttentionOp op, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    ArrayRef<int64_t> q = shapeOf(op.getQuery()), k = shapeOf(op.getKey()),
                      v = shapeOf(op.getValue());
    int64_t maskB = 1, maskH = 1;
    if (op.getMask()) {
      maskB = shapeOf(op.getMask())[0];
      maskH = shapeOf(op.getMask())[1];
    }
    os << "  if (int32_t st = api->attention"
       << (isBF16(op.getQuery()) ? "_bf16" : "") << "(dev, "
       << pb.buffer(op.getQuery()) << ", " << pb.buffer(op.getKey()) << ", "
       << pb.buffer(op.getValue()) << ", " << pb.optionalBuffer(op.getMask())
       << ", " << maskB << ", " << maskH << ", " << o << ", " << q[0] << ", "
       << q[1] << ", " << q[2] << ", " << k[2] << ", " << q[3] << ", " << v[3]
       << ", " << doubleLiteral(op.getEffectiveScale()) << ")) return st;\n";
  });
  return success();
}

/// The mask's batch and head sizes (1 where it broadcasts, or absent).
static std::pair<int64_t, int64_t> maskExtent(Value mask) {
  if (!mask)
    return {1, 1};
  return {shapeOf(mask)[0], shapeOf(mask)[1]};
}

/// A static SdFlashBlocks of `blocks`; returns its name.
static std::string flashBlocks(ProgramBuilder &pb, FlashBlocksAttr blocks) {
  std::string name = "flash" + pb.freshTag();
  pb.statics() << "static const SdFlashBlocks " << name << " = {"
               << blocks.getBlockQ() << ", " << blocks.getBlockKvCompute()
               << ", " << blocks.getBlockKv() << ", " << blocks.getBlockQDkv()
               << ", " << blocks.getBlockKvDkv() << ", "
               << blocks.getBlockKvDkvCompute() << ", " << blocks.getBlockQDq()
               << ", " << blocks.getBlockKvDq() << ", "
               << (blocks.getUseFusedBwdKernel() ? 1 : 0) << "};\n";
  return name;
}

/// The arguments every flash-attention call shares after its buffers:
/// B, H, Sq, Skv, D, Dv, the scale and the block sizes.
static void flashShapeArguments(llvm::raw_ostream &os, ProgramBuilder &pb,
                                Value query, Value value, FloatAttr scale,
                                FlashBlocksAttr blocks) {
  ArrayRef<int64_t> q = shapeOf(query), v = shapeOf(value);
  os << q[0] << ", " << q[1] << ", " << q[2] << ", " << v[2] << ", " << q[3]
     << ", " << v[3] << ", " << doubleLiteral(scale.getValueAsDouble()) << ", &"
     << flashBlocks(pb, blocks) << ")) return st;\n";
}

static LogicalResult emitCallOf(FlashAttentionOp op, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    auto [maskB, maskH] = maskExtent(op.getMask());
    os << "  if (int32_t st = api->flash_attention"
       << (isBF16(op.getQuery()) ? "_bf16" : "") << "(dev, "
       << pb.buffer(op.getQuery()) << ", " << pb.buffer(op.getKey()) << ", "
       << pb.buffer(op.getValue()) << ", " << pb.optionalBuffer(op.getMask())
       << ", " << maskB << ", " << maskH << ", " << o << ", "
       << pb.buffer(op.getLogsumexp()) << ", ";
    flashShapeArguments(os, pb, op.getQuery(), op.getValue(), op.getScaleAttr(),
                        op.getBlocks());
  });
  return success();
}

/// The runtime's backward call with the cotangents `dq`, `dk` and `dv`
/// (C++ expressions; "nullptr" skips that pass).
template <typename OpTy>
static void emitFlashBackward(OpTy op, ProgramBuilder &pb,
                              llvm::raw_ostream &os, StringRef dq, StringRef dk,
                              StringRef dv) {
  auto [maskB, maskH] = maskExtent(op.getMask());
  os << "  if (int32_t st = api->flash_attention_backward"
     << (isBF16(op.getQuery()) ? "_bf16" : "") << "(dev, "
     << pb.buffer(op.getQuery()) << ", " << pb.buffer(op.getKey()) << ", "
     << pb.buffer(op.getValue()) << ", " << pb.optionalBuffer(op.getMask())
     << ", " << maskB << ", " << maskH << ", " << pb.buffer(op.getOut()) << ", "
     << pb.buffer(op.getLogsumexp()) << ", " << pb.buffer(op.getDOut()) << ", "
     << dq << ", " << dk << ", " << dv << ", ";
  flashShapeArguments(os, pb, op.getQuery(), op.getValue(), op.getScaleAttr(),
                      op.getBlocks());
}

static LogicalResult emitCallOf(FlashAttentionDqOp op, ProgramBuilder &pb) {
  // The fused backward of an earlier sd.flash_attention_dkv computed it.
  if (pb.hasBuffer(op.getResult())) {
    pb.entry() << "  // computed with the fused dK/dV pass\n";
    return success();
  }
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef dq) {
    emitFlashBackward(op, pb, os, dq, "nullptr", "nullptr");
  });
  return success();
}

/// The sd.flash_attention_dq whose dQ `op`'s dK/dV pass accumulates
/// (FlashAttentionDqOp::getFusingDkv), or null.
static FlashAttentionDqOp fusedDq(FlashAttentionDkvOp op) {
  for (Operation *user : op.getDOut().getUsers())
    if (auto dq = dyn_cast<FlashAttentionDqOp>(user))
      if (dq.getFusingDkv() == op)
        return dq;
  return {};
}

static LogicalResult emitCallOf(FlashAttentionDkvOp op, ProgramBuilder &pb) {
  FlashAttentionDqOp dq = fusedDq(op);
  if (dq)
    pb.allocate(dq.getResult());
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef dk) {
    emitFlashBackward(op, pb, os,
                      dq ? pb.buffer(dq.getResult()) : std::string("nullptr"),
                      dk, pb.buffer(op.getDValue()));
  });
  return success();
}

static LogicalResult emitCallOf(Conv2DOp op, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    os << "  if (int32_t st = api->"
       << (isBF16(op.getInput()) ? "conv2d_bf16" : "conv2d") << "(dev, "
       << pb.buffer(op.getInput()) << ", " << pb.buffer(op.getKernel()) << ", "
       << pb.optionalBuffer(op.getBias()) << ", " << o << ", "
       << pb.staticShape(shapeOf(op.getInput())) << ", "
       << pb.staticShape(shapeOf(op.getKernel())) << ", "
       << pb.staticShape(shapeOf(op.getResult())) << ", "
       << pb.staticShape(op.getStrides()) << ", "
       << pb.staticShape(op.getPadding()) << ", " << op.getGroups()
       << ")) return st;\n";
  });
  return success();
}

/// The convolution gradients: the runtime call `name` (its `_bf16` variant
/// on bf16 operands) with the operands `first` and `second`, the forward's
/// input, kernel and result shapes and the convolution's attributes.
/// The bf16 filter gradient also takes its result's type (an f32 or bf16
/// kernel).
template <typename OpTy>
static void emitConvGradCall(OpTy op, ProgramBuilder &pb, StringRef name,
                             Value first, Value second, Value input,
                             Value kernel, Value result) {
  bool bf16 = isBF16(first);
  constexpr bool resultType = std::is_same_v<OpTy, Conv2DFilterGradOp>;
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    os << "  if (int32_t st = api->" << name << (bf16 ? "_bf16" : "")
       << "(dev, " << pb.buffer(first) << ", " << pb.buffer(second) << ", " << o
       << ", ";
    if (bf16 && resultType)
      os << abiElementType(op->getResult(0).getType()) << ", ";
    os << pb.staticShape(shapeOf(input)) << ", "
       << pb.staticShape(shapeOf(kernel)) << ", "
       << pb.staticShape(shapeOf(result)) << ", "
       << pb.staticShape(op.getStrides()) << ", "
       << pb.staticShape(op.getPadding()) << ", " << op.getGroups()
       << ")) return st;\n";
  });
}

static LogicalResult emitCallOf(Conv2DInputGradOp op, ProgramBuilder &pb) {
  emitConvGradCall(op, pb, "conv2d_input_grad", op.getResultGrad(),
                   op.getKernel(), op.getInputGrad(), op.getKernel(),
                   op.getResultGrad());
  return success();
}

static LogicalResult emitCallOf(Conv2DFilterGradOp op, ProgramBuilder &pb) {
  emitConvGradCall(op, pb, "conv2d_filter_grad", op.getInput(),
                   op.getResultGrad(), op.getInput(), op.getKernelGrad(),
                   op.getResultGrad());
  return success();
}

/// The runtime's counter-based generator (normal: 1, uniform: 0) with its
/// two parameters.
static std::tuple<int, double, double> distributionOf(RngNormalOp op) {
  return {1, op.getMean().convertToDouble(), op.getStddev().convertToDouble()};
}
static std::tuple<int, double, double> distributionOf(RngUniformOp op) {
  return {0, op.getLow().convertToDouble(), op.getHigh().convertToDouble()};
}

/// Random numbers: the block at `offsets` (operands, one per dimension;
/// zeros when none) of a tensor of the global shape.
template <typename OpTy>
static LogicalResult emitRng(OpTy op, ProgramBuilder &pb) {
  pb.emitKernelCall(op, [&](llvm::raw_ostream &os, StringRef o) {
    ArrayRef<int64_t> shape = shapeOf(op.getResult());
    SmallVector<int64_t> global(shape);
    if (auto g = op.getGlobalShape())
      global = llvm::to_vector(*g);
    os << "  {\n    const int64_t offsets[] = {";
    if (op.getOffsets().empty()) {
      os << (shape.empty() ? "0"
                           : intList(SmallVector<int64_t>(shape.size(), 0)));
    } else {
      for (auto [i, v] : llvm::enumerate(op.getOffsets()))
        os << (i ? ", " : "") << "static_cast<int64_t>(__builtin_llround("
           << pb.buffer(v) << "[0]))";
    }
    auto [normal, a, b] = distributionOf(op);
    os << "};\n    api->rng(dev, " << normal << ", "
       << static_cast<uint64_t>(op.getSeed()) << "ull, " << o << ", "
       << shape.size() << ", " << pb.staticShape(shape) << ", "
       << pb.staticShape(global) << ", offsets, " << doubleLiteral(a) << ", "
       << doubleLiteral(b) << ");\n  }\n";
  });
  return success();
}
static LogicalResult emitCallOf(RngNormalOp op, ProgramBuilder &pb) {
  return emitRng(op, pb);
}
static LogicalResult emitCallOf(RngUniformOp op, ProgramBuilder &pb) {
  return emitRng(op, pb);
}

//===----------------------------------------------------------------------===//
// Memory moves
//===----------------------------------------------------------------------===//

/// The runtime moves the operand into a buffer of the other memory, which
/// the program then owns.
static LogicalResult emitMove(Operation *op, bool toHost, ProgramBuilder &pb) {
  Value out = op->getResult(0);
  std::string name = pb.freshBuffer();
  int64_t bytes = bufferBytes(out.getType());
  pb.traceBegin({op->getName().stripDialect().str(), shapeText(shapeOf(out)),
                 pb.names.label(op)},
                "offload", 0, costBytes(op));
  pb.entry() << "  if (int32_t st = api->move(dev, "
             << pb.buffer(op->getOperand(0)) << ", " << bytes << ", "
             << (toHost ? "SD_HOST_MEMORY" : "SD_DEVICE_MEMORY")
             << ", reinterpret_cast<void **>(&" << name << "), "
             << cString(pb.names.op(op)) << ")) return st;\n";
  pb.traceEnd();
  pb.adoptBuffer(out, name, toHost);
  return success();
}
static LogicalResult emitCallOf(OffloadOp op, ProgramBuilder &pb) {
  return emitMove(op, /*toHost=*/true, pb);
}
static LogicalResult emitCallOf(ReloadOp op, ProgramBuilder &pb) {
  return emitMove(op, /*toHost=*/false, pb);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// What the runtime's SdCollective descriptor says of a collective.
struct CollectiveCall {
  /// The SdCollectiveKind.
  const char *kind;
  /// Per dimension, the mesh axes it gathers, slices or scatters over
  /// (per-dimension collectives), else null.
  ArrayAttr dimAxes;
  /// The axes of the group (all_reduce, all_to_all, permute), else null.
  ArrayAttr axes;
  int64_t srcDim = 0, tgtDim = 0;
  /// all_to_all's subgroup_size, 0 for the whole group.
  int64_t subgroupSize = 0;
  /// Flattened (source, target) pairs of a permute.
  SmallVector<int64_t> pairs;
};

static CollectiveCall collectiveOf(AllGatherOp op) {
  return {"SD_ALL_GATHER", op.getDimAxes(), nullptr};
}
static CollectiveCall collectiveOf(AllSliceOp op) {
  return {"SD_ALL_SLICE", op.getDimAxes(), nullptr};
}
static CollectiveCall collectiveOf(ReduceScatterOp op) {
  return {"SD_REDUCE_SCATTER", op.getDimAxes(), nullptr};
}
static CollectiveCall collectiveOf(AllReduceOp op) {
  return {"SD_ALL_REDUCE", nullptr, op.getReductionAxes()};
}
static CollectiveCall collectiveOf(AllToAllOp op) {
  return {"SD_ALL_TO_ALL",
          nullptr,
          op.getAxes(),
          static_cast<int64_t>(op.getSrcDim()),
          static_cast<int64_t>(op.getTgtDim()),
          static_cast<int64_t>(op.getSubgroupSize().value_or(0)),
          {}};
}
template <typename OpTy,
          typename = std::enable_if_t<llvm::is_one_of<
              OpTy, CollectivePermuteOp, CollectivePermuteStartOp>::value>>
static CollectiveCall collectiveOf(OpTy op) {
  return {"SD_COLLECTIVE_PERMUTE",       nullptr, op.getAxes(), 0, 0, 0,
          llvm::to_vector(op.getPairs())};
}

/// The mesh axis indices of the axis names in `names` in `mesh`'s order.
static FailureOr<SmallVector<int64_t>> axisIndices(Operation *op, MeshAttr mesh,
                                                   ArrayAttr names) {
  SmallVector<int64_t> result;
  auto axes = mesh.getAxes();
  for (auto name : names.getAsValueRange<StringAttr>()) {
    auto it = llvm::find_if(
        axes, [&](MeshAxisAttr a) { return a.getName().getValue() == name; });
    if (it == axes.end())
      return op->emitOpError() << "names mesh axis \"" << name
                               << "\", which the mesh does not have";
    result.push_back(it - axes.begin());
  }
  return result;
}

/// The static SdCollective descriptor `coll<tag>` (and its pairs).
static void writeDescriptor(Operation *op, const CollectiveCall &c,
                            ArrayRef<SmallVector<int64_t>> dimAxes,
                            ArrayRef<int64_t> axes, const std::string &tag,
                            ProgramBuilder &pb) {
  ArrayRef<int64_t> inShape = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> outShape = shapeOf(op->getResult(0));
  llvm::raw_ostream &os = pb.statics();
  if (!c.pairs.empty())
    os << "static const int64_t pairs" << tag << "[] = {" << intList(c.pairs)
       << "};\n";
  os << "// " << pb.names.op(op) << "\n"
     << "static const SdCollective coll" << tag << " = {\n"
     << "    " << c.kind << ", " << abiElementType(op->getOperand(0).getType())
     << ", " << inShape.size() << ",\n"
     << "    /*in_shape=*/{" << intList(inShape) << "},\n"
     << "    /*out_shape=*/{" << intList(outShape) << "},\n"
     << "    /*num_dim_axes=*/{";
  for (auto [d, a] : llvm::enumerate(dimAxes))
    os << (d ? ", " : "") << a.size();
  os << "},\n    /*dim_axes=*/{";
  for (auto [d, a] : llvm::enumerate(dimAxes))
    os << (d ? ", " : "") << "{" << intList(a) << "}";
  os << "},\n    /*num_axes=*/" << axes.size() << ", /*axes=*/{"
     << intList(axes) << "},\n"
     << "    /*src_dim=*/" << c.srcDim << ", /*tgt_dim=*/" << c.tgtDim
     << ", /*subgroup_size=*/" << c.subgroupSize << ",\n"
     << "    /*num_pairs=*/" << c.pairs.size() / 2 << ", /*pairs=*/"
     << (c.pairs.empty() ? "nullptr" : "pairs" + tag) << ",\n"
     << "    /*name=*/" << cString(pb.names.op(op)) << "};\n";
}

/// What a collective's step writes besides its descriptor.
struct CollectiveStep {
  /// The runtime call: "collective", "collective_start" or
  /// "collective_done".
  StringRef call = "collective";
  /// The op whose descriptor it passes (a done passes its start's).
  Operation *described;
};

/// A collective: a static descriptor and one runtime call, in a span named
/// by the op, the axes it communicates over and what one device sends (the
/// cost model's ring bytes): "all_reduce fsdp,data 4x8 (dit.mlir:12)". A
/// done fills its start's buffer and sends nothing.
static LogicalResult emitCollective(Operation *op, FlatSymbolRefAttr meshRef,
                                    const CollectiveCall &c,
                                    const CollectiveStep &how,
                                    ProgramBuilder &pb) {
  Operation *described = how.described;
  Value in = described->getOperand(0), out = op->getResult(0);
  MeshAttr mesh = pb.lookupMesh(op, meshRef);
  if (!mesh)
    return failure();
  bool done = how.call == "collective_done";
  std::string bufferName;
  if (done) {
    bufferName = pb.buffer(op->getOperand(0));
    pb.setBuffer(out, bufferName);
  } else {
    bufferName = pb.allocate(out);
  }
  std::string tag = pb.freshTag();
  ArrayRef<int64_t> inShape = shapeOf(in);
  if (inShape.size() > 8)
    return op->emitOpError("has rank ")
           << inShape.size() << "; the runtime supports rank 8 at most";
  SmallVector<SmallVector<int64_t>> dimAxes(inShape.size());
  SmallVector<int64_t> axes;
  if (c.dimAxes) {
    for (auto [d, a] : llvm::enumerate(c.dimAxes)) {
      auto idx = axisIndices(op, mesh, cast<ArrayAttr>(a));
      if (failed(idx))
        return failure();
      dimAxes[d] = *idx;
    }
  } else {
    auto idx = axisIndices(op, mesh, c.axes);
    if (failed(idx))
      return failure();
    axes = *idx;
  }
  writeDescriptor(described, c, dimAxes, axes, tag, pb);
  SmallVector<int64_t> used(axes);
  for (ArrayRef<int64_t> a : dimAxes)
    used.append(a.begin(), a.end());
  SmallVector<std::string> axisNames;
  for (int64_t a : used) {
    std::string axisName = mesh.getAxes()[a].getName().getValue().str();
    if (!llvm::is_contained(axisNames, axisName))
      axisNames.push_back(axisName);
  }
  int64_t sent = 0;
  if (auto cost = dyn_cast<CostOpInterface>(op))
    if (std::optional<CommunicationInfo> info =
            cost.getCommunication(pb.getSymbols()))
      sent = getRingBytesPerDevice(info->pattern, info->tensorBytes,
                                   info->groupSize);
  pb.traceBegin({op->getName().stripDialect().str(), llvm::join(axisNames, ","),
                 shapeText(inShape), pb.names.label(op)},
                "collective", costFlops(op), sent);
  pb.entry() << "  if (int32_t st = api->" << how.call << "(dev, &coll" << tag
             << ", ";
  if (!done)
    pb.entry() << pb.buffer(in) << ", ";
  pb.entry() << bufferName << ")) return st;\n";
  pb.traceEnd();
  return success();
}

/// Every collective that `collectiveOf` describes.
template <typename OpTy,
          typename = decltype(collectiveOf(std::declval<OpTy>()))>
static LogicalResult emitCallOf(OpTy op, ProgramBuilder &pb) {
  return emitCollective(op, op.getMeshAttr(), collectiveOf(op),
                        {"collective", op}, pb);
}

/// The halves of an asynchronous permute: the start issues it into its
/// result's buffer, the done completes that buffer.
static LogicalResult emitCallOf(CollectivePermuteStartOp op,
                                ProgramBuilder &pb) {
  return emitCollective(op, op.getMeshAttr(), collectiveOf(op),
                        {"collective_start", op}, pb);
}
static LogicalResult emitCallOf(CollectivePermuteDoneOp op,
                                ProgramBuilder &pb) {
  CollectivePermuteStartOp start = op.getStart();
  return emitCollective(op, start.getMeshAttr(), collectiveOf(start),
                        {"collective_done", start}, pb);
}

/// The device's linear index along `axes` of the mesh.
static LogicalResult emitCallOf(AxisIndexOp op, ProgramBuilder &pb) {
  MeshAttr mesh = pb.lookupMesh(op, op.getMeshAttr());
  if (!mesh)
    return failure();
  std::string bufferName = pb.allocate(op.getResult());
  std::string tag = pb.freshTag();
  auto axes = axisIndices(op, mesh, op.getAxes());
  if (failed(axes))
    return failure();
  pb.statics() << "static const int32_t axes" << tag << "[] = {"
               << (axes->empty() ? "0" : intList(*axes)) << "};\n";
  pb.entry() << "  " << bufferName << "[0] = "
             << (isBF16(op.getResult()) ? "sd_f32_to_bf16"
                                        : "static_cast<float>")
             << "(api->axis_index(dev, axes" << tag << ", " << axes->size()
             << "));\n";
  return success();
}

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

namespace {

/// The library calls whose runtime functions take bf16 buffers themselves
/// (the others compute in f32 between converts). The flash ops' verifiers
/// give q, k, v, out, d_out and the gradients one element type (the mask is
/// i1, lse f32): flash_attention_bf16 and its backward take them all. The
/// convolutions' verifiers give operands and results one element type but
/// for the filter gradient, which may be f32 from bf16 operands:
/// conv2d_filter_grad_bf16 takes its type.
template <typename OpTy> constexpr bool kCallTakesBF16 = false;
template <> constexpr bool kCallTakesBF16<DotGeneralOp> = true;
template <> constexpr bool kCallTakesBF16<TransposeOp> = true;
template <> constexpr bool kCallTakesBF16<SoftmaxOp> = true;
template <> constexpr bool kCallTakesBF16<LayerNormOp> = true;
template <> constexpr bool kCallTakesBF16<RmsNormOp> = true;
template <> constexpr bool kCallTakesBF16<GroupNormOp> = true;
template <> constexpr bool kCallTakesBF16<AttentionOp> = true;
template <> constexpr bool kCallTakesBF16<FlashAttentionOp> = true;
template <> constexpr bool kCallTakesBF16<FlashAttentionDqOp> = true;
template <> constexpr bool kCallTakesBF16<FlashAttentionDkvOp> = true;
template <> constexpr bool kCallTakesBF16<Conv2DOp> = true;
template <> constexpr bool kCallTakesBF16<Conv2DInputGradOp> = true;
template <> constexpr bool kCallTakesBF16<Conv2DFilterGradOp> = true;

/// Library calls, collectives and memory moves: `emitCallOf` writes the
/// op's step.
template <typename OpTy, LoweringKind Kind>
struct CallModel : Base<CallModel<OpTy, Kind>, OpTy> {
  LoweringKind getLoweringKind(Operation *) const { return Kind; }
  bool takesBF16(Operation *) const {
    return Kind != LoweringKind::Library || kCallTakesBF16<OpTy>;
  }
  LogicalResult emitCall(Operation *op, ProgramBuilder &program) const {
    return emitCallOf(cast<OpTy>(op), program);
  }
};

/// A transpose that keeps the last dimension in place moves whole rows: an
/// index map, a copy that the slices and reshapes before it (attention
/// heads split from a projection) fuse into; sd-lower-to-openmp keeps it
/// out of its users' loops. Any other transpose is the runtime's blocked
/// transpose.
struct TransposeModel : Base<TransposeModel, TransposeOp> {
  static bool movesRows(TransposeOp op) {
    ArrayRef<int64_t> perm = op.getPermutation();
    return !perm.empty() &&
           perm.back() == static_cast<int64_t>(perm.size()) - 1;
  }
  LoweringKind getLoweringKind(Operation *op) const {
    return movesRows(cast<TransposeOp>(op)) ? LoweringKind::IndexMap
                                            : LoweringKind::Library;
  }
  bool takesBF16(Operation *) const { return true; }
  void getOperandPositions(Operation *op, KernelBuilder &kernel,
                           const Position &pos,
                           SmallVectorImpl<OperandPosition> &positions) const {
    auto transpose = cast<TransposeOp>(op);
    // Result dimension k is the operand's dimension perm[k].
    SmallVector<Index> out = kernel.dimsOf(pos, shapeOf(transpose.getResult()));
    SmallVector<Index> in(out.size());
    for (auto [k, d] : llvm::enumerate(transpose.getPermutation()))
      in[d] = out[k];
    Position p;
    p.dims = std::move(in);
    positions.push_back({transpose.getOperand(), p});
  }
  std::string buildScalar(Operation *, KernelBuilder &, const Position &,
                          ArrayRef<std::string> operands) const {
    return operands[0];
  }
  LogicalResult emitCall(Operation *op, ProgramBuilder &program) const {
    return emitCallOf(cast<TransposeOp>(op), program);
  }
};

/// A permute's done: a call that completes its start's buffer.
struct PermuteDoneModel : Base<PermuteDoneModel, CollectivePermuteDoneOp> {
  LoweringKind getLoweringKind(Operation *) const {
    return LoweringKind::Collective;
  }
  int64_t getResultBufferOperand(Operation *) const { return 0; }
  LogicalResult emitCall(Operation *op, ProgramBuilder &program) const {
    return emitCallOf(cast<CollectivePermuteDoneOp>(op), program);
  }
};

} // namespace

template <LoweringKind Kind, typename... OpTys>
static void attachCalls(MLIRContext *context) {
  (OpTys::template attachInterface<CallModel<OpTys, Kind>>(*context), ...);
}

void mlir::sd::openmp::attachCallModels(MLIRContext *context) {
  TransposeOp::attachInterface<TransposeModel>(*context);
  attachCalls<LoweringKind::Library, DotGeneralOp, SoftmaxOp, LayerNormOp,
              RmsNormOp, GroupNormOp, AttentionOp, FlashAttentionOp,
              FlashAttentionDqOp, FlashAttentionDkvOp, Conv2DOp,
              Conv2DInputGradOp, Conv2DFilterGradOp, RngNormalOp, RngUniformOp>(
      context);
  attachCalls<LoweringKind::Collective, AllGatherOp, AllSliceOp,
              ReduceScatterOp, AllReduceOp, AllToAllOp, CollectivePermuteOp,
              CollectivePermuteStartOp, AxisIndexOp>(context);
  CollectivePermuteDoneOp::attachInterface<PermuteDoneModel>(*context);
  attachCalls<LoweringKind::Memory, OffloadOp, ReloadOp>(context);
}
