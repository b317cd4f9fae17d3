/* cuda_internal.h — pieces shared by the CUDA backend's files (C++ / CUDA).
 *
 * Not a public header: only src/backend/cuda/ includes it. Every file of the
 * backend is a .cu file compiled by nvcc (C++), so the project's C headers
 * are included with C linkage here.
 *
 * cuDNN: the legacy convolution / batch-norm API used here is deprecated in
 * cuDNN 9 but present and supported for the 9.x series. cudnn.h marks it
 * deprecated only when CUDNN_WARN_DEPRECATED is defined; we make sure it is
 * not (a build that defined it globally would turn every legacy call into an
 * error under --Werror). This is the one place that decision is made; all
 * legacy calls live in cuda_cudnn.cu. Convolutions run through the cuDNN
 * graph (backend) API in cuda_convgraph_*.cu; the legacy conv path remains the
 * fallback where the graph API has no engine. Batch norm is still legacy. */
#ifndef VD_CUDA_INTERNAL_H
#define VD_CUDA_INTERNAL_H

#include <stdint.h>
#include <stdbool.h>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#undef CUDNN_WARN_DEPRECATED
#include <cudnn.h>

extern "C" {
#include "util/util.h"
#include "net/net.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
}

/* ---- status checks -------------------------------------------------------
 * Each records the expression, function, file and line in e (VD_EDEVICE)
 * and returns from the calling function (CUDA_GOTO: sets rc, jumps to label). */
/* The VD_EDEVICE error of a failed CUDA call (cuda_backend.cu). */
int cu_cuda_err(vd_err *e, cudaError_t st, const char *func, const char *file, int line,
                const char *expr);

#define CUDA_CHECK(e, expr)                                                          \
    do {                                                                             \
        cudaError_t st_ = (expr);                                                    \
        if (st_ != cudaSuccess) return cu_cuda_err((e), st_, __func__, __FILE__, __LINE__, #expr); \
    } while (0)

#define CUDA_GOTO(e, rc, label, expr)                                                \
    do {                                                                             \
        cudaError_t st_ = (expr);                                                    \
        if (st_ != cudaSuccess) {                                                    \
            (rc) = cu_cuda_err((e), st_, __func__, __FILE__, __LINE__, #expr);       \
            goto label;                                                              \
        }                                                                            \
    } while (0)

#define CUDNN_CHECK(e, expr)                                                         \
    do {                                                                             \
        cudnnStatus_t st_ = (expr);                                                  \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                           \
            char detail_[256];                                                       \
            cudnnGetLastErrorString(detail_, sizeof detail_);                        \
            return vd_errf((e), VD_EDEVICE, "cuDNN error %s in %s at %s:%d: %s%s%s",  \
                           cudnnGetErrorString(st_), __func__, __FILE__, __LINE__,   \
                           #expr, detail_[0] ? ": " : "", detail_);                  \
        }                                                                            \
    } while (0)

#define CUBLAS_CHECK(e, expr)                                                        \
    do {                                                                             \
        cublasStatus_t st_ = (expr);                                                 \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                            \
            return vd_errf((e), VD_EDEVICE, "cuBLAS error %s in %s at %s:%d: %s",     \
                           cublasGetStatusString(st_), __func__, __FILE__, __LINE__,  \
                           #expr);                                                   \
    } while (0)

/* After every kernel launch. */
#define KERNEL_CHECK(e) CUDA_CHECK(e, cudaGetLastError())

/* The 16-bit elements of math bf16's and math fp16's feature maps. */
typedef __nv_bfloat16 cu_bf16;
typedef __half cu_f16;

/* ---- context ------------------------------------------------------------- */
/* Conv options per layer: "fastest", the workspace ladder (cu_ws_rung),
 * "balanced", "min-ws" (at most 6 distinct), and the split options of
 * cuda_convgraph_tune.cu (2 sets, each "b/k" and maybe a mixed one); the profile
 * keeps VD_PROFILE_MAX_ALGOS of them. */
#define CU_MAX_OPTS 10
static_assert(CU_MAX_OPTS <= VD_PROFILE_MAX_ALGOS, "the profile must keep every conv option");

/* Workspace ladder between "fastest" and "balanced": rung i (0..CU_WS_RUNGS-1)
 * caps every direction's workspace at *cap bytes, labelled *label. */
enum { CU_WS_RUNGS = 3 };
static inline void cu_ws_rung(int i, uint64_t *cap, const char **label) {
    static const uint64_t caps[CU_WS_RUNGS] = {4ull << 30, 1ull << 30, 256ull << 20};
    static const char *const labels[CU_WS_RUNGS] = {"ws<=4G", "ws<=1G", "ws<=256M"};
    *cap = caps[i];
    *label = labels[i];
}

/* Convolution directions of the graph-API path (cuda_convgraph_*.cu). Backward
 * data has two operation graphs: beta 0 (dx overwritten) and beta 1 (dx
 * accumulated, built only where the input has several consumers). */
enum { CU_GD_FWD = 0, CU_GD_BWD_DATA = 1, CU_GD_BWD_FILTER = 2, CU_GD_BWD_DATA_ACC = 3,
       CU_GD_COUNT = 4 };

/* Graph-API state of one conv geometry: operation graphs, finalized
 * execution plans, runtime variants (cuda_convgraph.h). Opaque here. */
typedef struct cu_graph cu_graph;

/* Conv algorithm option k as cuDNN sees it (the vd_algo_opt carries the ids).
 * Legacy path: the algorithm / math fields. Graph path (cu_layer.g set):
 * gplan[d] indexes direction d's candidate plans in the cu_graph, -1 none. */
typedef struct cu_conv_opt {
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
    uint64_t fwd_ws, bwd_data_ws, bwd_filter_ws;   /* bytes at the setup (describe) batch */
    uint64_t cap;                /* workspace cap it was chosen under ("fastest": UINT64_MAX,
                                    "min-ws": 0): orders options of equal workspace */
    int gplan[CU_GD_COUNT];
    int split;                   /* graph path: 1, or k > 1: the directions not in
                                    whole_mask run as k sub-batch convolutions of
                                    desc_batch/k; see cuda_convgraph_tune.cu */
    int sset;                    /* graph path: the split set whose plans gplan indexes
                                    for the split directions (-1: none) */
    unsigned whole_mask;         /* split > 1: bit d set = direction d runs at the whole
                                    batch (gplan[d] indexes the whole-batch plans) */
} cu_conv_opt;

typedef struct cu_layer {
    vd_op op;
    int n_in;
    int in_c[VD_MAX_INPUTS], in_h, in_w;  /* per-sample input shapes (h, w shared) */
    int c, h, w;                          /* per-sample output shape */
    int desc_n;                           /* batch the cuDNN descriptors describe */
    int desc_batch;                       /* conv: the "describe batch" its setup describes and
                                             tunes at: c->batch, or (where a tensor at c->batch
                                             would pass INT32_MAX elements, cuDNN's limit) the
                                             largest of the near-equal sub-batches c->batch
                                             splits into within it; a call of more samples
                                             runs as sub-batches of at most this (cuda_cudnn.cu) */
    int n_opts;
    bool tuned;                           /* conv: option 0 ("fastest") comes from timed trials */
    int key[23];                          /* conv: geometry and fused epilogue (tuning results
                                             are shared by equal keys) */
    cu_graph *g;                          /* conv through the graph API; NULL: legacy API */
    bool g_owner;                         /* this layer frees g (others share an earlier layer's) */
    vd_algo_opt opts[CU_MAX_OPTS];        /* [n_opts]; conv: see cu_conv_opt */
    cu_conv_opt conv_opts[CU_MAX_OPTS];   /* conv only, parallel to opts */
    /* cuDNN descriptors (conv: x, y, w, conv; batchnorm: x(=y), bn params) */
    cudnnDataType_t dt;                   /* feature maps and conv weights as cuDNN sees them:
                                             FLOAT, BFLOAT16 in math bf16, HALF in fp16 */
    bool cl;                              /* the maps are channels-last (NHWC, vd_math_nhwc:
                                             tf32, bf16, fp16; the conv weights' copies KRSC),
                                             else NCHW (fp32) */
    cudnnTensorDescriptor_t xd, yd, pd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    /* ReLU fused into a conv's forward (cu_fuse_setup): the conv's every
     * option adds the bias in its forward (the direct kernel, or a cuDNN
     * graph conv -> bias -> ReLU: cu_conv_fwd_epi), and its output's one
     * consumer is a ReLU in place. The conv applies the ReLU (fwd_relu); the
     * ReLU's forward in place is then a no-op (relu_fused), so the profile
     * times it at nothing and the planner sees its cost gone, in the forward
     * pass and in every recompute, which re-runs the conv too. The direct
     * kernel is bit-identical to the two ops; the cuDNN graph rounds once
     * (conv + bias in fp32) where the two ops round twice in bf16 / fp16.
     * The same for a batch norm on the channels-last kernels and an add
     * (cu_fuse_relu_setup), bit-identical. The batch norm also takes the
     * ReLU's backward (bwd_relu: its backward masks the ReLU's output
     * gradient as it reads it, vd_op_io.relu_mask); the ReLU's backward is
     * then a no-op where it would write its dy tensor (dx == dy: the
     * planner gives the batch norm's gradient the ReLU's dy tensor,
     * tensors.c), bit-identical too. None with --no-fuse. */
    bool fwd_relu;                        /* conv, batchnorm, add: apply the consumer's ReLU */
    bool relu_fused;                      /* relu: its producer applied it */
    bool bwd_relu;                        /* batchnorm: take the consumer's ReLU's backward */
    bool relu_bwd_fused;                  /* relu: its producer takes its backward */
    bool bias_bwd;                        /* relu: its backward takes the bias gradient of the
                                             conv before it, which skips it
                                             (cu_relu_bias_setup, cuk_relu_bwd_bias) */
} cu_layer;

/* A synthetic slot (backend.h's fill_synthetic; cuda_synth.cu). */
typedef struct cu_synth_slot {
    int64_t *host;                        /* pinned [cap]: the host-side copy of the indices */
    int64_t *dev;                         /* device [cap], outside the pool: what kernels read */
    int n, cap;                           /* indices held, room */
    int capture_no;                       /* the capture that last filled it (0: none) */
    cudaEvent_t ev[VD_N_STREAMS];         /* recorded after its last eager fill on each stream
                                             (after the kernel: the device copy is read too) */
} cu_synth_slot;

typedef struct cu_ctx {
    int device;
    int sm_count;
    uint64_t total_mem;
    int cc_major, cc_minor;               /* compute capability */
    char dev_name[256];
    cudaStream_t stream[VD_N_STREAMS];    /* compute, D2H, H2D: non-blocking */
    cudaEvent_t *events;                  /* [n_events], timing enabled */
    int n_events;
    bool sync_debug;                      /* --sync-debug (vd_backend_opts) */
    /* set by layer_setup */
    cudnnHandle_t dnn;                    /* bound to the compute stream */
    cublasHandle_t blas;                  /* bound to the compute stream, no workspace */
    const vd_net *net;
    int batch;
    vd_math math;
    bool deterministic;
    bool tune;                            /* time conv algorithms in layer_setup (cudnnFind*Ex):
                                             not in deterministic mode, not with --conv-tune off */
    bool retime;                          /* --conv-tune retime: re-time cudnnFind's best few per
                                             direction with CUDA events (experimental, legacy path) */
    bool conv_legacy;                     /* --conv-api legacy: never the graph API */
    bool conv_mix;                        /* per conv layer, the API whose fastest option was
                                             timed faster (legacy when its cudnnFind beats the
                                             graph engines by 8%); off with --conv-api graph,
                                             legacy, untimed setups and --conv-split force */
    int conv_debug;                       /* --conv-debug: 1 path per conv layer on stderr,
                                             2 also every candidate engine */
    int conv_topk;                        /* --conv-topk: heuristic engines per direction (8) */
    bool conv_rtc;                        /* --conv-rtc: also runtime-compiled engines */
    int conv_split;                       /* split options (cuda_convgraph_tune.cu): 1 where
                                             the fastest needs over 1 GiB; --conv-split off:
                                             never; force: b/2 and b/4 on every conv layer
                                             (tests) */
    /* The most workspace a graph-API conv call used since the profiler
     * cleared it (cu_graph_conv_run: the plan's need, or all it was given
     * where the legacy API ran it), which a chunk's timing records
     * (cuda_profile.cu, time_chunks). */
    uint64_t conv_ws_used;
    bool conv_gemm_force;                 /* backend opts: the "gemm w" option (tests) */
    bool conv_direct_force;               /* backend opts: the "direct" option (tests) */
    bool no_fuse;                         /* backend opts (--no-fuse): no conv epilogue
                                             fusion (cu_conv_fwd_epi, cu_fuse_setup) */
    bool conv_fuse_force;                 /* backend opts: fuse wherever cuDNN can (tests) */
    void *scratch;                        /* layer_setup only: timing buffers (cudaMalloc) */
    uint64_t scratch_bytes;
    cudaEvent_t tev[2];                   /* layer_setup only: timing events */
    int n_layers;
    cu_layer *layers;                     /* [n_layers] */
    /* loss scaling (math fp16): the backend's vd_loss_scale in device memory,
     * made at its first use (cu_scale_state), freed at destroy; like cuDNN's
     * and cuBLAS's handles it lives outside the pool (32 bytes) */
    vd_loss_scale *scale_st;
    /* the step scalars (backend.h's step_set): steps_dev is what kernels
     * read (device memory outside the pool, made at creation), steps_host
     * its pinned host-side copy, steps_ev recorded after the last transfer
     * of it (the host waits for it before writing steps_host again) */
    vd_step_scalars *steps_dev, *steps_host;
    cudaEvent_t steps_ev;
    cu_synth_slot synth[VD_SYNTH_SLOTS];  /* backend.h's fill_synthetic (cuda_synth.cu) */
    /* captures (capture_begin .. capture_end): the fork and join events,
     * the event recorded after each graph launch, and per plan event
     * (events[]) whether it was last recorded inside a capture and in
     * which (capture numbers from 1; EV_MARKED: a timing mark, event_mark) */
    bool capturing;
    int capture_no;
    cudaEvent_t fork_ev, join_ev[VD_N_STREAMS], graph_ev;
    bool graph_launched;
    int n_graphs;                         /* graphs captured and not destroyed (a synthetic
                                             slot grows only at 0) */
    int *ev_capture;                      /* [n_events]: 0 recorded eagerly (or never) */
#define EV_MARKED (-1)
} cu_ctx;

/* The update ranges of ranges_create: the table in device memory. */
typedef struct cu_ranges {
    vd_update_range *dev;                 /* [n] */
    int n;
    int64_t max_count;                    /* sizes the update's grid */
} cu_ranges;

/* c->scale_st, made (and set to vd_loss_scale_init) on the first call. */
int cu_scale_state(cu_ctx *c, vd_loss_scale **st, vd_err *e);

static inline cudaStream_t cu_compute(const cu_ctx *c) { return c->stream[VD_STREAM_COMPUTE]; }

/* The cuDNN type of math m's feature maps (and the conv weights' copies). */
static inline cudnnDataType_t cu_dnn_dtype(vd_math m) {
    vd_dtype t = vd_math_act_dtype(m);
    return t == VD_DT_BF16 ? CUDNN_DATA_BFLOAT16 : t == VD_DT_F16 ? CUDNN_DATA_HALF
                                                                  : CUDNN_DATA_FLOAT;
}

/* Elements of layer li's weight (role VD_ROLE_WEIGHT), 0 if it has none. */
static inline int64_t cu_weight_numel(const vd_net *net, int li) {
    const vd_layer *l = &net->layers[li];
    for (int k = 0; k < l->n_params; k++)
        if (net->params[l->param_first + k].role == VD_ROLE_WEIGHT)
            return net->params[l->param_first + k].numel;
    return 0;
}

/* Bytes (256-aligned) of the copy of layer li's weight that each pass makes
 * at the start of its workspace, in the maps' element type: channels-last
 * convs (math tf32, bf16, fp16) take a KRSC copy (conv backward also keeps
 * a dW of that type and layout there, behind it; tf32's floats are moved
 * unchanged, bf16 / fp16 rounded), 16-bit fc layers a 16-bit copy; 0
 * otherwise (fp32, tf32 fc: the GEMM reads the fp32 master weight).
 * cu_layer_setup adds them to the layer's options, so the planner counts them. */
static inline uint64_t cu_wcopy_bytes(const cu_ctx *c, const vd_net *net, int li) {
    vd_op op = net->layers[li].op;
    if (!vd_math_nhwc(c->math) || (op != VD_OP_CONV && op != VD_OP_FC)) return 0;
    if (op == VD_OP_FC && vd_math_act_dtype(c->math) == VD_DT_F32) return 0;
    return VD_ALIGN_UP((uint64_t)cu_weight_numel(net, li) * vd_math_act_bytes(c->math),
                       (uint64_t)256);
}

/* Channels-last maps (math tf32, bf16, fp16), an fc layer whose input has
 * H*W > 1: bytes of the input in NCHW order at batch n (the order of torch's
 * flattening that the weight's columns follow), behind the weight copy; 0
 * otherwise. */
static inline uint64_t cu_fc_xt_bytes(const cu_ctx *c, const vd_net *net, int li, int n) {
    const vd_layer *l = &net->layers[li];
    if (!vd_math_nhwc(c->math) || l->op != VD_OP_FC) return 0;
    int src = l->in[0];
    int64_t hw = src < 0 ? (int64_t)net->in_h * net->in_w
                         : (int64_t)net->layers[src].h * net->layers[src].w;
    if (hw <= 1) return 0;
    return VD_ALIGN_UP((uint64_t)n * (uint64_t)vd_net_out_numel(net, src) *
                       vd_math_act_bytes(c->math), (uint64_t)256);
}

/* ---- cuda_cudnn.cu: everything that touches the legacy cuDNN API ---------- */
/* Setup of a conv layer (cu_ops' setup): its descriptors and options, through
 * the graph API (cuda_convgraph_*.cu) unless it has no engine for the layer or
 * --conv-api legacy; then the legacy API. */
int cu_conv_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e);
/* Setup of a batch-norm layer (cu_ops' setup): its descriptors; VD_EUNSUPPORTED
 * for an eps below cuDNN's minimum. */
int cu_bn_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e);
/* Free any layer's descriptors and graph-API state. */
void cu_dnn_layer_free(cu_layer *L);
int cu_conv_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
int cu_conv_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
int cu_bn_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
/* Backward: where io has no dx (the input needs no gradient) or no dw, db
 * (frozen), they are written into the front of io->ws, which the option's
 * ws_bwd holds (cu_bn_spare_bytes). */
int cu_bn_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
/* The bytes at the front of batch norm's backward workspace (at batch n,
 * feature maps of type act) that take what cuDNN's backward writes and the
 * executor wants none of: dx of an input that needs no gradient, the
 * gradients of frozen parameters. */
uint64_t cu_bn_spare_bytes(const vd_net *net, int li, int n, vd_dtype act);

/* Order L's conv options: option 0 ("fastest") stays first, the others by
 * decreasing workspace, equal workspace by decreasing cap (cu_conv_opt.cap). */
void cu_conv_opts_order(cu_layer *L);

/* Last resort of the graph path: one direction (CU_GD_*; beta for backward
 * data's dx and backward filter's dw) through the legacy API with the first heuristic algorithm that fits
 * io->ws_bytes and the math / determinism mode. io->n at most the layer's
 * desc_batch (VD_EINTERNAL otherwise: cu_conv_* run larger calls as sub-batches). */
int cu_legacy_conv_dir(cu_ctx *c, const vd_net *net, int li, int dir, const vd_op_io *io,
                       float beta, vd_err *e);

/* ---- cuda_convgraph_*.cu: convolution through the cuDNN graph (backend) API */
/* Build layer li's conv options on the graph API (timed per direction when
 * c->tune). On success with *no_engine false: L->g, L->opts, L->conv_opts,
 * L->n_opts, L->tuned are set. *no_engine true (returns 0): the graph API
 * offers no usable engine for some direction; why says which; L is left for
 * the legacy path. Other failures return VD_EDEVICE / VD_ENOMEM. */
int cu_graph_conv_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, uint64_t bias_ws,
                        bool *no_engine, char *why, size_t why_n, vd_err *e);
/* Run one direction (CU_GD_FWD, CU_GD_BWD_DATA with beta 0 or 1,
 * CU_GD_BWD_FILTER with beta 0 or 1: dw overwritten or added to) of option
 * io->algo. Falls back to a runtime-built plan when the batch, beta, pointer
 * alignment or workspace differ from setup's, and to cu_legacy_conv_dir when
 * no graph engine fits the workspace. io->n at most the layer's desc_batch
 * (VD_EINTERNAL otherwise: cu_conv_* run larger calls as sub-batches). */
int cu_graph_conv_run(cu_ctx *c, const vd_net *net, int li, int dir, const vd_op_io *io,
                      float beta, vd_err *e);
/* Does option algo of conv layer li run its forward with the direct kernel
 * or a fused cuDNN graph, which add the bias themselves (cu_graph_conv_run's
 * CU_GD_FWD then gives y = conv + bias, rectified where the graph or
 * cu_layer.fwd_relu says)? */
bool cu_graph_fwd_fuses_bias(const cu_ctx *c, int li, int algo);
/* The epilogue conv layer li's graph-API setup tries to fuse into its
 * forward (cuda_convgraph.h, CG_EPI_*): none with c->no_fuse or without a
 * bias; the bias and ReLU
 * where the conv's output's one consumer is a ReLU in place
 * (vd_schedule_inplace_flags), else the bias. Part of the layer's key. */
int cu_conv_fwd_epi(const cu_ctx *c, const vd_net *net, int li);
/* The epilogue (CG_EPI_*) conv layer L's graph-API forward fuses after its
 * setup: 0 on the legacy path and where the fused graph was not chosen. */
int cu_graph_fwd_epi(const cu_layer *L);
/* Set fwd_relu / relu_fused (see cu_layer) for net's layers, after their
 * setup; with c->conv_debug, each fusion on stderr. */
void cu_fuse_setup(cu_ctx *c, const vd_net *net);
/* The same for a ReLU in place after a batch norm that runs the
 * channels-last kernels (math tf32, bf16, fp16; fp32 runs cuDNN's) or
 * after an add (cuda_ops.cu). */
void cu_fuse_relu_setup(cu_ctx *c, const vd_net *net);
/* Byte alignment (1..16) the weight of conv layer li has when the flat
 * parameter array starts 16-byte aligned (from its parameter offset). */
int64_t cu_conv_weight_align(const vd_net *net, int li);
/* The same for layer li's parameter of role role (4 if it has none). */
int64_t cu_conv_param_align(const vd_net *net, int li, vd_param_role role);
/* True if the input of conv layer li feeds other layers too, so its dx may
 * be accumulated (dx_beta 1). */
bool cu_conv_input_shared(const vd_net *net, int li);
/* Free L->g when L owns it; clears L->g. */
void cu_graph_layer_free(cu_layer *L);
/* Graph path, timed setup: the measured milliseconds of option 0 ("fastest")
 * summed over forward, backward-data and backward-filter, less the separate
 * bias (+ ReLU) passes a fused forward saves (the legacy path pays them);
 * < 0 if a direction was not timed. */
float cu_graph_conv_fastest_ms(const cu_layer *L);
/* Free the timing scratch memory and events of layer_setup. */
void cu_tune_release(cu_ctx *c);
/* ReLU li's setup: L->bias_bwd where it runs in place right after a conv
 * with a trained bias (vd_op_bias_taker; the plan pairs them,
 * vd_plan_layer.db_unit) and not no_fuse; timed (c->tune): only where its
 * backward with the bias gradient (cuk_relu_bwd_bias) was faster than the
 * ReLU's and the bias gradient's separate passes (the same bits either
 * way); untimed (or no scratch memory): wherever it may. */
int cu_relu_bias_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e);

/* ---- cuda_ops.cu: the other ops (kernels, cuBLAS) -------------------------- */
/* Through the per-op dispatch array; cu_op_supported answers supports_op. */
bool cu_op_supported(vd_op op, vd_math math);
/* layer_setup's per-op step for layer li, after L's shapes and dt are set:
 * the op's state of its own (cuDNN descriptors, conv options); nothing for
 * ops without any. */
int cu_op_setup(cu_ctx *c, const vd_net *net, int li, cu_layer *L, vd_err *e);
/* The workspace of the one "default" option of layer li (an op without
 * algorithm options) at batch n in c->math: sets o's ws_fwd, ws_bwd and
 * workspace where the op needs some, leaves o alone otherwise. */
void cu_op_default_ws(const cu_ctx *c, const vd_net *net, int li, int n, vd_algo_opt *o);
int cu_op_forward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
int cu_op_backward(cu_ctx *c, const vd_net *net, int li, const vd_op_io *io, vd_err *e);
/* Bias-gradient reduction over (n, h*w) per channel: number of partial sums
 * per channel it would use, and the workspace bytes those need. */
int cu_chan_split(int64_t n, int64_t ch, int64_t hw, int sm_count, bool nhwc);
/* The split a conv's bias gradient over n samples of dy (channels-last
 * where cl) takes with ws_bytes of workspace for its partial sums:
 * cu_chan_split, or 1 where those do not fit. The conv's backward and the
 * ReLU's that takes it (cuk_relu_bwd_bias) both ask here: the same split,
 * the same sums. */
int cu_bias_grad_split(int64_t n, int64_t ch, int64_t hw, int sm_count, bool cl,
                       uint64_t ws_bytes);

/* ---- cuda_k_*.cu: launchers (compute stream unless a stream is given) ----
 * dt: the element type of the feature-map pointers (x, y, dy, dx; vd_op_io.act):
 * VD_DT_BF16 / VD_DT_F16 hold 16-bit elements (math bf16 / fp16); weights,
 * biases, gradients of parameters and the loss stay float. cl: the maps'
 * layout where the kernel's indexing depends on it (cu_layer.cl: true for
 * channels-last, always so in 16 bits; pooling: cu_pool_geom.cl). */
typedef struct cu_pool_geom {
    int n, c, h, w, oh, ow;           /* input [n,c,h,w], output [n,c,oh,ow] */
    int kh, kw, sh, sw, ph, pw;       /* window pooling */
    bool adaptive;                    /* windows start=floor(i*in/out), end=ceil((i+1)*in/out) */
    bool max;                         /* max (first max wins, NaN propagates) or average */
    bool cl;                          /* maps channels-last (cu_layer.cl), else NCHW */
} cu_pool_geom;

/* Direct convolution forward, fp32 NCHW, groups 1, for layers with few
 * inputs per output (cuk_conv_direct_ok): y = conv(x, w) + b (b may be
 * NULL), then relu: y = max(y, 0) as cuk_relu_fwd (NaN kept). One thread per output pixel; the output channels CU_DIRECT_KB at a
 * time in registers; the weights in shared memory. */
typedef struct cu_direct_geom {
    int n, c, h, w, k, oh, ow;        /* input [n,c,h,w], weight [k,c,r,s], output [n,k,oh,ow] */
    int r, s, sh, sw, ph, pw, dh, dw; /* window, stride, padding, dilation */
} cu_direct_geom;
enum { CU_DIRECT_KB = 32, CU_DIRECT_MAX_P = 160, CU_DIRECT_MAX_C = 4 };
bool cuk_conv_direct_ok(const cu_direct_geom *g);
int cuk_conv_direct_fwd(cudaStream_t s, int sm, const cu_direct_geom *g, const float *x,
                        const float *w, const float *b, float *y, bool relu, vd_err *e);
/* p[i] uniform in [lo, hi) (|lo|, |hi| <= 1 where dt is 16-bit). dt 16-bit:
 * each float's low half is a copy of its high half, so that the buffer read
 * as 16-bit elements (of either type) holds values of magnitude below 2 and
 * no inf or NaN, while read as floats it still holds ~[lo, hi) (timing
 * buffers that hold both kinds). */
int cuk_fill_uniform(cudaStream_t s, int sm, float *p, int64_t n, uint64_t seed, float lo,
                     float hi, vd_dtype dt, vd_err *e);
int cuk_fill_labels(cudaStream_t s, int sm, int32_t *p, int64_t n, int classes, vd_err *e);
int cuk_bias_add(cudaStream_t s, int sm, float *y, const float *b, int64_t n, int64_t ch,
                 int64_t hw, vd_dtype dt, bool cl, vd_err *e);
/* db[c] = sum over n, hw of dy[n, c, hw]; split partial sums per channel in
 * partial[c*split + k] (split == 1: straight into db, partial unused).
 * beta != 0: the sum is added to db (a chunk's dw_beta). */
int cuk_chan_sum(cudaStream_t s, const float *dy, int64_t n, int64_t ch, int64_t hw, int split,
                 float *partial, float beta, float *db, vd_dtype dt, bool cl, vd_err *e);
/* The last pass of such sums: db[c] = (beta != 0 ? db[c] + : ) the sum of
 * part[c * split ..][0 .. split), one warp a channel, in a fixed order
 * (cuda_k_norm.cu; k_pool_tile8's bias gradient ends with it too). */
__global__ void k_chan_final_w(const float *part, int64_t ch, int split, float beta, float *db);
int cuk_bn_eval_aux(cudaStream_t s, const float *rm, const float *rv, float *aux, int ch,
                    float eps, vd_err *e);
/* Batch norm on channels-last maps (math tf32, bf16, fp16):
 * pix = n*h*w pixels of ch channels; the partial sums need cu_bn_ws_bytes of workspace (training
 * forward and backward). Semantics as the CPU reference: aux = [mean,
 * invstd]; backward overwrites dw, db and puts dx with dx_beta. Forward
 * modes: training (statistics into aux, running statistics updated), eval
 * (aux from the running statistics), apply (a recompute: aux holds the
 * training forward's statistics; y as that forward wrote it). relu: y =
 * max(y, 0) (a ReLU fused into the batch norm, cu_layer.fwd_relu). */
typedef enum cu_bn_mode { CU_BN_TRAIN, CU_BN_EVAL, CU_BN_APPLY } cu_bn_mode;
int cu_bn_split(int64_t pix, int64_t ch, int sm_count);
uint64_t cu_bn_ws_bytes(int64_t pix, int64_t ch, int sm_count);
/* y NULL: the statistics alone (CU_BN_TRAIN, CU_BN_EVAL; the batch norm
 * folded into its add, vd_op_io.bn_stats). */
int cuk_bn_fwd_nhwc(cudaStream_t s, int sm, const float *x, float *y, const float *gamma,
                    const float *beta, float *aux, float *rm, float *rv, int64_t pix, int64_t ch,
                    cu_bn_mode mode, float eps, float momentum, void *ws, uint64_t ws_bytes,
                    bool relu, vd_dtype dt, vd_err *e);
/* The batch norm + add fusion (vd_op_io.bn_aux), channels-last: y = the sum
 * of x[0..kin) (relu: then max(y, 0)) with input bk replaced by the batch
 * norm of it (statistics aux, gamma, beta) rounded to dt, as the batch
 * norm's forward stores it: the bits of cuk_bn_fwd_nhwc then cuk_add. */
int cuk_bn_add_nhwc(cudaStream_t s, int sm, const float *const *x, int kin, int bk, float *y,
                    const float *aux, const float *gamma, const float *beta, int64_t pix,
                    int64_t ch, bool relu, vd_dtype dt, vd_err *e);
/* relu: dy is the output gradient of the ReLU in place after the batch norm
 * (cu_layer.bwd_relu), taken through the ReLU's backward as it is read: 0
 * where the y the forward stored, recomputed from x, aux, gamma and beta
 * (the batch norm's shift), is <= 0. ry non-NULL (not with relu): dy is
 * the output gradient of the ReLU after the add that the batch norm feeds
 * (vd_op_io.relu_y), ry that ReLU's output; dy is rewritten in place as
 * cuk_relu_bwd would (0 where ry <= 0; the same bits), in the reduction
 * pass where ch % 8 == 0 and x, dy, ry are 16-byte aligned, else by
 * cuk_relu_bwd first, and the backward then reads that. */
int cuk_bn_bwd_nhwc(cudaStream_t s, int sm, const float *x, const float *dy, float *dx,
                    float dx_beta, const float *gamma, const float *beta, const float *aux,
                    float *dw, float *db, int64_t pix, int64_t ch, void *ws, uint64_t ws_bytes,
                    bool relu, const float *ry, vd_dtype dt, vd_err *e);
int cuk_relu_fwd(cudaStream_t s, int sm, const float *x, float *y, int64_t n, vd_dtype dt, vd_err *e);
int cuk_relu_bwd(cudaStream_t s, int sm, const float *y, const float *dy, float *dx, float beta,
                 int64_t n, vd_dtype dt, vd_err *e);
/* A ReLU's backward with its conv's bias gradient (vd_op_io.bias_db), one
 * pass where the shapes allow: dx = (y <= 0 ? 0 : dy) (beta 0), as
 * cuk_relu_bwd, over a conv output of n samples, ch channels, hw pixels;
 * db = cuk_chan_sum of that dx with split (cu_bias_grad_split) and beta 0,
 * bit for bit: each element is added where and in the order that kernel
 * reads it. */
int cuk_relu_bwd_bias(cudaStream_t s, int sm, const float *y, const float *dy, float *dx,
                      int64_t n, int64_t ch, int64_t hw, int split, float *partial, float *db,
                      vd_dtype dt, bool cl, vd_err *e);
int cuk_gelu_fwd(cudaStream_t s, int sm, const float *x, float *y, int64_t n, vd_dtype dt, vd_err *e);
int cuk_gelu_bwd(cudaStream_t s, int sm, const float *x, const float *dy, float *dx, float beta,
                 int64_t n, vd_dtype dt, vd_err *e);
/* ch, hw: the tensor's channels and pixels (bf: channels-last; the mask is
 * drawn by NCHW index, as on the CPU); base: the batch's NCHW index of the
 * first element (a chunk: n0 * ch * hw). */
int cuk_dropout(cudaStream_t s, int sm, const float *x, float *y, float beta, int64_t n, float p,
                float scale, uint64_t seed, uint64_t layer, uint64_t iter,
                const vd_step_scalars *S, int64_t ch, int64_t hw, int64_t base, vd_dtype dt,
                bool cl, vd_err *e);
/* dst[i] = sum_{j < n} src[j * m + i] (fixed order); beta != 0 adds it to dst */
int cuk_sum_batch(cudaStream_t s, int sm, const float *src, int64_t n, int64_t m, float beta,
                  float *dst, vd_err *e);
int cuk_axpby_copy(cudaStream_t s, int sm, const float *src, float *dst, float beta, int64_t n,
                   vd_dtype dt, vd_err *e);
/* y = x[0] + ... + x[k-1]; relu: then max(y, 0) (cu_layer.fwd_relu). */
int cuk_add(cudaStream_t s, int sm, const float *const *x, int k, float *y, int64_t n, bool relu,
            vd_dtype dt, vd_err *e);
int cuk_concat(cudaStream_t s, int sm, const float *x, float *y, int64_t n, int64_t ck,
               int64_t ctot, int64_t off, int64_t hw, bool backward, float beta, vd_dtype dt,
               bool cl, vd_err *e);
int cuk_pool_fwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x, float *y,
                 vd_dtype dt, vd_err *e);
/* dx (beta 0: =, else +=) of pooling g: picks k_pool_tile8 (channels-last
 * windows that tile the input), k_pool_bwd8, k_pool_tile_nchw (NCHW windows
 * that tile the input), k_pool_bwd_disjoint (windows that do not overlap),
 * k_pool_bwd_tiled (other non-adaptive max pooling,
 * where it can take the geometry) or the general k_pool_bwd. */
int cuk_pool_bwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x, const float *dy,
                 float *dx, float beta, void *ws, uint64_t ws_bytes, vd_dtype dt, vd_err *e);
/* Max pooling whose windows tile the input (kernel == stride, no padding,
 * oh * kh == h, ow * kw == w), NCHW (fp32): k_pool_tile_nchw's geometry. */
bool cu_pool_tile_nchw_ok(const cu_pool_geom *g);
/* dx (beta 0: =, else +=) of such a pooling g in one pass, bitwise
 * cuk_pool_bwd's other paths; relu (beta 0): masked as the backward of the
 * in-place ReLU whose output x is (x <= 0: 0), bitwise cuk_relu_bwd in
 * place after it; else VD_EINTERNAL. */
int cuk_pool_tile_nchw_bwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                           const float *dy, float *dx, float beta, bool relu, vd_err *e);
/* Max pooling whose windows tile the input (kernel == stride, no padding,
 * oh * kh == h, ow * kw == w), channels-last, channels % 8: k_pool_tile8's
 * geometry (cuk_pool_bwd takes it for such pools; cuda_k_pool.cu). */
bool cu_pool_tile_ok(const cu_pool_geom *g);
/* Workspace bytes of cuk_pool_tile_bwd's bias gradient (its partial sums);
 * 0 where it cannot reduce one (not cu_pool_tile_ok, or c / 8 channel
 * groups that do not divide a block). */
uint64_t cu_pool_tile_bias_ws_bytes(const cu_pool_geom *g, int sm);
/* dx (beta 0: =, else +=) of max pooling g (cu_pool_tile_ok; x, dy, dx
 * 16-byte aligned) in one pass, bitwise cuk_pool_bwd's; relu: masked as the
 * backward of the in-place ReLU whose output x is (x <= 0: 0); db (relu,
 * beta 0, ws of cu_pool_tile_bias_ws_bytes): also db[c] = the sum of the
 * written dx over channel c (overwritten); else VD_EINTERNAL. */
int cuk_pool_tile_bwd(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                      const float *dy, float *dx, float beta, bool relu, float *db, void *ws,
                      uint64_t ws_bytes, vd_dtype dt, vd_err *e);
/* dx (beta 0) of channels-last max pooling g through the argmax pass and
 * k_pool_bwd8, masked as the backward of the in-place ReLU whose output x is
 * (0 where x <= 0): bitwise cuk_pool_bwd then cuk_relu_bwd in place, where
 * that path takes g (channels % 8, aligned, ws of cu_pool_bwd_ws_bytes:
 * AlexNet's overlapping 3x3/2); *taken false and nothing launched where not. */
int cuk_pool_bwd_relu8(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                       const float *dy, float *dx, void *ws, uint64_t ws_bytes, vd_dtype dt,
                       bool *taken, vd_err *e);
/* Channels-last max pooling: backward workspace bytes of the argmax pass (one
 * byte per output element; 0 where that path does not apply). */
uint64_t cu_pool_bwd_ws_bytes(const cu_pool_geom *g);
/* The kernels behind it, on their own (tests compare them bit for bit):
 * _general: k_pool_bwd, any geometry. _tiled: k_pool_bwd_tiled, non-adaptive
 * max pooling only; each window's argmax computed once per tile, dx bitwise
 * equal to k_pool_bwd's. tile: NULL, or {rows, columns, planes} of a tile,
 * 0 for automatic. VD_EUNSUPPORTED where it cannot take the geometry or the
 * tile (see pool_tiling_plan in cuda_k_pool_tiled.cu). */
int cuk_pool_bwd_general(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                         const float *dy, float *dx, float beta, vd_dtype dt, vd_err *e);
int cuk_pool_bwd_tiled(cudaStream_t s, int sm, const cu_pool_geom *g, const float *x,
                       const float *dy, float *dx, float beta, const int *tile, vd_dtype dt, vd_err *e);
/* Test hook, C linkage (tests/cuda/test_cuda_ops.c declares it again: this
 * header is C++ only): max-pool backward of the non-adaptive geometry geom =
 * {n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw} on host arrays x, dy and dx
 * (read when beta != 0, then overwritten with the result), through path 0
 * cuk_pool_bwd, 1 cuk_pool_bwd_general, 2 cuk_pool_bwd_tiled (tile as
 * there). Own device memory (cudaMalloc) on the current device, default
 * stream, synchronous. */
extern "C" int vd_cuda_pool_bwd_test(const int geom[12], const float *x, const float *dy,
                                     float *dx, float beta, int path, const int tile[3],
                                     vd_err *e);
int cuk_lrn_fwd(cudaStream_t s, int sm, const float *x, float *y, int n, int ch, int64_t hw,
                int size, float alpha, float beta, float k, vd_dtype dt, bool cl, vd_err *e);
int cuk_lrn_bwd(cudaStream_t s, int sm, const float *x, const float *dy, float *dx, float dx_beta,
                int n, int ch, int64_t hw, int size, float alpha, float beta, float k, vd_dtype dt,
                bool cl, vd_err *e);
/* Samples n0 .. n0 + n - 1 of a batch (a chunk: backend.h) whose first
 * `counted` count (vd_op_io_loss_n): y = their softmax; loss[0] = the
 * summed loss of the counted ones among them / counted, loss[1] = their
 * top-1 hits, added to loss[0] and loss[1] when acc (a chunk after the
 * first). */
int cuk_xent_fwd(cudaStream_t s, const float *x, const int32_t *labels, float *y, float *loss,
                 int n, int classes, int n0, int counted, bool acc, vd_dtype dt, vd_err *e);
/* dx of n samples of a batch of n_batch. scale: NULL, or (math fp16, loss
 * scaling) the device float dx is multiplied by. */
int cuk_xent_bwd(cudaStream_t s, int sm, const float *y, const int32_t *labels, float *dx,
                 float beta, int n, int n_batch, int classes, const float *scale, vd_dtype dt,
                 vd_err *e);
/* db[j] = sum over rows of dy[:, j]; beta != 0 adds it to db */
int cuk_col_sum(cudaStream_t s, const float *dy, int64_t n, int64_t cols, float beta, float *db,
                vd_dtype dt, vd_err *e);
/* backend.h's update of p, m, v from g (v NULL for SGD) over the nr ranges
 * R (device memory; total: the largest range's count, which sizes the
 * grid) at the step scalars S (device memory); st NULL, or (update_scaled)
 * the loss scale's state in device memory: nothing done when
 * st->found_inf, else the update of g / st->scale. One launch. */
int cuk_update(cudaStream_t s, int sm, const vd_optim_step *o, float *p, const float *g,
               float *m, float *v, const vd_update_range *R, int nr, int64_t total,
               const vd_step_scalars *S, const vd_loss_scale *st, vd_err *e);
/* st->found_inf = 1 when g[0, n) holds an inf or NaN; first_bad = layer when
 * that raised it this step (backend.h's grad_check). */
int cuk_grad_check(cudaStream_t s, int sm, const float *g, int64_t n, int layer,
                   vd_loss_scale *st, vd_err *e);
/* backend.h's scale_update on st (one thread). */
int cuk_scale_update(cudaStream_t s, vd_loss_scale *st, vd_err *e);
int cuk_empty(cudaStream_t s, vd_err *e);
/* A one-thread kernel that runs for ns nanoseconds of the device's clock:
 * holds a stream back while the host queues the work to be timed behind it. */
int cuk_spin(cudaStream_t s, uint64_t ns, vd_err *e);
/* Math bf16 / fp16: dst[i] = dt(src[i]) (round to nearest even), and back
 * (exact); dt VD_DT_BF16 or VD_DT_F16. */
int cuk_f32_to_16(cudaStream_t s, int sm, const float *src, void *dst, int64_t n, vd_dtype dt,
                  vd_err *e);
int cuk_16_to_f32(cudaStream_t s, int sm, const void *src, float *dst, int64_t n, vd_dtype dt,
                  vd_err *e);
/* n images of c x hw from NCHW to NHWC (to_nhwc) or back, src / dst of
 * element types src_dt / dst_dt (float to float: moved unchanged); beta 0
 * overwrites dst, else adds to it. */
int cuk_relayout(cudaStream_t s, int sm, const void *src, vd_dtype src_dt, void *dst,
                 vd_dtype dst_dt, int64_t n, int64_t c, int64_t hw, bool to_nhwc, float beta,
                 vd_err *e);
/* be->fill_synthetic and be->synth_set (cuda_synth.cu). */
int cu_fill_synthetic(vd_backend *be, int stream, int slot, void *x, vd_dtype dt,
                      const vd_synth_batch *b, vd_err *e);
int cu_synth_set(vd_backend *be, int slot, const vd_synth_batch *b, vd_err *e);
/* The synthetic slots' events (at creation); the host waits until every
 * slot's eager fills have run (capture_begin: the capture's fills rewrite
 * the host-side copies); everything the slots hold freed (destroy). */
int cu_synth_create(cu_ctx *c, vd_err *e);
int cu_synth_idle(cu_ctx *c, vd_err *e);
void cu_synth_free(cu_ctx *c);

#endif
