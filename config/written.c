/*
 * written.c — the schedules the user wrote (see written.h).
 *
 * Steps: every action's text is parsed first (so the first bad one is reported wherever it is),
 * then pushed in order (a device's program is its list, so a program step is the item's index),
 * then schedule_place puts each stage on its one device; the schedule keeps where each list
 * starts, so that validation's messages name it too. CSV: schedule_read_csv reads and places
 * it, naming the file's own line and column. Messages about the YAML go through config_error_at,
 * so they carry the place the config recorded: the item's line and column in the file, or the
 * `--set` text.
 */
#include "written.h"
#include "common/input.h"
#include "config_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parse item t into a (checking the ranges a schedule can hold). */
static pp_status_t parse_item(const pp_config_t *cfg, const pp_step_text_t *t, pp_action_t *a)
{
    int d = t->device, i = t->item; /* steps count from 0, as validation's do */
    if (action_parse(t->text, a) != 0)
        return config_error_at(cfg, PP_CFG_STEPS, t->line, t->col,
                               "device %d, step %d: '%s' is not an action (allowed: %s)", d, i,
                               PP_SHORT(t->text), PP_ACTION_FORMS);
    if (a->stage >= PP_MAX_STAGES)
        return config_error_at(cfg, PP_CFG_STEPS, t->line, t->col,
                               "device %d, step %d: stage %d is out of range (allowed: 0..%d)", d,
                               i, a->stage, PP_MAX_STAGES - 1);
    if (a->mb >= PP_MAX_MICRO_BATCHES)
        return config_error_at(
            cfg, PP_CFG_STEPS, t->line, t->col,
            "device %d, step %d: micro-batch %d is out of range (allowed: 0..%d)", d, i, a->mb,
            PP_MAX_MICRO_BATCHES - 1);
    return PP_OK;
}

/* The item written as action `step` of device d. */
static const pp_step_text_t *item_at(const pp_steps_cfg_t *st, int d, int step)
{
    for (int k = 0; k < st->n; k++)
        if (st->items[k].device == d && st->items[k].item == step) return &st->items[k];
    return &st->items[0];
}

/* A stage on two devices or on none, at the place it was written. */
static pp_status_t place_error(const pp_config_t *cfg, const pp_schedule_t *s,
                               const pp_place_problem_t *why)
{
    const pp_steps_cfg_t *st = &cfg->schedule.steps;
    if (why->what == PP_PLACE_MISSING)
        return config_error_at(
            cfg, PP_CFG_STEPS, 0, 0,
            "stage %d has no action on any device (allowed: every stage 0..%d on some device)",
            why->stage, s->n_stages - 1);
    const pp_step_text_t *t = item_at(st, why->device, why->step);
    const pp_step_text_t *first = item_at(st, why->owner, why->owner_step);
    return config_error_at(cfg, PP_CFG_STEPS, t->line, t->col,
                           "device %d, step %d: stage %d already runs on device %d (line %d) "
                           "(allowed: each stage on one device)",
                           why->device, why->step, why->stage, why->owner, first->line);
}

static pp_status_t fill_steps(pp_schedule_t *out, const pp_config_t *cfg, pp_action_t *a)
{
    const pp_steps_cfg_t *st = &cfg->schedule.steps;
    int max_stage = 0, max_mb = 0;
    for (int k = 0; k < st->n; k++) {
        PP_CHECK(parse_item(cfg, &st->items[k], &a[k]));
        if (a[k].stage > max_stage) max_stage = a[k].stage;
        if (a[k].mb > max_mb) max_mb = a[k].mb;
    }
    PP_CHECK(schedule_init(out, st->n_devices, max_stage + 1, max_mb + 1));
    schedule_set_origin(out, cfg_source(cfg, PP_CFG_STEPS));
    for (int d = 0; d < st->n_devices; d++) {
        out->origin.line[d] = st->list_line[d];
        out->origin.col[d] = st->list_col[d];
    }
    for (int k = 0; k < st->n; k++)
        PP_CHECK(schedule_push(out, st->items[k].device, a[k].kind, a[k].stage, a[k].mb));
    pp_place_problem_t why;
    pp_status_t r = schedule_place(out, &why);
    if (r == PP_ERR_INPUT) return place_error(cfg, out, &why);
    return r;
}

pp_status_t written_from_steps(pp_schedule_t *out, const pp_config_t *cfg)
{
    const pp_steps_cfg_t *st = &cfg->schedule.steps;
    memset(out, 0, sizeof *out);
    if (st->n_devices < 1 || st->n < 1) {
        fprintf(stderr, "schedule steps: no actions were read for the schedule\n");
        return PP_ERR_INPUT;
    }
    pp_action_t *a = malloc(sizeof *a * (size_t)st->n);
    PP_ALLOC_CHECK(a);
    pp_status_t r = fill_steps(out, cfg, a);
    free(a);
    if (r != PP_OK) schedule_free(out);
    return r;
}

pp_status_t written_from_csv(pp_schedule_t *out, const pp_config_t *cfg)
{
    const char *rel = cfg->schedule.csv_path, *file = cfg->path ? cfg->path : "";
    memset(out, 0, sizeof *out);
    if (!rel) {
        fprintf(stderr, "schedule csv: no actions were read for the schedule\n");
        return PP_ERR_INPUT;
    }
    const char *slash = strrchr(file, '/');
    size_t dir_len = (rel[0] == '/' || !slash) ? 0 : (size_t)(slash - file) + 1;
    char *full = malloc(dir_len + strlen(rel) + 1);
    PP_ALLOC_CHECK(full);
    memcpy(full, file, dir_len);
    strcpy(full + dir_len, rel);
    char *text = NULL, why[160];
    size_t len = 0;
    FILE *f = NULL;
    pp_status_t r = input_read_file(full, PP_INPUT_MAX_BYTES, &text, &len, why, sizeof why);
    if (r == PP_ERR_INPUT)
        r = config_error_at(cfg, PP_CFG_CSV, 0, 0, "cannot open %s: %s", full, why);
    if (r == PP_OK && !(f = fmemopen(text, len, "r"))) {
        fprintf(stderr, "%s:%d: fmemopen: %s\n", __FILE__, __LINE__, strerror(errno));
        r = PP_ERR_NOMEM;
    }
    if (r == PP_OK) r = schedule_read_csv(out, f, full);
    if (f) fclose(f);
    free(text);
    free(full);
    if (r != PP_OK) schedule_free(out);
    return r;
}

/* The most stages any one device holds. */
static int most_chunks(const pp_schedule_t *s)
{
    int most = 0;
    for (int d = 0; d < s->n_devices; d++) {
        int k = 0;
        for (int st = 0; st < s->n_stages; st++)
            k += s->stage_device[st] == d;
        if (k > most) most = k;
    }
    return most;
}

/* `devices`: what the user set must be the schedule's count; `all` resolves here. */
static pp_status_t reconcile_devices(pp_job_t *job, const pp_config_t *cfg, const pp_schedule_t *s,
                                     int n_visible, const char *what)
{
    pp_job_pipeline_t *pl = &job->pipeline;
    if (!config_is_set(cfg, PP_CFG_DEVICES)) {
        pl->devices_all = 0;
        pl->n_devices = s->n_devices;
        for (int d = 0; d < s->n_devices; d++)
            pl->device_ids[d] = d;
        return PP_OK;
    }
    if (!pl->devices_all && pl->n_devices != s->n_devices)
        return config_error_at(cfg, PP_CFG_DEVICES, 0, 0, "%d %s, but %s uses %d (allowed: %d %s)",
                               pl->n_devices, pp_plural(pl->n_devices, "device", "devices"), what,
                               s->n_devices, s->n_devices,
                               pp_plural(s->n_devices, "device", "devices"));
    if (!pl->devices_all) return PP_OK;
    int n = n_visible > 0 ? n_visible : s->n_devices;
    if (n > PP_MAX_DEVICES) n = PP_MAX_DEVICES;
    if (n != s->n_devices)
        return config_error_at(cfg, PP_CFG_DEVICES, 0, 0,
                               "all = %d %s, but %s uses %d (allowed: %d %s)", n,
                               pp_plural(n, "device", "devices"), what, s->n_devices, s->n_devices,
                               pp_plural(s->n_devices, "device", "devices"));
    pl->devices_all = 0;
    pl->n_devices = n;
    for (int d = 0; d < n; d++)
        pl->device_ids[d] = d;
    return PP_OK;
}

pp_status_t written_reconcile(pp_job_t *job, const pp_config_t *cfg, const pp_schedule_t *s,
                              int n_visible)
{
    pp_job_pipeline_t *pl = &job->pipeline;
    const char *what = cfg->schedule.kind == PP_SCHED_CSV ? "schedule.csv" : "schedule.steps";
    PP_CHECK(reconcile_devices(job, cfg, s, n_visible, what));
    if (config_is_set(cfg, PP_CFG_STAGES) && pl->stages != 0 && pl->stages != s->n_stages)
        return config_error_at(cfg, PP_CFG_STAGES, 0, 0,
                               "%d stages, but %s has %d (allowed: %d or auto)", pl->stages, what,
                               s->n_stages, s->n_stages);
    pl->stages = s->n_stages;
    if (config_is_set(cfg, PP_CFG_MICRO_BATCHES) && pl->micro_batches != s->n_mb)
        return config_error_at(cfg, PP_CFG_MICRO_BATCHES, 0, 0,
                               "%d micro-batches, but %s has %d (allowed: %d)", pl->micro_batches,
                               what, s->n_mb, s->n_mb);
    pl->micro_batches = s->n_mb;
    int v = most_chunks(s);
    if (config_is_set(cfg, PP_CFG_CHUNKS) && pl->chunks != v)
        return config_error_at(cfg, PP_CFG_CHUNKS, 0, 0,
                               "%d chunks, but %s puts up to %d stages on one device (allowed: %d)",
                               pl->chunks, what, v, v);
    pl->chunks = v;
    return PP_OK;
}

pp_status_t written_build(pp_schedule_t *out, const pp_config_t *cfg)
{
    if (cfg->schedule.kind == PP_SCHED_CSV) return written_from_csv(out, cfg);
    return written_from_steps(out, cfg);
}
