//===- YamlDiagnostics.cpp - llvm::yaml errors as statuses ----------------===//

#include "sd/Sharding/YamlDiagnostics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <string>

absl::Status sd::yamlDiagnosticStatus(const llvm::SMDiagnostic &diag,
                                      std::string_view label, bool withLine) {
  // Lowercase, without llvm::yaml's trailing "!" or ".".
  std::string message = diag.getMessage().str();
  while (!message.empty() && (message.back() == '!' || message.back() == '.'))
    message.pop_back();
  if (!message.empty())
    message[0] = absl::ascii_tolower(message[0]);
  if (!withLine)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", label, message));
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d: %s", label, diag.getLineNo(), message));
}

sd::YamlReaderBase::YamlReaderBase(std::string_view fileName)
    : fileName(fileName) {
  sourceMgr.setDiagHandler(&YamlReaderBase::captureDiagnostic, this);
}

void sd::YamlReaderBase::captureDiagnostic(const llvm::SMDiagnostic &diag,
                                           void *ctx) {
  auto *self = static_cast<YamlReaderBase *>(ctx);
  if (!self->syntaxError)
    self->syntaxError = yamlDiagnosticStatus(diag, self->fileName);
}

absl::Status sd::YamlReaderBase::error(const llvm::yaml::Node *node,
                                       std::string_view message) const {
  if (syntaxError)
    return *syntaxError;
  llvm::SMLoc loc = node ? node->getSourceRange().Start : llvm::SMLoc();
  if (!loc.isValid())
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", fileName, message));
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s:%d: %s", fileName, sourceMgr.FindLineNumber(loc), message));
}

absl::StatusOr<std::string> sd::readYamlFile(std::string_view path,
                                             std::string_view what) {
  absl::StatusOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readRegularFile(path, what, kMaxYamlFileBytes);
  if (!buffer.ok())
    return buffer.status();
  return (*buffer)->getBuffer().str();
}

namespace {

/// Deeper nesting is an error: configs and rules need three levels, and the
/// walk below recurses.
constexpr int kMaxYamlDepth = 64;

/// Walks a YAML document in the order llvm::yaml parses it (its nodes can
/// be visited once), stopping at the first anchor, alias or too deep node.
class YamlStructureCheck {
public:
  /// The node, with its line, that is not supported; nullptr when none.
  const llvm::yaml::Node *visit(llvm::yaml::Node *node, int depth) {
    if (!node)
      return nullptr;
    if (llvm::isa<llvm::yaml::AliasNode>(node) || !node->getAnchor().empty() ||
        depth > kMaxYamlDepth) {
      tooDeep = depth > kMaxYamlDepth;
      return node;
    }
    if (auto *map = llvm::dyn_cast<llvm::yaml::MappingNode>(node)) {
      for (llvm::yaml::KeyValueNode &entry : *map) {
        if (const llvm::yaml::Node *bad = visit(entry.getKey(), depth + 1))
          return bad;
        if (const llvm::yaml::Node *bad = visit(entry.getValue(), depth + 1))
          return bad;
      }
    } else if (auto *list = llvm::dyn_cast<llvm::yaml::SequenceNode>(node)) {
      for (llvm::yaml::Node &item : *list)
        if (const llvm::yaml::Node *bad = visit(&item, depth + 1))
          return bad;
    }
    return nullptr;
  }

  bool tooDeep = false;
};

} // namespace

absl::Status sd::checkYamlStructure(std::string_view text,
                                    std::string_view label, bool withLine) {
  llvm::SourceMgr sourceMgr;
  // Syntax errors are the reader's to report.
  sourceMgr.setDiagHandler([](const llvm::SMDiagnostic &, void *) {});
  llvm::yaml::Stream stream(
      llvm::MemoryBufferRef(llvm::StringRef(text.data(), text.size()), label),
      sourceMgr);
  YamlStructureCheck check;
  for (llvm::yaml::Document &doc : stream) {
    const llvm::yaml::Node *bad = check.visit(doc.getRoot(), 0);
    if (!bad)
      continue;
    std::string message =
        check.tooDeep
            ? absl::StrFormat("nesting deeper than %d levels is not supported",
                              kMaxYamlDepth)
            : "anchors (&name) and aliases (*name) are not supported; write "
              "the value out";
    return yamlDiagnosticStatus(
        sourceMgr.GetMessage(bad->getSourceRange().Start,
                             llvm::SourceMgr::DK_Error, message),
        label, withLine);
  }
  return absl::OkStatus();
}
