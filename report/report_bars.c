/*
 * report_bars.c — every run of a comparison in one SVG 1.1 bar chart: one group of bars per
 * schedule (in the order the runs came), one bar per micro-batch count inside a group (its colour
 * says which m), the run's bubble (idle / makespan) as the bar's height and printed above it, the
 * closed form as a dark tick across the bar where the kind has one. `ppsched compare --svg DIR`
 * writes it as bubble-all.svg when two or more schedules ran.
 */
#include "report.h"
#include "report_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BAR_W = 22, BAR_GAP = 4, GROUP_GAP = 26, CH_L = 60, CH_R = 20, CH_T = 64, CH_H = 300 };
enum { MAX_MS = 8 }; /* distinct micro-batch counts with their own colour */

static const char *const bar_colour[MAX_MS] = {"#4c78a8", "#f58518", "#54a24b", "#b279a2",
                                               "#e45756", "#72b7b2", "#eeca3b", "#9d755d"};

/* The distinct micro-batch counts, ascending (at most MAX_MS), and the groups in order. */
typedef struct bars {
    int n_ms, ms[MAX_MS];
    int n_groups, *group_of; /* [n]: index of the run's group */
    int *first;              /* [n_groups]: first run of each group */
} bars_t;

static pp_status_t bars_layout(bars_t *b, int n, const char *const *group, const int *m)
{
    b->group_of = malloc(sizeof *b->group_of * (size_t)n);
    b->first = malloc(sizeof *b->first * (size_t)n);
    if (!b->group_of || !b->first)
        PP_FAIL(PP_ERR_NOMEM, "out of host memory laying out a chart of %d runs", n);
    for (int i = 0; i < n; i++) {
        int g = 0;
        while (g < b->n_groups && strcmp(group[b->first[g]], group[i]) != 0)
            g++;
        if (g == b->n_groups) b->first[b->n_groups++] = i;
        b->group_of[i] = g;
        int k = 0;
        while (k < b->n_ms && b->ms[k] != m[i])
            k++;
        if (k == b->n_ms && b->n_ms < MAX_MS) b->ms[b->n_ms++] = m[i];
    }
    for (int x = 1; x < b->n_ms; x++) /* insertion sort: a handful of counts */
        for (int y = x; y > 0 && b->ms[y] < b->ms[y - 1]; y--) {
            int t = b->ms[y];
            b->ms[y] = b->ms[y - 1];
            b->ms[y - 1] = t;
        }
    return PP_OK;
}

/* Axes, grid lines every 5 % (or 10 %), the title and the legend of the m colours. */
static void bars_frame(pp_out_t *o, const bars_t *b, const char *title, int width, double y_hi)
{
    int height = CH_T + CH_H + 110;
    out_svg_chart_head(o, width, height, CH_L, title,
                       "bubble (idle / makespan) of each run; dark tick: closed form");
    double step = y_hi > 0.3 ? 0.1 : 0.05;
    for (double v = 0.0; v <= y_hi + 1e-9; v += step) {
        double y = CH_T + CH_H - v / y_hi * CH_H;
        out_printf(o,
                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n",
                   CH_L, y, width - CH_R, y, CH_L - 8, y + 4, v * 100.0);
    }
    out_printf(o, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#333\"/>\n", CH_L,
               CH_T + CH_H, width - CH_R, CH_T + CH_H);
    for (int k = 0; k < b->n_ms; k++)
        out_printf(o,
                   "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\">m = %d</text>\n",
                   CH_L + 90 * k, height - 24, bar_colour[k], CH_L + 90 * k + 18, height - 14,
                   b->ms[k]);
}

/* The chart's width: every group, the legend of the m colours, and the last group's name, which
 * is written slanted down to the right from under its bars, all inside the frame. */
static int bars_width(const bars_t *b, const char *const *group, int group_w)
{
    int width = CH_L + CH_R + GROUP_GAP + b->n_groups * (group_w + GROUP_GAP);
    if (width < CH_L + 90 * b->n_ms + CH_R) width = CH_L + 90 * b->n_ms + CH_R;
    for (int g = 0; g < b->n_groups; g++) {
        /* 11 px text at about 0.62 em a character, at 30 degrees: cos 30 = 0.87 */
        double end = CH_L + GROUP_GAP + g * (group_w + GROUP_GAP) + group_w / 2.0 - 4 +
                     0.87 * 0.62 * 11.0 * (double)strlen(group[b->first[g]]);
        if (end + CH_R > width) width = (int)ceil(end) + CH_R;
    }
    return width < 420 ? 420 : width;
}

/* The whole chart: the frame scaled to the highest bar or tick, the group labels, then a bar per
 * run (and its closed-form tick). */
static void bars_draw(pp_out_t *o, const bars_t *b, const char *title, int n,
                      const char *const *group, const int *m, const double *bubble,
                      const double *theory)
{
    double y_hi = 0.05;
    for (int i = 0; i < n; i++) {
        if (isfinite(bubble[i]) && bubble[i] > y_hi) y_hi = bubble[i];
        if (theory && isfinite(theory[i]) && theory[i] > y_hi) y_hi = theory[i];
    }
    y_hi = ceil(y_hi * 20.0) / 20.0; /* round up to 5 % */
    int group_w = b->n_ms * (BAR_W + BAR_GAP) - BAR_GAP;
    int width = bars_width(b, group, group_w);
    bars_frame(o, b, title, width, y_hi);
    for (int g = 0; g < b->n_groups; g++) {
        int gx = CH_L + GROUP_GAP + g * (group_w + GROUP_GAP);
        out_printf(o, "<text transform=\"translate(%.1f,%d) rotate(30)\" font-size=\"11\">",
                   gx + group_w / 2.0 - 4, CH_T + CH_H + 14);
        out_xml(o, group[b->first[g]]);
        out_puts(o, "</text>\n");
    }
    for (int i = 0; i < n; i++) {
        int k = 0;
        while (k < b->n_ms && b->ms[k] != m[i])
            k++;
        if (k == b->n_ms || !isfinite(bubble[i])) continue; /* beyond the colours: left out */
        double x =
            CH_L + GROUP_GAP + b->group_of[i] * (group_w + GROUP_GAP) + k * (BAR_W + BAR_GAP);
        double h = bubble[i] / y_hi * CH_H, y = CH_T + CH_H - h;
        out_printf(
            o,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\">"
            "<title>m = %d: %.1f%%</title></rect>\n"
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"9\">%.1f</text>\n",
            x, y, BAR_W, h, bar_colour[k], m[i], bubble[i] * 100.0, x + BAR_W / 2.0, y - 3,
            bubble[i] * 100.0);
        if (theory && isfinite(theory[i])) {
            double ty = CH_T + CH_H - theory[i] / y_hi * CH_H;
            out_printf(o,
                       "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" "
                       "stroke-width=\"2\"/>\n",
                       x - 2, ty, x + BAR_W + 2, ty);
        }
    }
    out_puts(o, "</svg>\n");
}

pp_status_t report_write_bubble_bars(const char *path, const char *title, int n,
                                     const char *const *group, const int *m, const double *bubble,
                                     const double *theory)
{
    if (n < 1) PP_FAIL(PP_ERR_INTERNAL, "report_write_bubble_bars: no runs");
    bars_t b = {0};
    pp_out_t out, *o = &out;
    pp_status_t st = bars_layout(&b, n, group, m);
    if (st == PP_OK) st = out_open(o, path, "the bar chart");
    if (st == PP_OK) {
        bars_draw(o, &b, title, n, group, m, bubble, theory);
        st = out_close(o);
    }
    free(b.group_of);
    free(b.first);
    return st;
}
