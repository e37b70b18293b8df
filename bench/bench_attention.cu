/*
 * bench_attention.cu — the fused causal attention kernels alone (kernels/flash_*.cu): the forward
 * and the backward, each on both paths (the default, warpgroup MMA on compute capability 9.0;
 * PPSCHED_FLASH_MMA=sync, the mma.sync kernels; the backward without column sums), at the model
 * shapes (the reference stage's d = 64, the 7B class's d = 128) and at the shapes the published
 * Hopper attention figures use (16k tokens, hidden 2048, head dim 64 and 128, sequence 512 to 16k).
 * Prints µs a call (median of the runs) and TFLOP/s, counting causal work as half the square:
 * forward 2·B·H·T²·d, backward 2.5× that.
 *
 *   bench_attention [--runs N] [--shape model|published|all]
 */
#define BENCH_NAME "bench_attention"
#include "bench_util.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

typedef struct shape {
    const char *name;
    int B, H, T, d;
} shape_t;

static const shape_t MODEL[] = {
    {"reference", 4, 16, 1024, 64},
    {"7b", 1, 32, 4096, 128},
};
static const shape_t PUBLISHED[] = {
    {"16k tokens", 32, 32, 512, 64},  {"16k tokens", 16, 32, 1024, 64},
    {"16k tokens", 8, 32, 2048, 64},  {"16k tokens", 4, 32, 4096, 64},
    {"16k tokens", 32, 16, 512, 128}, {"16k tokens", 16, 16, 1024, 128},
    {"16k tokens", 8, 16, 2048, 128}, {"16k tokens", 4, 16, 4096, 128},
    {"16k tokens", 2, 16, 8192, 128}, {"16k tokens", 1, 16, 16384, 128},
};

static int run_shape(const shape_t *s, int runs, cudaStream_t st)
{
    const size_t n = (size_t)s->B * s->T * s->H * s->d, rows = (size_t)s->B * s->H * s->T;
    void *qkv = NULL, *o = NULL, *dout = NULL, *dqkv = NULL, *scratch = NULL;
    float *lse = NULL;
    CK(cudaMalloc(&qkv, 3 * n * 2));
    CK(cudaMalloc(&o, n * 2));
    CK(cudaMalloc(&dout, n * 2));
    CK(cudaMalloc(&dqkv, 3 * n * 2));
    CK(cudaMalloc(&lse, rows * sizeof(float)));
    CK(cudaMalloc(&scratch, attention_flash_bwd_scratch_bytes(s->B, s->H, s->T)));
    uint64_t seed = 0x9E3779B97F4A7C15ull ^ (uint64_t)s->T;
    if (bench_upload_random(&seed, qkv, 3 * n, 1) || bench_upload_random(&seed, dout, n, 1))
        return -1;
    const int C = s->H * s->d, ld3 = 3 * C;
    char *q = (char *)qkv, *dq = (char *)dqkv;
    const size_t cb = (size_t)C * 2;
    auto fwd = [&] {
        return attention_flash_fwd(o, C, lse, q, q + cb, q + 2 * cb, ld3, s->B, s->H, s->T, s->d,
                                   PP_DTYPE_BF16, st) == PP_OK
                   ? 0
                   : 1;
    };
    auto bwd = [&] {
        return attention_flash_bwd(dq, dq + cb, dq + 2 * cb, ld3, dout, q, q + cb, q + 2 * cb, ld3,
                                   o, C, lse, scratch, NULL, s->B, s->H, s->T, s->d, PP_DTYPE_BF16,
                                   st) == PP_OK
                   ? 0
                   : 1;
    };
    const double flop = 2.0 * s->B * s->H * (double)s->T * s->T * s->d;
    float us[4] = {0, 0, 0, 0}; /* forward default, sync; backward default, sync */
    for (int path = 0; path < 2; path++) {
        if (path)
            setenv("PPSCHED_FLASH_MMA", "sync", 1);
        else
            unsetenv("PPSCHED_FLASH_MMA");
        if (bench_time_us(fwd, runs, 3, st, &us[path])) return -1;
        if (bench_time_us(bwd, runs, 3, st, &us[2 + path])) return -1;
    }
    unsetenv("PPSCHED_FLASH_MMA");
    printf("%-11s %3d %3d %6d %4d |", s->name, s->B, s->H, s->T, s->d);
    for (int i = 0; i < 4; i++)
        printf(" %8.1f %6.1f%s", us[i], (i < 2 ? 1.0 : 2.5) * flop / us[i] * 1e-6,
               i % 2 ? " |" : "");
    printf("\n");
    cudaFree(qkv), cudaFree(o), cudaFree(dout), cudaFree(dqkv), cudaFree(lse), cudaFree(scratch);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = 20;
    const char *which = "all";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--shape") == 0 && i + 1 < argc)
            which = argv[++i];
        else {
            fprintf(stderr, "usage: bench_attention [--runs N] [--shape model|published|all]\n");
            return 2;
        }
    }
    if (runs < 1 ||
        (strcmp(which, "model") && strcmp(which, "published") && strcmp(which, "all"))) {
        fprintf(stderr, "bench_attention: --runs wants a positive count, --shape model, "
                        "published or all\n");
        return 2;
    }
    int dev = 0;
    cudaDeviceProp p;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&p, dev));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    printf("# bench_attention on %s (compute capability %d.%d), causal, bf16, median of %d runs\n",
           p.name, p.major, p.minor, runs);
    printf("# %-9s %3s %3s %6s %4s | %-31s | %-31s |\n", "shape", "B", "H", "T", "d",
           "forward: default, sync", "backward: default, sync");
    printf("# %-9s %3s %3s %6s %4s |", "", "", "", "", "");
    for (int i = 0; i < 4; i++)
        printf(" %8s %6s%s", "us", "TF/s", i % 2 ? " |" : "");
    printf("\n");
    if (strcmp(which, "published") != 0)
        for (size_t i = 0; i < sizeof MODEL / sizeof MODEL[0]; i++)
            if (run_shape(&MODEL[i], runs, st)) return 1;
    if (strcmp(which, "model") != 0)
        for (size_t i = 0; i < sizeof PUBLISHED / sizeof PUBLISHED[0]; i++)
            if (run_shape(&PUBLISHED[i], runs, st)) return 1;
    return 0;
}
