//===- ProgramBuilder.cpp - what an op's emitCall writes into -------------===//
//
// The ProgramBuilder (ProgramBuilder.h): the program as an op's
// OpenMPLoweringOpInterface::emitCall sees it, and the base the emitter
// (OpenMPEmitter.cpp) builds on. It names buffers and allocates them, hands
// out fresh names and static shapes, opens trace spans, and counts the bytes
// the program allocates as it is written (ProgramMemory). Also the Namer and
// the text helpers the lowering models share.
//
//===----------------------------------------------------------------------===//

#include "sd/Target/OpenMP/ProgramBuilder.h"

#include "sd/Analysis/CostModel.h"
#include "sd/IR/SDOps.h"
#include "sd/Target/OpenMP/KernelBuilder.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

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
