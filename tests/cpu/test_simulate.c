/*
 * test_simulate.c — the discrete-event simulator against exact hand-computed times, and against
 * the closed forms of the schedules.
 *
 * Plans are built here with the hand-built plan of support.h (ops appended in plan order, each
 * with its deps; a transfer appends a SEND and its RECV right after it) and by a small lowering
 * that turns per-device compute programs into such a plan, the way plan.h describes. The last
 * test runs the real chain (generate_* -> plan_lower -> simulate_plan -> report_build) over a
 * sweep of p and m.
 * Costs are drawn from a seeded generator, never round numbers alone, so a wrong formula cannot
 * pass by accident.
 */
#include "schedule/generate.h"
#include "report/report.h"
#include "run/run.h"
#include "sim/explain.h"
#include "sim/simulate.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>

/* ---- a test-local lowering: compute programs -> plan ----------------------------------------- */

typedef struct act {
    pp_action_kind_t kind;
    int stage, mb;
} act_t;

typedef struct progs {
    int p, n_stages, m;
    act_t *a[PP_MAX_DEVICES];
    int n[PP_MAX_DEVICES];
} progs_t;

static void progs_push(progs_t *g, int d, pp_action_kind_t kind, int stage, int mb)
{
    g->a[d] = realloc(g->a[d], sizeof(act_t) * (size_t)(g->n[d] + 1));
    g->a[d][g->n[d]++] = (act_t){kind, stage, mb};
}

static void progs_free(progs_t *g)
{
    for (int d = 0; d < g->p; d++)
        free(g->a[d]);
}

/* A transfer produced but not yet placed in the plan. */
typedef struct pending {
    int src, dst, producer, key_dst, dir_f, stage, peer_stage, mb;
    double ready;
} pending_t;

/* Merges the device programs into one plan, in the order a list scheduler with costs `cm` (free
 * transfers) would run them: the op or transfer that can start first comes next, transfers first
 * on ties. So each send and recv stream gets its transfers in time order, as a good lowering
 * does; a producer's SEND and the consumer's RECV sit together. Returns 0, or -1 on deadlock. */
static int lower_progs(ts_plan_t *b, const progs_t *g, const int *stage_dev, pp_transport_t xlink,
                       size_t bytes, pp_sched_kind_t kind, const pp_cost_model_t *cm)
{
    int S = g->n_stages, m = g->m, n_total = 0;
    ts_plan_init(b, g->p, S, m, kind);
    for (int s = 0; s < S; s++)
        b->pl.stage_device[s] = stage_dev[s];
    for (int d = 0; d < g->p; d++)
        n_total += g->n[d];
    size_t n_keys = (size_t)(S * m);
    int *f_op = malloc(sizeof(int) * n_keys), *bi_op = malloc(sizeof(int) * n_keys);
    int *recv_f = malloc(sizeof(int) * n_keys), *recv_b = malloc(sizeof(int) * n_keys);
    double *end = malloc(sizeof(double) * (size_t)(3 * n_total + 1));
    pending_t *pend = malloc(sizeof(pending_t) * (size_t)(n_total + 1));
    for (size_t k = 0; k < n_keys; k++)
        f_op[k] = bi_op[k] = recv_f[k] = recv_b[k] = -1;
    double dev_free[PP_MAX_DEVICES] = {0};
    int cur[PP_MAX_DEVICES] = {0}, n_pend = 0, left = n_total, rc = 0;
    while (left > 0 || n_pend > 0) {
        /* The earliest pending transfer, and the earliest compute op that can start. */
        int best_t = -1, best_d = -1;
        double t_best = 0;
        for (int j = 0; j < n_pend; j++)
            if (best_t < 0 || pend[j].ready < pend[best_t].ready) best_t = j;
        for (int d = 0; d < g->p; d++) {
            if (cur[d] >= g->n[d]) continue;
            act_t a = g->a[d][cur[d]];
            int key = a.stage * m + a.mb, in = -1;
            if (a.kind == PP_ACT_F && a.stage > 0) in = recv_f[key];
            if ((a.kind == PP_ACT_B || a.kind == PP_ACT_I) && a.stage < S - 1) in = recv_b[key];
            if (in < 0 && ((a.kind == PP_ACT_F && a.stage > 0) ||
                           ((a.kind == PP_ACT_B || a.kind == PP_ACT_I) && a.stage < S - 1)))
                continue; /* input not received yet */
            double t = dev_free[d];
            if (in >= 0 && end[in] > t) t = end[in];
            if (best_d < 0 || t < t_best) {
                best_d = d;
                t_best = t;
            }
        }
        if (best_t >= 0 && (best_d < 0 || pend[best_t].ready <= t_best)) {
            pending_t q = pend[best_t];
            pend[best_t] = pend[--n_pend];
            int r = ts_plan_transfer(
                b, q.src, q.dst, q.dir_f ? PP_ACT_SEND_F : PP_ACT_SEND_B, q.stage, q.peer_stage,
                q.mb, q.src == q.dst ? PP_TRANSPORT_LOCAL : xlink, bytes, q.producer);
            end[r - 1] = end[r] = q.ready;
            if (q.dir_f)
                recv_f[q.key_dst] = r;
            else
                recv_b[q.key_dst] = r;
            continue;
        }
        if (best_d < 0) {
            rc = -1;
            break;
        }
        int d = best_d;
        act_t a = g->a[d][cur[d]++];
        left--;
        int key = a.stage * m + a.mb, op;
        double cost;
        if (a.kind == PP_ACT_F) {
            op = ts_plan_compute(b, d, PP_ACT_F, a.stage, a.mb, a.stage > 0 ? recv_f[key] : -1, -1);
            f_op[key] = op;
            cost = cm->f[a.stage];
            if (a.stage < S - 1)
                pend[n_pend++] =
                    (pending_t){d,    stage_dev[a.stage + 1], op, key + m, 1, a.stage, a.stage + 1,
                                a.mb, t_best + cost};
        } else if (a.kind == PP_ACT_B || a.kind == PP_ACT_I) {
            op = ts_plan_compute(b, d, a.kind, a.stage, a.mb, f_op[key],
                                 a.stage < S - 1 ? recv_b[key] : -1);
            bi_op[key] = op;
            cost = a.kind == PP_ACT_B ? cm->b[a.stage] : cm->i[a.stage];
            if (a.stage > 0)
                pend[n_pend++] =
                    (pending_t){d,    stage_dev[a.stage - 1], op, key - m, 0, a.stage, a.stage - 1,
                                a.mb, t_best + cost};
        } else { /* W after its I */
            op = ts_plan_compute(b, d, PP_ACT_W, a.stage, a.mb, bi_op[key], -1);
            cost = cm->w[a.stage];
            b->pl.split_backward = 1;
        }
        end[op] = t_best + cost;
        dev_free[d] = end[op];
    }
    free(f_op);
    free(bi_op);
    free(recv_f);
    free(recv_b);
    free(end);
    free(pend);
    return rc;
}

/* GPipe and 1F1B programs, stage s on device s. */
static void progs_gpipe(progs_t *g, int p, int m)
{
    memset(g, 0, sizeof *g);
    g->p = g->n_stages = p;
    g->m = m;
    for (int s = 0; s < p; s++) {
        for (int k = 0; k < m; k++)
            progs_push(g, s, PP_ACT_F, s, k);
        for (int k = 0; k < m; k++)
            progs_push(g, s, PP_ACT_B, s, k);
    }
}

static void progs_1f1b(progs_t *g, int p, int m)
{
    memset(g, 0, sizeof *g);
    g->p = g->n_stages = p;
    g->m = m;
    for (int s = 0; s < p; s++) {
        int warm = p - s - 1 < m ? p - s - 1 : m;
        for (int k = 0; k < warm; k++)
            progs_push(g, s, PP_ACT_F, s, k);
        for (int k = 0; k < m - warm; k++) {
            progs_push(g, s, PP_ACT_F, s, warm + k);
            progs_push(g, s, PP_ACT_B, s, k);
        }
        for (int k = m - warm; k < m; k++)
            progs_push(g, s, PP_ACT_B, s, k);
    }
}

static pp_cost_model_t make_costs(int n_stages, double f, double bi, double bw, double send)
{
    pp_cost_model_t cm;
    pp_job_cost_t c = {f, bi, bw, send, 0, 0};
    pp_status_t st = cost_model_uniform(&cm, n_stages, &c);
    if (st != PP_OK) memset(&cm, 0, sizeof cm);
    return cm;
}

#define EXPECT_TIME(tl, k, s, e)                                                                   \
    do {                                                                                           \
        EXPECT_NEAR((tl).t[k].start_ms, (s), 1e-12, 1e-12);                                        \
        EXPECT_NEAR((tl).t[k].end_ms, (e), 1e-12, 1e-12);                                          \
    } while (0)

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_cost_model_uniform(void)
{
    double f = ts_rand_uniform(0.5, 2), i = ts_rand_uniform(0.5, 2), w = ts_rand_uniform(0.5, 2);
    pp_cost_model_t cm = make_costs(5, f, i, w, 0.25);
    REQUIRE(cm.n_stages == 5);
    for (int s = 0; s < 5; s++) {
        EXPECT(cm.f[s] == f && cm.i[s] == i && cm.w[s] == w);
        EXPECT(cm.b[s] == i + w, "b = %g, i + w = %g", cm.b[s], i + w);
    }
    EXPECT(cm.send == 0.25);
    cost_model_free(&cm);
    cost_model_free(&cm); /* freeing twice (zeroed) is safe */
    cost_model_free(NULL);
}

/* One micro-batch through two devices: F on 0, its output to 1, F and B on 1, the gradient back,
 * B on 0. The ops' indices (r0, r1: the RECVs) come back for the checks. */
static void two_device_chain(ts_plan_t *pb, int *f0, int *r0, int *f1, int *b1, int *r1, int *b0)
{
    ts_plan_init(pb, 2, 2, 1, PP_SCHED_1F1B);
    *f0 = ts_plan_compute(pb, 0, PP_ACT_F, 0, 0, -1, -1);
    *r0 = ts_plan_transfer(pb, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_PEER, 4096, *f0);
    *f1 = ts_plan_compute(pb, 1, PP_ACT_F, 1, 0, *r0, -1);
    *b1 = ts_plan_compute(pb, 1, PP_ACT_B, 1, 0, *f1, -1);
    *r1 = ts_plan_transfer(pb, 1, 0, PP_ACT_SEND_B, 1, 0, 0, PP_TRANSPORT_PEER, 4096, *b1);
    *b0 = ts_plan_compute(pb, 0, PP_ACT_B, 0, 0, *f0, *r1);
}

/* dev0 F(0,0) -> SEND_F -> RECV_F on dev1 -> F(1,0) -> B(1,0) -> SEND_B -> RECV_B -> B(0,0). */
static void test_two_device_chain(void)
{
    double f = ts_rand_uniform(0.5, 2), bi = ts_rand_uniform(0.5, 2), bw = ts_rand_uniform(0.5, 2);
    double c = ts_rand_uniform(0.1, 0.5), b = bi + bw;
    ts_plan_t pb;
    int f0, r0, f1, b1, r1, b0;
    two_device_chain(&pb, &f0, &r0, &f1, &b1, &r1, &b0);
    pp_cost_model_t cm = make_costs(2, f, bi, bw, c);
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &pb.pl, &cm) == PP_OK);
    EXPECT(tl.mode == PP_MODE_SIMULATE && tl.n_steps == 1 && tl.n_ops == pb.pl.n_ops);
    EXPECT(tl.n_devices == 2 && tl.peak_mem_bytes[0] == 0 && tl.peak_mem_bytes[1] == 0);
    EXPECT(tl.has_op_times == 1 && tl.skew_ms == 0.0);
    EXPECT_TIME(tl, f0, 0, f);
    EXPECT_TIME(tl, r0 - 1, f, f + c); /* SEND */
    EXPECT_TIME(tl, r0, f, f + c);     /* RECV: same interval */
    EXPECT_TIME(tl, f1, f + c, 2 * f + c);
    EXPECT_TIME(tl, b1, 2 * f + c, 2 * f + c + b);
    EXPECT_TIME(tl, r1, 2 * f + c + b, 2 * f + 2 * c + b);
    EXPECT_TIME(tl, b0, 2 * f + 2 * c + b, 2 * f + 2 * c + 2 * b);
    double span = 2 * f + 2 * c + 2 * b;
    EXPECT_NEAR(timeline_makespan(&tl), span, 1e-12, 1e-12);
    EXPECT_NEAR(tl.step_ms[0], span, 1e-12, 1e-12);
    timeline_free(&tl);
    cost_model_free(&cm);
    ts_plan_free(&pb);
}

/* The gap of a replayed step (gap_ms): every compute op and every transfer between devices starts
 * that long after its stream and inputs are free, so the two-device chain's five hand-overs and
 * its first op each add one (op times relative to the earliest start: five in the makespan; the
 * step counts from the devices' start: six); the no-launch-gaps what-if takes them out and gives
 * the chain without them, to the bit. */
static void test_gap_before_each_op(void)
{
    double f = ts_rand_uniform(0.5, 2), bi = ts_rand_uniform(0.5, 2), bw = ts_rand_uniform(0.5, 2);
    double c = ts_rand_uniform(0.1, 0.5), g = ts_rand_uniform(0.003, 0.02), b = bi + bw;
    ts_plan_t pb;
    int f0, r0, f1, b1, r1, b0;
    two_device_chain(&pb, &f0, &r0, &f1, &b1, &r1, &b0);
    pp_cost_model_t cm = make_costs(2, f, bi, bw, c);
    cm.gap_ms = g;
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &pb.pl, &cm) == PP_OK);
    EXPECT_TIME(tl, f0, 0, f);
    EXPECT_TIME(tl, r0, f + g, f + g + c);
    EXPECT_TIME(tl, f1, f + 2 * g + c, 2 * f + 2 * g + c);
    EXPECT_TIME(tl, b1, 2 * f + 3 * g + c, 2 * f + 3 * g + c + b);
    EXPECT_TIME(tl, r1, 2 * f + 4 * g + c + b, 2 * f + 4 * g + 2 * c + b);
    EXPECT_TIME(tl, b0, 2 * f + 5 * g + 2 * c + b, 2 * f + 5 * g + 2 * c + 2 * b);
    EXPECT_NEAR(timeline_makespan(&tl), 2 * f + 5 * g + 2 * c + 2 * b, 1e-12, 1e-12);
    EXPECT_NEAR(tl.step_ms[0], 2 * f + 6 * g + 2 * c + 2 * b, 1e-12, 1e-12);
    pp_what_if_t w;
    REQUIRE(explain_what_if(&w, &pb.pl, &cm) == PP_OK);
    cm.gap_ms = 0.0;
    pp_timeline_t t0;
    REQUIRE(simulate_plan(&t0, &pb.pl, &cm) == PP_OK);
    EXPECT(w.step_ms[PP_WHAT_IF_NO_LAUNCH] == t0.step_ms[0], "no launch gaps %.17g, without %.17g",
           w.step_ms[PP_WHAT_IF_NO_LAUNCH], t0.step_ms[0]);
    EXPECT(w.step_ms[PP_WHAT_IF_FREE_COMM] > 2 * f + 2 * b + 4 * g,
           "free transfers %g keeps the gaps", w.step_ms[PP_WHAT_IF_FREE_COMM]);
    timeline_free(&tl);
    timeline_free(&t0);
    cost_model_free(&cm);
    ts_plan_free(&pb);
}

/* Each device's stages' heads run on its compute stream from 0, before its first op, and their
 * tails after its last op (its transfers too). The op times stay relative to the earliest start
 * and the ops' makespan is the chain's without them (the busy, idle and bubble figures are over
 * it); the step runs from 0 to the last tail's end. Device 1's head either hides in its wait for
 * its input or delays it; either device's tail can end the step. Every what-if and the one-pass
 * steps keep them. */
static void test_head_and_tail(void)
{
    for (int rep = 0; rep < 4; rep++) {
        double f = ts_rand_uniform(0.5, 2), bi = ts_rand_uniform(0.5, 2);
        double bw = ts_rand_uniform(0.5, 2), c = ts_rand_uniform(0.1, 0.5), b = bi + bw;
        double h0 = ts_rand_uniform(0.05, 0.3), t0 = ts_rand_uniform(0.05, 0.3);
        /* device 1: a head shorter than its wait (rep 0, 1) or longer; a tail shorter than device
         * 0's last backward plus its own (rep 0, 2) or longer */
        double h1 = rep % 2 ? h0 + f + c + ts_rand_uniform(0.1, 1) : ts_rand_uniform(0, h0 + f);
        double t1 = rep < 2 ? ts_rand_uniform(0, b) : b + t0 + ts_rand_uniform(0.1, 1);
        ts_plan_t pb;
        int f0, r0, f1, b1, r1, b0;
        two_device_chain(&pb, &f0, &r0, &f1, &b1, &r1, &b0);
        pp_cost_model_t cm = make_costs(2, f, bi, bw, c);
        cm.head[0] = h0, cm.head[1] = h1, cm.tail[0] = t0, cm.tail[1] = t1;
        pp_timeline_t tl;
        REQUIRE(simulate_plan(&tl, &pb.pl, &cm) == PP_OK);
        const double late = h1 > h0 + f + c ? h1 - (h0 + f + c) : 0; /* device 1's head delays */
        EXPECT_TIME(tl, f0, 0, f);
        EXPECT_TIME(tl, f1, f + c + late, 2 * f + c + late);
        EXPECT_TIME(tl, b0, 2 * f + 2 * c + b + late, 2 * f + 2 * c + 2 * b + late);
        EXPECT_NEAR(timeline_makespan(&tl), 2 * f + 2 * c + 2 * b + late, 1e-12, 1e-12);
        /* absolute: device 0's ops from h0 on; device 1's last op is its SEND_B */
        double end0 = h0 + 2 * f + 2 * c + 2 * b + late, end1 = h0 + 2 * f + 2 * c + b + late;
        double step = end0 + t0 > end1 + t1 ? end0 + t0 : end1 + t1;
        EXPECT_NEAR(tl.step_ms[0], step, 1e-12, 1e-12);
        pp_what_if_t w;
        REQUIRE(explain_what_if(&w, &pb.pl, &cm) == PP_OK);
        EXPECT_NEAR(w.step_ms[PP_WHAT_IF_NO_LAUNCH], step, 1e-12, 1e-12); /* no gaps to take */
        double one;
        const pp_cost_model_t *cp = &cm;
        REQUIRE(simulate_makespans(&one, &pb.pl, &cp, 1) == PP_OK);
        EXPECT(one == tl.step_ms[0], "one pass %.17g, alone %.17g", one, tl.step_ms[0]);
        timeline_free(&tl);
        cost_model_free(&cm);
        ts_plan_free(&pb);
    }
}

/* A bigger send cost delays exactly the receiving side by the difference. */
static void test_send_cost_delays_receiver(void)
{
    double f = ts_rand_uniform(0.5, 2);
    double c1 = ts_rand_uniform(0.1, 0.4), c2 = c1 + ts_rand_uniform(0.3, 0.9);
    ts_plan_t pb;
    ts_plan_init(&pb, 2, 2, 1, PP_SCHED_GPIPE);
    int f0 = ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    int r0 = ts_plan_transfer(&pb, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_NCCL, 64, f0);
    int f1 = ts_plan_compute(&pb, 1, PP_ACT_F, 1, 0, r0, -1);
    pp_timeline_t t1, t2;
    pp_cost_model_t cm1 = make_costs(2, f, 1, 1, c1), cm2 = make_costs(2, f, 1, 1, c2);
    REQUIRE(simulate_plan(&t1, &pb.pl, &cm1) == PP_OK);
    REQUIRE(simulate_plan(&t2, &pb.pl, &cm2) == PP_OK);
    EXPECT_TIME(t1, f0, 0, f);
    EXPECT_TIME(t2, f0, 0, f);
    EXPECT_NEAR(t2.t[f1].start_ms - t1.t[f1].start_ms, c2 - c1, 1e-12, 1e-12);
    EXPECT_NEAR(t2.step_ms[0] - t1.step_ms[0], c2 - c1, 1e-12, 1e-12);
    timeline_free(&t1);
    timeline_free(&t2);
    cost_model_free(&cm1);
    cost_model_free(&cm2);
    ts_plan_free(&pb);
}

/* Two stages on one device hand over with a LOCAL link: no time passes. */
static void test_local_link_is_free(void)
{
    double f = ts_rand_uniform(0.5, 2);
    ts_plan_t pb;
    ts_plan_init(&pb, 1, 2, 1, PP_SCHED_STEPS);
    int f0 = ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    int r0 = ts_plan_transfer(&pb, 0, 0, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_LOCAL, 4096, f0);
    int f1 = ts_plan_compute(&pb, 0, PP_ACT_F, 1, 0, r0, -1);
    pp_cost_model_t cm = make_costs(2, f, 1, 1, ts_rand_uniform(1, 2));
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &pb.pl, &cm) == PP_OK);
    EXPECT_TIME(tl, r0 - 1, f, f);
    EXPECT_TIME(tl, r0, f, f);
    EXPECT_TIME(tl, f1, f, 2 * f);
    timeline_free(&tl);
    cost_model_free(&cm);
    ts_plan_free(&pb);
}

/* Compute goes on while the previous output is in flight; sends queue on the send stream. */
static void test_compute_comm_overlap(void)
{
    double f = ts_rand_uniform(0.5, 1.0), c = f + ts_rand_uniform(0.2, 1.0); /* c > f */
    ts_plan_t pb;
    ts_plan_init(&pb, 2, 2, 2, PP_SCHED_GPIPE);
    int fa = ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    int ra = ts_plan_transfer(&pb, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_PEER, 1, fa);
    int fb = ts_plan_compute(&pb, 0, PP_ACT_F, 0, 1, -1, -1);
    int rb = ts_plan_transfer(&pb, 0, 1, PP_ACT_SEND_F, 0, 1, 1, PP_TRANSPORT_PEER, 1, fb);
    int ga = ts_plan_compute(&pb, 1, PP_ACT_F, 1, 0, ra, -1);
    int gb = ts_plan_compute(&pb, 1, PP_ACT_F, 1, 1, rb, -1);
    pp_cost_model_t cm = make_costs(2, f, 1, 1, c);
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &pb.pl, &cm) == PP_OK);
    EXPECT_TIME(tl, fb, f, 2 * f); /* not held back by the transfer */
    EXPECT_TIME(tl, ra, f, f + c);
    EXPECT_TIME(tl, rb, f + c, f + 2 * c); /* the send stream was still busy */
    EXPECT_TIME(tl, ga, f + c, 2 * f + c);
    EXPECT_TIME(tl, gb, f + 2 * c, 2 * f + 2 * c);
    timeline_free(&tl);
    cost_model_free(&cm);
    ts_plan_free(&pb);
}

/* Transfers queue only behind transfers of the same directed device pair: device 0's send to
 * device 2 does not wait for its send to device 1, while a second send to device 1 does; and a
 * receiver busy on one channel still receives on another. */
static void test_channels_per_directed_pair(void)
{
    double f = ts_rand_uniform(0.5, 1.0), c = ts_rand_uniform(1.0, 2.0);
    ts_plan_t pb;
    ts_plan_init(&pb, 3, 3, 2, PP_SCHED_STEPS);
    int f0 = ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    int to1 = ts_plan_transfer(&pb, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_PEER, 1, f0);
    int to2 = ts_plan_transfer(&pb, 0, 2, PP_ACT_SEND_F, 0, 2, 0, PP_TRANSPORT_PEER, 1, f0);
    int to1b = ts_plan_transfer(&pb, 0, 1, PP_ACT_SEND_F, 0, 1, 1, PP_TRANSPORT_PEER, 1, f0);
    int from2 = ts_plan_transfer(&pb, 2, 1, PP_ACT_SEND_B, 2, 1, 1, PP_TRANSPORT_PEER, 1, -1);
    pp_cost_model_t cm = make_costs(3, f, 1, 1, c);
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &pb.pl, &cm) == PP_OK);
    EXPECT_TIME(tl, to1, f, f + c);
    EXPECT_TIME(tl, to2, f, f + c);          /* another pair: no wait */
    EXPECT_TIME(tl, to1b, f + c, f + 2 * c); /* the same pair: after the first */
    EXPECT_TIME(tl, from2, 0, c);            /* device 1 receives from 2 while 0 sends */
    timeline_free(&tl);
    cost_model_free(&cm);
    ts_plan_free(&pb);
}

/* A transfer starts when both sides are ready: a RECV held back by its own dependency (slot
 * reuse) holds back the SEND too, and the sender's stream is then busy until it ends. */
static void test_transfer_waits_for_receiver(void)
{
    double f = ts_rand_uniform(0.5, 1.0), c = ts_rand_uniform(0.1, 0.3),
           big = ts_rand_uniform(3, 5);
    ts_plan_t pb;
    ts_plan_init(&pb, 2, 2, 1, PP_SCHED_STEPS);
    int x = ts_plan_compute(&pb, 1, PP_ACT_W, 1, 0, -1, -1); /* long op on dev1 */
    int f0 = ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    int s = ts_plan_op(&pb, 0, PP_ROLE_SEND, PP_ACT_SEND_F, 0, 0, &f0, 1);
    int deps_r[2] = {x, s}; /* the RECV lists its SEND too: that must not deadlock */
    int r = ts_plan_op(&pb, 1, PP_ROLE_RECV, PP_ACT_RECV_F, 1, 0, deps_r, 2);
    pb.pl.ops[s].peer = r;
    pb.pl.ops[r].peer = s;
    pb.pl.ops[s].link = pb.pl.ops[r].link = PP_TRANSPORT_PEER;
    int deps_s2 = f0;
    int s2 = ts_plan_op(&pb, 0, PP_ROLE_SEND, PP_ACT_SEND_F, 0, 0, &deps_s2, 1);
    int r2 = ts_plan_op(&pb, 1, PP_ROLE_RECV, PP_ACT_RECV_F, 1, 0, NULL, 0);
    pb.pl.ops[s2].peer = r2;
    pb.pl.ops[r2].peer = s2;
    pb.pl.ops[s2].link = pb.pl.ops[r2].link = PP_TRANSPORT_PEER;
    pp_cost_model_t cm = make_costs(2, f, 1, big, c);
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &pb.pl, &cm) == PP_OK);
    EXPECT_TIME(tl, x, 0, big);
    EXPECT_TIME(tl, s, big, big + c);
    EXPECT_TIME(tl, r, big, big + c);
    EXPECT_TIME(tl, s2, big + c, big + 2 * c); /* both streams were busy until big + c */
    EXPECT_TIME(tl, r2, big + c, big + 2 * c);
    timeline_free(&tl);
    cost_model_free(&cm);
    ts_plan_free(&pb);
}

/* Broken plan invariants are bugs: PP_ERR_INTERNAL, and the timeline is left freeable. */
static void test_rejects_broken_plans(void)
{
    pp_cost_model_t cm = make_costs(2, 1, 1, 1, 0.1);
    pp_timeline_t tl;
    ts_plan_t pb;

    /* A dependency on a later op. */
    ts_plan_init(&pb, 2, 2, 1, PP_SCHED_STEPS);
    int later = 1;
    ts_plan_op(&pb, 0, PP_ROLE_COMPUTE, PP_ACT_F, 0, 0, &later, 1);
    ts_plan_compute(&pb, 1, PP_ACT_F, 1, 0, -1, -1);
    EXPECT(simulate_plan(&tl, &pb.pl, &cm) == PP_ERR_INTERNAL);
    timeline_free(&tl);
    ts_plan_free(&pb);

    /* A RECV not right after its SEND. */
    ts_plan_init(&pb, 2, 2, 1, PP_SCHED_STEPS);
    int f0 = ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    int s = ts_plan_op(&pb, 0, PP_ROLE_SEND, PP_ACT_SEND_F, 0, 0, &f0, 1);
    ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    int r = ts_plan_op(&pb, 1, PP_ROLE_RECV, PP_ACT_RECV_F, 1, 0, NULL, 0);
    pb.pl.ops[s].peer = r;
    pb.pl.ops[r].peer = s;
    EXPECT(simulate_plan(&tl, &pb.pl, &cm) == PP_ERR_INTERNAL);
    ts_plan_free(&pb);

    /* A stage the cost model does not know, and a device out of range. */
    ts_plan_init(&pb, 2, 2, 1, PP_SCHED_STEPS);
    ts_plan_compute(&pb, 0, PP_ACT_F, 0, 0, -1, -1);
    pb.pl.ops[0].stage = 7;
    EXPECT(simulate_plan(&tl, &pb.pl, &cm) == PP_ERR_INTERNAL);
    pb.pl.ops[0].stage = 0;
    pb.pl.ops[0].device = 2;
    EXPECT(simulate_plan(&tl, &pb.pl, &cm) == PP_ERR_INTERNAL);
    ts_plan_free(&pb);
    cost_model_free(&cm);
}

/* GPipe and 1F1B from the local lowering: makespan (m + p - 1)(f + b) with free transfers, and
 * GPipe pays 2 (p - 1) transfers on top with a send cost; every start is relative to 0. */
static void test_closed_forms_local_lowering(void)
{
    static const int ps[] = {1, 2, 3, 4, 8}, ms[] = {1, 2, 3, 4, 8, 16};
    for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
        for (size_t c = 0; c < sizeof ms / sizeof ms[0]; c++)
            for (int kind = 0; kind < 2; kind++) {
                int p = ps[a], m = ms[c];
                double f = ts_rand_uniform(0.5, 2), bi = ts_rand_uniform(0.5, 2),
                       bw = ts_rand_uniform(0, 1);
                double b = bi + bw;
                progs_t g;
                if (kind == 0)
                    progs_gpipe(&g, p, m);
                else
                    progs_1f1b(&g, p, m);
                int sd[PP_MAX_DEVICES];
                for (int s = 0; s < p; s++)
                    sd[s] = s;
                ts_plan_t pb;
                pp_cost_model_t cm = make_costs(p, f, bi, bw, 0.0);
                int rc = lower_progs(&pb, &g, sd, PP_TRANSPORT_PEER, 1 << 20,
                                     kind ? PP_SCHED_1F1B : PP_SCHED_GPIPE, &cm);
                EXPECT(rc == 0, "p %d m %d kind %d deadlocked", p, m, kind);
                pp_timeline_t tl;
                if (rc == 0 && simulate_plan(&tl, &pb.pl, &cm) == PP_OK) {
                    double want = (m + p - 1) * (f + b);
                    double got = timeline_makespan(&tl);
                    EXPECT(fabs(got - want) <= 1e-9 * (1 + want),
                           "%s p %d m %d (f %g, b %g): makespan %.12g, want %.12g",
                           kind ? "1f1b" : "gpipe", p, m, f, b, got, want);
                    double t0 = tl.t[0].start_ms;
                    for (int k = 1; k < tl.n_ops; k++)
                        if (tl.t[k].start_ms < t0) t0 = tl.t[k].start_ms;
                    EXPECT(t0 == 0.0);
                    timeline_free(&tl);
                }
                cost_model_free(&cm);
                if (rc == 0 && kind == 0) {
                    double send = ts_rand_uniform(0.05, 0.2);
                    cm = make_costs(p, f, bi, bw, send);
                    if (simulate_plan(&tl, &pb.pl, &cm) == PP_OK) {
                        EXPECT_NEAR(timeline_makespan(&tl),
                                    (m + p - 1) * (f + b) + 2 * (p - 1) * send, 1e-9, 1e-9);
                        timeline_free(&tl);
                    }
                    cost_model_free(&cm);
                }
                ts_plan_free(&pb);
                progs_free(&g);
            }
}

/* Makespan of `plan` under uniform unit costs with cost.overlap = overlap; -1 on failure. */
static double unit_makespan(const pp_plan_t *plan, double overlap)
{
    pp_job_cost_t c = {1.0, 1.0, 1.0, 0.0, 0.0, overlap};
    pp_cost_model_t cm;
    pp_timeline_t tl;
    double span = -1;
    if (cost_model_uniform(&cm, plan->n_stages, &c) != PP_OK) return -1;
    if (simulate_plan(&tl, plan, &cm) == PP_OK) {
        span = timeline_makespan(&tl);
        timeline_free(&tl);
    }
    cost_model_free(&cm);
    return span;
}

/* DualPipeV's overlapped pairs: the backward half runs on the overlap stream, after its forward
 * half in plan order, on another stage, waiting for the compute op before the pair, and the next
 * compute op waits for it. cost.overlap 0 runs the pair one half after the other (the makespan of
 * the same schedule without the marks); 1 at once, which is shorter. */
static void test_overlapped_pairs(void)
{
    for (int p = 2; p <= 4; p += 2) {
        pp_schedule_t s;
        pp_plan_t pl, serial;
        pp_job_t c;
        REQUIRE(generate_dualpipev(&s, p, 2 * p) == PP_OK);
        ts_config_pipeline(&c, PP_SCHED_DUALPIPEV, p, 2 * p, 2 * p);
        c.pipeline.transport = PP_TRANSPORT_PEER;
        REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
        REQUIRE(plan_validate(&pl) == PP_OK);
        int pairs = 0;
        for (int k = 0; k < pl.n_ops; k++) {
            const pp_op_t *o = &pl.ops[k];
            if (o->role != PP_ROLE_OVERLAP) continue;
            pairs++;
            const int *prog = pl.prog_ops + pl.prog_begin[o->device];
            int j = o->pos - 1;
            while (j >= 0 && pl.ops[prog[j]].role != PP_ROLE_COMPUTE)
                j--;
            REQUIRE(j >= 0);
            int f = prog[j];
            EXPECT(f < k && pl.ops[f].stage != o->stage && pp_action_is_compute(o->kind),
                   "op %d: forward half %d", k, f);
        }
        EXPECT(pairs > 0, "p %d: no overlapped pair", p);
        for (int d = 0; d < p; d++)
            for (int i = 0; i < s.prog[d].n; i++)
                s.prog[d].a[i].overlap = 0;
        REQUIRE(plan_lower(&serial, &s, &c) == PP_OK);
        double m0 = unit_makespan(&pl, 0.0), m1 = unit_makespan(&pl, 1.0);
        double ms = unit_makespan(&serial, 0.0);
        EXPECT(m0 > 0 && m0 == ms, "p %d: pairs at overlap 0 take %g, one after the other %g", p,
               m0, ms);
        EXPECT(m1 > 0 && m1 < m0, "p %d: pairs at once take %g, not less than %g", p, m1, m0);
        plan_free(&pl);
        plan_free(&serial);
        schedule_free(&s);
    }
}

/* PyTorch's own DualPipeV order (its CSV, OVERLAP_F_B composites) marks the pairs our generator
 * marks; through the run chain with cost.overlap the predicted step is shorter than at 0, and at
 * 0 it is the serial one. */
static void test_overlapped_pairs_csv(void)
{
    const char *file = "tests/data/torch_dualpipev_p4_m8.csv";
    FILE *f = fopen(file, "r");
    if (!f) SKIP("no %s (bench/torch_orders.py writes it)", file);
    pp_schedule_t read, g;
    pp_status_t st = schedule_read_csv(&read, f, file);
    fclose(f);
    REQUIRE(st == PP_OK);
    REQUIRE(generate_dualpipev(&g, 4, 8) == PP_OK);
    for (int d = 0; d < 4; d++) {
        int a = 0, b = 0;
        for (int i = 0; i < read.prog[d].n; i++)
            a += read.prog[d].a[i].overlap;
        for (int i = 0; i < g.prog[d].n; i++)
            b += g.prog[d].a[i].overlap;
        EXPECT(a > 0 && a == b, "device %d: %d pairs read, %d generated", d, a, b);
    }
    schedule_free(&read);
    schedule_free(&g);
    double span[3];
    static const char *const ov[] = {"0", "0.5", "1"};
    for (int k = 0; k < 3; k++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "model: {layers: 8, hidden: 64, heads: 4, seq_len: 32, vocab: 128}\n"
                 "pipeline: {devices: 4, micro_batches: 8}\nschedule: {csv: %s}\n"
                 "cost: {forward: 1, backward_input: 1, backward_weight: 1, overlap: %s}\n",
                 file, ov[k]);
        pp_run_t r;
        pp_run_opts_t ro = {0};
        REQUIRE(run_load(&r, "t.yaml", yaml, NULL, 0, 0) == PP_OK, "overlap %s", ov[k]);
        REQUIRE(run_go(&r, &ro) == PP_OK, "overlap %s", ov[k]);
        span[k] = r.predicted_ms;
        run_free(&r);
    }
    EXPECT(span[0] > span[1] && span[1] > span[2] && span[2] > 0,
           "predicted steps at overlap 0, 0.5, 1: %g, %g, %g", span[0], span[1], span[2]);
}

/* Peak in-flight micro-batches: 1F1B stage i holds min(p - i, m), GPipe m. */
static void test_peak_inflight_local_lowering(void)
{
    static const int ps[] = {1, 2, 4, 8}, ms[] = {1, 2, 4, 8, 16};
    for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
        for (size_t c = 0; c < sizeof ms / sizeof ms[0]; c++)
            for (int kind = 0; kind < 2; kind++) {
                int p = ps[a], m = ms[c];
                progs_t g;
                if (kind == 0)
                    progs_gpipe(&g, p, m);
                else
                    progs_1f1b(&g, p, m);
                int sd[PP_MAX_DEVICES];
                for (int s = 0; s < p; s++)
                    sd[s] = s;
                ts_plan_t pb;
                pp_cost_model_t cm = make_costs(p, ts_rand_uniform(0.5, 2), ts_rand_uniform(0.5, 2),
                                                ts_rand_uniform(0.5, 2), ts_rand_uniform(0, 0.1));
                int rc = lower_progs(&pb, &g, sd, PP_TRANSPORT_NCCL, 4096,
                                     kind ? PP_SCHED_1F1B : PP_SCHED_GPIPE, &cm);
                pp_timeline_t tl;
                pp_report_t r;
                if (rc == 0 && simulate_plan(&tl, &pb.pl, &cm) == PP_OK) {
                    if (report_build(&r, NULL, &pb.pl, &tl, NULL) == PP_OK) {
                        for (int i = 0; i < p; i++) {
                            int want = kind ? (p - i < m ? p - i : m) : m;
                            EXPECT(r.per_device[i].peak_inflight == want,
                                   "%s p %d m %d stage %d: %d in flight, want %d",
                                   kind ? "1f1b" : "gpipe", p, m, i, r.per_device[i].peak_inflight,
                                   want);
                        }
                        report_free(&r);
                    }
                    timeline_free(&tl);
                } else {
                    EXPECT(0, "p %d m %d: could not lower or simulate", p, m);
                }
                cost_model_free(&cm);
                ts_plan_free(&pb);
                progs_free(&g);
            }
}

/* ---- the generators and plan_lower against the closed forms ---------------------------------- */

/* Sweep p in {1,2,4,8}, m in {1,...,32}: with T_F = T_I = T_W and free transfers the simulated
 * makespan and bubble are the closed forms; GPipe and 1F1B keep theirs for any F and B costs;
 * in-flight micro-batches are m (GPipe) and min(p - i, m) (1F1B). */
static void test_closed_form_sweep(void)
{
    static const int ps[] = {1, 2, 4, 8}, ms[] = {1, 2, 4, 8, 16, 32};
    static const pp_sched_kind_t kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED,
                                            PP_SCHED_ZBH1};
    int n_checked = 0;
    for (size_t ki = 0; ki < 4; ki++)
        for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
            for (size_t c = 0; c < sizeof ms / sizeof ms[0]; c++)
                for (int uneven = 0; uneven < 2; uneven++) {
                    pp_sched_kind_t kind = kinds[ki];
                    int p = ps[a], m = ms[c], v = kind == PP_SCHED_INTERLEAVED ? 2 : 1;
                    if (kind == PP_SCHED_INTERLEAVED && m % p != 0) continue;
                    if (kind == PP_SCHED_ZBH1 && m < p) continue;
                    /* Uneven F/B costs: only where the closed form does not need T_F = T_B. */
                    if (uneven && kind != PP_SCHED_GPIPE && kind != PP_SCHED_1F1B) continue;
                    const char *name = sched_kind_name(kind);
                    pp_plan_t plan;
                    int rc = ts_make_plan(&plan, kind, p, m, v);
                    EXPECT(rc == 0, "%s p %d m %d v %d: %s", name, p, m, v,
                           rc == -1 ? "generator refused" : "plan_lower failed");
                    if (rc != 0) continue;
                    double t = ts_rand_uniform(0.5, 2), f = t, bi = t, bw = t;
                    if (uneven) {
                        f = ts_rand_uniform(0.5, 2);
                        bi = ts_rand_uniform(0.5, 2);
                        bw = ts_rand_uniform(0.1, 1);
                    }
                    pp_cost_model_t cm = make_costs(plan.n_stages, f, bi, bw, 0.0);
                    pp_timeline_t tl;
                    pp_report_t r;
                    if (simulate_plan(&tl, &plan, &cm) != PP_OK) {
                        EXPECT(0, "%s p %d m %d: simulate_plan failed", name, p, m);
                    } else {
                        double want;
                        if (kind == PP_SCHED_INTERLEAVED)
                            want = (v * m + p - 1) * (f + bi + bw);
                        else if (kind == PP_SCHED_ZBH1)
                            want = (3 * m + p - 1) * t;
                        else
                            want = (m + p - 1) * (f + bi + bw);
                        double got = timeline_makespan(&tl);
                        EXPECT(fabs(got - want) <= 1e-9 * want,
                               "%s p %d m %d v %d (f %g i %g w %g): makespan %.12g, want %.12g",
                               name, p, m, v, f, bi, bw, got, want);
                        if (report_build(&r, NULL, &plan, &tl, NULL) == PP_OK) {
                            double th = report_bubble_theory(kind, p, m, v);
                            EXPECT(fabs(r.bubble - th) <= 1e-9,
                                   "%s p %d m %d: bubble %.12g, theory %.12g", name, p, m, r.bubble,
                                   th);
                            for (int i = 0;
                                 i < p && (kind == PP_SCHED_GPIPE || kind == PP_SCHED_1F1B); i++) {
                                int w = kind == PP_SCHED_GPIPE ? m : (p - i < m ? p - i : m);
                                EXPECT(r.per_device[i].peak_inflight == w,
                                       "%s p %d m %d device %d: %d in flight, want %d", name, p, m,
                                       i, r.per_device[i].peak_inflight, w);
                            }
                            for (int i = 0; i < p && kind == PP_SCHED_ZBH1; i++)
                                EXPECT(r.per_device[i].peak_inflight <= p,
                                       "zb-h1 p %d m %d device %d: %d in flight (> p)", p, m, i,
                                       r.per_device[i].peak_inflight);
                            report_free(&r);
                        }
                        timeline_free(&tl);
                        n_checked++;
                    }
                    cost_model_free(&cm);
                    plan_free(&plan);
                }
    EXPECT(n_checked == 132, "%d combinations checked, want 132", n_checked);
}

/* simulate_makespans runs several cost models in one pass: each makespan is simulate_plan's to
 * the bit, for random per-stage costs, with and without transfers, on overlapped pairs too. */
static void test_makespans_one_pass(void)
{
    for (int c = 0; c < 4; c++) {
        pp_plan_t pl;
        pp_schedule_t s = {0};
        if (c < 3) {
            pp_sched_kind_t kind[3] = {PP_SCHED_1F1B, PP_SCHED_INTERLEAVED, PP_SCHED_ZBH1};
            REQUIRE(ts_make_plan(&pl, kind[c], 4, 8, 2) == 0);
        } else {
            pp_job_t cf;
            REQUIRE(generate_dualpipev(&s, 4, 8) == PP_OK);
            ts_config_pipeline(&cf, PP_SCHED_DUALPIPEV, 4, 8, 8);
            REQUIRE(plan_lower(&pl, &s, &cf) == PP_OK);
        }
        pp_cost_model_t cm[3];
        const pp_cost_model_t *cp[3];
        double one[3], all[3];
        for (int l = 0; l < 3; l++) {
            cm[l] = make_costs(pl.n_stages, 1.0, 1.0, 1.0, l == 1 ? 0.0 : ts_rand_uniform(0, 1));
            for (int st = 0; st < pl.n_stages; st++) {
                cm[l].f[st] = ts_rand_uniform(0.5, 2.0);
                cm[l].b[st] = ts_rand_uniform(1.0, 4.0);
                cm[l].i[st] = ts_rand_uniform(0.5, 2.0);
                cm[l].w[st] = ts_rand_uniform(0.5, 2.0);
            }
            cm[l].overlap = ts_rand_uniform(0, 1);
            cp[l] = &cm[l];
            pp_timeline_t tl;
            REQUIRE(simulate_plan(&tl, &pl, &cm[l]) == PP_OK);
            one[l] = timeline_makespan(&tl);
            timeline_free(&tl);
        }
        REQUIRE(simulate_makespans(all, &pl, cp, 3) == PP_OK);
        for (int l = 0; l < 3; l++) {
            EXPECT(all[l] == one[l], "case %d, model %d: %.17g in one pass, %.17g alone", c, l,
                   all[l], one[l]);
            cost_model_free(&cm[l]);
        }
        ts_capture_begin();
        EXPECT(simulate_makespans(all, &pl, cp, 0) == PP_ERR_INTERNAL);
        ts_capture_end();
        plan_free(&pl);
        schedule_free(&s);
    }
}

/* One process's part over every device, merged through the single-process group, is the whole
 * simulation, bitwise, heads and tails included: the part keeps the unshifted axis and the merge
 * shifts it as simulate_plan does. (mpirun -np 2 and 4 are tests/check_mpi.sh.) */
static void test_part_of_one_process(void)
{
    static const pp_sched_kind_t kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED,
                                            PP_SCHED_ZBH1};
    pp_group_t g;
    group_single(&g);
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        pp_plan_t plan;
        int v = kinds[ki] == PP_SCHED_INTERLEAVED ? 2 : 1, rank_of[PP_MAX_DEVICES] = {0};
        REQUIRE(ts_make_plan(&plan, kinds[ki], 4, 8, v) == 0);
        pp_cost_model_t cm =
            make_costs(plan.n_stages, ts_rand_uniform(0.5, 2), ts_rand_uniform(0.5, 2),
                       ts_rand_uniform(0.1, 1), ts_rand_uniform(0.01, 0.2));
        for (int st = 0; st < plan.n_stages; st++) { /* the step's head and tail travel too */
            cm.head[st] = ts_rand_uniform(0, 0.5);
            cm.tail[st] = ts_rand_uniform(0, 2);
        }
        group_split_devices(&g, plan.n_devices, 0, rank_of);
        for (int d = 0; d < plan.n_devices; d++)
            EXPECT(rank_of[d] == 0, "device %d on rank %d of a single process", d, rank_of[d]);
        pp_sim_part_t part = {&g, rank_of, group_now_s() + 10, 10, -1};
        pp_timeline_t whole, merged;
        REQUIRE(simulate_plan(&whole, &plan, &cm) == PP_OK);
        REQUIRE(simulate_plan_part(&merged, &plan, &cm, &part) == PP_OK);
        REQUIRE(timeline_merge(&merged, &plan, rank_of, &g, 0.0) == PP_OK);
        int same = whole.step_ms[0] == merged.step_ms[0] && merged.has_op_times;
        for (int i = 0; i < plan.n_ops; i++)
            same &= whole.t[i].start_ms == merged.t[i].start_ms &&
                    whole.t[i].end_ms == merged.t[i].end_ms;
        EXPECT(same, "%s: the merged part differs from the whole (step %.17g vs %.17g)",
               sched_kind_name(kinds[ki]), merged.step_ms[0], whole.step_ms[0]);
        timeline_free(&whole);
        timeline_free(&merged);
        cost_model_free(&cm);
        plan_free(&plan);
    }
}

/* The devices split over processes: consecutive runs, evenly or devices_per_process each. */
static void test_split_devices(void)
{
    pp_group_t g;
    group_single(&g);
    g.size = 4;
    int rank_of[8];
    group_split_devices(&g, 8, 0, rank_of);
    for (int d = 0; d < 8; d++)
        EXPECT(rank_of[d] == d / 2, "even: device %d on rank %d", d, rank_of[d]);
    g.size = 2;
    group_split_devices(&g, 8, 4, rank_of);
    for (int d = 0; d < 8; d++)
        EXPECT(rank_of[d] == d / 4, "4 a process: device %d on rank %d", d, rank_of[d]);
}

int main(void)
{
    ts_rng_seed(0x9e3779b97f4a7c15ull);
    RUN(test_cost_model_uniform);
    RUN(test_two_device_chain);
    RUN(test_gap_before_each_op);
    RUN(test_head_and_tail);
    RUN(test_send_cost_delays_receiver);
    RUN(test_local_link_is_free);
    RUN(test_compute_comm_overlap);
    RUN(test_transfer_waits_for_receiver);
    RUN(test_channels_per_directed_pair);
    RUN(test_rejects_broken_plans);
    RUN(test_closed_forms_local_lowering);
    RUN(test_peak_inflight_local_lowering);
    RUN(test_closed_form_sweep);
    RUN(test_overlapped_pairs);
    RUN(test_overlapped_pairs_csv);
    RUN(test_makespans_one_pass);
    RUN(test_part_of_one_process);
    RUN(test_split_devices);
    return check_summary("test_simulate");
}
