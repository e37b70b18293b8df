/*
 * main.c — the ppsched command line.
 *
 *   ppsched FILE.yaml [options]          run (measure on the GPUs; simulate where there are none)
 *   ppsched compare FILE... [options]    schedules side by side in one table
 *   ppsched show FILE [--emit csv|yaml]  the plan as a text grid, or the schedule exported
 *   ppsched check FILE                   load, generate, lower and validate; print a summary
 *
 * Every command goes through the same chain: config → generate → validate → lower → validate →
 * simulate (always: the simulated bubble sits next to the measured one) → execute (measure mode)
 * → report. Exit codes: 0 ok, 2 usage or input error, 1 runtime failure. Only this file exits.
 */
#include "config.h"
#include "execute.h"
#include "generate.h"
#include "plan.h"
#include "report.h"
#include "simulate.h"
#include "timeline.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PP_VERSION "0.1.0"
#define MAX_SETS   256
#define MAX_SWEEP  8

/* ---------------------------------------------------------------------------------------------
 * Options shared by the commands
 * ------------------------------------------------------------------------------------------- */

typedef struct opts {
    const char *sets[MAX_SETS]; /* --set overrides in order */
    int n_sets;
    int simulate;                 /* --simulate */
    int json;                     /* --json */
    int csv;                      /* --csv (compare) */
    int sync;                     /* --sync */
    int quiet;                    /* --quiet: no banner */
    const char *trace;            /* --trace FILE */
    const char *svg;              /* --svg FILE (run) or DIR (compare) */
    const char *emit;             /* --emit csv|yaml (show) */
    double timeout_s;             /* --timeout, 0 = config's */
    const char *sweep[MAX_SWEEP]; /* --sweep key=v1,v2,... (compare) */
    int n_sweep;
} opts_t;

static const char *prog = "ppsched";

static void usage_run(FILE *f)
{
    fprintf(
        f,
        "usage: ppsched FILE.yaml [options]\n"
        "\n"
        "Run the schedule in FILE.yaml on the GPUs present and report what it cost: step time,\n"
        "throughput, the bubble of every device next to the closed-form theory and the simulator.\n"
        "Without a GPU it simulates (and says so).\n"
        "\n"
        "options:\n"
        "  -s, --simulate         predict with the cost model instead of running on GPUs\n"
        "  -S, --set KEY=VALUE    override a config key, e.g. --set pipeline.micro_batches=32\n"
        "                         (repeatable; see docs/schedule-format.md for every key)\n"
        "  -j, --json             print the report as JSON (the stable schema) instead of a table\n"
        "  -t, --trace FILE.json  write a Chrome trace / Perfetto timeline of the step\n"
        "  -g, --svg FILE.svg     write a Gantt chart of the step\n"
        "      --timeout SECONDS  longest wait for one step before reporting the pending op\n"
        "      --sync             naive baseline: host sync after every op, one stream per device\n"
        "  -q, --quiet            no banner\n"
        "  -h, --help             this text\n"
        "  -V, --version          print the version\n"
        "\n"
        "other commands: ppsched compare FILE... | ppsched show FILE | ppsched check FILE\n"
        "                (ppsched COMMAND --help for each)\n");
}

static void usage_compare(FILE *f)
{
    fprintf(
        f,
        "usage: ppsched compare FILE.yaml... [options]\n"
        "\n"
        "Run (or simulate) each schedule in turn on the same GPUs and print one table.\n"
        "\n"
        "options:\n"
        "  -s, --simulate             simulate every schedule instead of running it\n"
        "  -S, --set KEY=VALUE        override a key in every file (repeatable)\n"
        "  -w, --sweep KEY=V1,V2,...  run the cross product over the listed values (repeatable)\n"
        "  -j, --json                 the table as JSON (an array of reports)\n"
        "  -c, --csv                  the table as CSV\n"
        "  -g, --svg DIR              one Gantt chart per run into DIR\n"
        "      --timeout SECONDS      longest wait for one step\n"
        "  -q, --quiet                no banner\n"
        "  -h, --help                 this text\n");
}

static void usage_show(FILE *f)
{
    fprintf(
        f,
        "usage: ppsched show FILE.yaml [options]\n"
        "\n"
        "Print the schedule of FILE.yaml as a compact grid (one row per device), or export it.\n"
        "\n"
        "options:\n"
        "  -e, --emit csv|yaml    print the compute schedule as PyTorch pipelining CSV (one row\n"
        "                         per rank) or as a YAML `schedule: steps:` block\n"
        "  -S, --set KEY=VALUE    override a config key (repeatable)\n"
        "  -h, --help             this text\n");
}

static void usage_check(FILE *f)
{
    fprintf(f,
            "usage: ppsched check FILE.yaml [options]\n"
            "\n"
            "Load FILE.yaml, generate, lower and validate its schedule; print a one-line summary.\n"
            "Exit 0 when valid, 2 with the problem otherwise.\n"
            "\n"
            "options:\n"
            "  -S, --set KEY=VALUE    override a config key (repeatable)\n"
            "  -h, --help             this text\n");
}

enum { OPT_TIMEOUT = 1000, OPT_SYNC };

static const struct option long_opts[] = {
    {"simulate", no_argument, NULL, 's'},
    {"set", required_argument, NULL, 'S'},
    {"json", no_argument, NULL, 'j'},
    {"csv", no_argument, NULL, 'c'},
    {"trace", required_argument, NULL, 't'},
    {"svg", required_argument, NULL, 'g'},
    {"emit", required_argument, NULL, 'e'},
    {"sweep", required_argument, NULL, 'w'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"sync", no_argument, NULL, OPT_SYNC},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef enum { CMD_RUN, CMD_COMPARE, CMD_SHOW, CMD_CHECK } cmd_t;

/* Which options each command accepts (getopt_long parses all; this rejects the others). */
static int opt_allowed(cmd_t cmd, int c)
{
    switch (c) {
    case 'S':
    case 'h':
    case 'V': return 1;
    case 's':
    case 'j':
    case 'g':
    case 'q':
    case OPT_TIMEOUT: return cmd == CMD_RUN || cmd == CMD_COMPARE;
    case 't':
    case OPT_SYNC: return cmd == CMD_RUN;
    case 'c':
    case 'w': return cmd == CMD_COMPARE;
    case 'e': return cmd == CMD_SHOW;
    }
    return 0;
}

static void usage_for(cmd_t cmd, FILE *f)
{
    if (cmd == CMD_COMPARE)
        usage_compare(f);
    else if (cmd == CMD_SHOW)
        usage_show(f);
    else if (cmd == CMD_CHECK)
        usage_check(f);
    else
        usage_run(f);
}

/* Parses argv for `cmd`; returns 0 to go on, 1 when --help/--version was served, -1 on a usage
 * error (already printed). */
static int parse_opts(cmd_t cmd, int argc, char **argv, opts_t *o)
{
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":sS:jct:g:e:w:qhV", long_opts, NULL)) != -1) {
        if (c == '?' || c == ':') {
            const char *what = c == ':' ? "needs a value" : "is not an option";
            if (optopt && optopt < 256)
                fprintf(stderr, "%s: -%c %s\n", prog, optopt, what);
            else
                fprintf(stderr, "%s: %s %s\n", prog, argv[optind - 1], what);
            fprintf(stderr, "try '%s%s --help'\n", prog,
                    cmd == CMD_COMPARE ? " compare"
                    : cmd == CMD_SHOW  ? " show"
                    : cmd == CMD_CHECK ? " check"
                                       : "");
            return -1;
        }
        if (!opt_allowed(cmd, c)) {
            fprintf(stderr, "%s: %s does not apply to this command\n", prog, argv[optind - 1]);
            return -1;
        }
        switch (c) {
        case 's': o->simulate = 1; break;
        case 'S':
            if (o->n_sets == MAX_SETS) {
                fprintf(stderr, "%s: at most %d --set options\n", prog, MAX_SETS);
                return -1;
            }
            o->sets[o->n_sets++] = optarg;
            break;
        case 'j': o->json = 1; break;
        case 'c': o->csv = 1; break;
        case 't': o->trace = optarg; break;
        case 'g': o->svg = optarg; break;
        case 'e':
            if (strcmp(optarg, "csv") != 0 && strcmp(optarg, "yaml") != 0) {
                fprintf(stderr, "%s: --emit %s: unknown format (allowed: csv, yaml)\n", prog,
                        optarg);
                return -1;
            }
            o->emit = optarg;
            break;
        case 'w':
            if (o->n_sweep == MAX_SWEEP) {
                fprintf(stderr, "%s: at most %d --sweep options\n", prog, MAX_SWEEP);
                return -1;
            }
            if (!strchr(optarg, '=') || strchr(optarg, '=') == optarg) {
                fprintf(stderr, "%s: --sweep %s: expected KEY=V1,V2,...\n", prog, optarg);
                return -1;
            }
            o->sweep[o->n_sweep++] = optarg;
            break;
        case OPT_TIMEOUT: {
            char *end;
            errno = 0;
            o->timeout_s = strtod(optarg, &end);
            if (errno || *end || !(o->timeout_s > 0)) {
                fprintf(stderr, "%s: --timeout %s: expected a positive number of seconds\n", prog,
                        optarg);
                return -1;
            }
            break;
        }
        case OPT_SYNC: o->sync = 1; break;
        case 'q': o->quiet = 1; break;
        case 'h': usage_for(cmd, stdout); return 1;
        case 'V': printf("ppsched %s\n", PP_VERSION); return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * One job: a config file taken through the whole chain
 * ------------------------------------------------------------------------------------------- */

typedef struct job {
    pp_config_t cfg;
    pp_schedule_t sched;
    pp_plan_t plan;
    pp_cost_model_t cost;
    pp_timeline_t sim;  /* always: the simulator's timeline */
    pp_timeline_t meas; /* measure mode: the executor's */
    pp_report_t report;
    int measured; /* 1 when `meas` holds a run */
    int have_report;
    char label[256]; /* schedule name plus the sweep values, for tables */
} job_t;

static void job_free(job_t *j)
{
    if (j->have_report) report_free(&j->report);
    timeline_free(&j->meas);
    timeline_free(&j->sim);
    cost_model_free(&j->cost);
    plan_free(&j->plan);
    schedule_free(&j->sched);
    config_free(&j->cfg);
    memset(j, 0, sizeof *j);
}

/* Load, resolve, generate, validate, lower and validate again. n_visible: CUDA devices seen. */
static pp_status_t job_plan(job_t *j, const char *path, const char *const *sets, int n_sets,
                            int n_visible)
{
    PP_CHECK(config_load(&j->cfg, path, sets, n_sets));
    PP_CHECK(config_resolve(&j->cfg, n_visible));
    PP_CHECK(generate_schedule(&j->sched, &j->cfg));
    pp_status_t st = schedule_validate(&j->sched);
    if (st == PP_OK) st = plan_lower(&j->plan, &j->sched, &j->cfg);
    if (st == PP_OK) st = plan_validate(&j->plan);
    if (st == PP_ERR_INPUT)
        fprintf(stderr, "%s: the %s schedule above is not valid\n", path,
                sched_kind_name(j->cfg.schedule.kind));
    return st;
}

/* The cost model a measured run implies: per stage, the mean duration of each compute kind, and
 * the mean cross-device transfer. Kinds a plan does not use keep 0 (B falls back to I + W). */
static pp_status_t cost_from_measure(pp_cost_model_t *cm, const pp_plan_t *plan,
                                     const pp_timeline_t *tl)
{
    pp_cost_cfg_t zero = {0};
    int n = plan->n_stages;
    PP_CHECK(cost_model_uniform(cm, n, &zero));
    int *cnt = calloc((size_t)n * 4, sizeof *cnt);
    PP_ALLOC_CHECK(cnt);
    double *per[4] = {cm->f, cm->b, cm->i, cm->w};
    double send = 0;
    int n_send = 0;
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        double dur = tl->t[k].end_ms - tl->t[k].start_ms;
        if (pp_action_is_compute(op->kind)) {
            per[op->kind][op->stage] += dur;
            cnt[op->kind * n + op->stage]++;
        } else if ((op->kind == PP_ACT_SEND_F || op->kind == PP_ACT_SEND_B) &&
                   op->link != PP_LINK_LOCAL) {
            send += dur;
            n_send++;
        }
    }
    for (int kind = 0; kind < 4; kind++)
        for (int st = 0; st < n; st++)
            if (cnt[kind * n + st]) per[kind][st] /= cnt[kind * n + st];
    for (int st = 0; st < n; st++)
        if (!cnt[PP_ACT_B * n + st]) cm->b[st] = cm->i[st] + cm->w[st];
    cm->send = n_send ? send / n_send : 0;
    free(cnt);
    return PP_OK;
}

/* Simulate always; execute when `measure`. In measure mode the simulated figure comes from the
 * simulator fed with the measured op costs, so the two differ only by what the cost model leaves
 * out (launch gaps, contention, the order the GPU really ran things in). Then build the report. */
static pp_status_t job_run(job_t *j, int measure, const opts_t *o)
{
    PP_CHECK(cost_model_uniform(&j->cost, j->plan.n_stages, &j->cfg.cost));
    /* `cost:` is per device's share of the layers; a chunk of an interleaved device holds 1/v. */
    for (int s = 0; s < j->plan.n_stages; s++) {
        double k = 1.0 / j->plan.chunks;
        j->cost.f[s] *= k;
        j->cost.b[s] *= k;
        j->cost.i[s] *= k;
        j->cost.w[s] *= k;
    }
    PP_CHECK(simulate_plan(&j->sim, &j->plan, &j->cost));
    if (measure) {
        pp_exec_opts_t eo = {
            .sync = o->sync,
            .graph = j->cfg.run.graph && !o->sync,
            .timing = j->cfg.run.timing,
            .timeout_s = o->timeout_s > 0 ? o->timeout_s : j->cfg.run.timeout_s,
            .verbose = !o->quiet && !o->json,
        };
        PP_CHECK(execute_plan(&j->meas, NULL, &j->plan, &j->cfg, &eo));
        j->measured = 1;
        if (j->meas.has_op_times) {
            cost_model_free(&j->cost);
            timeline_free(&j->sim);
            PP_CHECK(cost_from_measure(&j->cost, &j->plan, &j->meas));
            PP_CHECK(simulate_plan(&j->sim, &j->plan, &j->cost));
        }
    }
    PP_CHECK(
        report_build(&j->report, &j->cfg, &j->plan, j->measured ? &j->meas : &j->sim, &j->sim));
    j->have_report = 1;
    return PP_OK;
}

static const pp_timeline_t *job_timeline(const job_t *j)
{
    return j->measured ? &j->meas : &j->sim;
}

/* Decide measure vs simulate, printing the banner when a GPU run was wanted but is not possible. */
static int want_measure(const opts_t *o, int n_visible)
{
    if (o->simulate) return 0;
    if (n_visible > 0) return 1;
    if (!o->quiet)
        fprintf(stderr, "# no CUDA device found: simulating with the cost model (pass --simulate "
                        "to ask for this explicitly)\n");
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Commands
 * ------------------------------------------------------------------------------------------- */

static pp_status_t cmd_run(const char *path, const opts_t *o)
{
    job_t j = {0};
    pp_status_t st;
    int n_visible = o->simulate ? 0 : execute_device_count();
    int measure = want_measure(o, n_visible);
    PP_CHECK_GOTO(job_plan(&j, path, o->sets, o->n_sets, n_visible), st, done);
    PP_CHECK_GOTO(job_run(&j, measure, o), st, done);
    if (o->json)
        report_print_json(&j.report, stdout);
    else
        report_print_table(&j.report, &j.cfg, stdout);
    if (o->trace)
        PP_CHECK_GOTO(report_write_trace_devices(&j.plan, job_timeline(&j),
                                                 j.measured ? j.cfg.pipeline.device_ids : NULL,
                                                 o->trace),
                      st, done);
    if (o->svg)
        PP_CHECK_GOTO(report_write_svg(&j.plan, job_timeline(&j), j.cfg.name, o->svg), st, done);
    if (!o->json && !o->quiet) {
        if (o->trace)
            printf("# trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n", o->trace);
        if (o->svg) printf("# gantt chart: %s\n", o->svg);
    }
done:
    job_free(&j);
    return st;
}

static pp_status_t cmd_check(const char *path, const opts_t *o)
{
    job_t j = {0};
    int n_visible = execute_device_count();
    pp_status_t st = job_plan(&j, path, o->sets, o->n_sets, n_visible);
    if (st == PP_OK) {
        int max_slots = 0;
        for (int s = 0; s < j.plan.n_stages; s++)
            if (j.plan.slots_per_stage[s] > max_slots) max_slots = j.plan.slots_per_stage[s];
        printf("%s: ok: %s, %d devices, %d stages, %d micro-batches, %d ops, at most %d "
               "activation slots per stage\n",
               path, sched_kind_name(j.cfg.schedule.kind), j.plan.n_devices, j.plan.n_stages,
               j.plan.n_mb, j.plan.n_ops, max_slots);
    }
    job_free(&j);
    return st;
}

static pp_status_t cmd_show(const char *path, const opts_t *o)
{
    job_t j = {0};
    pp_status_t st;
    PP_CHECK_GOTO(job_plan(&j, path, o->sets, o->n_sets, execute_device_count()), st, done);
    if (o->emit && strcmp(o->emit, "csv") == 0) {
        st = schedule_write_csv(&j.sched, stdout);
    } else if (o->emit) {
        st = schedule_write_yaml(&j.sched, stdout);
    } else {
        printf("# %s: %s, p=%d, stages=%d, m=%d, v=%d\n", path,
               sched_kind_name(j.cfg.schedule.kind), j.plan.n_devices, j.plan.n_stages,
               j.plan.n_mb, j.plan.chunks);
        plan_print_grid(&j.plan, stdout);
    }
done:
    job_free(&j);
    return st;
}

/* --- compare ------------------------------------------------------------------------------- */

/* The values of one --sweep: key and a list split at commas (pointers into `buf`). */
typedef struct sweep {
    char key[128];
    char buf[1024];
    const char *val[64];
    int n;
} sweep_t;

static pp_status_t sweep_parse(sweep_t *sw, const char *arg)
{
    const char *eq = strchr(arg, '=');
    size_t klen = (size_t)(eq - arg);
    if (klen >= sizeof sw->key || strlen(eq + 1) >= sizeof sw->buf) {
        fprintf(stderr, "%s: --sweep %s: too long\n", prog, arg);
        return PP_ERR_USAGE;
    }
    memcpy(sw->key, arg, klen);
    sw->key[klen] = '\0';
    strcpy(sw->buf, eq + 1);
    sw->n = 0;
    for (char *tok = strtok(sw->buf, ","); tok; tok = strtok(NULL, ",")) {
        if (sw->n == 64) {
            fprintf(stderr, "%s: --sweep %s: at most 64 values\n", prog, arg);
            return PP_ERR_USAGE;
        }
        sw->val[sw->n++] = tok;
    }
    if (sw->n == 0) {
        fprintf(stderr, "%s: --sweep %s: no values\n", prog, arg);
        return PP_ERR_USAGE;
    }
    return PP_OK;
}

static void fmt_num(char *buf, size_t n, double v, const char *fmt)
{
    if (isnan(v))
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

static void compare_print_table(job_t *jobs, int n, FILE *f)
{
    fprintf(f, "%-36s %3s %4s %2s %9s %9s %9s %11s %8s %7s %7s %7s %9s %6s\n", "schedule", "p", "m",
            "v", "step", "p10", "p90", "tokens/s", "TFLOP/s", "bubble", "sim", "theory", "peak mem",
            "peak");
    fprintf(f, "%-36s %3s %4s %2s %9s %9s %9s %11s %8s %7s %7s %7s %9s %6s\n", "", "", "", "",
            "(ms)", "(ms)", "(ms)", "", "", "(%)", "(%)", "(%)", "(GiB)", "mb");
    for (int i = 0; i < n; i++) {
        const pp_report_t *r = &jobs[i].report;
        size_t mem;
        int inflight;
        fullest_device(r, &mem, &inflight);
        char memb[32], th[32], sim[32], tf[32], bub[32];
        fmt_num(memb, sizeof memb, mem ? (double)mem / (1u << 30) : NAN, "%.2f");
        fmt_num(bub, sizeof bub, r->bubble * 100, "%.1f");
        fmt_num(th, sizeof th, r->bubble_theory * 100, "%.1f");
        fmt_num(sim, sizeof sim, r->bubble_simulated * 100, "%.1f");
        fmt_num(tf, sizeof tf, r->tflops, "%.1f");
        fprintf(f, "%-36.36s %3d %4d %2d %9.3f %9.3f %9.3f %11.4g %8s %7s %7s %7s %9s %6d\n",
                jobs[i].label, r->devices, r->micro_batches, r->chunks, r->step_ms, r->step_ms_p10,
                r->step_ms_p90, r->tokens_per_s, tf, bub, sim, th, memb, inflight);
    }
    /* Verdict: the highest throughput (runs of different m do different work per step). */
    int best = 0;
    for (int i = 1; i < n; i++)
        if (jobs[i].report.tokens_per_s > jobs[best].report.tokens_per_s) best = i;
    if (n > 1)
        fprintf(f, "# highest throughput: %s (%.4g tokens/s, %.3f ms per step)\n", jobs[best].label,
                jobs[best].report.tokens_per_s, jobs[best].report.step_ms);
}

static void csv_field(FILE *f, double v)
{
    if (isnan(v))
        fputs(",", f);
    else
        fprintf(f, ",%.6g", v);
}

static void compare_print_csv(job_t *jobs, int n, FILE *f)
{
    fprintf(f, "schedule,mode,devices,stages,micro_batches,chunks,step_ms,step_ms_p10,step_ms_p90,"
               "tokens_per_s,tflops,bubble,bubble_simulated,bubble_theory,peak_mem_bytes,"
               "peak_inflight_microbatches\n");
    for (int i = 0; i < n; i++) {
        const pp_report_t *r = &jobs[i].report;
        size_t mem;
        int inflight;
        fullest_device(r, &mem, &inflight);
        fprintf(f, "\"%s\",%s,%d,%d,%d,%d", jobs[i].label,
                r->mode == PP_MODE_MEASURE ? "measure" : "simulate", r->devices, r->stages,
                r->micro_batches, r->chunks);
        csv_field(f, r->step_ms);
        csv_field(f, r->step_ms_p10);
        csv_field(f, r->step_ms_p90);
        csv_field(f, r->tokens_per_s);
        csv_field(f, r->tflops);
        csv_field(f, r->bubble);
        csv_field(f, r->bubble_simulated);
        csv_field(f, r->bubble_theory);
        fprintf(f, ",%zu,%d\n", mem, inflight);
    }
}

/* One bubble-against-m chart per schedule (same name, p and v) that ran at two or more m. */
static pp_status_t compare_bubble_charts(job_t *jobs, int n, const char *dir, int measure)
{
    int *done = calloc((size_t)n, sizeof *done), *m = calloc((size_t)n, sizeof *m);
    double *meas = calloc((size_t)n, sizeof *meas), *sim = calloc((size_t)n, sizeof *sim);
    pp_status_t st = PP_OK;
    if (!done || !m || !meas || !sim) {
        st = PP_ERR_NOMEM;
        fprintf(stderr, "%s: out of host memory\n", prog);
        goto out;
    }
    for (int i = 0; i < n && st == PP_OK; i++) {
        if (done[i]) continue;
        const job_t *a = &jobs[i];
        int k = 0;
        for (int j = i; j < n; j++) {
            const job_t *b = &jobs[j];
            if (done[j] || strcmp(a->cfg.name, b->cfg.name) != 0 ||
                a->plan.n_devices != b->plan.n_devices || a->plan.chunks != b->plan.chunks ||
                a->cfg.schedule.kind != b->cfg.schedule.kind)
                continue;
            done[j] = 1;
            m[k] = b->plan.n_mb;
            meas[k] = b->report.bubble;
            sim[k] = measure ? b->report.bubble_simulated : NAN;
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
        char path[4096], title[300];
        snprintf(path, sizeof path, "%s/bubble-%s-p%d.svg", dir, a->cfg.name, a->plan.n_devices);
        snprintf(title, sizeof title, "%s: bubble against micro-batches", a->cfg.name);
        st = report_write_bubble_chart(path, title, a->cfg.schedule.kind, a->plan.n_devices,
                                       a->plan.chunks, k, m, meas, sim,
                                       measure ? "measured" : "simulated");
    }
out:
    free(done);
    free(m);
    free(meas);
    free(sim);
    return st;
}

static pp_status_t cmd_compare(char **files, int n_files, const opts_t *o)
{
    sweep_t sw[MAX_SWEEP];
    int n_combo = 1;
    for (int k = 0; k < o->n_sweep; k++) {
        PP_CHECK(sweep_parse(&sw[k], o->sweep[k]));
        n_combo *= sw[k].n;
    }
    int n_jobs = n_files * n_combo;
    if (n_jobs > 4096) {
        fprintf(stderr, "%s: compare: %d runs is too many (at most 4096)\n", prog, n_jobs);
        return PP_ERR_USAGE;
    }
    job_t *jobs = calloc((size_t)n_jobs, sizeof *jobs);
    PP_ALLOC_CHECK(jobs);
    int n_visible = o->simulate ? 0 : execute_device_count();
    int measure = want_measure(o, n_visible);
    pp_status_t st = PP_OK;
    int done_jobs = 0;
    if (o->svg && mkdir(o->svg, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: --svg %s: %s\n", prog, o->svg, strerror(errno));
        st = PP_ERR_IO;
        goto done;
    }
    for (int fi = 0; fi < n_files; fi++) {
        for (int c = 0; c < n_combo; c++) {
            job_t *j = &jobs[done_jobs];
            const char *sets[MAX_SETS + MAX_SWEEP];
            char setbuf[MAX_SWEEP][1200];
            int n_sets = 0;
            for (int k = 0; k < o->n_sets; k++)
                sets[n_sets++] = o->sets[k];
            int rem = c;
            char suffix[200] = "";
            for (int k = o->n_sweep - 1; k >= 0; k--) {
                const char *v = sw[k].val[rem % sw[k].n];
                rem /= sw[k].n;
                snprintf(setbuf[k], sizeof setbuf[k], "%s=%s", sw[k].key, v);
                sets[n_sets++] = setbuf[k];
                const char *leaf = strrchr(sw[k].key, '.');
                char part[96];
                snprintf(part, sizeof part, " %s=%s", leaf ? leaf + 1 : sw[k].key, v);
                strncat(suffix, part, sizeof suffix - strlen(suffix) - 1);
            }
            if (!o->quiet && !o->json && !o->csv)
                fprintf(stderr, "# [%d/%d] %s%s\n", done_jobs + 1, n_jobs, files[fi], suffix);
            PP_CHECK_GOTO(job_plan(j, files[fi], sets, n_sets, n_visible), st, done);
            snprintf(j->label, sizeof j->label, "%s%s", j->cfg.name, suffix);
            PP_CHECK_GOTO(job_run(j, measure, o), st, done);
            if (o->svg) {
                char path[4096], name[300];
                snprintf(name, sizeof name, "%s", j->label);
                for (char *p = name; *p; p++)
                    if (*p == ' ' || *p == '/' || *p == '=') *p = (*p == '=') ? '-' : '_';
                snprintf(path, sizeof path, "%s/%s.svg", o->svg, name);
                PP_CHECK_GOTO(report_write_svg(&j->plan, job_timeline(j), j->label, path), st,
                              done);
            }
            done_jobs++;
        }
    }
    if (o->svg) PP_CHECK_GOTO(compare_bubble_charts(jobs, done_jobs, o->svg, measure), st, done);
    if (o->json) {
        printf("[");
        for (int i = 0; i < done_jobs; i++) {
            if (i) printf(",\n");
            report_print_json(&jobs[i].report, stdout);
        }
        printf("]\n");
    } else if (o->csv) {
        compare_print_csv(jobs, done_jobs, stdout);
    } else {
        printf("# ppsched compare: %d run%s, mode %s\n", done_jobs, done_jobs == 1 ? "" : "s",
               measure ? "measure" : "simulate");
        compare_print_table(jobs, done_jobs, stdout);
    }
done:
    for (int i = 0; i < n_jobs; i++)
        job_free(&jobs[i]);
    free(jobs);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    cmd_t cmd = CMD_RUN;
    if (argc >= 2) {
        if (strcmp(argv[1], "compare") == 0)
            cmd = CMD_COMPARE;
        else if (strcmp(argv[1], "show") == 0)
            cmd = CMD_SHOW;
        else if (strcmp(argv[1], "check") == 0)
            cmd = CMD_CHECK;
        else if (strcmp(argv[1], "help") == 0) {
            usage_run(stdout);
            return 0;
        }
    }
    int shift = cmd == CMD_RUN ? 0 : 1;
    opts_t o = {0};
    int r = parse_opts(cmd, argc - shift, argv + shift, &o);
    if (r > 0) return 0;
    if (r < 0) return 2;
    int n_args = argc - shift - optind;
    char **args = argv + shift + optind;
    if (n_args < 1 || (cmd != CMD_COMPARE && n_args > 1)) {
        fprintf(stderr, "%s: %s\n", prog,
                n_args < 1 ? "missing the schedule file" : "one schedule file at a time");
        usage_for(cmd, stderr);
        return 2;
    }
    pp_status_t st;
    switch (cmd) {
    case CMD_COMPARE: st = cmd_compare(args, n_args, &o); break;
    case CMD_SHOW: st = cmd_show(args[0], &o); break;
    case CMD_CHECK: st = cmd_check(args[0], &o); break;
    default: st = cmd_run(args[0], &o); break;
    }
    fflush(stdout);
    return pp_status_exit_code(st);
}
