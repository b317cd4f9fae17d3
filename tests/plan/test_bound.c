/* test_bound.c — the lower bound with the copies (vd_plan_copy_bound):
 * never above a plan the planner makes (the shipped nets under every
 * policy, the measured profiles), nor above the fastest of every
 * keep / offload / recompute assignment of small nets (exhaustive), the
 * same where the plans that offload nothing run replayed, and above the
 * compute-only bound where copies dominate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <check.h>
#include "testnets.h"
#include "plan_common.h"
#include "plan/plan_internal.h"
#include "vdt.h"

/* A slow link beside a fast device: copies dominate the small nets'
 * iterations, so the copies' part of the bound is what is tested. */
static const vd_device_params slow_copies = {
    .name = "slow-copies", .peak_flops = 2e11, .mem_bw = 2e11,
    .d2h_bw = 2e8, .h2d_bw = 1.5e8, .both_bw = 2.5e8, .launch_s = 5e-6,
};

/* How the plans of a test will run (vd_plan_opts.graph: the replayed
 * tests set AUTO) and how many of them were predicted replayed. */
static vd_graph_mode run_mode = VD_GRAPH_OFF;
static int n_replayed;

/* plan_opts with run_mode. */
static vd_plan_opts opts_of(int batch, vd_policy policy) {
    vd_plan_opts o = plan_opts(batch, policy);
    o.graph = run_mode;
    return o;
}

/* prof as measured with a replayed graph's launches at a fifth of launch_s
 * (vd_device_params.graph_launch_s), where run_mode replays. */
static void replay_launches(vd_profile *prof) {
    if (run_mode != VD_GRAPH_OFF) prof->dev.graph_launch_s = prof->dev.launch_s / 5;
}

/* The bound of training plan p at budget; fails the test on an error. */
static vd_plan_bound bound_of(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                              uint64_t budget) {
    vd_plan_bound b;
    vd_err e = {0};
    ck_assert_msg(vd_plan_copy_bound(net, prof, p, budget, &b, &e) == 0, "%s", e.msg);
    /* never below the compute-only bound, which it contains */
    ck_assert_msg(b.bound_s >= b.compute_s, "bound %.17g < compute-only %.17g", b.bound_s, b.compute_s);
    return b;
}

/* ---- the planner's plans ------------------------------------------------- */

/* The keep-all plan of net (policy none, its own budget), its layers split
 * as in chunks (vd_plan_opts.chunks; NULL: none). */
static void keep_all_split(const vd_net *net, const vd_profile *prof, int batch, const int *chunks,
                           vd_plan *p) {
    vd_plan_opts o = opts_of(batch, VD_POLICY_NONE);
    o.chunks = chunks;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(net, prof, &o, p, &e) == 0, "%s", e.msg);
}

/* Every policy's plan of net under prof at budget (those that fit there):
 * predicted no faster than the bound, computed from that plan and from the
 * keep-all plan ref (any plan's tensors give the same bound). Returns how
 * many plans were checked. */
static int check_policies(const vd_net *net, const vd_profile *prof, int batch, uint64_t budget,
                          const vd_plan *ref, bool with_auto, const char *what) {
    int n = 0;
    vd_plan_bound br = bound_of(net, prof, ref, budget);
    for (int pol = 0; pol < VD_POLICY_COUNT; pol++)
        for (int pf = 0; pf < VD_PREFETCH_COUNT; pf++) {
            /* auto's search takes most of the time: one per budget, where asked */
            if (pol == VD_POLICY_AUTO && (pf || !with_auto)) continue;
            vd_plan_opts o = opts_of(batch, (vd_policy)pol);
            o.prefetch = (vd_prefetch)pf;
            o.budget = budget;
            vd_plan p;
            vd_err e = {0};
            int rc = vd_plan_build(net, prof, &o, &p, &e);
            ck_assert_msg(rc == 0 || rc == VD_EBUDGET, "%s: %s", what, e.msg);
            if (rc == 0 && p.feasible) {
                n_replayed += p.captured;
                vd_plan_bound b = bound_of(net, prof, &p, budget);
                /* a plan that auto split (no unsplit one fits, or the
                 * split plans faster): the bound holds for plans split as
                 * it is, the keep-all one too */
                vd_plan_bound bk = br;
                if (p.n_units != p.n_layers) {
                    int *ch = calloc((size_t)net->n_layers, sizeof *ch);
                    ck_assert_ptr_nonnull(ch);
                    for (int i = 0; i < net->n_layers; i++) ch[i] = p.layers[p.first_unit[i]].n_chunks;
                    vd_plan rs;
                    keep_all_split(net, prof, batch, ch, &rs);
                    bk = bound_of(net, prof, &rs, budget);
                    vd_plan_free(&rs);
                    free(ch);
                }
                ck_assert_msg(b.bound_s <= p.sim.iter_s && bk.bound_s <= p.sim.iter_s,
                              "%s budget %llu policy %s prefetch %s: bound %.17g (from keep-all "
                              "%.17g; compute-only %.17g, %llu bytes must leave) above the "
                              "predicted %.17g", what, (unsigned long long)budget,
                              vd_policy_name(o.policy), vd_prefetch_name(o.prefetch), b.bound_s,
                              bk.bound_s, b.compute_s, (unsigned long long)b.leave_bytes,
                              p.sim.iter_s);
                n++;
            }
            if (rc == 0 || rc == VD_EBUDGET) vd_plan_free(&p);
        }
    return n;
}

/* The keep-all plan of net (policy none, its own budget). */
static void keep_all(const vd_net *net, const vd_profile *prof, int batch, vd_plan *p) {
    keep_all_split(net, prof, batch, NULL, p);
}

/* nets/<file> at batch on the analytic H200 profile: three budgets from the
 * smallest that fits (vd_plan_min_budgets) to none's need, every policy;
 * auto at the budgets whose bit is set in auto_at (its search takes most
 * of the time). */
static void shipped_net(const char *file, int batch, unsigned auto_at) {
    vd_net net;
    load_shipped_net(&net, file, batch);
    vd_profile prof;
    analytic_profile(&net, batch, &vd_device_h200, &prof);
    replay_launches(&prof);
    vd_plan ref;
    keep_all(&net, &prof, batch, &ref);
    vd_plan_opts o = opts_of(batch, VD_POLICY_DYN);
    vd_err e = {0};
    uint64_t mins[VD_POLICY_COUNT];
    ck_assert_msg(vd_plan_min_budgets(&net, &prof, &o, mins, &e) == 0, "%s", e.msg);
    uint64_t lo = mins[VD_POLICY_AUTO], hi = ref.budget;
    ck_assert_uint_le(lo, hi);
    int n = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t b = lo + (hi - lo) * (uint64_t)k / 2;
        n += check_policies(&net, &prof, batch, b, &ref, auto_at >> k & 1, file);
    }
    ck_assert_int_ge(n, 4);   /* none and dyn fit at the last budget at least */
    vd_plan_free(&ref);
    vd_profile_free(&prof);
    vd_net_free(&net);
}

START_TEST(test_sound_shipped_small) {
    shipped_net("lenet.yaml", 64, 7);
    shipped_net("alexnet.yaml", 16, 7);
    shipped_net("vgg16.yaml", 4, 1);
}
END_TEST

START_TEST(test_sound_shipped_googlenet) { shipped_net("googlenet.yaml", 4, 4); }
END_TEST

/* The measured profiles of tests/plan/data (batch 256) at the budgets their
 * tests plan at: each policy's plan no faster than the bound. */
START_TEST(test_sound_measured_profiles) {
    static const struct { const char *net, *profile; uint64_t budget; } cases[] = {
        {"vgg16.yaml", "vgg16-b256-h200-fp32-s9c.json", 12ull << 30},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-api.json", 11ull << 30},
    };
    const char *src = getenv("VD_SRCDIR");
    ck_assert_ptr_nonnull(src);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        vd_net net;
        load_shipped_net(&net, cases[c].net, 256);
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/plan/data/%s", src, cases[c].profile);
        vd_profile prof;
        vd_err e = {0};
        ck_assert_msg(vd_profile_load(path, &net, 256, &prof, &e) == 0, "%s", e.msg);
        vd_plan ref;
        keep_all(&net, &prof, 256, &ref);
        ck_assert_int_ge(check_policies(&net, &prof, 256, cases[c].budget, &ref, c == 0,
                                        cases[c].profile), 1);
        vd_plan_free(&ref);
        vd_profile_free(&prof);
        vd_net_free(&net);
    }
}
END_TEST

/* ---- exhaustive search on small nets ---------------------------------------- */

static int rnd(vd_rng *r, int lo, int hi) { return lo + (int)(vd_rng_u32(r) % (uint32_t)(hi - lo + 1)); }

/* A small net: a chain of conv [+ batch norm] + relu and a pool, or (odd
 * seeds) a branch joined by an add. */
static void small_net(vd_net *net, uint64_t seed, int batch) {
    vd_rng r;
    vd_rng_seed(&r, seed, 31);
    char name[32];
    snprintf(name, sizeof name, "small%llu", (unsigned long long)seed);
    tn_begin(net, name, 3, 16, 16, 4, batch);
    int ch = rnd(&r, 8, 16);
    int x = tn_conv(net, "c0", -1, ch, 3, 1, 1);
    x = tn_relu(net, "r0", x);
    if (seed % 2) {   /* a branch: conv, relu, conv, added to its input */
        int a = tn_conv(net, "b0", x, ch, 3, 1, 1);
        a = tn_relu(net, "b1", a);
        a = tn_conv(net, "b2", a, ch, 3, 1, 1);
        x = tn_join(net, "add", VD_OP_ADD, a, x);
    } else {
        x = tn_conv(net, "c1", x, rnd(&r, 8, 16), 3, 1, 1);
        if (rnd(&r, 0, 1)) x = tn_bn(net, "n1", x);
        x = tn_relu(net, "r1", x);
        x = tn_conv(net, "c2", x, rnd(&r, 8, 16), 3, 1, 1);
        x = tn_relu(net, "r2", x);
        x = tn_pool(net, "p2", x, VD_POOL_AVG, 2, 2);
    }
    x = tn_fc(net, "fc", x, 4);
    tn_loss(net, x);
    tn_finish(net);
}

enum { SMALL_MAX_MAPS = 4, SMALL_BUDGETS = 3 };

/* Every assignment of keep / offload / recompute to the maps of the small
 * net that could leave (x and the layers' outputs with a backward reader
 * and a step between), with both prefetch modes and each option choice:
 * at each of a few budgets, no plan that fits is predicted faster than the
 * bound. Returns the number of budgets where the copies' part is above the
 * compute-only bound. */
static int exhaustive(uint64_t seed) {
    int batch = 32;
    vd_net net;
    small_net(&net, seed, batch);
    vd_profile prof;
    analytic_profile(&net, batch, &slow_copies, &prof);
    replay_launches(&prof);
    vd_plan ref;
    keep_all(&net, &prof, batch, &ref);
    int L = net.n_layers, maps[SMALL_MAX_MAPS], n_maps = 0;
    for (int t = 0; t < ref.n_tensors && n_maps < SMALL_MAX_MAPS; t++) {
        const vd_tensor *T = &ref.tensors[t];
        if ((T->kind == VD_T_ACT || T->kind == VD_T_INPUT) && T->bwd_first - T->fwd_last >= 2)
            maps[n_maps++] = T->kind == VD_T_INPUT ? 0 : T->layer + 1;
    }
    ck_assert_int_ge(n_maps, 2);
    int n_assign = 1;
    for (int k = 0; k < n_maps; k++) n_assign *= 3;
    vd_disp *disp = vd_calloc((size_t)L + 1, sizeof *disp, NULL);
    ck_assert_ptr_nonnull(disp);
    /* budgets: from the least any assignment needs to the keep-all need */
    uint64_t lo = ref.budget, hi = ref.budget;
    for (int a = 0; a < 2 * n_assign; a++) {   /* each assignment, in either option */
        for (int k = 0, v = a / 2; k < n_maps; k++, v /= 3)
            disp[maps[k]] = (vd_disp)(VD_DISP_KEEP + v % 3);
        vd_plan_opts o = opts_of(batch, VD_POLICY_NONE);
        o.disp = disp;
        o.fixed_algo = a % 2 ? 1 : -1;
        vd_plan p;
        vd_err e = {0};
        ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
        if (p.budget < lo) lo = p.budget;
        vd_plan_free(&p);
    }
    ck_assert_uint_lt(lo, hi);
    int active = 0;
    for (int bi = 0; bi < SMALL_BUDGETS; bi++) {
        uint64_t budget = lo + (hi - lo) * (uint64_t)bi / (SMALL_BUDGETS - 1);
        vd_plan_bound b = bound_of(&net, &prof, &ref, budget);
        double best = INFINITY;
        int fits = 0;
        for (int a = 0; a < n_assign; a++)
            for (int pf = 0; pf < VD_PREFETCH_COUNT; pf++)
                for (int algo = -1; algo <= 1; algo += 2) {   /* fastest; the other option */
                    for (int k = 0, v = a; k < n_maps; k++, v /= 3)
                        disp[maps[k]] = (vd_disp)(VD_DISP_KEEP + v % 3);
                    vd_plan_opts o = opts_of(batch, VD_POLICY_NONE);
                    o.disp = disp;
                    o.prefetch = (vd_prefetch)pf;
                    o.fixed_algo = algo;
                    o.budget = budget;
                    vd_plan p;
                    vd_err e = {0};
                    int rc = vd_plan_build(&net, &prof, &o, &p, &e);
                    ck_assert_msg(rc == 0 || rc == VD_EBUDGET, "%s", e.msg);
                    if (rc == 0 && p.feasible) {
                        fits++;
                        n_replayed += p.captured;
                        if (p.sim.iter_s < best) best = p.sim.iter_s;
                        /* the bound from the plan's own tensors too */
                        vd_plan_bound bp = bound_of(&net, &prof, &p, budget);
                        ck_assert_msg(bp.bound_s <= p.sim.iter_s, "%s budget %llu assignment %d: "
                                      "bound %.17g above the plan's %.17g", net.name,
                                      (unsigned long long)budget, a, bp.bound_s, p.sim.iter_s);
                    }
                    vd_plan_free(&p);
                }
        ck_assert_int_ge(fits, 1);
        ck_assert_msg(b.bound_s <= best, "%s budget %llu: bound %.17g (compute-only %.17g, "
                      "copies %.17g, %llu bytes must leave) above the fastest plan %.17g",
                      net.name, (unsigned long long)budget, b.bound_s, b.compute_s, b.copies_s,
                      (unsigned long long)b.leave_bytes, best);
        active += b.copies_s > b.compute_s;
    }
    vd_free(disp);
    vd_plan_free(&ref);
    vd_profile_free(&prof);
    vd_net_free(&net);
    return active;
}

START_TEST(test_sound_exhaustive) {
    int active = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) active += exhaustive(seed);
    /* the copies' part decided the bound somewhere: the check above tested it */
    ck_assert_int_ge(active, 1);
}
END_TEST

/* LeNet's keep-all plan, run replayed against issued op by op: the
 * replayed one is captured and predicted shorter by the launch cut times
 * the steps timed with a launch (those at least launch_s: not the steps a
 * fusion partner took, and the staged input's device copy), and its bound
 * is the replayed figure, below the eager one. */
START_TEST(test_replayed_prediction) {
    vd_net net;
    load_shipped_net(&net, "lenet.yaml", 64);
    vd_profile prof;
    analytic_profile(&net, 64, &vd_device_h200, &prof);
    run_mode = VD_GRAPH_AUTO;
    replay_launches(&prof);
    vd_plan rp, ep;
    keep_all(&net, &prof, 64, &rp);
    run_mode = VD_GRAPH_OFF;
    keep_all(&net, &prof, 64, &ep);
    ck_assert(rp.captured && !ep.captured && rp.graph == VD_GRAPH_AUTO);
    double cut = prof.dev.launch_s - prof.dev.graph_launch_s;
    int launched = 0;
    for (int a = 0; a < rp.n_actions; a++) {
        const vd_action *A = &rp.actions[a];
        if (A->kind == VD_A_COMPUTE) launched += rp.steps[A->arg].compute_s >= prof.dev.launch_s;
        else if (A->kind == VD_A_LOAD_STAGED) launched++;   /* launch + a device copy */
    }
    ck_assert_int_ge(launched, net.n_layers);
    /* the sums differ by rounding only (each step's time one subtraction) */
    ck_assert_msg(fabs(ep.sim.iter_s - rp.sim.iter_s - launched * cut) < 1e-12,
                  "eager %.17g, replayed %.17g, %d launches of %.3g s", ep.sim.iter_s,
                  rp.sim.iter_s, launched, cut);
    vd_plan_bound br = bound_of(&net, &prof, &rp, rp.budget);
    vd_plan_bound be = bound_of(&net, &prof, &ep, ep.budget);
    ck_assert_msg(br.bound_s < be.bound_s && br.bound_s <= rp.sim.iter_s &&
                  be.bound_s > rp.sim.iter_s, "replayed bound %.17g, eager %.17g, replayed plan "
                  "%.17g", br.bound_s, be.bound_s, rp.sim.iter_s);
    vd_plan_free(&rp);
    vd_plan_free(&ep);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The soundness tests above where the plans that offload nothing run
 * replayed (--graph auto) on a profile with a graph_launch_s: those plans
 * predict each op's launch cut (sim.c), and the bound counts them
 * (vd_plan_copy_bound's replayed figure; test_replayed_prediction shows it
 * deciding). Some plans of each part are replayed. */
START_TEST(test_sound_replayed) {
    run_mode = VD_GRAPH_AUTO;
    n_replayed = 0;
    shipped_net("lenet.yaml", 64, 7);
    shipped_net("alexnet.yaml", 16, 1);
    ck_assert_int_ge(n_replayed, 3);
    n_replayed = 0;
    for (uint64_t seed = 1; seed <= 2; seed++) exhaustive(seed);
    ck_assert_int_ge(n_replayed, 4);
    run_mode = VD_GRAPH_OFF;
}
END_TEST

/* ---- useful ------------------------------------------------------------------ */

/* net b256 bf16 on the analytic H200 profile at budget, where the plans
 * stall on their copies: the bound with the copies is above the
 * compute-only one by more than the factor min_ratio. */
static void above_compute(const char *file, uint64_t budget, double min_ratio) {
    vd_net net;
    load_shipped_net(&net, file, 256);
    net.train.math = VD_MATH_BF16;
    vd_profile prof;
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    vd_plan ref;
    keep_all(&net, &prof, 256, &ref);
    vd_plan_bound b = bound_of(&net, &prof, &ref, budget);
    ck_assert_msg(b.bound_s > b.compute_s * min_ratio, "%s at %llu bytes: bound %.6f ms, "
                  "compute-only %.6f ms", file, (unsigned long long)budget, b.bound_s * 1e3,
                  b.compute_s * 1e3);
    vd_plan_free(&ref);
    vd_profile_free(&prof);
    vd_net_free(&net);
}

/* The factors are about half of today's margins (VGG-16 at auto's smallest
 * budget, vdnn-plan --min-budget: 136.0 against 135.3 ms; ResNet-50 at 3.79
 * GiB: 53.2 against 46.9 ms), so that the copies' part must still count. */
START_TEST(test_above_compute_where_copies_dominate) {
    above_compute("vgg16.yaml", 6044082944ull, 1.0025);
    above_compute("resnet50.yaml", 4070000000ull, 1.065);
}
END_TEST

/* ---- the bound's recompute set ------------------------------------------------ */

/* vdp_bound_recompute_set on the small nets (slow copies), from the
 * keep-all budget down: nothing where nothing must leave; else a bound no
 * higher than vd_plan_copy_bound's at its leave step, and each map it names a feature map whose
 * producer is recomputable and whose window holds the leave step, together
 * no more than the bytes that must leave and one map (the cover stops once
 * they are covered); and the auto search's start from it is a plan the
 * planner builds as asked: policy none with those maps RECOMPUTE (the rest
 * kept) recomputes exactly them. Returns how many budgets named a map. */
static int recompute_set(uint64_t seed) {
    int batch = 32;
    vd_net net;
    small_net(&net, seed, batch);
    vd_profile prof;
    analytic_profile(&net, batch, &slow_copies, &prof);
    vd_plan ref;
    keep_all(&net, &prof, batch, &ref);
    int L = net.n_layers, named = 0;
    bool *rc_t = calloc((size_t)ref.n_tensors, sizeof *rc_t);
    vd_disp *disp = calloc((size_t)L + 1, sizeof *disp);
    ck_assert(rc_t && disp);
    uint64_t biggest = 0;
    for (int t = 0; t < ref.n_tensors; t++)
        if (ref.tensors[t].kind == VD_T_ACT && ref.tensors[t].bytes > biggest) biggest = ref.tensors[t].bytes;
    for (int k = 0; k < 8; k++) {
        uint64_t budget = ref.budget - ref.budget / 16 * (uint64_t)k;
        vd_plan_bound b, cb;
        vd_err e = {0};
        ck_assert_msg(vdp_bound_recompute_set(&net, &prof, &ref, budget, rc_t, &b, &e) == 0, "%s", e.msg);
        ck_assert_msg(vd_plan_copy_bound(&net, &prof, &ref, budget, &cb, &e) == 0, "%s", e.msg);
        /* one step's figure: a bound no higher, at the same step */
        ck_assert(b.bound_s <= cb.bound_s && b.compute_s == cb.compute_s);
        ck_assert(b.leave_step == cb.leave_step && b.leave_bytes == cb.leave_bytes);
        uint64_t bytes = 0;
        int n = 0;
        for (int t = 0; t < ref.n_tensors; t++) {
            if (!rc_t[t]) continue;
            const vd_tensor *T = &ref.tensors[t];
            ck_assert_msg(T->kind == VD_T_ACT && T->layer >= 0 &&
                          vd_op_table[net.layers[T->layer].op].recomputable,
                          "%s budget %llu: tensor %d (%s) is no recomputable feature map", net.name,
                          (unsigned long long)budget, t, T->name);
            ck_assert_msg(T->fwd_last < b.leave_step && b.leave_step < T->bwd_first,
                          "%s budget %llu: tensor %d's window %d..%d misses the leave step %d",
                          net.name, (unsigned long long)budget, t, T->fwd_last, T->bwd_first,
                          b.leave_step);
            bytes += T->bytes;
            n++;
        }
        if (b.leave_step < 0 || !isfinite(b.bound_s)) {
            ck_assert_int_eq(n, 0);
            continue;
        }
        ck_assert_msg(bytes < b.leave_bytes + biggest, "%s budget %llu: %llu bytes named, %llu must leave",
                      net.name, (unsigned long long)budget, (unsigned long long)bytes,
                      (unsigned long long)b.leave_bytes);
        if (n == 0) continue;
        named++;
        for (int i = 0; i <= L; i++) disp[i] = VD_DISP_AUTO;
        for (int t = 0; t < ref.n_tensors; t++)
            if (rc_t[t]) disp[ref.tensors[t].layer + 1] = VD_DISP_RECOMPUTE;
        vd_plan_opts o = opts_of(batch, VD_POLICY_NONE);
        o.disp = disp;
        vd_plan p;
        ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
        for (int t = 0; t < ref.n_tensors; t++) {   /* the plan's tensors by name */
            if (ref.tensors[t].kind != VD_T_ACT) continue;
            int q = 0;
            while (q < p.n_tensors && strcmp(p.tensors[q].name, ref.tensors[t].name)) q++;
            ck_assert_int_lt(q, p.n_tensors);
            ck_assert_msg(p.tensors[q].recompute == rc_t[t], "%s budget %llu: %s recomputed %d, "
                          "named %d", net.name, (unsigned long long)budget, ref.tensors[t].name,
                          p.tensors[q].recompute, rc_t[t]);
        }
        vd_plan_free(&p);
    }
    free(rc_t);
    free(disp);
    vd_plan_free(&ref);
    vd_profile_free(&prof);
    vd_net_free(&net);
    return named;
}

START_TEST(test_recompute_set) {
    int named = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) named += recompute_set(seed);
    ck_assert_int_ge(named, 5);   /* about half of the budgets that name maps today: the checks above ran */
}
END_TEST

/* nets/tiny-resnet at batch 64 (slow copies) with the batch norm + add
 * fusion (vd_plan_opts.fuse_bn_add): an add that applies its batch norm is
 * recomputed as any add (its re-run reads the batch norm's statistics,
 * disp.c), so the bound prices its output as recomputable:
 * vdp_bound_recompute_set names maps such adds write (an add's re-run is
 * the cheapest per byte there is) at budgets from the keep-all need down;
 * and auto's plan at one of them, which may recompute them, is no faster
 * than the bound. */
START_TEST(test_bound_fused_adds) {
    int batch = 64, named = 0, fused = 0;
    vd_net net;
    load_shipped_net(&net, "tiny-resnet.yaml", batch);
    vd_profile prof;
    analytic_profile(&net, batch, &slow_copies, &prof);
    vd_plan_opts o = opts_of(batch, VD_POLICY_NONE);
    o.fuse_bn_add = true;
    vd_plan ref;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &ref, &e) == 0, "%s", e.msg);
    for (int u = 0; u < ref.n_units; u++) fused += ref.layers[u].bn_unit >= 0;
    ck_assert_int_ge(fused, 2);
    bool *rc_t = calloc((size_t)ref.n_tensors, sizeof *rc_t);
    ck_assert_ptr_nonnull(rc_t);
    for (int k = 1; k <= 6; k++) {
        uint64_t budget = ref.budget - ref.budget / 10 * (uint64_t)k;
        vd_plan_bound b;
        ck_assert_msg(vdp_bound_recompute_set(&net, &prof, &ref, budget, rc_t, &b, &e) == 0, "%s", e.msg);
        bool any = false;
        for (int u = 0; u < ref.n_units; u++) any |= rc_t[ref.layers[u].y] && ref.layers[u].bn_unit >= 0;
        named += any;
        if (k != 4) continue;   /* auto's search at one of them (its time) */
        vd_plan_opts a = o;
        a.policy = VD_POLICY_AUTO;
        a.budget = budget;
        vd_plan p;
        int rc = vd_plan_build(&net, &prof, &a, &p, &e);
        ck_assert_msg(rc == 0 || rc == VD_EBUDGET, "%s", e.msg);
        if (rc == 0 && p.feasible) {
            vd_plan_bound bp = bound_of(&net, &prof, &p, budget);
            ck_assert_msg(bp.bound_s <= p.sim.iter_s, "budget %llu: bound %.17g above auto's %.17g",
                          (unsigned long long)budget, bp.bound_s, p.sim.iter_s);
        }
        if (rc == 0 || rc == VD_EBUDGET) vd_plan_free(&p);
    }
    ck_assert_int_ge(named, 1);
    free(rc_t);
    vd_plan_free(&ref);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* ---- the option chosen with the absent maps ------------------------------------ */

/* A chain conv c0, relu, conv c1, relu, fc (slow copies, no workspace but
 * c1's) where c1's forward has two options: fast, whose workspace fits
 * beside what step 2 holds only with 0.9 of the input x absent, and
 * SLOW_US microseconds slower with none. At the budget of the keep-all plan with
 * the slow option nothing must leave with it; with the fast one 0.9 of x
 * must, at least 0.9 of its H2D copy, more than the slow option's extra
 * time. So the bound is exactly the slow option's figure at step 2 (all
 * passes' least times, c1's slow one instead of its fast one, and the loss
 * readback), where the compute-only bound counts the fast option: it fails
 * where the bound picks the option apart from the absent maps. Auto's plan
 * there is no faster. */
enum { SLOW_US = 200 };
START_TEST(test_bound_joint_option) {
    int batch = 32;
    vd_net net;
    tn_begin(&net, "joint", 3, 16, 16, 4, batch);
    int x = tn_conv(&net, "c0", -1, 8, 3, 1, 1);
    x = tn_relu(&net, "r0", x);
    int c1 = tn_conv(&net, "c1", x, 8, 3, 1, 1);
    x = tn_relu(&net, "r1", c1);
    x = tn_fc(&net, "fc", x, 4);
    tn_loss(&net, x);
    tn_finish(&net);
    vd_profile prof;
    analytic_profile(&net, batch, &slow_copies, &prof);
    for (int i = 0; i < prof.n_layers; i++)
        for (int k = 0; k < prof.layers[i].n_algos; k++) {
            vd_profile_algo *a = &prof.layers[i].algos[k];
            a->workspace = a->fwd_workspace = a->bwd_workspace = 0;
            a->n_chunks = 0;
        }
    vd_profile_layer *pc = &prof.layers[c1];
    ck_assert_int_ge(pc->n_algos, 1);
    pc->n_algos = 2;
    pc->algos[1] = pc->algos[0];
    pc->algos[1].fwd_s += SLOW_US * 1e-6;
    /* the budget: everything kept, c1 (every layer) on option 1 */
    vd_plan_opts o = opts_of(batch, VD_POLICY_NONE);
    o.fixed_algo = 1;
    vd_plan slow;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &slow, &e) == 0, "%s", e.msg);
    uint64_t budget = slow.budget, held = 0, xb = 0;
    for (int t = 0; t < slow.n_tensors; t++) {
        const vd_tensor *T = &slow.tensors[t];
        if (T->persistent) held += T->bytes;
        if (T->kind == VD_T_INPUT) xb = T->bytes;
    }
    const vd_plan_layer *pl = &slow.layers[c1];   /* unsplit: unit c1 */
    held += slow.tensors[pl->in_t[0]].bytes + slow.tensors[pl->y].bytes;
    ck_assert_uint_gt(xb, 0);
    ck_assert_uint_ge(budget, held + xb);
    uint64_t ws = budget - held - xb / 10;
    pc->algos[0].workspace = pc->algos[0].fwd_workspace = ws;
    /* the compute-only bound counts the fast option (its workspace fits
     * beside c1's tensors), as with no workspace */
    double lb = vd_plan_lower_bound(&net, &prof, &slow, budget);
    pc->algos[0].workspace = pc->algos[0].fwd_workspace = 0;
    ck_assert_double_eq(lb, vd_plan_lower_bound(&net, &prof, &slow, budget));
    pc->algos[0].workspace = pc->algos[0].fwd_workspace = ws;
    vd_plan_bound b = bound_of(&net, &prof, &slow, budget);
    double readback = prof.dev.launch_s + 4.0 / prof.dev.d2h_bw;
    double want = (lb / (1.0 - 1e-12) - vdp_sgd_s(&net, &prof) + SLOW_US * 1e-6 + readback) *
                  (1.0 - 1e-12);
    ck_assert_msg(fabs(b.bound_s - want) <= 1e-12 * want, "bound %.17g, want %.17g (compute-only "
                  "%.17g)", b.bound_s, want, lb);
    ck_assert_int_eq(b.copies_step, c1);
    ck_assert_double_le(b.bound_s, slow.sim.iter_s);
    vd_plan_opts ao = opts_of(batch, VD_POLICY_AUTO);
    ao.budget = budget;
    vd_plan a;
    ck_assert_msg(vd_plan_build(&net, &prof, &ao, &a, &e) == 0, "%s", e.msg);
    ck_assert_double_le(b.bound_s, a.sim.iter_s);
    vd_plan_free(&a);
    vd_plan_free(&slow);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* ---- the window search --------------------------------------------------------- */

enum { WINDOW_KEYS = 5 };

/* vdp_window_search over the small net's WINDOW_KEYS highest keys with a
 * choice, at a budget half way from the least any plan needs to the
 * keep-all need, from auto's plan there: auto's configuration rebuilt
 * predicts auto's iteration; against every keep / offload / recompute
 * request of the window's keys (the rest of the configuration auto's),
 * built through vd_plan_build (policy none, auto's options), the window
 * builds each configuration the planner honours (read back from those
 * plans' tensors: the requests it cannot honour fall back) exactly once,
 * and its best is the fastest of those plans that fit, to the bit. Returns
 * the window's builds. */
static long window_exhaustive(uint64_t seed) {
    int batch = 32;
    vd_net net;
    small_net(&net, seed, batch);
    vd_profile prof;
    analytic_profile(&net, batch, &slow_copies, &prof);
    vd_plan ref;
    keep_all(&net, &prof, batch, &ref);
    int L = net.n_layers;
    vd_plan_opts o = opts_of(batch, VD_POLICY_ALL);
    vd_err e = {0};
    vd_plan lo;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &lo, &e) == 0, "%s", e.msg);
    o = plan_opts(batch, VD_POLICY_AUTO);
    o.budget = lo.budget + (ref.budget - lo.budget) / 2;
    vd_plan A;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &A, &e) == 0, "%s", e.msg);
    ck_assert(A.feasible && A.n_units == L);
    vdp_window w;
    vd_plan W;
    ck_assert_msg(vdp_window_search(&net, &prof, &o, &A, L, WINDOW_KEYS, &w, &W, &e) == 0, "%s", e.msg);
    ck_assert(W.feasible && W.sim.iter_s == w.best_s);   /* the best plan comes back */
    vd_plan_free(&W);
    ck_assert_msg(w.base_s == A.sim.iter_s, "%s: auto's configuration rebuilt %.17g, auto %.17g",
                  net.name, w.base_s, A.sim.iter_s);
    ck_assert_int_ge(w.n_keys, 2);
    /* the requests: auto's dispositions, the window's keys each K, O or R */
    bool *ip = calloc((size_t)L, sizeof *ip);
    vd_disp *disp = calloc((size_t)L + 1, sizeof *disp);
    int *algos = calloc(2 * (size_t)L, sizeof *algos);
    ck_assert(ip && disp && algos);
    vd_schedule_inplace_flags(&net, ip);
    int key_t[VDP_WINDOW_MAX];
    for (int k = 0; k < L; k++) {
        int t = k ? A.layers[A.first_unit[k - 1]].y : A.t_x;
        if (k && (ip[k - 1] || A.tensors[t].layer != k - 1)) continue;   /* AUTO */
        disp[k] = A.tensors[t].offload ? VD_DISP_OFFLOAD
                  : A.tensors[t].recompute ? VD_DISP_RECOMPUTE : VD_DISP_KEEP;
        for (int j = 0; j < w.n_keys; j++)
            if (w.keys[j] == k) key_t[j] = t;
    }
    for (int i = 0; i < L; i++) {
        algos[i] = A.layers[i].algo_fwd;
        algos[L + i] = A.layers[i].algo_bwd;
    }
    int n_assign = 1;
    for (int j = 0; j < w.n_keys; j++) n_assign *= 3;
    bool *seen = calloc((size_t)n_assign, sizeof *seen);
    ck_assert_ptr_nonnull(seen);
    long distinct = 0;
    double best = INFINITY;
    for (int a = 0; a < n_assign; a++) {
        for (int j = 0, v = a; j < w.n_keys; j++, v /= 3) disp[w.keys[j]] = (vd_disp)(VD_DISP_KEEP + v % 3);
        vd_plan_opts q = plan_opts(batch, VD_POLICY_NONE);
        q.budget = o.budget;
        q.disp = disp;
        q.algos = algos;
        q.algos_bwd = algos + L;
        vd_plan p;
        int rc = vd_plan_build(&net, &prof, &q, &p, &e);
        ck_assert_msg(rc == 0 || rc == VD_EBUDGET, "%s", e.msg);
        /* the request as honoured, base 3: a recompute as the plan has it,
         * else an offload asked (or a recompute's fallback) where the map
         * has two absent steps (a build may still keep such a map where
         * the budget has room: the same request), else keep */
        int code = 0;
        for (int j = w.n_keys - 1; j >= 0; j--) {
            const vd_tensor *T = &p.tensors[key_t[j]];
            ck_assert_str_eq(T->name, A.tensors[key_t[j]].name);
            bool off = disp[w.keys[j]] != VD_DISP_KEEP && T->bwd_first - T->fwd_last - 1 >= 2;
            code = 3 * code + (T->recompute ? 2 : off ? 1 : 0);
        }
        distinct += !seen[code];
        seen[code] = true;
        if (rc == 0 && p.feasible && p.sim.iter_s < best) best = p.sim.iter_s;
        vd_plan_free(&p);
    }
    ck_assert_msg(w.builds == distinct, "%s: the window built %ld configurations, the planner "
                  "tells %ld requests apart", net.name, w.builds, distinct);
    ck_assert_msg(w.best_s == best, "%s: the window's best %.17g, the fastest request %.17g",
                  net.name, w.best_s, best);
    free(seen);
    free(algos);
    free(disp);
    free(ip);
    vd_plan_free(&A);
    vd_plan_free(&lo);
    vd_plan_free(&ref);
    vd_profile_free(&prof);
    vd_net_free(&net);
    return w.builds;
}

START_TEST(test_window_exhaustive) {
    long builds = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) builds += window_exhaustive(seed);
    /* 594 today: the checks above ran over many requests */
    ck_assert_int_ge(builds, 300);
}
END_TEST

VDT_MAIN("bound", 600, test_sound_shipped_small,
         test_sound_shipped_googlenet, test_sound_measured_profiles, test_sound_exhaustive,
         test_replayed_prediction, test_sound_replayed,
         test_above_compute_where_copies_dominate, test_recompute_set, test_bound_fused_adds, test_bound_joint_option,
         test_window_exhaustive)
