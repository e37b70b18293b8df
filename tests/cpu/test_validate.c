/*
 * test_validate.c — schedule_validate and plan_validate: every rule rejects what it should, with
 * the device, the step and the action in a one-line message (stderr is captured and searched),
 * prefixed with the file and line of the device's list or row for a written schedule (`steps:`,
 * a CSV), generated schedules pass, and random mutations of them (seeded) are caught.
 */
#include "schedule/generate.h"
#include "plan/plan.h"
#include "run/run.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* ---- helpers --------------------------------------------------------------------------------- */

/* Validate a hand-written schedule; expect PP_ERR_INPUT and `want` in a single-line message. */
static void expect_rejected(int n_stages, int n_mb, int n_dev, const char *const *progs,
                            const char *want)
{
    pp_schedule_t s;
    REQUIRE(ts_sched_from(&s, n_stages, n_mb, n_dev, progs, 0) == PP_OK);
    ts_capture_begin();
    pp_status_t st = schedule_validate(&s);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT, "status %d for %s", (int)st, want);
    EXPECT(strstr(err, want), "message:\n%s\nwant: %s", err, want);
    const char *nl = strchr(err, '\n');
    EXPECT(nl && nl[1] == '\0', "one line:\n%s", err);
    schedule_free(&s);
}

/* ---- generated schedules pass ---------------------------------------------------------------- */

static void test_generated_pass(void)
{
    for (int trial = 0; trial < 20; trial++) {
        int kind = trial % 4, p = ts_rand_int(1, 8), v = ts_rand_int(2, 4);
        int m = kind == 2 ? p * ts_rand_int(1, 4) : ts_rand_int(1, 4 * p);
        pp_schedule_t s;
        pp_plan_t pl;
        REQUIRE(ts_generate(&s, (pp_sched_kind_t)kind, p, m, v) == PP_OK);
        EXPECT(schedule_validate(&s) == PP_OK, "kind %d p=%d m=%d v=%d", kind, p, m, v);
        REQUIRE(plan_lower(&pl, &s, NULL) == PP_OK);
        EXPECT(plan_validate(&pl) == PP_OK, "kind %d p=%d m=%d v=%d", kind, p, m, v);
        plan_free(&pl);
        schedule_free(&s);
    }
}

/* ---- sparse schedules ------------------------------------------------------------------------ */

/* A short file can name 1024 stages and micro-batch 65535: the validator's tables must follow
 * the 1025 actions written, not the 67 million (stage, micro-batch) pairs they span (that took
 * 2.2 GB). Checked through the peak resident size, which must stay far below it. */
static void test_sparse_schedule_small_tables(void)
{
    pp_schedule_t s;
    struct rusage ru;
    REQUIRE(schedule_init(&s, 1, PP_MAX_STAGES, PP_MAX_MICRO_BATCHES) == PP_OK);
    for (int st = 0; st < PP_MAX_STAGES; st++)
        REQUIRE(schedule_push(&s, 0, PP_ACT_F, st, 0) == PP_OK);
    REQUIRE(schedule_push(&s, 0, PP_ACT_F, 0, PP_MAX_MICRO_BATCHES - 1) == PP_OK);
    ts_capture_begin();
    pp_status_t st = schedule_validate(&s);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(!strcmp(err, "device 0: action 0B0 is missing (stage 0, micro-batch 0 has no backward: "
                        "neither 0B0 nor 0I0 + 0W0)\n"),
           "%s", err);
    REQUIRE(getrusage(RUSAGE_SELF, &ru) == 0);
    EXPECT(ru.ru_maxrss < 400 * 1024, "peak resident size %ld KiB", ru.ru_maxrss);
    schedule_free(&s);
}

/* ---- each rule ------------------------------------------------------------------------------- */

static const char *dev0_ok = "0F0 0F1 0B0 0B1";

static void test_duplicate_f(void)
{
    const char *progs[] = {dev0_ok, "1F0 1B0 1F0 1F1 1B1"};
    expect_rejected(2, 2, 2, progs,
                    "device 1, step 2, action 1F0: appears twice (first at device 1, step 0)");
}

static void test_missing_b(void)
{
    const char *progs[] = {dev0_ok, "1F0 1B0 1F1"};
    expect_rejected(2, 2, 2, progs,
                    "device 1: action 1B1 is missing (stage 1, micro-batch 1 has no backward");
}

static void test_missing_f(void)
{
    const char *progs[] = {"0F0 0B0", "1F0 1B0"};
    expect_rejected(2, 2, 2, progs,
                    "device 0: action 0F1 is missing (stage 0, micro-batch 1 has no forward)");
    const char *progs2[] = {dev0_ok, "1B0 1F1 1B1"};
    expect_rejected(2, 2, 2, progs2, "device 1, step 0, action 1B0: its forward 1F0 is missing");
}

static void test_b_before_f(void)
{
    const char *progs[] = {"0F0 0B1 0F1 0B0", "1F0 1B0 1F1 1B1"};
    expect_rejected(2, 2, 2, progs,
                    "device 0, step 1, action 0B1: runs before its forward 0F1 (step 2)");
}

static void test_w_before_i(void)
{
    const char *progs[] = {"0F0 0F1 0I0 0W0 0W1 0I1", "1F0 1I0 1W0 1F1 1I1 1W1"};
    expect_rejected(2, 2, 2, progs,
                    "device 0, step 4, action 0W1: runs before its input-gradient backward 0I1 "
                    "(step 5)");
}

static void test_w_without_i(void)
{
    const char *progs[] = {"0F0 0F1 0I0 0W0 0I1 0W1", "1F0 1I0 1W0 1F1 1W1"};
    expect_rejected(2, 2, 2, progs,
                    "device 1, step 4, action 1W1: its input-gradient backward 1I1 is missing");
}

static void test_i_without_w(void)
{
    const char *progs[] = {"0F0 0F1 0I0 0W0 0I1 0W1", "1F0 1I0 1F1 1I1 1W1"};
    expect_rejected(2, 2, 2, progs, "device 1, step 1, action 1I0: no 1W0 follows it");
}

static void test_b_and_i_same_mb(void)
{
    const char *progs[] = {dev0_ok, "1F0 1B0 1I0 1W0 1F1 1B1"};
    expect_rejected(2, 2, 2, progs,
                    "device 1, step 1, action 1B0: micro-batch 0 of stage 1 has both a full "
                    "backward B and a split backward I/W");
}

static void test_stage_on_two_devices(void)
{
    const char *progs[] = {"0F0 0F1 0B0 0B1 1F1", "1F0 1B0 1B1"};
    expect_rejected(2, 2, 2, progs,
                    "device 1, step 0, action 1F0: stage 1 already runs on device 0 (each stage "
                    "lives on one device)");
}

static void test_out_of_range(void)
{
    const char *progs[] = {dev0_ok, "1F0 1B0 1F1 1B1 1F2"};
    expect_rejected(2, 2, 2, progs, "device 1, step 4, action 1F2: stage or micro-batch out of");
}

/* Schedules written with their transfers. */
static const char *comm0 = "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1";
static const char *comm1 = "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1";

static void test_comm_schedule_ok(void)
{
    const char *progs[] = {comm0, comm1};
    pp_schedule_t s;
    REQUIRE(ts_sched_from(&s, 2, 2, 2, progs, 0) == PP_OK);
    EXPECT(schedule_validate(&s) == PP_OK);
    schedule_free(&s);
}

static void test_unmatched_send(void)
{
    const char *progs[] = {comm0, "1RECV_F0 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1"};
    expect_rejected(2, 2, 2, progs,
                    "device 0, step 3, action 0SEND_F1: unmatched: no 1RECV_F1 receives it");
}

static void test_recv_without_send(void)
{
    const char *progs[] = {"0F0 0SEND_F0 0F1 0RECV_B0 0B0 0RECV_B1 0B1", comm1};
    expect_rejected(2, 2, 2, progs,
                    "device 1, step 4, action 1RECV_F1: nothing sends it: no 0SEND_F1 in the "
                    "schedule");
}

static void test_input_never_received(void)
{
    const char *progs[] = {comm0, "1RECV_F0 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1RECV_F1"};
    expect_rejected(2, 2, 2, progs,
                    "device 1, step 4, action 1F1: runs before its input 1RECV_F1 (step 7)");
}

static void test_boundary_that_does_not_exist(void)
{
    const char *progs[] = {comm0, "1RECV_F0 1F0 1SEND_F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"};
    expect_rejected(2, 2, 2, progs,
                    "device 1, step 2, action 1SEND_F0: stage 1 is the last stage: there is no "
                    "stage 2 to send to");
    const char *progs2[] = {"0F0 0SEND_F0 0SEND_B0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1", comm1};
    expect_rejected(2, 2, 2, progs2,
                    "device 0, step 2, action 0SEND_B0: stage 0 is the first stage: there is no "
                    "stage -1");
}

/* ---- deadlocks ------------------------------------------------------------------------------- */

/* The chain's checks before a plan exists: the rules, then the lowering's dry run. */
static pp_status_t validate_and_lower(const pp_schedule_t *s)
{
    pp_plan_t plan;
    pp_status_t st = schedule_validate(s);
    if (st != PP_OK) return st;
    st = plan_lower(&plan, s, NULL);
    plan_free(&plan);
    return st;
}

static void test_deadlock_each_recv_first(void)
{
    /* Both devices open with a RECV. Device 0 receives micro-batch 1's gradient first, which is
     * produced only after its own forward of micro-batch 1, which runs after its backward of
     * micro-batch 0, whose gradient is queued behind micro-batch 1's on the receive stream. */
    const char *progs[] = {"0RECV_B1 0F0 0SEND_F0 0RECV_B0 0B0 0F1 0SEND_F1 0B1", comm1};
    pp_schedule_t s;
    REQUIRE(ts_sched_from(&s, 2, 2, 2, progs, 0) == PP_OK);
    ts_capture_begin();
    pp_status_t st = validate_and_lower(&s);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strstr(err, "device 0, step 0, action 0RECV_B1: waits for 1SEND_B1 (device 1, step 7), "
                       "which never runs before it\n"),
           "%s", err);
    EXPECT(strstr(err, "device 1, step 3, action 1SEND_B0: waits for its receiver 0RECV_B0 "
                       "(device 0, step 3)"),
           "%s", err);
    schedule_free(&s);
}

static void test_deadlock_compute_only(void)
{
    /* Device 1 runs the stages' micro-batches in the opposite order. */
    const char *progs[] = {"0F0 0B0 0F1 0B1", "1F1 1F0 1B0 1B1"};
    pp_schedule_t s;
    REQUIRE(ts_sched_from(&s, 2, 2, 2, progs, 0) == PP_OK);
    ts_capture_begin();
    pp_status_t st = validate_and_lower(&s);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strstr(err, "device 1, step 0, action 1RECV_F1 (added for 1F1): waits for 0SEND_F1"),
           "%s", err);
    schedule_free(&s);
}

/* ---- written schedules name their place ----------------------------------------------------- */

/* run_load of `yaml` (as t.yaml) with the overrides: the status and what it printed. */
static pp_status_t load_written(const char *yaml, const char *set, const char **err)
{
    pp_run_t r;
    const char *sets[] = {set};
    ts_capture_begin();
    pp_status_t st = run_load(&r, "t.yaml", yaml, sets, set ? 1 : 0, 0);
    *err = ts_capture_end();
    run_free(&r);
    return st;
}

/* An order error in `steps:` names the file, line and column of the device's list; in a --set,
 * the override; a deadlock found by the lowering, the same place. */
static void test_steps_errors_name_the_list(void)
{
    const char *err;
    pp_status_t st = load_written("pipeline: {micro_batches: 2}\n"
                                  "schedule:\n"
                                  "  steps:\n"
                                  "    0: [0F0, 0F1, 0B0, 0B1]\n"
                                  "    1: [1F0, 1F1,\n"
                                  "        1B0]\n",
                                  NULL, &err);
    EXPECT(st == PP_ERR_INPUT &&
               !strcmp(err, "t.yaml:5:8: device 1: action 1B1 is missing (stage 1, micro-batch 1 "
                            "has no backward: neither 1B1 nor 1I1 + 1W1)\n"
                            "t.yaml: the steps schedule above is not valid\n"),
           "%s", err);
    st = load_written("schedule:\n"
                      "  steps:\n"
                      "  - [0F0, 0B0]\n"
                      "  - - 1B0\n"
                      "    - 1F0\n",
                      NULL, &err);
    EXPECT(st == PP_ERR_INPUT &&
               strstr(err, "t.yaml:4:5: device 1, step 0, action 1B0: runs before its forward 1F0 "
                           "(step 1)\n"),
           "%s", err);
    st = load_written("name: x\n", "schedule.steps=[[0F0, 0B0], [1F0]]", &err);
    EXPECT(st == PP_ERR_INPUT &&
               strstr(err, "--set schedule.steps=[[0F0, 0B0], [1F0]]: device 1: action 1B0 is "
                           "missing"),
           "%s", err);
    st = load_written("schedule:\n"
                      "  steps:\n"
                      "    0: [0F0, 0B0, 0F1, 0B1]\n"
                      "    1: [1F1, 1F0, 1B0, 1B1]\n",
                      NULL, &err);
    EXPECT(st == PP_ERR_INPUT &&
               strstr(err, "t.yaml:4:8: device 1, step 0, action 1RECV_F1 (added for 1F1): waits "
                           "for 0SEND_F1"),
           "%s", err);
}

/* A CSV's order error names the file and the device's row; a generated schedule's names no
 * place, as before. */
static void test_csv_errors_name_the_row(void)
{
    char csv[] = "0F0,0F1,,0B0,0B1\r\n,1F0,,1B0,1I1,1W1\r\n";
    pp_schedule_t s;
    FILE *f = fmemopen(csv, strlen(csv), "r");
    REQUIRE(f);
    REQUIRE(schedule_read_csv(&s, f, "t.csv") == PP_OK);
    fclose(f);
    ts_capture_begin();
    pp_status_t st = schedule_validate(&s);
    const char *err = ts_capture_end();
    EXPECT(
        st == PP_ERR_INPUT &&
            !strcmp(err, "t.csv:2:1: device 1, step 2, action 1I1: its forward 1F1 is missing\n"),
        "%s", err);
    schedule_free(&s);
    const char *progs[] = {"0F0 0B0", "1F0"};
    REQUIRE(ts_sched_from(&s, 2, 1, 2, progs, 0) == PP_OK);
    ts_capture_begin();
    st = schedule_validate(&s);
    err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && !strncmp(err, "device 1: action 1B0 is missing", 31), "%s", err);
    schedule_free(&s);
}

/* ---- random mutations of generated schedules ------------------------------------------------- */

static void test_mutations_caught(void)
{
    for (int trial = 0; trial < 40; trial++) {
        int kind = ts_rand_int(0, 3), p = ts_rand_int(1, 6), v = 2;
        int m = kind == 2 ? p * ts_rand_int(1, 3) : ts_rand_int(2, 3 * p);
        pp_schedule_t s;
        REQUIRE(ts_generate(&s, (pp_sched_kind_t)kind, p, m, v) == PP_OK);
        int d = ts_rand_int(0, p - 1);
        pp_program_t *pr = &s.prog[d];
        int i = ts_rand_int(0, pr->n - 1);
        pp_action_t victim = pr->a[i];
        char name[32], want[96];
        action_format(&victim, name, sizeof name);
        int mutation = trial % 3;
        if (mutation == 0) { /* drop it */
            memmove(&pr->a[i], &pr->a[i + 1], sizeof *pr->a * (size_t)(pr->n - i - 1));
            pr->n--;
        } else if (mutation == 1) { /* run it twice */
            REQUIRE(schedule_push(&s, d, victim.kind, victim.stage, victim.mb) == PP_OK);
        } else { /* move a backward in front of its forward */
            for (i = 0; i < pr->n && pp_action_is_compute(pr->a[i].kind) &&
                        pr->a[i].kind != PP_ACT_B && pr->a[i].kind != PP_ACT_I;
                 i++) {
            }
            REQUIRE(i < pr->n);
            victim = pr->a[i];
            memmove(&pr->a[1], &pr->a[0], sizeof *pr->a * (size_t)i);
            pr->a[0] = victim;
            action_format(&victim, name, sizeof name);
        }
        ts_capture_begin();
        pp_status_t st = schedule_validate(&s);
        const char *err = ts_capture_end();
        EXPECT(st == PP_ERR_INPUT, "kind %d p=%d m=%d mutation %d of %s", kind, p, m, mutation,
               name);
        snprintf(want, sizeof want, "device %d", s.stage_device[victim.stage]);
        EXPECT(strstr(err, want), "mutation %d of %s: %s", mutation, name, err);
        if (mutation == 1) {
            snprintf(want, sizeof want, "action %s: appears twice", name);
            EXPECT(strstr(err, want), "%s", err);
        }
        if (mutation == 2) {
            snprintf(want, sizeof want, "device %d, step 0, action %s: runs before its forward", d,
                     name);
            EXPECT(strstr(err, want), "%s", err);
        }
        schedule_free(&s);
    }
}

/* ---- plan_validate on damaged plans ---------------------------------------------------------- */

static void lower_1f1b(pp_plan_t *pl, int p, int m)
{
    pp_schedule_t s;
    memset(pl, 0, sizeof *pl);
    if (generate_1f1b(&s, p, m) != PP_OK) return;
    if (plan_lower(pl, &s, NULL) != PP_OK) memset(pl, 0, sizeof *pl);
    schedule_free(&s);
}

static int find_op(const pp_plan_t *pl, pp_action_kind_t k, int stage, int mb)
{
    for (int i = 0; i < pl->n_ops; i++)
        if (pl->ops[i].kind == k && pl->ops[i].stage == stage && pl->ops[i].mb == mb) return i;
    return -1;
}

static void expect_plan_rejected(const pp_plan_t *pl, const char *want)
{
    ts_capture_begin();
    pp_status_t st = plan_validate(pl);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strstr(err, want), "message:\n%s\nwant: %s", err, want);
}

static void test_plan_damaged(void)
{
    int p = ts_rand_int(2, 4), m = ts_rand_int(p, 2 * p);
    pp_plan_t pl;
    char want[160];

    /* A dependency on a later op: the dry run would wait forever. */
    lower_1f1b(&pl, p, m);
    REQUIRE(pl.ops && plan_validate(&pl) == PP_OK);
    int f = find_op(&pl, PP_ACT_F, 1, m - 1), b = find_op(&pl, PP_ACT_B, 1, m - 1);
    REQUIRE(f >= 0 && b > f && pl.ops[f].n_deps > 0);
    pl.deps[pl.ops[f].dep_begin] = b;
    snprintf(want, sizeof want,
             "device 1, step %d, action 1F%d: waits for 1B%d (device 1, step %d), which never runs "
             "before it",
             pl.ops[f].pos, m - 1, m - 1, pl.ops[b].pos);
    expect_plan_rejected(&pl, want);
    plan_free(&pl);

    /* A forward that does not wait for its received input. */
    lower_1f1b(&pl, p, m);
    f = find_op(&pl, PP_ACT_F, 1, 0);
    int rf = find_op(&pl, PP_ACT_RECV_F, 1, 0);
    REQUIRE(f >= 0 && rf >= 0);
    pl.ops[f].n_deps = 0;
    snprintf(want, sizeof want, "action 1F0: does not wait for 1RECV_F0 (device 1, step %d)",
             pl.ops[rf].pos);
    expect_plan_rejected(&pl, want);
    plan_free(&pl);

    /* A RECV that no longer follows its SEND. */
    lower_1f1b(&pl, p, m);
    int sf = find_op(&pl, PP_ACT_SEND_F, 0, 0);
    REQUIRE(sf >= 0);
    pl.ops[sf].peer = -1;
    expect_plan_rejected(&pl, "action 0SEND_F0: its matching 1RECV_F0 must follow it");
    plan_free(&pl);

    /* A slot beyond the stage's count. */
    lower_1f1b(&pl, p, m);
    b = find_op(&pl, PP_ACT_B, 0, 0);
    pl.ops[b].slot = pl.slots_per_stage[0];
    snprintf(want, sizeof want, "action 0B0: slot %d is out of stage 0's %d slots",
             pl.slots_per_stage[0], pl.slots_per_stage[0]);
    expect_plan_rejected(&pl, want);
    plan_free(&pl);

    /* Two ops of one stream swapped in the plan. */
    lower_1f1b(&pl, p, m);
    int f0 = find_op(&pl, PP_ACT_F, 0, 0), f1 = find_op(&pl, PP_ACT_F, 0, 1);
    REQUIRE(f0 >= 0 && f1 > f0);
    int tmp = pl.ops[f0].pos;
    pl.ops[f0].pos = pl.ops[f1].pos;
    pl.ops[f1].pos = tmp;
    expect_plan_rejected(&pl, "plan: device 0, step");
    plan_free(&pl);
}

int main(void)
{
    ts_rng_seed(0xd1b54a32d192ed03ull);
    RUN(test_sparse_schedule_small_tables); /* first: it reads the process's peak size */
    RUN(test_generated_pass);
    RUN(test_duplicate_f);
    RUN(test_missing_b);
    RUN(test_missing_f);
    RUN(test_b_before_f);
    RUN(test_w_before_i);
    RUN(test_w_without_i);
    RUN(test_i_without_w);
    RUN(test_b_and_i_same_mb);
    RUN(test_stage_on_two_devices);
    RUN(test_out_of_range);
    RUN(test_comm_schedule_ok);
    RUN(test_unmatched_send);
    RUN(test_recv_without_send);
    RUN(test_input_never_received);
    RUN(test_boundary_that_does_not_exist);
    RUN(test_deadlock_each_recv_first);
    RUN(test_deadlock_compute_only);
    RUN(test_steps_errors_name_the_list);
    RUN(test_csv_errors_name_the_row);
    RUN(test_mutations_caught);
    RUN(test_plan_damaged);
    return check_summary("test_validate");
}
