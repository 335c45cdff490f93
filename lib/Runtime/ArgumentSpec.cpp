//===- ArgumentSpec.cpp - Typed arguments and their starting blocks -------===//

#include "sd/Runtime/ArgumentSpec.h"

#include "sd/Reference/Random.h"
#include "sd/Reference/Tensor.h"

#include <algorithm>
#include <cmath>

namespace sd::rt {

namespace {
constexpr const char *kRoleNames[] = {"latents",  "noise",   "timestep",
                                      "context",  "labels",  "pooled",
                                      "guidance", "time_ids"};
constexpr const char *kMomentNames[] = {"mu", "nu", "ema"};
} // namespace

const char *inputRoleName(InputRole role) {
  return kRoleNames[static_cast<int>(role)];
}

std::optional<InputRole> parseInputRole(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kRoleNames)); ++i)
    if (name == kRoleNames[i])
      return static_cast<InputRole>(i);
  return std::nullopt;
}

const char *momentKindName(MomentKind kind) {
  return kMomentNames[static_cast<int>(kind)];
}

int64_t numElements(const std::vector<int64_t> &shape) {
  return ::sd::ref::shapeProduct(shape);
}

int64_t ArgumentSpec::globalBytes() const {
  return numElements(globalShape) * elementBytes(elementType);
}

int64_t ArgumentSpec::localBytes() const {
  return numElements(localShape) * elementBytes(elementType);
}

std::vector<int64_t>
ArgumentSpec::blockOffsets(const std::vector<int64_t> &coords) const {
  std::vector<int64_t> offsets(localShape.size(), 0);
  for (size_t d = 0; d < localShape.size(); ++d) {
    int64_t block = 0;
    for (int32_t axis : dimAxes[d])
      block = block * axisSizes[axis] + coords[axis];
    offsets[d] = block * localShape[d];
  }
  return offsets;
}

std::vector<int64_t>
ArgumentSpec::validShape(const std::vector<int64_t> &coords) const {
  return validShapeAt(blockOffsets(coords));
}

std::vector<int64_t>
ArgumentSpec::validShapeAt(const std::vector<int64_t> &offsets) const {
  std::vector<int64_t> valid(localShape.size());
  for (size_t d = 0; d < localShape.size(); ++d)
    valid[d] =
        std::clamp<int64_t>(globalShape[d] - offsets[d], 0, localShape[d]);
  return valid;
}

void ArgumentSpec::forEachValidRow(
    const std::vector<int64_t> &coords,
    const std::function<void(int64_t, int64_t, int64_t)> &copy) const {
  forEachValidRowAt(blockOffsets(coords), copy);
}

void ArgumentSpec::forEachValidRowAt(
    const std::vector<int64_t> &offsets,
    const std::function<void(int64_t, int64_t, int64_t)> &copy) const {
  size_t rank = localShape.size();
  if (rank == 0) {
    copy(0, 0, 1);
    return;
  }
  std::vector<int64_t> valid = validShapeAt(offsets);
  if (numElements(valid) == 0)
    return;
  std::vector<int64_t> globalStrides = ::sd::ref::rowMajorStrides(globalShape);
  std::vector<int64_t> localStrides = ::sd::ref::rowMajorStrides(localShape);
  // Visit the valid rows: an index over the outer dimensions of `valid`.
  std::vector<int64_t> index(rank, 0);
  while (true) {
    int64_t local = 0, global = offsets[rank - 1];
    for (size_t d = 0; d + 1 < rank; ++d) {
      local += index[d] * localStrides[d];
      global += (offsets[d] + index[d]) * globalStrides[d];
    }
    copy(local, global, valid[rank - 1]);
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++index[d] < valid[d])
        break;
      index[d] = 0;
    }
    if (d == static_cast<size_t>(-1))
      return;
  }
}

int64_t ProgramSpec::findParameter(std::string_view name) const {
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].kind == ArgumentKind::Parameter &&
        arguments[i].name == name)
      return static_cast<int64_t>(i);
  return -1;
}

namespace {

/// Calls `fill(row, globalIndexOfRowStart, valid)` for every innermost row
/// of the block at `offsets`, in parallel over rows on the calling device's
/// team: `valid` counts the row's elements inside the global tensor (fewer
/// than the row, or none, in a padded block).
template <typename Fill>
void forEachRow(const ArgumentSpec &arg, const std::vector<int64_t> &offsets,
                Fill fill) {
  const std::vector<int64_t> &local = arg.localShape;
  size_t rank = local.size();
  if (rank == 0) {
    fill(0, 0, 1);
    return;
  }
  std::vector<int64_t> strides = ::sd::ref::rowMajorStrides(arg.globalShape);
  int64_t inner = local[rank - 1];
  int64_t rows = inner == 0 ? 0 : numElements(local) / inner;
  int64_t validInner = std::clamp<int64_t>(
      arg.globalShape[rank - 1] - offsets[rank - 1], 0, inner);
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    // The row's index along each outer dimension, innermost first.
    int64_t rest = row, at = offsets[rank - 1], valid = validInner;
    for (size_t d = rank - 1; d-- > 0;) {
      int64_t index = offsets[d] + rest % local[d];
      if (index >= arg.globalShape[d])
        valid = 0;
      at += index * strides[d];
      rest /= local[d];
    }
    fill(row, at, valid);
  }
}

} // namespace

void initialBlock(const ArgumentSpec &arg, uint64_t seed,
                  const std::vector<int64_t> &offsets, float *out) {
  if (arg.kind == ArgumentKind::Hyperparameters) {
    // Replicated: every block is the whole vector.
    int64_t n = std::min<int64_t>(numElements(arg.localShape),
                                  static_cast<int64_t>(arg.values.size()));
    std::fill(out, out + numElements(arg.localShape), 0.0f);
    std::copy(arg.values.begin(), arg.values.begin() + n, out);
    return;
  }
  int64_t inner = arg.localShape.empty() ? 1 : arg.localShape.back();
  bool drawn = arg.kind == ArgumentKind::Parameter ||
               (arg.kind == ArgumentKind::OptimizerState &&
                arg.moment == MomentKind::Ema);
  InitKind kind = drawn ? arg.init.kind : InitKind::Zeros;
  // The evaluator's formulas (Evaluator.h), in double, then rounded to f32
  // once: normal(s) is 0 + s·n, uniform(a) is -a + 2a·u.
  double low = 0, width = 0;
  if (kind == InitKind::Uniform) {
    low = -arg.init.scale;
    width = arg.init.scale - low;
  } else if (kind == InitKind::XavierUniform) {
    // A Linear weight [out, in] or its fused view [k, out, in].
    double fanIn = static_cast<double>(arg.globalShape.back()), fanOut = 1;
    for (size_t d = 0; d + 1 < arg.globalShape.size(); ++d)
      fanOut *= static_cast<double>(arg.globalShape[d]);
    double bound = std::sqrt(6.0 / (fanIn + fanOut));
    low = -bound;
    width = bound - low;
  }
  uint64_t stream = ::sd::ref::deriveSeed(seed, arg.parameter);
  forEachRow(arg, offsets, [&](int64_t row, int64_t at, int64_t valid) {
    float *dst = out + row * inner;
    // Padding is zeros.
    std::fill(dst + valid, dst + inner, 0.0f);
    switch (kind) {
    case InitKind::Zeros:
    case InitKind::Ones:
    case InitKind::Constant: {
      double value = kind == InitKind::Zeros  ? 0.0
                     : kind == InitKind::Ones ? 1.0
                                              : arg.init.scale;
      std::fill(dst, dst + valid, static_cast<float>(value));
      return;
    }
    case InitKind::Normal:
      for (int64_t i = 0; i < valid; ++i)
        dst[i] = static_cast<float>(
            0.0 + arg.init.scale * ::sd::ref::normalAt(
                                       stream, static_cast<uint64_t>(at + i)));
      return;
    case InitKind::Uniform:
    case InitKind::XavierUniform:
      for (int64_t i = 0; i < valid; ++i)
        dst[i] = static_cast<float>(
            low + width * ::sd::ref::uniformAt(stream,
                                               static_cast<uint64_t>(at + i)));
      return;
    }
  });
}

} // namespace sd::rt
