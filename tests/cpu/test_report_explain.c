/*
 * test_report_explain.c — the explanation in every output: the JSON fields (present, in order,
 * adding up to each device's idle time and to the bubble), the table's block, the Chrome trace's
 * idle track and critical-path marks, the SVG's shading and outlines, the --critical-path
 * listing and the compare table's and CSV's columns. Runs come from the real chain (generate ->
 * plan_lower -> simulate_plan) with uneven stage costs and a transfer cost drawn from a seeded
 * generator.
 */
#include "schedule/generate.h"
#include "report/report.h"
#include "run/report_compare.h"
#include "tests/check.h"
#include "support.h"
#include "textcheck.h"

#include <stdlib.h>
#include <unistd.h>

/* A 1F1B run on p devices, m micro-batches, simulated with uneven stages and a transfer cost:
 * plan, cost model, timeline and report (with the what-if figures when `what_if`). */
typedef struct rx {
    pp_plan_t plan;
    pp_cost_model_t cm;
    pp_timeline_t tl;
    pp_report_t r;
} rx_t;

static int rx_make(rx_t *x, int p, int m, int what_if)
{
    memset(x, 0, sizeof *x);
    pp_schedule_t sched;
    if (generate_1f1b(&sched, p, m) != PP_OK) return -1;
    pp_job_t cfg;
    ts_job_defaults(&cfg);
    cfg.model.layers = 24;
    cfg.pipeline.n_devices = p;
    for (int d = 0; d < p; d++)
        cfg.pipeline.device_ids[d] = d;
    cfg.pipeline.stages = p;
    cfg.pipeline.chunks = 1;
    cfg.pipeline.micro_batches = m;
    cfg.kind = PP_SCHED_1F1B;
    pp_status_t st = plan_lower(&x->plan, &sched, &cfg);
    schedule_free(&sched);
    job_free(&cfg);
    if (st != PP_OK) return -1;
    pp_job_cost_t c = {1, 1, 1, ts_rand_uniform(0.05, 0.3), 0, 0};
    if (cost_model_uniform(&x->cm, p, &c) != PP_OK) return -1;
    for (int s = 0; s < p; s++) {
        x->cm.f[s] = ts_rand_uniform(0.5, 1.5);
        x->cm.b[s] = ts_rand_uniform(1, 3);
    }
    if (simulate_plan(&x->tl, &x->plan, &x->cm) != PP_OK) return -1;
    if (report_build(&x->r, NULL, &x->plan, &x->tl, &x->tl) != PP_OK) return -1;
    if (what_if && report_what_if(&x->r, &x->plan, &x->cm) != PP_OK) return -1;
    return 0;
}

static void rx_free(rx_t *x)
{
    report_free(&x->r);
    timeline_free(&x->tl);
    cost_model_free(&x->cm);
    plan_free(&x->plan);
}

/* What a printer writes, as a string the caller frees (NULL when the printer failed). */
static char *print_to_string(pp_status_t (*fn)(const pp_report_t *, FILE *), const pp_report_t *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pp_status_t st = fn(r, f);
    fclose(f);
    if (st != PP_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

static pp_status_t print_table_nocfg(const pp_report_t *r, FILE *f)
{
    return report_print_table(r, NULL, f);
}

/* The numbers of a reasons object {"warmup":..,...} that starts at `obj` (at its '{'), in table
 * order; returns their sum, or NAN when a key is missing. The rows shown only with data-parallel
 * replicas or host copies are 0 here (these plans have neither): an offload key is a failure. */
static double reasons_sum(const char *obj, double *v)
{
    double sum = 0.0;
    if (strstr(obj, "\"offload\":") && strstr(obj, "\"offload\":") < strchr(obj, '}'))
        return NAN; /* no offload key where the plan has no copies */
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        char key[48];
        v[c] = 0.0;
        if (pp_idle_reasons[c].shown != PP_SHOWN_ALWAYS) continue;
        snprintf(key, sizeof key, "\"%s\":", pp_idle_reasons[c].name);
        const char *p = strstr(obj, key), *end = strchr(obj, '}');
        if (!p || !end || p > end) return NAN;
        v[c] = strtod(p + strlen(key), NULL);
        sum += v[c];
    }
    return sum;
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void test_json_fields_add_up(void)
{
    rx_t x;
    REQUIRE(rx_make(&x, 4, 8, 1) == 0);
    char *js = print_to_string(report_print_json, &x.r);
    REQUIRE(js != NULL, "the printer failed");
    jp_t j;
    REQUIRE(json_valid(js, &j), "invalid JSON: %s", js);
    /* Per device: the reasons add up to idle_ms. */
    const char *p = js;
    int d = 0;
    for (; (p = strstr(p, "\"idle_ms\":")) != NULL; d++) {
        double idle = strtod(p + 10, NULL), v[PP_IDLE_COUNT];
        const char *o = strstr(p, "\"idle_ms_by_reason\":{");
        REQUIRE(o != NULL);
        EXPECT_NEAR(reasons_sum(o + 20, v), idle, 1e-9, 1e-12);
        EXPECT(v[PP_IDLE_LAUNCH] == 0.0, "device %d: simulated launch %g", d, v[PP_IDLE_LAUNCH]);
        p = o + 1;
    }
    EXPECT(d == 4, "%d devices with idle_ms", d);
    /* Overall: ms add up to the devices' idle, fractions to the bubble. */
    double v[PP_IDLE_COUNT], sum_idle = 0.0;
    for (d = 0; d < 4; d++)
        sum_idle += x.r.per_device[d].idle_ms;
    const char *o = strstr(js, "\n,\"idle_ms_by_reason\":{");
    REQUIRE(o != NULL, "%s", js);
    EXPECT_NEAR(reasons_sum(strchr(o, '{'), v), sum_idle, 1e-9, 1e-12);
    o = strstr(js, "\"bubble_by_reason\":{");
    REQUIRE(o != NULL);
    EXPECT_NEAR(reasons_sum(strchr(o, '{'), v), x.r.bubble, 1e-12, 1e-9);
    EXPECT(strstr(js, "\"bubble_by_reason_simulated\":{") != NULL);
    /* The critical path and its chain. */
    o = strstr(js, "\"critical_path\":{\"ops\":");
    REQUIRE(o != NULL);
    int n = atoi(o + 23);
    EXPECT(n == x.r.explain.path.n && n > 0, "ops %d, path %d", n, x.r.explain.path.n);
    const char *chain = strstr(o, "\"chain\":[");
    REQUIRE(chain != NULL);
    int quotes = 0;
    for (const char *q = chain + 9; *q && *q != ']'; q++)
        quotes += *q == '"';
    EXPECT(quotes == 2 * n, "%d names in the chain for %d ops", quotes / 2, n);
    EXPECT(strncmp(chain + 9, "\"0F0\"", 5) == 0, "chain starts %.12s", chain + 9);
    /* What-if: every row, the first one the simulated step. */
    o = strstr(js, "\"what_if_step_ms\":{");
    REQUIRE(o != NULL);
    for (int w = 0; w < PP_WHAT_IF_COUNT; w++) {
        char key[48];
        snprintf(key, sizeof key, "\"%s\":", pp_what_ifs[w].name);
        const char *k = strstr(o, key);
        EXPECT(!k == !explain_shows_what_if(&x.r.explain, w), "%s", key);
        if (!explain_shows_what_if(&x.r.explain, w)) continue;
        REQUIRE(k != NULL, "no %s", key);
        double got = strtod(k + strlen(key), NULL);
        EXPECT(got == x.r.explain.what_if.step_ms[w], "%s %.17g", key, got);
        if (w == PP_WHAT_IF_NO_LAUNCH) EXPECT_NEAR(got, x.r.step_ms, 1e-12, 0);
    }
    free(js);
    rx_free(&x);
}

/* Without per-op times or a cost model the explanation prints null, never zeros. */
static void test_json_unknown_is_null(void)
{
    rx_t x;
    REQUIRE(rx_make(&x, 2, 4, 0) == 0);
    char *js = print_to_string(report_print_json, &x.r);
    REQUIRE(js != NULL, "the printer failed");
    EXPECT(strstr(js, "\"what_if_step_ms\":null") != NULL, "%s", js);
    free(js);
    report_free(&x.r);
    x.tl.has_op_times = 0;
    x.tl.mode = PP_MODE_MEASURE;
    REQUIRE(report_build(&x.r, NULL, &x.plan, &x.tl, NULL) == PP_OK);
    js = print_to_string(report_print_json, &x.r);
    REQUIRE(js != NULL, "the printer failed");
    jp_t j;
    EXPECT(json_valid(js, &j), "%s", js);
    EXPECT(count_substr(js, "\"idle_ms_by_reason\":null") == 3, "%s", js);
    EXPECT(strstr(js, "\"bubble_by_reason\":null") && strstr(js, "\"critical_path\":null"));
    free(js);
    char *t = print_to_string(print_table_nocfg, &x.r);
    REQUIRE(t != NULL, "the printer failed");
    EXPECT(strstr(t, "idle by reason") == NULL && strstr(t, "what-if") == NULL, "%s", t);
    free(t);
    rx_free(&x);
}

/* ---- the table ------------------------------------------------------------------------------- */

static void test_table_block(void)
{
    rx_t x;
    REQUIRE(rx_make(&x, 4, 8, 0) == 0);
    char *t = print_to_string(print_table_nocfg, &x.r);
    REQUIRE(t != NULL, "the printer failed");
    EXPECT(strstr(t, "what-if") == NULL, "no cost model, no what-if");
    free(t);
    REQUIRE(report_what_if(&x.r, &x.plan, &x.cm) == PP_OK);
    /* As if measured: each device gets a measured and a simulated row. */
    x.r.mode = PP_MODE_MEASURE;
    t = print_to_string(print_table_nocfg, &x.r);
    REQUIRE(t != NULL, "the printer failed");
    int rows = 0, block = 0;
    for (char *line = t; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (line[0] != '#') rows++;
        if (strncmp(line, "# dev ", 6) == 0 || strncmp(line, "# all ", 6) == 0) block++;
        if (nl) *nl = '\n';
        line = nl ? nl + 1 : NULL;
    }
    EXPECT(rows == 4, "%d device rows (the block must not add any)\n%s", rows, t);
    EXPECT(block == 2 * 4 + 2, "%d rows in the block\n%s", block, t);
    EXPECT(strstr(t, "# dev 3 measured") && strstr(t, "# dev 3 simulated"), "%s", t);
    for (int c = 0; c < PP_IDLE_COUNT; c++)
        EXPECT(!strstr(t, pp_idle_reasons[c].name) == !explain_shows_reason(&x.r.explain, c), "%s",
               pp_idle_reasons[c].name);
    EXPECT(strstr(t, "adds up to the bubble") && strstr(t, "# vs theory 27.27%"), "%s", t);
    EXPECT(strstr(t, "# critical path: ") && strstr(t, "# what-if (the simulator with this run"),
           "%s", t);
    for (int w = 0; w < PP_WHAT_IF_COUNT; w++)
        EXPECT(!strstr(t, pp_what_ifs[w].label) == !explain_shows_what_if(&x.r.explain, w), "%s",
               pp_what_ifs[w].label);
    /* The verdict stays the last line. */
    char *last = strstr(t, "# verdict: ");
    EXPECT(last && strchr(last, '\n') && strchr(last, '\n')[1] == '\0', "%s", t);
    free(t);
    rx_free(&x);
}

/* ---- --critical-path ------------------------------------------------------------------------- */

static void test_critical_path_listing(void)
{
    rx_t x;
    REQUIRE(rx_make(&x, 3, 6, 0) == 0);
    char *t = print_to_string(report_print_critical_path, &x.r);
    REQUIRE(t != NULL, "the printer failed");
    const pp_critical_path_t *cp = &x.r.explain.path;
    char want[64];
    snprintf(want, sizeof want, "# critical path: %d ops,", cp->n);
    EXPECT(strncmp(t, want, strlen(want)) == 0, "%s", t);
    int rows = 0;
    for (char *line = t; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (line[0] != '#') {
            REQUIRE(rows < cp->n, "more rows than links\n%s", t);
            const pp_path_link_t *l = &cp->links[rows];
            char name[48];
            action_format(&l->action, name, sizeof name);
            int link, dev;
            char role[16], op[48], after[16];
            double start, end, wait;
            int got = sscanf(line, "%d %d %15s %47s %lf %lf %lf %15s", &link, &dev, role, op,
                             &start, &end, &wait, after);
            EXPECT(got == 8 && link == rows && dev == l->device && strcmp(op, name) == 0 &&
                       strcmp(role, pp_role_name(l->role)) == 0 &&
                       strcmp(after, explain_via_name(l->via)) == 0,
                   "row %d: %s", rows, line);
            EXPECT_NEAR(start, l->start_ms, 1e-3, 0);
            EXPECT_NEAR(end, l->end_ms, 1e-3, 0);
            rows++;
        }
        if (nl) *nl = '\n';
        line = nl ? nl + 1 : NULL;
    }
    EXPECT(rows == cp->n, "%d rows for %d links", rows, cp->n);
    EXPECT(strstr(t, "  start\n") != NULL, "the first link says start\n%s", t);
    free(t);
    /* Unknown without per-op times. */
    report_free(&x.r);
    x.tl.has_op_times = 0;
    REQUIRE(report_build(&x.r, NULL, &x.plan, &x.tl, NULL) == PP_OK);
    t = print_to_string(report_print_critical_path, &x.r);
    REQUIRE(t != NULL, "the printer failed");
    EXPECT(strstr(t, "critical path: unknown") != NULL, "%s", t);
    free(t);
    rx_free(&x);
}

/* ---- trace and chart ------------------------------------------------------------------------- */

/* The trace holds one idle event per gap, on each device's idle track, adding up to its idle
 * time; the critical path's ops are flagged and chained. */
static void test_trace_gaps(void)
{
    rx_t x;
    REQUIRE(rx_make(&x, 4, 8, 0) == 0);
    char path[512];
    temp_path(path, sizeof path, ".json");
    REQUIRE(report_write_trace(&x.plan, &x.tl, path) == PP_OK);
    char *s = read_all(path);
    REQUIRE(s != NULL);
    jp_t j;
    EXPECT(json_valid(s, &j), "invalid trace JSON");
    const pp_idle_split_t *sp = &x.r.explain.split;
    EXPECT(count_substr(s, "\"cat\":\"idle\"") == sp->n_gaps, "%d idle events for %d gaps",
           count_substr(s, "\"cat\":\"idle\""), sp->n_gaps);
    EXPECT(count_substr(s, "\"name\":\"idle\"") == 4, "one idle track per device");
    EXPECT(count_substr(s, "\"critical\":1") == x.r.explain.path.n);
    EXPECT(count_substr(s, "\"cat\":\"critical_path\",\"ph\":\"s\"") == x.r.explain.path.n - 1);
    double dur[4] = {0};
    for (const char *p = strstr(s, "\"cat\":\"idle\""); p; p = strstr(p + 1, "\"cat\":\"idle\"")) {
        const char *pid = strstr(p, "\"pid\":"), *d = strstr(p, "\"dur\":");
        REQUIRE(pid && d);
        int dev = atoi(pid + 6);
        REQUIRE(dev >= 0 && dev < 4);
        dur[dev] += strtod(d + 6, NULL);
    }
    for (int dev = 0; dev < 4; dev++)
        EXPECT_NEAR(dur[dev] / 1000.0, x.r.per_device[dev].idle_ms, 1e-5 * sp->n_gaps, 0);
    for (int c = 0; c < PP_IDLE_COUNT; c++) {
        char want[64];
        snprintf(want, sizeof want, "\"name\":\"%s\",\"cat\":\"idle\"", pp_idle_reasons[c].name);
        EXPECT((strstr(s, want) != NULL) == (sp->total_ms[c] > 0), "%s", want);
    }
    free(s);
    unlink(path);
    rx_free(&x);
}

static void test_svg_marks(void)
{
    rx_t x;
    REQUIRE(rx_make(&x, 4, 8, 0) == 0);
    char path[512];
    temp_path(path, sizeof path, ".svg");
    REQUIRE(report_write_svg(&x.plan, &x.tl, "1f1b", path) == PP_OK);
    char *s = read_all(path);
    REQUIRE(s != NULL);
    xc_t xc;
    EXPECT(xml_wellformed(s, &xc), "SVG is not well-formed XML");
    int n_compute = 0, n_crit_compute = 0;
    for (int k = 0; k < x.plan.n_ops; k++)
        n_compute += x.plan.ops[k].role == PP_ROLE_COMPUTE;
    for (int i = 0; i < x.r.explain.path.n; i++)
        n_crit_compute += x.r.explain.path.links[i].role == PP_ROLE_COMPUTE;
    EXPECT(xc.n_op_rects == n_compute, "%d op boxes for %d compute ops", xc.n_op_rects, n_compute);
    EXPECT(count_substr(s, " critical\" x=") == x.r.explain.path.n, "marked ops");
    EXPECT(count_substr(s, "<rect class=\"op F c0 critical\"") +
                   count_substr(s, "<rect class=\"op B c0 critical\"") ==
               n_crit_compute,
           "critical boxes");
    EXPECT(count_substr(s, "<rect class=\"gap ") == x.r.explain.split.n_gaps);
    EXPECT(strstr(s, "critical path") != NULL && strstr(s, "idle: schedule") != NULL);
    free(s);
    unlink(path);
    rx_free(&x);
}

/* ---- compare --------------------------------------------------------------------------------- */

/* The compare table and CSV end with the bubble by reason; in the CSV the five add up to the
 * bubble. */
static void test_compare_columns(void)
{
    pp_compare_row_t *rows = calloc(2, sizeof *rows);
    REQUIRE(rows != NULL);
    rx_t x[2];
    for (int i = 0; i < 2; i++) {
        REQUIRE(rx_make(&x[i], 4, 8 * (i + 1), 0) == 0);
        rows[i].run.report = x[i].r; /* borrowed: the rows are not freed as runs */
        snprintf(rows[i].label, sizeof rows[i].label, "1f1b m=%d", 8 * (i + 1));
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    compare_print_table(rows, 2, f);
    fclose(f);
    for (int c = 0; c < PP_IDLE_COUNT; c++)
        EXPECT((!strstr(buf, pp_idle_reasons[c].name)) == (pp_idle_reasons[c].shown != PP_SHOWN_ALWAYS),
               "%s\n%s", pp_idle_reasons[c].name, buf);
    free(buf);
    f = open_memstream(&buf, &len);
    compare_print_csv(rows, 2, f);
    fclose(f);
    EXPECT(
        strstr(buf, ",bubble_warmup,bubble_schedule,bubble_comm,bubble_launch,bubble_cooldown\n") !=
            NULL,
        "%s", buf);
    const char *line = strchr(buf, '\n');
    for (int i = 0; i < 2 && line; i++, line = strchr(line + 1, '\n')) {
        /* the last five fields of the row */
        const char *end = strchr(line + 1, '\n'), *p = end;
        REQUIRE(end != NULL);
        int shown = 0;
        for (int k = 0; k < PP_IDLE_COUNT; k++)
            shown += pp_idle_reasons[k].shown == PP_SHOWN_ALWAYS;
        for (int k = 0; k < shown; k++)
            while (*--p != ',') {
            }
        double sum = 0.0;
        for (int k = 0; k < shown; k++) {
            sum += strtod(p + 1, NULL);
            p = strchr(p + 1, ',');
            if (!p) p = end;
        }
        EXPECT_NEAR(sum, x[i].r.bubble, 5e-6, 0); /* %.6g per field */
    }
    free(buf);
    free(rows);
    for (int i = 0; i < 2; i++)
        rx_free(&x[i]);
}

int main(void)
{
    ts_rng_seed(0x0b0bb1e5ca1ab1e5ull);
    RUN(test_json_fields_add_up);
    RUN(test_json_unknown_is_null);
    RUN(test_table_block);
    RUN(test_critical_path_listing);
    RUN(test_trace_gaps);
    RUN(test_svg_marks);
    RUN(test_compare_columns);
    return check_summary("test_report_explain");
}
