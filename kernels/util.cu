/*
 * util.cu — casts between fp32 and the storage dtype, and fp32 fills.
 *
 * Elementwise grid-stride kernels; the bf16 paths move 128 bits per thread per iteration when both
 * pointers are 16-byte aligned, and fall back to one element per thread otherwise. Every launcher
 * enqueues on the caller's stream and never synchronizes.
 */
#include "kernel_util.cuh"

/* ---- kernels --------------------------------------------------------------------------------- */

__global__ void cast_fp32_to_bf16_kernel(bf16 *dst, const float *src, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = __float2bfloat16_rn(src[i]);
}

/* 8 elements per thread per iteration; n8 = n / 8 packs, the tail is handled by the scalar kernel.
 */
__global__ void cast_fp32_to_bf16_vec_kernel(bf16 *dst, const float *src, size_t n8)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        pack128<float> a = load128cs(src + 8 * i), b = load128cs(src + 8 * i + 4);
        pack128<bf16> o;
        for (int j = 0; j < 4; j++) {
            o.v[j] = __float2bfloat16_rn(a.v[j]);
            o.v[4 + j] = __float2bfloat16_rn(b.v[j]);
        }
        store128(dst + 8 * i, o);
    }
}

__global__ void cast_bf16_to_fp32_kernel(float *dst, const bf16 *src, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = __bfloat162float(src[i]);
}

__global__ void cast_bf16_to_fp32_vec_kernel(float *dst, const bf16 *src, size_t n8)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
        pack128<bf16> x = load128cs(src + 8 * i);
        pack128<float> a, b;
        for (int j = 0; j < 4; j++) {
            a.v[j] = __bfloat162float(x.v[j]);
            b.v[j] = __bfloat162float(x.v[4 + j]);
        }
        store128(dst + 8 * i, a);
        store128(dst + 8 * i + 4, b);
    }
}

__global__ void fill_fp32_kernel(float *dst, float value, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = value;
}

/* ---- launchers ------------------------------------------------------------------------------- */

static const int util_threads = 256;

pp_status_t cast_fp32_to_dtype(void *dst, const float *src, size_t n, pp_dtype_t dtype,
                               cudaStream_t stream)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "cast_fp32_to_dtype: bad dtype %d", (int)dtype);
    if (n == 0) return PP_OK;
    if (!dst || !src) PP_FAIL(PP_ERR_INTERNAL, "cast_fp32_to_dtype: NULL pointer for n = %zu", n);
    if (dtype == PP_DTYPE_FP32) {
        if (dst != (const void *)src)
            PP_CUDA_CHECK(
                cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        return PP_OK;
    }
    bf16 *d = (bf16 *)dst;
    size_t done = 0;
    if (is_aligned16(dst) && is_aligned16(src) && n >= 8) {
        size_t n8 = n / 8;
        cast_fp32_to_bf16_vec_kernel<<<grid_for(n8, util_threads), util_threads, 0, stream>>>(
            d, src, n8);
        PP_CUDA_LAUNCH_CHECK();
        done = n8 * 8;
    }
    if (done < n) {
        cast_fp32_to_bf16_kernel<<<grid_for(n - done, util_threads), util_threads, 0, stream>>>(
            d + done, src + done, n - done);
        PP_CUDA_LAUNCH_CHECK();
    }
    return PP_OK;
}

pp_status_t cast_dtype_to_fp32(float *dst, const void *src, size_t n, pp_dtype_t dtype,
                               cudaStream_t stream)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "cast_dtype_to_fp32: bad dtype %d", (int)dtype);
    if (n == 0) return PP_OK;
    if (!dst || !src) PP_FAIL(PP_ERR_INTERNAL, "cast_dtype_to_fp32: NULL pointer for n = %zu", n);
    if (dtype == PP_DTYPE_FP32) {
        if ((const void *)dst != src)
            PP_CUDA_CHECK(
                cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        return PP_OK;
    }
    const bf16 *s = (const bf16 *)src;
    size_t done = 0;
    if (is_aligned16(dst) && is_aligned16(src) && n >= 8) {
        size_t n8 = n / 8;
        cast_bf16_to_fp32_vec_kernel<<<grid_for(n8, util_threads), util_threads, 0, stream>>>(
            dst, s, n8);
        PP_CUDA_LAUNCH_CHECK();
        done = n8 * 8;
    }
    if (done < n) {
        cast_bf16_to_fp32_kernel<<<grid_for(n - done, util_threads), util_threads, 0, stream>>>(
            dst + done, s + done, n - done);
        PP_CUDA_LAUNCH_CHECK();
    }
    return PP_OK;
}

pp_status_t fill_fp32(float *dst, float value, size_t n, cudaStream_t stream)
{
    if (n == 0) return PP_OK;
    if (!dst) PP_FAIL(PP_ERR_INTERNAL, "fill_fp32: NULL destination for n = %zu", n);
    fill_fp32_kernel<<<grid_for(n, util_threads), util_threads, 0, stream>>>(dst, value, n);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
