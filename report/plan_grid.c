/*
 * plan_grid.c — plan_print_grid: a plan's compute steps as a text grid, one row per device, one
 * column per program step, as `ppsched show` prints it, and plan_print_memory, the device bytes
 * each device's stages allocate (with and without run.offload). Reads the plan only.
 */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

/* Label of a compute op: `F3`, `I1`, or `4F0` when its device holds several stages. */
static int grid_label(const pp_op_t *o, int multi, char *buf, size_t size)
{
    if (multi) return snprintf(buf, size, "%d%s%d", o->stage, action_kind_name(o->kind), o->mb);
    return snprintf(buf, size, "%s%d", action_kind_name(o->kind), o->mb);
}

#define GRID_WIDTH 100 /* characters per printed line before the grid wraps */

/* One row of the grid: device d's compute steps c0 .. c1-1, from program index *cursor on. */
static void grid_row(const pp_plan_t *plan, FILE *f, int d, int multi, int name_w, int width,
                     int c0, int c1, int *cursor)
{
    char name[16], lab[48];
    snprintf(name, sizeof name, "dev%d", d);
    fprintf(f, "%-*s |", name_w, name);
    for (int c = c0; c < c1; c++) {
        while (*cursor < plan->prog_begin[d + 1] &&
               !pp_role_row(plan->ops[plan->prog_ops[*cursor]].role)->computes)
            (*cursor)++;
        if (*cursor == plan->prog_begin[d + 1]) break;
        int n = grid_label(&plan->ops[plan->prog_ops[(*cursor)++]], multi, lab, sizeof lab);
        /* Pad every cell but the last of the row, so lines carry no trailing blanks. */
        int pad = c + 1 < c1 ? width - n : 0;
        fprintf(f, " %s%*s", lab, pad, "");
    }
    fputc('\n', f);
}

void plan_print_grid(const pp_plan_t *plan, FILE *f)
{
    int n_dev = plan->n_devices;
    int *multi = calloc((size_t)n_dev, sizeof *multi);   /* device holds several stages */
    int *cursor = calloc((size_t)n_dev, sizeof *cursor); /* next program index per device */
    if (!multi || !cursor) {
        fprintf(stderr, "%s:%d: out of host memory printing the plan\n", __FILE__, __LINE__);
        free(multi);
        free(cursor);
        return;
    }
    for (int d = 0; d < n_dev; d++) {
        int stages = 0;
        for (int s = 0; s < plan->n_stages; s++)
            stages += plan_stage_on(plan, s, d);
        multi[d] = stages > 1;
        cursor[d] = plan->prog_begin[d];
    }
    /* Column width from the widest label; columns per line from GRID_WIDTH. */
    int width = 2, n_cols = 0;
    char lab[48], name[16];
    for (int d = 0; d < n_dev; d++) {
        int cols = 0;
        for (int i = plan->prog_begin[d]; i < plan->prog_begin[d + 1]; i++) {
            const pp_op_t *o = &plan->ops[plan->prog_ops[i]];
            if (!pp_role_row(o->role)->computes) continue;
            int w = grid_label(o, multi[d], lab, sizeof lab);
            if (w > width) width = w;
            cols++;
        }
        if (cols > n_cols) n_cols = cols;
    }
    int name_w = snprintf(name, sizeof name, "dev%d", n_dev - 1);
    int per_line = (GRID_WIDTH - name_w - 2) / (width + 1);
    if (per_line < 1) per_line = 1;
    int c0 = 0;
    do {
        int c1 = c0 + per_line < n_cols ? c0 + per_line : n_cols;
        if (n_cols > per_line) fprintf(f, "%scompute steps %d..%d\n", c0 ? "\n" : "", c0, c1 - 1);
        for (int d = 0; d < n_dev; d++)
            grid_row(plan, f, d, multi[d], name_w, width, c0, c1, &cursor[d]);
        c0 = c1;
    } while (c0 < n_cols);
    fprintf(f, "activation slots per stage\n");
    for (int d = 0; d < n_dev; d++) {
        snprintf(name, sizeof name, "dev%d", d);
        fprintf(f, "%-*s |", name_w, name);
        const char *sep = " ";
        for (int s = 0; s < plan->n_stages; s++) {
            if (!plan_stage_on(plan, s, d)) continue;
            fprintf(f, "%sstage %d: %d", sep, s, plan->slots_per_stage[s]);
            if (plan->split_backward && plan->wgrad_slots_per_stage)
                fprintf(f, " (I->W buffers %d)", plan->wgrad_slots_per_stage[s]);
            if (plan->offload)
                fprintf(f, " (offload: ring of %d, %d without; %d host slots)",
                        plan->slots_per_stage[s], plan->plain_slots_per_stage[s],
                        plan->host_slots_per_stage[s]);
            if (plan->offload && plan->offload_keep && plan->offload_keep[s] > 0)
                fprintf(f, " (%d kept regions: %d tensors of each slot stay on the device)",
                        plan->keep_slots_per_stage[s], plan->offload_keep[s]);
            sep = ", ";
        }
        fputc('\n', f);
    }
    free(multi);
    free(cursor);
}

void plan_print_memory(const pp_plan_t *plan, const pp_job_t *job, FILE *f)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    fprintf(f, "device memory (stages: state, workspace, slots)\n");
    for (int d = 0; d < plan->n_devices; d++) {
        fprintf(f, "dev%d | %.2f GiB", d, (double)plan_device_bytes(plan, job, d, 0) / gib);
        if (plan->offload)
            fprintf(f, " with offload, %.2f GiB without; pinned host %.2f GiB",
                    (double)plan_device_bytes(plan, job, d, 1) / gib,
                    (double)plan_host_bytes(plan, d) / gib);
        fputc('\n', f);
    }
}
