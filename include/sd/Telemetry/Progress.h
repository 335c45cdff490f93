//===- Progress.h - Training progress line for sdrun ------------*- C++ -*-===//
//
// The per-step progress report of a training run. On a terminal it is one
// line redrawn in place (a bar, the loss, the step time and an ETA); when the
// output is a file or a pipe (CI logs, `| tee`) it is one plain line per step
// so that logs stay greppable. MLIR-free: sdrun links it without the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TELEMETRY_PROGRESS_H
#define SD_TELEMETRY_PROGRESS_H

#include <cstdint>
#include <deque>
#include <optional>
#include <ostream>
#include <string>

namespace sd::telemetry {

/// Optional per-step figures the caller measures itself. Fields left unset
/// are not printed. Plain mode prints all that are set; terminal mode prints
/// those that still fit in 80 columns.
struct StepExtras {
  /// Training throughput, printed as `8.10 samples/s`.
  std::optional<double> samplesPerSecond;
  /// Achieved compute rate in GFLOP/s, printed as `104.2 GFLOP/s`.
  std::optional<double> gflopsPerSecond;
  /// Current learning rate, printed as `lr 1.00e-04`.
  std::optional<double> learningRate;
  /// The latest held-out loss, printed as `held-out 0.2345`.
  std::optional<double> heldoutLoss;
};

/// Formats a duration for an ETA: `42s`, `1m48s`, `2h03m` (seconds are
/// rounded; hours show minutes only). Negative or non-finite input gives `?`.
std::string formatEta(double seconds);

/// Whether progress on `fd` should be drawn as a redrawn terminal line:
/// `fd` is a terminal, `TERM` is not `dumb`, and the process is not an MPI
/// rank (whose stdout is mpirun's pseudo-terminal wherever mpirun's output
/// goes).
bool isInteractiveTerminal(int fd);

/// Reports training progress, one update per finished step.
///
/// Steps count finished steps: after the first step of a fresh run the
/// caller reports step 1, the last update of the run reports `totalSteps`.
/// A resumed run passes the step it resumed from as `firstStep`, so its
/// first update is `firstStep + 1`.
class ProgressReporter {
public:
  /// `isTerminal` is what the caller knows about `os`, normally
  /// `isatty(fileno(stdout))`; the reporter still prints plain lines when
  /// `TERM=dumb`. A `totalSteps` of 0 means unknown (no bar, no ETA).
  ProgressReporter(int64_t totalSteps, int64_t firstStep, std::ostream &os,
                   bool isTerminal);
  /// Ends a pending terminal line, as finish() does.
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter &) = delete;
  ProgressReporter &operator=(const ProgressReporter &) = delete;

  /// Reports that step `step` finished with `loss` after `stepSeconds`.
  void update(int64_t step, double loss, double stepSeconds,
              const StepExtras &extras = {});
  /// Prints `text` (a log line from elsewhere in sdrun) so that it does not
  /// garble the progress line: on a terminal the bar is cleared, the text
  /// printed and the bar redrawn below it. A trailing newline is added when
  /// `text` lacks one.
  void printAbove(const std::string &text);
  /// Ends the progress line on a terminal (the last state stays visible).
  /// Further updates start a new line. Does nothing in plain mode.
  void finish();

  /// Whether updates redraw one line (true) or print plain lines.
  bool terminalMode() const { return terminal; }
  /// The step this process started from (0 for a fresh run).
  int64_t startStep() const { return firstStep; }
  /// Mean of the recent step times that the ETA uses: the last
  /// kWindow steps, without the first step of this process (it includes
  /// warm-up and compilation) once there are others. 0 before any update.
  double meanStepSeconds() const;

  /// Number of recent steps averaged for the ETA.
  static constexpr size_t kWindow = 20;
  /// Width of the `[###>   ]` bar, in characters between the brackets. The
  /// bar gets shorter when the other fields would not fit otherwise.
  static constexpr int kBarWidth = 20;
  /// Terminal lines are kept below this many columns so they never wrap
  /// (a wrapped line cannot be redrawn with `\r`).
  static constexpr size_t kMaxColumns = 79;

private:
  std::string formatTerminalLine(int64_t step, double loss, double stepSeconds,
                                 const StepExtras &extras) const;
  std::string formatPlainLine(int64_t step, double loss, double stepSeconds,
                              const StepExtras &extras) const;
  std::string formatStep(int64_t step) const;
  std::string formatEtaField(int64_t step) const;

  int64_t totalSteps;
  int64_t firstStep;
  std::ostream &os;
  bool terminal;
  /// The terminal line currently on screen (empty when none is pending).
  std::string currentLine;
  /// Time of the first step reported by this process (warm-up included).
  std::optional<double> firstStepSeconds;
  /// Step times after the first one, most recent last, at most kWindow.
  std::deque<double> recentSeconds;
};

} // namespace sd::telemetry

#endif // SD_TELEMETRY_PROGRESS_H
