/*
 * config.c — the run configuration: a YAML file (libyaml document API) plus `--set` overrides in,
 * a filled pp_config_t out; then config_resolve against the machine.
 *
 * The reading is in two files beside this one: config_yaml.c (scalars, the steps lists, libyaml's
 * problems) and config_keys.c (the table of every section's keys, applying a document or a --set
 * override). This file loads, fills in the defaults that depend on other keys, resolves, and owns
 * the messages about keys: the first problem prints one line, `file:line:col: key: message
 * (allowed: ...)` (libyaml's 0-based marks shown 1-based) or `--set text: ...`, and returns
 * PP_ERR_INPUT. cfg->origin remembers where the keys config_resolve and written.c check were set,
 * so their messages name them too. `steps:` is kept as written (each action's text and place) and
 * `csv:` as its path: building those schedules is written.c's. A config owns path, name,
 * schedule.csv_path and the step texts; config_free releases them.
 */
#include "config_internal.h"
#include "common/input.h"
#include "model/split.h"

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
};

/* ---------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------- */

int cfg_is_set(const pp_config_t *cfg, int k)
{
    return cfg->origin[k][0] != '\0';
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
static int cfg_pick(const pp_config_t *cfg, int fallback, ...)
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
    memset(cfg, 0, sizeof *cfg);
    cfg->model = (pp_model_cfg_t){.layers = 24,
                                  .hidden = 1024,
                                  .heads = 16,
                                  .seq_len = 1024,
                                  .vocab = 8192,
                                  .dtype = PP_DTYPE_BF16};
    cfg->pipeline.devices_all = 1;
    cfg->pipeline.n_devices = 0;
    cfg->pipeline.stages = 0;
    cfg->pipeline.chunks = 1;
    cfg->pipeline.placement = PP_PLACEMENT_LOOP;
    cfg->pipeline.micro_batches = 8;
    cfg->pipeline.micro_batch_size = 4;
    cfg->pipeline.transport = PP_TRANSPORT_PEER;
    cfg->schedule.kind = PP_SCHED_1F1B;
    cfg->run = (pp_run_cfg_t){.steps = 10,
                              .warmup = 2,
                              .seed = 1234,
                              .optimizer = PP_OPT_NONE,
                              .lr = 3e-4,
                              .weight_decay = 0.1,
                              .timeout_s = 60.0,
                              .timing = 1,
                              .graph = 1,
                              .recompute = PP_RECOMPUTE_NONE,
                              .offload = PP_OFFLOAD_NONE};
    cfg->cost = (pp_cost_cfg_t){.forward = 1.0,
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
 * besides comments; text from a test may be empty (every default). */
static pp_status_t load_text(pp_config_t *cfg, const char *name, const char *text, size_t len,
                             const char *const *sets, int n_sets, int is_file)
{
    yaml_document_t doc;
    int loaded = 0;
    pp_status_t st;
    cfg_ctx_t c;

    config_defaults(cfg);
    cfg->path = strdup(name);
    PP_ALLOC_CHECK(cfg->path);
    c = (cfg_ctx_t){cfg, cfg->path, NULL, &doc, "--set"};
    PP_CHECK_GOTO(cfg_yaml_load_text(&c, text, len, &doc, &loaded), st, done);
    if (is_file && !yaml_document_get_root_node(&doc)) {
        fprintf(stderr, "%s: empty (allowed: a mapping of sections, see docs/schedule-format.md)\n",
                name);
        st = PP_ERR_INPUT;
        goto done;
    }
    PP_CHECK_GOTO(cfg_apply_root(&c, yaml_document_get_root_node(&doc)), st, done);
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

/* ---------------------------------------------------------------------------------------------
 * Resolving against the machine
 * ------------------------------------------------------------------------------------------- */

/* The kind's preconditions (kinds.h), blaming the key the problem is about. */
static pp_status_t check_kind(const pp_config_t *cfg)
{
    const pp_pipeline_cfg_t *pl = &cfg->pipeline;
    char msg[512];
    int key;
    switch (sched_kind_check(cfg->schedule.kind, pl->n_devices, pl->micro_batches, pl->chunks, msg,
                             sizeof msg)) {
    case PP_KIND_OK: return PP_OK;
    case PP_KIND_BAD_CHUNKS:
        key = cfg_pick(cfg, PP_CFG_KIND, PP_CFG_CHUNKS, PP_CFG_STAGES, PP_CFG_KIND, -1);
        break;
    case PP_KIND_BAD_MICRO_BATCHES:
        key = cfg_pick(cfg, PP_CFG_MICRO_BATCHES, PP_CFG_MICRO_BATCHES, PP_CFG_DEVICES, -1);
        break;
    default: key = PP_CFG_KIND; break;
    }
    return cfg_err_at(cfg, key, "%s", msg);
}

/* Layers per stage (split.h): as listed, balanced by the cost model's stage times, or even. */
static pp_status_t resolve_split(pp_config_t *cfg)
{
    pp_model_cfg_t *m = &cfg->model;
    int n = cfg->pipeline.stages, sum = 0;
    if (m->n_layers_per_stage > 0 && cfg_is_set(cfg, PP_CFG_LAYERS_PER_STAGE)) {
        if (cfg->pipeline.split == PP_SPLIT_BALANCED)
            return cfg_err_at(cfg, PP_CFG_SPLIT,
                              "balanced, but model.layers_per_stage lists the split too (allowed: "
                              "one of them)");
        if (m->n_layers_per_stage != n)
            return cfg_err_at(cfg, PP_CFG_LAYERS_PER_STAGE,
                              "%d entries for %d stages (allowed: one entry per stage)",
                              m->n_layers_per_stage, n);
        for (int s = 0; s < n; s++)
            sum += m->layers_per_stage[s];
        if (sum != m->layers)
            return cfg_err_at(cfg, PP_CFG_LAYERS_PER_STAGE,
                              "the entries sum to %d, but model.layers is %d (allowed: entries "
                              "summing to %d)",
                              sum, m->layers, m->layers);
        return PP_OK;
    }
    if (cfg->pipeline.split == PP_SPLIT_BALANCED) {
        double block, embed, head;
        split_part_ms(cfg, &block, &embed, &head);
        split_balanced(m->layers_per_stage, n, m->layers, block, embed, head);
    } else {
        if (m->layers % n != 0)
            return cfg_err_at(cfg,
                              cfg_pick(cfg, PP_CFG_DEVICES, PP_CFG_STAGES, PP_CFG_CHUNKS,
                                       PP_CFG_STEPS, PP_CFG_CSV, PP_CFG_DEVICES, PP_CFG_LAYERS, -1),
                              "%d layers do not split into %d stages (allowed: a divisor of %d, "
                              "model.layers_per_stage or pipeline.split: balanced)",
                              m->layers, n, m->layers);
        for (int s = 0; s < n; s++)
            m->layers_per_stage[s] = m->layers / n;
    }
    m->n_layers_per_stage = n;
    return PP_OK;
}

/* The kind's placements (kinds.h), blaming pipeline.placement where the input set it. */
static pp_status_t check_placement(const pp_config_t *cfg)
{
    char msg[512];
    if (sched_kind_check_placement(cfg->schedule.kind, cfg->pipeline.chunks,
                                   cfg->pipeline.placement, msg, sizeof msg) == PP_KIND_OK)
        return PP_OK;
    return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_PLACEMENT, PP_CFG_PLACEMENT, PP_CFG_KIND, -1), "%s",
                      msg);
}

/* A generated schedule's plan, estimated before anything is allocated: refused over
 * PP_MAX_PLAN_OPS. A written one (steps, csv) is as large as its file. */
static pp_status_t check_plan_size(const pp_config_t *cfg)
{
    const pp_pipeline_cfg_t *pl = &cfg->pipeline;
    long long ops = (long long)pl->stages * pl->micro_batches * PP_PLAN_OPS_PER_MB;
    if (sched_kind(cfg->schedule.kind)->written || ops <= PP_MAX_PLAN_OPS) return PP_OK;
    return cfg_err_at(cfg,
                      cfg_pick(cfg, PP_CFG_MICRO_BATCHES, PP_CFG_MICRO_BATCHES, PP_CFG_DEVICES,
                               PP_CFG_CHUNKS, PP_CFG_STAGES, -1),
                      "%d stages x %d micro-batches make a plan of up to %lld ops, over the limit "
                      "of %ld (allowed: stages x micro-batches at most %ld)",
                      pl->stages, pl->micro_batches, ops, PP_MAX_PLAN_OPS,
                      PP_MAX_PLAN_OPS / PP_PLAN_OPS_PER_MB);
}

/* Pipeline devices may share a CUDA device (`devices: [0, 0]`), but not over a transport that
 * needs a GPU per pipeline device (nccl: one rank per GPU). */
static pp_status_t check_shared_gpus(const pp_config_t *cfg)
{
    const pp_pipeline_cfg_t *pl = &cfg->pipeline;
    int a, b;
    if (!config_shared_gpu(cfg, &a, &b) || pl->transport != PP_TRANSPORT_NCCL) return PP_OK;
    return cfg_err_at(cfg, PP_CFG_TRANSPORT,
                      "nccl needs a GPU per pipeline device, but pipeline.devices puts devices "
                      "%d and %d on CUDA device %d (allowed: peer, or a CUDA device per pipeline "
                      "device)",
                      a, b, pl->device_ids[a]);
}

pp_status_t config_resolve(pp_config_t *cfg, int n_visible)
{
    pp_pipeline_cfg_t *pl = &cfg->pipeline;
    const int written = sched_kind(cfg->schedule.kind)->written;

    /* devices */
    if (pl->devices_all) {
        int n = n_visible > 0 ? n_visible : 4;
        if (n > PP_MAX_DEVICES) n = PP_MAX_DEVICES;
        pl->n_devices = n;
        for (int d = 0; d < n; d++)
            pl->device_ids[d] = d;
        pl->devices_all = 0;
    }
    int p = pl->n_devices;
    if (p < 1 || p > PP_MAX_DEVICES)
        return cfg_err_at(cfg, PP_CFG_DEVICES, "%d devices (allowed: 1..%d)", p, PP_MAX_DEVICES);
    for (int d = 0; d < p; d++) {
        int id = pl->device_ids[d];
        if (id < 0 || (n_visible > 0 && id >= n_visible)) {
            if (n_visible == 1)
                return cfg_err_at(cfg, PP_CFG_DEVICES, "device %d does not exist (allowed: 0)", id);
            return cfg_err_at(cfg, PP_CFG_DEVICES, "device %d does not exist (allowed: 0..%d)", id,
                              n_visible > 0 ? n_visible - 1 : PP_MAX_DEVICES - 1);
        }
    }
    PP_CHECK(check_shared_gpus(cfg));
    /* stages and chunks (a written schedule's were set by written_reconcile) */
    if (written && pl->stages > 0) {
        /* as the schedule has them */
    } else if (pl->stages == 0) {
        if ((long)p * pl->chunks > PP_MAX_STAGES)
            return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_DEVICES, PP_CFG_CHUNKS, PP_CFG_DEVICES, -1),
                              "%d devices x %d chunks = %ld stages (allowed: at most %d)", p,
                              pl->chunks, (long)p * pl->chunks, PP_MAX_STAGES);
        pl->stages = p * pl->chunks;
    } else if (cfg_is_set(cfg, PP_CFG_CHUNKS) && pl->stages != p * pl->chunks) {
        return cfg_err_at(cfg, PP_CFG_STAGES,
                          "%d stages, but %d devices x %d chunks = %d (allowed: %d, or auto)",
                          pl->stages, p, pl->chunks, p * pl->chunks, p * pl->chunks);
    } else {
        if (pl->stages % p != 0)
            return cfg_err_at(
                cfg, cfg_pick(cfg, PP_CFG_STAGES, PP_CFG_STAGES, PP_CFG_DEVICES, -1),
                "%d stages do not split evenly over %d devices (allowed: a multiple of %d)",
                pl->stages, p, p);
        pl->chunks = pl->stages / p;
    }

    /* the model */
    PP_CHECK(resolve_split(cfg));
    if (cfg->model.hidden % cfg->model.heads != 0)
        return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_HEADS, PP_CFG_HEADS, PP_CFG_HIDDEN, -1),
                          "hidden %d does not split into %d heads (allowed: a divisor of %d)",
                          cfg->model.hidden, cfg->model.heads, cfg->model.hidden);

    PP_CHECK(check_kind(cfg));
    PP_CHECK(check_placement(cfg));
    return check_plan_size(cfg);
}

pp_status_t config_check_processes(const pp_config_t *cfg, int n_procs)
{
    const int p = cfg->pipeline.n_devices, k = cfg->pipeline.devices_per_process;
    if (k > 0 && (long)k * n_procs != p)
        return cfg_err_at(cfg, PP_CFG_DEVICES_PER_PROCESS,
                          "%d devices per process x %d process%s = %ld, but the pipeline has %d "
                          "devices (allowed: %s)",
                          k, n_procs, n_procs == 1 ? "" : "es", (long)k * n_procs, p,
                          p % n_procs == 0 ? "p / processes, or 0 for an even split"
                                           : "p / processes with p a multiple of the processes");
    if (k == 0 && p % n_procs != 0)
        return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_DEVICES, PP_CFG_DEVICES, -1),
                          "%d devices do not split evenly over %d processes (allowed: a multiple "
                          "of %d devices, or pipeline.devices_per_process)",
                          p, n_procs, n_procs);
    return PP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Small queries
 * ------------------------------------------------------------------------------------------- */

int config_shared_gpu(const pp_config_t *cfg, int *a, int *b)
{
    const pp_pipeline_cfg_t *pl = &cfg->pipeline;
    for (int j = 1; j < pl->n_devices && j < PP_MAX_DEVICES; j++)
        for (int i = 0; i < j; i++)
            if (pl->device_ids[i] == pl->device_ids[j]) {
                if (a) *a = i;
                if (b) *b = j;
                return 1;
            }
    return 0;
}

double config_tokens_per_step(const pp_config_t *cfg, int m)
{
    return (double)m * cfg->pipeline.micro_batch_size * cfg->model.seq_len;
}

double config_flops_per_step(const pp_config_t *cfg, int m)
{
    double h = cfg->model.hidden, s = cfg->model.seq_len;
    double block = 24.0 * h * h + 4.0 * s * h; /* QKV 6h², proj 2h², MLP 16h², QKᵀ + PV 4sh */
    double head = 2.0 * h * cfg->model.vocab;
    double forward_per_token = cfg->model.layers * block + head;
    return 3.0 * forward_per_token * config_tokens_per_step(cfg, m);
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
