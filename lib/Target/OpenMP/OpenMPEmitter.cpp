//===- OpenMPEmitter.cpp - write a planned function as C++/OpenMP ---------===//
//
// Reads the plan of sd-lower-to-openmp (`sd_omp.plan`) and writes the
// program's steps: the code of its entry function (allocations, kernel and
// runtime calls, releases) and the static tables it reads, which
// ProgramFiles.cpp then writes out as the program's C++ files. Each distinct
// fused kernel is one function (KernelBuilder.cpp): kernels with the same
// body (the same loop nest at the same shapes, which a transformer repeats
// in every layer) are written once and called from every step that runs
// them.
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

#include "ProgramEmitter.h"

#include "sd/IR/SDOps.h"
#include "sd/Target/OpenMP/OpenMPDialect.h"
#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

namespace {

/// Runs of at least kMinTableRun in-place calls of one kernel (the
/// optimizer's update of same-shaped parameters) loop over a table of
/// argument numbers, in tables of at most kMaxTableRun calls: code the
/// system compiler builds in a fraction of the time of one call each.
constexpr size_t kMinTableRun = 8;
constexpr size_t kMaxTableRun = 4096;

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
