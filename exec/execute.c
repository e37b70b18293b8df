/*
 * execute.c — run a lowered plan on the GPUs (see execute.h); its parts are described in
 * execute_internal.h.
 *
 * Set-up (before any step): the world (the devices this process owns, their streams and events,
 * execute_world.c); the stages of owned devices with the slot counts the plan asks for, after
 * checking that they fit; the pinned host slots of run.offload (cudaHostAlloc, portable); one
 * completion event per op (plus a start and an end event when timing
 * is on); the transports the plan uses. Then the run: step 0 eagerly, step 1 captured as one CUDA
 * graph (graph mode) and replayed after, each step enqueued by execute_step.c without host
 * synchronization and waited for once, with a timeout (execute_timing.c).
 */
#include "execute_internal.h"
#include "plan/stage_cfg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int execute_built_with_cuda(void)
{
    return 1;
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
    free(x->clock_all);
    if (x->gexec) cudaGraphExecDestroy(x->gexec);
    if (x->graph) cudaGraphDestroy(x->graph);
    if (x->ev_end || x->ev_start || x->ev_dep) {
        for (int i = 0; i < x->plan->n_ops; i++) {
            if (x->ev_end && x->ev_end[i]) cudaEventDestroy(x->ev_end[i]);
            if (x->ev_start && x->ev_start[i]) cudaEventDestroy(x->ev_start[i]);
            if (x->ev_dep && x->ev_dep[i]) cudaEventDestroy(x->ev_dep[i]);
        }
    }
    const int n_rs = x->replicas * x->plan->n_stages;
    if (x->host)
        for (int k = 0; k < n_rs; k++)
            if (x->host[k]) cudaFreeHost(x->host[k]);
    free(x->host);
    free(x->replica_loss);
    for (int d = 0; d < PP_MAX_DEVICES; d++)
        if (x->shard_ev[d]) cudaEventDestroy(x->shard_ev[d]);
    free(x->ev_end);
    free(x->ev_start);
    free(x->ev_dep);
    free(x->done_op);
    free(x->meet_key);
    free(x->launch_s);
    world_free(&x->w);
    for (int k = 0; x->stages && k < n_rs; k++) {
        if (!x->stages[k]) continue;
        int s = k % x->plan->n_stages, r = k / x->plan->n_stages;
        cudaSetDevice(x->w.cuda[plan_stage_device(x->plan, s, r)]);
        stage_free(x->stages[k]);
    }
    free(x->stages);
    free(x->scfg);
    p2p_free(x->p2p);
}

/* Bytes the stages of pipeline device d allocate. */
static size_t device_need(const exec_t *x, int d)
{
    size_t b = 0;
    for (int s = 0; s < x->plan->n_stages; s++) {
        const pp_stage_cfg_t *c = &x->scfg[s];
        if (plan_stage_on(x->plan, s, d)) b += stage_device_bytes(c);
    }
    return b;
}

/* Checks that every CUDA device can hold the stages of the pipeline devices on it (several may
 * share one); prints a table of needs when one cannot. */
static pp_status_t check_fit(exec_t *x)
{
    size_t need[PP_MAX_DEVICES] = {0}, free_b[PP_MAX_DEVICES] = {0}, total_b[PP_MAX_DEVICES] = {0};
    /* NCCL keeps its own buffers per peer; leave room for them and for the CUDA context. */
    const size_t reserve = (size_t)512 << 20;
    int ok = 1, on[PP_MAX_DEVICES] = {0}; /* pipeline devices on CUDA device g */
    for (int d = 0; d < x->w.p; d++) {
        if (!world_owns(&x->w, d)) continue;
        need[x->w.cuda[d]] += device_need(x, d);
        on[x->w.cuda[d]]++;
    }
    for (int g = 0; g < PP_MAX_DEVICES; g++) {
        if (!on[g]) continue;
        PP_CUDA_CHECK(cudaSetDevice(g));
        PP_CUDA_CHECK(cudaMemGetInfo(&free_b[g], &total_b[g]));
        if (need[g] + reserve > free_b[g]) ok = 0;
    }
    if (ok) return PP_OK;
    fprintf(stderr, "ppsched: the plan does not fit in device memory:\n");
    fprintf(stderr, "  %-6s %-9s %12s %12s %12s\n", "cuda", "pipeline", "needs (GiB)", "free (GiB)",
            "total (GiB)");
    for (int g = 0; g < PP_MAX_DEVICES; g++)
        if (on[g])
            fprintf(stderr, "  %-6d %-9d %12.2f %12.2f %12.2f%s\n", g, on[g],
                    (double)(need[g] + reserve) / (1u << 30), (double)free_b[g] / (1u << 30),
                    (double)total_b[g] / (1u << 30),
                    need[g] + reserve > free_b[g] ? "  <- too small" : "");
    fprintf(
        stderr,
        "  (pipeline = pipeline devices on the GPU; needs = parameters, gradients, optimizer\n"
        "   state, workspace and %s activation slots, plus %.1f GiB for the CUDA context and\n"
        "   NCCL; fewer micro-batches in flight, run.offload=auto (with run.memory_limit) or\n"
        "   activations, run.recompute, a smaller micro_batch_size or more devices would fit)\n",
        x->plan->offload ? "the offload ring's" : "the schedule's", (double)reserve / (1u << 30));
    return PP_ERR_DEVICE;
}

/* The devices of the plan, checked against those visible: all owned by this process, or its
 * share of them under an MPI launch (execute_group.c). */
static pp_status_t exec_devices(exec_t *x)
{
    int cuda[PP_MAX_DEVICES];
    int n_vis = execute_device_count();
    if (n_vis == 0)
        PP_REFUSE(PP_ERR_DEVICE, "no CUDA device is visible: nothing to run on (use --simulate)");
    for (int d = 0; d < x->plan->n_devices; d++) {
        cuda[d] = x->job->pipeline.device_ids[d];
        if (!exec_in_group(x) && (cuda[d] < 0 || cuda[d] >= n_vis))
            PP_REFUSE(PP_ERR_DEVICE,
                      "pipeline device %d is CUDA device %d, but only %d are visible", d, cuda[d],
                      n_vis);
    }
    if (exec_in_group(x))
        PP_CHECK(exec_share_devices(x, cuda, n_vis));
    else
        world_own_all(&x->w, x->plan->n_devices, cuda);
    x->w.priorities = x->job->run.priorities;
    for (int i = 0; i < x->plan->n_ops; i++) { /* the directed pairs that get channels */
        const pp_op_t *op = &x->plan->ops[i];
        if (op->role == PP_ROLE_SEND) world_talk(&x->w, op->device, x->plan->ops[op->peer].device);
    }
    return PP_OK;
}

/* The per-stage and per-op arrays, and every stage's configuration. */
static pp_status_t exec_alloc(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    const int total = x->job->run.warmup + x->job->run.steps;
    x->replicas = plan_replicas(plan);
    x->stages = calloc((size_t)(plan->n_stages * x->replicas), sizeof *x->stages);
    x->replica_loss = calloc((size_t)(x->replicas * (total > 0 ? total : 1)), sizeof(double));
    x->scfg = calloc((size_t)plan->n_stages, sizeof *x->scfg);
    x->ev_end = calloc((size_t)plan->n_ops, sizeof *x->ev_end);
    x->ev_start = calloc((size_t)plan->n_ops, sizeof *x->ev_start);
    x->ev_dep = calloc((size_t)plan->n_ops, sizeof *x->ev_dep);
    x->done_op = malloc(sizeof(int) * (size_t)plan->n_ops);
    x->meet_key = malloc(sizeof(int) * (size_t)plan->n_ops);
    if (!x->stages || !x->scfg || !x->ev_end || !x->ev_start || !x->ev_dep || !x->done_op ||
        !x->meet_key || !x->replica_loss)
        PP_FAIL(PP_ERR_NOMEM, "out of host memory");
    for (int s = 0; s < plan->n_stages; s++)
        plan_stage_cfg(&x->scfg[s], x->job, plan, s);
    if (plan->n_stages > 0 && stage_boundary_bytes(&x->scfg[0]) != plan->boundary_bytes)
        PP_FAIL(PP_ERR_INTERNAL, "plan boundary %zu bytes, stage boundary %zu bytes",
                plan->boundary_bytes, stage_boundary_bytes(&x->scfg[0]));
    for (int s = 0; plan->offload && s < plan->n_stages; s++)
        if (stage_offload_bytes(&x->scfg[s]) != plan->offload_bytes[s])
            PP_FAIL(PP_ERR_INTERNAL, "stage %d: plan offloads %zu bytes, the stage %zu", s,
                    plan->offload_bytes[s], stage_offload_bytes(&x->scfg[s]));
    return PP_OK;
}

/* The pinned host slots of run.offload, once, before any step: host_slots_per_stage[s] slots of
 * offload_bytes[s] for every stage of an owned device (portable: any device may copy). */
static pp_status_t exec_host_slots(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    size_t all = 0;
    for (int d = 0; d < plan->n_devices; d++)
        if (world_owns(&x->w, d)) all += plan_host_bytes(plan, d);
    x->host = calloc((size_t)(plan->n_stages * x->replicas), sizeof *x->host);
    PP_ALLOC_CHECK(x->host);
    for (int k = 0; plan->offload && k < plan->n_stages * x->replicas; k++) {
        int s = k % plan->n_stages, r = k / plan->n_stages;
        size_t b = (size_t)plan->host_slots_per_stage[s] * plan->offload_bytes[s];
        if (b == 0 || !world_owns(&x->w, plan_stage_device(plan, s, r))) continue;
        cudaError_t e = cudaHostAlloc((void **)&x->host[k], b, cudaHostAllocPortable);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            x->host[k] = NULL;
            fprintf(stderr,
                    "ppsched: run.offload: %.2f GiB of pinned host memory for stage %d (%d "
                    "slots of %.1f MiB) could not be allocated (%s); %.2f GiB in all\n",
                    (double)b / (1u << 30), s, plan->host_slots_per_stage[s],
                    (double)plan->offload_bytes[s] / (1u << 20), cudaGetErrorString(e),
                    (double)all / (1u << 30));
            return PP_ERR_DEVICE;
        }
    }
    return PP_OK;
}

/* Events of every op of an owned device, created on that device. */
static pp_status_t exec_op_events(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *op = &plan->ops[i];
        x->done_op[i] = i;
        if (op->kind == PP_ACT_RECV_F || op->kind == PP_ACT_RECV_B) {
            /* Where the send half moves the bytes, the RECV completes with the SEND. */
            if (transport_row(op->link)->send_moves_bytes) x->done_op[i] = op->peer;
        }
        if (!world_owns(&x->w, op->device)) continue;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[op->device]));
        PP_CUDA_CHECK(cudaEventCreateWithFlags(&x->ev_dep[i], cudaEventDisableTiming));
        if (x->opts.timing) {
            PP_CUDA_CHECK(cudaEventCreate(&x->ev_start[i]));
            PP_CUDA_CHECK(cudaEventCreate(&x->ev_end[i]));
        }
    }
    return PP_OK;
}

/* The stages of owned devices (every replica's from the same seed, so they start equal), bound to
 * their device's step counters; then every owned device finishes its set-up work. */
static pp_status_t exec_stages(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    for (int r = 0; r < x->replicas; r++)
        for (int s = 0; s < plan->n_stages; s++) {
            int d = plan_stage_device(plan, s, r);
            if (!world_owns(&x->w, d)) continue;
            PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d]));
            pp_stage_cfg_t c = x->scfg[s];
            c.optimizer_shard = r; /* zero1: the replica's part of the optimizer state */
            PP_CHECK(stage_init(exec_stage(x, r, s), &c));
            int *ctr = x->w.counters_dev[d];
            PP_CHECK(stage_bind_counters(*exec_stage(x, r, s), ctr, ctr + 1));
            size_t n = 0;
            (void)stage_grads(*exec_stage(x, r, s), &n);
            if (n * sizeof(float) != stage_grad_bytes(&x->scfg[s]))
                PP_FAIL(PP_ERR_INTERNAL, "stage %d holds %zu gradient bytes, the plan %zu", s,
                        n * sizeof(float), stage_grad_bytes(&x->scfg[s]));
        }
    for (int d = 0; d < x->w.p; d++) {
        if (!world_owns(&x->w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d]));
        if (exec_zero1(x))
            PP_CUDA_CHECK(cudaEventCreateWithFlags(&x->shard_ev[d], cudaEventDisableTiming));
        PP_CUDA_CHECK(cudaDeviceSynchronize());
    }
    return PP_OK;
}

/* What this process sets up alone, before the transports (which an MPI launch sets up together). */
static pp_status_t exec_init_local(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    const pp_job_t *job = x->job;
    PP_CHECK(exec_devices(x));
    if (job->model.n_layers_per_stage != plan->n_stages && job->model.layers % plan->n_stages != 0)
        PP_FAIL(PP_ERR_INTERNAL, "%d layers do not split into %d stages", job->model.layers,
                plan->n_stages);
    PP_CHECK(exec_alloc(x));
    PP_CHECK(check_fit(x));
    PP_CHECK(world_create(&x->w));
    PP_CHECK(exec_host_slots(x));
    return exec_op_events(x);
}

/* Which transfers meet through shared flags (p2p_connect): every ipc one, and, under
 * nccl.wait_for_peer, an nccl one between two processes of one host. Collective under a group. */
static pp_status_t exec_connect(exec_t *x, pp_group_t *g)
{
    const pp_plan_t *plan = x->plan;
    int n = 0;
    p2p_meet_t *meet = calloc((size_t)plan->n_ops, sizeof *meet);
    PP_ALLOC_CHECK(meet);
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *op = &plan->ops[i];
        x->meet_key[i] = -1;
        if (op->role != PP_ROLE_SEND) continue;
        const int a = op->device, b = plan->ops[op->peer].device;
        /* where the two ends run: the job's process layout, which lowering chose the links by */
        const pp_reach_t reach = job_boundary_reach(x->job, a, b);
        if (op->link == PP_TRANSPORT_IPC && reach == PP_REACH_NETWORK) {
            free(meet);
            PP_REFUSE(PP_ERR_INPUT,
                      "transport ipc works between the processes of one host, but pipeline "
                      "devices %d and %d are on two hosts (use nccl, or auto)",
                      a, b);
        }
        if (op->link != PP_TRANSPORT_IPC && !(op->link == PP_TRANSPORT_NCCL &&
                                              reach == PP_REACH_HOST && x->job->nccl.wait_for_peer))
            continue;
        p2p_xfer_t xf = exec_transfer_of(x, op, &plan->ops[op->peer]);
        meet[n] = (p2p_meet_t){op->link, a, b, xf.dst};
        x->meet_key[i] = n++;
    }
    pp_status_t st = p2p_connect(x->p2p, g, meet, n);
    free(meet);
    return st;
}

/* Under an MPI launch every process learns of a failure of any before the communicators are made
 * (a collective a failed process would never join) and after the stages are. */
static pp_status_t exec_init(exec_t *x, const pp_plan_t *plan, const pp_job_t *job,
                             const pp_exec_opts_t *opts)
{
    pp_status_t st = PP_OK;
    memset(x, 0, sizeof *x);
    x->plan = plan;
    x->job = job;
    x->opts = *opts;
    pp_group_t *g = exec_in_group(x) ? opts->group : NULL;
    st = exec_init_local(x);
    if (g) st = group_agree(g, st);
    if (st != PP_OK) goto fail;
    p2p_setup_t *setup = calloc(1, sizeof *setup);
    if (!setup) {
        st = PP_ERR_NOMEM;
        fprintf(stderr, "out of host memory\n");
        goto fail;
    }
    setup->nccl = job->nccl;
    setup->replicas = plan_replicas(plan);
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *op = &plan->ops[i];
        if (!pp_action_is_comm(op->kind)) continue; /* REDUCE: setup->replicas */
        setup->used |= 1u << op->link;
        if (op->link == PP_TRANSPORT_NCCL && op->role == PP_ROLE_SEND)
            setup->nccl_pair[op->device][plan->ops[op->peer].device] = 1;
    }
    st = p2p_init(&x->p2p, x->w.p, x->w.cuda, x->w.owned, g, setup);
    free(setup);
    if (st != PP_OK) goto fail;
    st = exec_stages(x);
    if (g) st = group_agree(g, st);
    if (st == PP_OK) st = exec_connect(x, g);
    if (g) st = group_agree(g, st); /* then every process measures its clock, or none */
    if (g && st == PP_OK) st = g->ops->clock_offset(g, &x->clock_offset_ms, &x->clock_residual_ms);
    if (g) st = group_agree(g, st);
    if (g && st == PP_OK) { /* rank 0 names every process's clock in the banner */
        double mine[2] = {x->clock_offset_ms, x->clock_residual_ms};
        if (g->rank == 0 && !(x->clock_all = calloc((size_t)g->size * 2, sizeof(double))))
            st = PP_ERR_NOMEM;
        st = group_agree(g, st);
        if (st == PP_OK) st = g->ops->gather(g, mine, x->clock_all, sizeof mine, 0);
        st = group_agree(g, st);
    }
    if (st != PP_OK) goto fail;
    return PP_OK;
fail:
    exec_free(x);
    return st;
}

/* Print the banner: devices, links of every stage boundary, memory per device, and a warning
 * when pipeline devices share a GPU. */
static void print_banner(exec_t *x)
{
    const pp_plan_t *plan = x->plan;
    const int *cuda = x->w.cuda;
    char desc[256];
    int a, b;
    execute_describe_devices(desc, sizeof desc);
    fprintf(stderr, "# devices: %s\n", desc);
    p2p_print_matrix(x->p2p, stderr);
    pp_transport_t link[PP_MAX_STAGES]; /* what lowering gave each boundary */
    plan_boundary_links(plan, link);
    fprintf(stderr, "# stage boundaries:");
    for (int s = 0; s + 1 < plan->n_stages; s++) {
        int da = plan->stage_device[s], db = plan->stage_device[s + 1];
        fprintf(stderr, " %d->%d %s%s", s, s + 1, p2p_describe(x->p2p, link[s], da, db),
                s + 2 < plan->n_stages ? "," : "");
    }
    fputc('\n', stderr);
    fprintf(stderr, "# memory per device (stages, slots):");
    for (int d = 0; d < x->w.p; d++) {
        int slots = 0, plain = 0, kept = 0;
        for (int s = 0; s < plan->n_stages; s++) {
            if (!plan_stage_on(plan, s, d)) continue;
            slots += x->scfg[s].n_slots;
            plain += plan->plain_slots_per_stage[s];
            kept += x->scfg[s].offload_keep > 0 ? x->scfg[s].n_keep_slots : 0;
        }
        fprintf(stderr, " %d (gpu%d) %.2f GiB (%d slots", d, cuda[d],
                (double)plan_device_bytes(plan, x->job, d, 0) / (1u << 30), slots);
        if (kept) fprintf(stderr, " and %d kept parts", kept);
        if (plan->offload)
            fprintf(stderr, "; without offload %.2f GiB, %d slots; pinned host %.2f GiB",
                    (double)plan_device_bytes(plan, x->job, d, 1) / (1u << 30), plain,
                    (double)plan_host_bytes(plan, d) / (1u << 30));
        fprintf(stderr, ")%s", d + 1 < x->w.p ? "," : "");
    }
    fputc('\n', stderr);
    if (job_shared_gpu(x->job, &a, &b))
        fprintf(stderr,
                "# note: pipeline devices share GPUs (%d and %d are both gpu%d), each with its own "
                "streams and memory: the timings are not those of separate GPUs\n",
                a, b, cuda[a]);
}

/* ---------------------------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------------------------- */

/* What a run keeps per timed step. */
typedef struct run_log {
    double *step_ms;     /* [steps] */
    pp_op_time_t *times; /* [steps][n_ops], timing only */
} run_log_t;

/* After step `step` finished: peak memory, the loss (when res), and the timed step's times. */
static pp_status_t after_step(exec_t *x, int step, pp_timeline_t *tl, pp_exec_result_t *res,
                              run_log_t *log)
{
    const pp_plan_t *plan = x->plan;
    /* Peak memory: nothing is allocated per step, but NCCL and cuBLAS may grow lazily. */
    for (int d = 0; d < x->w.p; d++) {
        size_t fr, tot;
        if (!world_owns(&x->w, d)) continue;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d]));
        PP_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
        if (tot - fr > tl->peak_mem_bytes[d]) tl->peak_mem_bytes[d] = tot - fr;
    }
    /* The loss: the mean over every replica's micro-batches, each replica's share from its last
     * stage (under an MPI launch, the other processes' shares come in exec_group_merge). */
    const int last = plan->n_stages - 1, total = x->job->run.warmup + x->job->run.steps;
    for (int r = 0; res && r < x->replicas; r++) {
        int ld = plan_stage_device(plan, last, r);
        if (!world_owns(&x->w, ld)) continue;
        double sum;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[ld]));
        PP_CHECK(stage_loss_read(*exec_stage(x, r, last), &sum, x->w.stream[ld][PP_ROLE_COMPUTE]));
        x->replica_loss[r * total + step] = sum / ((double)plan->n_mb * x->replicas);
    }
    if (res) {
        res->loss[step] = 0;
        for (int r = 0; r < x->replicas; r++)
            res->loss[step] += x->replica_loss[r * total + step];
    }
    int k = step - x->job->run.warmup;
    if (k < 0) return PP_OK;
    PP_CHECK(exec_read_step_ms(x, &log->step_ms[k]));
    if (log->times) PP_CHECK(exec_read_op_times(x, &log->times[(size_t)k * plan->n_ops]));
    return PP_OK;
}

/* One step: eager, or (graph mode) step 1 captured and every later step replayed. */
static pp_status_t run_step(exec_t *x, int step, pp_timeline_t *tl, pp_exec_result_t *res,
                            run_log_t *log)
{
    const int total = x->job->run.warmup + x->job->run.steps;
    const int want_graph = x->opts.graph && !x->opts.sync && total >= 2;
    const int o = x->w.origin;
    double deadline = exec_now_s() + x->opts.timeout_s;
    /* data index of replica r's micro-batch k: (step * d + r) * m + k (execute_step.c, data_mb) */
    x->w.counters_host[0] = step * x->plan->n_mb * x->replicas;
    x->w.counters_host[1] = step + 1; /* AdamW step count */
    if (want_graph && step == 1) {
        PP_CHECK(exec_capture_step(x, step, deadline));
        if (x->opts.verbose && x->gexec)
            fprintf(stderr, "# step captured as one CUDA graph over %d device%s; replaying it\n",
                    x->w.p, x->w.p == 1 ? "" : "s");
    }
    if (x->gexec) {
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[o]));
        PP_CUDA_CHECK(cudaGraphLaunch(x->gexec, x->w.stream[o][PP_ROLE_COMPUTE]));
        if (res) res->graph_steps++;
    } else {
        PP_CHECK(exec_enqueue_step(x, step, deadline));
    }
    PP_CHECK(exec_finish_step(x, step, deadline));
    return after_step(x, step, tl, res, log);
}

/* Every step, unless `st` (set-up) failed. Under an MPI launch the processes agree before each
 * step and after the last, so a failure in one process's step k ends every process at the same
 * agreement. */
static pp_status_t run_steps(exec_t *x, pp_timeline_t *tl, pp_exec_result_t *res, run_log_t *log,
                             pp_status_t st)
{
    const int total = x->job->run.warmup + x->job->run.steps;
    for (int step = 0; step < total; step++) {
        PP_CHECK(exec_step_agree(x, st, step));
        st = run_step(x, step, tl, res, log);
    }
    return exec_step_agree(x, st, total);
}

/* After the reduction every replica of a stage holds the same gradients: replica r's of the stage
 * (owned here, in host memory at `got`) against replica 0's at `ref`. */
static pp_status_t replicas_agree(exec_t *x, int s, const float *ref)
{
    const size_t n = stage_param_count(&x->scfg[s]);
    float *got = malloc(sizeof *got * (n ? n : 1));
    PP_ALLOC_CHECK(got);
    pp_status_t st = PP_OK;
    for (int r = 1; st == PP_OK && r < x->replicas; r++) {
        pp_stage_t *other = *exec_stage(x, r, s);
        if (!other) continue;
        if (cudaSetDevice(x->w.cuda[plan_stage_device(x->plan, s, r)]) != cudaSuccess)
            st = PP_ERR_CUDA;
        if (st == PP_OK) st = stage_grads_to_host(other, got);
        size_t i = 0;
        while (st == PP_OK && i < n && memcmp(&got[i], &ref[i], sizeof *got) == 0)
            i++;
        if (st == PP_OK && i < n) {
            fprintf(stderr,
                    "ppsched: after the gradient reduction, replica %d's stage %d gradient %zu is "
                    "%.9g, replica 0's %.9g\n",
                    r, s, i, got[i], ref[i]);
            st = PP_ERR_INTERNAL;
        }
    }
    free(got);
    return st;
}

/* The gradients of the last step, in stage order (check_grads): replica 0's, checked against
 * every other replica this process holds. */
static pp_status_t keep_grads(exec_t *x, pp_exec_result_t *res)
{
    const pp_plan_t *plan = x->plan;
    size_t n = 0;
    /* under zero1 each replica holds its part of the reduced gradients: gather them (each copy
     * to the host below synchronizes its device first) */
    if (exec_zero1(x)) PP_CHECK(exec_gather_parts(x, 1));
    for (int s = 0; s < plan->n_stages; s++)
        n += stage_param_count(&x->scfg[s]);
    res->n_params = n;
    res->grads = calloc(n ? n : 1, sizeof(float));
    PP_ALLOC_CHECK(res->grads);
    size_t off = 0;
    for (int s = 0; s < plan->n_stages; s++) {
        pp_stage_t *st = *exec_stage(x, 0, s);
        if (st) { /* an owned stage; another process's comes from it (execute_group.c) */
            if (stage_n_params(st) != stage_param_count(&x->scfg[s]))
                PP_FAIL(PP_ERR_INTERNAL, "stage %d holds %zu parameters, its size %zu", s,
                        stage_n_params(st), stage_param_count(&x->scfg[s]));
            PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[plan->stage_device[s]]));
            PP_CHECK(stage_grads_to_host(st, res->grads + off));
            PP_CHECK(replicas_agree(x, s, res->grads + off));
        }
        off += stage_param_count(&x->scfg[s]);
    }
    return PP_OK;
}

/* Before the first step: the timeline, the skew of the owned devices' origins, the per-step
 * logs and the losses. */
static pp_status_t prepare_run(exec_t *x, pp_timeline_t *tl, pp_exec_result_t *res, run_log_t *log)
{
    const pp_plan_t *plan = x->plan;
    const int steps = x->job->run.steps, total = x->job->run.warmup + steps;
    PP_CHECK(timeline_init(tl, PP_MODE_MEASURE, plan->n_ops, plan->n_devices, steps));
    PP_CHECK(world_measure_skew(&x->w, &tl->skew_ms));
    if (x->opts.verbose && x->w.p > 1)
        fprintf(
            stderr,
            "# time axis: device origins aligned within %.1f us (cross-device signal round trip)\n",
            tl->skew_ms * 1000);
    if (x->opts.verbose && exec_in_group(x) && x->clock_all) { /* rank 0 */
        fprintf(stderr, "# processes: %d; clock of each against rank 0's (ping-pong), ms:",
                x->opts.group->size);
        for (int k = 1; k < x->opts.group->size; k++)
            fprintf(stderr, " rank %d %+.4f (+-%.4f)%s", k, x->clock_all[2 * k],
                    x->clock_all[2 * k + 1], k + 1 < x->opts.group->size ? "," : "\n");
    }
    log->step_ms = calloc((size_t)steps, sizeof *log->step_ms);
    PP_ALLOC_CHECK(log->step_ms);
    if (x->opts.timing) {
        log->times = calloc((size_t)steps * (size_t)plan->n_ops, sizeof *log->times);
        PP_ALLOC_CHECK(log->times);
    }
    if (res) {
        res->n_steps = total;
        res->loss = calloc((size_t)total, sizeof *res->loss);
        PP_ALLOC_CHECK(res->loss);
    }
    return PP_OK;
}

pp_status_t execute_plan(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                         const pp_job_t *job, const pp_exec_opts_t *opts)
{
    exec_t x;
    const int steps = job->run.steps;
    run_log_t log = {NULL, NULL};
    memset(tl, 0, sizeof *tl);
    if (res) memset(res, 0, sizeof *res);
    if (steps < 1) PP_FAIL(PP_ERR_INPUT, "run.steps must be at least 1");

    PP_CHECK(exec_init(&x, plan, job, opts));
    if (opts->verbose) print_banner(&x);
    /* Under an MPI launch a failure here reaches the other processes at the first step's
     * agreement, and every step's at the next one's. */
    pp_status_t st = prepare_run(&x, tl, res, &log);
    st = run_steps(&x, tl, res, &log, st);
    /* The representative step is the median one; op times are shifted so the step starts at 0
     * (under an MPI launch: rank 0's median step, every process's times on rank 0's clock). */
    if (st == PP_OK && exec_in_group(&x))
        st = exec_group_merge(&x, tl, res, log.step_ms, log.times);
    else if (st == PP_OK)
        st = exec_keep_median(tl, log.step_ms, steps, log.times, plan->n_ops, -1, 1);
    if (st == PP_OK && res && opts->check_grads) {
        st = keep_grads(&x, res);
        if (exec_in_group(&x)) st = exec_group_grads(&x, res, st);
    }
    free(log.step_ms);
    free(log.times);
    exec_free(&x);
    if (st != PP_OK) timeline_free(tl);
    return st;
}
