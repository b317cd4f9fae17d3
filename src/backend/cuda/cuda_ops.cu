/* cuda_ops.cu — forward / backward of every op on the compute stream, and
 * what layer_setup and the profile need to know of each op (cu_ops[]).
 *
 * conv and batchnorm go to cuda_cudnn.cu, fc to cuBLAS, the rest to the
 * kernels in cuda_k_*.cu. Semantics: backend.h (dx_beta 0 overwrites
 * without reading, 1 accumulates; dw / db the same with dw_beta; a call may
 * run a chunk of the batch: n0, n_batch, of which only dropout and the loss
 * need to know, checked by cu_op_forward / cu_op_backward). */
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
    g.cl = L->cl;
    return g;
}

static int64_t in_numel(const cu_layer *L, int k) {
    return (int64_t)L->in_c[k] * L->in_h * L->in_w;
}

static int64_t out_numel(const cu_layer *L) { return (int64_t)L->c * L->h * L->w; }

/* Bytes of one feature-map element. */
static size_t act_size(const vd_op_io *io) { return (size_t)vd_dtype_bytes(io->act); }

/* ---- fc: y[N, out] = x[N, in] W[out, in]^T + b (row-major), via column-major
 * cuBLAS: y^T = W^T' x^T where W's row-major storage is W^T column-major. -- */
/* Math bf16 / fp16: the products take 16-bit operands (CUDA_R_16BF /
 * CUDA_R_16F) and accumulate in fp32 (cublasGemmEx, CUBLAS_COMPUTE_32F); the
 * weight's 16-bit copy is made in the workspace's first cu_wcopy_bytes
 * (cuda_backend.cu adds them to the option), dW is written in fp32 straight
 * into the gradient (added to it with dw_beta 1: the GEMM's beta). fp32 and
 * tf32: cublasSgemm on the fp32 weight (tf32: the handle's tensor-op math).
 * Channels-last maps (tf32, bf16, fp16) of H*W > 1 go through the
 * workspace in NCHW order (fc_x_nchw; dx likewise, then relaid out). */
static cudaDataType_t blas_t16(vd_dtype dt) { return dt == VD_DT_F16 ? CUDA_R_16F : CUDA_R_16BF; }

/* The workspace of a 16-bit fc: the weight's 16-bit copy, then (input of H*W > 1,
 * channels-last) the input in NCHW order, the order of torch's flattening
 * that the weight's columns follow; backward reuses that region for dx. */
static int fc_wcopy(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, const void **w16,
                    vd_err *e) {
    uint64_t need = cu_wcopy_bytes(c, net, li) + cu_fc_xt_bytes(c, net, li, io->n);
    if (!io->ws || io->ws_bytes < need)
        return vd_errf(e, VD_EINTERNAL, "fc '%s': %s needs %llu bytes of workspace, got %llu",
                       net->layers[li].name, vd_math_name(c->math), (unsigned long long)need,
                       (unsigned long long)io->ws_bytes);
    *w16 = io->ws;
    return cuk_f32_to_16(cu_compute(c), c->sm_count, io->w, io->ws, cu_weight_numel(net, li),
                         io->act, e);
}

/* Channels-last input of H*W > 1: *x = the input in NCHW order, in the
 * workspace behind the weight copy if any (else *x stays io->x[0]). */
static int fc_x_nchw(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, const void **x,
                     vd_err *e) {
    const cu_layer *L = &c->layers[li];
    uint64_t xb = cu_fc_xt_bytes(c, net, li, io->n), wb = cu_wcopy_bytes(c, net, li);
    if (!xb) return VD_OK;
    if (!io->ws || io->ws_bytes < wb + xb)
        return vd_errf(e, VD_EINTERNAL, "fc '%s': %s needs %llu bytes of workspace, got %llu",
                       net->layers[li].name, vd_math_name(c->math),
                       (unsigned long long)(wb + xb), (unsigned long long)io->ws_bytes);
    char *xt = (char *)io->ws + wb;
    *x = xt;
    return cuk_relayout(cu_compute(c), c->sm_count, io->x[0], io->act, xt, io->act, io->n,
                        L->in_c[0], (int64_t)L->in_h * L->in_w, false, 0.0f, e);
}

static int fc_forward(cu_ctx *c, const vd_net *net, int li, const cu_layer *L, const vd_op_io *io,
                      vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int k = (int)in_numel(L, 0), m = l->u.fc.out, n = io->n;
    const float one = 1.0f, zero = 0.0f;
    const void *x = io->x[0];
    int rc = fc_x_nchw(c, net, li, io, &x, e);
    if (rc) return rc;
    if (io->act != VD_DT_F32) {
        const void *w16;
        if ((rc = fc_wcopy(c, net, li, io, &w16, e))) return rc;
        const cudaDataType_t t16 = blas_t16(io->act);
        CUBLAS_CHECK(e, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w16,
                                     t16, k, x, t16, k, &zero, io->y, t16, m, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT));
    } else {
        CUBLAS_CHECK(e, cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, io->w, k,
                                    (const float *)x, k, &zero, io->y, m));
    }
    if (l->u.fc.bias && io->b)   /* y is [n, m] (H = W = 1): either layout */
        return cuk_bias_add(cu_compute(c), c->sm_count, io->y, io->b, n, m, 1, io->act, false, e);
    return VD_OK;
}

static int fc_backward(cu_ctx *c, const vd_net *net, int li, const cu_layer *L,
                       const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int k = (int)in_numel(L, 0), m = l->u.fc.out, n = io->n;
    const float one = 1.0f, wbeta = io->dw_beta != 0.0f ? 1.0f : 0.0f;
    const bool h16 = io->act != VD_DT_F32;
    const bool xt = cu_fc_xt_bytes(c, net, li, io->n) != 0;   /* channels-last input */
    const cudaDataType_t t16 = blas_t16(io->act);
    const void *w = io->w;   /* 16-bit: the weight's copy */
    int rc;
    if (io->dw) {   /* dW[out, in] = dy^T x -> col-major dW^T(in x out) = x^T(in x N) dy(N x out) */
        const void *x = io->x[0];
        if (xt && !io->x[0]) return vd_errf(e, VD_EINTERNAL, "fc '%s': backward needs x", l->name);
        if ((rc = fc_x_nchw(c, net, li, io, &x, e))) return rc;   /* dW reads no weight */
        if (h16)
            CUBLAS_CHECK(e, cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &one, x,
                                         t16, k, io->dy, t16, m, &wbeta, io->dw,
                                         CUDA_R_32F, k, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        else
            CUBLAS_CHECK(e, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, k, m, n, &one,
                                        (const float *)x, k, io->dy, m, &wbeta, io->dw, k));
    }
    if (io->dx[0]) {   /* dx[N, in] = dy W -> col-major dx^T(in x N) = W^T(in x out) dy^T(out x N) */
        if (h16 && (rc = fc_wcopy(c, net, li, io, &w, e))) return rc;
        const float beta = io->dx_beta[0] != 0.0f ? 1.0f : 0.0f;
        /* channels-last input: dx in NCHW order into the workspace (after the dW
         * product on the same stream), then into dx's layout */
        void *dxp = xt ? (void *)((char *)io->ws + cu_wcopy_bytes(c, net, li)) : (void *)io->dx[0];
        const float b0 = xt ? 0.0f : beta;
        if (h16)
            CUBLAS_CHECK(e, cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &one, w,
                                         t16, k, io->dy, t16, m, &b0, dxp, t16, k,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        else
            CUBLAS_CHECK(e, cublasSgemm(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, k, n, m, &one,
                                        (const float *)w, k, io->dy, m, &b0, (float *)dxp, k));
        if (xt && (rc = cuk_relayout(cu_compute(c), c->sm_count, dxp, io->act, io->dx[0],
                                     io->act, n, L->in_c[0], (int64_t)L->in_h * L->in_w,
                                     true, beta, e)))
            return rc;
    }
    if (l->u.fc.bias && io->db)
        return cuk_col_sum(cu_compute(c), io->dy, n, m, wbeta, io->db, io->act, e);
    return VD_OK;
}

static int need(const void *p, const vd_layer *l, const char *what, vd_err *e) {
    if (p) return VD_OK;
    return vd_errf(e, VD_EINTERNAL, "layer '%s' (%s): %s pointer is NULL", l->name,
                   vd_op_table[l->op].name, what);
}

/* ---- one function per op and pass; the io pointers every forward reads
 * (x[0], y) and backward's dy were checked by cu_op_forward / cu_op_backward. */
typedef int (*cu_op_fn)(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);

static int64_t io_ny(const cu_layer *L, const vd_op_io *io) { return (int64_t)io->n * out_numel(L); }
/* The batch's NCHW index of the chunk's first output element (dropout's mask). */
static int64_t io_y0(const cu_layer *L, const vd_op_io *io) { return io->n0 * out_numel(L); }
static float beta0(const vd_op_io *io) { return io->dx_beta[0] != 0.0f ? 1.0f : 0.0f; }

/* conv and fc read x for the weight's gradient only: without dw (frozen) none */
static int conv_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int rc;
    if ((io->dw && (rc = need(io->x[0], l, "x", e))) || (rc = need(io->w, l, "weight", e)))
        return rc;
    /* its ReLU's backward reduced its bias gradient (vd_op_io.bias_db,
     * relu_bwd, cu_layer.bias_bwd) */
    if (io->db_taken && li + 1 < c->n_layers && c->layers[li + 1].bias_bwd) {
        vd_op_io b = *io;
        b.db = NULL;
        return cu_conv_backward(c, net, li, &b, e);
    }
    return cu_conv_backward(c, net, li, io, e);
}

static int bn_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    int rc = need(io->x[0], &net->layers[li], "x", e);
    return rc ? rc : cu_bn_backward(c, net, li, io, e);
}

/* Channels-last batch norm (own kernels: tf32, bf16, fp16): the partial sums of
 * forward and backward; backward, in front of them, the room for what it
 * writes that nobody wants (cu_bn_spare_bytes: --freeze, the net input). */
static void bn_ws(const cu_ctx *c, const vd_net *net, int li, int n, vd_algo_opt *o) {
    const vd_layer *l = &net->layers[li];
    uint64_t sums = vd_math_nhwc(c->math)
                  ? cu_bn_ws_bytes((int64_t)n * l->h * l->w, l->c, c->sm_count) : 0;
    o->ws_fwd = sums;
    o->ws_bwd = cu_bn_spare_bytes(net, li, n, vd_math_act_dtype(c->math)) + sums;
    o->workspace = o->ws_fwd > o->ws_bwd ? o->ws_fwd : o->ws_bwd;
}

static int fc_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int rc = need(io->w, l, "weight", e);
    return rc ? rc : fc_forward(c, net, li, &c->layers[li], io, e);
}

static int fc_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int rc;
    if ((io->dw && (rc = need(io->x[0], l, "x", e))) || (rc = need(io->w, l, "weight", e)))
        return rc;
    return fc_backward(c, net, li, &c->layers[li], io, e);
}

static int pool_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    cu_pool_geom g = pool_geom(&c->layers[li], &net->layers[li], io->n);
    return cuk_pool_fwd(cu_compute(c), c->sm_count, &g, io->x[0], io->y, io->act, e);
}

static int relu_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
static void relu_ws(const cu_ctx *c, const vd_net *net, int li, int n, vd_algo_opt *o);

/* The conv bias gradient that max pool li's backward reduces with its
 * ReLU's (vd_op_io.relu_dx): io's bias_db where that ReLU takes it
 * (cu_layer.bias_bwd; else its conv's backward does), else NULL. */
static float *pool_bias_db(const cu_ctx *c, const vd_net *net, int li, const vd_op_io *io) {
    int r = vd_op_pool_relu(net, li);
    return r >= 0 && io->bias_db && c->layers[r].bias_bwd ? io->bias_db : NULL;
}

/* max recomputes the argmax from x; average reads no x. With its ReLU's
 * backward (vd_op_io.relu_dx, not no_fuse): dx already masked, and the
 * ReLU's bias gradient; one pass where the windows tile the input
 * (k_pool_tile8, channels-last; k_pool_tile_nchw, fp32's NCHW, its bias
 * gradient after it), the mask in k_pool_bwd8 for the other channels-last
 * pools it takes, else the pool's and then the ReLU's kernels, in place on
 * dx; all in this step (dx: the same bits as the two steps). */
static int pool_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    cu_pool_geom g = pool_geom(&c->layers[li], &net->layers[li], io->n);
    int rc;
    if (g.max && (rc = need(io->x[0], &net->layers[li], "x", e))) return rc;
    if (!io->relu_dx || c->no_fuse)
        return cuk_pool_bwd(cu_compute(c), c->sm_count, &g, io->x[0], io->dy, io->dx[0],
                            beta0(io), io->ws, io->ws_bytes, io->act, e);
    int r = vd_op_pool_relu(net, li);
    if (r < 0 || !io->dx[0] || beta0(io) != 0.0f)
        return vd_errf(e, VD_EINTERNAL, "layer '%s': takes no ReLU's backward", net->layers[li].name);
    float *db = pool_bias_db(c, net, li, io);
    uint64_t need_ws = db ? cu_pool_tile_bias_ws_bytes(&g, c->sm_count) : 0;
    bool al = (((uintptr_t)io->x[0] | (uintptr_t)io->dy | (uintptr_t)io->dx[0]) & 15u) == 0;
    const bool sums = db && need_ws && io->ws && io->ws_bytes >= need_ws;
    /* the mask in the pool's kernel (k_pool_tile8, k_pool_tile_nchw, or for
     * channels-last overlapping windows k_pool_bwd8: one read of x instead
     * of the ReLU's pass); the bias sums in k_pool_tile8, or after it
     * (cuk_chan_sum: what cuk_relu_bwd_bias adds, in its order, with the
     * same split) */
    bool taken = cu_pool_tile_ok(&g) && al;
    if (taken)
        rc = cuk_pool_tile_bwd(cu_compute(c), c->sm_count, &g, io->x[0], io->dy, io->dx[0], 0.0f,
                               true, sums ? db : NULL, io->ws, io->ws_bytes, io->act, e);
    else if ((taken = cu_pool_tile_nchw_ok(&g)))
        rc = cuk_pool_tile_nchw_bwd(cu_compute(c), c->sm_count, &g, io->x[0], io->dy, io->dx[0],
                                    0.0f, true, e);
    else
        rc = cuk_pool_bwd_relu8(cu_compute(c), c->sm_count, &g, io->x[0], io->dy, io->dx[0],
                                io->ws, io->ws_bytes, io->act, &taken, e);
    if (rc || taken) {
        if (rc || !db || sums) return rc;
        const cu_layer *R = &c->layers[r];
        int64_t hw = (int64_t)R->h * R->w;
        int split = cu_bias_grad_split(io->n, R->c, hw, c->sm_count, R->cl, io->ws_bytes);
        return cuk_chan_sum(cu_compute(c), io->dx[0], io->n, R->c, hw, split, (float *)io->ws,
                            0.0f, db, io->act, R->cl, e);
    }
    rc = cuk_pool_bwd(cu_compute(c), c->sm_count, &g, io->x[0], io->dy, io->dx[0], 0.0f, io->ws,
                      io->ws_bytes, io->act, e);
    if (rc) return rc;
    vd_op_io ri = *io;   /* the ReLU's backward in place: y is the pool's x */
    ri.relu_dx = false;
    ri.x[0] = io->x[0];
    ri.y = (float *)io->x[0];
    ri.dy = io->dx[0];
    ri.dx_beta[0] = 0.0f;
    ri.bias_db = db;
    ri.bwd_done = false;
    return relu_bwd(c, net, r, &ri, e);
}

/* Channels-last max pooling: the backward argmax pass's bytes
 * (cu_pool_bwd_ws_bytes of the geometry at batch n; none where the windows
 * tile the input). A max pool that takes its ReLU's backward with the bias
 * gradient (pool_bias_db): room for that gradient's partial sums too, those
 * of k_pool_tile8 or, where it does not take the layer, as many as the
 * ReLU's own (relu_ws: the same sums). */
static void pool_ws(const cu_ctx *c, const vd_net *net, int li, int n, vd_algo_opt *o) {
    cu_pool_geom g = pool_geom(&c->layers[li], &net->layers[li], n);
    uint64_t pw = vd_math_nhwc(c->math) ? VD_ALIGN_UP(cu_pool_bwd_ws_bytes(&g), (uint64_t)256) : 0;
    int r = vd_op_pool_relu(net, li);
    if (r >= 0 && !c->no_fuse && c->layers[r].bias_bwd) {
        uint64_t tb = cu_pool_tile_bias_ws_bytes(&g, c->sm_count);
        if (!tb) {
            vd_algo_opt ro;
            memset(&ro, 0, sizeof ro);
            relu_ws(c, net, r, n, &ro);
            tb = ro.ws_bwd;
        }
        if (tb > pw) pw = tb;
    }
    o->ws_bwd = o->workspace = pw;
}

static int relu_fwd(cu_ctx *c, const vd_net *, int li, const vd_op_io *io, vd_err *e) {
    /* in place after a conv, batch norm or add that applied it
     * (cu_layer.relu_fused); out of place the producer's output, already
     * rectified, is still copied */
    if (c->layers[li].relu_fused && io->x[0] == io->y) return VD_OK;
    return cuk_relu_fwd(cu_compute(c), c->sm_count, io->x[0], io->y, io_ny(&c->layers[li], io), io->act, e);
}

static int relu_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    /* its max pool's backward ran it (vd_op_io.relu_dx, pool_bwd) */
    if (io->bwd_done && !c->no_fuse) return VD_OK;
    /* in place into its dy tensor after a batch norm that takes it
     * (cu_layer.relu_bwd_fused): the batch norm reads the dy unmasked */
    if (c->layers[li].relu_bwd_fused && io->dx[0] == io->dy) return VD_OK;
    const float *y = io->y ? io->y : io->x[0];   /* y > 0 iff x > 0 */
    int rc = need(y, &net->layers[li], "y", e);
    if (rc) return rc;
    /* with the bias gradient of the conv before it (vd_op_io.bias_db; the
     * partial sums in this step's workspace, relu_ws), which that conv's
     * backward then skips (conv_bwd), where setup chose it (cu_layer.bias_bwd) */
    if (io->bias_db && c->layers[li].bias_bwd) {
        const cu_layer *L = &c->layers[li];
        int64_t hw = (int64_t)L->h * L->w;
        int split = cu_bias_grad_split(io->n, L->c, hw, c->sm_count, L->cl, io->ws_bytes);
        return cuk_relu_bwd_bias(cu_compute(c), c->sm_count, y, io->dy, io->dx[0], io->n, L->c, hw,
                                 split, (float *)io->ws, io->bias_db, io->act, L->cl, e);
    }
    return cuk_relu_bwd(cu_compute(c), c->sm_count, y, io->dy, io->dx[0], beta0(io),
                        io_ny(&c->layers[li], io), io->act, e);
}

/* A ReLU that takes its conv's bias gradient (cu_layer.bias_bwd): its
 * backward's workspace holds that gradient's partial sums, as many as the
 * conv's own would take (cu_bias_grad_split: where the conv's option has
 * as much workspace, the sums are the same bits). */
static void relu_ws(const cu_ctx *c, const vd_net *net, int li, int n, vd_algo_opt *o) {
    const vd_layer *l = &net->layers[li];
    if (!c->layers[li].bias_bwd) return;
    int split = cu_chan_split(n, l->c, (int64_t)l->h * l->w, c->sm_count, vd_math_nhwc(c->math));
    o->ws_bwd = o->workspace = split > 1 ? (uint64_t)split * (uint64_t)l->c * sizeof(float) : 0;
}

/* ReLU li's setup: cu_relu_bias_setup (its conv's bias gradient in its
 * backward, timed against the separate passes), except where the max pool
 * after it takes its backward (vd_op_pool_relu, not no_fuse) in
 * k_pool_tile8's one pass, which reduces that gradient too
 * (cu_pool_tile_bias_ws_bytes; the conv's own pass would read the map
 * again): fused, untimed. The pool's layer is not set up yet: its geometry
 * from the net. */
static int relu_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int p = li + 1;
    if (!c->no_fuse && p < net->n_layers && vd_op_pool_relu(net, p) == li) {
        const vd_layer *lp = &net->layers[p];
        cu_layer P;
        memset(&P, 0, sizeof P);
        P.in_c[0] = l->c;
        P.in_h = l->h;
        P.in_w = l->w;
        P.h = lp->h;
        P.w = lp->w;
        P.cl = vd_math_nhwc(c->math);
        cu_pool_geom g = pool_geom(&P, lp, c->batch);
        if (cu_pool_tile_bias_ws_bytes(&g, c->sm_count)) {
            L->bias_bwd = l->inplace && vd_op_bias_taker(net, li) >= 0;
            return VD_OK;
        }
    }
    return cu_relu_bias_setup(c, net, li, L, e);
}

static int lrn_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &c->layers[li];
    return cuk_lrn_fwd(cu_compute(c), c->sm_count, io->x[0], io->y, io->n, L->c,
                       (int64_t)L->h * L->w, l->u.lrn.size, l->u.lrn.alpha, l->u.lrn.beta,
                       l->u.lrn.k, io->act, L->cl, e);
}

static int lrn_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &c->layers[li];
    int rc = need(io->x[0], l, "x", e);
    if (rc) return rc;
    return cuk_lrn_bwd(cu_compute(c), c->sm_count, io->x[0], io->dy, io->dx[0], beta0(io), io->n,
                       L->c, (int64_t)L->h * L->w, l->u.lrn.size, l->u.lrn.alpha, l->u.lrn.beta,
                       l->u.lrn.k, io->act, L->cl, e);
}

static int dropout_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    float p = net->layers[li].u.dropout.p;
    int64_t ny = io_ny(&c->layers[li], io);
    if (!io->training || p == 0.0f) {
        if (io->x[0] == io->y) return VD_OK;
        CUDA_CHECK(e, cudaMemcpyAsync(io->y, io->x[0], (size_t)ny * act_size(io),
                                      cudaMemcpyDeviceToDevice, cu_compute(c)));
        return VD_OK;
    }
    float scale = 1.0f / (1.0f - p);
    const cu_layer *L = &c->layers[li];
    return cuk_dropout(cu_compute(c), c->sm_count, io->x[0], io->y, 0.0f, ny, p, scale, io->seed,
                       (uint64_t)li, (uint64_t)io->iter, c->steps_dev, L->c,
                       (int64_t)L->h * L->w, io_y0(L, io), io->act, L->cl, e);
}

static int dropout_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    float p = net->layers[li].u.dropout.p, beta = beta0(io);
    int64_t ny = io_ny(&c->layers[li], io);
    if (!io->training || p == 0.0f) {
        if (io->dx[0] == io->dy && beta == 0.0f) return VD_OK;
        return cuk_axpby_copy(cu_compute(c), c->sm_count, io->dy, io->dx[0], beta, ny, io->act, e);
    }
    const cu_layer *L = &c->layers[li];
    return cuk_dropout(cu_compute(c), c->sm_count, io->dy, io->dx[0], beta, ny, p,
                       1.0f / (1.0f - p), io->seed, (uint64_t)li, (uint64_t)io->iter,
                       c->steps_dev, L->c, (int64_t)L->h * L->w, io_y0(L, io), io->act, L->cl, e);
}

/* Channels-last maps: flattening in torch's order is NHWC -> NCHW. */
static int flatten_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const cu_layer *L = &c->layers[li];
    int64_t hw = (int64_t)L->in_h * L->in_w;
    if (L->cl && hw > 1) {
        if (io->x[0] == io->y)
            return vd_errf(e, VD_EINTERNAL, "flatten '%s': in place in %s", net->layers[li].name,
                           vd_math_name(c->math));
        return cuk_relayout(cu_compute(c), c->sm_count, io->x[0], io->act, io->y, io->act, io->n,
                            L->in_c[0], hw, false, 0.0f, e);
    }
    if (io->x[0] == io->y) return VD_OK;
    CUDA_CHECK(e, cudaMemcpyAsync(io->y, io->x[0], (size_t)io_ny(&c->layers[li], io) * act_size(io),
                                  cudaMemcpyDeviceToDevice, cu_compute(c)));
    return VD_OK;
}

static int flatten_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    float beta = beta0(io);
    const cu_layer *L = &c->layers[li];
    int64_t hw = (int64_t)L->in_h * L->in_w;
    if (L->cl && hw > 1) {
        if (io->dx[0] == io->dy)
            return vd_errf(e, VD_EINTERNAL, "flatten '%s': in place in %s", net->layers[li].name,
                           vd_math_name(c->math));
        return cuk_relayout(cu_compute(c), c->sm_count, io->dy, io->act, io->dx[0], io->act, io->n,
                            L->in_c[0], hw, true, beta, e);
    }
    if (io->dx[0] == io->dy && beta == 0.0f) return VD_OK;
    return cuk_axpby_copy(cu_compute(c), c->sm_count, io->dy, io->dx[0], beta,
                          io_ny(&c->layers[li], io), io->act, e);
}

static int add_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int rc;
    for (int k = 1; k < l->n_in; k++)
        if ((rc = need(io->x[k], l, "x[k]", e))) return rc;
    /* the batch norm + add fusion (vd_op_io.bn_aux): input bn_k is the batch
     * norm's x, normalised here (channels-last only, as the batch norm's
     * statistics-only forward) */
    if (io->bn_aux) {
        const cu_layer *L = &c->layers[li];
        if (!L->cl || !io->bn_w || !io->bn_b)
            return vd_errf(e, VD_EUNSUPPORTED, "add '%s': a folded batch norm in %s: the CUDA "
                           "backend folds batch norms in bf16, fp16 and tf32 only (channels-last "
                           "maps)", l->name, vd_math_name(c->math));
        return cuk_bn_add_nhwc(cu_compute(c), c->sm_count, io->x, l->n_in, io->bn_k, io->y,
                               io->bn_aux, io->bn_w, io->bn_b, (int64_t)io->n * L->h * L->w, L->c,
                               L->fwd_relu, io->act, e);
    }
    return cuk_add(cu_compute(c), c->sm_count, io->x, l->n_in, io->y, io_ny(&c->layers[li], io),
                   c->layers[li].fwd_relu, io->act, e);
}

static int add_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int64_t ny = io_ny(&c->layers[li], io);
    int rc;
    for (int k = 0; k < l->n_in; k++) {
        if (!io->dx[k]) continue;
        float b = io->dx_beta[k] != 0.0f ? 1.0f : 0.0f;
        if (io->dx[k] == io->dy && b == 0.0f) continue;
        if ((rc = cuk_axpby_copy(cu_compute(c), c->sm_count, io->dy, io->dx[k], b, ny, io->act, e))) return rc;
    }
    return VD_OK;
}

static int concat_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &c->layers[li];
    int64_t off = 0, hw = (int64_t)L->h * L->w;
    int rc;
    for (int k = 0; k < l->n_in; k++) {
        if ((rc = need(io->x[k], l, "x[k]", e))) return rc;
        if ((rc = cuk_concat(cu_compute(c), c->sm_count, io->x[k], io->y, io->n, L->in_c[k], L->c,
                             off, hw, false, 0.0f, io->act, L->cl, e)))
            return rc;
        off += L->in_c[k];
    }
    return VD_OK;
}

static int concat_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    const cu_layer *L = &c->layers[li];
    int64_t off = 0, hw = (int64_t)L->h * L->w;
    int rc;
    for (int k = 0; k < l->n_in; k++) {
        if (io->dx[k]) {
            float b = io->dx_beta[k] != 0.0f ? 1.0f : 0.0f;
            if ((rc = cuk_concat(cu_compute(c), c->sm_count, io->dy, io->dx[k], io->n, L->in_c[k],
                                 L->c, off, hw, true, b, io->act, L->cl, e)))
                return rc;
        }
        off += L->in_c[k];
    }
    return VD_OK;
}

static int xent_fwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    int rc = need(io->labels, &net->layers[li], "labels", e);
    if (rc) return rc;
    return cuk_xent_fwd(cu_compute(c), io->x[0], io->labels, io->y, io->aux, io->n,
                        c->layers[li].c, (int)io->n0, vd_op_io_loss_n(io), io->n0 > 0, io->act, e);
}

static int xent_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int rc;
    if ((rc = need(io->y, l, "y", e)) || (rc = need(io->labels, l, "labels", e))) return rc;
    /* loss scaling (math fp16): dx times the device-side scale, no host sync */
    const float *scale = NULL;
    if (io->loss_scaled) {
        vd_loss_scale *st;
        if ((rc = cu_scale_state(c, &st, e))) return rc;
        scale = &st->scale;
    }
    return cuk_xent_bwd(cu_compute(c), c->sm_count, io->y, io->labels, io->dx[0], beta0(io), io->n,
                        vd_op_io_batch(io), c->layers[li].c, scale, io->act, e);
}

static int gelu_fwd(cu_ctx *c, const vd_net *, int li, const vd_op_io *io, vd_err *e) {
    return cuk_gelu_fwd(cu_compute(c), c->sm_count, io->x[0], io->y, io_ny(&c->layers[li], io), io->act, e);
}

static int gelu_bwd(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    int rc = need(io->x[0], &net->layers[li], "x", e);
    if (rc) return rc;
    return cuk_gelu_bwd(cu_compute(c), c->sm_count, io->x[0], io->dy, io->dx[0], beta0(io),
                        io_ny(&c->layers[li], io), io->act, e);
}

/* A ReLU in place (vd_schedule_inplace_flags: its producer's output has no
 * other consumer, and no backward reads it unrectified) after a batch norm
 * on the channels-last kernels or after an add: the producer applies it
 * (cu_layer.fwd_relu, relu_fused); the batch norm also its backward
 * (vd_op_relu_taker; bwd_relu, relu_bwd_fused). cuDNN's batch norm (fp32)
 * has no such epilogue: there the ReLU runs on its own (its backward in
 * place, where the plan shares the tensors). */
void cu_fuse_relu_setup(cu_ctx *c, const vd_net *net) {
    for (int r = 0; r < net->n_layers; r++) {
        const vd_layer *lr = &net->layers[r];
        int p = lr->n_in == 1 ? lr->in[0] : -1;
        if (lr->op != VD_OP_RELU || !lr->inplace || p < 0) continue;
        cu_layer *P = &c->layers[p];
        vd_op op = net->layers[p].op;
        if (op != VD_OP_ADD && !(op == VD_OP_BATCHNORM && P->cl)) continue;
        P->fwd_relu = true;
        c->layers[r].relu_fused = true;
        if (vd_op_relu_taker(net, r) == p) {
            P->bwd_relu = true;
            c->layers[r].relu_bwd_fused = true;
        }
    }
}

/* Per-layer setup (cu_op_setup). */
typedef int (*cu_setup_fn)(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e);
/* The default option's workspace (cu_op_default_ws). */
typedef void (*cu_ws_fn)(const cu_ctx *c, const vd_net *net, int li, int n, vd_algo_opt *o);

/* The dispatch array, in vd_op order (C++ has no array designators: each
 * entry names its op and cu_op_supported checks the order). */
typedef struct cu_op {
    vd_op op;
    cu_op_fn fwd, bwd;
    cu_setup_fn setup;        /* NULL: the op keeps no state of its own */
    cu_ws_fn default_ws;      /* NULL: its default option needs no workspace */
} cu_op;

static const cu_op cu_ops[] = {
    {VD_OP_CONV, cu_conv_forward, conv_bwd, cu_conv_setup, NULL},
    {VD_OP_POOL, pool_fwd, pool_bwd, NULL, pool_ws},
    {VD_OP_RELU, relu_fwd, relu_bwd, relu_setup, relu_ws},
    {VD_OP_LRN, lrn_fwd, lrn_bwd, NULL, NULL},
    {VD_OP_BATCHNORM, cu_bn_forward, bn_bwd, cu_bn_setup, bn_ws},
    {VD_OP_FC, fc_fwd, fc_bwd, NULL, NULL},
    {VD_OP_DROPOUT, dropout_fwd, dropout_bwd, NULL, NULL},
    {VD_OP_FLATTEN, flatten_fwd, flatten_bwd, NULL, NULL},
    {VD_OP_ADD, add_fwd, add_bwd, NULL, NULL},
    {VD_OP_CONCAT, concat_fwd, concat_bwd, NULL, NULL},
    {VD_OP_SOFTMAX_XENT, xent_fwd, xent_bwd, NULL, NULL},
    {VD_OP_GELU, gelu_fwd, gelu_bwd, NULL, NULL},
};
static_assert(sizeof cu_ops / sizeof cu_ops[0] == VD_OP_COUNT, "one CUDA dispatch entry per op");

/* Every op runs in every math mode (TF32 only changes conv and fc; bf16 and
 * fp16 change the feature maps' type, see the launchers). */
bool cu_op_supported(vd_op op, vd_math) {
    return (unsigned)op < VD_OP_COUNT && cu_ops[op].op == op && cu_ops[op].fwd && cu_ops[op].bwd;
}

int cu_op_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    if (!cu_op_supported(l->op, c->math))
        return vd_errf(e, VD_EINTERNAL, "layer '%s': unknown op %d", l->name, (int)l->op);
    return cu_ops[l->op].setup ? cu_ops[l->op].setup(c, net, li, L, e) : VD_OK;
}

void cu_op_default_ws(const cu_ctx *c, const vd_net *net, int li, int n, vd_algo_opt *o) {
    vd_op op = net->layers[li].op;
    if (cu_op_supported(op, c->math) && cu_ops[op].default_ws)
        cu_ops[op].default_ws(c, net, li, n, o);
}

int cu_op_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int rc;
    if (!cu_op_supported(l->op, c->math))
        return vd_errf(e, VD_EINTERNAL, "layer '%s': unknown op %d", l->name, (int)l->op);
    if ((rc = vd_op_io_check_chunk(net, li, io, false, e))) return rc;
    if ((rc = need(io->x[0], l, "x", e)) || (rc = need(io->y, l, "y", e))) return rc;
    return cu_ops[l->op].fwd(c, net, li, io, e);
}

int cu_op_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    int rc;
    if (!cu_op_supported(l->op, c->math))
        return vd_errf(e, VD_EINTERNAL, "layer '%s': unknown op %d", l->name, (int)l->op);
    if ((rc = vd_op_io_check_chunk(net, li, io, true, e))) return rc;
    if (l->op != VD_OP_SOFTMAX_XENT && (rc = need(io->dy, l, "dy", e))) return rc;
    if (!vd_op_table[l->op].has_params) {
        /* only dx to produce: nothing to do when no input wants a gradient */
        bool any = false;
        for (int k = 0; k < l->n_in; k++) any = any || io->dx[k];
        if (!any) return VD_OK;
    }
    return cu_ops[l->op].bwd(c, net, li, io, e);
}
