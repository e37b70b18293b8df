/*
 * p2p.c — the peer, nccl and local transports (see p2p.h).
 *
 * Peer access is enabled once, at init, for every ordered pair that reports it; a pair already
 * enabled (another object did it) is not an error. NCCL communicators are created with
 * ncclCommInitAll, which needs no launcher since this one process drives every device.
 * The object owns the communicators; p2p_free destroys them.
 */
#ifndef PP_WITH_NCCL
#define PP_WITH_NCCL
#endif
#include "p2p.h"

#include "../common/pp_cuda.h"

#include <stdlib.h>
#include <string.h>

struct pp_p2p {
    int n;                                             /* devices */
    int cuda_ids[PP_MAX_DEVICES];                      /* CUDA ordinal of pipeline device d */
    unsigned char can[PP_MAX_DEVICES][PP_MAX_DEVICES]; /* peer access a -> b */
    ncclComm_t *comms; /* [n], rank d on cuda_ids[d]; NULL without nccl */
    int aborted;
};

pp_status_t p2p_init(pp_p2p_t **out, int n, const int *cuda_ids, int use_nccl)
{
    pp_status_t st = PP_OK;
    *out = NULL;
    if (n < 1 || n > PP_MAX_DEVICES) PP_FAIL(PP_ERR_INTERNAL, "p2p_init: %d devices", n);
    pp_p2p_t *p = calloc(1, sizeof *p);
    PP_ALLOC_CHECK(p);
    p->n = n;
    memcpy(p->cuda_ids, cuda_ids, sizeof(int) * (size_t)n);
    for (int a = 0; a < n; a++) {
        PP_CUDA_CHECK_GOTO(cudaSetDevice(cuda_ids[a]), st, fail);
        for (int b = 0; b < n; b++) {
            if (a == b || cuda_ids[a] == cuda_ids[b]) continue;
            int ok = 0;
            PP_CUDA_CHECK_GOTO(cudaDeviceCanAccessPeer(&ok, cuda_ids[a], cuda_ids[b]), st, fail);
            if (!ok) continue;
            cudaError_t e = cudaDeviceEnablePeerAccess(cuda_ids[b], 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) {
                (void)cudaGetLastError(); /* clear the sticky-free error */
            } else if (e != cudaSuccess) {
                fprintf(stderr, "%s:%d: cudaDeviceEnablePeerAccess(%d -> %d) failed: %s\n",
                        __FILE__, __LINE__, cuda_ids[a], cuda_ids[b], cudaGetErrorString(e));
                st = PP_ERR_CUDA;
                goto fail;
            }
            p->can[a][b] = 1;
        }
    }
    if (use_nccl) {
        p->comms = calloc((size_t)n, sizeof(ncclComm_t));
        if (!p->comms) {
            st = PP_ERR_NOMEM;
            fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
            goto fail;
        }
        ncclResult_t r = ncclCommInitAll(p->comms, n, cuda_ids);
        if (r != ncclSuccess) {
            fprintf(stderr, "%s:%d: ncclCommInitAll over %d devices failed: %s\n", __FILE__,
                    __LINE__, n, ncclGetErrorString(r));
            free(p->comms);
            p->comms = NULL;
            st = PP_ERR_NCCL;
            goto fail;
        }
    }
    *out = p;
    return PP_OK;
fail:
    p2p_free(p);
    return st;
}

void p2p_free(pp_p2p_t *p)
{
    if (!p) return;
    if (p->comms) {
        for (int d = 0; d < p->n; d++) {
            if (!p->comms[d]) continue;
            if (p->aborted) continue; /* ncclCommAbort already freed it */
            ncclCommDestroy(p->comms[d]);
        }
        free(p->comms);
    }
    free(p);
}

int p2p_can_access(const pp_p2p_t *p, int a, int b)
{
    return a == b || p->can[a][b];
}

int p2p_has_nccl(const pp_p2p_t *p)
{
    return p->comms != NULL;
}

void p2p_print_matrix(const pp_p2p_t *p, FILE *f)
{
    fprintf(f, "# peer access (P direct, - staged through the host):\n#      ");
    for (int b = 0; b < p->n; b++)
        fprintf(f, " gpu%-2d", p->cuda_ids[b]);
    fputc('\n', f);
    for (int a = 0; a < p->n; a++) {
        fprintf(f, "#  gpu%-2d", p->cuda_ids[a]);
        for (int b = 0; b < p->n; b++)
            fprintf(f, " %5s", a == b ? "x" : p->can[a][b] ? "P" : "-");
        fputc('\n', f);
    }
}

pp_status_t p2p_copy(const pp_p2p_t *p, void *dst, int dst_dev, const void *src, int src_dev,
                     size_t bytes, cudaStream_t stream)
{
    /* Same device, or a pair with peer access: a plain copy through unified addresses, which a
     * CUDA graph can capture (cudaMemcpyPeerAsync cannot). Otherwise the driver stages it. */
    if (p->cuda_ids[dst_dev] == p->cuda_ids[src_dev] || p->can[src_dev][dst_dev])
        PP_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
    else
        PP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, p->cuda_ids[dst_dev], src, p->cuda_ids[src_dev],
                                          bytes, stream));
    return PP_OK;
}

pp_status_t p2p_nccl_pair(pp_p2p_t *p, void *dst, int dst_dev, cudaStream_t recv_stream,
                          const void *src, int src_dev, cudaStream_t send_stream, size_t bytes)
{
    if (!p->comms) PP_FAIL(PP_ERR_INTERNAL, "p2p_nccl_pair: NCCL was not initialised");
    PP_NCCL_CHECK(ncclGroupStart());
    ncclResult_t r1 = ncclSend(src, bytes, ncclUint8, dst_dev, p->comms[src_dev], send_stream);
    ncclResult_t r2 = ncclRecv(dst, bytes, ncclUint8, src_dev, p->comms[dst_dev], recv_stream);
    ncclResult_t r3 = ncclGroupEnd();
    if (r1 != ncclSuccess || r2 != ncclSuccess || r3 != ncclSuccess) {
        ncclResult_t r = r1 != ncclSuccess ? r1 : r2 != ncclSuccess ? r2 : r3;
        fprintf(stderr, "%s:%d: NCCL send/recv of %zu bytes from device %d to %d failed: %s\n",
                __FILE__, __LINE__, bytes, src_dev, dst_dev, ncclGetErrorString(r));
        return PP_ERR_NCCL;
    }
    return PP_OK;
}

void p2p_abort(pp_p2p_t *p)
{
    if (!p || !p->comms || p->aborted) return;
    for (int d = 0; d < p->n; d++)
        if (p->comms[d]) ncclCommAbort(p->comms[d]);
    p->aborted = 1;
}
