/*
 * schedule.h — the action IR and a schedule: one ordered program of actions per device.
 *
 * Text form (compatible with PyTorch pipelining): `<stage><KIND><microbatch>`, e.g. `0F3`, `2B0`,
 * `1I4`, `1W4`, `2SEND_F1` (stage 2 sends micro-batch 1's activation to stage 3), `3RECV_F1`,
 * `1SEND_B2` (stage 1 sends micro-batch 2's input gradient to stage 0), `0RECV_B2`.
 * A schedule is "compute-only" when it holds F/B/I/W alone (lowering adds the communication), and
 * "with communication" when it holds SEND/RECV too (taken as written, then validated).
 * Device indices here are pipeline positions 0..n_devices-1, not CUDA ordinals.
 * A pp_schedule_t owns its arrays; schedule_free releases a partly built one too. A written one
 * carries its origin, so that validation and lowering name the file and line of a device's
 * program in their messages, as the readers do.
 */
#ifndef PP_SCHEDULE_H
#define PP_SCHEDULE_H

#include "common/pp_status.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_action_kind {
    PP_ACT_F = 0,  /* forward */
    PP_ACT_B,      /* full backward (input and weight gradients) */
    PP_ACT_I,      /* input-gradient backward (zero-bubble split, first half) */
    PP_ACT_W,      /* weight-gradient backward (second half) */
    PP_ACT_SEND_F, /* send the forward output to stage + 1 */
    PP_ACT_RECV_F, /* receive the forward input from stage - 1 */
    PP_ACT_SEND_B, /* send the input gradient to stage - 1 */
    PP_ACT_RECV_B, /* receive the output gradient from stage + 1 */
    /* Placed by the lowering under run.offload (never written in a schedule): */
    PP_ACT_OFFLOAD, /* copy the micro-batch's backward-read activations to pinned host memory */
    PP_ACT_RELOAD,  /* copy them back into a device slot before its backward */
    /* Placed by the lowering under pipeline.data_parallel > 1: */
    PP_ACT_REDUCE, /* reduce one bucket of the stage's gradients across the d replicas (mb: the
                      bucket's index) */
    PP_ACT_COUNT
} pp_action_kind_t;

/* The kinds a written schedule (steps, CSV) may hold: F .. RECV_B. */
#define PP_ACT_WRITTEN_COUNT (PP_ACT_RECV_B + 1)

typedef struct pp_action {
    pp_action_kind_t kind;
    int stage;   /* global stage index */
    int mb;      /* micro-batch index */
    int overlap; /* 1: may run at once with the compute action before it on the device (the
                    backward half of PyTorch's OVERLAP_F_B pair, DualPipeV) */
} pp_action_t;

static inline int pp_action_is_compute(pp_action_kind_t k)
{
    return k <= PP_ACT_W;
}
static inline int pp_action_is_comm(pp_action_kind_t k)
{
    return k >= PP_ACT_SEND_F && k <= PP_ACT_RECV_B;
}
/* A copy between a device slot and pinned host memory (run.offload). */
static inline int pp_action_is_copy(pp_action_kind_t k)
{
    return k == PP_ACT_OFFLOAD || k == PP_ACT_RELOAD;
}

typedef struct pp_program {
    int n;          /* actions */
    int cap;        /* allocated */
    pp_action_t *a; /* in the order the device runs them */
} pp_program_t;

/* Where a written schedule came from, for messages (schedule_origin): its source (a file, or the
 * --set text that gave it) and where each device's program starts in it (its `steps:` list, its
 * CSV row). Plain storage; all zero for a generated schedule, whose messages name no place. */
#define PP_ORIGIN_NAME_MAX 256
typedef struct pp_sched_origin {
    char name[PP_ORIGIN_NAME_MAX]; /* "" when the schedule has no source */
    int line[PP_MAX_DEVICES];      /* 1-based; 0 where the source has no lines (a --set value) */
    int col[PP_MAX_DEVICES];       /* 1-based */
} pp_sched_origin_t;

typedef struct pp_schedule {
    int n_devices;            /* p */
    int n_stages;             /* total stages */
    int n_mb;                 /* m */
    int *stage_device;        /* [n_stages]: the device that owns each stage */
    pp_program_t *prog;       /* [n_devices] */
    int has_comm;             /* 1 when the programs hold SEND/RECV actions */
    int split_backward;       /* 1 when backward is written as I + W (zero-bubble style) */
    pp_sched_origin_t origin; /* where it was written (schedule_set_origin), zero otherwise */
} pp_schedule_t;

/* Allocate an empty schedule: every program empty, stage_device all -1. */
pp_status_t schedule_init(pp_schedule_t *s, int n_devices, int n_stages, int n_mb);
void schedule_free(pp_schedule_t *s);

/* Append one action to device d's program. */
pp_status_t schedule_push(pp_schedule_t *s, int d, pp_action_kind_t kind, int stage, int mb);

/* Mark the last action of device d's program as the second half of an overlapped pair
 * (pp_action_t.overlap): it may run at once with the compute action before it. */
pp_status_t schedule_mark_overlap(pp_schedule_t *s, int d);

/* Name the source of s (cut to PP_ORIGIN_NAME_MAX - 1 bytes) for messages; each device's place in
 * it is set in s->origin.line[] and col[] by the reader. */
void schedule_set_origin(pp_schedule_t *s, const char *name);

/* The prefix of a message about device d's program: "name:line:col: ", "name: " where the source
 * has no lines, "" for a schedule with no source. Returns buf (size >= PP_ORIGIN_NAME_MAX + 32). */
const char *schedule_origin(const pp_schedule_t *s, int d, char *buf, size_t size);

/* The text form, as messages give it after "allowed:". */
#define PP_ACTION_FORMS                                                                            \
    "<stage><kind><micro-batch>, kind F, B, I, W, SEND_F, RECV_F, SEND_B or RECV_B, e.g. 0F3, "    \
    "1I2, 2SEND_F1"

/* Parse the text form of one action ("0F3", "2SEND_F1"). Returns 0 on success, -1 when `text` is
 * not an action. Whitespace around it is not accepted. */
int action_parse(const char *text, pp_action_t *out);

/* Write the text form of `a` into buf (at least 32 bytes); returns buf. */
char *action_format(const pp_action_t *a, char *buf, size_t size);

/* The letter or name of a kind as in the text form: "F", "B", "I", "W", "SEND_F", ... */
const char *action_kind_name(pp_action_kind_t k);

/* What schedule_place found wrong. */
typedef enum pp_place_what {
    PP_PLACE_OK = 0,
    PP_PLACE_RANGE,       /* an action's stage is out of range */
    PP_PLACE_TWO_DEVICES, /* a stage has actions on two devices */
    PP_PLACE_MISSING      /* a stage has no action at all */
} pp_place_what_t;

typedef struct pp_place_problem {
    pp_place_what_t what;
    int device, step;      /* the action (RANGE, TWO_DEVICES) */
    int stage;             /* the stage */
    int owner, owner_step; /* TWO_DEVICES: the device that runs the stage, its first action there */
} pp_place_problem_t;

/* Derive stage_device from the programs: each stage lives on the one device its actions are on.
 * The one check of "one device per stage" for a schedule someone wrote. Returns PP_ERR_INPUT and
 * fills *why (printing nothing) when a stage is out of range, on two devices or on none. */
pp_status_t schedule_place(pp_schedule_t *s, pp_place_problem_t *why);

/* schedule_place, printing `where: device d, step i, action X: ...` for a problem. */
pp_status_t schedule_infer_placement(pp_schedule_t *s, const char *where);

/* PyTorch pipelining CSV: one row per rank, one cell per time slot, cells like `0F0`, `1B3`,
 * `2I1`, `2W1`, `1SEND_F0`, empty for an idle slot. `where` names the source in messages
 * (file:line:col). n_stages is inferred as 1 + the largest stage seen, n_mb likewise. */
pp_status_t schedule_read_csv(pp_schedule_t *s, FILE *f, const char *where);
pp_status_t schedule_write_csv(const pp_schedule_t *s, FILE *f);

/* The YAML `schedule: steps:` form, as the config reads it (one flow list per device). */
pp_status_t schedule_write_yaml(const pp_schedule_t *s, FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* PP_SCHEDULE_H */
