//===- RunDigest.h - What the ranks of a run must agree on ------*- C++ -*-===//
//
// Under mpirun every rank resolves its own command line, and ranks given a
// different model, mesh or learning rate would compute different programs
// (and fail deep inside MPI, hang, or silently train something else). Before
// anything is compiled, each rank describes what must agree as a list of
// named values (the digest), rank 0 compares every rank's with its own, and
// the first difference is the error every rank reports:
// `rank 1's learning_rate is 0.002, rank 0's is 0.001`. MLIR-free; the
// exchange itself is sd/Driver/RankAgreement.h.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_RUNDIGEST_H
#define SD_CONFIG_RUNDIGEST_H

#include "sd/Config/RunSpec.h"

#include "absl/status/statusor.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sd {

/// One setting every rank must agree on: its name (the config key, or the
/// flag's name in snake case without one), the exact value compared, and
/// how a message shows it (the value itself when empty: a model's path
/// shown for its content hash).
struct DigestEntry {
  std::string name;
  std::string value;
  std::string shown;

  bool operator==(const DigestEntry &other) const {
    return name == other.name && value == other.value && shown == other.shown;
  }
};

/// The entries in a fixed order.
using RunDigest = std::vector<DigestEntry>;

/// Which tool's settings a digest holds: sdrun's training run, or sdsample's
/// forward program (no optimizer, remat, data or checkpoints).
enum class DigestScope { Training, Sampling };

/// The settings of `spec` that change what the ranks compute or which
/// collectives they take part in: the mesh, the network model (attention
/// `auto` picks by it), the rules, the batch, the attention, and for
/// training the remat policy, the gradient buckets, the optimizer, the
/// data, the steps, the seed and the run's checkpoints, exports and
/// verification. What a rank may hold alone is left out: its thread count,
/// memory budgets, program cache, collective timeout, and the outputs only
/// rank 0 writes (metrics, run directory, trace).
RunDigest runSpecDigest(const RunSpec &spec, DigestScope scope);

/// `value` as digest entries show it: an exact integer, a double in its
/// shortest round-trip form (0.001, 1e-08), a quoted string.
std::string digestValue(int64_t value);
std::string digestValue(double value);
std::string digestValue(bool value);
std::string digestQuoted(std::string_view text);

/// The digest as bytes for the other ranks, and back. decodeDigest fails
/// (InvalidArgument) on bytes encodeDigest did not write.
std::string encodeDigest(const RunDigest &digest);
absl::StatusOr<RunDigest> decodeDigest(std::string_view bytes);

/// The first entry where rank `otherRank`'s digest `other` differs from
/// rank `referenceRank`'s `reference`, as the error every rank prints:
/// `rank 1's learning_rate is 0.002, rank 0's is 0.001`; `rank 1's model
/// 'dit.mlir' differs from rank 0's` when both show the same text for
/// different values; `rank 1 has no X, rank 0's is V` (or the other way)
/// when one lacks an entry. nullopt when the digests agree.
std::optional<std::string> firstDifference(const RunDigest &reference,
                                           int referenceRank,
                                           const RunDigest &other,
                                           int otherRank);

/// The first rank whose digest differs from rank 0's (`digests[0]`), as
/// firstDifference says it; nullopt when all agree.
std::optional<std::string>
firstDisagreement(const std::vector<RunDigest> &digests);

} // namespace sd

#endif // SD_CONFIG_RUNDIGEST_H
