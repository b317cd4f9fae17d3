/* net.h — the network description: op table, layers, tensors, parameters.
 *
 * A net is a list of layers in topological order (the spec's order). Each
 * layer has exactly one output feature map (NCHW, fp32). The net's input
 * (images) is "layer -1". Parameters of all layers live in one flat array of
 * floats (llm.c style); each vd_param records its offset into it. Gradients
 * and momentum use the same layout, so SGD is one loop and a checkpoint is
 * one walk over net->params.
 *
 * Adding a layer type touches: the vd_op enum and vd_op_table (net.c), the
 * spec keys (spec.c), the CPU op (backend/cpu), the CUDA op (backend/cuda)
 * and a test. Nothing else. */
#ifndef VD_NET_H
#define VD_NET_H

#include <stdint.h>
#include <stdbool.h>
#include "util/util.h"

typedef enum vd_op {
    VD_OP_CONV,
    VD_OP_POOL,
    VD_OP_RELU,
    VD_OP_LRN,
    VD_OP_BATCHNORM,
    VD_OP_FC,
    VD_OP_DROPOUT,
    VD_OP_FLATTEN,
    VD_OP_ADD,
    VD_OP_CONCAT,
    VD_OP_SOFTMAX_XENT,
    VD_OP_COUNT
} vd_op;

/* Static facts about an op: the single source of truth used by the parser,
 * the scheduler (what backward reads) and the backends. */
typedef struct vd_op_info {
    const char *name;        /* spec "type:" value, e.g. "conv" */
    int min_inputs, max_inputs;
    bool bwd_needs_x;        /* backward reads the layer's input(s) */
    bool bwd_needs_y;        /* backward reads the layer's output */
    bool can_inplace;        /* output may overwrite its (single) input */
    bool has_params;
} vd_op_info;
extern const vd_op_info vd_op_table[VD_OP_COUNT];

typedef enum { VD_POOL_MAX, VD_POOL_AVG } vd_pool_mode;

#define VD_MAX_INPUTS 8
#define VD_NAME_MAX 96

typedef struct vd_layer {
    char name[VD_NAME_MAX];
    vd_op op;
    int line, col;              /* where the spec defined it (1-based) */
    int n_in;
    int in[VD_MAX_INPUTS];      /* producing layer index, -1 = net input */
    int c, h, w;                /* output shape per sample (fc/loss: h=w=1) */
    union {
        struct { int out, kh, kw, sh, sw, ph, pw, dh, dw, groups; bool bias; } conv;
        struct { vd_pool_mode mode; int kh, kw, sh, sw, ph, pw;
                 bool global;    /* global average: output 1x1 */
                 int out_h, out_w; /* adaptive average: fixed output size (0 = off) */
                 bool ceil_mode; } pool;
        struct { int size; float alpha, beta, k; } lrn;
        struct { float eps, momentum; } bn;  /* momentum as in PyTorch (0.1) */
        struct { int out; bool bias; } fc;
        struct { float p; } dropout;
    } u;
    int param_first, n_params;  /* range in net->params */
    bool inplace;               /* set by the scheduler: output aliases input 0 */
} vd_layer;

typedef enum { VD_PARAM_WEIGHT, VD_PARAM_BUFFER } vd_param_kind;

typedef struct vd_param {
    char name[VD_NAME_MAX + 16]; /* "<layer>.weight", ".bias", ".running_mean", ... */
    vd_param_kind kind;         /* WEIGHT: trained by SGD; BUFFER: running stats */
    int layer;
    int ndim;
    int64_t shape[4];           /* PyTorch order: conv [out, in/g, kh, kw]; fc [out, in] */
    int64_t numel;
    int64_t offset;             /* in floats, into the flat parameter array */
} vd_param;

typedef struct vd_lr_policy {
    enum { VD_LR_FIXED, VD_LR_STEP, VD_LR_MULTISTEP, VD_LR_POLY, VD_LR_COSINE } type;
    int64_t step;               /* step: every `step` iterations */
    float gamma;                /* step / multistep factor */
    int n_milestones; int64_t milestones[16];
    float power;                /* poly */
    float min_lr;               /* cosine floor */
    int64_t warmup;             /* linear warm-up iterations (0 = none) */
} vd_lr_policy;

typedef struct vd_train_cfg {
    int batch;
    float lr, momentum, weight_decay;
    vd_lr_policy lr_policy;
    int64_t iters;              /* 0 = derive from epochs */
    int64_t epochs;             /* used when iters == 0 and data has a size */
    uint64_t seed;
} vd_train_cfg;

typedef struct vd_net {
    char name[VD_NAME_MAX];
    char path[512];             /* spec file, for messages */
    int in_c, in_h, in_w;       /* input image shape */
    int classes;
    vd_train_cfg train;
    int n_layers;
    vd_layer *layers;           /* [n_layers] */
    int n_params;
    vd_param *params;           /* [n_params] */
    int64_t param_floats;       /* total floats in the flat array (weights + buffers) */
    int64_t n_trainable;        /* total trainable scalars (torchvision's count) */
} vd_net;

/* Lifecycle. vd_net_init zeroes; vd_net_free releases layers/params. */
void vd_net_init(vd_net *net);
void vd_net_free(vd_net *net);
/* Append a layer (copied). Returns its index, or -1 with e set (ENOMEM). */
int vd_net_add_layer(vd_net *net, const vd_layer *l, vd_err *e);

/* Infer shapes, validate (input references, add/concat shape agreement,
 * kernel larger than padded input, zero sizes, byte-count overflow at the
 * given batch), and create the parameter table. Errors are VD_ESPEC with
 * "FILE:LINE:COL: message" pointing at the offending layer. */
int vd_net_finalize(vd_net *net, vd_err *e);

/* Find a layer by name; -1 if absent. */
int vd_net_find(const vd_net *net, const char *name);

/* Elements per sample of layer i's output (i == -1: the net input). */
int64_t vd_net_out_numel(const vd_net *net, int i);
/* Forward FLOPs of layer i for one sample (multiply-add = 2 FLOPs). */
double vd_net_layer_flops(const vd_net *net, int i);

/* Deterministic parameter initialisation into a flat host array of
 * net->param_floats floats: PyTorch's defaults (kaiming-uniform a=sqrt(5)
 * for conv/fc weights, U(+-1/sqrt(fan_in)) biases, BN weight 1 bias 0,
 * running_mean 0, running_var 1). */
void vd_net_init_params(const vd_net *net, float *params, uint64_t seed);

#endif
