//===- collectives_bench.cpp - sd's MPI collectives vs Open MPI -----------===//
//
// Run under mpirun, one device per rank (mesh x: ici 1, dcn = ranks). For
// each collective and size, times sd's MpiTransport (through MeshRuntime and
// the program ABI, as compiled programs call it) and the Open MPI collective
// that does the same on the same buffers:
//   all_reduce      MPI_Allreduce
//   all_gather      MPI_Allgather
//   reduce_scatter  MPI_Reduce_scatter_block
//   all_to_all      MPI_Alltoall
// Sizes follow nccl-tests: the buffer of all_reduce, the gathered output of
// all_gather, the input of reduce_scatter, the whole send buffer of
// all_to_all. Operands are small integers, so every order of summation gives
// the same bits and sd's result is checked against Open MPI's.
//
// Rank 0 prints one line per measurement for bench/collectives.sh:
//   RESULT op=all_reduce ranks=2 bytes=1048576 sd_s=... mpi_s=... check=ok
// where *_s is the best time of one call over the rounds, which alternate
// between sd and Open MPI (a round: the slowest rank's time of a run of
// calls lasting about --min-time, divided by the calls).
//
// Usage: mpirun -np P sd_collectives_bench [--sizes-mib=1,4,16,64,256]
//          [--ops=all_reduce,all_gather,reduce_scatter,all_to_all]
//          [--min-time=0.2] [--rounds=3]
//
//===----------------------------------------------------------------------===//

#include "sd/Runtime/MpiTransport.h"
#include "sd/Runtime/Runtime.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace sd;
using namespace sd::rt;

namespace {

std::vector<std::string> split(const std::string &text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');)
    if (!item.empty())
      items.push_back(item);
  return items;
}

struct Options {
  std::vector<int64_t> sizesMiB = {1, 4, 16, 64, 256};
  std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter",
                                  "all_to_all"};
  double minTime = 0.2;
  int rounds = 3;
};

bool parse(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *flag) -> const char * {
      size_t n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char *v = value("--sizes-mib=")) {
      options.sizesMiB.clear();
      for (const std::string &s : split(v))
        options.sizesMiB.push_back(std::atoll(s.c_str()));
    } else if (const char *v = value("--ops=")) {
      options.ops = split(v);
    } else if (const char *v = value("--min-time=")) {
      options.minTime = std::atof(v);
    } else if (const char *v = value("--rounds=")) {
      options.rounds = std::atoi(v);
    } else {
      return false;
    }
  }
  for (const std::string &op : options.ops)
    if (op != "all_reduce" && op != "all_gather" && op != "reduce_scatter" &&
        op != "all_to_all")
      return false;
  return options.rounds >= 1 && !options.sizesMiB.empty();
}

/// The sd op for `kind` on a buffer of `elements` floats over `ranks`
/// devices (one per rank).
SdCollective makeOp(const std::string &kind, int64_t elements, int64_t ranks) {
  SdCollective op;
  std::memset(&op, 0, sizeof(op));
  op.name = "bench collective";
  int64_t block = elements / ranks;
  if (kind == "all_reduce") {
    op.kind = SD_ALL_REDUCE;
    op.rank = 1;
    op.in_shape[0] = op.out_shape[0] = elements;
    op.num_axes = 1;
  } else if (kind == "all_gather" || kind == "reduce_scatter") {
    bool gather = kind == "all_gather";
    op.kind = gather ? SD_ALL_GATHER : SD_REDUCE_SCATTER;
    op.rank = 1;
    op.in_shape[0] = gather ? block : elements;
    op.out_shape[0] = gather ? elements : block;
    op.num_dim_axes[0] = 1;
  } else {
    // Row j of [ranks, block] goes to rank j; what rank j sends arrives as
    // block j of the single output row: MPI_Alltoall's layout.
    op.kind = SD_ALL_TO_ALL;
    op.rank = 2;
    op.in_shape[0] = ranks;
    op.in_shape[1] = block;
    op.out_shape[0] = 1;
    op.out_shape[1] = elements;
    op.num_axes = 1;
    op.tgt_dim = 0;
    op.src_dim = 1;
  }
  return op;
}

/// Elements of the operand and result of `kind` for a size of `elements`.
std::pair<int64_t, int64_t> bufferSizes(const std::string &kind,
                                        int64_t elements, int64_t ranks) {
  if (kind == "all_gather")
    return {elements / ranks, elements};
  if (kind == "reduce_scatter")
    return {elements, elements / ranks};
  return {elements, elements};
}

/// Seconds the slowest rank takes for `calls` calls of `run`.
template <typename Fn> double timeCalls(int64_t calls, Fn run) {
  MPI_Barrier(MPI_COMM_WORLD);
  auto begin = std::chrono::steady_clock::now();
  run(calls);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  double slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

/// How many calls of `run` last about `minTime` (after a warm-up call).
template <typename Fn> int64_t callsFor(const Options &options, Fn run) {
  double once = timeCalls(1, run);
  return std::clamp<int64_t>(static_cast<int64_t>(options.minTime / once), 1,
                             50);
}

} // namespace

int main(int argc, char **argv) {
  if (absl::Status status = initializeMpi(&argc, &argv); !status.ok()) {
    std::fprintf(stderr, "sd_collectives_bench: %s\n",
                 status.ToString().c_str());
    return 2;
  }
  Options options;
  if (!parse(argc, argv, options)) {
    if (mpiWorldRank() == 0)
      std::fprintf(stderr,
                   "usage: mpirun -np P sd_collectives_bench "
                   "[--sizes-mib=1,4,...] [--ops=all_reduce,all_gather,"
                   "reduce_scatter,all_to_all] [--min-time=S] [--rounds=N]\n");
    finalizeMpi();
    return 2;
  }
  int ranks = mpiWorldSize(), rank = mpiWorldRank();
  MeshRuntimeOptions runtimeOptions;
  runtimeOptions.mesh = MeshSpec({{"x", 1, ranks}});
  runtimeOptions.process = rank;
  runtimeOptions.transportFactory = [](const MeshSpec &mesh) {
    return createMpiTransport(mesh);
  };
  absl::StatusOr<std::unique_ptr<MeshRuntime>> runtime =
      MeshRuntime::create(runtimeOptions);
  if (!runtime.ok()) {
    std::fprintf(stderr, "sd_collectives_bench: %s\n",
                 runtime.status().ToString().c_str());
    finalizeMpi();
    return 2;
  }
  const SdApi *api = MeshRuntime::api();
  int exitCode = 0;
  for (const std::string &kind : options.ops) {
    for (int64_t mib : options.sizesMiB) {
      int64_t elements = mib * (int64_t(1) << 20) / int64_t(sizeof(float));
      elements -= elements % ranks;
      auto [inElements, outElements] = bufferSizes(kind, elements, ranks);
      // Small integers: sums are exact in any order.
      std::vector<float> in(inElements), sdOut(outElements, -1.0f),
          mpiOut(outElements, -2.0f);
      for (int64_t i = 0; i < inElements; ++i)
        in[i] = static_cast<float>((i % 13) + rank);
      SdCollective op = makeOp(kind, elements, ranks);
      int block = static_cast<int>(elements / ranks);

      absl::Status sdStatus;
      auto runSd = [&](int64_t calls) {
        sdStatus = (*runtime)->runOnDevices([&](Device &device) {
          auto *handle = reinterpret_cast<SdDevice *>(&device);
          for (int64_t c = 0; c < calls; ++c)
            if (api->collective(handle, &op, in.data(), sdOut.data()))
              return device.error();
          return absl::OkStatus();
        });
      };
      auto runMpi = [&](int64_t calls) {
        for (int64_t c = 0; c < calls; ++c) {
          if (kind == "all_reduce")
            MPI_Allreduce(in.data(), mpiOut.data(), static_cast<int>(elements),
                          MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
          else if (kind == "all_gather")
            MPI_Allgather(in.data(), block, MPI_FLOAT, mpiOut.data(), block,
                          MPI_FLOAT, MPI_COMM_WORLD);
          else if (kind == "reduce_scatter")
            MPI_Reduce_scatter_block(in.data(), mpiOut.data(), block, MPI_FLOAT,
                                     MPI_SUM, MPI_COMM_WORLD);
          else
            MPI_Alltoall(in.data(), block, MPI_FLOAT, mpiOut.data(), block,
                         MPI_FLOAT, MPI_COMM_WORLD);
        }
      };
      // Rounds alternate between the two, so that load from elsewhere on
      // the machine hits both alike; each keeps its best round.
      int64_t sdCalls = callsFor(options, runSd);
      int64_t mpiCalls = callsFor(options, runMpi);
      double sdSeconds = 1e30, mpiSeconds = 1e30;
      for (int r = 0; r < options.rounds; ++r) {
        sdSeconds = std::min(sdSeconds, timeCalls(sdCalls, runSd) / sdCalls);
        mpiSeconds =
            std::min(mpiSeconds, timeCalls(mpiCalls, runMpi) / mpiCalls);
      }
      int mismatch = !sdStatus.ok() || sdOut != mpiOut;
      int anyMismatch = 0;
      MPI_Allreduce(&mismatch, &anyMismatch, 1, MPI_INT, MPI_MAX,
                    MPI_COMM_WORLD);
      if (!sdStatus.ok())
        std::fprintf(stderr, "sd_collectives_bench: rank %d: %s\n", rank,
                     sdStatus.ToString().c_str());
      if (anyMismatch)
        exitCode = 1;
      if (rank == 0) {
        std::printf("RESULT op=%s ranks=%d bytes=%lld sd_s=%.6e mpi_s=%.6e "
                    "check=%s\n",
                    kind.c_str(), ranks,
                    static_cast<long long>(elements * sizeof(float)), sdSeconds,
                    mpiSeconds, anyMismatch ? "MISMATCH" : "ok");
        std::fflush(stdout);
      }
    }
  }
  // The transport frees its communicator, which must happen before MPI ends.
  runtime->reset();
  finalizeMpi();
  return exitCode;
}
