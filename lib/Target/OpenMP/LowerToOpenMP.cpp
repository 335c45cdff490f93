//===- LowerToOpenMP.cpp - plan kernels for the OpenMP lowering -----------===//
//
// Checks that a function can become OpenMP code (call-free, static f32 and
// bf16 shapes, every op with an OpenMPLoweringOpInterface), computes the
// calls that take f32 only in f32 between converts, and decides which ops
// fuse into one loop nest (see the pass description in Passes.td). The
// decision walks the ops once backwards, so every op sees its users'
// decisions: an op fuses into the kernel its users are in when they are all
// in one; an elementwise op whose users are in several kernels is computed
// in the first of them that loops over its shape, which also stores it
// (multi-output fusion), when every other reader runs later, and while the
// kernel holds fewer than max-fused-ops ops; cheap ops (splat
// constants, iota, index ops over materialized values) are recomputed in every
// kernel that reads them. What an op is comes from its interface alone. The
// emitter (OpenMPEmitter.cpp) reads the resulting `sd_omp.plan` attributes.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"
#include "sd/Target/OpenMP/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::sd {
#define GEN_PASS_DEF_LOWERTOOPENMP
#include "sd/Target/OpenMP/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd::openmp;
using namespace mlir::sd;

/// How the op's interface says it lowers; none for the terminator (and
/// for ops without the interface, which verifyLowerable rejects).
static std::optional<LoweringKind> kindOf(Operation *op) {
  if (auto lowering = dyn_cast<OpenMPLoweringOpInterface>(op))
    return lowering.getLoweringKind();
  return std::nullopt;
}

static bool isFusible(std::optional<LoweringKind> kind) {
  return kind == LoweringKind::Elementwise || kind == LoweringKind::IndexMap ||
         kind == LoweringKind::Cheap;
}

static bool isBufferView(Operation *op) {
  auto lowering = dyn_cast<OpenMPLoweringOpInterface>(op);
  return lowering && lowering.isBufferView();
}

namespace {
/// How an op takes part in the plan.
enum class Role {
  /// Its own kernel (or library call); its result is materialized.
  Root,
  /// Computed inside the kernel its users are in.
  Fused,
  /// Computed inside a later kernel, which also stores it (multi-output
  /// fusion).
  Output,
  /// Recomputed inside every kernel that reads it.
  Inline,
};
} // namespace

/// The kind of kernel a root op is.
static KernelKind kernelKind(Operation *op,
                             const DenseMap<Operation *, Role> &roles) {
  switch (*kindOf(op)) {
  case LoweringKind::Reduction:
    return KernelKind::reduce;
  case LoweringKind::Library:
    return KernelKind::library;
  case LoweringKind::Collective:
    return KernelKind::collective;
  case LoweringKind::Constant:
    return KernelKind::constant;
  case LoweringKind::Memory:
    return KernelKind::memory;
  case LoweringKind::Elementwise:
  case LoweringKind::IndexMap:
  case LoweringKind::Cheap:
    break;
  }
  // A view (reshape) of a value that already has a buffer reuses that
  // buffer.
  if (isBufferView(op)) {
    Operation *def = op->getOperand(0).getDefiningOp();
    if (!def || roles.lookup(def) == Role::Root)
      return KernelKind::alias;
  }
  return KernelKind::fused;
}

/// The name of `value` for diagnostics: `%42` as printed.
static std::string valueName(Value value, AsmState &state) {
  std::string name;
  llvm::raw_string_ostream os(name);
  value.printAsOperand(os, state);
  return name;
}

/// Checks a type of `what`: a static ranked tensor of f32 or bf16 (or i1
/// where `allowI1`).
static LogicalResult checkType(Type type, bool allowI1,
                               function_ref<InFlightDiagnostic()> emitError,
                               function_ref<std::string()> what) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return emitError() << what() << " is not a ranked tensor";
  if (!tensor.hasStaticShape())
    return emitError() << what() << " has the dynamic type " << type
                       << "; the OpenMP lowering needs static shapes "
                          "(run sd-specialize-batch first)";
  Type element = tensor.getElementType();
  if (element.isF32() || element.isBF16() || (allowI1 && element.isInteger(1)))
    return success();
  return emitError() << what() << " has element type " << element
                     << "; the OpenMP lowering supports f32 and bf16 tensors";
}

static bool hasBF16(TypeRange types) {
  return llvm::any_of(types, [](Type type) {
    return cast<RankedTensorType>(type).getElementType().isBF16();
  });
}

/// A tensor type of `type`'s shape with `element`.
static RankedTensorType withElement(Type type, Type element) {
  return cast<RankedTensorType>(type).clone(element);
}

/// Calls whose runtime functions take f32 only (OpenMPLoweringOpInterface::
/// takesBF16) compute in f32 between converts: each bf16 operand is
/// widened (exactly) before the call, and each bf16 result is computed in
/// f32 and rounded after it, which is what a bf16 op means. The converts
/// are elementwise ops that the plan fuses like any other.
static void widenCalls(func::FuncOp func) {
  SmallVector<Operation *> calls;
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto lowering = cast<OpenMPLoweringOpInterface>(op);
    if (!lowering.takesBF16() &&
        (hasBF16(op.getOperandTypes()) || hasBF16(op.getResultTypes())))
      calls.push_back(&op);
  }
  // One widened copy of each value, made before the first call that reads
  // it (calls are visited in program order, so it precedes the others):
  // calls that read the same operands (a flash backward's dQ and dK/dV
  // halves, which the emitter then runs as one call) read the same copy.
  DenseMap<Value, Value> widened;
  auto widen = [&](Value value, Operation *user) {
    Value &copy = widened[value];
    if (!copy) {
      OpBuilder builder(user);
      copy = ConvertOp::create(
          builder, value.getLoc(),
          withElement(value.getType(), builder.getF32Type()), value);
    }
    return copy;
  };
  for (Operation *op : calls) {
    for (OpOperand &operand : op->getOpOperands())
      if (cast<RankedTensorType>(operand.get().getType())
              .getElementType()
              .isBF16())
        operand.set(widen(operand.get(), op));
    OpBuilder builder(op);
    Type f32 = builder.getF32Type();
    builder.setInsertionPointAfter(op);
    for (OpResult result : op->getResults()) {
      Type type = result.getType();
      if (!cast<RankedTensorType>(type).getElementType().isBF16())
        continue;
      result.setType(withElement(type, f32));
      auto narrow = ConvertOp::create(builder, op->getLoc(), type, result);
      result.replaceAllUsesExcept(narrow, narrow);
    }
  }
}

/// Replaces each sd.adamw by the elementwise ops it stands for, which the
/// plan below fuses like any others.
static void decomposeOptimizerOps(func::FuncOp func) {
  SmallVector<AdamWOp> updates(func.getOps<AdamWOp>());
  OpBuilder builder(func.getContext());
  // The scalar constants the updates read, which the decomposition
  // replaces by splats of the parameters' types.
  llvm::SetVector<Operation *> scalars;
  for (AdamWOp update : updates) {
    std::array<Value, 3> values = update.decompose(builder);
    for (Value operand : update->getOperands())
      if (auto constant = operand.getDefiningOp<ConstantOp>())
        scalars.insert(constant);
    update->replaceAllUsesWith(ValueRange(values));
    update.erase();
  }
  for (Operation *constant : scalars)
    if (constant->use_empty())
      constant->erase();
}

namespace {
struct LowerToOpenMPPass
    : public mlir::sd::impl::LowerToOpenMPBase<LowerToOpenMPPass> {
  using LowerToOpenMPBase::LowerToOpenMPBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    LowerToOpenMPBase::getDependentDialects(registry);
    registerOpenMPLoweringInterfaces(registry);
  }
  LogicalResult verifyLowerable(func::FuncOp func);
  /// Decides the role of every op, users before producers.
  DenseMap<Operation *, Role>
  planRoles(ArrayRef<Operation *> ops,
            DenseMap<Operation *, Operation *> &fusedInto);
  void runOnOperation() override;
};

} // namespace

LogicalResult LowerToOpenMPPass::verifyLowerable(func::FuncOp func) {
  // Value names for an error only: numbering every value of a program of
  // hundreds of thousands of ops costs more than the checks.
  std::optional<AsmState> state;
  auto nameOf = [&](Value value) {
    if (!state)
      state.emplace(func);
    return valueName(value, *state);
  };
  if (func.isExternal())
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("has more than one block; the OpenMP lowering "
                            "needs straight-line functions");
  // Checks the type of `value`, named `role` in an error on `owner`.
  auto check = [&](Operation *owner, StringRef role, Value value,
                   bool allowI1) {
    return checkType(
        value.getType(), allowI1, [&] { return owner->emitOpError(); },
        [&] { return (role + " " + nameOf(value)).str(); });
  };
  for (BlockArgument arg : func.getArguments())
    if (failed(check(func, "argument", arg, /*allowI1=*/false)))
      return failure();
  for (Operation &op : func.getBody().front()) {
    bool terminator = op.hasTrait<OpTrait::IsTerminator>();
    if (isa<CallOpInterface>(op))
      return op.emitOpError("cannot be lowered to OpenMP: inline first "
                            "(the lowering needs call-free functions)");
    if (!terminator && !isa<OpenMPLoweringOpInterface>(op))
      return op.emitOpError("has no OpenMP lowering");
    if (op.getNumRegions() != 0)
      return op.emitOpError("has regions; the OpenMP lowering needs "
                            "straight-line functions");
    for (Value result : op.getResults())
      if (failed(check(&op, "result", result, /*allowI1=*/true)))
        return failure();
    for (Value operand : op.getOperands())
      if (!terminator && failed(check(&op, "operand", operand, true)))
        return failure();
  }
  return success();
}

/// The root of the kernel that computes `op` (an op already decided): the
/// op itself for roots, its kernel's root for fused ops and extra outputs,
/// null for inline ops. The roots found are kept in `memo` for every op
/// passed on the way (their roles are final once their producers are being
/// planned), so a chain of thousands of fused ops is walked once, not once
/// per op.
static Operation *kernelRootOf(Operation *op,
                               const DenseMap<Operation *, Role> &roles,
                               const DenseMap<Operation *, Operation *> &into,
                               DenseMap<Operation *, Operation *> &memo) {
  SmallVector<Operation *> path;
  Operation *root = nullptr;
  while (op) {
    if (auto known = memo.find(op); known != memo.end()) {
      root = known->second;
      break;
    }
    path.push_back(op);
    Role role = roles.lookup(op);
    if (role == Role::Root) {
      root = op;
      break;
    }
    if (role == Role::Inline)
      break;
    op = into.lookup(op);
  }
  for (Operation *passed : path)
    memo[passed] = root;
  return root;
}

/// Multi-output fusion of the elementwise `op`, whose users are in several
/// kernels: the earliest of its users' `fused` kernels that loops over
/// `op`'s shape computes it and stores it too, provided every reader
/// outside that kernel runs after it. Null when there is none.
static Operation *
outputKernelFor(Operation *op, const DenseMap<Operation *, int64_t> &position,
                const DenseMap<Operation *, Role> &roles,
                const DenseMap<Operation *, Operation *> &into,
                DenseMap<Operation *, Operation *> &memo) {
  auto shape = cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  auto positionOf = [&](Operation *x) {
    auto it = position.find(x);
    return it == position.end() ? static_cast<int64_t>(position.size())
                                : it->second;
  };
  Operation *best = nullptr;
  SmallVector<Operation *> readers;
  for (Operation *user : op->getUsers()) {
    if (!position.count(user)) {
      readers.push_back(user); // the return
      continue;
    }
    Operation *root = kernelRootOf(user, roles, into, memo);
    if (!root)
      return nullptr; // read inside kernels not known yet
    readers.push_back(root);
    if (!isFusible(kindOf(root)) || isBufferView(root) ||
        cast<RankedTensorType>(root->getResult(0).getType()).getShape() !=
            shape)
      continue;
    if (!best || positionOf(root) < positionOf(best))
      best = root;
  }
  if (!best)
    return nullptr;
  for (Operation *reader : readers)
    if (reader != best && positionOf(reader) <= positionOf(best))
      return nullptr;
  return best;
}

/// Whether `op` rounds a value to bf16 that only broadcasts read, each at
/// least 16 times its size: a bias or a modulation cast from its f32
/// master, read across every token. Such a convert is computed once, in a
/// kernel of its own; fused, every element of each broadcast would round
/// its source element again (ten integer operations a lane: a sixth of the
/// arithmetic of the bf16 bias-add-and-GELU loop of DiT-S/2's FFN).
static bool roundsBeforeBroadcasts(Operation *op) {
  auto convert = dyn_cast<ConvertOp>(op);
  if (!convert)
    return false;
  auto type = cast<RankedTensorType>(convert.getType());
  if (!type.getElementType().isBF16() || !type.hasStaticShape())
    return false;
  return llvm::all_of(op->getUsers(), [&](Operation *user) {
    auto broadcast = dyn_cast<BroadcastInDimOp>(user);
    if (!broadcast)
      return false;
    auto wide = cast<RankedTensorType>(broadcast.getType());
    return wide.hasStaticShape() &&
           wide.getNumElements() >= 16 * type.getNumElements();
  });
}

DenseMap<Operation *, Role>
LowerToOpenMPPass::planRoles(ArrayRef<Operation *> ops,
                             DenseMap<Operation *, Operation *> &fusedInto) {
  DenseMap<Operation *, Role> roles;
  DenseMap<Operation *, Operation *> rootMemo;
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = static_cast<int64_t>(i);
  // The ops each kernel computes so far, by root: a kernel that is full
  // takes no more producers.
  DenseMap<Operation *, int64_t> kernelOps;
  auto hasRoom = [&](Operation *root) {
    return root && kernelOps.lookup(root) < maxFusedOps;
  };
  for (Operation *op : llvm::reverse(ops)) {
    std::optional<LoweringKind> kind = kindOf(op);
    if (!kind)
      continue;
    Role role = Role::Root;
    // A sum of gradients across microbatches, and the first microbatch's
    // gradient it starts from, are computed where they stand: fused into
    // their user (the next microbatch's sum) they would run at the end of
    // the step, keeping every microbatch's gradient alive until then.
    auto startsSum = [](OpOperand &use) {
      return use.getOperandNumber() == 0 &&
             use.getOwner()->hasAttr(SDDialect::kGradientSumAttrName);
    };
    bool keepsPosition = op->hasAttr(SDDialect::kGradientSumAttrName) ||
                         llvm::any_of(op->getUses(), startsSum);
    // A transpose is a kernel of its own (its producers fuse into it): read
    // by its users' loops it would be gathered at opaque offsets wherever
    // a reshape merges the dimensions it moved.
    if (fusion && isFusible(kind) && !op->use_empty() && !keepsPosition &&
        !roundsBeforeBroadcasts(op) && !isa<TransposeOp>(op)) {
      // Users that read the value inside their own loop nest.
      SmallVector<Operation *> users;
      bool allFusedUsers = true;
      for (Operation *user : op->getUsers()) {
        std::optional<LoweringKind> userKind = kindOf(user);
        if (!isFusible(userKind) && userKind != LoweringKind::Reduction)
          allFusedUsers = false;
        if (!llvm::is_contained(users, user))
          users.push_back(user);
      }
      // The kernel all users are computed in, if they share one.
      Operation *sharedRoot = nullptr;
      if (allFusedUsers) {
        sharedRoot = kernelRootOf(users.front(), roles, fusedInto, rootMemo);
        for (Operation *user : users)
          if (kernelRootOf(user, roles, fusedInto, rootMemo) != sharedRoot)
            sharedRoot = nullptr;
      }
      if (kind == LoweringKind::Cheap) {
        if (allFusedUsers)
          role = Role::Inline;
      } else if (users.size() == 1 && allFusedUsers) {
        Role userRole = roles.lookup(users.front());
        // A view of a view that is materialized anyway: both alias one
        // buffer rather than copying it.
        bool viewChain = isBufferView(op) && isBufferView(users.front()) &&
                         userRole == Role::Root;
        if (viewChain) {
          role = Role::Root;
        } else if (userRole != Role::Inline) {
          if (hasRoom(
                  kernelRootOf(users.front(), roles, fusedInto, rootMemo))) {
            role = Role::Fused;
            fusedInto[op] = users.front();
          }
        } else if (kind == LoweringKind::IndexMap) {
          role = Role::Inline;
        }
      } else if (kind == LoweringKind::IndexMap && allFusedUsers) {
        // A broadcast (or reshape, slice, ...) read by several kernels is
        // recomputed by each rather than materialized at its larger size.
        role = Role::Inline;
      } else if (hasRoom(sharedRoot)) {
        // Several users, one kernel: computed there, never materialized.
        role = Role::Fused;
        fusedInto[op] = users.front();
      } else if (kind == LoweringKind::Elementwise) {
        Operation *root =
            outputKernelFor(op, position, roles, fusedInto, rootMemo);
        if (hasRoom(root)) {
          role = Role::Output;
          fusedInto[op] = root;
        }
      }
    }
    roles[op] = role;
    if (role == Role::Root)
      kernelOps[op] = 1;
    else if (role == Role::Fused || role == Role::Output)
      ++kernelOps[kernelRootOf(op, roles, fusedInto, rootMemo)];
  }
  return roles;
}

void LowerToOpenMPPass::runOnOperation() {
  func::FuncOp func = getOperation();
  if (func.isExternal())
    return;
  if (maxFusedOps < 1) {
    func.emitError() << "sd-lower-to-openmp: max-fused-ops must be at least "
                        "1, not "
                     << static_cast<int64_t>(maxFusedOps);
    return signalPassFailure();
  }
  decomposeOptimizerOps(func);
  if (failed(verifyLowerable(func)))
    return signalPassFailure();
  widenCalls(func);
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    ops.push_back(&op);

  // Backwards: every user is decided before its producers.
  DenseMap<Operation *, Operation *> fusedInto;
  DenseMap<Operation *, Role> roles = planRoles(ops, fusedInto);

  // Roots are numbered in program order; fused ops take their root's id.
  MLIRContext *ctx = &getContext();
  DenseMap<Operation *, int64_t> ids;
  int64_t next = 0;
  for (Operation *op : ops) {
    if (roles.lookup(op) != Role::Root)
      continue;
    ids[op] = next;
    op->setAttr(SDOMPDialect::kPlanAttrName,
                KernelAttr::get(ctx, next++, kernelKind(op, roles)));
  }
  numKernels = next;
  for (Operation *op : llvm::reverse(ops)) {
    switch (roles.lookup(op)) {
    case Role::Root:
      break;
    case Role::Fused:
      ids[op] = ids.lookup(fusedInto.lookup(op));
      op->setAttr(SDOMPDialect::kPlanAttrName, InKernelAttr::get(ctx, ids[op]));
      ++numFused;
      break;
    case Role::Output:
      ids[op] = ids.lookup(fusedInto.lookup(op));
      op->setAttr(SDOMPDialect::kPlanAttrName,
                  KernelOutputAttr::get(ctx, ids[op]));
      ++numFused;
      ++numOutputs;
      break;
    case Role::Inline:
      op->setAttr(SDOMPDialect::kPlanAttrName, InlineAttr::get(ctx));
      break;
    }
  }
}
