/*
 * profile_run.h — the whole-model runs of `ppsched profile` (profile.h's steps: and pairs:), made
 * through the chain every measured run takes (run.h: config, schedule, plan, executor).
 *
 * On the profile's GPU, at the profiled micro-batch and at a quarter and a sixteenth of its tokens:
 * 1F1B with every block on that GPU at m = 8 and 32 (the steps), and DualPipeV on it at m = 8 with
 * its overlapped pairs on one compute stream and on two (the pairs; the overlap is the cost.overlap
 * with which the simulator's two steps stand in the measured ratio). Plain C: the executor comes
 * in as a function, so the CPU tests drive it with a simulated one.
 */
#ifndef PP_PROFILE_RUN_H
#define PP_PROFILE_RUN_H

#include "common/pp_status.h"
#include "model/job.h"
#include "model/profile.h"
#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Append p's steps and pairs, measured with `exec` on CUDA device job->pipeline.device_ids[0] at
 * the job.s model (its dtype, recompute, graph and timing settings; 5 timed steps after 2), then
 * profile_calibrate(p). p's passes must be measured already: the overlap is fitted with them. A
 * size whose run does not fit on the device (PP_ERR_DEVICE) is left out with a note; any other
 * failure is returned. Prints each run's result when verbose. */
pp_status_t profile_measure_runs(pp_profile_t *p, const pp_job_t *job, pp_executor_fn exec,
                                 int verbose);

/* The cost.overlap (0..1) with which the simulated step of `plan` under `cm` (its overlap ignored)
 * is `ratio` times the step with overlap 0: 0 for ratio >= 1, 1 when even that is not short
 * enough. */
pp_status_t profile_fit_overlap(const pp_plan_t *plan, const pp_cost_model_t *cm, double ratio,
                                double *overlap);

#ifdef __cplusplus
}
#endif

#endif /* PP_PROFILE_RUN_H */
