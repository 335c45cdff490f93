//===- SdoptMain.h - sdopt's command line around MlirOptMain ----*- C++ -*-===//
//
// What sdopt does besides registering dialects and passes and calling
// MlirOptMain. Every sd-* pass runs alone (lit tests); --mesh (with
// --dcn-mesh, --devices, --rules, --batch) runs the default pipeline, which
// prints the program with its mesh and a sharding on every argument;
// --report, --show-sharding and --emit=openmp print a report, a picture or
// C++ instead of the IR. The mesh, batch and training-step flags are
// sdrun's (ToolFlags.h), resolved into a RunSpec the same way. sdopt's main
// is, after registering:
//
//   SdoptCommandLine commandLine(registry);
//   commandLine.parse(argc, argv);
//   FailureOr<SdoptInvocation> invocation = commandLine.resolve();
//   if (failed(invocation))
//     return 1;
//   return sdoptExitCode(MlirOptMain(invocation->irStream(), ...),
//                        *invocation);
//
// Lives in SDToolFlags, which links no runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_SDOPTMAIN_H
#define SD_DRIVER_SDOPTMAIN_H

#include "sd/Driver/ToolFlags.h"

#include "mlir/Support/LogicalResult.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

#include <memory>
#include <string>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::sd {

/// What MlirOptMain runs on: the configuration with sdopt's passes set up,
/// the input and the output file.
struct SdoptInvocation {
  MlirOptMainConfig config;
  std::unique_ptr<llvm::MemoryBuffer> input;
  std::unique_ptr<llvm::ToolOutputFile> output;
  /// A printing pass (--report, --show-sharding, --emit=openmp) writes to
  /// `output` and the IR goes nowhere.
  bool printInstead = false;

  /// Where MlirOptMain prints the IR.
  llvm::raw_ostream &irStream() {
    return printInstead ? llvm::nulls() : output->os();
  }
};

/// sdopt's command line. Its options are constructed with it, before the
/// command line is parsed (not as file-scope globals), and must outlive
/// MlirOptMain: the printing passes read them as the pipeline is built.
class SdoptCommandLine {
public:
  /// Declares sdopt's options; `registry` holds the dialects and passes and
  /// gets the readable diagnostics' extension in resolve().
  explicit SdoptCommandLine(DialectRegistry &registry);
  ~SdoptCommandLine();

  /// Registers MlirOptMain's options and parses `argv`; --help lists sd's
  /// options only, the others stay accepted and listed by --help-hidden.
  /// Exits, as llvm::cl does, on a malformed command line.
  void parse(int argc, char **argv);

  /// The run the parsed flags ask for: the default pipeline (when a flag
  /// that sets the mesh, the batch or the stage was given), then the passes
  /// named on the command line, then the printing passes. Prints an error
  /// and fails for flags that do not go together, a run specification that
  /// does not resolve, or an input or output that cannot be opened, and
  /// for an input nested too deeply to parse.
  FailureOr<SdoptInvocation> resolve();

  /// sdopt's own flags (SdoptMain.cpp).
  struct Flags;

private:
  /// resolve() for --plan: the planner (sd-plan) alone, printing its table.
  FailureOr<SdoptInvocation> resolvePlan(SdoptInvocation &invocation,
                                         const ::sd::RunSpecFlags &values);

  DialectRegistry &registry;
  ToolFlags specFlags;
  std::unique_ptr<Flags> flags;
  std::string inputFilename, outputFilename;
};

/// sdopt's exit status for MlirOptMain's `result` on `invocation`: 0, with
/// the output file kept, on success; 1 otherwise.
int sdoptExitCode(LogicalResult result, SdoptInvocation &invocation);

} // namespace mlir::sd

#endif // SD_DRIVER_SDOPTMAIN_H
