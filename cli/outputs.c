/*
 * outputs.c — every output format of every command as a row of cli_formats[]: its name, the
 * option that selects it and its writer. A command's handler builds a cli_result_t and calls
 * cli_write_outputs, which asks the table: one report on standard output (the row its option
 * selects, else the command's default), what follows the default report, then the files.
 *
 * Adding a format is a writer here and a row (and, if no option selects it yet, an option row in
 * options.c). Compare's --svg charts are not rows: they are written by the comparison itself
 * (compare.h), once every run has finished. Every output path an option names (its row flagged
 * CLI_OUT_FILE or CLI_OUT_DIR) is checked by cli_probe_outputs before anything is loaded.
 */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * Writers
 * ------------------------------------------------------------------------------------------- */

static pp_status_t run_table(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return report_print_table(&r->run->report, &r->run->job, stdout);
}

static pp_status_t run_json(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return report_print_json(&r->run->report, stdout);
}

static pp_status_t run_critical_path(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return report_print_critical_path(&r->run->report, stdout);
}

/* A measured run's trace names the CUDA devices it ran on. */
static pp_status_t run_trace(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    const pp_run_t *j = r->run;
    return report_write_trace_devices(&j->plan, run_timeline(j),
                                      j->measured ? j->job.pipeline.device_ids : NULL, path);
}

static pp_status_t run_svg(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return report_write_svg(&r->run->plan, run_timeline(r->run), r->run->job.name, path);
}

static pp_status_t compare_table(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    const pp_compare_t *c = r->cmp;
    printf("# ppsched compare: %d run%s, mode %s\n", c->n_rows, c->n_rows == 1 ? "" : "s",
           c->measure ? "measure" : "simulate");
    return compare_print_table(c->rows, c->n_rows, stdout);
}

static pp_status_t compare_json(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return compare_print_json(r->cmp->rows, r->cmp->n_rows, stdout);
}

static pp_status_t compare_csv(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return compare_print_csv(r->cmp->rows, r->cmp->n_rows, stdout);
}

/* The plan as a grid, one row per device, and the memory each device is predicted to take. */
static pp_status_t show_grid(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    const pp_run_t *j = r->run;
    printf("# %s: %s (%s), p=%d, stages=%d, m=%d, v=%d\n", r->path, j->job.name,
           sched_kind_name(j->job.kind), j->plan.n_devices, j->plan.n_stages, j->plan.n_mb,
           j->plan.chunks);
    plan_print_grid(&j->plan, stdout);
    plan_print_memory(&j->plan, &j->job, stdout);
    return PP_OK;
}

static pp_status_t show_csv(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return schedule_write_csv(&r->run->sched, stdout);
}

static pp_status_t show_yaml(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return schedule_write_yaml(&r->run->sched, stdout);
}

static pp_status_t check_summary(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    const pp_run_t *j = r->run;
    int max_slots = 0;
    for (int s = 0; s < j->plan.n_stages; s++)
        if (j->plan.slots_per_stage[s] > max_slots) max_slots = j->plan.slots_per_stage[s];
    printf("%s: ok: %s (%s), %d %s, %d %s, %d %s, %d ops, at most %d activation %s per stage\n",
           r->path, j->job.name, sched_kind_name(j->job.kind), j->plan.n_devices,
           pp_plural(j->plan.n_devices, "device", "devices"), j->plan.n_stages,
           pp_plural(j->plan.n_stages, "stage", "stages"), j->plan.n_mb,
           pp_plural(j->plan.n_mb, "micro-batch", "micro-batches"), j->plan.n_ops, max_slots,
           pp_plural(max_slots, "slot", "slots"));
    return PP_OK;
}

/* The profile, to -o FILE or standard output. */
static pp_status_t profile_yaml(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    FILE *out = stdout;
    if (o->output && !(out = fopen(o->output, "w"))) {
        fprintf(stderr, "ppsched: -o %s: %s\n", o->output, strerror(errno));
        return PP_ERR_IO;
    }
    pp_status_t st = profile_write(r->prof, out);
    if (out != stdout && fclose(out) != 0 && st == PP_OK) {
        fprintf(stderr, "ppsched: -o %s: %s\n", o->output, strerror(errno));
        st = PP_ERR_IO;
    }
    if (st == PP_OK && o->output && !o->quiet) fprintf(stderr, "# profile: %s\n", o->output);
    return st;
}

static pp_status_t plan_table(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return plan_print_table(r->search, o->top, stdout);
}

static pp_status_t plan_json(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return plan_print_json(r->search, o->top, stdout);
}

static pp_status_t plan_csv(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    return plan_print_csv(r->search, stdout);
}

/* The best candidate as a schedule file. */
static pp_status_t plan_schedule(const cli_result_t *r, const cli_opts_t *o, const char *path)
{
    pp_status_t st = plan_write_yaml(r->search, &r->search->c[0], path);
    if (st == PP_OK && !o->quiet) fprintf(stderr, "# wrote %s (%s)\n", path, r->search->c[0].label);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * The formats
 * ------------------------------------------------------------------------------------------- */

const cli_format_t cli_formats[] = {
    /* name, command, option, its value, where, writer, its note */
    {"table", CLI_RUN, NULL, NULL, CLI_STDOUT, run_table, NULL},
    {"json", CLI_RUN, "json", NULL, CLI_STDOUT, run_json, NULL},
    {"critical-path", CLI_RUN, "critical-path", NULL, CLI_AFTER, run_critical_path, NULL},
    {"trace", CLI_RUN, "trace", NULL, CLI_FILE, run_trace,
     "# trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n"},
    {"svg", CLI_RUN, "svg", NULL, CLI_FILE, run_svg, "# gantt chart: %s\n"},
    {"table", CLI_COMPARE, NULL, NULL, CLI_STDOUT, compare_table, NULL},
    {"json", CLI_COMPARE, "json", NULL, CLI_STDOUT, compare_json, NULL},
    {"csv", CLI_COMPARE, "csv", NULL, CLI_STDOUT, compare_csv, NULL},
    {"grid", CLI_SHOW, NULL, NULL, CLI_STDOUT, show_grid, NULL},
    {"csv", CLI_SHOW, "emit", "csv", CLI_STDOUT, show_csv, NULL},
    {"yaml", CLI_SHOW, "emit", "yaml", CLI_STDOUT, show_yaml, NULL},
    {"summary", CLI_CHECK, NULL, NULL, CLI_STDOUT, check_summary, NULL},
    {"profile", CLI_PROFILE, NULL, NULL, CLI_STDOUT, profile_yaml, NULL},
    {"table", CLI_PLAN, NULL, NULL, CLI_STDOUT, plan_table, NULL},
    {"json", CLI_PLAN, "json", NULL, CLI_STDOUT, plan_json, NULL},
    {"csv", CLI_PLAN, "csv", NULL, CLI_STDOUT, plan_csv, NULL},
    {"schedule", CLI_PLAN, "emit", NULL, CLI_FILE, plan_schedule, NULL},
    {NULL, 0, NULL, NULL, CLI_STDOUT, NULL, NULL},
};

/* ---------------------------------------------------------------------------------------------
 * Choosing and writing
 * ------------------------------------------------------------------------------------------- */

/* Whether the options select row f (a default row is never selected by an option). */
static int selected(const cli_opts_t *o, const cli_format_t *f)
{
    return (f->cmds & o->cmd->id) && f->option && cli_given(o, f->option) &&
           (!f->value || strcmp(cli_value(o, f->option), f->value) == 0);
}

/* The report on standard output: the first row its option selects, else the default. */
static const cli_format_t *stdout_format(const cli_opts_t *o)
{
    const cli_format_t *def = NULL;
    for (const cli_format_t *f = cli_formats; f->name; f++) {
        if (!(f->cmds & o->cmd->id) || f->dest != CLI_STDOUT) continue;
        if (selected(o, f)) return f;
        if (!f->option && !def) def = f;
    }
    return def;
}

int cli_chatty(const cli_opts_t *o)
{
    const cli_format_t *f = stdout_format(o);
    return !o->quiet && (!f || !f->option);
}

pp_status_t cli_write_outputs(const cli_result_t *r, const cli_opts_t *o)
{
    const cli_format_t *report = stdout_format(o), *f;
    if (report) PP_CHECK(report->write(r, o, NULL));
    for (f = cli_formats; f->name; f++)
        if (f->dest == CLI_AFTER && selected(o, f) && (!report || !report->option))
            PP_CHECK(f->write(r, o, NULL));
    for (f = cli_formats; f->name; f++)
        if (f->dest == CLI_FILE && selected(o, f))
            PP_CHECK(f->write(r, o, cli_value(o, f->option)));
    if (!cli_chatty(o)) return PP_OK;
    for (f = cli_formats; f->name; f++)
        if (f->dest == CLI_FILE && selected(o, f) && f->note)
            printf(f->note, cli_value(o, f->option));
    return PP_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Checking the output paths before the work
 * ------------------------------------------------------------------------------------------- */

/* Where a path leads, to tell two names of one file apart from two files: an existing file's
 * device and inode, or a new file's folder's and its last name. */
typedef struct place {
    dev_t dev;
    ino_t ino;
    const char *name; /* a new file's last name (into its path); NULL for an existing file */
    int regular;      /* a regular file, or one to be made: two writers would replace each other */
} place_t;

/* Print a problem with an output path (one line); returns PP_ERR_USAGE. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static pp_status_t
refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return PP_ERR_USAGE;
}

/* The folder of `path` into buf: "." when it names none, "/" for a file at the root; a trailing
 * slash ("charts/") names the folder itself, so its folder is the one above. */
static const char *folder_of(const char *path, char *buf, size_t size)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *slash = NULL;
    for (size_t i = 0; i < n; i++)
        if (path[i] == '/') slash = path + i;
    if (!slash) return ".";
    snprintf(buf, size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return buf;
}

/* The folder a new file or folder `path` goes into exists and can be written; else the problem,
 * named after the option, and PP_ERR_USAGE. */
static pp_status_t check_folder(const char *opt, const char *path, place_t *pl)
{
    char buf[4096];
    struct stat sb;
    const char *dir = folder_of(path, buf, sizeof buf);
    int found = stat(dir, &sb) == 0;
    if (!found && (errno == ENOENT || errno == ENOTDIR))
        return refuse("--%s %s: no such folder '%s' (allowed: a path in an existing folder)", opt,
                      path, dir);
    if (!found) return refuse("--%s %s: '%s': %s", opt, path, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return refuse("--%s %s: '%s' is not a folder", opt, path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return refuse("--%s %s: cannot write in '%s': %s", opt, path, dir, strerror(errno));
    const char *slash = strrchr(path, '/');
    *pl = (place_t){sb.st_dev, sb.st_ino, slash ? slash + 1 : path, 1};
    return PP_OK;
}

/* One output file: a file that exists and is not a folder (a device or FIFO is written in place
 * and not opened now), or a new one in a folder that exists; a regular or new one is probed by
 * making a temporary file beside it. */
static pp_status_t check_file(const char *opt, const char *path, place_t *pl)
{
    struct stat sb;
    if (!path[0]) return refuse("--%s: an empty path (allowed: a file)", opt);
    int exists = stat(path, &sb) == 0;
    if (exists && S_ISDIR(sb.st_mode))
        return refuse("--%s %s: a folder (allowed: a file path)", opt, path);
    if (exists && !S_ISREG(sb.st_mode)) {
        if (access(path, W_OK) != 0)
            return refuse("--%s %s: cannot write: %s", opt, path, strerror(errno));
        *pl = (place_t){sb.st_dev, sb.st_ino, NULL, 0};
        return PP_OK;
    }
    PP_CHECK(check_folder(opt, path, pl));
    if (exists) *pl = (place_t){sb.st_dev, sb.st_ino, NULL, 1};
    /* a file is written as a temporary file beside it, then renamed (report/report_io.h) */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) return refuse("--%s %s: cannot write: %s", opt, path, strerror(errno));
    close(fd);
    unlink(tmp);
    return PP_OK;
}

/* A folder of outputs (compare's charts): one that exists and can be written, or a new one in a
 * folder that exists (made when the work starts). */
static pp_status_t check_dir(const char *opt, const char *path, place_t *pl)
{
    struct stat sb;
    if (!path[0]) return refuse("--%s: an empty path (allowed: a folder)", opt);
    if (stat(path, &sb) != 0) return check_folder(opt, path, pl);
    if (!S_ISDIR(sb.st_mode)) return refuse("--%s %s: not a folder (allowed: a folder)", opt, path);
    if (access(path, W_OK | X_OK) != 0)
        return refuse("--%s %s: cannot write in it: %s", opt, path, strerror(errno));
    *pl = (place_t){sb.st_dev, sb.st_ino, NULL, 0};
    return PP_OK;
}

static int same_place(const place_t *a, const place_t *b)
{
    return a->dev == b->dev && a->ino == b->ino && !a->name == !b->name &&
           (!a->name || strcmp(a->name, b->name) == 0);
}

/* No file is both an input and an output, and no two outputs write one file. */
static pp_status_t check_distinct(const cli_option_t *const *opt, const place_t *pl, int n,
                                  const cli_opts_t *o, char **files, int n_files)
{
    for (int k = 0; k < n; k++) {
        const char *path = cli_value(o, opt[k]->name);
        for (int i = 0; i < n_files && pl[k].regular; i++) {
            struct stat sb;
            place_t in;
            if (stat(files[i], &sb) != 0) continue;
            in = (place_t){sb.st_dev, sb.st_ino, NULL, 1};
            if (same_place(&pl[k], &in))
                return refuse("--%s %s: that is the schedule file %s (allowed: a path that is not "
                              "an input)",
                              opt[k]->name, path, files[i]);
        }
        for (int j = 0; j < k; j++)
            if (pl[k].regular && same_place(&pl[k], &pl[j]))
                return refuse("--%s %s: --%s writes there too (allowed: one output per file)",
                              opt[k]->name, path, opt[j]->name);
    }
    return PP_OK;
}

pp_status_t cli_probe_outputs(const cli_opts_t *o, char **files, int n_files)
{
    const cli_option_t *opt[CLI_MAX_OPTIONS];
    place_t pl[CLI_MAX_OPTIONS];
    int n = 0;
    for (const cli_option_t *r = cli_options; r->name; r++) {
        if (!(r->cmds & o->cmd->id) || !(r->flags & (CLI_OUT_FILE | CLI_OUT_DIR)) ||
            !cli_given(o, r->name))
            continue;
        const char *path = cli_value(o, r->name);
        PP_CHECK(r->flags & CLI_OUT_DIR ? check_dir(r->name, path, &pl[n])
                                        : check_file(r->name, path, &pl[n]));
        opt[n++] = r;
    }
    return check_distinct(opt, pl, n, o, files, n_files);
}

int cli_pick_format(cli_opts_t *o, const cli_option_t *opt, const char *arg)
{
    char allowed[256] = "";
    for (const cli_format_t *f = cli_formats; f->name; f++) {
        if (!(f->cmds & o->cmd->id) || !f->option || !f->value || strcmp(f->option, opt->name) != 0)
            continue;
        if (strcmp(f->value, arg) == 0) return 0;
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%s",
                 allowed[0] ? ", " : "", f->value);
    }
    fprintf(stderr, "%s: --%s %s: unknown format (allowed: %s)\n", o->cmd->prefix, opt->name, arg,
            allowed);
    return -1;
}
