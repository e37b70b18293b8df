/*
 * input.h — reading the files a user names (the YAML config, a CSV schedule) with limits, and
 * showing user text in messages.
 *
 * Contract: input_read_file refuses what is not a regular file (a FIFO would block, /dev/zero
 * never ends) and any file over `max_bytes`, returning PP_ERR_INPUT with the reason; on success
 * *text is a malloc'd, NUL-terminated copy the caller frees. input_check_file makes the same
 * checks without reading. input_yaml_check checks the nesting and tags of a YAML text on libyaml's
 * event stream, before any document is built, and stops at the first problem; input_yaml_load
 * does that, then loads the one document, and words every problem as all YAML readers print it
 * (the config, a profile). input_shorten makes a user's value fit in a message. Plain C, no CUDA.
 */
#ifndef PP_INPUT_H
#define PP_INPUT_H

#include "pp_status.h"

#include <stddef.h>

#define PP_INPUT_MAX_BYTES (16u << 20) /* the largest config, profile or CSV read: 16 MiB */
#define PP_YAML_MAX_DEPTH  32          /* the deepest YAML nesting a config or profile has */
#define PP_SHORT_MAX       64          /* input_shorten: at most this many bytes of the value */

/* Read the regular file `path` whole (at most max_bytes). PP_ERR_INPUT leaves why the file was
 * refused in why[why_size] ("No such file or directory", "a FIFO (allowed: a regular file)",
 * ...) for the caller to print after its place; PP_ERR_NOMEM is printed here. */
pp_status_t input_read_file(const char *path, size_t max_bytes, char **text, size_t *len, char *why,
                            size_t why_size);

/* input_read_file's checks (a regular file of at most max_bytes) without reading it: for a path
 * a reader opens later, checked where the place that named it is known. */
pp_status_t input_check_file(const char *path, size_t max_bytes, char *why, size_t why_size);

/* What input_yaml_check found: the first collection nested past the limit, or the first node
 * with an explicit tag (`!!str 5`, `!foo`): tags are refused rather than half honoured, since the
 * loader gives an untagged scalar the same tag as `!!str`. */
typedef enum input_yaml_problem {
    INPUT_YAML_OK = 0,
    INPUT_YAML_DEEP,    /* nested deeper than max_depth */
    INPUT_YAML_TAG,     /* an explicit tag */
    INPUT_YAML_INVALID, /* libyaml failed first (the loader reports it) */
    INPUT_YAML_SECOND   /* input_yaml_load: a second document follows the first */
} input_yaml_problem_t;

typedef struct input_yaml_check {
    input_yaml_problem_t problem;
    size_t line, col; /* 1-based place of the node */
    char tag[64];     /* INPUT_YAML_TAG: the tag, `tag:yaml.org,2002:` written `!!` */
} input_yaml_check_t;

/* Walk the events of text[0..len) and stop at the first problem; returns out->problem. */
input_yaml_problem_t input_yaml_check(const char *text, size_t len, int max_depth,
                                      input_yaml_check_t *out);

/* What input_yaml_load refused, where, and the words every YAML reader prints after
 * `name:line:col: `. */
typedef struct input_yaml_error {
    input_yaml_problem_t problem; /* DEEP, TAG, INVALID (libyaml's) or SECOND */
    size_t line, col;             /* 1-based place; 0 for out of memory */
    char problem_text[192];       /* INVALID: libyaml's own words, for a reader that rewords them */
    char message[320];            /* e.g. "nested deeper than 32 levels (allowed: at most 32)" */
} input_yaml_error_t;

struct yaml_document_s;

/* Load text[0..len) as one YAML document into *doc: nesting past max_depth and explicit tags
 * refused first (input_yaml_check), then libyaml's problems ("invalid YAML: ...") and a second
 * document. PP_OK: *doc holds the document, which the caller deletes. PP_ERR_INPUT, or
 * PP_ERR_NOMEM: nothing to delete, and *err says what (and where) for the caller to print after
 * its own name; nothing is printed here. */
pp_status_t input_yaml_load(const char *text, size_t len, int max_depth,
                            struct yaml_document_s *doc, input_yaml_error_t *err);

/* `s` for a message, in buf (size >= PP_SHORT_MAX + 32): control characters as '?', and a value
 * longer than PP_SHORT_MAX bytes cut with "... (N bytes)". Returns buf. */
const char *input_shorten(const char *s, char *buf, size_t size);

/* input_shorten into a buffer that lives until the end of the enclosing block. */
#define PP_SHORT(s) input_shorten((s), (char[PP_SHORT_MAX + 32]){0}, PP_SHORT_MAX + 32)

#endif /* PP_INPUT_H */
