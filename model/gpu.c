/*
 * gpu.c — the GPU and link tables of gpu.h.
 *
 * Peaks come from NVIDIA's data sheets (named per row). The achieved fractions and the kernel
 * floor of the Hopper rows were fitted to the stage times bench_stage measured on H100 and H200
 * (bench/NOTES.md, reference and small shape, fused attention), the pair overlap to DualPipeV's
 * one-GPU steps; the A100 and B200 rows reuse them, an assumption until a profile of those GPUs
 * says otherwise. Link rows: the NVLink ones are the
 * H200 measurements of a 0->1 transfer (latency and bandwidth fitted to the 1 MiB and 8 MiB
 * points), the others data-sheet rates at the fractions noted.
 */
#include "gpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Fitted on Hopper (see the file comment), shared by every row. */
/* The GEMMs: FIT_GEMM of the dense tensor peak on their FLOPs plus FIT_GEMM_TAIL a GEMM, fitted
 * on bench_stage's weight pass (four GEMMs a block and little else) at two shapes on one H200
 * (2026-11-28, graph mode, bench/NOTES.md "The cost model at the 7B-class shape"): the reference
 * stage (6 blocks, C = 1024, 4096 tokens) W 1.030 ms and the 7B-class stage (8 blocks, C = 4096,
 * 4096 tokens) 19.86 ms. One efficiency alone (0.56, fitted at the reference shape before) made
 * the 7B-class stage 22 % slower than measured: large GEMMs come closer to the peak. */
#define FIT_GEMM      0.69
#define FIT_GEMM_TAIL 2.3
/* The epilogues' extra, us a GEMM: the forward and input passes' residues at both shapes once the
 * GEMMs were fitted on the weight pass: GELU-aux 24.7 us a block at the reference shape and 22.5
 * at the 7B-class one; DGELU 8 at the reference one (the 7B-class input pass is attention's). */
#define FIT_EPILOGUE                                                                               \
    {                                                                                              \
        23.0, 8.0                                                                                  \
    }
/* The flash attention kernels (mma.sync, not wgmma), forward and backward, by head dimension:
 * d = 64 fitted with the other fractions above (bench_stage's reference and small shapes on H100
 * and H200); d = 128 on bench_stage's 7B-class middle stage on one H200 (2026-11-28, graph mode,
 * bench/NOTES.md "The cost model at the 7B-class shape": 8 blocks of hidden 4096, 32 heads, 4096
 * tokens), once the GEMMs were fitted on its weight pass. Its input pass, 37.66 ms, puts the three
 * backward kernels at 0.221 of the peak (0.20 made it 39.50, +4.9 %). Its forward pass, 25.36 ms,
 * is 25.42 at 0.20 (0.202 would fit it exactly): the forward kernel keeps d = 64's rate. */
#define FIT_ATTN_FWD128 0.20
#define FIT_ATTN_BWD128 0.221
#define FIT_ATTN                                                                                   \
    {                                                                                              \
        {64, 0.20, 0.20, 0, 0},                                                                    \
        {                                                                                          \
            128, FIT_ATTN_FWD128, FIT_ATTN_BWD128, 0, 0                                            \
        }                                                                                          \
    }
/* Hopper's (H100, H200) with the warpgroup-MMA kernels beside them, fitted on one H200
 * (2026-11-28, bench/NOTES.md "Attention on Hopper's warpgroup MMA and TMA"): each is the
 * mma.sync rate above scaled by what the stage lost switching paths in one call (bench_stage,
 * graph mode, PPSCHED_FLASH_MMA=sync against the default): at d = 128 the 7B-class stage's F
 * 25.892 -> 23.695 ms and I 39.240 -> 30.103 ms over 8 blocks (forward 0.331, backward 0.460);
 * at d = 64 the forward from bench_attention's reference shape, 44.2 -> 39.4 µs (0.222), and the
 * backward without column sums 125.8 -> 118.9 µs (0.212; the stage's d = 64 backward asks for the
 * sums and keeps mma.sync). */
#define FIT_ATTN_HOPPER                                                                            \
    {                                                                                              \
        {64, 0.20, 0.20, 0.222, 0.212},                                                            \
        {                                                                                          \
            128, FIT_ATTN_FWD128, FIT_ATTN_BWD128, 0.331, 0.460                                    \
        }                                                                                          \
    }
#define FIT_BW 0.80 /* LayerNorm, bias reductions, embedding, cross-entropy */
/* GiB a device holds besides its stages' allocations (CUDA 13 context, our modules, lazy
 * loading), and once more for each stage on it (its cuBLAS handles): profiles/h200.yaml's
 * runtime_bytes and stage_overhead_bytes, made on this tree (0.526 and 0.069 GiB). With one
 * stage a device they add to the 0.6 GiB that stood for both before; devices with two stages
 * (interleaved, V shapes) were 0.07 GiB short, 6-8 % of the small model's memory (bench/NOTES.md).
 */
#define FIT_RUNTIME       0.53
#define FIT_STAGE_RUNTIME 0.069
/* The kernel floor, us: bench_stage's small shape on the H200 ran F, I and W of a 4-block stage
 * (28, 36 and 40 kernels, every one at the floor) in 0.186, 0.238 and 0.256 ms. The least-squares
 * line through the three is 5.9 us a kernel plus 21 us a pass: the eager benchmark pays a start
 * for every timed pass, which a replayed graph of a whole step does not pay per kernel. (The mean
 * over all 104 kernels, 6.5, folds those starts in; the small model's one-GPU steps in a replayed
 * graph run 5.6-5.8 us a kernel on an H100 and an H200, bench/NOTES.md.) */
#define FIT_LAUNCH 5.9
/* The gap before each op of a replayed step, us: 4x H200, 1F1B on 4 devices (bench/NOTES.md,
 * "The gaps between the ops of a replayed step"), the idle the runs measured with every input of an
 * op ready (the `launch` reason) over their compute ops: 5.2-7.5 us an op at the small, the
 * reference and the 7B-class shape, m = 8 and 32; and the transfers' waits beyond their measured
 * copies, ~7 us a transfer. */
#define FIT_GAP 6.0
/* The pair overlap, from DualPipeV's whole-model step on one H100 and one H200 (bench/NOTES.md,
 * "The whole model's step in the profile") against 1F1B's, which runs the same passes one after the
 * other: the overlap the simulator needs to turn the one into the other is 0.47-0.50 at the small
 * shape (512 tokens x hidden 512 a micro-batch, every kernel at the floor) and 0.04-0.05 at the
 * reference one (4096 x 1024), on both GPUs and at m = 8 and 32 (one H100 run at m = 32: 0). Small
 * kernels leave most SMs idle, and the other stream fills them; large ones fill the GPU alone.
 * (bench_overlap's pair alone gave 0.22 and 0.16-0.68: no step around it, and noisy at the small
 * shape.) */
#define FIT_OVERLAP                                                                                \
    {512.0 * 512, 4096.0 * 1024},                                                                  \
    {                                                                                              \
        0.49, 0.04                                                                                 \
    }

static const pp_gpu_t gpus[] = {
    /* NVIDIA A100 Tensor Core GPU data sheet (SXM4 80GB): bf16 312 dense, fp32 19.5 TFLOP/s,
     * HBM2e 2,039 GB/s, 80 GB (the driver reports 79.2 GiB). */
    {"a100", "A100", "NVIDIA A100 80GB SXM", 312.0, 19.5, 2039.0, 79.2, FIT_GEMM, FIT_GEMM_TAIL,
     FIT_EPILOGUE, FIT_ATTN, FIT_BW, FIT_LAUNCH, FIT_GAP, FIT_RUNTIME, FIT_STAGE_RUNTIME,
     FIT_OVERLAP},
    /* NVIDIA H100 Tensor Core GPU data sheet (SXM5): bf16 1,979 with sparsity = 989.4 dense,
     * fp32 67 TFLOP/s, HBM3 3.35 TB/s, 80 GB (the driver reports 79.2 GiB). */
    {"h100", "H100", "NVIDIA H100 SXM 80GB", 989.4, 67.0, 3350.0, 79.2, FIT_GEMM, FIT_GEMM_TAIL,
     FIT_EPILOGUE, FIT_ATTN_HOPPER, FIT_BW, FIT_LAUNCH, FIT_GAP, FIT_RUNTIME, FIT_STAGE_RUNTIME,
     FIT_OVERLAP},
    /* NVIDIA H200 Tensor Core GPU data sheet (SXM): bf16 1,979 with sparsity = 989.4 dense,
     * fp32 67 TFLOP/s, HBM3e 4.8 TB/s, 141 GB (the driver reports 139.8 GiB). */
    {"h200", "H200", "NVIDIA H200 SXM 141GB", 989.4, 67.0, 4800.0, 139.8, FIT_GEMM, FIT_GEMM_TAIL,
     FIT_EPILOGUE, FIT_ATTN_HOPPER, FIT_BW, FIT_LAUNCH, FIT_GAP, FIT_RUNTIME, FIT_STAGE_RUNTIME,
     FIT_OVERLAP},
    /* NVIDIA HGX B200 data sheet, per GPU: bf16 4.5 PFLOP/s with sparsity = 2,250 dense, HBM3e
     * 8 TB/s, 180 GB (about 178.4 GiB reported, assumed); fp32 without tensor cores is not on
     * the sheet: 80 TFLOP/s assumed. */
    {"b200", "B200", "NVIDIA B200 180GB", 2250.0, 80.0, 8000.0, 178.4, FIT_GEMM, FIT_GEMM_TAIL,
     FIT_EPILOGUE, FIT_ATTN, FIT_BW, FIT_LAUNCH, FIT_GAP, FIT_RUNTIME, FIT_STAGE_RUNTIME,
     FIT_OVERLAP},
};

static const pp_link_desc_t links[] = {
    /* cudaMemcpyPeerAsync over NVLink 4 (H200, NV18): 1 MiB 5.0 us, 8 MiB 24 us, 256 MiB
     * 395 GB/s measured. */
    {"nvlink-peer", "peer copy over NVLink", 390.0, 2.3},
    /* ncclSend/ncclRecv over NVLink 4 from one process (H200): 1 MiB 14.6 us, 8 MiB 36 us,
     * 256 MiB 362 GB/s measured. */
    {"nvlink-nccl", "NCCL send/recv over NVLink", 350.0, 11.5},
    /* PCIe 5.0 x16: 64 GB/s per direction on the sheet, about 80% reached; latency assumed. */
    {"pcie", "peer copy over PCIe 5.0 x16", 50.0, 10.0},
    /* Host memory: cudaMemcpyAsync between a device and pinned (cudaHostAlloc) host memory over
     * PCIe 5.0 x16, each direction (run.offload's copies). bench/NOTES.md: about 50-55 GB/s on
     * an H100 or H200; `make bench-offload` measures it, and a measured run times its own. */
    {"host", "copy to or from pinned host memory over PCIe 5.0 x16", 50.0, 10.0},
    /* Between hosts: one 400 Gb/s InfiniBand NDR port (50 GB/s), about 90% reached with GPUDirect
     * RDMA through NCCL; latency assumed. */
    {"ib", "NCCL between hosts over 400 Gb/s InfiniBand", 45.0, 20.0},
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- reading a table ------------------------------------------------------------------------- */

/* Both tables are read the same way: rows whose first member is the name, found by name
 * (case-insensitive), read by index, listed for `allowed:` messages. */
typedef struct row_table {
    const void *rows; /* the first row */
    size_t stride;    /* bytes from one row to the next */
    int n;            /* rows */
} row_table_t;

static const row_table_t gpu_table = {gpus, sizeof gpus[0], N_OF(gpus)};
static const row_table_t link_table = {links, sizeof links[0], N_OF(links)};

static const void *row_at(const row_table_t *t, int i)
{
    return i >= 0 && i < t->n ? (const char *)t->rows + (size_t)i * t->stride : NULL;
}

/* A row's name: its first member (a pointer to a struct points to its first member). */
static const char *row_name(const row_table_t *t, int i)
{
    return *(const char *const *)row_at(t, i);
}

static const void *row_find(const row_table_t *t, const char *name)
{
    for (int i = 0; name && i < t->n; i++)
        if (strcasecmp(row_name(t, i), name) == 0) return row_at(t, i);
    return NULL;
}

/* "a, b, c" into buf. */
static void row_names(const row_table_t *t, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->n && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? ", " : "", row_name(t, i));
}

/* ---- GPUs ------------------------------------------------------------------------------------ */

const pp_gpu_t *gpu_find(const char *name)
{
    return row_find(&gpu_table, name);
}

const pp_gpu_t *gpu_match_device(const char *device_name)
{
    for (int i = 0; device_name && i < N_OF(gpus); i++)
        if (strstr(device_name, gpus[i].match)) return &gpus[i];
    return NULL;
}

int gpu_count(void)
{
    return gpu_table.n;
}

const pp_gpu_t *gpu_at(int i)
{
    return row_at(&gpu_table, i);
}

void gpu_names(char *buf, size_t size)
{
    row_names(&gpu_table, buf, size);
}

double gpu_curve_log(const double *xs, const double *ys, int n, double x)
{
    if (n <= 0) return 0.0;
    if (x <= xs[0]) return ys[0];
    for (int k = 1; k < n; k++) {
        if (x > xs[k]) continue;
        double u = log(x / xs[k - 1]) / log(xs[k] / xs[k - 1]);
        return ys[k - 1] + u * (ys[k] - ys[k - 1]);
    }
    return ys[n - 1];
}

double gpu_attn_eff(const pp_gpu_t *g, int head_dim, int backward, int wgmma)
{
    const pp_gpu_attn_t *row = &g->attn[0];
    for (int k = 1; k < PP_GPU_ATTN_ROWS; k++)
        if (g->attn[k].head_dim <= head_dim) row = &g->attn[k];
    const double hopper = backward ? row->bwd_wgmma : row->fwd_wgmma;
    if (wgmma && hopper > 0) return hopper;
    return backward ? row->bwd_eff : row->fwd_eff;
}

double gpu_overlap(const pp_gpu_t *g, double elements)
{
    return gpu_curve_log(g->overlap_elements, g->overlap, 2, elements);
}

/* ---- links ----------------------------------------------------------------------------------- */

const pp_link_desc_t *link_find(const char *name)
{
    return row_find(&link_table, name);
}

int link_count(void)
{
    return link_table.n;
}

const pp_link_desc_t *link_at(int i)
{
    return row_at(&link_table, i);
}

void link_names(char *buf, size_t size)
{
    row_names(&link_table, buf, size);
}

double link_time_ms(const pp_link_desc_t *l, double bytes)
{
    return 1e-3 * l->latency_us + bytes / (l->gbps * 1e9) * 1e3;
}
