/*
 * execute.h — run a plan on the GPUs and measure it.
 *
 * The executor builds every stage on its device, allocates the activation slots the plan asks for
 * (nothing per step), creates one stream per role per device (communication streams at the higher
 * priority), and enqueues each training step in plan order without host synchronization: every
 * dependency across streams or devices is an event recorded by the producer and waited on by the
 * consumer. With graphs on, the first step runs eagerly (it warms up cuBLAS and NCCL), the second
 * is captured once into a CUDA graph spanning every device and stream, and every later step is
 * one graph launch, so the host's per-kernel launch cost leaves the step. The step-dependent
 * values (data index, optimizer step) live in device counters copied at the start of each step.
 * It reads the device clock around every op (when timing is on) and returns a measured
 * timeline of the median step for the report. This header is plain C; the implementation uses
 * CUDA, cuBLAS and NCCL.
 */
#ifndef PP_EXECUTE_H
#define PP_EXECUTE_H

#include "common/pp_status.h"
#include "model/job.h"
#include "run/executor.h"
#include "plan/plan.h"
#include "model/profile.h"
#include "sim/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif


/* 1 when this ppsched was built with CUDA (execute.c), 0 for the CPU-only build (nocuda.c). */
int execute_built_with_cuda(void);

/* CUDA devices visible to this process; 0 when there is no driver or no device. Never fails. */
int execute_device_count(void);

/* A one-line description of the devices ("4x NVIDIA H200 (139 GiB), driver 580.xx") into buf. */
void execute_describe_devices(char *buf, size_t size);

/* Run job->run.warmup + job->run.steps steps of `plan` and fill `tl` (mode MEASURE, step_ms of the
 * timed steps, the median step's op times, peak memory per device). Exits nothing; returns
 * PP_ERR_DEVICE when the plan does not fit (after printing what each device needs),
 * PP_ERR_TIMEOUT when a step did not finish (after printing the pending op), or a CUDA/cuBLAS/NCCL
 * error. `res` may be NULL. */
pp_status_t execute_plan(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                         const pp_job_t *job, const pp_exec_opts_t *opts);


/* Measure a profile (profile.h) on CUDA device job->pipeline.device_ids[0]: a middle, a first and
 * a last stage of the config's model, each of layers / stages blocks, one slot; F, I and W of one
 * micro-batch replayed from a CUDA graph (`iters` timed replays after warm-up, the median); the
 * device memory each stage and the runtime take; and, when a second device is in the pipeline,
 * peer copies 0 -> 1 of a few sizes around the boundary tensor. Prints progress when verbose. */
pp_status_t execute_profile(pp_profile_t *prof, const pp_job_t *job, int iters, int verbose);

#ifdef __cplusplus
}
#endif

#endif /* PP_EXECUTE_H */
