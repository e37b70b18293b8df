/*
 * test_explain.c — the idle split, the critical path and the what-if figures of explain.h.
 *
 * Hand-built timelines (support.h) produce each idle reason on purpose and check the split to the
 * microsecond; random plans with random, even inconsistent, times check that the reasons always
 * add up to report.c's idle time and are never negative; the real chain (generate -> plan_lower
 * -> simulate_plan) over a sweep of schedules, p, m and costs checks that the simulator's split
 * has no launch time, that the critical path is contiguous from 0 to the makespan, and the
 * what-if figures against closed forms; the same plans re-timed with a host that starts every
 * compute op late check that exactly that time lands in launch. Times come from a seeded generator.
 */
#include "sim/explain.h"
#include "schedule/generate.h"
#include "report/report.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>

#define EPS 1e-9

static pp_cost_model_t make_costs(int n_stages, double f, double bi, double bw, double send)
{
    pp_cost_model_t cm;
    pp_job_cost_t c = {f, bi, bw, send, 0, 0};
    if (cost_model_uniform(&cm, n_stages, &c) != PP_OK) memset(&cm, 0, sizeof cm);
    return cm;
}

/* A compute-op interval, for ref_busy. */
typedef struct ref_iv {
    double start, end;
} ref_iv_t;

static int ref_iv_cmp(const void *a, const void *b)
{
    const ref_iv_t *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Device d's busy time from scratch: its compute-op intervals sorted by start, their union summed
 * piece by piece (what the split's busy_ms and the report's busy must both give, to the bit). */
static double ref_busy(const pp_plan_t *plan, const pp_timeline_t *tl, int d)
{
    ref_iv_t *iv = malloc(sizeof *iv * (size_t)(plan->n_ops > 0 ? plan->n_ops : 1));
    int n = 0;
    for (int k = 0; iv && k < plan->n_ops; k++)
        if (plan->ops[k].device == d && pp_role_row(plan->ops[k].role)->computes)
            iv[n++] = (ref_iv_t){tl->t[k].start_ms, tl->t[k].end_ms};
    if (!iv) return NAN;
    qsort(iv, (size_t)n, sizeof *iv, ref_iv_cmp);
    double busy = 0.0, lo = n ? iv[0].start : 0.0, hi = n ? iv[0].end : 0.0;
    for (int i = 1; i < n; i++) {
        if (iv[i].start > hi) {
            busy += hi - lo;
            lo = iv[i].start;
            hi = iv[i].end;
        } else if (iv[i].end > hi) {
            hi = iv[i].end;
        }
    }
    free(iv);
    return n ? busy + (hi - lo) : 0.0;
}

/* Every device's reasons add up to report.c's idle time and none is negative; the gaps lie in
 * the makespan window and add up per device too; the busy time is the union of the device's
 * compute intervals, to the bit. */
static void expect_split_sums(const pp_plan_t *plan, const pp_timeline_t *tl,
                              const pp_idle_split_t *s, const char *what)
{
    pp_report_t r;
    if (report_build(&r, NULL, plan, tl, NULL) != PP_OK) {
        EXPECT(0, "%s: report_build failed", what);
        return;
    }
    double span = timeline_makespan(tl), tol = EPS * (1.0 + span), gap_sum[PP_MAX_DEVICES] = {0};
    EXPECT(s->n_devices == plan->n_devices);
    EXPECT_NEAR(s->span_ms, span, tol, 0);
    for (int g = 0; g < s->n_gaps; g++) {
        const pp_gap_t *x = &s->gaps[g];
        EXPECT(x->end_ms > x->start_ms && x->device >= 0 && x->device < plan->n_devices,
               "%s: gap %d", what, g);
        gap_sum[x->device] += x->end_ms - x->start_ms;
        if (g > 0 && s->gaps[g - 1].device == x->device)
            EXPECT(s->gaps[g - 1].end_ms <= x->start_ms + tol, "%s: gaps %d and %d overlap", what,
                   g - 1, g);
    }
    for (int d = 0; d < plan->n_devices; d++) {
        double sum = 0.0;
        for (int c = 0; c < PP_IDLE_COUNT; c++) {
            double v = explain_idle_ms(s, d, (pp_idle_reason_t)c);
            EXPECT(v >= 0.0, "%s: device %d %s = %g", what, d, pp_idle_reasons[c].name, v);
            sum += v;
        }
        EXPECT(s->idle_ms[d] == r.per_device[d].idle_ms, "%s: device %d idle %.17g vs %.17g", what,
               d, s->idle_ms[d], r.per_device[d].idle_ms);
        double busy = ref_busy(plan, tl, d);
        EXPECT(s->busy_ms[d] == busy && r.per_device[d].busy_ms == busy,
               "%s: device %d busy %.17g (report %.17g), from scratch %.17g", what, d,
               s->busy_ms[d], r.per_device[d].busy_ms, busy);
        EXPECT_NEAR(sum, r.per_device[d].idle_ms, tol, 0);
        EXPECT_NEAR(gap_sum[d], r.per_device[d].idle_ms, tol, 0);
    }
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        double sum = 0.0;
        for (int d = 0; d < plan->n_devices; d++)
            sum += explain_idle_ms(s, d, (pp_idle_reason_t)c);
        EXPECT_NEAR(s->total_ms[c], sum, tol, 0);
    }
    report_free(&r);
}

/* The path is contiguous in a simulated timeline: starts at T0 with nothing before it, each link
 * starts when the previous ends, the last ends at the makespan; its parts add up to the span. */
static void expect_path_contiguous(const pp_plan_t *plan, const pp_timeline_t *tl,
                                   const pp_critical_path_t *cp, const char *what)
{
    double span = timeline_makespan(tl), tol = EPS * (1.0 + span);
    REQUIRE(cp->n > 0, "%s: empty path", what);
    EXPECT(cp->links[0].via == PP_VIA_START && tl->t[cp->links[0].op].start_ms == 0.0, "%s", what);
    for (int i = 1; i < cp->n; i++) {
        int a = cp->links[i - 1].op, b = cp->links[i].op;
        EXPECT(a < b && cp->links[i].via != PP_VIA_START, "%s: link %d", what, i);
        EXPECT_NEAR(tl->t[b].start_ms, tl->t[a].end_ms, tol, 0);
        EXPECT_NEAR(cp->links[i].wait_ms, 0.0, tol, 0);
    }
    EXPECT_NEAR(tl->t[cp->links[cp->n - 1].op].end_ms, span, tol, 0);
    EXPECT_NEAR(cp->span_ms, span, tol, 0);
    EXPECT_NEAR(cp->compute_ms + cp->comm_ms + cp->wait_ms, span, tol, 0);
    EXPECT_NEAR(cp->wait_ms, 0.0, tol, 0);
}

/* ---- the tables ------------------------------------------------------------------------------ */

static void test_tables(void)
{
    for (int i = 0; i < PP_IDLE_COUNT; i++) {
        const pp_idle_reason_info_t *r = &pp_idle_reasons[i];
        EXPECT(r->name && r->name[0] && r->column && r->column[0] && r->label && r->label[0] &&
                   r->cname && r->cname[0] && r->colour && r->colour[0] == '#',
               "reason %d", i);
        for (int j = 0; j < i; j++)
            EXPECT(strcmp(r->name, pp_idle_reasons[j].name) != 0 &&
                       strcmp(r->column, pp_idle_reasons[j].column) != 0,
                   "reasons %d and %d share a name", i, j);
    }
    for (int i = 0; i < PP_WHAT_IF_COUNT; i++) {
        EXPECT(pp_what_ifs[i].name && pp_what_ifs[i].name[0] && pp_what_ifs[i].label, "row %d", i);
        for (int j = 0; j < i; j++)
            EXPECT(strcmp(pp_what_ifs[i].name, pp_what_ifs[j].name) != 0);
    }
    EXPECT(!pp_what_ifs[PP_WHAT_IF_NO_LAUNCH].free_comm &&
           !pp_what_ifs[PP_WHAT_IF_NO_LAUNCH].even_stages);
    EXPECT(pp_what_ifs[PP_WHAT_IF_ALL].free_comm && pp_what_ifs[PP_WHAT_IF_ALL].even_stages);
}

/* ---- each reason on purpose ------------------------------------------------------------------ */

/* Two devices. dev0: F(0,0) over [0, f]. Its output leaves at f + q (q: queued) and lands at
 * f + q + c on dev1, whose F(1,0) starts L later and runs g. With `early`, dev1 first runs an
 * independent op over [0, x], x < f, so its wait is an interior stretch; without, it is warm-up.
 * The RECV also waits for dev1's early op (a slot's last reader): that must not count as
 * upstream compute. */
typedef struct two_dev {
    ts_plan_t b;
    int f0, early, recv, f1;
    double f, x, q, c, L, g;
} two_dev_t;

static void two_dev_build(two_dev_t *t, int early)
{
    t->f = ts_rand_uniform(1, 2);
    t->x = ts_rand_uniform(0.1, 0.9);
    t->q = ts_rand_uniform(0.1, 0.3);
    t->c = ts_rand_uniform(0.2, 0.5);
    t->L = ts_rand_uniform(0.05, 0.2);
    t->g = ts_rand_uniform(1, 2);
    ts_plan_init(&t->b, 2, 2, 2, PP_SCHED_STEPS);
    t->early = early ? ts_plan_compute(&t->b, 1, PP_ACT_W, 1, 1, -1, -1) : -1;
    if (early) ts_plan_time(&t->b, t->early, 0, t->x);
    t->f0 = ts_plan_time(&t->b, ts_plan_compute(&t->b, 0, PP_ACT_F, 0, 0, -1, -1), 0, t->f);
    t->recv = ts_plan_transfer(&t->b, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_PEER, 64, t->f0);
    if (early) { /* the RECV waits for the slot's last reader too */
        pp_op_t *r = &t->b.pl.ops[t->recv];
        r->dep_begin = t->b.pl.n_deps_total;
        r->n_deps = 1;
        t->b.pl.deps = realloc(t->b.pl.deps, sizeof(int) * (size_t)(t->b.pl.n_deps_total + 1));
        t->b.pl.deps[t->b.pl.n_deps_total++] = t->early;
        t->b.cap_deps = t->b.pl.n_deps_total;
    }
    double s = t->f + t->q, e = s + t->c;
    ts_plan_time(&t->b, t->recv - 1, s, e);
    ts_plan_time(&t->b, t->recv, s, e);
    t->f1 = ts_plan_compute(&t->b, 1, PP_ACT_F, 1, 0, t->recv, -1);
    ts_plan_time(&t->b, t->f1, e + t->L, e + t->L + t->g);
}

static void test_each_reason_on_purpose(void)
{
    for (int early = 0; early < 2; early++) {
        two_dev_t t;
        two_dev_build(&t, early);
        pp_timeline_t tl;
        REQUIRE(ts_plan_timeline(&t.b, &tl, PP_MODE_MEASURE, NULL, 0) == PP_OK);
        pp_idle_split_t s;
        REQUIRE(explain_idle_split(&s, &t.b.pl, &tl) == PP_OK);
        double end = t.f + t.q + t.c + t.L + t.g, tol = 1e-12;
        /* dev0 is done at f and waits for the end of the step. */
        EXPECT_NEAR(explain_idle_ms(&s, 0, PP_IDLE_COOLDOWN), end - t.f, tol, 0);
        EXPECT_NEAR(explain_idle_ms(&s, 0, PP_IDLE_WARMUP), 0, tol, 0);
        EXPECT_NEAR(explain_idle_ms(&s, 0, PP_IDLE_SCHEDULE) +
                        explain_idle_ms(&s, 0, PP_IDLE_COMM) +
                        explain_idle_ms(&s, 0, PP_IDLE_LAUNCH),
                    0, tol, 0);
        if (early) { /* [x, f) upstream, [f, f+q+c) transfer, then L of launch */
            EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_WARMUP), 0, tol, 0);
            EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_SCHEDULE), t.f - t.x, tol, 0);
            EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_COMM), t.q + t.c, tol, 0);
            EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_LAUNCH), t.L, tol, 0);
            /* the gaps name the op that ended them, in time order */
            int seen = 0;
            for (int g = 0; g < s.n_gaps; g++) {
                const pp_gap_t *x = &s.gaps[g];
                if (x->device != 1) continue;
                static const pp_idle_reason_t want[] = {PP_IDLE_SCHEDULE, PP_IDLE_COMM,
                                                        PP_IDLE_LAUNCH};
                REQUIRE(seen < 3, "more than three gaps on device 1");
                EXPECT(x->reason == want[seen] && x->op == t.f1, "gap %d: %s op %d", g,
                       pp_idle_reasons[x->reason].name, x->op);
                seen++;
            }
            EXPECT(seen == 3, "%d gaps on device 1", seen);
        } else { /* all of dev1's wait precedes its first compute op */
            EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_WARMUP), t.f + t.q + t.c + t.L, tol, 0);
            EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_SCHEDULE), 0, tol, 0);
        }
        EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_COOLDOWN), 0, tol, 0);
        expect_split_sums(&t.b.pl, &tl, &s, early ? "interior" : "warm-up");
        explain_idle_split_free(&s);
        explain_idle_split_free(&s); /* twice: safe */
        timeline_free(&tl);
        ts_plan_free(&t.b);
    }
}

/* A device without compute ops waits the whole step (warm-up); overlapping compute ops count
 * once; a compute op that starts before its dependency ended (clock skew) gets no negative time. */
static void test_edge_cases(void)
{
    ts_plan_t b;
    ts_plan_init(&b, 3, 2, 2, PP_SCHED_STEPS);
    int a = ts_plan_time(&b, ts_plan_compute(&b, 0, PP_ACT_F, 0, 0, -1, -1), 0, 2);
    ts_plan_time(&b, ts_plan_compute(&b, 0, PP_ACT_F, 0, 1, -1, -1), 1, 3); /* overlaps a */
    int r = ts_plan_transfer(&b, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_PEER, 8, a);
    ts_plan_time(&b, r - 1, 2, 2.5);
    ts_plan_time(&b, r, 2, 2.5);
    ts_plan_time(&b, ts_plan_compute(&b, 1, PP_ACT_B, 1, 1, -1, -1), 0, 1);
    ts_plan_time(&b, ts_plan_compute(&b, 1, PP_ACT_F, 1, 0, r, -1), 2.4, 4); /* before 2.5 */
    pp_timeline_t tl;
    REQUIRE(ts_plan_timeline(&b, &tl, PP_MODE_MEASURE, NULL, 0) == PP_OK);
    pp_idle_split_t s;
    REQUIRE(explain_idle_split(&s, &b.pl, &tl) == PP_OK);
    EXPECT_NEAR(explain_idle_ms(&s, 2, PP_IDLE_WARMUP), 4, 1e-12, 0);
    EXPECT_NEAR(s.idle_ms[2], 4, 1e-12, 0);
    EXPECT_NEAR(explain_idle_ms(&s, 0, PP_IDLE_COOLDOWN), 1, 1e-12, 0);
    EXPECT_NEAR(s.idle_ms[0], 1, 1e-12, 0);
    /* device 1: idle [1, 2.4): upstream done at 2, transfer "ends" at 2.5 > 2.4 */
    EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_SCHEDULE), 1, 1e-12, 0);
    EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_COMM), 0.4, 1e-12, 0);
    EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_LAUNCH), 0, 1e-12, 0);
    expect_split_sums(&b.pl, &tl, &s, "edge cases");
    explain_idle_split_free(&s);
    timeline_free(&tl);
    ts_plan_free(&b);
}

/* Random plans with random times, consistent or not: the reasons still add up. */
static void test_random_timelines_add_up(void)
{
    for (int trial = 0; trial < 200; trial++) {
        int p = ts_rand_int(1, 5), n = ts_rand_int(1, 40);
        ts_plan_t b;
        ts_plan_init(&b, p, p, 4, PP_SCHED_STEPS);
        while (b.pl.n_ops < n) {
            int d = ts_rand_int(0, p - 1), k = b.pl.n_ops;
            int dep0 = k > 0 && ts_rand_int(0, 1) ? ts_rand_int(0, k - 1) : -1;
            if (p > 1 && ts_rand_int(0, 3) == 0) {
                int dst = (d + 1) % p;
                ts_plan_transfer(&b, d, dst, PP_ACT_SEND_F, d, dst, 0, PP_TRANSPORT_NCCL, 8, dep0);
            } else {
                int dep1 = k > 0 && ts_rand_int(0, 1) ? ts_rand_int(0, k - 1) : -1;
                ts_plan_compute(&b, d, (pp_action_kind_t)ts_rand_int(0, 3), d, 0, dep0, dep1);
            }
        }
        for (int k = 0; k < b.pl.n_ops; k++) {
            double s = ts_rand_uniform(0, 10);
            ts_plan_time(&b, k, s, s + (ts_rand_int(0, 5) ? ts_rand_uniform(0, 3) : 0.0));
        }
        pp_timeline_t tl;
        REQUIRE(ts_plan_timeline(&b, &tl, PP_MODE_MEASURE, NULL, 0) == PP_OK);
        pp_idle_split_t s;
        pp_critical_path_t cp;
        if (explain_idle_split(&s, &b.pl, &tl) == PP_OK) {
            expect_split_sums(&b.pl, &tl, &s, "random");
            explain_idle_split_free(&s);
        } else {
            EXPECT(0, "trial %d: split failed", trial);
        }
        if (explain_critical_path(&cp, &b.pl, &tl) == PP_OK) {
            double span = timeline_makespan(&tl);
            EXPECT(cp.n >= 1);
            EXPECT_NEAR(cp.compute_ms + cp.comm_ms + cp.wait_ms, span, EPS * (1 + span), 0);
            double t1 = 0;
            for (int k = 0; k < tl.n_ops; k++)
                if (k == 0 || tl.t[k].end_ms > t1) t1 = tl.t[k].end_ms;
            EXPECT(tl.t[cp.links[cp.n - 1].op].end_ms == t1);
            for (int i = 1; i < cp.n; i++)
                EXPECT(cp.links[i - 1].op < cp.links[i].op);
            explain_critical_path_free(&cp);
        } else {
            EXPECT(0, "trial %d: critical path failed", trial);
        }
        timeline_free(&tl);
        ts_plan_free(&b);
    }
}

/* ---- critical path on hand-built timelines --------------------------------------------------- */

/* F on dev0 -> transfer -> F, B on dev1 -> transfer -> B on dev0, with a launch delay before dev1's
 * B; dev0 runs an unrelated F in between, which is not on the path. */
static void test_critical_path_hand_built(void)
{
    double f = ts_rand_uniform(1, 2), c = ts_rand_uniform(0.1, 0.3), L = ts_rand_uniform(0.1, 0.4);
    ts_plan_t b;
    ts_plan_init(&b, 2, 2, 2, PP_SCHED_STEPS);
    int f0 = ts_plan_time(&b, ts_plan_compute(&b, 0, PP_ACT_F, 0, 0, -1, -1), 0, f);
    int r0 = ts_plan_transfer(&b, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_PEER, 8, f0);
    ts_plan_time(&b, r0 - 1, f, f + c);
    ts_plan_time(&b, r0, f, f + c);
    int other = ts_plan_time(&b, ts_plan_compute(&b, 0, PP_ACT_F, 0, 1, -1, -1), f, 2 * f);
    int f1 = ts_plan_time(&b, ts_plan_compute(&b, 1, PP_ACT_F, 1, 0, r0, -1), f + c, 2 * f + c);
    int b1 = ts_plan_time(&b, ts_plan_compute(&b, 1, PP_ACT_B, 1, 0, f1, -1), 2 * f + c + L,
                          3 * f + c + L);
    int r1 = ts_plan_transfer(&b, 1, 0, PP_ACT_SEND_B, 1, 0, 0, PP_TRANSPORT_PEER, 8, b1);
    ts_plan_time(&b, r1 - 1, 3 * f + c + L, 3 * f + 2 * c + L);
    ts_plan_time(&b, r1, 3 * f + c + L, 3 * f + 2 * c + L); /* as a peer copy records it */
    int b0 = ts_plan_compute(&b, 0, PP_ACT_B, 0, 0, f0, r1);
    ts_plan_time(&b, b0, 3 * f + 2 * c + L, 4 * f + 2 * c + L);
    pp_timeline_t tl;
    REQUIRE(ts_plan_timeline(&b, &tl, PP_MODE_MEASURE, NULL, 0) == PP_OK);
    pp_critical_path_t cp;
    REQUIRE(explain_critical_path(&cp, &b.pl, &tl) == PP_OK);
    static const pp_path_via_t via[] = {PP_VIA_START, PP_VIA_DEP, PP_VIA_DEP,
                                        PP_VIA_DEP,   PP_VIA_DEP, PP_VIA_DEP};
    int want[] = {f0, r0, f1, b1, r1, b0};
    REQUIRE(cp.n == 6, "path of %d links", cp.n);
    for (int i = 0; i < 6; i++)
        EXPECT(cp.links[i].op == want[i] && cp.links[i].via == via[i], "link %d: op %d via %d", i,
               cp.links[i].op, (int)cp.links[i].via);
    EXPECT(cp.links[0].op != other);
    EXPECT_NEAR(cp.links[3].wait_ms, L, 1e-12, 0);
    EXPECT_NEAR(cp.wait_ms, L, 1e-12, 0);
    EXPECT_NEAR(cp.compute_ms, 4 * f, 1e-12, 0);
    EXPECT_NEAR(cp.comm_ms, 2 * c, 1e-12, 0);
    EXPECT_NEAR(cp.span_ms, 4 * f + 2 * c + L, 1e-12, 0);
    explain_critical_path_free(&cp);
    explain_critical_path_free(&cp);
    timeline_free(&tl);
    ts_plan_free(&b);
}

/* The stream order sets a start when no dependency does; a transfer held back by the receiver's
 * side (a slot's last reader) puts the receiver's op on the path, not the producer. */
static void test_critical_path_stream_and_receiver(void)
{
    ts_plan_t b;
    ts_plan_init(&b, 2, 2, 1, PP_SCHED_STEPS);
    int x = ts_plan_compute(&b, 1, PP_ACT_W, 1, 0, -1, -1); /* long op on dev1 */
    int f0 = ts_plan_compute(&b, 0, PP_ACT_F, 0, 0, -1, -1);
    int g0 = ts_plan_compute(&b, 0, PP_ACT_F, 0, 1, -1, -1); /* after f0 by stream order */
    int s = ts_plan_op(&b, 0, PP_ROLE_SEND, PP_ACT_SEND_F, 0, 0, &f0, 1);
    int r = ts_plan_op(&b, 1, PP_ROLE_RECV, PP_ACT_RECV_F, 1, 0, &x, 1);
    b.pl.ops[s].peer = r;
    b.pl.ops[r].peer = s;
    b.pl.ops[s].link = b.pl.ops[r].link = PP_TRANSPORT_PEER;
    int f1 = ts_plan_compute(&b, 1, PP_ACT_F, 1, 0, r, -1);
    pp_cost_model_t cm = make_costs(2, 1.0, 1, 5.0, 0.25); /* W = 5: x ends last of the inputs */
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &b.pl, &cm) == PP_OK);
    pp_critical_path_t cp;
    REQUIRE(explain_critical_path(&cp, &b.pl, &tl) == PP_OK);
    REQUIRE(cp.n == 3, "path of %d links", cp.n);
    EXPECT(cp.links[0].op == x && cp.links[1].op == r && cp.links[2].op == f1);
    EXPECT(cp.links[1].via == PP_VIA_DEP && cp.links[2].via == PP_VIA_DEP);
    expect_path_contiguous(&b.pl, &tl, &cp, "receiver side");
    explain_critical_path_free(&cp);
    timeline_free(&tl);

    EXPECT(g0 > f0);
    ts_plan_free(&b);

    /* Two independent F on one device: the second ends last, tied to the first by stream order. */
    ts_plan_init(&b, 1, 1, 2, PP_SCHED_STEPS);
    f0 = ts_plan_compute(&b, 0, PP_ACT_F, 0, 0, -1, -1);
    g0 = ts_plan_compute(&b, 0, PP_ACT_F, 0, 1, -1, -1);
    REQUIRE(simulate_plan(&tl, &b.pl, &cm) == PP_OK);
    REQUIRE(explain_critical_path(&cp, &b.pl, &tl) == PP_OK);
    REQUIRE(cp.n == 2, "path of %d links", cp.n);
    EXPECT(cp.links[0].op == f0 && cp.links[1].op == g0 && cp.links[1].via == PP_VIA_STREAM);
    expect_path_contiguous(&b.pl, &tl, &cp, "stream order");
    explain_critical_path_free(&cp);
    timeline_free(&tl);
    cost_model_free(&cm);
    ts_plan_free(&b);
}

/* ---- the simulator's timelines from the real chain ------------------------------------------- */

/* Per-stage costs drawn at random around (f, i, w), so stages are uneven. */
static void uneven_costs(pp_cost_model_t *cm, double spread)
{
    for (int s = 0; s < cm->n_stages; s++) {
        cm->f[s] *= ts_rand_uniform(1 - spread, 1 + spread);
        cm->i[s] *= ts_rand_uniform(1 - spread, 1 + spread);
        cm->w[s] *= ts_rand_uniform(1 - spread, 1 + spread);
        cm->b[s] = cm->i[s] + cm->w[s];
    }
}

static void test_simulated_sweep(void)
{
    static const int ps[] = {1, 2, 4, 8}, ms[] = {1, 4, 8, 32};
    static const pp_sched_kind_t kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED,
                                            PP_SCHED_ZBH1};
    int n_checked = 0;
    for (size_t ki = 0; ki < 4; ki++)
        for (size_t a = 0; a < sizeof ps / sizeof ps[0]; a++)
            for (size_t c = 0; c < sizeof ms / sizeof ms[0]; c++)
                for (int variant = 0; variant < 3; variant++) {
                    pp_sched_kind_t kind = kinds[ki];
                    int p = ps[a], m = ms[c], v = kind == PP_SCHED_INTERLEAVED ? 2 : 1;
                    if (kind == PP_SCHED_INTERLEAVED && m % p != 0) continue;
                    if (kind == PP_SCHED_ZBH1 && m < p) continue;
                    char what[96];
                    snprintf(what, sizeof what, "%s p %d m %d variant %d", sched_kind_name(kind), p,
                             m, variant);
                    pp_plan_t plan;
                    if (ts_make_plan(&plan, kind, p, m, v) != 0) {
                        EXPECT(0, "%s: no plan", what);
                        continue;
                    }
                    /* variant 0: uniform, free transfers; 1: + transfers; 2: + uneven stages */
                    double t = ts_rand_uniform(0.5, 2);
                    pp_cost_model_t cm = make_costs(plan.n_stages, t, t, t,
                                                    variant ? ts_rand_uniform(0.05, 0.4) : 0);
                    if (variant == 2) uneven_costs(&cm, 0.5);
                    pp_timeline_t tl;
                    pp_explain_t ex;
                    REQUIRE(simulate_plan(&tl, &plan, &cm) == PP_OK);
                    REQUIRE(explain_build(&ex, &plan, &tl, &tl, &cm) == PP_OK);
                    EXPECT(ex.known && ex.have_what_if);
                    expect_split_sums(&plan, &tl, &ex.split, what);
                    for (int d = 0; d < p; d++)
                        EXPECT(explain_idle_ms(&ex.split, d, PP_IDLE_LAUNCH) == 0.0,
                               "%s: device %d launch %g", what, d,
                               explain_idle_ms(&ex.split, d, PP_IDLE_LAUNCH));
                    if (variant == 0) /* free transfers: no comm beyond rounding */
                        EXPECT(ex.split.total_ms[PP_IDLE_COMM] <= 1e-9 * ex.split.span_ms,
                               "%s: comm %g", what, ex.split.total_ms[PP_IDLE_COMM]);
                    if (variant == 0 && (kind == PP_SCHED_GPIPE || kind == PP_SCHED_1F1B))
                        for (int d = 0; d < p; d++)
                            EXPECT_NEAR(ex.split.idle_ms[d], (p - 1) * 3 * t, 1e-9, 1e-12);
                    if (variant == 0 && p == 1) EXPECT(ex.split.idle_ms[0] == 0.0);
                    expect_path_contiguous(&plan, &tl, &ex.path, what);
                    EXPECT(ex.split_sim.n_devices == p);
                    for (int r = 0; r < PP_IDLE_COUNT; r++)
                        EXPECT(ex.split_sim.total_ms[r] == ex.split.total_ms[r]);
                    EXPECT_NEAR(ex.what_if.step_ms[PP_WHAT_IF_NO_LAUNCH], timeline_makespan(&tl),
                                1e-12, 0);
                    explain_free(&ex);
                    explain_free(&ex);
                    timeline_free(&tl);
                    cost_model_free(&cm);
                    plan_free(&plan);
                    n_checked++;
                }
    EXPECT(n_checked == 168, "%d combinations checked", n_checked);
}

/* The simulator's rules with a host that is late by `late` ms for every compute op: each starts
 * that long after its channel (plan.h) and inputs allowed (a stand-in for a measured run with
 * launch gaps). */
static void retime_late(const pp_plan_t *plan, const pp_cost_model_t *cm, double late,
                        pp_timeline_t *tl)
{
    double *free_at = calloc((size_t)pp_channel_count(plan->n_devices), sizeof *free_at);
    if (!free_at) abort();
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        int n_side = pp_action_is_compute(op->kind) ? 1 : 2, side[2] = {k, op->peer};
        double t = 0.0;
        for (int i = 0; i < n_side; i++) {
            const pp_op_t *x = &plan->ops[side[i]];
            t = fmax(t, free_at[pp_plan_channel(plan, side[i])]);
            for (int j = 0; j < x->n_deps; j++) {
                int d = plan->deps[x->dep_begin + j];
                if (d != side[0] && d != side[1]) t = fmax(t, tl->t[d].end_ms);
            }
        }
        double dur = pp_action_is_compute(op->kind)
                         ? (op->kind == PP_ACT_F   ? cm->f[op->stage]
                            : op->kind == PP_ACT_B ? cm->b[op->stage]
                            : op->kind == PP_ACT_I ? cm->i[op->stage]
                                                   : cm->w[op->stage])
                         : (op->link == PP_TRANSPORT_LOCAL ? 0.0 : cm->send);
        if (n_side == 1) t += late;
        for (int i = 0; i < n_side; i++) {
            tl->t[side[i]] = (pp_op_time_t){t, t + dur};
            free_at[pp_plan_channel(plan, side[i])] = t + dur;
        }
        if (n_side == 2) k++; /* the RECV sits right after its SEND */
    }
    free(free_at);
}

/* A late host in a whole pipeline: every compute op but each device's first adds exactly `late`
 * of launch time; on the critical path every compute link but the first waits `late`; the
 * simulator with the same costs (no launch gaps) is the what-if row. */
static void test_late_host_is_launch(void)
{
    static const pp_sched_kind_t kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED,
                                            PP_SCHED_ZBH1};
    for (int ki = 0; ki < 4; ki++) {
        pp_plan_t plan;
        int p = 4, m = 8, v = kinds[ki] == PP_SCHED_INTERLEAVED ? 2 : 1;
        REQUIRE(ts_make_plan(&plan, kinds[ki], p, m, v) == 0);
        pp_cost_model_t cm = make_costs(plan.n_stages, 1, 1, 1, ts_rand_uniform(0.05, 0.2));
        uneven_costs(&cm, 0.3);
        double late = ts_rand_uniform(0.01, 0.05);
        pp_timeline_t tl;
        REQUIRE(timeline_init(&tl, PP_MODE_MEASURE, plan.n_ops, p, 1) == PP_OK);
        retime_late(&plan, &cm, late, &tl);
        tl.has_op_times = 1;
        tl.step_ms[0] = timeline_makespan(&tl);
        pp_explain_t ex;
        REQUIRE(explain_build(&ex, &plan, &tl, NULL, &cm) == PP_OK);
        expect_split_sums(&plan, &tl, &ex.split, sched_kind_name(kinds[ki]));
        for (int d = 0; d < p; d++) {
            int n = 0;
            for (int k = 0; k < plan.n_ops; k++)
                n += plan.ops[k].device == d && plan.ops[k].role == PP_ROLE_COMPUTE;
            EXPECT_NEAR(explain_idle_ms(&ex.split, d, PP_IDLE_LAUNCH), (n - 1) * late, 1e-9, 0);
        }
        int n_compute = 0;
        for (int i = 0; i < ex.path.n; i++)
            n_compute += ex.path.links[i].role == PP_ROLE_COMPUTE;
        EXPECT_NEAR(ex.path.wait_ms, (n_compute - 1) * late, 1e-9, 0); /* T0 is the first start */
        pp_timeline_t sim;
        REQUIRE(simulate_plan(&sim, &plan, &cm) == PP_OK);
        EXPECT(ex.what_if.step_ms[PP_WHAT_IF_NO_LAUNCH] == timeline_makespan(&sim));
        EXPECT(timeline_makespan(&tl) > timeline_makespan(&sim));
        timeline_free(&sim);
        explain_free(&ex);
        timeline_free(&tl);
        cost_model_free(&cm);
        plan_free(&plan);
    }
}

/* Transfers that cost something show up as comm on the receivers, not on device 0 in a
 * 2-device GPipe: dev1 waits for each forward's transfer. */
static void test_transfer_cost_is_comm(void)
{
    pp_plan_t plan;
    REQUIRE(ts_make_plan(&plan, PP_SCHED_GPIPE, 2, 4, 1) == 0);
    double f = ts_rand_uniform(0.5, 1), c = ts_rand_uniform(0.1, 0.3);
    pp_cost_model_t cm = make_costs(2, f, f, f, c);
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &plan, &cm) == PP_OK);
    pp_idle_split_t s;
    REQUIRE(explain_idle_split(&s, &plan, &tl) == PP_OK);
    /* dev1's first F waits f + c: warm-up; the forwards arrive every f after: no further wait.
     * dev0's first B waits for dev1's last F and B (2f, 3f) and the gradient's transfer c. */
    EXPECT_NEAR(explain_idle_ms(&s, 1, PP_IDLE_WARMUP), f + c, 1e-12, 1e-12);
    EXPECT_NEAR(explain_idle_ms(&s, 0, PP_IDLE_COMM), c, 1e-12, 1e-12);
    EXPECT(explain_idle_ms(&s, 0, PP_IDLE_SCHEDULE) > 0);
    expect_split_sums(&plan, &tl, &s, "gpipe 2x4");
    explain_idle_split_free(&s);
    timeline_free(&tl);
    cost_model_free(&cm);
    plan_free(&plan);
}

/* ---- what-if ------------------------------------------------------------------------------- */

/* 1F1B with uneven stages and a transfer cost: free transfers never slow the step; even stages
 * and free transfers together give the closed form with the mean costs; the model is not
 * changed. */
static void test_what_if(void)
{
    static const int ps[] = {2, 4}, ms[] = {4, 8, 32};
    for (size_t a = 0; a < 2; a++)
        for (size_t c = 0; c < 3; c++) {
            int p = ps[a], m = ms[c];
            pp_plan_t plan;
            REQUIRE(ts_make_plan(&plan, PP_SCHED_1F1B, p, m, 1) == 0);
            pp_cost_model_t cm = make_costs(p, 1, 1, 1, ts_rand_uniform(0.05, 0.3));
            uneven_costs(&cm, 0.6);
            double mf = 0, mb = 0, f_before = cm.f[0], send_before = cm.send;
            for (int s = 0; s < p; s++) {
                mf += cm.f[s] / p;
                mb += cm.b[s] / p;
            }
            pp_what_if_t w;
            REQUIRE(explain_what_if(&w, &plan, &cm) == PP_OK);
            pp_timeline_t tl;
            REQUIRE(simulate_plan(&tl, &plan, &cm) == PP_OK);
            double base = timeline_makespan(&tl);
            EXPECT(w.step_ms[PP_WHAT_IF_NO_LAUNCH] == base);
            EXPECT(w.step_ms[PP_WHAT_IF_FREE_COMM] <= base + 1e-12);
            EXPECT(w.step_ms[PP_WHAT_IF_FREE_COMM] < base, "p %d m %d: transfers cost nothing?", p,
                   m);
            EXPECT(w.step_ms[PP_WHAT_IF_ALL] <= w.step_ms[PP_WHAT_IF_EVEN_STAGES] + 1e-12);
            EXPECT_NEAR(w.step_ms[PP_WHAT_IF_ALL], (m + p - 1) * (mf + mb), 1e-9, 1e-12);
            EXPECT(cm.f[0] == f_before && cm.send == send_before);
            timeline_free(&tl);
            cost_model_free(&cm);
            plan_free(&plan);
        }
}

/* ---- explain_build and broken input ---------------------------------------------------------- */

static void test_build_without_op_times(void)
{
    pp_plan_t plan;
    REQUIRE(ts_make_plan(&plan, PP_SCHED_1F1B, 2, 4, 1) == 0);
    pp_timeline_t tl;
    REQUIRE(timeline_init(&tl, PP_MODE_MEASURE, plan.n_ops, 2, 3) == PP_OK);
    pp_cost_model_t cm = make_costs(2, 1, 1, 1, 0);
    pp_explain_t ex;
    REQUIRE(explain_build(&ex, &plan, &tl, NULL, &cm) == PP_OK);
    EXPECT(!ex.known && ex.have_what_if && ex.split.n_devices == 0 && ex.path.n == 0);
    EXPECT_NEAR(ex.what_if.step_ms[PP_WHAT_IF_NO_LAUNCH], 5 * 3, 1e-12, 0);
    explain_free(&ex);
    REQUIRE(explain_build(&ex, &plan, &tl, NULL, NULL) == PP_OK);
    EXPECT(!ex.known && !ex.have_what_if);
    explain_free(&ex);
    explain_free(NULL);
    timeline_free(&tl);
    cost_model_free(&cm);
    plan_free(&plan);
}

static void test_rejects_broken_input(void)
{
    ts_plan_t b;
    ts_plan_init(&b, 2, 2, 1, PP_SCHED_STEPS);
    int later = 1;
    ts_plan_op(&b, 0, PP_ROLE_COMPUTE, PP_ACT_F, 0, 0, &later, 1);
    ts_plan_compute(&b, 1, PP_ACT_F, 1, 0, -1, -1);
    pp_timeline_t tl;
    REQUIRE(ts_plan_timeline(&b, &tl, PP_MODE_MEASURE, NULL, 0) == PP_OK);
    pp_idle_split_t s;
    pp_critical_path_t cp;
    ts_capture_begin();
    pp_status_t st1 = explain_idle_split(&s, &b.pl, &tl);
    pp_status_t st2 = explain_critical_path(&cp, &b.pl, &tl);
    b.pl.ops[0].n_deps = 0; /* now fine, but the timeline is one op short */
    tl.n_ops = 1;
    pp_status_t st3 = explain_idle_split(&s, &b.pl, &tl);
    const char *err = ts_capture_end();
    EXPECT(st1 == PP_ERR_INTERNAL && st2 == PP_ERR_INTERNAL && st3 == PP_ERR_INTERNAL);
    EXPECT(strstr(err, "not earlier in plan order") != NULL, "stderr: %s", err);
    EXPECT(s.n_devices == 0 && s.gaps == NULL && cp.n == 0 && cp.links == NULL);
    tl.n_ops = 2;
    timeline_free(&tl);
    ts_plan_free(&b);
}

int main(void)
{
    ts_rng_seed(0x5eed0e1a1b2c3d4eull);
    RUN(test_tables);
    RUN(test_each_reason_on_purpose);
    RUN(test_edge_cases);
    RUN(test_random_timelines_add_up);
    RUN(test_critical_path_hand_built);
    RUN(test_critical_path_stream_and_receiver);
    RUN(test_simulated_sweep);
    RUN(test_transfer_cost_is_comm);
    RUN(test_late_host_is_launch);
    RUN(test_what_if);
    RUN(test_build_without_op_times);
    RUN(test_rejects_broken_input);
    return check_summary("test_explain");
}
