/*
 * input.c — reading user files with limits (see input.h). A file is opened non-blocking, so a
 * FIFO is refused by fstat instead of waiting for a writer, and read to at most max_bytes + 1
 * bytes, so a device that never ends is refused at the limit. The YAML check walks libyaml's
 * events and stops at the first collection past the depth limit: the scanner never runs far
 * beyond it, which keeps libyaml's cost on deeply nested text (quadratic in the depth) small.
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

pp_status_t input_read_file(const char *path, size_t max_bytes, char **text, size_t *len, char *why,
                            size_t why_size)
{
    struct stat sb;
    *text = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_size, "%s", strerror(errno));
        return PP_ERR_INPUT;
    }
    int bad = fstat(fd, &sb) != 0;
    if (bad || !S_ISREG(sb.st_mode)) {
        snprintf(why, why_size, "%s%s", bad ? strerror(errno) : file_kind(sb.st_mode),
                 bad ? "" : " (allowed: a regular file)");
        close(fd);
        return PP_ERR_INPUT;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    pp_status_t st = read_fd(fd, path, max_bytes, text, len, why, why_size);
    close(fd);
    return st;
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
