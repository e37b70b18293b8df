/*
 * run.c — the chain of run.h: config → schedule → plan → simulate | execute → timeline → report.
 *
 * Order of a measured run: predict (cost model from the model and the GPU, one simulation, the
 * predicted step kept), execute, then the cost model from the measured op times and one
 * simulation with it, so the simulated bubble differs from the measured one only by what the
 * cost model leaves out (launch gaps, contention, the order the GPU really ran things in). A
 * simulated run predicts, and that is its result. The plan is lowered once;
 * schedule_validate checks the programs and plan_lower's dry run finds deadlocks.
 *
 * Under several processes (pp_group.h) every process loads, plans and predicts the whole run;
 * the one simulation that is the run's result is split: each process simulates its own devices
 * and the parts are merged (timeline_merge, run_group.c), so every process holds the same timeline
 * and report and rank 0 prints it. Every step that can fail on one process alone is followed by
 * group_agree, so the others never wait for it.
 */
#include "run.h"

#include "model/cost.h"
#include "plan/stage_cfg.h"
#include "sim/cost_model.h"

#include "config/resolve.h"
#include "config/written.h"
#include "schedule/generate.h"
#include "schedule/kinds.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

pp_status_t run_load(pp_run_t *r, const char *path, const char *yaml, const char *const *sets,
                     int n_sets, int n_visible)
{
    return run_load_group(r, NULL, path, yaml, sets, n_sets, n_visible);
}

pp_status_t run_load_group(pp_run_t *r, pp_group_t *g, const char *path, const char *yaml,
                           const char *const *sets, int n_sets, int n_visible)
{
    memset(r, 0, sizeof *r);
    r->group = g;
    if (yaml)
        PP_CHECK(config_load_string(&r->cfg, path, yaml, sets, n_sets));
    else
        PP_CHECK(config_load(&r->cfg, path, sets, n_sets));
    const int written = sched_kind(r->cfg.schedule.kind)->written;
    /* A written schedule decides the pipeline's shape: build it, then resolve the job with it. */
    if (written) PP_CHECK(written_build(&r->sched, &r->cfg));
    PP_CHECK(job_resolve(&r->job, &r->cfg, written ? &r->sched : NULL, n_visible));
    /* cost.profile is read with the job, so that check and show refuse a bad one as a run does */
    if (r->job.cost_src.profile) {
        PP_CHECK(profile_load(&r->prof, r->job.cost_src.profile));
        r->have_prof = 1;
    }
    if (g) run_set_procs(&r->job, g); /* before lowering: auto's transports follow the layout */
    return run_plan(r);
}

pp_status_t run_plan(pp_run_t *r)
{
    if (!sched_kind(r->job.kind)->written) PP_CHECK(generate_schedule(&r->sched, &r->job));
    r->offload_gpu = NULL;
    pp_status_t st = schedule_validate(&r->sched);
    if (st == PP_OK) st = plan_lower(&r->plan, &r->sched, &r->job);
    if (st == PP_OK) st = plan_validate(&r->plan);
    if (st == PP_OK) st = run_offload_auto(r, NULL);
    if (st == PP_ERR_INPUT)
        fprintf(stderr, "%s: the %s schedule above is not valid\n",
                r->job.path ? r->job.path : "config", sched_kind_name(r->job.kind));
    return st;
}

/* Per stage, the mean measured duration of each compute kind; the mean cross-device transfer,
 * overall and per transport; the host link's bandwidth over the measured copies (`link`, the
 * config's, without copies); the reductions' ring bandwidth within and between hosts. Kinds a plan
 * does not use keep 0 (B falls back to I + W). */
static pp_status_t cost_from_measure(pp_cost_model_t *cm, const pp_plan_t *plan,
                                     const pp_timeline_t *tl, double link)
{
    pp_job_cost_t zero = {0};
    int n = plan->n_stages;
    PP_CHECK(cost_model_uniform(cm, n, &zero));
    int *cnt = calloc((size_t)n * 4, sizeof *cnt);
    PP_ALLOC_CHECK(cnt);
    double *per[4] = {cm->f, cm->b, cm->i, cm->w};
    double send = 0, copy_bytes = 0, copy_ms = 0, ring_bytes[2] = {0, 0}, ring_ms[2] = {0, 0};
    int n_send = 0, n_by[PP_TRANSPORT_COUNT] = {0};
    const int d = plan_replicas(plan);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        double dur = tl->t[k].end_ms - tl->t[k].start_ms;
        if (pp_action_is_compute(op->kind)) {
            per[op->kind][op->stage] += dur;
            cnt[op->kind * n + op->stage]++;
        } else if ((op->kind == PP_ACT_SEND_F || op->kind == PP_ACT_SEND_B) &&
                   transport_row(op->link)->crosses_devices) {
            send += dur;
            n_send++;
            cm->send_by[op->link] += dur;
            n_by[op->link]++;
        } else if (pp_action_is_copy(op->kind)) {
            copy_bytes += (double)op->bytes;
            copy_ms += dur;
        } else if (op->kind == PP_ACT_REDUCE) { /* the ring's bytes per rank over its time */
            ring_bytes[op->host > 1] += 2.0 * (d - 1) / d * (double)op->bytes;
            ring_ms[op->host > 1] += dur;
        }
    }
    /* REDUCE: the bandwidth the measured reductions reached on each link (latency in it) */
    cm->reduce_ranks = d;
    for (int net = 0; net < 2; net++) {
        cm->reduce_gbps[net] = ring_ms[net] > 0 ? ring_bytes[net] / ring_ms[net] / 1e6 : 0;
        cm->reduce_latency_ms[net] = 0;
    }
    for (int kind = 0; kind < 4; kind++)
        for (int st = 0; st < n; st++)
            if (cnt[kind * n + st]) per[kind][st] /= cnt[kind * n + st];
    for (int st = 0; st < n; st++)
        if (!cnt[PP_ACT_B * n + st]) cm->b[st] = cm->i[st] + cm->w[st];
    cm->send = n_send ? send / n_send : 0;
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++)
        if (n_by[t]) cm->send_by[t] /= n_by[t];
    cm->host_link_gbps = copy_ms > 0 ? copy_bytes / copy_ms / 1e6 : link;
    free(cnt);
    return PP_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* How far into its forward half each overlapped pair's backward half started in the timeline, as
 * the simulator's overlap (pair_start: the backward starts (1 - overlap) into the forward): the
 * median over the pairs, in [0, 1]; -1 when the plan has none. The measured halves' durations
 * already hold what sharing the GPU cost them, so the pair is simulated as it ran: the two halves
 * side by side from where the backward began. */
static pp_status_t measured_overlap(const pp_plan_t *plan, const pp_timeline_t *tl, double *out)
{
    int n = 0;
    double *v = malloc(sizeof *v * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1));
    PP_ALLOC_CHECK(v);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        const int f = op->role == PP_ROLE_OVERLAP ? plan_pair_forward(plan, k) : -1;
        if (f < 0) continue;
        const double fs = tl->t[f].start_ms, fd = tl->t[f].end_ms - fs;
        if (fd > 0) {
            double o = 1.0 - (tl->t[k].start_ms - fs) / fd;
            v[n++] = o < 0 ? 0 : o > 1 ? 1 : o;
        }
    }
    *out = -1;
    if (n) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        *out = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
    free(v);
    return PP_OK;
}

pp_status_t run_cost_model(pp_cost_model_t *cm, const pp_plan_t *plan, const pp_job_t *job,
                           const pp_timeline_t *measured, const pp_gpu_t *present,
                           const pp_profile_t *prof)
{
    if (measured && measured->has_op_times) {
        PP_CHECK(cost_from_measure(cm, plan, measured, cost_host_link_gbps(job)));
        /* cost.overlap when set; else the pairs as they ran (0 for a plan without pairs) */
        double o = -1;
        if (!job->overlap_set) PP_CHECK(measured_overlap(plan, measured, &o));
        cm->overlap = o >= 0 ? o : job->cost.overlap;
        cost_model_links(cm, job);
        /* the measured op times hold no head or tail: the GPU description prices them */
        cost_model_tails(cm, job, plan, cost_gpu_for(&job->cost_src, present, prof));
        return PP_OK;
    }
    return cost_model_build(cm, job, plan, present, prof, NULL);
}

/* The predicted cost model: cost.profile read once (run_load reads it; a run built otherwise
 * reads it here), the model built on `present`. */
static pp_status_t predict_cost(pp_run_t *r, const pp_gpu_t *present, pp_cost_source_t *source)
{
    if (r->job.cost_src.profile && !r->have_prof) {
        PP_CHECK(profile_load(&r->prof, r->job.cost_src.profile));
        r->have_prof = 1;
    }
    r->present = present;
    PP_CHECK(run_offload_auto(r, present)); /* again where the GPU present is another */
    cost_model_free(&r->cost);
    timeline_free(&r->sim);
    return cost_model_build(&r->cost, &r->job, &r->plan, present, r->have_prof ? &r->prof : NULL,
                            source);
}

/* run_predict; with `what_if` (on one process), the what-if figures of the cost model too, in the
 * simulation's own pass (r->have_what_if). */
static pp_status_t predict(pp_run_t *r, const pp_gpu_t *present, int what_if)
{
    pp_cost_source_t source;
    pp_status_t st = predict_cost(r, present, &source);
    r->have_what_if = 0;
    if (r->group && r->group->size > 1) {
        PP_CHECK(group_agree(r->group, st)); /* a profile only one process cannot read */
        PP_CHECK(run_simulate_split(r));
    } else if (what_if) {
        PP_CHECK(st);
        PP_CHECK(explain_what_if_sim(&r->what_if, &r->sim, &r->plan, &r->cost));
        r->have_what_if = 1;
    } else {
        PP_CHECK(st);
        PP_CHECK(simulate_plan(&r->sim, &r->plan, &r->cost));
    }
    const pp_profile_t *prof = r->have_prof ? &r->prof : NULL;
    r->predicted_ms = r->sim.step_ms[0];
    const pp_gpu_t *gpu = cost_gpu_for(&r->job.cost_src, present, prof);
    cost_model_describe(r->cost_desc, sizeof r->cost_desc, &r->cost, &r->job, &r->plan, source, gpu,
                        prof);
    PP_CHECK(memory_predict(&r->mem, &r->job, &r->plan, gpu, prof));
    r->predicted = 1;
    return PP_OK;
}

pp_status_t run_predict(pp_run_t *r, const pp_gpu_t *present)
{
    return predict(r, present, 0);
}

pp_exec_opts_t run_exec_opts(const pp_job_t *job, const pp_run_opts_t *o)
{
    pp_exec_opts_t eo = {
        .sync = o->sync,
        .graph = job->run.graph && !o->sync,
        .timing = job->run.timing,
        .timeout_s = o->timeout_s > 0 ? o->timeout_s : job->run.timeout_s,
        .verbose = o->verbose,
        .check_grads = o->check_grads,
        .serial_pairs = o->serial_pairs,
        .group = o->group,
    };
    return eo;
}

/* zero1 cuts each gradient bucket of a stage into d equal parts (stage_shard_part): refused at the
 * key before any GPU work where the replicas do not divide one. */
static pp_status_t check_shards(pp_run_t *r)
{
    for (int s = 0; s < r->plan.n_stages; s++) {
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, &r->job, &r->plan, s);
        if (c.optimizer_shards <= 1) return PP_OK;
        if (stage_shard_values(&c) == 0)
            return config_error_at(&r->cfg, PP_CFG_OPTIMIZER_SHARDING, 0, 0,
                                   "zero1 cuts stage %d's gradient buckets (%zu values each, "
                                   "%zu in all) into %d equal parts, which they do not divide "
                                   "(allowed: replicas that divide them, e.g. a power of two, or "
                                   "none)",
                                   s, c.shard_bucket, stage_grad_bytes(&c) / sizeof(float),
                                   c.optimizer_shards);
    }
    return PP_OK;
}

pp_status_t run_execute(pp_run_t *r, const pp_run_opts_t *o)
{
    if (!o->exec) PP_FAIL(PP_ERR_INTERNAL, "run_execute: no executor");
    PP_CHECK(check_shards(r));
    pp_exec_opts_t eo = run_exec_opts(&r->job, o);
    PP_CHECK(o->exec(&r->meas, &r->exec, &r->plan, &r->job, &eo));
    r->measured = 1;
    return PP_OK;
}

pp_status_t run_report(pp_run_t *r)
{
    if (!r->predicted) PP_CHECK(run_predict(r, r->present));
    if (r->have_report) report_free(&r->report);
    r->have_report = 0;
    PP_CHECK(report_build(&r->report, &r->job, &r->plan, run_timeline(r), &r->sim));
    r->have_report = 1;
    size_t mem[PP_MAX_DEVICES];
    double mb[PP_MAX_DEVICES];
    char verdict[256];
    for (int d = 0; d < r->mem.n_devices; d++) {
        /* a prediction past what size_t holds (a shape no GPU holds) is shown as the most it can */
        mem[d] = r->mem.dev[d].total < 0x1p64 ? (size_t)r->mem.dev[d].total : SIZE_MAX;
        mb[d] = r->mem.dev[d].mb_equiv;
    }
    memory_verdict(&r->mem, verdict, sizeof verdict);
    report_set_prediction(&r->report, r->predicted_ms, mem, mb, r->cost_desc, verdict);
    return PP_OK;
}

pp_status_t run_finish(pp_run_t *r)
{
    if (!r->predicted) PP_CHECK(run_predict(r, r->present));
    if (r->measured && r->meas.has_op_times) { /* the measured costs, simulated with the what-if */
        cost_model_free(&r->cost);
        timeline_free(&r->sim);
        r->have_what_if = 0;
        PP_CHECK(run_cost_model(&r->cost, &r->plan, &r->job, &r->meas, r->present, NULL));
        PP_CHECK(explain_what_if_sim(&r->what_if, &r->sim, &r->plan, &r->cost));
        r->have_what_if = 1;
    }
    PP_CHECK(run_report(r));
    /* What-if from the run's own op costs; a measured run without op times has none (its cost
     * model is the config's). */
    if (r->have_what_if && (!r->measured || r->meas.has_op_times))
        report_set_what_if(&r->report, &r->what_if);
    else if (!r->measured || r->meas.has_op_times)
        PP_CHECK(report_what_if(&r->report, &r->plan, &r->cost));
    /* The mean loss of the last step: a measured run's own figure, for bitwise comparisons. */
    if (r->measured && r->exec.loss && r->exec.n_steps > 0)
        r->report.loss = r->exec.loss[r->exec.n_steps - 1];
    return PP_OK;
}

pp_status_t run_refuse_fit(const pp_run_t *r, FILE *f)
{
    const pp_mem_pred_t *m = &r->mem;
    if (m->n_over == 0) return PP_OK;
    if (r->group && r->group->rank != 0) return PP_ERR_DEVICE;
    const double gib = 1024.0 * 1024.0 * 1024.0;
    char has[96];
    if (m->budget)
        snprintf(has, sizeof has, "run.memory_limit is %.2f GiB", m->limit / gib);
    else
        snprintf(has, sizeof has, "the %s has %.1f GiB", m->gpu->name, m->limit / gib);
    if (r->offload_note[0]) fprintf(f, "%s\n", r->offload_note);
    fprintf(f, "ppsched: the run would not fit: device %d needs %.2f GiB, %s (%d of %d %s over)\n",
            m->fullest, m->dev[m->fullest].total / gib, has, m->n_over, m->n_devices,
            pp_plural(m->n_devices, "device", "devices"));
    return PP_ERR_DEVICE;
}

pp_status_t run_go(pp_run_t *r, const pp_run_opts_t *o)
{
    r->group = o->group;
    PP_CHECK(predict(r, o->gpu, !o->measure)); /* a simulated run's what-if comes along */
    if (o->measure && r->job.run.memory_limit_gib > 0) PP_CHECK(run_refuse_fit(r, stderr));
    if (o->measure) PP_CHECK(run_execute(r, o));
    return run_finish(r);
}

const pp_timeline_t *run_timeline(const pp_run_t *r)
{
    return r->measured ? &r->meas : &r->sim;
}

/* Here rather than in execute.c: a run owns its result and is freed where no CUDA is linked. */
void exec_result_free(pp_exec_result_t *res)
{
    if (!res) return;
    free(res->loss);
    free(res->grads);
    memset(res, 0, sizeof *res);
}

void run_free(pp_run_t *r)
{
    if (!r) return;
    if (r->have_report) report_free(&r->report);
    exec_result_free(&r->exec);
    timeline_free(&r->meas);
    timeline_free(&r->sim);
    cost_model_free(&r->cost);
    plan_free(&r->plan);
    schedule_free(&r->sched);
    job_free(&r->job);
    config_free(&r->cfg);
    memset(r, 0, sizeof *r);
}
