/*
 * planner.h — `ppsched plan`: search the schedules for a model, a number of GPUs, a GPU
 * description and a global batch; rank them by predicted tokens/s among those that fit memory.
 *
 * The search space: every split of the GPUs into p pipeline devices x d data-parallel replicas
 * (with AdamW and d > 1, both with the optimizer's state whole and sharded, zero1), every
 * generated kind of the kind table (kinds.h: a new row joins by itself), every micro-batch size b
 * and count m per replica with d * m * b = the global batch, chunks per device v = 1..8
 * (where the layers split into p * v stages), and each placement the kind's row builds. A
 * combination the kind's preconditions, its placements or the layer count refuse is skipped and
 * counted by reason. Every other candidate goes through the one chain (run.h: run_load with the
 * candidate's overrides, then run_predict: the cost model, one simulation, the memory of every
 * device, and run_report: the report's metrics, which its figures are read from), so the planner
 * predicts exactly what `ppsched FILE --simulate` would. Plain C: no
 * CUDA; --verify's executor comes in through pp_run_opts_t. A pp_search_t owns its candidates.
 *
 * "Will it fit" counts the optimizer's state: every candidate runs with run.optimizer set to the
 * query's optimizer (AdamW unless the query says none), whatever the file says. The candidates are
 * predicted smallest plan first (stages x micro-batches), so a time budget that runs out leaves
 * the largest unevaluated, and says how many.
 */
#ifndef PP_PLANNER_H
#define PP_PLANNER_H

#include "common/pp_status.h"
#include "schedule/kinds.h"
#include "run.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the user asks. */
typedef struct pp_plan_query {
    const char *path;        /* the YAML file: model, run and cost keys */
    const char *const *sets; /* overrides applied before the candidate's own */
    int n_sets;
    int gpus;          /* GPUs (p x d); 0: the file's pipeline.devices (all: 4) */
    long global_batch; /* sequences per step; 0: tokens / model.seq_len */
    double tokens;     /* tokens per step when global_batch is 0; 0: the file's m * b */
    double memory_gib; /* the limit per GPU; 0: the GPU description's memory */
    int progress;      /* 1: progress on stderr once the search takes over a second */
    const char *optimizer; /* run.optimizer of every candidate: "adamw" or "none"; NULL: adamw */
    double budget_s;       /* > 0: stop predicting once the search has taken this long */
    unsigned kinds;        /* bit (1u << kind) of each kind to search; 0: every generated kind */
} pp_plan_query_t;

/* Sequences per step the search takes at most (--global-batch), and tokens (--tokens: that many
 * sequences of the longest model.seq_len). */
#define PP_PLAN_MAX_SEQS   (1L << 24)
#define PP_PLAN_MAX_TOKENS ((double)PP_PLAN_MAX_SEQS * (1 << 20))

/* Why a combination was not evaluated. */
typedef enum pp_skip {
    PP_SKIP_CHUNKS = 0,    /* the kind does not run that many chunks per device */
    PP_SKIP_MICRO_BATCHES, /* the kind's rule on micro-batches against devices */
    PP_SKIP_PLACEMENT,     /* the kind does not build that placement */
    PP_SKIP_LAYERS,        /* the layers do not split into p * v stages */
    PP_SKIP_BUILD,         /* the chain refused it (its message was printed) */
    PP_SKIP_SAME_SPLIT,    /* the balanced split came out even: the even candidate stands for it */
    PP_SKIP_COUNT
} pp_skip_t;

/* The name of a skip reason ("chunks", "micro-batches", ...). */
const char *plan_skip_name(pp_skip_t k);

/* One candidate and what the chain predicts for it. */
typedef struct pp_candidate {
    pp_sched_kind_t kind;
    int p, d;      /* pipeline devices and data-parallel replicas: p x d = the GPUs */
    int zero1;     /* 1: run.optimizer_sharding zero1 (AdamW's state sharded over the d) */
    int m, mbs, v; /* micro-batches per replica, sequences per micro-batch, chunks per device */
    pp_placement_t placement;
    pp_split_t split;    /* even, or balanced by the predicted stage costs */
    char label[96];      /* "zb-h1 m=64 b=4", "interleaved-1f1b v=2 m=64 b=4 loop" */
    double step_ms;      /* simulated step (all of these: the report's, run_report) */
    double tokens_per_s; /* tokens per step / step */
    double bubble;       /* idle / makespan over every device */
    double compute_ms;   /* the busiest device's compute time (the union of its compute ops) */
    double peak_bytes;   /* the fullest device's predicted peak, in whole bytes */
    int fullest;         /* that device */
    double mb_equiv;     /* the most activations a device holds, in micro-batch equivalents */
    double sent_bytes;   /* bytes moved between devices per step */
    int fits;            /* peak_bytes <= the limit */
    int offload;         /* 1: run.offload auto under the limit, tried where the candidate without
                            it does not fit (the file's run.offload none) */
    int offload_room;    /* 0: a device is over the limit even without activation slots */
} pp_candidate_t;

typedef struct pp_search {
    pp_candidate_t *c; /* [n]: ranked (plan_search_rank) */
    int n, cap;
    int n_fit; /* the first n_fit fit, best first */
    int skipped[PP_SKIP_COUNT];
    int p;              /* GPUs (every candidate's p x d) */
    long seqs;          /* sequences per step, over every replica */
    double tokens;      /* tokens per step */
    double limit_bytes; /* memory per GPU the candidates are held to */
    char gpu[16];       /* the GPU description priced on */
    pp_config_t base;   /* the file with the overrides, unresolved (model and run keys) */
    int have_base;
    int optimizer_default; /* 1: the query left the optimizer to the default (AdamW) */
    double seconds;        /* wall time of the search */
    double budget_s;       /* the query's budget; 0: none */
    unsigned kinds;        /* the query's kinds (0: every generated kind) */
    int listed;            /* candidates listed, before the chain and the budget */
    int unevaluated;       /* of them, those the budget left out (the largest plans) */
    long long unevaluated_from; /* the smallest of them, in stages x micro-batches */
} pp_search_t;

/* Search: every candidate of the space above for `q`, ranked (those the budget left out are
 * counted in s->unevaluated). Input problems (a file that does not load, a batch that no
 * micro-batch count makes, a --set of run.optimizer) print their message and return
 * PP_ERR_INPUT. `s` is freeable after any return. */
pp_status_t plan_search(pp_search_t *s, const pp_plan_query_t *q);

/* Rank: candidates that fit first, by tokens/s (then less memory); then those that do not fit,
 * by their peak memory (the closest first). Sets n_fit. */
void plan_search_rank(pp_search_t *s);

/* The --set overrides that make candidate c from the query's file (into bufs; sets points at
 * them), the search's optimizer, its data-parallel split and optimizer sharding, then for an
 * offload candidate run.offload=auto and the search's limit as run.memory_limit. Returns their
 * count (at most PP_PLAN_CANDIDATE_SETS). */
#define PP_PLAN_CANDIDATE_SETS 13
int plan_candidate_sets(const pp_search_t *s, const pp_candidate_t *c, char bufs[][64],
                        const char **sets);

/* Load candidate c through the chain into r (run_load with the query's and the candidate's
 * overrides against n_visible devices, -1: unknown). */
pp_status_t plan_candidate_load(pp_run_t *r, const pp_search_t *s, const pp_plan_query_t *q,
                                const pp_candidate_t *c, int n_visible);

/* Predict candidate c, loaded into r by plan_candidate_load, as `ppsched FILE --simulate` does:
 * run_predict (the cost model, one simulation, the memory of every device) and run_report (the
 * report's metrics); then c's figures (step, tokens/s, bubble, the busiest device's compute, bytes
 * sent, the fullest device and its peak, activations) are read off r->report, so the same plan
 * gives the same numbers through both. */
pp_status_t plan_candidate_predict(pp_run_t *r, pp_candidate_t *c);

/* The Pareto front of the fitting candidates, memory against tokens/s: indices into s->c in order
 * of rising memory, each faster than every one before it. Returns the count (at most max). */
int plan_search_pareto(const pp_search_t *s, int *idx, int max);

/* One sentence on why the best beats the runner-up: step, bubble, compute, communication and
 * memory side by side. "" when fewer than two fit. */
void plan_search_why(const pp_search_t *s, char *buf, size_t size);

/* One candidate run on the GPUs (--verify). */
typedef struct pp_verified {
    int rank;               /* its place in the predicted ranking, 1-based */
    double predicted_ms;    /* the chain's prediction before running (the GPU present's) */
    double measured_ms;     /* the measured median step */
    double predicted_bytes; /* the fullest device's predicted peak */
    double measured_bytes;  /* the fullest device's measured peak */
} pp_verified_t;

/* Run the best k candidates that fit through the chain with ro (a measured run: ro->exec, on
 * n_visible devices) into v[k], sorted by the measured step; *n: how many ran. Stops at the
 * first failure. */
pp_status_t plan_verify(const pp_search_t *s, const pp_plan_query_t *q, int k, int n_visible,
                        const pp_run_opts_t *ro, pp_verified_t *v, int *n);

/* The outputs (planner_report.c): the table of the top n, the Pareto front and the why line;
 * the same as JSON; every candidate as CSV; the best as a schedule file. */
pp_status_t plan_print_table(const pp_search_t *s, int top, FILE *f);
pp_status_t plan_print_json(const pp_search_t *s, int top, FILE *f);
pp_status_t plan_print_csv(const pp_search_t *s, FILE *f);
pp_status_t plan_write_yaml(const pp_search_t *s, const pp_candidate_t *c, const char *path);
pp_status_t plan_print_verified(const pp_search_t *s, const pp_verified_t *v, int n, FILE *f);

/* "nothing fits in 1.0 GiB per GPU: the closest is ... (needs 37.5 GiB on device 0)" on f when no
 * candidate fits; returns 1 then, 0 otherwise. */
int plan_print_nothing_fits(const pp_search_t *s, FILE *f);

/* "the budget of 60 s ran out: 120 of 500 candidates not predicted ..." on f when the budget
 * left some out; returns 1 then, 0 otherwise. */
int plan_print_unevaluated(const pp_search_t *s, FILE *f);

void plan_search_free(pp_search_t *s);

#ifdef __cplusplus
}
#endif

#endif /* PP_PLANNER_H */
