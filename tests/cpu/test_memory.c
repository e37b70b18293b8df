/*
 * test_memory.c — the memory prediction (memory.h) against the stage's own sizing functions
 * (model/stage_size.h) on the executor's stage configurations (stage_cfg.h), the activation
 * slots in micro-batch equivalents against the closed forms of 1F1B and GPipe, the fit verdict,
 * and monotonicity in every model key.
 */
#include "plan/memory.h"
#include "run/run.h"
#include "plan/stage_cfg.h"
#include "tests/check.h"
#include "support.h"

#include <string.h>

/* The chain up to the plan, from YAML text and overrides. */
static int load(pp_run_t *r, const char *yaml, const char *const *sets, int n_sets)
{
    return run_load(r, "t.yaml", yaml, sets, n_sets, -1) == PP_OK;
}

static void test_equals_sizing_functions(void)
{
    const char *kinds[] = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"};
    for (int k = 0; k < 4; k++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "model: {layers: 16, hidden: 256, heads: 4, seq_len: 128, vocab: 1000}\n"
                 "pipeline: {devices: 4, micro_batches: 8, micro_batch_size: 2}\n"
                 "schedule: {kind: %s}\nrun: {optimizer: %s}\n",
                 kinds[k], k % 2 ? "adamw" : "none");
        pp_run_t r;
        REQUIRE(load(&r, yaml, NULL, 0), "%s", kinds[k]);
        const pp_gpu_t *g = gpu_find("h200");
        pp_mem_pred_t m;
        REQUIRE(memory_predict(&m, &r.job, &r.plan, g, NULL) == PP_OK);
        double want[PP_MAX_DEVICES] = {0};
        int stages_on[PP_MAX_DEVICES] = {0};
        for (int s = 0; s < r.plan.n_stages; s++) {
            pp_stage_cfg_t c;
            plan_stage_cfg(&c, &r.job, &r.plan, s);
            stages_on[r.plan.stage_device[s]]++;
            EXPECT(c.n_slots == r.plan.slots_per_stage[s] && c.with_optimizer == (k % 2));
            want[r.plan.stage_device[s]] +=
                (double)(stage_state_bytes(&c) + stage_workspace_bytes(&c) +
                         (size_t)c.n_slots * stage_slot_bytes(&c) +
                         (size_t)c.n_wgrad_slots * stage_wgrad_slot_bytes(&c));
            EXPECT(c.recompute == r.job.run.recompute);
        }
        for (int d = 0; d < m.n_devices; d++)
            EXPECT_NEAR(m.dev[d].total,
                        want[d] + (g->runtime_gib + stages_on[d] * g->stage_gib) * 1073741824.0, 0,
                        1e-12);
        /* a profile's runtime share replaces the table's, with its overhead once a stage */
        pp_profile_t prof;
        memset(&prof, 0, sizeof prof);
        prof.runtime_bytes = ts_rand_uniform(1e8, 1e9);
        prof.stage_overhead_bytes = ts_rand_uniform(1e7, 1e8);
        REQUIRE(memory_predict(&m, &r.job, &r.plan, g, &prof) == PP_OK);
        for (int d = 0; d < m.n_devices; d++) {
            int n = 0;
            for (int s = 0; s < r.plan.n_stages; s++)
                n += r.plan.stage_device[s] == d;
            EXPECT_NEAR(m.dev[d].total,
                        want[d] + prof.runtime_bytes + n * prof.stage_overhead_bytes, 0, 1e-12);
        }
        run_free(&r);
    }
}

static void test_microbatch_equivalents(void)
{
    for (int rep = 0; rep < 6; rep++) {
        int p = ts_rand_int(2, 6), m = p + ts_rand_int(0, 6);
        char yaml[256];
        snprintf(yaml, sizeof yaml,
                 "model: {layers: %d, hidden: 128, heads: 2, seq_len: 64, vocab: 500}\n"
                 "pipeline: {devices: %d, micro_batches: %d}\nschedule: {kind: %s}\n",
                 2 * p, p, m, rep % 2 ? "gpipe" : "1f1b");
        pp_run_t r;
        REQUIRE(load(&r, yaml, NULL, 0));
        pp_mem_pred_t mp;
        REQUIRE(memory_predict(&mp, &r.job, &r.plan, gpu_find("h100"), NULL) == PP_OK);
        for (int d = 0; d < p; d++) {
            int want = rep % 2 ? m : (p - d < m ? p - d : m); /* GPipe m; 1F1B min(p - i, m) */
            EXPECT_NEAR(mp.dev[d].mb_equiv, want, 0, 1e-12);
        }
        run_free(&r);
    }
}

static void test_verdict(void)
{
    pp_run_t r;
    const char *sets[] = {"model.layers=48",          "model.hidden=4096",  "model.heads=32",
                          "model.seq_len=4096",       "pipeline.devices=8", "schedule.kind=gpipe",
                          "pipeline.micro_batches=32"};
    REQUIRE(load(&r, "name: big\n", sets, 7));
    pp_mem_pred_t m;
    char v[256];
    REQUIRE(memory_predict(&m, &r.job, &r.plan, gpu_find("h100"), NULL) == PP_OK);
    memory_verdict(&m, v, sizeof v);
    EXPECT(m.n_over > 0 && strncmp(v, "does not fit: device ", 21) == 0 &&
               strstr(v, "GiB; h100 has 79.2 GiB"),
           "%s", v);
    run_free(&r);
    REQUIRE(load(&r, "name: small\n", NULL, 0));
    REQUIRE(memory_predict(&m, &r.job, &r.plan, gpu_find("h200"), NULL) == PP_OK);
    memory_verdict(&m, v, sizeof v);
    EXPECT(m.n_over == 0 && m.fullest == 0 && strncmp(v, "fits: device 0 needs ", 21) == 0 &&
               strstr(v, "h200 has 139.8 GiB"),
           "%s", v);
    run_free(&r);
}

/* More of any model key never needs less memory on the fullest device. */
static void test_monotonic(void)
{
    const char *base = "model: {layers: 8, hidden: 256, heads: 4, seq_len: 128, vocab: 1000}\n"
                       "pipeline: {devices: 4, micro_batches: 8, micro_batch_size: 2}\n";
    const char *more[] = {"model.layers=16",    "model.hidden=512", "model.seq_len=256",
                          "model.vocab=2000",   "model.heads=8",    "pipeline.micro_batch_size=3",
                          "run.optimizer=adamw"};
    pp_run_t r;
    pp_mem_pred_t a, b;
    REQUIRE(load(&r, base, NULL, 0));
    REQUIRE(memory_predict(&a, &r.job, &r.plan, gpu_find("h100"), NULL) == PP_OK);
    run_free(&r);
    for (int k = 0; k < 7; k++) {
        REQUIRE(load(&r, base, &more[k], 1));
        REQUIRE(memory_predict(&b, &r.job, &r.plan, gpu_find("h100"), NULL) == PP_OK);
        for (int d = 0; d < 4; d++)
            EXPECT(b.dev[d].total >= a.dev[d].total, "%s: device %d %g -> %g", more[k], d,
                   a.dev[d].total, b.dev[d].total);
        run_free(&r);
    }
}

/* The chain attaches the prediction to the report: peak memory per device when simulating. */
static void test_report(void)
{
    pp_run_t r;
    REQUIRE(load(&r, "name: x\n", NULL, 0));
    pp_run_opts_t ro = {0};
    REQUIRE(run_go(&r, &ro) == PP_OK);
    EXPECT(r.report.step_ms_predicted == r.report.step_ms);
    for (int d = 0; d < r.report.devices; d++) {
        EXPECT(r.report.per_device[d].peak_mem_bytes == (size_t)r.mem.dev[d].total);
        EXPECT(r.report.per_device[d].peak_mem_predicted == (size_t)r.mem.dev[d].total);
    }
    EXPECT(strncmp(r.report.mem_verdict, "fits:", 5) == 0, "%s", r.report.mem_verdict);
    run_free(&r);
}

int main(void)
{
    ts_rng_seed(0x3e3);
    RUN(test_equals_sizing_functions);
    RUN(test_microbatch_equivalents);
    RUN(test_verdict);
    RUN(test_monotonic);
    RUN(test_report);
    return check_summary("test_memory");
}
