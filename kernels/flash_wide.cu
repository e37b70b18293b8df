/*
 * flash_wide.cu — the fused causal attention at d = 64 with 32 rows a warp: the forward, dQ and
 * dK/dV kernels of flash_attention.cu with two m16 tiles a warp, so every fragment a warp loads
 * from the streamed tiles feeds twice the mma.sync of the 64-row kernels (less shared-memory
 * traffic per FLOP, which bounds those kernels). Same products in the same order per element, same
 * fragment layouts (flash_attention.cu's header), same online softmax and outputs (O, lse, dQ, dK,
 * dV). The dQ kernel also computes the row dot Dr (flash_bwd_dot_kernel's sum, the same bits) for
 * its rows and runs first: the dK/dV kernel reads Dr of every query block. Given a buffer, the dQ
 * and dK/dV kernels also write each CTA's column sums of the gradients they store (the QKV bias
 * gradient's partial sums, one fp32 per block and column, one thread each, a fixed order).
 *
 * Tiles: 128 rows a CTA of 4 warps, warp w the rows 32w..32w + 31 (tile m = 0, 1: rows
 * 32w + 16m..), the other side in steps of 64 through two cp.async buffers (one __syncthreads a
 * step). A 128-row query block q0.. meets two diagonal key blocks: warps 0, 1 (rows q0..q0 + 63)
 * end at key block 2qb, warps 2, 3 at 2qb + 1; key j > row t is masked (dK/dV mirrors this over
 * key blocks). T is a multiple of 64, so where T mod 128 is 64 the last block holds 64 rows and
 * its warps 2, 3 only join the barriers. Grid: BH · ⌈T/128⌉ CTAs, the longest blocks first.
 * PPSCHED_FLASH_TILE=64 selects the 64-row kernels instead (flash_wide_enabled);
 * PPSCHED_FLASH_BWD=unfused (flash_wide_bwd_fused) the dQ kernel that reads the dot kernel's Dr and
 * no column sums, to compare. Launchers allocate nothing and enqueue on `stream`.
 */
#include "flash_util.cuh"

#include <stdlib.h>
#include <string.h>

#define FW_D    64                     /* the head size these kernels take */
#define FW_ROWS (2 * FA_TILE)          /* rows a CTA (queries; keys for dK/dV): 32 a warp */
#define FW_TILE (FA_TILE * (FW_D + 8)) /* elements of a 64-row shared tile */
static_assert(FW_ROWS == PP_FLASH_WIDE_ROWS, "kernel_sizes.h sizes the column sums by it");

/* s[m][j] += Q·Kᵀ for the warp's tiles m (A operands qa[m]) and the 8 key tiles j of a shared
 * [64, 64] tile X (keys as rows): each ldmatrix.x4 of X feeds four mma. */
__device__ __forceinline__ void fw_mma_abt(float s[2][8][4], const unsigned qa[2][FW_D / 16][4],
                                           const bf16 *X, int lane)
{
    constexpr int LDH = FW_D + 8;
#pragma unroll
    for (int c = 0; c < FW_D / 16; c += 2)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            unsigned b[4];
            fa_ldsm4(b, X + (8 * j + (lane & 7)) * LDH + 16 * c + 8 * (lane >> 3));
#pragma unroll
            for (int m = 0; m < 2; m++) {
                fa_mma(s[m][j], qa[m][c], b[0], b[1]);
                fa_mma(s[m][j], qa[m][c + 1], b[2], b[3]);
            }
        }
}

/* acc[m][n] += P_m·X over the 64 rows of a shared tile X (B row major: ldmatrix.trans), P_m the
 * accumulators p[m] (16 × 64) rounded to bf16; each ldmatrix.x4 of X feeds four mma. */
__device__ __forceinline__ void fw_mma_px(float acc[2][FW_D / 8][4], const float p[2][8][4],
                                          const bf16 *X, int lane)
{
    constexpr int LDH = FW_D + 8;
#pragma unroll
    for (int c = 0; c < 4; c++) {
        unsigned pa[2][4];
#pragma unroll
        for (int m = 0; m < 2; m++) {
            pa[m][0] = fa_pack(p[m][2 * c][0], p[m][2 * c][1]);
            pa[m][1] = fa_pack(p[m][2 * c][2], p[m][2 * c][3]);
            pa[m][2] = fa_pack(p[m][2 * c + 1][0], p[m][2 * c + 1][1]);
            pa[m][3] = fa_pack(p[m][2 * c + 1][2], p[m][2 * c + 1][3]);
        }
#pragma unroll
        for (int n = 0; n < FW_D / 8; n += 2) {
            unsigned b[4];
            fa_ldsm4_t(b, X + (16 * c + (lane & 7) + 8 * ((lane >> 3) & 1)) * LDH + 8 * n +
                              8 * (lane >> 4));
#pragma unroll
            for (int m = 0; m < 2; m++) {
                fa_mma(acc[m][n], pa[m], b[0], b[1]);
                fa_mma(acc[m][n + 1], pa[m], b[2], b[3]);
            }
        }
    }
}

/* The rows q0..q0 + 127 of a head (row stride ld) into a 128-row shared tile, the second 64 only
 * where they exist (q0 + 64 < T). Issues the copies (the caller commits). */
__device__ __forceinline__ void fw_load_rows128(bf16 *dst, const bf16 *src, int ld, int q0, int T)
{
    fa_load_tile_async<FW_D>(dst, src, ld);
    if (q0 + FA_TILE < T) fa_load_tile_async<FW_D>(dst + FW_TILE, src + (size_t)FA_TILE * ld, ld);
}

/* ---- forward --------------------------------------------------------------------------------- */

/* The online softmax of one step over the warp's two tiles, in place (s: scores in, P out), in
 * base 2. koff = the first key's position minus the warp's first row's; `diag`: some key may
 * exceed some row. Rescales acc by the change of the running max. */
__device__ __forceinline__ void fw_softmax(float s[2][8][4], float acc[2][FW_D / 8][4],
                                           float m_run[2][2], float l_run[2][2], float scale_log2,
                                           bool diag, int koff, int lane)
{
#pragma unroll
    for (int m = 0; m < 2; m++)
        fa_softmax_rows(s[m], acc[m], m_run[m], l_run[m], scale_log2, diag, koff,
                        16 * m + (lane >> 2), lane);
}

/* O and lse of one 128-row query block (flash_fwd_kernel's products with two tiles a warp): per
 * key block S = Q·Kᵀ for the warp's 32 rows (Q held as A operands), the online softmax, then
 * O += P·V, each K and V fragment feeding both tiles. */
__global__ void __launch_bounds__(FA_THREADS)
    flash_wide_fwd_kernel(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k,
                          const bf16 *v, int ld_qkv, int BH, int H, int T, float scale_log2)
{
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Qs = (bf16 *)fa_smem_raw; /* 128 rows */
    bf16 *KVb = Qs + 2 * FW_TILE;   /* buffer i: K at KVb + 2i·FW_TILE, V at + FW_TILE */

    const int nq = (T + FW_ROWS - 1) / FW_ROWS;
    const int qb = nq - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w32 = 32 * warp;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0 = qb * FW_ROWS;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, FW_D);
    /* The CTA's last key block, and the warp's (−1: its rows are past T). */
    const int kb_last = min(2 * qb + 1, T / FA_TILE - 1);
    const int kb_warp = q0 + w32 < T ? 2 * qb + (warp >> 1) : -1;

    fw_load_rows128(Qs, q + in0 + (size_t)q0 * ld_qkv, ld_qkv, q0, T);
    fa_issue_kv<FW_D>(KVb, k, v, in0, 0, ld_qkv);

    unsigned qa[2][FW_D / 16][4]; /* the warp's 32 query rows, loaded at the first step */
    float acc[2][FW_D / 8][4];
    fa_zero(acc);
    float m_run[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}}; /* rows g, g + 8 */
    float l_run[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}; /* this lane's share of their sums */

    for (int kb = 0; kb <= kb_last; kb++) {
        /* Block kb has landed and every warp is done with block kb − 1, whose buffer the next
         * copy overwrites. */
        fa_cp_wait_all();
        __syncthreads();
        if (kb < kb_last) fa_issue_kv<FW_D>(KVb, k, v, in0, kb + 1, ld_qkv);
        if (kb > kb_warp) continue; /* keys past the warp's rows (or no rows): barriers only */
        if (kb == 0) {
            fa_load_rows_a<FW_D>(qa[0], Qs, w32, lane);
            fa_load_rows_a<FW_D>(qa[1], Qs, w32 + 16, lane);
        }
        const bf16 *Ks = KVb + 2 * (kb & 1) * FW_TILE, *Vs = Ks + FW_TILE;

        float s[2][8][4];
        fa_zero(s);
        fw_mma_abt(s, qa, Ks, lane); /* S = Q·Kᵀ */
        const int koff = FA_TILE * kb - q0 - w32;
        fw_softmax(s, acc, m_run, l_run, scale_log2, koff + FA_TILE - 1 > 0, koff, lane);
        fw_mma_px(acc, s, Vs, lane); /* O += P·V */
    }
    if (kb_warp < 0) return; /* no barrier follows */

    /* O /= l and lse = (m + log2 l)·ln 2 per row; O staged in the warp's own rows of Qs, which
     * only this warp read (the ldmatrix of the first step): the __syncwarp orders them. */
    float inv[2][2];
#pragma unroll
    for (int m = 0; m < 2; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float l = l_run[m][h];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            inv[m][h] = 1.0f / l;
            if (t4 == 0)
                lse[(size_t)bh * T + q0 + w32 + 16 * m + g + 8 * h] =
                    (m_run[m][h] + log2f(l)) * FA_LN2;
        }
    __syncwarp();
    bf16 *out = o + fa_head_offset(bh, H, T, ld_o, FW_D) + (size_t)(q0 + w32) * ld_o;
#pragma unroll
    for (int m = 0; m < 2; m++)
        fa_store_acc<FW_D>(out + (size_t)16 * m * ld_o, ld_o, Qs + (w32 + 16 * m) * (FW_D + 8),
                           acc[m], inv[m][0], inv[m][1], lane);
}

/* ---- column sums of the stored gradients ----------------------------------------------------- */

/* x as stored: rounded to bf16 (fa_store_acc's rounding), back in fp32. */
__device__ __forceinline__ float fw_stored(float x)
{
    return __bfloat162float(__float2bfloat16_rn(x));
}

/* One step of a reduce-scatter across lanes `off` apart (the lane's bit `hi` = lane & off): of
 * each pair of columns (v[2p], v[2p + 1]) the lane keeps the one its bit selects, adds the other
 * lane's copy of it and sends the partner the one it drops, so out[p] holds half the columns with
 * the sums of twice the rows. own + partner's, as the xor-shuffle tree adds them; the partner adds
 * the same two values the other way round, the same bits (fp addition commutes). */
template <int N>
__device__ __forceinline__ void fw_halve(float (&out)[N / 2][2], const float (&v)[N][2], bool hi,
                                         int off)
{
#pragma unroll
    for (int p = 0; p < N / 2; p++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float keep = hi ? v[2 * p + 1][e] : v[2 * p][e];
            const float send = hi ? v[2 * p][e] : v[2 * p + 1][e];
            out[p][e] = keep + __shfl_xor_sync(0xffffffffu, send, off);
        }
}

/* The sums over the warp's 32 rows of its accumulators acc[m][n] (lane (g, t4): rows g, g + 8 of
 * tile m, columns 8n + 2t4, + 1) as stored: a lane adds its four rows of a column in the order
 * (m, h), then the 8 row groups g are added across lanes 4, 8, 16 apart — the tree of xor
 * shuffles 4, 8, 16, taken as a reduce-scatter (fw_halve): 14 shuffles instead of 48, and lane
 * (g, t4) ends with the columns of n = g, that is 2·lane and 2·lane + 1 (returned as x, y). */
__device__ __forceinline__ float2 fw_colsum_warp(const float (&acc)[2][FW_D / 8][4], int lane)
{
    float s8[8][2], s4[4][2], s2[2][2], s1[1][2];
#pragma unroll
    for (int n = 0; n < FW_D / 8; n++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float s = fw_stored(acc[0][n][e]);
            s += fw_stored(acc[0][n][e + 2]);
            s += fw_stored(acc[1][n][e]);
            s += fw_stored(acc[1][n][e + 2]);
            s8[n][e] = s;
        }
    fw_halve<8>(s4, s8, lane & 4, 4);   /* g bit 0: s4[p] is n = 2p + g0 */
    fw_halve<4>(s2, s4, lane & 8, 8);   /* g bit 1: s2[q] is n = 4q + 2g1 + g0 */
    fw_halve<2>(s1, s2, lane & 16, 16); /* g bit 2: n = g */
    return make_float2(s1[0][0], s1[0][1]);
}

/* The named barrier (0 is __syncthreads') over which the warps hand their column sums to the
 * warps that add them: the others arrive and leave, the adders wait (FA_THREADS arrivals in all).
 * The arrival orders the arriving thread's earlier shared-memory writes before the waiters'
 * reads (PTX: barrier.arrive). */
#define FW_BAR_COLSUM 1

__device__ __forceinline__ void fw_colsum_arrive()
{
    asm volatile("bar.arrive %0, %1;\n" ::"n"(FW_BAR_COLSUM), "n"(FA_THREADS) : "memory");
}

__device__ __forceinline__ void fw_colsum_wait()
{
    asm volatile("bar.sync %0, %1;\n" ::"n"(FW_BAR_COLSUM), "n"(FA_THREADS) : "memory");
}

/* One warp's share of the CTA's column sums: warp w's row red[32w + lane] (fw_colsum_warp's
 * columns 2·lane, + 1), the 4 rows added in warp order, into cs[2·lane], cs[2·lane + 1]. A warp
 * without rows wrote zeros, added like any other row. */
__device__ __forceinline__ void fw_colsum_add(float *cs, const float2 *red, int lane)
{
    static_assert(FA_WARPS == 4 && FW_D == 64, "four warps, two columns a lane");
    float2 s = red[lane];
#pragma unroll
    for (int w = 1; w < FA_WARPS; w++) {
        const float2 r = red[32 * w + lane];
        s.x += r.x;
        s.y += r.y;
    }
    cs[2 * lane] = s.x;
    cs[2 * lane + 1] = s.y;
}

/* ---- dQ -------------------------------------------------------------------------------------- */

/* dQ's products address shared memory by 32-bit byte addresses: a lane's offset within a tile,
 * one of three ldmatrix patterns, plus compile-time row and column offsets, so the addresses of
 * the unrolled loops cost no registers (the kernel has none to spare). */
#define FW_ROW_BYTES ((FW_D + 8) * 2) /* a shared tile's row */
#define FW_SUB       32               /* keys a dQ sub-step */

__device__ __forceinline__ void fw_ldsm4(unsigned r[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

__device__ __forceinline__ void fw_ldsm4_t(unsigned r[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

/* The lane's byte offsets of the three patterns (fa_load_rows_a's A operands, fa_mma_abt's B
 * operands, fa_mma_px's transposed B operands), at row 0, column 0 of a tile. */
__device__ __forceinline__ unsigned fw_off_a(int lane)
{
    return (unsigned)((lane & 15) * FW_ROW_BYTES + 16 * (lane >> 4));
}
__device__ __forceinline__ unsigned fw_off_b(int lane)
{
    return (unsigned)((lane & 7) * FW_ROW_BYTES + 16 * (lane >> 3));
}
__device__ __forceinline__ unsigned fw_off_t(int lane)
{
    return (unsigned)(((lane & 7) + 8 * ((lane >> 3) & 1)) * FW_ROW_BYTES + 16 * (lane >> 4));
}

/* Two 64-row tiles, rows blk·64.. of a and of b (row strides lda, ldb), into buffer buf (a at
 * dst0 + buf·2 tiles, b one tile further), as one cp.async group with any copies the thread
 * issued before (fa_issue_kv's copies by 32-bit shared addresses). a0, b0: this thread's first
 * element of block 0, row tid / 8, column (tid % 8)·8; dst0 its byte address in buffer 0's a
 * tile. A thread copies 16 bytes of every 16th row, 4 rows a tile. */
__device__ __forceinline__ void fw_issue_pair(unsigned dst0, const bf16 *a0, int lda,
                                              const bf16 *b0, int ldb, int blk, int buf)
{
    static_assert(FA_TILE * FW_D / 8 == 4 * FA_THREADS, "4 copies a thread a tile");
    const bf16 *a = a0 + (size_t)blk * FA_TILE * lda, *b = b0 + (size_t)blk * FA_TILE * ldb;
    const unsigned dst = dst0 + buf * 4 * FW_TILE; /* bytes: two tiles a buffer */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const unsigned d = dst + 16 * i * FW_ROW_BYTES;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d),
                     "l"(a + (size_t)16 * i * lda)
                     : "memory");
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d + 2 * FW_TILE),
                     "l"(b + (size_t)16 * i * ldb)
                     : "memory");
    }
    fa_cp_commit();
}

/* s[m][j] += A_m·Xᵀ for the NJ key tiles j (8 rows each) of X at x (plus fw_off_b), A_m the 16
 * rows at a + 16m rows (a: the warp's first row plus fw_off_a), both read at each use; each
 * ldmatrix.x4 of X feeds four mma (fw_mma_abt's order). */
template <int NJ>
__device__ __forceinline__ void fw_mma_abt_s(float (&s)[2][NJ][4], unsigned a, unsigned x)
{
#pragma unroll
    for (int c = 0; c < FW_D / 16; c += 2) {
        unsigned am[2][2][4];
#pragma unroll
        for (int m = 0; m < 2; m++)
#pragma unroll
            for (int i = 0; i < 2; i++)
                fw_ldsm4(am[m][i], a + 16 * m * FW_ROW_BYTES + 32 * (c + i));
#pragma unroll
        for (int j = 0; j < NJ; j++) {
            unsigned b[4];
            fw_ldsm4(b, x + 8 * j * FW_ROW_BYTES + 32 * c);
#pragma unroll
            for (int m = 0; m < 2; m++) {
                fa_mma(s[m][j], am[m][0], b[0], b[1]);
                fa_mma(s[m][j], am[m][1], b[2], b[3]);
            }
        }
    }
}

/* acc[m][n] += A_m·X over 16·NC rows of X at x (plus fw_off_t; B row major: ldmatrix.trans), the
 * A operands packed: a[m][c] covers rows 16c..16c + 15 of X (fa_mma_px's order). */
template <int NC>
__device__ __forceinline__ void fw_mma_ax(float (&acc)[2][FW_D / 8][4],
                                          const unsigned (&a)[2][NC][4], unsigned x)
{
#pragma unroll
    for (int c = 0; c < NC; c++)
#pragma unroll
        for (int n = 0; n < FW_D / 8; n += 2) {
            unsigned b[4];
            fw_ldsm4_t(b, x + 16 * c * FW_ROW_BYTES + 16 * n);
#pragma unroll
            for (int m = 0; m < 2; m++) {
                fa_mma(acc[m][n], a[m][c], b[0], b[1]);
                fa_mma(acc[m][n + 1], a[m][c], b[2], b[3]);
            }
        }
}

/* Waits for this thread's copies but its last group (cp.async.wait_group 1). */
__device__ __forceinline__ void fw_cp_wait_first()
{
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
}

/* Lane l's 16-byte packs of the warp's 32 rows: row 4i + l / 8 (i < 8), column (l % 8)·8. */
__device__ __forceinline__ int fw_warp_pack(int i, int lane, int ld)
{
    return (4 * i + lane / 8) * ld + (lane % 8) * 8;
}

/* The warp's 32 rows of a head (row stride ld, from src) into its 32 rows of a shared tile at
 * dst through cp.async, each lane the packs of fw_warp_pack: the ones it reads in fw_row_dots,
 * so that its own wait makes them visible to it, without a barrier. Issues the copies. */
__device__ __forceinline__ void fw_load_warp_rows(bf16 *dst, const bf16 *src, int ld, int lane)
{
#pragma unroll
    for (int i = 0; i < 8; i++)
        fa_cp16(dst + fw_warp_pack(i, lane, FW_D + 8), src + fw_warp_pack(i, lane, ld));
}

/* Dr = Σ_i dO·O of the warp's 32 rows (from row w32 of the shared 128-row tiles dOs, Os, the
 * packs this lane copied: fw_load_warp_rows) into dr_s[row] and dr[row] (row in the block):
 * flash_bwd_dot_kernel's sum, 8 lanes a row (a 16-byte pack each, fa_dot8) added by
 * fa_lanes_sum<8>, so the same bits. */
__device__ __forceinline__ void fw_row_dots(float *dr, float *dr_s, const bf16 *dOs, const bf16 *Os,
                                            int w32, int lane)
{
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const int r = w32 + 4 * i + lane / 8,
                  at = w32 * (FW_D + 8) + fw_warp_pack(i, lane, FW_D + 8);
        const float x = fa_lanes_sum<8>(fa_dot8(load128(dOs + at), load128(Os + at)));
        if (lane % 8 == 0) dr_s[r] = dr[r] = x;
    }
}

/* dQ of one 128-row query block (flash_bwd_dq_kernel's products with two tiles a warp). Each
 * 64-key block goes in two sub-steps of 32 keys: S for the warp's 32 queries, P from it, dP =
 * dO·Vᵀ, dS = scale·P∘(dP − Dr) packed to bf16, then dQ += dS·K, each K and V fragment feeding both
 * tiles. The sub-step loop stays rolled: S, dP and dQ of 32 rows × 64 keys at once exceed the
 * registers, and unrolled the compiler overlaps the sub-steps into the same excess. Q and dO are
 * read from shared memory at each use, with the rows' lse; K and V stream through two buffers.
 * DOT: each warp copies its own rows of O (into buffer 1) and dO first, as a cp.async group of
 * their own, waits for that group only and computes its rows' Dr = Σ dO·O (fw_row_dots) while
 * Q, K and V land, with no barrier (a lane reads only the bytes it copied); Dr goes to `dr` for the
 * dK/dV kernel, which runs after this one. Otherwise (PPSCHED_FLASH_BWD=unfused) Dr is read from
 * `dr` with the lse.
 * Same grid order and causal steps as flash_wide_fwd_kernel; each dQ element sums its keys in the
 * 64-row kernel's order. With cs, the block's column sums of dQ as stored follow the stores
 * (fw_colsum_warp, fw_colsum_add: one named barrier, which only warp 0 waits at). */
template <bool DOT>
__global__ void __launch_bounds__(FA_THREADS)
    flash_wide_bwd_dq_kernel(bf16 *dq, int ld_d, const bf16 *q, const bf16 *k, const bf16 *v,
                             int ld_qkv, const bf16 *dout, const bf16 *o, int ld_o,
                             const float *lse, float *dr, int BH, int H, int T, float scale,
                             float scale_log2, float *cs, int ld_cs)
{
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Qs = (bf16 *)fa_smem_raw, *dOs = Qs + 2 * FW_TILE; /* 128 rows each */
    bf16 *Kb = dOs + 2 * FW_TILE; /* buffer i: K at Kb + 2i·FW_TILE, V at + FW_TILE */
    float *rows_s = (float *)(fa_smem_raw + 8 * fa_smem<FW_D>::tile); /* lse [0, 128), dr after */

    const int nq = (T + FW_ROWS - 1) / FW_ROWS;
    const int qb = nq - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w32 = 32 * warp;
    const int g = lane >> 2, t4 = lane & 3;
    const int q0 = qb * FW_ROWS;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, FW_D);
    const int kb_last = min(2 * qb + 1, T / FA_TILE - 1);
    const int kb_warp = q0 + w32 < T ? 2 * qb + (warp >> 1) : -1;

    const size_t o0 = fa_head_offset(bh, H, T, ld_o, FW_D) + (size_t)q0 * ld_o;
    if constexpr (DOT) {
        /* First, as a group of their own: the warp's rows of O (in buffer 1, free until step 0)
         * and of dO, from which it takes its rows' Dr while Q, K and V are still landing. */
        if (kb_warp >= 0) {
            const size_t at = o0 + (size_t)w32 * ld_o;
            fw_load_warp_rows(Kb + 2 * FW_TILE + w32 * (FW_D + 8), o + at, ld_o, lane);
            fw_load_warp_rows(dOs + w32 * (FW_D + 8), dout + at, ld_o, lane);
        }
        fa_cp_commit();
    }
    fw_load_rows128(Qs, q + in0 + (size_t)q0 * ld_qkv, ld_qkv, q0, T);
    if constexpr (!DOT) fw_load_rows128(dOs, dout + o0, ld_o, q0, T);
    static_assert(FW_ROWS == FA_THREADS, "one row's lse (and dr) a thread");
    if (q0 + (int)threadIdx.x < T) {
        const size_t row = (size_t)bh * T + q0 + threadIdx.x;
        fa_cp4(rows_s + threadIdx.x, lse + row);
        if constexpr (!DOT) fa_cp4(rows_s + FW_ROWS + threadIdx.x, dr + row);
    }
    /* this thread's share of each K, V copy: row tid / 8 (+ 16i), 16 bytes at column (tid % 8)·8 */
    const size_t kv_src = in0 + (size_t)(threadIdx.x / 8) * ld_qkv + (threadIdx.x % 8) * 8;
    const unsigned kv_dst =
        fa_smem_addr(Kb) + (threadIdx.x / 8) * FW_ROW_BYTES + (threadIdx.x % 8) * 16;
    fw_issue_pair(kv_dst, k + kv_src, ld_qkv, v + kv_src, ld_qkv, 0, 0);
    if constexpr (DOT) {
        fw_cp_wait_first(); /* this lane's packs of O and dO, all it reads in fw_row_dots */
        if (kb_warp >= 0)
            fw_row_dots(dr + (size_t)bh * T + q0, rows_s + FW_ROWS, dOs, Kb + 2 * FW_TILE, w32,
                        lane);
    }

    float acc[2][FW_D / 8][4];
    fa_zero(acc);
    float lse2[2][2], d_r[2][2]; /* rows g, g + 8 of each tile */
    const unsigned q_at = fa_smem_addr(Qs) + w32 * FW_ROW_BYTES + fw_off_a(lane);
    const unsigned do_at = fa_smem_addr(dOs) + w32 * FW_ROW_BYTES + fw_off_a(lane);
    const unsigned kv_at = fa_smem_addr(Kb), off_b = fw_off_b(lane), off_t = fw_off_t(lane);

    for (int kb = 0; kb <= kb_last; kb++) {
        /* Block kb has landed and every warp is done with block kb − 1, whose buffer the next
         * copy overwrites. */
        fa_cp_wait_all();
        __syncthreads();
        if (kb < kb_last)
            fw_issue_pair(kv_dst, k + kv_src, ld_qkv, v + kv_src, ld_qkv, kb + 1, (kb + 1) & 1);
        if (kb > kb_warp) continue; /* keys past the warp's rows (or no rows): barriers only */
        if (kb == 0)
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = w32 + 16 * m + g + 8 * h;
                    lse2[m][h] = rows_s[r] * FA_LOG2E;
                    d_r[m][h] = rows_s[FW_ROWS + r];
                }
        const unsigned ks = kv_at + (kb & 1) * 4 * FW_TILE, vs = ks + 2 * FW_TILE; /* bytes */

        const int koff = FA_TILE * kb - q0 - w32;
        const bool diag = koff + FA_TILE - 1 > 0;
#pragma unroll 1
        for (int hf = 0; hf < FA_TILE / FW_SUB; hf++) {
            constexpr int NJ = FW_SUB / 8; /* key tiles of 8 a sub-step */
            const unsigned kx = ks + hf * FW_SUB * FW_ROW_BYTES,
                           vx = vs + hf * FW_SUB * FW_ROW_BYTES;

            /* P = exp(scale·S − lse) in place of S; key > query masked on the diagonal blocks. */
            float sp[2][NJ][4];
            fa_zero(sp);
            fw_mma_abt_s<NJ>(sp, q_at, kx + off_b); /* S = Q·Kᵀ */
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int j = 0; j < NJ; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int key = koff + FW_SUB * hf + 8 * j + 2 * t4 + (e & 1), h = e >> 1;
                        const float ex = fa_bwd_p(sp[m][j][e], scale_log2, lse2[m][h]);
                        sp[m][j][e] = (diag && key > 16 * m + g + 8 * h) ? 0.0f : ex;
                    }

            float dp[2][NJ][4];
            fa_zero(dp);
            fw_mma_abt_s<NJ>(dp, do_at, vx + off_b); /* dP = dO·Vᵀ */
            /* dS = scale·P∘(dP − Dr), packed: ds[m][c] is the A operand of keys 16c.. of tile m */
            unsigned ds[2][NJ / 2][4];
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int c = 0; c < NJ / 2; c++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const int j = 2 * c + (i >> 1), e = 2 * (i & 1), h = i & 1;
                        ds[m][c][i] =
                            fa_pack(fa_bwd_ds(sp[m][j][e], dp[m][j][e], d_r[m][h], scale),
                                    fa_bwd_ds(sp[m][j][e + 1], dp[m][j][e + 1], d_r[m][h], scale));
                    }
            fw_mma_ax<NJ / 2>(acc, ds, kx + off_t); /* dQ += dS·K */
        }
    }
    if (kb_warp >= 0) {
        /* Stage dQ in the warp's own rows of Qs (every read of them was by this warp). */
        __syncwarp();
        bf16 *out = dq + fa_head_offset(bh, H, T, ld_d, FW_D) + (size_t)(q0 + w32) * ld_d;
#pragma unroll
        for (int m = 0; m < 2; m++)
            fa_store_acc<FW_D>(out + (size_t)16 * m * ld_d, ld_d, Qs + (w32 + 16 * m) * (FW_D + 8),
                               acc[m], 1.0f, 1.0f, lane);
    }
    if (!cs) return; /* uniform */
    /* The column sums: each warp's row of them in K, V buffer (kb_last + 1) & 1, which no warp
     * reads or fills after the last step's barrier; warp 0 (done a step before warps 2, 3) adds
     * the four rows into row block b·nq + qb, the head's columns; the others arrive and leave. */
    float2 *red = (float2 *)(Kb + 2 * ((kb_last + 1) & 1) * FW_TILE);
    red[32 * warp + lane] = kb_warp >= 0 ? fw_colsum_warp(acc, lane) : make_float2(0.0f, 0.0f);
    if (warp != 0) {
        fw_colsum_arrive();
        return;
    }
    fw_colsum_wait();
    fw_colsum_add(cs + ((size_t)(bh / H) * nq + qb) * ld_cs + (size_t)(bh % H) * FW_D, red, lane);
}

/* ---- dK, dV ---------------------------------------------------------------------------------- */

/* dK, dV of one 128-key block (flash_bwd_dkdv_kernel's products with two key tiles a warp: warp w
 * the keys 32w..32w + 31, tile m = 0, 1 the keys 32w + 16m..). Query blocks of 64 stream through
 * two buffers from block 2kb on (with their rows' lse, dr); warps 2, 3 start one block later (no
 * query of block 2kb reaches their keys), and a query before a key is masked. Each block goes in
 * two sub-steps of 32 queries, in a rolled loop for the registers (dq's reason): Sᵀ = K·Qᵀ,
 * dPᵀ = V·dOᵀ, Pᵀ and dSᵀ from them, then dV += Pᵀ·dO and dK += dSᵀ·Q, each Q and dO fragment
 * feeding both tiles. K and V are read from shared memory at each use. Grid: BH · ⌈T/128⌉ CTAs,
 * the first key blocks (the most work) first; each element sums its queries in the 64-row
 * kernel's order. With cs_k, cs_v, the block's column sums of dK and dV as stored follow the
 * stores (fw_colsum_warp, fw_colsum_add: one named barrier, which only warps 2, 3 wait at). The
 * column sums' parameters come last: placed before BH, they would shift the parameters the loop
 * reads, and ptxas would spill 8 bytes. */
__global__ void __launch_bounds__(FA_THREADS)
    flash_wide_bwd_dkdv_kernel(bf16 *dk, bf16 *dv, int ld_d, const bf16 *q, const bf16 *k,
                               const bf16 *v, int ld_qkv, const bf16 *dout, int ld_o,
                               const float *lse, const float *dr, int BH, int H, int T, float scale,
                               float scale_log2, float *cs_k, float *cs_v, int ld_cs)
{
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Ks = (bf16 *)fa_smem_raw, *Vs = Ks + 2 * FW_TILE; /* 128 rows each */
    bf16 *Qb = Vs + 2 * FW_TILE; /* buffer i: Q at Qb + 2i·FW_TILE, dO at + FW_TILE */
    float *rows_b = (float *)(fa_smem_raw + 8 * fa_smem<FW_D>::tile); /* buffer i: lse, dr at
                                                                         + 128i, + 128i + 64 */

    const int kb = (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w32 = 32 * warp;
    const int g = lane >> 2, t4 = lane & 3;
    const int k0 = kb * FW_ROWS;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, FW_D), row0 = (size_t)bh * T;
    /* Query blocks 2kb + it, it < nit; the warp's first (nit: its keys are past T). */
    const int nit = T / FA_TILE - 2 * kb;
    const int it_warp = k0 + w32 < T ? (warp >> 1) : nit;

    fw_load_rows128(Ks, k + in0 + (size_t)k0 * ld_qkv, ld_qkv, k0, T);
    fw_load_rows128(Vs, v + in0 + (size_t)k0 * ld_qkv, ld_qkv, k0, T);
    /* this thread's share of the copies of query block 2kb: Q and dO row tid / 8 (+ 16i), 16
     * bytes at column (tid % 8)·8; lse and dr of row tid (threads < 64) */
    const size_t first = (size_t)2 * kb * FA_TILE + threadIdx.x / 8;
    const bf16 *q_src = q + in0 + first * ld_qkv + (threadIdx.x % 8) * 8;
    const bf16 *do_src =
        dout + fa_head_offset(bh, H, T, ld_o, FW_D) + first * ld_o + (threadIdx.x % 8) * 8;
    const float *lse_src = lse + row0 + 2 * kb * FA_TILE + threadIdx.x;
    const float *dr_src = dr + row0 + 2 * kb * FA_TILE + threadIdx.x;
    const unsigned qdo_dst =
        fa_smem_addr(Qb) + (threadIdx.x / 8) * FW_ROW_BYTES + (threadIdx.x % 8) * 16;
    /* Query block 2kb + it, its rows' lse and dr, into buffer it & 1. */
    auto issue = [&](int it) {
        const int b = it & 1;
        if (threadIdx.x < FA_TILE) {
            fa_cp4(rows_b + 2 * FA_TILE * b + threadIdx.x, lse_src + it * FA_TILE);
            fa_cp4(rows_b + 2 * FA_TILE * b + FA_TILE + threadIdx.x, dr_src + it * FA_TILE);
        }
        fw_issue_pair(qdo_dst, q_src, ld_qkv, do_src, ld_o, it, b);
    };
    issue(0);

    float acc_dk[2][FW_D / 8][4], acc_dv[2][FW_D / 8][4];
    fa_zero(acc_dk);
    fa_zero(acc_dv);
    const unsigned k_at = fa_smem_addr(Ks) + w32 * FW_ROW_BYTES + fw_off_a(lane);
    const unsigned v_at = fa_smem_addr(Vs) + w32 * FW_ROW_BYTES + fw_off_a(lane);
    const unsigned qb_at = fa_smem_addr(Qb), off_b = fw_off_b(lane), off_t = fw_off_t(lane);

    for (int it = 0; it < nit; it++) {
        const int b = it & 1;
        float *lse2_s = rows_b + 2 * FA_TILE * b;
        const float *dr_s = lse2_s + FA_TILE;
        fa_bwd_block_landed(lse2_s);
        if (it + 1 < nit) issue(it + 1);
        if (it < it_warp) continue; /* queries before the warp's keys (or no keys) */
        const unsigned qs = qb_at + b * 4 * FW_TILE, ds_ = qs + 2 * FW_TILE; /* bytes */
        /* the block's first query minus the warp's first key; some query before some key */
        const int qoff = FA_TILE * (2 * kb + it) - k0 - w32;
        const bool diag = qoff < 31;
#pragma unroll 1
        for (int hf = 0; hf < FA_TILE / FW_SUB; hf++) {
            constexpr int NJ = FW_SUB / 8; /* query tiles of 8 a sub-step */
            const unsigned qx = qs + hf * FW_SUB * FW_ROW_BYTES,
                           dx = ds_ + hf * FW_SUB * FW_ROW_BYTES;
            /* Pᵀ = exp(scale·Sᵀ − lse) in place of Sᵀ, and packed: pt[m][c] is the A operand of
             * queries 16c.. of tile m; dV += Pᵀ·dO before dPᵀ takes the registers */
            float st[2][NJ][4];
            fa_zero(st);
            fw_mma_abt_s<NJ>(st, k_at, qx + off_b); /* Sᵀ = K·Qᵀ */
            unsigned pt[2][NJ / 2][4];
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int j = 0; j < NJ; j++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int qry = FW_SUB * hf + 8 * j + 2 * t4 + e;
                            const float ex = fa_bwd_p(st[m][j][2 * h + e], scale_log2, lse2_s[qry]);
                            st[m][j][2 * h + e] =
                                (diag && 16 * m + g + 8 * h > qoff + qry) ? 0.0f : ex;
                        }
                        pt[m][j >> 1][2 * (j & 1) + h] =
                            fa_pack(st[m][j][2 * h], st[m][j][2 * h + 1]);
                    }
            fw_mma_ax<NJ / 2>(acc_dv, pt, dx + off_t); /* dV += Pᵀ·dO */

            /* dSᵀ = scale·Pᵀ∘(dPᵀ − Dr), packed as pt */
            float dpt[2][NJ][4];
            fa_zero(dpt);
            fw_mma_abt_s<NJ>(dpt, v_at, dx + off_b); /* dPᵀ = V·dOᵀ */
            unsigned dst[2][NJ / 2][4];
#pragma unroll
            for (int m = 0; m < 2; m++)
#pragma unroll
                for (int j = 0; j < NJ; j++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        float x[2];
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            const int qry = FW_SUB * hf + 8 * j + 2 * t4 + e;
                            x[e] = fa_bwd_ds(st[m][j][2 * h + e], dpt[m][j][2 * h + e], dr_s[qry],
                                             scale);
                        }
                        dst[m][j >> 1][2 * (j & 1) + h] = fa_pack(x[0], x[1]);
                    }
            fw_mma_ax<NJ / 2>(acc_dk, dst, qx + off_t); /* dK += dSᵀ·Q */
        }
    }
    /* The block's place is worked out again from the CTA index, read afresh: kept from the
     * start, it would be the one value the registers cannot hold through the loop. */
    unsigned cta;
    asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(cta));
    const bool has_keys = it_warp < nit;
    if (has_keys) {
        /* Stage dK, dV in the warp's own rows of Ks, Vs (every read of them was by this warp). */
        __syncwarp();
        const size_t out = fa_head_offset((int)(cta % BH), H, T, ld_d, FW_D) +
                           ((size_t)(cta / BH) * FW_ROWS + w32) * ld_d;
#pragma unroll
        for (int m = 0; m < 2; m++) {
            fa_store_acc<FW_D>(dk + out + (size_t)16 * m * ld_d, ld_d,
                               Ks + (w32 + 16 * m) * (FW_D + 8), acc_dk[m], 1.0f, 1.0f, lane);
            fa_store_acc<FW_D>(dv + out + (size_t)16 * m * ld_d, ld_d,
                               Vs + (w32 + 16 * m) * (FW_D + 8), acc_dv[m], 1.0f, 1.0f, lane);
        }
    }
    if (!cs_k) return; /* uniform */
    /* The column sums: each warp's rows of them (dK's, then FA_THREADS float2 further dV's) in
     * Q, dO buffer nit & 1, which no warp reads or fills after the last step's barrier; warps 2
     * and 3 add the four rows of dK and of dV into row block b·nq + kb, the head's columns, and
     * warps 0, 1 arrive and leave (all four end at the same step; where T mod 128 is 64 the last
     * block's keys are warps 0 and 1's, and warps 2, 3 wait for them anyway). */
    float2 *red = (float2 *)(Qb + 2 * (nit & 1) * FW_TILE);
    const float2 zero = make_float2(0.0f, 0.0f);
    red[32 * warp + lane] = has_keys ? fw_colsum_warp(acc_dk, lane) : zero;
    red[FA_THREADS + 32 * warp + lane] = has_keys ? fw_colsum_warp(acc_dv, lane) : zero;
    if (warp < 2) {
        fw_colsum_arrive();
        return;
    }
    fw_colsum_wait();
    const size_t at =
        ((size_t)((int)(cta % BH) / H) * ((T + FW_ROWS - 1) / FW_ROWS) + cta / BH) * ld_cs +
        (size_t)((int)(cta % BH) % H) * FW_D;
    fw_colsum_add((warp == 2 ? cs_k : cs_v) + at, red + FA_THREADS * (warp - 2), lane);
}

/* ---- launchers ------------------------------------------------------------------------------- */

pp_status_t flash_wide_fwd(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k,
                           const bf16 *v, int ld_qkv, int BH, int H, int T, cudaStream_t stream)
{
    const size_t smem = fa_smem<FW_D>::fwd_wide;
    const float scale_log2 = FA_LOG2E / sqrtf((float)FW_D);
    const unsigned grid = (unsigned)(BH * ((T + FW_ROWS - 1) / FW_ROWS));
    PP_CHECK(fa_smem_allow(flash_wide_fwd_kernel, smem));
    flash_wide_fwd_kernel<<<grid, FA_THREADS, smem, stream>>>(o, ld_o, lse, q, k, v, ld_qkv, BH, H,
                                                              T, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t flash_wide_bwd_dq(bf16 *dq, int ld_d, const bf16 *q, const bf16 *k, const bf16 *v,
                              int ld_qkv, const bf16 *dout, const bf16 *o, int ld_o,
                              const float *lse, float *dr, float *cs, int ld_cs, int BH, int H,
                              int T, cudaStream_t stream)
{
    const size_t smem = fa_smem<FW_D>::dq_wide;
    const float scale = 1.0f / sqrtf((float)FW_D), scale_log2 = FA_LOG2E * scale;
    const unsigned grid = (unsigned)(BH * ((T + FW_ROWS - 1) / FW_ROWS));
    if (!o) { /* dr given (flash_bwd_dot_kernel's) */
        PP_CHECK(fa_smem_allow(flash_wide_bwd_dq_kernel<false>, smem));
        flash_wide_bwd_dq_kernel<false>
            <<<grid, FA_THREADS, smem, stream>>>(dq, ld_d, q, k, v, ld_qkv, dout, o, ld_o, lse, dr,
                                                 BH, H, T, scale, scale_log2, cs, ld_cs);
        PP_CUDA_LAUNCH_CHECK();
        return PP_OK;
    }
    PP_CHECK(fa_smem_allow(flash_wide_bwd_dq_kernel<true>, smem));
    flash_wide_bwd_dq_kernel<true><<<grid, FA_THREADS, smem, stream>>>(
        dq, ld_d, q, k, v, ld_qkv, dout, o, ld_o, lse, dr, BH, H, T, scale, scale_log2, cs, ld_cs);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t flash_wide_bwd_dkdv(bf16 *dk, bf16 *dv, int ld_d, const bf16 *q, const bf16 *k,
                                const bf16 *v, int ld_qkv, const bf16 *dout, int ld_o,
                                const float *lse, const float *dr, float *cs_k, float *cs_v,
                                int ld_cs, int BH, int H, int T, cudaStream_t stream)
{
    const size_t smem = fa_smem<FW_D>::dq_wide; /* the same tiles: K, V; Q, dO and rows twice */
    const float scale = 1.0f / sqrtf((float)FW_D), scale_log2 = FA_LOG2E * scale;
    const unsigned grid = (unsigned)(BH * ((T + FW_ROWS - 1) / FW_ROWS));
    PP_CHECK(fa_smem_allow(flash_wide_bwd_dkdv_kernel, smem));
    flash_wide_bwd_dkdv_kernel<<<grid, FA_THREADS, smem, stream>>>(
        dk, dv, ld_d, q, k, v, ld_qkv, dout, ld_o, lse, dr, BH, H, T, scale, scale_log2, cs_k, cs_v,
        ld_cs);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
