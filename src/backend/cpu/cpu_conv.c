/* cpu_conv.c — convolution, PyTorch semantics (stride, pad, dilation, groups,
 * optional bias). Weight [out, in/groups, kh, kw], NCHW fp32.
 *
 * Two algorithms (vd_op_io.algo; both deterministic, not bit-identical to
 * each other because they sum in different orders):
 *   VD_CPU_CONV_IM2COL (0, "im2col"): per sample, unfold the input into a
 *       column buffer col[C*kh*kw][OH*OW] and multiply by the weight with
 *       vd_cpu_gemm (OpenBLAS when available). Workspace: exactly one
 *       sample's column buffer, C*kh*kw*OH*OW*4 bytes (all groups; the same
 *       buffer serves forward, backward-filter and backward-data in turn).
 *   VD_CPU_CONV_DIRECT (1, "direct"): nested loops straight over x, w, y.
 *       Workspace 0. Several times slower (LeNet training, one core:
 *       ~320 images/s against ~2000 for im2col with OpenBLAS).
 * Sum orders: direct forward starts from the bias and adds (ic, ki, kj) in
 * order; im2col forward is the gemm's order, bias added last. dw and db are
 * summed over the batch in sample order, overwritten (dw_beta 0) or added to
 * (1: both algorithms add each sample's dw to what dw holds, exactly as
 * they add a sample to the samples before it; db is added as the float of
 * its double sum); dx honours dx_beta. */
#include <string.h>
#include "backend/cpu/cpu_internal.h"

typedef struct conv_geom {
    int N, C, H, W;        /* input  [N, C, H, W] */
    int OC, OH, OW;        /* output [N, OC, OH, OW] */
    int kh, kw, sh, sw, ph, pw, dh, dw, G;
    int Cg, OCg;           /* channels per group: C/G, OC/G */
    int64_t kk;            /* kh*kw */
    int64_t ohw, hw;       /* OH*OW, H*W */
} conv_geom;

static conv_geom geom(const vd_net *net, int layer, int n) {
    const vd_layer *l = &net->layers[layer];
    vd_cpu_shape in = vd_cpu_in_shape(net, layer, 0);
    conv_geom g = {
        .N = n, .C = in.c, .H = in.h, .W = in.w, .OC = l->c, .OH = l->h, .OW = l->w,
        .kh = l->u.conv.kh, .kw = l->u.conv.kw, .sh = l->u.conv.sh, .sw = l->u.conv.sw,
        .ph = l->u.conv.ph, .pw = l->u.conv.pw,
        .dh = l->u.conv.dh > 0 ? l->u.conv.dh : 1, .dw = l->u.conv.dw > 0 ? l->u.conv.dw : 1,
        .G = l->u.conv.groups > 0 ? l->u.conv.groups : 1,
    };
    g.Cg = g.C / g.G;
    g.OCg = g.OC / g.G;
    g.kk = (int64_t)g.kh * g.kw;
    g.ohw = (int64_t)g.OH * g.OW;
    g.hw = (int64_t)g.H * g.W;
    return g;
}

uint64_t vd_cpu_conv_ws_bytes(const vd_net *net, int layer, int algo) {
    if (algo != VD_CPU_CONV_IM2COL) return 0;
    conv_geom g = geom(net, layer, 1);
    return (uint64_t)g.C * (uint64_t)g.kk * (uint64_t)g.ohw * sizeof(float);
}

/* Output columns [lo, hi) whose input column ow*s - p + off lies in [0, W). */
static void valid_range(int W, int OW, int s, int p, int off, int *lo, int *hi) {
    int64_t t = (int64_t)p - off;
    int64_t a = t <= 0 ? 0 : (t + s - 1) / s;
    int64_t t2 = (int64_t)W - 1 + p - off;
    int64_t b = t2 < 0 ? 0 : t2 / s + 1;
    if (a > OW) a = OW;
    if (b > OW) b = OW;
    if (b < a) b = a;
    *lo = (int)a;
    *hi = (int)b;
}

/* The helpers below work in blocks of 8 with a fixed-length inner loop so
 * that GCC's -O2 (which only vectorizes loops that need no epilogue) turns
 * them into vector code; the arithmetic per element is unchanged. */

/* y[i] += a * x[i*s], i < n. */
static inline void axpy_strided(float *restrict y, float a, const float *restrict x, int n, int s) {
    int i = 0;
    if (s == 1)
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) y[i + l] += a * x[i + l];
    for (; i < n; i++) y[i] += a * x[(int64_t)i * s];
}

/* y[i*s] += a * x[i], i < n. */
static inline void axpy_scatter(float *restrict y, int s, float a, const float *restrict x, int n) {
    int i = 0;
    if (s == 1)
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) y[i + l] += a * x[i + l];
    for (; i < n; i++) y[(int64_t)i * s] += a * x[i];
}

/* acc[l] += a[i] * b[i*s] for the blocks of 8 (i = 8j + l); the remainder
 * is added to *tail in order. Callers keep acc across rows and reduce once,
 * so the sum order is fixed. */
static inline void dot_acc(float acc[8], float *tail, const float *restrict a,
                           const float *restrict b, int n, int s) {
    int i = 0;
    if (s == 1)
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
    else
        for (; i + 8 <= n; i += 8)
            for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[(int64_t)(i + l) * s];
    float t = *tail;
    for (; i < n; i++) t += a[i] * b[(int64_t)i * s];
    *tail = t;
}

static inline float reduce8(const float acc[8], float tail) {
    return (((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))) + tail;
}

/* ------------------------------------------------------------------ im2col */

/* col[(c*kh + ki)*kw + kj][oh*OW + ow] = x[c][oh*sh-ph+ki*dh][ow*sw-pw+kj*dw] or 0. */
static void im2col(const conv_geom *g, const float *x, float *col) {
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                float *row = col + ((int64_t)(c * g->kh + ki) * g->kw + kj) * g->ohw;
                int lo, hi;
                valid_range(g->W, g->OW, g->sw, g->pw, kj * g->dw, &lo, &hi);
                for (int oh = 0; oh < g->OH; oh++) {
                    float *r = row + (int64_t)oh * g->OW;
                    int ih = oh * g->sh - g->ph + ki * g->dh;
                    if (ih < 0 || ih >= g->H) {
                        memset(r, 0, (size_t)g->OW * sizeof *r);
                        continue;
                    }
                    /* index of input column 0 of this row, may be negative */
                    int64_t xo = (int64_t)c * g->hw + (int64_t)ih * g->W - g->pw + kj * g->dw;
                    for (int ow = 0; ow < lo; ow++) r[ow] = 0;
                    if (g->sw == 1 && hi > lo)
                        memcpy(r + lo, x + xo + lo, (size_t)(hi - lo) * sizeof *r);
                    else
                        for (int ow = lo; ow < hi; ow++) r[ow] = x[xo + (int64_t)ow * g->sw];
                    for (int ow = hi; ow < g->OW; ow++) r[ow] = 0;
                }
            }
}

/* dx[c][ih][iw] += col[...] for every column entry that maps inside x. */
static void col2im_add(const conv_geom *g, const float *col, float *dx) {
    for (int c = 0; c < g->C; c++)
        for (int ki = 0; ki < g->kh; ki++)
            for (int kj = 0; kj < g->kw; kj++) {
                const float *row = col + ((int64_t)(c * g->kh + ki) * g->kw + kj) * g->ohw;
                int lo, hi;
                valid_range(g->W, g->OW, g->sw, g->pw, kj * g->dw, &lo, &hi);
                for (int oh = 0; oh < g->OH; oh++) {
                    int ih = oh * g->sh - g->ph + ki * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    const float *r = row + (int64_t)oh * g->OW;
                    int64_t xo = (int64_t)c * g->hw + (int64_t)ih * g->W - g->pw + kj * g->dw;
                    if (hi > lo) axpy_scatter(dx + xo + (int64_t)lo * g->sw, g->sw, 1.0f, r + lo, hi - lo);
                }
            }
}

static void add_bias(const conv_geom *g, const float *b, float *y) {
    for (int n = 0; n < g->N; n++)
        for (int oc = 0; oc < g->OC; oc++) {
            float *yp = y + ((int64_t)n * g->OC + oc) * g->ohw;
            for (int64_t i = 0; i < g->ohw; i++) yp[i] += b[oc];
        }
}

static void fwd_im2col(const conv_geom *g, const vd_op_io *io, float *col) {
    int64_t ckk = (int64_t)g->Cg * g->kk;
    for (int n = 0; n < g->N; n++) {
        im2col(g, io->x[0] + (int64_t)n * g->C * g->hw, col);
        for (int gr = 0; gr < g->G; gr++)
            vd_cpu_gemm(false, false, g->OCg, g->ohw, ckk,
                        io->w + (int64_t)gr * g->OCg * ckk, ckk,
                        col + (int64_t)gr * ckk * g->ohw, g->ohw, 0,
                        io->y + ((int64_t)n * g->OC + (int64_t)gr * g->OCg) * g->ohw, g->ohw);
    }
    if (io->b) add_bias(g, io->b, io->y);
}

static void bwd_im2col(const conv_geom *g, const vd_op_io *io, float *col) {
    int64_t ckk = (int64_t)g->Cg * g->kk;
    bool acc = io->dw_beta != 0.0f;   /* the first sample adds too */
    if (io->dw)
        for (int n = 0; n < g->N; n++) {
            im2col(g, io->x[0] + (int64_t)n * g->C * g->hw, col);
            for (int gr = 0; gr < g->G; gr++)
                vd_cpu_gemm(false, true, g->OCg, ckk, g->ohw,
                            io->dy + ((int64_t)n * g->OC + (int64_t)gr * g->OCg) * g->ohw, g->ohw,
                            col + (int64_t)gr * ckk * g->ohw, g->ohw, n > 0 || acc,
                            io->dw + (int64_t)gr * g->OCg * ckk, ckk);
        }
    if (io->dx[0])
        for (int n = 0; n < g->N; n++) {
            for (int gr = 0; gr < g->G; gr++)
                vd_cpu_gemm(true, false, ckk, g->ohw, g->OCg,
                            io->w + (int64_t)gr * g->OCg * ckk, ckk,
                            io->dy + ((int64_t)n * g->OC + (int64_t)gr * g->OCg) * g->ohw, g->ohw, 0,
                            col + (int64_t)gr * ckk * g->ohw, g->ohw);
            float *dxn = io->dx[0] + (int64_t)n * g->C * g->hw;
            if (io->dx_beta[0] == 0.0f) memset(dxn, 0, (size_t)(g->C * g->hw) * sizeof *dxn);
            col2im_add(g, col, dxn);
        }
}

/* ------------------------------------------------------------------ direct */

static void fwd_direct(const conv_geom *g, const vd_op_io *io) {
    for (int n = 0; n < g->N; n++)
        for (int oc = 0; oc < g->OC; oc++) {
            int gr = oc / g->OCg;
            float *yp = io->y + ((int64_t)n * g->OC + oc) * g->ohw;
            float b0 = io->b ? io->b[oc] : 0.0f;
            for (int64_t i = 0; i < g->ohw; i++) yp[i] = b0;
            for (int icg = 0; icg < g->Cg; icg++) {
                const float *xp = io->x[0] + ((int64_t)n * g->C + (int64_t)gr * g->Cg + icg) * g->hw;
                const float *wp = io->w + ((int64_t)oc * g->Cg + icg) * g->kk;
                for (int ki = 0; ki < g->kh; ki++)
                    for (int kj = 0; kj < g->kw; kj++) {
                        float wv = wp[ki * g->kw + kj];
                        int lo, hi;
                        valid_range(g->W, g->OW, g->sw, g->pw, kj * g->dw, &lo, &hi);
                        for (int oh = 0; oh < g->OH; oh++) {
                            int ih = oh * g->sh - g->ph + ki * g->dh;
                            if (ih < 0 || ih >= g->H) continue;
                            int64_t xo = (int64_t)ih * g->W - g->pw + kj * g->dw;
                            float *yr = yp + (int64_t)oh * g->OW;
                            if (hi > lo) axpy_strided(yr + lo, wv, xp + xo + (int64_t)lo * g->sw, hi - lo, g->sw);
                        }
                    }
            }
        }
}

static void bwd_direct(const conv_geom *g, const vd_op_io *io) {
    if (io->dw) {
        if (io->dw_beta == 0.0f)
            memset(io->dw, 0, (size_t)((int64_t)g->OC * g->Cg * g->kk) * sizeof(float));
        for (int n = 0; n < g->N; n++)
            for (int oc = 0; oc < g->OC; oc++) {
                int gr = oc / g->OCg;
                const float *dyp = io->dy + ((int64_t)n * g->OC + oc) * g->ohw;
                for (int icg = 0; icg < g->Cg; icg++) {
                    const float *xp = io->x[0] + ((int64_t)n * g->C + (int64_t)gr * g->Cg + icg) * g->hw;
                    float *dwp = io->dw + ((int64_t)oc * g->Cg + icg) * g->kk;
                    for (int ki = 0; ki < g->kh; ki++)
                        for (int kj = 0; kj < g->kw; kj++) {
                            int lo, hi;
                            valid_range(g->W, g->OW, g->sw, g->pw, kj * g->dw, &lo, &hi);
                            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, tail = 0.0f;
                            for (int oh = 0; oh < g->OH; oh++) {
                                int ih = oh * g->sh - g->ph + ki * g->dh;
                                if (ih < 0 || ih >= g->H) continue;
                                int64_t xo = (int64_t)ih * g->W - g->pw + kj * g->dw;
                                const float *dyr = dyp + (int64_t)oh * g->OW;
                                if (hi > lo) dot_acc(acc, &tail, dyr + lo, xp + xo + (int64_t)lo * g->sw, hi - lo, g->sw);
                            }
                            dwp[ki * g->kw + kj] += reduce8(acc, tail);
                        }
                }
            }
    }
    if (io->dx[0]) {
        float *dx = io->dx[0];
        if (io->dx_beta[0] == 0.0f)
            memset(dx, 0, (size_t)((int64_t)g->N * g->C * g->hw) * sizeof *dx);
        for (int n = 0; n < g->N; n++)
            for (int oc = 0; oc < g->OC; oc++) {
                int gr = oc / g->OCg;
                const float *dyp = io->dy + ((int64_t)n * g->OC + oc) * g->ohw;
                for (int icg = 0; icg < g->Cg; icg++) {
                    float *dxp = dx + ((int64_t)n * g->C + (int64_t)gr * g->Cg + icg) * g->hw;
                    const float *wp = io->w + ((int64_t)oc * g->Cg + icg) * g->kk;
                    for (int ki = 0; ki < g->kh; ki++)
                        for (int kj = 0; kj < g->kw; kj++) {
                            float wv = wp[ki * g->kw + kj];
                            int lo, hi;
                            valid_range(g->W, g->OW, g->sw, g->pw, kj * g->dw, &lo, &hi);
                            for (int oh = 0; oh < g->OH; oh++) {
                                int ih = oh * g->sh - g->ph + ki * g->dh;
                                if (ih < 0 || ih >= g->H) continue;
                                int64_t xo = (int64_t)ih * g->W - g->pw + kj * g->dw;
                                const float *dyr = dyp + (int64_t)oh * g->OW;
                                if (hi > lo) axpy_scatter(dxp + xo + (int64_t)lo * g->sw, g->sw, wv, dyr + lo, hi - lo);
                            }
                        }
                }
            }
    }
}

/* ------------------------------------------------------------------ entry */

void vd_cpu_bias_grad(const float *d, int64_t n, int64_t c, int64_t hw, float beta, float *db) {
    for (int64_t oc = 0; oc < c; oc++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++) {
            const float *p = d + (k * c + oc) * hw;
            for (int64_t i = 0; i < hw; i++) s += p[i];
        }
        vd_cpu_put(&db[oc], beta, (float)s);
    }
}

static int check_ws(const vd_net *net, int layer, const vd_op_io *io, vd_err *e) {
    if (io->algo != VD_CPU_CONV_IM2COL && io->algo != VD_CPU_CONV_DIRECT)
        return vd_errf(e, VD_EINTERNAL, "layer '%s': conv algorithm %d does not exist (cpu has 0..%d)",
                       net->layers[layer].name, io->algo, VD_CPU_CONV_N_ALGOS - 1);
    uint64_t need = vd_cpu_conv_ws_bytes(net, layer, io->algo);
    if (need && (!io->ws || io->ws_bytes < need))
        return vd_errf(e, VD_EINTERNAL,
                       "layer '%s': conv im2col needs %llu bytes of workspace, got %llu",
                       net->layers[layer].name, (unsigned long long)need,
                       (unsigned long long)(io->ws ? io->ws_bytes : 0));
    return VD_OK;
}

int vd_cpu_conv_forward(const vd_net *net, int layer, const vd_op_io *io, double *scratch,
                        vd_err *e) {
    int rc = check_ws(net, layer, io, e);
    if (rc) return rc;
    conv_geom g = geom(net, layer, io->n);
    if (io->algo == VD_CPU_CONV_IM2COL) fwd_im2col(&g, io, io->ws);
    else fwd_direct(&g, io);
    return VD_OK;
}

int vd_cpu_conv_backward(const vd_net *net, int layer, const vd_op_io *io, double *scratch,
                        vd_err *e) {
    int rc = check_ws(net, layer, io, e);
    if (rc) return rc;
    conv_geom g = geom(net, layer, io->n);
    if (io->db) vd_cpu_bias_grad(io->dy, g.N, g.OC, g.ohw, io->dw_beta, io->db);
    if (io->algo == VD_CPU_CONV_IM2COL) bwd_im2col(&g, io, io->ws);
    else bwd_direct(&g, io);
    return VD_OK;
}
