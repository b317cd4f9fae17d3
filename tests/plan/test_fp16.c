/* test_fp16.c — math fp16 on the CPU backend: dynamic loss scaling
 * (backend.h's vd_loss_scale, GradScaler's rule) against closed forms, the
 * executor's use of it (every gradient checked, a skipped step changes
 * nothing, exit status 10 after 50 skipped steps in a row naming the
 * layer), training that tracks fp32, plans whose feature maps and offloads
 * are half fp32's bytes, and a resume through the library that repeats an
 * uninterrupted run bit for bit with skipped steps in it (SGD and AdamW,
 * whose step count skipped steps do not advance). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "vdt.h"

/* ------------------------------------------------------------------ the rule */

/* Driven directly on the CPU backend, with a hand-computed reference:
 *   - a step whose gradients hold an inf (or NaN) changes neither the
 *     parameters nor the momentum, halves the scale, counts a skip and a
 *     streak, and first_bad names the first range's layer checked bad; a
 *     second bad step keeps it; a clean step resets it to -1;
 *   - the first update that runs (t = 1: the caller counts only the
 *     updates that ran) starts the momentum (buf = g / scale, as
 *     torch.optim.SGD's first step after GradScaler's unscale_), the next
 *     uses it: p1 = p0 - lr g1, p2 = p1 - lr (m g1 + g2) with g the
 *     unscaled gradients (+ weight decay wd p);
 *   - the scale doubles after exactly VD_LOSS_SCALE_INTERVAL (2000) clean
 *     steps in a row, not one step earlier, and the count restarts. */
START_TEST(scaler_rule_closed_form) {
    vd_backend *be;
    vd_err e = {0};
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    ck_assert_ptr_nonnull(be->scale_set);
    vd_loss_scale s = vd_loss_scale_init(), got;
    ck_assert(s.scale == 65536.0f && s.first_bad == -1 && !s.stepped && !s.skipped);
    ck_assert_int_eq(be->scale_set(be, &s, &e), 0);
    float p[4] = {1.0f, -2.0f, 0.5f, 3.0f}, m[4] = {7.0f, 7.0f, 7.0f, 7.0f}, g[4];
    const float lr = 0.125f, mu = 0.5f, wd = 0.25f;
    vd_optim_step o = { .kind = VD_OPT_SGD, .lr = lr, .momentum = mu, .weight_decay = wd, .t = 1 };
    float p0[4], m0[4];
    void *table = NULL;   /* the four floats: one range of the update */
    ck_assert_int_eq(be->ranges_create(be, &(vd_update_range){0, 4, 1.0f}, 1, &table, &e), 0);
    vd_step_scalars ss = vd_step_scalars_of(&o, 0);
    ck_assert_int_eq(be->step_set(be, &ss, &e), 0);
    memcpy(p0, p, sizeof p);
    memcpy(m0, m, sizeof m);
    /* step 1: layer 5's range (g[2..3]) holds an inf; layer 3's (g[0..1]) is clean */
    for (int k = 0; k < 4; k++) g[k] = 65536.0f * (float)(k + 1);
    g[3] = INFINITY;
    ck_assert_int_eq(be->grad_check(be, g, 2, 2, 5, &e), 0);
    ck_assert_int_eq(be->grad_check(be, g, 0, 2, 3, &e), 0);
    ck_assert_int_eq(be->update_scaled(be, &o, p, g, m, NULL, table, &e), 0);
    ck_assert_int_eq(be->scale_update(be, &e), 0);
    ck_assert_int_eq(be->scale_get(be, &got, &e), 0);
    ck_assert_mem_eq(p, p0, sizeof p);
    ck_assert_mem_eq(m, m0, sizeof m);
    ck_assert(got.scale == 32768.0f && got.skipped == 1 && got.streak == 1 && got.growth == 0 &&
              got.first_bad == 5 && !got.stepped && !got.found_inf);
    /* step 2: a NaN in layer 3's range: first_bad stays 5 (where the run began) */
    g[3] = 1.0f;
    g[0] = NAN;
    ck_assert_int_eq(be->grad_check(be, g, 2, 2, 5, &e), 0);
    ck_assert_int_eq(be->grad_check(be, g, 0, 2, 3, &e), 0);
    ck_assert_int_eq(be->update_scaled(be, &o, p, g, m, NULL, table, &e), 0);
    ck_assert_int_eq(be->scale_update(be, &e), 0);
    ck_assert_int_eq(be->scale_get(be, &got, &e), 0);
    ck_assert_mem_eq(p, p0, sizeof p);
    ck_assert(got.scale == 16384.0f && got.skipped == 2 && got.streak == 2 && got.first_bad == 5);
    /* step 3: clean, the first update (fresh momentum); scale 2^14, so the
     * gradients are these values times 2^14 (exact) */
    const float g1[4] = {0.5f, -1.0f, 2.0f, 0.25f}, g2[4] = {-0.75f, 0.5f, 1.5f, -2.0f};
    float want_p[4], want_m[4];
    for (int k = 0; k < 4; k++) {
        g[k] = g1[k] * 16384.0f;
        want_m[k] = g1[k] + wd * p0[k];
        want_p[k] = p0[k] - lr * want_m[k];
    }
    ck_assert_int_eq(be->grad_check(be, g, 0, 4, 3, &e), 0);
    ck_assert_int_eq(be->update_scaled(be, &o, p, g, m, NULL, table, &e), 0);
    ck_assert_int_eq(be->scale_update(be, &e), 0);
    ck_assert_int_eq(be->scale_get(be, &got, &e), 0);
    for (int k = 0; k < 4; k++)   /* the same float operations: exact */
        ck_assert_msg(p[k] == want_p[k] && m[k] == want_m[k], "step 3 [%d]: p %a want %a, m %a "
                      "want %a", k, (double)p[k], (double)want_p[k], (double)m[k], (double)want_m[k]);
    ck_assert(got.scale == 16384.0f && got.skipped == 2 && got.streak == 0 && got.growth == 1 &&
              got.first_bad == -1 && got.stepped);
    /* step 4: clean, momentum used */
    o.t = 2;
    ss = vd_step_scalars_of(&o, 0);
    ck_assert_int_eq(be->step_set(be, &ss, &e), 0);
    for (int k = 0; k < 4; k++) {
        g[k] = g2[k] * 16384.0f;
        float d = g2[k] + wd * want_p[k];
        want_m[k] = mu * want_m[k] + d;
        want_p[k] = want_p[k] - lr * want_m[k];
    }
    ck_assert_int_eq(be->grad_check(be, g, 0, 4, 3, &e), 0);
    ck_assert_int_eq(be->update_scaled(be, &o, p, g, m, NULL, table, &e), 0);
    ck_assert_int_eq(be->scale_update(be, &e), 0);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(p[k] == want_p[k] && m[k] == want_m[k], "step 4 [%d]", k);
    /* growth: 2 clean steps so far; the scale doubles at the 2000th exactly */
    for (int n = 3; n <= 2 * VD_LOSS_SCALE_INTERVAL; n++) {
        ck_assert_int_eq(be->scale_update(be, &e), 0);
        ck_assert_int_eq(be->scale_get(be, &got, &e), 0);
        float want = 16384.0f * (float)(1 << (n / VD_LOSS_SCALE_INTERVAL));
        ck_assert_msg(got.scale == want && got.growth == n % VD_LOSS_SCALE_INTERVAL,
                      "after %d clean steps: scale %g growth %d, want %g and %d", n,
                      (double)got.scale, got.growth, (double)want, n % VD_LOSS_SCALE_INTERVAL);
    }
    ck_assert_int_eq(got.skipped, 2);
    /* scale_set clears found_inf and takes every field */
    s = got;
    s.found_inf = 1;
    s.scale = 8.0f;
    ck_assert_int_eq(be->scale_set(be, &s, &e), 0);
    ck_assert_int_eq(be->scale_get(be, &got, &e), 0);
    ck_assert(got.scale == 8.0f && !got.found_inf && got.skipped == 2);
    be->ranges_free(be, table);
    be->destroy(be);
}
END_TEST

/* ------------------------------------------------------------------ training */

/* fp16 against fp32 on the same net, policy none then everything offloaded
 * (policy all): the feature maps (x, y, dy tensors) and the offloaded bytes
 * are exactly half fp32's; the fp16 plan keeps the gradient array (the fp32
 * plan updates in the backward pass); the run is really fp16 (other
 * parameters), its losses track fp32's over 8 iterations (a few layers of
 * stored values each rounded by at most 2^-11 relative: 0.5% is ample, and
 * far below the loss's scale, ln 10), no step was skipped (65536 times
 * these small nets' gradients stays finite), and the offloading policy
 * changes no byte of the result (the executor's schedule is invisible). */
static void fp16_vs_fp32(vd_net *net, int batch) {
    run_cfg c = {.policy = VD_POLICY_NONE, .iters = 8, .poison = true, .fixed_algo = 1};
    run_out f, h, ha, fa;
    net->train.math = VD_MATH_FP32;
    run_training(net, batch, &c, &f);
    net->train.math = VD_MATH_FP16;
    run_training(net, batch, &c, &h);
    ck_assert_msg(f.rc == 0 && h.rc == 0, "%s %s", f.msg, h.msg);
    ck_assert_uint_eq(2 * h.fmap_bytes, f.fmap_bytes);
    ck_assert_msg(memcmp(f.params, h.params, (size_t)net->param_floats * 4) != 0,
                  "%s: fp16 trains exactly as fp32", net->name);
    for (int i = 0; i < c.iters; i++)
        ck_assert_msg(fabsf(h.loss[i] - f.loss[i]) <= 0.005f * fabsf(f.loss[i]),
                      "%s: iteration %d loss %g vs fp32 %g", net->name, i, (double)h.loss[i],
                      (double)f.loss[i]);
    ck_assert_int_eq(h.st.sgd_steps, c.iters);     /* nothing skipped */
    c.policy = VD_POLICY_ALL;
    run_training(net, batch, &c, &ha);
    net->train.math = VD_MATH_FP32;
    run_training(net, batch, &c, &fa);
    ck_assert_msg(ha.rc == 0 && fa.rc == 0, "%s %s", ha.msg, fa.msg);
    ck_assert_uint_gt(fa.plan_offload, 0);
    ck_assert_uint_eq(2 * ha.plan_offload, fa.plan_offload);
    ck_assert_uint_eq(2 * ha.plan_prefetch, fa.plan_prefetch);
    ck_assert_mem_eq(ha.params, h.params, (size_t)net->param_floats * 4);
    ck_assert_mem_eq(ha.mom, h.mom, (size_t)net->param_floats * 4);
    /* the gradient array: fp16's plan keeps it, fp32's (same options) not */
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    net->train.math = VD_MATH_FP16;
    ck_assert(vd_plan_grads_array(net, &po));
    net->train.math = VD_MATH_FP32;
    ck_assert(!vd_plan_grads_array(net, &po));
    run_free(&f);
    run_free(&h);
    run_free(&ha);
    run_free(&fa);
}

START_TEST(fp16_tracks_fp32) {
    vd_net net;
    tn_lenet(&net, 4);
    fp16_vs_fp32(&net, 4);
    vd_net_free(&net);
    tn_resnet(&net, 3);
    fp16_vs_fp32(&net, 3);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ the executor */

typedef struct fx {
    vd_backend *be;
    vd_profile prof;
    vd_plan plan;
    vd_exec *ex;
} fx;

/* An fp16 executor for net at batch on a fresh CPU backend, parameters
 * from seed 42. */
static void fx_open(fx *f, vd_net *net, int batch) {
    vd_err e = {0};
    memset(f, 0, sizeof *f);
    net->train.math = VD_MATH_FP16;
    ck_assert_int_eq(vd_backend_cpu_create(&f->be, &e), 0);
    ck_assert_msg(f->be->layer_setup(f->be, net, batch, VD_MATH_FP16, true, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_backend(net, batch, f->be, &vd_device_cpu, &f->prof, &e) == 0, "%s",
                  e.msg);
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.batch = batch;
    po.policy = VD_POLICY_NONE;
    po.fixed_algo = 1;
    ck_assert_msg(vd_plan_build(net, &f->prof, &po, &f->plan, &e) == 0, "%s", e.msg);
    ck_assert(!f->plan.update_in_bwd);     /* the gradient array, without asking for it */
    vd_exec_opts eo = {0};
    eo.layers_ready = true;
    eo.deterministic = true;
    eo.math = VD_MATH_FP16;
    ck_assert_msg(vd_exec_create(&f->ex, net, &f->plan, f->be, &eo, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(vd_exec_init_params(f->ex, 42, &e), 0);
}

static void fx_close(fx *f) {
    vd_exec_destroy(&f->ex);
    vd_plan_free(&f->plan);
    vd_profile_free(&f->prof);
    f->be->destroy(f->be);
}

/* Iterations [from, to) of the batches fill_batch_as makes. */
static int fx_steps(fx *f, const vd_net *net, int batch, int from, int to, float *loss, vd_err *e) {
    for (int it = from; it < to; it++) {
        fill_batch_as(net, batch, it, vd_exec_input_x(f->ex), vd_exec_input_dtype(f->ex),
                      vd_exec_input_nhwc(f->ex), vd_exec_input_labels(f->ex));
        int rc = vd_exec_train_step(f->ex, net->train.lr, it, &loss[it], e);
        if (rc) return rc;
    }
    return VD_OK;
}

/* The loss scale set far too high (2^100: the loss's gradient overflows
 * binary16 at once, and halving 49 times leaves 2^51): every step is
 * skipped, parameters and momentum stay as they were, and the 50th step in
 * a row fails with VD_ENUMERIC (exit status 10) naming the layer of the
 * first non-finite gradient: the net's last layer with weights, where the
 * overflowed loss gradient arrives first (backward order). A 49-step streak
 * still runs. Then a scale that falls below 2^-24 ends the run at once. */
START_TEST(overflow_streak_exits_10_naming_the_layer) {
    vd_net net;
    tn_lenet(&net, 2);
    fx f;
    fx_open(&f, &net, 2);
    vd_err e = {0};
    size_t pb = (size_t)net.param_floats * 4;
    float *p0 = malloc(pb), *m0 = malloc(pb), *p1 = malloc(pb), *m1 = malloc(pb), loss[64];
    ck_assert(p0 && m0 && p1 && m1);
    ck_assert_int_eq(vd_exec_get_state(f.ex, p0, m0, NULL, &e), 0);
    vd_loss_scale s = vd_loss_scale_init();
    s.scale = ldexpf(1.0f, 100);
    ck_assert_int_eq(vd_exec_set_loss_scale(f.ex, &s, &e), 0);
    ck_assert_msg(fx_steps(&f, &net, 2, 0, 49, loss, &e) == 0, "%s", e.msg);
    vd_loss_scale got;
    ck_assert(vd_exec_loss_scale(f.ex, &got));
    ck_assert(got.streak == 49 && got.skipped == 49 && got.scale == ldexpf(1.0f, 51));
    int rc = fx_steps(&f, &net, 2, 49, 50, loss, &e);
    ck_assert_int_eq(rc, VD_ENUMERIC);
    int last = -1;
    for (int i = 0; i < net.n_layers; i++)
        if (net.layers[i].n_params > 0) last = i;
    char want[200];
    snprintf(want, sizeof want, "the first layer whose gradient was not finite: '%s'",
             net.layers[last].name);
    ck_assert_msg(strstr(e.msg, want) && strstr(e.msg, "50 steps in a row"), "%s", e.msg);
    ck_assert_int_eq(vd_exec_get_state(f.ex, p1, m1, NULL, &e), 0);
    ck_assert_mem_eq(p1, p0, pb);
    ck_assert_mem_eq(m1, m0, pb);
    vd_exec_stats st;
    vd_exec_get_stats(f.ex, &st);
    ck_assert_int_eq(st.sgd_steps, 0);
    /* a scale under 2^-24 (2^-24 halved by one overflow: a NaN gradient,
     * from a NaN input) ends the run at once, whatever the streak */
    ck_assert_int_eq(vd_exec_init_params(f.ex, 42, &e), 0);
    s = vd_loss_scale_init();
    s.scale = ldexpf(1.0f, -24);
    ck_assert_int_eq(vd_exec_set_loss_scale(f.ex, &s, &e), 0);
    ck_assert_msg(fx_steps(&f, &net, 2, 0, 1, loss, &e) == 0, "%s", e.msg);
    fill_batch_as(&net, 2, 1, vd_exec_input_x(f.ex), vd_exec_input_dtype(f.ex),
                  vd_exec_input_nhwc(f.ex), vd_exec_input_labels(f.ex));
    ((uint16_t *)vd_exec_input_x(f.ex))[0] = 0x7e00u;   /* a binary16 NaN */
    rc = vd_exec_train_step(f.ex, net.train.lr, 1, &loss[1], &e);
    ck_assert_int_eq(rc, VD_ENUMERIC);
    ck_assert_msg(strstr(e.msg, "the loss scale fell below 2^-24"), "%s", e.msg);
    ck_assert(vd_exec_loss_scale(f.ex, &got) && got.scale == ldexpf(1.0f, -25) &&
              got.streak == 1);
    fx_close(&f);
    free(p0); free(m0); free(p1); free(m1);
    vd_net_free(&net);
}
END_TEST

/* N + M iterations equal N, the state (parameters, optimizer state, update
 * count, the loss scale) carried to a fresh executor, then M, bit for bit,
 * with skipped steps in the first part: a start at 2^30 overflows binary16
 * in the loss gradient until the scale has come down, then trains. With
 * SGD, then AdamW (whose bias corrections read the update count). */
START_TEST(resume_with_skips_is_exact) {
    enum { N = 24, M = 8 };
    vd_net net;
    tn_lenet(&net, 2);
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            net.train.optimizer = VD_OPT_ADAMW;
            net.train.lr = 1e-3f;
            net.train.beta1 = 0.9f;
            net.train.beta2 = 0.999f;
            net.train.eps = 1e-8f;
        }
        vd_err e = {0};
        size_t pb = (size_t)net.param_floats * 4, sb = (size_t)vd_net_state_floats(&net) * 4;
        float *pa = malloc(pb), *ma = malloc(sb), *pr = malloc(pb), *mr = malloc(sb), loss[64];
        ck_assert(pa && ma && pr && mr);
        vd_loss_scale s = vd_loss_scale_init(), a, r;
        s.scale = ldexpf(1.0f, 30);
        fx f;
        fx_open(&f, &net, 2);
        ck_assert_int_eq(vd_exec_set_loss_scale(f.ex, &s, &e), 0);
        ck_assert_msg(fx_steps(&f, &net, 2, 0, N + M, loss, &e) == 0, "%s", e.msg);
        int64_t steps_a;
        ck_assert_int_eq(vd_exec_get_state(f.ex, pa, ma, &steps_a, &e), 0);
        vd_exec_loss_scale(f.ex, &a);
        ck_assert_msg(a.skipped > 0 && a.skipped < N && steps_a == N + M - a.skipped,
                      "skipped %lld, updates %lld", (long long)a.skipped, (long long)steps_a);
        fx_close(&f);

        fx_open(&f, &net, 2);
        ck_assert_int_eq(vd_exec_set_loss_scale(f.ex, &s, &e), 0);
        ck_assert_msg(fx_steps(&f, &net, 2, 0, N, loss, &e) == 0, "%s", e.msg);
        int64_t steps;
        vd_loss_scale mid;
        ck_assert_int_eq(vd_exec_get_state(f.ex, pr, mr, &steps, &e), 0);
        vd_exec_loss_scale(f.ex, &mid);
        fx_close(&f);
        fx_open(&f, &net, 2);
        ck_assert_int_eq(vd_exec_set_state(f.ex, pr, mr, steps, &e), 0);
        ck_assert_int_eq(vd_exec_set_loss_scale(f.ex, &mid, &e), 0);
        ck_assert_msg(fx_steps(&f, &net, 2, N, N + M, loss, &e) == 0, "%s", e.msg);
        int64_t steps_r;
        ck_assert_int_eq(vd_exec_get_state(f.ex, pr, mr, &steps_r, &e), 0);
        vd_exec_loss_scale(f.ex, &r);
        ck_assert_mem_eq(pr, pa, pb);
        ck_assert_mem_eq(mr, ma, sb);
        ck_assert_int_eq(steps_r, steps_a);
        ck_assert(r.scale == a.scale && r.skipped == a.skipped && r.growth == a.growth &&
                  r.streak == a.streak && r.stepped == a.stepped);
        fx_close(&f);
        free(pa); free(ma); free(pr); free(mr);
    }
    vd_net_free(&net);
}
END_TEST

/* AdamW's step count (its bias corrections) does not advance on a skipped
 * step, as torch's GradScaler skips optimizer.step(): after steps skipped
 * (the scale starts at 2^30), the first update that runs is AdamW's first,
 * t = 1, whose bias-corrected moments are g and g^2, so (weight decay 0)
 * every weight moves by lr |g| / (|g| + eps): at most lr, and lr within
 * 1e-3 for a gradient over 1e-5 (LeNet has many). A t that counted the
 * skipped steps (t = k + 1 after k of them) moves the largest by
 * lr 0.1 sqrt(1 - 0.999^t) / ((1 - 0.9^t) sqrt(0.001)): 0.74 lr for t = 2,
 * 0.48 to 0.51 lr for t = 5 to 20 (under 0.995 lr up to t = 104). Tolerance of
 * the largest move: the float rounding of the weights (|w| < 1: 6e-8
 * absolute, 6e-5 of lr) and the gradients' |g| / (|g| + eps) < 1. */
START_TEST(adamw_skipped_steps_do_not_count) {
    vd_net net;
    tn_lenet(&net, 2);
    net.train.optimizer = VD_OPT_ADAMW;
    net.train.lr = 1e-3f;
    net.train.weight_decay = 0;
    net.train.beta1 = 0.9f;
    net.train.beta2 = 0.999f;
    net.train.eps = 1e-8f;
    fx f;
    fx_open(&f, &net, 2);
    vd_err e = {0};
    size_t pb = (size_t)net.param_floats * 4;
    float *p0 = malloc(pb), *p1 = malloc(pb), loss[64];
    ck_assert(p0 && p1);
    vd_loss_scale s = vd_loss_scale_init(), got;
    s.scale = ldexpf(1.0f, 30);
    ck_assert_int_eq(vd_exec_set_loss_scale(f.ex, &s, &e), 0);
    int64_t steps = 0;
    int it = 0;
    for (; it < 40 && steps == 0; it++) {
        ck_assert_int_eq(vd_exec_get_state(f.ex, p0, NULL, NULL, &e), 0);
        ck_assert_msg(fx_steps(&f, &net, 2, it, it + 1, loss, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(vd_exec_get_state(f.ex, p1, NULL, &steps, &e), 0);
    }
    ck_assert(vd_exec_loss_scale(f.ex, &got));
    ck_assert_msg(steps == 1 && got.skipped == it - 1 && got.skipped >= 2,
                  "updates %lld, skipped %lld of %d steps", (long long)steps,
                  (long long)got.skipped, it);
    double most = 0;
    for (int64_t i = 0; i < net.param_floats; i++) most = fmax(most, fabs((double)p1[i] - p0[i]));
    ck_assert_msg(most >= 0.999e-3 && most <= 1.0001e-3,
                  "the first update after %lld skipped steps moved a weight by at most %.6g "
                  "(lr 1e-3: t = 1 moves the largest by lr)", (long long)got.skipped, most);
    fx_close(&f);
    free(p0); free(p1);
    vd_net_free(&net);
}
END_TEST

/* A backend without the loss-scaling entry points (each NULL in turn)
 * cannot run math fp16: the executor refuses it with VD_EUNSUPPORTED (exit
 * status 8), naming the backend. */
START_TEST(backend_without_loss_scaling_is_refused) {
    vd_net net;
    tn_lenet(&net, 2);
    fx f;
    fx_open(&f, &net, 2);
    vd_exec_destroy(&f.ex);
    for (int k = 0; k < 5; k++) {
        vd_backend b = *f.be;
        switch (k) {
        case 0: b.scale_set = NULL; break;
        case 1: b.scale_get = NULL; break;
        case 2: b.grad_check = NULL; break;
        case 3: b.update_scaled = NULL; break;
        default: b.scale_update = NULL; break;
        }
        vd_exec_opts eo = {0};
        eo.layers_ready = true;
        eo.math = VD_MATH_FP16;
        vd_exec *ex = NULL;
        vd_err e = {0};
        ck_assert_int_eq(vd_exec_create(&ex, &net, &f.plan, &b, &eo, &e), VD_EUNSUPPORTED);
        ck_assert_msg(strstr(e.msg, "the cpu backend has no loss scaling"), "%s", e.msg);
        ck_assert_ptr_null(ex);
    }
    fx_close(&f);
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("fp16", 300, scaler_rule_closed_form, fp16_tracks_fp32,
         overflow_streak_exits_10_naming_the_layer, resume_with_skips_is_exact,
         adamw_skipped_steps_do_not_count,
         backend_without_loss_scaling_is_refused)
