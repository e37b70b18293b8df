/*
 * test_stage_size.c — the stage's memory sizes (model/stage_size.h) as the scheduler core sees
 * them, without a GPU: a hand computation of every piece for a tiny shape, growth with layers,
 * micro-batch and sequence, the attention path's effect, and the state and parameter counts;
 * the core's 64-bit token counts against the kernels' int ones, and sizes past 2^31 tokens.
 */
#include "tests/check.h"
#include "model/kernel_sizes.h"
#include "model/stage_size.h"

#include <stdlib.h>

static size_t a256(size_t x)
{
    return (x + 255) / 256 * 256;
}

/* A middle stage of a tiny fp32 model: hidden 16, 2 heads, sequence 8, micro-batch 2. */
static pp_stage_cfg_t tiny_cfg(int n_layers)
{
    pp_stage_cfg_t c = {.hidden = 16, .heads = 2, .seq_len = 8, .vocab = 32};
    c.micro_batch_size = 2;
    c.n_layers = n_layers;
    c.first_layer = 0;
    c.total_layers = 4;
    c.dtype = PP_DTYPE_FP32;
    c.seed = 1;
    c.n_slots = 1;
    c.grad_scale = 1.0f;
    return c;
}

/* The reference shape of bench/NOTES.md: hidden 1024, 16 heads, sequence 1024, micro-batch 4. */
static pp_stage_cfg_t ref_cfg(int n_layers)
{
    pp_stage_cfg_t c = tiny_cfg(n_layers);
    c.hidden = 1024;
    c.heads = 16;
    c.seq_len = 1024;
    c.vocab = 50304;
    c.micro_batch_size = 4;
    c.total_layers = 6;
    c.dtype = PP_DTYPE_BF16;
    return c;
}

static void test_boundary_and_params(void)
{
    pp_stage_cfg_t c = tiny_cfg(1);
    const size_t C = 16;
    EXPECT(stage_boundary_bytes(&c) == 2 * 8 * 16 * 4, "%zu", stage_boundary_bytes(&c));
    /* a block: two LayerNorms 4C, qkv 3C²+3C, proj C²+C, fc 4C²+4C, fc2 4C²+C */
    EXPECT(stage_param_count(&c) == 12 * C * C + 13 * C, "%zu", stage_param_count(&c));
    c.is_first = 1;
    c.is_last = 1;
    /* + wte VC + wpe TC + lnf 2C + lm VC */
    EXPECT(stage_param_count(&c) == 12 * C * C + 13 * C + 32 * C + 8 * C + 2 * C + 32 * C, "%zu",
           stage_param_count(&c));
    c.dtype = PP_DTYPE_BF16;
    EXPECT(stage_boundary_bytes(&c) == 2 * 8 * 16 * 2);
}

/* Every piece of the tiny fp32 (unfused attention) slot and I→W buffer, by hand, for each
 * recompute setting. */
static void test_slot_by_hand(void)
{
    pp_stage_cfg_t c = tiny_cfg(1);
    const size_t N = 16, C = 16, H = 2, T = 8, B = 2, e = 4, f = sizeof(float);
    const size_t nc = a256(N * C * e), rows = a256(N * f), tt = a256(B * H * T * T * e);
    const size_t nc4 = a256(4 * N * C * e), nc3 = a256(3 * N * C * e);
    const size_t bounds = 2 * nc + 2 * nc; /* res[0..1]; dres[0] = dx, dres[1] = dy */
    /* ln1 + stats, q k v, P, atty, x2, ln2 + stats, fc, gelu */
    const size_t none = nc + 2 * rows + 3 * nc + tt + 2 * nc + nc + 2 * rows + 2 * nc4;
    const size_t selective = none - nc - tt - nc - nc4; /* no ln1, P, ln2, gelu */
    EXPECT(stage_slot_bytes(&c) == bounds + none, "slot %zu bytes, by hand %zu",
           stage_slot_bytes(&c), bounds + none);
    /* I→W: d_fc, d_ln2, d_x2, d_qkv, d_ln1, the two LayerNorm input gradients' column sums (one
     * two chunks of 8 rows at this small N: 3 × 2 × 16 floats each; no gradient between blocks with
     * one block) */
    /* what an offload copies: the block's input and its saved parts; not y, dx, dy */
    EXPECT(stage_offload_bytes(&c) == nc + none, "offload %zu, by hand %zu",
           stage_offload_bytes(&c), nc + none);
    const size_t iw = nc4 + nc + nc + nc3 + nc + 2 * a256(3 * 2 * C * f);
    EXPECT(stage_wgrad_slot_bytes(&c) == iw, "%zu, by hand %zu", stage_wgrad_slot_bytes(&c), iw);
    c.n_layers = 2;
    EXPECT(stage_wgrad_slot_bytes(&c) == 2 * iw + nc, "two blocks and the gradient between them");
    EXPECT(stage_slot_bytes(&c) == bounds + nc + 2 * none, "two blocks: one more boundary");
    c.n_layers = 1;
    size_t ws_none = stage_workspace_bytes(&c);
    c.recompute = PP_RECOMPUTE_SELECTIVE;
    EXPECT(stage_slot_bytes(&c) == bounds + selective, "selective: %zu, by hand %zu",
           stage_slot_bytes(&c), bounds + selective);
    EXPECT(stage_workspace_bytes(&c) == ws_none + (none - selective),
           "selective rebuilds ln1, P, ln2 and gelu in the workspace");
    EXPECT(stage_wgrad_slot_bytes(&c) == iw);
    c.recompute = PP_RECOMPUTE_FULL;
    EXPECT(stage_slot_bytes(&c) == bounds, "full keeps the block boundaries only: %zu",
           stage_slot_bytes(&c));
    EXPECT(stage_workspace_bytes(&c) == ws_none + none, "full rebuilds a whole block");
    c.n_slots = 3;
    c.n_wgrad_slots = 2;
    EXPECT(stage_device_bytes(&c) == stage_state_bytes(&c) + stage_workspace_bytes(&c) +
                                         3 * stage_slot_bytes(&c) + 2 * stage_wgrad_slot_bytes(&c));
}

/* The names of the recompute settings, both ways. */
static void test_recompute_names(void)
{
    for (int r = 0; r < PP_RECOMPUTE_COUNT; r++)
        EXPECT(stage_recompute_from_name(stage_recompute_name((pp_recompute_t)r)) == r);
    EXPECT(stage_recompute_from_name("selective") == PP_RECOMPUTE_SELECTIVE);
    EXPECT(stage_recompute_from_name("some") == -1);
    EXPECT(stage_recompute_from_name(NULL) == -1);
}

/* The rebuild work a cost model prices, per setting and attention path. */
static void test_recompute_work(void)
{
    pp_stage_cfg_t c = ref_cfg(6);
    pp_recompute_work_t w;
    unsetenv("PPSCHED_ATTENTION");
    stage_recompute_work(&c, &w);
    EXPECT(!w.input_forward && !w.weight_forward && !w.weight_layernorms && !w.weight_gelus &&
               !w.input_scores,
           "none rebuilds nothing");
    c.recompute = PP_RECOMPUTE_SELECTIVE;
    stage_recompute_work(&c, &w);
    EXPECT(w.weight_layernorms == 2 && w.weight_gelus == 1 && w.input_scores == 0 &&
               !w.input_forward,
           "selective, fused: two LayerNorms and a GELU before W");
    c.dtype = PP_DTYPE_FP32; /* unfused */
    stage_recompute_work(&c, &w);
    EXPECT(w.input_scores == 1, "selective, unfused: P before I");
    c.recompute = PP_RECOMPUTE_FULL;
    stage_recompute_work(&c, &w);
    EXPECT(w.input_forward && w.weight_forward && !w.weight_layernorms, "full: the forward");
}

/* The goal of the slot: at most PyTorch's 134 MiB per block at the reference shape (6 blocks),
 * 8.4 MiB at the small (hidden 512, 8 heads, sequence 256, micro-batch 2, 4 blocks). */
static void test_slot_goal(void)
{
    pp_stage_cfg_t c = ref_cfg(6);
    unsetenv("PPSCHED_ATTENTION");
    double per_block = (double)stage_slot_bytes(&c) / 6 / (1 << 20);
    EXPECT(per_block <= 134.0, "reference: %.2f MiB a block", per_block);
    c.recompute = PP_RECOMPUTE_SELECTIVE;
    double sel = (double)stage_slot_bytes(&c) / 6 / (1 << 20);
    c.recompute = PP_RECOMPUTE_FULL;
    double full = (double)stage_slot_bytes(&c) / 6 / (1 << 20);
    EXPECT(sel < per_block && full < sel, "none %.1f, selective %.1f, full %.1f", per_block, sel,
           full);
    c = ref_cfg(4);
    c.hidden = 512, c.heads = 8, c.seq_len = 256, c.micro_batch_size = 2;
    per_block = (double)stage_slot_bytes(&c) / 4 / (1 << 20);
    EXPECT(per_block <= 8.4, "small: %.3f MiB a block", per_block);
}

static void test_slot_grows(void)
{
    pp_stage_cfg_t c = tiny_cfg(1);
    size_t one = stage_slot_bytes(&c);
    c.n_layers = 2;
    size_t two = stage_slot_bytes(&c);
    c.n_layers = 3;
    size_t three = stage_slot_bytes(&c);
    EXPECT(one < two && two < three, "%zu %zu %zu", one, two, three);
    EXPECT(three - two == two - one, "each block adds the same bytes");
    c = tiny_cfg(2);
    size_t base = stage_slot_bytes(&c);
    c.micro_batch_size = 4;
    EXPECT(stage_slot_bytes(&c) > base, "micro-batch");
    c = tiny_cfg(2);
    c.seq_len = 32;
    EXPECT(stage_slot_bytes(&c) > base, "sequence");
    c = tiny_cfg(2);
    c.is_last = 1;
    EXPECT(stage_slot_bytes(&c) > base + 2 * 8 * 32 * 4, "the last stage keeps the logits");
    c = tiny_cfg(2);
    c.dtype = PP_DTYPE_BF16;
    EXPECT(stage_slot_bytes(&c) < base, "bf16 halves the activations");
}

/* bf16 with head size 64 and T a multiple of 64 takes the fused attention: no T×T matrix. */
static void test_attention_path(void)
{
    pp_stage_cfg_t c = ref_cfg(1);
    unsetenv("PPSCHED_ATTENTION");
    size_t fused = stage_slot_bytes(&c), fused_ws = stage_workspace_bytes(&c);
    setenv("PPSCHED_ATTENTION", "unfused", 1);
    size_t unfused = stage_slot_bytes(&c), unfused_ws = stage_workspace_bytes(&c);
    unsetenv("PPSCHED_ATTENTION");
    const size_t TT = (size_t)4 * 16 * 1024 * 1024 * 2; /* B·H·T·T bf16 */
    EXPECT(unfused > fused + TT / 2, "fused %zu, unfused %zu", fused, unfused);
    EXPECT(unfused_ws > fused_ws, "the unfused backward needs dP in the scratch");
    EXPECT(fused_ws >= PP_GEMM_WORKSPACE_BYTES);
    EXPECT(attention_flash_supported(1024, 64, PP_DTYPE_BF16));
    EXPECT(!attention_flash_supported(1024, 64, PP_DTYPE_FP32));
}

/* The I→W buffer of the fused path at d = 64 holds, per block, d_qkv's column sums per 128-row
 * block of a sequence (written by the flash backward for W's QKV bias gradient), whatever
 * PPSCHED_FLASH_TILE says; at d = 128 and on the unfused path there are none. */
static void test_qkv_sums_bytes(void)
{
    pp_stage_cfg_t c = ref_cfg(6);
    const size_t B = 4, T = 1024, C = 1024, L = 6, N = B * T;
    unsetenv("PPSCHED_ATTENTION");
    const size_t fused = stage_wgrad_slot_bytes(&c);
    setenv("PPSCHED_FLASH_TILE", "64", 1);
    EXPECT(stage_wgrad_slot_bytes(&c) == fused, "the sizes depend on PPSCHED_FLASH_TILE");
    unsetenv("PPSCHED_FLASH_TILE");
    setenv("PPSCHED_ATTENTION", "unfused", 1);
    const size_t unfused = stage_wgrad_slot_bytes(&c);
    unsetenv("PPSCHED_ATTENTION");
    const size_t sums = a256(B * (T / 128) * 3 * C * sizeof(float)); /* 384 KiB */
    EXPECT(attention_flash_bwd_colsum_bytes(4, 16, 1024, 64) == B * (T / 128) * 3 * C * 4);
    EXPECT(fused - unfused == L * sums, "I->W %zu (fused) - %zu (unfused) != %zu", fused, unfused,
           L * sums);
    /* by hand: the gradient between blocks, then per block d_fc, d_ln2, d_x2, d_qkv, d_ln1, sums
     * and the LayerNorm input gradients' column sums (128 chunks of 32 rows, 3 quantities each) */
    const size_t nc = a256(N * C * 2), ln_sums = 2 * a256(3 * 128 * C * sizeof(float));
    EXPECT(fused == (L - 1) * nc +
                        L * (a256(4 * N * C * 2) + 3 * nc + a256(3 * N * C * 2) + sums + ln_sums),
           "I->W %zu bytes", fused);
    c.seq_len = 192; /* a whole 128-row block and a half one a sequence */
    const size_t with_half = stage_wgrad_slot_bytes(&c);
    setenv("PPSCHED_ATTENTION", "unfused", 1);
    EXPECT(with_half - stage_wgrad_slot_bytes(&c) == L * a256(B * 2 * 3 * C * sizeof(float)),
           "T = 192: two row blocks a sequence");
    unsetenv("PPSCHED_ATTENTION");
    c.seq_len = 1024;
    c.heads = 8; /* d = 128: the 64-row kernels, no column sums */
    const size_t d128 = stage_wgrad_slot_bytes(&c);
    setenv("PPSCHED_ATTENTION", "unfused", 1);
    EXPECT(d128 == stage_wgrad_slot_bytes(&c), "d = 128 keeps no column sums");
    unsetenv("PPSCHED_ATTENTION");
}

/* The LayerNorm input gradients' column sums in the I→W buffer (and a plain B's workspace): 3
 * quantities × the chunks of N × C floats for each LayerNorm of a block, on both attention paths,
 * whatever PPSCHED_WGRAD and PPSCHED_LAYERNORM_BWD say. */
static void test_ln_sums_bytes(void)
{
    pp_stage_cfg_t c = ref_cfg(6);
    EXPECT(layernorm_bwd_input_colsum_bytes(4096, 1024) == (size_t)3 * 128 * 1024 * 4, "1.5 MiB");
    const size_t iw = stage_wgrad_slot_bytes(&c), ws = stage_workspace_bytes(&c);
    static const char *const vars[2] = {"PPSCHED_WGRAD", "PPSCHED_LAYERNORM_BWD"};
    for (int i = 0; i < 2; i++) {
        setenv(vars[i], "unfused", 1);
        EXPECT(stage_wgrad_slot_bytes(&c) == iw, "the I->W bytes depend on %s", vars[i]);
        EXPECT(stage_workspace_bytes(&c) == ws, "the workspace depends on %s", vars[i]);
        unsetenv(vars[i]);
    }
    /* one more block: its I->W parts (the five gradients, d_qkv's sums, the two LayerNorm sums)
     * and the gradient between blocks */
    const size_t N = 4096, C = 1024, nc = a256(N * C * 2);
    const size_t block = a256(4 * N * C * 2) + 3 * nc + a256(3 * N * C * 2) +
                         a256(32 * 3 * C * sizeof(float)) + 2 * a256(3 * 128 * C * sizeof(float));
    c.n_layers = 7;
    EXPECT(stage_wgrad_slot_bytes(&c) - iw == block + nc, "a block's I->W parts: %zu, by hand %zu",
           stage_wgrad_slot_bytes(&c) - iw - nc, block);
}

static void test_state_bytes(void)
{
    pp_stage_cfg_t c = tiny_cfg(1);
    size_t fp32 = stage_state_bytes(&c);
    /* parameters + gradients, at least 8 bytes per parameter, plus the small aux allocation */
    EXPECT(fp32 >= 8 * stage_param_count(&c), "%zu", fp32);
    c.with_optimizer = 1;
    EXPECT(stage_state_bytes(&c) - fp32 >= 8 * stage_param_count(&c), "AdamW m and v");
    c.with_optimizer = 0;
    c.dtype = PP_DTYPE_BF16;
    EXPECT(stage_state_bytes(&c) > fp32, "bf16 adds a storage copy to the fp32 master");
}

static void test_workspace_bytes(void)
{
    pp_stage_cfg_t c = tiny_cfg(1);
    size_t mid = stage_workspace_bytes(&c);
    EXPECT(mid > PP_GEMM_WORKSPACE_BYTES);
    c.is_first = 1;
    EXPECT(stage_workspace_bytes(&c) >=
               PP_GEMM_WORKSPACE_BYTES + encoder_bwd_scratch_bytes(2, 8, 32),
           "the first stage's scratch holds the embedding sort");
    EXPECT(layernorm_bwd_weight_scratch_bytes(16, 16) == 2 * 1 * 16 * 4 + 1 * 4);
    EXPECT(attention_flash_bwd_scratch_bytes(2, 3, 192) == (size_t)2 * 3 * 192 * 4);
}

/* The LayerNorm input gradient's column-sum chunks: every row in exactly one chunk, none empty,
 * within the row bounds; the bytes are 3 quantities of [chunks, C] floats. */
static void test_layernorm_colsum_chunks(void)
{
    const int ns[] = {1,    31,   32,   33,   512,    1000,   2048,   4095,
                      4096, 8192, 8193, 9000, 262144, 262145, 300000, 1 << 22};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        const int N = ns[i], rows = layernorm_colsum_chunk_rows(N);
        const int chunks = layernorm_bwd_input_colsum_rows(N);
        EXPECT(rows >= 1 && rows <= PP_LN_COLSUM_MAX_ROWS, "N %d: %d rows a chunk", N, rows);
        EXPECT(rows >= PP_LN_COLSUM_SMALL_ROWS || chunks == 1, "N %d: %d rows a chunk", N, rows);
        /* chunks below MIN_ROWS rows only where MIN_ROWS would leave less than a wave */
        EXPECT(rows >= PP_LN_COLSUM_MIN_ROWS || N / PP_LN_COLSUM_MIN_ROWS < PP_LN_COLSUM_WAVE,
               "N %d: %d rows a chunk", N, rows);
        EXPECT((long long)chunks * rows >= N && (long long)(chunks - 1) * rows < N,
               "N %d: %d chunks of %d rows", N, chunks, rows);
        EXPECT(chunks <= PP_LN_COLSUM_CHUNKS || (long long)(chunks - 1) * PP_LN_COLSUM_MAX_ROWS < N,
               "N %d: %d chunks", N, chunks);
        EXPECT(layernorm_bwd_input_colsum_bytes(N, 1024) == (size_t)3 * chunks * 1024 * 4);
    }
    EXPECT(layernorm_colsum_chunk_rows(4096) == 32 && layernorm_bwd_input_colsum_rows(4096) == 128);
    EXPECT(layernorm_colsum_chunk_rows(512) == 8 && layernorm_bwd_input_colsum_rows(512) == 64,
           "a small N spreads over the GPU: %d rows a chunk", layernorm_colsum_chunk_rows(512));
    EXPECT(layernorm_colsum_chunk_rows(2048) == 16 && layernorm_bwd_input_colsum_rows(2048) == 128);
    EXPECT(layernorm_bwd_input_colsum_rows(0) == 0 && layernorm_bwd_input_colsum_bytes(0, 8) == 0);
    EXPECT(layernorm_bwd_input_colsum_bytes(8, 0) == 0);
}

/* The core's 64-bit token counts agree with the kernels' int functions wherever the resolve step
 * lets a shape through (at most 2^30 tokens): every N up to 200000, and a spread above it. */
static void test_sizes64_match(void)
{
    int bad = 0;
    for (long n = 0; n <= (1L << 30) && bad < 5; n = n < 200000 ? n + 1 : n + n / 977 + 1) {
        const int N = (int)n, C = 1024;
        bad += layernorm_colsum_chunk_rows(N) != layernorm_colsum_chunk_rows64(n);
        bad += layernorm_bwd_input_colsum_rows(N) != layernorm_bwd_input_colsum_rows64(n);
        bad += layernorm_bwd_input_colsum_bytes(N, C) != layernorm_bwd_input_colsum_bytes64(n, C);
        bad += layernorm_bwd_chunks(N) != layernorm_bwd_chunks64(n);
        bad +=
            layernorm_bwd_weight_scratch_bytes(N, C) != layernorm_bwd_weight_scratch_bytes64(n, C);
        bad += encoder_bwd_scratch_bytes(N, 1, 50304) != encoder_bwd_scratch_bytes64(N, 1, 50304);
        EXPECT(!bad, "N = %ld", n);
    }
    EXPECT(encoder_bwd_scratch_bytes(4, 1024, 8) == encoder_bwd_scratch_bytes64(4, 1024, 8));
}

/* Micro-batches of 2047 and 2048 x 1M tokens are sized in 64 bits: the second larger by at most
 * the ratio of their tokens (in int, a sum of rows wrapped at 2047 and the product at 2048). */
static void test_sizes_past_int(void)
{
    pp_stage_cfg_t a = ref_cfg(2), b = ref_cfg(2);
    a.seq_len = b.seq_len = 1 << 20;
    a.micro_batch_size = 2047;
    b.micro_batch_size = 2048;
    a.is_first = b.is_first = 1;
    const size_t wa = stage_workspace_bytes(&a), wb = stage_workspace_bytes(&b);
    const size_t sa = stage_slot_bytes(&a), sb = stage_slot_bytes(&b);
    const size_t ga = stage_wgrad_slot_bytes(&a), gb = stage_wgrad_slot_bytes(&b);
    const double most = 2048.0 / 2047 + 1e-4; /* every part grows with the tokens, or not at all */
    EXPECT(wb > wa && (double)wb / (double)wa < most, "workspace %zu then %zu", wa, wb);
    EXPECT(sb > sa && (double)sb / (double)sa < most, "slot %zu then %zu", sa, sb);
    EXPECT(gb > ga && (double)gb / (double)ga < most, "I->W buffer %zu then %zu", ga, gb);
}

int main(void)
{
    RUN(test_boundary_and_params);
    RUN(test_slot_by_hand);
    RUN(test_recompute_names);
    RUN(test_slot_goal);
    RUN(test_recompute_work);
    RUN(test_slot_grows);
    RUN(test_attention_path);
    RUN(test_qkv_sums_bytes);
    RUN(test_ln_sums_bytes);
    RUN(test_state_bytes);
    RUN(test_workspace_bytes);
    RUN(test_layernorm_colsum_chunks);
    RUN(test_sizes64_match);
    RUN(test_sizes_past_int);
    return check_summary("test_stage_size");
}
