/*
 * report_trace.c — a timeline as a Chrome trace (JSON Object Format; Perfetto and chrome://tracing
 * read it): `{"traceEvents":[...],"displayTimeUnit":"ms"}`.
 *
 * Layout: pid = pipeline device, tid = stream role (0 compute, 1 send, 2 recv), each named by
 * metadata events; one complete event ("ph":"X", ts/dur in microseconds) per plan op; a flow
 * arrow from every SEND to its RECV ("ph":"s" on the send slice, "ph":"f" with "bp":"e" on the
 * receive slice, both with the SEND's op index as id). Any failure to open or write the file
 * prints the path and the system's reason and returns PP_ERR_IO.
 */
#include "report.h"
#include "report_io.h"

#include <string.h>

/* The event name: "F3" for compute ops (the stage is in args), "2SEND_F1" for communication. */
static void op_name(const pp_op_t *op, char *buf, size_t size)
{
    if (pp_action_is_compute(op->kind)) {
        snprintf(buf, size, "%s%d", action_kind_name(op->kind), op->mb);
    } else {
        pp_action_t a = {op->kind, op->stage, op->mb};
        action_format(&a, buf, size);
    }
}

/* A name and a sort index for every device, and for every (device, role) track that has ops. */
static void trace_tracks(pp_out_t *o, const pp_plan_t *plan, const pp_timeline_t *tl,
                         const int *cuda_ids)
{
    int first = 1;
    /* Which (device, role) tracks exist, so only those get a name. */
    unsigned char used[PP_MAX_DEVICES][PP_ROLE_COUNT];
    memset(used, 0, sizeof used);
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *op = &plan->ops[k];
        if (op->device >= 0 && op->device < PP_MAX_DEVICES && (int)op->role >= 0 &&
            op->role < PP_ROLE_COUNT)
            used[op->device][op->role] = 1;
    }

    for (int d = 0; d < plan->n_devices && d < PP_MAX_DEVICES; d++) {
        char name[64];
        if (cuda_ids && cuda_ids[d] >= 0)
            snprintf(name, sizeof name, "device %d (cuda %d)", d, cuda_ids[d]);
        else if (tl->mode == PP_MODE_SIMULATE)
            snprintf(name, sizeof name, "device %d (simulated)", d);
        else
            snprintf(name, sizeof name, "device %d", d);
        out_printf(o, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
                   first ? "" : ",\n", d);
        out_json_str(o, name);
        out_puts(o, "}}");
        out_printf(o,
                   ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_"
                   "index\":%d}}",
                   d, d);
        first = 0;
        for (int role = 0; role < PP_ROLE_COUNT; role++) {
            if (!used[d][role]) continue;
            out_printf(o,
                       ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                       "\"name\":\"%s\"}}",
                       d, role, pp_role_name((pp_role_t)role));
            out_printf(o,
                       ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                       "\"args\":{\"sort_index\":%d}}",
                       d, role, role);
        }
    }
}

/* One complete event per op, on its device's track of its role. */
static void trace_ops(pp_out_t *o, const pp_plan_t *plan, const pp_timeline_t *tl)
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
    pp_out_t out, *o = &out;
    PP_CHECK(out_open(o, path, "the trace"));

    out_puts(o, "{\"traceEvents\":[\n");
    trace_tracks(o, plan, tl, cuda_ids);
    trace_ops(o, plan, tl);
    trace_flows(o, plan, tl);
    out_puts(o, "\n],\"displayTimeUnit\":\"ms\"}\n");

    return out_close(o);
}

pp_status_t report_write_trace(const pp_plan_t *plan, const pp_timeline_t *tl, const char *path)
{
    return report_write_trace_devices(plan, tl, NULL, path);
}
