//===- sdopt.cpp - the sd optimizer driver --------------------------------===//
//
// mlir-opt for sd: registers the dialects, external models and passes, and
// runs MlirOptMain as sdopt's command line asks (sd/Driver/SdoptMain.h: the
// default pipeline, the report, the sharding picture, the OpenMP code).
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/SdoptMain.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"
#include "sd/Passes/Passes.h"
#include "sd/Support/Debug.h"
#include "sd/Target/OpenMP/OpenMPLoweringOpInterface.h"
#include "sd/Target/OpenMP/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// The dialects, interfaces and passes sdopt knows.
static void registerAll(DialectRegistry &registry) {
  registry.insert<mlir::sd::SDDialect, func::FuncDialect>();
  // Lets --inline inline calls of block functions.
  func::registerInlinerExtension(registry);
  // The compiler's external models (VJPs, partitioning, costs) and the
  // OpenMP target's plan attributes and lowering models.
  mlir::sd::registerAllSDExtensions(registry);
  mlir::sd::registerOpenMPLoweringInterfaces(registry);
  mlir::sd::registerSDPipelines();
  mlir::sd::registerSDOpenMPPasses();
  ::sd::registerDebugOptions();
  registerTransformsPasses();
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  registerAll(registry);
  // The options are declared before the command line is parsed and live
  // until MlirOptMain has built the pipeline.
  mlir::sd::SdoptCommandLine commandLine(registry);
  commandLine.parse(argc, argv);
  FailureOr<mlir::sd::SdoptInvocation> invocation = commandLine.resolve();
  if (failed(invocation))
    return 1;
  LogicalResult result =
      MlirOptMain(invocation->irStream(), std::move(invocation->input),
                  registry, invocation->config);
  return mlir::sd::sdoptExitCode(result, *invocation);
}
