/*
 * split.h — how the model's layers are divided among the stages. `even` gives every stage
 * layers / stages blocks; `model.layers_per_stage: [5, 6, 6, 7]` lists them; `pipeline.split:
 * balanced` picks the split that evens the predicted stage times, here from FLOPs: a stage's
 * blocks plus, on the last stage, the LM head (the embedding lookup costs no FLOPs). After
 * config_resolve, cfg->model.layers_per_stage holds one entry per stage in every case, and the
 * executor and the simulator read a stage's blocks through split_stage_layers.
 */
#ifndef PP_SPLIT_H
#define PP_SPLIT_H

#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Split `layers` blocks into n_stages stages (out[n_stages]) minimising the largest stage cost,
 * a stage costing its blocks x block_cost plus head_cost on the last stage. Among splits with the
 * same largest cost, it fills the stages in order as evenly as it can (water-filling: each block
 * goes to the cheapest stage so far, the earliest on a tie). */
void split_balanced(int *out, int n_stages, int layers, double block_cost, double head_cost);

/* Forward FLOPs per token of one transformer block and of the LM head, as config_flops_per_step
 * counts them. */
double split_block_flops(const pp_config_t *cfg);
double split_head_flops(const pp_config_t *cfg);

/* Blocks of stage s and the global index of its first block, from cfg->model.layers_per_stage
 * (config_resolve fills it; an unresolved config splits evenly). */
void split_stage_layers(const pp_config_t *cfg, int n_stages, int s, int *n_layers,
                        int *first_layer);

#ifdef __cplusplus
}
#endif

#endif /* PP_SPLIT_H */
