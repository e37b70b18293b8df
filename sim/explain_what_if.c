/*
 * explain_what_if.c — the what-if figures of explain.h: the simulator's step for the plan with one
 * category taken out of the cost model (the rows of pp_what_ifs), every row in one pass over the
 * plan (simulate_makespans), and with the run's own timeline too (simulate_plan_and) when the
 * caller has it to simulate anyway.
 */
#include "explain.h"

#include <string.h>

const pp_what_if_info_t pp_what_ifs[PP_WHAT_IF_COUNT] = {
    [PP_WHAT_IF_NO_LAUNCH] = {"no_launch_gaps", "no launch gaps", 0, 0, 0, 1},
    [PP_WHAT_IF_FREE_COMM] = {"free_transfers", "free transfers", 1, 0, 0, 0},
    [PP_WHAT_IF_EVEN_STAGES] = {"even_stages", "even stages", 0, 1, 0, 0},
    [PP_WHAT_IF_ALL] = {"all", "all three", 1, 1, 0, 1},
    [PP_WHAT_IF_REDUCE_FREE] = {"reduce_free", "reduce free", 0, 0, 1, 0},
};

/* A copy of `cm` changed as row `w` says. */
static pp_status_t cost_variant(pp_cost_model_t *out, const pp_cost_model_t *cm,
                                const pp_what_if_info_t *w)
{
    pp_job_cost_t zero = {0};
    int n = cm->n_stages;
    PP_CHECK(cost_model_uniform(out, n, &zero));
    double *dst[4] = {out->f, out->b, out->i, out->w};
    const double *src[4] = {cm->f, cm->b, cm->i, cm->w};
    memcpy(out->head, cm->head, sizeof *out->head * (size_t)n); /* no row changes them */
    memcpy(out->tail, cm->tail, sizeof *out->tail * (size_t)n);
    for (int kind = 0; kind < 4; kind++) {
        double mean = 0.0;
        for (int s = 0; s < n; s++)
            mean += src[kind][s] / n;
        for (int s = 0; s < n; s++)
            dst[kind][s] = w->even_stages ? mean : src[kind][s];
    }
    out->send = w->free_comm ? 0.0 : cm->send;
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++)
        out->send_by[t] = w->free_comm ? 0.0 : cm->send_by[t];
    out->host_link_gbps = cm->host_link_gbps; /* offload copies are not pipeline transfers */
    memcpy(out->link_of, cm->link_of, sizeof out->link_of);
    out->gap_ms = w->no_gaps ? 0.0 : cm->gap_ms;
    out->overlap = cm->overlap;
    out->reduce_ranks = cm->reduce_ranks;
    for (int net = 0; net < 2; net++) {
        out->reduce_gbps[net] = w->free_reduce ? 0.0 : cm->reduce_gbps[net];
        out->reduce_latency_ms[net] = w->free_reduce ? 0.0 : cm->reduce_latency_ms[net];
    }
    return PP_OK;
}

pp_status_t explain_what_if_sim(pp_what_if_t *w, pp_timeline_t *tl, const pp_plan_t *plan,
                                const pp_cost_model_t *cm)
{
    pp_cost_model_t v[PP_WHAT_IF_COUNT] = {{0}};
    const pp_cost_model_t *vp[1 + PP_WHAT_IF_COUNT] = {cm};
    pp_status_t st = PP_OK;
    memset(w, 0, sizeof *w);
    for (int i = 0; i < PP_WHAT_IF_COUNT && st == PP_OK; i++) {
        st = cost_variant(&v[i], cm, &pp_what_ifs[i]);
        vp[1 + i] = &v[i];
    }
    if (st == PP_OK && tl) /* the plan as modelled and every case in one pass */
        st = simulate_plan_and(tl, w->step_ms, plan, vp, 1 + PP_WHAT_IF_COUNT);
    else if (st == PP_OK) /* every case in one pass over the plan */
        st = simulate_makespans(w->step_ms, plan, vp + 1, PP_WHAT_IF_COUNT);
    for (int i = 0; i < PP_WHAT_IF_COUNT; i++)
        cost_model_free(&v[i]);
    return st;
}

pp_status_t explain_what_if(pp_what_if_t *w, const pp_plan_t *plan, const pp_cost_model_t *cm)
{
    return explain_what_if_sim(w, NULL, plan, cm);
}
