/* cuda_convgraph.cu — convolution through cuDNN's graph (backend) API, with
 * per-layer autotuning in layer_setup.
 *
 * Why: the legacy API (cudnnFind*AlgorithmEx / cudnnConvolution*) reaches
 * only the engines its algorithm enums map to; the faster engines PyTorch
 * runs through cudnn-frontend are reachable only through operation graphs.
 * Per conv layer and direction this file builds one operation graph (NCHW
 * fp32 tensors, cross-correlation, fp32 compute), asks the engine heuristics
 * (CUDNN_HEUR_MODE_A, then CUDNN_HEUR_MODE_FALLBACK) for engine configs,
 * finalizes execution plans and times them.
 *
 * Candidates per direction: the first c->conv_topk (8) usable configs of
 * mode A, then up to G_FALLBACK usable configs of the fallback list whose
 * engine is not listed yet (the zero-workspace engines min-ws wants), each
 * finalized to a plan needing at most a quarter of device memory of
 * workspace. Usable: no
 * DOWN_CONVERT_INPUTS or REDUCED_PRECISION_REDUCTION note; in fp32 mode no
 * TENSOR_CORE note (no TF32, what PyTorch does with allow_tf32 off); in
 * deterministic mode no NONDETERMINISTIC note; no RUNTIME_COMPILATION
 * behaviour note unless --conv-rtc (NVRTC costs seconds per engine).
 *
 * Options (the legacy path's meanings, see cuda_cudnn.cu), per direction:
 *   "fastest":  the fastest timed candidate;
 *   "ws<=4G", "ws<=1G", "ws<=256M" (cu_ws_rung): the fastest within that cap;
 *   "balanced": the fastest within max(16 MiB, output bytes / 4);
 *   "min-ws":   the candidate with the least workspace.
 * (a cap nothing fits gives min-ws's.) An option equal in every direction to
 * one listed before it is dropped (fastest, min-ws, balanced come first, so
 * they keep their labels); then cu_conv_opts_order: option 0 is "fastest",
 * the rest by decreasing workspace, so min-ws is last. All come from the
 * same timings. An option's workspace is the max over its directions (and
 * the bias gradient's partial sums). Timing (c->tune): CUDA events on the compute
 * stream; a warm-up run, then (unless the warm-up took over twice the best
 * so far) two more, the faster of those two counts. Buffers: one temporary
 * cudaMalloc during layer_setup (before the pool exists), freed at its end.
 * Untimed (deterministic mode, --conv-tune off, memory not free):
 * heuristic order decides: the first candidate is "fastest", the first
 * within max(16 MiB, output bytes) "balanced", the first within a rung's cap
 * that rung, so deterministic runs pick the same engines in every process.
 *
 * Runtime: a plan is bound to the setup batch, beta and the byte alignment
 * declared for its tensors (16 for activations; the weight's from its
 * parameter offset). A call that differs (smaller batch, dx accumulation
 * without a beta-1 plan, lower pointer alignment, less workspace) gets a
 * plan built then, first in heuristic order that fits the workspace given,
 * cached per layer (G_MAXALT); if no engine fits, the legacy API runs it.
 *
 * --conv-debug 1 prints on stderr which path and engines each conv layer
 * uses; 2 also every candidate (engine, notes, workspace, time) and every
 * runtime variant. (The one place library code prints: asked for by env.) */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cuda/cuda_internal.h"

enum {
    G_MAXC = 24,       /* candidates kept per direction */
    G_FALLBACK = 4,    /* fallback-list candidates added per direction */
    G_MAXRES = 64,     /* heuristic results read per mode */
    G_MAXTMP = 160,    /* temporary descriptors of one heuristic query */
    G_MAXALT = 6,      /* runtime variant plans cached per layer */
    G_SPLITS = 4,      /* split sets (sub-batch plans) per layer */
    G_SPLITS_FORCE = 2, /* of which --conv-split force builds the first two */
};

/* Split options: a layer whose fastest option needs more than
 * SPLIT_MIN (1 GiB) of workspace also gets, for each target t, the option
 * "b/k": every direction runs as k sub-batch convolutions of batch/k
 * (k the smallest power of two dividing the batch with
 * fastest workspace / k <= t), each the fastest engine timed at batch/k with
 * workspace <= t. Backward-filter chunks after the first write their partial
 * dw into the front of the workspace and are added to dw (the workspace
 * counts those bytes). The FFT / Winograd engines' workspace grows with the
 * batch, so this keeps them under a budget where the whole-batch "ws<=1G"
 * engines are 2-3x slower (VGG-16 b256: features.2 backward 38 ms with 19 GiB
 * of workspace, 70 ms within 289 MiB). Not in deterministic mode (the
 * summation order of dw would differ between options). The 8 and 4 GiB
 * targets keep the big engines at sub-batches large enough to run them
 * well, for budgets with a few GiB of workspace to spend: VGG-16 b256 fp32
 * features.2's backward is 38.5 ms whole (19 GiB), 46.3 ms as "b/4 w"
 * (4.8 GiB), 50.3 as "b/8 w" (1.7 GiB), 51.4 as "b/32 w"; without b/4 w,
 * auto at 16 GiB runs 0.962x of no offload, with it 0.9697x. */
static const uint64_t split_target[G_SPLITS] = {8ull << 30, 4ull << 30, 1ull << 30, 256ull << 20};
static const uint64_t SPLIT_MIN = 1ull << 30;

static const char *const dir_name[CU_GD_COUNT] = {"fwd", "bwd-data", "bwd-filter",
                                                  "bwd-data(+=)"};
/* Timing order of the directions on shared buffers: forward writes y,
 * backward-filter writes dw, backward-data writes x: last. */
static const int time_order[CU_GD_COUNT] = {CU_GD_FWD, CU_GD_BWD_FILTER, CU_GD_BWD_DATA,
                                            CU_GD_BWD_DATA_ACC};

/* One conv operation graph: tensors (x|dx, w|dw, y|dy: unique ids 1, 2, 3),
 * convolution, operation, graph. */
typedef struct gop {
    cudnnBackendDescriptor_t t[3], conv, op, graph;
} gop;

typedef struct gcand {
    cudnnBackendDescriptor_t cfg, plan;   /* engine config, its finalized execution plan */
    int64_t engine;                       /* global engine index */
    uint64_t ws;                          /* plan workspace, bytes */
    float ms;                             /* measured time; < 0 untimed */
    bool fallback;                        /* from the fallback list, not mode A */
    bool tc;                              /* TENSOR_CORE numerical note */
    bool bad;                             /* failed to run in timing, or freed as unused */
    bool gemm;                            /* not a cuDNN plan: cuBLAS 1x1 backward-filter
                                             (gemm_filter); engine GEMM_ENGINE */
    bool direct;                          /* not a cuDNN plan: the direct forward kernel
                                             (cuk_conv_direct_fwd); engine DIRECT_ENGINE */
} gcand;

typedef struct gdir {                     /* one direction at the setup batch */
    gop op;
    int n;                                /* candidates c[n], heuristic order */
    gcand c[G_MAXC];
} gdir;

typedef struct galt {                     /* a plan built at run time */
    bool used, legacy;                    /* legacy: no graph engine fits ws_limit */
    int dir, n;
    float beta;
    int64_t ax, aw;                       /* byte alignment: activations, weight */
    uint64_t ws_limit;                    /* legacy entries: the workspace nothing fit */
    gop op;
    gcand p;
} galt;

struct cu_graph {
    gdir d[CU_GD_COUNT];                  /* CU_GD_BWD_DATA_ACC: n 0 unless the input is shared */
    uint64_t dw_tmp;                      /* split backward-filter: partial dw bytes (aligned) */
    int64_t dw_numel;                     /* the weight's elements */
    gdir s[G_SPLITS][CU_GD_COUNT];        /* split set i: the directions at a sub-batch (the
                                             option using it has the factor) */
    int64_t ax, aw;                       /* declared byte alignment: activations, weight */
    galt alt[G_MAXALT];
    int alt_next;
    cudnnBackendDescriptor_t tmp[G_MAXTMP];   /* heuristic query temporaries */
    int ntmp;
};

/* ---- small helpers ----------------------------------------------------------- */
static void dbg(const cu_ctx *c, int level, const char *fmt, ...) {
    if (c->conv_debug < level) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("vdnn conv: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* "This engine / graph is not supported", as opposed to a real error. */
static bool soft_status(cudnnStatus_t s) {
    int cat = (int)CUDNN_STATUS_CATEGORY(s);
    return cat == (int)CUDNN_STATUS_NOT_SUPPORTED || cat == (int)CUDNN_STATUS_BAD_PARAM ||
           s == CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED;
}

/* Like CUDNN_CHECK, but a soft status (see soft_status) is left in st for
 * the caller instead of failing. */
#define CUDNN_SOFT(e, st, expr)                                                              \
    do {                                                                                     \
        (st) = (expr);                                                                       \
        if ((st) != CUDNN_STATUS_SUCCESS && !soft_status(st)) {                              \
            char detail_[256];                                                               \
            cudnnGetLastErrorString(detail_, sizeof detail_);                                \
            return vd_errf((e), VD_EDEVICE, "cuDNN error %s in %s at %s:%d: %s%s%s",          \
                           cudnnGetErrorString(st), __func__, __FILE__, __LINE__, #expr,      \
                           detail_[0] ? ": " : "", detail_);                                 \
        }                                                                                    \
    } while (0)

#define SETA(e, d, name, type, n, ptr) \
    CUDNN_CHECK(e, cudnnBackendSetAttribute((d), (name), (type), (n), (ptr)))

static void dfree(cudnnBackendDescriptor_t *d) {
    if (*d) cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

static void gop_free(gop *o) {
    dfree(&o->graph);
    dfree(&o->op);
    dfree(&o->conv);
    for (int i = 0; i < 3; i++) dfree(&o->t[i]);
}

static void gcand_free(gcand *k) {
    dfree(&k->plan);
    dfree(&k->cfg);
}

static void tmp_clear(cu_graph *g) {
    for (int i = 0; i < g->ntmp; i++) dfree(&g->tmp[i]);
    g->ntmp = 0;
}

/* A descriptor that lives until the next tmp_clear (or the layer's free). */
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

static int64_t ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int64_t al = 16;
    while (al > 1 && a % (uintptr_t)al) al /= 2;
    return al;
}

static uint64_t out_bytes(const cu_layer *L, int n) {
    return (uint64_t)n * (uint64_t)L->c * (uint64_t)L->h * (uint64_t)L->w * 4;
}

static inline uint64_t u64max(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- public helpers for the key --------------------------------------------------- */
int64_t cu_conv_weight_align(const vd_net *net, int li) {
    const vd_layer *l = &net->layers[li];
    for (int k = 0; k < l->n_params; k++) {
        const vd_param *p = &net->params[l->param_first + k];
        if (p->role == VD_ROLE_WEIGHT) return ptr_align((const void *)(uintptr_t)(p->offset * 4));
    }
    return 4;
}

bool cu_conv_input_shared(const vd_net *net, int li) {
    int src = net->layers[li].in[0], uses = 0;
    for (int j = 0; j < net->n_layers; j++)
        for (int k = 0; k < net->layers[j].n_in && k < VD_MAX_INPUTS; k++)
            if (net->layers[j].in[k] == src) uses++;
    return uses > 1;
}

/* ---- building blocks ------------------------------------------------------------------ */
static int make_tensor(cudnnBackendDescriptor_t *d, int64_t uid, const int64_t dim[4],
                       int64_t align, cudnnDataType_t dt, bool *ok, vd_err *e) {
    /* NCHW, or channels-last in bf16 / fp16 (feature maps NHWC, the weight KRSC) */
    int64_t str[4] = {dim[1] * dim[2] * dim[3], dim[2] * dim[3], dim[3], 1};
    if (cu_dt_16(dt)) {
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
    CUDNN_SOFT(e, st, cudnnBackendFinalize(*d));
    if (st != CUDNN_STATUS_SUCCESS) *ok = false;
    return VD_OK;
}

/* The operation graph of direction dir (CU_GD_*) at batch n. *ok false (rc
 * 0): cuDNN does not support it (*why: the status). o is freed by gop_free
 * in every case. */
static int build_op(cu_ctx *c, const cu_layer *L, const vd_layer *l, int dir, int n,
                    int64_t ax, int64_t aw, gop *o, bool *ok, cudnnStatus_t *why, vd_err *e) {
    *ok = true;
    *why = CUDNN_STATUS_SUCCESS;
    int g = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    const int64_t xd[4] = {n, L->in_c[0], L->in_h, L->in_w};
    const int64_t wd[4] = {l->u.conv.out, L->in_c[0] / g, l->u.conv.kh, l->u.conv.kw};
    const int64_t yd[4] = {n, L->c, L->h, L->w};
    int rc;
    if ((rc = make_tensor(&o->t[0], 1, xd, ax, L->dt, ok, e)) ||
        (rc = make_tensor(&o->t[1], 2, wd, aw, L->dt, ok, e)) ||
        (rc = make_tensor(&o->t[2], 3, yd, ax, L->dt, ok, e)))
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
    const float alpha = 1.0f, beta = dir == CU_GD_BWD_DATA_ACC ? 1.0f : 0.0f;
    if (dir == CU_GD_FWD) {
        CUDNN_CHECK(e, cudnnBackendCreateDescriptor(
                           CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &o->op));
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[0]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[1]);
        SETA(e, o->op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->t[2]);
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
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &o->graph));
    SETA(e, o->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &c->dnn);
    SETA(e, o->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o->op);
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

/* Why an engine with these notes may not run in c's mode, or NULL. */
static const char *excluded(const cu_ctx *c, unsigned num, unsigned beh) {
    if (num & (1u << CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) return "converts inputs down";
    if (num & (1u << CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION))
        return "reduced-precision reduction";
    if (c->math == VD_MATH_FP32 && (num & (1u << CUDNN_NUMERICAL_NOTE_TENSOR_CORE)))
        return "tensor cores (TF32) in fp32 mode";
    if (c->deterministic && (num & (1u << CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)))
        return "nondeterministic";
    if (!c->conv_rtc && (beh & (1u << CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)))
        return "runtime compiled (--conv-rtc allows)";
    return NULL;
}

/* A finalized execution plan for cfg. *ok false (rc 0): the engine does not
 * support this graph (soft status). */
static int make_plan(cu_ctx *c, cudnnBackendDescriptor_t cfg, gcand *k, bool *ok, vd_err *e) {
    *ok = false;
    cudnnBackendDescriptor_t p = NULL;
    CUDNN_CHECK(e, cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &p));
    k->plan = p;   /* owned by k from here: gcand_free releases it on every path */
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
static int add_from_heur(cu_ctx *c, cu_graph *g, const char *lname, int dir,
                         cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, int take,
                         uint64_t cap, gcand *out, int *n, int maxn, vd_err *e) {
    if (take <= 0 || *n >= maxn) return VD_OK;
    tmp_clear(g);
    cudnnBackendDescriptor_t h, cfgs[G_MAXRES];
    int rc = tmp_new(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &h, e);
    if (rc) return rc;
    SETA(e, h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    SETA(e, h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    cudnnStatus_t st;
    CUDNN_SOFT(e, st, cudnnBackendFinalize(h));
    if (st != CUDNN_STATUS_SUCCESS) {
        dbg(c, 2, "  '%s' %s: heuristics mode %d: %s", lname, dir_name[dir], (int)mode,
            cudnnGetErrorString(st));
        tmp_clear(g);
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
        char notes[96];
        notes_str(num, beh, notes, sizeof notes);
        const char *why = excluded(c, num, beh);
        if (why) {
            dbg(c, 2, "  '%s' %s: engine %lld%s: skipped (%s)", lname, dir_name[dir],
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
            gcand_free(&k);
            return rc;
        }
        if (!ok) {
            dbg(c, 2, "  '%s' %s: engine %lld%s: plan not supported", lname, dir_name[dir],
                (long long)engine, notes);
            continue;
        }
        if (k.ws > cap) {
            dbg(c, 2, "  '%s' %s: engine %lld%s: workspace %llu over the cap %llu", lname,
                dir_name[dir], (long long)engine, notes, (unsigned long long)k.ws,
                (unsigned long long)cap);
            gcand_free(&k);
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
        dbg(c, 2, "  '%s' %s: engine %lld%s%s: candidate, workspace %llu", lname, dir_name[dir],
            (long long)engine, notes, fb ? " (fallback list)" : "", (unsigned long long)k.ws);
    }
    tmp_clear(g);
    return VD_OK;
}

/* Run plan on the compute stream with ptr = {x|dx, w|dw, y|dy}. */
static cudnnStatus_t exec_plan(cudnnHandle_t h, cudnnBackendDescriptor_t plan, void *const ptr[3],
                               void *ws) {
    const int64_t uids[3] = {1, 2, 3};
    void *p3[3] = {ptr[0], ptr[1], ptr[2]};
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                      3, p3);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                      &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(h, plan, vp);
    cudnnBackendDestroyDescriptor(vp);
    return st;
}

/* ---- the GEMM backward-filter of 1x1 convolutions -------------------------------- */
/* A 1x1, stride-1, unpadded, ungrouped fp32 (or tf32) convolution's weight
 * gradient in NCHW is dW[k][c] = sum_n sum_hw dY[n][k][hw] X[n][c][hw]: per
 * sample a GEMM with hw as the inner dimension. cuDNN's NCHW engines take
 * 2.7 ms for ResNet-50's layer1 conv3 (64 -> 256 at 56x56, b256) where
 * PyTorch's kernels take about half (H200, measured): here one strided
 * batched cuBLAS GEMM writes each sample's K x C partial into the workspace,
 * then k_sum_batch adds them in sample order (deterministic). It is one more
 * timed candidate of the backward-filter direction, kept only where it
 * wins; its workspace (n K C floats) is capped at GEMM_WS_MAX. */
enum { GEMM_ENGINE = 1000 };
static const uint64_t GEMM_WS_MAX = 256ull << 20;

static bool gemm_eligible(const cu_layer *L, const vd_layer *l) {
    int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    return L->dt == CUDNN_DATA_FLOAT && gr == 1 && l->u.conv.kh == 1 && l->u.conv.kw == 1 &&
           l->u.conv.sh == 1 && l->u.conv.sw == 1 && l->u.conv.ph == 0 && l->u.conv.pw == 0 &&
           L->h == L->in_h && L->w == L->in_w;
}

static uint64_t gemm_ws(const cu_layer *L, int n) {
    return (uint64_t)n * (uint64_t)L->c * (uint64_t)L->in_c[0] * sizeof(float);
}

/* ptr = {x, dw, dy} at batch n; ws holds gemm_ws(L, n) bytes */
static int gemm_filter(cu_ctx *c, const cu_layer *L, int n, void *const ptr[3], void *ws,
                       vd_err *e) {
    const int C = L->in_c[0], K = L->c;
    const int64_t hw = (int64_t)L->h * L->w;
    if (hw > INT32_MAX) return vd_errf(e, VD_EINTERNAL, "gemm_filter: %lld pixels", (long long)hw);
    const float one = 1.0f, zero = 0.0f;
    /* column-major: per sample dW_n^T (C x K, ld C) = X_n (HW x C, ld HW)^T dY_n (HW x K) */
    CUBLAS_CHECK(e, cublasSgemmStridedBatched(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, C, K, (int)hw,
                                              &one, (const float *)ptr[0], (int)hw,
                                              (long long)C * hw, (const float *)ptr[2], (int)hw,
                                              (long long)K * hw, &zero, (float *)ws, C,
                                              (long long)C * K, n));
    return cuk_sum_batch(cu_compute(c), c->sm_count, (const float *)ws, n, (int64_t)C * K,
                         (float *)ptr[1], e);
}

/* Append the GEMM candidate to the backward-filter candidates D at batch n. */
static void add_gemm(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, uint64_t cap,
                     gdir *D) {
    uint64_t ws = gemm_ws(L, n);
    if (!gemm_eligible(L, l) || ws > cap || ws > GEMM_WS_MAX || D->n >= G_MAXC) return;
    gcand *k = &D->c[D->n++];
    memset(k, 0, sizeof *k);
    k->engine = GEMM_ENGINE;
    k->ws = ws;
    k->ms = -1.0f;
    k->gemm = true;
    k->tc = c->math == VD_MATH_TF32;
    dbg(c, 2, "  '%s' %s: cuBLAS 1x1 GEMM (engine %d): candidate, workspace %llu", l->name,
        dir_name[CU_GD_BWD_FILTER], GEMM_ENGINE, (unsigned long long)ws);
}

/* The direct forward kernel (cuk_conv_direct_fwd) for layers with few
 * inputs per output (at most CU_DIRECT_MAX_C channels, CU_DIRECT_MAX_P
 * inputs per window): one more timed forward candidate, without workspace,
 * kept where it wins, like the GEMM. fp32 / tf32 feature maps (NCHW) only.
 * When an option runs it, the kernel also adds the bias
 * (cu_graph_fwd_fuses_bias). */
enum { DIRECT_ENGINE = 1001 };

static bool direct_geom(const cu_layer *L, const vd_layer *l, int n, cu_direct_geom *dg) {
    int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    if (L->dt != CUDNN_DATA_FLOAT || gr != 1) return false;
    *dg = (cu_direct_geom){n, L->in_c[0], L->in_h, L->in_w, L->c, L->h, L->w,
                           l->u.conv.kh, l->u.conv.kw, l->u.conv.sh, l->u.conv.sw,
                           l->u.conv.ph, l->u.conv.pw,
                           l->u.conv.dh > 0 ? l->u.conv.dh : 1, l->u.conv.dw > 0 ? l->u.conv.dw : 1};
    return cuk_conv_direct_ok(dg);
}

/* ptr = {x, w, y} at batch n; b: the bias or NULL; relu: then max(y, 0) */
static int direct_fwd(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, void *const ptr[3],
                      const float *b, bool relu, vd_err *e) {
    cu_direct_geom dg;
    if (!direct_geom(L, l, n, &dg))
        return vd_errf(e, VD_EINTERNAL, "conv '%s': not a direct-kernel geometry", l->name);
    return cuk_conv_direct_fwd(cu_compute(c), c->sm_count, &dg, (const float *)ptr[0],
                               (const float *)ptr[1], b, (float *)ptr[2], relu, e);
}

/* Append the direct candidate to the forward candidates D at batch n. */
static void add_direct(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, gdir *D) {
    cu_direct_geom dg;
    if (!direct_geom(L, l, n, &dg) || D->n >= G_MAXC) return;
    gcand *k = &D->c[D->n++];
    memset(k, 0, sizeof *k);
    k->engine = DIRECT_ENGINE;
    k->ms = -1.0f;
    k->direct = true;
    dbg(c, 2, "  '%s' %s: direct kernel (engine %d): candidate", l->name, dir_name[CU_GD_FWD],
        DIRECT_ENGINE);
}

/* ---- timing ------------------------------------------------------------------------------ */
/* Scratch for timing: bytes at c->scratch (grown as needed), or NULL when
 * that much device memory is not free (then the layer stays untimed). */
static void *scratch_get(cu_ctx *c, uint64_t bytes) {
    if (c->scratch && c->scratch_bytes >= bytes) return c->scratch;
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    const uint64_t reserve = 512ull << 20;   /* CUDA / cuDNN / cuBLAS keep working */
    if (bytes + reserve > fr) return NULL;
    if (cudaMalloc(&c->scratch, bytes) != cudaSuccess) {
        cudaGetLastError();
        c->scratch = NULL;
        return NULL;
    }
    c->scratch_bytes = bytes;
    return c->scratch;
}

void cu_tune_release(cu_ctx *c) {
    if (c->scratch) cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    for (int i = 0; i < 2; i++)
        if (c->tev[i]) cudaEventDestroy(c->tev[i]);
    c->tev[0] = c->tev[1] = NULL;
}

/* Time D's candidates with workspace <= ws_avail; the others stay untimed. */
static int time_dir(cu_ctx *c, const cu_layer *L, int n, const vd_layer *l, int dir, gdir *D,
                    void *const ptr[3], void *ws, uint64_t ws_avail, vd_err *e) {
    cudaStream_t s = cu_compute(c);
    float best = -1.0f;
    for (int k = 0; k < D->n; k++) {
        gcand *q = &D->c[k];
        if (q->bad || q->ws > ws_avail) continue;
        float t[3] = {0, 0, 0};
        int runs = 0;
        for (int r = 0; r < 3; r++) {
            CUDA_CHECK(e, cudaEventRecord(c->tev[0], s));
            cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
            if (q->gemm || q->direct) {
                int rc = q->gemm ? gemm_filter(c, L, n, ptr, ws, e)
                                 : direct_fwd(c, L, l, n, ptr, NULL, false, e);
                if (rc) return rc;
            } else {
                CUDNN_SOFT(e, st, exec_plan(c->dnn, q->plan, ptr, q->ws ? ws : NULL));
            }
            if (st != CUDNN_STATUS_SUCCESS) {
                dbg(c, 2, "  '%s' %s: engine %lld does not run: %s", l->name, dir_name[dir],
                    (long long)q->engine, cudnnGetErrorString(st));
                q->bad = true;
                break;
            }
            CUDA_CHECK(e, cudaEventRecord(c->tev[1], s));
            CUDA_CHECK(e, cudaEventSynchronize(c->tev[1]));
            CUDA_CHECK(e, cudaEventElapsedTime(&t[r], c->tev[0], c->tev[1]));
            runs = r + 1;
            if (r == 0 && best >= 0.0f && t[0] > 2.0f * best) break;   /* clearly slower */
        }
        if (q->bad) continue;
        q->ms = runs == 3 ? (t[1] < t[2] ? t[1] : t[2]) : t[0];
        if (best < 0.0f || q->ms < best) best = q->ms;
        dbg(c, 2, "  '%s' %s: engine %lld: %.3f ms (%d runs)", l->name, dir_name[dir],
            (long long)q->engine, (double)q->ms, runs);
    }
    return VD_OK;
}

/* ---- choosing ---------------------------------------------------------------------------- */
/* Fastest timed candidate within lim, or (untimed) the first within lim; -1 none. */
static int pick_fast(const gdir *D, uint64_t lim, bool timed) {
    int best = -1;
    for (int k = 0; k < D->n; k++) {
        const gcand *q = &D->c[k];
        if (q->bad || q->ws > lim) continue;
        if (!timed) return k;
        if (q->ms < 0.0f) continue;
        if (best < 0 || q->ms < D->c[best].ms) best = k;
    }
    return best;
}

/* Least workspace; among equals the faster timed one, else the first. */
static int pick_minws(const gdir *D) {
    int best = -1;
    for (int k = 0; k < D->n; k++) {
        const gcand *q = &D->c[k];
        if (q->bad) continue;
        if (best < 0 || q->ws < D->c[best].ws) { best = k; continue; }
        const gcand *b = &D->c[best];
        if (q->ws == b->ws && q->ms >= 0.0f && (b->ms < 0.0f || q->ms < b->ms)) best = k;
    }
    return best;
}

/* Does option co run direction d as sub-batch chunks? */
static bool opt_split_dir(const cu_conv_opt *co, int d) {
    return co->split > 1 && co->sset >= 0 && !(co->whole_mask & (1u << d));
}

/* The candidate list option co's direction d picks from. */
static const gdir *opt_dir(const cu_graph *g, const cu_conv_opt *co, int d) {
    return opt_split_dir(co, d) ? &g->s[co->sset][d] : &g->d[d];
}

/* Summed timed milliseconds of picks pick[] from the whole-batch (sset < 0)
 * or split set sset's candidates; < 0 if a direction was not timed. */
static float picks_ms(const cu_graph *g, int split, int sset, const int pick[CU_GD_COUNT]) {
    float t = 0.0f;
    for (int d = 0; d < CU_GD_COUNT; d++) {
        if (pick[d] < 0 || d == CU_GD_BWD_DATA_ACC) continue;
        const gdir *D = split > 1 && sset >= 0 ? &g->s[sset][d] : &g->d[d];
        float m = D->c[pick[d]].ms;
        if (m < 0) return -1.0f;
        t += m;
    }
    return t;
}

/* bf16 / fp16: the engines without tensor cores that cuDNN offers as the
 * low-workspace fallbacks of channels-last 16-bit maps run 20-7000x slower than the
 * fastest (measured on the H200: ResNet-50's 3x3 backward-filter 0.1 ms vs
 * 700 ms); an option that slow is never worth its workspace (offloading or
 * recomputing costs less), and timing it in the profile takes minutes. So
 * an option timed over OPT_SLOW_X times option 0 is not listed. */
enum { OPT_SLOW_X = 8 };
static bool opt_too_slow(const cu_layer *L, const cu_graph *g, int split, int sset,
                         const int pick[CU_GD_COUNT]) {
    const cu_conv_opt *o0 = &L->conv_opts[0];
    float t0 = picks_ms(g, o0->split, o0->sset, o0->gplan), t = picks_ms(g, split, sset, pick);
    return t0 > 0.0f && t > OPT_SLOW_X * t0;
}

/* Append the option of per-direction picks pick[] (chosen under workspace
 * cap cap; split > 1: the directions not in whole_mask index split set
 * sset's plans and run as split chunks) unless an option with the same
 * picks from the same plans in every direction is listed already. */
static void add_gopt_in(cu_layer *L, const cu_graph *g, int split, int sset, unsigned whole_mask,
                        const char *label, const int pick[CU_GD_COUNT], uint64_t cap,
                        uint64_t bias_ws) {
    for (int k = 0; k < L->n_opts; k++)
        if (!memcmp(L->conv_opts[k].gplan, pick, sizeof L->conv_opts[k].gplan) &&
            L->conv_opts[k].sset == sset && L->conv_opts[k].whole_mask == whole_mask)
            return;
    if (L->n_opts >= CU_MAX_OPTS) return;
    if (cu_dt_16(L->dt) && L->n_opts > 0 && opt_too_slow(L, g, split, sset, pick))
        return;
    cu_conv_opt *co = &L->conv_opts[L->n_opts];
    vd_algo_opt *o = &L->opts[L->n_opts];
    memset(co, 0, sizeof *co);
    memset(o, 0, sizeof *o);
    co->split = split;
    co->sset = sset;
    co->whole_mask = whole_mask;
    const gcand *q[CU_GD_COUNT];
    uint64_t dws[CU_GD_COUNT];
    for (int d = 0; d < CU_GD_COUNT; d++) {
        co->gplan[d] = pick[d];
        q[d] = pick[d] >= 0 ? &opt_dir(g, co, d)->c[pick[d]] : NULL;
        /* a split backward-filter also keeps the partial dw in the workspace */
        dws[d] = q[d] ? q[d]->ws + (d == CU_GD_BWD_FILTER && opt_split_dir(co, d) ? g->dw_tmp : 0) : 0;
    }
    /* backward: bwd-data (and its accumulate variant), bwd-filter, bias scratch */
    uint64_t ws_bwd = bias_ws;
    for (int d = 0; d < CU_GD_COUNT; d++)
        if (q[d] && d != CU_GD_FWD) ws_bwd = u64max(ws_bwd, dws[d]);
    co->fwd_ws = dws[CU_GD_FWD];
    co->bwd_data_ws = dws[CU_GD_BWD_DATA];
    co->bwd_filter_ws = dws[CU_GD_BWD_FILTER];
    co->cap = cap;
    o->fwd_algo = q[CU_GD_FWD] ? (int)q[CU_GD_FWD]->engine : -1;
    o->bwd_data_algo = q[CU_GD_BWD_DATA] ? (int)q[CU_GD_BWD_DATA]->engine : -1;
    o->bwd_filter_algo = q[CU_GD_BWD_FILTER] ? (int)q[CU_GD_BWD_FILTER]->engine : -1;
    o->ws_fwd = co->fwd_ws;
    o->ws_bwd = ws_bwd;
    o->workspace = u64max(o->ws_fwd, o->ws_bwd);
    snprintf(o->label, sizeof o->label, "%s", label);
    L->n_opts++;
}

static void add_gopt(cu_layer *L, const cu_graph *g, const char *label, const int pick[CU_GD_COUNT],
                     uint64_t cap, uint64_t bias_ws) {
    add_gopt_in(L, g, 1, -1, 0, label, pick, cap, bias_ws);   /* whole batch: sset -1 */
}

/* Per direction the fastest (timed) or first (untimed) candidate within lim,
 * else mw's (the least workspace); directions without candidates: -1. */
static void pick_within(const cu_graph *g, uint64_t lim, bool timed, const int mw[CU_GD_COUNT],
                        int out[CU_GD_COUNT]) {
    for (int d = 0; d < CU_GD_COUNT; d++) {
        out[d] = mw[d] < 0 ? -1 : pick_fast(&g->d[d], lim, timed);
        if (out[d] < 0) out[d] = mw[d];
    }
}

static void gdir_free(gdir *D) {
    for (int k = 0; k < D->n; k++) gcand_free(&D->c[k]);
    gop_free(&D->op);
    D->n = 0;
}

static void graph_free(cu_graph *g) {
    if (!g) return;
    for (int d = 0; d < CU_GD_COUNT; d++) {
        gdir_free(&g->d[d]);
        for (int i = 0; i < G_SPLITS; i++) gdir_free(&g->s[i][d]);
    }
    for (int i = 0; i < G_MAXALT; i++) {
        gcand_free(&g->alt[i].p);
        gop_free(&g->alt[i].op);
    }
    tmp_clear(g);
    vd_free(g);
}

void cu_graph_layer_free(cu_layer *L) {
    if (L->g && L->g_owner) graph_free(L->g);
    L->g = NULL;
    L->g_owner = false;
}

/* ---- setup -------------------------------------------------------------------------------- */
/* Direction d's operation graph at batch n into D->op and its candidate
 * plans (mode A's first c->conv_topk usable, then up to G_FALLBACK of the
 * fallback list) with workspace <= cap into D->c. *ok / *st: as build_op. */
static int gdir_build(cu_ctx *c, cu_graph *g, const cu_layer *L, const vd_layer *l, int d, int n,
                      uint64_t cap, gdir *D, bool *ok, cudnnStatus_t *st, vd_err *e) {
    int rc = build_op(c, L, l, d, n, g->ax, g->aw, &D->op, ok, st, e);
    if (rc || !*ok) return rc;
    if ((rc = add_from_heur(c, g, l->name, d, D->op.graph, CUDNN_HEUR_MODE_A, c->conv_topk, cap,
                            D->c, &D->n, G_MAXC, e)))
        return rc;
    /* bf16 / fp16 channels-last: the fallback list's engines run 100-7000x slower
     * than mode A's tensor-core ones (H200, ResNet-50 backward-filter 0.1 vs
     * 700 ms) and timing them took minutes; asked only when mode A has none */
    if (cu_dt_16(L->dt) && D->n > 0) return VD_OK;
    return add_from_heur(c, g, l->name, d, D->op.graph, CUDNN_HEUR_MODE_FALLBACK, G_FALLBACK, cap,
                         D->c, &D->n, G_MAXC, e);
}

/* The split options (see split_target) of layer li, from the timing buffers
 * of graph_setup (tptr: x, w, y, dw at the whole batch; ws, ws_avail). Called
 * before cu_conv_opts_order, so option 0 is "fastest". A set whose
 * directions do not all get a timed engine within its target is dropped. */
static int split_setup(cu_ctx *c, const vd_layer *l, cu_layer *L, cu_graph *g, int ndir,
                       void *const tptr[4], void *ws, uint64_t ws_avail, uint64_t bias_ws,
                       vd_err *e) {
    const int nb = c->batch;
    const uint64_t fastest = L->n_opts ? L->opts[0].workspace : 0;
    const bool force = c->conv_split == 2;
    /* no split options in bf16 / fp16 (their partial dW sums are fp32 code) */
    if (c->conv_split == 0 || vd_math_nhwc(c->math) || (!force && fastest <= SPLIT_MIN))
        return VD_OK;
    const uint64_t xs = (uint64_t)L->in_c[0] * L->in_h * L->in_w * 4;
    const uint64_t ys = (uint64_t)L->c * L->h * L->w * 4;
    if (xs % 16 || ys % 16) return VD_OK;   /* chunks would lose the declared alignment */
    int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
    g->dw_numel = (int64_t)l->u.conv.out * (L->in_c[0] / gr) * l->u.conv.kh * l->u.conv.kw;
    g->dw_tmp = VD_ALIGN_UP((uint64_t)g->dw_numel * 4, 256);
    int prev = 1, rc;
    for (int i = 0; i < (force ? G_SPLITS_FORCE : G_SPLITS); i++) {
        const uint64_t t = force ? UINT64_MAX : split_target[i];
        int k = 1;
        if (force) k = nb % (2 << i) == 0 ? 2 << i : 1;
        else
            while ((fastest + (uint64_t)k - 1) / (uint64_t)k > t && nb % (2 * k) == 0) k *= 2;
        if (k <= prev || t <= g->dw_tmp) continue;
        prev = k;
        const int n = nb / k;
        bool all = true;
        int pick[CU_GD_COUNT];
        for (int d = 0; d < CU_GD_COUNT; d++) pick[d] = -1;
        for (int d = 0; d < ndir && all; d++) {
            gdir *D = &g->s[i][d];
            bool ok;
            cudnnStatus_t st;
            uint64_t cap = force ? c->total_mem / 4 : t - (d == CU_GD_BWD_FILTER ? g->dw_tmp : 0);
            if ((rc = gdir_build(c, g, L, l, d, n, cap, D, &ok, &st, e))) return rc;
            all = D->n > 0;
        }
        for (int j = 0; j < ndir && all; j++) {
            int d = time_order[j];
            void *ptr[3] = {tptr[0], d == CU_GD_BWD_FILTER ? tptr[3] : tptr[1], tptr[2]};
            if ((rc = time_dir(c, L, n, l, d, &g->s[i][d], ptr, ws, ws_avail, e))) return rc;
            pick[d] = pick_fast(&g->s[i][d], UINT64_MAX, true);
            all = pick[d] >= 0;
        }
        if (all) CUDA_CHECK(e, cudaStreamSynchronize(cu_compute(c)));
        if (!all) {
            dbg(c, 1, "layer '%s': no split option at batch %d (an engine is missing)", l->name, n);
            for (int d = 0; d < CU_GD_COUNT; d++) gdir_free(&g->s[i][d]);
            continue;
        }
        char label[32];
        snprintf(label, sizeof label, "b/%d", k);
        add_gopt_in(L, g, k, i, 0, label, pick, t, bias_ws);
        /* Mixed: a direction whose best whole-batch engine within t was
         * timed faster than its k chunks runs at the whole batch (VGG-16
         * b256 features.2: backward-data whole, backward-filter split). The
         * label names the split directions: f forward, d backward-data, w
         * backward-filter ("b/2 w", "b/4 fd" with --conv-split force). */
        unsigned whole = 0;
        int mix[CU_GD_COUNT];
        char dirs[8] = {0};
        int nd = 0;
        for (int d = 0; d < CU_GD_COUNT; d++) {
            mix[d] = pick[d];
            if (pick[d] < 0) continue;
            int wb = pick_fast(&g->d[d], t, true);
            float split_ms = (float)k * g->s[i][d].c[pick[d]].ms;
            /* --conv-split force (tests): the first set splits only
             * backward-filter, the second only the others */
            bool w = force ? (d == CU_GD_BWD_FILTER) == (i == 1)
                           : wb >= 0 && g->d[d].c[wb].ms < split_ms;
            if (w && wb >= 0) {
                whole |= 1u << d;
                mix[d] = wb;
            } else if (d != CU_GD_BWD_DATA_ACC) {
                dirs[nd++] = d == CU_GD_FWD ? 'f' : d == CU_GD_BWD_DATA ? 'd' : 'w';
            }
        }
        unsigned every = 0;
        for (int d = 0; d < CU_GD_COUNT; d++)
            if (pick[d] >= 0) every |= 1u << d;
        if (whole && whole != every) {
            snprintf(label, sizeof label, "b/%d %s", k, dirs);
            add_gopt_in(L, g, k, i, whole, label, mix, t, bias_ws);
        }
    }
    return VD_OK;
}

/* One direction of a split option: k chunks of batch n/k, each through the
 * sub-batch plan q; backward-filter chunks after the first write their dw
 * into the workspace front and are added to dw. */
static int run_split(cu_ctx *c, const cu_layer *L, const cu_graph *g, int d, int k,
                     const gcand *q, void *const ptr[3], const vd_op_io *io, vd_err *e) {
    const uint64_t xs = (uint64_t)L->in_c[0] * L->in_h * L->in_w * 4 * (uint64_t)(io->n / k);
    const uint64_t ys = (uint64_t)L->c * L->h * L->w * 4 * (uint64_t)(io->n / k);
    const bool filt = d == CU_GD_BWD_FILTER;
    char *tmp = (char *)io->ws;
    char *ws = filt ? tmp + g->dw_tmp : tmp;
    for (int i = 0; i < k; i++) {
        void *p[3] = {(char *)ptr[0] + (uint64_t)i * xs, filt && i > 0 ? (void *)tmp : ptr[1],
                      (char *)ptr[2] + (uint64_t)i * ys};
        CUDNN_CHECK(e, exec_plan(c->dnn, q->plan, p, q->ws ? (void *)ws : NULL));
        if (filt && i > 0) {
            int rc = cuk_axpby_copy(cu_compute(c), c->sm_count, (const float *)tmp, (float *)ptr[1],
                                    1.0f, g->dw_numel, VD_DT_F32, e);
            if (rc) return rc;
        }
    }
    return VD_OK;
}

/* The options "fastest" (picks fa) with direction d's candidate of engine
 * (GEMM_ENGINE, DIRECT_ENGINE) instead, labelled label (tests). */
static void add_forced(cu_layer *L, const cu_graph *g, const int fa[CU_GD_COUNT], int d,
                       int64_t engine, const char *label, uint64_t bias_ws) {
    const gdir *D = &g->d[d];
    for (int k = 0; k < D->n; k++)
        if (D->c[k].engine == engine && !D->c[k].bad) {
            int gp[CU_GD_COUNT];
            memcpy(gp, fa, sizeof gp);
            gp[d] = k;
            add_gopt(L, g, label, gp, UINT64_MAX, bias_ws);
        }
}

static int graph_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, cu_graph *g,
                       uint64_t bias_ws, bool *no_engine, char *why, size_t why_n, vd_err *e) {
    const vd_layer *l = &net->layers[li];
    const int nb = c->batch;
    uint64_t ybytes = out_bytes(L, nb);
    /* Like cudnn.benchmark, "fastest" may take any workspace the device can
     * spare (the planner falls back to balanced / min-ws under a budget):
     * with the legacy cap of max(2 GiB, output bytes) the FFT / Winograd
     * engines of the 56x56 and 28x28 VGG layers dropped out (measured). */
    uint64_t cap = c->total_mem / 4;
    bool acc = cu_conv_input_shared(net, li);
    int ndir = acc ? CU_GD_COUNT : CU_GD_BWD_DATA_ACC;
    int rc;
    for (int d = 0; d < ndir; d++) {
        gdir *D = &g->d[d];
        bool ok;
        cudnnStatus_t st;
        if ((rc = gdir_build(c, g, L, l, d, nb, cap, D, &ok, &st, e))) return rc;
        if (d == CU_GD_BWD_FILTER && D->n > 0) add_gemm(c, L, l, nb, cap, D);
        if (d == CU_GD_FWD && D->n > 0) add_direct(c, L, l, nb, D);
        if (D->n == 0) {
            if (d == CU_GD_BWD_DATA_ACC) {   /* beta-1 plans come at run time, or legacy */
                dbg(c, 1, "layer '%s': no graph engine for %s at setup", l->name, dir_name[d]);
                continue;
            }
            *no_engine = true;
            if (!ok)
                snprintf(why, why_n, "%s operation graph not supported (%s)", dir_name[d],
                         cudnnGetErrorString(st));
            else
                snprintf(why, why_n, "no usable %s engine in %s%s mode", dir_name[d],
                         vd_math_name(c->math),
                         c->deterministic ? " deterministic" : "");
            return VD_OK;
        }
    }
    /* timing */
    bool timed = false;
    void *tptr[4] = {NULL, NULL, NULL, NULL};   /* x, w, y, dw of the timing runs */
    void *tws = NULL;
    uint64_t tws_avail = 0;
    if (c->tune) {
        const uint64_t A = 256;
        int gr = l->u.conv.groups > 0 ? l->u.conv.groups : 1;
        uint64_t xb = VD_ALIGN_UP((uint64_t)nb * L->in_c[0] * L->in_h * L->in_w * 4, A);
        uint64_t yb = VD_ALIGN_UP(ybytes, A);
        uint64_t wb = VD_ALIGN_UP((uint64_t)l->u.conv.out * (L->in_c[0] / gr) * l->u.conv.kh *
                                      l->u.conv.kw * 4, A);
        uint64_t fixed = xb + yb + 2 * wb, wsmax = 0;
        for (int d = 0; d < ndir; d++)
            for (int k = 0; k < g->d[d].n; k++) wsmax = u64max(wsmax, g->d[d].c[k].ws);
        char *buf = (char *)scratch_get(c, fixed + wsmax);
        uint64_t ws_avail = wsmax;
        if (!buf) {   /* not all: the candidates that fit in what is free */
            size_t fr = 0, tot = 0;
            CUDA_CHECK(e, cudaMemGetInfo(&fr, &tot));
            uint64_t room = fr > (1ull << 30) ? fr - (1ull << 30) : 0;
            if (room > fixed) {
                ws_avail = room - fixed;
                buf = (char *)scratch_get(c, fixed + ws_avail);
            }
        }
        if (buf) {
            for (int i = 0; i < 2; i++)
                if (!c->tev[i]) CUDA_CHECK(e, cudaEventCreate(&c->tev[i]));
            cudaStream_t s = cu_compute(c);
            float *x = (float *)buf, *y = (float *)(buf + xb), *w = (float *)(buf + xb + yb),
                  *dw = (float *)(buf + xb + yb + wb);
            void *ws = buf + fixed;
            const vd_dtype ft = vd_math_act_dtype(c->math);   /* 16-bit: no inf / NaN */
            if ((rc = cuk_fill_uniform(s, c->sm_count, x, (int64_t)(xb / 4), 11, -1.0f, 1.0f, ft, e)) ||
                (rc = cuk_fill_uniform(s, c->sm_count, y, (int64_t)(yb / 4), 12, -1.0f, 1.0f, ft, e)) ||
                (rc = cuk_fill_uniform(s, c->sm_count, w, (int64_t)(wb / 4), 13, -0.1f, 0.1f, ft, e)))
                return rc;
            for (int i = 0; i < ndir; i++) {
                int d = time_order[i];
                void *ptr[3] = {x, d == CU_GD_BWD_FILTER ? (void *)dw : (void *)w, y};
                if ((rc = time_dir(c, L, nb, l, d, &g->d[d], ptr, ws, ws_avail, e)))
                    return rc;
            }
            CUDA_CHECK(e, cudaStreamSynchronize(s));
            timed = true;
            tptr[0] = x; tptr[1] = w; tptr[2] = y; tptr[3] = dw;
            tws = ws;
            tws_avail = ws_avail;
        } else {
            dbg(c, 1, "layer '%s': not enough free device memory to time engines; heuristic order",
                l->name);
        }
    }
    /* options */
    uint64_t lim = timed ? u64max(16ull << 20, ybytes / 4) : u64max(16ull << 20, ybytes);
    int fa[CU_GD_COUNT], mw[CU_GD_COUNT], ba[CU_GD_COUNT];
    bool any_timed = false;
    for (int d = 0; d < CU_GD_COUNT; d++) {
        const gdir *D = &g->d[d];
        fa[d] = mw[d] = -1;
        if (D->n == 0) continue;
        mw[d] = pick_minws(D);
        if (mw[d] < 0) {   /* every candidate failed to run */
            if (d == CU_GD_BWD_DATA_ACC) continue;
            *no_engine = true;
            snprintf(why, why_n, "no %s engine ran", dir_name[d]);
            return VD_OK;
        }
        fa[d] = timed ? pick_fast(D, UINT64_MAX, true) : -1;
        if (fa[d] >= 0) any_timed = true;
        if (fa[d] < 0) fa[d] = pick_fast(D, UINT64_MAX, false);
    }
    pick_within(g, lim, timed, mw, ba);
    L->n_opts = 0;
    L->tuned = any_timed;
    add_gopt(L, g, "fastest", fa, UINT64_MAX, bias_ws);
    add_gopt(L, g, "min-ws", mw, 0, bias_ws);
    add_gopt(L, g, "balanced", ba, lim, bias_ws);
    /* the workspace ladder between fastest and balanced, from the same timings */
    for (int r = 0; r < CU_WS_RUNGS; r++) {
        uint64_t rcap;
        const char *rlabel;
        cu_ws_rung(r, &rcap, &rlabel);
        int rp[CU_GD_COUNT];
        pick_within(g, rcap, timed, mw, rp);
        add_gopt(L, g, rlabel, rp, rcap, bias_ws);
    }
    /* tests: the GEMM backward-filter and the direct forward as options of their own */
    if (c->conv_gemm_force) add_forced(L, g, fa, CU_GD_BWD_FILTER, GEMM_ENGINE, "gemm w", bias_ws);
    if (c->conv_direct_force) add_forced(L, g, fa, CU_GD_FWD, DIRECT_ENGINE, "direct", bias_ws);
    if (timed && !c->deterministic &&
        (rc = split_setup(c, l, L, g, ndir, tptr, tws, tws_avail, bias_ws, e)))
        return rc;
    /* tests: and every option's forward the direct kernel, at the whole batch
     * (then a following ReLU in place fuses into it, cu_fuse_setup) */
    for (int k = 0; c->conv_direct_force && k < g->d[CU_GD_FWD].n; k++) {
        const gcand *q = &g->d[CU_GD_FWD].c[k];
        if (!q->direct || q->bad) continue;
        for (int o = 0; o < L->n_opts; o++) {
            L->conv_opts[o].gplan[CU_GD_FWD] = k;
            L->conv_opts[o].whole_mask |= 1u << CU_GD_FWD;
        }
        break;
    }
    cu_conv_opts_order(L);
    /* drop the plans no option uses (set -1: the whole-batch plans) */
    for (int set = -1; set < G_SPLITS; set++)
        for (int d = 0; d < CU_GD_COUNT; d++) {
            gdir *D = set < 0 ? &g->d[d] : &g->s[set][d];
            for (int k = 0; k < D->n; k++) {
                bool used = false;
                for (int o = 0; o < L->n_opts; o++) {
                    const cu_conv_opt *co = &L->conv_opts[o];
                    used |= co->gplan[d] == k && (opt_split_dir(co, d) ? co->sset == set : set < 0);
                }
                if (!used) {
                    gcand_free(&D->c[k]);
                    D->c[k].bad = true;
                }
            }
        }
    if (c->conv_debug >= 1) {
        for (int o = 0; o < L->n_opts; o++) {
            char line[400];
            size_t at = 0;
            const cu_conv_opt *co = &L->conv_opts[o];
            for (int d = 0; d < CU_GD_COUNT && at < sizeof line; d++) {
                int k = co->gplan[d];
                if (k < 0) continue;
                const gcand *q = &opt_dir(g, co, d)->c[k];
                at += (size_t)snprintf(line + at, sizeof line - at, " %s=e%lld%s(%lluB,%.3fms)",
                                       dir_name[d], (long long)q->engine, q->tc ? "tc" : "",
                                       (unsigned long long)q->ws, (double)q->ms);
            }
            dbg(c, 1, "layer '%s': graph API, %s, option %d %s:%s", l->name,
                timed ? "timed" : "heuristic order", o, L->opts[o].label, line);
        }
    }
    return VD_OK;
}

int cu_graph_conv_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, uint64_t bias_ws,
                        bool *no_engine, char *why, size_t why_n, vd_err *e) {
    *no_engine = false;
    if (why_n) why[0] = '\0';
    cu_graph *g = (cu_graph *)vd_calloc(1, sizeof *g, e);
    if (!g) return VD_ENOMEM;
    g->ax = 16;
    /* bf16 / fp16: the weight is the 256-aligned copy in the workspace (conv_16_io) */
    g->aw = vd_math_nhwc(c->math) ? 16 : cu_conv_weight_align(net, li);
    int rc = graph_setup(c, net, li, L, g, bias_ws, no_engine, why, why_n, e);
    if (rc || *no_engine) {
        graph_free(g);
        L->n_opts = 0;
        return rc;
    }
    tmp_clear(g);
    L->g = g;
    L->g_owner = true;
    return VD_OK;
}

float cu_graph_conv_fastest_ms(const cu_layer *L) {
    const cu_graph *g = L->g;
    if (!g || L->n_opts < 1 || !L->tuned) return -1.0f;
    const cu_conv_opt *co = &L->conv_opts[0];
    static const int dirs[3] = {CU_GD_FWD, CU_GD_BWD_DATA, CU_GD_BWD_FILTER};
    float sum = 0.0f;
    for (int i = 0; i < 3; i++) {
        int d = dirs[i], k = co->gplan[d];
        if (k < 0) return -1.0f;
        const gcand *q = &opt_dir(g, co, d)->c[k];
        if (q->ms < 0.0f) return -1.0f;
        sum += (opt_split_dir(co, d) ? (float)co->split : 1.0f) * q->ms;
    }
    return sum;
}

/* ---- run -------------------------------------------------------------------------------------- */
static int run_alt(cu_ctx *c, const vd_net *net, int li, int d, const vd_op_io *io,
                   void *const ptr[3], int64_t ax, int64_t aw, vd_err *e) {
    cu_layer *L = &c->layers[li];
    cu_graph *g = L->g;
    const vd_layer *l = &net->layers[li];
    const float beta = d == CU_GD_BWD_DATA_ACC ? 1.0f : 0.0f;
    const int ldir = d == CU_GD_BWD_DATA_ACC ? CU_GD_BWD_DATA : d;
    void *ws = io->ws_bytes ? io->ws : NULL;
    uint64_t wsb = io->ws ? io->ws_bytes : 0;
    for (int i = 0; i < G_MAXALT; i++) {
        const galt *a = &g->alt[i];
        if (!a->used || a->dir != d || a->n != io->n || a->ax != ax || a->aw != aw) continue;
        if (a->legacy && wsb <= a->ws_limit)
            return cu_legacy_conv_dir(c, net, li, ldir, io, beta, e);
        if (!a->legacy && a->p.ws <= wsb) {
            CUDNN_CHECK(e, exec_plan(c->dnn, a->p.plan, ptr, a->p.ws ? ws : NULL));
            return VD_OK;
        }
    }
    galt *a = &g->alt[g->alt_next];
    g->alt_next = (g->alt_next + 1) % G_MAXALT;
    gcand_free(&a->p);
    gop_free(&a->op);
    memset(a, 0, sizeof *a);
    a->used = true;
    a->dir = d;
    a->n = io->n;
    a->beta = beta;
    a->ax = ax;
    a->aw = aw;
    bool ok;
    cudnnStatus_t st;
    int rc, n = 0;
    if ((rc = build_op(c, L, l, d, io->n, ax, aw, &a->op, &ok, &st, e))) goto fail;
    if (ok) {
        if ((rc = add_from_heur(c, g, l->name, d, a->op.graph, CUDNN_HEUR_MODE_A, 1, wsb, &a->p,
                                &n, 1, e)))
            goto fail;
        if (!n && (rc = add_from_heur(c, g, l->name, d, a->op.graph, CUDNN_HEUR_MODE_FALLBACK, 1,
                                      wsb, &a->p, &n, 1, e)))
            goto fail;
    }
    if (!n) {
        a->legacy = true;
        a->ws_limit = wsb;
        dbg(c, 1, "layer '%s' %s: batch %d, alignment %lld/%lld, workspace %llu: no graph engine; "
            "legacy API", l->name, dir_name[d], io->n, (long long)ax, (long long)aw,
            (unsigned long long)wsb);
        return cu_legacy_conv_dir(c, net, li, ldir, io, beta, e);
    }
    dbg(c, 1, "layer '%s' %s: batch %d, alignment %lld/%lld, workspace %llu: runtime plan, engine "
        "%lld", l->name, dir_name[d], io->n, (long long)ax, (long long)aw,
        (unsigned long long)wsb, (long long)a->p.engine);
    CUDNN_CHECK(e, exec_plan(c->dnn, a->p.plan, ptr, a->p.ws ? ws : NULL));
    return VD_OK;
fail:
    gcand_free(&a->p);
    gop_free(&a->op);
    a->used = false;
    tmp_clear(g);
    return rc;
}

int cu_graph_conv_run(cu_ctx *c, const vd_net *net, int li, int dir, const vd_op_io *io,
                      float beta, vd_err *e) {
    cu_layer *L = &c->layers[li];
    cu_graph *g = L->g;
    if (!g) return vd_errf(e, VD_EINTERNAL, "conv '%s': no graph plans", net->layers[li].name);
    void *ptr[3];
    if (dir == CU_GD_FWD) {
        ptr[0] = (void *)io->x[0]; ptr[1] = (void *)io->w; ptr[2] = io->y;
    } else if (dir == CU_GD_BWD_FILTER) {
        ptr[0] = (void *)io->x[0]; ptr[1] = io->dw; ptr[2] = (void *)io->dy;
    } else {
        ptr[0] = io->dx[0]; ptr[1] = (void *)io->w; ptr[2] = (void *)io->dy;
    }
    for (int i = 0; i < 3; i++)
        if (!ptr[i])
            return vd_errf(e, VD_EINTERNAL, "conv '%s' %s: a tensor pointer is NULL",
                           net->layers[li].name, dir_name[dir]);
    int d = dir == CU_GD_BWD_DATA && beta != 0.0f ? CU_GD_BWD_DATA_ACC : dir;
    int64_t ax = ptr_align(ptr[0]), aw = ptr_align(ptr[1]);
    if (ptr_align(ptr[2]) < ax) ax = ptr_align(ptr[2]);
    const cu_conv_opt *o = &L->conv_opts[io->algo];
    int k = o->gplan[d];
    if (opt_split_dir(o, d)) {
        if (k >= 0 && io->n == c->batch && ax >= g->ax && aw >= g->aw) {
            const gcand *q = &g->s[o->sset][d].c[k];
            uint64_t need = q->ws + (dir == CU_GD_BWD_FILTER ? g->dw_tmp : 0);
            if (need == 0 || (io->ws && need <= io->ws_bytes))
                return run_split(c, L, g, d, o->split, q, ptr, io, e);
        }
        return run_alt(c, net, li, d, io, ptr, ax, aw, e);
    }
    if (k >= 0 && g->d[d].c[k].direct) {   /* any batch, any alignment; adds the bias */
        const vd_layer *l = &net->layers[li];
        return direct_fwd(c, L, l, io->n, ptr, l->u.conv.bias ? io->b : NULL, L->fwd_relu, e);
    }
    if (k >= 0 && io->n == c->batch && ax >= g->ax && aw >= g->aw) {
        const gcand *q = &g->d[d].c[k];
        if (q->ws == 0 || (io->ws && q->ws <= io->ws_bytes)) {
            if (q->gemm) return gemm_filter(c, L, io->n, ptr, io->ws, e);
            CUDNN_CHECK(e, exec_plan(c->dnn, q->plan, ptr, q->ws ? io->ws : NULL));
            return VD_OK;
        }
    }
    return run_alt(c, net, li, d, io, ptr, ax, aw, e);
}

bool cu_graph_fwd_fuses_bias(const cu_ctx *c, int li, int algo) {
    const cu_layer *L = &c->layers[li];
    if (!L->g || algo < 0 || algo >= L->n_opts) return false;
    const cu_conv_opt *o = &L->conv_opts[algo];
    int k = o->gplan[CU_GD_FWD];
    return k >= 0 && !opt_split_dir(o, CU_GD_FWD) && L->g->d[CU_GD_FWD].c[k].direct;
}

void cu_fuse_setup(cu_ctx *c, const vd_net *net) {
    for (int r = 0; r < net->n_layers; r++) {
        const vd_layer *lr = &net->layers[r];
        int p = lr->n_in == 1 ? lr->in[0] : -1;
        /* in place: the conv's output has no other consumer, and nothing
         * reads it unrectified (vd_schedule_inplace_flags) */
        if (lr->op != VD_OP_RELU || !lr->inplace || p < 0 || net->layers[p].op != VD_OP_CONV)
            continue;
        cu_layer *P = &c->layers[p];
        bool all = P->n_opts > 0;
        for (int k = 0; all && k < P->n_opts; k++) all = cu_graph_fwd_fuses_bias(c, p, k);
        if (!all) continue;
        P->fwd_relu = true;
        c->layers[r].relu_fused = true;
        dbg(c, 1, "layer '%s': relu fused into '%s' (the direct forward kernel)", lr->name,
            net->layers[p].name);
    }
}
