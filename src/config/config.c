/* config.c — see config.h. */
#include <stdio.h>
#include <string.h>
#include "config/config.h"

void vd_config_init(vd_config *c) {
    memset(c, 0, sizeof *c);
    c->math = VD_MATH_FP32;
    c->prefetch = VD_PREFETCH_AUTO;
}

/* VD_EUSAGE for an unknown --gpu-model: the known ones, and the nearest
 * (the cards it begins, or the nearest by edit distance when close). */
static int unknown_model(const char *name, vd_err *e) {
    char known[512] = "", near[256] = "";
    const char *names[64];
    int n = 0;
    for (int i = 0; i < vd_n_cards && n < 63; i++) names[n++] = vd_cards[i].name;
    names[n++] = "cpu";
    size_t len = strlen(name);
    for (int i = 0; i < n; i++) {
        size_t k = strlen(known);
        snprintf(known + k, sizeof known - k, "%s%s", i ? " | " : "", names[i]);
        if (len > 0 && strncmp(names[i], name, len) == 0) {   /* "h100": h100-pcie, h100-sxm */
            k = strlen(near);
            snprintf(near + k, sizeof near - k, "%s'%s'", k ? " or " : "", names[i]);
        }
    }
    if (!near[0]) {
        const char *s = vd_suggest(name, names, n);
        if (s) snprintf(near, sizeof near, "'%s'", s);
    }
    return vd_errf(e, VD_EUSAGE, "--gpu-model: unknown device model '%s'%s%s%s (known: %s; "
                   "vdnn-plan --list-gpu-models shows their figures)", name,
                   near[0] ? "; did you mean " : "", near, near[0] ? "?" : "", known);
}

/* --chunks: K splits every layer it can (vd_plan_chunks_all), else
 * LAYER=K[,LAYER=K...] those layers; checked (vd_plan_chunks_check).
 * *out: [n_layers], the caller's. */
static int parse_chunks(const char *spec, const vd_net *net, int batch, int **out, vd_err *e) {
    int NL = net->n_layers;
    int *ch = vd_calloc((size_t)(NL > 0 ? NL : 1), sizeof *ch, e);
    if (!ch) return VD_ENOMEM;
    int64_t k = 0;
    int rc = VD_OK;
    if (vd_parse_i64(spec, &k, NULL) == 0) {
        if (k < 1 || k > batch)
            rc = vd_errf(e, VD_EUSAGE, "--chunks %s: a count from 1 to the batch (%d)", spec, batch);
        else
            rc = vd_plan_chunks_all(net, batch, (int)k, ch, e);
    } else {
        char *dup = vd_strdup(spec, e), *save = NULL;
        if (!dup) rc = VD_ENOMEM;
        for (char *it = dup ? strtok_r(dup, ",", &save) : NULL; it && !rc;
             it = strtok_r(NULL, ",", &save)) {
            char *eq = strrchr(it, '=');
            int li = -1;
            if (eq) *eq = '\0';
            for (int i = 0; eq && i < NL && li < 0; i++)
                if (!strcmp(net->layers[i].name, it)) li = i;
            if (!eq || vd_parse_i64(eq + 1, &k, NULL) != 0 || k < 1)
                rc = vd_errf(e, VD_EUSAGE, "--chunks: '%s' is not LAYER=K (K >= 1) nor a count", it);
            else if (li < 0) {
                const char **names = vd_malloc((size_t)(NL > 0 ? NL : 1) * sizeof *names, NULL);
                for (int i = 0; names && i < NL; i++) names[i] = net->layers[i].name;
                const char *near = names ? vd_suggest(it, names, NL) : NULL;
                rc = vd_errf(e, VD_EUSAGE, "--chunks: net '%s' has no layer '%s'%s%s%s", net->name,
                             it, near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
                vd_free(names);
            }
            else
                ch[li] = k > INT32_MAX ? INT32_MAX : (int)k;
        }
        vd_free(dup);
    }
    if (!rc && (rc = vd_plan_chunks_check(net, batch, ch, e))) vd_err_prefix(e, "--chunks");
    if (rc) { vd_free(ch); return rc; }
    *out = ch;
    return VD_OK;
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
    if (c->gpu_model && !vd_device_find(c->gpu_model)) return unknown_model(c->gpu_model, e);
    if (!r->use_backend) {
        r->model = vd_device_find(c->gpu_model ? c->gpu_model : "h200");
        r->card = vd_card_find(c->gpu_model ? c->gpu_model : "h200");
    }
    int64_t batch = c->batch > 0 ? c->batch
                  : net->train.batch > 0 ? net->train.batch : VD_CONFIG_DEFAULT_BATCH;
    net->train.batch = (int)batch;
    int rc = vd_net_finalize(net, e);   /* (re)check at the final batch size */
    if (!rc) rc = vd_net_freeze(net, c->freeze, e);
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
    if (c->has_optimizer && c->optimizer != net->train.optimizer) {
        /* --optimizer over train.optimizer, with its own defaults for the lr
         * and weight decay that neither the spec nor a flag gave */
        net->train.optimizer = c->optimizer;
        vd_train_optimizer_defaults(&net->train);
    }
    if (!(net->train.lr > 0)) net->train.lr = VD_DEFAULT_LR;   /* a net built in code */
    if (r->card && net->train.math == VD_MATH_BF16 && r->card->bf16 <= 0)
        return vd_errf(e, VD_EUNSUPPORTED, "--math bf16: the %s (%s) has no bf16 tensor cores; "
                       "plan with --math fp16 (its %.0f TFLOP/s fp16 tensor cores) or fp32",
                       r->card->name, r->card->product, r->card->fp16 / 1e12);

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
    so->graph = c->has_graph ? c->graph : VD_GRAPH_AUTO;

    vd_plan_opts *po = &r->plan;
    vd_plan_opts_init(po);
    po->batch = r->batch;
    po->policy = c->has_policy ? c->policy : VD_POLICY_AUTO;
    po->prefetch = c->prefetch;
    po->budget = c->budget;
    po->no_stage_input = c->no_stage_input;
    po->grads_persistent = r->dp;   /* the all-reduce averages a gradient array */
    po->graph = r->dp ? VD_GRAPH_OFF : so->graph;   /* data parallel runs eagerly */
    /* the batch norm + add fusion (vd_plan_opts.fuse_bn_add): not with
     * --no-fuse, nor in fp32, where CUDA's batch norm is cuDNN's (the plan
     * is the same for either backend) */
    po->fuse_bn_add = !c->backend_opts.no_fuse && vd_math_nhwc(net->train.math);
    r->budget_given = c->budget != 0;
    if (c->chunks) {
        if ((rc = parse_chunks(c->chunks, net, r->batch, &r->chunks, e))) return rc;
        po->chunks = r->chunks;
    }
    return VD_OK;
}

void vd_config_run_free(vd_config_run *r) {
    vd_free(r->chunks);
    r->chunks = NULL;
    r->plan.chunks = NULL;
}

int vd_config_model_profile(const vd_config_run *r, const vd_net *net, vd_profile *p, vd_err *e) {
    if (r->session.profile_path)
        return vd_profile_load(r->session.profile_path, net, r->batch, p, e);
    return vd_profile_analytic(net, r->batch, r->model, p, e);
}

void vd_config_budget(vd_config_run *r, const vd_session *s, const vd_profile *prof) {
    if (r->budget_given) return;
    if (s) {
        vd_session_default_budget(s, &r->plan);
        return;
    }
    /* the device's memory less what the CUDA context and the libraries'
     * handles take outside the pool */
    uint64_t m = prof->dev.mem_bytes;
    r->plan.budget = m > VD_DEVICE_CONTEXT_RESERVE ? m - VD_DEVICE_CONTEXT_RESERVE : m;
    r->plan.pool_to_need = true;   /* a cap: the pool is what the plan needs */
}

int vd_config_largest_batch(const vd_config_run *r, const vd_net *net, int hi, int *out,
                            vd_err *e) {
    *out = 0;
    if (r->use_backend || !r->model || r->session.profile_path)
        return vd_errf(e, VD_EUSAGE, "the largest batch is searched for a device model only");
    if (r->plan.budget == 0)
        return vd_errf(e, VD_EUSAGE, "the largest batch needs a budget (a device model's "
                       "memory or --budget)");
    int lo = 0;   /* the largest batch known to fit (0: none yet); hi does not fit */
    for (int mid = 1; mid < hi; mid = lo + (hi - lo) / 2) {   /* batch 1 first */
        vd_profile p;
        int rc = vd_profile_analytic(net, mid, r->model, &p, e);
        if (rc) return rc;
        vd_plan_opts o = r->plan;
        o.batch = mid;
        o.progress = NULL;
        bool fits = false;
        rc = vd_plan_fits(net, &p, &o, &fits, e);
        vd_profile_free(&p);
        if (rc) return rc;
        if (!fits && mid == 1) break;   /* nothing fits */
        if (fits) lo = mid;
        else hi = mid;
        if (hi - lo <= 1) break;
    }
    *out = lo;
    return VD_OK;
}
