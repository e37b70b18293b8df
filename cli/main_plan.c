/*
 * main_plan.c — the `ppsched plan` command: the search (planner.h) with the options of its rows in
 * options.c, its outputs (outputs.c), and --verify K, which runs the best K that fit the GPUs
 * present through the chain with the executor, re-ranks them by the measured step and prints
 * predicted against measured. The search is held to --budget (60 s unless given); what it left
 * out is said on stderr and in the outputs.
 *
 * Part of the command line (outside the core: it hands execute_plan to the chain). Exit codes as
 * elsewhere: 0 ok, 2 usage or input error, 1 when nothing fits the memory or a GPU run fails.
 */
#include "cli.h"
#include "exec/execute.h"

#include <stdlib.h>

#define PLAN_TOP    10   /* rows in the table without --top */
#define PLAN_BUDGET 60.0 /* seconds of search without --budget */

/* ---- --verify ------------------------------------------------------------------------------- */

static pp_status_t plan_verify_here(const pp_search_t *s, const pp_plan_query_t *q, int k)
{
    int n_visible = execute_device_count(), n = 0;
    if (n_visible < 1) {
        fprintf(stderr, "ppsched plan: --verify: no CUDA device found\n");
        return PP_ERR_DEVICE;
    }
    if (n_visible < s->p) {
        fprintf(stderr,
                "ppsched plan: --verify: %d GPU%s present, the plan is for %d (allowed: --gpus %d "
                "or fewer)\n",
                n_visible, n_visible == 1 ? "" : "s", s->p, n_visible);
        return PP_ERR_DEVICE;
    }
    char name[256];
    execute_describe_devices(name, sizeof name);
    pp_run_opts_t ro = {.measure = 1, .exec = execute_plan, .gpu = gpu_match_device(name)};
    if (k > s->n_fit) k = s->n_fit; /* no more can run */
    pp_verified_t *v = calloc((size_t)(k > 0 ? k : 1), sizeof *v);
    PP_ALLOC_CHECK(v);
    pp_status_t st = plan_verify(s, q, k, n_visible, &ro, v, &n);
    if (st == PP_OK) st = plan_print_verified(s, v, n, stdout);
    free(v);
    return st;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* With --verify and no --gpu, the search prices the GPU present, as the verified runs do. */
static int plan_present_gpu(cli_opts_t *o)
{
    char name[256];
    execute_describe_devices(name, sizeof name);
    const pp_gpu_t *g = gpu_match_device(name);
    if (!g) return 0;
    snprintf(o->gpu_set, sizeof o->gpu_set, "cost.gpu=%s", g->name);
    return cli_add_set(o, o->gpu_set);
}

/* Nothing fitting the memory is the GPUs' shortfall: exit 1, after the message saying so. */
pp_status_t cli_plan(char **files, int n_files, cli_opts_t *o)
{
    if (o->verify > 0 && !execute_built_with_cuda()) {
        fprintf(stderr, "ppsched plan: --verify needs the CUDA build (ppsched was built without "
                        "CUDA)\n");
        return PP_ERR_USAGE;
    }
    if (o->verify > 0 && !o->gpu_set[0] && plan_present_gpu(o) < 0) return PP_ERR_USAGE;
    if (!o->top) o->top = PLAN_TOP;
    pp_plan_query_t q = {.path = files[0],
                         .sets = o->sets,
                         .n_sets = o->n_sets,
                         .gpus = o->gpus,
                         .global_batch = o->global_batch,
                         .tokens = o->tokens,
                         .memory_gib = o->memory_gib,
                         .progress = !o->quiet,
                         .optimizer = o->optimizer,
                         .budget_s = o->budget_s > 0 ? o->budget_s : PLAN_BUDGET,
                         .kinds = o->kinds};
    pp_search_t s;
    cli_result_t res = {.path = files[0], .search = &s};
    pp_status_t st = plan_search(&s, &q);
    if (st == PP_OK) plan_print_unevaluated(&s, stderr);
    if (st == PP_OK && plan_print_nothing_fits(&s, stderr))
        st = PP_ERR_DEVICE;
    else if (st == PP_OK)
        st = cli_write_outputs(&res, o);
    if (st == PP_OK && o->verify > 0) st = plan_verify_here(&s, &q, o->verify);
    plan_search_free(&s);
    return st;
}
