/*
 * flash_attention.cu — fused causal self-attention, forward and backward, on bf16 q, k, v, o in
 * token-major rows (kernels.h: head h of row t at columns h·d.., any row stride): the T×T scores
 * and probabilities live only in registers and shared memory, never in global memory, and q, k, v
 * are read where the QKV matmul wrote them.
 *
 * Tiles: 64 query rows × 64 keys, one CTA of 4 warps per (64-row block, b·h); warp w owns the 16
 * rows 16w..16w+15 of every 64-row tile it produces. Causal: key blocks after the query block are
 * skipped; inside the diagonal block, key j > query t is masked.
 *
 * Forward (flash_fwd_kernel, raw mma.sync with documented fragment layouts, S and P in
 * registers): for each key block kb ≤ qb, S = Q·Kᵀ, online softmax per row in base 2 (running
 * max m, running sum l, both fp32), O = α·O + P·V with P rounded to bf16. At the end O /= l and
 * LSE = (m + log2 l)·ln 2 (natural log, fp32 [B,H,T]) is saved for the backward. K and V stream
 * through two cp.async buffers.
 * Backward (WMMA 16×16×16 fragments; element-wise work on an accumulator uses the (row, column) of
 * each of its elements, read once from a fragment loaded from a tile holding its own indices, so
 * nothing assumes the WMMA layout), three kernels, no atomics (bitwise deterministic):
 *   flash_bwd_dot_kernel   Dr[row] = Σ_i dO·O (fp32, in the caller's scratch);
 *   flash_bwd_dkdv_kernel  per key block, over query blocks qb ≥ kb: P = exp(scale·S − LSE)
 *                          recomputed, dV += Pᵀ·dO, dP = dO·Vᵀ, dS = scale·P∘(dP − Dr),
 *                          dK += dSᵀ·Q;
 *   flash_bwd_dq_kernel    per query block, over key blocks kb ≤ qb: the same dS, dQ += dS·K.
 * The backward kernels stream their tiles (Q, dO for dK/dV; K, V for dQ) with cp.async: at d = 64
 * two buffers, the next tile landing while the current one is used (one __syncthreads a step); at
 * d = 128 one buffer (two would halve the CTAs per SM). Shapes: d = 64 or 128, T a multiple of 64,
 * any B·H, bf16 only. The launchers allocate nothing and enqueue on `stream`.
 */
#include "kernel_util.cuh"

#include <limits.h>
#include <mma.h>

namespace wmma = nvcuda::wmma;

#define FA_TILE    64 /* query rows and keys per tile */
#define FA_WARPS   4  /* warps per CTA, 16 tile rows each */
#define FA_THREADS (32 * FA_WARPS)
#define FA_LDP     (FA_TILE + 8) /* leading dimension of the bf16 64×64 tiles (P, dS) */
#define FA_LOG2E   1.4426950408889634f
#define FA_LN2     0.6931471805599453f

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a_t;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b_row_t;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_b_col_t;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_acc_t;

#define FA_NE ((int)frag_acc_t::num_elements) /* accumulator elements per thread */
static_assert(sizeof(frag_a_t::x) == 16 && sizeof(frag_b_row_t::x) == 16 &&
                  sizeof(frag_b_col_t::x) == 16,
              "a bf16 16×16 operand fragment is four 32-bit registers (fa_load_a, fa_load_b)");

/* 2^x for the backward's recomputed P: the MUFU instruction exp2f also ends in, without exp2f's
 * rescaling for results below 2^-126 (flushed to 0 here; they round to 0 in bf16 P anyway). */
__device__ __forceinline__ float fa_exp2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Loads of the bf16 operand fragments from shared memory. wmma::load_matrix_sync takes a generic
 * pointer and, for bf16, compiles to generic 32-bit loads (LD.E, plus MOVM for the transposed
 * ones); the same PTX wmma.load with the .shared state space lets ptxas use shared-memory loads.
 * The fragment registers and their layout are exactly those of load_matrix_sync: same
 * instruction, same operands. The "memory" clobber keeps them ordered with the C++ stores and
 * barriers around them. ld is in elements. */
__device__ __forceinline__ unsigned fa_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void fa_load_a(frag_a_t &f, const bf16 *p, unsigned ld)
{
    unsigned *r = reinterpret_cast<unsigned *>(f.x);
    asm volatile("wmma.load.a.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem_addr(p)), "r"(ld)
                 : "memory");
}

__device__ __forceinline__ void fa_load_b(frag_b_row_t &f, const bf16 *p, unsigned ld)
{
    unsigned *r = reinterpret_cast<unsigned *>(f.x);
    asm volatile("wmma.load.b.sync.aligned.row.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem_addr(p)), "r"(ld)
                 : "memory");
}

__device__ __forceinline__ void fa_load_b(frag_b_col_t &f, const bf16 *p, unsigned ld)
{
    unsigned *r = reinterpret_cast<unsigned *>(f.x);
    asm volatile("wmma.load.b.sync.aligned.col.m16n16k16.shared.bf16 {%0, %1, %2, %3}, [%4], %5;\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(fa_smem_addr(p)), "r"(ld)
                 : "memory");
}

/* Shared-memory sizes (bytes) of the three tiled kernels. Every piece is a multiple of 32 bytes,
 * so pieces laid end to end keep the 32-byte alignment WMMA loads and stores need. A [64,d] bf16
 * tile has leading dimension d + 8 (rows 16 bytes apart modulo 128: no bank conflicts). */
template <int D> struct fa_smem {
    static constexpr int LDH = D + 8;
    static constexpr size_t tile_h = (size_t)FA_TILE * LDH * sizeof(bf16);     /* Q, K, V, dO */
    static constexpr size_t tile_p = (size_t)FA_TILE * FA_LDP * sizeof(bf16);  /* P, dS */
    static constexpr size_t index = 256 * sizeof(float);                       /* 16×16 indices */
    static constexpr size_t rows = FA_TILE * sizeof(float);                    /* one per row */
    static constexpr int NBUF = D == 64 ? 2 : 1; /* buffers of the backward's streamed tiles */
    static constexpr size_t fwd = 5 * tile_h; /* Q, then K and V in two buffers */
    static constexpr size_t dkdv = (2 + 2 * NBUF) * tile_h + 2 * tile_p + index + 2 * NBUF * rows;
    static constexpr size_t dq = (2 + 2 * NBUF) * tile_h + tile_p + index + 2 * rows;
};

/* ---- helpers --------------------------------------------------------------------------------- */

/* The tile row and column of each element of this thread's accumulator fragments. */
struct fa_map {
    int row[FA_NE], col[FA_NE];
};

/* Fill the 16×16 index tile (idx[i] = i); all threads of the CTA call this, then __syncthreads. */
__device__ __forceinline__ void fa_index_fill(float *idx)
{
    for (int i = threadIdx.x; i < 256; i += FA_THREADS)
        idx[i] = (float)i;
}

/* Read the map from a fragment loaded from the index tile (warp-wide). */
__device__ __forceinline__ void fa_map_init(fa_map &m, const float *idx)
{
    frag_acc_t f;
    wmma::load_matrix_sync(f, idx, 16, wmma::mem_row_major);
#pragma unroll
    for (int i = 0; i < FA_NE; i++) {
        const int e = (int)f.x[i];
        m.row[i] = e >> 4;
        m.col[i] = e & 15;
    }
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
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src) : "memory");
}

__device__ __forceinline__ void fa_cp4(void *dst, const void *src)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(src) : "memory");
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

/* Write a warp's accumulators acc[D/16] (16 rows × D) as bf16 into its 16 rows of a shared tile,
 * then copy those rows to dst (row stride ld). `stage` is the warp's first row in the tile. */
template <int D>
__device__ __forceinline__ void fa_store_rows(bf16 *dst, int ld, bf16 *stage,
                                              const frag_acc_t *acc, const fa_map &map, int lane)
{
    constexpr int LDH = fa_smem<D>::LDH, V = D / 8;
#pragma unroll
    for (int f = 0; f < D / 16; f++)
#pragma unroll
        for (int i = 0; i < FA_NE; i++)
            stage[map.row[i] * LDH + 16 * f + map.col[i]] = __float2bfloat16_rn(acc[f].x[i]);
    __syncwarp();
    for (int e = lane; e < 16 * V; e += 32) {
        const int r = e / V, c = (e % V) * 8;
        store128(dst + (size_t)r * ld + c, load128(stage + r * LDH + c));
    }
}

/* ---- forward --------------------------------------------------------------------------------- */

/* The forward runs on raw mma.sync m16n8k16 (bf16 in, fp32 accumulate), whose fragment layouts
 * PTX documents (g = lane / 4, t = lane % 4): an accumulator holds (row g, columns 2t, 2t+1) in
 * c0, c1 and (row g + 8, the same columns) in c2, c3; an A operand holds rows g and g + 8 at
 * columns 2t, 2t+1 (a0..a3) and 2t+8, 2t+9 (a4..a7); a B operand holds column g at rows 2t, 2t+1
 * (b0, b1) and 2t+8, 2t+9 (b2, b3). So the scores of two adjacent 8-key tiles are, element for
 * element, the A operand of P·V over those 16 keys: S and P never leave registers. Operands come
 * from shared memory through ldmatrix (.trans for V, whose rows are keys). */

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

/* Grid: BH · T/64 CTAs, the last query blocks (the most work) first. Warp w owns query rows
 * w16..w16+15 of the block; lane (g, t) holds rows g and g + 8 of them. K and V tiles stream
 * through two buffers (cp.async), the next block landing while the current one is used. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_fwd_kernel(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                     int ld_qkv, int BH, int H, int T, float scale_log2)
{
    typedef fa_smem<D> S;
    constexpr int LDH = S::LDH, TILE = FA_TILE * LDH;
    constexpr int NKC = D / 16; /* 16-wide chunks of d (the k of Q·Kᵀ) */
    constexpr int NDT = D / 8;  /* 8-wide tiles of d (the n of P·V) */
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Qs = (bf16 *)fa_smem_raw;
    bf16 *KVb = Qs + TILE; /* buffer i: K at KVb + 2i·TILE, V at + TILE */

    const int nb = T / FA_TILE;
    const int qb = nb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w16 = 16 * warp;
    const int g = lane >> 2, t4 = lane & 3;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, D);

    auto issue = [&](int kb) {
        const int b = kb & 1;
        const size_t off = in0 + (size_t)kb * FA_TILE * ld_qkv;
        fa_load_tile_async<D>(KVb + 2 * b * TILE, k + off, ld_qkv);
        fa_load_tile_async<D>(KVb + (2 * b + 1) * TILE, v + off, ld_qkv);
        fa_cp_commit();
    };
    fa_load_tile_async<D>(Qs, q + in0 + (size_t)qb * FA_TILE * ld_qkv, ld_qkv);
    issue(0);

    unsigned qa[NKC][4]; /* this warp's 16 query rows as A operands, loaded at the first step */
    float acc[NDT][4];
#pragma unroll
    for (int n = 0; n < NDT; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}; /* base-2 running max of rows g, g + 8 */
    float l_run[2] = {0.0f, 0.0f};           /* this lane's share of their running sums */
    const int row0 = w16 + g;                /* row g in the 64-row block; row g + 8 is row0 + 8 */

    for (int kb = 0; kb <= qb; kb++) {
        /* Block kb has landed and every warp is done with block kb − 1, whose buffer the next
         * copy overwrites. */
        fa_cp_wait_all();
        __syncthreads();
        if (kb < qb) issue(kb + 1);
        if (kb == 0) {
#pragma unroll
            for (int c = 0; c < NKC; c++)
                fa_ldsm4(qa[c], Qs + (w16 + (lane & 15)) * LDH + 16 * c + 8 * (lane >> 4));
        }
        const bf16 *Ks = KVb + 2 * (kb & 1) * TILE, *Vs = Ks + TILE;

        /* S = Q·Kᵀ: 8 tiles of 8 keys; one ldmatrix.x4 gives a tile's B operands for two
         * chunks of d (K rows are keys, contiguous along d: B as stored). */
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
            for (int c = 0; c < NKC; c += 2) {
                unsigned b[4];
                fa_ldsm4(b, Ks + (8 * j + (lane & 7)) * LDH + 16 * c + 8 * (lane >> 3));
                fa_mma(s[j], qa[c], b[0], b[1]);
                fa_mma(s[j], qa[c + 1], b[2], b[3]);
            }
        }

        /* Online softmax in base 2; on the diagonal block key > query is masked. */
        const bool diag = kb == qb;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = 8 * j + 2 * t4 + (e & 1), row = row0 + 8 * (e >> 1);
                const float x = (diag && key > row) ? -INFINITY : s[j][e] * scale_log2;
                s[j][e] = x;
                mx[e >> 1] = fmaxf(mx[e >> 1], x);
            }
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            /* the four lanes of a row group hold its 64 keys; key 0 is never masked: finite */
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
            const float m_new = fmaxf(m_run[h], mx[h]);
            alpha[h] = fa_exp2(m_run[h] - m_new); /* 0 on the first block */
            m_run[h] = m_new;
            l_run[h] *= alpha[h];
        }
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = fa_exp2(s[j][e] - m_run[e >> 1]); /* masked: exp2(−inf) = 0 */
                s[j][e] = p;
                l_run[e >> 1] += p;
            }
#pragma unroll
        for (int n = 0; n < NDT; n++) {
            acc[n][0] *= alpha[0], acc[n][1] *= alpha[0];
            acc[n][2] *= alpha[1], acc[n][3] *= alpha[1];
        }

        /* O += P·V over 16 keys at a time: P (bf16) from the score registers; V rows are keys,
         * so its B operands come through ldmatrix.trans, two 8-wide tiles of d per x4. */
#pragma unroll
        for (int c = 0; c < 4; c++) {
            unsigned pa[4];
            pa[0] = fa_pack(s[2 * c][0], s[2 * c][1]);
            pa[1] = fa_pack(s[2 * c][2], s[2 * c][3]);
            pa[2] = fa_pack(s[2 * c + 1][0], s[2 * c + 1][1]);
            pa[3] = fa_pack(s[2 * c + 1][2], s[2 * c + 1][3]);
#pragma unroll
            for (int n = 0; n < NDT; n += 2) {
                unsigned b[4];
                fa_ldsm4_t(b, Vs + (16 * c + (lane & 7) + 8 * ((lane >> 3) & 1)) * LDH + 8 * n +
                                  8 * (lane >> 4));
                fa_mma(acc[n], pa, b[0], b[1]);
                fa_mma(acc[n + 1], pa, b[2], b[3]);
            }
        }
    }

    /* O /= l and lse = (m + log2 l)·ln 2 per row; O staged in the warp's own rows of Qs (its Q
     * is in registers) for 16-byte stores. */
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
    bf16 *stage = Qs + w16 * LDH;
#pragma unroll
    for (int n = 0; n < NDT; n++) {
        *reinterpret_cast<unsigned *>(stage + g * LDH + 8 * n + 2 * t4) =
            fa_pack(acc[n][0] * inv[0], acc[n][1] * inv[0]);
        *reinterpret_cast<unsigned *>(stage + (g + 8) * LDH + 8 * n + 2 * t4) =
            fa_pack(acc[n][2] * inv[1], acc[n][3] * inv[1]);
    }
    __syncwarp();
    bf16 *dst = o + fa_head_offset(bh, H, T, ld_o, D) + ((size_t)qb * FA_TILE + w16) * ld_o;
    for (int e = lane; e < 16 * (D / 8); e += 32) {
        const int r = e / (D / 8), c = (e % (D / 8)) * 8;
        store128(dst + (size_t)r * ld_o + c, load128(stage + r * LDH + c));
    }
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
        const size_t at = fa_head_offset((int)(row / T), H, T, ld_o, D) +
                          (size_t)(row % T) * ld_o + part * 8;
        const pack128<bf16> a = load128(dout + at);
        const pack128<bf16> b = load128(o + at);
#pragma unroll
        for (int j = 0; j < 8; j++)
            acc += to_f32(a.v[j]) * to_f32(b.v[j]);
    }
#pragma unroll
    for (int off = LPR / 2; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (row < rows && part == 0) dr[row] = acc;
}

/* Loads the 64 rows' lse (converted to base 2) and dr of query block qb into shared memory. */
__device__ __forceinline__ void fa_load_rows(float *lse2_s, float *dr_s, const float *lse,
                                             const float *dr, size_t first)
{
    if (threadIdx.x < FA_TILE) {
        lse2_s[threadIdx.x] = lse[first + threadIdx.x] * FA_LOG2E;
        dr_s[threadIdx.x] = dr[first + threadIdx.x];
    }
}

/* fa_load_rows through cp.async, lse in natural log (each copying thread converts its own). */
__device__ __forceinline__ void fa_load_rows_async(float *lse_s, float *dr_s, const float *lse,
                                                   const float *dr, size_t first)
{
    if (threadIdx.x < FA_TILE) {
        fa_cp4(lse_s + threadIdx.x, lse + first + threadIdx.x);
        fa_cp4(dr_s + threadIdx.x, dr + first + threadIdx.x);
    }
}

/* dK, dV of one key block. Grid: BH · T/64 CTAs, the first key blocks (the most work) first.
 * Warp w owns keys w16..w16+15: it computes Sᵀ and dPᵀ for its keys × 64 queries, then adds
 * Pᵀ·dO and dSᵀ·Q for them. Q, dO and the rows of query block qb stream through NBUF buffers;
 * Pᵀ and dSᵀ rows are written and read by their own warp only. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS, D == 64 ? 3 : 1)
    flash_bwd_dkdv_kernel(bf16 *dk, bf16 *dv, int ld_d, const bf16 *q, const bf16 *k,
                          const bf16 *v, int ld_qkv, const bf16 *dout, int ld_o, const float *lse,
                          const float *dr, int BH, int H, int T, float scale, float scale_log2)
{
    typedef fa_smem<D> S;
    constexpr int LDH = S::LDH, NF = D / 16, NBUF = S::NBUF;
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Ks = (bf16 *)fa_smem_raw;
    bf16 *Vs = (bf16 *)(fa_smem_raw + S::tile_h);
    bf16 *Qb =
        (bf16 *)(fa_smem_raw + 2 * S::tile_h); /* buffer i at Qb + i·2·tile (Q), + tile (dO) */
    bf16 *Pt = (bf16 *)(fa_smem_raw + (2 + 2 * NBUF) * S::tile_h); /* Pᵀ [key][query] */
    bf16 *dSt = (bf16 *)(fa_smem_raw + (2 + 2 * NBUF) * S::tile_h + S::tile_p); /* dSᵀ */
    float *idx = (float *)(fa_smem_raw + (2 + 2 * NBUF) * S::tile_h + 2 * S::tile_p);
    float *rows_s = idx + 256; /* buffer i: lse at rows_s + i·128, dr at + 64 */
    constexpr int TILE = FA_TILE * LDH;

    const int nb = T / FA_TILE;
    const int kb = (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w16 = 16 * warp;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, D), row0 = (size_t)bh * T;
    /* Rows of query block kb, the first streamed; each step moves one block further. */
    const bf16 *q_next = q + in0 + (size_t)kb * FA_TILE * ld_qkv;
    const bf16 *do_next = dout + fa_head_offset(bh, H, T, ld_o, D) + (size_t)kb * FA_TILE * ld_o;

    /* Query block kb + it into buffer it % NBUF. */
    auto issue = [&](int it) {
        const int b = it % NBUF;
        fa_load_tile_async<D>(Qb + 2 * b * TILE, q_next, ld_qkv);
        fa_load_tile_async<D>(Qb + (2 * b + 1) * TILE, do_next, ld_o);
        q_next += (size_t)FA_TILE * ld_qkv;
        do_next += (size_t)FA_TILE * ld_o;
        fa_load_rows_async(rows_s + 2 * FA_TILE * b, rows_s + 2 * FA_TILE * b + FA_TILE, lse, dr,
                           row0 + (size_t)(kb + it) * FA_TILE);
        fa_cp_commit();
    };

    fa_load_tile_async<D>(Ks, k + in0 + (size_t)kb * FA_TILE * ld_qkv, ld_qkv);
    fa_load_tile_async<D>(Vs, v + in0 + (size_t)kb * FA_TILE * ld_qkv, ld_qkv);
    issue(0);
    fa_index_fill(idx);
    __syncthreads();
    fa_map map;
    fa_map_init(map, idx);
    fa_cp_wait_all();
    __syncthreads();
    /* At d = 64 the warp's K and V rows stay in registers (at d = 128 they would spill). */
    constexpr bool KV_REG = D == 64;
    frag_a_t ka[KV_REG ? NF : 1], va[KV_REG ? NF : 1];
    frag_acc_t acc_dk[NF], acc_dv[NF];
#pragma unroll
    for (int f = 0; f < NF; f++) {
        if constexpr (KV_REG) {
            fa_load_a(ka[f], Ks + w16 * LDH + 16 * f, LDH);
            fa_load_a(va[f], Vs + w16 * LDH + 16 * f, LDH);
        }
        wmma::fill_fragment(acc_dk[f], 0.0f);
        wmma::fill_fragment(acc_dv[f], 0.0f);
    }

    const int nq = nb - kb;
    for (int it = 0; it < nq; it++) {
        /* Block it has landed, and every warp is done with block it − 1 (whose buffer the next
         * copy overwrites when NBUF = 2). */
        const int b = it % NBUF;
        float *lse2_s = rows_s + 2 * FA_TILE * b; /* lse in base 2 once converted below */
        const float *dr_s = lse2_s + FA_TILE;
        fa_cp_wait_all();
        /* A thread sees its own completed copies before the barrier: convert the lse it copied. */
        if (threadIdx.x < FA_TILE) lse2_s[threadIdx.x] *= FA_LOG2E;
        __syncthreads();
        if (NBUF == 2 && it + 1 < nq) issue(it + 1);
        const bf16 *Qs = Qb + 2 * b * TILE, *dOs = Qb + (2 * b + 1) * TILE;

        /* Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ for keys w16.. × queries 16n..16n+15. */
        const bool diag = it == 0;
#pragma unroll
        for (int n = 0; n < 4; n++) {
            frag_acc_t st, dpt;
            wmma::fill_fragment(st, 0.0f);
            wmma::fill_fragment(dpt, 0.0f);
#pragma unroll
            for (int f = 0; f < NF; f++) {
                frag_b_col_t bq; /* Qᵀ, dOᵀ: element (dim, query) at X[query·LDH + dim] */
                fa_load_b(bq, Qs + 16 * n * LDH + 16 * f, LDH);
                if constexpr (KV_REG) {
                    wmma::mma_sync(st, ka[f], bq, st);
                } else {
                    frag_a_t a;
                    fa_load_a(a, Ks + w16 * LDH + 16 * f, LDH);
                    wmma::mma_sync(st, a, bq, st);
                }
                fa_load_b(bq, dOs + 16 * n * LDH + 16 * f, LDH);
                if constexpr (KV_REG) {
                    wmma::mma_sync(dpt, va[f], bq, dpt);
                } else {
                    frag_a_t a;
                    fa_load_a(a, Vs + w16 * LDH + 16 * f, LDH);
                    wmma::mma_sync(dpt, a, bq, dpt);
                }
            }
#pragma unroll
            for (int i = 0; i < FA_NE; i++) {
                const int key = w16 + map.row[i], qry = 16 * n + map.col[i];
                const float e = fa_exp2(st.x[i] * scale_log2 - lse2_s[qry]);
                const float p = (diag && key > qry) ? 0.0f : e;
                const float ds = p * (dpt.x[i] - dr_s[qry]) * scale;
                Pt[key * FA_LDP + qry] = __float2bfloat16_rn(p);
                dSt[key * FA_LDP + qry] = __float2bfloat16_rn(ds);
            }
        }
        __syncwarp();

        /* dV += Pᵀ·dO and dK += dSᵀ·Q over the block's 64 queries, 16 at a time. */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            frag_a_t pa, dsa;
            fa_load_a(pa, Pt + w16 * FA_LDP + 16 * kk, FA_LDP);
            fa_load_a(dsa, dSt + w16 * FA_LDP + 16 * kk, FA_LDP);
#pragma unroll
            for (int f = 0; f < NF; f++) {
                frag_b_row_t bq;
                fa_load_b(bq, dOs + 16 * kk * LDH + 16 * f, LDH);
                wmma::mma_sync(acc_dv[f], pa, bq, acc_dv[f]);
                fa_load_b(bq, Qs + 16 * kk * LDH + 16 * f, LDH);
                wmma::mma_sync(acc_dk[f], dsa, bq, acc_dk[f]);
            }
        }
        __syncwarp(); /* the warp's lanes are done reading its Pᵀ, dSᵀ rows */
        if (NBUF == 1 && it + 1 < nq) {
            __syncthreads(); /* every warp is done with the only buffer */
            issue(it + 1);
        }
    }
    __syncthreads(); /* every warp is done reading buffer 0 (no copy is pending): stage dK, dV */
    const size_t out = fa_head_offset(bh, H, T, ld_d, D) + ((size_t)kb * FA_TILE + w16) * ld_d;
    fa_store_rows<D>(dk + out, ld_d, Qb + w16 * LDH, acc_dk, map, lane);
    fa_store_rows<D>(dv + out, ld_d, Qb + TILE + w16 * LDH, acc_dv, map, lane);
}

/* dQ of one query block. Grid: BH · T/64 CTAs, the last query blocks (the most work) first.
 * Warp w owns queries w16..w16+15: S and dP for its queries × 64 keys, then dQ += dS·K. K and V
 * of key block kb stream through NBUF buffers; dS rows are written and read by their own warp. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd_dq_kernel(bf16 *dq, int ld_d, const bf16 *q, const bf16 *k, const bf16 *v,
                        int ld_qkv, const bf16 *dout, int ld_o, const float *lse, const float *dr,
                        int BH, int H, int T, float scale, float scale_log2)
{
    typedef fa_smem<D> S;
    constexpr int LDH = S::LDH, NF = D / 16, NBUF = S::NBUF;
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Qs = (bf16 *)fa_smem_raw;
    bf16 *dOs = (bf16 *)(fa_smem_raw + S::tile_h);
    bf16 *Kb =
        (bf16 *)(fa_smem_raw + 2 * S::tile_h); /* buffer i at Kb + i·2·tile (K), + tile (V) */
    bf16 *dSs = (bf16 *)(fa_smem_raw + (2 + 2 * NBUF) * S::tile_h); /* dS [query][key] */
    float *idx = (float *)(fa_smem_raw + (2 + 2 * NBUF) * S::tile_h + S::tile_p);
    float *lse2_s = idx + 256, *dr_s = lse2_s + FA_TILE;
    constexpr int TILE = FA_TILE * LDH;

    const int nb = T / FA_TILE;
    const int qb = nb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w16 = 16 * warp;
    const size_t in0 = fa_head_offset(bh, H, T, ld_qkv, D);

    /* Key block kb into buffer kb % NBUF. */
    auto issue = [&](int kb) {
        const int b = kb % NBUF;
        const size_t off = in0 + (size_t)kb * FA_TILE * ld_qkv;
        fa_load_tile_async<D>(Kb + 2 * b * TILE, k + off, ld_qkv);
        fa_load_tile_async<D>(Kb + (2 * b + 1) * TILE, v + off, ld_qkv);
        fa_cp_commit();
    };

    fa_load_tile_async<D>(Qs, q + in0 + (size_t)qb * FA_TILE * ld_qkv, ld_qkv);
    fa_load_tile_async<D>(dOs,
                          dout + fa_head_offset(bh, H, T, ld_o, D) + (size_t)qb * FA_TILE * ld_o,
                          ld_o);
    issue(0);
    fa_load_rows(lse2_s, dr_s, lse, dr, (size_t)bh * T + (size_t)qb * FA_TILE);
    fa_index_fill(idx);
    fa_cp_wait_all();
    __syncthreads();
    fa_map map;
    fa_map_init(map, idx);
    frag_a_t qa[NF], da[NF]; /* this warp's rows of Q and dO, kept in registers */
    frag_acc_t acc[NF];
#pragma unroll
    for (int f = 0; f < NF; f++) {
        fa_load_a(qa[f], Qs + w16 * LDH + 16 * f, LDH);
        fa_load_a(da[f], dOs + w16 * LDH + 16 * f, LDH);
        wmma::fill_fragment(acc[f], 0.0f);
    }

    for (int kb = 0; kb <= qb; kb++) {
        /* Block kb has landed, and every warp is done with block kb − 1 (whose buffer the next
         * copy overwrites when NBUF = 2). */
        fa_cp_wait_all();
        __syncthreads();
        if (NBUF == 2 && kb < qb) issue(kb + 1);
        const int b = kb % NBUF;
        const bf16 *Ks = Kb + 2 * b * TILE, *Vs = Kb + (2 * b + 1) * TILE;

        /* S = Q·Kᵀ and dP = dO·Vᵀ for queries w16.. × keys 16n..16n+15. */
        const bool diag = kb == qb;
#pragma unroll
        for (int n = 0; n < 4; n++) {
            frag_acc_t s, dp;
            wmma::fill_fragment(s, 0.0f);
            wmma::fill_fragment(dp, 0.0f);
#pragma unroll
            for (int f = 0; f < NF; f++) {
                frag_b_col_t bk; /* Kᵀ, Vᵀ: element (dim, key) at X[key·LDH + dim] */
                fa_load_b(bk, Ks + 16 * n * LDH + 16 * f, LDH);
                wmma::mma_sync(s, qa[f], bk, s);
                fa_load_b(bk, Vs + 16 * n * LDH + 16 * f, LDH);
                wmma::mma_sync(dp, da[f], bk, dp);
            }
#pragma unroll
            for (int i = 0; i < FA_NE; i++) {
                const int qry = w16 + map.row[i], key = 16 * n + map.col[i];
                const float e = fa_exp2(s.x[i] * scale_log2 - lse2_s[qry]);
                const float p = (diag && key > qry) ? 0.0f : e;
                dSs[qry * FA_LDP + key] = __float2bfloat16_rn(p * (dp.x[i] - dr_s[qry]) * scale);
            }
        }
        __syncwarp();

        /* dQ += dS·K over the block's 64 keys, 16 at a time. */
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            frag_a_t dsa;
            fa_load_a(dsa, dSs + w16 * FA_LDP + 16 * kk, FA_LDP);
#pragma unroll
            for (int f = 0; f < NF; f++) {
                frag_b_row_t bk;
                fa_load_b(bk, Ks + 16 * kk * LDH + 16 * f, LDH);
                wmma::mma_sync(acc[f], dsa, bk, acc[f]);
            }
        }
        __syncwarp(); /* the warp's lanes are done reading its dS rows */
        if (NBUF == 1 && kb < qb) {
            __syncthreads(); /* every warp is done with the only buffer */
            issue(kb + 1);
        }
    }
    /* The warp's rows of Qs are free (its Q is in registers): stage dQ there. */
    fa_store_rows<D>(dq + fa_head_offset(bh, H, T, ld_d, D) + ((size_t)qb * FA_TILE + w16) * ld_d,
                     ld_d, Qs + w16 * LDH, acc, map, lane);
}

/* ---- launchers ------------------------------------------------------------------------------- */

int attention_flash_supported(int T, int d, pp_dtype_t dtype)
{
    return dtype == PP_DTYPE_BF16 && (d == 64 || d == 128) && T > 0 && T % FA_TILE == 0;
}

size_t attention_flash_bwd_scratch_bytes(int B, int H, int T)
{
    if (B <= 0 || H <= 0 || T <= 0) return 0;
    return (size_t)B * H * T * sizeof(float);
}

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

/* Kernels above 48 KiB of dynamic shared memory must ask for it (per device, so every launch). */
template <typename K> static pp_status_t fa_smem_allow(K kernel, size_t bytes)
{
    PP_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
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
static pp_status_t fa_bwd_t(void *dq, void *dk, void *dv, int ld_d, const void *dout,
                            const void *q, const void *k, const void *v, int ld_qkv, const void *o,
                            int ld_o, const float *lse, float *dr, int BH, int H, int T,
                            cudaStream_t stream)
{
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = FA_LOG2E * scale;
    const unsigned grid = (unsigned)(BH * (T / FA_TILE));
    const size_t rows = (size_t)BH * T;
    const int dot_threads = 256;
    const size_t dot_blocks = (rows * (D / 8) + dot_threads - 1) / dot_threads;

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
    if (d == 64) return fa_fwd_t<64>(o, ld_o, lse, q, k, v, ld_qkv, B * H, H, T, stream);
    return fa_fwd_t<128>(o, ld_o, lse, q, k, v, ld_qkv, B * H, H, T, stream);
}

pp_status_t attention_flash_bwd(void *dq, void *dk, void *dv, int ld_d, const void *dout,
                                const void *q, const void *k, const void *v, int ld_qkv,
                                const void *o, int ld_o, const float *lse, void *scratch, int B,
                                int H, int T, int d, pp_dtype_t dtype, cudaStream_t stream)
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
        PP_FAIL(PP_ERR_INTERNAL,
                "%s: dq, dk, dv, dout, q, k, v and o must be 16-byte aligned", what);
    if (((uintptr_t)scratch & 3u) != 0)
        PP_FAIL(PP_ERR_INTERNAL, "%s: scratch must be 4-byte aligned", what);
    if (d == 64)
        return fa_bwd_t<64>(dq, dk, dv, ld_d, dout, q, k, v, ld_qkv, o, ld_o, lse,
                            (float *)scratch, B * H, H, T, stream);
    return fa_bwd_t<128>(dq, dk, dv, ld_d, dout, q, k, v, ld_qkv, o, ld_o, lse, (float *)scratch,
                         B * H, H, T, stream);
}
