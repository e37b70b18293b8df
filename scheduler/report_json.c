/*
 * report_json.c — the report as JSON, with exactly the schema of docs/architecture.md: the fields
 * in a fixed order, numbers that read back as the same double, null for every unknown number (NAN,
 * an unknown peak memory or in-flight count), the loss of a measured run with 9 significant digits.
 */
#include "report.h"
#include "report_io.h"

#include <math.h>

pp_status_t report_print_json(const pp_report_t *r, FILE *f)
{
    pp_out_t out, *o = &out;
    out_wrap(o, f, "output", "the JSON report");
    out_puts(o, "{\"schedule\":");
    out_json_str(o, r->schedule);
    out_puts(o, ",\"mode\":");
    out_json_str(o, report_mode_name(r->mode));
    out_printf(o, ",\"devices\":%d,\"stages\":%d,\"micro_batches\":%d", r->devices, r->stages,
               r->micro_batches);
    out_puts(o, ",\"step_ms\":");
    out_json_num(o, r->step_ms);
    out_puts(o, ",\"step_ms_p10\":");
    out_json_num(o, r->step_ms_p10);
    out_puts(o, ",\"step_ms_p90\":");
    out_json_num(o, r->step_ms_p90);
    out_puts(o, ",\"tokens_per_s\":");
    out_json_num(o, r->tokens_per_s);
    out_puts(o, ",\"tflops\":");
    out_json_num(o, r->tflops);
    out_puts(o, ",\"bubble\":");
    out_json_num(o, r->bubble);
    out_puts(o, ",\"bubble_theory\":");
    out_json_num(o, r->bubble_theory);
    out_puts(o, ",\"bubble_simulated\":");
    out_json_num(o, r->bubble_simulated);
    out_puts(o, ",\"loss\":");
    if (isfinite(r->loss))
        out_printf(o, "%.9g", r->loss);
    else
        out_puts(o, "null");
    out_puts(o, ",\n \"per_device\":[");
    for (int i = 0; i < r->devices; i++) {
        const pp_device_stats_t *ds = &r->per_device[i];
        out_printf(o, "%s\n  {\"device\":%d,\"busy_ms\":", i ? "," : "", ds->device);
        out_json_num(o, ds->busy_ms);
        out_puts(o, ",\"idle_ms\":");
        out_json_num(o, ds->idle_ms);
        out_puts(o, ",\"bubble\":");
        out_json_num(o, ds->bubble);
        out_puts(o, ",\"peak_mem_bytes\":");
        if (ds->peak_mem_bytes > 0)
            out_printf(o, "%zu", ds->peak_mem_bytes);
        else
            out_puts(o, "null"); /* unknown */
        out_puts(o, ",\"peak_inflight_microbatches\":");
        if (ds->peak_inflight >= 0)
            out_printf(o, "%d}", ds->peak_inflight);
        else
            out_puts(o, "null}"); /* unknown: no per-op times */
    }
    out_puts(o, "]}\n");
    return out_close(o);
}
