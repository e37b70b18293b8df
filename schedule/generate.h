/*
 * generate.h — schedule generators: the compute actions (F/B/I/W) of every device, in order, for
 * GPipe, 1F1B, interleaved 1F1B, looped BFS and ZB-H1 (generate.c), the `auto` order built from
 * the stages' costs (gen_auto.c), ZB-H2 and interleaved
 * zero-bubble (generate_zb.c), ZB-V and DualPipeV (generate_v.c). The result is compute-only;
 * plan_lower adds the communication. Which generator a kind uses, and the preconditions checked
 * before it runs, are rows of the kind table (kinds.h). The loop generators place stage s on
 * device s mod p; ZB-V and DualPipeV build the V placement themselves. Explicit (`steps:`) and
 * CSV schedules are built by their rows' generators in written.c.
 */
#ifndef PP_GENERATE_H
#define PP_GENERATE_H

#include "model/job.h"
#include "plan/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Build the schedule `job` asks for into `out` (initialised here; free with schedule_free):
 * the kind's preconditions (sched_kind_check), then its row's generator. job must have been
 * through job_resolve. Returns PP_ERR_INPUT with a message when the generator cannot produce
 * a schedule for these values (e.g. interleaved with m % p != 0). */
pp_status_t generate_schedule(pp_schedule_t *out, const pp_job_t *job);

/* The generators of the kind table's rows: p, m and v taken from a resolved config. */
pp_status_t generate_cfg_gpipe(pp_schedule_t *out, const pp_job_t *job);
pp_status_t generate_cfg_1f1b(pp_schedule_t *out, const pp_job_t *job);
pp_status_t generate_cfg_interleaved(pp_schedule_t *out, const pp_job_t *job);
pp_status_t generate_cfg_zbh1(pp_schedule_t *out, const pp_job_t *job);
pp_status_t generate_cfg_looped_bfs(pp_schedule_t *out, const pp_job_t *job);
pp_status_t generate_cfg_interleaved_zb(pp_schedule_t *out, const pp_job_t *job);
pp_status_t generate_cfg_zbh2(pp_schedule_t *out, const pp_job_t *job);      /* generate_zb.c */
pp_status_t generate_cfg_zbv(pp_schedule_t *out, const pp_job_t *job);       /* generate_v.c */
pp_status_t generate_cfg_dualpipev(pp_schedule_t *out, const pp_job_t *job); /* generate_v.c */
pp_status_t generate_cfg_auto(pp_schedule_t *out, const pp_job_t *job);

/* The individual generators, for tests: p devices, m micro-batches, v chunks per device. */
pp_status_t generate_gpipe(pp_schedule_t *out, int p, int m);
pp_status_t generate_1f1b(pp_schedule_t *out, int p, int m);
pp_status_t generate_interleaved(pp_schedule_t *out, int p, int m, int v);
pp_status_t generate_zbh1(pp_schedule_t *out, int p, int m);
pp_status_t generate_looped_bfs(pp_schedule_t *out, int p, int m, int v);
pp_status_t generate_zbh2(pp_schedule_t *out, int p, int m);                  /* generate_zb.c */
pp_status_t generate_interleaved_zb(pp_schedule_t *out, int p, int m, int v); /* generate_zb.c */
pp_status_t generate_zbv(pp_schedule_t *out, int p, int m);                   /* generate_v.c */
pp_status_t generate_dualpipev(pp_schedule_t *out, int p, int m);             /* generate_v.c */

/* Whether p devices, m micro-batches and v chunks per device are within the IR's limits (devices,
 * micro-batches and stages in all); prints "<name>: needs ..." when not. Every generator checks
 * this first. */
int generate_sizes_ok(const char *name, int p, int m, int v);

/* V placement of p*v stages: down over devices 0..p-1, back up p-1..0, and so on; device d holds
 * stages d and 2p-1-d when v = 2. */
void generate_place_v(int *stage_device, int p, int v);

/* What the `auto` kind builds its order from (gen_auto.c): per stage (= device) the ms of F, I
 * and W, one transfer's ms, and the most micro-batches in flight on a stage (forward done, W not
 * yet), which bounds its activation memory. */
typedef struct pp_auto_costs {
    const double *f, *i, *w; /* [p] */
    double send;
    int limit;
} pp_auto_costs_t;

/* The `auto` order for p devices and m micro-batches under costs c (gen_auto.c): the best of a
 * few variants of the greedy, ranked by the simulator on the plan lowered with `job` when job is
 * not NULL, else by the greedy's own estimate. */
pp_status_t generate_auto(pp_schedule_t *out, int p, int m, const pp_auto_costs_t *c,
                          const pp_job_t *job);

#ifdef __cplusplus
}
#endif

#endif /* PP_GENERATE_H */
