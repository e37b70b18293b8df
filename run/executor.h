/*
 * executor.h — what the run chain asks of an executor (exec/execute.h's execute_plan, or a test's
 * stand-in): run a plan for the job's steps and give back its timeline and results. The chain is
 * plain C and never includes the executor; the caller hands it the function.
 */
#ifndef PP_EXECUTOR_H
#define PP_EXECUTOR_H

#include "common/pp_group.h"
#include "common/pp_status.h"
#include "model/job.h"
#include "plan/plan.h"
#include "sim/timeline.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_exec_opts {
    int sync;          /* 1: host-synchronize after every op, all on one stream (naive baseline) */
    int graph;         /* 1: capture the second step as one CUDA graph and replay it after */
    int timing;        /* 1: per-op device timestamps (otherwise step times only) */
    double timeout_s;  /* longest wait for a step before reporting the pending op */
    int verbose;       /* 1: startup banner (peer matrix, links, memory) to stderr */
    int check_grads;   /* 1: also keep the gradients of the last step for a caller's comparison */
    int serial_pairs;  /* 1: the second half of an overlapped pair (DualPipeV) runs on the compute
                          stream after its first, not beside it (`ppsched profile` times both) */
    pp_group_t *group; /* the processes of an MPI launch (pp_group.h): this one runs the devices
                          its rank owns; NULL: this one runs every device */
} pp_exec_opts_t;

typedef struct pp_exec_result {
    int n_steps;     /* warm-up + timed steps run */
    double *loss;    /* [n_steps]: mean loss over the micro-batches of each step */
    size_t n_params; /* parameters of the whole model */
    float *grads;    /* [n_params] gradients of the last step in stage order (check_grads) */
    int graph_steps; /* steps replayed from the captured graph (0: every step eager) */
} pp_exec_result_t;

/* Runs a plan on the devices (execute_plan's shape). */
typedef pp_status_t (*pp_executor_fn)(pp_timeline_t *tl, pp_exec_result_t *res,
                                      const pp_plan_t *plan, const pp_job_t *job,
                                      const pp_exec_opts_t *opts);

void exec_result_free(pp_exec_result_t *res);

#ifdef __cplusplus
}
#endif

#endif /* PP_EXECUTOR_H */
