//===- ManifestTest.cpp - Tests for parsing and verifying manifests -------===//
//
// parseManifest on manifests built in memory: what a hostile manifest
// declares (negative steps, enormous tensors, huge meshes, many blocks) is
// one DataLoss error, found before the loader allocates anything.
//
//===----------------------------------------------------------------------===//

#include "ManifestIO.h"

#include "sd/Checkpoint/Checkpoint.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

using namespace sd;
using namespace sd::ckpt;

namespace {

constexpr const char *kStepDir = "ckpt/step_00000002";

/// A valid manifest of step 2 on mesh data:2,fsdp:2: a 4x6 parameter split
/// 2x2 over four files, each declaring `fileBytes` bytes.
checkpoint::Manifest twoByTwo(int64_t fileBytes = 1000) {
  checkpoint::Manifest manifest;
  manifest.set_format_version(kFormatVersion);
  manifest.set_step(2);
  for (const char *name : {"data", "fsdp"}) {
    checkpoint::MeshAxis *axis = manifest.add_mesh();
    axis->set_name(name);
    axis->set_size(2);
    axis->set_dcn(1);
  }
  checkpoint::Tensor *tensor = manifest.add_tensors();
  tensor->set_name("w");
  tensor->set_kind(checkpoint::Tensor::PARAMETER);
  tensor->set_dtype("F32");
  tensor->add_global_shape(4);
  tensor->add_global_shape(6);
  for (int device = 0; device < 4; ++device) {
    std::string file = "device_" + std::to_string(device) + ".safetensors";
    checkpoint::ShardFile *shard = manifest.add_files();
    shard->set_name(file);
    shard->set_device(device);
    shard->set_size_bytes(fileBytes);
    checkpoint::Block *block = tensor->add_blocks();
    block->set_file(file);
    block->add_offset(2 * (device / 2));
    block->add_offset(3 * (device % 2));
    block->add_shape(2);
    block->add_shape(3);
  }
  return manifest;
}

/// parseManifest's error for `manifest`, sealed, in kStepDir.
absl::Status errorOf(const checkpoint::Manifest &manifest,
                     const std::string &stepDir = kStepDir) {
  return parseManifest(serializeManifest(manifest), stepDir).status();
}

::testing::AssertionResult isDataLoss(const absl::Status &status,
                                      const std::string &expected) {
  if (status.code() != absl::StatusCode::kDataLoss ||
      std::string(status.message()).find(expected) == std::string::npos)
    return ::testing::AssertionFailure()
           << status << "\nexpected DataLoss with: " << expected;
  return ::testing::AssertionSuccess();
}

TEST(ManifestTest, AValidManifestRoundTrips) {
  checkpoint::Manifest manifest = twoByTwo();
  absl::StatusOr<checkpoint::Manifest> parsed =
      parseManifest(serializeManifest(manifest), kStepDir);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->step(), 2);
  EXPECT_EQ(parsed->tensors(0).blocks_size(), 4);
  // Outside a step_N directory the step is not compared with a name.
  EXPECT_TRUE(parseManifest(serializeManifest(manifest), "elsewhere").ok());
}

TEST(ManifestTest, TheSealIsChecked) {
  std::string bytes = serializeManifest(twoByTwo());
  EXPECT_TRUE(isDataLoss(
      parseManifest(bytes.substr(0, bytes.size() - 1), kStepDir).status(),
      "checkpoint manifest 'ckpt/step_00000002/manifest.pb' is truncated or "
      "corrupt (no checksum at its end)"));
  bytes[3] ^= 1;
  EXPECT_TRUE(isDataLoss(parseManifest(bytes, kStepDir).status(),
                         "is corrupt: crc32 0x"));
}

// A checksummed manifest that says step -5 or INT64_MIN was trained from,
// writing NaN checkpoints or running ~1e19 steps.
TEST(ManifestTest, NegativeStepsAreDataLoss) {
  for (int64_t step : {int64_t(-5), std::numeric_limits<int64_t>::min()}) {
    checkpoint::Manifest manifest = twoByTwo();
    manifest.set_step(step);
    EXPECT_TRUE(isDataLoss(errorOf(manifest, "ckpt/x"),
                           "checkpoint 'ckpt/x': its manifest says step " +
                               std::to_string(step) +
                               "; steps are never negative"));
  }
}

// A step directory whose name disagrees with its manifest was trusted by
// name, so every later --resume went back to an old step.
TEST(ManifestTest, TheDirectoryNameMustMatchTheStep) {
  EXPECT_TRUE(isDataLoss(errorOf(twoByTwo(), "ckpt/step_00000007"),
                         "the directory is named for step 7 but its "
                         "manifest says step 2"));
}

TEST(ManifestTest, OtherFormatVersionsAreFailedPrecondition) {
  checkpoint::Manifest manifest = twoByTwo();
  manifest.set_format_version(kFormatVersion + 1);
  absl::Status status = errorOf(manifest);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

// A tensor of 2^40 elements was allocated (and aborted) before it was
// compared with the program; the shard files must be able to hold it.
TEST(ManifestTest, AnEnormousTensorIsDataLoss) {
  checkpoint::Manifest manifest = twoByTwo();
  checkpoint::Tensor *tensor = manifest.mutable_tensors(0);
  tensor->set_global_shape(0, int64_t(1) << 20);
  tensor->set_global_shape(1, int64_t(1) << 20);
  for (int b = 0; b < 4; ++b) {
    checkpoint::Block *block = tensor->mutable_blocks(b);
    block->set_offset(0, (int64_t(1) << 19) * (b / 2));
    block->set_offset(1, (int64_t(1) << 19) * (b % 2));
    block->set_shape(0, int64_t(1) << 19);
    block->set_shape(1, int64_t(1) << 19);
  }
  EXPECT_TRUE(isDataLoss(errorOf(manifest),
                         "tensor 'w' of shape [1048576, 1048576] does not "
                         "fit in the shard files, which hold 4000 bytes in "
                         "all"));
  // Shapes whose element count overflows are reported as such.
  tensor->set_global_shape(0, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(isDataLoss(errorOf(manifest), "tensor 'w' has a bad shape"));
}

TEST(ManifestTest, AHugeMeshIsDataLoss) {
  checkpoint::Manifest manifest = twoByTwo();
  manifest.mutable_mesh(0)->set_size(int64_t(1) << 32);
  manifest.mutable_mesh(1)->set_size(int64_t(1) << 32);
  EXPECT_TRUE(
      isDataLoss(errorOf(manifest), "mesh has more than 1048576 devices"));
  manifest.mutable_mesh(0)->set_size(3);
  manifest.mutable_mesh(0)->set_dcn(2);
  EXPECT_TRUE(isDataLoss(errorOf(manifest),
                         "mesh axis 'data' has size 3 and DCN part 2"));
}

TEST(ManifestTest, BlocksMustTileTheTensor) {
  // Two blocks at the same place.
  checkpoint::Manifest overlap = twoByTwo();
  overlap.mutable_tensors(0)->mutable_blocks(3)->set_offset(1, 0);
  EXPECT_TRUE(isDataLoss(errorOf(overlap),
                         "tensor 'w' has overlapping blocks in "
                         "'device_2.safetensors' and 'device_3.safetensors'"));
  // A block too small leaves a gap.
  checkpoint::Manifest gap = twoByTwo();
  gap.mutable_tensors(0)->mutable_blocks(1)->set_shape(1, 2);
  EXPECT_TRUE(isDataLoss(errorOf(gap), "tensor 'w' has blocks that do not "
                                       "tile dimension 1 of size 6"));
  // A missing block.
  checkpoint::Manifest missing = twoByTwo();
  missing.mutable_tensors(0)->mutable_blocks()->RemoveLast();
  EXPECT_TRUE(isDataLoss(errorOf(missing),
                         "tensor 'w' has 3 blocks that do not cover its "
                         "shape [4, 6] (a grid of 4 blocks)"));
  // A block outside the tensor, and one in a file the manifest lacks.
  checkpoint::Manifest outside = twoByTwo();
  outside.mutable_tensors(0)->mutable_blocks(3)->set_offset(1, 4);
  EXPECT_TRUE(isDataLoss(errorOf(outside), "outside its shape [4, 6]"));
  checkpoint::Manifest unlisted = twoByTwo();
  unlisted.mutable_files()->RemoveLast();
  EXPECT_TRUE(isDataLoss(errorOf(unlisted),
                         "has a block in 'device_3.safetensors', which the "
                         "manifest does not list"));
}

// The tiling check compared every pair of blocks: a manifest with many
// blocks took minutes. Sorted extents make 100,000 blocks quick.
TEST(ManifestTest, ManyBlocksAreCheckedQuickly) {
  constexpr int kBlocks = 100000;
  checkpoint::Manifest manifest;
  manifest.set_format_version(kFormatVersion);
  manifest.set_step(2);
  checkpoint::Tensor *tensor = manifest.add_tensors();
  tensor->set_name("w");
  tensor->set_kind(checkpoint::Tensor::PARAMETER);
  tensor->set_dtype("F32");
  tensor->add_global_shape(kBlocks);
  for (int b = 0; b < kBlocks; ++b) {
    std::string file = "device_" + std::to_string(b) + ".safetensors";
    checkpoint::ShardFile *shard = manifest.add_files();
    shard->set_name(file);
    shard->set_size_bytes(100);
    checkpoint::Block *block = tensor->add_blocks();
    block->set_file(file);
    block->add_offset(kBlocks - 1 - b);
    block->add_shape(1);
  }
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<checkpoint::Manifest> parsed =
      parseManifest(serializeManifest(manifest), kStepDir);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(ManifestTest, NamesKindsAndDtypesAreChecked) {
  checkpoint::Manifest manifest = twoByTwo();
  manifest.mutable_files(0)->set_name("../x");
  EXPECT_TRUE(isDataLoss(errorOf(manifest), "bad shard file name '../x'"));
  manifest = twoByTwo();
  manifest.mutable_tensors(0)->set_kind(checkpoint::Tensor::KIND_UNSPECIFIED);
  EXPECT_TRUE(
      isDataLoss(errorOf(manifest), "tensor 'w' has an unknown kind 0"));
  manifest = twoByTwo();
  manifest.mutable_tensors(0)->set_dtype("F16");
  EXPECT_TRUE(isDataLoss(errorOf(manifest), "tensor 'w' has dtype 'F16'"));
  manifest = twoByTwo();
  *manifest.add_tensors() = manifest.tensors(0);
  EXPECT_TRUE(isDataLoss(errorOf(manifest), "tensor 'w' is listed twice"));
}

} // namespace
