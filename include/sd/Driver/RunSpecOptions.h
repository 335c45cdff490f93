//===- RunSpecOptions.h - A RunSpec as compiler and run options -*- C++ -*-===//
//
// The bridge from the resolved run specification (sd/Config/RunSpec.h) to
// what the compiler and the training run take: PipelineOptions for sdopt's
// default pipeline and sdrun's training step, TrainRunOptions for sdrun's
// run. Fills structs only, so sdopt links it without the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_RUNSPECOPTIONS_H
#define SD_DRIVER_RUNSPECOPTIONS_H

#include "sd/Config/RunSpec.h"
#include "sd/Driver/TrainRun.h"
#include "sd/Passes/Passes.h"

namespace mlir::sd {

/// The default pipeline's mesh, logical axis rules, batch, remat policy and
/// optimizer from `spec`. What the pipeline runs (train, propagate,
/// partition) is left to the caller.
PipelineOptions pipelineOptions(const ::sd::RunSpec &spec);

/// What the planner varies (sdopt --plan, sdrun --mesh=auto): `values`
/// resolved for one device, its mesh flags left out (the planner sets each
/// candidate's), and the training step's pipeline of it.
struct PlanningBase {
  ::sd::RunSpec spec;
  PipelineOptions pipeline;
  /// The search's options from the spec: the remat policy and attention
  /// the flags or the config set (not their defaults) restrict the search to
  /// themselves; the caller sets the devices, hosts and profile.
  PlanOptions plan;
};
absl::StatusOr<PlanningBase> planningBase(const ::sd::RunSpecFlags &values);

/// The threads, memory budgets and program cache of `spec`'s run (one
/// process: the tool adds an MPI rank's process, transport and group).
DeviceSettings deviceSettings(const ::sd::RunSpec &spec);

/// sdrun's training run of `spec`: the training step's pipeline and the
/// run settings.
TrainRunOptions trainRunOptions(const ::sd::RunSpec &spec);

/// The line sdrun and sdsample print under mixed precision: the dtypes, the
/// gradients' reduction dtype (when `training`), and how bf16 products run
/// on this CPU; "" when everything is f32.
std::string describePrecision(const PipelineOptions &options, bool training);

} // namespace mlir::sd

#endif // SD_DRIVER_RUNSPECOPTIONS_H
