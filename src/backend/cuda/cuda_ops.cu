/* cuda_ops.cu — forward / backward of every op on the compute stream.
 *
 * conv and batchnorm go to cuda_cudnn.cu, fc to cuBLAS, the rest to the
 * kernels in cuda_kernels.cu. Semantics: backend.h (dx_beta 0 overwrites
 * without reading, 1 accumulates; dw / db are overwritten). */
#include "backend/cuda/cuda_internal.h"

static cu_pool_geom pool_geom(const cu_layer *L, const vd_layer *l, int n) {
    cu_pool_geom g;
    g.n = n;
    g.c = L->in_c[0];
    g.h = L->in_h;
    g.w = L->in_w;
    g.oh = L->h;
    g.ow = L->w;
    g.kh = l->u.pool.kh;
    g.kw = l->u.pool.kw;
    g.sh = l->u.pool.sh > 0 ? l->u.pool.sh : l->u.pool.kh;
    g.sw = l->u.pool.sw > 0 ? l->u.pool.sw : l->u.pool.kw;
    g.ph = l->u.pool.ph;
    g.pw = l->u.pool.pw;
    g.adaptive = l->u.pool.global || l->u.pool.out_h > 0;
    g.max = l->u.pool.mode == VD_POOL_MAX;
    return g;
}

static int64_t in_numel(const cu_layer *L, int k) {
    return (int64_t)L->in_c[k] * L->in_h * L->in_w;
}

static int64_t out_numel(const cu_layer *L) { return (int64_t)L->c * L->h * L->w; }

/* ---- fc: y[N, out] = x[N, in] W[out, in]^T + b (row-major), via column-major
 * cuBLAS: y^T = W^T' x^T where W's row-major storage is W^T column-major. -- */
static int fc_forward(cu_ctx *c, const vd_layer *l, const cu_layer *L, const vd_op_io *io,
                      vd_err *e) {
    int k = (int)in_numel(L, 0), m = l->u.fc.out, n = io->n;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(e, cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, io->w, k,
                                io->x[0], k, &zero, io->y, m));
    if (l->u.fc.bias && io->b)
        return cuk_bias_add(cu_compute(c), c->sm_count, io->y, io->b, n, m, 1, e);
    return VD_OK;
}

static int fc_backward(cu_ctx *c, const vd_layer *l, const cu_layer *L, const vd_op_io *io,
                       vd_err *e) {
    int k = (int)in_numel(L, 0), m = l->u.fc.out, n = io->n;
    const float one = 1.0f, zero = 0.0f;
    if (io->dw) /* dW[out, in] = dy^T x  ->  col-major dW^T(in x out) = x^T(in x N) dy(N x out) */
        CUBLAS_CHECK(e, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &one, io->x[0], k,
                                    io->dy, m, &zero, io->dw, k));
    if (io->dx[0]) { /* dx[N, in] = dy W -> col-major dx^T(in x N) = W^T(in x out) dy^T(out x N) */
        const float beta = io->dx_beta[0] != 0.0f ? 1.0f : 0.0f;
        CUBLAS_CHECK(e, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &one, io->w, k,
                                    io->dy, m, &beta, io->dx[0], k));
    }
    if (l->u.fc.bias && io->db) return cuk_col_sum(cu_compute(c), io->dy, n, m, io->db, e);
    return VD_OK;
}

static int need(const void *p, const vd_layer *l, const char *what, vd_err *e) {
    if (p) return VD_OK;
    return vd_errf(e, VD_EINTERNAL, "layer '%s' (%s): %s pointer is NULL", l->name,
                   vd_op_table[l->op].name, what);
}

int cu_op_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &c->layers[li];
    cudaStream_t s = cu_compute(c);
    int sm = c->sm_count, rc;
    int64_t ny = (int64_t)io->n * out_numel(L);
    if ((rc = need(io->x[0], l, "x", e)) || (rc = need(io->y, l, "y", e))) return rc;
    switch (l->op) {
    case VD_OP_CONV: return cu_conv_forward(c, net, li, io, e);
    case VD_OP_BATCHNORM: return cu_bn_forward(c, net, li, io, e);
    case VD_OP_FC:
        if ((rc = need(io->w, l, "weight", e))) return rc;
        return fc_forward(c, l, L, io, e);
    case VD_OP_POOL: {
        cu_pool_geom g = pool_geom(L, l, io->n);
        return cuk_pool_fwd(s, sm, &g, io->x[0], io->y, e);
    }
    case VD_OP_RELU: return cuk_relu_fwd(s, sm, io->x[0], io->y, ny, e);
    case VD_OP_LRN:
        return cuk_lrn_fwd(s, sm, io->x[0], io->y, io->n, L->c, (int64_t)L->h * L->w, l->u.lrn.size,
                           l->u.lrn.alpha, l->u.lrn.beta, l->u.lrn.k, e);
    case VD_OP_DROPOUT: {
        float p = l->u.dropout.p;
        if (!io->training || p == 0.0f) {
            if (io->x[0] == io->y) return VD_OK;
            CUDA_CHECK(e, cudaMemcpyAsync(io->y, io->x[0], (size_t)ny * sizeof(float),
                                          cudaMemcpyDeviceToDevice, s));
            return VD_OK;
        }
        float scale = 1.0f / (1.0f - p);
        return cuk_dropout(s, sm, io->x[0], io->y, 0.0f, ny, p, scale, io->seed, (uint64_t)li,
                           (uint64_t)io->iter, e);
    }
    case VD_OP_FLATTEN:
        if (io->x[0] == io->y) return VD_OK;
        CUDA_CHECK(e, cudaMemcpyAsync(io->y, io->x[0], (size_t)ny * sizeof(float),
                                      cudaMemcpyDeviceToDevice, s));
        return VD_OK;
    case VD_OP_ADD:
        for (int k = 1; k < l->n_in; k++)
            if ((rc = need(io->x[k], l, "x[k]", e))) return rc;
        return cuk_add(s, sm, io->x, l->n_in, io->y, ny, e);
    case VD_OP_CONCAT: {
        int64_t off = 0, hw = (int64_t)L->h * L->w;
        for (int k = 0; k < l->n_in; k++) {
            if ((rc = need(io->x[k], l, "x[k]", e))) return rc;
            if ((rc = cuk_concat(s, sm, io->x[k], io->y, io->n, L->in_c[k], L->c, off, hw, false,
                                 0.0f, e)))
                return rc;
            off += L->in_c[k];
        }
        return VD_OK;
    }
    case VD_OP_SOFTMAX_XENT:
        if ((rc = need(io->labels, l, "labels", e))) return rc;
        return cuk_xent_fwd(s, io->x[0], io->labels, io->y, io->aux, io->n, L->c, e);
    case VD_OP_COUNT: break;
    }
    return vd_errf(e, VD_EINTERNAL, "layer '%s': unknown op %d", l->name, (int)l->op);
}

int cu_op_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &c->layers[li];
    cudaStream_t s = cu_compute(c);
    int sm = c->sm_count, rc;
    int64_t ny = (int64_t)io->n * out_numel(L);
    float beta = io->dx_beta[0] != 0.0f ? 1.0f : 0.0f;
    if (l->op != VD_OP_SOFTMAX_XENT && (rc = need(io->dy, l, "dy", e))) return rc;
    switch (l->op) {
    case VD_OP_CONV:
        if ((rc = need(io->x[0], l, "x", e)) || (rc = need(io->w, l, "weight", e))) return rc;
        return cu_conv_backward(c, net, li, io, e);
    case VD_OP_BATCHNORM:
        if ((rc = need(io->x[0], l, "x", e))) return rc;
        return cu_bn_backward(c, net, li, io, e);
    case VD_OP_FC:
        if ((rc = need(io->x[0], l, "x", e)) || (rc = need(io->w, l, "weight", e))) return rc;
        return fc_backward(c, l, L, io, e);
    default: break;
    }
    /* the rest only produce dx: nothing to do when no input wants a gradient */
    bool any = false;
    for (int k = 0; k < l->n_in; k++) any = any || io->dx[k];
    if (!any) return VD_OK;
    switch (l->op) {
    case VD_OP_POOL: {   /* max recomputes the argmax from x; average reads no x */
        cu_pool_geom g = pool_geom(L, l, io->n);
        if (g.max && (rc = need(io->x[0], l, "x", e))) return rc;
        return cuk_pool_bwd(s, sm, &g, io->x[0], io->dy, io->dx[0], beta, e);
    }
    case VD_OP_RELU: {
        const float *y = io->y ? io->y : io->x[0];   /* y > 0 iff x > 0 */
        if ((rc = need(y, l, "y", e))) return rc;
        return cuk_relu_bwd(s, sm, y, io->dy, io->dx[0], beta, ny, e);
    }
    case VD_OP_LRN:
        if ((rc = need(io->x[0], l, "x", e))) return rc;
        return cuk_lrn_bwd(s, sm, io->x[0], io->dy, io->dx[0], beta, io->n, L->c,
                           (int64_t)L->h * L->w, l->u.lrn.size, l->u.lrn.alpha, l->u.lrn.beta,
                           l->u.lrn.k, e);
    case VD_OP_DROPOUT: {
        float p = l->u.dropout.p;
        if (!io->training || p == 0.0f) {
            if (io->dx[0] == io->dy && beta == 0.0f) return VD_OK;
            return cuk_axpby_copy(s, sm, io->dy, io->dx[0], beta, ny, e);
        }
        return cuk_dropout(s, sm, io->dy, io->dx[0], beta, ny, p, 1.0f / (1.0f - p), io->seed,
                           (uint64_t)li, (uint64_t)io->iter, e);
    }
    case VD_OP_FLATTEN:
        if (io->dx[0] == io->dy && beta == 0.0f) return VD_OK;
        return cuk_axpby_copy(s, sm, io->dy, io->dx[0], beta, ny, e);
    case VD_OP_ADD:
        for (int k = 0; k < l->n_in; k++) {
            if (!io->dx[k]) continue;
            float b = io->dx_beta[k] != 0.0f ? 1.0f : 0.0f;
            if (io->dx[k] == io->dy && b == 0.0f) continue;
            if ((rc = cuk_axpby_copy(s, sm, io->dy, io->dx[k], b, ny, e))) return rc;
        }
        return VD_OK;
    case VD_OP_CONCAT: {
        int64_t off = 0, hw = (int64_t)L->h * L->w;
        for (int k = 0; k < l->n_in; k++) {
            if (io->dx[k]) {
                float b = io->dx_beta[k] != 0.0f ? 1.0f : 0.0f;
                if ((rc = cuk_concat(s, sm, io->dy, io->dx[k], io->n, L->in_c[k], L->c, off, hw,
                                     true, b, e)))
                    return rc;
            }
            off += L->in_c[k];
        }
        return VD_OK;
    }
    case VD_OP_SOFTMAX_XENT:
        if ((rc = need(io->y, l, "y", e)) || (rc = need(io->labels, l, "labels", e))) return rc;
        return cuk_xent_bwd(s, sm, io->y, io->labels, io->dx[0], beta, io->n, L->c, e);
    default: break;
    }
    return vd_errf(e, VD_EINTERNAL, "layer '%s': unknown op %d", l->name, (int)l->op);
}
