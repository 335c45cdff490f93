//===- ReferenceTestUtils.h - shared checks of the reference tests -*- C++ -*-===//

#ifndef SD_UNITTESTS_REFERENCE_REFERENCETESTUTILS_H
#define SD_UNITTESTS_REFERENCE_REFERENCETESTUTILS_H

#include "sd/Reference/Tensor.h"

#include <gtest/gtest.h>

#include <vector>

namespace sd::ref {

/// Asserts the shape, then elementwise closeness, with a message showing the
/// tensor.
inline void expectNear(const Tensor &actual, const std::vector<int64_t> &shape,
                       const std::vector<double> &expected,
                       double tol = 1e-12) {
  ASSERT_EQ(actual.shape(), shape) << actual.toString();
  ASSERT_EQ(actual.numElements(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], tol)
        << "element " << i << " of " << actual.toString(64);
}

} // namespace sd::ref

#endif // SD_UNITTESTS_REFERENCE_REFERENCETESTUTILS_H
