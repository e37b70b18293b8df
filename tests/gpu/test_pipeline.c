/*
 * test_pipeline.c — the executor's correctness anchor: one training step pipelined over k GPUs
 * gives the same loss and the same gradients as the same model run stage after stage on one
 * device, for GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-H2, ZB-V, DualPipeV, looped BFS and
 * interleaved zero-bubble, with uneven layer splits, and for PyTorch's own orders (tests/data),
 * with the peer and the nccl transports. In fp32 the accumulation order is the same (micro-batches
 * in order on every stage), so the comparison is bitwise; in bf16 it is within tolerance. Also:
 * with AdamW on, the loss falls over 50 steps, steps replayed from a captured CUDA graph match
 * eager ones bitwise, and every run.recompute setting and run.offload (whole slots, and part of
 * each kept on the device) give the one-device run's loss and gradients. A case that asks for more
 * pipeline devices than there are GPUs maps them onto the GPUs present (`pipeline.devices: [0, 0,
 * 0, 0]` on one GPU, [0, 1, 0, 1] on two), each pipeline device with its own streams and memory, so
 * every multi-device schedule is checked on a single GPU; nccl needs a GPU per pipeline device, and
 * its cases are skipped with the reason when fewer are present. Without a GPU every case is
 * skipped. Every case goes through the run chain (run.h), as the command line does.
 * PPSCHED_TEST_QUICK=1 (check.h) runs each schedule on 2 devices only (not 1, 4 in bf16), leaves
 * out the timeout and the 50-step AdamW cases, and gives every step a 900 s deadline.
 * pipeline.data_parallel: d replicas of m micro-batches against the one-device run of d * m, within
 * the tolerance of another fp32 summation order, bitwise run to run and eager against graph.
 */
#include "tests/check.h"
#include "tests/gpu/support.h"

#include "exec/execute.h"
#include "run/run.h"
#include "stages/stage.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n_gpus;
static const char *g_no_gpu; /* why there is none (tg_skip_reason) */

/* A step's deadline (run.timeout, s): generous in the quick run, which compute-sanitizer
 * slows 10-100x. */
static int step_timeout_s(void)
{
    return check_quick() ? 900 : 60;
}

/* A small model: 8 blocks so that 1, 2, 4 and 8 stages all divide it. */
static const char *model_yaml(const char *dtype)
{
    static char buf[512];
    snprintf(buf, sizeof buf,
             "model: {layers: 8, hidden: 64, heads: 4, seq_len: 32, vocab: 128, dtype: %s}\n"
             "pipeline: {micro_batch_size: 2}\n"
             "run: {steps: 1, warmup: 0, seed: 4242, timeout: %d}\n",
             dtype, step_timeout_s());
    return buf;
}

/* The reference: one stage holding every block, micro-batches forward then backward in order. */
static int reference_step(const pp_job_t *cfg, int m, double *loss, float **grads, size_t *n)
{
    pp_stage_cfg_t c = {0};
    pp_stage_t *st = NULL;
    cudaStream_t s;
    c.hidden = cfg->model.hidden;
    c.heads = cfg->model.heads;
    c.seq_len = cfg->model.seq_len;
    c.vocab = cfg->model.vocab;
    c.micro_batch_size = cfg->pipeline.micro_batch_size;
    c.n_layers = cfg->model.layers;
    c.first_layer = 0;
    c.total_layers = cfg->model.layers;
    c.is_first = c.is_last = 1;
    c.dtype = cfg->model.dtype;
    c.seed = cfg->run.seed;
    c.n_slots = 1;
    c.grad_scale = 1.0f / (float)m;
    if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess) return -1;
    if (stage_init(&st, &c) != PP_OK) return -1;
    int ok = stage_zero_grads(st, s) == PP_OK;
    for (int k = 0; ok && k < m; k++)
        ok = stage_forward(st, 0, k, s) == PP_OK && stage_backward(st, 0, k, s) == PP_OK;
    double sum = 0;
    ok = ok && stage_loss_read(st, &sum, s) == PP_OK;
    *n = stage_n_params(st);
    *grads = malloc(sizeof(float) * *n);
    ok = ok && *grads && stage_grads_to_host(st, *grads) == PP_OK;
    *loss = sum / m;
    stage_free(st);
    cudaStreamDestroy(s);
    return ok ? 0 : -1;
}

/* The options of a measured run through the chain (run.h), keeping the gradients. */
static pp_run_opts_t measured(void)
{
    pp_run_opts_t ro = {.measure = 1, .exec = execute_plan, .check_grads = 1};
    return ro;
}

/* A measured run's explanation (explain.h): every device's idle reasons add up to its idle time,
 * the simulator's split has no launch time, the critical path ends at the step's last end and its
 * parts add up to the makespan, and the what-if figures are there. */
static void expect_explained(const pp_run_t *r, const char *label)
{
    const pp_explain_t *ex = &r->report.explain;
    REQUIRE(ex->known && ex->have_what_if, "%s: no explanation", label);
    double span = timeline_makespan(&r->meas), tol = 1e-9 * (1 + span);
    for (int d = 0; d < r->report.devices; d++) {
        double sum = 0, sim_launch = explain_idle_ms(&ex->split_sim, d, PP_IDLE_LAUNCH);
        for (int c = 0; c < PP_IDLE_COUNT; c++)
            sum += explain_idle_ms(&ex->split, d, (pp_idle_reason_t)c);
        EXPECT(fabs(sum - r->report.per_device[d].idle_ms) <= tol,
               "%s: device %d reasons add up to %.9g, idle %.9g", label, d, sum,
               r->report.per_device[d].idle_ms);
        EXPECT(sim_launch == 0.0, "%s: device %d simulated launch %g", label, d, sim_launch);
    }
    const pp_critical_path_t *cp = &ex->path;
    EXPECT(cp->n > 0 && fabs(cp->compute_ms + cp->comm_ms + cp->wait_ms - span) <= tol,
           "%s: critical path of %d ops, %.9g ms for a makespan of %.9g", label, cp->n,
           cp->compute_ms + cp->comm_ms + cp->wait_ms, span);
}

/* Run one step of the pipeline `name` (a YAML file, or the text `yaml` named so) asks for;
 * compare loss and gradients with the one-device reference (bitwise in fp32, within bf16
 * tolerance otherwise), check that every device ran its compute ops in the order of its
 * program, and that the explanation of the measured bubble adds up. */
static void run_and_compare(const char *name, const char *yaml, const char *const *sets, int n_sets,
                            const char *label)
{
    pp_run_t r = {0};
    pp_run_opts_t ro = measured();
    REQUIRE(run_load(&r, name, yaml, sets, n_sets, n_gpus) == PP_OK);
    const pp_job_t *cfg = &r.job;
    const pp_plan_t *plan = &r.plan;
    const pp_timeline_t *tl = &r.meas;
    const pp_exec_result_t *res = &r.exec;
    pp_status_t st = run_go(&r, &ro);
    EXPECT(st == PP_OK, "%s: run: %s", label, pp_status_str(st));
    if (st == PP_OK) {
        double ref_loss;
        float *ref = NULL;
        size_t n = 0;
        REQUIRE(reference_step(cfg, plan->n_mb, &ref_loss, &ref, &n) == 0);
        EXPECT(n == res->n_params, "%s: parameters: pipeline %zu, reference %zu", label,
               res->n_params, n);
        /* Bitwise in fp32, except under selective recomputation: its GELU output is rebuilt by
         * the GELU kernel rather than the fc GEMM's epilogue (fc2's weight gradient only). */
        int fp32 =
            cfg->model.dtype == PP_DTYPE_FP32 && cfg->run.recompute != PP_RECOMPUTE_SELECTIVE;
        if (fp32)
            EXPECT(res->loss[0] == ref_loss, "%s: loss %.9g vs reference %.9g", label, res->loss[0],
                   ref_loss);
        else
            EXPECT_NEAR(res->loss[0], ref_loss, 1e-3, 1e-3);
        EXPECT(r.report.loss == res->loss[res->n_steps - 1], "%s: the report's loss", label);
        size_t bad = 0, first = 0;
        double worst = 0;
        for (size_t i = 0; i < n && i < res->n_params; i++) {
            double d = fabs((double)res->grads[i] - (double)ref[i]);
            int off = fp32 ? res->grads[i] != ref[i] : d > 1e-3 + 5e-2 * fabs((double)ref[i]);
            if (off && !bad++) first = i;
            if (d > worst) worst = d;
        }
        EXPECT(bad == 0,
               "%s: %zu of %zu gradients differ (first at %zu: %.9g vs %.9g; max |diff| %.3g)",
               label, bad, n, first, bad ? res->grads[first] : 0.0, bad ? ref[first] : 0.0, worst);
        EXPECT(tl->has_op_times && timeline_makespan(tl) > 0, "%s: measured timeline is empty",
               label);
        /* Pipeline devices sharing a GPU: shared links, and the report says so. */
        for (int i = 0; i < plan->n_ops; i++) {
            const pp_op_t *o = &plan->ops[i];
            if (!pp_action_is_comm(o->kind)) continue; /* compute, or a copy to or from the host */
            int a = o->device, b = plan->ops[o->peer].device;
            EXPECT(o->link == job_boundary_transport(cfg, a, b),
                   "%s: op %d between devices %d and %d has link %s", label, i, a, b,
                   transport_name(o->link));
        }
        EXPECT(r.report.shared_gpus == job_shared_gpu(cfg, NULL, NULL),
               "%s: the report says shared_gpus %d", label, r.report.shared_gpus);
        /* Schedules run as written: on each device, compute ops start in program order (the
         * backward half of an overlapped pair, on the overlap stream, may start before its
         * forward half, not before the ops ahead of the pair: the lowering's dependencies). */
        for (int d = 0; d < plan->n_devices; d++) {
            double last = -1;
            for (int k = plan->prog_begin[d]; k < plan->prog_begin[d + 1]; k++) {
                int i = plan->prog_ops[k];
                if (plan->ops[i].role != PP_ROLE_COMPUTE) continue;
                EXPECT(tl->t[i].start_ms >= last,
                       "%s: device %d ran program step %d before the one "
                       "written ahead of it",
                       label, d, plan->ops[i].pos);
                last = tl->t[i].start_ms;
            }
        }
        expect_explained(&r, label);
        free(ref);
    }
    run_free(&r);
}

/* `pipeline.devices=...` for p pipeline devices: p GPUs where that many are present, otherwise
 * the GPUs present in turn ([0, 0, 0, 0] on one GPU). Returns 1 when they share GPUs. */
static int devices_set(char *buf, size_t size, int p)
{
    if (p <= n_gpus) {
        snprintf(buf, size, "pipeline.devices=%d", p);
        return 0;
    }
    size_t n = (size_t)snprintf(buf, size, "pipeline.devices=[");
    for (int d = 0; d < p && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%d", d ? "," : "", d % n_gpus);
    if (n < size) snprintf(buf + n, size - n, "]");
    return 1;
}

/* One step of `kind` on p pipeline devices with `transport`, against the reference. */
static void check_case(const char *kind, int p, const char *transport, const char *dtype, int m)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    if (p > n_gpus && !strcmp(transport, "nccl"))
        SKIP("%s over nccl on %d devices: nccl needs a GPU each, %d present", kind, p, n_gpus);
    /* quick: each kind on 2 devices (1 is the reference itself); on 4 only in bf16 */
    if (p == 1) SKIP_IF_QUICK("1 device");
    if (p == 4 && !strcmp(dtype, "fp32")) SKIP_IF_QUICK("4 devices in fp32");
    char sets[4][64], label[160];
    const char *setp[4];
    snprintf(sets[0], sizeof sets[0], "schedule.kind=%s", kind);
    int shared = devices_set(sets[1], sizeof sets[1], p);
    snprintf(sets[2], sizeof sets[2], "pipeline.transport=%s", transport);
    snprintf(sets[3], sizeof sets[3], "pipeline.micro_batches=%d", m);
    for (int i = 0; i < 4; i++)
        setp[i] = sets[i];
    snprintf(label, sizeof label, "%s p=%d %s %s%s", kind, p, transport, dtype,
             shared ? " (pipeline devices sharing GPUs)" : "");
    run_and_compare("test.yaml", model_yaml(dtype), setp, 4, label);
}

/* Every setting of `nccl:` and run.priorities moves the same bytes in the same order: 1F1B and
 * ZB-V over nccl on a GPU per pipeline device match the one-device run bitwise in fp32 with the
 * communicators per device, the CTAs capped, the CTA policies, neither half waiting for its peer,
 * and the streams at one priority. */
static void nccl_levers_match_reference(void)
{
    if (n_gpus < 2) SKIP("nccl needs a GPU per pipeline device, %d present", n_gpus);
    static const char *levers[] = {"nccl.communicators=device",  "nccl.max_ctas=1",
                                   "nccl.cta_policy=efficiency", "nccl.cta_policy=zero",
                                   "nccl.wait_for_peer=off",     "run.priorities=off"};
    static const char *kinds[] = {"schedule.kind=1f1b", "schedule.kind=zb-v"};
    const int p = n_gpus >= 4 ? 4 : 2;
    char devs[64], label[128];
    devices_set(devs, sizeof devs, p);
    for (int k = 0; k < 2; k++)
        for (size_t l = 0; l < sizeof levers / sizeof levers[0]; l++) {
            if (check_quick() && l > 1) break;
            const char *sets[] = {kinds[k], devs, "pipeline.transport=nccl",
                                  "pipeline.micro_batches=8", levers[l]};
            snprintf(label, sizeof label, "%s p=%d nccl %s", kinds[k] + 14, p, levers[l]);
            run_and_compare("nccl.yaml", model_yaml("fp32"), sets, 5, label);
        }
}

/* bf16 with 64-dimensional heads and T a multiple of 64 takes the fused attention path: the
 * pipelined step still matches the one-device run within bf16 tolerance. */
static void fused_attention_bf16(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    char devs[64];
    devices_set(devs, sizeof devs, 4);
    const char *sets[] = {"schedule.kind=zb-h1", devs, "pipeline.micro_batches=8",
                          "model.hidden=256", "model.seq_len=64"};
    /* hidden 256 over the model's 4 heads: 64-dimensional heads */
    run_and_compare("fused.yaml", model_yaml("bf16"), sets, 5, "zb-h1 bf16 d=64 (fused attention)");
}

/* Every run.recompute setting, on 1F1B (B) and ZB-H1 (I and W apart, I->W buffers from the
 * lowering), on the unfused (fp32) and the fused (bf16, d = 64) attention: the one-device run's
 * loss and gradients (full: bitwise in fp32; selective: within tolerance). */
static void recompute_matches_reference(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    const int p = 4;
    char devs[64], label[128];
    devices_set(devs, sizeof devs, p);
    static const char *kinds[] = {"schedule.kind=1f1b", "schedule.kind=zb-h1"};
    static const char *modes[] = {"run.recompute=selective", "run.recompute=full"};
    for (int fused = 0; fused < 2; fused++)
        for (int k = 0; k < 2; k++)
            for (int r = 0; r < 2; r++) {
                const char *sets[] = {kinds[k],
                                      devs,
                                      "pipeline.micro_batches=8",
                                      modes[r],
                                      "model.hidden=256",
                                      "model.seq_len=64"};
                snprintf(label, sizeof label, "%s %s p=%d %s", kinds[k], modes[r], p,
                         fused ? "bf16 fused" : "fp32");
                run_and_compare("recompute.yaml", model_yaml(fused ? "bf16" : "fp32"), sets,
                                fused ? 6 : 4, label);
            }
}

/* Copies of run.offload in a plan, and whether its ring is smaller than the plain slots. */
static int offload_copies(const pp_plan_t *plan, int *smaller)
{
    int n = 0;
    *smaller = 0;
    for (int i = 0; i < plan->n_ops; i++)
        n += pp_action_is_copy(plan->ops[i].kind);
    for (int s = 0; s < plan->n_stages; s++)
        *smaller |= plan->slots_per_stage[s] < plan->plain_slots_per_stage[s];
    return n;
}

/* run.offload=activations moves bytes only: GPipe (on one GPU and on p) and 1F1B (on 4 GPUs, the
 * fewest where its first stage offloads anything) give the one-device run's loss and gradients
 * bitwise in fp32, with the copies in the plan and a smaller device ring. */
static void offload_matches_reference(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    int p = n_gpus >= 4 ? 4 : n_gpus >= 2 ? 2 : 1;
    struct {
        const char *kind;
        int p;
    } cases[] = {{"gpipe", 1}, {"gpipe", p}, {"1f1b", 4}};
    for (int c = 0; c < 3; c++) {
        if (cases[c].p > n_gpus) {
            printf("  offload %s p=%d: skipped, %d GPUs present\n", cases[c].kind, cases[c].p,
                   n_gpus);
            continue;
        }
        char kind[64], devs[64], label[128];
        snprintf(kind, sizeof kind, "schedule.kind=%s", cases[c].kind);
        snprintf(devs, sizeof devs, "pipeline.devices=%d", cases[c].p);
        snprintf(label, sizeof label, "offload %s p=%d fp32", cases[c].kind, cases[c].p);
        const char *sets[] = {kind, devs, "pipeline.micro_batches=8", "run.offload=activations"};
        pp_run_t r = {0};
        REQUIRE(run_load(&r, "offload.yaml", model_yaml("fp32"), sets, 4, n_gpus) == PP_OK);
        int smaller, n = offload_copies(&r.plan, &smaller);
        EXPECT(n > 0 && smaller, "%s: %d copies, ring smaller than plain: %d", label, n, smaller);
        run_free(&r);
        run_and_compare("offload.yaml", model_yaml("fp32"), sets, 4, label);
    }
}

/* run.offload=auto under a limit halfway between the plain plan's peak and its peak without
 * activation slots sends some slots to the host and keeps others (the plan's choice, no more than
 * activations sends), and gives the one-device run's loss and gradients bitwise in fp32: GPipe on
 * one GPU, and 1F1B on 4 where present. */
static void offload_auto_matches_reference(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    struct {
        const char *kind;
        int p;
    } cases[] = {{"gpipe", 1}, {"1f1b", 4}};
    for (int c = 0; c < 2; c++) {
        if (cases[c].p > n_gpus) {
            printf("  offload auto %s p=%d: skipped, %d GPUs present\n", cases[c].kind, cases[c].p,
                   n_gpus);
            continue;
        }
        char kind[64], devs[64], lim[64], label[128];
        snprintf(kind, sizeof kind, "schedule.kind=%s", cases[c].kind);
        snprintf(devs, sizeof devs, "pipeline.devices=%d", cases[c].p);
        snprintf(label, sizeof label, "offload auto %s p=%d fp32", cases[c].kind, cases[c].p);
        const char *sets[] = {kind, devs, "pipeline.micro_batches=8", "run.offload=auto", lim};
        pp_run_t r = {0};
        REQUIRE(run_load(&r, "auto.yaml", model_yaml("fp32"), sets, 3, n_gpus) == PP_OK);
        REQUIRE(run_predict(&r, NULL) == PP_OK);
        const pp_mem_device_t *d0 = &r.mem.dev[0];
        snprintf(lim, sizeof lim, "run.memory_limit=%.9g",
                 (d0->total - 0.5 * d0->slots) / (1024.0 * 1024.0 * 1024.0));
        int plain_slots = r.plan.slots_per_stage[0];
        run_free(&r);
        REQUIRE(run_load(&r, "auto.yaml", model_yaml("fp32"), sets, 5, n_gpus) == PP_OK);
        int smaller, n = offload_copies(&r.plan, &smaller);
        EXPECT(n > 0 && n < 2 * 8 * cases[c].p && r.plan.slots_per_stage[0] < plain_slots,
               "%s: %d copies, stage 0's slots %d (plain %d)", label, n, r.plan.slots_per_stage[0],
               plain_slots);
        run_free(&r);
        run_and_compare("auto.yaml", model_yaml("fp32"), sets, 5, label);
    }
}

/* 1 when some stage of the plan keeps part of each slot on the device while the rest moves. */
static int keeps_part(const pp_plan_t *plan)
{
    int any = 0;
    for (int s = 0; s < plan->n_stages; s++)
        any |= plan->offload && plan->offload_keep && plan->offload_keep[s] > 0;
    return any;
}

/* run.offload=auto moving part of each slot: with the host link priced at 1 GB/s, whole slots
 * cost time, and under a limit 0.2 .. 0.4 of the slots below the plain plan's peak (the first
 * where the choice keeps part of a slot on the device) the copies move the larger tensors and
 * the passes read the kept ones from the micro-batch's kept region: the one-device run's loss and
 * gradients bitwise in fp32. GPipe on one GPU, 1F1B and DualPipeV (its overlapped pairs on the
 * second compute stream) on 4 pipeline devices, sharing the GPUs present where fewer. */
static void offload_partial_matches_reference(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    struct {
        const char *kind;
        int p;
    } cases[] = {{"gpipe", 1}, {"1f1b", 4}, {"dualpipe-v", 4}};
    for (int c = 0; c < 3; c++) {
        char kind[64], devs[64], lim[64], label[160];
        snprintf(kind, sizeof kind, "schedule.kind=%s", cases[c].kind);
        int shared = devices_set(devs, sizeof devs, cases[c].p);
        const char *sets[] = {
            kind, devs, "pipeline.micro_batches=8", "cost.host_link_gbps=1", "run.offload=auto",
            lim};
        pp_run_t r = {0};
        REQUIRE(run_load(&r, "partial.yaml", model_yaml("fp32"), sets, 4, n_gpus) == PP_OK);
        REQUIRE(run_predict(&r, NULL) == PP_OK);
        const pp_mem_device_t d0 = r.mem.dev[0];
        run_free(&r);
        int found = 0;
        for (int tenth = 2; tenth <= 4 && !found; tenth++) {
            snprintf(lim, sizeof lim, "run.memory_limit=%.9g",
                     (d0.total - 0.1 * tenth * d0.slots) / (1024.0 * 1024.0 * 1024.0));
            REQUIRE(run_load(&r, "partial.yaml", model_yaml("fp32"), sets, 6, n_gpus) == PP_OK);
            int smaller;
            found = keeps_part(&r.plan) && offload_copies(&r.plan, &smaller) > 0;
            run_free(&r);
        }
        EXPECT(found, "offload partial %s p=%d: no limit made auto keep part of a slot",
               cases[c].kind, cases[c].p);
        if (!found) continue;
        snprintf(label, sizeof label, "offload partial %s p=%d fp32 (%s)%s", cases[c].kind,
                 cases[c].p, lim + 4, shared ? " (pipeline devices sharing GPUs)" : "");
        run_and_compare("partial.yaml", model_yaml("fp32"), sets, 6, label);
    }
}

/* Steps of a plain run (a) and of the same run with its activations moved (b, `what`): the same
 * losses and gradients to the bit, and b's steps after the first replayed from its graph. */
static void expect_same_graph_steps(const pp_exec_result_t *a, const pp_exec_result_t *b,
                                    const char *what)
{
    for (int k = 0; k < a->n_steps; k++)
        EXPECT(a->loss[k] == b->loss[k], "step %d: loss plain %.9g, %s %.9g", k, a->loss[k], what,
               b->loss[k]);
    size_t bad = 0;
    for (size_t i = 0; i < a->n_params; i++)
        bad += a->grads[i] != b->grads[i];
    EXPECT(bad == 0, "%zu gradients differ between plain and %s graph steps", bad, what);
    EXPECT(b->graph_steps == b->n_steps - 1,
           "%d of %d %s steps replayed from the graph (capture failed?)", b->graph_steps,
           b->n_steps, what);
}

/* GPipe on one GPU with offload, steps replayed from one captured CUDA graph (AdamW on), gives
 * bitwise the losses and gradients of the same steps without offload. */
static void offload_graph_matches_plain(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    pp_run_t r[2];
    pp_status_t st[2];
    memset(r, 0, sizeof r);
    for (int o = 0; o < 2; o++) {
        const char *sets[] = {"schedule.kind=gpipe",
                              "pipeline.devices=1",
                              "pipeline.micro_batches=8",
                              "run.steps=3",
                              "run.optimizer=adamw",
                              "run.lr=0.001",
                              "run.graph=on",
                              o ? "run.offload=activations" : "run.offload=none"};
        pp_run_opts_t ro = measured();
        REQUIRE(run_load(&r[o], "offload-graph.yaml", model_yaml("fp32"), sets, 8, n_gpus) ==
                PP_OK);
        st[o] = run_execute(&r[o], &ro);
        EXPECT(st[o] == PP_OK, "offload=%d graph: %s", o, pp_status_str(st[o]));
    }
    if (st[0] == PP_OK && st[1] == PP_OK)
        expect_same_graph_steps(&r[0].exec, &r[1].exec, "offloaded");
    run_free(&r[0]);
    run_free(&r[1]);
}

/* GPipe on one GPU moving part of each slot (run.offload=auto under a limit 0.3 of the slots
 * below the plain peak, the host link priced at 1 GB/s), steps replayed from one captured CUDA
 * graph (AdamW on): the kept regions joined at capture serve every replay, and the losses and
 * gradients are bitwise the same steps' without offload. */
static void offload_partial_graph_matches_plain(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    pp_run_t r[2];
    pp_status_t st[2];
    char lim[64];
    const char *sets[] = {"schedule.kind=gpipe",
                          "pipeline.devices=1",
                          "pipeline.micro_batches=8",
                          "run.steps=3",
                          "run.optimizer=adamw",
                          "run.lr=0.001",
                          "run.graph=on",
                          "cost.host_link_gbps=1",
                          "run.offload=none",
                          lim};
    memset(r, 0, sizeof r);
    /* the limit for the offloaded run, from the plain plan's peak */
    REQUIRE(run_load(&r[0], "partial-graph.yaml", model_yaml("fp32"), sets, 9, n_gpus) == PP_OK);
    REQUIRE(run_predict(&r[0], NULL) == PP_OK);
    const pp_mem_device_t d0 = r[0].mem.dev[0];
    run_free(&r[0]);
    snprintf(lim, sizeof lim, "run.memory_limit=%.9g",
             (d0.total - 0.3 * d0.slots) / (1024.0 * 1024.0 * 1024.0));
    for (int o = 0; o < 2; o++) {
        pp_run_opts_t ro = measured();
        sets[8] = o ? "run.offload=auto" : "run.offload=none";
        REQUIRE(run_load(&r[o], "partial-graph.yaml", model_yaml("fp32"), sets, o ? 10 : 9,
                         n_gpus) == PP_OK);
        if (o)
            EXPECT(keeps_part(&r[1].plan), "partial graph: auto keeps no part of a slot (%s)", lim);
        st[o] = run_execute(&r[o], &ro);
        EXPECT(st[o] == PP_OK, "partial graph, offload=%d: %s", o, pp_status_str(st[o]));
    }
    if (st[0] == PP_OK && st[1] == PP_OK)
        expect_same_graph_steps(&r[0].exec, &r[1].exec, "partially offloaded");
    run_free(&r[0]);
    run_free(&r[1]);
}

/* The shipped explicit schedules (YAML steps, and a PyTorch pipelining CSV) run exactly as
 * written and give the reference's loss and gradients. */
static void explicit_schedules_run_as_written(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    const char *files[] = {"schedules/explicit.yaml", "schedules/csv.yaml"};
    char devs[64], timeout[64];
    devices_set(devs, sizeof devs, 4); /* the shipped explicit schedules use 4 devices */
    /* the files' own run.timeout is for a real run, not one under a sanitizer */
    snprintf(timeout, sizeof timeout, "run.timeout=%d", step_timeout_s());
    const char *sets[] = {devs,
                          timeout,
                          "model.layers=8",
                          "model.hidden=64",
                          "model.heads=4",
                          "model.seq_len=32",
                          "model.vocab=128",
                          "model.dtype=fp32",
                          "pipeline.micro_batch_size=2",
                          "run.steps=1",
                          "run.warmup=0"};
    for (int f = 0; f < 2; f++)
        run_and_compare(files[f], NULL, sets, 11, files[f]);
}

/* A plan that cannot fit is refused before anything is allocated: the executor prints what each
 * device needs and returns PP_ERR_DEVICE (exit 1). */
/* Big enough that a step takes tens of ms on the GPU, far longer than enqueuing it. */
#define BIG_MODEL_YAML                                                                             \
    "model: {layers: 8, hidden: 1024, heads: 16, seq_len: 1024, vocab: 8192, dtype: bf16}\n"       \
    "pipeline: {micro_batch_size: 4}\n"

/* run_execute with its stderr captured into log[cap] (what it printed, truncated to fit). */
static pp_status_t execute_logged(pp_run_t *r, char *log, size_t cap)
{
    pp_run_opts_t ro = {.measure = 1, .exec = execute_plan};
    log[0] = '\0';
    FILE *tmp = tmpfile();
    if (!tmp) {
        fprintf(stderr, "test_pipeline: tmpfile: %s\n", strerror(errno));
        return PP_ERR_INTERNAL;
    }
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    pp_status_t st = run_execute(r, &ro);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(log, 1, cap - 1, tmp);
    log[n] = '\0';
    fclose(tmp);
    return st;
}

static void too_big_is_refused(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    pp_run_t r = {0};
    /* GPipe keeps all 4096 micro-batches in flight: several TiB of activations. */
    const char *sets[] = {"schedule.kind=gpipe", "pipeline.devices=1",
                          "pipeline.micro_batches=4096"};
    const char *yaml = BIG_MODEL_YAML "run: {steps: 1, warmup: 0, timeout: 60}\n";
    REQUIRE(run_load(&r, "big.yaml", yaml, sets, 3, n_gpus) == PP_OK);
    char log[8192];
    pp_status_t st = execute_logged(&r, log, sizeof log);
    EXPECT(st == PP_ERR_DEVICE, "status %s, want a device error", pp_status_str(st));
    EXPECT(strstr(log, "does not fit") && strstr(log, "too small"), "no per-device needs:\n%s",
           log);
    run_free(&r);
}

#define CASE(name, kind, p, tr, dt, m)                                                             \
    static void name(void)                                                                         \
    {                                                                                              \
        check_case(kind, p, tr, dt, m);                                                            \
    }

CASE(gpipe_1gpu, "gpipe", 1, "peer", "fp32", 4)
CASE(gpipe_2gpu_peer, "gpipe", 2, "peer", "fp32", 4)
CASE(gpipe_4gpu_peer, "gpipe", 4, "peer", "fp32", 8)
CASE(gpipe_4gpu_nccl, "gpipe", 4, "nccl", "fp32", 8)
CASE(f1b1_1gpu, "1f1b", 1, "peer", "fp32", 4)
CASE(f1b1_2gpu_peer, "1f1b", 2, "peer", "fp32", 4)
CASE(f1b1_2gpu_nccl, "1f1b", 2, "nccl", "fp32", 4)
CASE(f1b1_4gpu_peer, "1f1b", 4, "peer", "fp32", 8)
CASE(f1b1_4gpu_nccl, "1f1b", 4, "nccl", "fp32", 8)
CASE(f1b1_4gpu_bf16, "1f1b", 4, "peer", "bf16", 8)
CASE(interleaved_1gpu, "interleaved-1f1b", 1, "peer", "fp32", 4)
CASE(interleaved_2gpu_peer, "interleaved-1f1b", 2, "peer", "fp32", 4)
CASE(interleaved_4gpu_peer, "interleaved-1f1b", 4, "peer", "fp32", 8)
CASE(interleaved_4gpu_nccl, "interleaved-1f1b", 4, "nccl", "fp32", 8)
CASE(zbh1_1gpu, "zb-h1", 1, "peer", "fp32", 4)
CASE(zbh1_2gpu_peer, "zb-h1", 2, "peer", "fp32", 4)
CASE(zbh1_4gpu_peer, "zb-h1", 4, "peer", "fp32", 8)
CASE(zbh1_4gpu_nccl, "zb-h1", 4, "nccl", "fp32", 8)
CASE(zbh2_2gpu_peer, "zb-h2", 2, "peer", "fp32", 4)
CASE(zbh2_4gpu_peer, "zb-h2", 4, "peer", "fp32", 8)
CASE(zbv_2gpu_peer, "zb-v", 2, "peer", "fp32", 4)
CASE(zbv_4gpu_peer, "zb-v", 4, "peer", "fp32", 8)
CASE(zbv_4gpu_nccl, "zb-v", 4, "nccl", "fp32", 8)
CASE(dualpipev_2gpu_peer, "dualpipe-v", 2, "peer", "fp32", 4)
CASE(dualpipev_4gpu_peer, "dualpipe-v", 4, "peer", "fp32", 8)
CASE(looped_bfs_2gpu_peer, "looped-bfs", 2, "peer", "fp32", 4)
CASE(looped_bfs_4gpu_peer, "looped-bfs", 4, "peer", "fp32", 8)
CASE(interleaved_zb_2gpu_peer, "interleaved-zb", 2, "peer", "fp32", 4)
CASE(interleaved_zb_4gpu_peer, "interleaved-zb", 4, "peer", "fp32", 8)
CASE(interleaved_zb_4gpu_nccl, "interleaved-zb", 4, "nccl", "fp32", 8)
CASE(f1b1_2gpu_ipc, "1f1b", 2, "ipc", "fp32", 4)
CASE(f1b1_4gpu_ipc, "1f1b", 4, "ipc", "fp32", 8)
CASE(zbv_4gpu_ipc, "zb-v", 4, "ipc", "fp32", 8)
CASE(dualpipev_4gpu_ipc, "dualpipe-v", 4, "ipc", "fp32", 8)

/* Uneven stages at p = 2 and 4: a listed split and the balanced one, against the same one-device
 * run. */
static void uneven_split(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    for (int p = 2; p <= 4; p += 2) {
        char devs[64], label[96];
        devices_set(devs, sizeof devs, p);
        const char *listed =
            p == 4 ? "model.layers_per_stage=[1,3,2,2]" : "model.layers_per_stage=[3,5]";
        const char *a[] = {"schedule.kind=1f1b", devs, "pipeline.micro_batches=8", listed};
        snprintf(label, sizeof label, "1f1b p=%d, layers as listed", p);
        run_and_compare("test.yaml", model_yaml("fp32"), a, 4, label);
        const char *b[] = {"schedule.kind=zb-v", devs, "pipeline.micro_batches=8",
                           "model.layers=12", "pipeline.split=balanced"};
        snprintf(label, sizeof label, "zb-v p=%d, balanced split", p);
        run_and_compare("test.yaml", model_yaml("fp32"), b, 5, label);
    }
}

/* PyTorch's own orders (bench/torch_orders.py), imported from its CSV, on 4 pipeline devices
 * (sharing GPUs where fewer are present). */
static void torch_orders(void)
{
    static const char *const files[] = {"tests/data/torch_zbv_p4_m8.csv",
                                        "tests/data/torch_interleaved_zb_p4_m8.csv",
                                        "tests/data/torch_dualpipev_p4_m8.csv"};
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    char devs[64];
    devices_set(devs, sizeof devs, 4);
    int found = 0;
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        if (access(files[i], R_OK) != 0) continue;
        found++;
        char csv[128];
        snprintf(csv, sizeof csv, "schedule.csv=%s", files[i]);
        const char *sets[] = {csv, devs};
        run_and_compare("test.yaml", model_yaml("fp32"), sets, 2, files[i]);
    }
    if (!found) SKIP("no tests/data/torch_*_p4_m8.csv (bench/torch_orders.py writes them)");
}

/* Ops the lowering put on the overlap stream (the backward halves of DualPipeV's pairs), each
 * beside a forward of another stage: the two halves never share a stage's workspace. */
static int overlap_ops(const pp_plan_t *plan, const char *label)
{
    int n = 0;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->role != PP_ROLE_OVERLAP) continue;
        const int *prog = plan->prog_ops + plan->prog_begin[o->device];
        int j = o->pos - 1;
        while (j >= 0 && plan->ops[prog[j]].role != PP_ROLE_COMPUTE)
            j--;
        EXPECT(j >= 0 && plan->ops[prog[j]].stage != o->stage,
               "%s: op %d on the overlap stream beside no forward of another stage", label, i);
        n++;
    }
    return n;
}

/* DualPipeV's overlapped pairs on two compute streams of each device (4 pipeline devices, sharing
 * GPUs where fewer are present): the generated order, PyTorch's own (its CSV), with the step
 * captured as one CUDA graph, and with run.offload, each against the one-device run (bitwise in
 * fp32: a pair's backward half accumulates into its own stage's gradients, in the order it did on
 * one stream). */
static void dualpipev_overlap(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    char devs[64], label[160];
    int shared = devices_set(devs, sizeof devs, 4);
    const char *csv = "schedule.csv=tests/data/torch_dualpipev_p4_m8.csv";
    int have_csv = access("tests/data/torch_dualpipev_p4_m8.csv", R_OK) == 0;
    struct {
        const char *order, *extra;
    } cases[] = {{"schedule.kind=dualpipe-v", "run.graph=off"},
                 {"schedule.kind=dualpipe-v", "run.graph=on"},
                 {"schedule.kind=dualpipe-v", "run.offload=activations"},
                 {csv, "run.graph=on"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        if (cases[c].order == csv && !have_csv) {
            printf("  dualpipev_overlap: no tests/data/torch_dualpipev_p4_m8.csv\n");
            continue;
        }
        const char *sets[] = {cases[c].order, devs, "pipeline.micro_batches=8", cases[c].extra};
        snprintf(label, sizeof label, "%s %s p=4 fp32 overlapped%s", cases[c].order, cases[c].extra,
                 shared ? " (pipeline devices sharing GPUs)" : "");
        pp_run_t r = {0};
        REQUIRE(run_load(&r, "overlap.yaml", model_yaml("fp32"), sets, 4, n_gpus) == PP_OK);
        int n = overlap_ops(&r.plan, label);
        EXPECT(n > 0, "%s: no op on the overlap stream", label);
        run_free(&r);
        run_and_compare("overlap.yaml", model_yaml("fp32"), sets, 4, label);
    }
}

/* Where there are GPUs enough for the cases above to run on separate GPUs, pipeline devices
 * sharing them still run as on separate ones: four on GPU 0, and four on GPUs 0 and 1 in turn
 * (shared and peer boundaries in one pipeline). */
static void shared_gpus_on_many(void)
{
    if (n_gpus < 2) SKIP("the cases above share the %d GPU present already", n_gpus);
    const char *sets0[] = {"schedule.kind=1f1b", "pipeline.devices=[0,0,0,0]",
                           "pipeline.micro_batches=8"};
    run_and_compare("test.yaml", model_yaml("fp32"), sets0, 3, "1f1b on [0,0,0,0]");
    const char *sets1[] = {"schedule.kind=interleaved-1f1b", "pipeline.devices=[0,1,0,1]",
                           "pipeline.micro_batches=8"};
    run_and_compare("test.yaml", model_yaml("fp32"), sets1, 3, "interleaved-1f1b on [0,1,0,1]");
}

/* Steps replayed from one captured CUDA graph give bitwise the same losses and gradients as the
 * same steps launched eagerly: data index and optimizer step advance through the device counters.
 */
static void graph_matches_eager(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    int p = n_gpus >= 4 ? 4 : n_gpus >= 2 ? 2 : 1;
    const char *kinds[] = {"1f1b", "zb-h1"};
    for (int t = 0; t < 2; t++) {
        for (int tr = 0; tr < 2; tr++) {
            pp_run_t r[2];
            pp_status_t st[2];
            memset(r, 0, sizeof r);
            char kind[64], devs[64], transport[64];
            snprintf(kind, sizeof kind, "schedule.kind=%s", kinds[t]);
            if (tr) /* nccl: a GPU per pipeline device */
                snprintf(devs, sizeof devs, "pipeline.devices=%d", p);
            else
                devices_set(devs, sizeof devs, 4);
            snprintf(transport, sizeof transport, "pipeline.transport=%s", tr ? "nccl" : "peer");
            for (int g = 0; g < 2; g++) {
                const char *sets[] = {kind,           devs,
                                      transport,      "pipeline.micro_batches=4",
                                      "run.steps=4",  "run.optimizer=adamw",
                                      "run.lr=0.001", g ? "run.graph=on" : "run.graph=off"};
                pp_run_opts_t ro = measured();
                REQUIRE(run_load(&r[g], "graph.yaml", model_yaml("fp32"), sets, 8, n_gpus) ==
                        PP_OK);
                st[g] = run_execute(&r[g], &ro);
                EXPECT(st[g] == PP_OK, "%s %s graph=%d: %s", kinds[t], tr ? "nccl" : "peer", g,
                       pp_status_str(st[g]));
            }
            if (st[0] == PP_OK && st[1] == PP_OK) {
                const pp_exec_result_t *res[2] = {&r[0].exec, &r[1].exec};
                for (int k = 0; k < res[0]->n_steps; k++)
                    EXPECT(res[0]->loss[k] == res[1]->loss[k],
                           "%s step %d: loss eager %.9g, graph %.9g", kinds[t], k, res[0]->loss[k],
                           res[1]->loss[k]);
                EXPECT(res[0]->loss[3] != res[0]->loss[0],
                       "the steps saw the same data and weights");
                size_t bad = 0;
                for (size_t i = 0; i < res[0]->n_params; i++)
                    bad += res[0]->grads[i] != res[1]->grads[i];
                EXPECT(bad == 0, "%s: %zu gradients differ between eager and graph steps", kinds[t],
                       bad);
                EXPECT(r[1].meas.has_op_times && timeline_makespan(&r[1].meas) > 0,
                       "graph steps were not timed");
                EXPECT(res[0]->graph_steps == 0 && res[1]->graph_steps == res[1]->n_steps - 1,
                       "%s %s: %d of %d steps replayed from the graph (capture failed?)", kinds[t],
                       tr ? "nccl" : "peer", res[1]->graph_steps, res[1]->n_steps);
            }
            run_free(&r[0]);
            run_free(&r[1]);
        }
    }
}

/* ---- pipeline.data_parallel ----------------------------------------------------------------- */

/* d replicas of a p-device pipeline, each on m micro-batches (`sets` say which), against the
 * one-device run of d * m: the loss and the gradients agree within the tolerance of another fp32
 * summation order (each replica sums its m micro-batches, the reduction adds the replicas), and
 * within bf16 tolerance in bf16; every replica's gradients are the same after the reduction (the
 * executor checks it under check_grads); a second run gives the same bits; every REDUCE op was
 * timed, after its stage's last backward; the idle split explains the measured bubble. */
static void dp_compare(const char *yaml, const char *const *sets, int n_sets, const char *label)
{
    pp_run_t r[2];
    pp_status_t st[2];
    memset(r, 0, sizeof r);
    for (int k = 0; k < 2; k++) {
        pp_run_opts_t ro = measured();
        REQUIRE(run_load(&r[k], "dp.yaml", yaml, sets, n_sets, n_gpus) == PP_OK);
        st[k] = run_go(&r[k], &ro);
        EXPECT(st[k] == PP_OK, "%s: run %d: %s", label, k, pp_status_str(st[k]));
    }
    if (st[0] == PP_OK && st[1] == PP_OK) {
        const pp_plan_t *plan = &r[0].plan;
        const pp_exec_result_t *a = &r[0].exec, *b = &r[1].exec;
        const int d = plan_replicas(plan), fp32 = r[0].job.model.dtype == PP_DTYPE_FP32;
        EXPECT(d > 1, "%s: %d replicas", label, d);
        double ref_loss;
        float *ref = NULL;
        size_t n = 0;
        REQUIRE(reference_step(&r[0].job, plan->n_mb * d, &ref_loss, &ref, &n) == 0);
        EXPECT(n == a->n_params, "%s: parameters %zu, reference %zu", label, a->n_params, n);
        EXPECT_NEAR(a->loss[0], ref_loss, fp32 ? 1e-6 : 1e-3, fp32 ? 1e-6 : 1e-3);
        double scale = 0;
        for (size_t i = 0; i < n; i++)
            if (fabs((double)ref[i]) > scale) scale = fabs((double)ref[i]);
        size_t bad = 0, first = 0;
        double worst = 0;
        for (size_t i = 0; i < n && i < a->n_params; i++) {
            double e = fabs((double)a->grads[i] - (double)ref[i]);
            double tol = fp32 ? 1e-5 * scale + 1e-4 * fabs((double)ref[i])
                              : 1e-3 + 5e-2 * fabs((double)ref[i]);
            if (e > tol && !bad++) first = i;
            if (e > worst) worst = e;
        }
        EXPECT(bad == 0,
               "%s: %zu of %zu gradients off (first at %zu: %.9g vs %.9g; max |diff| %.3g)", label,
               bad, n, first, bad ? a->grads[first] : 0.0, bad ? ref[first] : 0.0, worst);
        printf("  %s: loss %.9g (one device %.9g), max |grad diff| %.3g of max |grad| %.3g\n",
               label, a->loss[0], ref_loss, worst, scale);
        EXPECT(a->n_params == b->n_params &&
                   !memcmp(a->grads, b->grads, sizeof *a->grads * a->n_params) &&
                   !memcmp(a->loss, b->loss, sizeof *a->loss * (size_t)a->n_steps),
               "%s: two runs gave different bits", label);
        const pp_timeline_t *tl = &r[0].meas;
        int n_reduce = 0;
        for (int i = 0; i < plan->n_ops; i++) {
            const pp_op_t *o = &plan->ops[i];
            if (o->kind != PP_ACT_REDUCE) continue;
            n_reduce++;
            EXPECT(tl->t[i].end_ms >= tl->t[i].start_ms && tl->t[i].end_ms > 0,
                   "%s: REDUCE op %d timed %.4f..%.4f", label, i, tl->t[i].start_ms,
                   tl->t[i].end_ms);
            for (int k = 0; k < o->n_deps; k++) {
                int dep = plan->deps[o->dep_begin + k];
                EXPECT(tl->t[i].start_ms >= tl->t[dep].end_ms - 1e-3,
                       "%s: REDUCE op %d started before its op %d ended", label, i, dep);
            }
        }
        EXPECT(n_reduce >= d * plan->n_stages, "%s: %d REDUCE ops", label, n_reduce);
        expect_explained(&r[0], label);
        free(ref);
    }
    run_free(&r[0]);
    run_free(&r[1]);
}

/* One data-parallel case of the small model: `kind` on p devices x d replicas, m micro-batches
 * each; separate GPUs where there are p * d (the reduction over NCCL), else sharing them (on one
 * GPU: copies and adds). */
static void dp_case(const char *kind, int p, int d, int m, const char *dtype, const char *extra)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    char sets[5][64], label[160];
    const char *setp[5];
    snprintf(sets[0], sizeof sets[0], "schedule.kind=%s", kind);
    int shared = devices_set(sets[1], sizeof sets[1], p * d);
    snprintf(sets[2], sizeof sets[2], "pipeline.data_parallel=%d", d);
    snprintf(sets[3], sizeof sets[3], "pipeline.micro_batches=%d", m);
    snprintf(sets[4], sizeof sets[4], "%s", extra ? extra : "run.timing=on");
    for (int i = 0; i < 5; i++)
        setp[i] = sets[i];
    snprintf(label, sizeof label, "%s p=%d d=%d m=%d %s%s%s", kind, p, d, m, dtype,
             shared ? " (sharing GPUs)" : "", extra ? extra : "");
    dp_compare(model_yaml(dtype), setp, 5, label);
}

static void dp_1f1b_p2_d2(void)
{
    dp_case("1f1b", 2, 2, 4, "fp32", NULL);
}
static void dp_zbh1_p2_d2(void)
{
    dp_case("zb-h1", 2, 2, 4, "fp32", NULL);
}
static void dp_zbv_p2_d2(void)
{
    dp_case("zb-v", 2, 2, 4, "fp32", "pipeline.reduce_align=aligned");
}
static void dp_interleaved_p2_d2_bf16(void)
{
    dp_case("interleaved", 2, 2, 4, "bf16", NULL);
}
static void dp_1f1b_p1_d4(void)
{
    dp_case("1f1b", 1, 4, 2, "fp32", NULL);
}
/* Each replica's activation slots through its own pinned host slots. */
static void dp_offload(void)
{
    dp_case("1f1b", 2, 2, 4, "fp32", "run.offload=activations");
}

/* Many buckets: a model whose stages hold several MiB of gradients, reduced 1 MiB at a time. */
static void dp_buckets(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    char devs[64], yaml[512];
    int shared = devices_set(devs, sizeof devs, 4);
    snprintf(yaml, sizeof yaml,
             "model: {layers: 8, hidden: 256, heads: 4, seq_len: 32, vocab: 128, dtype: fp32}\n"
             "pipeline: {micro_batch_size: 2, data_parallel: 2, reduce_bucket_mb: 1}\n"
             "schedule: {kind: 1f1b}\n"
             "run: {steps: 1, warmup: 0, seed: 77, timeout: %d}\n",
             step_timeout_s());
    const char *sets[] = {devs, "pipeline.micro_batches=4"};
    char label[96];
    snprintf(label, sizeof label, "1f1b p=2 d=2 1 MiB buckets%s", shared ? " (sharing GPUs)" : "");
    dp_compare(yaml, sets, 2, label);
}

/* Replicas under AdamW over several steps, eager and replayed from a captured graph (the
 * reduction inside it): the same losses, bit for bit, and the loss moves. */
static void dp_graph_matches_eager(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    pp_run_t r[2];
    pp_status_t st[2];
    memset(r, 0, sizeof r);
    char devs[64];
    devices_set(devs, sizeof devs, 4);
    for (int g = 0; g < 2; g++) {
        const char *sets[] = {"schedule.kind=1f1b",
                              devs,
                              "pipeline.data_parallel=2",
                              "pipeline.micro_batches=4",
                              "run.steps=4",
                              "run.optimizer=adamw",
                              "run.lr=0.001",
                              g ? "run.graph=on" : "run.graph=off"};
        pp_run_opts_t ro = measured();
        REQUIRE(run_load(&r[g], "dpgraph.yaml", model_yaml("fp32"), sets, 8, n_gpus) == PP_OK);
        st[g] = run_execute(&r[g], &ro);
        EXPECT(st[g] == PP_OK, "graph=%d: %s", g, pp_status_str(st[g]));
    }
    if (st[0] == PP_OK && st[1] == PP_OK) {
        const pp_exec_result_t *a = &r[0].exec, *b = &r[1].exec;
        for (int k = 0; k < a->n_steps; k++)
            EXPECT(a->loss[k] == b->loss[k], "step %d: loss eager %.9g, graph %.9g", k, a->loss[k],
                   b->loss[k]);
        EXPECT(a->loss[3] != a->loss[0], "the steps saw the same data and weights");
        EXPECT(b->graph_steps == b->n_steps - 1, "%d of %d steps replayed from the graph",
               b->graph_steps, b->n_steps);
    }
    run_free(&r[0]);
    run_free(&r[1]);
}

/* run.optimizer_sharding zero1 against the whole optimizer on every replica, under AdamW over four
 * steps replayed from a graph: each replica updating only its part of the parameters and the parts
 * gathered give every step's loss and the last step's gradients of the unsharded run: bitwise with
 * two replicas (a sum of two is the same in any order) or on one GPU (the same adds), within fp32
 * summation-order tolerance with four over NCCL. */
static void dp_zero1_case(int p, int d, const char *dtype)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    pp_run_t r[2];
    pp_status_t st[2];
    memset(r, 0, sizeof r);
    char devs[64], dp[64];
    int shared = devices_set(devs, sizeof devs, p * d);
    snprintf(dp, sizeof dp, "pipeline.data_parallel=%d", d);
    for (int z = 0; z < 2; z++) {
        const char *sets[] = {"schedule.kind=1f1b",
                              devs,
                              dp,
                              "pipeline.micro_batches=4",
                              "run.steps=4",
                              "run.optimizer=adamw",
                              "run.lr=0.003",
                              "run.graph=on",
                              z ? "run.optimizer_sharding=zero1" : "run.optimizer_sharding=none"};
        pp_run_opts_t ro = measured();
        REQUIRE(run_load(&r[z], "zero1.yaml", model_yaml(dtype), sets, 9, n_gpus) == PP_OK);
        st[z] = run_execute(&r[z], &ro);
        EXPECT(st[z] == PP_OK, "p=%d d=%d %s zero1=%d: %s", p, d, dtype, z, pp_status_str(st[z]));
    }
    if (st[0] == PP_OK && st[1] == PP_OK) {
        const pp_exec_result_t *a = &r[0].exec, *b = &r[1].exec;
        const int exact = d == 2 || shared;
        for (int k = 0; k < a->n_steps; k++) {
            if (exact)
                EXPECT(a->loss[k] == b->loss[k], "p=%d d=%d %s step %d: loss %.9g, zero1 %.9g", p,
                       d, dtype, k, a->loss[k], b->loss[k]);
            else
                EXPECT_NEAR(b->loss[k], a->loss[k], 1e-5, 1e-5);
        }
        EXPECT(a->loss[3] < a->loss[0], "the loss did not fall: %.6g -> %.6g", a->loss[0],
               a->loss[3]);
        size_t bad = 0;
        for (size_t i = 0; i < a->n_params && i < b->n_params; i++)
            bad += exact ? a->grads[i] != b->grads[i]
                         : fabs(a->grads[i] - b->grads[i]) > 1e-6 + 1e-4 * fabs(a->grads[i]);
        EXPECT(a->n_params == b->n_params && bad == 0, "p=%d d=%d %s: %zu gradients differ", p, d,
               dtype, bad);
        EXPECT(b->graph_steps == b->n_steps - 1, "%d of %d steps replayed", b->graph_steps,
               b->n_steps);
        printf("  zero1 p=%d d=%d %s%s: losses %.9g .. %.9g as unsharded\n", p, d, dtype,
               shared ? " (sharing GPUs)" : "", b->loss[0], b->loss[3]);
    }
    run_free(&r[0]);
    run_free(&r[1]);
}

static void dp_zero1_p2_d2(void)
{
    dp_zero1_case(2, 2, "fp32");
}
static void dp_zero1_p2_d2_bf16(void)
{
    dp_zero1_case(2, 2, "bf16");
}
static void dp_zero1_p1_d4(void)
{
    dp_zero1_case(1, 4, "fp32");
}

/* A step that cannot finish within --timeout is reported, not waited on: the executor names the
 * pending op of each device, aborts NCCL and returns PP_ERR_TIMEOUT; the process stays usable. */
static void timeout_names_pending_op(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    SKIP_IF_QUICK("steps of the large model");
    int p = n_gpus >= 2 ? 2 : 1;
    static const char *const trs[] = {"peer", "nccl", "ipc"};
    for (int tr = 0; tr < (p > 1 ? 3 : 1); tr++) {
        pp_run_t r = {0};
        char devs[64], transport[64];
        snprintf(devs, sizeof devs, "pipeline.devices=%d", p);
        snprintf(transport, sizeof transport, "pipeline.transport=%s", trs[tr]);
        /* 1 us: the host cannot even finish enqueuing a step before the deadline passes. */
        const char *sets[] = {"schedule.kind=1f1b",       devs,          transport,
                              "pipeline.micro_batches=8", "run.steps=2", "run.graph=off",
                              "run.timeout=0.000001"};
        REQUIRE(run_load(&r, "timeout.yaml", BIG_MODEL_YAML, sets, 7, n_gpus) == PP_OK);
        char log[8192];
        pp_status_t st = execute_logged(&r, log, sizeof log);
        EXPECT(st == PP_ERR_TIMEOUT, "%s: status %s, want timeout", trs[tr], pp_status_str(st));
        EXPECT(strstr(log, "did not finish within") && strstr(log, "device 0 (cuda"),
               "%s: the timeout message names no pending op:\n%s", trs[tr], log);
        run_free(&r);
    }
    /* The devices are still usable afterwards. */
    check_case("1f1b", p, "peer", "fp32", 4);
}

/* With AdamW the loss of the synthetic task must fall clearly over 50 steps. */
static void adamw_loss_falls(void)
{
    if (n_gpus < 1) SKIP("%s", g_no_gpu);
    SKIP_IF_QUICK("50 steps; the AdamW step runs in graph_matches_eager");
    int p = n_gpus >= 2 ? 2 : 1;
    pp_run_t r = {0};
    char devs[64];
    snprintf(devs, sizeof devs, "pipeline.devices=%d", p);
    const char *sets[] = {
        "schedule.kind=1f1b",  devs,           "pipeline.micro_batches=4", "run.steps=50",
        "run.optimizer=adamw", "run.lr=0.003", "run.weight_decay=0",       "run.timing=off",
        "run.graph=on"};
    pp_run_opts_t ro = {.measure = 1, .exec = execute_plan};
    REQUIRE(run_load(&r, "adamw.yaml", model_yaml("bf16"), sets, 9, n_gpus) == PP_OK);
    pp_status_t st = run_go(&r, &ro);
    EXPECT(st == PP_OK, "run: %s", pp_status_str(st));
    if (st == PP_OK) {
        const pp_exec_result_t *res = &r.exec;
        double first = res->loss[0], last = res->loss[res->n_steps - 1];
        printf("  adamw: loss %.4f -> %.4f over %d steps\n", first, last, res->n_steps);
        EXPECT(last < 0.7 * first, "loss %.4f -> %.4f over %d steps: did not fall by 30%%", first,
               last, res->n_steps);
        EXPECT(first > 3.0, "initial loss %.4f: expected near ln(128) = 4.85", first);
    }
    run_free(&r);
}

int main(void)
{
    n_gpus = execute_device_count();
    g_no_gpu = tg_skip_reason();
    RUN(gpipe_1gpu);
    RUN(gpipe_2gpu_peer);
    RUN(gpipe_4gpu_peer);
    RUN(gpipe_4gpu_nccl);
    RUN(f1b1_1gpu);
    RUN(f1b1_2gpu_peer);
    RUN(f1b1_2gpu_nccl);
    RUN(f1b1_4gpu_peer);
    RUN(f1b1_4gpu_nccl);
    RUN(f1b1_4gpu_bf16);
    RUN(interleaved_1gpu);
    RUN(interleaved_2gpu_peer);
    RUN(interleaved_4gpu_peer);
    RUN(interleaved_4gpu_nccl);
    RUN(zbh1_1gpu);
    RUN(zbh1_2gpu_peer);
    RUN(zbh1_4gpu_peer);
    RUN(zbh1_4gpu_nccl);
    RUN(zbh2_2gpu_peer);
    RUN(zbh2_4gpu_peer);
    RUN(zbv_2gpu_peer);
    RUN(zbv_4gpu_peer);
    RUN(zbv_4gpu_nccl);
    RUN(dualpipev_2gpu_peer);
    RUN(dualpipev_4gpu_peer);
    RUN(looped_bfs_2gpu_peer);
    RUN(looped_bfs_4gpu_peer);
    RUN(interleaved_zb_2gpu_peer);
    RUN(interleaved_zb_4gpu_peer);
    RUN(interleaved_zb_4gpu_nccl);
    RUN(nccl_levers_match_reference);
    RUN(f1b1_2gpu_ipc);
    RUN(f1b1_4gpu_ipc);
    RUN(zbv_4gpu_ipc);
    RUN(dualpipev_4gpu_ipc);
    RUN(uneven_split);
    RUN(torch_orders);
    RUN(dualpipev_overlap);
    RUN(fused_attention_bf16);
    RUN(recompute_matches_reference);
    RUN(offload_matches_reference);
    RUN(offload_auto_matches_reference);
    RUN(offload_partial_matches_reference);
    RUN(offload_graph_matches_plain);
    RUN(offload_partial_graph_matches_plain);
    RUN(explicit_schedules_run_as_written);
    RUN(too_big_is_refused);
    RUN(shared_gpus_on_many);
    RUN(graph_matches_eager);
    RUN(timeout_names_pending_op);
    RUN(adamw_loss_falls);
    RUN(dp_1f1b_p2_d2);
    RUN(dp_zbh1_p2_d2);
    RUN(dp_zbv_p2_d2);
    RUN(dp_interleaved_p2_d2_bf16);
    RUN(dp_1f1b_p1_d4);
    RUN(dp_offload);
    RUN(dp_buckets);
    RUN(dp_graph_matches_eager);
    RUN(dp_zero1_p2_d2);
    RUN(dp_zero1_p2_d2_bf16);
    RUN(dp_zero1_p1_d4);
    return check_summary("test_pipeline");
}
