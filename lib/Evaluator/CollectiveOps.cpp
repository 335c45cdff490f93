//===- CollectiveOps.cpp - reference evaluation of the collectives --------===//
//
// The collectives evaluated across all simulated devices at once, written
// the obvious way: for each device, find the group members it exchanges
// with (by mesh coordinates, sd/Sharding/Mesh.h) and copy or add whole
// blocks. Sums run over a group in ascending coordinate order, so every
// member gets bitwise the same value.
//
//===----------------------------------------------------------------------===//

#include "sd/Evaluator/EvaluableOpInterface.h"
#include "sd/IR/MeshSpec.h"
#include "sd/IR/SDOps.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"

#include <map>

using namespace mlir;
using namespace mlir::sd;

namespace ref = ::sd::ref;
using ref::Tensor;
using ::sd::MeshSpec;

namespace {
using DeviceOperands = ArrayRef<SmallVector<const Tensor *>>;
using DeviceResults = std::vector<std::vector<Tensor>>;
/// Indices into `MeshSpec::axes()`, major to minor as an op lists them.
using AxisList = SmallVector<int64_t>;
} // namespace

::sd::MeshSpec mlir::sd::getMeshSpec(MeshAttr mesh) { return toMeshSpec(mesh); }

//===----------------------------------------------------------------------===//
// Groups and blocks
//===----------------------------------------------------------------------===//

/// The indices of the axes `names` in `mesh`; fails, after an error on `op`,
/// on a name the mesh does not have (which a verified op cannot name).
static FailureOr<AxisList> getAxisIndices(Operation *op, const MeshSpec &mesh,
                                          ArrayRef<StringRef> names) {
  AxisList indices;
  for (StringRef name : names) {
    auto it = llvm::find_if(mesh.axes(), [&](const ::sd::MeshAxis &axis) {
      return axis.name == name;
    });
    if (it == mesh.axes().end())
      return op->emitOpError()
             << "names mesh axis \"" << name << "\", which mesh "
             << mesh.toString() << " does not have";
    indices.push_back(it - mesh.axes().begin());
  }
  return indices;
}

static FailureOr<AxisList> getAxisIndices(Operation *op, const MeshSpec &mesh,
                                          ArrayAttr names) {
  SmallVector<StringRef> refs;
  for (Attribute name : names)
    refs.push_back(cast<StringAttr>(name).getValue());
  return getAxisIndices(op, mesh, refs);
}

/// Product of the sizes of `axes`: the size of their groups.
static int64_t groupSize(const MeshSpec &mesh, const AxisList &axes) {
  int64_t size = 1;
  for (int64_t axis : axes)
    size *= mesh.axes()[axis].size();
  return size;
}

/// The row-major index of `coords` on `axes` (major to minor): the block a
/// device holds of a dimension sharded over `axes`.
static int64_t groupIndex(const MeshSpec &mesh, ArrayRef<int64_t> coords,
                          const AxisList &axes) {
  int64_t index = 0;
  for (int64_t axis : axes)
    index = index * mesh.axes()[axis].size() + coords[axis];
  return index;
}

/// Sets the coordinates of `coords` on `axes` to the row-major
/// decomposition of `index`, the inverse of groupIndex.
static void setGroupIndex(const MeshSpec &mesh, std::vector<int64_t> &coords,
                          const AxisList &axes, int64_t index) {
  for (int64_t axis : llvm::reverse(axes)) {
    int64_t size = mesh.axes()[axis].size();
    coords[axis] = index % size;
    index /= size;
  }
}

/// Copies the box of `shape` at `srcOffset` in `src` to `dstOffset` in
/// `dst`.
static void copyBox(const Tensor &src, ArrayRef<int64_t> srcOffset, Tensor &dst,
                    ArrayRef<int64_t> dstOffset, ArrayRef<int64_t> shape) {
  std::vector<int64_t> srcStrides = src.strides(), dstStrides = dst.strides();
  int64_t count = ref::shapeProduct({shape.begin(), shape.end()});
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t from = 0, to = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      from += (srcOffset[d] + index[d]) * srcStrides[d];
      to += (dstOffset[d] + index[d]) * dstStrides[d];
    }
    dst[to] = src[from];
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

/// Block `blocks[d]` of each dimension `d` of `tensor`, each dimension split
/// into `counts[d]` blocks.
static Tensor takeBlock(const Tensor &tensor, ArrayRef<int64_t> counts,
                        ArrayRef<int64_t> blocks) {
  std::vector<int64_t> shape = tensor.shape(), offset(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    shape[d] /= counts[d];
    offset[d] = blocks[d] * shape[d];
  }
  Tensor block(shape, tensor.dtype());
  copyBox(tensor, offset, block, std::vector<int64_t>(shape.size(), 0), shape);
  return block;
}

/// The sum over the group of `device` on `axes`: its members in ascending
/// coordinate order (the axes taken in mesh order, major first), added left
/// to right in double. The order does not depend on how the op lists the
/// axes.
static Tensor sumOverGroup(const MeshSpec &mesh, DeviceOperands operands,
                           int64_t device, AxisList axes) {
  llvm::sort(axes);
  std::vector<int64_t> coords = mesh.coordinates(device);
  Tensor sum;
  for (int64_t member = 0, e = groupSize(mesh, axes); member < e; ++member) {
    setGroupIndex(mesh, coords, axes, member);
    const Tensor &value = *operands[mesh.deviceId(coords)][0];
    if (member == 0) {
      sum = value;
      continue;
    }
    for (int64_t i = 0; i < sum.numElements(); ++i)
      sum[i] += value[i];
  }
  return sum;
}

/// The group sums of every device, computed once per group.
static std::vector<const Tensor *> sumGroups(const MeshSpec &mesh,
                                             DeviceOperands operands,
                                             const AxisList &axes,
                                             std::map<int64_t, Tensor> &sums) {
  std::vector<const Tensor *> perDevice;
  for (int64_t device = 0; device < mesh.numDevices(); ++device) {
    // The group's member with coordinate 0 on every axis names the group.
    std::vector<int64_t> coords = mesh.coordinates(device);
    setGroupIndex(mesh, coords, axes, 0);
    int64_t leader = mesh.deviceId(coords);
    auto it = sums.find(leader);
    if (it == sums.end())
      it = sums.emplace(leader, sumOverGroup(mesh, operands, device, axes))
               .first;
    perDevice.push_back(&it->second);
  }
  return perDevice;
}

//===----------------------------------------------------------------------===//
// The collectives
//===----------------------------------------------------------------------===//

/// The per-dimension axes of all_gather, all_slice, reduce_scatter as
/// indices, and all of them together (the group).
template <typename OpTy>
static FailureOr<SmallVector<AxisList>>
getDimAxisIndices(OpTy op, const MeshSpec &mesh, AxisList &all) {
  SmallVector<AxisList> dims;
  for (Attribute axes : op.getDimAxes()) {
    FailureOr<AxisList> indices =
        getAxisIndices(op, mesh, cast<ArrayAttr>(axes));
    if (failed(indices))
      return failure();
    all.append(indices->begin(), indices->end());
    dims.push_back(std::move(*indices));
  }
  return dims;
}

/// One result per device: `result(device)` for each device of `mesh`.
template <typename Fn>
static DeviceResults perDevice(const MeshSpec &mesh, Fn result) {
  DeviceResults results(mesh.numDevices());
  for (int64_t device = 0; device < mesh.numDevices(); ++device)
    results[device].push_back(result(device));
  return results;
}

/// Each device's block of `values[device]` under the per-dimension `dims`.
static DeviceResults sliceBlocks(const MeshSpec &mesh,
                                 ArrayRef<const Tensor *> values,
                                 ArrayRef<AxisList> dims) {
  return perDevice(mesh, [&](int64_t device) {
    std::vector<int64_t> coords = mesh.coordinates(device);
    SmallVector<int64_t> counts, blocks;
    for (const AxisList &axes : dims) {
      counts.push_back(groupSize(mesh, axes));
      blocks.push_back(groupIndex(mesh, coords, axes));
    }
    return takeBlock(*values[device], counts, blocks);
  });
}

static LogicalResult evalCollective(AllGatherOp op, const MeshSpec &mesh,
                                    DeviceOperands operands,
                                    DeviceResults &results) {
  AxisList all;
  FailureOr<SmallVector<AxisList>> dims = getDimAxisIndices(op, mesh, all);
  if (failed(dims))
    return failure();
  results = perDevice(mesh, [&](int64_t device) {
    const Tensor &local = *operands[device][0];
    std::vector<int64_t> shape = local.shape();
    std::vector<int64_t> resultShape = shape, counts;
    for (auto [d, axes] : llvm::enumerate(*dims)) {
      counts.push_back(groupSize(mesh, axes));
      resultShape[d] *= counts.back();
    }
    Tensor result(resultShape, local.dtype());
    // One block per group member: block b[d] of dimension d comes from the
    // member whose coordinates on d's axes have row-major index b[d].
    std::vector<int64_t> block(shape.size(), 0), offset(shape.size());
    for (int64_t n = 0, e = groupSize(mesh, all); n < e; ++n) {
      std::vector<int64_t> coords = mesh.coordinates(device);
      for (size_t d = 0; d < shape.size(); ++d) {
        setGroupIndex(mesh, coords, (*dims)[d], block[d]);
        offset[d] = block[d] * shape[d];
      }
      const Tensor &member = *operands[mesh.deviceId(coords)][0];
      copyBox(member, std::vector<int64_t>(shape.size(), 0), result, offset,
              shape);
      for (size_t d = shape.size(); d-- > 0;) {
        if (++block[d] < counts[d])
          break;
        block[d] = 0;
      }
    }
    return result;
  });
  return success();
}

/// all_slice: each device keeps its block of its operand; reduce_scatter:
/// of the sum of the operands over the group of all the op's axes.
template <typename OpTy>
static std::enable_if_t<
    llvm::is_one_of<OpTy, AllSliceOp, ReduceScatterOp>::value, LogicalResult>
evalCollective(OpTy op, const MeshSpec &mesh, DeviceOperands operands,
               DeviceResults &results) {
  AxisList all;
  FailureOr<SmallVector<AxisList>> dims = getDimAxisIndices(op, mesh, all);
  if (failed(dims))
    return failure();
  std::map<int64_t, Tensor> sums;
  std::vector<const Tensor *> values;
  if constexpr (std::is_same_v<OpTy, ReduceScatterOp>)
    values = sumGroups(mesh, operands, all, sums);
  else
    for (const SmallVector<const Tensor *> &deviceOperands : operands)
      values.push_back(deviceOperands[0]);
  results = sliceBlocks(mesh, values, *dims);
  return success();
}

static LogicalResult evalOverGroups(AllReduceOp op, const MeshSpec &mesh,
                                    DeviceOperands operands,
                                    const AxisList &axes,
                                    DeviceResults &results) {
  std::map<int64_t, Tensor> sums;
  std::vector<const Tensor *> groupSums = sumGroups(mesh, operands, axes, sums);
  results = perDevice(mesh, [&](int64_t device) { return *groupSums[device]; });
  return success();
}

static LogicalResult evalOverGroups(AllToAllOp op, const MeshSpec &mesh,
                                    DeviceOperands operands,
                                    const AxisList &axes,
                                    DeviceResults &results) {
  auto src = static_cast<int64_t>(op.getSrcDim());
  auto tgt = static_cast<int64_t>(op.getTgtDim());
  // Members exchange within subgroups of n consecutive group members.
  int64_t n = op.getExchangeSize(groupSize(mesh, axes));
  results = perDevice(mesh, [&](int64_t device) {
    const Tensor &local = *operands[device][0];
    // The piece each member sends: the operand with tgt split n ways.
    std::vector<int64_t> piece = local.shape(), resultShape = local.shape();
    piece[tgt] /= n;
    resultShape[tgt] /= n;
    resultShape[src] *= n;
    Tensor result(resultShape, local.dtype());
    std::vector<int64_t> coords = mesh.coordinates(device);
    int64_t index = groupIndex(mesh, coords, axes);
    int64_t self = index % n, first = index - self;
    // Block j of src comes from subgroup member j: its block `self` of tgt.
    std::vector<int64_t> from(piece.size(), 0), to(piece.size(), 0);
    from[tgt] = self * piece[tgt];
    for (int64_t member = 0; member < n; ++member) {
      setGroupIndex(mesh, coords, axes, first + member);
      to[src] = member * piece[src];
      copyBox(*operands[mesh.deviceId(coords)][0], from, result, to, piece);
    }
    return result;
  });
  return success();
}

/// Member `t` of each group receives the operand of the member that the
/// pair targeting `t` names; a member no pair targets keeps its own. A
/// start's result is the permute's (its done passes it on).
template <typename OpTy,
          typename = std::enable_if_t<llvm::is_one_of<
              OpTy, CollectivePermuteOp, CollectivePermuteStartOp>::value>>
static LogicalResult evalOverGroups(OpTy op,
                                    const MeshSpec &mesh,
                                    DeviceOperands operands,
                                    const AxisList &axes,
                                    DeviceResults &results) {
  int64_t size = groupSize(mesh, axes);
  std::map<int64_t, int64_t> sourceOf;
  for (auto [source, target] : op.getPairList()) {
    if (source < 0 || source >= size || target < 0 || target >= size)
      return op.emitOpError()
             << "pair [" << source << ", " << target
             << "] names a member outside groups of size " << size;
    sourceOf[target] = source;
  }
  results = perDevice(mesh, [&](int64_t device) {
    std::vector<int64_t> coords = mesh.coordinates(device);
    auto it = sourceOf.find(groupIndex(mesh, coords, axes));
    if (it != sourceOf.end())
      setGroupIndex(mesh, coords, axes, it->second);
    return *operands[mesh.deviceId(coords)][0];
  });
  return success();
}

/// Each device's row-major index on the op's axes: no communication, but a
/// value that differs per device.
static LogicalResult evalOverGroups(AxisIndexOp op, const MeshSpec &mesh,
                                    DeviceOperands, const AxisList &axes,
                                    DeviceResults &results) {
  results = perDevice(mesh, [&](int64_t device) {
    auto index =
        static_cast<double>(groupIndex(mesh, mesh.coordinates(device), axes));
    return Tensor({}, ref::DType::F32, index);
  });
  return success();
}

/// The axes whose groups all_reduce, all_to_all, collective_permute and
/// axis_index work over.
static ArrayAttr groupAxesOf(AllReduceOp op) {
  return op.getReductionAxesAttr();
}
template <typename OpTy> static ArrayAttr groupAxesOf(OpTy op) {
  return op.getAxesAttr();
}

/// The ops over the groups of one list of axes: `evalOverGroups` with the
/// axes as indices.
template <typename OpTy>
static std::enable_if_t<
    llvm::is_one_of<OpTy, AllReduceOp, AllToAllOp, CollectivePermuteOp,
                    CollectivePermuteStartOp, AxisIndexOp>::value,
    LogicalResult>
evalCollective(OpTy op, const MeshSpec &mesh, DeviceOperands operands,
               DeviceResults &results) {
  FailureOr<AxisList> axes = getAxisIndices(op, mesh, groupAxesOf(op));
  if (failed(axes))
    return failure();
  return evalOverGroups(op, mesh, operands, *axes, results);
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

namespace {
/// Forwards the interface to the `evalCollective` overload of `OpTy`.
template <typename OpTy>
struct CollectiveEvaluableModel
    : public CollectiveEvaluableOpInterface::ExternalModel<
          CollectiveEvaluableModel<OpTy>, OpTy> {
  MeshAttr getCollectiveMesh(Operation *op) const {
    FlatSymbolRefAttr name = cast<OpTy>(op).getMeshAttr();
    auto mesh = SymbolTable::lookupNearestSymbolFrom<MeshOp>(op, name);
    if (!mesh) {
      op->emitOpError() << "refers to " << name << ", which is not an sd.mesh";
      return {};
    }
    return mesh.getMesh();
  }

  LogicalResult evaluateCollective(Operation *op, const MeshSpec &mesh,
                                   DeviceOperands operands,
                                   DeviceResults &results) const {
    return evalCollective(cast<OpTy>(op), mesh, operands, results);
  }
};
} // namespace

template <typename... OpTys>
static void attachCollectiveModels(MLIRContext *context) {
  (OpTys::template attachInterface<CollectiveEvaluableModel<OpTys>>(*context),
   ...);
}

void mlir::sd::registerCollectiveEvaluatorInterfaces(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, SDDialect *) {
    attachCollectiveModels<AllGatherOp, AllSliceOp, ReduceScatterOp,
                           AllReduceOp, AllToAllOp, CollectivePermuteOp,
                           CollectivePermuteStartOp, AxisIndexOp>(context);
  });
}
