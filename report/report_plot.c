/*
 * report_plot.c — the bubble of one schedule against the number of micro-batches, as a standalone
 * SVG 1.1 line chart: the closed form as a curve, the measured (or simulated) runs as filled
 * points, the simulator's figure for the same runs as open points. The x axis is log2(m), so
 * m = 4, 8, 16, 32 sit evenly; the y axis is the bubble in percent (idle / makespan).
 * `ppsched compare --svg DIR` writes one per schedule when a sweep gives it two or more m.
 */
#include "report.h"
#include "report_io.h"
#include "schedule/kinds.h"

#include <math.h>
#include <string.h>

enum { PLOT_W = 720, PLOT_H = 440, PLOT_L = 70, PLOT_R = 30, PLOT_T = 60, PLOT_B = 70 };

/* The axes' ranges: x is log2(m), y the bubble. */
typedef struct plot {
    double x_lo, x_hi, y_hi, pw, ph;
} plot_t;

static double px(const plot_t *g, double mm)
{
    return PLOT_L + (log2(mm) - g->x_lo) / (g->x_hi - g->x_lo) * g->pw;
}

static double py(const plot_t *g, double b)
{
    return PLOT_T + g->ph - b / g->y_hi * g->ph;
}

/* Ranges covering every point and the closed form at the smallest m. */
static plot_t plot_ranges(int n, const int *m, const double *measured, const double *simulated,
                          double th_lo)
{
    plot_t g;
    int m_lo = m[0], m_hi = m[0];
    g.y_hi = 0.0;
    for (int i = 0; i < n; i++) {
        if (m[i] < m_lo) m_lo = m[i];
        if (m[i] > m_hi) m_hi = m[i];
        if (isfinite(measured[i]) && measured[i] > g.y_hi) g.y_hi = measured[i];
        if (isfinite(simulated[i]) && simulated[i] > g.y_hi) g.y_hi = simulated[i];
    }
    if (isfinite(th_lo) && th_lo > g.y_hi) g.y_hi = th_lo;
    g.y_hi = ceil(g.y_hi * 100.0 / 10.0) * 10.0 / 100.0; /* round up to 10 % */
    if (g.y_hi <= 0.0) g.y_hi = 0.1;
    g.x_lo = log2((double)m_lo);
    g.x_hi = log2((double)m_hi);
    if (g.x_hi - g.x_lo < 1e-9) {
        g.x_lo -= 1.0;
        g.x_hi += 1.0;
    }
    g.pw = PLOT_W - PLOT_L - PLOT_R;
    g.ph = PLOT_H - PLOT_T - PLOT_B;
    return g;
}

/* Prolog, title, axes, grid and ticks. */
static void plot_frame(pp_out_t *o, const plot_t *g, const char *title, int p, int v)
{
    const double pw = g->pw, ph = g->ph;
    char subtitle[96];
    snprintf(subtitle, sizeof subtitle,
             "bubble (idle / makespan) against micro-batches, p = %d, v = %d", p, v);
    out_svg_chart_head(o, PLOT_W, PLOT_H, PLOT_L, title, subtitle);
    for (int k = 0; k <= 5; k++) {
        double b = g->y_hi * k / 5.0, y = py(g, b);
        out_printf(o,
                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n",
                   PLOT_L, y, PLOT_L + pw, y, PLOT_L - 8, y + 4, b * 100.0);
    }
    for (int e = (int)floor(g->x_lo); e <= (int)ceil(g->x_hi); e++) {
        double mm = pow(2.0, e);
        if (log2(mm) < g->x_lo - 1e-9 || log2(mm) > g->x_hi + 1e-9) continue;
        double x = px(g, mm);
        out_printf(o,
                   "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                   x, PLOT_T, x, PLOT_T + ph, x, PLOT_T + ph + 18, mm);
    }
    out_printf(
        o,
        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n"
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">micro-batches m (log scale)</text>\n",
        PLOT_L, PLOT_T + ph, PLOT_L + pw, PLOT_T + ph, PLOT_L, PLOT_T, PLOT_L, PLOT_T + ph,
        PLOT_L + pw / 2, PLOT_T + ph + 40);
}

static const char *const series_colour[2] = {"#54a24b", "#4c78a8"};

/* Simulated (open) and measured (filled) points, each series joined by a line. */
static void plot_series(pp_out_t *o, const plot_t *g, int n, const int *m, const double *measured,
                        const double *simulated)
{
    const double *series[2] = {simulated, measured};
    for (int s = 0; s < 2; s++) {
        out_printf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                   series_colour[s]);
        for (int i = 0; i < n; i++)
            if (isfinite(series[s][i]))
                out_printf(o, "%.1f,%.1f ", px(g, m[i]), py(g, series[s][i]));
        out_printf(o, "\"/>\n");
        for (int i = 0; i < n; i++) {
            if (!isfinite(series[s][i])) continue;
            out_printf(
                o,
                "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"%s\" "
                "stroke-width=\"2\"><title>m = %d: %.1f%%</title></circle>\n",
                s ? "measured" : "simulated", px(g, m[i]), py(g, series[s][i]),
                s ? series_colour[s] : "white", series_colour[s], m[i], series[s][i] * 100.0);
        }
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
    int m_lo = m[0];
    for (int i = 0; i < n; i++)
        if (m[i] < m_lo) m_lo = m[i];
    double th_lo = sched_kind_bubble(kind, p, m_lo, v);
    plot_t g = plot_ranges(n, m, measured, simulated, th_lo);
    plot_frame(o, &g, title, p, v);
    if (isfinite(th_lo)) { /* the closed form, as a smooth curve */
        out_printf(o, "<polyline fill=\"none\" stroke=\"#888\" stroke-width=\"2\" "
                      "stroke-dasharray=\"6 4\" points=\"");
        for (int k = 0; k <= 100; k++) {
            double mm = pow(2.0, g.x_lo + (g.x_hi - g.x_lo) * k / 100.0);
            out_printf(o, "%.1f,%.1f ", px(&g, mm), py(&g, sched_kind_bubble(kind, p, mm, v)));
        }
        out_printf(o, "\"/>\n");
    }
    plot_series(o, &g, n, m, measured, simulated);
    plot_legend(o, n, simulated, measured_label);
    out_printf(o, "</svg>\n");
    return out_close(o);
}
