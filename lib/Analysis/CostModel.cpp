//===- CostModel.cpp - per-device memory, FLOPs and communication ---------===//
//
// One walk over a function in program order: each op's FLOPs, bytes and
// communication come from CostOpInterface, calls from their callees (each
// callee costed once, added per call), and the activation peak from a
// linear-scan liveness over the op results.
//
//===----------------------------------------------------------------------===//

#include "sd/Analysis/CostModel.h"
#include "sd/Analysis/CostModels.h"
#include "sd/Analysis/SampleBlocks.h"
#include "sd/IR/MeshSpec.h"

#include "sd/IR/SDDialect.h"
#include "sd/IR/SDOps.h"
#include "sd/Sharding/Hardware.h"
#include "sd/Sharding/Mesh.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>

using namespace mlir;
using namespace mlir::sd;

//===----------------------------------------------------------------------===//
// Pure parts
//===----------------------------------------------------------------------===//

/// Bytes alive at each of `numPositions` positions of the ranges `keep`
/// selects.
static std::vector<int64_t> liveBytes(ArrayRef<LiveRange> ranges,
                                      int64_t numPositions,
                                      llvm::function_ref<bool(size_t)> keep) {
  if (numPositions <= 0)
    return {};
  // Bytes entering at each position, leaving after it: a prefix sum gives
  // the live bytes at every position.
  std::vector<int64_t> live(numPositions + 1, 0);
  for (auto [index, range] : llvm::enumerate(ranges)) {
    if (!keep(index))
      continue;
    int64_t start = std::clamp<int64_t>(range.start, 0, numPositions - 1);
    int64_t end = std::clamp<int64_t>(range.end, start, numPositions - 1);
    live[start] += range.bytes;
    live[end + 1] -= range.bytes;
  }
  for (int64_t position = 1; position <= numPositions; ++position)
    live[position] += live[position - 1];
  live.pop_back();
  return live;
}

LivePeak mlir::sd::computeLivePeak(ArrayRef<LiveRange> ranges,
                                   ArrayRef<int64_t> extra,
                                   int64_t numPositions) {
  LivePeak peak;
  std::vector<int64_t> live =
      liveBytes(ranges, numPositions, [](size_t) { return true; });
  for (int64_t position = 0; position < numPositions; ++position) {
    int64_t total =
        live[position] +
        (position < static_cast<int64_t>(extra.size()) ? extra[position] : 0);
    if (peak.position < 0 || total > peak.bytes)
      peak = {total, position};
  }
  return peak;
}

int64_t mlir::sd::getRingBytesPerDevice(CommunicationPattern pattern,
                                        int64_t tensorBytes,
                                        int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  int64_t chunk = (tensorBytes + groupSize - 1) / groupSize;
  switch (pattern) {
  case CommunicationPattern::None:
    return 0;
  case CommunicationPattern::AllGather:
  case CommunicationPattern::ReduceScatter:
  case CommunicationPattern::AllToAll:
    return (groupSize - 1) * chunk;
  case CommunicationPattern::AllReduce:
    return 2 * (groupSize - 1) * chunk;
  case CommunicationPattern::Permute:
    return tensorBytes;
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Functions and meshes
//===----------------------------------------------------------------------===//

func::FuncOp mlir::sd::findReportFunction(ModuleOp module, StringRef name) {
  if (!name.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func || func.isExternal())
      emitError(module.getLoc())
          << "no function @" << name << " with a body to report on";
    return func && !func.isExternal() ? func : func::FuncOp();
  }
  if (auto loss = module.lookupSymbol<func::FuncOp>("loss"))
    if (!loss.isExternal())
      return loss;
  SmallVector<func::FuncOp> candidates;
  for (auto func : module.getOps<func::FuncOp>())
    if (func.isPublic() && !func.isExternal())
      candidates.push_back(func);
  if (candidates.size() == 1)
    return candidates.front();
  emitError(module.getLoc())
      << "no @loss function and " << candidates.size()
      << " public functions; name the function to report on";
  return {};
}

/// The functions `entry` calls, directly or not, entry first, each once.
/// Iterative: call chains may be deep.
static SmallVector<func::FuncOp>
reachableFunctions(func::FuncOp entry, SymbolTableCollection &symbols) {
  SmallVector<func::FuncOp> order = {entry};
  DenseSet<Operation *> seen = {entry};
  for (size_t next = 0; next < order.size(); ++next)
    order[next].walk([&](func::CallOp call) {
      auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (callee && seen.insert(callee).second)
        order.push_back(callee);
    });
  return order;
}

/// Collectives make a program partitioned; shardings without them, global.
static ProgramLayout detectLayout(func::FuncOp entry,
                                  SymbolTableCollection &symbols) {
  bool sharded = false;
  for (unsigned i = 0, e = entry.getNumArguments(); i < e; ++i)
    sharded |=
        static_cast<bool>(entry.getArgAttr(i, SDDialect::kShardingAttrName));
  for (func::FuncOp func : reachableFunctions(entry, symbols)) {
    WalkResult result = func.walk([&](Operation *op) {
      if (auto cost = dyn_cast<CostOpInterface>(op))
        if (cost.getCommunication(symbols))
          return WalkResult::interrupt();
      sharded |= op->hasAttr(SDDialect::kShardingAttrName);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return ProgramLayout::Partitioned;
  }
  return sharded ? ProgramLayout::Global : ProgramLayout::Unsharded;
}

//===----------------------------------------------------------------------===//
// The walk
//===----------------------------------------------------------------------===//

namespace {
/// The cost of one function's body, calls included.
struct FunctionCost {
  int64_t flops = 0;
  int64_t recomputeFlops = 0;
  int64_t bytesAccessed = 0;
  int64_t matmulFlopsF32 = 0;
  int64_t matmulFlopsF32Small = 0;
  int64_t matmulFlopsF32Medium = 0;
  int64_t attentionFlopsF32 = 0;
  int64_t matmulFlopsF32TransposedLhs = 0;
  int64_t matmulFlopsBf16 = 0;
  int64_t matmulBytes = 0;
  int64_t otherBytes = 0;
  int64_t otherMemoryBytes = 0;
  int64_t peakBytes = 0;
  /// Of peakBytes, the gradient sums across microbatches alive there.
  int64_t peakGradientSumBytes = 0;
  int64_t peakHostBytes = 0;
  int64_t hostTransferBytes = 0;
  std::string peakOp;
  int64_t numValues = 0;
  int64_t numValuesWithoutSharding = 0;
  int64_t numOpsWithoutSharding = 0;
  int64_t numReshards = 0;
  /// Keyed by (kind, axes joined by ","): sorted, deterministic.
  std::map<std::pair<std::string, std::string>, CollectiveSummary> collectives;
  std::map<std::string, int64_t> calls;
  /// The live ranges with their middle blocks' chains, for a sample costed
  /// whose middle blocks are all kept (CostAnalysis::recordLiveness).
  std::optional<SampleLiveness> liveness;
  /// All_gathers of this function's arguments, by argument number: how
  /// many and the bytes each device sends (calls included).
  std::map<unsigned, std::pair<int64_t, int64_t>> argumentGathers;

  /// Adds a callee's cost for one call.
  void addCall(StringRef callee, const FunctionCost &other) {
    flops += other.flops;
    recomputeFlops += other.recomputeFlops;
    hostTransferBytes += other.hostTransferBytes;
    bytesAccessed += other.bytesAccessed;
    matmulFlopsF32 += other.matmulFlopsF32;
    matmulFlopsF32Small += other.matmulFlopsF32Small;
    matmulFlopsF32Medium += other.matmulFlopsF32Medium;
    attentionFlopsF32 += other.attentionFlopsF32;
    matmulFlopsF32TransposedLhs += other.matmulFlopsF32TransposedLhs;
    matmulFlopsBf16 += other.matmulFlopsBf16;
    matmulBytes += other.matmulBytes;
    otherBytes += other.otherBytes;
    otherMemoryBytes += other.otherMemoryBytes;
    numValues += other.numValues;
    numValuesWithoutSharding += other.numValuesWithoutSharding;
    numOpsWithoutSharding += other.numOpsWithoutSharding;
    numReshards += other.numReshards;
    for (const auto &[key, summary] : other.collectives) {
      CollectiveSummary &mine = collectives[key];
      if (mine.count == 0)
        mine = summary;
      else {
        mine.count += summary.count;
        mine.asyncCount += summary.asyncCount;
        mine.tensorBytes += summary.tensorBytes;
        mine.bytesPerDevice += summary.bytesPerDevice;
      }
    }
    ++calls[callee.str()];
    for (const auto &[name, count] : other.calls)
      calls[name] += count;
  }
};

class CostAnalysis {
public:
  /// With `middle`: costs a sample program without the middle blocks of
  /// every chain but `keep` (-1: of every chain).
  CostAnalysis(ProgramLayout layout, MeshAttr mesh,
               const MiddleBlocks *middle = nullptr, int64_t keep = -1)
      : layout(layout), mesh(mesh), middle(middle), keep(keep) {}

  /// Whether the analyzed function's live ranges are recorded with their
  /// middle blocks' chains (FunctionCost::liveness): for a sample whose
  /// middle blocks are all kept.
  bool recordLiveness = false;

  /// The cost of `func`, computed once.
  FailureOr<const FunctionCost *> analyze(func::FuncOp func);

  /// Bytes of `value` on one device; `fromSharding` tells whether its type
  /// or a sharding decided them (false: a global value without a sharding,
  /// counted whole).
  int64_t valueBytes(Value value, bool *fromSharding = nullptr);

  SymbolTableCollection symbols;

  /// `keep` for a sample costed whole, every middle block kept, for its
  /// live ranges alone, recorded with their chains (FunctionCost::liveness;
  /// the ops' own costs are not counted).
  static constexpr int64_t kEveryChain = -2;

  /// The chain of the middle block `op` is in, if the costs leave it out;
  /// -1 otherwise.
  int64_t leftOut(Operation *op) const {
    if (!middle || keep == kEveryChain)
      return -1;
    auto found = middle->ops.find(op);
    return found == middle->ops.end() || found->second == keep ? -1
                                                               : found->second;
  }
  /// Whether the costs leave argument `index` out.
  bool leavesOutArgument(unsigned index) const {
    return middle && keep != kEveryChain && middle->arguments[index] >= 0 &&
           middle->arguments[index] != keep;
  }

private:
  /// Pairs the values of a left-out middle block that kept ops read with
  /// the values only it reads (the block before it: its output, the
  /// backward's cotangent into it), per chain and size in program order:
  /// without it, the next block reads the second in place of the first
  /// (see computeSampleReports).
  void pairLeftOut(Block &body);
  /// The sample's live ranges (`device` and `host`, indexed through
  /// `rangeOf`) over the positions of `ops`, each marked with the middle
  /// block that made its value (FunctionCost::liveness).
  SampleLiveness
  sampleLiveness(ArrayRef<Operation *> ops, ArrayRef<LiveRange> device,
                 ArrayRef<LiveRange> host, ArrayRef<int64_t> extra,
                 const DenseSet<size_t> &gradientSums,
                 const DenseMap<Value, std::pair<bool, size_t>> &rangeOf) const;

  ShardingAttr shardingOf(Value value);
  /// Devices sharing the work of one block: product of the axes' sizes.
  int64_t axesProduct(Operation *anchor, ShardingAttr sharding,
                      ArrayRef<StringAttr> axes);
  LogicalResult costOp(Operation *op, FunctionCost &cost);
  /// Of the `bytes` `op` accesses, those that touch memory.
  int64_t memoryBytes(CostOpInterface op, int64_t bytes);
  void addCollective(Operation *op, const CommunicationInfo &info,
                     FunctionCost &cost);

  ProgramLayout layout;
  MeshAttr mesh;
  const MiddleBlocks *middle;
  int64_t keep;
  /// pairLeftOut's pairs, both ways.
  DenseMap<Value, Value> standIn, standsFor;
  DenseMap<Operation *, std::unique_ptr<FunctionCost>> costs;
  DenseSet<Operation *> inProgress;
};
} // namespace

ShardingAttr CostAnalysis::shardingOf(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    return func ? func.getArgAttrOfType<ShardingAttr>(
                      arg.getArgNumber(), SDDialect::kShardingAttrName)
                : ShardingAttr();
  }
  Operation *op = value.getDefiningOp();
  auto perValue =
      op->getAttrOfType<ShardingPerValueAttr>(SDDialect::kShardingAttrName);
  unsigned index = cast<OpResult>(value).getResultNumber();
  if (!perValue || perValue.getShardings().size() <= index)
    return {};
  return perValue.getShardings()[index];
}

int64_t CostAnalysis::axesProduct(Operation *anchor, ShardingAttr sharding,
                                  ArrayRef<StringAttr> axes) {
  auto meshOp =
      symbols.lookupNearestSymbolFrom<MeshOp>(anchor, sharding.getMeshName());
  int64_t product = 1;
  for (StringAttr name : axes)
    if (MeshAxisAttr axis =
            meshOp ? meshOp.getMesh().getAxis(name.getValue()) : MeshAxisAttr())
      product *= axis.getSize();
  return product;
}

int64_t CostAnalysis::valueBytes(Value value, bool *fromSharding) {
  auto type = cast<ShapedType>(value.getType());
  ShardingAttr sharding =
      layout == ProgramLayout::Global ? shardingOf(value) : ShardingAttr();
  if (fromSharding)
    *fromSharding = layout != ProgramLayout::Global || sharding;
  if (!sharding || sharding.getRank() != type.getRank())
    return getTensorBytes(type);
  Operation *anchor = value.getParentBlock()->getParentOp();
  int64_t elements = 1;
  for (auto [size, dim] :
       llvm::zip(type.getShape(), sharding.getDimShardings())) {
    int64_t parts = axesProduct(anchor, sharding, dim.getAxes());
    elements *= (size + parts - 1) / parts;
  }
  return elements * getElementBytes(type);
}

void CostAnalysis::addCollective(Operation *op, const CommunicationInfo &info,
                                 FunctionCost &cost) {
  // Axes in mesh order, so that {"fsdp", "data"} and {"data", "fsdp"} (one
  // group) aggregate together.
  std::vector<std::string> axes;
  for (StringRef axis : info.axes)
    axes.push_back(axis.str());
  auto rank = [&](const std::string &name) -> size_t {
    if (mesh)
      for (auto [index, axis] : llvm::enumerate(mesh.getAxes()))
        if (axis.getName().getValue() == name)
          return index;
    return SIZE_MAX;
  };
  std::stable_sort(axes.begin(), axes.end(),
                   [&](const std::string &a, const std::string &b) {
                     return rank(a) < rank(b);
                   });
  // What a start issues counts under its collective's name.
  std::string kind = op->getName().stripDialect().str();
  bool isAsync = StringRef(kind).ends_with("_start");
  if (isAsync)
    kind.resize(kind.size() - strlen("_start"));
  // A spatially sharded convolution's neighbour exchanges (sd-partition's
  // halo permutes) are priced apart from the other permutes.
  if (op->hasAttr(SDDialect::kHaloAttrName))
    kind = "halo_exchange";
  CollectiveSummary &summary = cost.collectives[{kind, llvm::join(axes, ",")}];
  if (summary.count == 0) {
    summary.kind = kind;
    summary.axes = axes;
    summary.groupSize = info.groupSize;
  }
  ++summary.count;
  summary.asyncCount += isAsync ? 1 : 0;
  summary.tensorBytes += info.tensorBytes;
  summary.bytesPerDevice +=
      getRingBytesPerDevice(info.pattern, info.tensorBytes, info.groupSize);
}

/// `sd.dot_general "query_proj"`: the op and its sd.name, for messages.
static std::string describeOp(Operation *op) {
  std::string text = op->getName().getStringRef().str();
  if (auto name = op->getAttrOfType<StringAttr>(SDDialect::kNameAttrName))
    text += " \"" + name.getValue().str() + "\"";
  return text;
}

/// The number of the function argument `value` is a view of: the argument
/// itself, or reached through views (CostOpInterface::getViewSource;
/// iterative).
static std::optional<unsigned> tracedArgument(Value value) {
  while (Operation *op = value.getDefiningOp()) {
    auto cost = dyn_cast<CostOpInterface>(op);
    value = cost ? cost.getViewSource() : Value();
    if (!value)
      return std::nullopt;
  }
  auto arg = cast<BlockArgument>(value);
  if (!isa<func::FuncOp>(arg.getOwner()->getParentOp()))
    return std::nullopt;
  return arg.getArgNumber();
}

static LogicalResult checkStaticTypes(Operation *op) {
  for (Type type :
       llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes())) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasStaticShape())
      return op->emitOpError("cannot be costed: type ")
             << type
             << " is not a static shape (run sd-specialize-batch first)";
  }
  return success();
}

/// Whether `op` is fused into the ops that read it (CostOpInterface).
static bool isFusedOp(Operation *op) {
  auto cost = dyn_cast_or_null<CostOpInterface>(op);
  return cost && cost.isFusible();
}

/// Of the `bytes` an op accesses (its operands and results, scaled as the
/// layout has it), those that touch memory once fusible ops sit in their
/// readers' loops: all of them for an op that is not fusible; for one that
/// is, the operands that a non-fusible op or an argument provides and the
/// results that a non-fusible op or the terminator reads.
///
/// Without a left-out middle block, a value it made is the one in its place
/// (standIn), a value only it read is read as its stand-in is, and the ops
/// it has do not read.
int64_t CostAnalysis::memoryBytes(CostOpInterface op, int64_t bytes) {
  if (!op.isFusible())
    return bytes;
  int64_t all = 0, touched = 0;
  for (Value operand : op->getOperands()) {
    int64_t size = getTensorBytes(operand.getType());
    all += size;
    if (auto it = standIn.find(operand); it != standIn.end())
      operand = it->second;
    if (!isFusedOp(operand.getDefiningOp()))
      touched += size;
  }
  for (Value result : op->getResults()) {
    int64_t size = getTensorBytes(result.getType());
    all += size;
    Value readAs = result;
    if (auto it = standsFor.find(result); it != standsFor.end())
      readAs = it->second;
    if (llvm::any_of(readAs.getUsers(), [&](Operation *user) {
          return leftOut(user) < 0 && !isFusedOp(user);
        }))
      touched += size;
  }
  return all == 0 ? 0 : int64_t(double(bytes) * double(touched) / double(all));
}

/// How many matrix products `op` runs, each its own GEMM in the runtime:
/// a dot_general's batch, an untiled attention's batch × heads (its scores
/// and values products per pair); 1 for the rest. A size class is that of
/// one product: 24 heads' 256 × 256 × 64 score products are 24 small
/// products, not one medium.
static int64_t productsIn(Operation *op) {
  int64_t count = 1;
  if (auto dot = dyn_cast<DotGeneralOp>(op)) {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(dot.getLhs().getType()).getShape();
    for (int64_t dim : dot.getLhsBatch())
      count *= shape[dim];
  } else if (auto attention = dyn_cast<AttentionOp>(op)) {
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(attention.getQuery().getType()).getShape();
    count = shape[0] * shape[1];
  }
  return std::max<int64_t>(count, 1);
}

/// How many blocks `sharding` splits a global op's work into: the product
/// of its sharded dimensions' and unreduced axes' sizes (`product` of a
/// list of axes).
static int64_t blocksOf(ShardingAttr sharding,
                        function_ref<int64_t(ArrayRef<StringAttr>)> product) {
  int64_t blocks = product(sharding.getUnreducedAxes());
  for (DimShardingAttr dim : sharding.getDimShardings())
    blocks *= product(dim.getAxes());
  return blocks;
}

/// Whether the step-time model rates `op` as a matrix product (at a FLOP
/// rate) rather than by its bytes.
static bool isProductOp(Operation *op) {
  return isa<DotGeneralOp, Conv2DOp, Conv2DInputGradOp, Conv2DFilterGradOp,
             AttentionOp, FlashAttentionOp, FlashAttentionDqOp,
             FlashAttentionDkvOp>(op);
}

/// Whether product `op` computes in bf16: its operands' type, whatever its
/// result's (bf16 operands run on the bf16 GEMMs into an f32 result too: the
/// weight gradients of a bf16 step, accumulated in f32).
static bool computesInBF16(Operation *op) {
  return cast<ShapedType>(op->getOperand(0).getType())
      .getElementType()
      .isBF16();
}

LogicalResult CostAnalysis::costOp(Operation *op, FunctionCost &cost) {
  auto costOp = dyn_cast<CostOpInterface>(op);
  if (!costOp)
    return op->emitOpError("has no cost model (CostOpInterface)");
  if (failed(checkStaticTypes(op)))
    return failure();
  int64_t flops = costOp.getFlops();
  int64_t recomputeFlops = costOp.getRecomputeFlops();
  int64_t bytes = costOp.getBytesAccessed();
  // A global program's op computes one block per device: the result's
  // sharded dimensions and unreduced (partial-sum) axes split its work.
  if (layout == ProgramLayout::Global && op->getNumResults() > 0) {
    if (ShardingAttr sharding = shardingOf(op->getResult(0))) {
      int64_t parts = blocksOf(sharding, [&](ArrayRef<StringAttr> axes) {
        return axesProduct(op, sharding, axes);
      });
      flops /= parts;
      recomputeFlops /= parts;
      bytes /= parts;
    } else if (flops > 0) {
      ++cost.numOpsWithoutSharding;
    }
  }
  cost.flops += flops;
  cost.recomputeFlops +=
      op->hasAttr(SDDialect::kRecomputeAttrName) ? flops : recomputeFlops;
  cost.bytesAccessed += bytes;
  if (isProductOp(op)) {
    if (computesInBF16(op)) {
      cost.matmulFlopsBf16 += flops;
    } else if (isa<FlashAttentionOp, FlashAttentionDqOp, FlashAttentionDkvOp>(
                   op)) {
      cost.matmulFlopsF32 += flops;
      cost.attentionFlopsF32 += flops;
    } else if (auto dot = dyn_cast<DotGeneralOp>(op);
               dot && dot.getGemmOperands().isTransposedLhsOnly()) {
      cost.matmulFlopsF32 += flops;
      cost.matmulFlopsF32TransposedLhs += flops;
    } else {
      cost.matmulFlopsF32 += flops;
      switch (::sd::productSize(double(flops) / double(productsIn(op)))) {
      case ::sd::ProductSize::Small:
        cost.matmulFlopsF32Small += flops;
        break;
      case ::sd::ProductSize::Medium:
        cost.matmulFlopsF32Medium += flops;
        break;
      case ::sd::ProductSize::Large:
        break;
      }
    }
    cost.matmulBytes += bytes;
  } else {
    cost.otherBytes += bytes;
    cost.otherMemoryBytes += memoryBytes(costOp, bytes);
  }
  // Communication a global program still owes: sd-partition turns each
  // reshard into collectives (not costed here).
  cost.numReshards += isa<ReshardOp>(op) ? 1 : 0;
  if (std::optional<CommunicationInfo> info =
          costOp.getCommunication(symbols)) {
    addCollective(op, *info, cost);
    if (info->pattern == CommunicationPattern::AllGather)
      if (std::optional<unsigned> arg = tracedArgument(op->getOperand(0))) {
        auto &[count, bytes] = cost.argumentGathers[*arg];
        ++count;
        bytes += getRingBytesPerDevice(info->pattern, info->tensorBytes,
                                       info->groupSize);
      }
  }
  return success();
}

FailureOr<const FunctionCost *> CostAnalysis::analyze(func::FuncOp func) {
  if (auto it = costs.find(func); it != costs.end())
    return it->second.get();
  // Errors on functions name them rather than dump them.
  auto fail = [&]() {
    return emitError(func.getLoc())
           << "function @" << func.getSymName() << " cannot be costed: ";
  };
  if (func.isExternal())
    return fail() << "it has no body";
  if (!func.getBody().hasOneBlock())
    return fail() << "its body has more than one block";
  if (!inProgress.insert(func).second)
    return fail() << "it calls itself";

  auto cost = std::make_unique<FunctionCost>();
  Block &body = func.front();
  // Liveness: one position per op; each result's range grows to its last
  // use. Arguments are not activations.
  std::vector<LiveRange> ranges, hostRanges;
  std::vector<int64_t> extra;
  std::vector<Operation *> ops;
  std::vector<std::string> callPeakOps;
  // Device-resident values index `ranges`, host-resident ones (offloaded)
  // `hostRanges`.
  DenseMap<Value, std::pair<bool, size_t>> rangeOf;
  // Device ranges that hold a parameter's gradient summed across
  // microbatches: the results and first operands of the adds that sum
  // them.
  DenseSet<size_t> gradientSums;
  // The value of each device range; the last position reading each value
  // of a left-out block (the return aside).
  DenseMap<Value, int64_t> lastUseOfLeftOut;
  if (middle)
    pairLeftOut(body);
  for (Operation &op : body) {
    if (leftOut(&op) >= 0)
      continue;
    int64_t position = static_cast<int64_t>(ops.size());
    ops.push_back(&op);
    extra.push_back(0);
    callPeakOps.emplace_back();
    bool operandOnHost = false;
    for (Value operand : op.getOperands()) {
      if (auto it = rangeOf.find(operand); it != rangeOf.end()) {
        operandOnHost |= it->second.first;
        (it->second.first ? hostRanges : ranges)[it->second.second].end =
            position;
      } else if (middle && !op.hasTrait<OpTrait::IsTerminator>()) {
        if (Operation *def = operand.getDefiningOp(); def && leftOut(def) >= 0)
          lastUseOfLeftOut[operand] = position;
      }
    }
    auto costOpIface = dyn_cast<CostOpInterface>(op);
    bool onHost =
        costOpIface && costOpIface.getResultMemory() == MemorySpace::Host;
    // An op whose results live in the other memory than its operands moves
    // their bytes between device and host (sd.offload, sd.reload).
    bool moves = op.getNumOperands() > 0 && onHost != operandOnHost;

    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (!callee)
        return call.emitOpError("calls ")
               << call.getCalleeAttr() << ", which is not a function";
      FailureOr<const FunctionCost *> calleeCost = analyze(callee);
      if (failed(calleeCost))
        return failure();
      cost->addCall(callee.getSymName(), **calleeCost);
      // The callee's gathers of its arguments gather the call's operands.
      for (const auto &[index, gathers] : (*calleeCost)->argumentGathers)
        if (std::optional<unsigned> arg =
                tracedArgument(call.getOperand(index))) {
          auto &[count, bytes] = cost->argumentGathers[*arg];
          count += gathers.first;
          bytes += gathers.second;
        }
      // While the callee runs its own activations are alive; its results
      // are among them, so they are not counted twice.
      int64_t resultBytes = 0;
      for (Value result : call.getResults())
        resultBytes += valueBytes(result);
      extra.back() =
          std::max<int64_t>(0, (*calleeCost)->peakBytes - resultBytes);
      callPeakOps.back() = (*calleeCost)->peakOp;
    } else if (!op.hasTrait<OpTrait::IsTerminator>()) {
      // The whole sample is costed for its liveness alone.
      if (keep != kEveryChain && failed(costOp(&op, *cost)))
        return failure();
      // The scratch its kernel borrows while it runs.
      if (auto costed = dyn_cast<CostOpInterface>(&op))
        extra.back() = costed.getWorkspaceBytes();
    }

    // The sum so far is the add's first operand; the second, the
    // microbatch's fresh gradient, counts as the large batch's does.
    bool sumsGradients = op.hasAttr(SDDialect::kGradientSumAttrName);
    if (sumsGradients && op.getNumOperands() > 0)
      if (auto it = rangeOf.find(op.getOperand(0));
          it != rangeOf.end() && !it->second.first)
        gradientSums.insert(it->second.second);
    for (Value result : op.getResults()) {
      bool fromSharding = true;
      int64_t bytes = valueBytes(result, &fromSharding);
      std::vector<LiveRange> &into = onHost ? hostRanges : ranges;
      rangeOf[result] = {onHost, into.size()};
      if (sumsGradients && !onHost)
        gradientSums.insert(into.size());
      into.push_back({bytes, position, position});
      cost->hostTransferBytes += moves ? bytes : 0;
      ++cost->numValues;
      cost->numValuesWithoutSharding += fromSharding ? 0 : 1;
    }
  }

  // A result written into a donated argument's buffer (sd.aliases) takes
  // no memory of its own: the argument is counted already.
  if (Operation *terminator = body.empty() ? nullptr : &body.back();
      terminator && terminator->hasTrait<OpTrait::IsTerminator>())
    for (auto [index, returned] : llvm::enumerate(terminator->getOperands()))
      if (func.getResultAttr(index, SDDialect::kAliasesAttrName))
        if (auto it = rangeOf.find(returned);
            it != rangeOf.end() && !it->second.first)
          ranges[it->second.second].bytes = 0;
  // A value only a left-out block read lives as long as its stand-in.
  for (auto [value, readAs] : standsFor)
    if (auto it = rangeOf.find(value); it != rangeOf.end() && !it->second.first)
      if (auto last = lastUseOfLeftOut.find(readAs);
          last != lastUseOfLeftOut.end())
        ranges[it->second.second].end =
            std::max(ranges[it->second.second].end, last->second);
  if (middle && recordLiveness)
    cost->liveness =
        sampleLiveness(ops, ranges, hostRanges, extra, gradientSums, rangeOf);
  LivePeak peak = computeLivePeak(ranges, extra, ops.size());
  cost->peakBytes = peak.bytes;
  for (size_t index : gradientSums)
    if (ranges[index].start <= peak.position &&
        peak.position <= ranges[index].end)
      cost->peakGradientSumBytes += ranges[index].bytes;
  cost->peakHostBytes =
      computeLivePeak(hostRanges, /*extra=*/{}, ops.size()).bytes;
  if (peak.position >= 0) {
    cost->peakOp = describeOp(ops[peak.position]);
    if (auto call = dyn_cast<func::CallOp>(ops[peak.position]))
      cost->peakOp = "func.call @" + call.getCallee().str() +
                     (callPeakOps[peak.position].empty()
                          ? ""
                          : " > " + callPeakOps[peak.position]);
  }
  inProgress.erase(func);
  return (costs[func] = std::move(cost)).get();
}

void CostAnalysis::pairLeftOut(Block &body) {
  using Key = std::pair<int64_t, int64_t>;
  std::map<Key, std::vector<Value>> onlyRead, readOutside;
  for (Operation &op : body) {
    int64_t chain = leftOut(&op);
    for (Value result : op.getResults()) {
      if (!isa<ShapedType>(result.getType()))
        continue;
      if (chain >= 0) {
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              Operation *top = body.findAncestorOpInBlock(*user);
              return top && !top->hasTrait<OpTrait::IsTerminator>() &&
                     leftOut(top) < 0;
            }))
          readOutside[{chain, valueBytes(result)}].push_back(result);
        continue;
      }
      int64_t by = -1;
      bool only = !result.use_empty();
      for (Operation *user : result.getUsers()) {
        Operation *top = body.findAncestorOpInBlock(*user);
        int64_t of = top ? leftOut(top) : -1;
        if (of < 0 || (by >= 0 && by != of)) {
          only = false;
          break;
        }
        by = of;
      }
      if (only)
        onlyRead[{by, valueBytes(result)}].push_back(result);
    }
  }
  for (auto &[key, values] : onlyRead) {
    auto found = readOutside.find(key);
    if (found == readOutside.end())
      continue;
    for (auto [value, readAs] : llvm::zip(values, found->second)) {
      standsFor[value] = readAs;
      standIn[readAs] = value;
    }
  }
}

SampleLiveness CostAnalysis::sampleLiveness(
    ArrayRef<Operation *> ops, ArrayRef<LiveRange> device,
    ArrayRef<LiveRange> host, ArrayRef<int64_t> extra,
    const DenseSet<size_t> &gradientSums,
    const DenseMap<Value, std::pair<bool, size_t>> &rangeOf) const {
  SampleLiveness liveness;
  int64_t numPositions = static_cast<int64_t>(ops.size());
  liveness.numPositions = numPositions;
  liveness.extra.assign(extra.begin(), extra.end());
  // An op runs inside chain c's middle block when it is one of its ops,
  // or when the nearest ops marked with a block on both sides of it are
  // (an unmarked op the block's ops surround: a shared constant, a
  // collective CSE merged).
  constexpr int64_t kUnmarked = -1, kOtherBlock = -2;
  std::vector<int64_t> marks(numPositions, kUnmarked);
  for (auto [position, op] : llvm::enumerate(ops)) {
    if (auto found = middle->ops.find(op); found != middle->ops.end())
      marks[position] = found->second;
    else if (sampleBlockOf(op->getLoc()))
      marks[position] = kOtherBlock;
  }
  std::vector<int64_t> before(numPositions, kUnmarked);
  for (int64_t p = 0, last = kUnmarked; p < numPositions; ++p)
    before[p] = last = marks[p] != kUnmarked ? marks[p] : last;
  liveness.positionChain.assign(numPositions, -1);
  for (int64_t p = numPositions - 1, next = kUnmarked; p >= 0; --p) {
    next = marks[p] != kUnmarked ? marks[p] : next;
    if (before[p] >= 0 && before[p] == next)
      liveness.positionChain[p] = next;
  }
  liveness.device.assign(device.begin(), device.end());
  liveness.host.assign(host.begin(), host.end());
  liveness.deviceChain.assign(device.size(), -1);
  liveness.hostChain.assign(host.size(), -1);
  liveness.gradientSum.assign(device.size(), false);
  for (size_t index : gradientSums)
    liveness.gradientSum[index] = true;
  // A middle block's value goes with each copy of it, but for the chain's
  // links: the backward's cotangent into the block before it, which each
  // copy hands to the next at once, and its output, which each copy holds
  // where the block before it holds the middle block's input (the links
  // into it: what it reads of that block's).
  auto readBy = [](Value value, int64_t chain, auto position) {
    return llvm::any_of(value.getUsers(), [&](Operation *user) {
      std::optional<SampleBlock> block = sampleBlockOf(user->getLoc());
      return block && block->chain == chain && position(block->position);
    });
  };
  liveness.deviceLink.assign(device.size(), false);
  liveness.deviceInLink.assign(device.size(), -1);
  for (auto [value, range] : rangeOf) {
    auto [onHost, index] = range;
    Operation *def = value.getDefiningOp();
    if (!def)
      continue;
    if (auto found = middle->ops.find(def); found != middle->ops.end()) {
      int64_t chain = found->second;
      if (readBy(value, chain,
                 [](int64_t at) { return at < kMiddleBlockPosition; }))
        continue;
      (onHost ? liveness.hostChain : liveness.deviceChain)[index] = chain;
      if (!onHost && readBy(value, chain, [](int64_t at) {
            return at > kMiddleBlockPosition;
          }))
        liveness.deviceLink[index] = true;
      continue;
    }
    std::optional<SampleBlock> block = sampleBlockOf(def->getLoc());
    if (onHost || !block || block->position >= kMiddleBlockPosition)
      continue;
    for (Operation *user : value.getUsers())
      if (auto found = middle->ops.find(user);
          found != middle->ops.end() && found->second == block->chain)
        liveness.deviceInLink[index] = block->chain;
  }
  return liveness;
}

//===----------------------------------------------------------------------===//
// The report
//===----------------------------------------------------------------------===//

/// Each parameter's all_gathers against its sharding: the local sharding
/// of a partitioned program's argument, else its sharding.
static ParameterGathers summarizeParameterGathers(
    func::FuncOp func, ProgramLayout layout, MeshAttr mesh,
    const std::map<unsigned, std::pair<int64_t, int64_t>> &gathers,
    const CostAnalysis &analysis) {
  ParameterGathers result;
  std::optional<int64_t> groupSize;
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (analysis.leavesOutArgument(index))
      continue;
    auto param =
        func.getArgAttrOfType<ParamAttr>(index, SDDialect::kRoleAttrName);
    if (!param)
      continue;
    ++result.numParameters;
    auto sharding = func.getArgAttrOfType<ShardingAttr>(
        index, SDDialect::kLocalShardingAttrName);
    if (!sharding)
      sharding = func.getArgAttrOfType<ShardingAttr>(
          index, SDDialect::kShardingAttrName);
    auto type = cast<ShapedType>(arg.getType());
    // Devices one block is split over, and the global bytes (a partitioned
    // program's type is the local block).
    int64_t parts = 1;
    int64_t bytes = getTensorBytes(type);
    if (sharding && mesh)
      for (DimShardingAttr dim : sharding.getDimShardings())
        for (StringAttr name : dim.getAxes())
          if (MeshAxisAttr axis = mesh.getAxis(name.getValue())) {
            parts *= axis.getSize();
            bytes *= layout == ProgramLayout::Partitioned ? axis.getSize() : 1;
          }
    if (parts == 1)
      continue;
    ++result.numSharded;
    result.shardedBytes += bytes;
    result.zeroBoundBytes +=
        getRingBytesPerDevice(CommunicationPattern::AllGather, bytes, parts);
    groupSize = !groupSize || *groupSize == parts ? parts : 0;
    // Before partitioning there are no collectives to count.
    if (layout != ProgramLayout::Partitioned)
      continue;
    auto it = gathers.find(index);
    int64_t count = it == gathers.end() ? 0 : it->second.first;
    result.numGathers += count;
    result.gatherBytes += it == gathers.end() ? 0 : it->second.second;
    result.numGatheredOnce += count == 1 ? 1 : 0;
    result.numGatheredMoreThanOnce += count > 1 ? 1 : 0;
    result.numNeverGathered += count == 0 ? 1 : 0;
    if (count != 1)
      result.exceptions.push_back(
          {param.getName().getValue().str(), count, bytes});
  }
  result.groupSize = groupSize.value_or(0);
  return result;
}

/// computeCostReport's, of a sample program without the middle blocks
/// of every chain but `keep` (-1: of every chain) where `middle` is given.
static FailureOr<CostReport> costReport(func::FuncOp func, LayoutChoice choice,
                                        const MiddleBlocks *middle,
                                        int64_t keep,
                                        SampleLiveness *liveness = nullptr) {
  CostReport report;
  report.function = func.getSymName().str();
  auto module = func->getParentOfType<ModuleOp>();
  MeshAttr mesh;
  if (module)
    for (MeshOp meshOp : module.getOps<MeshOp>()) {
      mesh = meshOp.getMesh();
      report.meshName = meshOp.getSymName().str();
      break;
    }
  if (mesh) {
    ::sd::MeshSpec spec = toMeshSpec(mesh);
    report.meshSpec = spec.toString();
    report.numDevices = spec.numDevices();
    report.mesh = spec;
  }

  SymbolTableCollection detection;
  ProgramLayout layout = detectLayout(func, detection);
  if (choice == LayoutChoice::Local && layout == ProgramLayout::Global)
    layout = ProgramLayout::Partitioned;
  if (choice == LayoutChoice::Global)
    layout = ProgramLayout::Global;
  report.layout = layout;

  CostAnalysis analysis(layout, mesh, middle, keep);
  analysis.recordLiveness = liveness != nullptr;
  for (BlockArgument arg : func.getArguments()) {
    if (analysis.leavesOutArgument(arg.getArgNumber()))
      continue;
    auto type = dyn_cast<ShapedType>(arg.getType());
    if (!type || !type.hasStaticShape())
      return emitError(func.getLoc())
             << "function @" << func.getSymName()
             << " cannot be costed: argument #" << arg.getArgNumber()
             << " has type " << arg.getType()
             << ", not a static shape (run sd-specialize-batch first)";
    int64_t bytes = analysis.valueBytes(arg);
    if (auto global = func.getArgAttrOfType<DenseI64ArrayAttr>(
            arg.getArgNumber(), SDDialect::kGlobalShapeAttrName)) {
      // The block's bytes less the tensor's share of the devices that split
      // it.
      auto sharding = func.getArgAttrOfType<ShardingAttr>(
          arg.getArgNumber(), SDDialect::kLocalShardingAttrName);
      double devices = 1, elements = 1;
      for (int64_t size : global.asArrayRef())
        elements *= double(size);
      if (sharding && mesh)
        for (DimShardingAttr dim : sharding.getDimShardings())
          for (StringAttr name : dim.getAxes())
            if (MeshAxisAttr axis = mesh.getAxis(name.getValue()))
              devices *= double(axis.getSize());
      ++report.numPaddedTensors;
      report.paddingBytes +=
          bytes - int64_t(std::llround(elements / devices *
                                       double(getElementBytes(type))));
    }
    if (func.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                         SDDialect::kRoleAttrName)) {
      ++report.numParameters;
      report.parameterBytes += bytes;
      report.parameterElements += bytes / getElementBytes(type);
      if (func.getArgAttr(arg.getArgNumber(), SDDialect::kFrozenAttrName)) {
        ++report.numFrozen;
        report.frozenElements += bytes / getElementBytes(type);
      }
    } else if (func.getArgAttrOfType<OptimizerStateAttr>(
                   arg.getArgNumber(), SDDialect::kRoleAttrName)) {
      ++report.numOptimizerStates;
      report.optimizerStateBytes += bytes;
    } else {
      ++report.numInputs;
      report.inputBytes += bytes;
    }
  }

  if (auto padding =
          func->getAttrOfType<DenseI64ArrayAttr>(SDDialect::kPaddingAttrName)) {
    report.paddedElements = padding[0];
    report.computedElements = padding[1];
  }

  FailureOr<const FunctionCost *> cost = analysis.analyze(func);
  if (failed(cost))
    return failure();
  const FunctionCost &body = **cost;
  report.peakActivationBytes = body.peakBytes;
  report.peakGradientSumBytes = body.peakGradientSumBytes;
  report.peakOp = body.peakOp;
  report.numValues = body.numValues;
  report.numValuesWithoutSharding = body.numValuesWithoutSharding;
  report.flops = body.flops;
  report.matmulFlopsF32 = body.matmulFlopsF32;
  report.matmulFlopsF32Small = body.matmulFlopsF32Small;
  report.matmulFlopsF32Medium = body.matmulFlopsF32Medium;
  report.attentionFlopsF32 = body.attentionFlopsF32;
  report.matmulFlopsF32TransposedLhs = body.matmulFlopsF32TransposedLhs;
  report.matmulFlopsBf16 = body.matmulFlopsBf16;
  report.matmulBytes = body.matmulBytes;
  report.otherBytes = body.otherBytes;
  report.otherMemoryBytes = body.otherMemoryBytes;
  report.recomputeFlops = body.recomputeFlops;
  report.peakHostBytes = body.peakHostBytes;
  report.hostTransferBytes = body.hostTransferBytes;
  report.bytesAccessed = body.bytesAccessed;
  report.numOpsWithoutSharding = body.numOpsWithoutSharding;
  report.numReshards = body.numReshards;
  report.calls.assign(body.calls.begin(), body.calls.end());
  for (const auto &[key, summary] : body.collectives) {
    report.collectives.push_back(summary);
    report.collectiveBytesPerDevice += summary.bytesPerDevice;
  }
  report.parameterGathers = summarizeParameterGathers(
      func, layout, mesh, body.argumentGathers, analysis);
  if (liveness && body.liveness)
    *liveness = *body.liveness;
  return report;
}

FailureOr<CostReport> mlir::sd::computeCostReport(func::FuncOp func,
                                                  LayoutChoice choice) {
  return costReport(func, choice, /*middle=*/nullptr, /*keep=*/-1);
}

/// The middle blocks of `func`, a sample of `numChains` chains; an error
/// on `func` where they are not all there.
static FailureOr<MiddleBlocks> middleBlocksOf(func::FuncOp func,
                                              int64_t numChains) {
  MiddleBlocks middle = findMiddleBlocks(func);
  std::vector<bool> seen(numChains, false);
  for (const auto &[op, chain] : middle.ops)
    if (chain >= 0 && chain < numChains)
      seen[chain] = true;
  for (int64_t chain = 0; chain < numChains; ++chain)
    if (!seen[chain])
      return emitError(func.getLoc())
             << "function @" << func.getSymName()
             << " cannot be costed as a sample: no op is marked as the "
                "middle block of chain "
             << chain << " (sd.sample_block)";
  return middle;
}

FailureOr<SampleReports> mlir::sd::computeSampleReports(func::FuncOp func,
                                                        LayoutChoice choice,
                                                        int64_t numChains) {
  FailureOr<MiddleBlocks> middle = middleBlocksOf(func, numChains);
  if (failed(middle))
    return failure();
  SampleReports result;
  FailureOr<CostReport> base = costReport(func, choice, &*middle, -1);
  if (failed(base))
    return failure();
  result.base = std::move(*base);
  // With one chain, its sample keeps every middle block and records the
  // liveness; with more, a pass over the whole sample does.
  for (int64_t chain = 0; chain < numChains; ++chain) {
    FailureOr<CostReport> sample =
        costReport(func, choice, &*middle, chain,
                   numChains == 1 ? &result.liveness : nullptr);
    if (failed(sample))
      return failure();
    result.samples.push_back(std::move(*sample));
  }
  if (numChains > 1 &&
      failed(costReport(func, choice, &*middle, CostAnalysis::kEveryChain,
                        &result.liveness)))
    return failure();
  return result;
}

SampleLiveness::Peaks
SampleLiveness::peaksFor(llvm::ArrayRef<int64_t> copies) const {
  auto isLink = [](const std::vector<bool> *links, size_t range) {
    return links && range < links->size() && (*links)[range];
  };
  // The live bytes of `ranges` at each position with the copies: where an
  // op outside the middle block runs, each copy holds what the middle
  // block holds there; inside it, what it holds next to the block.
  auto withCopies = [&](ArrayRef<LiveRange> ranges, ArrayRef<int64_t> chains,
                        const std::vector<bool> *links,
                        llvm::function_ref<bool(size_t)> keep) {
    std::vector<int64_t> live = liveBytes(ranges, numPositions, keep);
    for (auto [index, count] : llvm::enumerate(copies)) {
      if (count <= 1)
        continue;
      int64_t chain = static_cast<int64_t>(index);
      std::vector<int64_t> middle =
          liveBytes(ranges, numPositions, [&](size_t range) {
            return keep(range) && chains[range] == chain &&
                   !isLink(links, range);
          });
      // Inside the block, each other copy holds what the block holds next
      // to it.
      std::vector<int64_t> held = middle;
      for (int64_t p = 0, last = 0; p < numPositions; ++p) {
        if (positionChain[p] != chain)
          last = middle[p];
        else
          held[p] = last;
      }
      for (int64_t p = numPositions - 1, next = 0; p >= 0; --p) {
        if (positionChain[p] != chain)
          next = middle[p];
        else
          held[p] = std::max(held[p], next);
      }
      // Each copy's output where the block before holds its input.
      if (links) {
        std::vector<int64_t> out =
            liveBytes(ranges, numPositions, [&](size_t range) {
              return keep(range) && chains[range] == chain &&
                     isLink(links, range);
            });
        std::vector<int64_t> in =
            liveBytes(ranges, numPositions, [&](size_t range) {
              return keep(range) && range < deviceInLink.size() &&
                     deviceInLink[range] == chain;
            });
        for (int64_t p = 0; p < numPositions; ++p)
          held[p] += std::min(out[p], in[p]);
      }
      for (int64_t p = 0; p < numPositions; ++p)
        live[p] += (count - 1) * held[p];
    }
    return live;
  };
  auto all = [](size_t) { return true; };
  std::vector<int64_t> onDevice =
      withCopies(device, deviceChain, &deviceLink, all);
  Peaks peaks;
  int64_t at = -1;
  for (int64_t p = 0; p < numPositions; ++p) {
    int64_t bytes =
        onDevice[p] + (p < static_cast<int64_t>(extra.size()) ? extra[p] : 0);
    if (at < 0 || bytes > peaks.activationBytes) {
      peaks.activationBytes = bytes;
      at = p;
    }
  }
  if (at >= 0)
    peaks.gradientSumBytes =
        withCopies(device, deviceChain, &deviceLink,
                   [&](size_t index) { return bool(gradientSum[index]); })[at];
  for (int64_t bytes : withCopies(host, hostChain, nullptr, all))
    peaks.hostBytes = std::max(peaks.hostBytes, bytes);
  return peaks;
}

std::vector<int> mlir::sd::collectiveAxes(const CostReport &report,
                                          const CollectiveSummary &summary) {
  std::vector<int> axes;
  for (const std::string &name : summary.axes)
    for (size_t i = 0; i < report.mesh.axes().size(); ++i)
      if (report.mesh.axes()[i].name == name)
        axes.push_back(static_cast<int>(i));
  return axes;
}

std::vector<AxisCommunication>
mlir::sd::predictCommunication(const CostReport &report,
                               const ::sd::NetworkModel &network) {
  std::vector<AxisCommunication> result;
  for (const CollectiveSummary &summary : report.collectives) {
    std::vector<int> axes = collectiveAxes(report, summary);
    auto it = llvm::find_if(result, [&](const AxisCommunication &entry) {
      return entry.axes == summary.axes;
    });
    if (it == result.end()) {
      AxisCommunication entry;
      entry.axes = summary.axes;
      ::sd::GroupShape group = ::sd::groupShape(report.mesh, axes);
      entry.link = group.link;
      entry.groupSize = group.size;
      result.push_back(std::move(entry));
      it = std::prev(result.end());
    }
    it->count += summary.count;
    it->bytesPerDevice += summary.bytesPerDevice;
    it->predictedSeconds += ::sd::predictCollectiveSeconds(
        report.mesh, axes, summary.kind, summary.count, summary.bytesPerDevice,
        network);
  }
  return result;
}

/// computeShardedProductFlops's walk: `add` takes each product op and its
/// FLOPs on one device.
static LogicalResult
walkShardedProductFlops(func::FuncOp func, const ::sd::MeshSpec &mesh,
                        function_ref<void(Operation *, int64_t, bool)> add) {
  auto parts = [&](ArrayRef<StringAttr> axes) {
    int64_t product = 1;
    for (StringAttr name : axes)
      if (const ::sd::MeshAxis *axis = mesh.findAxis(name.getValue()))
        product *= axis->size();
    return product;
  };
  WalkResult walked = func.walk([&](Operation *op) {
    if (isa<CallOpInterface>(op))
      return WalkResult::interrupt();
    if (!isProductOp(op))
      return WalkResult::advance();
    auto cost = dyn_cast<CostOpInterface>(op);
    bool staticTypes = llvm::all_of(
        llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()),
        [](Type type) {
          auto shaped = dyn_cast<ShapedType>(type);
          return shaped && shaped.hasStaticShape();
        });
    if (!cost || !staticTypes)
      return WalkResult::interrupt();
    // As computeCostReport's global layout splits an op's work: by its
    // result's sharded dimensions and unreduced axes (rounded down, where
    // a padded split rounds each block up).
    int64_t flops = cost.getFlops();
    auto perValue =
        op->getAttrOfType<ShardingPerValueAttr>(SDDialect::kShardingAttrName);
    if (perValue && !perValue.getShardings().empty())
      flops /= blocksOf(perValue.getShardings().front(), parts);
    add(op, flops, computesInBF16(op));
    return WalkResult::advance();
  });
  return failure(walked.wasInterrupted());
}

FailureOr<ProductFlops>
mlir::sd::computeShardedProductFlops(func::FuncOp func,
                                     const ::sd::MeshSpec &mesh) {
  ProductFlops result;
  if (failed(walkShardedProductFlops(
          func, mesh, [&](Operation *, int64_t flops, bool bf16) {
            (bf16 ? result.bf16 : result.f32) += flops;
          })))
    return failure();
  return result;
}

FailureOr<SampleProductFlops> mlir::sd::computeSampleProductFlops(
    func::FuncOp func, const ::sd::MeshSpec &mesh, int64_t numChains) {
  FailureOr<MiddleBlocks> middle = middleBlocksOf(func, numChains);
  if (failed(middle))
    return failure();
  SampleProductFlops result;
  result.middle.assign(numChains, ProductFlops());
  Block &body = func.getBody().front();
  if (failed(walkShardedProductFlops(
          func, mesh, [&](Operation *op, int64_t flops, bool bf16) {
            auto found = middle->ops.find(body.findAncestorOpInBlock(*op));
            ProductFlops &into = found == middle->ops.end()
                                     ? result.base
                                     : result.middle[found->second];
            (bf16 ? into.bf16 : into.f32) += flops;
          })))
    return failure();
  return result;
}
