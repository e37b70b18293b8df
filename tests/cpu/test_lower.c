/*
 * test_lower.c — plan_lower: where SEND/RECV are inserted, links and bytes, activation slots by
 * liveness, the dependency lists, the enqueue order (topological, stream order kept, each RECV
 * right after its SEND), deadlock reports, and plan_print_grid.
 *
 * Configs are filled by hand here (the values config_defaults would give matter little); sizes
 * are drawn from a seeded generator so the properties are checked on more than one shape.
 */
#include "schedule/generate.h"
#include "plan/plan.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers --------------------------------------------------------------------------------- */

static void cfg_fill(pp_job_t *c, pp_sched_kind_t kind, int p, int stages, int m)
{
    ts_config_pipeline(c, kind, p, stages, m);
    c->model = (pp_job_model_t){.layers = 2 * stages,
                                .hidden = 48 + 16 * ts_rand_int(0, 4),
                                .heads = 4,
                                .seq_len = 16 * ts_rand_int(1, 8),
                                .vocab = 256,
                                .dtype = PP_DTYPE_BF16};
    c->pipeline.micro_batch_size = ts_rand_int(1, 4);
    c->pipeline.transport = PP_TRANSPORT_NCCL;
}

/* The properties plan.h promises, checked independently of plan_validate. */
static void check_plan_properties(const pp_plan_t *pl, const char *what)
{
    for (int i = 0; i < pl->n_ops; i++) {
        const pp_op_t *o = &pl->ops[i];
        for (int j = 0; j < o->n_deps; j++) {
            int on = pl->deps[o->dep_begin + j];
            EXPECT(on >= 0 && on < i, "%s: op %d depends on %d", what, i, on);
        }
        pp_role_t want = pp_action_is_compute(o->kind)                            ? PP_ROLE_COMPUTE
                         : (o->kind == PP_ACT_SEND_F || o->kind == PP_ACT_SEND_B) ? PP_ROLE_SEND
                                                                                  : PP_ROLE_RECV;
        EXPECT(o->role == want, "%s: op %d role", what, i);
        if (o->role == PP_ROLE_SEND) {
            EXPECT(o->peer == i + 1 && pl->ops[i + 1].peer == i, "%s: RECV after SEND %d", what, i);
            EXPECT(pl->ops[i + 1].mb == o->mb);
        } else if (o->role == PP_ROLE_RECV) {
            EXPECT(i > 0 && o->peer == i - 1, "%s: RECV %d right after its SEND", what, i);
        } else {
            EXPECT(o->peer == -1);
        }
        EXPECT(o->slot >= 0 && o->slot < pl->slots_per_stage[o->stage], "%s: slot", what);
    }
    /* Channel order (plan.h): within a device's compute stream and within each recv channel
     * (device, source device), plan order follows program positions; a send channel follows
     * its receives, each SEND sitting right before its RECV (checked above). */
    int n_chan = pp_channel_count(pl->n_devices);
    int *last = malloc(sizeof *last * (size_t)n_chan);
    for (int c = 0; c < n_chan; c++)
        last[c] = -1;
    for (int i = 0; i < pl->n_ops; i++) {
        if (pl->ops[i].role == PP_ROLE_SEND) continue;
        int c = pp_plan_channel(pl, i);
        EXPECT(pl->ops[i].pos > last[c], "%s: device %d %s channel out of order", what,
               pl->ops[i].device, pp_role_name(pl->ops[i].role));
        last[c] = pl->ops[i].pos;
    }
    free(last);
    /* prog_ops: every op once, grouped by device, positions 0.. in order. */
    char *seen = calloc((size_t)pl->n_ops + 1, 1);
    for (int d = 0; d < pl->n_devices; d++)
        for (int j = pl->prog_begin[d]; j < pl->prog_begin[d + 1]; j++) {
            int i = pl->prog_ops[j];
            EXPECT(!seen[i] && pl->ops[i].device == d && pl->ops[i].pos == j - pl->prog_begin[d]);
            seen[i] = 1;
        }
    EXPECT(pl->prog_begin[pl->n_devices] == pl->n_ops);
    free(seen);
}

/* ---- insertion, positions, roles ------------------------------------------------------------- */

static void test_insert_1f1b_p2_m2(void)
{
    pp_job_t c;
    pp_schedule_t s;
    pp_plan_t pl;
    cfg_fill(&c, PP_SCHED_1F1B, 2, 2, 2);
    REQUIRE(generate_1f1b(&s, 2, 2) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    EXPECT(pl.n_ops == 16);
    EXPECT(!strcmp(ts_program_text(&pl, 0), "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1"),
           "%s", ts_program_text(&pl, 0));
    EXPECT(!strcmp(ts_program_text(&pl, 1), "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"),
           "%s", ts_program_text(&pl, 1));
    int i = ts_op_index(&pl, PP_ACT_RECV_F, 1, 1);
    REQUIRE(i >= 0);
    EXPECT(pl.ops[i].device == 1 && pl.ops[i].pos == 4 && pl.ops[i].role == PP_ROLE_RECV);
    i = ts_op_index(&pl, PP_ACT_SEND_B, 1, 0);
    EXPECT(pl.ops[i].pos == 3 && pl.ops[i].role == PP_ROLE_SEND);
    EXPECT(pl.kind == PP_SCHED_1F1B && pl.chunks == 1 && !pl.split_backward);
    check_plan_properties(&pl, "1f1b p=2 m=2");
    EXPECT(plan_validate(&pl) == PP_OK);
    plan_free(&pl);
    schedule_free(&s);
}

static void test_insert_zbh1(void)
{
    pp_job_t c;
    pp_schedule_t s;
    pp_plan_t pl;
    cfg_fill(&c, PP_SCHED_ZBH1, 2, 2, 2);
    REQUIRE(generate_zbh1(&s, 2, 2) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    /* The gradient leaves right after I; W sends nothing. */
    EXPECT(!strcmp(ts_program_text(&pl, 1),
                   "1RECV_F0 1F0 1I0 1SEND_B0 1RECV_F1 1F1 1I1 1SEND_B1 1W0 "
                   "1W1"),
           "%s", ts_program_text(&pl, 1));
    EXPECT(!strcmp(ts_program_text(&pl, 0),
                   "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0I0 0W0 0RECV_B1 0I1 "
                   "0W1"),
           "%s", ts_program_text(&pl, 0));
    EXPECT(pl.split_backward && pl.kind == PP_SCHED_ZBH1);
    int w = ts_op_index(&pl, PP_ACT_W, 1, 0), in = ts_op_index(&pl, PP_ACT_I, 1, 0);
    int sb = ts_op_index(&pl, PP_ACT_SEND_B, 1, 0);
    EXPECT(ts_depends_on(&pl, w, in) && ts_depends_on(&pl, sb, in));
    check_plan_properties(&pl, "zb-h1");
    EXPECT(plan_validate(&pl) == PP_OK);
    plan_free(&pl);
    schedule_free(&s);
}

/* A schedule written with its transfers is kept as written. */
static void test_with_comm_kept(void)
{
    const char *progs[] = {"0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1",
                           "1RECV_F0 1RECV_F1 1F0 1B0 1SEND_B0 1F1 1B1 1SEND_B1"};
    pp_schedule_t s;
    pp_plan_t pl;
    REQUIRE(ts_sched_from(&s, 2, 2, 2, progs, 1) == PP_OK);
    EXPECT(s.has_comm);
    REQUIRE(plan_lower(&pl, &s, NULL) == PP_OK);
    EXPECT(!strcmp(ts_program_text(&pl, 0), progs[0]));
    EXPECT(!strcmp(ts_program_text(&pl, 1), progs[1]));
    EXPECT(pl.kind == PP_SCHED_STEPS && pl.boundary_bytes == 0);
    /* Both inputs received up front: stage 1 needs two slots. */
    EXPECT(pl.slots_per_stage[1] == 2 && pl.slots_per_stage[0] == 2);
    check_plan_properties(&pl, "with comm");
    EXPECT(plan_validate(&pl) == PP_OK);
    plan_free(&pl);
    schedule_free(&s);
}

/* ---- links and bytes ------------------------------------------------------------------------- */

static void test_links(void)
{
    /* Stage 0 on device 0, stages 1 and 2 on device 1: 0->1 crosses devices, 1->2 is local. */
    const char *progs[] = {"0F0 0F1 0B0 0B1", "1F0 2F0 2B0 1B0 1F1 2F1 2B1 1B1"};
    pp_schedule_t s;
    pp_plan_t pl;
    pp_job_t c;
    cfg_fill(&c, PP_SCHED_STEPS, 2, 3, 2);
    size_t bytes = (size_t)c.pipeline.micro_batch_size * c.model.seq_len * c.model.hidden * 2;
    REQUIRE(ts_sched_from(&s, 3, 2, 2, progs, 1) == PP_OK);
    for (int t = 0; t < 2; t++) {
        c.pipeline.transport = t ? PP_TRANSPORT_NCCL : PP_TRANSPORT_PEER;
        REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
        pp_transport_t remote = t ? PP_TRANSPORT_NCCL : PP_TRANSPORT_PEER;
        for (int k = 0; k < 2; k++) {
            int a = ts_op_index(&pl, PP_ACT_SEND_F, 0, k),
                b = ts_op_index(&pl, PP_ACT_RECV_F, 1, k);
            int x = ts_op_index(&pl, PP_ACT_SEND_F, 1, k),
                y = ts_op_index(&pl, PP_ACT_RECV_F, 2, k);
            int g = ts_op_index(&pl, PP_ACT_SEND_B, 2, k),
                h = ts_op_index(&pl, PP_ACT_RECV_B, 1, k);
            REQUIRE(a >= 0 && b >= 0 && x >= 0 && y >= 0 && g >= 0 && h >= 0);
            EXPECT(pl.ops[a].link == remote && pl.ops[b].link == remote);
            EXPECT(pl.ops[x].link == PP_TRANSPORT_LOCAL && pl.ops[y].link == PP_TRANSPORT_LOCAL);
            EXPECT(pl.ops[g].link == PP_TRANSPORT_LOCAL && pl.ops[h].link == PP_TRANSPORT_LOCAL);
            EXPECT(pl.ops[a].bytes == bytes && pl.ops[y].bytes == bytes);
            EXPECT(pl.ops[y].device == 1 && pl.ops[x].device == 1);
        }
        EXPECT(pl.boundary_bytes == bytes);
        EXPECT(pl.stage_device[2] == 1 && pl.chunks == 1);
        for (int i = 0; i < pl.n_ops; i++)
            EXPECT((pl.ops[i].role == PP_ROLE_COMPUTE) == (pl.ops[i].link == PP_TRANSPORT_NONE));
        check_plan_properties(&pl, "links");
        EXPECT(plan_validate(&pl) == PP_OK);
        plan_free(&pl);
    }
    schedule_free(&s);

    /* One device, two chunks: every transfer is local. */
    REQUIRE(generate_interleaved(&s, 1, 3, 2) == PP_OK);
    cfg_fill(&c, PP_SCHED_INTERLEAVED, 1, 2, 3);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    for (int i = 0; i < pl.n_ops; i++)
        if (pl.ops[i].role != PP_ROLE_COMPUTE) EXPECT(pl.ops[i].link == PP_TRANSPORT_LOCAL);
    EXPECT(pl.chunks == 2);
    plan_free(&pl);
    schedule_free(&s);

    /* Pipeline devices 0, 2 and 3 on CUDA device 0, device 1 on CUDA device 1: the boundaries
     * 0|1 and 1|2 are peer, 2|3 is shared (two pipeline devices on one GPU). */
    REQUIRE(generate_1f1b(&s, 4, 4) == PP_OK);
    cfg_fill(&c, PP_SCHED_1F1B, 4, 4, 4);
    c.pipeline.device_ids[0] = c.pipeline.device_ids[2] = c.pipeline.device_ids[3] = 0;
    c.pipeline.device_ids[1] = 1;
    c.pipeline.transport = PP_TRANSPORT_PEER;
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    for (int i = 0; i < pl.n_ops; i++) {
        const pp_op_t *o = &pl.ops[i];
        if (o->role == PP_ROLE_COMPUTE) continue;
        int lo = o->stage < pl.ops[o->peer].stage ? o->stage : pl.ops[o->peer].stage;
        EXPECT(o->link == (lo == 2 ? PP_TRANSPORT_SHARED : PP_TRANSPORT_PEER), "op %d link %s", i,
               transport_name(o->link));
    }
    check_plan_properties(&pl, "shared");
    EXPECT(plan_validate(&pl) == PP_OK);
    plan_free(&pl);
    schedule_free(&s);
}

/* ---- slots ----------------------------------------------------------------------------------- */

static void test_slots(void)
{
    for (int trial = 0; trial < 12; trial++) {
        int p = ts_rand_int(1, 8), m = ts_rand_int(1, 3 * p);
        pp_job_t c;
        pp_schedule_t s;
        pp_plan_t pl;
        cfg_fill(&c, PP_SCHED_1F1B, p, p, m);
        REQUIRE(generate_1f1b(&s, p, m) == PP_OK);
        REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
        for (int i = 0; i < p; i++) {
            int want = p - i < m ? p - i : m;
            EXPECT(pl.slots_per_stage[i] == want, "1f1b p=%d m=%d stage %d: %d slots, want %d", p,
                   m, i, pl.slots_per_stage[i], want);
            EXPECT(pl.wgrad_slots_per_stage[i] == 0, "1f1b has no I->W buffers");
        }
        plan_free(&pl);
        schedule_free(&s);

        REQUIRE(generate_gpipe(&s, p, m) == PP_OK);
        REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
        for (int i = 0; i < p; i++)
            EXPECT(pl.slots_per_stage[i] == m, "gpipe p=%d m=%d stage %d: %d", p, m, i,
                   pl.slots_per_stage[i]);
        plan_free(&pl);
        schedule_free(&s);

        REQUIRE(generate_zbh1(&s, p, m) == PP_OK);
        REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
        for (int i = 0; i < p; i++) {
            EXPECT(pl.slots_per_stage[i] <= p, "zb-h1 p=%d m=%d stage %d: %d", p, m, i,
                   pl.slots_per_stage[i]);
            /* a micro-batch between its I and its W still holds its slot */
            EXPECT(pl.wgrad_slots_per_stage[i] >= 1 &&
                       pl.wgrad_slots_per_stage[i] <= pl.slots_per_stage[i],
                   "zb-h1 p=%d m=%d stage %d: %d I->W buffers, %d slots", p, m, i,
                   pl.wgrad_slots_per_stage[i], pl.slots_per_stage[i]);
        }
        /* the first stage runs each W right after its I */
        EXPECT(pl.wgrad_slots_per_stage[0] == 1, "zb-h1 p=%d m=%d: first stage %d", p, m,
               pl.wgrad_slots_per_stage[0]);
        if (m >= p) EXPECT(pl.slots_per_stage[0] == p);
        plan_free(&pl);
        schedule_free(&s);
    }
}

/* Two holders of one slot never overlap: the new holder's first op depends on the old one's last
 * op on every role that touched the slot. */
static void test_slot_reuse_deps(void)
{
    pp_job_t c;
    pp_schedule_t s;
    pp_plan_t pl;
    cfg_fill(&c, PP_SCHED_1F1B, 2, 2, 3);
    REQUIRE(generate_1f1b(&s, 2, 3) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    REQUIRE(pl.slots_per_stage[1] == 1);
    int r1 = ts_op_index(&pl, PP_ACT_RECV_F, 1, 1);
    EXPECT(ts_depends_on(&pl, r1, ts_op_index(&pl, PP_ACT_SEND_F, 0, 1)));
    EXPECT(ts_depends_on(&pl, r1, ts_op_index(&pl, PP_ACT_RECV_F, 1, 0)));
    EXPECT(ts_depends_on(&pl, r1, ts_op_index(&pl, PP_ACT_B, 1, 0)));
    EXPECT(ts_depends_on(&pl, r1, ts_op_index(&pl, PP_ACT_SEND_B, 1, 0)));
    EXPECT(pl.ops[r1].n_deps == 4, "%d deps", pl.ops[r1].n_deps);
    /* Stage 0 has two slots: micro-batch 2 reuses micro-batch 0's slot, after 0B0. */
    int f2 = ts_op_index(&pl, PP_ACT_F, 0, 2);
    EXPECT(pl.ops[f2].slot == pl.ops[ts_op_index(&pl, PP_ACT_F, 0, 0)].slot);
    EXPECT(ts_depends_on(&pl, f2, ts_op_index(&pl, PP_ACT_B, 0, 0)));
    EXPECT(ts_depends_on(&pl, f2, ts_op_index(&pl, PP_ACT_SEND_F, 0, 0)));
    EXPECT(ts_depends_on(&pl, f2, ts_op_index(&pl, PP_ACT_RECV_B, 0, 0)));
    EXPECT(pl.ops[ts_op_index(&pl, PP_ACT_F, 0, 1)].slot !=
           pl.ops[ts_op_index(&pl, PP_ACT_F, 0, 0)].slot);
    plan_free(&pl);
    schedule_free(&s);
}

/* Whether op `y` runs before op `x`: reachable backwards from x through dependencies and the
 * FIFO order of each stream. `mark` is scratch of n_ops bytes. */
static int happens_before(const pp_plan_t *pl, int y, int x, char *mark, int *stack)
{
    memset(mark, 0, (size_t)pl->n_ops);
    int top = 0;
    stack[top++] = x;
    mark[x] = 1;
    while (top > 0) {
        int i = stack[--top];
        if (i == y) return 1;
        const pp_op_t *o = &pl->ops[i];
        for (int j = 0; j <= o->n_deps; j++) {
            int on = -1;
            if (j < o->n_deps) {
                on = pl->deps[o->dep_begin + j];
            } else {
                for (int k = i - 1; k >= 0; k--) /* stream predecessor */
                    if (pl->ops[k].device == o->device && pl->ops[k].role == o->role) {
                        on = k;
                        break;
                    }
            }
            if (on >= 0 && !mark[on]) {
                mark[on] = 1;
                stack[top++] = on;
            }
        }
    }
    return 0;
}

/* Every op of a slot's previous holder runs before the new holder's first op, for every
 * generator, including interleaved plans on many devices where pairing needs extra slots. */
static void test_slot_holders_ordered(void)
{
    for (int trial = 0; trial < 10; trial++) {
        int kind = trial % 4, p = ts_rand_int(2, 7), v = ts_rand_int(2, 3);
        int m = kind == 2 ? p * ts_rand_int(1, 3) : ts_rand_int(p, 3 * p);
        if (trial == 9) kind = 2, p = 8, v = 2, m = 16;
        pp_schedule_t s;
        pp_plan_t pl;
        REQUIRE(ts_generate(&s, (pp_sched_kind_t)kind, p, m, v) == PP_OK);
        REQUIRE(plan_lower(&pl, &s, NULL) == PP_OK, "kind %d p=%d m=%d v=%d", kind, p, m, v);
        char *mark = malloc((size_t)pl.n_ops);
        int *stack = malloc(sizeof *stack * (size_t)pl.n_ops);
        int bad = 0;
        for (int d = 0; d < pl.n_devices && !bad; d++) {
            /* Walk the program; remember the ops of the current holder of each (stage, slot). */
            int S = pl.n_stages, M = pl.n_mb;
            int *holder = malloc(sizeof *holder * (size_t)(S * M)); /* [stage*M+slot] mb */
            for (int j = 0; j < S * M; j++)
                holder[j] = -1;
            for (int j = pl.prog_begin[d]; j < pl.prog_begin[d + 1] && !bad; j++) {
                int x = pl.prog_ops[j];
                const pp_op_t *o = &pl.ops[x];
                int *h = &holder[o->stage * M + o->slot];
                if (*h == o->mb) continue;
                if (*h >= 0) /* x is the new holder's first op: all of the old holder first */
                    for (int y = 0; y < pl.n_ops; y++)
                        if (pl.ops[y].stage == o->stage && pl.ops[y].mb == *h &&
                            !happens_before(&pl, y, x, mark, stack)) {
                            EXPECT(0, "kind %d p=%d m=%d: stage %d slot %d: mb %d before mb %d",
                                   kind, p, m, o->stage, o->slot, *h, o->mb);
                            bad = 1;
                            break;
                        }
                *h = o->mb;
            }
            free(holder);
        }
        free(mark);
        free(stack);
        plan_free(&pl);
        schedule_free(&s);
    }
}

/* Without growth, each stage's slots are the lowest free one at each holder's first op (its
 * program order over the stage's ops), the most held at once in all: replayed here with a plain
 * scan, on schedules whose holders leave in another order than they came (1F1B, ZB-H1 and
 * interleaved on several devices, looped BFS). A stage that grew (more slots than the replay
 * needs) takes them released longest ago instead and is left out. */
static void check_lowest_free(const pp_plan_t *pl, const char *what)
{
    int S = pl->n_stages, M = pl->n_mb;
    int *slot = malloc(sizeof *slot * (size_t)(S * M)),
        *last = malloc(sizeof *last * (size_t)(S * M));
    char *busy = calloc((size_t)(S * M), 1);
    int *most = calloc((size_t)S, sizeof *most);
    for (int j = 0; j < S * M; j++)
        slot[j] = last[j] = -1;
    for (int j = 0; j < pl->n_ops; j++) /* each holder's last op, in program order */
        last[pl->ops[pl->prog_ops[j]].stage * M + pl->ops[pl->prog_ops[j]].mb] = j;
    int checked = 0, bad = 0;
    for (int j = 0; j < pl->n_ops && !bad; j++) {
        const pp_op_t *o = &pl->ops[pl->prog_ops[j]];
        int u = o->stage * M + o->mb;
        char *b = busy + (size_t)o->stage * M;
        if (slot[u] < 0) {
            int k = 0;
            while (b[k])
                k++;
            b[k] = 1;
            slot[u] = k;
            if (k + 1 > most[o->stage]) most[o->stage] = k + 1;
        }
        if (last[u] == j) b[slot[u]] = 0;
    }
    for (int j = 0; j < pl->n_ops && !bad; j++) {
        const pp_op_t *o = &pl->ops[j];
        if (most[o->stage] != pl->slots_per_stage[o->stage]) continue; /* it grew */
        checked++;
        if (o->slot != slot[o->stage * M + o->mb]) {
            EXPECT(0, "%s: stage %d mb %d has slot %d, the lowest free was %d", what, o->stage,
                   o->mb, o->slot, slot[o->stage * M + o->mb]);
            bad = 1;
        }
    }
    EXPECT(checked > 0, "%s: every stage grew", what);
    free(slot);
    free(last);
    free(busy);
    free(most);
}

static void test_slots_lowest_free(void)
{
    for (int trial = 0; trial < 16; trial++) {
        int kind = trial % 4, p = ts_rand_int(2, 6), v = ts_rand_int(2, 3);
        int m = kind == 2 ? p * ts_rand_int(1, 4) : ts_rand_int(p, 6 * p);
        pp_schedule_t s;
        pp_plan_t pl;
        char what[64];
        snprintf(what, sizeof what, "kind %d p=%d m=%d v=%d", kind, p, m, v);
        REQUIRE(ts_generate(&s, (pp_sched_kind_t)kind, p, m, v) == PP_OK);
        REQUIRE(plan_lower(&pl, &s, NULL) == PP_OK, "%s", what);
        check_lowest_free(&pl, what);
        plan_free(&pl);
        schedule_free(&s);
        REQUIRE(generate_looped_bfs(&s, p, m, v) == PP_OK);
        REQUIRE(plan_lower(&pl, &s, NULL) == PP_OK, "looped bfs %s", what);
        check_lowest_free(&pl, what);
        plan_free(&pl);
        schedule_free(&s);
    }
}

/* ---- dependencies ---------------------------------------------------------------------------- */

static void test_data_deps(void)
{
    int p = ts_rand_int(3, 5), m = ts_rand_int(p, 2 * p);
    pp_job_t c;
    pp_schedule_t s;
    pp_plan_t pl;
    cfg_fill(&c, PP_SCHED_1F1B, p, p, m);
    REQUIRE(generate_1f1b(&s, p, m) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    for (int st = 0; st < p; st++)
        for (int k = 0; k < m; k++) {
            int f = ts_op_index(&pl, PP_ACT_F, st, k), b = ts_op_index(&pl, PP_ACT_B, st, k);
            int rf = ts_op_index(&pl, PP_ACT_RECV_F, st, k),
                sf = ts_op_index(&pl, PP_ACT_SEND_F, st, k);
            int rb = ts_op_index(&pl, PP_ACT_RECV_B, st, k),
                sb = ts_op_index(&pl, PP_ACT_SEND_B, st, k);
            REQUIRE(f >= 0 && b >= 0);
            EXPECT(ts_depends_on(&pl, b, f));
            if (st > 0) {
                REQUIRE(rf >= 0 && sb >= 0);
                EXPECT(ts_depends_on(&pl, f, rf) && ts_depends_on(&pl, sb, b));
                int send = ts_op_index(&pl, PP_ACT_SEND_F, st - 1, k);
                EXPECT(ts_depends_on(&pl, rf, send) && pl.ops[rf].peer == send);
                EXPECT(pl.ops[rf].device == st && pl.ops[send].device == st - 1);
            } else {
                EXPECT(rf < 0 && sb < 0);
            }
            if (st < p - 1) {
                REQUIRE(sf >= 0 && rb >= 0);
                EXPECT(ts_depends_on(&pl, sf, f) && ts_depends_on(&pl, b, rb));
                EXPECT(ts_depends_on(&pl, rb, ts_op_index(&pl, PP_ACT_SEND_B, st + 1, k)));
            } else {
                EXPECT(sf < 0 && rb < 0);
            }
        }
    plan_free(&pl);
    schedule_free(&s);
}

/* ---- order ----------------------------------------------------------------------------------- */

static void test_order_all_generators(void)
{
    for (int trial = 0; trial < 16; trial++) {
        int kind = trial % 4, p = ts_rand_int(1, 6), v = ts_rand_int(2, 3);
        int m = kind == 2 ? p * ts_rand_int(1, 4) : ts_rand_int(1, 4 * p);
        pp_job_t c;
        pp_schedule_t s;
        pp_plan_t pl;
        REQUIRE(ts_generate(&s, (pp_sched_kind_t)kind, p, m, v) == PP_OK);
        cfg_fill(&c, (pp_sched_kind_t)kind, p, s.n_stages, m);
        REQUIRE(plan_lower(&pl, &s, &c) == PP_OK, "kind %d p=%d m=%d", kind, p, m);
        char what[64];
        snprintf(what, sizeof what, "kind %d p=%d m=%d v=%d", kind, p, m, v);
        check_plan_properties(&pl, what);
        EXPECT(schedule_validate(&s) == PP_OK, "%s", what);
        EXPECT(plan_validate(&pl) == PP_OK, "%s", what);
        /* Compute ops of one device keep the schedule's order. */
        for (int d = 0; d < p; d++) {
            int n = 0;
            for (int j = pl.prog_begin[d]; j < pl.prog_begin[d + 1]; j++) {
                const pp_op_t *o = &pl.ops[pl.prog_ops[j]];
                if (o->role != PP_ROLE_COMPUTE) continue;
                const pp_action_t *a = &s.prog[d].a[n++];
                EXPECT(a->kind == o->kind && a->stage == o->stage && a->mb == o->mb);
            }
            EXPECT(n == s.prog[d].n);
        }
        plan_free(&pl);
        schedule_free(&s);
    }
}

/* ---- failures -------------------------------------------------------------------------------- */

static void test_deadlock_report(void)
{
    /* Device 1 runs micro-batch 1 first; device 0 needs 1's gradient of micro-batch 0 first. */
    const char *progs[] = {"0F0 0B0 0F1 0B1", "1F1 1F0 1B0 1B1"};
    pp_schedule_t s;
    pp_plan_t pl;
    REQUIRE(ts_sched_from(&s, 2, 2, 2, progs, 1) == PP_OK);
    ts_capture_begin();
    pp_status_t st = plan_lower(&pl, &s, NULL);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(pl.ops == NULL && pl.n_ops == 0, "a failed lowering leaves the plan empty");
    EXPECT(strstr(err, "device 0, step 0, action 0SEND_F0 (added for 0F0): waits for its "
                       "receiver 1RECV_F0 (device 1, step 1)"),
           "%s", err);
    EXPECT(strstr(err, "device 1, step 0, action 1RECV_F1 (added for 1F1): waits for 0SEND_F1 "
                       "(device 0, step 2), which never runs before it"),
           "%s", err);
    schedule_free(&s);
}

static void test_unmatched_fails(void)
{
    /* Written with transfers, but 1RECV_F1 has no SEND. */
    const char *progs[] = {"0F0 0SEND_F0 0F1 0RECV_B0 0B0 0RECV_B1 0B1",
                           "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1"};
    pp_schedule_t s;
    pp_plan_t pl;
    REQUIRE(ts_sched_from(&s, 2, 2, 2, progs, 1) == PP_OK);
    ts_capture_begin();
    pp_status_t st = plan_lower(&pl, &s, NULL);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strstr(err, "device 1, step 4, action 1RECV_F1: no matching 0SEND_F1"), "%s", err);
    schedule_free(&s);

    /* Compute-only, 0F1 missing: the receiver of 1F1 has nothing to receive. */
    const char *progs2[] = {"0F0 0B0 0B1", "1F0 1B0 1F1 1B1"};
    REQUIRE(ts_sched_from(&s, 2, 2, 2, progs2, 1) == PP_OK);
    ts_capture_begin();
    st = plan_lower(&pl, &s, NULL);
    err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT);
    EXPECT(strstr(err, "device 1, step 2, action 1RECV_F1 (added for 1F1): its input comes from "
                       "0F1, which never runs"),
           "%s", err);
    schedule_free(&s);
}

/* ---- grid ------------------------------------------------------------------------------------ */

static const char *grid_text(const pp_plan_t *pl)
{
    static char buf[65536];
    FILE *f = tmpfile();
    plan_print_grid(pl, f);
    rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_grid(void)
{
    pp_job_t c;
    pp_schedule_t s;
    pp_plan_t pl;
    cfg_fill(&c, PP_SCHED_1F1B, 2, 2, 4);
    REQUIRE(generate_1f1b(&s, 2, 4) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    const char *g = grid_text(&pl);
    EXPECT(strstr(g, "dev0 | F0 F1 B0 F2 B1 F3 B2 B3\n"), "%s", g);
    EXPECT(strstr(g, "dev1 | F0 B0 F1 B1 F2 B2 F3 B3\n"), "%s", g);
    EXPECT(strstr(g, "dev0 | stage 0: 2\n") && strstr(g, "dev1 | stage 1: 1\n"), "%s", g);
    plan_free(&pl);
    schedule_free(&s);

    /* Several stages per device: stage prefix, aligned columns. */
    cfg_fill(&c, PP_SCHED_INTERLEAVED, 2, 4, 2);
    REQUIRE(generate_interleaved(&s, 2, 2, 2) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    g = grid_text(&pl);
    EXPECT(strstr(g, "dev0 | 0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1\n"), "%s", g);
    EXPECT(strstr(g, "dev1 | stage 1: 2, stage 3: 1\n"), "%s", g);
    plan_free(&pl);
    schedule_free(&s);

    /* m = 32 on 4 devices wraps into blocks no wider than 100 columns, every step shown once. */
    cfg_fill(&c, PP_SCHED_ZBH1, 4, 4, 32);
    REQUIRE(generate_zbh1(&s, 4, 32) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &c) == PP_OK);
    g = grid_text(&pl);
    int lines = 0, cells = 0;
    for (const char *l = g; *l;) {
        const char *e = strchr(l, '\n');
        int len = (int)(e ? e - l : (long)strlen(l));
        EXPECT(len <= 100, "line of %d characters", len);
        EXPECT(len == 0 || l[len - 1] != ' ', "trailing blank");
        if (!strncmp(l, "dev3 |", 6) && strncmp(l + 6, " stage", 6))
            for (const char *q = l; q < l + len; q++)
                cells += *q == 'F' || *q == 'I' || *q == 'W';
        lines++;
        l = e ? e + 1 : l + len;
    }
    EXPECT(cells == 3 * 32, "dev3 shows %d cells", cells);
    EXPECT(lines > 10 && strstr(g, "compute steps 0.."), "%s", g);
    plan_free(&pl);
    schedule_free(&s);
}

int main(void)
{
    ts_rng_seed(0x61c8864680b583ebull);
    RUN(test_insert_1f1b_p2_m2);
    RUN(test_insert_zbh1);
    RUN(test_with_comm_kept);
    RUN(test_links);
    RUN(test_slots);
    RUN(test_slot_reuse_deps);
    RUN(test_slot_holders_ordered);
    RUN(test_slots_lowest_free);
    RUN(test_data_deps);
    RUN(test_order_all_generators);
    RUN(test_deadlock_report);
    RUN(test_unmatched_fails);
    RUN(test_grid);
    return check_summary("test_lower");
}
