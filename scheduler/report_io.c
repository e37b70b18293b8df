/*
 * report_io.c — outputs of the report writers (see report_io.h). The first write error's errno
 * is kept in the pp_out_t, so the message at out_close names the real cause even when later
 * calls changed errno.
 */
#include "report_io.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

pp_status_t out_open(pp_out_t *o, const char *path, const char *what)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    o->what = what;
    o->f = fopen(path, "w");
    if (!o->f) {
        fprintf(stderr, "%s: cannot write %s: %s\n", path, what, strerror(errno));
        return PP_ERR_IO;
    }
    o->owned = 1;
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

pp_status_t out_close(pp_out_t *o)
{
    if (!o->f) return PP_OK;
    errno = 0;
    note(o, fflush(o->f) != 0 || ferror(o->f));
    if (o->owned) {
        errno = 0;
        note(o, fclose(o->f) != 0);
    }
    o->f = NULL;
    if (!o->err) return PP_OK;
    fprintf(stderr, "%s: writing %s failed: %s\n", o->path ? o->path : "output",
            o->what ? o->what : "the report", strerror(o->err));
    return PP_ERR_IO;
}
