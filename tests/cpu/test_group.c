/*
 * test_group.c — the split simulation and the timeline merge over several processes, with the
 * processes played by threads of this program through a row of the group table written here
 * (pp_group.h): collectives over a shared board, messages through a mailbox, receives that wait
 * until their deadline. It runs everywhere (no MPI), under the sanitizers too, and checks what
 * tests/check_mpi.sh checks under mpirun: 2 and 4 processes give bitwise the single process's
 * timeline for gpipe, 1f1b, interleaved-1f1b and zb-h1 at seeded random costs; a send never
 * posted times out on the rank that waits, naming the op and the rank; group_agree gives every
 * rank the first failure; and a measured run's merge moves each process's times by its origin's
 * shift, takes each device's peak memory from its owner, spans each step from the earliest
 * origin to the latest end and keeps the largest skew.
 */
#include "common/pp_group.h"
#include "sim/simulate.h"
#include "tests/check.h"
#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_RANKS = 4, MAX_MAIL = 4096 };

/* What the threads share: a barrier, the board collectives copy through, the mailbox. */
typedef struct board {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int size, arrived, generation;
    const void *slot[MAX_RANKS]; /* each rank's buffer in the current collective */
    struct mail {
        int from, to, tag;
        double v;
    } mail[MAX_MAIL];
    int n_mail;
} board_t;

static board_t *board_of(pp_group_t *g)
{
    return (board_t *)g->impl;
}

static void barrier(board_t *b)
{
    pthread_mutex_lock(&b->mu);
    int gen = b->generation;
    if (++b->arrived == b->size) {
        b->arrived = 0;
        b->generation++;
        pthread_cond_broadcast(&b->cv);
    } else {
        while (gen == b->generation)
            pthread_cond_wait(&b->cv, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
}

static pp_status_t t_init(pp_group_t *g, int *argc, char ***argv)
{
    return PP_OK;
}
static pp_status_t t_bcast(pp_group_t *g, void *buf, size_t bytes, int root)
{
    board_t *b = board_of(g);
    b->slot[g->rank] = buf;
    barrier(b);
    if (g->rank != root) memcpy(buf, b->slot[root], bytes);
    barrier(b);
    return PP_OK;
}
static pp_status_t t_gather(pp_group_t *g, const void *mine, void *all, size_t bytes, int root)
{
    board_t *b = board_of(g);
    b->slot[g->rank] = mine;
    barrier(b);
    for (int r = 0; g->rank == root && r < g->size; r++)
        memcpy((char *)all + (size_t)r * bytes, b->slot[r], bytes);
    barrier(b);
    return PP_OK;
}
static pp_status_t t_max_int(pp_group_t *g, int *v)
{
    board_t *b = board_of(g);
    int mine = *v;
    b->slot[g->rank] = &mine;
    barrier(b);
    for (int r = 0; r < g->size; r++)
        if (*(const int *)b->slot[r] > *v) *v = *(const int *)b->slot[r];
    barrier(b);
    return PP_OK;
}
static pp_status_t t_barrier(pp_group_t *g)
{
    barrier(board_of(g));
    return PP_OK;
}
static pp_status_t t_post_send(pp_group_t *g, const double *v, int peer, int tag)
{
    board_t *b = board_of(g);
    pthread_mutex_lock(&b->mu);
    int ok = b->n_mail < MAX_MAIL;
    if (ok) b->mail[b->n_mail++] = (struct mail){g->rank, peer, tag, *v};
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return ok ? PP_OK : PP_ERR_NOMEM;
}
static pp_status_t t_recv(pp_group_t *g, double *v, int peer, int tag, double deadline)
{
    board_t *b = board_of(g);
    pp_status_t st = PP_ERR_TIMEOUT;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        for (int i = 0; i < b->n_mail; i++) {
            struct mail *m = &b->mail[i];
            if (m->from != peer || m->to != g->rank || m->tag != tag) continue;
            *v = m->v;
            b->mail[i] = b->mail[--b->n_mail]; /* order among equal tags is plan order anyway */
            st = PP_OK;
            break;
        }
        if (st == PP_OK || group_now_s() > deadline) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 2000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    }
    pthread_mutex_unlock(&b->mu);
    return st;
}
static pp_status_t t_flush(pp_group_t *g, double deadline)
{
    return PP_OK;
}
static pp_status_t t_clock_offset(pp_group_t *g, double *offset_ms, double *residual_ms)
{
    *offset_ms = *residual_ms = 0;
    return PP_OK;
}
static void t_finish(pp_group_t *g) {}

static const pp_group_ops_t thread_ops = {
    .name = "threads",
    .init = t_init,
    .bcast = t_bcast,
    .gather = t_gather,
    .max_int = t_max_int,
    .barrier = t_barrier,
    .post_send = t_post_send,
    .recv = t_recv,
    .flush = t_flush,
    .clock_offset = t_clock_offset,
    .finish = t_finish, /* no host_share: the simulator never asks for it */
};

/* ---- one process's run ------------------------------------------------------------------ */

typedef struct proc {
    pp_group_t g;
    const pp_plan_t *plan;
    const pp_cost_model_t *cm;
    int rank_of[PP_MAX_DEVICES];
    int drop_send;
    double timeout_s;
    pp_status_t sim, agreed, merged;
    pp_timeline_t tl;
} proc_t;

static void *proc_main(void *arg)
{
    proc_t *p = arg;
    pp_sim_part_t part = {&p->g, p->rank_of, group_now_s() + p->timeout_s, p->timeout_s,
                          p->drop_send};
    p->sim = simulate_plan_part(&p->tl, p->plan, p->cm, &part);
    p->agreed = group_agree(&p->g, p->sim);
    p->merged =
        p->agreed == PP_OK ? timeline_merge(&p->tl, p->plan, p->rank_of, &p->g, 0.0) : p->agreed;
    return NULL;
}

/* Run `plan` as n threaded processes; procs[] keep their results (caller frees the timelines). */
static void run_split(proc_t *procs, int n, const pp_plan_t *plan, const pp_cost_model_t *cm,
                      int drop_send, double timeout_s)
{
    board_t b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    b.size = n;
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < n; r++) {
        proc_t *p = &procs[r];
        memset(p, 0, sizeof *p);
        p->g = (pp_group_t){.ops = &thread_ops,
                            .rank = r,
                            .size = n,
                            .local_rank = r,
                            .local_size = n,
                            .n_hosts = 1,
                            .impl = &b};
        p->plan = plan;
        p->cm = cm;
        p->drop_send = drop_send;
        p->timeout_s = timeout_s;
        group_split_devices(&p->g, plan->n_devices, 0, p->rank_of);
        pthread_create(&th[r], NULL, proc_main, p);
    }
    for (int r = 0; r < n; r++)
        pthread_join(th[r], NULL);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
}

static pp_cost_model_t random_costs(int n_stages)
{
    pp_cost_model_t cm;
    pp_job_cost_t c = {ts_rand_uniform(0.5, 2),
                       ts_rand_uniform(0.5, 2),
                       ts_rand_uniform(0.1, 1),
                       ts_rand_uniform(0.01, 0.3),
                       0,
                       0};
    if (cost_model_uniform(&cm, n_stages, &c) != PP_OK) memset(&cm, 0, sizeof cm);
    for (int s = 0; s < cm.n_stages; s++) { /* uneven stages */
        cm.f[s] *= ts_rand_uniform(0.8, 1.2);
        cm.i[s] *= ts_rand_uniform(0.8, 1.2);
        cm.b[s] = cm.i[s] + cm.w[s];
    }
    return cm;
}

static void test_split_equals_whole(void)
{
    static const pp_sched_kind_t kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_INTERLEAVED,
                                            PP_SCHED_ZBH1};
    static const int sizes[] = {2, 4};
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
        pp_plan_t plan;
        int v = kinds[ki] == PP_SCHED_INTERLEAVED ? 2 : 1;
        REQUIRE(ts_make_plan(&plan, kinds[ki], 4, 8, v) == 0);
        pp_cost_model_t cm = random_costs(plan.n_stages);
        pp_timeline_t whole;
        REQUIRE(simulate_plan(&whole, &plan, &cm) == PP_OK);
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            proc_t procs[MAX_RANKS];
            int n = sizes[si];
            run_split(procs, n, &plan, &cm, -1, 30);
            for (int r = 0; r < n; r++) {
                proc_t *p = &procs[r];
                EXPECT(p->merged == PP_OK, "%s, %d processes, rank %d: %s",
                       sched_kind_name(kinds[ki]), n, r, pp_status_str(p->merged));
                if (p->merged != PP_OK) continue;
                int same = p->tl.step_ms[0] == whole.step_ms[0];
                for (int i = 0; i < plan.n_ops; i++)
                    same &= p->tl.t[i].start_ms == whole.t[i].start_ms &&
                            p->tl.t[i].end_ms == whole.t[i].end_ms;
                EXPECT(same,
                       "%s, %d processes, rank %d: the merged timeline differs (step %.17g, "
                       "want %.17g)",
                       sched_kind_name(kinds[ki]), n, r, p->tl.step_ms[0], whole.step_ms[0]);
                timeline_free(&p->tl);
            }
        }
        timeline_free(&whole);
        cost_model_free(&cm);
        plan_free(&plan);
    }
}

/* The SEND of the first transfer between ranks 0 and 1 is never posted: rank 1 waits for it
 * until its deadline and names its RECV and rank 0; every rank gets the timeout. */
static void test_missing_send_times_out(void)
{
    pp_plan_t plan;
    REQUIRE(ts_make_plan(&plan, PP_SCHED_1F1B, 4, 8, 1) == 0);
    pp_cost_model_t cm = random_costs(plan.n_stages);
    int first = -1;
    for (int i = 0; i < plan.n_ops && first < 0; i++)
        if (plan.ops[i].role == PP_ROLE_SEND && plan.ops[i].device == 1) first = i;
    REQUIRE(first >= 0 && plan.ops[plan.ops[first].peer].device == 2);
    proc_t procs[2];
    ts_capture_begin();
    run_split(procs, 2, &plan, &cm, first, 0.3);
    const char *err = ts_capture_end();
    char want[256];
    snprintf(want, sizeof want, "ppsched: rank 1: op %d (device 2, ", plan.ops[first].peer);
    EXPECT(procs[1].sim == PP_ERR_TIMEOUT, "rank 1: %s", pp_status_str(procs[1].sim));
    EXPECT(strstr(err, want) && strstr(err, "still pending after 0.3 s: waiting for rank 0"),
           "the message names the op and the rank:\n%s", err);
    EXPECT(strstr(err, "ppsched: rank 1 of 2 failed: timeout"), "rank 0 names rank 1:\n%s", err);
    for (int r = 0; r < 2; r++) {
        EXPECT(procs[r].agreed == PP_ERR_TIMEOUT, "rank %d agreed on %s", r,
               pp_status_str(procs[r].agreed));
        timeline_free(&procs[r].tl);
    }
    cost_model_free(&cm);
    plan_free(&plan);
}

/* A measured run's merge: each process's op times are on its own origin, which lies shift_r
 * after rank 0's; merged, every op is back where one clock would put it, each device's peak
 * memory is its owner's, each step runs from the earliest origin to the latest end, and the skew
 * is the largest a process gave. */
typedef struct measured {
    pp_group_t g;
    const pp_plan_t *plan;
    const pp_timeline_t *whole;
    int rank_of[PP_MAX_DEVICES];
    double shift;
    pp_status_t st;
    pp_timeline_t tl;
} measured_t;

enum { MEASURED_STEPS = 3 };

static void *measured_main(void *arg)
{
    measured_t *m = arg;
    const pp_plan_t *plan = m->plan;
    m->st = timeline_init(&m->tl, PP_MODE_MEASURE, plan->n_ops, plan->n_devices, MEASURED_STEPS);
    if (m->st != PP_OK) return NULL;
    double end = 0;
    for (int i = 0; i < plan->n_ops; i++) {
        if (m->rank_of[plan->ops[i].device] != m->g.rank) continue;
        m->tl.t[i].start_ms = m->whole->t[i].start_ms - m->shift;
        m->tl.t[i].end_ms = m->whole->t[i].end_ms - m->shift;
        if (m->tl.t[i].end_ms > end) end = m->tl.t[i].end_ms;
    }
    for (int k = 0; k < MEASURED_STEPS; k++)
        m->tl.step_ms[k] = end + 0.25 * k;
    for (int d = 0; d < plan->n_devices; d++)
        if (m->rank_of[d] == m->g.rank) m->tl.peak_mem_bytes[d] = 1000u * (unsigned)(d + 1);
    m->tl.skew_ms = 0.01 * (m->g.rank + 1);
    m->tl.has_op_times = 1;
    m->st = timeline_merge(&m->tl, plan, m->rank_of, &m->g, m->shift);
    return NULL;
}

static void test_measured_merge(void)
{
    pp_plan_t plan;
    REQUIRE(ts_make_plan(&plan, PP_SCHED_ZBH1, 4, 8, 1) == 0);
    pp_cost_model_t cm = random_costs(plan.n_stages);
    pp_timeline_t whole;
    REQUIRE(simulate_plan(&whole, &plan, &cm) == PP_OK);
    board_t b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv, NULL);
    b.size = 2;
    measured_t ms[2];
    pthread_t th[2];
    double lo = 0;
    for (int r = 0; r < 2; r++) {
        memset(&ms[r], 0, sizeof ms[r]);
        ms[r].g = (pp_group_t){.ops = &thread_ops,
                               .rank = r,
                               .size = 2,
                               .local_rank = r,
                               .local_size = 2,
                               .n_hosts = 1,
                               .impl = &b};
        ms[r].plan = &plan;
        ms[r].whole = &whole;
        ms[r].shift = r == 0 ? 0 : ts_rand_uniform(-0.5, 0.5); /* rank 1 starts before or after */
        if (ms[r].shift < lo) lo = ms[r].shift;
        group_split_devices(&ms[r].g, plan.n_devices, 0, ms[r].rank_of);
        pthread_create(&th[r], NULL, measured_main, &ms[r]);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    double span = timeline_makespan(&whole);
    for (int r = 0; r < 2; r++) {
        const pp_timeline_t *t = &ms[r].tl;
        EXPECT(ms[r].st == PP_OK, "rank %d: %s", r, pp_status_str(ms[r].st));
        if (ms[r].st != PP_OK) continue;
        for (int i = 0; i < plan.n_ops; i++) {
            EXPECT_NEAR(t->t[i].start_ms, whole.t[i].start_ms, 1e-12, 1e-12);
            EXPECT_NEAR(t->t[i].end_ms, whole.t[i].end_ms, 1e-12, 1e-12);
        }
        for (int k = 0; k < MEASURED_STEPS; k++)
            EXPECT_NEAR(t->step_ms[k], span + 0.25 * k - lo, 1e-12, 1e-12);
        for (int d = 0; d < plan.n_devices; d++)
            EXPECT(t->peak_mem_bytes[d] == 1000u * (unsigned)(d + 1), "rank %d device %d: %zu", r,
                   d, t->peak_mem_bytes[d]);
        EXPECT(t->skew_ms == 0.02, "rank %d: skew %g", r, t->skew_ms);
    }
    for (int r = 0; r < 2; r++)
        timeline_free(&ms[r].tl);
    pthread_cond_destroy(&b.cv);
    pthread_mutex_destroy(&b.mu);
    timeline_free(&whole);
    cost_model_free(&cm);
    plan_free(&plan);
}

int main(void)
{
    ts_rng_seed(13);
    RUN(test_split_equals_whole);
    RUN(test_missing_send_times_out);
    RUN(test_measured_merge);
    return check_summary("test_group");
}
