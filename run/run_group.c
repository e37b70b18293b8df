/*
 * run_group.c — the run chain's part of an MPI launch (run.h; the processes: common/pp_group.h):
 * which process owns which device, the checks every process must pass together before anything
 * runs, and the simulation split over the processes.
 *
 * Invariants: every process holds the same config and plan (checked: a fingerprint of the plan
 * broadcast from rank 0), so each computes the same split; every check that one process can fail
 * alone ends in group_agree, so all return the same status; the split simulation's parts are
 * merged (timeline_merge) into the single process's timeline, bitwise.
 */
#include "run.h"

#include "config/resolve.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void run_set_procs(pp_job_t *job, const pp_group_t *g)
{
    pp_job_procs_t *pr = &job->procs;
    memset(pr, 0, sizeof *pr);
    pr->n_procs = g->size;
    pr->n_hosts = g->n_hosts > 0 ? g->n_hosts : 1;
    const int n = job_devices_total(job); /* every replica's */
    group_split_devices(g, n, job->pipeline.devices_per_process, pr->rank_of);
    for (int d = 0; d < n; d++)
        pr->host_of[d] = group_place(g, pr->rank_of[d]).host;
}

void run_rank_of(const pp_run_t *r, const pp_group_t *g, int *rank_of)
{
    group_split_devices(g, r->plan.n_devices, r->job.pipeline.devices_per_process, rank_of);
}

/* FNV-1a over what every process must agree on: the ops, their dependencies, their links. */
static uint64_t plan_fingerprint(const pp_plan_t *plan)
{
    uint64_t h = 1469598103934665603ull;
    const uint64_t prime = 1099511628211ull;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        const long v[] = {o->device, o->role, o->kind, o->stage,       o->mb,
                          o->slot,   o->peer, o->link, (long)o->bytes, o->n_deps};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++)
            h = (h ^ (uint64_t)v[k]) * prime;
        for (int j = 0; j < o->n_deps; j++)
            h = (h ^ (uint64_t)plan->deps[o->dep_begin + j]) * prime;
    }
    return (h ^ (uint64_t)plan->n_ops) * prime;
}

/* Every transfer whose ends two processes own needs a transport that crosses processes. */
static pp_status_t check_boundaries(const pp_run_t *r, const int *rank_of)
{
    const pp_plan_t *plan = &r->plan;
    for (int i = 0; i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->role != PP_ROLE_SEND) continue;
        int a = o->device, b = plan->ops[o->peer].device;
        if (rank_of[a] == rank_of[b] || transport_row(o->link)->crosses_processes) continue;
        char allowed[128];
        transport_list_crossing(allowed, sizeof allowed);
        return config_error_at(&r->cfg, PP_CFG_TRANSPORT, 0, 0,
                               "the boundary from device %d (rank %d) to device %d (rank %d) "
                               "goes over %s, which cannot cross processes (allowed: %s, and a "
                               "GPU per pipeline device)",
                               a, rank_of[a], b, rank_of[b], transport_name(o->link), allowed);
    }
    return PP_OK;
}

pp_status_t run_check_processes(pp_run_t *r, pp_group_t *g)
{
    int rank_of[PP_MAX_DEVICES];
    pp_status_t st = job_check_processes(&r->job, &r->cfg, g->size);
    if (st == PP_OK && g->size > 1) {
        run_rank_of(r, g, rank_of);
        st = check_boundaries(r, rank_of);
    }
    st = group_agree(g, st);
    if (st != PP_OK || g->size <= 1) return st;
    uint64_t mine = plan_fingerprint(&r->plan), root = mine;
    PP_CHECK(g->ops->bcast(g, &root, sizeof root, 0));
    if (mine != root) {
        fprintf(stderr,
                "%s: rank %d: the plan differs from rank 0's (every process must load the same "
                "file with the same --set options)\n",
                r->job.path ? r->job.path : "config", g->rank);
        st = PP_ERR_INPUT;
    }
    return group_agree(g, st);
}

/* The SEND op of the k-th transfer between two processes in plan order (-1: none, k < 0). */
static int kth_crossing_send(const pp_plan_t *plan, const int *rank_of, int k)
{
    for (int i = 0; k >= 0 && i < plan->n_ops; i++) {
        const pp_op_t *o = &plan->ops[i];
        if (o->role != PP_ROLE_SEND) continue;
        if (rank_of[o->device] != rank_of[plan->ops[o->peer].device] && k-- == 0) return i;
    }
    return -1;
}

/* An injected fault for the tests: PPSCHED_TEST_DROP_SEND=k makes the sender of the k-th
 * transfer between two processes (0-based, plan order) never send its ready time. */
pp_status_t run_simulate_split(pp_run_t *r)
{
    int rank_of[PP_MAX_DEVICES];
    const char *drop = getenv("PPSCHED_TEST_DROP_SEND");
    run_rank_of(r, r->group, rank_of);
    pp_sim_part_t part = {
        .group = r->group,
        .rank_of = rank_of,
        .deadline = group_now_s() + r->job.run.timeout_s,
        .timeout_s = r->job.run.timeout_s,
        .drop_send = kth_crossing_send(&r->plan, rank_of, drop && *drop ? atoi(drop) : -1),
    };
    pp_status_t st = simulate_plan_part(&r->sim, &r->plan, &r->cost, &part);
    PP_CHECK(group_agree(r->group, st));
    return timeline_merge(&r->sim, &r->plan, rank_of, r->group, 0.0);
}

void run_note_processes(const pp_run_t *j, const pp_group_t *g, FILE *f)
{
    int rank_of[PP_MAX_DEVICES];
    if (g->size <= 1 || g->rank != 0) return;
    run_rank_of(j, g, rank_of);
    fprintf(f, "# processes: %d (MPI) on %d host%s:", g->size, g->n_hosts,
            g->n_hosts == 1 ? "" : "s");
    for (int d = 0, first = 0; d < j->plan.n_devices; d++) {
        if (d + 1 < j->plan.n_devices && rank_of[d + 1] == rank_of[d]) continue;
        pp_group_place_t at = group_place(g, rank_of[d]);
        fprintf(f, "%s rank %d device%s %d", first ? "," : "", rank_of[d], d > first ? "s" : "",
                first);
        if (d > first) fprintf(f, "-%d", d);
        fprintf(f, " (host %d, local rank %d)", at.host, at.local_rank);
        first = d + 1;
    }
    fputc('\n', f);
}
