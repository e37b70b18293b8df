/*
 * stage_kernels.h — device kernels that only a stage needs: the synthetic tokens and targets of a
 * micro-batch (stages/data.h evaluated on the GPU, one thread per position) and parameter init
 * (model/model.h's Box-Muller pairs, one thread per pair).
 *
 * Launchers enqueue on `stream`, never synchronize, and return PP_ERR_CUDA on a failed launch.
 * `perm` is the device copy of the vocabulary permutation (data_perm_fill), owned by the stage.
 */
#ifndef PP_STAGE_KERNELS_H
#define PP_STAGE_KERNELS_H

#include "common/pp_status.h"

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* tokens[b*T + t] = data_token(seed, perm, V, base + mb, b, t) for b < B, t < T, where base is
 * *d_base read on the device when the kernel runs (so a captured graph sees each step's value),
 * or 0 when d_base is NULL. */
pp_status_t stage_make_tokens(int *tokens, const int32_t *perm, uint64_t seed, int V, int B, int T,
                              const int *d_base, int mb, cudaStream_t stream);

/* targets[b*T + t] = data_target(seed, perm, V, T, base + mb, b, t), base as above. */
pp_status_t stage_make_targets(int *targets, const int32_t *perm, uint64_t seed, int V, int B,
                               int T, const int *d_base, int mb, cudaStream_t stream);

/* out[0..numel) (fp32) = the init of the tensor with identity `id` (model_tensor_id): normal
 * values of standard deviation `std` from model_init_pair, or `constant` everywhere when std == 0.
 */
pp_status_t stage_init_tensor(float *out, size_t numel, uint64_t seed, uint64_t id, double std,
                              float constant, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* PP_STAGE_KERNELS_H */
