/*
 * pp_group.h — the processes of one run: who this process is among them and the few collective
 * and point-to-point calls the run needs. One interface, two rows: the single process (every
 * call trivial: group_single) and MPI (common/mpi_group.c, built only where mpicc was found;
 * common/mpi_none.c stands in for it elsewhere). Code above calls through g->ops and never asks
 * which row it has, so nothing outside those two files knows of MPI.
 *
 * Invariants: every collective (bcast, gather, agree, barrier, finish) is called by every
 * process in the same order; a call that waits for one peer (recv, flush) takes a deadline and
 * returns PP_ERR_TIMEOUT, without a message, when it passes, so nothing waits forever on a peer
 * that will never answer. Plain C11: no MPI or CUDA header here.
 */
#ifndef PP_GROUP_H
#define PP_GROUP_H

#include "pp_status.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_group pp_group_t;

/* A row of the group table: how one kind of process group does each call. */
typedef struct pp_group_ops {
    const char *name; /* "single", "mpi" */
    /* Start the group of the launch this process belongs to (fills rank, size, local_*,
     * n_hosts and places: every process learns where every rank is, so that nothing later needs
     * a collective to ask). */
    pp_status_t (*init)(pp_group_t *g, int *argc, char ***argv);
    /* `bytes` of buf from `root` to every process. */
    pp_status_t (*bcast)(pp_group_t *g, void *buf, size_t bytes, int root);
    /* `bytes` of `mine` from every process into all[rank * bytes] on root (all: NULL elsewhere). */
    pp_status_t (*gather)(pp_group_t *g, const void *mine, void *all, size_t bytes, int root);
    /* The largest of every process's *v, into *v on every process. */
    pp_status_t (*max_int)(pp_group_t *g, int *v);
    pp_status_t (*barrier)(pp_group_t *g);
    /* Post one double to `peer` under `tag`; *v must stay valid until flush. Never waits. */
    pp_status_t (*post_send)(pp_group_t *g, const double *v, int peer, int tag);
    /* Receive the double `peer` posted under `tag`, waiting until `deadline` (group_now_s). */
    pp_status_t (*recv)(pp_group_t *g, double *v, int peer, int tag, double deadline);
    /* Wait until every posted send has gone, or `deadline`. */
    pp_status_t (*flush)(pp_group_t *g, double deadline);
    /* This process's clock minus rank 0's (group_now_s, in ms) and the bound on its error, from
     * a few ping-pongs with rank 0 (both 0 on rank 0). Collective. */
    pp_status_t (*clock_offset)(pp_group_t *g, double *offset_ms, double *residual_ms);
    /* `bytes` of zeroed host memory that every process of this host maps (the processes of one
     * host share it; other hosts have their own), into *ptr. Collective; freed by host_unshare,
     * also collective. */
    pp_status_t (*host_share)(pp_group_t *g, size_t bytes, void **ptr);
    void (*host_unshare)(pp_group_t *g, void *ptr);
    /* Leave the group (after the last collective). */
    void (*finish)(pp_group_t *g);
} pp_group_ops_t;

/* Where one rank of the group runs. */
typedef struct pp_group_place {
    int host;       /* its host, 0..n_hosts-1, numbered in the order of their lowest ranks */
    int local_rank; /* among the processes of its host */
} pp_group_place_t;

struct pp_group {
    const pp_group_ops_t *ops;
    int rank;                 /* 0..size-1; rank 0 prints the report */
    int size;                 /* processes in the run */
    int local_rank;           /* among the processes of this host: picks this process's GPUs */
    int local_size;           /* processes on this host */
    int n_hosts;              /* hosts the processes run on */
    pp_group_place_t *places; /* [size]: every rank's host and local rank, the same on every
                                 process (init fills it; NULL: one host, local rank = rank) */
    void *impl;               /* the row's own state */
};

/* The MPI row where ppsched was built with MPI, NULL otherwise (mpi_group.c / mpi_none.c). */
const pp_group_ops_t *group_mpi_ops(void);

/* The single process: rank 0 of 1. */
void group_single(pp_group_t *g);

/* The group this process was launched in: MPI's when an MPI launcher started it (its environment
 * says so) and `mpi` is not NULL, the single process otherwise. Launched by mpirun with several
 * processes but built without MPI: a message and PP_ERR_USAGE (each process would run the whole
 * pipeline alone). */
pp_status_t group_init(pp_group_t *g, const pp_group_ops_t *mpi, int *argc, char ***argv);

/* The first failure among every process's `st` (the lowest failing rank's), the same on every
 * process; rank 0 names every other rank that failed. Collective; allocates nothing. */
pp_status_t group_agree(pp_group_t *g, pp_status_t st);

/* The exit code every process leaves with (the largest of every rank's `rc`); leaves the group. */
int group_finish(pp_group_t *g, int rc);

/* Where rank r runs (g->places[r], or host 0 and local rank r without it). */
pp_group_place_t group_place(const pp_group_t *g, int r);

/* Which process owns each of n_devices pipeline devices: `per_process` consecutive devices each
 * (0: n_devices / size), rank r the r-th run of them, into rank_of[n_devices]. The caller has
 * checked that they divide (job_check_processes). */
void group_split_devices(const pp_group_t *g, int n_devices, int per_process, int *rank_of);

/* Seconds on the monotonic clock the group's deadlines and clock offsets use. */
double group_now_s(void);

#ifdef __cplusplus
}
#endif

#endif /* PP_GROUP_H */
