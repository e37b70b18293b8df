/*
 * profile_read.c — reading a profile (profile.h) with the config reader's limits and words.
 *
 * The file is read as the config is (common/input.h): a regular file of at most
 * PP_INPUT_MAX_BYTES (a FIFO is refused, not waited on), nesting at most PP_YAML_MAX_DEPTH, no
 * tags, one document. The document is walked with one table of keys per mapping (rd_walk): a key
 * not in the table, a key given twice and a key the file's version must have but lacks are each
 * refused, so no value is read as 0 in silence. Every number is range-checked (times 0..1e9 ms,
 * sizes 0..1e15 bytes, the shape within the config's ranges), so none converts out of range
 * later. `ppsched` names a version this reader knows, `gpu` a row of the GPU table or none ("").
 * The first problem is printed as one line, `path:line:col: message (allowed: ...)`, and the
 * status is PP_ERR_INPUT.
 */
#include "profile_internal.h"

#include "common/input.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_KEYS 16 /* keys of the largest mapping */

typedef struct rd {
    const char *path;
    yaml_document_t *doc;
    pp_profile_t *p;
    int version;      /* of `ppsched: profile N`, once read */
    int seen_runs[2]; /* steps:, pairs: were read */
} rd_t;

static pp_status_t rd_err(const rd_t *r, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s", r->path);
    if (n)
        fprintf(stderr, ":%zu:%zu", (size_t)n->start_mark.line + 1,
                (size_t)n->start_mark.column + 1);
    fputs(": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return PP_ERR_INPUT;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* ---- values ---------------------------------------------------------------------------------- */

/* A decimal number (no hexadecimal, inf or nan) in the range of field f, into *out. */
static pp_status_t rd_number(const rd_t *r, const yaml_node_t *n, const row_field_t *f, double *out)
{
    const char *s = scalar(n);
    char *end = NULL;
    double v = 0;
    if (s) {
        errno = 0;
        v = strtod(s, &end);
    }
    if (!s || !(isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) ||
        *end || strpbrk(s, "xX") || !isfinite(v))
        return rd_err(r, n, "%s: expected a number (allowed: %s)", f->name, f->allowed);
    if (errno == ERANGE || v > f->most || (f->whole && v < 1))
        return rd_err(r, n, "%s: %s is out of range (allowed: %s)", f->name, PP_SHORT(s),
                      f->allowed);
    if (f->whole && v != floor(v))
        return rd_err(r, n, "%s: %s is not a whole number (allowed: %s)", f->name, PP_SHORT(s),
                      f->allowed);
    *out = v;
    return PP_OK;
}

/* Field f of a table, into base + f->off (an int for a whole number, else a double). */
static pp_status_t rd_field(const rd_t *r, const row_field_t *f, const yaml_node_t *v, char *base)
{
    double x;
    PP_CHECK(rd_number(r, v, f, &x));
    if (f->whole)
        *(int *)(base + f->off) = (int)x;
    else
        *(double *)(base + f->off) = x;
    return PP_OK;
}

/* One line of text of at most size - 1 bytes. */
static pp_status_t rd_string(const rd_t *r, const yaml_node_t *n, const char *key, char *out,
                             size_t size)
{
    const char *s = scalar(n);
    if (!s || strchr(s, '\n'))
        return rd_err(r, n, "%s: expected one line of text (allowed: one line of text)", key);
    if (strlen(s) >= size)
        return rd_err(r, n, "%s: '%s' is longer than %zu bytes (allowed: at most %zu)", key,
                      PP_SHORT(s), size - 1, size - 1);
    snprintf(out, size, "%s", s);
    return PP_OK;
}

/* ---- mappings -------------------------------------------------------------------------------- */

/* Reads the value of key names[k] of a mapping; arg is rd_walk's. */
typedef pp_status_t (*key_fn_t)(rd_t *r, int k, const yaml_node_t *v, void *arg);

/* Walk mapping m, `what` in messages (NULL: the top level), whose keys are names[0..n): a key not
 * among them, or given twice, is refused, and so is one of `need` (a bit per name) that is
 * missing. fn reads each value. *seen (may be NULL) gets a bit per key read. */
static pp_status_t rd_walk(rd_t *r, const yaml_node_t *m, const char *what,
                           const char *const *names, int n, unsigned need, key_fn_t fn, void *arg,
                           unsigned *seen_out)
{
    char allowed[256] = "";
    const yaml_node_t *first[MAX_KEYS] = {0};
    unsigned seen = 0;
    for (int k = 0; k < n; k++)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s", k ? ", " : "",
                 names[k]);
    const char *in = what ? " in " : "", *w = what ? what : "";
    if (n > MAX_KEYS) PP_FAIL(PP_ERR_INTERNAL, "rd_walk: %d keys, at most %d", n, MAX_KEYS);
    if (!m || m->type != YAML_MAPPING_NODE)
        return rd_err(r, m, "%s%sexpected a mapping (allowed: %s)", w, what ? ": " : "", allowed);
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        const yaml_node_t *kn = yaml_document_get_node(r->doc, pr->key);
        const char *key = scalar(kn);
        int k = 0;
        while (k < n && !(key && strcmp(key, names[k]) == 0))
            k++;
        if (k == n)
            return rd_err(r, kn, "unknown key '%s'%s%s (allowed: %s)", key ? PP_SHORT(key) : "", in,
                          w, allowed);
        if (seen & (1u << k))
            return rd_err(r, kn,
                          "duplicate key '%s'%s%s, first given at line %zu (allowed: each key "
                          "once)",
                          PP_SHORT(key), in, w, (size_t)first[k]->start_mark.line + 1);
        seen |= 1u << k;
        first[k] = kn;
        PP_CHECK(fn(r, k, yaml_document_get_node(r->doc, pr->value), arg));
    }
    for (int k = 0; k < n; k++)
        if ((need & (1u << k)) && !(seen & (1u << k)))
            return rd_err(r, m, "%s%s%s is missing (allowed: %s)", w, what ? ": " : "", names[k],
                          allowed);
    if (seen_out) *seen_out = seen;
    return PP_OK;
}

/* A mapping of numbers, every field of the table given: rd_walk over the fields. */
typedef struct fields_arg {
    const row_field_t *fields;
    char *base;
} fields_arg_t;

static pp_status_t field_value(rd_t *r, int k, const yaml_node_t *v, void *arg)
{
    const fields_arg_t *a = arg;
    return rd_field(r, &a->fields[k], v, a->base);
}

static pp_status_t rd_fields(rd_t *r, const yaml_node_t *m, const char *what,
                             const row_field_t *fields, int n, char *base)
{
    const char *names[MAX_KEYS];
    for (int k = 0; k < n; k++)
        names[k] = fields[k].name;
    fields_arg_t a = {fields, base};
    return rd_walk(r, m, what, names, n, (1u << n) - 1, field_value, &a, NULL);
}

/* ---- shape, stages, sends, steps and pairs --------------------------------------------------- */

/* The shape's numbers have the ranges of the config's model keys. */
typedef struct shape_row {
    int hidden, heads, seq_len, vocab, batch, layers;
} shape_row_t;

#define SHAPE_FIELD(f, k, most, text)                                                              \
    {                                                                                              \
        f, 1, most, text, offsetof(shape_row_t, k)                                                 \
    }
static const row_field_t shape_fields[] = {
    SHAPE_FIELD("hidden", hidden, 1 << 20, "a whole number 1..1048576"),
    SHAPE_FIELD("heads", heads, 1 << 16, "a whole number 1..65536"),
    SHAPE_FIELD("seq_len", seq_len, 1 << 20, "a whole number 1..1048576"),
    SHAPE_FIELD("vocab", vocab, 1 << 24, "a whole number 1..16777216"),
    SHAPE_FIELD("micro_batch_size", batch, 1 << 16, "a whole number 1..65536"),
    SHAPE_FIELD("layers", layers, 100000, "a whole number 1..100000"),
};
#define N_SHAPE ((int)(sizeof shape_fields / sizeof shape_fields[0]))

static pp_status_t shape_value(rd_t *r, int k, const yaml_node_t *v, void *arg)
{
    if (k < N_SHAPE) return rd_field(r, &shape_fields[k], v, arg);
    const char *t = scalar(v);
    if (t && strcmp(t, "bf16") == 0)
        r->p->dtype = PP_DTYPE_BF16;
    else if (t && strcmp(t, "fp32") == 0)
        r->p->dtype = PP_DTYPE_FP32;
    else
        return rd_err(r, v, "shape.dtype: '%s' (allowed: bf16, fp32)", t ? PP_SHORT(t) : "");
    return PP_OK;
}

static pp_status_t rd_shape(rd_t *r, const yaml_node_t *v)
{
    const char *names[N_SHAPE + 1];
    shape_row_t s;
    for (int k = 0; k < N_SHAPE; k++)
        names[k] = shape_fields[k].name;
    names[N_SHAPE] = "dtype";
    PP_CHECK(rd_walk(r, v, "shape", names, N_SHAPE + 1, (1u << (N_SHAPE + 1)) - 1, shape_value, &s,
                     NULL));
    if (s.hidden % s.heads != 0)
        return rd_err(r, v,
                      "shape: hidden %d does not split into %d heads (allowed: heads a "
                      "divisor of hidden)",
                      s.hidden, s.heads);
    pp_model_shape_t *m = &r->p->shape;
    m->hidden = s.hidden, m->heads = s.heads, m->seq_len = s.seq_len, m->vocab = s.vocab;
    m->batch = s.batch, m->n_layers = s.layers;
    return PP_OK;
}

/* One stage: its three passes (ms) and its bytes. */
typedef struct stage_row {
    double ms[PP_PASS_COUNT], bytes;
} stage_row_t;

static const row_field_t stage_fields[] = {
    {"forward", 0, PP_PROF_MAX_MS, PP_PROF_MAX_MS_TEXT, offsetof(stage_row_t, ms[PP_PASS_F])},
    {"backward_input", 0, PP_PROF_MAX_MS, PP_PROF_MAX_MS_TEXT,
     offsetof(stage_row_t, ms[PP_PASS_I])},
    {"backward_weight", 0, PP_PROF_MAX_MS, PP_PROF_MAX_MS_TEXT,
     offsetof(stage_row_t, ms[PP_PASS_W])},
    {"bytes", 0, PP_PROF_MAX_BYTES, PP_PROF_MAX_BYTES_TEXT, offsetof(stage_row_t, bytes)},
};

static pp_status_t stage_value(rd_t *r, int k, const yaml_node_t *v, void *arg)
{
    char what[32];
    stage_row_t s;
    (void)arg;
    snprintf(what, sizeof what, "stages.%s", profile_stage_desc((pp_prof_stage_t)k)->name);
    PP_CHECK(rd_fields(r, v, what, stage_fields, 4, (char *)&s));
    for (int pass = 0; pass < PP_PASS_COUNT; pass++)
        r->p->ms[k][pass] = s.ms[pass];
    r->p->stage_bytes[k] = s.bytes;
    return PP_OK;
}

static pp_status_t rd_stages(rd_t *r, const yaml_node_t *v)
{
    const char *names[PP_PROF_STAGE_COUNT];
    for (int k = 0; k < PP_PROF_STAGE_COUNT; k++)
        names[k] = profile_stage_desc((pp_prof_stage_t)k)->name;
    return rd_walk(r, v, "stages", names, PP_PROF_STAGE_COUNT, (1u << PP_PROF_STAGE_COUNT) - 1,
                   stage_value, NULL, NULL);
}

typedef struct send_row {
    double bytes, ms;
} send_row_t;

static const row_field_t send_fields[] = {
    {"bytes", 0, PP_PROF_MAX_BYTES, PP_PROF_MAX_BYTES_TEXT, offsetof(send_row_t, bytes)},
    {"ms", 0, PP_PROF_MAX_MS, PP_PROF_MAX_MS_TEXT, offsetof(send_row_t, ms)},
};

/* A list of at most `most` mappings; each read by fn(r, item, index, arg). */
typedef pp_status_t (*item_fn_t)(rd_t *r, const yaml_node_t *item, int i, void *arg);

static pp_status_t rd_list(rd_t *r, const yaml_node_t *v, const char *key, const char *allowed,
                           int most, item_fn_t fn, void *arg)
{
    if (v->type != YAML_SEQUENCE_NODE)
        return rd_err(r, v, "%s: expected a list (allowed: a list of {%s})", key, allowed);
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++, i++) {
        if (i == most)
            return rd_err(r, v, "%s: more than %d rows (allowed: at most %d)", key, most, most);
        PP_CHECK(fn(r, yaml_document_get_node(r->doc, *it), i, arg));
    }
    return PP_OK;
}

static pp_status_t send_item(rd_t *r, const yaml_node_t *item, int i, void *arg)
{
    char what[32];
    send_row_t s;
    (void)arg;
    snprintf(what, sizeof what, "sends[%d]", i);
    PP_CHECK(rd_fields(r, item, what, send_fields, 2, (char *)&s));
    r->p->send_bytes[i] = s.bytes;
    r->p->send_ms[i] = s.ms;
    r->p->n_sends = i + 1;
    return PP_OK;
}

static pp_status_t run_item(rd_t *r, const yaml_node_t *item, int i, void *arg)
{
    const row_list_t *l = arg;
    char what[32];
    char *rows = (char *)r->p + l->rows_off;
    snprintf(what, sizeof what, "%s[%d]", l->name, i);
    PP_CHECK(rd_fields(r, item, what, l->fields, l->n_fields, rows + (size_t)i * l->row_size));
    *(int *)((char *)r->p + l->count_off) = i + 1;
    return PP_OK;
}

/* ---- the top level --------------------------------------------------------------------------- */

static pp_status_t rd_version(rd_t *r, const yaml_node_t *v)
{
    const char *s = scalar(v);
    int n = 0, end = 0;
    if (!s || sscanf(s, "profile %d%n", &n, &end) != 1 || s[end] || n < PP_PROFILE_OLDEST_VERSION ||
        n > PP_PROFILE_VERSION)
        return rd_err(r, v,
                      "ppsched: '%s' is not a profile version this ppsched reads (allowed: "
                      "profile %d to profile %d; `ppsched profile` makes a new one)",
                      s ? PP_SHORT(s) : "", PP_PROFILE_OLDEST_VERSION, PP_PROFILE_VERSION);
    r->version = n;
    return PP_OK;
}

/* A row of the GPU table, or none (""): the GPU it was measured on matched no row. */
static pp_status_t rd_gpu(rd_t *r, const yaml_node_t *v)
{
    char names[128];
    PP_CHECK(rd_string(r, v, "gpu", r->p->gpu, sizeof r->p->gpu));
    if (!r->p->gpu[0] || gpu_find(r->p->gpu)) return PP_OK;
    gpu_names(names, sizeof names);
    return rd_err(r, v, "gpu: unknown GPU '%s' (allowed: %s, or '' for none)", PP_SHORT(r->p->gpu),
                  names);
}

static const row_field_t runtime_field = {"runtime_bytes", 0, PP_PROF_MAX_BYTES,
                                          PP_PROF_MAX_BYTES_TEXT,
                                          offsetof(pp_profile_t, runtime_bytes)};
static const row_field_t overhead_field = {"stage_overhead_bytes", 0, PP_PROF_MAX_BYTES,
                                           PP_PROF_MAX_BYTES_TEXT,
                                           offsetof(pp_profile_t, stage_overhead_bytes)};

static pp_status_t rd_device(rd_t *r, const yaml_node_t *v)
{
    return rd_string(r, v, "device", r->p->device, sizeof r->p->device);
}
static pp_status_t rd_date(rd_t *r, const yaml_node_t *v)
{
    return rd_string(r, v, "date", r->p->date, sizeof r->p->date);
}
static pp_status_t rd_runtime(rd_t *r, const yaml_node_t *v)
{
    return rd_field(r, &runtime_field, v, (char *)r->p);
}
static pp_status_t rd_overhead(rd_t *r, const yaml_node_t *v)
{
    return rd_field(r, &overhead_field, v, (char *)r->p);
}
static pp_status_t rd_sends(rd_t *r, const yaml_node_t *v)
{
    return rd_list(r, v, "sends", "bytes, ms", PP_PROFILE_MAX_SENDS, send_item, NULL);
}
/* steps: (which 0) or pairs: (1) */
static pp_status_t rd_runs(rd_t *r, int which, const yaml_node_t *v)
{
    const row_list_t *l = &profile_row_lists[which];
    r->seen_runs[which] = 1;
    return rd_list(r, v, l->name, l->allowed, PP_PROFILE_MAX_RUNS, run_item, (void *)l);
}
static pp_status_t rd_steps(rd_t *r, const yaml_node_t *v)
{
    return rd_runs(r, 0, v);
}
static pp_status_t rd_pairs(rd_t *r, const yaml_node_t *v)
{
    return rd_runs(r, 1, v);
}

/* The top level's keys, their readers, and the version from which a file must have each. */
typedef struct top_key {
    const char *name;
    int since;
    pp_status_t (*read)(rd_t *r, const yaml_node_t *v);
} top_key_t;

static const top_key_t top_keys[] = {
    {"ppsched", 1, rd_version},
    {"device", 1, rd_device},
    {"gpu", 1, rd_gpu},
    {"date", 1, rd_date},
    {"shape", 1, rd_shape},
    {"runtime_bytes", 1, rd_runtime},
    {"stage_overhead_bytes", 2, rd_overhead},
    {"stages", 1, rd_stages},
    {"sends", 1, rd_sends},
    {"steps", 2, rd_steps},
    {"pairs", 2, rd_pairs},
};
#define TOP_COUNT ((int)(sizeof top_keys / sizeof top_keys[0]))

static pp_status_t top_value(rd_t *r, int k, const yaml_node_t *v, void *arg)
{
    (void)arg;
    return top_keys[k].read(r, v);
}

/* Both of steps: and pairs:, or neither (a profile from before them: noted once a process). */
static pp_status_t check_runs(rd_t *r, const yaml_node_t *root)
{
    static int noted;
    if (r->seen_runs[0] != r->seen_runs[1])
        return rd_err(r, root,
                      "%s is missing (allowed: both steps and pairs, as `ppsched profile` writes "
                      "them, or neither in a profile from before them)",
                      profile_row_lists[r->seen_runs[0] ? 1 : 0].name);
    r->p->has_runs = r->seen_runs[0];
    if (!r->p->has_runs && !noted) {
        noted = 1;
        fprintf(stderr,
                "%s: note: this profile predates the measured steps and pairs (no steps:, "
                "pairs:): step factor 1, pair overlap from the %s description; `ppsched profile` "
                "makes a new one\n",
                r->path, profile_gpu(r->p)->name);
    }
    return PP_OK;
}

/* A YAML null: an empty plain scalar, `~` or `null` (a document of `---` alone). */
static int is_null(const yaml_node_t *n)
{
    const char *s = scalar(n);
    return s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
            !strcmp(s, "NULL"));
}

/* The document: a mapping of every key its version has (the oldest version's while `ppsched` is
 * missing, so that it is the key named). */
static pp_status_t rd_profile(rd_t *r, const yaml_node_t *root)
{
    const char *names[TOP_COUNT];
    char keys[256] = "";
    unsigned seen = 0;
    if (!root || is_null(root))
        return rd_err(r, NULL, "empty (allowed: a profile written by `ppsched profile`)");
    for (int k = 0; k < TOP_COUNT; k++)
        names[k] = top_keys[k].name;
    PP_CHECK(rd_walk(r, root, NULL, names, TOP_COUNT, 0, top_value, NULL, &seen));
    const int version = r->version ? r->version : PP_PROFILE_OLDEST_VERSION;
    for (int k = 0; k < TOP_COUNT; k++)
        if (top_keys[k].since <= version)
            snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", k ? ", " : "",
                     names[k]);
    for (int k = 0; k < TOP_COUNT; k++)
        if (top_keys[k].since <= version && !(seen & (1u << k)))
            return rd_err(r, root, "%s is missing (allowed: profile %d has every one of %s)",
                          names[k], version, keys);
    return check_runs(r, root);
}

pp_status_t profile_load(pp_profile_t *p, const char *path)
{
    char *text = NULL, why[160];
    size_t len = 0;
    yaml_document_t doc;
    input_yaml_error_t e;
    memset(p, 0, sizeof *p);
    pp_status_t st = input_read_file(path, PP_INPUT_MAX_BYTES, &text, &len, why, sizeof why);
    if (st == PP_ERR_INPUT) fprintf(stderr, "%s: %s\n", path, why);
    if (st != PP_OK) return st;
    st = input_yaml_load(text, len, PP_YAML_MAX_DEPTH, &doc, &e);
    free(text);
    if (st != PP_OK) {
        if (e.line)
            fprintf(stderr, "%s:%zu:%zu: %s\n", path, e.line, e.col, e.message);
        else
            fprintf(stderr, "%s: %s\n", path, e.message);
        return st;
    }
    rd_t r = {path, &doc, p, 0, {0, 0}};
    st = rd_profile(&r, yaml_document_get_root_node(&doc));
    yaml_document_delete(&doc);
    if (st == PP_OK)
        profile_calibrate(p);
    else
        memset(p, 0, sizeof *p);
    return st;
}
