/*
 * group.c — the process group of pp_group.h: the single-process row (every collective is a copy
 * or nothing; there is no peer to send to) and what every row shares: picking the row a launch
 * needs, agreeing on a failure, the exit code, and splitting the pipeline devices.
 *
 * A process started by an MPI launcher is recognised by the launcher's environment
 * (OMPI_COMM_WORLD_SIZE for Open MPI, PMI_SIZE for MPICH's Hydra, PMIX_RANK for PMIx launchers);
 * only then is MPI initialised, so a plain `ppsched FILE` never touches it.
 */
#include "pp_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double group_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the single process ---------------------------------------------------------------------- */

static pp_status_t one_init(pp_group_t *g, int *argc, char ***argv)
{
    return PP_OK;
}
static pp_status_t one_bcast(pp_group_t *g, void *buf, size_t bytes, int root)
{
    return PP_OK;
}
static pp_status_t one_gather(pp_group_t *g, const void *mine, void *all, size_t bytes, int root)
{
    if (all && all != mine) memcpy(all, mine, bytes);
    return PP_OK;
}
static pp_status_t one_max_int(pp_group_t *g, int *v)
{
    return PP_OK;
}
static pp_status_t one_barrier(pp_group_t *g)
{
    return PP_OK;
}
static pp_status_t one_post_send(pp_group_t *g, const double *v, int peer, int tag)
{
    PP_FAIL(PP_ERR_INTERNAL, "a single process has no peer %d to send to", peer);
}
static pp_status_t one_recv(pp_group_t *g, double *v, int peer, int tag, double deadline)
{
    PP_FAIL(PP_ERR_INTERNAL, "a single process has no peer %d to receive from", peer);
}
static pp_status_t one_flush(pp_group_t *g, double deadline)
{
    return PP_OK;
}
static pp_status_t one_clock_offset(pp_group_t *g, double *offset_ms, double *residual_ms)
{
    *offset_ms = *residual_ms = 0;
    return PP_OK;
}
static pp_status_t one_host_share(pp_group_t *g, size_t bytes, void **ptr)
{
    *ptr = calloc(1, bytes);
    PP_ALLOC_CHECK(*ptr);
    return PP_OK;
}
static void one_host_unshare(pp_group_t *g, void *ptr)
{
    free(ptr);
}
static void one_finish(pp_group_t *g) {}

static const pp_group_ops_t single_ops = {
    .name = "single",
    .init = one_init,
    .bcast = one_bcast,
    .gather = one_gather,
    .max_int = one_max_int,
    .barrier = one_barrier,
    .post_send = one_post_send,
    .recv = one_recv,
    .flush = one_flush,
    .clock_offset = one_clock_offset,
    .host_share = one_host_share,
    .host_unshare = one_host_unshare,
    .finish = one_finish,
};

void group_single(pp_group_t *g)
{
    memset(g, 0, sizeof *g);
    g->ops = &single_ops;
    g->size = g->local_size = g->n_hosts = 1;
}

pp_group_place_t group_place(const pp_group_t *g, int r)
{
    if (g->places && r >= 0 && r < g->size) return g->places[r];
    return (pp_group_place_t){0, r};
}

/* ---- what every row shares ------------------------------------------------------------------ */

/* The number of processes the launcher's environment announces: 0 when no launcher started this
 * process, -1 when one did but does not say how many. */
static int launched_size(void)
{
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof size_vars / sizeof size_vars[0]; i++) {
        const char *v = getenv(size_vars[i]);
        if (v && *v) return atoi(v);
    }
    return getenv("PMIX_RANK") ? -1 : 0;
}

pp_status_t group_init(pp_group_t *g, const pp_group_ops_t *mpi, int *argc, char ***argv)
{
    group_single(g);
    int n = launched_size();
    if (n == 0) return PP_OK;
    if (!mpi) {
        if (n == 1) return PP_OK;
        fprintf(stderr,
                "ppsched: started by an MPI launcher (%d processes), but this ppsched was built "
                "without MPI: each process would run the whole pipeline alone (rebuild where "
                "mpicc is found, or run ppsched without mpirun)\n",
                n);
        return PP_ERR_USAGE;
    }
    g->ops = mpi;
    pp_status_t st = mpi->init(g, argc, argv);
    if (st != PP_OK) group_single(g);
    return st;
}

/* Rank 0 names the ranks that failed, up to this many processes (every one names itself). */
enum { AGREE_NAMED = 256 };

/* Nothing allocated, so that no process can fail to take part: the statuses gathered on rank 0
 * into a fixed board (while the processes fit), the lowest failing rank's status broadcast. */
pp_status_t group_agree(pp_group_t *g, pp_status_t st)
{
    if (g->size <= 1) return st;
    int board[AGREE_NAMED], mine = (int)st, first = PP_OK;
    if (g->size <= AGREE_NAMED) {
        PP_CHECK(g->ops->gather(g, &mine, g->rank == 0 ? board : NULL, sizeof mine, 0));
        for (int r = 0; g->rank == 0 && r < g->size; r++) {
            if (board[r] == PP_OK) continue;
            if (first == PP_OK) first = board[r];
            if (r != 0)
                fprintf(stderr, "ppsched: rank %d of %d failed: %s (that rank says why)\n", r,
                        g->size, pp_status_str((pp_status_t)board[r]));
        }
        PP_CHECK(g->ops->bcast(g, &first, sizeof first, 0));
        return (pp_status_t)first;
    }
    int key = st != PP_OK ? g->size - g->rank : 0; /* the lowest failing rank, then its status */
    PP_CHECK(g->ops->max_int(g, &key));
    if (key == 0) return PP_OK;
    first = g->rank == g->size - key ? (int)st : 0;
    PP_CHECK(g->ops->max_int(g, &first));
    if (g->rank == 0 && key != g->size)
        fprintf(stderr, "ppsched: rank %d of %d failed: %s (that rank says why)\n", g->size - key,
                g->size, pp_status_str((pp_status_t)first));
    return (pp_status_t)first;
}

int group_finish(pp_group_t *g, int rc)
{
    if (g->size > 1 && g->ops->max_int(g, &rc) != PP_OK && rc == 0) rc = 1;
    g->ops->finish(g);
    group_single(g);
    return rc;
}

void group_split_devices(const pp_group_t *g, int n_devices, int per_process, int *rank_of)
{
    int k = per_process > 0 ? per_process : n_devices / (g->size > 0 ? g->size : 1);
    if (k < 1) k = 1;
    for (int d = 0; d < n_devices; d++) {
        int r = d / k;
        rank_of[d] = r < g->size ? r : g->size - 1;
    }
}
