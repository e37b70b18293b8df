/*
 * embedding.cu — token + position embedding (the encoder) and its backward.
 *
 * Forward: out[b,t,:] = wte[token,:] + wpe[t,:], 128 bits per access where C and the pointers
 * allow. Backward, deterministic without float atomics: dwpe sums the batch in order, one thread
 * per (t, c); for dwte the positions are stably radix-sorted by token id (CUB) in the caller's
 * scratch, and one block per distinct token sums its rows in position order (split over row
 * groups in a fixed pattern when the token is frequent). Scratch layout, each
 * part 256-byte aligned: sorted keys [N], positions [N], sorted positions [N], CUB temporary (sized
 * by the plain-C bound of kernel_sizes.h, checked against CUB's own figure at every call).
 */
#include "kernel_util.cuh"

#include <cub/device/device_radix_sort.cuh>

/* ---- forward --------------------------------------------------------------------------------- */

template <typename T, int P>
__global__ void encoder_fwd_kernel(T *out, const int *tokens, const T *wte, const T *wpe, int B,
                                   int T_, int C)
{
    const int cp = C / P;
    const size_t total = (size_t)B * T_ * cp;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        const size_t n = idx / cp;
        const int c = (int)(idx % cp) * P;
        const int t = (int)(n % T_);
        const size_t tok = (size_t)tokens[n];
        const T *we = wte + tok * C + c, *pe = wpe + (size_t)t * C + c;
        T *o = out + n * C + c;
        if (P > 1) {
            pack128<T> a = load128(we), b = load128(pe), r;
            for (int j = 0; j < P; j++)
                r.v[j] = from_f32<T>(to_f32(a.v[j]) + to_f32(b.v[j]));
            store128(o, r);
        } else {
            o[0] = from_f32<T>(to_f32(we[0]) + to_f32(pe[0]));
        }
    }
}

/* ---- backward -------------------------------------------------------------------------------- */

/* dwpe[t,c] += Σ_b dout[b,t,c], b in order. */
template <typename T>
__global__ void encoder_bwd_wpe_kernel(float *dwpe, const T *dout, int B, int T_, int C)
{
    const size_t total = (size_t)T_ * C;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += stride) {
        float s = 0.0f;
        for (int b = 0; b < B; b++)
            s += to_f32(dout[(size_t)b * total + idx]);
        dwpe[idx] += s;
    }
}

__global__ void iota_kernel(int *x, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] = i;
}

/* Runs longer than this are summed by EMB_ROW_GROUPS row groups per channel, then combined in a
 * fixed order; shorter runs by one thread per channel. Either way the order of the additions
 * depends only on the run, so the result is deterministic. */
#define EMB_SHORT_RUN  8
#define EMB_ROW_GROUPS 8   /* = threads / 32 */
#define EMB_CHANNELS   256 /* = threads: channels per block */

/* Block (s, cy) handles sorted index s, when it starts a run of equal tokens, for the channels
 * [cy·256, cy·256 + 256): it sums the run's rows of dout in position order (the sort is stable)
 * and adds them to dwte[token]. Block: 256 threads. */
template <typename T>
__global__ void encoder_bwd_wte_kernel(float *dwte, const T *dout, const unsigned *keys,
                                       const int *pos, int N, int C, int V)
{
    __shared__ float part[EMB_ROW_GROUPS][32];
    const int cbase = blockIdx.y * EMB_CHANNELS;
    for (int s = blockIdx.x; s < N; s += gridDim.x) {
        const unsigned key = keys[s];
        if ((s > 0 && keys[s - 1] == key) || key >= (unsigned)V) continue;
        int e = s + 1;
        while (e < N && keys[e] == key)
            e++;
        float *dst = dwte + (size_t)key * C;
        if (e - s <= EMB_SHORT_RUN) { /* one thread per channel */
            const int c = cbase + threadIdx.x;
            if (c < C) {
                float acc = 0.0f;
                for (int r = s; r < e; r++)
                    acc += to_f32(dout[(size_t)pos[r] * C + c]);
                dst[c] += acc;
            }
            continue;
        }
        /* long run: lane x of row group y sums rows s+y, s+y+G, ... of channel c0+x */
        const int x = threadIdx.x % 32, y = threadIdx.x / 32;
        for (int c0 = cbase; c0 < cbase + EMB_CHANNELS && c0 < C; c0 += 32) {
            const int c = c0 + x;
            float acc = 0.0f;
            if (c < C)
                for (int r = s + y; r < e; r += EMB_ROW_GROUPS)
                    acc += to_f32(dout[(size_t)pos[r] * C + c]);
            part[y][x] = acc;
            __syncthreads();
            if (y == 0 && c < C) {
                for (int g = 1; g < EMB_ROW_GROUPS; g++)
                    acc += part[g][x];
                dst[c] += acc;
            }
            __syncthreads();
        }
    }
}

/* ---- scratch layout -------------------------------------------------------------------------- */

static int token_bits(int V)
{
    int bits = 1;
    while (bits < 31 && ((size_t)1 << bits) < (size_t)V)
        bits++;
    return bits;
}

/* Bytes of CUB's temporary storage for N keys of `bits` bits; 0 when the query fails. */
static size_t sort_temp_bytes(int N, int bits)
{
    size_t bytes = 0;
    cudaError_t e =
        cub::DeviceRadixSort::SortPairs(NULL, bytes, (const unsigned *)NULL, (unsigned *)NULL,
                                        (const int *)NULL, (int *)NULL, N, 0, bits);
    return e == cudaSuccess ? bytes : 0;
}

/* ---- launchers ------------------------------------------------------------------------------- */

pp_status_t encoder_fwd(void *out, const int *tokens, const void *wte, const void *wpe, int B,
                        int T, int C, pp_dtype_t dtype, cudaStream_t stream)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "encoder_fwd: bad dtype %d", (int)dtype);
    if (B < 0 || T < 0 || C <= 0)
        PP_FAIL(PP_ERR_INTERNAL, "encoder_fwd: bad shape B = %d, T = %d, C = %d", B, T, C);
    if ((size_t)B * T == 0) return PP_OK;
    if (!out || !tokens || !wte || !wpe) PP_FAIL(PP_ERR_INTERNAL, "encoder_fwd: NULL pointer");
    const int threads = 256;
    const size_t elems = (size_t)B * T * C;
    const bool aligned = is_aligned16(out) && is_aligned16(wte) && is_aligned16(wpe);
    if (dtype == PP_DTYPE_BF16) {
        if (aligned && C % 8 == 0)
            encoder_fwd_kernel<bf16, 8><<<grid_for(elems / 8, threads), threads, 0, stream>>>(
                (bf16 *)out, tokens, (const bf16 *)wte, (const bf16 *)wpe, B, T, C);
        else
            encoder_fwd_kernel<bf16, 1><<<grid_for(elems, threads), threads, 0, stream>>>(
                (bf16 *)out, tokens, (const bf16 *)wte, (const bf16 *)wpe, B, T, C);
    } else {
        if (aligned && C % 4 == 0)
            encoder_fwd_kernel<float, 4><<<grid_for(elems / 4, threads), threads, 0, stream>>>(
                (float *)out, tokens, (const float *)wte, (const float *)wpe, B, T, C);
        else
            encoder_fwd_kernel<float, 1><<<grid_for(elems, threads), threads, 0, stream>>>(
                (float *)out, tokens, (const float *)wte, (const float *)wpe, B, T, C);
    }
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t encoder_bwd(float *dwte, float *dwpe, const void *dout, const int *tokens,
                        void *scratch, int B, int T, int C, int V, pp_dtype_t dtype,
                        cudaStream_t stream)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "encoder_bwd: bad dtype %d", (int)dtype);
    if (B < 0 || T < 0 || C <= 0 || V <= 0)
        PP_FAIL(PP_ERR_INTERNAL, "encoder_bwd: bad shape B = %d, T = %d, C = %d, V = %d", B, T, C,
                V);
    if ((size_t)B * T == 0) return PP_OK;
    if (!dout || !tokens) PP_FAIL(PP_ERR_INTERNAL, "encoder_bwd: NULL pointer");
    const int threads = 256;
    const int N = B * T;
    if (dwpe) {
        if (dtype == PP_DTYPE_BF16)
            encoder_bwd_wpe_kernel<bf16><<<grid_for((size_t)T * C, threads), threads, 0, stream>>>(
                dwpe, (const bf16 *)dout, B, T, C);
        else
            encoder_bwd_wpe_kernel<float><<<grid_for((size_t)T * C, threads), threads, 0, stream>>>(
                dwpe, (const float *)dout, B, T, C);
        PP_CUDA_LAUNCH_CHECK();
    }
    if (!dwte) return PP_OK;
    if (!scratch) PP_FAIL(PP_ERR_INTERNAL, "encoder_bwd: NULL scratch");
    if (((uintptr_t)scratch & 255u) != 0)
        PP_FAIL(PP_ERR_INTERNAL, "encoder_bwd: scratch %p is not 256-byte aligned", scratch);
    const int bits = token_bits(V);
    size_t temp = sort_temp_bytes(N, bits);
    if (temp == 0)
        PP_FAIL(PP_ERR_INTERNAL, "encoder_bwd: radix sort size query failed (N = %d)", N);
    if (temp > encoder_sort_temp_bound(N))
        PP_FAIL(PP_ERR_INTERNAL,
                "encoder_bwd: the radix sort needs %zu bytes of temporary storage, more than the "
                "%zu of encoder_bwd_scratch_bytes (kernel_sizes.h)",
                temp, encoder_sort_temp_bound(N));
    const size_t part = kernel_align256((size_t)N * sizeof(int));
    char *base = (char *)scratch;
    unsigned *keys = (unsigned *)base;
    int *pos = (int *)(base + part);
    int *pos_sorted = (int *)(base + 2 * part);
    void *cub_temp = base + 3 * part;
    iota_kernel<<<grid_for((size_t)N, threads), threads, 0, stream>>>(pos, N);
    PP_CUDA_LAUNCH_CHECK();
    PP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_temp, temp, (const unsigned *)tokens, keys,
                                                  (const int *)pos, pos_sorted, N, 0, bits,
                                                  stream));
    dim3 grid(N < (1 << 20) ? (unsigned)N : (1u << 20), (C + EMB_CHANNELS - 1) / EMB_CHANNELS);
    if (dtype == PP_DTYPE_BF16)
        encoder_bwd_wte_kernel<bf16><<<grid, EMB_CHANNELS, 0, stream>>>(dwte, (const bf16 *)dout,
                                                                        keys, pos_sorted, N, C, V);
    else
        encoder_bwd_wte_kernel<float><<<grid, EMB_CHANNELS, 0, stream>>>(dwte, (const float *)dout,
                                                                         keys, pos_sorted, N, C, V);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
