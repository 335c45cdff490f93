//===- sddata.cpp - Makes and inspects sd training datasets ---------------===//
//
//   sddata digits OUT_DIR [--resolution=8|16] [--heldout=0.1] [--seed=0]
//   sddata images SRC_DIR OUT_DIR --resolution=R [--channels=1|3] ...
//   sddata inspect DIR [--sheet=FILE.png] [--sheet-count=N] [--no-checksums]
//
// Parses the flags and calls SDData (sd/Data/Builders.h, sd/Data/Inspect.h);
// docs/data.md describes the format and the subcommands.
//
//===----------------------------------------------------------------------===//

#include "sd/Data/Builders.h"
#include "sd/Data/Inspect.h"

#include "sd/Support/ToolMain.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

static cl::OptionCategory sddataCategory("sddata options");

static cl::SubCommand
    digitsCommand("digits",
                  "Build a dataset from scikit-learn's handwritten digits");
static cl::SubCommand
    imagesCommand("images",
                  "Build a dataset from a directory of PNG/JPEG images, a "
                  "subdirectory per class");
static cl::SubCommand inspectCommand(
    "inspect", "Describe and check a dataset; optionally draw a contact sheet");

// digits
static cl::opt<std::string> digitsOut(cl::Positional, cl::Required,
                                      cl::desc("OUT_DIR"),
                                      cl::sub(digitsCommand),
                                      cl::cat(sddataCategory));
static cl::opt<int64_t>
    digitsResolution("resolution",
                     cl::desc("8 (as stored) or 16 (bilinear upscaling)"),
                     cl::value_desc("n"), cl::init(8), cl::sub(digitsCommand),
                     cl::cat(sddataCategory));
static cl::opt<std::string>
    digitsCsv("digits-csv", cl::desc("scikit-learn's digits.csv.gz"),
              cl::init(sd::data::kDefaultDigitsCsv), cl::value_desc("path"),
              cl::sub(digitsCommand), cl::cat(sddataCategory));

// images
static cl::opt<std::string> imagesSource(cl::Positional, cl::Required,
                                         cl::desc("SRC_DIR"),
                                         cl::sub(imagesCommand),
                                         cl::cat(sddataCategory));
static cl::opt<std::string> imagesOut(cl::Positional, cl::Required,
                                      cl::desc("OUT_DIR"),
                                      cl::sub(imagesCommand),
                                      cl::cat(sddataCategory));
static cl::opt<int64_t> imagesResolution(
    "resolution", cl::desc("Side of the square images (required)"),
    cl::value_desc("n"), cl::sub(imagesCommand), cl::cat(sddataCategory));
static cl::opt<int64_t> channels("channels",
                                 cl::desc("1 (grayscale) or 3 (RGB)"),
                                 cl::value_desc("n"), cl::init(3),
                                 cl::sub(imagesCommand),
                                 cl::cat(sddataCategory));
static cl::opt<std::string>
    name("name", cl::desc("Dataset name (default: SRC_DIR's name)"),
         cl::value_desc("name"), cl::sub(imagesCommand),
         cl::cat(sddataCategory));
static cl::opt<bool>
    skipBad("skip-bad",
            cl::desc("Skip (with a warning) images that do not decode"),
            cl::sub(imagesCommand), cl::cat(sddataCategory));

// digits and images
static cl::opt<double> heldout("heldout",
                               cl::desc("Fraction of samples held out"),
                               cl::value_desc("fraction"), cl::init(0.1),
                               cl::sub(digitsCommand), cl::sub(imagesCommand),
                               cl::cat(sddataCategory));
static cl::opt<uint64_t> seed("seed", cl::desc("Seed of the split and order"),
                              cl::value_desc("n"), cl::init(0),
                              cl::sub(digitsCommand), cl::sub(imagesCommand),
                              cl::cat(sddataCategory));
static cl::opt<int64_t>
    shardSize("shard-size", cl::desc("Samples per shard at most"),
              cl::value_desc("n"), cl::init(4096), cl::sub(digitsCommand),
              cl::sub(imagesCommand), cl::cat(sddataCategory));
static cl::opt<bool>
    force("force",
          cl::desc("Write into OUT_DIR even if it holds another dataset or "
                   "other files"),
          cl::sub(digitsCommand), cl::sub(imagesCommand),
          cl::cat(sddataCategory));

// inspect
static cl::opt<std::string> inspectDir(cl::Positional, cl::Required,
                                       cl::desc("DIR"), cl::sub(inspectCommand),
                                       cl::cat(sddataCategory));
static cl::opt<std::string> sheet("sheet",
                                  cl::desc("Write a contact sheet PNG here"),
                                  cl::value_desc("file.png"),
                                  cl::sub(inspectCommand),
                                  cl::cat(sddataCategory));
static cl::opt<int64_t> sheetCount("sheet-count",
                                   cl::desc("Samples on the sheet (10 a row)"),
                                   cl::value_desc("n"), cl::init(100),
                                   cl::sub(inspectCommand),
                                   cl::cat(sddataCategory));
static cl::opt<bool>
    noChecksums("no-checksums",
                cl::desc("Check sizes and shapes only, not CRC-32s"),
                cl::sub(inspectCommand), cl::cat(sddataCategory));

namespace {

sd::data::DatasetWriterOptions writerOptions() {
  sd::data::DatasetWriterOptions options;
  options.shardSize = shardSize;
  options.force = force;
  return options;
}

absl::Status finishBuild(const absl::StatusOr<sd::data::DatasetIndex> &index) {
  if (!index.ok())
    return index.status();
  llvm::outs() << "sddata: " << sd::data::formatBuildSummary(*index) << "\n";
  return absl::OkStatus();
}

absl::Status runSddata(int argc, char **argv) {
  for (cl::SubCommand *command :
       {&digitsCommand, &imagesCommand, &inspectCommand})
    cl::HideUnrelatedOptions(sddataCategory, *command);
  cl::HideUnrelatedOptions(sddataCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "sddata: make and inspect sd datasets\n");

  if (digitsCommand) {
    sd::data::DigitsOptions options;
    options.csvPath = digitsCsv;
    options.resolution = digitsResolution;
    options.heldout = heldout;
    options.seed = seed;
    options.writer = writerOptions();
    return finishBuild(sd::data::buildDigitsDataset(digitsOut, options));
  }
  if (imagesCommand) {
    if (imagesResolution.getNumOccurrences() == 0)
      return absl::InvalidArgumentError("give --resolution=R");
    sd::data::ImageFolderOptions options;
    options.resolution = imagesResolution;
    options.channels = channels;
    options.heldout = heldout;
    options.seed = seed;
    options.name = name;
    options.skipBad = skipBad;
    options.warn = [](const std::string &message) {
      llvm::errs() << "sddata: warning: " << message << "\n";
    };
    options.writer = writerOptions();
    return finishBuild(
        sd::data::buildImageFolderDataset(imagesSource, imagesOut, options));
  }
  if (inspectCommand) {
    sd::data::InspectOptions options;
    options.checksums = !noChecksums;
    options.sheetPath = sheet;
    options.sheetCount = sheetCount;
    absl::Status status =
        sd::data::inspectDataset(inspectDir, options, llvm::outs());
    llvm::outs().flush();
    return status;
  }
  return absl::InvalidArgumentError(
      "give a subcommand: digits, images or inspect (see --help)");
}

} // namespace

int main(int argc, char **argv) {
  return sd::runToolMain("sddata", argc, argv,
                         [&] { return runSddata(argc, argv); });
}
