/*
 * bench_util.h — what the cuBLAS(Lt) benchmarks share: seeded random inputs (xorshift64, uniform
 * in [-1, 1), rounded to bf16 where asked; the generator's state is the caller's) and the check
 * macros CK (CUDA) and CKB (cuBLAS), which print the program's name (BENCH_NAME, defined before
 * the include), the call and the library's message, and return -1. Header-only: static inline.
 */
#ifndef PP_BENCH_UTIL_H
#define PP_BENCH_UTIL_H

#ifndef BENCH_NAME
#error "define BENCH_NAME (the program's name) before including bench_util.h"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>
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

#endif
