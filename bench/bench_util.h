/*
 * bench_util.h — what the cuBLAS(Lt) benchmarks share: seeded random inputs (xorshift64, uniform
 * in [-1, 1), rounded to bf16 where asked; the generator's state is the caller's) and the check
 * macros CK (CUDA), CKB (cuBLAS) and CKN (NCCL), which print the program's name (BENCH_NAME,
 * defined before the include), the call and the library's message, and return -1; bench_time_us,
 * the median of a callable's runs between CUDA events. Header-only: static inline.
 */
#ifndef PP_BENCH_UTIL_H
#define PP_BENCH_UTIL_H

#ifndef BENCH_NAME
#error "define BENCH_NAME (the program's name) before including bench_util.h"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <algorithm>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <vector>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, BENCH_NAME ": %s: %s\n", #call, cudaGetErrorString(e_));               \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
#define CKB(call)                                                                                  \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, BENCH_NAME ": %s: %s\n", #call, cublasGetStatusString(s_));            \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
/* NCCL's own message (ncclGetLastError) follows the result's name: it says which value or which
 * resource was refused. */
#define CKN(call)                                                                                  \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, BENCH_NAME ": %s: %s (%s)\n", #call, ncclGetErrorString(r_),           \
                    ncclGetLastError(NULL));                                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* The next value of the generator `s` (never 0), uniform in [-1, 1). */
static inline float bench_rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* f rounded to the nearest bf16 (ties to even), as its bits. */
static inline uint16_t bench_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* n values of the generator into dst, as bf16 (bf16 = 1) or fp32. */
static inline int bench_upload_random(uint64_t *s, void *dst, size_t n, int bf16)
{
    std::vector<uint32_t> h(n);
    for (size_t i = 0; i < n; i++) {
        float f = bench_rnd(s);
        if (bf16)
            ((uint16_t *)h.data())[i] = bench_bf16(f);
        else
            memcpy(&h[i], &f, 4);
    }
    CK(cudaMemcpy(dst, h.data(), n * (bf16 ? 2 : 4), cudaMemcpyHostToDevice));
    return 0;
}

/* Median µs of `iters` runs of f() (0: ran, else failed) after `warmup` runs, from CUDA events
 * around each run on stream st; -1 (nothing timed) when f() or a CUDA call fails. */
template <typename F>
static int bench_time_us(F f, int iters, int warmup, cudaStream_t st, float *median)
{
    std::vector<cudaEvent_t> ev(2 * (size_t)iters);
    std::vector<float> us((size_t)iters);
    int bad = 0, made = 0;
    for (; made < (int)ev.size() && !bad; made++)
        bad = cudaEventCreate(&ev[(size_t)made]) != cudaSuccess;
    for (int i = -warmup; i < iters && !bad; i++) {
        if (i >= 0) bad = cudaEventRecord(ev[2 * (size_t)i], st) != cudaSuccess;
        if (!bad) bad = f() != 0;
        if (i >= 0 && !bad) bad = cudaEventRecord(ev[2 * (size_t)i + 1], st) != cudaSuccess;
    }
    if (!bad) bad = cudaStreamSynchronize(st) != cudaSuccess;
    for (int i = 0; i < iters && !bad; i++) {
        float ms = 0;
        bad = cudaEventElapsedTime(&ms, ev[2 * (size_t)i], ev[2 * (size_t)i + 1]) != cudaSuccess;
        us[(size_t)i] = 1000.0f * ms;
    }
    for (int i = 0; i < made; i++)
        if (ev[(size_t)i]) cudaEventDestroy(ev[(size_t)i]);
    if (bad) {
        fprintf(stderr, BENCH_NAME ": timing failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    std::sort(us.begin(), us.end());
    *median = us[(size_t)(iters - 1) / 2];
    return 0;
}

#endif
