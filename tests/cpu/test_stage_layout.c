/*
 * test_stage_layout.c — the carving behind the stage's allocations (model/stage_layout.c), done
 * into host memory: for every recompute setting, attention path and stage position, the views the
 * forward and the backward use have every part they touch, each inside its allocation, no two
 * parts of one view overlapping, the slot's backward-read parts inside its offload range, and the
 * boundary buffers outside it; and, with part of the slot kept on the device (offload_keep), each
 * backward-read part either kept or moved, none kept larger than one moved.
 */
#include "tests/check.h"
#include "model/kernel_sizes.h"
#include "model/stage_layout.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_PTRS (sizeof(block_bufs_t) / sizeof(void *))

typedef struct range {
    const char *lo, *hi; /* [lo, hi) */
} range_t;

/* A tiny model where both attention paths can be chosen: bf16, d = 64, T = 64 takes the fused one;
 * PPSCHED_ATTENTION=unfused the other. */
static pp_stage_cfg_t cfg_of(int first, int last, int layers, pp_recompute_t rc)
{
    pp_stage_cfg_t c = {.hidden = 128, .heads = 2, .seq_len = 64, .vocab = 96};
    c.micro_batch_size = 2;
    c.n_layers = layers;
    c.total_layers = 8;
    c.is_first = first;
    c.is_last = last;
    c.dtype = PP_DTYPE_BF16;
    c.n_slots = 1;
    c.recompute = rc;
    return c;
}

/* Bytes of each part of a view, by field index (the order of block_bufs_t). */
static size_t part_size(const pp_stage_cfg_t *c, size_t field)
{
    const size_t N = (size_t)c->micro_batch_size * c->seq_len, C = (size_t)c->hidden;
    const size_t es = pp_dtype_size(c->dtype), f = sizeof(float);
    const size_t B = (size_t)c->micro_batch_size, H = (size_t)c->heads, T = (size_t)c->seq_len;
    const size_t blocks = B * ((T + 127) / 128); /* d_qkv_sum's rows (d = 64) */
    const size_t chunks = (size_t)layernorm_bwd_input_colsum_rows((int)N); /* d_ln*_sum's */
    /* ln1 mean rstd qkv lse q k v att atty x2 ln2 mean rstd fc gelu d_fc d_ln2 d_x2 d_qkv d_ln1
     * d_qkv_sum d_ln2_sum d_ln1_sum */
    const size_t bytes[] = {N * C * es,
                            N * f,
                            N * f,
                            3 * N * C * es,
                            B * H * T * f,
                            N * C * es,
                            N * C * es,
                            N * C * es,
                            B * H * T * T * es,
                            N * C * es,
                            N * C * es,
                            N * C * es,
                            N * f,
                            N * f,
                            4 * N * C * es,
                            4 * N * C * es,
                            4 * N * C * es,
                            N * C * es,
                            N * C * es,
                            3 * N * C * es,
                            N * C * es,
                            blocks * 3 * C * f,
                            3 * chunks * C * f,
                            3 * chunks * C * f};
    _Static_assert(sizeof bytes / sizeof bytes[0] == N_PTRS, "a size for every part");
    return bytes[field];
}

static int inside(const void *p, size_t n, range_t r)
{
    const char *c = (const char *)p;
    return c >= r.lo && c + n <= r.hi;
}

/* Check one view: the parts of the path present, none overlapping another, each inside one of the
 * allocations. Returns the number of problems. */
static int check_view(const pp_stage_cfg_t *c, int fused, const block_bufs_t *v, const range_t *a,
                      int n_a, const char *what)
{
    void *const *p = (void *const *)v;
    /* fields of the path: 3 qkv, 4 lse, 21 d_qkv_sum (fused; d = 64 here); 5, 6, 7 q k v, 8 att
     * (unfused) */
    int bad = 0;
    for (size_t i = 0; i < N_PTRS; i++) {
        const int fused_only = i == 3 || i == 4 || i == 21, unfused_only = i >= 5 && i <= 8;
        const int wanted = fused ? !unfused_only : !fused_only;
        if (!wanted) {
            bad += p[i] != NULL;
            continue;
        }
        if (!p[i]) {
            fprintf(stderr, "    %s: part %zu missing\n", what, i);
            bad++;
            continue;
        }
        int in = 0;
        for (int k = 0; k < n_a; k++)
            in |= inside(p[i], part_size(c, i), a[k]);
        if (!in) fprintf(stderr, "    %s: part %zu outside every allocation\n", what, i);
        bad += !in;
        for (size_t j = 0; j < i; j++) {
            if (!p[j]) continue;
            const char *x = (const char *)p[i], *y = (const char *)p[j];
            if (x < y + part_size(c, j) && y < x + part_size(c, i)) {
                fprintf(stderr, "    %s: parts %zu and %zu overlap\n", what, i, j);
                bad++;
            }
        }
    }
    return bad;
}

/* The part at p of n bytes, kept (in range k) or moved (in range off): the largest kept and the
 * smallest moved so far into *most_kept, *least_moved. Returns 1 for a part in neither. */
static int kept_or_moved(const void *p, size_t n, range_t k, range_t off, size_t *most_kept,
                         size_t *least_moved)
{
    if (inside(p, n, k)) {
        if (n > *most_kept) *most_kept = n;
        return 0;
    }
    if (n < *least_moved) *least_moved = n;
    return !inside(p, n, off);
}

/* Carve a slot (its kept region and ring slot, keeping `keep` of its parts), an I→W buffer and the
 * workspace into host memory and check every view. */
static void check_layout(int first, int last, int layers, pp_recompute_t rc, int fused, int keep)
{
    pp_stage_cfg_t c = cfg_of(first, last, layers, rc);
    const int L = layers;
    slot_split_t sp, whole;
    stage_layout_slot(&c, fused, NULL, NULL, NULL, &whole);
    c.offload_keep = keep;
    const size_t sb = stage_layout_slot(&c, fused, NULL, NULL, NULL, &sp);
    const size_t gb = stage_layout_wgrad(&c, fused, NULL, NULL);
    const size_t wb = stage_layout_workspace(&c, fused, NULL, NULL);
    const size_t kept = sp.moved;
    EXPECT(sb == sp.ring && (keep > 0) == (sp.kept > 0) && sp.moved > 0 &&
               sp.moved <= whole.moved && sp.kept + sp.moved >= whole.moved &&
               sp.ring - sp.moved == whole.ring - whole.moved,
           "keep %d: kept %zu moved %zu ring %zu; whole: moved %zu ring %zu", keep, sp.kept,
           sp.moved, sp.ring, whole.moved, whole.ring);
    char *smem = malloc(sb + 256), *gmem = malloc(gb + 256), *wmem = malloc(wb + 256);
    char *kmem = malloc(sp.kept + 256);
    slot_t s = {0};
    wgrad_t g = {0};
    workspace_t w;
    memset(&w, 0, sizeof w);
    s.res = calloc((size_t)L + 1, sizeof(void *));
    s.dres = calloc((size_t)L + 1, sizeof(void *));
    s.blocks = calloc((size_t)L + 1, sizeof(block_bufs_t));
    g.dres = calloc((size_t)L + 1, sizeof(void *));
    g.blocks = calloc((size_t)L + 1, sizeof(block_bufs_t));
    REQUIRE(smem && gmem && wmem && kmem && s.res && s.dres && s.blocks && g.dres && g.blocks);
    /* the device allocations are 256-byte aligned; so are these bases */
    char *kbase = kmem + (256 - (uintptr_t)kmem % 256) % 256;
    char *sbase = smem + (256 - (uintptr_t)smem % 256) % 256;
    char *gbase = gmem + (256 - (uintptr_t)gmem % 256) % 256;
    char *wbase = wmem + (256 - (uintptr_t)wmem % 256) % 256;
    EXPECT(stage_layout_slot(&c, fused, kbase, sbase, &s, NULL) == sb);
    EXPECT(stage_layout_wgrad(&c, fused, gbase, &g) == gb);
    EXPECT(stage_layout_workspace(&c, fused, wbase, &w) == wb);
    const range_t slot = {sbase, sbase + sb}, off = {sbase, sbase + kept};
    const range_t grad = {gbase, gbase + gb}, work = {wbase, wbase + wb};
    const range_t held = {kbase, kbase + sp.kept};
    const range_t all[4] = {slot, grad, work, held};
    const size_t NC = (size_t)c.micro_batch_size * c.seq_len * c.hidden * 2;
    size_t most_kept = 0, least_moved = (size_t)-1;
    char what[128];
    int bad = 0;
    for (int l = 0; l < L; l++) {
        block_bufs_t v;
        snprintf(what, sizeof what, "first %d last %d L %d %s %s block %d", first, last, L,
                 stage_recompute_name(rc), fused ? "fused" : "unfused", l);
        stage_layout_view(&c, fused, &s.blocks[l], &w.rebuilt, &g.blocks[l], &v);
        bad += check_view(&c, fused, &v, all, 4, what);
        stage_layout_view(&c, fused, &s.blocks[l], &w.rebuilt, &w.grad, &v);
        bad += check_view(&c, fused, &v, all, 4, what);
        /* what the slot keeps for the backward is moved (in the offload range) or kept on the
         * device; the block's input too, but a received stage input x always moves */
        void *const *kp = (void *const *)&s.blocks[l];
        for (size_t i = 0; i < N_PTRS; i++)
            if (kp[i])
                bad += kept_or_moved(kp[i], part_size(&c, i), held, off, &most_kept, &least_moved);
        if (l == 0 && !first)
            bad += !inside(s.res[l], NC, off);
        else
            bad += kept_or_moved(s.res[l], NC, held, off, &most_kept, &least_moved);
        if (l > 0) bad += !inside(g.dres[l], NC, grad);
    }
    /* y unless the last stage reads it, dx and dy: in the slot, after the offload range */
    if (!last) bad += !inside(s.res[L], NC, slot) || inside(s.res[L], 1, off);
    if (last) bad += kept_or_moved(s.res[L], NC, held, off, &most_kept, &least_moved);
    bad += !inside(s.dres[0], NC, slot) || inside(s.dres[0], 1, off);
    bad += !inside(s.dres[L], NC, slot) || inside(s.dres[L], 1, off);
    if (L > 0) bad += !inside(w.dres[0], NC, work) || !inside(w.dres[1], NC, work);
    if (last)
        bad += (!inside(s.logits, 1, off) && !inside(s.logits, 1, held)) ||
               !inside(g.d_lnf, NC, grad) || !inside(w.d_lnf, NC, work);
    EXPECT(most_kept <= least_moved || least_moved == (size_t)-1,
           "keep %d: a kept part of %zu bytes, a moved one of %zu", keep, most_kept, least_moved);
    EXPECT(bad == 0, "first %d last %d L %d %s %s keep %d: %d layout problems", first, last, L,
           stage_recompute_name(rc), fused ? "fused" : "unfused", keep, bad);
    free(smem), free(gmem), free(wmem), free(kmem);
    free(s.res), free(s.dres), free(s.blocks), free(g.dres), free(g.blocks);
}

static void test_every_layout(void)
{
    for (int rc = 0; rc < PP_RECOMPUTE_COUNT; rc++)
        for (int fused = 0; fused < 2; fused++)
            for (int pos = 0; pos < 4; pos++) {
                const int first = pos == 0 || pos == 3, last = pos == 2 || pos == 3;
                for (int keep = 0; keep < 4; keep++) /* whole, some parts, most, every one */
                    check_layout(first, last, 3, (pp_recompute_t)rc, fused,
                                 (int[]){0, 5, 20, 1000}[keep]);
                check_layout(first, last, 1, (pp_recompute_t)rc, fused, 0);
            }
    check_layout(1, 1, 0, PP_RECOMPUTE_NONE, 1, 0); /* embedding straight into the head */
    check_layout(1, 1, 0, PP_RECOMPUTE_NONE, 1, 2);
}

/* The environment switches: each takes its two values, anything else is an input error. */
static void test_env_switches(void)
{
    static const char *const vars[] = {"PPSCHED_ATTENTION", "PPSCHED_WGRAD",
                                       "PPSCHED_LAYERNORM", "PPSCHED_FLASH_TILE",
                                       "PPSCHED_FLASH_BWD", "PPSCHED_LAYERNORM_BWD"};
    static const char *const ok[][2] = {{"fused", "unfused"}, {"fused", "unfused"},
                                        {"fused", "unfused"}, {"128", "64"},
                                        {"fused", "unfused"}, {"fused", "unfused"}};
    static const char *const bad[] = {"flash", "", "32", "Fused"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        for (int v = 0; v < 2; v++) {
            setenv(vars[i], ok[i][v], 1);
            EXPECT(stage_attention_env_check() == PP_OK, "%s=%s refused", vars[i], ok[i][v]);
        }
        fprintf(stderr, "  (the next %zu errors are expected)\n", sizeof bad / sizeof bad[0]);
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            setenv(vars[i], bad[b], 1);
            EXPECT(stage_attention_env_check() == PP_ERR_INPUT, "%s='%s' accepted", vars[i],
                   bad[b]);
        }
        unsetenv(vars[i]);
    }
    EXPECT(stage_attention_env_check() == PP_OK, "nothing set, refused");
}

int main(void)
{
    RUN(test_every_layout);
    RUN(test_env_switches);
    return check_summary("test_stage_layout");
}
