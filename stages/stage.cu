/*
 * stage.cu — one pipeline stage on one GPU (the contract is stages/stage.h): parameters and their
 * init, the allocations, the slot accessors, AdamW, and the host copies the checks use. The
 * forward and backward are in stage_pass.cu.
 *
 * Memory, all allocated by stage_init on the current device and nothing after it; the layouts,
 * with the bytes of every part, are in stage_layout.c (and docs/memory.md):
 *   state      parameters in the storage dtype; an fp32 master copy when that is bf16 (for fp32
 *              the parameters are the master); fp32 gradients; AdamW m and v (one allocation);
 *              the vocabulary permutation and the loss accumulator (one small allocation).
 *              Tensors sit at the offsets of model/model.h (aligned, gaps zero).
 *   slots      one allocation per slot (n_slots): first what the backward reads, then y, dx, dy;
 *              under cfg->offload_keep the smallest of what the backward reads lives instead in
 *              one of n_keep_slots kept regions (one per micro-batch held at once), the slots
 *              being a ring of the rest (stage_slot_keep joins the two for a pass).
 *              Per block, bytes at the reference shape (N = 4096 tokens, C = 1024, bf16, fused
 *              attention), kept under none / selective / full (else rebuilt by the backward):
 *                block output  N·C     8 MiB      n s f
 *                ln1           N·C     8 MiB      n
 *                ln1 mean+rstd 2N fp32 32 KiB     n s
 *                qkv           3N·C    24 MiB     n s     (unfused: q, k, v 24 MiB, P 128 MiB n)
 *                lse           BHT fp32 256 KiB   n s
 *                atty, x2      2 N·C   16 MiB     n s
 *                ln2           N·C     8 MiB      n
 *                ln2 mean+rstd 2N fp32 32 KiB     n s
 *                fc            4N·C    32 MiB     n s
 *                gelu          4N·C    32 MiB     n
 *              = 132.3 / 84.3 / 12.0 MiB a block with the stage's x, dx, dy shared over 6 blocks
 *              (219.0 before the I->W parts left the slot; docs/memory.md has every part).
 *   I->W       one allocation per I->W buffer (n_wgrad_slots): what I leaves for W when the two
 *              run apart (d_fc 32, d_ln2 8, d_x2 8, d_qkv 24, d_ln1 8, the gradient between
 *              blocks 8 MiB a block at the reference shape; fused attention at d = 64: d_qkv's
 *              column sums, 0.38 MiB; the LayerNorm input gradients' column sums, 2 × 1.5 MiB);
 *              taken by I, released by W.
 *   workspace  the cuBLAS workspace (pp_gemm_t) and one area carved by stage_layout_workspace:
 *              the rebuild area, a plain B's one-block I->W parts, and the scratch (forward,
 *              backward-input and backward-weight groups, which never run at once, overlap).
 * Every call enqueues on the stream it is given and never synchronizes, except the documented
 * synchronous helpers at the end.
 */
#include "stage_impl.h"

#include "common/pp_cuda.h"
#include "kernels/kernels.h"
#include "data.h"
#include "model/model.h"
#include "stage_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the stage object ------------------------------------------------------------------------ */

static pp_status_t check_cfg(const pp_stage_cfg_t *c)
{
    if (c->hidden <= 0 || c->heads <= 0 || c->seq_len <= 0 || c->vocab <= 0 ||
        c->micro_batch_size <= 0)
        PP_FAIL(PP_ERR_INPUT,
                "stage: hidden %d, heads %d, seq_len %d, vocab %d, micro_batch_size %d must all "
                "be positive",
                c->hidden, c->heads, c->seq_len, c->vocab, c->micro_batch_size);
    if (c->hidden % c->heads != 0)
        PP_FAIL(PP_ERR_INPUT, "stage: hidden %d is not a multiple of heads %d", c->hidden,
                c->heads);
    if (c->n_layers < 0 || c->first_layer < 0 || c->first_layer + c->n_layers > c->total_layers)
        PP_FAIL(PP_ERR_INPUT, "stage: blocks %d..%d outside the model's %d", c->first_layer,
                c->first_layer + c->n_layers - 1, c->total_layers);
    if (c->n_slots <= 0)
        PP_FAIL(PP_ERR_INPUT, "stage: needs at least one slot (got %d)", c->n_slots);
    if (c->n_wgrad_slots < 0)
        PP_FAIL(PP_ERR_INPUT, "stage: n_wgrad_slots %d is negative", c->n_wgrad_slots);
    if (c->offload_keep < 0 || c->n_keep_slots < 0 ||
        (c->offload_keep > 0 && stage_keep_bytes(c) > 0 && c->n_keep_slots < 1))
        PP_FAIL(PP_ERR_INPUT, "stage: offload_keep %d needs kept regions (n_keep_slots %d)",
                c->offload_keep, c->n_keep_slots);
    if ((int)c->recompute < 0 || c->recompute >= PP_RECOMPUTE_COUNT)
        PP_FAIL(PP_ERR_INPUT, "stage: unknown recompute setting %d", (int)c->recompute);
    if (c->dtype != PP_DTYPE_FP32 && c->dtype != PP_DTYPE_BF16)
        PP_FAIL(PP_ERR_INPUT, "stage: unknown dtype %d", (int)c->dtype);
    if ((double)c->micro_batch_size * c->seq_len *
            (c->vocab > 4 * c->hidden ? c->vocab : 4 * c->hidden) >
        2147483647.0)
        PP_FAIL(PP_ERR_INPUT,
                "stage: micro-batch of %d x %d tokens is too large for 32-bit indexing",
                c->micro_batch_size, c->seq_len);
    return PP_OK;
}

/* cudaMalloc with a message that says what did not fit. */
static pp_status_t dev_alloc(void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        fprintf(stderr, "%s:%d: stage_init: cannot allocate %.3f GiB for %s: %s\n", __FILE__,
                __LINE__, (double)bytes / (1 << 30), what, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return e == cudaErrorMemoryAllocation ? PP_ERR_DEVICE : PP_ERR_CUDA;
    }
    return PP_OK;
}

/* 1 when the fp32 master is this replica's parts only (zero1 with a separate master). */
static int sharded_master(const pp_stage_t *st)
{
    return st->n_shard < st->n_padded && st->cfg.dtype != PP_DTYPE_FP32;
}

/* The parameters from the seed: every value in fp32 (into the master, or, where the master holds
 * only this replica's parts, into the gradients first, which are zeroed after), then the storage
 * copy and the replica's parts of the master. */
static pp_status_t init_params(pp_stage_t *st)
{
    const pp_stage_cfg_t *c = &st->cfg;
    float *all = sharded_master(st) ? st->grads : st->master;
    PP_CUDA_CHECK(cudaMemsetAsync(all, 0, st->n_padded * sizeof(float), 0));
    for (int i = 0; i < st->n_tensors; i++) {
        const pp_param_tensor_t *t = &st->tensors[i];
        PP_CHECK(stage_init_tensor(
            all + t->offset, t->numel, c->seed, model_tensor_id(t->kind, t->layer),
            model_init_std(t->kind, c->total_layers), model_init_constant(t->kind), 0));
    }
    if (c->dtype != PP_DTYPE_FP32)
        PP_CHECK(cast_fp32_to_dtype(st->params, all, st->n_padded, c->dtype, 0));
    if (!sharded_master(st)) return PP_OK;
    size_t lo, n, at;
    for (size_t b = 0; stage_shard_part(c, c->optimizer_shard, b, &lo, &n, &at) > 0; b++)
        PP_CUDA_CHECK(cudaMemcpyAsync(st->master + at, all + lo, n * sizeof(float),
                                      cudaMemcpyDeviceToDevice, 0));
    PP_CUDA_CHECK(cudaMemsetAsync(st->grads, 0, st->n_padded * sizeof(float), 0));
    return PP_OK;
}

/* zero1: the replica's parts of the gradients, in buckets; the shards must divide every bucket. */
static pp_status_t init_shard(pp_stage_t *st)
{
    const pp_stage_cfg_t *c = &st->cfg;
    st->n_shard = st->n_padded;
    if (c->optimizer_shards <= 1 || !c->with_optimizer) return PP_OK;
    if (c->optimizer_shard < 0 || c->optimizer_shard >= c->optimizer_shards)
        PP_FAIL(PP_ERR_INTERNAL, "stage_init: optimizer shard %d of %d", c->optimizer_shard,
                c->optimizer_shards);
    st->n_shard = stage_shard_values(c);
    if (st->n_shard == 0)
        PP_FAIL(PP_ERR_INPUT,
                "zero1: %d replicas do not divide the stage's %zu gradient values into equal "
                "parts of every bucket of %zu (use a power of two)",
                c->optimizer_shards, st->n_padded, c->shard_bucket);
    return PP_OK;
}

/* Parameters, master copy, gradients, AdamW state, the permutation table and loss accumulator. */
static pp_status_t init_state(pp_stage_t *st, int32_t *perm_host)
{
    const pp_stage_cfg_t *cfg = &st->cfg;
    const size_t P = st->n_padded, es = pp_dtype_size(cfg->dtype);
    PP_CHECK(init_shard(st));
    const size_t S = st->n_shard;
    PP_CHECK(dev_alloc(&st->params, P * es, "parameters"));
    if (cfg->dtype == PP_DTYPE_FP32)
        st->master = (float *)st->params;
    else
        PP_CHECK(dev_alloc((void **)&st->master, S * sizeof(float), "fp32 master parameters"));
    PP_CHECK(dev_alloc((void **)&st->grads, P * sizeof(float), "gradients"));
    PP_CUDA_CHECK(cudaMemsetAsync(st->grads, 0, P * sizeof(float), 0));
    if (cfg->with_optimizer) {
        PP_CHECK(dev_alloc((void **)&st->adam, 2 * S * sizeof(float), "AdamW state"));
        PP_CUDA_CHECK(cudaMemsetAsync(st->adam, 0, 2 * S * sizeof(float), 0));
    }
    PP_CHECK(dev_alloc((void **)&st->aux, stage_layout_aux(cfg), "permutation table"));
    carver_t c = {st->aux, 0};
    st->perm = (int32_t *)carve(&c, (size_t)cfg->vocab * sizeof(int32_t));
    st->loss_acc = (float *)carve(&c, sizeof(float));
    data_perm_fill(cfg->seed, cfg->vocab, perm_host);
    PP_CUDA_CHECK(cudaMemcpy(st->perm, perm_host, (size_t)cfg->vocab * sizeof(int32_t),
                             cudaMemcpyHostToDevice));
    PP_CUDA_CHECK(cudaMemsetAsync(st->loss_acc, 0, sizeof(float), 0));
    return init_params(st);
}

/* cuBLAS's workspace and ours (rebuild area, a plain B's I→W block, scratch). */
static pp_status_t init_workspace(pp_stage_t *st)
{
    const pp_stage_cfg_t *cfg = &st->cfg;
    PP_CHECK(gemm_init(&st->gemm, PP_GEMM_WORKSPACE_BYTES));
    size_t bytes = stage_layout_workspace(cfg, st->fused_attention, NULL, NULL);
    PP_CHECK(dev_alloc((void **)&st->work_mem, bytes, "workspace"));
    PP_CUDA_CHECK(cudaMemsetAsync(st->work_mem, 0, bytes, 0));
    stage_layout_workspace(cfg, st->fused_attention, st->work_mem, &st->ws);
    return PP_OK;
}

/* The kept regions (cfg->offload_keep), the activation slots (each slot's kept parts in the
 * kept region of its index, modulo their count, until stage_slot_keep says otherwise) and the I→W
 * buffers, each one allocation carved by its layout. */
static pp_status_t init_slots(pp_stage_t *st)
{
    const pp_stage_cfg_t *cfg = &st->cfg;
    const size_t L1 = (size_t)cfg->n_layers + 1;
    slot_split_t sp;
    const size_t slot_bytes = stage_layout_slot(cfg, st->fused_attention, NULL, NULL, NULL, &sp);
    st->keep_bytes = sp.kept;
    st->n_keep = sp.kept > 0 ? cfg->n_keep_slots : 0;
    for (int k = 0; k < st->n_keep; k++) {
        PP_CHECK(dev_alloc((void **)&st->keep_mem[k], sp.kept, "a kept activation region"));
        PP_CUDA_CHECK(cudaMemsetAsync(st->keep_mem[k], 0, sp.kept, 0));
    }
    for (int i = 0; i < st->n_slots; i++) {
        slot_t *sl = &st->slots[i];
        sl->res = (void **)calloc(L1, sizeof(void *));
        sl->dres = (void **)calloc(L1, sizeof(void *));
        sl->blocks = (block_bufs_t *)calloc(L1, sizeof(block_bufs_t));
        if (!sl->res || !sl->dres || !sl->blocks)
            PP_FAIL(PP_ERR_NOMEM, "stage_init: out of host memory");
        PP_CHECK(dev_alloc((void **)&sl->mem, slot_bytes, "an activation slot"));
        PP_CUDA_CHECK(cudaMemsetAsync(sl->mem, 0, slot_bytes, 0));
        st->keep_of_slot[i] = st->n_keep > 0 ? i % st->n_keep : -1;
        stage_layout_slot(cfg, st->fused_attention,
                          st->n_keep > 0 ? st->keep_mem[st->keep_of_slot[i]] : NULL, sl->mem, sl,
                          NULL);
        st->wgrad_of_slot[i] = -1;
    }
    for (int i = 0; i < st->n_wgrad; i++) {
        wgrad_t *g = &st->wgrads[i];
        g->dres = (void **)calloc(L1, sizeof(void *));
        g->blocks = (block_bufs_t *)calloc(L1, sizeof(block_bufs_t));
        if (!g->dres || !g->blocks) PP_FAIL(PP_ERR_NOMEM, "stage_init: out of host memory");
        PP_CHECK(dev_alloc((void **)&g->mem, st->wgrad_bytes, "an I->W gradient buffer"));
        stage_layout_wgrad(cfg, st->fused_attention, g->mem, g);
    }
    return PP_OK;
}

pp_status_t stage_init(pp_stage_t **out, const pp_stage_cfg_t *cfg)
{
    pp_status_t s = PP_OK;
    pp_stage_t *st = NULL;
    int32_t *perm_host = NULL;
    *out = NULL;
    PP_CHECK(check_cfg(cfg));
    PP_CHECK(stage_attention_env_check());
    st = (pp_stage_t *)calloc(1, sizeof *st);
    PP_ALLOC_CHECK(st);
    st->cfg = *cfg;
    st->shape = stage_shape_of(cfg);
    st->fused_attention = stage_attention_fused(cfg);
    st->fused_wgrad = stage_wgrad_fused();
    st->qkv_sums = st->fused_attention && st->fused_wgrad && cfg->n_layers > 0 &&
                   attention_flash_bwd_colsum_ok(cfg->hidden / cfg->heads);
    st->ln_sums = stage_layernorm_sums() && cfg->n_layers > 0;
    st->n_slots = cfg->n_slots;
    st->n_wgrad = cfg->n_wgrad_slots;
    st->wgrad_bytes = stage_layout_wgrad(cfg, st->fused_attention, NULL, NULL);
    st->offload_bytes = stage_offload_bytes(cfg);
    st->n_tensors = model_tensor_count(&st->shape);
    st->tensors = (pp_param_tensor_t *)calloc((size_t)st->n_tensors + 1, sizeof *st->tensors);
    st->slots = (slot_t *)calloc((size_t)cfg->n_slots, sizeof *st->slots);
    st->wgrad_of_slot = (int *)calloc((size_t)cfg->n_slots, sizeof(int));
    st->keep_of_slot = (int *)calloc((size_t)cfg->n_slots, sizeof(int));
    st->keep_mem = (char **)calloc((size_t)cfg->n_keep_slots + 1, sizeof(char *));
    st->wgrads = (wgrad_t *)calloc((size_t)st->n_wgrad + 1, sizeof *st->wgrads);
    st->wgrad_busy = (unsigned char *)calloc((size_t)st->n_wgrad + 1, 1);
    perm_host = (int32_t *)malloc((size_t)cfg->vocab * sizeof *perm_host);
    if (!st->tensors || !st->slots || !st->wgrad_of_slot || !st->keep_of_slot || !st->keep_mem ||
        !st->wgrads || !st->wgrad_busy || !perm_host) {
        fprintf(stderr, "%s:%d: stage_init: out of host memory\n", __FILE__, __LINE__);
        s = PP_ERR_NOMEM;
        goto fail;
    }
    st->n_padded = model_tensors(&st->shape, st->tensors, &st->n_params);
    PP_CHECK_GOTO(init_state(st, perm_host), s, fail);
    PP_CHECK_GOTO(init_workspace(st), s, fail);
    PP_CHECK_GOTO(init_slots(st), s, fail);
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(0), s, fail);
    free(perm_host);
    *out = st;
    return PP_OK;
fail:
    free(perm_host);
    stage_free(st);
    return s;
}

void stage_free(pp_stage_t *st)
{
    if (!st) return;
    /* Nothing may still use the buffers; frees below synchronize the device anyway. */
    if (st->slots)
        for (int i = 0; i < st->n_slots; i++) {
            cudaFree(st->slots[i].mem);
            free(st->slots[i].res);
            free(st->slots[i].dres);
            free(st->slots[i].blocks);
        }
    if (st->wgrads)
        for (int i = 0; i < st->n_wgrad; i++) {
            cudaFree(st->wgrads[i].mem);
            free(st->wgrads[i].dres);
            free(st->wgrads[i].blocks);
        }
    if (st->keep_mem)
        for (int k = 0; k < st->n_keep; k++)
            cudaFree(st->keep_mem[k]);
    free(st->keep_mem);
    free(st->keep_of_slot);
    free(st->slots);
    free(st->wgrads);
    free(st->wgrad_of_slot);
    free(st->wgrad_busy);
    cudaFree(st->work_mem);
    gemm_free(&st->gemm);
    cudaFree(st->aux);
    cudaFree(st->adam);
    cudaFree(st->grads);
    if (st->master != st->params) cudaFree(st->master);
    cudaFree(st->params);
    free(st->tensors);
    free(st);
}

pp_status_t stage_slot_to_host(pp_stage_t *st, int slot, void *host, cudaStream_t stream)
{
    if (!st || slot < 0 || slot >= st->n_slots || !host)
        PP_FAIL(PP_ERR_INTERNAL, "stage_slot_to_host: slot %d, host %p", slot, host);
    PP_CUDA_CHECK(cudaMemcpyAsync(host, st->slots[slot].mem, st->offload_bytes,
                                  cudaMemcpyDeviceToHost, stream));
    return PP_OK;
}

pp_status_t stage_slot_from_host(pp_stage_t *st, int slot, const void *host, cudaStream_t stream)
{
    if (!st || slot < 0 || slot >= st->n_slots || !host)
        PP_FAIL(PP_ERR_INTERNAL, "stage_slot_from_host: slot %d, host %p", slot, host);
    PP_CUDA_CHECK(cudaMemcpyAsync(st->slots[slot].mem, host, st->offload_bytes,
                                  cudaMemcpyHostToDevice, stream));
    return PP_OK;
}

pp_status_t stage_slot_keep(pp_stage_t *st, int slot, int keep)
{
    if (!st || slot < 0 || slot >= st->n_slots)
        PP_FAIL(PP_ERR_INTERNAL, "stage_slot_keep: slot %d outside 0..%d", slot,
                st ? st->n_slots - 1 : -1);
    if (st->n_keep == 0 || keep == st->keep_of_slot[slot]) return PP_OK;
    if (keep < 0 || keep >= st->n_keep)
        PP_FAIL(PP_ERR_INTERNAL, "stage_slot_keep: kept region %d outside 0..%d", keep,
                st->n_keep - 1);
    slot_t *sl = &st->slots[slot];
    stage_layout_slot(&st->cfg, st->fused_attention, st->keep_mem[keep], sl->mem, sl, NULL);
    st->keep_of_slot[slot] = keep;
    return PP_OK;
}

void *stage_slot_x(pp_stage_t *st, int slot)
{
    if (st->cfg.is_first || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].res[0];
}

void *stage_slot_y(pp_stage_t *st, int slot)
{
    if (st->cfg.is_last || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].res[st->cfg.n_layers];
}

void *stage_slot_dy(pp_stage_t *st, int slot)
{
    if (st->cfg.is_last || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].dres[st->cfg.n_layers];
}

void *stage_slot_dx(pp_stage_t *st, int slot)
{
    if (st->cfg.is_first || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].dres[0];
}

/* ---- gradients, optimizer, loss ---------------------------------------------------------------
 */

pp_status_t stage_zero_grads(pp_stage_t *st, cudaStream_t stream)
{
    PP_CUDA_CHECK(cudaMemsetAsync(st->grads, 0, st->n_padded * sizeof(float), stream));
    PP_CUDA_CHECK(cudaMemsetAsync(st->loss_acc, 0, sizeof(float), stream));
    return PP_OK;
}

pp_status_t stage_optimizer_step(pp_stage_t *st, const pp_adamw_cfg_t *opt, int step,
                                 cudaStream_t stream)
{
    if (!st->adam)
        PP_FAIL(PP_ERR_INTERNAL, "stage_optimizer_step: the stage was built without AdamW state "
                                 "(with_optimizer = 0)");
    if (step < 1) PP_FAIL(PP_ERR_INTERNAL, "stage_optimizer_step: step %d, counts from 1", step);
    const pp_dtype_t dt = st->cfg.dtype;
    const size_t es = pp_dtype_size(dt);
    float *m = st->adam, *v = st->adam + st->n_shard;
    if (st->n_shard == st->n_padded) {
        for (int i = 0; i < st->n_tensors; i++) {
            const pp_param_tensor_t *t = &st->tensors[i];
            void *storage = (char *)st->params + t->offset * es;
            PP_CHECK(adamw_update_counted(
                st->master + t->offset, storage, st->grads + t->offset, m + t->offset,
                v + t->offset, t->numel, opt->lr, opt->beta1, opt->beta2, opt->eps,
                t->decay ? opt->weight_decay : 0.0f, step, st->d_opt_step, dt, stream));
        }
        return PP_OK;
    }
    /* zero1: this replica's part of each bucket, tensor by tensor (weight decay is a tensor's);
     * values x of the stage at x - lo + at of the sharded state */
    size_t lo, n, at;
    for (size_t b = 0; stage_shard_part(&st->cfg, st->cfg.optimizer_shard, b, &lo, &n, &at) > 0;
         b++)
        for (int i = 0; i < st->n_tensors; i++) {
            const pp_param_tensor_t *t = &st->tensors[i];
            size_t x0 = t->offset > lo ? t->offset : lo;
            size_t x1 = t->offset + t->numel < lo + n ? t->offset + t->numel : lo + n;
            if (x0 >= x1) continue;
            size_t k = x0 - lo + at; /* in the sharded state */
            float *master = sharded_master(st) ? st->master + k : st->master + x0;
            PP_CHECK(adamw_update_counted(master, (char *)st->params + x0 * es, st->grads + x0,
                                          m + k, v + k, x1 - x0, opt->lr, opt->beta1, opt->beta2,
                                          opt->eps, t->decay ? opt->weight_decay : 0.0f, step,
                                          st->d_opt_step, dt, stream));
        }
    return PP_OK;
}

pp_status_t stage_bind_counters(pp_stage_t *st, const int *d_data_base, const int *d_opt_step)
{
    st->d_data_base = d_data_base;
    st->d_opt_step = d_opt_step;
    return PP_OK;
}

pp_status_t stage_loss_read(pp_stage_t *st, double *out, cudaStream_t stream)
{
    float v = 0.0f;
    *out = 0.0;
    if (!st->cfg.is_last) PP_FAIL(PP_ERR_INTERNAL, "stage_loss_read: not the last stage");
    PP_CUDA_CHECK(cudaMemcpyAsync(&v, st->loss_acc, sizeof v, cudaMemcpyDeviceToHost, stream));
    PP_CUDA_CHECK(cudaStreamSynchronize(stream));
    *out = v;
    return PP_OK;
}

float *stage_grads(pp_stage_t *st, size_t *count)
{
    *count = st->n_padded;
    return st->grads;
}

void *stage_params(pp_stage_t *st)
{
    return st->params;
}

size_t stage_n_params(const pp_stage_t *st)
{
    return st->n_params;
}

/* Copy an fp32 device buffer laid out as st->tensors to host, packed. Synchronizes the device. */
static pp_status_t to_host_packed(pp_stage_t *st, const float *dev, float *host)
{
    PP_CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < st->n_tensors; i++) {
        const pp_param_tensor_t *t = &st->tensors[i];
        PP_CUDA_CHECK(cudaMemcpy(host + t->packed, dev + t->offset, t->numel * sizeof(float),
                                 cudaMemcpyDeviceToHost));
    }
    return PP_OK;
}

pp_status_t stage_grads_to_host(pp_stage_t *st, float *host)
{
    return to_host_packed(st, st->grads, host);
}

/* The fp32 master values (for bf16 storage, the forward uses them rounded to bf16). */
pp_status_t stage_params_to_host(pp_stage_t *st, float *host)
{
    if (!sharded_master(st)) return to_host_packed(st, st->master, host);
    /* zero1 in bf16: the master holds this replica's parts; the storage copy every value */
    float *all = NULL;
    PP_CUDA_CHECK(cudaMalloc((void **)&all, st->n_padded * sizeof(float)));
    pp_status_t s = cast_dtype_to_fp32(all, st->params, st->n_padded, st->cfg.dtype, 0);
    if (s == PP_OK) s = to_host_packed(st, all, host);
    cudaFree(all);
    return s;
}
