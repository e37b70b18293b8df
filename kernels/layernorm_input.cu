/*
 * layernorm_input.cu — the input gradient of LayerNorm (contract: layernorm_bwd_input and
 * layernorm_bwd_input_add in kernels.h), plain or with the column sums of its inputs.
 *
 * Plain (layernorm_bwd_input_kernel): one warp per row, two passes over it: the row means of g =
 * w·dy and g·x̂, then dinp. Rows of a C that is a multiple of the 128-bit pack (and 16-byte aligned
 * pointers) are read as packs, others element by element.
 *
 * With column sums (layernorm_bwd_input_colsum_kernel): the same arithmetic for every element of
 * dinp (ln_row_means and ln_dx are shared, so the bits are the plain kernel's), and on the way the
 * sums over a chunk of rows of dy, dy·x̂ (x̂ as colsum_bwd computes it) and dres, each column's
 * written by one thread: the weight pass then adds chunks instead of reading dy, x and dres again.
 * One block is one chunk (layernorm_colsum_chunk_rows(N) contiguous rows, kernel_sizes.h). Phase
 * 1: each warp takes rows of the chunk in turn and leaves mean, rstd and the two row means in
 * shared memory. Phase 2: the threads turn to columns — X = min(C/P, 512) column groups of P
 * elements (a pack, or 1) × Y = 512/X row lanes — and each adds its rows r0 + y, r0 + y + Y, ...
 * in order while it writes dinp; the Y lanes are added in order through shared memory. So the
 * sums depend only on N, C and the path (packs or elements), never on timing; no atomics.
 * Why not per-warp accumulators over whole rows: 3·C floats a warp (12 KiB at C = 1024, 48 KiB at
 * 4096) in registers or shared memory would cut the warps in flight to a few an SM in a kernel
 * bound by DRAM; with the columns owned by threads, a thread holds 3·P sums and the shared memory
 * is 16 KiB of row statistics + 512·P floats whatever C. Both phases issue their loads in
 * batches (4 packs of x, dy and w a lane; 4 rows of x, dy and dres a thread) before using them:
 * in bf16 that holds 128 registers (ptxas -v, sm_90, no spills; 106 in fp32), one 512-thread
 * block an SM with 64 KiB (phase 1) and 96 KiB (phase 2) of loads in flight, about what the DRAM
 * latency asks for. At the reference shape (N 4096) the 128 chunks of 32 rows are one wave on an
 * H100, and the partial sums stay small (3 floats a column a chunk: 1.5 MiB at C = 1024, against
 * 24 MiB read).
 * Every launch enqueues on the caller's stream.
 */
#include "kernel_util.cuh"

static const int ln_threads = 256; /* plain kernel: 8 warps = 8 rows per block */
#define LNC_THREADS 512            /* column-sum kernel: 16 warps */

/* ---- shared arithmetic ----------------------------------------------------------------------- */

/* P elements of T at p: a 128-bit pack (P = pack128<T>::n, 16-byte aligned), or one (P = 1). */
template <typename T, int P> __device__ __forceinline__ pack128<T> ln_load(const T *p)
{
    pack128<T> r;
    if constexpr (P == 1)
        r.v[0] = *p;
    else
        r = load128(p);
    return r;
}

/* Lane `lane`'s part of a row, then the warp's: mg = mean(g), mgx = mean(g·x̂), g = w·dy. The lane
 * visits its columns lane·P + k·32·P in order of k; the loads of B of them are issued before
 * their sums (in flight together), the sums stay in that order, so B does not change the bits.
 * The plain kernel takes B = 1 (48 registers; with 4, 156), the column-sum kernel 4. */
template <typename T, bool VEC, int B>
__device__ __forceinline__ void ln_row_means(const T *x, const T *dy, const T *w, float mu,
                                             float rs, int C, int lane, float &mg, float &mgx)
{
    constexpr int P = VEC ? pack128<T>::n : 1;
    float sg = 0.0f, sgx = 0.0f;
    for (int c0 = lane * P; c0 < C; c0 += B * 32 * P) {
        pack128<T> xp[B], dp[B], wp[B];
#pragma unroll
        for (int k = 0; k < B; k++) {
            const int c = c0 + k * 32 * P;
            if (c < C) {
                xp[k] = ln_load<T, P>(x + c);
                dp[k] = ln_load<T, P>(dy + c);
                wp[k] = ln_load<T, P>(w + c);
            }
        }
#pragma unroll
        for (int k = 0; k < B; k++)
            if (c0 + k * 32 * P < C)
#pragma unroll
                for (int j = 0; j < P; j++) {
                    float g = to_f32(wp[k].v[j]) * to_f32(dp[k].v[j]);
                    sg += g;
                    sgx += g * (to_f32(xp[k].v[j]) - mu) * rs;
                }
    }
    mg = warp_sum(sg) / (float)C;
    mgx = warp_sum(sgx) / (float)C;
}

/* One element's input gradient before the residual is added; x̂ for the caller's column sum. The
 * residual is added with __fadd_rn by both kernels: the product rs·(...) is rounded first in
 * both (the plain kernel's conditional add is never fused into it), so they give the same bits. */
__device__ __forceinline__ float ln_dx(float w, float dy, float x, float mu, float rs, float mg,
                                       float mgx, float &xh)
{
    float g = w * dy;
    xh = (x - mu) * rs;
    return rs * (g - mg - xh * mgx);
}

/* ---- plain ----------------------------------------------------------------------------------- */

/* dinp = dres + the LayerNorm input gradient (dres NULL: just the gradient). Each element of dres
 * is read by the thread that then writes that element of dinp, so dres may be dinp. */
template <typename T, bool VEC>
__global__ void layernorm_bwd_input_kernel(T *dinp, const T *dres, const T *dout, const T *inp,
                                           const T *w, const float *mean, const float *rstd, int N,
                                           int C)
{
    const int P = VEC ? pack128<T>::n : 1;
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < N; row += gridDim.x * warps) {
        const T *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        T *dx = dinp + (size_t)row * C;
        const T *dr = dres ? dres + (size_t)row * C : NULL;
        const float mu = mean[row], rs = rstd[row];
        float mg, mgx, xh;
        ln_row_means<T, VEC, 1>(x, dy, w, mu, rs, C, lane, mg, mgx);
        for (int c = lane * P; c < C; c += 32 * P) {
            if (VEC) {
                pack128<T> xp = load128(x + c), dp = load128(dy + c), wp = load128(w + c), o;
                if (dr) o = load128(dr + c);
                for (int j = 0; j < P; j++) {
                    float r = ln_dx(to_f32(wp.v[j]), to_f32(dp.v[j]), to_f32(xp.v[j]), mu, rs, mg,
                                    mgx, xh);
                    if (dr) r = __fadd_rn(r, to_f32(o.v[j]));
                    o.v[j] = from_f32<T>(r);
                }
                store128(dx + c, o);
            } else {
                float r = ln_dx(to_f32(w[c]), to_f32(dy[c]), to_f32(x[c]), mu, rs, mg, mgx, xh);
                if (dr) r = __fadd_rn(r, to_f32(dr[c]));
                dx[c] = from_f32<T>(r);
            }
        }
    }
}

/* ---- with column sums ------------------------------------------------------------------------ */

/* Quantities of the column sums, in colsum_bwd's order: Σ dy, Σ dy·x̂, Σ dres. */
enum { LNC_SUM = 0, LNC_XHAT = 1, LNC_RES = 2, LNC_Q = 3 };

/* Rows r + u·step, u < U, of columns col..col+P-1 (all loads issued first): dinp written, the
 * three sums added to acc in row order. s[u] holds (mean, rstd, mg, mgx) of row r + u·step. */
template <typename T, int P, int U>
__device__ __forceinline__ void lnc_batch(float (&acc)[LNC_Q][P], T *dinp, const T *dres,
                                          const T *dout, const T *inp, const pack128<T> &wp,
                                          const float4 *st, int r, int step, int C, int col)
{
    pack128<T> xp[U], dp[U], rp[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const size_t at = (size_t)(r + u * step) * C + col;
        xp[u] = ln_load<T, P>(inp + at);
        dp[u] = ln_load<T, P>(dout + at);
        rp[u] = ln_load<T, P>(dres + at);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
        const float4 s = st[u * step];
        pack128<T> o;
#pragma unroll
        for (int j = 0; j < P; j++) {
            const float dy = to_f32(dp[u].v[j]), res = to_f32(rp[u].v[j]);
            float xh;
            const float v = ln_dx(to_f32(wp.v[j]), dy, to_f32(xp[u].v[j]), s.x, s.y, s.z, s.w, xh);
            o.v[j] = from_f32<T>(__fadd_rn(v, res));
            acc[LNC_SUM][j] += dy;
            acc[LNC_XHAT][j] += dy * xh;
            acc[LNC_RES][j] += res;
        }
        T *dst = dinp + (size_t)(r + u * step) * C + col;
        if constexpr (P == 1)
            *dst = o.v[0];
        else
            store128(dst, o);
    }
}

/* The thread's rows r, r + step, ... < r1 of columns col..col+P-1, LNC_ROWS at a time (dres may be
 * dinp: every row's loads come before its store). st[i] holds row r0 + i's statistics. */
#define LNC_ROWS 4
template <typename T, int P>
__device__ __forceinline__ void lnc_rows(float (&acc)[LNC_Q][P], T *dinp, const T *dres,
                                         const T *dout, const T *inp, const T *w, const float4 *st,
                                         int r0, int r, int r1, int step, int C, int col)
{
    const pack128<T> wp = ln_load<T, P>(w + col);
    for (; r + (LNC_ROWS - 1) * step < r1; r += LNC_ROWS * step)
        lnc_batch<T, P, LNC_ROWS>(acc, dinp, dres, dout, inp, wp, st + (r - r0), r, step, C, col);
    for (; r < r1; r += step)
        lnc_batch<T, P, 1>(acc, dinp, dres, dout, inp, wp, st + (r - r0), r, step, C, col);
}

/* Adds the Y row lanes' sums of the strip's ncols columns from c0 in lane order and writes them to
 * colsum[q][chunk][c0 + c]. Call from all threads. */
template <int P>
__device__ __forceinline__ void lnc_write(float *colsum, float *sh, const float (&acc)[LNC_Q][P],
                                          int X, int Y, int tx, int ty, int c0, int ncols, int C)
{
    const int chunk = blockIdx.x, chunks = gridDim.x;
#pragma unroll
    for (int q = 0; q < LNC_Q; q++) {
        __syncthreads(); /* sh may still be read for the previous quantity or strip */
        if (ty < Y)
#pragma unroll
            for (int j = 0; j < P; j++)
                sh[ty * X * P + tx * P + j] = acc[q][j];
        __syncthreads();
        float *out = colsum + ((size_t)q * chunks + chunk) * C + c0;
        for (int c = threadIdx.x; c < ncols; c += LNC_THREADS) {
            float s = 0.0f;
            for (int y = 0; y < Y; y++)
                s += sh[y * X * P + c];
            out[c] = s;
        }
    }
}

template <typename T, int P>
__global__ void __launch_bounds__(LNC_THREADS)
    layernorm_bwd_input_colsum_kernel(T *dinp, float *colsum, const T *dres, const T *dout,
                                      const T *inp, const T *w, const float *mean,
                                      const float *rstd, int N, int C, int rows_per_chunk)
{
    __shared__ float4 st[PP_LN_COLSUM_MAX_ROWS];
    __shared__ float sh[LNC_THREADS * P];
    const int r0 = blockIdx.x * rows_per_chunk, r1 = min(N, r0 + rows_per_chunk);
    /* phase 1: the row statistics, one warp a row */
    const int lane = threadIdx.x % 32, warps = LNC_THREADS / 32;
    for (int r = r0 + (int)threadIdx.x / 32; r < r1; r += warps) {
        const float mu = mean[r], rs = rstd[r];
        float mg, mgx;
        ln_row_means<T, (P > 1), 4>(inp + (size_t)r * C, dout + (size_t)r * C, w, mu, rs, C, lane,
                                    mg, mgx);
        if (lane == 0) st[r - r0] = make_float4(mu, rs, mg, mgx);
    }
    __syncthreads();
    /* phase 2: column groups × row lanes, strip by strip when C/P > LNC_THREADS */
    const int groups = (C + P - 1) / P, X = min(groups, LNC_THREADS), Y = LNC_THREADS / X;
    const int tx = (int)threadIdx.x % X, ty = (int)threadIdx.x / X;
    for (int g0 = 0; g0 < groups; g0 += X) {
        float acc[LNC_Q][P];
#pragma unroll
        for (int q = 0; q < LNC_Q; q++)
#pragma unroll
            for (int j = 0; j < P; j++)
                acc[q][j] = 0.0f;
        if (ty < Y && g0 + tx < groups)
            lnc_rows<T, P>(acc, dinp, dres, dout, inp, w, st, r0, r0 + ty, r1, Y, C, (g0 + tx) * P);
        lnc_write<P>(colsum, sh, acc, X, Y, tx, ty, g0 * P, min(X, groups - g0) * P, C);
    }
}

/* ---- launchers ------------------------------------------------------------------------------- */

template <typename T>
static pp_status_t ln_bwd_input_t(void *dinp, float *colsum, const void *dres, const void *dout,
                                  const void *inp, const void *w, const float *mean,
                                  const float *rstd, int N, int C, cudaStream_t stream)
{
    const T *dr = (const T *)dres, *dy = (const T *)dout, *x = (const T *)inp, *wt = (const T *)w;
    const bool vec = pack_rows_ok<T>(C, dinp, dout, inp, w) && is_aligned16(dres);
    if (colsum) {
        const int rows = layernorm_colsum_chunk_rows(N);
        const unsigned grid = (unsigned)layernorm_bwd_input_colsum_rows(N);
        if (vec)
            layernorm_bwd_input_colsum_kernel<T, pack128<T>::n><<<grid, LNC_THREADS, 0, stream>>>(
                (T *)dinp, colsum, dr, dy, x, wt, mean, rstd, N, C, rows);
        else
            layernorm_bwd_input_colsum_kernel<T, 1><<<grid, LNC_THREADS, 0, stream>>>(
                (T *)dinp, colsum, dr, dy, x, wt, mean, rstd, N, C, rows);
    } else {
        const unsigned grid = grid_for((size_t)N * 32, ln_threads);
        if (vec)
            layernorm_bwd_input_kernel<T, true>
                <<<grid, ln_threads, 0, stream>>>((T *)dinp, dr, dy, x, wt, mean, rstd, N, C);
        else
            layernorm_bwd_input_kernel<T, false>
                <<<grid, ln_threads, 0, stream>>>((T *)dinp, dr, dy, x, wt, mean, rstd, N, C);
    }
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* Both input-gradient launchers: dres is NULL (overwrite) or the gradient to add; colsum NULL or
 * where the column sums go (then dres is not NULL). */
static pp_status_t ln_bwd_input(const char *what, void *dinp, float *colsum, const void *dres,
                                const void *dout, const void *inp, const void *w, const float *mean,
                                const float *rstd, int N, int C, pp_dtype_t dtype,
                                cudaStream_t stream)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "%s: bad dtype %d", what, (int)dtype);
    if (N < 0 || C <= 0) PP_FAIL(PP_ERR_INTERNAL, "%s: bad shape N = %d, C = %d", what, N, C);
    if (N == 0) return PP_OK;
    if (!dinp || !dout || !inp || !w || !mean || !rstd)
        PP_FAIL(PP_ERR_INTERNAL, "%s: NULL pointer", what);
    if (dinp == dout || dinp == inp)
        PP_FAIL(PP_ERR_INTERNAL, "%s: dinp must not alias dout or inp", what);
    if (colsum && ((uintptr_t)colsum % sizeof(float)) != 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: colsum not 4-byte aligned", what);
    if (dtype == PP_DTYPE_BF16)
        return ln_bwd_input_t<bf16>(dinp, colsum, dres, dout, inp, w, mean, rstd, N, C, stream);
    return ln_bwd_input_t<float>(dinp, colsum, dres, dout, inp, w, mean, rstd, N, C, stream);
}

pp_status_t layernorm_bwd_input(void *dinp, const void *dout, const void *inp, const void *w,
                                const float *mean, const float *rstd, int N, int C, int accumulate,
                                pp_dtype_t dtype, cudaStream_t stream)
{
    return ln_bwd_input("layernorm_bwd_input", dinp, NULL, accumulate ? dinp : NULL, dout, inp, w,
                        mean, rstd, N, C, dtype, stream);
}

pp_status_t layernorm_bwd_input_add(void *dinp, float *colsum, const void *dres, const void *dout,
                                    const void *inp, const void *w, const float *mean,
                                    const float *rstd, int N, int C, pp_dtype_t dtype,
                                    cudaStream_t stream)
{
    if (N > 0 && !dres) PP_FAIL(PP_ERR_INTERNAL, "layernorm_bwd_input_add: NULL dres");
    return ln_bwd_input("layernorm_bwd_input_add", dinp, colsum, dres, dout, inp, w, mean, rstd, N,
                        C, dtype, stream);
}
