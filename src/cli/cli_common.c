/* cli_common.c — see cli_common.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vd_config.h"
#include "cli/cli_common.h"
#include "plan/plan.h"

int vd_cli_fail(const char *prog, const vd_err *e) {
    fprintf(stderr, "%s: error: %s\n", prog, e->msg[0] ? e->msg : "unknown error");
    return e->code ? e->code : VD_EINTERNAL;
}

void vd_cli_version(const char *prog) {
    printf("%s %s (cuda backend: %s, blas: %s)\n", prog, VD_VERSION,
           VD_HAVE_CUDA ? "yes" : "no", VD_HAVE_BLAS ? "openblas" : "none");
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
        return vd_errf(e, VD_EUSAGE, "unknown option '--%s'%s%s%s (see --help)", name,
                       s ? "; did you mean '--" : "", s ? s : "", s ? "'?" : "");
    }
    if ((*f)->arg) {
        if (eq) *val = eq + 1;
        else if (*i + 1 < argc) *val = argv[++*i];
        else return vd_errf(e, VD_EUSAGE, "option --%s needs a value", name);
    } else if (eq) {
        return vd_errf(e, VD_EUSAGE, "option --%s takes no value", name);
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

int vd_cli_parse(int argc, char **argv, const char *prog, void (*usage)(FILE *),
                 const vd_cli_flag *flags, int n, vd_cli_common *c, vd_cli_tool_flag tool,
                 void *ctx, vd_err *e) {
    memset(c, 0, sizeof *c);
    c->backend = "auto";
    c->math = "fp32";
    c->prefetch = VD_PREFETCH_AUTO;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (c->spec)
                return vd_errf(e, VD_EUSAGE, "unexpected argument '%s' (one NET.yaml only)", a);
            c->spec = a;
            continue;
        }
        const vd_cli_flag *f;
        const char *val;
        int rc = vd_cli_match(argc, argv, &i, flags, n, &f, &val, e);
        if (rc) return rc;
        const char *name = f->name;
        if (!strcmp(name, "help")) { usage(stdout); return -1; }
        else if (!strcmp(name, "version")) { vd_cli_version(prog); return -1; }
        else if (!strcmp(name, "batch")) { rc = vd_cli_int(name, val, 1, 1 << 24, &c->batch, e); c->has_batch = true; }
        else if (!strcmp(name, "seed")) { rc = vd_cli_int(name, val, 0, INT64_MAX, &c->seed, e); c->has_seed = true; }
        else if (!strcmp(name, "device")) rc = vd_cli_int(name, val, 0, 1024, &c->device, e);
        else if (!strcmp(name, "profile")) c->profile = val;
        else if (!strcmp(name, "profile-out")) c->profile_out = val;
        else if (!strcmp(name, "analytic-profile")) c->analytic = true;
        else if (!strcmp(name, "deterministic")) c->deterministic = true;
        else if (!strcmp(name, "quiet")) c->quiet = true;
        else if (!strcmp(name, "backend")) {
            static const char *const ch[] = {"cpu", "cuda", "auto"};
            rc = vd_cli_choice(name, val, ch, 3, e);
            c->backend = val;
        } else if (!strcmp(name, "math")) {
            static const char *const ch[] = {"fp32", "tf32"};
            rc = vd_cli_choice(name, val, ch, 2, e);
            c->math = val;
        } else if (!strcmp(name, "prefetch")) {
            if ((rc = vd_prefetch_parse(val, &c->prefetch, e))) vd_err_prefix(e, "--prefetch");
        } else rc = tool(ctx, name, val, e);
        if (rc) return rc;
    }
    if (!c->spec) return vd_errf(e, VD_EUSAGE, "missing NET.yaml (usage: %s NET.yaml "
                                 "[options]; see --help)", prog);
    return VD_OK;
}

void vd_cli_session_opts(const vd_cli_common *c, vd_session_opts *so) {
    vd_session_opts_init(so);
    so->backend = c->backend;
    so->device = (int)c->device;
    so->math = strcmp(c->math, "tf32") == 0 ? VD_MATH_TF32 : VD_MATH_FP32;
    so->deterministic = c->deterministic;
    so->profile_path = c->profile;
    so->analytic = c->analytic;
    so->profile_out = c->profile_out;
}

bool vd_cli_stage_input(void) {
    const char *v = getenv("VDNN_STAGE_INPUT");
    return !(v && strcmp(v, "0") == 0);
}
