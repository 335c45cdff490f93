//===- RankAgreement.h - The start-up handshake of an MPI job ---*- C++ -*-===//
//
// sdrun and sdsample under mpirun: before a rank compiles anything or
// creates its process group, every rank sends rank 0 the digest of what
// must agree (the model file's content, the run spec's settings:
// sd/Config/RunDigest.h) and rank 0 answers with one verdict, so that
//  - a disagreement is the same one-line error on every rank, naming the
//    first difference (`rank 1's learning_rate is 0.002, rank 0's is
//    0.001`), and the job exits 1;
//  - a rank that does not arrive within --collective-timeout is named, and
//    the job ends (a rank that dies ends it through mpirun);
//  - a --checkpoint-dir that is not one directory every rank sees (each
//    rank's own /tmp) is found before anything is written into it: rank 0
//    writes a file with a random token beside where the checkpoints go, the
//    others look for it, and it is removed.
// A rank held before MPI_Init is out of reach: Open MPI's MPI_Init itself
// waits for every rank, with no deadline.
//
//===----------------------------------------------------------------------===//

#ifndef SD_DRIVER_RANKAGREEMENT_H
#define SD_DRIVER_RANKAGREEMENT_H

#include "sd/Config/RunDigest.h"
#include "sd/Config/RunSpec.h"
#include "sd/Driver/Sample.h"

#include "absl/status/status.h"

#include <string>

namespace mlir::sd {

/// What one rank brings to the handshake.
struct StartupCheck {
  ::sd::RunDigest digest;
  /// A directory every rank writes into and must see as the same one
  /// (sdrun's --checkpoint-dir); "" for none.
  std::string sharedDirectory;
  /// How long a rank waits for another (--collective-timeout).
  double timeoutSeconds = 600;
  /// Testing: this rank sleeps this long before the handshake (sdrun's
  /// hidden --test-startup-delay).
  double testDelaySeconds = 0;
};

/// The digest entry `model`: the content hash of the model file at `path`,
/// shown as the path; a file that cannot be read has its error as value
/// (ranks that fail alike agree, and each reports it when it parses).
::sd::DigestEntry modelDigestEntry(const std::string &path);

/// sdrun's check: the model, the run spec's training settings and
/// --compile-only; the checkpoint directory as the shared one.
StartupCheck trainingStartupCheck(const ::sd::RunSpec &spec, bool compileOnly);

/// sdsample's check: the model, the run spec's sampling settings and the
/// sampling options but the outputs (rank 0 writes them). Every rank reads
/// the weights itself, from its own copy if need be: no shared directory.
StartupCheck samplingStartupCheck(const ::sd::RunSpec &spec,
                                  const SampleOptions &options);

/// The handshake of this rank of the MPI job (MPI initialized). OK when
/// every rank agrees; otherwise the error this rank reports: the first
/// difference (InvalidArgument), a checkpoint directory that is not shared
/// (FailedPrecondition), or a rank that did not arrive (DeadlineExceeded).
absl::Status agreeAcrossRanks(const StartupCheck &check);

/// The handshake of a rank that failed before it could describe its run
/// (its flags did not resolve): its digest is `failure` alone, so that the
/// other ranks fail with `rank 1 could not start: ...` rather than wait for
/// it. Returns `failure`, for leaveMpiJobAfter to tell whether every rank
/// knows of it.
absl::Status shareStartupFailure(const absl::Status &failure);

/// Ends this rank's part in the MPI job after the failure `status` (call
/// it once the error is printed): finalizes MPI, so that each rank exits
/// with its own message, unless `status` is a failure of agreeAcrossRanks
/// that not every rank shares (a rank missing): MPI then stays
/// unfinalized, so that mpirun ends the job.
void leaveMpiJobAfter(const absl::Status &status);

} // namespace mlir::sd

#endif // SD_DRIVER_RANKAGREEMENT_H
