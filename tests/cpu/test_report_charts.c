/*
 * test_report_charts.c — what the charts show, read back from their SVG text. The Gantt chart:
 * at most 2400 px wide, ticks 95-240 px apart at round values, each chunk of a V schedule in its
 * own shade, micro-batch labels past 9 wherever the box holds them (and inside the box), a small
 * file at m = 512 whose merged boxes still add up to each device's busy time, and finite
 * coordinates whatever the times. The bubble chart: the closed form through every m the kind
 * accepts, the runs as markers and not a line, round y ticks. The bar chart: slanted names inside
 * the frame. The peer chart (bench/plot_peer.py, when python3 is there): round ticks, every label
 * inside the frame.
 *
 * Plans come from the generators, lowered and simulated with uneven stage costs drawn from a
 * seeded generator.
 */
#include "report/report.h"
#include "schedule/generate.h"
#include "sim/simulate.h"
#include "tests/check.h"
#include "support.h"
#include "textcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ---- reading the SVG text -------------------------------------------------------------------- */

/* Attribute `name` of the element starting at `el` (up to its '>') as a number; NAN when absent
 * or not a whole finite number. */
static double attr_num(const char *el, const char *name)
{
    const char *end = strchr(el, '>');
    char key[32];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *a = strstr(el, key);
    if (!a || (end && a > end)) return NAN;
    char *stop;
    double v = strtod(a + strlen(key), &stop);
    return *stop == '"' && isfinite(v) ? v : NAN;
}

/* Attribute `name` of the element at `el` as text, into buf ("" when absent). */
static const char *attr_str(const char *el, const char *name, char *buf, size_t size)
{
    const char *end = strchr(el, '>');
    char key[32];
    snprintf(key, sizeof key, " %s=\"", name);
    const char *a = strstr(el, key);
    buf[0] = '\0';
    if (!a || (end && a > end)) return buf;
    a += strlen(key);
    size_t n = strcspn(a, "\"");
    if (n >= size) n = size - 1;
    memcpy(buf, a, n);
    buf[n] = '\0';
    return buf;
}

/* The text between the element's '>' and the next '<'. */
static const char *el_text(const char *el, char *buf, size_t size)
{
    const char *a = strchr(el, '>');
    buf[0] = '\0';
    if (!a) return buf;
    a++;
    size_t n = strcspn(a, "<");
    if (n >= size) n = size - 1;
    memcpy(buf, a, n);
    buf[n] = '\0';
    return buf;
}

/* 1 when every coordinate and size attribute in the text is a finite number. */
static int coords_finite(const char *s)
{
    static const char *const names[] = {" x=\"",  " y=\"",  " width=\"",    " height=\"",
                                        " x1=\"", " x2=\"", " y1=\"",       " y2=\"",
                                        " cx=\"", " cy=\"", " font-size=\""};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        for (const char *p = strstr(s, names[i]); p; p = strstr(p + 1, names[i])) {
            char *stop;
            double v = strtod(p + strlen(names[i]), &stop);
            if (*stop != '"' || !isfinite(v)) {
                fprintf(stderr, "    not finite: %.60s\n", p);
                return 0;
            }
        }
    return 1;
}

/* Whether `step` is 1, 2 or 5 times a power of ten. */
static int is_round(double step)
{
    if (!(step > 0.0)) return 0;
    double mant = step / pow(10.0, floor(log10(step) + 1e-9));
    return fabs(mant - 1.0) < 1e-6 || fabs(mant - 2.0) < 1e-6 || fabs(mant - 5.0) < 1e-6;
}

/* ---- plans ----------------------------------------------------------------------------------- */

typedef struct sim {
    pp_plan_t plan;
    pp_timeline_t tl;
} sim_t;

/* Lower schedule s (freed here) and simulate it: F, I, W per stage drawn around 1.4, 2.1 and
 * 1.3 ms, B = I + W, transfers `send` ms. 0, or -1 on failure. */
static int sim_make(sim_t *x, pp_schedule_t *s, double send)
{
    memset(x, 0, sizeof *x);
    pp_status_t st = plan_lower(&x->plan, s, NULL);
    int n_stages = s->n_stages;
    schedule_free(s);
    if (st != PP_OK) return -1;
    pp_cost_model_t cm;
    pp_job_cost_t c = {1, 1, 1, send, 0, 0};
    if (cost_model_uniform(&cm, n_stages, &c) != PP_OK) return -1;
    for (int k = 0; k < n_stages; k++) {
        cm.f[k] = ts_rand_uniform(1.2, 1.6);
        cm.i[k] = ts_rand_uniform(1.9, 2.3);
        cm.w[k] = ts_rand_uniform(1.1, 1.5);
        cm.b[k] = cm.i[k] + cm.w[k];
    }
    st = simulate_plan(&x->tl, &x->plan, &cm);
    cost_model_free(&cm);
    return st == PP_OK ? 0 : -1;
}

static void sim_free(sim_t *x)
{
    timeline_free(&x->tl);
    plan_free(&x->plan);
}

/* The Gantt chart of x as text (the caller frees it), its size in *size. */
static char *gantt(const pp_plan_t *plan, const pp_timeline_t *tl, size_t *size)
{
    char path[512];
    temp_path(path, sizeof path, ".svg");
    if (report_write_svg(plan, tl, "chart", path) != PP_OK) return NULL;
    char *s = read_all(path);
    unlink(path);
    if (s && size) *size = strlen(s);
    return s;
}

/* ---- the Gantt chart ------------------------------------------------------------------------- */

/* Ticks: 95 to 240 px apart, at 0, step, 2 step, ... with a round step. A tick is a vertical
 * line 5 px long down from the axis, its label the element after it. */
static void expect_ticks(const char *s, const char *what)
{
    double prev_x = NAN, step = NAN;
    int n = 0;
    for (const char *p = strstr(s, "<line "); p; p = strstr(p + 1, "<line ")) {
        double x = attr_num(p, "x1"), y1 = attr_num(p, "y1"), y2 = attr_num(p, "y2");
        if (!(x == attr_num(p, "x2") && y2 - y1 == 5.0)) continue;
        char txt[64];
        const char *label = strstr(p, "<text");
        REQUIRE(label != NULL);
        double v = strtod(el_text(label, txt, sizeof txt), NULL);
        if (n == 0) EXPECT(v == 0.0, "%s: first tick %g", what, v);
        if (n == 1) step = v;
        if (n >= 1) {
            EXPECT(x - prev_x >= 95.0 && x - prev_x <= 240.0, "%s: ticks %.1f px apart", what,
                   x - prev_x);
            EXPECT(fabs(v - n * step) <= 1e-9 * fabs(v) + 1e-12, "%s: tick %d reads %g", what, n,
                   v);
        }
        prev_x = x;
        n++;
    }
    EXPECT(n >= 3, "%s: %d ticks", what, n);
    EXPECT(is_round(step), "%s: tick step %g", what, step);
}

/* The compute drawn in device d's row, in ms: every box's width times its height's share of the
 * row, over the plot's scale (px per ms). */
static double drawn_busy_ms(const char *s, int d, double scale)
{
    const double row_y = 64 + d * 40;
    double area = 0.0;
    for (const char *p = strstr(s, "<rect class=\"op"); p; p = strstr(p + 1, "<rect class=\"op")) {
        double y = attr_num(p, "y"), h = attr_num(p, "height");
        if (strncmp(p, "<rect class=\"ops critical", 25) == 0) continue; /* the line above */
        if (y >= row_y - 1e-6 && y < row_y + 26) area += attr_num(p, "width") * h / 26.0;
    }
    return area / scale;
}

/* m = 512: at most 2400 px wide, small, finite, round ticks; merged boxes add up to the busy time
 * of each device. */
static void test_gantt_m512(void)
{
    for (int c = 0; c < 2; c++) {
        sim_t x;
        pp_schedule_t sched;
        REQUIRE((c == 0 ? generate_1f1b(&sched, 4, 512) : generate_zbv(&sched, 4, 512)) == PP_OK);
        REQUIRE(sim_make(&x, &sched, 0.03) == 0);
        size_t size = 0;
        char *s = gantt(&x.plan, &x.tl, &size);
        REQUIRE(s != NULL);
        const char *what = c == 0 ? "1f1b m=512" : "zb-v m=512";
        xc_t xc;
        EXPECT(xml_wellformed(s, &xc), "%s: not well-formed", what);
        EXPECT(attr_num(strstr(s, "<svg"), "width") <= 2400, "%s: %g px wide", what,
               attr_num(strstr(s, "<svg"), "width"));
        EXPECT(size < 64 * 1024, "%s: %zu bytes", what, size);
        EXPECT(coords_finite(s), "%s", what);
        EXPECT(strstr(s, "class=\"ops ") && strstr(s, "class=\"legend-merged\""),
               "%s: nothing merged", what);
        expect_ticks(s, what);
        pp_report_t r;
        REQUIRE(report_build(&r, NULL, &x.plan, &x.tl, NULL) == PP_OK);
        double scale = attr_num(strstr(s, "<rect class=\"lane\""), "width") / (r.step_ms);
        for (int d = 0; d < 4; d++) {
            double drawn = drawn_busy_ms(s, d, scale), busy = r.per_device[d].busy_ms;
            EXPECT(fabs(drawn - busy) <= 0.01 * busy, "%s: device %d draws %.1f ms of %.1f", what,
                   d, drawn, busy);
        }
        report_free(&r);
        free(s);
        sim_free(&x);
    }
}

/* Round ticks about 150 px apart over spans from below the smallest normal double to hours. */
static void test_gantt_ticks(void)
{
    static const double spans[] = {3e-309, 0.0037, 0.9, 7.3, 123.0, 4567.0, 98765.0, 6.5e7};
    static const int n_ops[] = {4, 40, 200};
    for (size_t i = 0; i < sizeof spans / sizeof *spans; i++)
        for (size_t j = 0; j < sizeof n_ops / sizeof *n_ops; j++) {
            ts_plan_t x;
            ts_plan_init(&x, 1, 1, n_ops[j], PP_SCHED_GPIPE);
            double u = spans[i] / n_ops[j];
            for (int k = 0; k < n_ops[j]; k++)
                ts_plan_time(&x, ts_plan_compute(&x, 0, PP_ACT_F, 0, k, -1, -1), k * u,
                             (k + 1) * u);
            pp_timeline_t tl;
            REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
            char *s = gantt(&x.pl, &tl, NULL);
            REQUIRE(s != NULL);
            char what[64];
            snprintf(what, sizeof what, "span %g ms, %d ops", spans[i], n_ops[j]);
            expect_ticks(s, what);
            free(s);
            timeline_free(&tl);
            ts_plan_free(&x);
        }
}

/* The stage, kind letter and micro-batch of a compute box, from its title ("5F12 ..."); 0 when
 * the title does not read so. */
static int box_action(const char *box, int *stage, char *kind, int *mb)
{
    char title[64];
    const char *t = strstr(box, "<title>");
    return t && sscanf(el_text(t, title, sizeof title), "%d%c%d", stage, kind, mb) == 3;
}

/* ZB-V on 4 devices (device d holds stages d and 7 - d): each (kind, chunk) one fill, the two
 * chunks of a kind two fills, all eight distinct; the legend says so. 1F1B keeps one fill per
 * kind and no such legend. */
static void test_gantt_chunks(void)
{
    sim_t x;
    pp_schedule_t sched;
    REQUIRE(generate_zbv(&sched, 4, 8) == PP_OK);
    REQUIRE(sim_make(&x, &sched, 0.02) == 0);
    char *s = gantt(&x.plan, &x.tl, NULL);
    REQUIRE(s != NULL);
    char fill[4][2][16] = {{""}};
    for (const char *p = strstr(s, "<rect class=\"op "); p;
         p = strstr(p + 1, "<rect class=\"op ")) {
        char f[16], kind;
        int stage, mb;
        REQUIRE(box_action(p, &stage, &kind, &mb));
        attr_str(p, "fill", f, sizeof f);
        int k = (int)(strchr("FBIW", kind) - "FBIW"), c = stage >= 4;
        REQUIRE(strchr("FBIW", kind) != NULL);
        if (!fill[k][c][0]) snprintf(fill[k][c], sizeof fill[k][c], "%s", f);
        EXPECT(strcmp(fill[k][c], f) == 0, "%c chunk %d: fills %s and %s", kind, c, fill[k][c], f);
    }
    for (int a = 0; a < 8; a++)
        for (int b = a + 1; b < 8; b++)
            if (fill[a / 2][a % 2][0] && fill[b / 2][b % 2][0])
                EXPECT(strcmp(fill[a / 2][a % 2], fill[b / 2][b % 2]) != 0,
                       "kind %d chunk %d and kind %d chunk %d share %s", a / 2, a % 2, b / 2, b % 2,
                       fill[a / 2][a % 2]);
    EXPECT(fill[0][0][0] && fill[0][1][0] && fill[2][1][0] && fill[3][1][0], "kinds missing");
    EXPECT(strstr(s, "class=\"legend-chunks\"") != NULL, "no word on the shades");
    free(s);
    sim_free(&x);

    REQUIRE(generate_1f1b(&sched, 4, 8) == PP_OK);
    REQUIRE(sim_make(&x, &sched, 0.02) == 0);
    s = gantt(&x.plan, &x.tl, NULL);
    REQUIRE(s != NULL);
    EXPECT(count_substr(s, "fill=\"#4c78a8\"") >= 32, "F keeps its colour");
    EXPECT(strstr(s, "class=\"legend-chunks\"") == NULL);
    free(s);
    sim_free(&x);
}

/* 1F1B at m = 32: every box that holds two digits at 7 px carries its number, inside it; some of
 * those numbers are past 9 in boxes narrower than 18 px. */
static void test_gantt_labels(void)
{
    sim_t x;
    pp_schedule_t sched;
    REQUIRE(generate_1f1b(&sched, 4, 32) == PP_OK);
    REQUIRE(sim_make(&x, &sched, 0.02) == 0);
    char *s = gantt(&x.plan, &x.tl, NULL);
    REQUIRE(s != NULL);
    int n_two = 0, n_narrow_two = 0;
    for (const char *p = strstr(s, "<rect class=\"op "); p;
         p = strstr(p + 1, "<rect class=\"op ")) {
        char title[64], txt[16], kind;
        int stage, mb;
        REQUIRE(box_action(p, &stage, &kind, &mb));
        snprintf(title, sizeof title, "%d%c%d", stage, kind, mb);
        double x0 = attr_num(p, "x"), w = attr_num(p, "width");
        const char *next = strstr(p, "</rect>\n") + 8;
        int labelled = strncmp(next, "<text ", 6) == 0;
        int digits = mb >= 10 ? 2 : 1;
        if (w >= digits * 0.64 * 7.0 + 3.0)
            EXPECT(labelled, "%s: %.1f px wide, no label", title, w);
        if (!labelled) continue;
        EXPECT(atoi(el_text(next, txt, sizeof txt)) == mb, "%s labelled %s", title, txt);
        double fs = attr_num(next, "font-size"), cx = attr_num(next, "x");
        EXPECT(fs >= 7.0 && fs <= 11.0, "font %g", fs);
        EXPECT(digits * 0.64 * fs <= w - 2.0 && fabs(cx - (x0 + w / 2)) < 0.01,
               "%s: %d digits at %g px in %.1f px", title, digits, fs, w);
        n_two += mb >= 10;
        n_narrow_two += mb >= 10 && w < 18.0;
    }
    EXPECT(n_two >= 22 * 4, "%d labels past 9", n_two);
    EXPECT(n_narrow_two > 0, "no narrow box with two digits");
    free(s);
    sim_free(&x);
}

/* Times that are not finite (an endless transfer) are refused with a message: no chart is
 * written (report_check_finite), so nothing such as x="-nan" can reach a file. */
static void test_gantt_not_finite(void)
{
    ts_plan_t x;
    ts_plan_init(&x, 2, 2, 2, PP_SCHED_1F1B);
    ts_plan_time(&x, ts_plan_compute(&x, 0, PP_ACT_F, 0, 0, -1, -1), 0.0, 1.0);
    int r = ts_plan_transfer(&x, 0, 1, PP_ACT_SEND_F, 0, 1, 0, PP_TRANSPORT_PEER, 1024, -1);
    ts_plan_time(&x, r - 1, 1.0, INFINITY);
    ts_plan_time(&x, r, 1.0, INFINITY);
    ts_plan_time(&x, ts_plan_compute(&x, 1, PP_ACT_F, 1, 0, -1, -1), INFINITY, INFINITY);
    ts_plan_time(&x, ts_plan_compute(&x, 0, PP_ACT_F, 0, 1, -1, -1), 1.0, 2.0);
    pp_timeline_t tl;
    REQUIRE(ts_plan_timeline(&x, &tl, PP_MODE_SIMULATE, NULL, 0) == PP_OK);
    ts_capture_begin();
    char *s = gantt(&x.pl, &tl, NULL);
    const char *err = ts_capture_end();
    EXPECT(s == NULL, "a chart of times that are not finite was written");
    EXPECT(strstr(err, "not finite") != NULL, "%s", err);
    free(s);
    timeline_free(&tl);
    ts_plan_free(&x);
}

/* ---- the bubble chart ------------------------------------------------------------------------ */

/* The chart of `kind` on p = 4 at the given m, as text (the caller frees it). */
static char *bubble_chart(pp_sched_kind_t kind, int v, int n, const int *m, const double *meas,
                          const double *sim)
{
    char path[512];
    temp_path(path, sizeof path, ".svg");
    if (report_write_bubble_chart(path, "b", kind, 4, v, n, m, meas, sim, "measured") != PP_OK)
        return NULL;
    char *s = read_all(path);
    unlink(path);
    return s;
}

/* The closed form's points: how many, and whether x rises throughout and y never rises (one
 * decimal place may round two close values to the same y). */
static int curve_points(const char *s, int *monotone)
{
    const char *p = strstr(s, "class=\"closed-form\"");
    *monotone = 1;
    if (!p || !(p = strstr(p, "points=\""))) return 0;
    p += 8;
    int n = 0;
    double px = -INFINITY, py = -INFINITY, x, y;
    int used;
    while (sscanf(p, "%lf,%lf %n", &x, &y, &used) == 2) {
        if (!(x > px) || !(n == 0 || y >= py)) *monotone = 0; /* y grows downward */
        px = x, py = y, p += used, n++;
    }
    return n;
}

/* Every accepted m between the runs (1F1B: each of 8..32; interleaved: multiples of p), or 400
 * of them over a wide range; the runs as markers with no line; round y ticks; NAN and m = 0 left
 * out. */
static void test_bubble_samples(void)
{
    int m[3] = {8, 32, 0};
    double meas[3] = {0.30, 0.13, 0.5}, sim[3] = {0.295, NAN, 0.5};
    int mono;
    char *s = bubble_chart(PP_SCHED_1F1B, 1, 3, m, meas, sim);
    REQUIRE(s != NULL);
    xc_t xc;
    EXPECT(xml_wellformed(s, &xc));
    EXPECT(curve_points(s, &mono) == 25 && mono, "1f1b: %d points", curve_points(s, &mono));
    EXPECT(count_substr(s, "<polyline") == 1, "the runs joined by a line");
    EXPECT(count_substr(s, "class=\"measured\"") == 2 &&
           count_substr(s, "class=\"simulated\"") == 1);
    EXPECT(coords_finite(s));
    double prev = NAN, step = NAN;
    int n = 0;
    for (const char *p = strstr(s, "class=\"ytick\""); p;
         p = strstr(p + 1, "class=\"ytick\""), n++) {
        char txt[32];
        double v = strtod(el_text(strstr(p, "<text"), txt, sizeof txt), NULL);
        if (n == 1) step = v - prev;
        if (n > 1) EXPECT(fabs(v - prev - step) < 1e-9, "ticks %g then %g", prev, v);
        prev = v;
    }
    EXPECT(n >= 4 && is_round(step), "%d y ticks, step %g %%", n, step);
    EXPECT(prev >= 30.0, "top tick %g %% under the highest point", prev);
    free(s);

    s = bubble_chart(PP_SCHED_INTERLEAVED, 2, 2, m, meas, sim);
    REQUIRE(s != NULL);
    EXPECT(curve_points(s, &mono) == 7 && mono, "interleaved: %d points", curve_points(s, &mono));
    free(s);

    int wide[2] = {4, 65536};
    s = bubble_chart(PP_SCHED_ZBH1, 1, 2, wide, meas, sim);
    REQUIRE(s != NULL);
    int pts = curve_points(s, &mono);
    EXPECT(pts >= 300 && pts <= 400 && mono, "zb-h1 4..65536: %d points", pts);
    free(s);
}

/* ---- the bar chart --------------------------------------------------------------------------- */

/* Each slanted group name ends inside the frame, however long the last one is. */
static void test_bars_inside(void)
{
    const char *group[] = {"gpipe", "1f1b", "interleaved-zb micro_batches=32"};
    int m[] = {8, 8, 8};
    double bubble[] = {0.27, 0.27, 0.06};
    char path[512];
    temp_path(path, sizeof path, ".svg");
    REQUIRE(report_write_bubble_bars(path, "bars", 3, group, m, bubble, NULL) == PP_OK);
    char *s = read_all(path);
    REQUIRE(s != NULL);
    double width = attr_num(strstr(s, "<svg"), "width");
    int n = 0;
    for (const char *p = strstr(s, "translate("); p; p = strstr(p + 1, "translate("), n++) {
        double x = strtod(p + 10, NULL);
        char txt[64];
        el_text(p, txt, sizeof txt);
        double end = x + 0.87 * 0.6 * 11.0 * strlen(txt);
        EXPECT(end <= width, "\"%s\" ends at %.0f of %.0f px", txt, end, width);
    }
    EXPECT(n == 3);
    free(s);
    unlink(path);
}

/* ---- the peer chart -------------------------------------------------------------------------- */

/* Every text element's estimated extent (0.6 em a character) inside [0, width]. */
static void expect_text_inside(const char *s, double width, const char *what)
{
    for (const char *p = strstr(s, "<text "); p; p = strstr(p + 1, "<text ")) {
        char txt[256], anchor[16];
        double x = attr_num(p, "x"), fs = attr_num(p, "font-size");
        if (isnan(fs)) fs = 12.0;
        double w = 0.6 * fs * strlen(el_text(p, txt, sizeof txt));
        attr_str(p, "text-anchor", anchor, sizeof anchor);
        double x0 = strcmp(anchor, "end") == 0      ? x - w
                    : strcmp(anchor, "middle") == 0 ? x - w / 2
                                                    : x;
        EXPECT(x0 >= 0.0 && x0 + w <= width, "%s: \"%s\" spans %.0f-%.0f of %.0f px", what, txt, x0,
               x0 + w, width);
    }
}

static void test_peer_chart(void)
{
    if (system("python3 -c 'import json' >/dev/null 2>&1") != 0) SKIP("no python3");
    if (access("bench/plot_peer.py", R_OK) != 0) SKIP("bench/plot_peer.py not here");
    static const char *const sched[] = {"gpipe", "1f1b", "interleaved", "zb"};
    for (int presets = 1; presets <= 2; presets++) {
        char in[512], out[512], cmd[1200];
        temp_path(in, sizeof in, ".jsonl");
        temp_path(out, sizeof out, ".svg");
        FILE *f = fopen(in, "w");
        REQUIRE(f != NULL);
        for (int p = 0; p < presets; p++)
            for (int k = 0; k < 4; k++)
                for (int fw = 0; fw < 3; fw++) {
                    /* Megatron-Core (two presets only) has 1F1B and interleaved */
                    if (fw == 2 && (presets == 1 || (k != 1 && k != 2))) continue;
                    static const char *const name[] = {"ppsched", "pytorch", "megatron-core"};
                    static const double base[] = {7.1e5, 2.1e5, 5.3e5};
                    double tps = base[fw] * (1.0 + 0.03 * k) / (p ? 1.7 : 1.0);
                    fprintf(f,
                            "{\"framework\": \"%s\", \"preset\": \"%s\", \"schedule\": \"%s\", "
                            "\"m\": 32, \"step_ms\": %g, \"tokens_per_s\": %g}\n",
                            name[fw], p ? "small" : "reference", sched[k], 1.3e8 / tps, tps);
                }
        fclose(f);
        snprintf(cmd, sizeof cmd, "python3 bench/plot_peer.py %s %s", in, out);
        REQUIRE(system(cmd) == 0);
        char *s = read_all(out);
        REQUIRE(s != NULL);
        xc_t xc;
        EXPECT(xml_wellformed(s, &xc));
        double width = attr_num(strstr(s, "<svg"), "width");
        expect_text_inside(s, width, presets == 1 ? "one preset" : "two presets, three frameworks");
        EXPECT((strstr(s, ">Megatron-Core</text>") != NULL) == (presets == 2),
               "the legend names Megatron-Core exactly where it has rows");
        double prev = NAN, step = NAN;
        int n = 0;
        for (const char *p = strstr(s, "<text class=\"ytick\""); p;
             p = strstr(p + 1, "<text class=\"ytick\""), n++) {
            char txt[32];
            double v = strtod(el_text(p, txt, sizeof txt), NULL) * (strchr(txt, 'k') ? 1e3 : 1);
            if (n == 1) step = v - prev;
            if (n > 1) EXPECT(fabs(v - prev - step) < 1e-6 * step, "ticks %g then %g", prev, v);
            prev = v;
        }
        EXPECT(n >= 4 && is_round(step), "%d y ticks, step %g", n, step);
        free(s);
        unlink(in);
        unlink(out);
    }
}

int main(void)
{
    /* a writer that never stops (an axis that never reaches its end) fails here, not by filling
     * the disk */
    struct rlimit fsize = {256u << 20, 256u << 20};
    setrlimit(RLIMIT_FSIZE, &fsize);
    ts_rng_seed(0x6a09e667f3bcc908ull);
    RUN(test_gantt_m512);
    RUN(test_gantt_ticks);
    RUN(test_gantt_chunks);
    RUN(test_gantt_labels);
    RUN(test_gantt_not_finite);
    RUN(test_bubble_samples);
    RUN(test_bars_inside);
    RUN(test_peer_chart);
    return check_summary("test_report_charts");
}
