/*
 * planner_report.c — `ppsched plan`'s outputs, all on report_io.h: the table of the top N (names
 * row, units row) with the search's preamble, the memory–throughput Pareto front and why the best
 * beats the runner-up; the same as JSON; every candidate as CSV; and the best as a schedule file
 * (the model, pipeline, schedule, run and cost keys that make it, readable by config_load).
 * Reads a finished search only.
 */
#include "planner.h"

#include "report/report_io.h"
#include "schedule/kinds.h"

#include <math.h>
#include <string.h>

#define GIB 1073741824.0

/* A model this wide is 7B-sized or more: its vocabulary matters to the memory of the end stages. */
#define PLAN_LARGE_HIDDEN 4096

static void plan_skips(pp_out_t *o, const pp_search_t *s)
{
    int total = 0;
    for (int k = 0; k < PP_SKIP_COUNT; k++)
        total += s->skipped[k];
    out_printf(o, "skipped %d", total);
    const char *sep = ": ";
    for (int k = 0; k < PP_SKIP_COUNT; k++)
        if (s->skipped[k]) {
            out_printf(o, "%s%d %s", sep, s->skipped[k], plan_skip_name((pp_skip_t)k));
            sep = ", ";
        }
}

/* The schedule column's width for a label: 36, or more for a long one (a balanced split and a
 * V placement each lengthen one). */
static int plan_label_width(int w, const char *label)
{
    int len = (int)strlen(label);
    return len > w ? len : w;
}

static void plan_row(pp_out_t *o, int rank, const pp_candidate_t *c, int w)
{
    out_printf(o, "%4d  %-*s %3d %3d %3d %5d %4d %10.3f %10.4g %6.1f %8.2f %6.1f %8.2f  %s\n", rank,
               w, c->label, c->p, c->d, c->v, c->m, c->mbs, c->step_ms, c->tokens_per_s,
               100 * c->bubble, c->peak_bytes / GIB, c->mb_equiv, c->sent_bytes / GIB,
               c->fits ? "fits" : "no");
}

/* The model line. A 7B-sized model on the default vocabulary says so, whether or not the file
 * wrote it out (the shipped ones do): the embedding and the LM head weigh on the end devices, and
 * such models have several times more. */
static void plan_model_line(pp_out_t *o, const pp_search_t *s)
{
    const pp_job_model_t *m = &s->base.model;
    pp_config_t d;
    config_defaults(&d);
    int note = m->hidden >= PLAN_LARGE_HIDDEN && m->vocab == d.model.vocab;
    config_free(&d);
    out_printf(o, "# model: %d layers, hidden %d, %d heads, seq %d, vocab %d%s, %s\n", m->layers,
               m->hidden, m->heads, m->seq_len, m->vocab,
               note ? " (the default; set model.vocab)" : "", pp_dtype_name(m->dtype));
    if (s->base.run.optimizer == PP_OPT_ADAMW)
        out_printf(o, "# optimizer: adamw, its state counted in each GPU's memory (%s)\n",
                   s->optimizer_default ? "the default; --optimizer none leaves it out"
                                        : "--optimizer");
    else
        out_printf(o, "# optimizer: none, no optimizer state counted (--optimizer)\n");
}

static void plan_preamble(pp_out_t *o, const pp_search_t *s)
{
    out_printf(o,
               "# ppsched plan: %d x %s, %.1f GiB per GPU; global batch %ld sequences (%.0f "
               "tokens)\n",
               s->p, s->gpu, s->limit_bytes / GIB, s->seqs, s->tokens);
    plan_model_line(o, s);
    if (s->kinds) {
        out_printf(o, "# kinds:");
        for (int k = 0, n = 0; k < PP_SCHED_KIND_COUNT; k++)
            if (s->kinds & (1u << k))
                out_printf(o, "%s %s", n++ ? "," : "", sched_kind_name((pp_sched_kind_t)k));
        out_printf(o, " (--kinds)\n");
    }
    out_printf(o, "# searched %d candidates in %.2f s: %d fit, %d do not; ", s->n, s->seconds,
               s->n_fit, s->n - s->n_fit);
    plan_skips(o, s);
    out_printf(o, "\n");
    if (s->unevaluated > 0)
        out_printf(o,
                   "# budget: %.3g s ran out with %d of %d candidates not predicted (the largest "
                   "plans, from %lld stages x micro-batches up)\n",
                   s->budget_s, s->unevaluated, s->listed, s->unevaluated_from);
}

int plan_print_nothing_fits(const pp_search_t *s, FILE *f)
{
    if (s->n_fit > 0) return 0;
    if (s->n == 0) {
        fprintf(f, "plan: no candidate could be built for %d GPUs and %ld sequences\n", s->p,
                s->seqs);
        return 1;
    }
    const pp_candidate_t *c = &s->c[0];
    fprintf(f,
            "plan: nothing fits in %.1f GiB per GPU: the closest is %s, which needs %.2f GiB on "
            "device %d (%.1f times the limit)\n",
            s->limit_bytes / GIB, c->label, c->peak_bytes / GIB, c->fullest,
            c->peak_bytes / s->limit_bytes);
    return 1;
}

int plan_print_unevaluated(const pp_search_t *s, FILE *f)
{
    if (s->unevaluated == 0) return 0;
    fprintf(f,
            "plan: the budget of %.3g s ran out: %d of %d candidates were not predicted, the "
            "largest plans (from %lld stages x micro-batches up); --budget SECONDS searches "
            "longer\n",
            s->budget_s, s->unevaluated, s->listed, s->unevaluated_from);
    return 1;
}

/* Where some candidates fit only with run.offload auto: how many, and the best that fits
 * without (its cost beside the best with). */
static void plan_offload_line(pp_out_t *o, const pp_search_t *s)
{
    int n_off = 0, plain = -1, with = -1;
    for (int i = 0; i < s->n_fit; i++) {
        if (s->c[i].offload && with < 0) with = i;
        if (!s->c[i].offload && plain < 0) plain = i;
        n_off += s->c[i].offload;
    }
    if (n_off == 0) return;
    out_printf(o,
               "# offload: %d candidate%s only with run.offload auto (the best: %s, %.3f ms "
               "a step); ",
               n_off, n_off == 1 ? " fits" : "s fit", s->c[with].label, s->c[with].step_ms);
    if (plain < 0)
        out_printf(o, "none fits without offload\n");
    else
        out_printf(o, "the best without: %s, %.3f ms a step (rank %d)\n", s->c[plain].label,
                   s->c[plain].step_ms, plain + 1);
}

pp_status_t plan_print_table(const pp_search_t *s, int top, FILE *f)
{
    pp_out_t o;
    out_wrap(&o, f, "output", "the plan");
    plan_preamble(&o, s);
    int shown = top < s->n ? top : s->n, w = 36;
    for (int i = 0; i < shown; i++)
        w = plan_label_width(w, s->c[i].label);
    out_printf(&o, "#\n%4s  %-*s %3s %3s %3s %5s %4s %10s %10s %6s %8s %6s %8s  %s\n", "rank", w,
               "schedule", "p", "d", "v", "m", "b", "step", "tokens/s", "bubble", "peak mem", "act",
               "p2p", "memory");
    out_printf(&o, "%4s  %-*s %3s %3s %3s %5s %4s %10s %10s %6s %8s %6s %8s  %s\n", "", w, "", "",
               "", "", "/rep", "seq", "(ms)", "", "(%)", "(GiB)", "mb-eq", "(GiB)", "");
    for (int i = 0; i < shown; i++)
        plan_row(&o, i + 1, &s->c[i], w);
    int idx[64], n = plan_search_pareto(s, idx, 64);
    if (n > 0) {
        out_printf(&o, "#\n# memory against throughput (the Pareto front: no candidate that fits "
                       "is both faster and smaller):\n");
        for (int i = 0; i < n; i++)
            out_printf(&o, "#   %8.2f GiB  %10.4g tokens/s  p %d x d %d  %s (rank %d)\n",
                       s->c[idx[i]].peak_bytes / GIB, s->c[idx[i]].tokens_per_s, s->c[idx[i]].p,
                       s->c[idx[i]].d, s->c[idx[i]].label, idx[i] + 1);
    }
    char why[1024];
    plan_search_why(s, why, sizeof why);
    if (why[0]) out_printf(&o, "# why: %s\n", why);
    if (s->n_fit > 0)
        out_printf(&o,
                   "# best: %s, %.4g tokens/s, %.2f GiB on its fullest device (--emit FILE "
                   "writes it as a schedule file)\n",
                   s->c[0].label, s->c[0].tokens_per_s, s->c[0].peak_bytes / GIB);
    plan_offload_line(&o, s);
    return out_close(&o);
}

static void plan_json_cand(pp_out_t *o, const pp_candidate_t *c, int rank)
{
    out_printf(o, "{\"rank\":%d,\"label\":", rank);
    out_json_str(o, c->label);
    out_printf(o, ",\"schedule\":");
    out_json_str(o, sched_kind_name(c->kind));
    out_printf(o, ",\"pipeline_devices\":%d,\"data_parallel\":%d,\"optimizer_sharding\":\"%s\"",
               c->p, c->d, c->zero1 ? "zero1" : "none");
    out_printf(o,
               ",\"chunks\":%d,\"placement\":\"%s\",\"micro_batches\":%d,\"micro_batch_size\":%d",
               c->v, c->placement == PP_PLACEMENT_V ? "v" : "loop", c->m, c->mbs);
    out_json_key_num(o, "step_ms", c->step_ms);
    out_json_key_num(o, "tokens_per_s", c->tokens_per_s);
    out_json_key_num(o, "bubble", c->bubble);
    out_printf(o, ",\"peak_mem_bytes\":%.0f,\"fullest_device\":%d,", c->peak_bytes, c->fullest);
    out_printf(o, "\"activation_microbatch_equivalents\":");
    out_json_num(o, c->mb_equiv);
    out_printf(o, ",\"p2p_bytes\":%.0f,\"fits\":%s", c->sent_bytes, c->fits ? "true" : "false");
    out_puts(o, c->offload ? ",\"offload\":\"auto\"}" : "}"); /* present only for offload */
}

pp_status_t plan_print_json(const pp_search_t *s, int top, FILE *f)
{
    pp_out_t o;
    out_wrap(&o, f, "output", "the plan as JSON");
    out_printf(&o, "{\"gpus\":%d,\"gpu\":", s->p);
    out_json_str(&o, s->gpu);
    out_printf(&o, ",\"memory_limit_bytes\":%.0f,\"global_batch\":%ld,\"tokens_per_step\":%.0f,",
               s->limit_bytes, s->seqs, s->tokens);
    out_printf(&o, "\"optimizer\":\"%s\",\"vocab\":%d,",
               s->base.run.optimizer == PP_OPT_ADAMW ? "adamw" : "none", s->base.model.vocab);
    out_printf(&o, "\"evaluated\":%d,\"fit\":%d,\"unevaluated\":%d,\"search_s\":", s->n, s->n_fit,
               s->unevaluated);
    out_json_num(&o, s->seconds);
    out_printf(&o, ",\"skipped\":{");
    for (int k = 0; k < PP_SKIP_COUNT; k++)
        out_printf(&o, "%s\"%s\":%d", k ? "," : "", plan_skip_name((pp_skip_t)k), s->skipped[k]);
    out_printf(&o, "},\"candidates\":[");
    int shown = top < s->n ? top : s->n;
    for (int i = 0; i < shown; i++) {
        if (i) out_printf(&o, ",\n");
        plan_json_cand(&o, &s->c[i], i + 1);
    }
    int idx[64], n = plan_search_pareto(s, idx, 64);
    out_printf(&o, "],\"pareto_ranks\":[");
    for (int i = 0; i < n; i++)
        out_printf(&o, "%s%d", i ? "," : "", idx[i] + 1);
    char why[1024];
    plan_search_why(s, why, sizeof why);
    out_printf(&o, "],\"why\":");
    if (why[0])
        out_json_str(&o, why);
    else
        out_printf(&o, "null");
    out_printf(&o, "}\n");
    return out_close(&o);
}

pp_status_t plan_print_csv(const pp_search_t *s, FILE *f)
{
    pp_out_t o;
    out_wrap(&o, f, "output", "the plan as CSV");
    out_printf(&o, "rank,schedule,pipeline_devices,data_parallel,optimizer_sharding,chunks,"
                   "placement,micro_batches,micro_batch_size,step_ms,"
                   "tokens_per_s,bubble,peak_mem_bytes,fullest_device,"
                   "activation_microbatch_equivalents,p2p_bytes,fits\n");
    for (int i = 0; i < s->n; i++) {
        const pp_candidate_t *c = &s->c[i];
        out_printf(&o, "%d,%s,%d,%d,%s,%d,%s,%d,%d,%.6g,%.6g,%.6g,%.0f,%d,%.4g,%.0f,%d\n", i + 1,
                   sched_kind_name(c->kind), c->p, c->d, c->zero1 ? "zero1" : "none", c->v,
                   c->placement == PP_PLACEMENT_V ? "v" : "loop", c->m, c->mbs, c->step_ms,
                   c->tokens_per_s, c->bubble, c->peak_bytes, c->fullest, c->mb_equiv,
                   c->sent_bytes, c->fits);
    }
    return out_close(&o);
}

pp_status_t plan_write_yaml(const pp_search_t *s, const pp_candidate_t *c, const char *path)
{
    const pp_config_t *b = &s->base;
    pp_out_t o;
    PP_CHECK(out_open(&o, path, "the schedule file"));
    out_printf(&o, "# %s: written by ppsched plan for %d x %s and %ld sequences a step;\n",
               c->label, s->p, s->gpu, s->seqs);
    out_printf(&o, "# predicted %.3f ms a step, %.4g tokens/s, %.2f GiB on device %d\n", c->step_ms,
               c->tokens_per_s, c->peak_bytes / GIB, c->fullest);
    out_printf(&o, "name: plan-%s\n", sched_kind_name(c->kind));
    out_printf(&o, "model: {layers: %d, hidden: %d, heads: %d, seq_len: %d, vocab: %d, dtype: %s",
               b->model.layers, b->model.hidden, b->model.heads, b->model.seq_len, b->model.vocab,
               pp_dtype_name(b->model.dtype));
    for (int k = 0; k < b->model.n_layers_per_stage; k++)
        out_printf(&o, "%s%d", k ? ", " : ", layers_per_stage: [", b->model.layers_per_stage[k]);
    out_printf(&o, "%s}\n", b->model.n_layers_per_stage > 0 ? "]" : "");
    out_printf(
        &o,
        "pipeline: {devices: %d, data_parallel: %d, stages: auto, chunks: %d, placement: %s, "
        "split: %s, micro_batches: %d, micro_batch_size: %d, transport: %s}\n",
        s->p, c->d > 1 ? c->d : 1, c->v, c->placement == PP_PLACEMENT_V ? "v" : "loop",
        c->split == PP_SPLIT_BALANCED ? "balanced" : "even", c->m, c->mbs,
        transport_name(b->pipeline.transport));
    out_printf(&o, "schedule: {kind: %s}\n", sched_kind_name(c->kind));
    out_printf(&o,
               "run: {steps: %d, warmup: %d, seed: %llu, optimizer: %s, lr: %.9g, "
               "weight_decay: %.9g, recompute: %s, offload: %s, optimizer_sharding: %s",
               b->run.steps, b->run.warmup, (unsigned long long)b->run.seed,
               b->run.optimizer == PP_OPT_ADAMW ? "adamw" : "none", b->run.lr, b->run.weight_decay,
               stage_recompute_name(b->run.recompute),
               c->offload || b->run.offload == PP_OFFLOAD_AUTO ? "auto"
               : b->run.offload == PP_OFFLOAD_ACTIVATIONS      ? "activations"
                                                               : "none",
               c->zero1 ? "zero1" : "none");
    if (c->offload) /* the limit the search held it to */
        out_printf(&o, ", memory_limit: %.9g", s->limit_bytes / GIB);
    else if (b->run.memory_limit_gib > 0)
        out_printf(&o, ", memory_limit: %.9g", b->run.memory_limit_gib);
    out_printf(&o, "}\n");
    out_printf(&o, "cost: {gpu: %s", s->gpu);
    if (b->cost_src.link[0]) out_printf(&o, ", link: %s", b->cost_src.link);
    if (b->cost.host_link_gbps > 0)
        out_printf(&o, ", host_link_gbps: %.9g", b->cost.host_link_gbps);
    if (config_cost_hand_set(b))
        out_printf(&o, ", forward: %.9g, backward_input: %.9g, backward_weight: %.9g, send: %.9g",
                   b->cost.forward, b->cost.backward_input, b->cost.backward_weight, b->cost.send);
    if (config_is_set(b, PP_CFG_OVERLAP)) out_printf(&o, ", overlap: %.9g", b->cost.overlap);
    if (b->cost_src.profile) {
        out_printf(&o, ", profile: ");
        out_json_str(&o, b->cost_src.profile);
    }
    out_printf(&o, "}\n");
    return out_close(&o);
}

pp_status_t plan_print_verified(const pp_search_t *s, const pp_verified_t *v, int n, FILE *f)
{
    pp_out_t o;
    out_wrap(&o, f, "output", "the verified plan");
    out_printf(&o,
               "#\n# verified: %d candidate%s run on the GPUs present, re-ranked by the measured "
               "step:\n",
               n, n == 1 ? "" : "s");
    int w = 36;
    for (int i = 0; i < n; i++)
        w = plan_label_width(w, s->c[v[i].rank - 1].label);
    out_printf(&o, "%4s %4s  %-*s %10s %10s %7s %10s %9s %9s\n", "rank", "pred", w, "schedule",
               "predicted", "measured", "error", "tokens/s", "pred mem", "meas mem");
    out_printf(&o, "%4s %4s  %-*s %10s %10s %7s %10s %9s %9s\n", "", "rank", w, "", "(ms)", "(ms)",
               "(%)", "measured", "(GiB)", "(GiB)");
    for (int i = 0; i < n; i++)
        out_printf(&o, "%4d %4d  %-*s %10.3f %10.3f %+7.1f %10.4g %9.2f %9.2f\n", i + 1, v[i].rank,
                   w, s->c[v[i].rank - 1].label, v[i].predicted_ms, v[i].measured_ms,
                   100 * (v[i].predicted_ms - v[i].measured_ms) / v[i].measured_ms,
                   s->tokens / (v[i].measured_ms / 1000), v[i].predicted_bytes / GIB,
                   v[i].measured_bytes / GIB);
    if (n > 0)
        out_printf(&o, "# measured best: %s (predicted rank %d)\n", s->c[v[0].rank - 1].label,
                   v[0].rank);
    return out_close(&o);
}
