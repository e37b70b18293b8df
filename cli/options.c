/*
 * options.c — every option of every command as a row of cli_options[], the one parser that reads
 * them (getopt_long over the rows a command recognises) and the --help made from them.
 *
 * An option with several rows has one per set of commands that list it with its own help text;
 * rows of one name agree on the letter and on taking a value. A command's --help lists the rows
 * that name it, in the table's order, its help text in a column two past the longest option (25
 * at the least). The commands run, compare, show, check and profile recognise each other's options
 * and refuse them as not applying; plan recognises only its own.
 */
#include "cli.h"

#include "schedule/kinds.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PP_VERSION "0.1.0"

/* ---------------------------------------------------------------------------------------------
 * Setters
 * ------------------------------------------------------------------------------------------- */

#define FIELD(o, opt, type) ((type *)(void *)((char *)(o) + (opt)->field))

static int set_flag(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    *FIELD(o, opt, int) = 1;
    return 0;
}

static int set_string(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    *FIELD(o, opt, const char *) = arg;
    return 0;
}

/* A numeric option's range for some commands: a row of ranges[] (beside the options). */
struct range {
    unsigned cmds;
    const char *name;
    double lo, hi;
};
static const struct range *range_of(const cli_opts_t *o, const cli_option_t *opt);

/* A positive number (integral when `whole`) within the option's range, else at most max, into
 * *v; -1 after printing the problem and the range. */
static int positive(const cli_opts_t *o, const cli_option_t *opt, const char *arg, int whole,
                    double max, double *v)
{
    char *end;
    const struct range *r = range_of(o, opt);
    double lo = r ? r->lo : 0, hi = r ? r->hi : max;
    errno = 0;
    *v = strtod(arg, &end);
    if (end == arg || *end || isnan(*v) || !(*v > 0) ||
        (whole && isfinite(*v) && *v != floor(*v))) {
        fprintf(stderr, "%s: --%s %s: expected a positive %s\n", o->cmd->prefix, opt->name, arg,
                whole ? "whole number" : "number");
        *v = -1;
        return -1;
    }
    if (errno == ERANGE || !isfinite(*v) || *v < lo || *v > hi) {
        fprintf(stderr,
                whole ? "%s: --%s %s: out of range (allowed: %.0f..%.0f)\n"
                      : "%s: --%s %s: out of range (allowed: %g..%g)\n",
                o->cmd->prefix, opt->name, arg, whole && lo < 1 ? 1 : lo, hi);
        *v = -1;
        return -1;
    }
    return 0;
}

/* A count into an int (or long) field. */
static int set_count(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    double v;
    if (positive(o, opt, arg, 1, INT_MAX, &v) < 0) return -1;
    *FIELD(o, opt, int) = (int)v;
    return 0;
}

static int set_long_count(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    double v;
    if (positive(o, opt, arg, 1, (double)(1LL << 53), &v) < 0) return -1;
    *FIELD(o, opt, long) = (long)v;
    return 0;
}

static int set_whole(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    return positive(o, opt, arg, 1, (double)(1LL << 53), FIELD(o, opt, double));
}

static int set_number(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    return positive(o, opt, arg, 0, 1e300, FIELD(o, opt, double));
}

/* One of the values the row's `arg` lists ("adamw|none"), kept as given. */
static int set_choice(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    size_t n = strlen(arg);
    for (const char *c = opt->arg; *c;) {
        size_t len = strcspn(c, "|");
        if (len == n && strncmp(c, arg, n) == 0) {
            *FIELD(o, opt, const char *) = arg;
            return 0;
        }
        c += len + (c[len] == '|');
    }
    fprintf(stderr, "%s: --%s %s: not a choice (allowed: %s)\n", o->cmd->prefix, opt->name, arg,
            opt->arg);
    return -1;
}

/* --kinds a,b,...: generated schedule kinds (names or aliases schedule.kind takes). */
static int set_kinds(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    unsigned mask = 0;
    for (const char *c = arg;;) {
        size_t len = strcspn(c, ",");
        char name[64];
        int k = -1;
        if (len > 0 && len < sizeof name) {
            memcpy(name, c, len);
            name[len] = '\0';
            k = sched_kind_find(name);
        }
        if (k < 0 || sched_kind((pp_sched_kind_t)k)->written) {
            char list[512];
            sched_kind_list(list, sizeof list);
            fprintf(stderr,
                    "%s: --%s %s: '%.*s' is not a schedule kind plan can generate "
                    "(allowed: %s)\n",
                    o->cmd->prefix, opt->name, arg, (int)len, c, list);
            return -1;
        }
        mask |= 1u << k;
        if (!c[len]) break;
        c += len + 1;
    }
    *FIELD(o, opt, unsigned) = mask;
    return 0;
}

int cli_add_set(cli_opts_t *o, const char *set)
{
    if (o->n_sets == CLI_MAX_SETS) {
        fprintf(stderr, "%s: at most %d --set options\n", o->cmd->prefix, CLI_MAX_SETS);
        return -1;
    }
    o->sets[o->n_sets++] = set;
    return 0;
}

static int add_set(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    return cli_add_set(o, arg);
}

static int add_gpu(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    if (snprintf(o->gpu_set, sizeof o->gpu_set, "--gpu= cost.gpu=%s", arg) >=
        (int)sizeof o->gpu_set) {
        fprintf(stderr, "%s: --gpu %.32s...: too long\n", o->cmd->prefix, arg);
        return -1;
    }
    return cli_add_set(o, o->gpu_set);
}

/* run.timeout's own parser and range: the value goes in as an override, after every --set. */
static int set_timeout(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    if (snprintf(o->timeout_set, sizeof o->timeout_set, "--timeout= run.timeout=%s", arg) >=
        (int)sizeof o->timeout_set) {
        fprintf(stderr, "%s: --timeout %.32s...: too long\n", o->cmd->prefix, arg);
        return -1;
    }
    return 0;
}

static int add_sweep(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    if (o->n_sweeps == CLI_MAX_SWEEPS) {
        fprintf(stderr, "%s: at most %d --sweep options\n", o->cmd->prefix, CLI_MAX_SWEEPS);
        return -1;
    }
    if (!strchr(arg, '=') || strchr(arg, '=') == arg) {
        fprintf(stderr, "%s: --sweep %s: expected KEY=V1,V2,...\n", o->cmd->prefix, arg);
        return -1;
    }
    o->sweeps[o->n_sweeps++] = arg;
    return 0;
}

static int show_help(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    cli_usage(o->cmd, stdout);
    return 1;
}

static int show_version(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    printf("ppsched %s\n", PP_VERSION);
    return 1;
}

/* ---------------------------------------------------------------------------------------------
 * The options
 * ------------------------------------------------------------------------------------------- */

#define AT(f) offsetof(cli_opts_t, f)

const cli_option_t cli_options[] = {
    /* name, letter, value, commands, help, apply, field, flags */
    /* run */
    {"simulate", 's', NULL, CLI_RUN, "predict with the cost model instead of running on GPUs",
     set_flag, AT(simulate), CLI_ONCE},
    {"set", 'S', "KEY=VALUE", CLI_RUN,
     "override a config key, e.g. --set pipeline.micro_batches=32,\n"
     "or the model by its preset: --set model=7b (repeatable, in\n"
     "order; see docs/schedule-format.md for every key)",
     add_set, 0, 0},
    {"json", 'j', NULL, CLI_RUN, "print the report as JSON (the stable schema) instead of a table",
     NULL, 0, CLI_ONCE},
    {"gpu", 0, "NAME", CLI_RUN,
     "price the stages on this GPU description (h100, h200, a100,\n"
     "b200; same as --set cost.gpu=NAME)",
     add_gpu, 0, CLI_ONCE},
    {"trace", 't', "FILE.json", CLI_RUN, "write a Chrome trace / Perfetto timeline of the step",
     NULL, 0, CLI_ONCE | CLI_OUT_FILE},
    {"svg", 'g', "FILE.svg", CLI_RUN, "write a Gantt chart of the step", NULL, 0,
     CLI_ONCE | CLI_OUT_FILE},
    {"critical-path", 0, NULL, CLI_RUN, "list the chain of ops that set the step's makespan", NULL,
     0, CLI_ONCE},
    {"timeout", 0, "SECONDS", CLI_RUN,
     "longest wait for one step before reporting the pending op\n"
     "(read as --set run.timeout=SECONDS)",
     set_timeout, 0, CLI_ONCE},
    {"sync", 0, NULL, CLI_RUN,
     "naive baseline: host sync after every op, one stream per device\n"
     "(not with --simulate)",
     set_flag, AT(sync), CLI_ONCE},
    /* compare */
    {"simulate", 's', NULL, CLI_COMPARE, "simulate every schedule instead of running it", set_flag,
     AT(simulate), CLI_ONCE},
    {"set", 'S', "KEY=VALUE", CLI_COMPARE, "override a key in every file (repeatable)", add_set, 0,
     0},
    {"sweep", 'w', "KEY=V1,V2,...", CLI_COMPARE,
     "run the cross product over the listed values (repeatable;\n"
     "a [list] is one value)",
     add_sweep, 0, 0},
    {"gpu", 0, "NAME", CLI_COMPARE, "price the stages on this GPU description", add_gpu, 0,
     CLI_ONCE},
    {"json", 'j', NULL, CLI_COMPARE, "the table as JSON (an array of reports)", NULL, 0, CLI_ONCE},
    {"csv", 'c', NULL, CLI_COMPARE, "the table as CSV", NULL, 0, CLI_ONCE},
    {"svg", 'g', "DIR", CLI_COMPARE, "one Gantt chart per run into DIR", NULL, 0,
     CLI_ONCE | CLI_OUT_DIR},
    {"timeout", 0, "SECONDS", CLI_COMPARE, "longest wait for one step", set_timeout, 0, CLI_ONCE},
    {"quiet", 'q', NULL, CLI_RUN | CLI_COMPARE, "no banner", set_flag, AT(quiet), CLI_ONCE},
    /* show */
    {"emit", 'e', "csv|yaml", CLI_SHOW,
     "print the compute schedule as PyTorch pipelining CSV (one row\n"
     "per rank) or as a YAML `schedule: steps:` block",
     cli_pick_format, 0, CLI_ONCE},
    /* profile */
    {"output", 'o', "FILE", CLI_PROFILE, "write the profile to FILE (default: standard output)",
     set_string, AT(output), CLI_ONCE | CLI_OUT_FILE},
    /* plan: repeats are not refused, the last one counts; numbers are held to their ranges */
    {"gpus", 0, "N", CLI_PLAN,
     "GPUs, 1..64, split every way into p devices x d replicas (default: the file's "
     "pipeline.devices)",
     set_count, AT(gpus), 0},
    {"gpu", 0, "NAME", CLI_PLAN, "the GPU description (h100, h200, a100, b200)", add_gpu, 0, 0},
    {"global-batch", 0, "SEQS", CLI_PLAN,
     "sequences per training step, at most 2^24 (default: the file's\nm x b)", set_long_count,
     AT(global_batch), 0},
    {"tokens", 0, "N", CLI_PLAN, "tokens per step instead (a multiple of model.seq_len)", set_whole,
     AT(tokens), 0},
    {"memory", 0, "GIB", CLI_PLAN, "memory per GPU, 0.1..100000 (default: the GPU description's)",
     set_number, AT(memory_gib), 0},
    {"optimizer", 0, "adamw|none", CLI_PLAN,
     "the optimizer whose state counts in memory (default adamw,\nwhatever run.optimizer says)",
     set_choice, AT(optimizer), 0},
    {"kinds", 0, "LIST", CLI_PLAN,
     "search only these schedule kinds, comma-separated (default: every\n"
     "kind of the kind table)",
     set_kinds, AT(kinds), 0},
    {"budget", 0, "SECONDS", CLI_PLAN,
     "stop predicting after this long, leaving the largest plans\n(default 60; 0.01..86400)",
     set_number, AT(budget_s), 0},
    {"top", 0, "N", CLI_PLAN, "rows in the table (default 10)", set_count, AT(top), 0},
    /* several */
    {"set", 'S', "KEY=VALUE", CLI_SHOW | CLI_CHECK | CLI_PROFILE | CLI_PLAN,
     "override a config key (repeatable)", add_set, 0, 0},
    {"json", 'j', NULL, CLI_PLAN, "the plan as JSON", NULL, 0, 0},
    {"csv", 'c', NULL, CLI_PLAN, "every candidate as CSV", NULL, 0, 0},
    {"emit", 'e', "FILE.yaml", CLI_PLAN, "write the best as a schedule file", NULL, 0,
     CLI_OUT_FILE},
    {"verify", 0, "K", CLI_PLAN,
     "run the best K that fit the GPUs present; re-rank by the\n"
     "measured step (needs the CUDA build and a GPU)",
     set_count, AT(verify), 0},
    {"quiet", 'q', NULL, CLI_PROFILE, "no progress or summary on stderr", set_flag, AT(quiet),
     CLI_ONCE},
    {"quiet", 'q', NULL, CLI_PLAN, "no progress on stderr", set_flag, AT(quiet), 0},
    {"help", 'h', NULL, CLI_SHARED | CLI_PLAN, "this text", show_help, 0, 0},
    {"version", 'V', NULL, CLI_RUN, "print the version", show_version, 0, 0},
    {"version", 'V', NULL, CLI_SHARED & ~CLI_RUN, NULL, show_version, 0, 0},
    {NULL, 0, NULL, 0, NULL, NULL, 0, 0},
};
_Static_assert(sizeof cli_options / sizeof cli_options[0] <= CLI_MAX_OPTIONS + 1,
               "cli_options has more rows than cli_opts_t counts (CLI_MAX_OPTIONS)");

/* Options that contradict each other, per command. */
static const struct conflict {
    unsigned cmds;
    const char *a, *b;
    const char *why;
} conflicts[] = {
    {CLI_COMPARE, "json", "csv",
     "--json and --csv: one output format at a time (allowed: one of them)"},
    {CLI_RUN, "sync", "simulate",
     "--sync and --simulate: --sync is the executor's eager baseline; a simulation runs none "
     "(allowed: one of them)"},
    {CLI_PLAN, "global-batch", "tokens", "--global-batch and --tokens both given (allowed: one)"},
    {CLI_PLAN, "json", "csv", "--json and --csv both given (allowed: one)"},
};

/* The ranges of numeric options, per command: a value outside is refused naming the range. An
 * option without a row here takes any positive value its field holds (every one of plan's has a
 * row: a count past INT_MAX, or a memory of 1e-300 GiB, is refused by name). */
static const struct range ranges[] = {
    {CLI_PLAN, "gpus", 1, PP_MAX_DEVICES},
    {CLI_PLAN, "global-batch", 1, PP_PLAN_MAX_SEQS},
    {CLI_PLAN, "tokens", 1, PP_PLAN_MAX_TOKENS},
    {CLI_PLAN, "memory", 0.1, 100000},
    {CLI_PLAN, "budget", 0.01, 86400},
    {CLI_PLAN, "top", 1, INT_MAX},
    {CLI_PLAN, "verify", 1, INT_MAX},
};

/* ---------------------------------------------------------------------------------------------
 * The parser
 * ------------------------------------------------------------------------------------------- */

static const struct range *range_of(const cli_opts_t *o, const cli_option_t *opt)
{
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++)
        if ((ranges[k].cmds & o->cmd->id) && strcmp(ranges[k].name, opt->name) == 0)
            return &ranges[k];
    return NULL;
}

/* The index of the first row named `name`: the key its count and value are kept under. */
static int option_key(const char *name)
{
    for (int k = 0; cli_options[k].name; k++)
        if (strcmp(cli_options[k].name, name) == 0) return k;
    return -1;
}

/* The row of option `name` for command `id`; NULL when no row of that name accepts it. */
static const cli_option_t *option_for(const char *name, unsigned id)
{
    for (const cli_option_t *r = cli_options; r->name; r++)
        if ((r->cmds & id) && strcmp(r->name, name) == 0) return r;
    return NULL;
}

/* The first row among those a command recognises with this name (or letter, when name is NULL). */
static const cli_option_t *option_in(unsigned scope, const char *name, int letter)
{
    for (const cli_option_t *r = cli_options; r->name; r++)
        if ((r->cmds & scope) && (name ? strcmp(r->name, name) == 0 : r->letter == letter))
            return r;
    return NULL;
}

/* getopt_long's tables of the options `cmd` recognises: each name once, its value the letter
 * (so getopt names a missing value by it) or 256 + its key. */
static void getopt_tables(const cli_command_t *cmd, struct option *longs, char *shorts)
{
    int n = 0;
    *shorts++ = ':';
    for (const cli_option_t *r = cli_options; r->name; r++) {
        if (!(r->cmds & cmd->parses) || option_in(cmd->parses, r->name, 0) != r) continue;
        longs[n++] = (struct option){r->name, r->arg ? required_argument : no_argument, NULL,
                                     r->letter ? r->letter : 256 + option_key(r->name)};
        if (!r->letter) continue;
        *shorts++ = r->letter;
        if (r->arg) *shorts++ = ':';
    }
    *shorts = '\0';
    longs[n] = (struct option){NULL, 0, NULL, 0};
}

/* An unknown option, or one without its value. */
static void bad_option(const cli_command_t *cmd, int c, char **argv)
{
    const char *what = c == ':' ? "needs a value" : "is not an option";
    if (cmd->flags & CLI_TERSE_ERRORS)
        fprintf(stderr, "%s: %s is not an option or needs a value\n", cmd->prefix,
                argv[optind - 1]);
    else if (optopt && optopt < 256)
        fprintf(stderr, "%s: -%c %s\n", cmd->prefix, optopt, what);
    else
        fprintf(stderr, "%s: %s %s\n", cmd->prefix, argv[optind - 1], what);
    fprintf(stderr, "try 'ppsched%s%s --help'\n", cmd->word ? " " : "", cmd->word ? cmd->word : "");
}

/* One option getopt returned: refused when it does not apply, applied, counted. */
static int take_option(cli_opts_t *o, int c, char **argv)
{
    const char *name =
        c < 256 ? option_in(o->cmd->parses, NULL, c)->name : cli_options[c - 256].name;
    const cli_option_t *opt = option_for(name, o->cmd->id);
    if (!opt) {
        fprintf(stderr, "%s: %s does not apply to this command\n", o->cmd->prefix,
                argv[optind - 1]);
        return -1;
    }
    int r = opt->apply ? opt->apply(o, opt, optarg) : 0;
    if (r) return r;
    int k = option_key(name);
    o->value[k] = optarg;
    if (o->seen[k]++ && (opt->flags & CLI_ONCE)) {
        fprintf(stderr, "%s: --%s given twice (allowed: once)\n", o->cmd->prefix, name);
        return -1;
    }
    return 0;
}

static int check_conflicts(const cli_opts_t *o)
{
    for (size_t k = 0; k < sizeof conflicts / sizeof conflicts[0]; k++) {
        const struct conflict *x = &conflicts[k];
        if (!(x->cmds & o->cmd->id) || !cli_given(o, x->a) || !cli_given(o, x->b)) continue;
        fprintf(stderr, "%s: %s\n", o->cmd->prefix, x->why);
        return -1;
    }
    return 0;
}

static int check_files(const cli_command_t *cmd, int n_files)
{
    if (n_files >= 1 && (cmd->many_files || n_files == 1)) return 0;
    fprintf(stderr, "%s: %s\n", cmd->prefix,
            n_files < 1 ? "missing the schedule file" : "one schedule file at a time");
    cli_usage(cmd, stderr);
    return -1;
}

int cli_parse(const cli_command_t *cmd, int argc, char **argv, cli_opts_t *o, char ***files,
              int *n_files)
{
    struct option longs[CLI_MAX_OPTIONS + 1];
    char shorts[3 * CLI_MAX_OPTIONS + 2];
    int c, files_first = (cmd->flags & CLI_FILES_FIRST) != 0;
    getopt_tables(cmd, longs, shorts);
    o->cmd = cmd;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (c == '?' || c == ':') {
            bad_option(cmd, c, argv);
            return -1;
        }
        int r = take_option(o, c, argv);
        if (r) return r;
    }
    if (o->timeout_set[0]) o->sets[o->n_sets++] = o->timeout_set;
    *files = argv + optind;
    *n_files = argc - optind;
    if (!files_first && check_conflicts(o) < 0) return -1;
    if (check_files(cmd, *n_files) < 0) return -1;
    return files_first ? check_conflicts(o) : 0;
}

int cli_given(const cli_opts_t *o, const char *name)
{
    int k = option_key(name);
    return k >= 0 && o->seen[k] > 0;
}

const char *cli_value(const cli_opts_t *o, const char *name)
{
    int k = option_key(name);
    return k >= 0 ? o->value[k] : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * --help
 * ------------------------------------------------------------------------------------------- */

#define HELP_MIN_COLUMN 25 /* the help text of an option starts here at the least */
#define HELP_WIDTH      90 /* the list of other commands wraps before this */

/* "--name ARG" of a row. */
static int option_flag(const cli_option_t *r, char *buf, size_t size)
{
    return snprintf(buf, size, "--%s%s%s", r->name, r->arg ? " " : "", r->arg ? r->arg : "");
}

/* One option's lines: the flags, then its help text from column 6 + width. */
static void option_help(FILE *f, const cli_option_t *r, int width)
{
    char flag[64];
    option_flag(r, flag, sizeof flag);
    if (r->letter)
        fprintf(f, "  -%c, %-*s", r->letter, width, flag);
    else
        fprintf(f, "      %-*s", width, flag);
    for (const char *h = r->help;;) {
        const char *nl = strchr(h, '\n');
        fprintf(f, "%.*s\n", nl ? (int)(nl - h) : (int)strlen(h), h);
        if (!nl) break;
        h = nl + 1;
        fprintf(f, "%*s", 6 + width, "");
    }
}

/* The default command's last lines: every other command, wrapped. */
static void other_commands(FILE *f)
{
    static const char lead[] = "other commands: ";
    const int indent = (int)sizeof lead - 1;
    int col = indent, first = 1;
    fputs(lead, f);
    for (int k = 0; k < cli_n_commands; k++) {
        const cli_command_t *c = &cli_commands[k];
        char item[64];
        if (!c->word) continue;
        int len =
            snprintf(item, sizeof item, "ppsched %s FILE%s", c->word, c->many_files ? "..." : "");
        if (!first && col + 3 + len > HELP_WIDTH) {
            fprintf(f, " |\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            fputs(" | ", f);
            col += 3;
        }
        fputs(item, f);
        col += len;
        first = 0;
    }
    fprintf(f, "\n%*s(ppsched COMMAND --help for each)\n", indent, "");
}

/* The exit codes of a command, from the rows of cli_exits[] that name it. */
static void exit_codes(const cli_command_t *cmd, FILE *f)
{
    fputs("\nexit status:\n", f);
    for (const cli_exit_t *e = cli_exits; e->meaning; e++) {
        if (!(e->cmds & cmd->id)) continue;
        fprintf(f, "  %d  ", e->code);
        for (const char *m = e->meaning;;) {
            const char *nl = strchr(m, '\n');
            fprintf(f, "%.*s\n", nl ? (int)(nl - m) : (int)strlen(m), m);
            if (!nl) break;
            m = nl + 1;
            fputs("     ", f);
        }
    }
}

void cli_usage(const cli_command_t *cmd, FILE *f)
{
    int width = HELP_MIN_COLUMN - 6;
    for (const cli_option_t *r = cli_options; r->name; r++) {
        char flag[64];
        int len = option_flag(r, flag, sizeof flag);
        if ((r->cmds & cmd->id) && r->help && len + 2 > width) width = len + 2;
    }
    fprintf(f, "usage: ppsched%s%s FILE.yaml%s [options]\n\n%s\noptions:\n", cmd->word ? " " : "",
            cmd->word ? cmd->word : "", cmd->many_files ? "..." : "", cmd->about);
    for (const cli_option_t *r = cli_options; r->name; r++)
        if ((r->cmds & cmd->id) && r->help) option_help(f, r, width);
    exit_codes(cmd, f);
    if (!cmd->word) {
        fputs("\n", f);
        other_commands(f);
    }
}
