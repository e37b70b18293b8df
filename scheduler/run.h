/*
 * run.h — the one chain every caller runs: config → schedule → plan (lowered once) →
 * simulate | execute → timeline → report, with the cost model built once.
 *
 * The command line, the GPU tests and the benchmarks all go through it, so a phase changes in one
 * place. It is plain C: the executor comes in as a function (execute_plan where CUDA is linked),
 * so the chain builds and is tested on a machine without a GPU. The cost model has one source,
 * run_cost_model: a model-derived one replaces it there. A pp_run_t owns everything it holds;
 * run_free releases a partly built one.
 */
#ifndef PP_RUN_H
#define PP_RUN_H

#include "../common/pp_status.h"
#include "config.h"
#include "execute.h"
#include "plan.h"
#include "report.h"
#include "schedule.h"
#include "simulate.h"
#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs a plan on the devices (execute_plan's shape). */
typedef pp_status_t (*pp_executor_fn)(pp_timeline_t *tl, pp_exec_result_t *res,
                                      const pp_plan_t *plan, const pp_config_t *cfg,
                                      const pp_exec_opts_t *opts);

typedef struct pp_run {
    pp_config_t cfg;
    pp_schedule_t sched;   /* compute-only or as written */
    pp_plan_t plan;        /* lowered once */
    pp_cost_model_t cost;  /* run_cost_model's, built once */
    pp_timeline_t sim;     /* the simulator's timeline (always, once run_finish ran) */
    pp_timeline_t meas;    /* the executor's (measured runs) */
    pp_exec_result_t exec; /* losses (and gradients when asked) of a measured run */
    pp_report_t report;
    int measured;    /* 1 when meas and exec hold a run */
    int have_report; /* 1 once report is built */
} pp_run_t;

/* What a caller asks of a run beyond its config. */
typedef struct pp_run_opts {
    int measure;         /* 1: execute on the devices; 0: simulate only */
    pp_executor_fn exec; /* the executor (execute_plan) when measuring */
    int sync;            /* --sync: the naive baseline (no graph) */
    double timeout_s;    /* > 0: overrides run.timeout */
    int verbose;         /* the executor's banner */
    int check_grads;     /* keep the last step's gradients in r->exec */
} pp_run_opts_t;

/* Load `path` (or, when yaml is not NULL, that text named `path`) with the overrides; for a
 * written schedule (steps, csv) build it and reconcile the pipeline keys with it; resolve the
 * config against n_visible CUDA devices; then run_plan. On failure `r` is left freeable. */
pp_status_t run_load(pp_run_t *r, const char *path, const char *yaml, const char *const *sets,
                     int n_sets, int n_visible);

/* Generate the schedule of r->cfg (resolved; a written one is already built), check it, lower it
 * once and check the plan. Prints
 * "<path>: the <kind> schedule above is not valid" after an input problem. */
pp_status_t run_plan(pp_run_t *r);

/* The cost model of a plan: with a measured timeline (per-op times), per stage the mean duration
 * of each compute kind and the mean cross-device transfer; otherwise the config's uniform `cost:`
 * values, which are one device's share of the layers, so a stage of an interleaved device costs
 * 1/chunks of them. The one place a cost model comes from. */
pp_status_t run_cost_model(pp_cost_model_t *cm, const pp_plan_t *plan, const pp_config_t *cfg,
                           const pp_timeline_t *measured);

/* The executor's options: the config's run.* keys with the caller's overrides. */
pp_exec_opts_t run_exec_opts(const pp_config_t *cfg, const pp_run_opts_t *o);

/* Execute the plan with o->exec and run_exec_opts (measured run: r->meas, r->exec). */
pp_status_t run_execute(pp_run_t *r, const pp_run_opts_t *o);

/* Build the cost model (from the measurement when there is one with op times), simulate the plan
 * with it, and build the report of the measured run, or of the simulation. */
pp_status_t run_finish(pp_run_t *r);

/* Everything after run_plan: run_execute when o->measure, then run_finish. */
pp_status_t run_go(pp_run_t *r, const pp_run_opts_t *o);

/* The timeline the report describes: measured when there is one, else simulated. */
const pp_timeline_t *run_timeline(const pp_run_t *r);

void run_free(pp_run_t *r);

#ifdef __cplusplus
}
#endif

#endif /* PP_RUN_H */
