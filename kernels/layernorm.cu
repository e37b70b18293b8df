/*
 * layernorm.cu — LayerNorm over the last dimension (eps PP_LAYERNORM_EPS): forward, input gradient,
 * and parameter gradients.
 *
 * Forward and input gradient: one warp per row, fp32 math; rows of a C that is a multiple of the
 * 128-bit pack (and 16-byte aligned pointers) are read as packs, others element by element.
 * Parameter gradients: a first kernel writes per-row-chunk partial sums to the caller's scratch,
 * a second sums the chunks in order into dw/db (+=) — no atomics, so the result is deterministic.
 * The forward saves mean and rstd (fp32, one per row) that both backward halves read.
 */
#include "kernel_util.cuh"

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

/* ---- input gradient -------------------------------------------------------------------------- */

template <typename T, bool VEC>
__global__ void layernorm_bwd_input_kernel(T *dinp, const T *dout, const T *inp, const T *w,
                                           const float *mean, const float *rstd, int N, int C,
                                           int accumulate)
{
    const int P = VEC ? pack128<T>::n : 1;
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < N; row += gridDim.x * warps) {
        const T *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        T *dx = dinp + (size_t)row * C;
        const float mu = mean[row], rs = rstd[row];
        /* g = w·dy; sums of g and of g·x̂ over the row */
        float sg = 0.0f, sgx = 0.0f;
        for (int c = lane * P; c < C; c += 32 * P) {
            if (VEC) {
                pack128<T> xp = load128(x + c), dp = load128(dy + c), wp = load128(w + c);
                for (int j = 0; j < P; j++) {
                    float g = to_f32(wp.v[j]) * to_f32(dp.v[j]);
                    sg += g;
                    sgx += g * (to_f32(xp.v[j]) - mu) * rs;
                }
            } else {
                float g = to_f32(w[c]) * to_f32(dy[c]);
                sg += g;
                sgx += g * (to_f32(x[c]) - mu) * rs;
            }
        }
        const float mg = warp_sum(sg) / (float)C, mgx = warp_sum(sgx) / (float)C;
        for (int c = lane * P; c < C; c += 32 * P) {
            if (VEC) {
                pack128<T> xp = load128(x + c), dp = load128(dy + c), wp = load128(w + c), o;
                if (accumulate) o = load128(dx + c);
                for (int j = 0; j < P; j++) {
                    float g = to_f32(wp.v[j]) * to_f32(dp.v[j]);
                    float xh = (to_f32(xp.v[j]) - mu) * rs;
                    float r = rs * (g - mg - xh * mgx);
                    if (accumulate) r += to_f32(o.v[j]);
                    o.v[j] = from_f32<T>(r);
                }
                store128(dx + c, o);
            } else {
                float g = to_f32(w[c]) * to_f32(dy[c]);
                float xh = (to_f32(x[c]) - mu) * rs;
                float r = rs * (g - mg - xh * mgx);
                if (accumulate) r += to_f32(dx[c]);
                dx[c] = from_f32<T>(r);
            }
        }
    }
}

/* ---- parameter gradients --------------------------------------------------------------------- */

/* Rows are split into at most LN_MAX_CHUNKS chunks of at least LN_MIN_ROWS rows. */
#define LN_MIN_ROWS   64
#define LN_MAX_CHUNKS 256
#define LN_TILE_X     32 /* columns per block */
#define LN_TILE_Y     8  /* row lanes per block */

static int ln_chunks(int N)
{
    int chunks = (N + LN_MIN_ROWS - 1) / LN_MIN_ROWS;
    if (chunks > LN_MAX_CHUNKS) chunks = LN_MAX_CHUNKS;
    return chunks < 1 ? 1 : chunks;
}

/* Two adjacent columns of a row (W = 2) or one (W = 1), as fp32. */
template <typename T, int W> struct ln_cols {
    float v[W];
};

template <typename T, int W> __device__ __forceinline__ ln_cols<T, W> ln_load(const T *p)
{
    ln_cols<T, W> r;
    if (W == 2) {
        if (sizeof(T) == 2) {
            float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
            r.v[0] = f.x;
            r.v[W - 1] = f.y;
        } else {
            float2 f = *reinterpret_cast<const float2 *>(p);
            r.v[0] = f.x;
            r.v[W - 1] = f.y;
        }
    } else {
        r.v[0] = to_f32(p[0]);
    }
    return r;
}

/* Block (LN_TILE_X, LN_TILE_Y) covers LN_TILE_X·W columns of one chunk of rows; W = 2 reads
 * column pairs (C even, pointers 2-element aligned). Writes partial[chunk][col] (dw) and
 * partial[chunks + chunk][col] (db); the rows of each thread and the tree are fixed. */
template <typename T, int W>
__global__ void layernorm_bwd_weight_partial_kernel(float *partial, const T *dout, const T *inp,
                                                    const float *mean, const float *rstd, int N,
                                                    int C, int rows_per_chunk, int chunks)
{
    __shared__ float sdw[LN_TILE_Y][LN_TILE_X * W], sdb[LN_TILE_Y][LN_TILE_X * W];
    const int col = (blockIdx.x * LN_TILE_X + threadIdx.x) * W;
    const int chunk = blockIdx.y;
    const int r0 = chunk * rows_per_chunk;
    int r1 = r0 + rows_per_chunk;
    if (r1 > N) r1 = N;
    float dw[W], db[W];
    for (int j = 0; j < W; j++)
        dw[j] = db[j] = 0.0f;
    if (col < C) {
#pragma unroll 4
        for (int r = r0 + threadIdx.y; r < r1; r += LN_TILE_Y) {
            const float mu = mean[r], rs = rstd[r];
            ln_cols<T, W> dy = ln_load<T, W>(dout + (size_t)r * C + col);
            ln_cols<T, W> x = ln_load<T, W>(inp + (size_t)r * C + col);
            for (int j = 0; j < W; j++) {
                dw[j] += dy.v[j] * ((x.v[j] - mu) * rs);
                db[j] += dy.v[j];
            }
        }
    }
    for (int j = 0; j < W; j++) {
        sdw[threadIdx.y][threadIdx.x * W + j] = dw[j];
        sdb[threadIdx.y][threadIdx.x * W + j] = db[j];
    }
    __syncthreads();
    if (threadIdx.y == 0 && col < C) {
        for (int y = 1; y < LN_TILE_Y; y++)
            for (int j = 0; j < W; j++) {
                dw[j] += sdw[y][threadIdx.x * W + j];
                db[j] += sdb[y][threadIdx.x * W + j];
            }
        for (int j = 0; j < W; j++) {
            partial[(size_t)chunk * C + col + j] = dw[j];
            partial[(size_t)(chunks + chunk) * C + col + j] = db[j];
        }
    }
}

/* One warp per column: lane l sums chunks l, l+32, ... in order, then the fixed shuffle tree
 * (an xor butterfly gives every lane the same bits). */
__global__ void layernorm_bwd_weight_final_kernel(float *dw, float *db, const float *partial, int C,
                                                  int chunks)
{
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int col = blockIdx.x * warps + threadIdx.x / 32; col < C; col += gridDim.x * warps) {
        float sw = 0.0f, sb = 0.0f;
        for (int k = lane; k < chunks; k += 32) {
            sw += partial[(size_t)k * C + col];
            sb += partial[(size_t)(chunks + k) * C + col];
        }
        sw = warp_sum(sw);
        sb = warp_sum(sb);
        if (lane == 0) {
            dw[col] += sw;
            db[col] += sb;
        }
    }
}

/* ---- launchers ------------------------------------------------------------------------------- */

static pp_status_t ln_check(const char *what, int N, int C, pp_dtype_t dtype)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "%s: bad dtype %d", what, (int)dtype);
    if (N < 0 || C <= 0) PP_FAIL(PP_ERR_INTERNAL, "%s: bad shape N = %d, C = %d", what, N, C);
    return PP_OK;
}

template <typename T>
static bool ln_vec_ok(int C, const void *a, const void *b, const void *c, const void *d)
{
    return C % pack128<T>::n == 0 && is_aligned16(a) && is_aligned16(b) && is_aligned16(c) &&
           is_aligned16(d);
}

template <typename T>
static pp_status_t ln_fwd_t(void *out, float *mean, float *rstd, const void *inp, const void *w,
                            const void *b, int N, int C, cudaStream_t stream)
{
    unsigned grid = grid_for((size_t)N * 32, ln_threads);
    if (ln_vec_ok<T>(C, out, inp, w, b))
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
static pp_status_t ln_bwd_input_t(void *dinp, const void *dout, const void *inp, const void *w,
                                  const float *mean, const float *rstd, int N, int C,
                                  int accumulate, cudaStream_t stream)
{
    unsigned grid = grid_for((size_t)N * 32, ln_threads);
    if (ln_vec_ok<T>(C, dinp, dout, inp, w))
        layernorm_bwd_input_kernel<T, true><<<grid, ln_threads, 0, stream>>>(
            (T *)dinp, (const T *)dout, (const T *)inp, (const T *)w, mean, rstd, N, C, accumulate);
    else
        layernorm_bwd_input_kernel<T, false><<<grid, ln_threads, 0, stream>>>(
            (T *)dinp, (const T *)dout, (const T *)inp, (const T *)w, mean, rstd, N, C, accumulate);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t layernorm_bwd_input(void *dinp, const void *dout, const void *inp, const void *w,
                                const float *mean, const float *rstd, int N, int C, int accumulate,
                                pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(ln_check("layernorm_bwd_input", N, C, dtype));
    if (N == 0) return PP_OK;
    if (!dinp || !dout || !inp || !w || !mean || !rstd)
        PP_FAIL(PP_ERR_INTERNAL, "layernorm_bwd_input: NULL pointer");
    if (dinp == dout || dinp == inp)
        PP_FAIL(PP_ERR_INTERNAL, "layernorm_bwd_input: dinp must not alias dout or inp");
    if (dtype == PP_DTYPE_BF16)
        return ln_bwd_input_t<bf16>(dinp, dout, inp, w, mean, rstd, N, C, accumulate, stream);
    return ln_bwd_input_t<float>(dinp, dout, inp, w, mean, rstd, N, C, accumulate, stream);
}

size_t layernorm_bwd_weight_scratch_bytes(int N, int C)
{
    if (N <= 0 || C <= 0) return 0;
    return (size_t)2 * ln_chunks(N) * (size_t)C * sizeof(float);
}

pp_status_t layernorm_bwd_weight(float *dw, float *db, const void *dout, const void *inp,
                                 const float *mean, const float *rstd, void *scratch, int N, int C,
                                 pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(ln_check("layernorm_bwd_weight", N, C, dtype));
    if (N == 0) return PP_OK;
    if (!dw || !db || !dout || !inp || !mean || !rstd || !scratch)
        PP_FAIL(PP_ERR_INTERNAL, "layernorm_bwd_weight: NULL pointer");
    const int chunks = ln_chunks(N);
    const int rows_per_chunk = (N + chunks - 1) / chunks;
    float *partial = (float *)scratch;
    const size_t es = pp_dtype_size(dtype);
    const bool pairs =
        C % 2 == 0 && ((uintptr_t)dout % (2 * es)) == 0 && ((uintptr_t)inp % (2 * es)) == 0;
    const int W = pairs ? 2 : 1;
    dim3 block(LN_TILE_X, LN_TILE_Y), grid((C + LN_TILE_X * W - 1) / (LN_TILE_X * W), chunks);
    if (dtype == PP_DTYPE_BF16) {
        const bf16 *dy = (const bf16 *)dout, *x = (const bf16 *)inp;
        if (pairs)
            layernorm_bwd_weight_partial_kernel<bf16, 2><<<grid, block, 0, stream>>>(
                partial, dy, x, mean, rstd, N, C, rows_per_chunk, chunks);
        else
            layernorm_bwd_weight_partial_kernel<bf16, 1><<<grid, block, 0, stream>>>(
                partial, dy, x, mean, rstd, N, C, rows_per_chunk, chunks);
    } else {
        const float *dy = (const float *)dout, *x = (const float *)inp;
        if (pairs)
            layernorm_bwd_weight_partial_kernel<float, 2><<<grid, block, 0, stream>>>(
                partial, dy, x, mean, rstd, N, C, rows_per_chunk, chunks);
        else
            layernorm_bwd_weight_partial_kernel<float, 1><<<grid, block, 0, stream>>>(
                partial, dy, x, mean, rstd, N, C, rows_per_chunk, chunks);
    }
    PP_CUDA_LAUNCH_CHECK();
    layernorm_bwd_weight_final_kernel<<<grid_for((size_t)C * 32, 256), 256, 0, stream>>>(
        dw, db, partial, C, chunks);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
