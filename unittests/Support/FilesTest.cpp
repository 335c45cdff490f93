//===- FilesTest.cpp - Tests for the bounded reader of sd's input files ---===//

#include "sd/Support/Files.h"

#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace sd;
namespace fs = std::filesystem;

namespace {

/// A fresh directory per test under the gtest temporary directory.
fs::path freshDir() {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(::testing::TempDir()) /
                 (std::string("sd_files_") + info->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void writeFile(const fs::path &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(FilesTest, ReadsARegularFile) {
  fs::path path = freshDir() / "a.json";
  writeFile(path, "{\"a\": 1}");
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readRegularFile(path.string(), "index", 1024);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ((*buffer)->getBuffer(), "{\"a\": 1}");
  EXPECT_EQ((*buffer)->getBufferIdentifier(), path.string());
  // NUL-terminated on request, for MLIR's lexer.
  buffer = readRegularFile(path.string(), "program", 1024,
                           /*nullTerminated=*/true);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(*(*buffer)->getBufferEnd(), '\0');
  // A limit equal to the size is enough; 0 is no limit.
  EXPECT_TRUE(readRegularFile(path.string(), "index", 8).ok());
  EXPECT_TRUE(readRegularFile(path.string(), "index", 0).ok());
}

// A FIFO waits for a writer and /dev/zero never ends: both are refused by
// their type, at once.
TEST(FilesTest, RefusesSpecialFilesWithoutBlocking) {
  fs::path dir = freshDir();
  fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readRegularFile(fifo.string(), "dataset index", 1024);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(absl::IsInvalidArgument(buffer.status()));
  EXPECT_EQ(buffer.status().message(), "cannot read dataset index \"" +
                                           fifo.string() +
                                           "\": not a regular file");

  EXPECT_EQ(readRegularFile("/dev/zero", "digits file", 0).status().message(),
            "cannot read digits file \"/dev/zero\": not a regular file");
  // Through a symbolic link too.
  fs::create_symlink("/dev/zero", dir / "zero.png");
  EXPECT_EQ(readRegularFile((dir / "zero.png").string(), "image", 0)
                .status()
                .message(),
            "cannot read image \"" + (dir / "zero.png").string() +
                "\": not a regular file");
  EXPECT_EQ(readRegularFile(dir.string(), "config file", 0).status().message(),
            "cannot read config file \"" + dir.string() +
                "\": it is a directory");
}

// A sparse file of 8 GiB where a small one is expected is refused by its
// size on disk before a byte is read.
TEST(FilesTest, RefusesAFileAboveTheLimitBySize) {
  fs::path path = freshDir() / "index.json";
  writeFile(path, "");
  fs::resize_file(path, uint64_t(8) << 30);
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readRegularFile(path.string(), "dataset index", uint64_t(64) << 20);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(absl::IsInvalidArgument(buffer.status()));
  EXPECT_EQ(buffer.status().message(),
            "cannot read dataset index \"" + path.string() +
                "\": 8589934592 bytes is above the limit of 67108864");
  EXPECT_FALSE(checkRegularFile(path.string(), "x", 100).ok());
  EXPECT_TRUE(checkRegularFile(path.string(), "x").ok());
}

TEST(FilesTest, MissingFileIsNotFound) {
  fs::path path = freshDir() / "none.yml";
  absl::Status status =
      readRegularFile(path.string(), "rules file", 100).status();
  EXPECT_TRUE(absl::IsNotFound(status));
  EXPECT_EQ(status.message(), "cannot read rules file \"" + path.string() +
                                  "\": No such file or directory");
}

// "-" reads standard input, refused as soon as it passes the limit (it may
// be /dev/zero).
TEST(FilesTest, StandardInputIsBoundedToo) {
  fs::path path = freshDir() / "stdin.mlir";
  writeFile(path, std::string(100, 'x'));
  int saved = ::dup(STDIN_FILENO);
  ASSERT_NE(std::freopen(path.c_str(), "rb", stdin), nullptr);
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readRegularFileOrStdin("-", "input file", 1000, /*nullTerminated=*/true);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ((*buffer)->getBuffer(), std::string(100, 'x'));
  EXPECT_EQ((*buffer)->getBufferIdentifier(), "<stdin>");

  ASSERT_NE(std::freopen("/dev/zero", "rb", stdin), nullptr);
  EXPECT_EQ(
      readRegularFileOrStdin("-", "input file", 1 << 20).status().message(),
      "cannot read input file from standard input: more than the limit "
      "of 1048576 bytes");
  ::dup2(saved, STDIN_FILENO);
  ::close(saved);
  // Other paths are readRegularFile's.
  EXPECT_EQ(
      readRegularFileOrStdin("/dev/zero", "input file", 10).status().message(),
      "cannot read input file \"/dev/zero\": not a regular file");
}

} // namespace
