//===- Network.h - What the mesh's links cost -------------------*- C++ -*-===//
//
// The cost model's picture of the network a mesh runs on, so that sdopt can
// predict the time of a program's collectives per mesh axis before anyone
// rents machines, and sdrun can put its measured times beside them.
//
// Two kinds of link, as a MaxDiffusion mesh has them:
// - ICI, between the devices of one process (one slice): each device sends
//   at `iciBandwidth`. Inside an sd process this is shared memory.
// - DCN, between processes (hosts): the devices of one process share its
//   network interface, `dcnBandwidth` per process.
//
// A collective over a group of N devices, n of them in each process, sends
// B bytes per device (the ring convention of the report). The part of B
// bound for other processes is B·(N − n)/(N − 1); every device of a process
// sends its part at once, through the one interface. So
//
//   time = B·(n − 1)/(N − 1) / iciBandwidth
//        + devicesPerProcess · B·(N − n)/(N − 1) / dcnBandwidth
//        + steps · latency,
//
// with the ring's steps (N − 1 for all_gather, reduce_scatter and
// all_to_all, 2(N − 1) for all_reduce, 1 for collective_permute, 0 for
// all_slice) and the DCN latency when the group leaves its process, the ICI
// latency otherwise. The defaults are this runtime's shared memory (about
// 10 GB/s per device, 1 µs) and 25 Gb/s Ethernet between hosts (25 µs).
//
//===----------------------------------------------------------------------===//

#ifndef SD_SHARDING_NETWORK_H
#define SD_SHARDING_NETWORK_H

#include "sd/Sharding/Mesh.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sd {

struct NetworkModel {
  /// Bytes per second one device sends over ICI.
  double iciBandwidth = 10e9;
  /// Bytes per second one process sends over DCN (its devices share it).
  double dcnBandwidth = 25e9 / 8;
  /// Seconds per ring step.
  double iciLatency = 1e-6;
  double dcnLatency = 25e-6;
};

/// "100GB/s", "25Gb/s", "800MB/s" (decimal units; B is bytes, b bits); a
/// plain number is GB/s. Returns bytes per second. InvalidArgument naming
/// the text and `flag` for anything else, zero or negative.
absl::StatusOr<double> parseBandwidth(std::string_view text,
                                      std::string_view flag);
/// "25us", "1.5ms", "0.001s", "800ns"; a plain number is microseconds.
/// Returns seconds (zero allowed). InvalidArgument as parseBandwidth.
absl::StatusOr<double> parseLatency(std::string_view text,
                                    std::string_view flag);

/// "10.0 GB/s", "3.1 GB/s".
std::string formatBandwidth(double bytesPerSecond);
/// "12.3 µs", "4.56 ms", "1.23 s".
std::string formatSeconds(double seconds);

/// Which links a group of devices uses.
enum class Link { None, Ici, Dcn, IciAndDcn };
/// "-", "ICI", "DCN", "ICI+DCN".
const char *linkName(Link link);

/// The group of the mesh axes `axes` (indices into mesh.axes()): its size
/// N, its members in one process n, and the links it uses.
struct GroupShape {
  int64_t size = 1;
  int64_t perProcess = 1;
  Link link = Link::None;
};
GroupShape groupShape(const MeshSpec &mesh, const std::vector<int> &axes);

/// Ring steps of one collective of `kind` ("all_gather", "all_reduce",
/// "reduce_scatter", "all_to_all", "collective_permute", "all_slice") over
/// N devices; 0 for a kind it does not know.
int64_t ringSteps(std::string_view kind, int64_t groupSize);

/// The predicted seconds of `count` collectives of `kind` over `axes` that
/// send `bytesPerDevice` in all (see the file comment).
double predictCollectiveSeconds(const MeshSpec &mesh,
                                const std::vector<int> &axes,
                                std::string_view kind, int64_t count,
                                int64_t bytesPerDevice,
                                const NetworkModel &network);

} // namespace sd

#endif // SD_SHARDING_NETWORK_H
