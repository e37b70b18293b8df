/*
 * test_offload.c — run.offload on the CPU: where the lowering places OFFLOAD and RELOAD, the
 * device ring and host slots it sizes, the dependencies that order slot and host-slot reuse, the
 * rules plan_validate keeps for the copies, the device bytes with and without offload, and the
 * simulator's host-link model (a copy takes bytes / host_link_gbps on its own stream), and every
 * multi-chunk kind lowering, validating and simulating with it on an uneven split (DualPipeV's
 * overlapped pairs on their second compute stream beside the copies); and part of each slot kept
 * on the device (plan_lower_partial): the kept regions, their reuse, the bytes moved and the
 * memory of the two pools, as stage_init sizes them.
 */
#include "sim/explain.h"
#include "schedule/generate.h"
#include "model/stage_layout.h"
#include "plan/memory.h"
#include "plan/plan.h"
#include "run/run.h"
#include "sim/simulate.h"
#include "plan/stage_cfg.h"
#include "tests/check.h"
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static pp_status_t lower(pp_plan_t *pl, const pp_job_t *c)
{
    pp_schedule_t s;
    PP_CHECK(generate_schedule(&s, c));
    pp_status_t st = plan_lower(pl, &s, c);
    schedule_free(&s);
    return st;
}

/* GPipe on one device, m = 8: each OFFLOAD after the next forward, each RELOAD one compute op
 * before its backward; a ring of 3 slots instead of 8, 6 host slots; copies move the stage's
 * offload bytes on the offload and load streams. */
static void test_gpipe_one_device(void)
{
    pp_job_t c;
    pp_plan_t pl;
    ts_offload_job(&c, PP_SCHED_GPIPE, 1, 8, PP_OFFLOAD_ACTIVATIONS);
    REQUIRE(lower(&pl, &c) == PP_OK);
    EXPECT(plan_validate(&pl) == PP_OK);
    const char *want = "0F0 0F1 0OFFLOAD0 0F2 0OFFLOAD1 0F3 0OFFLOAD2 0F4 0OFFLOAD3 0F5 0OFFLOAD4 "
                       "0F6 0OFFLOAD5 0RELOAD0 0F7 0OFFLOAD6 0RELOAD1 0B0 0OFFLOAD7 0RELOAD2 0B1 "
                       "0RELOAD3 0B2 0RELOAD4 0B3 0RELOAD5 0B4 0RELOAD6 0B5 0RELOAD7 0B6 0B7";
    EXPECT(!strcmp(ts_program_text(&pl, 0), want), "program:\n  %s\nwant:\n  %s",
           ts_program_text(&pl, 0), want);
    EXPECT(pl.offload && pl.offload_lookahead == 1);
    EXPECT(pl.slots_per_stage[0] == 3 && pl.plain_slots_per_stage[0] == 8 &&
               pl.host_slots_per_stage[0] == 6,
           "ring %d, plain %d, host %d", pl.slots_per_stage[0], pl.plain_slots_per_stage[0],
           pl.host_slots_per_stage[0]);
    pp_stage_cfg_t sc;
    plan_stage_cfg(&sc, &c, &pl, 0);
    EXPECT(pl.offload_bytes[0] == stage_offload_bytes(&sc) && pl.offload_bytes[0] > 0);
    for (int i = 0; i < pl.n_ops; i++) {
        const pp_op_t *o = &pl.ops[i];
        if (!pp_action_is_copy(o->kind)) continue;
        EXPECT(o->bytes == pl.offload_bytes[0] && o->host >= 0 && o->host < 6);
        EXPECT(o->role == (o->kind == PP_ACT_OFFLOAD ? PP_ROLE_OFFLOAD : PP_ROLE_LOAD));
    }
    /* The device bytes follow the slot counts. */
    size_t with = plan_device_bytes(&pl, &c, 0, 0), without = plan_device_bytes(&pl, &c, 0, 1);
    EXPECT(without - with == 5 * stage_slot_bytes(&sc), "with %zu, without %zu", with, without);
    EXPECT(plan_host_bytes(&pl, 0) == 6 * pl.offload_bytes[0]);
    plan_free(&pl);
}

/* The dependencies: OFFLOAD waits for its F, RELOAD for its OFFLOAD and for the last ops of its
 * slot's previous holder, B for its RELOAD; an OFFLOAD reusing a host slot waits for the RELOAD
 * that read it. */
static void test_dependencies(void)
{
    pp_job_t c;
    pp_plan_t pl;
    ts_offload_job(&c, PP_SCHED_GPIPE, 1, 8, PP_OFFLOAD_ACTIVATIONS);
    REQUIRE(lower(&pl, &c) == PP_OK);
    for (int k = 0; k < 8; k++) {
        int f = ts_op_index(&pl, PP_ACT_F, 0, k), off = ts_op_index(&pl, PP_ACT_OFFLOAD, 0, k);
        int rel = ts_op_index(&pl, PP_ACT_RELOAD, 0, k), b = ts_op_index(&pl, PP_ACT_B, 0, k);
        REQUIRE(f >= 0 && off >= 0 && rel >= 0 && b >= 0);
        EXPECT(ts_depends_on(&pl, off, f) && ts_depends_on(&pl, rel, off) &&
                   ts_depends_on(&pl, b, rel),
               "micro-batch %d", k);
        EXPECT(pl.ops[b].slot == pl.ops[rel].slot && pl.ops[off].slot == pl.ops[f].slot);
        EXPECT(pl.ops[rel].host == pl.ops[off].host);
    }
    /* RELOAD0 takes the slot OFFLOAD5 gave back (and waits for it); OFFLOAD6 takes host slot 0,
     * which RELOAD0 read. */
    int rel0 = ts_op_index(&pl, PP_ACT_RELOAD, 0, 0), off5 = ts_op_index(&pl, PP_ACT_OFFLOAD, 0, 5);
    int off6 = ts_op_index(&pl, PP_ACT_OFFLOAD, 0, 6);
    EXPECT(pl.ops[rel0].slot == pl.ops[off5].slot && ts_depends_on(&pl, rel0, off5));
    EXPECT(pl.ops[off6].host == pl.ops[rel0].host && ts_depends_on(&pl, off6, rel0));
    plan_free(&pl);
}

/* Every generated schedule lowers and validates with offload on; the ring never exceeds the
 * plain slots; the last stage of 1F1B (F then B at once) offloads nothing; without offload there
 * are no copies and the plain slots are the slots. */
static void test_every_kind(void)
{
    static const pp_sched_kind_t kinds[] = {PP_SCHED_GPIPE, PP_SCHED_1F1B, PP_SCHED_ZBH1};
    for (int k = 0; k < 3; k++)
        for (int p = 1; p <= 4; p *= 2)
            for (int off = 0; off < 2; off++) {
                pp_job_t c;
                pp_plan_t pl;
                int m = ts_rand_int(4, 16);
                ts_offload_job(&c, kinds[k], p, m, off ? PP_OFFLOAD_ACTIVATIONS : PP_OFFLOAD_NONE);
                REQUIRE(lower(&pl, &c) == PP_OK, "kind %d p=%d m=%d", (int)kinds[k], p, m);
                EXPECT(plan_validate(&pl) == PP_OK, "kind %d p=%d m=%d", (int)kinds[k], p, m);
                int copies = 0;
                for (int i = 0; i < pl.n_ops; i++)
                    copies += pp_action_is_copy(pl.ops[i].kind);
                EXPECT(off ? copies % 2 == 0 : copies == 0);
                for (int s = 0; s < pl.n_stages; s++)
                    EXPECT(off ? pl.slots_per_stage[s] <= pl.plain_slots_per_stage[s]
                               : pl.slots_per_stage[s] == pl.plain_slots_per_stage[s]);
                if (off && kinds[k] == PP_SCHED_1F1B)
                    EXPECT(ts_op_index(&pl, PP_ACT_OFFLOAD, p - 1, 0) < 0);
                if (off && kinds[k] == PP_SCHED_GPIPE) EXPECT(pl.slots_per_stage[0] <= 3);
                plan_free(&pl);
            }
}

/* The two-chunk kinds with run.offload and a balanced split, through the run chain: the copies
 * lower on their offload and load channels, the plan validates, the simulation ends, and every
 * OFFLOAD has its RELOAD. */
static void test_two_chunk_kinds(void)
{
    static const char *const kinds[] = {"interleaved-1f1b", "zb-h2",      "zb-v",
                                        "dualpipe-v",       "looped-bfs", "interleaved-zb"};
    for (int k = 0; k < 6; k++)
        for (int p = 2; p <= 4; p *= 2) {
            char yaml[512];
            snprintf(yaml, sizeof yaml,
                     "model: {layers: 30, hidden: 64, heads: 4, seq_len: 32, vocab: 4096}\n"
                     "pipeline: {devices: %d, micro_batches: %d, split: balanced}\n"
                     "schedule: {kind: %s}\nrun: {offload: activations}\n",
                     p, 2 * p, kinds[k]);
            pp_run_t r;
            pp_run_opts_t ro = {0};
            REQUIRE(run_load(&r, "t.yaml", yaml, NULL, 0, 0) == PP_OK, "%s p=%d", kinds[k], p);
            EXPECT(r.plan.offload, "%s p=%d: offload on", kinds[k], p);
            REQUIRE(run_go(&r, &ro) == PP_OK, "%s p=%d", kinds[k], p);
            int off = 0, rel = 0, pairs = 0;
            for (int i = 0; i < r.plan.n_ops; i++) {
                off += r.plan.ops[i].kind == PP_ACT_OFFLOAD;
                rel += r.plan.ops[i].kind == PP_ACT_RELOAD;
                pairs += r.plan.ops[i].role == PP_ROLE_OVERLAP;
            }
            EXPECT(off > 0 && off == rel, "%s p=%d: %d OFFLOAD, %d RELOAD", kinds[k], p, off, rel);
            /* DualPipeV's pairs keep their second compute stream beside the copies */
            EXPECT((pairs > 0) == !strcmp(kinds[k], "dualpipe-v"), "%s p=%d: %d overlapped",
                   kinds[k], p, pairs);
            EXPECT(r.predicted_ms > 0, "%s p=%d", kinds[k], p);
            run_free(&r);
        }
}

/* plan_validate refuses a backward that does not wait for its RELOAD. */
static void test_validate_rejects(void)
{
    pp_job_t c;
    pp_plan_t pl;
    ts_offload_job(&c, PP_SCHED_GPIPE, 1, 8, PP_OFFLOAD_ACTIVATIONS);
    REQUIRE(lower(&pl, &c) == PP_OK);
    int b = ts_op_index(&pl, PP_ACT_B, 0, 3), rel = ts_op_index(&pl, PP_ACT_RELOAD, 0, 3);
    int f = ts_op_index(&pl, PP_ACT_F, 0, 3);
    for (int j = 0; j < pl.ops[b].n_deps; j++)
        if (pl.deps[pl.ops[b].dep_begin + j] == rel) pl.deps[pl.ops[b].dep_begin + j] = f;
    ts_capture_begin();
    pp_status_t st = plan_validate(&pl);
    const char *e = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && strstr(e, "action 0B3: does not wait for its RELOAD"), "%s", e);
    plan_free(&pl);
}

/* The simulator: a copy takes bytes / (GB/s * 1e6) ms on its own stream. With a fast link the
 * copies hide under the compute (the step as without offload); with a slow one the step is bound
 * by the link: the first F, m offloads one after the other on the offload stream, the last
 * micro-batch's reload and its backward. */
static void test_simulate_host_link(void)
{
    pp_job_t c;
    pp_plan_t pl, plain;
    const int m = 8;
    ts_offload_job(&c, PP_SCHED_GPIPE, 1, m, PP_OFFLOAD_ACTIVATIONS);
    REQUIRE(lower(&pl, &c) == PP_OK);
    ts_offload_job(&c, PP_SCHED_GPIPE, 1, m, PP_OFFLOAD_NONE);
    REQUIRE(lower(&plain, &c) == PP_OK);
    const double step_plain = m * (1.0 + 2.0); /* F 1, B = I + W = 2 */
    for (int slow = 0; slow < 2; slow++) {
        double copy_ms = slow ? 3.0 : 0.25;
        pp_job_cost_t cost = {1.0, 1.0, 1.0, 0.0, (double)pl.offload_bytes[0] / (copy_ms * 1e6), 0};
        pp_cost_model_t cm;
        pp_timeline_t tl;
        REQUIRE(cost_model_uniform(&cm, 1, &cost) == PP_OK);
        REQUIRE(simulate_plan(&tl, &plain, &cm) == PP_OK);
        EXPECT(fabs(tl.step_ms[0] - step_plain) < 1e-9, "plain step %g", tl.step_ms[0]);
        timeline_free(&tl);
        REQUIRE(simulate_plan(&tl, &pl, &cm) == PP_OK);
        for (int i = 0; i < pl.n_ops; i++) {
            if (!pp_action_is_copy(pl.ops[i].kind)) continue;
            EXPECT(fabs(tl.t[i].end_ms - tl.t[i].start_ms - copy_ms) < 1e-9, "copy %d: %g ms", i,
                   tl.t[i].end_ms - tl.t[i].start_ms);
        }
        if (!slow)
            EXPECT(fabs(tl.step_ms[0] - step_plain) < 1e-9, "fast link: step %g", tl.step_ms[0]);
        else
            EXPECT(tl.step_ms[0] >= 1.0 + (m + 1) * copy_ms + 2.0 - 1e-9, "slow link: step %g",
                   tl.step_ms[0]);
        /* the what-if rows price the copies as the model does: "no launch gaps" is the model as
         * it is, and freeing the pipeline's transfers (none on one device) frees no copy */
        pp_what_if_t w;
        REQUIRE(explain_what_if(&w, &pl, &cm) == PP_OK);
        EXPECT(w.step_ms[PP_WHAT_IF_NO_LAUNCH] == timeline_makespan(&tl), "%g against %g",
               w.step_ms[PP_WHAT_IF_NO_LAUNCH], timeline_makespan(&tl));
        EXPECT(w.step_ms[PP_WHAT_IF_FREE_COMM] == timeline_makespan(&tl), "%g against %g",
               w.step_ms[PP_WHAT_IF_FREE_COMM], timeline_makespan(&tl));
        timeline_free(&tl);
        cost_model_free(&cm);
    }
    plan_free(&pl);
    plan_free(&plain);
}

/* 1F1B on 4 devices, m = 8, offload auto sending every key of stage 0 (lag 1, lookahead 1) and
 * keeping 6 of each slot's tensors on the device: a kept region per micro-batch held at once (4,
 * the plain plan's slots), each key's first compute op waiting for the last compute op of the
 * region's previous holder, whose lifetime it does not overlap; copies move the moved part only;
 * a stage that sends nothing keeps nothing apart; the memory prediction counts both pools with the
 * sizes stage_init carves (stage_layout_slot). */
static void test_partial_slots(void)
{
    pp_job_t c;
    pp_schedule_t s;
    pp_plan_t pl, whole;
    ts_offload_job(&c, PP_SCHED_1F1B, 4, 8, PP_OFFLOAD_AUTO);
    REQUIRE(generate_schedule(&s, &c) == PP_OK);
    pp_offload_key_t pick[4 * 8] = {{0}};
    for (int mb = 0; mb < 8; mb++)
        pick[mb] = (pp_offload_key_t){1, 1, 1};
    /* the last stage's keys are chosen too, but its B follows its F at once: none is sent, and
     * it keeps nothing apart; stages 1 and 2 have no key chosen */
    for (int mb = 0; mb < 8; mb++)
        pick[3 * 8 + mb] = (pp_offload_key_t){1, 1, 1};
    const int keep[4] = {6, 6, 6, 6};
    REQUIRE(plan_lower_offload(&whole, &s, &c, pick) == PP_OK);
    REQUIRE(plan_lower_partial(&pl, &s, &c, pick, keep) == PP_OK);
    EXPECT(plan_validate(&pl) == PP_OK);
    EXPECT(pl.offload_keep[0] == 6 && pl.offload_keep[1] == 0 && pl.keep_slots_per_stage[0] == 4 &&
               pl.keep_slots_per_stage[1] == 0 && pl.slots_per_stage[0] == whole.slots_per_stage[0],
           "keep %d/%d, kept regions %d/%d, ring %d (whole %d)", pl.offload_keep[0],
           pl.offload_keep[1], pl.keep_slots_per_stage[0], pl.keep_slots_per_stage[1],
           pl.slots_per_stage[0], whole.slots_per_stage[0]);
    EXPECT(pl.offload_keep[3] == 0 && pl.keep_slots_per_stage[3] == 0,
           "the last stage keeps %d, %d kept regions", pl.offload_keep[3],
           pl.keep_slots_per_stage[3]);
    EXPECT(pl.offload_bytes[0] < whole.offload_bytes[0] &&
               pl.offload_bytes[1] == whole.offload_bytes[1] &&
               pl.offload_bytes[3] == whole.offload_bytes[3],
           "moves %zu of %zu", pl.offload_bytes[0], whole.offload_bytes[0]);
    int copies = 0;
    for (int i = 0; i < pl.n_ops; i++)
        if (pp_action_is_copy(pl.ops[i].kind)) {
            EXPECT(pl.ops[i].bytes == pl.offload_bytes[0]);
            copies++;
        }
    EXPECT(copies > 0);
    /* kept regions: in range, one holder at a time, each waiting for the one before */
    for (int a = 0; a < 8; a++) {
        int ka = pl.keep_slot[a];
        EXPECT(ka >= 0 && ka < 4 && pl.keep_slot[8 + a] == -1, "mb %d: region %d", a, ka);
        int fa = ts_op_index(&pl, PP_ACT_F, 0, a), ba = ts_op_index(&pl, PP_ACT_B, 0, a);
        for (int b = a + 1; b < 8; b++) {
            int fb = ts_op_index(&pl, PP_ACT_F, 0, b);
            if (pl.keep_slot[b] != ka || pl.ops[fb].pos < pl.ops[ba].pos) continue;
            int between = 0; /* a holder after a and before b takes the dependency instead */
            for (int k = a + 1; k < b; k++)
                between |= pl.keep_slot[k] == ka;
            if (!between)
                EXPECT(ts_depends_on(&pl, fb, ba), "mb %d's F does not wait for %d", b, a);
        }
        for (int b = 0; b < 8; b++) {
            int fb = ts_op_index(&pl, PP_ACT_F, 0, b), bb = ts_op_index(&pl, PP_ACT_B, 0, b);
            if (b != a && pl.keep_slot[b] == ka)
                EXPECT(pl.ops[bb].pos < pl.ops[fa].pos || pl.ops[fb].pos > pl.ops[ba].pos,
                       "mbs %d and %d share region %d at once", a, b, ka);
        }
    }
    /* the two pools, sized as stage_init carves them */
    pp_stage_cfg_t sc;
    slot_split_t sp;
    plan_stage_cfg(&sc, &c, &pl, 0);
    stage_layout_slot(&sc, stage_attention_fused(&sc), NULL, NULL, NULL, &sp);
    EXPECT(sc.offload_keep == 6 && sc.n_keep_slots == 4 && sc.n_slots == pl.slots_per_stage[0]);
    EXPECT(sp.kept > 0 && sp.kept == stage_keep_bytes(&sc) && sp.ring == stage_slot_bytes(&sc) &&
               sp.moved == stage_offload_bytes(&sc) && sp.moved == pl.offload_bytes[0],
           "kept %zu ring %zu moved %zu", sp.kept, sp.ring, sp.moved);
    EXPECT(stage_device_bytes(&sc) == stage_state_bytes(&sc) + stage_workspace_bytes(&sc) +
                                          (size_t)sc.n_slots * sp.ring + 4 * sp.kept +
                                          (size_t)sc.n_wgrad_slots * stage_wgrad_slot_bytes(&sc),
           "device bytes");
    pp_mem_pred_t m;
    REQUIRE(memory_predict(&m, &c, &pl, gpu_find("h100"), NULL) == PP_OK);
    EXPECT_NEAR(m.dev[0].slots, (double)sc.n_slots * sp.ring + 4.0 * sp.kept, 0.5, 0.0);
    EXPECT_NEAR(m.dev[0].total - m.dev[0].runtime, (double)plan_device_bytes(&pl, &c, 0, 0), 0.5,
                0.0);
    /* a whole slot is a kept region and a ring slot, less what alignment adds; without offload,
     * whole slots again */
    pp_stage_cfg_t wc;
    plan_stage_cfg(&wc, &c, &whole, 0);
    EXPECT(sp.kept + sp.ring >= stage_slot_bytes(&wc) &&
           sp.kept + sp.ring < stage_slot_bytes(&wc) + 256 * 8);
    EXPECT(plan_device_bytes(&pl, &c, 0, 1) == plan_device_bytes(&whole, &c, 0, 1));
    plan_free(&pl);
    plan_free(&whole);
    schedule_free(&s);
}

int main(void)
{
    ts_rng_seed(12);
    RUN(test_gpipe_one_device);
    RUN(test_dependencies);
    RUN(test_every_kind);
    RUN(test_two_chunk_kinds);
    RUN(test_validate_rejects);
    RUN(test_simulate_host_link);
    RUN(test_partial_slots);
    return check_summary("test_offload");
}
