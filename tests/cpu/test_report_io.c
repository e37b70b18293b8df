/*
 * test_report_io.c — the report writers' shared output (report_io.h): JSON and XML escaping of
 * every byte class, numbers that read back as the same double, and the write errors: a file that
 * cannot be opened, and writes that fail (/dev/full) reported once, at out_close, with the path.
 */
#include "tests/check.h"
#include "report/report_io.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* What `fn` wrote through an output wrapped around a temporary file. */
static char *written(void (*fn)(pp_out_t *o, const void *arg), const void *arg)
{
    static char buf[4096];
    FILE *f = tmpfile();
    pp_out_t o;
    out_wrap(&o, f, "tmp", "a test");
    fn(&o, arg);
    EXPECT(out_close(&o) == PP_OK);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void put_json(pp_out_t *o, const void *s)
{
    out_json_str(o, s);
}
static void put_xml(pp_out_t *o, const void *s)
{
    out_xml(o, s);
}
static void put_num(pp_out_t *o, const void *x)
{
    out_json_num(o, *(const double *)x);
}

static void test_escaping(void)
{
    EXPECT(!strcmp(written(put_json, "a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\""));
    EXPECT(!strcmp(written(put_json, "plain ünïcode"), "\"plain ünïcode\""));
    EXPECT(!strcmp(written(put_xml, "<a href='x'>&\"\x02\t"),
                   "&lt;a href=&apos;x&apos;&gt;&amp;&quot;\t"));
    for (int i = 0; i < 100; i++) {
        double x = ts_rand_uniform(-1e6, 1e6) * (i % 2 ? 1e-9 : 1.0);
        EXPECT(strtod(written(put_num, &x), NULL) == x, "%.17g", x);
    }
    double inf = INFINITY;
    EXPECT(!strcmp(written(put_num, &inf), "null"));
}

static void test_write_errors(void)
{
    pp_out_t o;
    ts_capture_begin();
    pp_status_t st = out_open(&o, "no/such/folder/x.svg", "the SVG chart");
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_IO);
    EXPECT(!strcmp(err, "no/such/folder/x.svg: cannot write the SVG chart: No such file or "
                        "directory\n"),
           "%s", err);
    FILE *full = fopen("/dev/full", "w");
    if (!full) SKIP("no /dev/full");
    fclose(full);
    REQUIRE(out_open(&o, "/dev/full", "the trace") == PP_OK);
    for (int i = 0; i < 10000; i++) /* more than a stdio buffer */
        out_printf(&o, "{\"ts\":%d}\n", i);
    ts_capture_begin();
    st = out_close(&o);
    err = ts_capture_end();
    EXPECT(st == PP_ERR_IO);
    EXPECT(!strcmp(err, "/dev/full: writing the trace failed: No space left on device\n"), "%s",
           err);
}

int main(void)
{
    ts_rng_seed(0x5851f42d4c957f2dull);
    RUN(test_escaping);
    RUN(test_write_errors);
    return check_summary("test_report_io");
}
