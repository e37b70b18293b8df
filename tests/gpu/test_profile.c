/*
 * test_profile.c — `ppsched profile` on the GPU present (execute_profile), and a measured run that
 * carries the model's prediction.
 *
 * The profile of a small bf16 model (flash attention path) must hold positive times for every
 * stage and pass, each stage's measured memory at least what the sizing functions say it
 * allocates (cudaMalloc only rounds up), a positive runtime share, finite calibration factors,
 * the device's name and the GPU row it matches, and read back as written. With two GPUs it also
 * times four peer copies. The whole-model runs (1F1B steps, DualPipeV pairs) must give positive
 * times, finite step factors and an overlap in 0..1. A measured run through the chain with that
 * profile reports a predicted step and a predicted peak per device. No timing thresholds: times
 * vary by machine.
 */
#include "tests/check.h"
#include "tests/gpu/support.h"

#include "exec/execute.h"
#include "run/profile_run.h"
#include "config/resolve.h"
#include "run/run.h"
#include "stages/stage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n_gpus;

static const char *yaml_quick =
    "model: {layers: 8, hidden: 128, heads: 2, seq_len: 64, vocab: 256, "
    "dtype: bf16}\n"
    "pipeline: {micro_batch_size: 2, micro_batches: 4}\n"
    "run: {steps: 3, warmup: 1, seed: 7, timeout: 900}\n";
static const char *yaml_full = "model: {layers: 8, hidden: 128, heads: 2, seq_len: 64, vocab: 256, "
                               "dtype: bf16}\n"
                               "pipeline: {micro_batch_size: 2, micro_batches: 4}\n"
                               "run: {steps: 3, warmup: 1, seed: 7, timeout: 60}\n";
static const char *yaml;

static void profile_small(void)
{
    if (n_gpus < 1) SKIP("%s", tg_skip_reason());
    pp_config_t written;
    pp_job_t cfg;
    const char *sets[] = {n_gpus >= 2 ? "pipeline.devices=2" : "pipeline.devices=1"};
    REQUIRE(config_load_string(&written, "t.yaml", yaml, sets, 1) == PP_OK);
    REQUIRE(job_resolve(&cfg, &written, NULL, n_gpus) == PP_OK);
    config_free(&written);
    pp_profile_t p;
    REQUIRE(execute_profile(&p, &cfg, 3, 0) == PP_OK);
    int lps = cfg.model.layers / cfg.pipeline.stages;
    EXPECT(p.shape.n_layers == lps && p.shape.hidden == 128 && p.dtype == PP_DTYPE_BF16);
    EXPECT(p.device[0] != '\0' && strlen(p.date) == 20, "device '%s', date '%s'", p.device, p.date);
    const pp_gpu_t *g = gpu_match_device(p.device);
    EXPECT(strcmp(p.gpu, g ? g->name : "") == 0, "gpu '%s'", p.gpu);
    for (int k = 0; k < PP_PROF_STAGE_COUNT; k++) {
        const pp_prof_stage_desc_t *d = profile_stage_desc((pp_prof_stage_t)k);
        for (int pass = 0; pass < PP_PASS_COUNT; pass++)
            EXPECT(p.ms[k][pass] > 0 && isfinite(p.ms[k][pass]), "%s pass %d: %g ms", d->name, pass,
                   p.ms[k][pass]);
        pp_stage_cfg_t c = {0};
        c.hidden = 128, c.heads = 2, c.seq_len = 64, c.vocab = 256, c.micro_batch_size = 2;
        c.n_layers = lps, c.total_layers = 8, c.is_first = d->is_first, c.is_last = d->is_last;
        c.dtype = PP_DTYPE_BF16, c.n_slots = 1;
        double sized =
            (double)(stage_state_bytes(&c) + stage_workspace_bytes(&c) + stage_slot_bytes(&c));
        /* quick (make sanitize): other programs share the GPU and move its free memory */
        EXPECT(check_quick() || p.stage_bytes[k] >= sized,
               "%s: measured %g bytes, the sizing functions %g", d->name, p.stage_bytes[k], sized);
    }
    EXPECT(check_quick() || p.runtime_bytes > 0);
    for (int pass = 0; pass < PP_PASS_COUNT; pass++)
        for (int part = 0; part < PP_PART_COUNT; part++)
            EXPECT(p.factor[pass][part] > 0 && isfinite(p.factor[pass][part]));
    if (n_gpus >= 2) EXPECT(p.n_sends == 4, "%d sends", p.n_sends);
    /* The whole model's steps and DualPipeV's pairs: a micro-batch of 2 x 64 tokens shrinks to
     * 1 x 64 and no further, so one size: 1F1B at m 8 and 32, one pair. */
    REQUIRE(profile_measure_runs(&p, &cfg, execute_plan, 0) == PP_OK);
    EXPECT(p.has_runs && p.n_steps == 2 && p.n_pairs == 1, "%d steps, %d pairs", p.n_steps,
           p.n_pairs);
    for (int k = 0; k < p.n_steps; k++)
        EXPECT(p.steps[k].ms > 0 && p.step_factor[k] > 0 && isfinite(p.step_factor[k]),
               "step %d: %g ms, factor %g", k, p.steps[k].ms, p.step_factor[k]);
    EXPECT(p.pairs[0].serial_ms > 0 && p.pairs[0].overlapped_ms > 0 && p.pairs[0].overlap >= 0 &&
               p.pairs[0].overlap <= 1,
           "%g / %g ms, overlap %g", p.pairs[0].serial_ms, p.pairs[0].overlapped_ms,
           p.pairs[0].overlap);

    char path[] = "/tmp/ppsched_gpu_profile_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    FILE *f = fdopen(fd, "w");
    REQUIRE(profile_write(&p, f) == PP_OK);
    fclose(f);
    pp_profile_t q;
    REQUIRE(profile_load(&q, path) == PP_OK);
    EXPECT(strcmp(q.device, p.device) == 0 && q.n_sends == p.n_sends);
    EXPECT(q.has_runs && q.n_steps == p.n_steps && q.n_pairs == p.n_pairs);
    EXPECT(fabs(q.ms[PP_PROF_LAST][PP_PASS_F] - p.ms[PP_PROF_LAST][PP_PASS_F]) <=
           1e-5 * p.ms[PP_PROF_LAST][PP_PASS_F]);

    /* A measured run priced with it: the prediction rides along with the measurement. */
    char set_prof[128];
    snprintf(set_prof, sizeof set_prof, "cost.profile=%s", path);
    const char *run_sets[] = {sets[0], set_prof};
    pp_run_t r;
    REQUIRE(run_load(&r, "t.yaml", yaml, run_sets, 2, n_gpus) == PP_OK);
    pp_run_opts_t ro = {.measure = 1, .exec = execute_plan, .gpu = g};
    REQUIRE(run_go(&r, &ro) == PP_OK);
    EXPECT(r.report.mode == PP_MODE_MEASURE && r.report.step_ms_predicted > 0);
    for (int d = 0; d < r.report.devices; d++)
        EXPECT(r.report.per_device[d].peak_mem_predicted > 0 &&
               r.report.per_device[d].peak_mem_bytes > 0);
    run_free(&r);
    unlink(path);
    job_free(&cfg);
}

int main(void)
{
    n_gpus = execute_device_count();
    /* The quick run (check.h, under compute-sanitizer, other programs on the same GPU) gives each
     * step a longer deadline and does not check memory measured as free-memory differences. */
    yaml = check_quick() ? yaml_quick : yaml_full;
    RUN(profile_small);
    return check_summary("test_profile");
}
