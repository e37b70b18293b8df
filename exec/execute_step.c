/*
 * execute_step.c — enqueue one training step of the plan (see execute_internal.h).
 *
 * The host enqueues every op of an owned device in plan order, without synchronizing: the op's
 * stream waits on the completion events of its dependencies on other streams, records its start,
 * enqueues the work (a stage call for compute, a slot copy to or from its pinned host slot for
 * OFFLOAD and RELOAD: one table by kind, local_op), records its completion. Plan order is
 * topological, so every event is
 * recorded before any wait on it is enqueued. A transfer is posted as the halves of its transport
 * (p2p.h): the send half by the process owning the sender, the receive half by the one owning the
 * receiver, bracketed together when one thread posts both. Dependencies on ops of devices this
 * process does not own are carried by the transport itself. Nothing here counts processes: it
 * asks world_owns.
 *
 * Transfers run on the streams of their directed device pair (world_stream): a send waits only
 * for earlier sends to the same device, and nothing on the compute stream waits for a send unless
 * the plan says so (a slot the send reads is reused).
 *
 * A step starts with `go` on the origin's compute stream, which every owned device waits on; each
 * device then records its time origin ref[d] and forks its other streams. It ends with every
 * other stream joining its device's compute stream, the optimizer, and the origin joining every
 * device (a captured graph needs all its streams to rejoin the origin).
 */
#include "execute_internal.h"

#include "kernels/kernels.h"
#include "plan/stage_cfg.h"

#include <string.h>

/* The stream an op runs on: its role's stream (for a per-peer role, a transfer's: the one towards
 * its peer device), or the compute stream in --sync mode and, with serial_pairs, for the second
 * half of an overlapped pair. */
static cudaStream_t op_stream(const exec_t *x, const pp_op_t *op)
{
    if (x->opts.sync || (x->opts.serial_pairs && op->role == PP_ROLE_OVERLAP))
        return x->w.stream[op->device][PP_ROLE_COMPUTE];
    int q = pp_role_row(op->role)->per_peer ? x->plan->ops[op->peer].device : op->device;
    return world_stream(&x->w, op->device, op->role, q);
}

/* Make `stream` wait for every dependency of op i (but `skip`) that runs on another stream of
 * this process. */
static pp_status_t wait_deps(exec_t *x, int i, int skip, cudaStream_t stream)
{
    const pp_plan_t *plan = x->plan;
    const pp_op_t *op = &plan->ops[i];
    for (int k = 0; k < op->n_deps; k++) {
        int dep = plan->deps[op->dep_begin + k];
        if (dep == skip) continue;
        int src = x->done_op[dep];
        if (!world_owns(&x->w, plan->ops[src].device)) continue; /* carried by the transport */
        if (op_stream(x, &plan->ops[src]) == stream) continue;   /* FIFO on the same stream */
        PP_CUDA_CHECK(cudaStreamWaitEvent(stream, x->ev_dep[src], 0));
    }
    return PP_OK;
}

/* Timing events are recorded as external event nodes when captured, so they record (and can be
 * timed) at every replay; dependency events become the graph's edges. Outside a capture the
 * external flag is refused, so it is given only while capturing. */
cudaError_t exec_record_timing(const exec_t *x, cudaEvent_t ev, cudaStream_t stream)
{
    return x->capturing ? cudaEventRecordWithFlags(ev, stream, cudaEventRecordExternal)
                        : cudaEventRecord(ev, stream);
}

static pp_status_t record_start(exec_t *x, int i, cudaStream_t stream)
{
    if (x->opts.timing) PP_CUDA_CHECK(exec_record_timing(x, x->ev_start[i], stream));
    return PP_OK;
}

static pp_status_t record_end(exec_t *x, int i, cudaStream_t stream)
{
    PP_CUDA_CHECK(cudaEventRecord(x->ev_dep[i], stream));
    if (x->opts.timing) PP_CUDA_CHECK(exec_record_timing(x, x->ev_end[i], stream));
    return PP_OK;
}

/* In --sync mode: wait for op i right away (the naive executor's host synchronization). */
static pp_status_t sync_op(exec_t *x, int i, double deadline, int step)
{
    if (!x->opts.sync) return PP_OK;
    pp_status_t st = exec_poll_event(x->ev_dep[i], deadline);
    if (st == PP_ERR_TIMEOUT) exec_report_pending(x, step, x->opts.timeout_s);
    return st;
}

/* The ops that run on one stream of one stage (compute, and the host copies of run.offload),
 * by kind; transfers go through their transport instead. */
typedef pp_status_t (*local_op_fn)(exec_t *x, const pp_op_t *op, cudaStream_t s);

/* The data index of an op's micro-batch within the step: replica r's micro-batch k is the step's
 * r * m + k, so d replicas of m see what one pipeline of d * m would. The stage adds the step's
 * base (its device counter). */
static int data_mb(const exec_t *x, const pp_op_t *op)
{
    return plan_replica_of(x->plan, op->device) * x->plan->n_mb + op->mb;
}
/* The stage of a compute op, its slot joined with the micro-batch's kept region (run.offload
 * keeping part of each slot on the device; nothing otherwise). */
static pp_stage_t *op_stage_kept(const exec_t *x, const pp_op_t *op, pp_status_t *st)
{
    pp_stage_t *stage = exec_op_stage(x, op);
    const int *kept = x->plan->keep_slot;
    const int keep = kept ? kept[(size_t)op->stage * x->plan->n_mb + op->mb] : -1;
    *st = keep >= 0 ? stage_slot_keep(stage, op->slot, keep) : PP_OK;
    return stage;
}
static pp_status_t op_forward(exec_t *x, const pp_op_t *op, cudaStream_t s)
{
    pp_status_t st;
    pp_stage_t *stage = op_stage_kept(x, op, &st);
    return st != PP_OK ? st : stage_forward(stage, op->slot, data_mb(x, op), s);
}
static pp_status_t op_backward(exec_t *x, const pp_op_t *op, cudaStream_t s)
{
    pp_status_t st;
    pp_stage_t *stage = op_stage_kept(x, op, &st);
    return st != PP_OK ? st : stage_backward(stage, op->slot, data_mb(x, op), s);
}
static pp_status_t op_backward_input(exec_t *x, const pp_op_t *op, cudaStream_t s)
{
    pp_status_t st;
    pp_stage_t *stage = op_stage_kept(x, op, &st);
    return st != PP_OK ? st : stage_backward_input(stage, op->slot, data_mb(x, op), s);
}
static pp_status_t op_backward_weight(exec_t *x, const pp_op_t *op, cudaStream_t s)
{
    pp_status_t st;
    pp_stage_t *stage = op_stage_kept(x, op, &st);
    return st != PP_OK ? st : stage_backward_weight(stage, op->slot, data_mb(x, op), s);
}
/* The pinned host slot of a copy. */
static unsigned char *host_slot(const exec_t *x, const pp_op_t *op)
{
    const int r = plan_replica_of(x->plan, op->device);
    return x->host[r * x->plan->n_stages + op->stage] +
           (size_t)op->host * x->plan->offload_bytes[op->stage];
}
static pp_status_t op_offload(exec_t *x, const pp_op_t *op, cudaStream_t s)
{
    return stage_slot_to_host(exec_op_stage(x, op), op->slot, host_slot(x, op), s);
}
static pp_status_t op_reload(exec_t *x, const pp_op_t *op, cudaStream_t s)
{
    return stage_slot_from_host(exec_op_stage(x, op), op->slot, host_slot(x, op), s);
}

static const local_op_fn local_op[PP_ACT_COUNT] = {
    [PP_ACT_F] = op_forward,         [PP_ACT_B] = op_backward,      [PP_ACT_I] = op_backward_input,
    [PP_ACT_W] = op_backward_weight, [PP_ACT_OFFLOAD] = op_offload, [PP_ACT_RELOAD] = op_reload,
};

p2p_xfer_t exec_transfer_of(const exec_t *x, const pp_op_t *snd, const pp_op_t *rcv)
{
    pp_stage_t *a = exec_op_stage(x, snd), *b = exec_op_stage(x, rcv);
    int fwd = snd->kind == PP_ACT_SEND_F;
    p2p_xfer_t xf = {NULL,        rcv->device, NULL,
                     snd->device, snd->bytes,  x->meet_key[snd - x->plan->ops]};
    if (a) xf.src = fwd ? stage_slot_y(a, snd->slot) : stage_slot_dx(a, snd->slot);
    if (b) xf.dst = fwd ? stage_slot_x(b, rcv->slot) : stage_slot_dy(b, rcv->slot);
    return xf;
}

/* A transfer whose send half moves the bytes: one copy on the sender's stream after the
 * producer and the receiver's slot (the RECV's dependencies); the RECV completes with it. */
static pp_status_t enqueue_moved(exec_t *x, int i, const p2p_xfer_t *xf, double deadline, int step)
{
    const pp_op_t *op = &x->plan->ops[i];
    const int r = op->peer;
    if (!world_owns(&x->w, op->device)) return PP_OK;
    if (!world_owns(&x->w, x->plan->ops[r].device))
        PP_FAIL(PP_ERR_INTERNAL, "transport %s cannot reach device %d of another process",
                transport_name(op->link), x->plan->ops[r].device);
    cudaStream_t ss = op_stream(x, op);
    PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[op->device]));
    PP_CHECK(wait_deps(x, i, -1, ss));
    PP_CHECK(wait_deps(x, r, i, ss));
    PP_CHECK(record_start(x, i, ss));
    PP_CHECK(p2p_post_send(x->p2p, op->link, xf, ss));
    PP_CHECK(p2p_post_recv(x->p2p, op->link, xf, op_stream(x, &x->plan->ops[r]))); /* nothing */
    PP_CHECK(record_end(x, i, ss));
    return sync_op(x, i, deadline, step);
}

/* One transfer: SEND op i and its RECV, posted as the halves of their transport. Otherwise than
 * in enqueue_moved, each half runs on its own op's stream after its own dependencies; when this
 * process owns both ends they are posted inside one pairing bracket (one NCCL group). */
static pp_status_t enqueue_transfer(exec_t *x, int i, double deadline, int step)
{
    const pp_op_t *op = &x->plan->ops[i];
    const int r = op->peer;
    const pp_op_t *rcv = &x->plan->ops[r];
    const pp_transport_t t = op->link;
    const p2p_xfer_t xf = exec_transfer_of(x, op, rcv);
    if (transport_row(t)->send_moves_bytes) return enqueue_moved(x, i, &xf, deadline, step);
    const int own_s = world_owns(&x->w, op->device), own_r = world_owns(&x->w, rcv->device);
    cudaStream_t ss = own_s ? op_stream(x, op) : NULL, rs = own_r ? op_stream(x, rcv) : NULL;
    const int pair = own_s && own_r;
    /* nccl.wait_for_peer: each half also waits for the other's dependencies, so neither kernel
     * starts, holding its SMs, before the other end can meet it. */
    const int align = pair && x->job->nccl.wait_for_peer && t == PP_TRANSPORT_NCCL;
    if (own_s) {
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[op->device]));
        PP_CHECK(wait_deps(x, i, -1, ss));
        if (align) PP_CHECK(wait_deps(x, r, i, ss));
        PP_CHECK(record_start(x, i, ss));
    }
    if (own_r) {
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[rcv->device]));
        PP_CHECK(wait_deps(x, r, i, rs));
        if (align) PP_CHECK(wait_deps(x, i, r, rs));
        PP_CHECK(record_start(x, r, rs));
    }
    if (pair) PP_CHECK(p2p_pair_begin(x->p2p, t));
    pp_status_t st = own_s ? p2p_post_send(x->p2p, t, &xf, ss) : PP_OK;
    if (st == PP_OK && own_r) st = p2p_post_recv(x->p2p, t, &xf, rs);
    pp_status_t end = pair ? p2p_pair_end(x->p2p, t) : PP_OK; /* closes also after a failure */
    PP_CHECK(st);
    PP_CHECK(end);
    if (own_r) PP_CHECK(record_end(x, r, rs));
    if (own_s) {
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[op->device]));
        PP_CHECK(record_end(x, i, ss));
        PP_CHECK(sync_op(x, i, deadline, step));
    }
    return own_r ? sync_op(x, r, deadline, step) : PP_OK;
}

/* ---- The gradient reduction (pipeline.data_parallel) ---------------------------------------- */

/* REDUCE op's bucket in its stage's gradients (NULL where another process owns the device), and
 * how many fp32 values it holds: bucket b starts b buckets into them (plan_reduce_bucket_bytes). */
static float *reduce_bucket(const exec_t *x, const pp_op_t *op, size_t *count)
{
    pp_stage_t *st = exec_op_stage(x, op);
    const size_t bucket =
        plan_reduce_bucket_bytes(x->job, stage_grad_bytes(&x->scfg[op->stage])) / sizeof(float);
    size_t n = 0;
    *count = op->bytes / sizeof(float);
    return st ? stage_grads(st, &n) + (size_t)op->mb * bucket : NULL;
}

/* The d REDUCE ops of one stage and bucket (adjacent in plan order, replica 0's first, which
 * every one names as its peer), posted together when the first comes; nothing for the others.
 * Over NCCL, each owned replica posts its part on its reduce stream after its own dependencies
 * and, under nccl.wait_for_peer with every replica in this process, the others' too (no rank's
 * kernel spins waiting for a late one), the parts in one NCCL group. On one GPU
 * (p2p_reduce_local: all on one GPU, or some sharing one and the others reachable by peer access),
 * replica 0's reduce stream adds the others' buckets into its own in replica order and copies the
 * sum back; each replica's reduce stream marks its bucket final before and waits for the sum
 * after, so its device's optimizer does (end_step joins the stream). */
static pp_status_t enqueue_reduce(exec_t *x, int i, double deadline, int step)
{
    const pp_plan_t *plan = x->plan;
    const pp_op_t *first = &plan->ops[i];
    if (first->peer != i) return PP_OK;
    const int d = x->replicas;
    size_t count = 0;
    float *buf[PP_MAX_DEVICES];
    int mine = 0;
    if (i + d > plan->n_ops) PP_FAIL(PP_ERR_INTERNAL, "REDUCE op %d: group past the plan", i);
    for (int r = 0; r < d; r++) {
        const pp_op_t *o = &plan->ops[i + r];
        if (o->kind != PP_ACT_REDUCE || o->peer != i)
            PP_FAIL(PP_ERR_INTERNAL, "REDUCE op %d: op %d is not its replica %d", i, i + r, r);
        buf[r] = world_owns(&x->w, o->device) ? reduce_bucket(x, o, &count) : NULL;
        mine += buf[r] != NULL;
    }
    if (!mine) return PP_OK;
    if (p2p_reduce_local(x->p2p, first->device)) {
        /* Each replica's events are its own device's: they are recorded on its stream, which
         * marks its bucket final (ev_dep) before replica 0's stream adds it and waits for the
         * sum before the end. */
        cudaStream_t s = op_stream(x, first);
        for (int r = 0; r < d; r++) {
            const pp_op_t *o = &plan->ops[i + r];
            cudaStream_t so = op_stream(x, o);
            PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[o->device]));
            PP_CHECK(wait_deps(x, i + r, -1, so));
            PP_CHECK(record_start(x, i + r, so));
            if (r > 0) PP_CUDA_CHECK(cudaEventRecord(x->ev_dep[i + r], so));
        }
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[first->device]));
        for (int r = 1; r < d; r++)
            PP_CUDA_CHECK(cudaStreamWaitEvent(s, x->ev_dep[i + r], 0));
        for (int r = 1; r < d; r++)
            PP_CHECK(add_inplace(buf[0], buf[r], count, PP_DTYPE_FP32, s));
        for (int r = 1; r < d; r++)
            PP_CUDA_CHECK(cudaMemcpyAsync(buf[r], buf[0], count * sizeof(float),
                                          cudaMemcpyDeviceToDevice, s));
        PP_CHECK(record_end(x, i, s));
        for (int r = 1; r < d; r++) {
            const pp_op_t *o = &plan->ops[i + r];
            cudaStream_t so = op_stream(x, o);
            PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[o->device]));
            PP_CUDA_CHECK(cudaStreamWaitEvent(so, x->ev_dep[i], 0));
            PP_CHECK(record_end(x, i + r, so));
        }
        return sync_op(x, i, deadline, step);
    }
    const int align = mine == d && x->job->nccl.wait_for_peer;
    for (int r = 0; r < d; r++) {
        if (!buf[r]) continue;
        const pp_op_t *o = &plan->ops[i + r];
        cudaStream_t s = op_stream(x, o);
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[o->device]));
        for (int q = 0; q < d; q++)
            if (q == r || align) PP_CHECK(wait_deps(x, i + q, -1, s));
        PP_CHECK(record_start(x, i + r, s));
    }
    PP_CHECK(p2p_pair_begin(x->p2p, PP_TRANSPORT_NCCL));
    pp_status_t st = PP_OK;
    for (int r = 0; r < d && st == PP_OK; r++) {
        if (!buf[r]) continue;
        const pp_op_t *o = &plan->ops[i + r];
        /* zero1: each replica needs only its part's sum (execute_shard.c gathers the update) */
        st = exec_zero1(x) ? p2p_reduce_scatter(x->p2p, o->device, buf[r], count, op_stream(x, o))
                           : p2p_all_reduce(x->p2p, o->device, buf[r], count, op_stream(x, o));
    }
    pp_status_t end = p2p_pair_end(x->p2p, PP_TRANSPORT_NCCL); /* closes also after a failure */
    PP_CHECK(st);
    PP_CHECK(end);
    for (int r = 0; r < d; r++) {
        if (!buf[r]) continue;
        const pp_op_t *o = &plan->ops[i + r];
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[o->device]));
        PP_CHECK(record_end(x, i + r, op_stream(x, o)));
        PP_CHECK(sync_op(x, i + r, deadline, step));
    }
    return PP_OK;
}

/* `go` on the origin; every owned device waits on it, records its time origin, copies the step's
 * counters (data index base, optimizer step) from the host and forks its other streams; then the
 * gradients are zeroed. */
static pp_status_t start_step(exec_t *x)
{
    pp_world_t *w = &x->w;
    const int o = w->origin;
    PP_CUDA_CHECK(cudaSetDevice(w->cuda[o]));
    PP_CUDA_CHECK(cudaEventRecord(w->go, w->stream[o][PP_ROLE_COMPUTE]));
    for (int d = 0; d < w->p; d++) {
        if (!world_owns(w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(w->cuda[d]));
        cudaStream_t c = w->stream[d][PP_ROLE_COMPUTE];
        if (d != o) PP_CUDA_CHECK(cudaStreamWaitEvent(c, w->go, 0));
        PP_CUDA_CHECK(exec_record_timing(x, w->ref[d], c));
        PP_CUDA_CHECK(cudaMemcpyAsync(w->counters_dev[d], w->counters_host, 2 * sizeof(int),
                                      cudaMemcpyHostToDevice, c));
        PP_CUDA_CHECK(cudaEventRecord(w->fork[d], c));
        cudaStream_t side[PP_ROLE_COUNT * PP_MAX_DEVICES];
        cudaEvent_t tail[PP_ROLE_COUNT * PP_MAX_DEVICES];
        int n = world_side_streams(w, d, side, tail, PP_ROLE_COUNT * PP_MAX_DEVICES);
        for (int k = 0; k < n; k++)
            PP_CUDA_CHECK(cudaStreamWaitEvent(side[k], w->fork[d], 0));
    }
    for (int r = 0; r < x->replicas; r++)
        for (int s = 0; s < x->plan->n_stages; s++) {
            int d = plan_stage_device(x->plan, s, r);
            if (!world_owns(w, d)) continue;
            PP_CUDA_CHECK(cudaSetDevice(w->cuda[d]));
            PP_CHECK(stage_zero_grads(*exec_stage(x, r, s), w->stream[d][PP_ROLE_COMPUTE]));
        }
    return PP_OK;
}

/* Each device's compute stream joins its other streams, then the optimizer runs on it; stop[d]
 * ends device d's step and the origin joins every device. */
static pp_status_t end_step(exec_t *x)
{
    pp_world_t *w = &x->w;
    for (int d = 0; d < w->p; d++) {
        if (!world_owns(w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(w->cuda[d]));
        cudaStream_t c = w->stream[d][PP_ROLE_COMPUTE];
        cudaStream_t side[PP_ROLE_COUNT * PP_MAX_DEVICES];
        cudaEvent_t tail[PP_ROLE_COUNT * PP_MAX_DEVICES];
        int n = world_side_streams(w, d, side, tail, PP_ROLE_COUNT * PP_MAX_DEVICES);
        for (int k = 0; k < n; k++) {
            PP_CUDA_CHECK(cudaEventRecord(tail[k], side[k]));
            PP_CUDA_CHECK(cudaStreamWaitEvent(c, tail[k], 0));
        }
    }
    if (x->job->run.optimizer == PP_OPT_ADAMW) {
        pp_adamw_cfg_t opt = {(float)x->job->run.lr, 0.9f, 0.95f, 1e-8f,
                              (float)x->job->run.weight_decay};
        for (int r = 0; r < x->replicas; r++)
            for (int s = 0; s < x->plan->n_stages; s++) {
                int d = plan_stage_device(x->plan, s, r);
                if (!world_owns(w, d)) continue;
                PP_CUDA_CHECK(cudaSetDevice(w->cuda[d]));
                /* The step count comes from the device counter (stage_bind_counters). */
                PP_CHECK(stage_optimizer_step(*exec_stage(x, r, s), &opt, 1,
                                              w->stream[d][PP_ROLE_COMPUTE]));
            }
        if (exec_zero1(x)) PP_CHECK(exec_gather_parts(x, 0)); /* each replica updated its part */
    }
    for (int d = 0; d < w->p; d++) {
        if (!world_owns(w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(w->cuda[d]));
        cudaStream_t c = w->stream[d][PP_ROLE_COMPUTE];
        PP_CUDA_CHECK(exec_record_timing(x, w->stop[d], c));
        PP_CUDA_CHECK(cudaEventRecord(w->join[d], c));
    }
    PP_CUDA_CHECK(cudaSetDevice(w->cuda[w->origin]));
    for (int d = 0; d < w->p; d++)
        if (d != w->origin && world_owns(w, d))
            PP_CUDA_CHECK(
                cudaStreamWaitEvent(w->stream[w->origin][PP_ROLE_COMPUTE], w->join[d], 0));
    return PP_OK;
}

pp_status_t exec_enqueue_step(exec_t *x, int step, double deadline)
{
    const pp_plan_t *plan = x->plan;
    PP_CHECK(start_step(x));
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *op = &plan->ops[i];
        if (op->kind == PP_ACT_RECV_F || op->kind == PP_ACT_RECV_B) continue; /* with its SEND */
        if (op->kind == PP_ACT_REDUCE) {
            PP_CHECK(enqueue_reduce(x, i, deadline, step));
            continue;
        }
        if (!local_op[op->kind]) {
            PP_CHECK(enqueue_transfer(x, i, deadline, step));
            continue;
        }
        if (!world_owns(&x->w, op->device)) continue;
        cudaStream_t s = op_stream(x, op);
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[op->device]));
        PP_CHECK(wait_deps(x, i, -1, s));
        PP_CHECK(record_start(x, i, s));
        PP_CHECK(local_op[op->kind](x, op, s));
        PP_CHECK(record_end(x, i, s));
        PP_CHECK(sync_op(x, i, deadline, step));
    }
    return end_step(x);
}

pp_status_t exec_capture_step(exec_t *x, int step, double deadline)
{
    cudaStream_t origin = x->w.stream[x->w.origin][PP_ROLE_COMPUTE];
    cudaGraph_t g = NULL;
    PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[x->w.origin]));
    cudaError_t e = cudaStreamBeginCapture(origin, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        fprintf(stderr, "# CUDA graph capture unavailable (%s): launching eagerly\n",
                cudaGetErrorString(e));
        (void)cudaGetLastError();
        return PP_OK;
    }
    x->capturing = 1;
    pp_status_t st = exec_enqueue_step(x, step, deadline);
    x->capturing = 0;
    PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[x->w.origin]));
    e = cudaStreamEndCapture(origin, &g);
    if (st == PP_OK && e == cudaSuccess && g) {
        /* Each kernel node keeps its stream's priority (run.priorities). */
        e = cudaGraphInstantiate(&x->gexec, g,
                                 x->w.priorities ? cudaGraphInstantiateFlagUseNodePriority : 0);
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
