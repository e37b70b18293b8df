/*
 * gpu.h — what the cost model knows of the hardware: one table of GPU descriptions and one table
 * of links, each a list of rows that code asks by name.
 *
 * A GPU row holds data-sheet peaks (dense bf16 tensor rate, fp32 rate, HBM bandwidth, memory)
 * next to the fractions of them the stage's kernels reach and the least time of one kernel; the
 * data-sheet numbers name their source in gpu.c, the fractions say what they were fitted to. A
 * link row holds the bandwidth and latency of one transfer kind. Plain C, no CUDA header; the
 * tables are constant and the lookups never fail loudly (NULL for an unknown name).
 */
#ifndef PP_GPU_H
#define PP_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The cuBLASLt epilogues whose GEMMs run on other, slower kernels than the plain GEMM. */
typedef enum pp_gpu_epilogue {
    PP_GPU_EPI_GELU_AUX = 0, /* bias + GELU keeping the pre-activation (the MLP's fc forward) */
    PP_GPU_EPI_DGELU,        /* the input gradient through GELU' (fc2's dgrad) */
    PP_GPU_EPILOGUES
} pp_gpu_epilogue_t;

/* The fused attention kernels' rate at one head dimension d (hidden / heads): the fraction of the
 * tensor peak their forward and their backward reach on their FLOPs. */
typedef struct pp_gpu_attn {
    int head_dim;   /* d */
    double fwd_eff; /* the forward kernel (mma.sync) */
    double bwd_eff; /* the backward's kernels (mma.sync) */
    /* the same on warpgroup MMA (kernels/flash_hopper.cu: compute capability 9.0); 0 where the
     * GPU has no such kernels */
    double fwd_wgmma, bwd_wgmma;
} pp_gpu_attn_t;

/* Rows of pp_gpu_t.attn: the flash kernels take d = 64 and 128 (kernel_sizes.h). */
#define PP_GPU_ATTN_ROWS 2

typedef struct pp_gpu {
    const char *name;    /* as written in --gpu NAME and `cost: {gpu: NAME}` */
    const char *match;   /* a substring of the CUDA device name that identifies this GPU */
    const char *full;    /* the product, for messages */
    double bf16_tflops;  /* dense bf16 tensor-core peak, TFLOP/s (data sheet) */
    double fp32_tflops;  /* fp32 peak without tensor cores, TFLOP/s: the stage's fp32 GEMMs use
                          * CUBLAS_COMPUTE_32F, never TF32 (data sheet) */
    double hbm_gbps;     /* HBM bandwidth, GB/s (data sheet) */
    double mem_gib;      /* device memory the driver reports (totalGlobalMem), GiB */
    double gemm_eff;     /* fraction of the tensor peak the stage's GEMMs reach on their FLOPs */
    double gemm_tail_us; /* what each GEMM adds to that, microseconds: its last partial wave and
                          * its start, which a large GEMM amortises and a small one does not */
    double epilogue_us[PP_GPU_EPILOGUES]; /* what a GEMM's fused cuBLASLt epilogue adds to it,
                                           * microseconds whatever the shape (pp_gpu_epilogue_t) */
    pp_gpu_attn_t attn[PP_GPU_ATTN_ROWS]; /* the fused attention's rate by head dimension,
                                           * ascending (gpu_attn_eff) */
    double bw_eff;      /* fraction of the HBM bandwidth the memory-bound kernels reach */
    double launch_us;   /* least time of one kernel in a replayed CUDA graph, microseconds */
    double gap_us;      /* between the ops of a replayed step: how long after its stream and its
                         * inputs are free an op (compute, or a transfer between devices) starts,
                         * microseconds (the graph's node-to-node latency across its event waits) */
    double runtime_gib; /* memory a device holds besides its stages' allocations: CUDA context,
                         * loaded kernels, streams and graphs (a profile measures it) */
    double stage_gib;   /* and for each stage on it: its cuBLAS handles' own allocations (a
                         * profile measures it) */
    /* The default share of the shorter half of an overlapped pair (DualPipeV) hidden when its
     * halves run on two compute streams (cost.overlap), against tokens x hidden of a micro-batch:
     * overlap[k] at elements[k], log-linear between, flat outside (gpu_overlap). */
    double overlap_elements[2];
    double overlap[2];
} pp_gpu_t;

/* The row called `name` (case-insensitive), or NULL. */
const pp_gpu_t *gpu_find(const char *name);
/* The row whose `match` occurs in a CUDA device name ("NVIDIA H100 80GB HBM3"), or NULL. */
const pp_gpu_t *gpu_match_device(const char *device_name);
/* Rows in table order: gpu_at(0 .. gpu_count() - 1). */
int gpu_count(void);
const pp_gpu_t *gpu_at(int i);
/* "a100, h100, h200, b200" into buf, for `allowed:` lists. */
void gpu_names(char *buf, size_t size);

/* y at x on the curve through the n points (xs[k], ys[k]), xs ascending and > 0: linear in log x
 * between neighbours, the end value outside; 0 when n == 0. */
double gpu_curve_log(const double *xs, const double *ys, int n, double x);

/* The fraction of the tensor peak g's fused attention reaches at head dimension d, in its backward
 * (backward != 0) or its forward: the row of g->attn for the largest head_dim at most d, the first
 * row below them all; its warpgroup-MMA rate where `wgmma` and g has one, else its mma.sync one. */
double gpu_attn_eff(const pp_gpu_t *g, int head_dim, int backward, int wgmma);

/* g's default pair overlap for a micro-batch of `elements` = tokens x hidden (0..1). */
double gpu_overlap(const pp_gpu_t *g, double elements);

typedef struct pp_link_desc {
    const char *name;  /* as written in `cost: {link: NAME}` */
    const char *what;  /* the transfer, for messages */
    double gbps;       /* bandwidth one transfer reaches, GB/s */
    double latency_us; /* time of a transfer of 0 bytes, microseconds */
} pp_link_desc_t;

const pp_link_desc_t *link_find(const char *name);
int link_count(void);
const pp_link_desc_t *link_at(int i);
void link_names(char *buf, size_t size);
/* Time of one transfer of `bytes` over `l`, ms: latency + bytes / bandwidth. */
double link_time_ms(const pp_link_desc_t *l, double bytes);

#ifdef __cplusplus
}
#endif

#endif /* PP_GPU_H */
