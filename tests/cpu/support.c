/*
 * support.c — the helpers of support.h, linked into every CPU test program.
 *
 * State is per program: one generator, one capture at a time and one temporary directory. The
 * plan builder grows its arrays by doubling; ts_plan_free releases them and leaves a zeroed
 * builder.
 */
#include "support.h"

#include "config/resolve.h"
#include "config/written.h"
#include "schedule/generate.h"
#include "schedule/kinds.h"
#include "model/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Allocation that cannot fail quietly: a test helper has no way to report it, so stop here. */
static void *ts_realloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q) {
        fprintf(stderr, "test support: out of memory (%zu bytes)\n", size);
        abort();
    }
    return q;
}

/* ---------------------------------------------------------------------------------------------
 * Seeded random numbers
 * ------------------------------------------------------------------------------------------- */

static uint64_t ts_rng_state = 0x9e3779b97f4a7c15ull;

void ts_rng_seed(uint64_t seed)
{
    ts_rng_state = seed ? seed : 0x9e3779b97f4a7c15ull;
}

/* xorshift64*: the xorshift state step, then a multiply that mixes the low bits too. */
uint64_t ts_rand_u64(void)
{
    ts_rng_state ^= ts_rng_state >> 12;
    ts_rng_state ^= ts_rng_state << 25;
    ts_rng_state ^= ts_rng_state >> 27;
    return ts_rng_state * 0x2545f4914f6cdd1dull;
}

int ts_rand_int(int lo, int hi)
{
    return lo + (int)(ts_rand_u64() % (uint64_t)((int64_t)hi - lo + 1));
}

double ts_rand_uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(ts_rand_u64() >> 11) / 9007199254740992.0; /* / 2^53 */
}

/* ---------------------------------------------------------------------------------------------
 * stderr capture
 * ------------------------------------------------------------------------------------------- */

static char ts_cap_buf[8192];
static int ts_cap_saved = -1;
static FILE *ts_cap_file;

void ts_capture_begin(void)
{
    fflush(stderr);
    ts_cap_file = tmpfile();
    ts_cap_saved = dup(2);
    if (ts_cap_file) dup2(fileno(ts_cap_file), 2);
}

const char *ts_capture_end(void)
{
    size_t n = 0;
    fflush(stderr);
    if (ts_cap_saved >= 0) {
        dup2(ts_cap_saved, 2);
        close(ts_cap_saved);
        ts_cap_saved = -1;
    }
    if (ts_cap_file) {
        rewind(ts_cap_file);
        n = fread(ts_cap_buf, 1, sizeof ts_cap_buf - 1, ts_cap_file);
        fclose(ts_cap_file);
        ts_cap_file = NULL;
    }
    ts_cap_buf[n] = '\0';
    return ts_cap_buf;
}

/* ---------------------------------------------------------------------------------------------
 * A temporary directory
 * ------------------------------------------------------------------------------------------- */

static char ts_dir[64];
static const char *ts_dir_prog = "test";

int ts_tmpdir_make(const char *prog)
{
    ts_dir_prog = prog;
    snprintf(ts_dir, sizeof ts_dir, "/tmp/pp_%s_XXXXXX", prog);
    if (mkdtemp(ts_dir)) return 0;
    perror("mkdtemp");
    ts_dir[0] = '\0';
    return -1;
}

const char *ts_tmpdir(void)
{
    return ts_dir;
}

const char *ts_tmp_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", ts_dir, name);
    return buf;
}

void ts_tmpdir_remove(void)
{
    if (!ts_dir[0]) return;
    char cmd[sizeof ts_dir + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ts_dir);
    if (system(cmd) != 0) fprintf(stderr, "%s: could not remove %s\n", ts_dir_prog, ts_dir);
    ts_dir[0] = '\0';
}

/* ---------------------------------------------------------------------------------------------
 * Configs
 * ------------------------------------------------------------------------------------------- */

void ts_job_defaults(pp_job_t *job)
{
    pp_config_t cfg;
    config_defaults(&cfg);
    if (job_from_config(job, &cfg) != PP_OK) abort();
    config_free(&cfg);
}

pp_status_t ts_resolve(pp_job_t *job, const pp_config_t *cfg, int n_visible)
{
    pp_schedule_t s = {0};
    pp_status_t st = PP_OK;
    job_free(job);
    memset(job, 0, sizeof *job);
    const int written = sched_kind(cfg->schedule.kind)->written;
    if (written) st = written_build(&s, cfg);
    if (st == PP_OK) st = job_resolve(job, cfg, written ? &s : NULL, n_visible);
    schedule_free(&s);
    return st;
}

pp_status_t ts_load_job(pp_job_t *job, const char *yaml, const char *const *sets, int n_sets,
                        int n_visible)
{
    pp_config_t cfg;
    memset(job, 0, sizeof *job);
    pp_status_t st = config_load_string(&cfg, "t.yaml", yaml, sets, n_sets);
    if (st == PP_OK) st = ts_resolve(job, &cfg, n_visible);
    config_free(&cfg);
    return st;
}

void ts_config_pipeline(pp_job_t *c, pp_sched_kind_t kind, int p, int stages, int m)
{
    memset(c, 0, sizeof *c);
    c->pipeline.n_devices = p;
    for (int d = 0; d < p; d++)
        c->pipeline.device_ids[d] = d;
    c->pipeline.stages = stages;
    c->pipeline.chunks = stages / p;
    c->pipeline.micro_batches = m;
    c->kind = kind;
}

void ts_offload_job(pp_job_t *c, pp_sched_kind_t kind, int p, int m, pp_offload_t off)
{
    ts_config_pipeline(c, kind, p, p, m);
    c->model = (pp_job_model_t){.layers = 2 * p,
                                .hidden = 64,
                                .heads = 4,
                                .seq_len = 32,
                                .vocab = 128,
                                .dtype = PP_DTYPE_FP32};
    c->pipeline.micro_batch_size = 2;
    c->pipeline.transport = PP_TRANSPORT_NCCL;
    c->run.offload = off;
    c->cost = (pp_job_cost_t){1.0, 1.0, 1.0, 0.0, 50.0, 0};
}

/* ---------------------------------------------------------------------------------------------
 * Schedules
 * ------------------------------------------------------------------------------------------- */

pp_status_t ts_sched_from(pp_schedule_t *s, int n_stages, int n_mb, int n_dev,
                          const char *const *progs, int place_stages)
{
    PP_CHECK(schedule_init(s, n_dev, n_stages, n_mb));
    for (int d = 0; d < n_dev; d++) {
        char buf[1024];
        strncpy(buf, progs[d], sizeof buf - 1);
        buf[sizeof buf - 1] = '\0';
        for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
            pp_action_t a;
            if (action_parse(tok, &a) != 0) return PP_ERR_INTERNAL;
            PP_CHECK(schedule_push(s, d, a.kind, a.stage, a.mb));
            if (place_stages) s->stage_device[a.stage] = d;
        }
    }
    return PP_OK;
}

pp_status_t ts_generate(pp_schedule_t *s, pp_sched_kind_t kind, int p, int m, int v)
{
    switch (kind) {
    case PP_SCHED_GPIPE: return generate_gpipe(s, p, m);
    case PP_SCHED_1F1B: return generate_1f1b(s, p, m);
    case PP_SCHED_INTERLEAVED: return generate_interleaved(s, p, m, v);
    default: return generate_zbh1(s, p, m);
    }
}

int ts_program_is(const pp_schedule_t *s, int d, const char *want)
{
    char buf[4096], txt[32];
    strncpy(buf, want, sizeof buf - 1);
    buf[sizeof buf - 1] = '\0';
    int i = 0, ok = 1;
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " "), i++) {
        pp_action_t a;
        if (action_parse(tok, &a) != 0) {
            fprintf(stderr, "  bad action in test: %s\n", tok);
            return 0;
        }
        if (i >= s->prog[d].n) {
            fprintf(stderr, "  device %d: program ends at step %d, want %s\n", d, i, tok);
            return 0;
        }
        const pp_action_t *g = &s->prog[d].a[i];
        if (g->kind != a.kind || g->stage != a.stage || g->mb != a.mb) {
            fprintf(stderr, "  device %d, step %d: got %s, want %s\n", d, i,
                    action_format(g, txt, sizeof txt), tok);
            ok = 0;
        }
    }
    if (i != s->prog[d].n) {
        fprintf(stderr, "  device %d: %d actions, want %d\n", d, s->prog[d].n, i);
        ok = 0;
    }
    return ok;
}

int ts_same_schedule(const pp_schedule_t *a, const pp_schedule_t *b)
{
    if (a->n_devices != b->n_devices || a->n_stages != b->n_stages || a->n_mb != b->n_mb) return 0;
    for (int s = 0; s < a->n_stages; s++)
        if (a->stage_device[s] != b->stage_device[s]) return 0;
    for (int d = 0; d < a->n_devices; d++) {
        if (a->prog[d].n != b->prog[d].n) return 0;
        for (int i = 0; i < a->prog[d].n; i++) {
            const pp_action_t *x = &a->prog[d].a[i], *y = &b->prog[d].a[i];
            if (x->kind != y->kind || x->stage != y->stage || x->mb != y->mb) return 0;
        }
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * A hand-built plan
 * ------------------------------------------------------------------------------------------- */

void ts_plan_init(ts_plan_t *b, int p, int n_stages, int m, pp_sched_kind_t kind)
{
    memset(b, 0, sizeof *b);
    b->pl.n_devices = p;
    b->pl.n_stages = n_stages;
    b->pl.n_mb = m;
    b->pl.chunks = n_stages / p;
    b->pl.kind = kind;
    b->pl.stage_device = ts_realloc(NULL, sizeof(int) * (size_t)n_stages);
    b->pl.slots_per_stage = ts_realloc(NULL, sizeof(int) * (size_t)n_stages);
    for (int s = 0; s < n_stages; s++) {
        b->pl.stage_device[s] = s % p;
        b->pl.slots_per_stage[s] = m;
    }
}

void ts_plan_free(ts_plan_t *b)
{
    if (!b) return;
    free(b->pl.ops);
    free(b->pl.deps);
    free(b->pl.stage_device);
    free(b->pl.slots_per_stage);
    free(b->pl.prog_ops);
    free(b->pl.prog_begin);
    free(b->t);
    memset(b, 0, sizeof *b);
}

int ts_plan_op(ts_plan_t *b, int dev, pp_role_t role, pp_action_kind_t kind, int stage, int mb,
               const int *deps, int n_deps)
{
    pp_plan_t *pl = &b->pl;
    if (pl->n_ops == b->cap_ops) {
        b->cap_ops = b->cap_ops ? 2 * b->cap_ops : 64;
        pl->ops = ts_realloc(pl->ops, sizeof *pl->ops * (size_t)b->cap_ops);
        b->t = ts_realloc(b->t, sizeof *b->t * (size_t)b->cap_ops);
    }
    if (pl->n_deps_total + n_deps > b->cap_deps) {
        b->cap_deps = 2 * (pl->n_deps_total + n_deps) + 64;
        pl->deps = ts_realloc(pl->deps, sizeof *pl->deps * (size_t)b->cap_deps);
    }
    pl->ops[pl->n_ops] = (pp_op_t){.device = dev,
                                   .role = role,
                                   .kind = kind,
                                   .stage = stage,
                                   .mb = mb,
                                   .slot = mb,
                                   .pos = b->pos[dev]++,
                                   .peer = -1,
                                   .link = PP_TRANSPORT_NONE,
                                   .bytes = 0,
                                   .dep_begin = pl->n_deps_total,
                                   .n_deps = n_deps};
    b->t[pl->n_ops] = (pp_op_time_t){0, 0};
    for (int j = 0; j < n_deps; j++)
        pl->deps[pl->n_deps_total++] = deps[j];
    if (pp_action_is_compute(kind) && stage >= 0 && stage < pl->n_stages)
        pl->stage_device[stage] = dev;
    return pl->n_ops++;
}

int ts_plan_compute(ts_plan_t *b, int dev, pp_action_kind_t kind, int stage, int mb, int dep0,
                    int dep1)
{
    int deps[2] = {0, 0}, n = 0;
    if (dep0 >= 0) deps[n++] = dep0;
    if (dep1 >= 0) deps[n++] = dep1;
    return ts_plan_op(b, dev, PP_ROLE_COMPUTE, kind, stage, mb, deps, n);
}

int ts_plan_transfer(ts_plan_t *b, int src, int dst, pp_action_kind_t send_kind, int stage,
                     int peer_stage, int mb, pp_transport_t link, size_t bytes, int dep)
{
    int s = ts_plan_op(b, src, PP_ROLE_SEND, send_kind, stage, mb, &dep, dep >= 0);
    int r = ts_plan_op(b, dst, PP_ROLE_RECV, (pp_action_kind_t)(send_kind + 1), peer_stage, mb,
                       NULL, 0);
    b->pl.ops[s].peer = r;
    b->pl.ops[r].peer = s;
    b->pl.ops[s].link = b->pl.ops[r].link = link;
    b->pl.ops[s].bytes = b->pl.ops[r].bytes = bytes;
    return r;
}

int ts_plan_time(ts_plan_t *b, int k, double start_ms, double end_ms)
{
    b->t[k] = (pp_op_time_t){start_ms, end_ms};
    return k;
}

pp_status_t ts_plan_timeline(const ts_plan_t *b, pp_timeline_t *tl, pp_mode_t mode,
                             const double *steps, int n_steps)
{
    PP_CHECK(timeline_init(tl, mode, b->pl.n_ops, b->pl.n_devices, steps ? n_steps : 1));
    if (b->pl.n_ops > 0) memcpy(tl->t, b->t, sizeof(pp_op_time_t) * (size_t)b->pl.n_ops);
    tl->has_op_times = 1;
    if (steps)
        memcpy(tl->step_ms, steps, sizeof(double) * (size_t)n_steps);
    else
        tl->step_ms[0] = timeline_makespan(tl);
    return PP_OK;
}

/* ---- reading a lowered plan ------------------------------------------------------------------ */

int ts_op_index(const pp_plan_t *pl, pp_action_kind_t k, int stage, int mb)
{
    for (int i = 0; i < pl->n_ops; i++)
        if (pl->ops[i].kind == k && pl->ops[i].stage == stage && pl->ops[i].mb == mb) return i;
    return -1;
}

int ts_depends_on(const pp_plan_t *pl, int i, int on)
{
    for (int j = 0; j < pl->ops[i].n_deps; j++)
        if (pl->deps[pl->ops[i].dep_begin + j] == on) return 1;
    return 0;
}

const char *ts_program_text(const pp_plan_t *pl, int d)
{
    static char buf[8192];
    char txt[32];
    buf[0] = '\0';
    for (int j = pl->prog_begin[d]; j < pl->prog_begin[d + 1]; j++) {
        const pp_op_t *o = &pl->ops[pl->prog_ops[j]];
        pp_action_t a = {o->kind, o->stage, o->mb, 0};
        if (buf[0]) strcat(buf, " ");
        strcat(buf, action_format(&a, txt, sizeof txt));
    }
    return buf;
}

/* ---- a generated plan ------------------------------------------------------------------------ */

int ts_make_plan(pp_plan_t *plan, pp_sched_kind_t kind, int p, int m, int v)
{
    pp_schedule_t sched;
    pp_status_t st = ts_generate(&sched, kind, p, m, v);
    if (st != PP_OK) return -1;
    pp_job_t cfg;
    ts_job_defaults(&cfg);
    cfg.model.layers = 48; /* divisible by every stage count of the sweep */
    cfg.pipeline.n_devices = p;
    for (int d = 0; d < p; d++)
        cfg.pipeline.device_ids[d] = d;
    cfg.pipeline.stages = p * v;
    cfg.pipeline.chunks = v;
    cfg.pipeline.micro_batches = m;
    cfg.kind = kind;
    st = plan_lower(plan, &sched, &cfg);
    schedule_free(&sched);
    job_free(&cfg);
    return st == PP_OK ? 0 : -2;
}

/* ---- a profile ------------------------------------------------------------------------------- */

void ts_profile_fake(pp_profile_t *p, const double factor[PP_PASS_COUNT][PP_PART_COUNT])
{
    memset(p, 0, sizeof *p);
    snprintf(p->device, sizeof p->device, "NVIDIA H200");
    snprintf(p->gpu, sizeof p->gpu, "h200");
    snprintf(p->date, sizeof p->date, "2026-11-23T15:50:00Z");
    p->shape = (pp_model_shape_t){1024, 16, 1024, 8192, 4, 6, 0, 24, 0, 0};
    p->dtype = PP_DTYPE_BF16;
    const pp_gpu_t *g = gpu_find("h200");
    for (int pass = 0; pass < PP_PASS_COUNT; pass++) {
        double t[PP_PART_COUNT];
        for (int q = 0; q < PP_PART_COUNT; q++)
            t[q] = factor[pass][q] *
                   cost_part(&p->shape, p->dtype, g, (pp_pass_t)pass, (pp_part_t)q).ms;
        p->ms[PP_PROF_MIDDLE][pass] = 6 * t[0];
        p->ms[PP_PROF_FIRST][pass] = 6 * t[0] + t[1];
        p->ms[PP_PROF_LAST][pass] = 6 * t[0] + t[2];
    }
    p->runtime_bytes = 6.5e8;
    p->stage_overhead_bytes = 4.5e7;
    p->n_sends = 2;
    p->send_bytes[0] = 1 << 20, p->send_ms[0] = 0.005;
    p->send_bytes[1] = 8 << 20, p->send_ms[1] = 0.024;
}
