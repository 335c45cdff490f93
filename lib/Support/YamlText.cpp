//===- YamlText.cpp - Strings in the YAML sd writes -----------------------===//

#include "sd/Support/YamlText.h"

std::string sd::yamlQuoted(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'')
      out += '\'';
  }
  return out + "'";
}

std::string sd::yamlCommentText(std::string_view text) {
  std::string out(text);
  for (char &c : out)
    if (c == '\n' || c == '\r')
      c = ' ';
  return out;
}
