/*
 * resolve.h — the resolve step: the config (what the user wrote) and the machine in, the job
 * (model/job.h), which every later phase reads, out. resolve.c says what is resolved and how.
 */
#ifndef PP_RESOLVE_H
#define PP_RESOLVE_H

#include "config.h"
#include "model/job.h"
#include "plan/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Make `job` from `cfg` against n_visible CUDA devices (0: none, `devices: all` means 4; < 0:
 * unknown, device ids are not checked). `written` is the schedule built from `steps:` or `csv:`
 * (written_build), NULL for a generated kind. Prints the first problem at the place of the key to
 * blame and returns PP_ERR_INPUT; `job` is then left empty. Free the job with job_free. */
pp_status_t job_resolve(pp_job_t *job, const pp_config_t *cfg, const pp_schedule_t *written,
                        int n_visible);

/* The job of cfg's values as they are, nothing resolved (job_resolve's first step; tests build
 * jobs from config_defaults with it). */
pp_status_t job_from_config(pp_job_t *job, const pp_config_t *cfg);

/* Under a launch of n_procs processes (common/pp_group.h): the job's pipeline devices must split
 * into pipeline.devices_per_process each (or evenly, when it is 0) over exactly n_procs processes,
 * and pipeline devices that share a GPU must not meet over nccl under the job's process layout
 * (job.procs: auto picks nccl between processes). Prints the problem at the key's place in cfg
 * and returns PP_ERR_INPUT. With one process only devices_per_process, when set, must equal the
 * device count. */
pp_status_t job_check_processes(const pp_job_t *job, const pp_config_t *cfg, int n_procs);

#ifdef __cplusplus
}
#endif

#endif /* PP_RESOLVE_H */
