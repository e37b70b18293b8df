/*
 * config_yaml.c — reading YAML for the config (see config.c): where a value is read from and the
 * message that names its place, the scalar readers (integer, number, word, string with their
 * ranges and "(allowed: ...)" texts), the `schedule.steps` lists kept as written, and libyaml's
 * own problems turned into `file:line:col: invalid YAML: ...`. Every reader prints one line for
 * the first problem and returns PP_ERR_INPUT.
 */
#include "config_internal.h"
#include "common/input.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Print one message: `file:line:col: key: ...` for a node of the file (no line:col without a
 * node, no key without one), `--set text: ...` for an override. Returns PP_ERR_INPUT. */
pp_status_t cfg_err(const cfg_ctx_t *c, const yaml_node_t *node, const char *key, const char *fmt,
                    ...)
{
    va_list ap;
    if (c->set) {
        fprintf(stderr, "%s %s: ", c->flag, PP_SHORT(c->shown));
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
void cfg_mark(const cfg_ctx_t *c, int k, const yaml_node_t *node, const char *key)
{
    char *o = c->cfg->origin[k];
    if (c->set)
        snprintf(o, PP_CFG_ORIGIN_MAX, "%s %s", c->flag, PP_SHORT(c->shown));
    else
        snprintf(o, PP_CFG_ORIGIN_MAX, "%s:%zu:%zu: %s", c->file, (size_t)node->start_mark.line + 1,
                 (size_t)node->start_mark.column + 1, key);
}

/* ---------------------------------------------------------------------------------------------
 * Scalars
 * ------------------------------------------------------------------------------------------- */

const char *cfg_node_text(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A YAML null: an empty or `~`/`null` plain scalar (`layers:` with nothing after it). */
int cfg_node_is_null(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return 0;
    const char *s = cfg_node_text(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* What a node is, for "expected X, got Y". */
const char *cfg_node_what(const yaml_node_t *n)
{
    if (n->type == YAML_SEQUENCE_NODE) return "a list";
    if (n->type == YAML_MAPPING_NODE) return "a mapping";
    return "a value";
}

pp_status_t cfg_scalar(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, const char *what,
                       const char *allowed, int plain, const char **text)
{
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected %s, got %s (allowed: %s)", what, cfg_node_what(n),
                       allowed);
    if (cfg_node_is_null(n)) return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    *text = cfg_node_text(n);
    if (plain && n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return cfg_err(c, n, key, "\"%s\" is a quoted string, not %s (allowed: %s)",
                       PP_SHORT(*text), what, allowed);
    return PP_OK;
}

/* Read an integer in [lo, hi] from a plain scalar. `allowed` overrides the "(allowed: lo..hi)"
 * text when given. */
pp_status_t cfg_get_long(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, long lo,
                         long hi, const char *allowed, long *out)
{
    char range[96];
    if (!allowed) {
        snprintf(range, sizeof range, "an integer %ld..%ld", lo, hi);
        allowed = range;
    }
    const char *s;
    PP_CHECK(cfg_scalar(c, n, key, "an integer", allowed, 1, &s));
    const char *d = s + (*s == '-' || *s == '+');
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!isdigit((unsigned char)*d) || *end)
        return cfg_err(c, n, key, "'%s' is not an integer (allowed: %s)", PP_SHORT(s), allowed);
    if (errno == ERANGE || v < lo || v > hi)
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", PP_SHORT(s), allowed);
    *out = v;
    return PP_OK;
}

/* Read a number in [lo, hi] (or (lo, hi] when lo_open) from a plain scalar. */
pp_status_t cfg_get_double(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, double lo,
                           double hi, int lo_open, double *out)
{
    char allowed[96];
    snprintf(allowed, sizeof allowed, "a number %s %g and <= %g", lo_open ? ">" : ">=", lo, hi);
    return cfg_get_double_in(c, n, key, lo, hi, lo_open, allowed, out);
}

pp_status_t cfg_get_double_in(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, double lo,
                              double hi, int lo_open, const char *allowed, double *out)
{
    const char *s;
    PP_CHECK(cfg_scalar(c, n, key, "a number", allowed, 1, &s));
    const char *d = s + (*s == '-' || *s == '+');
    char *end;
    double v = strtod(s, &end);
    /* decimal only: strtod would also read hexadecimal (0x10) */
    if (!(isdigit((unsigned char)*d) || (*d == '.' && isdigit((unsigned char)d[1]))) || *end ||
        !isfinite(v) || strpbrk(s, "xX"))
        return cfg_err(c, n, key, "'%s' is not a number (allowed: %s)", PP_SHORT(s), allowed);
    if (v < lo || v > hi || (lo_open && v == lo))
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", PP_SHORT(s), allowed);
    *out = v;
    return PP_OK;
}

pp_status_t cfg_get_u64(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, uint64_t *out)
{
    const char *allowed = "an integer 0..18446744073709551615";
    const char *s;
    PP_CHECK(cfg_scalar(c, n, key, "an integer", allowed, 1, &s));
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '-' && isdigit((unsigned char)s[1]))
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", PP_SHORT(s), allowed);
    if (!isdigit((unsigned char)*s) || *end)
        return cfg_err(c, n, key, "'%s' is not an integer (allowed: %s)", PP_SHORT(s), allowed);
    if (errno == ERANGE)
        return cfg_err(c, n, key, "%s is out of range (allowed: %s)", PP_SHORT(s), allowed);
    *out = (uint64_t)v;
    return PP_OK;
}

/* Match a scalar against `names` (NULL-terminated); *out = index. */
pp_status_t cfg_get_enum(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                         const char *const *names, int *out)
{
    char allowed[160] = "";
    for (int i = 0; names[i]; i++) {
        if (i) strncat(allowed, ", ", sizeof allowed - strlen(allowed) - 1);
        strncat(allowed, names[i], sizeof allowed - strlen(allowed) - 1);
    }
    const char *s;
    PP_CHECK(cfg_scalar(c, n, key, "one word", allowed, 0, &s));
    for (int i = 0; names[i]; i++) {
        if (!strcmp(s, names[i])) {
            *out = i;
            return PP_OK;
        }
    }
    return cfg_err(c, n, key, "unknown value '%s' (allowed: %s)", PP_SHORT(s), allowed);
}

/* A malloc'd copy of a non-empty scalar. */
pp_status_t cfg_get_string(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                           const char *allowed, char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return cfg_err(c, n, key, "expected a string, got %s (allowed: %s)", cfg_node_what(n),
                       allowed);
    if (cfg_node_is_null(n) || !*cfg_node_text(n))
        return cfg_err(c, n, key, "no value given (allowed: %s)", allowed);
    char *s = strdup(cfg_node_text(n));
    PP_ALLOC_CHECK(s);
    free(*out);
    *out = s;
    return PP_OK;
}

void cfg_steps_free(pp_steps_cfg_t *st)
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
                               "device %d, step %d: expected an action, got %s (allowed: %s)", d, i,
                               cfg_node_what(item), PP_ACTION_FORMS);
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
        if (!c->set) { /* a place in a --set value would name no line of any file */
            out->list_line[d] = (int)l->start_mark.line + 1;
            out->list_col[d] = (int)l->start_mark.column + 1;
        }
        for (int i = 0; i < len; i++) {
            yaml_node_t *item = yaml_document_get_node(c->doc, l->data.sequence.items.start[i]);
            pp_step_text_t *t = &out->items[out->n++];
            *t = (pp_step_text_t){strdup(cfg_node_text(item)), d, i, (int)item->start_mark.line + 1,
                                  (int)item->start_mark.column + 1};
            if (!t->text) {
                cfg_steps_free(out);
                PP_FAIL(PP_ERR_NOMEM, "out of host memory reading schedule.steps");
            }
        }
    }
    return PP_OK;
}

/* `steps:` — a mapping device -> [actions], or a list of lists (one per device). */
pp_status_t cfg_set_steps(cfg_ctx_t *c, const yaml_node_t *n, const char *key)
{
    static const char *forms = "a mapping such as {0: [0F0, 0B0], 1: [1F0, 1B0]} or a list of "
                               "lists, one list of actions per device";
    const yaml_node_t *rows[PP_MAX_DEVICES];
    const yaml_node_t *keys[PP_MAX_DEVICES];
    int n_dev = 0;

    PP_CHECK(cfg_check_one_schedule(c, n, key, PP_CFG_STEPS));
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
                               l->type == YAML_SCALAR_NODE ? "one value" : cfg_node_what(l), forms);
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
            PP_CHECK(cfg_get_long(c, kn, key, 0, PP_MAX_DEVICES - 1, allowed, &d));
            if (rows[d])
                return cfg_err(
                    c, kn, key,
                    "device %ld is given twice, first at line %zu (allowed: each device once)", d,
                    (size_t)keys[d]->start_mark.line + 1);
            if (l->type != YAML_SEQUENCE_NODE)
                return cfg_err(c, l, key,
                               "device %ld: expected a list of actions, got %s (allowed: %s)", d,
                               l->type == YAML_SCALAR_NODE ? "one value" : cfg_node_what(l), forms);
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
                       cfg_node_is_null(n) ? "nothing" : "one value", forms);
    }
    if (n_dev == 0) return cfg_err(c, n, key, "no devices (allowed: %s)", forms);

    pp_steps_cfg_t steps;
    PP_CHECK(collect_steps(c, key, rows, n_dev, &steps));
    cfg_steps_free(&c->cfg->schedule.steps);
    c->cfg->schedule.steps = steps;
    c->cfg->schedule.kind = PP_SCHED_STEPS;
    free(c->cfg->schedule.csv_path);
    c->cfg->schedule.csv_path = NULL;
    return PP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing YAML text
 * ------------------------------------------------------------------------------------------- */

/* Parse one YAML document from text into doc (which the caller deletes when *loaded), with the
 * limits and words of input_yaml_load: `file:line:col: ...` for the file, `--set text: ...` for
 * an override, whose value is one scalar or flow list rather than a file. */
pp_status_t cfg_yaml_load_text(const cfg_ctx_t *c, const char *text, size_t len,
                               yaml_document_t *doc, int *loaded)
{
    input_yaml_error_t e;
    *loaded = 0;
    pp_status_t st = input_yaml_load(text, len, PP_YAML_MAX_DEPTH, doc, &e);
    if (st == PP_OK) {
        *loaded = 1;
        return PP_OK;
    }
    if (st == PP_ERR_NOMEM) {
        fprintf(stderr, "%s: %s\n", c->set ? c->set : c->file, e.message);
        return st;
    }
    if (!c->set) {
        fprintf(stderr, "%s:%zu:%zu: %s\n", c->file, e.line, e.col, e.message);
        return st;
    }
    if (e.problem == INPUT_YAML_INVALID)
        return cfg_err(c, NULL, NULL, "invalid value: %s (allowed: a YAML scalar or flow list)",
                       e.problem_text);
    if (e.problem == INPUT_YAML_SECOND)
        return cfg_err(c, NULL, NULL, "a second YAML document (allowed: one value)");
    return cfg_err(c, NULL, NULL, "%s", e.message);
}
