//===- VectorPath.h - The runtime's vector instruction paths ----*- C++ -*-===//
//
// The runtime is built for any x86-64; its hot loops that gain from wider
// vectors (the softmax and attention kernels' exponentials, the bfloat16
// array conversions) carry AVX2 and AVX-512 versions chosen when first
// used. Tests run each path the CPU has against the scalar definition.
//
//===----------------------------------------------------------------------===//

#ifndef SD_RUNTIME_VECTORPATH_H
#define SD_RUNTIME_VECTORPATH_H

namespace sd::rt {

/// A vector path: the widest this CPU runs (Best), or one named.
enum class VectorPath { Best, Avx2, Avx512 };

/// Whether this CPU can run `path` (Best: always; Avx2 needs FMA too).
bool hasVectorPath(VectorPath path);

} // namespace sd::rt

#endif // SD_RUNTIME_VECTORPATH_H
