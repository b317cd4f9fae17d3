/* test_plan_speed.c — the auto search's progress reports (vd_plan_opts
 * progress), that reporting and the search's memo leave the plan as it is
 * (same inputs, same plan), vdnn-plan --quiet, and nets/resnet152.yaml. */
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "plan_common.h"
#include "vdt.h"

typedef struct prog_log {
    int calls, evals_last;
    double best_last;        /* 0: none fits yet */
    bool greedy, refine, kicks, order_ok, evals_ok, best_ok;
} prog_log;

static void on_progress(void *ctx, const char *phase, int evals, double best_s) {
    prog_log *g = ctx;
    g->calls++;
    if (!strncmp(phase, "greedy, start ", 14)) g->greedy = true;
    else if (!strncmp(phase, "refine, start ", 14)) { g->refine = true; g->order_ok &= g->greedy; }
    else if (!strncmp(phase, "kicks", 5)) { g->kicks = true; g->order_ok &= g->refine; }
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

/* nets/tiny-resnet.yaml at batch 64 on the analytic H200 profile, halfway
 * between auto's smallest budget and none's peak: the search runs every
 * phase and reports each, in order, with the plans built never going down
 * and the best so far never getting slower; the plan is the one built
 * without a progress callback, and the same again (deterministic). */
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
    ck_assert(g.greedy && g.refine && g.kicks);
    ck_assert(g.order_ok && g.evals_ok && g.best_ok);
    ck_assert_int_gt(g.evals_last, 0);
    /* the plan returned is at least as fast as the best the search reported
     * (a paper policy's plan may beat it) */
    ck_assert(g.best_last > 0 && p1.sim.iter_s <= g.best_last);
    ck_assert(same_plan(&p0, &p1));
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p2, &e) == 0, "%s", e.msg);
    ck_assert(same_plan(&p1, &p2));
    vd_plan_free(&p0);
    vd_plan_free(&p1);
    vd_plan_free(&p2);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* vdnn-plan --quiet: the plan on stdout, nothing on stderr. The search must
 * run over a second (the first progress line is due after one): VGG-16 at
 * batch 4 and 1850M takes 1.4 s here (2 shared cores); tiny-resnet b64 at
 * 4M, 1.2 s before the placement got faster, takes 0.8 s and printed
 * nothing without --quiet either. */
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

VDT_MAIN("plan_speed", 0, test_progress_reports, test_cli_quiet, test_resnet152)
