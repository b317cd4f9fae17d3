/* ops_common.c — see ops_common.h. */
#include "ops_common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void t_net_begin(vd_net *net, int c, int h, int w) {
    vdt_net_begin(net, "optest", c, h, w, 2);
}

int t_net_one(vd_net *net, int c, int h, int w, vd_layer l) {
    t_net_begin(net, c, h, w);
    int i = vdt_add(net, l);
    vdt_finish(net, i);
    return i;
}

int t_net_multi(vd_net *net, vd_op op, int n_in, const int *chans) {
    t_net_begin(net, 2, 3, 4);
    int ins[VD_MAX_INPUTS];
    for (int k = 0; k < n_in; k++)
        ins[k] = vdt_add(net, vdt_conv(-1, chans[k], 1, 1, 1, 1, 0, 0, 1, 1, 1, false));
    int i = vdt_add(net, vdt_multi(op, n_in, ins));
    vdt_finish(net, i);
    return i;
}

TCase *t_case(Suite *s, const TTest *t, void (*setup)(void), void (*teardown)(void)) {
    TCase *tc = vdt_case(s, t, 0);
    tcase_add_checked_fixture(tc, setup, teardown);
    return tc;
}

vd_layer t_adaptive(int in, vd_pool_mode mode, int oh, int ow) {
    return vdt_adaptive(in, mode, oh, ow, false);
}

float *t_alloc(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xFF, (size_t)(n > 0 ? n : 1) * sizeof *p);
    return p;
}

float *t_copy(const float *p, int64_t n) {
    float *q = t_alloc(n);
    memcpy(q, p, (size_t)n * sizeof *q);
    return q;
}

void t_fill_uniform(float *p, int64_t n, float lo, float hi, uint64_t seed) {
    vd_rng r;
    vd_rng_seed(&r, seed, 7);
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * vd_rng_uniform(&r);
}

void t_fill_distinct(float *p, int64_t n, float lo, float step, uint64_t seed) {
    vd_rng r;
    vd_rng_seed(&r, seed, 11);
    for (int64_t i = 0; i < n; i++) p[i] = (float)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(vd_rng_u32(&r) % (uint32_t)(i + 1));
        float t = p[i]; p[i] = p[j]; p[j] = t;
    }
    for (int64_t i = 0; i < n; i++) p[i] = lo + p[i] * step;
}

static const vd_param *find_param(const vd_net *net, int layer, const char *suffix) {
    const vd_layer *l = &net->layers[layer];
    for (int i = l->param_first; i < l->param_first + l->n_params; i++) {
        const char *dot = strrchr(net->params[i].name, '.');
        if (dot && strcmp(dot + 1, suffix) == 0) return &net->params[i];
    }
    return NULL;
}

void t_op_init(t_op *t, vd_backend *be, const vd_net *net, int layer, int n, uint64_t seed) {
    memset(t, 0, sizeof *t);
    vd_err e = {0};
    t->be = be;
    t->net = net;
    t->layer = layer;
    t->n = n;
    const vd_layer *l = &net->layers[layer];
    ck_assert_int_eq(be->layer_setup(be, net, n, VD_MATH_FP32, true, &e), 0);
    t->n_in = l->n_in;
    for (int k = 0; k < l->n_in; k++) {
        t->xn[k] = (int64_t)n * vd_net_out_numel(net, l->in[k]);
        t->x[k] = t_alloc(t->xn[k]);
        t_fill_uniform(t->x[k], t->xn[k], -1, 1, seed * 31 + (uint64_t)k);
        t->dx[k] = t_alloc(t->xn[k]);
    }
    t->yn = (int64_t)n * vd_net_out_numel(net, layer);
    t->y = t_alloc(t->yn);
    t->dy = t_alloc(t->yn);
    t->r = t_alloc(t->yn);
    t_fill_uniform(t->r, t->yn, -1, 1, seed * 31 + 100);
    const vd_param *pw = find_param(net, layer, "weight"), *pb = find_param(net, layer, "bias");
    const vd_param *pm = find_param(net, layer, "running_mean");
    const vd_param *pv = find_param(net, layer, "running_var");
    if (pw) {
        t->wn = pw->numel;
        t->w = t_alloc(t->wn);
        t->dw = t_alloc(t->wn);
        t_fill_uniform(t->w, t->wn, -1, 1, seed * 31 + 200);
    }
    if (pb) {
        t->bn = pb->numel;
        t->b = t_alloc(t->bn);
        t->db = t_alloc(t->bn);
        t_fill_uniform(t->b, t->bn, -1, 1, seed * 31 + 300);
    }
    if (pm) {
        t->rm = t_alloc(pm->numel);
        t_fill_uniform(t->rm, pm->numel, -0.5f, 0.5f, seed * 31 + 400);
    }
    if (pv) {
        t->rv = t_alloc(pv->numel);
        t_fill_uniform(t->rv, pv->numel, 0.5f, 1.5f, seed * 31 + 500);
    }
    uint64_t ab = be->layer_aux_bytes(net, layer, n);
    t->auxn = (int64_t)(ab / sizeof(float));
    if (ab) t->aux = t_alloc(t->auxn);
    const vd_algo_opt *opts;
    int nopt;
    ck_assert_int_eq(be->layer_algos(be, layer, &opts, &nopt, &e), 0);
    for (int i = 0; i < nopt; i++)
        if (opts[i].workspace > t->ws_bytes) t->ws_bytes = opts[i].workspace;
    if (t->ws_bytes) t->ws = t_alloc((int64_t)(t->ws_bytes / sizeof(float)) + 1);
    t->labels = malloc((size_t)n * sizeof *t->labels);
    ck_assert_ptr_nonnull(t->labels);
    vd_rng r;
    vd_rng_seed(&r, seed, 99);
    for (int i = 0; i < n; i++) t->labels[i] = (int32_t)(vd_rng_u32(&r) % (uint32_t)l->c);

    vd_op_io *io = &t->io;
    io->n = n;
    for (int k = 0; k < l->n_in; k++) { io->x[k] = t->x[k]; io->dx[k] = t->dx[k]; }
    io->y = t->y;
    io->w = t->w; io->b = t->b; io->rm = t->rm; io->rv = t->rv;
    io->dw = t->dw; io->db = t->db;
    io->dy = t->dy;
    io->aux = t->aux;
    io->labels = t->labels;
    io->ws = t->ws; io->ws_bytes = t->ws_bytes;
    io->algo = 0;
    io->seed = 1234;
    io->iter = 5;
    io->training = true;
}

void t_op_free(t_op *t) {
    for (int k = 0; k < t->n_in; k++) { free(t->x[k]); free(t->dx[k]); }
    free(t->y); free(t->dy); free(t->r);
    free(t->w); free(t->b); free(t->dw); free(t->db); free(t->rm); free(t->rv);
    free(t->aux); free(t->ws); free(t->labels);
    memset(t, 0, sizeof *t);
}

void t_fwd(t_op *t) {
    vd_err e = {0};
    int rc = t->be->forward(t->be, t->net, t->layer, &t->io, &e);
    ck_assert_msg(rc == 0, "forward: %s", e.msg);
}

void t_bwd(t_op *t) {
    vd_err e = {0};
    memcpy(t->dy, t->r, (size_t)t->yn * sizeof *t->dy);
    for (int k = 0; k < t->n_in; k++)
        if (t->io.dx_beta[k] == 0.0f && t->io.dx[k] == t->dx[k])
            memset(t->dx[k], 0xFF, (size_t)t->xn[k] * sizeof(float));
    if (t->dw) memset(t->dw, 0xFF, (size_t)t->wn * sizeof(float));
    if (t->db) memset(t->db, 0xFF, (size_t)t->bn * sizeof(float));
    int rc = t->be->backward(t->be, t->net, t->layer, &t->io, &e);
    ck_assert_msg(rc == 0, "backward: %s", e.msg);
}

double t_loss(t_op *t) {
    t_fwd(t);
    if (t->net->layers[t->layer].op == VD_OP_SOFTMAX_XENT) return t->aux[0];
    double s = 0;
    for (int64_t i = 0; i < t->yn; i++) s += (double)t->r[i] * t->y[i];
    return s;
}

void t_fd(t_op *t, float *v, double *num, int64_t count, float h) {
    for (int64_t i = 0; i < count; i++) {
        float v0 = v[i];
        float vp = v0 + h, vm = v0 - h;
        v[i] = vp;
        double lp = t_loss(t);
        v[i] = vm;
        double lm = t_loss(t);
        v[i] = v0;
        num[i] = (lp - lm) / ((double)vp - (double)vm);
    }
    t_fwd(t);
}

double t_cmp(const float *ana, const double *num, int64_t count) {
    double scale = 1e-6, err = 0;
    for (int64_t i = 0; i < count; i++) {
        if (fabs(num[i]) > scale) scale = fabs(num[i]);
        if (fabs((double)ana[i]) > scale) scale = fabs((double)ana[i]);
    }
    for (int64_t i = 0; i < count; i++) {
        double d = fabs((double)ana[i] - num[i]);
        if (!(d <= err)) err = d;  /* NaN makes err NaN */
    }
    return err / scale;
}

double t_fd_err(t_op *t, float *v, const float *ana, int64_t count, float h) {
    double *num = malloc((size_t)count * sizeof *num);
    ck_assert_ptr_nonnull(num);
    t_fd(t, v, num, count, h);
    double err = t_cmp(ana, num, count);
    free(num);
    return err;
}
