/*
 * cli.h — the command line as three tables: the commands (main.c), the options (options.c) and
 * the output formats (outputs.c). Each is a list of rows the code asks: the argument parser,
 * `--help` and the outputs a run writes all read them, so a command, an option or a format is a
 * row and its function.
 *
 * An option row says which commands accept it and how it is applied (a setter of a field of
 * cli_opts_t, or a callback); the parser also counts every option given and keeps its last value,
 * which is how an output format row is selected by its option. Only main() exits: the handlers
 * return a status, turned into the exit code there (0 ok, 2 usage or input error, 1 runtime).
 */
#ifndef PP_CLI_H
#define PP_CLI_H

#include "common/pp_group.h"
#include "common/pp_status.h"
#include "model/profile.h"
#include "run/compare.h"
#include "run/planner.h"
#include "run/run.h"

#include <stddef.h>
#include <stdio.h>

#define CLI_MAX_SETS    256 /* --set options (with --gpu's) */
#define CLI_MAX_SWEEPS  8   /* --sweep options */
#define CLI_MAX_OPTIONS 64  /* rows of the option table */

/* The commands, as bits: an option or an output format names the commands it belongs to. */
enum {
    CLI_RUN = 1 << 0,
    CLI_COMPARE = 1 << 1,
    CLI_SHOW = 1 << 2,
    CLI_CHECK = 1 << 3,
    CLI_PROFILE = 1 << 4,
    CLI_PLAN = 1 << 5,
};
/* The commands that share one set of options: one of them refuses another's as not applying. */
#define CLI_SHARED (CLI_RUN | CLI_COMPARE | CLI_SHOW | CLI_CHECK | CLI_PROFILE)

typedef struct cli_command cli_command_t;
typedef struct cli_opts cli_opts_t;

/* One command: a row of cli_commands[] (main.c). */
struct cli_command {
    const char *word;    /* `ppsched WORD ...`; NULL: the default, `ppsched FILE.yaml` */
    unsigned id;         /* its bit */
    const char *summary; /* one line: what it does */
    const char *about;   /* the paragraph under "usage:" in its --help (ends with a newline) */
    int many_files;      /* 1: FILE.yaml...; 0: exactly one */
    const char *prefix;  /* its messages start "PREFIX: " */
    unsigned parses;     /* the commands whose options it recognises (others: "not an option") */
    unsigned flags;      /* CLI_TERSE_ERRORS, CLI_FILES_FIRST, CLI_UNDER_MPI */
    pp_status_t (*run)(char **files, int n_files, cli_opts_t *o);
};
/* A bad or valueless option is named as typed, "is not an option or needs a value". */
#define CLI_TERSE_ERRORS 1u
/* The file count is checked before the contradicting options. */
#define CLI_FILES_FIRST 2u
/* It runs under mpirun: every process computes it with the launch's layout, rank 0 prints. */
#define CLI_UNDER_MPI 4u

extern const cli_command_t cli_commands[]; /* the default first */
extern const int cli_n_commands;

/* One exit code and what it means for some commands: a row of cli_exits[] (main.c), listed at the
 * foot of their --help. Every command has one row for each of 0, 1 and 2. */
typedef struct cli_exit {
    int code;
    unsigned cmds;       /* the commands it describes */
    const char *meaning; /* a newline continues it */
} cli_exit_t;

extern const cli_exit_t cli_exits[]; /* ends with a row of no meaning */

/* What the command line asked for. Zero-initialised, then filled by cli_parse. */
struct cli_opts {
    const cli_command_t *cmd;
    const char *sets[CLI_MAX_SETS + 1]; /* --set and --gpu in order, then --timeout's */
    int n_sets;
    int simulate;                       /* --simulate */
    int sync;                           /* --sync */
    int quiet;                          /* --quiet */
    char gpu_set[128];                  /* --gpu NAME as the override "--gpu= cost.gpu=NAME" */
    char timeout_set[128];              /* --timeout S as "--timeout= run.timeout=S" */
    const char *sweeps[CLI_MAX_SWEEPS]; /* --sweep KEY=V1,V2,... (compare) */
    int n_sweeps;
    const char *output; /* -o FILE (profile) */
    /* plan's search */
    int gpus;              /* --gpus N */
    long global_batch;     /* --global-batch SEQS */
    double tokens;         /* --tokens N */
    double memory_gib;     /* --memory GIB */
    int top;               /* --top N */
    int verify;            /* --verify K */
    const char *optimizer; /* --optimizer adamw|none; NULL: the search's default */
    unsigned kinds;        /* --kinds LIST: bit (1u << kind) of each; 0: every generated kind */
    double budget_s;       /* --budget SECONDS; 0: main_plan.c's default */
    /* every option given, by the index of its name's first row in cli_options[] */
    int seen[CLI_MAX_OPTIONS];          /* times given */
    const char *value[CLI_MAX_OPTIONS]; /* the last value */
    pp_group_t *group;                  /* the processes of an MPI launch; rank 0 prints */
};

/* One option: a row of cli_options[] (options.c). An option with several rows has one per set of
 * commands that list it with its own help text. */
typedef struct cli_option {
    const char *name; /* --name */
    char letter;      /* -x, or 0 */
    const char *arg;  /* the value's name in --help; NULL: it takes none */
    unsigned cmds;    /* the commands that accept it */
    const char *help; /* its line in --help (a newline continues it); NULL: not listed */
    /* Apply it: 0 to go on, 1 when it has served the command (--help), -1 on a usage error
     * (printed). NULL: nothing to set (it selects an output format). */
    int (*apply)(cli_opts_t *o, const struct cli_option *opt, const char *arg);
    size_t field;   /* offsetof the field of cli_opts_t the setter writes */
    unsigned flags; /* CLI_ONCE */
} cli_option_t;
/* Given twice is a usage error: the second would silently replace the first. */
#define CLI_ONCE 1u
/* Its value is a file the command writes, or a folder it writes files into: checked by
 * cli_probe_outputs before the work. */
#define CLI_OUT_FILE 2u
#define CLI_OUT_DIR  4u

extern const cli_option_t cli_options[];

/* Parse argv (argv[0] is the program or the command word) for `cmd` into `o` and the files after
 * the options. Returns 0 to go on, 1 when --help or --version was served, -1 on a usage error
 * (printed, with the usage where the files are wrong). */
int cli_parse(const cli_command_t *cmd, int argc, char **argv, cli_opts_t *o, char ***files,
              int *n_files);

/* Whether option `name` was given, and its last value (NULL when not given). */
int cli_given(const cli_opts_t *o, const char *name);
const char *cli_value(const cli_opts_t *o, const char *name);

/* Append an override to o->sets; -1 after printing that there are too many. */
int cli_add_set(cli_opts_t *o, const char *set);

/* The --help of a command, made from its row and its options' rows. */
void cli_usage(const cli_command_t *cmd, FILE *f);

/* ---- output formats (outputs.c) ------------------------------------------------------------ */

/* What a command produced, for its writers: the members its command fills. */
typedef struct cli_result {
    const char *path;          /* the schedule file */
    const pp_run_t *run;       /* run, show, check */
    const pp_compare_t *cmp;   /* compare */
    const pp_search_t *search; /* plan */
    const pp_profile_t *prof;  /* profile */
} cli_result_t;

/* Where a format goes. */
typedef enum cli_dest {
    CLI_STDOUT, /* the one report on standard output: its option's row, else the default's */
    CLI_AFTER,  /* on standard output after the default report (not after a machine format) */
    CLI_FILE,   /* into the file its option names */
} cli_dest_t;

/* One output format: a row of cli_formats[] (outputs.c). */
typedef struct cli_format {
    const char *name;   /* table, json, csv, trace, ... */
    unsigned cmds;      /* the command that writes it */
    const char *option; /* the option that selects it; NULL: the command's default report */
    const char *value;  /* with an option that names the format (--emit csv): that value */
    cli_dest_t dest;
    /* Write it; `path` is the option's value for CLI_FILE. */
    pp_status_t (*write)(const cli_result_t *r, const cli_opts_t *o, const char *path);
    const char *note; /* a file's line under the default report ("# trace: %s") */
} cli_format_t;

extern const cli_format_t cli_formats[];

/* Every output the options select for o->cmd, in the table's order: the report on standard
 * output, what follows it, then the files (a failure stops the rest), then the files' notes. */
pp_status_t cli_write_outputs(const cli_result_t *r, const cli_opts_t *o);

/* Before anything is loaded: every output path the options name (the rows flagged CLI_OUT_FILE
 * or CLI_OUT_DIR) can be written (its folder exists, it is not a folder itself; a new folder of
 * outputs has a parent that exists), no two outputs are one file, and none is one of the input
 * `files`. Prints the problem, naming the option, and returns PP_ERR_USAGE. */
pp_status_t cli_probe_outputs(const cli_opts_t *o, char **files, int n_files);

/* Whether the command talks on stderr and in notes: not --quiet, and its report on standard
 * output is the default one (a machine-read format stays alone). */
int cli_chatty(const cli_opts_t *o);

/* The value check of an option whose value names an output format of the command (--emit). */
int cli_pick_format(cli_opts_t *o, const cli_option_t *opt, const char *arg);

/* ---- the commands of other files ----------------------------------------------------------- */

pp_status_t cli_plan(char **files, int n_files, cli_opts_t *o); /* main_plan.c */

#endif /* PP_CLI_H */
