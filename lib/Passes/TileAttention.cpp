//===- TileAttention.cpp - attention into flash-attention blocks ----------===//
//
// Each sd.attention (whose query is at least min-seq-length long) becomes an
// sd.flash_attention with the block sizes the options give, the open ones
// derived from the op's head_dims and the cache (FlashTiling.h). The
// attention's own attributes (its name, its layer) carry over to the tiled
// op.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/FlashTiling.h"
#include "sd/Passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::sd {
#define GEN_PASS_DEF_TILEATTENTION
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

/// The context parallelism of `kind`, if it spreads sequences.
static std::optional<ContextParallel>
contextParallelOf(::sd::AttentionKind kind) {
  switch (kind) {
  case ::sd::AttentionKind::Ring:
    return ContextParallel::ring;
  case ::sd::AttentionKind::Ulysses:
    return ContextParallel::ulysses;
  case ::sd::AttentionKind::UlyssesRing:
    return ContextParallel::ulysses_ring;
  default:
    return std::nullopt;
  }
}

namespace {
struct TileAttentionPass
    : public mlir::sd::impl::TileAttentionBase<TileAttentionPass> {
  using TileAttentionBase::TileAttentionBase;

  void runOnOperation() override {
    // The options in FlashTiling's field order.
    FlashTiling requested{blockQ,    blockKvCompute, blockKv,
                          blockQDkv, blockKvDkv,     blockKvDkvCompute,
                          blockQDq,  blockKvDq,      useFusedBwdKernel};
    int64_t cache = cacheBytes > 0 ? int64_t(cacheBytes) : hostL2CacheBytes();
    bool hybrid = attention == ::sd::AttentionKind::UlyssesRing;
    if (hybrid && ulyssesShards < 1) {
      emitError(getOperation().getLoc())
          << "attention=ulysses_ring needs ulysses-shards, the devices per "
             "Ulysses group (a positive number; it is "
          << int64_t(ulyssesShards) << ")";
      return signalPassFailure();
    }
    if (!hybrid && ulyssesShards != 0) {
      emitError(getOperation().getLoc())
          << "ulysses-shards=" << int64_t(ulyssesShards)
          << " is for attention=ulysses_ring, not attention="
          << ::sd::attentionKindName(attention);
      return signalPassFailure();
    }

    if (minSeqLength < 0) {
      emitError(getOperation().getLoc())
          << "min-seq-length is " << int64_t(minSeqLength)
          << "; it must not be negative";
      return signalPassFailure();
    }
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) {
      // MaxDiffusion's flash_min_seq_length: a short query keeps the
      // untiled form (a dynamic one is tiled).
      int64_t sq = op.getQuery().getType().getDimSize(2);
      if (ShapedType::isDynamic(sq) || sq >= minSeqLength)
        ops.push_back(op);
    });
    for (AttentionOp op : ops)
      if (failed(tile(op, requested, cache)))
        return signalPassFailure();
  }

  /// Replaces `op` by its tiled form.
  LogicalResult tile(AttentionOp op, const FlashTiling &requested,
                     int64_t cache) {
    int64_t d = op.getQuery().getType().getDimSize(3);
    int64_t dv = op.getValue().getType().getDimSize(3);
    if (ShapedType::isDynamic(d) || ShapedType::isDynamic(dv))
      return op.emitOpError("has a dynamic head_dim; flash-attention tiling "
                            "needs static head_dims");
    for (auto [name, size] :
         {std::pair<StringRef, int64_t>{"block-q", requested.blockQ},
          {"block-kv-compute", requested.blockKvCompute},
          {"block-kv", requested.blockKv},
          {"block-q-dkv", requested.blockQDkv},
          {"block-kv-dkv", requested.blockKvDkv},
          {"block-kv-dkv-compute", requested.blockKvDkvCompute},
          {"block-q-dq", requested.blockQDq},
          {"block-kv-dq", requested.blockKvDq}})
      if (size < 0)
        return emitError(op.getLoc())
               << "flash block size " << name << " is " << size
               << "; block sizes must be positive (0 derives one)";
    int64_t skv = op.getKey().getType().getDimSize(2);
    FlashTiling t = completeFlashTiling(requested, d, dv, cache,
                                        ShapedType::isDynamic(skv) ? 0 : skv);
    OpBuilder builder(op);
    auto blocks = FlashBlocksAttr::get(
        op.getContext(), t.blockQ, t.blockKvCompute, t.blockKv, t.blockQDkv,
        t.blockKvDkv, t.blockKvDkvCompute, t.blockQDq, t.blockKvDq,
        t.useFusedBwdKernel);
    // Ring, Ulysses and their hybrid spread one unmasked sequence; the
    // others keep whole keys and values.
    ContextParallelAttr context;
    IntegerAttr shards;
    int64_t sq = op.getQuery().getType().getDimSize(2);
    std::optional<ContextParallel> spread = contextParallelOf(attention);
    bool self = sq == skv && !ShapedType::isDynamic(sq);
    if (spread && !op.getMask() && self) {
      context = ContextParallelAttr::get(op.getContext(), *spread);
      if (*spread == ContextParallel::ulysses_ring)
        shards = builder.getI64IntegerAttr(ulyssesShards);
    } else if (spread && self) {
      // Cross-attention's short text keys are expected to stay whole; a
      // masked self-attention the user asked to spread is worth a word.
      op.emitRemark() << "has a mask, so attention="
                      << ::sd::attentionKindName(attention)
                      << " does not spread it: its keys and values stay "
                         "whole (all-gathered over a sharded sequence), as "
                         "for attention=flash";
    }
    auto tiled = FlashAttentionOp::create(
        builder, op.getLoc(), op.getQuery(), op.getKey(), op.getValue(),
        op.getMask(), builder.getF64FloatAttr(op.getEffectiveScale()),
        blocks, context, shards);
    // Discardable attributes (sd.name, sd.layer) carry over; a sharding of
    // the one result would not fit two, and propagation gives them both.
    for (NamedAttribute attr : op->getDiscardableAttrs())
      if (attr.getName() != SDDialect::kShardingAttrName)
        tiled->setAttr(attr.getName(), attr.getValue());
    op.getResult().replaceAllUsesWith(tiled.getResult());
    op.erase();
    return success();
  }
};
} // namespace
