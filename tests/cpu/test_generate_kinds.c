/*
 * test_generate_kinds.c — the generators of looped BFS, ZB-H2, interleaved zero-bubble, ZB-V and
 * DualPipeV: exact small orders (traced by hand from the published generators), validity of the
 * schedule and of its lowered plan, the simulated makespan under uniform costs against the closed
 * forms, peak in-flight micro-batches, CSV export and import giving the same plan, `show`'s grid,
 * and PyTorch's own orders (tests/data/torch_*.csv, when present) simulated side by side.
 *
 * Costs are per stage (one chunk on V and interleaved kinds): F = I = W = 1, B = 2, transfers free,
 * so makespans are integers and compare exactly.
 */
#include "schedule/generate.h"
#include "plan/plan.h"
#include "sim/simulate.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------------------------- */

typedef pp_status_t (*gen_fn)(pp_schedule_t *out, int p, int m, int v);

static pp_status_t gen_bfs(pp_schedule_t *o, int p, int m, int v)
{
    return generate_looped_bfs(o, p, m, v);
}
static pp_status_t gen_izb(pp_schedule_t *o, int p, int m, int v)
{
    return generate_interleaved_zb(o, p, m, v);
}
static pp_status_t gen_zbh2(pp_schedule_t *o, int p, int m, int v)
{
    return generate_zbh2(o, p, m);
}
static pp_status_t gen_zbv(pp_schedule_t *o, int p, int m, int v)
{
    return generate_zbv(o, p, m);
}
static pp_status_t gen_dpv(pp_schedule_t *o, int p, int m, int v)
{
    return generate_dualpipev(o, p, m);
}

/* One kind under test: its generator, the smallest m it reaches its closed form from (as a
 * function of p), and the closed-form makespan in stage units. */
typedef struct kind_case {
    const char *name;
    gen_fn gen;
    int v;                         /* chunks per device (1 for one stage per device) */
    int m_min_per_p, m_min_offset; /* closed form holds from m >= m_min_per_p * p + offset */
    long (*makespan)(int p, int m, int v);
} kind_case_t;

static long span_bfs(int p, int m, int v)
{
    return 3L * (v * m + p - 1); /* (p-1)/(vm+p-1), as interleaved 1F1B */
}
static long span_zb_chunks(int p, int m, int v)
{
    return 3L * v * m + p - 1; /* (p-1)/(3vm+p-1) */
}

static const kind_case_t kinds[] = {
    {"looped-bfs", gen_bfs, 2, 1, 0, span_bfs},
    {"looped-bfs", gen_bfs, 3, 1, 0, span_bfs},
    {"interleaved-zb", gen_izb, 2, 1, 0, span_zb_chunks},
    {"interleaved-zb", gen_izb, 3, 1, 0, span_zb_chunks},
    {"zb-h2", gen_zbh2, 1, 1, 0, span_zb_chunks},
    {"zb-v", gen_zbv, 2, 2, -1, span_zb_chunks},
    {"dualpipe-v", gen_dpv, 2, 2, 0, span_zb_chunks},
};

/* Validate, lower, validate the plan, simulate with costs (f, i, w); the makespan, or -1. */
static double simulate_schedule(const pp_schedule_t *s, double f, double i, double w)
{
    pp_plan_t pl;
    pp_timeline_t tl;
    pp_cost_model_t cm;
    pp_job_cost_t c = {f, i, w, 0, 0, 0};
    double span = -1;
    if (schedule_validate(s) != PP_OK) return -1;
    if (plan_lower(&pl, s, NULL) != PP_OK) return -1;
    if (plan_validate(&pl) == PP_OK && cost_model_uniform(&cm, s->n_stages, &c) == PP_OK) {
        if (simulate_plan(&tl, &pl, &cm) == PP_OK) {
            span = tl.step_ms[0];
            timeline_free(&tl);
        }
        cost_model_free(&cm);
    }
    plan_free(&pl);
    return span;
}

/* Most (stage, mb) pairs of device d between their F and their last backward (B or W). */
static int peak_inflight_device(const pp_schedule_t *s, int d)
{
    int cur = 0, peak = 0;
    for (int i = 0; i < s->prog[d].n; i++) {
        pp_action_kind_t k = s->prog[d].a[i].kind;
        if (k == PP_ACT_F && ++cur > peak) peak = cur;
        if (k == PP_ACT_B || k == PP_ACT_W) cur--;
    }
    return peak;
}

/* ---- exact small orders ---------------------------------------------------------------------- */

static void test_looped_bfs_p2_m2(void)
{
    pp_schedule_t s;
    REQUIRE(generate_looped_bfs(&s, 2, 2, 2) == PP_OK);
    EXPECT(s.n_stages == 4 && s.stage_device[2] == 0 && s.stage_device[3] == 1);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1"));
    EXPECT(ts_program_is(&s, 1, "1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1"));
    schedule_free(&s);
}

static void test_interleaved_zb_p2_m4(void)
{
    pp_schedule_t s;
    REQUIRE(generate_interleaved_zb(&s, 2, 4, 2) == PP_OK);
    EXPECT(s.split_backward);
    EXPECT(ts_program_is(&s, 0,
                         "0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 2W2 "
                         "2I3 2W3 0I2 0W2 0I3 0W3"));
    EXPECT(ts_program_is(&s, 1,
                         "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 "
                         "3W2 1I2 3W3 1I3 1W2 1W3"));
    schedule_free(&s);
}

static void test_zbv_p2_m4(void)
{
    pp_schedule_t s;
    REQUIRE(generate_zbv(&s, 2, 4) == PP_OK);
    EXPECT(s.n_stages == 4 && s.stage_device[0] == 0 && s.stage_device[1] == 1 &&
           s.stage_device[2] == 1 && s.stage_device[3] == 0);
    EXPECT(ts_program_is(&s, 0,
                         "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 "
                         "3I3 3W3 0I2 0W2 0I3 0W3"));
    EXPECT(ts_program_is(&s, 1,
                         "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 "
                         "1I2 2I3 1I3 1W2 2W3 1W3"));
    schedule_free(&s);
}

static void test_dualpipev_p2_m4(void)
{
    pp_schedule_t s;
    REQUIRE(generate_dualpipev(&s, 2, 4) == PP_OK);
    /* Overlapped pairs appear as their forward, then their backward (0F3 3B1, 3F2 0B0, ...). */
    EXPECT(ts_program_is(&s, 0,
                         "0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 "
                         "0W3"));
    EXPECT(ts_program_is(
        &s, 1, "1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 2I3 1I3 2W3 1W3"));
    schedule_free(&s);
}

static void test_zbh2_p4_m8(void)
{
    pp_schedule_t s;
    REQUIRE(generate_zbh2(&s, 4, 8) == PP_OK);
    /* Stage 0 warms up with 2p - 1 forwards; the last stage defers its W passes to the tail. */
    EXPECT(ts_program_is(&s, 0,
                         "0F0 0F1 0F2 0F3 0F4 0F5 0F6 0I0 0W0 0I1 0F7 0I2 0W1 0I3 0W2 0I4 0W3 0I5 "
                         "0W4 0I6 0W5 0W6 0I7 0W7"));
    EXPECT(ts_program_is(&s, 3,
                         "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3F4 3I4 3F5 3I5 3F6 3I6 3W0 3F7 3I7 3W1 "
                         "3W2 3W3 3W4 3W5 3W6 3W7"));
    schedule_free(&s);
}

/* ---- closed forms and memory ----------------------------------------------------------------- */

/* Every kind over p = 1..8 and several m: the schedule and its plan validate, and from the kind's
 * smallest m on, the simulated makespan is the closed form (bubble (p-1) / makespan). */
static void test_makespan_closed_forms(void)
{
    static const int ps[] = {1, 2, 3, 4, 8};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        const kind_case_t *kc = &kinds[k];
        for (size_t a = 0; a < sizeof ps / sizeof *ps; a++) {
            int p = ps[a], cand[] = {p, 2 * p - 1, 2 * p, 4 * p, 8, 32};
            for (int j = 0; j < 6; j++) {
                int m = cand[j];
                pp_schedule_t s;
                ts_capture_begin();
                pp_status_t st = kc->gen(&s, p, m, kc->v);
                ts_capture_end();
                if (st != PP_OK) continue; /* a precondition (tested below) */
                double span = simulate_schedule(&s, 1, 1, 1);
                EXPECT(span > 0, "%s p=%d m=%d v=%d: not valid", kc->name, p, m, kc->v);
                if (m >= kc->m_min_per_p * p + kc->m_min_offset)
                    EXPECT(span == (double)kc->makespan(p, m, kc->v),
                           "%s p=%d m=%d v=%d: makespan %g, closed form %ld", kc->name, p, m, kc->v,
                           span, kc->makespan(p, m, kc->v));
                schedule_free(&s);
            }
        }
    }
}

/* ZB-H2 reaches the one-step lower bound (p-1)T_F + m(T_F+T_I+T_W) also when W is cheaper (F = I
 * = 2, W = 1), where ZB-H1 spans m(F+I+W) + (p-1)(F+I-W). */
static void test_zbh2_beats_zbh1_when_w_is_cheap(void)
{
    static const int ps[] = {2, 3, 4, 8};
    for (size_t a = 0; a < sizeof ps / sizeof *ps; a++) {
        int p = ps[a], cand[] = {2 * p - 1, 4 * p, 32};
        for (int j = 0; j < 3; j++) {
            int m = cand[j];
            pp_schedule_t h2, h1;
            REQUIRE(generate_zbh2(&h2, p, m) == PP_OK);
            REQUIRE(generate_zbh1(&h1, p, m) == PP_OK);
            EXPECT(simulate_schedule(&h2, 2, 2, 1) == 2.0 * (p - 1) + 5.0 * m, "p=%d m=%d", p, m);
            EXPECT(simulate_schedule(&h1, 2, 2, 1) == 3.0 * (p - 1) + 5.0 * m, "p=%d m=%d", p, m);
            schedule_free(&h2);
            schedule_free(&h1);
        }
    }
}

/* ZB-V holds at most 2p chunk micro-batches per device (p of a one-stage-per-device schedule, the
 * memory of 1F1B); ZB-H2 at most 2p - 1 per stage, and exactly that on stage 0 when m >= 2p - 1. */
static void test_peak_inflight(void)
{
    static const int ps[] = {1, 2, 3, 4, 8};
    for (size_t a = 0; a < sizeof ps / sizeof *ps; a++) {
        int p = ps[a], cand[] = {1, p, 2 * p - 1, 4 * p, 32};
        for (int j = 0; j < 5; j++) {
            int m = cand[j];
            pp_schedule_t s;
            REQUIRE(generate_zbv(&s, p, m) == PP_OK);
            for (int d = 0; d < p; d++)
                EXPECT(peak_inflight_device(&s, d) <= 2 * p, "zb-v p=%d m=%d device %d: %d", p, m,
                       d, peak_inflight_device(&s, d));
            schedule_free(&s);
            REQUIRE(generate_zbh2(&s, p, m) == PP_OK);
            for (int d = 0; d < p; d++)
                EXPECT(peak_inflight_device(&s, d) <= 2 * p - 1, "zb-h2 p=%d m=%d stage %d: %d", p,
                       m, d, peak_inflight_device(&s, d));
            if (m >= 2 * p - 1) EXPECT(peak_inflight_device(&s, 0) == 2 * p - 1);
            schedule_free(&s);
        }
    }
}

/* ---- preconditions --------------------------------------------------------------------------- */

static void test_preconditions(void)
{
    pp_schedule_t s;
    ts_capture_begin();
    pp_status_t st1 = generate_dualpipev(&s, 4, 7);
    EXPECT(s.prog == NULL, "a failed generator leaves the schedule empty");
    pp_status_t st2 = generate_interleaved_zb(&s, 3, 32, 2); /* 10 rounds do not divide 32 */
    pp_status_t st3 = generate_zbv(&s, 0, 4);
    pp_status_t st4 = generate_looped_bfs(&s, 2, 4, 0);
    const char *err = ts_capture_end();
    EXPECT(st1 == PP_ERR_INPUT && st2 == PP_ERR_INPUT && st3 == PP_ERR_INPUT &&
           st4 == PP_ERR_INPUT);
    EXPECT(strstr(err, "dualpipe-v: needs at least as many micro-batches as stages"), "%s", err);
    EXPECT(strstr(err, "must be a multiple of the rounds (10"), "%s", err);
}

/* ---- CSV round trip and show ----------------------------------------------------------------- */

/* 1 when two plans have the same ops (device, role, kind, stage, mb, slot, peer) in the same
 * order and the same slots per stage. */
static int same_plan(const pp_plan_t *a, const pp_plan_t *b)
{
    if (a->n_ops != b->n_ops || a->n_stages != b->n_stages) return 0;
    for (int s = 0; s < a->n_stages; s++)
        if (a->slots_per_stage[s] != b->slots_per_stage[s] ||
            a->stage_device[s] != b->stage_device[s])
            return 0;
    for (int i = 0; i < a->n_ops; i++) {
        const pp_op_t *x = &a->ops[i], *y = &b->ops[i];
        if (x->device != y->device || x->role != y->role || x->kind != y->kind ||
            x->stage != y->stage || x->mb != y->mb || x->slot != y->slot || x->peer != y->peer)
            return 0;
    }
    return 1;
}

/* Write as CSV, read back, infer the placement: the same schedule and the same plan. */
static void check_round_trip(const char *name, const pp_schedule_t *s)
{
    FILE *f = tmpfile();
    REQUIRE(f);
    REQUIRE(schedule_write_csv(s, f) == PP_OK);
    rewind(f);
    pp_schedule_t back;
    REQUIRE(schedule_read_csv(&back, f, name) == PP_OK);
    fclose(f);
    REQUIRE(schedule_infer_placement(&back, name) == PP_OK);
    EXPECT(ts_same_schedule(s, &back), "%s: CSV round trip changed the schedule", name);
    pp_plan_t a, b;
    REQUIRE(plan_lower(&a, s, NULL) == PP_OK);
    REQUIRE(plan_lower(&b, &back, NULL) == PP_OK);
    EXPECT(same_plan(&a, &b), "%s: CSV round trip changed the plan", name);
    plan_free(&a);
    plan_free(&b);
    schedule_free(&back);
}

/* `show`'s grid: one row per device holding its compute steps, and the slots per stage. */
static void check_grid(const char *name, const pp_schedule_t *s)
{
    pp_plan_t pl;
    REQUIRE(plan_lower(&pl, s, NULL) == PP_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f);
    plan_print_grid(&pl, f);
    fclose(f);
    char row[32];
    for (int d = 0; d < s->n_devices; d++) {
        snprintf(row, sizeof row, "dev%d | ", d);
        EXPECT(strstr(buf, row), "%s: no row for device %d in\n%s", name, d, buf);
    }
    EXPECT(strstr(buf, "activation slots per stage"), "%s", name);
    EXPECT(strstr(buf, "0F0"), "%s: several stages per device are labelled with their stage", name);
    free(buf);
    plan_free(&pl);
}

static void test_csv_round_trip_and_show(void)
{
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        pp_schedule_t s;
        REQUIRE(kinds[k].gen(&s, 4, 8, kinds[k].v) == PP_OK);
        check_round_trip(kinds[k].name, &s);
        if (kinds[k].v > 1) check_grid(kinds[k].name, &s);
        schedule_free(&s);
    }
}

/* ---- PyTorch's orders ------------------------------------------------------------------------ */

/* The compute actions of `in` alone, in order (a dump that holds transfers too gets them from
 * lowering instead). */
static pp_status_t compute_only(pp_schedule_t *out, const pp_schedule_t *in)
{
    PP_CHECK(schedule_init(out, in->n_devices, in->n_stages, in->n_mb));
    memcpy(out->stage_device, in->stage_device, sizeof(int) * (size_t)in->n_stages);
    for (int d = 0; d < in->n_devices; d++)
        for (int i = 0; i < in->prog[d].n; i++) {
            const pp_action_t *a = &in->prog[d].a[i];
            if (pp_action_is_compute(a->kind))
                PP_CHECK(schedule_push(out, d, a->kind, a->stage, a->mb));
        }
    return PP_OK;
}

static pp_status_t gen_gpipe(pp_schedule_t *o, int p, int m, int v)
{
    return generate_gpipe(o, p, m);
}
static pp_status_t gen_interleaved(pp_schedule_t *o, int p, int m, int v)
{
    return generate_interleaved(o, p, m, v);
}

/* PyTorch 2.11's compute-only orders at p = 4, m = 8 (bench/torch_orders.py writes them; the
 * files in tests/data come from its schedule visualizer). Each imports, validates and lowers, and
 * its unit-cost makespan equals our generator's; ZB-V, interleaved zero-bubble and DualPipeV are
 * the very orders ours write (DualPipeV's OVERLAP_F_B pairs read as forward then backward).
 * Looped BFS differs only in running a chunk's backwards in reverse micro-batch order. */
static void test_torch_orders(void)
{
    static const struct {
        const char *file;
        gen_fn gen;
        int v, same_order;
    } orders[] = {
        {"tests/data/torch_zbv_p4_m8.csv", gen_zbv, 2, 1},
        {"tests/data/torch_interleaved_zb_p4_m8.csv", gen_izb, 2, 1},
        {"tests/data/torch_dualpipev_p4_m8.csv", gen_dpv, 2, 1},
        {"tests/data/torch_gpipe_p4_m8.csv", gen_gpipe, 1, 1},
        {"tests/data/torch_interleaved_1f1b_p4_m8.csv", gen_interleaved, 2, 1},
        {"tests/data/torch_looped_bfs_p4_m8.csv", gen_bfs, 2, 0},
    };
    int found = 0;
    for (size_t i = 0; i < sizeof orders / sizeof *orders; i++) {
        FILE *f = fopen(orders[i].file, "r");
        if (!f) continue;
        found++;
        pp_schedule_t read, t, g;
        pp_status_t st = schedule_read_csv(&read, f, orders[i].file);
        fclose(f);
        REQUIRE(st == PP_OK, "%s does not import", orders[i].file);
        st = compute_only(&t, &read);
        schedule_free(&read);
        REQUIRE(st == PP_OK);
        REQUIRE(orders[i].gen(&g, 4, 8, orders[i].v) == PP_OK);
        double ts = simulate_schedule(&t, 1, 1, 1), gs = simulate_schedule(&g, 1, 1, 1);
        EXPECT(ts > 0, "%s: does not validate, lower or simulate", orders[i].file);
        EXPECT(ts == gs, "%s: makespan %g, our generator's %g", orders[i].file, ts, gs);
        if (orders[i].same_order)
            EXPECT(ts_same_schedule(&t, &g), "%s: not the order our generator writes",
                   orders[i].file);
        schedule_free(&t);
        schedule_free(&g);
    }
    if (!found) SKIP("no tests/data/torch_*_p4_m8.csv (bench/torch_orders.py writes them)");
}

/* Columns of the longest row of a CSV file, idle cells included: the length of PyTorch's spaced
 * schedule, one slot per action. */
static int csv_columns(const char *path)
{
    FILE *f = fopen(path, "r");
    int most = 0, cols = 1, c, any = 0;
    if (!f) return -1;
    while ((c = fgetc(f)) != EOF) {
        if (c == ',') cols++;
        if (c == '\n') {
            if (any && cols > most) most = cols;
            cols = 1, any = 0;
        } else if (c != '\r') {
            any = 1;
        }
    }
    if (any && cols > most) most = cols;
    fclose(f);
    return most;
}

/* Where PyTorch spaces an order by its dependencies (one slot per action), its length is our
 * unit-cost makespan with every action one unit: F = I = W = 1 for ZB-V and interleaved
 * zero-bubble (51 slots), F = B = 1 for looped BFS (38). Its interleaved 1F1B pads every rank's
 * warm-up to a common start (46 slots against 38), and its DualPipeV and single-stage dumps are
 * not spaced, so those are left out. */
static void test_torch_spaced_lengths(void)
{
    static const struct {
        const char *file;
        double i, w; /* F = 1; B costs i + w */
    } spaced[] = {
        {"tests/data/torch_zbv_p4_m8.csv", 1, 1},
        {"tests/data/torch_interleaved_zb_p4_m8.csv", 1, 1},
        {"tests/data/torch_looped_bfs_p4_m8.csv", 1, 0},
    };
    int found = 0;
    for (size_t k = 0; k < sizeof spaced / sizeof *spaced; k++) {
        int cols = csv_columns(spaced[k].file);
        if (cols < 0) continue;
        found++;
        FILE *f = fopen(spaced[k].file, "r");
        REQUIRE(f);
        pp_schedule_t t;
        pp_status_t st = schedule_read_csv(&t, f, spaced[k].file);
        fclose(f);
        REQUIRE(st == PP_OK);
        double span = simulate_schedule(&t, 1, spaced[k].i, spaced[k].w);
        EXPECT(span == cols, "%s: PyTorch's spaced length %d, our unit-cost makespan %g",
               spaced[k].file, cols, span);
        schedule_free(&t);
    }
    if (!found) SKIP("no tests/data/torch_*_p4_m8.csv (bench/torch_orders.py writes them)");
}

/* The 1F1B order PyTorch 2.11's visualizer wrote has forwards of micro-batches 1..8 on the last
 * rank (m = 8): importing it names the first problem, at the rank's row, instead of running it. */
static void test_torch_1f1b_rejected(void)
{
    const char *file = "tests/data/torch_1f1b_p4_m8.csv";
    FILE *f = fopen(file, "r");
    if (!f) SKIP("no %s", file);
    pp_schedule_t read;
    pp_status_t st = schedule_read_csv(&read, f, file);
    fclose(f);
    REQUIRE(st == PP_OK, "%s does not import", file);
    ts_capture_begin();
    st = schedule_validate(&read);
    const char *err = ts_capture_end();
    TS_EXPECT_REJECT(st, err,
                     "tests/data/torch_1f1b_p4_m8.csv:4:1: device 3, step 1, action 3B0: its "
                     "forward 3F0 is missing");
    schedule_free(&read);
}

int main(void)
{
    ts_rng_seed(15);
    RUN(test_looped_bfs_p2_m2);
    RUN(test_interleaved_zb_p2_m4);
    RUN(test_zbv_p2_m4);
    RUN(test_dualpipev_p2_m4);
    RUN(test_zbh2_p4_m8);
    RUN(test_makespan_closed_forms);
    RUN(test_zbh2_beats_zbh1_when_w_is_cheap);
    RUN(test_peak_inflight);
    RUN(test_preconditions);
    RUN(test_csv_round_trip_and_show);
    RUN(test_torch_orders);
    RUN(test_torch_spaced_lengths);
    RUN(test_torch_1f1b_rejected);
    return check_summary("test_generate_kinds");
}
