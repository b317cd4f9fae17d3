/* cuda_convgraph.h — convolution through cuDNN's graph (backend) API, with
 * per-layer autotuning in layer_setup: what its files share.
 *
 * Why: the legacy API (cudnnFind*AlgorithmEx / cudnnConvolution*) reaches
 * only the engines its algorithm enums map to; the faster engines PyTorch
 * runs through cudnn-frontend are reachable only through operation graphs.
 * Per conv layer and direction these files build one operation graph (NCHW
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
 * behaviour note unless --conv-rtc (NVRTC costs seconds per engine) or
 * the graph fuses an epilogue (conv -> bias [-> ReLU], cu_conv_fwd_epi:
 * cuDNN's runtime-fusion engines, CG_FUSE_TOPK of them). Where such a
 * forward was timed faster than the plain one plus the separate bias (and
 * ReLU) passes it replaces the forward candidates (fuse_choose in
 * cuda_convgraph_tune.cu); a call its setup plan cannot take runs a plain
 * runtime plan and the passes (cg_epilogue).
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
 * without a beta-1 plan, dw accumulation (a chunk's dw_beta: no setup plan
 * has beta 1 there), lower pointer alignment, less workspace) gets a
 * plan built then: the option's setup engine where it supports the call and
 * fits the workspace given, else the first in heuristic order that fits,
 * cached per layer (G_MAXALT) for the calls whose workspace would give the
 * same engine (so that a call's engine does not depend on what ran before
 * it: a vdnn-bench point on the points before it); if no engine fits, the
 * legacy API runs it.
 *
 * Sub-batches past 2^31 elements (cuda_cudnn.cu's top): a layer whose input
 * or output at c->batch would pass INT32_MAX elements, which cuDNN's
 * tensors refuse, is set up at its describe batch (cu_layer.desc_batch, a
 * near-equal part of c->batch) instead: its operation graphs, timings,
 * split options and "setup batch" here are that batch's, and
 * cu_graph_conv_run never takes a call of more samples (cu_conv_forward /
 * cu_conv_backward run those as consecutive sub-batches, each within it).
 *
 * --conv-debug 1 prints on stderr which path and engines each conv layer
 * uses; 2 also every candidate (engine, notes, workspace, time) and every
 * runtime variant. (The one place library code prints: asked for by env.)
 *
 * Files (each includes this header; only they do):
 *   cuda_convgraph_build.cu  operation graphs, heuristic engine configs and
 *                            their finalized plans, running a plan, freeing;
 *   cuda_convgraph_own.cu    the candidates that are not cuDNN plans: the
 *                            cuBLAS 1x1 backward-filter and the direct
 *                            forward kernel (with its bias / ReLU fusion);
 *   cuda_convgraph_tune.cu   timing, the options and the split options, the
 *                            layer's setup (cu_graph_conv_setup);
 *   cuda_convgraph_run.cu    running an option's direction, runtime plans.
 * Their shared functions are named cg_*. */
#ifndef VD_CUDA_CONVGRAPH_H
#define VD_CUDA_CONVGRAPH_H

#include "backend/cuda/cuda_internal.h"

enum {
    G_MAXC = 24,       /* candidates kept per direction */
    G_FALLBACK = 4,    /* fallback-list candidates added per direction */
    G_MAXRES = 64,     /* heuristic results read per mode */
    G_MAXTMP = 160,    /* temporary descriptors of one heuristic query */
    G_MAXALT = 6,      /* runtime variant plans cached per layer */
    G_SPLITS = 4,      /* split sets (sub-batch plans) per layer */
    G_SPLITS_FORCE = 2, /* of which --conv-split force builds the first two */
    CG_FUSE_TOPK = 3,  /* heuristic engines of a fused forward graph */
};

/* Engine ids of the candidates that are not cuDNN plans (cuda_convgraph_own.cu). */
enum { GEMM_ENGINE = 1000, DIRECT_ENGINE = 1001 };

/* Direction names for messages, indexed by CU_GD_*. */
extern const char *const cg_dir_name[CU_GD_COUNT];

/* Forward epilogues fused into the conv's operation graph (cu_conv_fwd_epi). */
enum { CG_EPI_NONE = 0, CG_EPI_BIAS = 1, CG_EPI_BIAS_RELU = 2 };

/* One conv operation graph: tensors (x|dx, w|dw, y|dy: unique ids 1, 2, 3),
 * convolution, operation, graph. A forward with an epilogue (CG_EPI_*) also
 * holds the bias tensor (uid 4), the conv's output (virtual, uid 5), the
 * bias add's output when a ReLU follows (virtual, uid 6) and the pointwise
 * descriptors and operations of the add and the ReLU. */
typedef struct gop {
    cudnnBackendDescriptor_t t[3], conv, op, graph;
    cudnnBackendDescriptor_t tb, tv[2], pw[2], pwop[2];
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
                                             (cg_gemm_filter); engine GEMM_ENGINE */
    bool direct;                          /* not a cuDNN plan: the direct forward kernel
                                             (cuk_conv_direct_fwd); engine DIRECT_ENGINE */
} gcand;

typedef struct gdir {                     /* one direction at the setup batch */
    int epi;                              /* forward: CG_EPI_* its graph fuses */
    gop op;
    int n;                                /* candidates c[n], heuristic order */
    gcand c[G_MAXC];
} gdir;

typedef struct galt {                     /* a plan built at run time */
    bool used, legacy;                    /* legacy: no graph engine fits ws_limit */
    int dir, n;
    float beta;
    int64_t ax, aw;                       /* byte alignment: activations, weight */
    uint64_t ws_limit;                    /* the workspace the entry was made within:
                                             a legacy one (no engine fit) serves calls
                                             with at most this much, a graph one calls
                                             with from p.ws to this much (there the
                                             heuristics choose the same engine) */
    int want_epi;                         /* the epilogue asked for (part of the key) */
    int64_t pref;                         /* the engine tried first (part of the key):
                                             the option's setup engine, -1 none */
    int epi;                              /* the one p applies: want_epi, or CG_EPI_NONE where
                                             no fused engine fit */
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
    int64_t ab;                           /* declared byte alignment of the bias (fused forward) */
    gdir fz;                              /* setup only: the forward with an epilogue
                                             (cu_conv_fwd_epi); replaces d[CU_GD_FWD] where
                                             it is timed faster (cuda_convgraph_tune.cu) */
    float epi_ms;                         /* d[CU_GD_FWD] fused: the separate bias (+ ReLU)
                                             passes' measured time, which it saves */
    galt alt[G_MAXALT];
    int alt_next;
    cudnnBackendDescriptor_t tmp[G_MAXTMP];   /* heuristic query temporaries */
    int ntmp;
};

/* "This engine / graph is not supported", as opposed to a real error. */
static inline bool cg_soft_status(cudnnStatus_t s) {
    int cat = (int)CUDNN_STATUS_CATEGORY(s);
    return cat == (int)CUDNN_STATUS_NOT_SUPPORTED || cat == (int)CUDNN_STATUS_BAD_PARAM ||
           s == CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED;
}

/* Like CUDNN_CHECK, but a soft status (see cg_soft_status) is left in st for
 * the caller instead of failing. */
#define CUDNN_SOFT(e, st, expr)                                                          \
    do {                                                                                 \
        (st) = (expr);                                                                   \
        if ((st) != CUDNN_STATUS_SUCCESS && !cg_soft_status(st)) {                       \
            char detail_[256];                                                           \
            cudnnGetLastErrorString(detail_, sizeof detail_);                            \
            return vd_errf((e), VD_EDEVICE, "cuDNN error %s in %s at %s:%d: %s%s%s",     \
                           cudnnGetErrorString(st), __func__, __FILE__, __LINE__, #expr, \
                           detail_[0] ? ": " : "", detail_);                             \
        }                                                                                \
    } while (0)

/* Byte alignment (1..16) of pointer p. */
static inline int64_t cg_ptr_align(const void *p) {
    uintptr_t a = (uintptr_t)p;
    int64_t al = 16;
    while (al > 1 && a % (uintptr_t)al) al /= 2;
    return al;
}

/* Does option co run direction d as sub-batch chunks? */
static inline bool cg_opt_split_dir(const cu_conv_opt *co, int d) {
    return co->split > 1 && co->sset >= 0 && !(co->whole_mask & (1u << d));
}

/* The candidate list option co's direction d picks from. */
static inline const gdir *cg_opt_dir(const cu_graph *g, const cu_conv_opt *co, int d) {
    return cg_opt_split_dir(co, d) ? &g->s[co->sset][d] : &g->d[d];
}

/* ---- cuda_convgraph_build.cu ------------------------------------------------ */
/* With c->conv_debug >= level: "vdnn conv: " and the message on stderr. */
void cg_dbg(const cu_ctx *c, int level, const char *fmt, ...);
void cg_gop_free(gop *o);
void cg_gcand_free(gcand *k);
/* Free g's heuristic query temporaries. */
void cg_tmp_clear(cu_graph *g);
/* The beta of direction d's setup graphs: 1 for CU_GD_BWD_DATA_ACC, else 0
 * (the output overwritten). */
static inline float cg_dir_beta(int d) { return d == CU_GD_BWD_DATA_ACC ? 1.0f : 0.0f; }
/* The operation graph of direction dir (CU_GD_*) at batch n whose output is
 * beta times its old contents plus the convolution's (beta: cg_dir_beta(dir)
 * at setup; 1 also for a runtime backward-filter that adds to dw); epi
 * (forward, beta 0 only): CG_EPI_BIAS adds the bias (uid 4, fp32, 1xCx1x1),
 * CG_EPI_BIAS_RELU then takes max(., 0), all in fp32 before y is written.
 * *ok false (rc 0): cuDNN does not support it (*why: the status). o is
 * freed by cg_gop_free in every case. */
int cg_build_op(cu_ctx *c, const cu_layer *L, const vd_layer *l, int dir, float beta, int n,
                int64_t ax, int64_t aw, int64_t ab, int epi, gop *o, bool *ok, cudnnStatus_t *why,
                vd_err *e);
/* Append to out[*n] (capacity maxn) the usable configs of heuristic mode
 * for graph, at most take of them, each as a finalized plan with workspace
 * <= cap; the fallback list skips engines already in out. fused: graph has
 * an epilogue, whose engines are cuDNN's runtime-fusion ones: runtime
 * compiled (NVRTC) engines are then usable without --conv-rtc. only >= 0:
 * only the configs of that global engine index. */
int cg_add_from_heur(cu_ctx *c, cu_graph *g, const char *lname, int dir,
                     cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, int take,
                     uint64_t cap, bool fused, int64_t only, gcand *out, int *n, int maxn,
                     vd_err *e);
/* Run plan on the compute stream with ptr = {x|dx, w|dw, y|dy}; bias: the
 * bias of a plan of a fused forward (uid 4), NULL for the others. */
cudnnStatus_t cg_exec_plan(cudnnHandle_t h, cudnnBackendDescriptor_t plan, void *const ptr[3],
                           const float *bias, void *ws);
/* Direction d's operation graph at batch n (with D->epi's epilogue) into
 * D->op and its candidate plans with workspace <= cap into D->c: mode A's
 * first c->conv_topk usable, then up to G_FALLBACK of the fallback list;
 * with an epilogue mode A's first CG_FUSE_TOPK only (runtime-fusion engines
 * compile for seconds each, and the fallback list fuses nothing). *ok /
 * *st: as cg_build_op. */
int cg_gdir_build(cu_ctx *c, cu_graph *g, const cu_layer *L, const vd_layer *l, int d, int n,
                  uint64_t cap, gdir *D, bool *ok, cudnnStatus_t *st, vd_err *e);
void cg_gdir_free(gdir *D);
/* Free g and everything it holds (NULL: nothing). */
void cg_graph_free(cu_graph *g);

/* ---- cuda_convgraph_own.cu -------------------------------------------------- */
/* Append the GEMM candidate to the backward-filter candidates D at batch n. */
void cg_add_gemm(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, uint64_t cap, gdir *D);
/* ptr = {x, dw, dy} at batch n; ws holds the GEMM candidate's workspace;
 * beta != 0 adds the gradient to dw */
int cg_gemm_filter(cu_ctx *c, const cu_layer *L, int n, void *const ptr[3], void *ws, float beta,
                   vd_err *e);
/* Append the direct candidate to the forward candidates D at batch n. */
void cg_add_direct(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, gdir *D);
/* ptr = {x, w, y} at batch n; b: the bias or NULL; relu: then max(y, 0) */
int cg_direct_fwd(cu_ctx *c, const cu_layer *L, const vd_layer *l, int n, void *const ptr[3],
                  const float *b, bool relu, vd_err *e);
/* The epilogue epi (CG_EPI_BIAS / CG_EPI_BIAS_RELU) of a forward run
 * without it: io->y += bias, then max(., 0), in place (fallbacks of a
 * fused forward). */
int cg_epilogue(cu_ctx *c, const cu_layer *L, const vd_layer *l, const vd_op_io *io, int epi,
                vd_err *e);

#endif
