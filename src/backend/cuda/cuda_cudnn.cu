/* cuda_cudnn.cu — convolution and batch norm through cuDNN's legacy API.
 *
 * The only file that calls the legacy (cuDNN 9: deprecated, still supported)
 * convolution / batch-norm API; see cuda_internal.h for how the deprecation
 * is handled.
 *
 * Conv layers run through the graph API (cuda_convgraph_*.cu, same three
 * options) or this file's legacy algorithms, chosen per layer at setup: both
 * are timed and the legacy options replace the graph ones where their
 * fastest (forward + backward-data + backward-filter) is 8% faster (measured
 * on an H200, b256 fp32, with a 3% margin then: 2 of VGG-16's 9 distinct conv
 * geometries, 4 of AlexNet's 5, 3 of ResNet-50's 24; e.g. AlexNet features.6
 * 2.0 ms legacy against 4.8 ms graph; at 8% VGG-16's features.19 (3.5%) and
 * AlexNet's features.0 (3.6%) stay with the graph API). The legacy algorithms are also used where the graph
 * API has no engine for a direction of the layer, with --conv-api legacy,
 * and as the graph path's last resort at run time (cu_legacy_conv_dir).
 * --conv-api graph: the graph API wherever it has engines (no timing
 * against legacy). Untimed setups (deterministic mode, --conv-tune off) and
 * --conv-split force keep the graph API.
 *
 * Sub-batches past 2^31 elements: cuDNN's tensor descriptors (the legacy
 * 4-d ones, and many graph-API engines) refuse a tensor of more than
 * INT32_MAX elements (VGG-16's features.0 output at batch 1024 has 3.3e9).
 * A conv layer is described and tuned at its "describe batch"
 * (cu_layer.desc_batch, conv_desc_batch): c->batch, or where the input or
 * output at c->batch would pass INT32_MAX elements, c->batch split into the
 * fewest near-equal sub-batches that stay within it, the largest of them
 * (an even split then runs every sub-batch on the setup plans). A call of
 * more samples runs as consecutive sub-batches of at most that (conv_slice,
 * the batch split as PyTorch's cuDNN convolution does it): forward slices x
 * and y (bias per slice); backward-data dy and dx, every slice with the
 * call's dx beta; backward-filter adds the slices' dW into dw in slice
 * order, the first with the call's dw_beta, the others with 1: in fp32 a
 * slice that adds is computed with beta 0 into the front of the workspace
 * (conv_dw_tmp bytes, counted in such a layer's backward workspace) and
 * added by cuk_axpby_copy, with channels-last maps (tf32, bf16, fp16) each
 * slice's KRSC dW is relaid out (16 bits: widened) into dw; the bias gradient runs once over the whole call (int64
 * indices). A layer within the limit (desc_batch == c->batch, every
 * shipped net at its usual batch) runs exactly as before.
 *
 * Legacy algorithm options per conv layer (vd_algo_opt; built in this order,
 * an option equal to an earlier one is dropped, then cu_conv_opts_order
 * keeps "fastest" first and sorts the rest by decreasing workspace):
 *   0 "fastest": per direction (forward, backward-data, backward-filter)
 *      independently, the fastest algorithm as timed by cudnnFind*Ex (like
 *      cudnn.benchmark) among those needing at most max(2 GiB, output bytes)
 *      of workspace. Timing runs in layer_setup on one temporary cudaMalloc
 *      (freed before it returns, before any pool exists); layers of equal
 *      geometry share one timing. No timing (cuDNN's heuristic first choice,
 *      cudnnGet*Algorithm_v7) in deterministic mode (runs must repeat bit for
 *      bit across processes), with --conv-tune off, or when the temporary
 *      memory is not free.
 *   1 "min-ws": for each direction the heuristic candidate with the least
 *      workspace (first in heuristic order among equals), typically
 *      IMPLICIT_GEMM / ALGO_0 / ALGO_1 with 0 bytes.
 *   2 "balanced": timed: per direction the fastest needing at most a quarter
 *      of the output's bytes (at least 16 MiB), else min-ws's; untimed: the
 *      first heuristic candidate within the output's bytes (at least 16 MiB).
 *   "ws<=4G", "ws<=1G", "ws<=256M" (cu_ws_rung): like balanced with that cap
 *      (the same timings, no extra trials).
 * Candidates: status SUCCESS, a workspace query that succeeds, no
 * fp32->fp16 conversion math, in fp32 mode no tensor-op math (CUDNN_FMA_MATH
 * = true fp32), in deterministic mode only CUDNN_DETERMINISTIC ones.
 * workspace = max(fwd, bwd-data, bwd-filter, bias-gradient partial sums). */
#include <stdio.h>
#include <string.h>
#include "backend/cuda/cuda_internal.h"

/* Conv: the x and y tensor descriptors for batch n. */
static int conv_set_batch(cu_layer *L, int n, vd_err *e) {
    CUDNN_CHECK(e, cudnnSetTensor4dDescriptor(L->xd, L->cl ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, L->dt, n,
                                              L->in_c[0], L->in_h, L->in_w));
    CUDNN_CHECK(e, cudnnSetTensor4dDescriptor(L->yd, L->cl ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, L->dt, n,
                                              L->c, L->h, L->w));
    L->desc_n = n;
    return VD_OK;
}

/* Batch norm: the x (= y) tensor descriptor for batch n and the parameters'
 * descriptor derived from it. */
static int bn_set_batch(cu_layer *L, int n, vd_err *e) {
    CUDNN_CHECK(e, cudnnSetTensor4dDescriptor(L->xd, L->cl ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, L->dt, n,
                                              L->c, L->h, L->w));
    CUDNN_CHECK(e, cudnnDeriveBNTensorDescriptor(L->pd, L->xd, CUDNN_BATCHNORM_SPATIAL));
    L->desc_n = n;
    return VD_OK;
}

/* The op's descriptors for batch n (conv_set_batch, bn_set_batch), set
 * again only when n differs from the batch they describe. */
typedef int (*set_batch_fn)(cu_layer *L, int n, vd_err *e);
static int ensure_batch(cu_layer *L, int n, set_batch_fn set, vd_err *e) {
    if (n <= 0) return vd_errf(e, VD_EINTERNAL, "batch %d", n);
    return L->desc_n == n ? VD_OK : set(L, n, e);
}

/* ---- conv sub-batches past INT32_MAX elements (see the top) ---------------- */
/* Elements of one sample of conv layer L's input and of its output. */
static int64_t conv_in_numel(const cu_layer *L) { return (int64_t)L->in_c[0] * L->in_h * L->in_w; }
static int64_t conv_out_numel(const cu_layer *L) { return (int64_t)L->c * L->h * L->w; }

/* The describe batch of conv layer L at batch b: b where its input and
 * output at b stay within INT32_MAX elements; else, nmax being the most
 * samples that do, b split into k = ceil(b / nmax) near-equal sub-batches:
 * the largest, ceil(b / k) (<= nmax). 0: one sample alone is over it. */
static int conv_desc_batch(const cu_layer *L, int b) {
    int64_t per = conv_in_numel(L) > conv_out_numel(L) ? conv_in_numel(L) : conv_out_numel(L);
    int64_t nmax = per > 0 ? (int64_t)INT32_MAX / per : 0;
    if (nmax < 1) return 0;
    if (b <= nmax) return b;
    int64_t k = (b + nmax - 1) / nmax;
    return (int)((b + k - 1) / k);
}

/* The k = ceil(n / L->desc_batch) sub-batches a call of n samples runs as
 * (n > desc_batch): sub-batch i is samples [*s0, *s0 + *m), the first n % k
 * of them one sample larger than the rest, each at most desc_batch. */
static int conv_slices(const cu_layer *L, int n) { return (n + L->desc_batch - 1) / L->desc_batch; }
static void conv_slice(int n, int k, int i, int *s0, int *m) {
    int q = n / k, r = n % k;
    *m = q + (i < r ? 1 : 0);
    *s0 = i * q + (i < r ? i : r);
}

/* *s = *io on its samples [s0, s0 + m): the feature maps (x, y, dy, dx;
 * contiguous per sample in NCHW and channels-last alike, elements of
 * io->act) moved by s0 samples, n0 / n_batch their place in the batch;
 * parameters, workspace and betas as io's. */
static void conv_slice_io(const cu_layer *L, const vd_op_io *io, int s0, int m, vd_op_io *s) {
    const uint64_t es = (uint64_t)vd_dtype_bytes(io->act);
    const uint64_t xo = (uint64_t)s0 * (uint64_t)conv_in_numel(L) * es;
    const uint64_t yo = (uint64_t)s0 * (uint64_t)conv_out_numel(L) * es;
    *s = *io;
    s->n = m;
    s->n0 = io->n0 + s0;
    s->n_batch = vd_op_io_batch(io);
    if (io->x[0]) s->x[0] = (const float *)(const void *)((const char *)io->x[0] + xo);
    if (io->dx[0]) s->dx[0] = (float *)(void *)((char *)io->dx[0] + xo);
    if (io->y) s->y = (float *)(void *)((char *)io->y + yo);
    if (io->dy) s->dy = (const float *)(const void *)((const char *)io->dy + yo);
}

/* Bytes (256-aligned) of the fp32 partial dW a sub-batch that adds to dw
 * writes at the front of the workspace (fp32 only: channels-last convs add
 * their KRSC dW, conv_cl_io). */
static uint64_t conv_dw_tmp(const vd_net *net, int li) {
    return VD_ALIGN_UP((uint64_t)cu_weight_numel(net, li) * sizeof(float), (uint64_t)256);
}

void cu_dnn_layer_free(cu_layer *L) {
    cu_graph_layer_free(L);
    if (L->xd) cudnnDestroyTensorDescriptor(L->xd);
    if (L->yd) cudnnDestroyTensorDescriptor(L->yd);
    if (L->pd) cudnnDestroyTensorDescriptor(L->pd);
    if (L->wd) cudnnDestroyFilterDescriptor(L->wd);
    if (L->cd) cudnnDestroyConvolutionDescriptor(L->cd);
    L->xd = L->yd = L->pd = NULL;
    L->wd = NULL;
    L->cd = NULL;
}

/* The math type a heuristic result may run with in our mode, or -1 to skip. */
static int usable_math(const cu_ctx *c, cudnnMathType_t m) {
    if (m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return -1;   /* fp16 inside: never */
    if (c->math == VD_MATH_FP32) {
        if (m == CUDNN_TENSOR_OP_MATH) return -1;
        return CUDNN_FMA_MATH;      /* DEFAULT would allow TF32 on fp32 data */
    }
    return (int)m;
}

typedef struct cand { int algo; cudnnMathType_t math; uint64_t ws; float ms; } cand;

/* ms: the measured time (cudnnFind, or the re-timed median), < 0 untimed */
static void add_cand_ms(cand *list, int *n, int cap, int algo, cudnnMathType_t m, uint64_t ws,
                        float ms) {
    for (int i = 0; i < *n; i++)
        if (list[i].algo == algo && list[i].math == m) return;
    if (*n < cap) list[(*n)++] = (cand){algo, m, ws, ms};
}

static void add_cand(cand *list, int *n, int cap, int algo, cudnnMathType_t m, uint64_t ws) {
    add_cand_ms(list, n, cap, algo, m, ws, -1.0f);
}

static int min_ws(const cand *list, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (list[i].ws < list[best].ws) best = i;
    return best;
}

/* First candidate in heuristic (expected speed) order needing at most lim
 * bytes; the least-workspace one if none does. */
static int first_within(const cand *list, int n, uint64_t lim) {
    for (int i = 0; i < n; i++)
        if (list[i].ws <= lim) return i;
    return min_ws(list, n);
}

enum { MAX_CANDS = 32 };

/* Workspace bytes of legacy algorithm algo in direction dir (CU_GD_FWD,
 * CU_GD_BWD_DATA, CU_GD_BWD_FILTER) with L->cd's current math type. */
static cudnnStatus_t dir_ws(const cu_ctx *c, const cu_layer *L, int dir, int algo, size_t *ws) {
    if (dir == CU_GD_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(c->dnn, L->xd, L->wd, L->cd, L->yd,
                                                       (cudnnConvolutionFwdAlgo_t)algo, ws);
    if (dir == CU_GD_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            c->dnn, L->wd, L->yd, L->cd, L->xd, (cudnnConvolutionBwdDataAlgo_t)algo, ws);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        c->dnn, L->xd, L->yd, L->cd, L->wd, (cudnnConvolutionBwdFilterAlgo_t)algo, ws);
}

/* Append one cudnnGet*_v7 / cudnnFind*Ex result of direction dir to list[*n]
 * if usable: status SUCCESS, usable math, time >= 0 (heuristic results pass
 * 0), deterministic in deterministic mode, a workspace query for the math
 * we will run with that succeeds and gives at most cap bytes. */
static void keep_result(cu_ctx *c, cu_layer *L, int dir, int algo, cudnnStatus_t status,
                        cudnnMathType_t math, cudnnDeterminism_t det, float time, uint64_t cap,
                        cand *list, int *n) {
    int m = usable_math(c, math);
    size_t ws = 0;
    if (status != CUDNN_STATUS_SUCCESS || m < 0 || time < 0) return;
    if (c->deterministic && det != CUDNN_DETERMINISTIC) return;
    if (cudnnSetConvolutionMathType(L->cd, (cudnnMathType_t)m) != CUDNN_STATUS_SUCCESS ||
        dir_ws(c, L, dir, algo, &ws) != CUDNN_STATUS_SUCCESS || ws > cap)
        return;
    add_cand_ms(list, n, MAX_CANDS, algo, (cudnnMathType_t)m, ws, time);
}

static int conv_candidates(cu_ctx *c, cu_layer *L, cand *fw, int *nf, cand *bd, int *nd,
                           cand *bf, int *nb, vd_err *e) {
    uint64_t cap = c->total_mem / 4;    /* a workspace larger than this is never useful */
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT * 2];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT * 2];
    cudnnConvolutionBwdFilterAlgoPerf_t pb[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT * 2];
    int rf = 0, rd = 0, rb = 0;
    cudnnMathType_t base = c->math == VD_MATH_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    CUDNN_CHECK(e, cudnnSetConvolutionMathType(L->cd, base));
    CUDNN_CHECK(e, cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, L->xd, L->wd, L->cd, L->yd,
                                                          (int)VD_ARRAY_LEN(pf), &rf, pf));
    CUDNN_CHECK(e, cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, L->wd, L->yd, L->cd, L->xd,
                                                               (int)VD_ARRAY_LEN(pd), &rd, pd));
    CUDNN_CHECK(e, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                       c->dnn, L->xd, L->yd, L->cd, L->wd, (int)VD_ARRAY_LEN(pb), &rb, pb));
    *nf = *nd = *nb = 0;
    for (int i = 0; i < rf; i++)
        keep_result(c, L, CU_GD_FWD, (int)pf[i].algo, pf[i].status, pf[i].mathType,
                    pf[i].determinism, 0.0f, cap, fw, nf);
    for (int i = 0; i < rd; i++)
        keep_result(c, L, CU_GD_BWD_DATA, (int)pd[i].algo, pd[i].status, pd[i].mathType,
                    pd[i].determinism, 0.0f, cap, bd, nd);
    for (int i = 0; i < rb; i++)
        keep_result(c, L, CU_GD_BWD_FILTER, (int)pb[i].algo, pb[i].status, pb[i].mathType,
                    pb[i].determinism, 0.0f, cap, bf, nb);
    /* The heuristics always list the implicit-GEMM family; make sure the
     * zero-workspace fallbacks are present even if they were ranked out. */
    {
        size_t ws;
        cudnnMathType_t m = c->math == VD_MATH_FP32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
        if (cudnnSetConvolutionMathType(L->cd, m) == CUDNN_STATUS_SUCCESS) {
            if (dir_ws(c, L, CU_GD_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &ws) ==
                CUDNN_STATUS_SUCCESS)
                add_cand(fw, nf, MAX_CANDS, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, m, ws);
            if (dir_ws(c, L, CU_GD_BWD_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &ws) ==
                CUDNN_STATUS_SUCCESS)
                add_cand(bd, nd, MAX_CANDS, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, m, ws);
            if (dir_ws(c, L, CU_GD_BWD_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &ws) ==
                CUDNN_STATUS_SUCCESS)
                add_cand(bf, nb, MAX_CANDS, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, m, ws);
        }
    }
    if (!*nf || !*nd || !*nb)
        return vd_errf(e, VD_EUNSUPPORTED,
                       "no usable cuDNN algorithm (forward %d, backward-data %d, backward-filter "
                       "%d candidates) in %s%s mode",
                       *nf, *nd, *nb, vd_math_name(c->math),
                       c->deterministic ? " deterministic" : "");
    return VD_OK;
}

static void make_opt(cu_layer *L, int k, const char *label, uint64_t cap, const cand *f,
                     const cand *d, const cand *b, uint64_t bias_ws) {
    cu_conv_opt *co = &L->conv_opts[k];
    memset(co, 0, sizeof *co);
    for (int d = 0; d < CU_GD_COUNT; d++) co->gplan[d] = -1;   /* legacy path */
    co->fwd = (cudnnConvolutionFwdAlgo_t)f->algo;
    co->bwd_data = (cudnnConvolutionBwdDataAlgo_t)d->algo;
    co->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)b->algo;
    co->fwd_math = f->math;
    co->bwd_data_math = d->math;
    co->bwd_filter_math = b->math;
    co->fwd_ws = f->ws;
    co->bwd_data_ws = d->ws;
    co->bwd_filter_ws = b->ws;
    co->cap = cap;
    vd_algo_opt *o = &L->opts[k];
    memset(o, 0, sizeof *o);
    o->fwd_algo = f->algo;
    o->bwd_data_algo = d->algo;
    o->bwd_filter_algo = b->algo;
    uint64_t ws_bwd = d->ws;
    if (b->ws > ws_bwd) ws_bwd = b->ws;
    if (bias_ws > ws_bwd) ws_bwd = bias_ws;
    o->ws_fwd = f->ws;
    o->ws_bwd = ws_bwd;
    o->workspace = o->ws_fwd > ws_bwd ? o->ws_fwd : ws_bwd;
    snprintf(o->label, sizeof o->label, "%s", label);
}

/* Append an option (chosen under workspace cap cap) unless an equal one
 * (same three algorithms and math types) is already listed. */
static void add_opt(cu_layer *L, const char *label, uint64_t cap, const cand *f, const cand *d,
                    const cand *b, uint64_t bias_ws) {
    for (int k = 0; k < L->n_opts; k++) {
        const cu_conv_opt *o = &L->conv_opts[k];
        if ((int)o->fwd == f->algo && o->fwd_math == f->math && (int)o->bwd_data == d->algo &&
            o->bwd_data_math == d->math && (int)o->bwd_filter == b->algo &&
            o->bwd_filter_math == b->math)
            return;
    }
    if (L->n_opts >= CU_MAX_OPTS) return;
    make_opt(L, L->n_opts, label, cap, f, d, b, bias_ws);
    L->n_opts++;
}

/* One direction's candidates for the options: list[n] fastest first (timed)
 * or in heuristic order; mw: its least-workspace candidate. */
typedef struct dir_list { const cand *list; int n; const cand *mw; } dir_list;

/* Add the option of, per direction, the first candidate within lim (mw's
 * where none is). */
static void add_within(cu_layer *L, const char *label, uint64_t lim, const dir_list dl[3],
                       uint64_t bias_ws) {
    const cand *k[3];
    for (int d = 0; d < 3; d++) {
        int i = first_within(dl[d].list, dl[d].n, lim);
        k[d] = dl[d].list[i].ws <= lim ? &dl[d].list[i] : dl[d].mw;
    }
    add_opt(L, label, lim, k[0], k[1], k[2], bias_ws);
}

void cu_conv_opts_order(cu_layer *L) {
    /* insertion sort (stable) of options 1..n-1 */
    for (int i = 2; i < L->n_opts; i++)
        for (int j = i; j > 1; j--) {
            const vd_algo_opt *a = &L->opts[j - 1], *b = &L->opts[j];
            const cu_conv_opt *ca = &L->conv_opts[j - 1], *cb = &L->conv_opts[j];
            if (b->workspace < a->workspace ||
                (b->workspace == a->workspace && cb->cap <= ca->cap))
                break;
            vd_algo_opt to = L->opts[j];
            L->opts[j] = L->opts[j - 1];
            L->opts[j - 1] = to;
            cu_conv_opt tc = L->conv_opts[j];
            L->conv_opts[j] = L->conv_opts[j - 1];
            L->conv_opts[j - 1] = tc;
        }
}

static void set_key(const cu_ctx *c, const vd_net *net, int li, cu_layer *L) {
    const vd_layer *l = &net->layers[li];
    int k[23] = {L->in_c[0], L->in_h, L->in_w, L->c, L->h, L->w, l->u.conv.kh, l->u.conv.kw,
                 l->u.conv.sh, l->u.conv.sw, l->u.conv.ph, l->u.conv.pw, l->u.conv.dh,
                 l->u.conv.dw, l->u.conv.groups, l->u.conv.bias ? 1 : 0, c->batch,
                 (int)c->math, c->deterministic ? 1 : 0, c->tune ? 1 : 0,
                 (int)cu_conv_weight_align(net, li), cu_conv_input_shared(net, li) ? 1 : 0,
                 cu_conv_fwd_epi(c, net, li)};
    memcpy(L->key, k, sizeof L->key);
}

/* Timed candidates, like cudnn.benchmark: cudnnFind*AlgorithmEx runs every
 * algorithm on buffers we pass (it allocates no device memory itself) and
 * returns them fastest first. The buffers are one temporary cudaMalloc
 * (x, y, w, dw and a workspace of cap bytes) freed before returning: this
 * runs in layer_setup, before the executor's pool exists. If that memory is
 * not available the lists stay empty and the caller keeps the heuristics.
 * Kept: status SUCCESS, usable math, workspace <= cap (queried again for the
 * math we will run with). */
static int conv_tune(cu_ctx *c, const vd_layer *l, cu_layer *L, uint64_t cap, cand *tf, int *ntf,
                     cand *td, int *ntd, cand *tb, int *ntb, vd_err *e) {
    *ntf = *ntd = *ntb = 0;
    const uint64_t A = 256;
    uint64_t nb = (uint64_t)L->desc_batch;   /* the batch L's descriptors describe */
    uint64_t xb = VD_ALIGN_UP(nb * L->in_c[0] * L->in_h * L->in_w * 4, A);
    uint64_t yb = VD_ALIGN_UP(nb * L->c * L->h * L->w * 4, A);
    int g = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    uint64_t wb = VD_ALIGN_UP((uint64_t)l->u.conv.out * (L->in_c[0] / g) * l->u.conv.kh *
                                  l->u.conv.kw * 4, A);
    size_t fr = 0, tot = 0;
    CUDA_CHECK(e, cudaMemGetInfo(&fr, &tot));
    uint64_t fixed = xb + yb + 2 * wb, reserve = 512ull << 20;
    if (fixed + reserve + (64ull << 20) > fr) return VD_OK;        /* keep the heuristics */
    if (fixed + reserve + cap > fr) cap = fr - fixed - reserve;
    char *buf = NULL;
    if (cudaMalloc((void **)&buf, fixed + cap) != cudaSuccess) {
        cudaGetLastError();
        return VD_OK;
    }
    float *x = (float *)buf, *y = (float *)(buf + xb), *w = (float *)(buf + xb + yb),
          *dw = (float *)(buf + xb + yb + wb);
    void *ws = buf + fixed;
    int rc = VD_OK;
    cudnnConvolutionFwdAlgoPerf_t pf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT * 2];
    cudnnConvolutionBwdDataAlgoPerf_t pd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT * 2];
    cudnnConvolutionBwdFilterAlgoPerf_t pb[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT * 2];
    int rf = 0, rd = 0, rb = 0;
    cudnnStatus_t st;
    cudnnMathType_t base = c->math == VD_MATH_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    cudaStream_t s = cu_compute(c);
    const vd_dtype ft = vd_math_act_dtype(c->math);   /* 16-bit: no inf / NaN (cuk_fill_uniform) */
    if ((rc = cuk_fill_uniform(s, c->sm_count, x, (int64_t)(xb / 4), 11, -1.0f, 1.0f, ft, e)) ||
        (rc = cuk_fill_uniform(s, c->sm_count, y, (int64_t)(yb / 4), 12, -1.0f, 1.0f, ft, e)) ||
        (rc = cuk_fill_uniform(s, c->sm_count, w, (int64_t)(wb / 4), 13, -0.1f, 0.1f, ft, e)))
        goto done;
#define TUNE_CHECK(expr)                                                                     \
    do {                                                                                     \
        st = (expr);                                                                         \
        if (st != CUDNN_STATUS_SUCCESS) {                                                    \
            rc = vd_errf(e, VD_EDEVICE, "cuDNN error %s in %s at %s:%d: %s",                  \
                         cudnnGetErrorString(st), __func__, __FILE__, __LINE__, #expr);       \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)
    TUNE_CHECK(cudnnSetConvolutionMathType(L->cd, base));
    TUNE_CHECK(cudnnFindConvolutionForwardAlgorithmEx(c->dnn, L->xd, x, L->wd, w, L->cd, L->yd, y,
                                                      (int)VD_ARRAY_LEN(pf), &rf, pf, ws, cap));
    TUNE_CHECK(cudnnSetConvolutionMathType(L->cd, base));
    TUNE_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(c->dnn, L->wd, w, L->yd, y, L->cd,
                                                           L->xd, x, (int)VD_ARRAY_LEN(pd), &rd,
                                                           pd, ws, cap));
    TUNE_CHECK(cudnnSetConvolutionMathType(L->cd, base));
    TUNE_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(c->dnn, L->xd, x, L->yd, y, L->cd,
                                                             L->wd, dw, (int)VD_ARRAY_LEN(pb),
                                                             &rb, pb, ws, cap));
#undef TUNE_CHECK
    /* c->tune is never set in deterministic mode: no determinism filter here */
    for (int i = 0; i < rf; i++)
        keep_result(c, L, CU_GD_FWD, (int)pf[i].algo, pf[i].status, pf[i].mathType,
                    CUDNN_DETERMINISTIC, pf[i].time, cap, tf, ntf);
    for (int i = 0; i < rd; i++)
        keep_result(c, L, CU_GD_BWD_DATA, (int)pd[i].algo, pd[i].status, pd[i].mathType,
                    CUDNN_DETERMINISTIC, pd[i].time, cap, td, ntd);
    for (int i = 0; i < rb; i++)
        keep_result(c, L, CU_GD_BWD_FILTER, (int)pb[i].algo, pb[i].status, pb[i].mathType,
                    CUDNN_DETERMINISTIC, pb[i].time, cap, tb, ntb);
    if (c->retime || c->conv_mix) {
        /* cudnnFind times each algorithm about once, and the first launch of
         * a kernel can include loading its module (lazy loading): re-time
         * the best few per direction, median of 3 after a warm-up. */
        cudaEvent_t ev[2] = {NULL, NULL};
        const float one = 1.0f, zero = 0.0f;
        if (cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess) {
            rc = vd_errf(e, VD_EDEVICE, "cudaEventCreate failed while tuning '%s'", l->name);
            goto retime_done;
        }
        for (int dir = 0; dir < 3; dir++) {
            cand *list = dir == 0 ? tf : dir == 1 ? td : tb;
            int n = dir == 0 ? *ntf : dir == 1 ? *ntd : *ntb;
            int top = n < 3 ? n : 3;
            float med[3];
            for (int k = 0; k < top; k++) {
                float t[3];
                for (int r = -1; r < 3; r++) {
                    cudnnStatus_t cs = cudnnSetConvolutionMathType(L->cd, list[k].math);
                    if (cudaEventRecord(ev[0], s) != cudaSuccess) cs = CUDNN_STATUS_EXECUTION_FAILED;
                    if (cs == CUDNN_STATUS_SUCCESS && dir == 0)
                        cs = cudnnConvolutionForward(c->dnn, &one, L->xd, x, L->wd, w, L->cd,
                                                     (cudnnConvolutionFwdAlgo_t)list[k].algo, ws,
                                                     list[k].ws, &zero, L->yd, y);
                    else if (cs == CUDNN_STATUS_SUCCESS && dir == 1)
                        cs = cudnnConvolutionBackwardData(
                            c->dnn, &one, L->wd, w, L->yd, y, L->cd,
                            (cudnnConvolutionBwdDataAlgo_t)list[k].algo, ws, list[k].ws, &zero,
                            L->xd, x);
                    else if (cs == CUDNN_STATUS_SUCCESS)
                        cs = cudnnConvolutionBackwardFilter(
                            c->dnn, &one, L->xd, x, L->yd, y, L->cd,
                            (cudnnConvolutionBwdFilterAlgo_t)list[k].algo, ws, list[k].ws, &zero,
                            L->wd, dw);
                    if (cs != CUDNN_STATUS_SUCCESS || cudaEventRecord(ev[1], s) != cudaSuccess ||
                        cudaEventSynchronize(ev[1]) != cudaSuccess) {
                        rc = vd_errf(e, VD_EDEVICE, "re-timing conv '%s' (direction %d, algo %d) "
                                     "failed: %s", l->name, dir, list[k].algo,
                                     cudnnGetErrorString(cs));
                        goto retime_done;
                    }
                    if (r >= 0 && cudaEventElapsedTime(&t[r], ev[0], ev[1]) != cudaSuccess)
                        t[r] = 1e30f;
                }
                float a = t[0], b = t[1], m = t[2];   /* median of 3 */
                med[k] = a > b ? (b > m ? b : (a > m ? m : a)) : (a > m ? a : (b > m ? m : b));
            }
            for (int k = 0; k < top; k++) list[k].ms = med[k];
            /* stable insertion sort of the first top by median */
            for (int i = 1; i < top; i++)
                for (int j = i; j > 0 && med[j] < med[j - 1]; j--) {
                    float tm = med[j]; med[j] = med[j - 1]; med[j - 1] = tm;
                    cand tc = list[j]; list[j] = list[j - 1]; list[j - 1] = tc;
                }
        }
    retime_done:
        for (int i = 0; i < 2; i++)
            if (ev[i]) cudaEventDestroy(ev[i]);
        if (rc) goto done;
    }
done:
    if (cudaStreamSynchronize(s) != cudaSuccess && !rc)
        rc = vd_errf(e, VD_EDEVICE, "CUDA error %s while tuning conv '%s'",
                     cudaGetErrorString(cudaGetLastError()), l->name);
    cudaFree(buf);
    return rc;
}

/* cu_conv_setup's descriptors and options; *shared: copied from an earlier
 * layer of equal geometry (set up by this function already). */
static int conv_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, bool *shared,
                      vd_err *e) {
    const vd_layer *l = &net->layers[li];
    L->desc_batch = conv_desc_batch(L, c->batch);
    if (L->desc_batch < 1)
        return vd_errf(e, VD_EUNSUPPORTED,
                       "one sample's input (%lld elements) or output (%lld) is over cuDNN's "
                       "limit of %d elements per tensor", (long long)conv_in_numel(L),
                       (long long)conv_out_numel(L), INT32_MAX);
    if (L->desc_batch < c->batch && c->conv_debug)
        fprintf(stderr, "vdnn conv: layer '%s': described at batch %d (at batch %d a tensor "
                "passes %d elements): larger calls run as sub-batches\n", l->name,
                L->desc_batch, c->batch, INT32_MAX);
    CUDNN_CHECK(e, cudnnCreateTensorDescriptor(&L->xd));
    CUDNN_CHECK(e, cudnnCreateTensorDescriptor(&L->yd));
    CUDNN_CHECK(e, cudnnCreateFilterDescriptor(&L->wd));
    CUDNN_CHECK(e, cudnnCreateConvolutionDescriptor(&L->cd));
    int g = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    CUDNN_CHECK(e, cudnnSetFilter4dDescriptor(L->wd, L->dt,
                                              L->cl ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                              l->u.conv.out, L->in_c[0] / g, l->u.conv.kh,
                                              l->u.conv.kw));
    CUDNN_CHECK(e, cudnnSetConvolution2dDescriptor(
                       L->cd, l->u.conv.ph, l->u.conv.pw, l->u.conv.sh, l->u.conv.sw,
                       l->u.conv.dh > 0 ? l->u.conv.dh : 1, l->u.conv.dw > 0 ? l->u.conv.dw : 1,
                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(e, cudnnSetConvolutionGroupCount(L->cd, g));
    int rc = conv_set_batch(L, L->desc_batch, e);
    if (rc) return rc;
    int on, oc, oh, ow;
    CUDNN_CHECK(e, cudnnGetConvolution2dForwardOutputDim(L->cd, L->xd, L->wd, &on, &oc, &oh, &ow));
    if (oc != L->c || oh != L->h || ow != L->w)
        return vd_errf(e, VD_EINTERNAL,
                       "cuDNN computes output %dx%dx%d but the net recorded %dx%dx%d", oc, oh, ow,
                       L->c, L->h, L->w);
    uint64_t bias_ws = 0;   /* the bias gradient runs over the whole call, sub-batches or not */
    if (l->u.conv.bias) {
        int split = cu_chan_split(c->batch, L->c, (int64_t)L->h * L->w, c->sm_count, L->cl);
        if (split > 1) bias_ws = (uint64_t)split * (uint64_t)L->c * sizeof(float);
    }
    uint64_t ybytes = (uint64_t)L->desc_batch * (uint64_t)L->c * (uint64_t)L->h * (uint64_t)L->w * 4;
    set_key(c, net, li, L);
    /* equal geometry earlier in the net: same options (and graph plans), no second tuning */
    for (int j = 0; j < li; j++) {
        const cu_layer *P = &c->layers[j];
        if (P->op == VD_OP_CONV && P->n_opts > 0 && !memcmp(P->key, L->key, sizeof L->key)) {
            L->n_opts = P->n_opts;
            L->tuned = P->tuned;
            memcpy(L->opts, P->opts, sizeof L->opts);
            memcpy(L->conv_opts, P->conv_opts, sizeof L->conv_opts);
            L->g = P->g;
            L->g_owner = false;
            *shared = true;
            if (c->conv_debug)
                fprintf(stderr, "vdnn conv: layer '%s': %s API, options of layer '%s' (same "
                        "geometry)\n", l->name, L->g ? "graph" : "legacy", net->layers[j].name);
            return VD_OK;
        }
    }
    /* graph_ms >= 0: the graph API's options are set up and timed; the
     * legacy ones replace them if their fastest is timed 8% faster (a wide
     * margin keeps the choice from flipping between runs on timing noise: a
     * saved profile must match the options of the run that loads it) */
    float graph_ms = -1.0f;
    if (!c->conv_legacy) {
        bool no_engine = false;
        char why[200];
        if ((rc = cu_graph_conv_setup(c, net, li, L, bias_ws, &no_engine, why, sizeof why, e)))
            return rc;
        if (!no_engine) {
            graph_ms = c->conv_mix ? cu_graph_conv_fastest_ms(L) : -1.0f;
            if (graph_ms < 0.0f) return VD_OK;
        } else if (c->conv_debug) {
            fprintf(stderr, "vdnn conv: layer '%s': legacy API (graph API: %s)\n", l->name, why);
        }
    } else if (c->conv_debug) {
        fprintf(stderr, "vdnn conv: layer '%s': legacy API (--conv-api legacy)\n", l->name);
    }
    cand fw[MAX_CANDS], bd[MAX_CANDS], bf[MAX_CANDS];
    int nf = 0, nd = 0, nb = 0;
    if ((rc = conv_candidates(c, L, fw, &nf, bd, &nd, bf, &nb, e))) return rc;
    int mf = min_ws(fw, nf), md = min_ws(bd, nd), mb = min_ws(bf, nb);
    uint64_t lim = ybytes / 4;
    if (lim < (16ull << 20)) lim = 16ull << 20;
    cand tf[MAX_CANDS], td[MAX_CANDS], tb[MAX_CANDS];
    int ntf = 0, ntd = 0, ntb = 0;
    if (c->tune) {
        uint64_t cap = ybytes > (2ull << 30) ? ybytes : (2ull << 30);
        if ((rc = conv_tune(c, l, L, cap, tf, &ntf, td, &ntd, tb, &ntb, e))) return rc;
    }
    /* timed lists are in measured-time order, all within conv_tune's cap;
     * untimed: heuristic order, and balanced's limit is the output's bytes */
    bool timed = ntf && ntd && ntb;
    if (graph_ms >= 0.0f) {
        float leg = timed && tf[0].ms >= 0.0f && td[0].ms >= 0.0f && tb[0].ms >= 0.0f
                        ? tf[0].ms + td[0].ms + tb[0].ms : -1.0f;
        bool legacy = leg >= 0.0f && leg < 0.92f * graph_ms;
        if (c->conv_debug)
            fprintf(stderr, "vdnn conv: layer '%s': %s API (fastest: graph %.3f ms, legacy %.3f ms)\n",
                    l->name, legacy ? "legacy" : "graph", (double)graph_ms, (double)leg);
        if (!legacy) return VD_OK;
        cu_graph_layer_free(L);
        L->n_opts = 0;
    }
    if (!timed) lim = ybytes < (16ull << 20) ? (16ull << 20) : ybytes;
    const dir_list dl[3] = {{timed ? tf : fw, timed ? ntf : nf, &fw[mf]},
                            {timed ? td : bd, timed ? ntd : nd, &bd[md]},
                            {timed ? tb : bf, timed ? ntb : nb, &bf[mb]}};
    L->tuned = timed;
    L->n_opts = 0;
    add_opt(L, "fastest", UINT64_MAX, &dl[0].list[0], &dl[1].list[0], &dl[2].list[0], bias_ws);
    add_opt(L, "min-ws", 0, &fw[mf], &bd[md], &bf[mb], bias_ws);
    add_within(L, "balanced", lim, dl, bias_ws);
    for (int r = 0; r < CU_WS_RUNGS; r++) {   /* the workspace ladder, same timings */
        uint64_t rcap;
        const char *rlabel;
        cu_ws_rung(r, &rcap, &rlabel);
        add_within(L, rlabel, rcap, dl, bias_ws);
    }
    cu_conv_opts_order(L);
    return VD_OK;
}

int cu_conv_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e) {
    bool shared = false;
    int rc = conv_setup(c, net, li, L, &shared, e);
    if (rc || shared || L->desc_batch >= c->batch || L->cl) return rc;
    /* sub-batches in fp32: a slice adding to dw computes its dW into the
     * workspace front first (see the top; channels-last ones reuse the KRSC
     * dW that cu_layer_setup counts) */
    const uint64_t t = conv_dw_tmp(net, li);
    for (int k = 0; k < L->n_opts; k++) {
        vd_algo_opt *o = &L->opts[k];
        uint64_t b = L->conv_opts[k].bwd_filter_ws + t;
        if (b > o->ws_bwd) o->ws_bwd = b;
        if (o->ws_bwd > o->workspace) o->workspace = o->ws_bwd;
    }
    cu_conv_opts_order(L);
    return VD_OK;
}

/* ---- conv ------------------------------------------------------------------ */
int cu_legacy_conv_dir(cu_ctx *c, const vd_net *net, int li, int dir, const vd_op_io *io,
                       float beta, vd_err *e) {
    cu_layer *L = &c->layers[li];
    const vd_layer *l = &net->layers[li];
    if (io->n > L->desc_batch)
        return vd_errf(e, VD_EINTERNAL, "conv '%s': %d samples in one call, over the describe "
                       "batch %d", l->name, io->n, L->desc_batch);
    int rc = ensure_batch(L, io->n, conv_set_batch, e);
    if (rc) return rc;
    cand fw[MAX_CANDS], bd[MAX_CANDS], bf[MAX_CANDS];
    int nf = 0, nd = 0, nb = 0;
    if ((rc = conv_candidates(c, L, fw, &nf, bd, &nd, bf, &nb, e))) return rc;
    const cand *list = dir == CU_GD_FWD ? fw : dir == CU_GD_BWD_FILTER ? bf : bd;
    int n = dir == CU_GD_FWD ? nf : dir == CU_GD_BWD_FILTER ? nb : nd;
    uint64_t wsb = io->ws ? io->ws_bytes : 0;
    const cand *k = NULL;
    for (int i = 0; i < n && !k; i++)
        if (list[i].ws <= wsb) k = &list[i];
    if (!k)
        return vd_errf(e, VD_EUNSUPPORTED,
                       "conv '%s': no cuDNN engine or algorithm for direction %d at batch %d fits "
                       "%llu bytes of workspace", l->name, dir, io->n, (unsigned long long)wsb);
    const float one = 1.0f, zero = 0.0f, b = beta != 0.0f ? 1.0f : 0.0f;
    CUDNN_CHECK(e, cudnnSetConvolutionMathType(L->cd, k->math));
    if (dir == CU_GD_FWD)
        CUDNN_CHECK(e, cudnnConvolutionForward(c->dnn, &one, L->xd, io->x[0], L->wd, io->w, L->cd,
                                               (cudnnConvolutionFwdAlgo_t)k->algo, io->ws, wsb,
                                               &zero, L->yd, io->y));
    else if (dir == CU_GD_BWD_FILTER)
        CUDNN_CHECK(e, cudnnConvolutionBackwardFilter(
                           c->dnn, &one, L->xd, io->x[0], L->yd, io->dy, L->cd,
                           (cudnnConvolutionBwdFilterAlgo_t)k->algo, io->ws, wsb, &b, L->wd,
                           io->dw));
    else
        CUDNN_CHECK(e, cudnnConvolutionBackwardData(c->dnn, &one, L->wd, io->w, L->yd, io->dy,
                                                    L->cd, (cudnnConvolutionBwdDataAlgo_t)k->algo,
                                                    io->ws, wsb, &b, L->xd, io->dx[0]));
    return VD_OK;
}

/* Channels-last maps (math tf32, bf16, fp16): the conv's operands as cuDNN
 * takes them. *b = *io with w the KRSC copy of the weight in the maps'
 * element type (made here, at the start of the workspace: tf32's floats
 * moved unchanged, 16 bits rounded), dw (backward, when io->dw) a KRSC dW of
 * that type behind it, and ws / ws_bytes the rest. */
static int conv_cl_io(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, bool bwd,
                      vd_op_io *b, vd_err *e) {
    uint64_t wb = cu_wcopy_bytes(c, net, li), need = wb * (bwd && io->dw ? 2 : 1);
    if (!io->ws || io->ws_bytes < need)
        return vd_errf(e, VD_EINTERNAL, "conv '%s': %s needs %llu bytes of workspace, got %llu",
                       net->layers[li].name, vd_math_name(c->math), (unsigned long long)need,
                       (unsigned long long)io->ws_bytes);
    *b = *io;
    char *ws = (char *)io->ws;
    b->w = (const float *)(const void *)ws;
    b->dw = bwd && io->dw ? (float *)(void *)(ws + wb) : NULL;
    b->ws = ws + need;
    b->ws_bytes = io->ws_bytes - need;
    if (b->ws_bytes == 0) b->ws = NULL;
    /* the weight [K, C/g, R, S] as KRSC (channels-last, as the feature maps) */
    const vd_layer *l = &net->layers[li];
    int g = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    return cuk_relayout(cu_compute(c), c->sm_count, io->w, VD_DT_F32, ws, io->act, l->u.conv.out,
                        c->layers[li].in_c[0] / g, (int64_t)l->u.conv.kh * l->u.conv.kw, true,
                        0.0f, e);
}

static int conv_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
static int conv_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, float fbeta,
                         vd_err *e);
static int conv_backward_sliced(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io,
                                float wbeta, vd_err *e);

/* After a channels-last call: the workspace its graph-API conv used
 * (cu_ctx.conv_ws_used, counted from 0 for the call) behind the prefix
 * conv_cl_io took, at least what was recorded before the call. */
static void ws_used_behind(cu_ctx *c, uint64_t before, uint64_t prefix) {
    const uint64_t u = c->conv_ws_used + prefix;
    c->conv_ws_used = before > u ? before : u;
}

int cu_conv_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    if (!c->layers[li].cl) return conv_forward(c, net, li, io, e);
    vd_op_io b;
    int rc = conv_cl_io(c, net, li, io, false, &b, e);
    if (rc) return rc;
    const uint64_t before = c->conv_ws_used;
    c->conv_ws_used = 0;
    rc = conv_forward(c, net, li, &b, e);
    ws_used_behind(c, before, io->ws_bytes - b.ws_bytes);
    return rc;
}

/* Channels-last: the bias gradient from dy, dW as KRSC in the maps' type,
 * then relaid out (16 bits: widened) into the fp32 gradient (added to it with
 * dw_beta 1). */
int cu_conv_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    const float wbeta = io->dw_beta != 0.0f ? 1.0f : 0.0f;
    if (io->n > c->layers[li].desc_batch) return conv_backward_sliced(c, net, li, io, wbeta, e);
    if (!c->layers[li].cl) return conv_backward(c, net, li, io, wbeta, e);
    vd_op_io b;
    int rc = conv_cl_io(c, net, li, io, true, &b, e);
    if (rc) return rc;
    const uint64_t before = c->conv_ws_used;
    c->conv_ws_used = 0;
    rc = conv_backward(c, net, li, &b, 0.0f, e);   /* the KRSC dW: overwritten */
    ws_used_behind(c, before, io->ws_bytes - b.ws_bytes);
    if (!rc && io->dw) {   /* KRSC -> fp32 KCRS */
        const vd_layer *l = &net->layers[li];
        int g = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
        rc = cuk_relayout(cu_compute(c), c->sm_count, b.dw, io->act, io->dw, VD_DT_F32, l->u.conv.out,
                          c->layers[li].in_c[0] / g, (int64_t)l->u.conv.kh * l->u.conv.kw, false,
                          wbeta, e);
    }
    return rc;
}

static int conv_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    cu_layer *L = &c->layers[li];
    const vd_layer *l = &net->layers[li];
    if (io->algo < 0 || io->algo >= L->n_opts)
        return vd_errf(e, VD_EINTERNAL, "conv '%s': algorithm option %d of %d", l->name, io->algo,
                       L->n_opts);
    int rc;
    if (io->n > L->desc_batch) {   /* sub-batches (see the top) */
        const int k = conv_slices(L, io->n);
        for (int i = 0; i < k; i++) {
            int s0, m;
            vd_op_io s;
            conv_slice(io->n, k, i, &s0, &m);
            conv_slice_io(L, io, s0, m, &s);
            if ((rc = conv_forward(c, net, li, &s, e))) return rc;
        }
        return VD_OK;
    }
    if (L->g) {
        if ((rc = cu_graph_conv_run(c, net, li, CU_GD_FWD, io, 0.0f, e))) return rc;
        if (cu_graph_fwd_fuses_bias(c, li, io->algo)) return VD_OK;
    } else {
        if ((rc = ensure_batch(L, io->n, conv_set_batch, e))) return rc;
        const cu_conv_opt *o = &L->conv_opts[io->algo];
        const float one = 1.0f, zero = 0.0f;
        CUDNN_CHECK(e, cudnnSetConvolutionMathType(L->cd, o->fwd_math));
        CUDNN_CHECK(e, cudnnConvolutionForward(c->dnn, &one, L->xd, io->x[0], L->wd, io->w, L->cd,
                                               o->fwd, io->ws, io->ws_bytes, &zero, L->yd,
                                               io->y));
    }
    if (l->u.conv.bias && io->b)
        return cuk_bias_add(cu_compute(c), c->sm_count, io->y, io->b, io->n, L->c,
                            (int64_t)L->h * L->w, io->act, L->cl, e);
    return VD_OK;
}

/* The bias gradient over io's samples into io->db (with io->dw_beta); its
 * partial sums take the front of io->ws (counted in cu_ctx.conv_ws_used). */
static int conv_bias_grad(cu_ctx *c, const cu_layer *L, const vd_op_io *io, vd_err *e) {
    int64_t hw = (int64_t)L->h * L->w;
    int split = cu_bias_grad_split(io->n, L->c, hw, c->sm_count, L->cl, io->ws_bytes);
    const uint64_t partial = split > 1 ? (uint64_t)split * (uint64_t)L->c * sizeof(float) : 0;
    if (partial > c->conv_ws_used) c->conv_ws_used = partial;
    return cuk_chan_sum(cu_compute(c), io->dy, io->n, L->c, hw, split, (float *)io->ws,
                        io->dw_beta != 0.0f ? 1.0f : 0.0f, io->db, io->act, L->cl, e);
}

/* fbeta: the beta of the weight gradient the convolution writes to io->dw
 * (the bias gradient's is io->dw_beta). io->n at most L->desc_batch. */
static int conv_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, float fbeta,
                         vd_err *e) {
    cu_layer *L = &c->layers[li];
    const vd_layer *l = &net->layers[li];
    if (io->algo < 0 || io->algo >= L->n_opts)
        return vd_errf(e, VD_EINTERNAL, "conv '%s': algorithm option %d of %d", l->name, io->algo,
                       L->n_opts);
    int rc = L->g ? VD_OK : ensure_batch(L, io->n, conv_set_batch, e);
    if (rc) return rc;
    const cu_conv_opt *o = &L->conv_opts[io->algo];
    const float one = 1.0f;
    /* bias gradient first: its partial sums share the workspace */
    if (l->u.conv.bias && io->db && (rc = conv_bias_grad(c, L, io, e))) return rc;
    if (L->g) {
        if (io->dw && (rc = cu_graph_conv_run(c, net, li, CU_GD_BWD_FILTER, io, fbeta, e)))
            return rc;
        if (io->dx[0] && (rc = cu_graph_conv_run(c, net, li, CU_GD_BWD_DATA, io,
                                                 io->dx_beta[0] != 0.0f ? 1.0f : 0.0f, e)))
            return rc;
        return VD_OK;
    }
    if (io->dw) {
        CUDNN_CHECK(e, cudnnSetConvolutionMathType(L->cd, o->bwd_filter_math));
        CUDNN_CHECK(e, cudnnConvolutionBackwardFilter(c->dnn, &one, L->xd, io->x[0], L->yd,
                                                      io->dy, L->cd, o->bwd_filter, io->ws,
                                                      io->ws_bytes, &fbeta, L->wd, io->dw));
    }
    if (io->dx[0]) {
        const float beta = io->dx_beta[0] != 0.0f ? 1.0f : 0.0f;
        CUDNN_CHECK(e, cudnnSetConvolutionMathType(L->cd, o->bwd_data_math));
        CUDNN_CHECK(e, cudnnConvolutionBackwardData(c->dnn, &one, L->wd, io->w, L->yd, io->dy,
                                                    L->cd, o->bwd_data, io->ws, io->ws_bytes,
                                                    &beta, L->xd, io->dx[0]));
    }
    return VD_OK;
}

/* cu_conv_backward of a call over the describe batch (see the top): the
 * bias gradient over the whole call, then sub-batch by sub-batch in order
 * its dW added into dw (the first with wbeta, the others with 1) and its dx
 * (the call's dx beta). */
static int conv_backward_sliced(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io,
                                float wbeta, vd_err *e) {
    const cu_layer *L = &c->layers[li];
    const vd_layer *l = &net->layers[li];
    const int g = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    const uint64_t t = conv_dw_tmp(net, li);
    vd_op_io b = *io;   /* channels-last: the weight's copy, the KRSC dW, the rest of the workspace */
    int rc;
    if (L->cl && (rc = conv_cl_io(c, net, li, io, true, &b, e))) return rc;
    if (l->u.conv.bias && io->db && (rc = conv_bias_grad(c, L, &b, e))) return rc;
    b.db = NULL;
    const int k = conv_slices(L, io->n);
    for (int i = 0; i < k; i++) {
        int s0, m;
        vd_op_io s;
        conv_slice(io->n, k, i, &s0, &m);
        conv_slice_io(L, &b, s0, m, &s);
        const float beta = i == 0 ? wbeta : 1.0f;   /* this slice's dW into io->dw */
        if (io->dw) {
            vd_op_io f = s;
            f.dx[0] = NULL;
            if (L->cl) {   /* the KRSC dW (overwritten), into dw (KRSC -> KCRS) */
                if ((rc = conv_backward(c, net, li, &f, 0.0f, e)) ||
                    (rc = cuk_relayout(cu_compute(c), c->sm_count, b.dw, io->act, io->dw,
                                       VD_DT_F32, l->u.conv.out, L->in_c[0] / g,
                                       (int64_t)l->u.conv.kh * l->u.conv.kw, false, beta, e)))
                    return rc;
            } else if (beta == 0.0f) {
                if ((rc = conv_backward(c, net, li, &f, 0.0f, e))) return rc;
            } else {   /* into the workspace front, then added */
                if (!b.ws || b.ws_bytes < t)
                    return vd_errf(e, VD_EINTERNAL, "conv '%s': sub-batches need %llu bytes of "
                                   "workspace for the partial weight gradient, got %llu",
                                   l->name, (unsigned long long)t,
                                   (unsigned long long)b.ws_bytes);
                f.dw = (float *)b.ws;
                f.ws = b.ws_bytes > t ? (void *)((char *)b.ws + t) : NULL;
                f.ws_bytes = b.ws_bytes - t;
                if ((rc = conv_backward(c, net, li, &f, 0.0f, e)) ||
                    (rc = cuk_axpby_copy(cu_compute(c), c->sm_count, f.dw, io->dw, 1.0f,
                                         cu_weight_numel(net, li), VD_DT_F32, e)))
                    return rc;
            }
        }
        if (io->dx[0]) {
            vd_op_io d = s;
            d.dw = NULL;
            if ((rc = conv_backward(c, net, li, &d, 0.0f, e))) return rc;
        }
    }
    return VD_OK;
}

/* ---- batch norm (spatial; PyTorch semantics: biased variance normalises,
 * running_var takes the unbiased one, running = (1-m) running + m batch) --- */
int cu_bn_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    if (l->u.bn.eps < CUDNN_BN_MIN_EPSILON)
        return vd_errf(e, VD_EUNSUPPORTED, "batchnorm eps %g is below cuDNN's minimum %g",
                       (double)l->u.bn.eps, CUDNN_BN_MIN_EPSILON);
    CUDNN_CHECK(e, cudnnCreateTensorDescriptor(&L->xd));
    CUDNN_CHECK(e, cudnnCreateTensorDescriptor(&L->pd));
    return bn_set_batch(L, c->batch, e);
}

int cu_bn_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e) {
    cu_layer *L = &c->layers[li];
    const vd_layer *l = &net->layers[li];
    int rc = ensure_batch(L, io->n, bn_set_batch, e);
    if (rc) return rc;
    /* folded into its add (vd_op_io.bn_stats): the statistics alone, y (its
     * x's tensor) unwritten; a re-run has nothing to do. Channels-last only:
     * cuDNN's batch norm (fp32) writes y (the plan folds none in fp32 from
     * the CLI, vd_plan_opts.fuse_bn_add) */
    if (io->bn_stats) {
        if (!L->cl)
            return vd_errf(e, VD_EUNSUPPORTED, "batchnorm '%s': folded into its add in %s: the "
                           "CUDA backend folds batch norms in bf16, fp16 and tf32 only "
                           "(channels-last maps)", l->name, vd_math_name(c->math));
        if (io->recompute) return VD_OK;
    }
    if (L->cl) {   /* channels-last: the own kernels */
        if (!io->aux)
            return vd_errf(e, VD_EUNSUPPORTED, "batchnorm '%s': no saved statistics", l->name);
        cu_bn_mode mode = io->recompute ? CU_BN_APPLY : io->training ? CU_BN_TRAIN : CU_BN_EVAL;
        return cuk_bn_fwd_nhwc(cu_compute(c), c->sm_count, io->x[0], io->bn_stats ? NULL : io->y,
                               io->w, io->b, io->aux, io->rm, io->rv,
                               (int64_t)io->n * L->h * L->w, L->c, mode,
                               l->u.bn.eps, l->u.bn.momentum, io->ws, io->ws_bytes, L->fwd_relu,
                               io->act, e);
    }
    const float one = 1.0f, zero = 0.0f;
    if (io->recompute) {
        /* y as the training forward wrote it: the same call on the same x
         * (cuDNN computes the same statistics the same way), with neither
         * the running statistics nor the saved ones written (both pairs
         * may be NULL). vdnn's CUDA tests check the bit-identity. */
        CUDNN_CHECK(e, cudnnBatchNormalizationForwardTraining(
                           c->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, L->xd, io->x[0], L->xd,
                           io->y, L->pd, io->w, io->b, (double)l->u.bn.momentum, NULL, NULL,
                           (double)l->u.bn.eps, NULL, NULL));
    } else if (io->training) {
        float *mean = io->aux, *invstd = io->aux ? io->aux + L->c : NULL;
        CUDNN_CHECK(e, cudnnBatchNormalizationForwardTraining(
                           c->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, L->xd, io->x[0], L->xd,
                           io->y, L->pd, io->w, io->b, (double)l->u.bn.momentum, io->rm, io->rv,
                           (double)l->u.bn.eps, mean, invstd));
    } else {
        CUDNN_CHECK(e, cudnnBatchNormalizationForwardInference(
                           c->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, L->xd, io->x[0], L->xd,
                           io->y, L->pd, io->w, io->b, io->rm, io->rv, (double)l->u.bn.eps));
        if (io->aux)
            return cuk_bn_eval_aux(cu_compute(c), io->rm, io->rv, io->aux, L->c, l->u.bn.eps, e);
    }
    return VD_OK;
}

/* The spare parts of batch norm's backward workspace (its front, before the
 * channels-last kernel's partial sums): cuDNN's backward and the channels-last
 * kernel write dx, dweight and dbias all three, so where the executor wants
 * none (dx: the input needs no gradient, the net input or a no_grad
 * layer's output; dweight and dbias: frozen, --freeze) they go there.
 * *dx_at, *dwb_at: their offsets in it (-1: the executor's own). */
static uint64_t bn_spare(const vd_net *net, int li, int n, vd_dtype act, int64_t *dx_at,
                         int64_t *dwb_at) {
    const vd_layer *l = &net->layers[li];
    const uint64_t a = 256;
    uint64_t at = 0;
    *dx_at = *dwb_at = -1;
    if (l->in[0] < 0 || net->layers[l->in[0]].no_grad) {
        *dx_at = (int64_t)at;
        at += VD_ALIGN_UP((uint64_t)n * (uint64_t)l->c * (uint64_t)l->h * (uint64_t)l->w *
                          (uint64_t)vd_dtype_bytes(act), a);
    }
    bool frozen = false;
    for (int k = l->param_first; k < l->param_first + l->n_params; k++)
        frozen |= net->params[k].frozen;
    if (frozen) {   /* dweight then dbias, [C] floats each */
        *dwb_at = (int64_t)at;
        at += 2 * VD_ALIGN_UP((uint64_t)l->c * sizeof(float), a);
    }
    return at;
}

uint64_t cu_bn_spare_bytes(const vd_net *net, int li, int n, vd_dtype act) {
    int64_t dx_at, dwb_at;
    return bn_spare(net, li, n, act, &dx_at, &dwb_at);
}

int cu_bn_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *in, vd_err *e) {
    cu_layer *L = &c->layers[li];
    const vd_layer *l = &net->layers[li];
    int rc = ensure_batch(L, in->n, bn_set_batch, e);
    if (rc) return rc;
    if (!in->training)
        return vd_errf(e, VD_EUNSUPPORTED,
                       "batchnorm '%s': backward in eval mode is not implemented on CUDA", l->name);
    if (!in->aux)
        return vd_errf(e, VD_EUNSUPPORTED,
                       "batchnorm '%s': the CUDA backend needs the saved statistics in backward",
                       l->name);
    /* what the executor wants none of into the workspace's spare front */
    int64_t dx_at, dwb_at;
    const uint64_t spare = bn_spare(net, li, in->n, in->act, &dx_at, &dwb_at);
    if (spare && (!in->ws || in->ws_bytes < spare))
        return vd_errf(e, VD_EINTERNAL, "batchnorm '%s': backward needs %llu bytes of workspace "
                       "for the gradients it must write but nobody wants, got %llu", l->name,
                       (unsigned long long)spare, (unsigned long long)in->ws_bytes);
    vd_op_io b = *in;
    char *ws = (char *)in->ws;
    if (dx_at >= 0 && !b.dx[0]) { b.dx[0] = (float *)(void *)(ws + dx_at); b.dx_beta[0] = 0.0f; }
    const int64_t db_at = dwb_at + (int64_t)VD_ALIGN_UP((uint64_t)L->c * sizeof(float), 256);
    if (dwb_at >= 0 && !b.dw) b.dw = (float *)(void *)(ws + dwb_at);
    if (dwb_at >= 0 && !b.db) b.db = (float *)(void *)(ws + db_at);
    b.ws = spare && in->ws_bytes > spare ? (void *)(ws + spare) : spare ? NULL : in->ws;
    b.ws_bytes = in->ws_bytes - spare;
    const vd_op_io *io = &b;
    if (!io->dx[0] || !io->dw || !io->db)
        return vd_errf(e, VD_EINTERNAL,
                       "batchnorm '%s': backward without dx, dweight or dbias and no room for "
                       "them in its workspace", l->name);
    /* the backward of the ReLU after its add (vd_op_io.relu_y, not no_fuse):
     * dy rewritten in place first, in the channels-last reduction pass, or
     * (cuDNN's, fp32) by the ReLU's kernel in this step */
    const float *ry = c->no_fuse ? NULL : io->relu_y;
    if (ry && (L->bwd_relu || vd_op_add_relu(net, li) < 0))
        return vd_errf(e, VD_EINTERNAL, "batchnorm '%s': takes no ReLU's backward after an add",
                       l->name);
    if (L->cl)
        return cuk_bn_bwd_nhwc(cu_compute(c), c->sm_count, io->x[0], io->dy, io->dx[0],
                               io->dx_beta[0] != 0.0f ? 1.0f : 0.0f, io->w, io->b, io->aux,
                               io->dw, io->db, (int64_t)io->n * L->h * L->w, L->c, io->ws,
                               io->ws_bytes, L->bwd_relu, ry, io->act, e);
    if (ry && (rc = cuk_relu_bwd(cu_compute(c), c->sm_count, ry, io->dy, (float *)io->dy, 0.0f,
                                 (int64_t)io->n * L->c * L->h * L->w, io->act, e)))
        return rc;
    const float one = 1.0f, zero = 0.0f;
    const float beta = io->dx_beta[0] != 0.0f ? 1.0f : 0.0f;
    CUDNN_CHECK(e, cudnnBatchNormalizationBackward(
                       c->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &beta, &one, &zero, L->xd, io->x[0],
                       L->xd, io->dy, L->xd, io->dx[0], L->pd, io->w, io->dw, io->db,
                       (double)l->u.bn.eps, io->aux, io->aux + L->c));
    return VD_OK;
}
