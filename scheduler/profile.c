/*
 * profile.c — reading, writing and calibrating profiles (profile.h).
 *
 * The file is one YAML mapping: device, gpu, date, shape {hidden, heads, seq_len, vocab,
 * micro_batch_size, layers, dtype}, runtime_bytes, stages {middle, first, last: {forward,
 * backward_input, backward_weight (ms), bytes}}, sends [{bytes, ms}...]. Reading walks the libyaml
 * document with one table of keys per mapping; every problem names path:line:col and what is
 * allowed. Writing builds a libyaml document and lets the emitter print it.
 */
#include "profile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
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

/* ---- calibration ----------------------------------------------------------------------------- */

void profile_calibrate(pp_profile_t *p)
{
    const pp_gpu_t *gpu = gpu_find(p->gpu);
    if (!gpu) gpu = gpu_find("h100");
    pp_model_shape_t s = p->shape;
    int L = s.n_layers > 0 ? s.n_layers : 1;
    for (int pass = 0; pass < PP_PASS_COUNT; pass++) {
        double mid = p->ms[PP_PROF_MIDDLE][pass];
        double measured[PP_PART_COUNT] = {mid / L, p->ms[PP_PROF_FIRST][pass] - mid,
                                          p->ms[PP_PROF_LAST][pass] - mid};
        for (int part = 0; part < PP_PART_COUNT; part++) {
            double model = cost_part(&s, p->dtype, gpu, (pp_pass_t)pass, (pp_part_t)part).ms;
            double f = model > 0 ? measured[part] / model : 1.0;
            /* The embedding and the head are differences of two measurements: noise can make a
             * small one meaningless. Keep the model there. */
            p->factor[pass][part] = (f > 0.2 && f < 5.0) ? f : 1.0;
        }
    }
}

double profile_send_ms(const pp_profile_t *p, double bytes)
{
    int n = p->n_sends;
    if (n <= 0) return 0.0;
    if (n == 1) return p->send_bytes[0] > 0 ? p->send_ms[0] * bytes / p->send_bytes[0] : 0.0;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        sx += p->send_bytes[i];
        sy += p->send_ms[i];
        sxx += p->send_bytes[i] * p->send_bytes[i];
        sxy += p->send_bytes[i] * p->send_ms[i];
    }
    double den = n * sxx - sx * sx;
    double slope = den > 0 ? (n * sxy - sx * sy) / den : 0.0;
    double icept = (sy - slope * sx) / n;
    if (slope < 0) slope = 0;
    if (icept < 0) icept = 0;
    return icept + slope * bytes;
}

/* Measured against the a-priori model on the profiled GPU's description, per stage and pass. */
void profile_print_summary(const pp_profile_t *p, FILE *f)
{
    const pp_gpu_t *g = gpu_find(p->gpu);
    fprintf(f,
            "# profile of %s (%s), %d blocks a stage; ms measured (a-priori model on %s, error)\n",
            p->device, p->date, p->shape.n_layers, g ? g->name : "h100");
    if (!g) g = gpu_find("h100");
    for (int k = 0; k < PP_PROF_STAGE_COUNT; k++) {
        const pp_prof_stage_desc_t *d = profile_stage_desc((pp_prof_stage_t)k);
        pp_model_shape_t s = p->shape;
        s.is_first = d->is_first;
        s.is_last = d->is_last;
        fprintf(f, "#   %-7s", d->name);
        for (int pass = 0; pass < PP_PASS_COUNT; pass++) {
            double model = cost_stage_ms(&s, p->dtype, g, NULL, (pp_pass_t)pass);
            fprintf(f, " %s %.3f (%.3f, %+.1f%%)", profile_pass_name((pp_pass_t)pass),
                    p->ms[k][pass], model, 100.0 * (model - p->ms[k][pass]) / p->ms[k][pass]);
        }
        fprintf(f, ", %.2f GiB\n", p->stage_bytes[k] / (1024.0 * 1024 * 1024));
    }
    fprintf(f,
            "#   a stage holds %.0f MiB beyond its sizing functions; %.2f GiB held with no stage; "
            "%d sends measured\n",
            p->stage_overhead_bytes / (1024.0 * 1024), p->runtime_bytes / (1024.0 * 1024 * 1024),
            p->n_sends);
}

/* ---- reading --------------------------------------------------------------------------------- */

typedef struct rd {
    const char *path;
    yaml_document_t *doc;
    pp_profile_t *p;
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
    return rd_err(r, k,
                  "unknown key '%s' (allowed: device, gpu, date, ppsched, shape, runtime_bytes, "
                  "stage_overhead_bytes, stages, sends)",
                  key);
}

pp_status_t profile_load(pp_profile_t *p, const char *path)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    rd_t r = {path, &doc, p};
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

static int build_doc(yaml_document_t *d, const pp_profile_t *p)
{
    int ok = 1, root = yaml_document_add_mapping(d, NULL, YAML_BLOCK_MAPPING_STYLE);
    ok &= root && add_pair(d, root, "device", p->device) && add_pair(d, root, "gpu", p->gpu);
    ok &= add_pair(d, root, "date", p->date) && add_pair(d, root, "ppsched", "profile 1");
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
    return ok;
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
            "# ppsched profile: stage times (ms per micro-batch), memory (bytes) and transfers\n"
            "# measured on %s; read it with `cost: {profile: FILE}`\n",
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
