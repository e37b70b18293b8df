/*
 * gen_auto_pick.c — generate_auto: build the rows of gen_auto.c's variants table, score each on
 * the simulator, and keep the best, on a small pool of threads (min(rows, online CPUs, 8);
 * PPSCHED_THREADS=N sets it, 1 runs everything on the calling thread).
 *
 * The choice is the serial one, whatever the threads or their timing: rows in table order, a row
 * replaces the best when its score is below it by more than 1e-9. Work that cannot change it is
 * left out, each case a proof, not a guess:
 *  - a row whose twin never used the limit_w rule (it is not built), or whose order equals an
 *    earlier row's op for op, scores the same as that row, so it never replaces the best (the best
 *    at its turn is at most that score + 1e-9): it is dropped without scoring;
 *  - the greedy's span is a lower bound of the simulated step: the simulator times the same ops
 *    in the same order per device with the same costs, adds transfers that take `send` (every
 *    boundary of auto crosses devices) and more dependencies, and takes the latest end minus the
 *    first start, 0; its sums are the greedy's with larger or equal operands, and rounding is
 *    monotone, so each op ends no earlier than in the greedy, to the bit. A row whose span is at
 *    least the score of an earlier scored row cannot replace the best and is dropped.
 * Which rows are scored follows from the rows alone: a thread scores a row only when no earlier
 * row still running could drop it (its span is below theirs), else it waits for them. The
 * threads share the costs and the config, read only; each row's order and plan are its own. One
 * mutex guards the rows' states; the condition variable wakes threads waiting for a row.
 */
#include "model/cost.h"
#include "sim/cost_model.h"
#include "gen_auto.h"
#include "plan/plan.h"
#include "sim/simulate.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AUTO_MAX_THREADS 8    /* the pool's size unless PPSCHED_THREADS says otherwise */
#define AUTO_WAIT        (-1) /* auto_next: no row can start before a running one ends */
#define AUTO_DONE        (-2) /* auto_next: nothing left (or a row failed) */

/* The rows and what the threads share. */
typedef struct auto_job {
    int p, m;
    const pp_auto_costs_t *c;
    const pp_job_t *job; /* NULL: a row's score is its span */
    pp_cost_model_t cm;     /* the scoring model: c's costs per stage (with job) */
    pp_auto_cand_t k[AUTO_ROWS];
    pp_status_t st[AUTO_ROWS]; /* each row's failure, PP_OK */
    int failed;                /* 1 once a row failed: no new work starts */
    int scoring;               /* 0 while rows are built, 1 once every row is built */
    int running;               /* rows a thread works on */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} auto_job_t;

/* 1 when a and b hold the same programs, action for action. */
static int auto_same(const pp_schedule_t *a, const pp_schedule_t *b)
{
    if (a->n_devices != b->n_devices || a->n_stages != b->n_stages || a->n_mb != b->n_mb) return 0;
    for (int d = 0; d < a->n_devices; d++) {
        const pp_program_t *x = &a->prog[d], *y = &b->prog[d];
        if (x->n != y->n || a->stage_device[d] != b->stage_device[d]) return 0;
        for (int j = 0; j < x->n; j++)
            if (x->a[j].kind != y->a[j].kind || x->a[j].stage != y->a[j].stage ||
                x->a[j].mb != y->a[j].mb || x->a[j].overlap != y->a[j].overlap)
                return 0;
    }
    return 1;
}

static void auto_drop(pp_auto_cand_t *k)
{
    schedule_free(&k->order);
    k->state = AUTO_DROPPED;
}

/* The next row to build: the first one not built whose twin (if any) is built and used the
 * rule; a row whose twin did not is dropped. */
static int auto_next_build(auto_job_t *J)
{
    for (int v = 0; v < AUTO_ROWS; v++) {
        if (J->k[v].state != AUTO_TODO) continue;
        int t = auto_twin(v);
        if (t < 0) return v;
        if (J->k[t].state == AUTO_TODO || J->k[t].state == AUTO_RUNNING) continue;
        if (J->k[t].state != AUTO_DROPPED && J->k[t].limit_used) return v;
        auto_drop(&J->k[v]);
    }
    return AUTO_WAIT;
}

/* Every row is built: a row whose order equals an earlier row's is dropped. */
static void auto_drop_repeats(auto_job_t *J)
{
    for (int v = 1; v < AUTO_ROWS; v++)
        for (int u = 0; u < v && J->k[v].state == AUTO_BUILT; u++)
            if (J->k[u].state == AUTO_BUILT && J->k[u].span == J->k[v].span &&
                auto_same(&J->k[u].order, &J->k[v].order))
                auto_drop(&J->k[v]);
}

/* The next row to score: a built row that no earlier scored row drops (span >= its score) and
 * that no earlier row still open could drop (its span is below theirs, which bound their
 * scores). Rows that are dropped are dropped here; a row that is neither waits. */
static int auto_next_score(auto_job_t *J)
{
    for (int v = 0; v < AUTO_ROWS; v++) {
        if (J->k[v].state != AUTO_BUILT) continue;
        int drop = 0, sure = 1;
        for (int u = 0; u < v && !drop; u++) {
            const pp_auto_cand_t *e = &J->k[u];
            if (e->state == AUTO_SCORED) drop = J->k[v].span >= e->score;
            if (e->state == AUTO_BUILT || e->state == AUTO_RUNNING) sure &= J->k[v].span < e->span;
        }
        if (drop)
            auto_drop(&J->k[v]);
        else if (sure)
            return v;
    }
    return AUTO_WAIT;
}

/* Under the lock: the row this thread works on next, AUTO_WAIT or AUTO_DONE. */
static int auto_next(auto_job_t *J)
{
    if (J->failed) return AUTO_DONE;
    if (!J->scoring) {
        int v = auto_next_build(J);
        if (v >= 0 || J->running > 0) return v;
        auto_drop_repeats(J);
        J->scoring = 1;
    }
    int v = auto_next_score(J);
    return v >= 0 || J->running > 0 ? v : AUTO_DONE;
}

/* The simulated step of row v's order, lowered with job and priced by the shared model. */
static pp_status_t auto_score(auto_job_t *J, pp_auto_cand_t *k)
{
    k->score = k->span;
    if (!J->job) return PP_OK;
    pp_plan_t plan;
    const pp_cost_model_t *cp = &J->cm;
    memset(&plan, 0, sizeof plan);
    pp_status_t st = plan_lower(&plan, &k->order, J->job);
    if (st == PP_OK) st = simulate_makespans(&k->score, &plan, &cp, 1); /* no timeline */
    plan_free(&plan);
    return st;
}

/* A thread of the pool (the caller is one too): build or score rows until none is left. */
static void *auto_worker(void *arg)
{
    auto_job_t *J = arg;
    pthread_mutex_lock(&J->mu);
    for (;;) {
        int v = auto_next(J);
        if (v == AUTO_DONE) break;
        if (v == AUTO_WAIT) {
            pthread_cond_wait(&J->cv, &J->mu);
            continue;
        }
        int scoring = J->scoring;
        J->k[v].state = AUTO_RUNNING;
        J->running++;
        pthread_mutex_unlock(&J->mu);
        pp_status_t st =
            scoring ? auto_score(J, &J->k[v]) : auto_build(&J->k[v], v, J->p, J->m, J->c);
        pthread_mutex_lock(&J->mu);
        J->running--;
        J->k[v].state = scoring ? AUTO_SCORED : AUTO_BUILT;
        if (st != PP_OK) {
            J->st[v] = st;
            J->failed = 1;
        }
        pthread_cond_broadcast(&J->cv);
    }
    pthread_cond_broadcast(&J->cv);
    pthread_mutex_unlock(&J->mu);
    return NULL;
}

/* The pool's size: PPSCHED_THREADS, else min(online CPUs, 8); never more than the rows. */
static pp_status_t auto_threads(int *n)
{
    const char *env = getenv("PPSCHED_THREADS");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN), want = cpus < 1 ? 1 : cpus;
    if (want > AUTO_MAX_THREADS) want = AUTO_MAX_THREADS;
    if (env && *env) {
        char *end;
        want = strtol(env, &end, 10);
        if (*end || want < 1)
            PP_REFUSE(PP_ERR_INPUT, "PPSCHED_THREADS=%s: expected a whole number, 1 or more", env);
    }
    *n = want < AUTO_ROWS ? (int)want : AUTO_ROWS;
    return PP_OK;
}

static void auto_job_free(auto_job_t *J)
{
    for (int v = 0; v < AUTO_ROWS; v++)
        schedule_free(&J->k[v].order);
    cost_model_free(&J->cm);
    pthread_cond_destroy(&J->cv);
    pthread_mutex_destroy(&J->mu);
}

static pp_status_t auto_job_init(auto_job_t *J, int p, int m, const pp_auto_costs_t *c,
                                 const pp_job_t *job)
{
    memset(J, 0, sizeof *J);
    J->p = p, J->m = m, J->c = c, J->job = job;
    pthread_mutex_init(&J->mu, NULL);
    pthread_cond_init(&J->cv, NULL);
    if (!job) return PP_OK;
    pp_job_cost_t zero = {0};
    pp_status_t st = cost_model_uniform(&J->cm, p, &zero);
    if (st != PP_OK) goto fail;
    for (int s = 0; s < p; s++) {
        J->cm.f[s] = c->f[s];
        J->cm.i[s] = c->i[s];
        J->cm.w[s] = c->w[s];
        J->cm.b[s] = c->i[s] + c->w[s];
    }
    J->cm.send = c->send;
    return PP_OK;
fail:
    auto_job_free(J);
    return st;
}

/* Run the pool over J's rows; the caller is one of its threads. */
static void auto_run(auto_job_t *J, int n_threads)
{
    pthread_t tid[AUTO_ROWS];
    int started = 0;
    while (started < n_threads - 1 && !pthread_create(&tid[started], NULL, auto_worker, J))
        started++; /* a thread that cannot start leaves its rows to the others */
    auto_worker(J);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
}

/* The serial choice, in row order: a row replaces the best when its score is lower by more than
 * 1e-9 (dropped rows provably never do). *win: the row; on a failure, the first failing row's. */
static pp_status_t auto_choice(const auto_job_t *J, int *win)
{
    double best = INFINITY;
    for (int v = 0; v < AUTO_ROWS; v++)
        if (J->st[v] != PP_OK) return J->st[v];
    for (int v = 0; v < AUTO_ROWS; v++) {
        if (J->k[v].state == AUTO_DROPPED) continue;
        if (J->k[v].state != AUTO_SCORED)
            PP_FAIL(PP_ERR_INTERNAL, "auto: row %d was neither scored nor dropped", v);
        if (J->k[v].score < best - 1e-9) {
            best = J->k[v].score;
            *win = v;
        }
    }
    return PP_OK;
}

pp_status_t generate_auto(pp_schedule_t *out, int p, int m, const pp_auto_costs_t *c,
                          const pp_job_t *job)
{
    memset(out, 0, sizeof *out);
    if (!generate_sizes_ok("auto", p, m, 1)) return PP_ERR_INPUT;
    if (c->limit < 1) {
        fprintf(stderr, "auto: needs an in-flight limit of 1 or more (got %d)\n", c->limit);
        return PP_ERR_INPUT;
    }
    int n_threads, win = -1;
    PP_CHECK(auto_threads(&n_threads));
    auto_job_t *J = malloc(sizeof *J);
    PP_ALLOC_CHECK(J);
    pp_status_t st = auto_job_init(J, p, m, c, job);
    if (st != PP_OK) goto out;
    auto_run(J, n_threads);
    st = auto_choice(J, &win);
    if (st == PP_OK) {
        *out = J->k[win].order;
        memset(&J->k[win].order, 0, sizeof J->k[win].order);
    }
    auto_job_free(J);
out:
    free(J);
    return st;
}
