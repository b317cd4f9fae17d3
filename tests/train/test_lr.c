/* test_lr.c — learning-rate policies against hand-computed closed forms. */
#include <math.h>
#include "tutil.h"
#include "train/lr.h"

/* The policies are evaluated in double with pow/cos; the expected values are
 * written out by hand, so allow a relative 1e-12 (a few ulps of double). */
static void near(double got, double want) {
    ck_assert_msg(fabs(got - want) <= 1e-12 * fmax(1.0, fabs(want)), "got %.17g want %.17g",
                  got, want);
}

START_TEST(fixed_and_step) {
    vd_lr_policy p = { .type = VD_LR_FIXED };
    near(vd_lr_at(&p, 0.1, 0, 100), 0.1);
    near(vd_lr_at(&p, 0.1, 99999, 100), 0.1);
    p = (vd_lr_policy){ .type = VD_LR_STEP, .step = 10, .gamma = 0.5f };
    near(vd_lr_at(&p, 0.1, 0, 100), 0.1);
    near(vd_lr_at(&p, 0.1, 9, 100), 0.1);
    near(vd_lr_at(&p, 0.1, 10, 100), 0.05);
    near(vd_lr_at(&p, 0.1, 25, 100), 0.025);
    near(vd_lr_at(&p, 0.1, 30, 100), 0.0125);
}
END_TEST

START_TEST(multistep) {
    vd_lr_policy p = { .type = VD_LR_MULTISTEP, .gamma = 0.5f, .n_milestones = 2,
                       .milestones = { 5, 8 } };
    near(vd_lr_at(&p, 0.1, 4, 100), 0.1);
    near(vd_lr_at(&p, 0.1, 5, 100), 0.05);
    near(vd_lr_at(&p, 0.1, 7, 100), 0.05);
    near(vd_lr_at(&p, 0.1, 8, 100), 0.025);
    near(vd_lr_at(&p, 0.1, 1000, 100), 0.025);
}
END_TEST

START_TEST(poly_and_cosine) {
    vd_lr_policy p = { .type = VD_LR_POLY, .power = 2.0f };
    near(vd_lr_at(&p, 0.1, 0, 100), 0.1);
    near(vd_lr_at(&p, 0.1, 50, 100), 0.025);          /* 0.1 * 0.5^2 */
    near(vd_lr_at(&p, 0.1, 90, 100), 0.001);          /* 0.1 * 0.1^2 */
    near(vd_lr_at(&p, 0.1, 100, 100), 0.0);
    near(vd_lr_at(&p, 0.1, 150, 100), 0.0);
    p = (vd_lr_policy){ .type = VD_LR_POLY, .power = 0.5f };
    near(vd_lr_at(&p, 0.1, 75, 100), 0.05);           /* 0.1 * sqrt(0.25) */
    p = (vd_lr_policy){ .type = VD_LR_COSINE, .min_lr = 0.001f };
    double mn = (double)0.001f;
    near(vd_lr_at(&p, 0.1, 0, 100), 0.1);
    near(vd_lr_at(&p, 0.1, 50, 100), mn + (0.1 - mn) * 0.5);
    /* cos(pi/4) = sqrt(2)/2 */
    near(vd_lr_at(&p, 0.1, 25, 100), mn + (0.1 - mn) * (1 + 0.70710678118654752) / 2);
    near(vd_lr_at(&p, 0.1, 100, 100), mn);
    near(vd_lr_at(&p, 0.1, 200, 100), mn);
}
END_TEST

START_TEST(warmup) {
    vd_lr_policy p = { .type = VD_LR_FIXED, .warmup = 4 };
    near(vd_lr_at(&p, 0.1, 0, 100), 0.025);
    near(vd_lr_at(&p, 0.1, 1, 100), 0.05);
    near(vd_lr_at(&p, 0.1, 3, 100), 0.1);
    near(vd_lr_at(&p, 0.1, 4, 100), 0.1);
    p = (vd_lr_policy){ .type = VD_LR_POLY, .power = 1.0f, .warmup = 10 };
    near(vd_lr_at(&p, 0.1, 4, 100), 0.1 * 0.96 * 0.5);
}
END_TEST

START_TEST(validation) {
    vd_err e;
    vd_lr_policy p = { .type = VD_LR_STEP, .step = 0, .gamma = 0.1f };
    ck_assert_int_eq(vd_lr_validate(&p, 0.1, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "step"), "%s", e.msg);
    p.step = 5;
    ck_assert_int_eq(vd_lr_validate(&p, 0.1, &e), 0);
    ck_assert_int_eq(vd_lr_validate(&p, -1, &e), VD_EUSAGE);
    ck_assert_int_eq(vd_lr_validate(&p, NAN, &e), VD_EUSAGE);
    p = (vd_lr_policy){ .type = VD_LR_MULTISTEP, .gamma = 0.1f, .n_milestones = 2,
                        .milestones = { 8, 5 } };
    ck_assert_int_eq(vd_lr_validate(&p, 0.1, &e), VD_EUSAGE);
    p = (vd_lr_policy){ .type = VD_LR_COSINE, .min_lr = 0.5f };
    ck_assert_int_eq(vd_lr_validate(&p, 0.1, &e), VD_EUSAGE);
    p = (vd_lr_policy){ .type = VD_LR_FIXED, .warmup = -1 };
    ck_assert_int_eq(vd_lr_validate(&p, 0.1, &e), VD_EUSAGE);
    ck_assert_str_eq(vd_lr_policy_name(&(vd_lr_policy){ .type = VD_LR_COSINE }), "cosine");
}
END_TEST

VDT_MAIN("lr", 0,
          fixed_and_step, multistep, poly_and_cosine, warmup, validation)
