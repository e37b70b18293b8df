/*
 * reduce.c — pipeline.data_parallel in the lowering: the REDUCE ops of one replica's plan, and
 * the plan laid out d times.
 *
 * A stage's gradients are final once its last backward op (W, or B) has run, so each stage gets
 * one REDUCE op per bucket of pipeline.reduce_bucket_mb MiB of its fp32 gradients, on the reduce
 * stream of its device: under reduce_align as_ready the first bucket waits for the stage's last
 * backward, under aligned for the last backward of every stage, and the others follow on the
 * stream. Nothing waits for a REDUCE: the step's end (the optimizer) joins it. In plan order a
 * REDUCE sits right after the latest op it waits for, in its device's program right after its
 * stage's last backward. Then the plan is laid out once per replica: replica r's ops on devices
 * r * p + i, each op's d copies side by side (a SEND with its RECV: the pair's d copies), so the
 * d REDUCE ops of one stage and bucket are adjacent and start together in the simulator (their
 * `peer` names the group's first). Every per-stage array stays as it is: replicas are the same.
 */
#include "lower_internal.h"

#include "stage_cfg.h"

#include <stdlib.h>
#include <string.h>

/* The REDUCE ops to add: stage, bucket, bytes and the plan op (of the one-replica plan) it follows
 * in plan order. */
typedef struct reduce_op {
    int stage, bucket, after;
    size_t bytes;
} reduce_op_t;

size_t plan_reduce_bucket_bytes(const pp_job_t *job, size_t grad_bytes)
{
    const size_t bucket = (size_t)job->pipeline.reduce_bucket_mb << 20;
    return bucket > 0 && bucket < grad_bytes ? bucket : grad_bytes;
}

/* The last backward op (B or W, the latest in plan order) of each stage, into last[n_stages]. */
static pp_status_t reduce_last_backward(const pp_plan_t *plan, int *last)
{
    for (int s = 0; s < plan->n_stages; s++)
        last[s] = -1;
    for (int k = 0; k < plan->n_ops; k++) {
        const pp_op_t *o = &plan->ops[k];
        if (o->kind == PP_ACT_B || o->kind == PP_ACT_W) last[o->stage] = k;
    }
    for (int s = 0; s < plan->n_stages; s++)
        if (last[s] < 0) PP_FAIL(PP_ERR_INPUT, "stage %d has no backward to reduce after", s);
    return PP_OK;
}

/* The buckets of every stage, in stage order (out: NULL to count). */
static int reduce_list(const pp_plan_t *plan, const pp_job_t *job, const int *last, int latest,
                       reduce_op_t *out)
{
    int n = 0;
    for (int s = 0; s < plan->n_stages; s++) {
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, job, plan, s);
        size_t g = stage_grad_bytes(&c), step = plan_reduce_bucket_bytes(job, g);
        for (size_t at = 0, b = 0; at < g || (g == 0 && b == 0); at += step, b++) {
            size_t left = g - at;
            if (out)
                out[n] = (reduce_op_t){(int)s, (int)b, latest >= 0 ? latest : last[s],
                                       left < step ? left : step};
            n++;
            if (g == 0) break;
        }
    }
    return n;
}

/* Order of the added ops: by the op they follow, then stage, then bucket. */
static int reduce_cmp(const void *pa, const void *pb)
{
    const reduce_op_t *a = pa, *b = pb;
    if (a->after != b->after) return a->after < b->after ? -1 : 1;
    if (a->stage != b->stage) return a->stage < b->stage ? -1 : 1;
    return a->bucket < b->bucket ? -1 : a->bucket > b->bucket;
}

/* The one-replica plan with its REDUCE ops: ops renumbered, deps rebuilt, programs rebuilt. */
static pp_status_t reduce_insert(pp_plan_t *plan, const reduce_op_t *add, int n_add,
                                 const int *last, int aligned)
{
    const int n_old = plan->n_ops, n = n_old + n_add;
    int n_deps = plan->n_deps_total + n_add + (aligned ? n_add * plan->n_stages : 0);
    pp_op_t *ops = malloc(sizeof *ops * (size_t)n);
    int *deps = malloc(sizeof *deps * (size_t)(n_deps > 0 ? n_deps : 1));
    int *where = malloc(sizeof *where * (size_t)(n_old > 0 ? n_old : 1));
    int *prog = malloc(sizeof *prog * (size_t)n);
    int *added = malloc(sizeof *added * (size_t)(n_add > 0 ? n_add : 1));
    int *dev_of = malloc(sizeof *dev_of * (size_t)plan->n_stages * 2),
        *anchor = dev_of + plan->n_stages;
    if (!ops || !deps || !where || !prog || !added || !dev_of) {
        free(ops), free(deps), free(where), free(prog), free(added), free(dev_of);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory adding %d reductions to a plan", n_add);
    }
    int t = 0, nd = 0, j = 0;
    for (int k = 0; k < n_old; k++) {
        where[k] = t;
        pp_op_t *o = &ops[t++];
        *o = plan->ops[k];
        o->dep_begin = nd;
        for (int i = 0; i < o->n_deps; i++)
            deps[nd++] = where[plan->deps[plan->ops[k].dep_begin + i]];
        for (; j < n_add && add[j].after == k; j++) {
            const reduce_op_t *a = &add[j];
            added[j] = t;
            pp_op_t *r = &ops[t++];
            *r = (pp_op_t){.device = plan->stage_device[a->stage],
                           .role = pp_role_of_kind(PP_ACT_REDUCE),
                           .kind = PP_ACT_REDUCE,
                           .link = PP_TRANSPORT_NCCL,
                           .stage = a->stage,
                           .mb = a->bucket,
                           .slot = -1,
                           .peer = -1,
                           .host = 1,
                           .bytes = a->bytes,
                           .dep_begin = nd};
            deps[nd++] = where[last[a->stage]];
            for (int s = 0; aligned && a->bucket == 0 && s < plan->n_stages; s++)
                if (s != a->stage) deps[nd++] = where[last[s]];
            r->n_deps = nd - r->dep_begin;
        }
    }
    for (int k = 0; k < n_old; k++)
        if (plan->ops[k].peer >= 0) ops[where[k]].peer = where[plan->ops[k].peer];
    /* programs: as ready, each stage's REDUCE ops right after its last backward; aligned, every
     * REDUCE of a device after the latest of its stages' last backward ops, in plan order (the
     * order its reduce stream takes them) */
    for (int st = 0; st < plan->n_stages; st++)
        dev_of[st] = plan->ops[last[st]].device, anchor[st] = last[st];
    for (int st = 0; aligned && st < plan->n_stages; st++)
        for (int o = 0; o < plan->n_stages; o++)
            if (dev_of[o] == dev_of[st] && last[o] > anchor[st]) anchor[st] = last[o];
    int np = 0;
    for (int d = 0; d < plan->n_devices; d++) {
        int begin = np;
        for (int i = plan->prog_begin[d]; i < plan->prog_begin[d + 1]; i++) {
            int k = plan->prog_ops[i];
            prog[np++] = where[k];
            for (int q = 0; q < n_add; q++) /* anchor[st]: the op stage st's REDUCEs follow */
                if (anchor[add[q].stage] == k) prog[np++] = added[q];
        }
        plan->prog_begin[d] = begin;
        for (int i = begin; i < np; i++)
            ops[prog[i]].pos = i - begin;
    }
    plan->prog_begin[plan->n_devices] = np;
    free(plan->ops), free(plan->deps), free(plan->prog_ops), free(where), free(added), free(dev_of);
    plan->ops = ops, plan->deps = deps, plan->prog_ops = prog;
    plan->n_ops = n, plan->n_deps_total = nd;
    return PP_OK;
}

/* The plan's units in order: an op, or a SEND with the RECV right after it. */
static int unit_len(const pp_plan_t *plan, int k)
{
    const pp_op_t *o = &plan->ops[k];
    return (o->role == PP_ROLE_SEND && o->peer == k + 1) ? 2 : 1;
}

/* The hosts the d copies of device i span. */
static int reduce_hosts(const pp_job_t *job, int p, int d, int i)
{
    int n = 0, seen[PP_MAX_DEVICES];
    for (int r = 0; r < d; r++) {
        int h = job_device_host(job, r * p + i), k = 0;
        while (k < n && seen[k] != h)
            k++;
        if (k == n) seen[n++] = h;
    }
    return n;
}

/* Lay the one-replica plan out d times (see the top of the file). */
static pp_status_t reduce_replicate(pp_plan_t *plan, const pp_job_t *job, int d)
{
    const int n1 = plan->n_ops, p = plan->n_devices;
    const size_t n = (size_t)n1 * (size_t)d;
    pp_op_t *ops = malloc(sizeof *ops * (n > 0 ? n : 1));
    int *deps = malloc(sizeof *deps * ((size_t)plan->n_deps_total * (size_t)d + 1));
    int *copy = malloc(sizeof *copy * (n > 0 ? n : 1)); /* [k * d + r]: new index */
    int *prog = malloc(sizeof *prog * (n > 0 ? n : 1));
    int *begin = malloc(sizeof *begin * (size_t)(p * d + 1));
    if (!ops || !deps || !copy || !prog || !begin) {
        free(ops), free(deps), free(copy), free(prog), free(begin);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory laying out %d replicas of a plan", d);
    }
    int t = 0;
    for (int k = 0; k < n1; k += unit_len(plan, k))
        for (int r = 0; r < d; r++)
            for (int u = 0; u < unit_len(plan, k); u++)
                copy[(size_t)(k + u) * (size_t)d + (size_t)r] = t++;
    for (int k = 0; k < n1; k++) {
        const pp_op_t *o = &plan->ops[k];
        for (int r = 0; r < d; r++) {
            pp_op_t *c = &ops[copy[(size_t)k * (size_t)d + (size_t)r]];
            *c = *o;
            c->device = r * p + o->device;
            if (o->peer >= 0) c->peer = copy[(size_t)o->peer * (size_t)d + (size_t)r];
            if (o->kind == PP_ACT_REDUCE) {
                c->peer = copy[(size_t)k * (size_t)d];
                c->host = reduce_hosts(job, p, d, o->device);
            }
            if (pp_action_is_comm(o->kind) && job)
                c->link = job_boundary_transport(job, c->device, r * p + plan->ops[o->peer].device);
        }
    }
    /* deps in the new order, so the pool reads in plan order */
    int nd = 0;
    for (int k = 0; k < n1; k += unit_len(plan, k))
        for (int r = 0; r < d; r++)
            for (int u = 0; u < unit_len(plan, k); u++) {
                const pp_op_t *o = &plan->ops[k + u];
                pp_op_t *c = &ops[copy[(size_t)(k + u) * (size_t)d + (size_t)r]];
                c->dep_begin = nd;
                for (int i = 0; i < o->n_deps; i++)
                    deps[nd++] = copy[(size_t)plan->deps[o->dep_begin + i] * (size_t)d + (size_t)r];
            }
    int np = 0;
    for (int r = 0; r < d; r++)
        for (int i = 0; i < p; i++) {
            begin[r * p + i] = np;
            for (int j = plan->prog_begin[i]; j < plan->prog_begin[i + 1]; j++)
                prog[np++] = copy[(size_t)plan->prog_ops[j] * (size_t)d + (size_t)r];
        }
    begin[p * d] = np;
    free(plan->ops), free(plan->deps), free(plan->prog_ops), free(plan->prog_begin), free(copy);
    plan->ops = ops, plan->deps = deps, plan->prog_ops = prog, plan->prog_begin = begin;
    plan->n_ops = (int)n, plan->n_deps_total = nd;
    plan->n_devices = p * d;
    plan->data_parallel = d;
    return PP_OK;
}

pp_status_t lower_data_parallel(pp_plan_t *plan, const pp_job_t *job)
{
    const int d = job ? job_replicas(job) : 1;
    if (d <= 1) return PP_OK;
    if ((long)plan->n_devices * d > PP_MAX_DEVICES)
        PP_FAIL(PP_ERR_INPUT, "%d devices x %d replicas: more than %d devices", plan->n_devices, d,
                PP_MAX_DEVICES);
    int *last = malloc(sizeof *last * (size_t)plan->n_stages);
    if (!last) PP_FAIL(PP_ERR_NOMEM, "out of host memory placing reductions");
    pp_status_t st = reduce_last_backward(plan, last);
    int latest = -1, aligned = job->pipeline.reduce_align == PP_REDUCE_ALIGNED;
    for (int s = 0; aligned && s < plan->n_stages; s++)
        if (last[s] > latest) latest = last[s];
    reduce_op_t *add = NULL;
    int n_add = st == PP_OK ? reduce_list(plan, job, last, latest, NULL) : 0;
    if (st == PP_OK && !(add = malloc(sizeof *add * (size_t)(n_add > 0 ? n_add : 1))))
        st = PP_ERR_NOMEM;
    if (st == PP_OK) {
        reduce_list(plan, job, last, latest, add);
        qsort(add, (size_t)n_add, sizeof *add, reduce_cmp);
        st = reduce_insert(plan, add, n_add, last, aligned);
    }
    if (st == PP_OK) st = reduce_replicate(plan, job, d);
    free(add);
    free(last);
    return st;
}
