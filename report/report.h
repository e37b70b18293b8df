/*
 * report.h — metrics from a plan and its timeline, and every way ppsched prints them: the
 * fixed-width table, the JSON of docs/architecture.md, the Chrome trace and the SVG Gantt chart.
 * Every writer goes through report_io.h (opening, escaping, closing with the write errors reported)
 * and returns PP_ERR_IO after printing what failed.
 *
 * Bubble of a device = 1 - busy / makespan, busy = the union of its compute ops' intervals.
 * Both conventions are labelled where printed: idle/makespan (the `bubble` fields) and
 * idle/ideal-compute. The theory is the closed form of REFERENCE.md for the schedule kind.
 * Nothing here knows whether the timeline was simulated or measured.
 */
#ifndef PP_REPORT_H
#define PP_REPORT_H

#include "model/job.h"
#include "sim/explain.h"
#include "plan/plan.h"
#include "sim/timeline.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_device_stats {
    int device;      /* pipeline device index */
    int replica;     /* the data-parallel replica it belongs to (0 with one) */
    int cuda_device; /* CUDA ordinal it ran on (-1 when simulated without GPUs) */
    double busy_ms, idle_ms;
    double bubble;             /* idle / makespan */
    int peak_inflight;         /* most micro-batches with F done and backward not finished */
    size_t peak_mem_bytes;     /* 0 = unknown */
    double bytes_sent;         /* bytes this device sent across devices in one step */
    size_t peak_mem_predicted; /* predicted before running (memory.h); 0 = none */
    double act_mb_equiv;       /* activation slots held, in micro-batches of the device's layers;
                                * NAN = none */
    int offload_slots;         /* run.offload: (stage, micro-batch) slots sent to the host */
    double offload_bytes;      /* run.offload: bytes those copies move, each way */
    int offload_partial;       /* run.offload: 1 when they move part of each slot (its stage keeps
                                  the rest on the device: plan offload_keep) */
} pp_device_stats_t;

/* One stage's gradient reduction across the replicas (data parallel), in replica 0's timeline. */
typedef struct pp_report_reduce {
    int stage;
    int buckets;      /* REDUCE ops of the stage */
    double bytes;     /* gradient bytes they reduce */
    double ms;        /* their time, summed */
    double hidden_ms; /* of it, the part that ran while the pipeline still computed (before the
                         step's last compute op ended on any device) */
    double device_hidden_ms; /* of it, the part its own device computed through (the union of
                                that device's compute ops) */
} pp_report_reduce_t;

/* A directed pair of pipeline devices that stage boundaries cross, with the transport they got. */
typedef struct pp_report_boundary {
    int from, to;             /* pipeline devices (equal: a boundary within a device) */
    pp_transport_t transport; /* the plan's link */
} pp_report_boundary_t;

typedef struct pp_report {
    const char *schedule; /* the schedule's name (`name:`, or the file's base name) everywhere */
    const char *kind;     /* its kind: "1f1b", "interleaved-1f1b", "csv", ... */
    pp_mode_t mode;
    int devices, stages, micro_batches, chunks;
    double step_ms, step_ms_p10, step_ms_p90;
    double makespan_ms; /* the representative step's ops, first start to last end: what busy,
                           idle and the bubble are over; the step is longer by what each device
                           runs outside its ops (its gradients zeroed before the first, its
                           optimizer after the last); NAN without op times */
    double tokens_per_s, tflops;
    double bubble;           /* overall idle / makespan: 1 - sum busy / (p * makespan) */
    double bubble_ideal;     /* overall idle / ideal compute: sum idle / sum busy */
    double bubble_theory;    /* closed form, idle / makespan; NAN when none applies */
    double bubble_simulated; /* the simulator's figure for the same plan; NAN when not run */
    double loss; /* measured: mean loss of the last step (set by the run chain); NAN otherwise */
    double step_ms_predicted; /* the cost model's step before running; NAN when none */
    double clock_skew_ms;     /* measured: the bound on the misalignment of the devices' (and the
                                 processes') clocks on the time axis; NAN when simulated */
    char cost_desc[512];      /* where the simulator's costs came from; "" = the config's */
    char mem_verdict[256];    /* the memory fit check; "" = none */
    int shared_gpus;          /* measured with pipeline devices sharing a GPU: the timings (and each
                                 device's peak memory, the GPU's) are not those of separate GPUs */
    const char *transport;    /* pipeline.transport as selected ("auto", ...); NULL: no job */
    int n_boundaries;
    pp_report_boundary_t *boundaries; /* [n_boundaries]: each directed device pair the stage
                                         boundaries cross, first crossing first */
    pp_device_stats_t *per_device;    /* [devices] */
    int replicas;                     /* d: data-parallel replicas (devices = p x d) */
    pp_report_reduce_t *reduce;       /* [stages] with replicas and per-op times, else NULL */
    int offload;                      /* the plan has run.offload's copies (plan->offload) */
    pp_explain_t explain;             /* idle by reason, critical path, what-if (explain.h) */
} pp_report_t;

/* Every op time and step time of `tl` is finite: else prints which is not, and that an op cost
 * is out of range, and returns PP_ERR_INPUT. report_build and the trace check it before any
 * writer prints a time (a JSON number, an SVG coordinate). */
pp_status_t report_check_finite(const pp_plan_t *plan, const pp_timeline_t *tl);

/* Compute every metric. `sim` may be NULL; when given, bubble_simulated comes from it (and when
 * `tl` is itself simulated, pass the same timeline or NULL). The explanation gets the idle split
 * and critical path of `tl` and the idle split of `sim` (of `tl` when that is simulated). */
pp_status_t report_build(pp_report_t *r, const pp_job_t *job, const pp_plan_t *plan,
                         const pp_timeline_t *tl, const pp_timeline_t *sim);
/* peak[d] = most (stage, mb) pairs of device d in flight at once: F started, last backward op
 * not ended (report_inflight.c). Stages and micro-batches of compute ops must be in range. */
pp_status_t report_peak_inflight(const pp_plan_t *plan, const pp_timeline_t *tl, int *peak);

/* Adds the what-if step times: `plan` simulated under variants of `cm` (explain_what_if). */
pp_status_t report_what_if(pp_report_t *r, const pp_plan_t *plan, const pp_cost_model_t *cm);

/* The what-if figures already simulated (explain_what_if_sim) for the report's cost model. */
void report_set_what_if(pp_report_t *r, const pp_what_if_t *w);
void report_free(pp_report_t *r);

/* Attach what the model predicted before running: the step (ms), each device's peak memory and
 * activation slots in micro-batch equivalents ([devices] each, may be NULL), where the costs came
 * from and the memory verdict. In simulate mode the predicted memory is also the peak shown. */
void report_set_prediction(pp_report_t *r, double step_ms, const size_t *mem,
                           const double *mb_equiv, const char *cost_desc, const char *verdict);

struct pp_out; /* report_io.h */
/* The reductions across data-parallel replicas (report_reduce.c): each stage's, from the plan and
 * its timeline, into r->reduce (nothing with one replica or without per-op times); the preamble's
 * line on how they are made and the table's block of them. */
pp_status_t report_build_reduce(pp_report_t *r, const pp_plan_t *plan, const pp_timeline_t *tl);
void report_table_reduce_setup(struct pp_out *o, const pp_report_t *r, const pp_job_t *job);
void report_table_reduce(struct pp_out *o, const pp_report_t *r);
/* The table's lines about the prediction (report_predict.c): a measured run's predicted step and
 * peak memory with their errors, the activations in micro-batch equivalents, the memory verdict. */
void report_table_prediction(struct pp_out *o, const pp_report_t *r);

/* Closed-form bubble (idle / makespan) of a schedule kind for uniform stages; NAN when the kind
 * has none (explicit steps, CSV). */
double report_bubble_theory(pp_sched_kind_t kind, int p, int m, int v);

/* "measure" or "simulate", as the reports print a mode. */
const char *report_mode_name(pp_mode_t m);

/* The fixed-width table: a `#` preamble, names row, units row, a row per device, verdict footer. */
pp_status_t report_print_table(const pp_report_t *r, const pp_job_t *job, FILE *f);
/* JSON with the schema of docs/architecture.md, then the explanation's fields (docs/explain.md). */
pp_status_t report_print_json(const pp_report_t *r, FILE *f);
/* The critical path, one op a line (`--critical-path`). */
pp_status_t report_print_critical_path(const pp_report_t *r, FILE *f);
/* Share of devices x makespan that devices idled for reason c (these add up to `bubble`), of
 * the report's own timeline; NAN when unknown. */
double report_bubble_by_reason(const pp_report_t *r, pp_idle_reason_t c);
/* The table's block on why the devices idled, written into the table's output: per device and
 * reason in ms (the simulator's row under the measured one), the overall bubble split by reason,
 * the critical path's make-up and the what-if step times. Prints nothing the report does not
 * know. (report_explain.c; the output type is report_io.h's.) */
struct pp_out;
void report_table_explain(struct pp_out *o, const pp_report_t *r);
/* Chrome trace / Perfetto: a track per device per stream role, flow arrows send -> recv, an
 * `idle` track per device with the idle stretches named and coloured by reason, and the critical
 * path's ops flagged ("critical":1) and chained by flow arrows. */
pp_status_t report_write_trace(const pp_plan_t *plan, const pp_timeline_t *tl, const char *path);
/* Same, naming each device's track "device d (cuda N)" from cuda_ids[d] (NULL or -1: unknown). */
pp_status_t report_write_trace_devices(const pp_plan_t *plan, const pp_timeline_t *tl,
                                       const int *cuda_ids, const char *path);
/* SVG Gantt chart: a row per device, F/B/I/W coloured (a shade per chunk), micro-batch numbers in
 * the boxes, idle stretches shaded by reason, the critical path outlined; at most 2400 px wide,
 * runs of boxes narrower than 8 px drawn as one stacked box per kind and chunk. A timeline whose
 * times are not finite is refused (report_check_finite). */
pp_status_t report_write_svg(const pp_plan_t *plan, const pp_timeline_t *tl, const char *title,
                             const char *path);

/* SVG chart of bubble (idle / makespan) against micro-batches for one schedule: the closed form
 * as a curve, `measured` as filled points labelled `measured_label`, `simulated` as open points
 * (entries that are NAN are left out). n points at micro-batch counts m[]. */
pp_status_t report_write_bubble_chart(const char *path, const char *title, pp_sched_kind_t kind,
                                      int p, int v, int n, const int *m, const double *measured,
                                      const double *simulated, const char *measured_label);

/* Every run of a comparison in one bar chart (report_bars.c): a group of bars per distinct
 * group[i] in first-seen order, a bar per micro-batch count m[i] (ascending, at most 8 counts),
 * bubble[i] its height; theory[i] (NULL, or NAN entries: none) a tick across the bar. */
pp_status_t report_write_bubble_bars(const char *path, const char *title, int n,
                                     const char *const *group, const int *m, const double *bubble,
                                     const double *theory);

#ifdef __cplusplus
}
#endif

#endif /* PP_REPORT_H */
