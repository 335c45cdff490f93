//===- ProgramBuilder.h - the program an OpenMP lowering writes -*- C++ -*-===//
//
// The OpenMP emitter writes a planned function as a few C++ files:
// file-scope definitions (constants, shapes, collective descriptors), kernel
// functions, and the steps, a straight-line sequence of allocations, calls
// and releases split into functions of a few hundred steps each (one per
// file, so that they compile in parallel). Buffers that outlive a step live
// in the program's frame (`b[N]`), the arguments in `a[N]`. A ProgramBuilder
// is what an op sees of that program when it writes its own step
// (OpenMPLoweringOpInterface::emitCall): the buffers of its operands, its
// result's allocation, the streams, fresh names and trace spans.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TARGET_OPENMP_PROGRAMBUILDER_H
#define SD_TARGET_OPENMP_PROGRAMBUILDER_H

#include "sd/IR/SDAttrs.h"
#include "sd/Target/OpenMP/OpenMPEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::sd::openmp {

/// `s` as a C++ string literal.
std::string cString(StringRef s);

/// "8x16"; "1" for a scalar.
std::string shapeText(ArrayRef<int64_t> shape);

/// The op's FLOPs and bytes accessed by its CostOpInterface (0 without).
int64_t costFlops(Operation *op);
int64_t costBytes(Operation *op);

/// Names values and ops for comments, diagnostics and runtime errors.
class Namer {
public:
  explicit Namer(func::FuncOp func) : state(func) {}
  /// "%42".
  std::string value(Value v);
  /// "%42 = sd.dot_general (file:12)".
  std::string op(Operation *op);
  /// The defining op of `v`, else `v`.
  std::string of(Value v) {
    if (Operation *def = v.getDefiningOp())
      return op(def);
    return value(v);
  }
  /// What identifies `op` in a trace: its `sd.name`, else its source line
  /// "(dit.mlir:12)", else its first result "%42".
  std::string label(Operation *op);

private:
  AsmState state;
};

/// The program being written, as an op's emitCall sees it.
class ProgramBuilder {
public:
  explicit ProgramBuilder(func::FuncOp func) : names(func) {}

  /// The step's code, in the body of a function of the program; locals it
  /// declares must not outlive the step (see freshBuffer).
  llvm::raw_ostream &entry() { return entryOs; }
  /// File-scope definitions that only this step reads (shapes, collective
  /// descriptors), written in the file that holds the step.
  llvm::raw_ostream &statics() { return staticsOs; }
  /// File-scope definitions that later steps may read too (constants),
  /// written in the program's header.
  llvm::raw_ostream &sharedStatics() { return sharedOs; }
  /// Includes standard header `name` ("<cmath>") in the file that holds the
  /// step (the program's header holds only the ABI, so that files of steps
  /// that need nothing more compile fast).
  void include(StringRef name) { stepIncludes.insert(name); }

  /// The C++ expression of `v`'s buffer (a `float *` or `sd_bf16 *`).
  std::string buffer(Value v);
  /// Whether `v` has a buffer already (an earlier step computed it).
  bool hasBuffer(Value v) const { return bufferNames.count(v); }
  /// `buffer(v)`, or "nullptr" for an absent optional operand.
  std::string optionalBuffer(Value v) {
    return v ? buffer(v) : std::string("nullptr");
  }
  /// Allocates `v`'s buffer in `space` (SD_DEVICE_MEMORY, SD_HOST_MEMORY);
  /// the program releases it after its last reader. Returns `buffer(v)`.
  std::string allocate(Value v, StringRef space = "SD_DEVICE_MEMORY");
  /// Makes the frame slot `slot` (from freshBuffer), a buffer the op
  /// obtained itself in host or device memory, `v`'s buffer, released after
  /// its last reader.
  void adoptBuffer(Value v, StringRef slot, bool host);
  /// A frame slot ("b[3]", a `float *`) as a pointer to the elements of
  /// `type` (reinterpreted for bf16).
  static std::string typedSlot(StringRef slot, Type type);
  /// Makes `expr` `v`'s buffer without ownership (static storage).
  void setBuffer(Value v, std::string expr) {
    bufferNames[v] = std::move(expr);
  }

  /// A fresh local name, for a value the step alone uses: `prefix` and a
  /// number ("t13").
  std::string freshLocal(StringRef prefix) {
    return prefix.str() + std::to_string(nextBuffer++);
  }
  /// A fresh slot of the program's frame ("b[12]"), for a buffer that later
  /// steps read; slots start null.
  std::string freshBuffer() { return "b[" + std::to_string(nextSlot++) + "]"; }
  /// A fresh number for file-scope names ("coll7", "axes7").
  std::string freshTag() { return std::to_string(nextStatic++); }
  /// A static `int64_t` array holding `values`; returns its name.
  std::string staticShape(ArrayRef<int64_t> values);

  /// Opens a trace span named by the non-empty `words`, joined by blanks.
  void traceBegin(ArrayRef<std::string> words, StringRef category,
                  int64_t flops, int64_t bytes);
  void traceEnd() { entryOs << "  api->trace_end(dev);\n"; }

  /// A runtime kernel call of `op`: allocates its results, opens a "kernel"
  /// span with the op's cost, lets `call` write the call with the first
  /// result's buffer (the others are `buffer(result)`), closes the span.
  void emitKernelCall(Operation *op,
                      function_ref<void(llvm::raw_ostream &, StringRef)> call);

  /// The mesh `ref` names, or null after an error on `op`.
  MeshAttr lookupMesh(Operation *op, FlatSymbolRefAttr ref);
  /// Symbol lookups (CostOpInterface::getCommunication).
  SymbolTableCollection &getSymbols() { return symbols; }

  Namer names;

  /// The bytes the program's own allocations hold at once, in emission
  /// order (device, host): each allocation counts from where it is made
  /// to its release. A temporary (a transposed GEMM operand) is counted for
  /// its one call.
  void countAllocation(Value v, bool host);
  void countRelease(Value v);
  /// A buffer of `bytes` for one call of `op`.
  void countTemporary(Operation *op, int64_t bytes);
  /// `bytes` live from here to the program's end (a result's copy).
  void countKept(Value v, int64_t bytes, bool host);
  /// The counts, with the largest buffers live at the device peak.
  ProgramMemory memory();

protected:
  std::string entryText;
  llvm::raw_string_ostream entryOs{entryText};
  std::string staticsText;
  llvm::raw_string_ostream staticsOs{staticsText};
  std::string sharedText;
  llvm::raw_string_ostream sharedOs{sharedText};
  int64_t nextStatic = 0;
  int64_t nextBuffer = 0;
  int64_t nextSlot = 0;
  /// The standard headers the current step's code needs.
  llvm::SetVector<StringRef> stepIncludes;
  DenseMap<Value, std::string> bufferNames;
  /// Program-allocated storage (released after its last use).
  DenseSet<Value> owned;
  /// Storage in host memory.
  DenseSet<Value> hostStorage;
  SymbolTableCollection symbols;
  /// Live bytes per counted value and space, and the peaks.
  DenseMap<Value, std::pair<int64_t, bool>> countedBytes;
  int64_t liveDevice = 0, liveHost = 0;
  ProgramMemory counted;
  /// Device allocations (bytes > 0) and releases (< 0) of counted values in
  /// order; how many of them precede the device peak, and the temporary
  /// that made it, if one did.
  struct DeviceEvent {
    Value value;
    int64_t bytes;
    /// A result's copy (never released).
    bool kept;
  };
  std::vector<DeviceEvent> deviceEvents;
  size_t eventsAtPeak = 0;
  ProgramMemory::Buffer temporaryAtPeak;

private:
  void countBytes(Value v, int64_t bytes, bool host, bool kept);
  /// What `v` holds, for ProgramMemory::devicePeakBuffers.
  std::string describe(Value v);
};

} // namespace mlir::sd::openmp

#endif // SD_TARGET_OPENMP_PROGRAMBUILDER_H
