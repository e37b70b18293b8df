/*
 * report_compare.h — the outputs of `ppsched compare` (compare.h): several finished runs in one
 * table, as CSV or JSON, bubble-against-micro-batches charts, and all the runs' bubbles in one bar
 * chart.
 */
#ifndef PP_REPORT_COMPARE_H
#define PP_REPORT_COMPARE_H

#include "run.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One run of a comparison and its label (schedule name plus the sweep values). */
typedef struct pp_compare_row {
    pp_run_t run;
    char label[256];
    int failed; /* 1: this combination of --sweep values was refused (its message was printed) */
} pp_compare_row_t;

/* The fixed-width table: names row, units row, a row per run, a verdict footer. */
pp_status_t compare_print_table(const pp_compare_row_t *jobs, int n, FILE *f);
/* The same as CSV with a header row. */
pp_status_t compare_print_csv(const pp_compare_row_t *jobs, int n, FILE *f);
/* The same as JSON: an array of the runs' reports (report_print_json), a failed row as
 * {"label": ..., "error": ...}. */
pp_status_t compare_print_json(const pp_compare_row_t *jobs, int n, FILE *f);
/* One bubble-against-m chart into DIR per schedule (same name, p and v) run at two or more m;
 * `measure` says whether the points are measured (the simulated ones are drawn beside them). */
pp_status_t compare_bubble_charts(const pp_compare_row_t *jobs, int n, const char *dir,
                                  int measure);
/* Every run in one bar chart, DIR/bubble-all.svg (report_write_bubble_bars), when two or more
 * schedules ran. */
pp_status_t compare_bubble_bars(const pp_compare_row_t *jobs, int n, const char *dir, int measure);

#ifdef __cplusplus
}
#endif

#endif /* PP_REPORT_COMPARE_H */
