/*
 * bench_p2p.cu — one pipeline boundary, every transport and knob: a transfer of 1–64 MiB from GPU
 * --src to GPU --dst by peer copies (cudaMemcpyAsync between unified addresses, peer access enabled
 * both ways, on a non-blocking stream of the source) and by ncclSend/ncclRecv on a 2-rank
 * communicator made in this process (rank 0 on the source, rank 1 on the destination, both
 * ncclCommInitRankConfig calls under one unique id in one group; the send on the source's stream
 * and the receive on the destination's, posted in one group). Each NCCL knob gets a communicator
 * of its own, destroyed after its rows: the default config, maxCTAs 1, 2, 4, 8 (minCTAs 1),
 * CTAPolicy EFFICIENCY and ZERO, buffers from ncclMemAlloc registered with ncclCommRegister; and
 * both transports once more with their streams at the greatest priority (VARIANTS). A knob NCCL
 * refuses is one row, unsupported, with NCCL's message. A staged peer copy (no peer access) is not
 * measured: once access is enabled a copy cannot be made to go through the host.
 *
 * Latency. CUDA cannot time between events of two devices, so a transfer is timed in a window on
 * the destination: e0 on its stream; the source's stream waits on e0; the transfer; the
 * destination's stream waits on an event the source records after its half; e1. The time is the
 * transfer with both halves done plus the window's own two cross-device waits (measured empty,
 * printed in the preamble and in every JSON line). Each window opens behind a short spin kernel, so
 * the host has enqueued the whole window before e0 fires (else the host's launch time would be
 * timed); windows whose gate opened first are counted ("late") and the gate grows. Median, p10 and
 * p90 of --iters windows after 3; GB/s = bytes / median. "b2b": 16 transfers back to back in one
 * window, the time per transfer (the rate a stream of boundaries gets), median of 5 windows.
 *
 * GEMM slowdown: a loop of 50 bf16 GEMMs (4096^3, fp32 compute, cublasGemmEx on a stream of its
 * own) on the source, then on the destination, alone and beside transfers back to back, both
 * behind one gate so they start together, enough transfers that they outlast the loop (checked,
 * doubled where they did not), alone and beside alternated; slowdown = median beside / median
 * alone - 1 over --reps each, at the --slowdown sizes (16 and 64 MiB). Every input is random.
 *
 *   bench_p2p [--src N] [--dst N] [--sizes MIB,...] [--iters N] [--variants NAME,...]
 *             [--slowdown MIB,...|none] [--reps N]
 *
 * Prints a `#` preamble, a fixed-width table and one JSON line per row. NCCL_NVLS_ENABLE is set to
 * 0: NVLink SHARP serves collectives, never send/recv. Nothing waits forever: a stream still busy
 * after 60 s aborts the communicators, and a variant still running after 300 s ends the program.
 * Exit 1 on a CUDA, cuBLAS or NCCL error or a transfer that delivered the wrong bytes, 2 on bad
 * usage or fewer than 2 GPUs.
 */
#define BENCH_NAME "bench_p2p"
#include "bench_util.h"
#include "p2p_report.h"

#include <chrono>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_SIZES   16
#define WARMUP      3
#define B2B         16 /* transfers in one back-to-back window */
#define B2B_WINDOWS 5  /* back-to-back windows a row */
#define GEMM_N      4096
#define GEMM_LOOP   50          /* GEMMs in one timed loop (~10 ms on an H100) */
#define WAIT_S      60          /* longest wait for a stream */
#define VARIANT_S   300         /* longest time one variant may take */
#define MAX_X       8000        /* most transfers beside one GEMM loop */
#define GATE_NS     5000000ll   /* a GEMM loop's first gate */
#define GATE_MAX_NS 200000000ll /* its longest */
#define STR_(x)     #x
#define STR(x)      STR_(x)

/* ---- the transports and their knobs ---------------------------------------------------------- */

typedef struct variant {
    const char *name;      /* what --variants names */
    const char *transport; /* peer | nccl */
    const char *knob;      /* what differs from the transport's default */
    int nccl;              /* 0: peer copies; 1: ncclSend/ncclRecv */
    int max_ctas;          /* ncclConfig_t maxCTAs, with minCTAs = 1; 0: NCCL's own */
    int cta_policy;        /* ncclConfig_t CTAPolicy; -1: left unset */
    int registered;        /* buffers from ncclMemAlloc, registered with ncclCommRegister */
    int high_priority;     /* the transfer streams at the greatest priority (the GEMM's: least) */
} variant_t;

static const variant_t VARIANTS[] = {
    {"peer", "peer", "default", 0, 0, -1, 0, 0},
    {"peer-prio", "peer", "high priority", 0, 0, -1, 0, 1},
    {"nccl", "nccl", "default", 1, 0, -1, 0, 0},
    {"nccl-ctas1", "nccl", "maxCTAs=1", 1, 1, -1, 0, 0},
    {"nccl-ctas2", "nccl", "maxCTAs=2", 1, 2, -1, 0, 0},
    {"nccl-ctas4", "nccl", "maxCTAs=4", 1, 4, -1, 0, 0},
    {"nccl-ctas8", "nccl", "maxCTAs=8", 1, 8, -1, 0, 0},
    {"nccl-efficiency", "nccl", "CTAPolicy=efficiency", 1, 0, NCCL_CTA_POLICY_EFFICIENCY, 0, 0},
    {"nccl-zero", "nccl", "CTAPolicy=zero", 1, 0, NCCL_CTA_POLICY_ZERO, 0, 0},
    {"nccl-registered", "nccl", "registered", 1, 0, -1, 1, 0},
    {"nccl-prio", "nccl", "high priority", 1, 0, -1, 0, 1},
};
#define N_VARIANTS (int)(sizeof VARIANTS / sizeof VARIANTS[0])

/* ---- state ----------------------------------------------------------------------------------- */

/* Index 0 is the source's side, 1 the destination's, in every [2]. */
typedef struct bench {
    int dev[2];       /* CUDA ordinals */
    int peer_ok;      /* peer access enabled both ways */
    size_t max_bytes; /* the largest size */
    void *buf[2];     /* cudaMalloc'd transfer buffers; buf[0] holds random bytes, ref their copy */
    std::vector<unsigned char> ref;
    /* the variant open now */
    const variant_t *v;
    cudaStream_t xs[2]; /* transfer streams: the copy or send on [0], the receive on [1] */
    ncclComm_t comm[2]; /* rank 0 on the source, rank 1 on the destination */
    void *reg[2];       /* the registered variant's buffers (ncclMemAlloc) */
    void *reg_handle[2];
    void *x[2]; /* what the transfers read [0] and write [1]: buf or reg */
    /* per side, made once */
    cudaStream_t gemm_s[2], gate_s[2];
    cudaEvent_t gate_ev[2];          /* after the gate's spin */
    cudaEvent_t g0[2], g1[2];        /* around a GEMM loop */
    cudaEvent_t xend[2];             /* after the transfers beside a GEMM loop */
    cudaEvent_t sent;                /* on the source, after its half of a transfer */
    std::vector<cudaEvent_t> e0, e1; /* window bounds, on the destination */
    cublasHandle_t blas[2];
    void *ga[2], *gb[2], *gc[2];
    long long lat_gate_ns;  /* a latency window's gate; B2B times it for a back-to-back one */
    long long gemm_gate_ns; /* a GEMM loop's gate */
} bench_t;

typedef p2p_report_row_t row_t;

typedef struct opts {
    int src, dst, iters, reps;
    int sizes[MAX_SIZES], n_sizes;
    int slow[MAX_SIZES], n_slow;
    int use[N_VARIANTS];
} opts_t;

static const char *volatile g_doing = "setup"; /* the variant running, for the watchdog */

static void on_alarm(int sig)
{
    static const char a[] = BENCH_NAME ": no progress in ";
    static const char b[] = " for " STR(VARIANT_S) " s (a hung NCCL call or transfer): giving up\n";
    const char *d = g_doing;
    (void)!write(2, a, sizeof a - 1);
    (void)!write(2, d, strlen(d));
    (void)!write(2, b, sizeof b - 1);
    _exit(1);
}

static double now_ms(void)
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/* Holds its stream for ns nanoseconds: the host enqueues what follows before it runs. */
__global__ void gate_kernel(long long ns)
{
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

/* ---- waiting --------------------------------------------------------------------------------- */

static void comms_abort(bench_t *b)
{
    for (int i = 0; i < 2; i++)
        if (b->comm[i]) ncclCommAbort(b->comm[i]);
    b->comm[0] = b->comm[1] = NULL;
}

/* Every stream of both sides idle; after WAIT_S a stream still busy aborts the communicators: -1.
 * Each stream is queried with its own device current, as every call on a stream here is. */
static int wait_all(bench_t *b, const char *what)
{
    const double deadline = now_ms() + WAIT_S * 1e3;
    for (int i = 0; i < 6; i++) {
        const int side = i % 2;
        cudaStream_t s = i < 2 ? b->xs[side] : i < 4 ? b->gemm_s[side] : b->gate_s[side];
        cudaError_t e;
        CK(cudaSetDevice(b->dev[side]));
        while (s && (e = cudaStreamQuery(s)) != cudaSuccess) {
            if (e != cudaErrorNotReady) {
                fprintf(stderr, BENCH_NAME ": %s (%s): %s\n", what, b->v ? b->v->name : "-",
                        cudaGetErrorString(e));
                return -1;
            }
            (void)cudaGetLastError();
            if (now_ms() > deadline) {
                fprintf(stderr,
                        BENCH_NAME ": %s (%s): a stream of GPU %d still busy after %d s: "
                                   "aborting\n",
                        what, b->v ? b->v->name : "-", b->dev[side], WAIT_S);
                comms_abort(b);
                return -1;
            }
            usleep(20);
        }
    }
    return 0;
}

/* 1 if the gate of `side` has opened, 0 if not yet, -1 on an error. */
static int gate_open(bench_t *b, int side)
{
    CK(cudaSetDevice(b->dev[side]));
    cudaError_t e = cudaEventQuery(b->gate_ev[side]);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    CK(e);
    return 1;
}

/* ---- setup ----------------------------------------------------------------------------------- */

static int enable_peer(bench_t *b)
{
    int ab = 0, ba = 0;
    CK(cudaDeviceCanAccessPeer(&ab, b->dev[0], b->dev[1]));
    CK(cudaDeviceCanAccessPeer(&ba, b->dev[1], b->dev[0]));
    for (int i = 0; i < 2 && ab && ba; i++) {
        CK(cudaSetDevice(b->dev[i]));
        cudaError_t e = cudaDeviceEnablePeerAccess(b->dev[1 - i], 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled)
            (void)cudaGetLastError();
        else
            CK(e);
    }
    b->peer_ok = ab && ba;
    return 0;
}

/* One side's GEMM stream, gate, events, cuBLAS handle and random operands, and its buffer. */
static int side_init(bench_t *b, int i, uint64_t *rng)
{
    const size_t nn = (size_t)GEMM_N * GEMM_N;
    int least = 0, greatest = 0;
    CK(cudaSetDevice(b->dev[i]));
    CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CK(cudaStreamCreateWithPriority(&b->gemm_s[i], cudaStreamNonBlocking, least));
    CK(cudaStreamCreateWithFlags(&b->gate_s[i], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&b->gate_ev[i], cudaEventDisableTiming));
    CK(cudaEventCreate(&b->g0[i]));
    CK(cudaEventCreate(&b->g1[i]));
    CK(cudaEventCreate(&b->xend[i]));
    CKB(cublasCreate(&b->blas[i]));
    CKB(cublasSetStream(b->blas[i], b->gemm_s[i]));
    CK(cudaMalloc(&b->ga[i], nn * 2));
    CK(cudaMalloc(&b->gb[i], nn * 2));
    CK(cudaMalloc(&b->gc[i], nn * 2));
    if (bench_upload_random(rng, b->ga[i], nn, 1) || bench_upload_random(rng, b->gb[i], nn, 1) ||
        bench_upload_random(rng, b->gc[i], nn, 1))
        return -1;
    CK(cudaMalloc(&b->buf[i], b->max_bytes));
    return 0;
}

static int bench_init(bench_t *b, const opts_t *o)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    b->dev[0] = o->src, b->dev[1] = o->dst;
    for (int k = 0; k < o->n_sizes; k++)
        if ((size_t)o->sizes[k] << 20 > b->max_bytes) b->max_bytes = (size_t)o->sizes[k] << 20;
    b->lat_gate_ns = 200000, b->gemm_gate_ns = GATE_NS;
    for (int i = 0; i < 2; i++)
        if (side_init(b, i, &rng)) return -1;
    CK(cudaSetDevice(b->dev[0]));
    CK(cudaEventCreateWithFlags(&b->sent, cudaEventDisableTiming));
    if (bench_upload_random(&rng, b->buf[0], b->max_bytes / 4, 0)) return -1;
    b->ref.resize(b->max_bytes);
    CK(cudaMemcpy(b->ref.data(), b->buf[0], b->max_bytes, cudaMemcpyDeviceToHost));
    CK(cudaSetDevice(b->dev[1]));
    const int n_ev = o->iters > B2B_WINDOWS ? o->iters : B2B_WINDOWS;
    b->e0.assign((size_t)n_ev, NULL), b->e1.assign((size_t)n_ev, NULL);
    for (int k = 0; k < n_ev; k++) {
        CK(cudaEventCreate(&b->e0[(size_t)k]));
        CK(cudaEventCreate(&b->e1[(size_t)k]));
    }
    return enable_peer(b);
}

static void bench_free(bench_t *b)
{
    for (size_t k = 0; k < b->e0.size(); k++) {
        if (b->e0[k]) cudaEventDestroy(b->e0[k]);
        if (b->e1[k]) cudaEventDestroy(b->e1[k]);
    }
    if (b->sent) cudaEventDestroy(b->sent);
    for (int i = 0; i < 2; i++) {
        cudaSetDevice(b->dev[i]);
        if (b->blas[i]) cublasDestroy(b->blas[i]);
        cudaEvent_t ev[4] = {b->gate_ev[i], b->g0[i], b->g1[i], b->xend[i]};
        for (int k = 0; k < 4; k++)
            if (ev[k]) cudaEventDestroy(ev[k]);
        if (b->gemm_s[i]) cudaStreamDestroy(b->gemm_s[i]);
        if (b->gate_s[i]) cudaStreamDestroy(b->gate_s[i]);
        cudaFree(b->ga[i]), cudaFree(b->gb[i]), cudaFree(b->gc[i]), cudaFree(b->buf[i]);
    }
}

/* ---- a variant: its streams, communicators and buffers --------------------------------------- */

static int streams_open(bench_t *b, int high)
{
    for (int i = 0; i < 2; i++) {
        int least = 0, greatest = 0;
        CK(cudaSetDevice(b->dev[i]));
        CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
        CK(cudaStreamCreateWithPriority(&b->xs[i], cudaStreamNonBlocking, high ? greatest : least));
        b->x[i] = b->buf[i];
    }
    return 0;
}

/* NCCL's refusal of `call` as one line into why. */
static void nccl_why(char *why, size_t n, const char *call, ncclResult_t r)
{
    const char *last = ncclGetLastError(NULL);
    snprintf(why, n, "%s: %s%s%s", call, ncclGetErrorString(r), last && *last ? ": " : "",
             last ? last : "");
    for (char *p = why; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
}

/* The two ranks under one unique id in one group, with the variant's config. 0: made; 1: NCCL
 * refused (why says how; nothing is left open); -1: another error. */
static int comms_open(bench_t *b, char *why, size_t n)
{
    const variant_t *v = b->v;
    ncclUniqueId id;
    ncclConfig_t cfg[2] = {NCCL_CONFIG_INITIALIZER, NCCL_CONFIG_INITIALIZER};
    for (int i = 0; i < 2; i++) {
        if (v->max_ctas) cfg[i].minCTAs = 1, cfg[i].maxCTAs = v->max_ctas;
        if (v->cta_policy >= 0) cfg[i].CTAPolicy = v->cta_policy;
    }
    CKN(ncclGetUniqueId(&id));
    CKN(ncclGroupStart());
    ncclResult_t r = ncclSuccess;
    for (int i = 0; i < 2 && r == ncclSuccess; i++) {
        CK(cudaSetDevice(b->dev[i]));
        r = ncclCommInitRankConfig(&b->comm[i], 2, id, i, &cfg[i]);
    }
    ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess || end != ncclSuccess) {
        nccl_why(why, n, "ncclCommInitRankConfig", r != ncclSuccess ? r : end);
        comms_abort(b);
        return 1;
    }
    return 0;
}

/* The registered variant's buffers: ncclMemAlloc on each side, the source's bytes copied in, each
 * registered with its side's communicator. 0, 1 (refused, why), -1 as comms_open. */
static int registered_open(bench_t *b, char *why, size_t n)
{
    ncclResult_t r;
    for (int i = 0; i < 2; i++) {
        CK(cudaSetDevice(b->dev[i]));
        if ((r = ncclMemAlloc(&b->reg[i], b->max_bytes)) != ncclSuccess) {
            nccl_why(why, n, "ncclMemAlloc", r);
            return 1;
        }
    }
    CK(cudaSetDevice(b->dev[0]));
    CK(cudaMemcpy(b->reg[0], b->buf[0], b->max_bytes, cudaMemcpyDefault));
    for (int i = 0; i < 2; i++) {
        CK(cudaSetDevice(b->dev[i]));
        r = ncclCommRegister(b->comm[i], b->reg[i], b->max_bytes, &b->reg_handle[i]);
        if (r != ncclSuccess) {
            nccl_why(why, n, "ncclCommRegister", r);
            return 1;
        }
        b->x[i] = b->reg[i];
    }
    return 0;
}

/* Undo variant_open, whatever part of it ran; `failed`: abort the communicators, ignore errors. */
static int variant_close(bench_t *b, int failed)
{
    int bad = 0;
    for (int i = 0; i < 2; i++)
        if (b->reg_handle[i] && !failed)
            bad |= ncclCommDeregister(b->comm[i], b->reg_handle[i]) != ncclSuccess;
    if (failed) comms_abort(b);
    for (int i = 0; i < 2; i++)
        if (b->comm[i]) bad |= ncclCommDestroy(b->comm[i]) != ncclSuccess;
    for (int i = 0; i < 2; i++) {
        cudaSetDevice(b->dev[i]);
        if (b->reg[i]) bad |= ncclMemFree(b->reg[i]) != ncclSuccess;
        if (b->xs[i]) bad |= cudaStreamDestroy(b->xs[i]) != cudaSuccess;
        b->comm[i] = NULL, b->reg[i] = b->reg_handle[i] = NULL, b->xs[i] = NULL;
    }
    b->v = NULL;
    if (bad && !failed)
        fprintf(stderr, BENCH_NAME ": closing a variant failed: %s\n", ncclGetLastError(NULL));
    return bad && !failed ? -1 : 0;
}

/* 0: open; 1: this machine or NCCL refuses the variant (why), nothing left open; -1: an error. */
static int variant_open(bench_t *b, const variant_t *v, char *why, size_t n)
{
    b->v = v;
    int r = streams_open(b, v->high_priority);
    if (r == 0 && !v->nccl && !b->peer_ok) {
        snprintf(why, n, "no peer access between GPU %d and GPU %d", b->dev[0], b->dev[1]);
        r = 1;
    }
    if (r == 0 && v->nccl) r = comms_open(b, why, n);
    if (r == 0 && v->registered) r = registered_open(b, why, n);
    if (r != 0) variant_close(b, 1);
    return r;
}

/* ---- transfers and windows ------------------------------------------------------------------- */

static int post_transfer(bench_t *b, size_t bytes)
{
    if (!b->v->nccl) {
        CK(cudaSetDevice(b->dev[0]));
        CK(cudaMemcpyAsync(b->x[1], b->x[0], bytes, cudaMemcpyDefault, b->xs[0]));
        return 0;
    }
    CKN(ncclGroupStart());
    CKN(ncclSend(b->x[0], bytes, ncclInt8, 1, b->comm[0], b->xs[0]));
    CKN(ncclRecv(b->x[1], bytes, ncclInt8, 0, b->comm[1], b->xs[1]));
    CKN(ncclGroupEnd());
    return 0;
}

/* The destination's stream waits for the source's half of what was posted. */
static int join_source(bench_t *b)
{
    CK(cudaSetDevice(b->dev[0]));
    CK(cudaEventRecord(b->sent, b->xs[0]));
    CK(cudaSetDevice(b->dev[1]));
    CK(cudaStreamWaitEvent(b->xs[1], b->sent, 0));
    return 0;
}

/* One window of n transfers between e0 and e1, behind a gate of gate_ns; *late: the gate had
 * opened before the host finished enqueueing. */
static int window(bench_t *b, size_t bytes, int n, long long gate_ns, cudaEvent_t e0,
                  cudaEvent_t e1, int *late)
{
    CK(cudaSetDevice(b->dev[1]));
    gate_kernel<<<1, 1, 0, b->xs[1]>>>(gate_ns);
    CK(cudaGetLastError());
    CK(cudaEventRecord(b->gate_ev[1], b->xs[1]));
    CK(cudaEventRecord(e0, b->xs[1]));
    CK(cudaSetDevice(b->dev[0]));
    CK(cudaStreamWaitEvent(b->xs[0], e0, 0));
    for (int k = 0; k < n; k++)
        if (post_transfer(b, bytes)) return -1;
    if (join_source(b)) return -1;
    CK(cudaEventRecord(e1, b->xs[1]));
    *late = gate_open(b, 1);
    return *late < 0 ? -1 : 0;
}

/* `windows` windows of n transfers (n = 0: empty) after WARMUP; us: each window's time per
 * transfer (n = 0: the whole window), sorted; *late: timed windows the host reached late. */
static int time_windows(bench_t *b, size_t bytes, int n, int windows, std::vector<float> &us,
                        int *late)
{
    const long long gate = b->lat_gate_ns * (n > 1 ? n : 1);
    *late = 0;
    for (int i = -WARMUP; i < windows; i++) {
        const size_t k = i < 0 ? 0 : (size_t)i;
        int l = 0;
        if (window(b, bytes, n, gate, b->e0[k], b->e1[k], &l)) return -1;
        if (i >= 0) *late += l;
    }
    if (wait_all(b, "timed windows")) return -1;
    us.resize((size_t)windows);
    CK(cudaSetDevice(b->dev[1]));
    for (int i = 0; i < windows; i++) {
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, b->e0[(size_t)i], b->e1[(size_t)i]));
        us[(size_t)i] = 1000.0f * ms / (float)(n > 1 ? n : 1);
    }
    std::sort(us.begin(), us.end());
    return 0;
}

static double pct(const std::vector<float> &v, int q)
{
    return v[(size_t)(q * (int)(v.size() - 1)) / 100];
}

/* ---- the GEMM beside the transfers ----------------------------------------------------------- */

static int gemm_loop(bench_t *b, int side)
{
    const float one = 1.0f, zero = 0.0f;
    CK(cudaSetDevice(b->dev[side]));
    CK(cudaEventRecord(b->g0[side], b->gemm_s[side]));
    for (int k = 0; k < GEMM_LOOP; k++)
        CKB(cublasGemmEx(b->blas[side], CUBLAS_OP_N, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one,
                         b->ga[side], CUDA_R_16BF, GEMM_N, b->gb[side], CUDA_R_16BF, GEMM_N, &zero,
                         b->gc[side], CUDA_R_16BF, GEMM_N, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    CK(cudaEventRecord(b->g1[side], b->gemm_s[side]));
    return 0;
}

/* Enqueue one loop on `side` and n_x transfers (0: none), all behind one gate on that side;
 * *enq_ms: the host's time enqueueing; *late as window's. */
static int gemm_enqueue(bench_t *b, int side, size_t bytes, int n_x, double *enq_ms, int *late)
{
    CK(cudaSetDevice(b->dev[side]));
    gate_kernel<<<1, 1, 0, b->gate_s[side]>>>(b->gemm_gate_ns);
    CK(cudaGetLastError());
    CK(cudaEventRecord(b->gate_ev[side], b->gate_s[side]));
    CK(cudaStreamWaitEvent(b->gemm_s[side], b->gate_ev[side], 0));
    for (int i = 0; i < 2 && n_x; i++) {
        CK(cudaSetDevice(b->dev[i]));
        CK(cudaStreamWaitEvent(b->xs[i], b->gate_ev[side], 0));
    }
    const double t0 = now_ms();
    if (gemm_loop(b, side)) return -1;
    for (int k = 0; k < n_x; k++)
        if (post_transfer(b, bytes)) return -1;
    if (n_x && side == 1 && join_source(b)) return -1;
    if (n_x) {
        CK(cudaSetDevice(b->dev[side]));
        CK(cudaEventRecord(b->xend[side], b->xs[side]));
    }
    *enq_ms = now_ms() - t0;
    *late = gate_open(b, side);
    return *late < 0 ? -1 : 0;
}

/* One loop (alone: n_x = 0); *ms its time; *covered: the transfers ran until it ended. A gate
 * shorter than twice the host's enqueueing grows (to GATE_MAX_NS) and the loop runs again, three
 * times at most; a gate that was long enough and still opened first (the host was held: a queue
 * was full) is counted in *late and kept. */
static int gemm_run(bench_t *b, int side, size_t bytes, int n_x, float *ms, int *covered, int *late)
{
    for (int attempt = 0;; attempt++) {
        double enq = 0;
        if (gemm_enqueue(b, side, bytes, n_x, &enq, late)) return -1;
        if (wait_all(b, "GEMM loop")) return -1;
        const long long want = (long long)(2e6 * enq) + 2000000;
        if (*late && attempt < 3 && b->gemm_gate_ns < want && b->gemm_gate_ns < GATE_MAX_NS) {
            b->gemm_gate_ns = want < GATE_MAX_NS ? want : GATE_MAX_NS;
            continue;
        }
        float to_end = 0;
        CK(cudaSetDevice(b->dev[side]));
        CK(cudaEventElapsedTime(ms, b->g0[side], b->g1[side]));
        if (n_x) CK(cudaEventElapsedTime(&to_end, b->g0[side], b->xend[side]));
        *covered = !n_x || to_end >= *ms;
        return 0;
    }
}

/* The slowdown of the loop on `side` beside transfers of `bytes` (b2b_us each, back to back): the
 * row's slow[side] and gemm_ms[side]. */
static int measure_slowdown(bench_t *b, int side, size_t bytes, double b2b_us, int reps, row_t *r)
{
    float ms = 0;
    int cov = 0, late = 0;
    std::vector<float> alone((size_t)reps), beside((size_t)reps);
    b->gemm_gate_ns = GATE_NS;
    if (gemm_run(b, side, bytes, 0, &ms, &cov, &late)) return -1; /* warm-up, and the length */
    int n_x = (int)ceil(2.0 * 1000.0 * ms / b2b_us) + 2;
    n_x = n_x < 4 ? 4 : n_x > MAX_X ? MAX_X : n_x;
    if (gemm_run(b, side, bytes, n_x, &ms, &cov, &late)) return -1;
    for (int k = 0; k < reps; k++) {
        if (gemm_run(b, side, bytes, 0, &alone[(size_t)k], &cov, &late)) return -1;
        r->late += late;
        for (int t = 0;; t++) {
            if (gemm_run(b, side, bytes, n_x, &beside[(size_t)k], &cov, &late)) return -1;
            if (cov || t == 2 || n_x >= MAX_X) break;
            n_x = 2 * n_x > MAX_X ? MAX_X : 2 * n_x;
        }
        r->late += late, r->uncovered += !cov;
    }
    std::sort(alone.begin(), alone.end());
    std::sort(beside.begin(), beside.end());
    r->gemm_ms[side][0] = pct(alone, 50), r->gemm_ms[side][1] = pct(beside, 50);
    r->slow[side] = 100.0 * (r->gemm_ms[side][1] / r->gemm_ms[side][0] - 1.0);
    return 0;
}

/* ---- a row ----------------------------------------------------------------------------------- */

/* The destination holds the source's first `bytes` (it was zeroed before the row). */
static int check_data(bench_t *b, size_t bytes)
{
    std::vector<unsigned char> h(bytes);
    CK(cudaSetDevice(b->dev[1]));
    CK(cudaMemcpy(h.data(), b->x[1], bytes, cudaMemcpyDefault));
    if (memcmp(h.data(), b->ref.data(), bytes) != 0) {
        fprintf(stderr,
                BENCH_NAME ": %s, %zu MiB: the destination does not hold the source's bytes\n",
                b->v->name, bytes >> 20);
        return -1;
    }
    return 0;
}

static int in_list(const int *list, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (list[i] == v) return 1;
    return 0;
}

static int measure_row(bench_t *b, int mib, const opts_t *o, row_t *r)
{
    const size_t bytes = (size_t)mib << 20;
    std::vector<float> us;
    int late = 0;
    r->mib = mib, r->supported = 1, r->slow[0] = r->slow[1] = NAN;
    CK(cudaSetDevice(b->dev[1]));
    CK(cudaMemsetAsync(b->x[1], 0, bytes, b->xs[1]));
    if (wait_all(b, "zeroing the destination")) return -1;
    for (int t = 0;; t++) { /* the gate grows while more than a tenth of the windows are late */
        if (time_windows(b, bytes, 1, o->iters, us, &late)) return -1;
        if (late * 10 <= o->iters || t == 3 || b->lat_gate_ns >= 5000000) break;
        b->lat_gate_ns *= 2;
    }
    r->us = pct(us, 50), r->p10 = pct(us, 10), r->p90 = pct(us, 90), r->late = late;
    if (time_windows(b, bytes, B2B, B2B_WINDOWS, us, &late)) return -1;
    r->b2b_us = pct(us, 50), r->late += late;
    if (check_data(b, bytes)) return -1;
    for (int side = 0; side < 2 && in_list(o->slow, o->n_slow, mib); side++)
        if (measure_slowdown(b, side, bytes, r->b2b_us, o->reps, r)) return -1;
    return 0;
}

/* ---- output and main ------------------------------------------------------------------------ */

/* Devices, their link, the libraries' versions, the method. */
static int print_preamble(const bench_t *b, const opts_t *o, cudaDeviceProp prop[2])
{
    int rt = 0, drv = 0, nv = 0, blas = 0, rank = 0, atom = 0;
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaDriverGetVersion(&drv));
    CKN(ncclGetVersion(&nv));
    CKB(cublasGetVersion(b->blas[0], &blas));
    CK(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, o->src, o->dst));
    CK(cudaDeviceGetP2PAttribute(&atom, cudaDevP2PAttrNativeAtomicSupported, o->src, o->dst));
    printf("# bench_p2p: one boundary, GPU %d -> GPU %d, every transport and knob; %d windows "
           "after %d a row, %d back to back x %d, GEMM slowdown median of %d\n",
           o->src, o->dst, o->iters, WARMUP, B2B, B2B_WINDOWS, o->reps);
    for (int i = 0; i < 2; i++) {
        char pci[32];
        CK(cudaDeviceGetPCIBusId(pci, sizeof pci, b->dev[i]));
        printf("# GPU %d (%s): %s, PCI %s, %d SMs\n", b->dev[i], i ? "destination" : "source",
               prop[i].name, pci, prop[i].multiProcessorCount);
    }
    printf("# link: peer access %s, performance rank %d, native atomics %s\n",
           b->peer_ok ? "both ways" : "NO", rank, atom ? "yes" : "no");
    printf("# CUDA runtime %d.%d, driver %d.%d, NCCL %d.%d.%d, cuBLAS %d; NCCL_NVLS_ENABLE=%s\n",
           rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10, nv / 10000, nv % 10000 / 100,
           nv % 100, blas, getenv("NCCL_NVLS_ENABLE"));
    printf("# latency: a window on GPU %d's stream (e0; GPU %d waits on it; the transfer; GPU %d "
           "waits on GPU %d's half; e1) behind a spin gate; GB/s = bytes / median\n",
           o->dst, o->src, o->dst, o->src);
    printf("# GEMM: %d x bf16 %d^3 (fp32 compute) on its own normal-priority stream, alone and "
           "beside transfers back to back, at (MiB):",
           GEMM_LOOP, GEMM_N);
    for (int i = 0; i < o->n_slow; i++)
        printf("%s %d", i ? "," : "", o->slow[i]);
    printf("%s\n", o->n_slow ? "" : " none");
    printf("# not measured: a staged peer copy (cudaMemcpyPeerAsync without peer access cannot be "
           "forced once access is enabled)\n");
    return 0;
}

static void usage(FILE *f, int full)
{
    fprintf(f,
            "usage: bench_p2p [--src N] [--dst N] [--sizes MIB,...] [--iters N] "
            "[--variants NAME,...]\n"
            "                 [--slowdown MIB,...|none] [--reps N]%s\n",
            full ? "\n" : "   (--help: what each means)");
    if (!full) return;
    fprintf(f, ""
               "  --src, --dst  the boundary's GPUs (0, 1)\n"
               "  --sizes       transfer sizes in MiB (1,2,4,8,16,32,64)\n"
               "  --iters       timed windows a row, after 3 (50)\n"
               "  --variants    which rows (all):\n");
    for (int i = 0; i < N_VARIANTS; i++)
        fprintf(f, "                  %-16s %s, %s\n", VARIANTS[i].name, VARIANTS[i].transport,
                VARIANTS[i].knob);
    fprintf(f, "  --slowdown    sizes (MiB, among --sizes) that also time a GEMM beside the "
               "transfers (16,64)\n"
               "  --reps        GEMM loops alone and beside, each (5)\n\n"
               "exit status: 0 ok, 1 a CUDA, cuBLAS or NCCL error or wrong bytes delivered, 2 bad "
               "usage or fewer than 2 GPUs\n");
}

/* A comma list of integers in [lo, hi] into out (at most n); the count, or -1. */
static int parse_ints(const char *s, int *out, int n, int lo, int hi)
{
    int k = 0;
    while (*s) {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || k == n || (*end && *end != ',')) return -1;
        out[k++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return k;
}

static int parse_variants(const char *s, int *use)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    memset(use, 0, sizeof(int) * N_VARIANTS);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int i = 0;
        while (i < N_VARIANTS && strcmp(VARIANTS[i].name, t))
            i++;
        if (i == N_VARIANTS) return -1;
        use[i] = 1;
    }
    return 0;
}

/* One option and its value into o; 0 if the option is unknown or its value bad. */
static int parse_opt(const char *a, const char *v, opts_t *o)
{
    if (!strcmp(a, "--src")) return parse_ints(v, &o->src, 1, 0, 1023) == 1;
    if (!strcmp(a, "--dst")) return parse_ints(v, &o->dst, 1, 0, 1023) == 1;
    if (!strcmp(a, "--iters")) return parse_ints(v, &o->iters, 1, 1, 100000) == 1;
    if (!strcmp(a, "--reps")) return parse_ints(v, &o->reps, 1, 1, 1000) == 1;
    if (!strcmp(a, "--sizes"))
        return (o->n_sizes = parse_ints(v, o->sizes, MAX_SIZES, 1, 4096)) > 0;
    if (!strcmp(a, "--variants")) return parse_variants(v, o->use) == 0;
    if (!strcmp(a, "--slowdown") && !strcmp(v, "none")) return o->n_slow = 0, 1;
    if (!strcmp(a, "--slowdown"))
        return (o->n_slow = parse_ints(v, o->slow, MAX_SIZES, 1, 4096)) > 0;
    return 0;
}

/* 0: parsed; 1: --help (printed); 2: bad usage (said). */
static int parse_args(int argc, char **argv, opts_t *o)
{
    static const int sizes[] = {1, 2, 4, 8, 16, 32, 64};
    memset(o, 0, sizeof *o);
    o->dst = 1, o->iters = 50, o->reps = 5, o->n_sizes = 7, o->n_slow = 2;
    memcpy(o->sizes, sizes, sizeof sizes);
    o->slow[0] = 16, o->slow[1] = 64;
    for (int i = 0; i < N_VARIANTS; i++)
        o->use[i] = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout, 1), 1;
        if (!v || !parse_opt(a, v, o)) {
            fprintf(stderr, BENCH_NAME ": bad option or value: %s%s%s\n", a, v ? " " : "",
                    v ? v : "");
            usage(stderr, 0);
            return 2;
        }
        i++;
    }
    if (o->src == o->dst) {
        fprintf(stderr, BENCH_NAME ": --src and --dst are both GPU %d: a boundary joins two GPUs\n",
                o->src);
        return 2;
    }
    return 0;
}

/* Every size of one variant (or its one unsupported row) into rows, printed as they come. */
static int run_variant(bench_t *b, const variant_t *v, const opts_t *o, std::vector<row_t> &rows)
{
    row_t r;
    memset(&r, 0, sizeof r);
    r.variant = v->name, r.transport = v->transport, r.knob = v->knob;
    g_doing = v->name;
    alarm(VARIANT_S);
    int st = variant_open(b, v, r.why, sizeof r.why);
    if (st < 0) return -1;
    if (st > 0) {
        rows.push_back(r);
        p2p_report_line(&r);
        alarm(0);
        return 0;
    }
    for (int k = 0; k < o->n_sizes; k++) {
        row_t x = r;
        if (measure_row(b, o->sizes[k], o, &x)) {
            variant_close(b, 1);
            return -1;
        }
        rows.push_back(x);
        p2p_report_line(&x);
    }
    st = variant_close(b, 0);
    alarm(0);
    return st;
}

/* The window with nothing in it, on plain streams: what every latency includes. */
static int window_alone(bench_t *b, int iters, double *us)
{
    static const variant_t none = {"window", "-", "empty window", 0, 0, -1, 0, 0};
    std::vector<float> t;
    int late = 0;
    b->v = &none;
    if (streams_open(b, 0) || time_windows(b, 0, 0, iters, t, &late)) return -1;
    *us = pct(t, 50);
    return variant_close(b, 0);
}

/* Exit code 2 unless both GPUs are there; their properties into prop. */
static int check_gpus(const opts_t *o, cudaDeviceProp prop[2])
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 2) {
        fprintf(stderr, BENCH_NAME ": %d GPU%s visible%s%s: a boundary needs 2\n",
                e == cudaSuccess ? n : 0, n == 1 ? "" : "s", e == cudaSuccess ? "" : ": ",
                e == cudaSuccess ? "" : cudaGetErrorString(e));
        return 2;
    }
    if (o->src >= n || o->dst >= n) {
        fprintf(stderr, BENCH_NAME ": --src %d --dst %d: only GPUs 0..%d are visible\n", o->src,
                o->dst, n - 1);
        return 2;
    }
    if (cudaGetDeviceProperties(&prop[0], o->src) != cudaSuccess ||
        cudaGetDeviceProperties(&prop[1], o->dst) != cudaSuccess) {
        fprintf(stderr, BENCH_NAME ": cannot read GPU %d or %d\n", o->src, o->dst);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    int st = parse_args(argc, argv, &o);
    if (st) return st == 1 ? 0 : 2;
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    cudaDeviceProp prop[2];
    if ((st = check_gpus(&o, prop)) != 0) return st;
    signal(SIGALRM, on_alarm);
    alarm(VARIANT_S); /* the setup and the empty window */
    bench_t b{};
    std::vector<row_t> rows;
    double window_us = 0;
    st =
        bench_init(&b, &o) || print_preamble(&b, &o, prop) || window_alone(&b, o.iters, &window_us);
    if (!st) {
        printf("# the window alone (no transfer): median %.2f us, part of every latency below\n",
               window_us);
        p2p_report_header();
    }
    for (int i = 0; i < N_VARIANTS && !st; i++)
        if (o.use[i]) st = run_variant(&b, &VARIANTS[i], &o, rows);
    if (!st)
        for (size_t k = 0; k < rows.size(); k++)
            p2p_report_json(&rows[k], prop[0].name, o.src, o.dst, window_us);
    bench_free(&b);
    return st ? 1 : 0;
}
