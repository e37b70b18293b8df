/*
 * outputs.c — every output format of every command as a row of cli_formats[]: its name, the
 * option that selects it and its writer. A command's handler builds a cli_result_t and calls
 * cli_write_outputs, which asks the table: one report on standard output (the row its option
 * selects, else the command's default), what follows the default report, then the files.
 *
 * Adding a format is a writer here and a row (and, if no option selects it yet, an option row in
 * options.c). Compare's --svg charts are not rows: they are written by the comparison itself
 * (compare.h), each as its run finishes.
 */
#include "cli.h"

#include "report/report_io.h"

#include <errno.h>
#include <string.h>

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
    /* name, command, option, its value, where, writer, what a file holds, its note */
    {"table", CLI_RUN, NULL, NULL, CLI_STDOUT, run_table, NULL, NULL},
    {"json", CLI_RUN, "json", NULL, CLI_STDOUT, run_json, NULL, NULL},
    {"critical-path", CLI_RUN, "critical-path", NULL, CLI_AFTER, run_critical_path, NULL, NULL},
    {"trace", CLI_RUN, "trace", NULL, CLI_FILE, run_trace, "the trace",
     "# trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n"},
    {"svg", CLI_RUN, "svg", NULL, CLI_FILE, run_svg, "the SVG chart", "# gantt chart: %s\n"},
    {"table", CLI_COMPARE, NULL, NULL, CLI_STDOUT, compare_table, NULL, NULL},
    {"json", CLI_COMPARE, "json", NULL, CLI_STDOUT, compare_json, NULL, NULL},
    {"csv", CLI_COMPARE, "csv", NULL, CLI_STDOUT, compare_csv, NULL, NULL},
    {"grid", CLI_SHOW, NULL, NULL, CLI_STDOUT, show_grid, NULL, NULL},
    {"csv", CLI_SHOW, "emit", "csv", CLI_STDOUT, show_csv, NULL, NULL},
    {"yaml", CLI_SHOW, "emit", "yaml", CLI_STDOUT, show_yaml, NULL, NULL},
    {"summary", CLI_CHECK, NULL, NULL, CLI_STDOUT, check_summary, NULL, NULL},
    {"profile", CLI_PROFILE, NULL, NULL, CLI_STDOUT, profile_yaml, NULL, NULL},
    {"table", CLI_PLAN, NULL, NULL, CLI_STDOUT, plan_table, NULL, NULL},
    {"json", CLI_PLAN, "json", NULL, CLI_STDOUT, plan_json, NULL, NULL},
    {"csv", CLI_PLAN, "csv", NULL, CLI_STDOUT, plan_csv, NULL, NULL},
    {"schedule", CLI_PLAN, "emit", NULL, CLI_FILE, plan_schedule, "the schedule file", NULL},
    {NULL, 0, NULL, NULL, CLI_STDOUT, NULL, NULL, NULL},
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

pp_status_t cli_probe_outputs(const cli_opts_t *o)
{
    for (const cli_format_t *f = cli_formats; f->name; f++)
        if (f->dest == CLI_FILE && selected(o, f))
            PP_CHECK(out_probe(cli_value(o, f->option), f->what));
    return PP_OK;
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
