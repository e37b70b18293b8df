/*
 * flash_attention.cu — fused causal self-attention, forward and backward, on bf16 q, k, v, o in
 * token-major rows (kernels.h: head h of row t at columns h·d.., any row stride): the T×T scores
 * and probabilities live only in registers, never in shared or global memory, and q, k, v are
 * read where the QKV matmul wrote them.
 *
 * Tiles: 64 query rows × 64 keys, one CTA of 4 warps per (64-row block, b·h); warp w owns the 16
 * rows 16w..16w+15 of the block it produces. Causal: key blocks after the query block are
 * skipped; inside the diagonal block, key j > query t is masked. All products are raw mma.sync
 * m16n8k16 (bf16 in, fp32 accumulate) whose fragment layouts PTX documents (g = lane / 4,
 * t = lane % 4): an accumulator holds (row g, columns 2t, 2t+1) in c0, c1 and (row g + 8, the same
 * columns) in c2, c3; an A operand holds rows g and g + 8 at columns 2t, 2t+1 (a0..a3) and
 * 2t+8, 2t+9 (a4..a7); a B operand holds column g at rows 2t, 2t+1 (b0, b1) and 2t+8, 2t+9
 * (b2, b3). So the accumulators of two adjacent 8-column tiles are, element for element, an A
 * operand over those 16 columns: a score tile computed by one product enters the next one from
 * registers. Operands come from shared memory through ldmatrix (.trans where the tile's rows run
 * along the product's k).
 *
 * Forward (flash_fwd_kernel): for each key block kb ≤ qb, S = Q·Kᵀ, online softmax per row in
 * base 2 (running max m, running sum l, both fp32), O = α·O + P·V with P rounded to bf16. At the
 * end O /= l and LSE = (m + log2 l)·ln 2 (natural log, fp32 [B,H,T]) is saved for the backward.
 * Backward, three kernels, no atomics (bitwise deterministic):
 *   flash_bwd_dot_kernel   Dr[row] = Σ_i dO·O (fp32, in the caller's scratch; at d = 64 the wide
 *                          dQ kernel computes it instead, with the same bits, and runs first);
 *   flash_bwd_dkdv_kernel  per key block, over query blocks qb ≥ kb: Pᵀ = exp(scale·Sᵀ − LSE)
 *                          recomputed, dPᵀ = V·dOᵀ, dSᵀ = scale·Pᵀ∘(dPᵀ − Dr), dV += Pᵀ·dO,
 *                          dK += dSᵀ·Q;
 *   flash_bwd_dq_kernel    per query block, over key blocks kb ≤ qb: the same dS, dQ += dS·K.
 * Streamed tiles (K, V in the forward and for dQ; Q, dO for dK/dV) go through two cp.async
 * buffers, the next block landing while the current one is used (one __syncthreads a step); the
 * warp's own rows of the fixed tiles are held in registers as A operands. Shapes: d = 64 or 128,
 * T a multiple of 64, any B·H, bf16 only. The launchers allocate nothing and enqueue on `stream`;
 * at d = 64 they take flash_wide.cu's kernels (128-row blocks, 32 rows a warp) instead of the
 * forward, dK/dV and dQ kernels here unless PPSCHED_FLASH_TILE=64.
 */
#include "flash_util.cuh"

#include <limits.h>

/* ---- forward --------------------------------------------------------------------------------- */

/* Grid: BH · T/64 CTAs, the last query blocks (the most work) first. Warp w owns query rows
 * w16..w16+15 of the block; lane (g, t) holds rows g and g + 8 of them. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_fwd_kernel(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                     int ld_qkv, int BH, int H, int T, float scale_log2)
{
    constexpr int TILE = FA_TILE * fa_smem<D>::LDH;
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Qs = (bf16 *)fa_smem_raw;
    bf16 *KVb = Qs + TILE; /* buffer i: K at KVb + 2i·TILE, V at + TILE */

    const int nb = T / FA_TILE;
    const int qb = nb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w16 = 16 * warp;
    const int g = lane >> 2, t4 = lane & 3;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, D);

    fa_load_tile_async<D>(Qs, q + in0 + (size_t)qb * FA_TILE * ld_qkv, ld_qkv);
    fa_issue_kv<D>(KVb, k, v, in0, 0, ld_qkv);

    unsigned qa[D / 16][4]; /* this warp's 16 query rows, loaded at the first step */
    float acc[D / 8][4];
    fa_zero(acc);
    float m_run[2] = {-INFINITY, -INFINITY}; /* base-2 running max of rows g, g + 8 */
    float l_run[2] = {0.0f, 0.0f};           /* this lane's share of their running sums */
    const int row0 = w16 + g;                /* row g in the 64-row block; row g + 8 is row0 + 8 */

    for (int kb = 0; kb <= qb; kb++) {
        /* Block kb has landed and every warp is done with block kb − 1, whose buffer the next
         * copy overwrites. */
        fa_cp_wait_all();
        __syncthreads();
        if (kb < qb) fa_issue_kv<D>(KVb, k, v, in0, kb + 1, ld_qkv);
        if (kb == 0) fa_load_rows_a<D>(qa, Qs, w16, lane);
        const bf16 *Ks = KVb + 2 * (kb & 1) * TILE, *Vs = Ks + TILE;

        float s[8][4];
        fa_zero(s);
        fa_mma_abt<D>(s, qa, Qs, w16, Ks, lane); /* S = Q·Kᵀ */

        /* Online softmax in base 2; on the diagonal block key > query is masked. */
        const bool diag = kb == qb;
        fa_softmax_rows(s, acc, m_run, l_run, scale_log2, diag, 0, row0, lane);
        fa_mma_px<D>(acc, s, Vs, lane); /* O += P·V */
    }

    /* O /= l and lse = (m + log2 l)·ln 2 per row; O staged in the warp's own rows of Qs (its Q
     * is in registers). Only this warp read those rows (the ldmatrix of the first step, whose
     * lanes read rows other lanes now write): the __syncwarp before the stores orders them. */
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        float l = l_run[h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        inv[h] = 1.0f / l;
        if (t4 == 0)
            lse[(size_t)bh * T + (size_t)qb * FA_TILE + row0 + 8 * h] =
                (m_run[h] + log2f(l)) * FA_LN2;
    }
    __syncwarp();
    fa_store_acc<D>(o + fa_head_offset(bh, H, T, ld_o, D) + ((size_t)qb * FA_TILE + w16) * ld_o,
                    ld_o, Qs + w16 * fa_smem<D>::LDH, acc, inv[0], inv[1], lane);
}

/* ---- backward -------------------------------------------------------------------------------- */

/* dr[row] = Σ_i dout[row, i] · o[row, i] over rows = B·H·T rows of D; D/8 lanes per row. */
template <int D>
__global__ void flash_bwd_dot_kernel(float *dr, const bf16 *dout, const bf16 *o, int ld_o, int H,
                                     int T, size_t rows)
{
    constexpr int LPR = D / 8; /* lanes per row (8 or 16), consecutive within a warp */
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / LPR;
    const int part = threadIdx.x % LPR;
    float acc = 0.0f;
    if (row < rows) {
        const size_t at =
            fa_head_offset((int)(row / T), H, T, ld_o, D) + (size_t)(row % T) * ld_o + part * 8;
        acc = fa_dot8(load128(dout + at), load128(o + at));
    }
    acc = fa_lanes_sum<LPR>(acc);
    if (row < rows && part == 0) dr[row] = acc;
}

/* dK, dV of one key block. Grid: BH · T/64 CTAs, the first key blocks (the most work) first.
 * Warp w owns keys w16..w16+15 (lane (g, t): keys g and g + 8 of them): per query block it
 * computes Sᵀ and dPᵀ for its keys × 64 queries in registers, turns them into Pᵀ and dSᵀ, then
 * adds Pᵀ·dO and dSᵀ·Q. Q, dO and the rows' lse, dr stream through two buffers. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd_dkdv_kernel(bf16 *dk, bf16 *dv, int ld_d, const bf16 *q, const bf16 *k, const bf16 *v,
                          int ld_qkv, const bf16 *dout, int ld_o, const float *lse, const float *dr,
                          int BH, int H, int T, float scale, float scale_log2)
{
    typedef fa_smem<D> S;
    constexpr int TILE = FA_TILE * S::LDH;
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Ks = (bf16 *)fa_smem_raw, *Vs = Ks + TILE;
    bf16 *Qb = Vs + TILE; /* buffer i: Q at Qb + 2i·TILE, dO at + TILE */
    float *rows_b = (float *)(fa_smem_raw + 6 * S::tile); /* buffer i: lse, dr at + 128i */

    const int nb = T / FA_TILE;
    const int kb = (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w16 = 16 * warp;
    const int g = lane >> 2, t4 = lane & 3;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, D), row0 = (size_t)bh * T;
    /* Rows of query block kb, the first streamed; each issue moves one block further. */
    const bf16 *q_next = q + in0 + (size_t)kb * FA_TILE * ld_qkv;
    const bf16 *do_next = dout + fa_head_offset(bh, H, T, ld_o, D) + (size_t)kb * FA_TILE * ld_o;

    /* Query block kb + it into buffer it & 1. */
    auto issue = [&](int it) {
        const int b = it & 1;
        fa_load_tile_async<D>(Qb + 2 * b * TILE, q_next, ld_qkv);
        fa_load_tile_async<D>(Qb + (2 * b + 1) * TILE, do_next, ld_o);
        fa_load_rows_async(rows_b + 2 * FA_TILE * b, lse, dr, row0 + (size_t)(kb + it) * FA_TILE);
        fa_cp_commit();
        q_next += (size_t)FA_TILE * ld_qkv;
        do_next += (size_t)FA_TILE * ld_o;
    };

    fa_load_tile_async<D>(Ks, k + in0 + (size_t)kb * FA_TILE * ld_qkv, ld_qkv);
    fa_load_tile_async<D>(Vs, v + in0 + (size_t)kb * FA_TILE * ld_qkv, ld_qkv);
    issue(0);

    /* This warp's keys as A operands, loaded at the first step; at d = 128 read from Ks, Vs at
     * each use instead. */
    constexpr bool A_REG = D == 64;
    unsigned ka[A_REG ? D / 16 : 1][4], va[A_REG ? D / 16 : 1][4];
    float acc_dk[D / 8][4], acc_dv[D / 8][4];
    fa_zero(acc_dk);
    fa_zero(acc_dv);
    const int key0 = w16 + g; /* key g in the block; key g + 8 is key0 + 8 */

    const int nq = nb - kb;
    for (int it = 0; it < nq; it++) {
        const int b = it & 1;
        float *lse2_s = rows_b + 2 * FA_TILE * b;
        const float *dr_s = lse2_s + FA_TILE;
        fa_bwd_block_landed(lse2_s);
        if (it + 1 < nq) issue(it + 1);
        if (A_REG && it == 0) {
            fa_load_rows_a<D>(ka, Ks, w16, lane);
            fa_load_rows_a<D>(va, Vs, w16, lane);
        }
        const bf16 *Qs = Qb + 2 * b * TILE, *dOs = Qs + TILE;

        float st[8][4], dpt[8][4];
        fa_zero(st);
        fa_zero(dpt);
        fa_mma_abt<D>(st, A_REG ? ka : NULL, Ks, w16, Qs, lane);   /* Sᵀ = K·Qᵀ */
        fa_mma_abt<D>(dpt, A_REG ? va : NULL, Vs, w16, dOs, lane); /* dPᵀ = V·dOᵀ */

        /* Pᵀ and dSᵀ in place; on the diagonal block key > query is masked. */
        const bool diag = it == 0;
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int qry = 8 * j + 2 * t4 + e;
                const float l2 = lse2_s[qry], d_r = dr_s[qry];
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int key = key0 + 8 * h;
                    const float ex = fa_bwd_p(st[j][2 * h + e], scale_log2, l2);
                    const float p = (diag && key > qry) ? 0.0f : ex;
                    st[j][2 * h + e] = p;
                    dpt[j][2 * h + e] = fa_bwd_ds(p, dpt[j][2 * h + e], d_r, scale);
                }
            }
        fa_mma_px<D>(acc_dv, st, dOs, lane); /* dV += Pᵀ·dO */
        fa_mma_px<D>(acc_dk, dpt, Qs, lane); /* dK += dSᵀ·Q */
    }
    /* Every warp is done with the buffers (no copy is pending): stage dK, dV in the warp's rows
     * of buffer 0's Q and dO tiles. */
    __syncthreads();
    const size_t out = fa_head_offset(bh, H, T, ld_d, D) + ((size_t)kb * FA_TILE + w16) * ld_d;
    fa_store_acc<D>(dk + out, ld_d, Qb + w16 * S::LDH, acc_dk, 1.0f, 1.0f, lane);
    fa_store_acc<D>(dv + out, ld_d, Qb + TILE + w16 * S::LDH, acc_dv, 1.0f, 1.0f, lane);
}

/* dQ of one query block. Grid: BH · T/64 CTAs, the last query blocks (the most work) first.
 * Warp w owns queries w16..w16+15 (lane (g, t): rows g and g + 8): per key block S and dP for
 * its queries × 64 keys in registers, dS from them, then dQ += dS·K. K and V stream through two
 * buffers. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd_dq_kernel(bf16 *dq, int ld_d, const bf16 *q, const bf16 *k, const bf16 *v, int ld_qkv,
                        const bf16 *dout, int ld_o, const float *lse, const float *dr, int BH,
                        int H, int T, float scale, float scale_log2)
{
    typedef fa_smem<D> S;
    constexpr int TILE = FA_TILE * S::LDH;
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Qs = (bf16 *)fa_smem_raw, *dOs = Qs + TILE;
    bf16 *Kb = dOs + TILE; /* buffer i: K at Kb + 2i·TILE, V at + TILE */
    float *rows_s = (float *)(fa_smem_raw + 6 * S::tile); /* lse at [0, 64), dr at [64, 128) */

    const int nb = T / FA_TILE;
    const int qb = nb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w16 = 16 * warp;
    const int g = lane >> 2, t4 = lane & 3;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, D);

    fa_load_tile_async<D>(Qs, q + in0 + (size_t)qb * FA_TILE * ld_qkv, ld_qkv);
    fa_load_tile_async<D>(
        dOs, dout + fa_head_offset(bh, H, T, ld_o, D) + (size_t)qb * FA_TILE * ld_o, ld_o);
    fa_load_rows_async(rows_s, lse, dr, (size_t)bh * T + (size_t)qb * FA_TILE);
    fa_issue_kv<D>(Kb, k, v, in0, 0, ld_qkv);

    /* This warp's rows of Q and dO as A operands; at d = 128 read from Qs, dOs at each use. */
    constexpr bool A_REG = D == 64;
    unsigned qa[A_REG ? D / 16 : 1][4], da[A_REG ? D / 16 : 1][4];
    float acc[D / 8][4];
    fa_zero(acc);
    const int row0 = w16 + g;
    float lse2[2], d_r[2];

    for (int kb = 0; kb <= qb; kb++) {
        /* Block kb has landed and every warp is done with block kb − 1, whose buffer the next
         * copy overwrites. */
        fa_cp_wait_all();
        __syncthreads();
        if (kb < qb) fa_issue_kv<D>(Kb, k, v, in0, kb + 1, ld_qkv);
        if (kb == 0) {
            if (A_REG) {
                fa_load_rows_a<D>(qa, Qs, w16, lane);
                fa_load_rows_a<D>(da, dOs, w16, lane);
            }
            for (int h = 0; h < 2; h++) {
                lse2[h] = rows_s[row0 + 8 * h] * FA_LOG2E;
                d_r[h] = rows_s[FA_TILE + row0 + 8 * h];
            }
        }
        const bf16 *Ks = Kb + 2 * (kb & 1) * TILE, *Vs = Ks + TILE;

        float s[8][4], dp[8][4];
        fa_zero(s);
        fa_zero(dp);
        fa_mma_abt<D>(s, A_REG ? qa : NULL, Qs, w16, Ks, lane);   /* S = Q·Kᵀ */
        fa_mma_abt<D>(dp, A_REG ? da : NULL, dOs, w16, Vs, lane); /* dP = dO·Vᵀ */

        /* dS in place of S; on the diagonal block key > query is masked. */
        const bool diag = kb == qb;
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = 8 * j + 2 * t4 + (e & 1), h = e >> 1;
                const float ex = fa_bwd_p(s[j][e], scale_log2, lse2[h]);
                const float p = (diag && key > row0 + 8 * h) ? 0.0f : ex;
                s[j][e] = fa_bwd_ds(p, dp[j][e], d_r[h], scale);
            }
        fa_mma_px<D>(acc, s, Ks, lane); /* dQ += dS·K */
    }
    /* Stage dQ in the warp's own rows of Qs (every read of them was by this warp). */
    __syncwarp();
    fa_store_acc<D>(dq + fa_head_offset(bh, H, T, ld_d, D) + ((size_t)qb * FA_TILE + w16) * ld_d,
                    ld_d, Qs + w16 * S::LDH, acc, 1.0f, 1.0f, lane);
}

/* ---- launchers ------------------------------------------------------------------------------- */

static pp_status_t fa_check(const char *what, int B, int H, int T, int d, pp_dtype_t dtype)
{
    if (B < 0 || H <= 0 || T <= 0 || d <= 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: bad shape B = %d, H = %d, T = %d, d = %d", what, B, H, T, d);
    if (!attention_flash_supported(T, d, dtype))
        PP_FAIL(PP_ERR_INTERNAL,
                "%s: T = %d, d = %d, %s is not supported (needs bf16, d = 64 or 128, T a multiple "
                "of %d)",
                what, T, d, pp_dtype_name(dtype), FA_TILE);
    if ((size_t)B * H * (T / FA_TILE) > (size_t)INT_MAX)
        PP_FAIL(PP_ERR_INTERNAL, "%s: B·H·T/%d = %zu tiles is too many", what, FA_TILE,
                (size_t)B * H * (T / FA_TILE));
    return PP_OK;
}

/* Row strides: at least H·d and whole 16-byte packs, so every row of every head is aligned. */
static pp_status_t fa_check_ld(const char *what, const char *name, int ld, int H, int d)
{
    if (ld < H * d || ld % 8 != 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: %s = %d must be at least H·d = %d and a multiple of 8", what,
                name, ld, H * d);
    return PP_OK;
}

template <int D>
static pp_status_t fa_fwd_t(void *o, int ld_o, float *lse, const void *q, const void *k,
                            const void *v, int ld_qkv, int BH, int H, int T, cudaStream_t stream)
{
    const size_t smem = fa_smem<D>::fwd;
    const float scale_log2 = FA_LOG2E / sqrtf((float)D);
    const unsigned grid = (unsigned)(BH * (T / FA_TILE));
    PP_CHECK(fa_smem_allow(flash_fwd_kernel<D>, smem));
    flash_fwd_kernel<D><<<grid, FA_THREADS, smem, stream>>>((bf16 *)o, ld_o, lse, (const bf16 *)q,
                                                            (const bf16 *)k, (const bf16 *)v,
                                                            ld_qkv, BH, H, T, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

template <int D>
static pp_status_t fa_bwd_t(void *dq, void *dk, void *dv, int ld_d, const void *dout, const void *q,
                            const void *k, const void *v, int ld_qkv, const void *o, int ld_o,
                            const float *lse, float *dr, float *cs, int BH, int H, int T,
                            cudaStream_t stream)
{
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = FA_LOG2E * scale;
    const unsigned grid = (unsigned)(BH * (T / FA_TILE));
    const size_t rows = (size_t)BH * T;
    const int dot_threads = 256;
    const size_t dot_blocks = (rows * (D / 8) + dot_threads - 1) / dot_threads;

    if (!cs && flash_hopper_available()) {
        /* warpgroup MMA (flash_hopper.cu) where no column sums are asked: Dr first */
        flash_bwd_dot_kernel<D><<<(unsigned)dot_blocks, dot_threads, 0, stream>>>(
            dr, (const bf16 *)dout, (const bf16 *)o, ld_o, H, T, rows);
        PP_CUDA_LAUNCH_CHECK();
        return flash_hopper_bwd((bf16 *)dq, (bf16 *)dk, (bf16 *)dv, ld_d, (const bf16 *)dout, ld_o,
                                (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, ld_qkv, lse, dr,
                                BH / H, H, T, D, stream);
    }
    if (D == 64 && flash_wide_enabled()) { /* dQ writes dr, which dK/dV reads: dQ first */
        const int C = H * D; /* the column sums: dq's, dk's, dv's side by side, as d_qkv */
        const int fused = flash_wide_bwd_fused();
        if (!fused) { /* PPSCHED_FLASH_BWD=unfused: the dot kernel, then dQ reads dr */
            flash_bwd_dot_kernel<D><<<(unsigned)dot_blocks, dot_threads, 0, stream>>>(
                dr, (const bf16 *)dout, (const bf16 *)o, ld_o, H, T, rows);
            PP_CUDA_LAUNCH_CHECK();
        }
        PP_CHECK(flash_wide_bwd_dq((bf16 *)dq, ld_d, (const bf16 *)q, (const bf16 *)k,
                                   (const bf16 *)v, ld_qkv, (const bf16 *)dout,
                                   fused ? (const bf16 *)o : NULL, ld_o, lse, dr, cs, 3 * C, BH, H,
                                   T, stream));
        return flash_wide_bwd_dkdv((bf16 *)dk, (bf16 *)dv, ld_d, (const bf16 *)q, (const bf16 *)k,
                                   (const bf16 *)v, ld_qkv, (const bf16 *)dout, ld_o, lse, dr,
                                   cs ? cs + C : NULL, cs ? cs + 2 * C : NULL, 3 * C, BH, H, T,
                                   stream);
    }
    flash_bwd_dot_kernel<D><<<(unsigned)dot_blocks, dot_threads, 0, stream>>>(
        dr, (const bf16 *)dout, (const bf16 *)o, ld_o, H, T, rows);
    PP_CUDA_LAUNCH_CHECK();
    PP_CHECK(fa_smem_allow(flash_bwd_dkdv_kernel<D>, fa_smem<D>::dkdv));
    flash_bwd_dkdv_kernel<D><<<grid, FA_THREADS, fa_smem<D>::dkdv, stream>>>(
        (bf16 *)dk, (bf16 *)dv, ld_d, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, ld_qkv,
        (const bf16 *)dout, ld_o, lse, dr, BH, H, T, scale, scale_log2);
    PP_CUDA_LAUNCH_CHECK();

    PP_CHECK(fa_smem_allow(flash_bwd_dq_kernel<D>, fa_smem<D>::dq));
    flash_bwd_dq_kernel<D><<<grid, FA_THREADS, fa_smem<D>::dq, stream>>>(
        (bf16 *)dq, ld_d, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, ld_qkv,
        (const bf16 *)dout, ld_o, lse, dr, BH, H, T, scale, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t attention_flash_fwd(void *o, int ld_o, float *lse, const void *q, const void *k,
                                const void *v, int ld_qkv, int B, int H, int T, int d,
                                pp_dtype_t dtype, cudaStream_t stream)
{
    static const char *what = "attention_flash_fwd";
    PP_CHECK(fa_check(what, B, H, T, d, dtype));
    if (B == 0) return PP_OK;
    if (!o || !lse || !q || !k || !v) PP_FAIL(PP_ERR_INTERNAL, "%s: NULL pointer", what);
    PP_CHECK(fa_check_ld(what, "ld_o", ld_o, H, d));
    PP_CHECK(fa_check_ld(what, "ld_qkv", ld_qkv, H, d));
    if (!is_aligned16(o) || !is_aligned16(q) || !is_aligned16(k) || !is_aligned16(v))
        PP_FAIL(PP_ERR_INTERNAL, "%s: q, k, v and o must be 16-byte aligned", what);
    if (flash_hopper_available())
        return flash_hopper_fwd((bf16 *)o, ld_o, lse, (const bf16 *)q, (const bf16 *)k,
                                (const bf16 *)v, ld_qkv, B, H, T, d, stream);
    if (d == 64 && flash_wide_enabled())
        return flash_wide_fwd((bf16 *)o, ld_o, lse, (const bf16 *)q, (const bf16 *)k,
                              (const bf16 *)v, ld_qkv, B * H, H, T, stream);
    if (d == 64) return fa_fwd_t<64>(o, ld_o, lse, q, k, v, ld_qkv, B * H, H, T, stream);
    return fa_fwd_t<128>(o, ld_o, lse, q, k, v, ld_qkv, B * H, H, T, stream);
}

/* A colsum needs the kernels that write it and dq, dk, dv side by side in one [B·T, 3·H·d]. */
static pp_status_t fa_check_colsum(const char *what, const void *dq, const void *dk, const void *dv,
                                   int ld_d, const float *colsum, int H, int d)
{
    if (!colsum) return PP_OK;
    const size_t C = (size_t)H * d * sizeof(bf16);
    if (!attention_flash_bwd_colsum_ok(d))
        PP_FAIL(PP_ERR_INTERNAL, "%s: no column sums at d = %d%s", what, d,
                d == 64 ? " under PPSCHED_FLASH_TILE=64 or PPSCHED_FLASH_BWD=unfused" : "");
    if ((const char *)dk != (const char *)dq + C || (const char *)dv != (const char *)dk + C ||
        ld_d != 3 * H * d)
        PP_FAIL(PP_ERR_INTERNAL, "%s: column sums need dq, dk, dv side by side (ld_d = 3·H·d)",
                what);
    if (((uintptr_t)colsum & 3u) != 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: colsum must be 4-byte aligned", what);
    return PP_OK;
}

pp_status_t attention_flash_bwd(void *dq, void *dk, void *dv, int ld_d, const void *dout,
                                const void *q, const void *k, const void *v, int ld_qkv,
                                const void *o, int ld_o, const float *lse, void *scratch,
                                float *colsum, int B, int H, int T, int d, pp_dtype_t dtype,
                                cudaStream_t stream)
{
    static const char *what = "attention_flash_bwd";
    PP_CHECK(fa_check(what, B, H, T, d, dtype));
    if (B == 0) return PP_OK;
    if (!dq || !dk || !dv || !dout || !q || !k || !v || !o || !lse || !scratch)
        PP_FAIL(PP_ERR_INTERNAL, "%s: NULL pointer", what);
    PP_CHECK(fa_check_ld(what, "ld_d", ld_d, H, d));
    PP_CHECK(fa_check_ld(what, "ld_qkv", ld_qkv, H, d));
    PP_CHECK(fa_check_ld(what, "ld_o", ld_o, H, d));
    if (!is_aligned16(dq) || !is_aligned16(dk) || !is_aligned16(dv) || !is_aligned16(dout) ||
        !is_aligned16(q) || !is_aligned16(k) || !is_aligned16(v) || !is_aligned16(o))
        PP_FAIL(PP_ERR_INTERNAL, "%s: dq, dk, dv, dout, q, k, v and o must be 16-byte aligned",
                what);
    if (((uintptr_t)scratch & 3u) != 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: scratch must be 4-byte aligned", what);
    PP_CHECK(fa_check_colsum(what, dq, dk, dv, ld_d, colsum, H, d));
    if (d == 64)
        return fa_bwd_t<64>(dq, dk, dv, ld_d, dout, q, k, v, ld_qkv, o, ld_o, lse, (float *)scratch,
                            colsum, B * H, H, T, stream);
    return fa_bwd_t<128>(dq, dk, dv, ld_d, dout, q, k, v, ld_qkv, o, ld_o, lse, (float *)scratch,
                         NULL, B * H, H, T, stream);
}
