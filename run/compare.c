/*
 * compare.c — the runs of `ppsched compare`: the --sweep values split, their cross product with the
 * files counted (in 64 bits, so a product too large to hold is refused, not wrapped), every
 * combination loaded (all before any runs, so every bad file is named and none leaves an output),
 * then run through the chain, and the charts of a chart folder once all have run. The rows are
 * written by report_compare.c. A refused sweep value names --sweep: its override reaches the
 * config as "--sweep KEY=VALUE".
 */
#include "compare.h"

#include "config/config.h"
#include "report/report_io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The values of one --sweep: key and a list split at commas (pointers into `buf`). */
typedef struct sweep {
    char key[128];
    char buf[1024];
    const char *val[PP_COMPARE_MAX_VALUES];
    int n;
} sweep_t;

/* The overrides of one combination, in the text the config reads ("--sweep KEY=VALUE"). */
typedef char sweep_set_t[1200];

static pp_status_t sweep_parse(sweep_t *sw, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "ppsched: --sweep %s: expected KEY=V1,V2,...\n", arg);
        return PP_ERR_USAGE;
    }
    size_t klen = (size_t)(eq - arg);
    if (klen >= sizeof sw->key || strlen(eq + 1) >= sizeof sw->buf) {
        fprintf(stderr, "ppsched: --sweep %s: too long\n", arg);
        return PP_ERR_USAGE;
    }
    memcpy(sw->key, arg, klen);
    sw->key[klen] = '\0';
    strcpy(sw->buf, eq + 1);
    sw->n = 0;
    /* Values split at the commas outside brackets, so a list is one value: devices=[0,1],[2,3]. */
    int depth = 0;
    for (char *p = sw->buf, *tok = sw->buf;; p++) {
        depth += (*p == '[' || *p == '{') - (depth > 0 && (*p == ']' || *p == '}'));
        if (*p && (*p != ',' || depth > 0)) continue;
        int end = !*p;
        *p = '\0';
        if (*tok) {
            if (sw->n == PP_COMPARE_MAX_VALUES) {
                fprintf(stderr, "ppsched: --sweep %s: at most %d values\n", arg,
                        PP_COMPARE_MAX_VALUES);
                return PP_ERR_USAGE;
            }
            sw->val[sw->n++] = tok;
        }
        if (end) break;
        tok = p + 1;
    }
    if (sw->n == 0) {
        fprintf(stderr, "ppsched: --sweep %s: no values\n", arg);
        return PP_ERR_USAGE;
    }
    return PP_OK;
}

/* Every --sweep split, and the runs counted: files x values of each sweep. At most 8 sweeps of 64
 * values: 2^48 combinations, counted exactly in 64 bits. */
static pp_status_t sweeps_parse(const pp_compare_opts_t *o, sweep_t *sw, int *n_runs)
{
    unsigned long long n = (unsigned long long)o->n_files;
    if (o->n_sweeps > PP_COMPARE_MAX_SWEEPS) {
        fprintf(stderr, "ppsched: at most %d --sweep options\n", PP_COMPARE_MAX_SWEEPS);
        return PP_ERR_USAGE;
    }
    for (int k = 0; k < o->n_sweeps; k++) {
        PP_CHECK(sweep_parse(&sw[k], o->sweeps[k]));
        n *= (unsigned long long)sw[k].n;
    }
    if (n > PP_COMPARE_MAX_RUNS) {
        fprintf(stderr,
                "ppsched: compare: %llu runs (files x sweep values) is too many (allowed: at most "
                "%d)\n",
                n, PP_COMPARE_MAX_RUNS);
        return PP_ERR_USAGE;
    }
    *n_runs = (int)n;
    return PP_OK;
}

/* The overrides of combination c of the sweeps (the comparison's own first, then one value of each
 * sweep) into sets[] (pointing into setbuf), and the " key=value ..." label suffix. Returns the
 * count. */
static int sweep_combo(const pp_compare_opts_t *o, const sweep_t *sw, int c, const char **sets,
                       sweep_set_t *setbuf, char *suffix, size_t suffix_size)
{
    int n_sets = 0, rem = c;
    for (int k = 0; k < o->n_sets; k++)
        sets[n_sets++] = o->sets[k];
    suffix[0] = '\0';
    for (int k = o->n_sweeps - 1; k >= 0; k--) {
        const char *v = sw[k].val[rem % sw[k].n];
        rem /= sw[k].n;
        snprintf(setbuf[k], sizeof setbuf[k], "--sweep %s=%s", sw[k].key, v);
        sets[n_sets++] = setbuf[k];
        const char *leaf = strrchr(sw[k].key, '.');
        char part[96];
        if (snprintf(part, sizeof part, " %s=%s", leaf ? leaf + 1 : sw[k].key, v) >=
            (int)sizeof part)
            strcpy(part + sizeof part - 4, "..."); /* a label is for reading: cut, and say so */
        strncat(suffix, part, suffix_size - strlen(suffix) - 1);
    }
    return n_sets;
}

/* The Gantt chart of one run of a comparison, into DIR, named after its label. */
static pp_status_t compare_svg(const pp_compare_row_t *j, const char *dir)
{
    char path[4096], name[300];
    snprintf(path, sizeof path, "%s/%s.svg", dir, out_file_name(j->label, name, sizeof name));
    return report_write_svg(&j->run.plan, run_timeline(&j->run), j->label, path);
}

/* The chart folder, made when missing (*made says so), and checked writable before anything
 * runs. */
static pp_status_t chart_dir(const char *dir, int *made)
{
    *made = mkdir(dir, 0777) == 0;
    if (!*made && errno != EEXIST) {
        fprintf(stderr, "ppsched: --svg %s: %s\n", dir, strerror(errno));
        return PP_ERR_IO;
    }
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/chart.svg", dir);
    return out_probe(probe, "the SVG charts");
}

/* Load combination `combo` of file `fi` into the next row, labelled. A combination of sweep
 * values the input refuses is a failed row (PP_OK); without sweeps, a file the input refuses is
 * a failed row that returns PP_ERR_INPUT. */
static pp_status_t compare_load(pp_compare_t *c, const pp_compare_opts_t *o, const sweep_t *sw,
                                int fi, int combo, const char **sets)
{
    pp_compare_row_t *j = &c->rows[c->n_rows++];
    sweep_set_t setbuf[PP_COMPARE_MAX_SWEEPS];
    char suffix[200];
    int n_sets = sweep_combo(o, sw, combo, sets, setbuf, suffix, sizeof suffix);
    pp_status_t st = run_load(&j->run, o->files[fi], NULL, sets, n_sets, o->n_visible);
    const char *name = j->run.job.name ? j->run.job.name : j->run.cfg.name;
    snprintf(j->label, sizeof j->label, "%s%s", name ? name : o->files[fi], suffix);
    j->failed = st == PP_ERR_INPUT;
    return st == PP_ERR_INPUT && o->n_sweeps > 0 ? PP_OK : st;
}

/* Every file, with each combination of sweep values, loaded into its row before any runs: a file
 * the input refuses on its own (with the comparison's overrides, before any sweep value) is
 * counted in *n_bad, and the others are still checked, so every bad file is named at once. */
static pp_status_t compare_load_all(pp_compare_t *c, const pp_compare_opts_t *o, const sweep_t *sw,
                                    int *n_bad)
{
    int n_combo = c->n_alloc / o->n_files;
    const char **sets = calloc((size_t)(o->n_sets + o->n_sweeps), sizeof *sets);
    PP_ALLOC_CHECK(sets);
    pp_status_t st = PP_OK;
    *n_bad = 0;
    for (int fi = 0; fi < o->n_files && st == PP_OK; fi++) {
        pp_config_t alone;
        st = config_load(&alone, o->files[fi], o->sets, o->n_sets);
        config_free(&alone);
        for (int combo = 0; combo < n_combo && st == PP_OK; combo++)
            st = compare_load(c, o, sw, fi, combo, sets);
        if (st == PP_ERR_INPUT) ++*n_bad, st = PP_OK;
    }
    free(sets);
    if (st == PP_OK && *n_bad)
        fprintf(stderr,
                "ppsched: compare: %d of %d files not valid (their problems above); nothing "
                "ran\n",
                *n_bad, o->n_files);
    return st == PP_OK && *n_bad ? PP_ERR_INPUT : st;
}

/* Every loaded row run in turn. A combination of sweep values the input refuses while running is
 * a failed row too. */
static pp_status_t compare_runs(pp_compare_t *c, const pp_compare_opts_t *o)
{
    int n_combo = c->n_alloc / o->n_files; /* every file loaded: row r is of file r / n_combo */
    if (o->first_note) fputs(o->first_note, stderr);
    for (int r = 0; r < c->n_rows; r++) {
        pp_compare_row_t *j = &c->rows[r];
        if (j->failed) continue;
        if (o->progress)
            fprintf(stderr, "# [%d/%d] %s (%s)\n", r + 1, c->n_rows, j->label,
                    o->files[r / n_combo]);
        pp_status_t st = run_go(&j->run, o->run);
        if (st == PP_ERR_INPUT && o->n_sweeps > 0)
            j->failed = 1;
        else
            PP_CHECK(st);
    }
    return PP_OK;
}

/* The charts of a chart folder: every run's Gantt chart, then the bubble charts of all of them. */
static pp_status_t compare_charts(const pp_compare_t *c, const char *dir)
{
    for (int r = 0; r < c->n_rows; r++)
        if (!c->rows[r].failed) PP_CHECK(compare_svg(&c->rows[r], dir));
    PP_CHECK(compare_bubble_charts(c->rows, c->n_rows, dir, c->measure));
    return compare_bubble_bars(c->rows, c->n_rows, dir, c->measure);
}

pp_status_t compare_run(pp_compare_t *c, const pp_compare_opts_t *o)
{
    sweep_t sw[PP_COMPARE_MAX_SWEEPS];
    int n_runs, n_bad, made = 0;
    memset(c, 0, sizeof *c);
    c->measure = o->run->measure;
    PP_CHECK(sweeps_parse(o, sw, &n_runs));
    c->rows = calloc((size_t)n_runs, sizeof *c->rows);
    PP_ALLOC_CHECK(c->rows);
    c->n_alloc = n_runs;
    PP_CHECK(compare_load_all(c, o, sw, &n_bad));
    if (o->svg_dir) PP_CHECK(chart_dir(o->svg_dir, &made));
    pp_status_t st = compare_runs(c, o);
    if (st == PP_OK && o->svg_dir) st = compare_charts(c, o->svg_dir);
    if (st != PP_OK && made)
        rmdir(o->svg_dir); /* a folder made for nothing (not when it holds charts) */
    return st;
}

pp_status_t compare_check_failed(const pp_compare_t *c)
{
    int n_failed = 0;
    for (int i = 0; i < c->n_rows; i++)
        n_failed += c->rows[i].failed;
    if (!n_failed) return PP_OK;
    fprintf(stderr, "ppsched: compare: %d of %d runs not run: their --sweep values are not valid\n",
            n_failed, c->n_rows);
    return PP_ERR_INPUT;
}

void compare_free(pp_compare_t *c)
{
    for (int i = 0; i < c->n_alloc; i++)
        run_free(&c->rows[i].run);
    free(c->rows);
    memset(c, 0, sizeof *c);
}
