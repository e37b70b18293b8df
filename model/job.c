/*
 * job.c — the job's small queries (tokens, FLOPs, shared GPUs, where a boundary's ends are and
 * its transport) and its release (job.h).
 */
#include "job.h"

#include <stdlib.h>
#include <string.h>

int job_shared_gpu(const pp_job_t *job, int *a, int *b)
{
    const pp_job_pipeline_t *pl = &job->pipeline;
    for (int j = 1; j < job_devices_total(job) && j < PP_MAX_DEVICES; j++)
        for (int i = 0; i < j; i++)
            if (pl->device_ids[i] == pl->device_ids[j]) {
                if (a) *a = i;
                if (b) *b = j;
                return 1;
            }
    return 0;
}

pp_reach_t job_boundary_reach(const pp_job_t *job, int a, int b)
{
    if (a == b) return PP_REACH_DEVICE;
    if (a < 0 || b < 0 || a >= PP_MAX_DEVICES || b >= PP_MAX_DEVICES) return PP_REACH_PROCESS;
    const pp_job_procs_t *pr = &job->procs;
    const int n = job_devices_total(job);
    if (pr->host_of[a] != pr->host_of[b]) return PP_REACH_NETWORK;
    /* CUDA ordinals name a host's own GPUs: equal ones on one host are one GPU (a device past the
     * pipeline's is its own) */
    int cuda_a = a < n ? job->pipeline.device_ids[a] : a,
        cuda_b = b < n ? job->pipeline.device_ids[b] : b;
    if (cuda_a == cuda_b) return PP_REACH_GPU;
    return pr->rank_of[a] != pr->rank_of[b] ? PP_REACH_HOST : PP_REACH_PROCESS;
}

pp_transport_t job_boundary_transport(const pp_job_t *job, int a, int b)
{
    return transport_for_boundary(job_boundary_reach(job, a, b), job->pipeline.transport);
}

double job_tokens_per_step(const pp_job_t *job, int m)
{
    return (double)job_replicas(job) * m * job->pipeline.micro_batch_size * job->model.seq_len;
}

int job_device_host(const pp_job_t *job, int i)
{
    if (i < 0 || i >= PP_MAX_DEVICES) return 0;
    return job->procs.n_procs > 1 ? job->procs.host_of[i] : i / PP_HOST_GPUS;
}

int job_copy_link(const pp_job_t *job, int i)
{
    for (int j = 0; j < i && j < PP_MAX_DEVICES; j++) {
        pp_reach_t r = job_boundary_reach(job, j, i);
        if (r == PP_REACH_DEVICE || r == PP_REACH_GPU) return j;
    }
    return i;
}

double job_flops_per_step(const pp_job_t *job, int m)
{
    double h = job->model.hidden, s = job->model.seq_len;
    double block = 24.0 * h * h + 4.0 * s * h; /* QKV 6h², proj 2h², MLP 16h², QKᵀ + PV 4sh */
    double head = 2.0 * h * job->model.vocab;
    double forward_per_token = job->model.layers * block + head;
    return 3.0 * forward_per_token * job_tokens_per_step(job, m);
}

void job_stage_cfg(pp_stage_cfg_t *c, const pp_job_t *job)
{
    memset(c, 0, sizeof *c);
    c->hidden = job->model.hidden;
    c->heads = job->model.heads;
    c->seq_len = job->model.seq_len;
    c->vocab = job->model.vocab;
    c->micro_batch_size = job->pipeline.micro_batch_size;
    c->total_layers = job->model.layers;
    c->dtype = job->model.dtype;
    c->seed = job->run.seed;
    c->recompute = job->run.recompute;
    c->with_optimizer = job->run.optimizer == PP_OPT_ADAMW;
    c->optimizer_shards =
        job->run.optimizer_sharding == PP_SHARD_ZERO1 && c->with_optimizer ? job_replicas(job) : 1;
}

void job_free(pp_job_t *job)
{
    if (!job) return;
    free(job->path);
    free(job->name);
    free(job->cost_src.profile);
    job->path = job->name = job->cost_src.profile = NULL;
}
