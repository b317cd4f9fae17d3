/* hunt.c — auto's predicted iteration on small nets (test_bound's small
 * nets, seeds 1-8, batch 32; nets/tiny-resnet, tiny-inception and lenet at
 * batch 64) on two made-up devices whose copies are slow against compute,
 * at 9 budgets from auto's smallest to the keep-all plan's; one line per
 * point (net, batch, device, budget, fits, ms, the plan's bound, CPU s).
 * A measurement tool for seed.md (a search for a small test case where the
 * bound's start changes the plan), not part of the build. From the
 * repository root, after the release build (build-rel); "before": the same
 * with the previous auto.c compiled in:
 *   FL="-std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I. -Isrc -Ibuild-rel -Itests/plan -Itests/common"
 *   LIBS="build-rel/libvdnn.a build-rel/libvdnn_o3.a $(pkg-config --libs yaml-0.1 jansson libturbojpeg zlib openblas check) -lm -lpthread"
 *   gcc $FL docs/results/2026-12-06-s20/hunt.c -o /tmp/hunt-after $LIBS
 *   git show 874ae7a:src/plan/auto.c > src/plan/auto_before_tmp.c
 *   gcc $FL -c src/plan/auto_before_tmp.c -o /tmp/auto_before.o; rm src/plan/auto_before_tmp.c
 *   gcc $FL docs/results/2026-12-06-s20/hunt.c /tmp/auto_before.o -o /tmp/hunt-before $LIBS
 *   /tmp/hunt-before > before.txt; /tmp/hunt-after > after.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <check.h>   /* testnets.h asserts with ck_assert_msg: outside a Check runner, print and exit */
#undef ck_assert_msg
#define ck_assert_msg(c, ...) do { if (!(c)) { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(3); } } while (0)
#include "testnets.h"
#include "plan/plan.h"
#include "profile/profile.h"
#include "spec/spec.h"

static int rnd(vd_rng *r, int lo, int hi) { return lo + (int)(vd_rng_u32(r) % (uint32_t)(hi - lo + 1)); }
static void small_net(vd_net *net, uint64_t seed, int batch) {
    vd_rng r;
    vd_rng_seed(&r, seed, 31);
    char name[32];
    snprintf(name, sizeof name, "small%llu", (unsigned long long)seed);
    tn_begin(net, name, 3, 16, 16, 4, batch);
    int ch = rnd(&r, 8, 16);
    int x = tn_conv(net, "c0", -1, ch, 3, 1, 1);
    x = tn_relu(net, "r0", x);
    if (seed % 2) {
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
static const vd_device_params slow_copies = {
    .name = "slow-copies", .peak_flops = 2e11, .mem_bw = 2e11,
    .d2h_bw = 2e8, .h2d_bw = 1.5e8, .both_bw = 2.5e8, .launch_s = 5e-6,
};
static const vd_device_params mid_copies = {
    .name = "mid-copies", .peak_flops = 2e11, .mem_bw = 2e11,
    .d2h_bw = 2e9, .h2d_bw = 1.5e9, .both_bw = 2.5e9, .launch_s = 5e-6,
};
static void one(vd_net *net, int batch, const vd_device_params *dev) {
    vd_profile prof; vd_err e = {0};
    if (vd_profile_analytic(net, batch, dev, &prof, &e)) { printf("prof err %s\n", e.msg); return; }
    vd_plan_opts o; vd_plan_opts_init(&o); o.batch = batch; o.policy = VD_POLICY_NONE;
    vd_plan ref;
    if (vd_plan_build(net, &prof, &o, &ref, &e)) { printf("ref err %s\n", e.msg); return; }
    o.policy = VD_POLICY_AUTO;
    uint64_t mb = 0;
    if (vd_plan_min_budget(net, &prof, &o, &mb, &e)) { printf("mb err %s\n", e.msg); vd_plan_free(&ref); return; }
    for (int k = 0; k <= 8; k++) {
        uint64_t b = mb + (ref.budget - mb) * (uint64_t)k / 8;
        o.budget = b;
        vd_plan p;
        clock_t t0 = clock();
        int rc = vd_plan_build(net, &prof, &o, &p, &e);
        double ts = (double)(clock() - t0) / CLOCKS_PER_SEC;
        vd_plan_bound bd; memset(&bd, 0, sizeof bd);
        if (rc == 0) vd_plan_copy_bound(net, &prof, &p, b, &bd, &e);
        printf("%s b%d %s %llu %s %.6f bound %.6f t %.3f\n", net->name, batch, dev->name, (unsigned long long)b,
               rc == 0 && p.feasible ? "fits" : "no", rc == 0 ? p.sim.iter_s * 1e3 : 0, bd.bound_s * 1e3, ts);
        fflush(stdout);
        if (rc == 0 || rc == VD_EBUDGET) vd_plan_free(&p);
    }
    vd_plan_free(&ref);
    vd_profile_free(&prof);
}
int main(void) {
    const vd_device_params *devs[] = {&slow_copies, &mid_copies};
    for (uint64_t s = 1; s <= 8; s++)
        for (int d = 0; d < 2; d++) { vd_net net; small_net(&net, s, 32); one(&net, 32, devs[d]); vd_net_free(&net); }
    const char *nets[] = {"nets/tiny-resnet.yaml", "nets/tiny-inception.yaml", "nets/lenet.yaml"};
    for (int n = 0; n < 3; n++)
        for (int d = 0; d < 2; d++) {
            vd_net net; vd_net_init(&net); vd_err e = {0};
            if (vd_spec_load(nets[n], &net, &e)) { printf("%s\n", e.msg); continue; }
            one(&net, 64, devs[d]);
            vd_net_free(&net);
        }
    return 0;
}
