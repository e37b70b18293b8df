/*
 * support.h — helpers shared by the CPU tests: a seeded random generator, stderr capture and the
 * one-line rejection check, a temporary directory, a config's pipeline section, a schedule built
 * from action lists or by a generator, a device's program against an action list, a comparison
 * of schedules, a plan built by hand (with op times for a timeline), and a profile whose
 * measurements are the model's times times known factors.
 *
 * Rules: one generator state per test program; each test seeds it once in main() with its own
 * seed, so every run draws the same values. Capture does not nest, and the text ts_capture_end
 * returns lives until the next ts_capture_end. One temporary directory per program. A ts_plan_t
 * owns every array of its plan; free it with ts_plan_free. Out of memory in a helper aborts the
 * test program with a message.
 */
#ifndef PP_TEST_SUPPORT_H
#define PP_TEST_SUPPORT_H

#include "config/config.h"
#include "plan/plan.h"
#include "model/profile.h"
#include "plan/schedule.h"
#include "sim/timeline.h"

#include <stddef.h>
#include <stdint.h>

/* ---- seeded random numbers (xorshift64*) ---------------------------------------------------- */

void ts_rng_seed(uint64_t seed);              /* seed 0 is replaced by a fixed nonzero value */
uint64_t ts_rand_u64(void);                   /* the next 64 random bits */
int ts_rand_int(int lo, int hi);              /* uniform in [lo, hi], both included */
double ts_rand_uniform(double lo, double hi); /* uniform in [lo, hi) */

/* ---- stderr capture ------------------------------------------------------------------------- */

/* Send stderr (fd 2) into a temporary file until ts_capture_end, which returns what was written
 * (at most 8191 bytes, NUL-terminated; "" when no temporary file could be made). */
void ts_capture_begin(void);
const char *ts_capture_end(void);

/* ---- a temporary directory ------------------------------------------------------------------ */

/* Makes /tmp/pp_<prog>_XXXXXX for the program's files: 0, or -1 with the reason on stderr.
 * ts_tmpdir_remove deletes it and everything in it. */
int ts_tmpdir_make(const char *prog);
const char *ts_tmpdir(void);
/* <the directory>/name in buf; returns buf. */
const char *ts_tmp_path(char *buf, size_t size, const char *name);
void ts_tmpdir_remove(void);

/* ---- checks and configs --------------------------------------------------------------------- */

/* Input rejected with exactly the one line `want` (a string literal) on stderr, captured in `got`.
 * A macro: it expands to check.h's EXPECT where it is used. */
#define TS_EXPECT_REJECT(st, got, want)                                                            \
    do {                                                                                           \
        EXPECT((st) == PP_ERR_INPUT, "status %s", pp_status_str(st));                              \
        EXPECT(strcmp((got), want "\n") == 0, "\n    got:  %s    want: %s", (got), want "\n");     \
    } while (0)

/* A job of config_defaults' values, nothing resolved (tests fill in what they need). */
void ts_job_defaults(pp_job_t *job);

/* As run_load does after loading: the written schedule built (steps, csv), then the job resolved
 * against n_visible devices (config/resolve.h). *job (zeroed, or a job) is freed first and left
 * empty on failure. */
pp_status_t ts_resolve(pp_job_t *job, const pp_config_t *cfg, int n_visible);

/* `yaml` (named t.yaml) with the overrides, loaded and resolved against n_visible devices into
 * *job, as run_load does; the config is freed. */
pp_status_t ts_load_job(pp_job_t *job, const char *yaml, const char *const *sets, int n_sets,
                        int n_visible);

/* A zeroed job with p devices (ids 0..p-1), `stages` stages (stages / p per device), m
 * micro-batches and the schedule kind; the model and the rest are left for the caller to fill. */
void ts_config_pipeline(pp_job_t *c, pp_sched_kind_t kind, int p, int stages, int m);

/* The offload tests' job: a small fp32 model (2 blocks a device, hidden 64) on p devices, one
 * stage each, m micro-batches of 2 sequences, nccl, hand-set unit costs, a 50 GB/s host link,
 * and run.offload `off`. */
void ts_offload_job(pp_job_t *c, pp_sched_kind_t kind, int p, int m, pp_offload_t off);

/* ---- schedules ------------------------------------------------------------------------------ */

/* Build a schedule from one space-separated action list per device ("0F0 0SEND_F0 ...").
 * place_stages != 0: stage_device[stage] = the device whose program names the stage;
 * place_stages == 0: stage_device is left unset (-1), as for a schedule read from a file.
 * Returns PP_ERR_INTERNAL for an action that does not parse. */
pp_status_t ts_sched_from(pp_schedule_t *s, int n_stages, int n_mb, int n_dev,
                          const char *const *progs, int place_stages);

/* Generates kind for p devices and m micro-batches: gpipe, 1f1b, interleaved (v chunks a device,
 * loop placement), and zb-h1 for any other kind. */
pp_status_t ts_generate(pp_schedule_t *s, pp_sched_kind_t kind, int p, int m, int v);

/* 1 when device d's program is the space-separated action list `want` ("0F0 0F1 0B0"): kind,
 * stage and micro-batch of every action; otherwise 0, with the first difference on stderr. */
int ts_program_is(const pp_schedule_t *s, int d, const char *want);

/* 1 when a and b have the same sizes, stage placement and programs (kind, stage, mb of every
 * action); the has_comm and split_backward flags are not compared. */
int ts_same_schedule(const pp_schedule_t *a, const pp_schedule_t *b);

/* ---- a hand-built plan ---------------------------------------------------------------------- */

/* Ops are appended in plan order, each with its deps; a transfer appends a SEND and its RECV
 * right after it. Stage s starts on device s mod p (a compute op moves its stage to its device),
 * every stage has m activation slots, each op uses slot mb, and pos counts per device. */
typedef struct ts_plan {
    pp_plan_t pl;            /* the plan being built; its arrays belong to the builder */
    pp_op_time_t *t;         /* [pl.n_ops]: times set by ts_plan_time, 0 until set */
    int cap_ops;             /* allocated length of pl.ops and t */
    int cap_deps;            /* allocated length of pl.deps */
    int pos[PP_MAX_DEVICES]; /* next program position per device */
} ts_plan_t;

void ts_plan_init(ts_plan_t *b, int p, int n_stages, int m, pp_sched_kind_t kind);
void ts_plan_free(ts_plan_t *b);

/* Appends an op waiting for deps[0..n_deps); returns its index. */
int ts_plan_op(ts_plan_t *b, int dev, pp_role_t role, pp_action_kind_t kind, int stage, int mb,
               const int *deps, int n_deps);

/* A compute op after dep0 and dep1 (each ignored when < 0); returns its index. */
int ts_plan_compute(ts_plan_t *b, int dev, pp_action_kind_t kind, int stage, int mb, int dep0,
                    int dep1);

/* A SEND of `stage` on src (after op dep, none when < 0) and, right after it, its RECV of
 * `peer_stage` on dst, paired, over `link` with `bytes`. Returns the RECV (SEND = RECV - 1). */
int ts_plan_transfer(ts_plan_t *b, int src, int dst, pp_action_kind_t send_kind, int stage,
                     int peer_stage, int mb, pp_transport_t link, size_t bytes, int dep);

/* Sets op k's times; returns k. */
int ts_plan_time(ts_plan_t *b, int k, double start_ms, double end_ms);

/* A timeline holding the times set on b; step_ms[] = steps[0..n_steps), or the makespan alone
 * when steps is NULL. */
pp_status_t ts_plan_timeline(const ts_plan_t *b, pp_timeline_t *tl, pp_mode_t mode,
                             const double *steps, int n_steps);

/* ---- reading a lowered plan ------------------------------------------------------------------ */

/* Index of op (kind, stage, mb) in the plan, -1 when absent. */
int ts_op_index(const pp_plan_t *pl, pp_action_kind_t k, int stage, int mb);

/* 1 when op i lists op `on` among its dependencies. */
int ts_depends_on(const pp_plan_t *pl, int i, int on);

/* Device d's program as text, "0F0 0SEND_F0 ..." (copies as "0OFFLOAD0"); the text lives until
 * the next call. */
const char *ts_program_text(const pp_plan_t *pl, int d);

/* ---- a generated plan ------------------------------------------------------------------------ */

/* Generates kind (gpipe, 1f1b, interleaved with v chunks, otherwise zb-h1) for p devices and m
 * micro-batches in a loop placement and lowers it with the default config (48 layers, divisible
 * by every stage count the tests use). Returns 0, -1 when the generator refuses the values, -2
 * when the lowering does. */
int ts_make_plan(pp_plan_t *plan, pp_sched_kind_t kind, int p, int m, int v);

/* ---- a profile ------------------------------------------------------------------------------- */

/* A profile of an H200 at the reference shape (6 blocks a stage, 24 in all) whose F, I, W are the
 * model's times (h200 row) times factor[pass][part], with two sends and no steps or pairs. */
void ts_profile_fake(pp_profile_t *p, const double factor[PP_PASS_COUNT][PP_PART_COUNT]);

#endif /* PP_TEST_SUPPORT_H */
