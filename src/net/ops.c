/* ops.c — the op table: everything about one op type in one place.
 *
 * Per op: its spec keys and their parsing (a callback the spec parser calls
 * with a vd_spec_keys reader), the defaults of fields a layer built in code
 * may leave 0, shape inference and checks (pure: the CPU backend runs it
 * again on the finalized net), forward FLOPs, parameter creation (with
 * roles), saved-state (aux) bytes, what backward reads, and the flags
 * (in-place capable, recomputable). The kernels live in
 * the backends (per-op dispatch arrays in cpu_ops.c and cuda_ops.cu). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "net/net.h"

int vd_spec_keys_errf(const vd_spec_keys *k, const char *key, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return k->error(k, key, msg);
}

#define LERR(...) vd_net_layer_err(net, l, e, __VA_ARGS__)

/* ------------------------------------------------------------------ conv */

static const char *const CONV_KEYS[] = {"out", "kernel", "stride", "pad", "dilation", "groups", "bias", NULL};

static int conv_parse(vd_layer *l, const vd_spec_keys *k) {
    int rc;
    l->u.conv.sh = l->u.conv.sw = 1;
    l->u.conv.dh = l->u.conv.dw = 1;
    l->u.conv.groups = 1;
    l->u.conv.bias = true;
    if (!k->has(k, "out")) return vd_spec_keys_errf(k, NULL, "layer '%s': missing key 'out' (output channels)", k->layer);
    if (!k->has(k, "kernel")) return vd_spec_keys_errf(k, NULL, "layer '%s': missing key 'kernel'", k->layer);
    if ((rc = k->get_int(k, "out", 1, &l->u.conv.out)) ||
        (rc = k->get_pair(k, "kernel", 1, &l->u.conv.kh, &l->u.conv.kw)) ||
        (rc = k->get_pair(k, "stride", 1, &l->u.conv.sh, &l->u.conv.sw)) ||
        (rc = k->get_pair(k, "pad", 0, &l->u.conv.ph, &l->u.conv.pw)) ||
        (rc = k->get_pair(k, "dilation", 1, &l->u.conv.dh, &l->u.conv.dw)) ||
        (rc = k->get_int(k, "groups", 1, &l->u.conv.groups)) ||
        (rc = k->get_bool(k, "bias", &l->u.conv.bias)))
        return rc;
    if (l->u.conv.out % l->u.conv.groups)
        return vd_spec_keys_errf(k, "groups", "layer '%s': groups=%d must divide out=%d", k->layer,
                                 l->u.conv.groups, l->u.conv.out);
    return VD_OK;
}

/* A layer built in code may leave groups and dilation 0: 1. */
static void conv_defaults(vd_layer *l) {
    if (l->u.conv.groups <= 0) l->u.conv.groups = 1;
    if (l->u.conv.dh <= 0) l->u.conv.dh = 1;
    if (l->u.conv.dw <= 0) l->u.conv.dw = 1;
}

static int conv_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    if (l->u.conv.out <= 0) return LERR("out must be positive, got %d", l->u.conv.out);
    /* after conv_defaults only a net changed since (the backends' checks
     * run infer on finalized nets) has these 0: the divisions below need them */
    if (l->u.conv.groups <= 0) return LERR("groups must be positive, got %d", l->u.conv.groups);
    if (l->u.conv.dh <= 0 || l->u.conv.dw <= 0)
        return LERR("dilation must be positive, got %dx%d", l->u.conv.dh, l->u.conv.dw);
    if (l->u.conv.kh <= 0 || l->u.conv.kw <= 0)
        return LERR("kernel must be positive, got %dx%d", l->u.conv.kh, l->u.conv.kw);
    if (l->u.conv.sh <= 0 || l->u.conv.sw <= 0)
        return LERR("stride must be positive, got %dx%d", l->u.conv.sh, l->u.conv.sw);
    if (l->u.conv.ph < 0 || l->u.conv.pw < 0) return LERR("pad must not be negative");
    int g = l->u.conv.groups;
    if (c % g || l->u.conv.out % g)
        return LERR("groups=%d must divide input channels (%d) and out (%d)", g, c, l->u.conv.out);
    int64_t ekh = (int64_t)l->u.conv.dh * (l->u.conv.kh - 1) + 1;
    int64_t ekw = (int64_t)l->u.conv.dw * (l->u.conv.kw - 1) + 1;
    int64_t ih = (int64_t)h + 2 * (int64_t)l->u.conv.ph, iw = (int64_t)w + 2 * (int64_t)l->u.conv.pw;
    if (ekh > ih || ekw > iw)
        return LERR("kernel %dx%d exceeds its padded input %lldx%lld (from '%s', %dx%dx%d)",
                    l->u.conv.kh, l->u.conv.kw, (long long)ih, (long long)iw,
                    vd_net_in_name(net, l->in[0]), c, h, w);
    *oc = l->u.conv.out;
    *oh = (ih - ekh) / l->u.conv.sh + 1;
    *ow = (iw - ekw) / l->u.conv.sw + 1;
    return VD_OK;
}

static double conv_flops(const vd_net *net, int i) {
    const vd_layer *l = &net->layers[i];
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    double out = (double)l->c * l->h * l->w;
    return 2.0 * out * ((double)c / l->u.conv.groups) * l->u.conv.kh * l->u.conv.kw +
           (l->u.conv.bias ? out : 0);
}

static int conv_params(vd_net *net, int i, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    int c, h, w, rc;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    int64_t ws[4] = {l->u.conv.out, c / l->u.conv.groups, l->u.conv.kh, l->u.conv.kw};
    if ((rc = vd_net_add_param(net, i, "weight", VD_ROLE_WEIGHT, 4, ws, e))) return rc;
    int64_t bs[1] = {l->u.conv.out};
    if (l->u.conv.bias) return vd_net_add_param(net, i, "bias", VD_ROLE_BIAS, 1, bs, e);
    return VD_OK;
}

/* ------------------------------------------------------------------ pool */

static const char *const POOL_KEYS[] = {"mode", "kernel", "stride", "pad", "global", "output", "ceil_mode", NULL};

static int pool_parse(vd_layer *l, const vd_spec_keys *k) {
    int rc;
    if (!k->has(k, "mode"))
        return vd_spec_keys_errf(k, NULL, "layer '%s': missing key 'mode' (max or avg)", k->layer);
    char *mode;
    if ((rc = k->get_word(k, "mode", &mode))) return rc;
    if (!strcmp(mode, "max")) l->u.pool.mode = VD_POOL_MAX;
    else if (!strcmp(mode, "avg")) l->u.pool.mode = VD_POOL_AVG;
    else rc = vd_spec_keys_errf(k, "mode", "'mode' must be max or avg, got '%.64s'", mode);
    vd_free(mode);
    if (rc) return rc;
    if ((rc = k->get_bool(k, "global", &l->u.pool.global)) ||
        (rc = k->get_bool(k, "ceil_mode", &l->u.pool.ceil_mode)))
        return rc;
    static const char *const window_keys[] = {"kernel", "stride", "pad", "ceil_mode"};
    if (l->u.pool.global || k->has(k, "output")) {
        const char *why = l->u.pool.global ? "global: true" : "output";
        const char *wk = l->u.pool.global ? "global" : "output";
        if (l->u.pool.mode != VD_POOL_AVG)
            return vd_spec_keys_errf(k, wk, "layer '%s': %s needs mode: avg", k->layer, why);
        for (int i = 0; i < 4; i++)
            if (k->has(k, window_keys[i]))
                return vd_spec_keys_errf(k, window_keys[i], "layer '%s': '%s' cannot be combined with %s",
                                         k->layer, window_keys[i], why);
        if (l->u.pool.global && k->has(k, "output"))
            return vd_spec_keys_errf(k, "output", "layer '%s': 'output' cannot be combined with %s",
                                     k->layer, why);
        return k->get_pair(k, "output", 1, &l->u.pool.out_h, &l->u.pool.out_w);
    }
    if (!k->has(k, "kernel"))
        return vd_spec_keys_errf(k, NULL, "layer '%s': missing key 'kernel' (or global: true, or output)",
                                 k->layer);
    if ((rc = k->get_pair(k, "kernel", 1, &l->u.pool.kh, &l->u.pool.kw))) return rc;
    l->u.pool.sh = l->u.pool.kh; /* PyTorch: stride defaults to the kernel */
    l->u.pool.sw = l->u.pool.kw;
    if ((rc = k->get_pair(k, "stride", 1, &l->u.pool.sh, &l->u.pool.sw))) return rc;
    return k->get_pair(k, "pad", 0, &l->u.pool.ph, &l->u.pool.pw);
}

/* PyTorch's pooling output size. Returns <= 0 when the window never fits. */
static int64_t pool_out(int64_t in, int k, int s, int p, bool ceil_mode) {
    int64_t span = in + 2 * (int64_t)p - k;
    if (span < 0) return 0;
    int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= in + p) o--;
    return o;
}

/* A windowed pool built in code may leave the stride 0: the kernel's, as
 * pool_parse's default. Adaptive and global pools have no window. */
static void pool_defaults(vd_layer *l) {
    if (l->u.pool.global || l->u.pool.out_h > 0 || l->u.pool.out_w > 0) return;
    if (l->u.pool.sh <= 0) l->u.pool.sh = l->u.pool.kh;
    if (l->u.pool.sw <= 0) l->u.pool.sw = l->u.pool.kw;
}

static int pool_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    if (l->u.pool.global) { *oh = *ow = 1; return VD_OK; }
    if (l->u.pool.out_h > 0 || l->u.pool.out_w > 0) {
        if (l->u.pool.out_h <= 0 || l->u.pool.out_w <= 0)
            return LERR("adaptive output size must be positive");
        *oh = l->u.pool.out_h; *ow = l->u.pool.out_w;
        return VD_OK;
    }
    if (l->u.pool.kh <= 0 || l->u.pool.kw <= 0)
        return LERR("kernel must be positive, got %dx%d", l->u.pool.kh, l->u.pool.kw);
    /* positive after pool_defaults unless the net changed since: pool_out divides */
    if (l->u.pool.sh <= 0 || l->u.pool.sw <= 0)
        return LERR("stride must be positive, got %dx%d", l->u.pool.sh, l->u.pool.sw);
    if (l->u.pool.ph < 0 || l->u.pool.pw < 0) return LERR("pad must not be negative");
    if (2 * (int64_t)l->u.pool.ph > l->u.pool.kh || 2 * (int64_t)l->u.pool.pw > l->u.pool.kw)
        return LERR("pad must be at most half the kernel (as in PyTorch)");
    *oh = pool_out(h, l->u.pool.kh, l->u.pool.sh, l->u.pool.ph, l->u.pool.ceil_mode);
    *ow = pool_out(w, l->u.pool.kw, l->u.pool.sw, l->u.pool.pw, l->u.pool.ceil_mode);
    if (*oh <= 0 || *ow <= 0)
        return LERR("kernel %dx%d exceeds its padded input %lldx%lld (from '%s')", l->u.pool.kh,
                    l->u.pool.kw, (long long)h + 2 * (long long)l->u.pool.ph,
                    (long long)w + 2 * (long long)l->u.pool.pw,
                    vd_net_in_name(net, l->in[0]));
    return VD_OK;
}

static double pool_flops(const vd_net *net, int i) {
    const vd_layer *l = &net->layers[i];
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    if (l->u.pool.global || l->u.pool.out_h > 0) return (double)c * h * w;
    return (double)l->c * l->h * l->w * l->u.pool.kh * l->u.pool.kw;
}

/* Max pooling recomputes each window's argmax from x; average pooling needs
 * only the shapes. Neither reads y. */
static void pool_bwd_reads(const vd_layer *l, bool *x, bool *y) {
    *x = l->u.pool.mode == VD_POOL_MAX;
    *y = false;
}

/* ------------------------------------------------------------------ lrn */

static const char *const LRN_KEYS[] = {"size", "alpha", "beta", "k", NULL};

static int lrn_parse(vd_layer *l, const vd_spec_keys *k) {
    int rc;
    l->u.lrn.size = 5;
    l->u.lrn.alpha = 1e-4f;
    l->u.lrn.beta = 0.75f;
    l->u.lrn.k = 2.0f;
    if ((rc = k->get_int(k, "size", 1, &l->u.lrn.size))) return rc;
    if (l->u.lrn.size % 2 == 0)
        return vd_spec_keys_errf(k, "size", "'size' must be odd (a centred window), got %d", l->u.lrn.size);
    if ((rc = k->get_float(k, "alpha", 0, false, 1e30, false, "non-negative", &l->u.lrn.alpha)) ||
        (rc = k->get_float(k, "beta", 0, false, 1e30, false, "non-negative", &l->u.lrn.beta)))
        return rc;
    return k->get_float(k, "k", 0, true, 1e30, false, "positive", &l->u.lrn.k);
}

static int lrn_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    if (l->u.lrn.size <= 0) return LERR("size must be positive");
    return VD_OK;
}

static double lrn_flops(const vd_net *net, int i) {
    const vd_layer *l = &net->layers[i];
    return (double)l->c * l->h * l->w * (2.0 * l->u.lrn.size + 4);
}

/* ------------------------------------------------------------------ batchnorm */

static const char *const BN_KEYS[] = {"eps", "momentum", NULL};

static int bn_parse(vd_layer *l, const vd_spec_keys *k) {
    int rc;
    l->u.bn.eps = 1e-5f;
    l->u.bn.momentum = 0.1f;
    if ((rc = k->get_float(k, "eps", 0, true, 1, false, "in (0, 1]", &l->u.bn.eps))) return rc;
    return k->get_float(k, "momentum", 0, true, 1, false, "in (0, 1]", &l->u.bn.momentum);
}

/* A layer built in code may leave eps and momentum 0: bn_parse's defaults. */
static void bn_defaults(vd_layer *l) {
    if (!(l->u.bn.eps > 0)) l->u.bn.eps = 1e-5f;
    if (!(l->u.bn.momentum > 0)) l->u.bn.momentum = 0.1f;
}

static int bn_params(vd_net *net, int i, vd_err *e) {
    int c, h, w, rc;
    vd_net_in_shape(net, net->layers[i].in[0], &c, &h, &w);
    int64_t s[1] = {c};
    if ((rc = vd_net_add_param(net, i, "weight", VD_ROLE_BN_SCALE, 1, s, e)) ||
        (rc = vd_net_add_param(net, i, "bias", VD_ROLE_BN_SHIFT, 1, s, e)) ||
        (rc = vd_net_add_param(net, i, "running_mean", VD_ROLE_RUNNING_MEAN, 1, s, e)) ||
        (rc = vd_net_add_param(net, i, "running_var", VD_ROLE_RUNNING_VAR, 1, s, e)))
        return rc;
    return VD_OK;
}

/* mean[C] then invstd[C] (floats) */
static uint64_t bn_aux_bytes(const vd_layer *l, int batch) {
    return 2 * (uint64_t)l->c * sizeof(float);
}

/* ------------------------------------------------------------------ fc */

static const char *const FC_KEYS[] = {"out", "bias", NULL};

static int fc_parse(vd_layer *l, const vd_spec_keys *k) {
    int rc;
    l->u.fc.bias = true;
    if (!k->has(k, "out"))
        return vd_spec_keys_errf(k, NULL, "layer '%s': missing key 'out' (output features)", k->layer);
    if ((rc = k->get_int(k, "out", 1, &l->u.fc.out))) return rc;
    return k->get_bool(k, "bias", &l->u.fc.bias);
}

static int fc_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    if (l->u.fc.out <= 0) return LERR("out must be positive, got %d", l->u.fc.out);
    *oc = l->u.fc.out; *oh = *ow = 1;
    return VD_OK;
}

static double fc_flops(const vd_net *net, int i) {
    const vd_layer *l = &net->layers[i];
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    return 2.0 * (double)c * h * w * l->u.fc.out + (l->u.fc.bias ? l->u.fc.out : 0);
}

static int fc_params(vd_net *net, int i, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    int c, h, w, rc;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    int64_t ws[2] = {l->u.fc.out, (int64_t)c * h * w};
    if ((rc = vd_net_add_param(net, i, "weight", VD_ROLE_WEIGHT, 2, ws, e))) return rc;
    int64_t bs[1] = {l->u.fc.out};
    if (l->u.fc.bias) return vd_net_add_param(net, i, "bias", VD_ROLE_BIAS, 1, bs, e);
    return VD_OK;
}

/* ------------------------------------------------------------------ dropout */

static const char *const DROPOUT_KEYS[] = {"p", NULL};

static int dropout_parse(vd_layer *l, const vd_spec_keys *k) {
    l->u.dropout.p = 0.5f;
    return k->get_float(k, "p", 0, false, 1, true, "in [0, 1)", &l->u.dropout.p);
}

static int dropout_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    if (!(l->u.dropout.p >= 0 && l->u.dropout.p < 1))
        return LERR("p must be in [0, 1), got %g", (double)l->u.dropout.p);
    return VD_OK;
}

/* ------------------------------------------------------------------ flatten, add, concat */

static int flatten_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    *oc = *oc * *oh * *ow;
    *oh = *ow = 1;
    return VD_OK;
}

static int add_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    for (int k = 1; k < l->n_in; k++) {
        int c2, h2, w2;
        vd_net_in_shape(net, l->in[k], &c2, &h2, &w2);
        if (c2 != c || h2 != h || w2 != w)
            return LERR("shape mismatch: '%s' is %dx%dx%d but '%s' is %dx%dx%d",
                        vd_net_in_name(net, l->in[0]), c, h, w, vd_net_in_name(net, l->in[k]), c2, h2, w2);
    }
    return VD_OK;
}

static double add_flops(const vd_net *net, int i) {
    const vd_layer *l = &net->layers[i];
    return (double)l->c * l->h * l->w * (l->n_in - 1);
}

static int concat_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    int c, h, w;
    vd_net_in_shape(net, l->in[0], &c, &h, &w);
    *oc = 0;
    for (int k = 0; k < l->n_in; k++) {
        int c2, h2, w2;
        vd_net_in_shape(net, l->in[k], &c2, &h2, &w2);
        if (h2 != h || w2 != w)
            return LERR("shape mismatch: concat needs equal height and width, but '%s' is "
                        "%dx%d and '%s' is %dx%d",
                        vd_net_in_name(net, l->in[0]), h, w, vd_net_in_name(net, l->in[k]), h2, w2);
        *oc += c2;
    }
    return VD_OK;
}

/* ------------------------------------------------------------------ loss */

static int xent_infer(const vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow, vd_err *e) {
    const vd_layer *l = &net->layers[i];
    int64_t n = *oc * *oh * *ow;
    if (n != net->classes)
        return LERR("loss input '%s' has %lld values per sample, expected classes=%d",
                    vd_net_in_name(net, l->in[0]), (long long)n, net->classes);
    *oc = net->classes; *oh = *ow = 1;
    return VD_OK;
}

/* the mean loss */
/* the mean loss and the top-1 hits (backend.h, aux) */
static uint64_t xent_aux_bytes(const vd_layer *l, int batch) { return 2 * sizeof(float); }

/* ------------------------------------------------------------------ shared FLOP counts */

static double flops_out(const vd_net *net, int i) {     /* one per output value */
    const vd_layer *l = &net->layers[i];
    return (double)l->c * l->h * l->w;
}

static double flops_out4(const vd_net *net, int i) {    /* four per output value */
    return 4 * flops_out(net, i);
}

/* GELU, erf form: erf about 10 FLOPs, the rest 4 */
static double gelu_flops(const vd_net *net, int i) { return 14 * flops_out(net, i); }

static const char *const NO_KEYS[] = {NULL};

/* ------------------------------------------------------------------ the table */

const vd_op_info vd_op_table[] = {
    [VD_OP_CONV] = {.name = "conv", .min_inputs = 1, .max_inputs = 1, .bwd_needs_x = true,
                    .bwd_x_for_weight = true,
                    .has_params = true, .recomputable = true, .chunkable = true, .keys = CONV_KEYS,
                    .parse = conv_parse, .defaults = conv_defaults, .infer = conv_infer,
                    .flops = conv_flops, .params = conv_params},
    /* Exact per layer: pool_bwd_reads (max reads x, average nothing). */
    [VD_OP_POOL] = {.name = "pool", .min_inputs = 1, .max_inputs = 1, .bwd_needs_x = true,
                    .recomputable = true, .chunkable = true, .keys = POOL_KEYS,
                    .parse = pool_parse, .defaults = pool_defaults, .infer = pool_infer,
                    .flops = pool_flops, .bwd_reads = pool_bwd_reads},
    /* bwd_inplace: dx[i] from y[i] and dy[i] alone (cpu_ops.c relu_sel, CUDA
     * k_relu_bwd*), so dx may be dy's storage */
    [VD_OP_RELU] = {.name = "relu", .min_inputs = 1, .max_inputs = 1, .bwd_needs_y = true,
                    .can_inplace = true, .recomputable = true, .chunkable = true,
                    .bwd_inplace = true, .keys = NO_KEYS, .flops = flops_out},
    /* backward recomputes the scale from x (both backends) */
    [VD_OP_LRN] = {.name = "lrn", .min_inputs = 1, .max_inputs = 1, .bwd_needs_x = true,
                   .recomputable = true, .chunkable = true, .keys = LRN_KEYS,
                   .parse = lrn_parse, .infer = lrn_infer, .flops = lrn_flops},
    /* recomputable: a re-run normalises with the statistics saved in aux by the
     * forward (no new statistics, no running-statistics update); not chunkable:
     * training normalises with statistics of the whole batch (vd_op_info); its
     * evaluation forward (running statistics) is */
    /* bwd_takes_relu: y = (x - mean) * invstd * gamma + beta is recomputed from
     * x and the saved statistics by both backends' backward */
    [VD_OP_BATCHNORM] = {.name = "batchnorm", .min_inputs = 1, .max_inputs = 1,
                         .recomputable = true, .eval_chunkable = true, .bwd_takes_relu = true,
                         .bwd_needs_x = true, .has_params = true, .step_counter = true,
                         .keys = BN_KEYS,
                         .parse = bn_parse, .defaults = bn_defaults, .flops = flops_out4,
                         .params = bn_params, .aux_bytes = bn_aux_bytes},
    [VD_OP_FC] = {.name = "fc", .min_inputs = 1, .max_inputs = 1, .bwd_needs_x = true,
                  .bwd_x_for_weight = true,
                  .has_params = true, .recomputable = true, .chunkable = true, .keys = FC_KEYS,
                  .parse = fc_parse, .infer = fc_infer, .flops = fc_flops, .params = fc_params},
    [VD_OP_DROPOUT] = {.name = "dropout", .min_inputs = 1, .max_inputs = 1, .can_inplace = true,
                       .recomputable = true, .chunkable = true, .keys = DROPOUT_KEYS,
                       .parse = dropout_parse, .infer = dropout_infer, .flops = flops_out},
    [VD_OP_FLATTEN] = {.name = "flatten", .min_inputs = 1, .max_inputs = 1, .recomputable = true,
                       .chunkable = true, .keys = NO_KEYS, .infer = flatten_infer},
    [VD_OP_ADD] = {.name = "add", .min_inputs = 2, .max_inputs = VD_MAX_INPUTS,
                   .recomputable = true, .chunkable = true, .bwd_is_dy = true, .keys = NO_KEYS,
                   .infer = add_infer, .flops = add_flops},
    [VD_OP_CONCAT] = {.name = "concat", .min_inputs = 2, .max_inputs = VD_MAX_INPUTS,
                      .recomputable = true, .chunkable = true, .keys = NO_KEYS, .infer = concat_infer},
    /* not recomputable: forward writes the loss (aux); chunkable: a chunk adds
     * its part of the mean to aux (backend.h, vd_op_io) */
    [VD_OP_SOFTMAX_XENT] = {.name = "softmax_cross_entropy", .min_inputs = 1, .max_inputs = 1,
                            .bwd_needs_y = true, .chunkable = true, .keys = NO_KEYS,
                            .infer = xent_infer, .flops = flops_out4, .aux_bytes = xent_aux_bytes},
    /* torch.nn.GELU(): y = x * Phi(x); backward reads x */
    [VD_OP_GELU] = {.name = "gelu", .min_inputs = 1, .max_inputs = 1, .bwd_needs_x = true,
                    .recomputable = true, .chunkable = true, .keys = NO_KEYS, .flops = gelu_flops},
};
_Static_assert(sizeof vd_op_table / sizeof vd_op_table[0] == VD_OP_COUNT, "one table entry per op (the last op has none)");

uint64_t vd_op_aux_bytes(const vd_net *net, int layer, int batch) {
    const vd_layer *l = &net->layers[layer];
    const vd_op_info *info = &vd_op_table[l->op];
    return info->aux_bytes ? info->aux_bytes(l, batch) : 0;
}

void vd_op_bwd_reads_unfrozen(const vd_net *net, int layer, bool *x, bool *y) {
    const vd_layer *l = &net->layers[layer];
    const vd_op_info *info = &vd_op_table[l->op];
    *x = info->bwd_needs_x;
    *y = info->bwd_needs_y;
    if (info->bwd_reads) info->bwd_reads(l, x, y);
}

int vd_op_relu_taker(const vd_net *net, int r) {
    const vd_layer *l = &net->layers[r];
    if (l->op != VD_OP_RELU || !l->inplace || l->n_in != 1 || l->in[0] < 0) return -1;
    return vd_op_table[net->layers[l->in[0]].op].bwd_takes_relu ? l->in[0] : -1;
}

int vd_op_relu_taken(const vd_net *net, int p) {
    if (!vd_op_table[net->layers[p].op].bwd_takes_relu) return -1;
    for (int r = p + 1; r < net->n_layers; r++)
        if (vd_op_relu_taker(net, r) == p) return r;
    return -1;
}

int vd_op_bias_taker(const vd_net *net, int r) {
    const vd_layer *l = &net->layers[r];
    int c = r - 1;
    if (l->op != VD_OP_RELU || l->n_in != 1 || l->in[0] != c || c < 0 || l->no_grad) return -1;
    const vd_layer *lc = &net->layers[c];
    if (lc->op != VD_OP_CONV || !lc->u.conv.bias) return -1;
    for (int k = lc->param_first; k < lc->param_first + lc->n_params; k++)
        if (net->params[k].role == VD_ROLE_BIAS && vd_param_trained(&net->params[k])) return c;
    return -1;
}

/* vd_op_bn_folded's rule; uses: every layer's number of reads by the layers
 * after it (vd_op_bn_folds), NULL: b's counted here. */
static int bn_folded_rule(const vd_net *net, int a, const int *uses) {
    const vd_layer *l = &net->layers[a];
    if (l->op != VD_OP_ADD) return -1;
    for (int k = 0; k < l->n_in; k++) {   /* inputs in order: the first such batch norm */
        int b = l->in[k];
        if (b < 0 || net->layers[b].op != VD_OP_BATCHNORM || net->layers[b].n_in != 1 ||
            net->layers[b].in[0] < 0)
            continue;
        bool dup = false;   /* (b's input is not also an input of a) */
        for (int q = 0; q < l->n_in; q++) dup |= l->in[q] == net->layers[b].in[0];
        if (dup) continue;
        int n = 0;   /* b's consumers: a alone, once */
        if (uses) n = uses[b];
        else
            for (int j = b + 1; j < net->n_layers && n < 2; j++)
                for (int q = 0; q < net->layers[j].n_in; q++) n += net->layers[j].in[q] == b;
        if (n == 1) return b;
    }
    return -1;
}

int vd_op_bn_folded(const vd_net *net, int a) { return bn_folded_rule(net, a, NULL); }

int vd_op_bn_folds(const vd_net *net, int *folded, vd_err *e) {
    int L = net->n_layers;
    int *uses = vd_calloc((size_t)L, sizeof *uses, e);
    if (!uses) return VD_ENOMEM;
    for (int j = 0; j < L; j++)
        for (int q = 0; q < net->layers[j].n_in; q++)
            if (net->layers[j].in[q] >= 0) uses[net->layers[j].in[q]]++;
    for (int a = 0; a < L; a++) folded[a] = bn_folded_rule(net, a, uses);
    vd_free(uses);
    return VD_OK;
}

int vd_op_bn_folder(const vd_net *net, int b) {
    if (net->layers[b].op != VD_OP_BATCHNORM) return -1;
    for (int a = b + 1; a < net->n_layers; a++)
        for (int q = 0; q < net->layers[a].n_in; q++)
            if (net->layers[a].in[q] == b) return vd_op_bn_folded(net, a) == b ? a : -1;
    return -1;
}

int vd_op_pool_relu(const vd_net *net, int p) {
    const vd_layer *l = &net->layers[p];
    if (l->op != VD_OP_POOL || l->u.pool.mode != VD_POOL_MAX || l->no_grad || l->n_in != 1)
        return -1;
    int r = l->in[0];
    if (r < 0) return -1;
    const vd_layer *lr = &net->layers[r];
    if (lr->op != VD_OP_RELU || !lr->inplace || lr->no_grad || lr->n_in != 1 || lr->in[0] < 0 ||
        net->layers[lr->in[0]].no_grad)
        return -1;
    /* (a batch norm's ReLU is its producer's: ResNet's stem pool reads it) */
    if (vd_op_relu_taker(net, r) >= 0) return -1;
    for (int j = r + 1; j < net->n_layers; j++)   /* p reads r's output alone */
        for (int k = 0; k < net->layers[j].n_in; k++)
            if (net->layers[j].in[k] == r && j != p) return -1;
    return r;
}

int vd_op_add_relu(const vd_net *net, int b) {
    int a = b + 1, r = b + 2;
    if (r >= net->n_layers || net->layers[b].op != VD_OP_BATCHNORM || net->layers[b].no_grad)
        return -1;
    const vd_layer *la = &net->layers[a], *lr = &net->layers[r];
    if (la->op != VD_OP_ADD || lr->op != VD_OP_RELU || !lr->inplace || lr->no_grad ||
        lr->n_in != 1 || lr->in[0] != a)
        return -1;
    int n = 0;   /* (b once among a's inputs: its gradient is then a's dy) */
    for (int k = 0; k < la->n_in; k++) n += la->in[k] == b;
    if (n != 1) return -1;
    /* (a max pool after the ReLU takes it, masking what it writes anyway:
     * the ReLU's one reader, so its first) */
    for (int j = r + 1; j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j].n_in; k++)
            if (net->layers[j].in[k] == r) return vd_op_pool_relu(net, j) == r ? -1 : r;
    return r;
}

void vd_op_bwd_reads(const vd_net *net, int layer, bool *x, bool *y) {
    const vd_layer *l = &net->layers[layer];
    if (l->no_grad) { *x = *y = false; return; }
    vd_op_bwd_reads_unfrozen(net, layer, x, y);
    if (!vd_op_table[l->op].bwd_x_for_weight) return;
    for (int k = l->param_first; k < l->param_first + l->n_params; k++)
        if (net->params[k].role == VD_ROLE_WEIGHT && net->params[k].frozen) *x = false;
}
