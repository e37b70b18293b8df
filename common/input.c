/*
 * input.c — reading user files with limits (see input.h). A file is opened non-blocking, so a
 * FIFO is refused by fstat instead of waiting for a writer, and read to at most max_bytes + 1
 * bytes, so a device that never ends is refused at the limit. The YAML check walks libyaml's
 * events and stops at the first collection past the depth limit: the scanner never runs far
 * beyond it, which keeps libyaml's cost on deeply nested text (quadratic in the depth) small.
 * input_yaml_load runs that check before it builds a document, so every YAML reader (the config,
 * a profile) has the same limits and says the same words about them.
 */
#include "input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

/* What a non-regular file is, for the message. */
static const char *file_kind(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* Read fd into a malloc'd buffer; more than max bytes is an error. The buffer grows to at most
 * max + 2 bytes: one byte past the limit shows the file is too large, one holds the NUL. */
static pp_status_t read_fd(int fd, const char *path, size_t max, char **text, size_t *len,
                           char *why, size_t why_size)
{
    size_t cap = 0, n = 0;
    char *buf = NULL;
    for (;;) {
        if (n + 1 >= cap) {
            size_t want = cap ? 2 * cap : 16384;
            if (want > max + 2) want = max + 2;
            char *t = realloc(buf, want);
            if (!t) {
                free(buf);
                PP_FAIL(PP_ERR_NOMEM, "out of host memory reading %s", path);
            }
            buf = t;
            cap = want;
        }
        ssize_t got = read(fd, buf + n, cap - 1 - n);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) break;
            snprintf(why, why_size, "%s", strerror(errno));
            free(buf);
            return PP_ERR_INPUT;
        }
        n += (size_t)got;
        if (n > max) {
            snprintf(why, why_size, "larger than %zu bytes (allowed: a file of at most %zu bytes)",
                     max, max);
            free(buf);
            return PP_ERR_INPUT;
        }
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return PP_OK;
}

/* Open path for reading without waiting (a FIFO with no writer), and check it is a regular file
 * of at most max_bytes by its size. Returns the descriptor, blocking again, or -1 with why. */
static int open_regular(const char *path, size_t max_bytes, char *why, size_t why_size)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_size, "%s", strerror(errno));
        return -1;
    }
    int bad = fstat(fd, &sb) != 0;
    if (bad || !S_ISREG(sb.st_mode)) {
        snprintf(why, why_size, "%s%s", bad ? strerror(errno) : file_kind(sb.st_mode),
                 bad ? "" : " (allowed: a regular file)");
        close(fd);
        return -1;
    }
    if ((unsigned long long)sb.st_size > (unsigned long long)max_bytes) {
        snprintf(why, why_size, "larger than %zu bytes (allowed: a file of at most %zu bytes)",
                 max_bytes, max_bytes);
        close(fd);
        return -1;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

pp_status_t input_read_file(const char *path, size_t max_bytes, char **text, size_t *len, char *why,
                            size_t why_size)
{
    *text = NULL;
    *len = 0;
    int fd = open_regular(path, max_bytes, why, why_size);
    if (fd < 0) return PP_ERR_INPUT;
    /* read to the limit all the same: the file may grow after fstat */
    pp_status_t st = read_fd(fd, path, max_bytes, text, len, why, why_size);
    close(fd);
    return st;
}

pp_status_t input_check_file(const char *path, size_t max_bytes, char *why, size_t why_size)
{
    int fd = open_regular(path, max_bytes, why, why_size);
    if (fd < 0) return PP_ERR_INPUT;
    close(fd);
    return PP_OK;
}

/* The explicit tag of a node event, or NULL. */
static const char *event_tag(const yaml_event_t *ev)
{
    const yaml_char_t *t = NULL;
    if (ev->type == YAML_SCALAR_EVENT) t = ev->data.scalar.tag;
    if (ev->type == YAML_SEQUENCE_START_EVENT) t = ev->data.sequence_start.tag;
    if (ev->type == YAML_MAPPING_START_EVENT) t = ev->data.mapping_start.tag;
    return (const char *)t;
}

input_yaml_problem_t input_yaml_check(const char *text, size_t len, int max_depth,
                                      input_yaml_check_t *out)
{
    static const char core[] = "tag:yaml.org,2002:";
    yaml_parser_t p;
    yaml_event_t ev;
    int depth = 0, done = 0;
    memset(out, 0, sizeof *out);
    out->problem = INPUT_YAML_INVALID;
    if (!yaml_parser_initialize(&p)) return out->problem;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    while (!done && yaml_parser_parse(&p, &ev)) {
        yaml_event_type_t t = ev.type;
        const char *tag = event_tag(&ev);
        depth += (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) -
                 (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT);
        out->line = ev.start_mark.line + 1;
        out->col = ev.start_mark.column + 1;
        done = 1;
        if (depth > max_depth) {
            out->problem = INPUT_YAML_DEEP;
        } else if (tag) {
            out->problem = INPUT_YAML_TAG;
            int core_tag = !strncmp(tag, core, sizeof core - 1);
            snprintf(out->tag, sizeof out->tag, "%s%s", core_tag ? "!!" : "",
                     tag + (core_tag ? sizeof core - 1 : 0));
        } else if (t == YAML_STREAM_END_EVENT) {
            out->problem = INPUT_YAML_OK;
        } else {
            done = 0;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return out->problem;
}

const char *input_shorten(const char *s, char *buf, size_t size)
{
    size_t n = strlen(s), keep = n > PP_SHORT_MAX ? PP_SHORT_MAX : n, i;
    if (keep + 1 > size) keep = size ? size - 1 : 0;
    for (i = 0; i < keep; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (size) buf[i] = '\0';
    if (n > keep && size > keep) snprintf(buf + keep, size - keep, "... (%zu bytes)", n);
    return buf;
}

/* 1-based line and column of byte `off` of text (libyaml's reader errors carry only an offset). */
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

/* err from what input_yaml_check found (DEEP or TAG). */
static void check_error(const input_yaml_check_t *k, int max_depth, input_yaml_error_t *err)
{
    err->problem = k->problem;
    err->line = k->line;
    err->col = k->col;
    if (k->problem == INPUT_YAML_DEEP)
        snprintf(err->message, sizeof err->message,
                 "nested deeper than %d levels (allowed: at most %d)", max_depth, max_depth);
    else
        snprintf(err->message, sizeof err->message,
                 "explicit tag %s (allowed: values without tags; quote a value to make it text)",
                 k->tag);
}

/* err from libyaml's problem: PP_ERR_NOMEM or PP_ERR_INPUT. */
static pp_status_t parser_error(const yaml_parser_t *p, const char *text, size_t len,
                                input_yaml_error_t *err)
{
    if (p->error == YAML_MEMORY_ERROR) {
        snprintf(err->message, sizeof err->message, "out of host memory parsing YAML");
        return PP_ERR_NOMEM;
    }
    err->problem = INPUT_YAML_INVALID;
    if (p->error == YAML_READER_ERROR) {
        offset_to_mark(text, len, p->problem_offset, &err->line, &err->col);
    } else {
        err->line = (size_t)p->problem_mark.line + 1;
        err->col = (size_t)p->problem_mark.column + 1;
    }
    snprintf(err->problem_text, sizeof err->problem_text, "%s",
             p->problem ? p->problem : "unreadable input");
    if (p->context)
        snprintf(err->message, sizeof err->message, "invalid YAML: %s (%s at line %zu)",
                 err->problem_text, p->context, (size_t)p->context_mark.line + 1);
    else
        snprintf(err->message, sizeof err->message, "invalid YAML: %s", err->problem_text);
    return PP_ERR_INPUT;
}

pp_status_t input_yaml_load(const char *text, size_t len, int max_depth, yaml_document_t *doc,
                            input_yaml_error_t *err)
{
    yaml_parser_t p;
    yaml_document_t extra;
    input_yaml_check_t k;
    memset(err, 0, sizeof *err);
    input_yaml_problem_t found = input_yaml_check(text, len, max_depth, &k);
    if (found == INPUT_YAML_DEEP || found == INPUT_YAML_TAG) {
        check_error(&k, max_depth, err);
        return PP_ERR_INPUT;
    } /* ok, or invalid YAML: the load below says where */
    if (!yaml_parser_initialize(&p)) {
        snprintf(err->message, sizeof err->message, "out of host memory starting the YAML parser");
        return PP_ERR_NOMEM;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    pp_status_t st = PP_OK;
    if (!yaml_parser_load(&p, doc)) {
        st = parser_error(&p, text, len, err);
    } else if (!yaml_parser_load(&p, &extra)) {
        st = parser_error(&p, text, len, err);
        yaml_document_delete(doc);
    } else {
        if (yaml_document_get_root_node(&extra)) {
            err->problem = INPUT_YAML_SECOND;
            err->line = (size_t)extra.start_mark.line + 1;
            err->col = (size_t)extra.start_mark.column + 1;
            snprintf(err->message, sizeof err->message,
                     "a second YAML document starts here (allowed: one document per file)");
            st = PP_ERR_INPUT;
            yaml_document_delete(doc);
        }
        yaml_document_delete(&extra);
    }
    yaml_parser_delete(&p);
    return st;
}
