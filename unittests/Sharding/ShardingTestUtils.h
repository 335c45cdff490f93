//===- ShardingTestUtils.h - shared checks of the sharding tests -*- C++ -*-===//

#ifndef SD_UNITTESTS_SHARDING_SHARDINGTESTUTILS_H
#define SD_UNITTESTS_SHARDING_SHARDINGTESTUTILS_H

#include "absl/status/status.h"
#include "gtest/gtest.h"

#include <string>

namespace sd {

/// Checks that `status` is InvalidArgument and that its message contains
/// `expected`.
inline ::testing::AssertionResult
isInvalidArgumentWith(const absl::Status &status, const std::string &expected) {
  if (status.code() != absl::StatusCode::kInvalidArgument)
    return ::testing::AssertionFailure() << "wrong code: " << status;
  std::string message(status.message());
  if (message.find(expected) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message \"" << message << "\" lacks \"" << expected << "\"";
  return ::testing::AssertionSuccess();
}

} // namespace sd

#endif // SD_UNITTESTS_SHARDING_SHARDINGTESTUTILS_H
