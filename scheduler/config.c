/*
 * config.c — the run configuration: a YAML file (libyaml document API) plus `--set` overrides in,
 * a filled pp_config_t out.
 *
 * One table per section gives each key's type, range and field; a node from the file and one
 * parsed from `--set section.key=value` go through the same code and get the same messages. The
 * first problem prints one line, `file:line:col: key: message (allowed: ...)` (libyaml's 0-based
 * marks shown 1-based) or `--set text: ...`, and returns PP_ERR_INPUT. cfg->origin remembers
 * where the keys config_resolve and written.c check were set, so their messages name them too.
 * `steps:` is kept as written (each action's text and place) and `csv:` as its path: building
 * those schedules is written.c's. A config owns path, name, schedule.csv_path and the step
 * texts; config_free releases them.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Enum fields are written through an int: the C enums here all have int's size. */
_Static_assert(sizeof(pp_dtype_t) == sizeof(int) && sizeof(pp_placement_t) == sizeof(int) &&
                   sizeof(pp_transport_t) == sizeof(int) && sizeof(pp_optimizer_t) == sizeof(int) &&
                   sizeof(pp_recompute_t) == sizeof(int),
               "enum fields are stored as int");

#define DEVICE_FORMS "all, a count 1..64, or a list of CUDA ids such as [0, 1, 2, 3]"

/* Messages name a key by its place in the file when known; these are the names otherwise. */
static const char *const key_names[PP_CFG_KEY_COUNT] = {
    "model.layers",           "model.hidden",    "model.heads",
    "pipeline.devices",       "pipeline.stages", "pipeline.chunks",
    "pipeline.micro_batches", "schedule.kind",   "schedule.steps",
    "schedule.csv",
};

/* ---------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------- */

/* Where a value is being read from: the file (doc set) or one `--set` override. */
typedef struct cfg_ctx {
    pp_config_t *cfg;
    const char *file;     /* the YAML file's name as given (messages, folder of csv paths) */
    const char *set;      /* the override being applied, or NULL while reading the file */
    yaml_document_t *doc; /* the document the nodes belong to */
} cfg_ctx_t;

/* Print one message: `file:line:col: key: ...` for a node of the file (no line:col without a
 * node, no key without one), `--set text: ...` for an override. Returns PP_ERR_INPUT. */
static pp_status_t cfg_err(const cfg_ctx_t *c, const yaml_node_t *node, const char *key,
                           const char *fmt, ...)
{
    va_list ap;
    if (c->set) {
        fprintf(stderr, "--set %s: ", c->set);
    } else {
        fputs(c->file, stderr);
        if (node)
            fprintf(stderr, ":%zu:%zu", (size_t)node->start_mark.line + 1,
                    (size_t)node->start_mark.column + 1);
        fputs(": ", stderr);
        if (key) fprintf(stderr, "%s: ", key);
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return PP_ERR_INPUT;
}

/* Remember where key k was set (the value node's place, or the override's text). */
static void cfg_mark(const cfg_ctx_t *c, int k, const yaml_node_t *node, const char *key)
{
    char *o = c->cfg->origin[k];
    if (c->set)
        snprintf(o, PP_CFG_ORIGIN_MAX, "--set %s", c->set);
    else
        snprintf(o, PP_CFG_ORIGIN_MAX, "%s:%zu:%zu: %s", c->file, (size_t)node->start_mark.line + 1,
                 (size_t)node->start_mark.column + 1, key);
}

static int cfg_is_set(const pp_config_t *cfg, int k)
{
    return cfg->origin[k][0] != '\0';
}

/* The prefix of a message about key k (see config_error_at). */
static void cfg_prefix(const pp_config_t *cfg, int k, int line, int col)
{
    const char *path = cfg->path ? cfg->path : "config";
    if (strncmp(cfg->origin[k], "--set ", 6) == 0 || (cfg_is_set(cfg, k) && line <= 0))
        fprintf(stderr, "%s: ", cfg->origin[k]);
    else if (line > 0)
        fprintf(stderr, "%s:%d:%d: %s: ", path, line, col, key_names[k]);
    else
        fprintf(stderr, "%s: %s: ", path, key_names[k]);
}

int config_is_set(const pp_config_t *cfg, pp_config_key_t k)
{
    return cfg_is_set(cfg, (int)k);
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
        if (from_set < 0 && strncmp(cfg->origin[k], "--set ", 6) == 0) from_set = k;
    }
    va_end(ap);
    return from_set >= 0 ? from_set : found >= 0 ? found : fallback;
}

/* ---------------------------------------------------------------------------------------------
 * Scalars
 * ------------------------------------------------------------------------------------------- */

static const char *node_text(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A YAML null: an empty or `~`/`null` plain scalar (`layers:` with nothing after it). */
static int node_is_null(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = node_text(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* What a node is, for "expected X, got Y". */
static const char *node_what(const yaml_node_t *n)
{
    if (n->type == YAML_SEQUENCE_NODE) return "a list";
    if (n->type == YAML_MAPPING_NODE) return "a mapping";
    return "a value";
}

/* Read an integer in [lo, hi] from a plain scalar. `allowed` overrides the "(allowed: lo..hi)"
 * text when given. */
static pp_status_t get_long(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, long lo,
                            long hi, const char *allowed, long *out)
{
    char range[96];
    if (!allowed) {
        snprintf(range, sizeof range, "an integer %ld..%ld", lo, hi);
        allowed = range;
    }
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected an integer, got %s (allowed: %s)", node_what(n),
                       allowed);
    if (node_is_null(n)) return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    const char *s = node_text(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return cfg_err(c, n, key, "\"%s\" is a quoted string, not an integer (allowed: %s)", s,
                       allowed);
    const char *d = s + (*s == '-' || *s == '+');
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!isdigit((unsigned char)*d) || *end)
        return cfg_err(c, n, key, "'%s' is not an integer (allowed: %s)", s, allowed);
    if (errno == ERANGE || v < lo || v > hi)
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", s, allowed);
    *out = v;
    return PP_OK;
}

/* Read a number in [lo, hi] (or (lo, hi] when lo_open) from a plain scalar. */
static pp_status_t get_double(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, double lo,
                              double hi, int lo_open, double *out)
{
    char allowed[96];
    snprintf(allowed, sizeof allowed, "a number %s %g and <= %g", lo_open ? ">" : ">=", lo, hi);
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected a number, got %s (allowed: %s)", node_what(n), allowed);
    if (node_is_null(n)) return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    const char *s = node_text(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return cfg_err(c, n, key, "\"%s\" is a quoted string, not a number (allowed: %s)", s,
                       allowed);
    const char *d = s + (*s == '-' || *s == '+');
    char *end;
    double v = strtod(s, &end);
    if (!(isdigit((unsigned char)*d) || (*d == '.' && isdigit((unsigned char)d[1]))) || *end ||
        !isfinite(v))
        return cfg_err(c, n, key, "'%s' is not a number (allowed: %s)", s, allowed);
    if (v < lo || v > hi || (lo_open && v == lo))
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", s, allowed);
    *out = v;
    return PP_OK;
}

static pp_status_t get_u64(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, uint64_t *out)
{
    const char *allowed = "an integer 0..18446744073709551615";
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected an integer, got %s (allowed: %s)", node_what(n),
                       allowed);
    if (node_is_null(n)) return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    const char *s = node_text(n);
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return cfg_err(c, n, key, "\"%s\" is a quoted string, not an integer (allowed: %s)", s,
                       allowed);
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '-' && isdigit((unsigned char)s[1]))
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", s, allowed);
    if (!isdigit((unsigned char)*s) || *end)
        return cfg_err(c, n, key, "'%s' is not an integer (allowed: %s)", s, allowed);
    if (errno == ERANGE) return cfg_err(c, n, key, "%s is out of range (allowed: %s)", s, allowed);
    *out = (uint64_t)v;
    return PP_OK;
}

/* Match a scalar against `names` (NULL-terminated); *out = index. */
static pp_status_t get_enum(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                            const char *const *names, int *out)
{
    char allowed[160] = "";
    for (int i = 0; names[i]; i++) {
        if (i) strncat(allowed, ", ", sizeof allowed - strlen(allowed) - 1);
        strncat(allowed, names[i], sizeof allowed - strlen(allowed) - 1);
    }
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected one word, got %s (allowed: %s)", node_what(n), allowed);
    if (node_is_null(n)) return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    const char *s = node_text(n);
    for (int i = 0; names[i]; i++) {
        if (!strcmp(s, names[i])) {
            *out = i;
            return PP_OK;
        }
    }
    return cfg_err(c, n, key, "unknown value '%s' (allowed: %s)", s, allowed);
}

/* A malloc'd copy of a non-empty scalar. */
static pp_status_t get_string(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                              const char *allowed, char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected a string, got %s (allowed: %s)", node_what(n), allowed);
    if (node_is_null(n) || !*node_text(n))
        return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    char *s = strdup(node_text(n));
    PP_ALLOC_CHECK(s);
    free(*out);
    *out = s;
    return PP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Keys with their own rules
 * ------------------------------------------------------------------------------------------- */

static pp_status_t set_name(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    return get_string(c, n, key, "a name such as 1f1b-8mb", &c->cfg->name);
}

/* `devices: all | N | [id, ...]` */
static pp_status_t set_devices(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    pp_pipeline_cfg_t *pl = &c->cfg->pipeline;
    if (n->type == YAML_SCALAR_NODE && !strcmp(node_text(n), "all")) {
        pl->devices_all = 1;
        pl->n_devices = 0;
        return PP_OK;
    }
    if (n->type == YAML_SCALAR_NODE) {
        long count;
        PP_CHECK(get_long(c, n, key, 1, PP_MAX_DEVICES, DEVICE_FORMS, &count));
        pl->devices_all = 0;
        pl->n_devices = (int)count;
        for (int d = 0; d < pl->n_devices; d++)
            pl->device_ids[d] = d;
        return PP_OK;
    }
    if (n->type != YAML_SEQUENCE_NODE)
        return cfg_err(c, n, key, "expected a device list, got %s (allowed: %s)", node_what(n),
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
        PP_CHECK(get_long(c, item, key, 0, PP_MAX_DEVICES - 1, allowed, &id));
        for (int j = 0; j < count; j++)
            if (ids[j] == id)
                return cfg_err(c, item, key, "device %ld is listed twice (allowed: each id once)",
                               id);
        ids[count++] = (int)id;
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
    if (n->type == YAML_SCALAR_NODE && !strcmp(node_text(n), "auto")) {
        c->cfg->pipeline.stages = 0;
        return PP_OK;
    }
    snprintf(allowed, sizeof allowed, "auto or an integer 1..%d", PP_MAX_STAGES);
    PP_CHECK(get_long(c, n, key, 1, PP_MAX_STAGES, allowed, &v));
    c->cfg->pipeline.stages = (int)v;
    return PP_OK;
}

/* At most one of schedule.kind, schedule.steps and schedule.csv may be given. */
static pp_status_t check_one_schedule(cfg_ctx_t *c, const yaml_node_t *n, const char *key, int k)
{
    static const int ks[] = {PP_CFG_KIND, PP_CFG_STEPS, PP_CFG_CSV};
    for (int i = 0; i < 3; i++)
        if (ks[i] != k && cfg_is_set(c->cfg, ks[i]))
            return cfg_err(c, n, key,
                           "%s is given too (allowed: one of schedule.kind, steps or csv)",
                           key_names[ks[i]]);
    return PP_OK;
}

/* One word naming a row of a table (kinds, transports): `find` returns its index or -1, `allowed`
 * lists the names. */
static pp_status_t get_row(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                           const char *allowed, int (*find)(const char *), int *out)
{
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected one word, got %s (allowed: %s)", node_what(n), allowed);
    if (node_is_null(n)) return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    *out = find(node_text(n));
    if (*out < 0)
        return cfg_err(c, n, key, "unknown value '%s' (allowed: %s)", node_text(n), allowed);
    return PP_OK;
}

/* `transport:` a selectable row of the transport table (p2p/transport.h). */
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
    PP_CHECK(check_one_schedule(c, n, key, PP_CFG_KIND));
    c->cfg->schedule.kind = (pp_sched_kind_t)v;
    return PP_OK;
}

static void steps_free(pp_steps_cfg_t *st)
{
    for (int i = 0; i < st->n; i++)
        free(st->items[i].text);
    free(st->items);
    memset(st, 0, sizeof *st);
}

/* Keep the actions of `schedule.steps` as written, one list per device: each item must be one
 * word (written.c parses it). */
static pp_status_t collect_steps(cfg_ctx_t *c, const char *key, const yaml_node_t *const *rows,
                                 int n_dev, pp_steps_cfg_t *out)
{
    int total = 0;
    for (int d = 0; d < n_dev; d++) {
        const yaml_node_t *l = rows[d];
        int len = (int)(l->data.sequence.items.top - l->data.sequence.items.start);
        if (len == 0)
            return cfg_err(c, l, key, "device %d has no actions (allowed: a list of %s)", d,
                           PP_ACTION_FORMS);
        for (int i = 0; i < len; i++) {
            yaml_node_t *item = yaml_document_get_node(c->doc, l->data.sequence.items.start[i]);
            if (item->type != YAML_SCALAR_NODE)
                return cfg_err(c, item, key,
                               "device %d, item %d: expected an action, got %s (allowed: %s)", d,
                               i + 1, node_what(item), PP_ACTION_FORMS);
        }
        total += len;
    }
    memset(out, 0, sizeof *out);
    out->items = calloc((size_t)total, sizeof *out->items);
    PP_ALLOC_CHECK(out->items);
    out->n_devices = n_dev;
    for (int d = 0; d < n_dev; d++) {
        const yaml_node_t *l = rows[d];
        int len = (int)(l->data.sequence.items.top - l->data.sequence.items.start);
        for (int i = 0; i < len; i++) {
            yaml_node_t *item = yaml_document_get_node(c->doc, l->data.sequence.items.start[i]);
            pp_step_text_t *t = &out->items[out->n++];
            *t = (pp_step_text_t){strdup(node_text(item)), d, i, (int)item->start_mark.line + 1,
                                  (int)item->start_mark.column + 1};
            if (!t->text) {
                steps_free(out);
                PP_FAIL(PP_ERR_NOMEM, "out of host memory reading schedule.steps");
            }
        }
    }
    return PP_OK;
}

/* `steps:` — a mapping device -> [actions], or a list of lists (one per device). */
static pp_status_t set_steps(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    static const char *forms = "a mapping such as {0: [0F0, 0B0], 1: [1F0, 1B0]} or a list of "
                               "lists, one list of actions per device";
    const yaml_node_t *rows[PP_MAX_DEVICES];
    const yaml_node_t *keys[PP_MAX_DEVICES];
    int n_dev = 0;

    PP_CHECK(check_one_schedule(c, n, key, PP_CFG_STEPS));
    memset(rows, 0, sizeof rows);
    if (n->type == YAML_SEQUENCE_NODE) {
        yaml_node_item_t *it = n->data.sequence.items.start;
        n_dev = (int)(n->data.sequence.items.top - it);
        if (n_dev > PP_MAX_DEVICES)
            return cfg_err(c, n, key, "%d devices (allowed: at most %d)", n_dev, PP_MAX_DEVICES);
        for (int d = 0; d < n_dev; d++) {
            yaml_node_t *l = yaml_document_get_node(c->doc, it[d]);
            if (l->type != YAML_SEQUENCE_NODE)
                return cfg_err(c, l, key,
                               "device %d: expected a list of actions, got %s (allowed: %s)", d,
                               l->type == YAML_SCALAR_NODE ? "one value" : node_what(l), forms);
            rows[d] = l;
        }
    } else if (n->type == YAML_MAPPING_NODE) {
        int max_dev = -1;
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
             p++) {
            yaml_node_t *kn = yaml_document_get_node(c->doc, p->key);
            yaml_node_t *l = yaml_document_get_node(c->doc, p->value);
            long d;
            char allowed[64];
            snprintf(allowed, sizeof allowed, "a device index 0..%d", PP_MAX_DEVICES - 1);
            PP_CHECK(get_long(c, kn, key, 0, PP_MAX_DEVICES - 1, allowed, &d));
            if (rows[d])
                return cfg_err(
                    c, kn, key,
                    "device %ld is given twice, first at line %zu (allowed: each device once)", d,
                    (size_t)keys[d]->start_mark.line + 1);
            if (l->type != YAML_SEQUENCE_NODE)
                return cfg_err(c, l, key,
                               "device %ld: expected a list of actions, got %s (allowed: %s)", d,
                               l->type == YAML_SCALAR_NODE ? "one value" : node_what(l), forms);
            rows[d] = l;
            keys[d] = kn;
            if (d > max_dev) max_dev = (int)d;
        }
        n_dev = max_dev + 1;
        for (int d = 0; d < n_dev; d++)
            if (!rows[d])
                return cfg_err(c, n, key,
                               "device %d has no list (allowed: one list for each device 0..%d)", d,
                               max_dev);
    } else {
        return cfg_err(c, n, key, "expected one list of actions per device, got %s (allowed: %s)",
                       node_is_null(n) ? "nothing" : "one value", forms);
    }
    if (n_dev == 0) return cfg_err(c, n, key, "no devices (allowed: %s)", forms);

    pp_steps_cfg_t steps;
    PP_CHECK(collect_steps(c, key, rows, n_dev, &steps));
    steps_free(&c->cfg->schedule.steps);
    c->cfg->schedule.steps = steps;
    c->cfg->schedule.kind = PP_SCHED_STEPS;
    free(c->cfg->schedule.csv_path);
    c->cfg->schedule.csv_path = NULL;
    return PP_OK;
}

/* `csv: file.csv` — the path as written; written.c reads the file, relative to the YAML file's
 * folder. */
static pp_status_t set_csv(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    char *rel = NULL;
    PP_CHECK(check_one_schedule(c, n, key, PP_CFG_CSV));
    PP_CHECK(
        get_string(c, n, key, "a CSV file path, relative to the folder of the YAML file", &rel));
    steps_free(&c->cfg->schedule.steps);
    free(c->cfg->schedule.csv_path);
    c->cfg->schedule.csv_path = rel;
    c->cfg->schedule.kind = PP_SCHED_CSV;
    return PP_OK;
}

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
} section_spec_t;

static const char *const dtype_names[] = {"bf16", "fp32", NULL};
static const int dtype_values[] = {PP_DTYPE_BF16, PP_DTYPE_FP32};
static const char *const placement_names[] = {"loop", "v", NULL};
static const int placement_values[] = {PP_PLACEMENT_LOOP, PP_PLACEMENT_V};
static const char *const optimizer_names[] = {"none", "adamw", NULL};
static const int optimizer_values[] = {PP_OPT_NONE, PP_OPT_ADAMW};
#define recompute_names stage_recompute_names
static const int recompute_values[] = {PP_RECOMPUTE_NONE, PP_RECOMPUTE_SELECTIVE,
                                       PP_RECOMPUTE_FULL};
static const char *const timing_names[] = {"on", "off", "true", "false", NULL};
static const int timing_values[] = {1, 0, 1, 0};

/* clang-format off */
#define OFF(field) offsetof(pp_config_t, field)
#define INT_KEY(nm, field, lo, hi, org) {nm, VAL_INT, OFF(field), lo, hi, 0, NULL, NULL, NULL, org}
#define REAL_KEY(nm, field, lo, hi, op) {nm, VAL_REAL, OFF(field), lo, hi, op, NULL, NULL, NULL, -1}
#define ENUM_KEY(nm, field, t) {nm, VAL_ENUM, OFF(field), 0, 0, 0, t##_names, t##_values, NULL, -1}
#define FN_KEY(nm, fn, org) {nm, VAL_FN, 0, 0, 0, 0, NULL, NULL, fn, org}
/* clang-format on */

static const key_spec_t model_keys[] = {
    INT_KEY("layers", model.layers, 1, 100000, PP_CFG_LAYERS),
    INT_KEY("hidden", model.hidden, 1, 1 << 20, PP_CFG_HIDDEN),
    INT_KEY("heads", model.heads, 1, 1 << 16, PP_CFG_HEADS),
    INT_KEY("seq_len", model.seq_len, 1, 1 << 20, -1),
    INT_KEY("vocab", model.vocab, 1, 1 << 24, -1),
    ENUM_KEY("dtype", model.dtype, dtype),
};

static const key_spec_t pipeline_keys[] = {
    FN_KEY("devices", set_devices, PP_CFG_DEVICES),
    FN_KEY("stages", set_stages, PP_CFG_STAGES),
    INT_KEY("chunks", pipeline.chunks, 1, PP_MAX_STAGES, PP_CFG_CHUNKS),
    ENUM_KEY("placement", pipeline.placement, placement),
    INT_KEY("micro_batches", pipeline.micro_batches, 1, PP_MAX_MICRO_BATCHES, PP_CFG_MICRO_BATCHES),
    INT_KEY("micro_batch_size", pipeline.micro_batch_size, 1, 1 << 16, -1),
    FN_KEY("transport", set_transport, -1),
};

static const key_spec_t schedule_keys[] = {
    FN_KEY("kind", set_kind, PP_CFG_KIND),
    FN_KEY("steps", set_steps, PP_CFG_STEPS),
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
};

static const key_spec_t cost_keys[] = {
    REAL_KEY("forward", cost.forward, 0, 1e6, 1),
    REAL_KEY("backward_input", cost.backward_input, 0, 1e6, 0),
    REAL_KEY("backward_weight", cost.backward_weight, 0, 1e6, 0),
    REAL_KEY("send", cost.send, 0, 1e6, 0),
};

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const section_spec_t sections[] = {
    {"model", model_keys, N_OF(model_keys)},
    {"pipeline", pipeline_keys, N_OF(pipeline_keys)},
    {"schedule", schedule_keys, N_OF(schedule_keys)},
    {"run", run_keys, N_OF(run_keys)},
    {"cost", cost_keys, N_OF(cost_keys)},
};

static const char *top_allowed = "name, model, pipeline, schedule, run, cost";

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
        return cfg_err(c, key_node, NULL, "unknown key '%s' in %s (allowed: %s)", name, sec->name,
                       allowed);
    }
    snprintf(key, sizeof key, "%s.%s", sec->name, name);
    char *field = (char *)c->cfg + ks->off;
    long l = 0;
    double x = 0;
    int e = 0;
    switch (ks->type) {
    case VAL_INT:
        PP_CHECK(get_long(c, v, key, (long)ks->lo, (long)ks->hi, NULL, &l));
        *(int *)field = (int)l;
        break;
    case VAL_U64: PP_CHECK(get_u64(c, v, key, (uint64_t *)field)); break;
    case VAL_REAL:
        PP_CHECK(get_double(c, v, key, ks->lo, ks->hi, ks->lo_open, &x));
        *(double *)field = x;
        break;
    case VAL_ENUM:
        PP_CHECK(get_enum(c, v, key, ks->names, &e));
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
    const char *name = node_text(yaml_document_get_node(c->doc, p->key));
    for (const yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
        yaml_node_t *kq = yaml_document_get_node(c->doc, q->key);
        if (node_text(kq) && !strcmp(node_text(kq), name))
            return cfg_err(
                c, yaml_document_get_node(c->doc, p->key), NULL,
                "duplicate key '%s' in %s, first given at line %zu (allowed: each key once)", name,
                where, (size_t)kq->start_mark.line + 1);
    }
    return PP_OK;
}

static pp_status_t apply_section(cfg_ctx_t *c, const section_spec_t *sec, const yaml_node_t *m)
{
    char allowed[256];
    if (node_is_null(m)) return PP_OK; /* `run:` with nothing under it */
    if (m->type != YAML_MAPPING_NODE) {
        section_allowed(sec, allowed, sizeof allowed);
        return cfg_err(c, m, sec->name, "expected a mapping of keys, got %s (allowed: %s)",
                       node_what(m), allowed);
    }
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        if (k->type != YAML_SCALAR_NODE) {
            section_allowed(sec, allowed, sizeof allowed);
            return cfg_err(c, k, sec->name, "expected a key name, got %s (allowed: %s)",
                           node_what(k), allowed);
        }
        PP_CHECK(check_duplicate(c, m, p, sec->name));
        PP_CHECK(apply_key(c, sec, node_text(k), k, yaml_document_get_node(c->doc, p->value)));
    }
    return PP_OK;
}

static pp_status_t apply_root(cfg_ctx_t *c, const yaml_node_t *root)
{
    if (!root || node_is_null(root)) return PP_OK; /* an empty file: every default */
    if (root->type != YAML_MAPPING_NODE)
        return cfg_err(c, root, NULL, "expected a mapping of sections, got %s (allowed: %s)",
                       node_what(root), top_allowed);
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return cfg_err(c, k, NULL, "expected a section name, got %s (allowed: %s)",
                           node_what(k), top_allowed);
        PP_CHECK(check_duplicate(c, root, p, "the top level"));
        if (!strcmp(node_text(k), "name")) {
            PP_CHECK(set_name(c, v, "name"));
            continue;
        }
        const section_spec_t *sec = find_section(node_text(k));
        if (!sec)
            return cfg_err(c, k, NULL, "unknown section '%s' (allowed: %s)", node_text(k),
                           top_allowed);
        PP_CHECK(apply_section(c, sec, v));
    }
    return PP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing YAML text
 * ------------------------------------------------------------------------------------------- */

/* 1-based line and column of byte `off` of text (for libyaml's reader errors, which carry only an
 * offset). */
static void offset_to_mark(const char *text, size_t len, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            ++*line;
            *col = 1;
        } else {
            ++*col;
        }
    }
}

/* Print libyaml's problem. In file mode `file:line:col: invalid YAML: problem (context)`. */
static pp_status_t yaml_problem(const cfg_ctx_t *c, const yaml_parser_t *p, const char *text,
                                size_t len)
{
    size_t line, col;
    if (p->error == YAML_MEMORY_ERROR) {
        fprintf(stderr, "%s: out of host memory parsing YAML\n", c->set ? c->set : c->file);
        return PP_ERR_NOMEM;
    }
    if (p->error == YAML_READER_ERROR) {
        offset_to_mark(text, len, p->problem_offset, &line, &col);
    } else {
        line = (size_t)p->problem_mark.line + 1;
        col = (size_t)p->problem_mark.column + 1;
    }
    const char *problem = p->problem ? p->problem : "unreadable input";
    if (c->set) {
        fprintf(stderr, "--set %s: invalid value: %s (allowed: a YAML scalar or flow list)\n",
                c->set, problem);
    } else if (p->context) {
        fprintf(stderr, "%s:%zu:%zu: invalid YAML: %s (%s at line %zu)\n", c->file, line, col,
                problem, p->context, (size_t)p->context_mark.line + 1);
    } else {
        fprintf(stderr, "%s:%zu:%zu: invalid YAML: %s\n", c->file, line, col, problem);
    }
    return PP_ERR_INPUT;
}

/* Parse one YAML document from text into doc (which the caller deletes when *loaded). A second
 * document in the same text is an error. */
static pp_status_t yaml_load_text(const cfg_ctx_t *c, const char *text, size_t len,
                                  yaml_document_t *doc, int *loaded)
{
    yaml_parser_t p;
    yaml_document_t extra;
    pp_status_t st = PP_OK;
    *loaded = 0;
    if (!yaml_parser_initialize(&p)) {
        fprintf(stderr, "%s:%d: out of host memory starting the YAML parser\n", __FILE__, __LINE__);
        return PP_ERR_NOMEM;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, doc)) {
        st = yaml_problem(c, &p, text, len);
        goto done;
    }
    *loaded = 1;
    if (!yaml_parser_load(&p, &extra)) {
        st = yaml_problem(c, &p, text, len);
        goto done;
    }
    yaml_node_t *root2 = yaml_document_get_root_node(&extra);
    if (root2) {
        size_t line = (size_t)extra.start_mark.line + 1, col = (size_t)extra.start_mark.column + 1;
        if (c->set)
            fprintf(stderr, "--set %s: a second YAML document (allowed: one value)\n", c->set);
        else
            fprintf(
                stderr,
                "%s:%zu:%zu: a second YAML document starts here (allowed: one document per file)\n",
                c->file, line, col);
        st = PP_ERR_INPUT;
    }
    yaml_document_delete(&extra);
done:
    yaml_parser_delete(&p);
    return st;
}

/* Apply one `section.key=value` override. */
static pp_status_t apply_set(pp_config_t *cfg, const char *set)
{
    cfg_ctx_t c = {cfg, cfg->path, set, NULL};
    char section[64], name[64];
    const char *eq = strchr(set, '=');
    const char *dot = memchr(set, '.', eq ? (size_t)(eq - set) : 0);
    yaml_document_t doc;
    int loaded = 0;
    pp_status_t st;

    if (!eq || eq == set)
        return cfg_err(&c, NULL, NULL,
                       "expected section.key=value (allowed: e.g. pipeline.micro_batches=16)");
    if (!dot) {
        snprintf(name, sizeof name, "%.*s", (int)(eq - set), set);
        if (strcmp(name, "name") != 0)
            return cfg_err(&c, NULL, NULL,
                           "'%s' is not a key (allowed: name, or section.key with section one of "
                           "model, pipeline, schedule, run, cost)",
                           name);
        section[0] = '\0';
    } else {
        snprintf(section, sizeof section, "%.*s", (int)(dot - set), set);
        snprintf(name, sizeof name, "%.*s", (int)(eq - dot - 1), dot + 1);
    }
    const char *val = eq + 1;
    while (*val == ' ' || *val == '\t')
        val++;
    if (!*val)
        return cfg_err(&c, NULL, NULL, "no value after '=' (allowed: a YAML scalar or flow list)");

    const section_spec_t *sec = NULL;
    if (section[0]) {
        sec = find_section(section);
        if (!sec)
            return cfg_err(&c, NULL, NULL, "unknown section '%s' (allowed: %s)", section,
                           top_allowed);
    }
    PP_CHECK_GOTO(yaml_load_text(&c, val, strlen(val), &doc, &loaded), st, done);
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
                              .recompute = PP_RECOMPUTE_NONE};
    cfg->cost =
        (pp_cost_cfg_t){.forward = 1.0, .backward_input = 1.0, .backward_weight = 1.0, .send = 0.0};
}

/* After the file and every override: defaults that depend on other keys. */
static void config_finish(pp_config_t *cfg)
{
    const pp_kind_row_t *row = sched_kind(cfg->schedule.kind);
    if (!row->written && !cfg_is_set(cfg, PP_CFG_CHUNKS) && !cfg_is_set(cfg, PP_CFG_STAGES))
        cfg->pipeline.chunks = row->default_chunks;
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

static pp_status_t load_text(pp_config_t *cfg, const char *name, const char *text, size_t len,
                             const char *const *sets, int n_sets)
{
    yaml_document_t doc;
    int loaded = 0;
    pp_status_t st;
    cfg_ctx_t c;

    config_defaults(cfg);
    cfg->path = strdup(name);
    PP_ALLOC_CHECK(cfg->path);
    c = (cfg_ctx_t){cfg, cfg->path, NULL, &doc};
    PP_CHECK_GOTO(yaml_load_text(&c, text, len, &doc, &loaded), st, done);
    PP_CHECK_GOTO(apply_root(&c, yaml_document_get_root_node(&doc)), st, done);
    for (int i = 0; i < n_sets; i++)
        PP_CHECK_GOTO(apply_set(cfg, sets[i]), st, done);
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
    return load_text(cfg, name, yaml, strlen(yaml), sets, n_sets);
}

pp_status_t config_load(pp_config_t *cfg, const char *path, const char *const *sets, int n_sets)
{
    char *text = NULL;
    size_t len = 0, cap = 0;
    pp_status_t st;
    FILE *f;

    config_defaults(cfg);
    f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return PP_ERR_INPUT;
    }
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 16384;
            char *t = realloc(text, cap);
            if (!t) {
                free(text);
                fclose(f);
                PP_FAIL(PP_ERR_NOMEM, "out of host memory reading %s", path);
            }
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        free(text);
        fclose(f);
        return PP_ERR_INPUT;
    }
    fclose(f);
    text[len] = '\0';
    st = load_text(cfg, path, text, len, sets, n_sets);
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
        for (int e = 0; e < d; e++)
            if (pl->device_ids[e] == id)
                return cfg_err_at(cfg, PP_CFG_DEVICES,
                                  "device %d is listed twice (allowed: each id once)", id);
    }
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
    if (cfg->model.layers % pl->stages != 0)
        return cfg_err_at(cfg,
                          cfg_pick(cfg, PP_CFG_DEVICES, PP_CFG_STAGES, PP_CFG_CHUNKS, PP_CFG_STEPS,
                                   PP_CFG_CSV, PP_CFG_DEVICES, PP_CFG_LAYERS, -1),
                          "%d layers do not split into %d stages (allowed: a divisor of %d)",
                          cfg->model.layers, pl->stages, cfg->model.layers);
    if (cfg->model.hidden % cfg->model.heads != 0)
        return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_HEADS, PP_CFG_HEADS, PP_CFG_HIDDEN, -1),
                          "hidden %d does not split into %d heads (allowed: a divisor of %d)",
                          cfg->model.hidden, cfg->model.heads, cfg->model.hidden);

    return check_kind(cfg);
}

/* ---------------------------------------------------------------------------------------------
 * Small queries
 * ------------------------------------------------------------------------------------------- */

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
    steps_free(&cfg->schedule.steps);
    cfg->path = cfg->name = cfg->schedule.csv_path = NULL;
}
