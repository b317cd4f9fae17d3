/* test_grad.c — every CPU op's backward against central finite differences.
 *
 * Method. For a one-op net (plus the producers of its inputs, never run),
 * L = sum_i r_i y_i with a fixed random r (for the loss layer L = the mean
 * loss, aux[0]). The analytic gradient comes from backward with dy = r; the
 * numeric one from (L(v+h) - L(v-h)) / (actual float step), L summed in
 * double. Error = max |analytic - numeric| / max |gradient| over a tensor.
 *
 * Tolerance GRAD_TOL = 2e-3. Why: y is float, so each changed output carries
 * a rounding error of ~6e-8*|y|; with |y| <= ~10, up to ~100 outputs changing
 * and 2h >= 2e-3 the numeric quotient is off by at most ~1e-4 relative to
 * gradients of order 1; smooth ops add a truncation error h^2*|f'''|/6 ~ 2e-5
 * at h = 1e-2. Measured errors are below 6e-5 (printed with VD_TEST_VERBOSE).
 * A gradient that is wrong by 1% in a single element fails (test
 * checker_catches_errors), and so do the usual bugs (a missed window element,
 * a wrong scale, a dropped padding term), which are errors of order 1. Inputs
 * of ReLU and max pooling are kept >= 10 steps away from kinks and ties. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops_common.h"

#define GRAD_TOL 2e-3

static vd_backend *be;
static bool verbose;

static void setup(void) {
    vd_err e = {0};
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    verbose = getenv("VD_TEST_VERBOSE") != NULL;
}
static void teardown(void) { be->destroy(be); be = NULL; }

enum { PREP_UNIFORM, PREP_DISTINCT, PREP_AWAY };

typedef struct gc_cfg {
    int n;              /* batch */
    int algo;
    bool training;
    float h;            /* finite-difference step */
    int prep;           /* how to fill x */
} gc_cfg;

static const gc_cfg GC_SMOOTH = {2, 0, true, 1e-2f, PREP_UNIFORM};

static void prep_inputs(t_op *t, int prep) {
    for (int k = 0; k < t->n_in; k++) {
        if (prep == PREP_DISTINCT) {
            /* spacing 0.01 = 10 steps of h = 1e-3: no argmax flips */
            t_fill_distinct(t->x[k], t->xn[k], -0.005f * (float)t->xn[k], 0.01f, 77 + (uint64_t)k);
        } else if (prep == PREP_AWAY) {
            for (int64_t i = 0; i < t->xn[k]; i++) {
                float v = t->x[k][i];
                t->x[k][i] = (v < 0 ? -1.0f : 1.0f) * (0.1f + 0.9f * fabsf(v));
            }
        }
    }
}

static void report(const char *what, const char *tensor, double err) {
    if (verbose) fprintf(stderr, "  %-40s %-3s err %.3g\n", what, tensor, err);
    ck_assert_msg(err < GRAD_TOL, "%s: %s gradient error %.3g >= %.g", what, tensor, err, GRAD_TOL);
}

/* Gradient check of every input, weight and bias of `layer`, then the
 * dx_beta = 1 accumulate path against the overwrite result. */
static void gradcheck(const vd_net *net, int layer, gc_cfg c, const char *what) {
    t_op t;
    t_op_init(&t, be, net, layer, c.n, 42);
    t.io.algo = c.algo;
    t.io.training = c.training;
    prep_inputs(&t, c.prep);
    t_fwd(&t);
    t_bwd(&t);
    float *adx[VD_MAX_INPUTS] = {0}, *adw = NULL, *adb = NULL;
    for (int k = 0; k < t.n_in; k++) adx[k] = t_copy(t.dx[k], t.xn[k]);
    if (t.dw) adw = t_copy(t.dw, t.wn);
    if (t.db) adb = t_copy(t.db, t.bn);
    char name[8];
    for (int k = 0; k < t.n_in; k++) {
        snprintf(name, sizeof name, "x%d", k);
        report(what, name, t_fd_err(&t, t.x[k], adx[k], t.xn[k], c.h));
    }
    if (adw) report(what, "w", t_fd_err(&t, t.w, adw, t.wn, c.h));
    if (adb) report(what, "b", t_fd_err(&t, t.b, adb, t.bn, c.h));

    /* dx_beta = 1: dx must become D + (the overwrite result). Float sums in
     * another order: |diff| <= ~K*6e-8*magnitudes, K <= a few hundred terms
     * of size <= 10 here, so 1e-4 (absolute, values of order 1) is ample. */
    t_fwd(&t);
    for (int k = 0; k < t.n_in; k++) {
        t_fill_uniform(t.dx[k], t.xn[k], -1, 1, 900 + (uint64_t)k);
        t.io.dx_beta[k] = 1.0f;
    }
    float *d0[VD_MAX_INPUTS] = {0};
    for (int k = 0; k < t.n_in; k++) d0[k] = t_copy(t.dx[k], t.xn[k]);
    t_bwd(&t);
    for (int k = 0; k < t.n_in; k++) {
        double worst = 0;
        for (int64_t i = 0; i < t.xn[k]; i++) {
            double d = fabs((double)t.dx[k][i] - ((double)d0[k][i] + adx[k][i]));
            if (!(d <= worst)) worst = d;
        }
        ck_assert_msg(worst < 1e-4, "%s: dx%d accumulate (dx_beta=1) off by %g", what, k, worst);
        free(d0[k]);
        free(adx[k]);
    }
    /* dw/db are overwritten whatever dx_beta says */
    if (adw) ck_assert(memcmp(adw, t.dw, (size_t)t.wn * sizeof(float)) == 0);
    if (adb) ck_assert(memcmp(adb, t.db, (size_t)t.bn * sizeof(float)) == 0);
    free(adw);
    free(adb);
    t_op_free(&t);
}

/* ------------------------------------------------------------------ conv */

static void conv_case(int c, int h, int w, vd_layer l, const char *what) {
    vd_net net;
    t_net_begin(&net, c, h, w);
    int i = vdt_add(&net, l);
    vdt_finish(&net, i);
    for (int algo = 0; algo < 2; algo++) {
        char buf[96];
        snprintf(buf, sizeof buf, "%s [%s]", what, algo ? "direct" : "im2col");
        gc_cfg cfg = GC_SMOOTH;
        cfg.algo = algo;
        gradcheck(&net, i, cfg, buf);
    }
    vd_net_free(&net);
}

START_TEST(conv_basic) { conv_case(3, 7, 6, vdt_conv(-1, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true), "conv 3x3 s1 p1 bias"); }
END_TEST
START_TEST(conv_stride_rect) { conv_case(2, 9, 8, vdt_conv(-1, 3, 3, 2, 2, 3, 1, 0, 1, 1, 1, false), "conv 3x2 s2x3 p1x0"); }
END_TEST
START_TEST(conv_dilation) { conv_case(2, 8, 7, vdt_conv(-1, 2, 3, 3, 1, 1, 2, 2, 2, 1, 1, true), "conv 3x3 d2x1 p2"); }
END_TEST
START_TEST(conv_groups) { conv_case(4, 6, 5, vdt_conv(-1, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, true), "conv groups 2"); }
END_TEST
START_TEST(conv_depthwise) { conv_case(3, 5, 5, vdt_conv(-1, 3, 3, 3, 2, 2, 1, 1, 1, 1, 3, true), "conv depthwise s2"); }
END_TEST
START_TEST(conv_1x1_s2) { conv_case(3, 5, 4, vdt_conv(-1, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1, false), "conv 1x1 s2"); }
END_TEST
START_TEST(conv_5x5_s2_p2) { conv_case(1, 5, 5, vdt_conv(-1, 2, 5, 5, 2, 2, 2, 2, 1, 1, 1, true), "conv 5x5 s2 p2"); }
END_TEST

/* The checker must reject a gradient that is wrong in a single element by 1%
 * of the gradient's scale, and one computed for the wrong padding. */
START_TEST(checker_catches_errors) {
    vd_net net;
    t_net_begin(&net, 2, 5, 5);
    int i = vdt_add(&net, vdt_conv(-1, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, true));
    vdt_finish(&net, i);
    t_op t;
    t_op_init(&t, be, &net, i, 2, 42);
    t_fwd(&t);
    t_bwd(&t);
    double *num = malloc((size_t)t.xn[0] * sizeof *num);
    ck_assert_ptr_nonnull(num);
    t_fd(&t, t.x[0], num, t.xn[0], 1e-2f);
    ck_assert(t_cmp(t.dx[0], num, t.xn[0]) < GRAD_TOL);
    double scale = 0;
    for (int64_t j = 0; j < t.xn[0]; j++) if (fabs(num[j]) > scale) scale = fabs(num[j]);
    float *bad = t_copy(t.dx[0], t.xn[0]);
    bad[t.xn[0] / 2] += (float)(0.01 * scale);
    ck_assert_msg(t_cmp(bad, num, t.xn[0]) > GRAD_TOL, "a 1%% error went unnoticed");
    /* a plausible bug: the border rows' gradient dropped */
    memcpy(bad, t.dx[0], (size_t)t.xn[0] * sizeof *bad);
    for (int j = 0; j < 5; j++) bad[j] = 0;
    ck_assert(t_cmp(bad, num, t.xn[0]) > GRAD_TOL);
    free(bad);
    free(num);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ pool */

static void pool_case(int c, int h, int w, vd_layer l, const char *what) {
    vd_net net;
    t_net_begin(&net, c, h, w);
    int i = vdt_add(&net, l);
    vdt_finish(&net, i);
    gc_cfg cfg = {2, 0, true, 1e-3f, PREP_DISTINCT};
    gradcheck(&net, i, cfg, what);
    vd_net_free(&net);
}

START_TEST(pool_max_2x2) { pool_case(2, 6, 6, vdt_pool(-1, VD_POOL_MAX, 2, 2, 2, 2, 0, 0, false), "max 2x2 s2"); }
END_TEST
START_TEST(pool_max_3x3_s2_p1) { pool_case(2, 7, 7, vdt_pool(-1, VD_POOL_MAX, 3, 3, 2, 2, 1, 1, false), "max 3x3 s2 p1"); }
END_TEST
START_TEST(pool_max_ceil) { pool_case(2, 6, 6, vdt_pool(-1, VD_POOL_MAX, 3, 3, 2, 2, 0, 0, true), "max 3x3 s2 ceil"); }
END_TEST
START_TEST(pool_max_ceil_pad) { pool_case(1, 6, 6, vdt_pool(-1, VD_POOL_MAX, 3, 3, 2, 2, 1, 1, true), "max 3x3 s2 p1 ceil"); }
END_TEST
START_TEST(pool_max_rect) { pool_case(2, 7, 5, vdt_pool(-1, VD_POOL_MAX, 3, 2, 2, 1, 1, 0, false), "max 3x2 s2x1 p1x0 overlap"); }
END_TEST
START_TEST(pool_avg_3x3_s2_p1) { pool_case(2, 7, 7, vdt_pool(-1, VD_POOL_AVG, 3, 3, 2, 2, 1, 1, false), "avg 3x3 s2 p1"); }
END_TEST
START_TEST(pool_avg_ceil) { pool_case(2, 6, 6, vdt_pool(-1, VD_POOL_AVG, 3, 3, 2, 2, 0, 0, true), "avg 3x3 s2 ceil"); }
END_TEST
START_TEST(pool_avg_ceil_pad) { pool_case(1, 6, 6, vdt_pool(-1, VD_POOL_AVG, 3, 3, 2, 2, 1, 1, true), "avg 3x3 s2 p1 ceil"); }
END_TEST
START_TEST(pool_adaptive_avg) { pool_case(2, 5, 7, t_adaptive(-1, VD_POOL_AVG, 3, 4), "adaptive avg 5x7->3x4"); }
END_TEST
START_TEST(pool_adaptive_max) { pool_case(2, 5, 7, t_adaptive(-1, VD_POOL_MAX, 2, 3), "adaptive max 5x7->2x3"); }
END_TEST
START_TEST(pool_global_avg) {
    vd_layer l = vdt_pool(-1, VD_POOL_AVG, 0, 0, 0, 0, 0, 0, false);
    l.u.pool.global = true;
    pool_case(3, 4, 5, l, "global avg");
}
END_TEST

/* ------------------------------------------------------------------ elementwise & friends */

static void simple_case(int c, int h, int w, vd_layer l, gc_cfg cfg, const char *what) {
    vd_net net;
    t_net_begin(&net, c, h, w);
    int i = vdt_add(&net, l);
    vdt_finish(&net, i);
    gradcheck(&net, i, cfg, what);
    vd_net_free(&net);
}

START_TEST(relu) {
    gc_cfg cfg = {2, 0, true, 1e-3f, PREP_AWAY};
    simple_case(3, 4, 5, vdt_simple(-1, VD_OP_RELU), cfg, "relu");
}
END_TEST

/* GELU is smooth everywhere (|f'''| < 1.2): GC_SMOOTH, inputs U(-1, 1);
 * then again over [-3, 3], where the curve bends into its tails. */
START_TEST(gelu) {
    simple_case(3, 4, 5, vdt_simple(-1, VD_OP_GELU), GC_SMOOTH, "gelu");
    gc_cfg wide = GC_SMOOTH;
    wide.prep = PREP_DISTINCT;   /* values -0.005 n .. 0.005 n: [-3, 3] for n = 2*6*10*5 */
    simple_case(6, 10, 5, vdt_simple(-1, VD_OP_GELU), wide, "gelu wide");
}
END_TEST

static vd_layer lrn(int size, float alpha, float beta, float k) {
    vd_layer l = vdt_simple(-1, VD_OP_LRN);
    l.u.lrn.size = size; l.u.lrn.alpha = alpha; l.u.lrn.beta = beta; l.u.lrn.k = k;
    return l;
}
START_TEST(lrn_size3) { simple_case(6, 3, 2, lrn(3, 0.5f, 0.75f, 1.0f), GC_SMOOTH, "lrn size 3"); }
END_TEST
START_TEST(lrn_size4_even) { simple_case(7, 2, 3, lrn(4, 0.8f, 0.6f, 2.0f), GC_SMOOTH, "lrn size 4 (asymmetric)"); }
END_TEST
START_TEST(lrn_size5_few_channels) { simple_case(3, 2, 2, lrn(5, 1.0f, 0.75f, 1.0f), GC_SMOOTH, "lrn size 5 > C"); }
END_TEST

START_TEST(bn_train) { simple_case(3, 4, 5, vdt_simple(-1, VD_OP_BATCHNORM), GC_SMOOTH, "batchnorm train"); }
END_TEST
START_TEST(bn_train_1x1) {
    gc_cfg cfg = GC_SMOOTH;
    cfg.n = 5;
    simple_case(4, 1, 1, vdt_simple(-1, VD_OP_BATCHNORM), cfg, "batchnorm train 1x1");
}
END_TEST
START_TEST(bn_eval) {
    gc_cfg cfg = GC_SMOOTH;
    cfg.training = false;
    simple_case(3, 4, 5, vdt_simple(-1, VD_OP_BATCHNORM), cfg, "batchnorm eval");
}
END_TEST

START_TEST(fc_bias) {
    vd_layer l = vdt_simple(-1, VD_OP_FC);
    l.u.fc.out = 5; l.u.fc.bias = true;
    gc_cfg cfg = GC_SMOOTH;
    cfg.n = 3;
    simple_case(3, 2, 2, l, cfg, "fc bias");
}
END_TEST
START_TEST(fc_nobias) {
    vd_layer l = vdt_simple(-1, VD_OP_FC);
    l.u.fc.out = 4; l.u.fc.bias = false;
    simple_case(7, 1, 1, l, GC_SMOOTH, "fc no bias");
}
END_TEST

START_TEST(dropout_train) {
    vd_layer l = vdt_simple(-1, VD_OP_DROPOUT);
    l.u.dropout.p = 0.3f;
    simple_case(3, 4, 5, l, GC_SMOOTH, "dropout train");
}
END_TEST
START_TEST(dropout_eval) {
    gc_cfg cfg = GC_SMOOTH;
    cfg.training = false;
    simple_case(3, 4, 5, vdt_simple(-1, VD_OP_DROPOUT), cfg, "dropout eval");
}
END_TEST

START_TEST(flatten) { simple_case(3, 2, 4, vdt_simple(-1, VD_OP_FLATTEN), GC_SMOOTH, "flatten"); }
END_TEST

START_TEST(xent) {
    gc_cfg cfg = GC_SMOOTH;
    cfg.n = 3;
    vd_net net;
    t_net_begin(&net, 7, 1, 1);
    vdt_finish(&net, -1);  /* the loss is layer 0, reading the input */
    gradcheck(&net, 0, cfg, "softmax xent 7 classes");
    vd_net_free(&net);
}
END_TEST
START_TEST(xent_spatial) {
    vd_net net;
    t_net_begin(&net, 2, 2, 3);
    vdt_finish(&net, -1);
    gradcheck(&net, 0, GC_SMOOTH, "softmax xent on 2x2x3");
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ multi-input */

static void multi_case(vd_op op, int n_in, const int *chans, bool same_src, const char *what) {
    vd_net net;
    t_net_begin(&net, 2, 3, 4);
    int ins[VD_MAX_INPUTS];
    for (int k = 0; k < n_in; k++)
        ins[k] = (same_src && k > 0) ? ins[0]
                 : vdt_add(&net, vdt_conv(-1, chans[k], 1, 1, 1, 1, 0, 0, 1, 1, 1, false));
    int i = vdt_add(&net, vdt_multi(op, n_in, ins));
    vdt_finish(&net, i);
    gradcheck(&net, i, GC_SMOOTH, what);
    vd_net_free(&net);
}

START_TEST(add2) { int c[] = {3, 3}; multi_case(VD_OP_ADD, 2, c, false, "add 2"); }
END_TEST
START_TEST(add4) { int c[] = {2, 2, 2, 2}; multi_case(VD_OP_ADD, 4, c, false, "add 4"); }
END_TEST
START_TEST(concat3) { int c[] = {1, 3, 2}; multi_case(VD_OP_CONCAT, 3, c, false, "concat 1+3+2"); }
END_TEST

/* add(a, a): both gradients land in one buffer, the second accumulating. */
START_TEST(add_same_source) {
    vd_net net;
    t_net_begin(&net, 2, 3, 4);
    int a = vdt_add(&net, vdt_conv(-1, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, false));
    int ins[2] = {a, a};
    int i = vdt_add(&net, vdt_multi(VD_OP_ADD, 2, ins));
    vdt_finish(&net, i);
    t_op t;
    t_op_init(&t, be, &net, i, 2, 3);
    t.io.x[1] = t.x[0];
    t.io.dx[1] = t.dx[0];
    t.io.dx_beta[1] = 1.0f;
    t_fwd(&t);
    for (int64_t j = 0; j < t.yn; j++) ck_assert(t.y[j] == t.x[0][j] + t.x[0][j]);
    t_bwd(&t);
    for (int64_t j = 0; j < t.xn[0]; j++) ck_assert(t.dx[0][j] == t.r[j] + t.r[j]);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ determinism & algorithms */

/* Each conv algorithm is bit-reproducible; the two agree to float rounding. */
START_TEST(conv_algos_deterministic_and_agree) {
    vd_net net;
    t_net_begin(&net, 4, 9, 8);
    int i = vdt_add(&net, vdt_conv(-1, 6, 3, 3, 2, 1, 1, 1, 1, 2, 2, true));
    vdt_finish(&net, i);
    float *res[2][4];
    int64_t sz[4];
    for (int algo = 0; algo < 2; algo++) {
        float *first[4] = {0};
        for (int run = 0; run < 2; run++) {
            t_op t;
            t_op_init(&t, be, &net, i, 3, 9);
            t.io.algo = algo;
            t_fwd(&t);
            t_bwd(&t);
            float *cur[4] = {t.y, t.dx[0], t.dw, t.db};
            int64_t n[4] = {t.yn, t.xn[0], t.wn, t.bn};
            for (int j = 0; j < 4; j++) {
                sz[j] = n[j];
                if (run == 0) first[j] = t_copy(cur[j], n[j]);
                else ck_assert_msg(memcmp(first[j], cur[j], (size_t)n[j] * sizeof(float)) == 0,
                                   "algo %d tensor %d differs between runs", algo, j);
            }
            t_op_free(&t);
        }
        for (int j = 0; j < 4; j++) res[algo][j] = first[j];
    }
    /* different summation order only: 27 products of size <= 1, float */
    for (int j = 0; j < 4; j++) {
        for (int64_t k = 0; k < sz[j]; k++)
            ck_assert_msg(fabsf(res[0][j][k] - res[1][j][k]) <= 1e-5f * (1 + fabsf(res[1][j][k])),
                          "tensor %d elem %lld: im2col %g direct %g", j, (long long)k,
                          res[0][j][k], res[1][j][k]);
        free(res[0][j]);
        free(res[1][j]);
    }
    vd_net_free(&net);
}
END_TEST

/* A conv's dx may be skipped (NULL) for the net input; dw/db still right. */
START_TEST(conv_null_dx) {
    vd_net net;
    t_net_begin(&net, 2, 5, 5);
    int i = vdt_add(&net, vdt_conv(-1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, true));
    vdt_finish(&net, i);
    t_op t;
    t_op_init(&t, be, &net, i, 2, 5);
    t_fwd(&t);
    t_bwd(&t);
    float *dw = t_copy(t.dw, t.wn);
    float *keep = t.io.dx[0];
    t.io.dx[0] = NULL;
    memset(keep, 0, (size_t)t.xn[0] * sizeof(float));
    t_bwd(&t);
    for (int64_t j = 0; j < t.xn[0]; j++) ck_assert(keep[j] == 0.0f);
    ck_assert(memcmp(dw, t.dw, (size_t)t.wn * sizeof(float)) == 0);
    free(dw);
    t_op_free(&t);
    vd_net_free(&net);
}
END_TEST

static TCase *case_of(Suite *s, const TTest *t) { return t_case(s, t, setup, teardown); }

static Suite *suite(void) {
    Suite *s = suite_create("ops_grad");
    tcase_add_test(case_of(s, conv_basic), conv_basic);
    tcase_add_test(case_of(s, conv_stride_rect), conv_stride_rect);
    tcase_add_test(case_of(s, conv_dilation), conv_dilation);
    tcase_add_test(case_of(s, conv_groups), conv_groups);
    tcase_add_test(case_of(s, conv_depthwise), conv_depthwise);
    tcase_add_test(case_of(s, conv_1x1_s2), conv_1x1_s2);
    tcase_add_test(case_of(s, conv_5x5_s2_p2), conv_5x5_s2_p2);
    tcase_add_test(case_of(s, checker_catches_errors), checker_catches_errors);
    tcase_add_test(case_of(s, pool_max_2x2), pool_max_2x2);
    tcase_add_test(case_of(s, pool_max_3x3_s2_p1), pool_max_3x3_s2_p1);
    tcase_add_test(case_of(s, pool_max_ceil), pool_max_ceil);
    tcase_add_test(case_of(s, pool_max_ceil_pad), pool_max_ceil_pad);
    tcase_add_test(case_of(s, pool_max_rect), pool_max_rect);
    tcase_add_test(case_of(s, pool_avg_3x3_s2_p1), pool_avg_3x3_s2_p1);
    tcase_add_test(case_of(s, pool_avg_ceil), pool_avg_ceil);
    tcase_add_test(case_of(s, pool_avg_ceil_pad), pool_avg_ceil_pad);
    tcase_add_test(case_of(s, pool_adaptive_avg), pool_adaptive_avg);
    tcase_add_test(case_of(s, pool_adaptive_max), pool_adaptive_max);
    tcase_add_test(case_of(s, pool_global_avg), pool_global_avg);
    tcase_add_test(case_of(s, relu), relu);
    tcase_add_test(case_of(s, gelu), gelu);
    tcase_add_test(case_of(s, lrn_size3), lrn_size3);
    tcase_add_test(case_of(s, lrn_size4_even), lrn_size4_even);
    tcase_add_test(case_of(s, lrn_size5_few_channels), lrn_size5_few_channels);
    tcase_add_test(case_of(s, bn_train), bn_train);
    tcase_add_test(case_of(s, bn_train_1x1), bn_train_1x1);
    tcase_add_test(case_of(s, bn_eval), bn_eval);
    tcase_add_test(case_of(s, fc_bias), fc_bias);
    tcase_add_test(case_of(s, fc_nobias), fc_nobias);
    tcase_add_test(case_of(s, dropout_train), dropout_train);
    tcase_add_test(case_of(s, dropout_eval), dropout_eval);
    tcase_add_test(case_of(s, flatten), flatten);
    tcase_add_test(case_of(s, xent), xent);
    tcase_add_test(case_of(s, xent_spatial), xent_spatial);
    tcase_add_test(case_of(s, add2), add2);
    tcase_add_test(case_of(s, add4), add4);
    tcase_add_test(case_of(s, concat3), concat3);
    tcase_add_test(case_of(s, add_same_source), add_same_source);
    tcase_add_test(case_of(s, conv_algos_deterministic_and_agree), conv_algos_deterministic_and_agree);
    tcase_add_test(case_of(s, conv_null_dx), conv_null_dx);
    return s;
}

int main(void) {
    return vdt_run(suite());
}
