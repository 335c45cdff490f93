//===- KernelBuilder.cpp - fused kernels as C++ loop nests ----------------===//
//
// One fused kernel of the OpenMP lowering (OpenMPEmitter.cpp writes the rest
// of the program) becomes a function: a loop nest over its index
// space (its output, or a reduction's input) computing every fused op at
// each point. The builder knows no op: each op says through
// OpenMPLoweringOpInterface where it reads its operands and what it
// computes from them.
//
// Indices. Every value inside a kernel is read at a *position*: one index
// per dimension, or a row-major linear offset (what reshape produces).
// Indices are affine in the loop variables where they can be (elementwise
// ops pass them through, broadcast drops or zeroes them, slices scale and
// shift them); reshape turns a position into a linear offset, which a
// buffer read uses directly and which is split back into dimensions
// symbolically when the strides allow, with `/` and `%` only when they do
// not (simplified, and in 32 bits where the values fit, so that a gather
// through them stays a vector loop). Pad and concat read their operands at
// clamped indices and select. When every index of a kernel is affine,
// adjacent loops that every access walks contiguously collapse into one;
// the outer loop runs in parallel when the kernel is large, the inner one
// is `omp simd`.
//
// Reductions run their kept dimensions in parallel and each output's
// reduced dimensions sequentially in a fixed order (double accumulators);
// a reduction to few outputs splits its input into a fixed number of
// chunks, independent of the team size, added in order.
//
//===----------------------------------------------------------------------===//

#include "sd/Target/OpenMP/KernelBuilder.h"

#include "sd/Target/OpenMP/OpenMPDialect.h"
#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"

#include "llvm/Support/FormatVariadic.h"

#include <limits>

using namespace mlir;
using namespace mlir::sd::openmp;

namespace {
/// Loops of at least this many iterations (in total) run in parallel.
constexpr int64_t kParallelWork = 16384;
/// Reductions to fewer outputs than this split their input into this many
/// chunks, whatever the team size, so results do not depend on it.
constexpr int64_t kFewOutputs = 16;
constexpr int64_t kReduceChunks = 16;
/// A gathered bf16 input of at most this many elements (16 KiB widened) is
/// widened on the kernel's stack first.
constexpr int64_t kWidenedInputElements = 4096;
} // namespace

//===----------------------------------------------------------------------===//
// Index algebra
//===----------------------------------------------------------------------===//

Index mlir::sd::openmp::scaleAdd(const Index &a, int64_t scale, int64_t add) {
  if (!a.affine)
    return Index::opaque("((" + a.expr + ") * " + std::to_string(scale) +
                         " + " + std::to_string(add) + ")");
  Index r = a;
  for (int64_t &c : r.coef)
    c *= scale;
  r.k = r.k * scale + add;
  return r;
}

Index mlir::sd::openmp::clampIndex(const std::string &e, int64_t size) {
  return Index::opaque("sd_clamp_index(" + e + ", " + std::to_string(size - 1) +
                       ")");
}

KernelBuilder::KernelBuilder(Operation *root, ArrayRef<std::string> fusedOps,
                             ArrayRef<Value> outputs)
    : root(root), id(*getKernelId(root)), fusedOps(fusedOps), outputs(outputs) {
}

std::string KernelBuilder::print(const Index &i) {
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

/// A memo key: the value (by identity, only for lookups) and the position.
std::string KernelBuilder::key(Value v, const Position &pos) {
  std::string s =
      std::to_string(reinterpret_cast<uintptr_t>(v.getAsOpaquePointer()));
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

Index KernelBuilder::offsetOf(const Position &pos, ArrayRef<int64_t> shape) {
  if (pos.linear)
    return pos.offset;
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  Index sum = constantIndex(0);
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
    expr += (expr.empty() ? "" : " + ") +
            ("(" + print(i) + ") * " + std::to_string(strides[d]));
  }
  if (affine)
    return sum;
  return Index::opaque(expr.empty() ? "0" : expr);
}

/// Splits a linear offset into the dimensions of `shape`: symbolically when
/// every loop term stays within one dimension's digit, else with / and %.
SmallVector<Index> KernelBuilder::dimsOf(const Position &pos,
                                         ArrayRef<int64_t> shape) {
  if (!pos.linear)
    return pos.dims;
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  SmallVector<Index> dims;
  const Index &lin = pos.offset;
  for (unsigned d = 0; d < shape.size(); ++d) {
    int64_t st = strides[d], sz = shape[d];
    if (sz == 1) {
      dims.push_back(constantIndex(0));
      continue;
    }
    bool ok = lin.affine && lin.k == 0;
    Index r = constantIndex(0);
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
    dims.push_back(digitOf(lin, st, sz));
  }
  return dims;
}

/// The digit (lin / st) % sz of a linear offset. An affine offset with no
/// negative part is simplified first: its terms that are multiples of
/// st * sz do not change the digit and go, the multiples of st leave the
/// division, and the division or the remainder goes where the terms left
/// cannot reach st or sz (with neither, the digit is affine: the symbolic
/// split above, with a constant term too). What is left is computed in 32
/// bits where it fits: the CPU divides vectors of 32-bit integers by a
/// constant, not 64-bit ones, so a gather through such an index stays a
/// vector loop (a bf16 UNet's group norm backward, `(196608 * j0 + 6144 * j1
/// + 192 * j2 + j3) / 6 % 32`, became `static_cast<int32_t>(j3) / 6`: 7-10
/// ms a call on one thread before, 1.2-2.0 after; f32 0.8-1.0 and 0.6-0.9).
Index KernelBuilder::digitOf(const Index &lin, int64_t st, int64_t sz) {
  auto general = [&] {
    return Index::opaque("((" + print(lin) + ") / " + std::to_string(st) +
                         " % " + std::to_string(sz) + ")");
  };
  if (!lin.affine || lin.k < 0 ||
      llvm::any_of(lin.coef, [](int64_t c) { return c < 0; }))
    return general();
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  // The digit is (mid + low / st) % sz, both affine and non-negative: mid
  // the multiples of st divided by it (modulo sz), low the rest.
  Index mid = constantIndex(lin.k / st % sz), low = constantIndex(lin.k % st);
  int64_t midMax = mid.k, lowMax = low.k;
  for (unsigned l = 0; l < loopShape.size(); ++l) {
    int64_t c = lin.coef[l], last = loopShape[l] - 1;
    if (c == 0 || c % (st * sz) == 0)
      continue;
    if (c % st == 0) {
      mid.coef[l] = c / st % sz;
      midMax += mid.coef[l] * last;
    } else {
      low.coef[l] = c;
      lowMax += c * last;
    }
  }
  int64_t digitMax = midMax + lowMax / st;
  // Neither a division nor a remainder: the digit is affine.
  if (lowMax < st && digitMax < sz)
    return mid;
  if (lowMax > kInt32Max || digitMax > kInt32Max)
    return general();
  auto int32Of = [&](const Index &i) {
    return "static_cast<int32_t>(" + print(i) + ")";
  };
  std::string expr;
  if (midMax > 0)
    expr = int32Of(mid);
  if (lowMax >= st)
    expr +=
        (expr.empty() ? "" : " + ") + int32Of(low) + " / " + std::to_string(st);
  if (expr.empty())
    expr = "0";
  if (digitMax >= sz)
    expr = "(" + expr + ") % " + std::to_string(sz);
  return Index::opaque("(" + expr + ")");
}

std::string KernelBuilder::bind(StringRef expr, bool pred) {
  std::string var = fresh();
  body += std::string("      const ") + (pred ? "bool " : "float ") + var +
          " = " + expr.str() + ";\n";
  return var;
}

//===----------------------------------------------------------------------===//
// The body
//===----------------------------------------------------------------------===//

/// Whether this kernel computes `v` itself rather than reading a buffer.
bool KernelBuilder::computesInline(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  return isa_and_present<InlineAttr>(getPlan(def)) || getKernelId(def) == id;
}

std::string KernelBuilder::emitLeaf(Value v, const Position &pos) {
  auto [it, inserted] = inputIndex.try_emplace(v, inputs.size());
  if (inserted)
    inputs.push_back(v);
  Index off = offsetOf(pos, shapeOf(v));
  useIndex(off);
  accesses.push_back({it->second, off});
  std::string var = fresh();
  std::string index = "[" + print(off) + "]";
  std::string read = "in" + std::to_string(it->second) + index;
  // A small bf16 operand gathered by an opaque offset (a group norm's
  // per-group statistics broadcast across a reshape: j / 6 % 32) is widened
  // once before the loops and gathered as f32: the CPU gathers 32-bit
  // lanes, and 16-bit gathers kept such loops scalar (7x slower than their
  // f32 twins in a bf16 UNet step).
  bool widen = isBF16(v) && !isPred(v) && !off.affine &&
               numElements(v.getType()) <= kWidenedInputElements;
  if (widen && !llvm::is_contained(widenedInputs, it->second))
    widenedInputs.push_back(it->second);
  if (isPred(v))
    body += "      const bool " + var + " = " + read + " != 0.0f;\n";
  else if (widen)
    body += "      const float " + var + " = w" + std::to_string(it->second) +
            index + ";\n";
  else if (isBF16(v))
    body += "      const float " + var + " = sd_bf16_to_f32(" + read + ");\n";
  else
    body += "      const float " + var + " = " + read + ";\n";
  return var;
}

/// Generates `rootValue` at `rootPos` depth-first without recursion (fused
/// chains are as deep as a model's elementwise code), each (value,
/// position) once.
std::string KernelBuilder::gen(Value rootValue, const Position &rootPos) {
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
    if (!computesInline(v)) {
      memo[k] = emitLeaf(v, pos);
      stack.pop_back();
      continue;
    }
    auto op = cast<OpenMPLoweringOpInterface>(v.getDefiningOp());
    SmallVector<OperandPosition> operands;
    op.getOperandPositions(*this, pos, operands);
    if (!stack.back().expanded) {
      stack.back().expanded = true;
      for (OperandPosition &operand : llvm::reverse(operands))
        stack.push_back({operand.value, operand.pos, false});
      continue;
    }
    SmallVector<std::string> names;
    for (OperandPosition &operand : operands)
      names.push_back(memo[key(operand.value, operand.pos)]);
    std::string expr = op.buildScalar(*this, pos, names);
    // A bf16 result is computed in f32 and rounded, where the op computes
    // (index maps only move values that are bf16 already).
    if (isBF16(v) && op.getLoweringKind() != LoweringKind::IndexMap)
      expr = "sd_round_bf16(" + expr + ")";
    memo[k] = bind(expr, isPred(v));
    stack.pop_back();
  }
  return memo[key(rootValue, rootPos)];
}

void KernelBuilder::setupLoops() {
  auto op = cast<OpenMPLoweringOpInterface>(root);
  isReduction = op.getLoweringKind() == LoweringKind::Reduction;
  if (!isReduction) {
    loopShape = llvm::to_vector(shapeOf(root->getResult(0)));
    reduced.assign(loopShape.size(), false);
    return;
  }
  reduction = op.getReduction();
  loopShape = llvm::to_vector(shapeOf(root->getOperand(0)));
  reduced.assign(loopShape.size(), reduction.allDims);
  for (int64_t d : reduction.dims)
    reduced[d] = true;
}

LogicalResult KernelBuilder::generate(bool collapse) {
  body.clear();
  memo.clear();
  inputs.clear();
  inputIndex.clear();
  accesses.clear();
  widenedInputs.clear();
  affines.clear();
  hasOpaque = false;
  nextVar = 0;
  if (!collapse) {
    groups.clear();
    for (unsigned d = 0; d < loopShape.size(); ++d)
      groups.push_back({d});
  }
  Position pos = identityPosition();
  if (isReduction) {
    // The value accumulated at each point of the input, from the operands
    // read where the reduction reads them; an operand as read is
    // accumulated directly.
    auto op = cast<OpenMPLoweringOpInterface>(root);
    SmallVector<OperandPosition> operands;
    op.getOperandPositions(*this, pos, operands);
    SmallVector<std::string> names;
    for (OperandPosition &operand : operands)
      names.push_back(gen(operand.value, operand.pos));
    std::string expr = op.buildScalar(*this, pos, names);
    result = llvm::is_contained(names, expr) ? expr : bind(expr);
  } else {
    result = gen(root->getResult(0), pos);
  }
  // The extra outputs, at every point of the loop space (their shape).
  outputResults.clear();
  for (Value v : outputs)
    outputResults.push_back(gen(v, pos));
  // The output offset: row-major over the kept loops.
  Index out = constantIndex(0);
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(loopShape.size()) - 1; d >= 0; --d) {
    if (reduced[d])
      continue;
    out.coef[d] = stride;
    stride *= loopShape[d];
  }
  useIndex(out);
  return success();
}

/// Collapses adjacent loops of one kind that every access walks
/// contiguously, and generates the body again over them.
void KernelBuilder::collapseLoops() {
  if (hasOpaque || loopShape.empty())
    return;
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
    (void)generate(/*collapse=*/true);
  }
}

//===----------------------------------------------------------------------===//
// The function
//===----------------------------------------------------------------------===//

LogicalResult KernelBuilder::build(KernelFunction &out) {
  setupLoops();
  if (failed(generate(/*collapse=*/false)))
    return failure();
  collapseLoops();
  SmallVector<int64_t> extents;
  for (const SmallVector<unsigned> &g : groups) {
    int64_t e = 1;
    for (unsigned d : g)
      e *= loopShape[d];
    extents.push_back(e);
  }
  Index outIndex = affines.back();

  llvm::raw_string_ostream comment(out.comment);
  comment << "\n// " << getKernelName(id) << ": "
          << stringifyKernelKind(cast<KernelAttr>(getPlan(root)).getKind())
          << " over [" << intList(loopShape) << "]\n";
  for (const std::string &s : fusedOps)
    comment << "//   " << s << "\n";
  llvm::raw_string_ostream f(out.body);
  f << "(";
  for (unsigned i = 0; i < inputs.size(); ++i)
    f << "const " << cElementType(inputs[i].getType()) << " *in" << i << ", ";
  f << cElementType(root->getResult(0).getType()) << " *out";
  for (unsigned i = 1; i <= outputs.size(); ++i)
    f << ", " << cElementType(outputs[i - 1].getType()) << " *out" << i;
  f << ") {\n";
  for (unsigned i : widenedInputs) {
    int64_t n = numElements(inputs[i].getType());
    f << "  float w" << i << "[" << n << "];\n"
      << "  for (int64_t e = 0; e < " << n << "; ++e) w" << i
      << "[e] = sd_bf16_to_f32(in" << i << "[e]);\n";
  }
  assert((outputs.empty() || !isReduction) &&
         "a reduction kernel has no extra outputs");
  if (isReduction)
    writeReduction(f, extents, outIndex);
  else
    writeLoops(f, extents);

  out.inputs.assign(inputs.begin(), inputs.end());
  out.outputs.assign(outputs.begin(), outputs.end());
  out.identityRead.assign(inputs.size(), true);
  for (const Access &a : accesses) {
    bool same = a.offset.affine && a.offset.k == outIndex.k &&
                a.offset.coef == outIndex.coef && !isReduction;
    out.identityRead[a.input] = out.identityRead[a.input] && same;
  }
  return success();
}

/// The loop nest of a fused (non-reduction) kernel: the body at every point
/// of the output, stored at the output offset.
void KernelBuilder::writeLoops(llvm::raw_ostream &f,
                               ArrayRef<int64_t> extents) {
  std::string outOffset = print(affines.back());
  bool parallel = product(loopShape) >= kParallelWork;
  auto storeAt = [&](StringRef offset) {
    // A bf16 value is exact in its f32 variable (rounded where computed,
    // or loaded from bf16): stored as its high half, not rounded again.
    auto store = [](Value v, const std::string &var) {
      if (isPred(v))
        return "(" + var + " ? 1.0f : 0.0f)";
      return isBF16(v) ? "sd_bf16_of_exact(" + var + ")" : var;
    };
    std::string text = "      out[" + offset.str() +
                       "] = " + store(root->getResult(0), result) + ";\n";
    for (auto [i, v] : llvm::enumerate(outputs))
      text += "      out" + std::to_string(i + 1) + "[" + offset.str() +
              "] = " + store(v, outputResults[i]) + ";\n";
    return text;
  };
  if (groups.empty()) {
    f << "  {\n" << body << storeAt("0") << "  }\n}\n";
    return;
  }
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
  f << body << storeAt(outOffset);
  for (unsigned g = n; g > 0; --g)
    f << std::string(2 * g, ' ') << "}\n";
  f << "}\n";
}

/// The loops of a reduction: P = the leading kept loops (parallel), T = the
/// rest, accumulated in double in a fixed order.
void KernelBuilder::writeReduction(llvm::raw_ostream &f,
                                   ArrayRef<int64_t> extents,
                                   const Index &outIndex) {
  unsigned n = groups.size(), p = 0;
  while (p < n && !reduced[groups[p].front()])
    ++p;
  int64_t outputs = 1, inner = 1;
  for (unsigned g = 0; g < p; ++g)
    outputs *= extents[g];
  for (unsigned g = p; g < n; ++g)
    if (!reduced[groups[g].front()])
      inner *= extents[g];
  bool isMax = reduction.max;
  int64_t total = product(loopShape);
  bool parallel = total >= kParallelWork;
  double scale = 1.0;
  if (reduction.mean)
    scale = 1.0 / static_cast<double>(
                      total / numElements(root->getResult(0).getType()));
  std::string init = isMax ? "-__builtin_inff()" : "0.0";
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
  bool chunked = outputs < kFewOutputs && total >= kParallelWork && p < n &&
                 extents[p] >= 2;
  int64_t chunks = chunked ? std::min(kReduceChunks, extents[p]) : 1;
  std::string combineInto = [&](std::string acc, std::string v) {
    return isMax ? acc + " = (" + v + " > " + acc + " || " + v + " != " + v +
                       ") ? " + v + " : " + acc + ";"
                 : acc + " += " + v + ";";
  }("acc[" + accOffset + "]", result);
  std::string combineScalar = isMax ? "acc0 = (" + result + " > acc0 || " +
                                          result + " != " + result + ") ? " +
                                          result + " : acc0;"
                                    : "acc0 += " + result + ";";
  bool scalarAcc = inner == 1 && !chunked;
  // One accumulator per chunk or output row: a register, reduced by simd.
  bool scalarInner = inner == 1;
  auto indentOf = [](unsigned level) {
    return std::string(2 + 2 * level, ' ');
  };
  unsigned level = 0;
  if (parallel && !chunked && p > 0)
    f << indentOf(0) << "#pragma omp parallel for schedule(static)\n";
  for (unsigned g = 0; g < p; ++g, ++level)
    f << indentOf(level) << "for (int64_t j" << g << " = 0; j" << g << " < "
      << extents[g] << "; ++j" << g << ") {\n";
  std::string ind = indentOf(level);
  if (scalarAcc) {
    f << ind << "double acc0 = " << init << ";\n";
  } else if (!chunked) {
    f << ind << "double acc[" << inner << "];\n"
      << ind << "for (int64_t b = 0; b < " << inner
      << "; ++b) acc[b] = " << init << ";\n";
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
      f << in << "for (int64_t j" << g << " = 0; j" << g << " < " << extents[g]
        << "; ++j" << g << ") {\n";
    }
  }
  f << body << indentOf(level) << (scalarInner ? combineScalar : combineInto)
    << "\n";
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
  // The double accumulator rounds once to the result's type.
  std::string narrow = isBF16(root->getResult(0)) ? "sd_double_to_bf16"
                                                  : "static_cast<float>";
  if (scalarAcc)
    f << ind << "out[" << pOffset << "] = " << narrow << "(acc0" << scaleText
      << ");\n";
  else
    f << ind << "for (int64_t b = 0; b < " << inner << "; ++b) out[" << pOffset
      << " + b] = " << narrow << "(acc[b]" << scaleText << ");\n";
  for (unsigned g = p; g > 0; --g)
    f << indentOf(g - 1) << "}\n";
  f << "}\n";
}

/// Scalar helpers every kernel may call.
// Kernels include no standard header: <algorithm> and <cmath> were half of
// each kernel file's compile time. The compiler's builtins are what the
// standard library's float overloads call.
const char *const mlir::sd::openmp::kKernelHelpers = R"cpp(
static inline float sd_sqrt(float x) { return __builtin_sqrtf(x); }
static inline float sd_log(float x) { return __builtin_logf(x); }
static inline float sd_sin(float x) { return __builtin_sinf(x); }
static inline float sd_cos(float x) { return __builtin_cosf(x); }
static inline float sd_pow(float x, float y) { return __builtin_powf(x, y); }
// min(max(i, 0), last), as an index into a dimension of last + 1 elements.
static inline int64_t sd_clamp_index(int64_t i, int64_t last) {
  i = i < 0 ? 0 : i;
  return last < i ? last : i;
}

// Transcendentals written without calls or branches, so that loops using
// them vectorize (libm's are scalar calls). Errors are a few ulp (erf:
// 1.5e-7 absolute, Abramowitz & Stegun 7.1.26).
static inline float sd_exp(float x) {
  // n = round(x / ln 2) by the 1.5·2^23 trick: no float-to-int conversion,
  // which GCC will not if-convert.
  float t = x * 1.44269504088896341f + 12582912.0f;
  float n = t - 12582912.0f;
  int32_t ni;
  __builtin_memcpy(&ni, &t, sizeof(ni));
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
  __builtin_memcpy(&s1, &b1, sizeof(s1));
  __builtin_memcpy(&s2, &b2, sizeof(s2));
  float e = y * s1 * s2;
  e = x > 88.7228391f ? __builtin_inff() : e;
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
// 0.5·x·(1 + tanh(u)) = x·sigmoid(2u): one exp and one division, and no
// cancellation for negative x (1 + tanh(u) loses every digit there).
static inline float sd_gelu_tanh(float x) {
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return x / (1.0f + sd_exp(-2.0f * u));
}
static inline float sd_gelu_erf(float x) {
  return 0.5f * x * (1.0f + sd_erf(x * 0.7071067811865476f));
}
static inline float sd_max(float a, float b) {
  return (a != a || b != b) ? __builtin_nanf("") : (a < b ? b : a);
}
static inline float sd_min(float a, float b) {
  return (a != a || b != b) ? __builtin_nanf("") : (b < a ? b : a);
}
)cpp";
