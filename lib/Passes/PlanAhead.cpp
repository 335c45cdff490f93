//===- PlanAhead.cpp - The planner's work ahead of pricing ----------------===//
//
// The part of the search (PlanSearch.h) that makes the plans without remat
// ready to price: in waves of units, their shardings propagated (a family's
// meshes sharing a propagation where they compare alike) and bounded from
// below, the partitions the table so far does not rule out made, on the
// context's threads where it has them, each family on one.
//
//===----------------------------------------------------------------------===//

#include "PlanSearch.h"

#include "sd/IR/SDOps.h"

#include "sd/Sharding/Network.h"

#include "llvm/Support/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <deque>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::planner;

thread_local bool planner::detail::routed = false;
thread_local std::string *planner::detail::routedError = nullptr;

using planner::detail::routed;
using planner::detail::routedError;

void Search::priceNones(ArrayRef<Plan *> nones) {
  // Units: the plans of one attention, rule set and set of mesh axes,
  // whose partitions fall in the same families (one per copy of the
  // blocks), in the order of their first plan.
  std::vector<std::vector<Plan *>> units;
  std::map<std::tuple<::sd::AttentionKind, std::string, std::string>, size_t>
      unitOf;
  for (Plan *plan : nones) {
    std::string axes;
    for (const ::sd::MeshAxis &axis : plan->meshSpec.axes())
      axes += axis.name + ",";
    auto [found, inserted] = unitOf.try_emplace(
        {plan->attention, plan->rules->rules.name, axes}, units.size());
    if (inserted)
      units.emplace_back();
    units[found->second].push_back(plan);
  }
  // The units a wave bounds and partitions at once: one on one thread (the
  // table read before each), enough on threads to keep them all busy (a
  // family's partitions run on one). What is priced and pruned is the same
  // either way: the plans are priced unit by unit, and a plan the table
  // rules out at its turn was over the table already when its wave was
  // partitioned, or was partitioned for nothing.
  MLIRContext *context = module.getContext();
  size_t perWave = 1;
  if (context->isMultithreadingEnabled())
    perWave = 8 * context->getThreadPool().getMaxConcurrency();
  for (size_t first = 0; first < units.size(); first += perWave) {
    std::vector<Plan *> wave;
    for (size_t unit = first; unit < std::min(first + perWave, units.size());
         ++unit)
      wave.insert(wave.end(), units[unit].begin(), units[unit].end());
    // The wave's shardings, each family's on one thread, and its bounds.
    std::vector<PartitionJob> jobs;
    if (!options.wholeProgram)
      jobs = pendingPartitions(wave);
    boundAhead(jobs);
    std::map<PartitionKey, const PartitionJob *> byKey;
    for (const PartitionJob &job : jobs)
      byKey.emplace(job.key, &job);
    // Nothing bounded (options.wholeProgram): every plan is priced.
    if (!jobs.empty())
      for (Plan *plan : wave)
        plan->lowerBound = lowerBoundOf(*plan, byKey);
    // Partitioned: the plans the table so far does not rule out (it only
    // tightens while the wave is priced), on the threads; the families'
    // last partitions take their propagated programs, and the rest go.
    if (!options.wholeProgram) {
      double limit = bound();
      std::vector<Plan *> open;
      for (Plan *plan : wave)
        if (plan->lowerBound <= limit)
          open.push_back(plan);
      std::vector<PartitionJob> partitions = pendingPartitions(open);
      for (const PartitionJob &job : partitions)
        ++families[familyKey(job.step, job.variant, job.mesh)].pending;
      partitionAhead(partitions);
      for (const PartitionJob &job : jobs) {
        Family &family = families[familyKey(job.step, job.variant, job.mesh)];
        dropPropagated(family);
        family.pending = 0;
      }
    }
    for (Plan *plan : wave) {
      // Every plan of the group takes at least its bound, so none of them
      // can make the table.
      if (plan->lowerBound > bound()) {
        plan->boundedOut = true;
        continue;
      }
      priceOne(*plan);
      // What the pruning rests on, checked on every plan it prices.
      if (plan->time && plan->lowerBound > plan->time->matmulSeconds &&
          !boundBroken) {
        boundBroken = true;
        emitError(module.getLoc())
            << "internal error: the planner's lower bound for " << plan->mesh()
            << ", " << ::sd::attentionKindName(plan->attention) << " ("
            << ::sd::formatSeconds(plan->lowerBound)
            << ") exceeds the time of its matrix products ("
            << ::sd::formatSeconds(plan->time->matmulSeconds)
            << "), so the table may leave out better plans; please report "
               "it";
      }
    }
  }
}

std::vector<Search::PartitionJob>
Search::pendingPartitions(ArrayRef<Plan *> plans) {
  // In the order pricing them one by one makes them (the first plan of a
  // key gives its pipeline); the mesh-free steps they copy are built here,
  // one by one.
  std::vector<ModuleOp> programs;
  programs.push_back(chains.empty() ? module : sampleBlocks);
  std::vector<PartitionJob> jobs;
  std::set<PartitionKey> queued;
  for (Plan *plan : plans) {
    PipelineOptions variant = variantOf(*plan);
    std::optional<PartitionKey> after;
    for (auto [index, program] : llvm::enumerate(programs)) {
      std::string error;
      FailureOr<ModuleOp> step = preparedStep(program, variant, error);
      if (failed(step))
        break;
      PartitionKey key = partitionKey(*step, variant, plan->meshSpec);
      if (!partitioned.count(key) && queued.insert(key).second)
        jobs.push_back({key,
                        *step,
                        variant,
                        plan->meshSpec,
                        {},
                        static_cast<int64_t>(index),
                        after});
      after = key;
    }
  }
  return jobs;
}

/// The sizes of `mesh` as the propagation reads them.
static propagation::MeshShape meshShape(const ::sd::MeshSpec &mesh) {
  propagation::MeshShape shape;
  for (const ::sd::MeshAxis &axis : mesh.axes())
    shape.axisSizes.push_back(axis.size());
  return shape;
}

void Search::loadDialects(ArrayRef<PartitionJob *> jobs) {
  MLIRContext *context = module.getContext();
  if (!context->isMultithreadingEnabled())
    return;
  // Loading a dialect changes the context, which the threads only read.
  DialectRegistry dialects;
  for (const PartitionJob *job : jobs) {
    std::unique_ptr<PassManager> pm = newPassManager();
    buildMeshPipeline(*pm, job->variant);
    pm->getDependentDialects(dialects);
  }
  context->appendDialectRegistry(dialects);
  for (StringRef name : dialects.getDialectNames())
    context->getOrLoadDialect(name);
}

void Search::perFamily(ArrayRef<std::vector<PartitionJob *> *> work,
                       function_ref<void(PartitionJob &)> each) {
  MLIRContext *context = module.getContext();
  // Each job works on its own detached copies of a step the others only
  // read. Diagnostics go to the first error of the job the emitting thread
  // runs (quietly), through one handler: a handler of each job's own on the
  // context's stack would take the others' diagnostics too.
  ScopedDiagnosticHandler route(context, [](Diagnostic &diag) {
    if (routedError && routedError->empty() &&
        diag.getSeverity() == DiagnosticSeverity::Error)
      *routedError = diag.str();
    return success();
  });
  std::atomic<size_t> next{0};
  auto run = [&] {
    routed = true;
    for (size_t i = next++; i < work.size(); i = next++)
      for (PartitionJob *job : *work[i])
        each(*job);
    routed = false;
  };
  if (!context->isMultithreadingEnabled())
    return run();
  llvm::ThreadPoolInterface &pool = context->getThreadPool();
  llvm::ThreadPoolTaskGroup tasks(pool);
  for (size_t i = 0,
              n = std::min<size_t>(work.size(), pool.getMaxConcurrency());
       i < n; ++i)
    tasks.async(run);
  tasks.wait();
}

void Search::boundAhead(std::vector<PartitionJob> &jobs) {
  if (options.wholeProgram || jobs.empty())
    return;
  std::vector<PartitionJob *> all;
  std::map<FamilyKey, std::vector<PartitionJob *>> byFamily;
  std::vector<std::vector<PartitionJob *> *> work;
  for (PartitionJob &job : jobs) {
    all.push_back(&job);
    FamilyKey key = familyKey(job.step, job.variant, job.mesh);
    // Here, before the threads: they only look the families up.
    families.try_emplace(key);
    auto [found, inserted] = byFamily.try_emplace(key);
    if (inserted)
      work.push_back(&found->second);
    found->second.push_back(&job);
  }
  loadDialects(all);
  // A family's jobs on one thread, in order: the later ones may take the
  // earlier ones' propagations.
  perFamily(work, [&](PartitionJob &job) {
    Family &family =
        families.find(familyKey(job.step, job.variant, job.mesh))->second;
    propagation::MeshShape shape = meshShape(job.mesh);
    auto known = findAlike(family, shape);
    if (known == family.propagated.end()) {
      // Where it fails, the partition propagates again and says why.
      std::vector<uint64_t> queries;
      std::string error;
      FailureOr<ModuleOp> fresh =
          propagate(job.step, job.variant, queries, error);
      if (failed(fresh))
        return;
      family.propagated.push_back({shape, std::move(queries), *fresh});
      known = std::prev(family.propagated.end());
    }
    ++sharded;
    auto step = known->module.lookupSymbol<func::FuncOp>("train_step");
    if (step && chains.empty()) {
      if (FailureOr<ProductFlops> flops =
              computeShardedProductFlops(step, job.mesh);
          succeeded(flops))
        job.flops = *flops;
    } else if (step) {
      // Extrapolated as the reports are (extrapolateBlocks): each op's
      // FLOPs are those its partition runs, or fewer.
      FailureOr<SampleProductFlops> sample =
          computeSampleProductFlops(step, job.mesh, int64_t(chains.size()));
      if (failed(sample))
        return;
      ProductFlops whole = sample->base;
      for (auto [middle, chain] : llvm::zip(sample->middle, chains)) {
        whole.f32 += (chain.calls - kBaseBlocks) * middle.f32;
        whole.bf16 += (chain.calls - kBaseBlocks) * middle.bf16;
      }
      job.flops = whole;
    }
  });
}

double
Search::lowerBoundOf(const Plan &plan,
                     const std::map<PartitionKey, const PartitionJob *> &jobs) {
  PipelineOptions variant = variantOf(plan);
  auto flopsOf = [&](ModuleOp program) -> std::optional<ProductFlops> {
    std::string error;
    FailureOr<ModuleOp> step = preparedStep(program, variant, error);
    if (failed(step))
      return std::nullopt;
    auto job = jobs.find(partitionKey(*step, variant, plan.meshSpec));
    return job == jobs.end() ? std::nullopt : job->second->flops;
  };
  std::optional<ProductFlops> flops =
      flopsOf(chains.empty() ? module : sampleBlocks);
  if (!flops)
    return 0;
  double f32 = double(flops->f32), bf16 = double(flops->bf16);
  // Every f32 FLOP at the fastest of the rates predictStepTime charges
  // them at; no other op, no communication.
  const ::sd::DeviceSpec &device = options.profile.device;
  double rate = std::max({device.f32Rate(::sd::ProductSize::Small),
                          device.f32Rate(::sd::ProductSize::Medium),
                          device.f32Rate(::sd::ProductSize::Large),
                          device.attentionRate(), device.transposedLhsRate()});
  double seconds = 0;
  if (rate > 0)
    seconds += std::max(f32, 0.0) / rate;
  if (device.bf16Flops > 0)
    seconds += std::max(bf16, 0.0) / device.bf16Flops;
  // A hair under, so that rounding never lifts it above the price it
  // bounds.
  return seconds * (1 - 1e-9);
}

void Search::partitionAhead(std::vector<PartitionJob> &jobs) {
  if (options.wholeProgram || jobs.empty())
    return;
  std::vector<PartitionJob *> all;
  for (PartitionJob &job : jobs)
    all.push_back(&job);
  loadDialects(all);
  // The jobs of one family run on one thread, in order (the later ones
  // may take the earlier ones' propagations); boundAhead made the
  // families' entries, so the threads only touch their own.
  // Pricing asks for a plan's copy with more blocks only once the copies
  // before it partitioned (price): the jobs run in waves, one per copy, each
  // with the jobs whose copy before partitioned, so that the same
  // partitions are made as one by one.
  std::map<PartitionKey, PartitionJob *> byKey;
  int64_t waves = 0;
  for (PartitionJob &job : jobs) {
    byKey[job.key] = &job;
    waves = std::max(waves, job.program + 1);
  }
  auto partitionedBefore = [&](const PartitionKey &key) {
    if (auto found = byKey.find(key); found != byKey.end())
      return found->second->ran && succeeded(found->second->done.report);
    auto found = partitioned.find(key);
    return found != partitioned.end() && succeeded(found->second.report);
  };
  // On threads each job may run on its own: boundAhead kept every
  // propagation the jobs need, which they only copy (sharedPropagations),
  // and the wave's are dropped after it. On one thread a family's last
  // partition takes its propagated program instead of a copy.
  sharedPropagations = module.getContext()->isMultithreadingEnabled();
  for (int64_t wave = 0; wave < waves; ++wave) {
    std::map<FamilyKey, std::vector<PartitionJob *>> byFamily;
    std::deque<std::vector<PartitionJob *>> single;
    std::vector<std::vector<PartitionJob *> *> work;
    for (PartitionJob &job : jobs) {
      if (job.program != wave)
        continue;
      if (job.after && !partitionedBefore(*job.after)) {
        // Not asked for: its family's last partition is another.
        --families[familyKey(job.step, job.variant, job.mesh)].pending;
        continue;
      }
      if (sharedPropagations) {
        work.push_back(&single.emplace_back(1, &job));
        continue;
      }
      auto [found, inserted] =
          byFamily.try_emplace(familyKey(job.step, job.variant, job.mesh));
      if (inserted)
        work.push_back(&found->second);
      found->second.push_back(&job);
    }
    perFamily(work, [&](PartitionJob &job) {
      job.done.report =
          partition(job.step, job.variant, job.mesh, job.done.error);
      job.ran = true;
    });
  }
  sharedPropagations = false;
  for (PartitionJob &job : jobs)
    if (job.ran)
      partitioned.emplace(job.key, std::move(job.done));
}

std::vector<Search::Propagated>::iterator
Search::findAlike(Family &family, const propagation::MeshShape &shape) {
  return llvm::find_if(family.propagated, [&](const Propagated &known) {
    return propagation::MeshShape::answerAlike(known.mesh, shape,
                                               known.queries);
  });
}

void Search::dropPropagated(Family &family) {
  for (Propagated &known : family.propagated)
    known.module.erase();
  family.propagated.clear();
}

Search::FamilyKey Search::familyKey(ModuleOp step,
                                    const PipelineOptions &variant,
                                    const ::sd::MeshSpec &mesh) {
  std::string names;
  for (const ::sd::MeshAxis &axis : mesh.axes())
    names += axis.name + ",";
  return {step.getOperation(), variant.rules ? variant.rules->name : "", names};
}

FailureOr<CostReport> Search::partition(ModuleOp step,
                                        const PipelineOptions &variant,
                                        const ::sd::MeshSpec &mesh,
                                        std::string &error) {
  propagation::MeshShape shape = meshShape(mesh);
  auto materialize = [&](OpPassManager &pm) {
    addMaterializeMeshPass(pm, variant);
    addPartitionPasses(pm, variant);
  };
  if (sharedPropagations) {
    // Other threads read the same family: a copy of its propagation, or
    // (where it failed, to say why) one of this job's own, kept by none.
    Family &family = families.find(familyKey(step, variant, mesh))->second;
    auto known = findAlike(family, shape);
    ModuleOp propagated;
    if (known != family.propagated.end()) {
      propagated = copyIntoDetachedModule(known->module);
    } else {
      std::vector<uint64_t> queries;
      FailureOr<ModuleOp> fresh = propagate(step, variant, queries, error);
      if (failed(fresh))
        return failure();
      propagated = *fresh;
    }
    return ownedReport(propagated, materialize, error);
  }
  // Not a reference: partitionAhead's threads may add other families.
  Family *family = &families[familyKey(step, variant, mesh)];
  // A partition boundAhead did not list needs the shardings now.
  if (family->pending == 0)
    ++sharded;
  // The family's last listed partition keeps nothing for later ones.
  bool keep = family->pending != 1;
  if (family->pending > 0)
    --family->pending;
  ModuleOp propagated;
  auto known = findAlike(*family, shape);
  if (known != family->propagated.end()) {
    propagated = known->module;
    if (keep) {
      propagated = copyIntoDetachedModule(propagated);
    } else {
      family->propagated.erase(known);
      dropPropagated(*family);
    }
  } else {
    if (!keep)
      dropPropagated(*family);
    std::vector<uint64_t> queries;
    FailureOr<ModuleOp> fresh = propagate(step, variant, queries, error);
    if (failed(fresh))
      return failure();
    propagated = *fresh;
    if (keep)
      family->propagated.push_back(
          {shape, std::move(queries), copyIntoDetachedModule(propagated)});
  }
  // The shardings on this mesh: its mesh op replaces the one propagated
  // with, and the partition reads the sizes from there.
  return ownedReport(propagated, materialize, error);
}

FailureOr<ModuleOp> Search::propagate(ModuleOp step,
                                      const PipelineOptions &variant,
                                      std::vector<uint64_t> &queries,
                                      std::string &error) {
  ModuleOp propagated = copyIntoDetachedModule(step);
  std::unique_ptr<PassManager> pm = newPassManager();
  buildMeshPropagationPipeline(*pm, variant);
  if (failed(run(*pm, propagated, error))) {
    propagated.erase();
    return failure();
  }
  ++propagations;
  propagated.walk([&](func::FuncOp func) {
    if (auto recorded = func->getAttrOfType<DenseI64ArrayAttr>(
            SDDialect::kSizeQueriesAttrName)) {
      queries.insert(queries.end(), recorded.asArrayRef().begin(),
                     recorded.asArrayRef().end());
      func->removeAttr(SDDialect::kSizeQueriesAttrName);
    }
  });
  return propagated;
}

