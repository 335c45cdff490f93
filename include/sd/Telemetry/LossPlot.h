//===- LossPlot.h - Loss curve rendered to a PNG file -----------*- C++ -*-===//
//
// A small, dependency-free plot of a run's loss curve, written next to the
// metrics CSV so that a run's progress can be glanced at without Python or
// TensorBoard. Drawn by a tiny rasterizer with a built-in 5x7 bitmap font and
// encoded as an 8-bit RGB PNG with zlib.
//
//===----------------------------------------------------------------------===//

#ifndef SD_TELEMETRY_LOSSPLOT_H
#define SD_TELEMETRY_LOSSPLOT_H

#include "absl/status/status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sd::telemetry {

/// An 8-bit RGB color.
struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb &o) const {
    return r == o.r && g == o.g && b == o.b;
  }
  bool operator!=(const Rgb &o) const { return !(*this == o); }
};

struct LossPlotOptions {
  /// Shown in the title as `<metric> - <runName>`; may be empty.
  std::string runName;
  /// The plotted quantity, for the title.
  std::string metricName = "loss";
  int width = 800;
  int height = 500;
  /// Color of the curve; pixels on the curve's center have exactly this.
  Rgb curveColor = {31, 119, 180};
  /// A second curve over the first (the held-out loss), in its own color;
  /// the axes cover both, and the title names it.
  std::vector<std::pair<int64_t, double>> secondary;
  std::string secondaryName = "held-out";
  Rgb secondaryColor = {255, 127, 14};
};

/// Renders `points` (step, value) as a line plot and writes it as a PNG to
/// `path`, atomically (through `path.tmp` and a rename), creating missing
/// parent directories. Points need not be sorted; points with non-finite
/// values are skipped and their count is noted in the title. An empty or
/// all-non-finite curve gives an empty frame. Errors name the path.
absl::Status
writeLossPlot(const std::string &path,
              const std::vector<std::pair<int64_t, double>> &points,
              const LossPlotOptions &options = {});

/// Encodes a `width` x `height` image of packed RGB rows (top row first) as
/// PNG bytes. Exposed for tests and for other small images.
absl::Status encodePng(int width, int height, const std::vector<uint8_t> &rgb,
                       std::string &png);

/// Tick positions at "nice" values (1, 2 or 5 times a power of ten) covering
/// [lo, hi] with about `targetCount` ticks; `step` receives the spacing.
/// Exposed for tests.
std::vector<double> niceTicks(double lo, double hi, int targetCount,
                              double &step);

} // namespace sd::telemetry

#endif // SD_TELEMETRY_LOSSPLOT_H
