//===- OpenMPDialect.h - the OpenMP target's plan attributes ----*- C++ -*-===//
//
// The `sd_omp` dialect and the typed attributes of the kernel plan that
// sd-lower-to-openmp records under `sd_omp.plan` (see OpenMPDialect.td).
//
//===----------------------------------------------------------------------===//

#ifndef SD_TARGET_OPENMP_OPENMPDIALECT_H
#define SD_TARGET_OPENMP_OPENMPDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Operation.h"

#include "sd/Target/OpenMP/OpenMPDialect.h.inc"
#include "sd/Target/OpenMP/OpenMPEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "sd/Target/OpenMP/OpenMPAttrs.h.inc"

#include <optional>

namespace mlir::sd::openmp {

/// The plan of `op`: a KernelAttr, InKernelAttr, KernelOutputAttr or
/// InlineAttr; null when
/// the op has none.
inline Attribute getPlan(Operation *op) {
  return op->getAttr(SDOMPDialect::kPlanAttrName);
}

/// The kernel whose code computes `op` (as its root, fused into it, or as
/// one of its extra outputs); none for inline and unplanned ops.
inline std::optional<int64_t> getKernelId(Operation *op) {
  Attribute plan = getPlan(op);
  if (auto root = dyn_cast_if_present<KernelAttr>(plan))
    return root.getId();
  if (auto member = dyn_cast_if_present<InKernelAttr>(plan))
    return member.getId();
  if (auto output = dyn_cast_if_present<KernelOutputAttr>(plan))
    return output.getId();
  return std::nullopt;
}

/// "k12": the name of kernel 12's function and of its span in a trace.
inline std::string getKernelName(int64_t id) {
  return "k" + std::to_string(id);
}

} // namespace mlir::sd::openmp

#endif // SD_TARGET_OPENMP_OPENMPDIALECT_H
