//===- TransportUtil.cpp - Pieces shared by sd's transports ---------------===//
//
// Shared by the shared-memory and MPI transports, so that both check,
// count and add exactly alike: f32 sums in member order, and bf16 sums in
// the same order in f32, rounded to bf16 once.
//
//===----------------------------------------------------------------------===//

#include "TransportUtil.h"

#include "sd/Reference/Tensor.h"
#include "sd/Runtime/BFloat16.h"

#include "absl/strings/str_format.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstring>

using namespace sd;
using namespace sd::rt;
using namespace sd::rt::detail;

using ::sd::ref::rowMajorStrides;
using ::sd::ref::shapeProduct;

/// Below this many elements a copy or sum stays on the device thread.
static constexpr int64_t kParallelElements = 1 << 15;

/// Calls `row(from, to, length)` for every contiguous row of the box of
/// shape `box` at `srcOffset` of a `srcShape` tensor and `dstOffset` of a
/// `dstShape` one (element offsets of the row's start in each), the rows
/// split statically over the device's OpenMP team when there are enough
/// elements. A rank-0 box is one row of length 1.
template <typename RowFn>
static void forEachBoxRow(const std::vector<int64_t> &srcShape,
                          const std::vector<int64_t> &srcOffset,
                          const std::vector<int64_t> &dstShape,
                          const std::vector<int64_t> &dstOffset,
                          const std::vector<int64_t> &box, RowFn row) {
  size_t rank = box.size();
  if (rank == 0) {
    row(int64_t(0), int64_t(0), int64_t(1));
    return;
  }
  std::vector<int64_t> srcStrides = rowMajorStrides(srcShape);
  std::vector<int64_t> dstStrides = rowMajorStrides(dstShape);
  int64_t rowLength = box[rank - 1];
  int64_t rows = shapeProduct(box) / std::max<int64_t>(rowLength, 1);
  if (rowLength == 0 || rows == 0)
    return;
  int64_t srcBase = 0, dstBase = 0;
  for (size_t d = 0; d < rank; ++d) {
    srcBase += srcOffset[d] * srcStrides[d];
    dstBase += dstOffset[d] * dstStrides[d];
  }
  bool parallel = rows * rowLength >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    // The row's index in the box's outer dimensions.
    int64_t rest = r, from = srcBase, to = dstBase;
    for (size_t d = rank - 1; d-- > 0;) {
      int64_t index = rest % box[d];
      rest /= box[d];
      from += index * srcStrides[d];
      to += index * dstStrides[d];
    }
    row(from, to, rowLength);
  }
}

/// The element `index` of `buffer`, an array of `type`.
static const std::byte *elementAt(ElementType type, const void *buffer,
                                  int64_t index) {
  return static_cast<const std::byte *>(buffer) + index * elementBytes(type);
}
static std::byte *elementAt(ElementType type, void *buffer, int64_t index) {
  return static_cast<std::byte *>(buffer) + index * elementBytes(type);
}

void detail::transferBox(ElementType srcType, const void *src,
                         const std::vector<int64_t> &srcShape,
                         const std::vector<int64_t> &srcOffset,
                         ElementType dstType, void *dst,
                         const std::vector<int64_t> &dstShape,
                         const std::vector<int64_t> &dstOffset,
                         const std::vector<int64_t> &box, bool add) {
  assert((srcType == dstType ? !add || srcType == ElementType::F32
                             : dstType == ElementType::F32 || !add) &&
         "a sum of bf16 elements is accumulated in f32");
  if (srcType == dstType && !add) {
    size_t bytes = static_cast<size_t>(elementBytes(srcType));
    forEachBoxRow(srcShape, srcOffset, dstShape, dstOffset, box,
                  [&](int64_t from, int64_t to, int64_t length) {
                    std::memcpy(elementAt(dstType, dst, to),
                                elementAt(srcType, src, from),
                                static_cast<size_t>(length) * bytes);
                  });
    return;
  }
  if (dstType == ElementType::BF16) {
    // f32 to bf16: rounded.
    forEachBoxRow(srcShape, srcOffset, dstShape, dstOffset, box,
                  [&](int64_t from, int64_t to, int64_t length) {
                    convertToBFloat16(static_cast<const float *>(src) + from,
                                      static_cast<BFloat16 *>(dst) + to,
                                      length);
                  });
    return;
  }
  forEachBoxRow(srcShape, srcOffset, dstShape, dstOffset, box,
                [&](int64_t from, int64_t to, int64_t length) {
                  float *out = static_cast<float *>(dst) + to;
                  if (srcType == ElementType::F32) {
                    const float *in = static_cast<const float *>(src) + from;
                    for (int64_t i = 0; i < length; ++i)
                      out[i] += in[i];
                    return;
                  }
                  const BFloat16 *in =
                      static_cast<const BFloat16 *>(src) + from;
                  if (!add) {
                    convertToFloat(in, out, length);
                    return;
                  }
                  for (int64_t i = 0; i < length; ++i)
                    out[i] += toFloat(in[i]);
                });
}

/// Elements of a row summed at a time: the partial sums of a chunk stay in
/// L1 while each further source is added to them.
static constexpr int64_t kSumChunk = 2048;

void detail::sumBoxes(ElementType type, const std::vector<const void *> &srcs,
                      const std::vector<int64_t> &srcShape,
                      const std::vector<int64_t> &srcOffset, void *dst,
                      const std::vector<int64_t> &dstShape,
                      const std::vector<int64_t> &dstOffset,
                      const std::vector<int64_t> &box) {
  if (srcs.empty())
    return;
  if (srcs.size() == 1) {
    copyBox(type, srcs[0], srcShape, srcOffset, dst, dstShape, dstOffset, box);
    return;
  }
  if (type == ElementType::F32) {
    forEachBoxRow(srcShape, srcOffset, dstShape, dstOffset, box,
                  [&](int64_t from, int64_t to, int64_t length) {
                    float *out = static_cast<float *>(dst) + to;
                    auto source = [&](size_t k) {
                      return static_cast<const float *>(srcs[k]) + from;
                    };
                    for (int64_t c = 0; c < length; c += kSumChunk) {
                      int64_t n = std::min(kSumChunk, length - c);
                      const float *s0 = source(0) + c, *s1 = source(1) + c;
                      float *o = out + c;
                      for (int64_t i = 0; i < n; ++i)
                        o[i] = s0[i] + s1[i];
                      for (size_t k = 2; k < srcs.size(); ++k) {
                        const float *sk = source(k) + c;
                        for (int64_t i = 0; i < n; ++i)
                          o[i] += sk[i];
                      }
                    }
                  });
    return;
  }
  // bf16: each chunk's sums in f32, rounded once when stored.
  forEachBoxRow(srcShape, srcOffset, dstShape, dstOffset, box,
                [&](int64_t from, int64_t to, int64_t length) {
                  BFloat16 *out = static_cast<BFloat16 *>(dst) + to;
                  auto source = [&](size_t k) {
                    return static_cast<const BFloat16 *>(srcs[k]) + from;
                  };
                  float sum[kSumChunk];
                  for (int64_t c = 0; c < length; c += kSumChunk) {
                    int64_t n = std::min(kSumChunk, length - c);
                    const BFloat16 *s0 = source(0) + c, *s1 = source(1) + c;
                    for (int64_t i = 0; i < n; ++i)
                      sum[i] = toFloat(s0[i]) + toFloat(s1[i]);
                    for (size_t k = 2; k < srcs.size(); ++k) {
                      const BFloat16 *sk = source(k) + c;
                      for (int64_t i = 0; i < n; ++i)
                        sum[i] += toFloat(sk[i]);
                    }
                    convertToBFloat16(sum, out + c, n);
                  }
                });
}

bool detail::transportsMove(ElementType type) {
  switch (type) {
  case ElementType::F32:
  case ElementType::BF16:
    return true;
  }
  return false;
}

CollectiveGroups::CollectiveGroups(const MeshSpec &mesh) : meshSpec(mesh) {
  for (const MeshAxis &axis : mesh.axes())
    sizes.push_back(axis.size());
}

absl::StatusOr<CollectivePlan>
CollectiveGroups::makePlan(const SdCollective &op) const {
  std::string name = op.name ? op.name : "<unnamed collective>";
  auto invalid = [&](const std::string &why) {
    return absl::InvalidArgumentError(absl::StrFormat("'%s': %s", name, why));
  };
  if (op.kind < SD_ALL_GATHER || op.kind > SD_COLLECTIVE_PERMUTE)
    return invalid(absl::StrFormat("unknown collective kind %d", op.kind));
  if (op.rank < 0 || op.rank > SD_MAX_RANK)
    return invalid(
        absl::StrFormat("rank %d is not in [0, %d]", op.rank, SD_MAX_RANK));
  CollectivePlan plan;
  std::optional<ElementType> elementType = elementTypeFromAbi(op.element_type);
  if (!elementType)
    return invalid(absl::StrFormat("unknown element type %d", op.element_type));
  if (!transportsMove(*elementType))
    return invalid(absl::StrFormat("the transports do not move %s elements",
                                   elementTypeName(*elementType)));
  plan.elementType = *elementType;
  plan.inShape.assign(op.in_shape, op.in_shape + op.rank);
  plan.outShape.assign(op.out_shape, op.out_shape + op.rank);
  for (int32_t d = 0; d < op.rank; ++d)
    if (op.in_shape[d] < 0 || op.out_shape[d] < 0)
      return invalid(absl::StrFormat("negative size in dimension %d", d));
  auto checkAxes = [&](const int32_t *axes, int32_t count,
                       AxisList &list) -> absl::Status {
    if (count < 0 || count > SD_MAX_AXES)
      return invalid(
          absl::StrFormat("%d axes is not in [0, %d]", count, SD_MAX_AXES));
    for (int32_t i = 0; i < count; ++i) {
      if (axes[i] < 0 || axes[i] >= static_cast<int32_t>(sizes.size()))
        return invalid(absl::StrFormat("axis %d is not an axis of mesh %s",
                                       axes[i], meshSpec.toString()));
      list.push_back(axes[i]);
    }
    return absl::OkStatus();
  };
  bool perDim = op.kind == SD_ALL_GATHER || op.kind == SD_ALL_SLICE ||
                op.kind == SD_REDUCE_SCATTER;
  if (perDim) {
    plan.dimAxes.resize(op.rank);
    for (int32_t d = 0; d < op.rank; ++d) {
      if (absl::Status status =
              checkAxes(op.dim_axes[d], op.num_dim_axes[d], plan.dimAxes[d]);
          !status.ok())
        return status;
      plan.group.insert(plan.group.end(), plan.dimAxes[d].begin(),
                        plan.dimAxes[d].end());
    }
  } else {
    if (absl::Status status = checkAxes(op.axes, op.num_axes, plan.axes);
        !status.ok())
      return status;
    plan.group = plan.axes;
  }
  std::sort(plan.group.begin(), plan.group.end());
  if (std::adjacent_find(plan.group.begin(), plan.group.end()) !=
      plan.group.end())
    return invalid("a mesh axis is listed twice");

  // The result's shape follows from the operand's.
  std::vector<int64_t> expected = plan.inShape;
  switch (op.kind) {
  case SD_ALL_GATHER:
    for (int32_t d = 0; d < op.rank; ++d)
      expected[d] *= groupSize(plan.dimAxes[d]);
    break;
  case SD_ALL_SLICE:
  case SD_REDUCE_SCATTER:
    for (int32_t d = 0; d < op.rank; ++d) {
      int64_t count = groupSize(plan.dimAxes[d]);
      if (expected[d] % count != 0)
        return invalid(absl::StrFormat(
            "dimension %d of size %d is not divisible into %d blocks", d,
            expected[d], count));
      expected[d] /= count;
    }
    break;
  case SD_ALL_TO_ALL: {
    if (op.src_dim < 0 || op.src_dim >= op.rank || op.tgt_dim < 0 ||
        op.tgt_dim >= op.rank || op.src_dim == op.tgt_dim)
      return invalid(absl::StrFormat(
          "src_dim %d and tgt_dim %d must be distinct dimensions of rank %d",
          op.src_dim, op.tgt_dim, op.rank));
    int64_t n = groupSize(plan.axes);
    if (op.subgroup_size < 0 || (op.subgroup_size > 0 && n % op.subgroup_size))
      return invalid(
          absl::StrFormat("subgroup_size %d does not divide the group size %d",
                          op.subgroup_size, n));
    if (op.subgroup_size > 0)
      n = op.subgroup_size;
    plan.exchange = n;
    if (expected[op.tgt_dim] % n != 0)
      return invalid(absl::StrFormat(
          "tgt_dim %d of size %d is not divisible by the %d members that "
          "exchange blocks",
          op.tgt_dim, expected[op.tgt_dim], n));
    expected[op.tgt_dim] /= n;
    expected[op.src_dim] *= n;
    break;
  }
  case SD_COLLECTIVE_PERMUTE: {
    int64_t n = groupSize(plan.axes);
    if (op.num_pairs < 0 || (op.num_pairs > 0 && !op.pairs))
      return invalid("bad permutation pairs");
    for (int32_t i = 0; i < 2 * op.num_pairs; ++i)
      if (op.pairs[i] < 0 || op.pairs[i] >= n)
        return invalid(absl::StrFormat(
            "pair [%d, %d] names a member outside groups of size %d",
            op.pairs[i / 2 * 2], op.pairs[i / 2 * 2 + 1], n));
    break;
  }
  default:
    break;
  }
  if (expected != plan.outShape)
    return invalid("the result shape does not follow from the operand shape");
  return plan;
}

int64_t CollectiveGroups::commBytes(const SdCollective &op,
                                    const CollectivePlan &plan) const {
  // sd/Analysis/CostModel.cpp getRingBytesPerDevice on the S and N of
  // lib/Analysis/CostModels.cpp's getCommunication.
  int64_t n = op.kind == SD_ALL_TO_ALL ? plan.exchange : groupSize(plan.group);
  if (n <= 1)
    return 0;
  auto chunk = [&](int64_t bytes) { return (bytes + n - 1) / n; };
  int64_t bytes = elementBytes(plan.elementType);
  int64_t inBytes = shapeProduct(plan.inShape) * bytes;
  int64_t outBytes = shapeProduct(plan.outShape) * bytes;
  switch (op.kind) {
  case SD_ALL_GATHER:
    return (n - 1) * chunk(outBytes);
  case SD_REDUCE_SCATTER:
  case SD_ALL_TO_ALL:
    return (n - 1) * chunk(inBytes);
  case SD_ALL_REDUCE:
    return 2 * (n - 1) * chunk(inBytes);
  case SD_COLLECTIVE_PERMUTE:
    for (int32_t i = 0; i < op.num_pairs; ++i)
      if (op.pairs[2 * i] != op.pairs[2 * i + 1])
        return inBytes;
    return 0;
  default:
    return 0;
  }
}
