/* window_search.c — auto's plan at a budget against the best plan of a
 * window of its disposition keys searched exhaustively (vdp_window_search)
 * and against the lower bound (vd_plan_copy_bound): is auto's gap to the
 * bound the search's (a faster plan near auto's) or the bound's? A
 * measurement tool for issue 32 item 3 (docs/results/2026-12-06-s21/
 * bound-gap.md), built beside the tests, not run by them (test_bound's
 * test_window_exhaustive tests vdp_window_search).
 *
 * usage: window_search NET.yaml BATCH MATH PROFILE|analytic BUDGET N [chain] [TOP...]
 *   auto's plan as vdnn-plan NET.yaml --batch BATCH --math MATH [--profile
 *   PROFILE] --budget BUDGET plans it (the analytic H200 profile for
 *   "analytic"), then for each TOP a window of N keys (at most
 *   VDP_WINDOW_MAX) at or below key TOP (0: x, i + 1: layer i's output);
 *   TOP "leave" (the default): the key of the input of the layer whose step
 *   is the bound's leave step (the maps read right after it). "chain": each
 *   window from the previous one's best plan where it is faster (a
 *   large-neighbourhood descent), else each from auto's. One line per
 *   window: its keys (tensor names, auto's disposition -> the best's, K / O /
 *   R), the builds, those that fit, the best's predicted iteration and its
 *   distance to the bound, and the CPU seconds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "config/config.h"
#include "spec/spec.h"
#include "plan/plan_internal.h"

static char disp_ch(vd_disp d) {
    return d == VD_DISP_KEEP ? 'K' : d == VD_DISP_OFFLOAD ? 'O' : d == VD_DISP_RECOMPUTE ? 'R' : '?';
}

/* The name of disposition key k's tensor in p. */
static const char *key_name(const vd_plan *p, int k) {
    if (k == 0) return p->tensors[p->t_x].name;
    return p->tensors[p->layers[p->first_unit[k - 1]].y].name;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s NET.yaml BATCH MATH PROFILE|analytic BUDGET N [chain] [TOP...]\n",
                argv[0]);
        return 2;
    }
    vd_err e = {0};
    vd_net net;
    vd_net_init(&net);
    vd_config c;
    vd_config_init(&c);
    vd_config_run r;
    memset(&r, 0, sizeof r);
    vd_profile prof;
    memset(&prof, 0, sizeof prof);
    vd_plan P;
    memset(&P, 0, sizeof P);
    int status = 1;
    if (vd_spec_load(argv[1], &net, &e)) goto out;
    c.batch = atoi(argv[2]);
    c.has_math = true;
    c.math = VD_MATH_FP32;
    while (strcmp(vd_math_name(c.math), argv[3]))
        if (++c.math > VD_MATH_FP16) { snprintf(e.msg, sizeof e.msg, "math %s?", argv[3]); goto out; }
    c.profile = strcmp(argv[4], "analytic") ? argv[4] : NULL;
    c.budget = strtoull(argv[5], NULL, 10);
    c.has_policy = true;
    c.policy = VD_POLICY_AUTO;
    int n = atoi(argv[6]);
    if (vd_config_resolve(&c, &net, true, &r, &e)) goto out;
    if (vd_config_model_profile(&r, &net, &prof, &e)) goto out;
    vd_config_budget(&r, NULL, &prof);
    clock_t t0 = clock();
    if (vd_plan_build(&net, &prof, &r.plan, &P, &e)) goto out;
    double auto_cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    vd_plan_bound b;
    if (vd_plan_copy_bound(&net, &prof, &P, r.plan.budget, &b, &e)) goto out;
    int leave_key = b.leave_step >= 0 ? P.layers[P.steps[b.leave_step].unit].layer : net.n_layers;
    printf("auto %.3f ms (%.2f s); bound %.3f ms, auto %.1f%% above; leave step %d (%s %s), key %d; "
           "split %s\n", P.sim.iter_s * 1e3, auto_cpu, b.bound_s * 1e3,
           (P.sim.iter_s / b.bound_s - 1) * 100, b.leave_step,
           b.leave_step >= 0 && P.steps[b.leave_step].kind == VD_STEP_BWD ? "bwd" : "fwd",
           b.leave_step >= 0 ? net.layers[P.steps[b.leave_step].layer].name : "-", leave_key,
           P.n_units != P.n_layers ? "yes" : "no");
    /* the windows: argv[7..] (TOP, "leave", or "chain" first), else "leave" */
    bool chain = argc > 7 && !strcmp(argv[7], "chain");
    int a0 = 7 + chain, n_win = argc > a0 ? argc - a0 : 1;
    vd_plan base = P, best;
    for (int a = 0; a < n_win; a++) {
        const char *arg = argc > a0 ? argv[a0 + a] : "leave";
        int top = !strcmp(arg, "leave") ? leave_key : atoi(arg);
        vdp_window w;
        t0 = clock();
        if (vdp_window_search(&net, &prof, &r.plan, &base, top, n, &w, &best, &e)) goto out;
        double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
        printf("window top %d, %d keys:", top, w.n_keys);
        for (int j = 0; j < w.n_keys; j++)
            printf(" %d:%s %c->%c", w.keys[j], key_name(&P, w.keys[j]), disp_ch(w.base[j]),
                   isfinite(w.best_s) ? disp_ch(w.best[j]) : '-');
        printf("\n  builds %ld fit %ld; %s configuration rebuilt %.3f ms; best %.3f ms (%.1f%% above "
               "the bound, %+.3f ms against auto); %.1f s\n", w.builds, w.fits,
               a && chain ? "the last window's best" : "auto's", w.base_s * 1e3, w.best_s * 1e3,
               (w.best_s / b.bound_s - 1) * 100, (w.best_s - P.sim.iter_s) * 1e3, cpu);
        fflush(stdout);
        if (chain && isfinite(w.best_s) && w.best_s < base.sim.iter_s) {
            if (base.tensors != P.tensors) vd_plan_free(&base);
            base = best;
        } else {
            vd_plan_free(&best);
        }
    }
    if (base.tensors != P.tensors) vd_plan_free(&base);
    status = 0;
out:
    if (status) fprintf(stderr, "window_search: %s\n", e.msg);
    vd_plan_free(&P);
    vd_profile_free(&prof);
    vd_config_run_free(&r);
    vd_net_free(&net);
    return status;
}
