//===- MemoryPlan.h - A process's predicted and measured memory -*- C++ -*-===//
//
// Before sdrun compiles anything, it predicts the resident memory of each
// of its processes from the cost model's per-device figures (parameters,
// optimizer state, inputs, the activation and gradient peak, offloaded
// values) times the devices the process runs, plus the driver's own
// buffers (the batches in flight, the one tensor an export or a held-out
// evaluation gathers at a time, --verify's global model) and the memory
// the process already holds (the compiler, the runtime, the libraries). A
// run whose prediction exceeds --device-memory, --host-memory-limit or the
// machine is refused then, naming its largest items; the run's summary
// prints the measured peak beside the prediction.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_MEMORYPLAN_H
#define SD_DRIVER_MEMORYPLAN_H

#include "sd/Driver/TrainProgram.h"

#include "sd/Runtime/Runtime.h"

#include "absl/status/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::sd {

/// One line of a prediction: what it is and its bytes in one process.
struct MemoryItem {
  std::string name;
  int64_t bytes = 0;
};

struct ProcessMemory {
  /// Devices this process runs, and one device's prediction.
  int64_t devices = 1;
  DeviceMemory perDevice;
  /// The driver's buffers in this process.
  int64_t staging = 0;
  /// What the process held before the run's state existed (measured).
  int64_t overhead = 0;
  /// The items in one process, largest first.
  std::vector<MemoryItem> items() const;
  int64_t total() const;
};

/// What the driver adds to the program's own memory.
struct StagingOptions {
  /// --verify: the global starting values and the one-device reference.
  bool verify = false;
};

/// The prediction for one process of `program`'s run, which runs
/// `devices` of its devices and already holds `overhead` bytes.
ProcessMemory predictProcessMemory(const TrainProgram &program, int64_t devices,
                                   int64_t overhead,
                                   const StagingOptions &staging);

/// Refuses a run whose prediction exceeds the per-device budget
/// (`settings.deviceMemoryBudget`, against one device's device memory),
/// the per-process limit (`settings.processMemoryLimit`) or, without one,
/// the machine's memory shared by `processesOnHost` processes; the error
/// names the limit, the prediction and its largest items.
absl::Status checkMemory(const ProcessMemory &memory,
                         const DeviceSettings &settings,
                         int64_t processesOnHost);

/// The first failure among every process's `status` (in rank order, named
/// "process N: " when it is another's), on every process of `group`: process
/// 0 gets it to print, the others as a reportedFailure (ToolMain.h), so
/// that the job prints it once. `status` itself without a group. Budgets
/// and machines may differ between ranks, so one rank's refusal must stop
/// them all.
absl::Status agreeAcrossProcesses(::sd::rt::ProcessGroup *group,
                                  const absl::Status &status);

/// This process's resident memory now and at its peak (/proc/self/status
/// VmRSS and VmHWM), 0 where it cannot be read.
int64_t residentBytes();
int64_t peakResidentBytes();

/// What the kernel counted for this process, every thread together
/// (getrusage): page faults (minor and major) and the times its threads were
/// switched out while they could run (involuntary context switches: another
/// process or thread took the core). A step that takes many of either
/// shares the machine with something, or maps fresh memory (docs/runtime.md).
struct ProcessUsage {
  int64_t pageFaults = 0, majorPageFaults = 0, involuntarySwitches = 0;
  double userSeconds = 0, systemSeconds = 0;

  ProcessUsage operator-(const ProcessUsage &earlier) const;
  ProcessUsage &operator+=(const ProcessUsage &other);
};
/// The counts so far (zeros where getrusage fails).
ProcessUsage processUsage();

/// The machine's physical memory (0 where unknown).
int64_t machineMemoryBytes();
/// The processes of this job on this host (OpenMPI's and MPICH's local
/// size; 1 outside mpirun).
int64_t processesOnThisHost();

} // namespace mlir::sd

#endif // SD_DRIVER_MEMORYPLAN_H
