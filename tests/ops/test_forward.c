/* test_forward.c — CPU op forwards against hand-computed values and
 * independent double-precision references (PyTorch's definitions). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops_common.h"

static vd_backend *be;

static void setup(void) {
    vd_err e = {0};
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
}
static void teardown(void) { be->destroy(be); be = NULL; }

static void iota(float *p, int64_t n, float start) {
    for (int64_t i = 0; i < n; i++) p[i] = start + (float)i;
}

/* Exact comparison for small integers / exactly representable results; else
 * `tol` absolute. */
static void expect(const float *got, const double *want, int n, double tol, const char *what) {
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - want[i]) <= tol, "%s[%d]: got %.9g want %.9g", what, i,
                      (double)got[i], want[i]);
}

/* ------------------------------------------------------------------ conv */

/* x = 1..16 (4x4), 3x3 ones, pad 1, bias 0.5: neighbourhood sums. */
START_TEST(conv_hand) {
    vd_net net;
    int i = t_net_one(&net, 1, 4, 4, vdt_conv(-1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, true));
    for (int algo = 0; algo < 2; algo++) {
        t_op t;
        t_op_init(&t, be, &net, i, 1, 1);
        iota(t.x[0], 16, 1);
        for (int k = 0; k < 9; k++) t.w[k] = 1;
        t.b[0] = 0.5f;
        t.io.algo = algo;
        t_fwd(&t);
        double want[16] = {14, 24, 30, 22, 33, 54, 63, 45, 57, 90, 99, 69, 46, 72, 78, 54};
        for (int k = 0; k < 16; k++) want[k] += 0.5;
        expect(t.y, want, 16, 0, algo ? "direct" : "im2col");
        t_op_free(&t);
    }
    vd_net_free(&net);
}
END_TEST

/* Dilation 2 on 5x5 (x = 1..25): taps at rows/cols 0, 2, 4: 117. */
START_TEST(conv_hand_dilation) {
    vd_net net;
    int i = t_net_one(&net, 1, 5, 5, vdt_conv(-1, 1, 3, 3, 1, 1, 0, 0, 2, 2, 1, false));
    ck_assert_int_eq(net.layers[i].h, 1);
    for (int algo = 0; algo < 2; algo++) {
        t_op t;
        t_op_init(&t, be, &net, i, 1, 1);
        iota(t.x[0], 25, 1);
        for (int k = 0; k < 9; k++) t.w[k] = 1;
        t.io.algo = algo;
        t_fwd(&t);
        double want[1] = {117};
        expect(t.y, want, 1, 0, "dilated");
        t_op_free(&t);
    }
    vd_net_free(&net);
}
END_TEST

/* Naive double reference for every config, both algorithms. Tolerance: a
 * float sum of K products errs by at most ~K*6e-8*sum|terms|; K <= 50 here,
 * so 1e-5 * (sum|terms| + |bias|) bounds it with room. */
static void conv_vs_ref(int C, int H, int W, vd_layer l, int n) {
    vd_net net;
    int li = t_net_one(&net, C, H, W, l);
    const vd_layer *L = &net.layers[li];
    int G = L->u.conv.groups, Cg = C / G, OC = L->c, OCg = OC / G;
    int kh = L->u.conv.kh, kw = L->u.conv.kw;
    for (int algo = 0; algo < 2; algo++) {
        t_op t;
        t_op_init(&t, be, &net, li, n, 17);
        t.io.algo = algo;
        t_fwd(&t);
        for (int b = 0; b < n; b++)
            for (int oc = 0; oc < OC; oc++)
                for (int oh = 0; oh < L->h; oh++)
                    for (int ow = 0; ow < L->w; ow++) {
                        double s = L->u.conv.bias ? t.b[oc] : 0, mag = fabs(s);
                        int g = oc / OCg;
                        for (int ic = 0; ic < Cg; ic++)
                            for (int ki = 0; ki < kh; ki++)
                                for (int kj = 0; kj < kw; kj++) {
                                    int ih = oh * L->u.conv.sh - L->u.conv.ph + ki * L->u.conv.dh;
                                    int iw = ow * L->u.conv.sw - L->u.conv.pw + kj * L->u.conv.dw;
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                    double term = (double)t.w[((oc * Cg + ic) * kh + ki) * kw + kj] *
                                                  t.x[0][(((int64_t)b * C + g * Cg + ic) * H + ih) * W + iw];
                                    s += term;
                                    mag += fabs(term);
                                }
                        float got = t.y[(((int64_t)b * OC + oc) * L->h + oh) * L->w + ow];
                        ck_assert_msg(fabs(got - s) <= 1e-5 * mag + 1e-30,
                                      "algo %d y[%d,%d,%d,%d] = %.9g, reference %.9g", algo, b, oc,
                                      oh, ow, (double)got, s);
                    }
        t_op_free(&t);
    }
    vd_net_free(&net);
}

START_TEST(conv_reference) {
    conv_vs_ref(3, 7, 6, vdt_conv(-1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true), 2);
    conv_vs_ref(2, 9, 8, vdt_conv(-1, 3, 3, 2, 2, 3, 1, 0, 1, 1, 1, false), 2);
    conv_vs_ref(2, 8, 7, vdt_conv(-1, 2, 3, 3, 1, 1, 2, 2, 2, 1, 1, true), 1);
    conv_vs_ref(4, 6, 5, vdt_conv(-1, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true), 2);
    conv_vs_ref(3, 5, 5, vdt_conv(-1, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, true), 2);
    conv_vs_ref(3, 11, 11, vdt_conv(-1, 5, 11, 11, 4, 4, 2, 2, 1, 1, 1, true), 1);
    conv_vs_ref(16, 4, 4, vdt_conv(-1, 8, 1, 1, 1, 1, 0, 0, 1, 1, 1, true), 2);
}
END_TEST

/* ------------------------------------------------------------------ pool */

static void pool_hand(int c, int h, int w, vd_layer l, const double *want, int nwant,
                      const char *what) {
    vd_net net;
    int i = t_net_one(&net, c, h, w, l);
    ck_assert_int_eq(vd_net_out_numel(&net, i), nwant);
    t_op t;
    t_op_init(&t, be, &net, i, 1, 1);
    iota(t.x[0], (int64_t)c * h * w, 1);
    t_fwd(&t);
    expect(t.y, want, nwant, 1e-6, what);
    t_op_free(&t);
    vd_net_free(&net);
}

START_TEST(pool_values) {
    double max2[] = {6, 8, 14, 16};
    pool_hand(1, 4, 4, vdt_pool(-1, VD_POOL_MAX, 2, 2, 2, 2, 0, 0, false), max2, 4, "max 2x2");
    /* count_include_pad=True: divisor 9 even at the border */
    double avgp[] = {14 / 9.0, 30 / 9.0, 57 / 9.0, 99 / 9.0};
    pool_hand(1, 4, 4, vdt_pool(-1, VD_POOL_AVG, 3, 3, 2, 2, 1, 1, false), avgp, 4, "avg 3x3 s2 p1");
    /* ceil_mode: last window [4,6) of a 1x6 row has divisor 2 (ends at in+pad) */
    double avgc[] = {2, 4, 5.5};
    pool_hand(1, 1, 6, vdt_pool(-1, VD_POOL_AVG, 1, 3, 1, 2, 0, 0, true), avgc, 3, "avg ceil");
    /* PyTorch: avg_pool1d(arange(1,7), 3, 2, 1, ceil_mode=True) = [1, 3, 5, 3] */
    double avgcp[] = {1, 3, 5, 3};
    pool_hand(1, 1, 6, vdt_pool(-1, VD_POOL_AVG, 1, 3, 1, 2, 0, 1, true), avgcp, 4, "avg ceil pad");
    double maxc[] = {3, 5, 6};
    pool_hand(1, 1, 6, vdt_pool(-1, VD_POOL_MAX, 1, 3, 1, 2, 0, 0, true), maxc, 3, "max ceil");
    /* adaptive windows floor(i*in/out) .. ceil((i+1)*in/out) */
    double ad5[] = {1.5, 3, 4.5};
    pool_hand(1, 1, 5, t_adaptive(-1, VD_POOL_AVG, 1, 3), ad5, 3, "adaptive 5->3");
    double ad7[] = {1.5, 3, 5, 6.5};
    pool_hand(1, 1, 7, t_adaptive(-1, VD_POOL_AVG, 1, 4), ad7, 4, "adaptive 7->4");
    double adm[] = {2, 4, 5};
    pool_hand(1, 1, 5, t_adaptive(-1, VD_POOL_MAX, 1, 3), adm, 3, "adaptive max 5->3");
    vd_layer g = vdt_pool(-1, VD_POOL_AVG, 0, 0, 0, 0, 0, 0, false);
    g.u.pool.global = true;
    double glob[] = {3.5, 9.5};  /* two channels of 6: means of 1..6 and 7..12 */
    pool_hand(2, 2, 3, g, glob, 2, "global");
}
END_TEST

/* Max pool: ties go to the first element, NaN propagates and takes the
 * gradient (the last NaN of a window), as in PyTorch. */
START_TEST(pool_max_ties_nan) {
    vd_net net;
    int i = t_net_one(&net, 1, 2, 2, vdt_pool(-1, VD_POOL_MAX, 2, 2, 2, 2, 0, 0, false));
    t_op t;
    t_op_init(&t, be, &net, i, 1, 1);
    float xs[4] = {1, 3, 3, 0};
    memcpy(t.x[0], xs, sizeof xs);
    t_fwd(&t);
    ck_assert(t.y[0] == 3);
    t.r[0] = 1;
    t_bwd(&t);
    ck_assert(t.dx[0][0] == 0 && t.dx[0][1] == 1 && t.dx[0][2] == 0 && t.dx[0][3] == 0);
    t.x[0][3] = NAN;
    t_fwd(&t);
    ck_assert(isnan(t.y[0]));
    t_bwd(&t);   /* the gradient goes to the NaN, the element PyTorch picks */
    ck_assert(t.dx[0][0] == 0 && t.dx[0][1] == 0 && t.dx[0][2] == 0 && t.dx[0][3] == 1);
    /* two NaNs: the last (PyTorch's "val > maxval || isnan(val)" scan takes
     * each NaN it meets; the CUDA kernels' window_max does the same) */
    t.x[0][0] = NAN;
    t.x[0][3] = 0;
    t.x[0][2] = NAN;
    t_fwd(&t);
    ck_assert(isnan(t.y[0]));
    t_bwd(&t);
    ck_assert(t.dx[0][0] == 0 && t.dx[0][1] == 0 && t.dx[0][2] == 1 && t.dx[0][3] == 0);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ relu */

START_TEST(relu_values_inplace) {
    vd_net net;
    int i = t_net_one(&net, 1, 1, 5, vdt_simple(-1, VD_OP_RELU));
    t_op t;
    t_op_init(&t, be, &net, i, 1, 1);
    float xs[5] = {-2, -0.0f, 0.5f, 3, NAN};
    memcpy(t.x[0], xs, sizeof xs);
    t_fwd(&t);
    ck_assert(t.y[0] == 0 && t.y[1] == 0 && t.y[2] == 0.5f && t.y[3] == 3 && isnan(t.y[4]));
    float r[5] = {1, 2, 3, 4, 5};
    memcpy(t.r, r, sizeof r);
    t_bwd(&t);
    float want[5] = {0, 0, 3, 4, 0};
    for (int k = 0; k < 4; k++) ck_assert(t.dx[0][k] == want[k]);
    /* in place: x == y, dx == dy (the scheduler's in-place ReLU) */
    memcpy(t.y, xs, sizeof xs);
    t.io.x[0] = t.y;
    t_fwd(&t);
    ck_assert(t.y[0] == 0 && t.y[2] == 0.5f && t.y[3] == 3);
    memcpy(t.dy, r, sizeof r);
    t.io.dx[0] = t.dy;
    vd_err e = {0};
    ck_assert_int_eq(be->backward(be, &net, i, &t.io, &e), 0);
    for (int k = 0; k < 4; k++) ck_assert(t.dy[k] == want[k]);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ gelu */

/* torch.nn.GELU() in the exact (erf) form against the closed form
 * y = x Phi(x), dy/dx = Phi(x) + x phi(x), evaluated independently (Python
 * math.erf in double). The CPU computes in double and rounds once, so each
 * value is the float nearest the reference: tolerance 1 ulp (the double
 * result may sit within 1e-16 of a rounding boundary). */
static bool within_ulp(float got, double want) {
    float w = (float)want;
    return got == w || got == nextafterf(w, INFINITY) || got == nextafterf(w, -INFINITY);
}

START_TEST(gelu_closed_form) {
    static const double xs[8] = {-3, -1, -0.5, 0, 0.5, 1, 2, 4};
    static const double ys[8] = {-0.00404969409489031, -0.15865525393145707, -0.15426876936299344,
                                 0.0, 0.34573123063700656, 0.8413447460685429, 1.9544997361036416,
                                 3.9998733150326675};
    static const double ds[8] = {-0.01194564720418392, -0.08331547058768629, 0.13250487534383712,
                                 0.5, 0.8674951246561629, 1.0833154705876864, 1.085231801078197,
                                 1.0005036496612265};
    vd_net net;
    int i = t_net_one(&net, 1, 2, 4, vdt_simple(-1, VD_OP_GELU));
    t_op t;
    t_op_init(&t, be, &net, i, 1, 1);
    for (int k = 0; k < 8; k++) t.x[0][k] = (float)xs[k];
    t_fwd(&t);
    for (int k = 0; k < 8; k++) t.r[k] = 1.0f;   /* dy = 1: dx is the derivative */
    t_bwd(&t);
    for (int k = 0; k < 8; k++) {
        ck_assert_msg(within_ulp(t.y[k], ys[k]), "gelu(%g) = %.9g, want %.9g", xs[k], t.y[k], ys[k]);
        ck_assert_msg(within_ulp(t.dx[0][k], ds[k]), "gelu'(%g) = %.9g, want %.9g", xs[k], t.dx[0][k],
                      ds[k]);
    }
    /* NaN propagates; dx_beta = 1 adds */
    t.x[0][0] = NAN;
    t_fwd(&t);
    ck_assert(isnan(t.y[0]));
    t.x[0][0] = (float)xs[0];
    for (int k = 0; k < 8; k++) t.dx[0][k] = 2.0f;
    t.io.dx_beta[0] = 1.0f;
    t_bwd(&t);
    for (int k = 0; k < 8; k++)   /* 2 + dx in float: within 2 ulp of 2 of the exact sum */
        ck_assert_msg(fabs(t.dx[0][k] - (2.0 + ds[k])) <= 4.8e-7, "dx+= at %g: %.9g", xs[k],
                      t.dx[0][k]);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ lrn */

/* One channel, size 3, alpha 3 (alpha/size = 1), beta 1/2, k 1:
 * y = x / sqrt(1 + x^2); x = 0.75 gives 0.6. */
START_TEST(lrn_hand) {
    vd_layer l = vdt_simple(-1, VD_OP_LRN);
    l.u.lrn.size = 3; l.u.lrn.alpha = 3; l.u.lrn.beta = 0.5f; l.u.lrn.k = 1;
    vd_net net;
    int i = t_net_one(&net, 1, 1, 2, l);
    t_op t;
    t_op_init(&t, be, &net, i, 1, 1);
    t.x[0][0] = 0.75f;
    t.x[0][1] = -2.0f;
    t_fwd(&t);
    double want[2] = {0.6, -2.0 / sqrt(5.0)};
    expect(t.y, want, 2, 1e-7, "lrn");
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* torch.nn.functional.local_response_norm, transcribed: pad x^2 along
 * channels with size/2 zeros in front and (size-1)/2 behind, average over
 * `size` consecutive channels, div = (avg*alpha + k)^beta, y = x/div. */
static void lrn_vs_torch(int C, int size, float alpha, float beta, float k) {
    vd_layer l = vdt_simple(-1, VD_OP_LRN);
    l.u.lrn.size = size; l.u.lrn.alpha = alpha; l.u.lrn.beta = beta; l.u.lrn.k = k;
    vd_net net;
    int i = t_net_one(&net, C, 2, 3, l);
    t_op t;
    t_op_init(&t, be, &net, i, 2, 5);
    t_fill_uniform(t.x[0], t.xn[0], -3, 3, 8);
    t_fwd(&t);
    int hw = 6, P = C + size - 1;
    double *pad = calloc((size_t)P, sizeof *pad);
    ck_assert_ptr_nonnull(pad);
    for (int n = 0; n < 2; n++)
        for (int s = 0; s < hw; s++) {
            for (int j = 0; j < P; j++) pad[j] = 0;
            for (int c = 0; c < C; c++) {
                double v = t.x[0][(n * C + c) * hw + s];
                pad[c + size / 2] = v * v;
            }
            for (int c = 0; c < C; c++) {
                double avg = 0;
                for (int j = c; j < c + size; j++) avg += pad[j];
                avg /= size;
                double x = t.x[0][(n * C + c) * hw + s];
                double want = x / pow(avg * alpha + k, beta);
                double got = t.y[(n * C + c) * hw + s];
                /* float output: one rounding plus float parameters, 1e-6 relative */
                ck_assert_msg(fabs(got - want) <= 1e-6 * (fabs(want) + 1e-3),
                              "C=%d size=%d c=%d: %.9g vs %.9g", C, size, c, got, want);
            }
        }
    free(pad);
    t_op_free(&t);
    vd_net_free(&net);
}

START_TEST(lrn_torch_formula) {
    lrn_vs_torch(7, 5, 1e-4f, 0.75f, 2.0f);   /* AlexNet's */
    lrn_vs_torch(7, 4, 0.9f, 0.75f, 1.0f);    /* even size: asymmetric window */
    lrn_vs_torch(3, 5, 0.5f, 0.6f, 1.0f);     /* window wider than C */
}
END_TEST

/* ------------------------------------------------------------------ batchnorm */

START_TEST(bn_train_hand) {
    vd_net net;
    int i = t_net_one(&net, 1, 1, 1, vdt_simple(-1, VD_OP_BATCHNORM));
    t_op t;
    t_op_init(&t, be, &net, i, 4, 1);
    iota(t.x[0], 4, 1);                 /* mean 2.5, biased var 1.25, unbiased 5/3 */
    t.w[0] = 2; t.b[0] = 0.5f; t.rm[0] = 0; t.rv[0] = 1;
    t_fwd(&t);
    double is = 1 / sqrt(1.25 + 1e-5);
    double want[4];
    for (int k = 0; k < 4; k++) want[k] = 2 * (k + 1 - 2.5) * is + 0.5;
    expect(t.y, want, 4, 1e-6, "bn y");
    ck_assert(fabs(t.aux[0] - 2.5) < 1e-7);
    ck_assert(fabs(t.aux[1] - is) < 1e-6);
    ck_assert(fabs(t.rm[0] - 0.25) < 1e-7);                      /* 0.9*0 + 0.1*2.5 */
    ck_assert(fabs(t.rv[0] - (0.9 + 0.1 * 5.0 / 3.0)) < 1e-6);   /* unbiased var */
    /* eval uses the running statistics and leaves them alone */
    t.io.training = false;
    t_fwd(&t);
    double ise = 1 / sqrt(t.rv[0] + 1e-5);
    for (int k = 0; k < 4; k++) want[k] = 2 * (k + 1 - 0.25) * ise + 0.5;
    expect(t.y, want, 4, 1e-6, "bn eval y");
    ck_assert(fabs(t.rm[0] - 0.25) < 1e-7);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* gamma 1, beta 0: every channel's output has mean 0 and (biased) variance
 * var/(var+eps) ~ 1 over N*H*W; running stats follow the momentum rule. */
START_TEST(bn_train_stats) {
    vd_net net;
    int i = t_net_one(&net, 3, 4, 5, vdt_simple(-1, VD_OP_BATCHNORM));
    t_op t;
    t_op_init(&t, be, &net, i, 3, 2);
    for (int c = 0; c < 3; c++) { t.w[c] = 1; t.b[c] = 0; t.rm[c] = 1; t.rv[c] = 2; }
    for (int64_t k = 0; k < t.xn[0]; k++) t.x[0][k] = 3 * t.x[0][k] + 5;
    t_fwd(&t);
    int64_t hw = 20, M = 60;
    for (int c = 0; c < 3; c++) {
        double s = 0, s2 = 0, xs = 0, xs2 = 0;
        for (int n = 0; n < 3; n++)
            for (int64_t k = 0; k < hw; k++) {
                double y = t.y[(n * 3 + c) * hw + k], x = t.x[0][(n * 3 + c) * hw + k];
                s += y; s2 += y * y; xs += x; xs2 += x * x;
            }
        double mean = s / M, var = s2 / M - mean * mean;
        double xm = xs / M, xv = xs2 / M - xm * xm;
        ck_assert_msg(fabs(mean) < 1e-6, "channel %d mean %g", c, mean);
        ck_assert_msg(fabs(var - xv / (xv + 1e-5)) < 1e-5, "channel %d var %g", c, var);
        ck_assert(fabs(t.rm[c] - (0.9 * 1 + 0.1 * xm)) < 1e-5);
        ck_assert(fabs(t.rv[c] - (0.9 * 2 + 0.1 * xv * M / (M - 1))) < 1e-5);
    }
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* PyTorch refuses training batch norm with one value per channel. */
START_TEST(bn_train_single_value) {
    vd_net net;
    int i = t_net_one(&net, 2, 1, 1, vdt_simple(-1, VD_OP_BATCHNORM));
    t_op t;
    t_op_init(&t, be, &net, i, 1, 1);
    vd_err e = {0};
    ck_assert_int_eq(be->forward(be, &net, i, &t.io, &e), VD_EUSAGE);
    ck_assert(strstr(e.msg, "more than 1 value") != NULL);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ fc */

START_TEST(fc_hand) {
    vd_layer l = vdt_simple(-1, VD_OP_FC);
    l.u.fc.out = 3; l.u.fc.bias = true;
    vd_net net;
    int i = t_net_one(&net, 2, 1, 1, l);
    t_op t;
    t_op_init(&t, be, &net, i, 2, 1);
    float x[4] = {1, 2, -1, 3}, w[6] = {1, 0, 0, 1, 1, 1}, b[3] = {0.5f, 0, -1};
    memcpy(t.x[0], x, sizeof x); memcpy(t.w, w, sizeof w); memcpy(t.b, b, sizeof b);
    t_fwd(&t);
    double want[6] = {1.5, 2, 2, -0.5, 3, 1};
    expect(t.y, want, 6, 0, "fc");
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ dropout */

START_TEST(dropout_mask) {
    vd_layer l = vdt_simple(-1, VD_OP_DROPOUT);
    l.u.dropout.p = 0.3f;
    vd_net net;
    t_net_begin(&net, 3, 20, 25);
    l.in[0] = vdt_add(&net, vdt_simple(-1, VD_OP_RELU));   /* so the dropout is layer 1 */
    int i = vdt_add(&net, l);
    vdt_finish(&net, i);
    t_op t;
    t_op_init(&t, be, &net, i, 40, 3);         /* 60000 elements */
    for (int64_t k = 0; k < t.xn[0]; k++) if (t.x[0][k] == 0) t.x[0][k] = 1;
    t.io.seed = 77; t.io.iter = 12;
    t_fwd(&t);
    float scale = 1.0f / (1.0f - 0.3f);
    int64_t kept = 0;
    for (int64_t k = 0; k < t.yn; k++) {
        bool keep = vd_hash_uniform(77, (uint64_t)i, 12, (uint64_t)k) >= 0.3f;
        if (keep) { kept++; ck_assert(t.y[k] == t.x[0][k] * scale); }
        else ck_assert(t.y[k] == 0.0f);
    }
    /* binomial(60000, 0.7): sd 112; 5 sd */
    ck_assert_msg(llabs(kept - 42000) < 560, "kept %lld of 60000", (long long)kept);
    /* same (seed, layer, iter): same bytes; in place too */
    float *y1 = t_copy(t.y, t.yn);
    memcpy(t.y, t.x[0], (size_t)t.yn * sizeof(float));
    t.io.x[0] = t.y;
    t_fwd(&t);
    ck_assert(memcmp(y1, t.y, (size_t)t.yn * sizeof(float)) == 0);
    t.io.x[0] = t.x[0];
    /* backward: same mask, same scale */
    t_bwd(&t);
    for (int64_t k = 0; k < t.yn; k++)
        ck_assert(t.dx[0][k] == (y1[k] != 0 ? t.r[k] * scale : 0.0f));
    /* another iteration: another mask */
    t.io.iter = 13;
    t_fwd(&t);
    int64_t diff = 0;
    for (int64_t k = 0; k < t.yn; k++) diff += (t.y[k] == 0) != (y1[k] == 0);
    ck_assert_msg(diff > 10000, "masks of iterations 12 and 13 differ in only %lld", (long long)diff);
    /* eval: identity */
    t.io.training = false;
    t_fwd(&t);
    ck_assert(memcmp(t.y, t.x[0], (size_t)t.yn * sizeof(float)) == 0);
    free(y1);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ flatten, add, concat */

START_TEST(flatten_add_concat) {
    vd_net net;
    t_net_begin(&net, 1, 2, 2);
    int a = vdt_add(&net, vdt_conv(-1, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, false));
    int b = vdt_add(&net, vdt_conv(-1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false));
    int ins[2] = {a, b};
    int cat = vdt_add(&net, vdt_multi(VD_OP_CONCAT, 2, ins));
    int ins3[3] = {cat, cat, cat};
    int add = vdt_add(&net, vdt_multi(VD_OP_ADD, 3, ins3));
    int fl = vdt_add(&net, vdt_simple(add, VD_OP_FLATTEN));
    vdt_finish(&net, fl);
    ck_assert_int_eq(net.layers[cat].c, 3);
    ck_assert_int_eq(net.layers[fl].c, 12);
    ck_assert_int_eq(net.layers[fl].h, 1);

    t_op t;
    t_op_init(&t, be, &net, cat, 2, 1);
    iota(t.x[0], 16, 100);   /* [2 samples][2 ch][4] */
    iota(t.x[1], 8, 200);    /* [2 samples][1 ch][4] */
    t_fwd(&t);
    double want[24] = {100, 101, 102, 103, 104, 105, 106, 107, 200, 201, 202, 203,
                       108, 109, 110, 111, 112, 113, 114, 115, 204, 205, 206, 207};
    expect(t.y, want, 24, 0, "concat");
    t_op_free(&t);

    t_op_init(&t, be, &net, add, 2, 2);
    t_fwd(&t);
    for (int64_t k = 0; k < t.yn; k++) ck_assert(t.y[k] == (t.x[0][k] + t.x[1][k]) + t.x[2][k]);
    t_op_free(&t);

    t_op_init(&t, be, &net, fl, 2, 3);
    t_fwd(&t);
    ck_assert(memcmp(t.y, t.x[0], (size_t)t.yn * sizeof(float)) == 0);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ softmax cross-entropy */

/* logits [0, 0, ln 2]: p = [1/4, 1/4, 1/2]. Labels 2 and 0: losses ln 2 and
 * ln 4, mean 1.5 ln 2. */
START_TEST(xent_hand) {
    vd_net net;
    t_net_begin(&net, 3, 1, 1);
    vdt_finish(&net, -1);
    t_op t;
    t_op_init(&t, be, &net, 0, 2, 1);
    float x[6] = {0, 0, (float)log(2.0), 0, 0, (float)log(2.0)};
    memcpy(t.x[0], x, sizeof x);
    t.labels[0] = 2; t.labels[1] = 0;
    t_fwd(&t);
    double want[6] = {0.25, 0.25, 0.5, 0.25, 0.25, 0.5};
    expect(t.y, want, 6, 1e-7, "softmax");
    ck_assert_msg(fabs(t.aux[0] - 1.5 * log(2.0)) < 1e-6, "loss %.9g", (double)t.aux[0]);
    /* top-1 hits: both argmaxes are class 2, sample 0's label */
    ck_assert_float_eq(t.aux[1], 1.0f);
    /* loss_n 1: only the first sample counts (loss ln 2, its hit), the
     * second still gets its softmax */
    t.io.loss_n = 1;
    memset(t.y, 0xFF, 6 * sizeof(float));
    t_fwd(&t);
    expect(t.y, want, 6, 1e-7, "softmax, loss_n 1");
    ck_assert_msg(fabs(t.aux[0] - log(2.0)) < 1e-6, "loss %.9g", (double)t.aux[0]);
    ck_assert_float_eq(t.aux[1], 1.0f);
    /* sample 0 labelled 0 instead: a miss; the uncounted sample 1 stays out */
    t.labels[0] = 0;
    t_fwd(&t);
    ck_assert_msg(fabs(t.aux[0] - log(4.0)) < 1e-6, "loss %.9g", (double)t.aux[0]);
    ck_assert_float_eq(t.aux[1], 0.0f);
    /* equal maxima: the first is argmax (logits [1, 1, 0], label 1: a miss) */
    t.io.loss_n = 0;
    float tie[6] = {1, 1, 0, 1, 1, 0};
    memcpy(t.x[0], tie, sizeof tie);
    t.labels[0] = 1; t.labels[1] = 0;
    t_fwd(&t);
    ck_assert_float_eq(t.aux[1], 1.0f);
    memcpy(t.x[0], x, sizeof x);
    t.labels[0] = 2; t.labels[1] = 0;
    t_fwd(&t);
    t_bwd(&t);   /* dx = (p - onehot)/N, dy ignored */
    double dwant[6] = {0.125, 0.125, -0.25, -0.375, 0.125, 0.25};
    expect(t.dx[0], dwant, 6, 1e-7, "dx");
    /* large logits: no overflow */
    t.x[0][0] = 1000; t.x[0][1] = 0; t.x[0][2] = -1000;
    t.labels[0] = 1;
    t_fwd(&t);
    ck_assert(fabs(t.y[0] - 1) < 1e-7 && isfinite(t.aux[0]));
    ck_assert(fabs(t.aux[0] - (1000 + 2 * log(2.0)) / 2) < 1e-3);
    /* a label outside [0, classes) is a data error */
    t.labels[1] = 3;
    vd_err e = {0};
    ck_assert_int_eq(be->forward(be, &net, 0, &t.io, &e), VD_EDATA);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

static TCase *case_of(Suite *s, const TTest *t) { return t_case(s, t, setup, teardown); }

static Suite *suite(void) {
    Suite *s = suite_create("ops_forward");
    tcase_add_test(case_of(s, conv_hand), conv_hand);
    tcase_add_test(case_of(s, conv_hand_dilation), conv_hand_dilation);
    tcase_add_test(case_of(s, conv_reference), conv_reference);
    tcase_add_test(case_of(s, pool_values), pool_values);
    tcase_add_test(case_of(s, pool_max_ties_nan), pool_max_ties_nan);
    tcase_add_test(case_of(s, relu_values_inplace), relu_values_inplace);
    tcase_add_test(case_of(s, gelu_closed_form), gelu_closed_form);
    tcase_add_test(case_of(s, lrn_hand), lrn_hand);
    tcase_add_test(case_of(s, lrn_torch_formula), lrn_torch_formula);
    tcase_add_test(case_of(s, bn_train_hand), bn_train_hand);
    tcase_add_test(case_of(s, bn_train_stats), bn_train_stats);
    tcase_add_test(case_of(s, bn_train_single_value), bn_train_single_value);
    tcase_add_test(case_of(s, fc_hand), fc_hand);
    tcase_add_test(case_of(s, dropout_mask), dropout_mask);
    tcase_add_test(case_of(s, flatten_add_concat), flatten_add_concat);
    tcase_add_test(case_of(s, xent_hand), xent_hand);
    return s;
}

int main(void) {
    return vdt_run(suite());
}
