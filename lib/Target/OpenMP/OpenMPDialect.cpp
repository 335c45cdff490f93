//===- OpenMPDialect.cpp - the OpenMP target's plan attributes ------------===//
//
// The `sd_omp` dialect: the typed attributes of sd-lower-to-openmp's kernel
// plan, and the check that `sd_omp.plan` holds one of them.
//
//===----------------------------------------------------------------------===//

#include "sd/Target/OpenMP/OpenMPDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sd::openmp;

#include "sd/Target/OpenMP/OpenMPDialect.cpp.inc"
#include "sd/Target/OpenMP/OpenMPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "sd/Target/OpenMP/OpenMPAttrs.cpp.inc"

void SDOMPDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "sd/Target/OpenMP/OpenMPAttrs.cpp.inc"
      >();
}

LogicalResult SDOMPDialect::verifyOperationAttribute(Operation *op,
                                                     NamedAttribute attr) {
  if (attr.getName() != kPlanAttrName)
    return op->emitError("unknown sd_omp attribute '")
           << attr.getName().getValue() << "'";
  if (!isa<KernelAttr, InKernelAttr, KernelOutputAttr, InlineAttr>(
          attr.getValue()))
    return op->emitError("'")
           << kPlanAttrName << "' must be #sd_omp.kernel, #sd_omp.in_kernel, "
           << "#sd_omp.kernel_output or #sd_omp.inline, not "
           << attr.getValue();
  return success();
}

LogicalResult KernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 int64_t id, KernelKind) {
  if (id < 0)
    return emitError() << "kernel id " << id << " is negative";
  return success();
}

LogicalResult InKernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t id) {
  if (id < 0)
    return emitError() << "kernel id " << id << " is negative";
  return success();
}

LogicalResult
KernelOutputAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         int64_t id) {
  if (id < 0)
    return emitError() << "kernel id " << id << " is negative";
  return success();
}
