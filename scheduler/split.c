/*
 * split.c — layers per stage (split.h): the balanced split by water-filling, FLOPs per block and
 * per head, and a stage's blocks. Pure functions of their arguments; no allocation.
 */
#include "split.h"

void split_balanced(int *out, int n_stages, int layers, double block_cost, double head_cost)
{
    for (int s = 0; s < n_stages; s++)
        out[s] = 0;
    for (int k = 0; k < layers; k++) {
        int best = 0;
        double best_cost = 0.0;
        for (int s = 0; s < n_stages; s++) {
            double c = (out[s] + 1) * block_cost + (s == n_stages - 1 ? head_cost : 0.0);
            if (s == 0 || c < best_cost) best = s, best_cost = c;
        }
        out[best]++;
    }
}

double split_block_flops(const pp_config_t *cfg)
{
    double h = cfg->model.hidden, s = cfg->model.seq_len;
    return 24.0 * h * h + 4.0 * s * h; /* QKV 6h², proj 2h², MLP 16h², QKᵀ + PV 4sh */
}

double split_head_flops(const pp_config_t *cfg)
{
    return 2.0 * cfg->model.hidden * cfg->model.vocab;
}

void split_stage_layers(const pp_config_t *cfg, int n_stages, int s, int *n_layers,
                        int *first_layer)
{
    const pp_model_cfg_t *m = &cfg->model;
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
