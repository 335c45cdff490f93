//===- YamlText.h - Strings in the YAML sd writes ---------------*- C++ -*-===//
//
// How a string goes into a YAML file sd writes and reads back: the run
// configs of sdrun --print-config and sdopt --plan-output.
//
//===----------------------------------------------------------------------===//

#ifndef SD_SUPPORT_YAMLTEXT_H
#define SD_SUPPORT_YAMLTEXT_H

#include <string>
#include <string_view>

namespace sd {

/// `text` as a YAML single-quoted scalar ('it''s').
std::string yamlQuoted(std::string_view text);

/// `text` for a YAML comment: line breaks become spaces, so that it stays
/// one comment line.
std::string yamlCommentText(std::string_view text);

} // namespace sd

#endif // SD_SUPPORT_YAMLTEXT_H
