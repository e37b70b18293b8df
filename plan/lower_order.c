/*
 * lower_order.c — activation slots and the enqueue order of a lowering (lower_internal.h).
 *
 * Slots come from liveness over each device's program: a unit (lower_slot_unit: a (stage, mb),
 * or each phase of an offloaded one) takes a free slot of its stage at its first op and gives it
 * back after its last, and the first op of a new holder waits for the previous holder's last op
 * on each role; host slots (run.offload) alongside, through offload.c's step, and the kept regions
 * of a stage that keeps part of each slot on the device (keep_stage: a (stage, mb) from its first
 * compute op to its last, reused the same way). While cap[stage] is 0 the stage takes the lowest
 * free slot and cap becomes the most it held at once (the schedule's own need); once the stage
 * has a cap it takes the free slot released longest ago (a FIFO of free slots), which leaves the
 * most room between a slot's last reader and its next writer. A take
 * costs O(log m) at most: the released slots wait in a min-heap (no cap) or the FIFO ring (a cap),
 * and a counter hands out the slots never taken, so GPipe and looped BFS, which hold all m
 * micro-batches at once, lower in about the time 1F1B does.
 *
 * The dry run advances one head per channel (plan.h: a device's compute, offload or load stream,
 * its send or recv channel with one peer device) in lock-step rounds, emits an op once its
 * dependencies are emitted, and emits a SEND only together with its RECV. When it is stuck, the
 * stages whose channel heads wait for a slot get one more and it goes on. A growth pass
 * reassigns only the stages whose cap changed, and the dry run resumes at the first round in
 * which an op whose slot dependencies changed was a stream head (every round before it runs as
 * it did), so the passes (about p / 2 of them for interleaved schedules on p devices) cost what
 * they change rather than the whole plan each. A round visits only the channels that have ops
 * (at p = 64 nearly all of a device's send channels are empty), and a head found waiting is
 * looked at again only once the op it waits for is emitted: a round costs its channels, and each
 * op's dependencies are read about once.
 */
#include "lower_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Slot and dry-run state. Arrays by program id unless said otherwise. */
typedef struct order {
    int *cap;        /* [n_st] slots a stage may use; 0 before the first assignment */
    int *used_cap;   /* [n_st] the cap its slots were last assigned with; -1 not yet */
    int *grown_from; /* [n_st] cap before the current growth step */
    int *st_begin;   /* [n_st + 1] stage s's ops are st_ops[st_begin[s] .. st_begin[s+1]) */
    int *st_ops;     /* [n_ops] program ids grouped by stage, in program-id order */
    /* Scratch of one stage's assignment: by unit of the stage (2 per micro-batch), or by slot. */
    int *last;      /* [unit] the unit's last op */
    int *slot;      /* [unit] slot held, -1 none yet */
    int *last_role; /* [unit * PP_ROLE_COUNT] last op of the unit per role */
    int *holder;    /* [slot] unit that last held it, -1 none */
    int *queue;     /* [slot] the released free slots (pool_t): a min-heap, or a FIFO ring */
    int *saved;     /* [max stage ops * (LOWER_MAX_DEPS + 1)] slot deps before a reassignment */
    /* Kept regions (a stage with offload_keep): by micro-batch of the stage, or by region. */
    int *kcap;       /* [n_st] kept regions a stage may use; 0 before the first assignment */
    int *klast;      /* [m] the micro-batch's last compute op */
    int *klast_role; /* [m * PP_ROLE_COUNT] its last compute op per role */
    int *kholder;    /* [region] micro-batch that last held it, -1 none */
    host_state_t H;  /* host slots, [stage * n_mb + slot or mb] as offload.c indexes them */
    /* The dry run. */
    int *head; /* [n_chan] program id of the channel's next op, -1 none */
    int *live; /* [n_live] the channels with ops, in the order a round visits them */
    int n_live;
    int *wait;        /* [2 * n_chan]: head wait[2c] of channel c waits for op wait[2c + 1] (-1: not
                         known), so a stuck head costs one look a round until that op is emitted */
    char *done;       /* [n_ops] emitted */
    int *head_round;  /* [n_ops] round the op became its stream's head; INT_MAX not (yet) */
    int *round_start; /* [n_ops + 2] ops emitted before each round */
    int n, round;     /* ops emitted, current round */
} order_t;

static void order_free(order_t *O)
{
    void *p[] = {O->cap,  O->used_cap,   O->grown_from,  O->st_begin, O->st_ops,     O->last,
                 O->slot, O->last_role,  O->holder,      O->queue,    O->saved,      O->head,
                 O->done, O->head_round, O->round_start, O->H.busy,   O->H.reader,   O->H.held,
                 O->live, O->wait,       O->kcap,        O->klast,    O->klast_role, O->kholder};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
    memset(O, 0, sizeof *O);
}

/* Group the ops by stage (a counting sort keeps program-id order within a stage). */
static int order_group(const lower_t *L, order_t *O)
{
    int most = 0;
    for (int id = 0; id < L->n_ops; id++)
        O->st_begin[L->ops[id].stage + 1]++;
    for (int s = 0; s < L->n_st; s++) {
        if (O->st_begin[s + 1] > most) most = O->st_begin[s + 1];
        O->st_begin[s + 1] += O->st_begin[s];
    }
    for (int s = 0; s < L->n_st; s++) /* used_cap serves as the fill cursor here */
        O->used_cap[s] = O->st_begin[s];
    for (int id = 0; id < L->n_ops; id++)
        O->st_ops[O->used_cap[L->ops[id].stage]++] = id;
    for (int s = 0; s < L->n_st; s++)
        O->used_cap[s] = -1;
    return most;
}

/* The channels a round visits, in its order: device by device, role by role (RECV channels move
 * with their SENDs), peer by peer; empty channels left out (at p = 64 all but a few of a device's
 * 64 send channels are). */
static void order_live(const lower_t *L, order_t *O)
{
    O->n_live = 0;
    for (int d = 0; d < L->n_dev; d++)
        for (int r = 0; r < PP_ROLE_COUNT; r++) {
            int n_peers = pp_role_row((pp_role_t)r)->per_peer ? L->n_dev : 1;
            for (int q = 0; q < n_peers && r != PP_ROLE_RECV; q++) {
                int c = pp_channel_of(L->n_dev, d, (pp_role_t)r, q);
                if (L->chan_first[c] >= 0) O->live[O->n_live++] = c;
            }
        }
}

static pp_status_t order_init(order_t *O, const lower_t *L)
{
    size_t n_ops = (size_t)(L->n_ops > 0 ? L->n_ops : 1), m = (size_t)L->n_mb;
    size_t st = (size_t)L->n_st;
    memset(O, 0, sizeof *O);
    O->cap = calloc(st, sizeof *O->cap);
    O->used_cap = calloc(st, sizeof *O->used_cap);
    O->grown_from = calloc(st, sizeof *O->grown_from);
    O->st_begin = calloc(st + 1, sizeof *O->st_begin);
    O->st_ops = malloc(n_ops * sizeof *O->st_ops);
    O->last = malloc(2 * m * sizeof *O->last);
    O->slot = malloc(2 * m * sizeof *O->slot);
    O->last_role = malloc(2 * m * PP_ROLE_COUNT * sizeof *O->last_role);
    O->H = (host_state_t){calloc(st * m, 1), malloc(st * m * sizeof(int)),
                          malloc(st * m * sizeof(int))};
    O->holder = malloc(m * sizeof *O->holder);
    O->kcap = calloc(st, sizeof *O->kcap);
    O->klast = malloc(m * sizeof *O->klast);
    O->klast_role = malloc(m * PP_ROLE_COUNT * sizeof *O->klast_role);
    O->kholder = malloc(m * sizeof *O->kholder);
    O->queue = malloc(m * sizeof *O->queue);
    O->head = malloc((size_t)L->n_chan * sizeof *O->head);
    O->live = malloc((size_t)L->n_chan * sizeof *O->live);
    O->wait = malloc(2 * (size_t)L->n_chan * sizeof *O->wait);
    O->done = calloc(n_ops, 1);
    O->head_round = malloc(n_ops * sizeof *O->head_round);
    O->round_start = malloc((n_ops + 2) * sizeof *O->round_start);
    if (O->cap && O->used_cap && O->grown_from && O->st_begin && O->st_ops) {
        size_t most = (size_t)order_group(L, O);
        O->saved = malloc((most > 0 ? most : 1) * (LOWER_MAX_DEPS + 1) * sizeof *O->saved);
    }
    if (!O->cap || !O->used_cap || !O->grown_from || !O->st_begin || !O->st_ops || !O->last ||
        !O->slot || !O->last_role || !O->holder || !O->queue || !O->saved || !O->head || !O->done ||
        !O->head_round || !O->round_start || !O->H.busy || !O->H.reader || !O->H.held || !O->live ||
        !O->wait || !O->kcap || !O->klast || !O->klast_role || !O->kholder) {
        order_free(O);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory ordering a plan of %d ops", L->n_ops);
    }
    for (int id = 0; id < L->n_ops; id++)
        O->head_round[id] = INT_MAX;
    order_live(L, O);
    return PP_OK;
}

/* ============================== Slots ========================================================= */

/* Keep the slot dependencies of stage s's ops (before a reassignment) and clear them. */
static void slots_save(lower_t *L, order_t *O, const int *ids, int n)
{
    for (int k = 0; k < n; k++) {
        int id = ids[k], ns = L->n_dep[id] - L->n_data[id];
        int *sv = &O->saved[(size_t)k * (LOWER_MAX_DEPS + 1)];
        sv[0] = ns;
        memcpy(sv + 1, &L->dep[(size_t)id * LOWER_MAX_DEPS + L->n_data[id]], sizeof *sv * ns);
        L->n_dep[id] = L->n_data[id];
    }
}

/* The earliest round in which an op of ids[] whose slot dependencies changed was a head. */
static int slots_changed(const lower_t *L, const order_t *O, const int *ids, int n)
{
    int first = INT_MAX;
    for (int k = 0; k < n; k++) {
        int id = ids[k], ns = L->n_dep[id] - L->n_data[id];
        const int *sv = &O->saved[(size_t)k * (LOWER_MAX_DEPS + 1)];
        if (sv[0] != ns || memcmp(sv + 1, &L->dep[(size_t)id * LOWER_MAX_DEPS + L->n_data[id]],
                                  sizeof *sv * ns) != 0)
            if (O->head_round[id] < first) first = O->head_round[id];
    }
    return first;
}

/* A stage's free slots while it is assigned. Every slot below `fresh` has been taken; those of
 * them released again are in queue[]: with no cap, a min-heap of n (the lowest free slot is its
 * top, else fresh); with a cap, a ring of n from `head`, released longest ago first (then fresh,
 * which starts at the cap: the ring starts with the slots below it). */
typedef struct pool {
    int *queue; /* order_t's queue: [m] the released free slots */
    int cap;    /* the stage's cap; 0: none yet, take the lowest free slot */
    int m;      /* micro-batches: the ring's size */
    int head;   /* the ring's first entry (with a cap) */
    int n;      /* entries in queue[] */
    int fresh;  /* the lowest slot never taken */
} pool_t;

static void pool_start(pool_t *P, int *queue, int cap, int m)
{
    *P = (pool_t){queue, cap, m, 0, 0, cap};
    for (int c = 0; c < cap; c++)
        queue[P->n++] = c;
}

/* The heap's top goes; the last entry sifts down from the root. */
static int heap_pop(pool_t *P)
{
    int *h = P->queue, top = h[0], x = h[--P->n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= P->n) break;
        if (c + 1 < P->n && h[c + 1] < h[c]) c++;
        if (h[c] >= x) break;
        h[i] = h[c];
        i = c;
    }
    if (P->n > 0) h[i] = x;
    return top;
}

static void heap_push(pool_t *P, int slot)
{
    int *h = P->queue, i = P->n++;
    while (i > 0 && h[(i - 1) / 2] > slot) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = slot;
}

/* A free slot for a new holder: the lowest (no cap yet), else the one released longest ago. At
 * most m holders at once, so fresh stays below m. */
static int pool_take(pool_t *P)
{
    if (P->n == 0) return P->fresh++;
    if (P->cap == 0) return heap_pop(P);
    int j = P->queue[P->head];
    P->head = (P->head + 1) % P->m;
    P->n--;
    return j;
}

static void pool_give(pool_t *P, int slot)
{
    if (P->cap == 0)
        heap_push(P, slot);
    else
        P->queue[(P->head + P->n++) % P->m] = slot;
}

/* Clear stage s's scratch and host slots for a reassignment of ids[0..n). */
static void slots_reset(lower_t *L, order_t *O, int s, const int *ids, int n)
{
    size_t base = (size_t)s * L->n_mb;
    for (int k = 0; k < n; k++) {
        const pp_op_t *o = &L->ops[ids[k]];
        size_t u = lower_slot_unit(L, o) - 2 * base;
        O->last[u] = ids[k];
        O->slot[u] = -1;
        for (int r = 0; r < PP_ROLE_COUNT; r++)
            O->last_role[u * PP_ROLE_COUNT + r] = -1;
        O->H.held[base + o->mb] = -1;
    }
    memset(O->H.busy + base, 0, (size_t)L->n_mb);
    for (int j = 0; j < L->n_mb; j++)
        O->holder[j] = O->H.reader[base + j] = -1;
    L->host_slots[s] = 0;
}

/* Stage s's kept regions (offload_keep): a micro-batch takes one at its first compute op (the
 * region released longest ago, once the stage has a cap) and gives it back after its last; its
 * first compute op waits for the previous holder's last compute ops. Only compute ops touch a kept
 * region: a received x is in the ring slot. */
static void keep_stage(lower_t *L, order_t *O, int s, const int *ids, int n)
{
    const size_t base = (size_t)s * L->n_mb;
    pool_t P;
    for (int j = 0; j < L->n_mb; j++) {
        O->klast[j] = O->kholder[j] = -1;
        L->keep_slot[base + j] = -1;
        for (int r = 0; r < PP_ROLE_COUNT; r++)
            O->klast_role[(size_t)j * PP_ROLE_COUNT + r] = -1;
    }
    for (int k = 0; k < n; k++)
        if (pp_action_is_compute(L->ops[ids[k]].kind)) O->klast[L->ops[ids[k]].mb] = ids[k];
    pool_start(&P, O->queue, O->kcap[s], L->n_mb);
    L->keep_slots[s] = 0;
    for (int k = 0; k < n; k++) {
        const pp_op_t *o = &L->ops[ids[k]];
        int *at = &L->keep_slot[base + (size_t)o->mb];
        if (!pp_action_is_compute(o->kind)) continue;
        if (*at < 0) {
            int j = pool_take(&P), prev = O->kholder[j];
            *at = j;
            if (j + 1 > L->keep_slots[s]) L->keep_slots[s] = j + 1;
            for (int r = 0; prev >= 0 && r < PP_ROLE_COUNT; r++)
                lower_add_dep(L, ids[k], O->klast_role[(size_t)prev * PP_ROLE_COUNT + r]);
        }
        O->klast_role[(size_t)o->mb * PP_ROLE_COUNT + o->role] = ids[k];
        if (O->klast[o->mb] == ids[k]) {
            O->kholder[*at] = o->mb;
            pool_give(&P, *at);
        }
    }
    if (O->kcap[s] < L->keep_slots[s]) O->kcap[s] = L->keep_slots[s];
}

/* Assign stage s's slots with its cap; returns what slots_changed says. */
static int slots_stage(lower_t *L, order_t *O, int s, int *slots_per_stage)
{
    const int *ids = &O->st_ops[O->st_begin[s]];
    int n = O->st_begin[s + 1] - O->st_begin[s], cap = O->cap[s];
    size_t ubase = 2 * (size_t)s * (size_t)L->n_mb;
    pool_t P;
    slots_save(L, O, ids, n);
    slots_reset(L, O, s, ids, n);
    pool_start(&P, O->queue, cap, L->n_mb);
    slots_per_stage[s] = 0;
    for (int k = 0; k < n; k++) {
        int id = ids[k];
        pp_op_t *o = &L->ops[id];
        size_t u = lower_slot_unit(L, o) - ubase;
        if (O->slot[u] < 0) {
            int j = pool_take(&P), prev = O->holder[j];
            O->slot[u] = j;
            if (j + 1 > slots_per_stage[s]) slots_per_stage[s] = j + 1;
            if (prev >= 0)
                for (int r = 0; r < PP_ROLE_COUNT; r++)
                    lower_add_dep(L, id, O->last_role[(size_t)prev * PP_ROLE_COUNT + r]);
        }
        o->slot = O->slot[u];
        O->last_role[u * PP_ROLE_COUNT + o->role] = id;
        lower_host_slot_step(L, &O->H, id);
        if (O->last[u] == id) {
            O->holder[o->slot] = (int)u;
            pool_give(&P, o->slot);
        }
    }
    if (L->offload_keep && L->offload_keep[s] > 0) keep_stage(L, O, s, ids, n);
    O->used_cap[s] = cap;
    if (O->cap[s] < slots_per_stage[s]) O->cap[s] = slots_per_stage[s];
    return slots_changed(L, O, ids, n);
}

/* Reassign every stage whose cap changed; returns the earliest round a changed op was a head. */
static int slots_update(lower_t *L, order_t *O, int *slots_per_stage)
{
    int first = INT_MAX;
    for (int s = 0; s < L->n_st; s++) {
        if (O->used_cap[s] == O->cap[s]) continue;
        int r = slots_stage(L, O, s, slots_per_stage);
        if (r < first) first = r;
    }
    return first;
}

/* ============================== Dry run: the enqueue order ==================================== */

/* First dependency of `id` not yet emitted, skipping `except`; -1 when all are. */
static int unmet_dep(const lower_t *L, const order_t *O, int id, int except)
{
    const int *dep = &L->dep[(size_t)id * LOWER_MAX_DEPS];
    for (int i = 0; i < L->n_dep[id]; i++)
        if (dep[i] != except && !O->done[dep[i]]) return dep[i];
    return -1;
}

static int *head_of(const lower_t *L, order_t *O, int id)
{
    return &O->head[L->chan[id]];
}

static void emit(lower_t *L, order_t *O, int id)
{
    O->done[id] = 1;
    L->order[O->n++] = id;
    int *h = head_of(L, O, id);
    *h = L->chan_next[id];
    if (*h >= 0) O->head_round[*h] = O->round;
}

/* Can the head `id` of its stream be emitted now (with its RECV, for a SEND)? *on: the dependency
 * of its own it still waits for, -1 none. */
static int ready(const lower_t *L, order_t *O, int id, int *on)
{
    if ((*on = unmet_dep(L, O, id, -1)) >= 0) return 0;
    /* The backward half of a pair comes after its forward half in plan order (not in time). */
    if (L->ops[id].role == PP_ROLE_OVERLAP && L->partner[id] >= 0 && !O->done[L->partner[id]])
        return 0;
    if (L->ops[id].role != PP_ROLE_SEND) return 1;
    int peer = L->ops[id].peer;
    return *head_of(L, O, peer) == peer && unmet_dep(L, O, peer, id) < 0;
}

/* Forget what each channel's head waits for: a growth pass may have changed its dependencies. */
static void dry_forget_waits(const lower_t *L, order_t *O)
{
    for (int c = 0; c < L->n_chan; c++)
        O->wait[2 * c] = O->wait[2 * c + 1] = -1;
}

/* Every stream at its first op, nothing emitted. */
static void dry_start(const lower_t *L, order_t *O)
{
    dry_forget_waits(L, O);
    memset(O->done, 0, (size_t)(L->n_ops > 0 ? L->n_ops : 1));
    for (int id = 0; id < L->n_ops; id++)
        O->head_round[id] = INT_MAX;
    for (int c = 0; c < L->n_chan; c++) {
        int h = L->chan_first[c];
        O->head[c] = h;
        if (h >= 0) O->head_round[h] = 0;
    }
    O->n = O->round = 0;
}

/* Back to the state at the start of round r <= O->round: undo, latest first, what was emitted
 * since. A stream's head ends at its earliest undone op; the op each undone one had made head is
 * no longer one. */
static void dry_rewind(const lower_t *L, order_t *O, int r)
{
    dry_forget_waits(L, O);
    int from = O->round_start[r];
    for (int t = O->n - 1; t >= from; t--) {
        int id = L->order[t];
        int next = L->chan_next[id];
        if (next >= 0) O->head_round[next] = INT_MAX;
        O->done[id] = 0;
        *head_of(L, O, id) = id;
    }
    O->n = from;
    O->round = r;
}

/* Lock-step rounds from O->round on: each channel (order_live's, in its order) emits at most its
 * head per round, a SEND with its RECV, so the order reads roughly as time. Returns 1 when every
 * op was emitted, 0 when no stream can move. */
static int dry_run(lower_t *L, order_t *O)
{
    for (;;) {
        O->round_start[O->round] = O->n;
        if (O->n == L->n_ops) return 1;
        int moved = 0;
        for (int i = 0; i < O->n_live; i++) {
            int c = O->live[i], id = O->head[c], on;
            if (id < 0 || (O->wait[2 * c] == id && !O->done[O->wait[2 * c + 1]])) continue;
            if (!ready(L, O, id, &on)) {
                O->wait[2 * c] = on >= 0 ? id : -1;
                O->wait[2 * c + 1] = on;
                continue;
            }
            emit(L, O, id);
            if (L->ops[id].role == PP_ROLE_SEND) emit(L, O, L->ops[id].peer);
            moved = 1;
        }
        if (!moved) return 0;
        O->round++;
    }
}

/* Explain, for each device that still has ops, the op it is stuck on. */
static void report_deadlock(const lower_t *L, const order_t *O)
{
    char p1[PP_ORIGIN_NAME_MAX + 160], p2[160];
    for (int d = 0; d < L->n_dev; d++) {
        int id = L->begin[d];
        while (id < L->begin[d + 1] && O->done[id])
            id++;
        if (id == L->begin[d + 1]) continue;
        int on = unmet_dep(L, O, id, -1);
        const pp_op_t *o = &L->ops[id];
        if (on >= 0) {
            fprintf(stderr, "%s: waits for %s, which never runs before it\n",
                    lower_op_place(L, id, p1, sizeof p1), lower_op_name(L, on, p2, sizeof p2));
        } else if (o->role == PP_ROLE_SEND) {
            fprintf(stderr,
                    "%s: waits for its receiver %s to be posted, which never happens before it\n",
                    lower_op_place(L, id, p1, sizeof p1), lower_op_name(L, o->peer, p2, sizeof p2));
        } else {
            /* A RECV with its slot free: only its SEND is missing. */
            fprintf(stderr, "%s: waits for %s, which never runs before it\n",
                    lower_op_place(L, id, p1, sizeof p1), lower_op_name(L, o->peer, p2, sizeof p2));
        }
    }
}

/* After a stuck dry run: give one more slot to every stage whose stream head waits for a slot
 * (an unmet dependency past its data dependencies). Returns how many stages grew. */
static int grow_slots(const lower_t *L, order_t *O)
{
    int grown = 0;
    memcpy(O->grown_from, O->cap, sizeof *O->cap * (size_t)L->n_st);
    for (int h = 0; h < L->n_chan; h++) {
        int id = O->head[h];
        if (id < 0) continue;
        const int *dep = &L->dep[(size_t)id * LOWER_MAX_DEPS];
        int s = L->ops[id].stage, waits = 0;
        for (int i = L->n_data[id]; i < L->n_dep[id]; i++)
            waits |= !O->done[dep[i]];
        if (waits && O->cap[s] < L->n_mb && O->cap[s] == O->grown_from[s]) {
            O->cap[s]++;
            if (O->kcap[s] > 0 && O->kcap[s] < L->n_mb) O->kcap[s]++; /* it may wait for either */
            grown++;
        }
    }
    return grown;
}

/* Slots and order together. Liveness over the programs gives each stage the slots the schedule
 * needs when every transfer can wait for its partner. Pairing each SEND with its RECV (one NCCL
 * group) is stricter: the RECV must be able to start when the SEND does, so a RECV that waits for
 * its slot's last reader can close a cycle through the neighbours' streams (interleaved schedules
 * on many devices do). Then the stages waiting on a slot get one more and the dry run goes on;
 * when no slot is in the way, the schedule itself deadlocks and each stuck device is named. */
pp_status_t lower_order_slots(lower_t *L, int *slots_per_stage)
{
    order_t O;
    pp_status_t st = PP_OK;
    PP_CHECK(order_init(&O, L));
    slots_update(L, &O, slots_per_stage);
    dry_start(L, &O);
    while (!dry_run(L, &O)) {
        if (grow_slots(L, &O) == 0) {
            report_deadlock(L, &O);
            st = PP_ERR_INPUT;
            break;
        }
        int r = slots_update(L, &O, slots_per_stage);
        dry_rewind(L, &O, r < O.round ? r : O.round);
    }
    order_free(&O);
    return st;
}
