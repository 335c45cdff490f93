//===- MpiMessages.h - The MPI transport's messages and groups --*- C++ -*-===//
//
// What MpiTransport.cpp builds its collectives from: the boxes one member
// sends another, a device's outstanding requests, how it polls for them, and
// the communicator of each set of DCN axes.
//
//===----------------------------------------------------------------------===//

#ifndef SD_LIB_RUNTIME_MPIMESSAGES_H
#define SD_LIB_RUNTIME_MPIMESSAGES_H

#include "sd/Runtime/ElementType.h"
#include "sd/Sharding/Mesh.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <vector>

namespace sd::rt::detail {

using Shape = std::vector<int64_t>;

/// A box that one member contributes to another: where it lies in the
/// sender's buffer and where it goes in the receiver's.
struct Piece {
  Shape srcOffset, box, dstOffset;
};

/// A piece and the member at the other end.
struct Transfer {
  int64_t peer;
  Piece piece;
};

/// Whether a box of a row-major tensor of `shape` is one contiguous range:
/// after its first dimension larger than 1 it spans whole dimensions.
bool isContiguous(const Shape &shape, const Shape &box);

/// The MPI datatype of one element of `type`: bf16 goes as its bits.
MPI_Datatype mpiType(ElementType type);

/// The row-major element offset of `offset` in a tensor of `shape`.
int64_t flatOffset(const Shape &shape, const Shape &offset);

/// Pauses between polls of MPI. Polling is what drives Open MPI's progress
/// (a large message moves in fragments, each needing a poll on both sides),
/// so a device keeps polling, yielding its core to threads that compute,
/// and only after a long wait (a peer far behind) sleeps between polls.
class Backoff {
public:
  void pause() {
    if (++polls < 64)
      return;
    if (polls == 64)
      start = std::chrono::steady_clock::now();
    if (polls % 1024 == 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::seconds(1))
      sleeping = true;
    if (sleeping)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    else
      std::this_thread::yield();
  }

private:
  int64_t polls = 0;
  bool sleeping = false;
  std::chrono::steady_clock::time_point start;
};

/// One device's messages of one collective that are not complete yet.
struct Messages {
  std::vector<MPI_Request> recvs, sends;
  /// The world rank each send goes to and each receive comes from (named
  /// when one never completes).
  std::vector<int> sendPeers, recvPeers;
};

/// The communicator of the processes a group of mesh axes spans, and each
/// world rank's rank in it (MPI_UNDEFINED outside it).
struct GroupComm {
  MPI_Comm comm = MPI_COMM_NULL;
  std::vector<int> rankOf;
};

/// The DCN axes of `mesh` (those split across processes) as a bit set.
uint32_t dcnAxisMask(const MeshSpec &mesh);

/// One communicator per set of DCN axes (built once, collectively over
/// `world`): the processes whose DCN coordinates agree outside the set.
/// Groups that differ only in ICI axes span the same processes, so a
/// collective's messages go over the communicator of its axes' DCN part.
std::map<uint32_t, GroupComm> splitGroupComms(const MeshSpec &mesh,
                                              MPI_Comm world, int rank);

} // namespace sd::rt::detail

#endif // SD_LIB_RUNTIME_MPIMESSAGES_H
