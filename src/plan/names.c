/* names.c — names and parsing of the plan's enums, default options, step
 * labels. */
#include <stdio.h>
#include <string.h>
#include "plan/plan.h"

static const char *const policy_names[VD_POLICY_COUNT] = {"none", "all", "conv", "dyn", "auto"};
static const char *const prefetch_names[VD_PREFETCH_COUNT] = {"auto", "paper"};

const char *vd_policy_name(vd_policy p) {
    return (unsigned)p < VD_POLICY_COUNT ? policy_names[p] : "?";
}

int vd_policy_parse(const char *s, vd_policy *out, vd_err *e) {
    for (int i = 0; i < VD_POLICY_COUNT; i++)
        if (strcmp(s, policy_names[i]) == 0) { *out = (vd_policy)i; return VD_OK; }
    const char *sug = vd_suggest(s, policy_names, VD_POLICY_COUNT);
    return vd_errf(e, VD_EUSAGE, "unknown policy '%s'%s%s%s (expected none, all, conv, dyn or auto)",
                   s, sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
}

const char *vd_prefetch_name(vd_prefetch p) {
    return (unsigned)p < VD_PREFETCH_COUNT ? prefetch_names[p] : "?";
}

int vd_prefetch_parse(const char *s, vd_prefetch *out, vd_err *e) {
    for (int i = 0; i < VD_PREFETCH_COUNT; i++)
        if (strcmp(s, prefetch_names[i]) == 0) { *out = (vd_prefetch)i; return VD_OK; }
    const char *sug = vd_suggest(s, prefetch_names, VD_PREFETCH_COUNT);
    return vd_errf(e, VD_EUSAGE, "unknown prefetch mode '%s'%s%s%s (expected auto or paper)",
                   s, sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
}

const char *vd_tensor_kind_name(vd_tensor_kind k) {
    static const char *const n[VD_T_KIND_COUNT] = {
        "params", "optim_state", "grads", "input", "labels", "act", "dact", "aux", "workspace"};
    return (unsigned)k < VD_T_KIND_COUNT ? n[k] : "?";
}

const char *vd_stage_name(vd_stage s) {
    static const char *const n[] = {"on", "off", "no room", "no gain", "n/a"};
    return (unsigned)s < VD_ARRAY_LEN(n) ? n[s] : "?";
}

void vd_plan_opts_init(vd_plan_opts *o) {
    memset(o, 0, sizeof *o);
    o->policy = VD_POLICY_NONE;
    o->prefetch = VD_PREFETCH_AUTO;
    o->fixed_algo = -1;
}

const char *vd_plan_unit_name(const vd_plan *p, const vd_net *net, int u, char *buf, size_t n) {
    const vd_plan_layer *pl = &p->layers[u];
    if (pl->n_chunks > 1)
        snprintf(buf, n, "%s \u00d7%d #%d", net->layers[pl->layer].name, pl->n_chunks, pl->chunk);
    else
        snprintf(buf, n, "%s", net->layers[pl->layer].name);
    return buf;
}

const char *vd_plan_split_summary(const vd_plan *p, const vd_net *net, char *buf, size_t n) {
    int n_split = 0, first = -1, last = -1, kmin = 0, kmax = 0;
    for (int i = 0; i < p->n_layers; i++) {
        int k = p->layers[p->first_unit[i]].n_chunks;
        if (k < 2) continue;
        n_split++;
        if (first < 0) first = i;
        last = i;
        if (!kmin || k < kmin) kmin = k;
        if (k > kmax) kmax = k;
    }
    if (!n_split) snprintf(buf, n, "none");
    else if (kmin == kmax)
        snprintf(buf, n, "%d layer%s in %d batch chunks (%s .. %s)", n_split, n_split > 1 ? "s" : "",
                 kmax, net->layers[first].name, net->layers[last].name);
    else
        snprintf(buf, n, "%d layers in %d to %d batch chunks (%s .. %s)", n_split, kmin, kmax,
                 net->layers[first].name, net->layers[last].name);
    return buf;
}

const char *vd_plan_step_label(const vd_plan *p, const vd_net *net, int s, char *buf, size_t n) {
    char un[VD_NAME_MAX + 32];
    if (s < 0 || s > p->n_steps) snprintf(buf, n, "?");
    else if (s == p->n_steps) snprintf(buf, n, "end");
    else if (p->steps[s].kind == VD_STEP_SGD) snprintf(buf, n, "sgd");
    else snprintf(buf, n, "%s %s", p->steps[s].kind == VD_STEP_FWD ? "fwd" : "bwd",
                  vd_plan_unit_name(p, net, p->steps[s].unit, un, sizeof un));
    return buf;
}
