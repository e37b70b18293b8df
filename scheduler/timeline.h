/*
 * timeline.h — what a run did: one start and end time per plan op, in milliseconds on one time
 * axis shared by all devices (0 = the earliest start of the step), plus what each device measured
 * about memory. The simulator and the executor both fill one; the report reads it without knowing
 * which did. A timeline is indexed like the plan it came from (times[i] is plan->ops[i]).
 */
#ifndef PP_TIMELINE_H
#define PP_TIMELINE_H

#include "../common/pp_status.h"
#include "plan.h"

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
    double *step_ms;        /* [n_steps]: makespan of every timed step, in run order */
    double skew_ms;         /* measured clock skew across devices (0 when simulated) */
    int has_op_times;       /* 0 when the run measured step times only (timing off): t[] is 0 */
} pp_timeline_t;

pp_status_t timeline_init(pp_timeline_t *tl, pp_mode_t mode, int n_ops, int n_devices, int n_steps);
void timeline_free(pp_timeline_t *tl);

/* Makespan of the representative step: latest end - earliest start. */
double timeline_makespan(const pp_timeline_t *tl);

#ifdef __cplusplus
}
#endif

#endif /* PP_TIMELINE_H */
