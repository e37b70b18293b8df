/*
 * main.c — the ppsched command line: the table of commands (run, the default, `ppsched FILE.yaml`;
 * compare, show, check, profile, plan), their handlers and main().
 *
 * The options are the rows of options.c, the output formats those of outputs.c (cli.h). Every
 * command goes through the one chain of run.h (config → schedule → plan → execute | simulate →
 * report); compare's runs are compare.h's. Exit codes: 0 ok, 2 usage or input error, 1 runtime
 * failure or a run that does not fit the GPUs' memory, measured or simulated (cli_exits[] says
 * what each means per command, at the foot of its --help); only this file exits. Under mpirun
 * (pp_group.h) main starts the process group, the commands marked CLI_UNDER_MPI run (a run, show,
 * check; the others are refused with what to run instead), every process agrees on loading and on
 * measuring or simulating, only rank 0 prints, and every process exits with the same code.
 */
#include "cli.h"
#include "common/input.h"
#include "config/resolve.h"
#include "exec/execute.h"
#include "run/profile_run.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------------------------------------
 * Runs
 * ------------------------------------------------------------------------------------------- */

/* The GPU table's row for the devices present, when it knows them. */
static const pp_gpu_t *present_gpu(void)
{
    char name[256];
    execute_describe_devices(name, sizeof name);
    return gpu_match_device(name);
}

/* Measure on the GPUs, or simulate (asked for, or no device). */
static int want_measure(const cli_opts_t *o, int n_visible)
{
    return !o->simulate && n_visible > 0;
}

/* The chain's options for a command's flags. The executor's banner goes with the table (--csv
 * keeps compare's progress lines quiet, not the banner). */
static pp_run_opts_t run_opts(const cli_opts_t *o, int measure)
{
    pp_run_opts_t ro = {.measure = measure,
                        .exec = execute_plan,
                        .sync = o->sync,
                        .verbose = !o->quiet && !cli_given(o, "json") && o->group->rank == 0,
                        .gpu = measure ? present_gpu() : NULL,
                        .group = o->group};
    return ro;
}

/* The note that a GPU run was wanted but is not possible, into buf; NULL when there is none. It is
 * printed once the input has loaded, so an input error comes first and alone. */
static const char *simulating_note(const cli_opts_t *o, int n_visible, char *buf, size_t size)
{
    if (o->simulate || n_visible > 0 || o->quiet || o->group->rank != 0) return NULL;
    snprintf(buf, size,
             "# %s: simulating with the cost model (pass --simulate to ask for this "
             "explicitly)%s\n",
             execute_built_with_cuda() ? "no CUDA device found" : "ppsched was built without CUDA",
             o->sync ? "; --sync does not apply to a simulation" : "");
    return buf;
}

/* ---------------------------------------------------------------------------------------------
 * Commands
 * ------------------------------------------------------------------------------------------- */

/* Load the run on every process, with the launch's process layout, and agree: a failure on any
 * one (its own message printed) is every process's; then check the split over the processes.
 * Across hosts pipeline.devices counts every host's GPUs: no one host can check the ids against
 * its n_visible (the executor checks each process's own). */
static pp_status_t load_agreed(pp_run_t *j, const char *path, const cli_opts_t *o, int n_visible)
{
    const int spans_hosts = o->group->local_size < o->group->size;
    pp_status_t st = run_load_group(j, o->group, path, NULL, o->sets, o->n_sets,
                                    spans_hosts && n_visible > 0 ? -1 : n_visible);
    PP_CHECK(group_agree(o->group, st));
    return run_check_processes(j, o->group);
}

/* A simulated run whose predicted memory is over its limit: after its report, the refusal a
 * measured run gives before running, exit 1. */
static pp_status_t check_fit(const pp_run_t *j)
{
    return j->measured ? PP_OK : run_refuse_fit(j, stderr);
}

static pp_status_t cmd_run(char **files, int n_files, cli_opts_t *o)
{
    pp_run_t j = {0};
    cli_result_t res = {.path = files[0], .run = &j};
    char note[256];
    pp_status_t st;
    int n_visible = o->simulate ? 0 : execute_device_count();
    /* Under mpirun every process measures, or every one simulates (one without a GPU decides). */
    int no_gpu = !want_measure(o, n_visible);
    if (o->group->size > 1 && o->group->ops->max_int(o->group, &no_gpu) != PP_OK)
        return PP_ERR_INTERNAL;
    if (no_gpu) n_visible = 0;
    pp_run_opts_t ro = run_opts(o, want_measure(o, n_visible));
    PP_CHECK_GOTO(load_agreed(&j, files[0], o, n_visible), st, done);
    if (simulating_note(o, n_visible, note, sizeof note)) fputs(note, stderr);
    if (j.cfg.pipeline.devices_all && n_visible <= 0 && cli_chatty(o) && o->group->rank == 0)
        fprintf(stderr,
                "# pipeline.devices: all is %d devices when simulating with no GPU counted "
                "(set pipeline.devices to simulate another number)\n",
                j.job.pipeline.n_devices);
    if (cli_chatty(o)) run_note_processes(&j, o->group, stderr);
    PP_CHECK_GOTO(run_go(&j, &ro), st, done);
    if (o->group->rank == 0) st = cli_write_outputs(&res, o); /* rank 0 prints the one report */
    if (st == PP_OK) st = check_fit(&j);
done:
    run_free(&j);
    return st;
}

static pp_status_t cmd_compare(char **files, int n_files, cli_opts_t *o)
{
    int n_visible = o->simulate ? 0 : execute_device_count();
    pp_run_opts_t ro = run_opts(o, want_measure(o, n_visible));
    char note[256];
    pp_compare_opts_t co = {.files = files,
                            .n_files = n_files,
                            .sets = o->sets,
                            .n_sets = o->n_sets,
                            .sweeps = o->sweeps,
                            .n_sweeps = o->n_sweeps,
                            .svg_dir = cli_value(o, "svg"),
                            .progress = cli_chatty(o),
                            .n_visible = n_visible,
                            .run = &ro,
                            .first_note = simulating_note(o, n_visible, note, sizeof note)};
    pp_compare_t c;
    cli_result_t res = {.path = files[0], .cmp = &c};
    pp_status_t st = compare_run(&c, &co);
    if (st == PP_OK) st = cli_write_outputs(&res, o);
    if (st == PP_OK) st = compare_check_failed(&c);
    compare_free(&c);
    return st;
}

/* show and check: load the schedule (generate, lower, validate; nothing runs) and write the
 * command's report of it. Under mpirun every process loads it with the launch's layout and passes
 * the run's checks of the processes (as a run would), and rank 0 writes the report. */
static pp_status_t cmd_inspect(char **files, int n_files, cli_opts_t *o)
{
    pp_run_t j = {0};
    cli_result_t res = {.path = files[0], .run = &j};
    pp_status_t st;
    if (o->group->size > 1)
        st = load_agreed(&j, files[0], o, execute_device_count());
    else
        st = run_load(&j, files[0], NULL, o->sets, o->n_sets, execute_device_count());
    if (st == PP_OK && o->group->rank == 0) st = cli_write_outputs(&res, o);
    run_free(&j);
    return st;
}

static pp_status_t cmd_profile(char **files, int n_files, cli_opts_t *o)
{
    pp_config_t cfg;
    pp_job_t job = {0};
    pp_profile_t prof;
    cli_result_t res = {.path = files[0], .prof = &prof};
    pp_status_t st;
    PP_CHECK_GOTO(config_load(&cfg, files[0], o->sets, o->n_sets), st, done);
    PP_CHECK_GOTO(job_resolve(&job, &cfg, NULL, execute_device_count()), st, done);
    const double start = group_now_s();
    PP_CHECK_GOTO(execute_profile(&prof, &job, job.run.steps, !o->quiet), st, done);
    PP_CHECK_GOTO(profile_measure_runs(&prof, &job, execute_plan, !o->quiet), st, done);
    if (!o->quiet) profile_print_summary(&prof, stderr);
    if (!o->quiet) fprintf(stderr, "# profile: measured in %.1f s\n", group_now_s() - start);
    st = cli_write_outputs(&res, o);
done:
    job_free(&job);
    config_free(&cfg);
    return st;
}

const cli_command_t cli_commands[] = {
    {NULL, CLI_RUN, "run (measure on the GPUs; simulate where there are none)",
     "Run the schedule in FILE.yaml on the GPUs present and report what it cost: step time,\n"
     "throughput, the bubble of every device next to the closed-form theory and the simulator.\n"
     "Without a GPU it simulates (and says so).\n",
     0, "ppsched", CLI_SHARED, CLI_UNDER_MPI, cmd_run},
    {"compare", CLI_COMPARE, "schedules side by side in one table",
     "Run (or simulate) each schedule in turn on the same GPUs and print one table.\n", 1,
     "ppsched", CLI_SHARED, 0, cmd_compare},
    {"show", CLI_SHOW, "the plan as a text grid, or the schedule exported",
     "Print the schedule of FILE.yaml as a compact grid (one row per device), or export it.\n", 0,
     "ppsched", CLI_SHARED, CLI_UNDER_MPI, cmd_inspect},
    {"check", CLI_CHECK, "load, generate, lower and validate; print a summary",
     "Load FILE.yaml, generate, lower and validate its schedule; print a one-line summary.\n", 0,
     "ppsched", CLI_SHARED, CLI_UNDER_MPI, cmd_inspect},
    {"profile", CLI_PROFILE, "measure stage and transfer costs on the GPU",
     "Measure, on the first GPU of the pipeline, the forward, input-gradient and weight-\n"
     "gradient time of a middle, a first and a last stage of the model in FILE.yaml, their\n"
     "memory, and (with two GPUs) peer copies; then the whole model's step on that GPU\n"
     "(1F1B, m = 8 and 32) and DualPipeV's with its pairs on one and on two streams, at the\n"
     "micro-batch of FILE.yaml and at a quarter and a sixteenth of its tokens; write a\n"
     "profile that `cost: {profile: FILE}` reads. run.steps sets the number of timed graph\n"
     "replays of the passes.\n",
     0, "ppsched", CLI_SHARED, 0, cmd_profile},
    {"plan", CLI_PLAN, "search the schedules for a model and GPUs",
     "Search every schedule kind, micro-batch count and size making the global batch,\n"
     "chunks per device and placement for the model in FILE.yaml on N GPUs; rank by the\n"
     "predicted tokens/s among those that fit the memory; print the top, the memory-\n"
     "throughput Pareto front and why the best beats the runner-up.\n",
     0, "ppsched plan", CLI_PLAN, CLI_TERSE_ERRORS | CLI_FILES_FIRST, cli_plan},
};
const int cli_n_commands = (int)(sizeof cli_commands / sizeof cli_commands[0]);

/* What each exit code means, per command: pp_status_exit_code's 0, 1 (runtime) and 2 (input). */
const cli_exit_t cli_exits[] = {
    {0, CLI_SHARED | CLI_PLAN, "ok"},
    {1, CLI_RUN,
     "runtime failure (CUDA, NCCL, a timeout, writing an output), or the run does not fit\n"
     "in the GPUs' memory (measured: refused before it runs; simulated: after the report)"},
    {1, CLI_COMPARE,
     "runtime failure: a run failed or did not fit on the GPUs, or writing an output"},
    {1, CLI_SHOW | CLI_CHECK, "writing the output failed"},
    {1, CLI_PROFILE, "no GPU, a measurement failed, or writing the profile failed"},
    {1, CLI_PLAN, "nothing fits the memory, a --verify run failed, or writing an output failed"},
    {2, CLI_RUN,
     "input or usage error: the YAML, the schedule, an option or an output path\n"
     "(found before anything runs)"},
    {2, CLI_COMPARE,
     "input or usage error: a YAML, a schedule, an option or an output path (found\n"
     "before anything runs), or --sweep values some runs refused (the others ran)"},
    {2, CLI_SHOW, "input or usage error: the YAML, the schedule or an option"},
    {2, CLI_CHECK, "the schedule is not valid (the problem printed), or a usage error"},
    {2, CLI_PROFILE,
     "input or usage error: the YAML, an option or the -o path (found before\n"
     "anything runs)"},
    {2, CLI_PLAN,
     "input or usage error: the YAML, an option or the --emit path (found before\n"
     "the search)"},
    {0, 0, NULL},
};

/* ---------------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------------- */

/* Exit code `rc`, unless standard output could not be written (a full disk, a closed pipe): then
 * say so and exit 1. Every command's output ends here, so none can exit 0 with it half written. */
static int finish_stdout(int rc)
{
    errno = 0;
    int failed = fflush(stdout) != 0 || ferror(stdout);
    failed |= fclose(stdout) != 0;
    if (failed && rc == 0) /* a failed command has said what went wrong */
        fprintf(stderr, "ppsched: writing standard output failed%s%s\n", errno ? ": " : "",
                errno ? strerror(errno) : "");
    return failed && rc == 0 ? 1 : rc;
}

/* The command a word names; NULL when it names none (then it is the run command's file). */
static const cli_command_t *command_named(const char *word)
{
    for (int k = 0; k < cli_n_commands; k++)
        if (cli_commands[k].word && strcmp(cli_commands[k].word, word) == 0)
            return &cli_commands[k];
    return NULL;
}

/* The edit distance of a and b, a swap of two neighbours counting one (optimal string alignment):
 * how far a mistyped word is from a command. Words longer than 31 bytes are far from all. */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b), d[32][32];
    if (la > 31 || lb > 31) return 99;
    for (int i = 0; i <= la; i++)
        for (int j = 0; j <= lb; j++) {
            if (!i || !j) {
                d[i][j] = i + j;
                continue;
            }
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* Whether the first word names neither a command nor a schedule file: a bare word (no '.' or '/',
 * not an option) that is not a file here. `ppsched FILE.yaml` takes a path in its place. */
static int unknown_word(const char *word)
{
    struct stat sb;
    return word[0] && word[0] != '-' && !strpbrk(word, "./") && stat(word, &sb) != 0 &&
           strcmp(word, "help") != 0;
}

/* "unknown command", the closest command when one is close (at most 2 edits, and fewer than half
 * its letters), and every command of the table. */
static int refuse_unknown(const char *word)
{
    const cli_command_t *near = NULL;
    int best = 3;
    for (int k = 0; k < cli_n_commands; k++) {
        const char *w = cli_commands[k].word;
        int d = w ? edit_distance(word, w) : 99;
        if (d < best && 2 * d < (int)strlen(w)) best = d, near = &cli_commands[k];
    }
    fprintf(stderr, "ppsched: unknown command '%s'", PP_SHORT(word));
    if (near) fprintf(stderr, "; did you mean '%s'?", near->word);
    fputs(" (allowed: ", stderr);
    for (int k = 0; k < cli_n_commands; k++)
        if (cli_commands[k].word) fprintf(stderr, "%s, ", cli_commands[k].word);
    fputs("or a schedule FILE.yaml to run it)\ntry 'ppsched --help'\n", stderr);
    return 2;
}

/* Under mpirun, a command that runs in one process only (no CLI_UNDER_MPI): what to run instead,
 * from rank 0; exit 2. */
static int refuse_under_mpi(const char *word, const pp_group_t *group)
{
    if (group->rank != 0) return 2;
    fprintf(stderr,
            "ppsched: %s does not run under mpirun (%d processes): run `ppsched %s ...` "
            "without mpirun (under mpirun: `ppsched FILE.yaml`",
            word, group->size, word);
    for (int k = 0; k < cli_n_commands; k++)
        if (cli_commands[k].word && (cli_commands[k].flags & CLI_UNDER_MPI))
            fprintf(stderr, ", `ppsched %s FILE.yaml`", cli_commands[k].word);
    fputs(")\n", stderr);
    return 2;
}

static int run_command(int argc, char **argv, pp_group_t *group)
{
    const char *word = argc >= 2 ? argv[1] : "";
    const cli_command_t *cmd = command_named(word);
    int help = strcmp(word, "help") == 0;
    /* Under mpirun rank 0 prints; the others compute the same and stay quiet (returning early on a
     * failure here would leave them out of the collectives the others enter). */
    if (group->rank != 0 && !freopen("/dev/null", "w", stdout))
        fprintf(stderr, "ppsched: rank %d: standard output not silenced\n", group->rank);
    if (!cmd && unknown_word(word)) return group->rank == 0 ? refuse_unknown(word) : 2;
    if (group->size > 1 && cmd && !(cmd->flags & CLI_UNDER_MPI))
        return refuse_under_mpi(word, group);
    if (help) {
        cli_usage(&cli_commands[0], stdout);
        return finish_stdout(0);
    }
    int shift = cmd ? 1 : 0;
    if (!cmd) cmd = &cli_commands[0];
    cli_opts_t o = {.group = group};
    char **files;
    int n_files;
    int r = cli_parse(cmd, argc - shift, argv + shift, &o, &files, &n_files);
    if (r) return r > 0 ? finish_stdout(0) : 2;
    /* Every output path, before anything is loaded: a bad one is found now, not after the run
     * (rank 0 writes the outputs, and checks them). */
    pp_status_t st = group->rank == 0 ? cli_probe_outputs(&o, files, n_files) : PP_OK;
    st = group_agree(group, st);
    if (st != PP_OK) return pp_status_exit_code(st);
    return finish_stdout(pp_status_exit_code(cmd->run(files, n_files, &o)));
}

/* Planning a large schedule allocates and frees arrays of every op in turn (generate, lower,
 * simulate, explain, report): keeping freed memory in the process for the next instead of handing
 * it back to the kernel saves their page faults (bench/NOTES.md, "Planning at scale"). glibc's
 * largest mmap threshold is 32 MiB: larger arrays are still mapped and unmapped. */
static void heap_keep_freed(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

/* Every process of an MPI launch (pp_group.h) leaves with the same code: the worst of them. */
int main(int argc, char **argv)
{
    heap_keep_freed();
    pp_group_t group;
    pp_status_t st = group_init(&group, group_mpi_ops(), &argc, &argv);
    if (st != PP_OK) return pp_status_exit_code(st);
    return group_finish(&group, run_command(argc, argv, &group));
}
