/*
 * main_plan.c — the `ppsched plan` command: its options, the search (planner.h), its outputs, and
 * --verify K, which runs the best K that fit the GPUs present through the chain with the
 * executor, re-ranks them by the measured step and prints predicted against measured.
 *
 * Part of the command line (next to main.c, outside the scheduler core: it hands execute_plan to
 * the chain). Exit codes as elsewhere: 0 ok, 2 usage or input error, 1 when nothing fits the
 * memory or a GPU run fails.
 */
#include "exec/execute.h"
#include "main_plan.h"
#include "run/planner.h"
#include "report/report_io.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_MAX_SETS 256

typedef struct plan_opts {
    const char *sets[PLAN_MAX_SETS];
    int n_sets;
    char gpu_set[64];
    pp_plan_query_t q;
    int top, verify, json, csv, quiet;
    const char *emit;
} plan_opts_t;

static void plan_usage(FILE *f)
{
    fprintf(f,
            "usage: ppsched plan FILE.yaml [options]\n"
            "\n"
            "Search every schedule kind, micro-batch count and size making the global batch,\n"
            "chunks per device and placement for the model in FILE.yaml on N GPUs; rank by the\n"
            "predicted tokens/s among those that fit the memory; print the top, the memory-\n"
            "throughput Pareto front and why the best beats the runner-up.\n"
            "\n"
            "options:\n"
            "      --gpus N             pipeline devices (default: the file's pipeline.devices)\n"
            "      --gpu NAME           the GPU description (h100, h200, a100, b200)\n"
            "      --global-batch SEQS  sequences per training step (default: the file's m x b)\n"
            "      --tokens N           tokens per step instead (a multiple of model.seq_len)\n"
            "      --memory GIB         memory per GPU (default: the GPU description's)\n"
            "      --top N              rows in the table (default 10)\n"
            "  -S, --set KEY=VALUE      override a config key (repeatable)\n"
            "  -j, --json               the plan as JSON\n"
            "  -c, --csv                every candidate as CSV\n"
            "  -e, --emit FILE.yaml     write the best as a schedule file\n"
            "      --verify K           run the best K that fit the GPUs present; re-rank by the\n"
            "                           measured step (needs the CUDA build and a GPU)\n"
            "  -q, --quiet              no progress on stderr\n"
            "  -h, --help               this text\n");
}

enum { O_GPUS = 2000, O_GPU, O_BATCH, O_TOKENS, O_MEMORY, O_TOP, O_VERIFY };

static const struct option plan_long[] = {
    {"gpus", required_argument, NULL, O_GPUS},
    {"gpu", required_argument, NULL, O_GPU},
    {"global-batch", required_argument, NULL, O_BATCH},
    {"tokens", required_argument, NULL, O_TOKENS},
    {"memory", required_argument, NULL, O_MEMORY},
    {"top", required_argument, NULL, O_TOP},
    {"verify", required_argument, NULL, O_VERIFY},
    {"set", required_argument, NULL, 'S'},
    {"json", no_argument, NULL, 'j'},
    {"csv", no_argument, NULL, 'c'},
    {"emit", required_argument, NULL, 'e'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A positive number (integral when `whole`) from optarg; -1 after printing the problem. */
static double plan_number(const char *opt, const char *arg, int whole)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || *end || !(v > 0) || !isfinite(v) || (whole && v != floor(v))) {
        fprintf(stderr, "ppsched plan: --%s %s: expected a positive %s\n", opt, arg,
                whole ? "whole number" : "number");
        return -1;
    }
    return v;
}

static int plan_set(plan_opts_t *o, const char *s)
{
    if (o->n_sets == PLAN_MAX_SETS) {
        fprintf(stderr, "ppsched plan: at most %d --set options\n", PLAN_MAX_SETS);
        return -1;
    }
    o->sets[o->n_sets++] = s;
    return 0;
}

/* One option; 0 to go on, 1 after --help, -1 on a usage error (printed). */
static int plan_opt(plan_opts_t *o, int c, const char *arg)
{
    double v = 1;
    const char *name = NULL;
    for (const struct option *lo = plan_long; lo->name; lo++)
        if (lo->val == c) name = lo->name;
    switch (c) {
    case O_GPUS: v = o->q.gpus = (int)plan_number(name, arg, 1); break;
    case O_BATCH: v = (double)(o->q.global_batch = (long)plan_number(name, arg, 1)); break;
    case O_TOKENS: v = o->q.tokens = plan_number(name, arg, 1); break;
    case O_MEMORY: v = o->q.memory_gib = plan_number(name, arg, 0); break;
    case O_TOP: v = o->top = (int)plan_number(name, arg, 1); break;
    case O_VERIFY: v = o->verify = (int)plan_number(name, arg, 1); break;
    case O_GPU:
        snprintf(o->gpu_set, sizeof o->gpu_set, "cost.gpu=%s", arg);
        return plan_set(o, o->gpu_set);
    case 'S': return plan_set(o, arg);
    case 'j': o->json = 1; break;
    case 'c': o->csv = 1; break;
    case 'e': o->emit = arg; break;
    case 'q': o->quiet = 1; break;
    case 'h': plan_usage(stdout); return 1;
    default:
        fprintf(stderr,
                "ppsched plan: %s is not an option or needs a value\ntry 'ppsched plan "
                "--help'\n",
                arg ? arg : "that");
        return -1;
    }
    return v < 0 ? -1 : 0;
}

static int plan_parse(plan_opts_t *o, int argc, char **argv, const char **path)
{
    int c;
    opterr = 0;
    optind = 1;
    o->top = 10;
    while ((c = getopt_long(argc, argv, ":S:jce:qh", plan_long, NULL)) != -1) {
        int r = plan_opt(o, c, c == '?' || c == ':' ? argv[optind - 1] : optarg);
        if (r) return r;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ppsched plan: %s\n",
                optind >= argc ? "missing the schedule file" : "one schedule file at a time");
        plan_usage(stderr);
        return -1;
    }
    if (o->q.global_batch > 0 && o->q.tokens > 0) {
        fprintf(stderr, "ppsched plan: --global-batch and --tokens both given (allowed: one)\n");
        return -1;
    }
    if (o->json && o->csv) {
        fprintf(stderr, "ppsched plan: --json and --csv both given (allowed: one)\n");
        return -1;
    }
    *path = argv[optind];
    return 0;
}

/* ---- --verify ------------------------------------------------------------------------------- */

static pp_status_t plan_verify_here(const pp_search_t *s, const pp_plan_query_t *q, int k)
{
    int n_visible = execute_device_count(), n = 0;
    if (n_visible < 1) {
        fprintf(stderr, "ppsched plan: --verify: no CUDA device found\n");
        return PP_ERR_DEVICE;
    }
    if (n_visible < s->p) {
        fprintf(stderr,
                "ppsched plan: --verify: %d GPU%s present, the plan is for %d (allowed: --gpus %d "
                "or fewer)\n",
                n_visible, n_visible == 1 ? "" : "s", s->p, n_visible);
        return PP_ERR_DEVICE;
    }
    char name[256];
    execute_describe_devices(name, sizeof name);
    pp_run_opts_t ro = {.measure = 1, .exec = execute_plan, .gpu = gpu_match_device(name)};
    pp_verified_t *v = calloc((size_t)k, sizeof *v);
    PP_ALLOC_CHECK(v);
    pp_status_t st = plan_verify(s, q, k, n_visible, &ro, v, &n);
    if (st == PP_OK) st = plan_print_verified(s, v, n, stdout);
    free(v);
    return st;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* With --verify and no --gpu, the search prices the GPU present, as the verified runs do. */
static int plan_present_gpu(plan_opts_t *o)
{
    char name[256];
    execute_describe_devices(name, sizeof name);
    const pp_gpu_t *g = gpu_match_device(name);
    if (!g) return 0;
    snprintf(o->gpu_set, sizeof o->gpu_set, "cost.gpu=%s", g->name);
    return plan_set(o, o->gpu_set);
}

static pp_status_t plan_outputs(const pp_search_t *s, const plan_opts_t *o)
{
    if (o->json) return plan_print_json(s, o->top, stdout);
    if (o->csv) return plan_print_csv(s, stdout);
    return plan_print_table(s, o->top, stdout);
}

int plan_main(int argc, char **argv)
{
    plan_opts_t o;
    const char *path = NULL;
    memset(&o, 0, sizeof o);
    int r = plan_parse(&o, argc, argv, &path);
    if (r) return r > 0 ? 0 : 2;
    if (o.verify > 0 && !execute_built_with_cuda()) {
        fprintf(stderr, "ppsched plan: --verify needs the CUDA build (ppsched was built without "
                        "CUDA)\n");
        return 2;
    }
    if (o.verify > 0 && !o.gpu_set[0] && plan_present_gpu(&o) < 0) return 2;
    o.q.path = path;
    o.q.sets = o.sets;
    o.q.n_sets = o.n_sets;
    o.q.progress = !o.quiet;
    if (o.emit && out_probe(o.emit, "the schedule file") != PP_OK) return 1;
    pp_search_t s;
    pp_status_t st = plan_search(&s, &o.q);
    if (st == PP_OK && plan_print_nothing_fits(&s, stderr)) {
        plan_search_free(&s);
        return 1;
    }
    if (st == PP_OK) st = plan_outputs(&s, &o);
    if (st == PP_OK && o.emit) {
        st = plan_write_yaml(&s, &s.c[0], o.emit);
        if (st == PP_OK && !o.quiet) fprintf(stderr, "# wrote %s (%s)\n", o.emit, s.c[0].label);
    }
    if (st == PP_OK && o.verify > 0) st = plan_verify_here(&s, &o.q, o.verify);
    plan_search_free(&s);
    return pp_status_exit_code(st);
}
