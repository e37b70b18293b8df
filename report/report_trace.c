/*
 * report_trace.c — a timeline as a Chrome trace (JSON Object Format; Perfetto and chrome://tracing
 * read it): `{"traceEvents":[...],"displayTimeUnit":"ms"}`.
 *
 * Layout: pid = pipeline device, tid = stream role (a row of roles.c: compute, send, recv, and the
 * host copies' offload and load, drawn under the compute; with data-parallel replicas, reduce,
 * and each device's name says its replica), each named by metadata events; one
 * complete event ("ph":"X", ts/dur in microseconds) per plan op; a flow
 * arrow from every SEND to its RECV ("ph":"s" on the send slice, "ph":"f" with "bp":"e" on the
 * receive slice, both with the SEND's op index as id). Each device also gets an `idle` track
 * (tid IDLE_TID) with one complete event per idle stretch, named by its reason (explain.h) and
 * coloured by the reason table's cname; the ops of the critical path carry "critical":1 and are
 * chained by flow arrows of cat "critical_path" (ids n_ops + link). Any failure to open or write
 * the file prints the path and the system's reason and returns PP_ERR_IO.
 */
#include "report.h"
#include "report_io.h"

#include <stdlib.h>
#include <string.h>

#define IDLE_TID PP_ROLE_COUNT /* the idle track sits after the stream roles */

/* The event name: "F3" for compute ops (the stage is in args), "2SEND_F1" for communication and
 * "0OFFLOAD3" for a host copy. */
static void op_name(const pp_op_t *op, char *buf, size_t size)
{
    if (pp_action_is_compute(op->kind)) {
        snprintf(buf, size, "%s%d", action_kind_name(op->kind), op->mb);
    } else {
        pp_action_t a = {op->kind, op->stage, op->mb, 0};
        action_format(&a, buf, size);
    }
}

/* A name and a sort index for every device, and for every (device, role) track that has ops. */
static void trace_tracks(pp_out_t *o, const pp_plan_t *plan, const pp_timeline_t *tl,
                         const int *cuda_ids, const pp_idle_split_t *s)
{
    int first = 1;
    /* Which (device, role) tracks exist, and which devices idled, so only those get a name. */
    unsigned char used[PP_MAX_DEVICES][PP_ROLE_COUNT + 1];
    memset(used, 0, sizeof used);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (op->device >= 0 && op->device < PP_MAX_DEVICES && op->role < PP_ROLE_COUNT)
            used[op->device][op->role] = 1;
    }
    for (int g = 0; g < s->n_gaps; g++)
        used[s->gaps[g].device][IDLE_TID] = 1;

    for (int d = 0; d < plan->n_devices && d < PP_MAX_DEVICES; d++) {
        char name[80], rep[32] = "";
        if (plan_replicas(plan) > 1) /* data parallel: the replica too */
            snprintf(rep, sizeof rep, " replica %d", plan_replica_of(plan, d));
        if (cuda_ids && cuda_ids[d] >= 0)
            snprintf(name, sizeof name, "device %d%s (cuda %d)", d, rep, cuda_ids[d]);
        else if (tl->mode == PP_MODE_SIMULATE)
            snprintf(name, sizeof name, "device %d%s (simulated)", d, rep);
        else
            snprintf(name, sizeof name, "device %d%s", d, rep);
        out_printf(o, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
                   first ? "" : ",\n", d);
        out_json_str(o, name);
        out_puts(o, "}}");
        out_printf(o,
                   ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_"
                   "index\":%d}}",
                   d, d);
        first = 0;
        for (int role = 0; role <= IDLE_TID; role++) {
            if (!used[d][role]) continue;
            out_printf(o,
                       ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                       "\"name\":\"%s\"}}",
                       d, role, role == IDLE_TID ? "idle" : pp_role_name((pp_role_t)role));
            out_printf(o,
                       ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                       "\"args\":{\"sort_index\":%d}}",
                       d, role, role);
        }
    }
}

/* One complete event per op, on its device's track of its role; ops on the critical path
 * (critical[k] != 0) say so in their args. */
static void trace_ops(pp_out_t *o, const pp_plan_t *plan, const pp_timeline_t *tl,
                      const unsigned char *critical)
{
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        char name[48];
        op_name(op, name, sizeof name);
        double ts = tl->t[k].start_ms * 1000.0,
               dur = (tl->t[k].end_ms - tl->t[k].start_ms) * 1000.0;
        out_puts(o, ",\n{\"name\":");
        out_json_str(o, name);
        out_puts(o, ",\"cat\":");
        out_json_str(o, action_kind_name(op->kind));
        out_printf(
            o,
            ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"stage\":"
            "%d,\"mb\":%d,\"slot\":%d,\"bytes\":%zu",
            op->device, (int)op->role, ts, dur > 0.0 ? dur : 0.0, op->stage, op->mb, op->slot,
            op->bytes);
        if (pp_action_is_comm(op->kind))
            out_printf(o, ",\"link\":\"%s\"", transport_name(op->link));
        if (critical[k]) out_puts(o, ",\"critical\":1");
        out_puts(o, "}}");
    }
}

/* Flow arrows: from each SEND slice to the slice of its RECV. */
static void trace_flows(pp_out_t *o, const pp_plan_t *plan, const pp_timeline_t *tl)
{
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (op->kind != PP_ACT_SEND_F && op->kind != PP_ACT_SEND_B) continue;
        int r = op->peer;
        if (r < 0 || r >= plan->n_ops) continue;
        char name[48];
        op_name(op, name, sizeof name);
        out_printf(o, ",\n{\"name\":");
        out_json_str(o, name);
        out_printf(o, ",\"cat\":\"flow\",\"ph\":\"s\",\"id\":%d,\"pid\":%d,\"tid\":%d,\"ts\":%.3f}",
                   k, op->device, (int)op->role, tl->t[k].start_ms * 1000.0);
        out_printf(o, ",\n{\"name\":");
        out_json_str(o, name);
        out_printf(o,
                   ",\"cat\":\"flow\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%d,\"pid\":%d,\"tid\":%d,"
                   "\"ts\":%.3f}",
                   k, plan->ops[r].device, (int)plan->ops[r].role, tl->t[r].start_ms * 1000.0);
    }
}

/* One complete event per idle stretch on its device's idle track. */
static void trace_gaps(pp_out_t *o, const pp_plan_t *plan, const pp_idle_split_t *s)
{
    for (int g = 0; g < s->n_gaps; g++) {
        const pp_gap_t *x = &s->gaps[g];
        const pp_idle_reason_info_t *r = &pp_idle_reasons[x->reason];
        out_printf(o,
                   ",\n{\"name\":\"%s\",\"cat\":\"idle\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                   "\"ts\":%.3f,\"dur\":%.3f,\"cname\":\"%s\",\"args\":{\"reason\":\"%s\"",
                   r->name, x->device, IDLE_TID, x->start_ms * 1000.0,
                   (x->end_ms - x->start_ms) * 1000.0, r->cname, r->label);
        if (x->op >= 0) {
            char name[48];
            op_name(&plan->ops[x->op], name, sizeof name);
            out_puts(o, ",\"before\":");
            out_json_str(o, name);
        }
        out_puts(o, "}}");
    }
}

/* Flow arrows along the critical path, from each link to the next. */
static void trace_path_flows(pp_out_t *o, const pp_plan_t *plan, const pp_critical_path_t *cp)
{
    for (int i = 1; i < cp->n; i++) {
        const pp_path_link_t *a = &cp->links[i - 1], *b = &cp->links[i];
        int id = plan->n_ops + i;
        out_printf(o,
                   ",\n{\"name\":\"critical path\",\"cat\":\"critical_path\",\"ph\":\"s\","
                   "\"id\":%d,\"pid\":%d,\"tid\":%d,\"ts\":%.3f}",
                   id, a->device, (int)a->role, a->start_ms * 1000.0);
        out_printf(o,
                   ",\n{\"name\":\"critical path\",\"cat\":\"critical_path\",\"ph\":\"f\","
                   "\"bp\":\"e\",\"id\":%d,\"pid\":%d,\"tid\":%d,\"ts\":%.3f}",
                   id, b->device, (int)b->role, b->start_ms * 1000.0);
    }
}

/* The idle split and the critical path of `tl`, and which ops lie on the path. */
static pp_status_t trace_explain(const pp_plan_t *plan, const pp_timeline_t *tl, pp_idle_split_t *s,
                                 pp_critical_path_t *cp, unsigned char **critical)
{
    *critical = calloc((size_t)(plan->n_ops > 0 ? plan->n_ops : 1), 1);
    PP_ALLOC_CHECK(*critical);
    PP_CHECK(explain_idle_split(s, plan, tl));
    PP_CHECK(explain_critical_path(cp, plan, tl));
    for (int i = 0; i < cp->n; i++)
        (*critical)[cp->links[i].op] = 1;
    return PP_OK;
}

pp_status_t report_write_trace_devices(const pp_plan_t *plan, const pp_timeline_t *tl,
                                       const int *cuda_ids, const char *path)
{
    if (tl->n_ops != plan->n_ops)
        PP_FAIL(PP_ERR_INTERNAL, "trace: timeline of %d ops for a plan of %d ops", tl->n_ops,
                plan->n_ops);
    if (!tl->has_op_times) {
        fprintf(stderr,
                "%s: cannot write the trace: the run recorded step times only (turn "
                "run.timing on for per-op times)\n",
                path);
        return PP_ERR_USAGE;
    }
    pp_idle_split_t s = {0};
    pp_critical_path_t cp = {0};
    unsigned char *critical = NULL;
    pp_out_t out, *o = &out;
    PP_CHECK(report_check_finite(plan, tl)); /* "dur":inf is not JSON */
    pp_status_t st = trace_explain(plan, tl, &s, &cp, &critical);
    if (st == PP_OK) st = out_open(o, path, "the trace");
    if (st == PP_OK) {
        out_puts(o, "{\"traceEvents\":[\n");
        trace_tracks(o, plan, tl, cuda_ids, &s);
        trace_ops(o, plan, tl, critical);
        trace_flows(o, plan, tl);
        trace_gaps(o, plan, &s);
        trace_path_flows(o, plan, &cp);
        out_puts(o, "\n],\"displayTimeUnit\":\"ms\"}\n");
        st = out_close(o);
    }
    free(critical);
    explain_idle_split_free(&s);
    explain_critical_path_free(&cp);
    return st;
}

pp_status_t report_write_trace(const pp_plan_t *plan, const pp_timeline_t *tl, const char *path)
{
    return report_write_trace_devices(plan, tl, NULL, path);
}
