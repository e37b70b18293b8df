/*
 * test_offload_auto.c — run.offload: auto on the CPU: nothing offloaded where everything fits
 * (the plan none's), the budget met with the longest-lived slots at no cost in the step where the
 * compute hides the copies, the issue's shapes (reference model and 7B class, 1F1B and ZB-V, m =
 * 32, a budget that leaves device 0 two micro-batches of slots) printed against the step without
 * offload, a limit that nothing meets, `activations` as every key at the shortest copies, the
 * offload idle reason, the host link shared by the devices of one host, the planner's offload
 * dimension, and part of each slot sent where whole slots cost time (7B class, 1F1B, m = 32, the
 * h200 description, limits 44 .. 41 GiB).
 */
#include "plan/memory.h"
#include "plan/plan.h"
#include "plan/stage_cfg.h"
#include "run/planner.h"
#include "run/run.h"
#include "schedule/generate.h"
#include "sim/explain.h"
#include "sim/simulate.h"
#include "tests/check.h"
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Load `file` (a shipped schedule) with the overrides and predict it, on no GPU. */
static pp_status_t load(pp_run_t *r, const char *file, const char *const *sets, int n)
{
    pp_status_t st = run_load(r, file, NULL, sets, n, 0);
    if (st == PP_OK) st = run_predict(r, NULL);
    if (st == PP_OK) st = run_report(r);
    return st;
}

/* 1 when two plans hold the same ops (kind, device, stage, micro-batch, slot, host slot, bytes,
 * dependencies) in the same order, and the same slot counts. */
static int same_plan(const pp_plan_t *a, const pp_plan_t *b)
{
    if (a->n_ops != b->n_ops || a->n_stages != b->n_stages || a->offload != b->offload) return 0;
    for (int s = 0; s < a->n_stages; s++)
        if (a->slots_per_stage[s] != b->slots_per_stage[s] ||
            a->host_slots_per_stage[s] != b->host_slots_per_stage[s])
            return 0;
    for (int i = 0; i < a->n_ops; i++) {
        const pp_op_t *x = &a->ops[i], *y = &b->ops[i];
        if (x->kind != y->kind || x->device != y->device || x->stage != y->stage ||
            x->mb != y->mb || x->slot != y->slot || x->host != y->host || x->bytes != y->bytes ||
            x->n_deps != y->n_deps)
            return 0;
        for (int j = 0; j < x->n_deps; j++)
            if (a->deps[x->dep_begin + j] != b->deps[y->dep_begin + j]) return 0;
    }
    return 1;
}

/* Where everything fits (the reference model on 4 devices against the h100's memory less the
 * margin), auto offloads nothing: the plan and the simulated step are none's. */
static void test_fits_offloads_nothing(void)
{
    const char *none[] = {"pipeline.devices=4", "pipeline.micro_batches=8"};
    const char *with[] = {"pipeline.devices=4", "pipeline.micro_batches=8", "run.offload=auto"};
    pp_run_t a, b;
    REQUIRE(load(&a, "schedules/1f1b.yaml", none, 2) == PP_OK);
    REQUIRE(load(&b, "schedules/1f1b.yaml", with, 3) == PP_OK);
    EXPECT(!b.plan.offload, "auto offloaded where everything fits");
    EXPECT(same_plan(&a.plan, &b.plan), "auto's plan is not none's");
    EXPECT(a.predicted_ms == b.predicted_ms, "%g against %g", b.predicted_ms, a.predicted_ms);
    EXPECT(b.mem.n_over == 0 && b.mem.budget, "over %d, budget %d", b.mem.n_over, b.mem.budget);
    /* the default budget: the h100's memory less the margin */
    EXPECT_NEAR(b.mem.limit, 79.2 * (1.0 - MEMORY_AUTO_MARGIN) * GIB, 1.0, 1e-9);
    EXPECT(b.offload_note[0] == '\0', "%s", b.offload_note);
    run_free(&a);
    run_free(&b);
}

/* The lifetime of (stage 0, mb) on device 0 in the plain plan's simulation: its forward's end to
 * its first backward's start. */
static double lifetime(const pp_run_t *r, int mb)
{
    int f = ts_op_index(&r->plan, PP_ACT_F, 0, mb), b = ts_op_index(&r->plan, PP_ACT_B, 0, mb);
    return r->sim.t[b].start_ms - r->sim.t[f].end_ms;
}

/* 7B-class 1F1B, m = 32, a limit one slot under device 0's peak: every device fits, the step is
 * the step without offload (the compute hides every copy), device 0 alone sends slots, and the
 * slots it keeps are the shortest-lived of its stage. With a link fast enough, no compute op
 * waits for a copy at all. */
static void test_one_slot_free(void)
{
    const char *none[] = {"pipeline.devices=4", "pipeline.micro_batches=32"};
    const char *with[] = {"pipeline.devices=4", "pipeline.micro_batches=32", "run.offload=auto",
                          "run.memory_limit=44", "cost.host_link_gbps=1000"};
    pp_run_t a, b;
    REQUIRE(load(&a, "schedules/7b-1f1b.yaml", none, 2) == PP_OK);
    for (int fast = 0; fast < 2; fast++) {
        REQUIRE(load(&b, "schedules/7b-1f1b.yaml", with, fast ? 5 : 4) == PP_OK);
        printf("  7b 1f1b m=32, limit 44 GiB%s: step %.3f ms with auto, %.3f without (%+.2f%%); "
               "device 0 %.2f GiB (%.2f without), %d slots sent\n",
               fast ? ", 1000 GB/s link" : "", b.predicted_ms, a.predicted_ms,
               100.0 * (b.predicted_ms / a.predicted_ms - 1.0), b.mem.dev[0].total / GIB,
               a.mem.dev[0].total / GIB, b.report.per_device[0].offload_slots);
        EXPECT(b.mem.n_over == 0, "%d devices over", b.mem.n_over);
        EXPECT(b.predicted_ms <= a.predicted_ms * 1.05, "%g against %g", b.predicted_ms,
               a.predicted_ms);
        EXPECT(b.report.per_device[0].offload_slots > 0, "device 0 sends nothing");
        for (int d = 1; d < 4; d++)
            EXPECT(b.report.per_device[d].offload_slots == 0, "device %d sends %d", d,
                   b.report.per_device[d].offload_slots);
        /* the kept keys of stage 0 live no longer than any sent one */
        double sent_min = INFINITY, kept_max = -INFINITY;
        for (int mb = 0; mb < 32; mb++) {
            double life = lifetime(&a, mb);
            if (ts_op_index(&b.plan, PP_ACT_OFFLOAD, 0, mb) >= 0)
                sent_min = fmin(sent_min, life);
            else
                kept_max = fmax(kept_max, life);
        }
        EXPECT(kept_max <= sent_min + 1e-9, "a kept slot lives %g ms, a sent one %g", kept_max,
               sent_min);
        if (fast) /* the lookaheads cover the copies: no compute op waited for one */
            EXPECT(b.report.explain.split.total_ms[PP_IDLE_OFFLOAD] == 0.0, "%g ms",
                   b.report.explain.split.total_ms[PP_IDLE_OFFLOAD]);
        /* the offload reason is shown, and the reasons still add up to the idle time */
        EXPECT(explain_shows_reason(&b.report.explain, PP_IDLE_OFFLOAD));
        double sum = 0.0;
        for (int c = 0; c < PP_IDLE_COUNT; c++)
            sum += b.report.explain.split.total_ms[c];
        double idle = 0.0;
        for (int d = 0; d < 4; d++)
            idle += b.report.per_device[d].idle_ms;
        EXPECT_NEAR(sum, idle, 1e-6, 1e-9);
        /* the JSON and the table say what each device sent and the offload idle time */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        REQUIRE(f != NULL);
        EXPECT(report_print_json(&b.report, f) == PP_OK);
        EXPECT(report_print_table(&b.report, &b.job, f) == PP_OK);
        fclose(f);
        EXPECT(buf && strstr(buf, "\"offload_slots\":") && strstr(buf, "\"offload_bytes\":") &&
                   strstr(buf, "\"cooldown\":") && strstr(buf, "\"offload\":"),
               "%s", buf);
        EXPECT(buf && strstr(buf, "# offloaded to the host: device 0: ") &&
                   strstr(buf, "GiB each way); 1: none") && strstr(buf, "    offload ") &&
                   strstr(buf, "# host link (run.offload copies)"),
               "%s", buf);
        free(buf);
        run_free(&b);
    }
    EXPECT(!explain_shows_reason(&a.report.explain, PP_IDLE_OFFLOAD),
           "no offload reason without it");
    run_free(&a);
}

/* 7B-class ZB-V, m = 32, a limit of 55.5 GiB, under the fullest device's (device 3, which holds
 * the V's bottom chunks, 57.10 GiB): it alone sends slots, and the step is within the issue's 10 %
 * of the step without offload. */
static void test_zbv_fullest_device(void)
{
    const char *none[] = {"pipeline.devices=4", "pipeline.micro_batches=32"};
    const char *with[] = {"pipeline.devices=4", "pipeline.micro_batches=32", "run.offload=auto",
                          "run.memory_limit=55.5"};
    pp_run_t a, b;
    REQUIRE(load(&a, "schedules/7b-zb-v.yaml", none, 2) == PP_OK);
    REQUIRE(load(&b, "schedules/7b-zb-v.yaml", with, 4) == PP_OK);
    printf("  7b zb-v m=32, limit 55.5 GiB: step %.3f ms with auto, %.3f without (%+.2f%%); "
           "device 3 %.2f GiB (%.2f without), %d slots sent\n",
           b.predicted_ms, a.predicted_ms, 100.0 * (b.predicted_ms / a.predicted_ms - 1.0),
           b.mem.dev[3].total / GIB, a.mem.dev[3].total / GIB,
           b.report.per_device[3].offload_slots);
    EXPECT(a.mem.dev[3].total > 55.5 * GIB && b.mem.n_over == 0, "%d devices over", b.mem.n_over);
    EXPECT(b.predicted_ms <= a.predicted_ms * 1.10, "%g against %g", b.predicted_ms,
           a.predicted_ms);
    for (int d = 0; d < 3; d++)
        EXPECT(b.report.per_device[d].offload_slots == 0, "device %d sends %d", d,
               b.report.per_device[d].offload_slots);
    run_free(&a);
    run_free(&b);
}

/* The issue's shapes: the reference model and the 7B class, 1F1B and ZB-V, m = 32 on 4 devices,
 * a budget that leaves device 0 two micro-batches' worth of slots (and 0.1 GiB for mapping the
 * pinned host slots into each device: 2 MiB a GiB, plan/memory.c). Printed: the step with auto
 * against the step without offload and with `activations`. Checked: what the lowering reaches
 * (1F1B fits the budget; ZB-V's copies cannot fit it, and the note says how much is needed). */
static void test_issue_shapes(void)
{
    const char *files[] = {"schedules/1f1b.yaml", "schedules/zb-v.yaml", "schedules/7b-1f1b.yaml",
                           "schedules/7b-zb-v.yaml"};
    for (int i = 0; i < 4; i++) {
        const char *sets[4] = {"pipeline.devices=4", "pipeline.micro_batches=32"};
        char lim[64];
        pp_run_t a, b, c;
        REQUIRE(load(&a, files[i], sets, 2) == PP_OK);
        const pp_mem_device_t *d0 = &a.mem.dev[0];
        double budget = d0->total - d0->slots + 2.0 * d0->slots / d0->mb_equiv + 0.1 * GIB;
        snprintf(lim, sizeof lim, "run.memory_limit=%.9g", budget / GIB + 1e-6);
        sets[2] = "run.offload=auto";
        sets[3] = lim;
        REQUIRE(load(&b, files[i], sets, 4) == PP_OK);
        sets[2] = "run.offload=activations";
        REQUIRE(load(&c, files[i], sets, 3) == PP_OK);
        printf("  %s m=32, device 0 at two micro-batches (%.2f GiB, %.2f without): auto %.1f ms "
               "(%+.1f%%, %s), none %.1f ms, activations %.1f ms (%+.1f%%)\n",
               files[i], budget / GIB, d0->total / GIB, b.predicted_ms,
               100.0 * (b.predicted_ms / a.predicted_ms - 1.0),
               b.mem.n_over ? "does not fit" : "fits", a.predicted_ms, c.predicted_ms,
               100.0 * (c.predicted_ms / a.predicted_ms - 1.0));
        int zbv = strstr(files[i], "zb-v") != NULL;
        if (!zbv) EXPECT(b.mem.n_over == 0, "%s: %d devices over", files[i], b.mem.n_over);
        if (zbv)
            EXPECT(b.mem.n_over > 0 && strstr(b.offload_note, "GiB with every slot"), "%s: %s",
                   files[i], b.offload_note);
        run_free(&a);
        run_free(&b);
        run_free(&c);
    }
}

/* 7B-class 1F1B, m = 32, h200 description (mma.sync attention), limits 44 to 41 GiB: all fit; where
 * whole slots are free (44, 43: one slot of device 0's four) auto sends whole slots at the plain
 * step; where they cost time (42, 41: a ring of two), it keeps on the device the most of each
 * slot that fits and the step is quicker than whole slots' (42: 3785.8 against 4848.9 ms, the
 * plain step 3134.1: the copy back still outlasts the forward it hides under), and each copy moves
 * less than a whole slot, as the report says. Printed: the three steps and what device 0 moves. */
static void test_partial_7b(void)
{
    /* the figures above are the mma.sync attention's: on warpgroup MMA the forward a copy hides
     * under is shorter, and even one whole slot costs time at 44 GiB */
    setenv("PPSCHED_FLASH_MMA", "sync", 1);
    const char *none[] = {"pipeline.devices=4", "pipeline.micro_batches=32", "cost.gpu=h200"};
    pp_run_t a;
    REQUIRE(load(&a, "schedules/7b-1f1b.yaml", none, 3) == PP_OK);
    const double limits[] = {44, 43, 42, 41};
    for (int i = 0; i < 4; i++) {
        char lim[64];
        const char *with[] = {"pipeline.devices=4", "pipeline.micro_batches=32", "cost.gpu=h200",
                              "run.offload=auto", lim};
        snprintf(lim, sizeof lim, "run.memory_limit=%g", limits[i]);
        pp_run_t b;
        REQUIRE(load(&b, "schedules/7b-1f1b.yaml", with, 5) == PP_OK);
        const pp_device_stats_t *d0 = &b.report.per_device[0];
        pp_stage_cfg_t whole;
        plan_stage_cfg(&whole, &b.job, &b.plan, 0);
        whole.offload_keep = 0;
        const double slot = (double)stage_offload_bytes(&whole);
        printf("  7b 1f1b m=32 h200, limit %g GiB: auto %.1f ms (%+.1f%%), whole slots %.1f ms "
               "(%+.1f%%), none %.1f ms; device 0 %.2f GiB, sends %d slots, %.2f of %.2f GiB "
               "each\n",
               limits[i], b.predicted_ms, 100.0 * (b.predicted_ms / a.predicted_ms - 1.0),
               b.offload_whole_ms, 100.0 * (b.offload_whole_ms / a.predicted_ms - 1.0),
               a.predicted_ms, b.mem.dev[0].total / GIB, d0->offload_slots,
               d0->offload_slots ? d0->offload_bytes / d0->offload_slots / GIB : 0.0, slot / GIB);
        EXPECT(b.mem.n_over == 0 && b.mem.dev[0].total <= limits[i] * GIB, "%d over, %.3f GiB",
               b.mem.n_over, b.mem.dev[0].total / GIB);
        EXPECT(b.predicted_ms <= b.offload_whole_ms * (1.0 + 1e-9), "%g against whole %g",
               b.predicted_ms, b.offload_whole_ms);
        if (b.offload_whole_ms <= a.predicted_ms * 1.01) { /* whole slots are free: kept so */
            EXPECT(b.plan.offload_keep[0] == 0 && b.predicted_ms <= a.predicted_ms * 1.01,
                   "keeps %d, %g against %g", b.plan.offload_keep[0], b.predicted_ms,
                   a.predicted_ms);
            EXPECT(limits[i] >= 43, "whole slots free at %g GiB", limits[i]);
        } else {
            EXPECT(b.plan.offload_keep[0] > 0 && b.predicted_ms < b.offload_whole_ms * 0.9 &&
                       d0->offload_bytes < d0->offload_slots * slot,
                   "keeps %d, %g against whole %g, %g bytes", b.plan.offload_keep[0],
                   b.predicted_ms, b.offload_whole_ms, d0->offload_bytes);
            EXPECT(limits[i] <= 42, "whole slots cost time at %g GiB", limits[i]);
            /* the table and the JSON say that part of each slot moves, and how many bytes */
            char *buf = NULL;
            size_t len = 0;
            FILE *f = open_memstream(&buf, &len);
            REQUIRE(f != NULL);
            EXPECT(report_print_table(&b.report, &b.job, f) == PP_OK);
            EXPECT(report_print_json(&b.report, f) == PP_OK);
            fclose(f);
            EXPECT(buf &&
                       strstr(buf, "# offloaded to the host: device 0: 32 slots, part of each (") &&
                       strstr(buf, "\"offload_partial\":true") &&
                       strstr(buf, "\"offload_partial\":false"),
                   "%s", buf);
            free(buf);
        }
        run_free(&b);
    }
    run_free(&a);
    unsetenv("PPSCHED_FLASH_MMA");
}

/* A limit below what the state alone takes: every slot it can offload is offloaded, the verdict
 * says it does not fit against run.memory_limit, and the note says how much is needed. */
static void test_limit_too_small(void)
{
    const char *sets[] = {"pipeline.devices=4", "run.offload=auto", "run.memory_limit=1"};
    pp_run_t r;
    REQUIRE(load(&r, "schedules/1f1b.yaml", sets, 3) == PP_OK);
    EXPECT(r.mem.n_over > 0 && r.mem.budget);
    EXPECT(strstr(r.offload_note, "needs") && strstr(r.offload_note, "over the limit of 1.00 GiB"),
           "%s", r.offload_note);
    char v[256];
    memory_verdict(&r.mem, v, sizeof v);
    EXPECT(strstr(v, "does not fit") && strstr(v, "the limit is 1.00 GiB (run.memory_limit)"), "%s",
           v);
    run_free(&r);
}

/* run.memory_limit: a number of GiB above 0, at its place. */
static void test_limit_key(void)
{
    pp_config_t c;
    ts_capture_begin();
    pp_status_t st = config_load_string(&c, "t.yaml", "run:\n  memory_limit: 0\n", NULL, 0);
    const char *e = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && strstr(e, "t.yaml:2:17: run.memory_limit"), "%s", e);
    config_free(&c); /* freeable after a failure too */
    REQUIRE(config_load_string(&c, "t.yaml", "run:\n  offload: auto\n  memory_limit: 40.5\n", NULL,
                               0) == PP_OK);
    EXPECT(c.run.offload == PP_OFFLOAD_AUTO && c.run.memory_limit_gib == 40.5);
    config_free(&c);
}

/* `activations` is every eligible key at the next op and one op of lookahead: auto picking the
 * keys activations offloads, each at (1, 1), lays the copies where activations does and holds
 * the same slots (its host slots aside, which auto cycles through); picking none is the plain
 * plan. */
static void test_activations_is_every_key(void)
{
    pp_job_t job;
    pp_schedule_t s;
    pp_plan_t a, b;
    ts_offload_job(&job, PP_SCHED_1F1B, 4, 16, PP_OFFLOAD_ACTIVATIONS);
    REQUIRE(generate_schedule(&s, &job) == PP_OK);
    REQUIRE(plan_lower(&a, &s, &job) == PP_OK);
    REQUIRE(plan_validate(&a) == PP_OK);
    size_t keys = (size_t)s.n_stages * (size_t)s.n_mb;
    pp_offload_key_t *pick = calloc(keys, sizeof *pick);
    REQUIRE(pick != NULL);
    for (int i = 0; i < a.n_ops; i++)
        if (a.ops[i].kind == PP_ACT_OFFLOAD)
            pick[(size_t)a.ops[i].stage * s.n_mb + a.ops[i].mb] = (pp_offload_key_t){1, 1, 1};
    job.run.offload = PP_OFFLOAD_AUTO;
    REQUIRE(plan_lower_offload(&b, &s, &job, pick) == PP_OK);
    EXPECT(plan_validate(&b) == PP_OK);
    EXPECT(a.n_ops == b.n_ops, "%d against %d ops", b.n_ops, a.n_ops);
    for (int d = 0; d < 4; d++) {
        char *ta = strdup(ts_program_text(&a, d));
        EXPECT(ta && strcmp(ta, ts_program_text(&b, d)) == 0, "device %d: %s against %s", d,
               ts_program_text(&b, d), ta);
        free(ta);
    }
    for (int st = 0; st < s.n_stages; st++) {
        EXPECT(a.slots_per_stage[st] == b.slots_per_stage[st], "stage %d: %d against %d", st,
               b.slots_per_stage[st], a.slots_per_stage[st]);
        /* activations moves whole slots: nothing kept, each copy the backward-read range */
        pp_stage_cfg_t sc;
        plan_stage_cfg(&sc, &job, &a, st);
        EXPECT(a.offload_keep[st] == 0 && a.keep_slots_per_stage[st] == 0 && sc.offload_keep == 0 &&
                   a.offload_bytes[st] == stage_offload_bytes(&sc) && stage_keep_bytes(&sc) == 0,
               "stage %d keeps %d", st, a.offload_keep[st]);
    }
    for (size_t k = 0; k < keys; k++)
        pick[k].on = 0;
    plan_free(&b);
    REQUIRE(plan_lower_offload(&b, &s, &job, pick) == PP_OK);
    EXPECT(!b.offload && b.n_ops < a.n_ops);
    free(pick);
    plan_free(&a);
    plan_free(&b);
    schedule_free(&s);
}

/* The host link of one host is shared, each direction apart: with both devices of a 2-device
 * GPipe on one host, no two copies of one direction overlap in time; on two hosts they do. */
static void test_host_link_shared(void)
{
    pp_job_t job;
    pp_schedule_t s;
    pp_plan_t pl;
    ts_offload_job(&job, PP_SCHED_GPIPE, 2, 8, PP_OFFLOAD_ACTIVATIONS);
    REQUIRE(generate_schedule(&s, &job) == PP_OK);
    REQUIRE(plan_lower(&pl, &s, &job) == PP_OK);
    REQUIRE(pl.offload_bytes[0] > 0);
    pp_job_cost_t cost = {1.0, 1.0, 1.0, 0.0, 0.0, 0};
    cost.host_link_gbps = (double)pl.offload_bytes[0] / (3.0 * 1e6); /* a copy takes 3 ms */
    for (int hosts = 1; hosts <= 2; hosts++) {
        pp_cost_model_t cm;
        pp_timeline_t tl;
        REQUIRE(cost_model_uniform(&cm, 2, &cost) == PP_OK);
        cm.link_of[1] = hosts - 1;
        REQUIRE(simulate_plan(&tl, &pl, &cm) == PP_OK);
        int overlaps = 0;
        for (int i = 0; i < pl.n_ops; i++)
            for (int j = 0; j < pl.n_ops; j++) {
                const pp_op_t *x = &pl.ops[i], *y = &pl.ops[j];
                if (!pp_action_is_copy(x->kind) || x->kind != y->kind || x->device >= y->device)
                    continue;
                overlaps += tl.t[i].start_ms < tl.t[j].end_ms && tl.t[j].start_ms < tl.t[i].end_ms;
            }
        EXPECT(hosts == 1 ? overlaps == 0 : overlaps > 0, "%d host(s): %d overlaps", hosts,
               overlaps);
        timeline_free(&tl);
        cost_model_free(&cm);
    }
    plan_free(&pl);
    schedule_free(&s);
}

/* Where the copies go and what pinning costs: each GPU has its own host link, shared by the
 * pipeline devices placed on it (job_copy_link, the cost model's link_of); and every device of
 * the process holds 2 MiB a GiB of its pinned host slots (page tables), the devices that send
 * nothing too. */
static void test_copy_links_and_pinned_memory(void)
{
    const char *sep[] = {"pipeline.devices=4", "pipeline.micro_batches=8"};
    const char *two[] = {"pipeline.devices=[0,0,1,1]", "pipeline.micro_batches=8",
                         "run.offload=activations"};
    pp_run_t a, b;
    REQUIRE(load(&a, "schedules/1f1b.yaml", sep, 2) == PP_OK);
    REQUIRE(load(&b, "schedules/1f1b.yaml", two, 3) == PP_OK);
    const int want_sep[4] = {0, 1, 2, 3}, want_two[4] = {0, 0, 2, 2};
    pp_cost_model_t cm;
    REQUIRE(run_cost_model(&cm, &b.plan, &b.job, NULL, NULL, NULL) == PP_OK);
    for (int d = 0; d < 4; d++) {
        EXPECT(job_copy_link(&a.job, d) == want_sep[d], "separate GPUs: device %d on link %d", d,
               job_copy_link(&a.job, d));
        EXPECT(job_copy_link(&b.job, d) == want_two[d] && cm.link_of[d] == want_two[d],
               "[0,0,1,1]: device %d on link %d (cost model %d)", d, job_copy_link(&b.job, d),
               cm.link_of[d]);
    }
    cost_model_free(&cm);
    double pinned = 0;
    for (int d = 0; d < 4; d++)
        pinned += (double)plan_host_bytes(&b.plan, d);
    REQUIRE(b.plan.offload && pinned > 0);
    const pp_gpu_t *g = b.mem.gpu;
    for (int d = 0; d < 4; d++) {
        double base = (g->runtime_gib + g->stage_gib) * GIB;
        EXPECT_NEAR(b.mem.dev[d].runtime - base, pinned * 8.0 / 4096.0, 1.0, 1e-9);
        EXPECT_NEAR(a.mem.dev[d].runtime, base, 1.0, 1e-12);
    }
    run_free(&a);
    run_free(&b);
}

/* ppsched plan: where no candidate fits 44 GiB a GPU without offload, the 1F1B one fits with
 * run.offload auto, listed with its step; with room to spare, no offload candidate is tried. */
static void test_planner_dimension(void)
{
    for (int tight = 1; tight >= 0; tight--) {
        pp_plan_query_t q = {.path = "schedules/7b-1f1b.yaml",
                             .gpus = 4,
                             .global_batch = 32,
                             .memory_gib = tight ? 44 : 79};
        pp_search_t s;
        REQUIRE(plan_search(&s, &q) == PP_OK);
        int n_off = 0, best_plain = -1;
        for (int i = 0; i < s.n_fit; i++) {
            n_off += s.c[i].offload;
            if (!s.c[i].offload && best_plain < 0) best_plain = i;
        }
        if (tight) {
            EXPECT(s.n_fit > 0 && s.c[0].offload && strstr(s.c[0].label, "1f1b m=32 b=1 offload"),
                   "%d fit, best %s", s.n_fit, s.n ? s.c[0].label : "-");
            EXPECT(best_plain < 0, "a candidate fits without offload");
            if (s.n_fit > 0)
                printf("  plan at 44 GiB: %s, %.3f ms a step, %.2f GiB\n", s.c[0].label,
                       s.c[0].step_ms, s.c[0].peak_bytes / GIB);
        } else {
            EXPECT(n_off == 0, "%d offload candidates where the plain ones fit", n_off);
        }
        plan_search_free(&s);
    }
}

int main(void)
{
    RUN(test_fits_offloads_nothing);
    RUN(test_one_slot_free);
    RUN(test_zbv_fullest_device);
    RUN(test_issue_shapes);
    RUN(test_limit_too_small);
    RUN(test_limit_key);
    RUN(test_activations_is_every_key);
    RUN(test_host_link_shared);
    RUN(test_copy_links_and_pinned_memory);
    RUN(test_planner_dimension);
    RUN(test_partial_7b);
    return check_summary("test_offload_auto");
}
