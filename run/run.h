/*
 * run.h — the one chain every caller runs: config → schedule → plan (lowered once) →
 * simulate | execute → timeline → report, with the cost model built once.
 *
 * The command line, the GPU tests and the benchmarks all go through it, so a phase changes in one
 * place. It is plain C: the executor comes in as a function (execute_plan where CUDA is linked),
 * so the chain builds and is tested on a machine without a GPU. The cost model has one source,
 * run_cost_model (cost.h's model, or the measured op times). Before anything runs, run_predict
 * prices the plan and keeps the predicted step, so a measured run reports prediction against
 * measurement. A pp_run_t owns everything it holds; run_free releases a partly built one.
 */
#ifndef PP_RUN_H
#define PP_RUN_H

#include "common/pp_status.h"
#include "config/config.h"
#include "executor.h"
#include "model/gpu.h"
#include "plan/memory.h"
#include "plan/plan.h"
#include "model/profile.h"
#include "report/report.h"
#include "plan/schedule.h"
#include "sim/simulate.h"
#include "sim/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_run {
    pp_config_t cfg;       /* what the user wrote (messages name its keys' places) */
    pp_job_t job;          /* resolved from cfg: what every phase after run_load reads */
    pp_schedule_t sched;   /* compute-only or as written */
    pp_plan_t plan;        /* lowered once */
    pp_cost_model_t cost;  /* run_cost_model's, built once */
    pp_timeline_t sim;     /* the simulator's timeline (always, once run_finish ran) */
    pp_timeline_t meas;    /* the executor's (measured runs) */
    pp_exec_result_t exec; /* losses (and gradients when asked) of a measured run */
    pp_report_t report;
    pp_profile_t prof;       /* cost.profile, once run_predict read it */
    int have_prof;           /* 1 when prof holds a profile */
    const pp_gpu_t *present; /* the GPU a measured run runs on (when the table knows it) */
    int predicted;           /* 1 once run_predict ran */
    pp_what_if_t what_if;    /* the what-if figures of `cost`, simulated in sim's pass */
    int have_what_if;        /* 1 when what_if holds them */
    double predicted_ms;     /* the step the cost model predicts before running */
    char cost_desc[512];     /* where the predicted costs came from, for the report */
    pp_mem_pred_t mem;       /* the memory predicted per device, and the fit check */
    int measured;            /* 1 when meas and exec hold a run */
    int have_report;         /* 1 once report is built */
    pp_group_t *group;       /* the processes of the run (run_go sets it); NULL: this one alone */
    const pp_gpu_t *offload_gpu; /* offload auto: the GPU description its choice was made for */
    char offload_note[256];      /* offload auto: why the limit cannot be met, or "" */
    double offload_whole_ms;     /* offload auto: the quickest step it found moving whole slots
                                    (INFINITY: none fits; 0: nothing to choose), beside the one it
                                    chose, which may move part of each */
} pp_run_t;

/* What a caller asks of a run beyond its config. */
typedef struct pp_run_opts {
    int measure;         /* 1: execute on the devices; 0: simulate only */
    pp_executor_fn exec; /* the executor (execute_plan) when measuring */
    int sync;            /* --sync: the naive baseline (no graph) */
    double timeout_s;    /* > 0: overrides run.timeout */
    int verbose;         /* the executor's banner */
    int check_grads;     /* keep the last step's gradients in r->exec */
    const pp_gpu_t *gpu; /* the GPU present (gpu_match_device of its name), or NULL */
    int serial_pairs;    /* overlapped pairs on one stream (pp_exec_opts_t) */
    pp_group_t *group;   /* the processes of an MPI launch (pp_group.h); NULL: this one alone */
} pp_run_opts_t;

/* Load `path` (or, when yaml is not NULL, that text named `path`) with the overrides; for a
 * written schedule (steps, csv) build it and reconcile the pipeline keys with it; resolve the
 * config against n_visible CUDA devices; then run_plan. On failure `r` is left freeable. The run
 * of this process alone: run_load_group(r, NULL, ...). */
pp_status_t run_load(pp_run_t *r, const char *path, const char *yaml, const char *const *sets,
                     int n_sets, int n_visible);

/* run_load for one process of the group `g` (NULL: this one alone): the job's process layout
 * (job.procs: run_set_procs) is set from g before the plan is lowered, so that every process
 * lowers the same plan, with the transports `auto` picks for the launch; r->group = g. Calls no
 * collective (the group knows every rank's host from its start), so a process may fail here
 * alone: the caller agrees (group_agree) afterwards. */
pp_status_t run_load_group(pp_run_t *r, pp_group_t *g, const char *path, const char *yaml,
                           const char *const *sets, int n_sets, int n_visible);

/* The process layout of `job` under the group g: g->size processes, rank r owning the r-th run of
 * pipeline devices (group_split_devices, with pipeline.devices_per_process), on the host g says.
 * A split that does not divide is left to run_check_processes to refuse. */
void run_set_procs(pp_job_t *job, const pp_group_t *g);

/* Generate the schedule of r->job ( a written one is already built), check it, lower it
 * once and check the plan. Prints
 * "<path>: the <kind> schedule above is not valid" after an input problem. */
pp_status_t run_plan(pp_run_t *r);

/* run.offload: auto (run_offload.c): simulate the plain plan once under the cost model on
 * cost_gpu_for(present), choose the (stage, micro-batch) slots each device sends to the host (the
 * longest idle lifetime against the round trip over the host link first; each RELOAD early enough
 * for the copy to finish before its backward) so that every device's memory_predict fits
 * memory_limit_bytes, and, where whole slots cost time, how much of each slot a device's stages
 * keep on the device (the fewest bytes moved that fit; the quicker of the two simulated), and
 * lower r->plan again with them (plan_lower_partial). Offloads nothing
 * where everything fits. Where even every slot offloaded does not fit, keeps that plan and says
 * why in r->offload_note (the memory verdict then says it does not fit). A no-op for another
 * run.offload, or when the choice was made for the same GPU. run_plan and run_predict call it. */
pp_status_t run_offload_auto(pp_run_t *r, const pp_gpu_t *present);

/* Under several processes (g->size > 1), after run_load: the devices split over them
 * (job_check_processes), every transfer between two processes goes over a transport that
 * crosses processes, and every process holds the same plan (a bad config one rank alone sees, a
 * different file or --set). The result is agreed: every process returns the first failure. */
pp_status_t run_check_processes(pp_run_t *r, pp_group_t *g);

/* The process that owns each pipeline device of r's plan under `g` (pipeline.devices_per_process,
 * or an even split), into rank_of[plan.n_devices]. */
void run_rank_of(const pp_run_t *r, const pp_group_t *g, int *rank_of);

/* Under several processes (r->group): each simulates the ops of its own devices with r->cost
 * (simulate_plan_part, within run.timeout), and the parts are merged into r->sim on every process.
 * run_predict calls it. */
pp_status_t run_simulate_split(pp_run_t *r);

/* On rank 0 of several processes: one line saying which devices each rank owns, and where it
 * runs (its host and local rank). */
void run_note_processes(const pp_run_t *r, const pp_group_t *g, FILE *f);

/* The cost model of a plan: with a measured timeline (per-op times), per stage the mean duration
 * of each compute kind and the mean cross-device transfer; otherwise cost_model_build (cost.h):
 * the hand-set `cost:` values when given, else the stage's FLOPs and bytes on the GPU description
 * (cost.gpu, else `present`, else h100), calibrated by `prof` when not NULL. The one place a cost
 * model comes from. */
pp_status_t run_cost_model(pp_cost_model_t *cm, const pp_plan_t *plan, const pp_job_t *job,
                           const pp_timeline_t *measured, const pp_gpu_t *present,
                           const pp_profile_t *prof);

/* Before running: read cost.profile (once), build the cost model with `present`, simulate (under
 * several processes, each its own devices, the parts merged: simulate_plan_part), and
 * keep the predicted step (r->predicted_ms), the cost model's description and the memory each
 * device will take (r->mem, checked against the same GPU description). */
pp_status_t run_predict(pp_run_t *r, const pp_gpu_t *present);

/* The executor's options: the config's run.* keys with the caller's overrides. */
pp_exec_opts_t run_exec_opts(const pp_job_t *job, const pp_run_opts_t *o);

/* Execute the plan with o->exec and run_exec_opts (measured run: r->meas, r->exec). */
pp_status_t run_execute(pp_run_t *r, const pp_run_opts_t *o);

/* The report of run_timeline(r) (report_build: step, busy, idle, bubble of every device, the
 * explanation) with the prediction attached (report_set_prediction: the predicted step, each
 * device's predicted memory, the memory verdict); run_predict first unless it ran. No what-if:
 * run_finish adds it. `ppsched plan` reads every candidate's figures off this report, so they are
 * the ones `ppsched FILE --simulate` prints for the same plan. */
pp_status_t run_report(pp_run_t *r);

/* Build the cost model (from the measurement when there is one with op times; the prediction
 * otherwise, made here unless run_predict ran), simulate the plan with it, and build the report of
 * the measured run, or of the simulation, with the prediction attached (run_report) and the
 * what-if step times. */
pp_status_t run_finish(pp_run_t *r);

/* Everything after run_plan: run_predict, run_execute when o->measure, then run_finish. A run to
 * measure whose predicted memory is over an explicit run.memory_limit is refused before it runs
 * (run_refuse_fit, PP_ERR_DEVICE): the budget is the user's, not the GPU's. */
pp_status_t run_go(pp_run_t *r, const pp_run_opts_t *o);

/* The refusal of a run whose predicted memory is over its limit (the GPU's, or run.memory_limit):
 * offload auto's note when it has one, then which device needs how much against what. Prints
 * nothing and returns PP_OK when every device fits; else PP_ERR_DEVICE. Only the group's rank 0
 * prints. */
pp_status_t run_refuse_fit(const pp_run_t *r, FILE *f);

/* The timeline the report describes: measured when there is one, else simulated. */
const pp_timeline_t *run_timeline(const pp_run_t *r);

void run_free(pp_run_t *r);

#ifdef __cplusplus
}
#endif

#endif /* PP_RUN_H */
