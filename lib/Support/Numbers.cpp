//===- Numbers.cpp - Numbers as sd writes them ----------------------------===//

#include "sd/Support/Numbers.h"

#include <cassert>
#include <charconv>

std::string sd::shortestDouble(double value) {
  char buffer[64];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  assert(error == std::errc() && "64 characters hold any double");
  (void)error;
  return std::string(buffer, end);
}
