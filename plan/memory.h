/*
 * memory.h — the device memory a plan will take, predicted before anything is allocated, with the
 * sizing functions the stage allocates with (model/stage_size.h) on the stage configurations the
 * executor builds (stage_cfg.h), plus the runtime's own share; and the fit check against a GPU.
 *
 * Per device: state (parameters, fp32 master, gradients, AdamW m and v), workspace (cuBLAS and
 * scratch), activation slots (each stage's slot count from the plan's liveness times the bytes of
 * one slot, plus the I->W buffers of a split backward) and the runtime (CUDA context, cuBLAS,
 * loaded kernels: the GPU row's estimate, or what a profile measured). The slots are also counted
 * in micro-batch equivalents — bytes held / bytes of one micro-batch over the device's layers — so
 * interleaved and plain schedules compare on one scale. Plain C; pure and cheap, safe in a loop;
 * prints nothing.
 */
#ifndef PP_MEMORY_H
#define PP_MEMORY_H

#include "common/pp_status.h"
#include "model/job.h"
#include "model/gpu.h"
#include "plan.h"
#include "model/profile.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_mem_device {
    double state;     /* parameters, master copy, gradients, optimizer state, bytes */
    double workspace; /* cuBLAS workspace and scratch of the device's stages, bytes */
    double slots;     /* activation slots and I->W buffers of the device's stages, bytes */
    double runtime;   /* the runtime's share, bytes */
    double total;     /* the sum: the device's predicted peak */
    double mb_equiv;  /* slots in micro-batches of the device's layers */
} pp_mem_device_t;

typedef struct pp_mem_pred {
    int n_devices;
    pp_mem_device_t dev[PP_MAX_DEVICES];
    const pp_gpu_t *gpu; /* the GPU checked against */
    double limit;        /* its memory, bytes; or run.memory_limit's (memory_limit_bytes) */
    int budget;          /* 1: limit is run.memory_limit's, or offload auto's default */
    int fullest;         /* the device with the largest total */
    int n_over;          /* devices whose total exceeds the limit */
} pp_mem_pred_t;

/* The part of a GPU's memory that run.offload: auto leaves unplanned by default (fragmentation,
 * NCCL's buffers, the allocator's rounding), when run.memory_limit is not set. */
#define MEMORY_AUTO_MARGIN 0.05

/* The bytes a device may take: run.memory_limit when set; under offload auto, gpu's memory less
 * MEMORY_AUTO_MARGIN of it; else gpu's memory. *budget (may be NULL) gets 1 for the first two. */
double memory_limit_bytes(const pp_job_t *job, const pp_gpu_t *gpu, int *budget);

/* Predict every device's memory for `plan` made from `job`; the runtime's share is prof's when
 * given, else gpu's; checked against memory_limit_bytes. Fails only on a plan without stages
 * (PP_ERR_INTERNAL). */
pp_status_t memory_predict(pp_mem_pred_t *m, const pp_job_t *job, const pp_plan_t *plan,
                           const pp_gpu_t *gpu, const pp_profile_t *prof);

/* One line: "fits: device 0 needs 6.78 GiB at most; h100 has 79.2 GiB" or "does not fit: device
 * 0 needs 93.1 GiB; h100 has 79.2 GiB (2 of 4 devices over)"; under a budget "the limit is 75.2
 * GiB (run.memory_limit)" in place of what the GPU has. */
void memory_verdict(const pp_mem_pred_t *m, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PP_MEMORY_H */
