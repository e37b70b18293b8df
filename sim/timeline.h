/*
 * timeline.h — what a run did: one start and end time per plan op, in milliseconds on one time
 * axis shared by all devices (0 = the earliest start of the step), plus what each device measured
 * about memory. The simulator and the executor both fill one; the report reads it without knowing
 * which did. A timeline is indexed like the plan it came from (times[i] is plan->ops[i]).
 */
#ifndef PP_TIMELINE_H
#define PP_TIMELINE_H

#include "common/pp_group.h"
#include "common/pp_status.h"
#include "plan/plan.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_mode { PP_MODE_SIMULATE = 0, PP_MODE_MEASURE } pp_mode_t;

typedef struct pp_op_time {
    double start_ms;
    double end_ms;
} pp_op_time_t;

typedef struct pp_timeline {
    pp_mode_t mode;
    int n_ops;
    pp_op_time_t *t; /* [n_ops] one representative step (the median step when measured) */
    int n_devices;
    size_t *peak_mem_bytes; /* [n_devices]: peak device memory, 0 when unknown */
    int n_steps;            /* timed steps behind step_ms (1 for a simulation) */
    double *step_ms;        /* [n_steps]: every timed step, in run order, from the devices' start
                               to their end: the ops' makespan and what runs outside the ops
                               (each device's gradients zeroed before its first op, its optimizer
                               after its last) */
    double skew_ms;         /* measured clock skew across devices (0 when simulated) */
    int has_op_times;       /* 0 when the run measured step times only (timing off): t[] is 0 */
} pp_timeline_t;

pp_status_t timeline_init(pp_timeline_t *tl, pp_mode_t mode, int n_ops, int n_devices, int n_steps);
void timeline_free(pp_timeline_t *tl);

/* Makespan of the representative step's ops: latest end - earliest start (the busy, idle and
 * bubble figures are over it; the step, step_ms, holds what runs outside the ops too). */
double timeline_makespan(const pp_timeline_t *tl);

/* Put together, on every process of `g`, the timelines each filled for the devices it owns
 * (rank_of[d]: the owner of pipeline device d). Each op's times and each device's peak memory
 * come from the owner of its device, moved by the owner's shift_ms (its time origin on rank 0's
 * clock: 0 for a simulation); step k of a measured run lasts from the earliest moved origin to
 * the latest moved end (a simulation's parts' steps all start at 0: the latest part's); skew_ms
 * is the largest any process gives (its own, plus the error of its shift). Then the ops are
 * shifted so the earliest starts at 0, as one process would have it. Collective; rank 0 merges and
 * sends the whole back. */
pp_status_t timeline_merge(pp_timeline_t *tl, const pp_plan_t *plan, const int *rank_of,
                           pp_group_t *g, double shift_ms);

#ifdef __cplusplus
}
#endif

#endif /* PP_TIMELINE_H */
