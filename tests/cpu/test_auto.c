/*
 * test_auto.c — the `auto` schedule kind (gen_auto.c): every order it builds is complete, valid,
 * lowers without deadlock and keeps at most `limit` micro-batches in flight per stage; with
 * uniform costs it matches ZB-H1's makespan; under non-uniform costs (last stage 20% slower, W
 * half of B) the simulator runs it no slower than ZB-H1 and the difference is printed (the figure
 * docs/schedule-format.md quotes); the pick among the rows is the serial one, with any number of
 * threads. Costs are hand-set arrays; no model is involved.
 */
#include "tests/check.h"
#include "schedule/gen_auto.h"
#include "schedule/generate.h"
#include "sim/simulate.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* Simulated step of `s` (p devices = stages) under per-stage costs; -1 on any failure. */
static double step_of(const pp_schedule_t *s, int p, int m, const double *f, const double *i,
                      const double *w, double send)
{
    pp_job_t cfg;
    pp_plan_t plan;
    pp_cost_model_t cm;
    pp_timeline_t tl;
    double ms = -1;
    ts_config_pipeline(&cfg, PP_SCHED_AUTO, p, p, m);
    cfg.pipeline.transport = PP_TRANSPORT_PEER;
    if (schedule_validate(s) != PP_OK || plan_lower(&plan, s, &cfg) != PP_OK) return -1;
    pp_job_cost_t zero = {0};
    if (plan_validate(&plan) == PP_OK && cost_model_uniform(&cm, p, &zero) == PP_OK) {
        for (int k = 0; k < p; k++) {
            cm.f[k] = f[k];
            cm.i[k] = i[k];
            cm.w[k] = w[k];
            cm.b[k] = i[k] + w[k];
        }
        cm.send = send;
        if (simulate_plan(&tl, &plan, &cm) == PP_OK) {
            ms = tl.step_ms[0];
            timeline_free(&tl);
        }
        cost_model_free(&cm);
    }
    plan_free(&plan);
    return ms;
}

/* Most micro-batches of stage s whose F ran and whose W did not, along its program. */
static int peak_inflight(const pp_schedule_t *s, int st)
{
    int now = 0, peak = 0;
    const pp_program_t *pr = &s->prog[st];
    for (int k = 0; k < pr->n; k++) {
        if (pr->a[k].kind == PP_ACT_F && ++now > peak) peak = now;
        if (pr->a[k].kind == PP_ACT_W) now--;
    }
    return peak;
}

/* Valid, complete, within the in-flight limit, for random sizes, costs and limits. */
static void test_auto_valid(void)
{
    for (int t = 0; t < 60; t++) {
        int p = ts_rand_int(1, 8), m = ts_rand_int(1, 24), limit = ts_rand_int(1, p + 2);
        double f[8], i[8], w[8];
        for (int k = 0; k < p; k++) {
            f[k] = ts_rand_uniform(0.5, 2);
            i[k] = ts_rand_uniform(0.5, 2);
            w[k] = ts_rand_uniform(0.2, 2);
        }
        pp_auto_costs_t c = {f, i, w, ts_rand_uniform(0, 0.3), limit};
        pp_schedule_t s;
        REQUIRE(generate_auto(&s, p, m, &c, NULL) == PP_OK, "p %d m %d limit %d", p, m, limit);
        for (int d = 0; d < p; d++) {
            EXPECT(s.prog[d].n == 3 * m, "p %d m %d: device %d has %d ops", p, m, d, s.prog[d].n);
            EXPECT(peak_inflight(&s, d) <= limit, "p %d m %d limit %d: stage %d holds %d", p, m,
                   limit, d, peak_inflight(&s, d));
        }
        EXPECT(step_of(&s, p, m, f, i, w, c.send) > 0, "p %d m %d limit %d: not runnable", p, m,
               limit);
        schedule_free(&s);
    }
}

/* Uniform F = I = W: ZB-H1's makespan, m + (p-1)/3 units of F+I+W, for m >= p. */
static void test_auto_uniform(void)
{
    double one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int p = 1; p <= 8; p++) {
        int m = 2 * p;
        pp_auto_costs_t c = {one, one, one, 0, p};
        pp_job_t cfg;
        ts_config_pipeline(&cfg, PP_SCHED_AUTO, p, p, m);
        cfg.pipeline.transport = PP_TRANSPORT_PEER;
        pp_schedule_t a, z;
        REQUIRE(generate_auto(&a, p, m, &c, &cfg) == PP_OK);
        REQUIRE(generate_zbh1(&z, p, m) == PP_OK);
        double ta = step_of(&a, p, m, one, one, one, 0), tz = step_of(&z, p, m, one, one, one, 0);
        EXPECT(ta > 0 && ta <= tz + 1e-9, "p %d: auto %.3f, zb-h1 %.3f", p, ta, tz);
        schedule_free(&a);
        schedule_free(&z);
    }
}

/* Last stage 20% slower, W half of B (I = W = F; then I = 1.5 F, W = F as the model prices the
 * reference stage): auto against ZB-H1, same memory limit (p). */
static void test_auto_against_zbh1(void)
{
    static const int ps[] = {4, 8}, ms[] = {8, 32};
    for (int x = 0; x < 8; x++) {
        int p = ps[x & 1], m = ms[(x >> 1) & 1];
        double f[8], i[8], w[8], ri = x & 4 ? 1.5 : 1.0;
        for (int k = 0; k < p; k++) {
            f[k] = w[k] = k == p - 1 ? 1.2 : 1.0;
            i[k] = ri * f[k];
        }
        pp_auto_costs_t c = {f, i, w, 0.0, p};
        pp_job_t cfg;
        ts_config_pipeline(&cfg, PP_SCHED_AUTO, p, p, m);
        cfg.pipeline.transport = PP_TRANSPORT_PEER;
        pp_schedule_t a, z;
        REQUIRE(generate_auto(&a, p, m, &c, &cfg) == PP_OK);
        REQUIRE(generate_zbh1(&z, p, m) == PP_OK);
        double ta = step_of(&a, p, m, f, i, w, 0), tz = step_of(&z, p, m, f, i, w, 0);
        EXPECT(ta > 0 && ta <= tz + 1e-9, "p %d m %d: auto %.3f, zb-h1 %.3f", p, m, ta, tz);
        printf("  p %d m %2d, last stage +20%%, I = %.1f F, W = F: auto %.2f, zb-h1 %.2f units "
               "(%+.1f%%)\n",
               p, m, ri, ta, tz, 100.0 * (ta - tz) / tz);
        schedule_free(&a);
        schedule_free(&z);
    }
}

/* 1 when a and b hold the same programs, action for action. */
static int same_order(const pp_schedule_t *a, const pp_schedule_t *b)
{
    for (int d = 0; d < a->n_devices; d++) {
        if (a->prog[d].n != b->prog[d].n) return 0;
        for (int j = 0; j < a->prog[d].n; j++)
            if (a->prog[d].a[j].kind != b->prog[d].a[j].kind ||
                a->prog[d].a[j].mb != b->prog[d].a[j].mb)
                return 0;
    }
    return a->n_devices == b->n_devices;
}

/* The choice generate_auto makes, with 1, 2 and 8 threads, is the one of scoring every row in
 * full in row order (replace the best when lower by more than 1e-9); every row's greedy span is
 * at most its simulated step (the bound that lets rows go unscored). */
static void test_auto_choice(void)
{
    for (int t = 0; t < 40; t++) {
        int p = ts_rand_int(1, 8), m = ts_rand_int(1, 24);
        double f[8], i[8], w[8], best = INFINITY;
        for (int k = 0; k < p; k++) {
            f[k] = ts_rand_uniform(0.5, 2);
            i[k] = ts_rand_uniform(0.5, 2);
            w[k] = ts_rand_uniform(0.2, 2);
        }
        pp_auto_costs_t c = {f, i, w, ts_rand_uniform(0, 0.3), ts_rand_int(1, p + 2)};
        pp_job_t cfg;
        ts_config_pipeline(&cfg, PP_SCHED_AUTO, p, p, m);
        cfg.pipeline.transport = PP_TRANSPORT_PEER;
        pp_auto_cand_t k[AUTO_ROWS], *win = NULL;
        for (int v = 0; v < AUTO_ROWS; v++) {
            memset(&k[v], 0, sizeof k[v]);
            REQUIRE(auto_build(&k[v], v, p, m, &c) == PP_OK, "row %d", v);
            k[v].score = step_of(&k[v].order, p, m, f, i, w, c.send);
            EXPECT(k[v].score > 0 && k[v].span <= k[v].score,
                   "p %d m %d row %d: span %.17g > %.17g", p, m, v, k[v].span, k[v].score);
            if (k[v].score < best - 1e-9) best = k[v].score, win = &k[v];
        }
        for (int x = 0; x < 3; x++) {
            const char *env = x == 0 ? "1" : x == 1 ? "2" : "8";
            setenv("PPSCHED_THREADS", env, 1);
            pp_schedule_t a;
            REQUIRE(generate_auto(&a, p, m, &c, &cfg) == PP_OK);
            EXPECT(same_order(&a, &win->order), "p %d m %d, %s threads: not the serial choice", p,
                   m, env);
            schedule_free(&a);
        }
        unsetenv("PPSCHED_THREADS");
        for (int v = 0; v < AUTO_ROWS; v++)
            schedule_free(&k[v].order);
    }
}

/* PPSCHED_THREADS that is not a whole number of 1 or more is refused, the value named. */
static void test_auto_threads_env(void)
{
    double one[2] = {1, 1};
    pp_auto_costs_t c = {one, one, one, 0, 2};
    const char *bad[] = {"0", "2x"};
    for (int x = 0; x < 2; x++) {
        pp_schedule_t s;
        setenv("PPSCHED_THREADS", bad[x], 1);
        EXPECT(generate_auto(&s, 2, 4, &c, NULL) == PP_ERR_INPUT, "PPSCHED_THREADS=%s", bad[x]);
    }
    unsetenv("PPSCHED_THREADS");
}

int main(void)
{
    ts_rng_seed(11);
    RUN(test_auto_valid);
    RUN(test_auto_uniform);
    RUN(test_auto_against_zbh1);
    RUN(test_auto_choice);
    RUN(test_auto_threads_env);
    return check_summary("test_auto");
}
