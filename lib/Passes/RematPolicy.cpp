//===- RematPolicy.cpp - which forward values backward keeps --------------===//

#include "sd/Passes/RematPolicy.h"

#include "sd/IR/SDOps.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::sd;

namespace {
struct PolicyName {
  llvm::StringLiteral name;
  RematPolicy::Kind kind;
};
constexpr PolicyName kPolicies[] = {
    {"NONE", RematPolicy::Kind::None},
    {"FULL", RematPolicy::Kind::Full},
    {"MATMUL_WITHOUT_BATCH", RematPolicy::Kind::MatmulWithoutBatch},
    {"OFFLOAD_MATMUL_WITHOUT_BATCH",
     RematPolicy::Kind::OffloadMatmulWithoutBatch},
    {"HIDDEN_STATE_WITH_OFFLOAD", RematPolicy::Kind::HiddenStateWithOffload},
    {"FLUX_OPTIMIZED", RematPolicy::Kind::FluxOptimized},
    {"CUSTOM", RematPolicy::Kind::Custom},
};
} // namespace

llvm::StringRef RematPolicy::allNames() {
  return "NONE, FULL, MATMUL_WITHOUT_BATCH, OFFLOAD_MATMUL_WITHOUT_BATCH, "
         "HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED, CUSTOM";
}

llvm::StringRef RematPolicy::getName() const {
  for (const PolicyName &entry : kPolicies)
    if (entry.kind == kind)
      return entry.name;
  llvm_unreachable("every kind has a name");
}

llvm::Expected<RematPolicy>
RematPolicy::parse(llvm::StringRef name, llvm::ArrayRef<std::string> namesSaved,
                   llvm::ArrayRef<std::string> namesOffloaded) {
  std::string upper = name.upper();
  const PolicyName *found = llvm::find_if(
      kPolicies, [&](const PolicyName &entry) { return entry.name == upper; });
  if (found == std::end(kPolicies))
    return llvm::createStringError("unknown remat policy '" + name.str() +
                                   "'; expected one of " + allNames().str());
  RematPolicy policy(found->kind);
  if (policy.kind != Kind::Custom &&
      (!namesSaved.empty() || !namesOffloaded.empty()))
    return llvm::createStringError(
        "names_which_can_be_saved / names_which_can_be_offloaded only apply "
        "to remat policy CUSTOM, not " +
        policy.getName().str());
  for (const std::string &saved : namesSaved)
    policy.saved.insert(saved);
  for (const std::string &offloaded : namesOffloaded) {
    if (policy.saved.contains(offloaded))
      return llvm::createStringError("'" + offloaded +
                                     "' is both saved and offloaded");
    policy.offloaded.insert(offloaded);
  }
  switch (policy.kind) {
  case Kind::HiddenStateWithOffload:
    for (llvm::StringRef n : {"hidden_states", "self_attn", "cross_attn"})
      policy.offloaded.insert(n);
    break;
  case Kind::FluxOptimized:
    for (llvm::StringRef n : {"img_qkv_proj", "txt_qkv_proj", "attn_output",
                              "lin1_norm_hidden_states"})
      policy.saved.insert(n);
    break;
  default:
    break;
  }
  return policy;
}

/// A dot_general without batch dimensions: a projection x·W, not
/// attention's batched products (JAX's checkpoint_dots_with_no_batch_dims).
static bool isMatmulWithoutBatch(Value value) {
  auto dot = value.getDefiningOp<DotGeneralOp>();
  return dot && dot.getLhsBatch().empty();
}

Residency RematPolicy::decide(Value value, llvm::StringRef layer) const {
  llvm::StringRef name;
  if (Operation *def = value.getDefiningOp())
    if (auto attr = def->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
      name = attr.getValue();
  auto matmulRule = [&](Residency kept) {
    return isMatmulWithoutBatch(value) ? kept : Residency::Recompute;
  };
  switch (kind) {
  case Kind::None:
    return Residency::Keep;
  case Kind::Full:
    return Residency::Recompute;
  case Kind::MatmulWithoutBatch:
    return matmulRule(Residency::Keep);
  case Kind::OffloadMatmulWithoutBatch:
    return matmulRule(Residency::Offload);
  case Kind::HiddenStateWithOffload:
  case Kind::Custom:
    if (!name.empty() && saved.contains(name))
      return Residency::Keep;
    if (!name.empty() && offloaded.contains(name))
      return Residency::Offload;
    return Residency::Recompute;
  case Kind::FluxOptimized:
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
