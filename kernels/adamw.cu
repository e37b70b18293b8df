/*
 * adamw.cu — one AdamW step (decoupled weight decay, bias-corrected moments) over a flat array of
 * parameters.
 *
 * The fp32 master copy, the gradient and both moments are fp32 and updated in place; the storage
 * copy (bf16, or fp32 when it is a separate buffer) receives the new value rounded to its type.
 * The bias corrections are computed once on the host in double precision (or, for a step count
 * read from device memory, by each thread in double precision, once). A few blocks per SM stride
 * over the array; every element's arithmetic is fixed whichever thread does it: bitwise
 * deterministic, and the same bits as one thread per element.
 */
#include "kernel_util.cuh"

#include <math.h>

/* One element's update from its loaded values: the same arithmetic whichever thread or pass does
 * it. */
template <typename T>
__device__ __forceinline__ void
adamw_one(float *master, T *storage, float *m, float *v, size_t i, float g, float mi, float vi,
          float p, float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2)
{
    mi = beta1 * mi + (1.0f - beta1) * g;
    vi = beta2 * vi + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1, vhat = vi / bc2;
    p -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p);
    master[i] = p;
    if (storage) storage[i] = from_f32<T>(p);
}

/* A grid of a few blocks per SM strides over the array, ADAMW_UNROLL elements a thread a pass: all
 * their loads first, so that each thread keeps several in flight, and the bias corrections once a
 * thread, not once an element. */
#define ADAMW_UNROLL 4
template <typename T>
__global__ void adamw_update_kernel(float *master, T *storage, const float *grad, float *m,
                                    float *v, size_t n, float lr, float beta1, float beta2,
                                    float eps, float wd, float bc1, float bc2, const int *d_step)
{
    if (d_step) {
        /* The same double-precision expressions as the host path. */
        bc1 = (float)(1.0 - pow((double)beta1, (double)*d_step));
        bc2 = (float)(1.0 - pow((double)beta2, (double)*d_step));
    }
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < n;
         i0 += stride * ADAMW_UNROLL) {
        float g[ADAMW_UNROLL], mi[ADAMW_UNROLL], vi[ADAMW_UNROLL], p[ADAMW_UNROLL];
#pragma unroll
        for (int k = 0; k < ADAMW_UNROLL; k++) {
            const size_t i = i0 + (size_t)k * stride;
            if (i < n) g[k] = grad[i], mi[k] = m[i], vi[k] = v[i], p[k] = master[i];
        }
#pragma unroll
        for (int k = 0; k < ADAMW_UNROLL; k++) {
            const size_t i = i0 + (size_t)k * stride;
            if (i < n)
                adamw_one<T>(master, storage, m, v, i, g[k], mi[k], vi[k], p[k], lr, beta1, beta2,
                             eps, wd, bc1, bc2);
        }
    }
}

/* Blocks for n elements: enough to cover them once, at most ADAMW_BLOCKS_PER_SM a multiprocessor
 * (a full H100 or H200 at 256 threads a block). */
#define ADAMW_BLOCKS_PER_SM 8
static pp_status_t adamw_grid(size_t n, int threads, unsigned *grid)
{
    int dev = 0, sms = 0;
    PP_CUDA_CHECK(cudaGetDevice(&dev));
    PP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const unsigned cover = grid_for(n, threads);
    const unsigned cap = (unsigned)(sms > 0 ? sms : 1) * ADAMW_BLOCKS_PER_SM;
    *grid = cover < cap ? cover : cap;
    return PP_OK;
}

pp_status_t adamw_update(float *param_master, void *param_storage, const float *grad, float *m,
                         float *v, size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int step, pp_dtype_t dtype, cudaStream_t stream)
{
    return adamw_update_counted(param_master, param_storage, grad, m, v, n, lr, beta1, beta2, eps,
                                weight_decay, step, NULL, dtype, stream);
}

pp_status_t adamw_update_counted(float *param_master, void *param_storage, const float *grad,
                                 float *m, float *v, size_t n, float lr, float beta1, float beta2,
                                 float eps, float weight_decay, int step, const int *d_step,
                                 pp_dtype_t dtype, cudaStream_t stream)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "adamw_update: bad dtype %d", (int)dtype);
    if (!d_step && step < 1) PP_FAIL(PP_ERR_INTERNAL, "adamw_update: step %d, must be >= 1", step);
    if (!(beta1 >= 0.0f && beta1 < 1.0f && beta2 >= 0.0f && beta2 < 1.0f))
        PP_FAIL(PP_ERR_INTERNAL, "adamw_update: betas %g, %g must lie in [0, 1)", beta1, beta2);
    if (n == 0) return PP_OK;
    if (!param_master || !grad || !m || !v)
        PP_FAIL(PP_ERR_INTERNAL, "adamw_update: NULL pointer for n = %zu", n);
    const int host_step = d_step ? 1 : step;
    const float bc1 = (float)(1.0 - pow((double)beta1, (double)host_step));
    const float bc2 = (float)(1.0 - pow((double)beta2, (double)host_step));
    const int threads = 256;
    unsigned grid = 1;
    PP_CHECK(adamw_grid(n, threads, &grid));
    if (dtype == PP_DTYPE_BF16) {
        adamw_update_kernel<bf16>
            <<<grid, threads, 0, stream>>>(param_master, (bf16 *)param_storage, grad, m, v, n, lr,
                                           beta1, beta2, eps, weight_decay, bc1, bc2, d_step);
    } else {
        /* fp32 storage equal to the master is already updated: write it once */
        float *st = param_storage == (void *)param_master ? NULL : (float *)param_storage;
        adamw_update_kernel<float><<<grid, threads, 0, stream>>>(
            param_master, st, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, bc1, bc2, d_step);
    }
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
