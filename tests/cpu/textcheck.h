/*
 * textcheck.h — checkers for what the report writers produce, shared by the CPU tests: a
 * recursive-descent JSON validator that records the keys in the order met, an XML
 * well-formedness checker that counts the boxes of compute ops in an SVG, and file helpers.
 *
 * The checkers accept exactly their grammar (RFC 8259 JSON; XML 1.0 elements, attributes in
 * quotes, the five entities and numeric references) and return 0 on the first thing outside it.
 */
#ifndef PP_TEST_TEXTCHECK_H
#define PP_TEST_TEXTCHECK_H

#include <stddef.h>

#define J_MAX_KEYS 256

typedef struct jp {
    const char *s;
    int depth; /* nesting of objects and arrays */
    int n_keys;
    char keys[J_MAX_KEYS][40]; /* keys in the order met */
    int key_depth[J_MAX_KEYS];
} jp_t;

/* 1 when `text` is one JSON value (with nothing but white space after it); j records its keys. */
int json_valid(const char *text, jp_t *j);

typedef struct xc {
    const char *s;
    int n_op_rects; /* <rect class="op ..."> elements */
    int has_xmlns;
} xc_t;

/* 1 when `text` is one well-formed XML element (after an optional declaration). */
int xml_wellformed(const char *text, xc_t *x);

/* The whole file as a NUL-terminated string (the caller frees it), or NULL. */
char *read_all(const char *path);
/* A fresh temporary file name ending in `suffix` (the file is created empty). */
void temp_path(char *buf, size_t size, const char *suffix);
/* How many times `needle` occurs in s (overlaps counted). */
int count_substr(const char *s, const char *needle);

#endif /* PP_TEST_TEXTCHECK_H */
