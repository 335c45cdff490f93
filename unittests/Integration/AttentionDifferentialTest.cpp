//===- AttentionDifferentialTest.cpp - tiled attention, executed ----------===//
//
// Flash attention and context parallelism checked in the reference
// evaluator, in f64:
// * the gradient function with attention tiled by sd-tile-attention equals
//   the untiled one (loss and every gradient, ≤ 1e-9), for block sizes
//   that divide the lengths and ones that leave partial blocks, with and
//   without a mask, with the separate and the fused dQ;
// * the partitioned training step of models/self_attention.mlir, whose
//   sequence wan's rules shard over `context`, equals one device's for
//   flash (K/V all-gathered), ring and Ulysses attention on context:2,
//   context:4, data:2,context:2 and the four-axis mesh, and the
//   partitioned program has the strategy's collectives.
//
//===----------------------------------------------------------------------===//

#include "PartitionTestUtils.h"

#include "sd/Sharding/LogicalRules.h"

using namespace sd::testing;
using namespace sd::testing::partition;

namespace {

/// A self-attention and a masked cross-attention (with fully masked query
/// rows) whose lengths (24 and 20) blocks of 16 and 7 do not divide, each
/// behind a learned projection. The scales are powers of two: the untiled
/// VJP multiplies by the scale as a constant of the element type (f32),
/// which for 1/sqrt(8) differs from the forward's double by 1e-8.
constexpr const char *kTwoAttentions = R"mlir(
func.func @loss(%wq: tensor<8x8xf32> {sd.role = #sd.param<"wq", normal(0.3)>},
                %wk: tensor<8x8xf32> {sd.role = #sd.param<"wk", normal(0.3)>},
                %x: tensor<2x3x24x8xf32> {sd.role = #sd.input<latents>},
                %c: tensor<2x3x20x8xf32> {sd.role = #sd.input<context>},
                %t: tensor<2x3x24x8xf32> {sd.role = #sd.input<noise>}) -> tensor<f32> {
  // Query i attends keys j < i - 2: queries 0 to 2 attend nothing.
  %i = sd.iota dim = 2 : tensor<1x3x24x20xf32>
  %j = sd.iota dim = 3 : tensor<1x3x24x20xf32>
  %two = sd.constant dense<2.0> : tensor<1x3x24x20xf32>
  %i2 = sd.sub %i, %two : tensor<1x3x24x20xf32>
  %m = sd.compare lt, %j, %i2 : tensor<1x3x24x20xf32>
  %q = sd.dot_general %x, %wq batch = [] x [] contract = [3] x [0] : (tensor<2x3x24x8xf32>, tensor<8x8xf32>) -> tensor<2x3x24x8xf32>
  %k = sd.dot_general %c, %wk batch = [] x [] contract = [3] x [0] : (tensor<2x3x20x8xf32>, tensor<8x8xf32>) -> tensor<2x3x20x8xf32>
  %s = sd.attention %q, %q, %x scale = 0.25 : (tensor<2x3x24x8xf32>, tensor<2x3x24x8xf32>, tensor<2x3x24x8xf32>) -> tensor<2x3x24x8xf32>
  %o = sd.attention %s, %k, %c mask %m scale = 0.5 : (tensor<2x3x24x8xf32>, tensor<2x3x20x8xf32>, tensor<2x3x20x8xf32>, tensor<1x3x24x20xi1>) -> tensor<2x3x24x8xf32>
  %l = sd.mse_loss %o, %t : tensor<2x3x24x8xf32>
  return %l : tensor<f32>
}
)mlir";

class TiledAttentionTest : public EvaluatorTest {
protected:
  /// @loss_grad of kTwoAttentions, tiled with `tile` when given.
  mlir::OwningOpRef<mlir::ModuleOp>
  gradient(std::optional<mlir::sd::TileAttentionOptions> tile) {
    mlir::OwningOpRef<mlir::ModuleOp> module = parse(kTwoAttentions);
    if (!module)
      return {};
    mlir::PassManager pm(&context);
    if (tile)
      pm.addNestedPass<mlir::func::FuncOp>(
          mlir::sd::createTileAttention(*tile));
    mlir::sd::addTrainingPasses(pm, {}, /*buildStep=*/false);
    if (mlir::failed(pm.run(*module)))
      return {};
    return module;
  }
};

TEST_F(TiledAttentionTest, GradientEqualsUntiled) {
  mlir::OwningOpRef<mlir::ModuleOp> untiled = gradient(std::nullopt);
  ASSERT_TRUE(untiled) << diagnostics;
  mlir::func::FuncOp reference = lookup(*untiled, "loss_grad");
  auto args = mlir::sd::initializeArguments(reference, 7);
  ASSERT_TRUE(mlir::succeeded(args)) << diagnostics;
  mlir::sd::EvalOptions eval;
  eval.precision = mlir::sd::Precision::F64;
  auto want = mlir::sd::evaluate(reference, *args, eval);
  ASSERT_TRUE(mlir::succeeded(want)) << diagnostics;

  struct Blocks {
    const char *name;
    int64_t q, kvCompute, kv, kvDkv, qDq;
    bool fused;
  };
  for (Blocks b : {Blocks{"dividing", 8, 4, 4, 4, 8, false},
                   Blocks{"partial", 16, 7, 14, 5, 9, false},
                   Blocks{"partial-fused", 16, 7, 14, 5, 9, true},
                   Blocks{"larger-than-lengths", 64, 64, 128, 64, 64, false},
                   Blocks{"single", 1, 1, 1, 1, 1, false}}) {
    SCOPED_TRACE(b.name);
    mlir::sd::TileAttentionOptions tile;
    tile.blockQ = b.q;
    tile.blockKvCompute = b.kvCompute;
    tile.blockKv = b.kv;
    tile.blockKvDkv = b.kvDkv;
    tile.blockQDq = b.qDq;
    tile.useFusedBwdKernel = b.fused;
    mlir::OwningOpRef<mlir::ModuleOp> tiled = gradient(tile);
    ASSERT_TRUE(tiled) << diagnostics;
    int64_t flash = 0;
    tiled->walk([&](mlir::sd::FlashAttentionOp) { ++flash; });
    EXPECT_EQ(flash, 2);
    auto got = mlir::sd::evaluate(lookup(*tiled, "loss_grad"), *args, eval);
    ASSERT_TRUE(mlir::succeeded(got)) << diagnostics;
    ASSERT_EQ(got->size(), want->size());
    for (size_t r = 0; r < want->size(); ++r)
      EXPECT_LE(relativeError((*got)[r], (*want)[r]), 1e-9) << "result #" << r;
  }
}

//===----------------------------------------------------------------------===//
// Context parallelism, partitioned
//===----------------------------------------------------------------------===//

class ContextParallelTest : public PartitionTestBase {};

TEST_P(ContextParallelTest, SelfAttentionTrainStep) {
  std::string source = readModel("self_attention.mlir");
  ASSERT_FALSE(source.empty());
  absl::StatusOr<::sd::LogicalAxisRules> wan = ::sd::loadRules("wan");
  ASSERT_TRUE(wan.ok()) << wan.status();
  rules = *wan;
  train = mlir::sd::TrainingOptions();
  precision = mlir::sd::Precision::F64;
  bool sharded = llvm::StringRef(GetParam()).contains("context");
  for (auto [kind, collective] :
       {std::pair{::sd::AttentionKind::Flash, "sd.all_gather"},
        std::pair{::sd::AttentionKind::Ring, "sd.collective_permute_start"},
        std::pair{::sd::AttentionKind::Ulysses, "sd.all_to_all"},
        // Pairs of devices: on context:4 Ulysses within each pair and a
        // ring of two pairs, on context:2 Ulysses alone.
        std::pair{::sd::AttentionKind::UlyssesRing, "sd.all_to_all"}}) {
    SCOPED_TRACE(std::string(::sd::attentionKindName(kind)));
    tile = mlir::sd::TileAttentionOptions();
    tile->attention = kind;
    if (kind == ::sd::AttentionKind::UlyssesRing)
      tile->ulyssesShards = 2;
    tile->blockQ = 8;
    tile->blockKvCompute = 4;
    tile->blockKv = 12;
    std::map<std::string, int> collectives =
        check(source, "train_step", /*batch=*/4);
    if (sharded) {
      EXPECT_GT(collectives[collective], 0) << collective;
      EXPECT_TRUE(shardedOps.count("sd.flash_attention"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Meshes, ContextParallelTest,
                         ::testing::Values("context:2", "context:4",
                                           "data:2,context:2",
                                           "data:2,fsdp:2,context:2,tensor:2"),
                         meshTestName);

} // namespace
