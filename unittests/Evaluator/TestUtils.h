//===- TestUtils.h - helpers of the evaluator tests -------------*- C++ -*-===//
//
// A fixture that parses small sd programs from strings, evaluates their
// `@main` (or another function), and collects diagnostics so that error
// cases can check the message.
//
//===----------------------------------------------------------------------===//

#ifndef SD_UNITTESTS_EVALUATOR_TESTUTILS_H
#define SD_UNITTESTS_EVALUATOR_TESTUTILS_H

#include "sd/Evaluator/Evaluator.h"
#include "sd/Reference/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace sd::testing {

using ::sd::ref::DType;
using ::sd::ref::Tensor;

class EvaluatorTest : public ::testing::Test {
protected:
  /// A context with the func and sd dialects and the evaluator's interfaces
  /// (unless `withInterfaces` is false).
  explicit EvaluatorTest(bool withInterfaces = true);

  /// Parses `source`; null (with the messages in `diagnostics`) on error.
  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef source);

  /// The function `name` of `module`.
  static mlir::func::FuncOp lookup(mlir::ModuleOp module,
                                   llvm::StringRef name = "main");

  /// Parses `source` and evaluates its `@main` on one device. Fails when
  /// parsing or evaluation does; the messages are in `diagnostics`.
  mlir::FailureOr<std::vector<Tensor>> run(llvm::StringRef source,
                                           const std::vector<Tensor> &args,
                                           mlir::sd::EvalOptions options = {});

  /// Like `run` for a program with one result, which the test requires.
  Tensor runOne(llvm::StringRef source, const std::vector<Tensor> &args,
                mlir::sd::EvalOptions options = {});

  mlir::MLIRContext context;
  /// Every diagnostic message so far, one per line.
  std::string diagnostics;
};

/// A directory of its own for one test binary run (ctest runs each test in
/// a process of its own), `prefix`-XXXXXX in the system's temporary
/// directory, removed with everything in it when the object is destroyed.
/// Where none can be made, the temporary directory's `prefix`, kept.
class ScratchDirectory {
public:
  explicit ScratchDirectory(llvm::StringRef prefix);
  ~ScratchDirectory();
  ScratchDirectory(const ScratchDirectory &) = delete;
  ScratchDirectory &operator=(const ScratchDirectory &) = delete;

  const std::string &path() const { return directory; }

private:
  std::string directory;
  bool owned = false;
};

/// Where a test binary run's compiled device programs go: $SD_CACHE_DIR
/// when it is set (the cache keys a program by its source, compiler and
/// flags, so sharing is safe, and .ci/run shares one between its Release
/// and sanitizer builds, which emit the same programs), else a
/// ScratchDirectory named `prefix` that lasts until the run exits.
std::string programCacheDirectory(llvm::StringRef prefix);

/// Expects `actual` to have `shape`, `dtype` and values within `tolerance`
/// (absolute) of `expected`.
void expectTensor(const Tensor &actual, const std::vector<int64_t> &shape,
                  DType dtype, const std::vector<double> &expected,
                  double tolerance = 1e-6);

} // namespace sd::testing

#endif // SD_UNITTESTS_EVALUATOR_TESTUTILS_H
