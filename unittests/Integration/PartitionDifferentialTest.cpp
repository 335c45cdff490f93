//===- PartitionDifferentialTest.cpp - partitioned vs global --------------===//
//
// The executable test of sd-partition: a program runs once unpartitioned on
// one device and once partitioned on every device of a mesh, and the two
// must agree. The partitioned run gets each device's block of the global
// arguments (cut by the arguments' `sd.local_sharding`); its results are
// put back together from the devices' blocks (replicas must agree bitwise,
// partial sums are added) and compared with the global results: relative
// error (largest difference over largest magnitude) at most 1e-5.
//
// Programs: small ones written with logical axes, so that the dit rules
// shard them on every mesh (an MLP with a loss and a mean, attention over
// heads, iota / rng / constants, reshards of every kind, layout changes
// that permute blocks among devices), and models/dit_tiny.mlir's forward
// loss. Each runs on the meshes data:2, fsdp:2, tensor:2, context:2,
// data:2,fsdp:2, data:2,tensor:2, fsdp:2,tensor:2 and
// data:2,fsdp:2,context:2,tensor:2.
//
//===----------------------------------------------------------------------===//

#include "PartitionTestUtils.h"

#include "llvm/Support/MemoryBuffer.h"

using namespace sd::testing;
using namespace sd::testing::partition;

namespace {

/// The fixture of the programs below, on the meshes instantiated at the end.
class PartitionDifferentialTest : public PartitionTestBase {
protected:
  /// Whether the mesh has axes data and fsdp, which some programs name.
  static bool hasDataAndFsdp() {
    llvm::StringRef mesh = GetParam();
    return mesh.contains("data") && mesh.contains("fsdp");
  }
};

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

// Megatron MLP with a residual, its mean over the sequence and an MSE loss.
constexpr llvm::StringLiteral kMlp = R"mlir(
func.func @main(
    %x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<latents>},
    %t: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<noise>},
    %w1: tensor<32x64xf32> {sd.logical_axes = #sd.logical_axes<[embed, mlp]>, sd.role = #sd.param<"w1", normal(0.2)>},
    %b1: tensor<64xf32> {sd.logical_axes = #sd.logical_axes<[mlp]>, sd.role = #sd.param<"b1", normal(0.1)>},
    %w2: tensor<64x32xf32> {sd.logical_axes = #sd.logical_axes<[mlp, embed]>, sd.role = #sd.param<"w2", normal(0.2)>})
    -> (tensor<8x16x32xf32>, tensor<f32>, tensor<8x32xf32>) {
  %h = sd.dot_general %x, %w1 batch = [] x [] contract = [2] x [0] : (tensor<8x16x32xf32>, tensor<32x64xf32>) -> tensor<8x16x64xf32>
  %b = sd.broadcast_in_dim %b1 dims = [2] : (tensor<64xf32>) -> tensor<8x16x64xf32>
  %hb = sd.add %h, %b : tensor<8x16x64xf32>
  %g = sd.gelu %hb : tensor<8x16x64xf32>
  %o = sd.dot_general %g, %w2 batch = [] x [] contract = [2] x [0] : (tensor<8x16x64xf32>, tensor<64x32xf32>) -> tensor<8x16x32xf32>
  %y = sd.add %o, %x : tensor<8x16x32xf32>
  %l = sd.mse_loss %y, %t : tensor<8x16x32xf32>
  %m = sd.reduce_mean %y dims = [1] : (tensor<8x16x32xf32>) -> tensor<8x32xf32>
  return %y, %l, %m : tensor<8x16x32xf32>, tensor<f32>, tensor<8x32xf32>
}
)mlir";

// Self-attention over 4 heads with layer norm and an output projection.
constexpr llvm::StringLiteral kAttention = R"mlir(
func.func @main(
    %x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, embed]>, sd.role = #sd.input<latents>},
    %wq: tensor<32x32xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"wq", normal(0.2)>},
    %wk: tensor<32x32xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"wk", normal(0.2)>},
    %wv: tensor<32x32xf32> {sd.logical_axes = #sd.logical_axes<[embed, heads]>, sd.role = #sd.param<"wv", normal(0.2)>},
    %wo: tensor<32x32xf32> {sd.logical_axes = #sd.logical_axes<[heads, embed]>, sd.role = #sd.param<"wo", normal(0.2)>})
    -> tensor<8x16x32xf32> {
  %n = sd.layer_norm %x : (tensor<8x16x32xf32>) -> tensor<8x16x32xf32>
  %q = sd.dot_general %n, %wq batch = [] x [] contract = [2] x [0] : (tensor<8x16x32xf32>, tensor<32x32xf32>) -> tensor<8x16x32xf32>
  %k = sd.dot_general %n, %wk batch = [] x [] contract = [2] x [0] : (tensor<8x16x32xf32>, tensor<32x32xf32>) -> tensor<8x16x32xf32>
  %v = sd.dot_general %n, %wv batch = [] x [] contract = [2] x [0] : (tensor<8x16x32xf32>, tensor<32x32xf32>) -> tensor<8x16x32xf32>
  %q4 = sd.reshape %q : (tensor<8x16x32xf32>) -> tensor<8x16x4x8xf32>
  %k4 = sd.reshape %k : (tensor<8x16x32xf32>) -> tensor<8x16x4x8xf32>
  %v4 = sd.reshape %v : (tensor<8x16x32xf32>) -> tensor<8x16x4x8xf32>
  %qt = sd.transpose %q4 permutation = [0, 2, 1, 3] : (tensor<8x16x4x8xf32>) -> tensor<8x4x16x8xf32>
  %kt = sd.transpose %k4 permutation = [0, 2, 1, 3] : (tensor<8x16x4x8xf32>) -> tensor<8x4x16x8xf32>
  %vt = sd.transpose %v4 permutation = [0, 2, 1, 3] : (tensor<8x16x4x8xf32>) -> tensor<8x4x16x8xf32>
  %a = sd.attention %qt, %kt, %vt : (tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>, tensor<8x4x16x8xf32>) -> tensor<8x4x16x8xf32>
  %at = sd.transpose %a permutation = [0, 2, 1, 3] : (tensor<8x4x16x8xf32>) -> tensor<8x16x4x8xf32>
  %a3 = sd.reshape %at : (tensor<8x16x4x8xf32>) -> tensor<8x16x32xf32>
  %o = sd.dot_general %a3, %wo batch = [] x [] contract = [2] x [0] : (tensor<8x16x32xf32>, tensor<32x32xf32>) -> tensor<8x16x32xf32>
  %y = sd.add %o, %x : tensor<8x16x32xf32>
  return %y : tensor<8x16x32xf32>
}
)mlir";

// Values made on each device: iota and rng along sharded dimensions, a
// splat and a non-splat constant, combined with a sharded input.
constexpr llvm::StringLiteral kSources = R"mlir(
func.func @main(%x: tensor<8x16xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length]>, sd.role = #sd.input<latents>})
    -> tensor<8x16xf32> {
  %i0 = sd.iota dim = 0 : tensor<8x16xf32>
  %i = sd.sharding_constraint %i0 logical = <[batch, activation_length]> : tensor<8x16xf32>
  %j0 = sd.iota dim = 1 : tensor<8x16xbf16>
  %j = sd.convert %j0 : tensor<8x16xbf16> -> tensor<8x16xf32>
  %r0 = sd.rng_normal seed = 5 : tensor<8x16xf32>
  %r = sd.sharding_constraint %r0 logical = <[batch, activation_length]> : tensor<8x16xf32>
  %u = sd.rng_uniform seed = 6 {high = 2.0 : f64, low = -1.0 : f64} : tensor<8x16xf32>
  %two = sd.constant dense<2.0> : tensor<8x16xf32>
  %c = sd.constant dense<[0.5, 1.5, -2.0, 3.0, 0.25, -1.0, 4.0, 8.0]> : tensor<8xf32>
  %cb = sd.broadcast_in_dim %c dims = [0] : (tensor<8xf32>) -> tensor<8x16xf32>
  %a = sd.mul %x, %two : tensor<8x16xf32>
  %b = sd.add %a, %i : tensor<8x16xf32>
  %d = sd.add %b, %j : tensor<8x16xf32>
  %e = sd.add %d, %r : tensor<8x16xf32>
  %f = sd.mul %e, %cb : tensor<8x16xf32>
  %g = sd.add %f, %u : tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}
)mlir";

// Layout changes: the sequence axis moves to another dimension
// (all-to-all), the batch axes too, a reduction over sharded dimensions is
// all-reduced, a sharded value is gathered, and a replicated parameter
// sliced.
constexpr llvm::StringLiteral kReshards = R"mlir(
func.func @main(%x: tensor<8x16x32xf32> {sd.logical_axes = #sd.logical_axes<[batch, activation_length, heads]>, sd.role = #sd.input<latents>},
                %w: tensor<8x32xf32> {sd.role = #sd.param<"w", normal(1.0)>, sd.sharding = #sd.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<16x32xf32>, tensor<f32>, tensor<8x32xf32>) {
  %e = sd.exp %x : tensor<8x16x32xf32>
  %moved = sd.sharding_constraint %e logical = <[batch, heads, activation_length]> : tensor<8x16x32xf32>
  %n = sd.neg %moved : tensor<8x16x32xf32>
  %swapped = sd.sharding_constraint %n logical = <[activation_length, batch, heads]> : tensor<8x16x32xf32>
  %s = sd.reduce_sum %x dims = [0] : (tensor<8x16x32xf32>) -> tensor<16x32xf32>
  %scattered = sd.sharding_constraint %s logical = <[batch, _]> : tensor<16x32xf32>
  %total = sd.reduce_sum %x dims = [0, 1, 2] : (tensor<8x16x32xf32>) -> tensor<f32>
  %ws = sd.sharding_constraint %w logical = <[_, heads]> : tensor<8x32xf32>
  %wx = sd.sin %ws : tensor<8x32xf32>
  return %moved, %swapped, %scattered, %total, %wx : tensor<8x16x32xf32>, tensor<8x16x32xf32>, tensor<16x32xf32>, tensor<f32>, tensor<8x32xf32>
}
)mlir";

// Partial sums handed in (as gradients are in a training step): one is
// reduce-scattered onto fsdp and all-reduced over data, one all-reduced.
constexpr llvm::StringLiteral kPartialSums = R"mlir(
func.func @main(%g: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], unreduced = ["data", "fsdp"]>, sd.role = #sd.input<latents>},
                %h: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{}, {}], unreduced = ["data"]>, sd.role = #sd.input<noise>})
    -> (tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {}]>}, tensor<16x32xf32>) {
  return %g, %h : tensor<16x32xf32>, tensor<16x32xf32>
}
)mlir";

// Layout changes that permute whole blocks among devices: a dimension moves
// from data to fsdp, a dimension's axes change order, and two dimensions
// trade axes, each with a consumer on the new layout.
constexpr llvm::StringLiteral kBlockPermutations = R"mlir(
func.func @main(%x: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {}]>, sd.role = #sd.input<latents>},
                %y: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data", "fsdp"}, {}]>, sd.role = #sd.input<noise>},
                %z: tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"data"}, {"fsdp"}]>, sd.role = #sd.input<context>})
    -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32> {sd.sharding = #sd.sharding<@mesh, [{"fsdp"}, {"data"}]>}) {
  %ex = sd.exp %x : tensor<16x32xf32>
  %a = sd.sharding_constraint %ex sharding = <@mesh, [{"fsdp"}, {}]> : tensor<16x32xf32>
  %sa = sd.sin %a : tensor<16x32xf32>
  %b = sd.sharding_constraint %y sharding = <@mesh, [{"fsdp", "data"}, {}]> : tensor<16x32xf32>
  %cb = sd.cos %b : tensor<16x32xf32>
  return %sa, %cb, %z : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
}
)mlir";

TEST_P(PartitionDifferentialTest, Mlp) { check(kMlp, "main", 8); }

TEST_P(PartitionDifferentialTest, Attention) { check(kAttention, "main", 8); }

TEST_P(PartitionDifferentialTest, Sources) {
  std::map<std::string, int> ops = check(kSources, "main", 8);
  if (llvm::StringRef(GetParam()).contains("data")) {
    EXPECT_GT(ops["sd.axis_index"], 0) << "iota and rng need offsets";
  }
}

TEST_P(PartitionDifferentialTest, Reshards) {
  std::map<std::string, int> ops = check(kReshards, "main", 8);
  if (llvm::StringRef(GetParam()) == "data:2,fsdp:2,context:2,tensor:2") {
    for (const char *kind :
         {"sd.all_gather", "sd.all_slice", "sd.all_to_all", "sd.all_reduce"})
      EXPECT_GT(ops[kind], 0) << kind;
  }
}

TEST_P(PartitionDifferentialTest, PartialSums) {
  if (!hasDataAndFsdp())
    GTEST_SKIP() << "the program names mesh axes data and fsdp";
  std::map<std::string, int> ops = check(kPartialSums, "main", 8);
  EXPECT_EQ(ops["sd.reduce_scatter"], 1);
  EXPECT_EQ(ops["sd.all_reduce"], 2);
}

TEST_P(PartitionDifferentialTest, BlockPermutations) {
  if (!hasDataAndFsdp())
    GTEST_SKIP() << "the program names mesh axes data and fsdp";
  std::map<std::string, int> ops = check(kBlockPermutations, "main", 8);
  // Each of the three sends every block once, with one permute (swapping
  // the devices at data 0, fsdp 1 and data 1, fsdp 0) instead of a gather
  // and a slice.
  EXPECT_EQ(ops["sd.collective_permute"], 3);
  EXPECT_EQ(ops["sd.all_gather"], 0);
  EXPECT_EQ(ops["sd.all_slice"], 0);
}

TEST_P(PartitionDifferentialTest, DitTinyForward) {
  std::string source =
      ditTinySource([&](llvm::StringRef text) { return parse(text); });
  ASSERT_FALSE(source.empty()) << diagnostics;
  check(source, "loss", 8);
}

// sd-optimize-collectives keeps every device's results: a local program
// with each pattern's input, evaluated before and after on data=2, fsdp=2,
// tensor=2 with the same per-device arguments.
constexpr llvm::StringLiteral kCollectives = R"mlir(
sd.mesh @mesh = <["data"=2, "fsdp"=2, "tensor"=2, "unit"=1]>
func.func @main(%x: tensor<4x8xf32>, %y: tensor<16x8xf32>)
    -> (tensor<16x16xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<16x4xf32>,
        tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %g1 = sd.all_gather %x @mesh [{"fsdp"}, {"tensor"}] : (tensor<4x8xf32>) -> tensor<8x16xf32>
  %g2 = sd.all_gather %g1 @mesh [{"data"}, {}] : (tensor<8x16xf32>) -> tensor<16x16xf32>
  %g3 = sd.all_gather %x @mesh [{"data", "fsdp"}, {}] : (tensor<4x8xf32>) -> tensor<16x8xf32>
  %s1 = sd.all_slice %g3 @mesh [{"data"}, {}] : (tensor<16x8xf32>) -> tensor<8x8xf32>
  %g4 = sd.all_gather %x @mesh [{"tensor"}, {}] : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %s2 = sd.all_slice %g4 @mesh [{"tensor"}, {}] : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = sd.all_reduce %y @mesh axes = ["data", "tensor"] : tensor<16x8xf32>
  %s3 = sd.all_slice %r1 @mesh [{}, {"tensor"}] : (tensor<16x8xf32>) -> tensor<16x4xf32>
  %r2 = sd.all_reduce %x @mesh axes = ["fsdp"] : tensor<4x8xf32>
  %r3 = sd.all_reduce %r2 @mesh axes = ["data", "unit"] : tensor<4x8xf32>
  %r4 = sd.all_reduce %y @mesh axes = ["fsdp"] : tensor<16x8xf32>
  %s4 = sd.all_slice %r4 @mesh [{"data", "tensor"}, {}] : (tensor<16x8xf32>) -> tensor<4x8xf32>
  %r5 = sd.all_reduce %s4 @mesh axes = ["unit"] : tensor<4x8xf32>
  %p = sd.collective_permute %x @mesh axes = ["fsdp", "unit", "data"] pairs = [[0, 0], [1, 3], [3, 2], [2, 1]] : tensor<4x8xf32>
  return %g2, %s1, %s2, %s3, %r3, %r4, %r5, %p : tensor<16x16xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<16x4xf32>, tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
)mlir";

TEST_F(EvaluatorTest, OptimizeCollectivesKeepsValues) {
  mlir::OwningOpRef<mlir::ModuleOp> before = parse(kCollectives);
  ASSERT_TRUE(before) << diagnostics;
  mlir::OwningOpRef<mlir::ModuleOp> after = before->clone();
  mlir::PassManager pm(&context);
  pm.addNestedPass<mlir::func::FuncOp>(mlir::sd::createOptimizeCollectives());
  ASSERT_TRUE(mlir::succeeded(pm.run(*after))) << diagnostics;
  int64_t collectives = 0;
  after->walk([&](mlir::sd::CollectiveEvaluableOpInterface) { ++collectives; });
  EXPECT_LT(collectives, 14);

  // Distinct values per device, so that a wrong block or sum shows.
  std::vector<std::vector<Tensor>> args;
  for (int64_t device = 0; device < 8; ++device) {
    std::vector<Tensor> deviceArgs;
    for (std::vector<int64_t> shape : {std::vector<int64_t>{4, 8}, {16, 8}}) {
      Tensor arg(shape, DType::F32);
      for (int64_t i = 0; i < arg.numElements(); ++i)
        arg[i] = static_cast<double>((i * 7 + device * 13) % 29) - 14.0;
      deviceArgs.push_back(std::move(arg));
    }
    args.push_back(std::move(deviceArgs));
  }
  mlir::sd::EvalOptions options;
  options.numDevices = 8;
  auto want = mlir::sd::evaluatePerDevice(lookup(*before), args, options);
  auto got = mlir::sd::evaluatePerDevice(lookup(*after), args, options);
  ASSERT_TRUE(mlir::succeeded(want) && mlir::succeeded(got)) << diagnostics;
  for (int64_t device = 0; device < 8; ++device)
    for (size_t r = 0; r < (*want)[device].size(); ++r)
      EXPECT_EQ((*got)[device][r].values(), (*want)[device][r].values())
          << "result #" << r << " on device " << device;
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, PartitionDifferentialTest,
    ::testing::Values(SD_PARTITION_TEST_MESHES),
    meshTestName);

} // namespace
