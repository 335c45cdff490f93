//===- CollectivesTest.cpp - collectives across simulated devices ---------===//
//
// Each collective on small meshes, with per-device inputs built by hand and
// the expected per-device outputs worked out by hand from the block
// conventions (a dimension sharded over [a, b] holds block ca·size(b) + cb).
// Without DCN, device id d of a ["data"=2, "fsdp"=2] mesh has coordinates
// (d / 2, d % 2).
//
//===----------------------------------------------------------------------===//

#include "TestUtils.h"

#include "sd/IR/SDOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cmath>
#include <functional>
#include <string>

using namespace sd::testing;
using mlir::sd::EvalOptions;
using mlir::sd::PerDeviceTensors;
using mlir::sd::Precision;

namespace {

/// `tensor.values()` as a vector for comparisons.
std::vector<double> valuesOf(const Tensor &tensor) { return tensor.values(); }

class CollectivesTest : public EvaluatorTest {
protected:
  /// Parses `source` and runs its `@main` on `args.size()` devices.
  mlir::FailureOr<PerDeviceTensors>
  runOnDevices(llvm::StringRef source,
               const std::vector<std::vector<Tensor>> &args,
               Precision precision = Precision::Native) {
    mlir::OwningOpRef<mlir::ModuleOp> module = parse(source);
    if (!module)
      return mlir::failure();
    EvalOptions options;
    options.precision = precision;
    options.numDevices = static_cast<int64_t>(args.size());
    return mlir::sd::evaluatePerDevice(lookup(*module), args, options);
  }

  /// Like runOnDevices, for a program that must succeed.
  PerDeviceTensors runOk(llvm::StringRef source,
                         const std::vector<std::vector<Tensor>> &args,
                         Precision precision = Precision::Native) {
    mlir::FailureOr<PerDeviceTensors> results =
        runOnDevices(source, args, precision);
    EXPECT_TRUE(mlir::succeeded(results)) << diagnostics;
    if (mlir::failed(results))
      return PerDeviceTensors(args.size());
    EXPECT_EQ(results->size(), args.size());
    return std::move(*results);
  }
};

/// One argument per device: `make(device)`.
std::vector<std::vector<Tensor>>
perDevice(int64_t numDevices, const std::function<Tensor(int64_t)> &make) {
  std::vector<std::vector<Tensor>> args;
  for (int64_t device = 0; device < numDevices; ++device)
    args.push_back({make(device)});
  return args;
}

/// Device d holds the single value d.
std::vector<std::vector<Tensor>> deviceIds(int64_t numDevices) {
  return perDevice(numDevices, [](int64_t device) {
    return Tensor({1}, DType::F32, static_cast<double>(device));
  });
}

const char *kMesh2x2 = R"mlir(sd.mesh @mesh = <["data"=2, "fsdp"=2]>
)mlir";

//===----------------------------------------------------------------------===//
// all_gather
//===----------------------------------------------------------------------===//

TEST_F(CollectivesTest, AllGatherOneAxis) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1x2xf32>) -> (tensor<2x2xf32>, tensor<1x4xf32>) {
      %a = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<1x2xf32>) -> tensor<2x2xf32>
      %b = sd.all_gather %x @mesh [{}, {"data"}] : (tensor<1x2xf32>) -> tensor<1x4xf32>
      return %a, %b : tensor<2x2xf32>, tensor<1x4xf32>
    }
  )mlir";
  // Device d holds [10d, 10d + 1].
  auto args = perDevice(4, [](int64_t d) {
    return Tensor({1, 2}, DType::F32, {10.0 * d, 10.0 * d + 1});
  });
  PerDeviceTensors results = runOk(source, args);
  // Over fsdp: devices (c, 0) and (c, 1) stack their rows.
  expectTensor(results[0][0], {2, 2}, DType::F32, {0, 1, 10, 11});
  expectTensor(results[1][0], {2, 2}, DType::F32, {0, 1, 10, 11});
  expectTensor(results[2][0], {2, 2}, DType::F32, {20, 21, 30, 31});
  expectTensor(results[3][0], {2, 2}, DType::F32, {20, 21, 30, 31});
  // Over data along dimension 1: devices (0, c) and (1, c).
  expectTensor(results[0][1], {1, 4}, DType::F32, {0, 1, 20, 21});
  expectTensor(results[1][1], {1, 4}, DType::F32, {10, 11, 30, 31});
  expectTensor(results[2][1], {1, 4}, DType::F32, {0, 1, 20, 21});
  expectTensor(results[3][1], {1, 4}, DType::F32, {10, 11, 30, 31});
}

TEST_F(CollectivesTest, AllGatherTwoAxesOfOneDimKeepsTheirOrder) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %a = sd.all_gather %x @mesh [{"data", "fsdp"}] : (tensor<1xf32>) -> tensor<4xf32>
      %b = sd.all_gather %x @mesh [{"fsdp", "data"}] : (tensor<1xf32>) -> tensor<4xf32>
      return %a, %b : tensor<4xf32>, tensor<4xf32>
    }
  )mlir";
  PerDeviceTensors results = runOk(source, deviceIds(4));
  for (int64_t device = 0; device < 4; ++device) {
    // data major: block cd·2 + cf comes from device (cd, cf) = cd·2 + cf.
    expectTensor(results[device][0], {4}, DType::F32, {0, 1, 2, 3});
    // fsdp major: block cf·2 + cd comes from device (cd, cf).
    expectTensor(results[device][1], {4}, DType::F32, {0, 2, 1, 3});
  }
}

TEST_F(CollectivesTest, AllGatherTwoDimensions) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1x1xf32>) -> tensor<2x2xf32> {
      %a = sd.all_gather %x @mesh [{"data"}, {"fsdp"}] : (tensor<1x1xf32>) -> tensor<2x2xf32>
      return %a : tensor<2x2xf32>
    }
  )mlir";
  auto args = perDevice(4, [](int64_t d) {
    return Tensor({1, 1}, DType::F32, static_cast<double>(d));
  });
  PerDeviceTensors results = runOk(source, args);
  for (int64_t device = 0; device < 4; ++device)
    expectTensor(results[device][0], {2, 2}, DType::F32, {0, 1, 2, 3});
}

//===----------------------------------------------------------------------===//
// all_slice
//===----------------------------------------------------------------------===//

TEST_F(CollectivesTest, AllSliceThenAllGatherRoundTrip) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<4x4xf32>) -> (tensor<2x2xf32>, tensor<4x4xf32>) {
      %s = sd.all_slice %x @mesh [{"data"}, {"fsdp"}] : (tensor<4x4xf32>) -> tensor<2x2xf32>
      %g = sd.all_gather %s @mesh [{"data"}, {"fsdp"}] : (tensor<2x2xf32>) -> tensor<4x4xf32>
      return %s, %g : tensor<2x2xf32>, tensor<4x4xf32>
    }
  )mlir";
  std::vector<double> whole(16);
  for (int i = 0; i < 16; ++i)
    whole[i] = i;
  auto args = perDevice(4, [&](int64_t) {
    return Tensor({4, 4}, DType::F32, whole);
  });
  PerDeviceTensors results = runOk(source, args);
  // Device (cd, cf) keeps rows 2cd, 2cd+1 and columns 2cf, 2cf+1.
  expectTensor(results[0][0], {2, 2}, DType::F32, {0, 1, 4, 5});
  expectTensor(results[1][0], {2, 2}, DType::F32, {2, 3, 6, 7});
  expectTensor(results[2][0], {2, 2}, DType::F32, {8, 9, 12, 13});
  expectTensor(results[3][0], {2, 2}, DType::F32, {10, 11, 14, 15});
  for (int64_t device = 0; device < 4; ++device)
    expectTensor(results[device][1], {4, 4}, DType::F32, whole);
}

TEST_F(CollectivesTest, AllSliceTwoAxesOfOneDim) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<4x1xf32>) -> tensor<1x1xf32> {
      %s = sd.all_slice %x @mesh [{"fsdp", "data"}, {}] : (tensor<4x1xf32>) -> tensor<1x1xf32>
      return %s : tensor<1x1xf32>
    }
  )mlir";
  auto args = perDevice(4, [](int64_t) {
    return Tensor({4, 1}, DType::F32, {0, 1, 2, 3});
  });
  PerDeviceTensors results = runOk(source, args);
  // Device (cd, cf) keeps block cf·2 + cd.
  expectTensor(results[0][0], {1, 1}, DType::F32, {0});
  expectTensor(results[1][0], {1, 1}, DType::F32, {2});
  expectTensor(results[2][0], {1, 1}, DType::F32, {1});
  expectTensor(results[3][0], {1, 1}, DType::F32, {3});
}

//===----------------------------------------------------------------------===//
// all_reduce, reduce_scatter
//===----------------------------------------------------------------------===//

TEST_F(CollectivesTest, AllReduceOverOneAxisAndOverBoth) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
      %a = sd.all_reduce %x @mesh axes = ["data"] : tensor<2xf32>
      %b = sd.all_reduce %x @mesh axes = ["fsdp"] : tensor<2xf32>
      %c = sd.all_reduce %x @mesh axes = ["data", "fsdp"] : tensor<2xf32>
      return %a, %b, %c : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
    }
  )mlir";
  // Device d holds [d + 1, 10(d + 1)].
  auto args = perDevice(4, [](int64_t d) {
    return Tensor({2}, DType::F32, {d + 1.0, 10.0 * (d + 1)});
  });
  PerDeviceTensors results = runOk(source, args);
  // Over data: {0, 2} and {1, 3}; over fsdp: {0, 1} and {2, 3}.
  expectTensor(results[0][0], {2}, DType::F32, {4, 40});
  expectTensor(results[1][0], {2}, DType::F32, {6, 60});
  expectTensor(results[2][0], {2}, DType::F32, {4, 40});
  expectTensor(results[3][0], {2}, DType::F32, {6, 60});
  expectTensor(results[0][1], {2}, DType::F32, {3, 30});
  expectTensor(results[1][1], {2}, DType::F32, {3, 30});
  expectTensor(results[2][1], {2}, DType::F32, {7, 70});
  expectTensor(results[3][1], {2}, DType::F32, {7, 70});
  for (int64_t device = 0; device < 4; ++device)
    expectTensor(results[device][2], {2}, DType::F32, {10, 100});
}

/// 2^54 + 1 rounds back to 2^54 in double, so only the specified order,
/// ((x0 + x1) + x2) + x3 over ascending coordinates, gives 1 (descending
/// gives 0, pairwise 0), however the op lists the axes.
TEST_F(CollectivesTest, AllReduceSumsInAscendingCoordinateOrder) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
      %a = sd.all_reduce %x @mesh axes = ["data", "fsdp"] : tensor<1xf32>
      %b = sd.all_reduce %x @mesh axes = ["fsdp", "data"] : tensor<1xf32>
      return %a, %b : tensor<1xf32>, tensor<1xf32>
    }
  )mlir";
  const double big = std::ldexp(1.0, 54);
  std::vector<double> values = {big, 1.0, -big, 1.0};
  auto args = perDevice(
      4, [&](int64_t d) { return Tensor({1}, DType::F32, values[d]); });
  PerDeviceTensors results = runOk(source, args);
  for (int64_t device = 0; device < 4; ++device) {
    EXPECT_EQ(results[device][0][0], 1.0) << "device " << device;
    EXPECT_EQ(results[device][1][0], 1.0) << "device " << device;
  }
}

/// The sum is rounded once, to the element type, in Native mode only.
TEST_F(CollectivesTest, AllReduceRoundsToElementType) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1xbf16>) -> tensor<1xbf16> {
      %a = sd.all_reduce %x @mesh axes = ["data", "fsdp"] : tensor<1xbf16>
      return %a : tensor<1xbf16>
    }
  )mlir";
  // 1 + 2^-8 lies halfway between the bf16 neighbours 1 and 1 + 2^-7.
  std::vector<double> values = {1.0, std::ldexp(1.0, -8), 0.0, 0.0};
  auto args = perDevice(
      4, [&](int64_t d) { return Tensor({1}, DType::BF16, values[d]); });
  PerDeviceTensors native = runOk(source, args);
  PerDeviceTensors f64 = runOk(source, args, Precision::F64);
  for (int64_t device = 0; device < 4; ++device) {
    expectTensor(native[device][0], {1}, DType::BF16, {1.0}, 0.0);
    expectTensor(f64[device][0], {1}, DType::BF16, {1.00390625}, 0.0);
  }
}

TEST_F(CollectivesTest, ReduceScatter) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<4xf32>) -> (tensor<2xf32>, tensor<1xf32>) {
      %a = sd.reduce_scatter %x @mesh [{"fsdp"}] : (tensor<4xf32>) -> tensor<2xf32>
      %b = sd.reduce_scatter %x @mesh [{"data", "fsdp"}] : (tensor<4xf32>) -> tensor<1xf32>
      return %a, %b : tensor<2xf32>, tensor<1xf32>
    }
  )mlir";
  // Device d holds (d + 1)·[1, 2, 3, 4].
  auto args = perDevice(4, [](int64_t d) {
    double s = d + 1.0;
    return Tensor({4}, DType::F32, {s, 2 * s, 3 * s, 4 * s});
  });
  PerDeviceTensors results = runOk(source, args);
  // Over fsdp: devices 0 + 1 = [3, 6, 9, 12], 2 + 3 = [7, 14, 21, 28]; the
  // device with fsdp coordinate c keeps half c.
  expectTensor(results[0][0], {2}, DType::F32, {3, 6});
  expectTensor(results[1][0], {2}, DType::F32, {9, 12});
  expectTensor(results[2][0], {2}, DType::F32, {7, 14});
  expectTensor(results[3][0], {2}, DType::F32, {21, 28});
  // Over both: the sum [10, 20, 30, 40]; device (cd, cf) keeps cd·2 + cf.
  expectTensor(results[0][1], {1}, DType::F32, {10});
  expectTensor(results[1][1], {1}, DType::F32, {20});
  expectTensor(results[2][1], {1}, DType::F32, {30});
  expectTensor(results[3][1], {1}, DType::F32, {40});
}

//===----------------------------------------------------------------------===//
// all_to_all
//===----------------------------------------------------------------------===//

TEST_F(CollectivesTest, AllToAll) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<1x4xf32>) {
      %a = sd.all_to_all %x @mesh axes = ["fsdp"] src_dim = 0 tgt_dim = 1 : (tensor<1x4xf32>) -> tensor<2x2xf32>
      %g = sd.all_gather %x @mesh [{"fsdp"}, {}] : (tensor<1x4xf32>) -> tensor<2x4xf32>
      %s = sd.all_slice %g @mesh [{}, {"fsdp"}] : (tensor<2x4xf32>) -> tensor<2x2xf32>
      %back = sd.all_to_all %a @mesh axes = ["fsdp"] src_dim = 1 tgt_dim = 0 : (tensor<2x2xf32>) -> tensor<1x4xf32>
      return %a, %s, %back : tensor<2x2xf32>, tensor<2x2xf32>, tensor<1x4xf32>
    }
  )mlir";
  // Device d holds [10d, 10d + 1, 10d + 2, 10d + 3].
  auto make = [](int64_t d) {
    return std::vector<double>{10.0 * d, 10.0 * d + 1, 10.0 * d + 2,
                               10.0 * d + 3};
  };
  auto args = perDevice(4, [&](int64_t d) {
    return Tensor({1, 4}, DType::F32, make(d));
  });
  PerDeviceTensors results = runOk(source, args);
  // Device (c, g) gets row j from device (c, j): its columns 2g, 2g + 1.
  expectTensor(results[0][0], {2, 2}, DType::F32, {0, 1, 10, 11});
  expectTensor(results[1][0], {2, 2}, DType::F32, {2, 3, 12, 13});
  expectTensor(results[2][0], {2, 2}, DType::F32, {20, 21, 30, 31});
  expectTensor(results[3][0], {2, 2}, DType::F32, {22, 23, 32, 33});
  for (int64_t device = 0; device < 4; ++device) {
    // The same as all_gather of src_dim then all_slice of tgt_dim ...
    EXPECT_EQ(valuesOf(results[device][1]), valuesOf(results[device][0]))
        << "device " << device;
    // ... and undone by the all_to_all back.
    expectTensor(results[device][2], {1, 4}, DType::F32, make(device));
  }
}

//===----------------------------------------------------------------------===//
// collective_permute
//===----------------------------------------------------------------------===//

TEST_F(CollectivesTest, CollectivePermuteOnTwoByTwo) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
      %a = sd.collective_permute %x @mesh axes = ["fsdp"] pairs = [[0, 1], [1, 0]] : tensor<1xf32>
      %b = sd.collective_permute %x @mesh axes = ["data"] pairs = [[0, 1], [1, 0]] : tensor<1xf32>
      %c = sd.collective_permute %x @mesh axes = ["data", "fsdp"] pairs = [[0, 3], [3, 0]] : tensor<1xf32>
      %d = sd.collective_permute %x @mesh axes = ["fsdp", "data"] pairs = [[1, 2]] : tensor<1xf32>
      return %a, %b, %c, %d : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
    }
  )mlir";
  PerDeviceTensors results = runOk(source, deviceIds(4));
  // Over both axes, devices 0 and 3 swap and 1 and 2, which no pair
  // targets, keep their values. Listed fsdp first, member 1 is device 2
  // (data 1, fsdp 0) and member 2 device 1: device 1 receives device 2's
  // value, device 2 (sending only) keeps its own.
  std::vector<double> overFsdp = {1, 0, 3, 2}, overData = {2, 3, 0, 1};
  std::vector<double> corners = {3, 1, 2, 0}, oneWay = {0, 2, 2, 3};
  for (int64_t device = 0; device < 4; ++device) {
    expectTensor(results[device][0], {1}, DType::F32, {overFsdp[device]});
    expectTensor(results[device][1], {1}, DType::F32, {overData[device]});
    expectTensor(results[device][2], {1}, DType::F32, {corners[device]});
    expectTensor(results[device][3], {1}, DType::F32, {oneWay[device]});
  }
}

/// `[[0, 1], [1, 2], ...]`: the pairs of a ring shift, as the op prints them.
std::string ringShift(int64_t size, int64_t shift) {
  std::string text = "[";
  for (auto [i, pair] : llvm::enumerate(
           mlir::sd::CollectivePermuteOp::getRingShiftPairs(size, shift)))
    text += (i ? ", [" : "[") + std::to_string(pair.first) + ", " +
            std::to_string(pair.second) + "]";
  return text + "]";
}

TEST_F(CollectivesTest, CollectivePermuteRing) {
  EXPECT_EQ(ringShift(4, 1), "[[0, 1], [1, 2], [2, 3], [3, 0]]");
  EXPECT_EQ(ringShift(4, -1), "[[0, 3], [1, 0], [2, 1], [3, 2]]");
  EXPECT_EQ(ringShift(4, 8), "[]");
  std::string source = R"mlir(
    sd.mesh @mesh = <["data"=2, "context"=4]>
    func.func @main(%x: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
      %a = sd.collective_permute %x @mesh axes = ["context"] pairs = )mlir" +
                       ringShift(4, 1) + R"mlir( : tensor<1xf32>
      %b = sd.collective_permute %x @mesh axes = ["context"] pairs = )mlir" +
                       ringShift(4, -1) + R"mlir( : tensor<1xf32>
      %c = sd.collective_permute %x @mesh axes = ["context"] pairs = )mlir" +
                       ringShift(4, 6) + R"mlir( : tensor<1xf32>
      return %a, %b, %c : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
    }
  )mlir";
  PerDeviceTensors results = runOk(source, deviceIds(8));
  // Device (cd, cc) = 4cd + cc receives from (cd, cc - shift mod 4).
  std::vector<double> plusOne = {3, 0, 1, 2, 7, 4, 5, 6};
  std::vector<double> minusOne = {1, 2, 3, 0, 5, 6, 7, 4};
  std::vector<double> plusTwo = {2, 3, 0, 1, 6, 7, 4, 5};
  for (int64_t device = 0; device < 8; ++device) {
    expectTensor(results[device][0], {1}, DType::F32, {plusOne[device]});
    expectTensor(results[device][1], {1}, DType::F32, {minusOne[device]});
    expectTensor(results[device][2], {1}, DType::F32, {plusTwo[device]});
  }
}

//===----------------------------------------------------------------------===//
// Larger meshes and device numbering
//===----------------------------------------------------------------------===//

TEST_F(CollectivesTest, FourAxisMesh) {
  std::string source = R"mlir(
    sd.mesh @mesh = <["data"=2, "fsdp"=2, "context"=2, "tensor"=2]>
    func.func @main(%x: tensor<1xf32>) -> (tensor<4xf32>, tensor<1xf32>) {
      %g = sd.all_gather %x @mesh [{"fsdp", "tensor"}] : (tensor<1xf32>) -> tensor<4xf32>
      %r = sd.all_reduce %x @mesh axes = ["data", "context"] : tensor<1xf32>
      return %g, %r : tensor<4xf32>, tensor<1xf32>
    }
  )mlir";
  PerDeviceTensors results = runOk(source, deviceIds(16));
  // Device (d, f, c, t) = 8d + 4f + 2c + t.
  // Device 0 = (0, 0, 0, 0): members (0, f, 0, t) in order f, t.
  expectTensor(results[0][0], {4}, DType::F32, {0, 1, 4, 5});
  expectTensor(results[0][1], {1}, DType::F32, {0 + 2 + 8 + 10});
  // Device 11 = (1, 0, 1, 1): gathers 8 + 2 + {0, 1, 4, 5}; sums
  // {1, 3, 9, 11}.
  expectTensor(results[11][0], {4}, DType::F32, {10, 11, 14, 15});
  expectTensor(results[11][1], {1}, DType::F32, {1 + 3 + 9 + 11});
  // Device 6 = (0, 1, 1, 0): gathers 2 + {0, 1, 4, 5}; sums {4, 6, 12, 14}.
  expectTensor(results[6][0], {4}, DType::F32, {2, 3, 6, 7});
  expectTensor(results[6][1], {1}, DType::F32, {4 + 6 + 12 + 14});
  // Every device, by the same reasoning.
  for (int64_t device = 0; device < 16; ++device) {
    double d = device / 8, f = device / 4 % 2, c = device / 2 % 2,
           t = device % 2;
    double base = 8 * d + 2 * c;
    expectTensor(results[device][0], {4}, DType::F32,
                 {base, base + 1, base + 4, base + 5});
    expectTensor(results[device][1], {1}, DType::F32,
                 {4 * (4 * f + t) + 2 * 8 + 2 * 2});
  }
}

/// With a DCN axis, device ids are process-major (sd/Sharding/Mesh.h):
/// ["data"=2, "fsdp"=2(dcn=2)] has process = fsdp coordinate, so device
/// (cd, cf) is 2cf + cd, not 2cd + cf.
TEST_F(CollectivesTest, DcnMeshUsesTheMeshDeviceNumbering) {
  std::string source = R"mlir(
    sd.mesh @mesh = <["data"=2, "fsdp"=2(dcn=2)]>
    func.func @main(%x: tensor<1xf32>) -> tensor<2xf32> {
      %g = sd.all_gather %x @mesh [{"fsdp"}] : (tensor<1xf32>) -> tensor<2xf32>
      return %g : tensor<2xf32>
    }
  )mlir";
  PerDeviceTensors results = runOk(source, deviceIds(4));
  // Devices 0, 2 have data coordinate 0; devices 1, 3 have 1.
  expectTensor(results[0][0], {2}, DType::F32, {0, 2});
  expectTensor(results[1][0], {2}, DType::F32, {1, 3});
  expectTensor(results[2][0], {2}, DType::F32, {0, 2});
  expectTensor(results[3][0], {2}, DType::F32, {1, 3});
}

/// Collectives in a called function see the caller's devices.
TEST_F(CollectivesTest, CollectiveInCallee) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @block(%x: tensor<1xf32>) -> tensor<1xf32> {
      %y = sd.all_reduce %x @mesh axes = ["fsdp"] : tensor<1xf32>
      return %y : tensor<1xf32>
    }
    func.func @main(%x: tensor<1xf32>) -> tensor<1xf32> {
      %y = call @block(%x) : (tensor<1xf32>) -> tensor<1xf32>
      return %y : tensor<1xf32>
    }
  )mlir";
  PerDeviceTensors results = runOk(source, deviceIds(4));
  std::vector<double> expected = {1, 1, 5, 5};
  for (int64_t device = 0; device < 4; ++device)
    expectTensor(results[device][0], {1}, DType::F32, {expected[device]});
}

/// A one-device mesh runs through the single-device entry point.
TEST_F(CollectivesTest, OneDeviceMesh) {
  Tensor result = runOne(R"mlir(
    sd.mesh @mesh = <["data"=1]>
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %y = sd.all_reduce %x @mesh axes = ["data"] : tensor<2xf32>
      return %y : tensor<2xf32>
    }
  )mlir",
                         {Tensor({2}, DType::F32, {3, 4})});
  expectTensor(result, {2}, DType::F32, {3, 4});
}

/// sd.reshard (global programs) is the identity.
TEST_F(CollectivesTest, ReshardIsTheIdentity) {
  Tensor result = runOne(R"mlir(
    sd.mesh @mesh = <["data"=2, "fsdp"=2]>
    func.func @main(%x: tensor<2x2xbf16>) -> tensor<2x2xbf16> {
      %y = sd.reshard %x sharding = <@mesh, [{"data"}, {"fsdp"}]> : tensor<2x2xbf16>
      return %y : tensor<2x2xbf16>
    }
  )mlir",
                         {Tensor({2, 2}, DType::BF16, {1, -2, 0.5, 8})});
  expectTensor(result, {2, 2}, DType::BF16, {1, -2, 0.5, 8}, 0.0);
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(CollectivesTest, DeviceCountMustMatchTheMesh) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1xf32>) -> tensor<1xf32> {
      %y = sd.all_reduce %x @mesh axes = ["data"] : tensor<1xf32>
      return %y : tensor<1xf32>
    }
  )mlir";
  EXPECT_TRUE(mlir::failed(runOnDevices(source, deviceIds(2))));
  EXPECT_NE(diagnostics.find("'sd.all_reduce' op runs on mesh data:2,fsdp:2 "
                             "of 4 devices, but the evaluator simulates 2; a "
                             "program with collectives runs on one simulated "
                             "device per mesh device"),
            std::string::npos)
      << diagnostics;
}

TEST_F(CollectivesTest, SingleDeviceEntryRejectsAFourDeviceMesh) {
  auto results = run(std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1xf32>) -> tensor<1xf32> {
      %y = sd.collective_permute %x @mesh axes = ["fsdp"] pairs = [[0, 1], [1, 0]] : tensor<1xf32>
      return %y : tensor<1xf32>
    }
  )mlir",
                     {Tensor({1}, DType::F32, 0.0)});
  EXPECT_TRUE(mlir::failed(results));
  EXPECT_NE(diagnostics.find("'sd.collective_permute' op runs on mesh "
                             "data:2,fsdp:2 of 4 devices, but the evaluator "
                             "simulates 1"),
            std::string::npos)
      << diagnostics;
}

/// The mismatch is found before any op runs, even when the collective comes
/// late in the function.
TEST_F(CollectivesTest, DeviceCountIsCheckedBeforeRunning) {
  std::string source = std::string(kMesh2x2) + R"mlir(
    func.func @main(%x: tensor<1xf32>) -> tensor<1xf32> {
      %a = sd.log %x : tensor<1xf32>
      %y = sd.all_gather %a @mesh [{"data", "fsdp"}] : (tensor<1xf32>) -> tensor<4xf32>
      %z = sd.reduce_sum %y dims = [0] : (tensor<4xf32>) -> tensor<f32>
      %w = sd.reshape %z : (tensor<f32>) -> tensor<1xf32>
      return %w : tensor<1xf32>
    }
  )mlir";
  EXPECT_TRUE(mlir::failed(runOnDevices(source, deviceIds(8))));
  EXPECT_NE(diagnostics.find("'sd.all_gather' op runs on mesh data:2,fsdp:2 "
                             "of 4 devices, but the evaluator simulates 8"),
            std::string::npos)
      << diagnostics;
}

} // namespace
