/* test_exec.c — the executor on the CPU backend: end-to-end training,
 * byte identity across policies, fault injection, measured vs planned memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "spec/spec.h"

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

/* Minimum budget of policy pol for net at batch (CPU backend algorithms). */
static uint64_t min_budget(const vd_net *net, int batch, vd_policy pol, int fixed_algo) {
    vd_err e = {0};
    vd_backend *be = NULL;
    ck_assert(vd_backend_cpu_create(&be, &e) == 0);
    ck_assert(be->layer_setup(be, net, batch, VD_MATH_FP32, true, &e) == 0);
    vd_profile prof;
    ck_assert_msg(vd_profile_backend(net, batch, be, &vd_device_cpu, &prof, &e) == 0, "%s", e.msg);
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = batch;
    o.policy = pol;
    o.fixed_algo = fixed_algo;
    uint64_t mb = 0;
    ck_assert_msg(vd_plan_min_budget(net, &prof, &o, &mb, &e) == 0, "%s", e.msg);
    vd_profile_free(&prof);
    be->destroy(be);
    return mb;
}

/* Offloading changes where bytes live, not what is computed. */
static void identity_case(vd_net *net, int batch, int iters) {
    /* Same algorithms for every policy (dyn may pick other conv algorithms,
     * which legitimately changes the floating-point results): min-workspace. */
    int algo = 1;
    run_cfg c0 = {.policy = VD_POLICY_NONE, .iters = iters, .poison = true, .fixed_algo = algo};
    run_out ref;
    run_training(net, batch, &c0, &ref);
    ck_assert_msg(ref.rc == 0, "%s", ref.msg);
    uint64_t none_peak = ref.plan_hwm;
    static const vd_policy pols[] = {VD_POLICY_ALL, VD_POLICY_CONV, VD_POLICY_DYN};
    for (int k = 0; k < 3; k++) {
        for (int pf = 0; pf < VD_PREFETCH_COUNT; pf++) {
            uint64_t mb = min_budget(net, batch, pols[k], pols[k] == VD_POLICY_DYN ? -1 : algo);
            /* well below none's peak, but feasible for this policy */
            uint64_t budget = mb + (none_peak - mb) / 4;
            ck_assert_msg(mb < none_peak, "policy %s min %llu not below none %llu",
                          vd_policy_name(pols[k]), (unsigned long long)mb, (unsigned long long)none_peak);
            run_cfg c = {.policy = pols[k], .prefetch = (vd_prefetch)pf, .budget = budget,
                         .iters = iters, .poison = true,
                         .fixed_algo = pols[k] == VD_POLICY_DYN ? -1 : algo};
            run_out o;
            run_training(net, batch, &c, &o);
            ck_assert_msg(o.rc == 0, "%s: %s", vd_policy_name(pols[k]), o.msg);
            ck_assert_msg(o.n_offloaded > 0, "%s offloads nothing", vd_policy_name(pols[k]));
            ck_assert_uint_le(o.plan_hwm, budget);
            ck_assert_uint_eq(o.st.live_peak, o.plan_peak);
            ck_assert_uint_eq(o.st.pool_hwm, o.plan_hwm);
            ck_assert_uint_eq(o.st.offload_bytes_iter, o.plan_offload);
            ck_assert_uint_eq(o.st.prefetch_bytes_iter, o.plan_prefetch);
            ck_assert_uint_eq(o.st.pool_bytes, budget);
            ck_assert_int_eq(o.st.sgd_steps, iters);
            if (pols[k] != VD_POLICY_DYN) {
                ck_assert_msg(memcmp(o.params, ref.params, (size_t)net->param_floats * 4) == 0,
                              "%s/%s: parameters differ from policy none", vd_policy_name(pols[k]),
                              vd_prefetch_name((vd_prefetch)pf));
                ck_assert_msg(memcmp(o.mom, ref.mom, (size_t)net->param_floats * 4) == 0,
                              "%s: momentum differs from policy none", vd_policy_name(pols[k]));
                for (int i = 0; i < iters; i++)
                    ck_assert(memcmp(&o.loss[i], &ref.loss[i], 4) == 0);
            }
            run_free(&o);
        }
    }
    run_free(&ref);
}

START_TEST(test_identity_lenet) {
    vd_net net;
    tn_lenet(&net, 4);
    identity_case(&net, 4, 3);
    vd_net_free(&net);
}
END_TEST

/* The shipped LeNet spec (MNIST shapes), through the spec parser. */
START_TEST(test_identity_lenet_yaml) {
    const char *src = getenv("VD_SRCDIR");
    ck_assert_ptr_nonnull(src);
    char path[1024];
    snprintf(path, sizeof path, "%s/nets/lenet.yaml", src);
    vd_net net;
    vd_net_init(&net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(path, &net, &e) == 0, "%s", e.msg);
    net.train.batch = 3;
    ck_assert_msg(vd_net_finalize(&net, &e) == 0, "%s", e.msg);
    identity_case(&net, 3, 3);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_identity_resnet) {
    vd_net net;
    tn_resnet(&net, 3);
    identity_case(&net, 3, 3);
    vd_net_free(&net);
}
END_TEST

/* Without the wait on the prefetch event, compute reads a poisoned region. */
static void fault_case(vd_net *net, int batch, int fault) {
    run_cfg c0 = {.policy = VD_POLICY_NONE, .iters = 2, .poison = true, .fixed_algo = 1};
    run_out ref;
    run_training(net, batch, &c0, &ref);
    ck_assert(ref.rc == 0);
    uint64_t mb = min_budget(net, batch, VD_POLICY_ALL, 1);
    run_cfg c = {.policy = VD_POLICY_ALL, .budget = mb, .iters = 2, .poison = true,
                 .fault = fault, .fixed_algo = 1};
    run_out o;
    run_training(net, batch, &c, &o);
    bool differs = o.rc != 0 ||
                   memcmp(o.params, ref.params, (size_t)net->param_floats * 4) != 0;
    ck_assert_msg(differs, "fault %d went unnoticed: the test would not catch a missing wait", fault);
    run_free(&o);
    run_free(&ref);
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

static Suite *suite(void) {
    Suite *s = suite_create("exec");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_lenet_none_trains);
    tcase_add_test(tc, test_identity_lenet);
    tcase_add_test(tc, test_identity_resnet);
    tcase_add_test(tc, test_identity_lenet_yaml);
    tcase_add_test(tc, test_fault_skip_prefetch_wait);
    tcase_add_test(tc, test_fault_skip_offload_wait);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
