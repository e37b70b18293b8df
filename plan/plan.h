/*
 * plan.h — the lowered plan: the one data structure the simulator and the executor both read.
 *
 * A plan is a flat list of ops. Each op is one action on one device, bound to a stream role, an
 * activation slot and the ops it must wait for. `ops` is stored in a topological order of the
 * dependencies (the enqueue order): every dependency of op i has an index < i, and a RECV always
 * sits right after its matching SEND (so NCCL pairs can share one group). Ops of one channel (a
 * device's compute stream, or its send or recv channel with one peer device: pp_channel_of) run in
 * the order they appear here: that FIFO order is implicit, not listed in deps.
 *
 * Memory is decided by the schedule: slots_per_stage comes from liveness over each device's
 * program (a (stage, micro-batch) holds a slot from its first op on the device to its last), and
 * reuse of a slot is a dependency of the new holder's first op on the old holder's last ops.
 * Under run.offload a micro-batch the lowering offloads holds a slot from its first op to its
 * OFFLOAD and again from its RELOAD to its last op, and a pinned host slot from OFFLOAD to RELOAD
 * (host_slots_per_stage, reused in the same way); slots_per_stage is then the device ring.
 * A stage that keeps part of each slot on the device (offload_keep) holds, besides that ring, a
 * kept region per micro-batch from its first compute op to its last (keep_slot,
 * keep_slots_per_stage), reused in the same way. With the backward split, wgrad_slots_per_stage
 * counts the micro-batches whose I has run and whose W has not, at most, in each device's program
 * order (the stage's I->W buffers).
 *
 * Built by plan_lower (lower.c) and checked by plan_validate (validate.c); owns all its arrays.
 */
#ifndef PP_PLAN_H
#define PP_PLAN_H

#include "common/pp_status.h"
#include "model/job.h"
#include "schedule.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Stream roles: the rows of the role table (roles.c). Every device has one stream per role (one
 * per peer device for a per-peer role); compute is the device's main stream, which starts the
 * others at the beginning of a step and joins them at its end. overlap is the device's second
 * compute stream: the backward half of an overlapped pair (DualPipeV's OVERLAP_F_B) runs there,
 * beside the forward half on compute. offload (device to host) and load (host to device) carry
 * the copies of run.offload. reduce carries the gradient reductions across data-parallel replicas.
 */
typedef enum pp_role {
    PP_ROLE_COMPUTE = 0,
    PP_ROLE_SEND,
    PP_ROLE_RECV,
    PP_ROLE_OFFLOAD,
    PP_ROLE_LOAD,
    PP_ROLE_OVERLAP,
    PP_ROLE_REDUCE,
    PP_ROLE_COUNT
} pp_role_t;

typedef struct pp_role_row {
    const char *name;  /* in traces and messages: "compute", "send", "recv", "offload", "load",
                          "overlap", "reduce" */
    int high_priority; /* 1: created at the device's greatest stream priority */
    int per_peer;      /* 1: one stream per peer device it talks with (a channel per directed
                          pair: a transfer waits only for transfers of the same pair) */
    int computes;      /* 1: runs compute ops (F, B, I, W): busy time, the Gantt rows */
} pp_role_row_t;

/* The role table (roles.c), in enum order. */
extern const pp_role_row_t pp_role_rows[PP_ROLE_COUNT];

/* The row of role r (the compute row for a value out of range). Inline: every pass over the ops
 * asks it once or more per op. */
static inline const pp_role_row_t *pp_role_row(pp_role_t r)
{
    return (int)r >= 0 && r < PP_ROLE_COUNT ? &pp_role_rows[r] : &pp_role_rows[PP_ROLE_COMPUTE];
}

/* The stream role an op of kind k runs on (roles.c: one table, by kind). */
pp_role_t pp_role_of_kind(pp_action_kind_t k);

/* 48 bytes: every pass over a plan reads every op, so the three small enums share one word
 * (8-bit fields: every value of each enum fits). */
typedef struct pp_op {
    int device;                /* pipeline device index 0..n_devices-1 */
    pp_role_t role : 8;        /* stream the op runs on */
    pp_action_kind_t kind : 8; /* what it does */
    pp_transport_t link : 8;   /* SEND/RECV: a row of model/transport.h; NONE for compute */
    int stage;     /* the stage the action belongs to (for SEND/RECV: the local stage) */
    int mb;        /* micro-batch */
    int slot;      /* activation slot of (stage, mb) on this device */
    int pos;       /* position in its device's program (for messages), 0-based */
    int peer;      /* SEND: index of the matching RECV op; RECV: of the SEND; REDUCE: the first op
                      of its group (the d replicas' REDUCE of one stage and bucket, adjacent in
                      plan order, replica 0 first); else -1 */
    int host;      /* OFFLOAD/RELOAD: pinned host slot of (stage, mb); REDUCE: the hosts its
                      group spans (1: within one host); else -1 */
    size_t bytes;  /* SEND/RECV, OFFLOAD/RELOAD, REDUCE: bytes moved (REDUCE: the bucket's
                      gradients, what each replica holds) */
    int dep_begin; /* deps of this op are plan.deps[dep_begin .. dep_begin + n_deps) */
    int n_deps;
} pp_op_t;

typedef struct pp_plan {
    int n_devices;              /* every device: p x d (replica r's device i is r * p + i) */
    int data_parallel;          /* d: replicas of the pipeline (0 or 1: one) */
    int n_stages;               /* total stages */
    int n_mb;                   /* m */
    int chunks;                 /* stages per device (v) */
    int split_backward;         /* 1 when backward is I + W */
    pp_sched_kind_t kind;       /* the schedule it came from */
    int *stage_device;          /* [n_stages]: the device of the stage in replica 0 (replica r's
                                   is r * p + stage_device[s]: plan_stage_device) */
    int *slots_per_stage;       /* [n_stages]: activation slots the stage needs on its device */
    int *wgrad_slots_per_stage; /* [n_stages]: I->W buffers: most micro-batches of the stage
                                   between their I and their W on its device (0 without I/W) */
    int *host_slots_per_stage;  /* [n_stages]: pinned host slots (0 without run.offload) */
    int *plain_slots_per_stage; /* [n_stages]: slots the schedule needs without offload */
    size_t *offload_bytes;      /* [n_stages]: bytes one OFFLOAD or RELOAD moves (0: unknown) */
    int *offload_keep;          /* [n_stages]: the backward-read tensors of a slot the stage keeps
                                   on the device while the rest moves (pp_stage_cfg_t's
                                   offload_keep); 0: whole slots move */
    int *keep_slots_per_stage;  /* [n_stages]: kept regions, one per micro-batch held at once (0
                                   where offload_keep is 0) */
    int *keep_slot;             /* [n_stages * n_mb]: the kept region of (stage, mb) on its
                                   device, held from its first compute op to its last; -1 where
                                   the stage has none */
    int offload;                /* 1: run.offload placed OFFLOAD/RELOAD ops */
    int offload_lookahead;      /* RELOAD goes this many compute ops before its backward (offload
                                   auto: the longest of its keys', each op's own is its place) */
    int n_ops;
    pp_op_t *ops; /* [n_ops], topological (enqueue) order */
    int n_deps_total;
    int *deps;     /* dependency pool: indices into ops */
    int *prog_ops; /* [n_ops]: op indices grouped by device, each group in program order */
    int *
        prog_begin; /* [n_devices+1]: device d's ops are prog_ops[prog_begin[d]..prog_begin[d+1]) */
    size_t boundary_bytes; /* bytes of one activation (= one gradient) crossing a stage boundary */
} pp_plan_t;

/* The replicas of a plan (data_parallel, at least 1), the devices of one replica (p), the replica
 * of device dev, and the device of stage s in replica r. Every per-stage array of the plan is the
 * same in every replica. */
static inline int plan_replicas(const pp_plan_t *plan)
{
    return plan->data_parallel > 1 ? plan->data_parallel : 1;
}
static inline int plan_pipe_devices(const pp_plan_t *plan)
{
    return plan->n_devices / plan_replicas(plan);
}
static inline int plan_replica_of(const pp_plan_t *plan, int dev)
{
    return dev / plan_pipe_devices(plan);
}
static inline int plan_stage_device(const pp_plan_t *plan, int s, int r)
{
    return r * plan_pipe_devices(plan) + plan->stage_device[s];
}
/* The forward half of the overlapped pair whose backward half is op k (role overlap): the compute
 * op before k in its device's program (the lowering puts the two halves side by side); -1 when
 * there is none. */
static inline int plan_pair_forward(const pp_plan_t *plan, int k)
{
    const int *prog = plan->prog_ops + plan->prog_begin[plan->ops[k].device];
    for (int j = plan->ops[k].pos - 1; j >= 0; j--)
        if (plan->ops[prog[j]].role == PP_ROLE_COMPUTE) return prog[j];
    return -1;
}
/* 1 when stage s (of its replica) lives on device dev. */
static inline int plan_stage_on(const pp_plan_t *plan, int s, int dev)
{
    return plan->stage_device[s] == dev % plan_pipe_devices(plan);
}

/* Lower a schedule into a plan. A compute-only schedule gets SEND/RECV inserted (the SEND right
 * after the producing compute op, the RECV right before the consuming one); a schedule with
 * communication keeps its actions as written. Links: each boundary's job_boundary_transport
 * (local on one device, shared on one GPU, else pipeline.transport or auto's pick by the job's
 * process layout). With pipeline.data_parallel d > 1 the schedule (one replica's) is lowered once
 * with a REDUCE op per stage and gradient bucket (reduce.c), then laid out d times, replica r on
 * devices r * p .. r * p + p - 1, each op's d copies side by side in plan order (a transfer's
 * SEND and RECV stay together), so that the d REDUCE ops of a stage and bucket are adjacent.
 * Fails with PP_ERR_INPUT, naming device, position and action,
 * when the schedule cannot be lowered (a RECV without its SEND, a dependency cycle, ...). */
pp_status_t plan_lower(pp_plan_t *plan, const pp_schedule_t *sched, const pp_job_t *job);

/* The bytes of one REDUCE bucket (pipeline.reduce_bucket_mb) of a stage holding `grad_bytes` of
 * gradients: bucket b of the stage starts b times this into them, the last one may be shorter. The
 * whole stage is one bucket when the key is 0 or at least as large. */
size_t plan_reduce_bucket_bytes(const pp_job_t *job, size_t grad_bytes);

/* Where offload auto puts the copies of one (stage, micro-batch): its OFFLOAD after the `lag`-th
 * compute op after its forward (0: right after the forward phase, 1: after the next op), its
 * RELOAD `ahead` compute ops before its backward (0: right before the backward phase); `on` 0
 * keeps the key on the device. Each is shortened where the key's lifetime is shorter. */
typedef struct pp_offload_key {
    int on;
    int lag;
    int ahead;
} pp_offload_key_t;

/* plan_lower under run.offload: auto with the slots chosen to go to the host, pick[stage * n_mb +
 * mb] for each key. NULL, or a job without offload auto: plan_lower. Nothing chosen gives
 * plan_lower's plain plan. */
pp_status_t plan_lower_offload(pp_plan_t *plan, const pp_schedule_t *sched, const pp_job_t *job,
                               const pp_offload_key_t *pick);
/* plan_lower_offload where each stage s with a key chosen moves only part of each slot: keep[s]
 * of its backward-read tensors, the smallest, stay on the device (stage_size.h's offload_keep;
 * NULL or 0: the whole range moves). */
pp_status_t plan_lower_partial(pp_plan_t *plan, const pp_schedule_t *sched, const pp_job_t *job,
                               const pp_offload_key_t *pick, const int *keep);

/* Check the rules of a valid schedule on a plan: exactly one F per (stage, mb), B or I+W after
 * its F (on the same device), W after its I, every stage on one device, each SEND matched by one
 * RECV of the same (stage boundary, mb, direction), and no deadlock (a dry run over the plan).
 * Prints `device d, step i, action X: message` for the first problem; returns PP_ERR_INPUT. */
pp_status_t plan_validate(const pp_plan_t *plan);

/* Check a schedule before lowering (the compute rules above, on the programs as written).
 * Deadlocks are plan_lower's to find: its dry run names every stuck device. */
pp_status_t schedule_validate(const pp_schedule_t *sched);

/* Text grid of the plan's compute actions (one row per device, one column per program step),
 * as `ppsched show` prints it. */
void plan_print_grid(const pp_plan_t *plan, FILE *f);

/* Device bytes per device (plan_device_bytes; with run.offload also without it, and the pinned
 * host bytes), as `ppsched show` prints them after the grid. */
void plan_print_memory(const pp_plan_t *plan, const pp_job_t *job, FILE *f);

/* The link of every stage boundary s -> s + 1 into link[s], s < n_stages - 1: that of the
 * boundary's forward transfers (lowering gives every transfer of a boundary the same; NONE for a
 * boundary no transfer crosses). The banner and the report name what each boundary got. */
void plan_boundary_links(const pp_plan_t *plan, pp_transport_t *link);

void plan_free(pp_plan_t *plan);

/* ---- run.offload and memory (offload.c) ---- */

/* 1 when ops of kind k belong to a micro-batch's backward phase (they use the slot RELOAD fills:
 * RECV_B, B, I, W, SEND_B, RELOAD), 0 for the forward phase (RECV_F, F, SEND_F, OFFLOAD). */
int offload_phase(pp_action_kind_t k);

/* Where the lowering puts the copies of each (stage, mb) of one device's program `prog` (as
 * written, key = stage * n_mb + mb): OFFLOAD right after action off_after[key] (the compute op
 * after the forward, or pick[key].lag compute ops after it when pick is not NULL; or the forward
 * phase's last action), RELOAD right before rel_before[key] (`lookahead` compute ops before the
 * backward, or pick[key].ahead; or the backward phase's first action), a pick shortened until the
 * key fits (down to 0 each; the next op and `lookahead` without a pick). Keys it does not offload
 * (pick[key].on 0, or no compute op would run between the two) are left as they are (-1). */
pp_status_t offload_place(const pp_program_t *prog, int n_st, int n_mb, int lookahead,
                          const pp_offload_key_t *pick, int *off_after, int *rel_before);

/* Device bytes of device d's stages (stage_device_bytes), with the plan's slots, or (plain) with
 * the slots the schedule needs without offload; and the pinned host bytes of its host slots. */
size_t plan_device_bytes(const pp_plan_t *plan, const pp_job_t *job, int d, int plain);
size_t plan_host_bytes(const pp_plan_t *plan, int d);

/* Fill plain_slots_per_stage: liveness over the programs without the copies (a (stage, mb) holds
 * a slot from its first op to its last). */
pp_status_t plan_plain_slots(pp_plan_t *plan);

/* The rules of the copies: each op on its kind's stream; OFFLOAD after its forward and waiting
 * for it, RELOAD after its OFFLOAD on the same device and waiting for it, both on one host slot
 * in range moving the stage's offload bytes; every backward-phase op after the RELOAD in its
 * program, on the slot it filled, and RECV_B, B and I waiting for it; every compute op of a
 * stage that keeps part of each slot with its micro-batch's kept region in range. */
pp_status_t plan_check_offload(const pp_plan_t *plan);

/* The channels a plan orders its ops on: one per device for a role with one stream per device
 * (compute, offload, load, overlap), one per directed device pair for a per-peer role (a send and a
 * recv channel per pair), laid out role after role in the order of the role table. Ops of one
 * channel run in plan order: program order, except that a send channel follows the order in which
 * the receiver posts its RECVs (lower.c). Channels are independent of each other, so a device's
 * send to one peer never waits behind its send to another, and a SEND never holds up the sender's
 * compute. An executor may map several channels onto one stream as long as it enqueues them in
 * plan order. */
#define PP_MAX_CHANNELS /* an upper bound: every role per device, and two per-peer roles */        \
    (PP_ROLE_COUNT * PP_MAX_DEVICES + 2 * PP_MAX_DEVICES * PP_MAX_DEVICES)
static inline int pp_role_channels(int n_devices, pp_role_t r)
{
    return pp_role_row(r)->per_peer ? n_devices * n_devices : n_devices;
}
static inline int pp_channel_count(int n_devices)
{
    int n = 0;
    for (int r = 0; r < PP_ROLE_COUNT; r++)
        n += pp_role_channels(n_devices, (pp_role_t)r);
    return n;
}
static inline int pp_channel_of(int n_devices, int device, pp_role_t role, int peer_device)
{
    int c = 0;
    for (int r = 0; r < (int)role && r < PP_ROLE_COUNT; r++)
        c += pp_role_channels(n_devices, (pp_role_t)r);
    return c + (pp_role_row(role)->per_peer ? device * n_devices + peer_device : device);
}
/* Channel of plan op k (its pair must be matched: peer set for a SEND or RECV). */
static inline int pp_plan_channel(const struct pp_plan *plan, int k)
{
    const pp_op_t *o = &plan->ops[k];
    int peer_dev = pp_role_row(o->role)->per_peer ? plan->ops[o->peer].device : 0;
    return pp_channel_of(plan->n_devices, o->device, o->role, peer_dev);
}

static inline const char *pp_role_name(pp_role_t r)
{
    return pp_role_row(r)->name;
}
#ifdef __cplusplus
}
#endif

#endif /* PP_PLAN_H */
