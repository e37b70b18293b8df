/*
 * report_svg.c — a timeline as a standalone SVG 1.1 Gantt chart: a title, one row per device
 * ("dev d") with one box per compute op (F blue, B green, I orange, W purple; on a device holding
 * several stages, each chunk a lighter shade of its kind's colour in stage order, so a V's two
 * chunks read apart; the micro-batch number centred in the box, in a smaller font where the box is
 * narrow; the action and its times as a hover title), the device's transfers as thin grey bars
 * under its row, its busy time and bubble at the row's right, a time axis in ms and a legend. Idle
 * stretches are shaded in the row's lane by reason (explain.h; one <rect class="gap REASON"> each,
 * under the boxes); ops on the critical path get the class "critical" and a dark outline.
 *
 * Size: the plot is 24 px an op of the longest device program (920 px at least) and the whole
 * chart at most 2400 px wide, time scaled to fit. A box under 8 px barely holds a one-digit label,
 * and thousands of them make a file of megabytes that shows nothing more, so a run of such
 * compute ops on a device (each starting less than 8 px after the run's end) is drawn as one
 * <rect class="ops K cN"> per kind and chunk, stacked, each as tall as its share of the run's
 * time (the row's empty part is the idle share), with a dark line above where the critical path
 * runs through it; the idle stretches and the transfers inside such a run are merged likewise, one
 * shading per reason and one bar per lane. 1F1B at m = 512 then takes some 15 kB. Every
 * other compute op gets exactly one <rect class="op ...">.
 *
 * Ticks are 1, 2 or 5 times a power of ten ms, about 150 px apart (<line class="tick">).
 * Coordinates are finite whatever the times (an infinite end is drawn at the plot's edge). Text is
 * XML-escaped.
 */
#include "report.h"
#include "report_io.h"
#include "schedule/kinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    SVG_LEFT = 70,        /* room for the row labels */
    SVG_RIGHT = 210,      /* room for busy / bubble at the row's right */
    SVG_TOP = 64,         /* title and subtitle */
    SVG_ROW_H = 26,       /* height of a device's compute row */
    SVG_ROW_GAP = 14,     /* between rows; the transfer bars sit here */
    SVG_MIN_PLOT = 920,   /* plot width when there are few ops */
    SVG_PX_PER_OP = 24,   /* plot width per op of the longest device program: two digits fit */
    SVG_MAX_WIDTH = 2400, /* the whole chart, at most */
    SVG_TICK_PX = 150,    /* wanted distance between time ticks */
    SVG_KINDS = 5,        /* F, B, I, W and any other compute kind */
};

#define SVG_MERGE_PX 8.0       /* narrower than this (px): no room for a label, drawn merged */
#define SVG_JOIN_PX  8.0       /* merged runs bridge spaces narrower than this (px) */
#define SVG_FONT_MAX 11.0      /* micro-batch label font size (px) where the box has room */
#define SVG_FONT_MIN 7.0       /* the smallest label drawn */
#define SVG_DIGIT_EM 0.64      /* a digit's advance in em (DejaVu Sans 0.636, Helvetica 0.556) */
#define SVG_CRITICAL "#111111" /* outline of the critical path's ops */

/* The compute kinds, in enum order, with their colour and legend text; the last row for any
 * other compute kind. */
static const struct {
    unsigned rgb;
    const char *label;
} svg_kinds[SVG_KINDS] = {
    {0x4c78a8, "F forward"},     {0x54a24b, "B backward"}, {0xf58518, "I input grad"},
    {0x9d6bc4, "W weight grad"}, {0x9a9a9a, "other"},
};

static int kind_index(pp_action_kind_t k)
{
    return (int)k >= 0 && (int)k < SVG_KINDS - 1 ? (int)k : SVG_KINDS - 1;
}

/* Chunk c of v: the kind's colour for chunk 0, mixed toward white for later chunks (50 % for the
 * last), so the chunks of a device read apart and the kinds stay recognisable. */
static unsigned chunk_shade(unsigned rgb, int c, int v)
{
    if (v <= 1 || c <= 0) return rgb;
    double t = 0.5 * (c < v ? c : v - 1) / (v - 1);
    unsigned out = 0;
    for (int sh = 16; sh >= 0; sh -= 8) {
        double ch = (rgb >> sh) & 0xff;
        out |= (unsigned)lround(ch + (255.0 - ch) * t) << sh;
    }
    return out;
}

/* Whether white text on `rgb` would be hard to read (relative luminance above 0.5). */
static int rgb_light(unsigned rgb)
{
    double l = 0.2126 * ((rgb >> 16) & 0xff) + 0.7152 * ((rgb >> 8) & 0xff) + 0.0722 * (rgb & 0xff);
    return l > 0.5 * 255.0;
}

/* A round tick step: 1, 2 or 5 times a power of ten ms whose distance on a plot plot_w px wide
 * showing `span` ms is nearest SVG_TICK_PX (in ratio), so ticks fall between 95 and 238 px
 * apart. The span itself where that has no answer (a span so small it underflows). */
static double tick_step(double span, int plot_w)
{
    double want = span / plot_w * SVG_TICK_PX;
    if (!(want > 0.0) || !isfinite(want)) return span > 0.0 && isfinite(span) ? span : 1.0;
    double mag = pow(10.0, floor(log10(want))), best = want, best_err = INFINITY;
    static const double f[] = {0.5, 1.0, 2.0, 5.0, 10.0};
    for (int i = 0; i < 5; i++) {
        double err = fabs(log(f[i] * mag / want));
        if (err < best_err) best = f[i] * mag, best_err = err;
    }
    return best > 0.0 && isfinite(best) ? best : want;
}

/* ---- geometry -------------------------------------------------------------------------------- */

/* The chart's geometry: time origin, span, plot width from the longest device program. */
typedef struct svg_geom {
    double t0, span;
    int plot_w, axis_y, width, height;
} svg_geom_t;

/* The time span drawn: the makespan, or (when an op's time is not finite) the last finite end. */
static double svg_span(const pp_timeline_t *tl, double t0)
{
    double span = timeline_makespan(tl);
    if (isfinite(span) && span >= 0.0) return span;
    span = 0.0;
    for (int k = 0; k < tl->n_ops; k++)
        if (isfinite(tl->t[k].end_ms) && tl->t[k].end_ms - t0 > span) span = tl->t[k].end_ms - t0;
    return span;
}

static svg_geom_t svg_geometry(const pp_plan_t *plan, const pp_timeline_t *tl)
{
    svg_geom_t g;
    g.t0 = 0.0;
    for (int k = 0, first = 1; k < plan->n_ops; k++)
        if (isfinite(tl->t[k].start_ms) && (first || tl->t[k].start_ms < g.t0))
            g.t0 = tl->t[k].start_ms, first = 0;
    g.span = svg_span(tl, g.t0);
    int longest = 0;
    for (int d = 0; d < plan->n_devices; d++) {
        int n = 0;
        for (int k = 0; k < plan->n_ops; k++)
            if (plan->ops[k].device == d && pp_role_row(plan->ops[k].role)->computes) n++;
        if (n > longest) longest = n;
    }
    const int max_plot = SVG_MAX_WIDTH - SVG_LEFT - SVG_RIGHT;
    g.plot_w = longest > max_plot / SVG_PX_PER_OP ? max_plot : longest * SVG_PX_PER_OP;
    if (g.plot_w < SVG_MIN_PLOT) g.plot_w = SVG_MIN_PLOT;
    g.axis_y = SVG_TOP + plan->n_devices * (SVG_ROW_H + SVG_ROW_GAP);
    g.width = SVG_LEFT + g.plot_w + SVG_RIGHT;
    g.height = g.axis_y + 102;
    return g;
}

/* Time t (ms) as x on the plot, inside it whatever t is: the share of the span before t, so a span
 * too small or too large for a px-per-ms scale still draws. */
static double svg_x(const svg_geom_t *g, double t)
{
    double f = (t - g->t0) / g->span;
    if (!(f > 0.0)) return SVG_LEFT; /* also NaN, and a span of 0 */
    return SVG_LEFT + (f < 1.0 ? f : 1.0) * g->plot_w;
}

/* ---- the drawing state ----------------------------------------------------------------------- */

typedef struct svg_item {
    double start; /* ms, for sorting */
    int op;
} svg_item_t;

/* Ops (or idle stretches) drawn as one: how many, the first, the merged compute run they lie in,
 * how many are on the critical path, their extent in px and ms, and (idle stretches) their ms
 * added up. A compute run keeps its time and count per kind and chunk in svg_t. */
typedef struct svg_run {
    int n, op, in, n_critical;
    double x0, x1, t0, t1;
    double sum;
} svg_run_t;

typedef struct svg {
    pp_out_t *o;
    const pp_plan_t *plan;
    const pp_timeline_t *tl;
    const pp_report_t *rep;
    unsigned char *critical; /* [n_ops]: on the critical path */
    int *chunk;              /* [n_stages]: the stage's index among its device's stages */
    svg_item_t *items;       /* [n_ops]: a device's ops by start time */
    double *busy;            /* [SVG_KINDS * chunks]: a compute run's ms per kind, chunk */
    int *count;              /* [SVG_KINDS * chunks]: its ops per kind, chunk */
    int chunks;              /* most stages on one device (>= 1) */
    double *merged;          /* [2 * n_ops]: x0, x1 of the device's merged compute runs */
    int n_merged;            /* how many */
    int n_merged_all;        /* merged compute runs on all devices (svg_init counts them) */
    svg_geom_t g;
} svg_t;

static int svg_chunk(const svg_t *s, int stage)
{
    return stage >= 0 && stage < s->plan->n_stages ? s->chunk[stage] : 0;
}

static unsigned op_rgb(const svg_t *s, const pp_op_t *op)
{
    return chunk_shade(svg_kinds[kind_index(op->kind)].rgb, svg_chunk(s, op->stage), s->chunks);
}

static int item_cmp(const void *a, const void *b)
{
    const svg_item_t *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->op - y->op;
}

/* Device d's ops (compute ones when `compute`, else the others) into s->items by start; returns
 * how many. */
static int svg_device_ops(svg_t *s, int d, int compute)
{
    int n = 0;
    for (int k = 0; k < s->plan->n_ops; k++) {
        const pp_op_t *op = &s->plan->ops[k];
        if (op->device != d || pp_role_row(op->role)->computes != compute) continue;
        double t = s->tl->t[k].start_ms;
        s->items[n++] = (svg_item_t){isfinite(t) ? t : INFINITY, k};
    }
    qsort(s->items, (size_t)n, sizeof *s->items, item_cmp);
    return n;
}

static void svg_ops(svg_t *s, int d, int y, int draw); /* below, with the compute ops */

/* The drawing state of `plan` run as `tl`, whose report is `rep`; svg_free it even on failure. */
static pp_status_t svg_init(svg_t *s, const pp_plan_t *plan, const pp_timeline_t *tl,
                            const pp_report_t *rep)
{
    memset(s, 0, sizeof *s);
    s->plan = plan;
    s->tl = tl;
    s->rep = rep;
    s->chunks = 1;
    s->critical = calloc((size_t)(plan->n_ops > 0 ? plan->n_ops : 1), 1);
    s->chunk = calloc((size_t)(plan->n_stages > 0 ? plan->n_stages : 1), sizeof *s->chunk);
    s->items = calloc((size_t)(plan->n_ops > 0 ? plan->n_ops : 1), sizeof *s->items);
    s->merged = calloc((size_t)(plan->n_ops > 0 ? 2 * plan->n_ops : 2), sizeof *s->merged);
    if (!s->critical || !s->chunk || !s->items || !s->merged) goto nomem;
    for (int i = 0; i < rep->explain.path.n; i++)
        s->critical[rep->explain.path.links[i].op] = 1;
    for (int st = 0; st < plan->n_stages; st++) {
        int d = plan->stage_device ? plan->stage_device[st] : -1, c = 0;
        for (int q = 0; q < st && d >= 0; q++)
            c += plan->stage_device[q] == d;
        s->chunk[st] = c;
        if (c + 1 > s->chunks) s->chunks = c + 1;
    }
    s->busy = calloc((size_t)(SVG_KINDS * s->chunks), sizeof *s->busy);
    s->count = calloc((size_t)(SVG_KINDS * s->chunks), sizeof *s->count);
    if (!s->busy || !s->count) goto nomem;
    s->g = svg_geometry(plan, tl);
    for (int d = 0; d < plan->n_devices; d++) { /* room in the legend for what it must explain */
        svg_ops(s, d, 0, 0);
        s->n_merged_all += s->n_merged;
    }
    s->g.height += (s->chunks > 1 ? 22 : 0) + (s->n_merged_all > 0 ? 22 : 0);
    return PP_OK;
nomem:
    PP_FAIL(PP_ERR_NOMEM, "out of host memory drawing %d ops", plan->n_ops);
}

static void svg_free(svg_t *s)
{
    free(s->critical);
    free(s->chunk);
    free(s->items);
    free(s->merged);
    free(s->busy);
    free(s->count);
}

/* ---- header ---------------------------------------------------------------------------------- */

/* XML prolog, background, title and the summary line. */
static void svg_header(const svg_t *s, const char *title)
{
    pp_out_t *o = s->o;
    const pp_plan_t *plan = s->plan;
    const int width = s->g.width, height = s->g.height;
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
               pp_plural(plan->n_mb, "micro-batch", "micro-batches"), s->g.span,
               100.0 * (isfinite(s->rep->bubble) ? s->rep->bubble : 0.0),
               s->tl->mode == PP_MODE_MEASURE ? "measured" : "simulated");
}

/* ---- merged runs ----------------------------------------------------------------------------- */

/* The merged compute run of the current device (svg_ops) that holds [x0, x1], or -1. *j moves
 * forward over the runs, which lie in x order, as the callers' items do. */
static int svg_merged_of(const svg_t *s, int *j, double x0, double x1)
{
    while (*j < s->n_merged && s->merged[2 * *j + 1] < x0)
        (*j)++;
    if (*j < s->n_merged && s->merged[2 * *j] <= x0 && x1 <= s->merged[2 * *j + 1]) return *j;
    return -1;
}

/* ---- idle stretches -------------------------------------------------------------------------- */

/* One shaded stretch (r->n merged ones of one reason) over [t0, t1] ms. */
static void svg_gap_rect(const svg_t *s, const svg_run_t *r, pp_idle_reason_t reason, int y)
{
    const pp_idle_reason_info_t *info = &pp_idle_reasons[reason];
    out_printf(s->o,
               "<rect class=\"gap %s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
               "fill=\"%s\" fill-opacity=\"0.45\"><title>",
               info->name, r->x0, y, r->x1 - r->x0, SVG_ROW_H, info->colour);
    if (r->n > 1)
        out_printf(s->o,
                   "%s: %d stretches, %.3f ms in %.3f-%.3f ms (drawn merged, as the ops): "
                   "%s</title></rect>\n",
                   info->name, r->n, r->sum, r->t0 - s->g.t0, r->t1 - s->g.t0, info->label);
    else
        out_printf(s->o, "%s %.3f-%.3f ms: %s</title></rect>\n", info->name, r->t0 - s->g.t0,
                   r->t1 - s->g.t0, info->label);
}

/* Device d's idle stretches, shaded by reason across the lane of its row at y. Those inside one
 * merged compute run are merged too, one shading per reason (where both reasons occur, the two
 * blend). */
static void svg_gaps(const svg_t *s, int d, int y)
{
    const pp_idle_split_t *sp = &s->rep->explain.split;
    svg_run_t run[PP_IDLE_COUNT];
    memset(run, 0, sizeof run);
    int j = 0;
    for (int i = 0; i < sp->n_gaps; i++) {
        const pp_gap_t *x = &sp->gaps[i];
        if (x->device != d || (int)x->reason < 0 || x->reason >= PP_IDLE_COUNT) continue;
        svg_run_t *r = &run[x->reason];
        double x0 = svg_x(&s->g, x->start_ms), x1 = svg_x(&s->g, x->end_ms);
        if (x1 < x0) x1 = x0;
        int in = svg_merged_of(s, &j, x0, x1);
        double ms = isfinite(x->end_ms - x->start_ms) ? x->end_ms - x->start_ms : 0.0;
        if (in >= 0 && r->n > 0 && r->in == in) {
            r->n++, r->t1 = x->end_ms, r->sum += ms;
            if (x1 > r->x1) r->x1 = x1;
            continue;
        }
        if (r->n > 0) svg_gap_rect(s, r, x->reason, y);
        *r = (svg_run_t){1, -1, in, 0, x0, x1, x->start_ms, x->end_ms, ms};
        if (in < 0) { /* outside a merged run: drawn as it is */
            svg_gap_rect(s, r, x->reason, y);
            r->n = 0;
        }
    }
    for (int c = 0; c < PP_IDLE_COUNT; c++)
        if (run[c].n > 0) svg_gap_rect(s, &run[c], (pp_idle_reason_t)c, y);
}

/* ---- compute ops ----------------------------------------------------------------------------- */

/* The micro-batch number centred in a box w px wide at x: 11 px text, smaller (down to 7 px)
 * where the digits need it, none where even that does not fit. */
static void svg_label(const svg_t *s, double x, double w, int y, int mb, int light)
{
    char txt[16];
    int len = snprintf(txt, sizeof txt, "%d", mb);
    double fs = (w - 3.0) / (len * SVG_DIGIT_EM);
    if (fs > SVG_FONT_MAX) fs = SVG_FONT_MAX;
    if (!(fs >= SVG_FONT_MIN)) return;
    out_printf(s->o,
               "<text class=\"mb\" x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" fill=\"%s\" "
               "text-anchor=\"middle\">%s</text>\n",
               x + w / 2, y + SVG_ROW_H / 2 + 0.36 * fs, fs, light ? "#222222" : "#ffffff", txt);
}

/* Compute op k as its own box, with its label right after it. */
static void svg_op(const svg_t *s, int k, int y)
{
    const pp_op_t *op = &s->plan->ops[k];
    const double t0 = s->g.t0;
    double x = svg_x(&s->g, s->tl->t[k].start_ms), w = svg_x(&s->g, s->tl->t[k].end_ms) - x;
    if (w < 0.0) w = 0.0;
    pp_action_t a = {op->kind, op->stage, op->mb, 0};
    char txt[32], chunk[24] = "";
    action_format(&a, txt, sizeof txt);
    int c = svg_chunk(s, op->stage), crit = s->critical[k];
    if (s->chunks > 1) snprintf(chunk, sizeof chunk, " (chunk %d)", c);
    unsigned rgb = op_rgb(s, op);
    out_printf(s->o,
               "<rect class=\"op %s c%d%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
               "fill=\"#%06x\" stroke=\"%s\" stroke-width=\"%s\"><title>%s%s %.3f-%.3f "
               "ms%s</title></rect>\n",
               action_kind_name(op->kind), c, crit ? " critical" : "", x, y, w, SVG_ROW_H, rgb,
               crit ? SVG_CRITICAL : "#ffffff", crit ? "2" : "0.5", txt, chunk,
               s->tl->t[k].start_ms - t0, s->tl->t[k].end_ms - t0,
               crit ? ", on the critical path" : "");
    svg_label(s, x, w, y, op->mb, rgb_light(rgb));
}

static const char *kind_name(int kind)
{
    return kind < SVG_KINDS - 1 ? action_kind_name((pp_action_kind_t)kind) : "other";
}

/* A run of merged compute ops (r->n > 1): one box per kind and chunk, stacked from the top, each
 * as tall as its share of the run's time, so what is left of the row is the idle share. */
static void svg_ops_merged(const svg_t *s, const svg_run_t *r, int y)
{
    double total = 0.0, span = r->t1 - r->t0, top = y;
    for (int i = 0; i < SVG_KINDS * s->chunks; i++)
        total += s->busy[i];
    if (!(span > total)) span = total; /* overlapping ops (two compute streams) fill the row */
    for (int i = 0; i < SVG_KINDS * s->chunks && span > 0.0; i++) {
        if (s->count[i] == 0) continue;
        int kind = i / s->chunks, c = i % s->chunks;
        double h = SVG_ROW_H * s->busy[i] / span;
        out_printf(s->o,
                   "<rect class=\"ops %s c%d\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                   "height=\"%.2f\" fill=\"#%06x\"><title>%d %s ops",
                   kind_name(kind), c, r->x0, top, r->x1 - r->x0, h,
                   chunk_shade(svg_kinds[kind].rgb, c, s->chunks), s->count[i], kind_name(kind));
        if (s->chunks > 1) out_printf(s->o, " of chunk %d", c);
        out_printf(s->o,
                   ", %.3f ms busy in %.3f-%.3f ms (drawn merged: each under %g px)"
                   "</title></rect>\n",
                   s->busy[i], r->t0 - s->g.t0, r->t1 - s->g.t0, SVG_MERGE_PX);
        top += h;
    }
}

/* The critical path through a merged run: a dark line over the row along [x0, x1]. */
static void svg_critical_line(const svg_t *s, const svg_run_t *c, int y)
{
    out_printf(s->o,
               "<rect class=\"ops critical\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"2\" "
               "fill=\"%s\"><title>%d ops on the critical path, %.3f-%.3f ms</title></rect>\n",
               c->x0, y - 3, c->x1 - c->x0, SVG_CRITICAL, c->n, c->t0 - s->g.t0, c->t1 - s->g.t0);
}

/* Close run r (and its critical stretch c): draw it, or (draw == 0) record its extent. */
static void svg_ops_flush(svg_t *s, svg_run_t *r, svg_run_t *c, int y, int draw)
{
    if (draw && r->n == 1) svg_op(s, r->op, y);
    if (draw && r->n > 1) svg_ops_merged(s, r, y);
    if (draw && r->n > 1 && c->n > 0) svg_critical_line(s, c, y);
    if (!draw && r->n > 1) {
        s->merged[2 * s->n_merged] = r->x0;
        s->merged[2 * s->n_merged + 1] = r->x1;
        s->n_merged++;
    }
    r->n = c->n = 0;
}

/* Adds compute op k, over [x0, x1] px, to run r and its critical stretch c. */
static void svg_ops_add(svg_t *s, svg_run_t *r, svg_run_t *c, int k, double x0, double x1, int y,
                        int draw)
{
    const pp_op_t *op = &s->plan->ops[k];
    double start = s->tl->t[k].start_ms, end = s->tl->t[k].end_ms, dur = end - start;
    int key = kind_index(op->kind) * s->chunks + svg_chunk(s, op->stage);
    s->busy[key] += isfinite(dur) && dur > 0.0 ? dur : 0.0;
    s->count[key]++;
    r->n++;
    if (x1 > r->x1) r->x1 = x1;
    if (end > r->t1) r->t1 = end;
    if (!s->critical[k]) return;
    if (c->n > 0 && x0 <= c->x1 + SVG_JOIN_PX) {
        c->n++, c->x1 = x1 > c->x1 ? x1 : c->x1, c->t1 = end;
        return;
    }
    if (draw && c->n > 0) svg_critical_line(s, c, y);
    *c = (svg_run_t){1, k, -1, 1, x0, x1, start, end, 0.0};
}

/* Device d's compute ops by start time: each at least SVG_MERGE_PX wide as its own box, runs of
 * narrower ones (each starting less than SVG_JOIN_PX after the run's end) merged. draw == 0 only
 * records the merged runs' extents in s->merged, for the idle stretches and transfers. */
static void svg_ops(svg_t *s, int d, int y, int draw)
{
    int n = svg_device_ops(s, d, 1);
    svg_run_t r = {0}, c = {0};
    if (!draw) s->n_merged = 0;
    for (int i = 0; i < n; i++) {
        int k = s->items[i].op;
        double x0 = svg_x(&s->g, s->tl->t[k].start_ms), x1 = svg_x(&s->g, s->tl->t[k].end_ms);
        if (x1 < x0) x1 = x0;
        int narrow = x1 - x0 < SVG_MERGE_PX;
        if (!(r.n > 0 && narrow && x0 <= r.x1 + SVG_JOIN_PX)) {
            svg_ops_flush(s, &r, &c, y, draw);
            if (!narrow) {
                if (draw) svg_op(s, k, y);
                continue;
            }
            r = (svg_run_t){0, k, -1, 0, x0, x1, s->tl->t[k].start_ms, s->tl->t[k].end_ms, 0.0};
            memset(s->busy, 0, sizeof *s->busy * (size_t)(SVG_KINDS * s->chunks));
            memset(s->count, 0, sizeof *s->count * (size_t)(SVG_KINDS * s->chunks));
        }
        svg_ops_add(s, &r, &c, k, x0, x1, y, draw);
    }
    svg_ops_flush(s, &r, &c, y, draw);
}

/* ---- transfers ------------------------------------------------------------------------------- */

/* A transfer bar (r->n merged ones) in lane `recv` of the row at y. */
static void svg_comm_bar(const svg_t *s, const svg_run_t *r, int recv, int y)
{
    int bar_y = y + SVG_ROW_H + 2 + (recv ? 4 : 0);
    const char *fill = recv ? "#6f6f6f" : "#a8a8a8";
    if (r->n == 1) {
        const pp_op_t *op = &s->plan->ops[r->op];
        pp_action_t a = {op->kind, op->stage, op->mb, 0};
        char txt[32];
        action_format(&a, txt, sizeof txt);
        out_printf(s->o,
                   "<rect class=\"comm%s\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"3\" "
                   "fill=\"%s\"><title>%s %.3f-%.3f ms</title></rect>\n",
                   r->n_critical ? " critical" : "", r->x0, bar_y, r->x1 - r->x0,
                   r->n_critical ? SVG_CRITICAL : fill, txt, r->t0 - s->g.t0, r->t1 - s->g.t0);
        return;
    }
    out_printf(s->o,
               "<rect class=\"comms\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"3\" "
               "fill=\"%s\"><title>%d %s in %.3f-%.3f ms, %d on the critical path (drawn "
               "merged, as the ops)</title></rect>\n",
               r->x0, bar_y, r->x1 - r->x0, fill, r->n, recv ? "receives" : "sends and copies",
               r->t0 - s->g.t0, r->t1 - s->g.t0, r->n_critical);
}

/* Device d's transfers (and copies) as bars under its row, receives in a lane of their own. Those
 * starting inside one merged compute run are merged too, one bar per lane. */
static void svg_comms(svg_t *s, int d, int y)
{
    int n = svg_device_ops(s, d, 0), j = 0;
    svg_run_t lane[2] = {{0}, {0}};
    for (int i = 0; i < n; i++) {
        int k = s->items[i].op, recv = s->plan->ops[k].role == PP_ROLE_RECV;
        double start = s->tl->t[k].start_ms, end = s->tl->t[k].end_ms;
        if (!(end > start)) continue; /* nothing to see */
        double x0 = svg_x(&s->g, start), x1 = svg_x(&s->g, end);
        svg_run_t *r = &lane[recv];
        int in = svg_merged_of(s, &j, x0, x0);
        if (in >= 0 && r->n > 0 && r->in == in) {
            r->n++, r->n_critical += s->critical[k];
            if (x1 > r->x1) r->x1 = x1;
            if (end > r->t1) r->t1 = end;
            continue;
        }
        if (r->n > 0) svg_comm_bar(s, r, recv, y);
        *r = (svg_run_t){1, k, in, s->critical[k], x0, x1, start, end, 0.0};
        if (in < 0) { /* outside a merged run: drawn as it is */
            svg_comm_bar(s, r, recv, y);
            r->n = 0;
        }
    }
    for (int recv = 0; recv < 2; recv++)
        if (lane[recv].n > 0) svg_comm_bar(s, &lane[recv], recv, y);
}

/* ---- rows, axis, legend ---------------------------------------------------------------------- */

/* Device d's row: label, lane, idle shading, compute boxes, transfer bars, busy/bubble text. */
static void svg_row(svg_t *s, int d)
{
    int y = SVG_TOP + d * (SVG_ROW_H + SVG_ROW_GAP);
    const int plot_w = s->g.plot_w;
    out_printf(s->o, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"end\">dev %d</text>\n",
               SVG_LEFT - 10, y + SVG_ROW_H / 2 + 5, d);
    out_printf(s->o,
               "<rect class=\"lane\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
               "fill=\"#f3f3f3\"/>\n",
               SVG_LEFT, y, plot_w, SVG_ROW_H);
    svg_ops(s, d, y, 0);
    svg_gaps(s, d, y);
    svg_ops(s, d, y, 1);
    svg_comms(s, d, y);
    const pp_device_stats_t *ds = &s->rep->per_device[d];
    out_printf(
        s->o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">busy %.3f ms, bubble %.1f%%</text>\n",
        SVG_LEFT + plot_w + 10, y + SVG_ROW_H / 2 + 4, isfinite(ds->busy_ms) ? ds->busy_ms : 0.0,
        100.0 * (isfinite(ds->bubble) ? ds->bubble : 0.0));
}

/* Time axis: ticks at multiples of a round step, about SVG_TICK_PX apart. */
static void svg_axis(const svg_t *s)
{
    pp_out_t *o = s->o;
    const int axis_y = s->g.axis_y, plot_w = s->g.plot_w;
    const double span = s->g.span;
    out_printf(o,
               "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000000\" "
               "stroke-width=\"1\"/>\n",
               SVG_LEFT, axis_y, SVG_LEFT + plot_w, axis_y);
    double step = tick_step(span, plot_w);
    int n = span > 0.0 && isfinite(span) ? (int)fmin(floor(span / step * (1.0 + 1e-9)), 64.0) : -1;
    for (int i = 0; i <= n; i++) {
        double x = SVG_LEFT + plot_w * (i * step / span);
        out_printf(o,
                   "<line class=\"tick\" x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" "
                   "stroke=\"#000000\" stroke-width=\"1\"/>\n",
                   x, axis_y, x, axis_y + 5);
        out_printf(o,
                   "<text class=\"tick\" x=\"%.2f\" y=\"%d\" font-size=\"11\" "
                   "text-anchor=\"middle\">%g</text>\n",
                   x, axis_y + 18, i * step);
    }
    out_printf(o,
               "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">time (ms)</text>\n",
               SVG_LEFT + plot_w / 2, axis_y + 36);
}

/* Legend entries for the idle reasons and the critical path, from x = lx on the line at ly. */
static void svg_legend_explain(const svg_t *s, int lx, int ly)
{
    pp_out_t *o = s->o;
    int n = s->rep->explain.split.n_reasons > 0 ? s->rep->explain.split.n_reasons : PP_IDLE_OFFLOAD;
    for (int c = 0; c < n; c++) {
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

/* The legend: one swatch per compute kind (split into its chunks' shades when devices hold
 * several stages), the transfer bar, the line of svg_legend_explain, then a line on the shades
 * and one on merged runs where the chart has them (svg_init made room). */
static void svg_legend(const svg_t *s)
{
    pp_out_t *o = s->o;
    const int v = s->chunks, sw = v == 1 ? 14 : (8 * v < 32 ? 8 * v : 32);
    int lx = SVG_LEFT, ly = s->g.axis_y + 52;
    for (int i = 0; i < SVG_KINDS - 1; i++) {
        for (int c = 0; c < v; c++)
            out_printf(o,
                       "<rect class=\"legend\" x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"14\" "
                       "fill=\"#%06x\"/>\n",
                       lx + (double)sw * c / v, ly, (double)sw / v,
                       chunk_shade(svg_kinds[i].rgb, c, v));
        out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">%s</text>\n", lx + sw + 6, ly + 12,
                   svg_kinds[i].label);
        lx += 130 + (sw - 14);
    }
    out_printf(o,
               "<rect class=\"legend\" x=\"%d\" y=\"%d\" width=\"14\" height=\"3\" "
               "fill=\"#a8a8a8\"/>\n",
               lx, ly + 6);
    out_printf(o, "<text x=\"%d\" y=\"%d\" font-size=\"12\">send / recv</text>\n", lx + 20,
               ly + 12);
    svg_legend_explain(s, SVG_LEFT, ly + 22);
    ly += 44;
    if (v > 1) {
        out_printf(o,
                   "<text class=\"legend-chunks\" x=\"%d\" y=\"%d\" font-size=\"12\">each kind's "
                   "shades, darkest first: chunk 0 to %d of a device, its stages in order</text>\n",
                   SVG_LEFT, ly + 12, v - 1);
        ly += 22;
    }
    if (s->n_merged_all > 0)
        out_printf(o,
                   "<text class=\"legend-merged\" x=\"%d\" y=\"%d\" font-size=\"12\">stacked "
                   "boxes: runs of ops under %g px merged, each kind as tall as its share of the "
                   "time; a line above: the critical path</text>\n",
                   SVG_LEFT, ly + 12, SVG_MERGE_PX);
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
    svg_t s;
    pp_out_t out;
    pp_status_t st = svg_init(&s, plan, tl, &rep);
    if (st == PP_OK) st = out_open(&out, path, "the SVG chart");
    if (st == PP_OK) {
        s.o = &out;
        svg_header(&s, title);
        for (int d = 0; d < plan->n_devices; d++)
            svg_row(&s, d);
        svg_axis(&s);
        svg_legend(&s);
        st = out_close(&out);
    }
    svg_free(&s);
    report_free(&rep);
    return st;
}
