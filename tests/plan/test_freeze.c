/* test_freeze.c — fine-tuning on the CPU backend: --freeze (vd_net_freeze)
 * leaves frozen parameters bit for bit, changes no other gradient, and
 * makes the planner keep less (a frozen weight's input, the layers that
 * need no gradient); per-layer lr_mult scales the update exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "plan_common.h"
#include "spec/spec.h"
#include "util/json.h"
#include "vdt.h"

static void freeze(vd_net *net, const char *pattern) {
    vd_err e = {0};
    ck_assert_msg(vd_net_freeze(net, pattern, &e) == 0, "--freeze %s: %s", pattern, e.msg);
}

static bool same_floats(const float *a, const float *b, int64_t n) {
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Three iterations with momentum and weight decay (tn_resnet's): a frozen
 * parameter keeps every bit of its initialisation and its momentum stays 0
 * (no gradient, no decay); every trained one moves; batch norm's running
 * statistics move in frozen layers too (PyTorch with requires_grad off).
 * Policy all (every map offloaded, NaN poison on freed memory) with the
 * update in the SGD step computes the same bits as none with the update in
 * the backward pass. */
START_TEST(test_frozen_unchanged) {
    vd_net net;
    tn_resnet(&net, 4);
    freeze(&net, "^(stem|b1_)");
    ck_assert(net.train.momentum > 0 && net.train.weight_decay > 0);
    float *init = malloc((size_t)net.param_floats * sizeof *init);
    ck_assert_ptr_nonnull(init);
    vd_net_init_params(&net, init, 42);   /* run_training's seed */
    run_out o[2];
    vd_policy pols[2] = {VD_POLICY_NONE, VD_POLICY_ALL};
    for (int r = 0; r < 2; r++) {
        run_cfg c = {.policy = pols[r], .iters = 3, .poison = true, .fixed_algo = 1,
                     .grads_persistent = r == 1};
        run_training(&net, 4, &c, &o[r]);
        ck_assert_msg(o[r].rc == 0, "%s", o[r].msg);
    }
    ck_assert_int_gt(o[1].n_offloaded, 0);
    ck_assert(same_floats(o[0].params, o[1].params, net.param_floats));
    int frozen = 0, moved_buffers = 0;
    for (int k = 0; k < net.n_params; k++) {
        const vd_param *p = &net.params[k];
        bool same = same_floats(init + p->offset, o[0].params + p->offset, p->numel);
        if (p->kind == VD_PARAM_BUFFER) {
            moved_buffers += !same && net.layers[p->layer].no_grad;
            continue;
        }
        ck_assert_msg(same == p->frozen, "%s: %s", p->name, same ? "unchanged" : "changed");
        if (!p->frozen) continue;
        frozen++;
        for (int64_t i = 0; i < p->numel; i++) ck_assert(o[0].mom[p->offset + i] == 0.0f);
    }
    ck_assert_int_eq(frozen, 12);   /* weight and bias of stem, stem_bn, b1_conv1, b1_bn1,
                                       b1_conv2, b1_bn2 */
    ck_assert_int_eq(moved_buffers, 6);   /* the running mean and var of the three bn */
    run_free(&o[0]);
    run_free(&o[1]);
    free(init);
    vd_net_free(&net);
}
END_TEST

/* A recompute in the backward pass of a map that no backward reads but a
 * trained layer's: stem and stem_bn frozen need no gradient, but b1_conv1
 * (trained) reads stem_relu's output (stem_bn's, in place) for its weight's
 * gradient; recomputed, stem_bn re-runs with the statistics its forward
 * saved, which must live until then though its own backward does not run.
 * Every map that can be recomputed is (dispositions), with the NaN poison:
 * the bits of the run that keeps everything. */
START_TEST(test_frozen_recompute) {
    vd_net net;
    tn_resnet(&net, 4);
    freeze(&net, "^stem");
    run_cfg c = {.policy = VD_POLICY_NONE, .iters = 2, .poison = true, .fixed_algo = 1};
    run_out ref, o;
    run_training(&net, 4, &c, &ref);
    ck_assert_msg(ref.rc == 0, "%s", ref.msg);
    vd_disp disp[64];
    bool ip[64];
    ck_assert_int_lt(net.n_layers, 64);
    vd_schedule_inplace_flags(&net, ip);
    disp[0] = VD_DISP_AUTO;   /* x: the host holds it */
    for (int i = 0; i < net.n_layers; i++) disp[i + 1] = ip[i] ? VD_DISP_AUTO : VD_DISP_RECOMPUTE;
    c.disp = disp;
    run_training(&net, 4, &c, &o);
    ck_assert_msg(o.rc == 0, "%s", o.msg);
    ck_assert_int_gt(o.n_recomputed, 0);
    ck_assert_int_eq(o.st.recompute_ops_iter, o.n_recompute_ops);
    ck_assert(same_floats(o.params, ref.params, net.param_floats));
    ck_assert(same_floats(o.mom, ref.mom, net.param_floats));
    for (int i = 0; i < 2; i++) ck_assert(vdt_bits_of(o.loss[i]) == vdt_bits_of(ref.loss[i]));
    run_free(&o);
    run_free(&ref);
    vd_net_free(&net);
}
END_TEST

/* Freezing changes no other gradient. One iteration without momentum or
 * weight decay leaves each trained parameter's gradient in its momentum
 * buffer (torch.optim.SGD: buf = g at the first step; math fp16: the
 * unscaled one). A frozen layer in the middle must still pass dx to the
 * layers before it (a break would zero their gradients); a frozen prefix
 * needs no gradient at all (its backward does not run); a frozen weight
 * whose bias trains reads no x. Each against the unfrozen run, bit for bit
 * (the same ops on the same values in the same order), in fp32, bf16 and
 * fp16 (whose loss scaling checks only the trained gradients), with the NaN
 * poison on freed memory. */
START_TEST(test_frozen_same_gradients) {
    static const char *const pats[] = {"^b1_conv2\\.", "^(stem|b1_bn1)", "^br2\\.weight$"};
    static const int no_grad[] = {0, 3, 0};   /* stem, stem_bn, stem_relu */
    static const vd_math maths[] = {VD_MATH_FP32, VD_MATH_BF16, VD_MATH_FP16};
    for (int m = 0; m < 3; m++) {
        vd_net net;
        tn_resnet(&net, 4);
        net.train.momentum = 0.0f;
        net.train.weight_decay = 0.0f;
        net.train.math = maths[m];
        run_cfg c = {.policy = VD_POLICY_NONE, .iters = 1, .poison = true, .fixed_algo = 1};
        run_out ref;
        run_training(&net, 4, &c, &ref);
        ck_assert_msg(ref.rc == 0, "%s", ref.msg);
        for (size_t q = 0; q < sizeof pats / sizeof pats[0]; q++) {
            freeze(&net, pats[q]);
            vd_freeze_count fc;
            vd_net_frozen_count(&net, &fc);
            ck_assert_int_eq(fc.no_grad_layers, no_grad[q]);
            run_out o;
            run_training(&net, 4, &c, &o);
            ck_assert_msg(o.rc == 0, "%s: %s", pats[q], o.msg);
            ck_assert_msg(vdt_bits_of(o.loss[0]) == vdt_bits_of(ref.loss[0]), "%s", pats[q]);
            for (int k = 0; k < net.n_params; k++) {
                const vd_param *p = &net.params[k];
                if (p->kind != VD_PARAM_WEIGHT) continue;
                const float *want = p->frozen ? NULL : ref.mom + p->offset;
                for (int64_t i = 0; i < p->numel; i++)
                    ck_assert_msg(want ? vdt_bits_of(o.mom[p->offset + i]) == vdt_bits_of(want[i])
                                       : o.mom[p->offset + i] == 0.0f,
                                  "%s (%s, %s): gradient %lld is %g, unfrozen %g", p->name,
                                  pats[q], vd_math_name(maths[m]), (long long)i,
                                  (double)o.mom[p->offset + i], want ? (double)want[i] : 0.0);
            }
            run_free(&o);
        }
        run_free(&ref);
        vd_net_free(&net);
    }
}
END_TEST

/* lr_mult (the spec's key): after one SGD step without momentum or weight
 * decay, p1 = p0 - (lr x mult) g for every trained value, computed as the
 * backends' SGD does (float lr * mult, then p - that * g), bit for bit;
 * mult 0 leaves the layer as it was. g is the momentum buffer, and it is
 * the mult-1 run's: the multipliers change no gradient. Both update paths:
 * in the backward pass and in the SGD step (grads_persistent). */
START_TEST(test_lr_mult_closed_form) {
    static const char *const spec =
        "name: lrm\n"
        "input: { channels: 2, height: 8, width: 8, classes: 4 }\n"
        "train: { batch: 4, lr: 0.125, momentum: 0, weight_decay: 0 }\n"
        "layers:\n"
        "  - { name: conv1, type: conv, out: 4, kernel: 3, pad: 1 %s }\n"
        "  - { name: bn1, type: batchnorm %s }\n"
        "  - { name: relu, type: relu }\n"
        "  - { name: conv2, type: conv, out: 4, kernel: 3, pad: 1 %s }\n"
        "  - { name: pool, type: pool, mode: avg, global: true }\n"
        "  - { name: fc, type: fc, out: 4 %s }\n"
        "  - { name: loss, type: softmax_cross_entropy }\n";
    static const float mults[4] = {0.0f, 2.5f, 1.0f, 0.3f};   /* conv1, bn1, conv2, fc */
    char text[2][1024];
    snprintf(text[0], sizeof text[0], spec, "", "", "", "");
    snprintf(text[1], sizeof text[1], spec, ", lr_mult: 0", ", lr_mult: 2.5", "",
             ", lr_mult: 0.3");
    for (int persist = 0; persist < 2; persist++) {
        vd_net net[2];
        run_out o[2];
        for (int v = 0; v < 2; v++) {
            vd_err e = {0};
            vd_net_init(&net[v]);
            ck_assert_msg(vd_spec_parse(text[v], strlen(text[v]), "lrm.yaml", &net[v], &e) == 0,
                          "%s", e.msg);
            run_cfg c = {.policy = VD_POLICY_NONE, .iters = 1, .poison = true, .fixed_algo = 1,
                         .grads_persistent = persist};
            run_training(&net[v], 4, &c, &o[v]);
            ck_assert_msg(o[v].rc == 0, "%s", o[v].msg);
        }
        float *p0 = malloc((size_t)net[0].param_floats * sizeof *p0);
        ck_assert_ptr_nonnull(p0);
        vd_net_init_params(&net[0], p0, 42);
        const float lr = net[0].train.lr;
        int checked = 0;
        for (int k = 0; k < net[1].n_params; k++) {
            const vd_param *p = &net[1].params[k];
            if (p->kind != VD_PARAM_WEIGHT) continue;
            float mult = vd_layer_lr_mult(&net[1].layers[p->layer]);
            ck_assert(mult == mults[p->layer < 2 ? p->layer : p->layer == 3 ? 2 : 3]);
            for (int v = 0; v < 2; v++) {
                float lrm = lr * (v ? mult : 1.0f);
                for (int64_t i = p->offset; i < p->offset + p->numel; i++) {
                    float g = o[0].mom[i];   /* the mult-1 run's gradient */
                    ck_assert(vdt_bits_of(o[v].mom[i]) == vdt_bits_of(g));
                    float want = p0[i] - lrm * g;
                    ck_assert_msg(vdt_bits_of(o[v].params[i]) == vdt_bits_of(want),
                                  "%s[%lld] (lr_mult %g): %.9g, want %.9g", p->name,
                                  (long long)(i - p->offset), (double)(v ? mult : 1.0f),
                                  (double)o[v].params[i], (double)want);
                    checked += v && mult == 0.0f && g != 0.0f;
                }
            }
        }
        ck_assert_int_gt(checked, 0);   /* lr_mult 0 held values whose gradient is not 0 */
        free(p0);
        for (int v = 0; v < 2; v++) {
            run_free(&o[v]);
            vd_net_free(&net[v]);
        }
    }
}
END_TEST

/* The plan of net (policy none, CPU profile) and the bytes of its feature
 * maps that --freeze spares the backward pass (the JSON's
 * frozen.maps_unread_bytes; 0 when nothing is frozen), *n_dy its feature-map
 * gradient tensors. */
static uint64_t plan_unread(const vd_net *net, int batch, vd_plan *p, int *n_dy) {
    vd_profile prof;
    vd_backend *be = cpu_for_dev(net, batch, NULL, &prof);
    vd_plan_opts o = plan_opts(batch, VD_POLICY_NONE);
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(net, &prof, &o, p, &e) == 0, "%s", e.msg);
    check_grad_flow(p, net);
    *n_dy = 0;
    for (int t = 0; t < p->n_tensors; t++) *n_dy += p->tensors[t].kind == VD_T_DACT;
    json_t *j = vd_plan_json(p, net, NULL);
    ck_assert_ptr_nonnull(j);
    json_t *fz = json_object_get(j, "frozen");
    uint64_t b = 0;
    if (fz) ck_assert(vd_json_u64(json_object_get(fz, "maps_unread_bytes"), &b));
    json_decref(j);
    vd_profile_free(&prof);
    be->destroy(be);
    return b;
}

/* The tensor of layer `name`'s output in plan p. */
static const vd_tensor *out_tensor(const vd_plan *p, const vd_net *net, const char *name) {
    int i = vd_net_find(net, name);
    ck_assert_int_ge(i, 0);
    return &p->tensors[p->layers[p->first_unit[i]].y];
}

/* The planner: x -> conv0 -> avg pool -> conv1 -> relu -> fc. The average
 * pool's output is read in the backward pass by conv1 alone, for its
 * weight's gradient (dx needs W and dy): freezing conv1.weight (its bias
 * still trains) drops that read, exactly the map's bytes. Freezing conv0
 * instead leaves conv0 and the pool with no gradient to compute: their
 * backward reads nothing (the input x no longer), and their outputs get
 * no gradient tensor (two fewer); so split in batch chunks too. */
START_TEST(test_frozen_plan_reads) {
    const int B = 4;
    vd_net net;
    tn_begin(&net, "fz", 3, 8, 8, 5, B);
    int x = tn_conv(&net, "conv0", -1, 6, 3, 1, 1);
    x = tn_pool(&net, "pool", x, VD_POOL_AVG, 2, 2);
    x = tn_conv(&net, "conv1", x, 4, 3, 1, 1);
    x = tn_relu(&net, "relu", x);
    x = tn_flatten(&net, "flat", x);
    x = tn_fc(&net, "fc", x, 5);
    tn_loss(&net, x);
    tn_finish(&net);
    vd_plan p;
    int dy0, dy1, dy2;
    ck_assert_uint_eq(plan_unread(&net, B, &p, &dy0), 0);
    ck_assert_int_ge(out_tensor(&p, &net, "pool")->bwd_first, 0);
    vd_plan_free(&p);

    freeze(&net, "^conv1\\.weight$");
    uint64_t pool_bytes = (uint64_t)B * 6 * 4 * 4 * sizeof(float);
    ck_assert_uint_eq(plan_unread(&net, B, &p, &dy1), pool_bytes);
    ck_assert_int_eq(out_tensor(&p, &net, "pool")->bwd_first, -1);
    ck_assert_int_eq(dy1, dy0);
    vd_plan_free(&p);

    freeze(&net, "^conv0\\.");
    uint64_t x_bytes = (uint64_t)B * 3 * 8 * 8 * sizeof(float);
    ck_assert_uint_eq(plan_unread(&net, B, &p, &dy2), x_bytes);
    ck_assert_int_eq(p.tensors[p.t_x].bwd_first, -1);
    ck_assert_int_ge(out_tensor(&p, &net, "pool")->bwd_first, 0);   /* conv1's dW */
    ck_assert_int_eq(dy2, dy0 - 2);
    vd_plan_free(&p);

    /* split in batch chunks: the same gradient flow (check_grad_flow), and
     * it trains (the poison would turn a read of a map nobody kept to NaN) */
    int ch[16];
    vd_err e = {0};
    ck_assert_int_lt(net.n_layers, 16);
    ck_assert_msg(vd_plan_chunks_all(&net, B, 2, ch, &e) == 0, "%s", e.msg);
    vd_profile prof;
    vd_backend *be = cpu_for_dev(&net, B, NULL, &prof);
    vd_plan_opts o = plan_opts(B, VD_POLICY_ALL);
    o.chunks = ch;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_gt(p.n_units, p.n_layers);
    check_grad_flow(&p, &net);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    be->destroy(be);
    run_cfg c = {.policy = VD_POLICY_ALL, .iters = 2, .poison = true, .fixed_algo = -1,
                 .chunks = ch};
    run_out r;
    run_training(&net, B, &c, &r);
    ck_assert_msg(r.rc == 0, "%s", r.msg);
    run_free(&r);
    vd_net_free(&net);
}
END_TEST

/* Data parallel: the all-reduce averages the trained gradients only
 * (frozen ones have none), all of them, once. */
START_TEST(test_frozen_dp_buckets) {
    vd_net net;
    tn_resnet(&net, 4);
    freeze(&net, "^(stem|b1_)");
    vd_profile prof;
    vd_backend *be = cpu_for_dev(&net, 4, NULL, &prof);
    vd_plan_opts o = plan_opts(4, VD_POLICY_NONE);
    o.grads_persistent = true;
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    vd_dp_layout lay;
    ck_assert_msg(vd_dp_layout_build(&net, &p, 64, &lay, &e) == 0, "%s", e.msg);
    int64_t trained = 0, covered = 0;
    for (int k = 0; k < net.n_params; k++) {
        const vd_param *pr = &net.params[k];
        int64_t in = 0;
        for (int r = 0; r < lay.n_ranges; r++) {
            int64_t a = lay.ranges[r].offset, b = a + lay.ranges[r].count;
            int64_t lo = a > pr->offset ? a : pr->offset;
            int64_t hi = b < pr->offset + pr->numel ? b : pr->offset + pr->numel;
            if (hi > lo) in += hi - lo;
        }
        ck_assert_msg(in == (vd_param_trained(pr) ? pr->numel : 0), "%s: %lld of %lld averaged",
                      pr->name, (long long)in, (long long)pr->numel);
        if (vd_param_trained(pr)) trained += pr->numel;
        covered += in;
    }
    ck_assert_int_eq(covered, trained);
    ck_assert_uint_eq(lay.bytes, (uint64_t)trained * sizeof(float));
    vd_dp_layout_free(&lay);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    be->destroy(be);
    vd_net_free(&net);
}
END_TEST

/* The shipped ResNet-50 (analytic H200 profile, batch 16, policy dyn at a
 * budget where the unfrozen net must offload) with the backbone up to
 * layer3 frozen, the case: the plan keeps and moves less, and the
 * predicted iteration does not grow (the frozen layers' backward passes are
 * gone from it). */
START_TEST(test_frozen_resnet50_plan) {
    vd_net net;
    load_shipped_net(&net, "resnet50.yaml", 16);
    vd_profile prof;
    analytic_profile(&net, 16, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(16, VD_POLICY_DYN);
    o.budget = (uint64_t)1 << 30;
    vd_plan p[2];
    vd_err e = {0};
    for (int f = 0; f < 2; f++) {
        if (f) freeze(&net, "^(conv1|bn1|layer[1-3])\\.");
        ck_assert_msg(vd_plan_build(&net, &prof, &o, &p[f], &e) == 0, "%s", e.msg);
        check_grad_flow(&p[f], &net);
    }
    ck_assert_uint_gt(p[0].offload_bytes, 0);
    ck_assert_uint_lt(p[1].offload_bytes, p[0].offload_bytes);
    ck_assert_uint_lt(p[1].live_peak, p[0].live_peak);
    ck_assert_msg(p[1].sim.iter_s <= p[0].sim.iter_s, "predicted %g s frozen, %g s not",
                  p[1].sim.iter_s, p[0].sim.iter_s);
    for (int f = 0; f < 2; f++) vd_plan_free(&p[f]);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* vd_net_freeze's refusals (VD_EUSAGE naming the pattern), each leaving
 * nothing frozen. */
START_TEST(test_freeze_bad_patterns) {
    vd_net net;
    tn_resnet(&net, 2);
    static const struct { const char *pat, *says; } bad[] = {
        {"^nothing", "matches no parameter"},
        {"running_var", "only buffers"},
        {".", "freezes every parameter"},
        {"[a-", "not a regular expression"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        vd_err e = {0};
        ck_assert_int_eq(vd_net_freeze(&net, bad[k].pat, &e), VD_EUSAGE);
        ck_assert_msg(strstr(e.msg, bad[k].pat) && strstr(e.msg, bad[k].says), "%s", e.msg);
        vd_freeze_count fc;
        vd_net_frozen_count(&net, &fc);
        ck_assert_int_eq(fc.frozen, 0);
        ck_assert_int_eq(fc.no_grad_layers, 0);
    }
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("freeze", 300, test_frozen_unchanged, test_frozen_recompute, test_frozen_same_gradients,
         test_lr_mult_closed_form, test_frozen_plan_reads, test_frozen_dp_buckets,
         test_frozen_resnet50_plan,
         test_freeze_bad_patterns)
