/* summary.c — per-layer table / JSON of a finalized net. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "spec/summary.h"
#include "util/json.h"

/* "25,557,032" */
static const char *fmt_count(uint64_t v, char *buf, size_t n) {
    char tmp[32];
    _Static_assert(sizeof tmp > 20, "any uint64 fits: never truncated");
    int len = snprintf(tmp, sizeof tmp, "%" PRIu64, v);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

/* "3.78 G" (decimal prefixes, FLOPs) */
static const char *fmt_flops(double v, char *buf, size_t n) {
    static const char *const unit[] = {"", "K", "M", "G", "T", "P", "E"};
    int u = 0;
    while (v >= 1000.0 && u < 6) { v /= 1000.0; u++; }
    if (u == 0) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%.2f %s", v, unit[u]);
    return buf;
}

typedef struct row {
    uint64_t params;          /* trainable scalars */
    uint64_t bytes;           /* output activation at the batch */
    double flops;             /* forward, at the batch */
} row;

/* FLOPs as a whole number (an integer in JSON while it fits one). */
static json_t *flops_json(double v) {
    return v >= 0 && v < 9.2e18 ? json_integer((json_int_t)llround(v)) : vd_json_real(v);
}

/* The summary as JSON (the table's columns per layer, totals first). */
static int write_json(FILE *f, const vd_net *net, int batch, const row *rows, uint64_t tot_params,
                      uint64_t tot_buffers, double tot_flops, uint64_t tot_bytes, vd_err *e) {
    bool ok = true;
    json_t *layers = json_array();
    json_t *r = json_pack("{s:o, s:i, s:o, s:o, s:o, s:o, s:o, s:[i,i,i,i], s:o}",
                          "net", vd_json_text(net->name), "batch", batch,
                          "params", vd_json_uint(tot_params), "param_bytes", vd_json_uint(tot_params * 4),
                          "buffers", vd_json_uint(tot_buffers), "flops", flops_json(tot_flops),
                          "activation_bytes", vd_json_uint(tot_bytes),
                          "input", batch, net->in_c, net->in_h, net->in_w, "layers", layers);
    if (!r) return vd_errf(e, VD_ENOMEM, "summary: out of memory");
    for (int i = 0; ok && i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        json_t *in = json_array();
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k];
            vd_json_push(in, vd_json_text(src >= 0 && src < net->n_layers ? net->layers[src].name
                                                                         : "input"), &ok);
        }
        vd_json_push(layers,
                     json_pack("{s:o, s:o, s:o, s:[i,i,i,i], s:o, s:o, s:o}",
                               "name", vd_json_text(l->name), "type", vd_json_text(vd_op_table[l->op].name),
                               "inputs", in, "shape", batch, l->c, l->h, l->w,
                               "params", vd_json_uint(rows[i].params), "bytes", vd_json_uint(rows[i].bytes),
                               "flops", flops_json(rows[i].flops)), &ok);
    }
    int rc = ok ? vd_json_write(f, r, e) : vd_errf(e, VD_ENOMEM, "summary: out of memory");
    json_decref(r);
    return rc;
}

int vd_summary_write(FILE *f, const vd_net *net, int batch, bool json, vd_err *e) {
    if (batch <= 0) return vd_errf(e, VD_EUSAGE, "summary: batch must be positive, got %d", batch);
    if (net->n_layers <= 0 || !net->layers)
        return vd_errf(e, VD_EINTERNAL, "summary: the net has no layers (not finalized?)");
    for (int i = 0; i < net->n_layers; i++)
        if (net->layers[i].c <= 0 || net->layers[i].h <= 0 || net->layers[i].w <= 0)
            return vd_errf(e, VD_EINTERNAL, "summary: layer '%s' has no shape (net not finalized?)",
                           net->layers[i].name);
    row *rows = vd_calloc((size_t)net->n_layers, sizeof *rows, e);
    if (!rows) return VD_ENOMEM;
    uint64_t tot_params = 0, tot_buffers = 0, tot_bytes = 0;
    double tot_flops = 0;
    for (int p = 0; p < net->n_params; p++) {
        const vd_param *pp = &net->params[p];
        if (pp->kind == VD_PARAM_WEIGHT) {
            if (pp->layer >= 0 && pp->layer < net->n_layers) rows[pp->layer].params += (uint64_t)pp->numel;
            tot_params += (uint64_t)pp->numel;
        } else {
            tot_buffers += (uint64_t)pp->numel;
        }
    }
    for (int i = 0; i < net->n_layers; i++) {
        uint64_t b;
        if (!vd_mul_u64((uint64_t)vd_net_out_numel(net, i), (uint64_t)batch, &b) || !vd_mul_u64(b, 4, &b) ||
            !vd_add_u64(tot_bytes, b, &tot_bytes)) {
            vd_free(rows);
            return vd_errf(e, VD_EUSAGE, "summary: activation bytes at batch %d overflow 64 bits", batch);
        }
        rows[i].bytes = b;
        rows[i].flops = vd_net_layer_flops(net, i) * batch;
        tot_flops += rows[i].flops;
    }
    uint64_t param_bytes = tot_params * 4;

    if (json) {
        int rc = write_json(f, net, batch, rows, tot_params, tot_buffers, tot_flops, tot_bytes, e);
        if (rc) { vd_free(rows); return rc; }
    } else {
        int nw = 4;
        for (int i = 0; i < net->n_layers; i++) {
            int len = (int)strlen(net->layers[i].name);
            if (len > nw) nw = len;
        }
        if (nw > 48) nw = 48;
        char b1[32], b2[32], b3[32], shape[64];
        fprintf(f, "net %s, batch %d, input %dx%dx%dx%d, %d layers\n\n", net->name, batch, batch, net->in_c,
                net->in_h, net->in_w, net->n_layers);
        fprintf(f, "%5s  %-*s  %-21s  %-20s  %13s  %11s  %12s\n", "#", nw, "name", "type", "output", "params",
                "FLOPs", "activations");
        for (int i = 0; i < net->n_layers; i++) {
            const vd_layer *l = &net->layers[i];
            _Static_assert(sizeof shape > 4 * 11 + 3, "four ints and three x fit: never truncated");
            snprintf(shape, sizeof shape, "%dx%dx%dx%d", batch, l->c, l->h, l->w);
            fprintf(f, "%5d  %-*s  %-21s  %-20s  %13s  %11s  %12s\n", i, nw, l->name, vd_op_table[l->op].name,
                    shape, fmt_count(rows[i].params, b1, sizeof b1), fmt_flops(rows[i].flops, b2, sizeof b2),
                    vd_fmt_bytes(rows[i].bytes, b3, sizeof b3));
        }
        fprintf(f, "\ntrainable parameters: %s (%s)\n", fmt_count(tot_params, b1, sizeof b1),
                vd_fmt_bytes(param_bytes, b2, sizeof b2));
        fprintf(f, "buffers (batch norm running stats): %s\n", fmt_count(tot_buffers, b1, sizeof b1));
        fprintf(f, "forward FLOPs at batch %d: %s (%sFLOP per sample)\n", batch,
                fmt_flops(tot_flops, b1, sizeof b1), fmt_flops(tot_flops / batch, b2, sizeof b2));
        fprintf(f, "layer outputs at batch %d: %s (sum of every layer's output activation)\n", batch,
                vd_fmt_bytes(tot_bytes, b1, sizeof b1));
    }
    vd_free(rows);
    if (fflush(f) != 0 || ferror(f)) return vd_errf(e, VD_EIO, "summary: write failed");
    return VD_OK;
}
