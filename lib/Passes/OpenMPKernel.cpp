//===- OpenMPKernel.cpp - fused kernels as C++ loop nests -----------------===//
//
// One fused kernel of the OpenMP lowering (OpenMPEmitter.cpp writes the rest
// of the program) becomes a `static` function: a loop nest over its index
// space (its output, or a reduction's input) computing every fused op at
// each point.
//
// Indices. Every value inside a kernel is read at a *position*: one index
// per dimension, or a row-major linear offset (what reshape produces).
// Indices are affine in the loop variables where they can be (elementwise
// ops pass them through, broadcast drops or zeroes them, slices scale and
// shift them); reshape turns a position into a linear offset, which a
// buffer read uses directly and which is split back into dimensions
// symbolically when the strides allow, with `/` and `%` only when they do
// not. Pad and concat read their operands at clamped indices and select.
// When every index of a kernel is affine, adjacent loops that every access
// walks contiguously collapse into one; the outer loop runs in parallel
// when the kernel is large, the inner one is `omp simd`.
//
// Reductions run their kept dimensions in parallel and each output's
// reduced dimensions sequentially in a fixed order (double accumulators);
// a reduction to few outputs splits its input into a fixed number of
// chunks, independent of the team size, added in order.
//
//===----------------------------------------------------------------------===//

#include "OpenMPKernel.h"

#include "sd/IR/SDOps.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

namespace {

/// Loops of at least this many iterations (in total) run in parallel.
constexpr int64_t kParallelWork = 16384;
/// Reductions to fewer outputs than this split their input into this many
/// chunks, whatever the team size, so results do not depend on it.
constexpr int64_t kFewOutputs = 16;
constexpr int64_t kReduceChunks = 16;

//===----------------------------------------------------------------------===//
// Positions
//===----------------------------------------------------------------------===//

/// An integer index: affine in the loop variables (`coef`, `k`), or an
/// opaque C++ expression.
struct Index {
  bool affine = true;
  SmallVector<int64_t> coef;
  int64_t k = 0;
  std::string expr;

  static Index constant(unsigned loops, int64_t k) {
    Index i;
    i.coef.assign(loops, 0);
    i.k = k;
    return i;
  }
  static Index opaque(std::string expr) {
    Index i;
    i.affine = false;
    i.expr = std::move(expr);
    return i;
  }
};

/// Where a value is read: per dimension, or as a row-major offset.
struct Position {
  bool linear = false;
  Index offset;
  SmallVector<Index> dims;
};

Index scaleAdd(const Index &a, int64_t scale, int64_t add);

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

class KernelEmitter {
public:
  KernelEmitter(Operation *root, ArrayRef<std::string> fusedOps)
      : root(root), id(root->getAttrOfType<StringAttr>(kKernelAttrName)),
        fusedOps(fusedOps) {}

  /// Writes the kernel function named `name` into `out`; fills the inputs
  /// and whether each is read only at the output position.
  LogicalResult emit(StringRef name, std::string &out,
                     SmallVectorImpl<Value> &inputs,
                     SmallVectorImpl<bool> &identity);

private:
  struct Access {
    unsigned input;
    Index offset;
  };
  LogicalResult generate(bool collapse);
  void setupLoops();
  std::string gen(Value v, const Position &pos);
  std::string emitLeaf(Value v, const Position &pos);
  std::string emitOp(Operation *op, const Position &pos,
                     ArrayRef<std::string> operands);
  SmallVector<std::pair<Value, Position>> operandPositions(Operation *op,
                                                           const Position &pos);
  SmallVector<Index> dimsOf(const Position &pos, ArrayRef<int64_t> shape);
  Index offsetOf(const Position &pos, ArrayRef<int64_t> shape);
  std::string print(const Index &i);
  std::string key(Value v, const Position &pos);
  std::string fresh() { return "v" + std::to_string(nextVar++); }
  Index loopIndex(unsigned d) {
    Index i = Index::constant(loopShape.size(), 0);
    i.coef[d] = 1;
    return i;
  }
  Position identityPosition() {
    Position p;
    for (unsigned d = 0; d < loopShape.size(); ++d)
      p.dims.push_back(loopIndex(d));
    return p;
  }
  void note(const Index &i) {
    if (i.affine)
      affines.push_back(i);
    else
      hasOpaque = true;
  }

  /// Whether this kernel computes `v` itself rather than reading a buffer.
  bool computesInline(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    auto k = def->getAttrOfType<StringAttr>(kKernelAttrName);
    return k && (k == id || k.getValue() == kInlineKernel);
  }

  Operation *root;
  StringAttr id;
  /// The fused ops, named, for the kernel's comment.
  ArrayRef<std::string> fusedOps;
  bool isReduction = false;
  /// The index space and, per loop, whether it is reduced.
  SmallVector<int64_t> loopShape;
  SmallVector<bool> reduced;
  /// Collapsed loops: groups of consecutive loops, outermost first.
  SmallVector<SmallVector<unsigned>> groups;

  // Per generation.
  std::string body;
  std::map<std::string, std::string> memo;
  SmallVector<Value> inputs;
  DenseMap<Value, unsigned> inputIndex;
  SmallVector<Access> accesses;
  SmallVector<Index> affines;
  bool hasOpaque = false;
  int64_t nextVar = 0;
};

Index scaleAdd(const Index &a, int64_t scale, int64_t add) {
  if (!a.affine)
    return Index::opaque("((" + a.expr + ") * " + std::to_string(scale) +
                         " + " + std::to_string(add) + ")");
  Index r = a;
  for (int64_t &c : r.coef)
    c *= scale;
  r.k = r.k * scale + add;
  return r;
}

std::string KernelEmitter::print(const Index &i) {
  if (!i.affine)
    return i.expr;
  std::string s;
  for (auto [g, group] : llvm::enumerate(groups)) {
    int64_t c = i.coef[group.back()];
    if (c == 0)
      continue;
    if (!s.empty())
      s += " + ";
    std::string var = "j" + std::to_string(g);
    s += c == 1 ? var : std::to_string(c) + " * " + var;
  }
  if (i.k != 0 || s.empty())
    s += (s.empty() ? "" : " + ") + std::to_string(i.k);
  return s;
}

std::string KernelEmitter::key(Value v, const Position &pos) {
  std::string s = std::to_string(
      reinterpret_cast<uintptr_t>(v.getAsOpaquePointer()));
  auto add = [&](const Index &i) {
    if (!i.affine) {
      s += "|" + i.expr;
      return;
    }
    s += "|" + std::to_string(i.k);
    for (int64_t c : i.coef)
      s += "," + std::to_string(c);
  };
  s += pos.linear ? "L" : "D";
  if (pos.linear)
    add(pos.offset);
  for (const Index &i : pos.dims)
    add(i);
  return s;
}

Index KernelEmitter::offsetOf(const Position &pos, ArrayRef<int64_t> shape) {
  if (pos.linear)
    return pos.offset;
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  Index sum = Index::constant(loopShape.size(), 0);
  std::string expr;
  bool affine = true;
  for (auto [d, i] : llvm::enumerate(pos.dims)) {
    if (shape[d] == 1)
      continue;
    if (i.affine && affine) {
      for (unsigned l = 0; l < loopShape.size(); ++l)
        sum.coef[l] += i.coef[l] * strides[d];
      sum.k += i.k * strides[d];
    } else {
      affine = false;
    }
    expr += (expr.empty() ? "" : " + ") + ("(" + print(i) + ") * " +
                                           std::to_string(strides[d]));
  }
  if (affine)
    return sum;
  return Index::opaque(expr.empty() ? "0" : expr);
}

/// Splits a linear offset into the dimensions of `shape`: symbolically when
/// every loop term stays within one dimension's digit, else with / and %.
SmallVector<Index> KernelEmitter::dimsOf(const Position &pos,
                                         ArrayRef<int64_t> shape) {
  if (!pos.linear)
    return pos.dims;
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  SmallVector<Index> dims;
  const Index &lin = pos.offset;
  for (unsigned d = 0; d < shape.size(); ++d) {
    int64_t st = strides[d], sz = shape[d];
    if (sz == 1) {
      dims.push_back(Index::constant(loopShape.size(), 0));
      continue;
    }
    bool ok = lin.affine && lin.k == 0;
    Index r = Index::constant(loopShape.size(), 0);
    int64_t lowMax = 0, midMax = 0;
    for (unsigned l = 0; ok && l < loopShape.size(); ++l) {
      int64_t c = lin.coef[l], span = c * (loopShape[l] - 1);
      if (c == 0 || c % (st * sz) == 0)
        continue;
      if (c % st == 0) {
        r.coef[l] = c / st;
        midMax += span / st;
      } else {
        lowMax += span;
      }
    }
    if (ok && lowMax < st && midMax < sz) {
      dims.push_back(r);
      continue;
    }
    std::string l = print(lin);
    dims.push_back(Index::opaque("((" + l + ") / " + std::to_string(st) +
                                 " % " + std::to_string(sz) + ")"));
  }
  return dims;
}

/// Clamps an index into [0, size): reads of pad and concat operands outside
/// their bounds happen but are discarded.
static Index clampIndex(const std::string &e, int64_t size) {
  return Index::opaque("std::min<int64_t>(std::max<int64_t>(" + e +
                       ", 0), " + std::to_string(size - 1) + ")");
}

SmallVector<std::pair<Value, Position>>
KernelEmitter::operandPositions(Operation *op, const Position &pos) {
  SmallVector<std::pair<Value, Position>> result;
  auto perDim = [&](Value v, SmallVector<Index> dims) {
    Position p;
    p.dims = std::move(dims);
    result.push_back({v, p});
  };
  Value out = op->getResult(0);
  ArrayRef<int64_t> outShape = shapeOf(out);
  llvm::TypeSwitch<Operation *>(op)
      .Case<ReshapeOp>([&](ReshapeOp r) {
        Position p;
        p.linear = true;
        p.offset = offsetOf(pos, outShape);
        result.push_back({r.getOperand(), p});
      })
      .Case<BroadcastInDimOp>([&](BroadcastInDimOp b) {
        SmallVector<Index> in = dimsOf(pos, outShape), dims;
        ArrayRef<int64_t> opShape = shapeOf(b.getOperand());
        for (auto [i, d] : llvm::enumerate(b.getDims()))
          dims.push_back(opShape[i] == 1 && outShape[d] != 1
                             ? Index::constant(loopShape.size(), 0)
                             : in[d]);
        perDim(b.getOperand(), dims);
      })
      .Case<SliceOp>([&](SliceOp s) {
        SmallVector<Index> in = dimsOf(pos, outShape), dims;
        for (auto [d, i] : llvm::enumerate(in))
          dims.push_back(scaleAdd(i, s.getStrides()[d], s.getStart()[d]));
        perDim(s.getOperand(), dims);
      })
      .Case<PadOp>([&](PadOp p) {
        SmallVector<Index> in = dimsOf(pos, outShape), dims;
        ArrayRef<int64_t> opShape = shapeOf(p.getOperand());
        for (auto [d, i] : llvm::enumerate(in)) {
          if (p.getLow()[d] == 0 && p.getHigh()[d] == 0) {
            dims.push_back(i);
            continue;
          }
          dims.push_back(clampIndex("(" + print(i) + ") - " +
                                        std::to_string(p.getLow()[d]),
                                    opShape[d]));
        }
        perDim(p.getOperand(), dims);
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        SmallVector<Index> in = dimsOf(pos, outShape);
        int64_t dim = c.getDim(), offset = 0;
        for (Value input : c.getInputs()) {
          SmallVector<Index> dims = in;
          int64_t size = shapeOf(input)[dim];
          dims[dim] = clampIndex("(" + print(in[dim]) + ") - " +
                                     std::to_string(offset),
                                 size);
          offset += size;
          perDim(input, dims);
        }
      })
      .Case<UpsampleNearestOp>([&](UpsampleNearestOp u) {
        SmallVector<Index> dims = dimsOf(pos, outShape);
        for (int d = 0; d < 2; ++d)
          dims[1 + d] = Index::opaque("((" + print(dims[1 + d]) + ") / " +
                                      std::to_string(u.getScale()[d]) + ")");
        perDim(u.getOperand(), dims);
      })
      .Case<ReduceSumOp, ReduceMaxOp, ReduceMeanOp, MseLossOp>([&](auto) {
        for (Value v : op->getOperands())
          result.push_back({v, pos});
      })
      .Default([&](Operation *) {
        // Elementwise: every operand at the same position.
        for (Value v : op->getOperands())
          result.push_back({v, pos});
      });
  return result;
}

std::string KernelEmitter::emitLeaf(Value v, const Position &pos) {
  auto [it, inserted] = inputIndex.try_emplace(v, inputs.size());
  if (inserted)
    inputs.push_back(v);
  Index off = offsetOf(pos, shapeOf(v));
  note(off);
  accesses.push_back({it->second, off});
  std::string var = fresh();
  std::string read =
      "in" + std::to_string(it->second) + "[" + print(off) + "]";
  if (isPred(v))
    body += "      const bool " + var + " = " + read + " != 0.0f;\n";
  else
    body += "      const float " + var + " = " + read + ";\n";
  return var;
}

std::string KernelEmitter::emitOp(Operation *op, const Position &pos,
                                  ArrayRef<std::string> a) {
  std::string e;
  auto unary = [&](StringRef f) { e = (f + "(" + a[0] + ")").str(); };
  auto binary = [&](StringRef o) { e = a[0] + " " + o.str() + " " + a[1]; };
  Value out = op->getResult(0);
  llvm::TypeSwitch<Operation *>(op)
      .Case<NegOp>([&](auto) { e = "-" + a[0]; })
      .Case<ExpOp>([&](auto) { unary("sd_exp"); })
      .Case<LogOp>([&](auto) { unary("std::log"); })
      .Case<SqrtOp>([&](auto) { unary("std::sqrt"); })
      .Case<RsqrtOp>([&](auto) { e = "1.0f / std::sqrt(" + a[0] + ")"; })
      .Case<TanhOp>([&](auto) { unary("sd_tanh"); })
      .Case<SinOp>([&](auto) { unary("std::sin"); })
      .Case<CosOp>([&](auto) { unary("std::cos"); })
      .Case<ErfOp>([&](auto) { unary("sd_erf"); })
      .Case<SigmoidOp>([&](auto) { unary("sd_sigmoid"); })
      .Case<SiluOp>([&](auto) { e = a[0] + " * sd_sigmoid(" + a[0] + ")"; })
      .Case<GeluOp>([&](GeluOp g) {
        unary(g.getApproximate() ? "sd_gelu_tanh" : "sd_gelu_erf");
      })
      .Case<AddOp>([&](auto) { binary("+"); })
      .Case<SubOp>([&](auto) { binary("-"); })
      .Case<MulOp>([&](auto) { binary("*"); })
      .Case<DivOp>([&](auto) { binary("/"); })
      .Case<MaxOp>([&](auto) { e = "sd_max(" + a[0] + ", " + a[1] + ")"; })
      .Case<MinOp>([&](auto) { e = "sd_min(" + a[0] + ", " + a[1] + ")"; })
      .Case<PowOp>([&](auto) { e = "std::pow(" + a[0] + ", " + a[1] + ")"; })
      .Case<CompareOp>([&](CompareOp c) {
        static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
        binary(ops[static_cast<int>(c.getDirection())]);
      })
      .Case<SelectOp>(
          [&](auto) { e = a[0] + " ? " + a[1] + " : " + a[2]; })
      .Case<ConvertOp>([&](ConvertOp c) {
        e = isPred(c.getOperand()) ? "(" + a[0] + " ? 1.0f : 0.0f)" : a[0];
      })
      .Case<ConstantOp>([&](ConstantOp c) {
        auto dense = cast<DenseElementsAttr>(c.getValue());
        e = floatLiteral(dense.getSplatValue<APFloat>().convertToDouble());
      })
      .Case<IotaOp>([&](IotaOp i) {
        SmallVector<Index> dims = dimsOf(pos, shapeOf(out));
        note(dims[i.getDim()]);
        e = "static_cast<float>(" + print(dims[i.getDim()]) + ")";
      })
      .Case<PadOp>([&](PadOp p) {
        hasOpaque = true;
        SmallVector<Index> dims = dimsOf(pos, shapeOf(out));
        ArrayRef<int64_t> opShape = shapeOf(p.getOperand());
        std::string cond;
        for (auto [d, i] : llvm::enumerate(dims)) {
          int64_t lo = p.getLow()[d];
          if (lo == 0 && p.getHigh()[d] == 0)
            continue;
          std::string x = "(" + print(i) + ")";
          cond += (cond.empty() ? "" : " && ") + x + " >= " +
                  std::to_string(lo) + " && " + x + " < " +
                  std::to_string(lo + opShape[d]);
        }
        e = cond.empty() ? a[0]
                         : "(" + cond + ") ? " + a[0] + " : " +
                               floatLiteral(p.getPaddingValue().convertToDouble());
      })
      .Case<ConcatOp>([&](ConcatOp c) {
        hasOpaque = true;
        SmallVector<Index> dims = dimsOf(pos, shapeOf(out));
        std::string x = "(" + print(dims[c.getDim()]) + ")";
        int64_t offset = 0;
        auto inputs = c.getInputs();
        for (unsigned k = 0; k + 1 < inputs.size(); ++k) {
          offset += shapeOf(inputs[k])[c.getDim()];
          e += x + " < " + std::to_string(offset) + " ? " + a[k] + " : ";
        }
        e += a.back();
      })
      .Default([&](Operation *) {
        // Index ops and identities: the operand read at the mapped position.
        e = a[0];
      });
  std::string var = fresh();
  body += std::string("      const ") + (isPred(out) ? "bool " : "float ") +
          var + " = " + e + ";\n";
  return var;
}

std::string KernelEmitter::gen(Value rootValue, const Position &rootPos) {
  struct Item {
    Value v;
    Position pos;
    bool expanded;
  };
  std::vector<Item> stack;
  stack.push_back({rootValue, rootPos, false});
  while (!stack.empty()) {
    Value v = stack.back().v;
    Position pos = stack.back().pos;
    std::string k = key(v, pos);
    if (memo.count(k)) {
      stack.pop_back();
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (!computesInline(v)) {
      memo[k] = emitLeaf(v, pos);
      stack.pop_back();
      continue;
    }
    SmallVector<std::pair<Value, Position>> operands =
        operandPositions(def, pos);
    if (!stack.back().expanded) {
      stack.back().expanded = true;
      for (auto &[ov, op] : llvm::reverse(operands))
        stack.push_back({ov, op, false});
      continue;
    }
    SmallVector<std::string> names;
    for (auto &[ov, op] : operands)
      names.push_back(memo[key(ov, op)]);
    memo[k] = emitOp(def, pos, names);
    stack.pop_back();
  }
  return memo[key(rootValue, rootPos)];
}

void KernelEmitter::setupLoops() {
  isReduction = classifyForOpenMP(root) == OpenMPOpClass::Reduction;
  if (!isReduction) {
    loopShape = llvm::to_vector(shapeOf(root->getResult(0)));
    reduced.assign(loopShape.size(), false);
    return;
  }
  loopShape = llvm::to_vector(shapeOf(root->getOperand(0)));
  reduced.assign(loopShape.size(), isa<MseLossOp>(root));
  if (auto dims = root->getAttrOfType<DenseI64ArrayAttr>("dims"))
    for (int64_t d : dims.asArrayRef())
      reduced[d] = true;
}

LogicalResult KernelEmitter::generate(bool collapse) {
  body.clear();
  memo.clear();
  inputs.clear();
  inputIndex.clear();
  accesses.clear();
  affines.clear();
  hasOpaque = false;
  nextVar = 0;
  if (!collapse) {
    groups.clear();
    for (unsigned d = 0; d < loopShape.size(); ++d)
      groups.push_back({d});
  }
  Position pos = identityPosition();
  std::string result;
  if (auto mse = dyn_cast<MseLossOp>(root)) {
    std::string p = gen(mse.getPredictions(), pos);
    std::string t = gen(mse.getTargets(), pos);
    std::string d = fresh();
    body += "      const float " + d + " = " + p + " - " + t + ";\n";
    result = fresh();
    body += "      const float " + result + " = " + d + " * " + d + ";\n";
  } else {
    Value v = isReduction ? root->getOperand(0) : root->getResult(0);
    if (isReduction)
      result = gen(v, pos);
    else
      result = gen(v, pos);
  }
  memo["__result"] = result;
  // The output offset: row-major over the kept loops.
  Index out = Index::constant(loopShape.size(), 0);
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(loopShape.size()) - 1; d >= 0; --d) {
    if (reduced[d])
      continue;
    out.coef[d] = stride;
    stride *= loopShape[d];
  }
  note(out);
  return success();
}

LogicalResult KernelEmitter::emit(StringRef name, std::string &out,
                                  SmallVectorImpl<Value> &inputsOut,
                                  SmallVectorImpl<bool> &identity) {
  setupLoops();
  if (failed(generate(/*collapse=*/false)))
    return failure();
  // Collapse adjacent loops of one kind that every access walks
  // contiguously.
  if (!hasOpaque && !loopShape.empty()) {
    SmallVector<SmallVector<unsigned>> merged;
    merged.push_back({0});
    for (unsigned d = 1; d < loopShape.size(); ++d) {
      unsigned prev = merged.back().back();
      bool ok = reduced[prev] == reduced[d];
      for (const Index &a : affines)
        ok = ok && a.coef[prev] == a.coef[d] * loopShape[d];
      if (ok)
        merged.back().push_back(d);
      else
        merged.push_back({d});
    }
    if (merged.size() < loopShape.size()) {
      groups = merged;
      if (failed(generate(/*collapse=*/true)))
        return failure();
    }
  }
  SmallVector<int64_t> extents;
  for (const SmallVector<unsigned> &g : groups) {
    int64_t e = 1;
    for (unsigned d : g)
      e *= loopShape[d];
    extents.push_back(e);
  }
  Index outIndex = affines.back();
  std::string outOffset = print(outIndex);

  llvm::raw_string_ostream f(out);
  f << "\n// " << name << ": "
    << root->getAttrOfType<StringAttr>(kKernelKindAttrName).getValue()
    << " over [" << intList(loopShape) << "]\n";
  for (const std::string &s : fusedOps)
    f << "//   " << s << "\n";
  f << "static void " << name << "(";
  for (unsigned i = 0; i < inputs.size(); ++i)
    f << "const float *in" << i << ", ";
  f << "float *out) {\n";
  std::string result = memo["__result"];
  Value resultValue = root->getResult(0);
  int64_t total = product(loopShape);
  bool parallel = total >= kParallelWork;

  if (!isReduction) {
    std::string store = isPred(resultValue) ? "(" + result + " ? 1.0f : 0.0f)"
                                            : result;
    if (groups.empty()) {
      f << "  {\n" << body << "      out[0] = " << store << ";\n  }\n}\n";
    } else {
      unsigned n = groups.size();
      for (unsigned g = 0; g < n; ++g) {
        std::string indent(2 + 2 * g, ' ');
        bool inner = g + 1 == n;
        if (g == 0 && parallel) {
          if (n == 1)
            f << indent << "#pragma omp parallel for simd schedule(static)\n";
          else if (n >= 3 && extents[0] < 64)
            f << indent
              << "#pragma omp parallel for collapse(2) schedule(static)\n";
          else
            f << indent << "#pragma omp parallel for schedule(static)\n";
        } else if (inner) {
          f << indent << "#pragma omp simd\n";
        }
        f << indent << "for (int64_t j" << g << " = 0; j" << g << " < "
          << extents[g] << "; ++j" << g << ") {\n";
      }
      f << body << "      out[" << outOffset << "] = " << store << ";\n";
      for (unsigned g = n; g > 0; --g)
        f << std::string(2 * g, ' ') << "}\n";
      f << "}\n";
    }
  } else {
    // Reduction: P = leading kept loops (parallel), T = the rest.
    unsigned n = groups.size(), p = 0;
    while (p < n && !reduced[groups[p].front()])
      ++p;
    int64_t outputs = 1, inner = 1;
    for (unsigned g = 0; g < p; ++g)
      outputs *= extents[g];
    for (unsigned g = p; g < n; ++g)
      if (!reduced[groups[g].front()])
        inner *= extents[g];
    bool isMax = isa<ReduceMaxOp>(root);
    double scale = 1.0;
    if (isa<ReduceMeanOp, MseLossOp>(root))
      scale = 1.0 / static_cast<double>(total / numElements(resultValue.getType()));
    std::string init = isMax ? "-INFINITY" : "0.0";
    // The accumulator offset within one P iteration: the kept T loops.
    Index accIndex = outIndex;
    for (unsigned g = 0; g < p; ++g)
      for (unsigned d : groups[g])
        accIndex.coef[d] = 0;
    std::string accOffset = print(accIndex);
    std::string pOffset = "0";
    {
      Index pIndex = outIndex;
      for (unsigned g = p; g < n; ++g)
        for (unsigned d : groups[g])
          pIndex.coef[d] = 0;
      pOffset = print(pIndex);
    }
    bool chunked = outputs < kFewOutputs && total >= kParallelWork &&
                   p < n && extents[p] >= 2;
    int64_t chunks = chunked ? std::min(kReduceChunks, extents[p]) : 1;
    std::string combineInto = [&](std::string acc, std::string v) {
      return isMax ? acc + " = (" + v + " > " + acc + " || " + v + " != " +
                         v + ") ? " + v + " : " + acc + ";"
                   : acc + " += " + v + ";";
    }("acc[" + accOffset + "]", result);
    std::string combineScalar = isMax
                                    ? "acc0 = (" + result + " > acc0 || " +
                                          result + " != " + result + ") ? " +
                                          result + " : acc0;"
                                    : "acc0 += " + result + ";";
    bool scalarAcc = inner == 1 && !chunked;
    // One accumulator per chunk or output row: a register, reduced by simd.
    bool scalarInner = inner == 1;
    auto indentOf = [](unsigned level) { return std::string(2 + 2 * level, ' '); };
    unsigned level = 0;
    if (parallel && !chunked && p > 0)
      f << indentOf(0) << "#pragma omp parallel for schedule(static)\n";
    for (unsigned g = 0; g < p; ++g, ++level)
      f << indentOf(level) << "for (int64_t j" << g << " = 0; j" << g
        << " < " << extents[g] << "; ++j" << g << ") {\n";
    std::string ind = indentOf(level);
    if (scalarAcc) {
      f << ind << "double acc0 = " << init << ";\n";
    } else if (!chunked) {
      f << ind << "double acc[" << inner << "];\n"
        << ind << "for (int64_t b = 0; b < " << inner << "; ++b) acc[b] = "
        << init << ";\n";
    } else {
      f << ind << "double part[" << chunks * inner << "];\n"
        << ind << "#pragma omp parallel for schedule(static)\n"
        << ind << "for (int64_t c = 0; c < " << chunks << "; ++c) {\n";
      if (scalarInner)
        f << ind << "  double acc0 = " << init << ";\n";
      else
        f << ind << "  double *acc = part + c * " << inner << ";\n"
          << ind << "  for (int64_t b = 0; b < " << inner
          << "; ++b) acc[b] = " << init << ";\n";
      ++level;
    }
    unsigned tStart = p;
    for (unsigned g = tStart; g < n; ++g, ++level) {
      std::string in = indentOf(level);
      bool innermost = g + 1 == n;
      if (innermost && scalarInner && !isMax)
        f << in << "#pragma omp simd reduction(+:acc0)\n";
      if (chunked && g == tStart) {
        f << in << "for (int64_t j" << g << " = c * " << extents[g] << " / "
          << chunks << "; j" << g << " < (c + 1) * " << extents[g] << " / "
          << chunks << "; ++j" << g << ") {\n";
      } else {
        f << in << "for (int64_t j" << g << " = 0; j" << g << " < "
          << extents[g] << "; ++j" << g << ") {\n";
      }
    }
    f << body << indentOf(level)
      << (scalarInner ? combineScalar : combineInto) << "\n";
    for (unsigned g = n; g > tStart; --g)
      f << indentOf(--level) << "}\n";
    if (chunked) {
      if (scalarInner)
        f << indentOf(level) << "part[c] = acc0;\n";
      f << indentOf(--level) << "}\n";
      ind = indentOf(level);
      f << ind << "double acc[" << inner << "];\n"
        << ind << "for (int64_t b = 0; b < " << inner << "; ++b) {\n"
        << ind << "  acc[b] = " << init << ";\n"
        << ind << "  for (int64_t c = 0; c < " << chunks << "; ++c) {\n"
        << ind << "    const double v = part[c * " << inner << " + b];\n"
        << ind << "    "
        << (isMax ? "acc[b] = (v > acc[b] || v != v) ? v : acc[b];"
                  : "acc[b] += v;")
        << "\n"
        << ind << "  }\n"
        << ind << "}\n";
    }
    std::string scaleText =
        scale == 1.0 ? "" : " * " + llvm::formatv("{0:e17}", scale).str();
    if (scalarAcc)
      f << ind << "out[" << pOffset << "] = static_cast<float>(acc0"
        << scaleText << ");\n";
    else
      f << ind << "for (int64_t b = 0; b < " << inner << "; ++b) out["
        << pOffset << " + b] = static_cast<float>(acc[b]"
        << scaleText << ");\n";
    for (unsigned g = p; g > 0; --g)
      f << indentOf(g - 1) << "}\n";
    f << "}\n";
  }
  inputsOut.assign(inputs.begin(), inputs.end());
  identity.assign(inputs.size(), true);
  for (const Access &a : accesses) {
    bool same = a.offset.affine && a.offset.k == outIndex.k &&
                a.offset.coef == outIndex.coef && !isReduction;
    identity[a.input] = identity[a.input] && same;
  }
  return success();
}

} // namespace

LogicalResult mlir::sd::openmp::emitKernelFunction(
    Operation *root, ArrayRef<std::string> fusedOps, KernelFunction &out) {
  KernelEmitter kernel(root, fusedOps);
  StringRef name = root->getAttrOfType<StringAttr>(kKernelAttrName).getValue();
  return kernel.emit(name, out.text, out.inputs, out.identityRead);
}

/// Scalar helpers every kernel may call.
const char *const mlir::sd::openmp::kKernelHelpers = R"cpp(
#include <algorithm>
#include <cmath>
#include <cstring>

// Transcendentals written without calls or branches, so that loops using
// them vectorize (libm's are scalar calls). Errors are a few ulp (erf:
// 1.5e-7 absolute, Abramowitz & Stegun 7.1.26).
static inline float sd_exp(float x) {
  // n = round(x / ln 2) by the 1.5·2^23 trick: no float-to-int conversion,
  // which GCC will not if-convert.
  float t = x * 1.44269504088896341f + 12582912.0f;
  float n = t - 12582912.0f;
  int32_t ni;
  std::memcpy(&ni, &t, sizeof(ni));
  ni -= 0x4B400000;
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float z = r * r;
  float y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r +
               8.3334519073e-3f) * r + 4.1665795894e-2f) * r +
             1.6666665459e-1f) * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  // 2^n in two factors, so that results near overflow and underflow stay
  // exact.
  int32_t h = ni >> 1;
  int32_t b1 = (h + 127) << 23, b2 = (ni - h + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof(s1));
  std::memcpy(&s2, &b2, sizeof(s2));
  float e = y * s1 * s2;
  e = x > 88.7228391f ? INFINITY : e;
  e = x < -103.972f ? 0.0f : e;
  return x != x ? x : e;
}
static inline float sd_sigmoid(float x) { return 1.0f / (1.0f + sd_exp(-x)); }
static inline float sd_tanh(float x) {
  float a = x < 0.0f ? -x : x;
  float t = sd_exp(-2.0f * a);
  float r = (1.0f - t) / (1.0f + t);
  r = a < 1e-2f ? a * (1.0f - a * a * (1.0f / 3.0f)) : r;
  return x < 0.0f ? -r : r;
}
static inline float sd_erf(float x) {
  float a = x < 0.0f ? -x : x;
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t -
              0.284496736f) * t + 0.254829592f) * t;
  float r = 1.0f - p * sd_exp(-a * a);
  return x < 0.0f ? -r : r;
}
static inline float sd_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + sd_tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
static inline float sd_gelu_erf(float x) {
  return 0.5f * x * (1.0f + sd_erf(x * 0.7071067811865476f));
}
static inline float sd_max(float a, float b) { return (a != a || b != b) ? NAN : (a < b ? b : a); }
static inline float sd_min(float a, float b) { return (a != a || b != b) ? NAN : (b < a ? b : a); }
)cpp";
