//===- MpiDevices.h - A tool's devices as one rank of an MPI job -*- C++
//-*-===//
//
// sdrun and sdsample under mpirun: each rank runs the devices of one
// process of the mesh over the MPI transport. Header-only, so that only the
// tools that link SDRuntimeMpi see MPI.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_MPIDEVICES_H
#define SD_DRIVER_MPIDEVICES_H

#include "sd/Config/RunSpec.h"
#include "sd/Driver/TrainProgram.h"
#include "sd/Runtime/MpiTransport.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace mlir::sd {

/// Joins the MPI job mpirun started the tool in, if any
/// (rt::joinMpiJob); ranks other than 0 then print nothing but errors
/// (stderr).
inline absl::StatusOr<std::optional<::sd::rt::MpiJob>>
joinToolMpiJob(int &argc, char **&argv) {
  absl::StatusOr<std::optional<::sd::rt::MpiJob>> mpi =
      ::sd::rt::joinMpiJob(argc, argv);
  if (mpi.ok() && *mpi && (*mpi)->rank != 0) {
    llvm::outs().flush();
    ::sd::rt::discardStdout();
  }
  return mpi;
}

/// A run's flags as one rank of `job` (if set): mpirun's process count,
/// which the run spec checks against the mesh's.
inline void setMpiProcesses(::sd::RunSpecFlags &values,
                            const std::optional<::sd::rt::MpiJob> &job) {
  if (!job)
    return;
  values.processes = job->size;
  values.processesFromMpi = true;
}

/// The MPI transport and process group of this rank, with
/// --collective-timeout where given. The process group's errors.
inline absl::StatusOr<::sd::rt::MpiConnections>
connectRanks(std::optional<double> collectiveTimeout) {
  ::sd::rt::MpiTransportOptions transport;
  if (collectiveTimeout)
    transport.collectiveTimeoutSeconds = *collectiveTimeout;
  return ::sd::rt::connectMpi(transport);
}

/// Makes `device` the devices of process `job.rank`: the MPI transport and
/// process group, with the run's --collective-timeout. The process group's
/// errors.
inline absl::Status joinMpiDevices(DeviceSettings &device,
                                   const ::sd::rt::MpiJob &job,
                                   const ::sd::RunSettings &run) {
  absl::StatusOr<::sd::rt::MpiConnections> connections =
      connectRanks(run.collectiveTimeout);
  if (!connections.ok())
    return connections.status();
  device.process = job.rank;
  device.transportFactory = std::move(connections->transportFactory);
  device.processGroup = std::move(connections->processGroup);
  return absl::OkStatus();
}

} // namespace mlir::sd

#endif // SD_DRIVER_MPIDEVICES_H
