/*
 * flash_hopper.cu — the fused causal attention forward on Hopper's warpgroup MMA (sm_90a):
 * attention_flash_fwd's contract (kernels.h), taken by its launcher on a compute capability 9.0
 * GPU unless PPSCHED_FLASH_MMA=sync selects the mma.sync kernels (flash_attention.cu,
 * flash_wide.cu). d = 64 or 128, bf16, causal, T a multiple of 64.
 *
 * A CTA owns 128 query rows of one (b, h) and has three roles (warp specialisation):
 *   - the producer, warp 8: one thread loads the Q tile once and then, per 128-key block, K and V
 *     into a ring of FH_STAGES buffers with the Tensor Memory Accelerator (cp.async.bulk.tensor,
 *     a 3-D map [B][T][H·d] per operand, so a box never crosses into the next sequence and rows
 *     past T arrive as zeros); each load completes on its buffer's "full" mbarrier with the
 *     transaction bytes;
 *   - two consumer warpgroups, warps 0–3 and 4–7, 64 query rows each: per key block S = Q·Kᵀ
 *     (wgmma m64n128k16 from shared memory, d/16 of them), the online softmax in registers in base
 *     2 as in flash_attention.cu, P rounded to bf16 and kept in registers as the A operand of
 *     O += P·V (wgmma m64n{d}k16, V read N-major), then the buffer released on its "empty"
 *     mbarrier. The two warpgroups' softmax and MMAs interleave on the SM's tensor cores.
 * Shared memory holds each tile as d/64 column panels of [rows][64] bf16 (128 bytes a row) in the
 * 128-byte swizzle TMA writes and wgmma reads: the same layout on both sides, described to wgmma
 * by a matrix descriptor (start, leading and stride byte offsets, swizzle mode) per panel.
 * Accumulators follow wgmma's m64nN layout: warp w of a warpgroup holds its rows 16w..16w+15, lane
 * (g = lane/4, t = lane%4) rows g and g + 8 at columns 8i + 2t, 8i + 2t + 1 of every 8-column
 * chunk i (registers 4i..4i+3) — the m16n8 accumulator of mma.sync repeated along N, so two
 * adjacent chunks of P are, element for element, one m16k16 A operand.
 * Results: O (bf16, the row layout of the other kernels) and lse = (m + log2 l)·ln 2, the
 * backward's input, from the same base-2 statistics as flash_attention.cu (within rounding: the
 * key blocks are 128 wide here, so the running sums add in another order).
 */
#include "flash_util.cuh"

#include <cuda.h> /* CUtensorMap and cuTensorMapEncodeTiled's types; the entry point comes from the runtime */
#include <stdint.h>
#include <string.h>

#define FH_BM        128 /* query rows a CTA */
#define FH_BN        128 /* keys a step */
#define FH_STAGES    2   /* K/V buffers */
#define FH_CONSUMERS 2   /* warpgroups of 64 rows */
#define FH_THREADS   (128 * FH_CONSUMERS + 128)
#define FH_PANEL     64 /* columns of a swizzled panel: 128 bytes of bf16 */

/* Shared memory (bytes): Q, then FH_STAGES × (K, V), then the mbarriers; each tile 1024-aligned
 * (the swizzle repeats every 8 rows of 128 bytes). */
template <int D> struct fh_smem {
    static constexpr size_t q = (size_t)FH_BM * D * sizeof(bf16);
    static constexpr size_t kv = (size_t)FH_BN * D * sizeof(bf16); /* one K or one V */
    static constexpr size_t bars = 8 * (1 + 4 * FH_STAGES);        /* q; K, V full; K, V empty */
    static constexpr size_t total = 1024 + q + 2 * FH_STAGES * kv + bars; /* + alignment */
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FH_DEVICE 1
#endif

#ifdef FH_DEVICE
/* ---- mbarriers and TMA ---------------------------------------------------------------------- */

__device__ __forceinline__ void fh_bar_init(uint32_t bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/* The producer's arrival, announcing `bytes` of transactions that complete the phase. */
__device__ __forceinline__ void fh_bar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void fh_bar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/* Waits until the phase of parity `parity` has completed. */
__device__ __forceinline__ void fh_bar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "FH_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra FH_WAIT;\n"
                 "}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* One box of the 3-D map (column c0, row c1 of sequence c2) into shared memory at dst,
 * completing on bar. */
__device__ __forceinline__ void fh_tma_load(uint32_t dst, const CUtensorMap *map, uint32_t bar,
                                            int c0, int c1, int c2)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}

/* ---- warpgroup MMA -------------------------------------------------------------------------- */

__device__ __forceinline__ void fh_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void fh_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void fh_wait_all()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

/* Keeps the compiler from moving reads or writes of an accumulator across the asynchronous MMAs
 * that own it between their issue and fh_wait_all. */
template <int N> __device__ __forceinline__ void fh_hold(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* A shared-memory matrix descriptor with the 128-byte swizzle: start address, leading and
 * stride byte offsets (each in 16-byte units). */
__device__ __forceinline__ uint64_t fh_desc(uint32_t start, uint32_t lead, uint32_t stride)
{
    return (uint64_t)((start & 0x3FFFF) >> 4) | ((uint64_t)(lead >> 4) << 16) |
           ((uint64_t)(stride >> 4) << 32) | (1ull << 62);
}

/* The operands of the wgmma wrappers: an accumulator of 32 or 64 floats ("+f", in order) and
 * the register names of its first 32 and second 32 in the instruction text. */
#define FH_ACC8(d, i)                                                                              \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define FH_ACC32(d) FH_ACC8(d, 0), FH_ACC8(d, 8), FH_ACC8(d, 16), FH_ACC8(d, 24)
#define FH_ACC64(d) FH_ACC32(d), FH_ACC8(d, 32), FH_ACC8(d, 40), FH_ACC8(d, 48), FH_ACC8(d, 56)
#define FH_REGS32                                                                                  \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "   \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FH_REGS64                                                                                  \
    FH_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
              "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

/* D (+)= A·B, m64n128k16, A and B from shared memory (both K-major); accumulate 0 overwrites D. */
__device__ __forceinline__ void fh_mma_ss_n128(float (&d)[64], uint64_t da, uint64_t db,
                                               int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" FH_REGS64
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : FH_ACC64(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* D (+)= A·B, m64n64k16, A and B from shared memory (both K-major); accumulate 0 overwrites D. */
__device__ __forceinline__ void fh_mma_ss_n64(float (&d)[32], uint64_t da, uint64_t db,
                                              int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" FH_REGS32
                 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : FH_ACC32(d)
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* D += A·B, m64n64k16, A from registers (a[4]: the m16n8k16 A fragment of the warp's 16 rows),
 * B from shared memory, N-major (transposed). */
__device__ __forceinline__ void fh_mma_rs_n64(float (&d)[32], const unsigned (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" FH_REGS32
                 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : FH_ACC32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* D += A·B, m64n128k16, A from registers (a[4]: the m16n8k16 A fragment of the warp's 16 rows),
 * B from shared memory, N-major (transposed). */
__device__ __forceinline__ void fh_mma_rs_n128(float (&d)[64], const unsigned (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" FH_REGS64
                 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : FH_ACC64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

__device__ __forceinline__ unsigned fh_pack(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}
#endif /* FH_DEVICE */

/* The online softmax of one 64 × 128 score block in place (scores in, P out; base 2, key > row
 * masked where `diag`), with the rows' running max and sums; alpha: what the rows' earlier output
 * must be multiplied by. */
#ifdef FH_DEVICE
__device__ __forceinline__ void fh_softmax(float (&sc)[64], float (&m_run)[2], float (&l_run)[2],
                                           float (&alpha)[2], float scale_log2, bool diag, int key0,
                                           int r0, int t)
{
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 16; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int hh = e >> 1, key = key0 + 8 * i + 2 * t + (e & 1);
            float x = sc[4 * i + e] * scale_log2;
            if (diag && key > r0 + 8 * hh) x = -INFINITY;
            sc[4 * i + e] = x;
            mx[hh] = fmaxf(mx[hh], x);
        }
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffffu, mx[hh], 1));
        mx[hh] = fmaxf(mx[hh], __shfl_xor_sync(0xffffffffu, mx[hh], 2));
        const float m_new = fmaxf(m_run[hh], mx[hh]);
        alpha[hh] = fa_exp2(m_run[hh] - m_new);
        m_run[hh] = m_new;
        l_run[hh] *= alpha[hh];
    }
#pragma unroll
    for (int i = 0; i < 16; i++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int hh = e >> 1;
            const float p = fa_exp2(sc[4 * i + e] - m_run[hh]);
            sc[4 * i + e] = p;
            l_run[hh] += p;
        }
}

/* A 64 × 16J accumulator in wgmma's layout (P or dS) as J k16 A fragments of bf16: chunks 2j
 * and 2j + 1 of eight columns are, element for element, fragment j. */
template <int J>
__device__ __forceinline__ void fh_pack_a(unsigned (&a)[J][4], const float (&x)[8 * J])
{
#pragma unroll
    for (int j = 0; j < J; j++) {
        a[j][0] = fh_pack(x[8 * j + 0], x[8 * j + 1]);
        a[j][1] = fh_pack(x[8 * j + 2], x[8 * j + 3]);
        a[j][2] = fh_pack(x[8 * j + 4], x[8 * j + 5]);
        a[j][3] = fh_pack(x[8 * j + 6], x[8 * j + 7]);
    }
}

template <int N> __device__ __forceinline__ void fh_hold_u(unsigned (&a)[N][4])
{
#pragma unroll
    for (int i = 0; i < N; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            asm volatile("" : "+r"(a[i][j])::"memory");
}
#endif

/* Grid: BH · ⌈T/128⌉ CTAs, the last query blocks (the most work) first. A consumer overlaps its
 * own softmax with its MMAs: in step j it issues S_j = Q·K_jᵀ and then O += P_{j−1}·V_{j−1},
 * waits for S_j only, computes P_j while the second product runs, and rescales O once that is
 * done. K and V buffers are released apart (K once its S is done, V once its product is), so the
 * next K lands while this step's V is still in use. */
template <int D>
__global__ void __launch_bounds__(FH_THREADS, 1)
    flash_hopper_fwd_kernel(const __grid_constant__ CUtensorMap map_q,
                            const __grid_constant__ CUtensorMap map_k,
                            const __grid_constant__ CUtensorMap map_v, bf16 *o, int ld_o,
                            float *lse, int BH, int H, int T, float scale_log2)
{
#ifdef FH_DEVICE
    using S = fh_smem<D>;
    constexpr int PANELS = D / FH_PANEL;
    extern __shared__ unsigned char fh_raw[];
    const uint32_t raw = fa_smem_addr(fh_raw);
    const uint32_t base = (raw + 1023u) & ~1023u;
    const uint32_t q_s = base, kv_s = base + (uint32_t)S::q;
    const uint32_t bars = kv_s + (uint32_t)(2 * FH_STAGES * S::kv);
    const uint32_t q_full = bars;
    /* per stage s: K full, V full, K empty, V empty */
#define FH_K_FULL(s)  (bars + 8u * (1u + (s)))
#define FH_V_FULL(s)  (bars + 8u * (1u + FH_STAGES + (s)))
#define FH_K_EMPTY(s) (bars + 8u * (1u + 2 * FH_STAGES + (s)))
#define FH_V_EMPTY(s) (bars + 8u * (1u + 3 * FH_STAGES + (s)))
#define FH_K_TILE(s)  (kv_s + (uint32_t)((2 * (s)) * S::kv))
#define FH_V_TILE(s)  (kv_s + (uint32_t)((2 * (s) + 1) * S::kv))

    const int nqb = (T + FH_BM - 1) / FH_BM;
    const int qb = nqb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int b = bh / H, h = bh % H;
    /* key blocks 0..qb: the query block's last row is at most 128·qb + 127 */
    const int n_kb = qb + 1;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
        fh_bar_init(q_full, 1);
        for (int s = 0; s < FH_STAGES; s++) {
            fh_bar_init(FH_K_FULL(s), 1);
            fh_bar_init(FH_V_FULL(s), 1);
            fh_bar_init(FH_K_EMPTY(s), FH_CONSUMERS);
            fh_bar_init(FH_V_EMPTY(s), FH_CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp >= 4 * FH_CONSUMERS) { /* the producer */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (warp != 4 * FH_CONSUMERS || lane != 0) return;
        constexpr uint32_t panel_q = FH_BM * FH_PANEL * sizeof(bf16),
                           panel_kv = FH_BN * FH_PANEL * sizeof(bf16);
        fh_bar_expect(q_full, (uint32_t)S::q);
        for (int p = 0; p < PANELS; p++)
            fh_tma_load(q_s + p * panel_q, &map_q, q_full, h * D + p * FH_PANEL, qb * FH_BM, b);
        for (int it = 0; it < n_kb; it++) {
            const int s = it % FH_STAGES, round = it / FH_STAGES;
            const uint32_t before = (uint32_t)((round - 1) & 1);
            if (round > 0) fh_bar_wait(FH_K_EMPTY(s), before);
            fh_bar_expect(FH_K_FULL(s), (uint32_t)S::kv);
            for (int p = 0; p < PANELS; p++)
                fh_tma_load(FH_K_TILE(s) + p * panel_kv, &map_k, FH_K_FULL(s), h * D + p * FH_PANEL,
                            it * FH_BN, b);
            if (round > 0) fh_bar_wait(FH_V_EMPTY(s), before);
            fh_bar_expect(FH_V_FULL(s), (uint32_t)S::kv);
            for (int p = 0; p < PANELS; p++)
                fh_tma_load(FH_V_TILE(s) + p * panel_kv, &map_v, FH_V_FULL(s), h * D + p * FH_PANEL,
                            it * FH_BN, b);
        }
        return;
    }

    /* a consumer: warpgroup wg, its warp wl; lane (g, t) holds rows r0 and r0 + 8 */
    const int wg = warp / 4, wl = warp % 4, g = lane / 4, t = lane % 4;
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int r0 = qb * FH_BM + wg * 64 + wl * 16 + g; /* row in the sequence */
    constexpr uint32_t panel_q = FH_BM * FH_PANEL * sizeof(bf16),
                       panel_kv = FH_BN * FH_PANEL * sizeof(bf16);
    const bool signal = threadIdx.x % 128 == 0; /* one arrival a warpgroup */
    float acc[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        acc[i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f}, alpha[2];
    float sc[64];
    unsigned pa[FH_BN / 16][4], pn[FH_BN / 16][4]; /* P of the step before, P of this one */

    /* S = Q·K_sᵀ: the warpgroup's 64 rows of Q against 128 keys, 16 columns of d a step */
    auto issue_s = [&](int s) {
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const uint32_t qa = q_s + (kk / 4) * panel_q + wg * 64 * 128 + (kk % 4) * 32;
            const uint32_t kbase = FH_K_TILE(s) + (kk / 4) * panel_kv + (kk % 4) * 32;
            fh_mma_ss_n128(sc, fh_desc(qa, 16, 1024), fh_desc(kbase, 16, 1024), kk > 0);
        }
    };
    /* O += P·V_s: 16 keys a step; V's panels are the N-major atoms, panel_kv bytes apart */
    auto issue_pv = [&](int s) {
#pragma unroll
        for (int j = 0; j < FH_BN / 16; j++) {
            const uint64_t dv = fh_desc(FH_V_TILE(s) + j * 16 * 128, panel_kv, 1024);
            if constexpr (D == 64)
                fh_mma_rs_n64(acc, pa[j], dv);
            else
                fh_mma_rs_n128(acc, pa[j], dv);
        }
    };

    fh_bar_wait(q_full, 0);
    fh_bar_wait(FH_K_FULL(0), 0);
    fh_fence();
    issue_s(0);
    fh_commit();
    fh_hold(sc);
    fh_wait_all();
    fh_hold(sc);
    if (signal) fh_bar_arrive(FH_K_EMPTY(0));
    fh_softmax(sc, m_run, l_run, alpha, scale_log2, n_kb == 1, 0, r0, t);
    fh_pack_a(pa, sc);
    for (int it = 1; it < n_kb; it++) {
        const int s = it % FH_STAGES, sp = (it - 1) % FH_STAGES;
        fh_bar_wait(FH_K_FULL(s), (uint32_t)((it / FH_STAGES) & 1));
        fh_bar_wait(FH_V_FULL(sp), (uint32_t)(((it - 1) / FH_STAGES) & 1));
        fh_hold(acc);
        fh_fence();
        issue_s(s);
        fh_commit();
        issue_pv(sp);
        fh_commit();
        fh_hold(sc);
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); /* S done */
        fh_hold(sc);
        if (signal) fh_bar_arrive(FH_K_EMPTY(s));
        fh_softmax(sc, m_run, l_run, alpha, scale_log2, it == qb, it * FH_BN, r0, t);
        fh_pack_a(pn, sc);
        fh_hold(acc);
        fh_hold_u(pa);
        fh_wait_all(); /* P·V done */
        fh_hold(acc);
        fh_hold_u(pa);
        if (signal) fh_bar_arrive(FH_V_EMPTY(sp));
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            acc[4 * i + 0] *= alpha[0], acc[4 * i + 1] *= alpha[0];
            acc[4 * i + 2] *= alpha[1], acc[4 * i + 3] *= alpha[1];
        }
#pragma unroll
        for (int j = 0; j < FH_BN / 16; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                pa[j][e] = pn[j][e];
    }
    {
        const int sp = (n_kb - 1) % FH_STAGES;
        fh_bar_wait(FH_V_FULL(sp), (uint32_t)(((n_kb - 1) / FH_STAGES) & 1));
        fh_hold(acc);
        fh_fence();
        issue_pv(sp);
        fh_commit();
        fh_hold(acc);
        fh_wait_all();
        fh_hold(acc);
    }

    /* O /= l, lse = (m + log2 l)·ln 2; rows past T (zeros loaded) are not stored */
    const size_t o0 = fa_head_offset(bh, H, T, ld_o, D);
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        float l = l_run[hh];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const float inv = 1.0f / l;
        const int row = r0 + 8 * hh;
        if (row >= T) continue;
        if (t == 0) lse[(size_t)bh * T + row] = (m_run[hh] + log2f(l)) * FA_LN2;
        bf16 *out = o + o0 + (size_t)row * ld_o + 2 * t;
#pragma unroll
        for (int i = 0; i < D / 8; i++)
            *reinterpret_cast<unsigned *>(out + 8 * i) =
                fh_pack(acc[4 * i + 2 * hh] * inv, acc[4 * i + 2 * hh + 1] * inv);
    }
#undef FH_K_FULL
#undef FH_V_FULL
#undef FH_K_EMPTY
#undef FH_V_EMPTY
#undef FH_K_TILE
#undef FH_V_TILE
#else
    __trap(); /* built without sm_90a: flash_hopper_available() keeps the launcher away */
#endif
}

/* ---- backward ------------------------------------------------------------------------------- */

/* Both backward kernels hold two fixed tiles of FB_FIXED rows (dK/dV: K and V of 128 keys; dQ: Q
 * and dO of 128 queries) and stream two tiles of FB_STEP rows a step (dK/dV: Q and dO of 64
 * queries; dQ: K and V of 64 keys) through FH_STAGES buffers. */
#define FB_FIXED 128
#define FB_STEP  64

template <int D> struct fb_smem {
    static constexpr size_t fixed = (size_t)FB_FIXED * D * sizeof(bf16); /* one fixed tile */
    static constexpr size_t step = (size_t)FB_STEP * D * sizeof(bf16);   /* one streamed tile */
    static constexpr size_t bars = 8 * (1 + 2 * FH_STAGES);              /* fixed; full, empty */
    static constexpr size_t total = 1024 + 2 * fixed + 2 * FH_STAGES * step + bars;
};

#ifdef FH_DEVICE
template <int D>
__device__ __forceinline__ void fh_mma_rs(float (&d)[D / 2], const unsigned (&a)[4], uint64_t db)
{
    if constexpr (D == 64)
        fh_mma_rs_n64(d, a, db);
    else
        fh_mma_rs_n128(d, a, db);
}

/* The shared memory of a backward CTA: fixed tiles f0, f1, streamed buffers, mbarriers (the
 * fixed tiles' "full"; per stage "full" and "empty"). */
template <int D> struct fb_layout {
    uint32_t f0, f1, st, bars;
    __device__ fb_layout(uint32_t raw)
    {
        f0 = (raw + 1023u) & ~1023u;
        f1 = f0 + (uint32_t)fb_smem<D>::fixed;
        st = f1 + (uint32_t)fb_smem<D>::fixed;
        bars = st + (uint32_t)(2 * FH_STAGES * fb_smem<D>::step);
    }
    __device__ uint32_t s0(int s) const { return st + (uint32_t)(2 * s * fb_smem<D>::step); }
    __device__ uint32_t s1(int s) const { return s0(s) + (uint32_t)fb_smem<D>::step; }
    __device__ uint32_t fixed_full() const { return bars; }
    __device__ uint32_t full(int s) const { return bars + 8u * (1u + (uint32_t)s); }
    __device__ uint32_t empty(int s) const { return bars + 8u * (1u + FH_STAGES + (uint32_t)s); }

    __device__ void init() const
    {
        if (threadIdx.x != 0) return;
        fh_bar_init(fixed_full(), 1);
        for (int s = 0; s < FH_STAGES; s++) {
            fh_bar_init(full(s), 1);
            fh_bar_init(empty(s), FH_CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
};

/* The producer of both kernels (one thread): the fixed tiles (rows from fixed_row of sequence b,
 * columns from col) once, then per step the streamed tiles (rows from first_row + it·FB_STEP),
 * each buffer refilled once both consumers released it. */
template <int D>
__device__ __forceinline__ void fb_produce(const fb_layout<D> &L, const CUtensorMap *f0,
                                           const CUtensorMap *f1, const CUtensorMap *s0,
                                           const CUtensorMap *s1, int col, int b, int fixed_row,
                                           int first_row, int n_steps)
{
    constexpr int PANELS = D / FH_PANEL;
    constexpr uint32_t pf = FB_FIXED * 128, ps = FB_STEP * 128; /* panel bytes */
    fh_bar_expect(L.fixed_full(), (uint32_t)(2 * fb_smem<D>::fixed));
    for (int p = 0; p < PANELS; p++) {
        fh_tma_load(L.f0 + p * pf, f0, L.fixed_full(), col + p * FH_PANEL, fixed_row, b);
        fh_tma_load(L.f1 + p * pf, f1, L.fixed_full(), col + p * FH_PANEL, fixed_row, b);
    }
    for (int it = 0; it < n_steps; it++) {
        const int s = it % FH_STAGES, round = it / FH_STAGES;
        if (round > 0) fh_bar_wait(L.empty(s), (uint32_t)((round - 1) & 1));
        fh_bar_expect(L.full(s), (uint32_t)(2 * fb_smem<D>::step));
        const int row = first_row + it * FB_STEP;
        for (int p = 0; p < PANELS; p++) {
            fh_tma_load(L.s0(s) + p * ps, s0, L.full(s), col + p * FH_PANEL, row, b);
            fh_tma_load(L.s1(s) + p * ps, s1, L.full(s), col + p * FH_PANEL, row, b);
        }
    }
}

/* X (64 rows of the warpgroup, from fixed tile f at row offset wg·64) times Yᵀ (the 64 rows of a
 * streamed tile y), over d: the m64n64 products of S and dP in both kernels. */
template <int D>
__device__ __forceinline__ void fb_mma_xyt(float (&acc)[32], uint32_t f, int wg, uint32_t y)
{
    constexpr uint32_t pf = FB_FIXED * 128, ps = FB_STEP * 128;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
        fh_mma_ss_n64(acc, fh_desc(f + (kk / 4) * pf + wg * 64 * 128 + (kk % 4) * 32, 16, 1024),
                      fh_desc(y + (kk / 4) * ps + (kk % 4) * 32, 16, 1024), kk > 0);
}

/* acc += A·Y where A (64 × 64, the warpgroup's rows) is in registers as four k16 fragments and Y
 * is a streamed tile of 64 rows read N-major: its column panels are FB_STEP·128 bytes apart. */
template <int D>
__device__ __forceinline__ void fb_mma_ay(float (&acc)[D / 2], const unsigned (&a)[4][4],
                                          uint32_t y)
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        fh_mma_rs<D>(acc, a[j], fh_desc(y + j * 16 * 128, FB_STEP * 128, 1024));
}

/* Rows r and r + 8 of a 64 × D accumulator, scaled by 1 (bf16 pairs), to out (row stride ld),
 * rows at or past T left out. */
template <int D>
__device__ __forceinline__ void fb_store(bf16 *out, int ld, int r, int T, const float (&acc)[D / 2],
                                         int t)
{
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        if (r + 8 * hh >= T) continue;
        bf16 *row = out + (size_t)(r + 8 * hh) * ld + 2 * t;
#pragma unroll
        for (int i = 0; i < D / 8; i++)
            *reinterpret_cast<unsigned *>(row + 8 * i) =
                fh_pack(acc[4 * i + 2 * hh], acc[4 * i + 2 * hh + 1]);
    }
}
#endif /* FH_DEVICE */

/* dK, dV of 128 keys (kb) of one (b, h), over the query blocks of 64 from the first that reaches
 * them: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, Pᵀ = exp(scale·Sᵀ − lse) with query < key masked, dSᵀ =
 * scale·Pᵀ∘(dPᵀ − Dr), then dV += Pᵀ·dO and dK += dSᵀ·Q with Pᵀ, dSᵀ as register operands.
 * Grid: BH · ⌈T/128⌉ CTAs, the first key blocks (the most work) first. */
template <int D>
__global__ void __launch_bounds__(FH_THREADS, 1)
    flash_hopper_bwd_dkdv_kernel(const __grid_constant__ CUtensorMap map_q,
                                 const __grid_constant__ CUtensorMap map_k,
                                 const __grid_constant__ CUtensorMap map_v,
                                 const __grid_constant__ CUtensorMap map_do, bf16 *dk, bf16 *dv,
                                 int ld_d, const float *lse, const float *dr, int BH, int H, int T,
                                 float scale, float scale_log2)
{
#ifdef FH_DEVICE
    extern __shared__ unsigned char fh_raw[];
    const fb_layout<D> L(fa_smem_addr(fh_raw));
    const int kb = (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int b = bh / H, h = bh % H;
    const int q_first = 2 * kb, n_steps = T / FB_STEP - q_first;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    L.init();
    __syncthreads();
    if (warp >= 4 * FH_CONSUMERS) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (warp == 4 * FH_CONSUMERS && lane == 0)
            fb_produce<D>(L, &map_k, &map_v, &map_q, &map_do, h * D, b, kb * FB_FIXED,
                          q_first * FB_STEP, n_steps);
        return;
    }
    const int wg = warp / 4, wl = warp % 4, g = lane / 4, t = lane % 4;
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int key0 = kb * FB_FIXED + wg * 64 + wl * 16 + g; /* keys key0, key0 + 8 */
    const float *lse_bh = lse + (size_t)bh * T, *dr_bh = dr + (size_t)bh * T;
    float dk_acc[D / 2], dv_acc[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        dk_acc[i] = 0.0f, dv_acc[i] = 0.0f;

    fh_bar_wait(L.fixed_full(), 0);
    for (int it = 0; it < n_steps; it++) {
        const int s = it % FH_STAGES;
        const uint32_t phase = (uint32_t)((it / FH_STAGES) & 1);
        const int q0 = (q_first + it) * FB_STEP;
        float2 l2[8], drv[8]; /* the columns' lse·log2 e and Dr: queries q0 + 8i + 2t, + 1 */
#pragma unroll
        for (int i = 0; i < 8; i++) {
            l2[i] = *reinterpret_cast<const float2 *>(lse_bh + q0 + 8 * i + 2 * t);
            drv[i] = *reinterpret_cast<const float2 *>(dr_bh + q0 + 8 * i + 2 * t);
            l2[i].x *= FA_LOG2E, l2[i].y *= FA_LOG2E;
        }
        float st[32], dpt[32];
        fh_bar_wait(L.full(s), phase);
        fh_fence();
        fb_mma_xyt<D>(st, L.f0, wg, L.s0(s));  /* Sᵀ = K·Qᵀ */
        fb_mma_xyt<D>(dpt, L.f1, wg, L.s1(s)); /* dPᵀ = V·dOᵀ */
        fh_commit();
        fh_hold(st), fh_hold(dpt);
        fh_wait_all();
        fh_hold(st), fh_hold(dpt);
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int q = q0 + 8 * i + 2 * t + (e & 1), key = key0 + 8 * (e >> 1);
                const float lq = (e & 1) ? l2[i].y : l2[i].x, dq_r = (e & 1) ? drv[i].y : drv[i].x;
                const float p = q < key ? 0.0f : fa_bwd_p(st[4 * i + e], scale_log2, lq);
                st[4 * i + e] = p;
                dpt[4 * i + e] = fa_bwd_ds(p, dpt[4 * i + e], dq_r, scale);
            }
        unsigned pa[4][4], da[4][4];
        fh_pack_a(pa, st);
        fh_pack_a(da, dpt);
        fh_hold(dv_acc), fh_hold(dk_acc);
        fh_fence();
        fb_mma_ay<D>(dv_acc, pa, L.s1(s)); /* dV += Pᵀ·dO */
        fb_mma_ay<D>(dk_acc, da, L.s0(s)); /* dK += dSᵀ·Q */
        fh_commit();
        fh_hold(dv_acc), fh_hold(dk_acc);
        fh_wait_all();
        fh_hold(dv_acc), fh_hold(dk_acc);
        if (threadIdx.x % 128 == 0) fh_bar_arrive(L.empty(s));
    }
    const size_t o0 = fa_head_offset(bh, H, T, ld_d, D);
    fb_store<D>(dk + o0, ld_d, key0, T, dk_acc, t);
    fb_store<D>(dv + o0, ld_d, key0, T, dv_acc, t);
#else
    __trap();
#endif
}

/* dQ of 128 queries (qb) of one (b, h), over the key blocks of 64 up to the diagonal: S = Q·Kᵀ,
 * dP = dO·Vᵀ, P with key > query masked, dS, then dQ += dS·K with dS as the register operand.
 * Grid: BH · ⌈T/128⌉ CTAs, the last query blocks (the most work) first. */
template <int D>
__global__ void __launch_bounds__(FH_THREADS, 1)
    flash_hopper_bwd_dq_kernel(const __grid_constant__ CUtensorMap map_q,
                               const __grid_constant__ CUtensorMap map_k,
                               const __grid_constant__ CUtensorMap map_v,
                               const __grid_constant__ CUtensorMap map_do, bf16 *dq, int ld_d,
                               const float *lse, const float *dr, int BH, int H, int T, float scale,
                               float scale_log2)
{
#ifdef FH_DEVICE
    extern __shared__ unsigned char fh_raw[];
    const fb_layout<D> L(fa_smem_addr(fh_raw));
    const int nqb = (T + FB_FIXED - 1) / FB_FIXED;
    const int qb = nqb - 1 - (int)(blockIdx.x / BH), bh = (int)(blockIdx.x % BH);
    const int b = bh / H, h = bh % H;
    const int n_steps = min(2 * qb + 2, T / FB_STEP);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    L.init();
    __syncthreads();
    if (warp >= 4 * FH_CONSUMERS) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n");
        if (warp == 4 * FH_CONSUMERS && lane == 0)
            fb_produce<D>(L, &map_q, &map_do, &map_k, &map_v, h * D, b, qb * FB_FIXED, 0, n_steps);
        return;
    }
    const int wg = warp / 4, wl = warp % 4, g = lane / 4, t = lane % 4;
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n");
    const int r0 = qb * FB_FIXED + wg * 64 + wl * 16 + g; /* rows r0, r0 + 8 */
    float l2[2], drv[2];
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int r = r0 + 8 * hh;
        l2[hh] = r < T ? lse[(size_t)bh * T + r] * FA_LOG2E : 0.0f;
        drv[hh] = r < T ? dr[(size_t)bh * T + r] : 0.0f;
    }
    float dq_acc[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        dq_acc[i] = 0.0f;

    fh_bar_wait(L.fixed_full(), 0);
    for (int it = 0; it < n_steps; it++) {
        const int s = it % FH_STAGES;
        const uint32_t phase = (uint32_t)((it / FH_STAGES) & 1);
        float sc[32], dp[32];
        fh_bar_wait(L.full(s), phase);
        fh_fence();
        fb_mma_xyt<D>(sc, L.f0, wg, L.s0(s)); /* S = Q·Kᵀ */
        fb_mma_xyt<D>(dp, L.f1, wg, L.s1(s)); /* dP = dO·Vᵀ */
        fh_commit();
        fh_hold(sc), fh_hold(dp);
        fh_wait_all();
        fh_hold(sc), fh_hold(dp);
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = it * FB_STEP + 8 * i + 2 * t + (e & 1), hh = e >> 1;
                const float p =
                    key > r0 + 8 * hh ? 0.0f : fa_bwd_p(sc[4 * i + e], scale_log2, l2[hh]);
                dp[4 * i + e] = fa_bwd_ds(p, dp[4 * i + e], drv[hh], scale);
            }
        unsigned da[4][4];
        fh_pack_a(da, dp);
        fh_hold(dq_acc);
        fh_fence();
        fb_mma_ay<D>(dq_acc, da, L.s0(s)); /* dQ += dS·K */
        fh_commit();
        fh_hold(dq_acc);
        fh_wait_all();
        fh_hold(dq_acc);
        if (threadIdx.x % 128 == 0) fh_bar_arrive(L.empty(s));
    }
    fb_store<D>(dq + fa_head_offset(bh, H, T, ld_d, D), ld_d, r0, T, dq_acc, t);
#else
    __trap();
#endif
}

/* ---- host ----------------------------------------------------------------------------------- */

typedef CUresult (*fh_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                 const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                 const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* cuTensorMapEncodeTiled from the driver through the runtime (no link to libcuda); NULL where the
 * driver has none. Looked up once. */
static fh_encode_fn fh_encoder(void)
{
    static const fh_encode_fn fn = [] {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                               cudaEnableDefault, &q);
#else
        const cudaError_t e =
            cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &q);
#endif
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            p = NULL;
        }
        return (fh_encode_fn)p;
    }();
    return fn;
}

/* The map of one operand: [B][T][H·D] bf16 from ptr (row stride ld elements), boxes of
 * 64 columns × rows × 1 sequence, 128-byte swizzle, zeros past the edges. */
static pp_status_t fh_map(CUtensorMap *map, const void *ptr, int ld, int B, int T, int H, int D,
                          int rows)
{
    const cuuint64_t dims[3] = {(cuuint64_t)H * D, (cuuint64_t)T, (cuuint64_t)B};
    const cuuint64_t strides[2] = {(cuuint64_t)ld * sizeof(bf16),
                                   (cuuint64_t)ld * sizeof(bf16) * (cuuint64_t)T};
    const cuuint32_t box[3] = {FH_PANEL, (cuuint32_t)rows, 1}, step[3] = {1, 1, 1};
    CUresult r =
        fh_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void *>(ptr), dims,
                     strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        PP_FAIL(PP_ERR_CUDA, "cuTensorMapEncodeTiled (attention forward): CUDA driver error %d",
                (int)r);
    return PP_OK;
}

int flash_hopper_available(void)
{
#ifdef PP_FLASH_HOPPER
    if (!flash_wgmma_enabled()) return 0;
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major == 9 && minor == 0 && fh_encoder() != NULL;
#else
    return 0;
#endif
}

template <int D>
static pp_status_t fh_fwd_t(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k,
                            const bf16 *v, int ld_qkv, int B, int H, int T, cudaStream_t stream)
{
    CUtensorMap mq, mk, mv;
    PP_CHECK(fh_map(&mq, q, ld_qkv, B, T, H, D, FH_BM));
    PP_CHECK(fh_map(&mk, k, ld_qkv, B, T, H, D, FH_BN));
    PP_CHECK(fh_map(&mv, v, ld_qkv, B, T, H, D, FH_BN));
    PP_CHECK(fa_smem_allow(flash_hopper_fwd_kernel<D>, fh_smem<D>::total));
    const float scale_log2 = FA_LOG2E / sqrtf((float)D);
    const int BH = B * H;
    const unsigned grid = (unsigned)(BH * ((T + FH_BM - 1) / FH_BM));
    flash_hopper_fwd_kernel<D><<<grid, FH_THREADS, fh_smem<D>::total, stream>>>(
        mq, mk, mv, o, ld_o, lse, BH, H, T, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t flash_hopper_fwd(bf16 *o, int ld_o, float *lse, const bf16 *q, const bf16 *k,
                             const bf16 *v, int ld_qkv, int B, int H, int T, int d,
                             cudaStream_t stream)
{
    if (d == 64) return fh_fwd_t<64>(o, ld_o, lse, q, k, v, ld_qkv, B, H, T, stream);
    return fh_fwd_t<128>(o, ld_o, lse, q, k, v, ld_qkv, B, H, T, stream);
}

template <int D>
static pp_status_t fh_bwd_t(bf16 *dq, bf16 *dk, bf16 *dv, int ld_d, const bf16 *dout, int ld_o,
                            const bf16 *q, const bf16 *k, const bf16 *v, int ld_qkv,
                            const float *lse, const float *dr, int B, int H, int T,
                            cudaStream_t stream)
{
    /* dK/dV: K, V fixed (128 rows), Q, dO streamed (64); dQ the other way round */
    CUtensorMap q64, do64, k128, v128, q128, do128, k64, v64;
    PP_CHECK(fh_map(&q64, q, ld_qkv, B, T, H, D, FB_STEP));
    PP_CHECK(fh_map(&do64, dout, ld_o, B, T, H, D, FB_STEP));
    PP_CHECK(fh_map(&k128, k, ld_qkv, B, T, H, D, FB_FIXED));
    PP_CHECK(fh_map(&v128, v, ld_qkv, B, T, H, D, FB_FIXED));
    PP_CHECK(fh_map(&q128, q, ld_qkv, B, T, H, D, FB_FIXED));
    PP_CHECK(fh_map(&do128, dout, ld_o, B, T, H, D, FB_FIXED));
    PP_CHECK(fh_map(&k64, k, ld_qkv, B, T, H, D, FB_STEP));
    PP_CHECK(fh_map(&v64, v, ld_qkv, B, T, H, D, FB_STEP));
    const float scale = 1.0f / sqrtf((float)D), scale_log2 = FA_LOG2E * scale;
    const int BH = B * H;
    const unsigned grid = (unsigned)(BH * ((T + FB_FIXED - 1) / FB_FIXED));
    PP_CHECK(fa_smem_allow(flash_hopper_bwd_dkdv_kernel<D>, fb_smem<D>::total));
    flash_hopper_bwd_dkdv_kernel<D><<<grid, FH_THREADS, fb_smem<D>::total, stream>>>(
        q64, k128, v128, do64, dk, dv, ld_d, lse, dr, BH, H, T, scale, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    PP_CHECK(fa_smem_allow(flash_hopper_bwd_dq_kernel<D>, fb_smem<D>::total));
    flash_hopper_bwd_dq_kernel<D><<<grid, FH_THREADS, fb_smem<D>::total, stream>>>(
        q128, k64, v64, do128, dq, ld_d, lse, dr, BH, H, T, scale, scale_log2);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

pp_status_t flash_hopper_bwd(bf16 *dq, bf16 *dk, bf16 *dv, int ld_d, const bf16 *dout, int ld_o,
                             const bf16 *q, const bf16 *k, const bf16 *v, int ld_qkv,
                             const float *lse, const float *dr, int B, int H, int T, int d,
                             cudaStream_t stream)
{
    if (d == 64)
        return fh_bwd_t<64>(dq, dk, dv, ld_d, dout, ld_o, q, k, v, ld_qkv, lse, dr, B, H, T,
                            stream);
    return fh_bwd_t<128>(dq, dk, dv, ld_d, dout, ld_o, q, k, v, ld_qkv, lse, dr, B, H, T, stream);
}
