//===- LossPlot.cpp - Loss curve rendered to a PNG file -------------------===//
//
// A minimal raster plot: white canvas, framed plot area with a light grid at
// "nice" tick values, tick labels in a built-in 5x7 font, and the curve drawn
// as an antialiased 2-pixel polyline. The PNG encoder writes one IDAT chunk
// of unfiltered rows compressed by zlib.
//
//===----------------------------------------------------------------------===//

#include "sd/Telemetry/LossPlot.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>

using namespace sd::telemetry;

namespace {

//===----------------------------------------------------------------------===//
// Font
//===----------------------------------------------------------------------===//

/// Glyph rows of printable ASCII (' ' to '~'), top to bottom: rows 0-6 stand
/// on the baseline, rows 7-8 hold descenders (g, j, p, q, y, _ and ,). Bit 4
/// is the leftmost of the 5 columns.
constexpr int kGlyphWidth = 5;
constexpr int kGlyphRows = 9;
/// Horizontal advance per character (one column of spacing).
constexpr int kAdvance = kGlyphWidth + 1;
/// Height of a text line above the baseline, in font pixels.
constexpr int kCapHeight = 7;
constexpr uint8_t kFont[95][kGlyphRows] = {
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, // ' '
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x04, 0x00, 0x00}, // '!'
    {0x0A, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, // '"'
    {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A, 0x00, 0x00}, // '#'
    {0x04, 0x0F, 0x14, 0x0E, 0x05, 0x1E, 0x04, 0x00, 0x00}, // '$'
    {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03, 0x00, 0x00}, // '%'
    {0x0C, 0x12, 0x14, 0x08, 0x15, 0x12, 0x0D, 0x00, 0x00}, // '&'
    {0x04, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, // '\''
    {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02, 0x00, 0x00}, // '('
    {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08, 0x00, 0x00}, // ')'
    {0x00, 0x04, 0x15, 0x0E, 0x15, 0x04, 0x00, 0x00, 0x00}, // '*'
    {0x00, 0x04, 0x04, 0x1F, 0x04, 0x04, 0x00, 0x00, 0x00}, // '+'
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C, 0x04, 0x08}, // ','
    {0x00, 0x00, 0x00, 0x1F, 0x00, 0x00, 0x00, 0x00, 0x00}, // '-'
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C, 0x00, 0x00}, // '.'
    {0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00, 0x00, 0x00}, // '/'
    {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E, 0x00, 0x00}, // '0'
    {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E, 0x00, 0x00}, // '1'
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F, 0x00, 0x00}, // '2'
    {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E, 0x00, 0x00}, // '3'
    {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02, 0x00, 0x00}, // '4'
    {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E, 0x00, 0x00}, // '5'
    {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E, 0x00, 0x00}, // '6'
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08, 0x00, 0x00}, // '7'
    {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E, 0x00, 0x00}, // '8'
    {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C, 0x00, 0x00}, // '9'
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00, 0x00, 0x00}, // ':'
    {0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x04, 0x08, 0x00}, // ';'
    {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02, 0x00, 0x00}, // '<'
    {0x00, 0x00, 0x1F, 0x00, 0x1F, 0x00, 0x00, 0x00, 0x00}, // '='
    {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08, 0x00, 0x00}, // '>'
    {0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04, 0x00, 0x00}, // '?'
    {0x0E, 0x11, 0x01, 0x0D, 0x15, 0x15, 0x0E, 0x00, 0x00}, // '@'
    {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11, 0x00, 0x00}, // 'A'
    {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E, 0x00, 0x00}, // 'B'
    {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E, 0x00, 0x00}, // 'C'
    {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C, 0x00, 0x00}, // 'D'
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F, 0x00, 0x00}, // 'E'
    {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10, 0x00, 0x00}, // 'F'
    {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F, 0x00, 0x00}, // 'G'
    {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11, 0x00, 0x00}, // 'H'
    {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E, 0x00, 0x00}, // 'I'
    {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C, 0x00, 0x00}, // 'J'
    {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11, 0x00, 0x00}, // 'K'
    {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F, 0x00, 0x00}, // 'L'
    {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11, 0x00, 0x00}, // 'M'
    {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11, 0x00, 0x00}, // 'N'
    {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E, 0x00, 0x00}, // 'O'
    {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10, 0x00, 0x00}, // 'P'
    {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D, 0x00, 0x00}, // 'Q'
    {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11, 0x00, 0x00}, // 'R'
    {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E, 0x00, 0x00}, // 'S'
    {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x00}, // 'T'
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E, 0x00, 0x00}, // 'U'
    {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04, 0x00, 0x00}, // 'V'
    {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A, 0x00, 0x00}, // 'W'
    {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11, 0x00, 0x00}, // 'X'
    {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04, 0x00, 0x00}, // 'Y'
    {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F, 0x00, 0x00}, // 'Z'
    {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E, 0x00, 0x00}, // '['
    {0x00, 0x10, 0x08, 0x04, 0x02, 0x01, 0x00, 0x00, 0x00}, // '\\'
    {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E, 0x00, 0x00}, // ']'
    {0x04, 0x0A, 0x11, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, // '^'
    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F, 0x00}, // '_'
    {0x08, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, // '`'
    {0x00, 0x00, 0x0E, 0x01, 0x0F, 0x11, 0x0F, 0x00, 0x00}, // 'a'
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E, 0x00, 0x00}, // 'b'
    {0x00, 0x00, 0x0E, 0x10, 0x10, 0x11, 0x0E, 0x00, 0x00}, // 'c'
    {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F, 0x00, 0x00}, // 'd'
    {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E, 0x00, 0x00}, // 'e'
    {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08, 0x00, 0x00}, // 'f'
    {0x00, 0x00, 0x0F, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E}, // 'g'
    {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00, 0x00}, // 'h'
    {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E, 0x00, 0x00}, // 'i'
    {0x02, 0x00, 0x06, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}, // 'j'
    {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12, 0x00, 0x00}, // 'k'
    {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E, 0x00, 0x00}, // 'l'
    {0x00, 0x00, 0x1A, 0x15, 0x15, 0x15, 0x15, 0x00, 0x00}, // 'm'
    {0x00, 0x00, 0x16, 0x19, 0x11, 0x11, 0x11, 0x00, 0x00}, // 'n'
    {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E, 0x00, 0x00}, // 'o'
    {0x00, 0x00, 0x1E, 0x11, 0x11, 0x11, 0x1E, 0x10, 0x10}, // 'p'
    {0x00, 0x00, 0x0F, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x01}, // 'q'
    {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10, 0x00, 0x00}, // 'r'
    {0x00, 0x00, 0x0F, 0x10, 0x0E, 0x01, 0x1E, 0x00, 0x00}, // 's'
    {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06, 0x00, 0x00}, // 't'
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x13, 0x0D, 0x00, 0x00}, // 'u'
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x0A, 0x04, 0x00, 0x00}, // 'v'
    {0x00, 0x00, 0x11, 0x11, 0x15, 0x15, 0x0A, 0x00, 0x00}, // 'w'
    {0x00, 0x00, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x00, 0x00}, // 'x'
    {0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E}, // 'y'
    {0x00, 0x00, 0x1F, 0x02, 0x04, 0x08, 0x1F, 0x00, 0x00}, // 'z'
    {0x02, 0x04, 0x04, 0x08, 0x04, 0x04, 0x02, 0x00, 0x00}, // '{'
    {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x00, 0x00}, // '|'
    {0x08, 0x04, 0x04, 0x02, 0x04, 0x04, 0x08, 0x00, 0x00}, // '}'
    {0x00, 0x00, 0x08, 0x15, 0x02, 0x00, 0x00, 0x00, 0x00}, // '~'

};

//===----------------------------------------------------------------------===//
// Canvas
//===----------------------------------------------------------------------===//

/// A packed RGB image with the few drawing operations the plot needs.
class Canvas {
public:
  Canvas(int width, int height, Rgb background)
      : w(width), h(height), pixels(static_cast<size_t>(width) * height * 3) {
    for (size_t i = 0; i < pixels.size(); i += 3) {
      pixels[i] = background.r;
      pixels[i + 1] = background.g;
      pixels[i + 2] = background.b;
    }
  }

  int width() const { return w; }
  int height() const { return h; }
  const std::vector<uint8_t> &rgb() const { return pixels; }

  void set(int x, int y, Rgb c) { blend(x, y, c, 1.0); }

  /// Mixes `c` into the pixel with weight `alpha` in [0, 1].
  void blend(int x, int y, Rgb c, double alpha) {
    if (x < 0 || y < 0 || x >= w || y >= h || alpha <= 0)
      return;
    alpha = std::min(alpha, 1.0);
    uint8_t *p = &pixels[(static_cast<size_t>(y) * w + x) * 3];
    auto mix = [alpha](uint8_t dst, uint8_t src) {
      return static_cast<uint8_t>(std::lround(dst + (src - dst) * alpha));
    };
    p[0] = mix(p[0], c.r);
    p[1] = mix(p[1], c.g);
    p[2] = mix(p[2], c.b);
  }

  void fillRect(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = std::max(y0, 0); y <= std::min(y1, h - 1); ++y)
      for (int x = std::max(x0, 0); x <= std::min(x1, w - 1); ++x)
        set(x, y, c);
  }

  /// Draws `text` with its top-left corner at (x, y), each font pixel a
  /// `scale` x `scale` block. Characters outside printable ASCII show as '?'.
  void drawText(int x, int y, const std::string &text, int scale, Rgb c) {
    for (char ch : text) {
      int index = ch >= ' ' && ch <= '~' ? ch - ' ' : '?' - ' ';
      for (int row = 0; row < kGlyphRows; ++row)
        for (int col = 0; col < kGlyphWidth; ++col)
          if (kFont[index][row] & (1 << (kGlyphWidth - 1 - col)))
            fillRect(x + col * scale, y + row * scale,
                     x + (col + 1) * scale - 1, y + (row + 1) * scale - 1, c);
      x += kAdvance * scale;
    }
  }

private:
  int w, h;
  std::vector<uint8_t> pixels;
};

int textWidth(const std::string &text, int scale) {
  return text.empty()
             ? 0
             : static_cast<int>(text.size()) * kAdvance * scale - scale;
}

/// Per-pixel coverage of the curve inside the plot area. Segments are
/// accumulated with `max` so that joints do not darken, then composited once.
class CoverageMask {
public:
  CoverageMask(int x0, int y0, int x1, int y1)
      : x0(x0), y0(y0), w(x1 - x0 + 1), h(y1 - y0 + 1),
        alpha(static_cast<size_t>(w) * h, 0.0f) {}

  /// A thick antialiased segment: coverage falls off linearly over one pixel
  /// at distance `halfWidth` from the segment.
  void segment(double ax, double ay, double bx, double by, double halfWidth) {
    double reach = halfWidth + 1;
    int minX =
        std::max(x0, static_cast<int>(std::floor(std::min(ax, bx) - reach)));
    int maxX = std::min(x0 + w - 1,
                        static_cast<int>(std::ceil(std::max(ax, bx) + reach)));
    int minY =
        std::max(y0, static_cast<int>(std::floor(std::min(ay, by) - reach)));
    int maxY = std::min(y0 + h - 1,
                        static_cast<int>(std::ceil(std::max(ay, by) + reach)));
    double dx = bx - ax, dy = by - ay;
    double len2 = dx * dx + dy * dy;
    for (int y = minY; y <= maxY; ++y) {
      for (int x = minX; x <= maxX; ++x) {
        double t = len2 > 0 ? ((x - ax) * dx + (y - ay) * dy) / len2 : 0.0;
        t = std::clamp(t, 0.0, 1.0);
        double ex = x - (ax + t * dx), ey = y - (ay + t * dy);
        double d = std::sqrt(ex * ex + ey * ey);
        auto a = static_cast<float>(std::clamp(halfWidth + 0.5 - d, 0.0, 1.0));
        float &cell = alpha[static_cast<size_t>(y - y0) * w + (x - x0)];
        cell = std::max(cell, a);
      }
    }
  }

  void composite(Canvas &canvas, Rgb color) const {
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        canvas.blend(x0 + x, y0 + y, color,
                     alpha[static_cast<size_t>(y) * w + x]);
  }

private:
  int x0, y0, w, h;
  std::vector<float> alpha;
};

//===----------------------------------------------------------------------===//
// Axes
//===----------------------------------------------------------------------===//

/// A value range mapped onto a pixel interval; `flip` maps `lo` to the end
/// (for y, which grows downwards).
struct Axis {
  double lo, hi;
  int pixelLo, pixelHi;
  bool flip;

  double toPixel(double v) const {
    double f = (v - lo) / (hi - lo);
    if (flip)
      f = 1 - f;
    return pixelLo + f * (pixelHi - pixelLo);
  }
};

/// Labels for step ticks; large counts get a k/M/G/T suffix so labels stay
/// short (`250k`, `1.2M`).
std::string formatStepLabel(double value, double step, double maxAbs) {
  static const std::pair<double, const char *> kUnits[] = {
      {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  if (value == 0)
    return "0";
  if (maxAbs >= 1e4) {
    for (const auto &[unit, suffix] : kUnits) {
      if (maxAbs < unit)
        continue;
      int decimals = std::clamp(
          static_cast<int>(std::ceil(-std::log10(step / unit) - 1e-9)), 0, 3);
      return absl::StrFormat("%.*f%s", decimals, value / unit, suffix);
    }
  }
  return absl::StrFormat("%.0f", value);
}

/// Labels for value ticks, with just enough digits to tell ticks apart.
std::string formatValueLabel(double value, double step, double maxAbs) {
  if (value == 0)
    return "0";
  if (maxAbs >= 1e5 || maxAbs < 1e-3) {
    int digits = std::clamp(static_cast<int>(std::floor(std::log10(maxAbs)) -
                                             std::floor(std::log10(step))),
                            0, 6);
    return absl::StrFormat("%.*e", digits, value);
  }
  int decimals =
      std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 10);
  return absl::StrFormat("%.*f", decimals, value);
}

/// The finite points of a curve in step order (the rest only counted) and
/// the ranges of the plot, widened where the data alone gives an empty one.
struct PlotData {
  std::vector<std::pair<double, double>> curve;
  size_t skipped = 0;
  double xLo = 0, xHi = 1, yLo = 0, yHi = 1;
};

PlotData
preparePlotData(const std::vector<std::pair<int64_t, double>> &points) {
  PlotData data;
  std::vector<std::pair<double, double>> &curve = data.curve;
  for (const auto &[step, value] : points) {
    if (std::isfinite(value))
      curve.emplace_back(static_cast<double>(step), value);
    else
      ++data.skipped;
  }
  std::stable_sort(
      curve.begin(), curve.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  double &xLo = data.xLo, &xHi = data.xHi, &yLo = data.yLo, &yHi = data.yHi;
  if (!curve.empty()) {
    xLo = curve.front().first;
    xHi = curve.back().first;
    auto [minIt, maxIt] = std::minmax_element(
        curve.begin(), curve.end(),
        [](const auto &a, const auto &b) { return a.second < b.second; });
    yLo = minIt->second;
    yHi = maxIt->second;
  }
  if (xHi == xLo) {
    xLo -= 1;
    xHi += 1;
  }
  // A little room on both sides keeps the curve's ends off the frame.
  double xPad = (xHi - xLo) * 0.02;
  xLo -= xPad;
  xHi += xPad;
  if (yHi == yLo) {
    double pad = yLo == 0 ? 1.0 : std::fabs(yLo) * 0.1;
    yLo -= pad;
    yHi += pad;
  } else {
    double pad = (yHi - yLo) * 0.05;
    yLo -= pad;
    yHi += pad;
  }
  return data;
}

/// Draws `curve` inside the frame (left, top)-(right, bottom), antialiased;
/// a single point is drawn as a dot.
void drawCurve(Canvas &canvas,
               const std::vector<std::pair<double, double>> &curve,
               const Axis &xAxis, const Axis &yAxis, int left, int top,
               int right, int bottom, Rgb color) {
  CoverageMask mask(left + 1, top + 1, right - 1, bottom - 1);
  const double halfWidth = 1.0;
  for (size_t i = 0; i < curve.size(); ++i) {
    double ax = xAxis.toPixel(curve[i].first),
           ay = yAxis.toPixel(curve[i].second);
    if (curve.size() == 1) {
      mask.segment(ax, ay, ax, ay, 3.0);
      break;
    }
    if (i + 1 == curve.size())
      break;
    mask.segment(ax, ay, xAxis.toPixel(curve[i + 1].first),
                 yAxis.toPixel(curve[i + 1].second), halfWidth);
  }
  mask.composite(canvas, color);
}

//===----------------------------------------------------------------------===//
// PNG output
//===----------------------------------------------------------------------===//

void appendBe32(std::string &out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

/// Appends a chunk: length, type, data, CRC-32 of type and data.
void appendChunk(std::string &out, const char type[4],
                 const std::string &data) {
  appendBe32(out, static_cast<uint32_t>(data.size()));
  size_t typeAt = out.size();
  out.append(type, 4);
  out += data;
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef *>(out.data() + typeAt),
              static_cast<uInt>(4 + data.size()));
  appendBe32(out, static_cast<uint32_t>(crc));
}

absl::Status writeFileAtomically(const std::string &path,
                                 const std::string &bytes) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return absl::ErrnoToStatus(
          ec.value(), absl::StrFormat("cannot create directory '%s' for '%s'",
                                      parent.string(), path));
  }
  // Write beside the target and rename, so a viewer refreshing the plot
  // during training never sees a truncated file.
  std::string tmpPath = path + ".tmp";
  std::FILE *out = std::fopen(tmpPath.c_str(), "wb");
  if (!out)
    return absl::ErrnoToStatus(errno,
                               absl::StrFormat("cannot write '%s'", tmpPath));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
  int error = errno;
  if (std::fclose(out) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && std::rename(tmpPath.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    std::remove(tmpPath.c_str());
    return absl::ErrnoToStatus(error,
                               absl::StrFormat("cannot write '%s'", path));
  }
  return absl::OkStatus();
}

} // namespace

std::vector<double> sd::telemetry::niceTicks(double lo, double hi,
                                             int targetCount, double &step) {
  std::vector<double> ticks;
  step = 0;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi <= lo || targetCount < 1)
    return ticks;
  double rough = (hi - lo) / targetCount;
  double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  double residual = rough / magnitude;
  double nice = residual < 1.5 ? 1 : residual < 3 ? 2 : residual < 7 ? 5 : 10;
  step = nice * magnitude;
  double first = std::ceil(lo / step - 1e-9);
  for (double k = first;; k += 1) {
    double t = k * step;
    if (t > hi + step * 1e-9 || ticks.size() > 1000)
      break;
    // k * step keeps values like 0.30000000000000004 away, and avoids -0.
    ticks.push_back(k == 0 ? 0.0 : t);
  }
  return ticks;
}

absl::Status sd::telemetry::encodePng(int width, int height,
                                      const std::vector<uint8_t> &rgb,
                                      std::string &png) {
  if (width <= 0 || height <= 0 ||
      rgb.size() != static_cast<size_t>(width) * height * 3)
    return absl::InvalidArgumentError(absl::StrFormat(
        "image of %dx%d pixels needs %d RGB bytes, got %d", width, height,
        static_cast<size_t>(std::max(width, 0)) * std::max(height, 0) * 3,
        rgb.size()));
  // Each row starts with its filter type; 0 (None) keeps the encoder
  // trivial, and zlib still shrinks a mostly white plot to a few KiB.
  size_t rowBytes = static_cast<size_t>(width) * 3;
  std::string raw;
  raw.reserve((rowBytes + 1) * height);
  for (int y = 0; y < height; ++y) {
    raw.push_back('\0');
    raw.append(reinterpret_cast<const char *>(rgb.data()) + y * rowBytes,
               rowBytes);
  }
  uLongf compressedSize = compressBound(raw.size());
  std::string compressed(compressedSize, '\0');
  int rc =
      compress2(reinterpret_cast<Bytef *>(compressed.data()), &compressedSize,
                reinterpret_cast<const Bytef *>(raw.data()), raw.size(),
                Z_DEFAULT_COMPRESSION);
  if (rc != Z_OK)
    return absl::InternalError(
        absl::StrFormat("zlib compress2 failed with code %d", rc));
  compressed.resize(compressedSize);

  std::string header;
  appendBe32(header, static_cast<uint32_t>(width));
  appendBe32(header, static_cast<uint32_t>(height));
  // Bit depth 8, color type 2 (RGB), deflate, adaptive filtering, no
  // interlace.
  header += std::string("\x08\x02\x00\x00\x00", 5);

  png.assign("\x89PNG\r\n\x1a\n", 8);
  appendChunk(png, "IHDR", header);
  appendChunk(png, "IDAT", compressed);
  appendChunk(png, "IEND", "");
  return absl::OkStatus();
}

absl::Status sd::telemetry::writeLossPlot(
    const std::string &path,
    const std::vector<std::pair<int64_t, double>> &points,
    const LossPlotOptions &options) {
  const int width = options.width, height = options.height;
  if (width < 200 || height < 150 || width > 8192 || height > 8192)
    return absl::InvalidArgumentError(absl::StrFormat(
        "loss plot '%s' of %dx%d pixels is outside 200x150 to 8192x8192", path,
        width, height));

  const Rgb kBackground{255, 255, 255}, kText{40, 40, 40}, kFrame{80, 80, 80},
      kGrid{226, 226, 226};
  // Font pixels are 2x2 on a plot of the default size: 1x1 is too small to
  // read on a high-resolution screen.
  const int scale = width >= 600 && height >= 400 ? 2 : 1;
  const int lineHeight = kCapHeight * scale;

  PlotData data = preparePlotData(points);
  PlotData second = preparePlotData(options.secondary);
  if (!second.curve.empty()) {
    if (data.curve.empty()) {
      data.xLo = second.xLo, data.xHi = second.xHi;
      data.yLo = second.yLo, data.yHi = second.yHi;
    } else {
      data.xLo = std::min(data.xLo, second.xLo);
      data.xHi = std::max(data.xHi, second.xHi);
      data.yLo = std::min(data.yLo, second.yLo);
      data.yHi = std::max(data.yHi, second.yHi);
    }
  }
  const std::vector<std::pair<double, double>> &curve = data.curve;
  const double xLo = data.xLo, xHi = data.xHi, yLo = data.yLo, yHi = data.yHi;

  double xStep = 0, yStep = 0;
  std::vector<double> xTicks = niceTicks(xLo, xHi, 6, xStep);
  // Steps are integers: never a tick between two of them.
  if (xStep < 1) {
    xTicks.clear();
    xStep = 1;
    for (double t = std::ceil(xLo); t <= xHi; t += 1)
      xTicks.push_back(t);
  }
  std::vector<double> yTicks = niceTicks(yLo, yHi, 6, yStep);

  double xMaxAbs = std::max(std::fabs(xLo), std::fabs(xHi));
  double yMaxAbs = 0;
  for (double t : yTicks)
    yMaxAbs = std::max(yMaxAbs, std::fabs(t));
  std::vector<std::string> yLabels;
  int yLabelWidth = 0;
  for (double t : yTicks) {
    yLabels.push_back(formatValueLabel(t, yStep, yMaxAbs));
    yLabelWidth = std::max(yLabelWidth, textWidth(yLabels.back(), scale));
  }

  // Layout: title above, value labels left, step labels and "step" below.
  const int tickLength = 3 * scale;
  const int left = std::max(yLabelWidth + tickLength + 6 * scale, 30 * scale);
  const int right = width - 1 - 16 * scale;
  const int top = lineHeight + 14 * scale;
  const int bottom = height - 1 - (2 * lineHeight + 16 * scale);
  Axis xAxis{xLo, xHi, left, right, false};
  Axis yAxis{yLo, yHi, top, bottom, true};

  Canvas canvas(width, height, kBackground);

  // Grid lines and tick marks with their labels.
  for (double t : xTicks) {
    int px = static_cast<int>(std::lround(xAxis.toPixel(t)));
    canvas.fillRect(px, top, px, bottom, kGrid);
    canvas.fillRect(px, bottom, px, bottom + tickLength, kFrame);
    std::string label = formatStepLabel(t, xStep, xMaxAbs);
    int labelX = std::clamp(px - textWidth(label, scale) / 2, 0,
                            width - textWidth(label, scale));
    canvas.drawText(labelX, bottom + tickLength + 3 * scale, label, scale,
                    kText);
  }
  for (size_t i = 0; i < yTicks.size(); ++i) {
    int py = static_cast<int>(std::lround(yAxis.toPixel(yTicks[i])));
    canvas.fillRect(left, py, right, py, kGrid);
    canvas.fillRect(left - tickLength, py, left, py, kFrame);
    canvas.drawText(left - tickLength - 3 * scale -
                        textWidth(yLabels[i], scale),
                    py - lineHeight / 2, yLabels[i], scale, kText);
  }
  // Frame around the plot area.
  canvas.fillRect(left, top, right, top, kFrame);
  canvas.fillRect(left, bottom, right, bottom, kFrame);
  canvas.fillRect(left, top, left, bottom, kFrame);
  canvas.fillRect(right, top, right, bottom, kFrame);

  // Axis label and title.
  canvas.drawText((left + right - textWidth("step", scale)) / 2,
                  height - 1 - lineHeight - 6 * scale, "step", scale, kText);
  std::string title = options.metricName;
  if (!options.runName.empty())
    absl::StrAppend(&title, " - ", options.runName);
  if (!second.curve.empty())
    absl::StrAppend(&title, " (orange: ", options.secondaryName, ")");
  if (curve.empty())
    absl::StrAppend(&title, " (no data)");
  if (data.skipped > 0)
    absl::StrAppend(&title, " (", data.skipped, " non-finite skipped)");
  int titleScale = scale;
  if (textWidth(title, titleScale) > width - 8 && titleScale > 1)
    titleScale = 1;
  canvas.drawText(std::max((width - textWidth(title, titleScale)) / 2, 4),
                  6 * scale, title, titleScale, kText);

  drawCurve(canvas, curve, xAxis, yAxis, left, top, right, bottom,
            options.curveColor);
  if (!second.curve.empty())
    drawCurve(canvas, second.curve, xAxis, yAxis, left, top, right, bottom,
              options.secondaryColor);

  std::string png;
  if (absl::Status status =
          encodePng(canvas.width(), canvas.height(), canvas.rgb(), png);
      !status.ok())
    return absl::InternalError(absl::StrCat("cannot encode loss plot '", path,
                                            "': ", status.message()));
  return writeFileAtomically(path, png);
}
