/*
 * lower.c — plan_lower: a schedule becomes a plan (ops with streams, slots, links, dependencies,
 * in an enqueue order).
 *
 * Lowering works in "program ids" (ops grouped by device, each group in program order, the order
 * prog_ops keeps) and renumbers into the enqueue order found by a dry run at the end. The dry run
 * advances one head per channel (a device's compute, offload or load stream, its send or recv
 * channel with one peer device: plan.h; lower_channels finds each op's), emits an op once its
 * dependencies are emitted, and emits a SEND only together with its RECV (the RECV must head its
 * own channel with every other dependency met), so both halves of a transfer can share one NCCL
 * group. Slots come from liveness over the programs; a stage gets more only when that pairing would
 * otherwise wait on a slot in a cycle. When nothing can move, each stuck device is named. job may
 * be NULL (links peer, 0 bytes). The plan owns every array; plan_free releases them. The copies of
 * run.offload are placed by offload.c's part of the lowering (lower_internal.h): where they go, and
 * the two phases and host slots the slot pass runs on. The slots and the dry run are
 * lower_order.c's (lower_order_slots).
 */
#include "lower_internal.h"

#include <stdlib.h>
#include <string.h>

void plan_free(pp_plan_t *plan)
{
    if (!plan) return;
    free(plan->stage_device);
    free(plan->slots_per_stage);
    free(plan->wgrad_slots_per_stage);
    free(plan->host_slots_per_stage);
    free(plan->plain_slots_per_stage);
    free(plan->offload_bytes);
    free(plan->offload_keep);
    free(plan->keep_slots_per_stage);
    free(plan->keep_slot);
    free(plan->ops);
    free(plan->deps);
    free(plan->prog_ops);
    free(plan->prog_begin);
    memset(plan, 0, sizeof *plan);
}

void plan_boundary_links(const pp_plan_t *plan, pp_transport_t *link)
{
    for (int s = 0; s + 1 < plan->n_stages; s++)
        link[s] = PP_TRANSPORT_NONE;
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *o = &plan->ops[k];
        if (o->kind == PP_ACT_SEND_F && o->stage >= 0 && o->stage + 1 < plan->n_stages)
            link[o->stage] = o->link;
    }
}

static int *idx_at(const lower_t *L, pp_action_kind_t k, int stage, int mb)
{
    return &L->idx[((size_t)k * (size_t)L->n_st + (size_t)stage) * (size_t)L->n_mb + (size_t)mb];
}

/* Program id of (kind, stage, mb), or -1 when the schedule has no such action (or it is out of
 * range). */
static int find(const lower_t *L, pp_action_kind_t k, int stage, int mb)
{
    if (stage < 0 || stage >= L->n_st || mb < 0 || mb >= L->n_mb) return -1;
    return *idx_at(L, k, stage, mb);
}

/* "[where] device d, step i, action X" for messages (where: the place of the device's program in a
 * written schedule); an inserted transfer also names its compute op. */
const char *lower_op_place(const lower_t *L, int id, char *buf, size_t size)
{
    char a[32], c[32], where[PP_ORIGIN_NAME_MAX + 32];
    const pp_op_t *o = &L->ops[id];
    pp_action_t act = {o->kind, o->stage, o->mb, 0};
    action_format(&act, a, sizeof a);
    schedule_origin(L->sched, o->device, where, sizeof where);
    if (L->inserted[id]) {
        const pp_action_t *src = &L->sched->prog[o->device].a[L->step[id]];
        snprintf(buf, size, "%sdevice %d, step %d, action %s (added for %s)", where, o->device,
                 L->step[id], a, action_format(src, c, sizeof c));
    } else {
        snprintf(buf, size, "%sdevice %d, step %d, action %s", where, o->device, L->step[id], a);
    }
    return buf;
}

/* "X (device d, step i)" for the other op named in a message. */
const char *lower_op_name(const lower_t *L, int id, char *buf, size_t size)
{
    char a[32];
    const pp_op_t *o = &L->ops[id];
    pp_action_t act = {o->kind, o->stage, o->mb, 0};
    snprintf(buf, size, "%s (device %d, step %d)", action_format(&act, a, sizeof a), o->device,
             L->step[id]);
    return buf;
}

/* ============================== Building the op list ========================================== */

/* The stage each action belongs to must exist, and live on one device. Fills stage_device. */
static pp_status_t lower_placement(const lower_t *L, int *stage_device)
{
    const pp_schedule_t *s = L->sched;
    char txt[32];
    for (int st = 0; st < L->n_st; st++)
        stage_device[st] = -1;
    for (int d = 0; d < L->n_dev; d++) {
        for (int i = 0; i < s->prog[d].n; i++) {
            const pp_action_t *a = &s->prog[d].a[i];
            if (a->kind < 0 || a->kind >= PP_ACT_COUNT || a->stage < 0 || a->stage >= L->n_st ||
                a->mb < 0 || a->mb >= L->n_mb) {
                fprintf(stderr,
                        "device %d, step %d, action %s: stage or micro-batch out of range "
                        "(stages 0..%d, micro-batches 0..%d)\n",
                        d, i, action_format(a, txt, sizeof txt), L->n_st - 1, L->n_mb - 1);
                return PP_ERR_INPUT;
            }
            int *owner = &stage_device[a->stage];
            if (*owner < 0) *owner = d;
            if (*owner != d) {
                fprintf(stderr,
                        "device %d, step %d, action %s: stage %d already runs on device %d (each "
                        "stage lives on one device)\n",
                        d, i, action_format(a, txt, sizeof txt), a->stage, *owner);
                return PP_ERR_INPUT;
            }
        }
    }
    for (int st = 0; st < L->n_st; st++) {
        int want = s->stage_device ? s->stage_device[st] : -1;
        if (stage_device[st] < 0) {
            fprintf(stderr, "stage %d has no action on any device\n", st);
            return PP_ERR_INPUT;
        }
        if (want >= 0 && want != stage_device[st]) {
            fprintf(stderr, "stage %d is placed on device %d but its actions run on device %d\n",
                    st, want, stage_device[st]);
            return PP_ERR_INPUT;
        }
    }
    return PP_OK;
}

/* Transfers a compute-only schedule needs around action a: RECV before it, SEND after it. */
static int needs_recv(const pp_action_t *a, int n_st)
{
    if (a->kind == PP_ACT_F) return a->stage > 0;
    if (a->kind == PP_ACT_B || a->kind == PP_ACT_I) return a->stage < n_st - 1;
    return 0;
}
static int needs_send(const pp_action_t *a, int n_st)
{
    if (a->kind == PP_ACT_F) return a->stage < n_st - 1;
    if (a->kind == PP_ACT_B || a->kind == PP_ACT_I) return a->stage > 0;
    return 0;
}

void lower_put_op(lower_t *L, int *n, int d, pp_action_kind_t k, int stage, int mb, int step,
                  int inserted)
{
    int id = (*n)++;
    L->ops[id] = (pp_op_t){.device = d,
                           .role = pp_role_of_kind(k),
                           .kind = k,
                           .stage = stage,
                           .mb = mb,
                           .slot = -1,
                           .pos = id - L->begin[d],
                           .peer = -1,
                           .link = PP_TRANSPORT_NONE,
                           .host = -1};
    L->step[id] = step;
    L->inserted[id] = (char)inserted;
}

/* Op `id` on device d is the second half of an overlapped pair (pp_action_t.overlap): it runs on
 * the device's overlap stream, beside the compute op before it, when that op belongs to another
 * stage (two stages share no workspace); otherwise the mark is left unused. */
static void lower_overlap(lower_t *L, int d, int id)
{
    for (int j = id - 1; j >= L->begin[d]; j--) {
        if (L->ops[j].role != PP_ROLE_COMPUTE) continue;
        if (L->ops[j].stage != L->ops[id].stage) L->ops[id].role = PP_ROLE_OVERLAP;
        return;
    }
}

/* Lay out every device's program (with the transfers added when the schedule has none, and the
 * copies of run.offload) and index the ops by (kind, stage, mb). */
static pp_status_t lower_ops(lower_t *L)
{
    const pp_schedule_t *s = L->sched;
    int add = !s->has_comm;
    int copies[PP_MAX_DEVICES];
    PP_CHECK(lower_offload_marks(L, copies));
    L->begin[0] = 0;
    for (int d = 0; d < L->n_dev; d++) {
        int n = s->prog[d].n + copies[d];
        if (add)
            for (int i = 0; i < s->prog[d].n; i++)
                n += needs_recv(&s->prog[d].a[i], L->n_st) + needs_send(&s->prog[d].a[i], L->n_st);
        L->begin[d + 1] = L->begin[d] + n;
    }
    L->n_ops = L->begin[L->n_dev];
    size_t n_ops = (size_t)(L->n_ops > 0 ? L->n_ops : 1);
    size_t n_idx = (size_t)PP_ACT_COUNT * (size_t)L->n_st * (size_t)L->n_mb;
    L->ops = calloc(n_ops, sizeof *L->ops);
    L->step = calloc(n_ops, sizeof *L->step);
    L->inserted = calloc(n_ops, 1);
    L->idx = malloc(sizeof *L->idx * n_idx);
    L->dep = malloc(sizeof *L->dep * n_ops * LOWER_MAX_DEPS);
    L->n_dep = calloc(n_ops, sizeof *L->n_dep);
    L->n_data = calloc(n_ops, sizeof *L->n_data);
    L->order = malloc(sizeof *L->order * n_ops);
    L->where = malloc(sizeof *L->where * n_ops);
    L->partner = malloc(sizeof *L->partner * n_ops);
    if (!L->ops || !L->step || !L->inserted || !L->idx || !L->dep || !L->n_dep || !L->n_data ||
        !L->order || !L->where || !L->partner)
        PP_FAIL(PP_ERR_NOMEM, "out of host memory lowering a schedule of %d ops", L->n_ops);
    for (size_t i = 0; i < n_idx; i++)
        L->idx[i] = -1;

    size_t base = 0; /* device d's first written action */
    for (int d = 0; d < L->n_dev; base += (size_t)s->prog[d].n, d++) {
        int n = L->begin[d];
        for (int i = 0; i < s->prog[d].n; i++) {
            const pp_action_t *a = &s->prog[d].a[i];
            lower_put_copies(L, &n, d, base, i, PP_ACT_RELOAD);
            if (add && needs_recv(a, L->n_st))
                lower_put_op(L, &n, d, a->kind == PP_ACT_F ? PP_ACT_RECV_F : PP_ACT_RECV_B,
                             a->stage, a->mb, i, 1);
            lower_put_op(L, &n, d, a->kind, a->stage, a->mb, i, 0);
            if (a->overlap) lower_overlap(L, d, n - 1);
            if (add && needs_send(a, L->n_st))
                lower_put_op(L, &n, d, a->kind == PP_ACT_F ? PP_ACT_SEND_F : PP_ACT_SEND_B,
                             a->stage, a->mb, i, 1);
            lower_put_copies(L, &n, d, base, i, PP_ACT_OFFLOAD);
        }
    }
    char p1[PP_ORIGIN_NAME_MAX + 160], p2[160];
    for (int id = 0; id < L->n_ops; id++) {
        const pp_op_t *o = &L->ops[id];
        int *slot = idx_at(L, o->kind, o->stage, o->mb);
        if (*slot >= 0) {
            fprintf(stderr, "%s: appears twice (also at %s)\n",
                    lower_op_place(L, id, p1, sizeof p1), lower_op_name(L, *slot, p2, sizeof p2));
            return PP_ERR_INPUT;
        }
        *slot = id;
    }
    return PP_OK;
}

/* The other half of a transfer: SEND_F(s) <-> RECV_F(s+1), SEND_B(s) <-> RECV_B(s-1). */
static void pair_of(const pp_op_t *o, pp_action_kind_t *kind, int *stage)
{
    switch (o->kind) {
    case PP_ACT_SEND_F: *kind = PP_ACT_RECV_F, *stage = o->stage + 1; break;
    case PP_ACT_RECV_F: *kind = PP_ACT_SEND_F, *stage = o->stage - 1; break;
    case PP_ACT_SEND_B: *kind = PP_ACT_RECV_B, *stage = o->stage - 1; break;
    default: *kind = PP_ACT_SEND_B, *stage = o->stage + 1; break;
    }
}

/* The link of a boundary between pipeline devices a and b: the job's (job_boundary_transport);
 * without a job, local on one device and peer between two. */
static pp_transport_t link_of(const pp_job_t *job, int a, int b)
{
    if (job) return job_boundary_transport(job, a, b);
    return transport_for_boundary(a == b ? PP_REACH_DEVICE : PP_REACH_PROCESS, PP_TRANSPORT_PEER);
}

/* Match every SEND with its RECV; set links (link_of) and bytes. */
static pp_status_t lower_pairs(lower_t *L, const int *stage_device, const pp_job_t *job,
                               size_t bytes)
{
    char p1[PP_ORIGIN_NAME_MAX + 160], txt[32];
    for (int id = 0; id < L->n_ops; id++) {
        pp_op_t *o = &L->ops[id];
        if (!pp_action_is_comm(o->kind)) continue;
        pp_action_t other = {PP_ACT_F, 0, o->mb, 0};
        pair_of(o, &other.kind, &other.stage);
        if (other.stage < 0 || other.stage >= L->n_st) {
            fprintf(stderr, "%s: stage %d has no neighbour stage %d to exchange with\n",
                    lower_op_place(L, id, p1, sizeof p1), o->stage, other.stage);
            return PP_ERR_INPUT;
        }
        int peer = find(L, other.kind, other.stage, other.mb);
        if (peer < 0) {
            fprintf(stderr, "%s: ", lower_op_place(L, id, p1, sizeof p1));
            if (!L->inserted[id]) {
                fprintf(stderr, "no matching %s anywhere in the schedule\n",
                        action_format(&other, txt, sizeof txt));
            } else if (o->kind == PP_ACT_SEND_F) {
                fprintf(stderr, "its receiver %dF%d never runs\n", other.stage, o->mb);
            } else if (o->kind == PP_ACT_SEND_B) {
                fprintf(stderr, "its receiver (%dB%d or %dI%d) never runs\n", other.stage, o->mb,
                        other.stage, o->mb);
            } else if (o->kind == PP_ACT_RECV_F) {
                fprintf(stderr, "its input comes from %dF%d, which never runs\n", other.stage,
                        o->mb);
            } else {
                fprintf(stderr, "its gradient comes from %dB%d or %dI%d, neither of which runs\n",
                        other.stage, o->mb, other.stage, o->mb);
            }
            return PP_ERR_INPUT;
        }
        o->peer = peer;
        int a = stage_device[o->stage], b = stage_device[other.stage];
        o->link = link_of(job, a, b);
        o->bytes = bytes;
    }
    return PP_OK;
}

/* Add dependency `on` to op `id` (ignoring -1 and repeats). */
void lower_add_dep(lower_t *L, int id, int on)
{
    if (on < 0 || on == id) return;
    int *dep = &L->dep[(size_t)id * LOWER_MAX_DEPS];
    for (int i = 0; i < L->n_dep[id]; i++)
        if (dep[i] == on) return;
    dep[L->n_dep[id]++] = on;
}

/* An op on the overlap stream keeps the device's program order but for its partner: it waits for
 * the compute op before the partner, and the next compute op waits for it. */
static void lower_overlap_deps(lower_t *L)
{
    for (int id = 0; id < L->n_ops; id++) {
        L->partner[id] = -1;
        if (L->ops[id].role != PP_ROLE_OVERLAP) continue;
        int d = L->ops[id].device, partner = -1, j;
        for (j = id - 1; j >= L->begin[d] && partner < 0; j--)
            if (L->ops[j].role == PP_ROLE_COMPUTE) partner = j;
        L->partner[id] = partner;
        for (; j >= L->begin[d]; j--)
            if (pp_role_row(L->ops[j].role)->computes) {
                lower_add_dep(L, id, j);
                break;
            }
        for (j = id + 1; j < L->begin[d + 1]; j++)
            if (pp_role_row(L->ops[j].role)->computes) {
                lower_add_dep(L, j, id);
                break;
            }
    }
}

/* Data dependencies of every op (plan.h). */
static void lower_data_deps(lower_t *L)
{
    for (int id = 0; id < L->n_ops; id++) {
        const pp_op_t *o = &L->ops[id];
        int s = o->stage, k = o->mb;
        switch (o->kind) {
        case PP_ACT_F: lower_add_dep(L, id, find(L, PP_ACT_RECV_F, s, k)); break;
        case PP_ACT_B:
        case PP_ACT_I:
            lower_add_dep(L, id, find(L, PP_ACT_F, s, k));
            lower_add_dep(L, id, find(L, PP_ACT_RECV_B, s, k));
            lower_add_dep(L, id,
                          find(L, PP_ACT_RELOAD, s, k)); /* -1 (none) when kept on the device */
            break;
        case PP_ACT_W: lower_add_dep(L, id, find(L, PP_ACT_I, s, k)); break;
        case PP_ACT_SEND_F: lower_add_dep(L, id, find(L, PP_ACT_F, s, k)); break;
        case PP_ACT_SEND_B: {
            int b = find(L, PP_ACT_B, s, k);
            lower_add_dep(L, id, b >= 0 ? b : find(L, PP_ACT_I, s, k));
            break;
        }
        case PP_ACT_RECV_F: lower_add_dep(L, id, o->peer); break;
        case PP_ACT_RECV_B: /* writes dy into the slot its RELOAD took */
            lower_add_dep(L, id, o->peer);
            lower_add_dep(L, id, find(L, PP_ACT_RELOAD, s, k));
            break;
        case PP_ACT_OFFLOAD: lower_add_dep(L, id, find(L, PP_ACT_F, s, k)); break;
        case PP_ACT_RELOAD: lower_add_dep(L, id, find(L, PP_ACT_OFFLOAD, s, k)); break;
        default: break;
        }
    }
    lower_overlap_deps(L);
    for (int id = 0; id < L->n_ops; id++)
        L->n_data[id] = L->n_dep[id];
}

/* ============================== Channels ==================================================== */

/* Order of ops on a channel: program order, except that the SENDs lowering added run in the
 * order their receiver posts the RECVs (the RECV's program id), so both sides of a directed pair
 * agree and a sender never waits for a receive its peer posts later. Each op has a key (its own
 * program id; an added SEND its RECV's) and a channel runs its ops by key: appending the ops in
 * key order (op v, then the added SEND whose RECV is v) to their channels builds every channel's
 * list in one pass, with no sort. */
static void lower_append(lower_t *L, int *tail, int id)
{
    int c = L->chan[id];
    if (tail[c] < 0)
        L->chan_first[c] = id;
    else
        L->chan_next[tail[c]] = id;
    tail[c] = id;
    L->chan_next[id] = -1;
}

static int added_send(const lower_t *L, int id)
{
    return L->inserted[id] && L->ops[id].role == PP_ROLE_SEND;
}

/* Channels (plan.h) of every op and the next op on each channel, once the pairs are matched. */
static pp_status_t lower_channels(lower_t *L)
{
    L->n_chan = pp_channel_count(L->n_dev);
    size_t n_ops = (size_t)(L->n_ops > 0 ? L->n_ops : 1);
    L->chan = malloc(sizeof *L->chan * n_ops);
    L->chan_next = malloc(sizeof *L->chan_next * n_ops);
    L->chan_first = malloc(sizeof *L->chan_first * (size_t)L->n_chan);
    int *tail = malloc(sizeof *tail * (size_t)L->n_chan);
    if (!L->chan || !L->chan_next || !L->chan_first || !tail) {
        free(tail);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory ordering a plan of %d ops", L->n_ops);
    }
    for (int id = 0; id < L->n_ops; id++) {
        const pp_op_t *o = &L->ops[id];
        int peer_dev = pp_role_row(o->role)->per_peer ? L->ops[o->peer].device : 0;
        L->chan[id] = pp_channel_of(L->n_dev, o->device, o->role, peer_dev);
    }
    for (int c = 0; c < L->n_chan; c++)
        L->chan_first[c] = tail[c] = -1;
    for (int v = 0; v < L->n_ops; v++) {
        if (!added_send(L, v)) lower_append(L, tail, v);
        int s = L->ops[v].role == PP_ROLE_RECV ? L->ops[v].peer : -1;
        if (s >= 0 && added_send(L, s)) lower_append(L, tail, s);
    }
    free(tail);
    return PP_OK;
}

/* ============================== plan_lower ==================================================== */

/* Move the program-id arrays into the plan, renumbered in enqueue order. */
static pp_status_t lower_emit_plan(pp_plan_t *plan, const lower_t *L)
{
    int n_deps = 0;
    for (int id = 0; id < L->n_ops; id++)
        n_deps += L->n_dep[id];
    plan->n_ops = L->n_ops;
    plan->n_deps_total = n_deps;
    plan->ops = malloc(sizeof *plan->ops * (size_t)(L->n_ops > 0 ? L->n_ops : 1));
    plan->deps = malloc(sizeof *plan->deps * (size_t)(n_deps > 0 ? n_deps : 1));
    plan->prog_ops = malloc(sizeof *plan->prog_ops * (size_t)(L->n_ops > 0 ? L->n_ops : 1));
    plan->prog_begin = malloc(sizeof *plan->prog_begin * (size_t)(L->n_dev + 1));
    if (!plan->ops || !plan->deps || !plan->prog_ops || !plan->prog_begin)
        PP_FAIL(PP_ERR_NOMEM, "out of host memory storing a plan of %d ops", L->n_ops);
    for (int t = 0; t < L->n_ops; t++)
        L->where[L->order[t]] = t;
    int nd = 0;
    for (int t = 0; t < L->n_ops; t++) {
        int id = L->order[t];
        pp_op_t *o = &plan->ops[t];
        *o = L->ops[id];
        if (o->peer >= 0) o->peer = L->where[o->peer];
        o->dep_begin = nd;
        o->n_deps = L->n_dep[id];
        for (int i = 0; i < L->n_dep[id]; i++)
            plan->deps[nd++] = L->where[L->dep[(size_t)id * LOWER_MAX_DEPS + i]];
    }
    for (int id = 0; id < L->n_ops; id++)
        plan->prog_ops[id] = L->where[id];
    memcpy(plan->prog_begin, L->begin, sizeof *plan->prog_begin * (size_t)(L->n_dev + 1));
    return PP_OK;
}

/* I->W buffers per stage: walk the ops in enqueue order (the order a stage's calls are made and
 * its compute stream runs them), counting the micro-batches of each stage whose I has been
 * enqueued and whose W has not; keep the most. */
static pp_status_t lower_wgrad_slots(pp_plan_t *plan)
{
    int *now = calloc((size_t)plan->n_stages, sizeof *now);
    plan->wgrad_slots_per_stage = calloc((size_t)plan->n_stages, sizeof(int));
    if (!now || !plan->wgrad_slots_per_stage) {
        free(now);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory counting I->W buffers");
    }
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->kind == PP_ACT_I && ++now[o->stage] > plan->wgrad_slots_per_stage[o->stage])
            plan->wgrad_slots_per_stage[o->stage] = now[o->stage];
        if (o->kind == PP_ACT_W) now[o->stage]--;
    }
    free(now);
    return PP_OK;
}

/* Free what only the slots and the order needed before the plan's arrays are made: the emit is
 * the lowering's largest moment. */
static void lower_drop_scratch(lower_t *L)
{
    free(L->idx);
    free(L->step);
    free(L->inserted);
    free(L->n_data);
    free(L->partner);
    free(L->chan);
    free(L->chan_next);
    free(L->chan_first);
    free(L->off_after);
    free(L->rel_before);
    free(L->copy_head);
    free(L->copy_next);
    free(L->host_cap);
    L->host_cap = NULL;
    L->idx = L->step = L->n_data = L->partner = L->chan = L->chan_next = L->chan_first = NULL;
    L->off_after = L->rel_before = L->copy_head = L->copy_next = NULL;
    L->inserted = NULL;
}

static void lower_free(lower_t *L)
{
    lower_drop_scratch(L);
    free(L->ops);
    free(L->begin);
    free(L->dep);
    free(L->n_dep);
    free(L->order);
    free(L->where);
}

pp_status_t plan_lower(pp_plan_t *plan, const pp_schedule_t *sched, const pp_job_t *job)
{
    return plan_lower_offload(plan, sched, job, NULL);
}

pp_status_t plan_lower_offload(pp_plan_t *plan, const pp_schedule_t *sched, const pp_job_t *job,
                               const pp_offload_key_t *pick)
{
    return plan_lower_partial(plan, sched, job, pick, NULL);
}

pp_status_t plan_lower_partial(pp_plan_t *plan, const pp_schedule_t *sched, const pp_job_t *job,
                               const pp_offload_key_t *pick, const int *keep)
{
    lower_t L = {0};
    pp_status_t st = PP_OK;
    memset(plan, 0, sizeof *plan);
    if (!sched || !sched->prog || sched->n_devices < 1 || sched->n_stages < 1 || sched->n_mb < 1) {
        fprintf(stderr, "%s:%d: plan_lower: empty schedule\n", __FILE__, __LINE__);
        return PP_ERR_INTERNAL;
    }
    L.sched = sched;
    L.n_dev = sched->n_devices;
    L.n_st = sched->n_stages;
    L.n_mb = sched->n_mb;

    plan->n_devices = L.n_dev;
    plan->n_stages = L.n_st;
    plan->n_mb = L.n_mb;
    plan->chunks = L.n_st >= L.n_dev ? L.n_st / L.n_dev : 1;
    plan->split_backward = sched->split_backward;
    plan->kind = job ? job->kind : PP_SCHED_STEPS;
    if (job) {
        const pp_job_model_t *mc = &job->model;
        plan->boundary_bytes = (size_t)job->pipeline.micro_batch_size * (size_t)mc->seq_len *
                               (size_t)mc->hidden * pp_dtype_size(mc->dtype);
    }

    plan->stage_device = malloc(sizeof *plan->stage_device * (size_t)L.n_st);
    plan->slots_per_stage = calloc((size_t)L.n_st, sizeof *plan->slots_per_stage);
    plan->host_slots_per_stage = calloc((size_t)L.n_st, sizeof(int));
    plan->plain_slots_per_stage = calloc((size_t)L.n_st, sizeof(int));
    plan->offload_bytes = calloc((size_t)L.n_st, sizeof(size_t));
    plan->offload_keep = calloc((size_t)L.n_st, sizeof(int));
    plan->keep_slots_per_stage = calloc((size_t)L.n_st, sizeof(int));
    plan->keep_slot = malloc(sizeof(int) * (size_t)L.n_st * (size_t)L.n_mb);
    L.begin = malloc(sizeof *L.begin * (size_t)(L.n_dev + 1));
    L.host_slots = plan->host_slots_per_stage;
    L.keep_slot = plan->keep_slot;
    L.keep_slots = plan->keep_slots_per_stage;
    if (!plan->stage_device || !plan->slots_per_stage || !plan->host_slots_per_stage ||
        !plan->plain_slots_per_stage || !plan->offload_bytes || !plan->offload_keep ||
        !plan->keep_slots_per_stage || !plan->keep_slot || !L.begin) {
        fprintf(stderr, "%s:%d: out of host memory lowering a schedule\n", __FILE__, __LINE__);
        st = PP_ERR_NOMEM;
        goto fail;
    }
    PP_CHECK_GOTO(lower_placement(&L, plan->stage_device), st, fail);
    for (size_t k = 0; k < (size_t)L.n_st * (size_t)L.n_mb; k++)
        plan->keep_slot[k] = -1;
    lower_offload_setup(&L, plan, job, pick, keep);
    PP_CHECK_GOTO(lower_ops(&L), st, fail);
    lower_offload_unkeep(&L, plan, job);
    PP_CHECK_GOTO(lower_pairs(&L, plan->stage_device, job, plan->boundary_bytes), st, fail);
    lower_data_deps(&L);
    PP_CHECK_GOTO(lower_channels(&L), st, fail);
    PP_CHECK_GOTO(lower_order_slots(&L, plan->slots_per_stage), st, fail);
    lower_drop_scratch(&L);
    PP_CHECK_GOTO(lower_emit_plan(plan, &L), st, fail);
    PP_CHECK_GOTO(lower_wgrad_slots(plan), st, fail);
    if (plan->offload)
        PP_CHECK_GOTO(plan_plain_slots(plan), st, fail);
    else
        memcpy(plan->plain_slots_per_stage, plan->slots_per_stage, sizeof(int) * (size_t)L.n_st);
    PP_CHECK_GOTO(lower_data_parallel(plan, job), st, fail);
fail:
    lower_free(&L);
    if (st != PP_OK) plan_free(plan);
    return st;
}
