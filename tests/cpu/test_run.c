/*
 * test_run.c — the run chain (run.h) without a GPU: a YAML text simulated end to end, the cost
 * model's one source (uniform `cost:` scaled by 1/chunks, or the means of a measured timeline),
 * and a measured run through a stand-in executor, whose losses and op times must reach the report
 * (the last step's loss) and the simulation beside it (fed the measured costs). An input problem
 * stops the chain with PP_ERR_INPUT and a freeable run. Random sizes come from a seeded generator.
 */
#include "tests/check.h"
#include "run/run.h"
#include "model/cost.h"
#include "plan/stage_cfg.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

static const char *yaml_of(const char *kind, int p, int m)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "model: {layers: 24, hidden: 64, heads: 4, seq_len: 32, vocab: 128}\n"
             "pipeline: {devices: %d, micro_batches: %d}\n"
             "schedule: {kind: %s}\n"
             "run: {steps: 3, warmup: 1}\n"
             "cost: {forward: 1, backward_input: 2, backward_weight: 1, send: 0}\n",
             p, m, kind);
    return buf;
}

/* Simulated: the closed form holds with uniform costs, the report has no loss. */
static void test_simulated(void)
{
    static const char *kinds[] = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"};
    for (int k = 0; k < 4; k++) {
        int p = ts_rand_int(1, 4), m = p * ts_rand_int(1, 3);
        pp_run_t r;
        pp_run_opts_t ro = {0};
        REQUIRE(run_load(&r, "t.yaml", yaml_of(kinds[k], p, m), NULL, 0, 0) == PP_OK, "%s",
                kinds[k]);
        REQUIRE(run_go(&r, &ro) == PP_OK);
        EXPECT(!r.measured && run_timeline(&r) == &r.sim);
        EXPECT(r.plan.n_mb == m && r.report.micro_batches == m);
        EXPECT(isnan(r.report.loss));
        if (strcmp(kinds[k], "gpipe") != 0) /* GPipe's B here costs I + W = 3 F: no closed form */
            EXPECT(p == 1 || isfinite(r.report.bubble_theory), "%s", kinds[k]);
        run_free(&r);
    }
}

/* A measured DualPipeV timeline priced back (run_cost_model): the pairs' overlap is read off the
 * timeline (how far into its forward each backward half began), so a simulation with the measured
 * cost model gives the step that was measured. Here the "measurement" is a simulation with
 * overlap 0.6 and the costs the means recover exactly, so the step must come back to the digit;
 * taking cost.overlap's unset 0 instead (the pair run one half after the other) would make it
 * much longer. cost.overlap, when set, still wins. */
static void test_measured_pair_overlap(void)
{
    pp_run_t r;
    const char *sets[] = {"cost.overlap=0.6", "cost.forward=1", "cost.backward_input=1.2",
                          "cost.backward_weight=0.8"};
    REQUIRE(run_load(&r, "t.yaml", yaml_of("dualpipe-v", 4, 16), sets, 4, 0) == PP_OK);
    pp_run_opts_t ro = {0};
    REQUIRE(run_go(&r, &ro) == PP_OK);
    REQUIRE(r.sim.has_op_times);
    const double measured = timeline_makespan(&r.sim);
    pp_job_t unset = r.job; /* the same job, cost.overlap not given (strings shared, not freed) */
    unset.overlap_set = 0;
    unset.cost.overlap = 0;
    pp_cost_model_t cm;
    REQUIRE(run_cost_model(&cm, &r.plan, &unset, &r.sim, NULL, NULL) == PP_OK);
    EXPECT_NEAR(cm.overlap, 0.6, 1e-9, 1e-9);
    /* the measured op times hold no zeroing or optimizer: the GPU description prices them (h100
     * with no GPU named or present; no optimizer here, so no tail) */
    for (int s = 0; s < r.plan.n_stages; s++) {
        pp_stage_cfg_t c;
        double head, tail;
        plan_stage_cfg(&c, &r.job, &r.plan, s);
        cost_stage_tail(&c, gpu_find("h100"), &head, &tail);
        EXPECT(cm.head[s] == head && head > 0 && cm.tail[s] == 0, "stage %d: %g %g", s, cm.head[s],
               cm.tail[s]);
    }
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &r.plan, &cm) == PP_OK);
    EXPECT_NEAR(timeline_makespan(&tl), measured, 1e-9, 1e-9);
    timeline_free(&tl);
    cost_model_free(&cm);
    pp_job_t set = r.job;
    set.cost.overlap = 0.25; /* given: it wins over the timeline's */
    REQUIRE(run_cost_model(&cm, &r.plan, &set, &r.sim, NULL, NULL) == PP_OK);
    EXPECT(cm.overlap == 0.25, "%g", cm.overlap);
    cost_model_free(&cm);
    run_free(&r);
}

/* Uniform costs are one device's share of the layers: a stage of an interleaved device 1/v. */
static void test_cost_model_uniform(void)
{
    pp_run_t r;
    REQUIRE(run_load(&r, "t.yaml", yaml_of("interleaved-1f1b", 2, 4), NULL, 0, 0) == PP_OK);
    REQUIRE(r.plan.chunks == 2);
    pp_cost_model_t cm;
    REQUIRE(run_cost_model(&cm, &r.plan, &r.job, NULL, NULL, NULL) == PP_OK);
    for (int s = 0; s < r.plan.n_stages; s++) {
        EXPECT(cm.f[s] == 0.5 && cm.i[s] == 1.0 && cm.w[s] == 0.5, "stage %d", s);
        EXPECT(cm.b[s] == 1.5, "stage %d: B = I + W", s);
    }
    cost_model_free(&cm);
    run_free(&r);
}

/* An uneven split reaches every consumer through plan_stage_cfg: hand-set costs scale by a
 * stage's blocks, the model prices each stage by its own blocks, memory sizes each by them. */
static void test_uneven_split(void)
{
    pp_run_t r;
    const char *sets[] = {"model.layers_per_stage=[6, 18]"};
    REQUIRE(run_load(&r, "t.yaml", yaml_of("1f1b", 2, 4), sets, 1, 0) == PP_OK);
    pp_cost_model_t cm;
    REQUIRE(run_cost_model(&cm, &r.plan, &r.job, NULL, NULL, NULL) == PP_OK);
    EXPECT(cm.f[0] == 0.5 && cm.f[1] == 1.5, "hand-set f: %g %g", cm.f[0], cm.f[1]);
    EXPECT(cm.i[0] == 1.0 && cm.i[1] == 3.0, "hand-set i: %g %g", cm.i[0], cm.i[1]);
    cost_model_free(&cm);
    run_free(&r);
    const char *model_sets[] = {"model.layers_per_stage=[3, 21]"};
    pp_run_t even, uneven;
    const char *yaml = "model: {layers: 24, hidden: 256, heads: 4, seq_len: 128, vocab: 128}\n"
                       "pipeline: {devices: 2, micro_batches: 4}\nschedule: {kind: 1f1b}\n";
    REQUIRE(run_load(&even, "t.yaml", yaml, NULL, 0, 0) == PP_OK);
    REQUIRE(run_load(&uneven, "t.yaml", yaml, model_sets, 1, 0) == PP_OK);
    pp_run_opts_t ro = {0};
    REQUIRE(run_go(&even, &ro) == PP_OK && run_go(&uneven, &ro) == PP_OK);
    EXPECT(uneven.cost.f[0] < even.cost.f[0] && uneven.cost.f[1] > even.cost.f[1],
           "stage F: even %g %g, uneven %g %g", even.cost.f[0], even.cost.f[1], uneven.cost.f[0],
           uneven.cost.f[1]);
    EXPECT(uneven.mem.dev[0].state < even.mem.dev[0].state &&
               uneven.mem.dev[1].state > even.mem.dev[1].state,
           "state bytes: even %g %g, uneven %g %g", even.mem.dev[0].state, even.mem.dev[1].state,
           uneven.mem.dev[0].state, uneven.mem.dev[1].state);
    run_free(&even);
    run_free(&uneven);
}

/* The run's table, as `ppsched FILE` prints it (the text lives until the next call). */
static const char *table_of(const pp_run_t *r)
{
    static char buf[1 << 16];
    FILE *f = tmpfile();
    EXPECT(f != NULL);
    if (!f) return "";
    report_print_table(&r->report, &r->job, f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* A stand-in executor: the simulator's timeline with per-stage costs as the "measurement", and
 * a loss per step. */
static pp_status_t fake_exec(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                             const pp_job_t *cfg, const pp_exec_opts_t *opts)
{
    pp_cost_model_t cm;
    PP_CHECK(cost_model_uniform(&cm, plan->n_stages, &cfg->cost));
    for (int s = 0; s < plan->n_stages; s++)
        cm.f[s] = 1.0 + s; /* the later stages slower */
    pp_status_t st = simulate_plan(tl, plan, &cm);
    cost_model_free(&cm);
    PP_CHECK(st);
    tl->mode = PP_MODE_MEASURE;
    tl->has_op_times = 1;
    res->n_steps = cfg->run.warmup + cfg->run.steps;
    res->loss = calloc((size_t)res->n_steps, sizeof *res->loss);
    PP_ALLOC_CHECK(res->loss);
    for (int k = 0; k < res->n_steps; k++)
        res->loss[k] = 5.0 - 0.25 * k;
    EXPECT(opts->timeout_s == 7.5 && opts->timing == 1 && !opts->sync);
    return PP_OK;
}

/* The what-if figures the chain simulated in its own pass are explain_what_if's, to the bit, and
 * its timeline is simulate_plan's. */
static void expect_what_if_alone(const pp_run_t *r, const char *what)
{
    pp_what_if_t w;
    pp_timeline_t tl;
    REQUIRE(r->report.explain.have_what_if);
    REQUIRE(explain_what_if(&w, &r->plan, &r->cost) == PP_OK);
    for (int i = 0; i < PP_WHAT_IF_COUNT; i++)
        EXPECT(r->report.explain.what_if.step_ms[i] == w.step_ms[i], "%s: %s %.17g, alone %.17g",
               what, pp_what_ifs[i].name, r->report.explain.what_if.step_ms[i], w.step_ms[i]);
    REQUIRE(simulate_plan(&tl, &r->plan, &r->cost) == PP_OK);
    EXPECT(tl.n_ops == r->sim.n_ops && !memcmp(tl.t, r->sim.t, sizeof *tl.t * (size_t)tl.n_ops) &&
               tl.step_ms[0] == r->sim.step_ms[0],
           "%s: the timeline simulated with the what-if differs from simulate_plan's", what);
    timeline_free(&tl);
}

/* A simulated run: its what-if comes from the prediction's pass. */
static void test_simulated_what_if(void)
{
    pp_run_t r;
    pp_run_opts_t ro = {0};
    const char *kinds[] = {"1f1b", "zb-h1", "dualpipe-v"}, *two[] = {"pipeline.chunks=2"};
    for (int i = 0; i < 3; i++) {
        REQUIRE(run_load(&r, "t.yaml", yaml_of(kinds[i], 4, 8), two, i == 2, 0) == PP_OK);
        REQUIRE(run_go(&r, &ro) == PP_OK);
        expect_what_if_alone(&r, kinds[i]);
        run_free(&r);
    }
}

static void test_measured(void)
{
    int p = ts_rand_int(2, 4);
    pp_run_t r;
    pp_run_opts_t ro = {.measure = 1, .exec = fake_exec, .timeout_s = 7.5};
    REQUIRE(run_load(&r, "t.yaml", yaml_of("1f1b", p, 2 * p), NULL, 0, 0) == PP_OK);
    REQUIRE(run_go(&r, &ro) == PP_OK);
    EXPECT(r.measured && run_timeline(&r) == &r.meas);
    EXPECT(r.report.loss == 5.0 - 0.25 * 3, "loss %.9g: the last of 4 steps", r.report.loss);
    /* The simulation ran on the measured costs: the same timeline, the same bubble. */
    for (int s = 0; s < r.plan.n_stages; s++)
        EXPECT(r.cost.f[s] == 1.0 + s, "stage %d: f %g", s, r.cost.f[s]);
    EXPECT_NEAR(r.report.bubble_simulated, r.report.bubble, 1e-12, 1e-12);
    EXPECT(strstr(table_of(&r), "# predicted before running: step "), "%s", table_of(&r));
    expect_what_if_alone(&r, "measured");
    run_free(&r);
    /* Pipeline devices sharing a GPU: the prediction is for separate GPUs, and not compared. */
    const char *shared[] = {"pipeline.devices=[0, 0]"};
    REQUIRE(run_load(&r, "t.yaml", yaml_of("1f1b", 2, 4), shared, 1, 0) == PP_OK);
    REQUIRE(run_go(&r, &ro) == PP_OK);
    const char *t = table_of(&r);
    EXPECT(r.report.shared_gpus && strstr(t, "# predicted for separate GPUs: step ") &&
               !strstr(t, "# predicted before running: step"),
           "%s", t);
    run_free(&r);
}

/* An input problem stops the chain; the run frees cleanly (ASan). */
/* run_load_group sets the job's process layout from the group before lowering: two processes of
 * two devices each, on two hosts, get nccl between them (the hosts apart) and peer within each;
 * run_load alone gives every boundary peer. The load itself calls no collective (the group's
 * row is left empty here). */
static void test_load_group(void)
{
    pp_group_place_t places[2] = {{0, 0}, {1, 0}};
    pp_group_t g = {.rank = 1, .size = 2, .local_size = 1, .n_hosts = 2, .places = places};
    const char *yaml = "pipeline: {devices: 4, micro_batches: 4}\n";
    pp_run_t r;
    REQUIRE(run_load_group(&r, &g, "t.yaml", yaml, NULL, 0, 0) == PP_OK);
    EXPECT(r.group == &g && r.job.procs.n_procs == 2 && r.job.procs.n_hosts == 2);
    for (int d = 0; d < 4; d++)
        EXPECT(r.job.procs.rank_of[d] == d / 2 && r.job.procs.host_of[d] == d / 2, "device %d", d);
    EXPECT(job_boundary_reach(&r.job, 1, 2) == PP_REACH_NETWORK);
    pp_transport_t link[4];
    plan_boundary_links(&r.plan, link);
    EXPECT(link[0] == PP_TRANSPORT_PEER && link[1] == PP_TRANSPORT_NCCL &&
               link[2] == PP_TRANSPORT_PEER,
           "%s %s %s", transport_name(link[0]), transport_name(link[1]), transport_name(link[2]));
    run_free(&r);
    REQUIRE(run_load(&r, "t.yaml", yaml, NULL, 0, 0) == PP_OK);
    plan_boundary_links(&r.plan, link);
    EXPECT(r.group == NULL && r.job.procs.n_procs == 1);
    for (int s = 0; s < 3; s++)
        EXPECT(link[s] == PP_TRANSPORT_PEER, "boundary %d: %s", s, transport_name(link[s]));
    run_free(&r);
}

static void test_input_errors(void)
{
    pp_run_t r;
    const char *sets[] = {"pipeline.micro_batches=1"};
    ts_capture_begin();
    pp_status_t st = run_load(&r, "t.yaml", yaml_of("1f1b", 4, 8), sets, 1, 0);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strstr(err, "1f1b needs at least as many micro-batches as devices"), "%s", err);
    run_free(&r);
    /* A schedule with a deadlock: the lowering's dry run names it, once. */
    ts_capture_begin();
    st = run_load(&r, "t.yaml",
                  "schedule:\n  steps: [[0F0, 0B0, 0F1, 0B1], [1F1, 1F0, 1B0, 1B1]]\n", NULL, 0, 0);
    err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strstr(err, "waits for 0SEND_F1"), "%s", err);
    EXPECT(strstr(err, "the steps schedule above is not valid"), "%s", err);
    const char *second = strstr(err, "waits for 0SEND_F1");
    EXPECT(second && !strstr(second + 1, "waits for 0SEND_F1"), "reported twice:\n%s", err);
    run_free(&r);
}

int main(void)
{
    ts_rng_seed(0x9e3779b97f4a7c15ull);
    RUN(test_simulated);
    RUN(test_cost_model_uniform);
    RUN(test_uneven_split);
    RUN(test_measured);
    RUN(test_simulated_what_if);
    RUN(test_input_errors);
    RUN(test_load_group);
    RUN(test_measured_pair_overlap);
    return check_summary("test_run");
}
