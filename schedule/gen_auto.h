/*
 * gen_auto.h — the parts of the `auto` kind (generate.h's generate_auto) that its two files
 * share: gen_auto.c builds the candidate order of one row of its variants table, gen_auto_pick.c
 * builds, ranks and keeps the best of them, on a few threads. A row's build reads only the costs
 * and writes only its own candidate, so rows run at once without locks.
 */
#ifndef PP_GEN_AUTO_H
#define PP_GEN_AUTO_H

#include "generate.h"
#include "plan/schedule.h"

#define AUTO_ROWS 8 /* rows of gen_auto.c's variants table */

/* Where a candidate stands while the rows are built and ranked. */
typedef enum auto_state_kind {
    AUTO_TODO,    /* waiting for its turn */
    AUTO_RUNNING, /* a thread builds or scores it */
    AUTO_BUILT,   /* its order is built, not yet scored */
    AUTO_SCORED,  /* score is known */
    AUTO_DROPPED, /* provably not the choice: not scored (gen_auto_pick.c says why) */
} auto_state_kind_t;

/* One row's candidate. */
typedef struct pp_auto_cand {
    pp_schedule_t order; /* its order; empty once dropped */
    double span;         /* the greedy's own makespan of it: no more than its simulated step */
    double score;        /* its simulated step (the span without a config) */
    int limit_used;      /* 1 when the limit_w rule made a choice in it */
    auto_state_kind_t state;
} pp_auto_cand_t;

/* Build row `row`'s order into k->order, with k->span and k->limit_used (k->order is empty on
 * failure). */
pp_status_t auto_build(pp_auto_cand_t *k, int row, int p, int m, const pp_auto_costs_t *c);

/* The earlier row that differs from row v only by limit_w on, or -1. When that row's run never
 * used the rule, row v builds the very same order (every choice was made without it), so it
 * would score the same and cannot win: it is not built. */
int auto_twin(int v);

#endif /* PP_GEN_AUTO_H */
