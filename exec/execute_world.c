/*
 * execute_world.c — the world of an executor (see execute_internal.h): the devices this process
 * owns and, on each, one stream per row of the role table (roles.c) at the row's priority (for a
 * per-peer row, one per device it talks with: a send and a recv channel per directed pair), the
 * events that fork and join a step, and the step counters; plus the clock alignment.
 *
 * Invariants: device numbers are global pipeline indices; only owned devices get streams, events
 * and counters; the origin (the first owned device) records `go`, which every owned device's
 * compute stream waits on, and joins every owned device at the end of a step, so one graph
 * captured from the origin spans the whole world. Nothing here enqueues work of a step.
 */
#include "execute_internal.h"

#include <stdlib.h>
#include <string.h>

void world_own_all(pp_world_t *w, int p, const int *cuda)
{
    memset(w, 0, sizeof *w);
    w->p = p;
    w->origin = 0;
    for (int d = 0; d < p; d++) {
        w->owned[d] = 1;
        w->cuda[d] = cuda[d];
    }
}

void world_own_share(pp_world_t *w, int p, const int *cuda, const int *rank_of, int rank)
{
    world_own_all(w, p, cuda);
    w->origin = -1;
    for (int d = 0; d < p; d++) {
        w->owned[d] = rank_of[d] == rank;
        if (w->owned[d] && w->origin < 0) w->origin = d;
    }
    if (w->origin < 0) w->origin = 0; /* job_check_processes gives every rank a device */
}

/* Where the per-peer stream of role r on device d towards q lives in peer_stream / peer_tail. */
static size_t peer_index(const pp_world_t *w, int d, pp_role_t r, int q)
{
    return ((size_t)r * (size_t)w->p + (size_t)d) * (size_t)w->p + (size_t)q;
}

cudaStream_t world_stream(const pp_world_t *w, int d, pp_role_t r, int q)
{
    if (!pp_role_row(r)->per_peer) return w->stream[d][r];
    return w->peer_stream ? w->peer_stream[peer_index(w, d, r, q)] : NULL;
}

int world_side_streams(const pp_world_t *w, int d, cudaStream_t *s, cudaEvent_t *tail, int max)
{
    int n = 0;
    for (int r = 0; r < PP_ROLE_COUNT; r++) {
        if (r == PP_ROLE_COMPUTE) continue;
        const int per_peer = pp_role_row((pp_role_t)r)->per_peer;
        for (int q = 0; q < (per_peer ? w->p : 1) && n < max; q++) {
            size_t k = per_peer ? peer_index(w, d, (pp_role_t)r, q) : 0;
            cudaStream_t st = !per_peer        ? w->stream[d][r]
                              : w->peer_stream ? w->peer_stream[k]
                                               : NULL;
            if (!st) continue;
            s[n] = st;
            tail[n++] = per_peer ? w->peer_tail[k] : w->tail[d][r];
        }
    }
    return n;
}

/* One stream of role r at its priority (every one at the least without w->priorities), with the
 * event that ends its step. */
static pp_status_t create_stream(const pp_world_t *w, cudaStream_t *s, cudaEvent_t *tail,
                                 pp_role_t r)
{
    int lo, hi;
    PP_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    /* The greatest priority is numerically the least. */
    int prio = w->priorities && pp_role_row(r)->high_priority ? hi : lo;
    PP_CUDA_CHECK(cudaStreamCreateWithPriority(s, cudaStreamNonBlocking, prio));
    if (tail) PP_CUDA_CHECK(cudaEventCreateWithFlags(tail, cudaEventDisableTiming));
    return PP_OK;
}

/* Streams and events of owned device d (current device set by the caller): one stream per role,
 * or, for a per-peer role, one per device d talks with. */
static pp_status_t create_device(pp_world_t *w, int d)
{
    for (int r = 0; r < PP_ROLE_COUNT; r++) {
        cudaEvent_t *tail = r == PP_ROLE_COMPUTE ? NULL : &w->tail[d][r];
        if (!pp_role_row((pp_role_t)r)->per_peer) {
            PP_CHECK(create_stream(w, &w->stream[d][r], tail, (pp_role_t)r));
            continue;
        }
        for (int q = 0; q < w->p; q++) {
            if (!w->talks[d][q] && !w->talks[q][d]) continue;
            size_t k = peer_index(w, d, (pp_role_t)r, q);
            PP_CHECK(create_stream(w, &w->peer_stream[k], &w->peer_tail[k], (pp_role_t)r));
        }
    }
    PP_CUDA_CHECK(cudaEventCreate(&w->ref[d]));
    PP_CUDA_CHECK(cudaEventCreate(&w->stop[d]));
    PP_CUDA_CHECK(cudaEventCreateWithFlags(&w->fork[d], cudaEventDisableTiming));
    PP_CUDA_CHECK(cudaEventCreateWithFlags(&w->join[d], cudaEventDisableTiming));
    PP_CUDA_CHECK(cudaMalloc((void **)&w->counters_dev[d], 2 * sizeof(int)));
    PP_CUDA_CHECK(cudaMemset(w->counters_dev[d], 0, 2 * sizeof(int)));
    return PP_OK;
}

pp_status_t world_create(pp_world_t *w)
{
    pp_status_t st = PP_OK;
    size_t n_peer = (size_t)PP_ROLE_COUNT * (size_t)w->p * (size_t)w->p;
    w->peer_stream = calloc(n_peer, sizeof *w->peer_stream);
    w->peer_tail = calloc(n_peer, sizeof *w->peer_tail);
    if (!w->peer_stream || !w->peer_tail) {
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto fail;
    }
    for (int d = 0; d < w->p; d++) {
        if (!world_owns(w, d)) continue;
        PP_CUDA_CHECK_GOTO(cudaSetDevice(w->cuda[d]), st, fail);
        PP_CHECK_GOTO(create_device(w, d), st, fail);
    }
    PP_CUDA_CHECK_GOTO(
        cudaHostAlloc((void **)&w->counters_host, 2 * sizeof(int), cudaHostAllocPortable), st,
        fail);
    w->counters_host[0] = 0;
    w->counters_host[1] = 1;
    PP_CUDA_CHECK_GOTO(cudaSetDevice(w->cuda[w->origin]), st, fail);
    PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&w->go, cudaEventDisableTiming), st, fail);
    return PP_OK;
fail:
    world_free(w);
    return st;
}

/* Device d's per-peer streams and their events. */
static void free_peer_streams(pp_world_t *w, int d)
{
    for (int r = 0; r < PP_ROLE_COUNT && w->peer_stream && w->peer_tail; r++)
        for (int q = 0; q < w->p; q++) {
            size_t k = peer_index(w, d, (pp_role_t)r, q);
            if (w->peer_tail[k]) cudaEventDestroy(w->peer_tail[k]);
            if (w->peer_stream[k]) cudaStreamDestroy(w->peer_stream[k]);
        }
}

void world_free(pp_world_t *w)
{
    if (w->go) cudaEventDestroy(w->go);
    if (w->counters_host) cudaFreeHost(w->counters_host);
    for (int d = 0; d < w->p; d++) {
        if (!world_owns(w, d)) continue;
        cudaSetDevice(w->cuda[d]);
        if (w->ref[d]) cudaEventDestroy(w->ref[d]);
        if (w->fork[d]) cudaEventDestroy(w->fork[d]);
        if (w->stop[d]) cudaEventDestroy(w->stop[d]);
        if (w->join[d]) cudaEventDestroy(w->join[d]);
        if (w->counters_dev[d]) cudaFree(w->counters_dev[d]);
        for (int r = 0; r < PP_ROLE_COUNT; r++) {
            if (w->tail[d][r]) cudaEventDestroy(w->tail[d][r]);
            if (w->stream[d][r]) cudaStreamDestroy(w->stream[d][r]);
        }
        free_peer_streams(w, d);
    }
    free(w->peer_stream);
    free(w->peer_tail);
    w->peer_stream = NULL;
    w->peer_tail = NULL;
    w->go = NULL;
    w->counters_host = NULL;
    memset(w->stream, 0, sizeof w->stream);
    memset(w->tail, 0, sizeof w->tail);
    memset(w->ref, 0, sizeof w->ref);
    memset(w->fork, 0, sizeof w->fork);
    memset(w->stop, 0, sizeof w->stop);
    memset(w->join, 0, sizeof w->join);
    memset(w->counters_dev, 0, sizeof w->counters_dev);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bound the misalignment of the owned devices' time origins: the origin signals every device the
 * way a step starts, each signals back, and the origin times the round trip. Each ref[d] is
 * recorded within one one-way latency of `go`, so the round trip bounds the skew. Median of 9
 * tries. */
pp_status_t world_measure_skew(pp_world_t *w, double *skew_ms)
{
    enum { TRIES = 9 };
    double v[TRIES];
    cudaEvent_t e0 = NULL, e1 = NULL, back[PP_MAX_DEVICES] = {0};
    pp_status_t st = PP_OK;
    const int o = w->origin;
    int others = 0;
    *skew_ms = 0;
    for (int d = 0; d < w->p; d++)
        others += d != o && world_owns(w, d);
    if (others == 0) return PP_OK;
    PP_CUDA_CHECK(cudaSetDevice(w->cuda[o]));
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e0), st, fail);
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e1), st, fail);
    for (int d = 0; d < w->p; d++) {
        if (d == o || !world_owns(w, d)) continue;
        PP_CUDA_CHECK_GOTO(cudaSetDevice(w->cuda[d]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&back[d], cudaEventDisableTiming), st, fail);
    }
    for (int k = 0; k < TRIES; k++) {
        cudaStream_t c0 = w->stream[o][PP_ROLE_COMPUTE];
        PP_CUDA_CHECK_GOTO(cudaSetDevice(w->cuda[o]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e0, c0), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(w->go, c0), st, fail);
        for (int d = 0; d < w->p; d++) {
            if (d == o || !world_owns(w, d)) continue;
            PP_CUDA_CHECK_GOTO(cudaSetDevice(w->cuda[d]), st, fail);
            PP_CUDA_CHECK_GOTO(cudaStreamWaitEvent(w->stream[d][PP_ROLE_COMPUTE], w->go, 0), st,
                               fail);
            PP_CUDA_CHECK_GOTO(cudaEventRecord(back[d], w->stream[d][PP_ROLE_COMPUTE]), st, fail);
        }
        PP_CUDA_CHECK_GOTO(cudaSetDevice(w->cuda[o]), st, fail);
        for (int d = 0; d < w->p; d++)
            if (back[d]) PP_CUDA_CHECK_GOTO(cudaStreamWaitEvent(c0, back[d], 0), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e1, c0), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventSynchronize(e1), st, fail);
        float ms;
        PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&ms, e0, e1), st, fail);
        v[k] = ms;
    }
    qsort(v, TRIES, sizeof v[0], cmp_double);
    *skew_ms = v[TRIES / 2];
fail:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    for (int d = 0; d < w->p; d++) {
        if (!back[d]) continue;
        cudaSetDevice(w->cuda[d]);
        cudaEventDestroy(back[d]);
    }
    return st;
}
