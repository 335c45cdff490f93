//===- Progress.cpp - Training progress line for sdrun --------------------===//
//
// Formatting of the progress line in its two modes. Each update is written
// as one string and flushed, so a redrawn line never shows half an update.
//
//===----------------------------------------------------------------------===//

#include "sd/Telemetry/Progress.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <unistd.h>
#include <vector>

using namespace sd::telemetry;

namespace {

/// ANSI "erase from cursor to end of line": removes what is left of a longer
/// previous line after a redraw.
constexpr const char *kClearToEol = "\x1b[K";
/// Separates the fields of a line.
constexpr const char *kSep = "  ";

std::string formatLoss(double loss) {
  if (!std::isfinite(loss))
    return std::isnan(loss) ? "nan" : (loss > 0 ? "inf" : "-inf");
  double magnitude = std::fabs(loss);
  // Fixed point reads best for ordinary losses; tiny or huge ones would show
  // as 0.000000 or a long digit string.
  if (magnitude == 0 || (magnitude >= 1e-4 && magnitude < 1e6))
    return absl::StrFormat("%.6f", loss);
  return absl::StrFormat("%.4e", loss);
}

/// The optional fields in their print order.
std::vector<std::string> formatExtras(const StepExtras &extras) {
  std::vector<std::string> fields;
  if (extras.samplesPerSecond)
    fields.push_back(
        absl::StrFormat("%.2f samples/s", *extras.samplesPerSecond));
  if (extras.gflopsPerSecond)
    fields.push_back(absl::StrFormat("%.1f GFLOP/s", *extras.gflopsPerSecond));
  if (extras.learningRate)
    fields.push_back(absl::StrFormat("lr %.2e", *extras.learningRate));
  if (extras.heldoutLoss)
    fields.push_back(absl::StrFormat("held-out %.4f", *extras.heldoutLoss));
  return fields;
}

int numDigits(int64_t value) {
  int digits = 1;
  for (value = value < 0 ? -value : value; value >= 10; value /= 10)
    ++digits;
  return digits;
}

} // namespace

std::string sd::telemetry::formatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  // Beyond this the ETA is meaningless anyway; avoid overflowing int64.
  if (seconds > 1e12)
    return "?";
  auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 60)
    return absl::StrFormat("%ds", total);
  if (total < 3600)
    return absl::StrFormat("%dm%02ds", total / 60, total % 60);
  // Hours and minutes only: seconds are noise at that scale.
  int64_t minutes = (total + 30) / 60;
  return absl::StrFormat("%dh%02dm", minutes / 60, minutes % 60);
}

bool sd::telemetry::isInteractiveTerminal(int fd) {
  // Under mpirun a rank's stdout is a pseudo-terminal even when mpirun's own
  // output goes to a file or a pipe, where a redrawn line would leave
  // carriage returns and escape codes; a rank cannot tell, so it prints
  // plain lines. Open MPI, PMIx and MPICH (PMI) each set one of these.
  for (const char *variable : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(variable))
      return false;
  if (!isatty(fd))
    return false;
  const char *term = std::getenv("TERM");
  return !(term && std::strcmp(term, "dumb") == 0);
}

ProgressReporter::ProgressReporter(int64_t totalSteps, int64_t firstStep,
                                   std::ostream &os, bool isTerminal)
    : totalSteps(std::max<int64_t>(totalSteps, 0)), firstStep(firstStep),
      os(os), terminal(isTerminal) {
  // A dumb terminal (Emacs shell, some CI runners) understands neither the
  // clear-to-end-of-line sequence nor, reliably, a bare carriage return.
  const char *term = std::getenv("TERM");
  if (term && std::strcmp(term, "dumb") == 0)
    terminal = false;
}

ProgressReporter::~ProgressReporter() { finish(); }

double ProgressReporter::meanStepSeconds() const {
  if (recentSeconds.empty())
    return firstStepSeconds.value_or(0.0);
  return std::accumulate(recentSeconds.begin(), recentSeconds.end(), 0.0) /
         static_cast<double>(recentSeconds.size());
}

std::string ProgressReporter::formatStep(int64_t step) const {
  if (totalSteps == 0)
    return absl::StrCat(step);
  // Right-aligned to the width of the total so the columns stay put.
  return absl::StrFormat("%*d/%d", numDigits(totalSteps), step, totalSteps);
}

std::string ProgressReporter::formatEtaField(int64_t step) const {
  if (totalSteps == 0)
    return "";
  int64_t remaining = std::max<int64_t>(totalSteps - step, 0);
  return absl::StrCat(
      "ETA ", formatEta(static_cast<double>(remaining) * meanStepSeconds()));
}

std::string ProgressReporter::formatPlainLine(int64_t step, double loss,
                                              double stepSeconds,
                                              const StepExtras &extras) const {
  std::string line =
      absl::StrCat("step ", formatStep(step), kSep, "loss ", formatLoss(loss),
                   kSep, absl::StrFormat("%.3f s/step", stepSeconds));
  for (const std::string &field : formatExtras(extras))
    absl::StrAppend(&line, kSep, field);
  std::string eta = formatEtaField(step);
  if (!eta.empty())
    absl::StrAppend(&line, kSep, eta);
  return line;
}

std::string
ProgressReporter::formatTerminalLine(int64_t step, double loss,
                                     double stepSeconds,
                                     const StepExtras &extras) const {
  std::string tail =
      absl::StrCat(formatStep(step), kSep, "loss ", formatLoss(loss), kSep,
                   absl::StrFormat("%.3f s/step", stepSeconds));
  std::string eta = formatEtaField(step);
  if (!eta.empty())
    eta = absl::StrCat(kSep, eta);
  // "[" + bar + "] " around the bar.
  constexpr size_t kBarFrame = 3;
  // Extras only while a full bar still fits: a wrapped line cannot be
  // redrawn with '\r'.
  for (const std::string &field : formatExtras(extras)) {
    if (kBarFrame + kBarWidth + tail.size() + 2 + field.size() + eta.size() >
        kMaxColumns)
      break;
    absl::StrAppend(&tail, kSep, field);
  }
  tail += eta;
  if (totalSteps == 0)
    return tail;

  // Very long fields (huge step counts, ETAs of days) shorten the bar; below
  // a few characters it is no longer worth drawing.
  int width = kBarWidth;
  if (kBarFrame + kBarWidth + tail.size() > kMaxColumns)
    width = static_cast<int>(kMaxColumns) -
            static_cast<int>(kBarFrame + tail.size());
  if (width < 5)
    return tail;
  double fraction =
      std::clamp(static_cast<double>(step) / totalSteps, 0.0, 1.0);
  int filled = static_cast<int>(fraction * width);
  std::string bar(filled, '#');
  if (filled < width)
    bar += step > 0 ? '>' : ' ';
  bar.resize(width, ' ');
  return absl::StrCat("[", bar, "] ", tail);
}

void ProgressReporter::update(int64_t step, double loss, double stepSeconds,
                              const StepExtras &extras) {
  // The first step of a process includes compilation and warm-up; it counts
  // for the ETA only until a regular step time is known.
  if (!firstStepSeconds) {
    firstStepSeconds = stepSeconds;
  } else {
    recentSeconds.push_back(stepSeconds);
    if (recentSeconds.size() > kWindow)
      recentSeconds.pop_front();
  }

  if (!terminal) {
    os << formatPlainLine(step, loss, stepSeconds, extras) << '\n';
    os.flush();
    return;
  }
  currentLine = formatTerminalLine(step, loss, stepSeconds, extras);
  os << '\r' << currentLine << kClearToEol;
  os.flush();
}

void ProgressReporter::printAbove(const std::string &text) {
  std::string out = text;
  if (out.empty() || out.back() != '\n')
    out += '\n';
  if (!terminal || currentLine.empty()) {
    os << out;
    os.flush();
    return;
  }
  // Clear the bar, print the text on its line, then draw the bar below.
  os << '\r' << kClearToEol << out << currentLine << kClearToEol;
  os.flush();
}

void ProgressReporter::finish() {
  if (!terminal || currentLine.empty())
    return;
  os << '\n';
  os.flush();
  currentLine.clear();
}
