//===- SDCollectiveOps.cpp - collectives and reshards ---------------------===//
//
// Verifiers of the collectives and of sd.reshard, and the `[{"a"}, {}]`
// syntax of per-dimension mesh axes. Checks that need only the op run in
// `verify`; those that need the mesh's axis sizes run in `verifySymbolUses`.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <set>

using namespace mlir;
using namespace mlir::sd;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The mesh that `op` names, looked up through the verifier's symbol tables;
/// null after an error on `op`.
static MeshAttr lookupCollectiveMesh(Operation *op, FlatSymbolRefAttr meshName,
                                     SymbolTableCollection &symbols) {
  auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(op, meshName);
  if (!mesh) {
    op->emitOpError() << "refers to " << meshName
                      << ", which is not an sd.mesh";
    return {};
  }
  return mesh.getMesh();
}

/// The product of the sizes of `axes` in `mesh`; failure after an error on
/// `op` naming the first axis the mesh does not have.
static FailureOr<int64_t> axesProduct(Operation *op, MeshAttr mesh,
                                      FlatSymbolRefAttr meshName,
                                      ArrayRef<StringRef> axes) {
  int64_t product = 1;
  for (StringRef name : axes) {
    MeshAxisAttr axis = mesh.getAxis(name);
    if (!axis)
      return op->emitOpError()
             << "names mesh axis \"" << name << "\", which mesh " << meshName
             << " does not have";
    product *= axis.getSize();
  }
  return product;
}

/// `mesh axis "fsdp" of size 2` or `mesh axes "data", "fsdp" of total size
/// 4`, for messages.
static std::string describeAxes(ArrayRef<StringRef> axes, int64_t product) {
  std::string text = axes.size() == 1 ? "mesh axis " : "mesh axes ";
  for (auto [i, axis] : llvm::enumerate(axes))
    text += (i ? ", \"" : "\"") + axis.str() + "\"";
  text += axes.size() == 1 ? " of size " : " of total size ";
  return text + std::to_string(product);
}

/// Checks the local constraints of an axes list: at least one axis, none
/// twice.
static LogicalResult verifyAxesList(Operation *op, ArrayRef<StringRef> axes) {
  if (axes.empty())
    return op->emitOpError("lists no mesh axis");
  llvm::StringSet<> seen;
  for (StringRef axis : axes)
    if (!seen.insert(axis).second)
      return op->emitOpError() << "lists mesh axis \"" << axis << "\" twice";
  return success();
}

static SmallVector<StringRef> toStringRefs(ArrayAttr names) {
  return llvm::to_vector(llvm::map_range(
      names, [](Attribute name) { return cast<StringAttr>(name).getValue(); }));
}

//===----------------------------------------------------------------------===//
// Per-dimension axes: all_gather, all_slice, reduce_scatter
//===----------------------------------------------------------------------===//

static ParseResult parseDimAxesImpl(OpAsmParser &parser, ArrayAttr &dimAxes) {
  Builder &builder = parser.getBuilder();
  SmallVector<Attribute> dims;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        SmallVector<Attribute> axes;
        if (parser.parseCommaSeparatedList(
                AsmParser::Delimiter::Braces, [&]() -> ParseResult {
                  std::string name;
                  if (parser.parseString(&name))
                    return failure();
                  axes.push_back(builder.getStringAttr(name));
                  return success();
                }))
          return failure();
        dims.push_back(builder.getArrayAttr(axes));
        return success();
      }))
    return failure();
  dimAxes = builder.getArrayAttr(dims);
  return success();
}

static void printDimAxesImpl(OpAsmPrinter &printer, ArrayAttr dimAxes) {
  printer << '[';
  llvm::interleaveComma(dimAxes, printer, [&](Attribute axes) {
    printer << '{';
    llvm::interleaveComma(cast<ArrayAttr>(axes), printer,
                          [&](Attribute axis) { printer << axis; });
    printer << '}';
  });
  printer << ']';
}

static SmallVector<SmallVector<StringRef>> getAxesPerDimImpl(ArrayAttr dims) {
  return llvm::to_vector(llvm::map_range(dims, [](Attribute axes) {
    return toStringRefs(cast<ArrayAttr>(axes));
  }));
}

/// Local checks: one axes list per dimension, at least one axis, none twice.
static LogicalResult verifyDimAxes(Operation *op, ArrayAttr dimAxes,
                                   int64_t rank) {
  if (static_cast<int64_t>(dimAxes.size()) != rank)
    return op->emitOpError() << "lists axes for " << dimAxes.size()
                             << " dimensions but the operand has rank " << rank;
  SmallVector<StringRef> all;
  for (const SmallVector<StringRef> &axes : getAxesPerDimImpl(dimAxes))
    all.append(axes.begin(), axes.end());
  return verifyAxesList(op, all);
}

/// Whether a per-dimension collective multiplies (gather) or divides
/// (slice, reduce-scatter) each dimension by its axes' product.
enum class DimChange { Gather, Split };

/// Checks the mesh, the axes and each result dimension.
static LogicalResult verifyDimAxesSymbolUses(Operation *op,
                                             FlatSymbolRefAttr meshName,
                                             ArrayAttr dimAxes,
                                             DimChange change,
                                             SymbolTableCollection &symbols) {
  MeshAttr mesh = lookupCollectiveMesh(op, meshName, symbols);
  if (!mesh)
    return failure();
  auto operandType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  for (auto [dim, axes] : llvm::enumerate(getAxesPerDimImpl(dimAxes))) {
    FailureOr<int64_t> product = axesProduct(op, mesh, meshName, axes);
    if (failed(product))
      return failure();
    int64_t size = operandType.getDimSize(dim);
    if (axes.empty()) {
      if (resultType.getDimSize(dim) != size)
        return op->emitOpError()
               << "result dimension " << dim << " has size "
               << resultType.getDimSize(dim) << ", expected the operand's "
               << size << " (no mesh axes)";
      continue;
    }
    int64_t expected = size * *product;
    if (change == DimChange::Split) {
      if (size % *product != 0)
        return op->emitOpError()
               << "operand dimension " << dim << " of size " << size
               << " is not divisible by " << describeAxes(axes, *product);
      expected = size / *product;
    }
    if (resultType.getDimSize(dim) != expected)
      return op->emitOpError()
             << "result dimension " << dim << " has size "
             << resultType.getDimSize(dim) << ", expected " << expected
             << " (operand size " << size
             << (change == DimChange::Gather ? " gathered over "
                                             : " split over ")
             << describeAxes(axes, *product) << ")";
  }
  return success();
}

// The three ops share the directive and the checks; only the direction of
// the shape change differs.
#define SD_PER_DIM_COLLECTIVE(OpTy, change)                                    \
  ParseResult OpTy::parseDimAxes(OpAsmParser &parser, ArrayAttr &dimAxes) {    \
    return parseDimAxesImpl(parser, dimAxes);                                  \
  }                                                                            \
  void OpTy::printDimAxes(OpAsmPrinter &printer, Operation *,                  \
                          ArrayAttr dimAxes) {                                 \
    printDimAxesImpl(printer, dimAxes);                                        \
  }                                                                            \
  SmallVector<SmallVector<StringRef>> OpTy::getAxesPerDim() {                  \
    return getAxesPerDimImpl(getDimAxes());                                    \
  }                                                                            \
  LogicalResult OpTy::verify() {                                               \
    return verifyDimAxes(*this, getDimAxes(),                                  \
                         getOperand().getType().getRank());                    \
  }                                                                            \
  LogicalResult OpTy::verifySymbolUses(SymbolTableCollection &symbols) {       \
    return verifyDimAxesSymbolUses(*this, getMeshAttr(), getDimAxes(), change, \
                                   symbols);                                   \
  }

SD_PER_DIM_COLLECTIVE(AllGatherOp, DimChange::Gather)
SD_PER_DIM_COLLECTIVE(AllSliceOp, DimChange::Split)
SD_PER_DIM_COLLECTIVE(ReduceScatterOp, DimChange::Split)
#undef SD_PER_DIM_COLLECTIVE

//===----------------------------------------------------------------------===//
// all_reduce, all_to_all, axis_index
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  return verifyAxesList(*this, toStringRefs(getReductionAxes()));
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  MeshAttr mesh = lookupCollectiveMesh(*this, getMeshAttr(), symbols);
  if (!mesh)
    return failure();
  return axesProduct(*this, mesh, getMeshAttr(),
                     toStringRefs(getReductionAxes()));
}

LogicalResult AllToAllOp::verify() {
  int64_t rank = getOperand().getType().getRank();
  auto src = static_cast<int64_t>(getSrcDim());
  auto tgt = static_cast<int64_t>(getTgtDim());
  if (src < 0 || src >= rank || tgt < 0 || tgt >= rank)
    return emitOpError() << "src_dim " << src << " and tgt_dim " << tgt
                         << " must be in range for rank " << rank;
  if (src == tgt)
    return emitOpError() << "src_dim and tgt_dim are both " << src
                         << "; they must differ";
  return verifyAxesList(*this, toStringRefs(getAxes()));
}

LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &symbols) {
  MeshAttr mesh = lookupCollectiveMesh(*this, getMeshAttr(), symbols);
  if (!mesh)
    return failure();
  SmallVector<StringRef> axes = toStringRefs(getAxes());
  FailureOr<int64_t> groupSize = axesProduct(*this, mesh, getMeshAttr(), axes);
  if (failed(groupSize))
    return failure();
  int64_t n = *groupSize;
  std::string exchange = describeAxes(axes, *groupSize);
  if (std::optional<uint64_t> subgroup = getSubgroupSize()) {
    n = static_cast<int64_t>(*subgroup);
    if (n < 1 || *groupSize % n != 0)
      return emitOpError() << "subgroup_size " << n << " does not divide the "
                           << exchange;
    exchange = "the subgroups of " + std::to_string(n) + " members of " +
               exchange;
  }
  RankedTensorType operandType = getOperand().getType();
  auto src = static_cast<int64_t>(getSrcDim());
  auto tgt = static_cast<int64_t>(getTgtDim());
  int64_t tgtSize = operandType.getDimSize(tgt);
  if (tgtSize % n != 0)
    return emitOpError() << "tgt_dim " << tgt << " of size " << tgtSize
                         << " is not divisible by " << exchange;
  SmallVector<int64_t> shape(operandType.getShape());
  shape[src] *= n;
  shape[tgt] /= n;
  auto expected = operandType.clone(shape);
  if (getResult().getType() != expected)
    return emitOpError() << "result type " << getResult().getType()
                         << " differs from the expected " << expected
                         << " (src_dim " << src << " times " << n
                         << ", tgt_dim " << tgt << " divided by " << n << ")";
  return success();
}

LogicalResult AxisIndexOp::verify() {
  return verifyAxesList(*this, toStringRefs(getAxes()));
}

LogicalResult AxisIndexOp::verifySymbolUses(SymbolTableCollection &symbols) {
  MeshAttr mesh = lookupCollectiveMesh(*this, getMeshAttr(), symbols);
  if (!mesh)
    return failure();
  return axesProduct(*this, mesh, getMeshAttr(), toStringRefs(getAxes()));
}

//===----------------------------------------------------------------------===//
// collective_permute
//===----------------------------------------------------------------------===//

void CollectivePermuteOp::build(OpBuilder &builder, OperationState &state,
                                Value operand, FlatSymbolRefAttr mesh,
                                ArrayRef<StringRef> axes,
                                ArrayRef<std::pair<int64_t, int64_t>> pairs) {
  SmallVector<int64_t> flat;
  for (auto [source, target] : pairs)
    flat.append({source, target});
  build(builder, state, operand.getType(), operand, mesh,
        builder.getStrArrayAttr(axes), builder.getDenseI64ArrayAttr(flat));
}

SmallVector<std::pair<int64_t, int64_t>>
CollectivePermuteOp::pairList(ArrayRef<int64_t> flat) {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    pairs.push_back({flat[i], flat[i + 1]});
  return pairs;
}

SmallVector<std::pair<int64_t, int64_t>>
CollectivePermuteOp::getRingShiftPairs(int64_t size, int64_t shift) {
  SmallVector<std::pair<int64_t, int64_t>> pairs;
  if (size <= 0)
    return pairs;
  // Normalized to [0, size) without overflow for any shift.
  int64_t k = ((shift % size) + size) % size;
  if (k == 0)
    return pairs;
  for (int64_t i = 0; i < size; ++i)
    pairs.push_back({i, (i + k) % size});
  return pairs;
}

ParseResult CollectivePermuteOp::parsePermutePairs(OpAsmParser &parser,
                                                   DenseI64ArrayAttr &pairs) {
  SmallVector<int64_t> flat;
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
        int64_t source, target;
        if (parser.parseLSquare() || parser.parseInteger(source) ||
            parser.parseComma() || parser.parseInteger(target) ||
            parser.parseRSquare())
          return failure();
        flat.append({source, target});
        return success();
      }))
    return failure();
  pairs = parser.getBuilder().getDenseI64ArrayAttr(flat);
  return success();
}

void CollectivePermuteOp::printPermutePairs(OpAsmPrinter &printer, Operation *,
                                            DenseI64ArrayAttr pairs) {
  ArrayRef<int64_t> flat = pairs.asArrayRef();
  printer << '[';
  for (size_t i = 0; i + 1 < flat.size(); i += 2)
    printer << (i ? ", [" : "[") << flat[i] << ", " << flat[i + 1] << ']';
  printer << ']';
}

/// The checks of a permute and of its start on their own.
template <typename OpTy>
static LogicalResult verifyPermute(OpTy op) {
  if (failed(verifyAxesList(op, toStringRefs(op.getAxes()))))
    return failure();
  if (op.getPairs().size() % 2 != 0)
    return op.emitOpError() << "has " << op.getPairs().size()
                            << " integers in pairs; expected an even number";
  // std::set rather than SmallDenseSet: GCC's -Wmaybe-uninitialized misfires
  // on the latter under the sanitizers.
  std::set<int64_t> sources, targets;
  for (auto [source, target] : op.getPairList()) {
    if (!sources.insert(source).second)
      return op.emitOpError() << "lists member " << source
                              << " as the source of two pairs";
    if (!targets.insert(target).second)
      return op.emitOpError() << "lists member " << target
                              << " as the target of two pairs";
  }
  return success();
}

/// The checks of a permute and of its start against their mesh.
template <typename OpTy>
static LogicalResult verifyPermuteSymbolUses(OpTy op,
                                             SymbolTableCollection &symbols) {
  MeshAttr mesh = lookupCollectiveMesh(op, op.getMeshAttr(), symbols);
  if (!mesh)
    return failure();
  SmallVector<StringRef> axes = toStringRefs(op.getAxes());
  FailureOr<int64_t> size = axesProduct(op, mesh, op.getMeshAttr(), axes);
  if (failed(size))
    return failure();
  for (auto [source, target] : op.getPairList())
    for (int64_t member : {source, target})
      if (member < 0 || member >= *size)
        return op.emitOpError()
               << "pair [" << source << ", " << target << "] names member "
               << member << ", outside the groups of "
               << describeAxes(axes, *size);
  return success();
}

LogicalResult CollectivePermuteOp::verify() { return verifyPermute(*this); }

LogicalResult
CollectivePermuteOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyPermuteSymbolUses(*this, symbols);
}

//===----------------------------------------------------------------------===//
// collective_permute_start, collective_permute_done
//===----------------------------------------------------------------------===//

CollectivePermuteDoneOp CollectivePermuteStartOp::getDone() {
  if (!getResult().hasOneUse())
    return nullptr;
  return dyn_cast<CollectivePermuteDoneOp>(*getResult().getUsers().begin());
}

LogicalResult CollectivePermuteStartOp::verify() {
  if (failed(verifyPermute(*this)))
    return failure();
  // The done checks that it names this op's operand.
  if (!getDone())
    return emitOpError("must have one user, an sd.collective_permute_done");
  return success();
}

LogicalResult
CollectivePermuteStartOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyPermuteSymbolUses(*this, symbols);
}

CollectivePermuteStartOp CollectivePermuteDoneOp::getStart() {
  return getPending().getDefiningOp<CollectivePermuteStartOp>();
}

LogicalResult CollectivePermuteDoneOp::verify() {
  CollectivePermuteStartOp start = getStart();
  if (!start)
    return emitOpError("completes a value that no "
                       "sd.collective_permute_start defines");
  if (start.getOperand() != getSource())
    return emitOpError("names a source that is not the operand of its "
                       "sd.collective_permute_start");
  return success();
}

//===----------------------------------------------------------------------===//
// reshard
//===----------------------------------------------------------------------===//

LogicalResult ReshardOp::verify() {
  for (auto [dim, dimSharding] :
       llvm::enumerate(getSharding().getDimShardings())) {
    if (!dimSharding.getIsClosed())
      return emitOpError() << "sharding dimension " << dim
                           << " is open; a reshard needs closed dimensions";
    if (dimSharding.getPriority())
      return emitOpError() << "sharding dimension " << dim << " has priority p"
                           << *dimSharding.getPriority()
                           << "; a reshard's sharding has no priorities";
  }
  return success();
}

LogicalResult ReshardOp::verifySymbolUses(SymbolTableCollection &symbols) {
  ShardingAttr sharding = getSharding();
  auto emit = [&] { return emitOpError(); };
  MeshAttr mesh = lookupMesh(*this, sharding.getMeshName(), emit);
  if (!mesh)
    return failure();
  return sharding.verifyFor(getType(), mesh, "the resharded value", emit);
}
