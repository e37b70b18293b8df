/*
 * kernel_sizes.h — the sizes and shape decisions of the kernels that callers need before anything
 * is allocated: cuBLAS workspace, the scratch of each launcher that takes one, and whether the
 * fused attention takes a shape. Plain C11, no CUDA header, static inline only, so the scheduler
 * core (built with a C compiler alone) sizes memory with the very functions the kernels use.
 * kernels.h includes this file; the kernel files take their tile and chunk constants from here.
 * The core counts tokens with the 64-bit twins at the end (`..64`), the kernels with the int
 * functions, whose types are what the kernels compute with.
 */
#ifndef PP_KERNEL_SIZES_H
#define PP_KERNEL_SIZES_H

#include "common/pp_status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Default cuBLAS / cuBLASLt workspace (the size NVIDIA recommends for Hopper). */
#define PP_GEMM_WORKSPACE_BYTES ((size_t)32 << 20)

/* Fused attention: query rows and keys per tile (flash_attention.cu). */
#define PP_FLASH_TILE 64

/* LayerNorm parameter gradients (layernorm.cu): rows split into at most PP_LN_MAX_CHUNKS chunks
 * of at least PP_LN_MIN_ROWS rows; columns in strips of PP_COLSUM_COLS (kernel_util.cuh). */
#define PP_LN_MIN_ROWS   64
#define PP_LN_MAX_CHUNKS 256
#define PP_COLSUM_COLS   128

/* Upper bound on CUB's radix-sort temporary storage for n 32-bit keys with 32-bit values (the
 * onesweep sort of sm_70 and later: two alternate buffers 8n, a lookback of 256 counters of 8
 * bytes per tile of at least 128 keys 16n, per-pass bins and counters under 64 KiB, alignment).
 * encoder_bwd checks CUB's own figure against it and fails rather than overrun. */
static inline size_t encoder_sort_temp_bound(int n)
{
    return (size_t)32 * (size_t)(n > 0 ? n : 0) + ((size_t)128 << 10);
}

static inline size_t kernel_align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

/* encoder_bwd scratch: sorted keys [N], positions [N], sorted positions [N], sort temporary. */
static inline size_t encoder_bwd_scratch_bytes(int B, int T, int V)
{
    if (B <= 0 || T <= 0 || V <= 0) return 0;
    const int N = B * T;
    return 3 * kernel_align256((size_t)N * sizeof(int)) +
           kernel_align256(encoder_sort_temp_bound(N));
}

static inline int layernorm_bwd_chunks(int N)
{
    int chunks = (N + PP_LN_MIN_ROWS - 1) / PP_LN_MIN_ROWS;
    if (chunks > PP_LN_MAX_CHUNKS) chunks = PP_LN_MAX_CHUNKS;
    return chunks < 1 ? 1 : chunks;
}

static inline int layernorm_bwd_strips(int C)
{
    return (C + PP_COLSUM_COLS - 1) / PP_COLSUM_COLS;
}

/* layernorm_bwd_weight scratch: the partial sums (2·chunks·C floats), then one ticket per column
 * strip. */
static inline size_t layernorm_bwd_weight_scratch_bytes(int N, int C)
{
    if (N <= 0 || C <= 0) return 0;
    return (size_t)2 * layernorm_bwd_chunks(N) * (size_t)C * sizeof(float) +
           (size_t)layernorm_bwd_strips(C) * sizeof(unsigned int);
}

/* LayerNorm input gradient with column sums (layernorm_bwd_input_add's colsum): the rows in
 * chunks of at least PP_LN_COLSUM_MIN_ROWS rows (all N rows in one chunk when fewer) and at most
 * PP_LN_COLSUM_MAX_ROWS, up to PP_LN_COLSUM_CHUNKS chunks where the row bounds allow; no chunk is
 * empty. One block a chunk (layernorm_input.cu), one block an SM: where N / MIN_ROWS would leave
 * fewer than PP_LN_COLSUM_WAVE blocks (about an H100's SMs), the chunks shrink towards
 * PP_LN_COLSUM_SMALL_ROWS rows so that a small N (512 rows: 16 blocks of 32) still spreads over
 * the GPU (64 blocks of 8). */
#define PP_LN_COLSUM_MIN_ROWS   32
#define PP_LN_COLSUM_SMALL_ROWS 8
#define PP_LN_COLSUM_WAVE       128
#define PP_LN_COLSUM_MAX_ROWS   1024
#define PP_LN_COLSUM_CHUNKS     256

/* Rows of N in one chunk (0 for N <= 0): chunk i starts at row i·that; the last may be short. */
static inline int layernorm_colsum_chunk_rows(int N)
{
    if (N <= 0) return 0;
    int chunks = N / PP_LN_COLSUM_MIN_ROWS;
    if (chunks < PP_LN_COLSUM_WAVE) {
        chunks = N / PP_LN_COLSUM_SMALL_ROWS;
        if (chunks > PP_LN_COLSUM_WAVE) chunks = PP_LN_COLSUM_WAVE;
    }
    if (chunks < 1) chunks = 1;
    if (chunks > PP_LN_COLSUM_CHUNKS) chunks = PP_LN_COLSUM_CHUNKS;
    const int least = (N + PP_LN_COLSUM_MAX_ROWS - 1) / PP_LN_COLSUM_MAX_ROWS;
    if (chunks < least) chunks = least;
    return (N + chunks - 1) / chunks;
}

/* The chunks of N rows: the rows of each quantity's partial sums. */
static inline int layernorm_bwd_input_colsum_rows(int N)
{
    const int rows = layernorm_colsum_chunk_rows(N);
    return rows > 0 ? (N + rows - 1) / rows : 0;
}

/* layernorm_bwd_input_add's colsum: 3 quantities × the chunks of N × C floats. */
static inline size_t layernorm_bwd_input_colsum_bytes(int N, int C)
{
    if (N <= 0 || C <= 0) return 0;
    return (size_t)3 * (size_t)layernorm_bwd_input_colsum_rows(N) * (size_t)C * sizeof(float);
}

/* 1 when the fused attention kernels take this shape: bf16 storage, d = 64 or 128, T a positive
 * multiple of PP_FLASH_TILE (any B·H). Otherwise use the GEMMs + softmax_causal path. */
static inline int attention_flash_supported(int T, int d, pp_dtype_t dtype)
{
    return dtype == PP_DTYPE_BF16 && (d == 64 || d == 128) && T > 0 && T % PP_FLASH_TILE == 0;
}

/* attention_flash_bwd scratch: one float per (b, h, query row). */
static inline size_t attention_flash_bwd_scratch_bytes(int B, int H, int T)
{
    if (B <= 0 || H <= 0 || T <= 0) return 0;
    return (size_t)B * H * T * sizeof(float);
}

/* Rows of a sequence in one block of the d = 64 flash kernels (flash_wide.cu): the row blocks of
 * attention_flash_bwd's column sums. */
#define PP_FLASH_WIDE_ROWS 128

/* attention_flash_bwd's column sums of dq, dk, dv (its `colsum`): B·⌈T/128⌉ row blocks (_rows) of
 * 3·H·d floats where the kernels can write them (d = 64), 0 bytes otherwise. Whether a call writes
 * them also depends on PPSCHED_FLASH_TILE (attention_flash_bwd_colsum_ok); the size does not, so
 * memory plans never depend on the environment. */
static inline int attention_flash_bwd_colsum_rows(int B, int T)
{
    if (B <= 0 || T <= 0) return 0;
    return B * ((T + PP_FLASH_WIDE_ROWS - 1) / PP_FLASH_WIDE_ROWS);
}

static inline size_t attention_flash_bwd_colsum_bytes(int B, int H, int T, int d)
{
    if (H <= 0 || d != 64) return 0;
    return (size_t)attention_flash_bwd_colsum_rows(B, T) * 3 * (size_t)H * (size_t)d *
           sizeof(float);
}

/* ---- 64-bit token counts, for the core -------------------------------------------------------
 * The kernels count the rows of a micro-batch (its tokens, N = B·T) in int, and the functions
 * above do too, so that they size exactly what the kernels compute with; the resolve step refuses
 * a shape past that (config/resolve.c). The cost model and the memory layout (model/) price any
 * shape they are given, so they count tokens in int64_t with these: each is its namesake above in
 * 64-bit arithmetic, equal to it wherever that one's arithmetic stays in int (tests/cpu/
 * test_stage_size.c compares them). */

static inline size_t encoder_bwd_scratch_bytes64(int B, int T, int V)
{
    if (B <= 0 || T <= 0 || V <= 0) return 0;
    const size_t N = (size_t)B * (size_t)T;
    return 3 * kernel_align256(N * sizeof(int)) +
           kernel_align256((size_t)32 * N + ((size_t)128 << 10));
}

static inline int64_t layernorm_bwd_chunks64(int64_t N)
{
    int64_t chunks = (N + PP_LN_MIN_ROWS - 1) / PP_LN_MIN_ROWS;
    if (chunks > PP_LN_MAX_CHUNKS) chunks = PP_LN_MAX_CHUNKS;
    return chunks < 1 ? 1 : chunks;
}

static inline size_t layernorm_bwd_weight_scratch_bytes64(int64_t N, int C)
{
    if (N <= 0 || C <= 0) return 0;
    return (size_t)2 * (size_t)layernorm_bwd_chunks64(N) * (size_t)C * sizeof(float) +
           (size_t)layernorm_bwd_strips(C) * sizeof(unsigned int);
}

static inline int64_t layernorm_colsum_chunk_rows64(int64_t N)
{
    if (N <= 0) return 0;
    int64_t chunks = N / PP_LN_COLSUM_MIN_ROWS;
    if (chunks < PP_LN_COLSUM_WAVE) {
        chunks = N / PP_LN_COLSUM_SMALL_ROWS;
        if (chunks > PP_LN_COLSUM_WAVE) chunks = PP_LN_COLSUM_WAVE;
    }
    if (chunks < 1) chunks = 1;
    if (chunks > PP_LN_COLSUM_CHUNKS) chunks = PP_LN_COLSUM_CHUNKS;
    const int64_t least = (N + PP_LN_COLSUM_MAX_ROWS - 1) / PP_LN_COLSUM_MAX_ROWS;
    if (chunks < least) chunks = least;
    return (N + chunks - 1) / chunks;
}

static inline int64_t layernorm_bwd_input_colsum_rows64(int64_t N)
{
    const int64_t rows = layernorm_colsum_chunk_rows64(N);
    return rows > 0 ? (N + rows - 1) / rows : 0;
}

static inline size_t layernorm_bwd_input_colsum_bytes64(int64_t N, int C)
{
    if (N <= 0 || C <= 0) return 0;
    return (size_t)3 * (size_t)layernorm_bwd_input_colsum_rows64(N) * (size_t)C * sizeof(float);
}

/* ---- the flash kernels' path at d = 64 (read from the environment at every call) ------------- */

/* 1 unless PPSCHED_FLASH_TILE=64: the 128-row (32 rows a warp) kernels at d = 64. */
static inline int flash_wide_enabled(void)
{
    const char *env = getenv("PPSCHED_FLASH_TILE");
    return !(env && strcmp(env, "64") == 0);
}

/* 1 unless PPSCHED_FLASH_MMA=sync: on a compute capability 9.0 GPU the fused attention's forward,
 * and its backward where no column sums are asked, run on warpgroup MMA (flash_hopper.cu). */
static inline int flash_wgmma_enabled(void)
{
    const char *env = getenv("PPSCHED_FLASH_MMA");
    return !(env && strcmp(env, "sync") == 0);
}

/* 1 unless PPSCHED_FLASH_BWD=unfused: the 128-row backward takes Dr and the column sums inside. */
static inline int flash_wide_bwd_fused(void)
{
    const char *env = getenv("PPSCHED_FLASH_BWD");
    return !(env && strcmp(env, "unfused") == 0);
}

/* 1 when attention_flash_bwd at head size d takes a colsum: d = 64 on the 128-row kernels with
 * Dr and the column sums inside. The stage and the cost model decide with this one function. */
static inline int attention_flash_bwd_colsum_ok(int d)
{
    return d == 64 && flash_wide_enabled() && flash_wide_bwd_fused();
}

#endif /* PP_KERNEL_SIZES_H */
