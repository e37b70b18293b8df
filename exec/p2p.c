/*
 * p2p.c — the peer, nccl, local and shared transports (see p2p.h): one row of functions per row of
 * the transport table (transport.c), in the same order.
 *
 * Peer access is enabled once, at init, for every ordered pair that reports it; a pair already
 * enabled (another object did it) is not an error, and only between devices this process owns.
 * NCCL communicators are created with ncclCommInitAll when this one process drives every device,
 * and with ncclCommInitRank over the group's processes (pp_group.h) under an MPI launch: one
 * communicator over every GPU, rank = pipeline device index.
 * The object owns the communicators; p2p_free destroys them.
 */
#ifndef PP_WITH_NCCL
#define PP_WITH_NCCL
#endif
#include "p2p.h"

#include "common/pp_cuda.h"

#include <stdlib.h>
#include <string.h>

struct pp_p2p {
    int n;                                             /* devices */
    int cuda_ids[PP_MAX_DEVICES];                      /* CUDA ordinal of pipeline device d */
    unsigned char can[PP_MAX_DEVICES][PP_MAX_DEVICES]; /* peer access a -> b */
    ncclComm_t *comms; /* [n], rank d on cuda_ids[d]; NULL without nccl */
    int aborted;
};

/* Peer access between every ordered pair of owned devices that reports it. */
static pp_status_t enable_peers(pp_p2p_t *p, const unsigned char *owned)
{
    for (int a = 0; a < p->n; a++) {
        if (!owned[a]) continue;
        PP_CUDA_CHECK(cudaSetDevice(p->cuda_ids[a]));
        for (int b = 0; b < p->n; b++) {
            if (a == b || !owned[b] || p->cuda_ids[a] == p->cuda_ids[b]) continue;
            int ok = 0;
            PP_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, p->cuda_ids[a], p->cuda_ids[b]));
            if (!ok) continue;
            cudaError_t e = cudaDeviceEnablePeerAccess(p->cuda_ids[b], 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) {
                (void)cudaGetLastError(); /* clear the sticky-free error */
            } else if (e != cudaSuccess) {
                fprintf(stderr, "%s:%d: cudaDeviceEnablePeerAccess(%d -> %d) failed: %s\n",
                        __FILE__, __LINE__, p->cuda_ids[a], p->cuda_ids[b], cudaGetErrorString(e));
                return PP_ERR_CUDA;
            }
            p->can[a][b] = 1;
        }
    }
    return PP_OK;
}

/* The communicators of the owned devices, rank d for pipeline device d: with ncclCommInitAll when
 * this process owns every device, else with ncclCommInitRank over one unique id that rank 0 of
 * the group makes and broadcasts (one group call: this thread drives several devices). */
static pp_status_t init_nccl(pp_p2p_t *p, const unsigned char *owned, pp_group_t *g)
{
    for (int a = 0; a < p->n; a++)
        for (int b = 0; b < a; b++)
            if (owned[a] && owned[b] && p->cuda_ids[a] == p->cuda_ids[b]) {
                fprintf(stderr,
                        "nccl needs a CUDA device per pipeline device, but pipeline devices %d "
                        "and %d are both CUDA device %d\n",
                        b, a, p->cuda_ids[a]);
                return PP_ERR_INPUT;
            }
    p->comms = calloc((size_t)p->n, sizeof(ncclComm_t));
    PP_ALLOC_CHECK(p->comms);
    if (!g || g->size <= 1) {
        PP_NCCL_CHECK(ncclCommInitAll(p->comms, p->n, p->cuda_ids));
        return PP_OK;
    }
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (g->rank == 0) PP_NCCL_CHECK(ncclGetUniqueId(&id));
    PP_CHECK(g->ops->bcast(g, &id, sizeof id, 0));
    PP_NCCL_CHECK(ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    for (int d = 0; d < p->n && r == ncclSuccess; d++) {
        if (!owned[d]) continue;
        if (cudaSetDevice(p->cuda_ids[d]) != cudaSuccess) r = ncclUnhandledCudaError;
        if (r == ncclSuccess) r = ncclCommInitRank(&p->comms[d], p->n, id, d);
    }
    ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess || end != ncclSuccess) {
        fprintf(stderr, "%s:%d: ncclCommInitRank over %d devices (rank %d of %d) failed: %s\n",
                __FILE__, __LINE__, p->n, g->rank, g->size,
                ncclGetErrorString(r != ncclSuccess ? r : end));
        return PP_ERR_NCCL;
    }
    return PP_OK;
}

pp_status_t p2p_init(pp_p2p_t **out, int n, const int *cuda_ids, const unsigned char *owned,
                     pp_group_t *g, unsigned used)
{
    pp_status_t st = PP_OK;
    unsigned char all[PP_MAX_DEVICES];
    *out = NULL;
    if (n < 1 || n > PP_MAX_DEVICES) PP_FAIL(PP_ERR_INTERNAL, "p2p_init: %d devices", n);
    if (!owned) memset(all, 1, sizeof all);
    pp_p2p_t *p = calloc(1, sizeof *p);
    PP_ALLOC_CHECK(p);
    p->n = n;
    memcpy(p->cuda_ids, cuda_ids, sizeof(int) * (size_t)n);
    st = enable_peers(p, owned ? owned : all);
    /* Every process learns of a failure before the collective set-up of the communicators. */
    if (g) st = group_agree(g, st);
    if (st == PP_OK && (used & (1u << PP_TRANSPORT_NCCL))) {
        st = init_nccl(p, owned ? owned : all, g);
        if (g) st = group_agree(g, st);
    }
    if (st != PP_OK) goto fail;
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
    return a == b || p->cuda_ids[a] == p->cuda_ids[b] || p->can[a][b];
}

int p2p_has_nccl(const pp_p2p_t *p)
{
    return p->comms != NULL;
}

void p2p_print_matrix(const pp_p2p_t *p, FILE *f)
{
    fprintf(f, "# peer access (P direct, - staged through the host, = the same GPU):\n#      ");
    for (int b = 0; b < p->n; b++)
        fprintf(f, " gpu%-2d", p->cuda_ids[b]);
    fputc('\n', f);
    for (int a = 0; a < p->n; a++) {
        fprintf(f, "#  gpu%-2d", p->cuda_ids[a]);
        for (int b = 0; b < p->n; b++)
            fprintf(f, " %5s",
                    a == b                             ? "x"
                    : p->cuda_ids[a] == p->cuda_ids[b] ? "="
                    : p->can[a][b]                     ? "P"
                                                       : "-");
        fputc('\n', f);
    }
}

/* ---- the halves of each transport ----------------------------------------------------------- */

/* peer and local: the send half is the whole transfer. Same device, or a pair with peer access: a
 * plain copy through unified addresses, which a CUDA graph can capture (cudaMemcpyPeerAsync
 * cannot). Otherwise the driver stages it. */
static pp_status_t copy_send(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    if (p->cuda_ids[x->dst_dev] == p->cuda_ids[x->src_dev] || p->can[x->src_dev][x->dst_dev])
        PP_CUDA_CHECK(cudaMemcpyAsync(x->dst, x->src, x->bytes, cudaMemcpyDefault, stream));
    else
        PP_CUDA_CHECK(cudaMemcpyPeerAsync(x->dst, p->cuda_ids[x->dst_dev], x->src,
                                          p->cuda_ids[x->src_dev], x->bytes, stream));
    return PP_OK;
}

static pp_status_t nothing(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    return PP_OK;
}

static pp_status_t nccl_send(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    if (!p->comms) PP_FAIL(PP_ERR_INTERNAL, "p2p_post_send: NCCL was not initialised");
    ncclResult_t r =
        ncclSend(x->src, x->bytes, ncclUint8, x->dst_dev, p->comms[x->src_dev], stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "%s:%d: NCCL send of %zu bytes from device %d to %d failed: %s\n", __FILE__,
                __LINE__, x->bytes, x->src_dev, x->dst_dev, ncclGetErrorString(r));
        return PP_ERR_NCCL;
    }
    return PP_OK;
}

static pp_status_t nccl_recv(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    if (!p->comms) PP_FAIL(PP_ERR_INTERNAL, "p2p_post_recv: NCCL was not initialised");
    ncclResult_t r =
        ncclRecv(x->dst, x->bytes, ncclUint8, x->src_dev, p->comms[x->dst_dev], stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "%s:%d: NCCL receive of %zu bytes from device %d to %d failed: %s\n",
                __FILE__, __LINE__, x->bytes, x->src_dev, x->dst_dev, ncclGetErrorString(r));
        return PP_ERR_NCCL;
    }
    return PP_OK;
}

static pp_status_t nccl_group_begin(pp_p2p_t *p)
{
    PP_NCCL_CHECK(ncclGroupStart());
    return PP_OK;
}

static pp_status_t nccl_group_end(pp_p2p_t *p)
{
    PP_NCCL_CHECK(ncclGroupEnd());
    return PP_OK;
}

typedef pp_status_t (*half_fn)(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream);
typedef pp_status_t (*pair_fn)(pp_p2p_t *p);

typedef struct transport_ops {
    half_fn send, recv;
    pair_fn begin, end; /* NULL: no pairing */
} transport_ops_t;

/* One row per pp_transport_t, as in transport.c. NONE moves nothing. */
static const transport_ops_t ops[PP_TRANSPORT_COUNT] = {
    [PP_TRANSPORT_NONE] = {nothing, nothing, NULL, NULL},
    [PP_TRANSPORT_LOCAL] = {copy_send, nothing, NULL, NULL},
    [PP_TRANSPORT_PEER] = {copy_send, nothing, NULL, NULL},
    [PP_TRANSPORT_NCCL] = {nccl_send, nccl_recv, nccl_group_begin, nccl_group_end},
    [PP_TRANSPORT_SHARED] = {copy_send, nothing, NULL, NULL},
};

static const transport_ops_t *ops_of(pp_transport_t t)
{
    return (int)t >= 0 && t < PP_TRANSPORT_COUNT ? &ops[t] : &ops[PP_TRANSPORT_NONE];
}

pp_status_t p2p_post_send(pp_p2p_t *p, pp_transport_t t, const p2p_xfer_t *x, cudaStream_t stream)
{
    return ops_of(t)->send(p, x, stream);
}

pp_status_t p2p_post_recv(pp_p2p_t *p, pp_transport_t t, const p2p_xfer_t *x, cudaStream_t stream)
{
    return ops_of(t)->recv(p, x, stream);
}

pp_status_t p2p_pair_begin(pp_p2p_t *p, pp_transport_t t)
{
    return ops_of(t)->begin ? ops_of(t)->begin(p) : PP_OK;
}

pp_status_t p2p_pair_end(pp_p2p_t *p, pp_transport_t t)
{
    return ops_of(t)->end ? ops_of(t)->end(p) : PP_OK;
}

const char *p2p_describe(const pp_p2p_t *p, pp_transport_t t, int a, int b)
{
    if (t == PP_TRANSPORT_PEER && !p2p_can_access(p, a, b)) return "peer(staged)";
    return transport_name(t);
}

void p2p_abort(pp_p2p_t *p)
{
    if (!p || !p->comms || p->aborted) return;
    for (int d = 0; d < p->n; d++)
        if (p->comms[d]) ncclCommAbort(p->comms[d]);
    p->aborted = 1;
}
