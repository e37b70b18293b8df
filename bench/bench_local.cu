/*
 * bench_local.cu — what the `local` transport's copy costs: one device-local copy of a stage
 * boundary (an activation or its gradient, micro_batch x seq x hidden elements) on its own
 * stream, timed with CUDA events, at the reference and the small preset (model/preset.h, bf16
 * and fp32). `local` hands a boundary from one stage to the next on the same device as this copy
 * (docs/architecture.md says why it is not a hand-over of the producer's buffer); set the numbers
 * beside bench_stage's forward time of the same shape to see the share of a step it takes.
 *
 *   bench_local [--iters N]
 *
 * Prints a `#` preamble, a fixed-width table (bytes, median / p10 / p90 us, GB/s) and one JSON
 * line per row. Exit 1 on a CUDA error, 2 on bad usage.
 */
#include "common/pp_cuda.h"
#include "model/preset.h"

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

/* Rows of model/preset.h: a boundary is micro_batch_size x seq_len x hidden elements. */
static const char *const SHAPES[] = {"reference", "small"};

static int time_copy(size_t bytes, int iters, std::vector<float> &us)
{
    void *a = NULL, *b = NULL;
    cudaStream_t s = NULL;
    std::vector<cudaEvent_t> ev(2 * (size_t)iters);
    int ok = cudaMalloc(&a, bytes) == cudaSuccess && cudaMalloc(&b, bytes) == cudaSuccess &&
             cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
             cudaMemsetAsync(a, 1, bytes, s) == cudaSuccess;
    for (int i = 0; ok && i < 2 * iters; i++)
        ok = cudaEventCreate(&ev[i]) == cudaSuccess;
    for (int i = 0; ok && i < 3; i++) /* warm-up */
        ok = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess;
    for (int i = 0; ok && i < iters; i++)
        ok = cudaEventRecord(ev[2 * i], s) == cudaSuccess &&
             cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess &&
             cudaEventRecord(ev[2 * i + 1], s) == cudaSuccess;
    ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
    us.resize((size_t)iters);
    for (int i = 0; ok && i < iters; i++) {
        float ms = 0;
        ok = cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]) == cudaSuccess;
        us[(size_t)i] = 1000.0f * ms;
    }
    if (!ok)
        fprintf(stderr, "bench_local: CUDA error: %s\n", cudaGetErrorString(cudaGetLastError()));
    for (int i = 0; i < 2 * iters; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    if (s) cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    std::sort(us.begin(), us.end());
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int iters = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_local [--iters N]\n");
            return 2;
        }
    }
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        fprintf(stderr, "bench_local: no CUDA device\n");
        return 1;
    }
    cudaDeviceProp prop;
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
        return 1;
    printf("# bench_local: one device-local boundary copy (the local transport), %d iterations, "
           "device 0: %s\n",
           iters, prop.name);
    printf("# %-10s %-5s %12s %10s %10s %10s %8s\n", "shape", "dtype", "bytes", "median", "p10",
           "p90", "rate");
    printf("# %-10s %-5s %12s %10s %10s %10s %8s\n", "", "", "", "us", "us", "us", "GB/s");
    char json[2][2][256];
    int rows = 0;
    for (int k = 0; k < 2; k++) {
        for (int e = 0; e < 2; e++) {
            const pp_preset_t *sh = preset_find(SHAPES[k]);
            size_t elem = e ? 4 : 2;
            size_t bytes =
                (size_t)sh->micro_batch_size * sh->model.seq_len * sh->model.hidden * elem;
            std::vector<float> us;
            if (time_copy(bytes, iters, us) != 0) return 1;
            double med = us[(size_t)(iters - 1) / 2], p10 = us[(size_t)(iters - 1) / 10],
                   p90 = us[(size_t)(9 * (iters - 1)) / 10];
            const char *dt = e ? "fp32" : "bf16";
            printf("  %-10s %-5s %12zu %10.2f %10.2f %10.2f %8.1f\n", sh->name, dt, bytes, med, p10,
                   p90, (double)bytes / (med * 1e3));
            snprintf(json[k][e], sizeof json[k][e],
                     "{\"bench\":\"local\",\"shape\":\"%s\",\"dtype\":\"%s\",\"bytes\":%zu,"
                     "\"us\":%.3f,\"us_p10\":%.3f,\"us_p90\":%.3f}",
                     sh->name, dt, bytes, med, p10, p90);
            rows++;
        }
    }
    for (int k = 0; k < 2; k++)
        for (int e = 0; e < 2; e++)
            printf("%s\n", json[k][e]);
    return rows == 4 ? 0 : 1;
}
