/*
 * execute_internal.h — the executor's parts, shared by exec/execute*.c and private to them.
 *
 *   world  (execute_world.c):  the devices this process owns, their streams (one per row of the
 *                              role table, or per peer device for a per-peer row, at the row's
 *                              priority), the per-device events that fork and join a step, the
 *                              step counters, and the clock alignment.
 *   step   (execute_step.c):   enqueues one step: every op of an owned device in plan order, each
 *                              transfer as the halves its transport posts; graph capture.
 *   timing (execute_timing.c): waiting with a timeout, naming pending ops, reading step and op
 *                              times.
 *   execute.c:                 set-up (stages, op events, transports), the banner, the run loop.
 *   group  (execute_group.c):  an MPI launch (pp_group.h): this process's share of the devices,
 *                              agreeing on failures step by step, the clock offsets and the
 *                              merge of every process's timeline on rank 0's time axis.
 *
 * Device numbers are global pipeline indices everywhere; world_owns(w, d) says whether this
 * process drives device d. The step enqueuer asks it and nothing else about processes.
 */
#ifndef PP_EXECUTE_INTERNAL_H
#define PP_EXECUTE_INTERNAL_H

#ifndef PP_WITH_NCCL
#define PP_WITH_NCCL
#endif
#include "execute.h"

#include "common/pp_cuda.h"
#include "p2p.h"
#include "stages/stage.h"

/* The devices of this process and what each needs to run a step. */
typedef struct pp_world {
    int p;                               /* pipeline devices, global numbering 0..p-1 */
    int origin;                          /* the first owned device: forks and joins a step */
    int priorities;                      /* 1: streams at their role's priority (run.priorities) */
    unsigned char owned[PP_MAX_DEVICES]; /* 1: this process drives device d */
    int cuda[PP_MAX_DEVICES];            /* CUDA ordinal of device d */
    unsigned char talks[PP_MAX_DEVICES][PP_MAX_DEVICES]; /* 1: d sends to q (world_talk) */
    cudaStream_t stream[PP_MAX_DEVICES][PP_ROLE_COUNT];  /* roles with one stream per device */
    cudaEvent_t tail[PP_MAX_DEVICES][PP_ROLE_COUNT];     /* their ends, joined into compute */
    cudaStream_t *peer_stream; /* [role][d][q] (world_stream): per-peer roles, where d and q talk */
    cudaEvent_t *peer_tail;    /* same shape: their ends, joined into compute */
    cudaEvent_t go;            /* on the origin: the step's fork */
    cudaEvent_t ref[PP_MAX_DEVICES];   /* device d's time origin (timing) */
    cudaEvent_t fork[PP_MAX_DEVICES];  /* the other streams start after it */
    cudaEvent_t stop[PP_MAX_DEVICES];  /* device d's end of step (timing) */
    cudaEvent_t join[PP_MAX_DEVICES];  /* device d's end of step, joined by the origin */
    int *counters_host;                /* pinned [2]: data index base, optimizer step */
    int *counters_dev[PP_MAX_DEVICES]; /* device copies, read by the stages' kernels */
} pp_world_t;

static inline int world_owns(const pp_world_t *w, int d)
{
    return d >= 0 && d < w->p && w->owned[d];
}

/* The executor: the world, the stages and transports on it, one set of events per op. */
typedef struct exec {
    const pp_plan_t *plan;
    const pp_job_t *job;
    pp_exec_opts_t opts;
    pp_world_t w;
    int replicas;         /* pipeline.data_parallel: copies of the pipeline (plan_replicas) */
    pp_stage_t **stages;  /* [replicas][n_stages] (exec_stage); NULL for a stage of a device
                             another process owns */
    pp_stage_cfg_t *scfg; /* [n_stages]: the same in every replica */
    pp_p2p_t *p2p;
    unsigned char **host; /* [replicas][n_stages]: pinned host slots of run.offload (cudaHostAlloc,
                             once), host_slots_per_stage[s] of offload_bytes[s] each; NULL for
                             none */
    double *replica_loss; /* [replicas][warmup + steps]: each replica's share of the step's loss
                             (its last stage's sum over its micro-batches / (d * m)) */
    /* zero1 where replicas share a GPU: the gather's forks and joins (execute_shard.c) */
    cudaEvent_t shard_ev[PP_MAX_DEVICES];
    cudaEvent_t *ev_start; /* [n_ops], timing only */
    cudaEvent_t *ev_end;   /* [n_ops], timing only */
    cudaEvent_t *ev_dep;   /* [n_ops]: completion, for dependencies */
    int *done_op;          /* [n_ops]: op whose events signal op i done */
    int *meet_key;         /* [n_ops]: a SEND's key among the meeting transfers (p2p_connect), or
                              -1 */
    int capturing;         /* 1 while a step is being captured */
    cudaGraph_t graph;     /* the captured step (graph mode) */
    cudaGraphExec_t gexec;
    /* Under an MPI launch (opts.group of several processes, execute_group.c): */
    int rank_of[PP_MAX_DEVICES]; /* the process that owns each pipeline device */
    double *launch_s;            /* [warmup + steps]: host time each step was launched */
    double clock_offset_ms;      /* this process's clock minus rank 0's */
    double clock_residual_ms;    /* the bound on that offset's error */
    double *clock_all;           /* rank 0: [size][2], every process's offset and bound */
} exec_t;

/* Stage s of replica r (plan_stage_device(plan, s, r) holds it), and the stage an op runs on. */
static inline pp_stage_t **exec_stage(const exec_t *x, int r, int s)
{
    return &x->stages[r * x->plan->n_stages + s];
}
static inline pp_stage_t *exec_op_stage(const exec_t *x, const pp_op_t *op)
{
    return *exec_stage(x, plan_replica_of(x->plan, op->device), op->stage);
}

/* 1 under run.optimizer_sharding zero1 (with AdamW and replicas): each replica updates its part of
 * every stage's parameters, from its part of the reduced gradients. */
static inline int exec_zero1(const exec_t *x)
{
    return x->plan->n_stages > 0 && x->scfg[0].optimizer_shards > 1;
}

/* ---- shard (execute_shard.c): run.optimizer_sharding zero1 ---- */

/* Every replica's part of each gradient bucket of every stage gathered into every replica: the
 * parameters' storage copy, after the optimizer, on each device's compute stream (grads 0); or,
 * once after the run for check_grads, the reduced gradients (grads 1). */
pp_status_t exec_gather_parts(exec_t *x, int grads);

/* ---- world (execute_world.c) ---- */

/* Zero w and own every one of the p devices (CUDA ordinals cuda[d]): one process drives them all.
 * A launch that gives each process its share of the devices sets owned[] and origin instead. */
void world_own_all(pp_world_t *w, int p, const int *cuda);

/* Own the devices whose rank_of[d] is `rank` (an MPI launch's share, pp_group.h); the origin is
 * the first of them. Each process starts and joins its own steps; a dependency on a device of
 * another process is carried by the transport (NCCL). */
void world_own_share(pp_world_t *w, int p, const int *cuda, const int *rank_of, int rank);

/* Device d sends to device q in the plan (d == q: between two stages of d): both get the streams
 * of per-peer roles for each other. Called for every transfer before world_create. */
static inline void world_talk(pp_world_t *w, int d, int q)
{
    w->talks[d][q] = 1;
}

/* Create the owned devices' streams (one per role, or per peer device d talks with for a per-peer
 * role, at the role's priority), events and counters. world_free takes a half-built world. */
pp_status_t world_create(pp_world_t *w);

/* The stream of role r on owned device d towards peer device q (q is ignored for a role with one
 * stream per device); NULL when none was made (d and q do not talk). */
cudaStream_t world_stream(const pp_world_t *w, int d, pp_role_t r, int q);

/* Device d's streams other than compute and the events that end each one's step: up to `max`,
 * returns how many. The fork and the join of a step go through these. */
int world_side_streams(const pp_world_t *w, int d, cudaStream_t *s, cudaEvent_t *tail, int max);
void world_free(pp_world_t *w);

/* Bound the misalignment of the owned devices' time origins (see execute_world.c). */
pp_status_t world_measure_skew(pp_world_t *w, double *skew_ms);

/* ---- step (execute_step.c) ---- */

pp_status_t exec_enqueue_step(exec_t *x, int step, double deadline);

/* Source and destination of the transfer whose SEND is `snd` and RECV `rcv` (NULL on a device
 * this process does not own), with its meeting key. */
p2p_xfer_t exec_transfer_of(const exec_t *x, const pp_op_t *snd, const pp_op_t *rcv);

/* Capture one step into x->gexec; on failure a note says why and x->gexec stays NULL (PP_OK). */
pp_status_t exec_capture_step(exec_t *x, int step, double deadline);

/* Timing events record as external nodes while capturing (see execute_step.c). */
cudaError_t exec_record_timing(const exec_t *x, cudaEvent_t ev, cudaStream_t stream);

/* ---- timing (execute_timing.c) ---- */

double exec_now_s(void);

/* Wait until `ev` completes or `deadline` passes: PP_OK, PP_ERR_TIMEOUT (no message), or a CUDA
 * error (printed). */
pp_status_t exec_poll_event(cudaEvent_t ev, double deadline);

/* After a timeout: name the first unfinished op of every owned device, then abort NCCL. */
void exec_report_pending(exec_t *x, int step, double timeout_s);

/* Wait for the step on every owned device; on timeout name the pending ops. */
pp_status_t exec_finish_step(exec_t *x, int step, double deadline);

/* Step time of the last step (latest owned device's end, from the common origin) and its op
 * times relative to each device's origin (ops of devices this process does not own stay 0). */
pp_status_t exec_read_step_ms(exec_t *x, double *out);
pp_status_t exec_read_op_times(exec_t *x, pp_op_time_t *t);

/* The index of the median of step_ms[steps] (the latest of equal ones). */
int exec_median_step(const double *step_ms, int steps);

/* Fill tl->step_ms from step_ms[steps] and tl->t from step `pick`'s op times (times may be
 * NULL: timing off; pick < 0: the median step), shifted so the step starts at 0 when
 * `to_zero` (a process of an MPI launch leaves that to the merge). */
pp_status_t exec_keep_median(pp_timeline_t *tl, const double *step_ms, int steps,
                             const pp_op_time_t *times, int n_ops, int pick, int to_zero);

/* ---- group (execute_group.c): one process of an MPI launch -------------------------------- */

/* 1 when this executor is one of several processes. */
static inline int exec_in_group(const exec_t *x)
{
    return x->opts.group && x->opts.group->size > 1;
}

/* This process's share of the p devices (pipeline.devices_per_process, or an even split): owned
 * devices get their CUDA ordinal (cuda[], in: pipeline.devices; on several hosts, out: the
 * local rank's run of the host's GPUs), checked against the n_vis visible ones. */
pp_status_t exec_share_devices(exec_t *x, int *cuda, int n_vis);

/* Before step `step` (and after the last, step = warmup + steps): every process learns of a
 * failure of any (st), and the step's launch time is kept. Collective, once per step on every
 * process, so a failure in step k ends every process after the same call. */
pp_status_t exec_step_agree(exec_t *x, pp_status_t st, int step);

/* After the run: the same representative step on every process (rank 0's median), its op times
 * moved onto rank 0's clock (launch times and the measured clock offsets), every timeline merged
 * (timeline_merge) and the loss from the process that owns the last stage. Collective. */
pp_status_t exec_group_merge(exec_t *x, pp_timeline_t *tl, pp_exec_result_t *res,
                             const double *step_ms, const pp_op_time_t *times);

/* check_grads: after every process kept the gradients of its own stages in place (res->grads in
 * stage order, `st` its status), each stage's from the process that owns it, so every process
 * holds the whole model's. Collective. */
pp_status_t exec_group_grads(exec_t *x, pp_exec_result_t *res, pp_status_t st);

#endif /* PP_EXECUTE_INTERNAL_H */
