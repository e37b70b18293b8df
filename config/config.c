/*
 * config.c — the run configuration: a YAML file (libyaml document API) plus `--set` overrides in,
 * a filled pp_config_t out (resolve.c then makes the job of it).
 *
 * The reading is in two files beside this one: config_yaml.c (scalars, the steps lists, libyaml's
 * problems) and config_keys.c (the table of every section's keys, applying a document or a --set
 * override). This file loads, fills in the defaults that depend on other keys, and owns
 * the messages about keys: the first problem prints one line, `file:line:col: key: message
 * (allowed: ...)` (libyaml's 0-based marks shown 1-based) or `--set text: ...`, and returns
 * PP_ERR_INPUT. cfg->origin remembers where the keys resolve.c and written.c check were set,
 * so their messages name them too. `steps:` is kept as written (each action's text and place) and
 * `csv:` as its path: building those schedules is written.c's. A config owns path, name,
 * schedule.csv_path and the step texts; config_free releases them.
 */
#include "config_internal.h"
#include "common/input.h"
#include "model/preset.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Messages name a key by its place in the file when known; these are the names otherwise, each
 * at its key's index, so that no key can take another's name. */
const char *const cfg_key_names[PP_CFG_KEY_COUNT] = {
    [PP_CFG_LAYERS] = "model.layers",
    [PP_CFG_HIDDEN] = "model.hidden",
    [PP_CFG_HEADS] = "model.heads",
    [PP_CFG_DEVICES] = "pipeline.devices",
    [PP_CFG_STAGES] = "pipeline.stages",
    [PP_CFG_CHUNKS] = "pipeline.chunks",
    [PP_CFG_MICRO_BATCHES] = "pipeline.micro_batches",
    [PP_CFG_KIND] = "schedule.kind",
    [PP_CFG_STEPS] = "schedule.steps",
    [PP_CFG_CSV] = "schedule.csv",
    [PP_CFG_LAYERS_PER_STAGE] = "model.layers_per_stage",
    [PP_CFG_SPLIT] = "pipeline.split",
    [PP_CFG_PLACEMENT] = "pipeline.placement",
    [PP_CFG_COST_MS] = "cost",
    [PP_CFG_PROFILE] = "cost.profile",
    [PP_CFG_TRANSPORT] = "pipeline.transport",
    [PP_CFG_OVERLAP] = "cost.overlap",
    [PP_CFG_DEVICES_PER_PROCESS] = "pipeline.devices_per_process",
    [PP_CFG_SEQ_LEN] = "model.seq_len",
    [PP_CFG_MICRO_BATCH_SIZE] = "pipeline.micro_batch_size",
    [PP_CFG_VOCAB] = "model.vocab",
    [PP_CFG_DTYPE] = "model.dtype",
    [PP_CFG_DATA_PARALLEL] = "pipeline.data_parallel",
    [PP_CFG_OPTIMIZER_SHARDING] = "run.optimizer_sharding",
    [PP_CFG_REDUCE_ALIGN] = "pipeline.reduce_align",
};

/* ---------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------- */

int cfg_is_set(const pp_config_t *cfg, int k)
{
    return cfg->origin[k][0] != '\0';
}

const char *cfg_source(const pp_config_t *cfg, int k)
{
    if (strncmp(cfg->origin[k], "--", 2) == 0) return cfg->origin[k];
    return cfg->path ? cfg->path : "config";
}

/* The prefix of a message about key k (see config_error_at). */
static void cfg_prefix(const pp_config_t *cfg, int k, int line, int col)
{
    const char *path = cfg->path ? cfg->path : "config";
    if (strncmp(cfg->origin[k], "--", 2) == 0 || (cfg_is_set(cfg, k) && line <= 0))
        fprintf(stderr, "%s: ", cfg->origin[k]);
    else if (line > 0)
        fprintf(stderr, "%s:%d:%d: %s: ", path, line, col, cfg_key_names[k]);
    else
        fprintf(stderr, "%s: %s: ", path, cfg_key_names[k]);
}

int config_is_set(const pp_config_t *cfg, pp_config_key_t k)
{
    return cfg_is_set(cfg, (int)k);
}

int config_cost_hand_set(const pp_config_t *cfg)
{
    return cfg_is_set(cfg, PP_CFG_COST_MS);
}

pp_status_t config_error_at(const pp_config_t *cfg, pp_config_key_t k, int line, int col,
                            const char *fmt, ...)
{
    va_list ap;
    cfg_prefix(cfg, (int)k, line, col);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return PP_ERR_INPUT;
}

/* config_error_at for the whole value of key k. */
#define cfg_err_at(cfg, k, ...) config_error_at((cfg), (pp_config_key_t)(k), 0, 0, __VA_ARGS__)

/* The key to blame for a problem: the first of the keys (the list ends with -1) set by a --set
 * override, else the first the input set, else `fallback`. */
int cfg_pick(const pp_config_t *cfg, int fallback, ...)
{
    va_list ap;
    int k, found = -1, from_set = -1;
    va_start(ap, fallback);
    while ((k = va_arg(ap, int)) >= 0) {
        if (found < 0 && cfg_is_set(cfg, k)) found = k;
        /* A --set override is the user's latest word: blame it before the file. */
        if (from_set < 0 && strncmp(cfg->origin[k], "--", 2) == 0) from_set = k; /* any flag */
    }
    va_end(ap);
    return from_set >= 0 ? from_set : found >= 0 ? found : fallback;
}

/* ---------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------- */

void config_defaults(pp_config_t *cfg)
{
    const pp_preset_t *model = preset_default(); /* the reference model */
    memset(cfg, 0, sizeof *cfg);
    cfg->model = model->model;
    cfg->pipeline.devices_all = 1;
    cfg->pipeline.n_devices = 0;
    cfg->pipeline.stages = 0;
    cfg->pipeline.chunks = 1;
    cfg->pipeline.placement = PP_PLACEMENT_LOOP;
    cfg->pipeline.micro_batches = 8;
    cfg->pipeline.micro_batch_size = model->micro_batch_size;
    cfg->pipeline.transport = PP_TRANSPORT_AUTO;
    cfg->pipeline.data_parallel = 1;
    cfg->pipeline.reduce_bucket_mb = 25;
    cfg->pipeline.reduce_align = PP_REDUCE_AS_READY;
    cfg->schedule.kind = PP_SCHED_1F1B;
    cfg->run = (pp_job_run_t){.steps = 10,
                              .warmup = 2,
                              .seed = 1234,
                              .optimizer = PP_OPT_NONE,
                              .lr = 3e-4,
                              .weight_decay = 0.1,
                              .timeout_s = 60.0,
                              .timing = 1,
                              .graph = 1,
                              .recompute = PP_RECOMPUTE_NONE,
                              .offload = PP_OFFLOAD_NONE,
                              .priorities = 1,
                              .optimizer_sharding = PP_SHARD_NONE};
    cfg->nccl = (pp_job_nccl_t){.communicators = PP_NCCL_COMMS_PAIR,
                                .wait_for_peer = 1,
                                .max_ctas = 0,
                                .cta_policy = PP_NCCL_CTA_DEFAULT};
    cfg->cost = (pp_job_cost_t){.forward = 1.0,
                                .backward_input = 1.0,
                                .backward_weight = 1.0,
                                .send = 0.0,
                                .host_link_gbps = 0.0};
}

/* After the file and every override: defaults that depend on other keys. */
static void config_finish(pp_config_t *cfg)
{
    const pp_kind_row_t *row = sched_kind(cfg->schedule.kind);
    if (!row->written && !cfg_is_set(cfg, PP_CFG_CHUNKS) && !cfg_is_set(cfg, PP_CFG_STAGES))
        cfg->pipeline.chunks = row->default_chunks;
    /* A kind that builds placement v alone (zb-v, dualpipe-v) gets it unless the file says. */
    if (!row->written && !cfg_is_set(cfg, PP_CFG_PLACEMENT) &&
        !(row->placements & (1u << PP_PLACEMENT_LOOP)))
        cfg->pipeline.placement = PP_PLACEMENT_V;
}

/* The file's base name without .yaml / .yml. */
static char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".yaml"))
        n -= 5;
    else if (n > 4 && !strcmp(b + n - 4, ".yml"))
        n -= 4;
    return strndup(b, n);
}

/* Parse `text` as the file `name` and apply the overrides. A file (is_file) must hold something
 * besides comments and a null (`---`, `~`, `null` alone); text from a test may be empty (every
 * default). */
static pp_status_t load_text(pp_config_t *cfg, const char *name, const char *text, size_t len,
                             const char *const *sets, int n_sets, int is_file)
{
    yaml_document_t doc;
    yaml_node_t *root;
    int loaded = 0;
    pp_status_t st;
    cfg_ctx_t c;

    config_defaults(cfg);
    cfg->path = strdup(name);
    PP_ALLOC_CHECK(cfg->path);
    c = (cfg_ctx_t){cfg, cfg->path, NULL, &doc, "--set", NULL};
    PP_CHECK_GOTO(cfg_yaml_load_text(&c, text, len, &doc, &loaded), st, done);
    root = yaml_document_get_root_node(&doc);
    if (is_file && (!root || cfg_node_is_null(root))) {
        fprintf(stderr, "%s: empty (allowed: a mapping of sections, see docs/schedule-format.md)\n",
                name);
        st = PP_ERR_INPUT;
        goto done;
    }
    PP_CHECK_GOTO(cfg_apply_root(&c, root), st, done);
    for (int i = 0; i < n_sets; i++)
        PP_CHECK_GOTO(cfg_apply_set(cfg, sets[i]), st, done);
    config_finish(cfg);
    if (!cfg->name) {
        cfg->name = base_name(cfg->path);
        if (!cfg->name) {
            fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
            st = PP_ERR_NOMEM;
        }
    }
done:
    if (loaded) yaml_document_delete(&doc);
    return st;
}

pp_status_t config_load_string(pp_config_t *cfg, const char *name, const char *yaml,
                               const char *const *sets, int n_sets)
{
    return load_text(cfg, name, yaml, strlen(yaml), sets, n_sets, 0);
}

pp_status_t config_load(pp_config_t *cfg, const char *path, const char *const *sets, int n_sets)
{
    char *text = NULL, why[160];
    size_t len = 0;
    config_defaults(cfg);
    pp_status_t st = input_read_file(path, PP_INPUT_MAX_BYTES, &text, &len, why, sizeof why);
    if (st == PP_ERR_INPUT) fprintf(stderr, "%s: %s\n", path, why);
    if (st != PP_OK) return st;
    st = load_text(cfg, path, text, len, sets, n_sets, 1);
    free(text);
    return st;
}

void config_free(pp_config_t *cfg)
{
    if (!cfg) return;
    free(cfg->path);
    free(cfg->name);
    free(cfg->schedule.csv_path);
    free(cfg->cost_src.profile);
    cfg_steps_free(&cfg->schedule.steps);
    cfg->path = cfg->name = cfg->schedule.csv_path = cfg->cost_src.profile = NULL;
}
