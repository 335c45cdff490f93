//===- ProgramFiles.cpp - the emitted program's C++ files -----------------===//
//
// Writes the code the ProgramEmitter made of a planned function
// (OpenMPEmitter.cpp) as a few C++ files in one text, in LLVM's split-file
// form (a `//--- NAME` line starts each file), so that the runtime compiles
// them in parallel:
// - `sd_program.h`: the ABI header, constants and the kernels' declarations;
// - `sd_kernels.h`: the kernels' helpers (and the standard headers they
//   need);
// - `program.cpp`: `sd_program_run`, which makes the frame (the arguments
//   `a[N]` and the buffers that outlive their step, `b[N]`) and calls the
//   step functions in order;
// - `steps_N.cpp`: a function running a few hundred steps (allocations,
//   kernel and runtime calls, releases), the static tables (shapes,
//   collective descriptors) they read and the standard headers they need;
// - `kernels_N.cpp`: one function per distinct fused kernel
//   (KernelBuilder.cpp). Kernels with the same body (the same loop nest at
//   the same shapes, which a transformer repeats in every layer) are one
//   function, written once.
// Files are balanced by the size of their text, and how many there are
// depends on the program only, so the text (the cache key) does not depend
// on the machine.
//
//===----------------------------------------------------------------------===//

#include "ProgramEmitter.h"

#include "sd/IR/SDOps.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sd;
using namespace mlir::sd::openmp;

/// The text of sd/Runtime/ProgramABI.h, embedded at build time.
static const char kProgramABIText[] =
#include "sd/Target/OpenMP/ProgramABI.inc"
    ;

namespace {

/// A kernel file holds about this many bytes of kernel text, and there are
/// at most kMaxKernelFiles of them.
constexpr size_t kKernelFileBytes = 12000;
constexpr size_t kMaxKernelFiles = 32;
/// The steps are functions of about this many bytes of code each, in files
/// of their own.
constexpr size_t kStepFileBytes = 96000;

/// The parameters of every function that runs steps.
/// The frame's slots are `float *`; a bf16 buffer's slot is reinterpreted
/// (ProgramBuilder::typedSlot).
constexpr const char *kStepParameters =
    "(const SdApi *api, SdDevice *dev, float *const *a, float **b, "
    "void **results)";

/// What every file of the program may call: bf16 conversions (as
/// sd/Runtime/BFloat16.h converts: round to nearest even, NaN kept quiet),
/// without a standard header.
constexpr const char *kElementHelpers = R"cpp(
static inline float sd_bf16_to_f32(sd_bf16 x) {
  uint32_t bits = static_cast<uint32_t>(x.bits) << 16;
  float f;
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}
// Branch-free (a NaN is selected, not branched to), so that loops of
// conversions vectorize.
static inline uint32_t sd_bf16_round_bits(uint32_t bits) {
  uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  uint32_t quiet = (bits | 0x00400000u) & 0xffff0000u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
}
static inline sd_bf16 sd_f32_to_bf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  return sd_bf16{static_cast<uint16_t>(sd_bf16_round_bits(bits) >> 16)};
}
// The bf16 of a float that is one exactly (sd_round_bf16's results, values
// loaded from bf16): its high half, which sd_f32_to_bf16 would give too.
static inline sd_bf16 sd_bf16_of_exact(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  return sd_bf16{static_cast<uint16_t>(bits >> 16)};
}
static inline float sd_round_bf16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, sizeof(bits));
  bits = sd_bf16_round_bits(bits);
  __builtin_memcpy(&f, &bits, sizeof(f));
  return f;
}
// A double rounded once to bf16: first to f32 rounding to odd (toward zero,
// the last bit set when inexact), which then rounds to bf16 as the double
// would have.
static inline sd_bf16 sd_double_to_bf16(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) != d && d == d) {
    uint32_t bits;
    __builtin_memcpy(&bits, &f, sizeof(bits));
    if (__builtin_fabs(static_cast<double>(f)) > __builtin_fabs(d))
      bits -= 1;
    bits |= 1u;
    __builtin_memcpy(&f, &bits, sizeof(f));
  }
  return sd_f32_to_bf16(f);
}
)cpp";

} // namespace

/// The distinct kernels, in files of about kKernelFileBytes each.
void ProgramEmitter::writeKernelFiles(llvm::raw_ostream &os) {
  SmallVector<const Step *> kernels;
  size_t bytes = 0;
  for (const Step &step : steps)
    if (step.definesKernel()) {
      kernels.push_back(&step);
      bytes += step.function.body.size();
    }
  size_t files = std::clamp<size_t>(llvm::divideCeil(bytes, kKernelFileBytes),
                                    1, kMaxKernelFiles);
  size_t perFile = llvm::divideCeil(bytes, files), written = 0, file = 0;
  for (auto [i, step] : llvm::enumerate(kernels)) {
    // A new file starts when this one holds its share.
    if (i == 0 || written >= perFile * file) {
      os << "//--- kernels_" << file++ << ".cpp\n"
         << "#include \"sd_kernels.h\"\n";
    }
    written += step->function.body.size();
    os << step->function.comment;
    if (!step->sharers.empty())
      os << "//   (also called as " << llvm::join(step->sharers, ", ")
         << ": the same loop nest)\n";
    os << "SD_LOCAL void " << step->name() << step->function.body;
  }
}

/// The steps, in functions `sd_steps_N` of about kStepFileBytes each, a
/// file each with the statics they read; returns how many.
int64_t ProgramEmitter::writeStepFiles(llvm::raw_ostream &os) {
  // The results are written after the last step.
  if (stepEnds.empty())
    stepEnds.push_back({0, 0, {}});
  stepEnds.back().entry = entryText.size();
  llvm::append_range(stepEnds.back().includes, stepIncludes.takeVector());
  StringRef entry = entryText, statics = staticsText;
  int64_t files = 0;
  size_t beginEntry = 0, beginStatics = 0;
  llvm::SetVector<StringRef> includes;
  for (auto [i, end] : llvm::enumerate(stepEnds)) {
    includes.insert(end.includes.begin(), end.includes.end());
    if (end.entry - beginEntry < kStepFileBytes && i + 1 != stepEnds.size())
      continue;
    std::string index = std::to_string(files++);
    os << "//--- steps_" << index << ".cpp\n"
       << "#include \"sd_program.h\"\n";
    for (StringRef name : includes)
      os << "#include " << name << "\n";
    os << "\n"
       << statics.slice(beginStatics, end.statics) << "\n"
       << "SD_STEPS int32_t sd_steps_" << index << kStepParameters << " {\n"
       << "  (void)api;\n  (void)dev;\n  (void)a;\n  (void)b;\n"
       << "  (void)results;\n"
       << entry.slice(beginEntry, end.entry) << "  return 0;\n}\n";
    beginEntry = end.entry;
    beginStatics = end.statics;
    includes.clear();
  }
  return files;
}

/// The files: provenance, then the header (ABI, helpers, constants, kernel
/// declarations), the entry function, the steps and the kernels.
void ProgramEmitter::writeFiles(llvm::raw_ostream &os) {
  std::string meshText = "none";
  if (auto module = func->getParentOfType<ModuleOp>())
    for (auto mesh : module.getOps<MeshOp>()) {
      std::string s;
      llvm::raw_string_ostream ms(s);
      ms << "@" << mesh.getSymName() << " = " << mesh.getMesh();
      meshText = s;
    }
  os << "// Generated by sd-lower-to-openmp from @" << func.getSymName()
     << " (mesh " << meshText << ").\n"
     << "// C++ files in split-file form (each starts at its `//--- NAME` "
        "line). Build:\n"
     << "//   split-file THIS DIR && c++ -O3 -march=native -fopenmp -fPIC "
        "-shared DIR/*.cpp\n"
     << "//--- sd_program.h\n"
     << kProgramABIText << "\n"
     << "// Functions of the program's own (shared object).\n"
     << "#define SD_LOCAL __attribute__((visibility(\"hidden\")))\n"
     << "// The steps are straight-line calls: optimizing them harder than\n"
     << "// -O1 makes them no faster, only slower to compile.\n"
     << "#if defined(__GNUC__) && !defined(__clang__)\n"
     << "#define SD_STEPS SD_LOCAL __attribute__((optimize(\"O1\")))\n"
     << "#else\n"
     << "#define SD_STEPS SD_LOCAL\n"
     << "#endif\n"
     << kElementHelpers << "\n"
     << sharedText;
  for (Step &step : steps)
    if (step.definesKernel()) {
      StringRef body = step.function.body;
      os << "SD_LOCAL void " << step.name()
         << body.take_front(body.find(" {\n")) << ";\n";
    }
  std::string stepFiles;
  llvm::raw_string_ostream stepOs(stepFiles);
  int64_t numStepFunctions = writeStepFiles(stepOs);
  os << "//--- sd_kernels.h\n"
     << "#include \"sd_program.h\"\n"
     << kKernelHelpers;
  os << "//--- program.cpp\n"
     << "#include \"sd_program.h\"\n\n"
     << "#include <memory>\n\n"
     << "extern \"C\" int32_t sd_program_abi_version(void) { return "
        "SD_ABI_VERSION; }\n\n";
  writeSignature(os);
  for (int64_t i = 0; i < numStepFunctions; ++i)
    os << "SD_STEPS int32_t sd_steps_" << i << kStepParameters << ";\n";
  size_t numArgs = func.getNumArguments();
  os << "\nextern \"C\" int32_t sd_program_run(const SdApi *api, SdDevice "
        "*dev, void *const *args, void **results) {\n"
     << "  // The arguments, and the buffers that outlive their step.\n"
     << "  std::unique_ptr<float *[]> a(new float *[" << numArgs + 1 << "]);\n"
     << "  for (int i = 0; i < " << numArgs
     << "; ++i)\n    a[i] = static_cast<float *>(args[i]);\n"
     << "  std::unique_ptr<float *[]> b(new float *[" << nextSlot + 1
     << "]());\n";
  for (int64_t i = 0; i < numStepFunctions; ++i)
    os << "  if (int32_t st = sd_steps_" << i
       << "(api, dev, a.get(), b.get(), results)) return st;\n";
  os << "  return 0;\n}\n" << stepFiles;
  writeKernelFiles(os);
}

/// `name`: the SdElementType of each of `types`, 16 a line; null for none.
static void writeTypeTable(llvm::raw_ostream &os, StringRef name,
                           TypeRange types) {
  if (types.empty()) {
    os << "static const int32_t *const " << name << " = nullptr;\n";
    return;
  }
  os << "static const int32_t " << name << "[] = {";
  for (auto [i, type] : llvm::enumerate(types))
    os << (i % 16 ? " " : "\n    ") << abiElementType(type) << ",";
  os << "};\n";
}

void ProgramEmitter::writeSignature(llvm::raw_ostream &os) {
  writeTypeTable(os, "sd_argument_types", func.getArgumentTypes());
  writeTypeTable(os, "sd_result_types", func.getResultTypes());
  os << "static const SdSignature sd_signature = {" << func.getNumArguments()
     << ", sd_argument_types, " << func.getNumResults()
     << ", sd_result_types};\n"
     << "extern \"C\" const SdSignature *sd_program_signature(void) {\n"
     << "  return &sd_signature;\n}\n\n";
}
