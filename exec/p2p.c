/*
 * p2p.c — the peer, nccl, local and shared transports (see p2p.h): one row of functions per row of
 * the transport table (transport.c), in the same order.
 *
 * Peer access is enabled once, at init, for every ordered pair that reports it; a pair already
 * enabled (another object did it) is not an error, and only between devices this process owns.
 * NCCL communicators are made with ncclCommInitRankConfig, in one group call per process, under
 * unique ids that rank 0 of the group (pp_group.h) makes and broadcasts: per directed pair or
 * per device, as init_nccl says.
 * The object owns the communicators; p2p_free destroys them.
 */
#ifndef PP_WITH_NCCL
#define PP_WITH_NCCL
#endif
#include "p2p.h"

#include "common/pp_cuda.h"

#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pp_p2p {
    int n;                                             /* devices */
    int cuda_ids[PP_MAX_DEVICES];                      /* CUDA ordinal of pipeline device d */
    unsigned char owned[PP_MAX_DEVICES];               /* 1: this process drives device d */
    unsigned char can[PP_MAX_DEVICES][PP_MAX_DEVICES]; /* peer access a -> b */
    /* per device (PP_NCCL_COMMS_DEVICE): [d], rank d on cuda_ids[d]; NULL without nccl */
    ncclComm_t *comms;
    /* per directed pair (PP_NCCL_COMMS_PAIR): [a][b][0] on a (rank 0, sends), [a][b][1] on b
     * (rank 1, receives); NULL where this process owns neither end or a never sends to b */
    ncclComm_t (*pair)[PP_MAX_DEVICES][2];
    /* the gradient reduction (pipeline.data_parallel): device d's group communicator, rank d / pipe
     * (NULL where this process does not own d, or the group reduces on one GPU) */
    int replicas, pipe;
    ncclComm_t reduce[PP_MAX_DEVICES];
    unsigned char reduce_local[PP_MAX_DEVICES]; /* 1: d's group shares a GPU: copies and adds */
    int aborted;
    /* p2p_connect: the meeting transfers */
    int n_meet;
    p2p_meet_t *meet;        /* [n_meet]; dst: where the sender writes (its own, or opened) */
    uint32_t *flags;         /* [n_meet][2] free, full, in host memory the host's processes share */
    pp_group_t *flags_group; /* who shared them (NULL: this process allocated them) */
    int flags_registered;
    void **opened; /* [n_meet]: slots opened through IPC here (closed by p2p_free); NULL: none */
};

/* Stream memory operations, from the driver (the runtime has no such call); loaded once. */
typedef CUresult (*wait32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
typedef CUresult (*range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
static wait32_fn drv_wait32, drv_write32;
static range_fn drv_range;

static pp_status_t load_driver(void)
{
    static const struct {
        const char *name;
        void **fn;
    } want[] = {{"cuStreamWaitValue32", (void **)&drv_wait32},
                {"cuStreamWriteValue32", (void **)&drv_write32},
                {"cuMemGetAddressRange", (void **)&drv_range}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (*want[i].fn) continue;
        enum cudaDriverEntryPointQueryResult q;
        PP_CUDA_CHECK(cudaGetDriverEntryPointByVersion(want[i].name, want[i].fn, 12000,
                                                       cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || !*want[i].fn)
            PP_FAIL(PP_ERR_DEVICE, "the CUDA driver has no %s", want[i].name);
    }
    return PP_OK;
}

#define PP_DRV_CHECK(call)                                                                         \
    do {                                                                                           \
        CUresult drv_e_ = (call);                                                                  \
        if (drv_e_ != CUDA_SUCCESS)                                                                \
            PP_FAIL(PP_ERR_CUDA, "%s failed: CUDA driver error %d", #call, (int)drv_e_);           \
    } while (0)

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

/* The communicator settings of `nccl:` (ncclConfig_t; unset fields keep NCCL's defaults). */
static ncclConfig_t comm_config(const pp_job_nccl_t *o)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    if (o->max_ctas > 0) {
        c.minCTAs = 1;
        c.maxCTAs = o->max_ctas;
    }
    static const int policy[] = {
        [PP_NCCL_CTA_DEFAULT] = NCCL_CTA_POLICY_DEFAULT,
        [PP_NCCL_CTA_EFFICIENCY] = NCCL_CTA_POLICY_EFFICIENCY,
        [PP_NCCL_CTA_ZERO] = NCCL_CTA_POLICY_ZERO,
    };
    if (o->cta_policy != PP_NCCL_CTA_DEFAULT) c.CTAPolicy = policy[o->cta_policy];
    return c;
}

/* The k communicators this process takes part in, rank[i] of size[i] under ids[i] on CUDA device
 * dev[i], made in one group call (this thread may drive several devices). */
static pp_status_t init_comms(ncclComm_t **out, const int *size, const int *rank, const int *dev,
                              const ncclUniqueId *ids, const int *id_of, int k,
                              const pp_job_nccl_t *o)
{
    ncclResult_t r = ncclSuccess;
    if (k == 0) return PP_OK;
    PP_NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < k && r == ncclSuccess; i++) {
        ncclConfig_t c = comm_config(o);
        if (cudaSetDevice(dev[i]) != cudaSuccess) r = ncclUnhandledCudaError;
        if (r == ncclSuccess)
            r = ncclCommInitRankConfig(out[i], size[i], ids[id_of[i]], rank[i], &c);
    }
    ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess || end != ncclSuccess) {
        fprintf(stderr, "%s:%d: making %d NCCL communicator%s failed: %s\n", __FILE__, __LINE__, k,
                k == 1 ? "" : "s", ncclGetErrorString(r != ncclSuccess ? r : end));
        return PP_ERR_NCCL;
    }
    return PP_OK;
}

/* `n_ids` unique ids, made on rank 0 of g (or here, without a group) and known to every process. */
static pp_status_t share_ids(ncclUniqueId *ids, int n_ids, pp_group_t *g)
{
    memset(ids, 0, sizeof *ids * (size_t)n_ids);
    if (!g || g->rank == 0)
        for (int i = 0; i < n_ids; i++)
            PP_NCCL_CHECK(ncclGetUniqueId(&ids[i]));
    if (g && g->size > 1 && n_ids > 0)
        PP_CHECK(g->ops->bcast(g, ids, sizeof *ids * (size_t)n_ids, 0));
    return PP_OK;
}

/* The communicators of the owned devices. PP_NCCL_COMMS_DEVICE: one over every device, rank d
 * for pipeline device d, so every transfer of a device goes through one communicator, whose
 * kernels run one after another. PP_NCCL_COMMS_PAIR: a communicator of two ranks for each
 * directed pair a -> b the plan sends over (`pairs`), so a transfer waits only for the earlier
 * transfers of its own pair, as the per-pair streams do. Every process walks the pairs in the
 * same order, and every id comes from rank 0 in one broadcast. */
static pp_status_t init_nccl(pp_p2p_t *p, const unsigned char *owned, pp_group_t *g,
                             const p2p_setup_t *setup)
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
    const int maxc = 2 * p->n * p->n;
    ncclUniqueId *ids = calloc((size_t)(p->n * p->n), sizeof *ids);
    ncclComm_t **slot = calloc((size_t)maxc, sizeof *slot);
    int *ints = calloc((size_t)maxc * 4, sizeof *ints);
    if (!ids || !slot || !ints) {
        free(ids), free(slot), free(ints);
        PP_ALLOC_CHECK(NULL);
    }
    int *size = ints, *rank = ints + maxc, *dev = ints + 2 * maxc, *id_of = ints + 3 * maxc;
    int k = 0, n_ids = 0;
    if (setup->nccl.communicators == PP_NCCL_COMMS_DEVICE) {
        p->comms = calloc((size_t)p->n, sizeof(ncclComm_t));
        n_ids = 1;
        for (int d = 0; p->comms && d < p->n; d++) {
            if (!owned[d]) continue;
            slot[k] = &p->comms[d], size[k] = p->n, rank[k] = d, dev[k] = p->cuda_ids[d];
            id_of[k++] = 0;
        }
    } else {
        p->pair = calloc((size_t)p->n, sizeof *p->pair);
        for (int a = 0; p->pair && a < p->n; a++)
            for (int b = 0; b < p->n; b++) {
                if (!setup->nccl_pair[a][b]) continue;
                for (int side = 0; side < 2; side++) {
                    int d = side ? b : a;
                    if (!owned[d]) continue;
                    slot[k] = &p->pair[a][b][side], size[k] = 2, rank[k] = side;
                    dev[k] = p->cuda_ids[d], id_of[k++] = n_ids;
                }
                n_ids++;
            }
    }
    pp_status_t st = p->comms || p->pair ? share_ids(ids, n_ids, g) : PP_ERR_NOMEM;
    if (st == PP_ERR_NOMEM) fprintf(stderr, "out of host memory\n");
    if (st == PP_OK) st = init_comms(slot, size, rank, dev, ids, id_of, k, &setup->nccl);
    free(ids), free(slot), free(ints);
    return st;
}

/* The gradient reduction's groups (p2p.h): for each, on one GPU or over NCCL. Every process
 * walks the groups in the same order, so the ids line up; a group on one GPU must be this
 * process's alone. */
static pp_status_t init_reduce(pp_p2p_t *p, const unsigned char *owned, pp_group_t *g, int d)
{
    const int pipe = p->n / d;
    int size[PP_MAX_DEVICES], rank[PP_MAX_DEVICES], dev[PP_MAX_DEVICES], id_of[PP_MAX_DEVICES];
    ncclComm_t *slot[PP_MAX_DEVICES];
    ncclUniqueId ids[PP_MAX_DEVICES];
    int k = 0, n_ids = 0;
    p->replicas = d, p->pipe = pipe;
    for (int i = 0; i < pipe; i++) {
        int local = 0, mine = 0;
        for (int r = 0; r < d; r++) {
            mine += owned[r * pipe + i];
            for (int q = 0; q < r; q++)
                local |= p->cuda_ids[r * pipe + i] == p->cuda_ids[q * pipe + i];
        }
        if (local && mine != d) {
            fprintf(stderr,
                    "the replicas of pipeline device %d share a GPU but not a process: their "
                    "gradients cannot be reduced (give them a GPU each, or run them in one "
                    "process)\n",
                    i);
            return PP_ERR_INPUT;
        }
        /* Some share a GPU, the others not: replica 0's GPU adds the others' buckets in place,
         * so it must read and write each of theirs. */
        for (int r = 1; local && r < d; r++)
            if (!p2p_can_access(p, i, r * pipe + i)) {
                fprintf(stderr,
                        "the replicas of pipeline device %d share some GPUs but not all, and GPU "
                        "%d cannot access GPU %d: their gradients cannot be reduced (give each "
                        "replica its own GPU, or put them all on one)\n",
                        i, p->cuda_ids[i], p->cuda_ids[r * pipe + i]);
                return PP_ERR_INPUT;
            }
        for (int r = 0; r < d; r++) {
            int m = r * pipe + i;
            p->reduce_local[m] = (unsigned char)local;
            if (local || !owned[m]) continue;
            slot[k] = &p->reduce[m], size[k] = d, rank[k] = r, dev[k] = p->cuda_ids[m];
            id_of[k++] = n_ids;
        }
        if (!local) n_ids++;
    }
    PP_CHECK(share_ids(ids, n_ids, g));
    pp_job_nccl_t plain = {0}; /* NCCL's own CTA choices for the collectives */
    return init_comms(slot, size, rank, dev, ids, id_of, k, &plain);
}

pp_status_t p2p_init(pp_p2p_t **out, int n, const int *cuda_ids, const unsigned char *owned,
                     pp_group_t *g, const p2p_setup_t *setup)
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
    memcpy(p->owned, owned ? owned : all, sizeof p->owned);
    st = enable_peers(p, owned ? owned : all);
    /* Every process learns of a failure before the collective set-up of the communicators. */
    if (g) st = group_agree(g, st);
    if (st == PP_OK && (setup->used & (1u << PP_TRANSPORT_NCCL))) {
        st = init_nccl(p, owned ? owned : all, g, setup);
        if (g) st = group_agree(g, st);
    }
    if (st == PP_OK && setup->replicas > 1) {
        if (n % setup->replicas)
            PP_FAIL(PP_ERR_INTERNAL, "p2p_init: %d devices in %d replicas", n, setup->replicas);
        st = init_reduce(p, owned ? owned : all, g, setup->replicas);
        if (g) st = group_agree(g, st);
    }
    if (st != PP_OK) goto fail;
    *out = p;
    return PP_OK;
fail:
    p2p_free(p);
    return st;
}

/* Every communicator slot, by index (NULL slots included): the transfers' (per device or per
 * pair), then the reduction's, one per device. */
static int n_transfer_comms(const pp_p2p_t *p)
{
    return p->comms ? p->n : p->pair ? p->n * p->n * 2 : 0;
}

static int n_comms(const pp_p2p_t *p)
{
    return n_transfer_comms(p) + p->n;
}

static ncclComm_t *comm_at(pp_p2p_t *p, int i)
{
    const int t = n_transfer_comms(p);
    if (i >= t) return &p->reduce[i - t];
    return p->comms ? &p->comms[i] : &p->pair[i / (2 * p->n)][(i / 2) % p->n][i % 2];
}

void p2p_free(pp_p2p_t *p)
{
    if (!p) return;
    if (!p->aborted) /* ncclCommAbort already freed them */
        for (int i = 0; i < n_comms(p); i++)
            if (*comm_at(p, i)) ncclCommDestroy(*comm_at(p, i));
    free(p->comms);
    free(p->pair);
    for (int k = 0; p->opened && k < p->n_meet; k++)
        if (p->opened[k]) {
            int dup = 0; /* one open per allocation: close it once */
            for (int j = 0; j < k && !dup; j++)
                dup = p->opened[j] == p->opened[k];
            if (!dup) {
                cudaSetDevice(p->cuda_ids[p->meet[k].src_dev]);
                cudaIpcCloseMemHandle(p->opened[k]);
            }
        }
    if (p->flags_registered) cudaHostUnregister(p->flags);
    if (p->flags) {
        if (p->flags_group)
            p->flags_group->ops->host_unshare(p->flags_group, p->flags);
        else
            free(p->flags);
    }
    free(p->opened);
    free(p->meet);
    free(p);
}

/* What a receiver tells the sender of an ipc transfer: its slot's allocation and where in it. */
typedef struct ipc_slot {
    cudaIpcMemHandle_t handle;
    size_t offset;
    int valid;
} ipc_slot_t;

/* Transfer k's slot as its receiver exported it: all[rank][k] of the one rank that did, or NULL. */
static const ipc_slot_t *exported(const ipc_slot_t *all, int size, int n, int k)
{
    for (int r = 0; r < size; r++)
        if (all[(size_t)r * n + k].valid) return &all[(size_t)r * n + k];
    return NULL;
}

pp_status_t p2p_connect(pp_p2p_t *p, pp_group_t *g, const p2p_meet_t *meet, int n)
{
    if (n == 0) return PP_OK;
    const int many = g && g->size > 1;
    pp_status_t st = load_driver();
    if (many) st = group_agree(g, st);
    PP_CHECK(st);
    p->meet = calloc((size_t)n, sizeof *p->meet);
    p->opened = calloc((size_t)n, sizeof *p->opened);
    ipc_slot_t *mine = calloc((size_t)n, sizeof *mine), *all = NULL;
    if (!p->meet || !p->opened || !mine) st = PP_ERR_NOMEM;
    if (st == PP_OK) {
        memcpy(p->meet, meet, sizeof *meet * (size_t)n);
        p->n_meet = n;
        /* The flags: 4 KiB at least, one page of its own. */
        size_t bytes = (size_t)n * 2 * sizeof(uint32_t);
        bytes = bytes < 4096 ? 4096 : (bytes + 4095) / 4096 * 4096;
        if (many) {
            st = g->ops->host_share(g, bytes, (void **)&p->flags);
            if (st == PP_OK) p->flags_group = g;
        } else if (!(p->flags = calloc(1, bytes))) {
            st = PP_ERR_NOMEM;
        }
        if (st == PP_OK) {
            cudaError_t e = cudaHostRegister(p->flags, bytes,
                                             cudaHostRegisterPortable | cudaHostRegisterMapped);
            if (e == cudaSuccess)
                p->flags_registered = 1;
            else {
                fprintf(stderr, "%s:%d: cudaHostRegister of the transfers' flags failed: %s\n",
                        __FILE__, __LINE__, cudaGetErrorString(e));
                (void)cudaGetLastError();
                st = PP_ERR_CUDA;
            }
        }
    }
    /* Each receiver of an ipc transfer exports its slot's allocation; one process's own slot
     * needs none. */
    for (int k = 0; st == PP_OK && k < n; k++) {
        if (meet[k].t != PP_TRANSPORT_IPC || !meet[k].dst || !many) continue;
        CUdeviceptr base = 0;
        size_t size = 0;
        cudaError_t e = cudaSetDevice(p->cuda_ids[meet[k].dst_dev]);
        if (e == cudaSuccess &&
            drv_range(&base, &size, (CUdeviceptr)(uintptr_t)meet[k].dst) != CUDA_SUCCESS)
            e = cudaErrorInvalidValue;
        if (e == cudaSuccess) e = cudaIpcGetMemHandle(&mine[k].handle, (void *)(uintptr_t)base);
        if (e != cudaSuccess) {
            fprintf(stderr, "%s:%d: exporting the slot of transfer %d -> %d failed: %s\n", __FILE__,
                    __LINE__, meet[k].src_dev, meet[k].dst_dev, cudaGetErrorString(e));
            (void)cudaGetLastError();
            st = PP_ERR_CUDA;
            break;
        }
        mine[k].offset = (size_t)((uintptr_t)meet[k].dst - (uintptr_t)base);
        mine[k].valid = 1;
    }
    if (many) { /* every process learns every receiver's slot: rank 0 gathers, then broadcasts */
        st = group_agree(g, st);
        if (st == PP_OK && !(all = calloc((size_t)n * (size_t)g->size, sizeof *all)))
            st = PP_ERR_NOMEM;
        st = group_agree(g, st);
        if (st == PP_OK)
            st = g->ops->gather(g, mine, g->rank == 0 ? all : NULL, sizeof *mine * (size_t)n, 0);
        if (st == PP_OK) st = g->ops->bcast(g, all, sizeof *all * (size_t)n * (size_t)g->size, 0);
        st = group_agree(g, st);
    }
    /* The sender of an ipc transfer into another process opens the receiver's slot, once per
     * allocation; a process that owns neither end opens nothing. */
    for (int k = 0; st == PP_OK && many && k < n; k++) {
        if (meet[k].t != PP_TRANSPORT_IPC || meet[k].dst || !p->owned[meet[k].src_dev]) continue;
        const ipc_slot_t *from = exported(all, g->size, n, k);
        if (!from) { /* every receiver exports its slot: a missing one is ours to fix */
            fprintf(stderr, "%s:%d: transfer %d -> %d: no process exported its slot\n", __FILE__,
                    __LINE__, meet[k].src_dev, meet[k].dst_dev);
            st = PP_ERR_INTERNAL;
            break;
        }
        char *base = NULL;
        for (int j = 0; j < k && !base; j++) {
            const ipc_slot_t *o = p->opened[j] && p->meet[j].src_dev == meet[k].src_dev
                                      ? exported(all, g->size, n, j)
                                      : NULL;
            if (o && !memcmp(&o->handle, &from->handle, sizeof from->handle)) base = p->opened[j];
        }
        cudaError_t e = cudaSetDevice(p->cuda_ids[meet[k].src_dev]);
        if (e == cudaSuccess && !base)
            e = cudaIpcOpenMemHandle((void **)&base, from->handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            fprintf(stderr, "%s:%d: opening the slot of transfer %d -> %d failed: %s\n", __FILE__,
                    __LINE__, meet[k].src_dev, meet[k].dst_dev, cudaGetErrorString(e));
            (void)cudaGetLastError();
            st = PP_ERR_CUDA;
            break;
        }
        p->opened[k] = base;
        p->meet[k].dst = base + from->offset;
    }
    free(mine);
    free(all);
    if (st == PP_ERR_NOMEM) fprintf(stderr, "out of host memory\n");
    return many ? group_agree(g, st) : st;
}

int p2p_can_access(const pp_p2p_t *p, int a, int b)
{
    return a == b || p->cuda_ids[a] == p->cuda_ids[b] || p->can[a][b];
}

int p2p_has_nccl(const pp_p2p_t *p)
{
    return p->comms || p->pair;
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

/* The communicator that carries a -> b on `side` (0: a's, the sender; 1: b's) and the other
 * end's rank in it; NULL when none was made. */
static ncclComm_t nccl_comm(const pp_p2p_t *p, int a, int b, int side, int *peer)
{
    if (p->comms) {
        *peer = side ? a : b;
        return p->comms[side ? b : a];
    }
    *peer = !side;
    return p->pair ? p->pair[a][b][side] : NULL;
}

/* The flags of meeting transfer `key`, as the devices address them (mapped host memory under
 * unified addressing). */
static CUdeviceptr flag_free(const pp_p2p_t *p, int key)
{
    return (CUdeviceptr)(uintptr_t)&p->flags[2 * key];
}
static CUdeviceptr flag_full(const pp_p2p_t *p, int key)
{
    return (CUdeviceptr)(uintptr_t)&p->flags[2 * key + 1];
}

/* The two halves of a meeting: the receiver says its slot is free, then waits for the bytes and
 * rearms; the sender waits for the free slot and rearms it, moves the bytes (`move`, NULL for
 * none), then says they have landed. Each flag is set by one side and cleared by the other after
 * it saw it set, so a replayed step (a CUDA graph keeps the values) meets again from 0, 0. */
static pp_status_t meet_recv(pp_p2p_t *p, int key, cudaStream_t s)
{
    PP_DRV_CHECK(drv_write32((CUstream)s, flag_free(p, key), 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    PP_DRV_CHECK(drv_wait32((CUstream)s, flag_full(p, key), 1, CU_STREAM_WAIT_VALUE_EQ));
    PP_DRV_CHECK(drv_write32((CUstream)s, flag_full(p, key), 0, CU_STREAM_WRITE_VALUE_DEFAULT));
    return PP_OK;
}

static pp_status_t meet_send_begin(pp_p2p_t *p, int key, cudaStream_t s)
{
    PP_DRV_CHECK(drv_wait32((CUstream)s, flag_free(p, key), 1, CU_STREAM_WAIT_VALUE_EQ));
    PP_DRV_CHECK(drv_write32((CUstream)s, flag_free(p, key), 0, CU_STREAM_WRITE_VALUE_DEFAULT));
    return PP_OK;
}

static pp_status_t meet_send_end(pp_p2p_t *p, int key, cudaStream_t s)
{
    PP_DRV_CHECK(drv_write32((CUstream)s, flag_full(p, key), 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    return PP_OK;
}

static int meets(const pp_p2p_t *p, const p2p_xfer_t *x)
{
    return x->key >= 0 && x->key < p->n_meet && p->flags;
}

/* ipc: the sender's copy engine writes into the receiver's slot (opened here, or this process's
 * own), between the two flags of the meeting. */
static pp_status_t ipc_send(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    if (!meets(p, x)) PP_FAIL(PP_ERR_INTERNAL, "p2p: ipc transfer without a meeting");
    void *dst = p->meet[x->key].dst;
    if (!dst) PP_FAIL(PP_ERR_INTERNAL, "p2p: ipc transfer %d has no destination", x->key);
    PP_CHECK(meet_send_begin(p, x->key, stream));
    PP_CUDA_CHECK(cudaMemcpyAsync(dst, x->src, x->bytes, cudaMemcpyDefault, stream));
    return meet_send_end(p, x->key, stream);
}

static pp_status_t ipc_recv(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    if (!meets(p, x)) PP_FAIL(PP_ERR_INTERNAL, "p2p: ipc transfer without a meeting");
    return meet_recv(p, x->key, stream);
}

static pp_status_t nccl_half(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream, int side)
{
    int peer;
    /* Between processes of one host: both kernels start once both ends are ready. */
    if (meets(p, x)) {
        if (side) PP_CHECK(meet_recv(p, x->key, stream));
        if (!side) PP_CHECK(meet_send_begin(p, x->key, stream));
        if (!side) PP_CHECK(meet_send_end(p, x->key, stream));
    }
    ncclComm_t c = nccl_comm(p, x->src_dev, x->dst_dev, side, &peer);
    if (!c)
        PP_FAIL(PP_ERR_INTERNAL, "p2p: no NCCL communicator for %d -> %d", x->src_dev, x->dst_dev);
    ncclResult_t r = side ? ncclRecv(x->dst, x->bytes, ncclUint8, peer, c, stream)
                          : ncclSend(x->src, x->bytes, ncclUint8, peer, c, stream);
    if (r != ncclSuccess) {
        fprintf(stderr, "%s:%d: NCCL %s of %zu bytes from device %d to %d failed: %s\n", __FILE__,
                __LINE__, side ? "receive" : "send", x->bytes, x->src_dev, x->dst_dev,
                ncclGetErrorString(r));
        return PP_ERR_NCCL;
    }
    return PP_OK;
}

static pp_status_t nccl_send(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    return nccl_half(p, x, stream, 0);
}

static pp_status_t nccl_recv(pp_p2p_t *p, const p2p_xfer_t *x, cudaStream_t stream)
{
    return nccl_half(p, x, stream, 1);
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
    [PP_TRANSPORT_IPC] = {ipc_send, ipc_recv, NULL, NULL},
    [PP_TRANSPORT_AUTO] = {nothing, nothing, NULL, NULL}, /* resolved per boundary, never posted */
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

int p2p_reduce_local(const pp_p2p_t *p, int dev)
{
    return dev >= 0 && dev < p->n && p->reduce_local[dev];
}

/* Device dev's reduction communicator, or a message why there is none. */
static pp_status_t reduce_comm(const pp_p2p_t *p, int dev, ncclComm_t *c)
{
    *c = dev >= 0 && dev < p->n ? p->reduce[dev] : NULL;
    if (!*c)
        PP_FAIL(PP_ERR_INTERNAL, "no gradient-reduction communicator on pipeline device %d", dev);
    return PP_OK;
}

pp_status_t p2p_all_reduce(pp_p2p_t *p, int dev, float *buf, size_t count, cudaStream_t stream)
{
    ncclComm_t c;
    PP_CHECK(reduce_comm(p, dev, &c));
    PP_NCCL_CHECK(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, c, stream));
    return PP_OK;
}

/* The rank's own part of `total` units at buf (in place): its offset in units, the part's size;
 * the ranks must divide the total. */
static pp_status_t own_part(const pp_p2p_t *p, int dev, size_t total, const char *what,
                            size_t *part, size_t *at)
{
    *part = total / (size_t)p->replicas;
    if (*part * (size_t)p->replicas != total)
        PP_FAIL(PP_ERR_INTERNAL, "%s of %zu over %d ranks", what, total, p->replicas);
    *at = *part * (size_t)(dev / p->pipe);
    return PP_OK;
}

pp_status_t p2p_reduce_scatter(pp_p2p_t *p, int dev, float *buf, size_t count, cudaStream_t stream)
{
    ncclComm_t c;
    size_t part, at;
    PP_CHECK(reduce_comm(p, dev, &c));
    PP_CHECK(own_part(p, dev, count, "reduce-scatter (values)", &part, &at));
    PP_NCCL_CHECK(ncclReduceScatter(buf, buf + at, part, ncclFloat32, ncclSum, c, stream));
    return PP_OK;
}

pp_status_t p2p_all_gather(pp_p2p_t *p, int dev, void *buf, size_t bytes, cudaStream_t stream)
{
    ncclComm_t c;
    size_t part, at;
    PP_CHECK(reduce_comm(p, dev, &c));
    PP_CHECK(own_part(p, dev, bytes, "all-gather (bytes)", &part, &at));
    PP_NCCL_CHECK(ncclAllGather((const char *)buf + at, buf, part, ncclUint8, c, stream));
    return PP_OK;
}

const char *p2p_describe(const pp_p2p_t *p, pp_transport_t t, int a, int b)
{
    if (t == PP_TRANSPORT_PEER && !p2p_can_access(p, a, b)) return "peer(staged)";
    return transport_name(t);
}

void p2p_abort(pp_p2p_t *p)
{
    if (!p || p->aborted) return;
    /* Every meeting's flags raised from the host: a stream waiting on one (a peer that will never
     * come) goes on, so the step drains and the memory can be freed. */
    for (int k = 0; p->flags && k < 2 * p->n_meet; k++)
        __atomic_store_n(&p->flags[k], 1u, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n_comms(p); i++)
        if (*comm_at(p, i)) ncclCommAbort(*comm_at(p, i));
    p->aborted = 1;
}
