/*
 * report_io.h — what every report writer shares: an output (a file opened here, or a stream the
 * caller owns), printing to it, escaping text for JSON and XML, and closing it with the write
 * errors reported.
 *
 * Contract: out_open prints "PATH: cannot write WHAT: reason" and returns PP_ERR_IO when the file
 * cannot be opened. out_printf and the escapers never fail on their own: the first write error is
 * remembered and out_close reports it ("PATH: writing WHAT failed: reason", PP_ERR_IO), also for a
 * caller's stream (which it flushes but does not close). Every pp_out_t that was opened or wrapped
 * goes through out_close exactly once. A regular file is written as a temporary file beside it
 * (PATH.tmp-XXXXXX) and renamed onto PATH only when every write and the close succeeded: a failed
 * write leaves no truncated file and keeps a good earlier one. A device, FIFO or symlink is
 * written in place. Plain C, no state beyond the
 * pp_out_t.
 */
#ifndef PP_REPORT_IO_H
#define PP_REPORT_IO_H

#include "common/pp_status.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_out {
    FILE *f;
    const char *path; /* the file, or the stream's name, for messages */
    const char *what; /* "the trace", "the SVG chart", ... for messages */
    int owned;        /* 1: opened by out_open, closed by out_close */
    char *tmp;        /* the temporary file renamed onto path (owned outputs) */
    int err;          /* errno of the first failed write, 0 while none */
} pp_out_t;

/* Open `path` for writing `what`. */
pp_status_t out_open(pp_out_t *o, const char *path, const char *what);

/* Whether `path` can be written, tried before a long run: a temporary file is made beside it
 * and removed. Prints "PATH: cannot write WHAT: reason" and returns PP_ERR_IO when not. */
pp_status_t out_probe(const char *path, const char *what);

/* A CSV field: as is when it needs no quotes, else in double quotes with quotes doubled. */
void out_csv_str(pp_out_t *o, const char *s);

/* `name` as one file name, the same way for every file a report writes: letters, digits, '.',
 * '-' and '_' kept, '=' written '-', anything else (a '/', a space) '_', and a leading '.'
 * written '_' (no hidden file, no '..'); an empty name is "run". Returns buf. */
const char *out_file_name(const char *name, char *buf, size_t size);

/* Write `what` to a stream the caller owns (stdout, a test's temporary file). */
void out_wrap(pp_out_t *o, FILE *f, const char *name, const char *what);

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void out_printf(pp_out_t *o, const char *fmt, ...);

void out_puts(pp_out_t *o, const char *s);

/* A table cell: fmt's text in buf when `known`, else "-", the way every table prints a figure the
 * run does not know. Returns buf. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
const char *
out_cell(char *buf, size_t size, int known, const char *fmt, ...);

/* A JSON string, quoted and escaped. */
void out_json_str(pp_out_t *o, const char *s);

/* A JSON number that reads back as the same double (shortest of %.15g/%.16g/%.17g), or null. */
void out_json_num(pp_out_t *o, double x);

/* `,"key":` then out_json_num(x): one more member of an object already opened. */
void out_json_key_num(pp_out_t *o, const char *key, double x);

/* Text for XML character data or an attribute value (& < > " ' escaped, control characters other
 * than tab and newline left out: XML 1.0 does not allow them). */
void out_xml(pp_out_t *o, const char *s);

/* The head of a standalone SVG 1.1 chart (report_plot.c, report_bars.c): the XML prolog, the
 * <svg> element, width x height in sans-serif 12, a white background, `title` (escaped) in bold 16
 * at (x, 26) and `subtitle` (written as it is) in grey at (x, 44). The caller closes the <svg>. */
void out_svg_chart_head(pp_out_t *o, int width, int height, int x, const char *title,
                        const char *subtitle);

/* Flush and (for a file opened here) close; report the first write error. */
pp_status_t out_close(pp_out_t *o);

#ifdef __cplusplus
}
#endif

#endif /* PP_REPORT_IO_H */
