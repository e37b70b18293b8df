/*
 * report_json.c — the report as JSON, with exactly the schema of docs/architecture.md: the fields
 * in a fixed order, numbers that read back as the same double, null for every unknown number (NAN,
 * an unknown peak memory or in-flight count), the loss of a measured run with 9 significant digits.
 * The explanation's fields (docs/explain.md) follow the schema's, per device and overall; each is
 * null when unknown (no per-op times, no simulator run, no cost model).
 * `shared_gpus` is true when pipeline devices shared a GPU in a measured run (its timings are not
 * those of separate GPUs). Last, `transport` (pipeline.transport as selected) and `boundaries`
 * (each directed device pair the stage boundaries cross, with the transport it got).
 */
#include "report.h"
#include "report_io.h"

#include <math.h>

/* ,"key":{"warmup":v[0]*scale,...} in the order of pp_idle_reasons, or null when v is NULL. */
static void json_reasons(pp_out_t *o, const pp_explain_t *ex, const char *key, const double *v,
                         double scale)
{
    out_printf(o, ",\"%s\":", key);
    if (!v) {
        out_puts(o, "null");
        return;
    }
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        if (!explain_shows_reason(ex, c)) continue;
        out_printf(o, "%s\"%s\":", c ? "," : "{", pp_idle_reasons[c].name);
        out_json_num(o, v[c] * scale);
    }
    out_puts(o, "}");
}

/* A device's idle split, of the report's timeline and the simulator's. */
static void json_explain_device(pp_out_t *o, const pp_explain_t *ex, int d)
{
    const pp_idle_split_t *a = &ex->split, *b = &ex->split_sim;
    json_reasons(o, ex, "idle_ms_by_reason",
                 ex->known && d < a->n_devices ? &a->by_device[d * PP_IDLE_COUNT] : NULL, 1.0);
    json_reasons(o, ex, "idle_ms_by_reason_simulated",
                 ex->known && d < b->n_devices ? &b->by_device[d * PP_IDLE_COUNT] : NULL, 1.0);
}

static void json_critical_path(pp_out_t *o, const pp_explain_t *ex)
{
    out_puts(o, ",\n \"critical_path\":");
    if (!ex->known || ex->path.n == 0) {
        out_puts(o, "null");
        return;
    }
    out_printf(o, "{\"ops\":%d,\"compute_ms\":", ex->path.n);
    out_json_num(o, ex->path.compute_ms);
    out_json_key_num(o, "comm_ms", ex->path.comm_ms);
    out_json_key_num(o, "wait_ms", ex->path.wait_ms);
    out_puts(o, ",\"chain\":[");
    for (int i = 0; i < ex->path.n; i++) {
        char name[48];
        action_format(&ex->path.links[i].action, name, sizeof name);
        out_puts(o, i ? "," : "");
        out_json_str(o, name);
    }
    out_puts(o, "]}");
}

/* The run's idle split (ms summed over devices, and as fractions of devices x makespan, which add
 * up to `bubble`), the critical path and the what-if step times. */
static void json_explain(pp_out_t *o, const pp_explain_t *ex)
{
    const pp_idle_split_t *a = &ex->split, *b = &ex->split_sim;
    int ka = ex->known && a->n_devices > 0 && a->span_ms > 0,
        kb = ex->known && b->n_devices > 0 && b->span_ms > 0;
    out_puts(o, "\n");
    json_reasons(o, ex, "idle_ms_by_reason", ka ? a->total_ms : NULL, 1.0);
    json_reasons(o, ex, "idle_ms_by_reason_simulated", kb ? b->total_ms : NULL, 1.0);
    json_reasons(o, ex, "bubble_by_reason", ka ? a->total_ms : NULL,
                 ka ? 1.0 / (a->n_devices * a->span_ms) : 0);
    json_reasons(o, ex, "bubble_by_reason_simulated", kb ? b->total_ms : NULL,
                 kb ? 1.0 / (b->n_devices * b->span_ms) : 0);
    json_critical_path(o, ex);
    out_puts(o, ",\n \"what_if_step_ms\":");
    if (!ex->have_what_if) {
        out_puts(o, "null");
        return;
    }
    for (int w = 0; w < PP_WHAT_IF_COUNT; w++) {
        if (!explain_shows_what_if(ex, w)) continue;
        out_printf(o, "%s\"%s\":", w ? "," : "{", pp_what_ifs[w].name);
        out_json_num(o, ex->what_if.step_ms[w]);
    }
    out_puts(o, "}");
}

/* ,"transport":"auto","boundaries":[{"from":0,"to":1,"transport":"peer"},...]: what was selected
 * and what each directed device pair of the stage boundaries got. */
static void json_boundaries(pp_out_t *o, const pp_report_t *r)
{
    out_puts(o, ",\n \"transport\":");
    if (r->transport)
        out_json_str(o, r->transport);
    else
        out_puts(o, "null");
    out_puts(o, ",\"boundaries\":[");
    for (int i = 0; i < r->n_boundaries; i++) {
        const pp_report_boundary_t *b = &r->boundaries[i];
        out_printf(o, "%s{\"from\":%d,\"to\":%d,\"transport\":", i ? "," : "", b->from, b->to);
        out_json_str(o, transport_name(b->transport));
        out_puts(o, "}");
    }
    out_puts(o, "]");
}

/* ,"reductions":[{"stage":0,"buckets":..,"bytes":..,"ms":..,"hidden_ms":..,
 * "device_hidden_ms":..},...] with replicas. */
static void json_reduce(pp_out_t *o, const pp_report_t *r)
{
    if (r->replicas <= 1) return;
    out_puts(o, ",\n \"reductions\":");
    if (!r->reduce) {
        out_puts(o, "null");
        return;
    }
    for (int s = 0; s < r->stages; s++) {
        const pp_report_reduce_t *x = &r->reduce[s];
        out_printf(o, "%s{\"stage\":%d,\"buckets\":%d", s ? "," : "[", x->stage, x->buckets);
        out_json_key_num(o, "bytes", x->bytes);
        out_json_key_num(o, "ms", x->ms);
        out_json_key_num(o, "hidden_ms", x->hidden_ms);
        out_json_key_num(o, "device_hidden_ms", x->device_hidden_ms);
        out_puts(o, "}");
    }
    out_puts(o, "]");
}

pp_status_t report_print_json(const pp_report_t *r, FILE *f)
{
    pp_out_t out, *o = &out;
    out_wrap(o, f, "output", "the JSON report");
    out_puts(o, "{\"schedule\":");
    out_json_str(o, r->schedule);
    out_puts(o, ",\"kind\":");
    out_json_str(o, r->kind);
    out_puts(o, ",\"mode\":");
    out_json_str(o, report_mode_name(r->mode));
    out_printf(o, ",\"devices\":%d,\"stages\":%d,\"micro_batches\":%d", r->devices, r->stages,
               r->micro_batches);
    if (r->replicas > 1) out_printf(o, ",\"data_parallel\":%d", r->replicas);
    out_json_key_num(o, "step_ms", r->step_ms);
    out_json_key_num(o, "step_ms_p10", r->step_ms_p10);
    out_json_key_num(o, "step_ms_p90", r->step_ms_p90);
    out_json_key_num(o, "makespan_ms", r->makespan_ms);
    out_json_key_num(o, "tokens_per_s", r->tokens_per_s);
    out_json_key_num(o, "tflops", r->tflops);
    out_json_key_num(o, "bubble", r->bubble);
    out_json_key_num(o, "bubble_theory", r->bubble_theory);
    out_json_key_num(o, "bubble_simulated", r->bubble_simulated);
    out_puts(o, ",\"loss\":");
    if (isfinite(r->loss))
        out_printf(o, "%.9g", r->loss);
    else
        out_puts(o, "null");
    out_json_key_num(o, "step_ms_predicted", r->step_ms_predicted);
    out_printf(o, ",\"shared_gpus\":%s", r->shared_gpus ? "true" : "false");
    out_json_key_num(o, "clock_skew_ms", r->clock_skew_ms);
    out_puts(o, ",\n \"per_device\":[");
    for (int i = 0; i < r->devices; i++) {
        const pp_device_stats_t *ds = &r->per_device[i];
        out_printf(o, "%s\n  {\"device\":%d,", i ? "," : "", ds->device);
        if (r->replicas > 1) out_printf(o, "\"replica\":%d,", ds->replica);
        out_puts(o, "\"busy_ms\":");
        out_json_num(o, ds->busy_ms);
        out_json_key_num(o, "idle_ms", ds->idle_ms);
        out_json_key_num(o, "bubble", ds->bubble);
        out_puts(o, ",\"peak_mem_bytes\":");
        if (ds->peak_mem_bytes > 0)
            out_printf(o, "%zu", ds->peak_mem_bytes);
        else
            out_puts(o, "null"); /* unknown */
        out_puts(o, ",\"peak_mem_predicted_bytes\":");
        if (ds->peak_mem_predicted > 0)
            out_printf(o, "%zu", ds->peak_mem_predicted);
        else
            out_puts(o, "null"); /* not predicted */
        out_json_key_num(o, "activation_microbatch_equivalents", ds->act_mb_equiv);
        out_puts(o, ",\"peak_inflight_microbatches\":");
        if (ds->peak_inflight >= 0)
            out_printf(o, "%d", ds->peak_inflight);
        else
            out_puts(o, "null"); /* unknown: no per-op times */
        if (r->offload) /* only where the plan has copies, so other reports keep their bytes */
            out_printf(o, ",\"offload_slots\":%d,\"offload_bytes\":%.0f,\"offload_partial\":%s",
                       ds->offload_slots, ds->offload_bytes,
                       ds->offload_partial ? "true" : "false");
        json_explain_device(o, &r->explain, i);
        out_puts(o, "}");
    }
    out_puts(o, "]");
    json_reduce(o, r);
    json_explain(o, &r->explain);
    json_boundaries(o, r);
    out_puts(o, "}\n");
    return out_close(o);
}
