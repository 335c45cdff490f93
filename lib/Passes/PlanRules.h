//===- PlanRules.h - Logical-axis-rule variants the planner tries -*- C++
//-*-===//
//
// Which logical names go to `fsdp`, `tensor` and `context` is the second
// choice a MaxDiffusion user makes by hand after the mesh. The planner tries,
// on each mesh, the given rules and the variants MaxDiffusion's own configs
// use: `fsdp-seq`, fsdp splitting the sequence instead of the batch (the
// Wan2.1 recipes' "fsdp as sequence parallelism": `activation_length` on
// fsdp, the batch on data alone), where fsdp > 1; and `ctx-embed`, the
// parameters' embed dimension split over context as well as fsdp (the
// shipped base_wan_14b.yml's `embed: [context, fsdp]`), where context > 1.
// A variant that resolves every logical name the program uses exactly as
// an earlier one does is the same plan and is left out.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_PASSES_PLANRULES_H
#define SD_LIB_PASSES_PLANRULES_H

#include "sd/Sharding/LogicalRules.h"
#include "sd/Sharding/Mesh.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::sd {

/// One tensor's logical names and shape, as the program gives them to the
/// rules (an argument's `sd.logical_axes`, a sharding constraint's
/// `logical`).
struct LogicalUse {
  std::vector<std::string> names;
  std::vector<int64_t> shape;
};

/// The distinct logical uses of `module`'s functions.
std::vector<LogicalUse> collectLogicalUses(ModuleOp module);

/// One set of rules to price: its name in the plan table (a file's by its
/// stem) and the rules, named as `--rules` spells them.
struct RulesChoice {
  std::string shown;
  ::sd::LogicalAxisRules rules;
};

/// `base` and its variants (::sd::RuleVariant) worth pricing on `mesh`:
/// fsdp-seq where fsdp > 1, ctx-embed where context > 1, and both; each
/// resolving `uses` differently from those before it. `variants` false:
/// `base` alone.
std::vector<RulesChoice> ruleVariants(const ::sd::LogicalAxisRules &base,
                                      const ::sd::MeshSpec &mesh,
                                      llvm::ArrayRef<LogicalUse> uses,
                                      bool variants);

} // namespace mlir::sd

#endif // SD_LIB_PASSES_PLANRULES_H
