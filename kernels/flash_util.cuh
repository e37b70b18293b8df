/*
 * flash_util.cuh — the pieces the fused attention kernels share (flash_attention.cu, the 64-row
 * tiles; flash_wide.cu, 32 rows a warp at d = 64), private to them: tile sizes and shared
 * memory layouts, cp.async tile copies, ldmatrix, mma.sync m16n8k16 and the 16-row products whose
 * fragment layouts flash_attention.cu's header comment states. Device helpers only, plus the
 * host-side shared-memory opt-in and the wide path's launchers.
 */
#ifndef PP_FLASH_UTIL_CUH
#define PP_FLASH_UTIL_CUH

#include "kernel_util.cuh"

#define FA_TILE    PP_FLASH_TILE /* query rows and keys per tile */
#define FA_WARPS   4             /* warps per CTA, 16 tile rows each */
#define FA_THREADS (32 * FA_WARPS)
#define FA_LOG2E   1.4426950408889634f
#define FA_LN2     0.6931471805599453f

/* 2^x through the MUFU instruction exp2f also ends in, without exp2f's rescaling for results
 * below 2^-126 (flushed to 0 here; they round to 0 in bf16 P anyway). 2^−inf = 0. */
__device__ __forceinline__ float fa_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Shared-memory sizes (bytes). A [64,d] bf16 tile has leading dimension d + 8: its rows are 16
 * bytes apart modulo 128, so the 8 row addresses of an ldmatrix hit distinct banks. */
template <int D> struct fa_smem {
    static constexpr int LDH = D + 8;
    static constexpr size_t tile = (size_t)FA_TILE * LDH * sizeof(bf16); /* Q, K, V or dO */
    static constexpr size_t rows = 2 * FA_TILE * sizeof(float);          /* lse, dr of 64 rows */
    static constexpr size_t fwd = 5 * tile;             /* Q; K, V in two buffers */
    static constexpr size_t dkdv = 6 * tile + 2 * rows; /* K, V; Q, dO and rows in two buffers */
    static constexpr size_t dq = 6 * tile + rows;       /* Q, dO; K, V in two buffers; rows */
    /* flash_wide.cu (d = 64): the fixed tiles hold 128 rows (two tiles each); 54 and 73 KiB */
    static constexpr size_t fwd_wide = 6 * tile; /* Q (128 rows); K, V in two buffers */
    /* dQ: Q, dO; K, V in two buffers; lse, dr of 128 rows. dK/dV the same bytes: K, V; Q, dO in
     * two buffers; lse, dr of 64 rows in two buffers. */
    static constexpr size_t dq_wide = 8 * tile + 2 * rows;
};

/* ---- helpers --------------------------------------------------------------------------------- */

__device__ __forceinline__ unsigned fa_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* Offset of row 0 of head h of batch b (bh = b·H + h) in a token-major [B·T, ld] matrix whose
 * head h fills columns h·D..h·D + D − 1. Row t of the head is ld elements further per t. */
__device__ __forceinline__ size_t fa_head_offset(int bh, int H, int T, int ld, int D)
{
    return ((size_t)(bh / H) * T) * ld + (size_t)(bh % H) * D;
}

/* cp.async: 16 bytes (bypassing L1) or 4 bytes global → shared, completed by fa_cp_wait_all. */
__device__ __forceinline__ void fa_cp16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(fa_smem_addr(dst)), "l"(src)
                 : "memory");
}

__device__ __forceinline__ void fa_cp4(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(fa_smem_addr(dst)), "l"(src)
                 : "memory");
}

__device__ __forceinline__ void fa_cp_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Waits for this thread's copies; a __syncthreads after it makes every thread's copies visible. */
__device__ __forceinline__ void fa_cp_wait_all()
{
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

/* Copy 64 rows of D bf16 at src (row stride ld) into a shared tile (leading dimension D + 8)
 * through cp.async, 16 bytes per copy: issues the copies and returns (the caller commits and
 * waits). All threads of the CTA call this. */
template <int D>
__device__ __forceinline__ void fa_load_tile_async(bf16 *dst, const bf16 *src, int ld)
{
    constexpr int V = D / 8; /* 16-byte packs per row */
    static_assert(FA_TILE * V % FA_THREADS == 0, "whole packs per thread");
#pragma unroll
    for (int i = 0; i < FA_TILE * V / FA_THREADS; i++) {
        const int e = (int)threadIdx.x + i * FA_THREADS, r = e / V, c = (e % V) * 8;
        fa_cp16(dst + r * fa_smem<D>::LDH + c, src + (size_t)r * ld + c);
    }
}

/* K and V of key block kb (rows from in0 + kb·64·ld, row stride ld) into buffer kb & 1 of kv (K
 * at kv + 2b·tile, V one tile further), as one cp.async group. */
template <int D>
__device__ __forceinline__ void fa_issue_kv(bf16 *kv, const bf16 *k, const bf16 *v, size_t in0,
                                            int kb, int ld)
{
    constexpr int TILE = FA_TILE * fa_smem<D>::LDH;
    const int b = kb & 1;
    const size_t off = in0 + (size_t)kb * FA_TILE * ld;
    fa_load_tile_async<D>(kv + 2 * b * TILE, k + off, ld);
    fa_load_tile_async<D>(kv + (2 * b + 1) * TILE, v + off, ld);
    fa_cp_commit();
}

/* The 64 rows' lse and dr of a query block (fp32 [B,H,T] each, from row `first`) through
 * cp.async into rows_s[0..63] and rows_s[64..127]. */
__device__ __forceinline__ void fa_load_rows_async(float *rows_s, const float *lse, const float *dr,
                                                   size_t first)
{
    if (threadIdx.x < FA_TILE) {
        fa_cp4(rows_s + threadIdx.x, lse + first + threadIdx.x);
        fa_cp4(rows_s + FA_TILE + threadIdx.x, dr + first + threadIdx.x);
    }
}

/* ---- the backward's arithmetic, for the 64-row and the wide kernels alike -------------------- */

/* P of one score s in the backward, recomputed before the causal mask: exp(scale·s − lse) in
 * base 2 (lse2 = lse·log2 e). Every backward kernel takes it from here (and sets it to 0 where the
 * key comes after the query), so P, and with it dS, dQ, dK and dV, have the same bits whichever
 * kernel ran. */
__device__ __forceinline__ float fa_bwd_p(float s, float scale_log2, float lse2)
{
    return fa_exp2(s * scale_log2 - lse2);
}

/* dS of one score: scale·P∘(dP − Dr), multiplied in this order. */
__device__ __forceinline__ float fa_bwd_ds(float p, float dp, float dr, float scale)
{
    return p * (dp - dr) * scale;
}

/* The start of a dK/dV step over streamed query blocks: this thread's copies of the block have
 * landed (a thread sees its own completed copies before the barrier), the threads that copied its
 * lse, the first 64, convert it to base 2 in place, then the barrier makes every copy visible and
 * tells that every warp is done with the block before, whose buffer the next copy overwrites. */
__device__ __forceinline__ void fa_bwd_block_landed(float *lse2_s)
{
    fa_cp_wait_all();
    if (threadIdx.x < FA_TILE) lse2_s[threadIdx.x] *= FA_LOG2E;
    __syncthreads();
}

/* Σ_j a[j]·b[j] over one 8-element pack, added in j order from 0: a lane's share of a row's
 * dO·O (Dr). flash_bwd_dot_kernel and flash_wide_bwd_dq_kernel both take it, with fa_lanes_sum,
 * so that Dr has the same bits on both paths. */
__device__ __forceinline__ float fa_dot8(const pack128<bf16> &a, const pack128<bf16> &b)
{
    float acc = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++)
        acc += to_f32(a.v[j]) * to_f32(b.v[j]);
    return acc;
}

/* The sum of x over LPR consecutive lanes of a warp (a power of two ≤ 32), by xor shuffles
 * LPR/2, ..., 1; every one of the lanes gets the same bits. */
template <int LPR> __device__ __forceinline__ float fa_lanes_sum(float x)
{
#pragma unroll
    for (int off = LPR / 2; off > 0; off >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

__device__ __forceinline__ void fa_ldsm4(unsigned r[4], const bf16 *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem_addr(p))
                 : "memory");
}

__device__ __forceinline__ void fa_ldsm4_t(unsigned r[4], const bf16 *p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem_addr(p))
                 : "memory");
}

/* Accumulators to zero: N fragments of 4 (a warp's 16 rows), or M such sets (its tiles). */
template <int N> __device__ __forceinline__ void fa_zero(float (&x)[N][4])
{
#pragma unroll
    for (int n = 0; n < N; n++)
        x[n][0] = x[n][1] = x[n][2] = x[n][3] = 0.0f;
}

template <int M, int N> __device__ __forceinline__ void fa_zero(float (&x)[M][N][4])
{
#pragma unroll
    for (int m = 0; m < M; m++)
        fa_zero(x[m]);
}

/* c += a·b on one 16×8×16 tile. */
__device__ __forceinline__ void fa_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two floats as one register of bf16 (the first in the low half, as the operands expect). */
__device__ __forceinline__ unsigned fa_pack(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&h);
}

/* The A operands of the warp's 16 rows (from row w16 of a shared tile) across D: a[c] covers
 * columns 16c..16c+15. */
template <int D>
__device__ __forceinline__ void fa_load_rows_a(unsigned a[][4], const bf16 *tile, int w16, int lane)
{
#pragma unroll
    for (int c = 0; c < D / 16; c++)
        fa_ldsm4(a[c], tile + (w16 + (lane & 15)) * fa_smem<D>::LDH + 16 * c + 8 * (lane >> 4));
}

/* acc[j] += A·Bᵀ for the 8 tiles j of 8 rows of a shared tile X (B = Xᵀ: X's rows are the
 * product's n, contiguous along its k = D): 16 rows × 64 columns. A is the warp's operands a[]
 * (fa_load_rows_a), or, where a is NULL, read from the warp's 16 rows of the shared tile
 * `a_tile` at each use (at d = 128 the registers to hold them are lacking). */
template <int D>
__device__ __forceinline__ void fa_mma_abt(float acc[8][4], const unsigned (*a)[4],
                                           const bf16 *a_tile, int w16, const bf16 *X, int lane)
{
    constexpr int LDH = fa_smem<D>::LDH;
#pragma unroll
    for (int c = 0; c < D / 16; c += 2) {
        unsigned a0[4], a1[4];
        if (!a) {
            fa_ldsm4(a0, a_tile + (w16 + (lane & 15)) * LDH + 16 * c + 8 * (lane >> 4));
            fa_ldsm4(a1, a_tile + (w16 + (lane & 15)) * LDH + 16 * (c + 1) + 8 * (lane >> 4));
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            unsigned b[4];
            fa_ldsm4(b, X + (8 * j + (lane & 7)) * LDH + 16 * c + 8 * (lane >> 3));
            fa_mma(acc[j], a ? a[c] : a0, b[0], b[1]);
            fa_mma(acc[j], a ? a[c + 1] : a1, b[2], b[3]);
        }
    }
}

/* acc[n] += P·X over the 64 rows of a shared tile X (the product's k; X as stored is B, row
 * major, so its operands come through ldmatrix.trans), with P (16 × 64) given as the
 * accumulators p[8][4] of fa_mma_abt, rounded to bf16. acc[n] covers columns 8n..8n+7 of D. */
template <int D>
__device__ __forceinline__ void fa_mma_px(float acc[][4], const float p[8][4], const bf16 *X,
                                          int lane)
{
#pragma unroll
    for (int c = 0; c < 4; c++) {
        unsigned pa[4];
        pa[0] = fa_pack(p[2 * c][0], p[2 * c][1]);
        pa[1] = fa_pack(p[2 * c][2], p[2 * c][3]);
        pa[2] = fa_pack(p[2 * c + 1][0], p[2 * c + 1][1]);
        pa[3] = fa_pack(p[2 * c + 1][2], p[2 * c + 1][3]);
#pragma unroll
        for (int n = 0; n < D / 8; n += 2) {
            unsigned b[4];
            fa_ldsm4_t(b, X + (16 * c + (lane & 7) + 8 * ((lane >> 3) & 1)) * fa_smem<D>::LDH +
                              8 * n + 8 * (lane >> 4));
            fa_mma(acc[n], pa, b[0], b[1]);
            fa_mma(acc[n + 1], pa, b[2], b[3]);
        }
    }
}

/* The forward's online softmax of one step over 16 rows × 64 keys, in place (s: scores in, P out),
 * in base 2. Lane (g, t4) holds rows row + 8h (h = 0, 1) at the fragment layout's places, with
 * their running max m_run[h] (base 2) and its share l_run[h] of their running sums; the key at
 * place (j, e) is koff + 8j + 2t4 + (e & 1), masked past its row when `diag`. Rescales the rows'
 * accumulators acc[NA] by the change of the running max. A row's first step holds key 0, never
 * masked, and no later step it computes is wholly masked, so the new max is finite. */
template <int NA>
__device__ __forceinline__ void fa_softmax_rows(float (&s)[8][4], float (&acc)[NA][4],
                                                float m_run[2], float l_run[2], float scale_log2,
                                                bool diag, int koff, int row, int lane)
{
    const int t4 = lane & 3;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = koff + 8 * j + 2 * t4 + (e & 1), r = row + 8 * (e >> 1);
            const float x = (diag && key > r) ? -INFINITY : s[j][e] * scale_log2;
            s[j][e] = x;
            mx[e >> 1] = fmaxf(mx[e >> 1], x);
        }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        /* the four lanes of a row group hold its 64 keys */
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float m_new = fmaxf(m_run[h], mx[h]);
        alpha[h] = fa_exp2(m_run[h] - m_new); /* 0 on the first step */
        m_run[h] = m_new;
        l_run[h] *= alpha[h];
    }
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const float p = fa_exp2(s[j][e] - m_run[e >> 1]); /* masked: 0 */
            s[j][e] = p;
            l_run[e >> 1] += p;
        }
#pragma unroll
    for (int n = 0; n < NA; n++) {
        acc[n][0] *= alpha[0], acc[n][1] *= alpha[0];
        acc[n][2] *= alpha[1], acc[n][3] *= alpha[1];
    }
}

/* Write the warp's accumulators acc[D/8] (16 rows × D), times row_scale (rows g, g + 8), as
 * bf16 into its 16 rows of a shared tile at `stage`, then copy them to dst (row stride ld) in
 * 16-byte stores. */
template <int D>
__device__ __forceinline__ void fa_store_acc(bf16 *dst, int ld, bf16 *stage, const float acc[][4],
                                             float scale0, float scale1, int lane)
{
    constexpr int LDH = fa_smem<D>::LDH, V = D / 8;
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
        *reinterpret_cast<unsigned *>(stage + g * LDH + 8 * n + 2 * t4) =
            fa_pack(acc[n][0] * scale0, acc[n][1] * scale0);
        *reinterpret_cast<unsigned *>(stage + (g + 8) * LDH + 8 * n + 2 * t4) =
            fa_pack(acc[n][2] * scale1, acc[n][3] * scale1);
    }
    __syncwarp();
    for (int e = lane; e < 16 * V; e += 32) {
        const int r = e / V, c = (e % V) * 8;
        store128(dst + (size_t)r * ld + c, load128(stage + r * LDH + c));
    }
}

/* ---- host side ------------------------------------------------------------------------------- */

/* Kernels above 48 KiB of dynamic shared memory must ask for it (per device, so every launch). */
template <typename K> static pp_status_t fa_smem_allow(K kernel, size_t bytes)
{
    PP_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    return PP_OK;
}

/* flash_wide_enabled() and flash_wide_bwd_fused() (kernel_sizes.h): the 128-row kernels at
 * d = 64, and Dr and the QKV column sums inside their backward (read at every call). */
/* The forward at d = 64 with 128-row query blocks: attention_flash_fwd's contract, its checks
 * done by the caller (BH = B·H). */
pp_status_t flash_wide_fwd(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k,
                           const bf16 *v, int ld_qkv, int BH, int H, int T, cudaStream_t stream);
/* dQ at d = 64 with 128-row query blocks: attention_flash_bwd's dq, and dr (= Σ dout·o per row,
 * flash_bwd_dot_kernel's bits) written for flash_wide_bwd_dkdv, enqueued after it; with o NULL,
 * dq from the dr flash_bwd_dot_kernel wrote (PPSCHED_FLASH_BWD=unfused). cs: NULL, or
 * the column sums of dq as stored, row block b·⌈T/128⌉ + i at cs + (b·⌈T/128⌉ + i)·ld_cs, head
 * h's columns from h·64 (attention_flash_bwd's colsum, its q part). */
pp_status_t flash_wide_bwd_dq(bf16 *dq, int ld_d, const bf16 *q, const bf16 *k, const bf16 *v,
                              int ld_qkv, const bf16 *dout, const bf16 *o, int ld_o,
                              const float *lse, float *dr, float *cs, int ld_cs, int BH, int H,
                              int T, cudaStream_t stream);
/* dK, dV at d = 64 with 128-row key blocks: attention_flash_bwd's dk, dv from dr; cs_k, cs_v
 * (both NULL or both set) their column sums as flash_wide_bwd_dq's cs. */
pp_status_t flash_wide_bwd_dkdv(bf16 *dk, bf16 *dv, int ld_d, const bf16 *q, const bf16 *k,
                                const bf16 *v, int ld_qkv, const bf16 *dout, int ld_o,
                                const float *lse, const float *dr, float *cs_k, float *cs_v,
                                int ld_cs, int BH, int H, int T, cudaStream_t stream);

/* flash_hopper.cu: attention on warpgroup MMA and TMA (sm_90a). flash_hopper_available: 1 where
 * it runs (built for sm_90a, the current device of compute capability 9.0, the driver's tensor-map
 * encoder, PPSCHED_FLASH_MMA not "sync"); the launchers' own checks (16-byte aligned operands,
 * row strides a multiple of 8) are all the tensor maps need. flash_hopper_fwd:
 * attention_flash_fwd's contract, its checks done by the caller; flash_hopper_bwd: dq, dk, dv
 * from dr (Σ dout·o per row, written before on the stream), without column sums. */
int flash_hopper_available(void);
pp_status_t flash_hopper_fwd(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k,
                             const bf16 *v, int ld_qkv, int B, int H, int T, int d,
                             cudaStream_t stream);

pp_status_t flash_hopper_bwd(bf16 *dq, bf16 *dk, bf16 *dv, int ld_d, const bf16 *dout, int ld_o,
                             const bf16 *q, const bf16 *k, const bf16 *v, int ld_qkv,
                             const float *lse, const float *dr, int B, int H, int T, int d,
                             cudaStream_t stream);

#endif /* PP_FLASH_UTIL_CUH */
