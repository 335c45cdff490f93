//===- OpenMPEmitter.cpp - write a planned function as C++/OpenMP ---------===//
//
// Reads the plan of sd-lower-to-openmp (`sd_omp.plan`) and writes the
// program as a few C++ files in one text, in LLVM's split-file form (a
// `//--- NAME` line starts each file), so that the runtime compiles them in
// parallel:
// - `sd_program.h`: the ABI header, constants and the kernels' declarations;
// - `sd_kernels.h`: the kernels' helpers (and the standard headers they
//   need);
// - `program.cpp`: `sd_program_run`, which makes the frame (the arguments
//   `a[N]` and the buffers that outlive their step, `b[N]`) and calls the
//   step functions in order;
// - `steps_N.cpp`: a function running a few hundred steps (allocations,
//   kernel and runtime calls, releases), the static tables (shapes,
//   collective descriptors) they read and the standard headers they need;
// - `kernels_N.cpp`: one function per distinct fused kernel
//   (KernelBuilder.cpp). Kernels with the same body (the same loop nest at
//   the same shapes, which a transformer repeats in every layer) are one
//   function, written once.
// Files are balanced by the size of their text, and how many there are
// depends on the program only, so the text (the cache key) does not depend
// on the machine.
// The emitter knows no op: a kernel's ops are written by the KernelBuilder
// through their interface, and every other step by its op's
// OpenMPLoweringOpInterface::emitCall.
//
// Memory: every materialized value gets a buffer from the runtime and is
// released after its last reader; a view (reshape) of a materialized value
// aliases its buffer. Arguments are borrowed, except that a result donated
// into an argument (`sd.aliases`) whose kernel reads that argument only
// where it writes, as its last use, is computed in place. Every result is a
// distinct buffer the runtime then owns; others are copies.
//
//===----------------------------------------------------------------------===//

#include "sd/Target/OpenMP/OpenMPEmitter.h"

#include "sd/Analysis/CostModel.h"
#include "sd/IR/SDOps.h"
#include "sd/Target/OpenMP/OpenMPDialect.h"
#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/Path.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

/// The text of sd/Runtime/ProgramABI.h, embedded at build time.
static const char kProgramABIText[] =
#include "sd/Target/OpenMP/ProgramABI.inc"
    ;

//===----------------------------------------------------------------------===//
// ProgramBuilder
//===----------------------------------------------------------------------===//

std::string mlir::sd::openmp::cString(StringRef s) {
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

std::string mlir::sd::openmp::shapeText(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "1";
  return llvm::join(
      llvm::map_range(shape, [](int64_t d) { return std::to_string(d); }), "x");
}

// Every runtime call the program makes is bracketed by trace_begin/end with
// a literal name and the op's cost (CostOpInterface), so that a trace shows
// which op each span is and how far from its roofline it ran.

int64_t mlir::sd::openmp::costFlops(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getFlops() : 0;
}

int64_t mlir::sd::openmp::costBytes(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getBytesAccessed() : 0;
}

std::string Namer::value(Value v) {
  std::string s;
  llvm::raw_string_ostream os(s);
  v.printAsOperand(os, state);
  return s;
}

std::string Namer::op(Operation *op) {
  std::string s;
  if (op->getNumResults())
    s = value(op->getResult(0)) + " = ";
  s += op->getName().getStringRef().str();
  if (auto loc = dyn_cast<FileLineColLoc>(op->getLoc()))
    s += " (" + llvm::sys::path::filename(loc.getFilename().getValue()).str() +
         ":" + std::to_string(loc.getLine()) + ")";
  return s;
}

std::string Namer::label(Operation *op) {
  if (auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
    return name.getValue().str();
  if (auto loc = op->getLoc()->findInstanceOf<FileLineColLoc>())
    return "(" + llvm::sys::path::filename(loc.getFilename().getValue()).str() +
           ":" + std::to_string(loc.getLine()) + ")";
  return op->getNumResults() ? value(op->getResult(0)) : "";
}

std::string ProgramBuilder::buffer(Value v) {
  auto it = bufferNames.find(v);
  if (it != bufferNames.end())
    return it->second;
  return "nullptr /* unplanned */";
}

std::string ProgramBuilder::typedSlot(StringRef slot, Type type) {
  if (cast<RankedTensorType>(type).getElementType().isBF16())
    return ("reinterpret_cast<sd_bf16 *>(" + slot + ")").str();
  return slot.str();
}

std::string ProgramBuilder::allocate(Value v, StringRef space) {
  std::string slot = freshBuffer();
  entryOs << "  " << slot << " = static_cast<float *>(api->alloc(dev, "
          << bufferBytes(v.getType()) << ", " << space << ", "
          << cString(names.of(v)) << "));\n"
          << "  if (!" << slot << ") return 1;\n";
  std::string name = typedSlot(slot, v.getType());
  bufferNames[v] = name;
  owned.insert(v);
  countAllocation(v, space == "SD_HOST_MEMORY");
  return name;
}

void ProgramBuilder::adoptBuffer(Value v, StringRef slot, bool host) {
  bufferNames[v] = typedSlot(slot, v.getType());
  owned.insert(v);
  if (host)
    hostStorage.insert(v);
  countAllocation(v, host);
}

void ProgramBuilder::countAllocation(Value v, bool host) {
  int64_t bytes = bufferBytes(v.getType());
  countedBytes[v] = {bytes, host};
  countBytes(v, bytes, host, /*kept=*/false);
}

void ProgramBuilder::countKept(Value v, int64_t bytes, bool host) {
  countBytes(v, bytes, host, /*kept=*/true);
}

void ProgramBuilder::countBytes(Value v, int64_t bytes, bool host, bool kept) {
  if (host) {
    liveHost += bytes;
    counted.hostPeakBytes = std::max(counted.hostPeakBytes, liveHost);
    return;
  }
  liveDevice += bytes;
  deviceEvents.push_back({v, bytes, kept});
  if (liveDevice > counted.devicePeakBytes) {
    counted.devicePeakBytes = liveDevice;
    eventsAtPeak = deviceEvents.size();
    temporaryAtPeak = {};
  }
}

void ProgramBuilder::countRelease(Value v) {
  auto it = countedBytes.find(v);
  if (it == countedBytes.end())
    return;
  auto [bytes, host] = it->second;
  (host ? liveHost : liveDevice) -= bytes;
  if (!host)
    deviceEvents.push_back({v, -bytes, /*kept=*/false});
  countedBytes.erase(it);
}

void ProgramBuilder::countTemporary(Operation *op, int64_t bytes) {
  if (liveDevice + bytes <= counted.devicePeakBytes)
    return;
  counted.devicePeakBytes = liveDevice + bytes;
  eventsAtPeak = deviceEvents.size();
  temporaryAtPeak = {"a temporary of " + op->getName().getStringRef().str() +
                         " " + names.label(op),
                     bytes};
}

std::string ProgramBuilder::describe(Value v) {
  // "sd.softmax 4x256x256 (dit.mlir:43)"
  Operation *def = v.getDefiningOp();
  std::string shape = shapeText(shapeOf(v));
  if (!def)
    return "argument " + names.value(v) + " " + shape;
  return def->getName().getStringRef().str() + " " + shape + " " +
         names.label(def);
}

ProgramMemory ProgramBuilder::memory() {
  // The values live at the peak: the events before it, replayed. A result's
  // copy is never released, so it is kept apart from its value's buffer.
  DenseMap<Value, std::pair<size_t, int64_t>> live;
  std::vector<std::pair<size_t, const DeviceEvent *>> kept;
  for (size_t i = 0; i < eventsAtPeak; ++i) {
    const DeviceEvent &event = deviceEvents[i];
    if (event.kept)
      kept.push_back({i, &event});
    else if (event.bytes > 0)
      live[event.value] = {i, event.bytes};
    else
      live.erase(event.value);
  }
  std::vector<std::tuple<int64_t, size_t, Value>> order;
  for (auto &[value, at] : live)
    order.push_back({at.second, at.first, value});
  for (auto [i, event] : kept)
    order.push_back({event->bytes, i, event->value});
  // Largest first; among equals, the earliest allocated.
  llvm::sort(order, [](const auto &a, const auto &b) {
    return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b)
                                            : std::get<1>(a) < std::get<1>(b);
  });
  ProgramMemory memory = counted;
  memory.devicePeakBuffers.clear();
  if (temporaryAtPeak.bytes > 0)
    memory.devicePeakBuffers.push_back(temporaryAtPeak);
  for (auto &[bytes, at, value] : order) {
    if (memory.devicePeakBuffers.size() >= ProgramMemory::kPeakBuffers)
      break;
    memory.devicePeakBuffers.push_back({describe(value), bytes});
  }
  std::stable_sort(
      memory.devicePeakBuffers.begin(), memory.devicePeakBuffers.end(),
      [](const ProgramMemory::Buffer &a, const ProgramMemory::Buffer &b) {
        return a.bytes > b.bytes;
      });
  return memory;
}

std::string ProgramBuilder::staticShape(ArrayRef<int64_t> values) {
  std::string name = "shape" + freshTag();
  staticsOs << "static const int64_t " << name << "[] = {"
            << (values.empty() ? "0" : intList(values)) << "};\n";
  return name;
}

void ProgramBuilder::traceBegin(ArrayRef<std::string> words, StringRef category,
                                int64_t flops, int64_t bytes) {
  std::string name;
  for (const std::string &word : words)
    if (!word.empty())
      name += (name.empty() ? "" : " ") + word;
  entryOs << "  api->trace_begin(dev, " << cString(name) << ", "
          << cString(category) << ", " << flops << ", " << bytes << ");\n";
}

void ProgramBuilder::emitKernelCall(
    Operation *op, function_ref<void(llvm::raw_ostream &, StringRef)> call) {
  Value out = op->getResult(0);
  std::string o = allocate(out);
  for (Value result : op->getResults().drop_front())
    allocate(result);
  traceBegin({op->getName().stripDialect().str(), shapeText(shapeOf(out)),
              names.label(op)},
             "kernel", costFlops(op), costBytes(op));
  call(entryOs, o);
  traceEnd();
}

MeshAttr ProgramBuilder::lookupMesh(Operation *op, FlatSymbolRefAttr ref) {
  return sd::lookupMesh(op, ref, [&] { return op->emitOpError(); });
}

//===----------------------------------------------------------------------===//
// The program
//===----------------------------------------------------------------------===//

namespace {

/// A kernel file holds about this many bytes of kernel text, and there are
/// at most kMaxKernelFiles of them.
constexpr size_t kKernelFileBytes = 12000;
constexpr size_t kMaxKernelFiles = 32;
/// The steps are functions of about this many bytes of code each, in files
/// of their own.
constexpr size_t kStepFileBytes = 96000;
/// Runs of at least kMinTableRun in-place calls of one kernel (the
/// optimizer's update of same-shaped parameters) loop over a table of
/// argument numbers, in tables of at most kMaxTableRun calls: code the
/// system compiler builds in a fraction of the time of one call each.
constexpr size_t kMinTableRun = 8;
constexpr size_t kMaxTableRun = 4096;

/// The parameters of every function that runs steps.
/// The frame's slots are `float *`; a bf16 buffer's slot is reinterpreted
/// (ProgramBuilder::typedSlot).
constexpr const char *kStepParameters =
    "(const SdApi *api, SdDevice *dev, float *const *a, float **b, "
    "void **results)";

/// What every file of the program may call: bf16 conversions (as
/// sd/Runtime/BFloat16.h converts: round to nearest even, NaN kept quiet),
/// without a standard header.
constexpr const char *kElementHelpers = R"cpp(
static inline float sd_bf16_to_f32(sd_bf16 x) {
  uint32_t bits = static_cast<uint32_t>(x.bits) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}
// Branch-free (a NaN is selected, not branched to), so that loops of
// conversions vectorize.
static inline uint32_t sd_bf16_round_bits(uint32_t bits) {
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  uint32_t quiet = (bits | 0x00400000u) & 0xffff0000u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
}
static inline sd_bf16 sd_f32_to_bf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  return sd_bf16{static_cast<uint16_t>(sd_bf16_round_bits(bits) >> 16)};
}
// The bf16 of a float that is one exactly (sd_round_bf16's results, values
// loaded from bf16): its high half, which sd_f32_to_bf16 would give too.
static inline sd_bf16 sd_bf16_of_exact(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  return sd_bf16{static_cast<uint16_t>(bits >> 16)};
}
static inline float sd_round_bf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  bits = sd_bf16_round_bits(bits);
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}
// A double rounded once to bf16: first to f32 rounding to odd (toward zero,
// the last bit set when inexact), which then rounds to bf16 as the double
// would have.
static inline sd_bf16 sd_double_to_bf16(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) != d && d == d) {
    uint32_t bits;
    __builtin_memcpy(&bits, &f, sizeof(bits));
    if (__builtin_fabs(static_cast<double>(f)) > __builtin_fabs(d))
      bits -= 1;
    bits |= 1u;
    __builtin_memcpy(&f, &bits, sizeof(f));
  }
  return sd_f32_to_bf16(f);
}
)cpp";

/// The distinct kinds of `ops` in order, the first few: "exp+mul+tanh".
std::string fusedKinds(ArrayRef<Operation *> ops) {
  constexpr size_t kMaxKinds = 6;
  SmallVector<std::string> kinds;
  bool more = false;
  for (Operation *op : ops) {
    std::string kind = op->getName().stripDialect().str();
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

/// One step of the entry function: a kernel, a library call, a collective.
struct Step {
  Operation *root;
  KernelAttr plan;
  /// Values whose buffers the step reads.
  SmallVector<Value> inputs;
  /// For fused kernels: the function (whose body text is independent of its
  /// name, so identical kernels can be keyed by it) and, per input, whether
  /// the kernel reads it only at the position it writes (in-place safe).
  KernelFunction function;
  /// The function the step calls: its own, or the first step's with the
  /// same body.
  std::string callee;
  /// The later steps that call this step's function.
  SmallVector<std::string> sharers;

  /// The values the step writes: its root's results, then a fused
  /// kernel's extra outputs.
  SmallVector<Value> results() const {
    SmallVector<Value> values(root->getResults().begin(),
                              root->getResults().end());
    llvm::append_range(values, function.outputs);
    return values;
  }

  /// Whether the step's function is its own (written in a kernel file).
  bool definesKernel() const { return isLoop() && callee == name(); }

  bool isLoop() const {
    return plan.getKind() == KernelKind::fused ||
           plan.getKind() == KernelKind::reduce;
  }
  std::string name() const { return getKernelName(plan.getId()); }
};

class ProgramEmitter : public ProgramBuilder {
public:
  ProgramEmitter(func::FuncOp func) : ProgramBuilder(func), func(func) {}
  LogicalResult emit(llvm::raw_ostream &os);

private:
  LogicalResult planSteps();
  void planStorage();
  void planDonation();
  LogicalResult emitEntry();
  LogicalResult emitStep(Step &step);
  /// A fused kernel's call: its trace span, cost and operands.
  struct KernelCall {
    std::string traceName;
    int64_t flops = 0, bytes = 0;
    /// Per operand (inputs, then outputs): its buffer expression and the
    /// argument it is (-1 for other buffers).
    SmallVector<std::string> operands;
    /// Per operand, its tensor type.
    SmallVector<Type, 4> elementTypes;
    SmallVector<int64_t> argumentOf;
    /// The arguments the call writes in place.
    SmallVector<int64_t> donated;
  };
  KernelCall kernelCall(Step &step);
  void emitDonations(const KernelCall &call, StringRef indent);
  void emitCallOf(StringRef callee, const KernelCall &call);
  void emitKernelStep(Step &step);
  bool writesInPlace(const Step &step) const;
  size_t tableRunLength(size_t first,
                        ArrayRef<SmallVector<Value>> releases) const;
  void emitTableRun(size_t first, size_t count);
  void emitResults();
  void writeFiles(llvm::raw_ostream &os);
  /// The entry's SdSignature and sd_program_signature.
  void writeSignature(llvm::raw_ostream &os);
  int64_t writeStepFiles(llvm::raw_ostream &os);
  void writeKernelFiles(llvm::raw_ostream &os);
  Value storageOf(Value v) {
    while (aliasOf.count(v))
      v = aliasOf.lookup(v);
    return v;
  }

  func::FuncOp func;
  func::ReturnOp ret;
  std::vector<Step> steps;
  DenseMap<Value, Value> aliasOf;
  /// Step index of the last read of each storage, and of each result's
  /// definition.
  DenseMap<Value, int64_t> lastUse;
  DenseMap<Value, int64_t> defStep;
  /// Storage that the function returns.
  DenseSet<Value> returned;
  /// Results written in place into an argument: result value -> argument.
  DenseMap<Value, int64_t> inPlace;
  /// The ops of each fused kernel, in program order (for its trace span).
  DenseMap<int64_t, SmallVector<Operation *>> kernelOps;
  /// Where each step's code and statics end in entryText and staticsText.
  struct StepEnd {
    size_t entry, statics;
    /// The standard headers the step needs.
    SmallVector<StringRef, 0> includes;
  };
  std::vector<StepEnd> stepEnds;
};

} // namespace

LogicalResult ProgramEmitter::planSteps() {
  Block &body = func.getBody().front();
  DenseMap<int64_t, SmallVector<std::string>> members;
  DenseMap<int64_t, SmallVector<Value>> outputs;
  llvm::StringMap<size_t> stepWithBody;
  for (Operation &op : body.without_terminator()) {
    if (!getPlan(&op))
      return op.emitOpError("has no 'sd_omp.plan'; run sd-lower-to-openmp "
                            "first");
    if (std::optional<int64_t> id = getKernelId(&op)) {
      bool stored = isa<KernelOutputAttr>(getPlan(&op));
      members[*id].push_back(names.op(&op) + (stored ? " (stored)" : ""));
      kernelOps[*id].push_back(&op);
      if (stored)
        outputs[*id].push_back(op.getResult(0));
    }
  }
  for (Operation &op : body.without_terminator()) {
    auto plan = dyn_cast<KernelAttr>(getPlan(&op));
    if (!plan)
      continue;
    Step step{&op, plan, {}, {}, {}, {}};
    if (step.isLoop()) {
      KernelBuilder kernel(&op, members[plan.getId()], outputs[plan.getId()]);
      if (failed(kernel.build(step.function)))
        return failure();
      step.inputs = step.function.inputs;
      auto [first, isNew] =
          stepWithBody.try_emplace(step.function.body, steps.size());
      step.callee = isNew ? step.name() : steps[first->second].name();
      if (!isNew)
        steps[first->second].sharers.push_back(step.name());
    } else {
      step.inputs = llvm::to_vector(op.getOperands());
    }
    steps.push_back(std::move(step));
  }
  return success();
}

/// Storage: a view shares its operand's buffer, and so does a call that
/// completes its result in an operand's (getResultBufferOperand); each
/// storage is released after its last reader.
void ProgramEmitter::planStorage() {
  for (Step &step : steps) {
    if (step.plan.getKind() == KernelKind::alias) {
      aliasOf[step.root->getResult(0)] = step.root->getOperand(0);
      continue;
    }
    int64_t shared =
        cast<OpenMPLoweringOpInterface>(step.root).getResultBufferOperand();
    if (shared >= 0)
      aliasOf[step.root->getResult(0)] = step.root->getOperand(shared);
  }
  for (auto [i, step] : llvm::enumerate(steps)) {
    for (Value result : step.results()) {
      Value st = storageOf(result);
      if (!lastUse.count(st))
        lastUse[st] = i;
      defStep[result] = i;
    }
    for (Value in : step.inputs)
      lastUse[storageOf(in)] = i;
  }
  for (Value v : ret.getOperands())
    returned.insert(storageOf(v));
}

/// Donation: a fused kernel that reads argument i only where it writes, as
/// its last use, writes its donated result into argument i's buffer.
void ProgramEmitter::planDonation() {
  // The arguments already written in place: a set, not a search of
  // inPlace per result, which a program of thousands of parameters (three
  // donated results each) makes quadratic.
  DenseSet<int64_t> donatedArgs;
  for (auto [j, v] : llvm::enumerate(ret.getOperands())) {
    auto aliases =
        func.getResultAttrOfType<IntegerAttr>(j, SDDialect::kAliasesAttrName);
    if (!aliases || !defStep.count(v))
      continue;
    int64_t argIndex = aliases.getInt();
    Value arg = func.getArgument(argIndex);
    Step &step = steps[defStep.lookup(v)];
    if (step.plan.getKind() != KernelKind::fused || inPlace.count(v) ||
        returned.count(arg) || lastUse.lookup(arg) != defStep.lookup(v) ||
        donatedArgs.contains(argIndex))
      continue;
    bool reads = false, identity = true;
    for (auto [k, in] : llvm::enumerate(step.inputs)) {
      if (storageOf(in) != arg)
        continue;
      reads = true;
      identity = identity && step.function.identityRead[k];
    }
    if (reads && identity) {
      inPlace[v] = argIndex;
      donatedArgs.insert(argIndex);
    }
  }
}

/// A fused kernel's call, each output into a fresh buffer or a donated
/// argument; the outputs' buffers are planned when it is made.
ProgramEmitter::KernelCall ProgramEmitter::kernelCall(Step &step) {
  KernelCall call;
  auto add = [&](int64_t argument, std::string expr) {
    call.argumentOf.push_back(argument);
    call.operands.push_back(std::move(expr));
  };
  for (Value in : step.inputs) {
    auto arg = dyn_cast<BlockArgument>(storageOf(in));
    std::string expr = buffer(in);
    int64_t argument = arg && expr == bufferNames.lookup(arg)
                           ? static_cast<int64_t>(arg.getArgNumber())
                           : -1;
    add(argument, std::move(expr));
    call.elementTypes.push_back(in.getType());
    call.bytes += bufferBytes(in.getType());
  }
  for (Value out : step.results()) {
    auto donated = inPlace.find(out);
    if (donated != inPlace.end()) {
      bufferNames[out] = typedSlot(
          "a[" + std::to_string(donated->second) + "]", out.getType());
      call.donated.push_back(donated->second);
      add(donated->second, bufferNames[out]);
    } else {
      add(-1, allocate(out));
    }
    call.elementTypes.push_back(out.getType());
    // Its memory traffic is its buffers, not its ops' operands.
    call.bytes += bufferBytes(out.getType());
  }
  ArrayRef<Operation *> ops = kernelOps[step.plan.getId()];
  for (Operation *member : ops)
    call.flops += costFlops(member);
  call.traceName = step.name() + " " + fusedKinds(ops);
  if (std::string label = names.label(step.root); !label.empty())
    call.traceName += " " + label;
  return call;
}

void ProgramEmitter::emitDonations(const KernelCall &call, StringRef indent) {
  for (int64_t arg : call.donated)
    entryOs << indent << "// in place: donated into argument " << arg << "\n";
}

/// `call` of `callee` as one statement in its trace span.
void ProgramEmitter::emitCallOf(StringRef callee, const KernelCall &call) {
  emitDonations(call, "  ");
  traceBegin({call.traceName}, "kernel", call.flops, call.bytes);
  entryOs << "  " << callee << "(" << llvm::join(call.operands, ", ") << ");\n";
  traceEnd();
}

void ProgramEmitter::emitKernelStep(Step &step) {
  emitCallOf(step.callee, kernelCall(step));
}

/// Whether `step` is a fused kernel writing every result in place (so that
/// it allocates nothing).
bool ProgramEmitter::writesInPlace(const Step &step) const {
  if (!step.isLoop())
    return false;
  return llvm::all_of(step.results(),
                      [&](Value out) { return inPlace.count(out); });
}

/// Steps first.. that can run as one loop over a table: in-place calls of
/// one function after which nothing is released, differing only in which
/// arguments they read and write; how many (at most kMaxTableRun).
size_t
ProgramEmitter::tableRunLength(size_t first,
                               ArrayRef<SmallVector<Value>> releases) const {
  size_t end = first;
  while (end < steps.size() && end - first < kMaxTableRun &&
         writesInPlace(steps[end]) && releases[end].empty() &&
         steps[end].callee == steps[first].callee)
    ++end;
  return end - first;
}

/// Steps first..first+count-1 (tableRunLength's) as one loop over a static
/// table of the arguments each call reads, or one by one where they differ
/// in more than arguments. Each call keeps its trace span's name.
void ProgramEmitter::emitTableRun(size_t first, size_t count) {
  std::vector<KernelCall> calls;
  for (size_t i = first; i < first + count; ++i)
    calls.push_back(kernelCall(steps[i]));
  const KernelCall &head = calls.front();
  // Per operand: the column of the table it is read from, or -1 when every
  // call passes the same buffer.
  SmallVector<int64_t> column(head.operands.size(), -1);
  int64_t columns = 0;
  bool tabular = true;
  for (auto [k, expr] : llvm::enumerate(head.operands)) {
    bool same = llvm::all_of(
        calls, [&](const KernelCall &c) { return c.operands[k] == expr; });
    if (same)
      continue;
    tabular = tabular && llvm::all_of(calls, [&](const KernelCall &c) {
                return c.argumentOf[k] >= 0;
              });
    column[k] = columns++;
  }
  tabular = tabular && llvm::all_of(calls, [&](const KernelCall &c) {
              return c.flops == head.flops && c.bytes == head.bytes;
            });
  const std::string &callee = steps[first].callee;
  if (!tabular) {
    for (auto [i, call] : llvm::enumerate(calls)) {
      entryOs << "  // " << names.op(steps[first + i].root) << "\n";
      emitCallOf(callee, call);
    }
    return;
  }
  std::string tag = freshTag();
  entryOs << "  // " << steps[first].name() << " .. "
          << steps[first + count - 1].name() << ": " << count << " calls of "
          << callee << " in place, arguments from run" << tag << "\n"
          << "  {\n"
          << "    static const int32_t run" << tag << "[" << count << "]["
          << std::max<int64_t>(columns, 1) << "] = {\n";
  for (auto [i, call] : llvm::enumerate(calls)) {
    entryOs << "      // " << names.op(steps[first + i].root) << "\n";
    emitDonations(call, "      ");
    SmallVector<std::string> row;
    for (auto [k, col] : llvm::enumerate(column))
      if (col >= 0)
        row.push_back(std::to_string(call.argumentOf[k]));
    if (row.empty())
      row.push_back("0");
    entryOs << "      {" << llvm::join(row, ", ") << "},\n";
  }
  entryOs << "    };\n"
          << "    static const char *const run" << tag << "_names[" << count
          << "] = {\n";
  for (const KernelCall &call : calls)
    entryOs << "      " << cString(call.traceName) << ",\n";
  entryOs << "    };\n"
          << "    for (int64_t i = 0; i < " << count << "; ++i) {\n"
          << "      const int32_t *s = run" << tag << "[i];\n"
          << "      (void)s;\n"
          << "      api->trace_begin(dev, run" << tag << "_names[i], "
          << "\"kernel\", " << head.flops << ", " << head.bytes << ");\n"
          << "      " << callee << "(";
  for (auto [k, col] : llvm::enumerate(column)) {
    if (k)
      entryOs << ", ";
    if (col < 0)
      entryOs << head.operands[k];
    else
      entryOs << typedSlot("a[s[" + std::to_string(col) + "]]",
                           head.elementTypes[k]);
  }
  entryOs << ");\n"
          << "      api->trace_end(dev);\n"
          << "    }\n"
          << "  }\n";
}

LogicalResult ProgramEmitter::emitStep(Step &step) {
  Operation *op = step.root;
  entryOs << "  // " << names.op(op) << " [" << step.name() << " "
          << stringifyKernelKind(step.plan.getKind()) << "]\n";
  if (step.isLoop()) {
    emitKernelStep(step);
    return success();
  }
  if (step.plan.getKind() == KernelKind::alias) {
    Value out = op->getResult(0);
    aliasOf[out] = op->getOperand(0);
    bufferNames[out] = buffer(op->getOperand(0));
    return success();
  }
  return cast<OpenMPLoweringOpInterface>(op).emitCall(*this);
}

/// The steps, each followed by the releases of the buffers whose last
/// reader it was.
LogicalResult ProgramEmitter::emitEntry() {
  for (BlockArgument arg : func.getArguments())
    bufferNames[arg] =
        typedSlot("a[" + std::to_string(arg.getArgNumber()) + "]",
                  arg.getType());
  SmallVector<SmallVector<Value>> releases(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    Step &step = steps[i];
    if (size_t run = tableRunLength(i, releases); run >= kMinTableRun) {
      emitTableRun(i, run);
      i += run - 1;
      stepEnds.push_back(
          {entryText.size(), staticsText.size(), stepIncludes.takeVector()});
      continue;
    }
    if (failed(emitStep(step)))
      return failure();
    for (Value st : releases[i]) {
      entryOs << "  api->release(dev, " << buffer(st) << ");\n";
      countRelease(st);
    }
    // Schedule this step's own outputs if they are owned.
    for (Value out : step.results()) {
      if (!owned.count(out) || returned.count(out))
        continue;
      int64_t last = lastUse.lookup(out);
      if (last == static_cast<int64_t>(i)) {
        entryOs << "  api->release(dev, " << buffer(out) << ");\n";
        countRelease(out);
      } else
        releases[last].push_back(out);
    }
    stepEnds.push_back(
        {entryText.size(), staticsText.size(), stepIncludes.takeVector()});
  }
  return success();
}

/// Results: each a distinct buffer the runtime now owns.
void ProgramEmitter::emitResults() {
  DenseSet<Value> claimed;
  // Results that are arguments, (result, argument), written as a loop over
  // a table when there are many in a row.
  SmallVector<std::pair<int64_t, int64_t>> fromArguments;
  auto flush = [&] {
    for (size_t first = 0; first < fromArguments.size();
         first += kMaxTableRun) {
      auto chunk = ArrayRef(fromArguments)
                       .slice(first, std::min(kMaxTableRun,
                                              fromArguments.size() - first));
      if (chunk.size() < kMinTableRun) {
        for (auto [result, arg] : chunk)
          entryOs << "  results[" << result << "] = a[" << arg << "];\n";
      } else {
        std::string tag = freshTag();
        entryOs << "  {\n    static const int32_t res" << tag << "["
                << chunk.size() << "][2] = {\n";
        for (auto [result, arg] : chunk)
          entryOs << "      {" << result << ", " << arg << "},\n";
        entryOs << "    };\n    for (int64_t i = 0; i < " << chunk.size()
                << "; ++i)\n      results[res" << tag << "[i][0]] = a[res"
                << tag << "[i][1]];\n  }\n";
      }
      stepEnds.push_back({entryText.size(), staticsText.size(), {}});
    }
    fromArguments.clear();
  };
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
      // The argument whose buffer holds it: the argument itself, or the
      // one it was written into in place.
      Value arg = isa<BlockArgument>(st) ? st
                  : inPlace.count(st)    ? func.getArgument(inPlace.lookup(st))
                                         : Value();
      if (arg && buffer(v) == bufferNames.lookup(arg)) {
        fromArguments.emplace_back(j, cast<BlockArgument>(arg).getArgNumber());
        continue;
      }
      flush();
      entryOs << "  results[" << j << "] = " << buffer(v) << ";\n";
      stepEnds.push_back({entryText.size(), staticsText.size(), {}});
      continue;
    }
    flush();
    int64_t bytes = bufferBytes(v.getType());
    std::string name = "r" + std::to_string(j);
    // A copy the runtime keeps: it stays live to the end.
    countKept(v, bytes, hostStorage.count(st));
    include("<cstring>");
    entryOs << "  float *" << name << " = static_cast<float *>(api->alloc(dev, "
            << bytes << ", "
            << (hostStorage.count(st) ? "SD_HOST_MEMORY" : "SD_DEVICE_MEMORY")
            << ", "
            << cString("result #" + std::to_string(j) + ": " + names.of(v))
            << "));\n"
            << "  if (!" << name << ") return 1;\n"
            << "  std::memcpy(" << name << ", " << buffer(v) << ", " << bytes
            << ");\n"
            << "  results[" << j << "] = " << name << ";\n";
    // A step file may end after any result: a program of tens of
    // thousands of results is not one function the compiler chews on for
    // a minute.
    stepEnds.push_back(
        {entryText.size(), staticsText.size(), stepIncludes.takeVector()});
  }
  flush();
}

/// The distinct kernels, in files of about kKernelFileBytes each.
void ProgramEmitter::writeKernelFiles(llvm::raw_ostream &os) {
  SmallVector<const Step *> kernels;
  size_t bytes = 0;
  for (const Step &step : steps)
    if (step.definesKernel()) {
      kernels.push_back(&step);
      bytes += step.function.body.size();
    }
  size_t files = std::clamp<size_t>(llvm::divideCeil(bytes, kKernelFileBytes),
                                    1, kMaxKernelFiles);
  size_t perFile = llvm::divideCeil(bytes, files), written = 0, file = 0;
  for (auto [i, step] : llvm::enumerate(kernels)) {
    // A new file starts when this one holds its share.
    if (i == 0 || written >= perFile * file) {
      os << "//--- kernels_" << file++ << ".cpp\n"
         << "#include \"sd_kernels.h\"\n";
    }
    written += step->function.body.size();
    os << step->function.comment;
    if (!step->sharers.empty())
      os << "//   (also called as " << llvm::join(step->sharers, ", ")
         << ": the same loop nest)\n";
    os << "SD_LOCAL void " << step->name() << step->function.body;
  }
}

/// The steps, in functions `sd_steps_N` of about kStepFileBytes each, a
/// file each with the statics they read; returns how many.
int64_t ProgramEmitter::writeStepFiles(llvm::raw_ostream &os) {
  // The results are written after the last step.
  if (stepEnds.empty())
    stepEnds.push_back({0, 0, {}});
  stepEnds.back().entry = entryText.size();
  llvm::append_range(stepEnds.back().includes, stepIncludes.takeVector());
  StringRef entry = entryText, statics = staticsText;
  int64_t files = 0;
  size_t beginEntry = 0, beginStatics = 0;
  llvm::SetVector<StringRef> includes;
  for (auto [i, end] : llvm::enumerate(stepEnds)) {
    includes.insert(end.includes.begin(), end.includes.end());
    if (end.entry - beginEntry < kStepFileBytes && i + 1 != stepEnds.size())
      continue;
    std::string index = std::to_string(files++);
    os << "//--- steps_" << index << ".cpp\n"
       << "#include \"sd_program.h\"\n";
    for (StringRef name : includes)
      os << "#include " << name << "\n";
    os << "\n"
       << statics.slice(beginStatics, end.statics) << "\n"
       << "SD_STEPS int32_t sd_steps_" << index << kStepParameters << " {\n"
       << "  (void)api;\n  (void)dev;\n  (void)a;\n  (void)b;\n"
       << "  (void)results;\n"
       << entry.slice(beginEntry, end.entry) << "  return 0;\n}\n";
    beginEntry = end.entry;
    beginStatics = end.statics;
    includes.clear();
  }
  return files;
}

/// The files: provenance, then the header (ABI, helpers, constants, kernel
/// declarations), the entry function, the steps and the kernels.
void ProgramEmitter::writeFiles(llvm::raw_ostream &os) {
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
     << "// C++ files in split-file form (each starts at its `//--- NAME` "
        "line). Build:\n"
     << "//   split-file THIS DIR && c++ -O3 -march=native -fopenmp -fPIC "
        "-shared DIR/*.cpp\n"
     << "//--- sd_program.h\n"
     << kProgramABIText << "\n"
     << "// Functions of the program's own (shared object).\n"
     << "#define SD_LOCAL __attribute__((visibility(\"hidden\")))\n"
     << "// The steps are straight-line calls: optimizing them harder than\n"
     << "// -O1 makes them no faster, only slower to compile.\n"
     << "#if defined(__GNUC__) && !defined(__clang__)\n"
     << "#define SD_STEPS SD_LOCAL __attribute__((optimize(\"O1\")))\n"
     << "#else\n"
     << "#define SD_STEPS SD_LOCAL\n"
     << "#endif\n"
     << kElementHelpers << "\n"
     << sharedText;
  for (Step &step : steps)
    if (step.definesKernel()) {
      StringRef body = step.function.body;
      os << "SD_LOCAL void " << step.name()
         << body.take_front(body.find(" {\n")) << ";\n";
    }
  std::string stepFiles;
  llvm::raw_string_ostream stepOs(stepFiles);
  int64_t numStepFunctions = writeStepFiles(stepOs);
  os << "//--- sd_kernels.h\n"
     << "#include \"sd_program.h\"\n"
     << kKernelHelpers;
  os << "//--- program.cpp\n"
     << "#include \"sd_program.h\"\n\n"
     << "#include <memory>\n\n"
     << "extern \"C\" int32_t sd_program_abi_version(void) { return "
        "SD_ABI_VERSION; }\n\n";
  writeSignature(os);
  for (int64_t i = 0; i < numStepFunctions; ++i)
    os << "SD_STEPS int32_t sd_steps_" << i << kStepParameters << ";\n";
  size_t numArgs = func.getNumArguments();
  os << "\nextern \"C\" int32_t sd_program_run(const SdApi *api, SdDevice "
        "*dev, void *const *args, void **results) {\n"
     << "  // The arguments, and the buffers that outlive their step.\n"
     << "  std::unique_ptr<float *[]> a(new float *[" << numArgs + 1 << "]);\n"
     << "  for (int i = 0; i < " << numArgs
     << "; ++i)\n    a[i] = static_cast<float *>(args[i]);\n"
     << "  std::unique_ptr<float *[]> b(new float *[" << nextSlot + 1
     << "]());\n";
  for (int64_t i = 0; i < numStepFunctions; ++i)
    os << "  if (int32_t st = sd_steps_" << i
       << "(api, dev, a.get(), b.get(), results)) return st;\n";
  os << "  return 0;\n}\n" << stepFiles;
  writeKernelFiles(os);
}

/// `name`: the SdElementType of each of `types`, 16 a line; null for none.
static void writeTypeTable(llvm::raw_ostream &os, StringRef name,
                           TypeRange types) {
  if (types.empty()) {
    os << "static const int32_t *const " << name << " = nullptr;\n";
    return;
  }
  os << "static const int32_t " << name << "[] = {";
  for (auto [i, type] : llvm::enumerate(types))
    os << (i % 16 ? " " : "\n    ") << abiElementType(type) << ",";
  os << "};\n";
}

void ProgramEmitter::writeSignature(llvm::raw_ostream &os) {
  writeTypeTable(os, "sd_argument_types", func.getArgumentTypes());
  writeTypeTable(os, "sd_result_types", func.getResultTypes());
  os << "static const SdSignature sd_signature = {" << func.getNumArguments()
     << ", sd_argument_types, " << func.getNumResults()
     << ", sd_result_types};\n"
     << "extern \"C\" const SdSignature *sd_program_signature(void) {\n"
     << "  return &sd_signature;\n}\n\n";
}

LogicalResult ProgramEmitter::emit(llvm::raw_ostream &os) {
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitOpError("must have one block to be emitted as OpenMP");
  ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (failed(planSteps()))
    return failure();
  planStorage();
  planDonation();
  if (failed(emitEntry()))
    return failure();
  emitResults();
  writeFiles(os);
  return success();
}

LogicalResult mlir::sd::emitOpenMPProgram(func::FuncOp func,
                                          llvm::raw_ostream &os,
                                          ProgramMemory *memory) {
  ProgramEmitter emitter(func);
  if (failed(emitter.emit(os)))
    return failure();
  if (memory)
    *memory = emitter.memory();
  return success();
}
