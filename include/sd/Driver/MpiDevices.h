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

namespace mlir::sd {

/// Makes `device` the devices of process `job.rank`: the MPI transport and
/// process group, with the run's --collective-timeout. The process group's
/// errors.
inline absl::Status joinMpiDevices(DeviceSettings &device,
                                   const ::sd::rt::MpiJob &job,
                                   const ::sd::RunSettings &run) {
  ::sd::rt::MpiTransportOptions transport;
  if (run.collectiveTimeout)
    transport.collectiveTimeoutSeconds = *run.collectiveTimeout;
  absl::StatusOr<::sd::rt::MpiConnections> connections =
      ::sd::rt::connectMpi(transport);
  if (!connections.ok())
    return connections.status();
  device.process = job.rank;
  device.transportFactory = std::move(connections->transportFactory);
  device.processGroup = std::move(connections->processGroup);
  return absl::OkStatus();
}

} // namespace mlir::sd

#endif // SD_DRIVER_MPIDEVICES_H
