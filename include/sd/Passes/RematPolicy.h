//===- RematPolicy.h - which forward values backward keeps ------*- C++ -*-===//
//
// MaxDiffusion's remat policies as a decision per forward value: kept on
// device, offloaded to host memory, or recomputed in the backward pass.
// sd-remat asks the policy about values computed inside layers (the
// functions @loss calls); everything else is kept. Whether a value is a
// matmul without batch dimensions is the op's to say (RematOpInterface).
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_REMATPOLICY_H
#define SD_PASSES_REMATPOLICY_H

#include "sd/Config/RematPolicyKind.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/StringSet.h"

#include <string>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::sd {

/// What the backward pass gets of a forward value.
enum class Residency { Keep, Offload, Recompute };

class RematPolicy {
public:
  /// The policy `kind` with CUSTOM's names. Names given to another policy,
  /// or a name both saved and offloaded, is an error reported through
  /// `emitError`.
  static FailureOr<RematPolicy>
  get(::sd::RematPolicyKind kind, llvm::ArrayRef<std::string> namesSaved,
      llvm::ArrayRef<std::string> namesOffloaded,
      llvm::function_ref<InFlightDiagnostic()> emitError);

  ::sd::RematPolicyKind getKind() const { return kind; }

  /// The names the policy refers to (CUSTOM's lists, the offloaded names of
  /// HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED's names): a CUSTOM name that
  /// no value carries is an error, the others may be absent from a model.
  const llvm::StringSet<> &getSavedNames() const { return saved; }
  const llvm::StringSet<> &getOffloadedNames() const { return offloaded; }

  /// What happens to `value`, the result of an op inside the layer
  /// function `layer`: its `sd.name`, whether it is a matmul without batch
  /// dimensions (RematOpInterface), and the layer decide.
  Residency decide(Value value, llvm::StringRef layer) const;

private:
  explicit RematPolicy(::sd::RematPolicyKind kind) : kind(kind) {}

  ::sd::RematPolicyKind kind;
  llvm::StringSet<> saved;
  llvm::StringSet<> offloaded;
};

/// Attaches RematOpInterface to the ops that are matmuls (dot_general).
void registerRematOpInterfaceModels(DialectRegistry &registry);

} // namespace mlir::sd

#endif // SD_PASSES_REMATPOLICY_H
