/*
 * explain.h — why the devices idled, which chain of ops set the step, and what each fix is worth.
 *
 * Plain C11 over a plan and its timeline (measured or simulated: the same code reads both).
 *
 * Idle time of device d (as report.h defines it): the makespan window [T0, T1] (earliest start,
 * latest end of any op) minus the union of d's compute-op intervals. Every idle stretch gets
 * exactly one reason, so the reasons add up to the device's idle time (to rounding):
 *
 *   warmup    [T0, start of d's first compute op): the pipeline filling up to d.
 *   cooldown  (end of d's last compute op, T1]: the pipeline draining after d is done, except
 *   reduce    the part of it until d's last REDUCE ends (data parallel: the device waits for its
 *             gradients' reduction before the optimizer), which comes first.
 *   Every other stretch [a, b) ends when a compute op k starts at b. With pred(k) the op before
 *   k on its stream, and
 *     U = max(end of pred(k), over k's dependencies: the end of a compute dependency, or for a
 *         SEND/RECV dependency the latest end of the compute ops it waits for through
 *         communication ops alone, a RECV also through its SEND),
 *     R = max(end of pred(k), end of every dependency of k)    (k's inputs were all there),
 *   clamped into [a, b] (U first, then R no earlier than U):
 *   schedule  [a, U): waiting for an upstream compute op (the schedule's own bubble);
 *   comm      [U, R): the producer was done but the transfer had not delivered (exposed
 *             communication, queueing behind other transfers included);
 *   launch    [R, b): the inputs were ready but k had not started (host enqueue, launch gap).
 *   Under run.offload, R is cut at Rc, R without the host copies k waits for (a RELOAD that
 *   fills its slot, an OFFLOAD that frees the slot it takes): comm [U, Rc), offload [Rc, R), the
 *   copy time the compute did not hide.
 * The simulator starts every op at R, so its launch time is 0 by construction. A device without
 * compute ops idles the whole step as warmup.
 *
 * Critical path: from the op that ends last, walk back through whichever constraint was ready
 * last: a dependency's end or the previous op on the same stream (for a transfer, the SEND's and
 * the RECV's constraints both count; ties go to a dependency, then to the later op). The chain
 * runs from an op with no constraint to the last end; its op times plus the waits between links
 * (start minus the previous link's end, the first link's start minus T0) add up to the makespan.
 *
 * What-if: the simulator's step for the plan with one category removed from the cost model
 * (table pp_what_ifs: as modelled = no launch gaps, free transfers, even stages = each kind's
 * cost averaged over stages, all three; with replicas, reduce free = the gradient reductions cost
 * nothing).
 *
 * Ownership: each result owns its arrays; the _free functions take NULL, zeroed or half-built
 * results and leave them zeroed.
 */
#ifndef PP_EXPLAIN_H
#define PP_EXPLAIN_H

#include "plan/plan.h"
#include "simulate.h"
#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- idle time split ------------------------------------------------------------------------ */

typedef enum pp_idle_reason {
    PP_IDLE_WARMUP = 0,
    PP_IDLE_SCHEDULE,
    PP_IDLE_COMM,
    PP_IDLE_LAUNCH,
    PP_IDLE_COOLDOWN,
    PP_IDLE_REDUCE,  /* after the device's last compute op, waiting for its reductions (d > 1) */
    PP_IDLE_OFFLOAD, /* waiting for a host copy of run.offload (a plan with copies) */
    PP_IDLE_COUNT
} pp_idle_reason_t;

/* Which plans show a reason: every plan, or only one with data-parallel replicas, or only one
 * with host copies, so a plan without them reads as it did. */
typedef enum pp_shown { PP_SHOWN_ALWAYS = 0, PP_SHOWN_REPLICAS, PP_SHOWN_COPIES } pp_shown_t;

/* One row per reason: every writer (table, JSON, trace, chart) asks this table. */
typedef struct pp_idle_reason_info {
    const char *name;   /* key in the JSON and the trace ("schedule") */
    const char *column; /* short table column ("sched") */
    const char *label;  /* words for people ("waiting for an upstream compute op") */
    const char *cname;  /* Chrome trace colour name */
    const char *colour; /* SVG fill */
    int shown;          /* which plans show it (pp_shown_t, explain_shows_reason) */
} pp_idle_reason_info_t;

extern const pp_idle_reason_info_t pp_idle_reasons[PP_IDLE_COUNT];

/* A stretch of one device's idle time with one reason. */
typedef struct pp_gap {
    int device;
    pp_idle_reason_t reason;
    double start_ms, end_ms;
    int op; /* the compute op that ended the stretch; -1 for cool-down */
} pp_gap_t;

typedef struct pp_idle_split {
    int n_devices;
    double span_ms;                 /* makespan T1 - T0 */
    double *idle_ms;                /* [n_devices]: span - busy, as report.c computes it */
    double *busy_ms;                /* [n_devices]: busy, the union of the device's compute-op
                                       intervals summed piece by piece as report.c does */
    double *by_device;              /* [n_devices * PP_IDLE_COUNT]: ms per device and reason */
    double total_ms[PP_IDLE_COUNT]; /* sum over devices */
    int n_gaps;
    pp_gap_t *gaps; /* [n_gaps] by device, then time; stretches of zero length left out */
} pp_idle_split_t;

/* Splits the idle time of every device of `tl` (which must have per-op times). Fails with
 * PP_ERR_INTERNAL when the timeline does not fit the plan or a dependency is not earlier in plan
 * order. */
pp_status_t explain_idle_split(pp_idle_split_t *s, const pp_plan_t *plan, const pp_timeline_t *tl);
void explain_idle_split_free(pp_idle_split_t *s);

static inline double explain_idle_ms(const pp_idle_split_t *s, int device, pp_idle_reason_t r)
{
    return s->by_device[device * PP_IDLE_COUNT + (int)r];
}

/* ---- critical path -------------------------------------------------------------------------- */

typedef enum pp_path_via {
    PP_VIA_START = 0, /* first link: nothing constrained its start */
    PP_VIA_DEP,       /* started after the previous link, a dependency */
    PP_VIA_STREAM     /* started after the previous link, the op before it on its stream */
} pp_path_via_t;

typedef struct pp_path_link {
    int op;            /* plan op index */
    pp_path_via_t via; /* how it is tied to the previous link */
    double wait_ms;    /* start - previous link's end (first link: start - T0) */
    /* copied from the plan and the timeline, so the path prints on its own: */
    int device;
    pp_role_t role;
    pp_action_t action; /* kind, stage, micro-batch */
    double start_ms, end_ms;
} pp_path_link_t;

typedef struct pp_critical_path {
    int n;
    pp_path_link_t *links; /* [n], first to last; the last link ends at T1 */
    double span_ms;        /* T1 - T0 = compute_ms + comm_ms + wait_ms */
    double compute_ms;     /* time of the compute ops on the path */
    double comm_ms;        /* time of the transfers on the path */
    double wait_ms;        /* sum of the links' waits */
} pp_critical_path_t;

pp_status_t explain_critical_path(pp_critical_path_t *cp, const pp_plan_t *plan,
                                  const pp_timeline_t *tl);
void explain_critical_path_free(pp_critical_path_t *cp);

static inline const char *explain_via_name(pp_path_via_t v)
{
    return v == PP_VIA_DEP ? "dependency" : v == PP_VIA_STREAM ? "stream" : "start";
}

/* ---- what-if -------------------------------------------------------------------------------- */

typedef enum pp_what_if_kind {
    PP_WHAT_IF_NO_LAUNCH = 0, /* the cost model as is: the simulator has no launch gaps */
    PP_WHAT_IF_FREE_COMM,     /* transfers cost nothing */
    PP_WHAT_IF_EVEN_STAGES,   /* every stage costs the mean of all stages, per kind */
    PP_WHAT_IF_ALL,           /* all three */
    PP_WHAT_IF_REDUCE_FREE,   /* the reductions across replicas cost nothing (shown with d > 1) */
    PP_WHAT_IF_COUNT
} pp_what_if_kind_t;

typedef struct pp_what_if_info {
    const char *name;  /* JSON key */
    const char *label; /* words for people */
    int free_comm;     /* set the transfer cost to 0 */
    int even_stages;   /* average each kind over the stages */
    int free_reduce;   /* set the reductions across replicas to 0; a row with it is shown only
                          for a plan with replicas (explain_shows_what_if) */
    int no_gaps;       /* set the gap between ops (the cost model's gap_ms) to 0 */
} pp_what_if_info_t;

extern const pp_what_if_info_t pp_what_ifs[PP_WHAT_IF_COUNT];

typedef struct pp_what_if {
    double step_ms[PP_WHAT_IF_COUNT]; /* the simulator's makespan in each case */
} pp_what_if_t;

/* Simulates `plan` once per row of pp_what_ifs under a changed copy of `cm` (one pass). */
pp_status_t explain_what_if(pp_what_if_t *w, const pp_plan_t *plan, const pp_cost_model_t *cm);

/* The same, and (tl not NULL) simulate_plan(tl, plan, cm) in that pass: a simulated run gets its
 * timeline and its what-if figures for one walk of the plan. */
pp_status_t explain_what_if_sim(pp_what_if_t *w, pp_timeline_t *tl, const pp_plan_t *plan,
                                const pp_cost_model_t *cm);

/* ---- all of it ------------------------------------------------------------------------------ */

typedef struct pp_explain {
    int known;                 /* 0 when the timeline has no per-op times: nothing below is set */
    int replicas;              /* the plan's data-parallel replicas (plan_replicas) */
    int copies;                /* 1: the plan has host copies (run.offload) */
    pp_idle_split_t split;     /* of the timeline the report shows */
    pp_idle_split_t split_sim; /* of the simulator's timeline for the same plan (n_devices 0
                                  when none was given) */
    pp_critical_path_t path;   /* of the timeline the report shows */
    int have_what_if;          /* 1 when a cost model was given */
    pp_what_if_t what_if;
} pp_explain_t;

/* Whether the writers show reason r / what-if row w: the rows of data parallelism only for a plan
 * with replicas, the offload reason only for one with host copies, so a plan of one pipeline
 * without copies reads as it did. */
static inline int explain_shows_reason(const pp_explain_t *ex, int r)
{
    switch ((pp_shown_t)pp_idle_reasons[r].shown) {
    case PP_SHOWN_REPLICAS: return ex->replicas > 1;
    case PP_SHOWN_COPIES: return ex->copies;
    default: return 1;
    }
}
static inline int explain_shows_what_if(const pp_explain_t *ex, int w)
{
    return !pp_what_ifs[w].free_reduce || ex->replicas > 1;
}

/* Everything above for `tl`; `sim` (the simulator's timeline) and `cm` may be NULL. */
pp_status_t explain_build(pp_explain_t *ex, const pp_plan_t *plan, const pp_timeline_t *tl,
                          const pp_timeline_t *sim, const pp_cost_model_t *cm);
void explain_free(pp_explain_t *ex);

#ifdef __cplusplus
}
#endif

#endif /* PP_EXPLAIN_H */
