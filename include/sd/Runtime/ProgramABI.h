/*===- ProgramABI.h - What a compiled device program sees ---------*- C -*-===*
 *
 * `sd-lower-to-openmp` turns the per-device program into one C++ translation
 * unit that the system compiler builds into a shared object. That object
 * depends on nothing but libgomp: everything it needs from the runtime
 * (memory, collectives, GEMM and the non-fused kernels) comes through the
 * function table below, so the object never links against sd or a BLAS and
 * the runtime can change its transport (threads, MPI) without
 * recompiling programs.
 *
 * The header is plain C (it is also compiled into every generated program,
 * embedded as text by the emitter) and is the only contract between the two.
 *
 * Conventions:
 * - Every tensor is a dense row-major buffer of one element type
 *   (SdElementType); shapes are int64_t arrays. The program's signature
 *   (SdSignature) and each collective (SdCollective) name the element type
 *   of the buffers they pass; the kernels below take f32 unless they say
 *   otherwise (gemm_bf16, transpose, the *_bf16 kernels, the memory and
 *   collective calls). i1 values that must be stored (rare: fused loops
 *   keep them in registers) are stored as f32 0.0/1.0.
 * - A function returning int returns 0 on success and non-zero on failure;
 *   the runtime has then recorded the error (an out-of-memory naming the
 *   tensor, a peer device that failed, ...). The program returns that
 *   non-zero value at once; it does not release its buffers (the runtime
 *   resets the device's pools after a failed step).
 * - `name` strings identify tensors in errors and traces: the SSA name or
 *   the op and its location, e.g. "%42 = sd.dot_general (dit.mlir:12)".
 *
 *===----------------------------------------------------------------------===*/

#ifndef SD_RUNTIME_PROGRAMABI_H
#define SD_RUNTIME_PROGRAMABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever anything below changes; the loader rejects a program
 * compiled against another version. */
#define SD_ABI_VERSION 12

/* The largest tensor rank and the most mesh axes a collective may name. */
#define SD_MAX_RANK 8
#define SD_MAX_AXES 8

/* One device of the mesh, as the runtime sees it (opaque to programs). */
typedef struct SdDevice SdDevice;

/* The element type of a buffer: how its bytes hold a number. SD_BF16 is
   bfloat16, the upper half of an f32's bits, stored as uint16_t. */
enum SdElementType { SD_F32 = 0, SD_BF16 = 1 };

/* A bfloat16 element in memory: its bits. A struct rather than a bare
   uint16_t, so that a program reading one as a number without converting
   it does not compile. */
typedef struct sd_bf16 {
  uint16_t bits;
} sd_bf16;

/* Memory spaces of SdApi::alloc. */
enum SdMemorySpace { SD_DEVICE_MEMORY = 0, SD_HOST_MEMORY = 1 };

enum SdCollectiveKind {
  SD_ALL_GATHER = 0,
  SD_ALL_SLICE = 1,
  SD_REDUCE_SCATTER = 2,
  SD_ALL_REDUCE = 3,
  SD_ALL_TO_ALL = 4,
  SD_COLLECTIVE_PERMUTE = 5,
};

/* One collective op of the program, as a static table entry. Mesh axes are
 * indices into the mesh's axes (in the `sd.mesh` order, which is also the
 * runtime mesh's order). Semantics are exactly those of the sd ops of the
 * same name (include/sd/IR/SDCollectiveOps.td). */
typedef struct SdCollective {
  int32_t kind;         /* SdCollectiveKind */
  int32_t element_type; /* SdElementType of the operand and the result */
  int32_t rank;
  int64_t in_shape[SD_MAX_RANK];  /* the operand's local shape */
  int64_t out_shape[SD_MAX_RANK]; /* the result's local shape */
  /* all_gather, all_slice, reduce_scatter: per dimension, its axes major to
   * minor (`dim_axes[d][0..num_dim_axes[d])`). */
  int32_t num_dim_axes[SD_MAX_RANK];
  int32_t dim_axes[SD_MAX_RANK][SD_MAX_AXES];
  /* all_reduce (reduction axes), all_to_all and collective_permute (the
   * axes forming the group, major to minor as listed). */
  int32_t num_axes;
  int32_t axes[SD_MAX_AXES];
  /* all_to_all; a positive `subgroup_size` m exchanges within consecutive
   * subgroups of m group members (0: the whole group) */
  int32_t src_dim;
  int32_t tgt_dim;
  int32_t subgroup_size;
  /* collective_permute: `num_pairs` (source, target) member pairs, flattened */
  int32_t num_pairs;
  const int64_t *pairs;
  const char *name;
} SdCollective;

/* Block sizes (rows of queries, keys) of SdApi::flash_attention and
 * flash_attention_backward, chosen by the compiler to fit the caches. Each
 * is >= 1; a block larger than its length is clamped, and a length that a
 * block does not divide ends in a partial block (as if padded with masked
 * keys). Results are bitwise reproducible for given block sizes and team
 * size; they may differ in the last bits between block sizes. The kernels may
 * shrink the item blocks (block_q, block_kv_dkv, block_q_dq) when B·H items
 * would leave threads of the team idle. */
typedef struct SdFlashBlocks {
  /* Forward: items of block_q query rows stream the keys in blocks of
   * block_kv, each in sub-blocks of block_kv_compute keys (the online-softmax
   * step). */
  int64_t block_q, block_kv_compute, block_kv;
  /* dK/dV pass: items of block_kv_dkv keys stream the queries in blocks of
   * block_q_dkv rows, against sub-blocks of block_kv_dkv_compute keys. */
  int64_t block_q_dkv, block_kv_dkv, block_kv_dkv_compute;
  /* dQ pass: items of block_q_dq query rows stream the keys in blocks of
   * block_kv_dq. */
  int64_t block_q_dq, block_kv_dq;
  /* Nonzero: dQ is accumulated in the dK/dV pass into one [Sq, D] partial
   * per (batch, head, K/V block) item, summed in block order afterwards (no
   * second pass; B·H·ceil(Skv/block_kv_dkv)·Sq·D floats of scratch); the dQ
   * sizes are then unused. */
  int32_t fused_bwd;
} SdFlashBlocks;

/* The runtime's services. Kernels run on the calling device's OpenMP team
 * and are deterministic for a given team size. */
typedef struct SdApi {
  int32_t abi_version; /* SD_ABI_VERSION */

  /* --- memory -------------------------------------------------------- */
  /* A buffer of `bytes` in `space` (SdMemorySpace) of this device's pools;
   * NULL when the pool's budget would be exceeded (the runtime has recorded
   * an out-of-memory error naming `name` and the sizes). */
  void *(*alloc)(SdDevice *dev, int64_t bytes, int32_t space, const char *name);
  /* Returns a buffer from `alloc` to its pool. NULL is ignored. */
  void (*release)(SdDevice *dev, void *buffer);
  /* sd.offload / sd.reload: copies `bytes` from `src` (in the other space)
   * into a new buffer of `to_space`, stored in `*dst`; counts the transfer.
   * The source is not released. */
  int32_t (*move)(SdDevice *dev, const void *src, int64_t bytes,
                  int32_t to_space, void **dst, const char *name);

  /* --- mesh ------------------------------------------------------------ */
  /* sd.axis_index: the row-major index of this device's coordinates on
   * `axes` (major to minor as listed). */
  int64_t (*axis_index)(SdDevice *dev, const int32_t *axes, int32_t num_axes);
  /* A collective of the table; `in` and `out` hold op->element_type
   * elements, `out` has out_shape's and is allocated by the program. */
  int32_t (*collective)(SdDevice *dev, const SdCollective *op, const void *in,
                        void *out);
  /* The two halves of an asynchronous collective (sd.collective_permute_
   * start and done): `collective_start` issues `op` and returns at once;
   * `collective_done` with the same `op` and `out` waits until `out` is
   * complete and `in` is no longer read by anyone. Between the two the
   * program computes other things, and neither reads `out` nor writes
   * `in`. */
  int32_t (*collective_start)(SdDevice *dev, const SdCollective *op,
                              const void *in, void *out);
  int32_t (*collective_done)(SdDevice *dev, const SdCollective *op, void *out);

  /* --- kernels ----------------------------------------------------------- */
  /* For b in [0, batch): C_b = op(A_b) · op(B_b) + beta · C_b, row-major,
   * op(X) = Xᵀ when trans_X; A_b = A + b·stride_a (likewise B, C). An M×K
   * op(A) is stored M×K (lda ≥ K) or, transposed, K×M (lda ≥ M). */
  void (*gemm)(SdDevice *dev, int64_t batch, int32_t trans_a, int32_t trans_b,
               int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
               int64_t stride_a, const float *b, int64_t ldb, int64_t stride_b,
               float beta, float *c, int64_t ldc, int64_t stride_c);
  /* gemm with bf16 A and B, products accumulated in f32 (the CPU's bf16
   * dot-product units where it has them), and C of `c_type`
   * (SdElementType: f32, or bf16 rounded once from the f32 sums); beta is
   * 0. */
  void (*gemm_bf16)(SdDevice *dev, int64_t batch, int32_t trans_a,
                    int32_t trans_b, int64_t m, int64_t n, int64_t k,
                    const sd_bf16 *a, int64_t lda, int64_t stride_a,
                    const sd_bf16 *b, int64_t ldb, int64_t stride_b, void *c,
                    int32_t c_type, int64_t ldc, int64_t stride_c);
  /* out = transpose(in, perm): out dimension i is in dimension perm[i];
   * elements of `element_bytes` (4: f32, 2: bf16) are moved, not read. */
  void (*transpose)(SdDevice *dev, const void *in, void *out, int32_t rank,
                    const int64_t *in_shape, const int64_t *perm,
                    int32_t element_bytes);
  /* Numerically stable softmax along `dim` of a rank-`rank` tensor. */
  void (*softmax)(SdDevice *dev, const float *in, float *out, int32_t rank,
                  const int64_t *shape, int32_t dim);
  /* Normalizations over the last dimension of `rows` rows of `cols`
   * (scale, bias may be NULL; biased variance). */
  void (*layer_norm)(SdDevice *dev, const float *in, const float *scale,
                     const float *bias, float *out, int64_t rows, int64_t cols,
                     double epsilon);
  void (*rms_norm)(SdDevice *dev, const float *in, const float *scale,
                   float *out, int64_t rows, int64_t cols, double epsilon);
  /* softmax, layer_norm and rms_norm on bf16 buffers (scale and bias bf16
   * too): each row widened to f32 in a buffer of its thread, computed as
   * the f32 kernels compute it, and rounded to bf16 once, so the results
   * are those of the f32 kernel between converts, without converted copies
   * of the tensors. */
  void (*softmax_bf16)(SdDevice *dev, const sd_bf16 *in, sd_bf16 *out,
                       int32_t rank, const int64_t *shape, int32_t dim);
  void (*layer_norm_bf16)(SdDevice *dev, const sd_bf16 *in,
                          const sd_bf16 *scale, const sd_bf16 *bias,
                          sd_bf16 *out, int64_t rows, int64_t cols,
                          double epsilon);
  void (*rms_norm_bf16)(SdDevice *dev, const sd_bf16 *in, const sd_bf16 *scale,
                        sd_bf16 *out, int64_t rows, int64_t cols,
                        double epsilon);
  /* [N, spatial, C] channels last, C in `groups` groups. */
  void (*group_norm)(SdDevice *dev, const float *in, const float *scale,
                     const float *bias, float *out, int64_t n, int64_t spatial,
                     int64_t channels, int64_t groups, double epsilon);
  /* group_norm on bf16 buffers (scale and bias bf16 too): each sample's
   * group widened into a buffer of its thread and computed as group_norm
   * computes it, rounded to bf16 once, as the row norms' bf16 variants. */
  void (*group_norm_bf16)(SdDevice *dev, const sd_bf16 *in,
                          const sd_bf16 *scale, const sd_bf16 *bias,
                          sd_bf16 *out, int64_t n, int64_t spatial,
                          int64_t channels, int64_t groups, double epsilon);
  /* out[B,H,Sq,Dv] = softmax(scale·Q·Kᵀ)·V per batch and head, one head's
   * scores at a time. `mask` (f32 0/1, may be NULL) is [mask_b, mask_h, Sq,
   * Skv] with mask_b ∈ {1, B}, mask_h ∈ {1, H}; a fully masked query row
   * yields zeros. */
  int32_t (*attention)(SdDevice *dev, const float *q, const float *k,
                       const float *v, const float *mask, int64_t mask_b,
                       int64_t mask_h, float *out, int64_t b, int64_t h,
                       int64_t sq, int64_t skv, int64_t d, int64_t dv,
                       double scale);
  /* `attention` on bf16 q, k, v and out: both products run on the CPU's
   * bf16 units with f32 sums; the scores and their softmax are f32, the
   * probabilities are rounded to bf16 for the product with V, and each
   * output is rounded to bf16 once. */
  int32_t (*attention_bf16)(SdDevice *dev, const sd_bf16 *q, const sd_bf16 *k,
                            const sd_bf16 *v, const float *mask, int64_t mask_b,
                            int64_t mask_h, sd_bf16 *out, int64_t b, int64_t h,
                            int64_t sq, int64_t skv, int64_t d, int64_t dv,
                            double scale);
  /* FlashAttention-2: `attention`'s semantics (same operands, mask and
   * fully-masked-row convention) without materializing the scores, tiled by
   * `blocks`. Also writes lse[B,H,Sq] = log Σ exp(scale·q·k) over the
   * allowed keys (natural log; -inf for a row with no allowed key), which
   * the backward needs. */
  int32_t (*flash_attention)(SdDevice *dev, const float *q, const float *k,
                             const float *v, const float *mask, int64_t mask_b,
                             int64_t mask_h, float *out, float *lse, int64_t b,
                             int64_t h, int64_t sq, int64_t skv, int64_t d,
                             int64_t dv, double scale,
                             const SdFlashBlocks *blocks);
  /* The gradients d_q [B,H,Sq,D], d_k [B,H,Skv,D], d_v [B,H,Skv,Dv] of
   * flash_attention given d_out [B,H,Sq,Dv] and the forward's final `out`
   * and `lse`. Probabilities are exp(scale·q·k - lse), never renormalized,
   * so with k, v (and the mask's columns) a slice of the keys and
   * out/lse/d_out over all of them, d_k and d_v are that slice's rows of
   * the full gradients and d_q its additive share (ring attention). A
   * null d_q skips the dQ pass, null d_k and d_v the dK/dV pass (the
   * compiler's sd.flash_attention_dq and sd.flash_attention_dkv each ask
   * for theirs); fused_bwd applies when all three are asked for. */
  int32_t (*flash_attention_backward)(
      SdDevice *dev, const float *q, const float *k, const float *v,
      const float *mask, int64_t mask_b, int64_t mask_h, const float *out,
      const float *lse, const float *d_out, float *d_q, float *d_k, float *d_v,
      int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d, int64_t dv,
      double scale, const SdFlashBlocks *blocks);
  /* flash_attention and flash_attention_backward on bf16 q, k, v, out,
   * d_out and gradients (mask and lse stay f32): the tile products run on
   * the CPU's bf16 units with f32 sums; P and dS are computed in f32 and
   * rounded to bf16 where a product reads them (P·V, Pᵀ·dO, dS·K, dSᵀ·Q);
   * the online-softmax statistics, Di and every accumulator are f32, and
   * each output is rounded to bf16 once. */
  int32_t (*flash_attention_bf16)(SdDevice *dev, const sd_bf16 *q,
                                  const sd_bf16 *k, const sd_bf16 *v,
                                  const float *mask, int64_t mask_b,
                                  int64_t mask_h, sd_bf16 *out, float *lse,
                                  int64_t b, int64_t h, int64_t sq, int64_t skv,
                                  int64_t d, int64_t dv, double scale,
                                  const SdFlashBlocks *blocks);
  int32_t (*flash_attention_backward_bf16)(
      SdDevice *dev, const sd_bf16 *q, const sd_bf16 *k, const sd_bf16 *v,
      const float *mask, int64_t mask_b, int64_t mask_h, const sd_bf16 *out,
      const float *lse, const sd_bf16 *d_out, sd_bf16 *d_q, sd_bf16 *d_k,
      sd_bf16 *d_v, int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d,
      int64_t dv, double scale, const SdFlashBlocks *blocks);
  /* sd.rng_normal / sd.rng_uniform in offsets form: `out` (local shape
   * `shape`) is the block at `offsets` of the tensor of `global_shape`
   * drawn from `seed` (sd/Reference/Random.h). `a`, `b` are mean and
   * stddev (normal) or low and high (uniform). */
  void (*rng)(SdDevice *dev, int32_t normal, uint64_t seed, float *out,
              int32_t rank, const int64_t *shape, const int64_t *global_shape,
              const int64_t *offsets, double a, double b);
  /* NHWC convolution with HWIO kernel (bias may be NULL). */
  int32_t (*conv2d)(SdDevice *dev, const float *in, const float *kernel,
                    const float *bias, float *out, const int64_t *in_shape,
                    const int64_t *kernel_shape, const int64_t *out_shape,
                    const int64_t *strides, const int64_t *padding,
                    int64_t groups);
  /* sd.conv2d_input_grad and sd.conv2d_filter_grad: the gradients of the
   * conv2d of these shapes (the forward's input, kernel and result), `dy`
   * of the result's shape; `dx` of the input's, `dkernel` of the kernel's. */
  int32_t (*conv2d_input_grad)(SdDevice *dev, const float *dy,
                               const float *kernel, float *dx,
                               const int64_t *in_shape,
                               const int64_t *kernel_shape,
                               const int64_t *out_shape, const int64_t *strides,
                               const int64_t *padding, int64_t groups);
  int32_t (*conv2d_filter_grad)(SdDevice *dev, const float *in, const float *dy,
                                float *dkernel, const int64_t *in_shape,
                                const int64_t *kernel_shape,
                                const int64_t *out_shape,
                                const int64_t *strides, const int64_t *padding,
                                int64_t groups);
  /* The three on bf16 buffers (bias bf16 too): the products run on the
   * CPU's bf16 units with f32 sums; the bias, the input gradient's
   * overlapping taps and the filter gradient's partial sums are added in
   * f32, and each result is rounded to bf16 once. The filter gradient
   * writes `dkernel` of `dkernel_type` (SdElementType: f32, as
   * sd-widen-gradients makes it, or bf16). */
  int32_t (*conv2d_bf16)(SdDevice *dev, const sd_bf16 *in,
                         const sd_bf16 *kernel, const sd_bf16 *bias,
                         sd_bf16 *out, const int64_t *in_shape,
                         const int64_t *kernel_shape, const int64_t *out_shape,
                         const int64_t *strides, const int64_t *padding,
                         int64_t groups);
  int32_t (*conv2d_input_grad_bf16)(SdDevice *dev, const sd_bf16 *dy,
                                    const sd_bf16 *kernel, sd_bf16 *dx,
                                    const int64_t *in_shape,
                                    const int64_t *kernel_shape,
                                    const int64_t *out_shape,
                                    const int64_t *strides,
                                    const int64_t *padding, int64_t groups);
  int32_t (*conv2d_filter_grad_bf16)(
      SdDevice *dev, const sd_bf16 *in, const sd_bf16 *dy, void *dkernel,
      int32_t dkernel_type, const int64_t *in_shape,
      const int64_t *kernel_shape, const int64_t *out_shape,
      const int64_t *strides, const int64_t *padding, int64_t groups);

  /* --- tracing ------------------------------------------------------------ */
  /* Brackets one fused kernel, runtime kernel, GEMM, collective or memory
   * move for the trace; every begin has its end, and spans of one device
   * nest. `name` identifies the call ("gemm 256x384x1152 (dit.mlir:12)");
   * `category` is "kernel", "gemm", "collective" or "offload"; both are
   * string literals of the program. `flops` is the op's cost (0 where
   * unknown), `bytes` the bytes it reads and writes, or sends for a
   * collective. The program calls them unconditionally: they return at
   * once unless the runtime records a trace. */
  void (*trace_begin)(SdDevice *dev, const char *name, const char *category,
                      double flops, double bytes);
  void (*trace_end)(SdDevice *dev);
} SdApi;

/* The entry point every generated program defines:
 *   args[i]    the i-th argument of the per-device function (borrowed,
 *              except donated ones: see below);
 *   results[i] receives the i-th result, a buffer from api->alloc that the
 *              runtime now owns. A result the program declares donated into
 *              an argument (`sd.aliases`) may be that argument's own buffer.
 * Returns 0, or the non-zero status of the failed runtime call. */
typedef int32_t (*SdProgramEntry)(const SdApi *api, SdDevice *dev,
                                  void *const *args, void **results);
#define SD_PROGRAM_ENTRY_NAME "sd_program_run"
/* `int32_t sd_program_abi_version(void)` returns SD_ABI_VERSION. */
#define SD_PROGRAM_ABI_NAME "sd_program_abi_version"

/* The element types of the entry's buffers, which the runtime checks
 * against what it holds before the first run. */
typedef struct SdSignature {
  int32_t num_args;
  const int32_t *arg_types; /* SdElementType of args[i] */
  int32_t num_results;
  const int32_t *result_types; /* SdElementType of results[i] */
} SdSignature;
/* `const SdSignature *sd_program_signature(void)` describes the entry. */
#define SD_PROGRAM_SIGNATURE_NAME "sd_program_signature"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SD_RUNTIME_PROGRAMABI_H */
