/*
 * report_explain.c — the table's block on why the devices idled, and the critical path listing
 * (see explain.h for what each reason means, docs/explain.md for how to read them).
 *
 * Every line of the block starts with '#', so a script that reads the device rows of the table
 * (the lines without '#') reads the same rows whether the block is there or not. Reasons come from pp_idle_reasons and
 * what-if rows from pp_what_ifs, in table order: adding a row there adds a column here. A figure
 * the report does not know (no per-op times, no simulator run) is left out, never printed as 0.
 */
#include "report.h"
#include "report_io.h"

#include <math.h>

/* One row of ms per reason and their sum, after a label. */
static void print_reason_row(pp_out_t *o, const pp_explain_t *ex, const char *label,
                             const double *v)
{
    double sum = 0.0;
    out_printf(o, "# %-18s", label);
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        if (explain_shows_reason(ex, c)) out_printf(o, " %10.3f", v[c]);
        sum += v[c];
    }
    out_printf(o, " %10.3f\n", sum);
}

static void print_reason_header(pp_out_t *o, const pp_explain_t *ex)
{
    out_printf(o, "# %-18s", "idle by reason");
    for (int c = 0; c < PP_IDLE_COUNT; c++)
        if (explain_shows_reason(ex, c)) out_printf(o, " %10s", pp_idle_reasons[c].name);
    out_printf(o, " %10s\n# %-18s", "idle", "");
    for (int c = 0; c <= PP_IDLE_COUNT; c++)
        if (c == PP_IDLE_COUNT || explain_shows_reason(ex, c)) out_printf(o, " %10s", "ms");
    out_puts(o, "\n");
}

/* "warmup 6.80 + schedule 17.33 + ... = 29.69" in % of devices x makespan. */
static void print_bubble_split(pp_out_t *o, const pp_explain_t *ex, const char *label,
                               const pp_idle_split_t *s)
{
    double scale = 100.0 / (s->n_devices * s->span_ms), sum = 0.0;
    out_printf(o, "#   %-10s", label);
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        if (!explain_shows_reason(ex, c)) continue;
        out_printf(o, "%s%s %.2f", c ? " + " : " ", pp_idle_reasons[c].name,
                   s->total_ms[c] * scale);
        sum += s->total_ms[c] * scale;
    }
    out_printf(o, " = %.2f%%\n", sum);
}

static void print_split(const pp_report_t *r, pp_out_t *o)
{
    const pp_explain_t *ex = &r->explain;
    int both = r->mode == PP_MODE_MEASURE && ex->split_sim.n_devices == ex->split.n_devices;
    const char *own = r->mode == PP_MODE_MEASURE ? "measured" : "simulated";
    char label[32];
    out_printf(o, "#\n");
    print_reason_header(o, ex);
    for (int d = 0; d < ex->split.n_devices; d++) {
        snprintf(label, sizeof label, "dev %d %s", d, own);
        print_reason_row(o, ex, label, &ex->split.by_device[d * PP_IDLE_COUNT]);
        if (both) {
            snprintf(label, sizeof label, "dev %d simulated", d);
            print_reason_row(o, ex, label, &ex->split_sim.by_device[d * PP_IDLE_COUNT]);
        }
    }
    print_reason_row(o, ex, r->mode == PP_MODE_MEASURE ? "all measured" : "all simulated",
                     ex->split.total_ms);
    if (both) print_reason_row(o, ex, "all simulated", ex->split_sim.total_ms);
    if (!(ex->split.span_ms > 0)) return;
    out_printf(o, "# bubble by reason (%% of devices x makespan, adds up to the bubble):\n");
    print_bubble_split(o, ex, own, &ex->split);
    if (both && ex->split_sim.span_ms > 0) print_bubble_split(o, ex, "simulated", &ex->split_sim);
    if (!isfinite(r->bubble_theory)) return;
    /* The closed form has no transfers and no launch gaps; the rest is the schedule's own idle
     * time beyond the closed form's (uneven stages, F/B/W costs that differ). */
    const pp_idle_split_t *s = &ex->split;
    double scale = 100.0 / (s->n_devices * s->span_ms), all = 0.0;
    for (int c = 0; c < PP_IDLE_COUNT; c++)
        all += s->total_ms[c] * scale;
    double comm = s->total_ms[PP_IDLE_COMM] * scale, launch = s->total_ms[PP_IDLE_LAUNCH] * scale;
    double off = s->total_ms[PP_IDLE_OFFLOAD] * scale;
    char offload[40] = "";
    if (explain_shows_reason(ex, PP_IDLE_OFFLOAD))
        snprintf(offload, sizeof offload, " + offload %+.2f", off);
    out_printf(o,
               "# vs theory %.2f%%: %+.2f pp = comm %+.2f%s + launch %+.2f + warmup, schedule and "
               "cooldown beyond the closed form %+.2f\n",
               100.0 * r->bubble_theory, all - 100.0 * r->bubble_theory, comm, offload, launch,
               all - comm - off - launch - 100.0 * r->bubble_theory);
}

static void print_what_if(const pp_report_t *r, pp_out_t *o)
{
    const pp_what_if_t *w = &r->explain.what_if;
    double ref = r->step_ms;
    out_printf(o, "# what-if (the simulator%s):",
               r->mode == PP_MODE_MEASURE ? " with this run's op costs" : "");
    for (int i = 0; i < PP_WHAT_IF_COUNT; i++) {
        if (!explain_shows_what_if(&r->explain, i)) continue;
        out_printf(o, "%s %s %.3f ms", i ? "," : "", pp_what_ifs[i].label, w->step_ms[i]);
        if (isfinite(ref) && ref > 0)
            out_printf(o, " (%+.1f%%)", 100.0 * (w->step_ms[i] / ref - 1));
    }
    if (isfinite(ref)) out_printf(o, "; step %.3f ms", ref);
    out_puts(o, "\n");
}

void report_table_explain(pp_out_t *o, const pp_report_t *r)
{
    const pp_explain_t *ex = &r->explain;
    if (ex->known) {
        print_split(r, o);
        const pp_critical_path_t *cp = &ex->path;
        if (cp->n > 0)
            out_printf(o,
                       "# critical path: %d ops, compute %.3f ms + transfers %.3f ms + waits %.3f "
                       "ms = %.3f ms (--critical-path lists it)\n",
                       cp->n, cp->compute_ms, cp->comm_ms, cp->wait_ms, cp->span_ms);
    }
    if (ex->have_what_if) print_what_if(r, o);
}

double report_bubble_by_reason(const pp_report_t *r, pp_idle_reason_t c)
{
    const pp_idle_split_t *s = &r->explain.split;
    if (!r->explain.known || !(s->span_ms > 0) || (int)c < 0 || c >= PP_IDLE_COUNT) return NAN;
    return s->total_ms[c] / (s->n_devices * s->span_ms);
}

pp_status_t report_print_critical_path(const pp_report_t *r, FILE *f)
{
    pp_out_t out, *o = &out;
    out_wrap(o, f, "output", "the critical path");
    const pp_critical_path_t *cp = &r->explain.path;
    if (!r->explain.known || cp->n == 0) {
        out_printf(o, "# critical path: unknown (the run recorded step times only)\n");
        return out_close(o);
    }
    out_printf(o,
               "# critical path: %d ops, compute %.3f ms + transfers %.3f ms + waits %.3f ms = "
               "%.3f ms\n",
               cp->n, cp->compute_ms, cp->comm_ms, cp->wait_ms, cp->span_ms);
    out_printf(o, "# %4s %6s %-8s %-10s %10s %10s %10s  %s\n", "link", "device", "stream", "op",
               "start", "end", "wait", "after");
    out_printf(o, "# %4s %6s %-8s %-10s %10s %10s %10s\n", "", "", "", "", "ms", "ms", "ms");
    for (int i = 0; i < cp->n; i++) {
        const pp_path_link_t *l = &cp->links[i];
        char name[48];
        action_format(&l->action, name, sizeof name);
        out_printf(o, "  %4d %6d %-8s %-10s %10.3f %10.3f %10.3f  %s\n", i, l->device,
                   pp_role_name(l->role), name, l->start_ms, l->end_ms, l->wait_ms,
                   explain_via_name(l->via));
    }
    return out_close(o);
}
