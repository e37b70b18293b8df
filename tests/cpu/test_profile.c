/*
 * test_profile.c — a profile's measured steps and pairs (profile.h): the step factor and the pair
 * overlap against hand computations, what the cost model makes of them, the file round trip, an
 * old profile without them, and every problem of a bad row named with file:line:col.
 *
 * The steps are made as the passes' prediction (profile_step_predicted_ms) times known factors,
 * so the factors must come back exactly; interpolation is checked at points worked out by hand
 * (log m and log elements: midpoints of a log scale give the mean). The simulator's 1F1B step on
 * one device with the profile must be the prediction times the factor. The runs `ppsched profile`
 * makes go through the chain with a simulated executor that runs every op a known factor slower
 * and overlaps pairs by a known share: both must come back from the measurement.
 */
#include "model/cost.h"
#include "sim/cost_model.h"
#include "model/profile.h"
#include "run/profile_run.h"
#include "run/run.h"
#include "sim/simulate.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const double ones[PP_PASS_COUNT][PP_PART_COUNT] = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};

/* Reference sizes a micro-batch (4 x 1024 tokens) and a sixteenth of it (1 x 256), m 8 and 32,
 * whole model (24 blocks); steps at the passes' prediction times f[k]; pairs at two sizes. */
static void profile_with_runs(pp_profile_t *p, const double f[4])
{
    const pp_prof_size_t z[4] = {
        {4, 1024, 24, 8}, {4, 1024, 24, 32}, {1, 256, 24, 8}, {1, 256, 24, 32}};
    ts_profile_fake(p, ones);
    profile_calibrate(p);
    p->has_runs = 1;
    p->n_steps = 4;
    for (int k = 0; k < 4; k++) {
        p->steps[k].size = z[k];
        const double head = profile_step_head_ms(p, &z[k]); /* no factor scales it */
        p->steps[k].ms = f[k] * (profile_step_predicted_ms(p, &z[k]) - head) + head;
    }
    p->n_pairs = 2;
    p->pairs[0] = (pp_prof_pair_t){{4, 1024, 24, 8}, 160.0, 158.0, 0.05};
    p->pairs[1] = (pp_prof_pair_t){{1, 256, 24, 8}, 12.0, 10.0, 0.45};
    profile_calibrate(p);
}

static void test_step_factor(void)
{
    const double f[4] = {1.07, 1.10, 0.95, 0.97};
    pp_profile_t p;
    profile_with_runs(&p, f);
    for (int k = 0; k < 4; k++)
        EXPECT_NEAR(p.step_factor[k], f[k], 0, 1e-12);
    const double big = 4.0 * 1024 * 1024, small = 256.0 * 1024;
    /* the factor is the profiled micro-batch's (4 x 1024 tokens) at every size: exact at its m,
     * m 16 the log midpoint of 8 and 32, flat outside */
    EXPECT_NEAR(profile_step_factor(&p, big, 8), 1.07, 0, 1e-12);
    EXPECT_NEAR(profile_step_factor(&p, big, 16), (1.07 + 1.10) / 2, 0, 1e-12);
    EXPECT_NEAR(profile_step_factor(&p, big, 1), 1.07, 0, 1e-12);
    EXPECT_NEAR(profile_step_factor(&p, big, 1024), 1.10, 0, 1e-12);
    /* the steps at other sizes are not interpolated */
    EXPECT_NEAR(profile_step_factor(&p, small, 32), 1.10, 0, 1e-12);
    EXPECT_NEAR(profile_step_factor(&p, small / 64, 8), 1.07, 0, 1e-12);
    EXPECT_NEAR(profile_step_factor(&p, 64.0 * big, 16), (1.07 + 1.10) / 2, 0, 1e-12);
    /* without a step at the profiled micro-batch: 1 */
    pp_profile_t o = p;
    o.steps[0].size.batch = o.steps[1].size.batch = 2;
    profile_calibrate(&o);
    EXPECT(profile_step_factor(&o, big, 8) == 1.0);
    /* no steps: 1 */
    pp_profile_t q;
    ts_profile_fake(&q, ones);
    profile_calibrate(&q);
    EXPECT(profile_step_factor(&q, big, 8) == 1.0);
    double ov = -1;
    EXPECT(profile_overlap(&q, big, &ov) == 0 && ov == -1);
}

static void test_overlap_curve(void)
{
    const double f[4] = {1, 1, 1, 1};
    pp_profile_t p;
    profile_with_runs(&p, f);
    double ov;
    REQUIRE(profile_overlap(&p, 4.0 * 1024 * 1024, &ov) == 1);
    EXPECT_NEAR(ov, 0.05, 0, 1e-12);
    REQUIRE(profile_overlap(&p, 1024.0 * 1024, &ov) == 1);
    EXPECT_NEAR(ov, 0.25, 0, 1e-12); /* log midpoint */
    REQUIRE(profile_overlap(&p, 16.0, &ov) == 1);
    EXPECT_NEAR(ov, 0.45, 0, 1e-12);
    /* the GPU description's curve: its two points, the log midpoint, flat outside */
    const pp_gpu_t *g = gpu_find("h100");
    double a = g->overlap_elements[0], b = g->overlap_elements[1];
    EXPECT_NEAR(gpu_overlap(g, a), g->overlap[0], 0, 1e-12);
    EXPECT_NEAR(gpu_overlap(g, b), g->overlap[1], 0, 1e-12);
    EXPECT_NEAR(gpu_overlap(g, sqrt(a * b)), (g->overlap[0] + g->overlap[1]) / 2, 0, 1e-12);
    EXPECT_NEAR(gpu_overlap(g, a / 10), g->overlap[0], 0, 1e-12);
    EXPECT_NEAR(gpu_overlap(g, b * 10), g->overlap[1], 0, 1e-12);
    EXPECT(g->overlap[0] >= g->overlap[1] && g->overlap[1] >= 0 && g->overlap[0] <= 1);
}

/* Write p to a temporary file; its name into path (size >= 32). */
static int write_tmp(const pp_profile_t *p, char *path)
{
    strcpy(path, "/tmp/ppsched_prof_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    pp_status_t st = profile_write(p, f);
    fclose(f);
    return st == PP_OK ? 0 : -1;
}

/* A one-device run of `kind` with the profile at `path`, simulated: its cost model and step. */
static int sim_run(pp_run_t *r, const char *kind, const char *path, const char *extra)
{
    char set_prof[96], set_kind[64];
    snprintf(set_prof, sizeof set_prof, "cost.profile=%s", path);
    snprintf(set_kind, sizeof set_kind, "schedule.kind=%s", kind);
    const char *sets[] = {set_prof, set_kind, extra ? extra : "run.steps=1"};
    const char *yaml = "pipeline: {devices: 1, micro_batches: 16, micro_batch_size: 2}\n";
    if (run_load(r, "t.yaml", yaml, sets, 3, 0) != PP_OK) return -1;
    pp_run_opts_t o = {0};
    return run_go(r, &o) == PP_OK ? 0 : -1;
}

/* The step factor's excess scales with the share of a block's time above the launch floor. */
static void test_step_factor_scaling(void)
{
    pp_profile_t p;
    ts_profile_fake(&p, ones);
    profile_calibrate(&p);
    pp_gpu_t g = *profile_gpu(&p);
    pp_model_shape_t big = p.shape, tiny = p.shape;
    big.hidden = 8192, big.heads = 64, big.batch = 16;
    tiny.hidden = 64, tiny.heads = 1, tiny.seq_len = 64, tiny.batch = 1;
    const double f = 1.1;
    /* larger than the profiled shape: the whole factor, never more */
    EXPECT_NEAR(cost_scaled_step_factor(f, &big, PP_DTYPE_BF16, &g, &p), f, 0, 1e-12);
    EXPECT_NEAR(cost_scaled_step_factor(f, &p.shape, PP_DTYPE_BF16, &g, &p), f, 0, 1e-12);
    /* a shape whose kernels all sit at the floor keeps (almost) nothing of it */
    double share = cost_busy_share(&tiny, PP_DTYPE_BF16, &g);
    EXPECT(share >= 0 && share < 0.05, "%g", share);
    double own = cost_busy_share(&p.shape, PP_DTYPE_BF16, &g);
    EXPECT_NEAR(cost_scaled_step_factor(f, &tiny, PP_DTYPE_BF16, &g, &p),
                1.0 + (f - 1.0) * share / own, 0, 1e-12);
    /* no launch cost: every kernel is above the floor, the whole factor everywhere */
    g.launch_us = 0;
    EXPECT_NEAR(cost_busy_share(&tiny, PP_DTYPE_BF16, &g), 1.0, 0, 1e-12);
    EXPECT_NEAR(cost_scaled_step_factor(f, &tiny, PP_DTYPE_BF16, &g, &p), f, 0, 1e-12);
    /* without a profile the factor is left as it is */
    EXPECT(cost_scaled_step_factor(f, &tiny, PP_DTYPE_BF16, &g, NULL) == f);
}

static void test_model_applies(void)
{
    const double f[4] = {1.07, 1.10, 0.95, 0.97};
    pp_profile_t p;
    char path[32];
    profile_with_runs(&p, f);
    REQUIRE(write_tmp(&p, path) == 0);
    /* 1F1B on one device: m x (F + I + W) of the whole model, times the profiled micro-batch's
     * factor at m 16 (the log midpoint of its m 8 and 32), at 2 x 1024 tokens too, and the
     * stage's gradients zeroed first, which no factor scales */
    pp_run_t r;
    REQUIRE(sim_run(&r, "1f1b", path, NULL) == 0);
    pp_prof_size_t z = {2, 1024, 24, 16};
    pp_model_shape_t sh = p.shape;
    sh.batch = 2;
    double k = cost_scaled_step_factor((1.07 + 1.10) / 2, &sh, PP_DTYPE_BF16, profile_gpu(&p), &p);
    EXPECT(k > 1.0 && k < (1.07 + 1.10) / 2, "%g",
           k); /* half the tokens: a little less above the floor */
    pp_stage_cfg_t c;
    job_stage_cfg(&c, &r.job);
    c.n_layers = 24, c.is_first = c.is_last = 1;
    double head, tail;
    cost_stage_tail(&c, profile_gpu(&p), &head, &tail);
    EXPECT(head > 0 && tail == 0, "head %g, tail %g (no optimizer)", head, tail);
    EXPECT_NEAR(profile_step_head_ms(&p, &z), head, 0, 1e-12);
    double want = k * (profile_step_predicted_ms(&p, &z) - head) + head;
    EXPECT_NEAR(r.predicted_ms, want, 0, 1e-5); /* the file keeps 6 digits */
    EXPECT(strstr(r.cost_desc, "step factor 1.085 (its measured steps, scaled"), "%s", r.cost_desc);
    EXPECT(!strstr(r.cost_desc, "pair overlap"), "%s", r.cost_desc);
    run_free(&r);
    /* DualPipeV: the profile's overlap at 2 x 1024 tokens (0.05 + 0.75 x 0.4 down), unless set */
    REQUIRE(sim_run(&r, "dualpipe-v", path, NULL) == 0);
    EXPECT_NEAR(r.cost.overlap, 0.45 + 0.75 * (0.05 - 0.45), 0, 1e-12);
    EXPECT(strstr(r.cost_desc, "pair overlap 0.15 (profile)"), "%s", r.cost_desc);
    run_free(&r);
    REQUIRE(sim_run(&r, "dualpipe-v", path, "cost.overlap=0.3") == 0);
    EXPECT(r.cost.overlap == 0.3 && strstr(r.cost_desc, "pair overlap 0.30 (cost.overlap)"));
    run_free(&r);
    unlink(path);
}

static void test_round_trip(void)
{
    const double f[4] = {1.07, 1.10, 0.95, 0.97};
    pp_profile_t a, b;
    char path[32];
    profile_with_runs(&a, f);
    REQUIRE(write_tmp(&a, path) == 0);
    REQUIRE(profile_load(&b, path) == PP_OK);
    EXPECT(b.has_runs == 1 && b.n_steps == 4 && b.n_pairs == 2);
    for (int k = 0; k < 4; k++) {
        EXPECT(memcmp(&b.steps[k].size, &a.steps[k].size, sizeof a.steps[k].size) == 0);
        EXPECT_NEAR(b.steps[k].ms, a.steps[k].ms, 0, 1e-5);
        EXPECT_NEAR(b.step_factor[k], f[k], 0, 1e-5);
    }
    EXPECT(b.pairs[1].size.batch == 1 && b.pairs[1].size.seq_len == 256);
    EXPECT(b.pairs[1].serial_ms == 12 && b.pairs[1].overlapped_ms == 10 &&
           b.pairs[1].overlap == 0.45);
    /* the summary lists the steps against the passes and the pairs */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    profile_print_summary(&b, mf);
    fclose(mf);
    EXPECT(strstr(buf, "#   step   24 blocks, micro-batch 4 x 1024 tokens, m 32: ") &&
               strstr(buf, "factor 1.100\n") &&
               strstr(buf, "on one stream, 10.00 on two: overlap 0.45\n"),
           "%s", buf);
    free(buf);
    unlink(path);
}

/* A profile from before steps and pairs (version 1): loads, factor 1, the GPU's overlap, and a
 * note. */
static void test_old_profile(void)
{
    pp_profile_t a, b;
    char path[32];
    ts_profile_fake(&a, ones);
    REQUIRE(write_tmp(&a, path) == 0);
    /* drop the two lists the writer adds, and name the version that had none */
    FILE *f = fopen(path, "r");
    char text[4096] = "", line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "ppsched:", 8))
            strcat(text, "ppsched: profile 1\n");
        else if (strncmp(line, "steps:", 6) && strncmp(line, "pairs:", 6))
            strcat(text, line);
    fclose(f);
    f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    ts_capture_begin();
    pp_status_t st = profile_load(&b, path);
    const char *got = ts_capture_end();
    REQUIRE(st == PP_OK);
    EXPECT(strstr(got, ": note: this profile predates the measured steps and pairs") &&
               strstr(got, "step factor 1, pair overlap from the h200 description"),
           "%s", got);
    EXPECT(b.has_runs == 0 && profile_step_factor(&b, 4e6, 8) == 1.0);
    pp_run_t r;
    ts_capture_begin();
    int rc = sim_run(&r, "dualpipe-v", path, NULL);
    ts_capture_end();
    REQUIRE(rc == 0);
    EXPECT(strstr(r.cost_desc, "(it predates measured steps: step factor 1)") &&
               strstr(r.cost_desc, "(h200 description)"),
           "%s", r.cost_desc);
    EXPECT_NEAR(r.cost.overlap, gpu_overlap(gpu_find("h200"), 2.0 * 1024 * 1024), 0, 1e-12);
    run_free(&r);
    unlink(path);
}

/* `text` appended to a good profile is rejected with `want` in the message. */
static void expect_bad(const char *text, const char *want)
{
    pp_profile_t a, b;
    char path[32];
    ts_profile_fake(&a, ones);
    REQUIRE(write_tmp(&a, path) == 0);
    FILE *f = fopen(path, "r");
    char all[4096] = "", line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "steps:", 6) && strncmp(line, "pairs:", 6)) strcat(all, line);
    fclose(f);
    f = fopen(path, "w");
    fputs(all, f);
    fputs(text, f);
    fclose(f);
    ts_capture_begin();
    pp_status_t st = profile_load(&b, path);
    const char *got = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && strstr(got, path) && strstr(got, want), "%s", got);
    unlink(path);
}

static void test_bad_rows(void)
{
    /* the lines before: the header comment (3), then 14 lines of a fake profile with two sends */
    expect_bad("steps:\n"
               "  - {micro_batch_size: 4, seq_len: 1024, layers: 24, micro_batches: 8, ms: 160}\n"
               "  - {micro_batch_size: 4, seq_len: 1024, layers: 24, micro_batches: 32}\n"
               "pairs: []\n",
               ":20:5: steps[1]: ms is missing (allowed: micro_batch_size, seq_len, layers, "
               "micro_batches, ms)");
    expect_bad("steps: []\n"
               "pairs:\n"
               "  - {micro_batch_size: 1, seq_len: 256, layers: 24, micro_batches: 2.5, "
               "serial_ms: 1, overlapped_ms: 1, overlap: 0}\n",
               ":20:68: micro_batches: 2.5 is not a whole number (allowed: a whole number "
               "1..100000000)");
    expect_bad("steps: []\n"
               "pairs:\n"
               "  - {micro_batch_size: 1, seq_len: 256, layers: 24, micro_batches: 8, "
               "serial_ms: 1, overlapped_ms: 1, overlap: 1.5}\n",
               ": overlap: 1.5 is out of range (allowed: 0 to 1)");
    expect_bad("steps:\n  - {ms: fast}\npairs: []\n",
               ":19:10: ms: expected a number (allowed: a number 0..1e9 (ms))");
    expect_bad("steps: []\npairs:\n  - {speed: 3}\n",
               ":20:6: unknown key 'speed' in pairs[0] (allowed: micro_batch_size, seq_len, "
               "layers, micro_batches, serial_ms, overlapped_ms, overlap)");
    expect_bad("steps: {ms: 3}\npairs: []\n",
               ":18:8: steps: expected a list (allowed: a list of {micro_batch_size");
    expect_bad("steps: []\n", ":4:1: pairs is missing (allowed: profile 2 has every one of ");
}

/* ---- the runs, with a simulated executor ------------------------------------------------------
 */

static pp_profile_t truth; /* the passes the simulated executor prices with */
static int exec_calls;     /* runs it made */
static int exec_refuse_m;  /* it refuses runs of this m as not fitting (0: none) */
static const double true_factor = 1.08, true_overlap = 0.3;

static pp_status_t sim_exec(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                            const pp_job_t *cfg, const pp_exec_opts_t *opts)
{
    pp_cost_model_t cm;
    exec_calls++;
    if (plan->n_mb == exec_refuse_m) return PP_ERR_DEVICE;
    PP_CHECK(cost_model_build(&cm, cfg, plan, NULL, &truth, NULL));
    for (int s = 0; s < cm.n_stages; s++) {
        cm.f[s] *= true_factor, cm.b[s] *= true_factor;
        cm.i[s] *= true_factor, cm.w[s] *= true_factor;
    }
    cm.overlap = opts->serial_pairs ? 0.0 : true_overlap;
    pp_status_t st = simulate_plan(tl, plan, &cm);
    cost_model_free(&cm);
    return st;
}

static void test_measure_runs(void)
{
    pp_job_t cfg;
    REQUIRE(ts_load_job(&cfg, "pipeline: {devices: [3]}\n", NULL, 0, -1) == PP_OK);
    pp_profile_t p;
    ts_profile_fake(&p, ones);
    profile_calibrate(&p);
    truth = p;
    exec_calls = 0, exec_refuse_m = 0;
    ts_capture_begin();
    pp_status_t said = profile_measure_runs(&p, &cfg, sim_exec, 1);
    const char *lines = ts_capture_end();
    REQUIRE(said == PP_OK);
    /* each whole-model run says its steps' spread, and the widest comes last (one timed step of a
     * simulation: none) */
    EXPECT(strstr(lines, "1f1b of 24 blocks, micro-batch 4 x 1024, m 8: ") &&
               strstr(lines, " ms a step (p10..p90 spread 0.0 %)") &&
               strstr(lines, "pairs on two streams: ") &&
               strstr(lines, "# profile: the widest spread of a whole-model run's steps (p10..p90 "
                             "over the median): 0.0 % ("),
           "%s", lines);
    /* 4 x 1024 tokens, then a quarter (1 x 1024) and a sixteenth (1 x 256): 1F1B at m 8 and 32,
     * DualPipeV on one stream and on two */
    EXPECT(exec_calls == 12 && p.has_runs && p.n_steps == 6 && p.n_pairs == 3, "%d %d %d",
           exec_calls, p.n_steps, p.n_pairs);
    const int sizes[3][2] = {{4, 1024}, {1, 1024}, {1, 256}};
    for (int k = 0; k < p.n_steps; k++) {
        const pp_prof_size_t *z = &p.steps[k].size;
        EXPECT(z->batch == sizes[k / 2][0] && z->seq_len == sizes[k / 2][1] && z->layers == 24 &&
               z->m == (k % 2 ? 32 : 8));
        EXPECT_NEAR(p.step_factor[k], true_factor, 0, 1e-12);
    }
    /* the fit prices the runs with the profile's step factor, which below the profiled size the
     * model scales down (cost_scaled_step_factor) where the simulated executor took the whole; the
     * stage's zeroing, which no factor scales, makes the pairs' ratio feel that: exact at the
     * profiled size, within 0.1 % below it */
    for (int k = 0; k < p.n_pairs; k++) {
        EXPECT(p.pairs[k].size.batch == sizes[k][0] && p.pairs[k].size.m == 8);
        EXPECT(p.pairs[k].overlapped_ms < p.pairs[k].serial_ms);
        EXPECT_NEAR(p.pairs[k].overlap, true_overlap, k == 0 ? 1e-9 : 1e-3, 0);
    }
    /* a run that does not fit is left out with a note; a micro-batch that cannot shrink (one
     * sequence of 64 tokens) is measured at its own size only */
    const char *sets[] = {"pipeline.micro_batch_size=1", "model.seq_len=64", "model.layers=3"};
    job_free(&cfg);
    REQUIRE(ts_load_job(&cfg, "pipeline: {devices: [0]}\n", sets, 3, -1) == PP_OK);
    ts_profile_fake(&p, ones);
    profile_calibrate(&p);
    truth = p;
    exec_calls = 0, exec_refuse_m = 32;
    ts_capture_begin();
    pp_status_t st = profile_measure_runs(&p, &cfg, sim_exec, 0);
    const char *got = ts_capture_end();
    REQUIRE(st == PP_OK);
    EXPECT(exec_calls == 4 && p.n_steps == 1 && p.n_pairs == 1, "%d %d %d", exec_calls, p.n_steps,
           p.n_pairs);
    EXPECT(p.pairs[0].size.layers == 2 && p.steps[0].size.layers == 3); /* two chunks */
    EXPECT(strstr(got, "# profile: 1f1b of 3 blocks, micro-batch 1 x 64, m 32 did not run: left "
                       "out\n"),
           "%s", got);
    job_free(&cfg);
}

int main(void)
{
    ts_rng_seed(0x9f0f11e);
    RUN(test_old_profile); /* first: the note is printed once a process */
    RUN(test_step_factor);
    RUN(test_overlap_curve);
    RUN(test_step_factor_scaling);
    RUN(test_model_applies);
    RUN(test_round_trip);
    RUN(test_bad_rows);
    RUN(test_measure_runs);
    return check_summary("test_profile");
}
