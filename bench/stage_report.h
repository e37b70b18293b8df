/*
 * stage_report.h — what bench_stage measured, and how it prints it: the `#` preamble, the
 * fixed-width table (one row per recompute setting and way of launching), the verdict footer and
 * one JSON line per setting. The first way of launching of every result is the eager one: the
 * table's memory columns, the verdicts on goals and the JSON's original keys (fwd_ms ... ratio)
 * are its; every later one adds a table row, a comparison line and keys with its infix
 * (fwd_graph_ms ... ratio_graph). Printing only, to stdout; nothing here touches the GPU.
 */
#ifndef PP_BENCH_STAGE_REPORT_H
#define PP_BENCH_STAGE_REPORT_H

#include "common/pp_status.h"
#include "model/stage_size.h"

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STAGE_REPORT_MODES    PP_RECOMPUTE_COUNT /* results per shape, one per setting */
#define STAGE_REPORT_LAUNCHES 2                  /* ways of launching at most */
#define STAGE_REPORT_SHAPES   8                  /* shapes one call runs at most */

/* One middle stage of a model preset (model/preset.h): layers / devices blocks. */
typedef struct stage_report_shape {
    const char *name; /* the preset's */
    int hidden, heads, seq_len, batch, blocks;
    int layers, vocab; /* the whole model's: the init scale of its residual projections; vocab is
                        * unused by a middle stage */
} stage_report_shape_t;

typedef struct stage_report_stats {
    double median, p10, p90;
} stage_report_stats_t;

/* The times of one setting under one way of launching. */
typedef struct stage_report_times {
    const char *launch; /* the table's `launch` column: "eager", "graph" */
    const char *key;    /* infix of its JSON keys: fwd<key>_ms, ratio<key> ("" for eager) */
    stage_report_stats_t fwd, bwd, bwd_i, bwd_w, total;
    double tflops; /* model FLOPs at the median total time */
} stage_report_times_t;

typedef struct stage_report_result {
    const stage_report_shape_t *shape;
    pp_recompute_t recompute;
    stage_report_times_t run[STAGE_REPORT_LAUNCHES]; /* run[0] eager; n_run measured */
    int n_run;
    double flops;       /* model FLOPs of fwd + bwd */
    double gemm_tflops; /* cuBLAS at the four forward GEMM shapes, time-weighted */
    double gemm_shape_tflops[4];
    size_t slot_bytes, state_bytes, wgrad_bytes, work_bytes;
    double opt_ms, opt_gbps; /* the step's per-stage work outside the passes: the gradients zeroed
                                and one AdamW step, median ms, and the bytes they move over it */
} stage_report_result_t;

/* What the command line asked for. */
typedef struct stage_report_opts {
    int n_shapes; /* shapes to run, in order */
    stage_report_shape_t shapes[STAGE_REPORT_SHAPES];
    int iters, warmup;
    int n_launch; /* ways of launching to time: 1 under --eager-only */
    pp_dtype_t dt;
} stage_report_opts_t;

void stage_report_preamble(const struct cudaDeviceProp *prop, const stage_report_opts_t *o);
/* The `#` line of one shape: its dimensions, state and cuBLAS's rate at its GEMM shapes. */
void stage_report_shape(const stage_report_result_t *r);
void stage_report_table(const stage_report_result_t *res, int n);
/* r: one shape's STAGE_REPORT_MODES results. */
void stage_report_verdicts(const stage_report_result_t *r);
void stage_report_json(const char *device, const stage_report_opts_t *o,
                       const stage_report_result_t *r);

#ifdef __cplusplus
}
#endif

#endif /* PP_BENCH_STAGE_REPORT_H */
