/* net.h — the network description: op table, layers, tensors, parameters.
 *
 * A net is a list of layers in topological order (the spec's order). Each
 * layer has exactly one output feature map (NCHW, fp32). The net's input
 * (images) is "layer -1". Parameters of all layers live in one flat array of
 * floats (llm.c style); each vd_param records its offset into it. Gradients
 * and the optimizer's state arrays use the same layout, so the update is one
 * loop and a checkpoint is one walk over net->params.
 *
 * Adding a layer type touches: the vd_op enum below and its vd_op_table
 * entry (src/net/ops.c: spec keys, shape inference, FLOPs, parameters, aux
 * bytes, what backward reads), the CPU op (backend/cpu/cpu_ops.c), the CUDA
 * op (backend/cuda/cuda_ops.cu, kernel in a cuda_k_*.cu file), the man page
 * (man/vdnn-net.5) and tests. Nothing else. */
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
    VD_OP_GELU,
    VD_OP_COUNT
} vd_op;

struct vd_net;
struct vd_layer;

/* The spec parser's view of one layer's op-specific keys, handed to the op
 * table's parse callbacks (src/spec/spec.c implements it). A getter leaves
 * *out alone and returns VD_OK when the key is absent; a bad value returns
 * VD_ESPEC with the message pointing at the key. error() reports at the key
 * (key NULL: at the layer); use vd_spec_keys_errf for a formatted message. */
typedef struct vd_spec_keys vd_spec_keys;
struct vd_spec_keys {
    void *ctx;
    const char *layer;          /* the layer's full name, for messages */
    bool (*has)(const vd_spec_keys *k, const char *key);
    int (*get_int)(const vd_spec_keys *k, const char *key, int min, int *out);
    int (*get_pair)(const vd_spec_keys *k, const char *key, int min, int *a, int *b);
    int (*get_bool)(const vd_spec_keys *k, const char *key, bool *out);
    /* range [lo, hi] (open ends per flag); `range` words it for messages */
    int (*get_float)(const vd_spec_keys *k, const char *key, double lo, bool lo_open, double hi,
                     bool hi_open, const char *range, float *out);
    int (*get_word)(const vd_spec_keys *k, const char *key, char **out);  /* caller frees */
    int (*error)(const vd_spec_keys *k, const char *key, const char *msg);
};
__attribute__((format(printf, 3, 4)))
int vd_spec_keys_errf(const vd_spec_keys *k, const char *key, const char *fmt, ...);

/* Everything about one op type, in one place (src/net/ops.c): read by the
 * spec parser, vd_net_finalize, the summary, the planner, the profiler and
 * both backends. Callbacks that an op does not need are NULL. */
typedef struct vd_op_info {
    const char *name;        /* spec "type:" value, e.g. "conv" */
    int min_inputs, max_inputs;
    /* What backward reads of the layer's input(s) / output, over all of the
     * op's modes (the planner's op-level view); vd_op_bwd_reads gives the
     * exact answer for one layer (average pooling reads neither). */
    bool bwd_needs_x;
    bool bwd_needs_y;
    bool bwd_x_for_weight;   /* backward reads x only for the weight's gradient (dx needs
                                W and dy alone): a frozen weight (vd_param.frozen) reads
                                no x (vd_op_bwd_reads) */
    bool can_inplace;        /* output may overwrite its (single) input */
    bool has_params;
    bool recomputable;       /* forward may run again to rebuild y: bit for bit, changing no
                                state (a re-run, vd_op_io.recompute, reads the saved state
                                its first run left: batch norm's statistics) */
    bool bwd_is_dy;          /* each input's gradient is dy itself (a sum): the planner
                                may share the gradient buffers instead of running the
                                backward, which then costs only for the inputs that
                                do not share */
    bool bwd_inplace;        /* backward is elementwise, each dx element from the same
                                element of dy (and y) only: both backends run it with
                                dx == dy (beta 0), so the planner may give an in-place
                                layer's input gradient its own dy tensor where the
                                producer has bwd_takes_relu */
    bool bwd_takes_relu;     /* backward may apply the mask of an in-place ReLU after it
                                (vd_op_io.relu_mask): it reads that ReLU's output
                                gradient, masked where its output, recomputed from x as
                                the forward stored it, is not above 0. The planner gives
                                such a ReLU's input gradient the ReLU's dy tensor (the
                                ReLU then runs in place, or not at all where a backend
                                fuses it: vd_backend_opts.no_fuse) */
    bool step_counter;       /* keeps a count of training steps, saved in checkpoints
                                as "<layer>.num_batches_tracked" (I64, torchvision's) */
    bool chunkable;          /* both backends run it on a chunk of the batch (vd_op_io's
                                n0, n_batch, dw_beta: backend.h) with the results of the
                                whole-batch call. Batch norm is not: in training it
                                normalises with the statistics of the whole batch, which
                                no one chunk has (a statistics pass over the chunks
                                before them is future work); a chunked call of an op
                                without the flag fails (VD_EINTERNAL naming the layer) */
    bool eval_chunkable;     /* not chunkable, but its evaluation forward (vd_op_io.training
                                false: an inference plan) is, as chunkable says: batch
                                norm's normalises each sample with the running statistics
                                (vd_op_chunkable) */
    const char *const *keys; /* op-specific spec keys, NULL-terminated */
    /* Defaults, then the spec keys (checks that need no shapes). */
    int (*parse)(struct vd_layer *l, const vd_spec_keys *k);
    /* The defaults of fields a layer built in code may leave 0 (parse sets
     * them too); vd_net_finalize runs it before infer. */
    void (*defaults)(struct vd_layer *l);
    /* Checks and output shape; *oc, *oh, *ow come in as input 0's shape.
     * Pure: writes only the shape, so a backend may run it on a finalized
     * net to check the shape stored in the layer. Errors through
     * vd_net_layer_err (VD_ESPEC). */
    int (*infer)(const struct vd_net *net, int i, int64_t *oc, int64_t *oh, int64_t *ow,
                 vd_err *e);
    double (*flops)(const struct vd_net *net, int i);  /* forward, one sample */
    int (*params)(struct vd_net *net, int i, vd_err *e); /* vd_net_add_param calls */
    uint64_t (*aux_bytes)(const struct vd_layer *l, int batch); /* NULL: 0 */
    void (*bwd_reads)(const struct vd_layer *l, bool *x, bool *y); /* NULL: the flags */
} vd_op_info;

/* Whether op runs on a chunk of the batch in a forward-only pass (eval:
 * vd_op_io.training false) or in any pass (eval false). */
static inline bool vd_op_chunkable(const vd_op_info *op, bool eval) {
    return op->chunkable || (eval && op->eval_chunkable);
}
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
    /* spec lr_mult: the layer's parameters learn at the scheduled lr times
     * lr_mult (0: not updated); lr_mult_set false (the spec gives none, a
     * layer built in code): 1. Read through vd_layer_lr_mult. */
    float lr_mult;
    bool lr_mult_set;
    /* set by vd_net_freeze: neither this layer nor any layer upstream of it
     * (through its inputs) has a trained parameter, so nothing needs its
     * output's gradient and its backward does nothing: it does not run, and
     * reads and writes nothing (PyTorch builds no autograd graph there) */
    bool no_grad;
} vd_layer;

static inline float vd_layer_lr_mult(const vd_layer *l) { return l->lr_mult_set ? l->lr_mult : 1.0f; }

typedef enum { VD_PARAM_WEIGHT, VD_PARAM_BUFFER } vd_param_kind;

/* What a parameter is to its op (the executor binds vd_op_io by it). */
typedef enum vd_param_role {
    VD_ROLE_WEIGHT,             /* conv / fc weight */
    VD_ROLE_BIAS,               /* conv / fc bias */
    VD_ROLE_BN_SCALE,           /* batch norm weight (gamma) */
    VD_ROLE_BN_SHIFT,           /* batch norm bias (beta) */
    VD_ROLE_RUNNING_MEAN,       /* batch norm buffers */
    VD_ROLE_RUNNING_VAR,
} vd_param_role;

typedef struct vd_param {
    char name[VD_NAME_MAX + 16]; /* "<layer>.weight", ".bias", ".running_mean", ... */
    vd_param_kind kind;         /* WEIGHT: trained by SGD; BUFFER: running stats */
    vd_param_role role;
    int layer;
    int ndim;
    int64_t shape[4];           /* PyTorch order: conv [out, in/g, kh, kw]; fc [out, in] */
    int64_t numel;
    int64_t offset;             /* in floats, into the flat parameter array */
    bool frozen;                /* vd_net_freeze (--freeze): a WEIGHT that gets no gradient
                                   and no update (PyTorch's requires_grad = False) */
} vd_param;

/* Is p trained: a WEIGHT that is not frozen, whose gradient the backward
 * pass writes and the SGD step applies? */
static inline bool vd_param_trained(const vd_param *p) {
    return p->kind == VD_PARAM_WEIGHT && !p->frozen && p->numel > 0;
}

typedef struct vd_lr_policy {
    enum { VD_LR_FIXED, VD_LR_STEP, VD_LR_MULTISTEP, VD_LR_POLY, VD_LR_COSINE } type;
    int64_t step;               /* step: every `step` iterations */
    float gamma;                /* step / multistep factor */
    int n_milestones; int64_t milestones[16];
    float power;                /* poly */
    float min_lr;               /* cosine floor */
    int64_t warmup;             /* linear warm-up iterations (0 = none) */
} vd_lr_policy;

/* Math mode (--math, train.math). fp32: fp32 everywhere. tf32: fp32
 * storage, conv/fc on tf32 tensor cores. bf16 (mixed precision): feature maps
 * and their gradients are stored in bf16 (what the planner moves and keeps),
 * conv/fc take bf16 inputs and accumulate in fp32; weights, gradients,
 * optimizer state, batch-norm parameters and statistics, the loss stay fp32. fp16:
 * the same with IEEE half feature maps and gradients (Turing has no bf16),
 * plus dynamic loss scaling (vd_loss_scale, backend.h). */
typedef enum { VD_MATH_FP32, VD_MATH_TF32, VD_MATH_BF16, VD_MATH_FP16 } vd_math;
#define VD_MATH_NAMES {"fp32", "tf32", "bf16", "fp16"}
/* "fp32" | "tf32" | "bf16" | "fp16". */
const char *vd_math_name(vd_math m);
/* The element type of feature maps and their gradients under math m. */
static inline vd_dtype vd_math_act_dtype(vd_math m) {
    return m == VD_MATH_BF16 ? VD_DT_BF16 : m == VD_MATH_FP16 ? VD_DT_F16 : VD_DT_F32;
}
/* Bytes of one feature-map (or feature-map gradient) element: 2 in bf16 and
 * fp16, else 4. */
static inline uint64_t vd_math_act_bytes(vd_math m) { return vd_dtype_bytes(vd_math_act_dtype(m)); }
/* Feature-map layout: tf32, bf16 and fp16 store them channels-last (NHWC:
 * element (n, c, h, w) at ((n*H + h)*W + w)*C + c; what makes the tensor
 * cores fast: NCHW tf32 convolutions ran far slower on H100), fp32 NCHW (the
 * exact reference math). So channels-last maps come in float (tf32) and in
 * 16 bits: the element type (vd_math_act_dtype) does not say the layout.
 * Weights stay in torch's layout. A tensor of H = W = 1 is the same in both. */
static inline bool vd_math_nhwc(vd_math m) { return m != VD_MATH_FP32; }

/* The base learning rate when neither the spec nor a flag gives one (the
 * spec's train: defaults and every tool read this one constant); SGD's.
 * AdamW's defaults are torch.optim.AdamW's (vd_train_optimizer_defaults). */
#define VD_DEFAULT_LR 0.01f
#define VD_DEFAULT_WD 0.0005f
#define VD_ADAMW_DEFAULT_LR 0.001f
#define VD_ADAMW_DEFAULT_WD 0.01f

/* The optimizer (train.optimizer, --optimizer): torch.optim.SGD (momentum,
 * optionally Nesterov; dampening 0) or torch.optim.AdamW (decoupled weight
 * decay, bias correction, eps; not amsgrad). */
typedef enum vd_optimizer { VD_OPT_SGD, VD_OPT_ADAMW } vd_optimizer;
#define VD_OPTIMIZER_NAMES {"sgd", "adamw"}
/* "sgd" | "adamw". */
const char *vd_optimizer_name(vd_optimizer o);
/* Floats of optimizer state per parameter float: SGD 1 (the momentum
 * buffer), AdamW 2 (exp_avg and exp_avg_sq). The state of a net is this
 * many arrays of net->param_floats floats, one after the other, each in the
 * parameters' layout (buffer ranges unused). */
static inline int vd_optimizer_state_arrays(vd_optimizer o) { return o == VD_OPT_ADAMW ? 2 : 1; }

typedef struct vd_train_cfg {
    int batch;
    float lr, momentum, weight_decay;
    bool has_lr, has_weight_decay; /* lr / weight_decay given (spec or flag); else the
                                   optimizer's default (vd_train_optimizer_defaults) */
    vd_optimizer optimizer;     /* train.optimizer (default sgd) */
    bool nesterov;              /* SGD: Nesterov momentum (needs momentum > 0) */
    float beta1, beta2, eps;    /* AdamW: betas and eps (torch's 0.9, 0.999, 1e-8) */
    vd_lr_policy lr_policy;
    int64_t iters;              /* 0 = derive from epochs */
    int64_t epochs;             /* used when iters == 0 and data has a size */
    uint64_t seed;
    vd_math math;               /* train.math (default fp32) */
    bool has_math;              /* train.math given (--math overrides it) */
} vd_train_cfg;

/* The spec's data.normalize (vdnn-net(5)): the net's input is (x/255 -
 * mean[c]) / std[c] for 8-bit pixels x of channel c. n = 0: not given (each
 * data set's own, data/data.h); else the input's channels, one value each. */
#define VD_NORM_MAX_CHANNELS 3
typedef struct vd_data_norm {
    int n;
    float mean[VD_NORM_MAX_CHANNELS], std[VD_NORM_MAX_CHANNELS];
} vd_data_norm;

typedef struct vd_net {
    char name[VD_NAME_MAX];
    char path[512];             /* spec file, for messages */
    int in_c, in_h, in_w;       /* input image shape */
    int classes;
    vd_train_cfg train;
    vd_data_norm norm;          /* the spec's data.normalize */
    int n_layers;
    vd_layer *layers;           /* [n_layers] */
    int n_params;
    vd_param *params;           /* [n_params] */
    int64_t param_floats;       /* total floats in the flat array (weights + buffers) */
    int64_t n_trainable;        /* total trainable scalars (torchvision's count) */
} vd_net;

/* The floats of net's optimizer state (vd_optimizer_state_arrays of
 * net->train.optimizer times net->param_floats). */
static inline int64_t vd_net_state_floats(const vd_net *net) {
    return vd_optimizer_state_arrays(net->train.optimizer) * net->param_floats;
}

/* The learning rate and weight decay of t's optimizer where neither was
 * given (!has_lr, !has_weight_decay): SGD VD_DEFAULT_LR and VD_DEFAULT_WD
 * (vdnn's), AdamW VD_ADAMW_DEFAULT_LR and VD_ADAMW_DEFAULT_WD
 * (torch.optim.AdamW's). The spec's train: section calls it, and again
 * whatever changes the optimizer afterwards (--optimizer). */
void vd_train_optimizer_defaults(vd_train_cfg *t);

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

/* Bytes of per-layer saved state (vd_op_io.aux) at the batch size: BN
 * mean[C] and invstd[C]; the loss: 2 floats. The one formula for the
 * backends, the executor, the planner and the profiler. */
uint64_t vd_op_aux_bytes(const vd_net *net, int layer, int batch);
/* Whether layer `layer`'s backward reads its input(s) / its output: none
 * for a no_grad layer (its backward does not run), no x for a frozen
 * weight of an op whose x serves only the weight's gradient
 * (bwd_x_for_weight); else the op's reads. */
void vd_op_bwd_reads(const vd_net *net, int layer, bool *x, bool *y);
/* The same as if no parameter were frozen (what vd_net_freeze saves is the
 * difference: vdnn-plan's report). */
void vd_op_bwd_reads_unfrozen(const vd_net *net, int layer, bool *x, bool *y);
/* The layer whose backward may take the backward of layer r
 * (vd_op_info.bwd_takes_relu): r's producer, when r is a ReLU that runs in
 * place (vd_layer.inplace) after a layer of such an op; else -1. */
int vd_op_relu_taker(const vd_net *net, int r);
/* The ReLU whose backward layer p may take (vd_op_relu_taker(net, r) == p),
 * or -1. */
int vd_op_relu_taken(const vd_net *net, int p);

/* The conv whose bias gradient the backward of layer r may reduce (the
 * ReLU backward + bias gradient fusion, vd_op_io.bias_db): r - 1, when r is
 * a ReLU right after a conv with a trained bias, and r's backward runs (not
 * no_grad); else -1. The caller also asks that the ReLU run in place (the
 * plan's flags, vd_schedule_inplace_flags): the conv's output then has no
 * other consumer, and the ReLU's dx is all of the conv's dy. */
int vd_op_bias_taker(const vd_net *net, int r);
/* The batch norm whose output add a may apply itself (the batch norm +
 * add fusion, vd_plan_opts.fuse_bn_add, vd_plan_layer.bn_unit): the first
 * input of a (in input order) that is a batch norm's output read by a
 * alone, once, of a batch norm whose input is a layer's output (not the
 * net's) that a does not read too; else -1. At most one per add: where both branches of a ResNet
 * block end in a batch norm (the downsample block), the main branch's
 * (input 0, bn3), whose output would live longest (across the downsample
 * branch's steps). */
int vd_op_bn_folded(const vd_net *net, int a);
/* folded[a] = vd_op_bn_folded(net, a) for every layer a, in one pass over the
 * net (the planner's builds ask it of every add); VD_ENOMEM. */
int vd_op_bn_folds(const vd_net *net, int *folded, vd_err *e);
/* The add that applies batch norm b (vd_op_bn_folded(net, a) == b), or -1. */
int vd_op_bn_folder(const vd_net *net, int b);
/* The ReLU whose backward the backward of layer p may take (the max pool +
 * ReLU backward fusion, vd_op_io.relu_dx): p's input r, when p is a max pool
 * whose backward runs, and r a ReLU in place (vd_layer.inplace) whose
 * backward runs and writes a gradient (its input is a layer's that needs
 * one), read by p alone, and not taken by its producer (vd_op_relu_taker:
 * a batch norm's, which masks for free): p's dx is then all of r's dy, and
 * p reads r's y (its own x) anyway. Else -1. The plan pairs them where both run whole and
 * adjacent (vd_plan_layer.takes_relu). */
int vd_op_pool_relu(const vd_net *net, int p);
/* The ReLU whose backward the backward of batch norm b may take (the
 * batch norm + add + ReLU backward fusion, vd_op_io.relu_y): b + 2, when
 * b's backward runs, b + 1 is an add that reads b once, and b + 2 a ReLU
 * in place (vd_layer.inplace: the add's one reader) after that add whose
 * backward runs and whose max pool does not take it (vd_op_pool_relu: the
 * pool masks what it writes at no cost). b's backward is then the first
 * after the ReLU's that reads the gradient the ReLU writes (the add's own
 * passes it on unchanged): ResNet's identity block's bn3, its downsample
 * block's downsample.1 (the layer right before the add). Else -1. The plan
 * pairs them where all three run whole and the add's backward writes
 * nothing (its inputs' gradients are its dy tensor;
 * vd_plan_layer.takes_add_relu). */
int vd_op_add_relu(const vd_net *net, int b);
/* --freeze PATTERN: freeze every WEIGHT parameter whose name matches the
 * pattern (vd_regex_search: anywhere in "layer1.0.conv1.weight"), then
 * mark the layers that need no gradient (vd_layer.no_grad). NULL: nothing
 * frozen. Clears what an earlier call set (vd_net_finalize does too). A
 * frozen parameter gets no gradient and no update: no SGD step, no weight
 * decay, its momentum untouched. Buffers (running statistics) are not
 * parameters: batch norm updates them in training whatever is frozen, as
 * PyTorch's does. VD_EUSAGE naming the pattern when it is no regular
 * expression, matches no parameter of the net (saying so when it matches
 * buffers only), or freezes every parameter (nothing would train). Call
 * on a finalized net. */
int vd_net_freeze(vd_net *net, const char *pattern, vd_err *e);
/* What vd_net_freeze froze. */
typedef struct vd_freeze_count {
    int frozen, params;         /* frozen parameter tensors (WEIGHT) of all of them */
    int64_t frozen_numel;       /* their values */
    int no_grad_layers;         /* layers whose backward does not run (vd_layer.no_grad) */
} vd_freeze_count;
void vd_net_frozen_count(const vd_net *net, vd_freeze_count *c);

/* For the op table's callbacks (src/net/ops.c). */
__attribute__((format(printf, 4, 5)))
int vd_net_layer_err(const vd_net *net, const vd_layer *l, vd_err *e, const char *fmt, ...);
void vd_net_in_shape(const vd_net *net, int src, int *c, int *h, int *w);
const char *vd_net_in_name(const vd_net *net, int src);
/* Append parameter "<layer>.<suffix>" (kind from the role). */
int vd_net_add_param(vd_net *net, int layer, const char *suffix, vd_param_role role, int ndim,
                     const int64_t *shape, vd_err *e);

/* Deterministic parameter initialisation into a flat host array of
 * net->param_floats floats: PyTorch's defaults (kaiming-uniform a=sqrt(5)
 * for conv/fc weights, U(+-1/sqrt(fan_in)) biases, BN weight 1 bias 0,
 * running_mean 0, running_var 1). */
void vd_net_init_params(const vd_net *net, float *params, uint64_t seed);
/* Floats [first, first + n) of that array into dst[0..n-1], the same values
 * (each parameter's generator jumps ahead to where the slice starts), so a
 * big net's parameters can be made a piece at a time. 0 <= first,
 * first + n <= net->param_floats. */
void vd_net_init_params_range(const vd_net *net, uint64_t seed, int64_t first, int64_t n,
                              float *dst);

#endif
