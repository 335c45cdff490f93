//===- ToolFlags.h - Run-specification flags of the tools -------*- C++ -*-===//
//
// The flags that set a run specification (sd/Config/RunSpec.h) — mesh,
// rules, batch, attention, remat policy, optimizer, devices and sdrun's run
// settings — declared once as llvm::cl options for sdopt, sdrun and
// sdsample. A tool constructs one ToolFlags in
// main before parsing its command line (the options live as long as it, not
// as file-scope globals) and hands values() to sd::resolveRunSpec.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_TOOLFLAGS_H
#define SD_DRIVER_TOOLFLAGS_H

#include "sd/Config/RunSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"

#include <memory>

namespace mlir::sd {

/// The tool whose flags to declare. All get the mesh, rules, batch and
/// attention flags. sdopt and sdrun also the training step's (remat,
/// optimizer); sdopt --processes and --grad-accum; sdrun and sdsample the
/// model positional, --config and the devices' flags (threads, memory
/// budgets, program cache, collective timeout); sdrun the key=value
/// positionals, --print-config and the run's flags (steps, checkpoints,
/// outputs, ...). sdsample's sampling flags are its own.
enum class Tool { Sdopt, Sdrun, Sdsample };

class ToolFlags {
public:
  explicit ToolFlags(Tool tool);
  ~ToolFlags();

  /// What the parsed command line set; flags not given stay unset.
  ::sd::RunSpecFlags values() const;

  /// sdrun's --print-config.
  bool printConfig() const;
  /// sdrun's --compile-only.
  bool compileOnly() const;

  /// The categories of the options, for cl::HideUnrelatedOptions.
  llvm::ArrayRef<const llvm::cl::OptionCategory *> categories() const {
    return categoryList;
  }

  /// A flag and the field of RunSpecFlags it sets (ToolFlags.cpp).
  struct BoundFlag;

private:
  /// The groups of flags.
  struct MeshOptions;
  struct StepOptions;
  struct SdoptOptions;
  struct DeviceOptions;
  struct RunOptions;

  llvm::cl::OptionCategory meshCategory, stepCategory, deviceCategory,
      runCategory;
  std::vector<const llvm::cl::OptionCategory *> categoryList;
  /// Every flag of the groups made, in declaration order.
  std::vector<const BoundFlag *> boundFlags;
  std::unique_ptr<MeshOptions> mesh;
  std::unique_ptr<StepOptions> step;
  std::unique_ptr<SdoptOptions> sdopt;
  std::unique_ptr<DeviceOptions> device;
  std::unique_ptr<RunOptions> run;
};

} // namespace mlir::sd

#endif // SD_DRIVER_TOOLFLAGS_H
