/*
 * execute_profile.c — `ppsched profile` on the GPU (execute.h, profile.h).
 *
 * On the config's first pipeline device: one throw-away stage loads every kernel module, so the
 * memory held afterwards with no stage is the runtime's share (context, cuBLAS, modules). Then a
 * middle, a first and a last stage of layers / stages blocks with one slot each: F, I and W of one
 * micro-batch are captured PROF_REPS times into one CUDA graph with a timing event between passes
 * (as the executor replays a step), the graph replayed `iters` times, and each pass's median
 * taken. A stage's memory is what the device holds with it built and run, less what it held before;
 * what that exceeds stage_device_bytes by is the per-stage overhead; the memory held with no stage
 * alive, once the kernels were loaded, is the runtime's share. With a second pipeline
 * device on another GPU, peer copies 0 -> 1 of four sizes around the boundary tensor are timed
 * (event pairs, the median). Everything is freed before returning; all work is on one non-blocking
 * stream per device.
 */
#include "execute.h"

#include "common/pp_cuda.h"
#include "stages/stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROF_REPS 4 /* F, I, W sequences per graph */

static pp_status_t used_bytes(double *out)
{
    size_t fr, tot;
    PP_CUDA_CHECK(cudaMemGetInfo(&fr, &tot));
    *out = (double)(tot - fr);
    return PP_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* (p90 - p10) / med of n values sorted ascending (median's order). */
static double spread_of(const double *v, int n, double med)
{
    if (n < 1 || !(med > 0)) return 0.0;
    return (v[(int)(0.9 * (n - 1) + 0.5)] - v[(int)(0.1 * (n - 1))]) / med;
}

/* F, I and W of slot 0 on `s`; with `ev`, the four timing events around them. The events are
 * recorded as external event nodes, since run_passes is captured into a graph: a plain record
 * inside a capture only orders the capture and is never recorded on replay. */
static pp_status_t run_passes(pp_stage_t *st, cudaStream_t s, cudaEvent_t *ev)
{
    if (ev) PP_CUDA_CHECK(cudaEventRecordWithFlags(ev[0], s, cudaEventRecordExternal));
    PP_CHECK(stage_forward(st, 0, 0, s));
    if (ev) PP_CUDA_CHECK(cudaEventRecordWithFlags(ev[1], s, cudaEventRecordExternal));
    PP_CHECK(stage_backward_input(st, 0, 0, s));
    if (ev) PP_CUDA_CHECK(cudaEventRecordWithFlags(ev[2], s, cudaEventRecordExternal));
    PP_CHECK(stage_backward_weight(st, 0, 0, s));
    if (ev) PP_CUDA_CHECK(cudaEventRecordWithFlags(ev[3], s, cudaEventRecordExternal));
    return PP_OK;
}

/* F, I, W of `st` (ms, medians; spread: their samples' (p90 - p10) / median): one eager run
 * (cuBLAS picks its algorithms outside capture), then PROF_REPS runs captured into a graph with
 * events between the passes, replayed iters times. */
static pp_status_t time_passes(pp_stage_t *st, cudaStream_t s, int iters, double ms[3],
                               double spread[3])
{
    cudaEvent_t ev[PROF_REPS][4] = {{0}};
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    double *samples = malloc(sizeof(double) * 3 * (size_t)(iters * PROF_REPS));
    pp_status_t rc = PP_OK;
    PP_ALLOC_CHECK(samples);
    for (int r = 0; r < PROF_REPS; r++)
        for (int k = 0; k < 4; k++)
            PP_CUDA_CHECK_GOTO(cudaEventCreate(&ev[r][k]), rc, done);
    PP_CHECK_GOTO(run_passes(st, s, NULL), rc, done);
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(s), rc, done);
    PP_CUDA_CHECK_GOTO(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), rc, done);
    for (int r = 0; r < PROF_REPS && rc == PP_OK; r++)
        rc = run_passes(st, s, ev[r]);
    cudaError_t e = cudaStreamEndCapture(s, &g);
    if (rc != PP_OK) goto done;
    PP_CUDA_CHECK_GOTO(e, rc, done);
    PP_CUDA_CHECK_GOTO(cudaGraphInstantiate(&ge, g, 0), rc, done);
    PP_CUDA_CHECK_GOTO(cudaGraphLaunch(ge, s), rc, done); /* warm-up replay */
    for (int it = 0; it < iters; it++) {
        PP_CUDA_CHECK_GOTO(cudaGraphLaunch(ge, s), rc, done);
        PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(s), rc, done);
        for (int r = 0; r < PROF_REPS; r++)
            for (int k = 0; k < 3; k++) {
                float t;
                PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&t, ev[r][k], ev[r][k + 1]), rc, done);
                samples[(size_t)k * iters * PROF_REPS + (size_t)(it * PROF_REPS + r)] = t;
            }
    }
    for (int k = 0; k < 3; k++) {
        double *v = samples + (size_t)k * iters * PROF_REPS;
        ms[k] = median(v, iters * PROF_REPS);
        spread[k] = spread_of(v, iters * PROF_REPS, ms[k]);
    }
done:
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    for (int r = 0; r < PROF_REPS; r++)
        for (int k = 0; k < 4; k++)
            if (ev[r][k]) cudaEventDestroy(ev[r][k]);
    free(samples);
    return rc;
}

/* The stage configuration of profile stage `k` at the config's shape: one slot, one I->W buffer. */
static void prof_stage_cfg(pp_stage_cfg_t *c, const pp_job_t *job, pp_prof_stage_t k)
{
    const pp_prof_stage_desc_t *d = profile_stage_desc(k);
    int stages = job->pipeline.stages > 0 ? job->pipeline.stages : 1;
    job_stage_cfg(c, job);
    /* An uneven split (model.layers_per_stage, split: balanced) may leave fewer blocks than
     * stages: profile one block then, since the block part is what the calibration needs. */
    c->n_layers = job->model.layers >= stages ? job->model.layers / stages : 1;
    /* Where its blocks sit only picks their initial values; a middle stage takes the middle of the
     * model, which stays inside it even when one stage holds every block. */
    int rest = job->model.layers - c->n_layers;
    c->first_layer = d->is_first ? 0 : d->is_last ? rest : rest / 2;
    c->is_first = d->is_first;
    c->is_last = d->is_last;
    c->n_slots = 1;
    c->n_wgrad_slots = 1; /* I then W of one micro-batch */
    c->grad_scale = 1.0f;
}

/* Build, time and measure profile stage k; frees it before returning. */
static pp_status_t profile_one_stage(pp_profile_t *p, const pp_job_t *job, pp_prof_stage_t k,
                                     cudaStream_t s, int iters, double *overhead)
{
    pp_stage_cfg_t c;
    pp_stage_t *st = NULL;
    double before, after;
    pp_status_t rc;
    prof_stage_cfg(&c, job, k);
    PP_CHECK(used_bytes(&before));
    PP_CHECK(stage_init(&st, &c));
    PP_CHECK_GOTO(time_passes(st, s, iters, p->ms[k], p->spread[k]), rc, done);
    PP_CHECK_GOTO(used_bytes(&after), rc, done);
    /* A stage holds at least what it allocates: less means the GPU's free memory moved under
     * the measurement (another process allocating or freeing), and the sized figure stands. */
    const double sized = (double)stage_device_bytes(&c);
    p->stage_bytes[k] = after - before;
    if (p->stage_bytes[k] < sized) {
        fprintf(stderr,
                "ppsched profile: the %s stage measured %.3f GiB, less than the %.3f GiB it "
                "allocates: the GPU's free memory changed during the measurement (another "
                "process?); its memory is taken from the sizing functions\n",
                profile_stage_desc(k)->name, p->stage_bytes[k] / 1073741824.0,
                sized / 1073741824.0);
        p->stage_bytes[k] = sized;
    }
    *overhead = p->stage_bytes[k] - sized;
done:
    stage_free(st);
    return rc;
}

/* Peer copies from pipeline device 0 to 1 (CUDA ids a, b) of four sizes around `bytes`. */
static pp_status_t profile_sends(pp_profile_t *p, int a, int b, size_t bytes, int iters)
{
    void *src = NULL, *dst = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double *t = malloc(sizeof(double) * (size_t)iters);
    size_t most = bytes * 4;
    pp_status_t rc = PP_OK;
    PP_ALLOC_CHECK(t);
    PP_CUDA_CHECK_GOTO(cudaSetDevice(b), rc, done);
    PP_CUDA_CHECK_GOTO(cudaMalloc(&dst, most), rc, done);
    PP_CUDA_CHECK_GOTO(cudaSetDevice(a), rc, done);
    int can = 0;
    PP_CUDA_CHECK_GOTO(cudaDeviceCanAccessPeer(&can, a, b), rc, done);
    if (can) {
        cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
            PP_CUDA_CHECK_GOTO(e, rc, done);
        (void)cudaGetLastError();
    }
    PP_CUDA_CHECK_GOTO(cudaMalloc(&src, most), rc, done);
    PP_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), rc, done);
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e0), rc, done);
    PP_CUDA_CHECK_GOTO(cudaEventCreate(&e1), rc, done);
    for (size_t size = bytes / 4; size > 0 && size <= most && p->n_sends < 4; size *= 2) {
        for (int it = 0; it <= iters; it++) {
            float ms;
            PP_CUDA_CHECK_GOTO(cudaEventRecord(e0, s), rc, done);
            PP_CUDA_CHECK_GOTO(cudaMemcpyPeerAsync(dst, b, src, a, size, s), rc, done);
            PP_CUDA_CHECK_GOTO(cudaEventRecord(e1, s), rc, done);
            PP_CUDA_CHECK_GOTO(cudaEventSynchronize(e1), rc, done);
            PP_CUDA_CHECK_GOTO(cudaEventElapsedTime(&ms, e0, e1), rc, done);
            if (it > 0) t[it - 1] = ms; /* the first is a warm-up */
        }
        p->send_bytes[p->n_sends] = (double)size;
        p->send_ms[p->n_sends] = median(t, iters);
        p->n_sends++;
    }
done:
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s) cudaStreamDestroy(s);
    if (src) cudaFree(src);
    cudaSetDevice(b);
    if (dst) cudaFree(dst);
    cudaSetDevice(a);
    free(t);
    return rc;
}

static void profile_header(pp_profile_t *p, const pp_job_t *job, const char *device)
{
    time_t now = time(NULL);
    struct tm tmv;
    gmtime_r(&now, &tmv);
    strftime(p->date, sizeof p->date, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    snprintf(p->device, sizeof p->device, "%.*s", (int)sizeof p->device - 1, device);
    const pp_gpu_t *g = gpu_match_device(device);
    snprintf(p->gpu, sizeof p->gpu, "%s", g ? g->name : "");
    int stages = job->pipeline.stages > 0 ? job->pipeline.stages : 1;
    p->shape = (pp_model_shape_t){job->model.hidden,
                                  job->model.heads,
                                  job->model.seq_len,
                                  job->model.vocab,
                                  job->pipeline.micro_batch_size,
                                  job->model.layers >= stages ? job->model.layers / stages : 1,
                                  0,
                                  job->model.layers,
                                  0,
                                  0};
    p->dtype = job->model.dtype;
}

pp_status_t execute_profile(pp_profile_t *p, const pp_job_t *job, int iters, int verbose)
{
    struct cudaDeviceProp prop;
    cudaStream_t s = NULL;
    pp_status_t rc = PP_OK;
    int dev = job->pipeline.device_ids[0];
    memset(p, 0, sizeof *p);
    if (execute_device_count() == 0) { /* the machine's condition, not a bug: no source place */
        fprintf(stderr, "ppsched profile: no CUDA device: profile measures on a GPU (without one, "
                        "`ppsched --simulate FILE.yaml` predicts with the cost model)\n");
        return PP_ERR_DEVICE;
    }
    PP_CUDA_CHECK(cudaSetDevice(dev));
    PP_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    profile_header(p, job, prop.name);
    PP_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    /* Load every module once (a last stage runs every kernel kind but the embedding's; a first
     * stage of the same shape follows at once below), then the runtime's share. */
    double overhead[PP_PROF_STAGE_COUNT], unused;
    pp_profile_t scratch = *p;
    PP_CHECK_GOTO(profile_one_stage(&scratch, job, PP_PROF_FIRST, s, 1, &unused), rc, done);
    PP_CHECK_GOTO(profile_one_stage(&scratch, job, PP_PROF_LAST, s, 1, &unused), rc, done);
    PP_CHECK_GOTO(used_bytes(&p->runtime_bytes), rc, done);
    for (int k = 0; k < PP_PROF_STAGE_COUNT; k++) {
        if (verbose)
            fprintf(stderr, "# profiling the %s stage (%d blocks)\n",
                    profile_stage_desc((pp_prof_stage_t)k)->name, p->shape.n_layers);
        PP_CHECK_GOTO(profile_one_stage(p, job, (pp_prof_stage_t)k, s, iters, &overhead[k]), rc,
                      done);
    }
    /* What one stage holds beyond its sizing functions (its cuBLAS handles, allocation rounding).
     */
    p->stage_overhead_bytes = (overhead[0] + overhead[1] + overhead[2]) / 3.0;
    if (p->stage_overhead_bytes < 0) p->stage_overhead_bytes = 0;
    if (job->pipeline.n_devices >= 2 && job->pipeline.device_ids[1] != dev) {
        size_t boundary = (size_t)job->pipeline.micro_batch_size * job->model.seq_len *
                          job->model.hidden * pp_dtype_size(job->model.dtype);
        PP_CHECK_GOTO(profile_sends(p, dev, job->pipeline.device_ids[1], boundary, iters), rc,
                      done);
    }
    profile_calibrate(p);
done:
    if (s) cudaStreamDestroy(s);
    return rc;
}
