//===- RankAgreement.cpp - The start-up handshake of an MPI job -----------===//
//
// Two or four rounds of MpiStartupChannel: every rank's digest to rank 0,
// rank 0's verdict back; with a shared directory to check, the verdict is
// instead where rank 0 wrote its token, then each rank's finding goes to
// rank 0, which removes the token and sends the final verdict. A verdict
// carries the error's code and message and whether every rank has it (a
// disagreement), or only those that arrived (a rank missing).
//
//===----------------------------------------------------------------------===//

#include "sd/Driver/RankAgreement.h"
#include "sd/Runtime/MpiStartup.h"
#include "sd/Runtime/MpiTransport.h"
#include "sd/Sharding/YamlDiagnostics.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

using namespace mlir;
using namespace mlir::sd;
using ::sd::DigestEntry;
using ::sd::RunDigest;

namespace {

/// The payloads that mark a failure every rank found alike, and one that
/// only some ranks have (a rank missing).
constexpr char kAgreedPayload[] = "sd.rank-agreement.agreed";
constexpr char kPartialPayload[] = "sd.rank-agreement.partial";

absl::Status everyRank(absl::Status status) {
  status.SetPayload(kAgreedPayload, absl::Cord("1"));
  return status;
}

bool isAgreedFailure(const absl::Status &status) {
  return status.GetPayload(kAgreedPayload).has_value();
}

/// The digest entry of a rank that failed before the handshake.
constexpr char kStartupError[] = "startup_error";

// A verdict: "K" (agreed), "E<code>|<every rank: 0 or 1>|<message>", or
// "T<token path>\n<token>" (look for the token).
std::string encodeVerdict(const absl::Status &status) {
  if (status.ok())
    return "K";
  return absl::StrCat("E", static_cast<int>(status.code()), "|",
                      isAgreedFailure(status) ? 1 : 0, "|", status.message());
}

absl::Status decodeVerdict(llvm::StringRef verdict) {
  if (verdict == "K")
    return absl::OkStatus();
  auto [codeText, rest] = verdict.drop_front().split('|');
  auto [everyText, message] = rest.split('|');
  int code = 0;
  if (!verdict.starts_with("E") || codeText.getAsInteger(10, code) ||
      code <= 0 ||
      code > static_cast<int>(absl::StatusCode::kUnauthenticated) ||
      (everyText != "0" && everyText != "1"))
    return absl::InternalError("malformed start-up verdict from rank 0: '" +
                               verdict.take_front(64).str() + "'");
  absl::Status status(static_cast<absl::StatusCode>(code), message.str());
  return everyText == "1" ? everyRank(status) : status;
}

/// Rank 0's verdict on every rank's digest: the first difference, or a
/// digest it cannot read (another build of sd).
absl::Status compareDigests(const std::vector<std::string> &encoded) {
  std::vector<RunDigest> digests;
  for (size_t rank = 0; rank < encoded.size(); ++rank) {
    absl::StatusOr<RunDigest> digest = ::sd::decodeDigest(encoded[rank]);
    if (!digest.ok())
      return everyRank(absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank, " sent a run digest rank 0 cannot read (",
          digest.status().message(), "); do all ranks run the same sd?")));
    digests.push_back(std::move(*digest));
  }
  // A rank that failed before the handshake sent its error alone.
  for (size_t rank = 0; rank < digests.size(); ++rank)
    for (const DigestEntry &entry : digests[rank])
      if (entry.name == kStartupError)
        return everyRank(absl::FailedPreconditionError(
            absl::StrCat("rank ", rank, " could not start: ", entry.value)));
  if (std::optional<std::string> difference = ::sd::firstDisagreement(digests))
    return everyRank(absl::InvalidArgumentError(
        *difference + " (every rank must be given the same model and "
                      "settings)"));
  return absl::OkStatus();
}

/// Where rank 0 writes the token for `dir`: `dir` when it is a directory,
/// else the nearest parent that exists (the check creates no directory).
/// nullopt when `dir` exists but is no directory (the run reports that).
std::optional<std::string> tokenDirectory(const std::string &dir) {
  std::string at = dir;
  while (!llvm::sys::fs::is_directory(at)) {
    if (llvm::sys::fs::exists(at))
      return std::nullopt;
    llvm::StringRef parent = llvm::sys::path::parent_path(at);
    if (parent.empty() || parent == at)
      return std::string(".");
    at = parent.str();
  }
  return at;
}

/// Writes a new file holding `token` into `dir`; its path.
absl::StatusOr<std::string> writeToken(const std::string &dir,
                                       const std::string &token) {
  std::string path = (dir + "/.sd-shared-check-" + token);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool written = fd >= 0 && ::write(fd, token.data(), token.size()) ==
                                static_cast<ssize_t>(token.size());
  int error = errno;
  if (fd >= 0 && ::close(fd) != 0 && written) {
    written = false;
    error = errno;
  }
  if (!written) {
    if (fd >= 0)
      ::unlink(path.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write '", path,
                     "' (to check that every rank "
                     "sees the same checkpoint directory): ",
                     std::strerror(error)));
  }
  return path;
}

/// Whether the file at `path` holds `token`, looking again for up to
/// `seconds`: a network file system may show a new file to other hosts
/// late (listing its directory makes NFS look again).
bool seesToken(const std::string &path, const std::string &token,
               double seconds) {
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::duration<double>(seconds));
  std::string dir = llvm::sys::path::parent_path(path).str();
  while (true) {
    if (DIR *listing = ::opendir(dir.empty() ? "." : dir.c_str()))
      ::closedir(listing);
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
        llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                    /*RequiresNullTerminator=*/false);
    if (file && (*file)->getBuffer() == token)
      return true;
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

/// 16 random hex digits.
std::string randomToken() {
  std::random_device device;
  uint64_t value = (uint64_t(device()) << 32) ^ device();
  return absl::StrFormat("%016x", value);
}

/// Rank 0's side of the handshake.
absl::Status leadHandshake(const StartupCheck &check,
                           ::sd::rt::MpiStartupChannel &channel) {
  absl::StatusOr<std::vector<std::string>> digests =
      channel.gather(::sd::encodeDigest(check.digest));
  absl::Status verdict =
      digests.ok() ? compareDigests(*digests) : digests.status();
  std::string tokenPath, token;
  if (verdict.ok() && !check.sharedDirectory.empty() && channel.size() > 1)
    if (std::optional<std::string> dir =
            tokenDirectory(check.sharedDirectory)) {
      token = randomToken();
      absl::StatusOr<std::string> written = writeToken(*dir, token);
      if (written.ok())
        tokenPath = *written;
      else
        verdict = everyRank(written.status());
    }
  absl::StatusOr<std::string> sent = channel.broadcast(
      tokenPath.empty() ? encodeVerdict(verdict)
                        : absl::StrCat("T", tokenPath, "\n", token));
  if (tokenPath.empty() || !sent.ok()) {
    if (!tokenPath.empty())
      ::unlink(tokenPath.c_str());
    return verdict.ok() ? sent.status() : verdict;
  }
  // Each rank's finding: "" when it sees the token, else the error.
  absl::StatusOr<std::vector<std::string>> findings = channel.gather("");
  ::unlink(tokenPath.c_str());
  if (!findings.ok())
    verdict = findings.status();
  else
    for (const std::string &finding : *findings)
      if (!finding.empty()) {
        verdict = everyRank(absl::FailedPreconditionError(finding));
        break;
      }
  sent = channel.broadcast(encodeVerdict(verdict));
  return verdict.ok() ? sent.status() : verdict;
}

/// The side of every other rank.
absl::Status followHandshake(const StartupCheck &check,
                             ::sd::rt::MpiStartupChannel &channel) {
  if (absl::StatusOr<std::vector<std::string>> sent =
          channel.gather(::sd::encodeDigest(check.digest));
      !sent.ok())
    return sent.status();
  absl::StatusOr<std::string> verdict = channel.broadcast("");
  if (!verdict.ok())
    return verdict.status();
  if (verdict->empty() || (*verdict)[0] != 'T')
    return decodeVerdict(*verdict);
  auto [tokenPath, token] = llvm::StringRef(*verdict).drop_front().split('\n');
  std::string finding;
  if (!seesToken(tokenPath.str(), token.str(),
                 std::min(5.0, check.timeoutSeconds / 4)))
    finding = absl::StrFormat(
        "--checkpoint-dir='%s' is not the same directory on every rank: rank "
        "%d does not see the file '%s' rank 0 wrote there (give every rank "
        "one shared directory)",
        check.sharedDirectory, channel.rank(), tokenPath.str());
  if (absl::StatusOr<std::vector<std::string>> sent = channel.gather(finding);
      !sent.ok())
    return sent.status();
  verdict = channel.broadcast("");
  if (!verdict.ok())
    return verdict.status();
  return decodeVerdict(*verdict);
}

} // namespace

DigestEntry mlir::sd::modelDigestEntry(const std::string &path) {
  DigestEntry entry{"model", "", ::sd::digestQuoted(path)};
  // Standard input cannot be read twice; mpirun gives it to rank 0 only.
  if (path == "-") {
    entry.value = "standard input";
    return entry;
  }
  absl::Status readable = ::sd::checkRegularFile(path, "model file");
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      readable.ok() ? llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                                  /*RequiresNullTerminator=*/
                                                  false)
                    : std::make_error_code(std::errc::io_error);
  if (!readable.ok())
    entry.value = absl::StrCat("unreadable: ", readable.message());
  else if (!file)
    entry.value = absl::StrCat("unreadable: ", file.getError().message());
  else
    entry.value =
        absl::StrFormat("xxh3 %016x", llvm::xxh3_64bits((*file)->getBuffer()));
  return entry;
}

StartupCheck mlir::sd::trainingStartupCheck(const ::sd::RunSpec &spec,
                                            bool compileOnly) {
  StartupCheck check;
  check.digest.push_back(modelDigestEntry(spec.run.modelPath));
  RunDigest settings = ::sd::runSpecDigest(spec, ::sd::DigestScope::Training);
  check.digest.insert(check.digest.end(), settings.begin(), settings.end());
  check.digest.push_back({"compile_only", ::sd::digestValue(compileOnly), ""});
  check.sharedDirectory = spec.run.checkpointDir;
  if (spec.run.collectiveTimeout)
    check.timeoutSeconds = *spec.run.collectiveTimeout;
  return check;
}

StartupCheck mlir::sd::samplingStartupCheck(const ::sd::RunSpec &spec,
                                            const SampleOptions &options) {
  StartupCheck check;
  RunDigest &d = check.digest;
  d.push_back(modelDigestEntry(spec.run.modelPath));
  RunDigest settings = ::sd::runSpecDigest(spec, ::sd::DigestScope::Sampling);
  d.insert(d.end(), settings.begin(), settings.end());
  auto text = [](const std::string &value) {
    return value.empty() ? std::string("none") : ::sd::digestQuoted(value);
  };
  auto optional = [](const auto &value, auto show) {
    return value ? show(*value) : std::string("unset");
  };
  auto flag = [](bool value) { return ::sd::digestValue(value); };
  d.push_back({"weights", text(options.weightsPath), ""});
  d.push_back({"checkpoint_dir", text(options.checkpointDir), ""});
  d.push_back({"ema", optional(options.ema, flag), ""});
  d.push_back({"prediction_type",
               optional(options.prediction,
                        [](sampling::Prediction p) {
                          return sampling::predictionName(p).str();
                        }),
               ""});
  d.push_back({"sampler",
               optional(options.sampler,
                        [](sampling::Sampler s) {
                          return sampling::samplerName(s).str();
                        }),
               ""});
  d.push_back({"clip_x0", optional(options.clipX0, flag), ""});
  d.push_back({"num_inference_steps", ::sd::digestValue(options.steps), ""});
  d.push_back({"guidance_scale", ::sd::digestValue(options.guidanceScale), ""});
  d.push_back({"true_cfg_scale", ::sd::digestValue(options.trueCfgScale), ""});
  d.push_back({"flow_shift",
               optional(options.flowShift,
                        [](double v) { return ::sd::digestValue(v); }),
               ""});
  d.push_back({"time_shift", optional(options.timeShift, flag), ""});
  d.push_back({"base_shift", ::sd::digestValue(options.baseShift), ""});
  d.push_back({"max_shift", ::sd::digestValue(options.maxShift), ""});
  d.push_back({"text_states", text(options.textStatesPath), ""});
  d.push_back({"lora", text(options.loraPath), ""});
  d.push_back({"lora_scale", ::sd::digestValue(options.loraScale), ""});
  d.push_back({"seed", std::to_string(options.seed), ""});
  d.push_back(
      {"samples_per_class", ::sd::digestValue(options.samplesPerClass), ""});
  d.push_back({"classes",
               options.classes.empty() ? std::string("all")
                                       : absl::StrJoin(options.classes, ","),
               ""});
  if (spec.run.collectiveTimeout)
    check.timeoutSeconds = *spec.run.collectiveTimeout;
  return check;
}

absl::Status mlir::sd::agreeAcrossRanks(const StartupCheck &check) {
  if (check.testDelaySeconds > 0)
    std::this_thread::sleep_for(
        std::chrono::duration<double>(check.testDelaySeconds));
  ::sd::rt::MpiStartupChannel channel(check.timeoutSeconds);
  if (channel.size() == 1)
    return absl::OkStatus();
  absl::Status status = channel.rank() == 0 ? leadHandshake(check, channel)
                                            : followHandshake(check, channel);
  if (!status.ok() && !isAgreedFailure(status))
    status.SetPayload(kPartialPayload, absl::Cord("1"));
  return status;
}

absl::Status mlir::sd::shareStartupFailure(const absl::Status &failure) {
  StartupCheck check;
  check.digest.push_back({kStartupError, std::string(failure.message()), ""});
  absl::Status shared = agreeAcrossRanks(check);
  absl::Status result = failure;
  // OK: a job of one rank, which has no one else to tell.
  result.SetPayload(shared.ok() || isAgreedFailure(shared) ? kAgreedPayload
                                                           : kPartialPayload,
                    absl::Cord("1"));
  return result;
}

void mlir::sd::leaveMpiJobAfter(const absl::Status &status) {
  if (!status.GetPayload(kPartialPayload).has_value())
    ::sd::rt::finalizeMpi();
}
