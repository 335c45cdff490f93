//===- DType.h - The element types a run computes in ------------*- C++ -*-===//
//
// MaxDiffusion's `weights_dtype` and `activations_dtype` (and sd's
// `grad_reduce_dtype`) as one enum shared by the run specification
// (MLIR-free) and the compiler: `--weights-dtype` and friends on the tools,
// the options of sd-apply-precision. Header-only.
//
//===----------------------------------------------------------------------===//

#ifndef SD_CONFIG_DTYPE_H
#define SD_CONFIG_DTYPE_H

#include "sd/Config/NameTable.h"

#include <optional>
#include <string_view>

namespace sd {

enum class DType {
  Float32,
  BFloat16,
};

/// Each dtype with MaxDiffusion's (and JAX's) spelling.
inline constexpr NameTable<DType, 2> kDTypeNames = {{
    {DType::Float32, "float32"},
    {DType::BFloat16, "bfloat16"},
}};

/// The spelling configs and flags use ("float32", "bfloat16").
inline std::string_view dtypeName(DType type) {
  return lookupName(kDTypeNames, type);
}

/// The dtype spelled `name`: "float32" or "bfloat16", or the short names
/// "f32", "fp32", "bf16"; nullopt for anything else (float16 included:
/// sd computes in f32 or bf16).
inline std::optional<DType> parseDType(std::string_view name) {
  if (name == "f32" || name == "fp32")
    return DType::Float32;
  if (name == "bf16")
    return DType::BFloat16;
  return lookupKind(kDTypeNames, name);
}

} // namespace sd

#endif // SD_CONFIG_DTYPE_H
