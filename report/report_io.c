/*
 * report_io.c — outputs of the report writers (see report_io.h). The first write error's errno
 * is kept in the pp_out_t, so the message at out_close names the real cause even when later
 * calls changed errno. A regular file (or a new one) goes to a temporary file beside it (mkstemp,
 * the mode a new file gets under the umask) and is renamed onto its name at out_close only after
 * a clean close; on any error the temporary file is removed. Anything else that is not a folder
 * (/dev/stdout, a FIFO, a symlink) is written in place: renaming onto it would replace it.
 */
#include "report_io.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A temporary file beside `path`, open for writing, with the mode a new file would get. */
static FILE *open_temp(const char *path, char **tmp)
{
    size_t n = strlen(path) + 16;
    *tmp = malloc(n);
    if (!*tmp) return NULL;
    snprintf(*tmp, n, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(*tmp);
    if (fd < 0) {
        int e = errno;
        free(*tmp);
        *tmp = NULL;
        errno = e;
        return NULL;
    }
    mode_t mask = umask(0);
    umask(mask);
    (void)fchmod(fd, 0666 & ~mask);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        errno = e;
    }
    return f;
}

pp_status_t out_open(pp_out_t *o, const char *path, const char *what)
{
    struct stat sb;
    memset(o, 0, sizeof *o);
    o->path = path;
    o->what = what;
    errno = 0;
    int exists = lstat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode))
        errno = EISDIR;
    else if (exists && !S_ISREG(sb.st_mode))
        o->f = fopen(path, "w"); /* a device, a FIFO, a symlink: written in place */
    else
        o->f = open_temp(path, &o->tmp);
    if (!o->f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", path, what, strerror(errno ? errno : ENOMEM));
        return PP_ERR_IO;
    }
    o->owned = 1;
    return PP_OK;
}

pp_status_t out_probe(const char *path, const char *what)
{
    pp_out_t o;
    PP_CHECK(out_open(&o, path, what));
    fclose(o.f);
    if (o.tmp) unlink(o.tmp);
    free(o.tmp);
    return PP_OK;
}

void out_wrap(pp_out_t *o, FILE *f, const char *name, const char *what)
{
    memset(o, 0, sizeof *o);
    o->f = f;
    o->path = name;
    o->what = what;
}

/* Remember the first failure. */
static void note(pp_out_t *o, int failed)
{
    if (failed && !o->err) o->err = errno ? errno : EIO;
}

void out_printf(pp_out_t *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    note(o, vfprintf(o->f, fmt, ap) < 0);
    va_end(ap);
}

void out_puts(pp_out_t *o, const char *s)
{
    errno = 0;
    note(o, fputs(s, o->f) == EOF);
}

const char *out_cell(char *buf, size_t size, int known, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (known)
        vsnprintf(buf, size, fmt, ap);
    else
        snprintf(buf, size, "-");
    va_end(ap);
    return buf;
}

void out_json_str(pp_out_t *o, const char *s)
{
    out_puts(o, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': out_puts(o, "\\\""); break;
        case '\\': out_puts(o, "\\\\"); break;
        case '\n': out_puts(o, "\\n"); break;
        case '\r': out_puts(o, "\\r"); break;
        case '\t': out_puts(o, "\\t"); break;
        default:
            if (*p < 0x20)
                out_printf(o, "\\u%04x", *p);
            else
                out_printf(o, "%c", *p);
        }
    }
    out_puts(o, "\"");
}

void out_csv_str(pp_out_t *o, const char *s)
{
    s = s ? s : "";
    if (!s[strcspn(s, ",\"\r\n")] && s[0] != ' ' && (!s[0] || s[strlen(s) - 1] != ' ')) {
        out_puts(o, s);
        return;
    }
    out_puts(o, "\"");
    for (; *s; s++)
        out_puts(o, *s == '"' ? "\"\"" : (char[2]){*s, 0});
    out_puts(o, "\"");
}

const char *out_file_name(const char *name, char *buf, size_t size)
{
    size_t n = 0;
    if (!size) return buf;
    for (const char *p = name ? name : ""; *p && n + 1 < size; p++) {
        char c = *p;
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || (c == '.' && n > 0);
        buf[n++] = keep ? c : c == '=' ? '-' : '_';
    }
    buf[n] = '\0';
    if (!n) snprintf(buf, size, "run");
    return buf;
}

void out_json_num(pp_out_t *o, double x)
{
    char buf[40];
    if (!isfinite(x)) {
        out_puts(o, "null");
        return;
    }
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    out_puts(o, buf);
}

void out_json_key_num(pp_out_t *o, const char *key, double x)
{
    out_puts(o, ",\"");
    out_puts(o, key);
    out_puts(o, "\":");
    out_json_num(o, x);
}

void out_xml(pp_out_t *o, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': out_puts(o, "&amp;"); break;
        case '<': out_puts(o, "&lt;"); break;
        case '>': out_puts(o, "&gt;"); break;
        case '"': out_puts(o, "&quot;"); break;
        case '\'': out_puts(o, "&apos;"); break;
        default:
            if (*p >= 0x20 || *p == '\t' || *p == '\n') out_printf(o, "%c", *p);
        }
    }
}

void out_svg_chart_head(pp_out_t *o, int width, int height, int x, const char *title,
                        const char *subtitle)
{
    out_printf(o,
               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
               width, height, width, height);
    out_printf(o, "<text x=\"%d\" y=\"26\" font-size=\"16\" font-weight=\"bold\">", x);
    out_xml(o, title);
    out_printf(o, "</text>\n<text x=\"%d\" y=\"44\" fill=\"#555\">%s</text>\n", x, subtitle);
}

pp_status_t out_close(pp_out_t *o)
{
    if (!o->f) return PP_OK;
    errno = 0;
    note(o, fflush(o->f) != 0 || ferror(o->f));
    if (o->owned) {
        errno = 0;
        note(o, fclose(o->f) != 0);
        if (o->tmp && !o->err) {
            errno = 0;
            note(o, rename(o->tmp, o->path) != 0);
        }
        if (o->tmp && o->err) unlink(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
    }
    o->f = NULL;
    if (!o->err) return PP_OK;
    fprintf(stderr, "%s: writing %s failed: %s\n", o->path ? o->path : "output",
            o->what ? o->what : "the report", strerror(o->err));
    return PP_ERR_IO;
}
