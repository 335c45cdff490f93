//===- VjpModels.h - how each sd op differentiates --------------*- C++ -*-===//
//
// VjpOpInterface's implementations belong to reverse-mode autodiff, not to
// the dialect: the autodiff library attaches them as external models.
//
//===----------------------------------------------------------------------===//

#ifndef SD_AUTODIFF_VJPMODELS_H
#define SD_AUTODIFF_VJPMODELS_H

namespace mlir {
class DialectRegistry;

namespace sd {
/// Attaches VjpOpInterface to every sd op with a float operand (all but the
/// mesh, constant, iota, collectives and axis_index). sd-differentiate adds
/// it to its dependent registry; tools add it up front
/// (registerAllSDExtensions).
void registerVjpModels(DialectRegistry &registry);
} // namespace sd
} // namespace mlir

#endif // SD_AUTODIFF_VJPMODELS_H
