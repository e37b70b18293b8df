/*
 * split.c — layers per stage (split.h): the balanced split by water-filling, the predicted time of
 * a block, the embedding and the head (cost.c), and a stage's blocks. Pure functions of their
 * arguments; no allocation.
 */
#include "split.h"

#include "cost.h"
#include "stage_layout.h"

#include <string.h>

void split_balanced(int *out, int n_stages, int layers, double block_cost, double first_cost,
                    double last_cost)
{
    for (int s = 0; s < n_stages; s++)
        out[s] = 0;
    for (int k = 0; k < layers; k++) {
        int best = 0;
        double best_cost = 0.0;
        for (int s = 0; s < n_stages; s++) {
            double c = (out[s] + 1) * block_cost + (s == 0 ? first_cost : 0.0) +
                       (s == n_stages - 1 ? last_cost : 0.0);
            if (s == 0 || c < best_cost) best = s, best_cost = c;
        }
        out[best]++;
    }
}

void split_part_ms(const pp_job_t *job, double *block, double *embed, double *head)
{
    const pp_gpu_t *gpu = cost_gpu_for(&job->cost_src, NULL, NULL);
    /* One middle block: what run.recompute rebuilds is block work, priced on the same stage. */
    pp_stage_cfg_t c;
    job_stage_cfg(&c, job);
    c.n_layers = 1;
    pp_model_shape_t sh = stage_shape_of(&c);
    double *out[PP_PART_COUNT] = {block, embed, head};
    for (int part = 0; part < PP_PART_COUNT; part++) {
        *out[part] = 0.0;
        for (int pass = 0; pass < PP_PASS_COUNT; pass++)
            *out[part] +=
                cost_part(&sh, job->model.dtype, gpu, (pp_pass_t)pass, (pp_part_t)part).ms;
    }
    double rc_i, rc_w;
    cost_recompute_ms(&c, gpu, NULL, &rc_i, &rc_w);
    *block += rc_i;
}

void split_stage_layers(const pp_job_t *job, int n_stages, int s, int *n_layers,
                        int *first_layer)
{
    const pp_job_model_t *m = &job->model;
    if (m->n_layers_per_stage != n_stages) {
        *n_layers = m->layers / n_stages;
        *first_layer = s * *n_layers;
        return;
    }
    *first_layer = 0;
    for (int k = 0; k < s; k++)
        *first_layer += m->layers_per_stage[k];
    *n_layers = m->layers_per_stage[s];
}
