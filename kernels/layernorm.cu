/*
 * layernorm.cu — LayerNorm over the last dimension (eps PP_LAYERNORM_EPS): forward (saving mean and
 * rstd, fp32 per row, for both backward halves) and parameter gradients; the input gradient is in
 * layernorm_input.cu.
 *
 * Forward: one warp per row, fp32 math; rows of a C that is a multiple of the 128-bit pack (and
 * 16-byte aligned pointers) are read as packs, others element by element. The forward of a packed
 * row up to 32·8 packs wide reads it once into registers (all its loads in flight at once) and
 * gives the bits of the three-pass kernel, which PPSCHED_LAYERNORM=unfused selects instead.
 * Parameter gradients: one kernel writes per-row-chunk partial sums to the caller's scratch, and
 * the last block of each column strip (elected with an integer ticket, zeroed in the scratch
 * before the launch) sums the chunks in a fixed order into dw/db (+=) — no float atomics, so the
 * result is deterministic.
 */
#include "kernel_util.cuh"

#include <stdlib.h>
#include <string.h>

static const int ln_threads = 256; /* 8 warps = 8 rows per block */

/* ---- forward --------------------------------------------------------------------------------- */

template <typename T, bool VEC>
__global__ void layernorm_fwd_kernel(T *out, float *mean, float *rstd, const T *inp, const T *w,
                                     const T *b, int N, int C)
{
    const int P = VEC ? pack128<T>::n : 1;
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < N; row += gridDim.x * warps) {
        const T *x = inp + (size_t)row * C;
        T *y = out + (size_t)row * C;
        /* two passes over the row (the second hits the cache): mean, then the centred variance */
        float s = 0.0f;
        for (int c = lane * P; c < C; c += 32 * P) {
            if (VEC) {
                pack128<T> xp = load128(x + c);
                for (int j = 0; j < P; j++)
                    s += to_f32(xp.v[j]);
            } else {
                s += to_f32(x[c]);
            }
        }
        const float mu = warp_sum(s) / (float)C;
        float v = 0.0f;
        for (int c = lane * P; c < C; c += 32 * P) {
            if (VEC) {
                pack128<T> xp = load128(x + c);
                for (int j = 0; j < P; j++) {
                    float d = to_f32(xp.v[j]) - mu;
                    v += d * d;
                }
            } else {
                float d = to_f32(x[c]) - mu;
                v += d * d;
            }
        }
        const float rs = rsqrtf(warp_sum(v) / (float)C + PP_LAYERNORM_EPS);
        for (int c = lane * P; c < C; c += 32 * P) {
            if (VEC) {
                pack128<T> xp = load128(x + c), wp = load128(w + c), bp = load128(b + c), o;
                for (int j = 0; j < P; j++)
                    o.v[j] = from_f32<T>((to_f32(xp.v[j]) - mu) * rs * to_f32(wp.v[j]) +
                                         to_f32(bp.v[j]));
                store128(y + c, o);
            } else {
                y[c] = from_f32<T>((to_f32(x[c]) - mu) * rs * to_f32(w[c]) + to_f32(b[c]));
            }
        }
        if (lane == 0) {
            if (mean) mean[row] = mu;
            if (rstd) rstd[row] = rs;
        }
    }
}

/* layernorm_fwd_kernel<T, true> with the row held in registers: each lane loads its KP packs of
 * the row once (all in flight together), then the mean, the centred variance and the output come
 * from the registers. Lane `lane` holds columns (k·32 + lane)·P.. for k < KP, the columns the
 * three-pass kernel's lane visits, in the same order, so both give the same bits. Needs
 * C ≤ 32·P·KP and the 128-bit conditions of the vector path. */
template <typename T, int KP>
__global__ void layernorm_fwd_rows_kernel(T *out, float *mean, float *rstd, const T *inp,
                                          const T *w, const T *b, int N, int C)
{
    constexpr int P = pack128<T>::n;
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < N; row += gridDim.x * warps) {
        const T *x = inp + (size_t)row * C;
        pack128<T> xp[KP];
#pragma unroll
        for (int k = 0; k < KP; k++)
            if ((k * 32 + lane) * P < C) xp[k] = load128(x + (k * 32 + lane) * P);
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < KP; k++)
            if ((k * 32 + lane) * P < C)
#pragma unroll
                for (int j = 0; j < P; j++)
                    s += to_f32(xp[k].v[j]);
        const float mu = warp_sum(s) / (float)C;
        float v = 0.0f;
#pragma unroll
        for (int k = 0; k < KP; k++)
            if ((k * 32 + lane) * P < C)
#pragma unroll
                for (int j = 0; j < P; j++) {
                    const float d = to_f32(xp[k].v[j]) - mu;
                    v += d * d;
                }
        const float rs = rsqrtf(warp_sum(v) / (float)C + PP_LAYERNORM_EPS);
#pragma unroll
        for (int k = 0; k < KP; k++) {
            const int c = (k * 32 + lane) * P;
            if (c >= C) continue;
            pack128<T> wp = load128(w + c), bp = load128(b + c), o;
#pragma unroll
            for (int j = 0; j < P; j++)
                o.v[j] =
                    from_f32<T>((to_f32(xp[k].v[j]) - mu) * rs * to_f32(wp.v[j]) + to_f32(bp.v[j]));
            store128(out + (size_t)row * C + c, o);
        }
        if (lane == 0) {
            if (mean) mean[row] = mu;
            if (rstd) rstd[row] = rs;
        }
    }
}

/* ---- parameter gradients --------------------------------------------------------------------- */

/* Rows are split into chunks and columns into strips as kernel_sizes.h says. */

/* One block: the CS_COLS columns from blockIdx.x·CS_COLS over one chunk of rows (blockIdx.y),
 * P columns per thread (a 128-bit pack, or 1). Thread (tx, ty) sums rows r0 + ty, r0 + ty + Y,
 * ... of dout·x̂ and dout; the Y row lanes are added in order into partial[chunk][col] (dw) and
 * partial[chunks + chunk][col] (db); the last block of the strip adds the chunks in order
 * (cs_sum_chunks) and updates dw and db. */
template <typename T, int P>
__global__ void __launch_bounds__(CS_THREADS)
    layernorm_bwd_weight_kernel(float *dw, float *db, float *partial, unsigned int *counters,
                                const T *dout, const T *inp, const float *mean, const float *rstd,
                                int N, int C, int rows_per_chunk)
{
    constexpr int X = CS_COLS / P, Y = CS_THREADS / X;
    __shared__ float shw[Y * CS_COLS], shb[Y * CS_COLS];
    __shared__ float shf[CS_LANES * CS_COLS];
    __shared__ int last;
    const int tx = threadIdx.x % X, ty = threadIdx.x / X;
    const int c0 = blockIdx.x * CS_COLS, col = c0 + tx * P;
    const int chunk = blockIdx.y, chunks = gridDim.y, r0 = chunk * rows_per_chunk;
    const int r1 = min(N, r0 + rows_per_chunk);
    float aw[P], ab[P];
#pragma unroll
    for (int j = 0; j < P; j++)
        aw[j] = ab[j] = 0.0f;
    if (col < C) {
#pragma unroll 4
        for (int r = r0 + ty; r < r1; r += Y) {
            const float mu = mean[r], rs = rstd[r];
            const size_t at = (size_t)r * C + col;
            if (P > 1) {
                pack128<T> dy = load128cs(dout + at), x = load128cs(inp + at);
#pragma unroll
                for (int j = 0; j < P; j++) {
                    const float d = to_f32(dy.v[j]);
                    aw[j] += d * ((to_f32(x.v[j]) - mu) * rs);
                    ab[j] += d;
                }
            } else {
                const float d = to_f32(dout[at]);
                aw[0] += d * ((to_f32(inp[at]) - mu) * rs);
                ab[0] += d;
            }
        }
    }
#pragma unroll
    for (int j = 0; j < P; j++) {
        shw[ty * CS_COLS + tx * P + j] = aw[j];
        shb[ty * CS_COLS + tx * P + j] = ab[j];
    }
    __syncthreads();
    const int ncols = min(CS_COLS, C - c0);
    if ((int)threadIdx.x < ncols) {
        float sw = 0.0f, sb = 0.0f;
        for (int y = 0; y < Y; y++) {
            sw += shw[y * CS_COLS + threadIdx.x];
            sb += shb[y * CS_COLS + threadIdx.x];
        }
        partial[(size_t)chunk * C + c0 + threadIdx.x] = sw;
        partial[(size_t)(chunks + chunk) * C + c0 + threadIdx.x] = sb;
    }
    if (!cs_last_block(&counters[blockIdx.x], chunks, &last)) return;
    const float tw = cs_sum_chunks(partial, (size_t)C, c0, ncols, chunks, shf);
    const float tb = cs_sum_chunks(partial + (size_t)chunks * C, (size_t)C, c0, ncols, chunks, shf);
    if ((int)threadIdx.x < ncols) {
        dw[c0 + threadIdx.x] += tw;
        db[c0 + threadIdx.x] += tb;
    }
}

/* ---- launchers ------------------------------------------------------------------------------- */

static pp_status_t ln_check(const char *what, int N, int C, pp_dtype_t dtype)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "%s: bad dtype %d", what, (int)dtype);
    if (N < 0 || C <= 0) PP_FAIL(PP_ERR_INTERNAL, "%s: bad shape N = %d, C = %d", what, N, C);
    return PP_OK;
}

/* 0 when PPSCHED_LAYERNORM=unfused asks for the three-pass forward kernel everywhere. */
static bool ln_rows_enabled(void)
{
    const char *env = getenv("PPSCHED_LAYERNORM");
    return !(env && strcmp(env, "unfused") == 0);
}

/* The row-in-registers forward for KP packs a lane, or false when C needs more than 8. */
template <typename T>
static bool ln_fwd_rows(unsigned grid, T *out, float *mean, float *rstd, const T *inp, const T *w,
                        const T *b, int N, int C, cudaStream_t stream)
{
    const int per_pack = 32 * pack128<T>::n;
    const int kp = (C + per_pack - 1) / per_pack;
    if (kp == 1)
        layernorm_fwd_rows_kernel<T, 1>
            <<<grid, ln_threads, 0, stream>>>(out, mean, rstd, inp, w, b, N, C);
    else if (kp == 2)
        layernorm_fwd_rows_kernel<T, 2>
            <<<grid, ln_threads, 0, stream>>>(out, mean, rstd, inp, w, b, N, C);
    else if (kp <= 4)
        layernorm_fwd_rows_kernel<T, 4>
            <<<grid, ln_threads, 0, stream>>>(out, mean, rstd, inp, w, b, N, C);
    else if (kp <= 8)
        layernorm_fwd_rows_kernel<T, 8>
            <<<grid, ln_threads, 0, stream>>>(out, mean, rstd, inp, w, b, N, C);
    else
        return false;
    return true;
}

template <typename T>
static pp_status_t ln_fwd_t(void *out, float *mean, float *rstd, const void *inp, const void *w,
                            const void *b, int N, int C, cudaStream_t stream)
{
    unsigned grid = grid_for((size_t)N * 32, ln_threads);
    const bool vec = pack_rows_ok<T>(C, out, inp, w, b);
    if (vec && ln_rows_enabled() &&
        ln_fwd_rows<T>(grid, (T *)out, mean, rstd, (const T *)inp, (const T *)w, (const T *)b, N, C,
                       stream)) {
        PP_CUDA_LAUNCH_CHECK();
        return PP_OK;
    }
    if (vec)
        layernorm_fwd_kernel<T, true><<<grid, ln_threads, 0, stream>>>(
            (T *)out, mean, rstd, (const T *)inp, (const T *)w, (const T *)b, N, C);
    else
        layernorm_fwd_kernel<T, false><<<grid, ln_threads, 0, stream>>>(
            (T *)out, mean, rstd, (const T *)inp, (const T *)w, (const T *)b, N, C);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t layernorm_fwd(void *out, float *mean, float *rstd, const void *inp, const void *w,
                          const void *b, int N, int C, pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(ln_check("layernorm_fwd", N, C, dtype));
    if (N == 0) return PP_OK;
    if (!out || !inp || !w || !b) PP_FAIL(PP_ERR_INTERNAL, "layernorm_fwd: NULL pointer");
    if (dtype == PP_DTYPE_BF16) return ln_fwd_t<bf16>(out, mean, rstd, inp, w, b, N, C, stream);
    return ln_fwd_t<float>(out, mean, rstd, inp, w, b, N, C, stream);
}

template <typename T>
static pp_status_t ln_bwd_weight_t(float *dw, float *db, float *partial, unsigned int *counters,
                                   const void *dout, const void *inp, const float *mean,
                                   const float *rstd, int N, int C, int rows_per_chunk,
                                   const dim3 &grid, cudaStream_t stream)
{
    const T *dy = (const T *)dout, *x = (const T *)inp;
    if (C % pack128<T>::n == 0 && is_aligned16(dout) && is_aligned16(inp))
        layernorm_bwd_weight_kernel<T, pack128<T>::n><<<grid, CS_THREADS, 0, stream>>>(
            dw, db, partial, counters, dy, x, mean, rstd, N, C, rows_per_chunk);
    else
        layernorm_bwd_weight_kernel<T, 1><<<grid, CS_THREADS, 0, stream>>>(
            dw, db, partial, counters, dy, x, mean, rstd, N, C, rows_per_chunk);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t layernorm_bwd_weight(float *dw, float *db, const void *dout, const void *inp,
                                 const float *mean, const float *rstd, void *scratch, int N, int C,
                                 pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(ln_check("layernorm_bwd_weight", N, C, dtype));
    if (N == 0) return PP_OK;
    if (!dw || !db || !dout || !inp || !mean || !rstd || !scratch)
        PP_FAIL(PP_ERR_INTERNAL, "layernorm_bwd_weight: NULL pointer");
    if (((uintptr_t)scratch % sizeof(float)) != 0)
        PP_FAIL(PP_ERR_INTERNAL, "layernorm_bwd_weight: scratch not 4-byte aligned");
    const int rows_per_chunk = (N + layernorm_bwd_chunks(N) - 1) / layernorm_bwd_chunks(N);
    const int chunks = (N + rows_per_chunk - 1) / rows_per_chunk; /* no empty chunk */
    const int strips = layernorm_bwd_strips(C);
    float *partial = (float *)scratch;
    /* the tickets sit after the largest partial block the scratch size allows for */
    unsigned int *counters =
        (unsigned int *)((char *)scratch + (size_t)2 * layernorm_bwd_chunks(N) * C * sizeof(float));
    PP_CUDA_CHECK(cudaMemsetAsync(counters, 0, (size_t)strips * sizeof(unsigned int), stream));
    const dim3 grid(strips, chunks);
    if (dtype == PP_DTYPE_BF16)
        return ln_bwd_weight_t<bf16>(dw, db, partial, counters, dout, inp, mean, rstd, N, C,
                                     rows_per_chunk, grid, stream);
    return ln_bwd_weight_t<float>(dw, db, partial, counters, dout, inp, mean, rstd, N, C,
                                  rows_per_chunk, grid, stream);
}
