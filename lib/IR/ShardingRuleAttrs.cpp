//===- ShardingRuleAttrs.cpp - sharding rule attributes -------------------===//
//
// Syntax and verifiers of #sd.sharding_rule and its parts. Factors have no
// names of their own: a factor is printed by its position (i, j, ..., z,
// z_1, ...), so a rule prints the same way every time and parses back.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDAttrs.h"
#include "sd/IR/SDDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::sd;

/// Single-letter names run from 'i' to 'z'; later factors are z_1, z_2, ...
static constexpr int64_t kNumLetterNames = 'z' - 'i' + 1;

std::string mlir::sd::getFactorName(int64_t index) {
  if (index < 0)
    return "#" + std::to_string(index);
  if (index < kNumLetterNames)
    return std::string(1, static_cast<char>('i' + index));
  return "z_" + std::to_string(index - kNumLetterNames + 1);
}

/// Reads one factor name from the front of `text` and drops it; nullopt (and
/// `text` unchanged) when `text` does not start with one.
static std::optional<int64_t> consumeFactorName(StringRef &text) {
  if (text.empty() || text[0] < 'i' || text[0] > 'z')
    return std::nullopt;
  if (text[0] != 'z' || !text.drop_front().starts_with("_")) {
    int64_t index = text[0] - 'i';
    text = text.drop_front();
    return index;
  }
  // z_<n>: n is a positive decimal without leading zeros.
  StringRef digits = text.drop_front(2).take_while(llvm::isDigit);
  int64_t n = 0;
  if (digits.empty() || digits[0] == '0' || digits.getAsInteger(10, n))
    return std::nullopt;
  text = text.drop_front(2 + digits.size());
  return kNumLetterNames - 1 + n;
}

std::optional<int64_t> mlir::sd::getFactorIndex(StringRef name) {
  std::optional<int64_t> index = consumeFactorName(name);
  if (!index || !name.empty())
    return std::nullopt;
  return index;
}

/// Parses a dimension's factors: `1` (none) or names written together.
static ParseResult parseDimFactors(AsmParser &parser,
                                   SmallVectorImpl<int64_t> &factors) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t one = 0;
  OptionalParseResult unit = parser.parseOptionalInteger(one);
  if (unit.has_value()) {
    if (failed(*unit))
      return failure();
    if (one != 1)
      return parser.emitError(loc, "a dimension without factors is written "
                                   "'1', not '")
             << one << "'";
    return success();
  }
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return parser.emitError(loc, "expected factor names or '1'");
  StringRef rest = keyword;
  while (!rest.empty()) {
    std::optional<int64_t> index = consumeFactorName(rest);
    if (!index)
      return parser.emitError(loc, "'")
             << keyword
             << "' is not a list of factor names (i, j, ..., z, z_1, ...)";
    factors.push_back(*index);
  }
  return success();
}

/// Prints a dimension's factors as parsed by parseDimFactors.
static void printDimFactors(raw_ostream &os, ArrayRef<int64_t> factors) {
  if (factors.empty()) {
    os << '1';
    return;
  }
  for (int64_t factor : factors)
    os << getFactorName(factor);
}

/// Parses `[i, jk, 1]` into a TensorMappingAttr.
static TensorMappingAttr parseTensorMapping(AsmParser &parser) {
  SmallVector<DimMappingAttr> dims;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        SmallVector<int64_t> factors;
        if (parseDimFactors(parser, factors))
          return failure();
        dims.push_back(DimMappingAttr::get(parser.getContext(), factors));
        return success();
      }))
    return {};
  return TensorMappingAttr::get(parser.getContext(), dims);
}

static void printTensorMapping(raw_ostream &os, TensorMappingAttr mapping) {
  os << '[';
  llvm::interleaveComma(mapping.getDimMappings(), os, [&](DimMappingAttr dim) {
    printDimFactors(os, dim.getFactorIndices());
  });
  os << ']';
}

//===----------------------------------------------------------------------===//
// DimMappingAttr / TensorMappingAttr
//===----------------------------------------------------------------------===//

Attribute DimMappingAttr::parse(AsmParser &parser, Type) {
  SmallVector<int64_t> factors;
  if (parser.parseLess() || parseDimFactors(parser, factors) ||
      parser.parseGreater())
    return {};
  return get(parser.getContext(), factors);
}

void DimMappingAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printDimFactors(printer.getStream(), getFactorIndices());
  printer << '>';
}

Attribute TensorMappingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  TensorMappingAttr mapping = parseTensorMapping(parser);
  if (!mapping || parser.parseGreater())
    return {};
  return mapping;
}

void TensorMappingAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printTensorMapping(printer.getStream(), *this);
  printer << '>';
}

bool TensorMappingAttr::containsFactor(int64_t factor) const {
  return llvm::any_of(getDimMappings(), [&](DimMappingAttr dim) {
    return llvm::is_contained(dim.getFactorIndices(), factor);
  });
}

//===----------------------------------------------------------------------===//
// OpShardingRuleAttr
//===----------------------------------------------------------------------===//

/// Parses `(<tensor mapping>, ...)`.
static ParseResult parseMappingList(AsmParser &parser,
                                    SmallVectorImpl<TensorMappingAttr> &list) {
  return parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, [&] {
    TensorMappingAttr mapping = parseTensorMapping(parser);
    if (!mapping)
      return failure();
    list.push_back(mapping);
    return success();
  });
}

/// Parses `{j, k}`, a list of factor names, into sorted indices.
static ParseResult parseFactorSet(AsmParser &parser,
                                  SmallVectorImpl<int64_t> &factors) {
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Braces, [&]() -> ParseResult {
            SMLoc loc = parser.getCurrentLocation();
            StringRef name;
            if (parser.parseKeyword(&name))
              return failure();
            std::optional<int64_t> index = getFactorIndex(name);
            if (!index)
              return parser.emitError(loc, "'")
                     << name << "' is not a factor name";
            factors.push_back(*index);
            return success();
          }))
    return failure();
  llvm::sort(factors);
  return success();
}

Attribute OpShardingRuleAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<TensorMappingAttr> operands, results;
  SmallVector<int64_t> sizes, reduction, needReplication;
  if (parser.parseLess() || parseMappingList(parser, operands) ||
      parser.parseArrow() || parseMappingList(parser, results))
    return {};
  // Sizes list the factors in their naming order, so that names and indices
  // cannot disagree.
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Braces, [&]() -> ParseResult {
            SMLoc nameLoc = parser.getCurrentLocation();
            StringRef name;
            int64_t size = 0;
            if (parser.parseKeyword(&name))
              return failure();
            std::string expected = getFactorName(sizes.size());
            if (name != expected)
              return parser.emitError(nameLoc, "expected the size of factor '")
                     << expected << "', not of '" << name
                     << "'; sizes list factors in order i, j, k, ...";
            if (parser.parseEqual() || parser.parseInteger(size))
              return failure();
            sizes.push_back(size);
            return success();
          }))
    return {};
  // Optional kind lists, each at most once and in this order.
  bool seenReduction = false, seenNeedReplication = false;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc kindLoc = parser.getCurrentLocation();
    StringRef kind;
    if (parser.parseKeyword(&kind))
      return {};
    if (kind == "reduction" && !seenReduction && !seenNeedReplication) {
      seenReduction = true;
      if (parser.parseEqual() || parseFactorSet(parser, reduction))
        return {};
    } else if (kind == "need_replication" && !seenNeedReplication) {
      seenNeedReplication = true;
      if (parser.parseEqual() || parseFactorSet(parser, needReplication))
        return {};
    } else {
      parser.emitError(kindLoc, "expected 'reduction' or 'need_replication', "
                                "each at most once and in this order");
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return getChecked(
      [&] { return parser.emitError(loc); }, parser.getContext(),
      ArrayRef<int64_t>(sizes), ArrayRef<TensorMappingAttr>(operands),
      ArrayRef<TensorMappingAttr>(results), ArrayRef<int64_t>(reduction),
      ArrayRef<int64_t>(needReplication));
}

void OpShardingRuleAttr::print(AsmPrinter &printer) const {
  raw_ostream &os = printer.getStream();
  auto printMappings = [&](ArrayRef<TensorMappingAttr> mappings) {
    os << '(';
    llvm::interleaveComma(mappings, os, [&](TensorMappingAttr mapping) {
      printTensorMapping(os, mapping);
    });
    os << ')';
  };
  auto printFactorSet = [&](StringRef kind, ArrayRef<int64_t> factors) {
    if (factors.empty())
      return;
    os << ", " << kind << "={";
    llvm::interleaveComma(factors, os,
                          [&](int64_t factor) { os << getFactorName(factor); });
    os << '}';
  };
  os << '<';
  printMappings(getOperandMappings());
  os << " -> ";
  printMappings(getResultMappings());
  os << " {";
  llvm::interleaveComma(llvm::enumerate(getFactorSizes()), os, [&](auto it) {
    os << getFactorName(it.index()) << '=' << it.value();
  });
  os << '}';
  printFactorSet("reduction", getReductionFactors());
  printFactorSet("need_replication", getNeedReplicationFactors());
  os << '>';
}

/// `operand #2` / `result #0`, for messages.
static std::string describeTensor(bool isResult, int64_t index) {
  return (isResult ? "result #" : "operand #") + std::to_string(index);
}

LogicalResult
OpShardingRuleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           ArrayRef<int64_t> factorSizes,
                           ArrayRef<TensorMappingAttr> operandMappings,
                           ArrayRef<TensorMappingAttr> resultMappings,
                           ArrayRef<int64_t> reductionFactors,
                           ArrayRef<int64_t> needReplicationFactors) {
  auto numFactors = static_cast<int64_t>(factorSizes.size());
  for (auto [index, size] : llvm::enumerate(factorSizes))
    if (size <= 0)
      return emitError() << "factor '" << getFactorName(index) << "' has size "
                         << size << "; sizes must be positive";
  auto inRange = [&](int64_t factor) {
    return factor >= 0 && factor < numFactors;
  };
  auto checkTensor = [&](TensorMappingAttr mapping,
                         const std::string &what) -> LogicalResult {
    llvm::SmallSet<int64_t, 8> used;
    for (DimMappingAttr dim : mapping.getDimMappings())
      for (int64_t factor : dim.getFactorIndices()) {
        if (!inRange(factor))
          return emitError() << what << " uses factor '"
                             << getFactorName(factor) << "', which has no size";
        if (!used.insert(factor).second)
          return emitError() << what << " uses factor '"
                             << getFactorName(factor) << "' twice";
      }
    return success();
  };
  for (auto [index, mapping] : llvm::enumerate(operandMappings))
    if (failed(checkTensor(mapping, describeTensor(false, index))))
      return failure();
  for (auto [index, mapping] : llvm::enumerate(resultMappings))
    if (failed(checkTensor(mapping, describeTensor(true, index))))
      return failure();

  auto checkKind = [&](ArrayRef<int64_t> factors,
                       StringRef kind) -> LogicalResult {
    llvm::SmallSet<int64_t, 8> seen;
    for (int64_t factor : factors) {
      if (!inRange(factor))
        return emitError() << kind << " factor '" << getFactorName(factor)
                           << "' has no size";
      if (!seen.insert(factor).second)
        return emitError() << "factor '" << getFactorName(factor)
                           << "' is listed twice as " << kind;
    }
    return success();
  };
  if (failed(checkKind(reductionFactors, "reduction")) ||
      failed(checkKind(needReplicationFactors, "need_replication")))
    return failure();
  for (int64_t factor : reductionFactors)
    if (llvm::is_contained(needReplicationFactors, factor))
      return emitError() << "factor '" << getFactorName(factor)
                         << "' is both reduction and need_replication";
  return success();
}

FactorKind OpShardingRuleAttr::getFactorKind(int64_t factor) const {
  if (llvm::is_contained(getReductionFactors(), factor))
    return FactorKind::Reduction;
  if (llvm::is_contained(getNeedReplicationFactors(), factor))
    return FactorKind::NeedReplication;
  return FactorKind::PassThrough;
}

LogicalResult OpShardingRuleAttr::verifyFor(
    Operation *op, function_ref<InFlightDiagnostic()> emitError) const {
  auto checkList = [&](ArrayRef<TensorMappingAttr> mappings, TypeRange types,
                       bool isResult) -> LogicalResult {
    StringRef what = isResult ? "result" : "operand";
    if (mappings.size() != types.size())
      return emitError() << "sharding rule has " << mappings.size() << " "
                         << what << " mappings but the op has " << types.size()
                         << " " << what << "s";
    for (auto [index, mapping, type] : llvm::enumerate(mappings, types)) {
      std::string name = describeTensor(isResult, index);
      auto tensorType = dyn_cast<RankedTensorType>(type);
      if (!tensorType)
        return emitError() << "sharding rule maps " << name
                           << ", which is not a ranked tensor but " << type;
      if (tensorType.getRank() != mapping.getRank())
        return emitError() << "sharding rule maps " << mapping.getRank()
                           << " dimensions of " << name << ", which has rank "
                           << tensorType.getRank();
      for (auto [dim, dimMapping] : llvm::enumerate(mapping.getDimMappings())) {
        int64_t size = tensorType.getDimSize(dim);
        if (ShapedType::isDynamic(size))
          continue;
        int64_t product = 1;
        for (int64_t factor : dimMapping.getFactorIndices())
          product *= getFactorSizes()[factor];
        if (product != size && dimMapping.getFactorIndices().empty())
          return emitError()
                 << "dimension " << dim << " of " << name << " has size "
                 << size << " but maps to no factor ('1')";
        if (product != size) {
          std::string factors;
          llvm::raw_string_ostream os(factors);
          printDimFactors(os, dimMapping.getFactorIndices());
          return emitError() << "dimension " << dim << " of " << name
                             << " has size " << size << " but its factors '"
                             << factors << "' multiply to " << product;
        }
      }
    }
    return success();
  };
  if (failed(checkList(getOperandMappings(), op->getOperandTypes(), false)))
    return failure();
  return checkList(getResultMappings(), op->getResultTypes(), true);
}
