/*
 * test_preset.c — the model presets (model/preset.h): the table's rows; `model: NAME` in its
 * three spellings (the section as one word, `preset:` among the keys, `--set model=NAME`); the
 * rules that a key the file writes wins over the file's preset wherever it stands and that
 * overrides apply in order; the places messages name; an unknown name refused at its
 * file:line:col with the names allowed; and the shipped 7B- and 13B-class schedule files loaded,
 * resolved and simulated on the cost model (nothing is allocated for the model). *
 * Messages are read back from stderr and compared whole. Runs from the repository root.
 */
#include "tests/check.h"
#include "config/config.h"
#include "model/preset.h"
#include "run/run.h"
#include "schedule/kinds.h"
#include "support.h"

#include <string.h>

/* Load `yaml` (named t.yaml) with the overrides into *c; the status, with stderr in *err. */
static pp_status_t load(pp_config_t *c, const char *yaml, const char *const *sets, int n_sets,
                        const char **err)
{
    ts_capture_begin();
    pp_status_t st = config_load_string(c, "t.yaml", yaml, sets, n_sets);
    *err = ts_capture_end();
    return st;
}

#define EXPECT_REFUSED(yaml, sets, n_sets, want)                                                   \
    do {                                                                                           \
        pp_config_t c_;                                                                            \
        const char *e_;                                                                            \
        pp_status_t s_ = load(&c_, (yaml), (sets), (n_sets), &e_);                                 \
        TS_EXPECT_REJECT(s_, e_, want);                                                            \
        config_free(&c_);                                                                          \
    } while (0)

/* 1 when the config's model and micro-batch size are the preset's. */
static int is_preset(const pp_config_t *c, const char *name)
{
    const pp_preset_t *p = preset_find(name);
    const pp_job_model_t *m = &c->model;
    return p && m->layers == p->model.layers && m->hidden == p->model.hidden &&
           m->heads == p->model.heads && m->seq_len == p->model.seq_len &&
           m->vocab == p->model.vocab && m->dtype == p->model.dtype &&
           c->pipeline.micro_batch_size == p->micro_batch_size;
}

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------- */

static void test_table(void)
{
    char names[128];
    preset_names(names, sizeof names);
    EXPECT(!strcmp(names, "reference, small, 7b, 13b"), "%s", names);
    for (int i = 0; i < preset_count(); i++) {
        const pp_preset_t *p = preset_at(i);
        EXPECT(preset_find(p->name) == p && preset_index(p->name) == i, "%s", p->name);
        EXPECT(p->model.hidden % p->model.heads == 0, "%s", p->name);
        EXPECT(p->devices >= 1 && p->model.layers % p->devices == 0,
               "%s: a middle stage of %d / %d", p->name, p->model.layers, p->devices);
        EXPECT(p->micro_batch_size >= 1 && p->model.n_layers_per_stage == 0, "%s", p->name);
    }
    EXPECT(preset_find("7B") == preset_find("7b") && preset_find("70b") == NULL);
    EXPECT(preset_find(NULL) == NULL && preset_index("none") == -1 && preset_at(-1) == NULL);
    /* The shapes the issue and the benchmarks name, head dimension 128 for the large ones. */
    const pp_preset_t *b7 = preset_find("7b"), *b13 = preset_find("13b");
    REQUIRE(b7 && b13);
    EXPECT(b7->model.layers == 32 && b7->model.hidden == 4096 && b7->model.heads == 32);
    EXPECT(b7->model.seq_len == 4096 && b7->model.vocab == 32000 && b7->micro_batch_size == 1);
    EXPECT(b7->devices == 4 && b7->model.hidden / b7->model.heads == 128);
    EXPECT(b13->model.layers == 40 && b13->model.hidden == 5120 && b13->model.heads == 40);
    EXPECT(b13->model.seq_len == 4096 && b13->model.vocab == 32000 && b13->micro_batch_size == 1);
    EXPECT(b13->devices == 8 && b13->model.hidden / b13->model.heads == 128);
    /* The defaults are the reference row. */
    pp_config_t d;
    config_defaults(&d);
    EXPECT(preset_default() == preset_find("reference") && is_preset(&d, "reference"));
    config_free(&d);
}

/* ---------------------------------------------------------------------------------------------
 * model: NAME
 * ------------------------------------------------------------------------------------------- */

static void test_spellings(void)
{
    static const struct {
        const char *yaml;
        const char *set;
        const char *preset;
    } cases[] = {
        {"model: 7b\n", NULL, "7b"},
        {"model:\n  preset: 7b\n", NULL, "7b"},
        {"model: {preset: \"13b\"}\n", NULL, "13b"},
        {"model: 7B\n", NULL, "7b"},
        {"", "model=7b", "7b"},
        {"", "model.preset=13b", "13b"},
        {"model: small\n", NULL, "small"},
        {"model: 7b\n", "model=reference", "reference"},
        {"model:\n", "model=small", "small"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_config_t c;
        const char *e;
        const char *sets[] = {cases[i].set};
        pp_status_t st = load(&c, cases[i].yaml, sets, cases[i].set ? 1 : 0, &e);
        EXPECT(st == PP_OK, "case %zu: %s", i, e);
        EXPECT(st != PP_OK || is_preset(&c, cases[i].preset), "case %zu: %d layers, hidden %d", i,
               c.model.layers, c.model.hidden);
        config_free(&c);
    }
}

/* In the file, a key written beside the preset wins: before or after it in the mapping, or in
 * another section (micro_batch_size). An override is applied in order, as every --set is: a
 * preset there sets the whole shape, over the file's keys and earlier overrides, and a later
 * override wins over it. */
static void test_explicit_keys_win(void)
{
    pp_config_t c;
    const char *e;
    REQUIRE(load(&c, "model: {layers: 16, preset: 7b, vocab: 50304}\n", NULL, 0, &e) == PP_OK, "%s",
            e);
    EXPECT(c.model.layers == 16 && c.model.vocab == 50304, "%d %d", c.model.layers, c.model.vocab);
    EXPECT(c.model.hidden == 4096 && c.model.heads == 32 && c.model.seq_len == 4096);
    EXPECT(c.pipeline.micro_batch_size == 1);
    config_free(&c);

    REQUIRE(load(&c, "pipeline: {micro_batch_size: 2}\nmodel:\n  dtype: fp32\n  preset: 13b\n",
                 NULL, 0, &e) == PP_OK,
            "%s", e);
    EXPECT(c.pipeline.micro_batch_size == 2 && c.model.dtype == PP_DTYPE_FP32);
    EXPECT(c.model.layers == 40 && c.model.hidden == 5120);
    config_free(&c);
    REQUIRE(load(&c, "model: 13b\npipeline: {micro_batch_size: 3}\n", NULL, 0, &e) == PP_OK);
    EXPECT(c.pipeline.micro_batch_size == 3 && c.model.layers == 40);
    config_free(&c);

    /* Overrides in order: the preset replaces the file's hidden and the earlier seq_len; the
     * later heads stays. */
    const char *sets[] = {"model.seq_len=2048", "model=7b", "model.heads=64"};
    REQUIRE(load(&c, "model: {hidden: 8192}\npipeline: {micro_batch_size: 8}\n", sets, 3, &e) ==
                PP_OK,
            "%s", e);
    EXPECT(c.model.hidden == 4096 && c.model.seq_len == 4096 && c.model.heads == 64);
    EXPECT(c.model.layers == 32 && c.model.vocab == 32000 && c.pipeline.micro_batch_size == 1);
    config_free(&c);
    const char *again[] = {"model=13b"};
    REQUIRE(load(&c, "model: {preset: 7b, layers: 20}\n", again, 1, &e) == PP_OK, "%s", e);
    EXPECT(is_preset(&c, "13b"));
    config_free(&c);

    /* So --set model=7b on a file that writes every model key is the 7B-class shape. */
    const char *b7[] = {"model=7b"};
    ts_capture_begin();
    pp_status_t st = config_load(&c, "schedules/1f1b.yaml", b7, 1);
    e = ts_capture_end();
    EXPECT(st == PP_OK && is_preset(&c, "7b"), "%s", e);
    config_free(&c);

    /* A written key keeps its place, and the preset's keys name the preset's. */
    pp_job_t job = {0};
    REQUIRE(load(&c, "model:\n  preset: 7b\n  heads: 48\npipeline: {devices: 4}\n", NULL, 0, &e) ==
            PP_OK);
    ts_capture_begin();
    st = ts_resolve(&job, &c, 4);
    e = ts_capture_end();
    TS_EXPECT_REJECT(st, e,
                     "t.yaml:3:10: model.heads: hidden 4096 does not split into 48 heads "
                     "(allowed: a divisor of 4096)");
    job_free(&job);
    config_free(&c);
    REQUIRE(load(&c, "model: 7b\n", NULL, 0, &e) == PP_OK);
    ts_capture_begin();
    EXPECT(config_error_at(&c, PP_CFG_SEQ_LEN, 0, 0, "x") == PP_ERR_INPUT);
    e = ts_capture_end();
    EXPECT(!strcmp(e, "t.yaml:1:8: model.preset: x\n"), "%s", e);
    config_free(&c);
    const char *b13[] = {"model=13b"};
    REQUIRE(load(&c, "model: {heads: 8}\n", b13, 1, &e) == PP_OK);
    ts_capture_begin();
    EXPECT(config_error_at(&c, PP_CFG_HEADS, 0, 0, "x") == PP_ERR_INPUT);
    e = ts_capture_end();
    EXPECT(!strcmp(e, "--set model=13b: x\n"), "%s", e);
    config_free(&c);
}

static void test_unknown_preset(void)
{
    EXPECT_REFUSED("model: 8b\n", NULL, 0,
                   "t.yaml:1:8: model.preset: unknown preset '8b' (allowed: reference, small, 7b, "
                   "13b)");
    EXPECT_REFUSED("name: x\nmodel:\n  layers: 8\n  preset: llama\n", NULL, 0,
                   "t.yaml:4:11: model.preset: unknown preset 'llama' (allowed: reference, small, "
                   "7b, 13b)");
    EXPECT_REFUSED("model:\n  preset: [7b]\n", NULL, 0,
                   "t.yaml:2:11: model.preset: expected one word, got a list (allowed: reference, "
                   "small, 7b, 13b)");
    const char *set[] = {"model=7c"};
    EXPECT_REFUSED("", set, 1,
                   "--set model=7c: unknown preset '7c' (allowed: reference, small, 7b, 13b)");
    const char *key[] = {"model.preset=huge"};
    EXPECT_REFUSED("model: 7b\n", key, 1,
                   "--set model.preset=huge: unknown preset 'huge' (allowed: reference, small, "
                   "7b, 13b)");
}

/* ---------------------------------------------------------------------------------------------
 * The shipped files
 * ------------------------------------------------------------------------------------------- */

/* Each loads, resolves on its own device count, and simulates on the h100 description: it fits,
 * the kinds rank as their bubbles say (ZB-V < ZB-H1 < 1F1B, interleaved < 1F1B), and the files
 * agree with the preset's pipeline. */
static void test_shipped_files(void)
{
    static const struct {
        const char *path, *preset, *kind;
        int chunks, m;
    } files[] = {
        {"schedules/7b-1f1b.yaml", "7b", "1f1b", 1, 16},
        {"schedules/7b-zb-h1.yaml", "7b", "zb-h1", 1, 16},
        {"schedules/7b-zb-v.yaml", "7b", "zb-v", 2, 16},
        {"schedules/7b-interleaved.yaml", "7b", "interleaved-1f1b", 2, 16},
        {"schedules/13b-1f1b.yaml", "13b", "1f1b", 1, 32},
    };
    double step[5] = {0};
    for (int i = 0; i < 5; i++) {
        const pp_preset_t *p = preset_find(files[i].preset);
        pp_run_t r;
        pp_run_opts_t ro = {0};
        ts_capture_begin();
        pp_status_t st = run_load(&r, files[i].path, NULL, NULL, 0, 0);
        if (st == PP_OK) st = run_go(&r, &ro);
        const char *e = ts_capture_end();
        EXPECT(st == PP_OK, "%s: %s", files[i].path, e);
        if (st == PP_OK) {
            EXPECT(is_preset(&r.cfg, files[i].preset), "%s", files[i].path);
            EXPECT(r.job.pipeline.n_devices == p->devices && r.plan.n_mb == files[i].m, "%s",
                   files[i].path);
            EXPECT(!strcmp(sched_kind_name(r.job.kind), files[i].kind) &&
                       r.plan.chunks == files[i].chunks,
                   "%s: %s", files[i].path, sched_kind_name(r.job.kind));
            EXPECT(r.job.run.optimizer == PP_OPT_ADAMW, "%s", files[i].path);
            EXPECT(r.mem.n_over == 0, "%s: does not fit", files[i].path);
            step[i] = r.predicted_ms;
        }
        run_free(&r);
    }
    EXPECT(step[2] < step[1] && step[1] < step[0] && step[3] < step[0], "%g %g %g %g", step[0],
           step[1], step[2], step[3]);
}

int main(void)
{
    RUN(test_table);
    RUN(test_spellings);
    RUN(test_explicit_keys_win);
    RUN(test_unknown_preset);
    RUN(test_shipped_files);
    return check_summary("test_preset");
}
