/*
 * kinds.c — the table of schedule kinds (see kinds.h): one row per kind, in enum order.
 *
 * The closed forms are those of REFERENCE.md (uniform stages, free communication): GPipe and
 * 1F1B (p-1)/(m+p-1), interleaved 1F1B and looped BFS (p-1)/(v*m+p-1), ZB-H1 and ZB-H2
 * (p-1)/(3m+p-1), interleaved zero-bubble, ZB-V and DualPipeV (p-1)/(3vm+p-1) (checked by
 * tests/cpu/test_generate_kinds.c). The precondition messages end in "(allowed: ...)" like every
 * input message; config prefixes them with the place of the key to blame, generate with
 * "schedule". Placement is checked by the resolve step (blaming pipeline.placement) and again
 * when the schedule is generated; a kind that builds v alone gets v when the config does not
 * name a placement.
 */
#include "kinds.h"

#include "generate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- closed forms ---------------------------------------------------------------------------- */

static double bubble_one_f_one_b(int p, double m, int v)
{
    (void)v;
    return (p - 1) / (m + p - 1);
}

static double bubble_interleaved(int p, double m, int v)
{
    return (p - 1) / (v * m + p - 1);
}

static double bubble_zbh1(int p, double m, int v)
{
    (void)v;
    return (p - 1) / (3 * m + p - 1);
}

/* Zero-bubble orders on v chunks per device (ZB-H2 with v = 1, interleaved zero-bubble, ZB-V and
 * DualPipeV with its pairs run one half after the other): 3vm + p - 1 chunk units of F = I = W. */
static double bubble_zb_chunks(int p, double m, int v)
{
    return (p - 1) / (3 * v * m + p - 1);
}

/* ---- preconditions --------------------------------------------------------------------------- */

/* A kind that runs exactly `want` chunks per device (`how`: "one stage per device"); `also`
 * follows the allowed value in the message. */
static pp_kind_problem_t check_chunks_exactly(const char *name, int want, const char *how,
                                              const char *also, int p, int v, char *msg,
                                              size_t size)
{
    if (v == want) return PP_KIND_OK;
    snprintf(msg, size, "%s runs %s, but %d stages on %d %s make %d chunks (allowed: chunks %d%s)",
             name, how, p * v, p, pp_plural(p, "device", "devices"), v, want, also);
    return PP_KIND_BAD_CHUNKS;
}

/* The interleaved orders: at least two chunks per device. */
static pp_kind_problem_t check_several_chunks(const char *name, int p, int v, char *msg,
                                              size_t size)
{
    if (v >= 2) return PP_KIND_OK;
    snprintf(msg, size,
             "%s needs at least 2 chunks per device, but %d %s on %d %s make%s %d "
             "(allowed: chunks 2 or more)",
             name, p * v, pp_plural(p * v, "stage", "stages"), p, pp_plural(p, "device", "devices"),
             p * v == 1 ? "s" : "", v);
    return PP_KIND_BAD_CHUNKS;
}

/* GPipe: one stage per device. */
static pp_kind_problem_t check_one_stage(const char *name, int p, int m, int v, char *msg,
                                         size_t size)
{
    return check_chunks_exactly(name, 1, "one stage per device", "; interleaved-1f1b runs several",
                                p, v, msg, size);
}

/* 1F1B and ZB-H1: one stage per device and at least one micro-batch per device. */
static pp_kind_problem_t check_one_stage_m_ge_p(const char *name, int p, int m, int v, char *msg,
                                                size_t size)
{
    pp_kind_problem_t k = check_one_stage(name, p, m, v, msg, size);
    if (k != PP_KIND_OK || m >= p) return k;
    snprintf(msg, size,
             "%s needs at least as many micro-batches as devices: %d < %d (allowed: %d or more)",
             name, m, p, p);
    return PP_KIND_BAD_MICRO_BATCHES;
}

/* Interleaved 1F1B: several chunks, and micro-batches in groups of one per device. */
static pp_kind_problem_t check_interleaved(const char *name, int p, int m, int v, char *msg,
                                           size_t size)
{
    pp_kind_problem_t k = check_several_chunks(name, p, v, msg, size);
    if (k != PP_KIND_OK || m % p == 0) return k;
    snprintf(msg, size,
             "%s needs micro-batches in multiples of the device count: %d is not a multiple "
             "of %d (allowed: a multiple of %d)",
             name, m, p, p);
    return PP_KIND_BAD_MICRO_BATCHES;
}

/* ZB-V: two chunks per device, in a V. */
static pp_kind_problem_t check_two_chunks(const char *name, int p, int m, int v, char *msg,
                                          size_t size)
{
    return check_chunks_exactly(name, 2, "two chunks per device in a V", "", p, v, msg, size);
}

/* DualPipeV: two chunks per device and at least one micro-batch per stage. */
static pp_kind_problem_t check_dualpipev(const char *name, int p, int m, int v, char *msg,
                                         size_t size)
{
    pp_kind_problem_t k = check_two_chunks(name, p, m, v, msg, size);
    if (k != PP_KIND_OK || m >= 2 * p) return k;
    snprintf(msg, size,
             "%s needs at least as many micro-batches as stages: %d < %d (allowed: %d or more)",
             name, m, 2 * p, 2 * p);
    return PP_KIND_BAD_MICRO_BATCHES;
}

/* Interleaved zero-bubble: several chunks, and rounds of max(1, m / p) micro-batches that divide
 * m (PyTorch's rule for its interleaved schedules). */
static pp_kind_problem_t check_interleaved_zb(const char *name, int p, int m, int v, char *msg,
                                              size_t size)
{
    int rounds = m / p > 1 ? m / p : 1;
    pp_kind_problem_t k = check_several_chunks(name, p, v, msg, size);
    if (k != PP_KIND_OK || m % rounds == 0) return k;
    snprintf(msg, size,
             "%s runs micro-batches in %d rounds (micro-batches / devices), which do not divide "
             "%d (allowed: a multiple of %d, or fewer than %d)",
             name, rounds, m, p, 2 * p);
    return PP_KIND_BAD_MICRO_BATCHES;
}

/* ---- the table ------------------------------------------------------------------------------- */

#define LOOP (1u << PP_PLACEMENT_LOOP)
#define VEE  (1u << PP_PLACEMENT_V)
#define ANY  ((1u << PP_PLACEMENT_LOOP) | (1u << PP_PLACEMENT_V))

/* Aliases include PyTorch pipelining's schedule names (get_schedule_class). */
static const char *const gpipe_aliases[] = {"GPipe", NULL};
static const char *const one_f_one_b_aliases[] = {"1F1B", NULL};
static const char *const interleaved_aliases[] = {"interleaved", "Interleaved1F1B", NULL};
static const char *const zbv_aliases[] = {"zbv", "ZBVZeroBubble", NULL};
static const char *const dualpipev_aliases[] = {"dualpipev", "DualPipeV", NULL};
static const char *const looped_bfs_aliases[] = {"LoopedBFS", NULL};
static const char *const interleaved_zb_aliases[] = {"InterleavedZeroBubble", "zb1p", NULL};

/* clang-format off */
static const pp_kind_row_t kinds[PP_SCHED_KIND_COUNT] = {
    [PP_SCHED_GPIPE] = {"gpipe", gpipe_aliases, generate_cfg_gpipe, check_one_stage,
                        bubble_one_f_one_b, 1, ANY, 0},
    [PP_SCHED_1F1B] = {"1f1b", one_f_one_b_aliases, generate_cfg_1f1b, check_one_stage_m_ge_p,
                       bubble_one_f_one_b, 1, ANY, 0},
    [PP_SCHED_INTERLEAVED] = {"interleaved-1f1b", interleaved_aliases, generate_cfg_interleaved,
                              check_interleaved, bubble_interleaved, 2, LOOP, 0},
    [PP_SCHED_ZBH1] = {"zb-h1", NULL, generate_cfg_zbh1, check_one_stage_m_ge_p, bubble_zbh1, 1,
                       ANY, 0},
    [PP_SCHED_ZBH2] = {"zb-h2", NULL, generate_cfg_zbh2, check_one_stage, bubble_zb_chunks, 1,
                       ANY, 0},
    [PP_SCHED_ZBV] = {"zb-v", zbv_aliases, generate_cfg_zbv, check_two_chunks, bubble_zb_chunks,
                      2, VEE, 0},
    [PP_SCHED_DUALPIPEV] = {"dualpipe-v", dualpipev_aliases, generate_cfg_dualpipev,
                            check_dualpipev, bubble_zb_chunks, 2, VEE, 0},
    [PP_SCHED_LOOPED_BFS] = {"looped-bfs", looped_bfs_aliases, generate_cfg_looped_bfs, NULL,
                             bubble_interleaved, 2, LOOP, 0},
    [PP_SCHED_INTERLEAVED_ZB] = {"interleaved-zb", interleaved_zb_aliases,
                                 generate_cfg_interleaved_zb, check_interleaved_zb,
                                 bubble_zb_chunks, 2, LOOP, 0},
    [PP_SCHED_AUTO] = {"auto", NULL, generate_cfg_auto, check_one_stage, NULL, 1, ANY, 0},
    [PP_SCHED_STEPS] = {"steps", NULL, NULL, NULL, NULL, 1, ANY, 1},
    [PP_SCHED_CSV] = {"csv", NULL, NULL, NULL, NULL, 1, ANY, 1},
};
/* clang-format on */

static const pp_kind_row_t unknown = {"?", NULL, NULL, NULL, NULL, 1, 0, 1};

const pp_kind_row_t *sched_kind(pp_sched_kind_t k)
{
    return (int)k >= 0 && k < PP_SCHED_KIND_COUNT ? &kinds[k] : &unknown;
}

const char *sched_kind_name(pp_sched_kind_t k)
{
    return sched_kind(k)->name;
}

int sched_kind_find(const char *name)
{
    for (int k = 0; k < PP_SCHED_KIND_COUNT; k++) {
        if (kinds[k].written) continue;
        if (!strcmp(kinds[k].name, name)) return k;
        for (const char *const *a = kinds[k].aliases; a && *a; a++)
            if (!strcmp(*a, name)) return k;
    }
    return -1;
}

void sched_kind_list(char *buf, size_t size)
{
    buf[0] = '\0';
    for (int k = 0; k < PP_SCHED_KIND_COUNT; k++) {
        if (kinds[k].written) continue;
        if (buf[0]) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, kinds[k].name, size - strlen(buf) - 1);
    }
}

double sched_kind_bubble(pp_sched_kind_t k, int p, double m, int v)
{
    const pp_kind_row_t *r = sched_kind(k);
    if (!r->bubble || p < 1 || m < 1) return NAN;
    return r->bubble(p, m, v < 1 ? 1 : v);
}

pp_kind_problem_t sched_kind_check(pp_sched_kind_t k, int p, int m, int v, char *msg, size_t size)
{
    const pp_kind_row_t *r = sched_kind(k);
    return r->check ? r->check(r->name, p, m, v, msg, size) : PP_KIND_OK;
}

pp_kind_problem_t sched_kind_check_placement(pp_sched_kind_t k, int v, pp_placement_t pl, char *msg,
                                             size_t size)
{
    const pp_kind_row_t *r = sched_kind(k);
    if (v > 1 && !(r->placements & (1u << pl))) {
        int v_only = !(r->placements & LOOP);
        snprintf(msg, size,
                 "%s: placement %s is not supported (the order is built for %s) (allowed: "
                 "placement %s, or the order written under schedule.steps)",
                 r->name, pl == PP_PLACEMENT_V ? "v" : "loop",
                 v_only ? "V placement, device d holding stages d and 2p-1-d"
                        : "loop placement, stage s on device s mod p",
                 v_only ? "v" : "loop");
        return PP_KIND_BAD_PLACEMENT;
    }
    return PP_KIND_OK;
}
