/*
 * planner.c — the search of planner.h: enumerate the candidates from the kind table, run each
 * through the chain's prediction (run_load + run_predict), rank, and read off the Pareto front
 * and the comparison of the best two.
 *
 * Two passes: the first lists the combinations and counts the skipped ones by reason (cheap, the
 * kind table's checks); the second evaluates the list smallest plan first (stages x micro-batches:
 * what lowering and simulating cost), with progress and the best so far on stderr once it has
 * taken a second, until the list ends or the budget runs out. Every candidate is loaded from the
 * file again with its own overrides, so it is exactly the run `ppsched FILE --set ...` would
 * make, and its figures are read off the report that run builds (run_report); the chain is freed
 * after each.
 */
#include "planner.h"

#include "model/cost.h"
#include "sim/cost_model.h"
#include "schedule/kinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PLAN_MAX_CHUNKS 8
#define PLAN_MAX_ROOT   4096 /* the square root of PP_PLAN_MAX_SEQS */
/* The offload dimension tries at most this many candidates (plan_offload_pass): each runs
 * run.offload auto's choice, a few lowerings of its plan. */
#define PLAN_OFFLOAD_TRIES 8
/* ... of those over the limit by at most this share of a device's activation slots: sending the
 * longest-lived slots to the host frees about half of them at best in the schedules' steady
 * states (a slot is held while its copies run). */
#define PLAN_OFFLOAD_SHARE 0.5

static const char *const skip_names[PP_SKIP_COUNT] = {
    [PP_SKIP_CHUNKS] = "chunks",       [PP_SKIP_MICRO_BATCHES] = "micro-batches",
    [PP_SKIP_PLACEMENT] = "placement", [PP_SKIP_LAYERS] = "layers",
    [PP_SKIP_BUILD] = "refused",       [PP_SKIP_SAME_SPLIT] = "same split",
};

const char *plan_skip_name(pp_skip_t k)
{
    return (int)k >= 0 && k < PP_SKIP_COUNT ? skip_names[k] : "?";
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the base file and the batch ------------------------------------------------------------ */

/* The optimizer every candidate runs with: the query's, else AdamW. A --set of run.optimizer is
 * refused: the file's value (none in the shipped schedules) is not what plan counts. */
static pp_status_t plan_optimizer(pp_search_t *s, const pp_plan_query_t *q, char *set, size_t size)
{
    const char *opt = q->optimizer ? q->optimizer : "adamw";
    for (int k = 0; k < q->n_sets; k++)
        if (strncmp(q->sets[k], "run.optimizer=", 14) == 0) {
            fprintf(stderr,
                    "plan: --set %s: plan counts the optimizer of --optimizer, AdamW unless it "
                    "says none (allowed: --optimizer adamw|none)\n",
                    q->sets[k]);
            return PP_ERR_INPUT;
        }
    if (strcmp(opt, "adamw") != 0 && strcmp(opt, "none") != 0) {
        fprintf(stderr, "plan: --optimizer %s (allowed: adamw, none)\n", opt);
        return PP_ERR_INPUT;
    }
    s->optimizer_default = q->optimizer == NULL;
    snprintf(set, size, "run.optimizer=%s", opt);
    return PP_OK;
}

/* The file with the query's overrides and the optimizer's. */
static pp_status_t plan_load_base(pp_search_t *s, const pp_plan_query_t *q)
{
    char opt[64];
    const char *sets[256 + 1];
    if (q->n_sets > 256) PP_FAIL(PP_ERR_USAGE, "plan: at most 256 --set options");
    PP_CHECK(plan_optimizer(s, q, opt, sizeof opt));
    for (int k = 0; k < q->n_sets; k++)
        sets[k] = q->sets[k];
    sets[q->n_sets] = opt;
    s->have_base = 1; /* config_load leaves it freeable on failure */
    return config_load(&s->base, q->path, sets, q->n_sets + 1);
}

/* Sequences per step: --global-batch, --tokens over model.seq_len, or the file's m x b. */
static pp_status_t plan_batch(pp_search_t *s, const pp_plan_query_t *q)
{
    const pp_config_t *b = &s->base;
    double seq = b->model.seq_len, seqs;
    if (q->global_batch > 0) {
        seqs = (double)q->global_batch;
    } else if (q->tokens > 0) {
        seqs = floor(q->tokens / seq + 0.5);
        if (seqs < 1 || fabs(seqs * seq - q->tokens) > 0.5) {
            fprintf(stderr,
                    "plan: --tokens %.0f is not a whole number of %d-token sequences (allowed: a "
                    "multiple of model.seq_len, e.g. %.0f)\n",
                    q->tokens, b->model.seq_len, (seqs < 1 ? 1 : seqs) * seq);
            return PP_ERR_INPUT;
        }
    } else {
        seqs = (double)b->pipeline.micro_batches * b->pipeline.micro_batch_size;
    }
    if (seqs > PP_PLAN_MAX_SEQS) {
        fprintf(stderr, "plan: a global batch of %.0f sequences (allowed: 1..%ld)\n", seqs,
                PP_PLAN_MAX_SEQS);
        return PP_ERR_INPUT;
    }
    s->seqs = (long)seqs;
    s->tokens = seqs * seq;
    return PP_OK;
}

static pp_status_t plan_base(pp_search_t *s, const pp_plan_query_t *q)
{
    pp_config_t *b = &s->base;
    PP_CHECK(plan_load_base(s, q));
    if (sched_kind(b->schedule.kind)->written) {
        fprintf(stderr,
                "%s: plan searches the generated kinds, but this file writes its schedule "
                "(schedule.%s) (allowed: a file with schedule.kind, or none)\n",
                q->path, sched_kind_name(b->schedule.kind));
        return PP_ERR_INPUT;
    }
    s->p = q->gpus > 0 ? q->gpus : (b->pipeline.devices_all ? 4 : b->pipeline.n_devices);
    if (s->p < 1 || s->p > PP_MAX_DEVICES) {
        fprintf(stderr, "plan: --gpus %d (allowed: 1..%d)\n", s->p, PP_MAX_DEVICES);
        return PP_ERR_INPUT;
    }
    PP_CHECK(plan_batch(s, q));
    const pp_gpu_t *g = cost_gpu_for(&b->cost_src, NULL, NULL);
    snprintf(s->gpu, sizeof s->gpu, "%s", g->name);
    s->limit_bytes = q->memory_gib > 0 ? q->memory_gib * 1073741824.0 : 0;
    s->budget_s = q->budget_s > 0 ? q->budget_s : 0;
    s->kinds = q->kinds;
    return PP_OK;
}

/* ---- pass 1: the combinations ---------------------------------------------------------------- */

static pp_status_t plan_push(pp_search_t *s, const pp_candidate_t *c)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        pp_candidate_t *nc = realloc(s->c, sizeof *nc * (size_t)cap);
        PP_ALLOC_CHECK(nc);
        s->c = nc;
        s->cap = cap;
    }
    s->c[s->n++] = *c;
    return PP_OK;
}

/* Why kind k cannot run (v, placement pl, m micro-batches, split sp), or -1 when it can. An even
 * split needs the layers to divide into the p * v stages; a balanced one, a block for each. */
static int plan_refusal(const pp_search_t *s, int p, pp_sched_kind_t k, int v, pp_placement_t pl,
                        int m, pp_split_t sp)
{
    static const int of_problem[] = {[PP_KIND_BAD_CHUNKS] = PP_SKIP_CHUNKS,
                                     [PP_KIND_BAD_MICRO_BATCHES] = PP_SKIP_MICRO_BATCHES,
                                     [PP_KIND_BAD_PLACEMENT] = PP_SKIP_PLACEMENT};
    char msg[512];
    pp_kind_problem_t why = sched_kind_check(k, p, m, v, msg, sizeof msg);
    if (why == PP_KIND_OK) why = sched_kind_check_placement(k, v, pl, msg, sizeof msg);
    if (why != PP_KIND_OK) return of_problem[why];
    int stages = p * v, layers = s->base.model.layers;
    if (sp == PP_SPLIT_EVEN ? layers % stages != 0 : layers < stages) return PP_SKIP_LAYERS;
    return -1;
}

/* The split of the GPUs a candidate takes: p devices a pipeline, d replicas, zero1 or not. */
typedef struct plan_split {
    int p, d, zero1;
} plan_split_t;

/* The combinations of kind k, v chunks, placement pl and split sp over the micro-batch sizes b
 * in bs[nb], on g's devices and replicas. */
static pp_status_t plan_enumerate_sizes(pp_search_t *s, plan_split_t g, int k, int v, int pl,
                                        pp_split_t sp, const long *bs, int nb)
{
    const long seqs = s->seqs / g.d; /* a replica's */
    /* A refusal that does not depend on m (chunks, placement, layers) counts once. */
    int why =
        plan_refusal(s, g.p, (pp_sched_kind_t)k, v, (pp_placement_t)pl, (int)(seqs / bs[0]), sp);
    if (why >= 0 && why != PP_SKIP_MICRO_BATCHES) {
        s->skipped[why]++;
        return PP_OK;
    }
    for (int i = 0; i < nb; i++) {
        pp_candidate_t c;
        memset(&c, 0, sizeof c);
        c.kind = (pp_sched_kind_t)k;
        c.p = g.p, c.d = g.d, c.zero1 = g.zero1;
        c.m = (int)(seqs / bs[i]);
        c.mbs = (int)bs[i];
        c.v = v;
        c.placement = (pp_placement_t)pl;
        c.split = sp;
        if ((why = plan_refusal(s, g.p, c.kind, v, c.placement, c.m, sp)) >= 0) {
            s->skipped[why]++;
            continue;
        }
        int n = snprintf(c.label, sizeof c.label, "%s", sched_kind_name(c.kind));
        if (g.d > 1)
            n += snprintf(c.label + n, sizeof c.label - (size_t)n, " p=%d d=%d%s", g.p, g.d,
                          g.zero1 ? " zero1" : "");
        if (v > 1)
            n += snprintf(c.label + n, sizeof c.label - (size_t)n, " v=%d%s", v,
                          pl == PP_PLACEMENT_V ? " place-v" : "");
        n += snprintf(c.label + n, sizeof c.label - (size_t)n, " m=%d b=%d", c.m, c.mbs);
        if (sp == PP_SPLIT_BALANCED) snprintf(c.label + n, sizeof c.label - (size_t)n, " balanced");
        PP_CHECK(plan_push(s, &c));
    }
    return PP_OK;
}

/* Every generated kind of the table, v = 1..PLAN_MAX_CHUNKS, each placement its row builds (one
 * when v = 1), the even and the balanced layer split, every micro-batch size that divides a
 * replica's batch into at most PP_MAX_MICRO_BATCHES, on g's devices and replicas. */
static pp_status_t plan_enumerate_split(pp_search_t *s, plan_split_t g)
{
    long bs[2 * PLAN_MAX_ROOT], seqs = s->seqs / g.d;
    int nb = 0;
    for (long b = 1; b * b <= seqs; b++)
        if (seqs % b == 0) bs[nb++] = b;
    for (int i = nb - 1; i >= 0; i--)
        if (bs[i] * bs[i] != seqs) bs[nb++] = seqs / bs[i];
    int first = 0;
    while (first < nb && seqs / bs[first] > PP_MAX_MICRO_BATCHES)
        first++;
    for (int k = 0; k < PP_SCHED_KIND_COUNT; k++) {
        if (sched_kind((pp_sched_kind_t)k)->written) continue;
        if (s->kinds && !(s->kinds & (1u << k))) continue;
        for (int v = 1; v <= PLAN_MAX_CHUNKS; v++)
            for (int pl = PP_PLACEMENT_LOOP; pl <= (v > 1 ? PP_PLACEMENT_V : PP_PLACEMENT_LOOP);
                 pl++)
                for (int sp = PP_SPLIT_EVEN; sp <= PP_SPLIT_BALANCED; sp++)
                    PP_CHECK(plan_enumerate_sizes(s, g, k, v, pl, (pp_split_t)sp, bs + first,
                                                  nb - first));
    }
    return PP_OK;
}

/* Every split of the GPUs into p x d whose d divides the global batch (up to
 * PP_MAX_DATA_PARALLEL replicas), with AdamW and d > 1 once with its state whole and once
 * sharded (zero1). */
static pp_status_t plan_enumerate(pp_search_t *s)
{
    const int adamw = s->base.run.optimizer == PP_OPT_ADAMW;
    for (int d = 1; d <= s->p && d <= PP_MAX_DATA_PARALLEL; d++) {
        if (s->p % d != 0 || s->seqs % d != 0) continue;
        for (int z = 0; z <= (adamw && d > 1); z++)
            PP_CHECK(plan_enumerate_split(s, (plan_split_t){s->p / d, d, z}));
    }
    return PP_OK;
}

/* ---- pass 2: the prediction of each ---------------------------------------------------------- */

int plan_candidate_sets(const pp_search_t *s, const pp_candidate_t *c, char bufs[][64],
                        const char **sets)
{
    snprintf(bufs[0], 64, "schedule.kind=%s", sched_kind_name(c->kind));
    snprintf(bufs[1], 64, "pipeline.devices=%d", s->p);
    snprintf(bufs[2], 64, "pipeline.stages=auto");
    snprintf(bufs[3], 64, "pipeline.chunks=%d", c->v);
    snprintf(bufs[4], 64, "pipeline.placement=%s", c->placement == PP_PLACEMENT_V ? "v" : "loop");
    snprintf(bufs[5], 64, "pipeline.micro_batches=%d", c->m);
    snprintf(bufs[6], 64, "pipeline.micro_batch_size=%d", c->mbs);
    snprintf(bufs[7], 64, "pipeline.split=%s", c->split == PP_SPLIT_BALANCED ? "balanced" : "even");
    snprintf(bufs[8], 64, "run.optimizer=%s",
             s->base.run.optimizer == PP_OPT_ADAMW ? "adamw" : "none");
    snprintf(bufs[9], 64, "pipeline.data_parallel=%d", c->d > 1 ? c->d : 1);
    snprintf(bufs[10], 64, "run.optimizer_sharding=%s", c->zero1 ? "zero1" : "none");
    int n = 11;
    if (c->offload) {
        snprintf(bufs[n++], 64, "run.offload=auto");
        snprintf(bufs[n++], 64, "run.memory_limit=%.9g", s->limit_bytes / 1073741824.0);
    }
    for (int k = 0; k < n; k++)
        sets[k] = bufs[k];
    return n;
}

pp_status_t plan_candidate_load(pp_run_t *r, const pp_search_t *s, const pp_plan_query_t *q,
                                const pp_candidate_t *c, int n_visible)
{
    char bufs[PP_PLAN_CANDIDATE_SETS][64];
    const char *sets[256 + PP_PLAN_CANDIDATE_SETS];
    int n = 0;
    if (q->n_sets > 256) PP_FAIL(PP_ERR_USAGE, "plan: at most 256 --set options");
    for (int k = 0; k < q->n_sets; k++)
        sets[n++] = q->sets[k];
    n += plan_candidate_sets(s, c, bufs, sets + n);
    return run_load(r, q->path, NULL, sets, n, n_visible);
}

/* Candidate c's figures, read off the report of its prediction: what `ppsched FILE --simulate`
 * prints for the same plan, never a figure of the planner's own. */
static void plan_read_report(pp_candidate_t *c, const pp_run_t *r)
{
    const pp_report_t *rep = &r->report;
    c->step_ms = rep->step_ms;
    c->tokens_per_s = rep->tokens_per_s;
    c->bubble = rep->bubble;
    c->compute_ms = c->sent_bytes = c->mb_equiv = 0;
    for (int d = 0; d < rep->devices; d++) {
        const pp_device_stats_t *ds = &rep->per_device[d];
        c->compute_ms = fmax(c->compute_ms, ds->busy_ms);
        c->sent_bytes += ds->bytes_sent;
        c->mb_equiv = fmax(c->mb_equiv, ds->act_mb_equiv);
    }
    /* the memory verdict's fullest device; its predicted peak in whole bytes, as the report's */
    c->fullest = r->mem.fullest;
    c->peak_bytes = (double)rep->per_device[c->fullest].peak_mem_bytes;
}

pp_status_t plan_candidate_predict(pp_run_t *r, pp_candidate_t *c)
{
    PP_CHECK(run_predict(r, NULL));
    PP_CHECK(run_report(r));
    plan_read_report(c, r);
    return PP_OK;
}

/* 1 when every stage of the resolved config holds the same number of blocks. */
static int plan_split_is_even(const pp_job_t *job)
{
    for (int i = 1; i < job->model.n_layers_per_stage; i++)
        if (job->model.layers_per_stage[i] != job->model.layers_per_stage[0]) return 0;
    return 1;
}

/* Candidate c, which does not fit without offload, again under run.offload auto with the
 * search's limit into *off; *fits 1 when that fits. */
static pp_status_t plan_offload(const pp_search_t *s, const pp_plan_query_t *q,
                                const pp_candidate_t *c, pp_candidate_t *off, int *fits)
{
    pp_run_t r;
    *off = *c;
    off->offload = 1;
    size_t n = strlen(off->label);
    snprintf(off->label + n, sizeof off->label - n, " offload");
    pp_status_t st = plan_candidate_load(&r, s, q, off, -1);
    if (st == PP_OK) st = plan_candidate_predict(&r, off);
    *fits = st == PP_OK && off->peak_bytes <= s->limit_bytes;
    run_free(&r);
    return st == PP_ERR_INPUT ? PP_OK : st;
}

/* Predict candidate i. *why is -1 when it is kept, else why not: the chain refused it (an input
 * problem, its message already printed), or its balanced split came out even (the even candidate
 * stands for it). Its offload_room: whether offload could make it fit (no device is over the limit
 * by more than PLAN_OFFLOAD_SHARE of its activation slots). */
static pp_status_t plan_evaluate(pp_search_t *s, const pp_plan_query_t *q, int i, int *why)
{
    pp_run_t r;
    pp_status_t st = plan_candidate_load(&r, s, q, &s->c[i], -1);
    *why = st == PP_OK ? -1 : PP_SKIP_BUILD;
    if (st == PP_OK && s->c[i].split == PP_SPLIT_BALANCED && plan_split_is_even(&r.job))
        *why = PP_SKIP_SAME_SPLIT;
    if (st == PP_OK && *why < 0) st = plan_candidate_predict(&r, &s->c[i]);
    if (st == PP_OK && *why < 0 && !(s->limit_bytes > 0)) s->limit_bytes = r.mem.limit;
    s->c[i].offload_room = st == PP_OK && *why < 0;
    for (int d = 0; s->c[i].offload_room && d < r.mem.n_devices; d++) {
        double over = r.mem.dev[d].total - s->limit_bytes;
        if (over > PLAN_OFFLOAD_SHARE * r.mem.dev[d].slots) s->c[i].offload_room = 0;
    }
    run_free(&r);
    return st == PP_ERR_INPUT && *why == PP_SKIP_BUILD ? PP_OK : st;
}

static int plan_by_step(const void *pa, const void *pb)
{
    const pp_candidate_t *a = pa, *b = pb;
    if (a->step_ms != b->step_ms) return a->step_ms < b->step_ms ? -1 : 1;
    return strcmp(a->label, b->label);
}

/* The offload dimension, after every candidate was predicted without it (the file's run.offload
 * none): the candidates that do not fit, have room (offload_room) and are quicker than the best
 * that fits without (nothing slower could win with offload's copies on top), quickest first, at
 * most PLAN_OFFLOAD_TRIES of them, each again under run.offload auto; those that then fit are
 * added. */
static pp_status_t plan_offload_pass(pp_search_t *s, const pp_plan_query_t *q, double t0)
{
    double best = INFINITY;
    int n = 0, tried = 0, n0 = s->n;
    if (s->base.run.offload != PP_OFFLOAD_NONE || !(s->limit_bytes > 0)) return PP_OK;
    pp_candidate_t *try = malloc(sizeof *try * (size_t)(n0 > 0 ? n0 : 1));
    PP_ALLOC_CHECK(try);
    for (int i = 0; i < n0; i++)
        if (s->c[i].peak_bytes <= s->limit_bytes && s->c[i].step_ms < best) best = s->c[i].step_ms;
    for (int i = 0; i < n0; i++)
        if (s->c[i].peak_bytes > s->limit_bytes && s->c[i].offload_room && s->c[i].step_ms < best)
            try[n++] = s->c[i];
    if (n > 1) qsort(try, (size_t)n, sizeof *try, plan_by_step);
    pp_status_t st = PP_OK;
    for (int i = 0; i < n && tried < PLAN_OFFLOAD_TRIES && st == PP_OK; i++, tried++) {
        if (s->budget_s > 0 && now_s() - t0 > s->budget_s) break;
        pp_candidate_t off;
        int fits;
        st = plan_offload(s, q, &try[i], &off, &fits);
        if (st == PP_OK && fits) st = plan_push(s, &off);
    }
    free(try);
    return st;
}

/* What lowering and simulating candidate c costs, about: its stages x micro-batches. */
static long long plan_size(const pp_search_t *s, const pp_candidate_t *c)
{
    return (long long)c->p * c->d * c->v * c->m;
}

/* The order of evaluation: smallest plan first (every candidate has the same p); the rest of the
 * fields make the order total. */
static int plan_by_size(const void *pa, const void *pb)
{
    const pp_candidate_t *a = pa, *b = pb;
    long long sa = (long long)a->v * a->m * a->d, sb = (long long)b->v * b->m * b->d;
    if (sa != sb) return sa < sb ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    if (a->v != b->v) return a->v < b->v ? -1 : 1;
    if (a->placement != b->placement) return a->placement < b->placement ? -1 : 1;
    if (a->split != b->split) return a->split < b->split ? -1 : 1;
    if (a->d != b->d) return a->d < b->d ? -1 : 1;
    if (a->zero1 != b->zero1) return a->zero1 - b->zero1;
    return a->m < b->m ? -1 : a->m > b->m;
}

/* The progress line: done of all, and the fastest that fits among c[0..kept). */
typedef struct progress {
    double t0, last; /* the search's start; the last line's time, 0 before the first */
    int best;        /* index of the best so far among the kept, -1 none */
} progress_t;

static void plan_progress(const pp_search_t *s, int done, int kept, progress_t *pg, int final)
{
    const pp_candidate_t *c = kept > 0 ? &s->c[kept - 1] : NULL;
    if (c && c->peak_bytes <= s->limit_bytes &&
        (pg->best < 0 || c->step_ms < s->c[pg->best].step_ms))
        pg->best = kept - 1;
    double t = now_s();
    if (!final && (t - pg->t0 < 1.0 || t - pg->last < 0.25)) return;
    if (final && pg->last == 0) return;
    pg->last = t;
    fprintf(stderr, "\r# plan: %d of %d candidates predicted (%.1f s)", done, s->n, t - pg->t0);
    if (pg->best >= 0)
        fprintf(stderr, "; best so far %-40s %10.4g tokens/s", s->c[pg->best].label,
                s->c[pg->best].tokens_per_s);
    if (final) fputc('\n', stderr);
}

/* Stop after candidate i when the budget ran out: count what is left. */
static int plan_out_of_time(pp_search_t *s, int i, double t0)
{
    if (!(s->budget_s > 0) || i + 1 >= s->n || now_s() - t0 <= s->budget_s) return 0;
    s->unevaluated = s->n - (i + 1);
    s->unevaluated_from = plan_size(s, &s->c[i + 1]);
    return 1;
}

pp_status_t plan_search(pp_search_t *s, const pp_plan_query_t *q)
{
    progress_t pg = {now_s(), 0, -1};
    memset(s, 0, sizeof *s);
    PP_CHECK(plan_base(s, q));
    PP_CHECK(plan_enumerate(s));
    if (s->n > 1) qsort(s->c, (size_t)s->n, sizeof *s->c, plan_by_size);
    s->listed = s->n;
    int kept = 0, done = 0;
    for (int i = 0; i < s->n; i++) {
        int why;
        PP_CHECK(plan_evaluate(s, q, i, &why));
        if (why < 0)
            s->c[kept++] = s->c[i];
        else
            s->skipped[why]++;
        done = i + 1;
        if (q->progress) plan_progress(s, done, kept, &pg, 0);
        if (plan_out_of_time(s, i, pg.t0)) break;
    }
    if (q->progress) plan_progress(s, done, kept, &pg, 1);
    s->n = kept;
    PP_CHECK(plan_offload_pass(s, q, pg.t0));
    for (int i = 0; i < s->n; i++)
        s->c[i].fits = s->c[i].peak_bytes <= s->limit_bytes;
    plan_search_rank(s);
    s->seconds = now_s() - pg.t0;
    return PP_OK;
}

/* ---- ranking, front, comparison -------------------------------------------------------------- */

/* Steps within a millionth of each other are a tie (the simulator's sums differ in the last
 * digits between schedules that run the same ops in another order). */
static int plan_faster(double a, double b)
{
    return a < b - 1e-6 * b;
}

static int plan_cmp(const void *pa, const void *pb)
{
    const pp_candidate_t *a = pa, *b = pb;
    if (a->fits != b->fits) return b->fits - a->fits;
    if (a->fits && plan_faster(a->step_ms, b->step_ms)) return -1;
    if (a->fits && plan_faster(b->step_ms, a->step_ms)) return 1;
    if (a->peak_bytes != b->peak_bytes) return a->peak_bytes < b->peak_bytes ? -1 : 1;
    return strcmp(a->label, b->label);
}

void plan_search_rank(pp_search_t *s)
{
    if (s->n > 1) qsort(s->c, (size_t)s->n, sizeof *s->c, plan_cmp);
    s->n_fit = 0;
    while (s->n_fit < s->n && s->c[s->n_fit].fits)
        s->n_fit++;
}

int plan_search_pareto(const pp_search_t *s, int *idx, int max)
{
    int n = 0;
    /* Walk the fitting candidates by rising memory (ties: faster first); keep each that is faster
     * than every one kept before. */
    int *order = malloc(sizeof *order * (size_t)(s->n_fit > 0 ? s->n_fit : 1));
    if (!order) return 0;
    for (int i = 0; i < s->n_fit; i++)
        order[i] = i;
    for (int i = 1; i < s->n_fit; i++)
        for (int j = i; j > 0; j--) {
            const pp_candidate_t *a = &s->c[order[j - 1]], *b = &s->c[order[j]];
            if (a->peak_bytes < b->peak_bytes ||
                (a->peak_bytes == b->peak_bytes && !plan_faster(b->step_ms, a->step_ms)))
                break;
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    double best = INFINITY;
    for (int i = 0; i < s->n_fit && n < max; i++)
        if (n == 0 || plan_faster(s->c[order[i]].step_ms, best)) {
            best = s->c[order[i]].step_ms;
            idx[n++] = order[i];
        }
    free(order);
    return n;
}

void plan_search_why(const pp_search_t *s, char *buf, size_t size)
{
    buf[0] = '\0';
    if (s->n_fit < 2) return;
    const pp_candidate_t *a = &s->c[0], *b = &s->c[1];
    const double gib = 1073741824.0;
    int n;
    if (plan_faster(a->step_ms, b->step_ms))
        n = snprintf(buf, size, "%s beats %s by %.2f%% (%.3f vs %.3f ms a step)", a->label,
                     b->label, 100.0 * (b->step_ms - a->step_ms) / b->step_ms, a->step_ms,
                     b->step_ms);
    else
        n = snprintf(buf, size, "%s ties with %s (%.3f ms a step) and needs no more memory",
                     a->label, b->label, a->step_ms);
    if (n < 0 || (size_t)n >= size) return;
    snprintf(buf + n, size - (size_t)n,
             ": bubble %.1f%% vs %.1f%% (%+.1f pp), busiest device computes %.3f vs %.3f ms, "
             "%.2f vs %.2f GiB between devices a step, fullest device %.2f vs %.2f GiB (%+.2f)",
             100 * a->bubble, 100 * b->bubble, 100 * (a->bubble - b->bubble), a->compute_ms,
             b->compute_ms, a->sent_bytes / gib, b->sent_bytes / gib, a->peak_bytes / gib,
             b->peak_bytes / gib, (a->peak_bytes - b->peak_bytes) / gib);
}

/* ---- --verify -------------------------------------------------------------------------------- */

static int plan_by_measure(const void *pa, const void *pb)
{
    const pp_verified_t *a = pa, *b = pb;
    return a->measured_ms < b->measured_ms ? -1 : a->measured_ms > b->measured_ms;
}

static pp_status_t plan_run_one(const pp_search_t *s, const pp_plan_query_t *q, int i,
                                int n_visible, const pp_run_opts_t *ro, pp_verified_t *v)
{
    pp_run_t r;
    pp_status_t st = plan_candidate_load(&r, s, q, &s->c[i], n_visible);
    if (st == PP_OK) st = run_go(&r, ro);
    if (st == PP_OK) {
        v->rank = i + 1;
        v->predicted_ms = r.predicted_ms;
        v->measured_ms = r.report.step_ms;
        v->predicted_bytes = r.mem.dev[r.mem.fullest].total;
        v->measured_bytes = 0;
        for (int d = 0; d < r.report.devices; d++)
            v->measured_bytes =
                fmax(v->measured_bytes, (double)r.report.per_device[d].peak_mem_bytes);
    }
    run_free(&r);
    return st;
}

pp_status_t plan_verify(const pp_search_t *s, const pp_plan_query_t *q, int k, int n_visible,
                        const pp_run_opts_t *ro, pp_verified_t *v, int *n)
{
    *n = 0;
    for (int i = 0; i < s->n_fit && *n < k; i++) {
        if (s->c[i].d > 1) continue; /* the executor runs one replica */
        if (q->progress) fprintf(stderr, "# verify [%d/%d] %s\n", *n + 1, k, s->c[i].label);
        PP_CHECK(plan_run_one(s, q, i, n_visible, ro, &v[*n]));
        (*n)++;
    }
    if (*n > 1) qsort(v, (size_t)*n, sizeof *v, plan_by_measure);
    return PP_OK;
}

void plan_search_free(pp_search_t *s)
{
    if (!s) return;
    free(s->c);
    if (s->have_base) config_free(&s->base);
    memset(s, 0, sizeof *s);
}
