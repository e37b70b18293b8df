/*
 * stage_layout.c — the layout of a stage's device memory and the sizes derived from it (contract in
 * stage_size.h and stage_layout.h). One function per allocation walks its pieces in order: with a
 * NULL base it measures, with the allocation it carves, so planned and allocated bytes agree. A
 * slot is carved from two bases, its kept region (the tensors cfg->offload_keep keeps on the
 * device) and its ring slot (the rest), by one walk that decides where each tensor goes.
 * Plain C11: part of the scheduler core's library.
 */
#include "stage_layout.h"

#include "kernel_sizes.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int stage_attention_fused(const pp_stage_cfg_t *cfg)
{
    const char *env = getenv("PPSCHED_ATTENTION");
    if (env && strcmp(env, "unfused") == 0) return 0;
    if (cfg->heads <= 0 || cfg->hidden % cfg->heads != 0) return 0;
    return attention_flash_supported(cfg->seq_len, cfg->hidden / cfg->heads, cfg->dtype);
}

/* The environment switches of a stage: the variable, its two values (the default path first, then
 * the one before it) and what each selects. */
typedef struct env_switch {
    const char *var;
    const char *value[2], *what[2];
} env_switch_t;

static const env_switch_t ENV_SWITCHES[] = {
    {"PPSCHED_ATTENTION",
     {"fused", "unfused"},
     {"the default, where supported", "GEMMs + softmax"}},
    {"PPSCHED_WGRAD", {"fused", "unfused"}, {"the default", "one reduction per GEMM"}},
    {"PPSCHED_LAYERNORM", {"fused", "unfused"}, {"the default", "the three-pass forward"}},
    {"PPSCHED_FLASH_TILE", {"128", "64"}, {"the default: 128 query rows a CTA", "64 rows a CTA"}},
    {"PPSCHED_FLASH_MMA",
     {"wgmma", "sync"},
     {"the default on compute capability 9.0: attention on warpgroup MMA and TMA (the backward "
      "where no column sums are asked)",
      "the mma.sync kernels of other GPUs"}},
    {"PPSCHED_FLASH_BWD",
     {"fused", "unfused"},
     {"the default: Dr and the QKV column sums in the 128-row backward",
      "the dot kernel first; W sums d_qkv"}},
    {"PPSCHED_LAYERNORM_BWD",
     {"fused", "unfused"},
     {"the default: the LayerNorm and residual-bias column sums in I's input gradient",
      "W sums d_ln2, d_ln1 and their inputs"}},
};

pp_status_t stage_attention_env_check(void)
{
    for (size_t i = 0; i < sizeof ENV_SWITCHES / sizeof ENV_SWITCHES[0]; i++) {
        const env_switch_t *e = &ENV_SWITCHES[i];
        const char *env = getenv(e->var);
        if (env && strcmp(env, e->value[0]) != 0 && strcmp(env, e->value[1]) != 0)
            PP_REFUSE(PP_ERR_INPUT, "%s=%s: unknown value (allowed: %s (%s), %s (%s))", e->var, env,
                      e->value[0], e->what[0], e->value[1], e->what[1]);
    }
    return PP_OK;
}

int stage_wgrad_fused(void)
{
    const char *env = getenv("PPSCHED_WGRAD");
    return !(env && strcmp(env, "unfused") == 0);
}

int stage_layernorm_sums(void)
{
    const char *env = getenv("PPSCHED_LAYERNORM_BWD");
    return stage_wgrad_fused() && !(env && strcmp(env, "unfused") == 0);
}

int stage_flash_bwd_fused(const pp_stage_cfg_t *cfg)
{
    return stage_attention_fused(cfg) && attention_flash_bwd_colsum_ok(cfg->hidden / cfg->heads);
}

/* ---- the parts of a block -------------------------------------------------------------- */

/* The size of a part, from the shape. SZ_QKV_SUM is 0 bytes where the flash backward writes no
 * column sums (d != 64): such a part is not carved and its pointer stays NULL. SZ_LN_SUM: a
 * LayerNorm input gradient's column sums (layernorm_bwd_input_colsum_bytes). */
typedef enum part_size {
    SZ_NC,
    SZ_3NC,
    SZ_4NC,
    SZ_ROWS,
    SZ_LSE,
    SZ_TT,
    SZ_QKV_SUM,
    SZ_LN_SUM
} part_size_t;

/* Which attention path has the part. */
enum { ON_FUSED = 1, ON_UNFUSED = 2, ON_BOTH = 3 };

/* One part of a block's buffers. `rebuilt[r]` says, for a part F saves, that recompute setting r
 * does not keep it in the slot: the backward rebuilds it in the workspace's rebuild area. */
typedef struct block_part {
    const char *name;
    size_t field; /* offsetof(block_bufs_t, ...) */
    part_size_t size;
    int paths;
    unsigned char rebuilt[PP_RECOMPUTE_COUNT]; /* none, selective, full */
} block_part_t;

#define PART(f) #f, offsetof(block_bufs_t, f)

/* What F saves for the backward, in the order of a slot. Selective drops what is cheap to
 * rebuild and large (LayerNorm outputs from the input and the statistics, GELU from its input,
 * P from q and k); full keeps none of it (block inputs are res[], always kept). */
static const block_part_t SAVED_PARTS[] = {
    {PART(ln1), SZ_NC, ON_BOTH, {0, 1, 1}},        {PART(ln1_mean), SZ_ROWS, ON_BOTH, {0, 0, 1}},
    {PART(ln1_rstd), SZ_ROWS, ON_BOTH, {0, 0, 1}}, {PART(qkv), SZ_3NC, ON_FUSED, {0, 0, 1}},
    {PART(lse), SZ_LSE, ON_FUSED, {0, 0, 1}},      {PART(q), SZ_NC, ON_UNFUSED, {0, 0, 1}},
    {PART(k), SZ_NC, ON_UNFUSED, {0, 0, 1}},       {PART(v), SZ_NC, ON_UNFUSED, {0, 0, 1}},
    {PART(att), SZ_TT, ON_UNFUSED, {0, 1, 1}},     {PART(atty), SZ_NC, ON_BOTH, {0, 0, 1}},
    {PART(x2), SZ_NC, ON_BOTH, {0, 0, 1}},         {PART(ln2), SZ_NC, ON_BOTH, {0, 1, 1}},
    {PART(ln2_mean), SZ_ROWS, ON_BOTH, {0, 0, 1}}, {PART(ln2_rstd), SZ_ROWS, ON_BOTH, {0, 0, 1}},
    {PART(fc), SZ_4NC, ON_BOTH, {0, 0, 1}},        {PART(gelu), SZ_4NC, ON_BOTH, {0, 1, 1}},
};

/* What I writes for W, in the order of an I→W buffer. d_qkv_sum: the QKV bias gradient's partial
 * sums, written by the flash backward of I at d = 64 (reserved too where PPSCHED_FLASH_TILE=64,
 * PPSCHED_FLASH_BWD=unfused or PPSCHED_WGRAD=unfused leave it unwritten, so that sizes never
 * depend on the environment). d_ln2_sum, d_ln1_sum: the LayerNorm input gradients' column sums
 * (LN2's with fc2's bias gradient, LN1's with proj's), reserved too where PPSCHED_WGRAD=unfused
 * or PPSCHED_LAYERNORM_BWD=unfused leave them unwritten. */
static const block_part_t GRAD_PARTS[] = {
    {PART(d_fc), SZ_4NC, ON_BOTH, {0}},         {PART(d_ln2), SZ_NC, ON_BOTH, {0}},
    {PART(d_x2), SZ_NC, ON_BOTH, {0}},          {PART(d_qkv), SZ_3NC, ON_BOTH, {0}},
    {PART(d_ln1), SZ_NC, ON_BOTH, {0}},         {PART(d_qkv_sum), SZ_QKV_SUM, ON_FUSED, {0}},
    {PART(d_ln2_sum), SZ_LN_SUM, ON_BOTH, {0}}, {PART(d_ln1_sum), SZ_LN_SUM, ON_BOTH, {0}},
};

#define N_SAVED (sizeof SAVED_PARTS / sizeof SAVED_PARTS[0])
#define N_GRAD  (sizeof GRAD_PARTS / sizeof GRAD_PARTS[0])

static size_t part_bytes(const pp_stage_cfg_t *cfg, part_size_t sz)
{
    size_t es = pp_dtype_size(cfg->dtype);
    size_t B = (size_t)cfg->micro_batch_size, T = (size_t)cfg->seq_len, C = (size_t)cfg->hidden;
    size_t H = (size_t)cfg->heads, N = B * T;
    const int d = cfg->heads > 0 ? cfg->hidden / cfg->heads : 0;
    const size_t bytes[] = {
        N * C * es,
        3 * N * C * es,
        4 * N * C * es,
        N * sizeof(float),
        B * H * T * sizeof(float),
        B * H * T * T * es,
        attention_flash_bwd_colsum_bytes(cfg->micro_batch_size, cfg->heads, cfg->seq_len, d),
        layernorm_bwd_input_colsum_bytes64((int64_t)N, cfg->hidden)};
    return bytes[sz];
}

/* On the attention path `fused`, with bytes to carve at this shape. */
static int part_on(const pp_stage_cfg_t *cfg, const block_part_t *p, int fused)
{
    return (p->paths & (fused ? ON_FUSED : ON_UNFUSED)) != 0 && part_bytes(cfg, p->size) > 0;
}

static void **part_ptr(block_bufs_t *b, const block_part_t *p)
{
    return (void **)((char *)b + p->field);
}

/* Carve the parts of `parts` that are on the path and, when `rebuilt` >= 0, whose rebuilt flag
 * for cfg->recompute equals it; b may be NULL (measure). */
static void carve_parts(carver_t *c, const pp_stage_cfg_t *cfg, int fused,
                        const block_part_t *parts, size_t n, int rebuilt, block_bufs_t *b)
{
    for (size_t i = 0; i < n; i++) {
        const block_part_t *p = &parts[i];
        if (!part_on(cfg, p, fused)) continue;
        if (rebuilt >= 0 && p->rebuilt[cfg->recompute] != rebuilt) continue;
        void *at = carve(c, part_bytes(cfg, p->size));
        if (b) *part_ptr(b, p) = at;
    }
}

void stage_layout_view(const pp_stage_cfg_t *cfg, int fused, const block_bufs_t *kept,
                       const block_bufs_t *rebuilt, const block_bufs_t *grad, block_bufs_t *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < N_SAVED; i++) {
        const block_part_t *p = &SAVED_PARTS[i];
        if (!part_on(cfg, p, fused)) continue;
        const block_bufs_t *from = p->rebuilt[cfg->recompute] ? rebuilt : kept;
        *part_ptr(out, p) = *part_ptr((block_bufs_t *)from, p);
    }
    if (grad)
        for (size_t i = 0; i < N_GRAD; i++)
            *part_ptr(out, &GRAD_PARTS[i]) = *part_ptr((block_bufs_t *)grad, &GRAD_PARTS[i]);
}

/* ---- slot, I→W buffer, workspace ------------------------------------------------------------- */

#define TAKE(field, bytes)                                                                         \
    do {                                                                                           \
        void *p_ = carve(&c, (bytes));                                                             \
        if (s) (field) = p_;                                                                       \
    } while (0)

/* ---- a slot: the kept region and the ring slot ----------------------------------------------- */

/* The backward-read tensors of a slot (its pieces) are walked in slot order by walk_pieces, which
 * asks `take` where each goes. `take` gets the piece's bytes and whether it must move (the stage
 * input x of a stage that receives it: the receive writes it into the ring slot, the address a
 * transport registers). */
typedef void *(*piece_take_fn)(void *ctx, size_t bytes, int must_move);

#define PIECE(field, bytes)                                                                        \
    do {                                                                                           \
        void *p_ = take(ctx, (bytes), 0);                                                          \
        if (s) (field) = p_;                                                                       \
    } while (0)

static void walk_pieces(const pp_stage_cfg_t *cfg, int fused, slot_t *s, piece_take_fn take,
                        void *ctx)
{
    const size_t NC = part_bytes(cfg, SZ_NC), rows = part_bytes(cfg, SZ_ROWS);
    const size_t N = (size_t)cfg->micro_batch_size * cfg->seq_len;
    const int L = cfg->n_layers;
    if (cfg->is_first) PIECE(s->tokens, N * sizeof(int));
    if (cfg->is_last) PIECE(s->targets, N * sizeof(int));
    for (int l = 0; l < L; l++) {
        void *p = take(ctx, NC, l == 0 && !cfg->is_first);
        if (s) s->res[l] = p;
    }
    if (cfg->is_last) PIECE(s->res[L], NC);
    for (int l = 0; l < L; l++)
        for (size_t i = 0; i < N_SAVED; i++) {
            const block_part_t *p = &SAVED_PARTS[i];
            if (!part_on(cfg, p, fused) || p->rebuilt[cfg->recompute]) continue;
            PIECE(*part_ptr(&s->blocks[l], p), part_bytes(cfg, p->size));
        }
    if (cfg->is_last) {
        PIECE(s->lnf, NC);
        PIECE(s->lnf_mean, rows);
        PIECE(s->lnf_rstd, rows);
        PIECE(s->logits, N * (size_t)cfg->vocab * pp_dtype_size(cfg->dtype));
        PIECE(s->losses, rows);
    }
}
#undef PIECE

/* The distinct sizes of the pieces that may stay, and how many of each (a slot has a handful:
 * the token ids, N·C, 3·N·C, 4·N·C, the statistics, lse, P, the logits). */
#define MAX_SIZES 16
typedef struct piece_sizes {
    size_t bytes[MAX_SIZES];
    int count[MAX_SIZES];
    int n;
    int must; /* pieces that always move */
} piece_sizes_t;

static void *count_piece(void *ctx, size_t bytes, int must_move)
{
    piece_sizes_t *h = ctx;
    h->must += must_move;
    if (must_move) return NULL;
    int i = 0;
    while (i < h->n && h->bytes[i] != bytes)
        i++;
    if (i == h->n && h->n < MAX_SIZES) h->bytes[h->n++] = bytes;
    if (i < h->n) h->count[i]++;
    return NULL;
}

/* Where each piece goes: sizes above `size` move, sizes below stay, and of the pieces of `size`
 * the first `move_of_size` (in slot order) move. */
typedef struct piece_split {
    carver_t kept, ring;
    size_t size;
    int move_of_size, seen;
} piece_split_t;

static void *carve_piece(void *ctx, size_t bytes, int must_move)
{
    piece_split_t *x = ctx;
    int move = must_move || bytes > x->size;
    if (!must_move && bytes == x->size) move = x->seen++ < x->move_of_size;
    return carve(move ? &x->ring : &x->kept, bytes);
}

/* The most pieces that may stay: all but one moves (the received x, or the largest). */
static int keep_most(const piece_sizes_t *h)
{
    int n = 0;
    for (int i = 0; i < h->n; i++)
        n += h->count[i];
    return h->must > 0 || n == 0 ? n : n - 1;
}

/* The split that keeps cfg->offload_keep pieces on the device (at most keep_most), the smallest (of
 * equal sizes, the last in slot order: the first blocks' parts move, which the backward reads
 * last). keep 0: every piece moves (size 0). */
static void split_of(const pp_stage_cfg_t *cfg, int fused, piece_split_t *x)
{
    piece_sizes_t h = {{0}, {0}, 0, 0};
    int keep = cfg->offload_keep > 0 ? cfg->offload_keep : 0;
    x->size = 0;
    x->move_of_size = x->seen = 0;
    if (keep == 0) return;
    walk_pieces(cfg, fused, NULL, count_piece, &h);
    if (keep > keep_most(&h)) keep = keep_most(&h);
    for (;;) { /* the smallest size left, kept whole or in part */
        int at = -1;
        for (int i = 0; i < h.n; i++)
            if (h.count[i] > 0 && (at < 0 || h.bytes[i] < h.bytes[at])) at = i;
        if (at < 0) { /* every piece stays: nothing is larger than the largest */
            x->size = (size_t)-1;
            return;
        }
        x->size = h.bytes[at];
        if (keep <= h.count[at]) {
            x->move_of_size = h.count[at] - keep;
            return;
        }
        keep -= h.count[at];
        h.count[at] = 0;
    }
}

size_t stage_layout_slot(const pp_stage_cfg_t *cfg, int fused, char *kept, char *ring, slot_t *s,
                         slot_split_t *split)
{
    piece_split_t x;
    split_of(cfg, fused, &x);
    x.kept = (carver_t){kept, 0};
    x.ring = (carver_t){ring, 0};
    walk_pieces(cfg, fused, s, carve_piece, &x);
    if (split) {
        split->kept = carved_bytes(&x.kept);
        split->moved = carved_bytes(&x.ring);
    }
    /* then what the backward does not read: y (unless the last stage reads it), dx, dy */
    carver_t c = x.ring;
    const size_t NC = part_bytes(cfg, SZ_NC);
    const int L = cfg->n_layers;
    if (!cfg->is_last) TAKE(s->res[L], NC);
    TAKE(s->dres[0], NC);
    if (L > 0) TAKE(s->dres[L], NC);
    if (s && L == 0) s->dres[L] = s->dres[0];
    if (split) split->ring = carved_bytes(&c);
    return carved_bytes(&c);
}

static slot_split_t slot_split(const pp_stage_cfg_t *cfg)
{
    slot_split_t sp;
    stage_layout_slot(cfg, stage_attention_fused(cfg), NULL, NULL, NULL, &sp);
    return sp;
}

size_t stage_offload_bytes(const pp_stage_cfg_t *cfg)
{
    return slot_split(cfg).moved;
}

size_t stage_keep_bytes(const pp_stage_cfg_t *cfg)
{
    return slot_split(cfg).kept;
}

int stage_offload_pieces(const pp_stage_cfg_t *cfg)
{
    piece_sizes_t h = {{0}, {0}, 0, 0};
    walk_pieces(cfg, stage_attention_fused(cfg), NULL, count_piece, &h);
    return keep_most(&h);
}

size_t stage_layout_wgrad(const pp_stage_cfg_t *cfg, int fused, char *base, wgrad_t *g)
{
    carver_t c = {base, 0};
    wgrad_t *s = g; /* TAKE writes through `s` */
    const int L = cfg->n_layers;
    for (int l = 1; l < L; l++)
        TAKE(s->dres[l], part_bytes(cfg, SZ_NC));
    for (int l = 0; l < L; l++)
        carve_parts(&c, cfg, fused, GRAD_PARTS, N_GRAD, -1, g ? &g->blocks[l] : NULL);
    if (cfg->is_last) TAKE(s->d_lnf, part_bytes(cfg, SZ_NC));
    return carved_bytes(&c);
}

static size_t layout_scratch(const pp_stage_cfg_t *cfg, int fused, char *base, scratch_t *w);

size_t stage_layout_workspace(const pp_stage_cfg_t *cfg, int fused, char *base, workspace_t *w)
{
    carver_t c = {base, 0};
    workspace_t *s = w; /* TAKE writes through `s` */
    const size_t NC = part_bytes(cfg, SZ_NC);
    if (cfg->n_layers > 0) {
        carve_parts(&c, cfg, fused, SAVED_PARTS, N_SAVED, 1, w ? &w->rebuilt : NULL);
        carve_parts(&c, cfg, fused, GRAD_PARTS, N_GRAD, -1, w ? &w->grad : NULL);
        TAKE(s->dres[0], NC);
        TAKE(s->dres[1], NC);
    }
    if (cfg->is_last) TAKE(s->d_lnf, NC);
    size_t at = carved_bytes(&c);
    return at + layout_scratch(cfg, fused, base ? base + at : NULL, w ? &w->scratch : NULL);
}

/* Carve the scratch area (NULL base: measure; then w may be NULL) for the attention path `fused`.
 * Returns its bytes: the largest of the three groups, which overlap. */
static size_t layout_scratch(const pp_stage_cfg_t *cfg, int fused, char *base, scratch_t *w)
{
    size_t es = pp_dtype_size(cfg->dtype);
    size_t B = (size_t)cfg->micro_batch_size, T = (size_t)cfg->seq_len, C = (size_t)cfg->hidden;
    size_t H = (size_t)cfg->heads, N = B * T;
    size_t most = 0;
    carver_t c = {base, 0};
    scratch_t *s = w; /* TAKE writes through `s` */
    if (cfg->n_layers > 0 && !fused) {
        TAKE(s->qkv, N * 3 * C * es);
        TAKE(s->attn, N * C * es);
    }
    most = carved_bytes(&c);
    c.off = 0;
    if (cfg->n_layers > 0) {
        TAKE(s->d_atty, N * C * es);
        if (fused) {
            TAKE(s->d_flash, attention_flash_bwd_scratch_bytes(cfg->micro_batch_size, cfg->heads,
                                                               cfg->seq_len));
        } else {
            TAKE(s->d_attn, N * C * es);
            TAKE(s->d_p, B * H * T * T * es);
            TAKE(s->d_q, N * C * es);
            TAKE(s->d_k, N * C * es);
            TAKE(s->d_v, N * C * es);
        }
    }
    if (carved_bytes(&c) > most) most = carved_bytes(&c);
    c.off = 0;
    TAKE(s->ln_scratch, layernorm_bwd_weight_scratch_bytes64((int64_t)N, cfg->hidden));
    if (cfg->is_first)
        TAKE(s->enc_scratch,
             encoder_bwd_scratch_bytes64(cfg->micro_batch_size, cfg->seq_len, cfg->vocab));
    if (carved_bytes(&c) > most) most = carved_bytes(&c);
    return most;
#undef TAKE
}

pp_model_shape_t stage_shape_of(const pp_stage_cfg_t *cfg)
{
    pp_model_shape_t s;
    s.hidden = cfg->hidden;
    s.heads = cfg->heads;
    s.seq_len = cfg->seq_len;
    s.vocab = cfg->vocab;
    s.batch = cfg->micro_batch_size;
    s.n_layers = cfg->n_layers;
    s.first_layer = cfg->first_layer;
    s.total_layers = cfg->total_layers;
    s.is_first = cfg->is_first;
    s.is_last = cfg->is_last;
    return s;
}

/* Elements of the padded device parameter buffer. */
static size_t padded_params(const pp_stage_cfg_t *cfg)
{
    pp_model_shape_t s = stage_shape_of(cfg);
    return model_tensors(&s, NULL, NULL);
}

size_t stage_layout_aux(const pp_stage_cfg_t *cfg)
{
    carver_t c = {NULL, 0};
    carve(&c, (size_t)cfg->vocab * sizeof(int32_t));
    carve(&c, sizeof(float));
    return carved_bytes(&c);
}

size_t stage_slot_bytes(const pp_stage_cfg_t *cfg)
{
    return slot_split(cfg).ring;
}

size_t stage_wgrad_slot_bytes(const pp_stage_cfg_t *cfg)
{
    return stage_layout_wgrad(cfg, stage_attention_fused(cfg), NULL, NULL);
}

size_t stage_workspace_bytes(const pp_stage_cfg_t *cfg)
{
    return PP_GEMM_WORKSPACE_BYTES +
           stage_layout_workspace(cfg, stage_attention_fused(cfg), NULL, NULL);
}

size_t stage_device_bytes(const pp_stage_cfg_t *cfg)
{
    return stage_state_bytes(cfg) + stage_workspace_bytes(cfg) +
           (size_t)cfg->n_slots * stage_slot_bytes(cfg) +
           (size_t)cfg->n_keep_slots * stage_keep_bytes(cfg) +
           (size_t)cfg->n_wgrad_slots * stage_wgrad_slot_bytes(cfg);
}

size_t stage_state_bytes(const pp_stage_cfg_t *cfg)
{
    size_t P = padded_params(cfg);
    /* zero1: each replica keeps its 1/shards of the master and the moments */
    size_t shards = cfg->optimizer_shards > 1 ? (size_t)cfg->optimizer_shards : 1;
    size_t Ps = (P + shards - 1) / shards;
    size_t bytes = P * pp_dtype_size(cfg->dtype); /* parameters (the master when fp32) */
    if (cfg->dtype != PP_DTYPE_FP32) bytes += Ps * sizeof(float); /* fp32 master */
    bytes += P * sizeof(float);                                   /* gradients */
    if (cfg->with_optimizer) bytes += 2 * Ps * sizeof(float);     /* AdamW m, v */
    return bytes + stage_layout_aux(cfg);
}

int stage_shard_part(const pp_stage_cfg_t *cfg, int shard, size_t b, size_t *lo, size_t *n,
                     size_t *at)
{
    const size_t P = padded_params(cfg), d = cfg->optimizer_shards > 1 ? cfg->optimizer_shards : 1;
    const size_t B = cfg->shard_bucket > 0 && cfg->shard_bucket < P ? cfg->shard_bucket : P;
    const size_t begin = b * B;
    if (begin >= P) return 0;
    const size_t len = P - begin < B ? P - begin : B;
    if (len % d) return -1;
    *n = len / d;
    *lo = begin + (size_t)shard * *n;
    *at = begin / d;
    return 1;
}

size_t stage_shard_values(const pp_stage_cfg_t *cfg)
{
    size_t lo, n, at, sum = 0;
    int k;
    for (size_t b = 0; (k = stage_shard_part(cfg, 0, b, &lo, &n, &at)) > 0; b++)
        sum += n;
    return k < 0 ? 0 : sum;
}

size_t stage_grad_bytes(const pp_stage_cfg_t *cfg)
{
    return padded_params(cfg) * sizeof(float);
}

size_t stage_boundary_bytes(const pp_stage_cfg_t *cfg)
{
    return (size_t)cfg->micro_batch_size * cfg->seq_len * cfg->hidden * pp_dtype_size(cfg->dtype);
}

size_t stage_param_count(const pp_stage_cfg_t *cfg)
{
    pp_model_shape_t s = stage_shape_of(cfg);
    size_t n = 0;
    model_tensors(&s, NULL, &n);
    return n;
}

/* Rebuilt while F saves it: the part named `name` under cfg's setting and path. */
static int part_rebuilt(const pp_stage_cfg_t *cfg, int fused, const char *name)
{
    for (size_t i = 0; i < N_SAVED; i++)
        if (strcmp(SAVED_PARTS[i].name, name) == 0)
            return part_on(cfg, &SAVED_PARTS[i], fused) && SAVED_PARTS[i].rebuilt[cfg->recompute];
    return 0;
}

/* What stage_pass.cu's rebuild_for_input and rebuild_for_weight run, from the same table. */
void stage_recompute_work(const pp_stage_cfg_t *cfg, pp_recompute_work_t *w)
{
    const int fused = stage_attention_fused(cfg);
    memset(w, 0, sizeof *w);
    if (cfg->recompute == PP_RECOMPUTE_FULL) {
        w->input_forward = w->weight_forward = 1;
        return;
    }
    w->weight_layernorms = part_rebuilt(cfg, fused, "ln1") + part_rebuilt(cfg, fused, "ln2");
    w->weight_gelus = part_rebuilt(cfg, fused, "gelu");
    w->input_scores = part_rebuilt(cfg, fused, "att");
}

/* ---- names and the printed layout ------------------------------------------------------------ */

const char *const stage_recompute_names[PP_RECOMPUTE_COUNT + 1] = {"none", "selective", "full",
                                                                   NULL};

const char *stage_recompute_name(pp_recompute_t r)
{
    return r >= 0 && r < PP_RECOMPUTE_COUNT ? stage_recompute_names[r] : "?";
}

int stage_recompute_from_name(const char *name)
{
    for (int r = 0; r < PP_RECOMPUTE_COUNT; r++)
        if (name && strcmp(name, stage_recompute_names[r]) == 0) return r;
    return -1;
}

static void print_parts(const pp_stage_cfg_t *cfg, int fused, const block_part_t *parts, size_t n,
                        int rebuilt, const char *where, FILE *f)
{
    for (size_t i = 0; i < n; i++) {
        const block_part_t *p = &parts[i];
        if (!part_on(cfg, p, fused) || (rebuilt >= 0 && p->rebuilt[cfg->recompute] != rebuilt))
            continue;
        fprintf(f, "  %-10s %-9s %12zu\n", where, p->name, part_bytes(cfg, p->size));
    }
}

void stage_layout_print(const pp_stage_cfg_t *cfg, FILE *f)
{
    const int fused = stage_attention_fused(cfg);
    fprintf(f, "# stage memory, recompute %s, %s attention: part, bytes (block parts: per block)\n",
            stage_recompute_name(cfg->recompute), fused ? "fused" : "unfused");
    print_parts(cfg, fused, SAVED_PARTS, N_SAVED, 0, "slot", f);
    print_parts(cfg, fused, SAVED_PARTS, N_SAVED, 1, "rebuilt", f);
    print_parts(cfg, fused, GRAD_PARTS, N_GRAD, -1, "I->W", f);
    fprintf(f, "  %-10s %-9s %12zu\n", "slot", "total", stage_slot_bytes(cfg));
    fprintf(f, "  %-10s %-9s %12zu\n", "I->W", "total", stage_wgrad_slot_bytes(cfg));
    fprintf(f, "  %-10s %-9s %12zu\n", "workspace", "total", stage_workspace_bytes(cfg));
}
