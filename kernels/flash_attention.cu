/*
 * flash_attention.cu — fused causal self-attention, forward and backward, on bf16 q, k, v, o in
 * the head layout [B,H,T,d]: the T×T scores and probabilities live only in registers and shared
 * memory, never in global memory.
 *
 * Tiles: 64 query rows × 64 keys, one CTA of 4 warps per (64-row block, b·h); warp w owns the 16
 * rows 16w..16w+15 of every 64-row tile it produces. Products run on tensor cores through WMMA
 * (bf16 16×16×16 fragments, fp32 accumulators). Element-wise work on an accumulator uses the
 * (row, column) of each of its elements, read once from a fragment loaded from a tile holding its
 * own indices, so nothing assumes the fragment layout. Causal: key blocks after the query block
 * are skipped; inside the diagonal block, key j > query t is masked.
 *
 * Forward (flash_fwd_kernel): for each key block kb ≤ qb, S = Q·Kᵀ, online softmax per row in
 * base 2 (running max m, running sum l, both fp32), O = α·O + P·V with P rounded to bf16. At the
 * end O /= l and LSE = (m + log2 l)·ln 2 (natural log, fp32 [B,H,T]) is saved for the backward.
 * Backward, three kernels, no atomics (bitwise deterministic):
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
#define FA_LDS     (FA_TILE + 4) /* leading dimension of the fp32 64×64 score tile */
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
    static constexpr size_t tile_s = (size_t)FA_TILE * FA_LDS * sizeof(float); /* S (forward) */
    static constexpr size_t index = 256 * sizeof(float);                       /* 16×16 indices */
    static constexpr size_t rows = FA_TILE * sizeof(float);                    /* one per row */
    static constexpr int NBUF = D == 64 ? 2 : 1; /* buffers of the backward's streamed tiles */
    static constexpr size_t fwd = 3 * tile_h + tile_s + tile_p + index + rows;
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

/* Copy the 64 rows of a [*, D] bf16 matrix at src (row stride D) into a shared tile (leading
 * dimension D + 8), 16 bytes per access. All threads of the CTA call this. */
template <int D> __device__ __forceinline__ void fa_load_tile(bf16 *dst, const bf16 *src)
{
    constexpr int V = D / 8; /* 16-byte packs per row */
    for (int e = threadIdx.x; e < FA_TILE * V; e += FA_THREADS) {
        const int r = e / V, c = (e % V) * 8;
        store128(dst + r * fa_smem<D>::LDH + c, load128(src + (size_t)r * D + c));
    }
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

/* fa_load_tile through cp.async: issues the copies and returns (the caller commits and waits). */
template <int D> __device__ __forceinline__ void fa_load_tile_async(bf16 *dst, const bf16 *src)
{
    constexpr int V = D / 8; /* 16-byte packs per row */
    static_assert(FA_TILE * V % FA_THREADS == 0, "whole packs per thread");
#pragma unroll
    for (int i = 0; i < FA_TILE * V / FA_THREADS; i++) {
        const int e = (int)threadIdx.x + i * FA_THREADS, r = e / V, c = (e % V) * 8;
        fa_cp16(dst + r * fa_smem<D>::LDH + c, src + (size_t)r * D + c);
    }
}

/* Write a warp's accumulators acc[D/16] (16 rows × D) as bf16 into its 16 rows of a shared tile,
 * then copy those rows to dst (row stride D). `stage` is the warp's first row in the tile. */
template <int D>
__device__ __forceinline__ void fa_store_rows(bf16 *dst, bf16 *stage, const frag_acc_t *acc,
                                              const fa_map &map, int lane)
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
        store128(dst + (size_t)r * D + c, load128(stage + r * LDH + c));
    }
}

/* ---- forward --------------------------------------------------------------------------------- */

/* Grid: BH · T/64 CTAs, the last query blocks (the most work) first. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_fwd_kernel(bf16 *o, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int BH,
                     int T, float scale_log2)
{
    typedef fa_smem<D> S;
    constexpr int LDH = S::LDH, NF = D / 16; /* NF: 16-wide fragments across d */
    extern __shared__ __align__(128) unsigned char fa_smem_raw[];
    bf16 *Qs = (bf16 *)fa_smem_raw;
    bf16 *Ks = (bf16 *)(fa_smem_raw + S::tile_h);
    bf16 *Vs = (bf16 *)(fa_smem_raw + 2 * S::tile_h);
    float *Ss = (float *)(fa_smem_raw + 3 * S::tile_h);
    bf16 *Ps = (bf16 *)(fa_smem_raw + 3 * S::tile_h + S::tile_s);
    float *idx = (float *)(fa_smem_raw + 3 * S::tile_h + S::tile_s + S::tile_p);
    float *row_scale = idx + 256; /* [64]: α of the current step, then 1/l */

    const int nb = T / FA_TILE;
    const int qb = nb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, w16 = 16 * warp;
    const size_t head = (size_t)bh * T * D;

    fa_load_tile<D>(Qs, q + head + (size_t)qb * FA_TILE * D);
    fa_index_fill(idx);
    __syncthreads();
    fa_map map;
    fa_map_init(map, idx);
    frag_a_t qa[NF]; /* this warp's 16 query rows, kept in registers */
    frag_acc_t acc[NF];
#pragma unroll
    for (int f = 0; f < NF; f++) {
        fa_load_a(qa[f], Qs + w16 * LDH + 16 * f, LDH);
        wmma::fill_fragment(acc[f], 0.0f);
    }

    /* The softmax of a row is shared by a lane pair: row w16 + lane/2, columns 2j + (lane & 1). */
    const int r = w16 + lane / 2, half = lane & 1;
    float m_run = -INFINITY, l_run = 0.0f; /* base-2 running max and sum of row r */

    for (int kb = 0; kb <= qb; kb++) {
        __syncthreads(); /* every warp is done with the previous K, V */
        fa_load_tile<D>(Ks, k + head + (size_t)kb * FA_TILE * D);
        fa_load_tile<D>(Vs, v + head + (size_t)kb * FA_TILE * D);
        __syncthreads();

        /* S rows w16..w16+15 × the 64 keys, 16 keys at a time. */
#pragma unroll
        for (int n = 0; n < 4; n++) {
            frag_acc_t s;
            wmma::fill_fragment(s, 0.0f);
#pragma unroll
            for (int f = 0; f < NF; f++) {
                frag_b_col_t kf; /* Kᵀ: element (dim, key) at Ks[key·LDH + dim] */
                fa_load_b(kf, Ks + 16 * n * LDH + 16 * f, LDH);
                wmma::mma_sync(s, qa[f], kf, s);
            }
            wmma::store_matrix_sync(Ss + w16 * FA_LDS + 16 * n, s, FA_LDS, wmma::mem_row_major);
        }
        __syncwarp();

        /* Online softmax of row r; on the diagonal block key c > query r is masked. */
        const bool diag = kb == qb;
        const float *srow = Ss + r * FA_LDS;
        bf16 *prow = Ps + r * FA_LDP;
        float mx = -INFINITY;
        for (int j = 0; j < FA_TILE / 2; j++) {
            const int c = 2 * j + half;
            if (!(diag && c > r)) mx = fmaxf(mx, srow[c] * scale_log2);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1)); /* finite: key 0 of a block is
                                                                 never masked */
        const float m_new = fmaxf(m_run, mx);
        const float alpha = exp2f(m_run - m_new); /* 0 on the first block */
        float sum = 0.0f;
        for (int j = 0; j < FA_TILE / 2; j++) {
            const int c = 2 * j + half;
            const float p = (diag && c > r) ? 0.0f : exp2f(srow[c] * scale_log2 - m_new);
            sum += p;
            prow[c] = __float2bfloat16_rn(p);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        l_run = l_run * alpha + sum;
        m_run = m_new;
        if (half == 0) row_scale[r] = alpha;
        __syncwarp();

        /* O = α·O + P·V over this block's 64 keys. */
#pragma unroll
        for (int f = 0; f < NF; f++)
#pragma unroll
            for (int i = 0; i < FA_NE; i++)
                acc[f].x[i] *= row_scale[w16 + map.row[i]];
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            frag_a_t pa;
            fa_load_a(pa, Ps + w16 * FA_LDP + 16 * kk, FA_LDP);
#pragma unroll
            for (int f = 0; f < NF; f++) {
                frag_b_row_t vf;
                fa_load_b(vf, Vs + 16 * kk * LDH + 16 * f, LDH);
                wmma::mma_sync(acc[f], pa, vf, acc[f]);
            }
        }
    }
    __syncwarp(); /* every lane is done reading row_scale */

    if (half == 0) {
        row_scale[r] = 1.0f / l_run;
        lse[(size_t)bh * T + (size_t)qb * FA_TILE + r] = (m_run + log2f(l_run)) * FA_LN2;
    }
    __syncwarp();
#pragma unroll
    for (int f = 0; f < NF; f++)
#pragma unroll
        for (int i = 0; i < FA_NE; i++)
            acc[f].x[i] *= row_scale[w16 + map.row[i]];
    /* The warp's rows of Qs are free (its Q is in registers): stage O there. */
    fa_store_rows<D>(o + head + ((size_t)qb * FA_TILE + w16) * D, Qs + w16 * LDH, acc, map, lane);
}

/* ---- backward -------------------------------------------------------------------------------- */

/* dr[row] = Σ_i dout[row, i] · o[row, i] over rows = B·H·T rows of D; D/8 lanes per row. */
template <int D>
__global__ void flash_bwd_dot_kernel(float *dr, const bf16 *dout, const bf16 *o, size_t rows)
{
    constexpr int LPR = D / 8; /* lanes per row (8 or 16), consecutive within a warp */
    const size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / LPR;
    const int part = threadIdx.x % LPR;
    float acc = 0.0f;
    if (row < rows) {
        const pack128<bf16> a = load128(dout + row * D + part * 8);
        const pack128<bf16> b = load128(o + row * D + part * 8);
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
    flash_bwd_dkdv_kernel(bf16 *dk, bf16 *dv, const bf16 *q, const bf16 *k, const bf16 *v,
                          const bf16 *dout, const float *lse, const float *dr, int BH, int T,
                          float scale, float scale_log2)
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
    const size_t head = (size_t)bh * T * D, row0 = (size_t)bh * T;

    /* Query block kb + it into buffer it % NBUF. */
    auto issue = [&](int it) {
        const int b = it % NBUF;
        const size_t off = head + (size_t)(kb + it) * FA_TILE * D;
        fa_load_tile_async<D>(Qb + 2 * b * TILE, q + off);
        fa_load_tile_async<D>(Qb + (2 * b + 1) * TILE, dout + off);
        fa_load_rows_async(rows_s + 2 * FA_TILE * b, rows_s + 2 * FA_TILE * b + FA_TILE, lse, dr,
                           row0 + (size_t)(kb + it) * FA_TILE);
        fa_cp_commit();
    };

    fa_load_tile_async<D>(Ks, k + head + (size_t)kb * FA_TILE * D);
    fa_load_tile_async<D>(Vs, v + head + (size_t)kb * FA_TILE * D);
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
    const size_t out = head + ((size_t)kb * FA_TILE + w16) * D;
    fa_store_rows<D>(dk + out, Qb + w16 * LDH, acc_dk, map, lane);
    fa_store_rows<D>(dv + out, Qb + TILE + w16 * LDH, acc_dv, map, lane);
}

/* dQ of one query block. Grid: BH · T/64 CTAs, the last query blocks (the most work) first.
 * Warp w owns queries w16..w16+15: S and dP for its queries × 64 keys, then dQ += dS·K. K and V
 * of key block kb stream through NBUF buffers; dS rows are written and read by their own warp. */
template <int D>
__global__ void __launch_bounds__(FA_THREADS)
    flash_bwd_dq_kernel(bf16 *dq, const bf16 *q, const bf16 *k, const bf16 *v, const bf16 *dout,
                        const float *lse, const float *dr, int BH, int T, float scale,
                        float scale_log2)
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
    const size_t head = (size_t)bh * T * D;

    /* Key block kb into buffer kb % NBUF. */
    auto issue = [&](int kb) {
        const int b = kb % NBUF;
        const size_t off = head + (size_t)kb * FA_TILE * D;
        fa_load_tile_async<D>(Kb + 2 * b * TILE, k + off);
        fa_load_tile_async<D>(Kb + (2 * b + 1) * TILE, v + off);
        fa_cp_commit();
    };

    fa_load_tile_async<D>(Qs, q + head + (size_t)qb * FA_TILE * D);
    fa_load_tile_async<D>(dOs, dout + head + (size_t)qb * FA_TILE * D);
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
    fa_store_rows<D>(dq + head + ((size_t)qb * FA_TILE + w16) * D, Qs + w16 * LDH, acc, map, lane);
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

template <int D>
static pp_status_t fa_fwd_t(void *o, float *lse, const void *q, const void *k, const void *v,
                            int BH, int T, cudaStream_t stream)
{
    const size_t smem = fa_smem<D>::fwd;
    const float scale_log2 = FA_LOG2E / sqrtf((float)D);
    const unsigned grid = (unsigned)(BH * (T / FA_TILE));
    PP_CHECK(fa_smem_allow(flash_fwd_kernel<D>, smem));
    flash_fwd_kernel<D><<<grid, FA_THREADS, smem, stream>>>(
        (bf16 *)o, lse, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, BH, T, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

template <int D>
static pp_status_t fa_bwd_t(void *dq, void *dk, void *dv, const void *dout, const void *q,
                            const void *k, const void *v, const void *o, const float *lse,
                            float *dr, int BH, int T, cudaStream_t stream)
{
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = FA_LOG2E * scale;
    const unsigned grid = (unsigned)(BH * (T / FA_TILE));
    const size_t rows = (size_t)BH * T;
    const int dot_threads = 256;
    const size_t dot_blocks = (rows * (D / 8) + dot_threads - 1) / dot_threads;

    flash_bwd_dot_kernel<D><<<(unsigned)dot_blocks, dot_threads, 0, stream>>>(
        dr, (const bf16 *)dout, (const bf16 *)o, rows);
    PP_CUDA_LAUNCH_CHECK();

    PP_CHECK(fa_smem_allow(flash_bwd_dkdv_kernel<D>, fa_smem<D>::dkdv));
    flash_bwd_dkdv_kernel<D><<<grid, FA_THREADS, fa_smem<D>::dkdv, stream>>>(
        (bf16 *)dk, (bf16 *)dv, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v,
        (const bf16 *)dout, lse, dr, BH, T, scale, scale_log2);
    PP_CUDA_LAUNCH_CHECK();

    PP_CHECK(fa_smem_allow(flash_bwd_dq_kernel<D>, fa_smem<D>::dq));
    flash_bwd_dq_kernel<D><<<grid, FA_THREADS, fa_smem<D>::dq, stream>>>(
        (bf16 *)dq, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, (const bf16 *)dout, lse, dr,
        BH, T, scale, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t attention_flash_fwd(void *o, float *lse, const void *q, const void *k, const void *v,
                                int B, int H, int T, int d, pp_dtype_t dtype, cudaStream_t stream)
{
    PP_CHECK(fa_check("attention_flash_fwd", B, H, T, d, dtype));
    if (B == 0) return PP_OK;
    if (!o || !lse || !q || !k || !v) PP_FAIL(PP_ERR_INTERNAL, "attention_flash_fwd: NULL pointer");
    if (!is_aligned16(o) || !is_aligned16(q) || !is_aligned16(k) || !is_aligned16(v))
        PP_FAIL(PP_ERR_INTERNAL, "attention_flash_fwd: q, k, v and o must be 16-byte aligned");
    if (d == 64) return fa_fwd_t<64>(o, lse, q, k, v, B * H, T, stream);
    return fa_fwd_t<128>(o, lse, q, k, v, B * H, T, stream);
}

pp_status_t attention_flash_bwd(void *dq, void *dk, void *dv, const void *dout, const void *q,
                                const void *k, const void *v, const void *o, const float *lse,
                                void *scratch, int B, int H, int T, int d, pp_dtype_t dtype,
                                cudaStream_t stream)
{
    PP_CHECK(fa_check("attention_flash_bwd", B, H, T, d, dtype));
    if (B == 0) return PP_OK;
    if (!dq || !dk || !dv || !dout || !q || !k || !v || !o || !lse || !scratch)
        PP_FAIL(PP_ERR_INTERNAL, "attention_flash_bwd: NULL pointer");
    if (!is_aligned16(dq) || !is_aligned16(dk) || !is_aligned16(dv) || !is_aligned16(dout) ||
        !is_aligned16(q) || !is_aligned16(k) || !is_aligned16(v) || !is_aligned16(o))
        PP_FAIL(PP_ERR_INTERNAL, "attention_flash_bwd: dq, dk, dv, dout, q, k, v and o must be "
                                 "16-byte aligned");
    if (((uintptr_t)scratch & 3u) != 0)
        PP_FAIL(PP_ERR_INTERNAL, "attention_flash_bwd: scratch must be 4-byte aligned");
    if (d == 64)
        return fa_bwd_t<64>(dq, dk, dv, dout, q, k, v, o, lse, (float *)scratch, B * H, T, stream);
    return fa_bwd_t<128>(dq, dk, dv, dout, q, k, v, o, lse, (float *)scratch, B * H, T, stream);
}
