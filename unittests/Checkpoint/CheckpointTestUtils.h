//===- CheckpointTestUtils.h - Helpers of the checkpoint tests --*- C++ -*-===//
//
// Whole-file reads and writes (to damage files on purpose) and status
// checks shared by the checkpoint and safetensors tests; the temporary
// directories and compiled programs come from the runtime tests' helpers.
//
//===----------------------------------------------------------------------===//

#ifndef SD_UNITTESTS_CHECKPOINT_CHECKPOINTTESTUTILS_H
#define SD_UNITTESTS_CHECKPOINT_CHECKPOINTTESTUTILS_H

#include "../Runtime/RuntimeTestUtils.h"

#include "absl/status/status.h"

#include <fstream>
#include <sstream>
#include <string>

namespace sd::ckpt::testutil {

using rt::testutil::compileAndLoad;
using rt::testutil::makeTempDir;
using rt::testutil::programText;
using rt::testutil::removeTempDir;

/// The bytes of the file at `path` (empty when it cannot be read).
inline std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

/// Replaces the file at `path` with `bytes`.
inline void writeAll(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Whether `status`'s message contains `text`.
inline bool contains(const absl::Status &status, const std::string &text) {
  return status.message().find(text) != std::string::npos;
}

} // namespace sd::ckpt::testutil

#endif // SD_UNITTESTS_CHECKPOINT_CHECKPOINTTESTUTILS_H
