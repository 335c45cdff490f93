//===- SDAttrs.cpp - sd attributes ----------------------------------------===//
//
// Custom syntax and verifiers of the mesh, sharding, logical-axes and role
// attributes.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDAttrs.h"
#include "sd/IR/MeshSpec.h"
#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>

using namespace mlir;
using namespace mlir::sd;

#include "sd/IR/SDEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "sd/IR/SDAttrs.cpp.inc"

void SDDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "sd/IR/SDAttrs.cpp.inc"
      >();
}

/// True for `[A-Za-z_][A-Za-z0-9_]*`, the names of mesh and logical axes.
static bool isIdentifier(StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name.drop_front(),
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

/// Prints `["a", "b"]`.
static void printStringList(AsmPrinter &printer, ArrayRef<StringAttr> names) {
  printer << '[';
  llvm::interleaveComma(names, printer,
                        [&](StringAttr name) { printer << name; });
  printer << ']';
}

/// Parses `["a", "b"]`.
static ParseResult parseStringList(AsmParser &parser,
                                   SmallVectorImpl<StringAttr> &names) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
    std::string name;
    if (parser.parseString(&name))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
    return success();
  });
}

//===----------------------------------------------------------------------===//
// MeshAxisAttr / MeshAttr
//===----------------------------------------------------------------------===//

Attribute MeshAxisAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  int64_t size = 0, dcn = 1;
  if (parser.parseString(&name) || parser.parseEqual() ||
      parser.parseInteger(size))
    return {};
  if (succeeded(parser.parseOptionalLParen())) {
    if (parser.parseKeyword("dcn") || parser.parseEqual() ||
        parser.parseInteger(dcn) || parser.parseRParen())
      return {};
  }
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(),
                    StringAttr::get(parser.getContext(), name), size, dcn);
}

void MeshAxisAttr::print(AsmPrinter &printer) const {
  printer << getName() << '=' << getSize();
  if (getDcn() != 1)
    printer << "(dcn=" << getDcn() << ')';
}

LogicalResult
MeshAxisAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                     StringAttr name, int64_t size, int64_t dcn) {
  if (!isIdentifier(name.getValue()))
    return emitError() << "mesh axis name " << name
                       << " is not an identifier";
  if (size <= 0)
    return emitError() << "mesh axis " << name << " has size " << size
                       << "; sizes must be positive";
  if (dcn <= 0 || size % dcn != 0)
    return emitError() << "mesh axis " << name << " has DCN part " << dcn
                       << ", which does not divide its size " << size;
  return success();
}

Attribute MeshAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<MeshAxisAttr> axes;
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        auto axis = MeshAxisAttr::parse(parser, {});
        if (!axis)
          return failure();
        axes.push_back(cast<MeshAxisAttr>(axis));
        return success();
      }) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), axes);
}

void MeshAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getAxes(), printer,
                        [&](MeshAxisAttr axis) { axis.print(printer); });
  printer << "]>";
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<MeshAxisAttr> axes) {
  llvm::StringSet<> seen;
  for (MeshAxisAttr axis : axes)
    if (!seen.insert(axis.getName().getValue()).second)
      return emitError() << "mesh axis " << axis.getName()
                         << " appears twice";
  // The mesh grammar's limits hold for meshes written in the IR too: a
  // device count that overflows would wrap every product of axis sizes.
  std::vector<::sd::MeshAxis> specAxes;
  for (MeshAxisAttr axis : axes)
    specAxes.push_back({axis.getName().str(), axis.getSize() / axis.getDcn(),
                        axis.getDcn()});
  if (absl::Status status = ::sd::verifyMeshAxes(specAxes); !status.ok())
    return emitError() << std::string(status.message());
  return success();
}

MeshAxisAttr MeshAttr::getAxis(StringRef name) const {
  for (MeshAxisAttr axis : getAxes())
    if (axis.getName().getValue() == name)
      return axis;
  return {};
}

int64_t MeshAttr::getNumDevices() const {
  int64_t n = 1;
  for (MeshAxisAttr axis : getAxes())
    n *= axis.getSize();
  return n;
}

::sd::MeshSpec mlir::sd::toMeshSpec(MeshAttr mesh) {
  std::vector<::sd::MeshAxis> axes;
  for (MeshAxisAttr axis : mesh.getAxes())
    axes.push_back({axis.getName().str(), axis.getIci(), axis.getDcn()});
  return ::sd::MeshSpec(std::move(axes));
}

//===----------------------------------------------------------------------===//
// DimShardingAttr / ShardingAttr
//===----------------------------------------------------------------------===//

Attribute DimShardingAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<StringAttr> axes;
  bool isClosed = true;
  if (parser.parseLBrace())
    return {};
  if (failed(parser.parseOptionalRBrace())) {
    while (true) {
      if (succeeded(parser.parseOptionalQuestion())) {
        isClosed = false;
        if (parser.parseRBrace())
          return {};
        break;
      }
      std::string name;
      if (parser.parseString(&name))
        return {};
      axes.push_back(parser.getBuilder().getStringAttr(name));
      if (succeeded(parser.parseOptionalRBrace()))
        break;
      if (parser.parseComma())
        return {};
    }
  }
  // An optional priority suffix `p<N>` lexes as one bare identifier.
  std::optional<int64_t> priority;
  StringRef keyword;
  SMLoc priorityLoc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalKeyword(&keyword))) {
    int64_t value;
    if (!keyword.consume_front("p") || keyword.getAsInteger(10, value)) {
      parser.emitError(priorityLoc, "expected a priority such as 'p0'");
      return {};
    }
    priority = value;
  }
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), axes, isClosed, priority);
}

void DimShardingAttr::print(AsmPrinter &printer) const {
  printer << '{';
  llvm::interleaveComma(getAxes(), printer,
                        [&](StringAttr axis) { printer << axis; });
  if (!getIsClosed())
    printer << (getAxes().empty() ? "?" : ", ?");
  printer << '}';
  if (getPriority())
    printer << 'p' << *getPriority();
}

LogicalResult
DimShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        ArrayRef<StringAttr> axes, bool isClosed,
                        std::optional<int64_t> priority) {
  if (priority && *priority < 0)
    return emitError() << "dimension priority " << *priority
                       << " is negative";
  return success();
}

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  FlatSymbolRefAttr meshName;
  SmallVector<DimShardingAttr> dims;
  SmallVector<StringAttr> replicated, unreduced;
  if (parser.parseLess() || parser.parseAttribute(meshName) ||
      parser.parseComma() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        auto dim = DimShardingAttr::parse(parser, {});
        if (!dim)
          return failure();
        dims.push_back(cast<DimShardingAttr>(dim));
        return success();
      }))
    return {};
  // Optional `, replicated = [...]` then `, unreduced = [...]`, in order.
  // `next` is the first list still allowed: 0 replicated, 1 unreduced.
  int next = 0;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keywordLoc = parser.getCurrentLocation();
    StringRef keyword;
    if (parser.parseKeyword(&keyword))
      return {};
    int list = keyword == "replicated" ? 0 : keyword == "unreduced" ? 1 : -1;
    if (list < next) {
      parser.emitError(keywordLoc, "expected 'replicated' or 'unreduced', "
                                   "each at most once and in this order");
      return {};
    }
    next = list + 1;
    bool isReplicated = list == 0;
    if (parser.parseEqual() ||
        parseStringList(parser, isReplicated ? replicated : unreduced))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    meshName, dims, replicated, unreduced);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << '<' << getMeshName() << ", [";
  llvm::interleaveComma(getDimShardings(), printer,
                        [&](DimShardingAttr dim) { dim.print(printer); });
  printer << ']';
  if (!getReplicatedAxes().empty()) {
    printer << ", replicated = ";
    printStringList(printer, getReplicatedAxes());
  }
  if (!getUnreducedAxes().empty()) {
    printer << ", unreduced = ";
    printStringList(printer, getUnreducedAxes());
  }
  printer << '>';
}

bool ShardingAttr::isFullyReplicated() const {
  return llvm::all_of(getDimShardings(), [](DimShardingAttr dim) {
    return dim.getAxes().empty();
  });
}

LogicalResult ShardingAttr::verifyFor(
    Type type, MeshAttr mesh, StringRef valueName,
    function_ref<InFlightDiagnostic()> emitError) const {
  auto tensorType = dyn_cast<RankedTensorType>(type);
  if (!tensorType)
    return emitError() << "sharding of " << valueName
                       << " needs a ranked tensor, not " << type;
  if (tensorType.getRank() != getRank())
    return emitError() << "sharding of " << valueName << " has " << getRank()
                       << " dimensions but the tensor has rank "
                       << tensorType.getRank();
  llvm::StringSet<> used;
  auto useAxis = [&](StringAttr axis) -> FailureOr<int64_t> {
    MeshAxisAttr meshAxis = mesh.getAxis(axis.getValue());
    if (!meshAxis)
      return emitError() << "sharding of " << valueName << " names mesh axis "
                         << axis << ", which mesh " << getMeshName()
                         << " does not have";
    if (!used.insert(axis.getValue()).second)
      return emitError() << "sharding of " << valueName << " uses mesh axis "
                         << axis << " twice";
    return meshAxis.getSize();
  };
  // A dimension its axes do not divide is padded to a multiple: each device
  // holds a block of ceil(size / devices) (see sd::blockExtent).
  for (DimShardingAttr dimSharding : getDimShardings())
    for (StringAttr axis : dimSharding.getAxes())
      if (failed(useAxis(axis)))
        return failure();
  for (StringAttr axis : getReplicatedAxes())
    if (failed(useAxis(axis)))
      return failure();
  for (StringAttr axis : getUnreducedAxes())
    if (failed(useAxis(axis)))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// ShardingPerValueAttr
//===----------------------------------------------------------------------===//

Attribute ShardingPerValueAttr::parse(AsmParser &parser, Type) {
  SmallVector<ShardingAttr> shardings;
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        auto sharding = ShardingAttr::parse(parser, {});
        if (!sharding)
          return failure();
        shardings.push_back(cast<ShardingAttr>(sharding));
        return success();
      }) ||
      parser.parseGreater())
    return {};
  return get(parser.getContext(), shardings);
}

void ShardingPerValueAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getShardings(), printer,
                        [&](ShardingAttr sharding) { sharding.print(printer); });
  printer << "]>";
}

//===----------------------------------------------------------------------===//
// LogicalAxesAttr
//===----------------------------------------------------------------------===//

Attribute LogicalAxesAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<StringAttr> names;
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        std::string name;
        StringRef keyword;
        if (succeeded(parser.parseOptionalKeyword(&keyword)))
          name = keyword.str();
        else if (parser.parseString(&name))
          return failure();
        // `_` and `"_"` both leave the dimension unnamed, as printed.
        if (name == "_")
          name.clear();
        names.push_back(parser.getBuilder().getStringAttr(name));
        return success();
      }) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), names);
}

void LogicalAxesAttr::print(AsmPrinter &printer) const {
  printer << "<[";
  llvm::interleaveComma(getNames(), printer, [&](StringAttr name) {
    printer << (name.getValue().empty() ? "_" : name.getValue());
  });
  printer << "]>";
}

LogicalResult
LogicalAxesAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        ArrayRef<StringAttr> names) {
  for (StringAttr name : names)
    if (!name.getValue().empty() && !isIdentifier(name.getValue()))
      return emitError() << "logical axis name " << name
                         << " is not an identifier";
  return success();
}

//===----------------------------------------------------------------------===//
// InitAttr / ParamAttr / InputAttr
//===----------------------------------------------------------------------===//

/// The shortest decimal that reads back as exactly `value`, always with a
/// dot or exponent so MLIR parses it as a float: `0.02`, `-1.0`, `1e-08`.
static std::string shortestFloat(double value) {
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    text = llvm::formatv("{0}", llvm::format("%.*g", precision, value)).str();
    if (std::strtod(text.c_str(), nullptr) == value)
      break;
  }
  if (text.find_first_of(".eEn") == std::string::npos)
    text += ".0";
  return text;
}

/// Initializers that take a scale in parentheses.
static bool takesScale(InitKind kind) {
  return kind == InitKind::constant || kind == InitKind::normal ||
         kind == InitKind::uniform;
}

Attribute InitAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown initializer '" << keyword << "'";
    return {};
  }
  double scale = 0.0;
  if (succeeded(parser.parseOptionalLParen())) {
    if (parser.parseFloat(scale) || parser.parseRParen())
      return {};
    if (!takesScale(*kind)) {
      parser.emitError(loc) << "initializer '" << keyword
                            << "' takes no scale";
      return {};
    }
  } else if (takesScale(*kind)) {
    parser.emitError(loc) << "initializer '" << keyword
                          << "' needs a scale, e.g. " << keyword << "(0.02)";
    return {};
  }
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), *kind, llvm::APFloat(scale));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << stringifyInitKind(getKind());
  if (takesScale(getKind())) {
    printer << '(' << shortestFloat(getScale().convertToDouble()) << ')';
  }
}

LogicalResult InitAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               InitKind kind, llvm::APFloat scaleValue) {
  double scale = scaleValue.convertToDouble();
  if ((kind == InitKind::normal || kind == InitKind::uniform) &&
      !(scale > 0.0))
    return emitError() << "initializer '" << stringifyInitKind(kind)
                       << "' needs a positive scale, not " << scale;
  if (!takesScale(kind) && scale != 0.0)
    return emitError() << "initializer '" << stringifyInitKind(kind)
                       << "' takes no scale";
  return success();
}

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringAttr name, InitAttr init,
                                ArrayRef<int64_t> storedShape) {
  if (name.getValue().empty())
    return emitError() << "parameter name is empty";
  if (llvm::any_of(storedShape, [](int64_t size) { return size < 0; }))
    return emitError() << "stored shape of parameter " << name
                       << " has a negative size";
  return success();
}

Attribute InputAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword) ||
      parser.parseGreater())
    return {};
  std::optional<InputKind> kind = symbolizeInputKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown input kind '" << keyword
                          << "'; expected latents, noise, timestep, context, "
                             "labels or step";
    return {};
  }
  return get(parser.getContext(), *kind);
}

void InputAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyInputKind(getKind()) << '>';
}

//===----------------------------------------------------------------------===//
// OptimizerStateAttr
//===----------------------------------------------------------------------===//

Attribute OptimizerStateAttr::parse(AsmParser &parser, Type) {
  std::string param;
  StringRef keyword;
  if (parser.parseLess() || parser.parseString(&param) || parser.parseComma())
    return {};
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword) || parser.parseGreater())
    return {};
  std::optional<MomentKind> kind = symbolizeMomentKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown optimizer moment '" << keyword
                          << "'; expected mu or nu";
    return {};
  }
  return get(parser.getContext(), StringAttr::get(parser.getContext(), param),
             *kind);
}

void OptimizerStateAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printer.printString(getParam().getValue());
  printer << ", " << stringifyMomentKind(getKind()) << '>';
}

//===----------------------------------------------------------------------===//
// FlashBlocksAttr
//===----------------------------------------------------------------------===//

LogicalResult FlashBlocksAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, int64_t blockQ,
    int64_t blockKvCompute, int64_t blockKv, int64_t blockQDkv,
    int64_t blockKvDkv, int64_t blockKvDkvCompute, int64_t blockQDq,
    int64_t blockKvDq, bool) {
  std::pair<StringRef, int64_t> sizes[] = {
      {"block_q", blockQ},
      {"block_kv_compute", blockKvCompute},
      {"block_kv", blockKv},
      {"block_q_dkv", blockQDkv},
      {"block_kv_dkv", blockKvDkv},
      {"block_kv_dkv_compute", blockKvDkvCompute},
      {"block_q_dq", blockQDq},
      {"block_kv_dq", blockKvDq}};
  for (auto [name, size] : sizes)
    if (size <= 0)
      return emitError() << "flash block size " << name << " is " << size
                         << "; block sizes must be positive";
  return success();
}
