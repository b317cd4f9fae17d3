/* profile.c — per-layer timings and workspaces: analytic model, JSON
 * load/save. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile/profile.h"
#include "train/json_mini.h"

/* H200 (SXM, 141 GB HBM3e): fp32 without tensor cores ~67 TFLOP/s peak; we
 * take 60e12 as the sustained rate of cuDNN fp32 convolutions (Winograd/FFT
 * algorithms beat direct-convolution FLOP counts, so this is an "effective"
 * rate). HBM 4.8 TB/s. PCIe 5 x16 pinned copies ~55 GB/s per direction,
 * ~99 GB/s both directions at once. */
const vd_device_params vd_device_h200 = {
    .name = "h200", .peak_flops = 60e12, .mem_bw = 4.8e12,
    .d2h_bw = 55e9, .h2d_bw = 55e9, .both_bw = 99e9, .launch_s = 5e-6,
    .mem_bytes = (uint64_t)140 << 30,
};

/* Two CPU cores with plain C loops / OpenBLAS: ~20 GFLOP/s sustained, ~10
 * GB/s memory bandwidth; "copies" are memcpy at the same bandwidth. */
const vd_device_params vd_device_cpu = {
    .name = "cpu", .peak_flops = 20e9, .mem_bw = 10e9,
    .d2h_bw = 10e9, .h2d_bw = 10e9, .both_bw = 12e9, .launch_s = 1e-6,
    .mem_bytes = 0,
};

const vd_device_params *vd_device_find(const char *name) {
    if (strcmp(name, "h200") == 0) return &vd_device_h200;
    if (strcmp(name, "cpu") == 0) return &vd_device_cpu;
    return NULL;
}

static uint64_t vdp_default_aux_bytes(const vd_net *net, int i, int batch) {
    return vd_op_aux_bytes(net, i, batch);
}

void vd_profile_free(vd_profile *p) {
    if (!p) return;
    free(p->layers);
    memset(p, 0, sizeof *p);
}

static int in_channels(const vd_net *net, int src) {
    return src < 0 ? net->in_c : net->layers[src].c;
}

/* Bytes a layer's forward touches: inputs, output, parameters. */
static double layer_bytes(const vd_net *net, int i, int batch) {
    const vd_layer *l = &net->layers[i];
    double b = 0;
    for (int k = 0; k < l->n_in; k++) b += (double)vd_net_out_numel(net, l->in[k]);
    b += (double)vd_net_out_numel(net, i);
    b *= (double)batch * 4.0;
    for (int k = 0; k < l->n_params; k++) b += (double)net->params[l->param_first + k].numel * 4.0;
    return b;
}

static double secs(const vd_device_params *d, double flops, double bytes) {
    double a = flops / d->peak_flops, b = bytes / d->mem_bw;
    return d->launch_s + (a > b ? a : b);
}

/* im2col bytes of conv layer i for `samples` samples. */
static uint64_t im2col_bytes(const vd_net *net, int i, int samples) {
    const vd_layer *l = &net->layers[i];
    uint64_t cin = (uint64_t)in_channels(net, l->in[0]);
    return cin * (uint64_t)l->u.conv.kh * (uint64_t)l->u.conv.kw * (uint64_t)l->h *
           (uint64_t)l->w * (uint64_t)samples * 4u;
}

static int profile_alloc(const vd_net *net, int batch, const vd_device_params *dev,
                         const char *source, vd_profile *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    if (batch <= 0) return vd_errf(e, VD_EUSAGE, "profile: batch must be positive");
    out->layers = vd_calloc((size_t)(net->n_layers ? net->n_layers : 1), sizeof *out->layers, e);
    if (!out->layers) return VD_ENOMEM;
    out->n_layers = net->n_layers;
    out->batch = batch;
    out->dev = *dev;
    snprintf(out->source, sizeof out->source, "%s", source);
    snprintf(out->net, sizeof out->net, "%s", net->name);
    return VD_OK;
}

static void analytic_sgd(const vd_net *net, const vd_device_params *dev, vd_profile *out) {
    /* read p, g, m; write p, m: 5 float accesses per trainable scalar, one
     * launch per contiguous trainable range */
    int ranges = 0;
    for (int k = 0; k < net->n_params; k++)
        if (net->params[k].kind == VD_PARAM_WEIGHT &&
            (k == 0 || net->params[k - 1].kind != VD_PARAM_WEIGHT)) ranges++;
    out->sgd_s = dev->launch_s * ranges + (double)net->n_trainable * 20.0 / dev->mem_bw;
}

int vd_profile_analytic(const vd_net *net, int batch, const vd_device_params *dev,
                        vd_profile *out, vd_err *e) {
    char src[32];
    snprintf(src, sizeof src, "analytic:%s", dev->name);
    int rc = profile_alloc(net, batch, dev, src, out, e);
    if (rc) return rc;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        vd_profile_layer *pl = &out->layers[i];
        snprintf(pl->name, sizeof pl->name, "%s", l->name);
        pl->aux_bytes = vdp_default_aux_bytes(net, i, batch);
        double flops = vd_net_layer_flops(net, i) * (double)batch;
        double bytes = layer_bytes(net, i, batch);
        double f = secs(dev, flops, bytes);
        double b;
        if (l->op == VD_OP_CONV || l->op == VD_OP_FC)
            b = 2.0 * dev->launch_s + (secs(dev, 2.0 * flops, 2.0 * bytes) - dev->launch_s);
        else
            b = secs(dev, flops, 1.5 * bytes);
        vd_profile_algo *a = &pl->algos[0];
        snprintf(a->label, sizeof a->label, "%s", l->op == VD_OP_CONV ? "fastest" : "default");
        a->fwd_s = f;
        a->bwd_s = b;
        a->fwd_algo = a->bwd_data_algo = a->bwd_filter_algo = -1;
        pl->n_algos = 1;
        if (l->op == VD_OP_CONV) {
            a->workspace = im2col_bytes(net, i, batch < 8 ? batch : 8);
            a->fwd_workspace = a->bwd_workspace = a->workspace;  /* im2col both ways */
            vd_profile_algo *m = &pl->algos[1];
            snprintf(m->label, sizeof m->label, "min-ws");
            m->fwd_s = 1.6 * f;
            m->bwd_s = 1.6 * b;
            m->workspace = 0;
            m->fwd_algo = m->bwd_data_algo = m->bwd_filter_algo = -1;
            pl->n_algos = 2;
        }
    }
    analytic_sgd(net, dev, out);
    return VD_OK;
}

uint64_t vd_profile_algo_ws(const vd_profile_algo *a, bool bwd) {
    uint64_t m = a->fwd_workspace > a->bwd_workspace ? a->fwd_workspace : a->bwd_workspace;
    if (m != a->workspace) return a->workspace;
    return bwd ? a->bwd_workspace : a->fwd_workspace;
}

/* ---- JSON --------------------------------------------------------------- */

int vd_profile_save(const char *path, const vd_profile *p, vd_err *e) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f) return vd_errf(e, VD_ENOMEM, "out of memory writing profile");
    fprintf(f, "{\n  \"format\": \"vdnn-profile\",\n  \"version\": 1,\n  \"source\": ");
    vd_json_str(f, p->source);
    fprintf(f, ",\n  \"net\": ");
    vd_json_str(f, p->net);
    fprintf(f, ",\n  \"batch\": %d,\n  \"device\": {\"name\": ", p->batch);
    vd_json_str(f, p->dev.name);
    fprintf(f, ", \"peak_flops\": %.17g, \"mem_bw\": %.17g, \"d2h_bw\": %.17g, \"h2d_bw\": %.17g, "
               "\"both_bw\": %.17g, \"launch_s\": %.17g, \"mem_bytes\": %llu},\n",
            p->dev.peak_flops, p->dev.mem_bw, p->dev.d2h_bw, p->dev.h2d_bw, p->dev.both_bw,
            p->dev.launch_s, (unsigned long long)p->dev.mem_bytes);
    fprintf(f, "  \"sgd_s\": %.17g,\n  \"layers\": [", p->sgd_s);
    for (int i = 0; i < p->n_layers; i++) {
        const vd_profile_layer *l = &p->layers[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        vd_json_str(f, l->name);
        fprintf(f, ", \"aux_bytes\": %llu, \"algos\": [", (unsigned long long)l->aux_bytes);
        for (int k = 0; k < l->n_algos; k++) {
            const vd_profile_algo *a = &l->algos[k];
            fprintf(f, "%s\n      {\"label\": ", k ? "," : "");
            vd_json_str(f, a->label);
            fprintf(f, ", \"fwd_s\": %.17g, \"bwd_s\": %.17g, \"workspace\": %llu, "
                       "\"fwd_workspace\": %llu, \"bwd_workspace\": %llu, "
                       "\"fwd_algo\": %d, \"bwd_data_algo\": %d, \"bwd_filter_algo\": %d}",
                    a->fwd_s, a->bwd_s, (unsigned long long)a->workspace,
                    (unsigned long long)vd_profile_algo_ws(a, false),
                    (unsigned long long)vd_profile_algo_ws(a, true), a->fwd_algo,
                    a->bwd_data_algo, a->bwd_filter_algo);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n  ]\n}\n");
    if (fclose(f) != 0) { free(buf); return vd_errf(e, VD_ENOMEM, "out of memory writing profile"); }
    int rc = vd_write_file_atomic(path, buf, n, e);
    free(buf);
    return rc;
}

static int num(const vj_val *o, const char *key, bool required, double *out, const char *path,
               const char *ctx, vd_err *e) {
    const vj_val *v = vj_get(o, key);
    if (!v) {
        if (!required) return VD_OK;
        return vd_errf(e, VD_EDATA, "%s: %s: missing number \"%s\"", path, ctx, key);
    }
    if (v->type != VJ_NUM)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" must be a number", path, ctx, key);
    errno = 0;
    char *end = NULL;
    double d = strtod(v->str, &end);
    if (errno || !end || *end || !isfinite(d) || d < 0)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %s is not a finite non-negative number",
                       path, ctx, key, v->str);
    *out = d;
    return VD_OK;
}

/* Bounds on loaded values, so that sums over a whole plan stay finite (no
 * "inf" in the JSON outputs) and sizes convert to uint64_t exactly and
 * cannot overflow the placement arithmetic: times (seconds) at most
 * VDP_MAX_S, sizes (bytes) whole numbers at most VDP_MAX_BYTES, copy
 * bandwidths (bytes/s) at least VDP_MIN_BW. */
#define VDP_MAX_S 1e6
#define VDP_MAX_BYTES ((double)((uint64_t)1 << 48))
#define VDP_MIN_BW 1.0

/* A number at most max (after num's checks). */
static int num_max(const vj_val *o, const char *key, bool required, double max, double *out,
                   const char *path, const char *ctx, vd_err *e) {
    double d = *out;
    int rc = num(o, key, required, &d, path, ctx, e);
    if (rc) return rc;
    if (d > max)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %g is too large (at most %g)", path, ctx,
                       key, d, max);
    *out = d;
    return VD_OK;
}

/* A byte count: a whole number in [0, VDP_MAX_BYTES]; *out keeps its value
 * when the key is absent and not required. */
static int bytes_val(const vj_val *o, const char *key, bool required, uint64_t *out,
                     const char *path, const char *ctx, vd_err *e) {
    double d = (double)*out;
    int rc = num_max(o, key, required, VDP_MAX_BYTES, &d, path, ctx, e);
    if (rc) return rc;
    if (d != floor(d))
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %g is not a whole number of bytes", path,
                       ctx, key, d);
    *out = (uint64_t)d;
    return VD_OK;
}

static int str(const vj_val *o, const char *key, char *out, size_t n, const char *path,
               const char *ctx, vd_err *e) {
    const vj_val *v = vj_get(o, key);
    if (!v || v->type != VJ_STR)
        return vd_errf(e, VD_EDATA, "%s: %s: missing string \"%s\"", path, ctx, key);
    if (strlen(v->str) >= n)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" is too long", path, ctx, key);
    snprintf(out, n, "%s", v->str);
    return VD_OK;
}

static int ival(const vj_val *o, const char *key, int *out, const char *path, const char *ctx,
                vd_err *e) {
    const vj_val *v = vj_get(o, key);
    if (!v) { *out = -1; return VD_OK; }
    if (v->type != VJ_NUM)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" must be an integer", path, ctx, key);
    char *end = NULL;
    errno = 0;
    long x = strtol(v->str, &end, 10);
    if (errno || !end || *end || x < -1 || x > 1000000)
        return vd_errf(e, VD_EDATA, "%s: %s: \"%s\" = %s is not an algorithm id", path, ctx, key, v->str);
    *out = (int)x;
    return VD_OK;
}

static int load_tree(const vj_val *root, const char *path, const vd_net *net, int batch,
                     vd_profile *out, vd_err *e) {
    if (root->type != VJ_OBJ) return vd_errf(e, VD_EDATA, "%s: profile must be a JSON object", path);
    char fmt[32];
    int rc = str(root, "format", fmt, sizeof fmt, path, "profile", e);
    if (rc) return rc;
    if (strcmp(fmt, "vdnn-profile") != 0)
        return vd_errf(e, VD_EDATA, "%s: \"format\" is \"%s\", expected \"vdnn-profile\"", path, fmt);
    double ver = 0, b = 0;
    if ((rc = num(root, "version", true, &ver, path, "profile", e))) return rc;
    if (ver != 1) return vd_errf(e, VD_EDATA, "%s: profile version %g is not supported (expected 1)", path, ver);
    if ((rc = num(root, "batch", true, &b, path, "profile", e))) return rc;
    if (b != (double)batch)
        return vd_errf(e, VD_EDATA, "%s: profile was made at batch %g, the plan is for batch %d; "
                       "re-profile at this batch", path, b, batch);
    vd_device_params dev = {0};
    const vj_val *d = vj_get(root, "device");
    if (!d || d->type != VJ_OBJ) return vd_errf(e, VD_EDATA, "%s: missing object \"device\"", path);
    if ((rc = str(d, "name", dev.name, sizeof dev.name, path, "device", e))) return rc;
    if ((rc = num(d, "peak_flops", false, &dev.peak_flops, path, "device", e)) ||
        (rc = num(d, "mem_bw", false, &dev.mem_bw, path, "device", e)) ||
        (rc = num(d, "d2h_bw", true, &dev.d2h_bw, path, "device", e)) ||
        (rc = num(d, "h2d_bw", true, &dev.h2d_bw, path, "device", e)) ||
        (rc = num(d, "both_bw", true, &dev.both_bw, path, "device", e)) ||
        (rc = num_max(d, "launch_s", false, VDP_MAX_S, &dev.launch_s, path, "device", e)) ||
        (rc = bytes_val(d, "mem_bytes", false, &dev.mem_bytes, path, "device", e)))
        return rc;
    /* both_bw 0: unknown (copies in both directions run at their own rates) */
    if (dev.d2h_bw < VDP_MIN_BW || dev.h2d_bw < VDP_MIN_BW ||
        (dev.both_bw != 0 && dev.both_bw < VDP_MIN_BW))
        return vd_errf(e, VD_EDATA, "%s: device bandwidths must be at least %g bytes/s", path,
                       VDP_MIN_BW);
    char source[32] = "";
    const vj_val *sv = vj_get(root, "source");
    if (sv && sv->type == VJ_STR) snprintf(source, sizeof source, "%s", sv->str);
    else snprintf(source, sizeof source, "file");
    rc = profile_alloc(net, batch, &dev, source, out, e);
    if (rc) return rc;
    if ((rc = num_max(root, "sgd_s", true, VDP_MAX_S, &out->sgd_s, path, "profile", e))) goto fail;
    const vj_val *ls = vj_get(root, "layers");
    if (!ls || ls->type != VJ_ARR) { rc = vd_errf(e, VD_EDATA, "%s: missing array \"layers\"", path); goto fail; }
    if (ls->n != net->n_layers) {
        rc = vd_errf(e, VD_EDATA, "%s: profile has %d layers, net '%s' has %d", path, ls->n,
                     net->name, net->n_layers);
        goto fail;
    }
    for (int i = 0; i < ls->n; i++) {
        const vj_val *lv = &ls->items[i];
        vd_profile_layer *pl = &out->layers[i];
        char ctx[160];
        snprintf(ctx, sizeof ctx, "layers[%d]", i);
        if (lv->type != VJ_OBJ) { rc = vd_errf(e, VD_EDATA, "%s: %s must be an object", path, ctx); goto fail; }
        if ((rc = str(lv, "name", pl->name, sizeof pl->name, path, ctx, e))) goto fail;
        if (strcmp(pl->name, net->layers[i].name) != 0) {
            rc = vd_errf(e, VD_EDATA, "%s: %s is '%s' but layer %d of net '%s' is '%s'", path, ctx,
                         pl->name, i, net->name, net->layers[i].name);
            goto fail;
        }
        pl->aux_bytes = vdp_default_aux_bytes(net, i, batch);
        if ((rc = bytes_val(lv, "aux_bytes", false, &pl->aux_bytes, path, ctx, e))) goto fail;
        const vj_val *as = vj_get(lv, "algos");
        if (!as || as->type != VJ_ARR || as->n < 1 || as->n > VD_PROFILE_MAX_ALGOS) {
            rc = vd_errf(e, VD_EDATA, "%s: %s: \"algos\" must be an array of 1 to %d options",
                         path, ctx, VD_PROFILE_MAX_ALGOS);
            goto fail;
        }
        pl->n_algos = as->n;
        for (int k = 0; k < as->n; k++) {
            const vj_val *av = &as->items[k];
            vd_profile_algo *a = &pl->algos[k];
            char c2[200];
            snprintf(c2, sizeof c2, "%s.algos[%d]", ctx, k);
            if (av->type != VJ_OBJ) { rc = vd_errf(e, VD_EDATA, "%s: %s must be an object", path, c2); goto fail; }
            a->workspace = 0;
            if ((rc = str(av, "label", a->label, sizeof a->label, path, c2, e)) ||
                (rc = num_max(av, "fwd_s", true, VDP_MAX_S, &a->fwd_s, path, c2, e)) ||
                (rc = num_max(av, "bwd_s", true, VDP_MAX_S, &a->bwd_s, path, c2, e)) ||
                (rc = bytes_val(av, "workspace", true, &a->workspace, path, c2, e)) ||
                (rc = ival(av, "fwd_algo", &a->fwd_algo, path, c2, e)) ||
                (rc = ival(av, "bwd_data_algo", &a->bwd_data_algo, path, c2, e)) ||
                (rc = ival(av, "bwd_filter_algo", &a->bwd_filter_algo, path, c2, e)))
                goto fail;
            /* per-pass workspaces: optional (older files: `workspace` for both) */
            a->fwd_workspace = a->bwd_workspace = a->workspace;
            if ((rc = bytes_val(av, "fwd_workspace", false, &a->fwd_workspace, path, c2, e)) ||
                (rc = bytes_val(av, "bwd_workspace", false, &a->bwd_workspace, path, c2, e)))
                goto fail;
            if ((a->fwd_workspace > a->bwd_workspace ? a->fwd_workspace : a->bwd_workspace) !=
                a->workspace) {
                rc = vd_errf(e, VD_EDATA, "%s: %s: \"workspace\" must be the larger of "
                             "\"fwd_workspace\" and \"bwd_workspace\"", path, c2);
                goto fail;
            }
        }
    }
    return VD_OK;
fail:
    vd_profile_free(out);
    return rc;
}

int vd_profile_load(const char *path, const vd_net *net, int batch, vd_profile *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t n = 0;
    int rc = vd_read_file(path, &text, &n, e);
    if (rc) return rc;
    vj_val *root = NULL;
    char jerr[256];
    if (vj_parse(text, n, &root, jerr, sizeof jerr) != 0) {
        free(text);
        return vd_errf(e, VD_EDATA, "%s: not valid JSON: %s", path, jerr);
    }
    free(text);
    rc = load_tree(root, path, net, batch, out, e);
    vj_free(root);
    return rc;
}
