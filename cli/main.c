/*
 * main.c — the ppsched command line.
 *
 *   ppsched FILE.yaml [options]          run (measure on the GPUs; simulate where there are none)
 *   ppsched compare FILE... [options]    schedules side by side in one table
 *   ppsched show FILE [--emit csv|yaml]  the plan as a text grid, or the schedule exported
 *   ppsched check FILE                   load, generate, lower and validate; print a summary
 *   ppsched profile FILE [-o OUT.yaml]   measure stage and transfer costs on the GPU (profile.h)
 *   ppsched plan FILE [options]          search the schedules for a model and GPUs (main_plan.c)
 *
 * This file parses arguments and dispatches commands; every command goes through the one chain of
 * run.h (config → schedule → plan → execute | simulate → report); compare's runs are compare.h's,
 * its outputs report_compare.h's. Exit codes: 0 ok, 2 usage or input error, 1 runtime failure.
 * Only this file exits. Under mpirun (pp_group.h)
 * main starts the process group, only the run command runs, every process agrees on loading and
 * on measuring or simulating, only rank 0 prints, and every process exits with the same code.
 */
#include "exec/execute.h"
#include "main_plan.h"
#include "model/profile.h"
#include "run/profile_run.h"
#include "run/compare.h"
#include "report/report_io.h"
#include "run/run.h"

#include <errno.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

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
    int critical_path;            /* --critical-path */
    const char *trace;            /* --trace FILE */
    const char *svg;              /* --svg FILE (run) or DIR (compare) */
    const char *emit;             /* --emit csv|yaml (show) */
    char timeout_set[64];         /* --timeout S as the override "--timeout run.timeout=S" */
    const char *sweep[MAX_SWEEP]; /* --sweep key=v1,v2,... (compare) */
    int n_sweep;
    char gpu_set[64];   /* --gpu NAME, as the override cost.gpu=NAME */
    const char *output; /* -o FILE (profile) */
    pp_group_t *group;  /* the processes of an MPI launch; rank 0 prints */
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
        "      --gpu NAME         price the stages on this GPU description (h100, h200, a100,\n"
        "                         b200; same as --set cost.gpu=NAME)\n"
        "  -t, --trace FILE.json  write a Chrome trace / Perfetto timeline of the step\n"
        "  -g, --svg FILE.svg     write a Gantt chart of the step\n"
        "      --critical-path    list the chain of ops that set the step's makespan\n"
        "      --timeout SECONDS  longest wait for one step before reporting the pending op\n"
        "                         (read as --set run.timeout=SECONDS)\n"
        "      --sync             naive baseline: host sync after every op, one stream per device\n"
        "                         (not with --simulate)\n"
        "  -q, --quiet            no banner\n"
        "  -h, --help             this text\n"
        "  -V, --version          print the version\n"
        "\n"
        "other commands: ppsched compare FILE... | ppsched show FILE | ppsched check FILE |\n"
        "                ppsched profile FILE | ppsched plan FILE\n"
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
        "  -w, --sweep KEY=V1,V2,...  run the cross product over the listed values (repeatable;\n"
        "                             a [list] is one value)\n"
        "      --gpu NAME             price the stages on this GPU description\n"
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

static void usage_profile(FILE *f)
{
    fprintf(
        f, "usage: ppsched profile FILE.yaml [options]\n"
           "\n"
           "Measure, on the first GPU of the pipeline, the forward, input-gradient and weight-\n"
           "gradient time of a middle, a first and a last stage of the model in FILE.yaml, their\n"
           "memory, and (with two GPUs) peer copies; then the whole model's step on that GPU\n"
           "(1F1B, m = 8 and 32) and DualPipeV's with its pairs on one and on two streams, at the\n"
           "micro-batch of FILE.yaml and at a quarter and a sixteenth of its tokens; write a\n"
           "profile that `cost: {profile: FILE}` reads. run.steps sets the number of timed graph\n"
           "replays of the passes.\n"
           "\n"
           "options:\n"
           "  -o, --output FILE      write the profile to FILE (default: standard output)\n"
           "  -S, --set KEY=VALUE    override a config key (repeatable)\n"
           "  -q, --quiet            no progress or summary on stderr\n"
           "  -h, --help             this text\n");
}

enum { OPT_TIMEOUT = 1000, OPT_SYNC, OPT_CRITICAL_PATH, OPT_GPU };

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
    {"critical-path", no_argument, NULL, OPT_CRITICAL_PATH},
    {"gpu", required_argument, NULL, OPT_GPU},
    {"output", required_argument, NULL, 'o'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef enum { CMD_RUN, CMD_COMPARE, CMD_SHOW, CMD_CHECK, CMD_PROFILE } cmd_t;

/* Which options each command accepts (getopt_long parses all; this rejects the others). */
static int opt_allowed(cmd_t cmd, int c)
{
    switch (c) {
    case 'S':
    case 'h':
    case 'V': return 1;
    case 'q': return cmd != CMD_SHOW && cmd != CMD_CHECK;
    case 'o': return cmd == CMD_PROFILE;
    case 's':
    case 'j':
    case 'g':
    case OPT_GPU:
    case OPT_TIMEOUT: return cmd == CMD_RUN || cmd == CMD_COMPARE;
    case 't':
    case OPT_SYNC:
    case OPT_CRITICAL_PATH: return cmd == CMD_RUN;
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
    else if (cmd == CMD_PROFILE)
        usage_profile(f);
    else
        usage_run(f);
}

/* Parses argv for `cmd`; returns 0 to go on, 1 when --help/--version was served, -1 on a usage
 * error (already printed). */
/* "--name" of option c, for messages. */
static const char *opt_name(int c)
{
    static char buf[40];
    for (const struct option *l = long_opts; l->name; l++)
        if (l->val == c) {
            snprintf(buf, sizeof buf, "--%s", l->name);
            return buf;
        }
    return "an option";
}

/* Options that take effect once: a second one would silently replace the first. */
static int once_only(int c)
{
    return c != 'S' && c != 'w' && c != 'h' && c != 'V';
}

/* Options that contradict each other. */
static int check_opts(const opts_t *o)
{
    static const char *const why[] = {
        "--json and --csv: one output format at a time",
        "--sync and --simulate: --sync is the executor's eager baseline; a simulation runs none",
    };
    int bad = o->json && o->csv ? 0 : o->sync && o->simulate ? 1 : -1;
    if (bad < 0) return 0;
    fprintf(stderr, "%s: %s (allowed: one of them)\n", prog, why[bad]);
    return -1;
}

static int parse_opts(cmd_t cmd, int argc, char **argv, opts_t *o)
{
    int c;
    unsigned char seen[256] = {0};
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":sS:jct:g:e:w:o:qhV", long_opts, NULL)) != -1) {
        if (c == '?' || c == ':') {
            const char *what = c == ':' ? "needs a value" : "is not an option";
            if (optopt && optopt < 256)
                fprintf(stderr, "%s: -%c %s\n", prog, optopt, what);
            else
                fprintf(stderr, "%s: %s %s\n", prog, argv[optind - 1], what);
            fprintf(stderr, "try '%s%s --help'\n", prog,
                    cmd == CMD_COMPARE   ? " compare"
                    : cmd == CMD_SHOW    ? " show"
                    : cmd == CMD_CHECK   ? " check"
                    : cmd == CMD_PROFILE ? " profile"
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
            if (o->n_sets == MAX_SETS - 1) { /* one kept for --timeout */
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
        case OPT_TIMEOUT:
            /* run.timeout's own parser and range: the value goes in as an override (last). */
            if (snprintf(o->timeout_set, sizeof o->timeout_set, "--timeout run.timeout=%s",
                         optarg) >= (int)sizeof o->timeout_set) {
                fprintf(stderr, "%s: --timeout %.32s...: too long\n", prog, optarg);
                return -1;
            }
            break;
        case OPT_SYNC: o->sync = 1; break;
        case OPT_CRITICAL_PATH: o->critical_path = 1; break;
        case 'q': o->quiet = 1; break;
        case 'o': o->output = optarg; break;
        case OPT_GPU:
            if (o->n_sets == MAX_SETS) {
                fprintf(stderr, "%s: at most %d --set options\n", prog, MAX_SETS);
                return -1;
            }
            snprintf(o->gpu_set, sizeof o->gpu_set, "cost.gpu=%s", optarg);
            o->sets[o->n_sets++] = o->gpu_set;
            break;
        case 'h': usage_for(cmd, stdout); return 1;
        case 'V': printf("ppsched %s\n", PP_VERSION); return 1;
        }
        /* long-only options are 1000.. and land on 232..: no short option is there */
        if (once_only(c) && seen[c % 256]++) {
            fprintf(stderr, "%s: %s given twice (allowed: once)\n", prog, opt_name(c));
            return -1;
        }
    }
    if (o->timeout_set[0]) o->sets[o->n_sets++] = o->timeout_set;
    return check_opts(o);
}

/* ---------------------------------------------------------------------------------------------
 * Runs
 * ------------------------------------------------------------------------------------------- */

/* The GPU table's row for the devices present, when it knows them. */
static const pp_gpu_t *present_gpu(void)
{
    char name[256];
    execute_describe_devices(name, sizeof name);
    return gpu_match_device(name);
}

/* The chain's options for a command's flags. */
static pp_run_opts_t run_opts(const opts_t *o, int measure)
{
    pp_run_opts_t ro = {.measure = measure,
                        .exec = execute_plan,
                        .sync = o->sync,
                        .verbose = !o->quiet && !o->json && o->group->rank == 0,
                        .gpu = measure ? present_gpu() : NULL,
                        .group = o->group};
    return ro;
}

/* Measure on the GPUs, or simulate (asked for, or no device). */
static int want_measure(const opts_t *o, int n_visible)
{
    return !o->simulate && n_visible > 0;
}

/* The note that a GPU run was wanted but is not possible, into buf; NULL when there is none. It is
 * printed once the input has loaded, so an input error comes first and alone. */
static const char *simulating_note(const opts_t *o, int n_visible, char *buf, size_t size)
{
    if (o->simulate || n_visible > 0 || o->quiet || o->group->rank != 0) return NULL;
    snprintf(buf, size,
             "# %s: simulating with the cost model (pass --simulate to ask for this "
             "explicitly)%s\n",
             execute_built_with_cuda() ? "no CUDA device found" : "ppsched was built without CUDA",
             o->sync ? "; --sync does not apply to a simulation" : "");
    return buf;
}

/* ---------------------------------------------------------------------------------------------
 * Commands
 * ------------------------------------------------------------------------------------------- */

/* Load the run on every process and agree: a failure on any one (its own message printed) is
 * every process's; then check the split over the processes. A bad output path of rank 0's is
 * found now, not after the whole measurement. */
static pp_status_t load_agreed(pp_run_t *j, const char *path, const opts_t *o, int n_visible)
{
    pp_status_t st = run_load(j, path, NULL, o->sets, o->n_sets, n_visible);
    if (st == PP_OK && o->group->rank == 0 && o->trace) st = out_probe(o->trace, "the trace");
    if (st == PP_OK && o->group->rank == 0 && o->svg) st = out_probe(o->svg, "the SVG chart");
    PP_CHECK(group_agree(o->group, st));
    return run_check_processes(j, o->group);
}

static pp_status_t cmd_run(const char *path, const opts_t *o)
{
    pp_run_t j = {0};
    char note[256];
    pp_status_t st;
    int n_visible = o->simulate ? 0 : execute_device_count();
    /* Under mpirun every process measures, or every one simulates (one without a GPU decides). */
    int no_gpu = !want_measure(o, n_visible);
    if (o->group->size > 1 && o->group->ops->max_int(o->group, &no_gpu) != PP_OK)
        return PP_ERR_INTERNAL;
    if (no_gpu) n_visible = 0;
    pp_run_opts_t ro = run_opts(o, want_measure(o, n_visible));
    /* Across hosts pipeline.devices counts every host's GPUs: no one host can check the ids (the
     * executor checks each process's own). */
    const int spans_hosts = o->group->local_size < o->group->size;
    PP_CHECK_GOTO(load_agreed(&j, path, o, spans_hosts && n_visible > 0 ? -1 : n_visible), st,
                  done);
    if (simulating_note(o, n_visible, note, sizeof note)) fputs(note, stderr);
    if (!o->quiet && !o->json) run_note_processes(&j, o->group, stderr);
    PP_CHECK_GOTO(run_go(&j, &ro), st, done);
    if (o->group->rank != 0) goto done; /* rank 0 prints the one report */
    if (o->json)
        st = report_print_json(&j.report, stdout);
    else
        st = report_print_table(&j.report, &j.cfg, stdout);
    if (st == PP_OK && o->critical_path && !o->json)
        st = report_print_critical_path(&j.report, stdout);
    if (st != PP_OK) goto done;
    if (o->trace)
        PP_CHECK_GOTO(report_write_trace_devices(&j.plan, run_timeline(&j),
                                                 j.measured ? j.cfg.pipeline.device_ids : NULL,
                                                 o->trace),
                      st, done);
    if (o->svg)
        PP_CHECK_GOTO(report_write_svg(&j.plan, run_timeline(&j), j.cfg.name, o->svg), st, done);
    if (!o->json && !o->quiet) {
        if (o->trace)
            printf("# trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n", o->trace);
        if (o->svg) printf("# gantt chart: %s\n", o->svg);
    }
done:
    run_free(&j);
    return st;
}

static pp_status_t cmd_profile(const char *path, const opts_t *o)
{
    pp_config_t cfg;
    pp_profile_t prof;
    pp_status_t st;
    FILE *out = stdout;
    PP_CHECK_GOTO(config_load(&cfg, path, o->sets, o->n_sets), st, done);
    PP_CHECK_GOTO(config_resolve(&cfg, execute_device_count()), st, done);
    PP_CHECK_GOTO(execute_profile(&prof, &cfg, cfg.run.steps, !o->quiet), st, done);
    PP_CHECK_GOTO(profile_measure_runs(&prof, &cfg, execute_plan, !o->quiet), st, done);
    if (!o->quiet) profile_print_summary(&prof, stderr);
    if (o->output && !(out = fopen(o->output, "w"))) {
        fprintf(stderr, "%s: -o %s: %s\n", prog, o->output, strerror(errno));
        st = PP_ERR_IO;
        goto done;
    }
    st = profile_write(&prof, out);
    if (out != stdout && fclose(out) != 0 && st == PP_OK) {
        fprintf(stderr, "%s: -o %s: %s\n", prog, o->output, strerror(errno));
        st = PP_ERR_IO;
    }
    if (st == PP_OK && o->output && !o->quiet) fprintf(stderr, "# profile: %s\n", o->output);
done:
    config_free(&cfg);
    return st;
}

static pp_status_t cmd_check(const char *path, const opts_t *o)
{
    pp_run_t j = {0};
    int n_visible = execute_device_count();
    pp_status_t st = run_load(&j, path, NULL, o->sets, o->n_sets, n_visible);
    if (st == PP_OK) {
        int max_slots = 0;
        for (int s = 0; s < j.plan.n_stages; s++)
            if (j.plan.slots_per_stage[s] > max_slots) max_slots = j.plan.slots_per_stage[s];
        printf("%s: ok: %s (%s), %d %s, %d %s, %d %s, %d ops, at most %d activation %s per "
               "stage\n",
               path, j.cfg.name, sched_kind_name(j.cfg.schedule.kind), j.plan.n_devices,
               pp_plural(j.plan.n_devices, "device", "devices"), j.plan.n_stages,
               pp_plural(j.plan.n_stages, "stage", "stages"), j.plan.n_mb,
               pp_plural(j.plan.n_mb, "micro-batch", "micro-batches"), j.plan.n_ops, max_slots,
               pp_plural(max_slots, "slot", "slots"));
    }
    run_free(&j);
    return st;
}

static pp_status_t cmd_show(const char *path, const opts_t *o)
{
    pp_run_t j = {0};
    pp_status_t st;
    PP_CHECK_GOTO(run_load(&j, path, NULL, o->sets, o->n_sets, execute_device_count()), st, done);
    if (o->emit && strcmp(o->emit, "csv") == 0) {
        st = schedule_write_csv(&j.sched, stdout);
    } else if (o->emit) {
        st = schedule_write_yaml(&j.sched, stdout);
    } else {
        printf("# %s: %s (%s), p=%d, stages=%d, m=%d, v=%d\n", path, j.cfg.name,
               sched_kind_name(j.cfg.schedule.kind), j.plan.n_devices, j.plan.n_stages, j.plan.n_mb,
               j.plan.chunks);
        plan_print_grid(&j.plan, stdout);
        plan_print_memory(&j.plan, &j.cfg, stdout);
    }
done:
    run_free(&j);
    return st;
}

/* --- compare (compare.h) ----------------------------------------------------------------- */

/* The comparison as CSV, JSON or the table. */
static pp_status_t compare_print(const pp_compare_t *c, const opts_t *o)
{
    if (o->csv) return compare_print_csv(c->rows, c->n_rows, stdout);
    if (o->json) return compare_print_json(c->rows, c->n_rows, stdout);
    printf("# ppsched compare: %d run%s, mode %s\n", c->n_rows, c->n_rows == 1 ? "" : "s",
           c->measure ? "measure" : "simulate");
    return compare_print_table(c->rows, c->n_rows, stdout);
}

static pp_status_t cmd_compare(char **files, int n_files, const opts_t *o)
{
    int n_visible = o->simulate ? 0 : execute_device_count();
    pp_run_opts_t ro = run_opts(o, want_measure(o, n_visible));
    char note[256];
    pp_compare_opts_t co = {.files = files,
                            .n_files = n_files,
                            .sets = o->sets,
                            .n_sets = o->n_sets,
                            .sweeps = o->sweep,
                            .n_sweeps = o->n_sweep,
                            .svg_dir = o->svg,
                            .progress = !o->quiet && !o->json && !o->csv,
                            .n_visible = n_visible,
                            .run = &ro,
                            .first_note = simulating_note(o, n_visible, note, sizeof note)};
    pp_compare_t c;
    pp_status_t st = compare_run(&c, &co);
    if (st == PP_OK) st = compare_print(&c, o);
    if (st == PP_OK) st = compare_check_failed(&c);
    compare_free(&c);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */

/* Exit code `rc`, unless standard output could not be written (a full disk, a closed pipe): then
 * say so and exit 1. Every command's output ends here, so none can exit 0 with it half written. */
static int finish_stdout(int rc)
{
    errno = 0;
    int failed = fflush(stdout) != 0 || ferror(stdout);
    failed |= fclose(stdout) != 0;
    if (failed && rc == 0) /* a failed command has said what went wrong */
        fprintf(stderr, "%s: writing standard output failed%s%s\n", prog, errno ? ": " : "",
                errno ? strerror(errno) : "");
    return failed && rc == 0 ? 1 : rc;
}

static int run_command(int argc, char **argv, pp_group_t *group)
{
    cmd_t cmd = CMD_RUN;
    static const char *const others[] = {"compare", "show", "check", "profile", "plan", "help"};
    for (size_t k = 0; group->size > 1 && argc >= 2 && k < sizeof others / sizeof others[0]; k++)
        if (strcmp(argv[1], others[k]) == 0) {
            fprintf(stderr,
                    "%s: under mpirun only `ppsched FILE.yaml` runs, not %s (%d processes)\n", prog,
                    others[k], group->size);
            return 2;
        }
    if (argc >= 2) {
        if (strcmp(argv[1], "compare") == 0)
            cmd = CMD_COMPARE;
        else if (strcmp(argv[1], "show") == 0)
            cmd = CMD_SHOW;
        else if (strcmp(argv[1], "check") == 0)
            cmd = CMD_CHECK;
        else if (strcmp(argv[1], "profile") == 0)
            cmd = CMD_PROFILE;
        else if (strcmp(argv[1], "plan") == 0)
            return finish_stdout(plan_main(argc - 1, argv + 1));
        else if (strcmp(argv[1], "help") == 0) {
            usage_run(stdout);
            return finish_stdout(0);
        }
    }
    int shift = cmd == CMD_RUN ? 0 : 1;
    opts_t o = {.group = group};
    int r = parse_opts(cmd, argc - shift, argv + shift, &o);
    if (r > 0) return finish_stdout(0);
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
    case CMD_PROFILE: st = cmd_profile(args[0], &o); break;
    default: st = cmd_run(args[0], &o); break;
    }
    return finish_stdout(pp_status_exit_code(st));
}

/* Every process of an MPI launch (pp_group.h) leaves with the same code: the worst of them. */
/* Planning a large schedule allocates and frees arrays of every op in turn (generate, lower,
 * simulate, explain, report): keeping freed memory in the process for the next instead of handing
 * it back to the kernel saves their page faults (bench/NOTES.md, "Planning at scale"). glibc's
 * largest mmap threshold is 32 MiB: larger arrays are still mapped and unmapped. */
static void heap_keep_freed(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

int main(int argc, char **argv)
{
    heap_keep_freed();
    pp_group_t group;
    pp_status_t st = group_init(&group, group_mpi_ops(), &argc, &argv);
    if (st != PP_OK) return pp_status_exit_code(st);
    return group_finish(&group, run_command(argc, argv, &group));
}
