/*
 * test_generate.c — the schedule generators: exact small schedules written out by hand, the
 * closed-form makespans of every generator under a small lock-step simulation of its compute
 * actions, peak in-flight micro-batches per stage, and generate_schedule's dispatch.
 *
 * The simulation here is independent of sim/simulate.c: each device runs its program in
 * order; F of stage s waits for F of stage s-1, B/I of stage s for its own F and for the B/I of
 * stage s+1, W for its I. Costs are integers (uniform ones, then seeded random ones), so makespans
 * compare exactly.
 */
#include "config/written.h"
#include "schedule/generate.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------------------------- */

typedef struct costs {
    long f, b, i, w; /* per compute kind; a full B costs b */
} costs_t;

/* Makespan of the compute actions under `c`, or -1 when the programs deadlock. busy[d] gets each
 * device's total compute time when busy != NULL. */
static long lockstep_makespan(const pp_schedule_t *s, costs_t c, long *busy)
{
    int S = s->n_stages, M = s->n_mb;
    long *end = malloc(sizeof *end * (size_t)(4 * S * M)); /* [kind][stage][mb], -1 not run */
    int *ptr = calloc((size_t)s->n_devices, sizeof *ptr);
    long *free_at = calloc((size_t)s->n_devices, sizeof *free_at);
    for (int j = 0; j < 4 * S * M; j++)
        end[j] = -1;
#define END(k, st, mb) end[((k)*S + (st)) * M + (mb)]
    long span = 0;
    int left = 0;
    for (int d = 0; d < s->n_devices; d++)
        left += s->prog[d].n;
    if (busy)
        for (int d = 0; d < s->n_devices; d++)
            busy[d] = 0;
    while (left > 0) {
        int moved = 0;
        for (int d = 0; d < s->n_devices; d++) {
            while (ptr[d] < s->prog[d].n) {
                const pp_action_t *a = &s->prog[d].a[ptr[d]];
                int st = a->stage, k = a->mb;
                long ready = free_at[d], cost = 0;
                int ok = 1;
                switch (a->kind) {
                case PP_ACT_F:
                    cost = c.f;
                    if (st > 0) {
                        long e = END(PP_ACT_F, st - 1, k);
                        if (e < 0)
                            ok = 0;
                        else if (e > ready)
                            ready = e;
                    }
                    break;
                case PP_ACT_B:
                case PP_ACT_I: {
                    cost = a->kind == PP_ACT_B ? c.b : c.i;
                    long need[2] = {END(PP_ACT_F, st, k), 0};
                    if (st < S - 1) {
                        long nb = END(PP_ACT_B, st + 1, k), ni = END(PP_ACT_I, st + 1, k);
                        need[1] = nb >= 0 ? nb : ni;
                    }
                    for (int j = 0; j < 2; j++) {
                        if (need[j] < 0)
                            ok = 0;
                        else if (need[j] > ready)
                            ready = need[j];
                    }
                    break;
                }
                case PP_ACT_W:
                    cost = c.w;
                    ok = END(PP_ACT_I, st, k) >= 0;
                    if (ok && END(PP_ACT_I, st, k) > ready) ready = END(PP_ACT_I, st, k);
                    break;
                default: ok = 0; break;
                }
                if (!ok) break;
                END(a->kind, st, k) = ready + cost;
                free_at[d] = ready + cost;
                if (busy) busy[d] += cost;
                if (free_at[d] > span) span = free_at[d];
                ptr[d]++;
                left--;
                moved = 1;
            }
        }
        if (!moved) {
            span = -1;
            break;
        }
    }
#undef END
    free(end);
    free(ptr);
    free(free_at);
    return span;
}

/* Most micro-batches of `stage` between their F and the end of their backward (B or W), walking
 * its device's program. */
static int peak_inflight(const pp_schedule_t *s, int stage)
{
    int d = s->stage_device[stage], cur = 0, peak = 0;
    for (int i = 0; i < s->prog[d].n; i++) {
        const pp_action_t *a = &s->prog[d].a[i];
        if (a->stage != stage) continue;
        if (a->kind == PP_ACT_F && ++cur > peak) peak = cur;
        if (a->kind == PP_ACT_B || a->kind == PP_ACT_W) cur--;
    }
    return peak;
}

static const int sweep_p[] = {1, 2, 3, 4, 8};

/* The m values of the sweep for p: p, 2p, 4p, 8, 32 (each once). */
static int sweep_m(int p, int *m)
{
    int c[] = {p, 2 * p, 4 * p, 8, 32}, n = 0;
    for (int i = 0; i < 5; i++) {
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= m[j] == c[i];
        if (!dup) m[n++] = c[i];
    }
    return n;
}

/* ---- exact small schedules ------------------------------------------------------------------- */

static void test_1f1b_p2_m4(void)
{
    pp_schedule_t s;
    REQUIRE(generate_1f1b(&s, 2, 4) == PP_OK);
    EXPECT(s.n_devices == 2 && s.n_stages == 2 && s.n_mb == 4);
    EXPECT(s.stage_device[0] == 0 && s.stage_device[1] == 1);
    EXPECT(!s.has_comm && !s.split_backward);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3"));
    EXPECT(ts_program_is(&s, 1, "1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3"));
    schedule_free(&s);
}

static void test_1f1b_p4_m8(void)
{
    pp_schedule_t s;
    REQUIRE(generate_1f1b(&s, 4, 8) == PP_OK);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 0B5 0B6 0B7"));
    EXPECT(ts_program_is(&s, 1, "1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 1B6 1B7"));
    EXPECT(ts_program_is(&s, 2, "2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2F6 2B5 2F7 2B6 2B7"));
    EXPECT(ts_program_is(&s, 3, "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7"));
    schedule_free(&s);
}

static void test_1f1b_fewer_microbatches_than_stages(void)
{
    pp_schedule_t s;
    REQUIRE(generate_1f1b(&s, 4, 2) == PP_OK);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 0B0 0B1"));
    EXPECT(ts_program_is(&s, 2, "2F0 2F1 2B0 2B1"));
    EXPECT(ts_program_is(&s, 3, "3F0 3B0 3F1 3B1"));
    schedule_free(&s);
}

static void test_gpipe_p2_m3(void)
{
    pp_schedule_t s;
    REQUIRE(generate_gpipe(&s, 2, 3) == PP_OK);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 0F2 0B0 0B1 0B2"));
    EXPECT(ts_program_is(&s, 1, "1F0 1F1 1F2 1B0 1B1 1B2"));
    schedule_free(&s);
}

static void test_interleaved_p2_v2_m4(void)
{
    pp_schedule_t s;
    REQUIRE(generate_interleaved(&s, 2, 4, 2) == PP_OK);
    EXPECT(s.n_stages == 4);
    EXPECT(s.stage_device[0] == 0 && s.stage_device[1] == 1 && s.stage_device[2] == 0 &&
           s.stage_device[3] == 1);
    /* Device 0 warms up with 2(p-1) + (v-1)p = 4 forwards, device 1 with 2. */
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3"));
    EXPECT(ts_program_is(&s, 1, "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"));
    schedule_free(&s);
}

static void test_zbh1_p2_m4(void)
{
    pp_schedule_t s;
    REQUIRE(generate_zbh1(&s, 2, 4) == PP_OK);
    EXPECT(s.split_backward && !s.has_comm);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 0I0 0W0 0F2 0I1 0W1 0F3 0I2 0W2 0I3 0W3"));
    EXPECT(ts_program_is(&s, 1, "1F0 1I0 1F1 1I1 1W0 1F2 1I2 1W1 1F3 1I3 1W2 1W3"));
    schedule_free(&s);
}

static void test_zbh1_p3_m3(void)
{
    pp_schedule_t s;
    REQUIRE(generate_zbh1(&s, 3, 3) == PP_OK);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 0F2 0I0 0W0 0I1 0W1 0I2 0W2"));
    EXPECT(ts_program_is(&s, 1, "1F0 1F1 1I0 1F2 1I1 1W0 1I2 1W1 1W2"));
    EXPECT(ts_program_is(&s, 2, "2F0 2I0 2F1 2I1 2F2 2I2 2W0 2W1 2W2"));
    schedule_free(&s);
}

/* ---- closed forms ---------------------------------------------------------------------------- */

/* GPipe and 1F1B: (m + p - 1)(F + B), for F = B = 1 (bubble (p-1)/(m+p-1)) and F = 1, B = 2. */
static void test_makespan_gpipe_1f1b(void)
{
    for (size_t a = 0; a < sizeof sweep_p / sizeof *sweep_p; a++) {
        int p = sweep_p[a], ms[5], n = sweep_m(p, ms);
        for (int j = 0; j < n; j++) {
            int m = ms[j];
            for (int g = 0; g < 2; g++) {
                pp_schedule_t s;
                pp_status_t st = g ? generate_1f1b(&s, p, m) : generate_gpipe(&s, p, m);
                REQUIRE(st == PP_OK);
                long busy[PP_MAX_DEVICES];
                long t = lockstep_makespan(&s, (costs_t){1, 1, 0, 0}, busy);
                EXPECT(t == 2L * (m + p - 1), "%s p=%d m=%d: %ld", g ? "1f1b" : "gpipe", p, m, t);
                EXPECT_NEAR(1.0 - (double)busy[0] / (double)t, (double)(p - 1) / (m + p - 1), 1e-12,
                            0);
                t = lockstep_makespan(&s, (costs_t){1, 2, 0, 0}, NULL);
                EXPECT(t == 3L * (m + p - 1), "%s p=%d m=%d, B=2F: %ld", g ? "1f1b" : "gpipe", p, m,
                       t);
                schedule_free(&s);
            }
        }
    }
}

/* Interleaved: a chunk's F+B is 1/v of a stage's, makespan (v m + p - 1) chunk units, bubble
 * (p-1)/(v m + p - 1). */
static void test_makespan_interleaved(void)
{
    for (size_t a = 0; a < sizeof sweep_p / sizeof *sweep_p; a++) {
        int p = sweep_p[a], ms[5], n = sweep_m(p, ms);
        for (int j = 0; j < n; j++) {
            int m = ms[j];
            if (m % p) continue;
            for (int v = 2; v <= 3; v++) {
                pp_schedule_t s;
                REQUIRE(generate_interleaved(&s, p, m, v) == PP_OK);
                long busy[PP_MAX_DEVICES];
                long t = lockstep_makespan(&s, (costs_t){1, 1, 0, 0}, busy);
                EXPECT(t == 2L * (v * m + p - 1), "p=%d m=%d v=%d: %ld", p, m, v, t);
                EXPECT_NEAR(1.0 - (double)busy[p - 1] / (double)t,
                            (double)(p - 1) / (v * m + p - 1), 1e-12, 0);
                t = lockstep_makespan(&s, (costs_t){1, 2, 0, 0}, NULL);
                EXPECT(t == 3L * (v * m + p - 1), "p=%d m=%d v=%d, B=2F: %ld", p, m, v, t);
                schedule_free(&s);
            }
        }
    }
}

/* ZB-H1 with F = I = W: 3m + p - 1 units, bubble (p-1)/(3m+p-1), when m >= p. */
static void test_makespan_zbh1(void)
{
    for (size_t a = 0; a < sizeof sweep_p / sizeof *sweep_p; a++) {
        int p = sweep_p[a], ms[5], n = sweep_m(p, ms);
        for (int j = 0; j < n; j++) {
            int m = ms[j];
            if (m < p) continue;
            pp_schedule_t s;
            REQUIRE(generate_zbh1(&s, p, m) == PP_OK);
            long busy[PP_MAX_DEVICES];
            long t = lockstep_makespan(&s, (costs_t){1, 0, 1, 1}, busy);
            EXPECT(t == 3L * m + p - 1, "p=%d m=%d: %ld", p, m, t);
            for (int d = 0; d < p; d++)
                EXPECT_NEAR(1.0 - (double)busy[d] / (double)t, (double)(p - 1) / (3 * m + p - 1),
                            1e-12, 0);
            schedule_free(&s);
        }
    }
}

/* Random integer costs: 1F1B and GPipe span (m+p-1)(F+B), interleaved (vm+p-1)(F+B), and ZB-H1
 * m(F+I+W) + (p-1)(F+I-W) while W <= min(F, I) (the paper's bubble). */
static void test_makespan_random_costs(void)
{
    for (int trial = 0; trial < 60; trial++) {
        int p = ts_rand_int(1, 6),
            m = p * ts_rand_int(1, 4) + (trial % 2 ? ts_rand_int(0, p - 1) : 0);
        costs_t c = {ts_rand_int(1, 9), ts_rand_int(1, 9), ts_rand_int(1, 9), 0};
        c.w = ts_rand_int(1, c.f < c.i ? c.f : c.i);
        pp_schedule_t s;
        REQUIRE(generate_1f1b(&s, p, m) == PP_OK);
        EXPECT(lockstep_makespan(&s, c, NULL) == (long)(m + p - 1) * (c.f + c.b), "1f1b p=%d m=%d",
               p, m);
        schedule_free(&s);
        REQUIRE(generate_gpipe(&s, p, m) == PP_OK);
        EXPECT(lockstep_makespan(&s, c, NULL) == (long)(m + p - 1) * (c.f + c.b), "gpipe p=%d m=%d",
               p, m);
        schedule_free(&s);
        REQUIRE(generate_zbh1(&s, p, m) == PP_OK);
        EXPECT(lockstep_makespan(&s, c, NULL) ==
                   (long)m * (c.f + c.i + c.w) + (long)(p - 1) * (c.f + c.i - c.w),
               "zb-h1 p=%d m=%d F=%ld I=%ld W=%ld", p, m, c.f, c.i, c.w);
        schedule_free(&s);
        int v = ts_rand_int(2, 4), mi = p * ts_rand_int(1, 4);
        REQUIRE(generate_interleaved(&s, p, mi, v) == PP_OK);
        EXPECT(lockstep_makespan(&s, c, NULL) == (long)(v * mi + p - 1) * (c.f + c.b),
               "interleaved p=%d m=%d v=%d", p, mi, v);
        schedule_free(&s);
    }
}

/* ---- memory ---------------------------------------------------------------------------------- */

static void test_peak_inflight(void)
{
    for (size_t a = 0; a < sizeof sweep_p / sizeof *sweep_p; a++) {
        int p = sweep_p[a], ms[6], n = sweep_m(p, ms);
        ms[n++] = 1 + (p > 1 ? p / 2 : 0); /* fewer micro-batches than stages too */
        for (int j = 0; j < n; j++) {
            int m = ms[j];
            pp_schedule_t g, f, z;
            REQUIRE(generate_gpipe(&g, p, m) == PP_OK);
            REQUIRE(generate_1f1b(&f, p, m) == PP_OK);
            REQUIRE(generate_zbh1(&z, p, m) == PP_OK);
            for (int i = 0; i < p; i++) {
                int want = p - i < m ? p - i : m;
                EXPECT(peak_inflight(&g, i) == m, "gpipe p=%d m=%d stage %d", p, m, i);
                EXPECT(peak_inflight(&f, i) == want, "1f1b p=%d m=%d stage %d: %d, want %d", p, m,
                       i, peak_inflight(&f, i), want);
                EXPECT(peak_inflight(&z, i) <= p, "zb-h1 p=%d m=%d stage %d: %d", p, m, i,
                       peak_inflight(&z, i));
            }
            schedule_free(&g);
            schedule_free(&f);
            schedule_free(&z);
        }
    }
}

/* ---- every generated schedule is complete ---------------------------------------------------- */

/* Each (stage, mb) has one F and one B (or one I and one W) on the stage's device. */
static void test_complete(void)
{
    for (int kind = 0; kind < 4; kind++) {
        int p = ts_rand_int(1, 8), m = p * ts_rand_int(1, 5);
        pp_schedule_t s;
        pp_status_t st = kind == 0   ? generate_gpipe(&s, p, m)
                         : kind == 1 ? generate_1f1b(&s, p, m)
                         : kind == 2 ? generate_interleaved(&s, p, m, 2)
                                     : generate_zbh1(&s, p, m);
        REQUIRE(st == PP_OK);
        int S = s.n_stages;
        int *count = calloc((size_t)(4 * S * m), sizeof *count);
        for (int d = 0; d < s.n_devices; d++)
            for (int i = 0; i < s.prog[d].n; i++) {
                const pp_action_t *a = &s.prog[d].a[i];
                EXPECT(s.stage_device[a->stage] == d);
                count[(a->kind * S + a->stage) * m + a->mb]++;
            }
        for (int x = 0; x < S * m; x++) {
            EXPECT(count[x] == 1, "kind %d p=%d m=%d: F of %d/%d", kind, p, m, x / m, x % m);
            if (kind == 3)
                EXPECT(count[2 * S * m + x] == 1 && count[3 * S * m + x] == 1);
            else
                EXPECT(count[S * m + x] == 1);
        }
        free(count);
        schedule_free(&s);
    }
}

/* ---- errors and dispatch --------------------------------------------------------------------- */

static void test_interleaved_rejects(void)
{
    pp_schedule_t s;
    ts_capture_begin();
    pp_status_t st1 = generate_interleaved(&s, 4, 6, 2); /* m % p != 0 */
    EXPECT(s.prog == NULL, "a failed generator leaves the schedule empty");
    pp_status_t st2 = generate_interleaved(&s, 2, 4, 0);
    pp_status_t st3 = generate_1f1b(&s, 0, 4);
    const char *err = ts_capture_end();
    EXPECT(st1 == PP_ERR_INPUT && st2 == PP_ERR_INPUT && st3 == PP_ERR_INPUT);
    EXPECT(strstr(err, "must be a multiple of the devices (4)"), "%s", err);
    /* v = 1 is plain 1F1B and needs no m % p. */
    REQUIRE(generate_interleaved(&s, 3, 4, 1) == PP_OK);
    EXPECT(ts_program_is(&s, 0, "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3"));
    schedule_free(&s);
}

static void cfg_fill(pp_job_t *c, pp_sched_kind_t kind, int p, int stages, int m)
{
    ts_config_pipeline(c, kind, p, stages, m);
    c->model = (pp_job_model_t){
        .layers = 8, .hidden = 64, .heads = 4, .seq_len = 32, .vocab = 128, .dtype = PP_DTYPE_BF16};
    c->pipeline.micro_batch_size = 2;
}

static void test_generate_schedule_dispatch(void)
{
    pp_job_t c;
    pp_schedule_t got, want;
    int p = ts_rand_int(2, 4), m = p * ts_rand_int(1, 3);

    cfg_fill(&c, PP_SCHED_1F1B, p, p, m);
    REQUIRE(generate_schedule(&got, &c) == PP_OK);
    REQUIRE(generate_1f1b(&want, p, m) == PP_OK);
    EXPECT(ts_same_schedule(&got, &want));
    schedule_free(&got);
    schedule_free(&want);

    cfg_fill(&c, PP_SCHED_INTERLEAVED, p, 2 * p, m);
    REQUIRE(generate_schedule(&got, &c) == PP_OK);
    REQUIRE(generate_interleaved(&want, p, m, 2) == PP_OK);
    EXPECT(ts_same_schedule(&got, &want));
    schedule_free(&got);

    /* STEPS: the schedule as written (config/written.c), each stage on the device its actions are
     * on. */
    schedule_free(&want);
    pp_config_t w;
    REQUIRE(config_load_string(&w, "t.yaml",
                               "schedule: {steps: [[0F0, 2F0, 2B0, 0B0], [1F0, 1B0]]}", NULL,
                               0) == PP_OK);
    REQUIRE(written_build(&got, &w) == PP_OK);
    EXPECT(got.n_devices == 2 && got.n_stages == 3 && got.n_mb == 1);
    EXPECT(got.stage_device[0] == 0 && got.stage_device[1] == 1 && got.stage_device[2] == 0);
    EXPECT(got.prog[0].n == 4 && got.prog[0].a[1].stage == 2 && got.prog[0].a[3].kind == PP_ACT_B);
    schedule_free(&got);
    config_free(&w);

    /* Placement v with two chunks and one stage per device for 1F1B: rejected with a reason. */
    ts_capture_begin();
    cfg_fill(&c, PP_SCHED_INTERLEAVED, p, 2 * p, m);
    c.pipeline.placement = PP_PLACEMENT_V;
    pp_status_t st1 = generate_schedule(&got, &c);
    cfg_fill(&c, PP_SCHED_1F1B, p, 2 * p, m);
    pp_status_t st2 = generate_schedule(&got, &c);
    cfg_fill(&c, PP_SCHED_STEPS, p, p, m);
    pp_status_t st3 = generate_schedule(&got, &c); /* written, not generated */
    const char *err = ts_capture_end();
    EXPECT(st1 == PP_ERR_INPUT && st2 == PP_ERR_INPUT && st3 == PP_ERR_INPUT);
    EXPECT(strstr(err, "placement v is not supported"), "%s", err);
    EXPECT(strstr(err, "one stage per device"), "%s", err);
}

int main(void)
{
    ts_rng_seed(0x2545f4914f6cdd1dull);
    RUN(test_1f1b_p2_m4);
    RUN(test_1f1b_p4_m8);
    RUN(test_1f1b_fewer_microbatches_than_stages);
    RUN(test_gpipe_p2_m3);
    RUN(test_interleaved_p2_v2_m4);
    RUN(test_zbh1_p2_m4);
    RUN(test_zbh1_p3_m3);
    RUN(test_makespan_gpipe_1f1b);
    RUN(test_makespan_interleaved);
    RUN(test_makespan_zbh1);
    RUN(test_makespan_random_costs);
    RUN(test_peak_inflight);
    RUN(test_complete);
    RUN(test_interleaved_rejects);
    RUN(test_generate_schedule_dispatch);
    return check_summary("test_generate");
}
