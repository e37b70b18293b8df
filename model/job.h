/*
 * job.h — the job: one resolved, read-only description of a training step to plan, simulate or
 * run. config/resolve.c makes it from what the user wrote (config/config.h) and the machine;
 * every phase after that (schedule, plan, sim, report, run, exec) reads the job, or the output of
 * the phase before, and never the config. A job holds the model shape with its layer split, the
 * pipeline (p, v, m, the devices, placement, transport), the kind, the run options and where the
 * costs come from; nothing in it is left to be decided ("devices: all", "stages: auto" and the
 * balanced split are resolved). A job owns its strings; free it with job_free.
 */
#ifndef PP_JOB_H
#define PP_JOB_H

#include "common/pp_status.h"
#include "model/stage_size.h"
#include "model/transport.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The schedule kinds; the value is the row's index in the table. */
typedef enum pp_sched_kind {
    PP_SCHED_GPIPE = 0,
    PP_SCHED_1F1B,
    PP_SCHED_INTERLEAVED,    /* interleaved 1F1B, v = stages / devices chunks per device */
    PP_SCHED_ZBH1,           /* zero-bubble H1: backward split into I and W */
    PP_SCHED_ZBH2,           /* zero-bubble H2: 2p-1 in flight, W to the tail */
    PP_SCHED_ZBV,            /* zero-bubble V: two chunks per device in a V, 1F1B's memory */
    PP_SCHED_DUALPIPEV,      /* DeepSeek's DualPipeV: V placement, overlapped F and B pairs */
    PP_SCHED_LOOPED_BFS,     /* breadth-first: all forwards of a chunk before the next chunk */
    PP_SCHED_INTERLEAVED_ZB, /* interleaved 1F1B with I and W (PyTorch's ZB1P) */
    PP_SCHED_AUTO,           /* built from the stages' F, I, W costs (gen_auto.c) */
    PP_SCHED_STEPS,          /* explicit per-device action lists written in the YAML */
    PP_SCHED_CSV,            /* PyTorch pipelining CSV, one row per rank */
    PP_SCHED_KIND_COUNT
} pp_sched_kind_t;

/* How stages map onto devices when a device holds several: loop (stage s on device s mod p) or
 * v (stage s on device s for the first p stages, then back down: p-1, ..., 0). */
typedef enum pp_placement { PP_PLACEMENT_LOOP = 0, PP_PLACEMENT_V } pp_placement_t;

/* `pipeline.split`: layers / stages blocks per stage, or the split that evens stage times. */
typedef enum pp_split { PP_SPLIT_EVEN = 0, PP_SPLIT_BALANCED } pp_split_t;

typedef enum pp_optimizer { PP_OPT_NONE = 0, PP_OPT_ADAMW } pp_optimizer_t;

/* run.offload: NONE keeps every micro-batch's activations on the device from its forward to its
 * backward; ACTIVATIONS copies every eligible one to pinned host memory in between (lower.c places
 * the copies); AUTO copies only the (stage, micro-batch) slots it must for every device's
 * predicted peak to fit run.memory_limit, the longest-lived first (run.c's choice, offload_auto.c).
 */
typedef enum pp_offload {
    PP_OFFLOAD_NONE = 0,
    PP_OFFLOAD_ACTIVATIONS,
    PP_OFFLOAD_AUTO
} pp_offload_t;

/* pipeline.reduce_align: AS_READY starts each stage's gradient reduction once that stage's last
 * backward has run; ALIGNED starts every stage's once the last backward of every stage has run. */
typedef enum pp_reduce_align { PP_REDUCE_AS_READY = 0, PP_REDUCE_ALIGNED } pp_reduce_align_t;

/* run.optimizer_sharding: NONE keeps AdamW's fp32 master and moments whole on every replica;
 * ZERO1 shards them over the d replicas of a stage (reduce-scatter the gradients, all-gather the
 * updated weights). */
typedef enum pp_opt_sharding { PP_SHARD_NONE = 0, PP_SHARD_ZERO1 } pp_opt_sharding_t;

/* The most data-parallel replicas (pipeline.data_parallel) and the GPUs of one host a single
 * process's devices are taken to be grouped in when a reduction is priced (job_device_host). */
#define PP_MAX_DATA_PARALLEL 64
#define PP_HOST_GPUS         8

typedef struct pp_job_model {
    int layers; /* transformer blocks in the whole model */
    /* Blocks of each stage (split.h): as listed in `layers_per_stage`, or filled by job_resolve
     * (even, or `pipeline.split: balanced`); n_layers_per_stage is 0 until one of them fills it. */
    int n_layers_per_stage;
    int layers_per_stage[PP_MAX_STAGES];
    int hidden;       /* model width h */
    int heads;        /* attention heads; hidden % heads == 0 */
    int seq_len;      /* tokens per sequence */
    int vocab;        /* vocabulary size of the embedding and the LM head */
    pp_dtype_t dtype; /* storage of activations and parameters */
} pp_job_model_t;

typedef struct pp_job_pipeline {
    int devices_all;                /* 1 when `devices: all` (0 once job_resolve ran) */
    int n_devices;                  /* p: devices one pipeline uses */
    int data_parallel;              /* d: replicas of the pipeline (1: none); the devices are
                                       p x d, replica r's device i is pipeline device r * p + i */
    int device_ids[PP_MAX_DEVICES]; /* global CUDA ordinal of pipeline device d (all p x d of
                                       them); several pipeline devices may share one (each keeps
                                       its streams and memory) */
    int stages;                     /* total stages; 0 while `auto` (= p * chunks) */
    int chunks;                     /* v: stages per device (resolved: stages / n_devices) */
    pp_placement_t placement;       /* loop | v */
    int micro_batches;              /* m */
    int micro_batch_size;           /* sequences per micro-batch */
    pp_transport_t transport;       /* a selectable row of model/transport.h, for stage boundaries
                                       across devices: peer, nccl, or auto (each boundary's own
                                       follows from where its ends are: job_boundary_transport) */
    pp_split_t split;               /* even | balanced (unless model.layers_per_stage is given) */
    int devices_per_process;        /* under mpirun: consecutive pipeline devices each process
                                       drives (0: the devices split evenly over the processes) */
    int reduce_bucket_mb;           /* MiB of gradients one REDUCE op moves (0: a whole stage) */
    pp_reduce_align_t reduce_align; /* as_ready | aligned */
} pp_job_pipeline_t;

typedef struct pp_job_run {
    int steps;     /* timed training steps */
    int warmup;    /* untimed steps before them */
    uint64_t seed; /* parameters and synthetic data */
    pp_optimizer_t optimizer;
    double lr;                /* AdamW learning rate */
    double weight_decay;      /* AdamW decoupled weight decay */
    double timeout_s;         /* longest wait for one step before reporting the pending op */
    int timing;               /* 1: record per-op device timestamps */
    int graph;                /* 1: capture one step as a CUDA graph and replay it */
    pp_recompute_t recompute; /* what the forward keeps for the backward (stage_size.h) */
    pp_offload_t offload;     /* activations to pinned host memory between F and backward */
    double memory_limit_gib;  /* run.memory_limit: GiB a device may take under offload auto; 0:
                                 the GPU description's memory less its margin (memory.h) */
    int priorities;           /* 1: communication streams at the device's greatest priority (the
                                 role table's), kept by the captured step's nodes; 0: all equal */
    pp_opt_sharding_t optimizer_sharding; /* none | zero1 (over the d replicas) */
} pp_job_run_t;

/* How the nccl transport is set up (`nccl:`); what each does is in docs/architecture.md. */
typedef enum pp_nccl_comms {
    PP_NCCL_COMMS_PAIR = 0, /* a communicator of two ranks per directed device pair the plan uses */
    PP_NCCL_COMMS_DEVICE    /* one communicator over every device, rank = pipeline device */
} pp_nccl_comms_t;

typedef enum pp_nccl_cta_policy {
    PP_NCCL_CTA_DEFAULT = 0, /* NCCL's own */
    PP_NCCL_CTA_EFFICIENCY,  /* the fewest CTAs that keep decent speed */
    PP_NCCL_CTA_ZERO         /* no CTA wherever NCCL can (copy engines) */
} pp_nccl_cta_policy_t;

typedef struct pp_job_nccl {
    pp_nccl_comms_t communicators;
    int wait_for_peer; /* 1: where one process posts both halves of a transfer, each half's stream
                          also waits for the other half's dependencies, so neither kernel is
                          launched to spin before its peer can meet it */
    int max_ctas; /* most CTAs a communicator's kernels take (ncclConfig_t maxCTAs); 0: NCCL's */
    pp_nccl_cta_policy_t cta_policy;
} pp_job_nccl_t;

/* Simulator cost model, hand-set: milliseconds per op for one micro-batch on one device's share of
 * the layers (a full backward `B` costs backward_input + backward_weight). They override the model
 * when any of them is given (config_cost_hand_set). */
typedef struct pp_job_cost {
    double forward;
    double backward_input;
    double backward_weight;
    double send;           /* one activation or gradient transfer across devices */
    double host_link_gbps; /* GB/s (1e9 B/s) of the host link, each direction, for the copies of
                              run.offload; 0 (default): the link table's `host` row (gpu.c) */
    double overlap; /* 0..1: share of the shorter half of an overlapped pair (DualPipeV) hidden
                       when both halves run at once; 0 runs them as one after the other. Unset
                       (config_is_set PP_CFG_OVERLAP), the model takes the profile's measured
                       overlap, else the GPU description's (cost.h) */
} pp_job_cost_t;

/* Where the model's costs come from (the rest of `cost:`): the stage's FLOPs and bytes on `gpu`
 * (cost.h), calibrated by `profile` when one is named. */
typedef struct pp_job_cost_src {
    char gpu[16]; /* GPU description (gpu.h); "" = the GPU present, else the profile's, else h100 */
    char link[16]; /* link description (gpu.h); "" = the one pipeline.transport implies */
    char *profile; /* profile file, as a path usable from here (relative to the YAML's folder in
                    * the file); NULL = none */
} pp_job_cost_src_t;

/* The processes of the run and where they are: who owns each pipeline device and on which host.
 * run/ sets it from the process group (common/pp_group.h) before the plan is lowered, the same on
 * every process; a job resolved alone is one process on one host (every entry 0). */
typedef struct pp_job_procs {
    int n_procs;                 /* processes of the run (1: this one alone) */
    int n_hosts;                 /* hosts they run on */
    int rank_of[PP_MAX_DEVICES]; /* the process that owns pipeline device d */
    int host_of[PP_MAX_DEVICES]; /* the host of that process */
} pp_job_procs_t;

typedef struct pp_job {
    char *path;                 /* the YAML file it came from (messages); owned */
    char *name;                 /* the schedule's name (`name:` or the file's base name); owned */
    pp_sched_kind_t kind;       /* a row of schedule/kinds.h (steps and csv: a written schedule) */
    pp_job_model_t model;       /* layers_per_stage filled for every stage */
    pp_job_pipeline_t pipeline; /* devices, stages and chunks resolved */
    pp_job_run_t run;
    pp_job_nccl_t nccl;
    pp_job_cost_t cost;         /* the hand-set `cost:` values (cost_hand_set says if any) */
    pp_job_cost_src_t cost_src; /* cost_src.profile owned */
    int cost_hand_set;    /* 1: any of cost.forward, backward_input, backward_weight, send set */
    int overlap_set;      /* 1: cost.overlap set (else the profile's or the GPU's) */
    pp_job_procs_t procs; /* the processes and hosts the pipeline devices are on */
} pp_job_t;

/* Every pipeline device of the run: p x d (replica r's device i is r * p + i). */
static inline int job_devices_total(const pp_job_t *job)
{
    const int d = job->pipeline.data_parallel > 1 ? job->pipeline.data_parallel : 1;
    return job->pipeline.n_devices * d;
}

/* The replicas of the pipeline (pipeline.data_parallel, at least 1). */
static inline int job_replicas(const pp_job_t *job)
{
    return job->pipeline.data_parallel > 1 ? job->pipeline.data_parallel : 1;
}

/* The host of pipeline device i for pricing a reduction across replicas: the process layout's
 * under a launch of several processes; alone, hosts of PP_HOST_GPUS consecutive devices (one
 * process cannot drive another host's GPUs, so this is how a plan for more GPUs than one host
 * holds is priced). */
int job_device_host(const pp_job_t *job, int i);

/* The host link that pipeline device i's copies to and from pinned host memory (run.offload)
 * take, named by the lowest pipeline device on the same GPU: each GPU has its own PCIe link to
 * its host, which the pipeline devices placed on that GPU share (pipeline.devices: [0,0,0,0]
 * puts four devices on one link; four GPUs have four). */
int job_copy_link(const pp_job_t *job, int i);

/* Tokens per training step of m micro-batches on each of the d replicas: d * m * micro_batch_size
 * * seq_len. m is the plan's (the schedule decides it: a written schedule's own count), never
 * pipeline.micro_batches. */
double job_tokens_per_step(const pp_job_t *job, int m);

/* Model FLOPs of one training step of m micro-batches on each replica (forward + backward = 3x
 * forward; matmuls only, causal attention counted in full, embedding lookups free), the convention
 * of Megatron's MFU figure. */
double job_flops_per_step(const pp_job_t *job, int m);

/* 1 when two pipeline devices share a CUDA device (`pipeline.devices: [0, 0]`): the first such
 * pair is *a < *b (either pointer may be NULL). Timings measured so are not those of separate
 * GPUs. */
int job_shared_gpu(const pp_job_t *job, int *a, int *b);

/* Where the ends of a stage boundary between pipeline devices a and b are (transport.h): one
 * device, one GPU (the same CUDA ordinal on one host), one process, one host, or two hosts. */
pp_reach_t job_boundary_reach(const pp_job_t *job, int a, int b);

/* The transport of the boundary between pipeline devices a and b: transport_for_boundary at
 * job_boundary_reach under pipeline.transport. Lowering sets every SEND/RECV's link with it. */
pp_transport_t job_boundary_transport(const pp_job_t *job, int a, int b);

/* The part of a stage's configuration the job alone decides (stage_size.h): the shape, dtype,
 * seed, recompute and optimizer; the rest (blocks, place, slots, gradient scale) zero, for the
 * caller to fill: the one place the job's model reaches a stage. */
void job_stage_cfg(pp_stage_cfg_t *c, const pp_job_t *job);

void job_free(pp_job_t *job);

#ifdef __cplusplus
}
#endif

#endif /* PP_JOB_H */
