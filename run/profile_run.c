/*
 * profile_run.c — the whole-model runs of a profile (profile_run.h).
 *
 * Every run is a config written here from the profile's model — every block on the one device,
 * one generated schedule, 5 timed steps after 2 — loaded, planned and executed by run.h exactly as
 * `ppsched FILE` would, so a step is timed the way a measured run times it (one CUDA graph a step
 * when run.graph is on). Sizes shrink the micro-batch's sequences first, then its sequence length
 * (keeping it a multiple of 64, so the attention path stays the one profiled). The overlap fit
 * runs the simulator on the DualPipeV run's own plan.
 */
#include "profile_run.h"

#include "model/stage_size.h"
#include "model/cost.h"
#include "sim/cost_model.h"
#include "sim/simulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RUN_STEPS  5
#define RUN_WARMUP 2

static const int token_div[] = {1, 4, 16}; /* sizes: the profiled micro-batch's tokens / div */
static const int step_m[] = {8, 32};       /* 1F1B steps at each size */
static const int pair_m = 8;               /* DualPipeV at each size */

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One whole-model run. */
typedef struct prof_run {
    const char *kind; /* schedule kind */
    pp_prof_size_t size;
    int serial_pairs; /* overlapped pairs on one stream */
} prof_run_t;

/* batch x seq / div tokens: sequences halved first, then the sequence length (>= 64, a multiple
 * of 64 when seq is). 0 when it does not shrink that far. */
static int shrink(int batch, int seq, int div, int *b, int *t)
{
    *b = batch;
    *t = seq;
    while (div > 1 && *b % 2 == 0) {
        *b /= 2;
        div /= 2;
    }
    while (div > 1 && *t % 2 == 0 && *t / 2 >= 64 && (seq % 64 != 0 || (*t / 2) % 64 == 0)) {
        *t /= 2;
        div /= 2;
    }
    return div == 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of tl's timed steps, and their spread: p90 - p10 (nearest rank) over the median. */
static double median_step(const pp_timeline_t *tl, double *spread)
{
    double v[64];
    int n = tl->n_steps < 64 ? tl->n_steps : 64;
    *spread = 0.0;
    if (n <= 0) return 0.0;
    memcpy(v, tl->step_ms, sizeof(double) * (size_t)n);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    const double p10 = v[(int)(0.1 * (n - 1) + 0.5)], p90 = v[(int)(0.9 * (n - 1) + 0.5)];
    if (med > 0) *spread = (p90 - p10) / med;
    return med;
}

/* The widest spread of the whole-model runs this process measured (profile_measure_runs). */
typedef struct spread_seen {
    double worst;
    char what[96];
} spread_seen_t;

/* Load, plan and execute run `pr` into r (the caller frees it); its median step into *ms and the
 * spread of its steps into *spread. */
static pp_status_t measure(pp_run_t *r, const pp_job_t *job, const prof_run_t *pr,
                           pp_executor_fn exec, double *ms, double *spread)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "model: {layers: %d, hidden: %d, heads: %d, seq_len: %d, vocab: %d, dtype: %s}\n"
             "pipeline: {devices: [%d], micro_batches: %d, micro_batch_size: %d}\n"
             "schedule: {kind: %s}\n"
             "run: {steps: %d, warmup: %d, seed: %llu, recompute: %s, graph: %s, timing: %s, "
             "timeout: %g}\n",
             pr->size.layers, job->model.hidden, job->model.heads, pr->size.seq_len,
             job->model.vocab, pp_dtype_name(job->model.dtype), job->pipeline.device_ids[0],
             pr->size.m, pr->size.batch, pr->kind, RUN_STEPS, RUN_WARMUP,
             (unsigned long long)job->run.seed, stage_recompute_name(job->run.recompute),
             job->run.graph ? "on" : "off", job->run.timing ? "on" : "off", job->run.timeout_s);
    PP_CHECK(run_load(r, "profile run", yaml, NULL, 0, -1));
    pp_run_opts_t o = {.measure = 1, .exec = exec, .serial_pairs = pr->serial_pairs};
    PP_CHECK(run_execute(r, &o));
    *ms = median_step(&r->meas, spread);
    return PP_OK;
}

/* measure() into a fresh run freed here, with a note when it does not fit; the widest spread so
 * far in *seen. */
static pp_status_t measure_once(const pp_job_t *job, const prof_run_t *pr, pp_executor_fn exec,
                                double *ms, int verbose, spread_seen_t *seen)
{
    pp_run_t r;
    double spread = 0.0;
    pp_status_t st = measure(&r, job, pr, exec, ms, &spread);
    run_free(&r);
    if (st == PP_ERR_DEVICE)
        fprintf(stderr,
                "# profile: %s of %d blocks, micro-batch %d x %d, m %d did not run: "
                "left out\n",
                pr->kind, pr->size.layers, pr->size.batch, pr->size.seq_len, pr->size.m);
    else if (st == PP_OK && verbose)
        fprintf(stderr,
                "# profile: %s of %d blocks, micro-batch %d x %d, m %d%s: %.3f ms a step "
                "(p10..p90 spread %.1f %%)\n",
                pr->kind, pr->size.layers, pr->size.batch, pr->size.seq_len, pr->size.m,
                pr->serial_pairs ? ", pairs on one stream" : "", *ms, 100.0 * spread);
    if (st == PP_OK && spread >= seen->worst) {
        seen->worst = spread;
        snprintf(seen->what, sizeof seen->what, "%s, micro-batch %d x %d, m %d", pr->kind,
                 pr->size.batch, pr->size.seq_len, pr->size.m);
    }
    return st;
}

/* 1F1B at each of step_m at size z: rows of p->steps. */
static pp_status_t measure_steps(pp_profile_t *p, const pp_job_t *job, pp_executor_fn exec,
                                 pp_prof_size_t z, int verbose, spread_seen_t *seen)
{
    for (int k = 0; k < N_OF(step_m) && p->n_steps < PP_PROFILE_MAX_RUNS; k++) {
        prof_run_t pr = {"1f1b", z, 0};
        double ms;
        pr.size.m = step_m[k];
        pp_status_t st = measure_once(job, &pr, exec, &ms, verbose, seen);
        if (st == PP_ERR_DEVICE) break;
        PP_CHECK(st);
        p->steps[p->n_steps++] = (pp_prof_step_t){pr.size, ms};
    }
    profile_calibrate(p); /* the pairs' fit prices with the profile */
    return PP_OK;
}

/* DualPipeV at size z (an even number of blocks: two chunks) on one stream and on two. */
static pp_status_t measure_pair(pp_profile_t *p, const pp_job_t *job, pp_executor_fn exec,
                                pp_prof_size_t z, int verbose, spread_seen_t *seen)
{
    prof_run_t pr = {"dualpipe-v", z, 1};
    pp_prof_pair_t row;
    pp_run_t r;
    pp_cost_model_t cm = {0};
    pr.size.layers -= pr.size.layers % 2;
    pr.size.m = pair_m;
    if (pr.size.layers < 2 || p->n_pairs == PP_PROFILE_MAX_RUNS) return PP_OK;
    pp_status_t st = measure_once(job, &pr, exec, &row.serial_ms, verbose, seen);
    if (st == PP_ERR_DEVICE) return PP_OK;
    PP_CHECK(st);
    pr.serial_pairs = 0;
    double spread = 0.0;
    st = measure(&r, job, &pr, exec, &row.overlapped_ms, &spread);
    if (st == PP_OK) st = cost_model_build(&cm, &r.job, &r.plan, NULL, p, NULL);
    if (st == PP_OK && row.serial_ms > 0)
        st = profile_fit_overlap(&r.plan, &cm, row.overlapped_ms / row.serial_ms, &row.overlap);
    cost_model_free(&cm);
    run_free(&r);
    if (st == PP_ERR_DEVICE) return PP_OK;
    PP_CHECK(st);
    row.size = pr.size;
    p->pairs[p->n_pairs++] = row;
    if (verbose)
        fprintf(stderr,
                "# profile: dualpipe-v, pairs on two streams: %.3f ms a step (p10..p90 spread "
                "%.1f %%): overlap %.2f\n",
                row.overlapped_ms, 100.0 * spread, row.overlap);
    if (spread >= seen->worst) {
        seen->worst = spread;
        snprintf(seen->what, sizeof seen->what, "dualpipe-v, pairs on two streams, m %d",
                 pr.size.m);
    }
    return PP_OK;
}

pp_status_t profile_measure_runs(pp_profile_t *p, const pp_job_t *job, pp_executor_fn exec,
                                 int verbose)
{
    spread_seen_t seen = {0.0, ""};
    p->has_runs = 1;
    for (int d = 0; d < N_OF(token_div); d++) {
        pp_prof_size_t z = {0, 0, job->model.layers, 0};
        if (!shrink(job->pipeline.micro_batch_size, job->model.seq_len, token_div[d], &z.batch,
                    &z.seq_len))
            continue;
        PP_CHECK(measure_steps(p, job, exec, z, verbose, &seen));
        PP_CHECK(measure_pair(p, job, exec, z, verbose, &seen));
    }
    profile_calibrate(p);
    if (verbose && seen.what[0])
        fprintf(stderr,
                "# profile: the widest spread of a whole-model run's steps (p10..p90 over the "
                "median): %.1f %% (%s)\n",
                100.0 * seen.worst, seen.what);
    return PP_OK;
}

/* The simulated step of plan under c, ms. */
static pp_status_t sim_step(const pp_plan_t *plan, const pp_cost_model_t *c, double *ms)
{
    pp_timeline_t tl;
    PP_CHECK(simulate_plan(&tl, plan, c));
    *ms = tl.step_ms[0];
    timeline_free(&tl);
    return PP_OK;
}

pp_status_t profile_fit_overlap(const pp_plan_t *plan, const pp_cost_model_t *cm, double ratio,
                                double *overlap)
{
    pp_cost_model_t c = *cm; /* shares cm's arrays: the simulator only reads them */
    double base, t, lo = 0, hi = 1;
    c.overlap = 0;
    PP_CHECK(sim_step(plan, &c, &base));
    *overlap = 0;
    if (!(ratio < 1) || base <= 0) return PP_OK;
    c.overlap = 1;
    PP_CHECK(sim_step(plan, &c, &t));
    if (t >= ratio * base) {
        *overlap = 1;
        return PP_OK;
    }
    for (int it = 0; it < 40; it++) { /* the step falls as the overlap grows */
        c.overlap = 0.5 * (lo + hi);
        PP_CHECK(sim_step(plan, &c, &t));
        if (t > ratio * base)
            lo = c.overlap;
        else
            hi = c.overlap;
    }
    *overlap = 0.5 * (lo + hi);
    return PP_OK;
}
