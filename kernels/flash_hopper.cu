/*
 * flash_hopper.cu — the fused causal attention forward on Hopper's warpgroup MMA (sm_90a):
 * attention_flash_fwd's contract (kernels.h), taken by its launcher on a compute capability 9.0
 * GPU unless PPSCHED_FLASH_FWD=mma selects the mma.sync kernels (flash_attention.cu,
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
#define FH_THREADS   (128 * FH_CONSUMERS + 32)
#define FH_PANEL     64  /* columns of a swizzled panel: 128 bytes of bf16 */

/* Shared memory (bytes): Q, then FH_STAGES × (K, V), then the mbarriers; each tile 1024-aligned
 * (the swizzle repeats every 8 rows of 128 bytes). */
template <int D> struct fh_smem {
    static constexpr size_t q = (size_t)FH_BM * D * sizeof(bf16);
    static constexpr size_t kv = (size_t)FH_BN * D * sizeof(bf16); /* one K or one V */
    static constexpr size_t bars = 8 * (1 + 3 * FH_STAGES);         /* q; k full, v full, empty */
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

/* D (+)= A·B, m64n128k16, A and B from shared memory (both K-major); accumulate 0 overwrites D. */
__device__ __forceinline__ void fh_mma_ss_n128(float (&d)[64], uint64_t da, uint64_t db, int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* D += A·B, m64n64k16, A from registers (a[4]: the m16n8k16 A fragment of the warp's 16 rows),
 * B from shared memory, N-major (transposed). */
__device__ __forceinline__ void fh_mma_rs_n64(float (&d)[32], const unsigned (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* D += A·B, m64n128k16, A from registers (a[4]: the m16n8k16 A fragment of the warp's 16 rows),
 * B from shared memory, N-major (transposed). */
__device__ __forceinline__ void fh_mma_rs_n128(float (&d)[64], const unsigned (&a)[4], uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

__device__ __forceinline__ unsigned fh_pack(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
}
#endif /* FH_DEVICE */

/* Grid: BH · ⌈T/128⌉ CTAs, the last query blocks (the most work) first. */
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
    /* k_full[s] = bars + 8 (1 + s), v_full[s] = + 8 FH_STAGES, empty[s] = + 16 FH_STAGES */
#define FH_K_FULL(s) (bars + 8u * (1u + (s)))
#define FH_V_FULL(s) (bars + 8u * (1u + FH_STAGES + (s)))
#define FH_EMPTY(s)  (bars + 8u * (1u + 2 * FH_STAGES + (s)))
#define FH_K_TILE(s) (kv_s + (uint32_t)((2 * (s)) * S::kv))
#define FH_V_TILE(s) (kv_s + (uint32_t)((2 * (s) + 1) * S::kv))

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
            fh_bar_init(FH_EMPTY(s), FH_CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (warp == 4 * FH_CONSUMERS) { /* the producer */
        if (lane != 0) return;
        constexpr uint32_t panel_q = FH_BM * FH_PANEL * sizeof(bf16),
                           panel_kv = FH_BN * FH_PANEL * sizeof(bf16);
        fh_bar_expect(q_full, (uint32_t)S::q);
        for (int p = 0; p < PANELS; p++)
            fh_tma_load(q_s + p * panel_q, &map_q, q_full, h * D + p * FH_PANEL, qb * FH_BM, b);
        for (int it = 0; it < n_kb; it++) {
            const int s = it % FH_STAGES, round = it / FH_STAGES;
            if (round > 0) fh_bar_wait(FH_EMPTY(s), (uint32_t)((round - 1) & 1));
            fh_bar_expect(FH_K_FULL(s), (uint32_t)S::kv);
            for (int p = 0; p < PANELS; p++)
                fh_tma_load(FH_K_TILE(s) + p * panel_kv, &map_k, FH_K_FULL(s),
                            h * D + p * FH_PANEL, it * FH_BN, b);
            fh_bar_expect(FH_V_FULL(s), (uint32_t)S::kv);
            for (int p = 0; p < PANELS; p++)
                fh_tma_load(FH_V_TILE(s) + p * panel_kv, &map_v, FH_V_FULL(s),
                            h * D + p * FH_PANEL, it * FH_BN, b);
        }
        return;
    }

    /* a consumer: warpgroup wg, its warp wl; lane (g, t) holds rows r0 and r0 + 8 */
    const int wg = warp / 4, wl = warp % 4, g = lane / 4, t = lane % 4;
    const int r0 = qb * FH_BM + wg * 64 + wl * 16 + g; /* row in the sequence */
    constexpr uint32_t panel_q = FH_BM * FH_PANEL * sizeof(bf16),
                       panel_kv = FH_BN * FH_PANEL * sizeof(bf16);
    float acc[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; i++)
        acc[i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};

    fh_bar_wait(q_full, 0);
    for (int it = 0; it < n_kb; it++) {
        const int s = it % FH_STAGES;
        const uint32_t phase = (uint32_t)((it / FH_STAGES) & 1);
        float sc[64];

        /* S = Q·Kᵀ: the warpgroup's 64 rows of Q against 128 keys, 16 columns of d a step */
        fh_bar_wait(FH_K_FULL(s), phase);
        fh_fence();
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const uint32_t qa = q_s + (kk / 4) * panel_q + wg * 64 * 128 + (kk % 4) * 32;
            const uint32_t kbase = FH_K_TILE(s) + (kk / 4) * panel_kv + (kk % 4) * 32;
            fh_mma_ss_n128(sc, fh_desc(qa, 16, 1024), fh_desc(kbase, 16, 1024), kk > 0);
        }
        fh_commit();
        fh_hold(sc);
        fh_wait_all();
        fh_hold(sc);

        /* online softmax of rows r0, r0 + 8 (base 2); on the diagonal block key > row masked */
        const bool diag = it == qb;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i = 0; i < 16; i++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int hh = e >> 1, key = it * FH_BN + 8 * i + 2 * t + (e & 1);
                float x = sc[4 * i + e] * scale_log2;
                if (diag && key > r0 + 8 * hh) x = -INFINITY;
                sc[4 * i + e] = x;
                mx[hh] = fmaxf(mx[hh], x);
            }
        float alpha[2];
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
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            acc[4 * i + 0] *= alpha[0], acc[4 * i + 1] *= alpha[0];
            acc[4 * i + 2] *= alpha[1], acc[4 * i + 3] *= alpha[1];
        }
        unsigned pa[FH_BN / 16][4];
#pragma unroll
        for (int j = 0; j < FH_BN / 16; j++) {
            pa[j][0] = fh_pack(sc[8 * j + 0], sc[8 * j + 1]);
            pa[j][1] = fh_pack(sc[8 * j + 2], sc[8 * j + 3]);
            pa[j][2] = fh_pack(sc[8 * j + 4], sc[8 * j + 5]);
            pa[j][3] = fh_pack(sc[8 * j + 6], sc[8 * j + 7]);
        }

        /* O += P·V: 16 keys a step; V's panels are the N-major atoms, panel_kv bytes apart */
        fh_bar_wait(FH_V_FULL(s), phase);
        fh_hold(acc);
        fh_fence();
#pragma unroll
        for (int j = 0; j < FH_BN / 16; j++) {
            const uint64_t dv = fh_desc(FH_V_TILE(s) + j * 16 * 128, panel_kv, 1024);
            if constexpr (D == 64)
                fh_mma_rs_n64(acc, pa[j], dv);
            else
                fh_mma_rs_n128(acc, pa[j], dv);
        }
        fh_commit();
        fh_hold(acc);
        fh_wait_all();
        fh_hold(acc);
        if (threadIdx.x % 128 == 0) fh_bar_arrive(FH_EMPTY(s));
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
#undef FH_EMPTY
#undef FH_K_TILE
#undef FH_V_TILE
#else
    __trap(); /* built without sm_90a: flash_hopper_available() keeps the launcher away */
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
        if (e != cudaSuccess ||
            q != cudaDriverEntryPointSuccess) {
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
    CUresult r = fh_encoder()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void *>(ptr),
                              dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        PP_FAIL(PP_ERR_CUDA, "cuTensorMapEncodeTiled (attention forward): CUDA driver error %d",
                (int)r);
    return PP_OK;
}

int flash_hopper_available(const void *q, const void *k, const void *v, int ld_qkv)
{
#ifdef PP_FLASH_HOPPER
    const char *env = getenv("PPSCHED_FLASH_FWD");
    if (env && strcmp(env, "mma") == 0) return 0;
    if ((ld_qkv * sizeof(bf16)) % 16 != 0 || !is_aligned16(q) || !is_aligned16(k) ||
        !is_aligned16(v))
        return 0;
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major == 9 && minor == 0 && fh_encoder() != NULL;
#else
    (void)q, (void)k, (void)v, (void)ld_qkv;
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
