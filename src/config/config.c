/* config.c — see config.h. */
#include <string.h>
#include "config/config.h"

void vd_config_init(vd_config *c) {
    memset(c, 0, sizeof *c);
    c->math = VD_MATH_FP32;
    c->prefetch = VD_PREFETCH_AUTO;
}

int vd_config_resolve(const vd_config *c, vd_net *net, bool plan_tool, vd_config_run *r,
                      vd_err *e) {
    memset(r, 0, sizeof *r);
    if (c->profile && c->analytic)
        return vd_errf(e, VD_EUSAGE, "--profile and --analytic-profile exclude each other");
    if (c->gpu_model && c->backend)
        return vd_errf(e, VD_EUSAGE, "--gpu-model plans for a device model; --backend plans "
                       "with a backend's own profile: give one of them");
    if (c->gpu_model && c->profile)
        return vd_errf(e, VD_EUSAGE, "--profile and --gpu-model exclude each other");
    r->use_backend = !plan_tool || c->backend != NULL;
    if (!r->use_backend) {
        r->model = vd_device_find(c->gpu_model ? c->gpu_model : "h200");
        if (!r->model)
            return vd_errf(e, VD_EUSAGE, "--gpu-model: unknown device model '%s' (expected "
                           "h200 | cpu)", c->gpu_model);
    }
    int64_t batch = c->batch > 0 ? c->batch
                  : net->train.batch > 0 ? net->train.batch : VD_CONFIG_DEFAULT_BATCH;
    net->train.batch = (int)batch;
    int rc = vd_net_finalize(net, e);   /* (re)check at the final batch size */
    if (rc) return rc;
    vd_schedule_inplace(net);
    r->batch = (int)batch;
    r->ranks = c->gpus > 0 ? c->gpus : 1;
    r->dp = c->gpus > 0;
    if (batch % r->ranks != 0)
        return vd_errf(e, VD_ESPEC, "the batch %lld (the global batch: --batch or the spec's "
                       "train.batch) is not divisible by --gpus %d: every rank trains an equal "
                       "shard of batch / %d samples; give a multiple of %d", (long long)batch,
                       r->ranks, r->ranks, r->ranks);
    r->batch = (int)(batch / r->ranks);
    if (c->has_math) net->train.math = c->math;   /* --math over train.math */

    vd_session_opts *so = &r->session;
    vd_session_opts_init(so);
    so->backend = c->backend ? c->backend : "auto";
    so->device = c->device;
    so->math = net->train.math;
    so->deterministic = c->deterministic;
    so->profile_path = c->profile;
    so->analytic = c->analytic;
    so->profile_out = c->profile_out;
    so->backend_opts = c->backend_opts;
    so->mem_trace = c->mem_trace;
    so->step_times = c->step_times;

    vd_plan_opts *po = &r->plan;
    vd_plan_opts_init(po);
    po->batch = r->batch;
    po->policy = c->has_policy ? c->policy : VD_POLICY_AUTO;
    po->prefetch = c->prefetch;
    po->budget = c->budget;
    po->no_stage_input = c->no_stage_input;
    po->grads_persistent = r->dp;   /* the all-reduce averages a gradient array */
    r->budget_given = c->budget != 0;
    return VD_OK;
}

int vd_config_model_profile(const vd_config_run *r, const vd_net *net, vd_profile *p, vd_err *e) {
    if (r->session.profile_path)
        return vd_profile_load(r->session.profile_path, net, r->batch, p, e);
    return vd_profile_analytic(net, r->batch, r->model, p, e);
}

void vd_config_budget(vd_config_run *r, const vd_session *s, const vd_profile *prof) {
    if (r->budget_given) return;
    r->plan.budget = s ? vd_session_default_budget(s) : prof->dev.mem_bytes;
    r->plan.pool_to_need = true;   /* a cap: the pool is what the plan needs */
}
