/*
 * colsum.cu — the column sums of a block's weight pass in two launches (three when plain and
 * LayerNorm tasks meet): every bias gradient and both LayerNorm parameter gradients (contract:
 * colsum_bwd in kernels.h).
 *
 * Launch 1 (colsum_partial_kernel): one grid over the column strips of its tasks × chunks of
 * rows; each block reads its strip of each row of its chunk once, sums the rows of each thread in
 * order, adds the thread row lanes in order through shared memory and writes one partial per
 * (quantity, chunk, column) to the scratch. Tasks with x or res take 4-element vector loads (8
 * bytes in bf16, 16 in fp32: in bf16 the 8-element packs of three tensors held 101 registers a
 * thread, 2 blocks an SM; 4 elements keep it at 60 registers, 4 blocks an SM). Plain tasks (dy
 * only, e.g. a bias gradient) have a launch of their own: 16-byte loads, CP_U rows of a thread
 * loaded before any is added (128 bytes a thread in flight, where the mixed path has 32), the
 * same chunks, row lanes and order, so the same bits.
 * Launch 2 (colsum_finish_kernel): per output column, the chunks are added in a fixed order (each
 * chunk lane's chunks in order, then the lanes in order) and the total is added (+=) to the
 * gradient; a task of partial sums (column sums made elsewhere: by the flash backward, by the
 * LayerNorm input gradient) has no launch-1 part: launch 2 adds its rows as chunks. No atomics:
 * the result depends only on N, the widths, the partial tasks' rows and the scratch size, never on
 * timing. All launches enqueue on the caller's stream; the scratch is free again when the last
 * ends.
 */
#include "kernel_util.cuh"

#include <string.h>

/* Launch 1: threads of a block as CP_X columns (each P wide) × CP_Y row lanes. */
#define CP_X       32
#define CP_Y       8
#define CP_THREADS (CP_X * CP_Y)
/* Rows of a thread loaded at once by the plain path (its loads in flight). */
#define CP_U 8
/* Rows of a chunk at least (the chunk count is capped by CP_MAX_CHUNKS and the scratch). */
#define CP_MIN_ROWS   64
#define CP_MAX_CHUNKS 256
/* Launch 2: CF_X columns × CF_Y chunk lanes; CF_U chunks of a lane loaded before any is added
 * (the 128 chunks of a LayerNorm's partial sums in two round trips, not four; at 16, short of
 * predicate registers, ptxas put the adds between the loads). */
#define CF_X 32
#define CF_Y 8
#define CF_U 8

/* Quantities of a task: Σ dy, Σ dy·x̂, Σ res. */
enum { Q_SUM = 0, Q_XHAT = 1, Q_RES = 2, N_Q = 3 };

/* Everything launch 1 needs, passed by value (kernel parameter space). */
typedef struct colsum_args {
    pp_colsum_task_t task[PP_COLSUM_MAX_TASKS]; /* the tensor tasks, in the caller's order */
    int n_tasks;
    int strip_end[PP_COLSUM_MAX_TASKS];      /* prefix sums of each task's strips (blockIdx.x) */
    long long off[PP_COLSUM_MAX_TASKS][N_Q]; /* float offset of a quantity's partials, or -1 */
    float *partial;                          /* [chunks][C] per (task, quantity) at off */
    int N, rows_per_chunk;
} colsum_args_t;

/* Everything launch 2 needs: one output vector per (task, quantity) present. */
#define CF_MAX_OUT (PP_COLSUM_MAX_TASKS * N_Q)
typedef struct colsum_finish_args {
    float *dst[CF_MAX_OUT];
    const float *src[CF_MAX_OUT]; /* [chunks[o]][n] */
    int n[CF_MAX_OUT];
    int chunks[CF_MAX_OUT];    /* a tensor task's chunks, or a partial task's n_partial */
    int block_end[CF_MAX_OUT]; /* prefix sums of each output's blocks */
    int n_out;
} colsum_finish_args_t;

/* ---- launch 1: partial sums ------------------------------------------------------------------ */

template <typename T, int P> __device__ __forceinline__ void cs_load(float (&v)[P], const T *p)
{
    if constexpr (P * sizeof(T) == 16) {
        pack128<T> x = load128cs(p);
#pragma unroll
        for (int j = 0; j < P; j++)
            v[j] = to_f32(x.v[j]);
    } else if constexpr (P * sizeof(T) == 8) {
        const uint2 u = __ldcs((const uint2 *)p);
        const T *e = (const T *)&u;
#pragma unroll
        for (int j = 0; j < P; j++)
            v[j] = to_f32(e[j]);
    } else {
        v[0] = to_f32(__ldcs(p));
    }
}

/* The sums of one thread over rows r0 + ty, r0 + ty + CP_Y, ... < r1 of columns col..col+P-1. */
template <typename T, int P>
__device__ __forceinline__ void cs_rows(float (&acc)[N_Q][P], const pp_colsum_task_t &t, int col,
                                        int r0, int r1)
{
    const T *dy = (const T *)t.dy, *x = (const T *)t.x, *res = (const T *)t.res;
    const bool has_x = x != NULL, has_res = res != NULL;
#pragma unroll 4
    for (int r = r0; r < r1; r += CP_Y) {
        const size_t at = (size_t)r * t.C + col;
        float d[P], xv[P], rv[P];
        cs_load<T, P>(d, dy + at);
        if (has_x) cs_load<T, P>(xv, x + at);
        if (has_res) cs_load<T, P>(rv, res + at);
        const float mu = has_x ? t.mean[r] : 0.0f, rs = has_x ? t.rstd[r] : 0.0f;
#pragma unroll
        for (int j = 0; j < P; j++) {
            acc[Q_SUM][j] += d[j];
            if (has_x) acc[Q_XHAT][j] += d[j] * ((xv[j] - mu) * rs);
            if (has_res) acc[Q_RES][j] += rv[j];
        }
    }
}

/* The plain path: Σ dy only, the same rows in the same order as cs_rows, CP_U of a thread's rows
 * loaded before the first of them is added. A 16-byte pack stays four 32-bit words until its add
 * (bf16 halves widened by a shift or a mask: exact, as cvt): held as 8 half registers, the 8
 * packs of bf16 took 102 registers a thread. */
template <typename T, int P> struct cs_raw {
    uint4 w; /* P·sizeof(T) == 16 */
};
template <typename T> struct cs_raw<T, 1> {
    T e;
};

template <typename T, int P> __device__ __forceinline__ cs_raw<T, P> cs_load_raw(const T *p)
{
    cs_raw<T, P> x;
    if constexpr (P == 1)
        x.e = __ldcs(p);
    else
        x.w = __ldcs(reinterpret_cast<const uint4 *>(p));
    return x;
}

/* Element j of a raw pack as a float. */
template <typename T, int P> __device__ __forceinline__ float cs_elem(const cs_raw<T, P> &x, int j)
{
    if constexpr (P == 1) {
        return to_f32(x.e);
    } else {
        const unsigned w[4] = {x.w.x, x.w.y, x.w.z, x.w.w};
        if constexpr (sizeof(T) == 4) return __uint_as_float(w[j]);
        return __uint_as_float(j % 2 ? w[j / 2] & 0xffff0000u : w[j / 2] << 16);
    }
}

template <typename T, int P>
__device__ __forceinline__ void cs_rows_plain(float (&acc)[P], const T *dy, int C, int col, int r0,
                                              int r1)
{
    static_assert(P == 1 || P * sizeof(T) == 16, "cs_rows_plain: 16-byte packs or elements");
    for (int r = r0; r < r1; r += CP_U * CP_Y) {
        cs_raw<T, P> d[CP_U];
#pragma unroll
        for (int u = 0; u < CP_U; u++)
            if (r + u * CP_Y < r1) d[u] = cs_load_raw<T, P>(dy + (size_t)(r + u * CP_Y) * C + col);
#pragma unroll
        for (int u = 0; u < CP_U; u++)
            if (r + u * CP_Y < r1)
#pragma unroll
                for (int j = 0; j < P; j++)
                    acc[j] += cs_elem<T, P>(d[u], j);
    }
}

/* PLAIN: every task of the launch is plain (x and res NULL) and takes cs_rows_plain. */
template <typename T, int P, bool PLAIN>
__global__ void __launch_bounds__(CP_THREADS) colsum_partial_kernel(const colsum_args_t a)
{
    constexpr int STRIP = CP_X * P;
    __shared__ __align__(16) float sh[CP_Y][STRIP];
    int ti = 0;
    while (ti < a.n_tasks - 1 && (int)blockIdx.x >= a.strip_end[ti])
        ti++;
    const pp_colsum_task_t &t = a.task[ti];
    const int first = ti ? a.strip_end[ti - 1] : 0;
    const int c0 = ((int)blockIdx.x - first) * STRIP;
    const int tx = threadIdx.x % CP_X, ty = threadIdx.x / CP_X, col = c0 + tx * P;
    const int chunk = blockIdx.y, r0 = chunk * a.rows_per_chunk;
    const int r1 = min(a.N, r0 + a.rows_per_chunk);
    float acc[N_Q][P];
#pragma unroll
    for (int q = 0; q < N_Q; q++)
#pragma unroll
        for (int j = 0; j < P; j++)
            acc[q][j] = 0.0f;
    if (col < t.C) {
        if constexpr (PLAIN)
            cs_rows_plain<T, P>(acc[Q_SUM], (const T *)t.dy, t.C, col, r0 + ty, r1);
        else
            cs_rows<T, P>(acc, t, col, r0 + ty, r1);
    }
    const int ncols = min(STRIP, t.C - c0);
#pragma unroll
    for (int q = 0; q < (PLAIN ? 1 : N_Q); q++) {
        if (a.off[ti][q] < 0) continue; /* uniform over the block */
        __syncthreads();                /* sh may still be read for the previous quantity */
        if constexpr (P % 4 == 0) {     /* 16-byte stores: P-word strides would conflict P ways */
#pragma unroll
            for (int j = 0; j < P; j += 4)
                *reinterpret_cast<float4 *>(&sh[ty][tx * P + j]) =
                    make_float4(acc[q][j], acc[q][j + 1], acc[q][j + 2], acc[q][j + 3]);
        } else {
            sh[ty][tx] = acc[q][0];
        }
        __syncthreads();
        float *out = a.partial + a.off[ti][q] + (size_t)chunk * t.C + c0;
        for (int c = threadIdx.x; c < ncols; c += CP_THREADS) {
            float s = 0.0f;
#pragma unroll
            for (int y = 0; y < CP_Y; y++)
                s += sh[y][c];
            out[c] = s;
        }
    }
}

/* ---- launch 2: the chunks in order, added to the gradients ----------------------------------- */

__global__ void __launch_bounds__(CF_X *CF_Y) colsum_finish_kernel(const colsum_finish_args_t a)
{
    __shared__ float sh[CF_Y][CF_X];
    int oi = 0;
    while (oi < a.n_out - 1 && (int)blockIdx.x >= a.block_end[oi])
        oi++;
    const int first = oi ? a.block_end[oi - 1] : 0;
    const int n = a.n[oi], chunks = a.chunks[oi], lane = threadIdx.x % CF_X, y = threadIdx.x / CF_X;
    const int col = ((int)blockIdx.x - first) * CF_X + lane;
    float s = 0.0f;
    for (int k0 = y; col < n && k0 < chunks; k0 += CF_U * CF_Y) {
        float v[CF_U];
#pragma unroll
        for (int u = 0; u < CF_U; u++)
            if (k0 + u * CF_Y < chunks) v[u] = a.src[oi][(size_t)(k0 + u * CF_Y) * n + col];
#pragma unroll
        for (int u = 0; u < CF_U; u++)
            if (k0 + u * CF_Y < chunks) s += v[u];
    }
    sh[y][lane] = s;
    __syncthreads();
    if (y != 0 || col >= n) return;
    float total = 0.0f;
#pragma unroll
    for (int l = 0; l < CF_Y; l++)
        total += sh[l][lane];
    a.dst[oi][col] += total;
}

/* ---- launchers ------------------------------------------------------------------------------- */

static pp_status_t task_check(const pp_colsum_task_t *t, int i)
{
    if (t->C <= 0) PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: task %d has C = %d", i, t->C);
    if (!t->d_sum) PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: task %d lacks d_sum", i);
    if (t->partial) {
        if (t->dy || t->x || t->res || t->n_partial < 1)
            PP_FAIL(PP_ERR_INTERNAL,
                    "colsum_bwd: task %d of partial sums needs dy, x, res NULL and n_partial >= 1 "
                    "(%d)",
                    i, t->n_partial);
        if (((uintptr_t)t->partial % sizeof(float)) != 0)
            PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: task %d: partial not 4-byte aligned", i);
        return PP_OK;
    }
    if (!t->dy) PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: task %d lacks dy (or partial)", i);
    if (t->x && (!t->mean || !t->rstd || !t->d_xhat))
        PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: task %d has x without mean, rstd or d_xhat", i);
    if (t->res && !t->d_res)
        PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: task %d has res without d_res", i);
    return PP_OK;
}

/* 1 when every tensor of every task can be read in vector loads of P elements. */
static int colsum_vec_ok(const pp_colsum_task_t *tasks, int n_tasks, int P)
{
    for (int i = 0; i < n_tasks; i++) {
        const pp_colsum_task_t *t = &tasks[i];
        if (t->C % P != 0 || !is_aligned16(t->dy)) return 0;
        if ((t->x && !is_aligned16(t->x)) || (t->res && !is_aligned16(t->res))) return 0;
    }
    return 1;
}

/* Output f->n_out: dst[0..n) += the sum of the `chunks` rows of src ([chunks][n]). */
static void colsum_out(colsum_finish_args_t *f, float *dst, const float *src, int n, int chunks)
{
    const int o = f->n_out++;
    f->dst[o] = dst;
    f->src[o] = src;
    f->n[o] = n;
    f->chunks[o] = chunks;
    f->block_end[o] = (o ? f->block_end[o - 1] : 0) + (n + CF_X - 1) / CF_X;
}

/* Fills the partials' layout of `a` (its tensor tasks) and the outputs of `f` for `chunks` chunks,
 * in the order of `tasks`: a tensor task's (task, quantity) pairs own [chunks][C] floats of the
 * scratch each, right after the previous pair's; a partial task's outputs read its own array.
 * Returns the scratch floats of one chunk (all tensor outputs' columns). */
static size_t colsum_plan(colsum_args_t *a, colsum_finish_args_t *f, const pp_colsum_task_t *tasks,
                          int n_tasks, size_t chunks)
{
    size_t at = 0;
    f->n_out = 0;
    for (int i = 0, ti = 0; i < n_tasks; i++) {
        const pp_colsum_task_t *t = &tasks[i];
        if (t->partial) { /* quantity q's rows at partial + q·n_partial·C, where wanted */
            float *dst[N_Q] = {t->d_sum, t->d_xhat, t->d_res};
            for (int q = 0; q < N_Q; q++)
                if (dst[q])
                    colsum_out(f, dst[q], t->partial + (size_t)q * t->n_partial * t->C, t->C,
                               t->n_partial);
            continue;
        }
        if (ti == a->n_tasks) continue; /* a tensor task left out (N = 0) */
        float *dst[N_Q] = {t->d_sum, t->x ? t->d_xhat : NULL, t->res ? t->d_res : NULL};
        for (int q = 0; q < N_Q; q++) {
            a->off[ti][q] = dst[q] ? (long long)(at * chunks) : -1;
            if (!dst[q]) continue;
            colsum_out(f, dst[q], a->partial + at * chunks, t->C, (int)chunks);
            at += (size_t)t->C;
        }
        ti++;
    }
    return at;
}

/* Chunks of at least CP_MIN_ROWS rows, at most CP_MAX_CHUNKS, as many as the scratch
 * holds with per_chunk floats each (0: not even one); no chunk is empty. */
static size_t colsum_chunks(int N, size_t per_chunk, size_t scratch_bytes, int *rows_per_chunk)
{
    size_t chunks = ((size_t)N + CP_MIN_ROWS - 1) / CP_MIN_ROWS;
    if (chunks > CP_MAX_CHUNKS) chunks = CP_MAX_CHUNKS;
    const size_t fit = scratch_bytes / (per_chunk * sizeof(float));
    if (chunks > fit) chunks = fit;
    if (chunks < 1) return 0;
    *rows_per_chunk = (int)(((size_t)N + chunks - 1) / chunks);
    return ((size_t)N + *rows_per_chunk - 1) / *rows_per_chunk;
}

template <typename T, int P, bool PLAIN>
static pp_status_t colsum_launch(colsum_args_t &a, int chunks, cudaStream_t stream)
{
    const int strip = CP_X * P;
    for (int i = 0, end = 0; i < a.n_tasks; i++) {
        end += (a.task[i].C + strip - 1) / strip;
        a.strip_end[i] = end;
    }
    colsum_partial_kernel<T, P, PLAIN>
        <<<dim3(a.strip_end[a.n_tasks - 1], chunks), CP_THREADS, 0, stream>>>(a);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

/* The tensor tasks of `a` as two launches' arguments: the plain ones (dy only) and the rest, each
 * task with its partials' offsets. */
static void colsum_split(const colsum_args_t *a, colsum_args_t *plain, colsum_args_t *mixed)
{
    *plain = *a;
    *mixed = *a;
    plain->n_tasks = mixed->n_tasks = 0;
    for (int i = 0; i < a->n_tasks; i++) {
        const pp_colsum_task_t *t = &a->task[i];
        colsum_args_t *d = (!t->x && !t->res) ? plain : mixed;
        d->task[d->n_tasks] = *t;
        memcpy(d->off[d->n_tasks], a->off[i], sizeof a->off[i]);
        d->n_tasks++;
    }
}

typedef pp_status_t (*colsum_launch_fn)(colsum_args_t &, int, cudaStream_t);

/* Launch 1: the plain tasks in 16-byte loads (elements one by one when a width or a pointer does
 * not allow them), the others in 4-element loads (likewise). */
static pp_status_t colsum_partials(const colsum_args_t *a, int chunks, pp_dtype_t dtype,
                                   cudaStream_t stream)
{
    colsum_args_t plain, mixed;
    colsum_split(a, &plain, &mixed);
    const int bf = dtype == PP_DTYPE_BF16;
    if (plain.n_tasks > 0) {
        const int vec = colsum_vec_ok(plain.task, plain.n_tasks, bf ? 8 : 4);
        const colsum_launch_fn fn =
            bf ? (vec ? colsum_launch<bf16, 8, true> : colsum_launch<bf16, 1, true>)
               : (vec ? colsum_launch<float, 4, true> : colsum_launch<float, 1, true>);
        PP_CHECK(fn(plain, chunks, stream));
    }
    if (mixed.n_tasks > 0) {
        const int vec = colsum_vec_ok(mixed.task, mixed.n_tasks, 4);
        const colsum_launch_fn fn =
            bf ? (vec ? colsum_launch<bf16, 4, false> : colsum_launch<bf16, 1, false>)
               : (vec ? colsum_launch<float, 4, false> : colsum_launch<float, 1, false>);
        PP_CHECK(fn(mixed, chunks, stream));
    }
    return PP_OK;
}

pp_status_t colsum_bwd(const pp_colsum_task_t *tasks, int n_tasks, int N, void *scratch,
                       size_t scratch_bytes, pp_dtype_t dtype, cudaStream_t stream)
{
    if (!dtype_ok(dtype)) PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: bad dtype %d", (int)dtype);
    if (n_tasks < 1 || n_tasks > PP_COLSUM_MAX_TASKS || !tasks || N < 0)
        PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: %d tasks (1..%d), N = %d", n_tasks,
                PP_COLSUM_MAX_TASKS, N);
    for (int i = 0; i < n_tasks; i++)
        PP_CHECK(task_check(&tasks[i], i));
    colsum_args_t a;
    colsum_finish_args_t f;
    memset(&a, 0, sizeof a);
    memset(&f, 0, sizeof f);
    for (int i = 0; i < n_tasks && N > 0; i++) /* the tensor tasks; over no rows they add 0 */
        if (!tasks[i].partial) a.task[a.n_tasks++] = tasks[i];
    a.N = N;
    a.partial = (float *)scratch;
    size_t chunks = 1;
    if (a.n_tasks > 0) {
        if (!scratch || ((uintptr_t)scratch % sizeof(float)) != 0)
            PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: scratch NULL or not 4-byte aligned");
        const size_t per_chunk = colsum_plan(&a, &f, tasks, n_tasks, 1);
        chunks = colsum_chunks(N, per_chunk, scratch_bytes, &a.rows_per_chunk);
        if (chunks < 1)
            PP_FAIL(PP_ERR_INTERNAL, "colsum_bwd: scratch of %zu bytes too small for %zu columns",
                    scratch_bytes, per_chunk);
    }
    colsum_plan(&a, &f, tasks, n_tasks, chunks);
    if (f.n_out == 0) return PP_OK;

    if (a.n_tasks > 0) PP_CHECK(colsum_partials(&a, (int)chunks, dtype, stream));
    colsum_finish_kernel<<<f.block_end[f.n_out - 1], CF_X * CF_Y, 0, stream>>>(f);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}
