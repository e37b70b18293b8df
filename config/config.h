/*
 * config.h — the run configuration read from a schedule YAML file (libyaml), with command-line
 * overrides (`--set section.key=value`) applied on top.
 *
 * Contract: config_load fills every field, defaults included, or prints `file:line:col: message
 * (allowed: ...)` for the first problem and returns PP_ERR_INPUT. Overrides name the place as
 * `--set key=value: message`. The config is what the user wrote and nothing else: the resolve
 * step (resolve.h) reads it, never changes it, and makes the job (model/job.h) that every later
 * phase reads. Every key and its default is documented
 * in docs/schedule-format.md. The config holds what the user wrote: `steps:` as the action texts
 * with their places, `csv:` as the path; written.c builds those schedules and reconciles the
 * pipeline keys of the job with them (written_reconcile). A pp_config_t owns its heap memory; free
 * it with config_free.
 */
#ifndef PP_CONFIG_H
#define PP_CONFIG_H

#include "common/pp_status.h"
#include "model/job.h"
#include "schedule/kinds.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One action of `schedule.steps` as written: its text and its place. */
typedef struct pp_step_text {
    char *text;    /* "0F3", not yet parsed (written.c parses it) */
    int device;    /* the list it is in */
    int item;      /* 0-based position in that list */
    int line, col; /* 1-based place in the YAML text it came from (the file, or a --set value) */
} pp_step_text_t;

/* `schedule.steps` as written: one list of actions per device, device by device. */
typedef struct pp_steps_cfg {
    int n_devices;         /* lists written; 0 when there are no steps */
    int n;                 /* actions in all lists */
    pp_step_text_t *items; /* [n], device 0's first, each list in its order */
    /* Where each device's list starts in the file (1-based), for messages about its program;
     * 0 when the steps came from a --set value. */
    int list_line[PP_MAX_DEVICES], list_col[PP_MAX_DEVICES];
} pp_steps_cfg_t;

typedef struct pp_schedule_cfg {
    pp_sched_kind_t kind; /* a row of kinds.h; PP_SCHED_STEPS / PP_SCHED_CSV by `steps:` / `csv:` */
    char *csv_path;       /* `csv:` as written, relative to the YAML file's folder */
    pp_steps_cfg_t steps; /* `steps:` as written */
} pp_schedule_cfg_t;

/* The keys whose place in the input the resolve step's messages name (see pp_config_t.origin). */
typedef enum pp_config_key {
    PP_CFG_LAYERS = 0,
    PP_CFG_HIDDEN,
    PP_CFG_HEADS,
    PP_CFG_DEVICES,
    PP_CFG_STAGES,
    PP_CFG_CHUNKS,
    PP_CFG_MICRO_BATCHES,
    PP_CFG_KIND,
    PP_CFG_STEPS,
    PP_CFG_CSV,
    PP_CFG_LAYERS_PER_STAGE,
    PP_CFG_SPLIT,
    PP_CFG_PLACEMENT,
    PP_CFG_COST_MS, /* any of cost.forward, backward_input, backward_weight, send */
    PP_CFG_PROFILE,
    PP_CFG_TRANSPORT,
    PP_CFG_OVERLAP,
    PP_CFG_DEVICES_PER_PROCESS,
    PP_CFG_SEQ_LEN,
    PP_CFG_MICRO_BATCH_SIZE,
    PP_CFG_VOCAB, /* with the model keys above: a preset sees what the file wrote, and marks */
    PP_CFG_DTYPE,
    PP_CFG_DATA_PARALLEL,
    PP_CFG_OPTIMIZER_SHARDING,
    PP_CFG_REDUCE_ALIGN,
    PP_CFG_KEY_COUNT
} pp_config_key_t;

#define PP_CFG_ORIGIN_MAX 256

/* The largest plan the resolve step lets a generated schedule make, in ops, and the most ops one
 * (stage, micro-batch) can take (F, B or I + W, and a SEND and a RECV each way; run.offload adds
 * an OFFLOAD and a RELOAD). Lowering and simulating take up to PP_PLAN_HOST_BYTES_PER_OP of host
 * memory for each of those ops (the most measured over the generated kinds), about 5.6 GiB at the
 * limit; a plan that would take more than the process may have is refused too. */
#define PP_MAX_PLAN_OPS           (1L << 25)
#define PP_PLAN_OPS_PER_MB        7
#define PP_PLAN_HOST_BYTES_PER_OP 180

typedef struct pp_config {
    char *path; /* the YAML file it came from (for messages) */
    char *name; /* `name:` or the file's base name without .yaml */
    pp_job_model_t model;
    pp_job_pipeline_t pipeline;
    pp_schedule_cfg_t schedule;
    pp_job_run_t run;
    pp_job_nccl_t nccl;
    pp_job_cost_t cost;
    pp_job_cost_src_t cost_src;
    /* Private to config.c: where each pp_config_key_t was set, kept as the prefix of a message
     * ("file:line:col: section.key" or "--set section.key=value"); "" while the default holds.
     * Plain storage (no heap), so a config filled by hand needs nothing here. */
    char origin[PP_CFG_KEY_COUNT][PP_CFG_ORIGIN_MAX];
} pp_config_t;

/* Fill `cfg` with every default (documented in docs/schedule-format.md). */
void config_defaults(pp_config_t *cfg);

/* Read `path` into `cfg` (defaults first, then the file), then apply the `n_sets` overrides
 * "section.key=value" in order. An override may start with the flag it came from and a space,
 * which its messages name instead of --set: "--sweep key=value" is named with its text, and a
 * flag that stands for one key, written with a trailing '=' ("--gpu= cost.gpu=h100"), with the
 * value alone ("--gpu h100: ..."). Returns PP_OK, or PP_ERR_INPUT / PP_ERR_IO after printing the
 * message. On failure `cfg` is left freeable. */
pp_status_t config_load(pp_config_t *cfg, const char *path, const char *const *sets, int n_sets);

/* Parse a YAML document held in memory (tests); `name` stands for the file in messages. */
pp_status_t config_load_string(pp_config_t *cfg, const char *name, const char *yaml,
                               const char *const *sets, int n_sets);

/* Print a problem about key k as every config message does: prefixed with where k was set (the
 * `--set` text, or "file:line:col: key" of its value), or with line:col (> 0) of a place inside
 * the value, or with the file and the key's name while its default holds. Returns PP_ERR_INPUT. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
pp_status_t
config_error_at(const pp_config_t *cfg, pp_config_key_t k, int line, int col, const char *fmt, ...);

/* 1 when key k was set by the file or a --set override (0 while its default holds). */
int config_is_set(const pp_config_t *cfg, pp_config_key_t k);

/* 1 when the input set any of the hand-set `cost:` ms values (they then override the model). */
int config_cost_hand_set(const pp_config_t *cfg);

void config_free(pp_config_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* PP_CONFIG_H */
