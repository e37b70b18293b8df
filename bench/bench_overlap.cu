/*
 * bench_overlap.cu — does DualPipeV's overlapped pair pay? The pair (PyTorch's OVERLAP_F_B) is a
 * forward of one chunk and a full backward of the other chunk on the same device. Here two stages
 * on GPU 0 stand for the two chunks (each with its own cuBLAS handle, workspace and slots, as the
 * executor builds them, so the halves share nothing), and the pair is timed two ways, alternated:
 * `serial`, both halves one after the other on one stream; `overlap`, the forward on one stream
 * and the backward on a second, forked and joined with events, so the GPU may run them at once.
 * Each half alone is timed too. Shapes: the reference and the small preset (model/preset.h), one
 * chunk of a 4-device V placement (8 stages: 3 and 2 blocks), bf16.
 *
 *   bench_overlap [--iters N]
 *
 * Prints a `#` preamble, a fixed-width table (median / p10 / p90 us of each), per shape the
 * serial/overlap ratio and the share of the shorter half the overlap hid ((serial - overlap) /
 * min(forward, backward), the simulator's cost.overlap), and one JSON line per shape. Exit 1 on a
 * CUDA error, 2 on bad usage.
 */
#include "common/pp_cuda.h"
#include "model/preset.h"
#include "stages/stage.h"

#include <algorithm>
#include <string>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

typedef struct overlap_shape {
    const char *name;
    int hidden, heads, seq_len, batch, layers; /* layers: one chunk's blocks */
    int vocab, total_layers;                   /* the whole model's */
} overlap_shape_t;

/* Rows of model/preset.h, each cut into 2 chunks a device on the devices it is sized for. */
static const char *const SHAPES[] = {"reference", "small"};

static overlap_shape_t shape_of(const pp_preset_t *p)
{
    overlap_shape_t sh;
    sh.name = p->name;
    sh.hidden = p->model.hidden, sh.heads = p->model.heads, sh.seq_len = p->model.seq_len;
    sh.batch = p->micro_batch_size, sh.layers = p->model.layers / (2 * p->devices);
    sh.vocab = p->model.vocab, sh.total_layers = p->model.layers;
    return sh;
}

enum { MODE_F, MODE_B, MODE_SERIAL, MODE_OVERLAP, MODE_COUNT };
static const char *const MODE_NAMES[MODE_COUNT] = {"forward", "backward", "serial", "overlap"};

/* Everything one shape needs: the two chunks' stages and two streams with their events. */
typedef struct bench {
    pp_stage_t *a, *b; /* a runs the forward half, b the backward half */
    cudaStream_t s1, s2;
    cudaEvent_t fork, join;
} bench_t;

static void bench_free(bench_t *x)
{
    stage_free(x->a);
    stage_free(x->b);
    if (x->s1) cudaStreamDestroy(x->s1);
    if (x->s2) cudaStreamDestroy(x->s2);
    if (x->fork) cudaEventDestroy(x->fork);
    if (x->join) cudaEventDestroy(x->join);
    memset(x, 0, sizeof *x);
}

/* Two middle stages of the shape; b has run one forward so that its backward has its inputs. */
static pp_status_t bench_init(bench_t *x, const overlap_shape_t *sh)
{
    pp_stage_cfg_t c;
    memset(x, 0, sizeof *x);
    memset(&c, 0, sizeof c);
    c.hidden = sh->hidden;
    c.heads = sh->heads;
    c.seq_len = sh->seq_len;
    c.vocab = sh->vocab;
    c.micro_batch_size = sh->batch;
    c.n_layers = sh->layers;
    c.total_layers = sh->total_layers;
    c.dtype = PP_DTYPE_BF16;
    c.seed = 1234;
    c.n_slots = 1;
    c.grad_scale = 1.0f;
    size_t bytes = (size_t)sh->batch * sh->seq_len * sh->hidden * 2;
    pp_status_t st = PP_OK;
    c.first_layer = sh->layers; /* chunk of stage 1 */
    PP_CHECK_GOTO(stage_init(&x->a, &c), st, fail);
    c.first_layer = 6 * sh->layers; /* chunk of stage 6, on the same device in a V */
    PP_CHECK_GOTO(stage_init(&x->b, &c), st, fail);
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&x->s1, cudaStreamNonBlocking), st, fail);
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&x->s2, cudaStreamNonBlocking), st, fail);
    PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&x->fork, cudaEventDisableTiming), st, fail);
    PP_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&x->join, cudaEventDisableTiming), st, fail);
    PP_CUDA_CHECK_GOTO(cudaMemsetAsync(stage_slot_x(x->a, 0), 0, bytes, x->s1), st, fail);
    PP_CUDA_CHECK_GOTO(cudaMemsetAsync(stage_slot_x(x->b, 0), 0, bytes, x->s1), st, fail);
    PP_CUDA_CHECK_GOTO(cudaMemsetAsync(stage_slot_dy(x->b, 0), 0, bytes, x->s1), st, fail);
    PP_CHECK_GOTO(stage_forward(x->b, 0, 0, x->s1), st, fail);
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(x->s1), st, fail);
    return PP_OK;
fail:
    bench_free(x);
    return st;
}

/* Enqueue one round of `mode` on s1 (and s2 for the overlapped pair), between e0 and e1. */
static pp_status_t bench_round(bench_t *x, int mode, cudaEvent_t e0, cudaEvent_t e1)
{
    PP_CUDA_CHECK(cudaEventRecord(e0, x->s1));
    cudaStream_t sb = mode == MODE_OVERLAP ? x->s2 : x->s1;
    if (mode == MODE_OVERLAP) {
        PP_CUDA_CHECK(cudaEventRecord(x->fork, x->s1));
        PP_CUDA_CHECK(cudaStreamWaitEvent(x->s2, x->fork, 0));
    }
    if (mode != MODE_B) PP_CHECK(stage_forward(x->a, 0, 0, x->s1));
    if (mode != MODE_F) PP_CHECK(stage_backward(x->b, 0, 0, sb));
    if (mode == MODE_OVERLAP) {
        PP_CUDA_CHECK(cudaEventRecord(x->join, x->s2));
        PP_CUDA_CHECK(cudaStreamWaitEvent(x->s1, x->join, 0));
    }
    PP_CUDA_CHECK(cudaEventRecord(e1, x->s1));
    return PP_OK;
}

/* iters rounds of every mode, the modes alternated within each round; us[mode] sorted. */
static pp_status_t bench_time(bench_t *x, int iters, std::vector<float> us[MODE_COUNT])
{
    std::vector<cudaEvent_t> ev(2 * (size_t)iters * MODE_COUNT);
    pp_status_t st = PP_OK;
    for (size_t i = 0; i < ev.size(); i++)
        PP_CUDA_CHECK_GOTO(cudaEventCreate(&ev[i]), st, done);
    for (int m = 0; m < MODE_COUNT; m++) /* warm-up */
        PP_CHECK_GOTO(bench_round(x, m, ev[0], ev[1]), st, done);
    for (int i = 0; i < iters; i++)
        for (int m = 0; m < MODE_COUNT; m++) {
            size_t k = 2 * ((size_t)i * MODE_COUNT + (size_t)m);
            PP_CHECK_GOTO(bench_round(x, m, ev[k], ev[k + 1]), st, done);
        }
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(x->s1), st, done);
    for (int m = 0; m < MODE_COUNT; m++) {
        us[m].resize((size_t)iters);
        for (int i = 0; i < iters; i++) {
            size_t k = 2 * ((size_t)i * MODE_COUNT + (size_t)m);
            float ms = 0;
            PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]), st, done);
            us[m][(size_t)i] = 1000.0f * ms;
        }
        std::sort(us[m].begin(), us[m].end());
    }
done:
    for (size_t i = 0; i < ev.size(); i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    return st;
}

static double pct(const std::vector<float> &v, int q)
{
    return v[(size_t)(q * (int)(v.size() - 1)) / 100];
}

int main(int argc, char **argv)
{
    int iters = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc && atoi(argv[i + 1]) > 0) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_overlap [--iters N]\n");
            return 2;
        }
    }
    int n = 0;
    cudaDeviceProp prop;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || cudaSetDevice(0) != cudaSuccess ||
        cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "bench_overlap: no CUDA device\n");
        return 1;
    }
    printf("# bench_overlap: DualPipeV's pair (a forward of one chunk, a backward of the other) "
           "serial on one stream vs overlapped on two, bf16, %d iterations alternated, device 0: "
           "%s\n",
           iters, prop.name);
    printf("# %-10s %-9s %10s %10s %10s\n", "shape", "run", "median", "p10", "p90");
    printf("# %-10s %-9s %10s %10s %10s\n", "", "", "us", "us", "us");
    std::vector<std::string> json;
    for (size_t k = 0; k < sizeof SHAPES / sizeof *SHAPES; k++) {
        const overlap_shape_t shape = shape_of(preset_find(SHAPES[k])), *sh = &shape;
        bench_t x;
        std::vector<float> us[MODE_COUNT];
        if (bench_init(&x, sh) != PP_OK) return 1;
        pp_status_t st = bench_time(&x, iters, us);
        bench_free(&x);
        if (st != PP_OK) return 1;
        for (int m = 0; m < MODE_COUNT; m++)
            printf("  %-10s %-9s %10.1f %10.1f %10.1f\n", sh->name, MODE_NAMES[m], pct(us[m], 50),
                   pct(us[m], 10), pct(us[m], 90));
        double ser = pct(us[MODE_SERIAL], 50), ovl = pct(us[MODE_OVERLAP], 50);
        double fw = pct(us[MODE_F], 50), bw = pct(us[MODE_B], 50);
        double hidden = (ser - ovl) / (fw < bw ? fw : bw); /* what cost.overlap stands for */
        printf("# %s: overlap %s the pair: serial / overlap = %.3f, hides %.2f of the shorter half "
               "(cost.overlap)\n",
               sh->name, ovl < ser ? "shortens" : "does not shorten", ser / ovl, hidden);
        char line[384];
        snprintf(line, sizeof line,
                 "{\"bench\":\"overlap\",\"shape\":\"%s\",\"layers\":%d,\"forward_us\":%.2f,"
                 "\"backward_us\":%.2f,\"serial_us\":%.2f,\"overlap_us\":%.2f,\"speedup\":%.4f,"
                 "\"hidden_share\":%.4f}",
                 sh->name, sh->layers, fw, bw, ser, ovl, ser / ovl, hidden);
        json.push_back(line);
    }
    for (size_t k = 0; k < json.size(); k++)
        printf("%s\n", json[k].c_str());
    return 0;
}
