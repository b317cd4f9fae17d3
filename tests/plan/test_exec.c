/* test_exec.c — the executor on the CPU backend: end-to-end training,
 * byte identity across policies (recomputation included), fault injection,
 * measured vs planned memory; in fp32 and in bf16 math. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "plan_common.h"
#include "vdt.h"

START_TEST(test_lenet_none_trains) {
    vd_net net;
    tn_lenet(&net, 8);
    run_cfg c = {.policy = VD_POLICY_NONE, .iters = 5, .poison = true, .fixed_algo = -1};
    run_out o;
    run_training(&net, 8, &c, &o);
    ck_assert_msg(o.rc == 0, "%s", o.msg);
    for (int i = 0; i < 5; i++) ck_assert(isfinite(o.loss[i]));
    /* first loss ~ ln(10) for a fresh net: PyTorch init gives small logits */
    ck_assert_msg(fabsf(o.loss[0] - logf(10.0f)) < 0.5f, "loss0 %g", (double)o.loss[0]);
    ck_assert_uint_eq(o.st.live_peak, o.plan_peak);
    ck_assert_uint_eq(o.st.pool_hwm, o.plan_hwm);
    run_free(&o);
    vd_net_free(&net);
}
END_TEST

/* Minimum budget of policy pol for net at batch (CPU backend algorithms,
 * timed with dev's model; NULL: cpu). */
static uint64_t min_budget_dev(const vd_net *net, int batch, vd_policy pol, int fixed_algo,
                               const vd_device_params *dev) {
    vd_plan_opts o = plan_opts(batch, pol);
    o.fixed_algo = fixed_algo;
    return cpu_min_budget(net, &o, dev);
}

static uint64_t min_budget(const vd_net *net, int batch, vd_policy pol, int fixed_algo) {
    return min_budget_dev(net, batch, pol, fixed_algo, NULL);
}

/* Offloading and recomputing change where and when bytes live, not what is
 * computed. In the net's math (net->train.math): fp32, or bf16 / fp16,
 * where the moved feature maps are 2-byte elements. Returns how many tensors auto
 * (slow link) recomputed. */
static int identity_case(vd_net *net, int batch, int iters) {
    /* Same algorithms for every policy (dyn may pick other conv algorithms,
     * which legitimately changes the floating-point results): min-workspace.
     * dyn ignores fixed_algo (its own search), so it runs twice: at a budget
     * of its own (not compared), and at one where offloading everything with
     * the fastest options fits, which dyn then takes (vDNN_dyn tries those
     * first): compared with policy none on the fastest options (0). */
    int algo = 1;
    run_cfg c0 = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = algo};
    run_out refs[2];
    run_training(net, batch, &c0, &refs[1]);
    c0.fixed_algo = 0;
    run_training(net, batch, &c0, &refs[0]);
    ck_assert_msg(refs[0].rc == 0 && refs[1].rc == 0, "%s %s", refs[0].msg, refs[1].msg);
    const char *math = vd_math_name(net->train.math);
    /* The update in the backward pass (the default: each layer's SGD right
     * after its backward op, its gradients freed, and poisoned, after the
     * step) against one gradient array updated at the end: bit-identical,
     * and the parameters' gradients not persistent */
    {
        run_cfg cg = c0;
        cg.grads_persistent = true;
        run_out g;
        run_training(net, batch, &cg, &g);
        ck_assert_msg(g.rc == 0, "%s", g.msg);
        size_t pb = (size_t)net->param_floats * 4;
        ck_assert_msg(!memcmp(g.params, refs[0].params, pb) && !memcmp(g.mom, refs[0].mom, pb),
                      "%s: the update in the backward pass changed the parameters", math);
        for (int i = 0; i < iters; i++) ck_assert(memcmp(&g.loss[i], &refs[0].loss[i], 4) == 0);
        ck_assert_int_eq(g.st.sgd_steps, iters);
        if (net->train.math == VD_MATH_FP16) {
            /* fp16 keeps the array anyway (its loss scaling checks every
             * gradient first): asking for it changes nothing */
            ck_assert_uint_eq(refs[0].plan_persistent, g.plan_persistent);
            ck_assert_uint_eq(refs[0].plan_hwm, g.plan_hwm);
        } else {
            ck_assert_uint_eq(refs[0].plan_persistent + VD_ALIGN_UP(pb, 256), g.plan_persistent);
            ck_assert_msg(refs[0].plan_hwm < g.plan_hwm, "%s: no smaller (%llu vs %llu)", math,
                          (unsigned long long)refs[0].plan_hwm, (unsigned long long)g.plan_hwm);
        }
        run_free(&g);
    }
    /* the last: auto timed with a slow link, where it recomputes */
    static const struct { vd_policy pol; int algo; bool compare; } cases[] = {
        {VD_POLICY_ALL, 1, true}, {VD_POLICY_CONV, 1, true}, {VD_POLICY_DYN, -1, false},
        {VD_POLICY_DYN, 0, true}, {VD_POLICY_AUTO, 1, true}, {VD_POLICY_AUTO, 1, true}};
    int n_cases = (int)VD_ARRAY_LEN(cases);
    int auto_rc = 0;
    for (int k = 0; k < n_cases; k++) {
        vd_policy pol = cases[k].pol;
        const run_out *ref = &refs[cases[k].algo == 0 ? 0 : 1];
        uint64_t none_peak = ref->plan_hwm;
        const vd_device_params *dev = k == n_cases - 1 ? &slow_link : NULL;
        for (int pf = 0; pf < VD_PREFETCH_COUNT; pf++) {
            uint64_t mb = pol == VD_POLICY_DYN && cases[k].algo == 0
                              ? min_budget_dev(net, batch, VD_POLICY_ALL, 0, dev)
                              : min_budget_dev(net, batch, pol, cases[k].algo, dev);
            /* well below none's peak, but feasible for this policy */
            uint64_t budget = mb + (none_peak - mb) / 4;
            ck_assert_msg(mb < none_peak, "%s policy %s min %llu not below none %llu", math,
                          vd_policy_name(pol), (unsigned long long)mb, (unsigned long long)none_peak);
            run_cfg c = {.policy = pol, .prefetch = (vd_prefetch)pf, .budget = budget,
                         .iters = iters, .poison = true, .fixed_algo = cases[k].algo, .dev = dev};
            run_out o;
            run_training(net, batch, &c, &o);
            ck_assert_msg(o.rc == 0, "%s %s: %s", math, vd_policy_name(pol), o.msg);
            ck_assert_msg(o.n_offloaded + o.n_recomputed > 0, "%s %s moves nothing", math,
                          vd_policy_name(pol));
            ck_assert_int_eq(o.st.recompute_ops_iter, o.n_recompute_ops);
            if (k == n_cases - 1) auto_rc += o.n_recomputed;
            ck_assert_uint_le(o.plan_hwm, budget);
            ck_assert_uint_eq(o.st.live_peak, o.plan_peak);
            ck_assert_uint_eq(o.st.pool_hwm, o.plan_hwm);
            ck_assert_uint_eq(o.st.offload_bytes_iter, o.plan_offload);
            ck_assert_uint_eq(o.st.prefetch_bytes_iter, o.plan_prefetch);
            ck_assert_uint_eq(o.st.pool_bytes, budget);
            ck_assert_int_eq(o.st.sgd_steps, iters);
            if (cases[k].compare) {
                ck_assert_msg(memcmp(o.params, ref->params, (size_t)net->param_floats * 4) == 0,
                              "%s %s/%s: parameters differ from policy none", math,
                              vd_policy_name(pol), vd_prefetch_name((vd_prefetch)pf));
                ck_assert_msg(memcmp(o.mom, ref->mom, (size_t)net->param_floats * 4) == 0,
                              "%s %s: momentum differs from policy none", math, vd_policy_name(pol));
                for (int i = 0; i < iters; i++)
                    ck_assert(memcmp(&o.loss[i], &ref->loss[i], 4) == 0);
                ck_assert_int_eq(o.eval_correct, ref->eval_correct);
                ck_assert(memcmp(&o.eval_loss, &ref->eval_loss, 4) == 0);
            }
            run_free(&o);
        }
    }
    run_free(&refs[0]);
    run_free(&refs[1]);
    return auto_rc;
}

/* Minimum budget of policy pol for net at batch with explicit per-pass
 * options (CPU backend, timing model dev; NULL: cpu). */
static uint64_t min_budget_algos(const vd_net *net, int batch, vd_policy pol, const int *af,
                                 const int *ab, const vd_device_params *dev) {
    vd_plan_opts o = plan_opts(batch, pol);
    o.algos = (int *)af;
    o.algos_bwd = ab;
    return cpu_min_budget(net, &o, dev);
}

/* Per-pass conv options on the CPU backend (0 = im2col with workspace,
 * 1 = direct without): the forward call runs the forward option, the
 * backward call the backward one (the first loss depends on the forward
 * option only and matches the one-option run exactly; the parameters after
 * the update depend on the backward option); per-pass plans of every policy
 * at tight budgets (recomputes included) execute with the simulator's live
 * peak and high-water mark and train byte-identically to policy none with
 * the same options. */
static void per_pass_case(vd_net *net, int batch) {
    int L = net->n_layers, iters = 2;
    int *zero = calloc((size_t)L, sizeof(int)), *one = calloc((size_t)L, sizeof(int));
    ck_assert(zero && one);
    for (int i = 0; i < L; i++) one[i] = net->layers[i].op == VD_OP_CONV ? 1 : 0;
    run_out r00, r11;
    run_cfg c00 = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = -1,
                   .algos = zero, .algos_bwd = zero};
    run_cfg c11 = c00;
    c11.algos = one;
    c11.algos_bwd = one;
    run_training(net, batch, &c00, &r00);
    run_training(net, batch, &c11, &r11);
    ck_assert_msg(r00.rc == 0 && r11.rc == 0, "%s %s", r00.msg, r11.msg);
    for (int pat = 0; pat < 2; pat++) {
        const int *af = pat ? one : zero, *ab = pat ? zero : one;
        const run_out *same_fwd = pat ? &r11 : &r00, *same_bwd = pat ? &r00 : &r11;
        run_cfg cn = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = -1,
                      .algos = af, .algos_bwd = ab};
        run_out ref;
        run_training(net, batch, &cn, &ref);
        ck_assert_msg(ref.rc == 0, "per-pass none: %s", ref.msg);
        ck_assert_uint_eq(ref.st.live_peak, ref.plan_peak);
        ck_assert_uint_eq(ref.st.pool_hwm, ref.plan_hwm);
        /* iteration 0's loss: forward only, same forward options -> same bytes */
        ck_assert(memcmp(&ref.loss[0], &same_fwd->loss[0], 4) == 0);
        /* the backward option is really used: the update differs from the
         * run with the forward option for both passes (im2col and direct sum
         * in different orders) and from the one with the backward option for
         * both (different forward) */
        ck_assert(memcmp(ref.params, same_fwd->params, (size_t)net->param_floats * 4) != 0);
        ck_assert(memcmp(ref.params, same_bwd->params, (size_t)net->param_floats * 4) != 0);
        uint64_t none_hwm = ref.plan_hwm;
        static const vd_policy pols[] = {VD_POLICY_ALL, VD_POLICY_CONV, VD_POLICY_AUTO, VD_POLICY_AUTO};
        for (int k = 0; k < 4; k++) {
            const vd_device_params *dev = k == 3 ? &slow_link : NULL;
            uint64_t mb = min_budget_algos(net, batch, pols[k], af, ab, dev);
            ck_assert_uint_le(mb, none_hwm);
            uint64_t budget = mb + (none_hwm - mb) / 4;
            run_cfg c = {.policy = pols[k], .budget = budget, .iters = iters, .poison = true,
                         .fixed_algo = -1, .dev = dev, .algos = af, .algos_bwd = ab};
            run_out o;
            run_training(net, batch, &c, &o);
            ck_assert_msg(o.rc == 0, "per-pass %s: %s", vd_policy_name(pols[k]), o.msg);
            ck_assert_uint_le(o.plan_hwm, budget);
            ck_assert_uint_eq(o.st.live_peak, o.plan_peak);
            ck_assert_uint_eq(o.st.pool_hwm, o.plan_hwm);
            ck_assert_int_eq(o.st.recompute_ops_iter, o.n_recompute_ops);
            ck_assert_msg(memcmp(o.params, ref.params, (size_t)net->param_floats * 4) == 0,
                          "per-pass %s: parameters differ from none", vd_policy_name(pols[k]));
            for (int i = 0; i < iters; i++) ck_assert(memcmp(&o.loss[i], &ref.loss[i], 4) == 0);
            run_free(&o);
        }
        run_free(&ref);
    }
    run_free(&r00);
    run_free(&r11);
    free(zero);
    free(one);
}

/* fn on LeNet at batch 4, then on the small ResNet at batch 3. */
static void on_small_nets(void (*fn)(vd_net *net, int batch)) {
    vd_net net;
    tn_lenet(&net, 4);
    fn(&net, 4);
    vd_net_free(&net);
    tn_resnet(&net, 3);
    fn(&net, 3);
    vd_net_free(&net);
}

START_TEST(test_per_pass_algos) {
    on_small_nets(per_pass_case);
}
END_TEST

START_TEST(test_identity_lenet) {
    vd_net net;
    tn_lenet(&net, 4);
    identity_case(&net, 4, 3);
    vd_net_free(&net);
}
END_TEST

/* The shipped LeNet spec (MNIST shapes), through the spec parser. */
START_TEST(test_identity_lenet_yaml) {
    vd_net net;
    load_shipped_net(&net, "lenet.yaml", 3);
    identity_case(&net, 3, 3);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_identity_resnet) {
    vd_net net;
    tn_resnet(&net, 3);
    /* (lenet's peak is its parameters plus the operands of one step: only the
     * input can move there, so recomputation is asserted on this net) */
    ck_assert_msg(identity_case(&net, 3, 3) > 0, "auto (slow link) recomputes nothing");
    vd_net_free(&net);
}
END_TEST

/* vd_plan_opts.pool_to_need (vdnn-train's default budget on CUDA, all the
 * device can give, is a cap): the pool is exactly what the plan needs, the
 * larger high-water mark of its training and evaluation placements, as
 * without a budget; with a cap of 1 TiB or of twice that need, the same
 * plan, pool and bytes trained (policies none, all and auto on LeNet and
 * the small ResNet). Without the flag the pool is the whole cap. */
static void pool_to_need_case(vd_net *net, int batch) {
    static const vd_policy pols[] = {VD_POLICY_NONE, VD_POLICY_ALL, VD_POLICY_AUTO};
    for (size_t k = 0; k < VD_ARRAY_LEN(pols); k++) {
        run_cfg c = {.policy = pols[k], .iters = 2, .poison = true, .fixed_algo = -1};
        run_out r0, r1, r2, r3;
        run_training(net, batch, &c, &r0);
        ck_assert_msg(r0.rc == 0, "%s", r0.msg);
        ck_assert_uint_eq(r0.st.pool_bytes, r0.plan_budget);
        c.pool_to_need = true;
        c.budget = (uint64_t)1 << 40;
        run_training(net, batch, &c, &r1);
        c.budget = 2 * r0.plan_budget;
        run_training(net, batch, &c, &r2);
        c.pool_to_need = false;
        run_training(net, batch, &c, &r3);
        ck_assert_msg(r1.rc == 0 && r2.rc == 0 && r3.rc == 0, "%s %s %s", r1.msg, r2.msg, r3.msg);
        ck_assert_uint_eq(r1.plan_budget, r0.plan_budget);
        ck_assert_uint_eq(r2.plan_budget, r0.plan_budget);
        ck_assert_uint_eq(r1.st.pool_bytes, r0.plan_budget);
        ck_assert_uint_eq(r2.st.pool_bytes, r0.plan_budget);
        ck_assert_uint_eq(r3.st.pool_bytes, 2 * r0.plan_budget);
        ck_assert_uint_ge(r0.plan_budget, r0.plan_hwm);
        size_t n = (size_t)net->param_floats * sizeof(float);
        ck_assert_msg(memcmp(r0.params, r1.params, n) == 0, "%s: 1 TiB cap trains other bytes",
                      vd_policy_name(pols[k]));
        ck_assert(memcmp(r0.params, r2.params, n) == 0);
        ck_assert(memcmp(r0.params, r3.params, n) == 0);
        run_free(&r0); run_free(&r1); run_free(&r2); run_free(&r3);
    }
}

START_TEST(test_pool_to_need) {
    on_small_nets(pool_to_need_case);
}
END_TEST

/* bf16 math (the CPU backend's mixed-precision oracle): the identities
 * above hold as in fp32, and the run really is bf16: its feature maps
 * (x, y, dy tensors) are half fp32's bytes, and its parameters after the
 * first step differ from the fp32 run's while its first loss stays within
 * bf16 rounding of fp32's (relative 2^-8 per stored value, through a few
 * layers: 2% is ample and far below the loss's own scale, ln 10). */
static void bf16_vs_fp32(vd_net *net, int batch) {
    run_cfg c = {.policy = VD_POLICY_NONE, .iters = 2, .poison = true, .fixed_algo = 1};
    run_out f, b;
    net->train.math = VD_MATH_FP32;
    run_training(net, batch, &c, &f);
    net->train.math = VD_MATH_BF16;
    run_training(net, batch, &c, &b);
    ck_assert_msg(f.rc == 0 && b.rc == 0, "%s %s", f.msg, b.msg);
    ck_assert_uint_eq(2 * b.fmap_bytes, f.fmap_bytes);
    ck_assert_msg(memcmp(f.params, b.params, (size_t)net->param_floats * 4) != 0,
                  "%s: bf16 trains exactly as fp32", net->name);
    ck_assert_msg(fabsf(b.loss[0] - f.loss[0]) <= 0.02f * fabsf(f.loss[0]), "%s: loss %g vs fp32 %g",
                  net->name, (double)b.loss[0], (double)f.loss[0]);
    run_free(&f);
    run_free(&b);
}

/* ... and the identities in fp16 too (its loss scaling on: the gradient
 * array, grad_check, sgd_scaled; tests/plan/test_fp16.c compares it with
 * fp32). */
START_TEST(test_identity_bf16) {
    vd_net net;
    tn_lenet(&net, 4);
    bf16_vs_fp32(&net, 4);
    net.train.math = VD_MATH_BF16;
    identity_case(&net, 4, 3);
    vd_net_free(&net);
    /* fp16 on the small ResNet alone: its ops (batch norm, add) and the
     * recompute path are a superset of LeNet's */
    static const vd_math maths[] = {VD_MATH_BF16, VD_MATH_FP16};
    tn_resnet(&net, 3);
    bf16_vs_fp32(&net, 3);
    for (int k = 0; k < 2; k++) {
        net.train.math = maths[k];
        ck_assert_msg(identity_case(&net, 3, 3) > 0, "%s: auto (slow link) recomputes nothing",
                      vd_math_name(maths[k]));
    }
    vd_net_free(&net);
}
END_TEST

/* tf32 math on the CPU backend: float maps channels-last (vd_math_nhwc),
 * each op the fp32 op on NCHW copies (cpu_run_cl; the CPU has no tf32
 * rounding). So tf32 trains bit for bit as fp32 (tolerance 0: a difference
 * is a layout bug: the input's order, a relayout, a chunk's offset), with
 * the same feature-map bytes, and the identities above hold in it (every
 * policy: the offloaded and recomputed maps move channels-last). */
static void tf32_vs_fp32(vd_net *net, int batch) {
    run_cfg c = {.policy = VD_POLICY_NONE, .iters = 3, .poison = true, .fixed_algo = 1};
    run_out f, t;
    net->train.math = VD_MATH_FP32;
    run_training(net, batch, &c, &f);
    net->train.math = VD_MATH_TF32;
    run_training(net, batch, &c, &t);
    ck_assert_msg(f.rc == 0 && t.rc == 0, "%s %s", f.msg, t.msg);
    ck_assert_uint_eq(t.fmap_bytes, f.fmap_bytes);
    ck_assert_msg(memcmp(f.params, t.params, (size_t)net->param_floats * 4) == 0,
                  "%s: tf32 parameters differ from fp32's", net->name);
    ck_assert_msg(memcmp(f.mom, t.mom, (size_t)net->param_floats * 4) == 0,
                  "%s: tf32 momentum differs from fp32's", net->name);
    ck_assert_msg(memcmp(f.loss, t.loss, 3 * sizeof f.loss[0]) == 0 &&
                  f.eval_loss == t.eval_loss && f.eval_correct == t.eval_correct,
                  "%s: tf32 losses differ from fp32's", net->name);
    run_free(&f);
    run_free(&t);
    identity_case(net, batch, 3);
}

START_TEST(test_identity_tf32) {
    vd_net net;
    tn_lenet(&net, 4);
    tf32_vs_fp32(&net, 4);
    vd_net_free(&net);
    tn_resnet(&net, 3);   /* batch norm, add, the recompute path */
    tf32_vs_fp32(&net, 3);
    vd_net_free(&net);
}
END_TEST

/* Dispositions for every feature map of net: d for each, AUTO where the
 * layer runs in place (its output is its producer's tensor). alt: every
 * other producer gets d2 instead. disp has n_layers + 1 entries. */
static void all_disp(const vd_net *net, vd_disp *disp, vd_disp d, vd_disp d2, bool alt) {
    bool ip[256];
    ck_assert_int_le(net->n_layers, 256);
    vd_schedule_inplace_flags(net, ip);
    disp[0] = d2;
    int n = 0;
    for (int i = 0; i < net->n_layers; i++)
        disp[i + 1] = ip[i] ? VD_DISP_AUTO : (alt && (n++ % 2)) ? d2 : d;
}

/* Recomputation changes when bytes are produced, not what is computed:
 * every feature map that can be recomputed is (the rest offloaded, or kept),
 * with poisoning on; parameters, momentum and losses are byte-identical to
 * policy none, and the executor re-runs exactly the plan's ops. */
static void recompute_identity_case(vd_net *net, int batch, int iters) {
    int algo = 1;
    run_cfg c0 = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = algo};
    run_out ref;
    run_training(net, batch, &c0, &ref);
    ck_assert_msg(ref.rc == 0, "%s", ref.msg);
    vd_disp disp[257];
    for (int mode = 0; mode < 3; mode++) {
        /* 0: recompute all (fallback offload); 1: recompute all, budget =
         * minimum; 2: alternate recompute / offload under policy all */
        if (mode == 2) all_disp(net, disp, VD_DISP_RECOMPUTE, VD_DISP_OFFLOAD, true);
        else all_disp(net, disp, VD_DISP_RECOMPUTE, VD_DISP_OFFLOAD, false);
        vd_policy pol = mode == 2 ? VD_POLICY_ALL : VD_POLICY_NONE;
        uint64_t budget = 0;
        if (mode >= 1) {
            vd_plan_opts o = plan_opts(batch, pol);
            o.fixed_algo = algo;
            o.disp = disp;
            budget = cpu_min_budget(net, &o, NULL);
        }
        run_cfg c = {.policy = pol, .budget = budget, .iters = iters, .poison = true,
                     .fixed_algo = algo, .disp = disp};
        run_out o;
        run_training(net, batch, &c, &o);
        ck_assert_msg(o.rc == 0, "%s mode %d: %s", net->name, mode, o.msg);
        ck_assert_msg(o.n_recomputed > 0, "%s mode %d recomputes nothing", net->name, mode);
        ck_assert_int_eq(o.st.recompute_ops_iter, o.n_recompute_ops);
        ck_assert_uint_eq(o.st.live_peak, o.plan_peak);
        ck_assert_uint_eq(o.st.pool_hwm, o.plan_hwm);
        ck_assert_uint_eq(o.st.offload_bytes_iter, o.plan_offload);
        if (budget) ck_assert_uint_le(o.plan_hwm, budget);
        ck_assert_msg(memcmp(o.params, ref.params, (size_t)net->param_floats * 4) == 0,
                      "%s mode %d: parameters differ from policy none", net->name, mode);
        ck_assert_msg(memcmp(o.mom, ref.mom, (size_t)net->param_floats * 4) == 0,
                      "%s mode %d: momentum differs from policy none", net->name, mode);
        for (int i = 0; i < iters; i++) ck_assert(memcmp(&o.loss[i], &ref.loss[i], 4) == 0);
        ck_assert_int_eq(o.eval_correct, ref.eval_correct);
        run_free(&o);
    }
    run_free(&ref);
}

START_TEST(test_recompute_identity) {
    for (int m = 0; m < 2; m++) {   /* fp32, bf16 */
        vd_net net;
        tn_lenet(&net, 4);
        net.train.math = m ? VD_MATH_BF16 : VD_MATH_FP32;
        recompute_identity_case(&net, 4, 3);
        vd_net_free(&net);
        tn_resnet(&net, 3);
        net.train.math = m ? VD_MATH_BF16 : VD_MATH_FP32;
        recompute_identity_case(&net, 3, 3);
        vd_net_free(&net);
    }
}
END_TEST

/* Skipping the recomputes makes backward read freed (poisoned or reused)
 * memory: the run must differ from policy none. */
START_TEST(test_fault_skip_recompute) {
    vd_net nets[2];
    tn_lenet(&nets[0], 4);
    tn_resnet(&nets[1], 3);
    int batches[2] = {4, 3};
    for (int n = 0; n < 2; n++) {
        vd_net *net = &nets[n];
        run_cfg c0 = {.policy = VD_POLICY_NONE, .iters = 2, .poison = true, .fixed_algo = 1};
        run_out ref;
        run_training(net, batches[n], &c0, &ref);
        ck_assert(ref.rc == 0);
        vd_disp disp[257];
        all_disp(net, disp, VD_DISP_RECOMPUTE, VD_DISP_KEEP, false);
        run_cfg c = {.policy = VD_POLICY_NONE, .iters = 2, .poison = true, .fixed_algo = 1,
                     .disp = disp, .fault = VD_FAULT_SKIP_RECOMPUTE};
        run_out o;
        run_training(net, batches[n], &c, &o);
        ck_assert(o.n_recomputed > 0);
        bool differs = o.rc != 0 || memcmp(o.params, ref.params, (size_t)net->param_floats * 4) != 0;
        ck_assert_msg(differs, "%s: skipped recomputes went unnoticed", net->name);
        run_free(&o);
        run_free(&ref);
        vd_net_free(net);
    }
}
END_TEST

/* Without the wait on the prefetch event, compute reads a poisoned region. */
static void fault_case_pol(vd_net *net, int batch, int fault, vd_policy pol) {
    run_cfg c0 = {.policy = VD_POLICY_NONE, .iters = 2, .poison = true, .fixed_algo = 1};
    run_out ref;
    run_training(net, batch, &c0, &ref);
    ck_assert(ref.rc == 0);
    uint64_t mb = min_budget(net, batch, pol, 1);
    run_cfg c = {.policy = pol, .budget = mb, .iters = 2, .poison = true,
                 .fault = fault, .fixed_algo = 1};
    run_out o;
    run_training(net, batch, &c, &o);
    ck_assert_msg(o.n_offloaded > 0, "%s at its minimum budget offloads nothing", vd_policy_name(pol));
    bool differs = o.rc != 0 ||
                   memcmp(o.params, ref.params, (size_t)net->param_floats * 4) != 0;
    ck_assert_msg(differs, "fault %d (policy %s) went unnoticed: the test would not catch a missing "
                  "wait", fault, vd_policy_name(pol));
    run_free(&o);
    run_free(&ref);
}

/* Policy all; for the prefetch wait also auto at its minimum budget (which
 * may offload only the net input: no D2H copy, no offload wait to skip). */
static void fault_case(vd_net *net, int batch, int fault) {
    fault_case_pol(net, batch, fault, VD_POLICY_ALL);
    if (fault == VD_FAULT_SKIP_PREFETCH_WAIT) fault_case_pol(net, batch, fault, VD_POLICY_AUTO);
}

START_TEST(test_fault_skip_prefetch_wait) {
    vd_net net;
    tn_lenet(&net, 4);
    fault_case(&net, 4, VD_FAULT_SKIP_PREFETCH_WAIT);
    vd_net_free(&net);
    tn_resnet(&net, 3);
    fault_case(&net, 3, VD_FAULT_SKIP_PREFETCH_WAIT);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_fault_skip_offload_wait) {
    vd_net net;
    tn_lenet(&net, 4);
    fault_case(&net, 4, VD_FAULT_SKIP_OFFLOAD_WAIT);
    vd_net_free(&net);
}
END_TEST

/* In bf16 too, a missing wait is caught (the poison is 0xFFFF, a bf16 NaN):
 * the identities above could fail there. */
START_TEST(test_fault_bf16) {
    vd_net net;
    tn_lenet(&net, 4);
    net.train.math = VD_MATH_BF16;
    fault_case(&net, 4, VD_FAULT_SKIP_PREFETCH_WAIT);
    fault_case(&net, 4, VD_FAULT_SKIP_OFFLOAD_WAIT);
    vd_net_free(&net);
}
END_TEST

/* The hook tests' fixture: LeNet at batch 4, policy all (a host store), on
 * the CPU backend. */
typedef struct hook_fix {
    vd_net net;
    vd_profile prof;
    vd_backend *be;
    vd_plan plan;
} hook_fix;

static void hook_fix_init(hook_fix *f) {
    tn_lenet(&f->net, 4);
    f->be = cpu_for_dev(&f->net, 4, NULL, &f->prof);
    vd_plan_opts po = plan_opts(4, VD_POLICY_ALL);
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&f->net, &f->prof, &po, &f->plan, &e) == 0, "%s", e.msg);
}

static void hook_fix_free(hook_fix *f) {
    vd_plan_free(&f->plan);
    vd_profile_free(&f->prof);
    f->be->destroy(f->be);
    vd_net_free(&f->net);
}

/* vd_exec_create allocates every pinned host buffer before the pool and
 * calls before_pool once in between (the session samples device memory
 * there: what lives outside the pool includes the driver's mappings of the
 * pinned memory). The CPU backend's allocators are wrapped to log the order. */
static char order_log[64];
static int order_n;
static int (*real_pool_create)(vd_backend *, uint64_t, void **, vd_err *);
static int (*real_host_alloc)(vd_backend *, uint64_t, void **, vd_err *);

static void order_add(char c) {
    if (order_n < (int)sizeof order_log - 1) order_log[order_n++] = c;
}
static int log_pool_create(vd_backend *be, uint64_t bytes, void **base, vd_err *e) {
    order_add('P');
    return real_pool_create(be, bytes, base, e);
}
static int log_host_alloc(vd_backend *be, uint64_t bytes, void **p, vd_err *e) {
    order_add('h');
    return real_host_alloc(be, bytes, p, e);
}
static void log_before_pool(void *ctx) {
    ck_assert_ptr_eq(ctx, order_log);
    order_add('|');
}

START_TEST(test_before_pool_hook) {
    hook_fix f;
    hook_fix_init(&f);
    vd_net *net = &f.net;
    vd_backend *be = f.be;
    vd_plan *plan = &f.plan;
    vd_err e = {0};
    ck_assert_uint_gt(plan->host_bytes, 0);        /* the host store exists */
    real_pool_create = be->pool_create;
    real_host_alloc = be->host_alloc;
    be->pool_create = log_pool_create;
    be->host_alloc = log_host_alloc;
    vd_exec_opts eo = {.layers_ready = true, .before_pool = log_before_pool,
                       .before_pool_ctx = order_log};
    memset(order_log, 0, sizeof order_log);
    order_n = 0;
    vd_exec *ex = NULL;
    ck_assert_msg(vd_exec_create(&ex, net, plan, be, &eo, &e) == 0, "%s", e.msg);
    /* host store, input x, labels, loss, eval output; the hook; the pool */
    ck_assert_str_eq(order_log, "hhhhh|P");
    vd_exec_stats st;
    vd_exec_get_stats(ex, &st);
    ck_assert_uint_eq(st.host_store_bytes, plan->host_bytes);
    vd_exec_destroy(&ex);
    /* without a hook: same allocations, nothing else called */
    memset(order_log, 0, sizeof order_log);
    order_n = 0;
    eo.before_pool = NULL;
    ck_assert_msg(vd_exec_create(&ex, net, plan, be, &eo, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(order_log, "hhhhhP");
    vd_exec_destroy(&ex);
    be->pool_create = real_pool_create;
    be->host_alloc = real_host_alloc;
    hook_fix_free(&f);
}
END_TEST

/* step_times: one event more per step (and one at the start), recorded on
 * the compute stream, and one per possible copy start and end; after a training
 * step every step's end is known, in order, within the iteration's wall
 * time, and every copy the pass issued; off: no extra events, no times.
 * Either way one more than the plan's for vd_exec_rank_drain. */
static int events_asked;
static int (*real_events_create)(vd_backend *, int, vd_err *);
static int log_events_create(vd_backend *be, int n, vd_err *e) {
    events_asked = n;
    return real_events_create(be, n, e);
}

START_TEST(test_step_times) {
    hook_fix f;
    hook_fix_init(&f);
    vd_net *net = &f.net;
    vd_backend *be = f.be;
    vd_plan *plan = &f.plan;
    vd_err e = {0};
    real_events_create = be->events_create;
    be->events_create = log_events_create;
    int n_ev = plan->n_events > plan->eval->n_events ? plan->n_events : plan->eval->n_events;
    float *params = calloc((size_t)net->param_floats, sizeof *params);
    ck_assert_ptr_nonnull(params);
    for (int on = 0; on < 2; on++) {
        vd_exec_opts eo = {.layers_ready = true, .step_times = on};
        vd_exec *ex = NULL;
        ck_assert_msg(vd_exec_create(&ex, net, plan, be, &eo, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(events_asked, n_ev + 1 + (on ? plan->n_steps + 1 + 2 * (plan->n_tensors +
                                                        plan->n_intervals) : 0));
        const double *end = NULL;
        ck_assert_int_eq(vd_exec_step_times(ex, &end), 0);   /* nothing measured yet */
        ck_assert_msg(vd_exec_set_state(ex, params, NULL, 0, &e) == 0, "%s", e.msg);
        float loss;
        ck_assert_msg(vd_exec_train_step(ex, 0.01f, 0, &loss, &e) == 0, "%s", e.msg);
        int n = vd_exec_step_times(ex, &end);
        if (!on) {
            ck_assert_int_eq(n, 0);
        } else {
            vd_exec_stats st;
            vd_exec_get_stats(ex, &st);
            ck_assert_int_eq(n, plan->n_steps);
            ck_assert(end[0] >= 0.0);
            for (int s = 1; s < n; s++) ck_assert(end[s] >= end[s - 1]);
            ck_assert(end[n - 1] <= st.last_iter_s * 1e3 + 1.0);
            /* every offload and every fill the pass issued, once each: the
             * plan's offloaded tensors (D2H) and its filled intervals (H2D:
             * the prefetches, x and labels; no staging: nothing was ready) */
            const vd_exec_copy_time *ct = NULL;
            int nc = vd_exec_copy_times(ex, &ct), want_d2h = 0, want_h2d = 0, d2h = 0, h2d = 0;
            for (int t = 0; t < plan->n_tensors; t++)
                want_d2h += plan->tensors[t].offload && !plan->tensors[t].host_src;
            for (int k = 0; k < plan->n_intervals; k++)
                want_h2d += plan->intervals[k].fill != VD_FILL_NONE &&
                            plan->intervals[k].fill != VD_FILL_STAGE;
            ck_assert_int_gt(want_d2h, 0);
            ck_assert_int_eq(nc, want_d2h + want_h2d);
            for (int i = 0; i < nc; i++) {
                d2h += !ct[i].h2d;
                h2d += ct[i].h2d;
                ck_assert(ct[i].h2d ? ct[i].interval >= 0 && plan->intervals[ct[i].interval].tensor == ct[i].tensor
                                    : ct[i].interval == -1 && plan->tensors[ct[i].tensor].offload);
                /* a copy ends after it starts, within the pass */
                ck_assert(ct[i].end_ms >= ct[i].start_ms);
                ck_assert(ct[i].end_ms <= st.last_iter_s * 1e3 + 1.0);
            }
            ck_assert_int_eq(d2h, want_d2h);
            ck_assert_int_eq(h2d, want_h2d);
        }
        vd_exec_destroy(&ex);
    }
    free(params);
    be->events_create = real_events_create;
    hook_fix_free(&f);
}
END_TEST

/* vd_exec_rank_drain: records its own event (the one after the plan's) on the
 * compute stream and has the host wait for exactly that event. */
static int drain_rec_ev = -1, drain_rec_stream = -1, drain_sync_ev = -1;
static int (*real_event_record)(vd_backend *, int, int, vd_err *);
static int (*real_event_sync)(vd_backend *, int, vd_err *);
static int log_event_record(vd_backend *be, int ev, int stream, vd_err *e) {
    drain_rec_ev = ev;
    drain_rec_stream = stream;
    return real_event_record(be, ev, stream, e);
}
static int log_event_sync(vd_backend *be, int ev, vd_err *e) {
    drain_sync_ev = ev;
    return real_event_sync(be, ev, e);
}

START_TEST(test_drain) {
    hook_fix f;
    hook_fix_init(&f);
    vd_backend *be = f.be;
    vd_plan *plan = &f.plan;
    vd_err e = {0};
    int n_ev = plan->n_events > plan->eval->n_events ? plan->n_events : plan->eval->n_events;
    vd_exec_opts eo = {.layers_ready = true};
    vd_exec *ex = NULL;
    ck_assert_msg(vd_exec_create(&ex, &f.net, plan, be, &eo, &e) == 0, "%s", e.msg);
    real_event_record = be->event_record;
    real_event_sync = be->event_sync;
    be->event_record = log_event_record;
    be->event_sync = log_event_sync;
    ck_assert_msg(vd_exec_rank_drain(ex, 0, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(drain_rec_ev, n_ev);
    ck_assert_int_eq(drain_rec_stream, VD_STREAM_COMPUTE);
    ck_assert_int_eq(drain_sync_ev, n_ev);
    be->event_record = real_event_record;
    be->event_sync = real_event_sync;
    vd_exec_destroy(&ex);
    hook_fix_free(&f);
}
END_TEST

/* An executor whose math stores feature maps in another size than the plan
 * (net->train.math) is refused before anything is allocated: bf16 opts on
 * an fp32 plan and fp32 opts on a bf16 plan (which would write 4-byte
 * floats into 2-byte tensors); tf32 on an fp32 plan is fine. */
START_TEST(test_math_mismatch) {
    hook_fix f;
    hook_fix_init(&f);
    vd_err e = {0};
    vd_exec *ex = NULL;
    vd_exec_opts eo = {.layers_ready = true, .math = VD_MATH_BF16};
    ck_assert_int_eq(vd_exec_create(&ex, &f.net, &f.plan, f.be, &eo, &e), VD_EINTERNAL);
    ck_assert_ptr_null(ex);
    ck_assert_msg(strstr(e.msg, "executor math bf16") && strstr(e.msg, "math fp32"), "%s", e.msg);
    eo.math = VD_MATH_TF32;
    ck_assert_msg(vd_exec_create(&ex, &f.net, &f.plan, f.be, &eo, &e) == 0, "%s", e.msg);
    vd_exec_destroy(&ex);
    vd_plan_free(&f.plan);
    f.net.train.math = VD_MATH_BF16;
    vd_profile_free(&f.prof);
    f.be->destroy(f.be);
    f.be = cpu_for_dev(&f.net, 4, NULL, &f.prof);
    vd_plan_opts po = plan_opts(4, VD_POLICY_ALL);
    ck_assert_msg(vd_plan_build(&f.net, &f.prof, &po, &f.plan, &e) == 0, "%s", e.msg);
    eo.math = VD_MATH_FP32;
    ck_assert_int_eq(vd_exec_create(&ex, &f.net, &f.plan, f.be, &eo, &e), VD_EINTERNAL);
    ck_assert_msg(strstr(e.msg, "executor math fp32") && strstr(e.msg, "math bf16"), "%s", e.msg);
    eo.math = VD_MATH_BF16;
    ck_assert_msg(vd_exec_create(&ex, &f.net, &f.plan, f.be, &eo, &e) == 0, "%s", e.msg);
    ck_assert(vd_exec_input_dtype(ex) == VD_DT_BF16);
    vd_exec_destroy(&ex);
    hook_fix_free(&f);
}
END_TEST

/* A plan whose option labels are not the backend's (a profile saved by
 * another setup) is refused with the layer and both labels named. */
START_TEST(test_profile_label_mismatch) {
    hook_fix f;
    hook_fix_init(&f);
    vd_err e = {0};
    vd_exec_opts eo = {.layers_ready = true};
    vd_exec *ex = NULL;
    int conv = -1;
    for (int i = 0; i < f.net.n_layers && conv < 0; i++)
        if (f.net.layers[i].op == VD_OP_CONV) conv = i;
    ck_assert_int_ge(conv, 0);
    vd_plan_layer *pl = &f.plan.layers[conv];
    char saved[32];
    memcpy(saved, pl->algo_bwd_label, sizeof saved);
    snprintf(pl->algo_bwd_label, sizeof pl->algo_bwd_label, "b/32 w");
    ck_assert_int_eq(vd_exec_create(&ex, &f.net, &f.plan, f.be, &eo, &e), VD_EUNSUPPORTED);
    ck_assert_ptr_null(ex);
    ck_assert_msg(strstr(e.msg, "'b/32 w'") && strstr(e.msg, f.net.layers[conv].name) &&
                  strstr(e.msg, "another setup"), "%s", e.msg);
    memcpy(pl->algo_bwd_label, saved, sizeof saved);
    ck_assert_msg(vd_exec_create(&ex, &f.net, &f.plan, f.be, &eo, &e) == 0, "%s", e.msg);
    vd_exec_destroy(&ex);
    hook_fix_free(&f);
}
END_TEST

/* after_step (the session's memory trace) is called once per step, in step
 * order, after each is issued: n_steps + 1 calls per training step (the
 * last for the SGD update) and per evaluation step, with the right flag.
 * With opts.graph on (the CPU backend emulates captures) the first step
 * runs eagerly, the second captures its graph and the third replays it:
 * those two call it at the pass's end only, and captured is true in the
 * second's call only. */
static int trace_next, trace_calls[2], trace_bad, trace_captured[3], trace_end;
static int64_t trace_iter;
static void log_after_step(void *ctx, int step, bool eval, bool captured) {
    if (ctx != (void *)trace_calls || (step != trace_next && step != trace_end)) trace_bad++;
    trace_next = step + 1;
    trace_calls[eval]++;
    if (captured) {
        if (eval || trace_iter < 0 || trace_iter > 2) trace_bad++;
        else trace_captured[trace_iter] += step;   /* the step: n_steps, the pass's end */
    }
}

START_TEST(test_after_step_hook) {
    for (int graph = 0; graph < 2; graph++) {
        hook_fix f;
        hook_fix_init(&f);
        vd_net *net = &f.net;
        vd_backend *be = f.be;
        vd_plan *plan = &f.plan;
        vd_err e = {0};
        vd_exec_opts eo = {.layers_ready = true, .after_step = log_after_step,
                           .after_step_ctx = trace_calls,
                           .graph = graph ? VD_GRAPH_ON : VD_GRAPH_OFF};
        vd_exec *ex = NULL;
        ck_assert_msg(vd_exec_create(&ex, net, plan, be, &eo, &e) == 0, "%s", e.msg);
        float *params = calloc((size_t)net->param_floats, sizeof *params);
        ck_assert_ptr_nonnull(params);
        ck_assert_msg(vd_exec_set_state(ex, params, NULL, 0, &e) == 0, "%s", e.msg);
        memset(trace_calls, 0, sizeof trace_calls);
        memset(trace_captured, 0, sizeof trace_captured);
        trace_bad = 0;
        trace_end = graph ? plan->n_steps : -1;   /* a captured step's only call */
        for (int it = 0; it < 3; it++) {
            trace_next = 0;
            trace_iter = it;
            float loss;
            ck_assert_msg(vd_exec_train_step(ex, 0.01f, it, &loss, &e) == 0, "%s", e.msg);
            ck_assert_int_eq(trace_next, plan->n_steps + 1);
        }
        vd_exec_stats st;
        vd_exec_get_stats(ex, &st);
        ck_assert_int_eq(st.graph_captures, graph);   /* (the emulation ran) */
        ck_assert_int_eq(trace_captured[0], 0);
        ck_assert_int_eq(trace_captured[1], graph ? plan->n_steps : 0);
        ck_assert_int_eq(trace_captured[2], 0);
        ck_assert_int_eq(trace_calls[0], graph ? plan->n_steps + 3 : 3 * (plan->n_steps + 1));
        ck_assert_int_eq(trace_calls[1], 0);
        trace_next = 0;
        trace_iter = -1;
        trace_end = -1;
        vd_eval_counts ec;
        ck_assert_msg(vd_exec_eval_step(ex, &ec, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(trace_calls[1], plan->eval->n_steps + 1);
        ck_assert_int_eq(trace_bad, 0);
        free(params);
        vd_exec_destroy(&ex);
        hook_fix_free(&f);
    }
}
END_TEST

/* The backward of a ReLU in place after a batch norm runs in the batch
 * norm's (vd_op_io.relu_mask; the CPU backend in every math, the CUDA one in
 * bf16 / fp16) and is skipped where the plan gives it dx == dy: on the small
 * ResNet (stem_bn -> stem_relu, b1_bn1 -> b1_relu1) in fp32, bf16 and fp16,
 * 3 steps of policy none train the same bytes fused and with no_fuse, the
 * two ReLUs write their dy tensor (the planner's sharing) and leave it
 * untouched fused, mask it (some element changes each step) with no_fuse.
 * Offloading and recomputing with the fusion on: test_identity_resnet,
 * test_identity_bf16. */
static int (*real_backward)(vd_backend *, const vd_net *, int, const vd_op_io *, vd_err *);
static int spy_calls, spy_changed, spy_other;
static int spy_backward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                        vd_err *e) {
    if (net->layers[layer].op != VD_OP_RELU || vd_op_relu_taker(net, layer) < 0)
        return real_backward(be, net, layer, io, e);
    if (io->dx[0] != io->dy) {
        spy_other++;
        return real_backward(be, net, layer, io, e);
    }
    size_t n = (size_t)io->n * (size_t)vd_net_out_numel(net, layer) * vd_dtype_bytes(io->act);
    void *before = malloc(n);
    ck_assert_ptr_nonnull(before);
    memcpy(before, io->dy, n);
    int rc = real_backward(be, net, layer, io, e);
    spy_calls++;
    spy_changed += memcmp(before, io->dy, n) != 0;
    free(before);
    return rc;
}
static void spy_on(vd_backend *be) {
    real_backward = be->backward;
    be->backward = spy_backward;
}

START_TEST(test_relu_bwd_fused) {
    vd_net net;
    tn_resnet(&net, 3);
    vd_schedule_inplace(&net);   /* the flag the backends read, as a run sets it */
    static const vd_math maths[] = {VD_MATH_FP32, VD_MATH_BF16, VD_MATH_FP16};
    const int iters = 3;
    for (size_t k = 0; k < VD_ARRAY_LEN(maths); k++) {
        net.train.math = maths[k];
        const char *m = vd_math_name(maths[k]);
        run_cfg c = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = 1,
                     .on_backend = spy_on};
        run_out f, u;
        spy_calls = spy_changed = spy_other = 0;
        run_training(&net, 3, &c, &f);
        ck_assert_msg(f.rc == 0, "%s", f.msg);
        /* two ReLUs, each step, in place, all of their dy left as it was */
        ck_assert_msg(spy_calls == 2 * iters && spy_other == 0 && spy_changed == 0,
                      "%s fused: %d calls in place (%d not), %d changed dy", m, spy_calls,
                      spy_other, spy_changed);
        c.no_fuse = true;
        spy_calls = spy_changed = spy_other = 0;
        run_training(&net, 3, &c, &u);
        ck_assert_msg(u.rc == 0, "%s", u.msg);
        ck_assert_msg(spy_calls == 2 * iters && spy_other == 0 && spy_changed == 2 * iters,
                      "%s no_fuse: %d calls in place (%d not), %d masked dy", m, spy_calls,
                      spy_other, spy_changed);
        size_t pb = (size_t)net.param_floats * 4;
        ck_assert_msg(!memcmp(f.params, u.params, pb) && !memcmp(f.mom, u.mom, pb) &&
                          !memcmp(f.loss, u.loss, sizeof f.loss),
                      "%s: the fused ReLU backward changed the results (against no_fuse)", m);
        ck_assert_uint_eq(f.plan_hwm, u.plan_hwm);
        run_free(&f);
        run_free(&u);
    }
    vd_net_free(&net);
}
END_TEST

/* The ReLU backward + conv bias gradient fusion (vd_op_io.bias_db,
 * db_taken; the CPU backend in every math): on LeNet (conv1 -> relu1,
 * conv2 -> relu2) in fp32, bf16 and fp16, 3 steps of policy none train the
 * same bytes fused and with no_fuse; each step both ReLUs' backward gets
 * its conv's db and both convs are told, and fused, when a conv's backward
 * starts, its db already holds the sum of its dy per channel (the
 * reference here: in double, samples then positions, what the CPU conv
 * computes), which the ReLU wrote; with no_fuse the conv writes it. */
static int bias_relu_calls, bias_conv_calls, bias_conv_ok;
static bool bias_check;   /* fused: check db at each conv's backward */
static int bias_backward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                         vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    if (l->op == VD_OP_RELU && io->bias_db) bias_relu_calls++;
    if (l->op == VD_OP_CONV && io->db_taken) {
        bias_conv_calls++;
        bool ok = true;
        int64_t hw = (int64_t)l->h * l->w;
        for (int64_t c = 0; bias_check && c < l->c; c++) {
            double sum = 0;
            for (int64_t n = 0; n < io->n; n++)
                for (int64_t j = 0; j < hw; j++) {
                    const uint16_t *h = (const uint16_t *)io->dy;   /* 16-bit: NHWC */
                    int64_t at = io->act == VD_DT_F32 ? (n * l->c + c) * hw + j
                                                      : (n * hw + j) * l->c + c;
                    sum += io->act == VD_DT_F32 ? io->dy[at] : vd_h16_to_f32(io->act, h[at]);
                }
            ok &= io->db[c] == (float)sum;
        }
        bias_conv_ok += ok;
    }
    return real_backward(be, net, layer, io, e);
}
static void bias_on(vd_backend *be) {
    real_backward = be->backward;
    be->backward = bias_backward;
}

/* The batch norm + add fusion (vd_plan_opts.fuse_bn_add; vd_op_io.bn_stats,
 * bn_aux): a small ResNet with a downsample block (two batch norms into one
 * add: the main branch's is folded, vd_op_bn_folded) and an identity block
 * (one), in fp32, bf16, fp16 and tf32 on the CPU: 3 steps of policy none
 * train the same bytes (weights, momentum, losses, the evaluation) folded
 * and unfolded; each step the two folded batch norms' forwards compute
 * statistics alone in place and the two adds apply them; the folded plan
 * stores two batch-norm maps less (its feature-map bytes) and its peak is
 * no higher. Policy all and auto at a tight budget, folded, train the
 * folded policy none's bytes (offload and recompute with the fusion on). */
static int bnf_stats, bnf_adds, bnf_bad;
static int (*real_forward)(vd_backend *, const vd_net *, int, const vd_op_io *, vd_err *);
static int bnf_forward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                       vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    if (io->bn_stats) {
        bnf_stats++;
        bnf_bad += l->op != VD_OP_BATCHNORM || io->y != io->x[0];
    }
    if (io->bn_aux) {
        bnf_adds++;
        bnf_bad += l->op != VD_OP_ADD || vd_op_bn_folded(net, layer) != l->in[io->bn_k] ||
                   !io->bn_w || !io->bn_b;
    }
    return real_forward(be, net, layer, io, e);
}
static void bnf_on(vd_backend *be) {
    real_forward = be->forward;
    be->forward = bnf_forward;
}

static void tn_resnet_ds(vd_net *net, int batch) {
    tn_begin(net, "resnet-ds", 3, 8, 8, 5, batch);
    int x = tn_conv(net, "stem", -1, 8, 3, 1, 1);
    x = tn_bn(net, "stem_bn", x);
    x = tn_relu(net, "stem_relu", x);
    int a = tn_conv(net, "b1_conv1", x, 8, 3, 1, 1);
    a = tn_bn(net, "b1_bn1", a);
    a = tn_relu(net, "b1_relu1", a);
    a = tn_conv(net, "b1_conv2", a, 16, 3, 1, 1);
    a = tn_bn(net, "b1_bn2", a);
    int d = tn_conv(net, "b1_ds", x, 16, 1, 1, 0);
    d = tn_bn(net, "b1_ds_bn", d);
    int s = tn_join(net, "b1_add", VD_OP_ADD, a, d);
    s = tn_relu(net, "b1_relu", s);
    int b = tn_conv(net, "b2_conv1", s, 16, 3, 1, 1);
    b = tn_bn(net, "b2_bn1", b);
    s = tn_join(net, "b2_add", VD_OP_ADD, b, s);
    s = tn_relu(net, "b2_relu", s);
    int g = tn_pool(net, "gap", s, VD_POOL_AVG, 8, 8);
    int f = tn_fc(net, "fc", g, 5);
    tn_loss(net, f);
    tn_finish(net);
}

START_TEST(test_bn_add_fused) {
    vd_net net;
    tn_resnet_ds(&net, 3);
    vd_schedule_inplace(&net);
    ck_assert_int_eq(vd_op_bn_folded(&net, vd_net_find(&net, "b1_add")), vd_net_find(&net, "b1_bn2"));
    ck_assert_int_eq(vd_op_bn_folded(&net, vd_net_find(&net, "b2_add")), vd_net_find(&net, "b2_bn1"));
    ck_assert_int_eq(vd_op_bn_folder(&net, vd_net_find(&net, "b1_ds_bn")), -1);
    static const vd_math maths[] = {VD_MATH_FP32, VD_MATH_BF16, VD_MATH_FP16, VD_MATH_TF32};
    const int iters = 3;
    for (size_t k = 0; k < VD_ARRAY_LEN(maths); k++) {
        net.train.math = maths[k];
        const char *m = vd_math_name(maths[k]);
        run_cfg c = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = 1,
                     .on_backend = bnf_on, .fuse_bn_add = true};
        run_out f, u;
        bnf_stats = bnf_adds = bnf_bad = 0;
        run_training(&net, 3, &c, &f);
        ck_assert_msg(f.rc == 0, "%s", f.msg);
        /* iters training forwards (the evaluation's plan folds nothing) */
        ck_assert_msg(bnf_stats == 2 * iters && bnf_adds == 2 * iters && bnf_bad == 0,
                      "%s folded: %d statistics-only batch norms, %d applying adds, %d wrong",
                      m, bnf_stats, bnf_adds, bnf_bad);
        c.fuse_bn_add = false;
        bnf_stats = bnf_adds = 0;
        run_training(&net, 3, &c, &u);
        ck_assert_msg(u.rc == 0, "%s", u.msg);
        ck_assert_int_eq(bnf_stats + bnf_adds, 0);
        size_t pb = (size_t)net.param_floats * 4;
        ck_assert_msg(!memcmp(f.params, u.params, pb) && !memcmp(f.mom, u.mom, pb) &&
                          !memcmp(f.loss, u.loss, sizeof f.loss) &&
                          f.eval_correct == u.eval_correct &&
                          !memcmp(&f.eval_loss, &u.eval_loss, 4),
                      "%s: the folded batch norms changed the results", m);
        /* four 16x8x8 maps a sample less: the two batch norms' outputs the
         * adds apply, and with the fusion on the two ReLUs after the adds
         * give their backward to the batch norms, their dx the dy tensor
         * (vd_plan_layer.takes_add_relu) */
        uint64_t map = 3u * 16u * 8u * 8u * vd_math_act_bytes(maths[k]);
        ck_assert_uint_eq(f.fmap_bytes + 4 * map, u.fmap_bytes);
        /* (the backward pairs keep the ReLU's y to the batch norm's step: at
         * most one map more at the peak) */
        ck_assert_uint_le(f.plan_peak, u.plan_peak + map);
        ck_assert_uint_eq(f.st.live_peak, f.plan_peak);
        ck_assert_uint_eq(f.st.pool_hwm, f.plan_hwm);
        /* offload and recompute with the fusion on (bf16; fp32's arithmetic is
         * the same placement-independent code) */
        for (int pi = 0; k == 1 && pi < 2; pi++) {
            vd_policy pol = pi ? VD_POLICY_AUTO : VD_POLICY_ALL;
            vd_plan_opts o = plan_opts(3, pol);
            o.fixed_algo = 1;
            o.fuse_bn_add = true;
            uint64_t mb = cpu_min_budget(&net, &o, pi ? &slow_link : NULL);
            run_cfg ca = {.policy = pol, .budget = mb + (f.plan_hwm - mb) / 4, .iters = iters,
                          .poison = true, .fixed_algo = 1, .dev = pi ? &slow_link : NULL,
                          .fuse_bn_add = true};
            run_out o2;
            run_training(&net, 3, &ca, &o2);
            ck_assert_msg(o2.rc == 0, "%s %s: %s", m, vd_policy_name(pol), o2.msg);
            ck_assert_msg(!memcmp(o2.params, f.params, pb) && !memcmp(o2.loss, f.loss, sizeof f.loss),
                          "%s %s folded: not policy none's bytes", m, vd_policy_name(pol));
            ck_assert_uint_eq(o2.st.live_peak, o2.plan_peak);
            run_free(&o2);
        }
        if (k == 1) {   /* the folded batch norms' inputs recomputed: a re-run does nothing */
            vd_disp disp[32] = {0};
            ck_assert_int_lt(net.n_layers, 32);
            disp[vd_net_find(&net, "b1_conv2") + 1] = VD_DISP_RECOMPUTE;
            disp[vd_net_find(&net, "b2_conv1") + 1] = VD_DISP_RECOMPUTE;
            run_cfg cr = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true,
                          .fixed_algo = 1, .disp = disp, .fuse_bn_add = true};
            run_out o3;
            run_training(&net, 3, &cr, &o3);
            ck_assert_msg(o3.rc == 0, "%s recompute: %s", m, o3.msg);
            ck_assert_int_eq(o3.n_recomputed, 2);
            ck_assert_msg(!memcmp(o3.params, f.params, pb) && !memcmp(o3.loss, f.loss, sizeof f.loss),
                          "%s folded, inputs recomputed: not policy none's bytes", m);
            run_free(&o3);
            /* the adds' outputs recomputed: each add re-runs with its batch
             * norm's statistics (poisoned otherwise: the bytes would differ) */
            memset(disp, 0, sizeof disp);
            disp[vd_net_find(&net, "b1_add") + 1] = VD_DISP_RECOMPUTE;
            disp[vd_net_find(&net, "b2_add") + 1] = VD_DISP_RECOMPUTE;
            run_training(&net, 3, &cr, &o3);
            ck_assert_msg(o3.rc == 0, "%s adds recomputed: %s", m, o3.msg);
            ck_assert_int_eq(o3.n_recomputed, 2);
            ck_assert_msg(!memcmp(o3.params, f.params, pb) && !memcmp(o3.loss, f.loss, sizeof f.loss),
                          "%s folded, adds recomputed: not policy none's bytes", m);
            run_free(&o3);
        }
        run_free(&f);
        run_free(&u);
    }
    vd_net_free(&net);
}
END_TEST

START_TEST(test_relu_bias_fused) {
    vd_net net;
    tn_lenet(&net, 3);
    static const vd_math maths[] = {VD_MATH_FP32, VD_MATH_BF16, VD_MATH_FP16};
    const int iters = 3;
    for (size_t k = 0; k < VD_ARRAY_LEN(maths); k++) {
        net.train.math = maths[k];
        const char *m = vd_math_name(maths[k]);
        run_cfg c = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = 1,
                     .on_backend = bias_on};
        run_out f, u;
        bias_relu_calls = bias_conv_calls = bias_conv_ok = 0;
        bias_check = true;
        run_training(&net, 3, &c, &f);
        ck_assert_msg(f.rc == 0, "%s", f.msg);
        ck_assert_msg(bias_relu_calls == 2 * iters && bias_conv_calls == 2 * iters &&
                          bias_conv_ok == 2 * iters,
                      "%s fused: %d ReLUs with db, %d convs told, %d with the sums", m,
                      bias_relu_calls, bias_conv_calls, bias_conv_ok);
        c.no_fuse = true;
        bias_relu_calls = bias_conv_calls = 0;
        bias_check = false;
        run_training(&net, 3, &c, &u);
        ck_assert_msg(u.rc == 0, "%s", u.msg);
        ck_assert_int_eq(bias_relu_calls, 2 * iters);   /* the plan is the same */
        size_t pb = (size_t)net.param_floats * 4;
        ck_assert_msg(!memcmp(f.params, u.params, pb) && !memcmp(f.mom, u.mom, pb) &&
                          !memcmp(f.loss, u.loss, sizeof f.loss),
                      "%s: the fused bias gradient changed the results (against no_fuse)", m);
        ck_assert_uint_eq(f.plan_hwm, u.plan_hwm);
        run_free(&f);
        run_free(&u);
    }
    vd_net_free(&net);
}
END_TEST

/* The max pool + ReLU backward fusion (vd_op_io.relu_dx, bwd_done; the CPU
 * backend in every math): on LeNet (conv1 -> relu1 -> max pool1; pool2 is
 * an average pool, not paired) in fp32, bf16 and fp16, 3 steps of policy
 * none train the same bytes fused, with no_fuse, and with the pairing off
 * (relu1 not flagged in place for the ops, vd_op_pool_relu: the plan
 * neither pairs nor shares), whose plan holds no less (hwm). Each step pool1
 * gets relu_dx and relu1's bias gradient (conv1's), relu1 bwd_done; fused,
 * pool1's dx comes back masked (0 wherever x <= 0) with bias_db the sum of
 * that dx per channel (in double, as the CPU conv); with no_fuse some of it
 * is not masked (the check can fail), and relu1 masks it in place. */
static int pr_pool_calls, pr_relu_done, pr_masked, pr_unmasked, pr_db_ok;
static bool pr_fused;
static float pr_h(const vd_op_io *io, const void *p, int64_t i) {
    return io->act == VD_DT_F32 ? ((const float *)p)[i]
                                : vd_h16_to_f32(io->act, ((const uint16_t *)p)[i]);
}
static int pr_backward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                       vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    if (l->op == VD_OP_RELU && io->bwd_done) pr_relu_done++;
    int rc = real_backward(be, net, layer, io, e);
    if (rc || l->op != VD_OP_POOL || !io->relu_dx) return rc;
    pr_pool_calls++;
    const vd_layer *lr = &net->layers[l->in[0]];
    int64_t ch = lr->c, hw = (int64_t)lr->h * lr->w, n = (int64_t)io->n * ch * hw;
    bool masked = true, unmasked = false;
    for (int64_t i = 0; i < n; i++) {
        bool bad = pr_h(io, io->x[0], i) <= 0.0f && pr_h(io, io->dx[0], i) != 0.0f;
        masked &= !bad;
        unmasked |= bad;
    }
    pr_masked += masked;
    pr_unmasked += unmasked;
    bool ok = io->bias_db != NULL;
    for (int64_t c = 0; ok && pr_fused && c < ch; c++) {
        double sum = 0;
        for (int64_t k = 0; k < io->n; k++)
            for (int64_t j = 0; j < hw; j++)
                sum += pr_h(io, io->dx[0], io->act == VD_DT_F32 ? (k * ch + c) * hw + j
                                                                : (k * hw + j) * ch + c);
        ok &= io->bias_db[c] == (float)sum;
    }
    pr_db_ok += ok;
    return rc;
}
static void pr_on(vd_backend *be) {
    real_backward = be->backward;
    be->backward = pr_backward;
}

START_TEST(test_pool_relu_fused) {
    vd_net net;
    tn_lenet(&net, 3);
    vd_schedule_inplace(&net);   /* the flag the backends read, as a run sets it */
    int relu1 = -1;
    for (int i = 0; i < net.n_layers; i++)
        if (vd_op_pool_relu(&net, i) >= 0) {
            ck_assert_int_eq(relu1, -1);   /* pool1 alone */
            relu1 = vd_op_pool_relu(&net, i);
        }
    ck_assert_int_ge(relu1, 0);
    static const vd_math maths[] = {VD_MATH_FP32, VD_MATH_BF16, VD_MATH_FP16};
    const int iters = 3;
    for (size_t k = 0; k < VD_ARRAY_LEN(maths); k++) {
        net.train.math = maths[k];
        const char *m = vd_math_name(maths[k]);
        run_cfg c = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = 1,
                     .on_backend = pr_on};
        run_out f, u, o;
        pr_pool_calls = pr_relu_done = pr_masked = pr_unmasked = pr_db_ok = 0;
        pr_fused = true;
        run_training(&net, 3, &c, &f);
        ck_assert_msg(f.rc == 0, "%s", f.msg);
        ck_assert_msg(pr_pool_calls == iters && pr_relu_done == iters && pr_masked == iters &&
                          pr_db_ok == iters,
                      "%s fused: %d pools with the ReLU, %d ReLUs told, %d masked, %d with db", m,
                      pr_pool_calls, pr_relu_done, pr_masked, pr_db_ok);
        c.no_fuse = true;
        pr_pool_calls = pr_relu_done = pr_masked = pr_unmasked = pr_db_ok = 0;
        pr_fused = false;
        run_training(&net, 3, &c, &u);
        ck_assert_msg(u.rc == 0, "%s", u.msg);
        ck_assert_msg(pr_pool_calls == iters && pr_relu_done == iters && pr_unmasked > 0,
                      "%s no_fuse: %d pools paired, %d ReLUs told, %d with x <= 0 unmasked", m,
                      pr_pool_calls, pr_relu_done, pr_unmasked);
        c.no_fuse = false;
        net.layers[relu1].inplace = false;   /* no pair */
        pr_pool_calls = pr_relu_done = 0;
        run_training(&net, 3, &c, &o);
        net.layers[relu1].inplace = true;
        ck_assert_msg(o.rc == 0, "%s", o.msg);
        ck_assert_int_eq(pr_pool_calls + pr_relu_done, 0);
        size_t pb = (size_t)net.param_floats * 4;
        ck_assert_msg(!memcmp(f.params, u.params, pb) && !memcmp(f.mom, u.mom, pb) &&
                          !memcmp(f.loss, u.loss, sizeof f.loss),
                      "%s: the fused pool + ReLU backward changed the results (against no_fuse)", m);
        ck_assert_msg(!memcmp(f.params, o.params, pb) && !memcmp(f.mom, o.mom, pb) &&
                          !memcmp(f.loss, o.loss, sizeof f.loss),
                      "%s: the pairing changed the results (against no pair)", m);
        ck_assert_uint_eq(f.plan_hwm, u.plan_hwm);
        ck_assert_uint_le(f.plan_hwm, o.plan_hwm);
        ck_assert_uint_le(f.plan_peak, o.plan_peak);
        run_free(&f);
        run_free(&u);
        run_free(&o);
    }
    vd_net_free(&net);
}
END_TEST

/* The batch norm + add + ReLU backward fusion (vd_op_io.relu_y, bwd_done;
 * the CPU backend in every math): on the small ResNet of test_bn_add_fused
 * (b1_ds_bn -> b1_add -> b1_relu, the downsample block's: the batch norm
 * right before the add; b2_bn1 -> b2_add -> b2_relu) in fp32, bf16, fp16
 * and tf32, 3 steps of policy none train the same bytes fused, with
 * no_fuse, and with the pairing off (both ReLUs not flagged in place for
 * the ops: nothing paired nor shared), the batch norm + add forward fusion
 * on; the plan pairs exactly those two batch norms; each step both batch
 * norms get relu_y and both ReLUs bwd_done; fused, each batch norm's dy
 * comes in unmasked somewhere (the ReLU did nothing) and goes out masked
 * everywhere (0 wherever relu_y <= 0: what the add's other input reads);
 * with no_fuse it comes in masked (the ReLU ran in place). The executor's
 * live peak is the plan's. bf16 policy all (offload) trains the same
 * bytes. */
static int bar_bn, bar_done, bar_in_unmasked, bar_out_masked, bar_bad;
static int bar_backward(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                        vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    if (l->op == VD_OP_RELU && io->bwd_done) bar_done++;
    if (l->op != VD_OP_BATCHNORM || !io->relu_y) return real_backward(be, net, layer, io, e);
    bar_bn++;
    bar_bad += vd_op_add_relu(net, layer) < 0 || !io->dy;
    int64_t n = (int64_t)io->n * l->c * l->h * l->w;   /* (elementwise: any layout) */
    bool unmasked = false, masked = true;
    for (int64_t i = 0; i < n; i++)
        unmasked |= pr_h(io, io->relu_y, i) <= 0.0f && pr_h(io, io->dy, i) != 0.0f;
    int rc = real_backward(be, net, layer, io, e);
    for (int64_t i = 0; i < n; i++)
        masked &= !(pr_h(io, io->relu_y, i) <= 0.0f && pr_h(io, io->dy, i) != 0.0f);
    bar_in_unmasked += unmasked;
    bar_out_masked += masked;
    return rc;
}
static void bar_on(vd_backend *be) {
    real_backward = be->backward;
    be->backward = bar_backward;
}

START_TEST(test_bn_add_relu_fused) {
    vd_net net;
    tn_resnet_ds(&net, 3);
    vd_schedule_inplace(&net);   /* the flag the backends read, as a run sets it */
    int ds_bn = vd_net_find(&net, "b1_ds_bn"), bn1 = vd_net_find(&net, "b2_bn1");
    int relus[2] = {vd_net_find(&net, "b1_relu"), vd_net_find(&net, "b2_relu")};
    for (int i = 0; i < net.n_layers; i++)
        ck_assert_int_eq(vd_op_add_relu(&net, i), i == ds_bn ? relus[0] : i == bn1 ? relus[1] : -1);
    static const vd_math maths[] = {VD_MATH_FP32, VD_MATH_BF16, VD_MATH_FP16, VD_MATH_TF32};
    const int iters = 3;
    for (size_t k = 0; k < VD_ARRAY_LEN(maths); k++) {
        net.train.math = maths[k];
        const char *m = vd_math_name(maths[k]);
        run_cfg c = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = 1,
                     .on_backend = bar_on, .fuse_bn_add = true};
        run_out f, u, o;
        bar_bn = bar_done = bar_in_unmasked = bar_out_masked = bar_bad = 0;
        run_training(&net, 3, &c, &f);
        ck_assert_msg(f.rc == 0, "%s", f.msg);
        ck_assert_msg(f.n_add_relu == 2 && f.add_relu_bn[0] == ds_bn && f.add_relu_bn[1] == bn1,
                      "%s: %d pairs", m, f.n_add_relu);
        ck_assert_msg(bar_bn == 2 * iters && bar_done == 2 * iters && bar_bad == 0 &&
                          bar_in_unmasked == 2 * iters && bar_out_masked == 2 * iters,
                      "%s fused: %d batch norms with the ReLU (%d wrong), %d ReLUs told, %d dy "
                      "unmasked in, %d masked out", m, bar_bn, bar_bad, bar_done, bar_in_unmasked,
                      bar_out_masked);
        ck_assert_uint_eq(f.st.live_peak, f.plan_peak);
        ck_assert_uint_eq(f.st.pool_hwm, f.plan_hwm);
        c.no_fuse = true;
        bar_bn = bar_done = bar_in_unmasked = bar_out_masked = bar_bad = 0;
        run_training(&net, 3, &c, &u);
        ck_assert_msg(u.rc == 0, "%s", u.msg);
        ck_assert_msg(bar_bn == 2 * iters && bar_done == 2 * iters && bar_in_unmasked == 0 &&
                          bar_out_masked == 2 * iters,
                      "%s no_fuse: %d batch norms paired, %d ReLUs told, %d dy unmasked in", m,
                      bar_bn, bar_done, bar_in_unmasked);
        c.no_fuse = false;
        for (int q = 0; q < 2; q++) net.layers[relus[q]].inplace = false;   /* no pair */
        bar_bn = bar_done = 0;
        run_training(&net, 3, &c, &o);
        for (int q = 0; q < 2; q++) net.layers[relus[q]].inplace = true;
        ck_assert_msg(o.rc == 0, "%s", o.msg);
        ck_assert_int_eq(bar_bn + bar_done + o.n_add_relu, 0);
        size_t pb = (size_t)net.param_floats * 4;
        ck_assert_msg(!memcmp(f.params, u.params, pb) && !memcmp(f.mom, u.mom, pb) &&
                          !memcmp(f.loss, u.loss, sizeof f.loss),
                      "%s: the fused batch norm + ReLU backward changed the results (against "
                      "no_fuse)", m);
        ck_assert_msg(!memcmp(f.params, o.params, pb) && !memcmp(f.mom, o.mom, pb) &&
                          !memcmp(f.loss, o.loss, sizeof f.loss),
                      "%s: the pairing changed the results (against no pair)", m);
        ck_assert_uint_eq(f.plan_hwm, u.plan_hwm);
        if (k == 1) {   /* offload with the pair (the ReLU's y resident at the batch norm's step) */
            run_cfg ca = {.policy = VD_POLICY_ALL, .iters = iters, .poison = true,
                          .fixed_algo = 1, .fuse_bn_add = true};
            run_out o2;
            run_training(&net, 3, &ca, &o2);
            ck_assert_msg(o2.rc == 0, "%s all: %s", m, o2.msg);
            ck_assert_int_eq(o2.n_add_relu, 2);
            ck_assert_msg(!memcmp(o2.params, f.params, pb) && !memcmp(o2.loss, f.loss, sizeof f.loss),
                          "%s all: not policy none's bytes", m);
            ck_assert_uint_eq(o2.st.live_peak, o2.plan_peak);
            run_free(&o2);
        }
        run_free(&f);
        run_free(&u);
        run_free(&o);
    }
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("exec", 300, test_lenet_none_trains, test_identity_lenet, test_identity_resnet,
         test_pool_to_need,
         test_identity_bf16, test_identity_tf32, test_fault_bf16,
         test_identity_lenet_yaml, test_fault_skip_prefetch_wait, test_fault_skip_offload_wait,
         test_recompute_identity, test_fault_skip_recompute, test_per_pass_algos,
         test_before_pool_hook, test_after_step_hook, test_step_times, test_drain,
         test_profile_label_mismatch,
         test_math_mismatch, test_relu_bwd_fused, test_relu_bias_fused, test_bn_add_fused,
         test_pool_relu_fused, test_bn_add_relu_fused)
