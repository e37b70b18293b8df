/*
 * test_input.c — what the readers refuse before they parse: files that are not regular (a
 * device, a FIFO, a directory), files over the size limit, YAML nested past the depth limit (in
 * a file, inline and in a --set value), explicit YAML tags, empty, comment-only and null-only
 * files (`---`, `~`, `null`), --set keys with an empty part, sizes no host or GPU kernel takes
 * (a plan's ops, a micro-batch's tokens), and long values cut short in messages (YAML and CSV).
 *
 * Each case expects one exact message line and PP_ERR_INPUT. Files are made in a temporary
 * folder that the program removes at the end.
 */
#include "tests/check.h"
#include "config/config.h"
#include "common/input.h"
#include "run/run.h"
#include "plan/schedule.h"
#include "support.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Write `n` bytes of `text` repeated, then `tail`, to name in the temporary directory. */
static const char *write_file(char *buf, size_t size, const char *name, const char *text, size_t n,
                              const char *tail)
{
    ts_tmp_path(buf, size, name);
    FILE *f = fopen(buf, "w");
    if (!f) return buf;
    size_t len = strlen(text);
    for (size_t i = 0; len && i < n; i += len)
        fwrite(text, 1, n - i < len ? n - i : len, f);
    fputs(tail, f);
    fclose(f);
    return buf;
}

/* Take `path` through the run chain up to its plan (a `csv:` file is read when the schedule is
 * built); the status, and what was printed in *err. */
static pp_status_t load_file(const char *path, const char *const *sets, int n_sets,
                             const char **err)
{
    pp_run_t r;
    memset(&r, 0, sizeof r);
    ts_capture_begin();
    pp_status_t st = run_load(&r, path, NULL, sets, n_sets, 0);
    *err = ts_capture_end();
    run_free(&r);
    return st;
}

static pp_status_t load_text(const char *yaml, const char *const *sets, int n_sets,
                             const char **err)
{
    pp_config_t cfg;
    ts_capture_begin();
    pp_status_t st = config_load_string(&cfg, "t.yaml", yaml, sets, n_sets);
    *err = ts_capture_end();
    config_free(&cfg);
    return st;
}

#define EXPECT_FILE_ERROR(path, want)                                                              \
    do {                                                                                           \
        const char *e_;                                                                            \
        pp_status_t s_ = load_file((path), NULL, 0, &e_);                                          \
        TS_EXPECT_REJECT(s_, e_, want);                                                            \
    } while (0)

#define EXPECT_TEXT_ERROR(yaml, want)                                                              \
    do {                                                                                           \
        const char *e_;                                                                            \
        pp_status_t s_ = load_text((yaml), NULL, 0, &e_);                                          \
        TS_EXPECT_REJECT(s_, e_, want);                                                            \
    } while (0)

#define EXPECT_SET_ERROR(set, want)                                                                \
    do {                                                                                           \
        const char *e_, *sets_[] = {set};                                                          \
        pp_status_t s_ = load_text("", sets_, 1, &e_);                                             \
        TS_EXPECT_REJECT(s_, e_, want);                                                            \
    } while (0)

/* ---------------------------------------------------------------------------------------------
 * Files
 * ------------------------------------------------------------------------------------------- */

static void test_not_regular(void)
{
    char p[256], y[256];
    EXPECT_FILE_ERROR("/dev/zero", "/dev/zero: a character device (allowed: a regular file)");
    EXPECT_FILE_ERROR("tests/data", "tests/data: a directory (allowed: a regular file)");
    /* A FIFO with no writer: opening it for reading would wait forever. */
    REQUIRE(mkfifo(ts_tmp_path(p, sizeof p, "fifo.yaml"), 0600) == 0);
    const char *e;
    pp_status_t st = load_file(p, NULL, 0, &e);
    EXPECT(st == PP_ERR_INPUT && strstr(e, "fifo.yaml: a FIFO (allowed: a regular file)\n"), "%s",
           e);
    /* The same for the CSV a config names. */
    write_file(y, sizeof y, "zero.yaml", "", 0, "schedule:\n  csv: /dev/zero\n");
    st = load_file(y, NULL, 0, &e);
    EXPECT(st == PP_ERR_INPUT &&
               strstr(e, "zero.yaml:2:8: schedule.csv: cannot open /dev/zero: a character device "
                         "(allowed: a regular file)\n"),
           "%s", e);
    write_file(y, sizeof y, "fifo_csv.yaml", "", 0, "schedule:\n  csv: fifo.yaml\n");
    st = load_file(y, NULL, 0, &e);
    EXPECT(st == PP_ERR_INPUT && strstr(e, "fifo.yaml: a FIFO (allowed: a regular file)\n"), "%s",
           e);
}

static void test_size_limit(void)
{
    char p[256], y[256];
    const char *e;
    /* One byte over the limit, in a comment, is refused; at the limit it is read. */
    write_file(p, sizeof p, "big.yaml", "#", PP_INPUT_MAX_BYTES - 1, "\n");
    pp_status_t st = load_file(p, NULL, 0, &e);
    EXPECT(st == PP_ERR_INPUT && strstr(e, "big.yaml: empty"), "%s", e);
    write_file(p, sizeof p, "big.yaml", "#", PP_INPUT_MAX_BYTES, "\n");
    st = load_file(p, NULL, 0, &e);
    EXPECT(st == PP_ERR_INPUT &&
               strstr(e, "big.yaml: larger than 16777216 bytes (allowed: a file of at most "
                         "16777216 bytes)\n"),
           "%s", e);
    write_file(p, sizeof p, "big.csv", "0F0,", PP_INPUT_MAX_BYTES, "\n");
    write_file(y, sizeof y, "big_csv.yaml", "", 0, "schedule: {csv: big.csv}\n");
    st = load_file(y, NULL, 0, &e);
    EXPECT(st == PP_ERR_INPUT && strstr(e, "big_csv.yaml:1:17: schedule.csv: cannot open ") &&
               strstr(e, "big.csv: larger than 16777216 bytes"),
           "%s", e);
    unlink(p);
}

static void test_empty_file(void)
{
    EXPECT_FILE_ERROR("tests/data/empty.yaml", "tests/data/empty.yaml: empty (allowed: a mapping "
                                               "of sections, see docs/schedule-format.md)");
    EXPECT_FILE_ERROR("tests/data/comments_only.yaml",
                      "tests/data/comments_only.yaml: empty (allowed: a mapping of sections, see "
                      "docs/schedule-format.md)");
    /* A document that is a null alone is as empty (it would run every default). */
    static const char *const nulls[] = {"---\n", "~\n", "null\n", "--- ~\n", "# a comment\nNULL\n"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++) {
        char p[256], want[512];
        write_file(p, sizeof p, "null.yaml", "", 0, nulls[i]);
        const char *e;
        pp_status_t st = load_file(p, NULL, 0, &e);
        snprintf(want, sizeof want,
                 "%s: empty (allowed: a mapping of sections, see docs/schedule-format.md)\n", p);
        EXPECT(st == PP_ERR_INPUT && !strcmp(e, want), "%s: %s", nulls[i], e);
    }
}

/* ---------------------------------------------------------------------------------------------
 * YAML
 * ------------------------------------------------------------------------------------------- */

static void test_depth(void)
{
    char *deep = malloc(200001);
    REQUIRE(deep);
    memset(deep, '[', 200000);
    deep[200000] = '\0';
    EXPECT_TEXT_ERROR(deep, "t.yaml:1:33: nested deeper than 32 levels (allowed: at most 32)");
    for (int i = 0; i < 100000; i++)
        memcpy(deep + 2 * i, "- ", 2);
    EXPECT_TEXT_ERROR(deep, "t.yaml:1:65: nested deeper than 32 levels (allowed: at most 32)");
    free(deep);
    /* 32 levels are read (and rejected for what they are, not for their depth). */
    char ok[128] = "model: ";
    for (int i = 1; i < 32; i++)
        strcat(ok, "[");
    EXPECT_TEXT_ERROR(ok, "t.yaml:2:1: invalid YAML: did not find expected node content (while "
                          "parsing a flow node at line 2)");
    EXPECT_SET_ERROR(
        "pipeline.devices=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
        "--set pipeline.devices=[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]... (84 bytes): "
        "nested deeper than 32 levels (allowed: at most 32)");
}

static void test_tags(void)
{
    EXPECT_TEXT_ERROR("model:\n  layers: !!str 5\n",
                      "t.yaml:2:11: explicit tag !!str (allowed: values without tags; quote a "
                      "value to make it text)");
    EXPECT_TEXT_ERROR("model: !!map\n  layers: 4\n",
                      "t.yaml:1:8: explicit tag !!map (allowed: values without tags; quote a value "
                      "to make it text)");
    EXPECT_TEXT_ERROR("run: {seed: !local 5}\n",
                      "t.yaml:1:13: explicit tag !local (allowed: values without tags; quote a "
                      "value to make it text)");
    EXPECT_SET_ERROR("model.layers=!!int 4",
                     "--set model.layers=!!int 4: explicit tag !!int (allowed: values without "
                     "tags; quote a value to make it text)");
    /* A quoted number is text, and says so. */
    EXPECT_TEXT_ERROR("model:\n  layers: '5'\n",
                      "t.yaml:2:11: model.layers: \"5\" is a quoted string, not an integer "
                      "(allowed: an integer 1..100000)");
}

static void test_set_key_parts(void)
{
    EXPECT_SET_ERROR(".pipeline.micro_batches=64",
                     "--set .pipeline.micro_batches=64: '.pipeline.micro_batches' is not "
                     "section.key: a part is empty or there are more than two (allowed: e.g. "
                     "pipeline.micro_batches=16)");
    EXPECT_SET_ERROR("pipeline.=64", "--set pipeline.=64: 'pipeline.' is not section.key: a part "
                                     "is empty or there are more than two (allowed: e.g. "
                                     "pipeline.micro_batches=16)");
    EXPECT_SET_ERROR("pipeline.micro_batches.x=64",
                     "--set pipeline.micro_batches.x=64: 'pipeline.micro_batches.x' is not "
                     "section.key: a part is empty or there are more than two (allowed: e.g. "
                     "pipeline.micro_batches=16)");
}

/* ---------------------------------------------------------------------------------------------
 * Sizes
 * ------------------------------------------------------------------------------------------- */

/* A plan no host can hold is refused from the sizes, before anything is allocated (this one,
 * 470 million ops, was killed for memory). Just under the limit it resolves. */
static void test_plan_size_limit(void)
{
    const char *yaml = "model: {layers: 1024}\n"
                       "pipeline: {devices: 64, chunks: 16, micro_batches: 65536}\n"
                       "schedule: {kind: interleaved-1f1b}\n";
    pp_job_t job;
    ts_capture_begin();
    pp_status_t st = ts_load_job(&job, yaml, NULL, 0, 0);
    const char *e = ts_capture_end();
    TS_EXPECT_REJECT(st, e,
                     "t.yaml:2:52: pipeline.micro_batches: 1024 stages x 65536 micro-batches make "
                     "a plan of up to 469762048 ops, over the limit of 33554432 (allowed: stages "
                     "x micro-batches at most 4793490)");
    const char *ok[] = {"pipeline.micro_batches=4096"}; /* 1024 x 4096 x 7 = 29 M ops */
    EXPECT(ts_load_job(&job, yaml, ok, 1, 0) == PP_OK);
    job_free(&job);
}

/* What the GPU kernels count in int: tokens a micro-batch (at most 2^30), sequences x heads and
 * the fused attention's tiles. Past each, the shape is refused naming the key the input set (the
 * --set override first); at the limit it resolves. */
static void test_kernel_count_limits(void)
{
    pp_job_t job;
    const char *e;
    const char *yaml = "model: {seq_len: 1048576}\n"
                       "pipeline: {devices: 2, micro_batch_size: 2048}\n";
    ts_capture_begin();
    pp_status_t st = ts_load_job(&job, yaml, NULL, 0, 0);
    e = ts_capture_end();
    TS_EXPECT_REJECT(st, e,
                     "t.yaml:2:42: pipeline.micro_batch_size: micro_batch_size 2048 x seq_len "
                     "1048576 = 2147483648 tokens a micro-batch, more than the GPU kernels count "
                     "(allowed: pipeline.micro_batch_size x model.seq_len at most 1073741824)");
    const char *one_more[] = {"pipeline.micro_batch_size=1025"},
               *at_limit[] = {"pipeline.micro_batch_size=1024"};
    ts_capture_begin();
    st = ts_load_job(&job, "model: {seq_len: 1048576}\n", one_more, 1, 0);
    e = ts_capture_end();
    TS_EXPECT_REJECT(st, e,
                     "--set pipeline.micro_batch_size=1025: micro_batch_size 1025 x seq_len "
                     "1048576 = 1074790400 tokens a micro-batch, more than the GPU kernels count "
                     "(allowed: pipeline.micro_batch_size x model.seq_len at most 1073741824)");
    EXPECT(ts_load_job(&job, "model: {seq_len: 1048576}\n", at_limit, 1, 0) == PP_OK);
    job_free(&job);
    ts_capture_begin();
    st = ts_load_job(&job,
                     "model: {hidden: 65536, heads: 65536, seq_len: 1}\n"
                     "pipeline: {micro_batch_size: 65536}\n",
                     NULL, 0, 0);
    e = ts_capture_end();
    TS_EXPECT_REJECT(st, e,
                     "t.yaml:2:30: pipeline.micro_batch_size: micro_batch_size 65536 x heads "
                     "65536 = 4294967296 attention batches, more than the GPU kernels count "
                     "(allowed: pipeline.micro_batch_size x model.heads at most 2147483647)");
    ts_capture_begin();
    st = ts_load_job(&job,
                     "model: {hidden: 16384, heads: 256, seq_len: 1048576}\n"
                     "pipeline: {micro_batch_size: 1024}\n",
                     NULL, 0, 0);
    e = ts_capture_end();
    TS_EXPECT_REJECT(st, e,
                     "t.yaml:2:30: pipeline.micro_batch_size: micro_batch_size 1024 x heads 256 x "
                     "seq_len 1048576 / 64 = 4294967296 fused attention tiles, more than the GPU "
                     "kernels count (allowed: pipeline.micro_batch_size x model.heads x "
                     "model.seq_len / 64 at most 2147483647)");
    /* fp32 takes the GEMM path, which has no tiles */
    const char *fp32[] = {"model.dtype=fp32"};
    EXPECT(ts_load_job(&job,
                       "model: {hidden: 16384, heads: 256, seq_len: 1048576}\n"
                       "pipeline: {micro_batch_size: 1024}\n",
                       fp32, 1, 0) == PP_OK);
    job_free(&job);
}

/* ---------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------- */

static void test_shortened_values(void)
{
    size_t n = 1 << 20;
    char *yaml = malloc(n + 64), *csv = malloc(n + 64);
    REQUIRE(yaml && csv);
    strcpy(yaml, "model:\n  layers: ");
    memset(yaml + strlen(yaml), 'x', n);
    strcpy(yaml + 17 + n, "\n");
    const char *e;
    pp_status_t st = load_text(yaml, NULL, 0, &e);
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strlen(e) < 300, "message of %zu bytes", strlen(e));
    EXPECT(strstr(e, "t.yaml:2:11: model.layers: 'xxxxxxxx") &&
               strstr(e, "xxx... (1048576 bytes)' is not an integer (allowed: an integer "
                         "1..100000)\n"),
           "%.300s", e);
    memset(csv, 'y', n);
    strcpy(csv + n, ",0F0\n");
    FILE *f = fmemopen(csv, strlen(csv), "r");
    REQUIRE(f);
    pp_schedule_t s;
    ts_capture_begin();
    st = schedule_read_csv(&s, f, "t.csv");
    e = ts_capture_end();
    fclose(f);
    EXPECT(st == PP_ERR_INPUT && strlen(e) < 400, "%zu bytes", strlen(e));
    EXPECT(strstr(e, "t.csv:1:1: cell 1: 'yyyy") && strstr(e, "yyy... (1048576 bytes)' is not"),
           "%.300s", e);
    /* Control characters show as '?'. */
    char buf[PP_SHORT_MAX + 32];
    EXPECT(!strcmp(input_shorten("a\tb\x1b", buf, sizeof buf), "a?b?"), "%s", buf);
    free(yaml);
    free(csv);
}

int main(void)
{
    if (ts_tmpdir_make("test_input") != 0) return 1;
    RUN(test_not_regular);
    RUN(test_size_limit);
    RUN(test_empty_file);
    RUN(test_depth);
    RUN(test_tags);
    RUN(test_set_key_parts);
    RUN(test_plan_size_limit);
    RUN(test_kernel_count_limits);
    RUN(test_shortened_values);
    ts_tmpdir_remove();
    return check_summary("test_input");
}
