//===- RuntimeTestUtils.h - Helpers of the runtime tests --------*- C++ -*-===//
//
// Tests that compile hand-written device programs embed the ABI header the
// way generated programs do.
//
//===----------------------------------------------------------------------===//

#ifndef SD_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H
#define SD_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H

#include <fstream>
#include <sstream>
#include <string>

namespace sd::rt::testutil {

/// The text of include/sd/Runtime/ProgramABI.h (SD_SOURCE_DIR is the
/// repository root, set by unittests/Runtime/CMakeLists.txt).
inline std::string abiHeaderText() {
  std::ifstream in(std::string(SD_SOURCE_DIR) +
                   "/include/sd/Runtime/ProgramABI.h");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace sd::rt::testutil

#endif // SD_UNITTESTS_RUNTIME_RUNTIMETESTUTILS_H
