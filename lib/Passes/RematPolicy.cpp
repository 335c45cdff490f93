//===- RematPolicy.cpp - which forward values backward keeps --------------===//

#include "sd/Passes/RematPolicy.h"

#include "sd/IR/SDOps.h"

#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::sd;
using ::sd::RematPolicyKind;

FailureOr<RematPolicy>
RematPolicy::get(RematPolicyKind kind, ArrayRef<std::string> namesSaved,
                 ArrayRef<std::string> namesOffloaded,
                 function_ref<InFlightDiagnostic()> emitError) {
  RematPolicy policy(kind);
  if (kind != RematPolicyKind::Custom &&
      (!namesSaved.empty() || !namesOffloaded.empty()))
    return emitError() << "names_which_can_be_saved / "
                          "names_which_can_be_offloaded only apply to remat "
                          "policy CUSTOM, not "
                       << ::sd::rematPolicyName(kind);
  for (const std::string &saved : namesSaved)
    policy.saved.insert(saved);
  for (const std::string &offloaded : namesOffloaded) {
    if (policy.saved.contains(offloaded))
      return emitError() << "'" << offloaded << "' is both saved and offloaded";
    policy.offloaded.insert(offloaded);
  }
  switch (kind) {
  case RematPolicyKind::HiddenStateWithOffload:
    for (StringRef n : {"hidden_states", "self_attn", "cross_attn"})
      policy.offloaded.insert(n);
    break;
  case RematPolicyKind::FluxOptimized:
    for (StringRef n : {"img_qkv_proj", "txt_qkv_proj", "attn_output",
                        "lin1_norm_hidden_states"})
      policy.saved.insert(n);
    break;
  default:
    break;
  }
  return policy;
}

/// A matmul without batch dimensions: a projection x·W, not attention's
/// batched products (JAX's checkpoint_dots_with_no_batch_dims), as the op
/// says.
static bool isMatmulWithoutBatch(Value value) {
  auto remat = value.getDefiningOp<RematOpInterface>();
  return remat && remat.isMatmulWithoutBatch();
}

Residency RematPolicy::decide(Value value, StringRef layer) const {
  StringRef name;
  if (Operation *def = value.getDefiningOp())
    if (auto attr = def->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
      name = attr.getValue();
  auto matmulRule = [&](Residency kept) {
    return isMatmulWithoutBatch(value) ? kept : Residency::Recompute;
  };
  switch (kind) {
  case RematPolicyKind::None:
    return Residency::Keep;
  case RematPolicyKind::Full:
    return Residency::Recompute;
  case RematPolicyKind::MatmulWithoutBatch:
    return matmulRule(Residency::Keep);
  case RematPolicyKind::OffloadMatmulWithoutBatch:
    return matmulRule(Residency::Offload);
  case RematPolicyKind::HiddenStateWithOffload:
  case RematPolicyKind::Custom:
    if (!name.empty() && saved.contains(name))
      return Residency::Keep;
    if (!name.empty() && offloaded.contains(name))
      return Residency::Offload;
    return Residency::Recompute;
  case RematPolicyKind::FluxOptimized:
    if (layer.contains("double"))
      return name == "img_qkv_proj" || name == "txt_qkv_proj"
                 ? Residency::Recompute
                 : Residency::Keep;
    if (layer.contains("single"))
      return name == "attn_output" || name == "lin1_norm_hidden_states"
                 ? Residency::Keep
                 : Residency::Recompute;
    return matmulRule(Residency::Keep);
  }
  llvm_unreachable("every kind is decided");
}

//===----------------------------------------------------------------------===//
// RematOpInterface
//===----------------------------------------------------------------------===//

namespace {
/// dot_general is a matmul without batch dimensions when it has none.
struct DotGeneralRematModel
    : public RematOpInterface::ExternalModel<DotGeneralRematModel,
                                             DotGeneralOp> {
  bool isMatmulWithoutBatch(Operation *op) const {
    return cast<DotGeneralOp>(op).getLhsBatch().empty();
  }
};
} // namespace

void mlir::sd::registerRematOpInterfaceModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    DotGeneralOp::attachInterface<DotGeneralRematModel>(*context);
  });
}
