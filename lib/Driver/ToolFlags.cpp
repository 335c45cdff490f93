//===- ToolFlags.cpp - Run-specification flags of the tools ---------------===//
//
// The flags are made from the rows of the settings table
// (sd/Config/Settings.h) that the tool has: each becomes an llvm::cl option
// of the row's type, bound to the RunSpecFlags field the row names, so that
// reading the command line back is one loop. Defaults live in the resolver
// (RunSpec.cpp), which also checks the values: a flag here only says what
// was given.
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/ToolFlags.h"

#include "sd/Config/Settings.h"

#include <type_traits>

using namespace mlir::sd;
namespace cl = llvm::cl;
using ::sd::FlagGroup;
using ::sd::RunSpecFlags;
using ::sd::SettingRow;

struct ToolFlags::BoundFlag {
  virtual ~BoundFlag() = default;
  /// Sets the field when the flag was given.
  virtual void store(RunSpecFlags &flags) const = 0;
};

namespace {

/// The row's help, value name and alias on `option`.
void describe(cl::Option &option, const SettingRow &row) {
  option.setDescription(llvm::StringRef(row.help.data(), row.help.size()));
  if (!row.valueName.empty())
    option.setValueStr(
        llvm::StringRef(row.valueName.data(), row.valueName.size()));
}

/// Another spelling of a flag (--weight-decay for --adam-weight-decay).
class Alias {
public:
  Alias(const SettingRow &row, cl::Option &option, cl::OptionCategory &category)
      : help("Alias for --" + std::string(row.flag)),
        alias(llvm::StringRef(row.alias.data(), row.alias.size()),
              cl::desc(help), cl::aliasopt(option), cl::cat(category)) {}

private:
  std::string help;
  cl::alias alias;
};

/// A cl::opt<T> that sets `std::optional<T> RunSpecFlags::*field`.
template <typename T> class Flag final : public ToolFlags::BoundFlag {
public:
  Flag(const SettingRow &row, std::optional<T> RunSpecFlags::*field,
       cl::OptionCategory &category)
      : option(llvm::StringRef(row.flag.data(), row.flag.size()),
               cl::cat(category)),
        field(field) {
    describe(option, row);
    if (!row.alias.empty())
      alias.emplace(row, option, category);
  }

  void store(RunSpecFlags &flags) const override {
    if (option.getNumOccurrences())
      flags.*field = option.getValue();
  }

private:
  cl::opt<T> option;
  std::optional<Alias> alias;
  std::optional<T> RunSpecFlags::*field;
};

/// A comma-separated list (--names-saved=a,b, --classes=7,3).
template <typename T> class ListFlag final : public ToolFlags::BoundFlag {
public:
  ListFlag(const SettingRow &row,
           std::optional<std::vector<T>> RunSpecFlags::*field,
           cl::OptionCategory &category)
      : option(llvm::StringRef(row.flag.data(), row.flag.size()),
               cl::CommaSeparated, cl::cat(category)),
        field(field) {
    describe(option, row);
  }

  void store(RunSpecFlags &flags) const override {
    if (option.getNumOccurrences())
      flags.*field = std::vector<T>(option.begin(), option.end());
  }

private:
  cl::list<T> option;
  std::optional<std::vector<T>> RunSpecFlags::*field;
};

template <typename T> struct IsVector : std::false_type {};
template <typename T> struct IsVector<std::vector<T>> : std::true_type {};

/// The option of `row`, bound to its field.
std::unique_ptr<ToolFlags::BoundFlag> makeFlag(const SettingRow &row,
                                               cl::OptionCategory &category) {
  return std::visit(
      [&](auto field) -> std::unique_ptr<ToolFlags::BoundFlag> {
        using Field = decltype(field);
        if constexpr (std::is_same_v<Field, std::monostate>) {
          return nullptr;
        } else {
          using Value =
              typename std::decay_t<decltype(std::declval<RunSpecFlags>().*
                                             field)>::value_type;
          if constexpr (IsVector<Value>::value)
            return std::make_unique<ListFlag<typename Value::value_type>>(
                row, field, category);
          else
            return std::make_unique<Flag<Value>>(row, field, category);
        }
      },
      row.flagField);
}

} // namespace

/// The options that are not settings: the model and the arguments after
/// it (sdrun, sdsample), --print-config and --compile-only (sdrun).
struct ToolFlags::Positionals {
  cl::opt<std::string> modelPath{cl::Positional, cl::Required,
                                 cl::desc("<model.mlir>")};
  /// After the model, MaxDiffusion's way: a config file (as --config) and,
  /// for sdrun, key=value overrides of its keys.
  cl::list<std::string> arguments;

  explicit Positionals(const char *argumentsHelp)
      : arguments(cl::Positional, cl::ZeroOrMore, cl::desc(argumentsHelp)) {}
};

struct ToolFlags::RunActions {
  cl::OptionCategory &runCat;

  cl::opt<bool> printConfig{
      "print-config",
      cl::desc("Print the resolved run settings, where each came from, and "
               "exit"),
      cl::cat(runCat)};
  cl::opt<bool> compileOnly{
      "compile-only",
      cl::desc("Build and compile the device program (or find it in the "
               "cache), print where it is, and exit"),
      cl::cat(runCat)};
  cl::opt<std::string> calibrate{
      "calibrate",
      cl::desc("Measure this machine's devices (--devices, "
               "--threads-per-device: GEMM rates by size and dtype, kernel "
               "bandwidth, the shared-memory transport; under mpirun the MPI "
               "transport between the ranks as DCN), write them as a "
               "hardware profile (--profile=FILE) and exit; no model"),
      cl::value_desc("profile.yml"), cl::cat(runCat)};
};

ToolFlags::ToolFlags(Tool tool)
    : meshCategory("sd mesh and batch options"),
      stepCategory("sd training-step options"),
      deviceCategory("sd device options"), runCategory("sdrun options"),
      sampleCategory("sdsample options"), categoryList{&meshCategory} {
  bool sample = tool == Tool::Sdsample;
  unsigned toolBit = tool == Tool::Sdopt   ? ::sd::kSdopt
                     : tool == Tool::Sdrun ? ::sd::kSdrun
                                           : ::sd::kSdsample;
  if (!sample)
    categoryList.push_back(&stepCategory);
  if (tool != Tool::Sdopt) {
    // Positionals take the arguments in the order they were made: the
    // model first.
    positionals.reset(new Positionals(
        sample ? "[config.yml] (the same as --config=config.yml)"
               : "[config.yml] [key=value ...] (a config file, as "
                 "--config=config.yml, and overrides of its keys)"));
    // sdrun --calibrate runs no model: the tool checks that one is given
    // otherwise (modelGiven).
    if (tool == Tool::Sdrun)
      positionals->modelPath.setNumOccurrencesFlag(cl::Optional);
    categoryList.push_back(&deviceCategory);
  }
  if (tool == Tool::Sdrun) {
    runActions.reset(new RunActions{runCategory});
    categoryList.push_back(&runCategory);
  }
  if (sample)
    categoryList.push_back(&sampleCategory);
  auto categoryOf = [&](FlagGroup group) -> cl::OptionCategory & {
    switch (group) {
    case FlagGroup::Mesh:
      return meshCategory;
    case FlagGroup::Attention:
      return sample ? meshCategory : stepCategory;
    case FlagGroup::Step:
      return stepCategory;
    case FlagGroup::Device:
      return deviceCategory;
    case FlagGroup::Run:
      return runCategory;
    case FlagGroup::Sample:
      break;
    }
    return sampleCategory;
  };
  for (const SettingRow &row : ::sd::settingRows())
    if (row.hasFlag() && (row.tools & toolBit))
      boundFlags.push_back(makeFlag(row, categoryOf(row.group)));
}

ToolFlags::~ToolFlags() = default;

RunSpecFlags ToolFlags::values() const {
  RunSpecFlags flags;
  for (const std::unique_ptr<BoundFlag> &flag : boundFlags)
    flag->store(flags);
  if (positionals) {
    flags.modelPath = positionals->modelPath;
    flags.overrides.assign(positionals->arguments.begin(),
                           positionals->arguments.end());
  }
  // sdsample reads its sampling keys from the file alone.
  flags.takesOverrides = runActions != nullptr;
  return flags;
}

bool ToolFlags::printConfig() const {
  return runActions && runActions->printConfig;
}
bool ToolFlags::compileOnly() const {
  return runActions && runActions->compileOnly;
}
bool ToolFlags::modelGiven() const {
  return positionals && positionals->modelPath.getNumOccurrences() > 0;
}
std::string ToolFlags::calibratePath() const {
  return runActions ? std::string(runActions->calibrate) : std::string();
}
