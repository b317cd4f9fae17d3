/* cpu_ops.c — every op but conv, PyTorch semantics, plain loops.
 *
 * Conventions for all ops (see backend.h, vd_op_io):
 *   - forward writes y (and aux where the op has one);
 *   - backward writes dx[k] honouring dx_beta[k] (0: overwrite, ignoring old
 *     contents even if NaN; 1: add), and dw/db honouring dw_beta (the same);
 *   - a call may run a chunk of the batch (n0, n_batch: backend.h); io->n is
 *     the chunk's samples, and only dropout and the loss need to know where
 *     the chunk lies (batch norm only in its evaluation forward, which
 *     normalises each sample with the running statistics: cpu_run refuses
 *     the others);
 *   - a NULL dx[k] / dw / db means "not needed" and is skipped;
 *   - reductions that feed a single value (biases, BN statistics, the loss)
 *     are summed in double, in a fixed order. */
#include <math.h>
#include <string.h>
#include "backend/cpu/cpu_internal.h"

/* ------------------------------------------------------------------ shapes */

vd_cpu_shape vd_cpu_in_shape(const vd_net *net, int layer, int k) {
    int src = net->layers[layer].in[k];
    if (src < 0) return (vd_cpu_shape){net->in_c, net->in_h, net->in_w};
    const vd_layer *l = &net->layers[src];
    return (vd_cpu_shape){l->c, l->h, l->w};
}

int vd_cpu_check_shape(const vd_net *net, int layer, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    if ((unsigned)l->op >= VD_OP_COUNT)
        return vd_errf(e, VD_EINTERNAL, "layer '%s': unknown op %d", l->name, (int)l->op);
    const vd_op_info *info = &vd_op_table[l->op];
    if (l->n_in < info->min_inputs || l->n_in > info->max_inputs)
        return vd_errf(e, VD_EINTERNAL, "layer '%s': %d inputs", l->name, l->n_in);
    for (int k = 0; k < l->n_in; k++)
        if (l->in[k] < -1 || l->in[k] >= layer)
            return vd_errf(e, VD_EINTERNAL, "layer '%s': input %d is not an earlier layer", l->name, k);
    /* the shape the op table computes from the layer's fields and its
     * inputs' stored shapes (an op without infer keeps its input's) */
    vd_cpu_shape in = vd_cpu_in_shape(net, layer, 0);
    int64_t c = in.c, h = in.h, w = in.w;
    vd_err ie = { 0 };
    if (info->infer && info->infer(net, layer, &c, &h, &w, &ie))
        return vd_errf(e, VD_EINTERNAL, "cpu backend: %s", ie.msg);
    if (c != l->c || h != l->h || w != l->w || c <= 0 || h <= 0 || w <= 0)
        return vd_errf(e, VD_EINTERNAL,
                       "layer '%s': net says output %dx%dx%d, the op table computes %lldx%lldx%lld",
                       l->name, l->c, l->h, l->w, (long long)c, (long long)h, (long long)w);
    return VD_OK;
}

/* ------------------------------------------------------------------ pool */

static bool pool_adaptive(const vd_layer *l) {
    return l->u.pool.global || l->u.pool.out_h > 0 || l->u.pool.out_w > 0;
}

/* Window [*a, *b) of output index o along one axis, and its size for the
 * average's divisor. Adaptive (and global = adaptive 1): PyTorch's
 * floor(o*in/out) .. ceil((o+1)*in/out). Fixed: start o*s-p, end clipped to
 * in+p; the divisor counts padding (count_include_pad=True) but not the part
 * of a ceil_mode window beyond in+p; then both ends are clipped to [0, in). */
static inline void pool_window(bool adaptive, int in, int out, int k, int s, int p, int o,
                        int *a, int *b, int *size) {
    if (adaptive) {
        *a = (int)(((int64_t)o * in) / out);
        *b = (int)((((int64_t)o + 1) * in + out - 1) / out);
        *size = *b - *a;
        return;
    }
    int start = o * s - p;
    int end = start + k < in + p ? start + k : in + p;
    *size = end - start;
    *a = start < 0 ? 0 : start;
    *b = end > in ? in : end;
}

typedef struct pool_geom {
    bool adaptive, max;
    int C, H, W, OH, OW, kh, kw, sh, sw, ph, pw;
} pool_geom;

static pool_geom pgeom(const vd_net *net, int layer) {
    const vd_layer *l = &net->layers[layer];
    vd_cpu_shape in = vd_cpu_in_shape(net, layer, 0);
    return (pool_geom){.adaptive = pool_adaptive(l), .max = l->u.pool.mode == VD_POOL_MAX,
                       .C = in.c, .H = in.h, .W = in.w, .OH = l->h, .OW = l->w,
                       .kh = l->u.pool.kh, .kw = l->u.pool.kw, .sh = l->u.pool.sh,
                       .sw = l->u.pool.sw, .ph = l->u.pool.ph, .pw = l->u.pool.pw};
}

/* Window maximum with NaN propagating (PyTorch: any NaN in the window gives
 * NaN). Written as selects (v > m ? v : m is one maxss) so random data
 * causes no branch mispredictions. */
static inline float max_window(const float *xp, int W, int ha, int hb, int wa, int wb) {
    float m = -INFINITY;
    bool nan = false;
    if (hb - ha == 2 && wb - wa == 2) {   /* the usual 2x2 window: unrolled, same order */
        const float *r = xp + (int64_t)ha * W + wa;
        float a = r[0], b = r[1], c = r[W], d = r[W + 1];
        m = a > m ? a : m;
        m = b > m ? b : m;
        m = c > m ? c : m;
        m = d > m ? d : m;
        nan = (a != a) | (b != b) | (c != c) | (d != d);
        return nan ? NAN : m;
    }
    for (int ih = ha; ih < hb; ih++)
        for (int iw = wa; iw < wb; iw++) {
            float v = xp[(int64_t)ih * W + iw];
            m = v > m ? v : m;
            nan |= v != v;
        }
    return nan ? NAN : m;
}

/* Index (within the plane) of the window's maximum: the first one in
 * row-major order; with NaNs, the last NaN — exactly the element PyTorch's
 * max pool picks (its scan "if (val > maxval || isnan(val))" takes every
 * NaN it meets), and the one the CUDA kernels pick. An all -inf window: its
 * first element. */
static inline int64_t argmax_window(const float *xp, int W, int ha, int hb, int wa, int wb) {
    float m = max_window(xp, W, ha, hb, wa, wb);
    int64_t best = (int64_t)ha * W + wa;
    if (m != m) {   /* forwards with selects: the last NaN seen */
        for (int ih = ha; ih < hb; ih++)
            for (int iw = wa; iw < wb; iw++) {
                int64_t i = (int64_t)ih * W + iw;
                best = xp[i] != xp[i] ? i : best;
            }
        return best;
    }
    /* backwards with selects: the last match seen is the first in order */
    if (hb - ha == 2 && wb - wa == 2) {   /* unrolled as in max_window */
        int64_t i0 = best, i1 = best + 1, i2 = best + W, i3 = best + W + 1;
        best = xp[i3] == m ? i3 : best;
        best = xp[i2] == m ? i2 : best;
        best = xp[i1] == m ? i1 : best;
        best = xp[i0] == m ? i0 : best;
        return best;
    }
    for (int ih = hb - 1; ih >= ha; ih--)
        for (int iw = wb - 1; iw >= wa; iw--) {
            int64_t i = (int64_t)ih * W + iw;
            best = xp[i] == m ? i : best;
        }
    return best;
}

static int vd_cpu_pool_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    pool_geom g = pgeom(net, layer);
    int64_t hw = (int64_t)g.H * g.W, ohw = (int64_t)g.OH * g.OW;
    for (int64_t nc = 0; nc < (int64_t)io->n * g.C; nc++) {
        const float *xp = io->x[0] + nc * hw;
        float *yp = io->y + nc * ohw;
        for (int oh = 0; oh < g.OH; oh++) {
            int ha, hb, hs;
            pool_window(g.adaptive, g.H, g.OH, g.kh, g.sh, g.ph, oh, &ha, &hb, &hs);
            for (int ow = 0; ow < g.OW; ow++) {
                int wa, wb, ws;
                pool_window(g.adaptive, g.W, g.OW, g.kw, g.sw, g.pw, ow, &wa, &wb, &ws);
                if (g.max) {
                    yp[(int64_t)oh * g.OW + ow] = max_window(xp, g.W, ha, hb, wa, wb);
                } else {
                    double s = 0;
                    for (int ih = ha; ih < hb; ih++)
                        for (int iw = wa; iw < wb; iw++) s += xp[(int64_t)ih * g.W + iw];
                    yp[(int64_t)oh * g.OW + ow] = (float)(s / ((double)hs * ws));
                }
            }
        }
    }
    return VD_OK;
}

/* Max: the gradient goes to the window's argmax, recomputed from x (so only
 * x is read, not y). Avg: dy / divisor to every element of the window. */
static int vd_cpu_pool_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    if (!io->dx[0]) return VD_OK;
    pool_geom g = pgeom(net, layer);
    int64_t hw = (int64_t)g.H * g.W, ohw = (int64_t)g.OH * g.OW;
    if (io->dx_beta[0] == 0.0f)
        memset(io->dx[0], 0, (size_t)((int64_t)io->n * g.C * hw) * sizeof(float));
    for (int64_t nc = 0; nc < (int64_t)io->n * g.C; nc++) {
        const float *xp = g.max ? io->x[0] + nc * hw : NULL;
        float *dxp = io->dx[0] + nc * hw;
        const float *dyp = io->dy + nc * ohw;
        for (int oh = 0; oh < g.OH; oh++) {
            int ha, hb, hs;
            pool_window(g.adaptive, g.H, g.OH, g.kh, g.sh, g.ph, oh, &ha, &hb, &hs);
            for (int ow = 0; ow < g.OW; ow++) {
                int wa, wb, ws;
                pool_window(g.adaptive, g.W, g.OW, g.kw, g.sw, g.pw, ow, &wa, &wb, &ws);
                float d = dyp[(int64_t)oh * g.OW + ow];
                if (g.max) {
                    dxp[argmax_window(xp, g.W, ha, hb, wa, wb)] += d;
                } else {
                    float v = (float)((double)d / ((double)hs * ws));
                    for (int ih = ha; ih < hb; ih++)
                        for (int iw = wa; iw < wb; iw++) dxp[(int64_t)ih * g.W + iw] += v;
                }
            }
        }
    }
    return VD_OK;
}

/* ------------------------------------------------------------------ relu */

/* v where c > 0 or c is NaN, else +0.0f: c <= 0.0f ? 0.0f : v, written
 * with a bit mask so that GCC emits no branch (a branch on the sign of
 * random data is mispredicted half the time: ReLU took a sixth of LeNet's
 * training on the CPU). */
static inline float relu_sel(float c, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= -(uint32_t)!(c <= 0.0f);
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* y = max(x, 0), NaN propagates. x[0] may equal y. */
static int vd_cpu_relu_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    const float *x = io->x[0];
    float *y = io->y;
    for (int64_t i = 0; i < n; i++) y[i] = relu_sel(x[i], x[i]);
    return VD_OK;
}

/* dx = dy where y > 0 (reads y, not x, so in-place works); dx may equal dy.
 * bias_db (the conv before it takes no bias gradient, vd_op_io): also its
 * conv's bias gradient, of the dx written (that conv's whole dy). */
static int vd_cpu_relu_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    if (!io->dx[0]) return VD_OK;
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    const float *y = io->y, *dy = io->dy;
    float *dx = io->dx[0];
    float beta = io->dx_beta[0];
    if (beta != 0.0f)
        for (int64_t i = 0; i < n; i++) dx[i] += relu_sel(y[i], dy[i]);
    else
        for (int64_t i = 0; i < n; i++) dx[i] = relu_sel(y[i], dy[i]);
    const vd_layer *l = &net->layers[layer];
    if (io->bias_db) vd_cpu_bias_grad(dx, io->n, l->c, (int64_t)l->h * l->w, 0.0f, io->bias_db);
    return VD_OK;
}

/* ------------------------------------------------------------------ lrn */

/* torch.nn.LocalResponseNorm(size, alpha, beta, k), across channels:
 *   s_c = k + alpha/size * sum_{j=c-size/2}^{c+(size-1)/2} x_j^2  (zero padded)
 *   y_c = x_c * s_c^-beta
 * Backward (reads x only; s is recomputed):
 *   dx_j = dy_j s_j^-beta
 *        - 2 alpha beta/size * x_j * sum_{c: j in window(c)} dy_c x_c s_c^(-beta-1)
 * where j in window(c) <=> j-(size-1)/2 <= c <= j+size/2.
 * `scratch` holds 2*C doubles. */
static void lrn_scale(const float *x, int64_t hw, int C, const vd_layer *l, double *s) {
    int size = l->u.lrn.size;
    double coef = (double)l->u.lrn.alpha / size;
    for (int c = 0; c < C; c++) {
        int a = c - size / 2, b = c + (size - 1) / 2;
        if (a < 0) a = 0;
        if (b > C - 1) b = C - 1;
        double sum = 0;
        for (int j = a; j <= b; j++) sum += (double)x[j * hw] * x[j * hw];
        s[c] = (double)l->u.lrn.k + coef * sum;
    }
}

static int vd_cpu_lrn_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int C = l->c;
    int64_t hw = (int64_t)l->h * l->w;
    double beta = l->u.lrn.beta;
    for (int n = 0; n < io->n; n++)
        for (int64_t i = 0; i < hw; i++) {
            const float *x = io->x[0] + (int64_t)n * C * hw + i;
            float *y = io->y + (int64_t)n * C * hw + i;
            lrn_scale(x, hw, C, l, scratch);
            for (int c = 0; c < C; c++) y[c * hw] = (float)(x[c * hw] * pow(scratch[c], -beta));
        }
    return VD_OK;
}

static int vd_cpu_lrn_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    if (!io->dx[0]) return VD_OK;
    const vd_layer *l = &net->layers[layer];
    int C = l->c, size = l->u.lrn.size;
    int64_t hw = (int64_t)l->h * l->w;
    double beta = l->u.lrn.beta;
    double coef = 2.0 * l->u.lrn.alpha * beta / size;
    double *s = scratch, *t = scratch + C;
    for (int n = 0; n < io->n; n++)
        for (int64_t i = 0; i < hw; i++) {
            int64_t base = (int64_t)n * C * hw + i;
            const float *x = io->x[0] + base, *dy = io->dy + base;
            float *dx = io->dx[0] + base;
            lrn_scale(x, hw, C, l, s);
            for (int c = 0; c < C; c++) t[c] = (double)dy[c * hw] * x[c * hw] * pow(s[c], -beta - 1.0);
            for (int j = 0; j < C; j++) {
                int a = j - (size - 1) / 2, b = j + size / 2;
                if (a < 0) a = 0;
                if (b > C - 1) b = C - 1;
                double sum = 0;
                for (int c = a; c <= b; c++) sum += t[c];
                double g = (double)dy[j * hw] * pow(s[j], -beta) - coef * x[j * hw] * sum;
                vd_cpu_put(&dx[j * hw], io->dx_beta[0], (float)g);
            }
        }
    return VD_OK;
}

/* ------------------------------------------------------------------ batchnorm */

/* y of one element in float: the forward's line, and the backward's for a
 * ReLU's mask (bn_relu_dy). */
static inline float bn_y(float x, float mc, float ic, float gc, float bc) {
    return (x - mc) * ic * gc + bc;
}

/* Training: per channel, mean and biased variance over N*H*W (double, two
 * passes); aux = [mean[C], invstd[C]] with invstd = 1/sqrt(var + eps);
 * running_mean/var <- (1-m)*running + m*batch, the variance unbiased
 * (var * M/(M-1)), as torch.nn.BatchNorm2d. Eval: running statistics (aux is
 * filled from them too). A recompute: aux as the training forward left it.
 * y = (x - mean) * invstd * gamma + beta in float. */
static int vd_cpu_bn_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int C = l->c;
    int64_t hw = (int64_t)l->h * l->w, M = (int64_t)io->n * hw;
    float *mean = io->aux, *invstd = io->aux + C;
    if (io->training && M < 2)
        return vd_errf(e, VD_EUSAGE,
                       "layer '%s': batch norm in training needs more than 1 value per channel "
                       "(batch %d x %lldx%lld)", l->name, io->n, (long long)l->h, (long long)l->w);
    for (int c = 0; c < C; c++) {
        if (io->recompute) {
            /* the statistics the forward saved */
        } else if (io->training) {
            double s = 0;
            for (int n = 0; n < io->n; n++) {
                const float *xp = io->x[0] + ((int64_t)n * C + c) * hw;
                for (int64_t i = 0; i < hw; i++) s += xp[i];
            }
            double mu = s / (double)M, v = 0;
            for (int n = 0; n < io->n; n++) {
                const float *xp = io->x[0] + ((int64_t)n * C + c) * hw;
                for (int64_t i = 0; i < hw; i++) v += ((double)xp[i] - mu) * ((double)xp[i] - mu);
            }
            double var = v / (double)M;
            mean[c] = (float)mu;
            invstd[c] = (float)(1.0 / sqrt(var + (double)l->u.bn.eps));
            double m = l->u.bn.momentum;
            if (io->rm) io->rm[c] = (float)((1.0 - m) * io->rm[c] + m * mu);
            if (io->rv) io->rv[c] = (float)((1.0 - m) * io->rv[c] + m * (v / (double)(M - 1)));
        } else {
            mean[c] = io->rm[c];
            invstd[c] = (float)(1.0 / sqrt((double)io->rv[c] + (double)l->u.bn.eps));
        }
        /* folded into its add (vd_op_io.bn_stats): the statistics alone */
        if (io->bn_stats) continue;
        float mc = mean[c], ic = invstd[c], gc = io->w[c], bc = io->b[c];
        for (int n = 0; n < io->n; n++) {
            const float *xp = io->x[0] + ((int64_t)n * C + c) * hw;
            float *yp = io->y + ((int64_t)n * C + c) * hw;
            for (int64_t i = 0; i < hw; i++) yp[i] = bn_y(xp[i], mc, ic, gc, bc);
        }
    }
    return VD_OK;
}

void vd_cpu_bn_apply(const vd_net *net, int bn, const float *x, float *y, int n,
                     const float *aux, const float *g, const float *b, vd_dtype store) {
    const vd_layer *l = &net->layers[bn];
    int C = l->c;
    int64_t hw = (int64_t)l->h * l->w;
    for (int s = 0; s < n; s++)
        for (int c = 0; c < C; c++) {
            const float mc = aux[c], ic = aux[C + c], gc = g[c], bc = b[c];
            const float *xp = x + ((int64_t)s * C + c) * hw;
            float *yp = y + ((int64_t)s * C + c) * hw;
            for (int64_t i = 0; i < hw; i++) {
                float v = bn_y(xp[i], mc, ic, gc, bc);
                yp[i] = store == VD_DT_F32 ? v : vd_h16_to_f32(store, vd_f32_to_h16(store, v));
            }
        }
}

/* dy as the backward of the ReLU after a batch norm wrote it
 * (vd_op_io.relu_mask): relu_sel on the y the forward stored, bn_y rounded
 * to store. */
static inline float bn_relu_dy(float x, float mc, float ic, float gc, float bc, vd_dtype store,
                               float dy) {
    float y = bn_y(x, mc, ic, gc, bc);
    if (store != VD_DT_F32) y = vd_h16_to_f32(store, vd_f32_to_h16(store, y));
    return relu_sel(y, dy);
}

/* Reads x, gamma and aux (mean, invstd from forward). Training:
 *   dx = gamma*invstd/M * (M*dy - sum(dy) - xhat*sum(dy*xhat));
 * eval (statistics are constants): dx = gamma*invstd*dy.
 * dgamma = sum(dy*xhat), dbeta = sum(dy) (overwritten). With relu_mask, dy
 * is the ReLU's output gradient, masked as it is read (bn_relu_dy). */
static int vd_cpu_bn_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int C = l->c;
    int64_t hw = (int64_t)l->h * l->w, M = (int64_t)io->n * hw;
    const float *mean = io->aux, *invstd = io->aux + C;
    const bool mask = io->relu_mask;
    for (int c = 0; c < C; c++) {
        double mu = mean[c], is = invstd[c];
        const float mc = mean[c], ic = invstd[c], gc = io->w[c], bc = mask ? io->b[c] : 0.0f;
        double sdy = 0, sdyx = 0;
        for (int n = 0; n < io->n; n++) {
            const float *xp = io->x[0] + ((int64_t)n * C + c) * hw;
            const float *dyp = io->dy + ((int64_t)n * C + c) * hw;
            for (int64_t i = 0; i < hw; i++) {
                float d = mask ? bn_relu_dy(xp[i], mc, ic, gc, bc, io->relu_store, dyp[i]) : dyp[i];
                sdy += d;
                sdyx += (double)d * (((double)xp[i] - mu) * is);
            }
        }
        if (io->dw) io->dw[c] = (float)sdyx;
        if (io->db) io->db[c] = (float)sdy;
        if (!io->dx[0]) continue;
        double gi = (double)io->w[c] * is;
        for (int n = 0; n < io->n; n++) {
            const float *xp = io->x[0] + ((int64_t)n * C + c) * hw;
            const float *dyp = io->dy + ((int64_t)n * C + c) * hw;
            float *dxp = io->dx[0] + ((int64_t)n * C + c) * hw;
            for (int64_t i = 0; i < hw; i++) {
                float d = mask ? bn_relu_dy(xp[i], mc, ic, gc, bc, io->relu_store, dyp[i]) : dyp[i];
                double g;
                if (io->training) {
                    double xh = ((double)xp[i] - mu) * is;
                    g = gi / (double)M * ((double)M * d - sdy - xh * sdyx);
                } else {
                    g = gi * d;
                }
                vd_cpu_put(&dxp[i], io->dx_beta[0], (float)g);
            }
        }
    }
    return VD_OK;
}

/* ------------------------------------------------------------------ fc */

/* y[N,O] = x[N,K] W[O,K]^T + b, x flattened per sample. */
static int vd_cpu_fc_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    int64_t O = net->layers[layer].c, K = vd_cpu_numel(vd_cpu_in_shape(net, layer, 0));
    vd_cpu_gemm(false, true, io->n, O, K, io->x[0], K, io->w, K, 0, io->y, O);
    if (io->b)
        for (int n = 0; n < io->n; n++)
            for (int64_t o = 0; o < O; o++) io->y[n * O + o] += io->b[o];
    return VD_OK;
}

/* dx = dy W (honours dx_beta), dW = dy^T x, db = sum_n dy (both honour
 * dw_beta: the gemm adds its product, db its double sum rounded to float). */
static int vd_cpu_fc_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    int64_t O = net->layers[layer].c, K = vd_cpu_numel(vd_cpu_in_shape(net, layer, 0));
    if (io->dx[0])
        vd_cpu_gemm(false, false, io->n, K, O, io->dy, O, io->w, K, io->dx_beta[0] != 0.0f,
                    io->dx[0], K);
    if (io->dw)
        vd_cpu_gemm(true, false, O, K, io->n, io->dy, O, io->x[0], K, io->dw_beta != 0.0f,
                    io->dw, K);
    if (io->db)
        for (int64_t o = 0; o < O; o++) {
            double s = 0;
            for (int n = 0; n < io->n; n++) s += io->dy[n * O + o];
            vd_cpu_put(&io->db[o], io->dw_beta, (float)s);
        }
    return VD_OK;
}

/* ------------------------------------------------------------------ dropout */

/* Training: element i (0..N*C*H*W-1, NCHW order, of the whole batch: a
 * chunk's element j is i = n0*C*H*W + j) is kept iff
 * vd_hash_uniform(seed, layer, iter, i) >= p, and then scaled by the float
 * 1.0f/(1.0f-p): y = x * scale. Eval: identity. In place allowed. */
static bool dropout_keep(const vd_op_io *io, int layer, float p, uint64_t i) {
    return vd_hash_uniform(io->seed, (uint64_t)layer, (uint64_t)io->iter, i) >= p;
}

/* The batch's index of the call's element 0 (a chunk's n0 * C*H*W). */
static uint64_t dropout_base(const vd_net *net, int layer, const vd_op_io *io) {
    return (uint64_t)(io->n0 * vd_net_out_numel(net, layer));
}

static int vd_cpu_dropout_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    const float *x = io->x[0];
    float *y = io->y;
    float p = net->layers[layer].u.dropout.p;
    if (!io->training || p == 0.0f) {
        if (y != x) memcpy(y, x, (size_t)n * sizeof *y);
        return VD_OK;
    }
    float scale = 1.0f / (1.0f - p);
    uint64_t base = dropout_base(net, layer, io);
    for (int64_t i = 0; i < n; i++)
        y[i] = dropout_keep(io, layer, p, base + (uint64_t)i) ? x[i] * scale : 0.0f;
    return VD_OK;
}

/* dx = dy * mask * scale with the same mask (recomputed, no saved state). */
static int vd_cpu_dropout_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    if (!io->dx[0]) return VD_OK;
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    const float *dy = io->dy;
    float *dx = io->dx[0];
    float beta = io->dx_beta[0];
    float p = net->layers[layer].u.dropout.p;
    bool identity = !io->training || p == 0.0f;
    float scale = 1.0f / (1.0f - p);
    uint64_t base = dropout_base(net, layer, io);
    for (int64_t i = 0; i < n; i++) {
        float g;
        if (identity) g = dy[i];
        else g = dropout_keep(io, layer, p, base + (uint64_t)i) ? dy[i] * scale : 0.0f;
        vd_cpu_put(&dx[i], beta, g);
    }
    return VD_OK;
}

/* ------------------------------------------------------------------ flatten, add, concat */

/* Flatten is a copy (the layout of [N, C*H*W] equals [N, C, H, W]). */
static int vd_cpu_flatten_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    if (io->y != io->x[0]) memcpy(io->y, io->x[0], (size_t)n * sizeof(float));
    return VD_OK;
}

static int vd_cpu_flatten_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    if (!io->dx[0]) return VD_OK;
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    for (int64_t i = 0; i < n; i++) vd_cpu_put(&io->dx[0][i], io->dx_beta[0], io->dy[i]);
    return VD_OK;
}

/* y = x0 + x1 + ... summed left to right in float. y may be any x[k] (a
 * forward-only plan's add in place): element i of every input is read
 * before y[i] is written, and no other element is read after it. With
 * bn_aux (the batch norm + add fusion, fp32 NCHW: the 16-bit and
 * channels-last path normalises its float copy of x[bn_k] before, cpu_run_cl)
 * input bn_k is the batch norm's x: its y, bn_y in float as the batch
 * norm's forward writes it, takes its place in the sum. */
static int vd_cpu_add_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    if (io->bn_aux) {
        const int bk = io->bn_k, C = l->c;
        const int64_t hw = (int64_t)l->h * l->w;
        for (int64_t i = 0; i < n; i++) {
            const int c = (int)((i / hw) % C);
            float t = bn_y(io->x[bk][i], io->bn_aux[c], io->bn_aux[C + c], io->bn_w[c],
                           io->bn_b[c]);
            float s = bk == 0 ? t : io->x[0][i];
            for (int k = 1; k < l->n_in; k++) s += k == bk ? t : io->x[k][i];
            io->y[i] = s;
        }
        return VD_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        float s = io->x[0][i];
        for (int k = 1; k < l->n_in; k++) s += io->x[k][i];
        io->y[i] = s;
    }
    return VD_OK;
}

/* dx[k] = dy for every input, each with its own dx_beta. */
static int vd_cpu_add_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    for (int k = 0; k < l->n_in; k++) {
        if (!io->dx[k]) continue;
        for (int64_t i = 0; i < n; i++) vd_cpu_put(&io->dx[k][i], io->dx_beta[k], io->dy[i]);
    }
    return VD_OK;
}

/* Channel concat: y[n, off_k + c] = x_k[n, c], off_k = sum of earlier c's. */
static int vd_cpu_concat_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int64_t out = vd_net_out_numel(net, layer);
    for (int n = 0; n < io->n; n++) {
        int64_t off = 0;
        for (int k = 0; k < l->n_in; k++) {
            int64_t m = vd_cpu_numel(vd_cpu_in_shape(net, layer, k));
            memcpy(io->y + n * out + off, io->x[k] + n * m, (size_t)m * sizeof(float));
            off += m;
        }
    }
    return VD_OK;
}

static int vd_cpu_concat_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int64_t out = vd_net_out_numel(net, layer);
    for (int n = 0; n < io->n; n++) {
        int64_t off = 0;
        for (int k = 0; k < l->n_in; k++) {
            int64_t m = vd_cpu_numel(vd_cpu_in_shape(net, layer, k));
            if (io->dx[k]) {
                const float *dy = io->dy + n * out + off;
                float *dx = io->dx[k] + n * m;
                for (int64_t i = 0; i < m; i++) vd_cpu_put(&dx[i], io->dx_beta[k], dy[i]);
            }
            off += m;
        }
    }
    return VD_OK;
}

/* ------------------------------------------------------------------ softmax cross-entropy */

/* y[n, j] = softmax(x[n, :])_j (in double, max subtracted); aux[0] = mean over
 * the batch of -log p[label] = logsumexp(x) - x[label], aux[1] = the top-1
 * hits (argmax of x, the first of equal maxima, equal to the label), both
 * over the counted samples: the batch's first loss_n (vd_op_io_loss_n).
 * labels must be in [0, classes). A chunk (backend.h): its sums over its
 * counted samples, the loss's in double, divided by the count, put into
 * aux[0] and aux[1] at n0 == 0 and added to them (in double, rounded once)
 * after. */
static int vd_cpu_xent_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    const vd_layer *l = &net->layers[layer];
    int K = l->c;
    if (!io->labels) return vd_errf(e, VD_EINTERNAL, "layer '%s': no labels", l->name);
    int counted = vd_op_io_loss_n(io);
    double total = 0, hits = 0;
    for (int n = 0; n < io->n; n++) {
        const float *x = io->x[0] + (int64_t)n * K;
        float *y = io->y + (int64_t)n * K;
        int32_t lab = io->labels[n];
        if (lab < 0 || lab >= K)
            return vd_errf(e, VD_EDATA, "layer '%s': label %d of sample %lld is outside [0, %d)",
                           l->name, (int)lab, (long long)(io->n0 + n), K);
        double m = x[0];
        int arg = 0;
        for (int j = 1; j < K; j++)
            if (x[j] > m || isnan(x[j])) { m = x[j]; arg = j; }
        double s = 0;
        for (int j = 0; j < K; j++) s += exp((double)x[j] - m);
        for (int j = 0; j < K; j++) y[j] = (float)(exp((double)x[j] - m) / s);
        if (io->n0 + n >= counted) continue;
        total += log(s) + m - (double)x[lab];
        hits += arg == lab;
    }
    double part = total / counted;
    io->aux[0] = (float)(io->n0 > 0 ? (double)io->aux[0] + part : part);
    io->aux[1] = (float)(io->n0 > 0 ? (double)io->aux[1] + hits : hits);
    return VD_OK;
}

/* dx = scale (y - onehot(label)) / N: the gradient of the mean loss (times
 * the loss scale; a power of two, so exact unless it overflows); dy unused.
 * N is the whole batch's n_batch in a chunk. */
int vd_cpu_xent_backward_scaled(const vd_net *net, int layer, const vd_op_io *io, float scale,
                                vd_err *e) {
    if (!io->dx[0]) return VD_OK;
    int K = net->layers[layer].c;
    float fn = (float)vd_op_io_batch(io);
    for (int n = 0; n < io->n; n++) {
        const float *y = io->y + (int64_t)n * K;
        float *dx = io->dx[0] + (int64_t)n * K;
        for (int j = 0; j < K; j++) {
            float g = (y[j] - (j == io->labels[n] ? 1.0f : 0.0f)) / fn * scale;
            vd_cpu_put(&dx[j], io->dx_beta[0], g);
        }
    }
    return VD_OK;
}

static int vd_cpu_xent_backward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    return vd_cpu_xent_backward_scaled(net, layer, io, 1.0f, e);
}

/* ------------------------------------------------------------------ gelu */

/* torch.nn.GELU() (approximate='none'): y = x * Phi(x) = x/2 (1 + erf(x/sqrt 2)),
 * in double, rounded once. x[0] may not equal y (backward reads x). */
static int vd_cpu_gelu_forward(const vd_net *net, int layer, const vd_op_io *io,
                               double *scratch, vd_err *e) {
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    const float *x = io->x[0];
    float *y = io->y;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + erf(v * M_SQRT1_2)));
    }
    return VD_OK;
}

/* dx = dy * (Phi(x) + x phi(x)), phi(x) = exp(-x^2/2) / sqrt(2 pi). */
static int vd_cpu_gelu_backward(const vd_net *net, int layer, const vd_op_io *io,
                                double *scratch, vd_err *e) {
    if (!io->dx[0]) return VD_OK;
    int64_t n = (int64_t)io->n * vd_net_out_numel(net, layer);
    const float *x = io->x[0], *dy = io->dy;
    float *dx = io->dx[0];
    float beta = io->dx_beta[0];
    const double inv_sqrt_2pi = 0.5 * M_2_SQRTPI * M_SQRT1_2;
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        double d = 0.5 * (1.0 + erf(v * M_SQRT1_2)) + v * inv_sqrt_2pi * exp(-0.5 * v * v);
        vd_cpu_put(&dx[i], beta, (float)(dy[i] * d));
    }
    return VD_OK;
}

/* ------------------------------------------------------------------ dispatch */

static size_t lrn_scratch_doubles(const vd_net *net, int layer) {
    return (size_t)net->layers[layer].c * 2;
}

const vd_cpu_op vd_cpu_ops[] = {
    [VD_OP_CONV] = {vd_cpu_conv_forward, vd_cpu_conv_backward, NULL},
    [VD_OP_POOL] = {vd_cpu_pool_forward, vd_cpu_pool_backward, NULL},
    [VD_OP_RELU] = {vd_cpu_relu_forward, vd_cpu_relu_backward, NULL},
    [VD_OP_LRN] = {vd_cpu_lrn_forward, vd_cpu_lrn_backward, lrn_scratch_doubles},
    [VD_OP_BATCHNORM] = {vd_cpu_bn_forward, vd_cpu_bn_backward, NULL},
    [VD_OP_FC] = {vd_cpu_fc_forward, vd_cpu_fc_backward, NULL},
    [VD_OP_DROPOUT] = {vd_cpu_dropout_forward, vd_cpu_dropout_backward, NULL},
    [VD_OP_FLATTEN] = {vd_cpu_flatten_forward, vd_cpu_flatten_backward, NULL},
    [VD_OP_ADD] = {vd_cpu_add_forward, vd_cpu_add_backward, NULL},
    [VD_OP_CONCAT] = {vd_cpu_concat_forward, vd_cpu_concat_backward, NULL},
    [VD_OP_SOFTMAX_XENT] = {vd_cpu_xent_forward, vd_cpu_xent_backward, NULL},
    [VD_OP_GELU] = {vd_cpu_gelu_forward, vd_cpu_gelu_backward, NULL},
};
_Static_assert(sizeof vd_cpu_ops / sizeof vd_cpu_ops[0] == VD_OP_COUNT,
               "one CPU dispatch entry per op (the last op has none)");
