/*
 * test_data_parallel.c — pipeline.data_parallel without a GPU: the key and its errors; the devices
 * (replica r's device i is r * p + i) for the loop and v placements and for shared GPUs; the
 * lowering's REDUCE ops (one per stage and gradient bucket, after the stage's last W or B, nothing
 * waiting for them; aligned: after every stage's); plan_validate accepting them and refusing a
 * malformed one; the simulator's reduction (the ring formula, the replicas starting and ending
 * together); the idle split's reduce reason and the reduce-free what-if; zero1's memory; the
 * planner's p x d candidates and its table; a plan of one replica unchanged (no REDUCE, no
 * replica fields in the JSON); and a measured run with d > 1 reaching the executor, zero1 too;
 * zero1's parts of the gradient buckets (stage_shard_part).
 */
#include "tests/check.h"
#include "plan/memory.h"
#include "plan/stage_cfg.h"
#include "run/planner.h"
#include "run/run.h"
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A small model with hand-set costs (so every figure is exact) on 8 devices of 2 replicas. */
static const char *yaml_dp = "model: {layers: 8, hidden: 256, heads: 4, seq_len: 64, vocab: 512}\n"
                             "pipeline: {devices: 8, data_parallel: 2, micro_batches: 8}\n"
                             "schedule: {kind: 1f1b}\n"
                             "run: {optimizer: adamw}\n"
                             "cost: {forward: 1, backward_input: 1, backward_weight: 1, send: 0}\n";

static int load(pp_run_t *r, const char *yaml, const char *const *sets, int n)
{
    return run_load(r, "t.yaml", yaml, sets, n, 0) == PP_OK;
}

/* ---- the key -------------------------------------------------------------------------------- */

static void test_key(void)
{
    pp_job_t job = {0};
    REQUIRE(ts_load_job(&job, "pipeline: {devices: 4}\n", NULL, 0, 0) == PP_OK);
    EXPECT(job.pipeline.data_parallel == 1 && job_replicas(&job) == 1 &&
           job_devices_total(&job) == 4);
    EXPECT(job.pipeline.reduce_bucket_mb == 25 && job.pipeline.reduce_align == PP_REDUCE_AS_READY);
    EXPECT(job.run.optimizer_sharding == PP_SHARD_NONE);
    job_free(&job);
    REQUIRE(ts_load_job(&job, yaml_dp, NULL, 0, 0) == PP_OK);
    EXPECT(job.pipeline.n_devices == 4 && job_replicas(&job) == 2 && job_devices_total(&job) == 8,
           "p %d d %d", job.pipeline.n_devices, job.pipeline.data_parallel);
    job_free(&job);
    static const struct {
        const char *set, *want;
    } bad[] = {
        {"pipeline.data_parallel=0", "pipeline.data_parallel"},
        {"pipeline.data_parallel=65", "pipeline.data_parallel"},
        {"pipeline.data_parallel=3", "3 replicas do not split the 8 devices evenly"},
        {"pipeline.reduce_align=sometimes", "as_ready"},
        {"run.optimizer_sharding=zero3", "zero1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *sets[] = {bad[i].set};
        ts_capture_begin();
        pp_status_t st = ts_load_job(&job, yaml_dp, sets, 1, 0);
        const char *err = ts_capture_end();
        EXPECT(st == PP_ERR_INPUT, "%s", bad[i].set);
        EXPECT(strstr(err, bad[i].want) != NULL, "%s: %s", bad[i].set, err);
    }
    /* a written schedule runs one replica */
    ts_capture_begin();
    pp_status_t sw = ts_load_job(
        &job, "pipeline: {devices: 2, data_parallel: 2}\nschedule:\n  steps: [[0F0, 0B0]]\n", NULL,
        0, 0);
    const char *ew = ts_capture_end();
    EXPECT(sw == PP_ERR_INPUT && strstr(ew, "t.yaml:1:39: pipeline.data_parallel: 2 replicas of a "
                                            "written schedule"),
           "%s", ew);
    /* the file's place is named */
    ts_capture_begin();
    const char *sets[] = {"pipeline.devices=6"};
    pp_status_t st = ts_load_job(&job, "pipeline:\n  devices: 8\n  data_parallel: 4\n", sets, 1, 0);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && strstr(err, "t.yaml:3:18: pipeline.data_parallel") != NULL, "%s",
           err);
}

/* ---- the devices and the lowering ----------------------------------------------------------- */

/* Every op of replica r on r * p + its stage's device, every stage's REDUCE ops after its last
 * backward (W or B) of the same replica, their bytes the stage's gradients, nothing waiting for
 * one. Returns the REDUCE ops seen. */
static int check_replicas(const pp_run_t *r)
{
    const pp_plan_t *pl = &r->plan;
    const int d = plan_replicas(pl), p = plan_pipe_devices(pl);
    int n_reduce = 0;
    EXPECT(pl->n_devices == p * d && d == job_replicas(&r->job));
    for (int k = 0; k < pl->n_ops; k++) {
        const pp_op_t *o = &pl->ops[k];
        int rep = o->device / p;
        EXPECT(o->device == rep * p + pl->stage_device[o->stage], "op %d", k);
        for (int j = 0; j < o->n_deps; j++) {
            const pp_op_t *on = &pl->ops[pl->deps[o->dep_begin + j]];
            EXPECT(on->kind != PP_ACT_REDUCE, "op %d waits for a reduction", k);
            if (o->kind != PP_ACT_REDUCE)
                EXPECT(on->device / p == rep, "op %d waits across replicas", k);
        }
        if (o->kind != PP_ACT_REDUCE) continue;
        n_reduce++;
        EXPECT(o->role == PP_ROLE_REDUCE);
        int last = -1;
        for (int j = 0; j < pl->n_ops; j++)
            if (pl->ops[j].device / p == rep && pl->ops[j].stage == o->stage &&
                (pl->ops[j].kind == PP_ACT_B || pl->ops[j].kind == PP_ACT_W))
                last = j;
        EXPECT(last >= 0 && last < k && ts_depends_on(pl, k, last), "REDUCE %d", k);
        /* in its program, after the last backward */
        EXPECT(o->pos > pl->ops[last].pos, "REDUCE %d at step %d", k, o->pos);
    }
    for (int s = 0; d > 1 && s < pl->n_stages; s++) {
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, &r->job, pl, s);
        double sum = 0;
        int n = 0;
        for (int k = 0; k < pl->n_ops; k++)
            if (pl->ops[k].kind == PP_ACT_REDUCE && pl->ops[k].stage == s &&
                pl->ops[k].device < p) {
                EXPECT(pl->ops[k].mb == n, "bucket %d of stage %d", pl->ops[k].mb, s);
                sum += (double)pl->ops[k].bytes, n++;
            }
        size_t bucket = (size_t)r->job.pipeline.reduce_bucket_mb << 20, g = stage_grad_bytes(&c);
        EXPECT(sum == (double)g, "stage %d: %.0f of %zu bytes", s, sum, g);
        EXPECT(n == (int)(bucket ? (g + bucket - 1) / bucket : 1), "stage %d: %d buckets", s, n);
    }
    return n_reduce;
}

static void test_devices_and_lowering(void)
{
    static const char *const cases[][3] = {
        {"schedule.kind=1f1b", "pipeline.placement=loop", "pipeline.reduce_bucket_mb=1"},
        {"schedule.kind=zb-h1", "pipeline.placement=loop", "pipeline.reduce_bucket_mb=0"},
        {"schedule.kind=interleaved-1f1b", "pipeline.chunks=2", "pipeline.reduce_bucket_mb=2"},
        {"schedule.kind=zb-v", "pipeline.chunks=2", "pipeline.placement=v"},
        {"schedule.kind=1f1b", "pipeline.devices=[0, 0, 0, 0]", "pipeline.reduce_bucket_mb=3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_run_t r;
        REQUIRE(load(&r, yaml_dp, cases[i], 3), "%s %s", cases[i][0], cases[i][1]);
        int n = check_replicas(&r);
        EXPECT(n > 0 && n % 2 == 0, "%s: %d reductions", cases[i][0], n);
        EXPECT(plan_validate(&r.plan) == PP_OK);
        run_free(&r);
    }
    /* d = 1: no REDUCE, the plan of one pipeline */
    pp_run_t r;
    const char *one[] = {"pipeline.data_parallel=1"};
    REQUIRE(load(&r, yaml_dp, one, 1));
    EXPECT(plan_replicas(&r.plan) == 1 && r.plan.n_devices == 8 && check_replicas(&r) == 0);
    run_free(&r);
}

/* aligned: every stage's first bucket waits for the last backward of every stage. */
static void test_aligned(void)
{
    pp_run_t r;
    const char *sets[] = {"pipeline.reduce_align=aligned"};
    REQUIRE(load(&r, yaml_dp, sets, 1));
    const pp_plan_t *pl = &r.plan;
    int last[64] = {0};
    for (int k = 0; k < pl->n_ops; k++)
        if (pl->ops[k].device < 4 && (pl->ops[k].kind == PP_ACT_B || pl->ops[k].kind == PP_ACT_W))
            last[pl->ops[k].stage] = k;
    int firsts = 0;
    for (int k = 0; k < pl->n_ops; k++) {
        const pp_op_t *o = &pl->ops[k];
        if (o->kind != PP_ACT_REDUCE || o->device >= 4 || o->mb != 0) continue;
        firsts++;
        for (int s = 0; s < pl->n_stages; s++)
            EXPECT(ts_depends_on(pl, k, last[s]), "stage %d's first bucket, stage %d", o->stage, s);
    }
    EXPECT(firsts == pl->n_stages);
    REQUIRE(run_go(&r, &(pp_run_opts_t){0}) == PP_OK);
    double start = -1;
    for (int k = 0; k < pl->n_ops; k++)
        if (pl->ops[k].kind == PP_ACT_REDUCE && pl->ops[k].mb == 0) {
            if (start < 0) start = r.sim.t[k].start_ms;
            EXPECT(fabs(r.sim.t[k].start_ms - start) < 1e-9, "aligned starts together");
        }
    run_free(&r);
}

/* Every kind lowers with its reductions in both alignments and the plan validates: on a device of
 * several stages (interleaved, V) its reduce stream takes the REDUCE ops in program order. */
static void test_every_kind(void)
{
    static const char *kinds[] = {"gpipe", "1f1b",      "interleaved", "zb-h1",         "zb-h2",
                                  "zb-v",  "dualpipev", "looped-bfs",  "interleaved-zb"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (int al = 0; al < 2; al++) {
            pp_run_t r;
            char kind[64];
            snprintf(kind, sizeof kind, "schedule.kind=%s", kinds[k]);
            const char *sets[] = {kind, al ? "pipeline.reduce_align=aligned"
                                           : "pipeline.reduce_align=as_ready"};
            ts_capture_begin();
            int ok = load(&r, yaml_dp, sets, 2);
            const char *err = ts_capture_end();
            EXPECT(ok, "%s %s: %s", kinds[k], sets[1], err);
            if (!ok) continue;
            int n = 0;
            for (int i = 0; i < r.plan.n_ops; i++)
                n += r.plan.ops[i].kind == PP_ACT_REDUCE;
            EXPECT(n >= 2 * r.plan.n_stages, "%s: %d REDUCE ops", kinds[k], n);
            run_free(&r);
        }
}

/* validate refuses a REDUCE that does not wait for its stage, an op that waits for a REDUCE, and a
 * group broken apart. */
static void test_validate(void)
{
    pp_run_t r;
    REQUIRE(load(&r, yaml_dp, NULL, 0));
    pp_plan_t *pl = &r.plan;
    int red = -1, other = -1;
    for (int k = 0; k < pl->n_ops && red < 0; k++)
        if (pl->ops[k].kind == PP_ACT_REDUCE) red = k;
    REQUIRE(red > 0 && pl->ops[red].n_deps >= 1);
    for (int k = red + 1; k < pl->n_ops && other < 0; k++)
        if (pl->ops[k].kind == PP_ACT_F && pl->ops[k].n_deps >= 1) other = k;
    EXPECT(plan_validate(pl) == PP_OK);
    /* 1: the REDUCE's wait on its last backward pointed elsewhere */
    int *dep = &pl->deps[pl->ops[red].dep_begin], keep = *dep;
    *dep = 0;
    ts_capture_begin();
    EXPECT(plan_validate(pl) == PP_ERR_INPUT);
    EXPECT(strstr(ts_capture_end(), "last backward") != NULL);
    *dep = keep;
    /* 2: a later op waits for it */
    if (other >= 0) {
        int *od = &pl->deps[pl->ops[other].dep_begin], ok = *od;
        *od = red;
        ts_capture_begin();
        EXPECT(plan_validate(pl) == PP_ERR_INPUT);
        EXPECT(strstr(ts_capture_end(), "waits for a reduction") != NULL);
        *od = ok;
    }
    /* 3: the group's peer broken */
    int peer = pl->ops[red + 1].peer;
    pl->ops[red + 1].peer = red + 1;
    ts_capture_begin();
    EXPECT(plan_validate(pl) == PP_ERR_INPUT);
    EXPECT(strstr(ts_capture_end(), "group of 2 adjacent reductions") != NULL);
    pl->ops[red + 1].peer = peer;
    EXPECT(plan_validate(pl) == PP_OK);
    run_free(&r);
}

/* ---- the simulator and the explanation ------------------------------------------------------ */

static void test_simulated_reduce(void)
{
    static const char *const sets[][2] = {
        {"pipeline.data_parallel=2", "pipeline.devices=8"},
        {"pipeline.data_parallel=4", "pipeline.devices=8"},
        {"pipeline.data_parallel=8", "pipeline.devices=16"}, /* two hosts of 8: ib */
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        pp_run_t r;
        REQUIRE(load(&r, yaml_dp, sets[i], 2), "%s", sets[i][0]);
        REQUIRE(run_go(&r, &(pp_run_opts_t){0}) == PP_OK);
        const pp_plan_t *pl = &r.plan;
        const int d = plan_replicas(pl);
        const pp_cost_model_t *cm = &r.cost;
        EXPECT(cm->reduce_ranks == d);
        for (int k = 0; k < pl->n_ops; k++) {
            const pp_op_t *o = &pl->ops[k];
            if (o->kind != PP_ACT_REDUCE || o->peer != k) continue;
            int net = o->host > 1;
            EXPECT(net == (plan_pipe_devices(pl) * d > PP_HOST_GPUS), "op %d spans %d hosts", k,
                   o->host);
            double want = 2.0 * (d - 1) / d * (double)o->bytes / (cm->reduce_gbps[net] * 1e6) +
                          2.0 * (d - 1) * cm->reduce_latency_ms[net];
            for (int j = k; j < k + d; j++) {
                EXPECT(pl->ops[j].kind == PP_ACT_REDUCE && pl->ops[j].peer == k);
                double dur = r.sim.t[j].end_ms - r.sim.t[j].start_ms;
                EXPECT(fabs(dur - want) < 1e-9 * (1 + want), "op %d: %.9f ms, ring %.9f", j, dur,
                       want);
                EXPECT(r.sim.t[j].start_ms == r.sim.t[k].start_ms, "op %d starts with op %d", j, k);
            }
        }
        /* the reduce reason: each device waits from its last compute op to its last REDUCE */
        const pp_explain_t *ex = &r.report.explain;
        EXPECT(ex->known && ex->replicas == d);
        double sum = 0;
        for (int dev = 0; dev < pl->n_devices; dev++) {
            double last_c = -1, last_r = -1;
            for (int k = 0; k < pl->n_ops; k++) {
                if (pl->ops[k].device != dev) continue;
                if (pp_role_row(pl->ops[k].role)->computes)
                    last_c = fmax(last_c, r.sim.t[k].end_ms);
                if (pl->ops[k].kind == PP_ACT_REDUCE) last_r = fmax(last_r, r.sim.t[k].end_ms);
            }
            double want = fmax(0.0, last_r - last_c);
            double got = explain_idle_ms(&ex->split, dev, PP_IDLE_REDUCE);
            EXPECT(fabs(got - want) < 1e-9, "device %d: reduce %.6f, want %.6f", dev, got, want);
            sum += got;
        }
        EXPECT(sum > 0, "some device waited for its reduction");
        /* reduce free: never slower, and no longer than the step less the first stage's wait */
        double free_ms = ex->what_if.step_ms[PP_WHAT_IF_REDUCE_FREE];
        EXPECT(free_ms < r.report.step_ms, "reduce free %.6f vs %.6f", free_ms, r.report.step_ms);
        EXPECT(r.report.reduce && r.report.reduce[0].ms > 0);
        for (int s = 0; r.report.reduce && s < pl->n_stages; s++) {
            const pp_report_reduce_t *x = &r.report.reduce[s];
            EXPECT(x->hidden_ms >= 0 && x->hidden_ms <= x->ms + 1e-12, "stage %d", s);
            /* one stage a device: nothing left to compute on it after its last backward */
            EXPECT(x->device_hidden_ms == 0, "stage %d: %g", s, x->device_hidden_ms);
        }
        /* 1F1B: the last stage finishes first, so the pipeline hides its reduction */
        EXPECT(r.report.reduce[pl->n_stages - 1].hidden_ms > 0);
        run_free(&r);
    }
    /* interleaved: a chunk's reduction runs under the backward of the device's other chunk */
    pp_run_t r;
    const char *v2[] = {"schedule.kind=interleaved-1f1b", "pipeline.chunks=2"};
    REQUIRE(load(&r, yaml_dp, v2, 2));
    REQUIRE(run_go(&r, &(pp_run_opts_t){0}) == PP_OK);
    double on = 0;
    for (int s = 0; s < r.plan.n_stages; s++) {
        EXPECT(r.report.reduce[s].device_hidden_ms <= r.report.reduce[s].ms + 1e-12);
        on += r.report.reduce[s].device_hidden_ms;
    }
    EXPECT(on > 0, "no reduction under its device's compute");
    run_free(&r);
}

/* The JSON and the table name the replicas with d > 1, and read as before with d = 1. */
static void test_report_outputs(void)
{
    for (int d = 1; d <= 2; d++) {
        pp_run_t r;
        char set[64];
        snprintf(set, sizeof set, "pipeline.data_parallel=%d", d);
        const char *sets[] = {set};
        REQUIRE(load(&r, yaml_dp, sets, 1));
        REQUIRE(run_go(&r, &(pp_run_opts_t){0}) == PP_OK);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        REQUIRE(f && report_print_json(&r.report, f) == PP_OK);
        fclose(f);
        EXPECT(!strstr(buf, "\"data_parallel\":2") == (d == 1));
        EXPECT(!strstr(buf, "\"replica\":1") == (d == 1));
        EXPECT(!strstr(buf, "\"reduce\":") == (d == 1));
        EXPECT(!strstr(buf, "\"reduce_free\":") == (d == 1));
        EXPECT(!strstr(buf, "\"reductions\":[") == (d == 1));
        free(buf);
        buf = NULL;
        f = open_memstream(&buf, &len);
        REQUIRE(f && report_print_table(&r.report, &r.job, f) == PP_OK);
        fclose(f);
        EXPECT(!strstr(buf, " replica ") == (d == 1), "%s", buf);
        EXPECT(!strstr(buf, "reduce per stage") == (d == 1));
        EXPECT(!strstr(buf, "reduce free") == (d == 1));
        free(buf);
        run_free(&r);
    }
}

/* ---- memory --------------------------------------------------------------------------------- */

static void test_zero1_memory(void)
{
    pp_run_t a, b;
    const char *z[] = {"run.optimizer_sharding=zero1", "pipeline.data_parallel=4"};
    const char *n[] = {"run.optimizer_sharding=none", "pipeline.data_parallel=4"};
    REQUIRE(load(&a, yaml_dp, n, 2) && load(&b, yaml_dp, z, 2));
    REQUIRE(run_predict(&a, NULL) == PP_OK && run_predict(&b, NULL) == PP_OK);
    for (int s = 0; s < a.plan.n_stages; s++) {
        pp_stage_cfg_t ca, cb;
        plan_stage_cfg(&ca, &a.job, &a.plan, s);
        plan_stage_cfg(&cb, &b.job, &b.plan, s);
        EXPECT(ca.optimizer_shards == 1 && cb.optimizer_shards == 4);
        /* bf16: fp32 master + two moments = 12 bytes a parameter, 3/4 of them gone */
        double P = (double)stage_grad_bytes(&ca) / 4;
        double saved = (double)stage_state_bytes(&ca) - (double)stage_state_bytes(&cb);
        EXPECT(fabs(saved - 12.0 * P * 3 / 4) <= 12.0 * 4, "stage %d: saved %.0f of %.0f", s, saved,
               12.0 * P);
    }
    EXPECT(b.mem.dev[0].state < a.mem.dev[0].state && b.mem.dev[7].state == b.mem.dev[3].state);
    run_free(&a);
    run_free(&b);
}

/* zero1's parts: every value of a stage's gradients belongs to exactly one replica's part of one
 * bucket, each replica's parts follow each other in its sharded state (1/d of the values), and
 * replicas that do not divide a bucket are told. */
static void test_shard_parts(void)
{
    pp_run_t r;
    const char *z[] = {"run.optimizer_sharding=zero1", "pipeline.data_parallel=4"};
    REQUIRE(load(&r, yaml_dp, z, 2));
    pp_stage_cfg_t c;
    plan_stage_cfg(&c, &r.job, &r.plan, 0);
    const size_t P = stage_grad_bytes(&c) / 4;
    unsigned char *owner = calloc(P, 1);
    REQUIRE(owner && c.optimizer_shards == 4 && P % 256 == 0);
    static const size_t buckets[] = {0, 64 * 12, 256 * 7};
    for (size_t k = 0; k < sizeof buckets / sizeof buckets[0]; k++) {
        c.shard_bucket = buckets[k];
        memset(owner, 0, P);
        int ok = 1;
        for (int sh = 0; sh < 4; sh++) {
            size_t lo, n, at, next = 0;
            int got;
            for (size_t b = 0; (got = stage_shard_part(&c, sh, b, &lo, &n, &at)) > 0; b++) {
                ok &= at == next && lo + n <= P;
                next += n;
                for (size_t x = lo; x < lo + n && x < P; x++)
                    ok &= owner[x]++ == 0;
            }
            EXPECT(got == 0 && next == P / 4, "bucket %zu shard %d: %zu values kept", buckets[k],
                   sh, next);
        }
        size_t missing = 0;
        for (size_t x = 0; x < P; x++)
            missing += owner[x] != 1;
        EXPECT(ok && missing == 0, "bucket %zu: %zu values not in exactly one part", buckets[k],
               missing);
    }
    c.optimizer_shards = 3;
    c.shard_bucket = 64 * 5;
    size_t lo, n, at;
    EXPECT(stage_shard_part(&c, 0, 0, &lo, &n, &at) == -1, "3 shards of 320 values");
    free(owner);
    run_free(&r);
}

/* ---- the planner ---------------------------------------------------------------------------- */

static void test_planner(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_dp_XXXXXX");
    int fd = mkstemp(path);
    const char *text = "model: {layers: 8, hidden: 128, heads: 4, seq_len: 64, vocab: 256}\n"
                       "pipeline: {devices: 4, micro_batches: 8}\nschedule: {kind: 1f1b}\n";
    REQUIRE(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    pp_plan_query_t q = {.path = path, .gpus = 4, .global_batch = 16};
    pp_search_t s;
    REQUIRE(plan_search(&s, &q) == PP_OK);
    int seen[5][2] = {{0}};
    for (int i = 0; i < s.n; i++) {
        const pp_candidate_t *c = &s.c[i];
        EXPECT(c->p * c->d == 4, "%s", c->label);
        EXPECT(c->d * c->m * c->mbs == 16, "%s: the global batch", c->label);
        EXPECT(!c->zero1 || c->d > 1, "%s", c->label);
        seen[c->d][c->zero1] = 1;
    }
    EXPECT(seen[1][0] && seen[2][0] && seen[2][1] && seen[4][0] && seen[4][1]);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f && plan_print_table(&s, 1000, f) == PP_OK);
    fclose(f);
    EXPECT(strstr(buf, "schedule") && strstr(buf, "   p   d   v") && strstr(buf, " d=4"), "%s",
           buf);
    EXPECT(strstr(buf, " x d "), "the Pareto front names p and d");
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    REQUIRE(f && plan_print_csv(&s, f) == PP_OK);
    fclose(f);
    EXPECT(strstr(buf, "pipeline_devices,data_parallel,optimizer_sharding") != NULL);
    free(buf);
    plan_search_free(&s);
    unlink(path);
}

/* ---- the measured run ----------------------------------------------------------------------- */

static int exec_called;
static pp_status_t never_exec(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                              const pp_job_t *job, const pp_exec_opts_t *o)
{
    exec_called = 1;
    return PP_ERR_INTERNAL;
}

/* A measured run with d > 1 reaches the executor with the replicas' plan, with zero1 too. */
static void test_measured(void)
{
    pp_run_t r;
    REQUIRE(load(&r, yaml_dp, NULL, 0));
    pp_run_opts_t ro = {.measure = 1, .exec = never_exec};
    ts_capture_begin();
    pp_status_t st = run_go(&r, &ro);
    (void)ts_capture_end();
    EXPECT(st == PP_ERR_INTERNAL && exec_called, "status %s", pp_status_str(st));
    EXPECT(r.plan.n_devices == 8 && plan_replicas(&r.plan) == 2, "%d devices, %d replicas",
           r.plan.n_devices, plan_replicas(&r.plan));
    run_free(&r);

    exec_called = 0;
    const char *z[] = {"run.optimizer_sharding=zero1"};
    REQUIRE(load(&r, yaml_dp, z, 1));
    ts_capture_begin();
    st = run_go(&r, &ro);
    (void)ts_capture_end();
    EXPECT(st == PP_ERR_INTERNAL && exec_called, "zero1: status %s", pp_status_str(st));
    run_free(&r);

    /* three replicas cannot cut a 1 MiB bucket in equal parts: refused before the executor */
    exec_called = 0;
    const char *z3[] = {"run.optimizer_sharding=zero1", "pipeline.devices=6",
                        "pipeline.data_parallel=3", "pipeline.reduce_bucket_mb=1"};
    REQUIRE(load(&r, yaml_dp, z3, 4));
    ts_capture_begin();
    st = run_go(&r, &ro);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && !exec_called, "zero1 d=3: status %s", pp_status_str(st));
    EXPECT(strstr(err, "run.optimizer_sharding") && strstr(err, "into 3 equal parts"), "%s", err);
    run_free(&r);
}

int main(void)
{
    ts_rng_seed(24);
    RUN(test_key);
    RUN(test_devices_and_lowering);
    RUN(test_aligned);
    RUN(test_every_kind);
    RUN(test_validate);
    RUN(test_simulated_reduce);
    RUN(test_report_outputs);
    RUN(test_zero1_memory);
    RUN(test_shard_parts);
    RUN(test_planner);
    RUN(test_measured);
    return check_summary("test_data_parallel");
}
