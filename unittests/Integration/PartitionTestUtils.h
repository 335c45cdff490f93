//===- PartitionTestUtils.h - partitioned vs global helpers -----*- C++ -*-===//
//
// The differential check shared by the partition tests: a program runs once
// unpartitioned on one device and once partitioned on every device of the
// test's mesh (the test parameter, e.g. "data:2,tensor:2"), and the two
// must agree (relative error at most 1e-5). See
// PartitionDifferentialTest.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SD_UNITTESTS_EVALUATOR_PARTITIONTESTUTILS_H
#define SD_UNITTESTS_EVALUATOR_PARTITIONTESTUTILS_H

#include "TestUtils.h"

#include "sd/Evaluator/EvaluableOpInterface.h"
#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace sd::testing {
namespace partition {

using llvm::SmallVector;
using mlir::sd::ShardingAttr;

/// The layout of a partitioned function's value, per mesh axis: the
/// dimension it splits, or -1 (replicated) or -2 (partial sum).
struct AxisUse {
  std::vector<int64_t> dimOf;
  /// Per dimension, its axes (indices into the mesh), major to minor.
  std::vector<std::vector<int64_t>> dims;
};

inline AxisUse axisUse(ShardingAttr sharding, const ::sd::MeshSpec &mesh) {
  auto index = [&](mlir::StringAttr name) {
    for (size_t i = 0; i < mesh.axes().size(); ++i)
      if (mesh.axes()[i].name == name.getValue())
        return static_cast<int64_t>(i);
    return int64_t(-1);
  };
  AxisUse use;
  use.dimOf.assign(mesh.axes().size(), -1);
  for (auto [dim, dimSharding] : llvm::enumerate(sharding.getDimShardings())) {
    use.dims.emplace_back();
    for (mlir::StringAttr name : dimSharding.getAxes()) {
      use.dims.back().push_back(index(name));
      use.dimOf[index(name)] = dim;
    }
  }
  for (mlir::StringAttr name : sharding.getUnreducedAxes())
    use.dimOf[index(name)] = -2;
  return use;
}

/// The offset of `device`'s block along each dimension of a `local` block.
inline std::vector<int64_t> blockOffsets(const AxisUse &use,
                                         const ::sd::MeshSpec &mesh,
                                         int64_t device,
                                         const std::vector<int64_t> &local) {
  std::vector<int64_t> coords = mesh.coordinates(device), offsets;
  for (auto [dim, axes] : llvm::enumerate(use.dims)) {
    int64_t block = 0;
    for (int64_t axis : axes)
      block = block * mesh.axes()[axis].size() + coords[axis];
    offsets.push_back(block * local[dim]);
  }
  return offsets;
}

/// Calls `fn(localIndex, globalIndex)` for each element of a block of
/// `local` shape at `offsets` in a tensor of `global` shape, skipping the
/// padding of a block that reaches past the tensor's end.
template <typename Fn>
void forEachInBlock(const std::vector<int64_t> &local,
                    const std::vector<int64_t> &global,
                    const std::vector<int64_t> &offsets, Fn fn) {
  std::vector<int64_t> strides = ::sd::ref::rowMajorStrides(global);
  std::vector<int64_t> index(local.size(), 0);
  for (int64_t n = 0, e = ::sd::ref::shapeProduct(local); n < e; ++n) {
    int64_t to = 0;
    bool valid = true;
    for (size_t d = 0; d < local.size(); ++d) {
      to += (offsets[d] + index[d]) * strides[d];
      valid &= offsets[d] + index[d] < global[d];
    }
    if (valid)
      fn(n, to);
    for (size_t d = local.size(); d-- > 0;) {
      if (++index[d] < local[d])
        break;
      index[d] = 0;
    }
  }
}

/// `(largest |a - b|) / (largest |b|)`.
inline double relativeError(const Tensor &actual, const Tensor &expected) {
  double scale = 0;
  for (double v : expected.values())
    scale = std::max(scale, std::abs(v));
  return ::sd::ref::maxAbsoluteDifference(actual, expected) /
         std::max(scale, 1e-30);
}

/// The meshes of the partitioning issue's differential tests.
#define SD_PARTITION_TEST_MESHES                                               \
  "data:2", "fsdp:2", "tensor:2", "context:2", "data:2,fsdp:2",                \
      "data:2,tensor:2", "fsdp:2,tensor:2", "data:2,fsdp:2,context:2,tensor:2"

/// The meshes of a differential test of a whole DiT training step: all of
/// SD_PARTITION_TEST_MESHES in the Release suite; under ASan, where the
/// instrumented evaluator takes ten times as long, the mesh of all four axes
/// (every kind of collective the others make) and fsdp × tensor.
#ifdef __SANITIZE_ADDRESS__
#define SD_TRAIN_STEP_TEST_MESHES                                              \
  "fsdp:2,tensor:2", "data:2,fsdp:2,context:2,tensor:2"
#else
#define SD_TRAIN_STEP_TEST_MESHES SD_PARTITION_TEST_MESHES
#endif

/// A test name from a mesh parameter: `data:2,fsdp:2` → `data_2_fsdp_2`.
inline std::string
meshTestName(const ::testing::TestParamInfo<const char *> &info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), ':', '_');
  std::replace(name.begin(), name.end(), ',', '_');
  return name;
}

class PartitionTestBase : public EvaluatorTest,
                          public ::testing::WithParamInterface<const char *> {
protected:
  PartitionTestBase() {
    // The pipeline inlines DiT's block calls.
    mlir::DialectRegistry registry;
    mlir::func::registerInlinerExtension(registry);
    context.appendDialectRegistry(registry);
  }

  /// Runs `source`'s @`entry` globally and partitioned on the test's mesh
  /// with `batch`, and compares; returns the partitioned program's
  /// collectives by op name.
  std::map<std::string, int> check(llvm::StringRef source,
                                   llvm::StringRef entry, int64_t batch);

  /// With options, both programs are first turned into a training step by
  /// the training passes (the partitioned one through the default
  /// pipeline's `train`).
  std::optional<mlir::sd::TrainingOptions> train;
  /// How both programs are evaluated.
  mlir::sd::Precision precision = mlir::sd::Precision::Native;
  /// With options, attention is tiled in both programs (sd-tile-attention,
  /// before the training passes).
  std::optional<mlir::sd::TileAttentionOptions> tile;
  /// The partitioned program's logical axis rules (default: dit).
  std::optional<::sd::LogicalAxisRules> rules;

  /// After `check`: the names of the ops of which some instance has an
  /// operand whose per-device type is smaller than its global type (the
  /// operand is really sharded): a block (same rank, dimensions dividing)
  /// of the same operand of some instance of the op in the propagated,
  /// unpartitioned program.
  std::set<std::string> shardedOps;
  /// Likewise for a result (the ops without operands: iota, rng, constant).
  std::set<std::string> shardedResultOps;
};

/// Zero-initialized parameters (DiT's adaLN and final layers) get small
/// random values, so that every layer changes the loss.
inline void randomizeZeroInits(mlir::func::FuncOp func) {
  mlir::MLIRContext *ctx = func.getContext();
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto param = func.getArgAttrOfType<mlir::sd::ParamAttr>(
        i, mlir::sd::SDDialect::kRoleAttrName);
    if (!param || param.getInit().getKind() != mlir::sd::InitKind::zeros)
      continue;
    auto init = mlir::sd::InitAttr::get(ctx, mlir::sd::InitKind::normal,
                                        llvm::APFloat(0.05));
    func.setArgAttr(i, mlir::sd::SDDialect::kRoleAttrName,
                    mlir::sd::ParamAttr::get(ctx, param.getName(), init));
  }
}

/// A checked-in program of models/, as text (empty if unreadable).
inline std::string readModel(llvm::StringRef name) {
  std::string path = std::string(SD_MODELS_DIR) + "/" + name.str();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

/// `module` with @loss's zero-initialized parameters randomized (so that
/// every layer matters), as text; empty without a module.
inline std::string randomizedSource(mlir::ModuleOp module) {
  if (!module)
    return {};
  randomizeZeroInits(module.lookupSymbol<mlir::func::FuncOp>("loss"));
  std::string source;
  llvm::raw_string_ostream os(source);
  module.print(os);
  return source;
}

/// models/dit_tiny.mlir, randomizedSource; `parse` is the fixture's parser.
template <typename ParseFn> std::string ditTinySource(ParseFn parse) {
  mlir::OwningOpRef<mlir::ModuleOp> module = parse(readModel("dit_tiny.mlir"));
  return randomizedSource(module.get());
}

inline std::map<std::string, int>
PartitionTestBase::check(llvm::StringRef source, llvm::StringRef entry,
                         int64_t batch) {
  std::map<std::string, int> collectives;
  // The test's mesh, for programs whose annotations name mesh axes (the
  // pipeline replaces it with the same one); a whole module brings its own.
  std::string meshText = "sd.mesh @mesh = <[";
  SmallVector<llvm::StringRef> axes;
  llvm::StringRef(GetParam()).split(axes, ',');
  for (auto [i, axis] : llvm::enumerate(axes)) {
    auto [name, size] = axis.split(':');
    meshText += (i ? ", \"" : "\"") + name.str() + "\"=" + size.str();
  }
  meshText += "]>\n";
  bool wrapped = source.ltrim().starts_with("module");
  mlir::OwningOpRef<mlir::ModuleOp> global =
      parse(wrapped ? source.str() : meshText + source.str());
  EXPECT_TRUE(global) << diagnostics;
  if (!global)
    return collectives;
  mlir::OwningOpRef<mlir::ModuleOp> partitioned = global->clone();

  // Global: inline and fix the batch; partitioned: the whole pipeline.
  mlir::sd::SpecializeBatchOptions specialize;
  specialize.batch = batch;
  mlir::PassManager globalPm(&context);
  globalPm.addPass(mlir::createInlinerPass());
  if (tile)
    globalPm.addNestedPass<mlir::func::FuncOp>(
        mlir::sd::createTileAttention(*tile));
  if (train) {
    specialize.batch = batch / train->step.gradAccum;
    globalPm.addPass(mlir::sd::createSpecializeBatch(specialize));
    mlir::sd::addTrainingPasses(globalPm, *train);
  } else {
    globalPm.addPass(mlir::sd::createSpecializeBatch(specialize));
  }
  EXPECT_TRUE(mlir::succeeded(globalPm.run(*global))) << diagnostics;
  mlir::PassManager pm(&context);
  mlir::sd::PipelineOptions options;
  options.mesh = GetParam();
  options.batch = batch;
  options.partition = true;
  options.tileAttention = tile;
  options.rules = rules;
  if (train) {
    options.train = true;
    options.training = *train;
  }
  mlir::sd::buildDefaultPipeline(pm, options);
  EXPECT_TRUE(mlir::succeeded(pm.run(*partitioned))) << diagnostics;
  if (!diagnostics.empty())
    return collectives;
  if (getenv("SD_DUMP_PARTITIONED"))
    partitioned->print(llvm::errs());

  // The propagated, unpartitioned program has the global types of the
  // partitioned program's ops, one for one in order (collectives aside).
  shardedOps.clear();
  shardedResultOps.clear();
  if (mlir::OwningOpRef<mlir::ModuleOp> propagated =
          parse(wrapped ? source.str() : meshText + source.str())) {
    mlir::PassManager propagatePm(&context);
    mlir::sd::PipelineOptions propagateOptions = options;
    propagateOptions.partition = false;
    propagateOptions.propagate = true;
    mlir::sd::buildDefaultPipeline(propagatePm, propagateOptions);
    if (mlir::succeeded(propagatePm.run(*propagated))) {
      auto opsOf = [](mlir::ModuleOp module) {
        std::map<std::string, std::vector<mlir::Operation *>> ops;
        module.walk([&](mlir::Operation *op) {
          if (op->getDialect() && op->getDialect()->getNamespace() == "sd" &&
              !mlir::isa<mlir::sd::CollectiveEvaluableOpInterface>(op))
            ops[op->getName().getStringRef().str()].push_back(op);
        });
        return ops;
      };
      auto globalOps = opsOf(*propagated), localOps = opsOf(*partitioned);
      // A local type is a block of a global one: same rank, every dimension
      // dividing the global one, fewer elements.
      auto isBlock = [](mlir::Type local, mlir::Type global) {
        auto l = mlir::dyn_cast<mlir::RankedTensorType>(local);
        auto g = mlir::dyn_cast<mlir::RankedTensorType>(global);
        if (!l || !g || l.getRank() != g.getRank() ||
            l.getNumElements() >= g.getNumElements())
          return false;
        for (int64_t d = 0; d < l.getRank(); ++d)
          if (l.getDimSize(d) == 0 || g.getDimSize(d) % l.getDimSize(d))
            return false;
        return true;
      };
      for (auto &[name, locals] : localOps) {
        for (mlir::Operation *l : locals) {
          for (mlir::Operation *g : globalOps[name]) {
            for (unsigned r = 0;
                 r < l->getNumResults() && r < g->getNumResults(); ++r)
              if (isBlock(l->getResult(r).getType(), g->getResult(r).getType()))
                shardedResultOps.insert(name);
            if (l->getNumOperands() != g->getNumOperands())
              continue;
            for (unsigned o = 0; o < l->getNumOperands(); ++o)
              if (isBlock(l->getOperand(o).getType(),
                          g->getOperand(o).getType()))
                shardedOps.insert(name);
          }
        }
      }
    }
  }

  mlir::func::FuncOp globalFunc = lookup(*global, entry);
  mlir::func::FuncOp localFunc = lookup(*partitioned, entry);
  EXPECT_TRUE(globalFunc && localFunc) << "no @" << entry.str();
  if (!globalFunc || !localFunc)
    return collectives;
  localFunc.walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::sd::CollectiveEvaluableOpInterface>(op))
      ++collectives[op->getName().getStringRef().str()];
  });
  auto args = mlir::sd::initializeArguments(globalFunc, /*seed=*/7);
  EXPECT_TRUE(mlir::succeeded(args)) << diagnostics;
  if (mlir::failed(args))
    return collectives;
  mlir::sd::EvalOptions globalOptions;
  globalOptions.precision = precision;
  auto expected = mlir::sd::evaluate(globalFunc, *args, globalOptions);
  EXPECT_TRUE(mlir::succeeded(expected)) << diagnostics;

  auto meshOp = partitioned->lookupSymbol<mlir::sd::MeshOp>("mesh");
  ::sd::MeshSpec mesh = mlir::sd::getMeshSpec(meshOp.getMesh());
  int64_t devices = mesh.numDevices();
  auto localSharding = [](mlir::func::FuncOp func, unsigned index, bool arg) {
    llvm::StringRef key = mlir::sd::SDDialect::kLocalShardingAttrName;
    return arg ? func.getArgAttrOfType<ShardingAttr>(index, key)
               : func.getResultAttrOfType<ShardingAttr>(index, key);
  };

  // Each device's block of every argument; of a partial sum, the member
  // at coordinate 0 of the partial-sum axes holds it all, the others zeros.
  std::vector<std::vector<Tensor>> perDevice(devices);
  for (unsigned i = 0; i < localFunc.getNumArguments(); ++i) {
    AxisUse use = axisUse(localSharding(localFunc, i, true), mesh);
    auto type =
        mlir::cast<mlir::RankedTensorType>(localFunc.getArgumentTypes()[i]);
    std::vector<int64_t> local(type.getShape().begin(), type.getShape().end());
    const Tensor &whole = (*args)[i];
    for (int64_t device = 0; device < devices; ++device) {
      std::vector<int64_t> coords = mesh.coordinates(device);
      bool holds = true;
      for (size_t axis = 0; axis < coords.size(); ++axis)
        holds &= use.dimOf[axis] != -2 || coords[axis] == 0;
      Tensor block(local, whole.dtype());
      if (holds)
        forEachInBlock(
            local, whole.shape(), blockOffsets(use, mesh, device, local),
            [&](int64_t from, int64_t to) { block[from] = whole[to]; });
      perDevice[device].push_back(std::move(block));
    }
  }
  mlir::sd::EvalOptions evalOptions;
  evalOptions.numDevices = devices;
  evalOptions.precision = precision;
  auto actual = mlir::sd::evaluatePerDevice(localFunc, perDevice, evalOptions);
  EXPECT_TRUE(mlir::succeeded(actual)) << diagnostics;
  if (mlir::failed(actual) || mlir::failed(expected))
    return collectives;

  // Results: the devices that are coordinate 0 on every replicated axis
  // hold the blocks (partial sums added); the others must equal them.
  for (unsigned r = 0; r < localFunc.getNumResults(); ++r) {
    AxisUse use = axisUse(localSharding(localFunc, r, false), mesh);
    const Tensor &want = (*expected)[r];
    Tensor got(want.shape(), want.dtype());
    std::map<std::vector<int64_t>, const Tensor *> representative;
    for (int64_t device = 0; device < devices; ++device) {
      const Tensor &block = (*actual)[device][r];
      std::vector<int64_t> coords = mesh.coordinates(device), key;
      bool isRepresentative = true;
      for (size_t axis = 0; axis < coords.size(); ++axis) {
        if (use.dimOf[axis] == -1 && coords[axis] != 0)
          isRepresentative = false;
        if (use.dimOf[axis] != -1)
          key.push_back(coords[axis]);
      }
      if (!isRepresentative) {
        // Compared after the loop, once every representative is known.
        continue;
      }
      representative[key] = &block;
      forEachInBlock(block.shape(), want.shape(),
                     blockOffsets(use, mesh, device, block.shape()),
                     [&](int64_t from, int64_t to) { got[to] += block[from]; });
    }
    for (int64_t device = 0; device < devices; ++device) {
      std::vector<int64_t> coords = mesh.coordinates(device), key;
      for (size_t axis = 0; axis < coords.size(); ++axis)
        if (use.dimOf[axis] != -1)
          key.push_back(coords[axis]);
      EXPECT_EQ((*actual)[device][r].values(), representative[key]->values())
          << "replicas of result #" << r << " differ on device " << device;
    }
    EXPECT_LE(relativeError(got, want), 1e-5)
        << "result #" << r << ": " << got.toString() << " vs "
        << want.toString();
  }
  return collectives;
}

} // namespace partition
} // namespace sd::testing

#endif // SD_UNITTESTS_EVALUATOR_PARTITIONTESTUTILS_H
