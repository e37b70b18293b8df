/*
 * fuzz_readers.c — one fuzz target for the two readers of user input. Built with -DFUZZ_CSV it
 * feeds the bytes to the CSV schedule reader, otherwise to the YAML config reader (as a file
 * named fuzz.yaml in the current folder, so `csv:` paths resolve from the repository root).
 * Whatever is read is then taken as far as the command line takes it: resolve, generate,
 * validate, lower, validate, simulate, build the report and print it as JSON and as a table.
 *
 * The contract checked: no crash, no sanitizer report, no leak, and every refusal is a status
 * (PP_ERR_INPUT for input) rather than a signal. Schedules of more than FUZZ_MAX_OPS actions
 * (for a generated one, estimated from the resolved sizes before generating) go no further than
 * the reader, so each input runs in milliseconds.
 *
 * Entry point LLVMFuzzerTestOneInput: libFuzzer's (clang -fsanitize=fuzzer) or fuzz_main.c's.
 */
#include "../../scheduler/config.h"
#include "../../scheduler/generate.h"
#include "../../scheduler/plan.h"
#include "../../scheduler/report.h"
#include "../../scheduler/schedule.h"
#include "../../scheduler/simulate.h"
#include "../../scheduler/timeline.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_OPS 20000 /* actions of a schedule taken past validation (generated: estimated)   \
                            */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Simulate the plan; with a config, also build its report and print it where nobody reads it. */
static void fuzz_report(const pp_config_t *cfg, const pp_plan_t *plan)
{
    pp_cost_cfg_t unit = {.forward = 1, .backward_input = 1, .backward_weight = 1, .send = 0.1};
    pp_cost_model_t cm;
    pp_timeline_t tl;
    pp_report_t r;
    memset(&cm, 0, sizeof cm);
    memset(&tl, 0, sizeof tl);
    if (cost_model_uniform(&cm, plan->n_stages, cfg ? &cfg->cost : &unit) == PP_OK &&
        simulate_plan(&tl, plan, &cm) == PP_OK && cfg &&
        report_build(&r, cfg, plan, &tl, &tl) == PP_OK) {
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull) {
            report_print_json(&r, devnull);
            report_print_table(&r, cfg, devnull);
            fclose(devnull);
        }
        report_free(&r);
    }
    timeline_free(&tl);
    cost_model_free(&cm);
}

/* Validate, lower, validate again and simulate a schedule (cfg NULL: a CSV read alone). */
static void fuzz_schedule(const pp_config_t *cfg, const pp_schedule_t *s)
{
    pp_plan_t plan;
    long n = 0;
    memset(&plan, 0, sizeof plan);
    for (int d = 0; d < s->n_devices; d++)
        n += s->prog[d].n;
    if (n > FUZZ_MAX_OPS) return;
    if (schedule_validate(s) == PP_OK && plan_lower(&plan, s, cfg) == PP_OK &&
        plan_validate(&plan) == PP_OK)
        fuzz_report(cfg, &plan);
    plan_free(&plan);
}

#ifdef FUZZ_CSV
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pp_schedule_t s;
    FILE *f = size ? fmemopen((void *)data, size, "r") : NULL;
    if (!f) return 0;
    if (schedule_read_csv(&s, f, "fuzz.csv") == PP_OK) {
        fuzz_schedule(NULL, &s);
        schedule_free(&s);
    }
    fclose(f);
    return 0;
}
#else
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pp_config_t cfg;
    pp_schedule_t s;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    memset(&s, 0, sizeof s);
    if (config_load_string(&cfg, "fuzz.yaml", text, NULL, 0) == PP_OK &&
        config_resolve(&cfg, 0) == PP_OK &&
        (double)cfg.pipeline.stages * cfg.pipeline.micro_batches * 3 <= FUZZ_MAX_OPS &&
        generate_schedule(&s, &cfg) == PP_OK)
        fuzz_schedule(&cfg, &s);
    schedule_free(&s);
    config_free(&cfg);
    free(text);
    return 0;
}
#endif
