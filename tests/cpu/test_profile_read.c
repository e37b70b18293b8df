/*
 * test_profile_read.c — the profile reader's door (model/profile_read.c): what it refuses and how
 * it says so, with the config reader's limits and words.
 *
 * A good profile (the writer's text of a fake one) is edited one way at a time and must be
 * refused with one exact line naming path:line:col: a FIFO or an over-large file (refused, not
 * waited on or read whole), nesting past the limit (quickly, at 200k levels), tags, numbers out
 * of range (1e308 bytes) or of the wrong kind, a stage or a send missing a key (never read as
 * 0), a key given twice, an unknown GPU row and an unknown version. Version 1 may lack the keys
 * version 2 added; version 2 may not. `check` and `show` load through run_load, which must read
 * the profile and refuse a bad one; cost.profile in a --set is relative to the YAML's folder, as
 * in the file.
 */
#include "common/input.h"
#include "config/config.h"
#include "model/profile.h"
#include "run/run.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char good[4096]; /* the writer's text of a fake profile */
/* "forward: X" of its middle and its first stage as written (the cost model's times, which a
 * change to the model moves) */
static char fwd_middle[64], fwd_first[64];

/* Write `text` to `name` in the temporary folder; its path into path. */
static const char *write_text(char *path, size_t size, const char *name, const char *text)
{
    ts_tmp_path(path, size, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* The good text with its first `from` replaced by `to`. */
static const char *edited(const char *from, const char *to)
{
    static char out[8192];
    const char *at = strstr(good, from);
    if (!at) {
        snprintf(out, sizeof out, "(the good profile has no '%s')", from);
        return out;
    }
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    return out;
}

/* profile_load of `text` (as bad.yaml); the status and the message. */
static pp_status_t load(const char *text, const char **err, char *path, size_t size)
{
    pp_profile_t p;
    write_text(path, size, "bad.yaml", text);
    ts_capture_begin();
    pp_status_t st = profile_load(&p, path);
    *err = ts_capture_end();
    return st;
}

/* The edit is refused with exactly "<path>:<want>". */
#define EXPECT_REFUSED(text, want)                                                                 \
    do {                                                                                           \
        char p_[256], w_[512];                                                                     \
        const char *e_;                                                                            \
        pp_status_t s_ = load((text), &e_, p_, sizeof p_);                                         \
        snprintf(w_, sizeof w_, "%s%s\n", p_, want);                                               \
        EXPECT(s_ == PP_ERR_INPUT, "status %s", pp_status_str(s_));                                \
        EXPECT(strcmp(e_, w_) == 0, "\n    got:  %s    want: %s", e_, w_);                         \
    } while (0)

static void test_good(void)
{
    char path[256];
    const char *e;
    EXPECT(load(good, &e, path, sizeof path) == PP_OK, "%s", e);
    /* version 1 may lack what version 2 added */
    char old[4096];
    snprintf(old, sizeof old, "%s", edited("ppsched: profile 2", "ppsched: profile 1"));
    char *cut = strstr(old, "stage_overhead_bytes:");
    REQUIRE(cut);
    memmove(cut, strchr(cut, '\n') + 1, strlen(strchr(cut, '\n') + 1) + 1);
    *strstr(old, "steps: []") = '\0';
    ts_capture_begin(); /* the note that it predates steps and pairs */
    pp_profile_t p;
    pp_status_t st = profile_load(&p, write_text(path, sizeof path, "old.yaml", old));
    e = ts_capture_end();
    EXPECT(st == PP_OK && p.stage_overhead_bytes == 0 && !p.has_runs, "%s", e);
}

/* A FIFO is refused, not waited on; so is a file over the config's limit, unread. */
static void test_files(void)
{
    char fifo[256], big[256], want[1024];
    REQUIRE(mkfifo(ts_tmp_path(fifo, sizeof fifo, "fifo.yaml"), 0600) == 0);
    pp_profile_t p;
    ts_capture_begin();
    pp_status_t st = profile_load(&p, fifo);
    const char *e = ts_capture_end();
    snprintf(want, sizeof want, "%s: a FIFO (allowed: a regular file)\n", fifo);
    EXPECT(st == PP_ERR_INPUT && !strcmp(e, want), "%s", e);
    ts_tmp_path(big, sizeof big, "big.yaml");
    FILE *f = fopen(big, "w");
    REQUIRE(f);
    REQUIRE(ftruncate(fileno(f), (off_t)PP_INPUT_MAX_BYTES + 1) == 0); /* sparse: nothing written */
    fclose(f);
    ts_capture_begin();
    st = profile_load(&p, big);
    e = ts_capture_end();
    snprintf(want, sizeof want,
             "%s: larger than 16777216 bytes (allowed: a file of at most 16777216 bytes)\n", big);
    EXPECT(st == PP_ERR_INPUT && !strcmp(e, want), "%s", e);
    /* cost.profile naming the FIFO: refused where the config names it, before anything opens it
     * for reading */
    pp_config_t cfg;
    char set[320];
    snprintf(set, sizeof set, "cost.profile=%s", fifo);
    const char *sets[] = {set};
    ts_capture_begin();
    st = config_load_string(&cfg, "t.yaml", "name: x\n", sets, 1);
    e = ts_capture_end();
    snprintf(want, sizeof want, "--set %s: cannot open %s: a FIFO (allowed: a regular file)\n", set,
             fifo);
    EXPECT(st == PP_ERR_INPUT && !strcmp(e, want), "%s", e);
    config_free(&cfg);
    unlink(fifo);
    unlink(big);
}

static void test_yaml_limits(void)
{
    /* 200k levels: refused at the 33rd, in well under a second */
    size_t n = 200000;
    char *deep = malloc(n + 1);
    REQUIRE(deep);
    memset(deep, '[', n);
    deep[n] = '\0';
    clock_t t0 = clock();
    EXPECT_REFUSED(deep, ":1:33: nested deeper than 32 levels (allowed: at most 32)");
    EXPECT((double)(clock() - t0) / CLOCKS_PER_SEC < 1.0, "%.2f s",
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    free(deep);
    EXPECT_REFUSED(edited("runtime_bytes: ", "runtime_bytes: !!float "),
                   ":9:16: explicit tag !!float (allowed: values without tags; quote a value to "
                   "make it text)");
    EXPECT_REFUSED("---\n", ": empty (allowed: a profile written by `ppsched profile`)");
    EXPECT_REFUSED(edited("pairs: []", "pairs: []\n---\na: 1"),
                   ":20:1: a second YAML document starts here (allowed: one document per file)");
    EXPECT_REFUSED(edited("gpu: h200", "gpu: [h200"),
                   ":6:5: invalid YAML: did not find expected ',' or ']' (while parsing a flow "
                   "sequence at line 5)");
}

static void test_numbers(void)
{
    EXPECT_REFUSED(edited("runtime_bytes: 6.5e+08", "runtime_bytes: 1e308"),
                   ":9:16: runtime_bytes: 1e308 is out of range (allowed: a number 0..1e15 "
                   "(bytes))");
    EXPECT_REFUSED(edited("stage_overhead_bytes: 4.5e+07", "stage_overhead_bytes: -1"),
                   ":10:23: stage_overhead_bytes: expected a number (allowed: a number 0..1e15 "
                   "(bytes))");
    EXPECT_REFUSED(edited(fwd_middle, "forward: 0x10"),
                   ":12:21: forward: expected a number (allowed: a number 0..1e9 (ms))");
    EXPECT_REFUSED(edited(fwd_middle, "forward: nan"),
                   ":12:21: forward: expected a number (allowed: a number 0..1e9 (ms))");
    EXPECT_REFUSED(edited("ms: 0.005", "ms: 1e10"),
                   ":16:28: ms: 1e10 is out of range (allowed: a number 0..1e9 (ms))");
    EXPECT_REFUSED(edited("hidden: 1024", "hidden: 1e9"),
                   ":8:17: hidden: 1e9 is out of range (allowed: a whole number 1..1048576)");
    EXPECT_REFUSED(edited("heads: 16", "heads: 24"),
                   ":8:8: shape: hidden 1024 does not split into 24 heads (allowed: heads a "
                   "divisor of hidden)");
}

/* Every key of a stage, a send and the shape is needed: none is read as 0 in silence. */
static void test_missing_keys(void)
{
    char from[96], to[96];
    snprintf(from, sizeof from, "middle: {%s, ", fwd_middle);
    EXPECT_REFUSED(edited(from, "middle: {"),
                   ":12:11: stages.middle: forward is missing (allowed: forward, backward_input, "
                   "backward_weight, bytes)");
    EXPECT_REFUSED(edited(", bytes: 0}", "}"),
                   ":12:11: stages.middle: bytes is missing (allowed: forward, backward_input, "
                   "backward_weight, bytes)");
    EXPECT_REFUSED(edited("  last: {", "  lost: {"),
                   ":14:3: unknown key 'lost' in stages (allowed: middle, first, last)");
    EXPECT_REFUSED(edited(", ms: 0.005}", "}"),
                   ":16:3: sends[0]: ms is missing (allowed: bytes, ms)");
    EXPECT_REFUSED(edited(", dtype: bf16}", "}"),
                   ":8:8: shape: dtype is missing (allowed: hidden, heads, seq_len, vocab, "
                   "micro_batch_size, layers, dtype)");
    EXPECT_REFUSED(edited("stage_overhead_bytes: 4.5e+07\n", ""),
                   ":4:1: stage_overhead_bytes is missing (allowed: profile 2 has every one of "
                   "ppsched, device, gpu, date, shape, runtime_bytes, stage_overhead_bytes, "
                   "stages, sends, steps, pairs)");
    EXPECT_REFUSED(edited("ppsched: profile 2\n", ""),
                   ":4:1: ppsched is missing (allowed: profile 1 has every one of ppsched, "
                   "device, gpu, date, shape, runtime_bytes, stages, sends)");
    snprintf(from, sizeof from, "first: {%s, ", fwd_first);
    snprintf(to, sizeof to, "first: {%s, forward: 1, ", fwd_first);
    char want[160]; /* the second key after "  first: {", the first one and ", " */
    snprintf(want, sizeof want,
             ":13:%d: duplicate key 'forward' in stages.first, first given at line 13 "
             "(allowed: each key once)",
             (int)(strlen("  first: {") + strlen(fwd_first) + strlen(", ") + 1));
    EXPECT_REFUSED(edited(from, to), want);
}

static void test_gpu_and_version(void)
{
    EXPECT_REFUSED(edited("gpu: h200", "gpu: zzz"),
                   ":5:6: gpu: unknown GPU 'zzz' (allowed: a100, h100, h200, b200, or '' for "
                   "none)");
    EXPECT_REFUSED(edited("ppsched: profile 2", "ppsched: profile 99"),
                   ":7:10: ppsched: 'profile 99' is not a profile version this ppsched reads "
                   "(allowed: profile 1 to profile 2; `ppsched profile` makes a new one)");
    char path[256];
    const char *e;
    EXPECT(load(edited("gpu: h200", "gpu: ''"), &e, path, sizeof path) == PP_OK, "%s", e);
}

/* run_load (what check and show call) reads the profile and refuses a bad one; a relative path
 * in a --set is from the YAML's folder. */
static void test_run_load(void)
{
    char prof[256], yaml[256], set[320];
    write_text(prof, sizeof prof, "bad.yaml", edited("gpu: h200", "gpu: zzz"));
    write_text(yaml, sizeof yaml, "run.yaml", "pipeline: {devices: 2}\n");
    snprintf(set, sizeof set, "cost.profile=bad.yaml"); /* beside run.yaml, not in the cwd */
    const char *sets[] = {set};
    pp_run_t r;
    ts_capture_begin();
    pp_status_t st = run_load(&r, yaml, NULL, sets, 1, 0);
    const char *e = ts_capture_end();
    run_free(&r);
    char want[512];
    snprintf(want, sizeof want, "%s:5:6: gpu: unknown GPU 'zzz'", prof);
    EXPECT(st == PP_ERR_INPUT && strstr(e, want), "%s", e);
    write_text(prof, sizeof prof, "good.yaml", good);
    snprintf(set, sizeof set, "cost.profile=good.yaml");
    ts_capture_begin();
    st = run_load(&r, yaml, NULL, sets, 1, 0);
    e = ts_capture_end();
    EXPECT(st == PP_OK && r.have_prof && !strcmp(r.prof.gpu, "h200"), "%s", e);
    run_free(&r);
    /* in the file, the same folder */
    write_text(yaml, sizeof yaml, "run2.yaml",
               "pipeline: {devices: 2}\ncost: {profile: good.yaml}\n");
    ts_capture_begin();
    st = run_load(&r, yaml, NULL, NULL, 0, 0);
    e = ts_capture_end();
    EXPECT(st == PP_OK && r.have_prof, "%s", e);
    run_free(&r);
}

/* The good text: the writer's, of a fake profile. */
static int make_good(void)
{
    double ones[PP_PASS_COUNT][PP_PART_COUNT] = {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}};
    pp_profile_t p;
    ts_profile_fake(&p, ones);
    FILE *f = fmemopen(good, sizeof good - 1, "w");
    if (!f) return -1;
    pp_status_t st = profile_write(&p, f);
    fclose(f);
    const char *names[2] = {"middle: {", "first: {"};
    char *outs[2] = {fwd_middle, fwd_first};
    for (int k = 0; k < 2 && st == PP_OK; k++) {
        const char *at = strstr(good, names[k]);
        const char *end = at ? strchr(at, ',') : NULL;
        if (!end) return -1;
        at += strlen(names[k]);
        snprintf(outs[k], sizeof fwd_middle, "%.*s", (int)(end - at), at);
    }
    return st == PP_OK ? 0 : -1;
}

int main(void)
{
    if (ts_tmpdir_make("test_profile_read") != 0 || make_good() != 0) return 1;
    RUN(test_good);
    RUN(test_files);
    RUN(test_yaml_limits);
    RUN(test_numbers);
    RUN(test_missing_keys);
    RUN(test_gpu_and_version);
    RUN(test_run_load);
    ts_tmpdir_remove();
    return check_summary("test_profile_read");
}
