/*
 * resolve.c — what the user wrote (pp_config_t) and the machine in, the job (model/job.h) out. The
 * job starts as a copy of the config's typed values; a written schedule (steps, csv) then brings
 * the pipeline keys in line with itself (written_reconcile), and the rest is resolved here:
 * `devices: all` against the devices visible, `stages: auto`, chunks, the layer split (even,
 * listed, or balanced on the cost model's part times), and the checks of values that only make
 * sense together (the kind's preconditions and placements, the plan's size, GPUs shared over a
 * transport that needs one each, the counts the GPU kernels keep in int). Every message names the
 * key to blame where the input set it (config_error_at), so the config is read here but never
 * changed. After this nothing reads the config but the command line.
 */
#include "resolve.h"

#include "config_internal.h"
#include "model/kernel_sizes.h"
#include "model/split.h"
#include "schedule/kinds.h"
#include "written.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define cfg_err_at(cfg, k, ...) config_error_at((cfg), (pp_config_key_t)(k), 0, 0, __VA_ARGS__)

pp_status_t job_from_config(pp_job_t *job, const pp_config_t *cfg)
{
    memset(job, 0, sizeof *job);
    job->procs.n_procs = job->procs.n_hosts = 1; /* run/ sets a launch's own (run_set_procs) */
    job->kind = cfg->schedule.kind;
    job->model = cfg->model;
    job->pipeline = cfg->pipeline;
    job->run = cfg->run;
    job->nccl = cfg->nccl;
    job->cost = cfg->cost;
    job->cost_src = cfg->cost_src;
    job->cost_src.profile = NULL;
    job->cost_hand_set = config_cost_hand_set(cfg);
    job->overlap_set = config_is_set(cfg, PP_CFG_OVERLAP);
    if ((cfg->path && !(job->path = strdup(cfg->path))) ||
        (cfg->name && !(job->name = strdup(cfg->name))) ||
        (cfg->cost_src.profile && !(job->cost_src.profile = strdup(cfg->cost_src.profile)))) {
        job_free(job);
        fprintf(stderr, "out of host memory\n");
        return PP_ERR_NOMEM;
    }
    return PP_OK;
}

static pp_status_t check_kind(const pp_job_t *job, const pp_config_t *cfg)
{
    const pp_job_pipeline_t *pl = &job->pipeline;
    char msg[512];
    int key;
    switch (sched_kind_check(job->kind, pl->n_devices, pl->micro_batches, pl->chunks, msg,
                             sizeof msg)) {
    case PP_KIND_OK: return PP_OK;
    case PP_KIND_BAD_CHUNKS:
        key = cfg_pick(cfg, PP_CFG_KIND, PP_CFG_CHUNKS, PP_CFG_STAGES, PP_CFG_KIND, -1);
        break;
    case PP_KIND_BAD_MICRO_BATCHES:
        key = cfg_pick(cfg, PP_CFG_MICRO_BATCHES, PP_CFG_MICRO_BATCHES, PP_CFG_DEVICES, -1);
        break;
    default: key = PP_CFG_KIND; break;
    }
    return cfg_err_at(cfg, key, "%s", msg);
}

/* Layers per stage (split.h): as listed, balanced by the cost model's stage times, or even. */
static pp_status_t resolve_split(pp_job_t *job, const pp_config_t *cfg)
{
    pp_job_model_t *m = &job->model;
    int n = job->pipeline.stages, sum = 0;
    if (m->n_layers_per_stage > 0 && cfg_is_set(cfg, PP_CFG_LAYERS_PER_STAGE)) {
        if (job->pipeline.split == PP_SPLIT_BALANCED)
            return cfg_err_at(cfg, PP_CFG_SPLIT,
                              "balanced, but model.layers_per_stage lists the split too (allowed: "
                              "one of them)");
        if (m->n_layers_per_stage != n)
            return cfg_err_at(cfg, PP_CFG_LAYERS_PER_STAGE,
                              "%d entries for %d stages (allowed: one entry per stage)",
                              m->n_layers_per_stage, n);
        for (int s = 0; s < n; s++)
            sum += m->layers_per_stage[s];
        if (sum != m->layers)
            return cfg_err_at(cfg, PP_CFG_LAYERS_PER_STAGE,
                              "the entries sum to %d, but model.layers is %d (allowed: entries "
                              "summing to %d)",
                              sum, m->layers, m->layers);
        return PP_OK;
    }
    if (job->pipeline.split == PP_SPLIT_BALANCED) {
        double block, embed, head;
        split_part_ms(job, &block, &embed, &head);
        split_balanced(m->layers_per_stage, n, m->layers, block, embed, head);
    } else {
        if (m->layers % n != 0)
            return cfg_err_at(cfg,
                              cfg_pick(cfg, PP_CFG_DEVICES, PP_CFG_STAGES, PP_CFG_CHUNKS,
                                       PP_CFG_STEPS, PP_CFG_CSV, PP_CFG_DEVICES, PP_CFG_LAYERS, -1),
                              "%d layers do not split into %d stages (allowed: a divisor of %d, "
                              "model.layers_per_stage or pipeline.split: balanced)",
                              m->layers, n, m->layers);
        for (int s = 0; s < n; s++)
            m->layers_per_stage[s] = m->layers / n;
    }
    m->n_layers_per_stage = n;
    return PP_OK;
}

/* The kind's placements (kinds.h), blaming pipeline.placement where the input set it. */
static pp_status_t check_placement(const pp_job_t *job, const pp_config_t *cfg)
{
    char msg[512];
    if (sched_kind_check_placement(job->kind, job->pipeline.chunks, job->pipeline.placement, msg,
                                   sizeof msg) == PP_KIND_OK)
        return PP_OK;
    return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_PLACEMENT, PP_CFG_PLACEMENT, PP_CFG_KIND, -1), "%s",
                      msg);
}

/* The host memory a process may take: the machine's physical memory, or less where ulimit -v or
 * -d says so. *what names the bound. */
static double host_memory_room(const char **what)
{
    static const struct {
        int resource;
        const char *what;
    } limits[] = {{RLIMIT_AS, "ulimit -v allows"}, {RLIMIT_DATA, "ulimit -d allows"}};
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double room = pages > 0 && page > 0 ? (double)pages * (double)page : INFINITY;
    *what = "this machine has";
    for (size_t k = 0; k < sizeof limits / sizeof limits[0]; k++) {
        struct rlimit rl;
        if (getrlimit(limits[k].resource, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            (double)rl.rlim_cur < room) {
            room = (double)rl.rlim_cur;
            *what = limits[k].what;
        }
    }
    return room;
}

/* A generated schedule's plan, estimated before anything is allocated: refused over
 * PP_MAX_PLAN_OPS, or when lowering and simulating it would take more host memory than the
 * process may have (PP_PLAN_HOST_BYTES_PER_OP an op, the copies of run.offload counted). A
 * written one (steps, csv) is as large as its file. */
static pp_status_t check_plan_size(const pp_job_t *job, const pp_config_t *cfg)
{
    const pp_job_pipeline_t *pl = &job->pipeline;
    long long ops =
        (long long)pl->stages * pl->micro_batches * PP_PLAN_OPS_PER_MB * job_replicas(job);
    int key = cfg_pick(cfg, PP_CFG_MICRO_BATCHES, PP_CFG_MICRO_BATCHES, PP_CFG_DEVICES,
                       PP_CFG_CHUNKS, PP_CFG_STAGES, -1);
    if (sched_kind(job->kind)->written) return PP_OK;
    /* "S stages x M micro-batches" (x D replicas with data parallelism), as each message says */
    const int d = job_replicas(job);
    char units[96], reps[32] = "";
    if (d > 1) snprintf(reps, sizeof reps, " x %d replicas", d);
    snprintf(units, sizeof units, "%d stages x %d micro-batches%s", pl->stages, pl->micro_batches,
             reps);
    const char *bound = d > 1 ? "stages x micro-batches x replicas" : "stages x micro-batches";
    if (ops > PP_MAX_PLAN_OPS)
        return cfg_err_at(cfg, key,
                          "%s make a plan of up to %lld ops, over the limit of %ld (allowed: %s at "
                          "most %ld)",
                          units, ops, PP_MAX_PLAN_OPS, bound, PP_MAX_PLAN_OPS / PP_PLAN_OPS_PER_MB);
    const char *what;
    int per_mb = PP_PLAN_OPS_PER_MB + (job->run.offload != PP_OFFLOAD_NONE ? 2 : 0);
    double per_unit = (double)per_mb * PP_PLAN_HOST_BYTES_PER_OP; /* a (stage, micro-batch) */
    double need = per_unit * pl->stages * pl->micro_batches * job_replicas(job),
           room = host_memory_room(&what);
    if (need <= room) return PP_OK;
    const double gib = 1073741824.0;
    return cfg_err_at(cfg, key,
                      "%s take about %.1f GiB of host memory to lower and simulate, more than the "
                      "%.1f GiB %s (allowed: %s at most %.0f here)",
                      units, need / gib, room / gib, what, bound, floor(room / per_unit));
}

/* Pipeline devices may share a CUDA device (`devices: [0, 0]`), but not in a run whose boundaries
 * go over nccl, which needs a GPU per pipeline device (one rank per GPU): nccl selected, or auto
 * picking it for a boundary between processes (job.procs; every process boundary is one between
 * two consecutive devices, as each process owns a run of them). */
static pp_status_t check_shared_gpus(const pp_job_t *job, const pp_config_t *cfg)
{
    const pp_job_pipeline_t *pl = &job->pipeline;
    int a, b, d = 0;
    if (!job_shared_gpu(job, &a, &b)) return PP_OK;
    if (pl->transport == PP_TRANSPORT_NCCL)
        return cfg_err_at(cfg, PP_CFG_TRANSPORT,
                          "nccl needs a GPU per pipeline device, but pipeline.devices puts "
                          "devices %d and %d on CUDA device %d (allowed: peer or auto, or a CUDA "
                          "device per pipeline device)",
                          a, b, pl->device_ids[a]);
    while (d + 1 < pl->n_devices && job_boundary_transport(job, d, d + 1) != PP_TRANSPORT_NCCL)
        d++;
    if (d + 1 >= pl->n_devices) return PP_OK;
    return cfg_err_at(cfg, PP_CFG_TRANSPORT,
                      "%s picks nccl from device %d (rank %d) to device %d (rank %d), and nccl "
                      "needs a GPU per pipeline device, but pipeline.devices puts devices %d and "
                      "%d on CUDA device %d (allowed: a CUDA device per pipeline device, or one "
                      "process)",
                      transport_name(pl->transport), d, job->procs.rank_of[d], d + 1,
                      job->procs.rank_of[d + 1], a, b, pl->device_ids[a]);
}

/* A written schedule names its devices itself, so it runs one replica: refused before the
 * schedule and the pipeline keys are reconciled. */
static pp_status_t check_written_replicas(const pp_job_t *job, const pp_config_t *cfg)
{
    if (job->pipeline.data_parallel <= 1 || !sched_kind(job->kind)->written) return PP_OK;
    return cfg_err_at(cfg, PP_CFG_DATA_PARALLEL,
                      "%d replicas of a written schedule (allowed: 1 with schedule.steps or "
                      "schedule.csv; a generated kind for more)",
                      job->pipeline.data_parallel);
}

/* pipeline.data_parallel: the devices listed are d replicas of a pipeline of devices / d (replica
 * r's device i is r * p + i, docs/schedule-format.md). */
static pp_status_t resolve_replicas(pp_job_t *job, const pp_config_t *cfg)
{
    pp_job_pipeline_t *pl = &job->pipeline;
    const int d = pl->data_parallel, total = pl->n_devices;
    if (d <= 1) return PP_OK;
    if (total % d != 0)
        return cfg_err_at(cfg, PP_CFG_DATA_PARALLEL,
                          "%d replicas do not split the %d devices evenly (allowed: a divisor "
                          "of %d, or pipeline.devices a multiple of %d)",
                          d, total, total, d);
    pl->n_devices = total / d;
    return PP_OK;
}

static pp_status_t resolve_pipeline(pp_job_t *job, const pp_config_t *cfg, int n_visible)
{
    pp_job_pipeline_t *pl = &job->pipeline;
    const int written = sched_kind(job->kind)->written;

    /* devices */
    if (pl->devices_all) {
        int n = n_visible > 0 ? n_visible : 4;
        if (n > PP_MAX_DEVICES) n = PP_MAX_DEVICES;
        pl->n_devices = n;
        for (int d = 0; d < n; d++)
            pl->device_ids[d] = d;
        pl->devices_all = 0;
    }
    int p = pl->n_devices;
    if (p < 1 || p > PP_MAX_DEVICES)
        return cfg_err_at(cfg, PP_CFG_DEVICES, "%d devices (allowed: 1..%d)", p, PP_MAX_DEVICES);
    for (int d = 0; d < p; d++) {
        int id = pl->device_ids[d];
        if (id < 0 || (n_visible > 0 && id >= n_visible)) {
            if (n_visible == 1)
                return cfg_err_at(cfg, PP_CFG_DEVICES, "device %d does not exist (allowed: 0)", id);
            return cfg_err_at(cfg, PP_CFG_DEVICES, "device %d does not exist (allowed: 0..%d)", id,
                              n_visible > 0 ? n_visible - 1 : PP_MAX_DEVICES - 1);
        }
    }
    PP_CHECK(resolve_replicas(job, cfg));
    p = pl->n_devices;
    PP_CHECK(check_shared_gpus(job, cfg));
    /* stages and chunks (a written schedule's were set by written_reconcile) */
    if (written && pl->stages > 0) {
        /* as the schedule has them */
    } else if (pl->stages == 0) {
        if ((long)p * pl->chunks > PP_MAX_STAGES)
            return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_DEVICES, PP_CFG_CHUNKS, PP_CFG_DEVICES, -1),
                              "%d devices x %d chunks = %ld stages (allowed: at most %d)", p,
                              pl->chunks, (long)p * pl->chunks, PP_MAX_STAGES);
        pl->stages = p * pl->chunks;
    } else if (cfg_is_set(cfg, PP_CFG_CHUNKS) && pl->stages != p * pl->chunks) {
        return cfg_err_at(cfg, PP_CFG_STAGES,
                          "%d stages, but %d devices x %d chunks = %d (allowed: %d, or auto)",
                          pl->stages, p, pl->chunks, p * pl->chunks, p * pl->chunks);
    } else {
        if (pl->stages % p != 0)
            return cfg_err_at(
                cfg, cfg_pick(cfg, PP_CFG_STAGES, PP_CFG_STAGES, PP_CFG_DEVICES, -1),
                "%d stages do not split evenly over %d devices (allowed: a multiple of %d)",
                pl->stages, p, p);
        pl->chunks = pl->stages / p;
    }

    /* the model */
    PP_CHECK(resolve_split(job, cfg));
    if (job->model.hidden % job->model.heads != 0)
        return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_HEADS, PP_CFG_HEADS, PP_CFG_HIDDEN, -1),
                          "hidden %d does not split into %d heads (allowed: a divisor of %d)",
                          job->model.hidden, job->model.heads, job->model.hidden);

    PP_CHECK(check_kind(job, cfg));
    PP_CHECK(check_placement(job, cfg));
    return check_plan_size(job, cfg);
}

pp_status_t job_check_processes(const pp_job_t *job, const pp_config_t *cfg, int n_procs)
{
    /* every replica's devices: the processes split p x d of them */
    const int p = job_devices_total(job), k = job->pipeline.devices_per_process;
    if (k > 0 && (long)k * n_procs != p)
        return cfg_err_at(cfg, PP_CFG_DEVICES_PER_PROCESS,
                          "%d devices per process x %d process%s = %ld, but the pipeline has %d "
                          "devices (allowed: %s)",
                          k, n_procs, n_procs == 1 ? "" : "es", (long)k * n_procs, p,
                          p % n_procs == 0 ? "p / processes, or 0 for an even split"
                                           : "p / processes with p a multiple of the processes");
    if (k == 0 && p % n_procs != 0)
        return cfg_err_at(cfg, cfg_pick(cfg, PP_CFG_DEVICES, PP_CFG_DEVICES, -1),
                          "%d devices do not split evenly over %d processes (allowed: a multiple "
                          "of %d devices, or pipeline.devices_per_process)",
                          p, n_procs, n_procs);
    return check_shared_gpus(job, cfg); /* with the launch's layout: auto may pick nccl now */
}

/* What the GPU kernels count in int (kernels/, stages/): the rows of a micro-batch (its tokens,
 * at most 2^30 so that the LayerNorm and column-sum chunks' row sums, N + rows - 1, stay in int),
 * the attention's batch of sequences x heads, and the fused attention's tiles (B·H·T/64). A shape
 * past one is refused before anything is sized; the cost model and the memory layout count in 64
 * bits (kernel_sizes.h), so the limit is the kernels', not theirs. */
#define PP_MAX_TOKENS_PER_MB (1L << 30)

static pp_status_t check_kernel_counts(const pp_job_t *job, const pp_config_t *cfg)
{
    const long B = job->pipeline.micro_batch_size, T = job->model.seq_len, H = job->model.heads;
    const int d = job->model.heads > 0 ? job->model.hidden / job->model.heads : 0;
    if (B * T > PP_MAX_TOKENS_PER_MB)
        return cfg_err_at(
            cfg,
            cfg_pick(cfg, PP_CFG_MICRO_BATCH_SIZE, PP_CFG_MICRO_BATCH_SIZE, PP_CFG_SEQ_LEN, -1),
            "micro_batch_size %ld x seq_len %ld = %ld tokens a micro-batch, more "
            "than the GPU kernels count (allowed: pipeline.micro_batch_size x "
            "model.seq_len at most %ld)",
            B, T, B * T, PP_MAX_TOKENS_PER_MB);
    if (B * H > INT_MAX)
        return cfg_err_at(
            cfg, cfg_pick(cfg, PP_CFG_MICRO_BATCH_SIZE, PP_CFG_MICRO_BATCH_SIZE, PP_CFG_HEADS, -1),
            "micro_batch_size %ld x heads %ld = %ld attention batches, more than "
            "the GPU kernels count (allowed: pipeline.micro_batch_size x model.heads "
            "at most %d)",
            B, H, B * H, INT_MAX);
    if (attention_flash_supported((int)T, d, job->model.dtype) &&
        B * H * (T / PP_FLASH_TILE) > INT_MAX)
        return cfg_err_at(cfg,
                          cfg_pick(cfg, PP_CFG_MICRO_BATCH_SIZE, PP_CFG_MICRO_BATCH_SIZE,
                                   PP_CFG_SEQ_LEN, PP_CFG_HEADS, -1),
                          "micro_batch_size %ld x heads %ld x seq_len %ld / %d = %ld fused "
                          "attention tiles, more than the GPU kernels count (allowed: "
                          "pipeline.micro_batch_size x model.heads x model.seq_len / %d at most "
                          "%d)",
                          B, H, T, PP_FLASH_TILE, B * H * (T / PP_FLASH_TILE), PP_FLASH_TILE,
                          INT_MAX);
    return PP_OK;
}

pp_status_t job_resolve(pp_job_t *job, const pp_config_t *cfg, const pp_schedule_t *written,
                        int n_visible)
{
    PP_CHECK(job_from_config(job, cfg));
    pp_status_t st = check_kernel_counts(job, cfg);
    if (st == PP_OK) st = check_written_replicas(job, cfg);
    if (st == PP_OK && written) st = written_reconcile(job, cfg, written, n_visible);
    if (st == PP_OK) st = resolve_pipeline(job, cfg, n_visible);
    if (st != PP_OK) job_free(job);
    return st;
}
