/* exec_util.h — run N training iterations of a net under a plan on the CPU
 * backend (shared by the exec tests), in the net's math (net->train.math:
 * fp32 by default, bf16 for the mixed-precision runs, tf32 for the
 * channels-last floats). */
#ifndef VD_EXEC_UTIL_H
#define VD_EXEC_UTIL_H

#include <stdlib.h>
#include <check.h>
#include "backend/backend.h"
#include "exec/exec.h"
#include "plan/plan.h"

/* A device whose link is slow next to its compute (the regime where
 * recomputing beats copying, even for the small nets of these tests). */
static const vd_device_params slow_link = {
    .name = "slow-link", .peak_flops = 60e12, .mem_bw = 4.8e12,
    .d2h_bw = 1e8, .h2d_bw = 1e8, .both_bw = 1.8e8, .launch_s = 5e-6, .mem_bytes = 0,
};

typedef struct run_cfg {
    vd_policy policy;
    vd_prefetch prefetch;
    uint64_t budget;        /* 0 = auto */
    int iters;
    bool poison;
    int fault;
    int fixed_algo;         /* -1 = policy's choice */
    const vd_disp *disp;    /* optional per-tensor dispositions (vd_plan_opts.disp) */
    const vd_device_params *dev; /* timing model of the profile (NULL: cpu) */
    const int *algos, *algos_bwd; /* optional per-layer forward / backward options */
    bool grads_persistent;  /* vd_plan_opts.grads_persistent (false: the update in the
                               backward pass) */
    bool pool_to_need;      /* vd_plan_opts.pool_to_need (budget only a cap) */
    const int *chunks;      /* optional [n_layers] split layers (vd_plan_opts.chunks;
                               NULL: nothing split) */
    bool no_fuse;           /* vd_backend_opts.no_fuse of the CPU backend */
    bool fuse_bn_add;       /* vd_plan_opts.fuse_bn_add (the batch norm + add fusion) */
    void (*on_backend)(vd_backend *be); /* optional: called once the backend is created */
} run_cfg;

typedef struct run_out {
    float *params, *mom;    /* [param_floats], caller frees */
    float loss[64];
    int rc;                 /* first error code (0 ok) */
    char msg[1024];
    vd_exec_stats st;
    uint64_t plan_peak, plan_hwm, plan_budget, plan_offload, plan_prefetch, plan_persistent;
    int n_offloaded;
    uint64_t fmap_bytes;    /* logical bytes of the plan's x, y and dy tensors */
    int n_recomputed, n_recompute_ops;
    int eval_correct;
    float eval_loss;
    int add_relu_bn[8];     /* the batch norms that take their add's ReLU's backward
                               (vd_plan_layer.takes_add_relu), in unit order */
    int n_add_relu;
    bool split;             /* the plan runs some layer in batch chunks */
} run_out;

/* The batch of iteration iter into x (floats; nhwc: in channels-last order,
 * 16-bit dt each value rounded to dt, as the loader stores it) and lab. */
static inline void fill_batch_as(const vd_net *net, int batch, int iter, void *x, vd_dtype dt,
                                 bool nhwc, int32_t *lab) {
    vd_rng r;
    vd_rng_seed(&r, 1234, (uint64_t)iter);
    int64_t n = (int64_t)batch * vd_net_out_numel(net, -1);
    float *f = nhwc ? malloc((size_t)n * sizeof *f) : (float *)x;
    ck_assert_ptr_nonnull(f);
    for (int64_t i = 0; i < n; i++) f[i] = vd_rng_normal(&r);
    if (nhwc) {   /* channels-last maps (tf32, bf16, fp16): the same image as fp32's */
        vd_nchw_f32_to_nhwc(dt, f, x, batch, net->in_c, (int64_t)net->in_h * net->in_w);
        free(f);
    }
    for (int b = 0; b < batch; b++) lab[b] = (int32_t)(vd_rng_u32(&r) % (uint32_t)net->classes);
}

static inline void fill_batch(const vd_net *net, int batch, int iter, float *x, int32_t *lab) {
    fill_batch_as(net, batch, iter, x, VD_DT_F32, false, lab);
}

static inline void run_training(const vd_net *net, int batch, const run_cfg *c, run_out *o) {
    memset(o, 0, sizeof *o);
    vd_err e = {0};
    vd_backend *be = NULL;
    vd_profile prof = {0};
    vd_plan plan = {0};
    vd_exec *ex = NULL;
    int rc = vd_backend_cpu_create(&be, &e);
    if (!rc) {
        be->opts.no_fuse = c->no_fuse;
        if (c->on_backend) c->on_backend(be);
    }
    ck_assert_msg(rc == 0, "cpu backend: %s", e.msg);
    rc = be->layer_setup(be, net, batch, net->train.math, true, &e);
    ck_assert_msg(rc == 0, "layer_setup: %s", e.msg);
    rc = vd_profile_backend(net, batch, be, c->dev ? c->dev : &vd_device_cpu, &prof, &e);
    ck_assert_msg(rc == 0, "profile: %s", e.msg);
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.batch = batch;
    po.policy = c->policy;
    po.prefetch = c->prefetch;
    po.budget = c->budget;
    po.fixed_algo = c->fixed_algo;
    po.disp = c->disp;
    po.algos = (int *)c->algos;
    po.algos_bwd = c->algos_bwd;
    po.grads_persistent = c->grads_persistent;
    po.pool_to_need = c->pool_to_need;
    po.chunks = c->chunks;
    po.fuse_bn_add = c->fuse_bn_add;
    rc = vd_plan_build(net, &prof, &po, &plan, &e);
    if (rc) { o->rc = rc; snprintf(o->msg, sizeof o->msg, "%s", e.msg); goto out; }
    o->plan_peak = plan.live_peak;
    o->plan_hwm = plan.hwm;
    o->plan_persistent = plan.persistent_bytes;
    o->plan_budget = plan.budget;
    o->plan_offload = plan.offload_bytes;
    o->plan_prefetch = plan.prefetch_bytes;
    for (int t = 0; t < plan.n_tensors; t++) {
        const vd_tensor *tt = &plan.tensors[t];
        o->n_offloaded += tt->offload;
        if (tt->kind == VD_T_INPUT || tt->kind == VD_T_ACT || tt->kind == VD_T_DACT)
            o->fmap_bytes += tt->bytes;
    }
    for (int u = 0; u < plan.n_units; u++) {
        if (plan.layers[u].takes_add_relu && o->n_add_relu < 8)
            o->add_relu_bn[o->n_add_relu++] = plan.layers[u].layer;
        o->split |= plan.layers[u].n_chunks > 1;
    }
    o->n_recomputed = plan.n_recomputed;
    o->n_recompute_ops = plan.n_recompute_ops;
    vd_exec_opts eo = {0};
    eo.poison = c->poison;
    eo.fault = c->fault;
    eo.layers_ready = true;
    eo.deterministic = true;
    eo.math = net->train.math;
    rc = vd_exec_create(&ex, net, &plan, be, &eo, &e);
    ck_assert_msg(rc == 0, "exec create: %s", e.msg);
    o->params = malloc((size_t)net->param_floats * sizeof(float));
    o->mom = malloc((size_t)net->param_floats * sizeof(float));
    ck_assert(o->params && o->mom);
    vd_net_init_params(net, o->params, 42);
    rc = vd_exec_set_state(ex, o->params, NULL, 0, &e);
    ck_assert_msg(rc == 0, "set_state: %s", e.msg);
    for (int it = 0; it < c->iters && it < 64; it++) {
        fill_batch_as(net, batch, it, vd_exec_input_x(ex), vd_exec_input_dtype(ex),
                      vd_exec_input_nhwc(ex), vd_exec_input_labels(ex));
        rc = vd_exec_train_step(ex, net->train.lr, it, &o->loss[it], &e);
        if (rc) { o->rc = rc; snprintf(o->msg, sizeof o->msg, "%s", e.msg); break; }
    }
    if (!o->rc) {
        fill_batch_as(net, batch, 999, vd_exec_input_x(ex), vd_exec_input_dtype(ex),
                      vd_exec_input_nhwc(ex), vd_exec_input_labels(ex));
        vd_eval_counts ec;
        rc = vd_exec_eval_step(ex, &ec, &e);
        if (rc) { o->rc = rc; snprintf(o->msg, sizeof o->msg, "eval: %s", e.msg); }
        else { o->eval_correct = ec.top1; o->eval_loss = ec.loss; }
    }
    rc = vd_exec_get_state(ex, o->params, o->mom, NULL, &e);
    ck_assert_msg(rc == 0, "get_state: %s", e.msg);
    vd_exec_get_stats(ex, &o->st);
out:
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_profile_free(&prof);
    be->destroy(be);
}

static inline void run_free(run_out *o) {
    free(o->params);
    free(o->mom);
    o->params = o->mom = NULL;
}

#endif
