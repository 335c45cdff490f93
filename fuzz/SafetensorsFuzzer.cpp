//===- SafetensorsFuzzer.cpp - Fuzzes safetensors parsing -----------------===//
//
// Input: the bytes of a safetensors file. A file that parses must keep
// parseSafetensors's promises: every tensor's values match its shape and
// its bytes lie in the file.
//
//===----------------------------------------------------------------------===//

#include "FuzzUtils.h"

#include "sd/Checkpoint/Safetensors.h"

using namespace sd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  absl::StatusOr<ckpt::SafetensorsFile> file =
      ckpt::parseSafetensors(fuzz::asText(data, size), "fuzz.safetensors");
  if (!file.ok())
    return 0;
  for (const ckpt::SafetensorsTensor &tensor : file->tensors) {
    int64_t elements = 1;
    for (int64_t dim : tensor.shape)
      elements *= dim;
    fuzz::check(static_cast<int64_t>(tensor.values.size()) == elements,
                "values do not match the shape");
    fuzz::check(tensor.fileBegin >= 8 && tensor.fileBegin <= tensor.fileEnd &&
                    tensor.fileEnd <= static_cast<int64_t>(size),
                "byte range outside the file");
    fuzz::check(file->find(tensor.name) == &tensor, "find");
  }
  return 0;
}
