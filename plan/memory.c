/*
 * memory.c — the memory prediction of memory.h: a walk over the plan's stages, each priced with
 * stage_device_bytes (everything stage_init allocates) of plan_stage_cfg, split into state, slots
 * (activation slots and I->W buffers) and the rest (workspace).
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
        double state = (double)stage_state_bytes(&c);
        double slots =
            (double)c.n_slots * slot + (double)c.n_wgrad_slots * stage_wgrad_slot_bytes(&c);
        d->state += state;
        d->slots += slots;
        d->workspace += all - state - slots; /* the rest of what stage_init allocates */
        one_mb[dev] += slot;
        n_stages[dev]++;
    }
    for (int i = 0; i < m->n_devices; i++) {
        pp_mem_device_t *d = &m->dev[i];
        /* A profile measured the context and modules (held with no stage) and what each stage
         * holds beyond its sizing functions; without one, the GPU row's share stands for both. */
        if (prof && prof->runtime_bytes > 0)
            d->runtime = prof->runtime_bytes + n_stages[i] * prof->stage_overhead_bytes;
        else
            d->runtime = gpu->runtime_gib * GIB;
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
        snprintf(buf, size, "does not fit: device %d needs %.1f GiB; %s (%d of %d device%s over)",
                 m->fullest, d->total / GIB, has, m->n_over, m->n_devices,
                 m->n_devices == 1 ? "" : "s");
}
