/*
 * data.h — the synthetic training data: a learnable next-token task, a pure function of the seed.
 *
 * Sequence b of micro-batch mb (the data index the executor passes: step * m + k) is a walk
 * through a fixed random permutation f of the vocabulary: t_0 is a hashed start token, and
 * t_{i+1} = f(t_i), except that with probability 1/8 (decided by the hash of (mb, b, i+1)) the
 * walk jumps to a uniformly random token. A position's token is computed without the positions
 * before the last jump, so every token is an independent function (one GPU thread per token).
 * Targets are the next tokens; the last position's target is f(t_{T-1}).
 *
 * Shared by the GPU stage (device kernels, with nvcc) and the CPU reference (gcc): no CUDA header.
 */
#ifndef PP_STAGES_DATA_H
#define PP_STAGES_DATA_H

#include "model/rng.h"

#include <stdint.h>

/* One jump in PP_DATA_JUMP_ONE_IN positions, on average. */
#define PP_DATA_JUMP_ONE_IN 8

/* Fill perm[0..vocab) with the permutation f of the vocabulary (Fisher-Yates over hashed swaps).
 * Host only; the stage uploads the table once at init. */
static inline void data_perm_fill(uint64_t seed, int vocab, int32_t *perm)
{
    for (int i = 0; i < vocab; i++)
        perm[i] = i;
    for (int i = vocab - 1; i > 0; i--) {
        int j = (int)(pp_hash(seed, PP_RNG_PERM, (uint64_t)i, 0, 0) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* The hash that decides position i of sequence (mb, b): a jump when its low bits are zero, and
 * then the jump's token from its high bits. Position 0 always "jumps" (the start token). */
static inline PP_HD uint64_t data_position_hash(uint64_t seed, int mb, int b, int i)
{
    return pp_hash(seed, PP_RNG_DATA, (uint64_t)(uint32_t)mb, (uint64_t)(uint32_t)b,
                   (uint64_t)(uint32_t)i);
}

static inline PP_HD int data_is_jump(uint64_t h, int i)
{
    return i == 0 || (h % PP_DATA_JUMP_ONE_IN) == 0;
}

/* Token at position i (0 <= i) of sequence b of micro-batch mb. */
static inline PP_HD int data_token(uint64_t seed, const int32_t *perm, int vocab, int mb, int b,
                                   int i)
{
    int j = i;
    uint64_t h = data_position_hash(seed, mb, b, j);
    while (!data_is_jump(h, j)) {
        j--;
        h = data_position_hash(seed, mb, b, j);
    }
    int t = (int)((h / PP_DATA_JUMP_ONE_IN) % (uint64_t)vocab);
    for (; j < i; j++)
        t = perm[t];
    return t;
}

/* Target at position i of a sequence of seq_len tokens: the next token, and f of the last one. */
static inline PP_HD int data_target(uint64_t seed, const int32_t *perm, int vocab, int seq_len,
                                    int mb, int b, int i)
{
    if (i + 1 < seq_len) return data_token(seed, perm, vocab, mb, b, i + 1);
    return perm[data_token(seed, perm, vocab, mb, b, i)];
}

#endif /* PP_STAGES_DATA_H */
