/*
 * memory.c — the memory prediction of memory.h: a walk over the plan's stages, each priced with
 * stage_device_bytes (everything stage_init allocates) of plan_stage_cfg, split into state, slots
 * (activation slots, the kept regions of a stage that offloads part of each slot, I->W buffers)
 * and the rest (workspace).
 */
#include "memory.h"

#include "stage_cfg.h"

#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

double memory_limit_bytes(const pp_job_t *job, const pp_gpu_t *gpu, int *budget)
{
    int set = job && job->run.memory_limit_gib > 0;
    int auto_off = job && job->run.offload == PP_OFFLOAD_AUTO;
    if (budget) *budget = set || auto_off;
    if (set) return job->run.memory_limit_gib * GIB;
    return gpu->mem_gib * GIB * (auto_off ? 1.0 - MEMORY_AUTO_MARGIN : 1.0);
}

/* NCCL's share of a device that joins its communicators: some for the device (NCCL_DEVICE_GIB)
 * and each communicator's channel buffers (NCCL_COMM_GIB), at NCCL's default channel count and
 * buffer sizes. Measured on 4 x H200 with NCCL 2.28 (bench/NOTES.md, "data parallel"): 1.19 GiB
 * with 2 communicators, 1.95 with 4, 0.84 with the reduction's 1. */
#define NCCL_DEVICE_GIB 0.43
#define NCCL_COMM_GIB   0.39

/* Pinned host memory allocated portable (run.offload's host slots) is mapped into every device
 * of the process, at one 8-byte page-table entry per 4 KiB page: 2 MiB a device for each GiB.
 * Measured on 4 x H200, the 7B class with offload (bench/NOTES.md): devices that hold no host
 * slot grew by 0.02-0.07 GiB with 10-36 GiB pinned in the process. */
#define PINNED_MAP_FRACTION (8.0 / 4096.0)

/* The pinned host bytes the process that owns device d allocates: its devices' host slots. */
static double process_pinned(const pp_job_t *job, const pp_plan_t *plan, int d)
{
    double b = 0;
    for (int e = 0; e < plan->n_devices && e < PP_MAX_DEVICES; e++)
        if (job->procs.rank_of[e] == job->procs.rank_of[d]) b += (double)plan_host_bytes(plan, e);
    return b;
}

/* The NCCL communicators each device joins (p2p.h): per directed pair the plan sends over nccl
 * (nccl.communicators pair) or one over every device (device); the gradient reduction's, one per
 * device whose replicas lie on distinct GPUs (replicas sharing a GPU reduce without NCCL). */
static void nccl_comms(const pp_job_t *job, const pp_plan_t *plan, int *n)
{
    unsigned char pair[PP_MAX_DEVICES][PP_MAX_DEVICES];
    int any = 0;
    memset(pair, 0, sizeof pair);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *o = &plan->ops[k];
        if (o->role != PP_ROLE_SEND || o->link != PP_TRANSPORT_NCCL) continue;
        int a = o->device, b = plan->ops[o->peer].device;
        any = 1;
        if (pair[a][b]) continue;
        pair[a][b] = 1;
        if (job->nccl.communicators == PP_NCCL_COMMS_PAIR) n[a]++, n[b]++;
    }
    for (int d = 0; any && job->nccl.communicators != PP_NCCL_COMMS_PAIR && d < plan->n_devices;
         d++)
        n[d]++;
    const int reps = plan_replicas(plan), p = plan_pipe_devices(plan);
    for (int i = 0; reps > 1 && i < p; i++) {
        int shared = 0;
        for (int r = 0; r < reps; r++)
            for (int q = 0; q < r; q++)
                shared |=
                    job->pipeline.device_ids[r * p + i] == job->pipeline.device_ids[q * p + i];
        for (int r = 0; !shared && r < reps; r++)
            n[r * p + i]++;
    }
}

pp_status_t memory_predict(pp_mem_pred_t *m, const pp_job_t *job, const pp_plan_t *plan,
                           const pp_gpu_t *gpu, const pp_profile_t *prof)
{
    double one_mb[PP_MAX_DEVICES] = {0};
    int n_stages[PP_MAX_DEVICES] = {0};
    memset(m, 0, sizeof *m);
    if (plan->n_stages < 1 || plan->n_devices < 1 || plan->n_devices > PP_MAX_DEVICES)
        PP_FAIL(PP_ERR_INTERNAL, "memory_predict: %d stages on %d devices", plan->n_stages,
                plan->n_devices);
    m->n_devices = plan->n_devices;
    m->gpu = gpu;
    m->limit = memory_limit_bytes(job, gpu, &m->budget);
    for (int s = 0; s < plan->n_stages * plan_replicas(plan); s++) {
        const int st = s % plan->n_stages, dev = plan_stage_device(plan, st, s / plan->n_stages);
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, job, plan, st);
        pp_mem_device_t *d = &m->dev[dev];
        double slot = (double)stage_slot_bytes(&c), all = (double)stage_device_bytes(&c);
        double state = (double)stage_state_bytes(&c), kept = (double)stage_keep_bytes(&c);
        double slots = (double)c.n_slots * slot + (double)c.n_keep_slots * kept +
                       (double)c.n_wgrad_slots * stage_wgrad_slot_bytes(&c);
        d->state += state;
        d->slots += slots;
        d->workspace += all - state - slots; /* the rest of what stage_init allocates */
        one_mb[dev] += slot + kept; /* a micro-batch's whole slot: its ring slot and kept region */
        n_stages[dev]++;
    }
    int comms[PP_MAX_DEVICES] = {0};
    nccl_comms(job, plan, comms);
    for (int i = 0; i < m->n_devices; i++) {
        pp_mem_device_t *d = &m->dev[i];
        /* The context and modules (held with no stage) and what each stage holds beyond its
         * sizing functions: a profile's measurement, else the GPU row's. */
        if (prof && prof->runtime_bytes > 0)
            d->runtime = prof->runtime_bytes + n_stages[i] * prof->stage_overhead_bytes;
        else
            d->runtime = (gpu->runtime_gib + n_stages[i] * gpu->stage_gib) * GIB;
        if (comms[i]) d->runtime += (NCCL_DEVICE_GIB + comms[i] * NCCL_COMM_GIB) * GIB;
        if (plan->offload) d->runtime += PINNED_MAP_FRACTION * process_pinned(job, plan, i);
        d->total = d->state + d->workspace + d->slots + d->runtime;
        d->mb_equiv = one_mb[i] > 0 ? d->slots / one_mb[i] : 0.0; /* I->W buffers count too */
        if (d->total > m->dev[m->fullest].total) m->fullest = i;
        if (d->total > m->limit) m->n_over++;
    }
    return PP_OK;
}

void memory_verdict(const pp_mem_pred_t *m, char *buf, size_t size)
{
    const pp_mem_device_t *d = &m->dev[m->fullest];
    char has[96];
    if (m->budget)
        snprintf(has, sizeof has, "the limit is %.2f GiB (run.memory_limit)", m->limit / GIB);
    else
        snprintf(has, sizeof has, "%s has %.1f GiB", m->gpu->name, m->limit / GIB);
    if (m->n_over == 0)
        snprintf(buf, size, "fits: device %d needs %.2f GiB at most; %s", m->fullest,
                 d->total / GIB, has);
    else
        snprintf(buf, size, "does not fit: device %d needs %.2f GiB; %s (%d of %d device%s over)",
                 m->fullest, d->total / GIB, has, m->n_over, m->n_devices,
                 m->n_devices == 1 ? "" : "s");
}
