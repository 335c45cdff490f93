//===- RematPolicy.h - which forward values backward keeps ------*- C++ -*-===//
//
// MaxDiffusion's remat policies (REFERENCE.md §1) as a decision per forward
// value: kept on device, offloaded to host memory, or recomputed in the
// backward pass. sd-differentiate asks the policy about values computed
// inside layers (the functions @loss calls); everything else is kept.
//
//===----------------------------------------------------------------------===//

#ifndef SD_PASSES_REMATPOLICY_H
#define SD_PASSES_REMATPOLICY_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::sd {

/// What the backward pass gets of a forward value.
enum class Residency { Keep, Offload, Recompute };

class RematPolicy {
public:
  enum class Kind {
    None,
    Full,
    MatmulWithoutBatch,
    OffloadMatmulWithoutBatch,
    HiddenStateWithOffload,
    FluxOptimized,
    Custom,
  };

  /// The policy named `name` (MaxDiffusion's spelling, any case). Names are
  /// only accepted for CUSTOM; an unknown policy is an error listing the
  /// known ones.
  static llvm::Expected<RematPolicy>
  parse(llvm::StringRef name, llvm::ArrayRef<std::string> namesSaved = {},
        llvm::ArrayRef<std::string> namesOffloaded = {});

  /// Every policy name, for help texts and errors.
  static llvm::StringRef allNames();

  Kind getKind() const { return kind; }
  llvm::StringRef getName() const;

  /// The names the policy refers to (CUSTOM's lists, the offloaded names of
  /// HIDDEN_STATE_WITH_OFFLOAD, FLUX_OPTIMIZED's names): a CUSTOM name that
  /// no value carries is an error, the others may be absent from a model.
  const llvm::StringSet<> &getSavedNames() const { return saved; }
  const llvm::StringSet<> &getOffloadedNames() const { return offloaded; }

  /// What happens to `value`, the result of an op inside the layer
  /// function `layer`: its `sd.name`, whether it is a dot_general without
  /// batch dimensions, and the layer decide.
  Residency decide(Value value, llvm::StringRef layer) const;

private:
  explicit RematPolicy(Kind kind) : kind(kind) {}

  Kind kind;
  llvm::StringSet<> saved;
  llvm::StringSet<> offloaded;
};

} // namespace mlir::sd

#endif // SD_PASSES_REMATPOLICY_H
