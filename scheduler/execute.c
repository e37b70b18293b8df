/*
 * execute.c — run a lowered plan on the GPUs (see execute.h).
 *
 * Set-up (before any step): stages are built on their devices with the slot counts the plan
 * asks for, after checking that they fit; one stream per role per device (send and recv at the
 * higher priority); one completion event per op (plus a start event when timing is on); peer
 * access and, for the nccl transport, the communicators.
 *
 * A step: device 0 records a `go` event that every stream of every device waits on, then each
 * device records its reference event `ref[d]`; op times are elapsed times from ref[d] on the
 * op's own device, so all devices share one time axis to within the cross-device event latency
 * (measured at start-up and reported as the skew). The host enqueues every op in plan order:
 * it makes the op's stream wait on the completion events of its dependencies on other streams,
 * records start, enqueues the work, records completion. A `peer`/`local` transfer is one copy on
 * the sender's send stream that also waits for the receiver's slot (the RECV's dependencies);
 * the RECV then completes with that copy. An `nccl` transfer posts the send and the receive in
 * one group. The host synchronizes once per step, polling with a timeout, to read the times.
 */
#ifndef PP_WITH_NCCL
#define PP_WITH_NCCL
#endif
#include "execute.h"

#include "../common/pp_cuda.h"
#include "../p2p/p2p.h"
#include "../stages/stage.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct exec {
    const pp_plan_t *plan;
    const pp_config_t *cfg;
    pp_exec_opts_t opts;
    int p;                    /* pipeline devices */
    int cuda[PP_MAX_DEVICES]; /* CUDA ordinal of each */
    cudaStream_t stream[PP_MAX_DEVICES][PP_ROLE_COUNT];
    pp_stage_t **stages;  /* [n_stages] */
    pp_stage_cfg_t *scfg; /* [n_stages] */
    pp_p2p_t *p2p;
    cudaEvent_t *ev_start;                           /* [n_ops], timing only */
    cudaEvent_t *ev_end;                             /* [n_ops], timing only */
    cudaEvent_t *ev_dep;                             /* [n_ops]: completion, for dependencies */
    int *done_op;                                    /* [n_ops]: op whose events signal op i done */
    cudaEvent_t go;                                  /* on device 0: the step's fork */
    cudaEvent_t ref[PP_MAX_DEVICES];                 /* device d's time origin (timing) */
    cudaEvent_t fork[PP_MAX_DEVICES];                /* send/recv streams start after it */
    cudaEvent_t tail[PP_MAX_DEVICES][PP_ROLE_COUNT]; /* send/recv joins into compute */
    cudaEvent_t stop[PP_MAX_DEVICES];                /* device d's end of step (timing) */
    cudaEvent_t join[PP_MAX_DEVICES];  /* device d's end of step, joined by device 0 */
    int *counters_host;                /* pinned [2]: data index base, optimizer step */
    int *counters_dev[PP_MAX_DEVICES]; /* device copies, read by the stages' kernels */
    int capturing;                     /* 1 while a step is being captured */
    cudaGraph_t graph;                 /* the captured step (graph mode) */
    cudaGraphExec_t gexec;
} exec_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int execute_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

void execute_describe_devices(char *buf, size_t size)
{
    int n = execute_device_count();
    if (n == 0) {
        snprintf(buf, size, "no CUDA device");
        return;
    }
    struct cudaDeviceProp prop;
    int drv = 0;
    cudaDriverGetVersion(&drv);
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        snprintf(buf, size, "%d CUDA devices", n);
        return;
    }
    snprintf(buf, size, "%dx %s (%.0f GiB, %d SMs), CUDA driver %d.%d", n, prop.name,
             (double)prop.totalGlobalMem / (1u << 30), prop.multiProcessorCount, drv / 1000,
             (drv % 1000) / 10);
}

/* ---------------------------------------------------------------------------------------------
 * Set-up and tear-down
 * ------------------------------------------------------------------------------------------- */

static void exec_free(exec_t *x)
{
    if (x->gexec) cudaGraphExecDestroy(x->gexec);
    if (x->graph) cudaGraphDestroy(x->graph);
    if (x->ev_end || x->ev_start || x->ev_dep) {
        for (int i = 0; i < x->plan->n_ops; i++) {
            if (x->ev_end && x->ev_end[i]) cudaEventDestroy(x->ev_end[i]);
            if (x->ev_start && x->ev_start[i]) cudaEventDestroy(x->ev_start[i]);
            if (x->ev_dep && x->ev_dep[i]) cudaEventDestroy(x->ev_dep[i]);
        }
    }
    free(x->ev_end);
    free(x->ev_start);
    free(x->ev_dep);
    free(x->done_op);
    if (x->go) cudaEventDestroy(x->go);
    if (x->counters_host) cudaFreeHost(x->counters_host);
    for (int d = 0; d < x->p; d++) {
        cudaSetDevice(x->cuda[d]);
        if (x->ref[d]) cudaEventDestroy(x->ref[d]);
        if (x->fork[d]) cudaEventDestroy(x->fork[d]);
        if (x->stop[d]) cudaEventDestroy(x->stop[d]);
        if (x->join[d]) cudaEventDestroy(x->join[d]);
        if (x->counters_dev[d]) cudaFree(x->counters_dev[d]);
        for (int r = 0; r < PP_ROLE_COUNT; r++) {
            if (x->tail[d][r]) cudaEventDestroy(x->tail[d][r]);
            if (x->stream[d][r]) cudaStreamDestroy(x->stream[d][r]);
        }
    }
    if (x->stages) {
        for (int s = 0; s < x->plan->n_stages; s++) {
            if (!x->stages[s]) continue;
            cudaSetDevice(x->cuda[x->plan->stage_device[s]]);
            stage_free(x->stages[s]);
        }
    }
    free(x->stages);
    free(x->scfg);
    p2p_free(x->p2p);
}

/* The stage configuration of global stage s. */
static void stage_cfg_for(pp_stage_cfg_t *c, const pp_config_t *cfg, const pp_plan_t *plan, int s)
{
    int lps = cfg->model.layers / plan->n_stages;
    memset(c, 0, sizeof *c);
    c->hidden = cfg->model.hidden;
    c->heads = cfg->model.heads;
    c->seq_len = cfg->model.seq_len;
    c->vocab = cfg->model.vocab;
    c->micro_batch_size = cfg->pipeline.micro_batch_size;
    c->n_layers = lps;
    c->first_layer = s * lps;
    c->total_layers = cfg->model.layers;
    c->is_first = s == 0;
    c->is_last = s == plan->n_stages - 1;
    c->dtype = cfg->model.dtype;
    c->seed = cfg->run.seed;
    c->n_slots = plan->slots_per_stage[s];
    c->with_optimizer = cfg->run.optimizer == PP_OPT_ADAMW;
    c->grad_scale = 1.0f / (float)plan->n_mb;
}

/* Checks that every device can hold its stages; prints a table of needs when one cannot. */
static pp_status_t check_fit(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    size_t need[PP_MAX_DEVICES] = {0}, free_b[PP_MAX_DEVICES] = {0}, total_b[PP_MAX_DEVICES] = {0};
    /* NCCL keeps its own buffers per peer; leave room for them and for the CUDA context. */
    const size_t reserve = (size_t)512 << 20;
    int ok = 1;
    for (int s = 0; s < plan->n_stages; s++) {
        const pp_stage_cfg_t *c = &x->scfg[s];
        need[plan->stage_device[s]] += stage_state_bytes(c) + stage_workspace_bytes(c) +
                                       (size_t)c->n_slots * stage_slot_bytes(c);
    }
    for (int d = 0; d < x->p; d++) {
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        PP_CUDA_CHECK(cudaMemGetInfo(&free_b[d], &total_b[d]));
        if (need[d] + reserve > free_b[d]) ok = 0;
    }
    if (ok) return PP_OK;
    fprintf(stderr, "ppsched: the plan does not fit in device memory:\n");
    fprintf(stderr, "  %-8s %-6s %12s %12s %12s\n", "device", "cuda", "needs (GiB)", "free (GiB)",
            "total (GiB)");
    for (int d = 0; d < x->p; d++)
        fprintf(stderr, "  %-8d %-6d %12.2f %12.2f %12.2f%s\n", d, x->cuda[d],
                (double)(need[d] + reserve) / (1u << 30), (double)free_b[d] / (1u << 30),
                (double)total_b[d] / (1u << 30),
                need[d] + reserve > free_b[d] ? "  <- too small" : "");
    fprintf(
        stderr,
        "  (needs = parameters, gradients, optimizer state, workspace and %s activation slots,\n"
        "   plus %.1f GiB for the CUDA context and NCCL; fewer micro-batches in flight, a\n"
        "   smaller micro_batch_size or more devices would fit)\n",
        "the schedule's", (double)reserve / (1u << 30));
    return PP_ERR_DEVICE;
}

static pp_status_t exec_init(exec_t *x, const pp_plan_t *plan, const pp_config_t *cfg,
                             const pp_exec_opts_t *opts)
{
    pp_status_t st = PP_OK;
    memset(x, 0, sizeof *x);
    x->plan = plan;
    x->cfg = cfg;
    x->opts = *opts;
    x->p = plan->n_devices;
    int n_vis = execute_device_count();
    if (n_vis == 0)
        PP_FAIL(PP_ERR_DEVICE, "no CUDA device is visible: nothing to run on (use --simulate)");
    for (int d = 0; d < x->p; d++) {
        x->cuda[d] = cfg->pipeline.device_ids[d];
        if (x->cuda[d] < 0 || x->cuda[d] >= n_vis)
            PP_FAIL(PP_ERR_DEVICE, "pipeline device %d is CUDA device %d, but only %d are visible",
                    d, x->cuda[d], n_vis);
    }
    if (cfg->model.layers % plan->n_stages != 0)
        PP_FAIL(PP_ERR_INTERNAL, "%d layers do not split into %d stages", cfg->model.layers,
                plan->n_stages);

    x->stages = calloc((size_t)plan->n_stages, sizeof *x->stages);
    x->scfg = calloc((size_t)plan->n_stages, sizeof *x->scfg);
    x->ev_end = calloc((size_t)plan->n_ops, sizeof *x->ev_end);
    x->ev_start = calloc((size_t)plan->n_ops, sizeof *x->ev_start);
    x->ev_dep = calloc((size_t)plan->n_ops, sizeof *x->ev_dep);
    x->done_op = malloc(sizeof(int) * (size_t)plan->n_ops);
    if (!x->stages || !x->scfg || !x->ev_end || !x->ev_start || !x->ev_dep || !x->done_op) {
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto fail;
    }
    for (int s = 0; s < plan->n_stages; s++)
        stage_cfg_for(&x->scfg[s], cfg, plan, s);
    if (plan->n_stages > 0 && stage_boundary_bytes(&x->scfg[0]) != plan->boundary_bytes) {
        fprintf(stderr, "%s:%d: plan boundary %zu bytes, stage boundary %zu bytes\n", __FILE__,
                __LINE__, plan->boundary_bytes, stage_boundary_bytes(&x->scfg[0]));
        st = PP_ERR_INTERNAL;
        goto fail;
    }
    PP_CHECK_GOTO(check_fit(x), st, fail);

    /* Streams: communication at the greatest priority (numerically the least). */
    for (int d = 0; d < x->p; d++) {
        int lo, hi;
        PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[d]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaDeviceGetStreamPriorityRange(&lo, &hi), st, fail);
        PP_CUDA_CHECK_GOTO(
            cudaStreamCreateWithPriority(&x->stream[d][PP_ROLE_COMPUTE], cudaStreamNonBlocking, lo),
            st, fail);
        PP_CUDA_CHECK_GOTO(
            cudaStreamCreateWithPriority(&x->stream[d][PP_ROLE_SEND], cudaStreamNonBlocking, hi),
            st, fail);
        PP_CUDA_CHECK_GOTO(
            cudaStreamCreateWithPriority(&x->stream[d][PP_ROLE_RECV], cudaStreamNonBlocking, hi),
            st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventCreate(&x->ref[d]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventCreate(&x->stop[d]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&x->fork[d], cudaEventDisableTiming), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&x->join[d], cudaEventDisableTiming), st, fail);
        for (int r = 0; r < PP_ROLE_COUNT; r++)
            PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&x->tail[d][r], cudaEventDisableTiming), st,
                               fail);
        PP_CUDA_CHECK_GOTO(cudaMalloc((void **)&x->counters_dev[d], 2 * sizeof(int)), st, fail);
        PP_CUDA_CHECK_GOTO(cudaMemset(x->counters_dev[d], 0, 2 * sizeof(int)), st, fail);
    }
    PP_CUDA_CHECK_GOTO(
        cudaHostAlloc((void **)&x->counters_host, 2 * sizeof(int), cudaHostAllocPortable), st,
        fail);
    x->counters_host[0] = 0;
    x->counters_host[1] = 1;
    PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[0]), st, fail);
    PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&x->go, cudaEventDisableTiming), st, fail);

    /* Events of every op, created on the device whose stream records them. */
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *op = &plan->ops[i];
        x->done_op[i] = i;
        if (op->kind == PP_ACT_RECV_F || op->kind == PP_ACT_RECV_B) {
            /* Where the send half moves the bytes, the RECV completes with the SEND. */
            if (transport_row(op->link)->send_moves_bytes) x->done_op[i] = op->peer;
        }
        PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[op->device]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&x->ev_dep[i], cudaEventDisableTiming), st,
                           fail);
        if (opts->timing) {
            PP_CUDA_CHECK_GOTO(cudaEventCreate(&x->ev_start[i]), st, fail);
            PP_CUDA_CHECK_GOTO(cudaEventCreate(&x->ev_end[i]), st, fail);
        }
    }

    /* Transports. */
    unsigned used = 0;
    for (int i = 0; i < plan->n_ops; i++)
        used |= 1u << plan->ops[i].link;
    PP_CHECK_GOTO(p2p_init(&x->p2p, x->p, x->cuda, used), st, fail);

    /* Stages. */
    for (int s = 0; s < plan->n_stages; s++) {
        PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[plan->stage_device[s]]), st, fail);
        PP_CHECK_GOTO(stage_init(&x->stages[s], &x->scfg[s]), st, fail);
        int *ctr = x->counters_dev[plan->stage_device[s]];
        PP_CHECK_GOTO(stage_bind_counters(x->stages[s], ctr, ctr + 1), st, fail);
    }
    for (int d = 0; d < x->p; d++) {
        PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[d]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaDeviceSynchronize(), st, fail);
    }
    return PP_OK;
fail:
    exec_free(x);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bound the misalignment of the devices' time origins: device 0 signals every device the way a
 * step starts, each signals back, and device 0 times the round trip. Each ref[d] is recorded
 * within one one-way latency of `go`, so the round trip bounds the skew. Median of 9 tries. */
static pp_status_t measure_skew(exec_t *x, double *skew_ms)
{
    enum { TRIES = 9 };
    double v[TRIES];
    cudaEvent_t e0 = NULL, e1 = NULL, back[PP_MAX_DEVICES] = {0};
    pp_status_t st = PP_OK;
    *skew_ms = 0;
    if (x->p < 2) return PP_OK;
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[0]));
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e0), st, fail);
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e1), st, fail);
    for (int d = 1; d < x->p; d++) {
        PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[d]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&back[d], cudaEventDisableTiming), st, fail);
    }
    for (int k = 0; k < TRIES; k++) {
        cudaStream_t c0 = x->stream[0][PP_ROLE_COMPUTE];
        PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[0]), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(e0, c0), st, fail);
        PP_CUDA_CHECK_GOTO(cudaEventRecord(x->go, c0), st, fail);
        for (int d = 1; d < x->p; d++) {
            PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[d]), st, fail);
            PP_CUDA_CHECK_GOTO(cudaStreamWaitEvent(x->stream[d][PP_ROLE_COMPUTE], x->go, 0), st,
                               fail);
            PP_CUDA_CHECK_GOTO(cudaEventRecord(back[d], x->stream[d][PP_ROLE_COMPUTE]), st, fail);
        }
        PP_CUDA_CHECK_GOTO(cudaSetDevice(x->cuda[0]), st, fail);
        for (int d = 1; d < x->p; d++)
            PP_CUDA_CHECK_GOTO(cudaStreamWaitEvent(c0, back[d], 0), st, fail);
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
    for (int d = 1; d < x->p; d++) {
        if (!back[d]) continue;
        cudaSetDevice(x->cuda[d]);
        cudaEventDestroy(back[d]);
    }
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * One step
 * ------------------------------------------------------------------------------------------- */

/* The stream an op runs on: its role's stream, or the compute stream in --sync mode. */
static cudaStream_t op_stream(const exec_t *x, const pp_op_t *op)
{
    return x->opts.sync ? x->stream[op->device][PP_ROLE_COMPUTE] : x->stream[op->device][op->role];
}

/* Make `stream` (of op `self`) wait for every dependency of op `i` that runs elsewhere. */
static pp_status_t wait_deps(exec_t *x, int i, int skip, cudaStream_t stream)
{
    const pp_plan_t *plan = x->plan;
    const pp_op_t *op = &plan->ops[i];
    for (int k = 0; k < op->n_deps; k++) {
        int dep = plan->deps[op->dep_begin + k];
        if (dep == skip) continue;
        int src = x->done_op[dep];
        if (op_stream(x, &plan->ops[src]) == stream) continue; /* FIFO on the same stream */
        PP_CUDA_CHECK(cudaStreamWaitEvent(stream, x->ev_dep[src], 0));
    }
    return PP_OK;
}

/* Timing events are recorded as external event nodes when captured, so they record (and can be
 * timed) at every replay; dependency events become the graph's edges. Outside a capture the
 * external flag is refused, so it is given only while capturing. */
static cudaError_t record_timing(const exec_t *x, cudaEvent_t ev, cudaStream_t stream)
{
    return x->capturing ? cudaEventRecordWithFlags(ev, stream, cudaEventRecordExternal)
                        : cudaEventRecord(ev, stream);
}

static pp_status_t record_start(exec_t *x, int i, cudaStream_t stream)
{
    if (x->opts.timing) PP_CUDA_CHECK(record_timing(x, x->ev_start[i], stream));
    return PP_OK;
}

static pp_status_t record_end(exec_t *x, int i, cudaStream_t stream)
{
    PP_CUDA_CHECK(cudaEventRecord(x->ev_dep[i], stream));
    if (x->opts.timing) PP_CUDA_CHECK(record_timing(x, x->ev_end[i], stream));
    return PP_OK;
}

/* Wait until `ev` completes or the timeout passes. Returns PP_OK, PP_ERR_TIMEOUT (no message),
 * or a CUDA error (printed). */
static pp_status_t poll_event(cudaEvent_t ev, double deadline)
{
    struct timespec pause = {0, 20000};
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return PP_OK;
        if (e != cudaErrorNotReady) {
            fprintf(stderr, "%s:%d: the step failed on the GPU: %s (%s)\n", __FILE__, __LINE__,
                    cudaGetErrorString(e), cudaGetErrorName(e));
            return PP_ERR_CUDA;
        }
        if (now_s() > deadline) return PP_ERR_TIMEOUT;
        nanosleep(&pause, NULL);
    }
}

/* Whether op i has completed: its timing event where there is one (recorded at every replay),
 * else its dependency event (recorded only by eager steps). */
static int op_done(exec_t *x, int i)
{
    int src = x->done_op[i];
    cudaEvent_t ev = x->opts.timing ? x->ev_end[src] : x->ev_dep[src];
    return cudaEventQuery(ev) == cudaSuccess;
}

/* After a timeout: name the first unfinished op of every device, then abort NCCL. */
static void report_pending(exec_t *x, int step, double timeout_s)
{
    const pp_plan_t *plan = x->plan;
    char txt[32];
    fprintf(stderr, "ppsched: step %d did not finish within %.1f s; still pending:\n", step,
            timeout_s);
    if (x->gexec && !x->opts.timing)
        fprintf(stderr, "  (a replayed graph with timing off cannot name its ops: rerun with "
                        "--set run.graph=off or run.timing=on)\n");
    for (int d = 0; d < plan->n_devices; d++) {
        for (int k = plan->prog_begin[d]; k < plan->prog_begin[d + 1]; k++) {
            int i = plan->prog_ops[k];
            const pp_op_t *op = &plan->ops[i];
            if (op_done(x, i)) continue;
            pp_action_t a = {op->kind, op->stage, op->mb};
            fprintf(stderr, "  device %d (cuda %d), step %d, action %s on the %s stream", d,
                    x->cuda[d], op->pos, action_format(&a, txt, sizeof txt),
                    pp_role_name(op->role));
            for (int j = 0; j < op->n_deps; j++) {
                int dep = plan->deps[op->dep_begin + j];
                if (op_done(x, dep)) continue;
                const pp_op_t *o2 = &plan->ops[dep];
                pp_action_t b = {o2->kind, o2->stage, o2->mb};
                fprintf(stderr, ", waiting for %s on device %d", action_format(&b, txt, sizeof txt),
                        o2->device);
                break;
            }
            fputc('\n', stderr);
            break;
        }
    }
    (void)cudaGetLastError();
    p2p_abort(x->p2p);
}

/* Enqueue one compute op on its stage. */
static pp_status_t run_compute(exec_t *x, const pp_op_t *op, int data_mb, cudaStream_t s)
{
    pp_stage_t *st = x->stages[op->stage];
    switch (op->kind) {
    case PP_ACT_F: return stage_forward(st, op->slot, data_mb, s);
    case PP_ACT_B: return stage_backward(st, op->slot, data_mb, s);
    case PP_ACT_I: return stage_backward_input(st, op->slot, data_mb, s);
    case PP_ACT_W: return stage_backward_weight(st, op->slot, data_mb, s);
    default: break;
    }
    PP_FAIL(PP_ERR_INTERNAL, "run_compute: op kind %d is not compute", (int)op->kind);
}

/* Source and destination of a transfer whose SEND is `snd` and RECV `rcv`. */
static void transfer_buffers(exec_t *x, const pp_op_t *snd, const pp_op_t *rcv, const void **src,
                             void **dst)
{
    if (snd->kind == PP_ACT_SEND_F) {
        *src = stage_slot_y(x->stages[snd->stage], snd->slot);
        *dst = stage_slot_x(x->stages[rcv->stage], rcv->slot);
    } else {
        *src = stage_slot_dx(x->stages[snd->stage], snd->slot);
        *dst = stage_slot_dy(x->stages[rcv->stage], rcv->slot);
    }
}

/* In --sync mode: wait for op i right away (the naive executor's host synchronization). */
static pp_status_t sync_op(exec_t *x, int i, double deadline, int step)
{
    if (!x->opts.sync) return PP_OK;
    pp_status_t st = poll_event(x->ev_dep[i], deadline);
    if (st == PP_ERR_TIMEOUT) report_pending(x, step, x->opts.timeout_s);
    return st;
}

/* One transfer: SEND op i and its RECV, posted as the halves of their transport (transport.h).
 * Where the send half moves the bytes, it is one copy on the sender's stream that waits for the
 * producer and for the receiver's slot (the RECV's dependencies), and the RECV completes with it.
 * Otherwise each half runs on its own op's stream after its own dependencies, both posted inside
 * one pairing bracket (one NCCL group, since this thread posts both). */
static pp_status_t enqueue_transfer(exec_t *x, int i, double deadline, int step)
{
    const pp_op_t *op = &x->plan->ops[i];
    const int r = op->peer;
    const pp_op_t *rcv = &x->plan->ops[r];
    const pp_transport_t t = op->link;
    cudaStream_t ss = op_stream(x, op), rs = op_stream(x, rcv);
    const void *src;
    void *dst;
    transfer_buffers(x, op, rcv, &src, &dst);
    p2p_xfer_t xf = {dst, rcv->device, src, op->device, op->bytes};
    if (transport_row(t)->send_moves_bytes) {
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[op->device]));
        PP_CHECK(wait_deps(x, i, -1, ss));
        PP_CHECK(wait_deps(x, r, i, ss));
        PP_CHECK(record_start(x, i, ss));
        PP_CHECK(p2p_post_send(x->p2p, t, &xf, ss));
        PP_CHECK(p2p_post_recv(x->p2p, t, &xf, rs)); /* posts nothing */
        PP_CHECK(record_end(x, i, ss));
        return sync_op(x, i, deadline, step);
    }
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[op->device]));
    PP_CHECK(wait_deps(x, i, -1, ss));
    PP_CHECK(record_start(x, i, ss));
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[rcv->device]));
    PP_CHECK(wait_deps(x, r, i, rs));
    PP_CHECK(record_start(x, r, rs));
    PP_CHECK(p2p_pair_begin(x->p2p, t));
    pp_status_t st = p2p_post_send(x->p2p, t, &xf, ss);
    if (st == PP_OK) st = p2p_post_recv(x->p2p, t, &xf, rs);
    pp_status_t end = p2p_pair_end(x->p2p, t); /* the group closes also after a failure */
    PP_CHECK(st);
    PP_CHECK(end);
    PP_CHECK(record_end(x, r, rs));
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[op->device]));
    PP_CHECK(record_end(x, i, ss));
    PP_CHECK(sync_op(x, i, deadline, step));
    return sync_op(x, r, deadline, step);
}

static pp_status_t enqueue_step(exec_t *x, int step, double deadline)
{
    const pp_plan_t *plan = x->plan;
    const int m = plan->n_mb;

    /* Every stream of every device starts after `go`; ref[d] is device d's time origin. Each
     * device first copies the step's counters (data index base, optimizer step) from the host. */
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[0]));
    PP_CUDA_CHECK(cudaEventRecord(x->go, x->stream[0][PP_ROLE_COMPUTE]));
    for (int d = 0; d < x->p; d++) {
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        cudaStream_t c = x->stream[d][PP_ROLE_COMPUTE];
        if (d > 0) PP_CUDA_CHECK(cudaStreamWaitEvent(c, x->go, 0));
        PP_CUDA_CHECK(record_timing(x, x->ref[d], c));
        PP_CUDA_CHECK(cudaMemcpyAsync(x->counters_dev[d], x->counters_host, 2 * sizeof(int),
                                      cudaMemcpyHostToDevice, c));
        PP_CUDA_CHECK(cudaEventRecord(x->fork[d], c));
        PP_CUDA_CHECK(cudaStreamWaitEvent(x->stream[d][PP_ROLE_SEND], x->fork[d], 0));
        PP_CUDA_CHECK(cudaStreamWaitEvent(x->stream[d][PP_ROLE_RECV], x->fork[d], 0));
    }
    for (int s = 0; s < plan->n_stages; s++) {
        int d = plan->stage_device[s];
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        PP_CHECK(stage_zero_grads(x->stages[s], x->stream[d][PP_ROLE_COMPUTE]));
    }

    (void)step;
    (void)m;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *op = &plan->ops[i];
        int data_mb = op->mb; /* the stage adds the step's base from its device counter */
        if (pp_action_is_compute(op->kind)) {
            cudaStream_t s = op_stream(x, op);
            PP_CUDA_CHECK(cudaSetDevice(x->cuda[op->device]));
            PP_CHECK(wait_deps(x, i, -1, s));
            PP_CHECK(record_start(x, i, s));
            PP_CHECK(run_compute(x, op, data_mb, s));
            PP_CHECK(record_end(x, i, s));
            PP_CHECK(sync_op(x, i, deadline, step));
            continue;
        }
        if (op->kind == PP_ACT_RECV_F || op->kind == PP_ACT_RECV_B) continue; /* with its SEND */
        PP_CHECK(enqueue_transfer(x, i, deadline, step));
    }

    /* Close the step: each device's compute stream joins its send/recv streams, then the
     * optimizer runs on it. tail[d][COMPUTE] marks the device's end of step. */
    for (int d = 0; d < x->p; d++) {
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        cudaStream_t c = x->stream[d][PP_ROLE_COMPUTE];
        for (int r = PP_ROLE_SEND; r < PP_ROLE_COUNT; r++) {
            PP_CUDA_CHECK(cudaEventRecord(x->tail[d][r], x->stream[d][r]));
            PP_CUDA_CHECK(cudaStreamWaitEvent(c, x->tail[d][r], 0));
        }
    }
    if (x->cfg->run.optimizer == PP_OPT_ADAMW) {
        pp_adamw_cfg_t opt = {(float)x->cfg->run.lr, 0.9f, 0.95f, 1e-8f,
                              (float)x->cfg->run.weight_decay};
        for (int s = 0; s < plan->n_stages; s++) {
            int d = plan->stage_device[s];
            PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
            /* The step count comes from the device counter (stage_bind_counters). */
            PP_CHECK(stage_optimizer_step(x->stages[s], &opt, 1, x->stream[d][PP_ROLE_COMPUTE]));
        }
    }
    /* stop[d] ends device d's step; device 0's compute stream then joins every device, which a
     * captured graph needs (all its streams rejoin the origin) and which costs an eager step
     * nothing (the host waits for every device anyway). */
    for (int d = 0; d < x->p; d++) {
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        cudaStream_t c = x->stream[d][PP_ROLE_COMPUTE];
        PP_CUDA_CHECK(record_timing(x, x->stop[d], c));
        PP_CUDA_CHECK(cudaEventRecord(x->join[d], c));
    }
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[0]));
    for (int d = 1; d < x->p; d++)
        PP_CUDA_CHECK(cudaStreamWaitEvent(x->stream[0][PP_ROLE_COMPUTE], x->join[d], 0));
    return PP_OK;
}

/* Capture one step into x->gexec. On any failure the capture is discarded, a note says why, and
 * the caller goes on eagerly (returns PP_OK with x->gexec NULL); only errors that leave the
 * devices unusable are returned. */
static pp_status_t capture_step(exec_t *x, int step, double deadline)
{
    cudaStream_t origin = x->stream[0][PP_ROLE_COMPUTE];
    cudaGraph_t g = NULL;
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[0]));
    cudaError_t e = cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        fprintf(stderr, "# CUDA graph capture unavailable (%s): launching eagerly\n",
                cudaGetErrorString(e));
        (void)cudaGetLastError();
        return PP_OK;
    }
    x->capturing = 1;
    pp_status_t st = enqueue_step(x, step, deadline);
    x->capturing = 0;
    PP_CUDA_CHECK(cudaSetDevice(x->cuda[0]));
    e = cudaStreamEndCapture(origin, &g);
    if (st == PP_OK && e == cudaSuccess && g) {
        e = cudaGraphInstantiate(&x->gexec, g, 0);
        if (e == cudaSuccess) {
            x->graph = g;
            return PP_OK;
        }
    }
    fprintf(stderr, "# CUDA graph capture failed (%s): launching eagerly\n",
            e != cudaSuccess ? cudaGetErrorString(e) : pp_status_str(st));
    (void)cudaGetLastError();
    if (g) cudaGraphDestroy(g);
    x->gexec = NULL;
    return PP_OK;
}

/* Wait for the step; on timeout name the pending ops. */
static pp_status_t finish_step(exec_t *x, int step, double deadline)
{
    for (int d = 0; d < x->p; d++) {
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        pp_status_t st = poll_event(x->stop[d], deadline);
        if (st == PP_ERR_TIMEOUT) report_pending(x, step, x->opts.timeout_s);
        if (st != PP_OK) return st;
    }
    return PP_OK;
}

/* Step time of the last step: the latest device end, from the common origin. */
static pp_status_t read_step_ms(exec_t *x, double *out)
{
    double worst = 0;
    for (int d = 0; d < x->p; d++) {
        float ms;
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&ms, x->ref[d], x->stop[d]));
        if (ms > worst) worst = ms;
    }
    *out = worst;
    return PP_OK;
}

/* Op times of the last step, relative to each device's origin. */
static pp_status_t read_op_times(exec_t *x, pp_op_time_t *t)
{
    const pp_plan_t *plan = x->plan;
    for (int i = 0; i < plan->n_ops; i++) {
        int src = x->done_op[i];
        int d = plan->ops[src].device;
        float a, b;
        PP_CUDA_CHECK(cudaSetDevice(x->cuda[d]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&a, x->ref[d], x->ev_start[src]));
        PP_CUDA_CHECK(cudaEventElapsedTime(&b, x->ref[d], x->ev_end[src]));
        t[i].start_ms = a;
        t[i].end_ms = b;
    }
    return PP_OK;
}

/* Print the banner: devices, links of every stage boundary, memory per device. */
static void print_banner(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    char desc[256];
    execute_describe_devices(desc, sizeof desc);
    fprintf(stderr, "# devices: %s\n", desc);
    p2p_print_matrix(x->p2p, stderr);
    fprintf(stderr, "# stage boundaries:");
    for (int s = 0; s + 1 < plan->n_stages; s++) {
        int a = plan->stage_device[s], b = plan->stage_device[s + 1];
        const char *how =
            p2p_describe(x->p2p, a == b ? PP_TRANSPORT_LOCAL : x->cfg->pipeline.transport, a, b);
        fprintf(stderr, " %d->%d %s%s", s, s + 1, how, s + 2 < plan->n_stages ? "," : "");
    }
    fputc('\n', stderr);
    fprintf(stderr, "# memory per device (stages, slots):");
    for (int d = 0; d < x->p; d++) {
        size_t b = 0;
        int slots = 0;
        for (int s = 0; s < plan->n_stages; s++) {
            if (plan->stage_device[s] != d) continue;
            b += stage_state_bytes(&x->scfg[s]) + stage_workspace_bytes(&x->scfg[s]) +
                 (size_t)x->scfg[s].n_slots * stage_slot_bytes(&x->scfg[s]);
            slots += x->scfg[s].n_slots;
        }
        fprintf(stderr, " gpu%d %.2f GiB (%d slots)%s", x->cuda[d], (double)b / (1u << 30), slots,
                d + 1 < x->p ? "," : "");
    }
    fputc('\n', stderr);
}

pp_status_t execute_plan(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                         const pp_config_t *cfg, const pp_exec_opts_t *opts)
{
    exec_t x;
    pp_status_t st;
    const int warmup = cfg->run.warmup, steps = cfg->run.steps, total = warmup + steps;
    double *step_ms = NULL;
    pp_op_time_t *times = NULL; /* [steps][n_ops] */
    memset(tl, 0, sizeof *tl);
    if (res) memset(res, 0, sizeof *res);
    if (steps < 1) PP_FAIL(PP_ERR_INPUT, "run.steps must be at least 1");

    PP_CHECK(exec_init(&x, plan, cfg, opts));
    if (opts->verbose) print_banner(&x);
    PP_CHECK_GOTO(timeline_init(tl, PP_MODE_MEASURE, plan->n_ops, plan->n_devices, steps), st,
                  done);
    PP_CHECK_GOTO(measure_skew(&x, &tl->skew_ms), st, done);
    if (opts->verbose && x.p > 1)
        fprintf(
            stderr,
            "# time axis: device origins aligned within %.1f us (cross-device signal round trip)\n",
            tl->skew_ms * 1000);
    step_ms = calloc((size_t)steps, sizeof *step_ms);
    times = opts->timing ? calloc((size_t)steps * (size_t)plan->n_ops, sizeof *times) : NULL;
    if (!step_ms || (opts->timing && !times)) {
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto done;
    }
    if (res) {
        res->n_steps = total;
        res->loss = calloc((size_t)total, sizeof *res->loss);
        if (!res->loss) {
            st = PP_ERR_NOMEM;
            goto done;
        }
    }

    int want_graph = opts->graph && !opts->sync && total >= 2;
    for (int step = 0; step < total; step++) {
        double deadline = now_s() + opts->timeout_s;
        x.counters_host[0] = step * plan->n_mb; /* data index of micro-batch k: step * m + k */
        x.counters_host[1] = step + 1;          /* AdamW step count */
        if (want_graph && step == 1) {
            PP_CHECK_GOTO(capture_step(&x, step, deadline), st, done);
            if (opts->verbose && x.gexec)
                fprintf(stderr,
                        "# step captured as one CUDA graph over %d device%s; replaying it\n", x.p,
                        x.p == 1 ? "" : "s");
        }
        if (x.gexec) {
            PP_CUDA_CHECK_GOTO(cudaSetDevice(x.cuda[0]), st, done);
            PP_CUDA_CHECK_GOTO(cudaGraphLaunch(x.gexec, x.stream[0][PP_ROLE_COMPUTE]), st, done);
            if (res) res->graph_steps++;
        } else {
            PP_CHECK_GOTO(enqueue_step(&x, step, deadline), st, done);
        }
        PP_CHECK_GOTO(finish_step(&x, step, deadline), st, done);
        /* Peak memory: nothing is allocated per step, but NCCL and cuBLAS may grow lazily. */
        for (int d = 0; d < x.p; d++) {
            size_t fr, tot;
            PP_CUDA_CHECK_GOTO(cudaSetDevice(x.cuda[d]), st, done);
            PP_CUDA_CHECK_GOTO(cudaMemGetInfo(&fr, &tot), st, done);
            if (tot - fr > tl->peak_mem_bytes[d]) tl->peak_mem_bytes[d] = tot - fr;
        }
        if (res) {
            int last = plan->n_stages - 1;
            double sum;
            PP_CUDA_CHECK_GOTO(cudaSetDevice(x.cuda[plan->stage_device[last]]), st, done);
            PP_CHECK_GOTO(stage_loss_read(x.stages[last], &sum,
                                          x.stream[plan->stage_device[last]][PP_ROLE_COMPUTE]),
                          st, done);
            res->loss[step] = sum / plan->n_mb;
        }
        if (step < warmup) continue;
        int k = step - warmup;
        PP_CHECK_GOTO(read_step_ms(&x, &step_ms[k]), st, done);
        if (times) PP_CHECK_GOTO(read_op_times(&x, &times[(size_t)k * plan->n_ops]), st, done);
    }

    /* The representative step is the median one; op times are shifted so the step starts at 0. */
    memcpy(tl->step_ms, step_ms, sizeof(double) * (size_t)steps);
    {
        double *sorted = malloc(sizeof(double) * (size_t)steps);
        if (!sorted) {
            st = PP_ERR_NOMEM;
            goto done;
        }
        memcpy(sorted, step_ms, sizeof(double) * (size_t)steps);
        qsort(sorted, (size_t)steps, sizeof(double), cmp_double);
        double med = sorted[(steps - 1) / 2];
        free(sorted);
        int pick = 0;
        for (int k = 0; k < steps; k++)
            if (step_ms[k] == med) pick = k;
        if (times) {
            const pp_op_time_t *t = &times[(size_t)pick * plan->n_ops];
            double t0 = INFINITY;
            for (int i = 0; i < plan->n_ops; i++)
                t0 = fmin(t0, t[i].start_ms);
            for (int i = 0; i < plan->n_ops; i++) {
                tl->t[i].start_ms = t[i].start_ms - t0;
                tl->t[i].end_ms = t[i].end_ms - t0;
            }
            tl->has_op_times = 1;
        }
    }
    if (res && opts->check_grads) {
        size_t n = 0;
        for (int s = 0; s < plan->n_stages; s++)
            n += stage_n_params(x.stages[s]);
        res->n_params = n;
        res->grads = malloc(sizeof(float) * n);
        if (!res->grads) {
            st = PP_ERR_NOMEM;
            goto done;
        }
        size_t off = 0;
        for (int s = 0; s < plan->n_stages; s++) {
            PP_CUDA_CHECK_GOTO(cudaSetDevice(x.cuda[plan->stage_device[s]]), st, done);
            PP_CHECK_GOTO(stage_grads_to_host(x.stages[s], res->grads + off), st, done);
            off += stage_n_params(x.stages[s]);
        }
    }
    st = PP_OK;
done:
    free(step_ms);
    free(times);
    exec_free(&x);
    if (st != PP_OK) timeline_free(tl);
    return st;
}
