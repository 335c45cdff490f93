//===- TestUtils.cpp - helpers of the evaluator tests ---------------------===//

#include "TestUtils.h"

#include "sd/Evaluator/EvaluableOpInterface.h"
#include "sd/IR/SDDialect.h"
#include "sd/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <cstdlib>
#include <map>
#include <memory>

using namespace mlir;

namespace sd::testing {

EvaluatorTest::EvaluatorTest(bool withInterfaces) {
  DialectRegistry registry;
  registry.insert<func::FuncDialect, mlir::sd::SDDialect>();
  mlir::sd::registerAllSDExtensions(registry);
  if (withInterfaces)
    mlir::sd::registerEvaluatorInterfaces(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  context.getDiagEngine().registerHandler([this](Diagnostic &diag) {
    diagnostics += diag.str();
    diagnostics += "\n";
    return success();
  });
}

OwningOpRef<ModuleOp> EvaluatorTest::parse(llvm::StringRef source) {
  return parseSourceString<ModuleOp>(source, &context);
}

func::FuncOp EvaluatorTest::lookup(ModuleOp module, llvm::StringRef name) {
  return module.lookupSymbol<func::FuncOp>(name);
}

FailureOr<std::vector<Tensor>>
EvaluatorTest::run(llvm::StringRef source, const std::vector<Tensor> &args,
                   mlir::sd::EvalOptions options) {
  OwningOpRef<ModuleOp> module = parse(source);
  if (!module)
    return failure();
  func::FuncOp main = lookup(*module);
  if (!main) {
    diagnostics += "no @main\n";
    return failure();
  }
  return mlir::sd::evaluate(main, args, options);
}

Tensor EvaluatorTest::runOne(llvm::StringRef source,
                             const std::vector<Tensor> &args,
                             mlir::sd::EvalOptions options) {
  FailureOr<std::vector<Tensor>> results = run(source, args, options);
  EXPECT_TRUE(succeeded(results)) << diagnostics;
  if (failed(results))
    return Tensor();
  EXPECT_EQ(results->size(), 1u);
  return results->empty() ? Tensor() : std::move(results->front());
}

void expectTensor(const Tensor &actual, const std::vector<int64_t> &shape,
                  DType dtype, const std::vector<double> &expected,
                  double tolerance) {
  ASSERT_TRUE(actual.isValid());
  EXPECT_EQ(actual.shape(), shape) << actual.toString();
  EXPECT_EQ(actual.dtype(), dtype) << actual.toString();
  ASSERT_EQ(actual.numElements(), static_cast<int64_t>(expected.size()))
      << actual.toString();
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tolerance)
        << "element " << i << " of " << actual.toString();
}

ScratchDirectory::ScratchDirectory(llvm::StringRef prefix) {
  llvm::SmallString<128> path;
  owned = !llvm::sys::fs::createUniqueDirectory(prefix, path);
  if (!owned) {
    llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, path);
    llvm::sys::path::append(path, prefix);
  }
  directory = std::string(path);
}

ScratchDirectory::~ScratchDirectory() {
  if (owned)
    llvm::sys::fs::remove_directories(directory);
}

std::string programCacheDirectory(llvm::StringRef prefix) {
  if (const char *shared = std::getenv("SD_CACHE_DIR"); shared && *shared)
    return shared;
  static std::map<std::string, std::unique_ptr<ScratchDirectory>, std::less<>>
      directories;
  std::unique_ptr<ScratchDirectory> &directory = directories[prefix.str()];
  if (!directory)
    directory = std::make_unique<ScratchDirectory>(prefix);
  return directory->path();
}

} // namespace sd::testing
