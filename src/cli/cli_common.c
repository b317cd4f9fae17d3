/* cli_common.c — see cli_common.h. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include "vd_config.h"
#include "cli/cli_common.h"
#include "plan/plan.h"

int vd_cli_fail(const char *prog, const vd_err *e) {
    fprintf(stderr, "%s: error: %s\n", prog, e->msg[0] ? e->msg : "unknown error");
    return e->code ? e->code : VD_EINTERNAL;
}

void vd_cli_version(const char *prog) {
    printf("%s %s (cuda backend: %s, nccl: %s, mpi: %s, blas: %s)\n", prog, VD_VERSION,
           VD_HAVE_CUDA ? "yes" : "no", VD_HAVE_NCCL ? "yes" : "no", VD_HAVE_MPI ? "yes" : "no",
           VD_HAVE_BLAS ? "openblas" : "none");
}

int vd_cli_match(int argc, char **argv, int *i, const vd_cli_flag *flags, int n,
                 const vd_cli_flag **f, const char **val, vd_err *e) {
    const char *a = argv[*i];
    *f = NULL;
    *val = NULL;
    if (strcmp(a, "-h") == 0) a = "--help";
    if (strncmp(a, "--", 2) != 0)
        return vd_errf(e, VD_EUSAGE, "unknown option '%s' (options are --long; see --help)", a);
    char name[64];
    const char *eq = strchr(a + 2, '=');
    size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    snprintf(name, sizeof name, "%.*s", (int)(nl < 63 ? nl : 63), a + 2);
    for (int k = 0; k < n; k++)
        if (strcmp(flags[k].name, name) == 0) *f = &flags[k];
    if (!*f) {
        const char *cands[128];
        int nc = n < 128 ? n : 128;
        for (int k = 0; k < nc; k++) cands[k] = flags[k].name;
        const char *s = vd_suggest(name, cands, nc);
        /* an abbreviation (exact names only): suggest the one name it starts, if one */
        int hits = 0;
        const char *pre = NULL;
        for (int k = 0; k < nc && nl > 0; k++)
            if (strncmp(cands[k], name, strlen(name)) == 0 && ++hits == 1) pre = cands[k];
        if (!s && hits == 1) s = pre;
        return vd_errf(e, VD_EUSAGE, "unknown option '--%s'%s%s%s (see --help)", name,
                       s ? "; did you mean '--" : "", s ? s : "", s ? "'?" : "");
    }
    if ((*f)->arg) {
        if (eq) *val = eq + 1;
        else if (*i + 1 < argc) *val = argv[++*i];
        else return vd_errf(e, VD_EUSAGE, "option '--%s' needs a value", name);
    } else if (eq) {
        return vd_errf(e, VD_EUSAGE, "option '%s' takes no value", a);
    }
    return VD_OK;
}

int vd_cli_int(const char *name, const char *v, int64_t lo, int64_t hi, int64_t *out, vd_err *e) {
    int64_t x;
    if (vd_parse_i64(v, &x, NULL) != 0 || x < lo || x > hi)
        return vd_errf(e, VD_EUSAGE, "--%s: '%s' is not an integer in [%lld, %lld]", name, v,
                       (long long)lo, (long long)hi);
    *out = x;
    return VD_OK;
}

int vd_cli_real(const char *name, const char *v, double lo, double *out, vd_err *e) {
    double x;
    if (vd_parse_f64(v, &x, NULL) != 0 || !isfinite(x) || x < lo)
        return vd_errf(e, VD_EUSAGE, "--%s: '%s' is not a number >= %g", name, v, lo);
    *out = x;
    return VD_OK;
}

int vd_cli_choice(const char *name, const char *v, const char *const *c, int n, vd_err *e) {
    for (int i = 0; i < n; i++)
        if (strcmp(v, c[i]) == 0) return VD_OK;
    const char *s = vd_suggest(v, c, n);
    char list[200] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, c[i], sizeof list - strlen(list) - 1);
        if (i + 1 < n) strncat(list, " | ", sizeof list - strlen(list) - 1);
    }
    return vd_errf(e, VD_EUSAGE, "--%s: unknown value '%s' (expected %s)%s%s%s", name, v, list,
                   s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
}

char *vd_cli_policies(char *buf, size_t n) {
    if (n == 0) return buf;
    buf[0] = 0;
    for (int p = 0; p < VD_POLICY_COUNT; p++) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", p ? " | " : "", vd_policy_name((vd_policy)p));
    }
    return buf;
}

const char *const VD_CLI_BACKEND_HELP =
"  --backend B          cpu | cuda | auto (default: auto = cuda if available)\n"
"  --device N           CUDA device index (default 0)\n"
"  --math M             fp32 | tf32 | bf16 | fp16 (default: the spec's train.math,\n"
"                       else fp32)\n"
"  --deterministic      deterministic algorithms only\n"
"  --no-stage-input     do not stage the next batch's input on the device late in\n"
"                       the backward pass (for comparisons)\n"
"  --conv-tune T        on | off | retime: time the cuDNN conv algorithms at setup\n"
"                       (default on; retime also re-times the best few, legacy API)\n"
"  --conv-api A         auto | graph | legacy cuDNN API for convolutions (default\n"
"                       auto: per layer, the faster when tuned)\n"
"  --conv-split S       auto | off | force: sub-batch conv options (default auto:\n"
"                       where the fastest needs over 1 GiB of workspace)\n"
"  --conv-topk N        heuristic cuDNN engines tried per direction, 1..12 (default 8)\n"
"  --conv-rtc           also runtime-compiled cuDNN engines (slow setup)\n"
"  --conv-debug N       0 | 1 (each conv layer's choice on stderr) | 2 (every\n"
"                       candidate engine too)\n"
"  --no-fuse            run every op as its own kernels: no conv + bias (+ ReLU)\n"
"                       cuDNN graph, no ReLU fused into the conv, batch norm or\n"
"                       add before it (CUDA; for comparisons)\n"
"  --sync-debug         synchronize after every op (debugging)\n";

/* --conv-tune / --conv-api / --conv-split value -> index in ch[], else VD_EUSAGE. */
static int choice_idx(const char *name, const char *v, const char *const *ch, int n, int *out,
                      vd_err *e) {
    int rc = vd_cli_choice(name, v, ch, n, e);
    if (rc) return rc;
    for (int k = 0; k < n; k++)
        if (!strcmp(v, ch[k])) *out = k;
    return VD_OK;
}

/* One vd_cli_common flag into c; *known = false for a tool's own flag. */
static int common_flag(vd_cli_common *c, const char *name, const char *val, bool model_ok,
                       bool *known, vd_err *e) {
    vd_config *g = &c->cfg;
    vd_backend_opts *bo = &g->backend_opts;
    int64_t x = 0;
    int k = 0, rc = VD_OK;
    *known = true;
    if (!strcmp(name, "batch")) { rc = vd_cli_int(name, val, 1, 1 << 24, &g->batch, e); }
    else if (!strcmp(name, "gpus")) { if (!(rc = vd_cli_int(name, val, 1, 64, &x, e))) g->gpus = (int)x; }
    else if (!strcmp(name, "seed")) { rc = vd_cli_int(name, val, 0, INT64_MAX, &c->seed, e); c->has_seed = true; }
    else if (!strcmp(name, "device")) {
        if (model_ok && vd_parse_i64(val, &x, NULL) != 0 && vd_device_find(val))
            g->gpu_model = val;   /* the old spelling of --gpu-model (vdnn-plan) */
        else if (!(rc = vd_cli_int(name, val, 0, 1024, &x, e))) g->device = (int)x;
    }
    else if (!strcmp(name, "gpu-model")) g->gpu_model = val;   /* checked by vd_config_resolve */
    else if (!strcmp(name, "profile")) g->profile = val;
    else if (!strcmp(name, "profile-out")) g->profile_out = val;
    else if (!strcmp(name, "analytic-profile")) g->analytic = true;
    else if (!strcmp(name, "deterministic")) g->deterministic = true;
    else if (!strcmp(name, "quiet")) c->quiet = true;
    else if (!strcmp(name, "no-stage-input")) g->no_stage_input = true;
    else if (!strcmp(name, "chunks")) g->chunks = val;
    else if (!strcmp(name, "freeze")) {   /* checked by vd_config_resolve (vd_net_freeze) */
        if (g->freeze)
            rc = vd_errf(e, VD_EUSAGE, "--freeze given twice ('%s', '%s'): give one pattern, "
                         "alternatives joined with | (e.g. '^(conv1|bn1|layer1)\\.')",
                         g->freeze, val);
        g->freeze = val;
    }
    else if (!strcmp(name, "mem-trace")) g->mem_trace = true;
    else if (!strcmp(name, "step-times")) g->step_times = true;
    else if (!strcmp(name, "graph")) {
        static const char *const ch[] = {"auto", "on", "off"};
        static const vd_graph_mode mode[] = {VD_GRAPH_AUTO, VD_GRAPH_ON, VD_GRAPH_OFF};
        if (!(rc = choice_idx(name, val, ch, 3, &k, e))) {
            g->has_graph = true;
            g->graph = mode[k];
        }
    }
    else if (!strcmp(name, "sync-debug")) bo->sync_debug = true;
    else if (!strcmp(name, "no-fuse")) bo->no_fuse = true;
    else if (!strcmp(name, "conv-rtc")) bo->conv_rtc = true;
    else if (!strcmp(name, "conv-debug")) {
        if (!(rc = vd_cli_int(name, val, 0, 2, &x, e))) bo->conv_debug = (int)x;
    } else if (!strcmp(name, "conv-topk")) {
        if (!(rc = vd_cli_int(name, val, 1, VD_CONV_TOPK_MAX, &x, e))) bo->conv_topk = (int)x;
    } else if (!strcmp(name, "conv-tune")) {   /* order: vd_conv_tune */
        static const char *const ch[] = {"on", "off", "retime"};
        if (!(rc = choice_idx(name, val, ch, 3, &k, e))) bo->conv_tune = (vd_conv_tune)k;
    } else if (!strcmp(name, "conv-api")) {    /* order: vd_conv_api */
        static const char *const ch[] = {"auto", "graph", "legacy"};
        if (!(rc = choice_idx(name, val, ch, 3, &k, e))) bo->conv_api = (vd_conv_api)k;
    } else if (!strcmp(name, "conv-split")) {  /* order: vd_conv_split */
        static const char *const ch[] = {"auto", "off", "force"};
        if (!(rc = choice_idx(name, val, ch, 3, &k, e))) bo->conv_split = (vd_conv_split)k;
    } else if (!strcmp(name, "backend")) {
        static const char *const ch[] = {"cpu", "cuda", "auto"};
        if (!(rc = vd_cli_choice(name, val, ch, 3, e))) g->backend = val;
    } else if (!strcmp(name, "math")) {
        static const char *const ch[] = VD_MATH_NAMES;   /* order: vd_math */
        if (!(rc = choice_idx(name, val, ch, (int)VD_ARRAY_LEN(ch), &k, e))) {
            g->math = (vd_math)k;
            g->has_math = true;
        }
    } else if (!strcmp(name, "optimizer")) {
        static const char *const ch[] = VD_OPTIMIZER_NAMES;   /* order: vd_optimizer */
        if (!(rc = choice_idx(name, val, ch, (int)VD_ARRAY_LEN(ch), &k, e))) {
            g->optimizer = (vd_optimizer)k;
            g->has_optimizer = true;
        }
    } else if (!strcmp(name, "prefetch")) {
        if ((rc = vd_prefetch_parse(val, &g->prefetch, e))) vd_err_prefix(e, "--prefetch");
    } else if (!strcmp(name, "policy")) {
        if ((rc = vd_policy_parse(val, &g->policy, e))) vd_err_prefix(e, "--policy");
        g->has_policy = true;
    } else if (!strcmp(name, "budget")) {
        rc = vd_parse_size(val, &g->budget, e);
        if (rc) vd_err_prefix(e, "--budget");
        else if (g->budget == 0) rc = vd_errf(e, VD_EUSAGE, "--budget must be positive");
    } else *known = false;
    return rc;
}

/* ---- nets by name ---------------------------------------------------------- */

/* The installed nets' directories in lookup order (vd_cli_find_net), each
 * resolved, the same one once: the running installation's when it exists,
 * then the configured one (listed even when absent: where an installation
 * would put them). Returns the count. */
static int nets_dirs(char dirs[2][PATH_MAX]) {
    int k = 0;
    char exe[PATH_MAX], rel[PATH_MAX + 64];
    ssize_t len = VD_BIN_TO_NETS[0] ? readlink("/proc/self/exe", exe, sizeof exe - 1) : -1;
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');   /* the executable's directory */
        if (slash) *slash = 0;
        snprintf(rel, sizeof rel, "%s/%s", exe, VD_BIN_TO_NETS);
        if (slash && realpath(rel, dirs[k])) k++;
    }
    if (!realpath(VD_NETS_DIR, dirs[k])) snprintf(dirs[k], PATH_MAX, "%s", VD_NETS_DIR);
    if (k == 0 || strcmp(dirs[0], dirs[1]) != 0) k++;
    return k;
}

char *vd_cli_nets_help(char *buf, size_t n) {
    char dirs[2][PATH_MAX];
    int k = nets_dirs(dirs);
    snprintf(buf, n, "\nNET.yaml is a spec (vdnn-net(5)) or the name of a net: NAME.yaml in the\n"
             "current directory, else in the installed nets: %s%s%s\n", dirs[0],
             k > 1 ? ", then " : "", k > 1 ? dirs[1] : "");
    return buf;
}

static bool regular_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Nets by name: the *.yaml files of the current directory and the installed
 * nets' directories, the first of each name in lookup order. */
typedef struct net_file { char *name, *path; } net_file;
typedef struct net_list { net_file *f; int n, cap; } net_list;

static void nets_free(net_list *l) {
    for (int i = 0; i < l->n; i++) { vd_free(l->f[i].name); vd_free(l->f[i].path); }
    vd_free(l->f);
}

/* Append (name[0..n), path) to l; path is l's from then on (freed on failure). */
static int nets_push(net_list *l, const char *name, size_t n, char *path, vd_err *e) {
    if (l->n == l->cap) {
        net_file *g = vd_realloc(l->f, sizeof *g * (size_t)(2 * l->cap + 16), e);
        if (!g) { vd_free(path); return VD_ENOMEM; }
        l->f = g;
        l->cap = 2 * l->cap + 16;
    }
    char *nm = vd_strfmt(e, "%.*s", (int)n, name);
    if (!nm) { vd_free(path); return VD_ENOMEM; }
    l->f[l->n++] = (net_file){ nm, path };
    return VD_OK;
}

/* Add dir's (NULL: the current directory's) nets to l, unless l names them
 * already. A directory that cannot be read has none. */
static int nets_add(net_list *l, const char *dir, vd_err *e) {
    DIR *d = opendir(dir ? dir : ".");
    int rc = VD_OK;
    for (struct dirent *de; d && !rc && (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len <= 5 || strcmp(de->d_name + len - 5, ".yaml") != 0) continue;
        bool seen = false;
        for (int i = 0; i < l->n && !seen; i++)
            seen = strlen(l->f[i].name) == len - 5 && !strncmp(l->f[i].name, de->d_name, len - 5);
        if (seen) continue;
        char *path = dir ? vd_strfmt(e, "%s/%s", dir, de->d_name) : vd_strdup(de->d_name, e);
        if (path && !regular_file(path)) { vd_free(path); continue; }
        rc = path ? nets_push(l, de->d_name, len - 5, path, e) : VD_ENOMEM;
    }
    if (d) closedir(d);
    return rc;
}

static int nets_all(net_list *l, vd_err *e) {
    char dirs[2][PATH_MAX];
    int k = nets_dirs(dirs), rc = nets_add(l, NULL, e);
    for (int i = 0; i < k && !rc; i++) rc = nets_add(l, dirs[i], e);
    return rc;
}

int vd_cli_find_net(const char *arg, char *buf, size_t n, const char **path, bool *installed,
                    vd_err *e) {
    size_t len = strlen(arg);
    struct stat st;
    *path = arg;
    *installed = false;
    if (!*arg || stat(arg, &st) == 0 || strchr(arg, '/') ||
        (len >= 5 && !strcmp(arg + len - 5, ".yaml")))
        return VD_OK;   /* a path: its reader reports what is wrong with it */
    if ((size_t)snprintf(buf, n, "%s.yaml", arg) < n && regular_file(buf)) {
        *path = buf;
        return VD_OK;
    }
    char dirs[2][PATH_MAX];
    int k = nets_dirs(dirs);
    for (int i = 0; i < k; i++)
        if ((size_t)snprintf(buf, n, "%s/%s.yaml", dirs[i], arg) < n && regular_file(buf)) {
            *path = buf;
            *installed = true;
            return VD_OK;
        }
    /* nowhere: where it looked, and a near name */
    net_list l = {0};
    int rc = nets_all(&l, e);
    const char **names = rc ? NULL : vd_calloc((size_t)l.n + 1, sizeof *names, e);
    if (names) {
        for (int i = 0; i < l.n; i++) names[i] = l.f[i].name;
        const char *s = vd_suggest(arg, names, l.n);
        rc = vd_errf(e, VD_EIO, "no net '%s': no such file, and no %s.yaml in the current "
                     "directory, nor in %s%s%s (the installed nets)%s%s%s", arg, arg, dirs[0],
                     k > 1 ? " or " : "", k > 1 ? dirs[1] : "", s ? "; did you mean '" : "",
                     s ? s : "", s ? "'?" : "");
    }
    vd_free(names);
    nets_free(&l);
    return rc ? rc : VD_ENOMEM;
}

static int cmp_net(const void *a, const void *b) {
    return strcmp(((const net_file *)a)->name, ((const net_file *)b)->name);
}

int vd_cli_list_nets(vd_err *e) {
    net_list l = {0};
    int rc = nets_all(&l, e);
    if (!rc) {
        qsort(l.f, (size_t)l.n, sizeof *l.f, cmp_net);
        for (int i = 0; i < l.n; i++) printf("%s\t%s\n", l.f[i].name, l.f[i].path);
    }
    nets_free(&l);
    return rc;
}

int vd_cli_parse(int argc, char **argv, const char *prog, void (*usage)(FILE *),
                 const vd_cli_flag *flags, int n, vd_cli_common *c, vd_cli_tool_flag tool,
                 void *ctx, vd_err *e) {
    return vd_cli_parse_args(argc, argv, prog, usage, flags, n, c, tool, NULL, ctx, e);
}

int vd_cli_parse_args(int argc, char **argv, const char *prog, void (*usage)(FILE *),
                      const vd_cli_flag *flags, int n, vd_cli_common *c, vd_cli_tool_flag tool,
                      vd_cli_tool_arg arg, void *ctx, vd_err *e) {
    memset(c, 0, sizeof *c);
    vd_config_init(&c->cfg);
    bool model_ok = false, options = true;
    for (int k = 0; k < n; k++) model_ok |= !strcmp(flags[k].name, "gpu-model");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && arg && !strcmp(a, "--")) { options = false; continue; }
        if (!options || a[0] != '-' || a[1] == 0) {
            if (c->spec && !arg)
                return vd_errf(e, VD_EUSAGE, "unexpected argument '%s' (one NET.yaml only)", a);
            int rc = c->spec ? arg(ctx, a, e) : VD_OK;
            if (!c->spec) c->spec = a;
            if (rc) return rc;
            continue;
        }
        const vd_cli_flag *f;
        const char *val;
        int rc = vd_cli_match(argc, argv, &i, flags, n, &f, &val, e);
        if (rc) return rc;
        const char *name = f->name;
        if (!strcmp(name, "help")) { usage(stdout); return -1; }
        if (!strcmp(name, "version")) { vd_cli_version(prog); return -1; }
        if (!strcmp(name, "list-nets")) { int lr = vd_cli_list_nets(e); return lr ? lr : -1; }
        bool known;
        rc = common_flag(c, name, val, model_ok, &known, e);
        if (!known) rc = tool(ctx, name, val, e);
        if (rc) return rc;
    }
    if (!c->spec && !c->no_spec) return vd_errf(e, VD_EUSAGE, "missing NET.yaml (usage: %s NET.yaml "
                                 "[options]; see --help)", prog);
    bool installed;
    int rc = c->spec ? vd_cli_find_net(c->spec, c->spec_found, sizeof c->spec_found, &c->spec,
                                       &installed, e) : VD_OK;
    if (!rc && c->spec == c->spec_found && installed && !c->quiet)
        fprintf(stderr, "%s: net %s\n", prog, c->spec);
    return rc;
}

void vd_cli_warn_auto_cpu(const char *prog, const vd_session *ses, double iter_s, int64_t iters) {
    if (!ses->backend_why || ses->be->mem_info) return;   /* named, or a device's */
    double total = iter_s * (double)iters;
    if (!(total > VD_CLI_AUTO_CPU_WARN_S)) return;
    fprintf(stderr, "%s: WARNING: --backend auto fell back to the CPU (%s) for a run sized "
            "for a GPU: %lld iterations at a predicted %.3g s each, about %.0f min; pass "
            "--backend cpu to mean it, or run where a GPU is\n", prog, ses->backend_why,
            (long long)iters, iter_s, total / 60.0);
}

/* ---- stop signals ---------------------------------------------------------- */

static volatile sig_atomic_t stop_signal;
static void on_stop_signal(int sig) { stop_signal = sig; }

volatile sig_atomic_t *vd_cli_catch_stop(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    /* a second signal kills at once; SA_RESTART: the signal may land on a
     * loader thread inside read() (stb_image's fread on a network file
     * system), which must not fail with EINTR and turn a clean stop into a
     * "cannot decode image" error. No read or open of vdnn's can block
     * for ever (FIFOs and devices are refused before they are read or
     * written), so nothing restarts for ever. */
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);    /* kill, batch schedulers, container runtimes */
    sigaction(SIGHUP, &sa, NULL);     /* the terminal or ssh session went away */
    return &stop_signal;
}

int vd_cli_stop_check(const char *phase, vd_err *e) {
    return stop_signal ? vd_errf(e, VD_ESTOP, "stopped %s", phase) : VD_OK;
}

int vd_cli_stopped(const char *prog, const vd_err *e) {
    int sig = stop_signal > 0 ? (int)stop_signal : SIGINT;
    fprintf(stderr, "%s: interrupted by %s (%s)\n", prog,
            sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT", e->msg);
    return 128 + sig;
}

/* ---- inputs and outputs --------------------------------------------------- */

int vd_cli_check_paths(const vd_cli_common *c, const vd_run_path *more, int n, vd_err *e) {
    vd_run_path p[19] = {
        { .flag = "the spec", .path = c->spec },
        { .flag = "--profile", .path = c->cfg.profile },
        { .flag = "--profile-out", .path = c->cfg.profile_out, .output = true },
    };
    int k = 3;
    if (n > (int)VD_ARRAY_LEN(p) - k) return vd_errf(e, VD_EINTERNAL, "vd_cli_check_paths: %d", n);
    for (int i = 0; i < n; i++) p[k++] = more[i];
    return vd_run_paths_check(p, k, e);
}

/* ---- plan search progress ------------------------------------------------ */

static struct { const char *prog; double t0, last; } plan_prog;

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void plan_progress(void *ctx, const char *phase, int evals, double best_s) {
    (void)ctx;
    double now = mono_s();
    if (now - plan_prog.t0 < 1.0 || now - plan_prog.last < 1.0) return;
    plan_prog.last = now;
    if (best_s < 0)   /* a search that builds no plan to report (the smallest budget) */
        fprintf(stderr, "%s: %s (%.1f s)\n", plan_prog.prog, phase, now - plan_prog.t0);
    else if (best_s > 0)
        fprintf(stderr, "%s: planning (auto, %.0f s): %s; %d plans built, best so far %.3f ms\n",
                plan_prog.prog, now - plan_prog.t0, phase, evals, 1e3 * best_s);
    else
        fprintf(stderr, "%s: planning (auto, %.0f s): %s; %d plans built, none fits yet\n",
                plan_prog.prog, now - plan_prog.t0, phase, evals);
}

void vd_cli_note_raised(const vd_session *s, const char *prog, bool quiet) {
    char note[512];
    if (!quiet && vd_session_profile_note(s, note, sizeof note))
        fprintf(stderr, "%s: note: %s\n", prog, note);
}

void vd_cli_plan_progress(vd_plan_opts *po, const char *prog, bool quiet) {
    po->stop = &stop_signal;   /* set once vd_cli_catch_stop has run and a signal came */
    po->progress = quiet ? NULL : plan_progress;
    po->progress_ctx = NULL;
    plan_prog.prog = prog;
    plan_prog.t0 = plan_prog.last = mono_s();
}
