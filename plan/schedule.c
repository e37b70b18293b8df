/*
 * schedule.c — the action IR: parsing and printing the text form, and building schedules.
 *
 * A schedule's programs grow by doubling; schedule_free releases whatever was allocated, so a
 * half-built schedule can always be freed. The CSV and YAML readers/writers live in
 * schedule_io.c.
 */
#include "schedule.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[PP_ACT_COUNT] = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "OFFLOAD", "RELOAD", "REDUCE",
};

const char *action_kind_name(pp_action_kind_t k)
{
    return (k >= 0 && k < PP_ACT_COUNT) ? kind_names[k] : "?";
}

pp_status_t schedule_init(pp_schedule_t *s, int n_devices, int n_stages, int n_mb)
{
    memset(s, 0, sizeof *s);
    if (n_devices < 1 || n_devices > PP_MAX_DEVICES || n_stages < 1 || n_stages > PP_MAX_STAGES ||
        n_mb < 1 || n_mb > PP_MAX_MICRO_BATCHES)
        PP_FAIL(PP_ERR_INTERNAL, "schedule_init: bad sizes p=%d stages=%d m=%d", n_devices,
                n_stages, n_mb);
    s->n_devices = n_devices;
    s->n_stages = n_stages;
    s->n_mb = n_mb;
    s->stage_device = malloc(sizeof(int) * (size_t)n_stages);
    s->prog = calloc((size_t)n_devices, sizeof(pp_program_t));
    if (!s->stage_device || !s->prog) {
        schedule_free(s);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory building a schedule");
    }
    for (int i = 0; i < n_stages; i++)
        s->stage_device[i] = -1;
    return PP_OK;
}

void schedule_free(pp_schedule_t *s)
{
    if (!s) return;
    if (s->prog)
        for (int d = 0; d < s->n_devices; d++)
            free(s->prog[d].a);
    free(s->prog);
    free(s->stage_device);
    memset(s, 0, sizeof *s);
}

pp_status_t schedule_push(pp_schedule_t *s, int d, pp_action_kind_t kind, int stage, int mb)
{
    if (d < 0 || d >= s->n_devices)
        PP_FAIL(PP_ERR_INTERNAL, "schedule_push: device %d of %d", d, s->n_devices);
    pp_program_t *p = &s->prog[d];
    PP_GROW(p->a, p->n, p->cap, 16);
    p->a[p->n++] = (pp_action_t){kind, stage, mb, 0};
    if (pp_action_is_comm(kind)) s->has_comm = 1;
    if (kind == PP_ACT_I || kind == PP_ACT_W) s->split_backward = 1;
    return PP_OK;
}

pp_status_t schedule_mark_overlap(pp_schedule_t *s, int d)
{
    if (d < 0 || d >= s->n_devices || s->prog[d].n < 2)
        PP_FAIL(PP_ERR_INTERNAL, "schedule_mark_overlap: device %d has no pair to mark", d);
    s->prog[d].a[s->prog[d].n - 1].overlap = 1;
    return PP_OK;
}

void schedule_set_origin(pp_schedule_t *s, const char *name)
{
    snprintf(s->origin.name, sizeof s->origin.name, "%s", name ? name : "");
}

const char *schedule_origin(const pp_schedule_t *s, int d, char *buf, size_t size)
{
    const pp_sched_origin_t *o = &s->origin;
    if (!o->name[0] || d < 0 || d >= PP_MAX_DEVICES)
        snprintf(buf, size, "%s", "");
    else if (o->line[d] > 0)
        snprintf(buf, size, "%s:%d:%d: ", o->name, o->line[d], o->col[d] > 0 ? o->col[d] : 1);
    else
        snprintf(buf, size, "%s: ", o->name);
    return buf;
}

/* Reads a non-negative decimal integer at *p; returns -1 when there is none or it overflows. */
static long read_uint(const char **p)
{
    const char *q = *p;
    long v = 0;
    if (!isdigit((unsigned char)*q)) return -1;
    while (isdigit((unsigned char)*q)) {
        v = v * 10 + (*q - '0');
        if (v > 100000000L) return -1;
        q++;
    }
    *p = q;
    return v;
}

int action_parse(const char *text, pp_action_t *out)
{
    const char *p = text;
    long stage = read_uint(&p);
    if (stage < 0) return -1;
    /* Longest names first so "SEND_F" is not read as something shorter. */
    static const pp_action_kind_t order[] = {PP_ACT_SEND_F, PP_ACT_RECV_F, PP_ACT_SEND_B,
                                             PP_ACT_RECV_B, PP_ACT_F,      PP_ACT_B,
                                             PP_ACT_I,      PP_ACT_W};
    int kind = -1;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        size_t n = strlen(kind_names[order[i]]);
        if (strncmp(p, kind_names[order[i]], n) == 0) {
            kind = (int)order[i];
            p += n;
            break;
        }
    }
    if (kind < 0) return -1;
    long mb = read_uint(&p);
    if (mb < 0 || *p != '\0') return -1;
    out->kind = (pp_action_kind_t)kind;
    out->stage = (int)stage;
    out->mb = (int)mb;
    out->overlap = 0;
    return 0;
}

char *action_format(const pp_action_t *a, char *buf, size_t size)
{
    snprintf(buf, size, "%d%s%d", a->stage, action_kind_name(a->kind), a->mb);
    return buf;
}

pp_status_t schedule_place(pp_schedule_t *s, pp_place_problem_t *why)
{
    int *first = calloc((size_t)s->n_stages, sizeof *first); /* step of each stage's first action */
    PP_ALLOC_CHECK(first);
    memset(why, 0, sizeof *why);
    for (int i = 0; i < s->n_stages; i++)
        s->stage_device[i] = -1;
    for (int d = 0; d < s->n_devices && !why->what; d++) {
        for (int i = 0; i < s->prog[d].n && !why->what; i++) {
            const pp_action_t *a = &s->prog[d].a[i];
            *why = (pp_place_problem_t){PP_PLACE_OK, d, i, a->stage, -1, -1};
            if (a->stage < 0 || a->stage >= s->n_stages) {
                why->what = PP_PLACE_RANGE;
            } else if (s->stage_device[a->stage] < 0) {
                s->stage_device[a->stage] = d;
                first[a->stage] = i;
            } else if (s->stage_device[a->stage] != d) {
                why->what = PP_PLACE_TWO_DEVICES;
                why->owner = s->stage_device[a->stage];
                why->owner_step = first[a->stage];
            }
        }
    }
    for (int st = 0; st < s->n_stages && !why->what; st++)
        if (s->stage_device[st] < 0)
            *why = (pp_place_problem_t){PP_PLACE_MISSING, -1, -1, st, -1, -1};
    free(first);
    if (!why->what) memset(why, 0, sizeof *why);
    return why->what ? PP_ERR_INPUT : PP_OK;
}

pp_status_t schedule_infer_placement(pp_schedule_t *s, const char *where)
{
    pp_place_problem_t why;
    char txt[32];
    pp_status_t st = schedule_place(s, &why);
    if (st != PP_ERR_INPUT) return st;
    if (why.what == PP_PLACE_MISSING) {
        fprintf(stderr, "%s: stage %d has no action on any device\n", where, why.stage);
        return st;
    }
    fprintf(stderr, "%s: device %d, step %d, action %s: ", where, why.device, why.step,
            action_format(&s->prog[why.device].a[why.step], txt, sizeof txt));
    if (why.what == PP_PLACE_RANGE)
        fprintf(stderr, "stage %d out of range (0..%d)\n", why.stage, s->n_stages - 1);
    else
        fprintf(stderr, "stage %d already runs on device %d (each stage lives on one device)\n",
                why.stage, why.owner);
    return st;
}
