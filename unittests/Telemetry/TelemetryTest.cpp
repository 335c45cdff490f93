//===- TelemetryTest.cpp - Tests for progress, metrics CSV and loss plot --===//

#include "sd/Telemetry/LossPlot.h"
#include "sd/Telemetry/MetricsCsv.h"
#include "sd/Telemetry/Progress.h"

#include "gtest/gtest.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

using namespace sd::telemetry;
namespace fs = std::filesystem;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Sets TERM for one test and restores it afterwards, so that the result
/// does not depend on the terminal the tests run in.
class ScopedTerm {
public:
  explicit ScopedTerm(const char *value) {
    if (const char *old = std::getenv("TERM"))
      saved = old;
    setenv("TERM", value, 1);
  }
  ~ScopedTerm() {
    if (saved)
      setenv("TERM", saved->c_str(), 1);
    else
      unsetenv("TERM");
  }

private:
  std::optional<std::string> saved;
};

/// Sets (or, given nullptr, unsets) an environment variable for one test
/// and restores it afterwards.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    if (const char *old = std::getenv(name))
      saved = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (saved)
      setenv(name, saved->c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  std::optional<std::string> saved;
};

/// A fresh directory per test under the gtest temporary directory.
fs::path freshDir() {
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::path(::testing::TempDir()) /
                 (std::string("sd_telemetry_") + info->name());
  fs::remove_all(dir);
  return dir;
}

std::string readFile(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void writeFile(const fs::path &path, const std::string &text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

//===----------------------------------------------------------------------===//
// Progress
//===----------------------------------------------------------------------===//

TEST(ProgressTest, FormatsEta) {
  EXPECT_EQ(formatEta(0), "0s");
  EXPECT_EQ(formatEta(42), "42s");
  EXPECT_EQ(formatEta(59.4), "59s");
  EXPECT_EQ(formatEta(59.6), "1m00s");
  EXPECT_EQ(formatEta(108), "1m48s");
  EXPECT_EQ(formatEta(3599), "59m59s");
  EXPECT_EQ(formatEta(7380), "2h03m");
  EXPECT_EQ(formatEta(7410), "2h04m");
  EXPECT_EQ(formatEta(100 * 3600), "100h00m");
  EXPECT_EQ(formatEta(-1), "?");
  EXPECT_EQ(formatEta(std::nan("")), "?");
  EXPECT_EQ(formatEta(std::numeric_limits<double>::infinity()), "?");
}

TEST(ProgressTest, PlainModePrintsOneLinePerStep) {
  std::ostringstream os;
  ProgressReporter progress(100, 0, os, /*isTerminal=*/false);
  EXPECT_FALSE(progress.terminalMode());
  progress.update(1, 0.5, 3.0);
  StepExtras extras;
  extras.samplesPerSecond = 8.1;
  extras.gflopsPerSecond = 104.2;
  // The warm-up step (3 s) is left out once a regular one is known:
  // 88 remaining steps * 1.234 s = 108.6 s.
  progress.update(12, 0.123456, 1.234, extras);
  progress.finish();
  EXPECT_EQ(os.str(),
            "step   1/100  loss 0.500000  3.000 s/step  ETA 4m57s\n"
            "step  12/100  loss 0.123456  1.234 s/step  8.10 samples/s  "
            "104.2 GFLOP/s  ETA 1m49s\n");
}

TEST(ProgressTest, PlainModeFormatsLossAndLearningRate) {
  std::ostringstream os;
  ProgressReporter progress(10, 0, os, false);
  StepExtras extras;
  extras.learningRate = 1e-4;
  progress.update(1, std::nan(""), 1.0, extras);
  progress.update(2, 2.5e-7, 1.0);
  EXPECT_EQ(os.str(),
            "step  1/10  loss nan  1.000 s/step  lr 1.00e-04  ETA 9s\n"
            "step  2/10  loss 2.5000e-07  1.000 s/step  ETA 8s\n");
}

TEST(ProgressTest, ResumedRunCountsFromItsFirstStep) {
  std::ostringstream os;
  ProgressReporter progress(100, 50, os, false);
  EXPECT_EQ(progress.startStep(), 50);
  progress.update(51, 1.0, 2.0);
  EXPECT_EQ(os.str(), "step  51/100  loss 1.000000  2.000 s/step  ETA 1m38s\n");
}

TEST(ProgressTest, EtaUsesRecentStepsWithoutWarmup) {
  std::ostringstream os;
  ProgressReporter progress(1000, 0, os, false);
  EXPECT_EQ(progress.meanStepSeconds(), 0.0);
  progress.update(1, 1.0, 30.0);
  EXPECT_DOUBLE_EQ(progress.meanStepSeconds(), 30.0);
  progress.update(2, 1.0, 2.0);
  EXPECT_DOUBLE_EQ(progress.meanStepSeconds(), 2.0);
  // Only the last kWindow steps count.
  for (int step = 3; step < 3 + 2 * static_cast<int>(ProgressReporter::kWindow);
       ++step)
    progress.update(
        step, 1.0,
        step < 3 + static_cast<int>(ProgressReporter::kWindow) ? 5.0 : 1.0);
  EXPECT_DOUBLE_EQ(progress.meanStepSeconds(), 1.0);
}

TEST(ProgressTest, UnknownTotalOmitsTotalAndEta) {
  std::ostringstream os;
  ProgressReporter progress(0, 0, os, false);
  progress.update(7, 0.25, 0.5);
  EXPECT_EQ(os.str(), "step 7  loss 0.250000  0.500 s/step\n");
}

TEST(ProgressTest, TerminalModeRedrawsOneLine) {
  ScopedTerm term("xterm-256color");
  std::ostringstream os;
  ProgressReporter progress(100, 0, os, /*isTerminal=*/true);
  ASSERT_TRUE(progress.terminalMode());
  progress.update(1, 0.5, 3.0);
  progress.update(12, 0.123456, 1.234);
  std::string expected =
      "\r[>                   ]   1/100  loss 0.500000  3.000 s/step  ETA "
      "4m57s\x1b[K"
      "\r[##>                 ]  12/100  loss 0.123456  1.234 s/step  ETA "
      "1m49s\x1b[K";
  EXPECT_EQ(os.str(), expected);

  // Text from elsewhere goes above the bar, which is redrawn below it.
  progress.printAbove("saved checkpoint step_12");
  expected += "\r\x1b[Ksaved checkpoint step_12\n"
              "[##>                 ]  12/100  loss 0.123456  1.234 s/step  "
              "ETA 1m49s\x1b[K";
  EXPECT_EQ(os.str(), expected);

  progress.update(100, 0.1, 1.0);
  progress.finish();
  expected += "\r[####################] 100/100  loss 0.100000  1.000 s/step  "
              "ETA 0s\x1b[K\n";
  EXPECT_EQ(os.str(), expected);
  // finish() is idempotent (the destructor calls it again).
  progress.finish();
  EXPECT_EQ(os.str(), expected);
}

TEST(ProgressTest, TerminalLineFitsEightyColumns) {
  ScopedTerm term("xterm");
  std::ostringstream os;
  ProgressReporter progress(1000000, 0, os, true);
  StepExtras extras;
  extras.samplesPerSecond = 12345.67;
  extras.gflopsPerSecond = 98765.4;
  extras.learningRate = 3e-4;
  progress.update(123456, -12345.678901, 123.456, extras);
  std::string out = os.str();
  ASSERT_EQ(out.front(), '\r');
  std::string line = out.substr(1, out.find('\x1b') - 1);
  EXPECT_LE(line.size(), ProgressReporter::kMaxColumns) << line;
  EXPECT_NE(line.find("ETA "), std::string::npos) << line;
  EXPECT_EQ(out.find('\n'), std::string::npos);
}

TEST(ProgressTest, PrintAboveWithoutBarJustPrints) {
  ScopedTerm term("xterm");
  std::ostringstream os;
  ProgressReporter progress(10, 0, os, true);
  progress.printAbove("compiling\n");
  EXPECT_EQ(os.str(), "compiling\n");
}

TEST(ProgressTest, DumbTerminalGetsPlainLines) {
  ScopedTerm term("dumb");
  std::ostringstream os;
  ProgressReporter progress(10, 0, os, /*isTerminal=*/true);
  EXPECT_FALSE(progress.terminalMode());
  progress.update(1, 1.0, 1.0);
  progress.printAbove("note");
  EXPECT_EQ(os.str(),
            "step  1/10  loss 1.000000  1.000 s/step  ETA 9s\nnote\n");
}

TEST(ProgressTest, MpiRanksAreNeverInteractive) {
  // mpirun gives each rank a pseudo-terminal for stdout wherever mpirun's
  // own output goes (a file, a pipe), so a rank must not redraw.
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  int rankStdout = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(rankStdout, 0);
  ScopedTerm term("xterm");
  const char *kRankVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK",
                                  "PMI_SIZE"};
  {
    ScopedEnv ompi(kRankVariables[0], nullptr),
        pmix(kRankVariables[1], nullptr), pmi(kRankVariables[2], nullptr);
    EXPECT_TRUE(isInteractiveTerminal(rankStdout));
    for (const char *variable : kRankVariables) {
      ScopedEnv rank(variable, "2");
      EXPECT_FALSE(isInteractiveTerminal(rankStdout)) << variable;
    }
  }
  close(rankStdout);
  close(master);
  // A file is no terminal.
  fs::path path = freshDir() / "progress.txt";
  fs::create_directories(path.parent_path());
  FILE *file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  EXPECT_FALSE(isInteractiveTerminal(fileno(file)));
  std::fclose(file);
}

TEST(ProgressTest, PlainLinesHaveNoEscapeCodes) {
  ScopedTerm term("xterm");
  std::ostringstream os;
  {
    ProgressReporter progress(3, 0, os, /*isTerminal=*/false);
    progress.update(1, 0.5, 0.1, StepExtras{8.0, 100.0, 1e-4, 0.4});
    progress.printAbove("checkpoint: step 1");
    progress.update(2, 0.4, 0.1);
  }
  EXPECT_EQ(os.str().find('\x1b'), std::string::npos);
  EXPECT_EQ(os.str().find('\r'), std::string::npos);
}

//===----------------------------------------------------------------------===//
// MetricsCsv
//===----------------------------------------------------------------------===//

TEST(MetricsCsvTest, WritesHeaderAndFlushesEveryRow) {
  fs::path path = freshDir() / "out" / "dit_tiny" / "metrics.csv";
  MetricsCsv csv;
  absl::Status status = csv.open(path.string(), {"loss", "lr"}, false);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(csv.header(), "wall_time,step,loss,lr");
  ASSERT_TRUE(csv.writeAt(1763802123.4567, 1, {0.5, 1e-4}).ok());
  double nan = std::nan("");
  ASSERT_TRUE(csv.writeAt(1763802124.0, 2, {-nan, -1.0 / 0.0}).ok());
  // Readable before close: a killed run keeps its rows.
  EXPECT_EQ(readFile(path), "wall_time,step,loss,lr\n"
                            "1763802123.457,1,0.5,0.0001\n"
                            "1763802124.000,2,nan,-inf\n");
  ASSERT_TRUE(csv.write(3, {0.25, 1e-4}).ok());
  ASSERT_TRUE(csv.close().ok());
  EXPECT_NE(readFile(path).find(",3,0.25,0.0001\n"), std::string::npos);
}

TEST(MetricsCsvTest, RejectsWrongValueCount) {
  fs::path path = freshDir() / "metrics.csv";
  MetricsCsv csv;
  ASSERT_TRUE(csv.open(path.string(), {"loss"}, false).ok());
  absl::Status status = csv.writeAt(1.0, 1, {0.5, 0.1});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(path.string()), std::string::npos);
  ASSERT_TRUE(csv.close().ok());
  EXPECT_EQ(csv.writeAt(1.0, 2, {0.5}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MetricsCsvTest, RejectsBadColumnNames) {
  fs::path path = freshDir() / "metrics.csv";
  MetricsCsv csv;
  EXPECT_EQ(csv.open(path.string(), {"a,b"}, false).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(csv.open(path.string(), {"loss", "loss"}, false).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(csv.open(path.string(), {"step"}, false).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(csv.open(path.string(), {""}, false).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsCsvTest, ResumeDropsRowsAfterTheResumeStep) {
  fs::path path = freshDir() / "metrics.csv";
  {
    MetricsCsv csv;
    ASSERT_TRUE(csv.open(path.string(), {"loss"}, false).ok());
    for (int step = 1; step <= 5; ++step)
      ASSERT_TRUE(csv.writeAt(100.0 + step, step, {1.0 / step}).ok());
  }
  MetricsCsv csv;
  absl::Status status = csv.open(path.string(), {"loss"}, true, 3);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(csv.keptRows(), 3u);
  ASSERT_TRUE(csv.writeAt(200.0, 4, {0.3}).ok());
  EXPECT_EQ(readFile(path), "wall_time,step,loss\n"
                            "101.000,1,1\n"
                            "102.000,2,0.5\n"
                            "103.000,3,0.333333333\n"
                            "200.000,4,0.3\n");
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
}

TEST(MetricsCsvTest, ResumeDropsACutOffLastRow) {
  fs::path path = freshDir() / "metrics.csv";
  writeFile(path, "wall_time,step,loss\r\n1.000,1,0.5\r\n2.000,2,0.4\n3.0,3");
  MetricsCsv csv;
  ASSERT_TRUE(csv.open(path.string(), {"loss"}, true, 10).ok());
  EXPECT_EQ(csv.keptRows(), 2u);
  EXPECT_EQ(readFile(path), "wall_time,step,loss\n1.000,1,0.5\n2.000,2,0.4\n");
}

TEST(MetricsCsvTest, ResumeWithoutFileStartsFresh) {
  fs::path path = freshDir() / "new" / "metrics.csv";
  MetricsCsv csv;
  ASSERT_TRUE(csv.open(path.string(), {"loss"}, true, 10).ok());
  EXPECT_EQ(csv.keptRows(), 0u);
  EXPECT_EQ(readFile(path), "wall_time,step,loss\n");
}

TEST(MetricsCsvTest, ResumeChecksTheHeader) {
  fs::path path = freshDir() / "metrics.csv";
  writeFile(path, "wall_time,step,loss\n1.000,1,0.5\n");
  MetricsCsv csv;
  absl::Status status = csv.open(path.string(), {"loss", "lr"}, true, 10);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find(path.string()), std::string::npos) << status;
  EXPECT_NE(status.message().find("wall_time,step,loss,lr"), std::string::npos)
      << status;
  // The old file is left alone.
  EXPECT_EQ(readFile(path), "wall_time,step,loss\n1.000,1,0.5\n");
}

TEST(MetricsCsvTest, ResumeRejectsRowsWithoutStep) {
  fs::path path = freshDir() / "metrics.csv";
  writeFile(path, "wall_time,step,loss\n1.000,one,0.5\n");
  MetricsCsv csv;
  absl::Status status = csv.open(path.string(), {"loss"}, true, 10);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("line 2"), std::string::npos) << status;
}

TEST(MetricsCsvTest, ErrorsNameThePath) {
  fs::path dir = freshDir();
  writeFile(dir / "file", "x");
  fs::path path = dir / "file" / "run" / "metrics.csv";
  MetricsCsv csv;
  absl::Status status = csv.open(path.string(), {"loss"}, false);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path.string()), std::string::npos) << status;
}

//===----------------------------------------------------------------------===//
// Loss plot
//===----------------------------------------------------------------------===//

TEST(LossPlotTest, NiceTicks) {
  double step = 0;
  std::vector<double> ticks = niceTicks(0, 1, 5, step);
  EXPECT_DOUBLE_EQ(step, 0.2);
  ASSERT_EQ(ticks.size(), 6u);
  EXPECT_DOUBLE_EQ(ticks[3], 0.6000000000000001);
  ticks = niceTicks(0.13, 0.87, 6, step);
  EXPECT_DOUBLE_EQ(step, 0.1);
  EXPECT_EQ(ticks.size(), 7u);
  EXPECT_DOUBLE_EQ(ticks.front(), 0.2);
  ticks = niceTicks(-3, 997, 6, step);
  EXPECT_DOUBLE_EQ(step, 200);
  EXPECT_EQ(ticks, (std::vector<double>{0, 200, 400, 600, 800}));
  ticks = niceTicks(0, 3.7e12, 6, step);
  EXPECT_DOUBLE_EQ(step, 5e11);
  EXPECT_TRUE(niceTicks(1, 1, 5, step).empty());
}

uint32_t readBe32(const std::string &s, size_t at) {
  return (uint32_t(uint8_t(s[at])) << 24) |
         (uint32_t(uint8_t(s[at + 1])) << 16) |
         (uint32_t(uint8_t(s[at + 2])) << 8) | uint32_t(uint8_t(s[at + 3]));
}

/// A decoded 8-bit RGB PNG as our encoder writes it (no filters).
struct DecodedPng {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;

  Rgb at(uint32_t x, uint32_t y) const {
    const uint8_t *p = &rgb[(size_t(y) * width + x) * 3];
    return Rgb{p[0], p[1], p[2]};
  }
  size_t count(Rgb c) const {
    size_t n = 0;
    for (uint32_t y = 0; y < height; ++y)
      for (uint32_t x = 0; x < width; ++x)
        n += at(x, y) == c;
    return n;
  }
};

/// Checks the signature, every chunk's CRC, IHDR and the size of the
/// inflated IDAT data, then unpacks the rows.
::testing::AssertionResult decodePng(const std::string &png, DecodedPng &out) {
  if (png.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) != 0)
    return ::testing::AssertionFailure() << "no PNG signature";
  std::string idat;
  bool sawIhdr = false, sawIend = false;
  for (size_t at = 8; at < png.size();) {
    if (at + 12 > png.size())
      return ::testing::AssertionFailure() << "truncated chunk at " << at;
    uint32_t length = readBe32(png, at);
    std::string type = png.substr(at + 4, 4);
    if (at + 12 + length > png.size())
      return ::testing::AssertionFailure() << "chunk " << type << " too long";
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, reinterpret_cast<const Bytef *>(png.data() + at + 4),
                4 + length);
    if (crc != readBe32(png, at + 8 + length))
      return ::testing::AssertionFailure() << "bad CRC in chunk " << type;
    std::string data = png.substr(at + 8, length);
    if (type == "IHDR") {
      if (length != 13)
        return ::testing::AssertionFailure() << "IHDR of " << length;
      out.width = readBe32(data, 0);
      out.height = readBe32(data, 4);
      if (data.substr(8) != std::string("\x08\x02\x00\x00\x00", 5))
        return ::testing::AssertionFailure() << "not 8-bit RGB";
      sawIhdr = true;
    } else if (type == "IDAT") {
      idat += data;
    } else if (type == "IEND") {
      sawIend = true;
    }
    at += 12 + length;
  }
  if (!sawIhdr || !sawIend || idat.empty())
    return ::testing::AssertionFailure() << "missing IHDR, IDAT or IEND";
  size_t rowBytes = 1 + size_t(out.width) * 3;
  size_t expected = rowBytes * out.height;
  // One spare byte detects data beyond the expected size.
  std::vector<uint8_t> raw(expected + 1);
  uLongf rawSize = raw.size();
  if (uncompress(raw.data(), &rawSize,
                 reinterpret_cast<const Bytef *>(idat.data()),
                 idat.size()) != Z_OK)
    return ::testing::AssertionFailure() << "IDAT does not inflate";
  if (rawSize != expected)
    return ::testing::AssertionFailure()
           << "IDAT inflates to " << rawSize << " bytes, expected " << expected;
  for (uint32_t y = 0; y < out.height; ++y) {
    if (raw[y * rowBytes] != 0)
      return ::testing::AssertionFailure() << "row " << y << " is filtered";
    out.rgb.insert(out.rgb.end(), raw.begin() + y * rowBytes + 1,
                   raw.begin() + (y + 1) * rowBytes);
  }
  return ::testing::AssertionSuccess();
}

/// Writes a plot of `points` and decodes it.
::testing::AssertionResult
plot(const std::vector<std::pair<int64_t, double>> &points, DecodedPng &png,
     const std::string &name = "plot") {
  fs::path path = freshDir() / "run" / (name + ".png");
  LossPlotOptions options;
  options.runName = "dit_tiny";
  absl::Status status = writeLossPlot(path.string(), points, options);
  if (!status.ok())
    return ::testing::AssertionFailure() << status;
  if (fs::exists(path.string() + ".tmp"))
    return ::testing::AssertionFailure() << "temporary file left behind";
  return decodePng(readFile(path), png);
}

std::vector<std::pair<int64_t, double>> decreasingCurve(int n) {
  std::vector<std::pair<int64_t, double>> points;
  for (int step = 1; step <= n; ++step)
    points.emplace_back(step, 0.2 + 2.0 * std::exp(-step / 80.0) +
                                  0.05 * std::sin(step * 0.7));
  return points;
}

TEST(LossPlotTest, WritesValidPngWithCurve) {
  DecodedPng png;
  ASSERT_TRUE(plot(decreasingCurve(500), png));
  EXPECT_EQ(png.width, 800u);
  EXPECT_EQ(png.height, 500u);
  const Rgb curve = LossPlotOptions().curveColor;
  EXPECT_GT(png.count(curve), 500u);
  // Background, and dark text and frame pixels.
  EXPECT_EQ(png.at(0, 0), (Rgb{255, 255, 255}));
  EXPECT_GT(png.count(Rgb{40, 40, 40}), 200u);
  // The title is drawn in the band above the plot.
  size_t titlePixels = 0;
  for (uint32_t y = 0; y < 30; ++y)
    for (uint32_t x = 0; x < png.width; ++x)
      titlePixels += png.at(x, y) == Rgb{40, 40, 40};
  EXPECT_GT(titlePixels, 50u);
  // The curve starts high on the left and ends low on the right.
  auto curveRows = [&](uint32_t x0, uint32_t x1) {
    double sum = 0;
    size_t n = 0;
    for (uint32_t y = 0; y < png.height; ++y)
      for (uint32_t x = x0; x < x1; ++x)
        if (png.at(x, y) == curve) {
          sum += y;
          ++n;
        }
    return n ? sum / n : -1.0;
  };
  double leftRow = curveRows(0, 200), rightRow = curveRows(600, 800);
  ASSERT_GE(leftRow, 0);
  ASSERT_GE(rightRow, 0);
  EXPECT_LT(leftRow, rightRow);
}

TEST(LossPlotTest, HandlesOnePointAndConstantLoss) {
  const Rgb curve = LossPlotOptions().curveColor;
  DecodedPng one;
  ASSERT_TRUE(plot({{7, 0.5}}, one));
  EXPECT_GT(one.count(curve), 4u);
  DecodedPng constant;
  ASSERT_TRUE(plot({{0, 1.0}, {10, 1.0}, {20, 1.0}}, constant));
  EXPECT_GT(constant.count(curve), 100u);
  DecodedPng zero;
  ASSERT_TRUE(plot({{0, 0.0}, {10, 0.0}}, zero));
  EXPECT_GT(zero.count(curve), 100u);
}

TEST(LossPlotTest, SkipsNonFiniteAndHandlesHugeSteps) {
  const Rgb curve = LossPlotOptions().curveColor;
  double inf = std::numeric_limits<double>::infinity();
  DecodedPng skipped;
  ASSERT_TRUE(plot({{1, 2.0}, {2, std::nan("")}, {3, inf}, {4, 1.0}}, skipped));
  EXPECT_GT(skipped.count(curve), 100u);
  DecodedPng allBad;
  ASSERT_TRUE(plot({{1, std::nan("")}, {2, -inf}}, allBad));
  EXPECT_EQ(allBad.count(curve), 0u);
  DecodedPng empty;
  ASSERT_TRUE(plot({}, empty));
  EXPECT_EQ(empty.count(curve), 0u);
  DecodedPng huge;
  ASSERT_TRUE(
      plot({{4000000000000, 3.0}, {5000000000000, 2.0}, {9000000000000, 1e-9}},
           huge));
  EXPECT_GT(huge.count(curve), 100u);
}

TEST(LossPlotTest, ReportsUnwritablePath) {
  fs::path dir = freshDir();
  writeFile(dir / "file", "x");
  std::string path = (dir / "file" / "loss.png").string();
  absl::Status status = writeLossPlot(path, decreasingCurve(10));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  LossPlotOptions tiny;
  tiny.width = 10;
  EXPECT_EQ(writeLossPlot((dir / "x.png").string(), {}, tiny).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LossPlotTest, EncodesSmallImage) {
  std::vector<uint8_t> rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9};
  std::string png;
  ASSERT_TRUE(encodePng(2, 2, rgb, png).ok());
  DecodedPng decoded;
  ASSERT_TRUE(decodePng(png, decoded));
  EXPECT_EQ(decoded.rgb, rgb);
  EXPECT_FALSE(encodePng(3, 2, rgb, png).ok());
}

} // namespace
