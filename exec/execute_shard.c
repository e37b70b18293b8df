/*
 * execute_shard.c — run.optimizer_sharding zero1 in the executor (see execute_internal.h).
 *
 * A stage's gradients are cut in the reduction's buckets and each bucket in d equal parts
 * (stage_shard_part); replica r's REDUCE ops reduce-scatter, so it holds the sum of its own part
 * of every bucket, its stage updates only those parameters (its sharded master and moments), and
 * then every replica's part is gathered into every replica. Over NCCL that is one in-place
 * all-gather per bucket on each device's compute stream, the replicas' calls in one group; where
 * the replicas of a stage share a GPU (p2p_reduce_local) replica 0's compute stream copies the
 * parts between them, after waiting for the others, which then wait for it.
 */
#include "execute_internal.h"

/* The buffer a gather moves within: the parameters' storage copy or the gradients, and its
 * element size. */
static char *parts_of(pp_stage_t *st, int grads, pp_dtype_t dt, size_t *es)
{
    size_t n = 0;
    *es = grads ? sizeof(float) : pp_dtype_size(dt);
    return grads ? (char *)stage_grads(st, &n) : (char *)stage_params(st);
}

/* Stage s's gather where its replicas share a GPU: copies on replica 0's compute stream. */
static pp_status_t gather_local(exec_t *x, int s, int grads)
{
    const pp_plan_t *plan = x->plan;
    const pp_stage_cfg_t *c = &x->scfg[s];
    const int d = x->replicas, d0 = plan_stage_device(plan, s, 0);
    cudaStream_t s0 = x->w.stream[d0][PP_ROLE_COMPUTE];
    char *buf[PP_MAX_DEVICES];
    size_t es = 0;
    for (int r = 0; r < d; r++) {
        const int dev = plan_stage_device(plan, s, r);
        buf[r] = parts_of(*exec_stage(x, r, s), grads, c->dtype, &es);
        if (r == 0) continue;
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[dev]));
        PP_CUDA_CHECK(cudaEventRecord(x->shard_ev[dev], x->w.stream[dev][PP_ROLE_COMPUTE]));
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d0]));
        PP_CUDA_CHECK(cudaStreamWaitEvent(s0, x->shard_ev[dev], 0));
    }
    PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[d0]));
    size_t lo, n, at;
    for (size_t b = 0; stage_shard_part(c, 0, b, &lo, &n, &at) > 0; b++)
        for (int r = 0; r < d; r++)
            for (int q = 0; q < d; q++)
                if (q != r)
                    PP_CUDA_CHECK(cudaMemcpyAsync(buf[q] + (lo + r * n) * es,
                                                  buf[r] + (lo + r * n) * es, n * es,
                                                  cudaMemcpyDeviceToDevice, s0));
    PP_CUDA_CHECK(cudaEventRecord(x->shard_ev[d0], s0));
    for (int r = 1; r < d; r++) {
        const int dev = plan_stage_device(plan, s, r);
        PP_CUDA_CHECK(cudaSetDevice(x->w.cuda[dev]));
        PP_CUDA_CHECK(cudaStreamWaitEvent(x->w.stream[dev][PP_ROLE_COMPUTE], x->shard_ev[d0], 0));
    }
    return PP_OK;
}

/* Stage s's gather over NCCL: for each bucket, every owned replica's in-place all-gather. */
static pp_status_t gather_nccl(exec_t *x, int s, int grads)
{
    const pp_plan_t *plan = x->plan;
    const pp_stage_cfg_t *c = &x->scfg[s];
    size_t lo, n, at;
    for (size_t b = 0; stage_shard_part(c, 0, b, &lo, &n, &at) > 0; b++) {
        PP_CHECK(p2p_pair_begin(x->p2p, PP_TRANSPORT_NCCL));
        pp_status_t st = PP_OK;
        for (int r = 0; r < x->replicas && st == PP_OK; r++) {
            pp_stage_t *stage = *exec_stage(x, r, s);
            if (!stage) continue; /* another process's */
            const int dev = plan_stage_device(plan, s, r);
            size_t es;
            char *buf = parts_of(stage, grads, c->dtype, &es);
            st = p2p_all_gather(x->p2p, dev, buf + lo * es, n * x->replicas * es,
                                x->w.stream[dev][PP_ROLE_COMPUTE]);
        }
        pp_status_t end = p2p_pair_end(x->p2p, PP_TRANSPORT_NCCL); /* also after a failure */
        PP_CHECK(st);
        PP_CHECK(end);
    }
    return PP_OK;
}

pp_status_t exec_gather_parts(exec_t *x, int grads)
{
    for (int s = 0; s < x->plan->n_stages; s++) {
        const int d0 = x->plan->stage_device[s];
        if (p2p_reduce_local(x->p2p, d0))
            PP_CHECK(gather_local(x, s, grads));
        else
            PP_CHECK(gather_nccl(x, s, grads));
    }
    return PP_OK;
}
