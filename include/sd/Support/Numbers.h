//===- Numbers.h - Numbers as sd writes them --------------------*- C++ -*-===//
//
// How a number is written where it must read back exactly: a plan's config
// (sdopt --plan-output), the settings it carries over.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SUPPORT_NUMBERS_H
#define SD_SUPPORT_NUMBERS_H

#include <string>

namespace sd {

/// The shortest decimal text that reads back as `value` (0.125, 3e-05).
std::string shortestDouble(double value);

} // namespace sd

#endif // SD_SUPPORT_NUMBERS_H
