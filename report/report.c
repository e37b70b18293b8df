/*
 * report.c — metrics of one run (report_build) and the fixed-width table. The in-flight peaks are
 * in report_inflight.c, the JSON of docs/architecture.md in report_json.c, the Chrome trace and
 * the SVG chart in report_trace.c and report_svg.c.
 *
 * Invariants: busy time is the union of a device's compute-stream intervals (overlaps count once);
 * every ratio whose denominator is zero or unknown is NAN, and NAN prints as "-" in the table and
 * null in the JSON (so is an unknown peak memory), so the JSON is valid whatever the numbers. A
 * report owns per_device only; `schedule` points at a static name or into the config, which must
 * outlive the report. report_build accepts job == NULL (then tokens/s and TFLOP/s are NAN and the
 * name is the plan's schedule kind), which the SVG writer uses. A timeline without per-op times
 * (timing off) yields step times only: busy, idle, bubble and in-flight are then unknown.
 */
#include "report.h"
#include "model/cost.h"
#include "sim/cost_model.h"
#include "report_io.h"
#include "schedule/kinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- interval helpers ------------------------------------------------------------------------ */

typedef struct interval {
    int device;
    double start, end;
} interval_t;

static int interval_cmp(const void *a, const void *b)
{
    const interval_t *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* busy[d] = length of the union of device d's compute op intervals in `tl` (both compute streams
 * of an overlapped pair). A device's compute ops run in program order, so they come sorted by start
 * from prog_ops; only a timeline where they do not (clock skew, an overlapped pair's backward half
 * starting before its forward half) is sorted first. */
static pp_status_t devices_busy(const pp_plan_t *plan, const pp_timeline_t *tl, double *busy)
{
    interval_t *iv = malloc(sizeof *iv * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1));
    PP_ALLOC_CHECK(iv);
    int n = 0, sorted = 1;
    for (int j = 0; j < plan->n_ops; j++) {
        int k = plan->prog_ops ? plan->prog_ops[j] : j; /* a plan built by hand may lack them */
        if (!pp_role_row(plan->ops[k].role)->computes) continue;
        iv[n] = (interval_t){plan->ops[k].device, tl->t[k].start_ms, tl->t[k].end_ms};
        sorted &= n == 0 || interval_cmp(&iv[n - 1], &iv[n]) <= 0;
        n++;
    }
    if (!sorted) qsort(iv, (size_t)n, sizeof *iv, interval_cmp);
    for (int d = 0; d < plan->n_devices; d++)
        busy[d] = 0.0;
    for (int a = 0; a < n;) {
        int d = iv[a].device;
        double lo = iv[a].start, hi = iv[a].end;
        int b = a + 1;
        for (; b < n && iv[b].device == d; b++) {
            if (iv[b].start > hi) {
                busy[d] += hi - lo;
                lo = iv[b].start;
                hi = iv[b].end;
            } else if (iv[b].end > hi) {
                hi = iv[b].end;
            }
        }
        busy[d] += hi - lo;
        a = b;
    }
    free(iv);
    return PP_OK;
}

/* ---- step-time percentiles ------------------------------------------------------------------- */

static int double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* q-quantile (0..1) of sorted v[0..n) by linear interpolation between closest ranks. */
static double quantile_sorted(const double *v, int n, double q)
{
    if (n <= 0) return NAN;
    double pos = q * (n - 1);
    int lo = (int)floor(pos);
    int hi = lo + 1 < n ? lo + 1 : lo;
    return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

/* ---- report_build ---------------------------------------------------------------------------- */

double report_bubble_theory(pp_sched_kind_t kind, int p, int m, int v)
{
    return sched_kind_bubble(kind, p, m, v);
}

/* Overall idle/makespan of `tl`: 1 - sum busy / (p * makespan); busy from `known` (the idle
 * split's of tl) when given, else summed here. */
static pp_status_t overall_bubble(const pp_plan_t *plan, const pp_timeline_t *tl,
                                  const double *known, double *out)
{
    double *busy = malloc(sizeof *busy * (size_t)plan->n_devices);
    PP_ALLOC_CHECK(busy);
    pp_status_t st = PP_OK;
    if (known)
        memcpy(busy, known, sizeof *busy * (size_t)plan->n_devices);
    else
        st = devices_busy(plan, tl, busy);
    if (st == PP_OK) {
        double sum = 0.0, span = timeline_makespan(tl);
        for (int d = 0; d < plan->n_devices; d++)
            sum += busy[d];
        *out = span > 0.0 ? 1.0 - sum / (plan->n_devices * span) : NAN;
    }
    free(busy);
    return st;
}

/* A schedule is named by its config's `name` in every report (the kind where there is none). */
static const char *schedule_name(const pp_job_t *job, const pp_plan_t *plan)
{
    if (job && job->name && job->name[0]) return job->name;
    return sched_kind_name(job ? job->kind : plan->kind);
}

pp_status_t report_check_finite(const pp_plan_t *plan, const pp_timeline_t *tl)
{
    const char *what = tl->mode == PP_MODE_MEASURE ? "measured" : "simulated";
    for (int k = 0; tl->has_op_times && k < tl->n_ops && k < plan->n_ops; k++) {
        if (isfinite(tl->t[k].start_ms) && isfinite(tl->t[k].end_ms)) continue;
        const pp_op_t *op = &plan->ops[k];
        pp_action_t a = {op->kind, op->stage, op->mb, 0};
        char name[32];
        action_format(&a, name, sizeof name);
        fprintf(stderr,
                "the %s step has an op time that is not finite: %s on device %d runs %g..%g ms "
                "(allowed: finite op costs; see the cost: keys and cost.profile)\n",
                what, name, op->device, tl->t[k].start_ms, tl->t[k].end_ms);
        return PP_ERR_INPUT;
    }
    for (int i = 0; i < tl->n_steps && tl->step_ms; i++)
        if (!isfinite(tl->step_ms[i])) {
            fprintf(stderr,
                    "the %s step %d takes %g ms, not a finite time (allowed: finite op costs; see "
                    "the cost: keys and cost.profile)\n",
                    what, i, tl->step_ms[i]);
            return PP_ERR_INPUT;
        }
    return PP_OK;
}

/* The plan and timelines fit together (an internal error otherwise), and their times are finite
 * (an input error otherwise: every writer prints them). */
static pp_status_t check_inputs(const pp_plan_t *plan, const pp_timeline_t *tl,
                                const pp_timeline_t *sim)
{
    if (tl->n_ops != plan->n_ops || (sim && sim->n_ops != plan->n_ops))
        PP_FAIL(PP_ERR_INTERNAL, "report: timeline of %d ops (simulated %d) for a plan of %d ops",
                tl->n_ops, sim ? sim->n_ops : -1, plan->n_ops);
    PP_CHECK(report_check_finite(plan, tl));
    if (sim && sim != tl) PP_CHECK(report_check_finite(plan, sim));
    if (plan->n_devices < 1)
        PP_FAIL(PP_ERR_INTERNAL, "report: plan has %d devices", plan->n_devices);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (op->device < 0 || op->device >= plan->n_devices)
            PP_FAIL(PP_ERR_INTERNAL, "report: op %d is on device %d of %d", k, op->device,
                    plan->n_devices);
        if (pp_action_is_compute(op->kind) &&
            (op->stage < 0 || op->stage >= plan->n_stages || op->mb < 0 || op->mb >= plan->n_mb))
            PP_FAIL(PP_ERR_INTERNAL, "report: op %d is stage %d, micro-batch %d (of %d, %d)", k,
                    op->stage, op->mb, plan->n_stages, plan->n_mb);
    }
    return PP_OK;
}

/* Per device: busy, idle, bubble, in-flight peak, memory, bytes sent; sums for the overall
 * figures. busy[] and peak[] are NAN / -1 where the run had no per-op times. */
static void fill_devices(pp_report_t *r, const pp_job_t *job, const pp_plan_t *plan,
                         const pp_timeline_t *tl, const double *busy, const int *peak,
                         double *sum_busy, double *sum_idle)
{
    const int p = plan->n_devices;
    const double span = timeline_makespan(tl);
    *sum_busy = *sum_idle = 0.0;
    for (int d = 0; d < p; d++) {
        pp_device_stats_t *ds = &r->per_device[d];
        ds->device = d;
        ds->replica = plan_replica_of(plan, d);
        ds->cuda_device = (tl->mode == PP_MODE_MEASURE && job && d < PP_MAX_DEVICES)
                              ? job->pipeline.device_ids[d]
                              : -1;
        ds->busy_ms = busy[d];
        ds->idle_ms = span - busy[d];
        ds->bubble = span > 0.0 ? ds->idle_ms / span : NAN;
        ds->peak_inflight = peak[d];
        ds->peak_mem_bytes = (tl->peak_mem_bytes && d < tl->n_devices) ? tl->peak_mem_bytes[d] : 0;
        ds->act_mb_equiv = NAN; /* report_set_prediction gives it */
        *sum_busy += ds->busy_ms;
        *sum_idle += ds->idle_ms;
    }
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if ((op->kind == PP_ACT_SEND_F || op->kind == PP_ACT_SEND_B) &&
            transport_row(op->link)->crosses_devices && op->device >= 0 && op->device < p)
            r->per_device[op->device].bytes_sent += (double)op->bytes;
        if (op->kind == PP_ACT_OFFLOAD && op->device >= 0 && op->device < p) {
            r->per_device[op->device].offload_slots++;
            r->per_device[op->device].offload_bytes += (double)op->bytes;
            if (plan->offload_keep && plan->offload_keep[op->stage] > 0)
                r->per_device[op->device].offload_partial = 1;
        }
    }
    r->offload = plan->offload;
}

/* Step time (median, p10, p90 of the timed steps; the makespan `span` without them), tokens/s and
 * TFLOP/s. steps[] is scratch of at least tl->n_steps. */
static void fill_step_times(pp_report_t *r, const pp_job_t *job, const pp_plan_t *plan,
                            const pp_timeline_t *tl, double span, double *steps)
{
    if (tl->n_steps > 0 && tl->step_ms) {
        memcpy(steps, tl->step_ms, sizeof *steps * (size_t)tl->n_steps);
        qsort(steps, (size_t)tl->n_steps, sizeof *steps, double_cmp);
        r->step_ms = quantile_sorted(steps, tl->n_steps, 0.5);
        r->step_ms_p10 = quantile_sorted(steps, tl->n_steps, 0.1);
        r->step_ms_p90 = quantile_sorted(steps, tl->n_steps, 0.9);
    } else {
        r->step_ms = r->step_ms_p10 = r->step_ms_p90 = span;
    }
    if (job && r->step_ms > 0.0) {
        r->tokens_per_s = job_tokens_per_step(job, plan->n_mb) / (r->step_ms / 1000.0);
        r->tflops = job_flops_per_step(job, plan->n_mb) / (r->step_ms / 1000.0) / 1e12;
    } else {
        r->tokens_per_s = r->tflops = NAN;
    }
}

/* Each directed device pair the stage boundaries s -> s + 1 cross, in stage order, once, with the
 * plan's link of the first (lowering gives every boundary of a pair the same). */
static pp_status_t build_boundaries(pp_report_t *r, const pp_plan_t *plan)
{
    const int n = plan->n_stages - 1;
    if (n <= 0 || !plan->stage_device) return PP_OK;
    pp_transport_t *link = malloc(sizeof *link * (size_t)n);
    r->boundaries = malloc(sizeof *r->boundaries * (size_t)n);
    if (!link || !r->boundaries) {
        free(link);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for the %d boundaries of a report", n);
    }
    plan_boundary_links(plan, link);
    for (int s = 0; s < n; s++) {
        pp_report_boundary_t b = {plan->stage_device[s], plan->stage_device[s + 1], link[s]};
        int seen = 0;
        for (int k = 0; k < r->n_boundaries && !seen; k++)
            seen = r->boundaries[k].from == b.from && r->boundaries[k].to == b.to;
        if (!seen) r->boundaries[r->n_boundaries++] = b;
    }
    free(link);
    return PP_OK;
}

pp_status_t report_build(pp_report_t *r, const pp_job_t *job, const pp_plan_t *plan,
                         const pp_timeline_t *tl, const pp_timeline_t *sim)
{
    pp_status_t st = PP_OK;
    double *busy = NULL, *steps = NULL;
    int *peak = NULL;

    memset(r, 0, sizeof *r);
    PP_CHECK(check_inputs(plan, tl, sim));
    int p = plan->n_devices;
    r->schedule = schedule_name(job, plan);
    r->kind = sched_kind_name(job ? job->kind : plan->kind);
    r->mode = tl->mode;
    r->devices = p;
    r->stages = plan->n_stages;
    r->micro_batches = plan->n_mb;
    r->loss = NAN;
    r->chunks = plan->chunks;
    r->shared_gpus = tl->mode == PP_MODE_MEASURE && job && job_shared_gpu(job, NULL, NULL);
    r->clock_skew_ms = tl->mode == PP_MODE_MEASURE ? tl->skew_ms : NAN;
    r->transport = job ? transport_name(job->pipeline.transport) : NULL;
    r->replicas = plan_replicas(plan);
    PP_CHECK_GOTO(build_boundaries(r, plan), st, fail);
    PP_CHECK_GOTO(report_build_reduce(r, plan, tl), st, fail);
    r->per_device = calloc((size_t)p, sizeof *r->per_device);
    busy = malloc(sizeof *busy * (size_t)p);
    peak = malloc(sizeof *peak * (size_t)p);
    steps = malloc(sizeof *steps * (size_t)(tl->n_steps > 0 ? tl->n_steps : 1));
    if (!r->per_device || !busy || !peak || !steps) {
        st = PP_ERR_NOMEM;
        fprintf(stderr, "%s:%d: out of host memory building a report\n", __FILE__, __LINE__);
        goto fail;
    }
    PP_CHECK_GOTO(explain_build(&r->explain, plan, tl,
                                sim ? sim : (tl->mode == PP_MODE_SIMULATE ? tl : NULL), NULL),
                  st, fail);
    if (r->explain.known) /* the idle split summed the same union, piece by piece */
        memcpy(busy, r->explain.split.busy_ms, sizeof *busy * (size_t)p);
    else
        PP_CHECK_GOTO(devices_busy(plan, tl, busy), st, fail);
    PP_CHECK_GOTO(report_peak_inflight(plan, tl, peak), st, fail);
    if (!tl->has_op_times) /* step times only: per-op figures are unknown */
        for (int d = 0; d < p; d++) {
            busy[d] = NAN;
            peak[d] = -1;
        }
    double sum_busy, sum_idle;
    fill_devices(r, job, plan, tl, busy, peak, &sum_busy, &sum_idle);
    double span = tl->has_op_times ? timeline_makespan(tl) : NAN;
    r->makespan_ms = span;
    r->bubble = span > 0.0 ? 1.0 - sum_busy / (p * span) : NAN;
    r->bubble_ideal = sum_busy > 0.0 ? sum_idle / sum_busy : NAN;
    r->bubble_theory =
        report_bubble_theory(plan->kind, plan_pipe_devices(plan), plan->n_mb, plan->chunks);
    r->step_ms_predicted = NAN;
    if (sim == tl && tl->has_op_times) /* a simulated run: the figure above */
        r->bubble_simulated = r->bubble;
    else if (sim)
        PP_CHECK_GOTO(overall_bubble(
                          plan, sim,
                          r->explain.split_sim.n_devices == p ? r->explain.split_sim.busy_ms : NULL,
                          &r->bubble_simulated),
                      st, fail);
    else
        r->bubble_simulated = tl->mode == PP_MODE_SIMULATE ? r->bubble : NAN;
    fill_step_times(r, job, plan, tl, span, steps);
fail:
    free(busy);
    free(peak);
    free(steps);
    if (st != PP_OK) report_free(r);
    return st;
}

pp_status_t report_what_if(pp_report_t *r, const pp_plan_t *plan, const pp_cost_model_t *cm)
{
    PP_CHECK(explain_what_if(&r->explain.what_if, plan, cm));
    r->explain.have_what_if = 1;
    return PP_OK;
}

void report_set_what_if(pp_report_t *r, const pp_what_if_t *w)
{
    r->explain.what_if = *w;
    r->explain.have_what_if = 1;
}

void report_free(pp_report_t *r)
{
    if (!r) return;
    explain_free(&r->explain);
    free(r->per_device);
    free(r->boundaries);
    free(r->reduce);
    memset(r, 0, sizeof *r);
}

/* ---- the table ------------------------------------------------------------------------------- */

/* Writes x with `prec` decimals, scaled by `scale`, or "-" when x is NAN/infinite. */
static const char *fmt_num(char *buf, size_t size, double x, double scale, int prec)
{
    return out_cell(buf, size, isfinite(x), "%.*f", prec, x * scale);
}

/* A fraction as "15.79%", or "-" when unknown. */
static const char *fmt_pct(char *buf, size_t size, double x, int prec)
{
    return out_cell(buf, size, isfinite(x), "%.*f%%", prec, 100.0 * x);
}

const char *report_mode_name(pp_mode_t m)
{
    return m == PP_MODE_MEASURE ? "measure" : "simulate";
}

/* "+1.2 pp" difference of two fractions, or "-" when either is unknown. */
static const char *fmt_delta_pp(char *buf, size_t size, double a, double b)
{
    /* A difference that rounds to zero prints as +0.0, never -0.0. */
    return out_cell(buf, size, isfinite(a) && isfinite(b), "%+.1f pp",
                    fabs(a - b) < 0.0005 ? 0.0 : 100.0 * (a - b));
}

/* "# boundaries: 0->1 peer, 1->2 nccl, 2->3 peer": the device pairs in the order the stages cross
 * them, a run of pairs that continue each other over one transport written as one chain
 * ("0->1->2->3 peer"). */
static void table_boundaries(pp_out_t *o, const pp_report_t *r)
{
    const pp_report_boundary_t *b = r->boundaries;
    const int n = r->n_boundaries;
    if (n == 0) return;
    out_puts(o, "# boundaries:");
    for (int i = 0; i < n; i++) {
        if (i > 0 && b[i - 1].to == b[i].from && b[i - 1].transport == b[i].transport)
            out_printf(o, "->%d", b[i].to);
        else
            out_printf(o, " %d->%d", b[i].from, b[i].to);
        if (i + 1 == n || b[i + 1].from != b[i].to || b[i + 1].transport != b[i].transport)
            out_printf(o, " %s%s", transport_name(b[i].transport), i + 1 < n ? "," : "");
    }
    out_puts(o, "\n");
}

/* Preamble: every option that shaped the numbers. */
static void table_preamble(pp_out_t *o, const pp_report_t *r, const pp_job_t *job)
{
    out_printf(o, "# ppsched: schedule %s (%s), mode %s\n", r->schedule ? r->schedule : "-",
               r->kind ? r->kind : "-", report_mode_name(r->mode));
    if (job) {
        const pp_job_model_t *m = &job->model;
        out_printf(o, "# model: %d layers, hidden %d, %d heads, seq %d, vocab %d, %s\n", m->layers,
                   m->hidden, m->heads, m->seq_len, m->vocab, pp_dtype_name(m->dtype));
        if (m->n_layers_per_stage > 0) {
            out_printf(o, "# layers per stage:");
            for (int s = 0; s < m->n_layers_per_stage; s++)
                out_printf(o, " %d", m->layers_per_stage[s]);
            out_printf(o, "%s\n",
                       job->pipeline.split == PP_SPLIT_BALANCED
                           ? " (balanced by predicted stage time)"
                           : "");
        }
    }
    const int p = r->devices / (r->replicas > 1 ? r->replicas : 1);
    out_printf(o, "# pipeline: p %d %s", p, pp_plural(p, "device", "devices"));
    if (r->replicas > 1)
        out_printf(o, " x d %d replicas (%d devices, replica r on devices %d r .. %d r + %d)",
                   r->replicas, r->devices, p, p, p - 1);
    out_printf(o, ", %d %s, v %d, m %d %s", r->stages, pp_plural(r->stages, "stage", "stages"),
               r->chunks, r->micro_batches,
               pp_plural(r->micro_batches, "micro-batch", "micro-batches"));
    if (job)
        out_printf(o, " of %d sequences, placement %s, transport %s",
                   job->pipeline.micro_batch_size,
                   job->pipeline.placement == PP_PLACEMENT_V ? "v" : "loop",
                   transport_name(job->pipeline.transport));
    out_puts(o, "\n");
    table_boundaries(o, r);
    if (job && r->replicas > 1) report_table_reduce_setup(o, r, job);
    if (r->shared_gpus)
        out_printf(o,
                   "# note: pipeline devices share GPUs (see the cuda column), each with its own "
                   "streams and memory: the timings are not those of separate GPUs, and peak "
                   "memory is the whole GPU's\n");
    if (r->mode == PP_MODE_MEASURE && isfinite(r->loss))
        out_printf(o, "# loss: %.9g (mean over the micro-batches of the last step)\n", r->loss);
    if (r->cost_desc[0])
        out_printf(o, "# %s: %s\n",
                   r->mode == PP_MODE_MEASURE ? "predicted before running with" : "cost model",
                   r->cost_desc);
    else if (job && r->mode == PP_MODE_SIMULATE)
        out_printf(
            o,
            "# cost model (ms per micro-batch, one device's share of the layers): forward %g, "
            "backward_input %g, "
            "backward_weight %g, send %g\n",
            job->cost.forward, job->cost.backward_input, job->cost.backward_weight, job->cost.send);
    if (job && r->mode == PP_MODE_SIMULATE && job->run.offload != PP_OFFLOAD_NONE)
        out_printf(o, "# host link (run.offload copies): %g GB/s each direction\n",
                   cost_host_link_gbps(job));
    out_printf(o, "#\n");
}

/* Two-row header, then one fixed-width row per device. */
static void table_devices(pp_out_t *o, const pp_report_t *r)
{
    char a[64], b[64], c[64], d[64];
    const int rep = r->replicas > 1; /* a replica column with data parallelism */
    out_printf(o, "# %6s%s %5s %11s %11s %8s %8s %9s %9s %10s\n", "device", rep ? " replica" : "",
               "cuda", "busy", "idle", "bubble", "theory", "in-flight", "peak-mem", "sent");
    /* in-flight counts (stage, micro-batch) pairs: an interleaved device holds v per micro-batch */
    out_printf(o, "# %6s%s %5s %11s %11s %8s %8s %9s %9s %10s\n", "", rep ? "        " : "", "",
               "ms", "ms", "%", "%", "(st,mb)", "GiB", "MiB");
    for (int i = 0; i < r->devices; i++) {
        const pp_device_stats_t *ds = &r->per_device[i];
        char cuda[16], mem[32], inflight[16];
        out_cell(cuda, sizeof cuda, ds->cuda_device >= 0, "%d", ds->cuda_device);
        out_cell(inflight, sizeof inflight, ds->peak_inflight >= 0, "%d", ds->peak_inflight);
        out_cell(mem, sizeof mem, ds->peak_mem_bytes > 0, "%.2f",
                 (double)ds->peak_mem_bytes / (1024.0 * 1024 * 1024));
        out_printf(o, "  %6d", ds->device);
        if (rep) out_printf(o, " %7d", ds->replica);
        out_printf(o, " %5s %11s %11s %8s %8s %9s %9s %10.2f\n", cuda,
                   fmt_num(a, sizeof a, ds->busy_ms, 1.0, 3),
                   fmt_num(b, sizeof b, ds->idle_ms, 1.0, 3),
                   fmt_num(c, sizeof c, ds->bubble, 100.0, 2),
                   fmt_num(d, sizeof d, r->bubble_theory, 100.0, 2), inflight, mem,
                   ds->bytes_sent / (1024.0 * 1024.0));
    }
}

/* The part of the step outside the ops' makespan, where there is one (> 0.5 us): the devices'
 * heads and tails, which the busy, idle and bubble figures leave out. */
static void table_outside_ops(pp_out_t *o, const pp_report_t *r)
{
    const double out = r->step_ms - r->makespan_ms;
    if (!(out >= 5e-4)) return; /* NAN too: no op times */
    out_printf(o,
               "# ops' makespan %.3f ms; outside the ops %.3f ms of the step (each device's "
               "gradients zeroed before its first op, its optimizer after its last; busy, idle "
               "and the bubble leave it out)\n",
               r->makespan_ms, out);
}

pp_status_t report_print_table(const pp_report_t *r, const pp_job_t *job, FILE *f)
{
    pp_out_t out, *o = &out;
    out_wrap(o, f, "output", "the report table");
    char a[64], b[64], c[64], d[64], e[64];
    table_preamble(o, r, job);
    table_devices(o, r);
    report_table_reduce(o, r);
    report_table_explain(o, r); /* why the devices idled: report_explain.c */

    /* Summary block and verdict. */
    out_printf(o, "#\n");
    out_printf(o, "# step time (ms): median %s, p10 %s, p90 %s\n",
               fmt_num(a, sizeof a, r->step_ms, 1.0, 3),
               fmt_num(b, sizeof b, r->step_ms_p10, 1.0, 3),
               fmt_num(c, sizeof c, r->step_ms_p90, 1.0, 3));
    table_outside_ops(o, r);
    out_printf(o, "# throughput%s: %s tokens/s, %s TFLOP/s (%s per device)\n",
               r->mode == PP_MODE_SIMULATE ? " (at the cost model's op times)" : "",
               out_cell(a, sizeof a, isfinite(r->tokens_per_s), "%.4g", r->tokens_per_s),
               fmt_num(b, sizeof b, r->tflops, 1.0, 1),
               fmt_num(c, sizeof c, r->tflops / r->devices, 1.0, 1));
    out_printf(o,
               "# bubble overall: %s idle/makespan, %s idle/ideal-compute; theory %s, simulated %s "
               "(idle/makespan)\n",
               fmt_pct(a, sizeof a, r->bubble, 2), fmt_pct(b, sizeof b, r->bubble_ideal, 2),
               fmt_pct(c, sizeof c, r->bubble_theory, 2),
               fmt_pct(d, sizeof d, r->bubble_simulated, 2));
    report_table_prediction(o, r);
    if (!isfinite(r->bubble)) {
        out_printf(o, "# verdict: bubble unknown (no per-op times); theory %s, simulated %s\n",
                   fmt_pct(b, sizeof b, r->bubble_theory, 1),
                   fmt_pct(c, sizeof c, r->bubble_simulated, 1));
        return out_close(o);
    }
    out_printf(o, "# verdict: bubble %s", fmt_pct(a, sizeof a, r->bubble, 1));
    if (isfinite(r->bubble_theory))
        out_printf(o, " vs theory %s (\xce\x94 %s)", fmt_pct(b, sizeof b, r->bubble_theory, 1),
                   fmt_delta_pp(e, sizeof e, r->bubble, r->bubble_theory));
    else
        out_printf(o, " (no closed form for a %s schedule)", r->kind ? r->kind : "-");
    if (r->mode == PP_MODE_MEASURE && isfinite(r->bubble_simulated))
        out_printf(o, ", simulated %s (\xce\x94 %s)", fmt_pct(c, sizeof c, r->bubble_simulated, 1),
                   fmt_delta_pp(e, sizeof e, r->bubble, r->bubble_simulated));
    out_puts(o, "\n");
    return out_close(o);
}
