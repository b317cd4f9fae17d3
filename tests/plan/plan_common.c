/* plan_common.c — see plan_common.h. */
#include "plan_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <check.h>
#include "spec/spec.h"
#include "util/util.h"

vd_backend *cpu_for_dev(const vd_net *net, int batch, const vd_device_params *dev, vd_profile *prof) {
    vd_err e = {0};
    vd_backend *be = NULL;
    ck_assert(vd_backend_cpu_create(&be, &e) == 0);
    ck_assert_msg(be->layer_setup(be, net, batch, VD_MATH_FP32, true, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_backend(net, batch, be, dev ? dev : &vd_device_cpu, prof, &e) == 0,
                  "%s", e.msg);
    return be;
}

uint64_t cpu_min_budget(const vd_net *net, const vd_plan_opts *o, const vd_device_params *dev) {
    vd_profile prof;
    vd_backend *be = cpu_for_dev(net, o->batch, dev, &prof);
    vd_err e = {0};
    uint64_t mb = 0;
    ck_assert_msg(vd_plan_min_budget(net, &prof, o, &mb, &e) == 0, "%s", e.msg);
    vd_profile_free(&prof);
    be->destroy(be);
    return mb;
}

void analytic_profile(const vd_net *net, int batch, const vd_device_params *dev, vd_profile *prof) {
    vd_err e = {0};
    ck_assert_msg(vd_profile_analytic(net, batch, dev, prof, &e) == 0, "%s", e.msg);
}

vd_plan_opts plan_opts(int batch, vd_policy policy) {
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = batch;
    o.policy = policy;
    return o;
}

void load_shipped_net(vd_net *net, const char *file, int batch) {
    const char *src = getenv("VD_SRCDIR");
    ck_assert_ptr_nonnull(src);
    char path[1024];
    snprintf(path, sizeof path, "%s/nets/%s", src, file);
    vd_net_init(net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(path, net, &e) == 0, "%s", e.msg);
    net->train.batch = batch;
    ck_assert_msg(vd_net_finalize(net, &e) == 0, "%s", e.msg);
}

int run_cmd(const char *cmd, char *out, size_t n) {
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
