/*
 * bench_offload.cu — the host link for activation offload: copy bandwidth between device memory
 * and pinned (cudaMallocHost) or pageable (malloc) host memory, each direction alone and both at
 * once, and how much of the copies hides under compute running on another stream.
 *
 *   bench_offload [--mib N[,N...]] [--iters N] [--device N]
 *
 * Bandwidth: `iters` copies of N MiB on one non-blocking stream, timed on the host from the first
 * enqueue to the stream's completion (a pageable copy blocks the host while the driver stages it,
 * so host time is what a single enqueuing thread sees). Overlap: bf16 GEMMs (4096³) on a compute
 * stream, sized to take about as long as one D2H + one H2D of N MiB; then the copies alone; then
 * both, the GEMMs enqueued first. overlap = (t_compute + t_copy − t_both) / min(t_compute, t_copy):
 * 1 when the copies hide entirely, 0 when they serialise. "enqueue ms" is how long the host was
 * held enqueuing the copies in the overlapped run: a step's host thread drives every device, so a
 * copy that holds it holds up every device's work. Prints a `#` preamble, a table and one JSON line
 * per row. Exit 1 on a CUDA error, 2 on bad usage.
 */
#include "common/pp_cuda.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GEMM_N 4096

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The buffers of one size: device, pinned host, pageable host (touched, so no first-use faults). */
typedef struct bufs {
    size_t bytes;
    void *dev, *dev2;  /* two device buffers: D2H reads dev, H2D writes dev2 */
    void *pinned[2];   /* D2H target, H2D source */
    void *pageable[2]; /* the same in pageable memory */
} bufs_t;

static void bufs_free(bufs_t *b)
{
    cudaFree(b->dev), cudaFree(b->dev2);
    for (int i = 0; i < 2; i++) {
        cudaFreeHost(b->pinned[i]);
        free(b->pageable[i]);
    }
    memset(b, 0, sizeof *b);
}

static pp_status_t bufs_init(bufs_t *b, size_t bytes)
{
    memset(b, 0, sizeof *b);
    b->bytes = bytes;
    PP_CUDA_CHECK(cudaMalloc(&b->dev, bytes));
    PP_CUDA_CHECK(cudaMalloc(&b->dev2, bytes));
    PP_CUDA_CHECK(cudaMemset(b->dev, 0x3c, bytes));
    for (int i = 0; i < 2; i++) {
        PP_CUDA_CHECK(cudaMallocHost(&b->pinned[i], bytes));
        b->pageable[i] = malloc(bytes);
        PP_ALLOC_CHECK(b->pageable[i]);
        memset(b->pinned[i], 0x11, bytes);
        memset(b->pageable[i], 0x11, bytes);
    }
    return PP_OK;
}

/* Which copies: 1 D2H, 2 H2D, 3 both (each iteration one of each, on two streams). */
enum { DIR_D2H = 1, DIR_H2D = 2, DIR_BOTH = 3 };

/* Enqueue `iters` rounds of the copies of `dir` from `host` memory (0 pinned, 1 pageable) on
 * s_d2h / s_h2d; returns the host milliseconds spent enqueuing. */
static pp_status_t enqueue_copies(const bufs_t *b, int pageable, int dir, int iters,
                                  cudaStream_t s_d2h, cudaStream_t s_h2d, double *enqueue_ms)
{
    void *const *h = pageable ? b->pageable : b->pinned;
    double t0 = now_ms();
    for (int i = 0; i < iters; i++) {
        if (dir & DIR_D2H)
            PP_CUDA_CHECK(cudaMemcpyAsync(h[0], b->dev, b->bytes, cudaMemcpyDeviceToHost, s_d2h));
        if (dir & DIR_H2D)
            PP_CUDA_CHECK(cudaMemcpyAsync(b->dev2, h[1], b->bytes, cudaMemcpyHostToDevice, s_h2d));
    }
    *enqueue_ms = now_ms() - t0;
    return PP_OK;
}

/* Host milliseconds for `iters` rounds of `dir` copies, enqueue to completion. */
static pp_status_t time_copies(const bufs_t *b, int pageable, int dir, int iters, cudaStream_t s1,
                               cudaStream_t s2, double *ms)
{
    double enq = 0.0, t0 = now_ms();
    PP_CHECK(enqueue_copies(b, pageable, dir, iters, s1, s2, &enq));
    PP_CUDA_CHECK(cudaStreamSynchronize(s1));
    PP_CUDA_CHECK(cudaStreamSynchronize(s2));
    *ms = now_ms() - t0;
    return PP_OK;
}

/* The compute: `n` bf16 GEMMs of GEMM_N³ on stream s. */
typedef struct compute {
    cublasHandle_t blas;
    void *a, *b, *c;
} compute_t;

static pp_status_t compute_init(compute_t *k)
{
    const size_t bytes = (size_t)GEMM_N * GEMM_N * 2;
    memset(k, 0, sizeof *k);
    PP_CUBLAS_CHECK(cublasCreate(&k->blas));
    PP_CUDA_CHECK(cudaMalloc(&k->a, bytes));
    PP_CUDA_CHECK(cudaMalloc(&k->b, bytes));
    PP_CUDA_CHECK(cudaMalloc(&k->c, bytes));
    PP_CUDA_CHECK(cudaMemset(k->a, 0, bytes));
    PP_CUDA_CHECK(cudaMemset(k->b, 0, bytes));
    return PP_OK;
}

static void compute_free(compute_t *k)
{
    if (k->blas) cublasDestroy(k->blas);
    cudaFree(k->a), cudaFree(k->b), cudaFree(k->c);
    memset(k, 0, sizeof *k);
}

static pp_status_t enqueue_gemms(compute_t *k, int n, cudaStream_t s)
{
    const float one = 1.0f, zero = 0.0f;
    PP_CUBLAS_CHECK(cublasSetStream(k->blas, s));
    for (int i = 0; i < n; i++)
        PP_CUBLAS_CHECK(cublasGemmEx(k->blas, CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N,
                                     &one, k->a, CUDA_R_16BF, GEMM_N, k->b, CUDA_R_16BF, GEMM_N,
                                     &zero, k->c, CUDA_R_16BF, GEMM_N, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
    return PP_OK;
}

typedef struct row {
    size_t mib;
    int pageable;
    double gbs[3];     /* D2H, H2D, both (GB/s, both directions' bytes) */
    double t_compute;  /* ms, GEMMs alone */
    double t_copy;     /* ms, one D2H + one H2D alone */
    double t_both;     /* ms, together */
    double enqueue_ms; /* host held enqueuing the copies, in the overlapped run */
    double overlap;
} row_t;

/* Median of three runs of f's measurement would hide little here: copies are steady. One warm-up
 * round, then the timed ones. */
static pp_status_t measure(const bufs_t *b, int pageable, int iters, compute_t *k, cudaStream_t s_c,
                           cudaStream_t s1, cudaStream_t s2, row_t *r)
{
    const double gb = (double)b->bytes * iters / 1e9;
    double ms = 0.0;
    r->mib = b->bytes >> 20, r->pageable = pageable;
    PP_CHECK(time_copies(b, pageable, DIR_BOTH, 1, s1, s2, &ms)); /* warm-up */
    for (int d = 0; d < 3; d++) {
        const int dir = d == 0 ? DIR_D2H : d == 1 ? DIR_H2D : DIR_BOTH;
        PP_CHECK(time_copies(b, pageable, dir, iters, s1, s2, &ms));
        r->gbs[d] = gb * (dir == DIR_BOTH ? 2 : 1) / (ms / 1e3);
    }
    /* GEMMs sized to the copies: one GEMM's time first. */
    double t0 = now_ms();
    PP_CHECK(enqueue_gemms(k, 4, s_c));
    PP_CUDA_CHECK(cudaStreamSynchronize(s_c));
    const double per_gemm = (now_ms() - t0) / 4;
    PP_CHECK(time_copies(b, pageable, DIR_BOTH, iters, s1, s2, &r->t_copy));
    int n = (int)(r->t_copy / per_gemm + 0.5);
    if (n < 1) n = 1;
    t0 = now_ms();
    PP_CHECK(enqueue_gemms(k, n, s_c));
    PP_CUDA_CHECK(cudaStreamSynchronize(s_c));
    r->t_compute = now_ms() - t0;
    t0 = now_ms();
    PP_CHECK(enqueue_gemms(k, n, s_c));
    PP_CHECK(enqueue_copies(b, pageable, DIR_BOTH, iters, s1, s2, &r->enqueue_ms));
    PP_CUDA_CHECK(cudaStreamSynchronize(s_c));
    PP_CUDA_CHECK(cudaStreamSynchronize(s1));
    PP_CUDA_CHECK(cudaStreamSynchronize(s2));
    r->t_both = now_ms() - t0;
    const double lo = r->t_compute < r->t_copy ? r->t_compute : r->t_copy;
    r->overlap = (r->t_compute + r->t_copy - r->t_both) / lo;
    return PP_OK;
}

static int parse_sizes(const char *s, size_t *mib, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || v > 65536) return -1;
        mib[n++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static void print_rows(const row_t *rows, int n, const char *dev)
{
    printf("%-8s %-9s %9s %9s %9s %10s %10s %10s %10s %8s\n", "size", "host", "D2H", "H2D", "both",
           "compute", "copies", "together", "enqueue", "overlap");
    printf("%-8s %-9s %9s %9s %9s %10s %10s %10s %10s %8s\n", "MiB", "memory", "GB/s", "GB/s",
           "GB/s", "ms", "ms", "ms", "ms", "");
    for (int i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        printf("%-8zu %-9s %9.1f %9.1f %9.1f %10.2f %10.2f %10.2f %10.2f %8.2f\n", r->mib,
               r->pageable ? "pageable" : "pinned", r->gbs[0], r->gbs[1], r->gbs[2], r->t_compute,
               r->t_copy, r->t_both, r->enqueue_ms, r->overlap);
    }
    for (int i = 0; i < n; i++) {
        const row_t *r = &rows[i];
        printf("{\"bench\":\"offload\",\"device\":\"%s\",\"mib\":%zu,\"host\":\"%s\","
               "\"d2h_gbs\":%.2f,\"h2d_gbs\":%.2f,\"both_gbs\":%.2f,\"compute_ms\":%.3f,"
               "\"copy_ms\":%.3f,\"together_ms\":%.3f,\"enqueue_ms\":%.3f,\"overlap\":%.3f}\n",
               dev, r->mib, r->pageable ? "pageable" : "pinned", r->gbs[0], r->gbs[1], r->gbs[2],
               r->t_compute, r->t_copy, r->t_both, r->enqueue_ms, r->overlap);
    }
}

static pp_status_t run_all(const size_t *mib, int n_sizes, int iters, row_t *rows)
{
    cudaStream_t s_c = NULL, s1 = NULL, s2 = NULL;
    compute_t k;
    bufs_t b;
    pp_status_t st = PP_OK;
    memset(&b, 0, sizeof b);
    int lo = 0, hi = 0;
    PP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    PP_CHECK(compute_init(&k));
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s_c, cudaStreamNonBlocking), st, done);
    /* copies at the higher priority, as the executor's offload/load streams would run */
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithPriority(&s1, cudaStreamNonBlocking, hi), st, done);
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithPriority(&s2, cudaStreamNonBlocking, hi), st, done);
    for (int i = 0; i < n_sizes; i++) {
        PP_CHECK_GOTO(bufs_init(&b, mib[i] << 20), st, done);
        for (int pg = 0; pg < 2; pg++)
            PP_CHECK_GOTO(measure(&b, pg, iters, &k, s_c, s1, s2, &rows[2 * i + pg]), st, done);
        bufs_free(&b);
    }
done:
    bufs_free(&b);
    compute_free(&k);
    if (s_c) cudaStreamDestroy(s_c);
    if (s1) cudaStreamDestroy(s1);
    if (s2) cudaStreamDestroy(s2);
    return st;
}

int main(int argc, char **argv)
{
    size_t mib[8] = {8, 64, 256};
    int n_sizes = 3, iters = 20, device = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--mib") && v) {
            n_sizes = parse_sizes(v, mib, 8), i++;
        } else if (!strcmp(argv[i], "--iters") && v) {
            iters = atoi(v), i++;
        } else if (!strcmp(argv[i], "--device") && v) {
            device = atoi(v), i++;
        } else {
            fprintf(stderr, "usage: bench_offload [--mib N[,N...]] [--iters N] [--device N]\n");
            return 2;
        }
    }
    if (n_sizes <= 0 || iters < 1) {
        fprintf(stderr, "bench_offload: --mib takes 1 to 8 sizes in 1..65536, --iters >= 1\n");
        return 2;
    }
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev <= device) {
        fprintf(stderr, "bench_offload: no CUDA device %d\n", device);
        return 1;
    }
    cudaDeviceProp prop;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        fprintf(stderr, "bench_offload: cannot use device %d\n", device);
        return 1;
    }
    printf("# bench_offload: device %d: %s, PCI %04x:%02x:%02x\n", device, prop.name,
           prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    printf("# %d copies per measurement; compute: bf16 GEMMs %d^3 on a normal-priority stream, "
           "copies on two high-priority streams\n",
           iters, GEMM_N);
    row_t rows[16];
    pp_status_t st = run_all(mib, n_sizes, iters, rows);
    if (st != PP_OK) {
        fprintf(stderr, "bench_offload: %s\n", pp_status_str(st));
        return pp_status_exit_code(st);
    }
    print_rows(rows, 2 * n_sizes, prop.name);
    return 0;
}
