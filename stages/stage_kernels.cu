/*
 * stage_kernels.cu — the synthetic data and parameter init kernels of a stage (see
 * stage_kernels.h). Each thread evaluates the pure functions of stages/data.h or model/model.h
 * for one position or one pair of parameters, so the results depend on the counters alone: the
 * same bits on any device, in any order (the data also the same as the CPU reference's).
 */
#include "common/pp_cuda.h"
#include "data.h"
#include "model/model.h"
#include "stage_kernels.h"

#define DATA_THREADS 256

__global__ void data_tokens_kernel(int *tokens, const int32_t *perm, uint64_t seed, int V, int B,
                                   int T, const int *d_base, int mb)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * T) return;
    if (d_base) mb += *d_base;
    tokens[i] = data_token(seed, perm, V, mb, i / T, i % T);
}

__global__ void data_targets_kernel(int *targets, const int32_t *perm, uint64_t seed, int V, int B,
                                    int T, const int *d_base, int mb)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * T) return;
    if (d_base) mb += *d_base;
    targets[i] = data_target(seed, perm, V, T, mb, i / T, i % T);
}

pp_status_t stage_make_tokens(int *tokens, const int32_t *perm, uint64_t seed, int V, int B, int T,
                              const int *d_base, int mb, cudaStream_t stream)
{
    int n = B * T;
    data_tokens_kernel<<<(n + DATA_THREADS - 1) / DATA_THREADS, DATA_THREADS, 0, stream>>>(
        tokens, perm, seed, V, B, T, d_base, mb);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t stage_make_targets(int *targets, const int32_t *perm, uint64_t seed, int V, int B,
                               int T, const int *d_base, int mb, cudaStream_t stream)
{
    int n = B * T;
    data_targets_kernel<<<(n + DATA_THREADS - 1) / DATA_THREADS, DATA_THREADS, 0, stream>>>(
        targets, perm, seed, V, B, T, d_base, mb);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

__global__ void param_init_kernel(float *out, size_t numel, uint64_t seed, uint64_t id, double std,
                                  float constant)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; /* pair index */
    size_t i = 2 * k;
    if (i >= numel) return;
    float z0 = constant, z1 = constant;
    if (std != 0.0) model_init_pair(seed, id, k, std, &z0, &z1);
    out[i] = z0;
    if (i + 1 < numel) out[i + 1] = z1;
}

pp_status_t stage_init_tensor(float *out, size_t numel, uint64_t seed, uint64_t id, double std,
                              float constant, cudaStream_t stream)
{
    size_t pairs = (numel + 1) / 2;
    if (pairs == 0) return PP_OK;
    unsigned blocks = (unsigned)((pairs + DATA_THREADS - 1) / DATA_THREADS);
    param_init_kernel<<<blocks, DATA_THREADS, 0, stream>>>(out, numel, seed, id, std, constant);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
