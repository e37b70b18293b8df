/*
 * report_svg.c — a timeline as a standalone SVG 1.1 Gantt chart: a title, one row per device
 * ("dev d") with one box per compute op (F blue, B green, I orange, W purple, the micro-batch
 * number centred where the box is wide enough, the action and its times as a hover title), the
 * device's transfers as thin grey bars under its row, its busy time and bubble at the row's right,
 * a time axis in ms with round ticks, and a legend. Idle stretches are shaded in the row's lane
 * by reason (explain.h; one <rect class="gap REASON"> each, under the boxes); ops on the critical
 * path get the class "critical" and a dark outline.
 *
 * The plot is about 1200 px wide and grows with the longest device program, so boxes stay
 * readable. Every compute op gets exactly one <rect class="op ...">. Text is XML-escaped.
 */
#include "report.h"
#include "report_io.h"
#include "schedule/kinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    SVG_LEFT = 70,      /* room for the row labels */
    SVG_RIGHT = 210,    /* room for busy / bubble at the row's right */
    SVG_TOP = 64,       /* title and subtitle */
    SVG_ROW_H = 26,     /* height of a device's compute row */
    SVG_ROW_GAP = 14,   /* between rows; the transfer bars sit here */
    SVG_MIN_PLOT = 920, /* plot width when there are few ops */
    SVG_PX_PER_OP = 14, /* plot width per op of the longest device program */
    SVG_MAX_PLOT = 40000,
};

#define SVG_CRITICAL "#111111" /* outline of the critical path's ops */

static const char *op_colour(pp_action_kind_t k)
{
    switch (k) {
    case PP_ACT_F: return "#4c78a8";
    case PP_ACT_B: return "#54a24b";
    case PP_ACT_I: return "#f58518";
    case PP_ACT_W: return "#9d6bc4";
    default: return "#9a9a9a";
    }
}

/* A round tick step (1, 2 or 5 times a power of ten) giving about `n` ticks over `span`. */
static double tick_step(double span, int n)
{
    if (!(span > 0.0)) return 1.0;
    double raw = span / n, mag = pow(10.0, floor(log10(raw)));
    double steps[] = {1.0, 2.0, 5.0, 10.0};
    for (int i = 0; i < 4; i++)
        if (steps[i] * mag >= raw) return steps[i] * mag;
    return 10.0 * mag;
}

/* The chart's geometry: time origin, scale, plot width from the longest device program. */
typedef struct svg_geom {
    double t0, span, scale;
    int plot_w, axis_y, width, height;
} svg_geom_t;

static svg_geom_t svg_geometry(const pp_plan_t *plan, const pp_timeline_t *tl)
{
    svg_geom_t g;
    g.t0 = 0.0;
    for (int k = 0; k < plan->n_ops; k++)
        if (k == 0 || tl->t[k].start_ms < g.t0) g.t0 = tl->t[k].start_ms;
    g.span = timeline_makespan(tl);
    int longest = 0;
    for (int d = 0; d < plan->n_devices; d++) {
        int n = 0;
        for (int k = 0; k < plan->n_ops; k++)
            if (plan->ops[k].device == d && pp_role_row(plan->ops[k].role)->computes) n++;
        if (n > longest) longest = n;
    }
    g.plot_w = longest * SVG_PX_PER_OP;
    if (g.plot_w < SVG_MIN_PLOT) g.plot_w = SVG_MIN_PLOT;
    if (g.plot_w > SVG_MAX_PLOT) g.plot_w = SVG_MAX_PLOT;
    g.scale = g.span > 0.0 ? g.plot_w / g.span : 0.0;
    g.axis_y = SVG_TOP + plan->n_devices * (SVG_ROW_H + SVG_ROW_GAP);
    g.width = SVG_LEFT + g.plot_w + SVG_RIGHT;
    g.height = g.axis_y + 102;
    return g;
}

/* XML prolog, background, title and the summary line. */
static void svg_header(pp_out_t *o, const svg_geom_t *g, const pp_plan_t *plan,
                       const pp_timeline_t *tl, const pp_report_t *rep, const char *title)
{
    const int width = g->width, height = g->height;
    const double span = g->span;
    out_printf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out_printf(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
        "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n",
        width, height, width, height);
    out_printf(o,
               "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n",
               width, height);
    out_puts(o, "<title>");
    out_xml(o, title ? title : "ppsched");
    out_puts(o, "</title>\n");
    out_printf(o, "<text x=\"%d\" y=\"26\" font-size=\"17\" font-weight=\"bold\">", SVG_LEFT);
    out_xml(o, title ? title : "ppsched");
    out_puts(o, "</text>\n");
    out_printf(o,
               "<text x=\"%d\" y=\"46\" font-size=\"12\" fill=\"#444444\">%s, %d %s, %d %s, "
               "%d %s, makespan %.3f ms, bubble %.1f%% (idle/makespan), %s</text>\n",
               SVG_LEFT, sched_kind_name(plan->kind), plan->n_devices,
               pp_plural(plan->n_devices, "device", "devices"), plan->n_stages,
               pp_plural(plan->n_stages, "stage", "stages"), plan->n_mb,
               pp_plural(plan->n_mb, "micro-batch", "micro-batches"), span,
               100.0 * (isfinite(rep->bubble) ? rep->bubble : 0.0),
               tl->mode == PP_MODE_MEASURE ? "measured" : "simulated");
}

/* Device d's idle stretches, shaded by reason across the lane of its row at y. */
static void svg_gaps(pp_out_t *o, const svg_geom_t *g, const pp_idle_split_t *s, int d, int y)
{
    for (int i = 0; i < s->n_gaps; i++) {
        const pp_gap_t *x = &s->gaps[i];
        if (x->device != d) continue;
        const pp_idle_reason_info_t *r = &pp_idle_reasons[x->reason];
        out_printf(o,
                   "<rect class=\"gap %s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                   "fill=\"%s\" fill-opacity=\"0.45\"><title>%s %.3f-%.3f ms: %s</title></rect>\n",
                   r->name, SVG_LEFT + (x->start_ms - g->t0) * g->scale, y,
                   (x->end_ms - x->start_ms) * g->scale, SVG_ROW_H, r->colour, r->name,
                   x->start_ms - g->t0, x->end_ms - g->t0, r->label);
    }
}

/* Device d's row: label, idle shading, compute boxes (the critical path's outlined: critical[k]),
 * transfer bars, busy/bubble text. */
static void svg_row(pp_out_t *o, const svg_geom_t *g, const pp_plan_t *plan,
                    const pp_timeline_t *tl, const pp_report_t *rep, const unsigned char *critical,
                    int d)
{
    const double t0 = g->t0, scale = g->scale;
    const int plot_w = g->plot_w;
    int y = SVG_TOP + d * (SVG_ROW_H + SVG_ROW_GAP);
    out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"end\">dev %d</text>\n",
               SVG_LEFT - 10, y + SVG_ROW_H / 2 + 5, d);
    out_printf(o,
               "<rect class=\"lane\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
               "fill=\"#f3f3f3\"/>\n",
               SVG_LEFT, y, plot_w, SVG_ROW_H);
    svg_gaps(o, g, &rep->explain.split, d, y);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (op->device != d) continue;
        double x = SVG_LEFT + (tl->t[k].start_ms - t0) * scale;
        double w = (tl->t[k].end_ms - tl->t[k].start_ms) * scale;
        if (w < 0.0) w = 0.0;
        pp_action_t a = {op->kind, op->stage, op->mb, 0};
        char txt[32];
        action_format(&a, txt, sizeof txt);
        const char *crit = critical[k] ? " critical" : "";
        if (pp_role_row(op->role)->computes) {
            out_printf(o,
                       "<rect class=\"op %s%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                       "fill=\"%s\" stroke=\"%s\" stroke-width=\"%s\"><title>%s %.3f-%.3f "
                       "ms%s</title></rect>\n",
                       action_kind_name(op->kind), crit, x, y, w, SVG_ROW_H, op_colour(op->kind),
                       critical[k] ? SVG_CRITICAL : "#ffffff", critical[k] ? "2" : "0.5", txt,
                       tl->t[k].start_ms - t0, tl->t[k].end_ms - t0,
                       critical[k] ? ", on the critical path" : "");
            char mb[16];
            int len = snprintf(mb, sizeof mb, "%d", op->mb);
            if (w >= 7.0 * len + 4.0)
                out_printf(o,
                           "<text x=\"%.2f\" y=\"%d\" font-size=\"11\" fill=\"#ffffff\" "
                           "text-anchor=\"middle\">%s</text>\n",
                           x + w / 2, y + SVG_ROW_H / 2 + 4, mb);
        } else if (w > 0.0) {
            int bar_y = y + SVG_ROW_H + 2 + (op->role == PP_ROLE_RECV ? 4 : 0);
            const char *fill = critical[k]                ? SVG_CRITICAL
                               : op->role == PP_ROLE_RECV ? "#6f6f6f"
                                                          : "#a8a8a8";
            out_printf(o,
                       "<rect class=\"comm%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"3\" "
                       "fill=\"%s\"><title>%s %.3f-%.3f ms</title></rect>\n",
                       crit, x, bar_y, w, fill, txt, tl->t[k].start_ms - t0, tl->t[k].end_ms - t0);
        }
    }
    const pp_device_stats_t *ds = &rep->per_device[d];
    out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">busy %.3f ms, bubble %.1f%%</text>\n",
               SVG_LEFT + plot_w + 10, y + SVG_ROW_H / 2 + 4, ds->busy_ms,
               100.0 * (isfinite(ds->bubble) ? ds->bubble : 0.0));
}

/* Time axis with round ticks. */
static void svg_axis(pp_out_t *o, const svg_geom_t *g)
{
    const int axis_y = g->axis_y, plot_w = g->plot_w;
    const double span = g->span, scale = g->scale;
    out_printf(o,
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000000\" "
               "stroke-width=\"1\"/>\n",
               SVG_LEFT, axis_y, SVG_LEFT + plot_w, axis_y);
    double step = tick_step(span, 10);
    for (int i = 0; span > 0.0 && i * step <= span * (1.0 + 1e-9); i++) {
        double x = SVG_LEFT + i * step * scale;
        out_printf(o,
                   "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#000000\" "
                   "stroke-width=\"1\"/>\n",
                   x, axis_y, x, axis_y + 5);
        out_printf(o,
                   "<text x=\"%.2f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n",
                   x, axis_y + 18, i * step);
    }
    out_printf(o,
               "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">time (ms)</text>\n",
               SVG_LEFT + plot_w / 2, axis_y + 36);
}

/* Legend entries for the idle reasons and the critical path, from x = lx on the line at ly. */
static void svg_legend_explain(pp_out_t *o, int lx, int ly)
{
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        out_printf(o,
                   "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" "
                   "fill=\"%s\" fill-opacity=\"0.45\"/>\n",
                   lx, ly, pp_idle_reasons[c].colour);
        out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">idle: %s</text>\n", lx + 20,
                   ly + 12, pp_idle_reasons[c].name);
        lx += 130;
    }
    out_printf(o,
               "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" "
               "fill=\"none\" stroke=\"%s\" stroke-width=\"2\"/>\n",
               lx, ly, SVG_CRITICAL);
    out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">critical path</text>\n", lx + 20,
               ly + 12);
}

/* The legend: one swatch per compute kind, the transfer bar, the idle reasons and the critical
 * path. */
static void svg_legend(pp_out_t *o, const svg_geom_t *g)
{
    const int axis_y = g->axis_y;
    static const pp_action_kind_t kinds[] = {PP_ACT_F, PP_ACT_B, PP_ACT_I, PP_ACT_W};
    static const char *const labels[] = {"F forward", "B backward", "I input grad",
                                         "W weight grad"};
    int lx = SVG_LEFT, ly = axis_y + 52;
    for (int i = 0; i < 4; i++) {
        out_printf(o,
                   "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"14\" height=\"14\" "
                   "fill=\"%s\"/>\n",
                   lx, ly, op_colour(kinds[i]));
        out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", lx + 20, ly + 12,
                   labels[i]);
        lx += 130;
    }
    out_printf(o,
               "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"14\" height=\"3\" "
               "fill=\"#a8a8a8\"/>\n",
               lx, ly + 6);
    out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">send / recv</text>\n", lx + 20,
               ly + 12);
    svg_legend_explain(o, SVG_LEFT, ly + 22);
    out_puts(o, "</svg>\n");
}

pp_status_t report_write_svg(const pp_plan_t *plan, const pp_timeline_t *tl, const char *title,
                             const char *path)
{
    if (!tl->has_op_times) {
        fprintf(stderr,
                "%s: cannot write the SVG chart: the run recorded step times only (turn "
                "run.timing on for per-op times)\n",
                path);
        return PP_ERR_USAGE;
    }
    pp_report_t rep;
    PP_CHECK(report_build(&rep, NULL, plan, tl, NULL));
    unsigned char *critical = calloc((size_t)(plan->n_ops > 0 ? plan->n_ops : 1), 1);
    if (!critical) {
        report_free(&rep);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory drawing %d ops", plan->n_ops);
    }
    for (int i = 0; i < rep.explain.path.n; i++)
        critical[rep.explain.path.links[i].op] = 1;
    pp_out_t out, *o = &out;
    pp_status_t st = out_open(o, path, "the SVG chart");
    if (st == PP_OK) {
        svg_geom_t g = svg_geometry(plan, tl);
        svg_header(o, &g, plan, tl, &rep, title);
        for (int d = 0; d < plan->n_devices; d++)
            svg_row(o, &g, plan, tl, &rep, critical, d);
        svg_axis(o, &g);
        svg_legend(o, &g);
        st = out_close(o);
    }
    free(critical);
    report_free(&rep);
    return st;
}
