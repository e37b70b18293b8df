/*
 * textcheck.c — the JSON and XML checkers and file helpers of textcheck.h.
 */
#include "textcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a recursive-descent JSON checker -------------------------------------------------------- */

static int j_value(jp_t *j);

static void j_ws(jp_t *j)
{
    while (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r')
        j->s++;
}

/* A string; its text (escapes kept as written) goes to out when out != NULL. */
static int j_string(jp_t *j, char *out, size_t size)
{
    size_t n = 0;
    if (*j->s != '"') return 0;
    j->s++;
    for (;;) {
        unsigned char c = (unsigned char)*j->s;
        if (c == '"') break;
        if (c < 0x20) return 0; /* includes the end of the text */
        if (c == '\\') {
            j->s++;
            if (*j->s == 'u') {
                for (int i = 1; i <= 4; i++) {
                    char h = j->s[i];
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return 0;
                }
                j->s += 4;
            } else if (!strchr("\"\\/bfnrt", *j->s) || *j->s == '\0') {
                return 0;
            }
        }
        if (out && n + 1 < size) out[n++] = (char)c;
        j->s++;
    }
    if (out) out[n] = '\0';
    j->s++;
    return 1;
}

static int j_digits(jp_t *j)
{
    if (*j->s < '0' || *j->s > '9') return 0;
    while (*j->s >= '0' && *j->s <= '9')
        j->s++;
    return 1;
}

static int j_number(jp_t *j)
{
    if (*j->s == '-') j->s++;
    if (*j->s == '0')
        j->s++;
    else if (!j_digits(j))
        return 0;
    if (*j->s == '.') {
        j->s++;
        if (!j_digits(j)) return 0;
    }
    if (*j->s == 'e' || *j->s == 'E') {
        j->s++;
        if (*j->s == '+' || *j->s == '-') j->s++;
        if (!j_digits(j)) return 0;
    }
    return 1;
}

static int j_object(jp_t *j)
{
    j->s++; /* { */
    j->depth++;
    j_ws(j);
    if (*j->s == '}') {
        j->s++;
        j->depth--;
        return 1;
    }
    for (;;) {
        char key[40];
        j_ws(j);
        if (!j_string(j, key, sizeof key)) return 0;
        if (j->n_keys < J_MAX_KEYS) {
            strcpy(j->keys[j->n_keys], key);
            j->key_depth[j->n_keys++] = j->depth;
        }
        j_ws(j);
        if (*j->s++ != ':') return 0;
        if (!j_value(j)) return 0;
        j_ws(j);
        if (*j->s == ',') {
            j->s++;
            continue;
        }
        if (*j->s++ != '}') return 0;
        j->depth--;
        return 1;
    }
}

static int j_array(jp_t *j)
{
    j->s++; /* [ */
    j->depth++;
    j_ws(j);
    if (*j->s == ']') {
        j->s++;
        j->depth--;
        return 1;
    }
    for (;;) {
        if (!j_value(j)) return 0;
        j_ws(j);
        if (*j->s == ',') {
            j->s++;
            continue;
        }
        if (*j->s++ != ']') return 0;
        j->depth--;
        return 1;
    }
}

static int j_value(jp_t *j)
{
    j_ws(j);
    if (j->depth > 64) return 0;
    switch (*j->s) {
    case '{': return j_object(j);
    case '[': return j_array(j);
    case '"': return j_string(j, NULL, 0);
    case 't': return strncmp(j->s, "true", 4) == 0 ? (j->s += 4, 1) : 0;
    case 'f': return strncmp(j->s, "false", 5) == 0 ? (j->s += 5, 1) : 0;
    case 'n': return strncmp(j->s, "null", 4) == 0 ? (j->s += 4, 1) : 0;
    default: return j_number(j);
    }
}

/* 1 when `text` is exactly one JSON value (surrounded by whitespace only). */
int json_valid(const char *text, jp_t *j)
{
    memset(j, 0, sizeof *j);
    j->s = text;
    if (!j_value(j)) return 0;
    j_ws(j);
    return *j->s == '\0';
}

/* ---- a small XML well-formedness checker ----------------------------------------------------- */

static int x_name_start(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':';
}
static int x_name_char(char c)
{
    return x_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static int x_name(const char **p, char *out, size_t size)
{
    size_t n = 0;
    if (!x_name_start(**p)) return 0;
    while (x_name_char(**p)) {
        if (n + 1 < size) out[n++] = **p;
        (*p)++;
    }
    out[n] = '\0';
    return 1;
}

/* Checks the entity reference at *p ('&'); advances past it. */
static int x_entity(const char **p)
{
    const char *q = *p + 1;
    if (*q == '#') {
        q++;
        int hex = *q == 'x';
        if (hex) q++;
        const char *d = q;
        while ((*q >= '0' && *q <= '9') ||
               (hex && ((*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F'))))
            q++;
        if (q == d || *q != ';') return 0;
    } else {
        static const char *const known[] = {"amp;", "lt;", "gt;", "quot;", "apos;"};
        int ok = 0;
        for (int i = 0; i < 5 && !ok; i++)
            if (strncmp(q, known[i], strlen(known[i])) == 0) {
                q += strlen(known[i]) - 1;
                ok = 1;
            }
        if (!ok) return 0;
    }
    *p = q + 1;
    return 1;
}

static int x_skip_to(const char **p, const char *end)
{
    const char *q = strstr(*p, end);
    if (!q) return 0;
    *p = q + strlen(end);
    return 1;
}

/* 1 when `text` is a well-formed XML document with one root element. */
int xml_wellformed(const char *text, xc_t *x)
{
    char stack[64][32];
    int depth = 0, roots = 0;
    const char *p = text;
    memset(x, 0, sizeof *x);
    while (*p) {
        if (*p != '<') {
            if (*p == '&') {
                if (!x_entity(&p)) return 0;
                continue;
            }
            if (depth == 0 && !(*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) return 0;
            p++;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            if (!x_skip_to(&p, "-->")) return 0;
        } else if (strncmp(p, "<![CDATA[", 9) == 0) {
            if (depth == 0 || !x_skip_to(&p, "]]>")) return 0;
        } else if (strncmp(p, "<?", 2) == 0) {
            if (!x_skip_to(&p, "?>")) return 0;
        } else if (strncmp(p, "<!", 2) == 0) {
            if (depth > 0 || !x_skip_to(&p, ">")) return 0;
        } else if (p[1] == '/') {
            char name[32];
            p += 2;
            if (!x_name(&p, name, sizeof name)) return 0;
            while (*p == ' ' || *p == '\n')
                p++;
            if (*p++ != '>') return 0;
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0) return 0;
            depth--;
        } else {
            char name[32], attr[32], cls[64] = "";
            p++;
            if (!x_name(&p, name, sizeof name)) return 0;
            if (depth == 0 && ++roots > 1) return 0;
            for (;;) {
                int ws = 0;
                while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
                    p++, ws = 1;
                if (*p == '/' || *p == '>') break;
                if (!ws || !x_name(&p, attr, sizeof attr)) return 0;
                if (*p++ != '=') return 0;
                char quote = *p++;
                if (quote != '"' && quote != '\'') return 0;
                const char *v = p;
                while (*p && *p != quote) {
                    if (*p == '<') return 0;
                    if (*p == '&') {
                        if (!x_entity(&p)) return 0;
                    } else {
                        p++;
                    }
                }
                if (*p != quote) return 0;
                if (strcmp(attr, "class") == 0) {
                    size_t n = (size_t)(p - v) < sizeof cls - 1 ? (size_t)(p - v) : sizeof cls - 1;
                    memcpy(cls, v, n);
                    cls[n] = '\0';
                }
                if (strcmp(attr, "xmlns") == 0 && strncmp(v, "http://www.w3.org/2000/svg", 26) == 0)
                    x->has_xmlns = 1;
                p++;
            }
            if (strcmp(name, "rect") == 0 && strncmp(cls, "op ", 3) == 0) x->n_op_rects++;
            if (*p == '/') {
                if (p[1] != '>') return 0;
                p += 2;
            } else {
                p++;
                if (depth == 64) return 0;
                snprintf(stack[depth++], sizeof stack[0], "%s", name);
            }
        }
    }
    return depth == 0 && roots == 1;
}

/* ---- file helpers ---------------------------------------------------------------------------- */

char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A fresh temporary file name ending in `suffix`. */
void temp_path(char *buf, size_t size, const char *suffix)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, size, "%s/ppsched_test_XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
    int fd = mkstemps(buf, (int)strlen(suffix));
    if (fd >= 0) close(fd);
}

int count_substr(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}
