/*
 * test_planner.c — `ppsched plan`'s search (planner.h) on a small model without a GPU: the winner
 * is never beaten by any candidate this test enumerates itself (every generated kind of the
 * table, chunks 1..8, both placements, every micro-batch size of the batch, through run_load and
 * run_predict); every candidate written with plan_write_yaml loads, validates and predicts the
 * same step, and the best of every kind reports under `--simulate` the very figures the search
 * gave it (step, tokens/s, bubble overall and per device, memory); a memory limit below every
 * candidate's need gives "nothing fits" naming the closest;
 * refusals are counted by reason; the Pareto front only grows in memory and speed; --verify runs
 * the best through the chain with a stand-in executor and re-ranks them by its "measurement".
 * The search counts AdamW's state unless told otherwise and says so, notes a wide model on the
 * default vocabulary, stops at its budget counting what it left (the largest plans), frees
 * the file it read when the file is bad, and widens its table for a long label (the shipped
 * 13B-class file on 8 GPUs).
 */
#include "tests/check.h"
#include "model/cost.h"
#include "sim/cost_model.h"
#include "run/planner.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char yaml_path[64];

static const char *yaml_text = "model: {layers: 8, hidden: 64, heads: 4, seq_len: 32, vocab: 128}\n"
                               "pipeline: {devices: 4, micro_batches: 8, micro_batch_size: 2}\n"
                               "schedule: {kind: 1f1b}\n";

static void write_yaml(void)
{
    snprintf(yaml_path, sizeof yaml_path, "/tmp/test_planner_XXXXXX");
    int fd = mkstemp(yaml_path);
    if (fd < 0 || write(fd, yaml_text, strlen(yaml_text)) != (ssize_t)strlen(yaml_text)) abort();
    close(fd);
}

static const char *const wide[] = {"model.hidden=1024", "model.seq_len=1024", "model.heads=16"};
static int n_wide; /* 3: the queries and the test's own candidates use the wider model */

static pp_plan_query_t query(int gpus, long seqs, double memory_gib)
{
    pp_plan_query_t q = {.path = yaml_path,
                         .sets = wide,
                         .n_sets = n_wide,
                         .gpus = gpus,
                         .global_batch = seqs,
                         .memory_gib = memory_gib};
    return q;
}

/* Predict one combination the test makes itself; 0 when the chain refuses it. */
static int predict_own(int p, const char *kind, int v, const char *place, const char *split, int m,
                       int b, double *step, double *peak)
{
    char s[7][64];
    const char *sets[11];
    int n = 0;
    for (int k = 0; k < n_wide; k++)
        sets[n++] = wide[k];
    snprintf(s[0], 64, "schedule.kind=%s", kind);
    snprintf(s[1], 64, "pipeline.devices=%d", p);
    snprintf(s[2], 64, "pipeline.chunks=%d", v);
    snprintf(s[3], 64, "pipeline.placement=%s", place);
    snprintf(s[4], 64, "pipeline.micro_batches=%d", m);
    snprintf(s[5], 64, "pipeline.micro_batch_size=%d", b);
    snprintf(s[6], 64, "pipeline.split=%s", split);
    for (int k = 0; k < 7; k++)
        sets[n++] = s[k];
    sets[n++] = "run.optimizer=adamw"; /* what the search counts by default */
    pp_run_t r;
    ts_capture_begin();
    pp_status_t st = run_load(&r, yaml_path, NULL, sets, n, -1);
    if (st == PP_OK) st = run_predict(&r, NULL);
    ts_capture_end();
    if (st == PP_OK) {
        *step = r.predicted_ms;
        *peak = r.mem.dev[r.mem.fullest].total;
    }
    run_free(&r);
    return st == PP_OK;
}

static void check_never_beaten(int p, long seqs, double memory_gib)
{
    pp_search_t s;
    pp_plan_query_t q = query(p, seqs, memory_gib);
    REQUIRE(plan_search(&s, &q) == PP_OK);
    REQUIRE(s.n_fit > 0, "p %d seqs %ld", p, seqs);
    const pp_candidate_t *best = &s.c[0];
    int own = 0;
    for (int k = 0; k < PP_SCHED_KIND_COUNT; k++) {
        if (sched_kind((pp_sched_kind_t)k)->written) continue;
        for (int v = 1; v <= 8; v++)
            for (int pl = 0; pl < 4; pl++)
                for (long b = 1; b <= seqs; b++) {
                    double step, peak;
                    if (seqs % b ||
                        !predict_own(p, sched_kind_name((pp_sched_kind_t)k), v,
                                     pl % 2 ? "v" : "loop", pl / 2 ? "balanced" : "even",
                                     (int)(seqs / b), (int)b, &step, &peak))
                        continue;
                    own++;
                    if (peak > s.limit_bytes) continue;
                    EXPECT(step >= best->step_ms * (1 - 1e-6),
                           "p %d: %s v %d %s %s m %ld b %ld: %.4f < %.4f", p,
                           sched_kind_name((pp_sched_kind_t)k), v, pl % 2 ? "v" : "loop",
                           pl / 2 ? "balanced" : "even", seqs / b, b, step, best->step_ms);
                }
    }
    int one = 0; /* the search's candidates of one replica: the test makes those */
    for (int i = 0; i < s.n; i++)
        one += s.c[i].d == 1;
    EXPECT(own >= one, "the test made %d candidates, the search %d", own, one);
    for (int i = 1; i < s.n_fit; i++)
        EXPECT(s.c[i].step_ms >= s.c[i - 1].step_ms * (1 - 1e-6), "rank %d", i + 1);
    plan_search_free(&s);
}

static void test_winner_never_beaten(void)
{
    check_never_beaten(4, 16, 0);
    check_never_beaten(2, 12, 0);
    n_wide = 3; /* 1.2 to 3.1 GiB: a limit of 2 GiB keeps some and refuses others */
    pp_search_t s;
    pp_plan_query_t q = query(4, 16, 2.0);
    REQUIRE(plan_search(&s, &q) == PP_OK);
    EXPECT(s.n_fit > 0 && s.n_fit < s.n, "%d of %d fit", s.n_fit, s.n);
    plan_search_free(&s);
    check_never_beaten(4, 16, 2.0);
    n_wide = 0;
}

/* Every candidate as a schedule file: loads, validates, and predicts the step the search did. */
static void test_emitted_yaml_validates(void)
{
    pp_search_t s;
    pp_plan_query_t q = query(4, 16, 0);
    REQUIRE(plan_search(&s, &q) == PP_OK);
    char out[64];
    snprintf(out, sizeof out, "/tmp/test_planner_emit_XXXXXX");
    int fd = mkstemp(out);
    REQUIRE(fd >= 0);
    close(fd);
    for (int i = 0; i < s.n; i++) {
        const pp_candidate_t *c = &s.c[i];
        REQUIRE(plan_write_yaml(&s, c, out) == PP_OK);
        pp_run_t r;
        pp_status_t st = run_load(&r, out, NULL, NULL, 0, -1);
        EXPECT(st == PP_OK, "%s", c->label);
        if (st == PP_OK) st = run_predict(&r, NULL);
        if (st == PP_OK) {
            EXPECT(r.job.kind == c->kind && r.plan.n_mb == c->m &&
                       r.job.pipeline.micro_batch_size == c->mbs && r.plan.chunks == c->v,
                   "%s", c->label);
            EXPECT(fabs(r.predicted_ms - c->step_ms) < 1e-9, "%s: %.6f vs %.6f", c->label,
                   r.predicted_ms, c->step_ms);
        }
        run_free(&r);
    }
    unlink(out);
    plan_search_free(&s);
}

/* The report `ppsched FILE --simulate` prints for `path`: run_load without a GPU, run_go
 * simulating. */
static pp_status_t simulate_file(pp_run_t *r, const char *path)
{
    pp_run_opts_t ro = {.measure = 0};
    pp_status_t st = run_load(r, path, NULL, NULL, 0, 0);
    return st == PP_OK ? run_go(r, &ro) : st;
}

/* Candidate c against the report of its emitted file: every figure the planner prints, bit for
 * bit, from the report the search read them off. */
static void check_figures(const pp_candidate_t *c, const pp_run_t *r)
{
    const pp_report_t *rep = &r->report;
    double busiest = 0, sent = 0, act = 0;
    for (int d = 0; d < rep->devices; d++) {
        busiest = fmax(busiest, rep->per_device[d].busy_ms);
        sent += rep->per_device[d].bytes_sent;
        act = fmax(act, rep->per_device[d].act_mb_equiv);
    }
    EXPECT(rep->step_ms == c->step_ms, "%s: step %.17g vs %.17g", c->label, rep->step_ms,
           c->step_ms);
    EXPECT(rep->tokens_per_s == c->tokens_per_s, "%s: tokens/s %.17g vs %.17g", c->label,
           rep->tokens_per_s, c->tokens_per_s);
    EXPECT(rep->bubble == c->bubble, "%s: bubble %.17g vs %.17g", c->label, rep->bubble, c->bubble);
    EXPECT(busiest == c->compute_ms, "%s: busiest device %.17g vs %.17g ms", c->label, busiest,
           c->compute_ms);
    EXPECT(r->mem.fullest == c->fullest &&
               (double)rep->per_device[c->fullest].peak_mem_bytes == c->peak_bytes,
           "%s: peak %zu on %d vs %.17g on %d", c->label,
           rep->per_device[r->mem.fullest].peak_mem_bytes, r->mem.fullest, c->peak_bytes,
           c->fullest);
    EXPECT(sent == c->sent_bytes && act == c->mb_equiv, "%s: sent %.17g vs %.17g, act %g vs %g",
           c->label, sent, c->sent_bytes, act, c->mb_equiv);
}

/* Two reports of one plan, device by device. */
static void check_devices(const char *label, const pp_report_t *a, const pp_report_t *b)
{
    REQUIRE(a->devices == b->devices, "%s: %d vs %d devices", label, a->devices, b->devices);
    for (int d = 0; d < a->devices; d++) {
        const pp_device_stats_t *x = &a->per_device[d], *y = &b->per_device[d];
        EXPECT(x->busy_ms == y->busy_ms && x->idle_ms == y->idle_ms && x->bubble == y->bubble,
               "%s: device %d: bubble %.17g vs %.17g", label, d, x->bubble, y->bubble);
        EXPECT(x->peak_mem_bytes == y->peak_mem_bytes, "%s: device %d: peak %zu vs %zu", label, d,
               x->peak_mem_bytes, y->peak_mem_bytes);
    }
}

/* The best candidate of every generated kind of a search on p devices and seqs sequences (the
 * test's file with `sets`): its figures, and its report device by device, are those of the file
 * plan_write_yaml writes for it, run as `ppsched FILE --simulate` runs it. every_kind: a kind
 * without a candidate is a failure. */
static void check_same_as_simulate(int p, long seqs, const char *const *sets, int n_sets,
                                   int every_kind)
{
    pp_search_t s;
    pp_plan_query_t q = {
        .path = yaml_path, .sets = sets, .n_sets = n_sets, .gpus = p, .global_batch = seqs};
    ts_capture_begin(); /* the candidates the chain refuses say why */
    pp_status_t found = plan_search(&s, &q);
    ts_capture_end();
    REQUIRE(found == PP_OK);
    char out[64];
    snprintf(out, sizeof out, "/tmp/test_planner_sim_XXXXXX");
    int fd = mkstemp(out);
    REQUIRE(fd >= 0);
    close(fd);
    for (int k = 0; k < PP_SCHED_KIND_COUNT; k++) {
        if (sched_kind((pp_sched_kind_t)k)->written) continue;
        int i = 0;
        while (i < s.n && s.c[i].kind != (pp_sched_kind_t)k)
            i++;
        EXPECT(i < s.n || !every_kind, "p %d: no candidate of %s", p,
               sched_kind_name((pp_sched_kind_t)k));
        if (i == s.n) continue;
        const pp_candidate_t *c = &s.c[i];
        pp_candidate_t again = *c;
        pp_run_t planned, simulated;
        REQUIRE(plan_write_yaml(&s, c, out) == PP_OK);
        pp_status_t st = plan_candidate_load(&planned, &s, &q, c, -1);
        if (st == PP_OK) st = plan_candidate_predict(&planned, &again);
        pp_status_t st_sim = simulate_file(&simulated, out);
        EXPECT(st == PP_OK && st_sim == PP_OK, "%s", c->label);
        if (st == PP_OK && st_sim == PP_OK) {
            check_figures(c, &simulated);
            check_figures(&again, &simulated);
            check_devices(c->label, &planned.report, &simulated.report);
        }
        run_free(&planned);
        run_free(&simulated);
    }
    unlink(out);
    plan_search_free(&s);
}

/* `plan`'s figures are `--simulate`'s for every kind: the cost model's costs (DualPipeV's pairs
 * overlapped by the GPU description's fraction, where a sum of the ops' durations would count the
 * overlapped compute twice), on 4 and 2 devices; hand-set costs with a larger overlap (the emitted
 * file must carry cost.overlap); a split listed by model.layers_per_stage (the emitted file must
 * carry it; only one chunk per device fits its four entries). */
static void test_same_as_simulate(void)
{
    const char *const hand[] = {"cost.forward=1.0", "cost.backward_input=1.1",
                                "cost.backward_weight=0.9", "cost.send=0.05", "cost.overlap=0.5"};
    const char *const listed[] = {"model.layers_per_stage=[1,3,2,2]"};
    check_same_as_simulate(4, 16, wide, 3, 1);
    check_same_as_simulate(2, 12, wide, 3, 1);
    check_same_as_simulate(4, 16, hand, 5, 1);
    check_same_as_simulate(4, 16, listed, 1, 0);
}

static void test_nothing_fits(void)
{
    pp_search_t s;
    pp_plan_query_t q = query(4, 16, 1e-6);
    REQUIRE(plan_search(&s, &q) == PP_OK);
    EXPECT(s.n > 0 && s.n_fit == 0);
    double least = 1e300;
    for (int i = 0; i < s.n; i++)
        least = fmin(least, s.c[i].peak_bytes);
    REQUIRE(s.n > 0);
    EXPECT(s.c[0].peak_bytes == least, "the closest comes first");
    ts_capture_begin();
    EXPECT(plan_print_nothing_fits(&s, stderr) == 1);
    const char *got = ts_capture_end();
    char want[256];
    snprintf(want, sizeof want, "plan: nothing fits in 0.0 GiB per GPU: the closest is %s, which",
             s.c[0].label);
    EXPECT(strncmp(got, want, strlen(want)) == 0, "\n    got:  %s    want: %s", got, want);
    plan_search_free(&s);
}

/* 8 layers on 3 devices split evenly into no stage count: every even candidate is refused for
 * layers, and only balanced splits (3 3 2 and the like) are searched. */
static void test_skips_counted(void)
{
    pp_search_t s;
    pp_plan_query_t q = query(3, 6, 0);
    ts_capture_begin();
    pp_status_t st = plan_search(&s, &q);
    ts_capture_end();
    REQUIRE(st == PP_OK);
    EXPECT(s.n > 0 && s.skipped[PP_SKIP_LAYERS] > 0, "n %d, layers %d", s.n,
           s.skipped[PP_SKIP_LAYERS]);
    for (int i = 0; i < s.n; i++) /* one pipeline of 3 devices (d = 3 is a pipeline of 1) */
        EXPECT(s.c[i].d > 1 ||
                   (s.c[i].split == PP_SPLIT_BALANCED && strstr(s.c[i].label, " balanced")),
               "%s", s.c[i].label);
    plan_search_free(&s);
    q = query(4, 6, 0); /* m = 6, 3, 2, 1: interleaved needs a multiple of 4 */
    REQUIRE(plan_search(&s, &q) == PP_OK);
    EXPECT(s.skipped[PP_SKIP_MICRO_BATCHES] > 0 && s.skipped[PP_SKIP_CHUNKS] > 0);
    plan_search_free(&s);
}

static void test_pareto(void)
{
    pp_search_t s;
    pp_plan_query_t q = query(4, 32, 0);
    REQUIRE(plan_search(&s, &q) == PP_OK);
    int idx[64], n = plan_search_pareto(&s, idx, 64);
    EXPECT(n >= 1 && idx[n - 1] == 0, "the front ends at the best");
    for (int i = 1; i < n; i++)
        EXPECT(s.c[idx[i]].peak_bytes >= s.c[idx[i - 1]].peak_bytes &&
                   s.c[idx[i]].step_ms < s.c[idx[i - 1]].step_ms,
               "front %d", i);
    for (int j = 0; j < s.n_fit; j++) /* nothing off the front beats a point on both */
        for (int i = 0; i < n; i++)
            EXPECT(!(s.c[j].peak_bytes < s.c[idx[i]].peak_bytes &&
                     s.c[j].step_ms < s.c[idx[i]].step_ms),
                   "%s dominates %s", s.c[j].label, s.c[idx[i]].label);
    plan_search_free(&s);
}

/* A stand-in executor: the model's costs, slower by 1% per micro-batch of the step, so that the
 * measurement re-ranks what the prediction ranked. */
static pp_status_t fake_exec(pp_timeline_t *tl, pp_exec_result_t *res, const pp_plan_t *plan,
                             const pp_job_t *cfg, const pp_exec_opts_t *opts)
{
    pp_cost_model_t cm;
    PP_CHECK(cost_model_build(&cm, cfg, plan, NULL, NULL, NULL));
    for (int k = 0; k < plan->n_stages; k++) {
        double x = 1 + 0.01 * plan->n_mb;
        cm.f[k] *= x;
        cm.b[k] *= x;
        cm.i[k] *= x;
        cm.w[k] *= x;
    }
    pp_status_t st = simulate_plan(tl, plan, &cm);
    cost_model_free(&cm);
    PP_CHECK(st);
    tl->mode = PP_MODE_MEASURE;
    tl->has_op_times = 1;
    memset(res, 0, sizeof *res);
    return PP_OK;
}

/* --verify through the chain: the best k that fit run, sorted by the measured step; the
 * prediction beside each is the search's. */
static void test_verify(void)
{
    pp_search_t s;
    pp_plan_query_t q = query(4, 16, 0);
    REQUIRE(plan_search(&s, &q) == PP_OK);
    pp_run_opts_t ro = {.measure = 1, .exec = fake_exec};
    pp_verified_t v[5];
    int n = 0, one = 0, *seen = calloc((size_t)s.n + 1, sizeof *seen);
    REQUIRE(seen && plan_verify(&s, &q, 5, 4, &ro, v, &n) == PP_OK);
    for (int i = 0; i < s.n_fit; i++) /* the executor runs one replica: those of d > 1 wait */
        one += s.c[i].d == 1;
    EXPECT(n == (one < 5 ? one : 5), "%d ran", n);
    for (int i = 0; i < n; i++) {
        REQUIRE(v[i].rank >= 1 && v[i].rank <= s.n_fit && !seen[v[i].rank], "rank %d", v[i].rank);
        EXPECT(s.c[v[i].rank - 1].d == 1, "rank %d", v[i].rank);
        seen[v[i].rank] = 1;
        const pp_candidate_t *c = &s.c[v[i].rank - 1];
        EXPECT(fabs(v[i].predicted_ms - c->step_ms) < 1e-9, "%s", c->label);
        EXPECT(v[i].measured_ms > c->step_ms, "%s: %.4f", c->label, v[i].measured_ms);
        EXPECT(i == 0 || v[i].measured_ms >= v[i - 1].measured_ms, "order at %d", i);
    }
    free(seen);
    plan_search_free(&s);
}

/* The plan's table (or JSON) as text. */
static char *printed(const pp_search_t *s, int json)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) abort();
    pp_status_t st = json ? plan_print_json(s, 3, f) : plan_print_table(s, 3, f);
    fclose(f);
    EXPECT(st == PP_OK);
    return buf;
}

/* AdamW's state counts unless the query says none, whatever run.optimizer the file has; the
 * header and the JSON say which. A --set of run.optimizer is refused. */
static void test_optimizer_counted(void)
{
    pp_search_t a, n;
    pp_plan_query_t q = query(4, 16, 0);
    REQUIRE(plan_search(&a, &q) == PP_OK);
    q.optimizer = "none";
    REQUIRE(plan_search(&n, &q) == PP_OK);
    EXPECT(a.base.run.optimizer == PP_OPT_ADAMW && n.base.run.optimizer == PP_OPT_NONE);
    int zero1 = 0; /* AdamW's state sharded: candidates only with the optimizer */
    for (int i = 0; i < a.n; i++)
        zero1 += a.c[i].zero1;
    REQUIRE(a.n - zero1 == n.n && a.n > 0 && zero1 > 0);
    int same = 0;
    for (int i = 0; i < a.n; i++)
        for (int j = 0; j < n.n; j++)
            if (strcmp(a.c[i].label, n.c[j].label) == 0) {
                same++;
                EXPECT(a.c[i].peak_bytes > n.c[j].peak_bytes, "%s: %.0f vs %.0f", a.c[i].label,
                       a.c[i].peak_bytes, n.c[j].peak_bytes);
            }
    EXPECT(same == a.n - zero1, "%d of %d labels in both", same, a.n - zero1);
    char *t = printed(&a, 0), *j = printed(&a, 1), *tn = printed(&n, 0);
    EXPECT(strstr(t, "\n# optimizer: adamw, its state counted in each GPU's memory (the default; "
                     "--optimizer none leaves it out)\n"),
           "%s", t);
    EXPECT(strstr(j, "\"optimizer\":\"adamw\""), "%s", j);
    EXPECT(strstr(tn, "\n# optimizer: none, no optimizer state counted (--optimizer)\n"), "%s", tn);
    free(t);
    free(j);
    free(tn);
    plan_search_free(&a);
    plan_search_free(&n);
    const char *const sets[] = {"run.optimizer=none"};
    pp_plan_query_t bad = {
        .path = yaml_path, .sets = sets, .n_sets = 1, .gpus = 4, .global_batch = 16};
    ts_capture_begin();
    EXPECT(plan_search(&a, &bad) == PP_ERR_INPUT);
    EXPECT(strstr(ts_capture_end(), "--set run.optimizer=none: plan counts the optimizer of "
                                    "--optimizer"));
    plan_search_free(&a);
}

/* A 7B-wide model on the default vocabulary (the test's file has 128) says so in the header; its
 * own vocabulary, or a narrow model, does not. */
static void test_vocab_note(void)
{
    const char *const big[] = {"model.hidden=4096", "model.heads=32", "model.seq_len=64",
                               "model.vocab=8192"};
    const char *const own[] = {"model.hidden=4096", "model.heads=32", "model.seq_len=64",
                               "model.vocab=32000"};
    const char *const small[] = {"model.vocab=8192"};
    struct {
        const char *const *sets;
        int n, note;
    } cases[] = {{big, 4, 1}, {own, 4, 0}, {small, 1, 0}};
    for (int k = 0; k < 3; k++) {
        pp_search_t s;
        pp_plan_query_t q = {.path = yaml_path,
                             .sets = cases[k].sets,
                             .n_sets = cases[k].n,
                             .gpus = 2,
                             .global_batch = 4};
        REQUIRE(plan_search(&s, &q) == PP_OK);
        char *t = printed(&s, 0);
        EXPECT(!strstr(t, "(the default; set model.vocab)") == !cases[k].note, "case %d:\n%s", k,
               t);
        if (cases[k].note) EXPECT(strstr(t, ", vocab 8192 (the default; set model.vocab), bf16\n"));
        free(t);
        plan_search_free(&s);
    }
}

/* The 13B-class file on 8 GPUs: labels longer than the schedule column's 36 (a balanced split)
 * widen it, so every row's last column starts where the header's does. */
static void test_long_labels_aligned(void)
{
    pp_search_t s;
    pp_plan_query_t q = {.path = "schedules/13b-1f1b.yaml", .gpus = 8};
    REQUIRE(plan_search(&s, &q) == PP_OK);
    int longest = 0;
    for (int i = 0; i < 8 && i < s.n; i++)
        if ((int)strlen(s.c[i].label) > longest) longest = (int)strlen(s.c[i].label);
    EXPECT(longest > 36, "the 8 shown have labels of %d at most", longest);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    REQUIRE(f);
    EXPECT(plan_print_table(&s, 8, f) == PP_OK);
    fclose(f);
    int col = -1, rows = 0;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || !strstr(line, "  ")) continue;
        char *last = strrchr(line, ' ');
        if (last == line + strlen(line) - 1) continue; /* the units row ends in spaces */
        int at = (int)(last - line);
        if (col < 0) col = at;
        EXPECT(at == col, "'%s': the last column at %d, not %d", line, at, col);
        rows++;
    }
    EXPECT(rows == 9, "%d rows with the header", rows);
    free(buf);
    plan_search_free(&s);
}

/* A budget that runs out at once: the smallest plan is predicted, every other one is counted as
 * left out, and the outputs say so; without a budget nothing is left out. */
static void test_budget(void)
{
    pp_search_t all, s;
    pp_plan_query_t q = query(4, 32, 0);
    REQUIRE(plan_search(&all, &q) == PP_OK);
    EXPECT(all.unevaluated == 0 && all.listed > 1);
    long long least = -1;
    for (int i = 0; i < all.n; i++) {
        long long size = 4LL * all.c[i].v * all.c[i].m;
        if (least < 0 || size < least) least = size;
    }
    q.budget_s = 1e-9;
    REQUIRE(plan_search(&s, &q) == PP_OK);
    EXPECT(s.listed == all.listed && s.unevaluated == s.listed - 1, "%d of %d left", s.unevaluated,
           s.listed);
    EXPECT(s.n <= 1 && (s.n == 0 || 4LL * s.c[0].v * s.c[0].m == least));
    EXPECT(s.unevaluated_from >= least);
    char *t = printed(&s, 0), *j = printed(&s, 1);
    char want[128];
    snprintf(want, sizeof want, "ran out with %d of %d candidates not predicted", s.unevaluated,
             s.listed);
    EXPECT(strstr(t, want), "%s", t);
    snprintf(want, sizeof want, "\"unevaluated\":%d,", s.unevaluated);
    EXPECT(strstr(j, want), "%s", j);
    ts_capture_begin();
    EXPECT(plan_print_unevaluated(&s, stderr) == 1 && plan_print_unevaluated(&all, stderr) == 0);
    EXPECT(strstr(ts_capture_end(), "were not predicted, the largest plans"));
    free(t);
    free(j);
    plan_search_free(&s);
    plan_search_free(&all);
}

/* A file that does not load: the search owns what config_load left of it, so plan_search_free
 * releases it (LeakSanitizer checks the rest under make test-asan). */
static void test_bad_file_freed(void)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_planner_bad_XXXXXX");
    int fd = mkstemp(path);
    const char *text = "model:\n  layers: abc\n";
    REQUIRE(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    pp_search_t s;
    pp_plan_query_t q = {.path = path, .gpus = 4, .global_batch = 16};
    ts_capture_begin();
    pp_status_t st = plan_search(&s, &q);
    const char *err = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && strstr(err, "model.layers"), "%s", err);
    EXPECT(s.have_base == 1 && s.base.path != NULL, "the half-read file is the search's to free");
    plan_search_free(&s);
    EXPECT(s.base.path == NULL);
    unlink(path);
}

int main(void)
{
    ts_rng_seed(11);
    write_yaml();
    RUN(test_winner_never_beaten);
    RUN(test_emitted_yaml_validates);
    RUN(test_same_as_simulate);
    RUN(test_nothing_fits);
    RUN(test_skips_counted);
    RUN(test_pareto);
    RUN(test_verify);
    RUN(test_optimizer_counted);
    RUN(test_vocab_note);
    RUN(test_long_labels_aligned);
    RUN(test_budget);
    RUN(test_bad_file_freed);
    unlink(yaml_path);
    return check_summary("test_planner");
}
