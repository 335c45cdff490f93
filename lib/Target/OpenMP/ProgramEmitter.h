//===- ProgramEmitter.h - the emitter, shared by its files ------*- C++ -*-===//
//
// The ProgramEmitter behind emitOpenMPProgram and the steps it plans, shared
// by the files that define it: OpenMPEmitter.cpp plans the steps and writes
// their code (storage, donation, kernel calls, results); ProgramFiles.cpp
// writes that code out as the program's C++ files. Internal to
// lib/Target/OpenMP.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_TARGET_OPENMP_PROGRAMEMITTER_H
#define SD_LIB_TARGET_OPENMP_PROGRAMEMITTER_H

#include "sd/Target/OpenMP/KernelBuilder.h"
#include "sd/Target/OpenMP/OpenMPDialect.h"
#include "sd/Target/OpenMP/ProgramBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mlir::sd::openmp {

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

} // namespace mlir::sd::openmp

#endif // SD_LIB_TARGET_OPENMP_PROGRAMEMITTER_H
