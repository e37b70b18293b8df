/*
 * config_keys.c — the keys of the config (see config.c): one table per section giving each key's
 * type, range and field, the keys with rules of their own (devices, stages, the schedule's kind,
 * steps or csv, the transport, the model's preset), and applying a YAML document or one
 * `--set section.key=value` to a pp_config_t through the same tables, so both get the same
 * messages. A section may stand for one of its keys when written as a scalar: `model: 7b` is
 * `model: {preset: 7b}`, and `--set model=7b` is `--set model.preset=7b`.
 */
#include "config_internal.h"
#include "model/gpu.h"
#include "model/preset.h"
#include "common/input.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Enum fields are written through an int: the C enums here all have int's size. */
_Static_assert(sizeof(pp_dtype_t) == sizeof(int) && sizeof(pp_placement_t) == sizeof(int) &&
                   sizeof(pp_transport_t) == sizeof(int) && sizeof(pp_optimizer_t) == sizeof(int) &&
                   sizeof(pp_recompute_t) == sizeof(int) && sizeof(pp_split_t) == sizeof(int) &&
                   sizeof(pp_offload_t) == sizeof(int) && sizeof(pp_nccl_comms_t) == sizeof(int) &&
                   sizeof(pp_nccl_cta_policy_t) == sizeof(int) &&
                   sizeof(pp_reduce_align_t) == sizeof(int) &&
                   sizeof(pp_opt_sharding_t) == sizeof(int),
               "enum fields are stored as int");

#define DEVICE_FORMS "all, a count 1..64, or a list of CUDA ids such as [0, 1, 2, 3]"

/* ---------------------------------------------------------------------------------------------
 * Keys with their own rules
 * ------------------------------------------------------------------------------------------- */

static pp_status_t set_name(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    return cfg_get_string(c, n, key, "a name such as 1f1b-8mb", &c->cfg->name);
}

/* `layers_per_stage: [n0, n1, ...]`: blocks of each stage, in stage order. */
static pp_status_t set_layers_per_stage(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    static const char *forms = "a list of blocks per stage such as [5, 6, 6, 7]";
    pp_job_model_t *m = &c->cfg->model;
    if (n->type != YAML_SEQUENCE_NODE)
        return cfg_err(c, n, key, "expected a list, got %s (allowed: %s)", cfg_node_what(n), forms);
    yaml_node_item_t *it = n->data.sequence.items.start;
    int n_items = (int)(n->data.sequence.items.top - it);
    if (n_items == 0 || n_items > PP_MAX_STAGES)
        return cfg_err(c, n, key, "%d entries (allowed: 1..%d, one per stage)", n_items,
                       PP_MAX_STAGES);
    for (int k = 0; it < n->data.sequence.items.top; it++, k++) {
        long v;
        PP_CHECK(cfg_get_long(c, yaml_document_get_node(c->doc, *it), key, 0, 100000, NULL, &v));
        m->layers_per_stage[k] = (int)v;
    }
    m->n_layers_per_stage = n_items;
    return PP_OK;
}

/* `devices: all | N | [id, ...]` */
static pp_status_t set_devices(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    pp_job_pipeline_t *pl = &c->cfg->pipeline;
    if (n->type == YAML_SCALAR_NODE && !strcmp(cfg_node_text(n), "all")) {
        pl->devices_all = 1;
        pl->n_devices = 0;
        return PP_OK;
    }
    if (n->type == YAML_SCALAR_NODE) {
        long count;
        PP_CHECK(cfg_get_long(c, n, key, 1, PP_MAX_DEVICES, DEVICE_FORMS, &count));
        pl->devices_all = 0;
        pl->n_devices = (int)count;
        for (int d = 0; d < pl->n_devices; d++)
            pl->device_ids[d] = d;
        return PP_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return cfg_err(c, n, key, "expected a device list, got %s (allowed: %s)", cfg_node_what(n),
                       DEVICE_FORMS);
    int ids[PP_MAX_DEVICES], count = 0;
    yaml_node_item_t *it = n->data.sequence.items.start;
    int n_items = (int)(n->data.sequence.items.top - it);
    if (n_items == 0)
        return cfg_err(c, n, key, "the device list is empty (allowed: %s)", DEVICE_FORMS);
    if (n_items > PP_MAX_DEVICES)
        return cfg_err(c, n, key, "%d devices listed (allowed: at most %d)", n_items,
                       PP_MAX_DEVICES);
    for (; it < n->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(c->doc, *it);
        long id;
        char allowed[64];
        snprintf(allowed, sizeof allowed, "a CUDA device id 0..%d", PP_MAX_DEVICES - 1);
        PP_CHECK(cfg_get_long(c, item, key, 0, PP_MAX_DEVICES - 1, allowed, &id));
        ids[count++] = (int)id; /* repeats map several pipeline devices onto one GPU */
    }
    pl->devices_all = 0;
    pl->n_devices = count;
    memcpy(pl->device_ids, ids, sizeof(int) * (size_t)count);
    return PP_OK;
}

/* `stages: auto | N` */
static pp_status_t set_stages(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    char allowed[64];
    long v;
    if (n->type == YAML_SCALAR_NODE && !strcmp(cfg_node_text(n), "auto")) {
        c->cfg->pipeline.stages = 0;
        return PP_OK;
    }
    snprintf(allowed, sizeof allowed, "auto or an integer 1..%d", PP_MAX_STAGES);
    PP_CHECK(cfg_get_long(c, n, key, 1, PP_MAX_STAGES, allowed, &v));
    c->cfg->pipeline.stages = (int)v;
    return PP_OK;
}

/* At most one of schedule.kind, schedule.steps and schedule.csv may be given. */
pp_status_t cfg_check_one_schedule(cfg_ctx_t *c, const yaml_node_t *n, const char *key, int k)
{
    static const int ks[] = {PP_CFG_KIND, PP_CFG_STEPS, PP_CFG_CSV};
    for (int i = 0; i < 3; i++)
        if (ks[i] != k && cfg_is_set(c->cfg, ks[i]))
            return cfg_err(c, n, key,
                           "%s is given too (allowed: one of schedule.kind, steps or csv)",
                           cfg_key_names[ks[i]]);
    return PP_OK;
}

/* One word naming a row of a table (kinds, transports): `find` returns its index or -1, `allowed`
 * lists the names. */
static pp_status_t get_row(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                           const char *allowed, int (*find)(const char *), int *out)
{
    const char *s;
    PP_CHECK(cfg_scalar(c, n, key, "one word", allowed, 0, &s));
    *out = find(s);
    if (*out < 0)
        return cfg_err(c, n, key, "unknown value '%s' (allowed: %s)", PP_SHORT(s), allowed);
    return PP_OK;
}

/* `transport:` a selectable row of the transport table (model/transport.h). */
static pp_status_t set_transport(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    char allowed[256];
    int v;
    transport_list(allowed, sizeof allowed);
    PP_CHECK(get_row(c, n, key, allowed, transport_find, &v));
    c->cfg->pipeline.transport = (pp_transport_t)v;
    return PP_OK;
}

/* `kind:` a name or alias of a row of the kind table (kinds.h). */
static pp_status_t set_kind(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    char allowed[256];
    int v;
    sched_kind_list(allowed, sizeof allowed);
    PP_CHECK(get_row(c, n, key, allowed, sched_kind_find, &v));
    PP_CHECK(cfg_check_one_schedule(c, n, key, PP_CFG_KIND));
    c->cfg->schedule.kind = (pp_sched_kind_t)v;
    return PP_OK;
}

/* `csv: file.csv` — the path as written; written.c reads the file, relative to the YAML file's
 * folder. */
static pp_status_t set_csv(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    char *rel = NULL;
    PP_CHECK(cfg_check_one_schedule(c, n, key, PP_CFG_CSV));
    PP_CHECK(cfg_get_string(c, n, key, "a CSV file path, relative to the folder of the YAML file",
                            &rel));
    cfg_steps_free(&c->cfg->schedule.steps);
    free(c->cfg->schedule.csv_path);
    c->cfg->schedule.csv_path = rel;
    c->cfg->schedule.kind = PP_SCHED_CSV;
    return PP_OK;
}

/* `gpu: NAME` and `link: NAME` — a row of gpu.h's tables. */
static pp_status_t set_table_name(cfg_ctx_t *c, const yaml_node_t *n, const char *key, int is_gpu)
{
    char names[256], *word = NULL;
    char *field = is_gpu ? c->cfg->cost_src.gpu : c->cfg->cost_src.link;
    if (is_gpu)
        gpu_names(names, sizeof names);
    else
        link_names(names, sizeof names);
    PP_CHECK(cfg_get_string(c, n, key, names, &word));
    const char *row = is_gpu ? (gpu_find(word) ? gpu_find(word)->name : NULL)
                             : (link_find(word) ? link_find(word)->name : NULL);
    if (row) snprintf(field, sizeof c->cfg->cost_src.gpu, "%s", row);
    pp_status_t st = row ? PP_OK
                         : cfg_err(c, n, key, "unknown %s '%s' (allowed: %s)",
                                   is_gpu ? "GPU" : "link", word, names);
    free(word);
    return st;
}

static pp_status_t set_gpu(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    return set_table_name(c, n, key, 1);
}

static pp_status_t set_link(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    return set_table_name(c, n, key, 0);
}

/* `host_link_gbps: GB/s` — 0 for the link table's host row, else at least HOST_LINK_MIN_GBPS: a
 * copy over a slower link would take longer than a double holds (a value as small as 1e-310 made
 * every offload last forever, and the trace and chart print infinities). */
#define HOST_LINK_MIN_GBPS 1e-3
static pp_status_t set_host_link(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    const char *allowed = "0 for the link table's host row, or a number >= 0.001 and <= 1e+06";
    double v;
    PP_CHECK(cfg_get_double_in(c, n, key, 0, 1e6, 0, allowed, &v));
    if (v > 0 && v < HOST_LINK_MIN_GBPS)
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", PP_SHORT(cfg_node_text(n)),
                       allowed);
    c->cfg->cost.host_link_gbps = v;
    return PP_OK;
}

/* `profile: FILE` — relative to the YAML file's folder, written in the file or in a --set override
 * alike (as `csv:` is); an absolute path as it is. It must be a regular file of at most
 * PP_INPUT_MAX_BYTES, checked here without reading it (a FIFO would wait for a writer); the run
 * chain reads it when it loads the job (profile.h). */
static pp_status_t set_profile(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    const char *allowed = "a profile written by `ppsched profile`, relative to the YAML's folder";
    char *rel = NULL, why[160];
    PP_CHECK(cfg_get_string(c, n, key, allowed, &rel));
    const char *slash = strrchr(c->file, '/');
    size_t dir_len = (rel[0] == '/' || !slash) ? 0 : (size_t)(slash - c->file) + 1;
    char *full = malloc(dir_len + strlen(rel) + 1);
    if (!full) {
        free(rel);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory reading cost.profile");
    }
    memcpy(full, c->file, dir_len);
    strcpy(full + dir_len, rel);
    free(rel);
    if (input_check_file(full, PP_INPUT_MAX_BYTES, why, sizeof why) != PP_OK) {
        /* the reason may carry its own "(allowed: a regular file)" */
        pp_status_t st =
            strstr(why, "(allowed: ")
                ? cfg_err(c, n, key, "cannot open %s: %s", full, why)
                : cfg_err(c, n, key, "cannot open %s: %s (allowed: %s)", full, why, allowed);
        free(full);
        return st;
    }
    free(c->cfg->cost_src.profile);
    c->cfg->cost_src.profile = full;
    return PP_OK;
}

/* `preset: NAME`, after the tables: it reads the model section's own. */
static pp_status_t set_preset(cfg_ctx_t *c, const yaml_node_t *n, const char *key);

/* ---------------------------------------------------------------------------------------------
 * The tables of keys
 * ------------------------------------------------------------------------------------------- */

typedef enum val_type { VAL_INT, VAL_U64, VAL_REAL, VAL_ENUM, VAL_FN } val_type_t;

typedef pp_status_t (*key_fn_t)(cfg_ctx_t *c, const yaml_node_t *n, const char *key);

typedef struct key_spec {
    const char *name;
    val_type_t type;
    size_t off;               /* offset of the field in pp_config_t (not VAL_FN) */
    double lo, hi;            /* VAL_INT and VAL_REAL range */
    int lo_open;              /* VAL_REAL: lo itself is not allowed */
    const char *const *names; /* VAL_ENUM: the words, NULL-terminated ... */
    const int *values;        /* ... and the value each one stores */
    key_fn_t fn;              /* VAL_FN: parses and stores the value itself */
    int origin;               /* pp_config_key_t remembered in cfg->origin, or -1 */
} key_spec_t;

typedef struct section_spec {
    const char *name;
    const key_spec_t *keys;
    int n_keys;
    const char *scalar_key; /* the key a scalar written for the whole section sets, or NULL */
} section_spec_t;

static const char *const dtype_names[] = {"bf16", "fp32", NULL};
static const int dtype_values[] = {PP_DTYPE_BF16, PP_DTYPE_FP32};
static const char *const placement_names[] = {"loop", "v", NULL};
static const int placement_values[] = {PP_PLACEMENT_LOOP, PP_PLACEMENT_V};
static const char *const split_names[] = {"even", "balanced", NULL};
static const int split_values[] = {PP_SPLIT_EVEN, PP_SPLIT_BALANCED};
static const char *const optimizer_names[] = {"none", "adamw", NULL};
static const int optimizer_values[] = {PP_OPT_NONE, PP_OPT_ADAMW};
static const char *const reduce_align_names[] = {"as_ready", "aligned", NULL};
static const int reduce_align_values[] = {PP_REDUCE_AS_READY, PP_REDUCE_ALIGNED};
static const char *const sharding_names[] = {"none", "zero1", NULL};
static const int sharding_values[] = {PP_SHARD_NONE, PP_SHARD_ZERO1};
#define recompute_names stage_recompute_names
static const int recompute_values[] = {PP_RECOMPUTE_NONE, PP_RECOMPUTE_SELECTIVE,
                                       PP_RECOMPUTE_FULL};
static const char *const offload_names[] = {"none", "activations", "auto", NULL};
static const int offload_values[] = {PP_OFFLOAD_NONE, PP_OFFLOAD_ACTIVATIONS, PP_OFFLOAD_AUTO};
static const char *const timing_names[] = {"on", "off", "true", "false", NULL};
static const int timing_values[] = {1, 0, 1, 0};
static const char *const comms_names[] = {"pair", "device", NULL};
static const int comms_values[] = {PP_NCCL_COMMS_PAIR, PP_NCCL_COMMS_DEVICE};
static const char *const cta_policy_names[] = {"default", "efficiency", "zero", NULL};
static const int cta_policy_values[] = {PP_NCCL_CTA_DEFAULT, PP_NCCL_CTA_EFFICIENCY,
                                        PP_NCCL_CTA_ZERO};

/* clang-format off */
#define OFF(field) offsetof(pp_config_t, field)
#define INT_KEY(nm, field, lo, hi, org) {nm, VAL_INT, OFF(field), lo, hi, 0, NULL, NULL, NULL, org}
#define REAL_KEY(nm, field, lo, hi, op) {nm, VAL_REAL, OFF(field), lo, hi, op, NULL, NULL, NULL, -1}
#define COST_KEY(nm, field, op) {nm, VAL_REAL, OFF(field), 0, 1e6, op, NULL, NULL, NULL, PP_CFG_COST_MS}
#define ENUM_KEY(nm, field, t) {nm, VAL_ENUM, OFF(field), 0, 0, 0, t##_names, t##_values, NULL, -1}
#define FN_KEY(nm, fn, org) {nm, VAL_FN, 0, 0, 0, 0, NULL, NULL, fn, org}
/* clang-format on */

/* Every key with a field here has an origin: a preset (set_preset) skips the ones the file wrote
 * before it and marks the ones it fills. */
static const key_spec_t model_keys[] = {
    FN_KEY("preset", set_preset, -1),
    INT_KEY("layers", model.layers, 1, 100000, PP_CFG_LAYERS),
    INT_KEY("hidden", model.hidden, 1, 1 << 20, PP_CFG_HIDDEN),
    INT_KEY("heads", model.heads, 1, 1 << 16, PP_CFG_HEADS),
    INT_KEY("seq_len", model.seq_len, 1, 1 << 20, PP_CFG_SEQ_LEN),
    INT_KEY("vocab", model.vocab, 1, 1 << 24, PP_CFG_VOCAB),
    {"dtype", VAL_ENUM, OFF(model.dtype), 0, 0, 0, dtype_names, dtype_values, NULL, PP_CFG_DTYPE},
    FN_KEY("layers_per_stage", set_layers_per_stage, PP_CFG_LAYERS_PER_STAGE),
};

static const key_spec_t pipeline_keys[] = {
    FN_KEY("devices", set_devices, PP_CFG_DEVICES),
    FN_KEY("stages", set_stages, PP_CFG_STAGES),
    INT_KEY("chunks", pipeline.chunks, 1, PP_MAX_STAGES, PP_CFG_CHUNKS),
    {"placement", VAL_ENUM, OFF(pipeline.placement), 0, 0, 0, placement_names, placement_values,
     NULL, PP_CFG_PLACEMENT},
    INT_KEY("micro_batches", pipeline.micro_batches, 1, PP_MAX_MICRO_BATCHES, PP_CFG_MICRO_BATCHES),
    INT_KEY("micro_batch_size", pipeline.micro_batch_size, 1, 1 << 16, PP_CFG_MICRO_BATCH_SIZE),
    FN_KEY("transport", set_transport, PP_CFG_TRANSPORT),
    {"split", VAL_ENUM, OFF(pipeline.split), 0, 0, 0, split_names, split_values, NULL,
     PP_CFG_SPLIT},
    INT_KEY("devices_per_process", pipeline.devices_per_process, 0, PP_MAX_DEVICES,
            PP_CFG_DEVICES_PER_PROCESS),
    INT_KEY("data_parallel", pipeline.data_parallel, 1, PP_MAX_DATA_PARALLEL, PP_CFG_DATA_PARALLEL),
    INT_KEY("reduce_bucket_mb", pipeline.reduce_bucket_mb, 0, 1 << 20, -1),
    {"reduce_align", VAL_ENUM, OFF(pipeline.reduce_align), 0, 0, 0, reduce_align_names,
     reduce_align_values, NULL, PP_CFG_REDUCE_ALIGN},
};

static const key_spec_t schedule_keys[] = {
    FN_KEY("kind", set_kind, PP_CFG_KIND),
    FN_KEY("steps", cfg_set_steps, PP_CFG_STEPS),
    FN_KEY("csv", set_csv, PP_CFG_CSV),
};

static const key_spec_t run_keys[] = {
    INT_KEY("steps", run.steps, 1, 1000000, -1),
    INT_KEY("warmup", run.warmup, 0, 1000000, -1),
    {"seed", VAL_U64, OFF(run.seed), 0, 0, 0, NULL, NULL, NULL, -1},
    ENUM_KEY("optimizer", run.optimizer, optimizer),
    REAL_KEY("lr", run.lr, 0, 1, 0),
    REAL_KEY("weight_decay", run.weight_decay, 0, 1, 0),
    REAL_KEY("timeout", run.timeout_s, 0, 86400, 1),
    ENUM_KEY("timing", run.timing, timing),
    ENUM_KEY("graph", run.graph, timing),
    ENUM_KEY("recompute", run.recompute, recompute),
    ENUM_KEY("offload", run.offload, offload),
    REAL_KEY("memory_limit", run.memory_limit_gib, 0, 1e6, 1),
    ENUM_KEY("priorities", run.priorities, timing),
    {"optimizer_sharding", VAL_ENUM, OFF(run.optimizer_sharding), 0, 0, 0, sharding_names,
     sharding_values, NULL, PP_CFG_OPTIMIZER_SHARDING},
};

static const key_spec_t nccl_keys[] = {
    ENUM_KEY("communicators", nccl.communicators, comms),
    ENUM_KEY("wait_for_peer", nccl.wait_for_peer, timing),
    INT_KEY("max_ctas", nccl.max_ctas, 0, 64, -1),
    ENUM_KEY("cta_policy", nccl.cta_policy, cta_policy),
};

static const key_spec_t cost_keys[] = {
    COST_KEY("forward", cost.forward, 1),
    COST_KEY("backward_input", cost.backward_input, 0),
    COST_KEY("backward_weight", cost.backward_weight, 0),
    COST_KEY("send", cost.send, 0),
    FN_KEY("gpu", set_gpu, -1),
    FN_KEY("link", set_link, -1),
    FN_KEY("profile", set_profile, PP_CFG_PROFILE),
    FN_KEY("host_link_gbps", set_host_link, -1),
    {"overlap", VAL_REAL, OFF(cost.overlap), 0, 1, 0, NULL, NULL, NULL, PP_CFG_OVERLAP},
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const section_spec_t sections[] = {
    {"model", model_keys, N_OF(model_keys), "preset"},
    {"pipeline", pipeline_keys, N_OF(pipeline_keys), NULL},
    {"schedule", schedule_keys, N_OF(schedule_keys), NULL},
    {"run", run_keys, N_OF(run_keys), NULL},
    {"cost", cost_keys, N_OF(cost_keys), NULL},
    {"nccl", nccl_keys, N_OF(nccl_keys), NULL},
};

/* `preset: NAME`: a row of model/preset.h for each model key with a field and for
 * pipeline.micro_batch_size, each then marked as set here. In the file it fills the keys the file
 * has not written yet (and one written after it is applied over it as usual), so a key the file
 * writes wins wherever it stands; an override (`--set model=7b`) sets them all, as a later
 * override wins over the file. */
static pp_status_t set_preset(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    char allowed[128];
    const char *word;
    preset_names(allowed, sizeof allowed);
    PP_CHECK(cfg_scalar(c, n, key, "one word", allowed, 0, &word));
    const pp_preset_t *row = preset_find(word);
    if (!row)
        return cfg_err(c, n, key, "unknown preset '%s' (allowed: %s)", PP_SHORT(word), allowed);
    const int replace = c->set != NULL;
    for (int k = 0; k < N_OF(model_keys); k++) {
        const key_spec_t *ks = &model_keys[k];
        if (ks->type == VAL_FN || (!replace && cfg_is_set(c->cfg, ks->origin))) continue;
        /* VAL_INT and VAL_ENUM fields are ints (the _Static_assert above) */
        memcpy((char *)c->cfg + ks->off, (const char *)&row->model + (ks->off - OFF(model)),
               sizeof(int));
        cfg_mark(c, ks->origin, n, key);
    }
    if (replace || !cfg_is_set(c->cfg, PP_CFG_MICRO_BATCH_SIZE)) {
        c->cfg->pipeline.micro_batch_size = row->micro_batch_size;
        cfg_mark(c, PP_CFG_MICRO_BATCH_SIZE, n, key);
    }
    return PP_OK;
}

static const char *top_allowed = "name, model, pipeline, schedule, run, cost, nccl";

static const section_spec_t *find_section(const char *name)
{
    for (int i = 0; i < N_OF(sections); i++)
        if (!strcmp(sections[i].name, name)) return &sections[i];
    return NULL;
}

static void section_allowed(const section_spec_t *sec, char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < sec->n_keys; i++) {
        if (i) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, sec->keys[i].name, size - strlen(buf) - 1);
    }
}

/* Apply one value node to `section.name`; key_node is where an unknown key is reported. */
static pp_status_t apply_key(cfg_ctx_t *c, const section_spec_t *sec, const char *name,
                             const yaml_node_t *key_node, const yaml_node_t *v)
{
    char key[128], allowed[256];
    const key_spec_t *ks = NULL;
    for (int i = 0; i < sec->n_keys; i++)
        if (!strcmp(sec->keys[i].name, name)) ks = &sec->keys[i];
    if (!ks) {
        section_allowed(sec, allowed, sizeof allowed);
        return cfg_err(c, key_node, NULL, "unknown key '%s' in %s (allowed: %s)", PP_SHORT(name),
                       sec->name, allowed);
    }
    snprintf(key, sizeof key, "%s.%s", sec->name, name);
    char *field = (char *)c->cfg + ks->off;
    long l = 0;
    double x = 0;
    int e = 0;
    switch (ks->type) {
    case VAL_INT:
        PP_CHECK(cfg_get_long(c, v, key, (long)ks->lo, (long)ks->hi, NULL, &l));
        *(int *)field = (int)l;
        break;
    case VAL_U64: PP_CHECK(cfg_get_u64(c, v, key, (uint64_t *)field)); break;
    case VAL_REAL:
        PP_CHECK(cfg_get_double(c, v, key, ks->lo, ks->hi, ks->lo_open, &x));
        *(double *)field = x;
        break;
    case VAL_ENUM:
        PP_CHECK(cfg_get_enum(c, v, key, ks->names, &e));
        *(int *)field = ks->values[e];
        break;
    case VAL_FN: PP_CHECK(ks->fn(c, v, key)); break;
    }
    if (ks->origin >= 0) cfg_mark(c, ks->origin, v, key);
    /* `stages: auto` is no number to blame or to contradict: as if the key were absent. */
    if (ks->origin == PP_CFG_STAGES && c->cfg->pipeline.stages == 0)
        c->cfg->origin[PP_CFG_STAGES][0] = '\0';
    return PP_OK;
}

/* Report the second of two equal keys of a mapping. */
static pp_status_t check_duplicate(cfg_ctx_t *c, const yaml_node_t *map, const yaml_node_pair_t *p,
                                   const char *where)
{
    const char *name = cfg_node_text(yaml_document_get_node(c->doc, p->key));
    for (const yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
        yaml_node_t *kq = yaml_document_get_node(c->doc, q->key);
        if (cfg_node_text(kq) && !strcmp(cfg_node_text(kq), name))
            return cfg_err(
                c, yaml_document_get_node(c->doc, p->key), NULL,
                "duplicate key '%s' in %s, first given at line %zu (allowed: each key once)",
                PP_SHORT(name), where, (size_t)kq->start_mark.line + 1);
    }
    return PP_OK;
}

static pp_status_t apply_section(cfg_ctx_t *c, const section_spec_t *sec, const yaml_node_t *m)
{
    char allowed[256];
    if (cfg_node_is_null(m)) return PP_OK; /* `run:` with nothing under it */
    /* `model: 7b`: a section written as one word is its scalar key */
    if (m->type == YAML_SCALAR_NODE && sec->scalar_key)
        return apply_key(c, sec, sec->scalar_key, m, m);
    if (m->type != YAML_MAPPING_NODE) {
        section_allowed(sec, allowed, sizeof allowed);
        return cfg_err(c, m, sec->name, "expected a mapping of keys, got %s (allowed: %s)",
                       cfg_node_what(m), allowed);
    }
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        if (k->type != YAML_SCALAR_NODE) {
            section_allowed(sec, allowed, sizeof allowed);
            return cfg_err(c, k, sec->name, "expected a key name, got %s (allowed: %s)",
                           cfg_node_what(k), allowed);
        }
        PP_CHECK(check_duplicate(c, m, p, sec->name));
        PP_CHECK(apply_key(c, sec, cfg_node_text(k), k, yaml_document_get_node(c->doc, p->value)));
    }
    return PP_OK;
}

pp_status_t cfg_apply_root(cfg_ctx_t *c, const yaml_node_t *root)
{
    if (!root || cfg_node_is_null(root)) return PP_OK; /* an empty file: every default */
    if (root->type != YAML_MAPPING_NODE)
        return cfg_err(c, root, NULL, "expected a mapping of sections, got %s (allowed: %s)",
                       cfg_node_what(root), top_allowed);
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return cfg_err(c, k, NULL, "expected a section name, got %s (allowed: %s)",
                           cfg_node_what(k), top_allowed);
        PP_CHECK(check_duplicate(c, root, p, "the top level"));
        if (!strcmp(cfg_node_text(k), "name")) {
            PP_CHECK(set_name(c, v, "name"));
            continue;
        }
        const section_spec_t *sec = find_section(cfg_node_text(k));
        if (!sec)
            return cfg_err(c, k, NULL, "unknown section '%s' (allowed: %s)",
                           PP_SHORT(cfg_node_text(k)), top_allowed);
        PP_CHECK(apply_section(c, sec, v));
    }
    return PP_OK;
}

/* Apply one `section.key=value` override. */
pp_status_t cfg_apply_set(pp_config_t *cfg, const char *set)
{
    /* "--sweep key=value": an override that came from another flag, named in messages with its
     * text. "--gpu= cost.gpu=NAME": the flag stands for one key (it ends in '='), and messages
     * name it as typed, with the value alone ("--gpu NAME"). */
    char flag[24] = "--set";
    size_t fl = strncmp(set, "--", 2) == 0 ? strcspn(set, " ") : 0;
    int one_key = 0;
    if (fl && fl < sizeof flag && set[fl] == ' ') {
        one_key = set[fl - 1] == '=';
        snprintf(flag, sizeof flag, "%.*s", (int)(fl - (size_t)one_key), set);
        set += fl + 1;
    }
    const char *shown = one_key && strchr(set, '=') ? strchr(set, '=') + 1 : set;
    cfg_ctx_t c = {cfg, cfg->path, set, NULL, flag, shown};
    char section[64], name[64];
    const char *eq = strchr(set, '=');
    const char *dot = memchr(set, '.', eq ? (size_t)(eq - set) : 0);
    yaml_document_t doc;
    int loaded = 0;
    pp_status_t st;

    if (!eq || eq == set)
        return cfg_err(&c, NULL, NULL,
                       "expected section.key=value (allowed: e.g. pipeline.micro_batches=16)");
    const section_spec_t *sec = NULL;
    if (!dot) {
        /* `name=...`, or a section that stands for one of its keys (`model=7b`) */
        snprintf(name, sizeof name, "%.*s", (int)(eq - set), set);
        sec = strcmp(name, "name") ? find_section(name) : NULL;
        if (strcmp(name, "name") != 0 && (!sec || !sec->scalar_key))
            return cfg_err(&c, NULL, NULL,
                           "'%s' is not a key (allowed: name, model=PRESET, or section.key with "
                           "section one of model, pipeline, schedule, run, cost)",
                           PP_SHORT(name));
        section[0] = '\0';
        if (sec) snprintf(name, sizeof name, "%s", sec->scalar_key);
    } else {
        snprintf(section, sizeof section, "%.*s", (int)(dot - set), set);
        snprintf(name, sizeof name, "%.*s", (int)(eq - dot - 1), dot + 1);
        if (!section[0] || !name[0] || strchr(name, '.'))
            return cfg_err(&c, NULL, NULL,
                           "'%.*s' is not section.key: a part is empty or there are more than two "
                           "(allowed: e.g. pipeline.micro_batches=16)",
                           (int)(eq - set > PP_SHORT_MAX ? PP_SHORT_MAX : eq - set), set);
    }
    const char *val = eq + 1;
    while (*val == ' ' || *val == '\t')
        val++;
    if (!*val)
        return cfg_err(&c, NULL, NULL, "no value after '=' (allowed: a YAML scalar or flow list)");

    if (section[0]) {
        sec = find_section(section);
        if (!sec)
            return cfg_err(&c, NULL, NULL, "unknown section '%s' (allowed: %s)", section,
                           top_allowed);
    }
    PP_CHECK_GOTO(cfg_yaml_load_text(&c, val, strlen(val), &doc, &loaded), st, done);
    c.doc = &doc;
    yaml_node_t *v = yaml_document_get_root_node(&doc);
    if (!v) {
        st = cfg_err(&c, NULL, NULL, "no value after '=' (allowed: a YAML scalar or flow list)");
        goto done;
    }
    if (!sec)
        st = set_name(&c, v, "name");
    else
        st = apply_key(&c, sec, name, NULL, v);
done:
    if (loaded) yaml_document_delete(&doc);
    return st;
}
