/*
 * kinds.h — the one table of schedule kinds. Each row says what a kind is called (its name and
 * the other spellings accepted in YAML), how its compute-only schedule is built, what it needs of
 * p devices, m micro-batches and v chunks per device (with the message when it does not get it),
 * its closed-form bubble, its default chunks and the stage placements it can build.
 *
 * Config, generate, report and the charts ask this table; nothing else switches on the kind. A new
 * kind is one enum value, one row in kinds.c and its generator (generate.c or a file of its own).
 * The explicit kinds (`steps:`, `csv:`) are rows too, with no generator: the config's reader
 * builds what the user wrote (config/written.c), and they are not values of `schedule.kind`. The
 * kind values themselves (pp_sched_kind_t) live in model/job.h, since the job names its kind.
 */
#ifndef PP_KINDS_H
#define PP_KINDS_H

#include "common/pp_status.h"
#include "model/job.h"
#include "plan/schedule.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif


/* What a precondition check found wrong; the caller blames the matching config key. */
typedef enum pp_kind_problem {
    PP_KIND_OK = 0,
    PP_KIND_BAD_CHUNKS,        /* chunks per device (stages / devices) */
    PP_KIND_BAD_MICRO_BATCHES, /* micro-batches against devices */
    PP_KIND_BAD_PLACEMENT      /* pipeline.placement */
} pp_kind_problem_t;

typedef struct pp_kind_row {
    const char *name;           /* as written in `schedule.kind` and printed in reports */
    const char *const *aliases; /* other accepted spellings, NULL-terminated; NULL for none */
    /* Build the compute-only schedule job asks for into `out` (freed by the caller on failure);
     * NULL for the written kinds. */
    pp_status_t (*generate)(pp_schedule_t *out, const pp_job_t *job);
    /* Preconditions on p, m, v; fills msg ("<name> needs ...") and returns what is wrong, or
     * PP_KIND_OK. NULL: none. */
    pp_kind_problem_t (*check)(const char *name, int p, int m, int v, char *msg, size_t size);
    /* Closed-form bubble, idle / makespan, for uniform stages (m real, for smooth curves). NULL:
     * the kind has none. */
    double (*bubble)(int p, double m, int v);
    int default_chunks;  /* stages per device when neither chunks nor stages is given */
    unsigned placements; /* bit (1u << pp_placement_t) for each placement it can build */
    int written;         /* 1: the user wrote the order (steps, csv); not a schedule.kind value */
} pp_kind_row_t;

/* The row of kind k (k must be a valid kind). */
const pp_kind_row_t *sched_kind(pp_sched_kind_t k);

/* The kind whose name or alias is `name`, among those `schedule.kind` accepts; -1 when none. */
int sched_kind_find(const char *name);

/* The name of kind k ("gpipe", "interleaved-1f1b", "steps", ...); "?" when k is out of range. */
const char *sched_kind_name(pp_sched_kind_t k);

/* "gpipe, 1f1b, ..." : the names `schedule.kind` accepts, for messages. */
void sched_kind_list(char *buf, size_t size);

/* The closed-form bubble of kind k, NAN when it has none or p, m < 1. */
double sched_kind_bubble(pp_sched_kind_t k, int p, double m, int v);

/* The preconditions of kind k on p devices, m micro-batches and v chunks per device (the row's
 * check). Fills msg ("<name> needs ...") and returns what is wrong, or PP_KIND_OK. */
pp_kind_problem_t sched_kind_check(pp_sched_kind_t k, int p, int m, int v, char *msg, size_t size);

/* Whether kind k builds placement pl with v chunks per device (with one chunk every placement is
 * the same). Fills msg and returns PP_KIND_BAD_PLACEMENT when not. */
pp_kind_problem_t sched_kind_check_placement(pp_sched_kind_t k, int v, pp_placement_t pl, char *msg,
                                             size_t size);

#ifdef __cplusplus
}
#endif

#endif /* PP_KINDS_H */
