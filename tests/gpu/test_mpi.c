/*
 * test_mpi.c — point 5 of running under mpirun: one training step pipelined over the GPUs of
 * several processes gives bitwise the loss and the gradients of one process driving the same
 * GPUs, for gpipe, 1f1b, interleaved-1f1b and zb-h1, nccl at every boundary, fp32; the step times
 * of both are printed side by side (never asserted). Every process runs the split run (run.h with
 * the launch's process group); then rank 0 alone runs the same file over every GPU as one
 * process and compares. tests/check_mpi_gpu.sh launches it with `mpirun -np 2` on 2 GPUs or more
 * and with -np 2 and -np 4 on 4; run alone (make test) it skips itself, saying so. Only rank 0
 * prints the summary line, and every rank exits with the same code.
 */
#include "tests/check.h"
#include "tests/gpu/support.h"

#include "common/pp_group.h"
#include "exec/execute.h"
#include "run/run.h"

#include <stdlib.h>
#include <string.h>

static pp_group_t group;
static int n_gpu; /* GPUs each process sees (the least of any) */
static int p;     /* pipeline devices: 4 where they divide among the processes, else 2 */

/* One run of `kind` over GPUs 0..p-1 through the chain; `g` NULL: this process alone. */
static pp_status_t run_kind(pp_run_t *r, const char *kind, pp_group_t *g)
{
    char yaml[512], ids[64] = "";
    for (int d = 0; d < p; d++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", d ? ", " : "", d);
    snprintf(yaml, sizeof yaml,
             "model: {layers: 8, hidden: 256, heads: 4, seq_len: 128, vocab: 1024, dtype: fp32}\n"
             "pipeline: {devices: [%s], transport: nccl, micro_batches: 8, "
             "micro_batch_size: 2}\n"
             "schedule: {kind: %s}\n"
             "run: {steps: 3, warmup: 1}\n",
             ids, kind);
    pp_run_opts_t ro = {.measure = 1, .exec = execute_plan, .check_grads = 1, .group = g};
    pp_status_t st = run_load_group(r, g, kind, yaml, NULL, 0, n_gpu);
    if (g) {
        st = group_agree(g, st);
        if (st == PP_OK) st = run_check_processes(r, g);
    }
    return st == PP_OK ? run_go(r, &ro) : st;
}

static void compare(const char *kind)
{
    if (group.size < 2) SKIP("run it under mpirun -np 2 or more (tests/check_mpi_gpu.sh does)");
    if (p == 0) SKIP("%d processes need a GPU each, %d seen", group.size, n_gpu);
    pp_run_t split = {0}, one = {0};
    pp_status_t st = run_kind(&split, kind, &group), st1 = PP_OK;
    group.ops->barrier(&group);
    if (group.rank == 0) {
        st1 = run_kind(&one, kind, NULL);
        EXPECT(st == PP_OK && st1 == PP_OK, "%s: %d processes %s, one process %s", kind, group.size,
               pp_status_str(st), pp_status_str(st1));
    }
    if (group.rank == 0 && st == PP_OK && st1 == PP_OK) {
        const pp_exec_result_t *a = &split.exec, *b = &one.exec;
        EXPECT(a->n_steps == b->n_steps &&
                   !memcmp(a->loss, b->loss, sizeof *a->loss * (size_t)a->n_steps),
               "%s: losses differ: %.9g vs %.9g", kind, split.report.loss, one.report.loss);
        EXPECT(a->n_params == b->n_params && a->n_params > 0 &&
                   !memcmp(a->grads, b->grads, sizeof *a->grads * a->n_params),
               "%s: gradients differ (%zu and %zu parameters)", kind, a->n_params, b->n_params);
        fprintf(stderr,
                "  %-16s %d GPUs: loss %.9g | %.9g; step %.3f ms (%d processes) | %.3f ms (one), "
                "skew %.1f us\n",
                kind, p, split.report.loss, one.report.loss, split.report.step_ms, group.size,
                one.report.step_ms, split.meas.skew_ms * 1000);
    }
    group.ops->barrier(&group);
    run_free(&split);
    run_free(&one);
}

static void test_gpipe(void)
{
    compare("gpipe");
}
static void test_1f1b(void)
{
    compare("1f1b");
}
static void test_interleaved(void)
{
    compare("interleaved-1f1b");
}
static void test_zbh1(void)
{
    compare("zb-h1");
}

int main(int argc, char **argv)
{
    pp_status_t st = group_init(&group, group_mpi_ops(), &argc, &argv);
    if (st != PP_OK) return pp_status_exit_code(st);
    const char *why = tg_skip_reason();
    n_gpu = why ? 0 : execute_device_count();
    int least = -n_gpu;
    if (group.size > 1) group.ops->max_int(&group, &least);
    n_gpu = -least;
    p = n_gpu >= 4 && 4 % group.size == 0 ? 4 : n_gpu >= 2 && group.size <= 2 ? 2 : 0;
    RUN(test_gpipe);
    RUN(test_1f1b);
    RUN(test_interleaved);
    RUN(test_zbh1);
    int rc = group.rank == 0 ? check_summary("test_mpi") : (check_failed_ ? 1 : 0);
    return group_finish(&group, rc);
}
