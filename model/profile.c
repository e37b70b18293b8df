/*
 * profile.c — reading, writing and calibrating profiles (profile.h).
 *
 * The file is one YAML mapping: device, gpu, date, shape {hidden, heads, seq_len, vocab,
 * micro_batch_size, layers, dtype}, runtime_bytes, stages {middle, first, last: {forward,
 * backward_input, backward_weight (ms), bytes}}, sends [{bytes, ms}...], steps
 * [{micro_batch_size, seq_len, layers, micro_batches, ms}...] and pairs [{micro_batch_size,
 * seq_len, layers, micro_batches, serial_ms, overlapped_ms, overlap}...] (the last two come with
 * `ppsched: profile 2`; a file without them loads, with a note). Reading walks the libyaml
 * document with one table of keys per mapping; every problem names path:line:col and what is
 * allowed. Writing builds a libyaml document and lets the emitter print it.
 */
#include "profile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static const pp_prof_stage_desc_t stage_descs[PP_PROF_STAGE_COUNT] = {
    {"middle", 0, 0},
    {"first", 1, 0},
    {"last", 0, 1},
};

static const char *const pass_names[PP_PASS_COUNT] = {"forward", "backward_input",
                                                      "backward_weight"};

const pp_prof_stage_desc_t *profile_stage_desc(pp_prof_stage_t k)
{
    return (unsigned)k < PP_PROF_STAGE_COUNT ? &stage_descs[k] : NULL;
}

const char *profile_pass_name(pp_pass_t p)
{
    return (unsigned)p < PP_PASS_COUNT ? pass_names[p] : "?";
}

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct rd {
    const char *path;
    yaml_document_t *doc;
    pp_profile_t *p;
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

static pp_status_t rd_number(const rd_t *r, const yaml_node_t *n, const char *key, double *out)
{
    const char *s = scalar(n);
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || errno || *end || !isfinite(v) || v < 0)
        return rd_err(r, n, "%s: expected a number >= 0 (allowed: a number >= 0)", key);
    *out = v;
    return PP_OK;
}

static pp_status_t rd_string(const rd_t *r, const yaml_node_t *n, const char *key, char *out,
                             size_t size)
{
    const char *s = scalar(n);
    if (!s) return rd_err(r, n, "%s: expected a string (allowed: one line of text)", key);
    snprintf(out, size, "%s", s);
    return PP_OK;
}

/* Calls fn for each pair of mapping `m`; `allowed` lists the keys fn takes. */
typedef pp_status_t (*pair_fn_t)(rd_t *r, const char *key, const yaml_node_t *k,
                                 const yaml_node_t *v, void *arg);

static pp_status_t rd_mapping(rd_t *r, const yaml_node_t *m, const char *what, pair_fn_t fn,
                              void *arg)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return rd_err(r, m, "%s: expected a mapping of keys", what);
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(r->doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(r->doc, pr->value);
        const char *key = scalar(k);
        if (!key) return rd_err(r, k, "%s: keys must be plain words", what);
        PP_CHECK(fn(r, key, k, v, arg));
    }
    return PP_OK;
}

static pp_status_t shape_pair(rd_t *r, const char *key, const yaml_node_t *k, const yaml_node_t *v,
                              void *arg)
{
    pp_model_shape_t *s = &r->p->shape;
    int *fields[] = {&s->hidden, &s->heads, &s->seq_len, &s->vocab, &s->batch, &s->n_layers};
    const char *names[] = {"hidden", "heads", "seq_len", "vocab", "micro_batch_size", "layers"};
    if (strcmp(key, "dtype") == 0) {
        const char *t = scalar(v);
        if (t && strcmp(t, "bf16") == 0)
            r->p->dtype = PP_DTYPE_BF16;
        else if (t && strcmp(t, "fp32") == 0)
            r->p->dtype = PP_DTYPE_FP32;
        else
            return rd_err(r, v, "shape.dtype: '%s' (allowed: bf16, fp32)", t ? t : "");
        return PP_OK;
    }
    for (int i = 0; i < 6; i++) {
        if (strcmp(key, names[i]) != 0) continue;
        double x;
        PP_CHECK(rd_number(r, v, key, &x));
        if (x < 1 || x > 1e8 || x != floor(x))
            return rd_err(r, v, "shape.%s: %g (allowed: a whole number >= 1)", key, x);
        *fields[i] = (int)x;
        return PP_OK;
    }
    return rd_err(r, k,
                  "unknown key '%s' in shape (allowed: hidden, heads, seq_len, vocab, "
                  "micro_batch_size, layers, dtype)",
                  key);
}

static pp_status_t stage_pair(rd_t *r, const char *key, const yaml_node_t *k, const yaml_node_t *v,
                              void *arg)
{
    int st = *(int *)arg;
    for (int pass = 0; pass < PP_PASS_COUNT; pass++)
        if (strcmp(key, pass_names[pass]) == 0) return rd_number(r, v, key, &r->p->ms[st][pass]);
    if (strcmp(key, "bytes") == 0) return rd_number(r, v, key, &r->p->stage_bytes[st]);
    return rd_err(r, k,
                  "unknown key '%s' in stages.%s (allowed: forward, backward_input, "
                  "backward_weight, bytes)",
                  key, stage_descs[st].name);
}

static pp_status_t stages_pair(rd_t *r, const char *key, const yaml_node_t *k, const yaml_node_t *v,
                               void *arg)
{
    for (int st = 0; st < PP_PROF_STAGE_COUNT; st++)
        if (strcmp(key, stage_descs[st].name) == 0) {
            int *seen = arg;
            seen[st] = 1;
            return rd_mapping(r, v, key, stage_pair, &st);
        }
    return rd_err(r, k, "unknown stage '%s' (allowed: middle, first, last)", key);
}

static pp_status_t send_pair(rd_t *r, const char *key, const yaml_node_t *k, const yaml_node_t *v,
                             void *arg)
{
    int i = r->p->n_sends;
    if (strcmp(key, "bytes") == 0) return rd_number(r, v, key, &r->p->send_bytes[i]);
    if (strcmp(key, "ms") == 0) return rd_number(r, v, key, &r->p->send_ms[i]);
    return rd_err(r, k, "unknown key '%s' in a send (allowed: bytes, ms)", key);
}

static pp_status_t rd_sends(rd_t *r, const yaml_node_t *v)
{
    if (v->type != YAML_SEQUENCE_NODE)
        return rd_err(r, v, "sends: expected a list (allowed: a list of {bytes, ms})");
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        if (r->p->n_sends == PP_PROFILE_MAX_SENDS)
            return rd_err(r, v, "sends: more than %d (allowed: at most %d)", PP_PROFILE_MAX_SENDS,
                          PP_PROFILE_MAX_SENDS);
        PP_CHECK(rd_mapping(r, yaml_document_get_node(r->doc, *it), "a send", send_pair, NULL));
        r->p->n_sends++;
    }
    return PP_OK;
}

/* ---- steps: and pairs: one table of fields per list -------------------------------------------
 */

typedef struct row_field {
    const char *name;
    int whole;   /* 1: a whole number >= 1 into an int; 0: a number >= 0 into a double */
    double most; /* the largest value allowed */
    size_t off;  /* in the row */
} row_field_t;

#define STEP_SIZE(f, k)                                                                            \
    {                                                                                              \
        f, 1, 1e8, offsetof(pp_prof_step_t, size.k)                                                \
    }
#define PAIR_SIZE(f, k)                                                                            \
    {                                                                                              \
        f, 1, 1e8, offsetof(pp_prof_pair_t, size.k)                                                \
    }
static const row_field_t step_fields[] = {
    STEP_SIZE("micro_batch_size", batch),
    STEP_SIZE("seq_len", seq_len),
    STEP_SIZE("layers", layers),
    STEP_SIZE("micro_batches", m),
    {"ms", 0, 1e12, offsetof(pp_prof_step_t, ms)},
};
static const row_field_t pair_fields[] = {
    PAIR_SIZE("micro_batch_size", batch),
    PAIR_SIZE("seq_len", seq_len),
    PAIR_SIZE("layers", layers),
    PAIR_SIZE("micro_batches", m),
    {"serial_ms", 0, 1e12, offsetof(pp_prof_pair_t, serial_ms)},
    {"overlapped_ms", 0, 1e12, offsetof(pp_prof_pair_t, overlapped_ms)},
    {"overlap", 0, 1, offsetof(pp_prof_pair_t, overlap)},
};

typedef struct row_list {
    const char *name; /* the key */
    const row_field_t *fields;
    int n_fields;
    const char *allowed; /* the fields, for messages */
    size_t row_size, rows_off,
        count_off; /* the row struct; the array and its count in the profile */
} row_list_t;

static const row_list_t row_lists[2] = {
    {"steps", step_fields, 5, "micro_batch_size, seq_len, layers, micro_batches, ms",
     sizeof(pp_prof_step_t), offsetof(pp_profile_t, steps), offsetof(pp_profile_t, n_steps)},
    {"pairs", pair_fields, 7,
     "micro_batch_size, seq_len, layers, micro_batches, serial_ms, overlapped_ms, overlap",
     sizeof(pp_prof_pair_t), offsetof(pp_profile_t, pairs), offsetof(pp_profile_t, n_pairs)},
};

/* One field of a row into row + f->off. */
static pp_status_t rd_field(rd_t *r, const row_field_t *f, const yaml_node_t *v, char *row)
{
    double x;
    PP_CHECK(rd_number(r, v, f->name, &x));
    if (x > f->most || (f->whole && (x < 1 || x != floor(x))))
        return rd_err(r, v, "%s: %g (allowed: %s)", f->name, x,
                      f->whole       ? "a whole number >= 1"
                      : f->most == 1 ? "0 to 1"
                                     : "a number >= 0");
    if (f->whole)
        *(int *)(row + f->off) = (int)x;
    else
        *(double *)(row + f->off) = x;
    return PP_OK;
}

/* Row `i` of list `l`: a mapping holding every field once. */
static pp_status_t rd_row(rd_t *r, const row_list_t *l, const yaml_node_t *m, int i, char *row)
{
    unsigned seen = 0;
    if (!m || m->type != YAML_MAPPING_NODE)
        return rd_err(r, m, "%s[%d]: expected a mapping (allowed: %s)", l->name, i, l->allowed);
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        yaml_node_t *k = yaml_document_get_node(r->doc, pr->key);
        const char *key = scalar(k);
        int f = 0;
        while (f < l->n_fields && !(key && strcmp(key, l->fields[f].name) == 0))
            f++;
        if (f == l->n_fields)
            return rd_err(r, k, "unknown key '%s' in %s[%d] (allowed: %s)", key ? key : "", l->name,
                          i, l->allowed);
        PP_CHECK(rd_field(r, &l->fields[f], yaml_document_get_node(r->doc, pr->value), row));
        seen |= 1u << f;
    }
    for (int f = 0; f < l->n_fields; f++)
        if (!(seen & (1u << f)))
            return rd_err(r, m, "%s[%d]: %s is missing (allowed: %s)", l->name, i,
                          l->fields[f].name, l->allowed);
    return PP_OK;
}

static pp_status_t rd_rows(rd_t *r, int which, const yaml_node_t *v)
{
    const row_list_t *l = &row_lists[which];
    char *rows = (char *)r->p + l->rows_off;
    int *count = (int *)((char *)r->p + l->count_off);
    if (v->type != YAML_SEQUENCE_NODE)
        return rd_err(r, v, "%s: expected a list (allowed: a list of {%s})", l->name, l->allowed);
    r->seen_runs[which] = 1;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        if (*count == PP_PROFILE_MAX_RUNS)
            return rd_err(r, v, "%s: more than %d rows (allowed: at most %d)", l->name,
                          PP_PROFILE_MAX_RUNS, PP_PROFILE_MAX_RUNS);
        PP_CHECK(rd_row(r, l, yaml_document_get_node(r->doc, *it), *count,
                        rows + (size_t)*count * l->row_size));
        (*count)++;
    }
    return PP_OK;
}

static pp_status_t top_pair(rd_t *r, const char *key, const yaml_node_t *k, const yaml_node_t *v,
                            void *arg)
{
    pp_profile_t *p = r->p;
    if (strcmp(key, "device") == 0) return rd_string(r, v, key, p->device, sizeof p->device);
    if (strcmp(key, "gpu") == 0) return rd_string(r, v, key, p->gpu, sizeof p->gpu);
    if (strcmp(key, "date") == 0) return rd_string(r, v, key, p->date, sizeof p->date);
    if (strcmp(key, "ppsched") == 0) return PP_OK; /* the version that wrote it */
    if (strcmp(key, "runtime_bytes") == 0) return rd_number(r, v, key, &p->runtime_bytes);
    if (strcmp(key, "stage_overhead_bytes") == 0)
        return rd_number(r, v, key, &p->stage_overhead_bytes);
    if (strcmp(key, "shape") == 0) return rd_mapping(r, v, key, shape_pair, NULL);
    if (strcmp(key, "stages") == 0) return rd_mapping(r, v, key, stages_pair, arg);
    if (strcmp(key, "sends") == 0) return rd_sends(r, v);
    for (int w = 0; w < 2; w++)
        if (strcmp(key, row_lists[w].name) == 0) return rd_rows(r, w, v);
    return rd_err(r, k,
                  "unknown key '%s' (allowed: device, gpu, date, ppsched, shape, runtime_bytes, "
                  "stage_overhead_bytes, stages, sends, steps, pairs)",
                  key);
}

/* Both of steps: and pairs:, or neither (a profile from before them: noted once a process). */
static pp_status_t check_runs(rd_t *r, const yaml_node_t *root)
{
    static int noted;
    if (r->seen_runs[0] != r->seen_runs[1])
        return rd_err(r, root,
                      "%s is missing (allowed: both steps and pairs, as `ppsched profile` writes "
                      "them, or neither in a profile from before them)",
                      row_lists[r->seen_runs[0] ? 1 : 0].name);
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

pp_status_t profile_load(pp_profile_t *p, const char *path)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    rd_t r = {path, &doc, p, {0, 0}};
    int seen[PP_PROF_STAGE_COUNT] = {0};
    pp_status_t st = PP_OK;
    memset(p, 0, sizeof *p);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open the profile: %s\n", path, strerror(errno));
        return PP_ERR_IO;
    }
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for a YAML parser");
    }
    yaml_parser_set_input_file(&parser, f);
    if (!yaml_parser_load(&parser, &doc)) {
        fprintf(stderr, "%s:%zu:%zu: %s\n", path, parser.problem_mark.line + 1,
                parser.problem_mark.column + 1, parser.problem ? parser.problem : "bad YAML");
        yaml_parser_delete(&parser);
        fclose(f);
        return PP_ERR_INPUT;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    st = root ? rd_mapping(&r, root, "the profile", top_pair, seen)
              : rd_err(&r, NULL, "empty file (allowed: a profile written by ppsched profile)");
    for (int k = 0; st == PP_OK && k < PP_PROF_STAGE_COUNT; k++)
        if (!seen[k])
            st = rd_err(&r, root, "stages.%s is missing (allowed: stages middle, first, last)",
                        stage_descs[k].name);
    if (st == PP_OK && (p->shape.hidden == 0 || p->shape.heads == 0 || p->shape.seq_len == 0 ||
                        p->shape.vocab == 0 || p->shape.batch == 0 || p->shape.n_layers == 0))
        st = rd_err(&r, root,
                    "shape is incomplete (allowed: hidden, heads, seq_len, vocab, "
                    "micro_batch_size, layers, each >= 1)");
    if (st == PP_OK) st = check_runs(&r, root);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    fclose(f);
    if (st == PP_OK) profile_calibrate(p);
    return st;
}

/* ---- writing --------------------------------------------------------------------------------- */

static int add_pair(yaml_document_t *d, int map, const char *key, const char *val)
{
    int k = yaml_document_add_scalar(d, NULL, (yaml_char_t *)key, -1, YAML_PLAIN_SCALAR_STYLE);
    int v = yaml_document_add_scalar(d, NULL, (yaml_char_t *)val, -1, YAML_ANY_SCALAR_STYLE);
    return k && v && yaml_document_append_mapping_pair(d, map, k, v);
}

static int add_num(yaml_document_t *d, int map, const char *key, double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.6g", x);
    return add_pair(d, map, key, buf);
}

static int add_map(yaml_document_t *d, int map, const char *key, yaml_mapping_style_t style)
{
    int k = yaml_document_add_scalar(d, NULL, (yaml_char_t *)key, -1, YAML_PLAIN_SCALAR_STYLE);
    int m = yaml_document_add_mapping(d, NULL, style);
    return (k && m && yaml_document_append_mapping_pair(d, map, k, m)) ? m : 0;
}

/* steps: and pairs:, one flow mapping a row, fields in table order. */
static int build_runs(yaml_document_t *d, int root, const pp_profile_t *p)
{
    int ok = 1;
    for (int w = 0; ok && w < 2; w++) {
        const row_list_t *l = &row_lists[w];
        const char *rows = (const char *)p + l->rows_off;
        int count = *(const int *)((const char *)p + l->count_off);
        int k =
            yaml_document_add_scalar(d, NULL, (yaml_char_t *)l->name, -1, YAML_PLAIN_SCALAR_STYLE);
        int seq = yaml_document_add_sequence(d, NULL, YAML_BLOCK_SEQUENCE_STYLE);
        ok = k && seq && yaml_document_append_mapping_pair(d, root, k, seq);
        for (int i = 0; ok && i < count; i++) {
            const char *row = rows + (size_t)i * l->row_size;
            int m = yaml_document_add_mapping(d, NULL, YAML_FLOW_MAPPING_STYLE);
            ok = m && yaml_document_append_sequence_item(d, seq, m);
            for (int f = 0; ok && f < l->n_fields; f++) {
                const row_field_t *fl = &l->fields[f];
                ok = add_num(d, m, fl->name,
                             fl->whole ? *(const int *)(row + fl->off)
                                       : *(const double *)(row + fl->off));
            }
        }
    }
    return ok;
}

static int build_doc(yaml_document_t *d, const pp_profile_t *p)
{
    int ok = 1, root = yaml_document_add_mapping(d, NULL, YAML_BLOCK_MAPPING_STYLE);
    ok &= root && add_pair(d, root, "device", p->device) && add_pair(d, root, "gpu", p->gpu);
    ok &= add_pair(d, root, "date", p->date) && add_pair(d, root, "ppsched", "profile 2");
    int sh = ok ? add_map(d, root, "shape", YAML_FLOW_MAPPING_STYLE) : 0;
    ok &=
        sh && add_num(d, sh, "hidden", p->shape.hidden) && add_num(d, sh, "heads", p->shape.heads);
    ok &= add_num(d, sh, "seq_len", p->shape.seq_len) && add_num(d, sh, "vocab", p->shape.vocab);
    ok &= add_num(d, sh, "micro_batch_size", p->shape.batch);
    ok &= add_num(d, sh, "layers", p->shape.n_layers);
    ok &= add_pair(d, sh, "dtype", pp_dtype_name(p->dtype));
    ok &= add_num(d, root, "runtime_bytes", p->runtime_bytes);
    ok &= add_num(d, root, "stage_overhead_bytes", p->stage_overhead_bytes);
    int sts = ok ? add_map(d, root, "stages", YAML_BLOCK_MAPPING_STYLE) : 0;
    for (int k = 0; ok && sts && k < PP_PROF_STAGE_COUNT; k++) {
        int m = add_map(d, sts, stage_descs[k].name, YAML_FLOW_MAPPING_STYLE);
        ok &= m != 0;
        for (int pass = 0; ok && pass < PP_PASS_COUNT; pass++)
            ok &= add_num(d, m, pass_names[pass], p->ms[k][pass]);
        ok &= ok && add_num(d, m, "bytes", p->stage_bytes[k]);
    }
    int kk = yaml_document_add_scalar(d, NULL, (yaml_char_t *)"sends", -1, YAML_PLAIN_SCALAR_STYLE);
    int seq = yaml_document_add_sequence(d, NULL, YAML_BLOCK_SEQUENCE_STYLE);
    ok &= sts && kk && seq && yaml_document_append_mapping_pair(d, root, kk, seq);
    for (int i = 0; ok && i < p->n_sends; i++) {
        int m = yaml_document_add_mapping(d, NULL, YAML_FLOW_MAPPING_STYLE);
        ok &= m && yaml_document_append_sequence_item(d, seq, m);
        ok &= ok && add_num(d, m, "bytes", p->send_bytes[i]) && add_num(d, m, "ms", p->send_ms[i]);
    }
    return ok && build_runs(d, root, p);
}

pp_status_t profile_write(const pp_profile_t *p, FILE *f)
{
    yaml_document_t doc;
    yaml_emitter_t em;
    if (!yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1))
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for a YAML document");
    if (!build_doc(&doc, p)) {
        yaml_document_delete(&doc);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory building the profile document");
    }
    fprintf(f,
            "# ppsched profile: stage times (ms per micro-batch), memory (bytes), transfers, and\n"
            "# whole-model steps (ms) on one GPU; measured on %s; read it with\n"
            "# `cost: {profile: FILE}`\n",
            p->device);
    if (!yaml_emitter_initialize(&em)) {
        yaml_document_delete(&doc);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for a YAML emitter");
    }
    yaml_emitter_set_output_file(&em, f);
    yaml_emitter_set_width(&em, 100);
    int ok = yaml_emitter_open(&em);
    if (ok)
        ok = yaml_emitter_dump(&em, &doc) && yaml_emitter_close(&em); /* dump deletes the doc */
    else
        yaml_document_delete(&doc);
    yaml_emitter_delete(&em);
    if (!ok) PP_FAIL(PP_ERR_IO, "could not write the profile: %s", strerror(errno));
    return PP_OK;
}
