/*
 * report_plot.c — the bubble of one schedule against the number of micro-batches, as a standalone
 * SVG 1.1 chart: the closed form as a curve through every m the kind accepts between the smallest
 * and the largest run (at most PLOT_SAMPLES of them, spread evenly on the axis), the measured (or
 * simulated) runs as filled markers, the simulator's figure for the same runs as open markers.
 * The runs are markers only: a sweep samples a few m, and a straight line between two of them
 * beside the curved closed form would draw a shape nobody measured. The x axis is log2(m), ticks
 * at powers of two; the y axis is the bubble in percent (idle / makespan), ticks at 1, 2 or 5
 * times a power of ten. Coordinates are finite: points that are not (NAN, m < 1) are left out.
 * `ppsched compare --svg DIR` writes one per schedule when a sweep gives it two or more m.
 */
#include "report.h"
#include "report_io.h"
#include "schedule/kinds.h"

#include <math.h>
#include <string.h>

enum { PLOT_W = 720, PLOT_H = 440, PLOT_L = 70, PLOT_R = 30, PLOT_T = 60, PLOT_B = 70 };
enum { PLOT_SAMPLES = 400, PLOT_MAX_XTICKS = 9 };

/* The axes' ranges: x is log2(m), y the bubble; y ticks every y_step. */
typedef struct plot {
    double x_lo, x_hi, y_hi, y_step, pw, ph;
    int m_lo, m_hi;
} plot_t;

static double px(const plot_t *g, double mm)
{
    return PLOT_L + (log2(mm) - g->x_lo) / (g->x_hi - g->x_lo) * g->pw;
}

static double py(const plot_t *g, double b)
{
    return PLOT_T + g->ph - b / g->y_hi * g->ph;
}

/* The round number (1, 2 or 5 times a power of ten) nearest `raw` in ratio. */
static double round_step(double raw)
{
    if (!(raw > 0.0) || !isfinite(raw)) return 1.0;
    double mag = pow(10.0, floor(log10(raw))), best = mag, best_err = INFINITY;
    static const double f[] = {1.0, 2.0, 5.0, 10.0};
    for (int i = 0; i < 4; i++) {
        double err = fabs(log(f[i] * mag / raw));
        if (err < best_err) best = f[i] * mag, best_err = err;
    }
    return best;
}

/* Ranges covering every point and the closed form of `kind` at the smallest m (its largest
 * value); y rounded up to a tick. */
static plot_t plot_ranges(int n, const int *m, const double *measured, const double *simulated,
                          pp_sched_kind_t kind, int p, int v)
{
    plot_t g = {0};
    double top = 0.0;
    for (int i = 0; i < n; i++) {
        if (m[i] < 1) continue;
        if (g.m_lo == 0 || m[i] < g.m_lo) g.m_lo = m[i];
        if (m[i] > g.m_hi) g.m_hi = m[i];
        if (isfinite(measured[i]) && measured[i] > top) top = measured[i];
        if (isfinite(simulated[i]) && simulated[i] > top) top = simulated[i];
    }
    if (g.m_lo == 0) g.m_lo = g.m_hi = 1;
    double th_lo = sched_kind_bubble(kind, p, g.m_lo, v);
    if (isfinite(th_lo) && th_lo > top) top = th_lo;
    if (!(top > 0.0)) top = 0.1;
    if (top > 1.0) top = 1.0;
    top *= 1.04; /* the highest marker clear of the frame */
    g.y_step = round_step(top / 5.0);
    g.y_hi = ceil(top / g.y_step - 1e-9) * g.y_step;
    g.x_lo = log2((double)g.m_lo);
    g.x_hi = log2((double)g.m_hi);
    double pad = g.x_hi - g.x_lo < 1e-9 ? 1.0 : 0.04 * (g.x_hi - g.x_lo); /* markers off the axis */
    g.x_lo -= pad;
    g.x_hi += pad;
    g.pw = PLOT_W - PLOT_L - PLOT_R;
    g.ph = PLOT_H - PLOT_T - PLOT_B;
    return g;
}

/* Grid lines and labels of both axes. */
static void plot_ticks(pp_out_t *o, const plot_t *g)
{
    int decimals = g->y_step * 100.0 >= 1.0 ? 0 : (int)ceil(-log10(g->y_step * 100.0) - 1e-9);
    for (int k = 0; k * g->y_step <= g->y_hi * (1.0 + 1e-9); k++) {
        double b = k * g->y_step, y = py(g, b);
        out_printf(o,
                   "<line class=\"ytick\" x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#e5e5e5\"/>\n"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.*f%%</text>\n",
                   PLOT_L, y, PLOT_L + g->pw, y, PLOT_L - 8, y + 4, decimals, b * 100.0);
    }
    int e_lo = (int)ceil(g->x_lo - 1e-9), e_hi = (int)floor(g->x_hi + 1e-9);
    int every = (e_hi - e_lo) / PLOT_MAX_XTICKS + 1; /* labels that do not crowd */
    for (int e = e_lo; e <= e_hi; e += every) {
        double mm = pow(2.0, e), x = px(g, mm);
        out_printf(o,
                   "<line class=\"xtick\" x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" "
                   "stroke=\"#e5e5e5\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                   x, PLOT_T, x, PLOT_T + g->ph, x, PLOT_T + g->ph + 18, mm);
    }
}

/* Prolog, title, axes, grid and ticks. */
static void plot_frame(pp_out_t *o, const plot_t *g, const char *title, int p, int v)
{
    const double pw = g->pw, ph = g->ph;
    char subtitle[96];
    snprintf(subtitle, sizeof subtitle,
             "bubble (idle / makespan) against micro-batches, p = %d, v = %d", p, v);
    out_svg_chart_head(o, PLOT_W, PLOT_H, PLOT_L, title, subtitle);
    plot_ticks(o, g);
    out_printf(
        o,
        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n"
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">micro-batches m (log scale)</text>\n",
        PLOT_L, PLOT_T + ph, PLOT_L + pw, PLOT_T + ph, PLOT_L, PLOT_T, PLOT_L, PLOT_T + ph,
        PLOT_L + pw / 2, PLOT_T + ph + 40);
}

/* The first m from mm on, up to m_hi, that the kind accepts on p devices with v chunks; m_hi + 1
 * when none. */
static long plot_next_m(pp_sched_kind_t kind, int p, int v, long mm, long m_hi)
{
    char msg[256];
    while (mm <= m_hi && sched_kind_check(kind, p, (int)mm, v, msg, sizeof msg) != PP_KIND_OK)
        mm++;
    return mm;
}

/* The closed form through every m in [m_lo, m_hi] the kind accepts, or through PLOT_SAMPLES of
 * them spread evenly on the log axis when there are more. */
static void plot_closed_form(pp_out_t *o, const plot_t *g, pp_sched_kind_t kind, int p, int v)
{
    long accepted = 0;
    for (long mm = plot_next_m(kind, p, v, g->m_lo, g->m_hi);
         mm <= g->m_hi && accepted <= PLOT_SAMPLES; mm = plot_next_m(kind, p, v, mm + 1, g->m_hi))
        accepted++;
    out_printf(o, "<polyline class=\"closed-form\" fill=\"none\" stroke=\"#888\" "
                  "stroke-width=\"2\" stroke-dasharray=\"6 4\" points=\"");
    long last = g->m_lo - 1;
    const double l_lo = log2(g->m_lo), l_hi = log2(g->m_hi);
    for (int i = 0; i < PLOT_SAMPLES; i++) {
        long want = last + 1;
        if (accepted > PLOT_SAMPLES) { /* the i-th even step, or the next m past the last */
            long even = (long)ceil(pow(2.0, l_lo + (l_hi - l_lo) * i / (PLOT_SAMPLES - 1)) - 1e-6);
            if (even > want) want = even < g->m_hi ? even : g->m_hi;
        }
        long mm = plot_next_m(kind, p, v, want, g->m_hi);
        if (mm > g->m_hi) break;
        double b = sched_kind_bubble(kind, p, (double)mm, v);
        if (isfinite(b)) out_printf(o, "%.1f,%.1f ", px(g, (double)mm), py(g, b));
        last = mm;
    }
    out_printf(o, "\"/>\n");
}

static const char *const series_colour[2] = {"#54a24b", "#4c78a8"};

/* Measured (filled) markers, then simulated (open) ones over them, so both show where they meet. */
static void plot_series(pp_out_t *o, const plot_t *g, int n, const int *m, const double *measured,
                        const double *simulated)
{
    const double *series[2] = {simulated, measured};
    for (int s = 1; s >= 0; s--)
        for (int i = 0; i < n; i++) {
            if (!isfinite(series[s][i]) || m[i] < 1) continue;
            out_printf(
                o,
                "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"%s\" "
                "stroke-width=\"2\"><title>m = %d: %.1f%%</title></circle>\n",
                s ? "measured" : "simulated", px(g, m[i]), py(g, series[s][i]),
                s ? series_colour[s] : "none", series_colour[s], m[i], series[s][i] * 100.0);
        }
}

static void plot_legend(pp_out_t *o, int n, const double *simulated, const char *measured_label)
{
    double ly = PLOT_H - 18;
    out_printf(o,
               "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#888\" "
               "stroke-width=\"2\" stroke-dasharray=\"6 4\"/><text x=\"%d\" y=\"%.1f\">closed "
               "form</text>\n",
               PLOT_L, ly, PLOT_L + 30, ly, PLOT_L + 36, ly + 4);
    out_printf(o, "<circle cx=\"%d\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/><text x=\"%d\" y=\"%.1f\">",
               PLOT_L + 160, ly, series_colour[1], PLOT_L + 170, ly + 4);
    out_xml(o, measured_label);
    out_printf(o, "</text>\n");
    int any_sim = 0;
    for (int i = 0; i < n; i++)
        any_sim |= isfinite(simulated[i]);
    if (any_sim)
        out_printf(
            o,
            "<circle cx=\"%d\" cy=\"%.1f\" r=\"5\" fill=\"white\" stroke=\"%s\" "
            "stroke-width=\"2\"/><text x=\"%d\" y=\"%.1f\">simulated (measured op costs)</text>\n",
            PLOT_L + 290, ly, series_colour[0], PLOT_L + 300, ly + 4);
}

pp_status_t report_write_bubble_chart(const char *path, const char *title, pp_sched_kind_t kind,
                                      int p, int v, int n, const int *m, const double *measured,
                                      const double *simulated, const char *measured_label)
{
    if (n < 1) PP_FAIL(PP_ERR_INTERNAL, "report_write_bubble_chart: no points");
    pp_out_t out, *o = &out;
    PP_CHECK(out_open(o, path, "the bubble chart"));
    plot_t g = plot_ranges(n, m, measured, simulated, kind, p, v);
    plot_frame(o, &g, title, p, v);
    if (isfinite(sched_kind_bubble(kind, p, g.m_lo, v))) plot_closed_form(o, &g, kind, p, v);
    plot_series(o, &g, n, m, measured, simulated);
    plot_legend(o, n, simulated, measured_label);
    out_printf(o, "</svg>\n");
    return out_close(o);
}
