//===- ToolFlags.h - Run-specification flags of the tools -------*- C++ -*-===//
//
// The flags that set a run specification (sd/Config/RunSpec.h) — mesh,
// rules, batch, attention, remat policy, optimizer, devices, sdrun's run
// settings and sdsample's sampling — made as llvm::cl options for sdopt,
// sdrun and sdsample from the settings table (sd/Config/Settings.h). A tool
// constructs one ToolFlags in main before parsing its command line (the options
// live as long as it, not as file-scope globals) and hands values() to
// sd::resolveRunSpec.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_TOOLFLAGS_H
#define SD_DRIVER_TOOLFLAGS_H

#include "sd/Config/RunSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"

#include <memory>

namespace mlir::sd {

/// The tool whose flags to make: the rows of the settings table
/// (sd/Config/Settings.h) whose tools include it. sdrun and sdsample also
/// get the model positional and the arguments after it; sdrun
/// --print-config and --compile-only.
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
  /// sdrun --calibrate's output file ("" without it).
  std::string calibratePath() const;
  /// Whether the model's positional was given (sdrun's is optional for
  /// --calibrate).
  bool modelGiven() const;

  /// The categories of the options, for cl::HideUnrelatedOptions.
  llvm::ArrayRef<const llvm::cl::OptionCategory *> categories() const {
    return categoryList;
  }

  /// A flag and the field of RunSpecFlags it sets (ToolFlags.cpp).
  struct BoundFlag;

private:
  /// The options that are not settings.
  struct Positionals;
  struct RunActions;

  llvm::cl::OptionCategory meshCategory, stepCategory, deviceCategory,
      runCategory, sampleCategory;
  std::vector<const llvm::cl::OptionCategory *> categoryList;
  /// The tool's flags, in the table's order.
  std::vector<std::unique_ptr<BoundFlag>> boundFlags;
  std::unique_ptr<Positionals> positionals;
  std::unique_ptr<RunActions> runActions;
};

} // namespace mlir::sd

#endif // SD_DRIVER_TOOLFLAGS_H
