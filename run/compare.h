/*
 * compare.h — `ppsched compare`: several schedules, each with every combination of --sweep values,
 * run (or simulated) in turn through the one chain (run.h), kept side by side for the writers of
 * report_compare.h.
 *
 * Every run is loaded (config, resolve, schedule, plan) before any runs: the files the input
 * refuses on their own are all named, and nothing runs; a combination of sweep values it refuses
 * is a failed row (its message printed), and the others run. With a chart folder every run's
 * Gantt chart goes there once all have run, then the bubble charts of the whole comparison: a
 * comparison that fails writes none (and removes the folder it made).
 * Plain C: the executor comes in through pp_run_opts_t. A pp_compare_t owns its rows.
 */
#ifndef PP_COMPARE_H
#define PP_COMPARE_H

#include "common/pp_status.h"
#include "report_compare.h"
#include "run.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PP_COMPARE_MAX_SWEEPS 8    /* --sweep options one comparison takes */
#define PP_COMPARE_MAX_VALUES 64   /* values of one --sweep */
#define PP_COMPARE_MAX_RUNS   4096 /* files x sweep values one comparison holds */

/* What to compare, and how. */
typedef struct pp_compare_opts {
    char *const *files; /* the schedule files, in the order of the rows */
    int n_files;
    const char *const *sets; /* overrides applied to every file, before the sweep values */
    int n_sets;
    const char *const *sweeps; /* "KEY=V1,V2,..." each (a [list] or {map} is one value) */
    int n_sweeps;
    const char *svg_dir;      /* a Gantt chart per run and the bubble charts here; NULL: none */
    int progress;             /* "# [k/n] FILE key=value" on stderr before each run */
    int n_visible;            /* CUDA devices the files are resolved against (0: simulate) */
    const pp_run_opts_t *run; /* the chain's options: measure or simulate, the executor */
    const char *first_note;   /* printed on stderr once the first run has loaded, or NULL */
} pp_compare_opts_t;

/* A finished comparison. */
typedef struct pp_compare {
    pp_compare_row_t *rows; /* one per run, in file order, then sweep combination */
    int n_rows;             /* rows filled (a comparison stopped early holds fewer) */
    int n_alloc;            /* rows allocated (every one is freed by compare_free) */
    int measure;            /* 1: the rows were measured on the GPUs; 0: simulated */
} pp_compare_t;

/* Every run of the comparison, then (with a chart folder) the charts of all of them. A bad
 * --sweep or too many runs is PP_ERR_USAGE (printed); files the input refuses are PP_ERR_INPUT
 * (each printed, then how many) before anything runs. On failure `c` is left freeable. */
pp_status_t compare_run(pp_compare_t *c, const pp_compare_opts_t *o);

/* The refusal of a comparison with failed rows: prints how many did not run and returns
 * PP_ERR_INPUT; PP_OK when every row ran. */
pp_status_t compare_check_failed(const pp_compare_t *c);

void compare_free(pp_compare_t *c);

#ifdef __cplusplus
}
#endif

#endif /* PP_COMPARE_H */
