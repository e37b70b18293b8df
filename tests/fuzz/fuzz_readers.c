/*
 * fuzz_readers.c — one fuzz target for the three readers of user input. Built with -DFUZZ_CSV it
 * feeds the bytes to the CSV schedule reader, with -DFUZZ_PROFILE to the profile reader (through a
 * temporary file, as cost.profile names one), otherwise to the YAML config reader (as a file
 * named fuzz.yaml in the current folder, so `csv:` paths resolve from the repository root).
 * A config is then taken as far as the command line takes it (run.h: resolve, generate,
 * validate, lower, validate, simulate, report, printed as JSON and as a table); a CSV schedule
 * is validated, lowered and simulated; a profile that loads prices a small run (its calibration,
 * step factor and pair overlap in the cost model, its runtime share in the memory prediction) and
 * prints its summary.
 *
 * The contract checked: no crash, no sanitizer report, no leak, and every refusal is a status
 * (PP_ERR_INPUT for input) rather than a signal. Schedules of more than FUZZ_MAX_OPS actions
 * (for a generated one, estimated from the resolved sizes before generating) go no further than
 * the reader, so each input runs in milliseconds.
 *
 * Entry point LLVMFuzzerTestOneInput: libFuzzer's (clang -fsanitize=fuzzer) or fuzz_main.c's.
 */
#include "config/resolve.h"
#include "run/run.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Actions of a schedule taken past validation (for a generated one, estimated). */
#define FUZZ_MAX_OPS 20000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef FUZZ_CSV
/* Validate, lower, validate again and simulate a schedule read alone. */
static void fuzz_schedule(const pp_schedule_t *s)
{
    pp_job_cost_t unit = {.forward = 1, .backward_input = 1, .backward_weight = 1, .send = 0.1};
    pp_cost_model_t cm;
    pp_timeline_t tl;
    pp_plan_t plan;
    long n = 0;
    memset(&plan, 0, sizeof plan);
    memset(&cm, 0, sizeof cm);
    memset(&tl, 0, sizeof tl);
    for (int d = 0; d < s->n_devices; d++)
        n += s->prog[d].n;
    if (n > FUZZ_MAX_OPS) return;
    if (schedule_validate(s) == PP_OK && plan_lower(&plan, s, NULL) == PP_OK &&
        plan_validate(&plan) == PP_OK && cost_model_uniform(&cm, plan.n_stages, &unit) == PP_OK)
        simulate_plan(&tl, &plan, &cm);
    timeline_free(&tl);
    cost_model_free(&cm);
    plan_free(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pp_schedule_t s;
    FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;
    if (!f) return 0;
    if (schedule_read_csv(&s, f, "fuzz.csv") == PP_OK) {
        fuzz_schedule(&s);
        schedule_free(&s);
    }
    fclose(f);
    return 0;
}
#elif defined(FUZZ_PROFILE)
#include <unistd.h>

/* The bytes as a profile file; then, when it loads, a small simulated run priced with it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    pp_profile_t p;
    if (!path[0]) {
        int fd = mkstemp(strcpy(path, "/tmp/fuzz_profile_XXXXXX"));
        if (fd < 0) return 0;
        close(fd);
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t put = fwrite(data, 1, size, f);
    fclose(f);
    if (put != size || profile_load(&p, path) != PP_OK) return 0;
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        profile_print_summary(&p, devnull);
        fclose(devnull);
    }
    char set[96];
    snprintf(set, sizeof set, "cost.profile=%s", path);
    const char *sets[] = {set};
    pp_run_t r;
    pp_run_opts_t o = {.measure = 0};
    if (run_load(&r, "fuzz.yaml", "pipeline: {devices: 2, micro_batches: 4}\nmodel: {layers: 4}\n",
                 sets, 1, 0) == PP_OK)
        run_go(&r, &o);
    run_free(&r);
    return 0;
}
#else
/* The command line's chain on the text: load and resolve, then (for plans of a bounded size)
 * plan, simulate and report. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pp_run_t r;
    pp_run_opts_t o = {.measure = 0};
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    memset(&r, 0, sizeof r);
    if (config_load_string(&r.cfg, "fuzz.yaml", text, NULL, 0) == PP_OK &&
        job_resolve(&r.job, &r.cfg, NULL, 0) == PP_OK &&
        (long)r.job.pipeline.stages * r.job.pipeline.micro_batches * 3 <= FUZZ_MAX_OPS &&
        run_plan(&r) == PP_OK && run_go(&r, &o) == PP_OK) {
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull) {
            report_print_json(&r.report, devnull);
            report_print_table(&r.report, &r.job, devnull);
            fclose(devnull);
        }
    }
    run_free(&r);
    free(text);
    return 0;
}
#endif
