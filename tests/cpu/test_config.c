/*
 * test_config.c — the YAML configuration: defaults, every key of every section, each kind of
 * input error with its exact line and column, `--set` overrides, the checks of job_resolve,
 * every YAML file shipped in schedules/, and the token and FLOP counts.
 *
 * Error messages are read back from stderr (redirected into a temporary file around the call)
 * and compared whole: one line, exactly. Fixtures live in tests/data; the program runs from the
 * repository root, as `make test-cpu` runs it. Random values come from a seeded generator.
 */
#include "tests/check.h"
#include "config/config.h"
#include "schedule/generate.h"
#include "plan/plan.h"
#include "model/split.h"
#include "support.h"
#include "config/resolve.h"
#include "config/written.h"
#include "model/gpu.h"

#include <glob.h>
#include <stdint.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------- */

/* For a written schedule (steps, csv): build it into *s and reconcile the job's pipeline keys
 * with it (n_visible devices, 0 for none known), without resolving the rest; otherwise *s stays
 * empty. */
static pp_status_t build_written(pp_job_t *job, const pp_config_t *cfg, pp_schedule_t *s,
                                 int n_visible)
{
    memset(s, 0, sizeof *s);
    if (!sched_kind(cfg->schedule.kind)->written) return PP_OK;
    PP_CHECK(written_build(s, cfg));
    PP_CHECK(job_from_config(job, cfg));
    return written_reconcile(job, cfg, s, n_visible);
}

/* Load `yaml` (named t.yaml, or the file `path` when yaml is NULL) with overrides, build a written
 * schedule, then resolve with n_visible unless it is NO_RESOLVE. Returns the status; *err holds
 * what was printed. */
#define NO_RESOLVE (-1000)
static pp_status_t load_any_capture(const char *path, const char *yaml, const char *const *sets,
                                    int n_sets, int n_visible, const char **err)
{
    pp_config_t cfg;
    pp_job_t jcfg = {0};
    pp_schedule_t s = {0};
    ts_capture_begin();
    pp_status_t st = yaml ? config_load_string(&cfg, path, yaml, sets, n_sets)
                          : config_load(&cfg, path, sets, n_sets);
    if (st == PP_OK && n_visible == NO_RESOLVE) st = build_written(&jcfg, &cfg, &s, 0);
    if (st == PP_OK && n_visible != NO_RESOLVE) st = ts_resolve(&jcfg, &cfg, n_visible);
    *err = ts_capture_end();
    schedule_free(&s);
    job_free(&jcfg);
    config_free(&cfg);
    return st;
}

static pp_status_t load_capture(const char *yaml, const char *const *sets, int n_sets,
                                int n_visible, const char **err)
{
    return load_any_capture("t.yaml", yaml, sets, n_sets, n_visible, err);
}

static pp_status_t load_file_capture(const char *path, int n_visible, const char **err)
{
    return load_any_capture(path, NULL, NULL, 0, n_visible, err);
}

/* Load a YAML text and expect one error line (no resolve). */
#define EXPECT_LOAD_ERROR(yaml, want)                                                              \
    do {                                                                                           \
        const char *e_;                                                                            \
        pp_status_t s_ = load_capture((yaml), NULL, 0, NO_RESOLVE, &e_);                           \
        TS_EXPECT_REJECT(s_, e_, want);                                                            \
    } while (0)

/* Load and resolve a YAML text with n_visible devices and expect one error line. */
#define EXPECT_RESOLVE_ERROR(yaml, nv, want)                                                       \
    do {                                                                                           \
        const char *e_;                                                                            \
        pp_status_t s_ = load_capture((yaml), NULL, 0, (nv), &e_);                                 \
        TS_EXPECT_REJECT(s_, e_, want);                                                            \
    } while (0)

/* Apply one override to an empty file and expect one error line. */
#define EXPECT_SET_ERROR(set, want)                                                                \
    do {                                                                                           \
        const char *e_, *sets_[] = {set};                                                          \
        pp_status_t s_ = load_capture("", sets_, 1, NO_RESOLVE, &e_);                              \
        TS_EXPECT_REJECT(s_, e_, want);                                                            \
    } while (0)

#define ACTION_ALLOWED                                                                             \
    "(allowed: <stage><kind><micro-batch>, kind F, B, I, W, SEND_F, RECV_F, SEND_B or RECV_B, "    \
    "e.g. 0F3, 1I2, 2SEND_F1)"

/* ---------------------------------------------------------------------------------------------
 * Defaults and every key
 * ------------------------------------------------------------------------------------------- */

static void check_defaults(const pp_config_t *c)
{
    EXPECT(c->model.layers == 24 && c->model.hidden == 1024 && c->model.heads == 16);
    EXPECT(c->model.seq_len == 1024 && c->model.vocab == 8192 && c->model.dtype == PP_DTYPE_BF16);
    EXPECT(c->pipeline.devices_all == 1);
    EXPECT(c->pipeline.stages == 0 && c->pipeline.chunks == 1);
    EXPECT(c->pipeline.placement == PP_PLACEMENT_LOOP);
    EXPECT(c->pipeline.micro_batches == 8 && c->pipeline.micro_batch_size == 4);
    EXPECT(c->pipeline.transport == PP_TRANSPORT_AUTO);
    EXPECT(c->schedule.kind == PP_SCHED_1F1B && !c->schedule.steps.n && !c->schedule.csv_path);
    EXPECT(c->run.steps == 10 && c->run.warmup == 2 && c->run.seed == 1234);
    EXPECT(c->run.optimizer == PP_OPT_NONE && c->run.timing == 1);
    EXPECT(c->run.lr == 3e-4 && c->run.weight_decay == 0.1 && c->run.timeout_s == 60.0);
    EXPECT(c->cost.forward == 1.0 && c->cost.backward_input == 1.0);
    EXPECT(c->cost.backward_weight == 1.0 && c->cost.send == 0.0);
}

static void test_defaults(void)
{
    pp_config_t cfg;
    pp_job_t jcfg = {0};
    config_defaults(&cfg);
    check_defaults(&cfg);
    config_free(&cfg);

    REQUIRE(config_load_string(&cfg, "dir/empty.yaml", "", NULL, 0) == PP_OK);
    check_defaults(&cfg);
    EXPECT(cfg.name && !strcmp(cfg.name, "empty"), "name %s", cfg.name);
    EXPECT(cfg.path && !strcmp(cfg.path, "dir/empty.yaml"));
    REQUIRE(ts_resolve(&jcfg, &cfg, 0) == PP_OK);
    EXPECT(jcfg.pipeline.n_devices == 4 && jcfg.pipeline.stages == 4 && jcfg.pipeline.chunks == 1);
    for (int d = 0; d < 4; d++)
        EXPECT(jcfg.pipeline.device_ids[d] == d);
    job_free(&jcfg);
    config_free(&cfg);

    /* Sections present but empty, and comments only, change nothing. */
    REQUIRE(config_load_string(&cfg, "t.yml", "# nothing\nmodel:\nrun:\n", NULL, 0) == PP_OK);
    check_defaults(&cfg);
    EXPECT(!strcmp(cfg.name, "t"), "name %s", cfg.name);
    config_free(&cfg);
}

static void test_every_key(void)
{
    pp_config_t cfg;
    pp_job_t jcfg = {0};
    REQUIRE(config_load(&cfg, "tests/data/all_keys.yaml", NULL, 0) == PP_OK);
    EXPECT(!strcmp(cfg.name, "every-key"), "name %s", cfg.name);
    EXPECT(cfg.model.layers == 36 && cfg.model.hidden == 768 && cfg.model.heads == 12);
    EXPECT(cfg.model.seq_len == 512 && cfg.model.vocab == 50304);
    EXPECT(cfg.model.dtype == PP_DTYPE_FP32);
    EXPECT(!cfg.pipeline.devices_all && cfg.pipeline.n_devices == 3);
    EXPECT(cfg.pipeline.device_ids[0] == 3 && cfg.pipeline.device_ids[1] == 1 &&
           cfg.pipeline.device_ids[2] == 2);
    EXPECT(cfg.pipeline.stages == 6 && cfg.pipeline.chunks == 2);
    EXPECT(cfg.pipeline.placement == PP_PLACEMENT_V);
    EXPECT(cfg.pipeline.micro_batches == 12 && cfg.pipeline.micro_batch_size == 2);
    EXPECT(cfg.pipeline.transport == PP_TRANSPORT_NCCL);
    EXPECT(cfg.pipeline.devices_per_process == 3);
    REQUIRE(job_from_config(&jcfg, &cfg) == PP_OK);
    EXPECT(job_check_processes(&jcfg, &cfg, 1) == PP_OK);
    job_free(&jcfg);
    EXPECT(cfg.schedule.kind == PP_SCHED_INTERLEAVED);
    EXPECT(cfg.run.steps == 25 && cfg.run.warmup == 5);
    EXPECT(cfg.run.seed == UINT64_MAX, "seed %llu", (unsigned long long)cfg.run.seed);
    EXPECT(cfg.run.optimizer == PP_OPT_ADAMW && cfg.run.timing == 0);
    EXPECT(cfg.run.lr == 0.001 && cfg.run.weight_decay == 0.05 && cfg.run.timeout_s == 12.5);
    EXPECT(cfg.run.recompute == PP_RECOMPUTE_SELECTIVE);
    EXPECT(cfg.run.offload == PP_OFFLOAD_ACTIVATIONS && cfg.cost.host_link_gbps == 25.5);
    EXPECT(cfg.cost.forward == 2.5 && cfg.cost.backward_input == 3.25);
    EXPECT(cfg.cost.backward_weight == 0.5 && cfg.cost.send == 0.125 && cfg.cost.overlap == 0.75);
    /* interleaved 1F1B does not build placement v (zb-v and dualpipe-v do): resolve refuses it at
     * the key's place (it was refused later, while generating, with no place). */
    ts_capture_begin();
    pp_status_t st = ts_resolve(&jcfg, &cfg, 4);
    const char *err = ts_capture_end();
    TS_EXPECT_REJECT(st, err,
                     "tests/data/all_keys.yaml:15:14: pipeline.placement: interleaved-1f1b: "
                     "placement v is not supported (the order is built for loop placement, stage s "
                     "on device s mod p) (allowed: placement loop, or the order written under "
                     "schedule.steps)");
    EXPECT(jcfg.pipeline.stages == 6 && jcfg.pipeline.chunks == 2 && jcfg.pipeline.n_devices == 3);
    EXPECT(jcfg.model.n_layers_per_stage == 6 && jcfg.model.layers_per_stage[0] == 5 &&
           jcfg.model.layers_per_stage[5] == 7);
    job_free(&jcfg);
    config_free(&cfg);

    /* A file with one key: its name, the key, and defaults for the rest. */
    REQUIRE(config_load(&cfg, "tests/data/minimal.yaml", NULL, 0) == PP_OK);
    EXPECT(!strcmp(cfg.name, "minimal") && !strcmp(cfg.path, "tests/data/minimal.yaml"));
    EXPECT(cfg.model.layers == 12 && cfg.model.hidden == 1024 && cfg.pipeline.micro_batches == 8);
    EXPECT(cfg.run.recompute == PP_RECOMPUTE_NONE);
    EXPECT(cfg.run.offload == PP_OFFLOAD_NONE && cfg.cost.host_link_gbps == 0.0);
    config_free(&cfg);
}

/* Random values through the file: each must land in its field unchanged. */
static void test_random_values(void)
{
    static const char *kinds[] = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1"};
    for (int it = 0; it < 40; it++) {
        int layers = ts_rand_int(1, 100000), hidden = ts_rand_int(1, 1 << 20),
            heads = ts_rand_int(1, 1 << 16);
        int seq = ts_rand_int(1, 1 << 20), vocab = ts_rand_int(1, 1 << 24),
            m = ts_rand_int(1, 65536);
        int mbs = ts_rand_int(1, 65536), steps = ts_rand_int(1, 1000000),
            warm = ts_rand_int(0, 1000000);
        int kind = ts_rand_int(0, 3), count = ts_rand_int(1, 64), chunks = ts_rand_int(1, 16);
        uint64_t seed =
            ((uint64_t)ts_rand_int(0, 1 << 30) << 34) ^ (uint64_t)ts_rand_int(0, 1 << 30);
        double lr = ts_rand_int(0, 1000000) / 1e6, fwd = ts_rand_int(1, 1000000) / 1e3,
               bi = ts_rand_int(0, 99999) / 7.0;
        char y[2048];
        snprintf(y, sizeof y,
                 "model: {layers: %d, hidden: %d, heads: %d, seq_len: %d, vocab: %d}\n"
                 "pipeline: {devices: %d, chunks: %d, micro_batches: %d, micro_batch_size: %d}\n"
                 "schedule: {kind: %s}\n"
                 "run: {steps: %d, warmup: %d, seed: %llu, lr: %.17g}\n"
                 "cost: {forward: %.17g, backward_input: %.17g}\n",
                 layers, hidden, heads, seq, vocab, count, chunks, m, mbs, kinds[kind], steps, warm,
                 (unsigned long long)seed, lr, fwd, bi);
        pp_config_t c;
        REQUIRE(config_load_string(&c, "r.yaml", y, NULL, 0) == PP_OK, "%s", y);
        EXPECT(c.model.layers == layers && c.model.hidden == hidden && c.model.heads == heads);
        EXPECT(c.model.seq_len == seq && c.model.vocab == vocab);
        EXPECT(c.pipeline.n_devices == count && c.pipeline.device_ids[count - 1] == count - 1);
        EXPECT(c.pipeline.chunks == chunks && c.pipeline.micro_batches == m);
        EXPECT(c.pipeline.micro_batch_size == mbs && (int)c.schedule.kind == kind);
        EXPECT(c.run.steps == steps && c.run.warmup == warm && c.run.seed == seed);
        EXPECT(c.run.lr == lr && c.cost.forward == fwd && c.cost.backward_input == bi);
        config_free(&c);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Input errors, each with its place
 * ------------------------------------------------------------------------------------------- */

static void test_missing_file(void)
{
    const char *e;
    pp_status_t st = load_file_capture("tests/data/no_such_file.yaml", NO_RESOLVE, &e);
    TS_EXPECT_REJECT(st, e, "tests/data/no_such_file.yaml: No such file or directory");
    EXPECT(pp_status_exit_code(st) == 2);
}

static void test_syntax_errors(void)
{
    const char *e;
    pp_status_t st = load_file_capture("tests/data/bad_syntax.yaml", NO_RESOLVE, &e);
    TS_EXPECT_REJECT(st, e,
                     "tests/data/bad_syntax.yaml:3:2: invalid YAML: did not find expected key "
                     "(while parsing a block mapping at line 1)");
    EXPECT_LOAD_ERROR("name: x\nmodel: {layers: 24\n",
                      "t.yaml:3:1: invalid YAML: did not find expected ',' or '}' (while parsing "
                      "a flow mapping at line 2)");
    EXPECT_LOAD_ERROR("model:\n\tlayers: 3\n",
                      "t.yaml:2:1: invalid YAML: found character that cannot start any token "
                      "(while scanning for the next token at line 2)");
    /* A byte that is not UTF-8: libyaml gives an offset, we give its line and column. */
    EXPECT_LOAD_ERROR("model:\n  layers: 2\xff\n",
                      "t.yaml:2:12: invalid YAML: invalid leading UTF-8 octet");
    EXPECT_LOAD_ERROR("model:\n  layers: 24\n---\nrun:\n  steps: 3\n",
                      "t.yaml:3:1: a second YAML document starts here (allowed: one document per "
                      "file)");
    EXPECT_LOAD_ERROR("- model\n- run\n",
                      "t.yaml:1:1: expected a mapping of sections, got a list (allowed: name, "
                      "model, pipeline, schedule, run, cost, nccl)");
}

static void test_unknown_keys(void)
{
    const char *e;
    pp_status_t st = load_file_capture("tests/data/unknown_key.yaml", NO_RESOLVE, &e);
    TS_EXPECT_REJECT(
        st, e,
        "tests/data/unknown_key.yaml:5:3: unknown key 'microbatch_size' in pipeline "
        "(allowed: devices, stages, chunks, placement, micro_batches, micro_batch_size, "
        "transport, split, devices_per_process, data_parallel, reduce_bucket_mb, reduce_align)");
    EXPECT_LOAD_ERROR("model:\n  layers: 24\nmdoel:\n  hidden: 8\n",
                      "t.yaml:3:1: unknown section 'mdoel' (allowed: name, model, pipeline, "
                      "schedule, run, cost, nccl)");
    EXPECT_LOAD_ERROR("run:\n    steps: 3\n    lr_decay: 0.1\n",
                      "t.yaml:3:5: unknown key 'lr_decay' in run (allowed: steps, warmup, seed, "
                      "optimizer, lr, weight_decay, timeout, timing, graph, recompute, offload, "
                      "memory_limit, priorities, optimizer_sharding)");
    EXPECT_LOAD_ERROR("run:\n  offload: weights\n",
                      "t.yaml:2:12: run.offload: unknown value 'weights' (allowed: none, "
                      "activations, auto)");
    EXPECT_LOAD_ERROR(
        "cost: {host_link_gbps: -1}\n",
        "t.yaml:1:24: cost.host_link_gbps: -1 is out of range (allowed: 0 for the link table's "
        "host row, or a number >= 0.001 and <= 1e+06)");
    EXPECT_LOAD_ERROR("run:\n  recompute: partial\n",
                      "t.yaml:2:14: run.recompute: unknown value 'partial' (allowed: none, "
                      "selective, full)");
    EXPECT_LOAD_ERROR("cost: {forward: 1, recv: 2}\n",
                      "t.yaml:1:20: unknown key 'recv' in cost (allowed: forward, "
                      "backward_input, backward_weight, send, gpu, link, profile, "
                      "host_link_gbps, overlap)");
    EXPECT_LOAD_ERROR("schedule:\n  kind: 1f1b\n  step: []\n",
                      "t.yaml:3:3: unknown key 'step' in schedule (allowed: kind, steps, csv)");
}

static void test_wrong_types(void)
{
    EXPECT_LOAD_ERROR("model:\n  layers: abc\n",
                      "t.yaml:2:11: model.layers: 'abc' is not an integer (allowed: an integer "
                      "1..100000)");
    EXPECT_LOAD_ERROR("model:\n  layers: \"24\"\n",
                      "t.yaml:2:11: model.layers: \"24\" is a quoted string, not an integer "
                      "(allowed: an integer 1..100000)");
    EXPECT_LOAD_ERROR("model:\n  layers: 2.5\n",
                      "t.yaml:2:11: model.layers: '2.5' is not an integer (allowed: an integer "
                      "1..100000)");
    EXPECT_LOAD_ERROR("pipeline:\n  micro_batches: [8]\n",
                      "t.yaml:2:18: pipeline.micro_batches: expected an integer, got a list "
                      "(allowed: an integer 1..65536)");
    EXPECT_LOAD_ERROR("model:\n  layers:\n  hidden: 64\n",
                      "t.yaml:2:10: model.layers: no value given (allowed: an integer 1..100000)");
    EXPECT_LOAD_ERROR("model: 24\n",
                      "t.yaml:1:8: model.preset: unknown preset '24' (allowed: reference, small, "
                      "7b, 13b)");
    EXPECT_LOAD_ERROR("model: [24]\n",
                      "t.yaml:1:8: model: expected a mapping of keys, got a list (allowed: "
                      "preset, layers, hidden, heads, seq_len, vocab, dtype, layers_per_stage)");
    EXPECT_LOAD_ERROR("cost:\n  forward: fast\n",
                      "t.yaml:2:12: cost.forward: 'fast' is not a number (allowed: a number > 0 "
                      "and <= 1e+06)");
    EXPECT_LOAD_ERROR("run:\n  seed: 0x10\n",
                      "t.yaml:2:9: run.seed: '0x10' is not an integer (allowed: an integer "
                      "0..18446744073709551615)");
    EXPECT_LOAD_ERROR("pipeline:\n  devices: {0: 1}\n",
                      "t.yaml:2:12: pipeline.devices: expected a device list, got a mapping "
                      "(allowed: all, a count 1..64, or a list of CUDA ids such as [0, 1, 2, 3])");
    EXPECT_LOAD_ERROR("pipeline:\n  devices: some\n",
                      "t.yaml:2:12: pipeline.devices: 'some' is not an integer (allowed: all, a "
                      "count 1..64, or a list of CUDA ids such as [0, 1, 2, 3])");
    EXPECT_LOAD_ERROR("pipeline:\n  devices: [0, one]\n",
                      "t.yaml:2:16: pipeline.devices: 'one' is not an integer (allowed: a CUDA "
                      "device id 0..63)");
    EXPECT_LOAD_ERROR("pipeline:\n  stages: many\n",
                      "t.yaml:2:11: pipeline.stages: 'many' is not an integer (allowed: auto or "
                      "an integer 1..1024)");
    EXPECT_LOAD_ERROR("name: [a, b]\n",
                      "t.yaml:1:7: name: expected a string, got a list (allowed: a name such as "
                      "1f1b-8mb)");
    EXPECT_LOAD_ERROR("model:\n  dtype: [bf16]\n",
                      "t.yaml:2:10: model.dtype: expected one word, got a list (allowed: bf16, "
                      "fp32)");
}

static void test_out_of_range(void)
{
    EXPECT_LOAD_ERROR("model:\n  layers: 0\n",
                      "t.yaml:2:11: model.layers: 0 is out of range (allowed: an integer "
                      "1..100000)");
    EXPECT_LOAD_ERROR("model:\n  heads: -4\n",
                      "t.yaml:2:10: model.heads: -4 is out of range (allowed: an integer "
                      "1..65536)");
    EXPECT_LOAD_ERROR("pipeline:\n  micro_batches: 65537\n",
                      "t.yaml:2:18: pipeline.micro_batches: 65537 is out of range (allowed: an "
                      "integer 1..65536)");
    EXPECT_LOAD_ERROR("model:\n  vocab: 99999999999999999999999\n",
                      "t.yaml:2:10: model.vocab: 99999999999999999999999 is out of range "
                      "(allowed: an integer 1..16777216)");
    EXPECT_LOAD_ERROR("run:\n  lr: 1.5\n",
                      "t.yaml:2:7: run.lr: 1.5 is out of range (allowed: a number >= 0 and <= 1)");
    EXPECT_LOAD_ERROR("run:\n  timeout: 0\n",
                      "t.yaml:2:12: run.timeout: 0 is out of range (allowed: a number > 0 and <= "
                      "86400)");
    EXPECT_LOAD_ERROR("cost:\n  send: -0.5\n",
                      "t.yaml:2:9: cost.send: -0.5 is out of range (allowed: a number >= 0 and "
                      "<= 1e+06)");
    /* a host link so slow that an offload would take longer than a double holds */
    EXPECT_LOAD_ERROR("cost:\n  host_link_gbps: 1e-310\n",
                      "t.yaml:2:19: cost.host_link_gbps: 1e-310 is out of range (allowed: 0 for "
                      "the link table's host row, or a number >= 0.001 and <= 1e+06)");
    EXPECT_LOAD_ERROR("run:\n  seed: -1\n",
                      "t.yaml:2:9: run.seed: -1 is out of range (allowed: an integer "
                      "0..18446744073709551615)");
    EXPECT_LOAD_ERROR("run:\n  seed: 18446744073709551616\n",
                      "t.yaml:2:9: run.seed: 18446744073709551616 is out of range (allowed: an "
                      "integer 0..18446744073709551615)");
    EXPECT_LOAD_ERROR("pipeline:\n  devices: 65\n",
                      "t.yaml:2:12: pipeline.devices: 65 is out of range (allowed: all, a count "
                      "1..64, or a list of CUDA ids such as [0, 1, 2, 3])");
    EXPECT_LOAD_ERROR("pipeline:\n  devices: [0, 64]\n",
                      "t.yaml:2:16: pipeline.devices: 64 is out of range (allowed: a CUDA device "
                      "id 0..63)");
    EXPECT_LOAD_ERROR("pipeline:\n  devices: []\n",
                      "t.yaml:2:12: pipeline.devices: the device list is empty (allowed: all, a "
                      "count 1..64, or a list of CUDA ids such as [0, 1, 2, 3])");
    EXPECT_LOAD_ERROR("pipeline:\n  stages: 1025\n",
                      "t.yaml:2:11: pipeline.stages: 1025 is out of range (allowed: auto or an "
                      "integer 1..1024)");
}

static void test_enums(void)
{
    EXPECT_LOAD_ERROR("model:\n  dtype: fp16\n",
                      "t.yaml:2:10: model.dtype: unknown value 'fp16' (allowed: bf16, fp32)");
    EXPECT_LOAD_ERROR(
        "schedule:\n  kind: 2f2b\n",
        "t.yaml:2:9: schedule.kind: unknown value '2f2b' (allowed: gpipe, 1f1b, "
        "interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipe-v, looped-bfs, interleaved-zb, auto)");
    EXPECT_LOAD_ERROR("pipeline:\n  placement: zigzag\n",
                      "t.yaml:2:14: pipeline.placement: unknown value 'zigzag' (allowed: loop, "
                      "v)");
    EXPECT_LOAD_ERROR("pipeline:\n  transport: tcp\n",
                      "t.yaml:2:14: pipeline.transport: unknown value 'tcp' (allowed: peer, "
                      "nccl, ipc, auto)");
    EXPECT_LOAD_ERROR("run:\n  optimizer: sgd\n",
                      "t.yaml:2:14: run.optimizer: unknown value 'sgd' (allowed: none, adamw)");
    EXPECT_LOAD_ERROR("run:\n  timing: maybe\n",
                      "t.yaml:2:11: run.timing: unknown value 'maybe' (allowed: on, off, true, "
                      "false)");
    /* Every value that is allowed is accepted. */
    static const char *ok[] = {"schedule: {kind: gpipe}", "schedule: {kind: zb-h1}",
                               "run: {timing: true}",     "run: {timing: false}",
                               "run: {timing: on}",       "model: {dtype: fp32}",
                               "pipeline: {placement: v}"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *e;
        EXPECT(load_capture(ok[i], NULL, 0, NO_RESOLVE, &e) == PP_OK, "%s: %s", ok[i], e);
    }
    pp_config_t c;
    REQUIRE(config_load_string(&c, "t.yaml", "run: {timing: false}\nschedule: {kind: zb-h1}\n",
                               NULL, 0) == PP_OK);
    EXPECT(c.run.timing == 0 && c.schedule.kind == PP_SCHED_ZBH1);
    config_free(&c);
    /* nccl: and run.priorities: the defaults, each value, and the refusals */
    REQUIRE(config_load_string(&c, "t.yaml", "name: x\n", NULL, 0) == PP_OK);
    EXPECT(c.nccl.communicators == PP_NCCL_COMMS_PAIR && c.nccl.wait_for_peer == 1 &&
           c.nccl.max_ctas == 0 && c.nccl.cta_policy == PP_NCCL_CTA_DEFAULT &&
           c.run.priorities == 1);
    config_free(&c);
    REQUIRE(config_load_string(&c, "t.yaml",
                               "nccl: {communicators: device, wait_for_peer: off, max_ctas: 2, "
                               "cta_policy: zero}\nrun: {priorities: off}\n",
                               NULL, 0) == PP_OK);
    EXPECT(c.nccl.communicators == PP_NCCL_COMMS_DEVICE && c.nccl.wait_for_peer == 0 &&
           c.nccl.max_ctas == 2 && c.nccl.cta_policy == PP_NCCL_CTA_ZERO && c.run.priorities == 0);
    config_free(&c);
    EXPECT_LOAD_ERROR("nccl:\n  communicators: rank\n",
                      "t.yaml:2:18: nccl.communicators: unknown value 'rank' (allowed: pair, "
                      "device)");
    EXPECT_LOAD_ERROR("nccl:\n  cta_policy: fast\n",
                      "t.yaml:2:15: nccl.cta_policy: unknown value 'fast' (allowed: default, "
                      "efficiency, zero)");
}

static void test_duplicates(void)
{
    EXPECT_LOAD_ERROR("model:\n  layers: 24\n  hidden: 512\n  layers: 12\n",
                      "t.yaml:4:3: duplicate key 'layers' in model, first given at line 2 "
                      "(allowed: each key once)");
    EXPECT_LOAD_ERROR("run:\n  steps: 2\nmodel:\n  layers: 4\nrun:\n  warmup: 1\n",
                      "t.yaml:5:1: duplicate key 'run' in the top level, first given at line 1 "
                      "(allowed: each key once)");
    EXPECT_LOAD_ERROR("schedule:\n  steps:\n    0: [0F0, 0B0]\n    0: [1F0, 1B0]\n",
                      "t.yaml:4:5: schedule.steps: device 0 is given twice, first at line 3 "
                      "(allowed: each device once)");
}

/* ---------------------------------------------------------------------------------------------
 * Explicit steps and CSV
 * ------------------------------------------------------------------------------------------- */

static void test_steps(void)
{
    pp_config_t a, b;
    pp_job_t ja = {0}, jb = {0};
    pp_schedule_t sa, sb;
    /* The same schedule as a mapping (devices out of order) and as a list of lists. */
    REQUIRE(config_load_string(&a, "t.yaml",
                               "schedule:\n  steps:\n"
                               "    1: [1F0, 1F1, 1B0, 1B1, 3F0, 3B0, 3F1, 3B1]\n"
                               "    0: [0F0, 0F1, 2F0, 2F1, 2B0, 2B1, 0B0, 0B1]\n",
                               NULL, 0) == PP_OK);
    REQUIRE(config_load_string(&b, "t.yaml",
                               "schedule:\n  steps:\n"
                               "    - [0F0, 0F1, 2F0, 2F1, 2B0, 2B1, 0B0, 0B1]\n"
                               "    - [1F0, 1F1, 1B0, 1B1, 3F0, 3B0, 3F1, 3B1]\n",
                               NULL, 0) == PP_OK);
    /* What the config holds is what was written. */
    REQUIRE(a.schedule.steps.n == 16 && a.schedule.steps.n_devices == 2);
    EXPECT(!strcmp(a.schedule.steps.items[0].text, "0F0") && a.schedule.steps.items[0].line == 4);
    EXPECT(a.schedule.steps.items[8].device == 1 && a.schedule.steps.items[8].col == 9);
    REQUIRE(build_written(&ja, &a, &sa, 0) == PP_OK && build_written(&jb, &b, &sb, 0) == PP_OK);
    EXPECT(ts_same_schedule(&sa, &sb));
    const pp_schedule_t *s = &sa;
    EXPECT(a.schedule.kind == PP_SCHED_STEPS);
    EXPECT(s->n_devices == 2 && s->n_stages == 4 && s->n_mb == 2);
    EXPECT(s->stage_device[0] == 0 && s->stage_device[1] == 1 && s->stage_device[2] == 0 &&
           s->stage_device[3] == 1);
    EXPECT(s->prog[0].n == 8 && s->prog[0].a[2].stage == 2 && s->prog[0].a[2].kind == PP_ACT_F);
    /* pipeline.* default to what the steps imply. */
    EXPECT(!ja.pipeline.devices_all && ja.pipeline.n_devices == 2);
    EXPECT(ja.pipeline.stages == 4 && ja.pipeline.chunks == 2 && ja.pipeline.micro_batches == 2);
    EXPECT(ts_resolve(&ja, &a, 2) == PP_OK);
    EXPECT(ja.pipeline.stages == 4 && ja.pipeline.chunks == 2);
    schedule_free(&sa);
    schedule_free(&sb);
    job_free(&ja);
    job_free(&jb);
    config_free(&a);
    config_free(&b);

    /* Explicit values that agree are accepted; with communication written out too. */
    REQUIRE(config_load_string(&a, "t.yaml",
                               "pipeline: {devices: [1, 0], stages: 2, micro_batches: 1}\n"
                               "schedule:\n  steps:\n"
                               "    0: [0F0, 0SEND_F0, 0RECV_B0, 0B0]\n"
                               "    1: [1RECV_F0, 1F0, 1B0, 1SEND_B0]\n",
                               NULL, 0) == PP_OK);
    REQUIRE(build_written(&ja, &a, &sa, 2) == PP_OK);
    EXPECT(sa.has_comm == 1 && ja.pipeline.device_ids[0] == 1);
    EXPECT(ts_resolve(&ja, &a, 2) == PP_OK);
    schedule_free(&sa);
    job_free(&ja);
    config_free(&a);
}

static void test_steps_errors(void)
{
    const char *e;
    pp_status_t st = load_file_capture("tests/data/bad_action.yaml", NO_RESOLVE, &e);
    TS_EXPECT_REJECT(st, e,
                     "tests/data/bad_action.yaml:5:14: schedule.steps: device 1, step 3: '1X1' is "
                     "not an action " ACTION_ALLOWED);
    static const char *bad[] = {"F3", "0F", "0F1x", "-1F0", "0 F1", "0f1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char y[128], want[512];
        snprintf(y, sizeof y, "schedule:\n  steps: [[0F0, \"%s\"]]\n", bad[i]);
        snprintf(want, sizeof want,
                 "t.yaml:2:17: schedule.steps: device 0, step 1: '%s' is not an action %s\n",
                 bad[i], ACTION_ALLOWED);
        EXPECT(load_capture(y, NULL, 0, NO_RESOLVE, &e) == PP_ERR_INPUT);
        EXPECT(!strcmp(e, want), "\n    got:  %s    want: %s", e, want);
    }
    EXPECT_LOAD_ERROR("schedule:\n  steps:\n    0: [0F0, [0B0]]\n",
                      "t.yaml:3:14: schedule.steps: device 0, step 1: expected an action, got a "
                      "list " ACTION_ALLOWED);
    EXPECT_LOAD_ERROR("schedule:\n  steps:\n    0: [0F0, 1F0]\n    1: [1B0, 0B0]\n",
                      "t.yaml:4:9: schedule.steps: device 1, step 0: stage 1 already runs on "
                      "device 0 (line 3) (allowed: each stage on one device)");
    EXPECT_LOAD_ERROR("schedule:\n  steps:\n    0: [0F0, 0B0]\n    1: [2F0, 2B0]\n",
                      "t.yaml:3:5: schedule.steps: stage 1 has no action on any device (allowed: "
                      "every stage 0..2 on some device)");
    EXPECT_LOAD_ERROR("schedule:\n  steps:\n    0: [0F0, 0B0]\n    2: [1F0, 1B0]\n",
                      "t.yaml:3:5: schedule.steps: device 1 has no list (allowed: one list for "
                      "each device 0..2)");
    EXPECT_LOAD_ERROR("schedule:\n  steps:\n    0: [0F0, 0B0]\n    1: []\n",
                      "t.yaml:4:8: schedule.steps: device 1 has no actions (allowed: a list "
                      "of <stage><kind><micro-batch>, kind F, B, I, W, SEND_F, RECV_F, SEND_B or "
                      "RECV_B, e.g. 0F3, 1I2, 2SEND_F1)");
    EXPECT_LOAD_ERROR("schedule:\n  steps: [0F0, 0B0]\n",
                      "t.yaml:2:11: schedule.steps: device 0: expected a list of actions, got one "
                      "value (allowed: a mapping such as {0: [0F0, 0B0], 1: [1F0, 1B0]} or a list "
                      "of lists, one list of actions per device)");
    EXPECT_LOAD_ERROR("schedule:\n  steps:\n    x: [0F0]\n",
                      "t.yaml:3:5: schedule.steps: 'x' is not an integer (allowed: a device index "
                      "0..63)");
    EXPECT_LOAD_ERROR("schedule:\n  steps: [[0F65536]]\n",
                      "t.yaml:2:12: schedule.steps: device 0, step 0: micro-batch 65536 is out of "
                      "range (allowed: 0..65535)");
    EXPECT_LOAD_ERROR("schedule:\n  steps: [[1024F0]]\n",
                      "t.yaml:2:12: schedule.steps: device 0, step 0: stage 1024 is out of range "
                      "(allowed: 0..1023)");
    EXPECT_LOAD_ERROR("schedule:\n  kind: 1f1b\n  steps: [[0F0, 0B0]]\n",
                      "t.yaml:3:10: schedule.steps: schedule.kind is given too (allowed: one of "
                      "schedule.kind, steps or csv)");
    EXPECT_LOAD_ERROR("schedule:\n  steps: [[0F0, 0B0]]\n  kind: gpipe\n",
                      "t.yaml:3:9: schedule.kind: schedule.steps is given too (allowed: one of "
                      "schedule.kind, steps or csv)");
    EXPECT_LOAD_ERROR("schedule:\n  steps: [[0F0, 0B0]]\n  csv: x.csv\n",
                      "t.yaml:3:8: schedule.csv: schedule.steps is given too (allowed: one of "
                      "schedule.kind, steps or csv)");
    /* Explicit pipeline values that contradict the steps. */
    const char *two = "schedule:\n  steps: [[0F0, 0F1, 0B0, 0B1], [1F0, 1B0, 1F1, 1B1]]\n";
    char y[512];
    snprintf(y, sizeof y, "%spipeline:\n  micro_batches: 4\n", two);
    EXPECT_LOAD_ERROR(y, "t.yaml:4:18: pipeline.micro_batches: 4 micro-batches, but "
                         "schedule.steps has 2 (allowed: 2)");
    snprintf(y, sizeof y, "pipeline:\n  devices: [0, 1, 2]\n%s", two);
    EXPECT_LOAD_ERROR(y, "t.yaml:2:12: pipeline.devices: 3 devices, but schedule.steps uses 2 "
                         "(allowed: 2 devices)");
    snprintf(y, sizeof y, "pipeline:\n  stages: 4\n%s", two);
    EXPECT_LOAD_ERROR(y, "t.yaml:2:11: pipeline.stages: 4 stages, but schedule.steps has 2 "
                         "(allowed: 2 or auto)");
    snprintf(y, sizeof y, "pipeline:\n  chunks: 2\n%s", two);
    EXPECT_LOAD_ERROR(y, "t.yaml:2:11: pipeline.chunks: 2 chunks, but schedule.steps puts up to "
                         "1 stages on one device (allowed: 1)");
}

static void test_csv_schedule(void)
{
    pp_config_t c;
    pp_job_t jc = {0};
    pp_schedule_t sc;
    REQUIRE(config_load(&c, "tests/data/csv_ok.yaml", NULL, 0) == PP_OK);
    EXPECT(c.schedule.kind == PP_SCHED_CSV);
    EXPECT(c.schedule.csv_path && !strcmp(c.schedule.csv_path, "idle_crlf.csv"));
    REQUIRE(build_written(&jc, &c, &sc, 0) == PP_OK);
    const pp_schedule_t *s = &sc;
    EXPECT(s->n_devices == 2 && s->n_stages == 2 && s->n_mb == 2);
    EXPECT(s->prog[0].n == 4 && s->prog[1].n == 4);
    EXPECT(s->prog[1].a[0].stage == 1 && s->prog[1].a[0].kind == PP_ACT_F &&
           s->prog[1].a[0].mb == 0);
    EXPECT(jc.pipeline.n_devices == 2 && jc.pipeline.micro_batches == 2);
    EXPECT(ts_resolve(&jc, &c, 0) == PP_OK);
    schedule_free(&sc);
    job_free(&jc);
    config_free(&c);

    const char *e;
    pp_status_t st = load_file_capture("tests/data/csv_bad.yaml", NO_RESOLVE, &e);
    TS_EXPECT_REJECT(
        st, e,
        "tests/data/csv_bad_action.csv:2:13: cell 4: '1b1' is not an action " ACTION_ALLOWED);
    st = load_file_capture("tests/data/csv_missing.yaml", NO_RESOLVE, &e);
    TS_EXPECT_REJECT(st, e,
                     "tests/data/csv_missing.yaml:2:8: schedule.csv: cannot open "
                     "tests/data/no_such_schedule.csv: No such file or directory");
}

/* ---------------------------------------------------------------------------------------------
 * --set overrides
 * ------------------------------------------------------------------------------------------- */

static void test_set(void)
{
    for (int it = 0; it < 20; it++) {
        int layers = ts_rand_int(1, 100000), m = ts_rand_int(1, 65536), a = ts_rand_int(0, 63),
            b = ts_rand_int(0, 63);
        if (b == a) b = (a + 1) % 64;
        double lr = ts_rand_int(0, 1000000) / 1e6;
        char s1[64], s2[64], s3[64], s4[64];
        snprintf(s1, sizeof s1, "model.layers=%d", layers);
        snprintf(s2, sizeof s2, "pipeline.micro_batches=%d", m);
        snprintf(s3, sizeof s3, "pipeline.devices=[%d, %d]", a, b);
        snprintf(s4, sizeof s4, "run.lr=%.17g", lr);
        const char *sets[] = {s1,           s2, s3, s4, "model.dtype=fp32", "schedule.kind=zb-h1",
                              "name=custom"};
        pp_config_t c;
        /* The file says otherwise: the overrides win. */
        REQUIRE(config_load(&c, "tests/data/minimal.yaml", sets, 7) == PP_OK);
        EXPECT(c.model.layers == layers && c.pipeline.micro_batches == m);
        EXPECT(c.pipeline.n_devices == 2 && c.pipeline.device_ids[0] == a &&
               c.pipeline.device_ids[1] == b);
        EXPECT(c.run.lr == lr && c.model.dtype == PP_DTYPE_FP32);
        EXPECT(c.schedule.kind == PP_SCHED_ZBH1 && !strcmp(c.name, "custom"));
        config_free(&c);
    }
    /* Later overrides win over earlier ones; counts, all, auto. */
    const char *sets[] = {"pipeline.devices=3",       "pipeline.stages=6",
                          "pipeline.stages=auto",     "pipeline.devices=all",
                          "pipeline.micro_batches=4", "pipeline.micro_batches=5"};
    pp_config_t c;
    pp_job_t jc = {0};
    REQUIRE(config_load_string(&c, "t.yaml", "pipeline: {devices: [0]}\n", sets, 6) == PP_OK);
    EXPECT(c.pipeline.devices_all && c.pipeline.stages == 0 && c.pipeline.micro_batches == 5);
    EXPECT(ts_resolve(&jc, &c, 3) == PP_OK);
    EXPECT(jc.pipeline.n_devices == 3 && jc.pipeline.stages == 3);
    job_free(&jc);
    config_free(&c);
    /* Steps as an override. */
    const char *st[] = {"schedule.steps=[[0F0, 0B0], [1F0, 1B0]]"};
    pp_schedule_t ss;
    REQUIRE(config_load_string(&c, "t.yaml", "", st, 1) == PP_OK);
    REQUIRE(build_written(&jc, &c, &ss, 0) == PP_OK);
    EXPECT(c.schedule.kind == PP_SCHED_STEPS && ss.n_devices == 2);
    EXPECT(jc.pipeline.n_devices == 2 && jc.pipeline.micro_batches == 1);
    schedule_free(&ss);
    job_free(&jc);
    config_free(&c);

    EXPECT_SET_ERROR("model.layers=abc",
                     "--set model.layers=abc: 'abc' is not an integer (allowed: an integer "
                     "1..100000)");
    EXPECT_SET_ERROR("model.layers=0",
                     "--set model.layers=0: 0 is out of range (allowed: an integer 1..100000)");
    EXPECT_SET_ERROR("model.dtype=fp8",
                     "--set model.dtype=fp8: unknown value 'fp8' (allowed: bf16, fp32)");
    EXPECT_SET_ERROR("model.layer=3",
                     "--set model.layer=3: unknown key 'layer' in model (allowed: preset, layers, "
                     "hidden, heads, seq_len, vocab, dtype, layers_per_stage)");
    EXPECT_SET_ERROR("modle.layers=3",
                     "--set modle.layers=3: unknown section 'modle' (allowed: name, model, "
                     "pipeline, schedule, run, cost, nccl)");
    EXPECT_SET_ERROR("layers=3",
                     "--set layers=3: 'layers' is not a key (allowed: name, model=PRESET, or "
                     "section.key with section one of model, pipeline, schedule, run, cost)");
    EXPECT_SET_ERROR("pipeline=7b",
                     "--set pipeline=7b: 'pipeline' is not a key (allowed: name, model=PRESET, or "
                     "section.key with section one of model, pipeline, schedule, run, cost)");
    EXPECT_SET_ERROR("model.layers",
                     "--set model.layers: expected section.key=value (allowed: e.g. "
                     "pipeline.micro_batches=16)");
    EXPECT_SET_ERROR("model.layers=",
                     "--set model.layers=: no value after '=' (allowed: a YAML scalar or flow "
                     "list)");
    EXPECT_SET_ERROR("pipeline.devices=[0, 1",
                     "--set pipeline.devices=[0, 1: invalid value: did not find expected ',' or "
                     "']' (allowed: a YAML scalar or flow list)");
    EXPECT_SET_ERROR("schedule.steps=[[0F0, 0Q0]]",
                     "--set schedule.steps=[[0F0, 0Q0]]: device 0, step 1: '0Q0' is not an "
                     "action " ACTION_ALLOWED);
    /* A flag that stands for one key is named as typed: the flag and the value. */
    EXPECT_SET_ERROR("--gpu= cost.gpu=h1000",
                     "--gpu h1000: unknown GPU 'h1000' (allowed: a100, h100, h200, b200)");
    EXPECT_SET_ERROR("--timeout= run.timeout=inf",
                     "--timeout inf: 'inf' is not a number (allowed: a number > 0 and <= 86400)");
    EXPECT_SET_ERROR("--sweep model.layers=0",
                     "--sweep model.layers=0: 0 is out of range (allowed: an integer 1..100000)");
    /* A resolve problem caused by an override names the override. */
    const char *e;
    const char *few[] = {"pipeline.micro_batches=2"};
    pp_status_t s = load_capture("pipeline:\n  devices: 4\n", few, 1, 4, &e);
    TS_EXPECT_REJECT(s, e,
                     "--set pipeline.micro_batches=2: 1f1b needs at least as many micro-batches as "
                     "devices: 2 < 4 (allowed: 4 or more)");
    /* An override of steps must agree with them. */
    const char *mb[] = {"schedule.steps=[[0F0, 0B0], [1F0, 1B0]]", "pipeline.micro_batches=3"};
    s = load_capture("", mb, 2, NO_RESOLVE, &e);
    TS_EXPECT_REJECT(s, e,
                     "--set pipeline.micro_batches=3: 3 micro-batches, but schedule.steps has 1 "
                     "(allowed: 1)");
}

/* ---------------------------------------------------------------------------------------------
 * job_resolve
 * ------------------------------------------------------------------------------------------- */

static void test_resolve_ok(void)
{
    pp_config_t c;
    pp_job_t jc = {0};
    /* all: the visible devices, or 4 when unknown. */
    for (int nv = -1; nv <= 8; nv++) {
        REQUIRE(config_load_string(&c, "t.yaml", "model: {layers: 840}\n", NULL, 0) == PP_OK);
        EXPECT(ts_resolve(&jc, &c, nv) == PP_OK, "n_visible %d", nv);
        int want = nv > 0 ? nv : 4;
        EXPECT(jc.pipeline.n_devices == want && jc.pipeline.stages == want);
        EXPECT(jc.pipeline.chunks == 1 && jc.pipeline.device_ids[want - 1] == want - 1);
        job_free(&jc);
        config_free(&c);
    }
    /* interleaved without chunks or stages: v = 2. */
    REQUIRE(config_load_string(&c, "t.yaml", "schedule: {kind: interleaved-1f1b}\n", NULL, 0) ==
            PP_OK);
    EXPECT(c.pipeline.chunks == 2);
    EXPECT(ts_resolve(&jc, &c, 4) == PP_OK);
    EXPECT(jc.pipeline.stages == 8 && jc.pipeline.chunks == 2);
    job_free(&jc);
    config_free(&c);
    /* ... and with stages given, v = stages / devices. */
    REQUIRE(config_load_string(&c, "t.yaml",
                               "schedule: {kind: interleaved-1f1b}\n"
                               "pipeline: {stages: 12, devices: 4}\n",
                               NULL, 0) == PP_OK);
    EXPECT(ts_resolve(&jc, &c, 4) == PP_OK);
    EXPECT(jc.pipeline.stages == 12 && jc.pipeline.chunks == 3);
    job_free(&jc);
    config_free(&c);
    /* stages: auto explicitly is the same as not given. */
    REQUIRE(config_load_string(&c, "t.yaml",
                               "schedule: {kind: interleaved-1f1b}\npipeline: {stages: auto}\n",
                               NULL, 0) == PP_OK);
    EXPECT(c.pipeline.chunks == 2);
    config_free(&c);
    /* Unknown device count: ids are not checked against it. */
    REQUIRE(config_load_string(&c, "t.yaml", "pipeline: {devices: [7, 9, 11, 13]}\n", NULL, 0) ==
            PP_OK);
    EXPECT(ts_resolve(&jc, &c, -1) == PP_OK);
    job_free(&jc);
    config_free(&c);
    /* Steps with devices: all and nothing visible: the steps' count. */
    REQUIRE(config_load_string(&c, "t.yaml",
                               "pipeline: {devices: all}\nschedule: {steps: [[0F0, 0B0], [1F0, "
                               "1B0], [2F0, 2B0]]}\nmodel: {layers: 3}\n",
                               NULL, 0) == PP_OK);
    pp_schedule_t sw;
    EXPECT(build_written(&jc, &c, &sw, 0) == PP_OK);
    EXPECT(ts_resolve(&jc, &c, 0) == PP_OK);
    EXPECT(jc.pipeline.n_devices == 3 && jc.pipeline.stages == 3 && jc.pipeline.chunks == 1);
    schedule_free(&sw);
    job_free(&jc);
    config_free(&c);
}

static void test_resolve_errors(void)
{
    /* layers % stages, blaming whichever key made the stage count. */
    EXPECT_RESOLVE_ERROR(
        "", 5,
        "t.yaml: pipeline.devices: 24 layers do not split into 5 stages "
        "(allowed: a divisor of 24, model.layers_per_stage or pipeline.split: balanced)");
    EXPECT_RESOLVE_ERROR(
        "pipeline:\n  devices: 4\n  stages: 16\n", 4,
        "t.yaml:3:11: pipeline.stages: 24 layers do not split into 16 stages "
        "(allowed: a divisor of 24, model.layers_per_stage or pipeline.split: balanced)");
    EXPECT_RESOLVE_ERROR(
        "model:\n  layers: 10\n", 4,
        "t.yaml:2:11: model.layers: 10 layers do not split into 4 stages "
        "(allowed: a divisor of 10, model.layers_per_stage or pipeline.split: balanced)");
    /* A --set override is blamed before the file's keys. */
    {
        pp_config_t c;
        pp_job_t jc = {0};
        const char *sets[] = {"model.layers=7"};
        REQUIRE(config_load_string(&c, "t.yaml", "pipeline:\n  devices: 4\n", sets, 1) == PP_OK);
        ts_capture_begin();
        pp_status_t st = ts_resolve(&jc, &c, 4);
        const char *err = ts_capture_end();
        EXPECT(st == PP_ERR_INPUT);
        EXPECT(strcmp(err,
                      "--set model.layers=7: 7 layers do not split into 4 stages (allowed: a "
                      "divisor of 7, model.layers_per_stage or pipeline.split: balanced)\n") == 0,
               "got: %s", err);
        job_free(&jc);
        config_free(&c);
    }
    EXPECT_RESOLVE_ERROR("model:\n  hidden: 1000\n", 4,
                         "t.yaml:2:11: model.hidden: hidden 1000 does not split into 16 heads "
                         "(allowed: a divisor of 1000)");
    EXPECT_RESOLVE_ERROR("model:\n  hidden: 1024\n  heads: 24\n", 4,
                         "t.yaml:3:10: model.heads: hidden 1024 does not split into 24 heads "
                         "(allowed: a divisor of 1024)");
    /* chunks */
    EXPECT_RESOLVE_ERROR("pipeline:\n  stages: 6\n", 4,
                         "t.yaml:2:11: pipeline.stages: 6 stages do not split evenly over 4 "
                         "devices (allowed: a multiple of 4)");
    EXPECT_RESOLVE_ERROR("pipeline:\n  stages: 6\n  chunks: 2\n", 4,
                         "t.yaml:2:11: pipeline.stages: 6 stages, but 4 devices x 2 chunks = 8 "
                         "(allowed: 8, or auto)");
    EXPECT_RESOLVE_ERROR("schedule:\n  kind: gpipe\npipeline:\n  chunks: 2\n", 4,
                         "t.yaml:4:11: pipeline.chunks: gpipe runs one stage per device, but 8 "
                         "stages on 4 devices make 2 chunks (allowed: chunks 1; interleaved-1f1b "
                         "runs several)");
    EXPECT_RESOLVE_ERROR("schedule:\n  kind: zb-h1\npipeline:\n  stages: 8\n", 4,
                         "t.yaml:4:11: pipeline.stages: zb-h1 runs one stage per device, but 8 "
                         "stages on 4 devices make 2 chunks (allowed: chunks 1; interleaved-1f1b "
                         "runs several)");
    EXPECT_RESOLVE_ERROR("schedule:\n  kind: interleaved-1f1b\npipeline:\n  chunks: 1\n", 4,
                         "t.yaml:4:11: pipeline.chunks: interleaved-1f1b needs at least 2 chunks "
                         "per device, but 4 stages on 4 devices make 1 (allowed: chunks 2 or "
                         "more)");
    /* micro-batches */
    EXPECT_RESOLVE_ERROR("schedule:\n  kind: interleaved-1f1b\npipeline:\n  micro_batches: 6\n", 4,
                         "t.yaml:4:18: pipeline.micro_batches: interleaved-1f1b needs "
                         "micro-batches in multiples of the device count: 6 is not a multiple of "
                         "4 (allowed: a multiple of 4)");
    EXPECT_RESOLVE_ERROR("pipeline:\n  micro_batches: 2\n", 4,
                         "t.yaml:2:18: pipeline.micro_batches: 1f1b needs at least as many "
                         "micro-batches as devices: 2 < 4 (allowed: 4 or more)");
    EXPECT_RESOLVE_ERROR("schedule:\n  kind: zb-h1\npipeline:\n  micro_batches: 3\n", 4,
                         "t.yaml:4:18: pipeline.micro_batches: zb-h1 needs at least as many "
                         "micro-batches as devices: 3 < 4 (allowed: 4 or more)");
    /* GPipe needs no more micro-batches than one. */
    const char *e;
    EXPECT(load_capture("schedule: {kind: gpipe}\npipeline: {micro_batches: 1}\n", NULL, 0, 4,
                        &e) == PP_OK,
           "%s", e);
    /* devices */
    EXPECT_RESOLVE_ERROR("pipeline:\n  devices: [0, 5]\nmodel:\n  layers: 2\n", 4,
                         "t.yaml:2:12: pipeline.devices: device 5 does not exist (allowed: 0..3)");
    EXPECT_RESOLVE_ERROR("pipeline:\n  devices: 2\nmodel:\n  layers: 2\n", 1,
                         "t.yaml:2:12: pipeline.devices: device 1 does not exist (allowed: 0)");
    EXPECT_RESOLVE_ERROR("pipeline:\n  devices: all\nschedule:\n  steps: [[0F0, 0B0], [1F0, "
                         "1B0]]\n",
                         4,
                         "t.yaml:2:12: pipeline.devices: all = 4 devices, but schedule.steps "
                         "uses 2 (allowed: 2 devices)");
    EXPECT_RESOLVE_ERROR("schedule:\n  steps: [[0F0, 0B0], [1F0, 1B0], [2F0, 2B0]]\n", 2,
                         "t.yaml: pipeline.devices: device 2 does not exist (allowed: 0..1)");
    /* Several pipeline devices on one GPU: allowed, but not over nccl (a GPU per rank). */
    pp_config_t c;
    pp_job_t jc = {0};
    const char *sets[] = {"pipeline.devices=[0, 0, 0, 0]"};
    REQUIRE(config_load_string(&c, "t.yaml", "pipeline: {devices: [0, 2, 0]}\n", NULL, 0) == PP_OK);
    EXPECT(ts_resolve(&jc, &c, 4) == PP_OK && jc.pipeline.n_devices == 3);
    int a = -1, b = -1;
    EXPECT(job_shared_gpu(&jc, &a, &b) && a == 0 && b == 2, "%d %d", a, b);
    job_free(&jc);
    config_free(&c);
    REQUIRE(config_load_string(&c, "t.yaml", "", sets, 1) == PP_OK);
    EXPECT(ts_resolve(&jc, &c, 1) == PP_OK && jc.pipeline.n_devices == 4);
    job_free(&jc);
    config_free(&c);
    REQUIRE(config_load_string(&c, "t.yaml", "pipeline: {devices: 2}\n", NULL, 0) == PP_OK);
    EXPECT(ts_resolve(&jc, &c, 4) == PP_OK && !job_shared_gpu(&jc, NULL, NULL));
    job_free(&jc);
    config_free(&c);
    EXPECT_RESOLVE_ERROR("pipeline:\n  devices: [1, 0, 1]\n  transport: nccl\n", 2,
                         "t.yaml:3:14: pipeline.transport: nccl needs a GPU per pipeline device, "
                         "but pipeline.devices puts devices 0 and 2 on CUDA device 1 (allowed: "
                         "peer or auto, or a CUDA device per pipeline device)");
}

/* ---------------------------------------------------------------------------------------------
 * The shipped schedules
 * ------------------------------------------------------------------------------------------- */

/* Layers per stage: even by default, as listed, or balanced by the cost model's stage times (the
 * LM head on the last stage weighs against its blocks); split_stage_layers reads them back. */
static void test_layers_split(void)
{
    pp_config_t c;
    pp_job_t jc = {0};
    REQUIRE(config_load_string(&c, "t.yaml", "pipeline: {devices: 4}\n", NULL, 0) == PP_OK);
    REQUIRE(ts_resolve(&jc, &c, 4) == PP_OK);
    EXPECT(jc.model.n_layers_per_stage == 4 && jc.model.layers_per_stage[3] == 6);
    job_free(&jc);
    config_free(&c);
    REQUIRE(config_load_string(&c, "t.yaml",
                               "pipeline: {devices: 4}\nmodel: {layers_per_stage: [5, 6, 6, 7]}\n",
                               NULL, 0) == PP_OK);
    REQUIRE(ts_resolve(&jc, &c, 4) == PP_OK);
    int n, first;
    split_stage_layers(&jc, 4, 3, &n, &first);
    EXPECT(n == 7 && first == 17, "stage 3: %d layers from %d", n, first);
    split_stage_layers(&jc, 4, 0, &n, &first);
    EXPECT(n == 5 && first == 0);
    job_free(&jc);
    config_free(&c);
    /* Water-filling: a head of about three blocks on the last stage, then an embedding of two
     * blocks on the first and a head of two on the last. */
    int out[4];
    split_balanced(out, 4, 26, 1.0, 0.0, 3.04);
    EXPECT(out[0] == 8 && out[1] == 7 && out[2] == 7 && out[3] == 4, "%d %d %d %d", out[0], out[1],
           out[2], out[3]);
    split_balanced(out, 4, 24, 1.0, 2.0, 2.0);
    EXPECT(out[0] == 5 && out[1] == 7 && out[2] == 7 && out[3] == 5, "%d %d %d %d", out[0], out[1],
           out[2], out[3]);
    /* balanced from the cost model's stage times: the reference model with vocab 50304 (a head
     * of two to three blocks, an embedding under one) goes 6, 7, 7, 4; with vocab 8192 (a head
     * under one block) evenly. */
    REQUIRE(config_load_string(&c, "t.yaml",
                               "pipeline: {devices: 4, split: balanced}\nmodel: {vocab: 50304}\n",
                               NULL, 0) == PP_OK);
    REQUIRE(ts_resolve(&jc, &c, 4) == PP_OK);
    EXPECT(jc.model.layers_per_stage[0] == 6 && jc.model.layers_per_stage[1] == 7 &&
               jc.model.layers_per_stage[2] == 7 && jc.model.layers_per_stage[3] == 4,
           "%d %d %d %d", jc.model.layers_per_stage[0], jc.model.layers_per_stage[1],
           jc.model.layers_per_stage[2], jc.model.layers_per_stage[3]);
    double block, embed, head;
    split_part_ms(&jc, &block, &embed, &head);
    EXPECT(block > 0 && embed > 0 && head > 2 * block, "block %g embed %g head %g", block, embed,
           head);
    job_free(&jc);
    config_free(&c);
    REQUIRE(config_load_string(&c, "t.yaml",
                               "pipeline: {devices: 4, split: balanced}\nmodel: {vocab: 8192}\n",
                               NULL, 0) == PP_OK);
    REQUIRE(ts_resolve(&jc, &c, 4) == PP_OK);
    EXPECT(jc.model.layers_per_stage[0] == 6 && jc.model.layers_per_stage[3] == 6, "%d .. %d",
           jc.model.layers_per_stage[0], jc.model.layers_per_stage[3]);
    job_free(&jc);
    config_free(&c);
    /* balanced needs no divisor; even does. */
    EXPECT_RESOLVE_ERROR("pipeline: {devices: 4}\nmodel: {layers_per_stage: [6, 6, 6]}\n", 4,
                         "t.yaml:2:27: model.layers_per_stage: 3 entries for 4 stages (allowed: "
                         "one entry per stage)");
    EXPECT_RESOLVE_ERROR("pipeline: {devices: 4}\nmodel: {layers_per_stage: [6, 6, 6, 5]}\n", 4,
                         "t.yaml:2:27: model.layers_per_stage: the entries sum to 23, but "
                         "model.layers is 24 (allowed: entries summing to 24)");
    EXPECT_RESOLVE_ERROR("pipeline: {devices: 2, split: balanced}\n"
                         "model: {layers_per_stage: [12, 12]}\n",
                         2,
                         "t.yaml:1:31: pipeline.split: balanced, but model.layers_per_stage "
                         "lists the split too (allowed: one of them)");
    EXPECT_SET_ERROR("pipeline.split=uneven",
                     "--set pipeline.split=uneven: unknown value 'uneven' (allowed: even, "
                     "balanced)");
}

static void test_shipped_schedules(void)
{
    glob_t g;
    REQUIRE(glob("schedules/*.yaml", 0, NULL, &g) == 0, "no schedules/*.yaml (run from the root)");
    EXPECT(g.gl_pathc >= 5, "%zu files", (size_t)g.gl_pathc);
    /* Each on no GPU and on as many as it uses: 4, or the count it names (13b-1f1b.yaml: 8). */
    for (size_t i = 0; i < g.gl_pathc; i++) {
        for (int pass = 0, want = 4; pass < 2; pass++) {
            pp_config_t c;
            pp_job_t jc = {0};
            const char *e;
            int nv = pass ? want : 0;
            ts_capture_begin();
            pp_status_t st = config_load(&c, g.gl_pathv[i], NULL, 0);
            if (st == PP_OK && config_is_set(&c, PP_CFG_DEVICES) && !c.pipeline.devices_all)
                want = c.pipeline.n_devices;
            if (st == PP_OK) st = ts_resolve(&jc, &c, nv);
            e = ts_capture_end();
            EXPECT(st == PP_OK, "%s with %d devices: %s", g.gl_pathv[i], nv, e);
            EXPECT(st != PP_OK || jc.pipeline.n_devices == want, "%s", g.gl_pathv[i]);
            job_free(&jc);
            config_free(&c);
        }
    }
    globfree(&g);

    /* The main job's reference setup. */
    pp_config_t c;
    pp_job_t jc = {0};
    REQUIRE(config_load(&c, "schedules/1f1b.yaml", NULL, 0) == PP_OK);
    EXPECT(c.model.layers == 24 && c.model.hidden == 1024 && c.model.heads == 16);
    EXPECT(c.model.seq_len == 1024 && c.model.vocab == 8192 && c.model.dtype == PP_DTYPE_BF16);
    EXPECT(c.pipeline.micro_batch_size == 4 && c.pipeline.micro_batches == 8);
    EXPECT(c.pipeline.devices_all && c.pipeline.transport == PP_TRANSPORT_AUTO);
    EXPECT(c.schedule.kind == PP_SCHED_1F1B);
    config_free(&c);

    static const struct {
        const char *path;
        pp_sched_kind_t kind;
        int chunks;
    } want[] = {
        {"schedules/gpipe.yaml", PP_SCHED_GPIPE, 1},
        {"schedules/interleaved.yaml", PP_SCHED_INTERLEAVED, 2},
        {"schedules/zb-h1.yaml", PP_SCHED_ZBH1, 1},
        {"schedules/zb-h2.yaml", PP_SCHED_ZBH2, 1},
        {"schedules/zb-v.yaml", PP_SCHED_ZBV, 2},
        {"schedules/dualpipe-v.yaml", PP_SCHED_DUALPIPEV, 2},
        {"schedules/looped-bfs.yaml", PP_SCHED_LOOPED_BFS, 2},
        {"schedules/interleaved-zb.yaml", PP_SCHED_INTERLEAVED_ZB, 2},
        {"schedules/auto.yaml", PP_SCHED_AUTO, 1},
        {"schedules/explicit.yaml", PP_SCHED_STEPS, 1},
        {"schedules/csv.yaml", PP_SCHED_CSV, 1},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        pp_schedule_t sw;
        REQUIRE(config_load(&c, want[i].path, NULL, 0) == PP_OK, "%s", want[i].path);
        EXPECT(build_written(&jc, &c, &sw, 4) == PP_OK, "%s", want[i].path);
        EXPECT(ts_resolve(&jc, &c, 4) == PP_OK);
        EXPECT(c.schedule.kind == want[i].kind && jc.pipeline.chunks == want[i].chunks, "%s",
               want[i].path);
        if (sw.n_devices) EXPECT(sw.n_mb == 8, "%s", want[i].path);
        schedule_free(&sw);
        job_free(&jc);
        config_free(&c);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Counts
 * ------------------------------------------------------------------------------------------- */

static void test_counts(void)
{
    pp_job_t c;
    ts_job_defaults(&c);
    EXPECT_NEAR(job_tokens_per_step(&c, c.pipeline.micro_batches), 8.0 * 4 * 1024, 0, 0);
    /* Reference model: 24 x (24 h^2 + 4 s h) + 2 h V per token, x 3, x 32768 tokens. */
    EXPECT_NEAR(job_flops_per_step(&c, c.pipeline.micro_batches), 3.0 * 721420288.0 * 32768.0, 0,
                1e-15);
    job_free(&c);
    for (int it = 0; it < 50; it++) {
        ts_job_defaults(&c);
        double L = c.model.layers = ts_rand_int(1, 200), h = c.model.hidden = ts_rand_int(1, 16384);
        double s = c.model.seq_len = ts_rand_int(1, 32768),
               V = c.model.vocab = ts_rand_int(1, 300000);
        double m = c.pipeline.micro_batches = ts_rand_int(1, 4096);
        double b = c.pipeline.micro_batch_size = ts_rand_int(1, 64);
        double tokens = m * b * s;
        /* Each matmul of one token's forward, as 2 x its multiply-adds. */
        double qkv = 2 * h * 3 * h, proj = 2 * h * h, up = 2 * h * 4 * h, down = 2 * 4 * h * h;
        double qk = 2 * s * h, pv = 2 * s * h, head = 2 * h * V;
        double fwd = L * (qkv + proj + up + down + qk + pv) + head;
        EXPECT_NEAR(job_tokens_per_step(&c, c.pipeline.micro_batches), tokens, 0, 1e-15);
        EXPECT_NEAR(job_flops_per_step(&c, c.pipeline.micro_batches), 3 * fwd * tokens, 0, 1e-12);
        job_free(&c);
    }
    EXPECT(!strcmp(sched_kind_name(PP_SCHED_GPIPE), "gpipe"));
    EXPECT(!strcmp(sched_kind_name(PP_SCHED_1F1B), "1f1b"));
    EXPECT(!strcmp(sched_kind_name(PP_SCHED_INTERLEAVED), "interleaved-1f1b"));
    EXPECT(!strcmp(sched_kind_name(PP_SCHED_ZBH1), "zb-h1"));
    EXPECT(!strcmp(sched_kind_name(PP_SCHED_STEPS), "steps"));
    EXPECT(!strcmp(sched_kind_name(PP_SCHED_CSV), "csv"));
}

/* The role table: communication (send, recv) runs at the greater priority, on a channel per
 * directed device pair (one stream per peer device); every other role has one stream per device;
 * compute and overlap (an overlapped pair's second compute stream) run compute ops, the copies'
 * roles (offload, load) do not; reduce (the reductions across replicas) runs at the greater
 * priority on one stream per device. Channels are laid out role by role. */
static void test_role_table(void)
{
    for (int r = 0; r < PP_ROLE_COUNT; r++) {
        const pp_role_row_t *row = pp_role_row((pp_role_t)r);
        int comm = r == PP_ROLE_SEND || r == PP_ROLE_RECV;
        int computes = r == PP_ROLE_COMPUTE || r == PP_ROLE_OVERLAP;
        EXPECT(row->per_peer == comm && row->high_priority == (comm || r == PP_ROLE_REDUCE) &&
                   row->computes == computes,
               "%s", row->name);
    }
    EXPECT(!strcmp(pp_role_row((pp_role_t)99)->name, "compute"));
    const int n = 3;
    EXPECT(pp_channel_count(n) == 5 * n + 2 * n * n);
    EXPECT(pp_channel_of(n, 2, PP_ROLE_COMPUTE, 0) == 2);
    EXPECT(pp_channel_of(n, 1, PP_ROLE_SEND, 2) == n + 1 * n + 2);
    EXPECT(pp_channel_of(n, 1, PP_ROLE_RECV, 2) == n + n * n + 1 * n + 2);
    EXPECT(pp_channel_of(n, 1, PP_ROLE_OFFLOAD, 0) == n + 2 * n * n + 1);
    EXPECT(pp_channel_of(n, 1, PP_ROLE_LOAD, 0) == 2 * n + 2 * n * n + 1);
    EXPECT(pp_channel_of(n, 2, PP_ROLE_OVERLAP, 0) == 3 * n + 2 * n * n + 2);
    EXPECT(pp_channel_count(PP_MAX_DEVICES) <= PP_MAX_CHANNELS);
}

/* The transport table: the selectable rows are found by name (and listed in that order), the
 * others are not; a transport whose send half moves the bytes into the receiver's buffer cannot
 * cross processes, and one that crosses processes crosses devices; at every reach one row is
 * auto's pick, and it can serve that reach. */
static void test_transport_table(void)
{
    char list[128];
    transport_list(list, sizeof list);
    EXPECT(!strcmp(list, "peer, nccl, ipc, auto"), "%s", list);
    transport_list_crossing(list, sizeof list);
    EXPECT(!strcmp(list, "nccl, ipc, auto"), "%s", list);
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++) {
        const pp_transport_row_t *r = transport_row((pp_transport_t)t);
        EXPECT(transport_find(r->name) == (r->selectable ? t : -1), "%s", r->name);
        EXPECT(!(r->send_moves_bytes && r->crosses_processes), "%s", r->name);
        EXPECT(!r->crosses_processes || r->crosses_devices, "%s", r->name);
        EXPECT(!r->selectable || r->crosses_devices || t == PP_TRANSPORT_AUTO, "%s", r->name);
        EXPECT(!r->crosses_devices == !r->link, "%s: a link row exactly when it crosses devices",
               r->name);
        EXPECT(!r->link || link_find(r->link), "%s: link %s", r->name, r->link ? r->link : "-");
    }
    for (int reach = 0; reach < PP_REACH_COUNT; reach++) {
        int best = 0, ties = 0;
        for (int t = 0; t < PP_TRANSPORT_COUNT; t++) {
            int v = transport_row((pp_transport_t)t)->pick[reach];
            ties = v == best ? ties + 1 : v > best ? 1 : ties;
            best = v > best ? v : best;
        }
        EXPECT(best > 0 && ties == 1, "reach %s: the pick %d is not one row's",
               transport_reach_name((pp_reach_t)reach), best);
        const pp_transport_row_t *r =
            transport_row(transport_for_boundary((pp_reach_t)reach, PP_TRANSPORT_AUTO));
        EXPECT(r->crosses_devices == (reach >= PP_REACH_GPU), "reach %s: %s",
               transport_reach_name((pp_reach_t)reach), r->name);
        EXPECT(r->crosses_processes || reach < PP_REACH_HOST, "reach %s: %s",
               transport_reach_name((pp_reach_t)reach), r->name);
    }
    EXPECT(transport_row(PP_TRANSPORT_LOCAL)->crosses_devices == 0);
    /* A boundary's transport: local on one pipeline device, shared on one GPU, whatever was
     * selected; farther the selected one, or auto's pick: peer within a process, ipc between the
     * processes of one host, nccl between hosts. */
    static const struct {
        pp_reach_t reach;
        pp_transport_t selected, want;
    } cases[] = {
        {PP_REACH_DEVICE, PP_TRANSPORT_NCCL, PP_TRANSPORT_LOCAL},
        {PP_REACH_DEVICE, PP_TRANSPORT_AUTO, PP_TRANSPORT_LOCAL},
        {PP_REACH_GPU, PP_TRANSPORT_PEER, PP_TRANSPORT_SHARED},
        {PP_REACH_GPU, PP_TRANSPORT_AUTO, PP_TRANSPORT_SHARED},
        {PP_REACH_PROCESS, PP_TRANSPORT_NCCL, PP_TRANSPORT_NCCL},
        {PP_REACH_PROCESS, PP_TRANSPORT_PEER, PP_TRANSPORT_PEER},
        {PP_REACH_PROCESS, PP_TRANSPORT_AUTO, PP_TRANSPORT_PEER},
        {PP_REACH_HOST, PP_TRANSPORT_PEER, PP_TRANSPORT_PEER}, /* refused by the run's checks */
        {PP_REACH_HOST, PP_TRANSPORT_AUTO, PP_TRANSPORT_IPC},
        {PP_REACH_HOST, PP_TRANSPORT_NCCL, PP_TRANSPORT_NCCL},
        {PP_REACH_PROCESS, PP_TRANSPORT_IPC, PP_TRANSPORT_IPC},
        {PP_REACH_NETWORK, PP_TRANSPORT_AUTO, PP_TRANSPORT_NCCL},
        {PP_REACH_NETWORK, PP_TRANSPORT_NCCL, PP_TRANSPORT_NCCL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        EXPECT(transport_for_boundary(cases[k].reach, cases[k].selected) == cases[k].want,
               "reach %s, %s: %s", transport_reach_name(cases[k].reach),
               transport_name(cases[k].selected),
               transport_name(transport_for_boundary(cases[k].reach, cases[k].selected)));
    EXPECT(transport_row(PP_TRANSPORT_SHARED)->crosses_devices &&
           transport_row(PP_TRANSPORT_SHARED)->send_moves_bytes);
    EXPECT(!strcmp(transport_name((pp_transport_t)99), "none"));
    pp_config_t c;
    REQUIRE(config_load_string(&c, "t.yaml", "pipeline: {transport: nccl}\n", NULL, 0) == PP_OK);
    EXPECT(c.pipeline.transport == PP_TRANSPORT_NCCL);
    config_free(&c);
}

/* Where a boundary's ends are, from the job's devices and process layout: one device, one GPU (an
 * ordinal repeated on one host only), one process, two processes of a host, two hosts. */
static void test_boundary_reach(void)
{
    pp_job_t job;
    ts_job_defaults(&job);
    job.pipeline.devices_all = 0;
    job.pipeline.n_devices = 6;
    const int ids[6] = {0, 0, 1, 2, 0, 1}; /* two hosts: devices 0-3 on host 0, 4-5 on host 1 */
    const int rank[6] = {0, 0, 0, 1, 2, 2}, host[6] = {0, 0, 0, 0, 1, 1};
    for (int d = 0; d < 6; d++) {
        job.pipeline.device_ids[d] = ids[d];
        job.procs.rank_of[d] = rank[d];
        job.procs.host_of[d] = host[d];
    }
    job.procs.n_procs = 3;
    job.procs.n_hosts = 2;
    static const struct {
        int a, b;
        pp_reach_t want;
    } cases[] = {
        {2, 2, PP_REACH_DEVICE},  {0, 1, PP_REACH_GPU},     {1, 2, PP_REACH_PROCESS},
        {2, 3, PP_REACH_HOST},    {3, 4, PP_REACH_NETWORK}, {0, 4, PP_REACH_NETWORK},
        {4, 5, PP_REACH_PROCESS},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        EXPECT(job_boundary_reach(&job, cases[k].a, cases[k].b) == cases[k].want, "%d->%d: %s",
               cases[k].a, cases[k].b,
               transport_reach_name(job_boundary_reach(&job, cases[k].a, cases[k].b)));
    job.pipeline.transport = PP_TRANSPORT_AUTO;
    EXPECT(job_boundary_transport(&job, 1, 2) == PP_TRANSPORT_PEER);
    EXPECT(job_boundary_transport(&job, 2, 3) == PP_TRANSPORT_IPC);
    EXPECT(job_boundary_transport(&job, 3, 4) == PP_TRANSPORT_NCCL);
    EXPECT(job_boundary_transport(&job, 0, 1) == PP_TRANSPORT_SHARED);
    job.pipeline.transport = PP_TRANSPORT_PEER;
    EXPECT(job_boundary_transport(&job, 2, 3) == PP_TRANSPORT_PEER);
    job_free(&job);
}

/* The kind table: every kind `schedule.kind` accepts is found by its name and has a generator, the
 * explicit kinds are not and have none (config/written.c builds them), "interleaved" is an alias
 * of interleaved-1f1b, and a kind with a closed form says so. */
static void test_kind_table(void)
{
    for (int k = 0; k < PP_SCHED_KIND_COUNT; k++) {
        const pp_kind_row_t *r = sched_kind((pp_sched_kind_t)k);
        EXPECT((r->generate != NULL) == !r->written, "%s", r->name);
        EXPECT(sched_kind_find(r->name) == (r->written ? -1 : k), "%s", r->name);
        EXPECT(r->default_chunks >= 1, "%s", r->name);
        double b = sched_kind_bubble((pp_sched_kind_t)k, 4, 8, r->default_chunks);
        EXPECT(r->bubble ? (b > 0 && b < 1) : isnan(b), "%s", r->name);
    }
    EXPECT(sched_kind_find("interleaved") == PP_SCHED_INTERLEAVED);
    EXPECT(sched_kind_find("steps") == -1 && sched_kind_find("2f2b") == -1);
    pp_config_t c;
    pp_job_t jc = {0};
    REQUIRE(config_load_string(&c, "t.yaml", "schedule: {kind: interleaved}\n", NULL, 0) == PP_OK);
    EXPECT(c.schedule.kind == PP_SCHED_INTERLEAVED && c.pipeline.chunks == 2);
    config_free(&c);
    /* PyTorch pipelining's schedule names are aliases. */
    static const struct {
        const char *name;
        pp_sched_kind_t kind;
    } torch_names[] = {{"GPipe", PP_SCHED_GPIPE},
                       {"1F1B", PP_SCHED_1F1B},
                       {"Interleaved1F1B", PP_SCHED_INTERLEAVED},
                       {"ZBVZeroBubble", PP_SCHED_ZBV},
                       {"DualPipeV", PP_SCHED_DUALPIPEV},
                       {"LoopedBFS", PP_SCHED_LOOPED_BFS},
                       {"InterleavedZeroBubble", PP_SCHED_INTERLEAVED_ZB}};
    for (size_t i = 0; i < sizeof torch_names / sizeof *torch_names; i++)
        EXPECT(sched_kind_find(torch_names[i].name) == (int)torch_names[i].kind, "%s",
               torch_names[i].name);
    /* zb-v and dualpipe-v build placement v alone: it is their default; loop is refused when the
     * schedule is generated, other kinds refuse v with their reason. */
    REQUIRE(config_load_string(&c, "t.yaml", "schedule: {kind: DualPipeV}\n", NULL, 0) == PP_OK);
    EXPECT(ts_resolve(&jc, &c, 4) == PP_OK);
    EXPECT(c.schedule.kind == PP_SCHED_DUALPIPEV && jc.pipeline.chunks == 2 &&
           jc.pipeline.placement == PP_PLACEMENT_V && jc.pipeline.stages == 8);
    job_free(&jc);
    config_free(&c);
    char msg[512];
    EXPECT(sched_kind_check_placement(PP_SCHED_ZBV, 2, PP_PLACEMENT_LOOP, msg, sizeof msg) ==
                   PP_KIND_BAD_PLACEMENT &&
               strstr(msg, "built for V placement") && strstr(msg, "(allowed: placement v"),
           "%s", msg);
    EXPECT(sched_kind_check_placement(PP_SCHED_INTERLEAVED_ZB, 2, PP_PLACEMENT_V, msg,
                                      sizeof msg) == PP_KIND_BAD_PLACEMENT &&
               strstr(msg, "(allowed: placement loop"),
           "%s", msg);
    EXPECT(sched_kind_check_placement(PP_SCHED_ZBH2, 1, PP_PLACEMENT_V, msg, sizeof msg) ==
           PP_KIND_OK);
    EXPECT_RESOLVE_ERROR("schedule: {kind: zb-v}\npipeline: {chunks: 3}\n", 4,
                         "t.yaml:2:20: pipeline.chunks: zb-v runs two chunks per device in a V, "
                         "but 12 stages on 4 devices make 3 chunks (allowed: chunks 2)");
    EXPECT_RESOLVE_ERROR("schedule: {kind: dualpipe-v}\npipeline: {micro_batches: 6}\n", 4,
                         "t.yaml:2:27: pipeline.micro_batches: dualpipe-v needs at least as many "
                         "micro-batches as stages: 6 < 8 (allowed: 8 or more)");
    EXPECT_RESOLVE_ERROR(
        "schedule: {kind: interleaved-zb}\npipeline: {micro_batches: 13}\n", 4,
        "t.yaml:2:27: pipeline.micro_batches: interleaved-zb runs micro-batches in "
        "3 rounds (micro-batches / devices), which do not divide 13 (allowed: a "
        "multiple of 4, or fewer than 8)");
}

/* A failure after the steps were built leaves a config that frees cleanly (ASan checks). */
/* pipeline.devices_per_process: its range at its place, and the split over the processes of a
 * launch (job_check_processes), blamed on the key that decides it. */
static void test_processes(void)
{
    EXPECT_LOAD_ERROR("pipeline:\n  devices_per_process: -1\n",
                      "t.yaml:2:24: pipeline.devices_per_process: -1 is out of range (allowed: an "
                      "integer 0..64)");
    static const struct {
        const char *yaml;
        int procs;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {"pipeline:\n  devices: 4\n", 2, NULL},
        {"pipeline:\n  devices: 4\n", 4, NULL},
        {"pipeline:\n  devices: 4\n  devices_per_process: 2\n", 2, NULL},
        {"pipeline:\n  devices: 4\n", 3,
         "t.yaml:2:12: pipeline.devices: 4 devices do not split evenly over 3 processes (allowed: "
         "a multiple of 3 devices, or pipeline.devices_per_process)\n"},
        {"pipeline:\n  devices: 4\n  devices_per_process: 1\n", 2,
         "t.yaml:3:24: pipeline.devices_per_process: 1 devices per process x 2 processes = 2, "
         "but the pipeline has 4 devices (allowed: p / processes, or 0 for an even split)\n"},
        {"pipeline:\n  devices: 4\n  devices_per_process: 2\n", 1,
         "t.yaml:3:24: pipeline.devices_per_process: 2 devices per process x 1 process = 2, but "
         "the pipeline has 4 devices (allowed: p / processes, or 0 for an even split)\n"},
        /* GPUs shared within a process: auto's shared and peer copies; between the processes of
         * one host auto picks ipc, which takes shared GPUs; nccl needs a GPU per pipeline device */
        {"pipeline:\n  devices: [0, 0, 1, 1]\n", 1, NULL},
        {"pipeline:\n  devices: [0, 0, 1, 1]\n  transport: auto\n", 2, NULL},
        {"pipeline:\n  devices: [0, 1, 1, 2]\n", 2,
         NULL}, /* no nccl: 1->2 shared (refused later) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_config_t cfg;
        pp_job_t jcfg = {0};
        REQUIRE(config_load_string(&cfg, "t.yaml", cases[i].yaml, NULL, 0) == PP_OK);
        REQUIRE(ts_resolve(&jcfg, &cfg, 0) == PP_OK);
        const int p = jcfg.pipeline.n_devices, k = p % cases[i].procs ? 1 : p / cases[i].procs;
        jcfg.procs.n_procs = cases[i].procs; /* one host, the even split */
        for (int d = 0; d < p; d++)
            jcfg.procs.rank_of[d] = d / k < cases[i].procs ? d / k : cases[i].procs - 1;
        ts_capture_begin();
        pp_status_t st = job_check_processes(&jcfg, &cfg, cases[i].procs);
        const char *e = ts_capture_end();
        if (cases[i].want)
            EXPECT(st == PP_ERR_INPUT && !strcmp(e, cases[i].want),
                   "case %zu: %s\n    got:  %s    want: %s", i, pp_status_str(st), e,
                   cases[i].want);
        else
            EXPECT(st == PP_OK, "case %zu: %s", i, e);
        job_free(&jcfg);
        config_free(&cfg);
    }
}

static void test_free_after_failure(void)
{
    pp_config_t c;
    ts_capture_begin();
    pp_status_t st = config_load_string(
        &c, "t.yaml", "name: x\nschedule:\n  steps: [[0F0, 0B0]]\nmodel: {bad: 1}\n", NULL, 0);
    ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    config_free(&c);
    config_free(&c); /* twice: the first left it empty */
    config_free(NULL);
}

int main(void)
{
    ts_rng_seed(0x9e3779b97f4a7c15ull);
    RUN(test_defaults);
    RUN(test_every_key);
    RUN(test_random_values);
    RUN(test_missing_file);
    RUN(test_syntax_errors);
    RUN(test_unknown_keys);
    RUN(test_wrong_types);
    RUN(test_out_of_range);
    RUN(test_enums);
    RUN(test_duplicates);
    RUN(test_steps);
    RUN(test_steps_errors);
    RUN(test_csv_schedule);
    RUN(test_set);
    RUN(test_resolve_ok);
    RUN(test_resolve_errors);
    RUN(test_layers_split);
    RUN(test_shipped_schedules);
    RUN(test_counts);
    RUN(test_free_after_failure);
    RUN(test_processes);
    RUN(test_kind_table);
    RUN(test_role_table);
    RUN(test_transport_table);
    RUN(test_boundary_reach);
    return check_summary("test_config");
}
