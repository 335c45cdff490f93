//===- OpenMPEmitter.cpp - write a planned function as C++/OpenMP ---------===//
//
// Reads the plan of sd-lower-to-openmp (`sd.kernel`, `sd.kernel_kind`) and
// writes one C++ translation unit: the ABI header, one `static` function
// per fused kernel (a loop nest over its output, or a reduction over its
// input), static tables of constants and collectives, and `sd_program_run`,
// a straight-line sequence of allocations, kernel and runtime calls and
// releases.
//
// Memory: every materialized value gets a buffer from the runtime and is
// released after its last reader; a reshape of a materialized value aliases
// its buffer. Arguments are borrowed, except that a result donated into an
// argument (`sd.aliases`) whose kernel reads that argument only where it
// writes, as its last use, is computed in place. Every result is a distinct
// buffer the runtime then owns; others are copies. The kernels themselves
// are written by OpenMPKernel.cpp.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/OpenMPEmitter.h"

#include "OpenMPKernel.h"

#include "sd/Analysis/CostModel.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

/// The text of sd/Runtime/ProgramABI.h, embedded at build time.
static const char kProgramABIText[] =
#include "sd/Passes/ProgramABI.inc"
    ;

namespace {

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

  /// What identifies `op` in a trace: its `sd.name`, else its source line
  /// "(dit.mlir:12)", else its first result "%42".
  std::string label(Operation *op) {
    if (auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
      return name.getValue().str();
    if (auto loc = op->getLoc()->findInstanceOf<FileLineColLoc>())
      return "(" +
             llvm::sys::path::filename(loc.getFilename().getValue()).str() +
             ":" + std::to_string(loc.getLine()) + ")";
    return op->getNumResults() ? value(op->getResult(0)) : "";
  }

private:
  AsmState state;
};

//===----------------------------------------------------------------------===//
// Trace spans
//===----------------------------------------------------------------------===//

// Every runtime call the program makes is bracketed by trace_begin/end with
// a literal name and the op's cost (CostOpInterface), so that a trace shows
// which op each span is and how far from its roofline it ran.

int64_t costFlops(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getFlops() : 0;
}

int64_t costBytes(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getBytesAccessed() : 0;
}

/// "8x16"; "1" for a scalar.
std::string shapeText(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "1";
  return llvm::join(
      llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x");
}

/// "sd.exp" -> "exp".
std::string opKindName(Operation *op) {
  return op->getName().stripDialect().str();
}

/// The distinct kinds of `ops` in order, the first few: "exp+mul+tanh".
std::string fusedKinds(ArrayRef<Operation *> ops) {
  constexpr size_t kMaxKinds = 6;
  SmallVector<std::string> kinds;
  bool more = false;
  for (Operation *op : ops) {
    std::string kind = opKindName(op);
    if (llvm::is_contained(kinds, kind))
      continue;
    if (kinds.size() == kMaxKinds) {
      more = true;
      break;
    }
    kinds.push_back(kind);
  }
  return llvm::join(kinds, "+") + (more ? "+..." : "");
}

/// Writes trace_begin for a span named by the non-empty `words`, joined by
/// blanks.
void traceBegin(llvm::raw_ostream &entry, ArrayRef<std::string> words,
                StringRef category, int64_t flops, int64_t bytes) {
  std::string name;
  for (const std::string &word : words)
    if (!word.empty())
      name += (name.empty() ? "" : " ") + word;
  entry << "  api->trace_begin(dev, " << cString(name) << ", "
        << cString(category) << ", " << flops << ", " << bytes << ");\n";
}

void traceEnd(llvm::raw_ostream &entry) { entry << "  api->trace_end(dev);\n"; }

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
  /// The ops of each fused kernel, in program order (for its trace span).
  DenseMap<StringAttr, SmallVector<Operation *>> kernelOps;
  /// Mesh lookups of CostOpInterface::getCommunication.
  SymbolTableCollection symbols;
};

} // namespace

//===----------------------------------------------------------------------===//
// The entry function
//===----------------------------------------------------------------------===//

namespace {



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
  // "all_reduce fsdp,data 4x8 (dit.mlir:12)": the axes it communicates over,
  // and what one device sends (the cost model's ring bytes).
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
    if (std::optional<CommunicationInfo> info = cost.getCommunication(symbols))
      sent = getRingBytesPerDevice(info->pattern, info->tensorBytes,
                                   info->groupSize);
  traceBegin(entry,
             {opKindName(op), llvm::join(axisNames, ","), shapeText(inShape),
              names.label(op)},
             "collective", costFlops(op), sent);
  entry << "  if (int32_t st = api->collective(dev, &coll" << tag << ", "
        << buffer(in) << ", " << bufferName << ")) return st;\n";
  traceEnd(entry);
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
    entry << "  float *" << tmp << " = static_cast<float *>(api->alloc(dev, "
          << bytes << ", SD_DEVICE_MEMORY, "
          << cString(names.op(op) + " (transposed operand)") << "));\n"
          << "  if (!" << tmp << ") return 1;\n";
    traceBegin(
        entry,
        {"transpose", shapeText(shapeOf(v)), "(gemm operand)", names.label(op)},
        "kernel", 0, 2 * bytes);
    entry << "  api->transpose(dev, " << buffer(v) << ", " << tmp << ", "
          << perm.size() << ", " << shape << ", " << permName << ");\n";
    traceEnd(entry);
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
  std::string mnk = llvm::formatv("{0}x{1}x{2}", m, n, k).str();
  traceBegin(entry,
             {"gemm",
              batch > 1 ? std::to_string(batch) + "x[" + mnk + "]" : mnk,
              names.label(op)},
             "gemm", costFlops(op), costBytes(op));
  entry << "  // batch=" << batch << " M=" << m << " N=" << n << " K=" << k
        << "\n  api->gemm(dev, " << batch << ", " << transA << ", " << transB
        << ", " << m << ", " << n << ", " << k << ", " << lhs << ", " << lda
        << ", " << m * k << ", " << rhs << ", " << ldb << ", " << k * n
        << ", 0.0f, " << out << ", " << n << ", " << m * n << ");\n";
  traceEnd(entry);
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
    // Its memory traffic is its buffers (f32 each), not its ops' operands.
    int64_t flops = 0, bytes = 4 * numElements(out.getType());
    for (Operation *member : kernelOps.lookup(kernelOf(op)))
      flops += costFlops(member);
    for (Value in : step.inputs)
      bytes += 4 * numElements(in.getType());
    traceBegin(entry,
               {name.str(), fusedKinds(kernelOps.lookup(kernelOf(op))),
                names.label(op)},
               "kernel", flops, bytes);
    entry << "  " << name << "(";
    for (Value in : step.inputs)
      entry << buffer(in) << ", ";
    entry << outName << ");\n";
    traceEnd(entry);
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
    entry << "  float *" << name << " = nullptr;\n";
    traceBegin(entry, {kind.str(), shapeText(shapeOf(out)), names.label(op)},
               "offload", 0, costBytes(op));
    entry << "  if (int32_t st = api->move(dev, " << buffer(op->getOperand(0))
          << ", " << bytes << ", "
          << (toHost ? "SD_HOST_MEMORY" : "SD_DEVICE_MEMORY")
          << ", reinterpret_cast<void **>(&" << name << "), "
          << cString(names.op(op)) << ")) return st;\n";
    traceEnd(entry);
    bufferNames[out] = name;
    owned.insert(out);
    if (toHost)
      hostStorage.insert(out);
    return success();
  }
  if (auto dot = dyn_cast<DotGeneralOp>(op))
    return emitGemm(dot, entry);
  std::string o = allocate(out, entry, "SD_DEVICE_MEMORY");
  traceBegin(entry, {opKindName(op), shapeText(shapeOf(out)), names.label(op)},
             "kernel", costFlops(op), costBytes(op));
  // Closes the span after the call the switch writes.
  llvm::scope_exit closeSpan([&] { traceEnd(entry); });
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
    kernelOps[k].push_back(&op);
  }
  for (Operation &op : body) {
    auto kind = op.getAttrOfType<StringAttr>(kKernelKindAttrName);
    if (!kind)
      continue;
    Step step{&op, kind.getValue(), {}, {}, {}};
    if (step.kind == "fused" || step.kind == "reduce") {
      KernelFunction kernel;
      if (failed(emitKernelFunction(&op, members.lookup(kernelOf(&op)),
                                    kernel)))
        return failure();
      step.function = std::move(kernel.text);
      step.inputs = std::move(kernel.inputs);
      step.identityRead = std::move(kernel.identityRead);
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
     << kProgramABIText << kKernelHelpers << "\n"
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
