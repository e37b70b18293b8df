/*
 * p2p.h — moving activations and gradients between the GPUs of one host.
 *
 * One object covers every device of the pipeline; the transports are the rows of transport.h and
 * each posts a transfer as two halves, the send half on the sender's stream and the receive half
 * on the receiver's, so that a process owning one end posts only that end: under an MPI launch
 * (pp_group.h) a process drives its share of the devices and a boundary between processes is
 * an ncclSend on one and an ncclRecv on the other, or an ipc copy into the other's slot. `peer`:
 * peer access is enabled between every pair that allows it; the send half is one copy into the
 * receiver's buffer (cudaMemcpyAsync over unified addresses, or cudaMemcpyPeerAsync staged by the
 * driver where peer access is impossible) and the receive half posts nothing. `local`: both ends on
 * one device, the same copy; `shared`: two pipeline devices on one CUDA device, the same copy.
 * `nccl`: ncclSend and ncclRecv on communicators cut as `nccl.communicators` says: a two-rank
 * communicator per directed pair the plan sends over (the default), or one over every device
 * (rank = pipeline device index); each made with ncclCommInitRankConfig under a unique id from
 * rank 0, with the CTA limits of `nccl:`. One thread posting both halves brackets them with
 * p2p_pair_begin/end (one ncclGroupStart/End). Nothing here knows of stages or schedules. Every
 * call enqueues only; none synchronizes.
 */
#ifndef PP_P2P_H
#define PP_P2P_H

#include "common/pp_group.h"
#include "common/pp_status.h"
#include "model/job.h"
#include "model/transport.h"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_p2p pp_p2p_t;

/* What the plan needs of the transports. */
typedef struct p2p_setup {
    unsigned used; /* bit 1u << t for each pp_transport_t t the plan uses */
    unsigned char nccl_pair[PP_MAX_DEVICES][PP_MAX_DEVICES]; /* 1: a sends to b over nccl */
    pp_job_nccl_t nccl;                                      /* how the communicators are made */
    int replicas; /* pipeline.data_parallel d > 1: the gradient reduction's groups (below) */
} p2p_setup_t;

/* Enable peer access among the devices this process owns of the n (CUDA ordinals `cuda_ids`;
 * owned[d], NULL: every one) and set up what the transports of `setup` need: the communicators
 * for nccl, over every process of `g` (NULL: this one owns every device). Collective over g:
 * every process calls it, and a failure on one is every one's. */
pp_status_t p2p_init(pp_p2p_t **out, int n, const int *cuda_ids, const unsigned char *owned,
                     pp_group_t *g, const p2p_setup_t *setup);
void p2p_free(pp_p2p_t *p); /* accepts NULL; destroys (or, after p2p_abort, frees) communicators */

/* 1 when device a can read/write device b's memory directly (pipeline indices). */
int p2p_can_access(const pp_p2p_t *p, int a, int b);

/* Print the peer-access matrix ("P" direct, "-" staged, "x" self) with device names. */
void p2p_print_matrix(const pp_p2p_t *p, FILE *f);

/* One transfer: `bytes` from src on pipeline device src_dev to dst on dst_dev. `key`: its index
 * among the transfers given to p2p_connect (ipc, and nccl between processes of one host), -1 for
 * any other. dst is NULL where another process owns the receiver. */
typedef struct p2p_xfer {
    void *dst;
    int dst_dev;
    const void *src;
    int src_dev;
    size_t bytes;
    int key;
} p2p_xfer_t;

/* A transfer whose halves meet through flags in host memory the host's processes share: every
 * ipc transfer, and, under nccl.wait_for_peer, an nccl one between two processes of one host
 * (its kernels are then launched only once both ends are ready, as one process achieves with
 * events). */
typedef struct p2p_meet {
    pp_transport_t t;
    int src_dev, dst_dev;
    void *dst; /* the receiver's slot where this process owns the receiver, else NULL */
} p2p_meet_t;

/* Set up the n meeting transfers (key = index), once the slots exist: the shared flags, and for
 * ipc, each receiver's slot opened by the process that sends into it (CUDA IPC). Collective over
 * g (NULL: one process). */
pp_status_t p2p_connect(pp_p2p_t *p, pp_group_t *g, const p2p_meet_t *meet, int n);

/* Post the send half of transfer x over transport t on `stream`, which belongs to x->src_dev.
 * Where the row says send_moves_bytes this half moves the bytes into x->dst. */
pp_status_t p2p_post_send(pp_p2p_t *p, pp_transport_t t, const p2p_xfer_t *x, cudaStream_t stream);

/* Post the receive half on `stream`, which belongs to x->dst_dev (nothing for a transport whose
 * send half moves the bytes). */
pp_status_t p2p_post_recv(pp_p2p_t *p, pp_transport_t t, const p2p_xfer_t *x, cudaStream_t stream);

/* Bracket the halves of one transfer posted by one thread, for a transport that needs pairing
 * (ncclGroupStart/End); nothing otherwise. p2p_pair_end must follow every p2p_pair_begin that
 * succeeded, also when posting a half failed. */
pp_status_t p2p_pair_begin(pp_p2p_t *p, pp_transport_t t);
pp_status_t p2p_pair_end(pp_p2p_t *p, pp_transport_t t);

/* The gradient reduction across the d replicas of pipeline.data_parallel. Device dev's group is
 * the devices that hold its stages in every replica: dev mod p, + p, + 2p, ... (p = n / d), rank
 * = replica. A group on d distinct GPUs gets an NCCL communicator of d ranks (made by p2p_init
 * with the transfers' ones, in the same collective set-up); a group whose devices share a GPU
 * (tests on one GPU) reduces with copies and adds on that GPU, and must lie in one process. */

/* 1 when dev's group reduces on one GPU (no communicator). */
int p2p_reduce_local(const pp_p2p_t *p, int dev);

/* Post, on owned device dev's `stream`, its part of the group's collective over `count` fp32
 * values at buf (in place): the sum into every rank's buf (all-reduce); the sum of rank r's
 * r-th 1/d of buf into that part (reduce-scatter, count a multiple of d); every rank's r-th 1/d
 * of `bytes` at buf gathered into every rank's buf (all-gather, bytes a multiple of d). One thread
 * posting several devices' parts brackets them with p2p_pair_begin/end(p, PP_TRANSPORT_NCCL). */
pp_status_t p2p_all_reduce(pp_p2p_t *p, int dev, float *buf, size_t count, cudaStream_t stream);
pp_status_t p2p_reduce_scatter(pp_p2p_t *p, int dev, float *buf, size_t count, cudaStream_t stream);
pp_status_t p2p_all_gather(pp_p2p_t *p, int dev, void *buf, size_t bytes, cudaStream_t stream);

/* How transport t moves bytes from device a to b here, for banners: its name, "peer(staged)" for
 * a peer pair without peer access. */
const char *p2p_describe(const pp_p2p_t *p, pp_transport_t t, int a, int b);

/* Abort every communicator (after a timeout): pending NCCL work is cancelled, and every meeting's
 * flags are raised, so a stream waiting for a peer that will never come goes on. */
void p2p_abort(pp_p2p_t *p);

/* 1 when the communicators were created. */
int p2p_has_nccl(const pp_p2p_t *p);

#ifdef __cplusplus
}
#endif

#endif /* PP_P2P_H */
