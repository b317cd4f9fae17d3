/* policy.c — the policies other than auto: none, all, conv (one fixed
 * build each) and the paper's dyn search, their minimum budgets, and the
 * algorithm choices they start from. auto.c builds on these. */
#include <stdio.h>
#include <stdlib.h>
#include "plan/plan_internal.h"

static int fastest_algo(const vd_profile_layer *pl) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++)
        if (pl->algos[k].fwd_s + pl->algos[k].bwd_s < pl->algos[best].fwd_s + pl->algos[best].bwd_s)
            best = k;
    return best;
}

/* Per pass: fastest for that pass (ties: less workspace, then lower index). */
int vdp_fastest_pass(const vd_profile_layer *pl, bool bwd) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++) {
        const vd_profile_algo *a = &pl->algos[k], *b = &pl->algos[best];
        double ta = bwd ? a->bwd_s : a->fwd_s, tb = bwd ? b->bwd_s : b->fwd_s;
        if (ta < tb || (ta == tb && vd_profile_algo_ws(a, bwd) < vd_profile_algo_ws(b, bwd)))
            best = k;
    }
    return best;
}

/* Per pass: least workspace for that pass (ties: faster in that pass). */
int vdp_minws_pass(const vd_profile_layer *pl, bool bwd) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++) {
        const vd_profile_algo *a = &pl->algos[k], *b = &pl->algos[best];
        uint64_t wa = vd_profile_algo_ws(a, bwd), wb = vd_profile_algo_ws(b, bwd);
        double ta = bwd ? a->bwd_s : a->fwd_s, tb = bwd ? b->bwd_s : b->fwd_s;
        if (wa < wb || (wa == wb && ta < tb)) best = k;
    }
    return best;
}

static int minws_algo(const vd_profile_layer *pl) {
    int best = 0;
    for (int k = 1; k < pl->n_algos; k++) {
        const vd_profile_algo *a = &pl->algos[k], *b = &pl->algos[best];
        if (a->workspace < b->workspace ||
            (a->workspace == b->workspace && a->fwd_s + a->bwd_s < b->fwd_s + b->bwd_s))
            best = k;
    }
    return best;
}

void vdp_opts_algos(const vd_profile *prof, const vd_plan_opts *opts, int L, int *algos) {
    for (int i = 0; i < L; i++) {
        const vd_profile_layer *pl = &prof->layers[i];
        if (opts->algos) algos[i] = opts->algos[i];
        else if (opts->fixed_algo >= 0)
            algos[i] = opts->fixed_algo < pl->n_algos ? opts->fixed_algo : pl->n_algos - 1;
        else algos[i] = fastest_algo(pl);
        algos[L + i] = opts->algos_bwd ? opts->algos_bwd[i] : algos[i];
    }
}

/* The paper's vDNN_dyn search. fit_only: stop once a plan fits, before the
 * greedy over the options (see vdp_fits_policy). */
static int build_dyn(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     bool fit_only, vd_plan *out, vd_err *e) {
    int L = net->n_layers;
    int *algos = vd_malloc(2 * (size_t)L * sizeof *algos, NULL);   /* [fwd L | bwd L], equal halves */
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    for (int i = 0; i < L; i++) algos[i] = algos[L + i] = fastest_algo(&prof->layers[i]);
    static const vd_policy order[3] = {VD_POLICY_NONE, VD_POLICY_CONV, VD_POLICY_ALL};
    int rc = VD_EBUDGET;
    for (int k = 0; k < 3; k++) {
        /* the first policy that fits is the plan: asked first whether it
         * fits (vdp_build_fits), built only then (fit_only: built at once,
         * its plan the answer) */
        bool fits = true;
        if (!fit_only && (rc = vdp_build_fits(net, prof, opts, order[k], algos, &fits, e))) break;
        if (!fits) { rc = VD_EBUDGET; continue; }
        rc = vdp_build_fixed(net, prof, opts, order[k], algos, NULL, out, e);
        if (rc != VD_EBUDGET) break;
        vdp_plan_release(out);
    }
    if (rc != VD_EBUDGET) { vd_free(algos); return rc; }
    /* All offloaded, least workspace everywhere. */
    for (int i = 0; i < L; i++) algos[i] = algos[L + i] = minws_algo(&prof->layers[i]);
    bool fits = false;
    rc = fit_only ? VD_OK : vdp_build_fits(net, prof, opts, VD_POLICY_ALL, algos, &fits, e);
    /* Greedy per layer, where that fits: the fastest option that still
     * fits. Each try asks only whether it fits (vdp_build_fits); the plan
     * is built once, of the options the greedy ends with (the same plan as
     * its last fitting try's). */
    for (int i = 0; rc == VD_OK && fits && i < L; i++) {
        const vd_profile_layer *pl = &prof->layers[i];
        if (pl->n_algos < 2) continue;
        int cur = algos[i];
        double cur_t = pl->algos[cur].fwd_s + pl->algos[cur].bwd_s;
        /* candidates sorted by time ascending */
        int idx[VD_PROFILE_MAX_ALGOS];
        int n = 0;
        for (int k = 0; k < pl->n_algos; k++)
            if (pl->algos[k].fwd_s + pl->algos[k].bwd_s < cur_t) idx[n++] = k;
        for (int a = 0; a < n; a++)
            for (int c = a + 1; c < n; c++) {
                double ta = pl->algos[idx[a]].fwd_s + pl->algos[idx[a]].bwd_s;
                double tc = pl->algos[idx[c]].fwd_s + pl->algos[idx[c]].bwd_s;
                if (tc < ta) { int tmp = idx[a]; idx[a] = idx[c]; idx[c] = tmp; }
            }
        for (int a = 0; a < n && rc == VD_OK; a++) {
            algos[i] = algos[L + i] = idx[a];
            bool f2 = false;
            rc = vdp_build_fits(net, prof, opts, VD_POLICY_ALL, algos, &f2, e);
            if (rc == VD_OK && f2) { cur = idx[a]; break; }
            algos[i] = algos[L + i] = cur;
        }
        algos[i] = algos[L + i] = cur;
    }
    if (rc == VD_OK) rc = vdp_build_fixed(net, prof, opts, VD_POLICY_ALL, algos, NULL, out, e);
    vd_free(algos);
    return rc;
}

static int build_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        bool fit_only, vd_plan *out, vd_err *e) {
    int L = net->n_layers;
    if (opts->policy == VD_POLICY_AUTO && !opts->forward_only)
        return vd_errf(e, VD_EINTERNAL, "vdp_build_policy(auto)");
    /* dyn searches algorithms only when the caller leaves them free */
    if (opts->policy == VD_POLICY_DYN && !opts->algos && !opts->algos_bwd && opts->fixed_algo < 0)
        return build_dyn(net, prof, opts, fit_only, out, e);
    int *algos = vd_malloc(2 * (size_t)L * sizeof *algos, NULL);   /* [fwd L | bwd L] */
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    vdp_opts_algos(prof, opts, L, algos);
    vd_policy pol = opts->policy == VD_POLICY_DYN ? VD_POLICY_ALL : opts->policy;
    int rc = vdp_build_fixed(net, prof, opts, pol, algos, NULL, out, e);
    vd_free(algos);
    return rc;
}

int vdp_build_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     vd_plan *out, vd_err *e) {
    return build_policy(net, prof, opts, false, out, e);
}

int vdp_fits_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                    vd_plan *out, vd_err *e) {
    return build_policy(net, prof, opts, true, out, e);
}

void vdp_min_budget_progress(const vd_plan_opts *opts, vd_policy pol, int step, uint64_t lo,
                             uint64_t hi) {
    if (!opts->progress) return;
    int left = 0;
    for (uint64_t span = hi > lo ? (hi - lo) / VD_PLAN_ALIGN : 0; span > 1; span = (span + 1) / 2) left++;
    char ph[96];
    snprintf(ph, sizeof ph, "searching the smallest budget (policy %s): step %d of about %d",
             vd_policy_name(pol), step, step + left);
    opts->progress(opts->progress_ctx, ph, step, -1.0);
}

/* Smallest budget that fits opts: the unbounded plan's need, or a binary
 * search below it when offloads or recomputes can lower it. */
static int min_budget_search(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                             uint64_t *min_budget, vd_err *e) {
    int rc;
    vd_plan_opts o = *opts;
    o.budget = 0;
    o.progress = NULL;   /* this search reports its steps itself */
    vd_plan p;
    rc = vdp_build_policy(net, prof, &o, &p, e);
    if (rc) return rc;
    uint64_t hi = p.hwm;
    /* Nothing can be offloaded or recomputed: the need does not depend on
     * the budget. Whether the unbounded plan offloads does not tell: with
     * memory to spare it drops offloads that save nothing (prefetch issued
     * at the release), which a tighter budget keeps. */
    bool any = false;
    for (int t = 0; t < p.n_tensors; t++) any |= p.tensors[t].offload || p.tensors[t].recompute;
    any |= o.policy == VD_POLICY_ALL || o.policy == VD_POLICY_CONV;
    for (int i = 0; o.disp && i <= net->n_layers; i++)
        any |= o.disp[i] == VD_DISP_OFFLOAD || o.disp[i] == VD_DISP_RECOMPUTE;
    bool search = any || o.policy == VD_POLICY_DYN;
    uint64_t lo = p.persistent_bytes;   /* infeasible below this for sure */
    vdp_plan_release(&p);
    if (!search) { *min_budget = hi; return VD_OK; }
    lo = lo > VD_PLAN_ALIGN ? lo - VD_PLAN_ALIGN : 0;
    lo = lo / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
    int step = 0;
    while (hi - lo > VD_PLAN_ALIGN) {
        if (vdp_stopped(opts)) return vd_errf(e, VD_ESTOP, "the smallest-budget search stopped");
        vdp_min_budget_progress(opts, opts->policy, ++step, lo, hi);
        uint64_t mid = lo + (hi - lo) / 2;
        mid = mid / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        if (mid <= lo) mid = lo + VD_PLAN_ALIGN;
        o.budget = mid;
        vd_err te = {0};
        rc = vdp_fits_policy(net, prof, &o, &p, &te);
        if (rc == VD_OK) { hi = mid; vdp_plan_release(&p); }
        else if (rc == VD_EBUDGET) { lo = mid; vdp_plan_release(&p); }
        else { *e = te; return rc; }
    }
    *min_budget = hi;
    return VD_OK;
}

/* vdp_min_budget_policy; known: NULL, or [VD_POLICY_COUNT] with the
 * smallest budgets of none, conv and all under opts (see
 * vdp_min_budget_dyn_from). */
static int min_budget_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                             const uint64_t *known, uint64_t *min_budget, vd_err *e) {
    int rc = VD_OK;
    if (opts->policy == VD_POLICY_AUTO && !opts->forward_only)
        return vd_errf(e, VD_EINTERNAL, "vdp_min_budget_policy(auto)");
    if (opts->policy != VD_POLICY_DYN || opts->algos || opts->algos_bwd || opts->fixed_algo >= 0)
        return min_budget_search(net, prof, opts, min_budget, e);
    /* dyn fits a budget when one of its candidates does: none, conv, all with
     * the fastest algorithms, all with the least workspace. Its minimum is
     * the smallest of theirs (checked with a dyn build; binary search up to
     * the largest of theirs if the heuristics disagree). */
    int L = net->n_layers;
    int *algos = vd_malloc((size_t)L * sizeof *algos, NULL);
    if (!algos) return vd_errf(e, VD_ENOMEM, "out of memory");
    static const vd_policy cand[4] = {VD_POLICY_NONE, VD_POLICY_CONV, VD_POLICY_ALL, VD_POLICY_ALL};
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int k = 0; k < 4 && !rc; k++) {
        for (int i = 0; i < L; i++)
            algos[i] = k < 3 ? fastest_algo(&prof->layers[i]) : minws_algo(&prof->layers[i]);
        vd_plan_opts o = *opts;
        o.policy = cand[k];
        o.algos = algos;
        o.algos_bwd = NULL;
        uint64_t m = 0;
        if (known && k < 3) m = known[cand[k]];   /* the same search, done by the caller */
        else rc = min_budget_search(net, prof, &o, &m, e);
        if (!rc) { if (m < lo) lo = m; if (m > hi) hi = m; }
    }
    vd_free(algos);
    if (rc) return rc;
    vd_plan_opts o = *opts;
    o.budget = lo;
    o.progress = NULL;
    vd_plan p;
    vd_err te = {0};
    rc = vdp_fits_policy(net, prof, &o, &p, &te);
    if (rc == VD_OK || rc == VD_EBUDGET) vdp_plan_release(&p);
    if (rc == VD_OK) { *min_budget = lo; return VD_OK; }
    if (rc != VD_EBUDGET) { *e = te; return rc; }
    for (int step = 5; hi - lo > VD_PLAN_ALIGN; step++) {
        vdp_min_budget_progress(opts, VD_POLICY_DYN, step, lo, hi);
        uint64_t mid = (lo + (hi - lo) / 2) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        if (mid <= lo) mid = lo + VD_PLAN_ALIGN;
        o.budget = mid;
        rc = vdp_fits_policy(net, prof, &o, &p, &te);
        if (rc == VD_OK || rc == VD_EBUDGET) vdp_plan_release(&p);
        if (rc == VD_OK) hi = mid;
        else if (rc == VD_EBUDGET) lo = mid;
        else { *e = te; return rc; }
    }
    *min_budget = hi;
    return VD_OK;
}

int vdp_min_budget_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                          uint64_t *min_budget, vd_err *e) {
    return min_budget_policy(net, prof, opts, NULL, min_budget, e);
}

int vdp_min_budget_dyn_from(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                            const uint64_t *mins, uint64_t *min_budget, vd_err *e) {
    return min_budget_policy(net, prof, opts, mins, min_budget, e);
}
