//===- MaterializeMesh.cpp - create the sd.mesh op ------------------------===//
//
// Turns a MaxDiffusion-style mesh specification into the module's mesh op.
//
//===----------------------------------------------------------------------===//

#include "sd/IR/SDOps.h"
#include "sd/Passes/Passes.h"
#include "sd/Sharding/Mesh.h"

#include "mlir/IR/Builders.h"

namespace mlir::sd {
#define GEN_PASS_DEF_MATERIALIZEMESH
#include "sd/Passes/Passes.h.inc"
} // namespace mlir::sd

using namespace mlir;
using namespace mlir::sd;

namespace {
struct MaterializeMeshPass
    : public mlir::sd::impl::MaterializeMeshBase<MaterializeMeshPass> {
  using MaterializeMeshBase::MaterializeMeshBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ::sd::MeshOptions options;
    if (devices > 0)
      options.devices = devices;
    if (processes > 0)
      options.processes = processes;
    absl::StatusOr<::sd::MeshSpec> spec =
        ::sd::parseMesh(meshSpec, dcnMeshSpec, options);
    if (!spec.ok()) {
      emitError(module.getLoc()) << std::string(spec.status().message());
      return signalPassFailure();
    }

    MLIRContext *ctx = &getContext();
    SmallVector<MeshAxisAttr> axes;
    for (const ::sd::MeshAxis &axis : spec->axes())
      axes.push_back(MeshAxisAttr::get(ctx, StringAttr::get(ctx, axis.name),
                                       axis.size(), axis.dcn));

    // Replace an existing mesh of the same name so re-running is harmless.
    if (auto existing = module.lookupSymbol<MeshOp>(meshName))
      existing.erase();
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    MeshOp::create(builder, module.getLoc(), meshName,
                   MeshAttr::get(ctx, axes));
  }
};
} // namespace
