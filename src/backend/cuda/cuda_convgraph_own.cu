/* cuda_convgraph_own.cu — the graph-API conv's candidates that are not cuDNN
 * plans: the cuBLAS backward-filter of 1x1 convolutions and the direct forward
 * kernel; and which forwards fuse the bias and a following ReLU (the direct
 * kernel, or a cuDNN graph with an epilogue) (see cuda_convgraph.h). */
#include <string.h>
#include "backend/cuda/cuda_convgraph.h"

/* ---- the GEMM backward-filter of 1x1 convolutions -------------------------------- */
/* A 1x1, stride-1, unpadded, ungrouped fp32 (NCHW) convolution's weight
 * gradient in NCHW is dW[k][c] = sum_n sum_hw dY[n][k][hw] X[n][c][hw]: per
 * sample a GEMM with hw as the inner dimension. cuDNN's NCHW engines take
 * 2.7 ms for ResNet-50's layer1 conv3 (64 -> 256 at 56x56, b256) where
 * PyTorch's kernels take about half (H200, measured): here one strided
 * batched cuBLAS GEMM writes each sample's K x C partial into the workspace,
 * then k_sum_batch adds them in sample order (deterministic). It is one more
 * timed candidate of the backward-filter direction, kept only where it
 * wins; its workspace (n K C floats) is capped at GEMM_WS_MAX. */
static const uint64_t GEMM_WS_MAX = 256ull << 20;

static bool gemm_eligible(const cu_layer *L, const vd_layer *l) {
    int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    return !L->cl && gr == 1 && l->u.conv.kh == 1 && l->u.conv.kw == 1 &&
           l->u.conv.sh == 1 && l->u.conv.sw == 1 && l->u.conv.ph == 0 && l->u.conv.pw == 0 &&
           L->h == L->in_h && L->w == L->in_w;
}

static uint64_t gemm_ws(const cu_layer *L, int n) {
    return (uint64_t)n * (uint64_t)L->c * (uint64_t)L->in_c[0] * sizeof(float);
}

/* ptr = {x, dw, dy} at batch n; ws holds gemm_ws(L, n) bytes; beta: k_sum_batch's */
int cg_gemm_filter(cu_ctx *c, const cu_layer *L, int n, void *const ptr[3], void *ws, float beta,
                   vd_err *e) {
    const int C = L->in_c[0], K = L->c;
    const int64_t hw = (int64_t)L->h * L->w;
    if (hw > INT32_MAX)
        return vd_errf(e, VD_EINTERNAL, "cg_gemm_filter: %lld pixels", (long long)hw);
    const float one = 1.0f, zero = 0.0f;
    /* column-major: per sample dW_n^T (C x K, ld C) = X_n (HW x C, ld HW)^T dY_n (HW x K) */
    CUBLAS_CHECK(e, cublasSgemmStridedBatched(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, C, K, (int)hw,
                                              &one, (const float *)ptr[0], (int)hw,
                                              (long long)C * hw, (const float *)ptr[2], (int)hw,
                                              (long long)K * hw, &zero, (float *)ws, C,
                                              (long long)C * K, n));
    return cuk_sum_batch(cu_compute(c), c->sm_count, (const float *)ws, n, (int64_t)C * K, beta,
                         (float *)ptr[1], e);
}

/* Append the GEMM candidate to the backward-filter candidates D at batch n. */
void cg_add_gemm(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, uint64_t cap,
                 gdir *D) {
    uint64_t ws = gemm_ws(L, n);
    if (!gemm_eligible(L, l) || ws > cap || ws > GEMM_WS_MAX || D->n >= G_MAXC) return;
    gcand *k = &D->c[D->n++];
    memset(k, 0, sizeof *k);
    k->engine = GEMM_ENGINE;
    k->ws = ws;
    k->ms = -1.0f;
    k->gemm = true;
    k->tc = false;   /* fp32 only (gemm_eligible): cuBLAS's FMA math */
    cg_dbg(c, 2, "  '%s' %s: cuBLAS 1x1 GEMM (engine %d): candidate, workspace %llu", l->name,
           cg_dir_name[CU_GD_BWD_FILTER], GEMM_ENGINE, (unsigned long long)ws);
}

/* The direct forward kernel (cuk_conv_direct_fwd) for layers with few
 * inputs per output (at most CU_DIRECT_MAX_C channels, CU_DIRECT_MAX_P
 * inputs per window): one more timed forward candidate, without workspace,
 * kept where it wins, like the GEMM. fp32 feature maps (NCHW) only.
 * When an option runs it, the kernel also adds the bias
 * (cu_graph_fwd_fuses_bias). */
static bool direct_geom(const cu_layer *L, const vd_layer *l, int n, cu_direct_geom *dg) {
    int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    if (L->cl || gr != 1) return false;
    *dg = (cu_direct_geom){n, L->in_c[0], L->in_h, L->in_w, L->c, L->h, L->w,
                           l->u.conv.kh, l->u.conv.kw, l->u.conv.sh, l->u.conv.sw,
                           l->u.conv.ph, l->u.conv.pw,
                           l->u.conv.dh > 0 ? l->u.conv.dh : 1, l->u.conv.dw > 0 ? l->u.conv.dw : 1};
    return cuk_conv_direct_ok(dg);
}

/* ptr = {x, w, y} at batch n; b: the bias or NULL; relu: then max(y, 0) */
int cg_direct_fwd(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, void *const ptr[3],
                  const float *b, bool relu, vd_err *e) {
    cu_direct_geom dg;
    if (!direct_geom(L, l, n, &dg))
        return vd_errf(e, VD_EINTERNAL, "conv '%s': not a direct-kernel geometry", l->name);
    return cuk_conv_direct_fwd(cu_compute(c), c->sm_count, &dg, (const float *)ptr[0],
                               (const float *)ptr[1], b, (float *)ptr[2], relu, e);
}

/* Append the direct candidate to the forward candidates D at batch n. */
void cg_add_direct(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, gdir *D) {
    cu_direct_geom dg;
    if (!direct_geom(L, l, n, &dg) || D->n >= G_MAXC) return;
    gcand *k = &D->c[D->n++];
    memset(k, 0, sizeof *k);
    k->engine = DIRECT_ENGINE;
    k->ms = -1.0f;
    k->direct = true;
    cg_dbg(c, 2, "  '%s' %s: direct kernel (engine %d): candidate", l->name, cg_dir_name[CU_GD_FWD],
           DIRECT_ENGINE);
}

/* ---- the bias and a following ReLU fused into the forward ------------------------- */
/* The conv whose output ReLU layer r may rectify in its forward, or -1: r
 * runs in place on a conv's output, which then has no other consumer and
 * nothing reads it unrectified (vd_schedule_inplace_flags). */
static int relu_fusable_into(const vd_net *net, int r) {
    const vd_layer *lr = &net->layers[r];
    int p = lr->n_in == 1 ? lr->in[0] : -1;
    if (lr->op != VD_OP_RELU || !lr->inplace || p < 0 || net->layers[p].op != VD_OP_CONV)
        return -1;
    return p;
}

int cu_conv_fwd_epi(const cu_ctx *c, const vd_net *net, int li) {
    /* the direct kernel's tests (conv_direct_force) keep its fusion alone */
    if (c->no_fuse || c->conv_direct_force || !net->layers[li].u.conv.bias)
        return CG_EPI_NONE;
    for (int r = 0; r < net->n_layers; r++)
        if (relu_fusable_into(net, r) == li) return CG_EPI_BIAS_RELU;
    return CG_EPI_BIAS;
}

int cu_graph_fwd_epi(const cu_layer *L) {
    return L->g ? L->g->d[CU_GD_FWD].epi : CG_EPI_NONE;
}

bool cu_graph_fwd_fuses_bias(const cu_ctx *c, int li, int algo) {
    const cu_layer *L = &c->layers[li];
    if (!L->g || algo < 0 || algo >= L->n_opts) return false;
    const cu_conv_opt *o = &L->conv_opts[algo];
    int k = o->gplan[CU_GD_FWD];
    if (k < 0 || cg_opt_split_dir(o, CU_GD_FWD)) return false;
    const gdir *D = &L->g->d[CU_GD_FWD];
    return D->c[k].direct || D->epi != CG_EPI_NONE;
}

int cg_epilogue(cu_ctx *c, const cu_layer *L, const vd_layer *l, const vd_op_io *io, int epi,
                vd_err *e) {
    if (!io->b) return vd_errf(e, VD_EINTERNAL, "conv '%s': fused forward without a bias", l->name);
    const int64_t hw = (int64_t)L->h * L->w;
    int rc = cuk_bias_add(cu_compute(c), c->sm_count, io->y, io->b, io->n, L->c, hw, io->act, L->cl,
                          e);
    if (rc || epi != CG_EPI_BIAS_RELU) return rc;
    return cuk_relu_fwd(cu_compute(c), c->sm_count, io->y, io->y, (int64_t)io->n * L->c * hw,
                        io->act, e);
}

void cu_fuse_setup(cu_ctx *c, const vd_net *net) {
    for (int r = 0; r < net->n_layers; r++) {
        const int p = relu_fusable_into(net, r);
        if (p < 0) continue;
        cu_layer *P = &c->layers[p];
        bool all = P->n_opts > 0;
        for (int k = 0; all && k < P->n_opts; k++) all = cu_graph_fwd_fuses_bias(c, p, k);
        if (!all) continue;
        P->fwd_relu = true;
        c->layers[r].relu_fused = true;
        cg_dbg(c, 1, "layer '%s': relu fused into '%s' (%s)", net->layers[r].name,
               net->layers[p].name,
               P->g->d[CU_GD_FWD].epi == CG_EPI_BIAS_RELU ? "a cuDNN conv + bias + ReLU graph"
                                                          : "the direct forward kernel");
    }
}
