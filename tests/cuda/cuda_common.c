/* cuda_common.c — see cuda_common.h. */
#include "cuda_common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cuda/cuda_backend.h"

/* ------------------------------------------------------------------ nets */

void c_net_begin(vd_net *net, int c, int h, int w, int batch) {
    vdt_net_begin(net, "cudatest", c, h, w, batch);
}

vd_layer c_conv(int in, int out, int k, int s, int p, int d, int groups, bool bias) {
    return vdt_conv(in, out, k, k, s, s, p, p, d, d, groups, bias);
}

vd_layer c_pool(int in, vd_pool_mode mode, int k, int s, int p, bool ceil_mode) {
    return vdt_pool(in, mode, k, k, s, s, p, p, ceil_mode);
}

/* ------------------------------------------------------------------ data */

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    ck_assert_msg(p != NULL, "out of host memory (%zu bytes)", n);
    return p;
}

static void fill_u(float *p, int64_t n, float lo, float hi, vd_rng *r) {
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * vd_rng_uniform(r);
}

void c_run_init(c_run_in *in, const vd_net *net, int layer, int n, uint64_t seed, float zeros_frac) {
    memset(in, 0, sizeof *in);
    const vd_layer *l = &net->layers[layer];
    vd_rng r;
    vd_rng_seed(&r, seed, 7);
    in->net = net;
    in->layer = layer;
    in->n = n;
    for (int k = 0; k < l->n_in; k++) {
        in->xn[k] = (int64_t)n * vd_net_out_numel(net, l->in[k]);
        in->x[k] = xmalloc((size_t)in->xn[k] * sizeof(float));
        fill_u(in->x[k], in->xn[k], -1.0f, 1.0f, &r);
        if (zeros_frac > 0)
            for (int64_t i = 0; i < in->xn[k]; i++)
                if (vd_rng_uniform(&r) < zeros_frac) in->x[k][i] = 0.0f;
        in->dx_init[k] = xmalloc((size_t)in->xn[k] * sizeof(float));
        fill_u(in->dx_init[k], in->xn[k], -1.0f, 1.0f, &r);
    }
    in->yn = (int64_t)n * vd_net_out_numel(net, layer);
    in->dy = xmalloc((size_t)in->yn * sizeof(float));
    fill_u(in->dy, in->yn, -1.0f, 1.0f, &r);
    for (int q = 0; q < l->n_params; q++) in->pn += net->params[l->param_first + q].numel;
    in->par = xmalloc((size_t)in->pn * sizeof(float));
    int64_t off = 0;
    for (int q = 0; q < l->n_params; q++) {
        const vd_param *p = &net->params[l->param_first + q];
        const char *suf = strrchr(p->name, '.');
        suf = suf ? suf + 1 : p->name;
        if (!strcmp(suf, "running_var")) fill_u(in->par + off, p->numel, 0.5f, 1.5f, &r);
        else if (!strcmp(suf, "running_mean")) fill_u(in->par + off, p->numel, -0.5f, 0.5f, &r);
        else fill_u(in->par + off, p->numel, -1.0f, 1.0f, &r);
        off += p->numel;
    }
    in->labels = xmalloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) in->labels[i] = (int32_t)(vd_rng_u32(&r) % (uint32_t)net->classes);
}

void c_run_in_free(c_run_in *in) {
    for (int k = 0; k < VD_MAX_INPUTS; k++) {
        free(in->x[k]);
        free(in->dx_init[k]);
    }
    free(in->dy);
    free(in->par);
    free(in->labels);
    memset(in, 0, sizeof *in);
}

void c_run_out_free(c_run_out *out) {
    free(out->y);
    free(out->aux);
    for (int k = 0; k < VD_MAX_INPUTS; k++) free(out->dx[k]);
    free(out->grad);
    free(out->par);
    free(out->db);
    free(out->dy);
    memset(out, 0, sizeof *out);
}

static uint64_t take(uint64_t *off, uint64_t bytes) {
    uint64_t at = *off;
    *off += VD_ALIGN_UP(bytes ? bytes : 1, 256);
    return at;
}

static float *extract(const char *stage, uint64_t off, int64_t n) {
    float *p = xmalloc((size_t)n * sizeof(float));
    memcpy(p, stage + off, (size_t)n * sizeof(float));
    return p;
}

uint16_t c_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));   /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* >= 65520 (65504 + ulp/2): inf */
    if (a < 0x38800000u) {   /* below 2^-14: a subnormal count of 2^-24, exact scaling */
        float v;
        memcpy(&v, &a, 4);
        return (uint16_t)(sign | (uint16_t)nearbyintf(v * 16777216.0f));   /* ties to even */
    }
    uint32_t r = a - 0x38000000u;             /* exponent bias 127 -> 15 */
    r += 0xfffu + ((r >> 13) & 1u);           /* 23 -> 10 mantissa bits, ties to even */
    return (uint16_t)(sign | (uint16_t)(r >> 13));
}

/* A feature map of n elements, c channels of hw: float NCHW (math fp32), or
 * channels-last of type dt (tf32 float, bf16 / fp16 16-bit; nhwc), returned
 * as float NCHW. */
static float *extract_act(const char *stage, uint64_t off, int64_t n, int64_t c, int64_t hw,
                          vd_dtype dt, bool nhwc) {
    if (!nhwc) return extract(stage, off, n);
    float *p = xmalloc((size_t)(n ? n : 1) * sizeof(float));
    vd_nhwc_to_nchw_f32(dt, stage + off, p, n / (c * hw), c, hw);
    return p;
}

/* Stage a float NCHW feature map: as it is, or channels-last of type dt. */
static void put_act(char *stage, uint64_t off, const float *src, int64_t n, int64_t c, int64_t hw,
                    vd_dtype dt, bool nhwc) {
    if (nhwc) vd_nchw_f32_to_nhwc(dt, src, stage + off, n / (c * hw), c, hw);
    else memcpy(stage + off, src, (size_t)n * 4);
}

/* whole (the call on the whole batch) moved to samples [n0, n0 + n) of it:
 * pointers to the chunk's slices (elements of act bytes), n0, n_batch. */
static vd_op_io chunk_of(const vd_net *net, int layer, const vd_op_io *whole, int64_t n0, int n,
                         uint64_t act) {
    const vd_layer *l = &net->layers[layer];
    vd_op_io io = *whole;
    io.n = n;
    io.n0 = n0;
    io.n_batch = whole->n;
    for (int k = 0; k < l->n_in; k++) {
        uint64_t skip = (uint64_t)n0 * (uint64_t)vd_net_out_numel(net, l->in[k]) * act;
        io.x[k] = (const float *)(const void *)((const char *)whole->x[k] + skip);
        io.dx[k] = (float *)(void *)((char *)whole->dx[k] + skip);
    }
    uint64_t skip = (uint64_t)n0 * (uint64_t)vd_net_out_numel(net, layer) * act;
    io.y = (float *)(void *)((char *)whole->y + skip);
    io.dy = (const float *)(const void *)((const char *)whole->dy + skip);
    io.labels = whole->labels + n0;
    return io;
}

/* c_run's calls: the whole batch at once, or o->chunks's chunks in order. */
static void run_calls(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io,
                      const c_run_opts *o, uint64_t act) {
    vd_err e = {0};
    if (!o->chunks) {
        ck_assert_msg(be->forward(be, net, layer, io, &e) == 0, "%s forward: %s", be->name, e.msg);
        vd_op_io b = *io;   /* what a frozen layer's backward gets (c_run_opts) */
        vd_op op = net->layers[layer].op;
        if (o->no_dw) b.dw = b.db = NULL;
        if (o->no_dw && (op == VD_OP_CONV || op == VD_OP_FC)) b.x[0] = NULL;
        for (int k = 0; o->no_dx && k < VD_MAX_INPUTS; k++) b.dx[k] = NULL;
        if (o->backward)
            ck_assert_msg(be->backward(be, net, layer, &b, &e) == 0, "%s backward: %s", be->name,
                          e.msg);
        return;
    }
    ck_assert_msg(!o->no_dw && !o->no_dx, "c_run: no_dw, no_dx with chunks");
    for (int pass = 0; pass < (o->backward ? 2 : 1); pass++) {
        int64_t n0 = 0;
        for (int c = 0; o->chunks[c]; n0 += o->chunks[c++]) {
            vd_op_io ch = chunk_of(net, layer, io, n0, o->chunks[c], act);
            ch.dw_beta = c > 0 ? 1.0f : 0.0f;
            int rc = pass ? be->backward(be, net, layer, &ch, &e) : be->forward(be, net, layer, &ch, &e);
            ck_assert_msg(rc == 0, "%s %s of samples [%lld, +%d): %s", be->name,
                          pass ? "backward" : "forward", (long long)n0, o->chunks[c], e.msg);
        }
        ck_assert_msg(n0 == io->n, "chunks of %lld samples, the batch has %d", (long long)n0, io->n);
    }
}

int c_run(vd_backend *be, const c_run_in *in, const c_run_opts *o, c_run_out *out) {
    vd_err e = {0};
    const vd_net *net = in->net;
    const vd_layer *l = &net->layers[in->layer];
    memset(out, 0, sizeof *out);
    ck_assert_msg(be->layer_setup(be, net, o->setup_n ? o->setup_n : in->n, o->math,
                                  o->deterministic, &e) == 0,
                  "%s layer_setup: %s", be->name, e.msg);
    /* dropout's iteration is o->iter alone: the step scalars another test
     * left (step_set) would add theirs on one backend and not the other */
    vd_step_scalars zero;
    memset(&zero, 0, sizeof zero);
    ck_assert_msg(be->step_set(be, &zero, &e) == 0, "%s step_set: %s", be->name, e.msg);
    const vd_algo_opt *opts;
    int nopt = 0;
    ck_assert_msg(be->layer_algos(be, in->layer, &opts, &nopt, &e) == 0, "layer_algos: %s", e.msg);
    if (o->algo >= nopt) {
        /* a timed setup may list fewer options than the one before it (equal
         * timings are merged): nothing to run, nothing compared */
        printf("  (%s: option %d gone after a new setup; %d listed)\n", be->name, o->algo, nopt);
        return nopt;
    }
    uint64_t ws = opts[o->algo].workspace;
    int64_t auxn = (int64_t)(be->layer_aux_bytes(net, in->layer, in->n) / sizeof(float));

    vd_dtype bf = vd_math_act_dtype(o->math);   /* the maps' element type */
    const bool cl = vd_math_nhwc(o->math);      /* ... and layout */
    uint64_t act = vd_dtype_bytes(bf);
    int64_t xc[VD_MAX_INPUTS] = {0}, xhw[VD_MAX_INPUTS] = {0}, yc = l->c, yhw = (int64_t)l->h * l->w;
    for (int k = 0; k < l->n_in; k++) {
        int src = l->in[k];
        xc[k] = src < 0 ? net->in_c : net->layers[src].c;
        xhw[k] = src < 0 ? (int64_t)net->in_h * net->in_w
                         : (int64_t)net->layers[src].h * net->layers[src].w;
    }
    uint64_t off = 0, xo[VD_MAX_INPUTS] = {0}, dxo[VD_MAX_INPUTS] = {0};
    for (int k = 0; k < l->n_in; k++) {
        xo[k] = take(&off, (uint64_t)in->xn[k] * act);
        dxo[k] = take(&off, (uint64_t)in->xn[k] * act);
    }
    uint64_t yo = take(&off, (uint64_t)in->yn * act), dyo = take(&off, (uint64_t)in->yn * act);
    if (o->inplace) { yo = xo[0]; dxo[0] = dyo; }
    uint64_t paro = take(&off, (uint64_t)in->pn * 4), grado = take(&off, (uint64_t)in->pn * 4);
    uint64_t auxo = take(&off, (uint64_t)auxn * 4), labo = take(&off, (uint64_t)in->n * 4);
    uint64_t dbo = take(&off, (uint64_t)o->bias_db * 4);
    uint64_t ryo = take(&off, o->relu_y ? (uint64_t)in->yn * act : 0);
    uint64_t wso = take(&off, ws), total = off;

    void *pool = NULL;
    char *stage = NULL;
    ck_assert_msg(be->pool_create(be, total, &pool, &e) == 0, "pool_create: %s", e.msg);
    ck_assert_msg(be->host_alloc(be, total, (void **)&stage, &e) == 0, "host_alloc: %s", e.msg);
    memset(stage, 0xFF, total);     /* NaN everywhere nothing was written */
    for (int k = 0; k < l->n_in; k++) {
        put_act(stage, xo[k], in->x[k], in->xn[k], xc[k], xhw[k], bf, cl);
        if (o->dx_beta != 0.0f && !(o->inplace && k == 0))
            put_act(stage, dxo[k], in->dx_init[k], in->xn[k], xc[k], xhw[k], bf, cl);
    }
    put_act(stage, dyo, in->dy, in->yn, yc, yhw, bf, cl);
    if (o->relu_y) put_act(stage, ryo, o->relu_y, in->yn, yc, yhw, bf, cl);
    memcpy(stage + paro, in->par, (size_t)in->pn * 4);
    memcpy(stage + labo, in->labels, (size_t)in->n * 4);
    ck_assert(be->copy_async(be, VD_STREAM_H2D, pool, stage, total, &e) == 0);
    ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);

    char *d = pool;
    vd_op_io io;
    memset(&io, 0, sizeof io);
    io.n = in->n;
    for (int k = 0; k < l->n_in; k++) {
        io.x[k] = (const float *)(d + xo[k]);
        io.dx[k] = (float *)(d + dxo[k]);
        io.dx_beta[k] = o->dx_beta;
    }
    io.y = (float *)(d + yo);
    io.dy = (const float *)(d + dyo);
    int64_t poff = 0;
    for (int q = 0; q < l->n_params; q++) {
        const vd_param *p = &net->params[l->param_first + q];
        const char *suf = strrchr(p->name, '.');
        suf = suf ? suf + 1 : p->name;
        float *pp = (float *)(d + paro) + poff, *gp = (float *)(d + grado) + poff;
        if (!strcmp(suf, "weight")) { io.w = pp; io.dw = gp; }
        else if (!strcmp(suf, "bias")) { io.b = pp; io.db = gp; }
        else if (!strcmp(suf, "running_mean")) io.rm = pp;
        else if (!strcmp(suf, "running_var")) io.rv = pp;
        poff += p->numel;
    }
    io.aux = auxn ? (float *)(d + auxo) : NULL;
    io.labels = (const int32_t *)(d + labo);
    io.ws = ws ? d + wso : NULL;
    io.ws_bytes = ws;
    io.algo = o->algo;
    io.seed = o->seed;
    io.iter = o->iter;
    io.training = o->training;
    io.act = bf;
    io.loss_scaled = o->loss_scaled;
    io.loss_n = o->loss_n;
    io.bias_db = o->bias_db ? (float *)(d + dbo) : NULL;
    io.relu_dx = o->relu_dx;
    io.relu_y = o->relu_y ? (const float *)(d + ryo) : NULL;
    run_calls(be, net, in->layer, &io, o, act);
    ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);
    ck_assert(be->copy_async(be, VD_STREAM_D2H, stage, pool, total, &e) == 0);
    ck_assert_msg(be->synchronize(be, &e) == 0, "synchronize: %s", e.msg);

    out->y = extract_act(stage, yo, in->yn, yc, yhw, bf, cl);
    if (auxn) out->aux = extract(stage, auxo, auxn);
    if (o->backward)
        for (int k = 0; k < l->n_in; k++)
            out->dx[k] = extract_act(stage, dxo[k], in->xn[k], xc[k], xhw[k], bf, cl);
    if (o->bias_db) out->db = extract(stage, dbo, o->bias_db);
    if (o->relu_y) out->dy = extract_act(stage, dyo, in->yn, yc, yhw, bf, cl);
    if (in->pn) {
        out->grad = extract(stage, grado, in->pn);
        out->par = extract(stage, paro, in->pn);
    }
    be->host_free(be, stage);
    be->pool_destroy(be, pool);
    return nopt;
}

double c_nerr(const float *a, const float *b, int64_t n) {
    double mb = 0, md = 0;
    for (int64_t i = 0; i < n; i++) {
        bool na = isnan(a[i]), nb = isnan(b[i]);
        if (na || nb) {
            if (na && nb) continue;
            return INFINITY;
        }
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > md) md = d;
        if (fabs((double)b[i]) > mb) mb = fabs((double)b[i]);
    }
    return md / (mb > 1e-6 ? mb : 1e-6);
}

/* ------------------------------------------------------------------ backends */

static vd_backend *g_cpu_be, *g_cuda_be;   /* this file only; made once per process */

vd_backend *c_cpu(void) {
    if (!g_cpu_be) {
        vd_err e = {0};
        ck_assert_msg(vd_backend_cpu_create(&g_cpu_be, &e) == 0, "cpu backend: %s", e.msg);
    }
    return g_cpu_be;
}

void c_cpu_like_cuda(const vd_net *net) {
    vd_err e = {0};
    int n = net ? net->n_layers : 0;
    bool *once = n ? calloc((size_t)n, sizeof *once) : NULL;
    ck_assert(!n || once);
    for (int l = 0; l < n; l++) once[l] = vd_cuda_conv_fused(c_cuda(), l);
    ck_assert_msg(vd_backend_cpu_bias_rounding(c_cpu(), n, once, &e) == 0, "%s", e.msg);
    free(once);
}

/* VD_CUDA_TESTS_ON_CPU=1 (harness self-check, no GPU needed): the "cuda"
 * side is a second CPU backend, so every comparison must come out exact. */
static bool on_cpu(void) {
    const char *v = getenv("VD_CUDA_TESTS_ON_CPU");
    return v && v[0] == '1';
}

vd_backend *c_cuda(void) {
    if (!g_cuda_be) {
        vd_err e = {0};
        int rc = on_cpu() ? vd_backend_cpu_create(&g_cuda_be, &e)
                          : vd_backend_cuda_create(&g_cuda_be, 0, &e);
        ck_assert_msg(rc == 0, "cuda backend: %s", e.msg);
    }
    return g_cuda_be;
}

int c_main(Suite *s) {
    SRunner *sr = srunner_create(s);   /* owns s: freed with it, skipped or not */
    if (!on_cpu() && !vd_backend_cuda_available()) {
        srunner_free(sr);
        printf("SKIP: no CUDA device (or a build without CUDA)\n");
        return 77;
    }
    srunner_set_fork_status(sr, CK_NOFORK);   /* CUDA contexts do not survive fork */
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr), ran = srunner_ntests_run(sr);
    srunner_free(sr);
    if (g_cuda_be) g_cuda_be->destroy(g_cuda_be);
    if (g_cpu_be) g_cpu_be->destroy(g_cpu_be);
    if (ran == 0) {   /* CK_RUN_CASE naming no test: a stale name, as vdt_run */
        fprintf(stderr, "no test selected (CK_RUN_SUITE, CK_RUN_CASE, CK_INCLUDE_TAGS)\n");
        return 1;
    }
    return failed ? 1 : 0;
}
