/*
 * config.h — the run configuration read from a schedule YAML file (libyaml), with command-line
 * overrides (`--set section.key=value`) applied on top.
 *
 * Contract: config_load fills every field, defaults included, or prints `file:line:col: message
 * (allowed: ...)` for the first problem and returns PP_ERR_INPUT. Overrides name the place as
 * `--set key=value: message`. config_resolve then fixes what depends on the machine (`devices:
 * all`) and checks the values that only make sense together (layers divisible into stages, enough
 * micro-batches for the schedule, device ids that exist). Every key and its default is documented
 * in docs/schedule-format.md. The config holds what the user wrote: `steps:` as the action texts
 * with their places, `csv:` as the path; written.c builds those schedules and reconciles the
 * pipeline keys with them before config_resolve. A pp_config_t owns its heap memory; free it with
 * config_free.
 */
#ifndef PP_CONFIG_H
#define PP_CONFIG_H

#include "common/pp_status.h"
#include "model/transport.h"
#include "model/stage_size.h"
#include "schedule/kinds.h"
#include "plan/schedule.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* `pipeline.split`: layers / stages blocks per stage, or the split that evens stage times. */
typedef enum pp_split { PP_SPLIT_EVEN = 0, PP_SPLIT_BALANCED } pp_split_t;

typedef enum pp_optimizer { PP_OPT_NONE = 0, PP_OPT_ADAMW } pp_optimizer_t;

/* run.offload: NONE keeps every micro-batch's activations on the device from its forward to its
 * backward; ACTIVATIONS copies them to pinned host memory in between (lower.c places the copies).
 */
typedef enum pp_offload { PP_OFFLOAD_NONE = 0, PP_OFFLOAD_ACTIVATIONS } pp_offload_t;

typedef struct pp_model_cfg {
    int layers; /* transformer blocks in the whole model */
    /* Blocks of each stage (split.h): as listed in `layers_per_stage`, or filled by config_resolve
     * (even, or `pipeline.split: balanced`); n_layers_per_stage is 0 until one of them fills it. */
    int n_layers_per_stage;
    int layers_per_stage[PP_MAX_STAGES];
    int hidden;       /* model width h */
    int heads;        /* attention heads; hidden % heads == 0 */
    int seq_len;      /* tokens per sequence */
    int vocab;        /* vocabulary size of the embedding and the LM head */
    pp_dtype_t dtype; /* storage of activations and parameters */
} pp_model_cfg_t;

typedef struct pp_pipeline_cfg {
    int devices_all;                /* 1 when `devices: all` (resolved by config_resolve) */
    int n_devices;                  /* p: devices the pipeline uses */
    int device_ids[PP_MAX_DEVICES]; /* global CUDA ordinal of pipeline device d; several pipeline
                                       devices may share one (each keeps its streams and memory) */
    int stages;                     /* total stages; 0 while `auto` (= p * chunks) */
    int chunks;                     /* v: stages per device (resolved: stages / n_devices) */
    pp_placement_t placement;       /* loop | v */
    int micro_batches;              /* m */
    int micro_batch_size;           /* sequences per micro-batch */
    pp_transport_t transport;       /* a selectable row of model/transport.h, for stage boundaries
                                       across devices */
    pp_split_t split;               /* even | balanced (unless model.layers_per_stage is given) */
    int devices_per_process;        /* under mpirun: consecutive pipeline devices each process
                                       drives (0: the devices split evenly over the processes) */
} pp_pipeline_cfg_t;

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
} pp_steps_cfg_t;

typedef struct pp_schedule_cfg {
    pp_sched_kind_t kind; /* a row of kinds.h; PP_SCHED_STEPS / PP_SCHED_CSV by `steps:` / `csv:` */
    char *csv_path;       /* `csv:` as written, relative to the YAML file's folder */
    pp_steps_cfg_t steps; /* `steps:` as written */
} pp_schedule_cfg_t;

typedef struct pp_run_cfg {
    int steps;     /* timed training steps */
    int warmup;    /* untimed steps before them */
    uint64_t seed; /* parameters and synthetic data */
    pp_optimizer_t optimizer;
    double lr;                /* AdamW learning rate */
    double weight_decay;      /* AdamW decoupled weight decay */
    double timeout_s;         /* longest wait for one step before reporting the pending op */
    int timing;               /* 1: record per-op device timestamps */
    int graph;                /* 1: capture one step as a CUDA graph and replay it */
    pp_recompute_t recompute; /* what the forward keeps for the backward (stage_size.h) */
    pp_offload_t offload;     /* activations to pinned host memory between F and backward */
} pp_run_cfg_t;

/* Simulator cost model, hand-set: milliseconds per op for one micro-batch on one device's share of
 * the layers (a full backward `B` costs backward_input + backward_weight). They override the model
 * when any of them is given (config_cost_hand_set). */
typedef struct pp_cost_cfg {
    double forward;
    double backward_input;
    double backward_weight;
    double send;           /* one activation or gradient transfer across devices */
    double host_link_gbps; /* GB/s (1e9 B/s) of the host link, each direction, for the copies of
                              run.offload; 0 (default): the link table's `host` row (gpu.c) */
    double overlap; /* 0..1: share of the shorter half of an overlapped pair (DualPipeV) hidden
                       when both halves run at once; 0 runs them as one after the other. Unset
                       (config_is_set PP_CFG_OVERLAP), the model takes the profile's measured
                       overlap, else the GPU description's (cost.h) */
} pp_cost_cfg_t;

/* Where the model's costs come from (the rest of `cost:`): the stage's FLOPs and bytes on `gpu`
 * (cost.h), calibrated by `profile` when one is named. */
typedef struct pp_cost_src_cfg {
    char gpu[16]; /* GPU description (gpu.h); "" = the GPU present, else the profile's, else h100 */
    char link[16]; /* link description (gpu.h); "" = the one pipeline.transport implies */
    char *profile; /* profile file, as a path usable from here (relative to the YAML's folder in
                    * the file); NULL = none */
} pp_cost_src_cfg_t;

/* The keys whose place in the input config_resolve's messages name (see pp_config_t.origin). */
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
    PP_CFG_KEY_COUNT
} pp_config_key_t;

#define PP_CFG_ORIGIN_MAX 256

/* The largest plan config_resolve lets a generated schedule make, in ops, and the most ops one
 * (stage, micro-batch) can take (F, B or I + W, and a SEND and a RECV each way). About 200 bytes
 * of host memory go to each op while it is planned, so the limit is near 7 GB. */
#define PP_MAX_PLAN_OPS    (1L << 25)
#define PP_PLAN_OPS_PER_MB 7

typedef struct pp_config {
    char *path; /* the YAML file it came from (for messages) */
    char *name; /* `name:` or the file's base name without .yaml */
    pp_model_cfg_t model;
    pp_pipeline_cfg_t pipeline;
    pp_schedule_cfg_t schedule;
    pp_run_cfg_t run;
    pp_cost_cfg_t cost;
    pp_cost_src_cfg_t cost_src;
    /* Private to config.c: where each pp_config_key_t was set, kept as the prefix of a message
     * ("file:line:col: section.key" or "--set section.key=value"); "" while the default holds.
     * Plain storage (no heap), so a config filled by hand needs nothing here. */
    char origin[PP_CFG_KEY_COUNT][PP_CFG_ORIGIN_MAX];
} pp_config_t;

/* Fill `cfg` with every default (documented in docs/schedule-format.md). */
void config_defaults(pp_config_t *cfg);

/* Read `path` into `cfg` (defaults first, then the file), then apply the `n_sets` overrides
 * "section.key=value" in order. Returns PP_OK, or PP_ERR_INPUT / PP_ERR_IO after printing the
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

/* Resolve `devices: all` to `n_visible` devices (when n_visible == 0, to 4) and `stages: auto`
 * (a written schedule's devices, stages and chunks are set by written_reconcile, run before
 * this), then check the combined values:
 * layers % stages, chunks integral, the kind's preconditions (sched_kind_check), ids < n_visible
 * (skipped when n_visible < 0, i.e. unknown). Prints the problem and returns PP_ERR_INPUT. */
pp_status_t config_resolve(pp_config_t *cfg, int n_visible);

/* Under a launch of n_procs processes (pp_group.h): the pipeline devices must split into
 * pipeline.devices_per_process each (or evenly, when it is 0) over exactly n_procs processes.
 * Prints the problem at the key's place and returns PP_ERR_INPUT. With one process only
 * devices_per_process, when set, must equal the device count. */
pp_status_t config_check_processes(const pp_config_t *cfg, int n_procs);

/* 1 when two pipeline devices share a CUDA device (`pipeline.devices: [0, 0]`): the first such
 * pair is *a < *b (either pointer may be NULL). Timings measured so are not those of separate
 * GPUs. */
int config_shared_gpu(const pp_config_t *cfg, int *a, int *b);

/* Tokens per training step of m micro-batches: m * micro_batch_size * seq_len. m is the plan's
 * (the schedule decides it: a written schedule's own count), never pipeline.micro_batches. */
double config_tokens_per_step(const pp_config_t *cfg, int m);

/* 1 when the input set any of the hand-set `cost:` ms values (they then override the model). */
int config_cost_hand_set(const pp_config_t *cfg);

/* Model FLOPs of one training step of m micro-batches (forward + backward = 3x forward; matmuls
 * only, causal attention counted in full, embedding lookups free), the convention of Megatron's
 * MFU figure. */
double config_flops_per_step(const pp_config_t *cfg, int m);

void config_free(pp_config_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* PP_CONFIG_H */
