/*
 * kernel_util.cuh — device helpers shared by the kernel files of kernels/ (private to them):
 * fp32 <-> storage-type conversion, 128-bit packs, warp and block reductions in a fixed order,
 * the column-sum pieces shared by the bias and LayerNorm parameter gradients, and launch-size
 * helpers. Every reduction here combines values in an order that depends only on
 * the launch shape, never on timing, so the kernels built on it are bitwise deterministic.
 */
#ifndef PP_KERNEL_UTIL_CUH
#define PP_KERNEL_UTIL_CUH

#include "kernels.h"

#include "common/pp_cuda.h"

#include <cuda_bf16.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

/* ---- conversions ----------------------------------------------------------------------------- */

__device__ __forceinline__ float to_f32(float x)
{
    return x;
}
__device__ __forceinline__ float to_f32(bf16 x)
{
    return __bfloat162float(x);
}

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x)
{
    return x;
}
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float x)
{
    return __float2bfloat16_rn(x);
}

/* ---- 128-bit packs --------------------------------------------------------------------------- */

/* 16 bytes of T: 4 floats or 8 bf16. Loaded and stored with one 128-bit access. */
template <typename T> struct alignas(16) pack128 {
    static constexpr int n = 16 / (int)sizeof(T);
    T v[16 / sizeof(T)];
};

template <typename T> __device__ __forceinline__ pack128<T> load128(const T *p)
{
    pack128<T> r;
    *reinterpret_cast<int4 *>(&r) = *reinterpret_cast<const int4 *>(p);
    return r;
}

/* Read-only, streamed once (no L1 allocation). */
template <typename T> __device__ __forceinline__ pack128<T> load128cs(const T *p)
{
    pack128<T> r;
    *reinterpret_cast<int4 *>(&r) = __ldcs(reinterpret_cast<const int4 *>(p));
    return r;
}

template <typename T> __device__ __forceinline__ void store128(T *p, const pack128<T> &x)
{
    *reinterpret_cast<int4 *>(p) = *reinterpret_cast<const int4 *>(&x);
}

static inline bool is_aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

/* Whether rows of C elements of T at a, b, c and d can all be read in 16-byte packs (pack128):
 * whole packs a row, every pointer 16-byte aligned. */
template <typename T>
static inline bool pack_rows_ok(int C, const void *a, const void *b, const void *c, const void *d)
{
    return C % pack128<T>::n == 0 && is_aligned16(a) && is_aligned16(b) && is_aligned16(c) &&
           is_aligned16(d);
}

/* ---- reductions (fixed order) ---------------------------------------------------------------- */

__device__ __forceinline__ float warp_sum(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x)
{
    for (int o = 16; o > 0; o >>= 1)
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

/* Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets the
 * result. `shared` holds 32 floats. Contains __syncthreads: call from all threads. */
__device__ __forceinline__ float block_sum(float x, float *shared)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    x = warp_sum(x);
    __syncthreads(); /* shared may still be read by a previous call */
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    x = lane < nwarps ? shared[lane] : 0.0f;
    return warp_sum(x);
}

__device__ __forceinline__ float block_max(float x, float *shared)
{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    x = warp_max(x);
    __syncthreads();
    if (lane == 0) shared[warp] = x;
    __syncthreads();
    x = lane < nwarps ? shared[lane] : -INFINITY;
    return warp_max(x);
}

/* ---- column sums over row chunks (bias and LayerNorm parameter gradients) -------------------- */

/* The column-sum kernels run CS_THREADS threads per block over a strip of CS_COLS columns and one
 * chunk of rows; each writes the strip's chunk totals to partial[chunk][col], and the block that
 * finishes last for its strip sums the chunks in a fixed order. */
#define CS_COLS    PP_COLSUM_COLS
#define CS_THREADS 256
#define CS_LANES   (CS_THREADS / 32) /* chunk lanes of the final sum */

/* Call from all threads after this block wrote its partial sums. Returns true in every thread of
 * the block that is the last of `count` blocks to arrive at *counter (an integer ticket: it only
 * elects the block, the sums stay in a fixed order) and resets *counter to 0 for the next
 * launch. *flag is a shared int. */
__device__ __forceinline__ bool cs_last_block(unsigned int *counter, unsigned int count, int *flag)
{
    __threadfence(); /* this thread's partial sums are visible device-wide before the ticket */
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int prev = atomicAdd(counter, 1u);
        *flag = prev == count - 1;
        if (*flag) atomicExch(counter, 0u);
    }
    __syncthreads();
    const bool last = *flag != 0;
    if (last) __threadfence(); /* order the reads of the other blocks' partial sums after it */
    return last;
}

/* Call from all CS_THREADS threads: the sum over k in [0, chunks) of partial[k·ld + c0 + c] for
 * column c = threadIdx.x < ncols (≤ CS_COLS), returned to those threads (0 to the others). Chunk
 * lane y = warp index sums chunks y, y + CS_LANES, ... in order, then the lanes are added in order
 * 0, 1, ...: the order depends only on `chunks`. Reads through L2 (other blocks wrote the
 * partials). sh holds CS_LANES·CS_COLS floats. */
__device__ __forceinline__ float cs_sum_chunks(const float *partial, size_t ld, int c0, int ncols,
                                               int chunks, float *sh)
{
    const int lane = threadIdx.x % 32, y = threadIdx.x / 32;
    float s[CS_COLS / 32];
#pragma unroll
    for (int j = 0; j < CS_COLS / 32; j++)
        s[j] = 0.0f;
#pragma unroll 4
    for (int k = y; k < chunks; k += CS_LANES) {
        const float *row = partial + (size_t)k * ld + c0;
#pragma unroll
        for (int j = 0; j < CS_COLS / 32; j++)
            if (lane + 32 * j < ncols) s[j] += __ldcg(row + lane + 32 * j);
    }
    __syncthreads(); /* sh may still be read by a previous call */
#pragma unroll
    for (int j = 0; j < CS_COLS / 32; j++)
        sh[y * CS_COLS + lane + 32 * j] = s[j];
    __syncthreads();
    float t = 0.0f;
    if (threadIdx.x < ncols)
        for (int l = 0; l < CS_LANES; l++)
            t += sh[l * CS_COLS + threadIdx.x];
    return t;
}

/* ---- launch helpers -------------------------------------------------------------------------- */

/* Blocks for a grid-stride loop over `work` items with `threads` per block: enough to fill the
 * device, capped so that the grid size fits comfortably in an int. */
static inline unsigned grid_for(size_t work, int threads)
{
    size_t blocks = (work + (size_t)threads - 1) / (size_t)threads;
    if (blocks < 1) blocks = 1;
    if (blocks > ((size_t)1 << 20)) blocks = (size_t)1 << 20;
    return (unsigned)blocks;
}

static inline bool dtype_ok(pp_dtype_t t)
{
    return t == PP_DTYPE_FP32 || t == PP_DTYPE_BF16;
}

#endif /* PP_KERNEL_UTIL_CUH */
