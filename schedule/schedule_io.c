/*
 * schedule_io.c — schedules in and out of files: PyTorch pipelining's CSV (one row per rank, one
 * cell per slot, an empty cell for an idle slot) and the YAML `schedule: steps:` block.
 *
 * Reading keeps each device's actions in row order and drops idle cells: a pp_schedule_t has no
 * idle slots (time comes from dependencies, not from columns), so writing emits the actions
 * alone and a write -> read round trip gives the same programs. Cells may carry spaces and
 * quotes around them; an action itself has the strict text form of action_parse, and PyTorch's
 * composite `(0F3;5B1)OVERLAP_F_B` (DualPipeV) reads as its actions in order; its FSDP and
 * data-parallel steps (UNSHARD, RESHARD, REDUCE_GRAD) are left out. Errors name
 * `where:line:col: cell N` and stop at the first. On failure the schedule is left freed (zeroed);
 * a schedule read keeps `where` and each row's line as its origin, for validation's messages.
 */
#include "common/input.h"
#include "plan/schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One action read from the CSV, with its place for messages. */
typedef struct csv_cell {
    int row; /* rank = pipeline device */
    pp_action_t a;
    int line, col; /* 1-based */
    int cell;      /* 1-based cell index in its row */
} csv_cell_t;

/* What was read: every action in file order, and the line each row started on. */
typedef struct csv_table {
    csv_cell_t *cells;
    int n_cells, cap_cells;
    int row_line[PP_MAX_DEVICES];  /* line of each row */
    int row_count[PP_MAX_DEVICES]; /* actions in each row */
    int n_rows;                    /* rows read, trailing empty rows included */
} csv_table_t;

static pp_status_t csv_add(csv_table_t *t, const csv_cell_t *c)
{
    PP_GROW(t->cells, t->n_cells, t->cap_cells, 256);
    t->cells[t->n_cells++] = *c;
    t->row_count[c->row]++;
    return PP_OK;
}

/* Add the action written in `text` (one cell of row `row`), checking its ranges. */
static pp_status_t csv_add_action(csv_table_t *t, const char *text, const csv_cell_t *place,
                                  const char *where)
{
    csv_cell_t c = *place;
    if (action_parse(text, &c.a) != 0) {
        fprintf(stderr, "%s:%d:%d: cell %d: '%s' is not an action (allowed: %s)\n", where, c.line,
                c.col, c.cell, PP_SHORT(text), PP_ACTION_FORMS);
        return PP_ERR_INPUT;
    }
    if (c.a.stage >= PP_MAX_STAGES) {
        fprintf(stderr, "%s:%d:%d: cell %d: stage %d is out of range (allowed: 0..%d)\n", where,
                c.line, c.col, c.cell, c.a.stage, PP_MAX_STAGES - 1);
        return PP_ERR_INPUT;
    }
    if (c.a.mb >= PP_MAX_MICRO_BATCHES) {
        fprintf(stderr, "%s:%d:%d: cell %d: micro-batch %d is out of range (allowed: 0..%d)\n",
                where, c.line, c.col, c.cell, c.a.mb, PP_MAX_MICRO_BATCHES - 1);
        return PP_ERR_INPUT;
    }
    return csv_add(t, &c);
}

/* PyTorch's FSDP and data-parallel steps (`0UNSHARD`, `0RESHARD`, `0REDUCE_GRAD`): one replica
 * with unsharded parameters has nothing to do for them, so they are read and left out. */
static int csv_is_skipped_action(const char *text)
{
    static const char *const skipped[] = {"UNSHARD", "RESHARD", "REDUCE_GRAD"};
    const char *p = text;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == text) return 0;
    for (size_t i = 0; i < sizeof skipped / sizeof *skipped; i++)
        if (strcmp(p, skipped[i]) == 0) return 1;
    return 0;
}

#define OVERLAP_SUFFIX ")OVERLAP_F_B"

/* PyTorch's composite `(0F3;5B1)OVERLAP_F_B` (DualPipeV: a forward and a backward the device may
 * overlap) becomes its compute actions in the written order, one after the other. */
static pp_status_t csv_add_overlap(csv_table_t *t, char *text, const csv_cell_t *place,
                                   const char *where)
{
    size_t n = strlen(text), ns = strlen(OVERLAP_SUFFIX);
    text[n - ns] = '\0';
    int parts = 0;
    for (char *save = NULL, *sub = strtok_r(text + 1, ";", &save); sub;
         sub = strtok_r(NULL, ";", &save), parts++) {
        while (*sub == ' ')
            sub++;
        pp_action_t a;
        if (action_parse(sub, &a) != 0 || !pp_action_is_compute(a.kind)) {
            fprintf(stderr,
                    "%s:%d:%d: cell %d: '%s' inside OVERLAP_F_B is not a compute action "
                    "(allowed: (<action>;<action>)OVERLAP_F_B of F, B, I or W actions)\n",
                    where, place->line, place->col, place->cell, PP_SHORT(sub));
            return PP_ERR_INPUT;
        }
        PP_CHECK(csv_add_action(t, sub, place, where));
        if (parts > 0) t->cells[t->n_cells - 1].a.overlap = 1; /* runs beside the one before */
    }
    if (parts == 0) {
        fprintf(stderr,
                "%s:%d:%d: cell %d: OVERLAP_F_B holds no action (allowed: "
                "(<action>;<action>)OVERLAP_F_B)\n",
                where, place->line, place->col, place->cell);
        return PP_ERR_INPUT;
    }
    return PP_OK;
}

/* Split one line (no newline) into cells and add its actions as row `row`. */
static pp_status_t csv_parse_line(csv_table_t *t, char *line, int lineno, int row,
                                  const char *where)
{
    char *p = line;
    for (int cell = 1;; cell++) {
        char *end = strchr(p, ',');
        if (end) *end = '\0';
        char *b = p;
        while (*b == ' ' || *b == '\t')
            b++;
        char *e = b + strlen(b);
        while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        int col = (int)(b - line) + 1;
        if (e - b >= 2 && b[0] == '"' && e[-1] == '"') {
            *--e = '\0';
            b++;
        }
        csv_cell_t c = {.row = row, .line = lineno, .col = col, .cell = cell};
        size_t ns = strlen(OVERLAP_SUFFIX), n = (size_t)(e - b);
        if (n > ns && b[0] == '(' && strcmp(e - ns, OVERLAP_SUFFIX) == 0)
            PP_CHECK(csv_add_overlap(t, b, &c, where));
        else if (*b && !csv_is_skipped_action(b))
            PP_CHECK(csv_add_action(t, b, &c, where));
        if (!end) break;
        p = end + 1;
    }
    return PP_OK;
}

/* Read every row of f into t. */
static pp_status_t csv_read_table(csv_table_t *t, FILE *f, const char *where)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0;
    pp_status_t st = PP_OK;

    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if ((size_t)len != strlen(line)) {
            fprintf(stderr, "%s:%d:%zu: a NUL byte inside a row (allowed: text cells)\n", where,
                    lineno, strlen(line) + 1);
            st = PP_ERR_INPUT;
            break;
        }
        if (t->n_rows == PP_MAX_DEVICES) {
            /* Only empty trailing rows may follow the last rank a schedule can have. */
            if (strspn(line, " \t,") == (size_t)len) continue;
            fprintf(stderr, "%s:%d:1: more than %d rows (allowed: one row per rank, at most %d)\n",
                    where, lineno, PP_MAX_DEVICES, PP_MAX_DEVICES);
            st = PP_ERR_INPUT;
            break;
        }
        int row = t->n_rows++;
        t->row_line[row] = lineno;
        PP_CHECK_GOTO(csv_parse_line(t, line, lineno, row, where), st, done);
    }
    if (st == PP_OK && ferror(f)) {
        fprintf(stderr, "%s: %s\n", where, strerror(errno));
        st = PP_ERR_INPUT;
    }
done:
    free(line);
    return st;
}

/* The cell read as program step `step` of rank `row` (cells are in reading order). */
static const csv_cell_t *cell_at(const csv_table_t *t, int row, int step)
{
    for (int i = 0; i < t->n_cells; i++)
        if (t->cells[i].row == row && step-- == 0) return &t->cells[i];
    return &t->cells[0];
}

/* Each stage on one rank, every stage somewhere (schedule_place), named by line and cell. */
static pp_status_t csv_place(pp_schedule_t *s, const csv_table_t *t, const char *where)
{
    pp_place_problem_t why;
    pp_status_t st = schedule_place(s, &why);
    if (st != PP_ERR_INPUT) return st;
    if (why.what == PP_PLACE_MISSING) {
        fprintf(stderr,
                "%s: stage %d has no action in any row (allowed: every stage 0..%d in some row)\n",
                where, why.stage, s->n_stages - 1);
        return st;
    }
    const csv_cell_t *c = cell_at(t, why.device, why.step),
                     *first = cell_at(t, why.owner, why.owner_step);
    fprintf(stderr,
            "%s:%d:%d: cell %d: stage %d already runs on rank %d (line %d, cell %d) "
            "(allowed: each stage on one rank)\n",
            where, c->line, c->col, c->cell, why.stage, why.owner, first->line, first->cell);
    return st;
}

pp_status_t schedule_read_csv(pp_schedule_t *s, FILE *f, const char *where)
{
    csv_table_t t;
    pp_status_t st;

    memset(s, 0, sizeof *s);
    memset(&t, 0, sizeof t);
    PP_CHECK_GOTO(csv_read_table(&t, f, where), st, fail);

    /* Rows are ranks: trailing empty rows are a trailing newline, an empty row before a
     * non-empty one is a rank with nothing to do. */
    int n_rows = t.n_rows;
    while (n_rows > 0 && t.row_count[n_rows - 1] == 0)
        n_rows--;
    if (n_rows == 0) {
        fprintf(stderr, "%s: no actions (allowed: one row of actions per rank, cells such as %s)\n",
                where, "0F0,0F1,0B0,0B1");
        st = PP_ERR_INPUT;
        goto fail;
    }
    int max_stage = 0, max_mb = 0;
    for (int r = 0; r < n_rows; r++) {
        if (t.row_count[r] == 0) {
            fprintf(stderr,
                    "%s:%d:1: rank %d has no actions (allowed: at least one action in every row)\n",
                    where, t.row_line[r], r);
            st = PP_ERR_INPUT;
            goto fail;
        }
    }
    for (int i = 0; i < t.n_cells; i++) {
        if (t.cells[i].a.stage > max_stage) max_stage = t.cells[i].a.stage;
        if (t.cells[i].a.mb > max_mb) max_mb = t.cells[i].a.mb;
    }
    PP_CHECK_GOTO(schedule_init(s, n_rows, max_stage + 1, max_mb + 1), st, fail);
    schedule_set_origin(s, where); /* validation names a rank's row by its line */
    for (int r = 0; r < n_rows; r++) {
        s->origin.line[r] = t.row_line[r];
        s->origin.col[r] = 1;
    }
    for (int i = 0; i < t.n_cells; i++) {
        const csv_cell_t *c = &t.cells[i];
        PP_CHECK_GOTO(schedule_push(s, c->row, c->a.kind, c->a.stage, c->a.mb), st, fail);
        if (c->a.overlap) PP_CHECK_GOTO(schedule_mark_overlap(s, c->row), st, fail);
    }
    PP_CHECK_GOTO(csv_place(s, &t, where), st, fail);
    free(t.cells);
    return PP_OK;
fail:
    free(t.cells);
    schedule_free(s);
    return st;
}

pp_status_t schedule_write_csv(const pp_schedule_t *s, FILE *f)
{
    char txt[32];
    for (int d = 0; d < s->n_devices; d++) {
        const pp_program_t *p = &s->prog[d];
        for (int i = 0; i < p->n; i++) {
            if (i) fputc(',', f);
            if (i + 1 < p->n && p->a[i + 1].overlap) { /* a pair, as PyTorch writes it */
                fprintf(f, "(%s;", action_format(&p->a[i], txt, sizeof txt));
                fprintf(f, "%s%s", action_format(&p->a[++i], txt, sizeof txt), OVERLAP_SUFFIX);
                continue;
            }
            fputs(action_format(&p->a[i], txt, sizeof txt), f);
        }
        fputc('\n', f);
    }
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "writing a schedule CSV: %s\n", strerror(errno));
        return PP_ERR_IO;
    }
    return PP_OK;
}

/* Lines of the YAML block stay under this width; a long list continues on indented lines. */
#define YAML_WIDTH 100

pp_status_t schedule_write_yaml(const pp_schedule_t *s, FILE *f)
{
    char txt[32];
    fputs("schedule:\n  steps:\n", f);
    for (int d = 0; d < s->n_devices; d++) {
        const pp_program_t *p = &s->prog[d];
        int col = fprintf(f, "    %d: [", d);
        for (int i = 0; i < p->n; i++) {
            action_format(&p->a[i], txt, sizeof txt);
            int need = (int)strlen(txt) + 3; /* ", ", the action, then "," or "]" */
            if (i) {
                if (col + need > YAML_WIDTH) {
                    fputs(",\n", f);
                    col = fprintf(f, "        ");
                } else {
                    col += fprintf(f, ", ");
                }
            }
            col += fprintf(f, "%s", txt);
        }
        fputs("]\n", f);
    }
    if (fflush(f) != 0 || ferror(f)) {
        fprintf(stderr, "writing a schedule as YAML: %s\n", strerror(errno));
        return PP_ERR_IO;
    }
    return PP_OK;
}
