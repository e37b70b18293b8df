/*
 * test_outputs.c — how report files are written: a failed write leaves the earlier file as it was
 * and no temporary file behind (the write fails through RLIMIT_FSIZE), a good one replaces it, a
 * path is probed before a run, CSV fields are quoted only when they must be, and run names become
 * file names one way for every file.
 */
#include "tests/check.h"
#include "report/report_io.h"
#include "support.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

/* Files in the temporary directory whose name holds `part`. */
static int count_files(const char *part)
{
    int n = 0;
    DIR *d = opendir(ts_tmpdir());
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, part) != NULL;
    if (d) closedir(d);
    return n;
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_failed_write_keeps_the_old_file(void)
{
    char path[256];
    pp_out_t o;
    ts_tmp_path(path, sizeof path, "trace.json");
    REQUIRE(out_open(&o, path, "the trace") == PP_OK);
    out_puts(&o, "good\n");
    REQUIRE(out_close(&o) == PP_OK);
    EXPECT(!strcmp(slurp(path), "good\n"));

    /* Files may grow to 4 KiB only: the next write fails part way. */
    struct rlimit old, small = {4096, 4096};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
    small.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    pp_status_t st = out_open(&o, path, "the trace");
    if (st == PP_OK) {
        for (int i = 0; i < 10000; i++)
            out_printf(&o, "{\"ts\":%d}\n", i);
        ts_capture_begin();
        st = out_close(&o);
        ts_capture_end();
    }
    setrlimit(RLIMIT_FSIZE, &old);
    EXPECT(st == PP_ERR_IO, "status %d", (int)st);
    EXPECT(!strcmp(slurp(path), "good\n"), "the earlier file was clobbered: %.40s", slurp(path));
    EXPECT(count_files(".tmp-") == 0, "a temporary file was left behind");

    /* A good write replaces it whole. */
    REQUIRE(out_open(&o, path, "the trace") == PP_OK);
    out_puts(&o, "new\n");
    REQUIRE(out_close(&o) == PP_OK);
    EXPECT(!strcmp(slurp(path), "new\n"));
    EXPECT(count_files(".tmp-") == 0);
}

static void test_probe(void)
{
    char path[256];
    ts_tmp_path(path, sizeof path, "probe.svg");
    EXPECT(out_probe(path, "the SVG chart") == PP_OK);
    EXPECT(access(path, F_OK) != 0 && count_files(".tmp-") == 0, "the probe left a file");
    ts_capture_begin();
    pp_status_t st = out_probe("/no/such/folder/x.svg", "the SVG chart");
    const char *e = ts_capture_end();
    EXPECT(st == PP_ERR_IO);
    EXPECT(!strcmp(e, "/no/such/folder/x.svg: cannot write the SVG chart: No such file or "
                      "directory\n"),
           "%s", e);
    ts_capture_begin();
    st = out_probe(ts_tmpdir(), "the trace");
    e = ts_capture_end();
    EXPECT(st == PP_ERR_IO && strstr(e, "cannot write the trace: Is a directory"), "%s", e);
}

static void test_csv_quoting(void)
{
    static const struct {
        const char *in, *want;
    } rows[] = {{"1f1b m=8", "1f1b m=8"},
                {"a,b", "\"a,b\""},
                {"say \"hi\"", "\"say \"\"hi\"\"\""},
                {"two\nlines", "\"two\nlines\""},
                {" padded", "\" padded\""},
                {"", ""}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        pp_out_t o;
        out_wrap(&o, f, "mem", "a CSV field");
        out_csv_str(&o, rows[i].in);
        out_close(&o);
        fclose(f);
        EXPECT(!strcmp(buf, rows[i].want), "%s -> %s", rows[i].in, buf);
        free(buf);
    }
}

static void test_file_names(void)
{
    static const struct {
        const char *in, *want;
    } rows[] = {{"1f1b micro_batches=8", "1f1b_micro_batches-8"},
                {"../../etc/x", "_._.._etc_x"},
                {"a/b", "a_b"},
                {".hidden", "_hidden"},
                {"", "run"}};
    char buf[64];
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        EXPECT(!strcmp(out_file_name(rows[i].in, buf, sizeof buf), rows[i].want), "%s -> %s",
               rows[i].in, buf);
}

int main(void)
{
    if (ts_tmpdir_make("test_outputs") != 0) return 1;
    RUN(test_failed_write_keeps_the_old_file);
    RUN(test_probe);
    RUN(test_csv_quoting);
    RUN(test_file_names);
    ts_tmpdir_remove();
    return check_summary("test_outputs");
}
