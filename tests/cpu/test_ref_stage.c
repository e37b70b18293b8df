/*
 * test_ref_stage.c — checks the CPU reference of a stage (tests/ref/ref_stage.c) and the pure
 * functions it shares with the GPU stage (stages/data.h, model/model.h): gradients against
 * central finite differences of the loss of a whole tiny model, the synthetic data's properties,
 * and that parameter init does not depend on how the model is split into stages.
 */
#include "tests/check.h"
#include "tests/ref/ref_stage.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SEED 0x5eed1234abcdULL

static uint64_t rng_state = 42;
static uint64_t rng_next(void)
{
    return pp_mix64(rng_state++);
}

static pp_model_shape_t tiny_shape(int n_layers, int first_layer, int total, int first, int last)
{
    pp_model_shape_t s = {.hidden = 16, .heads = 2, .seq_len = 8, .vocab = 32, .batch = 2};
    s.n_layers = n_layers;
    s.first_layer = first_layer;
    s.total_layers = total;
    s.is_first = first;
    s.is_last = last;
    return s;
}

/* --- synthetic data -----------------------------------------------------------------------------
 */

static void test_data_permutation(void)
{
    int V = 1000;
    int32_t *perm = malloc(V * sizeof *perm), *again = malloc(V * sizeof *again);
    int *seen = calloc(V, sizeof *seen);
    REQUIRE(perm && again && seen);
    data_perm_fill(SEED, V, perm);
    data_perm_fill(SEED, V, again);
    int fixed = 0, bad = 0;
    for (int i = 0; i < V; i++) {
        if (perm[i] < 0 || perm[i] >= V)
            bad++;
        else
            seen[perm[i]]++;
        fixed += perm[i] == i;
    }
    for (int i = 0; i < V; i++)
        bad += seen[i] != 1;
    EXPECT(bad == 0, "%d values out of range or repeated", bad);
    EXPECT(memcmp(perm, again, V * sizeof *perm) == 0, "permutation not deterministic");
    EXPECT(fixed < 10, "%d fixed points: not a random permutation", fixed);
    data_perm_fill(SEED + 1, V, again);
    EXPECT(memcmp(perm, again, V * sizeof *perm) != 0, "another seed gave the same permutation");
    free(perm), free(again), free(seen);
}

static void test_data_sequences(void)
{
    int V = 512, T = 256, B = 64;
    int32_t *perm = malloc(V * sizeof *perm);
    REQUIRE(perm);
    data_perm_fill(SEED, V, perm);
    long jumps = 0, steps = 0, not_next = 0, out_of_range = 0, differ_mb = 0;
    for (int b = 0; b < B; b++) {
        int prev = -1;
        for (int i = 0; i < T; i++) {
            int t = data_token(SEED, perm, V, 7, b, i);
            int tgt = data_target(SEED, perm, V, T, 7, b, i);
            out_of_range += t < 0 || t >= V || tgt < 0 || tgt >= V;
            if (t != data_token(SEED, perm, V, 7, b, i)) not_next++; /* determinism */
            if (i + 1 < T)
                not_next += tgt != data_token(SEED, perm, V, 7, b, i + 1);
            else
                not_next += tgt != perm[t];
            if (prev >= 0) {
                steps++;
                jumps += t != perm[prev];
            }
            differ_mb += t != data_token(SEED, perm, V, 8, b, i);
            prev = t;
        }
    }
    EXPECT(out_of_range == 0, "%ld tokens outside [0, V)", out_of_range);
    EXPECT(not_next == 0, "%ld targets are not the next token (or not deterministic)", not_next);
    /* A jump lands on f(t) by chance with probability 1/V: expect steps/8 * (1 - 1/V) jumps,
     * standard deviation sqrt(steps * 1/8 * 7/8) ~ 42 for 16320 steps. */
    double frac = (double)jumps / steps;
    EXPECT(frac > 0.110 && frac < 0.140, "jump fraction %.4f, want ~0.125", frac);
    EXPECT(differ_mb > B * T * 9 / 10, "micro-batches 7 and 8 share %ld of %d tokens",
           (long)B * T - differ_mb, B * T);
    free(perm);
}

/* --- init --------------------------------------------------------------------------------------
 */

static void test_init_across_splits(void)
{
    ref_stage_t whole, s0, s1;
    pp_model_shape_t sw = tiny_shape(4, 0, 4, 1, 1);
    pp_model_shape_t sa = tiny_shape(2, 0, 4, 1, 0), sb = tiny_shape(2, 2, 4, 0, 1);
    REQUIRE(ref_stage_init(&whole, &sw, SEED) == 0);
    REQUIRE(ref_stage_init(&s0, &sa, SEED) == 0);
    REQUIRE(ref_stage_init(&s1, &sb, SEED) == 0);
    EXPECT(whole.n_params == s0.n_params + s1.n_params, "%zu != %zu + %zu", whole.n_params,
           s0.n_params, s1.n_params);
    int mismatched = 0, nonconst = 0;
    for (int k = PP_PARAM_LN1_W; k <= PP_PARAM_FC2_B; k++) {
        const pp_param_tensor_t *t = &whole.tensors[model_tensor_index(&sw, k, 3)];
        const double *a = ref_stage_param(&whole, k, 3), *b = ref_stage_param(&s1, k, 1);
        for (size_t i = 0; i < t->numel; i++) {
            mismatched += a[i] != b[i];
            nonconst += a[i] != a[0];
        }
        EXPECT(t->layer == 3, "tensor %s has layer %d", model_param_name(k), t->layer);
    }
    EXPECT(mismatched == 0, "%d values of layer 3 differ between the splits", mismatched);
    EXPECT(nonconst > 0, "layer 3 is constant");
    /* The whole model and the split give the same loss, to the bit (same operations). */
    double *y = malloc(sizeof(double) * 2 * 8 * 16);
    REQUIRE(y);
    double lw = ref_stage_forward(&whole, NULL, 3, NULL);
    ref_stage_forward(&s0, NULL, 3, y);
    double ls = ref_stage_forward(&s1, y, 3, NULL);
    EXPECT(lw == ls, "one stage: loss %.17g, two stages: %.17g", lw, ls);
    EXPECT(fabs(lw - log(32.0)) < 0.1, "initial loss %.4f far from ln V = %.4f", lw, log(32.0));
    /* Different layers differ; the residual projections are scaled by 1/sqrt(2 * layers). */
    const double *q0 = ref_stage_param(&whole, PP_PARAM_QKV_W, 0);
    const double *q1 = ref_stage_param(&whole, PP_PARAM_QKV_W, 1);
    EXPECT(memcmp(q0, q1, 16 * sizeof(double)) != 0, "layers 0 and 1 have equal qkv_w");
    double ss_fc = 0, ss_fc2 = 0;
    const double *fc = ref_stage_param(&whole, PP_PARAM_FC_W, 0);
    const double *fc2 = ref_stage_param(&whole, PP_PARAM_FC2_W, 0);
    for (int i = 0; i < 64 * 16; i++)
        ss_fc += fc[i] * fc[i], ss_fc2 += fc2[i] * fc2[i];
    double sd_fc = sqrt(ss_fc / 1024), sd_fc2 = sqrt(ss_fc2 / 1024);
    EXPECT(fabs(sd_fc - 0.02) < 0.002, "fc_w std %.5f, want 0.02", sd_fc);
    EXPECT(fabs(sd_fc2 - 0.02 / sqrt(8.0)) < 0.001, "fc2_w std %.5f, want %.5f", sd_fc2,
           0.02 / sqrt(8.0));
    EXPECT(ref_stage_param(&whole, PP_PARAM_LN1_W, 2)[5] == 1.0, "ln1_w not 1");
    EXPECT(ref_stage_param(&whole, PP_PARAM_FC_B, 2)[5] == 0.0, "fc_b not 0");
    free(y);
    ref_stage_free(&whole), ref_stage_free(&s0), ref_stage_free(&s1);
}

/* --- gradients by finite differences ------------------------------------------------------------
 */

/* The tiny model as three stages: first (embedding + block 0), middle (block 1), last (head
 * only, 0 blocks), which together hold every tensor kind. */
typedef struct chain {
    ref_stage_t st[3];
    double *x1, *x2, *d2, *d1;
} chain_t;

static int chain_init(chain_t *c)
{
    memset(c, 0, sizeof *c);
    pp_model_shape_t s0 = tiny_shape(1, 0, 2, 1, 0), s1 = tiny_shape(1, 1, 2, 0, 0),
                     s2 = tiny_shape(0, 2, 2, 0, 1);
    size_t NC = 2 * 8 * 16;
    if (ref_stage_init(&c->st[0], &s0, SEED) || ref_stage_init(&c->st[1], &s1, SEED) ||
        ref_stage_init(&c->st[2], &s2, SEED))
        return -1;
    c->x1 = calloc(NC, sizeof(double)), c->x2 = calloc(NC, sizeof(double));
    c->d2 = calloc(NC, sizeof(double)), c->d1 = calloc(NC, sizeof(double));
    return c->x1 && c->x2 && c->d2 && c->d1 ? 0 : -1;
}

static void chain_free(chain_t *c)
{
    for (int i = 0; i < 3; i++)
        ref_stage_free(&c->st[i]);
    free(c->x1), free(c->x2), free(c->d2), free(c->d1);
}

/* Loss of the model on micro-batch mb; when x1 is given, the middle stage starts from it. */
static double chain_loss(chain_t *c, int mb, const double *x1)
{
    if (!x1) {
        ref_stage_forward(&c->st[0], NULL, mb, c->x1);
        x1 = c->x1;
    }
    ref_stage_forward(&c->st[1], x1, mb, c->x2);
    return ref_stage_forward(&c->st[2], c->x2, mb, NULL);
}

static void chain_backward(chain_t *c, double scale)
{
    ref_stage_backward(&c->st[2], NULL, scale, c->d2);
    ref_stage_backward(&c->st[1], c->d2, scale, c->d1);
    ref_stage_backward(&c->st[0], c->d1, scale, NULL);
}

static void test_gradients_finite_difference(void)
{
    chain_t c;
    REQUIRE(chain_init(&c) == 0, "out of memory");
    const int mb = 5;
    const double scale = 0.25, eps = 1e-5;
    chain_loss(&c, mb, NULL);
    chain_backward(&c, scale);
    int kinds_seen[PP_PARAM_KIND_COUNT] = {0};
    int checked = 0, small = 0;
    for (int si = 0; si < 3; si++) {
        ref_stage_t *st = &c.st[si];
        for (int ti = 0; ti < st->n_tensors; ti++) {
            const pp_param_tensor_t *t = &st->tensors[ti];
            kinds_seen[t->kind] = 1;
            for (int k = 0; k < 4; k++) {
                size_t idx = t->packed + rng_next() % t->numel;
                if (t->kind == PP_PARAM_WTE) /* a row that the micro-batch uses */
                    idx = t->packed + (size_t)st->tokens[rng_next() % 16] * 16 + rng_next() % 16;
                double p0 = st->params[idx];
                st->params[idx] = p0 + eps;
                double lp = chain_loss(&c, mb, NULL);
                st->params[idx] = p0 - eps;
                double lm = chain_loss(&c, mb, NULL);
                st->params[idx] = p0;
                double fd = scale * (lp - lm) / (2 * eps);
                double g = st->grads[idx];
                EXPECT(fabs(g - fd) <= 1e-8 + 1e-5 * fabs(fd),
                       "stage %d %s[%zu]: grad %.10g, finite difference %.10g", si,
                       model_param_name(t->kind), idx - t->packed, g, fd);
                checked++;
                small += fabs(fd) < 1e-9;
            }
        }
    }
    for (int k = 0; k < PP_PARAM_KIND_COUNT; k++)
        EXPECT(kinds_seen[k], "tensor kind %s not covered", model_param_name(k));
    EXPECT(small < checked / 4, "%d of %d gradients are ~0: the check proves little", small,
           checked);

    /* dx of the middle stage, against the loss as a function of its input. */
    size_t NC = 2 * 8 * 16;
    double *x = malloc(NC * sizeof *x);
    REQUIRE(x);
    memcpy(x, c.x1, NC * sizeof *x);
    for (int k = 0; k < 12; k++) {
        size_t i = rng_next() % NC;
        double x0 = x[i];
        x[i] = x0 + eps;
        double lp = chain_loss(&c, mb, x);
        x[i] = x0 - eps;
        double lm = chain_loss(&c, mb, x);
        x[i] = x0;
        double fd = scale * (lp - lm) / (2 * eps);
        EXPECT(fabs(c.d1[i] - fd) <= 1e-9 + 1e-5 * fabs(fd), "middle dx[%zu]: %.10g vs fd %.10g", i,
               c.d1[i], fd);
    }
    free(x);
    chain_free(&c);
}

static void test_gradients_accumulate(void)
{
    chain_t c;
    REQUIRE(chain_init(&c) == 0, "out of memory");
    ref_stage_t *st = &c.st[1];
    size_t n = st->n_params;
    double *g1 = malloc(n * sizeof *g1), *g2 = malloc(n * sizeof *g2);
    REQUIRE(g1 && g2);
    chain_loss(&c, 1, NULL);
    chain_backward(&c, 0.5);
    memcpy(g1, st->grads, n * sizeof *g1);
    for (int i = 0; i < 3; i++)
        ref_stage_zero_grads(&c.st[i]);
    chain_loss(&c, 2, NULL);
    chain_backward(&c, 0.5);
    memcpy(g2, st->grads, n * sizeof *g2);
    chain_loss(&c, 1, NULL);
    chain_backward(&c, 0.5); /* grads now hold mb 2 + mb 1 */
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += fabs(st->grads[i] - (g1[i] + g2[i])) > 1e-15;
    EXPECT(bad == 0, "%d gradients are not the sum over two micro-batches", bad);
    int differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += g1[i] != g2[i];
    EXPECT(differ > (int)n / 2, "two micro-batches gave nearly equal gradients");
    free(g1), free(g2);
    chain_free(&c);
}

static void test_adamw_first_step(void)
{
    /* Step 1 with no decay moves each parameter by -lr * g / (|g| + eps). */
    pp_param_tensor_t t[2] = {
        {.kind = PP_PARAM_FC_W, .rows = 2, .cols = 2, .numel = 4, .packed = 0, .decay = 1},
        {.kind = PP_PARAM_FC_B, .rows = 1, .cols = 2, .numel = 2, .packed = 4, .decay = 0}};
    double p[6] = {0.5, -0.25, 1.0, 2.0, 0.125, -3.0}, p0[6];
    double g[6] = {0.1, -0.2, 1e-3, 4.0, -0.5, 0.0}, m[6] = {0}, v[6] = {0};
    memcpy(p0, p, sizeof p);
    ref_adamw_step(t, 2, p, g, m, v, 1e-2, 0.9, 0.95, 1e-8, 0.0, 1);
    for (int i = 0; i < 6; i++)
        EXPECT_NEAR(p[i], p0[i] - 1e-2 * g[i] / (fabs(g[i]) + 1e-8), 1e-12, 0);
    /* With decay: matrices shrink by lr * wd * p in addition; vectors do not. */
    memcpy(p, p0, sizeof p);
    memset(m, 0, sizeof m), memset(v, 0, sizeof v);
    ref_adamw_step(t, 2, p, g, m, v, 1e-2, 0.9, 0.95, 1e-8, 0.1, 1);
    EXPECT_NEAR(p[0], p0[0] - 1e-2 * (g[0] / (fabs(g[0]) + 1e-8) + 0.1 * p0[0]), 1e-12, 0);
    EXPECT_NEAR(p[5], p0[5], 1e-15, 0);
}

int main(void)
{
    RUN(test_data_permutation);
    RUN(test_data_sequences);
    RUN(test_init_across_splits);
    RUN(test_gradients_finite_difference);
    RUN(test_gradients_accumulate);
    RUN(test_adamw_first_step);
    return check_summary("test_ref_stage");
}
