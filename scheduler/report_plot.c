/*
 * report_plot.c — the bubble of one schedule against the number of micro-batches, as a standalone
 * SVG 1.1 line chart: the closed form as a curve, the measured (or simulated) runs as filled
 * points, the simulator's figure for the same runs as open points. The x axis is log2(m), so
 * m = 4, 8, 16, 32 sit evenly; the y axis is the bubble in percent (idle / makespan).
 * `ppsched compare --svg DIR` writes one per schedule when a sweep gives it two or more m.
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <string.h>

enum { PLOT_W = 720, PLOT_H = 440, PLOT_L = 70, PLOT_R = 30, PLOT_T = 60, PLOT_B = 70 };

static void xml_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
}

pp_status_t report_write_bubble_chart(const char *path, const char *title, pp_sched_kind_t kind,
                                      int p, int v, int n, const int *m, const double *measured,
                                      const double *simulated, const char *measured_label)
{
    if (n < 1) PP_FAIL(PP_ERR_INTERNAL, "report_write_bubble_chart: no points");
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return PP_ERR_IO;
    }
    int m_lo = m[0], m_hi = m[0];
    double y_hi = 0.0;
    for (int i = 0; i < n; i++) {
        if (m[i] < m_lo) m_lo = m[i];
        if (m[i] > m_hi) m_hi = m[i];
        if (isfinite(measured[i]) && measured[i] > y_hi) y_hi = measured[i];
        if (isfinite(simulated[i]) && simulated[i] > y_hi) y_hi = simulated[i];
    }
    double th_lo = sched_kind_bubble(kind, p, m_lo, v);
    if (isfinite(th_lo) && th_lo > y_hi) y_hi = th_lo;
    y_hi = ceil(y_hi * 100.0 / 10.0) * 10.0 / 100.0; /* round up to 10 % */
    if (y_hi <= 0.0) y_hi = 0.1;
    double x_lo = log2((double)m_lo), x_hi = log2((double)m_hi);
    if (x_hi - x_lo < 1e-9) {
        x_lo -= 1.0;
        x_hi += 1.0;
    }
    const double pw = PLOT_W - PLOT_L - PLOT_R, ph = PLOT_H - PLOT_T - PLOT_B;
#define PX(mm) (PLOT_L + (log2(mm) - x_lo) / (x_hi - x_lo) * pw)
#define PY(b)  (PLOT_T + ph - (b) / y_hi * ph)

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
            PLOT_W, PLOT_H, PLOT_W, PLOT_H);
    fprintf(f, "<text x=\"%d\" y=\"26\" font-size=\"16\" font-weight=\"bold\">", PLOT_L);
    xml_escape(f, title);
    fprintf(f,
            "</text>\n<text x=\"%d\" y=\"44\" fill=\"#555\">bubble (idle / makespan) against "
            "micro-batches, p = %d, v = %d</text>\n",
            PLOT_L, p, v);
    /* axes, grid and ticks */
    for (int k = 0; k <= 5; k++) {
        double b = y_hi * k / 5.0, y = PY(b);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n",
                PLOT_L, y, PLOT_L + pw, y, PLOT_L - 8, y + 4, b * 100.0);
    }
    for (int e = (int)floor(x_lo); e <= (int)ceil(x_hi); e++) {
        double mm = pow(2.0, e);
        if (log2(mm) < x_lo - 1e-9 || log2(mm) > x_hi + 1e-9) continue;
        double x = PX(mm);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n",
                x, PLOT_T, x, PLOT_T + ph, x, PLOT_T + ph + 18, mm);
    }
    fprintf(
        f,
        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n"
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.1f\" stroke=\"#333\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">micro-batches m (log scale)</text>\n",
        PLOT_L, PLOT_T + ph, PLOT_L + pw, PLOT_T + ph, PLOT_L, PLOT_T, PLOT_L, PLOT_T + ph,
        PLOT_L + pw / 2, PLOT_T + ph + 40);
    /* the closed form */
    if (isfinite(th_lo)) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"#888\" stroke-width=\"2\" "
                   "stroke-dasharray=\"6 4\" points=\"");
        for (int k = 0; k <= 100; k++) {
            double mm = pow(2.0, x_lo + (x_hi - x_lo) * k / 100.0);
            fprintf(f, "%.1f,%.1f ", PX(mm), PY(sched_kind_bubble(kind, p, mm, v)));
        }
        fprintf(f, "\"/>\n");
    }
    /* simulated (open) and measured (filled) points, each series joined by a line */
    const char *colour[2] = {"#54a24b", "#4c78a8"};
    const double *series[2] = {simulated, measured};
    for (int s = 0; s < 2; s++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                colour[s]);
        for (int i = 0; i < n; i++)
            if (isfinite(series[s][i])) fprintf(f, "%.1f,%.1f ", PX(m[i]), PY(series[s][i]));
        fprintf(f, "\"/>\n");
        for (int i = 0; i < n; i++) {
            if (!isfinite(series[s][i])) continue;
            fprintf(
                f,
                "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"%s\" "
                "stroke-width=\"2\"><title>m = %d: %.1f%%</title></circle>\n",
                s ? "measured" : "simulated", PX(m[i]), PY(series[s][i]), s ? colour[s] : "white",
                colour[s], m[i], series[s][i] * 100.0);
        }
    }
    /* legend */
    double ly = PLOT_H - 18;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#888\" stroke-width=\"2\" "
            "stroke-dasharray=\"6 4\"/><text x=\"%d\" y=\"%.1f\">closed form</text>\n",
            PLOT_L, ly, PLOT_L + 30, ly, PLOT_L + 36, ly + 4);
    fprintf(f, "<circle cx=\"%d\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/><text x=\"%d\" y=\"%.1f\">",
            PLOT_L + 160, ly, colour[1], PLOT_L + 170, ly + 4);
    xml_escape(f, measured_label);
    fprintf(f, "</text>\n");
    int any_sim = 0;
    for (int i = 0; i < n; i++)
        any_sim |= isfinite(simulated[i]);
    if (any_sim)
        fprintf(
            f,
            "<circle cx=\"%d\" cy=\"%.1f\" r=\"5\" fill=\"white\" stroke=\"%s\" "
            "stroke-width=\"2\"/><text x=\"%d\" y=\"%.1f\">simulated (measured op costs)</text>\n",
            PLOT_L + 290, ly, colour[0], PLOT_L + 300, ly + 4);
    fprintf(f, "</svg>\n");
#undef PX
#undef PY
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return PP_ERR_IO;
    }
    return PP_OK;
}
