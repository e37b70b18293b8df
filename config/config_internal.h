/*
 * config_internal.h — what config.c, config_yaml.c and config_keys.c share, and nothing outside
 * them uses: where a value is being read from, the message helpers, the scalar readers and the
 * steps of loading. Every function prints its one-line message and returns PP_ERR_INPUT on a
 * problem.
 */
#ifndef PP_CONFIG_INTERNAL_H
#define PP_CONFIG_INTERNAL_H

#include "config.h"

#include <stdint.h>
#include <yaml.h>

/* Where a value is being read from: the file (doc set) or one `--set` override. */
typedef struct cfg_ctx {
    pp_config_t *cfg;
    const char *file;     /* the YAML file's name as given (messages, folder of csv paths) */
    const char *set;      /* the override being applied, or NULL while reading the file */
    yaml_document_t *doc; /* the document the nodes belong to */
    const char *flag;     /* the override's command-line flag for messages ("--set", "--sweep") */
    const char *shown;    /* the override as messages name it after the flag: its text, or only
                           * the value for a flag that stands for one key ("--gpu h1000") */
} cfg_ctx_t;

/* The names of the keys the resolve step blames (config.c). */
extern const char *const cfg_key_names[PP_CFG_KEY_COUNT];

/* ---- messages (config.c, config_yaml.c) ---- */

/* `file:line:col: key: ...` for a node of the file, `--set text: ...` for an override. */
pp_status_t cfg_err(const cfg_ctx_t *c, const yaml_node_t *node, const char *key, const char *fmt,
                    ...);
/* Remember where key k was set (the value node's place, or the override's text). */
void cfg_mark(const cfg_ctx_t *c, int k, const yaml_node_t *node, const char *key);
int cfg_is_set(const pp_config_t *cfg, int k);
/* Where the value of key k came from, for a message that names no line: the `--set` text of the
 * override that set it, else the file's name. */
const char *cfg_source(const pp_config_t *cfg, int k);
/* The key to blame for a problem: the first of the keys (the list ends with -1) set by a --set
 * override, else the first the input set, else `fallback`. */
int cfg_pick(const pp_config_t *cfg, int fallback, ...);

/* ---- scalars (config_yaml.c) ---- */

const char *cfg_node_text(const yaml_node_t *n);
int cfg_node_is_null(const yaml_node_t *n);
const char *cfg_node_what(const yaml_node_t *n);
/* The text of a value that must be one scalar (`what`: "an integer", "one word", ...), or the
 * error naming the place and `allowed`: a list or mapping, nothing, or (when `plain` is set) a
 * quoted string. */
pp_status_t cfg_scalar(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, const char *what,
                       const char *allowed, int plain, const char **text);
pp_status_t cfg_get_long(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, long lo,
                         long hi, const char *allowed, long *out);
pp_status_t cfg_get_double(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, double lo,
                           double hi, int lo_open, double *out);
/* cfg_get_double whose messages name `allowed` (a range with a gap, "0, or 0.001..1e6"). */
pp_status_t cfg_get_double_in(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, double lo,
                              double hi, int lo_open, const char *allowed, double *out);
pp_status_t cfg_get_u64(const cfg_ctx_t *c, const yaml_node_t *n, const char *key, uint64_t *out);
pp_status_t cfg_get_enum(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                         const char *const *names, int *out);
pp_status_t cfg_get_string(const cfg_ctx_t *c, const yaml_node_t *n, const char *key,
                           const char *allowed, char **out);

/* ---- schedule.steps (config_yaml.c) ---- */

pp_status_t cfg_set_steps(cfg_ctx_t *c, const yaml_node_t *n, const char *key);
void cfg_steps_free(pp_steps_cfg_t *st);

/* ---- loading (config_yaml.c, config_keys.c) ---- */

/* Parse one YAML document from text into doc (deleted by the caller when *loaded). */
pp_status_t cfg_yaml_load_text(const cfg_ctx_t *c, const char *text, size_t len,
                               yaml_document_t *doc, int *loaded);
/* At most one of schedule.kind, steps and csv. */
pp_status_t cfg_check_one_schedule(cfg_ctx_t *c, const yaml_node_t *n, const char *key, int k);
/* Apply a whole document / one `section.key=value` override to c->cfg / cfg. */
pp_status_t cfg_apply_root(cfg_ctx_t *c, const yaml_node_t *root);
pp_status_t cfg_apply_set(pp_config_t *cfg, const char *set);

#endif /* PP_CONFIG_INTERNAL_H */
