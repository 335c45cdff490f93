//===- ShardingFactors.cpp - Plain shardings, rules and projections -------===//
//
// The plain forms propagation works on (mesh shapes, tensor shardings,
// factor rules) and the projection of a tensor's sharding onto its rule's
// factors and back (see ShardingPropagation.h). Nothing here touches the
// IR.
//
//===----------------------------------------------------------------------===//

#include "sd/Passes/ShardingPropagation.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::propagation;

//===----------------------------------------------------------------------===//
// Plain shardings and rules
//===----------------------------------------------------------------------===//

int64_t MeshShape::product(ArrayRef<AxisId> axes) const {
  int64_t result = 1;
  for (AxisId axis : axes)
    result *= axisSizes[axis];
  return result;
}

// An encoded comparison: the query in bits 0-1, the set of axes in bits
// 2-17, the size above; 3 in bits 0-1 a comparison that does not encode.
constexpr int kAxisBits = 16;
constexpr uint64_t kUnencoded = 3;

static bool compare(MeshShape::Query query, int64_t product, int64_t size) {
  switch (query) {
  case MeshShape::Query::Divides:
    return size % product == 0;
  case MeshShape::Query::FitsIn:
    return product <= size;
  case MeshShape::Query::Fills:
    return product == size;
  }
  llvm_unreachable("unknown query");
}

bool MeshShape::ask(Query query, ArrayRef<AxisId> axes, int64_t size) const {
  if (queries) {
    uint64_t set = 0;
    bool encodes = size >= 0 && size < (int64_t(1) << (62 - kAxisBits));
    for (AxisId axis : axes) {
      encodes &= axis >= 0 && axis < kAxisBits && !(set & uint64_t(1) << axis);
      set |= uint64_t(1) << (axis & (kAxisBits - 1));
    }
    queries->insert(encodes ? static_cast<uint64_t>(query) | set << 2 |
                                  static_cast<uint64_t>(size) << (2 + kAxisBits)
                            : kUnencoded);
  }
  return compare(query, product(axes), size);
}

bool MeshShape::answerAlike(const MeshShape &a, const MeshShape &b,
                            ArrayRef<uint64_t> queries) {
  return llvm::all_of(queries, [&](uint64_t query) {
    return (query & 3) != kUnencoded && a.answer(query) == b.answer(query);
  });
}

bool MeshShape::answer(uint64_t query) const {
  if ((query & 3) == kUnencoded)
    return false;
  int64_t product = 1;
  for (AxisId axis = 0; axis < numAxes(); ++axis)
    if (query >> 2 & uint64_t(1) << axis)
      product *= axisSizes[axis];
  return compare(static_cast<Query>(query & 3), product,
                 static_cast<int64_t>(query >> (2 + kAxisBits)));
}

TensorSharding TensorSharding::open(int64_t rank) {
  TensorSharding sharding;
  sharding.dims.resize(rank);
  return sharding;
}

bool TensorSharding::sameLayout(const TensorSharding &other) const {
  if (dims.size() != other.dims.size() || unreduced != other.unreduced)
    return false;
  return llvm::all_of(llvm::zip_equal(dims, other.dims), [](auto pair) {
    return std::get<0>(pair).axes == std::get<1>(pair).axes;
  });
}

std::string propagation::toString(const TensorSharding &sharding,
                                  const MeshShape &mesh) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto printAxes = [&](ArrayRef<AxisId> axes) {
    llvm::interleaveComma(axes, os, [&](AxisId axis) {
      if (axis < static_cast<AxisId>(mesh.axisNames.size()))
        os << '"' << mesh.axisNames[axis] << '"';
      else
        os << '#' << axis;
    });
  };
  os << '[';
  llvm::interleaveComma(sharding.dims, os, [&](const DimSharding &dim) {
    os << '{';
    printAxes(dim.axes);
    if (!dim.closed)
      os << (dim.axes.empty() ? "?" : ", ?");
    os << '}';
    if (dim.priority)
      os << 'p' << *dim.priority;
  });
  os << ']';
  if (!sharding.replicated.empty()) {
    os << ", replicated = [";
    printAxes(sharding.replicated);
    os << ']';
  }
  if (!sharding.unreduced.empty()) {
    os << ", unreduced = [";
    printAxes(sharding.unreduced);
    os << ']';
  }
  return text;
}

FactorRule FactorRule::fromAttr(OpShardingRuleAttr attr) {
  FactorRule rule;
  rule.factorSizes.assign(attr.getFactorSizes().begin(),
                          attr.getFactorSizes().end());
  for (int64_t f = 0, e = attr.getNumFactors(); f < e; ++f)
    rule.factorKinds.push_back(attr.getFactorKind(f));
  auto convert = [](TensorMappingAttr mapping) {
    TensorMapping result;
    for (DimMappingAttr dim : mapping.getDimMappings())
      result.emplace_back(dim.getFactorIndices().begin(),
                          dim.getFactorIndices().end());
    return result;
  };
  for (TensorMappingAttr mapping : attr.getOperandMappings())
    rule.operands.push_back(convert(mapping));
  for (TensorMappingAttr mapping : attr.getResultMappings())
    rule.results.push_back(convert(mapping));
  return rule;
}

const FactorRule::TensorMapping &FactorRule::tensor(int64_t t) const {
  int64_t numOperands = operands.size();
  return t < numOperands ? operands[t] : results[t - numOperands];
}

/// True when `mapping` has factor `factor` in some dimension.
static bool hasFactor(const FactorRule::TensorMapping &mapping,
                      int64_t factor) {
  return llvm::any_of(mapping, [&](const SmallVector<int64_t, 2> &factors) {
    return llvm::is_contained(factors, factor);
  });
}

bool FactorRule::isPassThroughOp() const {
  for (int64_t f = 0, e = numFactors(); f < e; ++f) {
    if (factorKinds[f] != FactorKind::PassThrough)
      return false;
    for (int64_t t = 0, te = numTensors(); t < te; ++t)
      if (!hasFactor(tensor(t), f))
        return false;
  }
  return true;
}

bool FactorRule::isBroadcastLike() const {
  for (int64_t f = 0, e = numFactors(); f < e; ++f) {
    if (factorKinds[f] != FactorKind::PassThrough)
      continue;
    bool inResult = llvm::any_of(
        results, [&](const TensorMapping &m) { return hasFactor(m, f); });
    bool inOperand = llvm::any_of(
        operands, [&](const TensorMapping &m) { return hasFactor(m, f); });
    if (inResult && !inOperand)
      return true;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Projection
//===----------------------------------------------------------------------===//

bool propagation::isMinorMost(ArrayRef<int64_t> dimFactors, size_t position,
                              ArrayRef<int64_t> factorSizes) {
  return llvm::all_of(dimFactors.drop_front(position + 1),
                      [&](int64_t f) { return factorSizes[f] == 1; });
}

TensorFactorShardings propagation::projectToFactors(
    const TensorSharding &sharding, const FactorRule::TensorMapping &mapping,
    ArrayRef<int64_t> factorSizes, const MeshShape &mesh) {
  TensorFactorShardings result;
  result.factors.resize(factorSizes.size());
  result.dimFits.assign(mapping.size(), true);
  result.otherAxes.append(sharding.replicated.begin(),
                          sharding.replicated.end());
  for (auto [dim, factors] : llvm::enumerate(mapping)) {
    const DimSharding &dimSharding = sharding.dims[dim];
    ArrayRef<AxisId> axes = dimSharding.axes;
    size_t next = 0;
    for (auto [position, factor] : llvm::enumerate(factors)) {
      FactorSharding &factorSharding = result.factors[factor];
      factorSharding.present = true;
      factorSharding.closed = dimSharding.closed;
      // Take axes while their product divides the factor; the next factor
      // starts only once this one is full.
      int64_t size = factorSizes[factor];
      size_t first = next;
      auto taken = [&](size_t end) { return axes.slice(first, end - first); };
      while (next < axes.size() && !mesh.fills(taken(next), size) &&
             mesh.divides(taken(next + 1), size))
        factorSharding.axes.push_back(axes[next++]);
      if (mesh.fills(taken(next), size))
        continue;
      // The minor-most factor of its dimension takes the axes that do not
      // divide it too: its padded blocks are the dimension's.
      if (isMinorMost(factors, position, factorSizes))
        while (next < axes.size())
          factorSharding.axes.push_back(axes[next++]);
      break;
    }
    if (next == axes.size())
      continue;
    // The axes do not fit the factors: the dimension stays as it is, and
    // the axes no factor took belong to no factor.
    result.dimFits[dim] = false;
    result.otherAxes.append(axes.begin() + next, axes.end());
    for (int64_t factor : factors) {
      result.factors[factor].present = true;
      result.factors[factor].closed = true;
    }
  }
  return result;
}

TensorSharding propagation::projectFromFactors(
    const TensorFactorShardings &factors,
    const FactorRule::TensorMapping &mapping, ArrayRef<int64_t> factorSizes,
    const MeshShape &mesh, const TensorSharding &original) {
  TensorSharding result = original;
  for (auto [dim, dimFactors] : llvm::enumerate(mapping)) {
    if (!factors.dimFits[dim])
      continue;
    AxisList axes;
    for (int64_t factor : dimFactors) {
      ArrayRef<AxisId> factorAxes = factors.factors[factor].axes;
      axes.append(factorAxes.begin(), factorAxes.end());
      // A factor that is not full leaves no room for the minor ones.
      if (!mesh.fills(factorAxes, factorSizes[factor]))
        break;
    }
    result.dims[dim].axes = axes;
  }
  return result;
}
