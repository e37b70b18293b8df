/*
 * rng.h — the counter-based hash behind every random number of a stage: parameter init, the
 * vocabulary permutation and the synthetic tokens. A value is a pure function of (seed, domain,
 * counters), never of a generator's state, so any device (or the CPU reference) that asks for the
 * same counters gets the same bits, in any order and any split of the model into stages.
 *
 * Plain C11 and CUDA: with nvcc the functions are __host__ __device__ (PP_HD); with gcc this
 * header pulls in no CUDA header.
 */
#ifndef PP_STAGES_RNG_H
#define PP_STAGES_RNG_H

#include <stdint.h>

#if defined(__CUDACC__)
#define PP_HD __host__ __device__
#else
#define PP_HD
#endif

/* Domains keep the streams of different uses apart. */
enum {
    PP_RNG_PARAM = 1, /* parameter init: (tensor id, element pair) */
    PP_RNG_PERM = 2,  /* vocabulary permutation: (swap index) */
    PP_RNG_DATA = 3   /* synthetic data: (micro-batch, sequence, position) */
};

/* splitmix64's output function: a bijection on 64-bit words with full avalanche. */
static inline PP_HD uint64_t pp_mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Hash of (seed, domain, a, b, c): each word is folded in through one full mix. */
static inline PP_HD uint64_t pp_hash(uint64_t seed, uint64_t domain, uint64_t a, uint64_t b,
                                     uint64_t c)
{
    uint64_t h = pp_mix64(seed);
    h = pp_mix64(h ^ domain);
    h = pp_mix64(h ^ a);
    h = pp_mix64(h ^ b);
    return pp_mix64(h ^ c);
}

/* The top 53 bits of a hash as a double in [0, 1). */
static inline PP_HD double pp_unit53(uint64_t h)
{
    return (double)(h >> 11) * 0x1.0p-53;
}

#endif /* PP_STAGES_RNG_H */
