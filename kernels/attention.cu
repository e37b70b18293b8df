/*
 * attention.cu — the non-GEMM pieces of causal self-attention: permutes between the token layout
 * ([N, k·C], heads side by side) and the head layout ([B,H,T,d]), and the causal softmax over
 * score rows with its backward. The GEMMs (Q·Kᵀ, P·V and their backward) are gemm_strided_batched.
 *
 * Permutes are pure data movement (bitwise exact), 128 bits per access when d is a multiple of the
 * pack. Softmax: one warp per score row, fp32 math, max subtraction; only keys j ≤ t are read,
 * the rest of the row is written as exact zeros. P may alias S and dS may alias dP: every element
 * is read and then written by the same lane, after the row's reductions are complete.
 */
#include "kernel_util.cuh"

/* ---- permutes -------------------------------------------------------------------------------- */

/* For each of `parts` tensors in head layout heads[p] ([B,H,T,d]) and the token layout tok
 * ([B,T,parts·C], part p at column offset p·C): TO_HEADS copies tok → heads, else heads → tok.
 * One thread per P-element group of d. */
template <typename T, int P, bool TO_HEADS>
__global__ void permute_kernel(T *h0, T *h1, T *h2, T *tok, int B, int T_, int H, int d, int parts)
{
    const int C = H * d, dp = d / P;
    const size_t per_part = (size_t)B * H * T_ * dp;
    const size_t total = per_part * parts;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const int p = (int)(idx / per_part);
        size_t r = idx - (size_t)p * per_part;
        const int i = (int)(r % dp) * P;
        r /= dp;
        const int t = (int)(r % T_);
        r /= T_;
        const int h = (int)(r % H);
        const int b = (int)(r / H);
        T *hp = p == 0 ? h0 : (p == 1 ? h1 : h2);
        const size_t ho = (((size_t)b * H + h) * T_ + t) * d + i;
        const size_t to =
            ((size_t)b * T_ + t) * ((size_t)parts * C) + (size_t)p * C + (size_t)h * d + i;
        if (P > 1) {
            if (TO_HEADS)
                store128(hp + ho, load128(tok + to));
            else
                store128(tok + to, load128(hp + ho));
        } else {
            if (TO_HEADS)
                hp[ho] = tok[to];
            else
                tok[to] = hp[ho];
        }
    }
}

static const int perm_threads = 256;

template <typename T, bool TO_HEADS>
static pp_status_t permute_t(void *h0, void *h1, void *h2, void *tok, int B, int T_, int H, int d,
                             int parts, cudaStream_t stream)
{
    const int P = pack128<T>::n;
    bool vec = d % P == 0 && is_aligned16(tok) && is_aligned16(h0) &&
               (parts < 2 || is_aligned16(h1)) && (parts < 3 || is_aligned16(h2));
    size_t total = (size_t)B * H * T_ * d * parts;
    if (vec) {
        permute_kernel<T, pack128<T>::n, TO_HEADS>
            <<<grid_for(total / P, perm_threads), perm_threads, 0, stream>>>(
                (T *)h0, (T *)h1, (T *)h2, (T *)tok, B, T_, H, d, parts);
    } else {
        permute_kernel<T, 1, TO_HEADS><<<grid_for(total, perm_threads), perm_threads, 0, stream>>>(
            (T *)h0, (T *)h1, (T *)h2, (T *)tok, B, T_, H, d, parts);
    }
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

static pp_status_t attn_check(const char *what, int B, int T_, int H, int d, pp_dtype_t dtype)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "%s: bad dtype %d", what, (int)dtype);
    if (B < 0 || T_ < 0 || H <= 0 || d <= 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: bad shape B = %d, T = %d, H = %d, d = %d", what, B, T_, H, d);
    return PP_OK;
}

/* The permutes pass their (const) source through the same kernel as a mutable pointer; the kernel
 * only writes the destination side chosen by TO_HEADS. */
pp_status_t attention_permute_qkv(void *q, void *k, void *v, const void *qkv, int B, int T, int H,
                                  int d, pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(attn_check("attention_permute_qkv", B, T, H, d, dtype));
    if ((size_t)B * T == 0) return PP_OK;
    if (!q || !k || !v || !qkv) PP_FAIL(PP_ERR_INTERNAL, "attention_permute_qkv: NULL pointer");
    if (dtype == PP_DTYPE_BF16)
        return permute_t<bf16, true>(q, k, v, (void *)qkv, B, T, H, d, 3, stream);
    return permute_t<float, true>(q, k, v, (void *)qkv, B, T, H, d, 3, stream);
}

pp_status_t attention_unpermute_dqkv(void *dqkv, const void *dq, const void *dk, const void *dv,
                                     int B, int T, int H, int d, pp_dtype_t dtype,
                                     cudaStream_t stream)
{
    PP_CHECK(attn_check("attention_unpermute_dqkv", B, T, H, d, dtype));
    if ((size_t)B * T == 0) return PP_OK;
    if (!dqkv || !dq || !dk || !dv)
        PP_FAIL(PP_ERR_INTERNAL, "attention_unpermute_dqkv: NULL pointer");
    if (dtype == PP_DTYPE_BF16)
        return permute_t<bf16, false>((void *)dq, (void *)dk, (void *)dv, dqkv, B, T, H, d, 3,
                                      stream);
    return permute_t<float, false>((void *)dq, (void *)dk, (void *)dv, dqkv, B, T, H, d, 3, stream);
}

pp_status_t attention_unpermute_out(void *out, const void *att, int B, int T, int H, int d,
                                    pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(attn_check("attention_unpermute_out", B, T, H, d, dtype));
    if ((size_t)B * T == 0) return PP_OK;
    if (!out || !att) PP_FAIL(PP_ERR_INTERNAL, "attention_unpermute_out: NULL pointer");
    if (dtype == PP_DTYPE_BF16)
        return permute_t<bf16, false>((void *)att, NULL, NULL, out, B, T, H, d, 1, stream);
    return permute_t<float, false>((void *)att, NULL, NULL, out, B, T, H, d, 1, stream);
}

pp_status_t attention_permute_dout(void *datt, const void *dout, int B, int T, int H, int d,
                                   pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(attn_check("attention_permute_dout", B, T, H, d, dtype));
    if ((size_t)B * T == 0) return PP_OK;
    if (!datt || !dout) PP_FAIL(PP_ERR_INTERNAL, "attention_permute_dout: NULL pointer");
    if (dtype == PP_DTYPE_BF16)
        return permute_t<bf16, true>(datt, NULL, NULL, (void *)dout, B, T, H, d, 1, stream);
    return permute_t<float, true>(datt, NULL, NULL, (void *)dout, B, T, H, d, 1, stream);
}

/* ---- causal softmax -------------------------------------------------------------------------- */

static const int sm_threads = 256; /* 8 warps = 8 rows per block */

/* P elements at x: one 16-byte access when P > 1 (T = 8 bf16 or 4 fp32), else one element. */
template <typename T, int P> __device__ __forceinline__ pack128<T> sm_load(const T *x)
{
    pack128<T> r;
    if (P > 1)
        r = load128(x);
    else
        r.v[0] = x[0];
    return r;
}

template <typename T, int P> __device__ __forceinline__ void sm_store(T *x, const pack128<T> &r)
{
    if (P > 1)
        store128(x, r);
    else
        x[0] = r.v[0];
}

/* Row r of the [BH·T, T] score matrix is query t = r mod T; keys 0..t take part. Lane L handles
 * the P-element groups L, L+32, ... of the row. Pass 1: per-lane online max and sum of exp, then a
 * warp merge. Pass 2: write probabilities (zeros above the diagonal, without reading S there). */
template <typename T, int P>
__global__ void softmax_causal_fwd_kernel(T *Pout, const T *S, float scale, int rows, int T_)
{
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < rows; row += gridDim.x * warps) {
        const int t = row % T_;
        const T *s = S + (size_t)row * T_;
        T *p = Pout + (size_t)row * T_;
        float m = -INFINITY, z = 0.0f;
        for (int j0 = lane * P; j0 <= t; j0 += 32 * P) {
            const pack128<T> sp = sm_load<T, P>(s + j0);
            for (int j = 0; j < P && j0 + j <= t; j++) {
                float x = scale * to_f32(sp.v[j]);
                if (x > m) {
                    z = z * expf(m - x) + 1.0f;
                    m = x;
                } else {
                    z += expf(x - m);
                }
            }
        }
        const float M = warp_max(m);
        z = (m == -INFINITY) ? 0.0f : z * expf(m - M);
        const float inv = 1.0f / warp_sum(z);
        for (int j0 = lane * P; j0 < T_; j0 += 32 * P) {
            pack128<T> o;
            if (j0 <= t) {
                const pack128<T> sp = sm_load<T, P>(s + j0);
                for (int j = 0; j < P; j++)
                    o.v[j] =
                        from_f32<T>(j0 + j <= t ? expf(scale * to_f32(sp.v[j]) - M) * inv : 0.0f);
            } else {
                for (int j = 0; j < P; j++)
                    o.v[j] = from_f32<T>(0.0f);
            }
            sm_store<T, P>(p + j0, o);
        }
    }
}

template <typename T, int P>
__global__ void softmax_causal_bwd_kernel(T *dS, const T *dP, const T *Pin, float scale, int rows,
                                          int T_)
{
    const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < rows; row += gridDim.x * warps) {
        const int t = row % T_;
        const T *dp = dP + (size_t)row * T_, *pp = Pin + (size_t)row * T_;
        T *ds = dS + (size_t)row * T_;
        float acc = 0.0f;
        for (int j0 = lane * P; j0 <= t; j0 += 32 * P) {
            const pack128<T> a = sm_load<T, P>(dp + j0), b = sm_load<T, P>(pp + j0);
            for (int j = 0; j < P && j0 + j <= t; j++)
                acc += to_f32(a.v[j]) * to_f32(b.v[j]);
        }
        const float sum = warp_sum(acc);
        for (int j0 = lane * P; j0 < T_; j0 += 32 * P) {
            pack128<T> o;
            if (j0 <= t) {
                const pack128<T> a = sm_load<T, P>(dp + j0), b = sm_load<T, P>(pp + j0);
                for (int j = 0; j < P; j++)
                    o.v[j] = from_f32<T>(
                        j0 + j <= t ? scale * to_f32(b.v[j]) * (to_f32(a.v[j]) - sum) : 0.0f);
            } else {
                for (int j = 0; j < P; j++)
                    o.v[j] = from_f32<T>(0.0f);
            }
            sm_store<T, P>(ds + j0, o);
        }
    }
}

static pp_status_t sm_check(const char *what, int BH, int T_, pp_dtype_t dtype)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "%s: bad dtype %d", what, (int)dtype);
    if (BH < 0 || T_ <= 0) PP_FAIL(PP_ERR_INTERNAL, "%s: bad shape BH = %d, T = %d", what, BH, T_);
    if ((size_t)BH * T_ > (size_t)0x7fffffff)
        PP_FAIL(PP_ERR_INTERNAL, "%s: BH·T = %zu rows is too many", what, (size_t)BH * T_);
    return PP_OK;
}

template <typename T>
static pp_status_t sm_fwd_t(void *P, const void *S, float scale, int rows, int T_,
                            cudaStream_t stream)
{
    const int PK = pack128<T>::n;
    unsigned grid = grid_for((size_t)rows * 32, sm_threads);
    if (T_ % PK == 0 && is_aligned16(P) && is_aligned16(S))
        softmax_causal_fwd_kernel<T, pack128<T>::n>
            <<<grid, sm_threads, 0, stream>>>((T *)P, (const T *)S, scale, rows, T_);
    else
        softmax_causal_fwd_kernel<T, 1>
            <<<grid, sm_threads, 0, stream>>>((T *)P, (const T *)S, scale, rows, T_);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

template <typename T>
static pp_status_t sm_bwd_t(void *dS, const void *dP, const void *P, float scale, int rows, int T_,
                            cudaStream_t stream)
{
    const int PK = pack128<T>::n;
    unsigned grid = grid_for((size_t)rows * 32, sm_threads);
    if (T_ % PK == 0 && is_aligned16(dS) && is_aligned16(dP) && is_aligned16(P))
        softmax_causal_bwd_kernel<T, pack128<T>::n><<<grid, sm_threads, 0, stream>>>(
            (T *)dS, (const T *)dP, (const T *)P, scale, rows, T_);
    else
        softmax_causal_bwd_kernel<T, 1><<<grid, sm_threads, 0, stream>>>(
            (T *)dS, (const T *)dP, (const T *)P, scale, rows, T_);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t softmax_causal_fwd(void *P, const void *S, float scale, int BH, int T, pp_dtype_t dtype,
                               cudaStream_t stream)
{
    PP_CHECK(sm_check("softmax_causal_fwd", BH, T, dtype));
    if (BH == 0) return PP_OK;
    if (!P || !S) PP_FAIL(PP_ERR_INTERNAL, "softmax_causal_fwd: NULL pointer");
    if (dtype == PP_DTYPE_BF16) return sm_fwd_t<bf16>(P, S, scale, BH * T, T, stream);
    return sm_fwd_t<float>(P, S, scale, BH * T, T, stream);
}

pp_status_t softmax_causal_bwd(void *dS, const void *dP, const void *P, float scale, int BH, int T,
                               pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(sm_check("softmax_causal_bwd", BH, T, dtype));
    if (BH == 0) return PP_OK;
    if (!dS || !dP || !P) PP_FAIL(PP_ERR_INTERNAL, "softmax_causal_bwd: NULL pointer");
    if (dtype == PP_DTYPE_BF16) return sm_bwd_t<bf16>(dS, dP, P, scale, BH * T, T, stream);
    return sm_bwd_t<float>(dS, dP, P, scale, BH * T, T, stream);
}
