/*
 * test_schedule_io.c — the action text form and schedules in files: parse/format round trips
 * (valid and invalid forms), PyTorch CSV write -> read round trips on random schedules, CSV
 * files with idle cells, CRLF, spaces and quotes, every CSV error with its line and column, and
 * the YAML `schedule: steps:` block written here and read back by config_load_string.
 *
 * Random schedules come from a seeded generator: stage s lives on device s mod p, programs mix
 * every action kind. Error messages are read back from stderr and compared whole.
 */
#include "tests/check.h"
#include "config/config.h"
#include "plan/schedule.h"
#include "support.h"
#include "config/resolve.h"
#include "config/written.h"

#include <stdlib.h>

#define ACTION_ALLOWED                                                                             \
    "(allowed: <stage><kind><micro-batch>, kind F, B, I, W, SEND_F, RECV_F, SEND_B or RECV_B, "    \
    "e.g. 0F3, 1I2, 2SEND_F1)"

/* Read CSV text (named `where`); returns the status and leaves the message in *err. */
static pp_status_t read_csv_text(pp_schedule_t *s, const char *text, const char *where,
                                 const char **err)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    if (!f) return PP_ERR_IO;
    ts_capture_begin();
    pp_status_t st = schedule_read_csv(s, f, where);
    *err = ts_capture_end();
    fclose(f);
    return st;
}

static pp_status_t read_csv_file(pp_schedule_t *s, const char *path, const char **err)
{
    FILE *f = fopen(path, "r");
    if (!f) return PP_ERR_IO;
    ts_capture_begin();
    pp_status_t st = schedule_read_csv(s, f, path);
    *err = ts_capture_end();
    fclose(f);
    return st;
}

#define EXPECT_CSV_ERROR(text, want)                                                               \
    do {                                                                                           \
        pp_schedule_t s_;                                                                          \
        const char *e_;                                                                            \
        pp_status_t st_ = read_csv_text(&s_, (text), "t.csv", &e_);                                \
        TS_EXPECT_REJECT(st_, e_, want);                                                           \
        EXPECT(s_.prog == NULL && s_.n_devices == 0, "schedule not left empty");                   \
    } while (0)

/* The shared comparison, and the has_comm / split_backward flags the files must keep too. */
static int same_schedule(const pp_schedule_t *a, const pp_schedule_t *b)
{
    return a->has_comm == b->has_comm && a->split_backward == b->split_backward &&
           ts_same_schedule(a, b);
}

/* A random schedule: p devices, v stages each (stage s on device s mod p), every stage used,
 * programs of random actions of every kind. n_mb is 1 + the largest micro-batch used. */
static pp_status_t random_schedule(pp_schedule_t *s, int max_len)
{
    int p = ts_rand_int(1, 8), v = ts_rand_int(1, 3), m = ts_rand_int(1, 40);
    int n_stages = p * v, max_mb = 0;
    pp_schedule_t tmp;
    PP_CHECK(schedule_init(&tmp, p, n_stages, m));
    for (int d = 0; d < p; d++) {
        int len = ts_rand_int(v, max_len);
        for (int i = 0; i < len; i++) {
            /* The first v actions name each of the device's stages once. */
            int stage = d + p * (i < v ? i : ts_rand_int(0, v - 1));
            int mb = ts_rand_int(0, m - 1);
            if (mb > max_mb) max_mb = mb;
            pp_status_t st = schedule_push(
                &tmp, d, (pp_action_kind_t)ts_rand_int(0, PP_ACT_WRITTEN_COUNT - 1), stage, mb);
            if (st != PP_OK) {
                schedule_free(&tmp);
                return st;
            }
        }
    }
    /* Same programs in a schedule sized like a reader would size it. */
    pp_status_t st = schedule_init(s, p, n_stages, max_mb + 1);
    for (int d = 0; st == PP_OK && d < p; d++)
        for (int i = 0; st == PP_OK && i < tmp.prog[d].n; i++)
            st = schedule_push(s, d, tmp.prog[d].a[i].kind, tmp.prog[d].a[i].stage,
                               tmp.prog[d].a[i].mb);
    if (st == PP_OK) st = schedule_infer_placement(s, "random");
    schedule_free(&tmp);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * The action text form
 * ------------------------------------------------------------------------------------------- */

static void test_action_round_trip(void)
{
    static const char *names[PP_ACT_WRITTEN_COUNT] = {"F",      "B",      "I",      "W",
                                                      "SEND_F", "RECV_F", "SEND_B", "RECV_B"};
    char buf[32], want[64];
    for (int it = 0; it < 2000; it++) {
        pp_action_t a = {(pp_action_kind_t)ts_rand_int(0, PP_ACT_WRITTEN_COUNT - 1),
                         ts_rand_int(0, 100000), ts_rand_int(0, 100000), 0};
        if (it < PP_ACT_WRITTEN_COUNT) a.kind = (pp_action_kind_t)it; /* every kind at least once */
        snprintf(want, sizeof want, "%d%s%d", a.stage, names[a.kind], a.mb);
        EXPECT(!strcmp(action_format(&a, buf, sizeof buf), want), "%s vs %s", buf, want);
        EXPECT(!strcmp(action_kind_name(a.kind), names[a.kind]));
        pp_action_t b = {PP_ACT_F, -1, -1, 0};
        REQUIRE(action_parse(buf, &b) == 0, "%s", buf);
        EXPECT(b.kind == a.kind && b.stage == a.stage && b.mb == a.mb, "%s", buf);
    }
    pp_action_t b;
    REQUIRE(action_parse("12SEND_B7", &b) == 0);
    EXPECT(b.kind == PP_ACT_SEND_B && b.stage == 12 && b.mb == 7);
    REQUIRE(action_parse("3RECV_F0", &b) == 0);
    EXPECT(b.kind == PP_ACT_RECV_F && b.stage == 3 && b.mb == 0);
}

static void test_action_invalid(void)
{
    static const char *bad[] = {"F3",       "0X1",     "0F",   "0F1x",  "-1F0",
                                "",         " 0F1",    "0F1 ", "0f1",   "0SEND1",
                                "0SEND_X1", "0RECV_F", "0F-1", "0FF1",  "0 F 1",
                                "F",        "0B1.5",   "0W+1", "0I1\n", "99999999999F0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pp_action_t a = {PP_ACT_W, 77, 88, 0};
        EXPECT(action_parse(bad[i], &a) == -1, "'%s' accepted", bad[i]);
    }
}

/* ---------------------------------------------------------------------------------------------
 * CSV
 * ------------------------------------------------------------------------------------------- */

static void test_csv_round_trip(void)
{
    for (int it = 0; it < 60; it++) {
        pp_schedule_t a, b;
        REQUIRE(random_schedule(&a, 60) == PP_OK);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        REQUIRE(f);
        EXPECT(schedule_write_csv(&a, f) == PP_OK);
        fclose(f);
        /* One row per device. */
        int rows = 0;
        for (size_t i = 0; i < len; i++)
            rows += text[i] == '\n';
        EXPECT(rows == a.n_devices, "%d rows for %d devices", rows, a.n_devices);
        const char *e;
        pp_status_t st = read_csv_text(&b, text, "round.csv", &e);
        EXPECT(st == PP_OK, "%s", e);
        if (st == PP_OK) EXPECT(same_schedule(&a, &b), "CSV round trip changed the schedule");
        free(text);
        schedule_free(&a);
        schedule_free(&b);
    }
}

static void test_csv_write_exact(void)
{
    pp_schedule_t s;
    REQUIRE(schedule_init(&s, 2, 2, 2) == PP_OK);
    schedule_push(&s, 0, PP_ACT_F, 0, 0);
    schedule_push(&s, 0, PP_ACT_SEND_F, 0, 0);
    schedule_push(&s, 0, PP_ACT_F, 0, 1);
    schedule_push(&s, 0, PP_ACT_B, 0, 0);
    schedule_push(&s, 1, PP_ACT_RECV_F, 1, 0);
    schedule_push(&s, 1, PP_ACT_I, 1, 0);
    schedule_push(&s, 1, PP_ACT_W, 1, 1);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE(f);
    EXPECT(schedule_write_csv(&s, f) == PP_OK);
    fclose(f);
    EXPECT(!strcmp(text, "0F0,0SEND_F0,0F1,0B0\n1RECV_F0,1I0,1W1\n"), "%s", text);
    free(text);
    schedule_free(&s);
}

static void test_csv_idle_cells(void)
{
    /* PyTorch's lock-step dump: empty cells for idle slots, CRLF ends, spaces and quotes. */
    pp_schedule_t s;
    const char *e;
    pp_status_t st = read_csv_file(&s, "tests/data/idle_crlf.csv", &e);
    REQUIRE(st == PP_OK, "%s", e);
    EXPECT(s.n_devices == 2 && s.n_stages == 2 && s.n_mb == 2);
    static const char *want[2][4] = {{"0F0", "0F1", "0B0", "0B1"}, {"1F0", "1B0", "1F1", "1B1"}};
    for (int d = 0; d < 2; d++) {
        REQUIRE(s.prog[d].n == 4, "device %d has %d actions", d, s.prog[d].n);
        for (int i = 0; i < 4; i++) {
            char buf[32];
            EXPECT(!strcmp(action_format(&s.prog[d].a[i], buf, sizeof buf), want[d][i]),
                   "device %d item %d: %s", d, i, buf);
        }
    }
    EXPECT(s.stage_device[0] == 0 && s.stage_device[1] == 1);
    schedule_free(&s);

    /* The shipped ZB-H1 example: 4 ranks x 24 actions (8 F, 8 I, 8 W), backward split. */
    st = read_csv_file(&s, "schedules/explicit.csv", &e);
    REQUIRE(st == PP_OK, "%s", e);
    EXPECT(s.n_devices == 4 && s.n_stages == 4 && s.n_mb == 8 && s.split_backward && !s.has_comm);
    for (int d = 0; d < 4; d++) {
        int count[PP_ACT_COUNT] = {0};
        for (int i = 0; i < s.prog[d].n; i++)
            count[s.prog[d].a[i].kind]++;
        EXPECT(s.prog[d].n == 24 && count[PP_ACT_F] == 8 && count[PP_ACT_I] == 8 &&
                   count[PP_ACT_W] == 8,
               "device %d", d);
        EXPECT(s.stage_device[d] == d);
    }
    schedule_free(&s);
}

/* PyTorch's DualPipeV composite: `(F;B)OVERLAP_F_B` reads as the forward, then the backward. */
static void test_csv_overlap_f_b(void)
{
    pp_schedule_t s;
    const char *e;
    pp_status_t st = read_csv_text(&s,
                                   "0F0,0F1,3F0,\"(0F2;3B0)\",(3F1;0B0)OVERLAP_F_B,3B1,0B1\n"
                                   "1F0,2F0,1F1,(2F1;1B0 )OVERLAP_F_B,2B0,2B1,1B1\n",
                                   "o.csv", &e);
    EXPECT(st == PP_ERR_INPUT && strstr(e, "'(0F2;3B0)' is not an action"), "%s", e);
    st = read_csv_text(&s,
                       "0F0,0F1,3F0,(0F2;3B0)OVERLAP_F_B,(3F1;0B0)OVERLAP_F_B,3B1,0B1\n"
                       "1F0,2F0,1F1,2F1,2B0,(1F2;2B1)OVERLAP_F_B,1B0,1B1\n",
                       "o.csv", &e);
    REQUIRE(st == PP_OK, "%s", e);
    pp_schedule_t want;
    const char *progs[] = {"0F0 0F1 3F0 0F2 3B0 3F1 0B0 3B1 0B1",
                           "1F0 2F0 1F1 2F1 2B0 1F2 2B1 1B0 1B1"};
    REQUIRE(ts_sched_from(&want, 4, 3, 2, progs, 1) == PP_OK);
    EXPECT(ts_same_schedule(&s, &want));
    /* The second half of each pair is marked, and the pairs are written back as composites. */
    EXPECT(s.prog[0].a[4].overlap && s.prog[0].a[6].overlap && s.prog[1].a[6].overlap);
    int marks = 0;
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < s.prog[d].n; i++)
            marks += s.prog[d].a[i].overlap;
    EXPECT(marks == 3, "%d marks", marks);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE(f && schedule_write_csv(&s, f) == PP_OK);
    fclose(f);
    EXPECT(!strcmp(text, "0F0,0F1,3F0,(0F2;3B0)OVERLAP_F_B,(3F1;0B0)OVERLAP_F_B,3B1,0B1\n"
                         "1F0,2F0,1F1,2F1,2B0,(1F2;2B1)OVERLAP_F_B,1B0,1B1\n"),
           "%s", text);
    free(text);
    schedule_free(&s);
    schedule_free(&want);
    /* FSDP and data-parallel steps are left out; a stage number must lead them. */
    st = read_csv_text(&s, "0F0,0B0,0REDUCE_GRAD\n0UNSHARD,1F0,1B0,1RESHARD\n", "r.csv", &e);
    REQUIRE(st == PP_OK, "%s", e);
    EXPECT(s.prog[0].n == 2 && s.prog[1].n == 2 && s.n_stages == 2);
    schedule_free(&s);
    EXPECT_CSV_ERROR("0F0,REDUCE_GRAD\n",
                     "t.csv:1:5: cell 2: 'REDUCE_GRAD' is not an action " ACTION_ALLOWED);
    EXPECT_CSV_ERROR("(0F0;0SEND_F0)OVERLAP_F_B\n",
                     "t.csv:1:1: cell 1: '0SEND_F0' inside OVERLAP_F_B is not a compute action "
                     "(allowed: (<action>;<action>)OVERLAP_F_B of F, B, I or W actions)");
    EXPECT_CSV_ERROR("0F0,(;)OVERLAP_F_B\n",
                     "t.csv:1:5: cell 2: OVERLAP_F_B holds no action (allowed: "
                     "(<action>;<action>)OVERLAP_F_B)");
}

static void test_csv_errors(void)
{
    const char *e;
    pp_schedule_t s;
    pp_status_t st = read_csv_file(&s, "tests/data/csv_bad_action.csv", &e);
    TS_EXPECT_REJECT(
        st, e,
        "tests/data/csv_bad_action.csv:2:13: cell 4: '1b1' is not an action " ACTION_ALLOWED);
    st = read_csv_file(&s, "tests/data/csv_two_ranks.csv", &e);
    TS_EXPECT_REJECT(st, e,
                     "tests/data/csv_two_ranks.csv:2:2: cell 2: stage 1 already runs on rank 0 "
                     "(line 1, cell 3) (allowed: each stage on one rank)");
    st = read_csv_file(&s, "tests/data/csv_missing_stage.csv", &e);
    TS_EXPECT_REJECT(st, e,
                     "tests/data/csv_missing_stage.csv: stage 1 has no action in any row (allowed: "
                     "every stage 0..2 in some row)");
    st = read_csv_file(&s, "tests/data/csv_empty_row.csv", &e);
    TS_EXPECT_REJECT(st, e,
                     "tests/data/csv_empty_row.csv:2:1: rank 1 has no actions (allowed: at least "
                     "one action in every row)");
    st = read_csv_file(&s, "tests/data/csv_empty.csv", &e);
    TS_EXPECT_REJECT(st, e,
                     "tests/data/csv_empty.csv: no actions (allowed: one row of actions per rank, "
                     "cells such as 0F0,0F1,0B0,0B1)");

    EXPECT_CSV_ERROR("0F0,0B0\n1F0,1X0\n",
                     "t.csv:2:5: cell 2: '1X0' is not an action " ACTION_ALLOWED);
    EXPECT_CSV_ERROR("0F0,  F3 ,0B0\n", "t.csv:1:7: cell 2: 'F3' is not an action " ACTION_ALLOWED);
    EXPECT_CSV_ERROR("0F0,,,0F\n", "t.csv:1:7: cell 4: '0F' is not an action " ACTION_ALLOWED);
    EXPECT_CSV_ERROR("0F1x\n", "t.csv:1:1: cell 1: '0F1x' is not an action " ACTION_ALLOWED);
    EXPECT_CSV_ERROR("0F0;0B0\n", "t.csv:1:1: cell 1: '0F0;0B0' is not an action " ACTION_ALLOWED);
    EXPECT_CSV_ERROR("0F0,-1F0\n", "t.csv:1:5: cell 2: '-1F0' is not an action " ACTION_ALLOWED);
    EXPECT_CSV_ERROR("0F0,1024B0\n",
                     "t.csv:1:5: cell 2: stage 1024 is out of range (allowed: 0..1023)");
    EXPECT_CSV_ERROR("0F65536\n",
                     "t.csv:1:1: cell 1: micro-batch 65536 is out of range (allowed: 0..65535)");
    EXPECT_CSV_ERROR("", "t.csv: no actions (allowed: one row of actions per rank, cells such as "
                         "0F0,0F1,0B0,0B1)");

    /* More rows than devices a schedule may have. */
    size_t cap = 70 * 32;
    char *big = malloc(cap);
    REQUIRE(big);
    size_t n = 0;
    for (int r = 0; r <= PP_MAX_DEVICES; r++)
        n += (size_t)snprintf(big + n, cap - n, "%dF0,%dB0\n", r, r);
    pp_status_t st2 = read_csv_text(&s, big, "big.csv", &e);
    TS_EXPECT_REJECT(st2, e,
                     "big.csv:65:1: more than 64 rows (allowed: one row per rank, at most 64)");
    /* Exactly 64 rows, then trailing empty lines: fine. */
    n = 0;
    for (int r = 0; r < PP_MAX_DEVICES; r++)
        n += (size_t)snprintf(big + n, cap - n, "%dF0,%dB0\n", r, r);
    snprintf(big + n, cap - n, "\n,\n");
    st2 = read_csv_text(&s, big, "big.csv", &e);
    EXPECT(st2 == PP_OK, "%s", e);
    if (st2 == PP_OK) EXPECT(s.n_devices == 64 && s.n_stages == 64 && s.stage_device[63] == 63);
    schedule_free(&s);
    free(big);
}

/* ---------------------------------------------------------------------------------------------
 * YAML steps
 * ------------------------------------------------------------------------------------------- */

static void test_yaml_round_trip(void)
{
    for (int it = 0; it < 40; it++) {
        pp_schedule_t a;
        /* Long programs make the writer wrap its flow lists over several lines. */
        REQUIRE(random_schedule(&a, it % 2 ? 200 : 12) == PP_OK);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        REQUIRE(f);
        EXPECT(schedule_write_yaml(&a, f) == PP_OK);
        fclose(f);
        int longest = 0, cur = 0;
        for (size_t i = 0; i < len; i++) {
            cur = text[i] == '\n' ? 0 : cur + 1;
            if (cur > longest) longest = cur;
        }
        EXPECT(longest <= 100, "a line of %d characters", longest);
        EXPECT(!strncmp(text, "schedule:\n  steps:\n    0: [", 27), "%.40s", text);

        pp_config_t c;
        pp_job_t j = {0};
        pp_schedule_t back = {0};
        ts_capture_begin();
        pp_status_t st = config_load_string(&c, "steps.yaml", text, NULL, 0);
        if (st == PP_OK) st = written_from_steps(&back, &c);
        if (st == PP_OK) st = job_from_config(&j, &c);
        if (st == PP_OK) st = written_reconcile(&j, &c, &back, 0);
        const char *e = ts_capture_end();
        EXPECT(st == PP_OK, "%s\n%s", e, text);
        if (st == PP_OK) {
            EXPECT(c.schedule.kind == PP_SCHED_STEPS);
            EXPECT(same_schedule(&a, &back), "YAML round trip changed the schedule");
            EXPECT(j.pipeline.n_devices == a.n_devices && j.pipeline.micro_batches == a.n_mb);
        }
        schedule_free(&back);
        job_free(&j);
        config_free(&c);
        free(text);
        schedule_free(&a);
    }
}

static void test_yaml_write_exact(void)
{
    pp_schedule_t s;
    REQUIRE(schedule_init(&s, 2, 2, 1) == PP_OK);
    schedule_push(&s, 0, PP_ACT_F, 0, 0);
    schedule_push(&s, 0, PP_ACT_B, 0, 0);
    schedule_push(&s, 1, PP_ACT_F, 1, 0);
    schedule_push(&s, 1, PP_ACT_B, 1, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    REQUIRE(f);
    EXPECT(schedule_write_yaml(&s, f) == PP_OK);
    fclose(f);
    EXPECT(!strcmp(text, "schedule:\n  steps:\n    0: [0F0, 0B0]\n    1: [1F0, 1B0]\n"), "%s",
           text);
    free(text);
    schedule_free(&s);
}

int main(void)
{
    ts_rng_seed(0x243f6a8885a308d3ull);
    RUN(test_action_round_trip);
    RUN(test_action_invalid);
    RUN(test_csv_round_trip);
    RUN(test_csv_write_exact);
    RUN(test_csv_idle_cells);
    RUN(test_csv_overlap_f_b);
    RUN(test_csv_errors);
    RUN(test_yaml_round_trip);
    RUN(test_yaml_write_exact);
    return check_summary("test_schedule_io");
}
