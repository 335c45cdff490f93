//===- MemoryPlan.cpp - A process's predicted and measured memory ---------===//

#include "sd/Driver/MemoryPlan.h"

#include "sd/Runtime/Runtime.h"
#include "sd/Support/ToolMain.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cstdlib>
#include <sys/resource.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::sd;
namespace rt = ::sd::rt;

/// Largest first; equal sizes keep their order.
static void sortLargestFirst(std::vector<MemoryItem> &items) {
  std::stable_sort(items.begin(), items.end(),
                   [](const MemoryItem &a, const MemoryItem &b) {
                     return a.bytes > b.bytes;
                   });
}

std::vector<MemoryItem> ProcessMemory::items() const {
  std::vector<MemoryItem> items = {
      {"parameters", devices * perDevice.parameters},
      {"optimizer state", devices * perDevice.optimizerState},
      {"activations and gradients", devices * perDevice.activationPeak},
      {"inputs", devices * perDevice.inputs},
      {"offloaded values", devices * perDevice.hostPeak},
      {"staging", staging},
      {"runtime and compiler", overhead}};
  sortLargestFirst(items);
  return items;
}

int64_t ProcessMemory::total() const {
  return devices * perDevice.total() + staging + overhead;
}

ProcessMemory mlir::sd::predictProcessMemory(const TrainProgram &program,
                                             int64_t devices, int64_t overhead,
                                             const StagingOptions &options) {
  ProcessMemory memory;
  memory.devices = devices;
  memory.perDevice = program.memory;
  memory.overhead = overhead;
  int64_t largest = 0, inputs = 0, all = 0;
  for (const rt::ArgumentSpec &arg : program.spec.arguments) {
    all += arg.globalBytes();
    if (arg.kind == rt::ArgumentKind::Input)
      inputs += arg.globalBytes();
    else
      largest = std::max(largest, arg.globalBytes());
  }
  // Two batches in flight (the loader makes the next during a step); one
  // tensor gathered whole (twice: the pieces and the assembly) for an
  // export or a held-out evaluation; --verify's global values and the
  // reference's copy of them.
  memory.staging = 2 * inputs + 2 * largest;
  if (options.verify)
    memory.staging += 2 * all;
  return memory;
}

/// ". At the activation peak each device holds X (N MiB), Y (M MiB)" when
/// the activations are among the three largest items, else "".
static std::string peakBuffersText(const DeviceMemory &device,
                                   std::vector<MemoryItem> items) {
  sortLargestFirst(items);
  bool listed = false;
  for (size_t i = 0; i < items.size() && i < 3; ++i)
    listed |= items[i].name == "activations and gradients";
  if (!listed || device.peakBuffers.empty())
    return "";
  std::string text = ". At the activation peak each device holds ";
  for (size_t i = 0; i < device.peakBuffers.size() && i < 3; ++i)
    text += (i ? ", " : "") + device.peakBuffers[i].first + " (" +
            rt::formatBytes(device.peakBuffers[i].second) + ")";
  return text;
}

absl::Status mlir::sd::checkMemory(const ProcessMemory &memory,
                                   const DeviceSettings &settings,
                                   int64_t processesOnHost) {
  // The three largest items, largest first.
  auto largest = [&](std::vector<MemoryItem> items) {
    sortLargestFirst(items);
    std::string text;
    for (size_t i = 0; i < items.size() && i < 3; ++i) {
      if (items[i].bytes == 0)
        break;
      text += (i ? ", " : "") + items[i].name + " " +
              rt::formatBytes(items[i].bytes);
    }
    return text;
  };
  const DeviceMemory &device = memory.perDevice;
  int64_t onDevice = device.total() - device.hostPeak;
  std::vector<MemoryItem> deviceItems = {
      {"parameters", device.parameters},
      {"optimizer state", device.optimizerState},
      {"activations and gradients", device.activationPeak},
      {"inputs", device.inputs}};
  if (settings.deviceMemoryBudget > 0 && onDevice > settings.deviceMemoryBudget)
    return absl::ResourceExhaustedError(
        "each device is predicted to need " + rt::formatBytes(onDevice) +
        " of device memory, more than --device-memory=" +
        rt::formatBytes(settings.deviceMemoryBudget) + " (" +
        largest(deviceItems) +
        "); use more devices, a remat policy or a smaller batch" +
        peakBuffersText(device, deviceItems));
  int64_t total = memory.total();
  std::vector<MemoryItem> items = memory.items();
  if (settings.processMemoryLimit > 0) {
    if (total > settings.processMemoryLimit)
      return absl::ResourceExhaustedError(
          "this process is predicted to need " + rt::formatBytes(total) +
          ", more than --host-memory-limit=" +
          rt::formatBytes(settings.processMemoryLimit) + " (" + largest(items) +
          ")" + peakBuffersText(device, items));
    return absl::OkStatus();
  }
  int64_t machine = machineMemoryBytes();
  int64_t share = machine / std::max<int64_t>(1, processesOnHost);
  if (machine > 0 && total > share)
    return absl::ResourceExhaustedError(
        "this process is predicted to need " + rt::formatBytes(total) +
        ", more than the " + rt::formatBytes(share) +
        " this machine has for each of its " + std::to_string(processesOnHost) +
        " process" + (processesOnHost == 1 ? "" : "es") + " (" +
        largest(items) +
        "); shard over more devices or processes, or give "
        "--host-memory-limit to run anyway" +
        peakBuffersText(device, items));
  return absl::OkStatus();
}

absl::Status mlir::sd::agreeAcrossProcesses(rt::ProcessGroup *group,
                                            const absl::Status &status) {
  if (!group || group->size() <= 1)
    return status;
  // "CODE MESSAGE", code 0 for OK.
  std::string mine = std::to_string(static_cast<int>(status.code())) + " " +
                     std::string(status.message());
  absl::StatusOr<std::vector<std::string>> all = group->allGather(mine);
  if (!all.ok())
    return all.status();
  for (size_t rank = 0; rank < all->size(); ++rank) {
    llvm::StringRef text = (*all)[rank];
    auto [codeText, message] = text.split(' ');
    int code = 0;
    if (codeText.getAsInteger(10, code) || code == 0)
      continue;
    std::string prefix = static_cast<int64_t>(rank) == group->rank()
                             ? std::string()
                             : "process " + std::to_string(rank) + ": ";
    // One error for the whole job: process 0 prints it, the others fail
    // without a word.
    if (group->rank() != 0)
      return ::sd::reportedFailure(prefix + message.str());
    return absl::Status(static_cast<absl::StatusCode>(code),
                        prefix + message.str());
  }
  return absl::OkStatus();
}

/// A "Key:   123 kB" line of /proc/self/status, in bytes.
static int64_t statusBytes(llvm::StringRef key) {
  auto buffer = llvm::MemoryBuffer::getFileAsStream("/proc/self/status");
  if (!buffer)
    return 0;
  llvm::SmallVector<llvm::StringRef> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (!line.consume_front(key) || !line.consume_front(":"))
      continue;
    uint64_t kib = 0;
    if (line.trim().split(' ').first.getAsInteger(10, kib))
      return 0;
    return static_cast<int64_t>(kib) * 1024;
  }
  return 0;
}

int64_t mlir::sd::residentBytes() { return statusBytes("VmRSS"); }

int64_t mlir::sd::peakResidentBytes() { return statusBytes("VmHWM"); }

ProcessUsage
mlir::sd::ProcessUsage::operator-(const ProcessUsage &earlier) const {
  ProcessUsage d = *this;
  d.pageFaults -= earlier.pageFaults;
  d.majorPageFaults -= earlier.majorPageFaults;
  d.involuntarySwitches -= earlier.involuntarySwitches;
  d.userSeconds -= earlier.userSeconds;
  d.systemSeconds -= earlier.systemSeconds;
  return d;
}

ProcessUsage &mlir::sd::ProcessUsage::operator+=(const ProcessUsage &other) {
  pageFaults += other.pageFaults;
  majorPageFaults += other.majorPageFaults;
  involuntarySwitches += other.involuntarySwitches;
  userSeconds += other.userSeconds;
  systemSeconds += other.systemSeconds;
  return *this;
}

ProcessUsage mlir::sd::processUsage() {
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0)
    return {};
  auto seconds = [](const struct timeval &t) {
    return static_cast<double>(t.tv_sec) +
           1e-6 * static_cast<double>(t.tv_usec);
  };
  ProcessUsage u;
  u.pageFaults = usage.ru_minflt + usage.ru_majflt;
  u.majorPageFaults = usage.ru_majflt;
  u.involuntarySwitches = usage.ru_nivcsw;
  u.userSeconds = seconds(usage.ru_utime);
  u.systemSeconds = seconds(usage.ru_stime);
  return u;
}

int64_t mlir::sd::machineMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<int64_t>(pages) * size : 0;
}

int64_t mlir::sd::processesOnThisHost() {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MPI_LOCAL_NRANKS"})
    if (const char *value = std::getenv(name)) {
      long long n = std::atoll(value);
      if (n > 0)
        return n;
    }
  return 1;
}
