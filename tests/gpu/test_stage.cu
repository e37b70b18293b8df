/*
 * test_stage.cu — the GPU stage (stages/stage.cu) against the CPU reference (tests/ref/ref_stage.c)
 * at small shapes: B=2, T=32, C=64, H=4, V=128, 2 blocks per stage, as the first, a middle, the
 * last and a single (first + last) stage, in fp32 and bf16, and a single stage of 0 blocks.
 *
 * Per case: parameter init equals the reference's; forward output / loss and backward dx / every
 * parameter gradient match the reference (fp32: |got - want| <= 1e-4 max|want| + 1e-3 |want| per
 * element of each tensor, TF32 off; bf16: relative L2 error per tensor <= BF16_RTOL_* below);
 * I then W gives B's bits; a second run and a second stage object give the same bits; two
 * micro-batches in two slots accumulate to the sum; two AdamW steps match a CPU AdamW, and the
 * updated parameters reach the forward. The column sums as the weight pass's separate reductions
 * (PPSCHED_WGRAD=unfused) and with the LayerNorm sums read back in W (PPSCHED_LAYERNORM_BWD=
 * unfused) match the same reference. Each run.recompute setting gives none's bits (selective:
 * except fc2's weight gradient, within the reference's tolerance), with I then W equal to B. Inputs
 * x and dy are fresh seeded random values, the output buffers are poisoned with 0xFF first. Without
 * a GPU every case is skipped. PPSCHED_TEST_QUICK=1 (check.h) leaves out the first and the last
 * stage alone (the single stage is both) and two of the four recompute cases, and does not weigh
 * the stage's allocations (other programs share the GPU then).
 */
#include "common/pp_cuda.h"
#include "kernels/kernels.h"
#include "model/stage_layout.h"
#include "stages/stage.h"
#include "tests/check.h"
#include "tests/gpu/support.h"
#include "tests/ref/ref_stage.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEED       0x0123456789abULL
#define BATCH      2
#define SEQ        32
#define HIDDEN     64
#define HEADS      4
#define VOCAB      128
#define BLOCKS     2
#define GRAD_SCALE 0.5f
#define MB_A       3 /* data indices of the two micro-batches */
#define MB_B       11

/* bf16 tolerances (relative L2 error of a whole tensor against the double reference): the
 * storage keeps 8 bits of mantissa, and errors grow through the blocks and the backward. Measured
 * on an H100: forward <= 4.4e-3, gradients <= 9.3e-3 (fp32: <= 4e-7). */
#define BF16_RTOL_FWD 1e-2
#define BF16_RTOL_BWD 2.5e-2

/* CASE_HEADS: a single stage with no blocks (embedding straight into the final LN and head). */
typedef enum { CASE_FIRST, CASE_MIDDLE, CASE_LAST, CASE_SINGLE, CASE_HEADS } case_t;

static const char *case_name(case_t k)
{
    static const char *names[] = {"first", "middle", "last", "single", "no-blocks"};
    return names[k];
}

static pp_stage_cfg_t make_cfg(case_t k, pp_dtype_t dt)
{
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = HIDDEN;
    c.heads = HEADS;
    c.seq_len = SEQ;
    c.vocab = VOCAB;
    c.micro_batch_size = BATCH;
    c.n_layers = k == CASE_HEADS ? 0 : BLOCKS;
    c.total_layers = k == CASE_SINGLE || k == CASE_HEADS ? BLOCKS : 3 * BLOCKS;
    c.first_layer = k == CASE_MIDDLE ? BLOCKS : k == CASE_LAST ? 2 * BLOCKS : 0;
    c.is_first = k == CASE_FIRST || k == CASE_SINGLE || k == CASE_HEADS;
    c.is_last = k == CASE_LAST || k == CASE_SINGLE || k == CASE_HEADS;
    c.dtype = dt;
    c.seed = SEED;
    c.n_slots = 2;
    c.n_wgrad_slots = 2;
    c.with_optimizer = 1;
    c.grad_scale = GRAD_SCALE;
    return c;
}

/* ---- host helpers ------------------------------------------------------------------------------
 */

/* Seeded uniform values in [-amp, amp), rounded to what the storage dtype can hold. */
static void fill_random(double *x, size_t n, uint64_t key, double amp, pp_dtype_t dt)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((2.0 * pp_unit53(pp_hash(key, 99, i, 0, 0)) - 1.0) * amp);
    ref_round(x, n, dt == PP_DTYPE_BF16);
}

/* got (from the GPU) against want (the reference). fp32: per element |got - want| <= 1e-4 *
 * max|want| + 1e-3 |want|; bf16: relative L2 error <= rtol_bf16. NaN (poisoned memory reads as
 * NaN) fails either. */
static void expect_stage_close(const char *what, const double *got, const double *want, size_t n,
                               pp_dtype_t dt, double rtol_bf16)
{
    if (dt == PP_DTYPE_BF16) {
        EXPECT_REL_L2(what, got, want, n, rtol_bf16);
        return;
    }
    double maxw = 0.0;
    for (size_t i = 0; i < n; i++)
        maxw = fmax(maxw, fabs(want[i]));
    const tg_tol_t tol = {1e-4 * maxw, 1e-3};
    EXPECT_CLOSE(what, got, want, n, tol);
}

/* ---- the cases ---------------------------------------------------------------------------------
 */

/* Everything one case holds, freed at one place. */
typedef struct fixture {
    pp_stage_t *st, *st2;
    ref_stage_t ref;
    int ref_ok;
    cudaStream_t stream;
    double *x, *x_b, *dy, *dy_b, *want;
    float *g_ref, *g_b, *g_tmp, *p0;
    double *pd, *gd, *m, *v;
} fixture_t;

static void fixture_free(fixture_t *f)
{
    stage_free(f->st);
    stage_free(f->st2);
    if (f->ref_ok) ref_stage_free(&f->ref);
    if (f->stream) cudaStreamDestroy(f->stream);
    free(f->x), free(f->x_b), free(f->dy), free(f->dy_b), free(f->want);
    free(f->g_ref), free(f->g_b), free(f->g_tmp), free(f->p0);
    free(f->pd), free(f->gd), free(f->m), free(f->v);
}

static int poison_outputs(pp_stage_t *st, int slot, size_t bytes)
{
    void *y = stage_slot_y(st, slot), *dx = stage_slot_dx(st, slot);
    if (y && cudaMemset(y, 0xFF, bytes) != cudaSuccess) return -1;
    if (dx && cudaMemset(dx, 0xFF, bytes) != cudaSuccess) return -1;
    return 0;
}

static void set_inputs(pp_stage_t *st, int slot, const double *x, const double *dy, size_t n,
                       pp_dtype_t dt)
{
    if (stage_slot_x(st, slot)) tg_upload(stage_slot_x(st, slot), x, n, dt);
    if (stage_slot_dy(st, slot)) tg_upload(stage_slot_dy(st, slot), dy, n, dt);
}

/* Forward then backward (B, or I then W) of one micro-batch in `slot`. */
static pp_status_t run_fb(pp_stage_t *st, int slot, int mb, int split, cudaStream_t s)
{
    PP_CHECK(stage_forward(st, slot, mb, s));
    if (split) {
        PP_CHECK(stage_backward_input(st, slot, mb, s));
        PP_CHECK(stage_backward_weight(st, slot, mb, s));
    } else {
        PP_CHECK(stage_backward(st, slot, mb, s));
    }
    PP_CUDA_CHECK(cudaStreamSynchronize(s));
    return PP_OK;
}

static void run_case(case_t kind, pp_dtype_t dt)
{
    fixture_t f;
    memset(&f, 0, sizeof f);
    const pp_stage_cfg_t cfg = make_cfg(kind, dt);
    const pp_model_shape_t shape = stage_shape_of(&cfg);
    const size_t NC = (size_t)BATCH * SEQ * HIDDEN, bytes = stage_boundary_bytes(&cfg);
    const char *cn = case_name(kind);
    const int last = cfg.is_last, first = cfg.is_first;
    double rt_f = BF16_RTOL_FWD, rt_b = BF16_RTOL_BWD;
    char what[96];

    REQUIRE(bytes == NC * pp_dtype_size(dt));
    if (stage_init(&f.st, &cfg) != PP_OK) {
        fixture_free(&f);
        REQUIRE(0, "stage_init failed");
    }
    f.ref_ok = ref_stage_init(&f.ref, &shape, SEED) == 0;
    size_t n = stage_n_params(f.st);
    f.x = (double *)malloc(NC * sizeof(double)), f.x_b = (double *)malloc(NC * sizeof(double));
    f.dy = (double *)malloc(NC * sizeof(double)), f.dy_b = (double *)malloc(NC * sizeof(double));
    f.want = (double *)malloc(NC * sizeof(double));
    f.g_ref = (float *)malloc(n * sizeof(float)), f.g_b = (float *)malloc(n * sizeof(float));
    f.g_tmp = (float *)malloc(n * sizeof(float)), f.p0 = (float *)malloc(n * sizeof(float));
    f.pd = (double *)malloc(n * sizeof(double)), f.gd = (double *)malloc(n * sizeof(double));
    f.m = (double *)calloc(n, sizeof(double)), f.v = (double *)calloc(n, sizeof(double));
    if (!f.ref_ok || !f.x || !f.x_b || !f.dy || !f.dy_b || !f.want || !f.g_ref || !f.g_b ||
        !f.g_tmp || !f.p0 || !f.pd || !f.gd || !f.m || !f.v ||
        cudaStreamCreateWithFlags(&f.stream, cudaStreamNonBlocking) != cudaSuccess) {
        fixture_free(&f);
        REQUIRE(0, "out of memory");
    }
    ref_stage_t *ref = &f.ref;
    cudaStream_t s = f.stream;

    /* Sizes and init: the same tensors, the same values (up to a last-bit rounding of libm vs
     * the device's log/sin/cos in a handful of elements). */
    EXPECT(n == ref->n_params && n == stage_param_count(&cfg), "%s: %zu params, reference %zu", cn,
           n, ref->n_params);
    if (stage_params_to_host(f.st, f.p0) == PP_OK) {
        size_t off = 0, exact = 0;
        for (size_t i = 0; i < n; i++) {
            double w = ref->params[i], g = f.p0[i];
            exact += g == w;
            off += fabs(g - w) > fabs(w) * 1.2e-7;
        }
        EXPECT(off == 0,
               "%s: %zu of %zu initial parameters differ from the reference by more than "
               "one ulp",
               cn, off, n);
        EXPECT(exact + 16 >= n, "%s: only %zu of %zu initial parameters equal", cn, exact, n);
    } else {
        EXPECT(0, "stage_params_to_host failed");
    }

    /* Fresh inputs (x ~ activations of size 1, dy ~ gradients of size 1e-2), poisoned outputs. */
    fill_random(f.x, NC, SEED + 1 + kind + 8 * dt, 1.5, dt);
    fill_random(f.x_b, NC, SEED + 2 + kind + 8 * dt, 1.5, dt);
    fill_random(f.dy, NC, SEED + 3 + kind + 8 * dt, 1e-2, dt);
    fill_random(f.dy_b, NC, SEED + 4 + kind + 8 * dt, 1e-2, dt);
    if (poison_outputs(f.st, 0, bytes)) {
        fixture_free(&f);
        REQUIRE(0, "could not set the slot's buffers");
    }
    set_inputs(f.st, 0, f.x, f.dy, NC, dt);

    /* 1. forward and backward against the reference. */
    pp_status_t ps = run_fb(f.st, 0, MB_A, 0, s);
    if (ps != PP_OK) {
        fixture_free(&f);
        REQUIRE(0, "%s: forward/backward failed: %s", cn, pp_status_str(ps));
    }
    double loss_ref = ref_stage_forward(ref, f.x, MB_A, f.want);
    double loss_a = 0.0;
    if (!last) {
        snprintf(what, sizeof what, "%s %s y", cn, pp_dtype_name(dt));
        expect_stage_close(what, tg_download(stage_slot_y(f.st, 0), NC, dt), f.want, NC, dt, rt_f);
    } else {
        EXPECT(stage_loss_read(f.st, &loss_a, s) == PP_OK);
        EXPECT_NEAR(loss_a, loss_ref, 0, dt == PP_DTYPE_BF16 ? 1e-2 : 1e-5);
        EXPECT(fabs(loss_ref - log((double)VOCAB)) < 0.2, "initial loss %.4f, ln V = %.4f",
               loss_ref, log((double)VOCAB));
    }
    ref_stage_backward(ref, f.dy, GRAD_SCALE, f.want);
    if (!first) {
        snprintf(what, sizeof what, "%s %s dx", cn, pp_dtype_name(dt));
        expect_stage_close(what, tg_download(stage_slot_dx(f.st, 0), NC, dt), f.want, NC, dt, rt_b);
    }
    REQUIRE(stage_grads_to_host(f.st, f.g_ref) == PP_OK);
    for (int t = 0; t < ref->n_tensors; t++) {
        const pp_param_tensor_t *tt = &ref->tensors[t];
        for (size_t i = 0; i < tt->numel; i++)
            f.gd[i] = f.g_ref[tt->packed + i];
        snprintf(what, sizeof what, "%s %s d%s[layer %d]", cn, pp_dtype_name(dt),
                 model_param_name(tt->kind), tt->layer);
        expect_stage_close(what, f.gd, ref->grads + tt->packed, tt->numel, dt, rt_b);
    }

    /* 2. I then W in the other slot gives B's bits (dx, y, loss and gradients). */
    {
        unsigned char *b_out = (unsigned char *)malloc(2 * bytes);
        REQUIRE(b_out);
        void *yb = stage_slot_y(f.st, 0), *dxb = stage_slot_dx(f.st, 0);
        if (yb) cudaMemcpy(b_out, yb, bytes, cudaMemcpyDeviceToHost);
        if (dxb) cudaMemcpy(b_out + bytes, dxb, bytes, cudaMemcpyDeviceToHost);
        EXPECT(stage_zero_grads(f.st, s) == PP_OK);
        EXPECT(poison_outputs(f.st, 1, bytes) == 0);
        set_inputs(f.st, 1, f.x, f.dy, NC, dt);
        EXPECT(run_fb(f.st, 1, MB_A, 1, s) == PP_OK);
        EXPECT(stage_grads_to_host(f.st, f.g_tmp) == PP_OK);
        EXPECT(memcmp(f.g_tmp, f.g_ref, n * sizeof(float)) == 0, "%s: I+W gradients != B's", cn);
        unsigned char *iw = (unsigned char *)malloc(bytes);
        REQUIRE(iw);
        if (yb) {
            cudaMemcpy(iw, stage_slot_y(f.st, 1), bytes, cudaMemcpyDeviceToHost);
            EXPECT(memcmp(iw, b_out, bytes) == 0, "%s: y differs between slots", cn);
        }
        if (dxb) {
            cudaMemcpy(iw, stage_slot_dx(f.st, 1), bytes, cudaMemcpyDeviceToHost);
            EXPECT(memcmp(iw, b_out + bytes, bytes) == 0, "%s: I+W dx != B's", cn);
        }
        if (last) {
            double l2 = 0.0;
            EXPECT(stage_loss_read(f.st, &l2, s) == PP_OK);
            EXPECT(l2 == loss_a, "%s: loss %.9g then %.9g", cn, loss_a, l2);
        }
        free(iw);
        free(b_out);
    }

    /* 3. Two runs on one stage, and a second stage object, give the same bits. */
    EXPECT(stage_zero_grads(f.st, s) == PP_OK);
    EXPECT(run_fb(f.st, 0, MB_A, 0, s) == PP_OK);
    EXPECT(stage_grads_to_host(f.st, f.g_tmp) == PP_OK);
    EXPECT(memcmp(f.g_tmp, f.g_ref, n * sizeof(float)) == 0, "%s: second run differs", cn);
    if (stage_init(&f.st2, &cfg) == PP_OK) {
        set_inputs(f.st2, 0, f.x, f.dy, NC, dt);
        EXPECT(run_fb(f.st2, 0, MB_A, 0, s) == PP_OK);
        EXPECT(stage_grads_to_host(f.st2, f.g_tmp) == PP_OK);
        EXPECT(memcmp(f.g_tmp, f.g_ref, n * sizeof(float)) == 0,
               "%s: a second stage object differs", cn);
        stage_free(f.st2);
        f.st2 = NULL;
    } else {
        EXPECT(0, "second stage_init failed");
    }

    /* 4. Micro-batches A (slot 0) and B (slot 1) in flight together accumulate to the sum of
     * their gradients taken one at a time. */
    double loss_b = 0.0, loss_ab = 0.0;
    EXPECT(stage_zero_grads(f.st, s) == PP_OK);
    set_inputs(f.st, 1, f.x_b, f.dy_b, NC, dt);
    EXPECT(run_fb(f.st, 1, MB_B, 0, s) == PP_OK);
    EXPECT(stage_grads_to_host(f.st, f.g_b) == PP_OK);
    if (last) EXPECT(stage_loss_read(f.st, &loss_b, s) == PP_OK);
    EXPECT(stage_zero_grads(f.st, s) == PP_OK);
    set_inputs(f.st, 0, f.x, f.dy, NC, dt);
    EXPECT(stage_forward(f.st, 0, MB_A, s) == PP_OK);
    EXPECT(stage_forward(f.st, 1, MB_B, s) == PP_OK);
    EXPECT(stage_backward_input(f.st, 1, MB_B, s) == PP_OK);
    EXPECT(stage_backward(f.st, 0, MB_A, s) == PP_OK);
    EXPECT(stage_backward_weight(f.st, 1, MB_B, s) == PP_OK);
    EXPECT(stage_grads_to_host(f.st, f.g_tmp) == PP_OK);
    {
        size_t bad = 0, first_bad = 0, differ = 0;
        for (size_t i = 0; i < n; i++) {
            double sum = (double)f.g_ref[i] + (double)f.g_b[i];
            double tol = 1e-6 * (fabs(f.g_ref[i]) + fabs(f.g_b[i])) + 1e-30;
            if (!(fabs(f.g_tmp[i] - sum) <= tol) && bad++ == 0) first_bad = i;
            differ += f.g_ref[i] != f.g_b[i];
        }
        EXPECT(bad == 0, "%s: %zu of %zu accumulated gradients != the sum; first %zu: %.9g vs %.9g",
               cn, bad, n, first_bad, f.g_tmp[first_bad],
               (double)f.g_ref[first_bad] + f.g_b[first_bad]);
        EXPECT(differ > n / 2, "%s: micro-batches A and B gave nearly equal gradients", cn);
    }
    if (last) {
        EXPECT(stage_loss_read(f.st, &loss_ab, s) == PP_OK);
        EXPECT_NEAR(loss_ab, loss_a + loss_b, 1e-6, 1e-6);
    }

    /* 5. Two AdamW steps on the accumulated gradients against a CPU AdamW, then a forward with
     * the new parameters against the reference. */
    {
        pp_adamw_cfg_t opt = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
        for (size_t i = 0; i < n; i++)
            f.pd[i] = f.p0[i], f.gd[i] = f.g_tmp[i];
        EXPECT(stage_optimizer_step(f.st, &opt, 1, s) == PP_OK);
        EXPECT(stage_optimizer_step(f.st, &opt, 2, s) == PP_OK);
        for (int step = 1; step <= 2; step++)
            ref_adamw_step(ref->tensors, ref->n_tensors, f.pd, f.gd, f.m, f.v, opt.lr, opt.beta1,
                           opt.beta2, opt.eps, opt.weight_decay, step);
        EXPECT(stage_params_to_host(f.st, f.p0) == PP_OK);
        size_t bad = 0, first_bad = 0, moved = 0;
        for (size_t i = 0; i < n; i++) {
            if (!(fabs(f.p0[i] - f.pd[i]) <= 1e-6 + 1e-5 * fabs(f.pd[i])) && bad++ == 0)
                first_bad = i;
            moved += f.pd[i] != ref->params[i];
        }
        EXPECT(bad == 0,
               "%s: %zu of %zu parameters differ from the CPU AdamW; first %zu: %.9g "
               "vs %.9g",
               cn, bad, n, first_bad, f.p0[first_bad], f.pd[first_bad]);
        EXPECT(moved > n / 2, "%s: AdamW moved only %zu of %zu parameters", cn, moved, n);

        for (size_t i = 0; i < n; i++)
            ref->params[i] = f.p0[i];
        EXPECT(stage_zero_grads(f.st, s) == PP_OK);
        EXPECT(poison_outputs(f.st, 0, bytes) == 0);
        set_inputs(f.st, 0, f.x_b, f.dy_b, NC, dt);
        EXPECT(stage_forward(f.st, 0, MB_B, s) == PP_OK);
        EXPECT(cudaStreamSynchronize(s) == cudaSuccess);
        double lr2 = ref_stage_forward(ref, f.x_b, MB_B, f.want);
        if (!last) {
            snprintf(what, sizeof what, "%s %s y after AdamW", cn, pp_dtype_name(dt));
            expect_stage_close(what, tg_download(stage_slot_y(f.st, 0), NC, dt), f.want, NC, dt,
                               rt_f);
        } else {
            double l = 0.0;
            EXPECT(stage_loss_read(f.st, &l, s) == PP_OK);
            EXPECT_NEAR(l, lr2, 0, dt == PP_DTYPE_BF16 ? 1e-2 : 1e-5);
        }
    }
    fixture_free(&f);
}

/* ---- recomputation ------------------------------------------------------------------------------
 */

/* What one forward + backward of micro-batch MB_A produced, as bits. */
typedef struct outcome {
    unsigned char *y, *dx; /* boundary bytes each (NULL where the stage has none) */
    float *grads;          /* [n] */
    double loss;
} outcome_t;

static void outcome_free(outcome_t *o)
{
    free(o->y), free(o->dx), free(o->grads);
    memset(o, 0, sizeof *o);
}

/* Forward + backward (B, or I then W) of micro-batch MB_A from x and dy in `slot` of a stage built
 * with `rc`; the outputs as bits. Returns 0 on success. */
static int run_outcome(pp_stage_t *st, int slot, int split, const double *x, const double *dy,
                       const pp_stage_cfg_t *c, cudaStream_t s, outcome_t *o)
{
    const size_t NC = (size_t)BATCH * SEQ * HIDDEN, bytes = stage_boundary_bytes(c);
    const size_t n = stage_n_params(st);
    memset(o, 0, sizeof *o);
    o->y = (unsigned char *)calloc(1, bytes), o->dx = (unsigned char *)calloc(1, bytes);
    o->grads = (float *)malloc(n * sizeof(float));
    if (!o->y || !o->dx || !o->grads) return -1;
    if (stage_zero_grads(st, s) != PP_OK || poison_outputs(st, slot, bytes)) return -1;
    set_inputs(st, slot, x, dy, NC, c->dtype);
    if (run_fb(st, slot, MB_A, split, s) != PP_OK || stage_grads_to_host(st, o->grads) != PP_OK)
        return -1;
    if (stage_slot_y(st, slot))
        cudaMemcpy(o->y, stage_slot_y(st, slot), bytes, cudaMemcpyDeviceToHost);
    if (stage_slot_dx(st, slot))
        cudaMemcpy(o->dx, stage_slot_dx(st, slot), bytes, cudaMemcpyDeviceToHost);
    if (c->is_last && stage_loss_read(st, &o->loss, s) != PP_OK) return -1;
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* Which parameter gradients may differ from none's under recompute setting rc: selective
 * rebuilds GELU's output with the GELU kernel where F took it from the fc GEMM's epilogue, and
 * only fc2's weight gradient reads it. Everything else runs the same kernels on the same bits. */
static int may_differ(pp_recompute_t rc, pp_param_kind_t kind)
{
    return rc == PP_RECOMPUTE_SELECTIVE && kind == PP_PARAM_FC2_W;
}

/* Each recompute setting: I then W gives B's bits; y, dx and the loss are none's bits; every
 * gradient is none's bits except where may_differ, which matches the CPU reference. */
static void run_recompute(case_t kind, pp_dtype_t dt)
{
    pp_stage_cfg_t cfg = make_cfg(kind, dt);
    const pp_model_shape_t shape = stage_shape_of(&cfg);
    const size_t NC = (size_t)BATCH * SEQ * HIDDEN, bytes = stage_boundary_bytes(&cfg);
    const char *cn = case_name(kind);
    double *x = (double *)malloc(NC * sizeof(double)), *dy = (double *)malloc(NC * sizeof(double));
    double *want = (double *)malloc(NC * sizeof(double)), *gd = NULL;
    outcome_t base = {0}, o = {0}, o_iw = {0};
    ref_stage_t ref;
    cudaStream_t s = NULL;
    REQUIRE(x && dy && want && ref_stage_init(&ref, &shape, SEED) == 0);
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    fill_random(x, NC, SEED + 21 + kind + 8 * dt, 1.5, dt);
    fill_random(dy, NC, SEED + 22 + kind + 8 * dt, 1e-2, dt);
    ref_stage_forward(&ref, x, MB_A, want);
    ref_stage_backward(&ref, dy, GRAD_SCALE, want);
    gd = (double *)malloc(ref.n_params * sizeof(double));
    for (int rc = 0; rc < PP_RECOMPUTE_COUNT && gd; rc++) {
        const char *rn = stage_recompute_name((pp_recompute_t)rc);
        pp_stage_t *st = NULL;
        cfg.recompute = (pp_recompute_t)rc;
        if (stage_init(&st, &cfg) != PP_OK) {
            EXPECT(0, "%s %s: stage_init failed", cn, rn);
            break;
        }
        int ok = run_outcome(st, 0, 0, x, dy, &cfg, s, &o) == 0 &&
                 run_outcome(st, 1, 1, x, dy, &cfg, s, &o_iw) == 0;
        stage_free(st);
        EXPECT(ok, "%s %s: forward/backward failed", cn, rn);
        if (!ok) break;
        const size_t n = ref.n_params;
        EXPECT(memcmp(o.grads, o_iw.grads, n * sizeof(float)) == 0 &&
                   memcmp(o.dx, o_iw.dx, bytes) == 0 && memcmp(o.y, o_iw.y, bytes) == 0,
               "%s %s %s: I then W differs from B", cn, pp_dtype_name(dt), rn);
        if (rc == PP_RECOMPUTE_NONE) {
            base = o;
            memset(&o, 0, sizeof o);
            outcome_free(&o_iw);
            continue;
        }
        EXPECT(memcmp(o.y, base.y, bytes) == 0 && memcmp(o.dx, base.dx, bytes) == 0 &&
                   o.loss == base.loss,
               "%s %s %s: y, dx or the loss differ from none's", cn, pp_dtype_name(dt), rn);
        for (int t = 0; t < ref.n_tensors; t++) {
            const pp_param_tensor_t *tt = &ref.tensors[t];
            const float *got = o.grads + tt->packed, *was = base.grads + tt->packed;
            char what[96];
            snprintf(what, sizeof what, "%s %s %s d%s[layer %d]", cn, pp_dtype_name(dt), rn,
                     model_param_name(tt->kind), tt->layer);
            if (!may_differ((pp_recompute_t)rc, tt->kind)) {
                EXPECT(memcmp(got, was, tt->numel * sizeof(float)) == 0, "%s: not none's bits",
                       what);
                continue;
            }
            for (size_t i = 0; i < tt->numel; i++)
                gd[i] = got[i];
            expect_stage_close(what, gd, ref.grads + tt->packed, tt->numel, dt, BF16_RTOL_BWD);
        }
        outcome_free(&o);
        outcome_free(&o_iw);
    }
    outcome_free(&base), outcome_free(&o), outcome_free(&o_iw);
    ref_stage_free(&ref);
    cudaStreamDestroy(s);
    free(x), free(dy), free(want), free(gd);
}

/* Offload round trip: F in slot 0, the slot's first stage_offload_bytes to pinned host memory,
 * back into slot 1 (poisoned first), dy into slot 1, B there: the bits of F + B in one slot. With
 * `keep` > 0 the stage keeps that many of a slot's tensors on the device (two kept regions): F
 * and B both join their slot with kept region 1 (not slot 0's own, region 0), and the copies move
 * the rest. */
static void run_offload(case_t kind, pp_dtype_t dt, pp_recompute_t rc, int keep)
{
    pp_stage_cfg_t cfg = make_cfg(kind, dt);
    cfg.recompute = rc;
    cfg.offload_keep = keep;
    cfg.n_keep_slots = keep > 0 ? 2 : 0;
    const size_t NC = (size_t)BATCH * SEQ * HIDDEN, bytes = stage_boundary_bytes(&cfg);
    const size_t off = stage_offload_bytes(&cfg);
    const char *cn = case_name(kind);
    double *x = (double *)malloc(NC * sizeof(double)), *dy = (double *)malloc(NC * sizeof(double));
    void *host = NULL, *junk = NULL;
    pp_stage_t *st = NULL;
    cudaStream_t s = NULL;
    outcome_t want = {0};
    REQUIRE(x && dy && off > 0 && off < stage_slot_bytes(&cfg));
    REQUIRE(keep == 0 || stage_keep_bytes(&cfg) > 0);
    REQUIRE(cudaMallocHost(&host, off) == cudaSuccess && cudaMallocHost(&junk, off) == cudaSuccess);
    memset(junk, 0xFF, off);
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    fill_random(x, NC, SEED + 31 + kind + 8 * dt, 1.5, dt);
    fill_random(dy, NC, SEED + 32 + kind + 8 * dt, 1e-2, dt);
    /* the want: F + B in one whole slot of a stage that keeps nothing apart */
    pp_stage_cfg_t whole = cfg;
    whole.offload_keep = whole.n_keep_slots = 0;
    REQUIRE(stage_init(&st, &whole) == PP_OK);
    int ok = run_outcome(st, 0, 0, x, dy, &whole, s, &want) == 0;
    stage_free(st);
    st = NULL;
    REQUIRE(stage_init(&st, &cfg) == PP_OK);
    float *g = (float *)malloc(stage_n_params(st) * sizeof(float));
    unsigned char *dx = (unsigned char *)calloc(1, bytes);
    double loss = 0.0;
    ok = ok && g && dx && stage_zero_grads(st, s) == PP_OK;
    if (ok) set_inputs(st, 0, x, dy, NC, dt);
    ok = ok && (keep == 0 || stage_slot_keep(st, 0, 1) == PP_OK);
    ok =
        ok && stage_forward(st, 0, MB_A, s) == PP_OK && stage_slot_to_host(st, 0, host, s) == PP_OK;
    ok = ok && stage_slot_from_host(st, 1, junk, s) == PP_OK &&
         stage_slot_from_host(st, 1, host, s) == PP_OK && poison_outputs(st, 1, bytes) == 0;
    ok = ok && cudaStreamSynchronize(s) == cudaSuccess;
    if (ok) set_inputs(st, 1, x, dy, NC, dt);
    /* slot 1's x came with the copy; set_inputs rewrites it with the same values */
    ok = ok && (keep == 0 || stage_slot_keep(st, 1, 1) == PP_OK);
    ok = ok && stage_backward(st, 1, MB_A, s) == PP_OK && cudaStreamSynchronize(s) == cudaSuccess;
    ok = ok && stage_grads_to_host(st, g) == PP_OK;
    if (ok && stage_slot_dx(st, 1))
        ok = cudaMemcpy(dx, stage_slot_dx(st, 1), bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
    if (ok && cfg.is_last) ok = stage_loss_read(st, &loss, s) == PP_OK;
    EXPECT(ok, "%s %s keep %d: the offload round trip failed", cn, stage_recompute_name(rc), keep);
    if (ok) {
        EXPECT(memcmp(g, want.grads, stage_n_params(st) * sizeof(float)) == 0,
               "%s %s %s keep %d: gradients after the round trip differ", cn, pp_dtype_name(dt),
               stage_recompute_name(rc), keep);
        EXPECT(memcmp(dx, want.dx, bytes) == 0 && loss == want.loss,
               "%s %s %s keep %d: dx or the loss after the round trip differ", cn,
               pp_dtype_name(dt), stage_recompute_name(rc), keep);
    }
    stage_free(st);
    outcome_free(&want);
    free(g), free(dx), free(x), free(dy);
    cudaFreeHost(host), cudaFreeHost(junk);
    cudaStreamDestroy(s);
}

static void test_offload_round_trip(void)
{
    if (tg_skip_reason()) SKIP("%s", tg_skip_reason());
    run_offload(CASE_SINGLE, PP_DTYPE_FP32, PP_RECOMPUTE_NONE, 0);
    run_offload(CASE_MIDDLE, PP_DTYPE_BF16, PP_RECOMPUTE_NONE, 0);
    run_offload(CASE_MIDDLE, PP_DTYPE_FP32, PP_RECOMPUTE_SELECTIVE, 0);
    run_offload(CASE_FIRST, PP_DTYPE_BF16, PP_RECOMPUTE_FULL, 0);
    /* part of each slot kept on the device: a few of its smallest tensors, and most of them */
    run_offload(CASE_MIDDLE, PP_DTYPE_FP32, PP_RECOMPUTE_NONE, 6);
    run_offload(CASE_SINGLE, PP_DTYPE_FP32, PP_RECOMPUTE_NONE, 30);
    run_offload(CASE_LAST, PP_DTYPE_BF16, PP_RECOMPUTE_SELECTIVE, 12);
}

/* The quick run (check.h) keeps the single stage (first and last at once), the middle one and
 * the stage without blocks; the first and last alone are left to the full run. */
static int quick_skips(case_t kind)
{
    return check_quick() && (kind == CASE_FIRST || kind == CASE_LAST);
}

#define CASE(kind, dt, name)                                                                       \
    static void name(void)                                                                         \
    {                                                                                              \
        if (tg_skip_reason()) SKIP("%s", tg_skip_reason());                                        \
        if (quick_skips(kind)) SKIP_IF_QUICK("the single stage covers the first and last");        \
        run_case(kind, dt);                                                                        \
    }
CASE(CASE_FIRST, PP_DTYPE_FP32, test_first_fp32)
CASE(CASE_MIDDLE, PP_DTYPE_FP32, test_middle_fp32)
CASE(CASE_LAST, PP_DTYPE_FP32, test_last_fp32)
CASE(CASE_SINGLE, PP_DTYPE_FP32, test_single_fp32)
CASE(CASE_FIRST, PP_DTYPE_BF16, test_first_bf16)
CASE(CASE_MIDDLE, PP_DTYPE_BF16, test_middle_bf16)
CASE(CASE_LAST, PP_DTYPE_BF16, test_last_bf16)
CASE(CASE_SINGLE, PP_DTYPE_BF16, test_single_bf16)
CASE(CASE_HEADS, PP_DTYPE_FP32, test_no_blocks_fp32)

/* The weight pass's separate reductions (PPSCHED_WGRAD=unfused) against the same reference: every
 * stage object of the case is built with the variable set. */
#define WGRAD_CASE(kind, dt, name)                                                                 \
    static void name(void)                                                                         \
    {                                                                                              \
        if (tg_skip_reason()) SKIP("%s", tg_skip_reason());                                        \
        if (dt == PP_DTYPE_FP32) SKIP_IF_QUICK("one separate-reduction case");                     \
        setenv("PPSCHED_WGRAD", "unfused", 1);                                                     \
        run_case(kind, dt);                                                                        \
        unsetenv("PPSCHED_WGRAD");                                                                 \
    }
WGRAD_CASE(CASE_MIDDLE, PP_DTYPE_FP32, test_wgrad_unfused_middle_fp32)
WGRAD_CASE(CASE_SINGLE, PP_DTYPE_BF16, test_wgrad_unfused_single_bf16)

/* The LayerNorm and residual-bias column sums read back in W (PPSCHED_LAYERNORM_BWD=unfused: I's
 * LayerNorm input gradients write no partial sums) against the same reference. */
#define LN_SUMS_CASE(kind, dt, name)                                                               \
    static void name(void)                                                                         \
    {                                                                                              \
        if (tg_skip_reason()) SKIP("%s", tg_skip_reason());                                        \
        if (dt == PP_DTYPE_FP32) SKIP_IF_QUICK("one case with the sums in W");                     \
        setenv("PPSCHED_LAYERNORM_BWD", "unfused", 1);                                             \
        run_case(kind, dt);                                                                        \
        unsetenv("PPSCHED_LAYERNORM_BWD");                                                         \
    }
LN_SUMS_CASE(CASE_SINGLE, PP_DTYPE_FP32, test_layernorm_sums_in_w_single_fp32)
LN_SUMS_CASE(CASE_MIDDLE, PP_DTYPE_BF16, test_layernorm_sums_in_w_middle_bf16)

/* Quick: the single stage in bf16 and the middle one in fp32 (each setting in each dtype once). */
#define RECOMPUTE_CASE(kind, dt, name)                                                             \
    static void name(void)                                                                         \
    {                                                                                              \
        if (tg_skip_reason()) SKIP("%s", tg_skip_reason());                                        \
        if ((kind == CASE_SINGLE) == (dt == PP_DTYPE_FP32))                                        \
            SKIP_IF_QUICK("one recompute case per dtype");                                         \
        run_recompute(kind, dt);                                                                   \
    }
RECOMPUTE_CASE(CASE_SINGLE, PP_DTYPE_FP32, test_recompute_single_fp32)
RECOMPUTE_CASE(CASE_MIDDLE, PP_DTYPE_FP32, test_recompute_middle_fp32)
RECOMPUTE_CASE(CASE_SINGLE, PP_DTYPE_BF16, test_recompute_single_bf16)
RECOMPUTE_CASE(CASE_MIDDLE, PP_DTYPE_BF16, test_recompute_middle_bf16)

/* Device memory taken by one pp_gemm_t beyond its workspace: the cuBLAS and cuBLASLt handles
 * own allocations. A first gemm_init absorbs the one-time library loading. Returns -1 on error. */
static double gemm_overhead_bytes(void)
{
    pp_gemm_t warm, g;
    size_t f0 = 0, f1 = 0, total = 0;
    memset(&warm, 0, sizeof warm), memset(&g, 0, sizeof g);
    if (gemm_init(&warm, 0) != PP_OK) return -1;
    double out = -1;
    if (cudaMemGetInfo(&f0, &total) == cudaSuccess && gemm_init(&g, 0) == PP_OK &&
        cudaMemGetInfo(&f1, &total) == cudaSuccess)
        out = (double)f0 - (double)f1 - (double)PP_GEMM_WORKSPACE_BYTES;
    gemm_free(&g);
    gemm_free(&warm);
    return out;
}

/* Sizes agree with what init allocates, and bad configurations are refused with a message. */
static void test_sizes_and_errors(void)
{
    if (tg_skip_reason()) SKIP("%s", tg_skip_reason());
    pp_stage_cfg_t c = make_cfg(CASE_MIDDLE, PP_DTYPE_BF16);
    size_t free0 = 0, free1 = 0, total = 0;
    pp_stage_t *st = NULL;
    c.seq_len = 256, c.hidden = 512, c.heads = 8, c.micro_batch_size = 4;
    /* The quick run (make sanitize) shares the GPU with other programs, whose allocations would
     * show in the free-memory difference: it builds the stage without weighing it. */
    const int weigh = !check_quick();
    double handles = weigh ? gemm_overhead_bytes() : 0.0;
    REQUIRE(handles >= 0, "gemm_init failed");
    REQUIRE(cudaMemGetInfo(&free0, &total) == cudaSuccess);
    REQUIRE(stage_init(&st, &c) == PP_OK);
    REQUIRE(cudaMemGetInfo(&free1, &total) == cudaSuccess);
    double want = (double)stage_device_bytes(&c);
    double got = (double)free0 - (double)free1 - handles;
    /* cudaMalloc rounds each of the stage's allocations (parameters, master, gradients, AdamW,
     * aux, workspace, cuBLAS workspace, slots, I->W buffers) up to 2 MiB pages. */
    const double pages = (double)(7 + c.n_slots + c.n_wgrad_slots) * (2 << 20);
    EXPECT(!weigh || (got >= want - (1 << 20) && got <= want + pages),
           "allocated %.1f MiB (less %.1f MiB of cuBLAS handles), the *_bytes say %.1f MiB",
           got / (1 << 20), handles / (1 << 20), want / (1 << 20));
    stage_free(st);
    st = NULL;
    /* The I->W buffers: taken by I, released by W; one too few is refused with a message. */
    c.n_wgrad_slots = 1;
    REQUIRE(stage_init(&st, &c) == PP_OK);
    EXPECT(stage_backward_input(st, 0, 0, 0) == PP_OK);
    EXPECT(stage_backward_input(st, 1, 0, 0) == PP_ERR_INTERNAL,
           "two I->W buffers from a pool of one");
    EXPECT(stage_backward_weight(st, 1, 0, 0) == PP_ERR_INTERNAL, "a W without its I");
    EXPECT(stage_backward_weight(st, 0, 0, 0) == PP_OK);
    EXPECT(stage_backward_input(st, 1, 0, 0) == PP_OK, "the buffer is free again after W");
    EXPECT(stage_backward_weight(st, 1, 0, 0) == PP_OK);
    EXPECT(cudaDeviceSynchronize() == cudaSuccess);
    stage_free(st);
    st = NULL;
    c.n_wgrad_slots = 2;
    c.heads = 7;
    EXPECT(stage_init(&st, &c) == PP_ERR_INPUT && st == NULL, "heads not dividing hidden accepted");
    c.heads = 8, c.n_slots = 0;
    EXPECT(stage_init(&st, &c) == PP_ERR_INPUT && st == NULL, "zero slots accepted");
    stage_free(NULL);
}

int main(void)
{
    RUN_AND_FREE(test_first_fp32);
    RUN_AND_FREE(test_middle_fp32);
    RUN_AND_FREE(test_last_fp32);
    RUN_AND_FREE(test_single_fp32);
    RUN_AND_FREE(test_first_bf16);
    RUN_AND_FREE(test_middle_bf16);
    RUN_AND_FREE(test_last_bf16);
    RUN_AND_FREE(test_single_bf16);
    RUN_AND_FREE(test_no_blocks_fp32);
    RUN_AND_FREE(test_wgrad_unfused_middle_fp32);
    RUN_AND_FREE(test_wgrad_unfused_single_bf16);
    RUN_AND_FREE(test_layernorm_sums_in_w_single_fp32);
    RUN_AND_FREE(test_layernorm_sums_in_w_middle_bf16);
    RUN_AND_FREE(test_recompute_single_fp32);
    RUN_AND_FREE(test_recompute_middle_fp32);
    RUN_AND_FREE(test_recompute_single_bf16);
    RUN_AND_FREE(test_recompute_middle_bf16);
    RUN_AND_FREE(test_offload_round_trip);
    RUN_AND_FREE(test_sizes_and_errors);
    return check_summary("test_stage");
}
