/*
 * preset.h — the table of model presets: one row per named shape (`model: 7b`), giving every
 * key of the YAML's model section and the sequences per micro-batch the shape is defined with.
 *
 * The config applies a row under the keys the input writes itself (config/config_keys.c): an
 * explicit key wins wherever it stands. The default model is the `reference` row. The
 * benchmarks take their shapes from the same rows (bench_stage's one middle stage: layers /
 * devices blocks), so no shape is written twice. Plain C, constant data, no allocation.
 */
#ifndef PP_PRESET_H
#define PP_PRESET_H

#include "model/job.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_preset {
    const char *name;     /* as written in `model: NAME`, `--set model=NAME` */
    const char *about;    /* one line for the docs and messages */
    pp_job_model_t model; /* layers, hidden, heads, seq_len, vocab, dtype; no listed split */
    int micro_batch_size; /* sequences per micro-batch: pipeline.micro_batch_size unless given */
    int devices;          /* the pipeline the shape is sized for (not applied: `devices` is the
                           * machine's); a middle stage holds layers / devices blocks */
} pp_preset_t;

/* The row called `name` (case-insensitive), or NULL. */
const pp_preset_t *preset_find(const char *name);
/* Its index in the table, or -1 (for config's table-row readers). */
int preset_index(const char *name);
/* Rows in table order: preset_at(0 .. preset_count() - 1). */
int preset_count(void);
const pp_preset_t *preset_at(int i);
/* The row the defaults are: `reference`. */
const pp_preset_t *preset_default(void);
/* "reference, small, 7b, 13b" into buf, for `allowed:` lists. */
void preset_names(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PP_PRESET_H */
