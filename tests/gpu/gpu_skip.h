/*
 * gpu_skip.h — the one reason every GPU test program gives when it skips for want of a device:
 * "no CUDA device", with the runtime's own words in parentheses where cudaGetDeviceCount failed
 * (a missing or too old driver). Header-only; clears the runtime's sticky error.
 */
#ifndef PP_TEST_GPU_SKIP_H
#define PP_TEST_GPU_SKIP_H

#include <cuda_runtime.h>
#include <stdio.h>

/* NULL when at least one CUDA device is usable, else why not (a static string). */
static inline const char *gpu_skip_reason(void)
{
    static char why[160];
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) return NULL;
    (void)cudaGetLastError();
    if (e == cudaSuccess) return "no CUDA device";
    snprintf(why, sizeof why, "no CUDA device (%s)", cudaGetErrorString(e));
    return why;
}

#endif
