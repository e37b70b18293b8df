/*
 * crossentropy.cu — softmax cross-entropy over the vocabulary, fused with its gradient, and the
 * deterministic mean of the per-token losses.
 *
 * One block per row of logits[N,V]: pass 1 an online max / sum of exp per thread merged across the
 * block in a fixed order; pass 2 writes dlogits = (softmax − onehot) · grad_scale / N. The target's
 * logit is read before any thread writes, so dlogits may alias logits. Losses are fp32.
 * loss_mean_accumulate is one block with a fixed summation order: same inputs, same bits.
 */
#include "kernel_util.cuh"

static const int ce_threads = 512;

template <typename T, int P>
__global__ void crossentropy_fwd_bwd_kernel(float *losses, T *dlogits, const T *logits,
                                            const int *targets, float dscale, int N, int V)
{
    __shared__ float red[32];
    for (int row = blockIdx.x; row < N; row += gridDim.x) {
        const T *x = logits + (size_t)row * V;
        const int tgt = targets[row];
        const bool tgt_ok = tgt >= 0 && tgt < V;
        /* read the target logit before anything below may overwrite the row */
        const float xt = tgt_ok ? to_f32(x[tgt]) : 0.0f;
        float m = -INFINITY, z = 0.0f;
        for (int j0 = threadIdx.x * P; j0 < V; j0 += blockDim.x * P) {
            pack128<T> xp;
            if (P > 1)
                xp = load128(x + j0);
            else
                xp.v[0] = x[j0];
            for (int j = 0; j < P; j++) {
                float v = to_f32(xp.v[j]);
                if (v > m) {
                    z = z * expf(m - v) + 1.0f;
                    m = v;
                } else {
                    z += expf(v - m);
                }
            }
        }
        const float M = block_max(m, red);
        z = (m == -INFINITY) ? 0.0f : z * expf(m - M);
        const float Z = block_sum(z, red);
        if (threadIdx.x == 0) losses[row] = tgt_ok ? logf(Z) + M - xt : NAN;
        if (dlogits) {
            T *dx = dlogits + (size_t)row * V;
            const float inv = 1.0f / Z;
            for (int j0 = threadIdx.x * P; j0 < V; j0 += blockDim.x * P) {
                pack128<T> xp, o;
                if (P > 1)
                    xp = load128(x + j0);
                else
                    xp.v[0] = x[j0];
                for (int j = 0; j < P; j++) {
                    float p = expf(to_f32(xp.v[j]) - M) * inv;
                    if (j0 + j == tgt) p -= 1.0f;
                    o.v[j] = from_f32<T>(p * dscale);
                }
                if (P > 1)
                    store128(dx + j0, o);
                else
                    dx[j0] = o.v[0];
            }
        }
        __syncthreads(); /* the next row reuses `red` and must not see this row's writes early */
    }
}

/* acc[0] += (Σ losses) / N, in a fixed order: thread i sums i, i + blockDim, ..., then the block
 * tree. One block. */
__global__ void loss_mean_accumulate_kernel(float *acc, const float *losses, int N)
{
    __shared__ float red[32];
    float s = 0.0f;
    for (int i = threadIdx.x; i < N; i += blockDim.x)
        s += losses[i];
    s = block_sum(s, red);
    if (threadIdx.x == 0) acc[0] += s / (float)N;
}

template <typename T>
static pp_status_t ce_t(float *losses, void *dlogits, const void *logits, const int *targets,
                        float dscale, int N, int V, cudaStream_t stream)
{
    const int PK = pack128<T>::n;
    unsigned grid = N < (1 << 20) ? (unsigned)N : (1u << 20);
    if (V % PK == 0 && is_aligned16(logits) && (!dlogits || is_aligned16(dlogits)))
        crossentropy_fwd_bwd_kernel<T, pack128<T>::n><<<grid, ce_threads, 0, stream>>>(
            losses, (T *)dlogits, (const T *)logits, targets, dscale, N, V);
    else
        crossentropy_fwd_bwd_kernel<T, 1><<<grid, ce_threads, 0, stream>>>(
            losses, (T *)dlogits, (const T *)logits, targets, dscale, N, V);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t crossentropy_fwd_bwd(float *losses, void *dlogits, const void *logits,
                                 const int *targets, float grad_scale, int N, int V,
                                 pp_dtype_t dtype, cudaStream_t stream)
{
    if (!dtype_ok(dtype))
        PP_FAIL(PP_ERR_INTERNAL, "crossentropy_fwd_bwd: bad dtype %d", (int)dtype);
    if (N < 0 || V <= 0)
        PP_FAIL(PP_ERR_INTERNAL, "crossentropy_fwd_bwd: bad shape N = %d, V = %d", N, V);
    if (N == 0) return PP_OK;
    if (!losses || !logits || !targets)
        PP_FAIL(PP_ERR_INTERNAL, "crossentropy_fwd_bwd: NULL pointer");
    const float dscale = grad_scale / (float)N;
    if (dtype == PP_DTYPE_BF16)
        return ce_t<bf16>(losses, dlogits, logits, targets, dscale, N, V, stream);
    return ce_t<float>(losses, dlogits, logits, targets, dscale, N, V, stream);
}

pp_status_t loss_mean_accumulate(float *acc, const float *losses, int N, cudaStream_t stream)
{
    if (N <= 0) PP_FAIL(PP_ERR_INTERNAL, "loss_mean_accumulate: bad N = %d", N);
    if (!acc || !losses) PP_FAIL(PP_ERR_INTERNAL, "loss_mean_accumulate: NULL pointer");
    loss_mean_accumulate_kernel<<<1, 1024, 0, stream>>>(acc, losses, N);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
