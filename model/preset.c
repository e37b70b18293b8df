/*
 * preset.c — the table of model presets (preset.h). Each row is a shape someone measures:
 * the reference model every default and shipped file trains, the small one of the quick
 * benchmarks, and the 7B- and 13B-class shapes of the larger pipelines. bf16 everywhere.
 */
#include "model/preset.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* clang-format off */
#define SHAPE(L, C, H, T, V) {.layers = (L), .hidden = (C), .heads = (H), .seq_len = (T), \
                              .vocab = (V), .dtype = PP_DTYPE_BF16}
static const pp_preset_t presets[] = {
    {"reference", "the reference model: 24 blocks, hidden 1024, 16 heads, seq 1024",
     SHAPE(24, 1024, 16, 1024, 8192), 4, 4},
    {"small", "the quick benchmarks' model: 16 blocks, hidden 512, 8 heads, seq 256",
     SHAPE(16, 512, 8, 256, 8192), 2, 4},
    /* The depth, width and heads of Llama 2 7B (head dim 128) in this model's blocks (LayerNorm,
     * a GELU MLP of 4h), with its 32000 words: 6.72 G parameters, on 4 GPUs. */
    {"7b", "a 7B-class model: 32 blocks, hidden 4096, 32 heads, seq 4096, vocab 32000",
     SHAPE(32, 4096, 32, 4096, 32000), 1, 4},
    /* The same for Llama 2 13B: 12.93 G parameters, for 8 GPUs. */
    {"13b", "a 13B-class model: 40 blocks, hidden 5120, 40 heads, seq 4096, vocab 32000",
     SHAPE(40, 5120, 40, 4096, 32000), 1, 8},
};
/* clang-format on */

int preset_index(const char *name)
{
    for (int i = 0; name && i < N_OF(presets); i++)
        if (!strcasecmp(presets[i].name, name)) return i;
    return -1;
}

const pp_preset_t *preset_find(const char *name)
{
    int i = preset_index(name);
    return i < 0 ? NULL : &presets[i];
}

int preset_count(void)
{
    return N_OF(presets);
}

const pp_preset_t *preset_at(int i)
{
    return i >= 0 && i < N_OF(presets) ? &presets[i] : NULL;
}

const pp_preset_t *preset_default(void)
{
    return &presets[0];
}

void preset_names(char *buf, size_t size)
{
    size_t used = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; i < N_OF(presets) && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", presets[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
}
