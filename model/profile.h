/*
 * profile.h — stage times, transfer times and memory measured on one GPU (`ppsched profile`), in a
 * YAML file that `cost: {profile: FILE}` reads to calibrate the cost model (cost.h).
 *
 * A profile holds, at one shape, the F, I and W time of three stages of the same number of blocks
 * — a middle stage, the first (with the embedding) and the last (with the head) — so the block,
 * the embedding and the head each get their own calibration factor: measured / predicted by the
 * model on the profile's GPU description. The memory the process held beyond what the stages'
 * sizing functions account for is the runtime's share, used by the memory prediction. Transfers
 * (when two GPUs were present) give a latency + bandwidth fit. The file names its device and
 * date.
 *
 * Beside the passes, the whole model's step as a measured run runs it (one GPU, 1F1B, a CUDA graph
 * a step) at m = 8 and 32, at the profiled micro-batch and at fewer tokens (`steps:`): measured /
 * predicted from the passes is the step factor, which the cost model applies to every compute op.
 * And DualPipeV's step on one GPU with its pairs on two compute streams against one (`pairs:`): the
 * cost.overlap that turns one into the other in the simulator. Both depend on the size of a
 * micro-batch, elements = tokens x hidden, and are interpolated in log elements (and log m). A
 * profile without them (no `steps:`) loads with factor 1 and the GPU description's overlap, and
 * says so. Plain C (libyaml); a pp_profile_t owns no heap memory.
 */
#ifndef PP_PROFILE_H
#define PP_PROFILE_H

#include "common/pp_status.h"
#include "cost.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The stages a profile measures: one table, one row each. */
typedef enum pp_prof_stage {
    PP_PROF_MIDDLE = 0,
    PP_PROF_FIRST,
    PP_PROF_LAST,
    PP_PROF_STAGE_COUNT
} pp_prof_stage_t;

typedef struct pp_prof_stage_desc {
    const char *name; /* the key in the file */
    int is_first, is_last;
} pp_prof_stage_desc_t;

const pp_prof_stage_desc_t *profile_stage_desc(pp_prof_stage_t k);
/* The key of a pass in the file: forward, backward_input, backward_weight. */
const char *profile_pass_name(pp_pass_t p);

#define PP_PROFILE_MAX_SENDS 16
#define PP_PROFILE_MAX_RUNS  16 /* rows of steps: and of pairs: */

/* What a measured run of the whole model on the profile's GPU was: the profile's hidden, heads,
 * vocab and dtype with these. */
typedef struct pp_prof_size {
    int batch;   /* micro_batch_size */
    int seq_len; /* tokens per sequence */
    int layers;  /* blocks of the whole model */
    int m;       /* micro-batches a step */
} pp_prof_size_t;

/* One `steps:` row: 1F1B with every block on the one GPU. */
typedef struct pp_prof_step {
    pp_prof_size_t size;
    double ms; /* median step, measured */
} pp_prof_step_t;

/* One `pairs:` row: DualPipeV on the one GPU (two chunks), pairs on one stream and on two. */
typedef struct pp_prof_pair {
    pp_prof_size_t size;
    double serial_ms, overlapped_ms; /* median steps, measured */
    double overlap; /* the cost.overlap with which the simulator's step ratio is the measured one */
} pp_prof_pair_t;

typedef struct pp_profile {
    char device[128];       /* CUDA device name */
    char gpu[32];           /* GPU table row it matches, "" when none */
    char date[32];          /* when it was measured (UTC, ISO 8601) */
    pp_model_shape_t shape; /* shape measured at; n_layers: blocks of each measured stage */
    pp_dtype_t dtype;
    double ms[PP_PROF_STAGE_COUNT][PP_PASS_COUNT]; /* one micro-batch, median */
    /* (p90 - p10) / median of the timed passes behind ms[][] (what `ppsched profile` saw; not
     * written to the file: 0 for a profile read from one) */
    double spread[PP_PROF_STAGE_COUNT][PP_PASS_COUNT];
    double stage_bytes[PP_PROF_STAGE_COUNT]; /* device memory of each stage with one slot */
    /* Device memory a stage holds beyond its sizing functions, stage_device_bytes (its cuBLAS
     * handles, allocation rounding): the mean over the measured stages. */
    double stage_overhead_bytes;
    /* Held with no stage alive once the kernels were loaded (context, modules, library state).
     * The memory prediction adds it once a device, and the overhead once a stage. */
    double runtime_bytes;
    int n_sends;
    double send_bytes[PP_PROFILE_MAX_SENDS], send_ms[PP_PROFILE_MAX_SENDS];
    int has_runs; /* 1 when the file has steps: and pairs: (0: written before them) */
    int n_steps, n_pairs;
    pp_prof_step_t steps[PP_PROFILE_MAX_RUNS];
    pp_prof_pair_t pairs[PP_PROFILE_MAX_RUNS];
    /* Derived by profile_calibrate, not stored: measured / predicted for each pass and part, and
     * each step's measured / profile_step_predicted_ms, both less the stage's zeroing. */
    double factor[PP_PASS_COUNT][PP_PART_COUNT];
    double step_factor[PP_PROFILE_MAX_RUNS];
} pp_profile_t;

/* Fill factor[][] from ms[][] against the model on the profile's GPU row (h100 when none
 * matches). A part whose measured share is not clearly positive keeps factor 1. */
void profile_calibrate(pp_profile_t *p);

/* The GPU row a profile is calibrated against: its own, else h100. */
const pp_gpu_t *profile_gpu(const pp_profile_t *p);

/* Elements of one micro-batch's activation, tokens x hidden: what the step factor and the pair
 * overlap are interpolated over. */
static inline double profile_elements(int batch, int seq_len, int hidden)
{
    return (double)batch * seq_len * hidden;
}

/* The step of a size the passes predict, ms: m x (F + I + W) of one stage holding every block,
 * the embedding and the head, at the profile's factors, and its gradients zeroed before them
 * (cost_stage_tail; the runs have no optimizer): the simulator's 1F1B step on one device at a
 * step factor of 1. The step factor is the measured step over it, both less the zeroing. */
double profile_step_predicted_ms(const pp_profile_t *p, const pp_prof_size_t *z);
/* What a run of size z does outside its passes, ms: its stage's gradients zeroed before the first
 * op (cost_stage_tail's head; the runs have no optimizer, so no tail), which the cost model prices
 * apart and the step factor leaves out. */
double profile_step_head_ms(const pp_profile_t *p, const pp_prof_size_t *z);

/* The step factor at `elements` and m: each measured size's factor, linear in log m between the
 * measured m (flat outside), then linear in log elements between the sizes (flat outside). 1 when
 * the profile has no steps. */
double profile_step_factor(const pp_profile_t *p, double elements, int m);

/* The pair overlap at `elements`, linear in log elements between the measured sizes (flat
 * outside), into *overlap; 0 when the profile has no pairs (*overlap untouched), else 1. */
int profile_overlap(const pp_profile_t *p, double elements, double *overlap);

/* Read `path`; problems are reported as `path:line:col: message (allowed: ...)`, PP_ERR_INPUT,
 * or PP_ERR_IO when the file cannot be opened. Calibrates before returning. */
pp_status_t profile_load(pp_profile_t *p, const char *path);

/* A `#` block: each stage's measured F, I, W against the a-priori model on the profile's GPU row
 * (h100 when none matches) with the error, each stage's memory, the runtime's share, each
 * measured step against the passes' prediction and each pair's overlap. */
void profile_print_summary(const pp_profile_t *p, FILE *f);

/* Write `p` as YAML (libyaml's emitter) to `f`. */
pp_status_t profile_write(const pp_profile_t *p, FILE *f);

/* Time of one transfer of `bytes` by a latency + bandwidth least-squares fit to the measured sends
 * (one point: scaled by bytes from it). 0 when none was measured. */
double profile_send_ms(const pp_profile_t *p, double bytes);

#ifdef __cplusplus
}
#endif

#endif /* PP_PROFILE_H */
