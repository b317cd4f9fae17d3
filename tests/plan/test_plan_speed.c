/* test_plan_speed.c — the auto search's progress reports (vd_plan_opts
 * progress), that reporting and the search's memo leave the plan as it is
 * (same inputs, same plan), the screened builds the search refines with,
 * the search's work budget and result on ResNet-50, vdnn-plan
 * --quiet, and nets/resnet152.yaml. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "plan_common.h"
#include "plan/plan_internal.h"
#include "plan/search.h"
#include "vdt.h"

typedef struct prog_log {
    int calls, evals_last;
    double best_last;        /* 0: none fits yet */
    bool greedy, refine, trades, kicks, order_ok, evals_ok, best_ok;
} prog_log;

static void on_progress(void *ctx, const char *phase, int evals, double best_s) {
    prog_log *g = ctx;
    g->calls++;
    if (!strncmp(phase, "greedy, start ", 14)) g->greedy = true;
    else if (!strncmp(phase, "refine, start ", 14)) { g->refine = true; g->order_ok &= g->greedy; }
    else if (!strncmp(phase, "trades, layer ", 14)) { g->trades = true; g->order_ok &= g->refine; }
    else if (!strncmp(phase, "kicks", 5)) { g->kicks = true; g->order_ok &= g->refine; }
    else if (!strcmp(phase, "second opinion")) g->order_ok &= g->refine;
    else if (!strcmp(phase, "greedy, the lean start") || !strcmp(phase, "refine, the lean start") ||
             !strcmp(phase, "greedy, the bound's start") || !strcmp(phase, "refine, the bound's start"))
        g->order_ok &= g->refine;   /* the added starts, after the search */
    else if (!strcmp(phase, "fewer copies")) g->order_ok &= g->refine;
    else if (!strcmp(phase, "the update in the backward pass")) g->order_ok &= g->refine;
    else g->order_ok = false;   /* a phase this test does not know */
    g->evals_ok &= evals >= g->evals_last;
    /* the best so far only improves */
    g->best_ok &= best_s >= 0 && (g->best_last == 0 || (best_s > 0 && best_s <= g->best_last));
    g->evals_last = evals;
    g->best_last = best_s;
}

static bool same_plan(const vd_plan *a, const vd_plan *b) {
    if (a->sim.iter_s != b->sim.iter_s || a->hwm != b->hwm || a->n_tensors != b->n_tensors ||
        a->n_intervals != b->n_intervals || a->n_actions != b->n_actions)
        return false;
    for (int t = 0; t < a->n_tensors; t++)
        if (a->tensors[t].offload != b->tensors[t].offload ||
            a->tensors[t].recompute_step != b->tensors[t].recompute_step)
            return false;
    for (int k = 0; k < a->n_intervals; k++)
        if (a->intervals[k].offset != b->intervals[k].offset) return false;
    for (int i = 0; i < a->n_layers; i++)
        if (a->layers[i].algo_fwd != b->layers[i].algo_fwd) return false;
    return true;
}

/* same_plan, and every tensor (its name as a string), unit and interval
 * the same bytes */
static void same_bytes(const vd_plan *a, const vd_plan *b) {
    ck_assert(same_plan(a, b));
    const size_t keep = offsetof(vd_tensor, kind);
    for (int t = 0; t < a->n_tensors; t++) {
        ck_assert_str_eq(a->tensors[t].name, b->tensors[t].name);
        ck_assert(!memcmp((const char *)&a->tensors[t] + keep, (const char *)&b->tensors[t] + keep,
                          sizeof a->tensors[t] - keep));
    }
    ck_assert(!memcmp(a->layers, b->layers, (size_t)a->n_units * sizeof *a->layers));
    ck_assert(!memcmp(a->intervals, b->intervals, (size_t)a->n_intervals * sizeof *a->intervals));
}

/* nets/tiny-resnet.yaml at batch 64 on the analytic H200 profile, halfway
 * between auto's smallest budget and none's peak: the search runs every
 * phase and reports each, in order, with the plans built never going down
 * and the best so far never getting slower; the plan is the one built
 * without a progress callback, and the same again (deterministic), whose
 * search reports as the first did. */
START_TEST(test_progress_reports) {
    vd_net net;
    load_shipped_net(&net, "tiny-resnet.yaml", 64);
    vd_profile prof;
    analytic_profile(&net, 64, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(64, VD_POLICY_NONE);
    vd_plan p0, p1, p2;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p0, &e) == 0, "%s", e.msg);
    uint64_t peak = p0.hwm, lo = 0;
    vd_plan_free(&p0);
    o.policy = VD_POLICY_AUTO;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &lo, &e) == 0, "%s", e.msg);
    ck_assert_uint_lt(lo, peak);
    o.budget = lo + (peak - lo) / 2;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p0, &e) == 0, "%s", e.msg);
    prog_log g = {.order_ok = true, .evals_ok = true, .best_ok = true};
    o.progress = on_progress;
    o.progress_ctx = &g;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p1, &e) == 0, "%s", e.msg);
    ck_assert_int_gt(g.calls, 3);
    ck_assert(g.greedy && g.refine && g.trades && g.kicks);
    ck_assert(g.order_ok && g.evals_ok && g.best_ok);
    ck_assert_int_gt(g.evals_last, 0);
    /* the plan returned is at least as fast as the best the search reported
     * (a paper policy's plan may beat it) */
    ck_assert(g.best_last > 0 && p1.sim.iter_s <= g.best_last);
    ck_assert(same_plan(&p0, &p1));
    /* the search's state is its own (struct vdp_search): a second search
     * reports the same plans built and the same best, nothing carried over */
    prog_log g2 = {.order_ok = true, .evals_ok = true, .best_ok = true};
    o.progress_ctx = &g2;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p2, &e) == 0, "%s", e.msg);
    ck_assert(same_plan(&p1, &p2));
    ck_assert_int_eq(g2.evals_last, g.evals_last);
    ck_assert(g2.best_last == g.best_last);
    vd_plan_free(&p0);
    vd_plan_free(&p1);
    vd_plan_free(&p2);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* vdp_build_screened on tiny-resnet b64, every other feature map offloaded
 * and every fourth recomputed, at none's peak: with no screen, or one above
 * the plan's predicted iteration, it is vdp_build_fixed's plan (exact);
 * with a screen below, no plan faster than the screen comes back, the bound
 * it reports is no more than the plan's (a bound: the build would not beat
 * it), and it costs less work. With quick staging (no screen) it predicts
 * the same iteration (within the staging search's 1e-9) with the staging
 * copy issued no later, at less work, and says so (stage_quick). */
START_TEST(test_screened_build) {
    vd_net net;
    load_shipped_net(&net, "tiny-resnet.yaml", 64);
    vd_profile prof;
    analytic_profile(&net, 64, &vd_device_h200, &prof);
    int L = net.n_layers;
    vd_plan_opts o = plan_opts(64, VD_POLICY_NONE);
    vd_plan P, F, S;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &P, &e) == 0, "%s", e.msg);
    o.budget = P.hwm;
    vd_plan_free(&P);
    vd_disp *disp = calloc((size_t)L + 1, sizeof *disp);
    int *algos = calloc(2 * (size_t)L, sizeof *algos);
    ck_assert(disp && algos);
    for (int k = 0; k <= L; k++)
        disp[k] = k == L ? VD_DISP_AUTO : k % 4 == 1 ? VD_DISP_RECOMPUTE
                : k % 2 ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
    o.policy = VD_POLICY_AUTO;
    o.disp = disp;
    vdp_opts_algos(&prof, &o, L, algos);
    ck_assert_msg(vdp_build_fixed(&net, &prof, &o, VD_POLICY_AUTO, algos, NULL, &F, &e) == 0,
                  "%s", e.msg);
    ck_assert(F.feasible);
    ck_assert(F.offload_bytes > 0);
    double t = F.sim.iter_s, lb = 0, cost_full = 0, cost_lo = 0;
    bool exact = false;
    /* the builds share their tensors, as a search's do: from the second on
     * they are the first's (vdp_tcache) */
    vdp_tcache *tc = vdp_tcache_new();
    ck_assert_ptr_nonnull(tc);
    const double screens[3] = {0.0, 1.5 * t, 0.5 * t};
    for (int k = 0; k < 3; k++) {
        double cost = 0;
        int rc = vdp_build_screened(&net, &prof, &o, VD_POLICY_AUTO, algos, screens[k], false, tc,
                                    &S, &exact, &lb, &cost, NULL, &e);
        ck_assert_double_gt(cost, 0);
        if (k < 2) {
            ck_assert_msg(rc == VD_OK, "screen %g: rc %d (%s)", screens[k], rc, e.msg);
            ck_assert(exact);
            ck_assert(same_plan(&F, &S));
            ck_assert_double_eq(lb, t);
            vd_plan_free(&S);
            if (k == 0) cost_full = cost;
        } else {
            ck_assert_msg(rc == VDP_SCREENED || rc == VD_OK || rc == VD_EBUDGET, "rc %d (%s)", rc, e.msg);
            if (rc != VDP_SCREENED) {
                ck_assert(!exact);
                ck_assert(!S.feasible || S.sim.iter_s >= screens[k]);
                vd_plan_free(&S);
            }
            ck_assert_double_le(lb, t);
            ck_assert_double_ge(lb, screens[k]);
            cost_lo = cost;
        }
    }
    ck_assert_double_lt(cost_lo, cost_full);
    ck_assert_int_eq(F.stage, VD_STAGE_ON);
    ck_assert(!F.stage_quick);
    double cost_quick = 0;
    ck_assert_msg(vdp_build_screened(&net, &prof, &o, VD_POLICY_AUTO, algos, 0.0, true, tc, &S,
                                     &exact, &lb, &cost_quick, NULL, &e) == 0, "%s", e.msg);
    ck_assert(S.stage_quick);
    ck_assert_int_eq(S.stage, VD_STAGE_ON);
    /* 1e-9: the staging search's own tolerance between the two steps */
    ck_assert_msg(fabs(S.sim.iter_s - t) <= 1e-9 * t, "quick %.12g vs %.12g", S.sim.iter_s, t);
    ck_assert_int_le(S.stage_step, F.stage_step);
    ck_assert_double_lt(cost_quick, cost_full);
    vd_plan_free(&S);
    vd_plan_free(&F);
    vdp_tcache_free(tc);
    free(disp);
    free(algos);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* Builds that share their tensors (vdp_tcache, as a search's builds do)
 * are the builds without: tiny-resnet b64 at none's peak and at 60% of it
 * (where builds fail to fit and retry without the gradient aliasing), a
 * sequence of dispositions and two sets of options (the cache hit, missed,
 * then hit again), each built screenless with the cache and by
 * vdp_build_fixed: the same outcome, every tensor, unit and interval the
 * same bytes; vdp_recomputed_layers the same layers. */
START_TEST(test_tcache_same_builds) {
    vd_net net;
    load_shipped_net(&net, "tiny-resnet.yaml", 64);
    vd_profile prof;
    analytic_profile(&net, 64, &vd_device_h200, &prof);
    int L = net.n_layers;
    vd_plan_opts o = plan_opts(64, VD_POLICY_NONE);
    vd_plan P;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &P, &e) == 0, "%s", e.msg);
    uint64_t peak = P.hwm;
    vd_plan_free(&P);
    vd_disp *disp = calloc((size_t)L + 1, sizeof *disp);
    int *algos = calloc(2 * (size_t)L, sizeof *algos);
    bool *rc_a = calloc((size_t)L, sizeof *rc_a), *rc_b = calloc((size_t)L, sizeof *rc_b);
    vdp_tcache *tc = vdp_tcache_new();
    ck_assert(disp && algos && rc_a && rc_b && tc);
    o.policy = VD_POLICY_AUTO;
    o.disp = disp;
    vdp_opts_algos(&prof, &o, L, algos);
    int other = -1;   /* a layer with a second option */
    for (int i = 0; i < L && other < 0; i++) if (prof.layers[i].n_algos > 1) other = i;
    ck_assert_int_ge(other, 0);
    int fits = 0, not_fit = 0;
    for (int j = 0; j < 16; j++) {
        o.budget = j < 8 ? peak : peak / 10 * 6;
        for (int k = 0; k <= L; k++)
            disp[k] = k == L ? VD_DISP_AUTO : (k + j) % 5 == 1 ? VD_DISP_RECOMPUTE
                    : (k * j) % 3 == 1 ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
        algos[other] = j % 8 == 5 ? 1 : 0;   /* a miss, then hits again */
        vd_plan A, B;
        vd_err ea = {0}, eb = {0};
        bool exact = false;
        double lb = 0, cost = 0;
        int ra = vdp_build_screened(&net, &prof, &o, VD_POLICY_AUTO, algos, 0.0, false, tc, &A,
                                    &exact, &lb, &cost, NULL, &ea);
        int rb = vdp_build_fixed(&net, &prof, &o, VD_POLICY_AUTO, algos, NULL, &B, &eb);
        ck_assert_int_eq(ra, rb);
        ck_assert_msg(rb == VD_OK || rb == VD_EBUDGET, "%d: rc %d (%s)", j, rb, eb.msg);
        fits += rb == VD_OK;
        not_fit += rb == VD_EBUDGET;
        same_bytes(&A, &B);
        vd_plan_free(&A);
        vd_plan_free(&B);
        ck_assert_int_eq(vdp_recomputed_layers(&net, &prof, &o, algos, tc, rc_a, &e), 0);
        ck_assert_int_eq(vdp_recomputed_layers(&net, &prof, &o, algos, NULL, rc_b, &e), 0);
        ck_assert(!memcmp(rc_a, rc_b, (size_t)L * sizeof *rc_a));
    }
    ck_assert_int_gt(fits, 0);
    ck_assert_int_gt(not_fit, 0);
    vdp_tcache_free(tc);
    free(disp); free(algos); free(rc_a); free(rc_b);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* tiny-resnet b64 on the analytic H200 profile, with none's peak (*peak)
 * and policy pol's smallest budget (*lo): the range the tests below walk;
 * *o is pol's options at batch 64. */
static void tiny_resnet_range(vd_net *net, vd_profile *prof, vd_policy pol, vd_plan_opts *o,
                              uint64_t *lo, uint64_t *peak) {
    load_shipped_net(net, "tiny-resnet.yaml", 64);
    analytic_profile(net, 64, &vd_device_h200, prof);
    *o = plan_opts(64, VD_POLICY_NONE);
    vd_plan P;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(net, prof, o, &P, &e) == 0, "%s", e.msg);
    *peak = P.hwm;
    vd_plan_free(&P);
    o->policy = pol;
    *lo = 0;
    ck_assert_msg(vd_plan_min_budget(net, prof, o, lo, &e) == 0, "%s", e.msg);
}

/* A screened build that does not fit with the gradients aliased is not
 * built again without (build_fixed): then it reports a bound, not a plan,
 * and the bound holds for the plan vdp_build_fixed gets with its retry.
 * tiny-resnet b64 (analytic H200) at 40 budgets from auto's smallest up
 * to none's peak, dispositions that vary with the budget, each built by
 * vdp_build_fixed and screened (a screen no variant reaches, 10 s): the
 * same plan where the screened build fits (exact); where it does not, its
 * bound at most vdp_build_fixed's iteration when that one fits; where no
 * variant's live bytes fit, vdp_build_fixed does not fit either. Some
 * budgets must take that way (vdp_build_fixed fits, the screened does
 * not), some fit both ways. */
START_TEST(test_screened_no_retry) {
    vd_net net;
    vd_profile prof;
    vd_plan_opts o;
    uint64_t lo, peak;
    tiny_resnet_range(&net, &prof, VD_POLICY_AUTO, &o, &lo, &peak);
    int L = net.n_layers;
    vd_disp *disp = calloc((size_t)L + 1, sizeof *disp);
    int *algos = calloc(2 * (size_t)L, sizeof *algos);
    ck_assert(disp && algos);
    o.disp = disp;
    vdp_opts_algos(&prof, &o, L, algos);
    int skipped = 0, both = 0;
    for (int j = 0; j < 40; j++) {
        o.budget = (lo + (peak - lo) / 40 * (uint64_t)j) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        for (int k = 0; k <= L; k++)
            disp[k] = k == L ? VD_DISP_AUTO : (k + j) % 3 == 1 ? VD_DISP_OFFLOAD
                    : (k * j) % 5 == 1 ? VD_DISP_RECOMPUTE : VD_DISP_KEEP;
        vd_plan F, S;
        vd_err ef = {0}, es = {0};
        int rf = vdp_build_fixed(&net, &prof, &o, VD_POLICY_AUTO, algos, NULL, &F, &ef);
        ck_assert_msg(rf == VD_OK || rf == VD_EBUDGET, "%s", ef.msg);
        bool exact = false;
        double lb = 0, cost = 0;
        int rs = vdp_build_screened(&net, &prof, &o, VD_POLICY_AUTO, algos, 10.0, false, NULL, &S,
                                    &exact, &lb, &cost, NULL, &es);
        ck_assert_msg(rs == VD_OK || rs == VD_EBUDGET || rs == VDP_SCREENED, "%d: rc %d (%s)", j, rs,
                      es.msg);
        if (rs == VDP_SCREENED) {   /* no variant's live bytes fit */
            ck_assert_int_eq(rf, VD_EBUDGET);
            vd_plan_free(&F);
            continue;
        }
        if (rs == VD_OK) {
            ck_assert_int_eq(rf, VD_OK);
            ck_assert(exact);
            same_bytes(&F, &S);
            both++;
        } else if (rf == VD_OK) {   /* vdp_build_fixed's retry fits */
            ck_assert(!exact);
            ck_assert_double_le(lb, F.sim.iter_s);
            skipped++;
        }
        vd_plan_free(&F);
        vd_plan_free(&S);
    }
    ck_assert_int_gt(skipped, 0);
    ck_assert_int_gt(both, 0);
    free(disp); free(algos);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The paper's dyn search as it was written before vdp_build_fits: each
 * try of its greedy over the options built in full (vdp_build_fixed),
 * the plan of the last that fits kept. *tries / *taken count the greedy's
 * builds and those that fit. */
static int dyn_reference(const vd_net *net, const vd_profile *prof, const vd_plan_opts *o,
                         vd_plan *out, int *tries, int *taken, vd_err *e) {
    int L = net->n_layers;
    int *algos = calloc(2 * (size_t)L, sizeof *algos);
    ck_assert(algos);
    static const vd_policy order[3] = {VD_POLICY_NONE, VD_POLICY_CONV, VD_POLICY_ALL};
    for (int i = 0; i < L; i++) {   /* fastest (fwd + bwd), then least workspace */
        const vd_profile_layer *pl = &prof->layers[i];
        int f = 0;
        for (int k = 1; k < pl->n_algos; k++)
            if (pl->algos[k].fwd_s + pl->algos[k].bwd_s < pl->algos[f].fwd_s + pl->algos[f].bwd_s) f = k;
        algos[i] = algos[L + i] = f;
    }
    for (int k = 0; k < 3; k++) {
        int rc = vdp_build_fixed(net, prof, o, order[k], algos, NULL, out, e);
        if (rc != VD_EBUDGET) { free(algos); return rc; }
        vd_plan_free(out);
    }
    for (int i = 0; i < L; i++) {
        const vd_profile_layer *pl = &prof->layers[i];
        int m = 0;
        for (int k = 1; k < pl->n_algos; k++) {
            const vd_profile_algo *a = &pl->algos[k], *b = &pl->algos[m];
            if (a->workspace < b->workspace ||
                (a->workspace == b->workspace && a->fwd_s + a->bwd_s < b->fwd_s + b->bwd_s))
                m = k;
        }
        algos[i] = algos[L + i] = m;
    }
    int rc = vdp_build_fixed(net, prof, o, VD_POLICY_ALL, algos, NULL, out, e);
    for (int i = 0; rc == VD_OK && i < L; i++) {
        const vd_profile_layer *pl = &prof->layers[i];
        int cur = algos[i];
        /* the faster options, fastest first (policy.c's exchange sort) */
        int idx[VD_PROFILE_MAX_ALGOS], n = 0;
        double cur_t = pl->algos[cur].fwd_s + pl->algos[cur].bwd_s;
        for (int k = 0; k < pl->n_algos; k++)
            if (pl->algos[k].fwd_s + pl->algos[k].bwd_s < cur_t) idx[n++] = k;
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                if (pl->algos[idx[b]].fwd_s + pl->algos[idx[b]].bwd_s <
                    pl->algos[idx[a]].fwd_s + pl->algos[idx[a]].bwd_s) {
                    int t = idx[a]; idx[a] = idx[b]; idx[b] = t;
                }
        for (int a = 0; a < n; a++) {
            algos[i] = algos[L + i] = idx[a];
            vd_plan T;
            vd_err te = {0};
            int r2 = vdp_build_fixed(net, prof, o, VD_POLICY_ALL, algos, NULL, &T, &te);
            ck_assert_msg(r2 == VD_OK || r2 == VD_EBUDGET, "%s", te.msg);
            ++*tries;
            if (r2 == VD_OK) { vd_plan_free(out); *out = T; cur = idx[a]; ++*taken; break; }
            vd_plan_free(&T);
        }
        algos[i] = algos[L + i] = cur;
    }
    free(algos);
    return rc;
}

/* vdp_build_fits answers what vdp_build_fixed's outcome does, and the dyn
 * policy, whose greedy asks it, plans what it did when each of its tries
 * was a full build (dyn_reference): tiny-resnet b64 (analytic H200) at 13
 * budgets from dyn's smallest up by a hundredth of the way to none's peak
 * each, where the greedy has tries that fit and tries that do not, and
 * where some configurations fit only with the paper's prefetch rule (the
 * variant vdp_build_fits tries first); at each, the fits of policies none,
 * conv and all and of auto with dispositions, a quarter of the layers at
 * their last option. */
START_TEST(test_fits_same_answer) {
    vd_net net;
    vd_profile prof;
    vd_plan_opts o;
    uint64_t lo, peak;
    tiny_resnet_range(&net, &prof, VD_POLICY_DYN, &o, &lo, &peak);
    int L = net.n_layers;
    vd_err e = {0};
    ck_assert_uint_lt(lo, peak);
    vd_disp *disp = calloc((size_t)L + 1, sizeof *disp);
    int *algos = calloc(2 * (size_t)L, sizeof *algos);
    ck_assert(disp && algos);
    int tries = 0, taken = 0, fits = 0, not_fit = 0;
    for (int j = 0; j <= 12; j++) {
        o.budget = (lo + (peak - lo) / 100 * (uint64_t)j) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        o.policy = VD_POLICY_DYN;
        vd_plan A, B;
        vd_err ea = {0}, eb = {0};
        int ra = vd_plan_build(&net, &prof, &o, &A, &ea);
        int rb = dyn_reference(&net, &prof, &o, &B, &tries, &taken, &eb);
        ck_assert_int_eq(ra, rb);
        ck_assert_msg(rb == VD_OK || rb == VD_EBUDGET, "%d: rc %d (%s)", j, rb, eb.msg);
        same_bytes(&A, &B);
        vd_plan_free(&A);
        vd_plan_free(&B);
        static const vd_policy pols[4] = {VD_POLICY_NONE, VD_POLICY_CONV, VD_POLICY_ALL, VD_POLICY_AUTO};
        for (int k = 0; k < 4; k++) {
            o.policy = pols[k];
            o.disp = k == 3 ? disp : NULL;
            for (int q = 0; q <= L; q++)
                disp[q] = q == L ? VD_DISP_AUTO : (q + j) % 4 == 1 ? VD_DISP_RECOMPUTE
                        : (q * j) % 3 == 1 ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
            vdp_opts_algos(&prof, &o, L, algos);
            for (int i = 0; i < L; i++)
                if ((i + j + k) % 4 == 0) algos[i] = algos[L + i] = prof.layers[i].n_algos - 1;
            bool f = false;
            ck_assert_int_eq(vdp_build_fits(&net, &prof, &o, pols[k], algos, &f, &e), 0);
            int rc = vdp_build_fixed(&net, &prof, &o, pols[k], algos, NULL, &B, &eb);
            ck_assert_msg(rc == VD_OK || rc == VD_EBUDGET, "%s", eb.msg);
            ck_assert_int_eq(f, rc == VD_OK);
            fits += f;
            not_fit += !f;
            vd_plan_free(&B);
            o.disp = NULL;
        }
    }
    /* the greedy and the fits were tried both ways */
    ck_assert_int_gt(taken, 0);
    ck_assert_int_gt(tries, taken);
    ck_assert_int_gt(fits, 0);
    ck_assert_int_gt(not_fit, 0);
    free(disp); free(algos);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* Refine on a plan that does not stall tries no slower option (its compute
 * stream runs back to back: a slower option only adds to it). tiny-resnet
 * b64, every convolution given a second option 1e-4 slower in both passes
 * with no workspace (the first needs 1 MiB), everything kept and every
 * disposition fixed, so that refine only tries options: it builds nothing
 * (the slower ones, which compute_bound does not rule out by 1e-4, were
 * built one per pass before). */
START_TEST(test_refine_no_stall_options) {
    vd_net net;
    load_shipped_net(&net, "tiny-resnet.yaml", 64);
    vd_profile prof;
    analytic_profile(&net, 64, &vd_device_h200, &prof);
    int convs = 0;
    for (int i = 0; i < net.n_layers; i++) {
        if (net.layers[i].op != VD_OP_CONV) continue;
        vd_profile_layer *pl = &prof.layers[i];
        pl->n_algos = 2;
        pl->algos[1] = pl->algos[0];
        pl->algos[0].workspace = pl->algos[0].fwd_workspace = pl->algos[0].bwd_workspace = 1u << 20;
        pl->algos[1].workspace = pl->algos[1].fwd_workspace = pl->algos[1].bwd_workspace = 0;
        pl->algos[1].fwd_s *= 1.0 + 1e-4;
        pl->algos[1].bwd_s *= 1.0 + 1e-4;
        convs++;
    }
    ck_assert_int_gt(convs, 0);
    /* no copy latency: the labels' copy at the loss, a stall of 5 us in
     * 0.39 ms otherwise, takes none; the loss readback after the last step
     * (no stall) 1 us, above what a slower option adds (compute_bound
     * rules out an option only when the compute alone reaches the plan) */
    prof.dev.launch_s = 0;
    prof.dev.h2d_bw = 1e18;
    prof.dev.d2h_bw = 4e6;
    vd_plan_opts o = plan_opts(64, VD_POLICY_AUTO);
    o.budget = 1ull << 30;
    vdp_search s = {0};
    actx c;
    vd_err e = {0};
    ck_assert_msg(search_ctx_init(&c, &s, &net, &prof, &o, 0, &e) == 0, "%s", e.msg);
    ck_assert(c.algo_free);
    for (int k = 0; k <= c.L; k++) c.fixed[k] = true;
    vd_plan P;
    ck_assert_msg(search_eval(&c, &P, &e) == 0, "%s", e.msg);
    ck_assert(P.feasible);
    ck_assert(P.sim.stall_s <= 1e-4 * P.sim.iter_s);
    for (int j = 0; j < c.L; j++)
        if (net.layers[j].op == VD_OP_CONV) ck_assert_int_eq(c.algos[j], 0);
    int evals = c.evals;
    ck_assert_msg(search_refine(&c, &P, NULL, false, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(c.evals, evals);
    vdp_plan_release(&P);
    search_ctx_free(&c);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

static void count_evals(void *ctx, const char *phase, int evals, double best_s) {
    (void)phase;
    (void)best_s;
    *(int *)ctx = evals;
}

/* ResNet-50 b256 at 8 GiB on the analytic H200 profile: the search plans
 * 158.3615 ms or better (it plans 157.088; 1e-9: the sum's rounding), and
 * within its work budget: vdp_build_auto's phases (the search with the
 * gradient array, to_update's refine, then with effort to spare the search
 * with the room) build 5,046 plans, most of them screened; more than 8,000
 * means the budget no longer holds. About 0.7 s. */
START_TEST(test_resnet50_budget) {
    vd_net net;
    load_shipped_net(&net, "resnet50.yaml", 256);
    vd_profile prof;
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = 8ull << 30;
    int evals = 0;
    o.progress = count_evals;
    o.progress_ctx = &evals;
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    printf("resnet50 b256 8 GiB: predicted %.3f ms, %d plans built\n", p.sim.iter_s * 1e3, evals);
    ck_assert(p.feasible);
    ck_assert_msg(p.sim.iter_s <= 158.3615e-3 * (1.0 + 1e-9), "%.6f ms", p.sim.iter_s * 1e3);
    ck_assert_int_le(evals, 8000);
    ck_assert_int_gt(evals, 0);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* vdnn-plan --quiet: the plan on stdout, nothing on stderr. The search must
 * run over a second (the first progress line is due after one): VGG-16 at
 * batch 4 and 1850M takes 1.4 s here (2 shared cores); tiny-resnet b64 at
 * 4M takes 0.8 s, too short to print anything without --quiet either. */
START_TEST(test_cli_quiet) {
    const char *src = getenv("VD_SRCDIR"), *bld = getenv("VD_BUILDDIR");
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(bld);
    char cmd[4096];
    static char out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s/nets/vgg16.yaml --batch 4 --policy auto "
             "--budget 1850M --quiet 2>&1 >/dev/null", bld, src);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    ck_assert_str_eq(out, "");
}
END_TEST

/* nets/resnet152.yaml: torchvision.models.resnet152's 60,192,808 trainable
 * parameters, 155 convolutions (a batch norm each), one fc, 50 adds. */
START_TEST(test_resnet152) {
    vd_net net;
    load_shipped_net(&net, "resnet152.yaml", 256);
    ck_assert_int_eq(net.n_trainable, 60192808);
    int conv = 0, fc = 0, bn = 0, add = 0;
    for (int i = 0; i < net.n_layers; i++) {
        conv += net.layers[i].op == VD_OP_CONV;
        fc += net.layers[i].op == VD_OP_FC;
        bn += net.layers[i].op == VD_OP_BATCHNORM;
        add += net.layers[i].op == VD_OP_ADD;
    }
    /* 1 stem + 50 blocks x 3 + 4 projections; one fc; a norm per conv */
    ck_assert_int_eq(conv, 155);
    ck_assert_int_eq(fc, 1);
    ck_assert_int_eq(bn, 155);
    ck_assert_int_eq(add, 50);
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("plan_speed", 0, test_progress_reports, test_screened_build, test_tcache_same_builds,
         test_fits_same_answer, test_screened_no_retry,
         test_resnet50_budget, test_cli_quiet, test_resnet152, test_refine_no_stall_options)
