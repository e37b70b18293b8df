/*
 * written.h — the schedules the user wrote: `schedule.steps` in the YAML (kept by the config as
 * the action texts with their places) and `schedule.csv` (a PyTorch pipelining CSV, kept as its
 * path). written_build makes the schedule of the kind table's written rows (the rows have no
 * generator), parsing every action and placing every stage on its one device, and prints problems
 * at the place they were written (`file:line:col`, or the `--set` text). written_reconcile then
 * brings the job's pipeline keys in line with the schedule, the one place where a written
 * schedule and the job meet; job_resolve calls it first.
 */
#ifndef PP_WRITTEN_H
#define PP_WRITTEN_H

#include "config.h"
#include "plan/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Build the schedule of `schedule.steps` into out (initialised here; freed on failure). */
pp_status_t written_from_steps(pp_schedule_t *out, const pp_config_t *cfg);

/* Read the CSV of `schedule.csv` (relative to the YAML file's folder) into out. */
pp_status_t written_from_csv(pp_schedule_t *out, const pp_config_t *cfg);

/* The job's pipeline against the written schedule s: a key the user set must agree with it
 * (devices, stages, micro-batches, chunks; `devices: all` resolves to n_visible devices, or to
 * the schedule's count when n_visible <= 0), a key left to its default takes the schedule's
 * value. Prints the problem at the key's place and returns PP_ERR_INPUT. */
pp_status_t written_reconcile(pp_job_t *job, const pp_config_t *cfg, const pp_schedule_t *s,
                              int n_visible);

/* The schedule the user wrote (`steps:` or `csv:`, as cfg->schedule.kind says) into out. */
pp_status_t written_build(pp_schedule_t *out, const pp_config_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* PP_WRITTEN_H */
