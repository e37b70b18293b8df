/*
 * p2p.h — moving activations and gradients between the GPUs of one host.
 *
 * One object covers every device of the pipeline. `peer`: peer access is enabled between every
 * pair that allows it, and a transfer is one cudaMemcpyPeerAsync on the stream given (the driver
 * stages it through the host where peer access is impossible). `nccl`: one communicator per device
 * from ncclCommInitAll (rank = pipeline device index); a transfer is an ncclSend on the sender's
 * stream and the matching ncclRecv on the receiver's, posted inside one ncclGroupStart/End because
 * one thread drives every device. `local`: both ends on one device, a device-local copy.
 * Nothing here knows of stages or schedules. Every call enqueues only; none synchronizes.
 */
#ifndef PP_P2P_H
#define PP_P2P_H

#include "../common/pp_status.h"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_p2p pp_p2p_t;

/* Enable peer access among the n devices (CUDA ordinals `cuda_ids`) and, when `use_nccl`, create
 * the communicators. */
pp_status_t p2p_init(pp_p2p_t **out, int n, const int *cuda_ids, int use_nccl);
void p2p_free(pp_p2p_t *p); /* accepts NULL; destroys (or, after p2p_abort, frees) communicators */

/* 1 when device a can read/write device b's memory directly (pipeline indices). */
int p2p_can_access(const pp_p2p_t *p, int a, int b);

/* Print the peer-access matrix ("P" direct, "-" staged, "x" self) with device names. */
void p2p_print_matrix(const pp_p2p_t *p, FILE *f);

/* Copy `bytes` from src (on pipeline device src_dev) to dst (on dst_dev) on `stream`, which must
 * belong to the current device. Same device or peer access: cudaMemcpyAsync over unified
 * addresses (capturable in a CUDA graph); otherwise cudaMemcpyPeerAsync, staged by the driver. */
pp_status_t p2p_copy(const pp_p2p_t *p, void *dst, int dst_dev, const void *src, int src_dev,
                     size_t bytes, cudaStream_t stream);

/* NCCL pair: ncclSend from src_dev's rank on send_stream and ncclRecv on dst_dev's rank on
 * recv_stream, inside one group. Each stream must belong to its device. */
pp_status_t p2p_nccl_pair(pp_p2p_t *p, void *dst, int dst_dev, cudaStream_t recv_stream,
                          const void *src, int src_dev, cudaStream_t send_stream, size_t bytes);

/* Abort every communicator (after a timeout): pending NCCL work is cancelled. */
void p2p_abort(pp_p2p_t *p);

/* 1 when the communicators were created. */
int p2p_has_nccl(const pp_p2p_t *p);

#ifdef __cplusplus
}
#endif

#endif /* PP_P2P_H */
