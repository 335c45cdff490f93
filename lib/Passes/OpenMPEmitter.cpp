//===- OpenMPEmitter.cpp - write a planned function as C++/OpenMP ---------===//
//
// Reads the plan of sd-lower-to-openmp (`sd.kernel`, `sd.kernel_kind`) and
// writes one C++ translation unit: the ABI header, one `static` function
// per fused kernel (a loop nest over its output, or a reduction over its
// input), static tables of constants and collectives, and `sd_program_run`,
// a straight-line sequence of allocations, kernel and runtime calls and
// releases.
//
// Indices. A kernel loops over an index space (its output, or a
// reduction's input); every value inside it is read at a *position*: one
// index per dimension, or a row-major linear offset (what reshape
// produces). Indices are affine in the loop variables where they can be
// (elementwise ops pass them through, broadcast drops or zeroes them,
// transposition is not fused, slices scale and shift them); reshape turns
// a position into a linear offset, which a buffer read uses directly and
// which is split back into dimensions symbolically when the strides allow,
// with `/` and `%` only when they do not. When every index of a kernel is
// affine, adjacent loops whose every access is contiguous across them
// collapse into one.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/OpenMPEmitter.h"

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::sd;

/// The text of sd/Runtime/ProgramABI.h, embedded at build time.
static const char kProgramABIText[] =
#include "sd/Passes/ProgramABI.inc"
    ;

namespace {

/// Loops of at least this many iterations (in total) run in parallel.
constexpr int64_t kParallelWork = 16384;
/// Reductions to fewer outputs than this split their input into this many
/// chunks, whatever the team size, so results do not depend on it.
constexpr int64_t kFewOutputs = 16;
constexpr int64_t kReduceChunks = 16;

int64_t numElements(Type type) {
  return cast<RankedTensorType>(type).getNumElements();
}
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
bool isPred(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType().isInteger(1);
}
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}
int64_t product(ArrayRef<int64_t> values) {
  int64_t p = 1;
  for (int64_t v : values)
    p *= v;
  return p;
}

/// A float literal that reads back as exactly `value`.
std::string floatLiteral(double value) {
  float f = static_cast<float>(value);
  if (std::isnan(f))
    return "NAN";
  if (std::isinf(f))
    return f > 0 ? "INFINITY" : "(-INFINITY)";
  std::string s = llvm::formatv("{0:e9}", f).str();
  // `formatv` prints e.g. 1.000000000e+00; append the float suffix.
  return "(" + s + "f)";
}

std::string cString(StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string intList(ArrayRef<int64_t> values) {
  std::string s;
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + std::to_string(v);
  return s;
}

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

/// The kernel being generated: its loops and how they are collapsed.
class KernelEmitter;

//===----------------------------------------------------------------------===//
// Naming
//===----------------------------------------------------------------------===//

/// Names values and ops for comments, diagnostics and runtime errors.
class Namer {
public:
  explicit Namer(func::FuncOp func) : state(func) {}
  std::string value(Value v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    v.printAsOperand(os, state);
    return s;
  }
  /// "%42 = sd.dot_general (file:12)".
  std::string op(Operation *op) {
    std::string s;
    if (op->getNumResults())
      s = value(op->getResult(0)) + " = ";
    s += op->getName().getStringRef().str();
    if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc()))
      s += " (" + llvm::sys::path::filename(loc.getFilename().getValue()).str() +
           ":" + std::to_string(loc.getLine()) + ")";
    return s;
  }
  std::string of(Value v) {
    if (Operation *def = v.getDefiningOp())
      return op(def);
    return value(v);
  }

private:
  AsmState state;
};

//===----------------------------------------------------------------------===//
// The program
//===----------------------------------------------------------------------===//

/// One step of the entry function: a kernel, a library call, a collective.
struct Step {
  Operation *root;
  StringRef kind;
  /// Values whose buffers the step reads.
  SmallVector<Value> inputs;
  /// For fused kernels: the function's text and, per input, whether the
  /// kernel reads it only at the position it writes (in-place safe).
  std::string function;
  SmallVector<bool> identityRead;
};

class ProgramEmitter {
public:
  ProgramEmitter(func::FuncOp func, llvm::raw_ostream &os)
      : names(func), func(func), os(os) {}
  LogicalResult emit();

  // Queried by KernelEmitter.
  StringAttr kernelOf(Operation *op) {
    return op->getAttrOfType<StringAttr>(kKernelAttrName);
  }
  /// Whether kernel `id` computes `v` itself rather than reading a buffer.
  bool computesInline(Value v, StringAttr id) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    StringAttr k = kernelOf(def);
    return k && (k == id || k.getValue() == kInlineKernel);
  }
  Namer names;

private:
  LogicalResult planSteps();
  LogicalResult emitStep(Step &step, llvm::raw_ostream &entry);
  LogicalResult emitGemm(DotGeneralOp op, llvm::raw_ostream &entry);
  LogicalResult emitCollective(Operation *op, llvm::raw_ostream &entry);
  std::string buffer(Value v);
  std::string allocate(Value v, llvm::raw_ostream &entry, StringRef space);
  std::string staticShape(ArrayRef<int64_t> shape);
  Value storageOf(Value v);
  MeshAttr meshOf(Operation *op, FlatSymbolRefAttr ref);

  func::FuncOp func;
  llvm::raw_ostream &os;
  SmallVector<Step> steps;
  /// File-scope definitions: constants, shapes, collective tables.
  std::string statics;
  llvm::raw_string_ostream staticsOs{statics};
  int64_t nextStatic = 0;
  DenseMap<Value, std::string> bufferNames;
  DenseMap<Value, Value> aliasOf;
  /// Storage that ends as a result (never released).
  DenseSet<Value> escapes;
  /// Program-allocated storage (released after its last use).
  DenseSet<Value> owned;
  DenseSet<Value> hostStorage;
  /// Step index of the last read of each storage.
  DenseMap<Value, int64_t> lastUse;
  /// Results written in place into an argument: result value -> argument.
  DenseMap<Value, int64_t> inPlace;
  int64_t nextBuffer = 0;
};

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

class KernelEmitter {
public:
  KernelEmitter(ProgramEmitter &program, Operation *root,
                SmallVector<std::string> fusedOps)
      : program(program), root(root), id(program.kernelOf(root)),
        fusedOps(std::move(fusedOps)) {}

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

  ProgramEmitter &program;
  Operation *root;
  StringAttr id;
  /// The fused ops, named, for the kernel's comment.
  SmallVector<std::string> fusedOps;
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
    if (!program.computesInline(v, id)) {
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

//===----------------------------------------------------------------------===//
// The entry function
//===----------------------------------------------------------------------===//

namespace {

/// Scalar helpers every kernel may call.
constexpr const char *kHelpers = R"cpp(
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

} // namespace

Value ProgramEmitter::storageOf(Value v) {
  while (aliasOf.count(v))
    v = aliasOf.lookup(v);
  return v;
}

std::string ProgramEmitter::buffer(Value v) {
  auto it = bufferNames.find(v);
  if (it != bufferNames.end())
    return it->second;
  return "nullptr /* unplanned */";
}

std::string ProgramEmitter::allocate(Value v, llvm::raw_ostream &entry,
                                     StringRef space) {
  std::string name = "b" + std::to_string(nextBuffer++);
  int64_t bytes = 4 * std::max<int64_t>(numElements(v.getType()), 1);
  entry << "  float *" << name << " = static_cast<float *>(api->alloc(dev, "
        << bytes << ", " << space << ", " << cString(names.of(v)) << "));\n"
        << "  if (!" << name << ") return 1;\n";
  bufferNames[v] = name;
  owned.insert(v);
  return name;
}

std::string ProgramEmitter::staticShape(ArrayRef<int64_t> shape) {
  std::string name = "shape" + std::to_string(nextStatic++);
  staticsOs << "static const int64_t " << name << "[] = {"
            << (shape.empty() ? "0" : intList(shape)) << "};\n";
  return name;
}

MeshAttr ProgramEmitter::meshOf(Operation *op, FlatSymbolRefAttr ref) {
  return lookupMesh(op, ref, [&] { return op->emitOpError(); });
}

/// The mesh axis indices of `names` in `mesh`'s order.
static FailureOr<SmallVector<int64_t>> axisIndices(Operation *op, MeshAttr mesh,
                                                   ArrayRef<StringRef> names) {
  SmallVector<int64_t> result;
  for (StringRef name : names) {
    auto axes = mesh.getAxes();
    auto it = llvm::find_if(axes, [&](MeshAxisAttr a) {
      return a.getName().getValue() == name;
    });
    if (it == axes.end())
      return op->emitOpError() << "names mesh axis \"" << name
                               << "\", which the mesh does not have";
    result.push_back(it - axes.begin());
  }
  return result;
}

static SmallVector<StringRef> strings(ArrayAttr attr) {
  return llvm::to_vector(llvm::map_range(
      attr, [](Attribute a) { return cast<StringAttr>(a).getValue(); }));
}

LogicalResult ProgramEmitter::emitCollective(Operation *op,
                                             llvm::raw_ostream &entry) {
  Value in = op->getNumOperands() ? op->getOperand(0) : Value();
  Value out = op->getResult(0);
  auto meshRef = op->getAttrOfType<FlatSymbolRefAttr>("mesh");
  MeshAttr mesh = meshOf(op, meshRef);
  if (!mesh)
    return failure();
  std::string bufferName = allocate(out, entry, "SD_DEVICE_MEMORY");
  std::string tag = std::to_string(nextStatic++);
  if (auto axisIndex = dyn_cast<AxisIndexOp>(op)) {
    auto axes = axisIndices(op, mesh, strings(axisIndex.getAxes()));
    if (failed(axes))
      return failure();
    staticsOs << "static const int32_t axes" << tag << "[] = {"
              << (axes->empty() ? "0" : intList(*axes)) << "};\n";
    entry << "  " << bufferName
          << "[0] = static_cast<float>(api->axis_index(dev, axes" << tag
          << ", " << axes->size() << "));\n";
    return success();
  }
  ArrayRef<int64_t> inShape = shapeOf(in), outShape = shapeOf(out);
  if (inShape.size() > 8)
    return op->emitOpError("has rank ") << inShape.size()
                                         << "; the runtime supports rank 8 at most";
  int kind = 0;
  SmallVector<SmallVector<int64_t>> dimAxes(inShape.size());
  SmallVector<int64_t> axes, pairs;
  int64_t src = 0, tgt = 0;
  auto perDim = [&](ArrayAttr attr) -> LogicalResult {
    for (auto [d, a] : llvm::enumerate(attr)) {
      auto idx = axisIndices(op, mesh, strings(cast<ArrayAttr>(a)));
      if (failed(idx))
        return failure();
      dimAxes[d] = *idx;
    }
    return success();
  };
  auto groupAxes = [&](ArrayAttr attr) -> LogicalResult {
    auto idx = axisIndices(op, mesh, strings(attr));
    if (failed(idx))
      return failure();
    axes = *idx;
    return success();
  };
  LogicalResult ok =
      llvm::TypeSwitch<Operation *, LogicalResult>(op)
          .Case<AllGatherOp>([&](AllGatherOp c) {
            kind = 0;
            return perDim(c.getDimAxes());
          })
          .Case<AllSliceOp>([&](AllSliceOp c) {
            kind = 1;
            return perDim(c.getDimAxes());
          })
          .Case<ReduceScatterOp>([&](ReduceScatterOp c) {
            kind = 2;
            return perDim(c.getDimAxes());
          })
          .Case<AllReduceOp>([&](AllReduceOp c) {
            kind = 3;
            return groupAxes(c.getReductionAxes());
          })
          .Case<AllToAllOp>([&](AllToAllOp c) {
            kind = 4;
            src = c.getSrcDim();
            tgt = c.getTgtDim();
            return groupAxes(c.getAxes());
          })
          .Case<CollectivePermuteOp>([&](CollectivePermuteOp c) {
            kind = 5;
            pairs = llvm::to_vector(c.getPairs());
            return groupAxes(c.getAxes());
          })
          .Default([&](Operation *) {
            return op->emitOpError("is not a collective the emitter knows");
          });
  if (failed(ok))
    return failure();
  static const char *kinds[] = {"SD_ALL_GATHER",     "SD_ALL_SLICE",
                                "SD_REDUCE_SCATTER", "SD_ALL_REDUCE",
                                "SD_ALL_TO_ALL",     "SD_COLLECTIVE_PERMUTE"};
  if (!pairs.empty())
    staticsOs << "static const int64_t pairs" << tag << "[] = {"
              << intList(pairs) << "};\n";
  staticsOs << "// " << names.op(op) << "\n"
            << "static const SdCollective coll" << tag << " = {\n"
            << "    " << kinds[kind] << ", " << inShape.size() << ",\n"
            << "    /*in_shape=*/{" << intList(inShape) << "},\n"
            << "    /*out_shape=*/{" << intList(outShape) << "},\n"
            << "    /*num_dim_axes=*/{";
  for (auto [d, a] : llvm::enumerate(dimAxes))
    staticsOs << (d ? ", " : "") << a.size();
  staticsOs << "},\n    /*dim_axes=*/{";
  for (auto [d, a] : llvm::enumerate(dimAxes))
    staticsOs << (d ? ", " : "") << "{" << intList(a) << "}";
  staticsOs << "},\n    /*num_axes=*/" << axes.size() << ", /*axes=*/{"
            << intList(axes) << "},\n"
            << "    /*src_dim=*/" << src << ", /*tgt_dim=*/" << tgt << ",\n"
            << "    /*num_pairs=*/" << pairs.size() / 2 << ", /*pairs=*/"
            << (pairs.empty() ? "nullptr" : "pairs" + tag) << ",\n"
            << "    /*name=*/" << cString(names.op(op)) << "};\n";
  entry << "  if (int32_t st = api->collective(dev, &coll" << tag << ", "
        << buffer(in) << ", " << bufferName << ")) return st;\n";
  return success();
}

LogicalResult ProgramEmitter::emitGemm(DotGeneralOp op,
                                       llvm::raw_ostream &entry) {
  ArrayRef<int64_t> ls = shapeOf(op.getLhs()), rs = shapeOf(op.getRhs());
  ArrayRef<int64_t> lb = op.getLhsBatch(), rb = op.getRhsBatch();
  ArrayRef<int64_t> lc = op.getLhsContract(), rc = op.getRhsContract();
  auto freeDims = [](int64_t rank, ArrayRef<int64_t> b, ArrayRef<int64_t> c) {
    SmallVector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(b, d) && !llvm::is_contained(c, d))
        f.push_back(d);
    return f;
  };
  SmallVector<int64_t> lf = freeDims(ls.size(), lb, lc);
  SmallVector<int64_t> rf = freeDims(rs.size(), rb, rc);
  int64_t batch = 1, m = 1, n = 1, k = 1;
  for (int64_t d : lb)
    batch *= ls[d];
  for (int64_t d : lf)
    m *= ls[d];
  for (int64_t d : rf)
    n *= rs[d];
  for (int64_t d : lc)
    k *= ls[d];
  // Is `dims` laid out as `first` then `second` after the batch dims?
  auto layout = [](ArrayRef<int64_t> b, ArrayRef<int64_t> first,
                   ArrayRef<int64_t> second) {
    int64_t next = 0;
    for (ArrayRef<int64_t> group : {b, first, second})
      for (int64_t d : group)
        if (d != next++)
          return false;
    return true;
  };
  // lhs: [batch, M, K] (no transpose) or [batch, K, M] (trans_a).
  int transA = 0, transB = 0;
  bool lhsDirect = true, rhsDirect = true;
  if (layout(lb, lf, lc))
    transA = 0;
  else if (layout(lb, lc, lf))
    transA = 1;
  else
    lhsDirect = false;
  if (layout(rb, rc, rf))
    transB = 0;
  else if (layout(rb, rf, rc))
    transB = 1;
  else
    rhsDirect = false;
  std::string lhs = buffer(op.getLhs()), rhs = buffer(op.getRhs());
  SmallVector<std::string> temps;
  auto transposeInto = [&](Value v, SmallVector<int64_t> perm) {
    std::string tmp = "t" + std::to_string(nextBuffer++);
    int64_t bytes = 4 * std::max<int64_t>(numElements(v.getType()), 1);
    std::string shape = staticShape(shapeOf(v));
    std::string permName = staticShape(perm);
    entry << "  float *" << tmp
          << " = static_cast<float *>(api->alloc(dev, " << bytes
          << ", SD_DEVICE_MEMORY, "
          << cString(names.op(op) + " (transposed operand)") << "));\n"
          << "  if (!" << tmp << ") return 1;\n"
          << "  api->transpose(dev, " << buffer(v) << ", " << tmp << ", "
          << perm.size() << ", " << shape << ", " << permName << ");\n";
    temps.push_back(tmp);
    return tmp;
  };
  if (!lhsDirect) {
    SmallVector<int64_t> perm(lb);
    perm.append(lf);
    perm.append(lc.begin(), lc.end());
    lhs = transposeInto(op.getLhs(), perm);
    transA = 0;
  }
  if (!rhsDirect) {
    SmallVector<int64_t> perm(rb);
    perm.append(rc.begin(), rc.end());
    perm.append(rf);
    rhs = transposeInto(op.getRhs(), perm);
    transB = 0;
  }
  std::string out = allocate(op.getResult(), entry, "SD_DEVICE_MEMORY");
  int64_t lda = transA ? m : k, ldb = transB ? k : n;
  entry << "  // batch=" << batch << " M=" << m << " N=" << n << " K=" << k
        << "\n  api->gemm(dev, " << batch << ", " << transA << ", " << transB
        << ", " << m << ", " << n << ", " << k << ", " << lhs << ", " << lda
        << ", " << m * k << ", " << rhs << ", " << ldb << ", " << k * n
        << ", 0.0f, " << out << ", " << n << ", " << m * n << ");\n";
  for (const std::string &t : temps)
    entry << "  api->release(dev, " << t << ");\n";
  return success();
}

LogicalResult ProgramEmitter::emitStep(Step &step, llvm::raw_ostream &entry) {
  Operation *op = step.root;
  Value out = op->getResult(0);
  entry << "  // " << names.op(op) << " [" << kernelOf(op).getValue() << " "
        << step.kind << "]\n";
  auto optional = [&](Value v) { return v ? buffer(v) : "nullptr"; };
  auto lastDims = [&](Value v) {
    ArrayRef<int64_t> s = shapeOf(v);
    return std::make_pair(product(s.drop_back()), s.back());
  };
  StringRef kind = step.kind;
  if (kind == "fused" || kind == "reduce") {
    StringRef name = kernelOf(op).getValue();
    std::string outName;
    auto donated = inPlace.find(out);
    if (donated != inPlace.end()) {
      outName = "a" + std::to_string(donated->second);
      bufferNames[out] = outName;
      entry << "  // in place: donated into argument " << donated->second
            << "\n";
    } else {
      outName = allocate(out, entry, "SD_DEVICE_MEMORY");
    }
    entry << "  " << name << "(";
    for (Value in : step.inputs)
      entry << buffer(in) << ", ";
    entry << outName << ");\n";
    return success();
  }
  if (kind == "alias") {
    aliasOf[out] = op->getOperand(0);
    bufferNames[out] = buffer(op->getOperand(0));
    return success();
  }
  if (kind == "constant") {
    auto dense = dyn_cast<DenseElementsAttr>(cast<ConstantOp>(op).getValue());
    if (!dense)
      return op->emitOpError("has a constant the OpenMP emitter cannot read");
    std::string name = "cst" + std::to_string(nextStatic++);
    staticsOs << "// " << names.op(op) << "\nstatic const float " << name
              << "[] = {";
    int64_t i = 0;
    for (APFloat value : dense.getValues<APFloat>())
      staticsOs << (i++ % 8 ? " " : "\n    ")
                << floatLiteral(value.convertToDouble()) << ",";
    staticsOs << "\n};\n";
    bufferNames[out] = "const_cast<float *>(" + name + ")";
    return success();
  }
  if (kind == "collective" || kind == "axis_index")
    return emitCollective(op, entry);
  if (kind == "offload" || kind == "reload") {
    std::string name = "b" + std::to_string(nextBuffer++);
    int64_t bytes = 4 * std::max<int64_t>(numElements(out.getType()), 1);
    bool toHost = kind == "offload";
    entry << "  float *" << name << " = nullptr;\n"
          << "  if (int32_t st = api->move(dev, " << buffer(op->getOperand(0))
          << ", " << bytes << ", "
          << (toHost ? "SD_HOST_MEMORY" : "SD_DEVICE_MEMORY")
          << ", reinterpret_cast<void **>(&" << name << "), "
          << cString(names.op(op)) << ")) return st;\n";
    bufferNames[out] = name;
    owned.insert(out);
    if (toHost)
      hostStorage.insert(out);
    return success();
  }
  if (auto dot = dyn_cast<DotGeneralOp>(op))
    return emitGemm(dot, entry);
  std::string o = allocate(out, entry, "SD_DEVICE_MEMORY");
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<TransposeOp>([&](TransposeOp t) {
        entry << "  api->transpose(dev, " << buffer(t.getOperand()) << ", "
              << o << ", " << shapeOf(out).size() << ", "
              << staticShape(shapeOf(t.getOperand())) << ", "
              << staticShape(t.getPermutation()) << ");\n";
        return success();
      })
      .Case<SoftmaxOp>([&](SoftmaxOp s) {
        entry << "  api->softmax(dev, " << buffer(s.getOperand()) << ", " << o
              << ", " << shapeOf(out).size() << ", "
              << staticShape(shapeOf(out)) << ", " << s.getDim() << ");\n";
        return success();
      })
      .Case<LayerNormOp>([&](LayerNormOp l) {
        auto [rows, cols] = lastDims(out);
        entry << "  api->layer_norm(dev, " << buffer(l.getOperand()) << ", "
              << optional(l.getScale()) << ", " << optional(l.getBias())
              << ", " << o << ", " << rows << ", " << cols << ", "
              << llvm::formatv("{0:e17}", l.getEpsilon().convertToDouble())
              << ");\n";
        return success();
      })
      .Case<RmsNormOp>([&](RmsNormOp l) {
        auto [rows, cols] = lastDims(out);
        entry << "  api->rms_norm(dev, " << buffer(l.getOperand()) << ", "
              << optional(l.getScale()) << ", " << o << ", " << rows << ", "
              << cols << ", "
              << llvm::formatv("{0:e17}", l.getEpsilon().convertToDouble())
              << ");\n";
        return success();
      })
      .Case<GroupNormOp>([&](GroupNormOp g) {
        ArrayRef<int64_t> s = shapeOf(out);
        entry << "  api->group_norm(dev, " << buffer(g.getOperand()) << ", "
              << optional(g.getScale()) << ", " << optional(g.getBias())
              << ", " << o << ", " << s.front() << ", "
              << product(s.drop_front().drop_back()) << ", " << s.back()
              << ", " << g.getNumGroups() << ", "
              << llvm::formatv("{0:e17}", g.getEpsilon().convertToDouble())
              << ");\n";
        return success();
      })
      .Case<AttentionOp>([&](AttentionOp a) {
        ArrayRef<int64_t> q = shapeOf(a.getQuery()), k = shapeOf(a.getKey()),
                          v = shapeOf(a.getValue());
        int64_t maskB = 1, maskH = 1;
        if (a.getMask()) {
          maskB = shapeOf(a.getMask())[0];
          maskH = shapeOf(a.getMask())[1];
        }
        entry << "  if (int32_t st = api->attention(dev, "
              << buffer(a.getQuery()) << ", " << buffer(a.getKey()) << ", "
              << buffer(a.getValue()) << ", " << optional(a.getMask())
              << ", " << maskB << ", " << maskH << ", " << o << ", " << q[0]
              << ", " << q[1] << ", " << q[2] << ", " << k[2] << ", " << q[3]
              << ", " << v[3] << ", "
              << llvm::formatv("{0:e17}", a.getEffectiveScale())
              << ")) return st;\n";
        return success();
      })
      .Case<Conv2DOp>([&](Conv2DOp c) {
        entry << "  if (int32_t st = api->conv2d(dev, " << buffer(c.getInput())
              << ", " << buffer(c.getKernel()) << ", " << optional(c.getBias())
              << ", " << o << ", " << staticShape(shapeOf(c.getInput()))
              << ", " << staticShape(shapeOf(c.getKernel())) << ", "
              << staticShape(shapeOf(out)) << ", "
              << staticShape(c.getStrides()) << ", "
              << staticShape(c.getPadding()) << ", " << c.getGroups()
              << ")) return st;\n";
        return success();
      })
      .Case<RngNormalOp, RngUniformOp>([&](auto r) {
        ArrayRef<int64_t> shape = shapeOf(out);
        SmallVector<int64_t> global(shape);
        if (auto g = r.getGlobalShape())
          global = llvm::to_vector(*g);
        entry << "  {\n    const int64_t offsets[] = {";
        if (r.getOffsets().empty()) {
          entry << (shape.empty() ? "0" : intList(SmallVector<int64_t>(
                                              shape.size(), 0)));
        } else {
          for (auto [i, v] : llvm::enumerate(r.getOffsets()))
            entry << (i ? ", " : "")
                  << "static_cast<int64_t>(std::llround(" << buffer(v)
                  << "[0]))";
        }
        bool normal = isa<RngNormalOp>(r.getOperation());
        double a = 0, b = 1;
        if constexpr (std::is_same_v<decltype(r), RngNormalOp>) {
          a = r.getMean().convertToDouble();
          b = r.getStddev().convertToDouble();
        } else {
          a = r.getLow().convertToDouble();
          b = r.getHigh().convertToDouble();
        }
        entry << "};\n    api->rng(dev, " << (normal ? 1 : 0) << ", "
              << static_cast<uint64_t>(r.getSeed()) << "ull, " << o << ", "
              << shape.size() << ", " << staticShape(shape) << ", "
              << staticShape(global) << ", offsets, "
              << llvm::formatv("{0:e17}", a) << ", "
              << llvm::formatv("{0:e17}", b) << ");\n  }\n";
        return success();
      })
      .Default([&](Operation *) {
        return op->emitOpError("has kernel kind '")
               << kind << "', which the OpenMP emitter does not know";
      });
}

LogicalResult ProgramEmitter::planSteps() {
  Block &body = func.getBody().front();
  DenseMap<StringAttr, SmallVector<std::string>> members;
  for (Operation &op : body) {
    if (isa<func::ReturnOp>(op))
      continue;
    StringAttr k = kernelOf(&op);
    if (!k)
      return op.emitOpError("has no 'sd.kernel' plan; run sd-lower-to-openmp "
                            "first");
    members[k].push_back(names.op(&op));
  }
  for (Operation &op : body) {
    auto kind = op.getAttrOfType<StringAttr>(kKernelKindAttrName);
    if (!kind)
      continue;
    Step step{&op, kind.getValue(), {}, {}, {}};
    if (step.kind == "fused" || step.kind == "reduce") {
      KernelEmitter kernel(*this, &op, members.lookup(kernelOf(&op)));
      if (failed(kernel.emit(kernelOf(&op).getValue(), step.function,
                             step.inputs, step.identityRead)))
        return failure();
    } else if (step.kind != "constant") {
      step.inputs = llvm::to_vector(op.getOperands());
    }
    steps.push_back(std::move(step));
  }
  return success();
}

LogicalResult ProgramEmitter::emit() {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitOpError("must have one block to be emitted as OpenMP");
  if (failed(planSteps()))
    return failure();
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());

  // Storage: a reshape alias shares its operand's buffer.
  for (Step &step : steps)
    if (step.kind == "alias")
      aliasOf[step.root->getResult(0)] = step.root->getOperand(0);
  DenseMap<Value, int64_t> defStep;
  for (auto [i, step] : llvm::enumerate(steps)) {
    Value st = storageOf(step.root->getResult(0));
    if (!lastUse.count(st))
      lastUse[st] = i;
    defStep[step.root->getResult(0)] = i;
    for (Value in : step.inputs)
      lastUse[storageOf(in)] = i;
  }
  DenseSet<Value> returned;
  for (Value v : ret.getOperands())
    returned.insert(storageOf(v));

  // Donation: a fused kernel that reads argument i only where it writes,
  // as its last use, writes its donated result into argument i's buffer.
  for (auto [j, v] : llvm::enumerate(ret.getOperands())) {
    auto aliases =
        func.getResultAttrOfType<IntegerAttr>(j, SDDialect::kAliasesAttrName);
    if (!aliases || !defStep.count(v))
      continue;
    int64_t argIndex = aliases.getInt();
    Value arg = func.getArgument(argIndex);
    Step &step = steps[defStep.lookup(v)];
    if (step.kind != "fused" || inPlace.count(v) || returned.count(arg) ||
        lastUse.lookup(arg) != defStep.lookup(v) ||
        llvm::any_of(inPlace, [&](auto &e) { return e.second == argIndex; }))
      continue;
    bool reads = false, identity = true;
    for (auto [k, in] : llvm::enumerate(step.inputs)) {
      if (storageOf(in) != arg)
        continue;
      reads = true;
      identity = identity && step.identityRead[k];
    }
    if (reads && identity)
      inPlace[v] = argIndex;
  }

  // The entry function.
  std::string entryText;
  llvm::raw_string_ostream entry(entryText);
  for (BlockArgument arg : func.getArguments()) {
    std::string name = "a" + std::to_string(arg.getArgNumber());
    bufferNames[arg] = name;
  }
  SmallVector<SmallVector<Value>> releases(steps.size());
  for (auto [i, step] : llvm::enumerate(steps)) {
    if (failed(emitStep(step, entry)))
      return failure();
    Value out = step.root->getResult(0);
    // Release the buffers whose last reader this was.
    for (Value st : releases[i])
      entry << "  api->release(dev, " << buffer(st) << ");\n";
    // Schedule this step's own output if it is owned.
    if (owned.count(out) && !returned.count(out)) {
      int64_t last = lastUse.lookup(out);
      if (last == static_cast<int64_t>(i))
        entry << "  api->release(dev, " << buffer(out) << ");\n";
      else
        releases[last].push_back(out);
    }
  }

  // Results: each a distinct buffer the runtime now owns.
  DenseSet<Value> claimed;
  for (auto [j, v] : llvm::enumerate(ret.getOperands())) {
    Value st = storageOf(v);
    auto aliases =
        func.getResultAttrOfType<IntegerAttr>(j, SDDialect::kAliasesAttrName);
    int64_t aliasIndex = aliases ? aliases.getInt() : -1;
    bool claim = false;
    if (owned.count(st))
      claim = true;
    else if (inPlace.count(st))
      claim = inPlace.lookup(st) == aliasIndex;
    else if (auto arg = dyn_cast<BlockArgument>(st))
      claim = static_cast<int64_t>(arg.getArgNumber()) == aliasIndex;
    if (claim && claimed.insert(st).second) {
      entry << "  results[" << j << "] = " << buffer(v) << ";\n";
      continue;
    }
    int64_t bytes = 4 * std::max<int64_t>(numElements(v.getType()), 1);
    std::string name = "r" + std::to_string(j);
    entry << "  float *" << name << " = static_cast<float *>(api->alloc(dev, "
          << bytes << ", "
          << (hostStorage.count(st) ? "SD_HOST_MEMORY" : "SD_DEVICE_MEMORY")
          << ", " << cString("result #" + std::to_string(j) + ": " + names.of(v))
          << "));\n"
          << "  if (!" << name << ") return 1;\n"
          << "  std::memcpy(" << name << ", " << buffer(v) << ", " << bytes
          << ");\n"
          << "  results[" << j << "] = " << name << ";\n";
  }

  // The translation unit.
  std::string meshText = "none";
  if (auto module = func->getParentOfType<ModuleOp>())
    for (auto mesh : module.getOps<MeshOp>()) {
      std::string s;
      llvm::raw_string_ostream ms(s);
      ms << "@" << mesh.getSymName() << " = " << mesh.getMesh();
      meshText = s;
    }
  os << "// Generated by sd-lower-to-openmp from @" << func.getSymName()
     << " (mesh " << meshText << ").\n"
     << "// Build: c++ -O3 -march=native -fopenmp -fPIC -shared\n\n"
     << kProgramABIText << kHelpers << "\n"
     << "extern \"C\" int32_t sd_program_abi_version(void) { return "
        "SD_ABI_VERSION; }\n\n";
  os << statics;
  for (Step &step : steps)
    os << step.function;
  os << "\nextern \"C\" int32_t sd_program_run(const SdApi *api, SdDevice "
        "*dev, void *const *args, void **results) {\n"
     << "  (void)api;\n  (void)dev;\n  (void)args;\n  (void)results;\n";
  for (BlockArgument arg : func.getArguments())
    if (!arg.use_empty())
      os << "  float *a" << arg.getArgNumber() << " = static_cast<float *>(args["
         << arg.getArgNumber() << "]);\n";
  os << entryText << "  return 0;\n}\n";
  return success();
}

LogicalResult mlir::sd::emitOpenMPProgram(func::FuncOp func,
                                          llvm::raw_ostream &os) {
  ProgramEmitter emitter(func, os);
  return emitter.emit();
}

//===----------------------------------------------------------------------===//
// Drivers
//===----------------------------------------------------------------------===//

static func::FuncOp findFunction(ModuleOp module, StringRef name) {
  if (!name.empty())
    return module.lookupSymbol<func::FuncOp>(name);
  for (StringRef preferred : {"train_step", "loss"})
    if (auto f = module.lookupSymbol<func::FuncOp>(preferred))
      return f;
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal())
      return f;
  return nullptr;
}

FailureOr<std::string> mlir::sd::lowerToOpenMP(ModuleOp module,
                                               StringRef funcName) {
  PassManager pm(module.getContext());
  pm.addPass(createInlinerPass());
  pm.addNestedPass<func::FuncOp>(createLowerToOpenMP());
  if (failed(pm.run(module)))
    return failure();
  func::FuncOp func = findFunction(module, funcName);
  if (!func) {
    module.emitError("no function '") << funcName << "' to lower to OpenMP";
    return failure();
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(emitOpenMPProgram(func, os)))
    return failure();
  return text;
}

namespace {
/// sdopt --emit=openmp: writes the planned function instead of the IR.
struct EmitOpenMPPass
    : public PassWrapper<EmitOpenMPPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(EmitOpenMPPass)
  EmitOpenMPPass(llvm::raw_ostream &os, std::string funcName)
      : os(os), funcName(std::move(funcName)) {}
  StringRef getArgument() const final { return "sd-emit-openmp"; }
  void runOnOperation() override {
    func::FuncOp func = findFunction(getOperation(), funcName);
    if (!func) {
      getOperation().emitError("no function to emit as OpenMP");
      return signalPassFailure();
    }
    if (failed(emitOpenMPProgram(func, os)))
      signalPassFailure();
  }
  llvm::raw_ostream &os;
  std::string funcName;
};
} // namespace

std::unique_ptr<Pass> mlir::sd::createEmitOpenMP(llvm::raw_ostream &os,
                                                 std::string funcName) {
  return std::make_unique<EmitOpenMPPass>(os, std::move(funcName));
}
