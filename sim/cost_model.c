/*
 * cost_model.c — the cost model of a plan (simulate.h's pp_cost_model_t), built in one place:
 * the hand-set `cost:` values, or the kernel table's pass times (model/cost.h) for each stage of
 * the plan on the job's GPU, calibrated by a profile when there is one; and the line that says
 * where a model came from, for the report's preamble.
 */
#include "cost_model.h"

#include "model/profile.h"
#include "model/stage_layout.h"
#include "plan/stage_cfg.h"

#include <stdio.h>
#include <string.h>

pp_model_shape_t cost_stage_shape(const pp_job_t *job, const pp_plan_t *plan, int s)
{
    pp_stage_cfg_t c;
    plan_stage_cfg(&c, job, plan, s);
    return stage_shape_of(&c);
}

/* The stages' times from the model (the part of cost_model_build that is not hand-set). */
static void model_stage_costs(pp_cost_model_t *cm, const pp_job_t *job, const pp_plan_t *plan,
                              const pp_gpu_t *gpu, const struct pp_profile *prof, double f)
{
    for (int s = 0; s < plan->n_stages; s++) {
        pp_model_shape_t sh = cost_stage_shape(job, plan, s);
        pp_stage_cfg_t c;
        double rc_i, rc_w;
        const double k = cost_scaled_step_factor(f, &sh, job->model.dtype, gpu, prof);
        plan_stage_cfg(&c, job, plan, s);
        cost_recompute_ms(&c, gpu, prof, &rc_i, &rc_w);
        cm->f[s] = k * cost_stage_ms(&sh, job->model.dtype, gpu, prof, PP_PASS_F);
        cm->i[s] = k * (cost_stage_ms(&sh, job->model.dtype, gpu, prof, PP_PASS_I) + rc_i);
        cm->w[s] = k * (cost_stage_ms(&sh, job->model.dtype, gpu, prof, PP_PASS_W) + rc_w);
        /* B runs I's rebuild once for both halves (stage_recompute_work: weight_forward). */
        pp_recompute_work_t rw;
        stage_recompute_work(&c, &rw);
        cm->b[s] = cm->i[s] + cm->w[s] - (rw.weight_forward ? k * rc_w : 0.0);
    }
}

/* used[t] = 1 for every transport that crosses devices and carries a transfer of the plan (of a
 * boundary between two consecutive devices of the job, for an outline plan without ops). */
static void transports_used(int *used, const pp_job_t *job, const pp_plan_t *plan)
{
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++)
        used[t] = 0;
    for (int k = 0; k < plan->n_ops; k++)
        if (plan->ops[k].role == PP_ROLE_SEND) used[plan->ops[k].link] = 1;
    for (int d = 0; plan->n_ops == 0 && d + 1 < job->pipeline.n_devices; d++)
        used[job_boundary_transport(job, d, d + 1)] = 1;
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++)
        used[t] = used[t] && transport_row((pp_transport_t)t)->crosses_devices;
}

/* One boundary tensor over each transport that crosses devices, on its link (cost_link_for), and
 * `send`, the slowest of those the plan takes (or, where it takes none, that of the transport
 * pipeline.transport gives two devices of one process), so that a model with one figure for every
 * transfer (the auto kind's) errs on the slow side. */
static void model_sends(pp_cost_model_t *cm, const pp_job_t *job, const pp_plan_t *plan,
                        double bytes)
{
    int used[PP_TRANSPORT_COUNT];
    transports_used(used, job, plan);
    cm->send = 0;
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++) {
        const pp_link_desc_t *l = cost_link_for(job, (pp_transport_t)t);
        cm->send_by[t] =
            l && transport_row((pp_transport_t)t)->crosses_devices ? link_time_ms(l, bytes) : 0.0;
        if (used[t] && cm->send_by[t] > cm->send) cm->send = cm->send_by[t];
    }
    if (cm->send == 0)
        cm->send = cm->send_by[transport_for_boundary(PP_REACH_PROCESS, job->pipeline.transport)];
}

/* The link rows (model/gpu.h) a reduction across replicas is priced on: NCCL over NVLink within a
 * host, NCCL over the network between hosts (simulate.h's cost_model_reduce). */
static const char *const reduce_links[2] = {"nvlink-nccl", "ib"};

static void model_reduce(pp_cost_model_t *cm, const pp_job_t *job)
{
    cm->reduce_ranks = job_replicas(job);
    for (int net = 0; net < 2; net++) {
        const pp_link_desc_t *l = link_find(reduce_links[net]);
        cm->reduce_gbps[net] = l ? l->gbps : 0.0;
        cm->reduce_latency_ms[net] = l ? l->latency_us * 1e-3 : 0.0;
    }
}

void cost_model_tails(pp_cost_model_t *cm, const pp_job_t *job, const pp_plan_t *plan,
                      const pp_gpu_t *gpu)
{
    for (int s = 0; s < plan->n_stages && s < cm->n_stages; s++) {
        pp_stage_cfg_t c;
        plan_stage_cfg(&c, job, plan, s);
        cost_stage_tail(&c, gpu, &cm->head[s], &cm->tail[s]);
    }
}

void cost_model_links(pp_cost_model_t *cm, const pp_job_t *job)
{
    const int n = job_devices_total(job);
    for (int d = 0; d < PP_MAX_DEVICES; d++) /* a device past the plan's has no copies */
        cm->link_of[d] = d < n ? job_copy_link(job, d) : d;
}

pp_status_t cost_model_build(pp_cost_model_t *cm, const pp_job_t *job, const pp_plan_t *plan,
                             const pp_gpu_t *present, const struct pp_profile *prof,
                             pp_cost_source_t *source)
{
    if ((job)->cost_hand_set) {
        PP_CHECK(cost_model_uniform(cm, plan->n_stages, &job->cost));
        /* `cost:` is per device's share of the layers; a chunk of an interleaved device holds 1/v,
         * and a stage of an uneven split its blocks against the even split's. */
        double k0 = 1.0 / (plan->chunks > 0 ? plan->chunks : 1);
        for (int s = 0; s < plan->n_stages; s++) {
            pp_stage_cfg_t c;
            plan_stage_cfg(&c, job, plan, s);
            double k = k0 * c.n_layers * plan->n_stages / job->model.layers;
            cm->f[s] *= k;
            cm->b[s] *= k;
            cm->i[s] *= k;
            cm->w[s] *= k;
        }
        cm->host_link_gbps = cost_host_link_gbps(job);
        cost_model_links(cm, job);
        model_reduce(cm, job);
        if (source) *source = PP_COST_HAND;
        return PP_OK;
    }
    pp_job_cost_t zero = {0};
    PP_CHECK(cost_model_uniform(cm, plan->n_stages, &zero));
    const pp_gpu_t *gpu = cost_gpu_for(&job->cost_src, present, prof);
    pp_cost_calib_t cal;
    cost_calib_for(&cal, job, plan->n_mb, gpu, prof);
    model_stage_costs(cm, job, plan, gpu, prof, cal.step_factor);
    /* a profile's step factor leaves the head out of its measured steps (profile_calibrate) */
    cost_model_tails(cm, job, plan, gpu);
    double bytes = (double)plan->boundary_bytes;
    if (prof && prof->n_sends > 0)
        cm->send = profile_send_ms(prof, bytes); /* its measured copies price every transport */
    else
        model_sends(cm, job, plan, bytes);
    cm->host_link_gbps = cost_host_link_gbps(job);
    cost_model_links(cm, job);
    /* a profile's step factor already holds the gaps of the steps it measured */
    cm->gap_ms = prof ? 0.0 : gpu->gap_us * 1e-3;
    cm->overlap = cal.overlap;
    model_reduce(cm, job);
    if (source) *source = prof ? PP_COST_PROFILE : PP_COST_GPU;
    return PP_OK;
}

/* Where the model's step factor and pair overlap came from, after the source, into buf. */
static size_t describe_calib(char *buf, size_t size, const pp_job_t *job, const pp_plan_t *plan,
                             const pp_gpu_t *gpu, const struct pp_profile *prof)
{
    pp_cost_calib_t cal;
    size_t n = 0;
    int pairs = 0;
    cost_calib_for(&cal, job, plan->n_mb, gpu, prof);
    if (prof && prof->has_runs)
        n += (size_t)snprintf(buf, size,
                              ", step factor %.3f (its measured steps, scaled by a stage's "
                              "work above the launch floor)",
                              cal.step_factor);
    else if (prof)
        n += (size_t)snprintf(buf, size, " (it predates measured steps: step factor 1)");
    for (int k = 0; k < plan->n_ops && !pairs; k++)
        pairs = plan->ops[k].role == PP_ROLE_OVERLAP;
    if (pairs && n < size) {
        char from[48];
        snprintf(from, sizeof from, "%s%s",
                 strcmp(cal.overlap_from, "gpu") ? cal.overlap_from : gpu->name,
                 strcmp(cal.overlap_from, "gpu") ? "" : " description");
        n += (size_t)snprintf(buf + n, size - n, "; pair overlap %.2f (%s)", cal.overlap, from);
    }
    return n;
}

/* " send 0.0123", or with transports of different costs " send 0.0123 (peer), 0.0150 (nccl)". */
static void describe_sends(char *buf, size_t size, const pp_cost_model_t *cm, const pp_job_t *job,
                           const pp_plan_t *plan)
{
    int used[PP_TRANSPORT_COUNT], n_used = 0, differ = 0;
    double first = -1;
    transports_used(used, job, plan);
    for (int t = 0; t < PP_TRANSPORT_COUNT; t++) {
        if (!used[t]) continue;
        double ms = cost_model_send(cm, (pp_transport_t)t);
        differ |= n_used++ > 0 && ms != first;
        if (first < 0) first = ms;
    }
    size_t n = (size_t)snprintf(buf, size, " send");
    if (!differ) {
        snprintf(buf + n, n < size ? size - n : 0, " %.4f", cm->send);
        return;
    }
    for (int t = 0, k = 0; t < PP_TRANSPORT_COUNT && n < size; t++)
        if (used[t])
            n += (size_t)snprintf(buf + n, size - n, "%s %.4f (%s)", k++ ? "," : "",
                                  cost_model_send(cm, (pp_transport_t)t),
                                  transport_name((pp_transport_t)t));
}

void cost_model_describe(char *buf, size_t size, const pp_cost_model_t *cm, const pp_job_t *job,
                         const pp_plan_t *plan, pp_cost_source_t source, const pp_gpu_t *gpu,
                         const struct pp_profile *prof)
{
    size_t n = 0;
    if (source == PP_COST_HAND) {
        snprintf(buf, size,
                 "hand-set in cost: (ms per micro-batch, one device's share of the layers): "
                 "forward %g, backward_input %g, backward_weight %g, send %g",
                 job->cost.forward, job->cost.backward_input, job->cost.backward_weight,
                 job->cost.send);
        return;
    }
    if (source == PP_COST_PROFILE)
        n = (size_t)snprintf(buf, size, "%s description calibrated by the profile of %s (%s)",
                             gpu->name, prof->device, prof->date);
    else
        n = (size_t)snprintf(buf, size, "%s description (%s), no profile", gpu->name, gpu->full);
    if (n < size) n += describe_calib(buf + n, size - n, job, plan, gpu, prof);
    int S = cm->n_stages;
    int show[3] = {0, S / 2, S - 1};
    const char *what[3] = {"first", "middle", "last"};
    n += (size_t)snprintf(buf + (n < size ? n : size), n < size ? size - n : 0,
                          "; ms per micro-batch F/I/W:");
    for (int k = 0; k < 3 && n < size; k++) {
        if ((k == 1 && (S < 3)) || (k == 2 && S < 2)) continue;
        int s = show[k];
        n += (size_t)snprintf(buf + n, size - n, " %s (stage %d) %.3f/%.3f/%.3f,", what[k], s,
                              cm->f[s], cm->i[s], cm->w[s]);
    }
    if (n < size) describe_sends(buf + n, size - n, cm, job, plan);
}
