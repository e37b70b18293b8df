/*
 * report_predict.c — what the cost and memory model predicted, attached to a report and printed
 * in its table: the predicted step and per-device peak (with the error against a measured run),
 * the activations each device holds in micro-batch equivalents, and the memory verdict.
 */
#include "report.h"
#include "report_io.h"

#include <math.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

void report_set_prediction(pp_report_t *r, double step_ms, const size_t *mem,
                           const double *mb_equiv, const char *cost_desc, const char *verdict)
{
    r->step_ms_predicted = step_ms;
    for (int d = 0; d < r->devices; d++) {
        pp_device_stats_t *ds = &r->per_device[d];
        if (mem) ds->peak_mem_predicted = mem[d];
        if (mem && r->mode == PP_MODE_SIMULATE) ds->peak_mem_bytes = mem[d];
        if (mb_equiv) ds->act_mb_equiv = mb_equiv[d];
    }
    snprintf(r->cost_desc, sizeof r->cost_desc, "%s", cost_desc ? cost_desc : "");
    snprintf(r->mem_verdict, sizeof r->mem_verdict, "%s", verdict ? verdict : "");
}

/* Signed relative error of `pred` against `meas`, as "+1.2%", or "-". */
static const char *fmt_err(char *buf, size_t n, double pred, double meas)
{
    return out_cell(buf, n, isfinite(pred) && isfinite(meas) && meas > 0, "%+.1f%%",
                    100.0 * (pred - meas) / meas);
}

/* A measured run: what the model predicted before running, and its error. */
static void print_predicted(struct pp_out *o, const pp_report_t *r)
{
    char a[64], b[64];
    if (r->mode != PP_MODE_MEASURE || !isfinite(r->step_ms_predicted)) return;
    if (r->shared_gpus) {
        /* The model prices separate GPUs; pipeline devices sharing one run their ops in turn and
         * each sees the whole GPU's memory, so an error against this run would mean nothing. */
        out_printf(o,
                   "# predicted for separate GPUs: step %.3f ms (not compared: these pipeline "
                   "devices share GPUs)\n",
                   r->step_ms_predicted);
        return;
    }
    out_printf(o, "# predicted before running: step %.3f ms (error %s)", r->step_ms_predicted,
               fmt_err(a, sizeof a, r->step_ms_predicted, r->step_ms));
    for (int d = 0; d < r->devices; d++) {
        const pp_device_stats_t *ds = &r->per_device[d];
        if (!ds->peak_mem_predicted) continue;
        out_printf(
            o, "%s device %d %.2f GiB (measured %s, error %s)", d ? "," : "; peak memory:", d,
            (double)ds->peak_mem_predicted / GIB,
            out_cell(b, sizeof b, ds->peak_mem_bytes != 0, "%.2f",
                     (double)ds->peak_mem_bytes / GIB),
            fmt_err(a, sizeof a, (double)ds->peak_mem_predicted, (double)ds->peak_mem_bytes));
    }
    out_puts(o, "\n");
}

void report_table_prediction(struct pp_out *o, const pp_report_t *r)
{
    print_predicted(o, r);
    int any = 0;
    for (int d = 0; d < r->devices; d++) {
        if (!isfinite(r->per_device[d].act_mb_equiv)) continue;
        out_printf(o, "%s %d: %.2f",
                   any ? "," : "# activations held (micro-batch equivalents): device", d,
                   r->per_device[d].act_mb_equiv);
        any = 1;
    }
    if (any) out_puts(o, "\n");
    for (int d = 0; r->offload && d < r->devices; d++) {
        const pp_device_stats_t *ds = &r->per_device[d];
        out_printf(o, "%s %d: ", d ? ";" : "# offloaded to the host: device", d);
        if (ds->offload_slots)
            out_printf(o, "%d slot%s%s (%.2f GiB each way)", ds->offload_slots,
                       ds->offload_slots == 1 ? "" : "s",
                       ds->offload_partial ? ", part of each" : "", ds->offload_bytes / GIB);
        else
            out_puts(o, "none");
    }
    if (r->offload) out_puts(o, "\n");
    if (r->mem_verdict[0]) out_printf(o, "# memory: %s\n", r->mem_verdict);
}
