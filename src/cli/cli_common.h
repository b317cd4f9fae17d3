/* cli_common.h — helpers shared by the command-line tools. Only the CLI
 * prints and exits. */
#ifndef VD_CLI_COMMON_H
#define VD_CLI_COMMON_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include "util/util.h"
#include "plan/plan.h"
#include "train/session.h"
#include "config/config.h"

/* Print "PROG: message" for e to stderr and return e->code (the exit status). */
int vd_cli_fail(const char *prog, const vd_err *e);
/* Print the version line ("vdnn-train 0.1.0 (cuda: yes, blas: yes)"). */
void vd_cli_version(const char *prog);

/* ---- long options: "--name VALUE", "--name=VALUE", "--flag" -------------- */
/* Every tool parses with vd_cli_match: exact long names only (no
 * abbreviations: "--bat" is an error with a "did you mean '--batch'"), the
 * value either the next argument or after '='; "-h" is "--help". */
typedef struct vd_cli_flag {
    const char *name;           /* without the dashes */
    bool arg;                   /* takes a value */
} vd_cli_flag;

/* argv[*i] starts with '-' (and is not "-"): match it against flags[0..n).
 * "-h" means "--help". On success *f is the flag, *val its value (NULL for
 * a flag without one; the value may be the next argument, then *i advances
 * past it). Errors (VD_EUSAGE): short options, unknown names (with a
 * "did you mean"), a missing value, a value given to a flag that takes none. */
int vd_cli_match(int argc, char **argv, int *i, const vd_cli_flag *flags, int n,
                 const vd_cli_flag **f, const char **val, vd_err *e);
/* Integer in [lo, hi] (whole string), else VD_EUSAGE naming --name. */
int vd_cli_int(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out, vd_err *e);
/* Finite number >= lo, else VD_EUSAGE naming --name. */
int vd_cli_real(const char *name, const char *v, double lo, double *out, vd_err *e);
/* v must be one of c[0..n): VD_OK, else VD_EUSAGE listing them (with a
 * "did you mean" for near misses). */
int vd_cli_choice(const char *name, const char *v, const char *const *c, int n, vd_err *e);
/* "none | all | conv | dyn ...": every policy vd_policy_parse accepts, from
 * vd_policy_name (so new policies show up). Returns buf. */
char *vd_cli_policies(char *buf, size_t n);

/* ---- the command line the tools share ------------------------------------ */
/* One positional NET.yaml, and the run-setup options (vd_config: the same
 * names and meanings in every tool that takes them). */
typedef struct vd_cli_common {
    const char *spec;                   /* NET.yaml: the one positional argument, or the
                                           file its bare net name found (vd_cli_find_net) */
    char spec_found[PATH_MAX];          /* that file's path, when found by name */
    vd_config cfg;                      /* --batch, --backend, --device, --gpu-model,
                                           --profile, --profile-out, --analytic-profile,
                                           --policy, --budget, --math, --optimizer,
                                           --deterministic,
                                           --prefetch, --no-stage-input, --conv-*,
                                           --no-fuse, --sync-debug, --mem-trace, --step-times,
                                           --chunks, --freeze */
    int64_t seed;                       /* --seed */
    bool has_seed;
    bool quiet;                         /* --quiet */
    bool no_spec;                       /* set by a tool's flag that needs no NET.yaml
                                           (vdnn-plan --list-gpu-models) */
} vd_cli_common;

/* A tool's own flag (name as in its flag table, val NULL for a flag without
 * a value): VD_OK, or an error (VD_EUSAGE naming the flag). */
typedef int (*vd_cli_tool_flag)(void *ctx, const char *name, const char *val, vd_err *e);

/* Parses argv[1..argc) against flags[0..n) (vd_cli_match): the positional
 * argument into c->spec (a second one is VD_EUSAGE; a bare net name is
 * looked up with vd_cli_find_net, the file found named on stderr unless
 * --quiet), --help (usage(stdout)), --version and --list-nets (printed;
 * vd_cli_list_nets), the vd_cli_common flags into c (which starts
 * with vd_config_init), every other flag through tool(ctx, ...), in
 * command-line order; the first error stops it. --device takes a CUDA
 * device index; a tool that takes --gpu-model (vdnn-plan) also accepts the
 * old spelling --device h200|cpu for it. A missing NET.yaml is VD_EUSAGE.
 * Returns VD_OK, an error, or -1 after --help / --version. */
int vd_cli_parse(int argc, char **argv, const char *prog, void (*usage)(FILE *),
                 const vd_cli_flag *flags, int n, vd_cli_common *c, vd_cli_tool_flag tool,
                 void *ctx, vd_err *e);

/* A tool's argument after NET.yaml (vdnn-predict's images): VD_OK or an
 * error. */
typedef int (*vd_cli_tool_arg)(void *ctx, const char *arg, vd_err *e);
/* vd_cli_parse for a tool that takes arguments after NET.yaml: each goes to
 * arg(ctx, ...) in command-line order, and after "--" every argument is
 * one (an image named "-x.png"). */
int vd_cli_parse_args(int argc, char **argv, const char *prog, void (*usage)(FILE *),
                      const vd_cli_flag *flags, int n, vd_cli_common *c, vd_cli_tool_flag tool,
                      vd_cli_tool_arg arg, void *ctx, vd_err *e);

/* ---- nets by name ---------------------------------------------------------- */
/* Every tool takes NET.yaml or the bare name of a net. arg is a path when it
 * exists, contains a '/' or ends in ".yaml"; otherwise it is a name, and the
 * file is NAME.yaml in the current directory, else in the installed nets:
 * first those of the installation the running binary belongs to
 * (BINDIR/../share/vdnn/nets, meson's VD_BIN_TO_NETS from the executable's
 * own directory: an installation moved or staged with DESTDIR), then those
 * where this build installs them (VD_NETS_DIR, from meson's prefix and
 * datadir). *path is arg itself (a path) or buf[n] (a name found; *installed
 * says whether in the installed nets). A name found nowhere is VD_EIO
 * naming every place looked in (and a near name, if one). */
int vd_cli_find_net(const char *arg, char *buf, size_t n, const char **path, bool *installed,
                    vd_err *e);
/* --list-nets: "NAME<TAB>FILE" on stdout for every name vd_cli_find_net
 * finds (the *.yaml files of the current directory and of the installed
 * nets; a name in two places once, where the lookup takes it), by name. */
int vd_cli_list_nets(vd_err *e);
/* The usage texts' lines on NET.yaml (a spec, or a net's name and where
 * names are looked up) into buf. Returns buf. */
char *vd_cli_nets_help(char *buf, size_t n);
#define VD_CLI_LIST_NETS_HELP \
    "  --list-nets          the nets a name finds: NAME<tab>FILE lines, and exit\n"

/* ---- stop signals ---------------------------------------------------------- */
/* From now on SIGINT, SIGTERM and SIGHUP set a flag instead of killing the
 * process (a second one kills at once); returns the flag (the signal's
 * number once one came), for the library's stop options. Every phase
 * checks it: the run ends at the next check, with the checkpoint saved
 * where training had begun and --save was given. */
volatile sig_atomic_t *vd_cli_catch_stop(void);
/* VD_ESTOP with e saying where (phase) when a stop signal has come, else
 * VD_OK. */
int vd_cli_stop_check(const char *phase, vd_err *e);
/* A run that ended with VD_ESTOP: prints "prog: interrupted by SIGTERM
 * (e's message)" and returns the exit status, 128 + the signal. */
int vd_cli_stopped(const char *prog, const vd_err *e);

/* Before anything is written: refuse a run whose outputs would overwrite
 * its inputs or each other (vd_run_paths_check). c's NET.yaml, --profile
 * and --profile-out, then the tool's own files more[0..n) (at most 16).
 * VD_EUSAGE naming both flags. */
int vd_cli_check_paths(const vd_cli_common *c, const vd_run_path *more, int n, vd_err *e);

/* Progress of a plan search on stderr, and its stop: installs po->stop
 * (vd_cli_catch_stop's flag) and po->progress (unless quiet)
 * so that a search that has run over a second prints what it is searching
 * and the best plan so far, a line at most every second, prefixed "prog: ".
 * Call right before each planning call (the clock starts here). */
void vd_cli_plan_progress(vd_plan_opts *po, const char *prog, bool quiet);

/* A loaded profile whose options the session fitted to this setup
 * (vd_session_profile_note): a note on stderr, unless quiet. */
void vd_cli_note_raised(const vd_session *s, const char *prog, bool quiet);

/* The help text of the options every tool shares that set up the backend
 * (--backend ... --sync-debug), for the tools' usage(). */
extern const char *const VD_CLI_BACKEND_HELP;

/* "--backend auto" chose the CPU for a run sized for a GPU: a loud warning
 * on stderr when --backend auto picked the CPU and the run is predicted
 * to take over VD_CLI_AUTO_CPU_WARN_S (iter_s * iters). */
#define VD_CLI_AUTO_CPU_WARN_S 60.0
void vd_cli_warn_auto_cpu(const char *prog, const vd_session *ses, double iter_s, int64_t iters);

#endif
