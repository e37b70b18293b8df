/*
 * nocuda.c — the executor of the CPU-only build (make CUDA=off, or no CUDA toolkit found): the
 * interface of execute.h with no device behind it. Counting devices finds none, so a run
 * simulates; anything that must run on a GPU fails with a message that says how to get one.
 */
#include "execute.h"

#include <string.h>

static const char *no_cuda = "ppsched was built without CUDA (CPU-only: simulate, show, check, "
                             "compare, plan); rebuild with the CUDA toolkit installed to run on "
                             "GPUs";

int execute_built_with_cuda(void)
{
    return 0;
}

int execute_device_count(void)
{
    return 0;
}

void execute_describe_devices(char *buf, size_t size)
{
    snprintf(buf, size, "no CUDA (CPU-only build)");
}

pp_status_t execute_plan(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                         const pp_job_t *job, const pp_exec_opts_t *opts)
{
    memset(tl, 0, sizeof *tl);
    fprintf(stderr, "ppsched: %s\n", no_cuda);
    return PP_ERR_DEVICE;
}

pp_status_t execute_profile(pp_profile_t *prof, const pp_job_t *job, int iters, int verbose)
{
    memset(prof, 0, sizeof *prof);
    fprintf(stderr, "ppsched profile: %s\n", no_cuda);
    return PP_ERR_DEVICE;
}
