/*
 * mpi_group.c — the MPI row of the group table (pp_group.h), built only where mpicc was found.
 *
 * One communicator, MPI_COMM_WORLD, with MPI_ERRORS_RETURN so that a failed call comes back as a
 * status with MPI's message instead of aborting the job; the processes of one host (local rank)
 * from MPI_Comm_split_type, and every rank's host (numbered by its lowest rank) gathered once at
 * init. For the tests, PPSCHED_TEST_HOSTS=N splits the processes into N hosts of consecutive ranks
 * instead (rank r on host r * N / size), so a launch on one machine plays several. Point-to-point
 * waits poll non-blocking requests against a deadline, and a request that times out is cancelled:
 * nothing here waits without a bound but the collectives, which every process reaches because every
 * wait before them is bounded. Sends are posted with MPI_Isend from storage the caller keeps until
 * flush.
 */
#include "pp_group.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mpi_state {
    MPI_Request *sends; /* posted, not yet completed */
    int n_sends, cap_sends;
    int inited;     /* 1: this process called MPI_Init */
    MPI_Comm host;  /* the processes of this host */
    MPI_Win shared; /* host_share's window (MPI_WIN_NULL: none) */
    void *shared_at;
} mpi_state_t;

/* MPI's message for error code e at file:line; PP_ERR_INTERNAL. */
static pp_status_t mpi_fail(const char *file, int line, const char *call, int e)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(e, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", e);
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, call, msg);
    return PP_ERR_INTERNAL;
}

#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int mpi_check_e_ = (call);                                                                 \
        if (mpi_check_e_ != MPI_SUCCESS) return mpi_fail(__FILE__, __LINE__, #call, mpi_check_e_); \
    } while (0)

static mpi_state_t *state(pp_group_t *g)
{
    return (mpi_state_t *)g->impl;
}

/* The processes of this host (or of this test host, PPSCHED_TEST_HOSTS) as a communicator. */
static pp_status_t split_hosts(pp_group_t *g, MPI_Comm *host)
{
    const char *test_hosts = getenv("PPSCHED_TEST_HOSTS");
    long n = test_hosts && *test_hosts ? atol(test_hosts) : 0;
    if (n > 0)
        MPI_CHECK(
            MPI_Comm_split(MPI_COMM_WORLD, (int)((long)g->rank * n / g->size), g->rank, host));
    else
        MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL,
                                      host));
    return PP_OK;
}

/* Every rank's host and local rank into g->places: each host is named by its lowest rank (its
 * local rank 0, the split being keyed on the rank), and numbered in the order of those. */
static pp_status_t gather_places(pp_group_t *g, MPI_Comm host)
{
    int mine[2] = {g->rank, g->local_rank};
    MPI_CHECK(MPI_Bcast(&mine[0], 1, MPI_INT, 0, host)); /* the host's lowest rank */
    int *all = malloc(sizeof(int) * 2 * (size_t)g->size);
    g->places = malloc(sizeof *g->places * (size_t)g->size);
    if (!all || !g->places) {
        free(all);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for the places of %d ranks", g->size);
    }
    int e = MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
    g->n_hosts = 0;
    for (int r = 0; e == MPI_SUCCESS && r < g->size; r++) {
        int lowest = all[2 * r];
        g->places[r].host = lowest == r ? g->n_hosts++ : g->places[lowest].host;
        g->places[r].local_rank = all[2 * r + 1];
    }
    free(all);
    MPI_CHECK(e);
    return PP_OK;
}

static pp_status_t m_init(pp_group_t *g, int *argc, char ***argv)
{
    mpi_state_t *s = calloc(1, sizeof *s);
    PP_ALLOC_CHECK(s);
    g->impl = s;
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
        MPI_CHECK(MPI_Init(argc, argv));
        s->inited = 1;
    }
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g->rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g->size));
    s->shared = MPI_WIN_NULL;
    s->host = MPI_COMM_NULL;
    PP_CHECK(split_hosts(g, &s->host));
    MPI_CHECK(MPI_Comm_rank(s->host, &g->local_rank));
    MPI_CHECK(MPI_Comm_size(s->host, &g->local_size));
    return gather_places(g, s->host);
}

/* In pieces of at most 1 GiB: MPI counts are ints (a stage's gradients may be larger). */
static pp_status_t m_bcast(pp_group_t *g, void *buf, size_t bytes, int root)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t at = 0; at < bytes; at += piece) {
        int n = (int)(bytes - at < piece ? bytes - at : piece);
        MPI_CHECK(MPI_Bcast((char *)buf + at, n, MPI_BYTE, root, MPI_COMM_WORLD));
    }
    return PP_OK;
}

static pp_status_t m_gather(pp_group_t *g, const void *mine, void *all, size_t bytes, int root)
{
    if (bytes > (size_t)1 << 30) PP_FAIL(PP_ERR_INTERNAL, "gather of %zu bytes a process", bytes);
    MPI_CHECK(
        MPI_Gather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD));
    return PP_OK;
}

static pp_status_t m_max_int(pp_group_t *g, int *v)
{
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    return PP_OK;
}

static pp_status_t m_barrier(pp_group_t *g)
{
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    return PP_OK;
}

static pp_status_t m_post_send(pp_group_t *g, const double *v, int peer, int tag)
{
    mpi_state_t *s = state(g);
    PP_GROW(s->sends, s->n_sends, s->cap_sends, 256);
    MPI_CHECK(MPI_Isend(v, 1, MPI_DOUBLE, peer, tag, MPI_COMM_WORLD, &s->sends[s->n_sends]));
    s->n_sends++;
    return PP_OK;
}

/* Poll `req` until it completes or `deadline` passes; a timed-out request is cancelled. */
static pp_status_t wait_until(MPI_Request *req, double deadline)
{
    struct timespec pause = {0, 20000};
    for (;;) {
        int done = 0;
        MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done) return PP_OK;
        if (group_now_s() > deadline) {
            MPI_Cancel(req);
            MPI_Request_free(req);
            return PP_ERR_TIMEOUT;
        }
        nanosleep(&pause, NULL);
    }
}

static pp_status_t m_recv(pp_group_t *g, double *v, int peer, int tag, double deadline)
{
    MPI_Request req;
    MPI_CHECK(MPI_Irecv(v, 1, MPI_DOUBLE, peer, tag, MPI_COMM_WORLD, &req));
    return wait_until(&req, deadline);
}

static pp_status_t m_flush(pp_group_t *g, double deadline)
{
    mpi_state_t *s = state(g);
    pp_status_t st = PP_OK;
    for (int i = 0; i < s->n_sends; i++)
        if (st == PP_OK)
            st = wait_until(&s->sends[i], deadline);
        else {
            MPI_Cancel(&s->sends[i]);
            MPI_Request_free(&s->sends[i]);
        }
    s->n_sends = 0;
    return st;
}

/* Rank r asks rank 0 for its clock TRIES times; the try with the shortest round trip gives the
 * offset (r's clock at the midpoint minus rank 0's answer) and half its round trip the error. */
static pp_status_t m_clock_offset(pp_group_t *g, double *offset_ms, double *residual_ms)
{
    enum { TRIES = 8, TAG = 32000 };
    double best_rtt = 1e30, best = 0;
    *offset_ms = *residual_ms = 0;
    for (int r = 1; r < g->size; r++)
        for (int k = 0; k < TRIES; k++) {
            double t0 = 0, t1 = 0, theirs = 0;
            if (g->rank == 0) {
                MPI_CHECK(MPI_Recv(&t0, 1, MPI_DOUBLE, r, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                theirs = group_now_s();
                MPI_CHECK(MPI_Send(&theirs, 1, MPI_DOUBLE, r, TAG, MPI_COMM_WORLD));
            } else if (g->rank == r) {
                t0 = group_now_s();
                MPI_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, 0, TAG, MPI_COMM_WORLD));
                MPI_CHECK(
                    MPI_Recv(&theirs, 1, MPI_DOUBLE, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                t1 = group_now_s();
                if (t1 - t0 < best_rtt) {
                    best_rtt = t1 - t0;
                    best = 0.5 * (t0 + t1) - theirs;
                }
            }
        }
    if (g->rank != 0) {
        *offset_ms = best * 1e3;
        *residual_ms = 0.5 * best_rtt * 1e3;
    }
    return PP_OK;
}

/* One shared window per host: the host's rank 0 holds the bytes, every other process maps them.
 * One window at a time. */
static pp_status_t m_host_share(pp_group_t *g, size_t bytes, void **ptr)
{
    mpi_state_t *s = state(g);
    *ptr = NULL;
    if (s->shared != MPI_WIN_NULL) PP_FAIL(PP_ERR_INTERNAL, "host_share: one window at a time");
    void *base = NULL;
    MPI_Aint size = 0;
    int unit = 1;
    MPI_CHECK(MPI_Win_allocate_shared(g->local_rank == 0 ? (MPI_Aint)bytes : 0, 1, MPI_INFO_NULL,
                                      s->host, &base, &s->shared));
    MPI_CHECK(MPI_Win_shared_query(s->shared, 0, &size, &unit, &base));
    if ((size_t)size < bytes) PP_FAIL(PP_ERR_INTERNAL, "host_share: %ld bytes shared", (long)size);
    if (g->local_rank == 0) memset(base, 0, bytes);
    MPI_CHECK(MPI_Barrier(s->host)); /* zeroed before anyone reads */
    s->shared_at = *ptr = base;
    return PP_OK;
}

static void m_host_unshare(pp_group_t *g, void *ptr)
{
    mpi_state_t *s = state(g);
    if (!s || s->shared == MPI_WIN_NULL || ptr != s->shared_at) return;
    MPI_Win_free(&s->shared);
    s->shared = MPI_WIN_NULL;
    s->shared_at = NULL;
}

static void m_finish(pp_group_t *g)
{
    mpi_state_t *s = state(g);
    if (!s) return;
    if (s->shared != MPI_WIN_NULL) MPI_Win_free(&s->shared);
    if (s->host != MPI_COMM_NULL) MPI_Comm_free(&s->host);
    (void)m_flush(g, group_now_s() + 1.0);
    free(s->sends);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (s->inited && !finalized) MPI_Finalize();
    free(s);
    free(g->places);
    g->impl = NULL;
    g->places = NULL;
}

static const pp_group_ops_t mpi_ops = {
    .name = "mpi",
    .init = m_init,
    .bcast = m_bcast,
    .gather = m_gather,
    .max_int = m_max_int,
    .barrier = m_barrier,
    .post_send = m_post_send,
    .recv = m_recv,
    .flush = m_flush,
    .clock_offset = m_clock_offset,
    .host_share = m_host_share,
    .host_unshare = m_host_unshare,
    .finish = m_finish,
};

const pp_group_ops_t *group_mpi_ops(void)
{
    return &mpi_ops;
}
