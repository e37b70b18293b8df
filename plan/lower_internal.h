/*
 * lower_internal.h — the working state of one lowering (lower.c), shared with the part of it that
 * places the copies of run.offload (offload.c) and the one that assigns slots and finds the
 * enqueue order (lower_order.c). Private to those three files.
 */
#ifndef PP_LOWER_INTERNAL_H
#define PP_LOWER_INTERNAL_H

#include "plan.h"

/* Most dependencies one op can have: three data inputs (B: F, RECV_B, RELOAD), the program order
 * around an overlapped pair, one last op per role of the slot's previous holder, and the last
 * compute ops (compute, overlap) of its kept region's previous holder. */
#define LOWER_MAX_DEPS (6 + PP_ROLE_COUNT)

/* run.offload: a RELOAD goes this many compute ops before its backward. One: the host link is
 * slower than the compute it hides under (bench/NOTES.md), so reloading earlier would only hold
 * more slots without making the step shorter; the ring stays at about three slots. */
#define LOWER_OFFLOAD_LOOKAHEAD 1

/* Working state of one lowering. Arrays indexed by program id unless said otherwise. */
typedef struct lower {
    const pp_schedule_t *sched;
    int n_dev, n_st, n_mb, n_ops;
    pp_op_t *ops;    /* [n_ops] program-id order */
    int *step;       /* [n_ops] step of the written action (the compute op an inserted op serves) */
    char *inserted;  /* [n_ops] 1 for a SEND/RECV added to a compute-only schedule */
    int *begin;      /* [n_dev+1] device d's program ids are begin[d] .. begin[d+1]) */
    int *idx;        /* [PP_ACT_COUNT * n_st * n_mb] program id of (kind, stage, mb) or -1 */
    int *dep;        /* [n_ops * LOWER_MAX_DEPS] */
    int *n_dep;      /* [n_ops] */
    int *n_data;     /* [n_ops] how many of its deps are data deps (the rest wait for a slot) */
    int *order;      /* [n_ops] program ids in enqueue order */
    int n_chan;      /* pp_channel_count(n_dev) */
    int *chan;       /* [n_ops] channel of the op (pp_channel_of) */
    int *chan_next;  /* [n_ops] next program id on the same channel, -1 at its end */
    int *chan_first; /* [n_chan] first program id on each channel, -1 for an empty one */
    int *where;      /* [n_ops] program id -> final index */
    int *partner;    /* [n_ops] an overlap op's forward half (program id), -1 otherwise */
    int offload;     /* run.offload: copies placed */
    const pp_offload_key_t *pick; /* [n_st * n_mb] offload auto's choice (plan.h); NULL: every
                                     eligible key, the next op and LOWER_OFFLOAD_LOOKAHEAD */
    int *off_after;  /* [n_st * n_mb] written action the OFFLOAD follows, -1 kept on the device */
    int *rel_before; /* [n_st * n_mb] written action the RELOAD precedes, -1 kept on the device */
    int *host_slots; /* [n_st] the plan's host_slots_per_stage */
    int *host_cap;   /* [n_st] offload auto: the host slots a stage cycles through (the most its
                        keys hold at once in program order, and LOWER_HOST_SPARE); NULL otherwise */
    const size_t *offload_bytes; /* [n_st] the plan's: bytes one copy moves */
    const int *offload_keep;     /* [n_st] the plan's: tensors of a slot kept on the device */
    int *keep_slot;              /* [n_st * n_mb] the plan's: kept region of each key, -1 none */
    int *keep_slots;             /* [n_st] the plan's keep_slots_per_stage */
    int *copy_head; /* [2 * written actions]: per written action (device by device, RELOADs then
                       OFFLOADs), the first key whose copy goes there, -1 none */
    int *copy_next; /* [2 * n_st * n_mb]: the next key at the same place (RELOAD, OFFLOAD) */
} lower_t;

/* offload auto: host slots beyond the most a stage's keys hold at once. An OFFLOAD waits for its
 * host slot's last RELOAD; with a spare or two it takes one whose RELOAD was enqueued a while
 * before, so the copies do not queue behind each other through the host slots (pinned host memory
 * is cheaper than device memory). */
#define LOWER_HOST_SPARE 2

/* Host slots of run.offload (lower_slots' helper): an OFFLOAD takes the lowest free pinned slot of
 * its stage (offload auto: of its host_cap, the one whose last RELOAD came first) and waits for
 * that slot's last RELOAD; the RELOAD gives it back. */
typedef struct host_state {
    char *busy;  /* [stage*m+slot] */
    int *reader; /* [stage*m+slot]: program id of the slot's last RELOAD, -1 none */
    int *held;   /* [stage*m+mb]: host slot of (stage, mb) */
} host_state_t;

/* ---- lower.c ---- */

/* Append op (kind k, stage, mb) to device d's program at *n (its program id); `step` is the
 * written action it comes from, `inserted` 1 for an op the lowering added. */
void lower_put_op(lower_t *L, int *n, int d, pp_action_kind_t k, int stage, int mb, int step,
                  int inserted);
/* Add dependency `on` to op `id` (ignoring -1 and repeats). */
void lower_add_dep(lower_t *L, int id, int on);
/* "device d, step i, action X" for messages; an inserted transfer also names its compute op. */
const char *lower_op_place(const lower_t *L, int id, char *buf, size_t size);
/* "X (device d, step i)" for the other op named in a message. */
const char *lower_op_name(const lower_t *L, int id, char *buf, size_t size);

/* ---- lower_order.c ---- */

/* Assign activation (and host) slots, slots_per_stage[n_st] receiving each stage's count, and
 * find the enqueue order (L->order), growing slots where pairing a SEND with its RECV needs them.
 * Prints each stuck device and returns PP_ERR_INPUT when the schedule deadlocks. */
pp_status_t lower_order_slots(lower_t *L, int *slots_per_stage);

/* ---- offload.c ---- */

/* Whether the lowering places copies (job's run.offload), the tensors each stage keeps on the
 * device (keep, for a stage with a key chosen; NULL: none) and the bytes each copy moves. */
void lower_offload_setup(lower_t *L, pp_plan_t *plan, const pp_job_t *job,
                         const pp_offload_key_t *pick, const int *keep);
/* After the copies are placed: a stage none of whose keys goes to the host keeps nothing apart
 * (offload_keep 0, its offload bytes the whole range): its slots are whole. */
void lower_offload_unkeep(lower_t *L, pp_plan_t *plan, const pp_job_t *job);
/* Where each device's copies go (offload_place); counts them per device into copies[]. */
pp_status_t lower_offload_marks(lower_t *L, int *copies);
/* Put device d's copies of kind RELOAD (before written action i) or OFFLOAD (after it). */
void lower_put_copies(lower_t *L, int *n, int d, size_t base, int i, pp_action_kind_t kind);
/* The unit holding a slot: 2 * (stage * m + mb), + 1 for an offloaded backward phase. */
size_t lower_slot_unit(const lower_t *L, const pp_op_t *o);
/* Host slots: an OFFLOAD takes one (waiting for its last RELOAD), a RELOAD gives it back. */
void lower_host_slot_step(lower_t *L, host_state_t *H, int id);

/* ---- reduce.c ---- */

/* pipeline.data_parallel d > 1 (job's): add a REDUCE op per stage and gradient bucket to the
 * lowered one-replica plan, then lay it out d times (plan.h); nothing with one replica. */
pp_status_t lower_data_parallel(pp_plan_t *plan, const pp_job_t *job);

#endif /* PP_LOWER_INTERNAL_H */
