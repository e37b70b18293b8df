/*
 * test_report.c — metrics and output forms of the report on hand-built plans and timelines.
 *
 * Busy time as a union of intervals (checked against a brute-force count over a grid), in-flight
 * counts, percentiles, closed forms, and the outputs: the JSON (textcheck.h's recursive-descent
 * checker validates it and records the keys in order), the Chrome trace (valid JSON, one complete
 * event per op and per idle stretch, one flow start and end per SEND) and the SVG (textcheck.h's
 * XML well-formedness checker also counts the boxes of compute ops). The explanation's own fields
 * are tested in test_report_explain.c. Times are drawn from a seeded generator.
 */
#include "report/report.h"
#include "schedule/generate.h"
#include "sim/simulate.h"
#include "tests/check.h"
#include "support.h"
#include "textcheck.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- hand-built plan + timeline (support.h), each op with its times ------------------------ */

/* A compute op over [start, end]; returns its index. */
static int tp_compute(ts_plan_t *x, int dev, pp_action_kind_t kind, int stage, int mb, double start,
                      double end)
{
    return ts_plan_time(x, ts_plan_compute(x, dev, kind, stage, mb, -1, -1), start, end);
}

/* A SEND on src and its RECV on dst (of the next stage for SEND_F, the previous for SEND_B), both
 * over [start, end]. */
static void tp_transfer(ts_plan_t *x, int src, int dst, pp_action_kind_t send_kind, int stage,
                        int mb, pp_transport_t link, size_t bytes, double start, double end)
{
    int peer_stage = send_kind == PP_ACT_SEND_F ? stage + 1 : stage - 1;
    int r = ts_plan_transfer(x, src, dst, send_kind, stage, peer_stage, mb, link, bytes, -1);
    ts_plan_time(x, r - 1, start, end);
    ts_plan_time(x, r, start, end);
}

/* A small 2-device, 2-micro-batch 1F1B-like run with transfers, times scaled by `u`. */
static void tp_small(ts_plan_t *x, double u, int *n_sends)
{
    ts_plan_init(x, 2, 2, 2, PP_SCHED_1F1B);
    for (int k = 0; k < 2; k++) {
        double o = 4 * k * u;
        tp_compute(x, 0, PP_ACT_F, 0, k, o, o + u);
        tp_transfer(x, 0, 1, PP_ACT_SEND_F, 0, k, PP_TRANSPORT_PEER, 1 << 20, o + u, o + 1.2 * u);
        tp_compute(x, 1, PP_ACT_F, 1, k, o + 1.2 * u, o + 2.2 * u);
        tp_compute(x, 1, PP_ACT_B, 1, k, o + 2.2 * u, o + 3.2 * u);
        tp_transfer(x, 1, 0, PP_ACT_SEND_B, 1, k, PP_TRANSPORT_PEER, 1 << 20, o + 3.2 * u,
                    o + 3.4 * u);
        tp_compute(x, 0, PP_ACT_B, 0, k, o + 3.4 * u, o + 4.4 * u);
    }
    *n_sends = 4;
}

static char *print_json(const pp_report_t *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_print_json(r, f);
    fclose(f);
    return buf;
}

static char *print_table(const pp_report_t *r, const pp_job_t *cfg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_print_table(r, cfg, f);
    fclose(f);
    return buf;
}

/* ---- tests: metrics -------------------------------------------------------------------------- */

/* Overlapping compute ops count once; transfers do not count; makespan spans every stream. */
static void test_busy_union_of_intervals(void)
{
    double u = ts_rand_uniform(0.5, 3), o = ts_rand_uniform(0, 10);
    ts_plan_t x;
    ts_plan_init(&x, 2, 2, 3, PP_SCHED_STEPS);
    tp_compute(&x, 0, PP_ACT_F, 0, 0, o + 0 * u, o + 2 * u);
    tp_compute(&x, 0, PP_ACT_B, 0, 1, o + 1 * u, o + 3 * u);     /* overlaps the first */
    tp_compute(&x, 0, PP_ACT_F, 0, 2, o + 1.5 * u, o + 2.5 * u); /* inside both */
    tp_compute(&x, 0, PP_ACT_W, 0, 2, o + 5 * u, o + 6 * u);
    tp_transfer(&x, 0, 1, PP_ACT_SEND_F, 0, 0, PP_TRANSPORT_PEER, 3000, o + 3 * u, o + 5 * u);
    tp_transfer(&x, 0, 1, PP_ACT_SEND_F, 0, 1, PP_TRANSPORT_LOCAL, 7000, o + 3 * u, o + 3 * u);
    tp_transfer(&x, 1, 0, PP_ACT_SEND_B, 1, 1, PP_TRANSPORT_NCCL, 500, o + 5 * u, o + 5.5 * u);
    tp_compute(&x, 1, PP_ACT_F, 1, 0, o + 0 * u, o + 1 * u);
    pp_timeline_t tl;
    pp_report_t r;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_MEASURE, NULL, 0) == PP_OK);
    REQUIRE(report_build(&r, NULL, &x.pl, &tl, NULL) == PP_OK);
    EXPECT(r.devices == 2 && r.stages == 2 && r.micro_batches == 3 && r.mode == PP_MODE_MEASURE);
    EXPECT_NEAR(r.per_device[0].busy_ms, 4 * u, 1e-12, 1e-12);
    EXPECT_NEAR(r.per_device[1].busy_ms, 1 * u, 1e-12, 1e-12);
    EXPECT_NEAR(r.per_device[0].idle_ms, 2 * u, 1e-12, 1e-12);
    EXPECT_NEAR(r.per_device[1].idle_ms, 5 * u, 1e-12, 1e-12);
    EXPECT_NEAR(r.per_device[0].bubble, 2.0 / 6, 1e-12, 0);
    EXPECT_NEAR(r.per_device[1].bubble, 5.0 / 6, 1e-12, 0);
    EXPECT_NEAR(r.bubble, 1 - 5.0 / 12, 1e-12, 0);
    EXPECT_NEAR(r.bubble_ideal, 7.0 / 5, 1e-12, 0);
    EXPECT_NEAR(r.step_ms, 6 * u, 1e-12, 1e-12);
    EXPECT(r.per_device[0].bytes_sent == 3000, "dev0 sent %g (LOCAL must not count)",
           r.per_device[0].bytes_sent);
    EXPECT(r.per_device[1].bytes_sent == 500);
    EXPECT(isnan(r.bubble_theory) && isnan(r.bubble_simulated) && isnan(r.tokens_per_s));
    EXPECT(r.per_device[0].cuda_device == -1);
    report_free(&r);
    report_free(&r); /* zeroed: safe */
    timeline_free(&tl);
    ts_plan_free(&x);
}

/* Random intervals on a grid, against a brute-force count of covered cells. */
static void test_busy_random_against_grid(void)
{
    for (int trial = 0; trial < 50; trial++) {
        int p = ts_rand_int(1, 4);
        double u = ts_rand_uniform(0.1, 2);
        ts_plan_t x;
        ts_plan_init(&x, p, p, 64, PP_SCHED_STEPS);
        unsigned char cover[4][200];
        memset(cover, 0, sizeof cover);
        int n = ts_rand_int(1, 60);
        for (int k = 0; k < n; k++) {
            int d = ts_rand_int(0, p - 1), a = ts_rand_int(0, 190), len = ts_rand_int(0, 9);
            pp_role_t role = ts_rand_int(0, 3) == 0 ? PP_ROLE_SEND : PP_ROLE_COMPUTE;
            int op = ts_plan_op(&x, d, role, role == PP_ROLE_SEND ? PP_ACT_SEND_F : PP_ACT_F, d,
                                k % 64, NULL, 0);
            ts_plan_time(&x, op, a * u, (a + len) * u);
            if (role == PP_ROLE_COMPUTE)
                for (int c = a; c < a + len; c++)
                    cover[d][c] = 1;
        }
        pp_timeline_t tl;
        pp_report_t r;
        REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
        REQUIRE(report_build(&r, NULL, &x.pl, &tl, NULL) == PP_OK);
        double sum = 0;
        for (int d = 0; d < p; d++) {
            int cells = 0;
            for (int c = 0; c < 200; c++)
                cells += cover[d][c];
            EXPECT_NEAR(r.per_device[d].busy_ms, cells * u, 1e-9, 1e-12);
            sum += cells * u;
        }
        double span = timeline_makespan(&tl);
        if (span > 0) {
            EXPECT_NEAR(r.bubble, 1 - sum / (p * span), 1e-12, 1e-12);
            EXPECT_NEAR(r.bubble_simulated, r.bubble, 0, 0); /* tl is simulated, no sim given */
        }
        report_free(&r);
        timeline_free(&tl);
        ts_plan_free(&x);
    }
}

/* median / p10 / p90 by linear interpolation between closest ranks (numpy's default). */
static void test_step_percentiles(void)
{
    struct {
        int n;
        double v[8];
        double med, p10, p90;
    } cases[] = {
        {5, {5, 1, 4, 2, 3}, 3, 1.4, 4.6},
        {4, {40, 10, 30, 20}, 25, 13, 37},
        {1, {7.25}, 7.25, 7.25, 7.25},
        {2, {2, 1}, 1.5, 1.1, 1.9},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double s = ts_rand_uniform(0.5, 2); /* scale: quantiles are linear */
        double v[8];
        for (int i = 0; i < cases[c].n; i++)
            v[i] = cases[c].v[i] * s;
        int sends;
        ts_plan_t x;
        tp_small(&x, ts_rand_uniform(0.5, 1.5), &sends);
        pp_timeline_t tl;
        pp_report_t r;
        REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_MEASURE, v, cases[c].n) == PP_OK);
        REQUIRE(report_build(&r, NULL, &x.pl, &tl, NULL) == PP_OK);
        EXPECT_NEAR(r.step_ms, cases[c].med * s, 1e-12, 1e-12);
        EXPECT_NEAR(r.step_ms_p10, cases[c].p10 * s, 1e-12, 1e-12);
        EXPECT_NEAR(r.step_ms_p90, cases[c].p90 * s, 1e-12, 1e-12);
        EXPECT(tl.step_ms[0] == v[0], "report_build must not reorder the timeline's steps");
        report_free(&r);
        timeline_free(&tl);
        ts_plan_free(&x);
    }
}

static void test_theory_values(void)
{
    for (int t = 0; t < 20; t++) {
        int p = ts_rand_int(1, 16), m = ts_rand_int(1, 64), v = ts_rand_int(1, 4);
        EXPECT_NEAR(report_bubble_theory(PP_SCHED_GPIPE, p, m, 1), (p - 1.0) / (m + p - 1), 0,
                    1e-15);
        EXPECT_NEAR(report_bubble_theory(PP_SCHED_1F1B, p, m, 1), (p - 1.0) / (m + p - 1), 0,
                    1e-15);
        EXPECT_NEAR(report_bubble_theory(PP_SCHED_INTERLEAVED, p, m, v),
                    (p - 1.0) / (v * m + p - 1), 0, 1e-15);
        EXPECT_NEAR(report_bubble_theory(PP_SCHED_ZBH1, p, m, 1), (p - 1.0) / (3 * m + p - 1), 0,
                    1e-15);
    }
    EXPECT_NEAR(report_bubble_theory(PP_SCHED_1F1B, 4, 16, 1), 3.0 / 19, 0, 1e-15);
    EXPECT_NEAR(report_bubble_theory(PP_SCHED_INTERLEAVED, 4, 8, 2), 3.0 / 19, 0, 1e-15);
    EXPECT_NEAR(report_bubble_theory(PP_SCHED_ZBH1, 4, 8, 1), 3.0 / 27, 0, 1e-15);
    EXPECT(report_bubble_theory(PP_SCHED_GPIPE, 1, 5, 1) == 0.0);
    EXPECT(isnan(report_bubble_theory(PP_SCHED_STEPS, 4, 8, 1)));
    EXPECT(isnan(report_bubble_theory(PP_SCHED_CSV, 4, 8, 1)));
    EXPECT(isnan(report_bubble_theory(PP_SCHED_1F1B, 0, 8, 1)));
}

/* bubble_simulated: from `sim` when given, the same as bubble for a simulated tl, else NAN;
 * tokens/s and TFLOP/s from the config; cuda ids only in measure mode. */
static void test_simulated_and_throughput(void)
{
    int sends;
    double u = ts_rand_uniform(0.5, 1.5);
    ts_plan_t x;
    tp_small(&x, u, &sends);
    ts_plan_t y;
    tp_small(&y, u * ts_rand_uniform(1.1, 1.5), &sends);
    /* Make y's run differ in shape too: device 1 idles longer. */
    y.t[y.pl.n_ops - 1].end_ms += 2 * u;
    pp_timeline_t meas, sim;
    pp_report_t r, rs, ry;
    double steps[3] = {9 * u, 8 * u, 10 * u};
    REQUIRE(ts_plan_timeline(&x, &meas, PP_MODE_MEASURE, steps, 3) == PP_OK);
    REQUIRE(ts_plan_timeline(&y, &sim, PP_MODE_SIMULATE, NULL, 0) == PP_OK);

    pp_job_t cfg;
    ts_job_defaults(&cfg);
    cfg.pipeline.micro_batches = 99; /* not read: the plan's count is the one truth */
    cfg.pipeline.micro_batch_size = ts_rand_int(1, 8);
    cfg.model.seq_len = 128 * ts_rand_int(1, 8);
    cfg.pipeline.device_ids[0] = 3;
    cfg.pipeline.device_ids[1] = 5;
    cfg.kind = PP_SCHED_1F1B;

    REQUIRE(report_build(&r, &cfg, &x.pl, &meas, NULL) == PP_OK);
    EXPECT(isnan(r.bubble_simulated));
    EXPECT(r.per_device[0].cuda_device == 3 && r.per_device[1].cuda_device == 5);
    EXPECT(strcmp(r.schedule, "1f1b") == 0, "schedule '%s'", r.schedule);
    EXPECT_NEAR(r.step_ms, 9 * u, 1e-12, 1e-12);
    REQUIRE(r.micro_batches == x.pl.n_mb);
    EXPECT_NEAR(r.tokens_per_s,
                (double)x.pl.n_mb * cfg.pipeline.micro_batch_size * cfg.model.seq_len /
                    (9 * u / 1000),
                0, 1e-12);
    EXPECT_NEAR(r.tflops, job_flops_per_step(&cfg, r.micro_batches) / (9 * u / 1000) / 1e12, 0,
                1e-12);
    EXPECT_NEAR(r.bubble_theory, 1.0 / 3, 0, 1e-15);
    REQUIRE(report_build(&ry, NULL, &y.pl, &sim, NULL) == PP_OK);
    REQUIRE(report_build(&rs, &cfg, &x.pl, &meas, &sim) == PP_OK);
    EXPECT_NEAR(rs.bubble_simulated, ry.bubble, 0, 1e-15);
    EXPECT(fabs(rs.bubble_simulated - rs.bubble) > 1e-3, "the two timelines must differ");
    EXPECT(ry.per_device[0].cuda_device == -1);
    report_free(&r);
    report_free(&rs);
    report_free(&ry);
    /* A mismatched timeline is refused. */
    meas.n_ops--;
    EXPECT(report_build(&r, &cfg, &x.pl, &meas, NULL) == PP_ERR_INTERNAL);
    meas.n_ops++;
    timeline_free(&meas);
    timeline_free(&sim);
    job_free(&cfg);
    ts_plan_free(&x);
    ts_plan_free(&y);
}

/* In-flight micro-batches with a split backward (the pair ends at its W), and ties at one
 * instant: an end and a start at the same time do not overlap. */
static void test_peak_inflight(void)
{
    double u = ts_rand_uniform(0.5, 2);
    ts_plan_t x;
    ts_plan_init(&x, 2, 2, 3, PP_SCHED_ZBH1);
    x.pl.split_backward = 1;
    /* dev0: mb0 F I ... W late; mb1 F I W in between -> 2 in flight. */
    tp_compute(&x, 0, PP_ACT_F, 0, 0, 0, u);
    tp_compute(&x, 0, PP_ACT_I, 0, 0, u, 2 * u);
    tp_compute(&x, 0, PP_ACT_F, 0, 1, 2 * u, 3 * u);
    tp_compute(&x, 0, PP_ACT_I, 0, 1, 3 * u, 4 * u);
    tp_compute(&x, 0, PP_ACT_W, 0, 1, 4 * u, 5 * u);
    tp_compute(&x, 0, PP_ACT_W, 0, 0, 5 * u, 6 * u);
    /* dev1: back-to-back F B F B F B with equal end/start times -> 1. */
    for (int k = 0; k < 3; k++) {
        tp_compute(&x, 1, PP_ACT_F, 1, k, 2 * k * u, (2 * k + 1) * u);
        tp_compute(&x, 1, PP_ACT_B, 1, k, (2 * k + 1) * u, (2 * k + 2) * u);
    }
    pp_timeline_t tl;
    pp_report_t r;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
    REQUIRE(report_build(&r, NULL, &x.pl, &tl, NULL) == PP_OK);
    EXPECT(r.per_device[0].peak_inflight == 2, "dev0: %d", r.per_device[0].peak_inflight);
    EXPECT(r.per_device[1].peak_inflight == 1, "dev1: %d", r.per_device[1].peak_inflight);
    report_free(&r);
    /* Without per-op times nothing per op is known. */
    tl.has_op_times = 0;
    REQUIRE(report_build(&r, NULL, &x.pl, &tl, NULL) == PP_OK);
    EXPECT(r.per_device[0].peak_inflight == -1 && isnan(r.per_device[0].busy_ms));
    EXPECT(isnan(r.bubble) && isnan(r.per_device[1].bubble));
    EXPECT_NEAR(r.step_ms, tl.step_ms[0], 0, 0);
    char *js = print_json(&r);
    jp_t j;
    EXPECT(json_valid(js, &j), "%s", js);
    EXPECT(strstr(js, "\"peak_inflight_microbatches\":null") != NULL);
    free(js);
    char *t = print_table(&r, NULL);
    EXPECT(strstr(t, "# verdict: bubble unknown") != NULL, "%s", t);
    free(t);
    report_free(&r);
    timeline_free(&tl);
    ts_plan_free(&x);
}

/* ---- tests: outputs -------------------------------------------------------------------------- */

static void test_json_schema(void)
{
    /* docs/architecture.md's keys in their order, then the explanation's (docs/explain.md). */
    static const char *const top[] = {"schedule",
                                      "kind",
                                      "mode",
                                      "devices",
                                      "stages",
                                      "micro_batches",
                                      "step_ms",
                                      "step_ms_p10",
                                      "step_ms_p90",
                                      "makespan_ms",
                                      "tokens_per_s",
                                      "tflops",
                                      "bubble",
                                      "bubble_theory",
                                      "bubble_simulated",
                                      "loss",
                                      "step_ms_predicted",
                                      "shared_gpus",
                                      "clock_skew_ms",
                                      "per_device",
                                      "idle_ms_by_reason",
                                      "idle_ms_by_reason_simulated",
                                      "bubble_by_reason",
                                      "bubble_by_reason_simulated",
                                      "critical_path",
                                      "what_if_step_ms",
                                      "transport",
                                      "boundaries"};
    static const char *const dev[] = {"device",
                                      "busy_ms",
                                      "idle_ms",
                                      "bubble",
                                      "peak_mem_bytes",
                                      "peak_mem_predicted_bytes",
                                      "activation_microbatch_equivalents",
                                      "peak_inflight_microbatches",
                                      "idle_ms_by_reason",
                                      "idle_ms_by_reason_simulated"};
    const int n_top = sizeof top / sizeof top[0], n_dev = sizeof dev / sizeof dev[0];
    int sends;
    ts_plan_t x;
    tp_small(&x, ts_rand_uniform(0.5, 2), &sends);
    pp_timeline_t tl;
    pp_report_t r;
    double steps[2] = {ts_rand_uniform(1, 2), ts_rand_uniform(1, 2)};
    x.pl.kind = PP_SCHED_STEPS;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_MEASURE, steps, 2) == PP_OK);
    tl.peak_mem_bytes[0] = (size_t)ts_rand_int(1, 1 << 30) * 1024;
    pp_job_t cfg;
    ts_job_defaults(&cfg);
    cfg.kind = PP_SCHED_STEPS;
    free(cfg.name);
    cfg.name = strdup("odd \"name\"\\ with\ttab");
    REQUIRE(report_build(&r, &cfg, &x.pl, &tl, NULL) == PP_OK);
    char *js = print_json(&r);
    jp_t j;
    REQUIRE(json_valid(js, &j), "invalid JSON: %s", js);
    int nt = 0, nd = 0, nb = 0;
    for (int k = 0; k < j.n_keys; k++) {
        if (j.key_depth[k] == 1) {
            EXPECT(nt < n_top && strcmp(j.keys[k], top[nt]) == 0, "top key %d is '%s'", nt,
                   j.keys[k]);
            nt++;
        } else if (j.key_depth[k] == 3 && nt == n_top) { /* a boundary's */
            static const char *const bkey[] = {"from", "to", "transport"};
            EXPECT(strcmp(j.keys[k], bkey[nb % 3]) == 0, "boundary key '%s'", j.keys[k]);
            nb++;
        } else if (j.key_depth[k] == 3) {
            EXPECT(strcmp(j.keys[k], dev[nd % n_dev]) == 0, "per_device key '%s', want '%s'",
                   j.keys[k], dev[nd % n_dev]);
            nd++;
        }
    }
    EXPECT(nt == n_top, "%d top-level keys", nt);
    EXPECT(nd == n_dev * 2, "%d per-device keys", nd);
    EXPECT(nb == 3 * r.n_boundaries && r.n_boundaries > 0, "%d boundary keys", nb);
    EXPECT(strstr(js, "\"schedule\":\"odd \\\"name\\\"\\\\ with\\ttab\"") != NULL, "%s", js);
    EXPECT(strstr(js, "\"mode\":\"measure\"") != NULL);
    EXPECT(strstr(js, "\"bubble_simulated\":null") != NULL, "NAN must print as null");
    EXPECT(strstr(js, "\"bubble_theory\":null") != NULL);
    EXPECT(strstr(js, "\"loss\":null") != NULL, "no loss set: null");
    free(js);
    r.loss = 2.718281828459045; /* a measured run's: printed with 9 significant digits */
    js = print_json(&r);
    EXPECT(strstr(js, "\"loss\":2.71828183,") != NULL, "%s", js);
    char want[64];
    snprintf(want, sizeof want, "\"peak_mem_bytes\":%zu", tl.peak_mem_bytes[0]);
    EXPECT(strstr(js, want) != NULL, "%s", want);
    EXPECT(strstr(js, "\"peak_mem_bytes\":null") != NULL, "unknown memory prints as null");
    /* Numbers read back exactly. */
    const char *b = strstr(js, "\"bubble\":");
    REQUIRE(b != NULL);
    EXPECT(strtod(b + 9, NULL) == r.bubble, "bubble %.17g", r.bubble);
    b = strstr(js, "\"step_ms\":");
    REQUIRE(b != NULL);
    EXPECT(strtod(b + 10, NULL) == r.step_ms);
    EXPECT(strstr(js, "\"shared_gpus\":false") != NULL, "%s", js);
    free(js);
    report_free(&r);
    /* Two pipeline devices measured on one GPU: the JSON and the table say so. */
    cfg.pipeline.devices_all = 0;
    cfg.pipeline.n_devices = 2;
    cfg.pipeline.device_ids[0] = cfg.pipeline.device_ids[1] = 0;
    REQUIRE(report_build(&r, &cfg, &x.pl, &tl, NULL) == PP_OK);
    js = print_json(&r);
    EXPECT(strstr(js, "\"shared_gpus\":true") != NULL, "%s", js);
    free(js);
    js = print_table(&r, &cfg);
    EXPECT(strstr(js, "not those of separate GPUs") != NULL, "%s", js);
    free(js);
    report_free(&r);
    timeline_free(&tl);
    job_free(&cfg);
    ts_plan_free(&x);
}

/* The boundaries a report names: each directed device pair once, in the order the stages cross
 * them, chained where pairs continue each other over one transport; with two processes auto's ipc
 * between them and peer within each. The table's line and the JSON's say the same. */
static void test_boundaries(void)
{
    static const struct {
        const char *yaml;
        int procs; /* even split over this many processes */
        const char *line, *json;
    } cases[] = {
        {"pipeline: {devices: 4}\n", 1, "# boundaries: 0->1->2->3 peer\n",
         "\"transport\":\"auto\",\"boundaries\":[{\"from\":0,\"to\":1,\"transport\":\"peer\"},"
         "{\"from\":1,\"to\":2,\"transport\":\"peer\"},{\"from\":2,\"to\":3,"
         "\"transport\":\"peer\"}]}"},
        {"pipeline: {devices: 4}\n", 2, "# boundaries: 0->1 peer, 1->2 ipc, 2->3 peer\n",
         "{\"from\":1,\"to\":2,\"transport\":\"ipc\"}"},
        {"pipeline: {devices: 4, transport: nccl}\n", 2, "# boundaries: 0->1->2->3 nccl\n",
         "\"transport\":\"nccl\""},
        {"pipeline: {devices: 4, chunks: 2}\nschedule: {kind: zb-v}\n", 1,
         "# boundaries: 0->1->2->3 peer, 3->3 local, 3->2->1->0 peer\n",
         "\"to\":3,\"transport\":\"local\""},
        {"pipeline: {devices: 2, chunks: 2}\nschedule: {kind: interleaved-1f1b}\n", 1,
         "# boundaries: 0->1->0 peer\n", "{\"from\":1,\"to\":0,\"transport\":\"peer\"}]"},
        {"pipeline: {devices: [0, 0, 1]}\n", 1, "# boundaries: 0->1 shared, 1->2 peer\n",
         "\"shared\""},
        {"pipeline: {devices: 1, stages: 2}\nschedule: {kind: interleaved-1f1b}\n", 1,
         "# boundaries: 0->0 local\n", "\"local\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_job_t job;
        pp_schedule_t sch;
        pp_plan_t plan;
        pp_cost_model_t cm;
        pp_timeline_t tl;
        pp_report_t r;
        pp_job_cost_t c = {.forward = 1, .backward_input = 1, .backward_weight = 1, .send = 0.1};
        REQUIRE(ts_load_job(&job, cases[i].yaml, NULL, 0, -1) == PP_OK, "case %zu", i);
        const int p = job.pipeline.n_devices;
        job.procs.n_procs = cases[i].procs;
        for (int d = 0; d < p; d++)
            job.procs.rank_of[d] = d / (p / cases[i].procs);
        REQUIRE(generate_schedule(&sch, &job) == PP_OK && plan_lower(&plan, &sch, &job) == PP_OK);
        REQUIRE(cost_model_uniform(&cm, plan.n_stages, &c) == PP_OK);
        REQUIRE(simulate_plan(&tl, &plan, &cm) == PP_OK);
        REQUIRE(report_build(&r, &job, &plan, &tl, &tl) == PP_OK);
        char *t = print_table(&r, &job), *js = print_json(&r);
        EXPECT(strstr(t, cases[i].line), "case %zu: want %s in\n%s", i, cases[i].line, t);
        EXPECT(strstr(js, cases[i].json), "case %zu: want %s in\n%s", i, cases[i].json, js);
        free(t);
        free(js);
        report_free(&r);
        timeline_free(&tl);
        cost_model_free(&cm);
        plan_free(&plan);
        schedule_free(&sch);
        job_free(&job);
    }
}

static void test_table(void)
{
    int sends;
    ts_plan_t x;
    tp_small(&x, ts_rand_uniform(0.5, 2), &sends);
    pp_timeline_t tl;
    pp_report_t r;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
    pp_job_t cfg;
    ts_job_defaults(&cfg);
    cfg.kind = PP_SCHED_1F1B;
    REQUIRE(report_build(&r, &cfg, &x.pl, &tl, NULL) == PP_OK);
    char *t = print_table(&r, &cfg);
    int rows = 0, header = 0, units = 0;
    for (char *line = t; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (line[0] != '#') rows++;
        if (strstr(line, "device") && strstr(line, "busy") && strstr(line, "bubble")) header++;
        if (line[0] == '#' && strstr(line, " ms ") && strstr(line, "GiB") && strstr(line, "MiB"))
            units++;
        if (nl) *nl = '\n';
        line = nl ? nl + 1 : NULL;
    }
    EXPECT(rows == 2, "%d device rows\n%s", rows, t);
    EXPECT(header == 1 && units == 1, "header %d units %d\n%s", header, units, t);
    EXPECT(strstr(t, "mode simulate") && strstr(t, "cost model"), "%s", t);
    EXPECT(strstr(t, "idle/makespan") && strstr(t, "idle/ideal-compute"), "%s", t);
    EXPECT(strstr(t, "# verdict: bubble ") && strstr(t, "vs theory 33.3%"), "%s", t);
    free(t);
    report_free(&r);
    /* No closed form: the verdict says so. */
    x.pl.kind = PP_SCHED_STEPS;
    cfg.kind = PP_SCHED_STEPS;
    REQUIRE(report_build(&r, &cfg, &x.pl, &tl, NULL) == PP_OK);
    t = print_table(&r, &cfg);
    EXPECT(strstr(t, "no closed form") != NULL, "%s", t);
    free(t);
    report_free(&r);
    timeline_free(&tl);
    job_free(&cfg);
    ts_plan_free(&x);
}

/* A step longer than its ops' makespan (a device's gradients zeroed before its first op, its
 * optimizer after its last): the step is the timeline's, busy, idle and the bubble stay over the
 * makespan, and the table says how much ran outside the ops; a step that is its makespan says
 * nothing. */
static void test_outside_ops(void)
{
    int sends;
    ts_plan_t x;
    tp_small(&x, ts_rand_uniform(0.5, 2), &sends);
    pp_timeline_t tl;
    pp_report_t plain, r;
    pp_job_t cfg;
    ts_job_defaults(&cfg);
    cfg.kind = PP_SCHED_1F1B;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
    const double span = timeline_makespan(&tl), out = ts_rand_uniform(0.1, 2);
    REQUIRE(report_build(&plain, &cfg, &x.pl, &tl, NULL) == PP_OK);
    char *t = print_table(&plain, &cfg);
    EXPECT(plain.makespan_ms == span && plain.step_ms == span && !strstr(t, "outside the ops"),
           "%s", t);
    free(t);
    tl.step_ms[0] = span + out;
    REQUIRE(report_build(&r, &cfg, &x.pl, &tl, NULL) == PP_OK);
    EXPECT(r.makespan_ms == span && r.step_ms == span + out, "%g %g", r.makespan_ms, r.step_ms);
    EXPECT(r.bubble == plain.bubble && r.per_device[0].idle_ms == plain.per_device[0].idle_ms,
           "bubble %g, without %g", r.bubble, plain.bubble);
    char want[96];
    snprintf(want, sizeof want, "# ops' makespan %.3f ms; outside the ops %.3f ms of the step",
             span, out);
    t = print_table(&r, &cfg);
    EXPECT(strstr(t, want), "%s\nwant %s", t, want);
    free(t);
    t = print_json(&r);
    EXPECT(strstr(t, "\"makespan_ms\":"), "%s", t);
    free(t);
    report_free(&plain);
    report_free(&r);
    timeline_free(&tl);
    job_free(&cfg);
    ts_plan_free(&x);
}

static void test_trace(void)
{
    int sends;
    ts_plan_t x;
    tp_small(&x, ts_rand_uniform(0.5, 2), &sends);
    pp_timeline_t tl;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_MEASURE, NULL, 0) == PP_OK);
    char path[512];
    temp_path(path, sizeof path, ".json");
    int ids[2] = {6, 2};
    REQUIRE(report_write_trace_devices(&x.pl, &tl, ids, path) == PP_OK);
    char *s = read_all(path);
    REQUIRE(s != NULL);
    jp_t j;
    EXPECT(json_valid(s, &j), "invalid trace JSON");
    int n_idle = count_substr(s, "\"cat\":\"idle\""), n_crit = count_substr(s, "\"critical\":1");
    EXPECT(count_substr(s, "\"ph\":\"X\"") == x.pl.n_ops + n_idle, "%d complete events",
           count_substr(s, "\"ph\":\"X\""));
    EXPECT(count_substr(s, "\"cat\":\"flow\",\"ph\":\"s\"") == sends &&
           count_substr(s, "\"cat\":\"flow\",\"ph\":\"f\"") == sends);
    EXPECT(count_substr(s, "\"bp\":\"e\"") == sends + n_crit - 1);
    EXPECT(strstr(s, "device 0 (cuda 6)") && strstr(s, "device 1 (cuda 2)"));
    EXPECT(strstr(s, "\"thread_name\"") && strstr(s, "\"compute\"") && strstr(s, "\"recv\""));
    EXPECT(strstr(s, "\"displayTimeUnit\":\"ms\"") && strstr(s, "\"name\":\"0SEND_F1\""));
    EXPECT(strstr(s, "\"name\":\"B1\",\"cat\":\"B\"") != NULL);
    free(s);
    /* The plain form works too, and the file is replaced. */
    REQUIRE(report_write_trace(&x.pl, &tl, path) == PP_OK);
    s = read_all(path);
    EXPECT(s && json_valid(s, &j) && !strstr(s, "cuda 6"));
    free(s);
    unlink(path);
    EXPECT(report_write_trace(&x.pl, &tl, "/nonexistent-dir/ppsched/t.json") == PP_ERR_IO);
    tl.has_op_times = 0;
    EXPECT(report_write_trace(&x.pl, &tl, path) == PP_ERR_USAGE);
    timeline_free(&tl);
    ts_plan_free(&x);
}

static void test_svg(void)
{
    /* A bigger run: p = 3 with F/I/W/B ops, transfers, and a title needing escapes. */
    ts_plan_t x;
    ts_plan_init(&x, 3, 3, 40, PP_SCHED_ZBH1);
    int n_compute = 0;
    double u = ts_rand_uniform(0.2, 1);
    for (int d = 0; d < 3; d++) {
        double t = d * u;
        for (int k = 0; k < 40; k++) {
            static const pp_action_kind_t kinds[] = {PP_ACT_F, PP_ACT_I, PP_ACT_W, PP_ACT_B};
            double len = u * ts_rand_uniform(0.5, 1.5);
            tp_compute(&x, d, kinds[k % 4], d, k, t, t + len);
            n_compute++;
            if (d < 2 && k % 4 == 0)
                tp_transfer(&x, d, d + 1, PP_ACT_SEND_F, d, k, PP_TRANSPORT_PEER, 1024, t + len,
                            t + len + 0.1 * u);
            t += len + (k % 3 == 0 ? 0.3 * u : 0);
        }
    }
    pp_timeline_t tl;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
    char path[512];
    temp_path(path, sizeof path, ".svg");
    REQUIRE(report_write_svg(&x.pl, &tl, "zb <h1> & \"friends\" 'x'", path) == PP_OK);
    char *s = read_all(path);
    REQUIRE(s != NULL);
    xc_t xc;
    EXPECT(xml_wellformed(s, &xc), "SVG is not well-formed XML");
    EXPECT(xc.has_xmlns, "no SVG namespace");
    EXPECT(xc.n_op_rects == n_compute, "%d op boxes for %d compute ops", xc.n_op_rects, n_compute);
    EXPECT(strstr(s, "zb &lt;h1&gt; &amp; &quot;friends&quot; &apos;x&apos;") != NULL);
    EXPECT(strstr(s, ">dev 0<") && strstr(s, ">dev 2<") && strstr(s, "time (ms)"));
    EXPECT(strstr(s, "bubble") && strstr(s, "makespan"));
    free(s);
    unlink(path);
    EXPECT(report_write_svg(&x.pl, &tl, NULL, "/nonexistent-dir/ppsched/g.svg") == PP_ERR_IO);
    timeline_free(&tl);
    ts_plan_free(&x);
}

/* A time that is not finite (a cost out of range) is refused before any writer prints it: no
 * report, no trace or chart file ("dur":inf is not JSON, x="-nan" not SVG), and the message names
 * the op. */
static void test_non_finite_times(void)
{
    int sends;
    ts_plan_t x;
    tp_small(&x, 1.0, &sends);
    pp_timeline_t tl;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
    int k = ts_rand_int(0, x.pl.n_ops - 1);
    tl.t[k].end_ms = INFINITY;
    pp_report_t r;
    char path[512];
    temp_path(path, sizeof path, ".json");
    unlink(path); /* made empty by temp_path: no writer may make it again */
    ts_capture_begin();
    pp_status_t st = report_build(&r, NULL, &x.pl, &tl, NULL);
    const char *got = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && strstr(got, "has an op time that is not finite") &&
               strstr(got, "..inf ms"),
           "report_build: %s", got);
    ts_capture_begin();
    EXPECT(report_write_trace(&x.pl, &tl, path) == PP_ERR_INPUT);
    EXPECT(report_write_svg(&x.pl, &tl, NULL, path) == PP_ERR_INPUT);
    ts_capture_end();
    EXPECT(access(path, F_OK) != 0, "a file was written with a time that is not finite");
    tl.t[k].end_ms = tl.t[k].start_ms;
    tl.step_ms[0] = NAN;
    ts_capture_begin();
    EXPECT(report_build(&r, NULL, &x.pl, &tl, NULL) == PP_ERR_INPUT);
    got = ts_capture_end();
    EXPECT(strstr(got, "step 0 takes nan ms") != NULL, "%s", got);
    timeline_free(&tl);
    ts_plan_free(&x);
}

/* The bubble-against-m chart: well-formed, one point per finite value, escaped title, and the
 * closed-form curve passing through the theory at the measured m. */
static void test_bubble_chart(void)
{
    int m[4] = {4, 8, 16, 32};
    double meas[4], sim[4];
    for (int i = 0; i < 4; i++) {
        meas[i] = report_bubble_theory(PP_SCHED_1F1B, 4, m[i], 1) + ts_rand_uniform(0, 0.05);
        sim[i] = i == 2 ? NAN : meas[i] - 0.01;
    }
    char path[512];
    temp_path(path, sizeof path, ".svg");
    REQUIRE(report_write_bubble_chart(path, "1f1b <p=4> & co", PP_SCHED_1F1B, 4, 1, 4, m, meas, sim,
                                      "measured") == PP_OK);
    char *s = read_all(path);
    REQUIRE(s != NULL);
    xc_t xc;
    EXPECT(xml_wellformed(s, &xc), "chart is not well-formed XML");
    EXPECT(xc.has_xmlns, "no SVG namespace");
    EXPECT(count_substr(s, "class=\"measured\"") == 4, "measured points");
    EXPECT(count_substr(s, "class=\"simulated\"") == 3, "simulated points (one NAN left out)");
    EXPECT(strstr(s, "1f1b &lt;p=4&gt; &amp; co") != NULL);
    EXPECT(strstr(s, "<polyline") != NULL && strstr(s, "closed form") != NULL);
    free(s);
    unlink(path);
    EXPECT(report_write_bubble_chart("/nonexistent-dir/ppsched/b.svg", "x", PP_SCHED_1F1B, 4, 1, 4,
                                     m, meas, sim, "measured") == PP_ERR_IO);
}

/* Every run of a comparison as bars: one group per schedule in first-seen order, one bar per m
 * (a NAN bubble left out), a closed-form tick where there is one. */
static void test_bubble_bars(void)
{
    const char *group[] = {"gpipe", "gpipe", "zb-v & co", "zb-v & co", "steps"};
    int m[] = {8, 32, 32, 8, 8};
    double bubble[] = {0.273, 0.086, 0.023, NAN, 0.2}, theory[] = {0.273, 0.086, 0.015, 0.06, NAN};
    char path[512];
    temp_path(path, sizeof path, ".svg");
    REQUIRE(report_write_bubble_bars(path, "all <p=4>", 5, group, m, bubble, theory) == PP_OK);
    char *s = read_all(path);
    REQUIRE(s != NULL);
    xc_t xc;
    EXPECT(xml_wellformed(s, &xc), "chart is not well-formed XML");
    EXPECT(count_substr(s, "<title>m = ") == 4, "bars");
    EXPECT(count_substr(s, "stroke-width=\"2\"/>") == 3, "closed-form ticks");
    EXPECT(strstr(s, "zb-v &amp; co") != NULL && strstr(s, "all &lt;p=4&gt;") != NULL);
    const char *a = strstr(s, ">gpipe<"), *b = strstr(s, ">zb-v &amp; co<"),
               *c = strstr(s, ">steps<");
    EXPECT(a && b && c && a < b && b < c, "groups in first-seen order");
    EXPECT(strstr(s, "m = 8</text>") && strstr(s, "m = 32</text>"), "legend");
    free(s);
    unlink(path);
}

/* The checkers themselves must reject what is broken, or the tests above prove nothing. */
static void test_checkers_reject_bad_input(void)
{
    jp_t j;
    xc_t x;
    EXPECT(json_valid("{\"a\":[1,2.5e-3,-0,true,null,\"x\\n\"]}", &j));
    EXPECT(!json_valid("{\"a\":nan}", &j));
    EXPECT(!json_valid("{\"a\":1,}", &j));
    EXPECT(!json_valid("{\"a\":01}", &j));
    EXPECT(!json_valid("{\"a\":\"tab\there\"}", &j));
    EXPECT(!json_valid("[1] [2]", &j));
    EXPECT(xml_wellformed(
        "<?xml version=\"1.0\"?>\n<svg a=\"1\"><g><rect class=\"op F\"/></g></svg>\n", &x));
    EXPECT(x.n_op_rects == 1);
    EXPECT(!xml_wellformed("<svg><g></svg>", &x));
    EXPECT(!xml_wellformed("<svg a=1></svg>", &x));
    EXPECT(!xml_wellformed("<svg>a & b</svg>", &x));
    EXPECT(!xml_wellformed("<svg></svg><svg></svg>", &x));
    EXPECT(!xml_wellformed("<svg a=\"<\"></svg>", &x));
}

/* One device, one stage, one micro-batch read in the singular; a difference that rounds to zero
 * reads +0.0 pp, not -0.0 pp. */
static void test_table_wording(void)
{
    ts_plan_t x;
    ts_plan_init(&x, 1, 1, 1, PP_SCHED_1F1B);
    tp_compute(&x, 0, PP_ACT_F, 0, 0, 0.0, 1.0);
    tp_compute(&x, 0, PP_ACT_B, 0, 0, 1.0, 3.0);
    pp_timeline_t tl;
    pp_report_t r;
    pp_job_t cfg;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
    ts_job_defaults(&cfg);
    REQUIRE(report_build(&r, &cfg, &x.pl, &tl, NULL) == PP_OK);
    r.bubble = r.bubble_theory - 1e-9; /* equal but for rounding, below */
    char *t = print_table(&r, &cfg);
    EXPECT(strstr(t, "# pipeline: p 1 device, 1 stage, v 1, m 1 micro-batch of"), "%s", t);
    EXPECT(strstr(t, "(\xce\x94 +0.0 pp)") && !strstr(t, "-0.0 pp"), "%s", t);
    free(t);
    report_free(&r);
    timeline_free(&tl);
    job_free(&cfg);
    ts_plan_free(&x);
}

int main(void)
{
    ts_rng_seed(0x2545f4914f6cdd1dull);
    RUN(test_busy_union_of_intervals);
    RUN(test_busy_random_against_grid);
    RUN(test_step_percentiles);
    RUN(test_theory_values);
    RUN(test_simulated_and_throughput);
    RUN(test_peak_inflight);
    RUN(test_json_schema);
    RUN(test_boundaries);
    RUN(test_table);
    RUN(test_outside_ops);
    RUN(test_table_wording);
    RUN(test_trace);
    RUN(test_svg);
    RUN(test_non_finite_times);
    RUN(test_bubble_chart);
    RUN(test_bubble_bars);
    RUN(test_checkers_reject_bad_input);
    return check_summary("test_report");
}
