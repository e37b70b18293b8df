/*
 * profile.c — a profile's tables (the stages, the passes, the fields of the `steps:` and `pairs:`
 * rows) and writing it (profile.h); reading is profile_read.c's, calibrating profile_calib.c's.
 *
 * The file is one YAML mapping: ppsched (the version, `profile 2`), device, gpu, date, shape
 * {hidden, heads, seq_len, vocab, micro_batch_size, layers, dtype}, runtime_bytes,
 * stage_overhead_bytes, stages {middle, first, last: {forward, backward_input, backward_weight
 * (ms), bytes}}, sends [{bytes, ms}...], steps [{micro_batch_size, seq_len, layers,
 * micro_batches, ms}...] and pairs [{micro_batch_size, seq_len, layers, micro_batches, serial_ms,
 * overlapped_ms, overlap}...]. Writing builds a libyaml document and lets the emitter print it.
 */
#include "profile_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static const pp_prof_stage_desc_t stage_descs[PP_PROF_STAGE_COUNT] = {
    {"middle", 0, 0},
    {"first", 1, 0},
    {"last", 0, 1},
};

static const char *const pass_names[PP_PASS_COUNT] = {"forward", "backward_input",
                                                      "backward_weight"};

const pp_prof_stage_desc_t *profile_stage_desc(pp_prof_stage_t k)
{
    return (unsigned)k < PP_PROF_STAGE_COUNT ? &stage_descs[k] : NULL;
}

const char *profile_pass_name(pp_pass_t p)
{
    return (unsigned)p < PP_PASS_COUNT ? pass_names[p] : "?";
}

/* ---- steps: and pairs: one table of fields per list ------------------------------------------ */

#define STEP_SIZE(f, k)                                                                            \
    {                                                                                              \
        f, 1, PP_PROF_MAX_WHOLE, PP_PROF_MAX_WHOLE_TEXT, offsetof(pp_prof_step_t, size.k)          \
    }
#define PAIR_SIZE(f, k)                                                                            \
    {                                                                                              \
        f, 1, PP_PROF_MAX_WHOLE, PP_PROF_MAX_WHOLE_TEXT, offsetof(pp_prof_pair_t, size.k)          \
    }
static const row_field_t step_fields[] = {
    STEP_SIZE("micro_batch_size", batch),
    STEP_SIZE("seq_len", seq_len),
    STEP_SIZE("layers", layers),
    STEP_SIZE("micro_batches", m),
    {"ms", 0, PP_PROF_MAX_MS, PP_PROF_MAX_MS_TEXT, offsetof(pp_prof_step_t, ms)},
};
static const row_field_t pair_fields[] = {
    PAIR_SIZE("micro_batch_size", batch),
    PAIR_SIZE("seq_len", seq_len),
    PAIR_SIZE("layers", layers),
    PAIR_SIZE("micro_batches", m),
    {"serial_ms", 0, PP_PROF_MAX_MS, PP_PROF_MAX_MS_TEXT, offsetof(pp_prof_pair_t, serial_ms)},
    {"overlapped_ms", 0, PP_PROF_MAX_MS, PP_PROF_MAX_MS_TEXT,
     offsetof(pp_prof_pair_t, overlapped_ms)},
    {"overlap", 0, 1, "0 to 1", offsetof(pp_prof_pair_t, overlap)},
};

const row_list_t profile_row_lists[2] = {
    {"steps", step_fields, 5, "micro_batch_size, seq_len, layers, micro_batches, ms",
     sizeof(pp_prof_step_t), offsetof(pp_profile_t, steps), offsetof(pp_profile_t, n_steps)},
    {"pairs", pair_fields, 7,
     "micro_batch_size, seq_len, layers, micro_batches, serial_ms, overlapped_ms, overlap",
     sizeof(pp_prof_pair_t), offsetof(pp_profile_t, pairs), offsetof(pp_profile_t, n_pairs)},
};

/* ---- writing --------------------------------------------------------------------------------- */

static int add_pair(yaml_document_t *d, int map, const char *key, const char *val)
{
    int k = yaml_document_add_scalar(d, NULL, (yaml_char_t *)key, -1, YAML_PLAIN_SCALAR_STYLE);
    int v = yaml_document_add_scalar(d, NULL, (yaml_char_t *)val, -1, YAML_ANY_SCALAR_STYLE);
    return k && v && yaml_document_append_mapping_pair(d, map, k, v);
}

static int add_num(yaml_document_t *d, int map, const char *key, double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.6g", x);
    return add_pair(d, map, key, buf);
}

static int add_map(yaml_document_t *d, int map, const char *key, yaml_mapping_style_t style)
{
    int k = yaml_document_add_scalar(d, NULL, (yaml_char_t *)key, -1, YAML_PLAIN_SCALAR_STYLE);
    int m = yaml_document_add_mapping(d, NULL, style);
    return (k && m && yaml_document_append_mapping_pair(d, map, k, m)) ? m : 0;
}

/* steps: and pairs:, one flow mapping a row, fields in table order. */
static int build_runs(yaml_document_t *d, int root, const pp_profile_t *p)
{
    int ok = 1;
    for (int w = 0; ok && w < 2; w++) {
        const row_list_t *l = &profile_row_lists[w];
        const char *rows = (const char *)p + l->rows_off;
        int count = *(const int *)((const char *)p + l->count_off);
        int k =
            yaml_document_add_scalar(d, NULL, (yaml_char_t *)l->name, -1, YAML_PLAIN_SCALAR_STYLE);
        int seq = yaml_document_add_sequence(d, NULL, YAML_BLOCK_SEQUENCE_STYLE);
        ok = k && seq && yaml_document_append_mapping_pair(d, root, k, seq);
        for (int i = 0; ok && i < count; i++) {
            const char *row = rows + (size_t)i * l->row_size;
            int m = yaml_document_add_mapping(d, NULL, YAML_FLOW_MAPPING_STYLE);
            ok = m && yaml_document_append_sequence_item(d, seq, m);
            for (int f = 0; ok && f < l->n_fields; f++) {
                const row_field_t *fl = &l->fields[f];
                ok = add_num(d, m, fl->name,
                             fl->whole ? *(const int *)(row + fl->off)
                                       : *(const double *)(row + fl->off));
            }
        }
    }
    return ok;
}

static int build_doc(yaml_document_t *d, const pp_profile_t *p)
{
    char version[32];
    snprintf(version, sizeof version, "profile %d", PP_PROFILE_VERSION);
    int ok = 1, root = yaml_document_add_mapping(d, NULL, YAML_BLOCK_MAPPING_STYLE);
    ok &= root && add_pair(d, root, "device", p->device) && add_pair(d, root, "gpu", p->gpu);
    ok &= add_pair(d, root, "date", p->date) && add_pair(d, root, "ppsched", version);
    int sh = ok ? add_map(d, root, "shape", YAML_FLOW_MAPPING_STYLE) : 0;
    ok &=
        sh && add_num(d, sh, "hidden", p->shape.hidden) && add_num(d, sh, "heads", p->shape.heads);
    ok &= add_num(d, sh, "seq_len", p->shape.seq_len) && add_num(d, sh, "vocab", p->shape.vocab);
    ok &= add_num(d, sh, "micro_batch_size", p->shape.batch);
    ok &= add_num(d, sh, "layers", p->shape.n_layers);
    ok &= add_pair(d, sh, "dtype", pp_dtype_name(p->dtype));
    ok &= add_num(d, root, "runtime_bytes", p->runtime_bytes);
    ok &= add_num(d, root, "stage_overhead_bytes", p->stage_overhead_bytes);
    int sts = ok ? add_map(d, root, "stages", YAML_BLOCK_MAPPING_STYLE) : 0;
    for (int k = 0; ok && sts && k < PP_PROF_STAGE_COUNT; k++) {
        int m = add_map(d, sts, stage_descs[k].name, YAML_FLOW_MAPPING_STYLE);
        ok &= m != 0;
        for (int pass = 0; ok && pass < PP_PASS_COUNT; pass++)
            ok &= add_num(d, m, pass_names[pass], p->ms[k][pass]);
        ok &= ok && add_num(d, m, "bytes", p->stage_bytes[k]);
    }
    int kk = yaml_document_add_scalar(d, NULL, (yaml_char_t *)"sends", -1, YAML_PLAIN_SCALAR_STYLE);
    int seq = yaml_document_add_sequence(d, NULL, YAML_BLOCK_SEQUENCE_STYLE);
    ok &= sts && kk && seq && yaml_document_append_mapping_pair(d, root, kk, seq);
    for (int i = 0; ok && i < p->n_sends; i++) {
        int m = yaml_document_add_mapping(d, NULL, YAML_FLOW_MAPPING_STYLE);
        ok &= m && yaml_document_append_sequence_item(d, seq, m);
        ok &= ok && add_num(d, m, "bytes", p->send_bytes[i]) && add_num(d, m, "ms", p->send_ms[i]);
    }
    return ok && build_runs(d, root, p);
}

pp_status_t profile_write(const pp_profile_t *p, FILE *f)
{
    yaml_document_t doc;
    yaml_emitter_t em;
    if (!yaml_document_initialize(&doc, NULL, NULL, NULL, 1, 1))
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for a YAML document");
    if (!build_doc(&doc, p)) {
        yaml_document_delete(&doc);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory building the profile document");
    }
    fprintf(f,
            "# ppsched profile: stage times (ms per micro-batch), memory (bytes), transfers, and\n"
            "# whole-model steps (ms) on one GPU; measured on %s; read it with\n"
            "# `cost: {profile: FILE}`\n",
            p->device);
    if (!yaml_emitter_initialize(&em)) {
        yaml_document_delete(&doc);
        PP_FAIL(PP_ERR_NOMEM, "out of host memory for a YAML emitter");
    }
    yaml_emitter_set_output_file(&em, f);
    yaml_emitter_set_width(&em, 100);
    int ok = yaml_emitter_open(&em);
    if (ok)
        ok = yaml_emitter_dump(&em, &doc) && yaml_emitter_close(&em); /* dump deletes the doc */
    else
        yaml_document_delete(&doc);
    yaml_emitter_delete(&em);
    if (!ok) PP_REFUSE(PP_ERR_IO, "could not write the profile: %s", strerror(errno));
    return PP_OK;
}
