/* cuda_convgraph_build.cu — the graph-API conv's cuDNN objects: operation
 * graphs, heuristic engine configs and their finalized execution plans,
 * running a plan, freeing (see cuda_convgraph.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "backend/cuda/cuda_convgraph.h"

const char *const cg_dir_name[CU_GD_COUNT] = {"fwd", "bwd-data", "bwd-filter", "bwd-data(+=)"};

/* ---- small helpers ----------------------------------------------------------- */
void cg_dbg(const cu_ctx *c, int level, const char *fmt, ...) {
    if (c->conv_debug < level) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("vdnn conv: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

#define SETA(e, d, name, type, n, ptr) \
    CUDNN_CHECK(e, cudnnBackendSetAttribute((d), (name), (type), (n), (ptr)))

static void dfree(cudnnBackendDescriptor_t *d) {
    if (*d) cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

void cg_gop_free(gop *o) {
    dfree(&o->graph);
    dfree(&o->op);
    dfree(&o->conv);
    for (int i = 0; i < 3; i++) dfree(&o->t[i]);
    for (int i = 0; i < 2; i++) {
        dfree(&o->pwop[i]);
        dfree(&o->pw[i]);
        dfree(&o->tv[i]);
    }
    dfree(&o->tb);
}

void cg_gcand_free(gcand *k) {
    dfree(&k->plan);
    dfree(&k->cfg);
}

void cg_tmp_clear(cu_graph *g) {
    for (int i = 0; i < g->ntmp; i++) dfree(&g->tmp[i]);
    g->ntmp = 0;
}

/* A descriptor that lives until the next cg_tmp_clear (or the layer's free). */
static int tmp_new(cu_graph *g, cudnnBackendDescriptorType_t t, cudnnBackendDescriptor_t *out,
                   vd_err *e) {
    *out = NULL;
    if (g->ntmp >= G_MAXTMP)
        return vd_errf(e, VD_EINTERNAL, "graph conv: more than %d temporary descriptors",
                       G_MAXTMP);
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(t, out));
    g->tmp[g->ntmp++] = *out;
    return VD_OK;
}

/* Take d out of the temporaries: the caller owns it now. */
static void tmp_keep(cu_graph *g, cudnnBackendDescriptor_t d) {
    for (int i = 0; i < g->ntmp; i++)
        if (g->tmp[i] == d) g->tmp[i] = NULL;
}

/* ---- public helpers for the key --------------------------------------------------- */
int64_t cu_conv_param_align(const vd_net *net, int li, vd_param_role role) {
    const vd_layer *l = &net->layers[li];
    for (int k = 0; k < l->n_params; k++) {
        const vd_param *p = &net->params[l->param_first + k];
        if (p->role == role)
            return cg_ptr_align((const void *)(uintptr_t)(p->offset * 4));
    }
    return 4;
}

int64_t cu_conv_weight_align(const vd_net *net, int li) {
    return cu_conv_param_align(net, li, VD_ROLE_WEIGHT);
}

bool cu_conv_input_shared(const vd_net *net, int li) {
    int src = net->layers[li].in[0], uses = 0;
    for (int j = 0; j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j].n_in && k < VD_MAX_INPUTS; k++)
            if (net->layers[j].in[k] == src) uses++;
    return uses > 1;
}

/* ---- building blocks ------------------------------------------------------------------ */
/* A tensor of type dt laid out as the layer's maps: NCHW, or channels-last
 * where cl (cu_layer.cl: tf32, bf16, fp16; feature maps NHWC, the weight
 * KRSC); virt:
 * an intermediate of a fused graph, never in memory. */
static int make_tensor(cudnnBackendDescriptor_t *d, int64_t uid, const int64_t dim[4],
                       int64_t align, cudnnDataType_t dt, bool cl, bool virt, bool *ok,
                       vd_err *e) {
    int64_t str[4] = {dim[1] * dim[2] * dim[3], dim[2] * dim[3], dim[3], 1};
    if (cl) {
        str[0] = dim[1] * dim[2] * dim[3];
        str[1] = 1;
        str[2] = dim[3] * dim[1];
        str[3] = dim[1];
    }
    cudnnStatus_t st;
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, d));
    SETA(e, *d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    SETA(e, *d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim);
    SETA(e, *d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str);
    SETA(e, *d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SETA(e, *d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (virt) SETA(e, *d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    CUDNN_SOFT(e, st, cudnnBackendFinalize(*d));
    if (st != CUDNN_STATUS_SUCCESS) *ok = false;
    return VD_OK;
}

/* One pointwise operation of a fused forward: y = mode(x[, b]) in fp32. */
static int make_pointwise(cudnnBackendDescriptor_t *pw, cudnnBackendDescriptor_t *op,
                          cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                          cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y, bool *ok,
                          vd_err *e) {
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    cudnnStatus_t st;
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, pw));
    SETA(e, *pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SETA(e, *pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    CUDNN_SOFT(e, st, cudnnBackendFinalize(*pw));
    if (st != CUDNN_STATUS_SUCCESS) {
        *ok = false;
        return VD_OK;
    }
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op));
    SETA(e, *op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, pw);
    SETA(e, *op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) SETA(e, *op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    SETA(e, *op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    CUDNN_SOFT(e, st, cudnnBackendFinalize(*op));
    if (st != CUDNN_STATUS_SUCCESS) *ok = false;
    return VD_OK;
}

/* The operation graph of direction dir (CU_GD_*) at batch n, its output
 * scaled by beta before the add, with epilogue epi (see cuda_convgraph.h).
 * *ok false (rc 0): cuDNN does not support it (*why: the status). o is freed
 * by cg_gop_free in every case. */
int cg_build_op(cu_ctx *c, const cu_layer *L, const vd_layer *l, int dir, float beta, int n,
                int64_t ax, int64_t aw, int64_t ab, int epi, gop *o, bool *ok, cudnnStatus_t *why,
                vd_err *e) {
    *ok = true;
    *why = CUDNN_STATUS_SUCCESS;
    int g = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    const int64_t xd[4] = {n, L->in_c[0], L->in_h, L->in_w};
    const int64_t wd[4] = {l->u.conv.out, L->in_c[0] / g, l->u.conv.kh, l->u.conv.kw};
    const int64_t yd[4] = {n, L->c, L->h, L->w};
    const int64_t bd[4] = {1, L->c, 1, 1};
    if (dir != CU_GD_FWD || beta != 0.0f) epi = CG_EPI_NONE;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    int rc;
    if ((rc = make_tensor(&o->t[0], 1, xd, ax, L->dt, L->cl, false, ok, e)) ||
        (rc = make_tensor(&o->t[1], 2, wd, aw, L->dt, L->cl, false, ok, e)) ||
        (rc = make_tensor(&o->t[2], 3, yd, ax, L->dt, L->cl, false, ok, e)))
        return rc;
    /* epilogue: the bias (fp32 parameter), the conv's output and the
     * biased sum before the ReLU, both virtual and fp32 */
    if (epi != CG_EPI_NONE &&
        ((rc = make_tensor(&o->tb, 4, bd, ab, f32, L->cl, false, ok, e)) ||
         (rc = make_tensor(&o->tv[0], 5, yd, 16, f32, L->cl, true, ok, e)) ||
         (epi == CG_EPI_BIAS_RELU &&
          (rc = make_tensor(&o->tv[1], 6, yd, 16, f32, L->cl, true, ok, e)))))
        return rc;
    if (!*ok) {
        *why = CUDNN_STATUS_NOT_SUPPORTED_SHAPE;
        return VD_OK;
    }
    const int64_t sdims = 2;
    const int64_t pad[2] = {l->u.conv.ph, l->u.conv.pw};
    const int64_t str[2] = {l->u.conv.sh > 0 ? l->u.conv.sh : 1, l->u.conv.sw > 0 ? l->u.conv.sw : 1};
    const int64_t dil[2] = {l->u.conv.dh > 0 ? l->u.conv.dh : 1, l->u.conv.dw > 0 ? l->u.conv.dw : 1};
    const cudnnDataType_t ct = CUDNN_DATA_FLOAT;
    const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &o->conv));
    SETA(e, o->conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sdims);
    SETA(e, o->conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct);
    SETA(e, o->conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    SETA(e, o->conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
    SETA(e, o->conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
    SETA(e, o->conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    SETA(e, o->conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad);
    cudnnStatus_t st;
    CUDNN_SOFT(e, st, cudnnBackendFinalize(o->conv));
    if (st != CUDNN_STATUS_SUCCESS) {
        *ok = false;
        *why = st;
        return VD_OK;
    }
    const float alpha = 1.0f;
    if (dir == CU_GD_FWD) {
        CUDNN_CHECK(e, cudnnBackendCreateDescriptor(
                           CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &o->op));
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[0]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[1]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
             epi != CG_EPI_NONE ? &o->tv[0] : &o->t[2]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->conv);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    } else if (dir == CU_GD_BWD_FILTER) {
        CUDNN_CHECK(e, cudnnBackendCreateDescriptor(
                           CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, &o->op));
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[0]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[1]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[2]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->conv);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    } else {
        CUDNN_CHECK(e, cudnnBackendCreateDescriptor(
                           CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, &o->op));
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[0]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[1]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[2]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->conv);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    }
    CUDNN_SOFT(e, st, cudnnBackendFinalize(o->op));
    if (st != CUDNN_STATUS_SUCCESS) {
        *ok = false;
        *why = st;
        return VD_OK;
    }
    /* epilogue: conv -> add bias -> [ReLU] -> y */
    cudnnBackendDescriptor_t ops[3] = {o->op, NULL, NULL};
    int64_t nops = 1;
    if (epi != CG_EPI_NONE) {
        const bool relu = epi == CG_EPI_BIAS_RELU;
        if ((rc = make_pointwise(&o->pw[0], &o->pwop[0], CUDNN_POINTWISE_ADD, o->tv[0], o->tb,
                                 relu ? o->tv[1] : o->t[2], ok, e)) ||
            (*ok && relu &&
             (rc = make_pointwise(&o->pw[1], &o->pwop[1], CUDNN_POINTWISE_RELU_FWD, o->tv[1], NULL,
                                  o->t[2], ok, e))))
            return rc;
        if (!*ok) {
            *why = CUDNN_STATUS_NOT_SUPPORTED;
            return VD_OK;
        }
        ops[nops++] = o->pwop[0];
        if (relu) ops[nops++] = o->pwop[1];
    }
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &o->graph));
    SETA(e, o->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->dnn);
    SETA(e, o->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops);
    CUDNN_SOFT(e, st, cudnnBackendFinalize(o->graph));
    if (st != CUDNN_STATUS_SUCCESS) {
        *ok = false;
        *why = st;
    }
    return VD_OK;
}

/* Engine index and notes of an engine config. */
static int cfg_info(cu_graph *g, cudnnBackendDescriptor_t cfg, int64_t *engine, unsigned *num,
                    unsigned *beh, vd_err *e) {
    cudnnBackendDescriptor_t eng;
    int rc = tmp_new(g, CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng, e);
    if (rc) return rc;
    int64_t cnt = 0;
    CUDNN_CHECK(e, cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &eng));
    CUDNN_CHECK(e, cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                            &cnt, engine));
    cudnnBackendNumericalNote_t nn[32];
    cudnnBackendBehaviorNote_t bn[32];
    CUDNN_CHECK(e, cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                            CUDNN_TYPE_NUMERICAL_NOTE, 32, &cnt, nn));
    *num = 0;
    for (int64_t i = 0; i < cnt && i < 32; i++)
        if ((int)nn[i] >= 0 && (int)nn[i] < 32) *num |= 1u << (int)nn[i];
    CUDNN_CHECK(e, cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                            CUDNN_TYPE_BEHAVIOR_NOTE, 32, &cnt, bn));
    *beh = 0;
    for (int64_t i = 0; i < cnt && i < 32; i++)
        if ((int)bn[i] >= 0 && (int)bn[i] < 32) *beh |= 1u << (int)bn[i];
    return VD_OK;
}

static void notes_str(unsigned num, unsigned beh, char *buf, size_t n) {
    snprintf(buf, n, "%s%s%s%s%s%s%s", num & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE) ? " tc" : "",
             num & (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) ? " nondet" : "",
             num & (1u << CUDNN_NUMERICAL_NOTE_FFT) ? " fft" : "",
             num & (1u << CUDNN_NUMERICAL_NOTE_WINOGRAD) ? " winograd" : "",
             num & (1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ? " down-convert" : "",
             num & (1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) ? " reduced-prec" : "",
             beh & (1u << CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) ? " rtc" : "");
}

/* Why an engine with these notes may not run in c's mode, or NULL (fused:
 * a graph with an epilogue, see cg_add_from_heur). */
static const char *excluded(const cu_ctx *c, unsigned num, unsigned beh, bool fused) {
    if (num & (1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) return "converts inputs down";
    if (num & (1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
        return "reduced-precision reduction";
    if (c->math == VD_MATH_FP32 && (num & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE)))
        return "tensor cores (TF32) in fp32 mode";
    if (c->deterministic && (num & (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)))
        return "nondeterministic";
    if (!c->conv_rtc && !fused && (beh & (1u << CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)))
        return "runtime compiled (--conv-rtc allows)";
    return NULL;
}

/* A finalized execution plan for cfg. *ok false (rc 0): the engine does not
 * support this graph (soft status). */
static int make_plan(cu_ctx *c, cudnnBackendDescriptor_t cfg, gcand *k, bool *ok, vd_err *e) {
    *ok = false;
    cudnnBackendDescriptor_t p = NULL;
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p));
    k->plan = p;   /* owned by k from here: cg_gcand_free releases it on every path */
    SETA(e, p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->dnn);
    SETA(e, p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    cudnnStatus_t st;
    CUDNN_SOFT(e, st, cudnnBackendFinalize(p));
    if (st != CUDNN_STATUS_SUCCESS) {
        dfree(&k->plan);
        return VD_OK;
    }
    int64_t ws = 0, cnt = 0;
    CUDNN_CHECK(e, cudnnBackendGetAttribute(p, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                            CUDNN_TYPE_INT64, 1, &cnt, &ws));
    k->ws = ws > 0 ? (uint64_t)ws : 0;
    *ok = true;
    return VD_OK;
}

/* Append to out[*n] (capacity maxn) the usable configs of heuristic mode
 * for graph, at most take of them, each as a finalized plan with workspace
 * <= cap; the fallback list skips engines already in out. */
int cg_add_from_heur(cu_ctx *c, cu_graph *g, const char *lname, int dir,
                     cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, int take,
                     uint64_t cap, bool fused, int64_t only, gcand *out, int *n, int maxn,
                     vd_err *e) {
    if (take <= 0 || *n >= maxn) return VD_OK;
    cg_tmp_clear(g);
    cudnnBackendDescriptor_t h, cfgs[G_MAXRES];
    int rc = tmp_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &h, e);
    if (rc) return rc;
    SETA(e, h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    SETA(e, h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    cudnnStatus_t st;
    CUDNN_SOFT(e, st, cudnnBackendFinalize(h));
    if (st != CUDNN_STATUS_SUCCESS) {
        cg_dbg(c, 2, "  '%s' %s: heuristics mode %d: %s", lname, cg_dir_name[dir], (int)mode,
               cudnnGetErrorString(st));
        cg_tmp_clear(g);
        return VD_OK;
    }
    int64_t total = 0;
    CUDNN_CHECK(e, cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &total, NULL));
    if (total > G_MAXRES) total = G_MAXRES;
    for (int64_t i = 0; i < total; i++)
        if ((rc = tmp_new(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i], e))) return rc;
    int64_t got = 0;
    if (total > 0)
        CUDNN_CHECK(e, cudnnBackendGetAttribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, total, &got, cfgs));
    int added = 0;
    bool fb = mode == CUDNN_HEUR_MODE_FALLBACK;
    for (int64_t i = 0; i < got && added < take && *n < maxn; i++) {
        int64_t engine = -1;
        unsigned num = 0, beh = 0;
        if ((rc = cfg_info(g, cfgs[i], &engine, &num, &beh, e))) return rc;
        if (only >= 0 && engine != only) continue;
        char notes[96];
        notes_str(num, beh, notes, sizeof notes);
        const char *why = excluded(c, num, beh, fused);
        if (why) {
            cg_dbg(c, 2, "  '%s' %s: engine %lld%s: skipped (%s)", lname, cg_dir_name[dir],
                   (long long)engine, notes, why);
            continue;
        }
        bool dup = false;
        for (int j = 0; fb && j < *n; j++) dup |= out[j].engine == engine;
        if (dup) continue;
        gcand k;
        memset(&k, 0, sizeof k);
        bool ok;
        rc = make_plan(c, cfgs[i], &k, &ok, e);
        if (rc) {
            cg_gcand_free(&k);
            return rc;
        }
        if (!ok) {
            cg_dbg(c, 2, "  '%s' %s: engine %lld%s: plan not supported", lname, cg_dir_name[dir],
                   (long long)engine, notes);
            continue;
        }
        if (k.ws > cap) {
            cg_dbg(c, 2, "  '%s' %s: engine %lld%s: workspace %llu over the cap %llu", lname,
                   cg_dir_name[dir], (long long)engine, notes, (unsigned long long)k.ws,
                   (unsigned long long)cap);
            cg_gcand_free(&k);
            continue;
        }
        tmp_keep(g, cfgs[i]);
        k.cfg = cfgs[i];
        k.engine = engine;
        k.ms = -1.0f;
        k.fallback = fb;
        k.tc = (num & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) != 0;
        out[(*n)++] = k;
        added++;
        cg_dbg(c, 2, "  '%s' %s: engine %lld%s%s: candidate, workspace %llu", lname,
               cg_dir_name[dir], (long long)engine, notes, fb ? " (fallback list)" : "", (unsigned long long)k.ws);
    }
    cg_tmp_clear(g);
    return VD_OK;
}

/* Run plan on the compute stream with ptr = {x|dx, w|dw, y|dy} and, for a
 * fused forward, the bias. */
cudnnStatus_t cg_exec_plan(cudnnHandle_t h, cudnnBackendDescriptor_t plan, void *const ptr[3],
                           const float *bias, void *ws) {
    const int64_t uids[4] = {1, 2, 3, 4};
    void *p4[4] = {ptr[0], ptr[1], ptr[2], (void *)bias};
    const int64_t np = bias ? 4 : 3;
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, np, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                      np, p4);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                      &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(h, plan, vp);
    cudnnBackendDestroyDescriptor(vp);
    return st;
}

void cg_gdir_free(gdir *D) {
    for (int k = 0; k < D->n; k++) cg_gcand_free(&D->c[k]);
    cg_gop_free(&D->op);
    D->n = 0;
}

void cg_graph_free(cu_graph *g) {
    if (!g) return;
    for (int d = 0; d < CU_GD_COUNT; d++) {
        cg_gdir_free(&g->d[d]);
        for (int i = 0; i < G_SPLITS; i++) cg_gdir_free(&g->s[i][d]);
    }
    cg_gdir_free(&g->fz);
    for (int i = 0; i < G_MAXALT; i++) {
        cg_gcand_free(&g->alt[i].p);
        cg_gop_free(&g->alt[i].op);
    }
    cg_tmp_clear(g);
    vd_free(g);
}

void cu_graph_layer_free(cu_layer *L) {
    if (L->g && L->g_owner) cg_graph_free(L->g);
    L->g = NULL;
    L->g_owner = false;
}

/* ---- a direction's candidates ----------------------------------------------------------- */
/* Direction d's operation graph at batch n (with D->epi's epilogue) into
 * D->op and its candidate plans with workspace <= cap into D->c (see
 * cuda_convgraph.h). *ok / *st: as cg_build_op. */
int cg_gdir_build(cu_ctx *c, cu_graph *g, const cu_layer *L, const vd_layer *l, int d, int n,
                  uint64_t cap, gdir *D, bool *ok, cudnnStatus_t *st, vd_err *e) {
    int rc = cg_build_op(c, L, l, d, cg_dir_beta(d), n, g->ax, g->aw, g->ab, D->epi, &D->op, ok,
                         st, e);
    if (rc || !*ok) return rc;
    const bool fused = D->epi != CG_EPI_NONE;
    if ((rc = cg_add_from_heur(c, g, l->name, d, D->op.graph, CUDNN_HEUR_MODE_A,
                               fused ? CG_FUSE_TOPK : c->conv_topk, cap, fused, -1, D->c,
                               &D->n, G_MAXC, e)))
        return rc;
    if (fused) return VD_OK;
    /* channels-last: the fallback list's engines run 100-7000x slower
     * than mode A's tensor-core ones (H200, ResNet-50 backward-filter 0.1 vs
     * 700 ms) and timing them took minutes; asked only when mode A has none */
    if (L->cl && D->n > 0) return VD_OK;
    return cg_add_from_heur(c, g, l->name, d, D->op.graph, CUDNN_HEUR_MODE_FALLBACK, G_FALLBACK,
                            cap, false, -1, D->c, &D->n, G_MAXC, e);
}
