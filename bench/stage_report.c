/*
 * stage_report.c — bench_stage's output (stage_report.h): the `#` preamble, a table of one row per
 * recompute setting and way of launching, the verdict footer and one JSON line per setting. The
 * eager run (run[0]) carries the memory columns, the goals and the JSON's original keys; a graph
 * run adds a row, a line against eager and keys with its infix. Writes to stdout only.
 */
#include "stage_report.h"

#include <stdio.h>
#include <string.h>

typedef stage_report_result_t result_t;
typedef stage_report_times_t times_t;

void stage_report_preamble(const struct cudaDeviceProp *prop, const stage_report_opts_t *o)
{
    printf("# bench_stage: one middle stage, forward + backward of one micro-batch\n");
    printf("# device 0: %s, %.1f GiB, %d SMs\n", prop->name, prop->totalGlobalMem / 1073741824.0,
           prop->multiProcessorCount);
    printf(
        "# dtype %s, warm-up %d, iterations %d (median, p10..p90), vocab unused (middle stage)\n",
        pp_dtype_name(o->dt), o->warmup, o->iters);
    printf("# launch eager: the passes' kernels launched one by one on one stream, every iteration "
           "enqueued before one wait (JSON fwd_ms ... ratio)\n");
    if (o->n_launch > 1)
        printf("# launch graph: one iteration captured as a CUDA graph with external events "
               "between the passes, replayed %d times, as the executor replays a step (JSON "
               "fwd_graph_ms ... ratio_graph)\n",
               o->iters);
    else
        printf("# launch graph: skipped (--eager-only)\n");
}

void stage_report_shape(const result_t *r)
{
    const stage_report_shape_t *sh = r->shape;
    const int N = sh->batch * sh->seq_len, C = sh->hidden;
    printf("# %s: C %d, H %d, T %d, B %d, %d blocks; state %.2f GiB; cuBLAS "
           "GEMM N=%d: %dx%d %.0f, %dx%d %.0f, %dx%d %.0f, %dx%d %.0f TFLOP/s\n",
           sh->name, C, sh->heads, sh->seq_len, sh->batch, sh->blocks,
           r->state_bytes / 1073741824.0, N, 3 * C, C, r->gemm_shape_tflops[0], C, C,
           r->gemm_shape_tflops[1], 4 * C, C, r->gemm_shape_tflops[2], C, 4 * C,
           r->gemm_shape_tflops[3]);
    if (r->opt_ms > 0)
        printf("# %s: gradients zeroed + AdamW step %.3f ms a step (%.0f GB/s)\n", sh->name,
               r->opt_ms, r->opt_gbps);
}

/* One row of the table: launch l of setting r; the memory columns on the eager row only. */
static void table_row(const result_t *r, int l)
{
    const times_t *m = &r->run[l];
    const double blocks = r->shape->blocks > 0 ? r->shape->blocks : 1;
    char f[32], b[32], mem[40] = "";
    snprintf(f, sizeof f, "%.3f (%.3f..%.3f)", m->fwd.median, m->fwd.p10, m->fwd.p90);
    snprintf(b, sizeof b, "%.3f (%.3f..%.3f)", m->bwd.median, m->bwd.p10, m->bwd.p90);
    if (l == 0)
        snprintf(mem, sizeof mem, " %8.2f %8.2f %8.1f", r->slot_bytes / blocks / 1048576.0,
                 r->wgrad_bytes / blocks / 1048576.0, r->work_bytes / 1048576.0);
    printf("%-10s %-9s %-6s %20s %20s %8.3f %8.3f %8.3f %8.1f %6.1f%s\n", r->shape->name,
           stage_recompute_name(r->recompute), m->launch, f, b, m->bwd_i.median, m->bwd_w.median,
           m->total.median, m->tflops, 100.0 * m->tflops / r->gemm_tflops, mem);
}

void stage_report_table(const result_t *res, int n)
{
    printf("%-10s %-9s %-6s %20s %20s %8s %8s %8s %8s %6s %8s %8s %8s\n", "shape", "recompute",
           "launch", "fwd", "bwd", "bwd_I", "bwd_W", "total", "model", "ratio", "slot", "I->W",
           "work");
    printf("%-10s %-9s %-6s %20s %20s %8s %8s %8s %8s %6s %8s %8s %8s\n", "", "", "",
           "ms (p10..p90)", "ms (p10..p90)", "ms", "ms", "ms", "TFLOP/s", "%", "MiB/blk", "MiB/blk",
           "MiB");
    for (int i = 0; i < n; i++)
        for (int l = 0; l < res[i].n_run; l++)
            table_row(&res[i], l);
}

/* Each setting's later launches against its eager one. */
static void verdicts_launch(const result_t *r)
{
    for (int k = 0; k < STAGE_REPORT_MODES; k++)
        for (int l = 1; l < r[k].n_run; l++) {
            const times_t *a = &r[k].run[0], *b = &r[k].run[l];
            printf("# %s, %s: %s against eager: F %+.3f ms, B %+.3f ms, F + B %+.3f ms (%+.1f%%), "
                   "%.1f%% of the GEMM rate\n",
                   r->shape->name, stage_recompute_name(r[k].recompute), b->launch,
                   b->fwd.median - a->fwd.median, b->bwd.median - a->bwd.median,
                   b->total.median - a->total.median,
                   100.0 * (b->total.median / a->total.median - 1.0),
                   100.0 * b->tflops / r->gemm_tflops);
        }
}

/* PyTorch's activations a block, MiB, at the shapes where they were measured (bench/NOTES.md). */
static const struct {
    const char *shape;
    double mib;
} PYTORCH_SLOT[] = {{"reference", 134.0}, {"small", 8.4}};

/* The goals: the slot at most PyTorch's per block where it was measured, and 60 % of the GEMM rate
 * at the reference shape (eager); the recompute settings' cost against none; what the other
 * launches change. */
void stage_report_verdicts(const result_t *r)
{
    const int ref = !strcmp(r->shape->name, "reference");
    const double per_block = r->slot_bytes / (double)r->shape->blocks / 1048576.0;
    const times_t *e = &r->run[0];
    double goal = 0.0;
    for (size_t i = 0; i < sizeof PYTORCH_SLOT / sizeof PYTORCH_SLOT[0]; i++)
        if (!strcmp(r->shape->name, PYTORCH_SLOT[i].shape)) goal = PYTORCH_SLOT[i].mib;
    if (goal > 0.0)
        printf("# verdict: %s slot %.2f MiB a block (goal <= %.1f, PyTorch's): %s\n",
               r->shape->name, per_block, goal, per_block <= goal ? "met" : "not met");
    else
        printf("# %s: slot %.2f MiB a block (no PyTorch figure at this shape)\n", r->shape->name,
               per_block);
    if (ref) {
        double ratio = e->tflops / r->gemm_tflops;
        printf("# verdict: reference shape at %.1f%% of the cuBLAS GEMM rate (target 60%%): %s\n",
               100.0 * ratio, ratio >= 0.6 ? "met" : "not met");
    }
    /* B runs each block's W right after its I; the split columns time I over the whole stage,
     * then W, with the same kernels: what B costs against that order. */
    const double split = e->fwd.median + e->bwd_i.median + e->bwd_w.median;
    printf("# %s, none: F + B %.3f ms, F + I + W (I over the stage, then W) %.3f ms: %+.1f%% "
           "(goal: within 3%%)\n",
           r->shape->name, e->total.median, split, 100.0 * (e->total.median / split - 1.0));
    for (int k = 1; k < STAGE_REPORT_MODES; k++)
        printf("# %s, recompute %s: total %+.1f%% against none, slot %.1f%% of none's\n",
               r->shape->name, stage_recompute_name(r[k].recompute),
               100.0 * (r[k].run[0].total.median / e->total.median - 1.0),
               100.0 * r[k].slot_bytes / r->slot_bytes);
    verdicts_launch(r);
}

/* The time keys of one launch (the eager one's carry no infix: fwd_ms ... model_tflops). */
static void json_times(const times_t *m)
{
    const char *k = m->key;
    printf("\"fwd%s_ms\":%.4f,\"fwd%s_ms_p10\":%.4f,\"fwd%s_ms_p90\":%.4f,"
           "\"bwd%s_ms\":%.4f,\"bwd%s_ms_p10\":%.4f,\"bwd%s_ms_p90\":%.4f,\"bwd_input%s_ms\":%.4f,"
           "\"bwd_weight%s_ms\":%.4f,\"total%s_ms\":%.4f,\"model_tflops%s\":%.2f,",
           k, m->fwd.median, k, m->fwd.p10, k, m->fwd.p90, k, m->bwd.median, k, m->bwd.p10, k,
           m->bwd.p90, k, m->bwd_i.median, k, m->bwd_w.median, k, m->total.median, k, m->tflops);
}

/* One line per setting: the eager launch's keys, then each later launch's keys with its infix. */
void stage_report_json(const char *device, const stage_report_opts_t *o, const result_t *r)
{
    const stage_report_shape_t *sh = r->shape;
    printf("{\"bench\":\"stage\",\"device\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\","
           "\"recompute\":\"%s\",\"hidden\":%d,\"heads\":%d,\"seq_len\":%d,"
           "\"micro_batch_size\":%d,\"blocks\":%d,\"iters\":%d,",
           device, sh->name, pp_dtype_name(o->dt), stage_recompute_name(r->recompute), sh->hidden,
           sh->heads, sh->seq_len, sh->batch, sh->blocks, o->iters);
    json_times(&r->run[0]);
    printf("\"gemm_tflops\":%.2f,\"ratio\":%.4f,\"slot_bytes\":%zu,\"state_bytes\":%zu,"
           "\"wgrad_slot_bytes\":%zu,\"workspace_bytes\":%zu",
           r->gemm_tflops, r->run[0].tflops / r->gemm_tflops, r->slot_bytes, r->state_bytes,
           r->wgrad_bytes, r->work_bytes);
    if (r->opt_ms > 0)
        printf(",\"optimizer_ms\":%.4f,\"optimizer_gbps\":%.1f", r->opt_ms, r->opt_gbps);
    for (int l = 1; l < r->n_run; l++) {
        printf(",");
        json_times(&r->run[l]);
        printf("\"ratio%s\":%.4f", r->run[l].key, r->run[l].tflops / r->gemm_tflops);
    }
    printf("}\n");
}
