// Sizes whose tensors would overflow or exceed 2^40 elements: one error
// naming the flags, never a fatal error from type inference.
// RUN: not sdgen --preset=dit-s2 --latent-size=4000000000 2>&1 | FileCheck %s --check-prefix=LATENT
// RUN: not sdgen --preset=dit-s2 --latent-size=2000000 2>&1 | FileCheck %s --check-prefix=SCORES
// RUN: not sdgen --preset=dit-s2 --batch=4611686018427387904 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not sdgen --preset=dit-s2 --hidden=4611686018427387904 --heads=1 2>&1 | FileCheck %s --check-prefix=HIDDEN
// RUN: not sdgen --preset=dit-s2 --mlp-ratio=1e300 2>&1 | FileCheck %s --check-prefix=RATIO
// RUN: not sdgen --preset=dit-s2 --depth=1000000000 2>&1 | FileCheck %s --check-prefix=DEPTH
// RUN: not sdgen --preset=wan2.1-14b --text-length=9223372036854775807 2>&1 | FileCheck %s --check-prefix=TEXT

// LATENT: error: the latent has more than 1099511627776 tokens; lower --latent-size, --height, --width or --frames
// LATENT-NOT: LLVM ERROR
// BATCH: error: the attention scores (batch × heads × tokens²) would have more than 1099511627776 elements (2^40); lower --batch
// HIDDEN: error: mlp ratio 4 × hidden size 4611686018427387904 is too wide an FFN (--hidden, --mlp-ratio)
// RATIO: error: mlp ratio 1e+300 × hidden size 384 is too wide an FFN (--hidden, --mlp-ratio)
// DEPTH: error: depth 1000000000 is above the limit of 10000 (--depth)
// TEXT: error: the attention scores (batch × heads × tokens²) would have more than 1099511627776 elements (2^40); lower --batch, --heads, the latent size or --text-length
// SCORES: error: the attention scores (batch × heads × tokens²) would have more than 1099511627776 elements (2^40); lower --batch, --heads, the latent size or --text-length
