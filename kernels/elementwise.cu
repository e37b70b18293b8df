/*
 * elementwise.cu — GELU (tanh approximation) forward and backward, residual add, in-place add.
 *
 * Grid-stride kernels over n elements of the storage dtype, fp32 math. When every pointer is
 * 16-byte aligned the bulk moves as 128-bit packs (8 bf16 or 4 fp32 per access) and a scalar
 * kernel finishes the tail. An output may alias an input: each element is read and written by the
 * same thread, reads first. Launchers enqueue on the caller's stream and never synchronize.
 */
#include "kernel_util.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* ---- element operations ---------------------------------------------------------------------- */

struct gelu_fwd_op {
    __device__ float operator()(float x) const
    {
        float u = GELU_K * (x + GELU_C * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
};

/* d/dx of gelu_fwd_op, times the incoming gradient. */
struct gelu_bwd_op {
    __device__ float operator()(float x, float dout) const
    {
        float u = GELU_K * (x + GELU_C * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
        return dout * (0.5f * (1.0f + th) + 0.5f * x * sech2 * du);
    }
};

struct add_op {
    __device__ float operator()(float a, float b) const { return a + b; }
};

/* ---- generic kernels ------------------------------------------------------------------------- */

template <typename T, typename Op>
__global__ void unary_kernel(T *out, const T *in, size_t n, Op op)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = from_f32<T>(op(to_f32(in[i])));
}

template <typename T, typename Op>
__global__ void unary_vec_kernel(T *out, const T *in, size_t npack, Op op)
{
    const int P = pack128<T>::n;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < npack; i += stride) {
        pack128<T> x = load128(in + i * P), o;
        for (int j = 0; j < P; j++)
            o.v[j] = from_f32<T>(op(to_f32(x.v[j])));
        store128(out + i * P, o);
    }
}

template <typename T, typename Op>
__global__ void binary_kernel(T *out, const T *a, const T *b, size_t n, Op op)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = from_f32<T>(op(to_f32(a[i]), to_f32(b[i])));
}

template <typename T, typename Op>
__global__ void binary_vec_kernel(T *out, const T *a, const T *b, size_t npack, Op op)
{
    const int P = pack128<T>::n;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < npack; i += stride) {
        pack128<T> x = load128(a + i * P), y = load128(b + i * P), o;
        for (int j = 0; j < P; j++)
            o.v[j] = from_f32<T>(op(to_f32(x.v[j]), to_f32(y.v[j])));
        store128(out + i * P, o);
    }
}

/* ---- dispatch -------------------------------------------------------------------------------- */

static const int ew_threads = 256;

template <typename T, typename Op>
static pp_status_t launch_unary(void *out_, const void *in_, size_t n, Op op, cudaStream_t stream)
{
    T *out = (T *)out_;
    const T *in = (const T *)in_;
    const size_t P = pack128<T>::n;
    size_t done = 0;
    if (is_aligned16(out) && is_aligned16(in) && n >= P) {
        size_t npack = n / P;
        unary_vec_kernel<T, Op>
            <<<grid_for(npack, ew_threads), ew_threads, 0, stream>>>(out, in, npack, op);
        PP_CUDA_LAUNCH_CHECK();
        done = npack * P;
    }
    if (done < n) {
        unary_kernel<T, Op><<<grid_for(n - done, ew_threads), ew_threads, 0, stream>>>(
            out + done, in + done, n - done, op);
        PP_CUDA_LAUNCH_CHECK();
    }
    return PP_OK;
}

template <typename T, typename Op>
static pp_status_t launch_binary(void *out_, const void *a_, const void *b_, size_t n, Op op,
                                 cudaStream_t stream)
{
    T *out = (T *)out_;
    const T *a = (const T *)a_, *b = (const T *)b_;
    const size_t P = pack128<T>::n;
    size_t done = 0;
    if (is_aligned16(out) && is_aligned16(a) && is_aligned16(b) && n >= P) {
        size_t npack = n / P;
        binary_vec_kernel<T, Op>
            <<<grid_for(npack, ew_threads), ew_threads, 0, stream>>>(out, a, b, npack, op);
        PP_CUDA_LAUNCH_CHECK();
        done = npack * P;
    }
    if (done < n) {
        binary_kernel<T, Op><<<grid_for(n - done, ew_threads), ew_threads, 0, stream>>>(
            out + done, a + done, b + done, n - done, op);
        PP_CUDA_LAUNCH_CHECK();
    }
    return PP_OK;
}

static pp_status_t check_args(const char *what, const void *p0, const void *p1, const void *p2,
                              size_t n, pp_dtype_t dtype)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "%s: bad dtype %d", what, (int)dtype);
    if (n > 0 && (!p0 || !p1 || !p2))
        PP_FAIL(PP_ERR_INTERNAL, "%s: NULL pointer for n = %zu", what, n);
    return PP_OK;
}

/* ---- launchers ------------------------------------------------------------------------------- */

pp_status_t gelu_fwd(void *out, const void *inp, size_t n, pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(check_args("gelu_fwd", out, inp, inp, n, dtype));
    if (n == 0) return PP_OK;
    if (dtype == PP_DTYPE_BF16) return launch_unary<bf16>(out, inp, n, gelu_fwd_op(), stream);
    return launch_unary<float>(out, inp, n, gelu_fwd_op(), stream);
}

pp_status_t gelu_bwd(void *dinp, const void *inp, const void *dout, size_t n, pp_dtype_t dtype,
                     cudaStream_t stream)
{
    PP_CHECK(check_args("gelu_bwd", dinp, inp, dout, n, dtype));
    if (n == 0) return PP_OK;
    if (dtype == PP_DTYPE_BF16)
        return launch_binary<bf16>(dinp, inp, dout, n, gelu_bwd_op(), stream);
    return launch_binary<float>(dinp, inp, dout, n, gelu_bwd_op(), stream);
}

pp_status_t residual_fwd(void *out, const void *a, const void *b, size_t n, pp_dtype_t dtype,
                         cudaStream_t stream)
{
    PP_CHECK(check_args("residual_fwd", out, a, b, n, dtype));
    if (n == 0) return PP_OK;
    if (dtype == PP_DTYPE_BF16) return launch_binary<bf16>(out, a, b, n, add_op(), stream);
    return launch_binary<float>(out, a, b, n, add_op(), stream);
}

pp_status_t add_inplace(void *acc, const void *x, size_t n, pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(check_args("add_inplace", acc, x, x, n, dtype));
    if (n == 0) return PP_OK;
    if (dtype == PP_DTYPE_BF16) return launch_binary<bf16>(acc, acc, x, n, add_op(), stream);
    return launch_binary<float>(acc, acc, x, n, add_op(), stream);
}
