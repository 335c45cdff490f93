//===- LowerToOpenMP.cpp - plan kernels for the OpenMP lowering -----------===//
//
// Checks that a function can become OpenMP code (call-free, static f32
// shapes, every op known) and decides which ops fuse into one loop nest
// (see the pass description in Passes.td). The decision walks the ops once
// backwards, so every op sees its users' decisions: an op fuses into its
// only user when that user is itself fused code; cheap ops (splat
// constants, iota, index ops over materialized values) are recomputed in
// every kernel that reads them. The emitter (OpenMPEmitter.cpp) reads the
// resulting `sd.kernel` attributes.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/OpenMPEmitter.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::sd {
#define GEN_PASS_DEF_LOWERTOOPENMP
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

OpenMPOpClass mlir::sd::classifyForOpenMP(Operation *op) {
  using C = OpenMPOpClass;
  return llvm::TypeSwitch<Operation *, C>(op)
      .Case<NegOp, ExpOp, LogOp, SqrtOp, RsqrtOp, TanhOp, SinOp, CosOp,
            SigmoidOp, SiluOp, ErfOp, GeluOp, AddOp, SubOp, MulOp, DivOp,
            MaxOp, MinOp, PowOp, CompareOp, SelectOp, ConvertOp,
            ShardingConstraintOp>([](Operation *) { return C::Elementwise; })
      .Case<BroadcastInDimOp, ReshapeOp, SliceOp, PadOp, ConcatOp,
            UpsampleNearestOp>([](Operation *) { return C::IndexMap; })
      .Case<IotaOp>([](Operation *) { return C::Cheap; })
      .Case<ConstantOp>([](ConstantOp c) {
        auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
        return dense && dense.isSplat() ? C::Cheap : C::DenseConstant;
      })
      .Case<ReduceSumOp, ReduceMaxOp, ReduceMeanOp, MseLossOp>(
          [](Operation *) { return C::Reduction; })
      .Case<DotGeneralOp, TransposeOp, SoftmaxOp, LayerNormOp, RmsNormOp,
            GroupNormOp, AttentionOp, Conv2DOp, RngNormalOp, RngUniformOp>(
          [](Operation *) { return C::Library; })
      .Case<AllGatherOp, AllSliceOp, ReduceScatterOp, AllReduceOp, AllToAllOp,
            CollectivePermuteOp, AxisIndexOp>(
          [](Operation *) { return C::Collective; })
      .Case<OffloadOp, ReloadOp>([](Operation *) { return C::Memory; })
      .Case<func::ReturnOp>([](Operation *) { return C::Return; })
      .Default([](Operation *) { return C::Unsupported; });
}

namespace {

/// How an op takes part in the plan.
enum class Role {
  /// Its own kernel (or library call); its result is materialized.
  Root,
  /// Computed inside its only user's kernel.
  Fused,
  /// Recomputed inside every kernel that reads it.
  Inline,
};

bool isFusible(OpenMPOpClass c) {
  return c == OpenMPOpClass::Elementwise || c == OpenMPOpClass::IndexMap ||
         c == OpenMPOpClass::Cheap;
}

/// The kind of kernel a root op is, as recorded in `sd.kernel_kind`.
StringRef kernelKind(Operation *op, const DenseMap<Operation *, Role> &roles) {
  switch (classifyForOpenMP(op)) {
  case OpenMPOpClass::Reduction:
    return "reduce";
  case OpenMPOpClass::DenseConstant:
    return "constant";
  case OpenMPOpClass::Collective:
    return isa<AxisIndexOp>(op) ? "axis_index" : "collective";
  case OpenMPOpClass::Memory:
    return isa<OffloadOp>(op) ? "offload" : "reload";
  case OpenMPOpClass::Library:
    return llvm::TypeSwitch<Operation *, StringRef>(op)
        .Case<DotGeneralOp>([](auto) { return "gemm"; })
        .Case<TransposeOp>([](auto) { return "transpose"; })
        .Case<SoftmaxOp>([](auto) { return "softmax"; })
        .Case<LayerNormOp>([](auto) { return "layer_norm"; })
        .Case<RmsNormOp>([](auto) { return "rms_norm"; })
        .Case<GroupNormOp>([](auto) { return "group_norm"; })
        .Case<AttentionOp>([](auto) { return "attention"; })
        .Case<Conv2DOp>([](auto) { return "conv2d"; })
        .Default([](auto) { return "rng"; });
  default:
    break;
  }
  // A reshape of a value that already has a buffer reuses that buffer.
  if (isa<ReshapeOp>(op)) {
    Operation *def = op->getOperand(0).getDefiningOp();
    if (!def || roles.lookup(def) == Role::Root)
      return "alias";
  }
  return "fused";
}

/// The name of `value` for diagnostics: `%42` as printed.
std::string valueName(Value value, AsmState &state) {
  std::string name;
  llvm::raw_string_ostream os(name);
  value.printAsOperand(os, state);
  return name;
}

/// Checks a type of `what`: a static ranked tensor of f32 (or i1 where
/// `allowI1`).
LogicalResult checkType(Type type, bool allowI1,
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
  if (element.isF32() || (allowI1 && element.isInteger(1)))
    return success();
  return emitError() << what() << " has element type " << element
                     << "; the OpenMP lowering supports f32 tensors only";
}

struct LowerToOpenMPPass
    : public mlir::sd::impl::LowerToOpenMPBase<LowerToOpenMPPass> {
  using LowerToOpenMPBase::LowerToOpenMPBase;

  LogicalResult verifyLowerable(func::FuncOp func, AsmState &state);
  void runOnOperation() override;
};

} // namespace

LogicalResult LowerToOpenMPPass::verifyLowerable(func::FuncOp func,
                                                 AsmState &state) {
  if (func.isExternal())
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("has more than one block; the OpenMP lowering "
                            "needs straight-line functions");
  for (BlockArgument arg : func.getArguments())
    if (failed(checkType(
            arg.getType(), /*allowI1=*/false,
            [&] { return func.emitOpError(); },
            [&] { return "argument " + valueName(arg, state); })))
      return failure();
  for (Operation &op : func.getBody().front()) {
    if (isa<func::CallOp, CallOpInterface>(op))
      return op.emitOpError("cannot be lowered to OpenMP: inline first "
                            "(the lowering needs call-free functions)");
    if (classifyForOpenMP(&op) == OpenMPOpClass::Unsupported)
      return op.emitOpError("has no OpenMP lowering");
    if (op.getNumRegions() != 0)
      return op.emitOpError("has regions; the OpenMP lowering needs "
                            "straight-line functions");
    for (Value result : op.getResults())
      if (failed(checkType(
              result.getType(), /*allowI1=*/true,
              [&] { return op.emitOpError(); },
              [&] { return "result " + valueName(result, state); })))
        return failure();
    if (isa<func::ReturnOp>(op))
      continue;
    for (Value operand : op.getOperands())
      if (failed(checkType(
              operand.getType(), /*allowI1=*/true,
              [&] { return op.emitOpError(); },
              [&] { return "operand " + valueName(operand, state); })))
        return failure();
  }
  return success();
}

void LowerToOpenMPPass::runOnOperation() {
  func::FuncOp func = getOperation();
  if (func.isExternal())
    return;
  {
    AsmState state(func);
    if (failed(verifyLowerable(func, state)))
      return signalPassFailure();
  }
  Block &body = func.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);

  // Backwards: every user is decided before its producers.
  DenseMap<Operation *, Role> roles;
  DenseMap<Operation *, Operation *> fusedInto;
  for (Operation *op : llvm::reverse(ops)) {
    OpenMPOpClass cls = classifyForOpenMP(op);
    if (cls == OpenMPOpClass::Return)
      continue;
    Role role = Role::Root;
    if (fusion && isFusible(cls) && !op->use_empty()) {
      // Users that read the value inside their own loop nest.
      SmallVector<Operation *> users;
      bool allFusedUsers = true;
      for (Operation *user : op->getUsers()) {
        OpenMPOpClass userCls = classifyForOpenMP(user);
        if (!isFusible(userCls) && userCls != OpenMPOpClass::Reduction)
          allFusedUsers = false;
        if (!llvm::is_contained(users, user))
          users.push_back(user);
      }
      if (cls == OpenMPOpClass::Cheap) {
        if (allFusedUsers)
          role = Role::Inline;
      } else if (users.size() == 1 && allFusedUsers) {
        Role userRole = roles.lookup(users.front());
        // A reshape of a reshape that is materialized anyway: both alias
        // one buffer rather than copying it.
        bool reshapeChain = isa<ReshapeOp>(op) &&
                            isa<ReshapeOp>(users.front()) &&
                            userRole == Role::Root;
        if (reshapeChain) {
          role = Role::Root;
        } else if (userRole != Role::Inline) {
          role = Role::Fused;
          fusedInto[op] = users.front();
        } else if (cls == OpenMPOpClass::IndexMap) {
          role = Role::Inline;
        }
      } else if (cls == OpenMPOpClass::IndexMap && allFusedUsers) {
        // A broadcast (or reshape, slice, ...) read by several kernels is
        // recomputed by each rather than materialized at its larger size.
        role = Role::Inline;
      }
    }
    roles[op] = role;
  }

  // Roots are numbered in program order; fused ops take their root's id.
  MLIRContext *ctx = &getContext();
  DenseMap<Operation *, StringAttr> ids;
  int64_t next = 0;
  for (Operation *op : ops) {
    if (isa<func::ReturnOp>(op) || roles.lookup(op) != Role::Root)
      continue;
    ids[op] = StringAttr::get(ctx, "k" + std::to_string(next++));
    op->setAttr(kKernelKindAttrName,
                StringAttr::get(ctx, kernelKind(op, roles)));
  }
  numKernels = next;
  StringAttr inlineAttr = StringAttr::get(ctx, kInlineKernel);
  for (Operation *op : llvm::reverse(ops)) {
    if (isa<func::ReturnOp>(op))
      continue;
    switch (roles.lookup(op)) {
    case Role::Root:
      break;
    case Role::Fused:
      ids[op] = ids.lookup(fusedInto.lookup(op));
      ++numFused;
      break;
    case Role::Inline:
      ids[op] = inlineAttr;
      break;
    }
    op->setAttr(kKernelAttrName, ids.lookup(op));
    if (roles.lookup(op) != Role::Root)
      op->removeAttr(kKernelKindAttrName);
  }
}
