/*
 * report_compare.c — `ppsched compare` output: runs side by side as one fixed-width table (names
 * row, units row, a verdict footer naming the highest throughput), as CSV or as JSON, and one
 * bubble-against-m chart per schedule that ran at two or more micro-batch counts. The table and
 * the CSV end with the bubble split by reason (explain.h), one column per row of its table. Reads
 * finished runs only (each with its report built).
 */
#include "report_compare.h"

#include "report/report_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void fmt_num(char *buf, size_t n, double v, const char *fmt)
{
    if (!isfinite(v))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, fmt, v);
}

/* Peak memory and peak in-flight micro-batches of the fullest device of a run. */
static void fullest_device(const pp_report_t *r, size_t *mem, int *inflight)
{
    *mem = 0;
    *inflight = 0;
    for (int d = 0; d < r->devices; d++) {
        if (r->per_device[d].peak_mem_bytes > *mem) *mem = r->per_device[d].peak_mem_bytes;
        if (r->per_device[d].peak_inflight > *inflight) *inflight = r->per_device[d].peak_inflight;
    }
}

/* The reasons the comparison shows, into shown[PP_IDLE_COUNT]: never the replicas' (a comparison
 * keeps one set of columns), the offload reason where a run's plan has host copies, every other
 * one always. */
static void compare_reasons(const pp_compare_row_t *jobs, int n, unsigned char *shown)
{
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        shown[c] = pp_idle_reasons[c].shown == PP_SHOWN_ALWAYS;
        for (int i = 0; i < n && pp_idle_reasons[c].shown == PP_SHOWN_COPIES; i++)
            if (!jobs[i].failed && jobs[i].run.report.explain.copies) shown[c] = 1;
    }
}

/* The shown reasons' bubble as extra columns: row 0 names, row 1 units, else the values of `r`. */
static void reason_columns(pp_out_t *o, const pp_report_t *r, int row, const unsigned char *shown)
{
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        char v[32];
        if (!shown[c]) continue;
        if (r) fmt_num(v, sizeof v, report_bubble_by_reason(r, (pp_idle_reason_t)c) * 100, "%.1f");
        out_printf(o, " %8s", r ? v : row == 0 ? pp_idle_reasons[c].name : "(%)");
    }
    out_puts(o, "\n");
}

/* The predicted peak of the fullest device, and the most activation micro-batch equivalents any
 * device holds (NAN when none was predicted). */
static void predicted_fullest(const pp_report_t *r, size_t *mem, double *mb_equiv)
{
    *mem = 0;
    *mb_equiv = NAN;
    for (int d = 0; d < r->devices; d++) {
        const pp_device_stats_t *ds = &r->per_device[d];
        if (ds->peak_mem_predicted > *mem) *mem = ds->peak_mem_predicted;
        if (isfinite(ds->act_mb_equiv) && !(ds->act_mb_equiv <= *mb_equiv))
            *mb_equiv = ds->act_mb_equiv;
    }
}

/* The prediction as extra columns: row 0 names, row 1 units, else the values of `r`. */
static void predicted_columns(pp_out_t *o, const pp_report_t *r, int row)
{
    if (!r) {
        out_printf(o, " %9s %9s %6s", row == 0 ? "predicted" : "(ms)",
                   row == 0 ? "pred mem" : "(GiB)", row == 0 ? "act" : "mb-eq");
        return;
    }
    size_t pmem;
    double mbeq;
    char pstep[32], pmemb[32], mbq[32];
    predicted_fullest(r, &pmem, &mbeq);
    fmt_num(pstep, sizeof pstep, r->step_ms_predicted, "%.3f");
    fmt_num(pmemb, sizeof pmemb, pmem ? (double)pmem / (1u << 30) : NAN, "%.2f");
    fmt_num(mbq, sizeof mbq, mbeq, "%.1f");
    out_printf(o, " %9s %9s %6s", pstep, pmemb, mbq);
}

pp_status_t compare_print_table(const pp_compare_row_t *jobs, int n, FILE *f)
{
    pp_out_t out, *o = &out;
    out_wrap(o, f, "output", "the comparison table");
    unsigned char shown[PP_IDLE_COUNT];
    compare_reasons(jobs, n, shown);
    out_printf(o, "%-36s %3s %4s %2s %9s %9s %9s %11s %8s %7s %7s %7s %9s %6s", "schedule", "p",
               "m", "v", "step", "p10", "p90", "tokens/s", "TFLOP/s", "bubble", "sim", "theory",
               "peak mem", "in-fl");
    predicted_columns(o, NULL, 0);
    reason_columns(o, NULL, 0, shown);
    out_printf(o, "%-36s %3s %4s %2s %9s %9s %9s %11s %8s %7s %7s %7s %9s %6s", "", "", "", "",
               "(ms)", "(ms)", "(ms)", "", "", "(%)", "(%)", "(%)", "(GiB)", "st,mb");
    predicted_columns(o, NULL, 1);
    reason_columns(o, NULL, 1, shown);
    for (int i = 0; i < n; i++) {
        const pp_report_t *r = &jobs[i].run.report;
        size_t mem;
        int inflight;
        if (jobs[i].failed) {
            out_printf(o, "%-36.36s   not run: its --sweep values are not valid (message above)\n",
                       jobs[i].label);
            continue;
        }
        fullest_device(r, &mem, &inflight);
        char memb[32], th[32], sim[32], tf[32], bub[32];
        fmt_num(memb, sizeof memb, mem ? (double)mem / (1u << 30) : NAN, "%.2f");
        fmt_num(bub, sizeof bub, r->bubble * 100, "%.1f");
        fmt_num(th, sizeof th, r->bubble_theory * 100, "%.1f");
        fmt_num(sim, sizeof sim, r->bubble_simulated * 100, "%.1f");
        fmt_num(tf, sizeof tf, r->tflops, "%.1f");
        out_printf(o, "%-36.36s %3d %4d %2d %9.3f %9.3f %9.3f %11.4g %8s %7s %7s %7s %9s %6d",
                   jobs[i].label, r->devices, r->micro_batches, r->chunks, r->step_ms,
                   r->step_ms_p10, r->step_ms_p90, r->tokens_per_s, tf, bub, sim, th, memb,
                   inflight);
        predicted_columns(o, r, 2);
        reason_columns(o, r, 2, shown);
    }
    /* Verdict: the highest throughput (runs of different m do different work per step). */
    int best = -1, n_ok = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i].failed) continue;
        n_ok++;
        if (best < 0 || jobs[i].run.report.tokens_per_s > jobs[best].run.report.tokens_per_s)
            best = i;
    }
    if (n_ok > 1)
        out_printf(o, "# highest throughput: %s (%.4g tokens/s, %.3f ms per step)\n",
                   jobs[best].label, jobs[best].run.report.tokens_per_s,
                   jobs[best].run.report.step_ms);
    return out_close(o);
}

static void csv_field(pp_out_t *o, double v)
{
    if (!isfinite(v))
        out_puts(o, ",");
    else
        out_printf(o, ",%.6g", v);
}

pp_status_t compare_print_csv(const pp_compare_row_t *jobs, int n, FILE *f)
{
    pp_out_t out, *o = &out;
    out_wrap(o, f, "output", "the comparison CSV");
    unsigned char shown[PP_IDLE_COUNT];
    compare_reasons(jobs, n, shown);
    out_printf(o,
               "schedule,mode,devices,stages,micro_batches,chunks,step_ms,step_ms_p10,step_ms_p90,"
               "tokens_per_s,tflops,bubble,bubble_simulated,bubble_theory,peak_mem_bytes,"
               "peak_inflight_microbatches,step_ms_predicted,peak_mem_predicted_bytes,"
               "activation_microbatch_equivalents");
    for (int c = 0; c < PP_IDLE_COUNT; c++)
        if (shown[c]) out_printf(o, ",bubble_%s", pp_idle_reasons[c].name);
    out_puts(o, "\n");
    for (int i = 0; i < n; i++) {
        const pp_report_t *r = &jobs[i].run.report;
        size_t mem;
        int inflight;
        out_csv_str(o, jobs[i].label);
        if (jobs[i].failed) { /* the mode column says why; the numbers stay empty */
            out_printf(o, ",invalid");
            for (int c = 0; c < 14 + PP_IDLE_COUNT; c++)
                if (c < 14 || shown[c - 14]) out_puts(o, ",");
            out_puts(o, "\n");
            continue;
        }
        fullest_device(r, &mem, &inflight);
        out_printf(o, ",%s,%d,%d,%d,%d", report_mode_name(r->mode), r->devices, r->stages,
                   r->micro_batches, r->chunks);
        csv_field(o, r->step_ms);
        csv_field(o, r->step_ms_p10);
        csv_field(o, r->step_ms_p90);
        csv_field(o, r->tokens_per_s);
        csv_field(o, r->tflops);
        csv_field(o, r->bubble);
        csv_field(o, r->bubble_simulated);
        csv_field(o, r->bubble_theory);
        out_printf(o, ",%zu,%d", mem, inflight);
        size_t pmem;
        double mbeq;
        predicted_fullest(r, &pmem, &mbeq);
        csv_field(o, r->step_ms_predicted);
        out_printf(o, ",%zu", pmem);
        csv_field(o, mbeq);
        for (int c = 0; c < PP_IDLE_COUNT; c++)
            if (shown[c])
                csv_field(o, report_bubble_by_reason(r, (pp_idle_reason_t)c));
        out_puts(o, "\n");
    }
    return out_close(o);
}

pp_status_t compare_print_json(const pp_compare_row_t *jobs, int n, FILE *f)
{
    pp_status_t st = PP_OK;
    fprintf(f, "[");
    for (int i = 0; i < n && st == PP_OK; i++) {
        if (i) fprintf(f, ",\n");
        if (!jobs[i].failed) {
            st = report_print_json(&jobs[i].run.report, f);
            continue;
        }
        pp_out_t out;
        out_wrap(&out, f, "output", "the JSON report");
        out_puts(&out, "{\"label\":");
        out_json_str(&out, jobs[i].label);
        out_puts(&out, ",\"error\":\"its --sweep values are not valid\"}");
        st = out_close(&out);
    }
    fprintf(f, "]\n");
    return st;
}

/* One bubble-against-m chart per schedule (same name, p and v) that ran at two or more m. */
pp_status_t compare_bubble_charts(const pp_compare_row_t *jobs, int n, const char *dir, int measure)
{
    int *done = calloc((size_t)n, sizeof *done), *m = calloc((size_t)n, sizeof *m);
    double *meas = calloc((size_t)n, sizeof *meas), *sim = calloc((size_t)n, sizeof *sim);
    pp_status_t st = PP_OK;
    if (!done || !m || !meas || !sim) {
        st = PP_ERR_NOMEM;
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        goto out;
    }
    for (int i = 0; i < n && st == PP_OK; i++) {
        if (done[i] || jobs[i].failed) continue;
        const pp_compare_row_t *a = &jobs[i];
        int k = 0;
        for (int j = i; j < n; j++) {
            const pp_compare_row_t *b = &jobs[j];
            if (done[j] || b->failed || strcmp(a->run.job.name, b->run.job.name) != 0 ||
                a->run.plan.n_devices != b->run.plan.n_devices ||
                a->run.plan.chunks != b->run.plan.chunks ||
                a->run.job.kind != b->run.job.kind)
                continue;
            done[j] = 1;
            m[k] = b->run.plan.n_mb;
            meas[k] = b->run.report.bubble;
            sim[k] = measure ? b->run.report.bubble_simulated : NAN;
            k++;
        }
        /* sort the points by m (insertion sort: a handful of points) */
        for (int x = 1; x < k; x++)
            for (int y = x; y > 0 && m[y] < m[y - 1]; y--) {
                int tm = m[y];
                m[y] = m[y - 1];
                m[y - 1] = tm;
                double t1 = meas[y];
                meas[y] = meas[y - 1];
                meas[y - 1] = t1;
                double t2 = sim[y];
                sim[y] = sim[y - 1];
                sim[y - 1] = t2;
            }
        if (k < 2 || m[0] == m[k - 1]) continue;
        char path[4096], title[300], file[256];
        snprintf(path, sizeof path, "%s/bubble-%s-p%d.svg", dir,
                 out_file_name(a->run.job.name, file, sizeof file), a->run.plan.n_devices);
        snprintf(title, sizeof title, "%s: bubble against micro-batches", a->run.job.name);
        st = report_write_bubble_chart(path, title, a->run.job.kind, a->run.plan.n_devices,
                                       a->run.plan.chunks, k, m, meas, sim,
                                       measure ? "measured" : "simulated");
    }
out:
    free(done);
    free(m);
    free(meas);
    free(sim);
    return st;
}

/* Every run in one bar chart, DIR/bubble-all.svg, when two or more schedules ran. */
pp_status_t compare_bubble_bars(const pp_compare_row_t *jobs, int n, const char *dir, int measure)
{
    const char **group = calloc((size_t)n, sizeof *group);
    int *m = calloc((size_t)n, sizeof *m);
    double *bubble = calloc((size_t)n, sizeof *bubble), *theory = calloc((size_t)n, sizeof *theory);
    pp_status_t st = PP_OK;
    int other = 0, k = 0, first = -1;
    if (!group || !m || !bubble || !theory) {
        st = PP_ERR_NOMEM;
        fprintf(stderr, "%s:%d: out of host memory\n", __FILE__, __LINE__);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (jobs[i].failed) continue; /* refused --sweep values: nothing ran */
        if (first < 0) first = i;
        group[k] = jobs[i].run.job.name;
        m[k] = jobs[i].run.plan.n_mb;
        bubble[k] = jobs[i].run.report.bubble;
        theory[k] = jobs[i].run.report.bubble_theory;
        other |= strcmp(group[k], group[0]) != 0;
        k++;
    }
    if (other) {
        char path[4096], title[200];
        snprintf(path, sizeof path, "%s/bubble-all.svg", dir);
        snprintf(title, sizeof title, "%s bubble of every schedule, p = %d",
                 measure ? "Measured" : "Simulated", jobs[first].run.plan.n_devices);
        st = report_write_bubble_bars(path, title, k, group, m, bubble, theory);
    }
out:
    free(group);
    free(m);
    free(bubble);
    free(theory);
    return st;
}
