/* backend.h — what a backend (cpu | cuda) supplies to the executor.
 *
 * A backend is a struct of function pointers over an opaque context. The
 * executor (src/exec) owns the schedule; the backend owns kernels, streams,
 * events and memory. All device pointers handed to ops point into the one
 * pool region that pool_create returned; a backend never allocates device
 * memory behind the executor's back.
 *
 * Streams: VD_STREAM_COMPUTE, VD_STREAM_D2H, VD_STREAM_H2D. Work on one stream
 * runs in issue order; across streams only events order it. Events are
 * indices 0..n_events-1 created up front (events_create).
 *
 * CPU backend semantics (the oracle): compute runs immediately on the calling
 * thread; copies on D2H/H2D are queued and run lazily, when an event recorded
 * after them is waited on (stream_wait / event_sync) or at synchronize. So a
 * missing wait deterministically reads stale or poisoned memory. */
#ifndef VD_BACKEND_H
#define VD_BACKEND_H

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "util/util.h"
#include "net/net.h"
#include "profile/profile.h"
#include "data/synth.h"

enum { VD_STREAM_COMPUTE = 0, VD_STREAM_D2H = 1, VD_STREAM_H2D = 2, VD_N_STREAMS = 3 };
/* Synthetic slots (fill_synthetic, synth_set): the executor's input batch
 * and its staged next batch. */
enum { VD_SYNTH_SLOTS = 2 };


/* Per-layer algorithm choice. For conv: index into the backend's list of
 * algorithm options for that layer (see layer_algos); 0 for other ops. */
typedef struct vd_algo_opt {
    int fwd_algo, bwd_data_algo, bwd_filter_algo; /* backend-specific ids */
    uint64_t workspace;          /* bytes of scratch needed by fwd and bwd (max) */
    char label[32];              /* "fastest", "min-ws", "IMPLICIT_GEMM", ... */
    uint64_t ws_fwd, ws_bwd;     /* scratch of each pass; workspace = max of the two.
                                    The planner may give each pass only its own. */
} vd_algo_opt;

/* Everything one layer's forward or backward touches. Pointers are device
 * pointers (into the pool); unused ones are NULL. Shapes come from the net.
 *   x[k]  : input k,  [N, in_c_k, in_h, in_w]
 *   y     : output,   [N, c, h, w]
 *   w, b  : weight / bias (or BN scale / shift) inside the flat param array
 *   rm, rv: BN running mean / var (buffers)
 *   dw, db: gradients, same layout; backward overwrites them (dw_beta 0:
 *           each param belongs to one layer) or adds to them (dw_beta 1).
 *           NULL: no gradient wanted (a frozen parameter, --freeze): none is
 *           computed, and conv and fc then read no x (vd_op_bwd_reads);
 *           what a library call writes regardless (cuDNN's batch norm) goes
 *           into room its option's workspace holds for it
 *   dy    : gradient of y;  dx[k]: gradient of x[k] (NULL: the input needs
 *           none: the net input, a no_grad layer's output; the same rule)
 *   dx_beta[k]: 0 = overwrite dx[k], 1 = accumulate into it (tensors with
 *           several consumers sum their gradients; order is static)
 *   aux   : per-layer saved state (BN: mean[C], invstd[C]; loss: 2 floats,
 *           the mean loss and the count of top-1 hits, see loss_n),
 *           vd_op_aux_bytes() bytes
 *   labels: int32 [N] class ids (loss layer only)
 *   loss_n: loss layer: its forward's loss (aux[0], the mean) and top-1
 *           hits (aux[1]: the samples whose logits' argmax, the first of
 *           equal maxima, is the label) count the whole batch's first
 *           loss_n samples only; 0 = all (vd_op_io_loss_n). The others get
 *           their softmax all the same (an evaluation's last batch padded
 *           to the batch size). Training leaves it 0.
 *   ws    : workspace of ws_bytes
 *   iter  : added to the step scalars' iter (step_set; 0 until set): dropout's
 *           masks are vd_hash_uniform(seed, layer, iter + steps.iter, i). The
 *           executor leaves it 0 and sets the iteration through step_set, so
 *           that an iteration's kernels are the same every step (a captured
 *           iteration replays them)
 *   training: batchnorm uses batch statistics and updates running stats
 *   recompute: a forward run again to rebuild y (the plan recomputes the
 *           map): y bit for bit as the first run wrote it, no state changed;
 *           batchnorm normalises with the statistics that run saved in aux
 *           (no new statistics, no running-statistics update)
 *   act   : the feature maps' element type (vd_math_act_dtype of layer_setup's
 *           math, set by the executor). VD_DT_BF16 / VD_DT_F16 (math bf16 /
 *           fp16): the feature-map operands x, y, dy, dx point to 16-bit
 *           elements (uint16_t storage; C has neither type, so they keep
 *           their float-pointer type and must never be read as float). w, b,
 *           rm, rv, dw, db, aux stay fp32 (fp32 master weights and gradients,
 *           BN statistics, the loss). The layout is not act's but the math's
 *           (vd_math_nhwc of layer_setup's math): channels-last in tf32 (float
 *           elements), bf16 and fp16, NCHW in fp32.
 *   loss_scaled: math fp16: the loss layer's backward multiplies its dx by
 *           the backend's current loss scale (vd_loss_scale.scale, read where
 *           the backend keeps it: device memory on CUDA, no host sync).
 *   relu_mask, relu_store: batch norm's backward (vd_op_info.bwd_takes_relu)
 *           with the backward of the in-place ReLU after it fused: dy is that
 *           ReLU's output gradient, and the op reads it as the ReLU's backward
 *           would have written it: 0 where the ReLU's output (the stored y:
 *           the forward's y recomputed from x and aux, rounded to relu_store)
 *           is <= 0, else dy (NaN passes). A backend sets these itself for
 *           the layers whose ReLU it fuses (the executor leaves them 0); the
 *           ReLU's backward is then skipped where it would write its dy
 *           tensor (dx == dy: the planner's sharing, tensors.c), and runs, to
 *           the same bits, where not.
 *   bias_db, db_taken: the ReLU backward + conv bias gradient fusion
 *           (vd_op_bias_taker; the plan pairs a ReLU and its conv where both
 *           run unchunked, vd_plan_layer.db_unit). The executor gives the
 *           ReLU's backward bias_db, the conv's bias gradient (its C floats,
 *           overwritten), and sets db_taken on that conv's backward, whose
 *           db it binds all the same. A backend that fuses (not no_fuse)
 *           reduces db there from the dx the ReLU writes, in the order and
 *           rounding its conv's backward would have read it as dy, and
 *           skips db in the conv's backward; one that does not ignores both
 *           (the conv writes db). Else NULL / false.
 *   bn_stats, bn_k, bn_aux, bn_w, bn_b: the batch norm + add fusion
 *           (vd_plan_opts.fuse_bn_add, vd_plan_layer.bn_unit), set by the
 *           executor from the plan. bn_stats: a batch norm's forward with
 *           y == x[0] that computes its statistics alone (aux, and in
 *           training the running statistics) and writes no y (x stays as it
 *           is; a recompute then does nothing). bn_aux non-NULL: an add's
 *           forward whose input bn_k is that batch norm's x (its output never
 *           stored): the add reads x[bn_k] as the batch norm's y, computed
 *           from it with the statistics bn_aux ([mean C | invstd C]), gamma
 *           bn_w and beta bn_b of the batch norm (layer in[bn_k], its eps)
 *           in the batch norm's own float line and rounded to act as the
 *           batch norm stores y, before the sum: the bits of the unfused
 *           pair. Both backends run it in every math but CUDA's fp32
 *           (VD_EUNSUPPORTED: cuDNN's batch norm); the executor sets them
 *           whatever no_fuse (the plan decides). Else false / NULL.
 *   relu_dx, bwd_done: the max pool + ReLU backward fusion (vd_op_pool_relu;
 *           the plan pairs a max pool and the in-place ReLU before it where
 *           both run unchunked and adjacent, and the ReLU's dx is its dy
 *           tensor, vd_plan_layer.takes_relu). The executor sets relu_dx on
 *           the pool's backward (whose dx[0], beta 0, is then that ReLU's dy
 *           and dx), gives it the ReLU's bias_db where the ReLU has one, and
 *           sets bwd_done on the ReLU's backward. A backend that fuses (not
 *           no_fuse) writes the pool's dx as the ReLU's backward would then
 *           have rewritten it (0 where x, the ReLU's output, is <= 0; NaN
 *           passes), reduces bias_db from it as the ReLU would (see above),
 *           and does nothing in the ReLU's backward; one that does not
 *           ignores both (the ReLU runs in place). Else false.
 *   relu_y: the batch norm + add + ReLU backward fusion (vd_op_add_relu;
 *           the plan pairs a batch norm, the add right after it and the
 *           in-place ReLU after that where all three run unchunked, the
 *           add's backward writes nothing and the ReLU's dx is its dy
 *           tensor, vd_plan_layer.takes_add_relu). The executor gives the
 *           batch norm's backward the ReLU's output (the add's y) here; its
 *           dy is then the ReLU's dy tensor, which that ReLU's backward
 *           would have rewritten in place, and writable (the add's other
 *           inputs' gradient too). It sets bwd_done on the ReLU's backward.
 *           A backend that fuses (not no_fuse) rewrites dy as the ReLU's
 *           backward would have (0 where relu_y <= 0; NaN passes), all of
 *           it, then runs the batch norm's backward on it, and does nothing
 *           in the ReLU's backward; one that does not ignores both (the
 *           ReLU runs in place). Else NULL.
 *
 * Chunks (n0, n_batch, dw_beta). A call may run samples [n0, n0 + n) of a
 * batch of n_batch samples: x, y, dy, dx and labels then point at that
 * chunk's own slices (the caller offsets them: a feature map is per-sample
 * contiguous, NCHW and NHWC alike, so a chunk is one slab), N
 * above is n, and y and dx are the rows [n0, n0 + n) of the whole-batch
 * call's, computed the same way:
 *   - what depends on a sample's place in the batch uses n0 + its index in
 *     the chunk: dropout's mask (element n0 * C*H*W + i of the batch);
 *   - the loss is the mean over n_batch, not n: the loss's dx is
 *     (softmax - onehot) / n_batch, and its forward writes its chunk's part
 *     of the mean, sum over the chunk of the sample losses / n_batch, into
 *     aux[0] at n0 == 0 and ADDS it to aux[0] at n0 > 0: run the chunks'
 *     forwards in the order of n0 and aux[0] ends as the batch's mean loss
 *     (the sum of the parts: the whole-batch value up to rounding); the
 *     same for the top-1 hits in aux[1] (loss_n: over the counted ones);
 *   - parameter gradients: dw_beta 0 overwrites dw and db with the chunk's
 *     gradient (the first chunk), 1 adds it to them (the later ones), so the
 *     chunks' backwards, run in a fixed order, leave the batch's gradient
 *     (summed per chunk, then over the chunks: equal to the whole-batch
 *     call's up to the reassociation of those sums).
 * n0 = 0, n_batch = 0 (meaning n) and dw_beta = 0 is the whole-batch call,
 * bit for bit the unchunked computation. Only ops whose table entry
 * says chunkable (vd_op_info) take any other values, and batch norm's
 * evaluation forward (training false: eval_chunkable, vd_op_chunkable);
 * the others (batch norm's training forward, its backward) fail with
 * VD_EINTERNAL naming the layer (vd_op_io_check_chunk). */
typedef struct vd_op_io {
    int n;                          /* batch */
    const float *x[VD_MAX_INPUTS];
    float *y;                       /* may be x[0] for an op that runs in place
                                       (can_inplace), any x[k] for an add (a
                                       forward-only plan's, vdp_add_inplace_input) */
    const float *w, *b;
    float *rm, *rv;
    float *dw, *db;
    const float *dy;
    float *dx[VD_MAX_INPUTS];
    float dx_beta[VD_MAX_INPUTS];
    float *aux;
    const int32_t *labels;
    void *ws; uint64_t ws_bytes;
    int algo;                       /* index into layer_algos' list */
    uint64_t seed; int64_t iter;
    bool training;
    bool recompute;                 /* forward only: a re-run (see above) */
    vd_dtype act;
    bool loss_scaled;
    int64_t n0;                     /* chunk: its first sample in the batch (0: whole batch) */
    int n_batch;                    /* chunk: samples in the whole batch (0: n) */
    float dw_beta;                  /* 0 = overwrite dw, db; 1 = add to them (later chunks) */
    int loss_n;                     /* loss layer: samples counted (0: all), see above */
    bool relu_mask;                 /* batch norm backward: dy is its ReLU's, see above */
    vd_dtype relu_store;            /* ... and its y is stored rounded to this */
    float *bias_db;                 /* ReLU backward: its conv's bias gradient, see above */
    bool db_taken;                  /* conv backward: its ReLU's backward had bias_db */
    bool bn_stats;                  /* batch norm forward: statistics alone, see above */
    int bn_k;                       /* add forward with bn_aux: the batch norm's input */
    const float *bn_aux, *bn_w, *bn_b; /* add forward: that batch norm's statistics, gamma,
                                       beta (see above); NULL: none */
    bool relu_dx;                   /* max pool backward: it runs its ReLU's, see above */
    bool bwd_done;                  /* ReLU backward: its pool's ran it (relu_dx), or
                                       its add's batch norm's (relu_y) */
    const float *relu_y;            /* batch norm backward: it runs its add's ReLU's,
                                       whose output this is, see above */
} vd_op_io;

/* The samples of the whole batch io belongs to: n_batch, or n when 0. */
static inline int vd_op_io_batch(const vd_op_io *io) { return io->n_batch ? io->n_batch : io->n; }
/* The loss layer's counted samples (loss_n): the whole batch's first
 * loss_n, or all of them when 0. */
static inline int vd_op_io_loss_n(const vd_op_io *io) {
    return io->loss_n > 0 && io->loss_n < vd_op_io_batch(io) ? io->loss_n : vd_op_io_batch(io);
}
/* Does io run a chunk of a batch (n0, n_batch or dw_beta not the whole
 * batch's)? */
static inline bool vd_op_io_chunked(const vd_op_io *io) {
    return io->n0 != 0 || vd_op_io_batch(io) != io->n || io->dw_beta != 0.0f;
}
/* Both backends' check of a call's chunk: VD_EINTERNAL naming the layer
 * when the chunk is not inside the batch (n0 < 0, n0 + n > n_batch) or the
 * call is chunked (vd_op_io_chunked) on an op that is not chunkable
 * (vd_op_info; a forward, bwd false, with io->training false: an op
 * chunkable in evaluation, vd_op_chunkable). (backend.c) */
int vd_op_io_check_chunk(const vd_net *net, int layer, const vd_op_io *io, bool bwd, vd_err *e);

/* Workspace of one pass of option o (a backend that reports no per-pass
 * sizes needs `workspace` in both). */
static inline uint64_t vd_algo_ws(const vd_algo_opt *o, bool bwd) {
    if (!o->ws_fwd && !o->ws_bwd) return o->workspace;
    return bwd ? o->ws_bwd : o->ws_fwd;
}

/* The index of the option of opts[0..n) that a profile's or a plan's option
 * a labelled `label` runs as: the option of that label (cuDNN's tuning can
 * list the same engines in another order, or others, from one process to
 * the next), -1 where none has it; an empty label (a profile without
 * labels) is option a itself where a < n. (backend.c) */
int vd_algo_find(const vd_algo_opt *opts, int n, const char *label, int a);

/* Backend options (the CUDA backend's; the CPU backend honours no_fuse alone).
 * Zeroed = the defaults. Given at creation (vd_backend_cuda_create_opts)
 * and kept in vd_backend.opts, where layer_setup reads the conv_* fields,
 * so a caller may change them between creation and layer_setup. Set from
 * vdnn-train's / vdnn-bench's / vdnn-plan's flags of the same names. */
typedef enum {
    VD_CONV_TUNE_ON = 0,        /* --conv-tune on: time conv algorithms at setup
                                   (never with deterministic) */
    VD_CONV_TUNE_OFF,           /* off: heuristics only */
    VD_CONV_TUNE_RETIME,        /* retime: also re-time cudnnFind's best few with
                                   CUDA events (experimental, legacy API) */
} vd_conv_tune;
typedef enum {
    VD_CONV_API_AUTO = 0,       /* --conv-api auto: per layer, the faster of the cuDNN
                                   graph API and the legacy API (when tuned) */
    VD_CONV_API_GRAPH,          /* graph: the graph API only */
    VD_CONV_API_LEGACY,         /* legacy: the legacy API only */
} vd_conv_api;
typedef enum {
    VD_CONV_SPLIT_AUTO = 0,     /* --conv-split auto: split (sub-batch) options where the
                                   fastest needs over 1 GiB of workspace */
    VD_CONV_SPLIT_OFF,          /* off: never */
    VD_CONV_SPLIT_FORCE,        /* force: b/2 and b/4 on every conv layer (tests) */
} vd_conv_split;
typedef struct vd_backend_opts {
    vd_conv_tune conv_tune;
    vd_conv_api conv_api;
    vd_conv_split conv_split;
    int conv_debug;             /* --conv-debug N: 0 quiet, 1 the path of each conv
                                   layer on stderr, 2 also every candidate engine */
    int conv_topk;              /* --conv-topk N: heuristic engines per direction,
                                   1..12 (0 = the default, 8) */
    bool conv_rtc;              /* --conv-rtc: also runtime-compiled engines */
    bool conv_direct_force;     /* tests: every conv the direct forward kernel serves
                                   also gets the option "direct", and its other
                                   options' forward is the direct kernel too (so a
                                   ReLU in place after it fuses into it) (CUDA) */
    bool conv_gemm_force;       /* tests: every 1x1 conv the cuBLAS backward-filter
                                   serves also gets the option "gemm w" (CUDA) */
    bool conv_fuse_force;       /* tests: every conv with a bias whose fused forward
                                   graph cuDNN supports runs it, faster or not (CUDA) */
    bool sync_debug;            /* --sync-debug: synchronize after every op */
    bool no_fuse;               /* --no-fuse: every op runs as its own kernels (CUDA:
                                   no conv + bias (+ ReLU) cuDNN graph, no ReLU fused
                                   into the conv, batch norm or add before it, no ReLU
                                   backward in the batch norm's before it; the CPU
                                   backend: no ReLU backward in the batch norm's) */
    const volatile sig_atomic_t *stop; /* optional: once *stop is set, long setup work
                                   (profiling, CUDA: between layers) ends with VD_ESTOP */
} vd_backend_opts;
#define VD_CONV_TOPK_DEFAULT 8
#define VD_CONV_TOPK_MAX 12

/* Dynamic loss scaling state (math fp16; torch.amp.GradScaler's defaults:
 * init_scale 65536, growth_factor 2, backoff_factor 0.5, growth_interval
 * 2000). The same layout on the device. */
typedef struct vd_loss_scale {
    float scale;                /* the loss is multiplied by this */
    int32_t growth;             /* clean steps since the scale last changed */
    int32_t found_inf;          /* this step's gradients hold an inf/NaN */
    int32_t first_bad;          /* layer of the first non-finite gradient of the
                                   current run of skipped steps, -1: none */
    int32_t streak;             /* steps skipped in a row */
    int32_t stepped;            /* an update has run (the optimizer state is started) */
    int64_t skipped;            /* steps skipped in all */
} vd_loss_scale;
#define VD_LOSS_SCALE_INIT 65536.0f
#define VD_LOSS_SCALE_INTERVAL 2000
/* A fresh state: scale VD_LOSS_SCALE_INIT, nothing skipped, first_bad -1. */
static inline vd_loss_scale vd_loss_scale_init(void) {
    vd_loss_scale s;
    memset(&s, 0, sizeof s);
    s.scale = VD_LOSS_SCALE_INIT;
    s.first_bad = -1;
    return s;
}
/* scale_update's rule on a state in host memory (the CPU backend's; the
 * CUDA kernel does the same on the device): see scale_update below. */
static inline void vd_loss_scale_step(vd_loss_scale *s) {
    if (s->found_inf) {
        s->scale *= 0.5f;
        s->growth = 0;
        s->skipped++;
        s->streak++;
    } else {
        s->growth++;
        s->streak = 0;
        s->stepped = 1;
        s->first_bad = -1;
        if (s->growth >= VD_LOSS_SCALE_INTERVAL) {
            float grown = s->scale * 2.0f;
            if (isfinite(grown)) s->scale = grown;  /* torch keeps a scale that would overflow */
            s->growth = 0;
        }
    }
    s->found_inf = 0;
}

/* One optimizer update's settings (backend.h's update / update_scaled), as
 * torch.optim defines them; lr and t reach the kernels through the step
 * scalars (vd_step_scalars_of, step_set), the rest as the update's
 * arguments. `t` is the update's number over the state's
 * life, from 1 (its first update: the state starts there, as torch's
 * lazily created state does, and the stored state is not read).
 *
 * SGD (torch.optim.SGD, dampening 0), element by element in float:
 *   d = g + wd*p;  buf = t == 1 ? d : momentum*buf + d;
 *   step = nesterov ? d + momentum*buf : buf;  p = p - lr*step.
 * With momentum 0 the buffer is d (torch keeps none; the same update). m is
 * the buffer; v is unused (NULL).
 *
 * AdamW (torch.optim.AdamW: _single_tensor_adam with decoupled weight decay,
 * not amsgrad, not maximize), element by element, m = exp_avg,
 * v = exp_avg_sq (both read as 0 when t == 1), in float but the last line:
 *   m = lerp(m, g, 1 - beta1)        torch's lerp: m + w*(g - m) for w < 0.5,
 *                                    else g - (g - m)*(1 - w)
 *   v = beta2*v + ((1 - beta2)*g)*g
 *   denom = sqrt(v) / sqrt(bc2) + eps
 *   u = (-(lr / bc1)*m) / denom
 *   p = p*(1 - lr*wd) + u            in double, rounded to float once
 * with bc1 = 1 - beta1^t and bc2 = 1 - beta2^t; the scalars 1 - beta1,
 * 1 - beta2, lr / bc1 and sqrt(bc2) are computed in double and rounded to
 * float, as torch computes them in Python and casts them. The last line is
 * torch's p.mul_(1 - lr*wd) then p.addcdiv_(m, denom, value=-lr/bc1), in
 * that order, with p rounded once instead of twice and the factor
 * 1 - lr*wd kept in double (near 1 a float errs by up to 2^-25, as much as
 * p's own rounding does each step): 20 steps then stay within the 1e-6
 * relative of PyTorch's AdamW in float64 that tests/train/test_optim.c
 * checks (it says why). Both backends compute these operations alike (no
 * contraction into fused multiply-adds), so their results are the same bit
 * for bit. */
typedef struct vd_optim_step {
    vd_optimizer kind;
    float lr, weight_decay;
    float momentum;             /* SGD */
    bool nesterov;              /* SGD */
    float beta1, beta2, eps;    /* AdamW */
    int64_t t;                  /* this update's number, >= 1 */
} vd_optim_step;

/* The values of one training step that change from step to step (the
 * step scalars): the update's learning rate and number t, and dropout's
 * iteration. The executor sets them once per step (step_set) and the
 * backends' kernels read them from where step_set put them (CUDA: device
 * memory), never from their own arguments: an iteration's kernels are then
 * the same every step, and a captured iteration (capture_begin) replays
 * them with the values of each launch. bc1 and bc2_sqrt are derived from t
 * on the host (vd_step_scalars_of), so that no device computes a pow. */
typedef struct vd_step_scalars {
    float lr;                   /* the step's learning rate (a range's: lr x its lr_mult) */
    float bc2_sqrt;             /* AdamW: sqrt(1 - beta2^t), computed in double, rounded */
    double bc1;                 /* AdamW: 1 - beta1^t */
    int64_t t;                  /* the update's number, >= 1 (vd_optim_step.t) */
    int64_t iter;               /* the iteration: dropout's masks (vd_op_io.iter) */
} vd_step_scalars;
static inline vd_step_scalars vd_step_scalars_of(const vd_optim_step *o, int64_t iter) {
    vd_step_scalars s;
    memset(&s, 0, sizeof s);
    s.lr = o->lr;
    s.t = o->t;
    s.iter = iter;
    s.bc1 = 1.0 - pow((double)o->beta1, (double)o->t);
    s.bc2_sqrt = (float)sqrt(1.0 - pow((double)o->beta2, (double)o->t));
    return s;
}

/* One range of an update's table (ranges_create): params, grads and the
 * state arrays [offset, offset + count), at the step's lr x lr_mult (a
 * float product, as lr * lr_mult in C). */
typedef struct vd_update_range {
    int64_t offset, count;      /* in floats */
    float lr_mult;
} vd_update_range;

/* The scalars of an AdamW update (vd_optim_step above) at a range's learning
 * rate lr (the step's x its lr_mult) and step scalars s, as torch derives
 * them from its hyperparameters: each computed in double, rounded to float
 * once (but decay). Both backends' kernels compute these alike (CUDA: on
 * the device, with the same IEEE double operations). */
typedef struct vd_adamw_scalars {
    double decay;               /* 1 - lr*wd (double: see above) */
    float w1;                   /* 1 - beta1: lerp's weight */
    float beta2, c2;            /* beta2, 1 - beta2 */
    float neg_step;             /* -lr / bc1 */
    float bc2_sqrt;             /* sqrt(bc2) */
    float eps;
} vd_adamw_scalars;
static inline vd_adamw_scalars vd_adamw_scalars_at(const vd_optim_step *o, float lr,
                                                   const vd_step_scalars *st) {
    vd_adamw_scalars s;
    s.decay = 1.0 - (double)lr * (double)o->weight_decay;
    s.w1 = (float)(1.0 - (double)o->beta1);
    s.beta2 = o->beta2;
    s.c2 = (float)(1.0 - (double)o->beta2);
    s.neg_step = (float)(-(double)lr / st->bc1);
    s.bc2_sqrt = st->bc2_sqrt;
    s.eps = o->eps;
    return s;
}

typedef struct vd_backend vd_backend;
struct vd_backend {
    const char *name;               /* "cpu" | "cuda" */
    void *ctx;
    vd_backend_opts opts;           /* as created (see vd_backend_opts) */

    /* Lifecycle. destroy frees everything the backend made. */
    void (*destroy)(vd_backend *be);

    /* The device. model: the analytic model of it that an unmeasured
     * profile uses (vd_profile_backend). mem_info: the driver's free and
     * total bytes of the device's memory, everything in it (pool, context,
     * library handles); NULL where the backend has no device memory of its
     * own (cpu). profile_measure: times every layer on the device
     * (cuda_backend.h's vd_profile_measure); NULL where the analytic profile
     * is the profile (cpu). */
    const vd_device_params *model;
    int (*mem_info)(vd_backend *be, uint64_t *free_b, uint64_t *total_b, vd_err *e);
    int (*profile_measure)(vd_backend *be, const vd_net *net, int batch, vd_profile *out,
                           vd_err *e);

    /* Memory. The pool is ONE device allocation of exactly `bytes`. */
    int (*pool_create)(vd_backend *be, uint64_t bytes, void **base, vd_err *e);
    void (*pool_destroy)(vd_backend *be, void *base);
    /* Pinned host memory (CPU: plain aligned malloc). */
    int (*host_alloc)(vd_backend *be, uint64_t bytes, void **p, vd_err *e);
    void (*host_free)(vd_backend *be, void *p);

    /* Streams and events. */
    int (*events_create)(vd_backend *be, int n_events, vd_err *e);
    int (*event_record)(vd_backend *be, int event, int stream, vd_err *e);
    int (*stream_wait)(vd_backend *be, int stream, int event, vd_err *e);
    int (*event_sync)(vd_backend *be, int event, vd_err *e);   /* host waits */
    int (*synchronize)(vd_backend *be, vd_err *e);             /* all streams; not in the loop */
    /* Elapsed ms between two completed events (for measured times); CPU: wall. */
    int (*event_elapsed)(vd_backend *be, int ev_start, int ev_end, float *ms, vd_err *e);
    /* Records event on stream for timing only (event_elapsed, event_sync;
     * no stream waits on it): inside a capture, a node of the graph that
     * records it at each launch (CUDA: an external event record node), so
     * that a replayed iteration can be timed step by step. NULL where the
     * backend has no captures (event_record serves). */
    int (*event_mark)(vd_backend *be, int event, int stream, vd_err *e);

    /* Copies. dir: host->device on H2D, device->host on D2H, or
     * device->device on COMPUTE. Async with respect to the host. */
    int (*copy_async)(vd_backend *be, int stream, void *dst, const void *src,
                      uint64_t bytes, vd_err *e);
    /* Fill bytes with 0xFF (a float NaN) on a stream: the poison. */
    int (*poison_async)(vd_backend *be, int stream, void *dst, uint64_t bytes, vd_err *e);
    /* Zero device memory on a stream. */
    int (*zero_async)(vd_backend *be, int stream, void *dst, uint64_t bytes, vd_err *e);
    /* Generate the synthetic batch b on a stream, like a copy into x (device
     * memory): b->n samples of b->sample_numel elements each, NCHW, sample s
     * at x + s * sample_numel, element j of sample s vd_synth_value of
     * (b->seed, b->split, b->index[s]) (data/synth.h); as elements of type
     * dt (16-bit: channels-last, rounded to nearest even). The same bits on
     * every backend.
     * The sample indices go through synthetic slot `slot` (0 ..
     * VD_SYNTH_SLOTS - 1; the caller's choice, one per batch it keeps in
     * flight), as the step scalars go through step_set: b->index is written
     * into the slot's host-side copy (after the slot's previous transfer
     * has run; b->index is not read after the call), that copy is
     * transferred on the same stream to where the generating kernel reads
     * it (CUDA: device memory outside the pool, 8 bytes a sample), then the
     * batch is generated. Inside a capture the transfer is captured: it
     * reads the slot's host-side copy as it is at each launch (synth_set),
     * so a capture bakes no index. A slot grows to the most samples it is
     * given, but not while a graph lives (capture_begin .. graph_destroy: a
     * graph holds its address; VD_EINTERNAL), and one capture may fill a
     * slot with one batch's indices only (VD_EINTERNAL otherwise).
     * NULL when the backend cannot (the caller's loader then makes the
     * batches on the host). */
    int (*fill_synthetic)(vd_backend *be, int stream, int slot, void *x, vd_dtype dt,
                          const vd_synth_batch *b, vd_err *e);
    /* Writes b->index (b->n of them) into synthetic slot `slot`'s host-side
     * copy for the launch of a graph that fills the slot (fill_synthetic
     * captured): after the slot's last transfer has run, outside a capture.
     * NULL with fill_synthetic. */
    int (*synth_set)(vd_backend *be, int slot, const vd_synth_batch *b, vd_err *e);

    /* Ops (all on the compute stream). */
    /* Whether this backend runs op `op` in math mode `math`. layer_setup asks
     * it for every layer and fails with VD_EUNSUPPORTED naming the layer. */
    bool (*supports_op)(vd_backend *be, vd_op op, vd_math math);
    int (*layer_setup)(vd_backend *be, const vd_net *net, int batch, vd_math math,
                       bool deterministic, vd_err *e);   /* descriptors, once */
    /* Algorithm options for layer i (conv: several; others: exactly one with
     * workspace 0). *opts points into backend-owned memory. */
    int (*layer_algos)(vd_backend *be, int layer, const vd_algo_opt **opts, int *n,
                       vd_err *e);
    /* vd_op_aux_bytes in both backends (one formula, the op table's). */
    uint64_t (*layer_aux_bytes)(const vd_net *net, int layer, int batch);
    int (*forward)(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io, vd_err *e);
    int (*backward)(vd_backend *be, const vd_net *net, int layer, const vd_op_io *io, vd_err *e);
    /* The step scalars (vd_step_scalars above) of the work issued after
     * this call, in stream order on the compute stream: s is written into
     * the backend's host-side copy (after the previous step_set's transfer
     * of it has run) and that copy is transferred to where the kernels read
     * it (CUDA: an async host-to-device copy into device memory outside the
     * pool, 40 bytes). Inside a capture the transfer is captured: it reads
     * the host-side copy as graph_launch leaves it. */
    int (*step_set)(vd_backend *be, const vd_step_scalars *s, vd_err *e);
    /* A table of update ranges (vd_update_range) kept by the backend (CUDA:
     * device memory outside the pool, 24 bytes a range) for update and
     * update_scaled: made once at setup, so that an update's arguments do
     * not change from step to step. *table stays valid until ranges_free. */
    int (*ranges_create)(vd_backend *be, const vd_update_range *r, int n, void **table,
                         vd_err *e);
    void (*ranges_free)(vd_backend *be, void *table);
    /* The optimizer's update (vd_optim_step above: its hyperparameters; lr
     * and t are the step scalars', the lr times each range's lr_mult) of
     * every range of table (ranges_create) in one launch: params from grads
     * and the state m (SGD's momentum buffer, AdamW's exp_avg) and v
     * (AdamW's exp_avg_sq; NULL for SGD), all indexed alike. Only trainable
     * ranges. */
    int (*update)(vd_backend *be, const vd_optim_step *o, float *params, const float *grads,
                  float *m, float *v, const void *table, vd_err *e);

    /* A captured iteration (NULL where the backend has none; the executor
     * then runs every step eagerly). capture_begin: the work issued on any
     * stream until capture_end is recorded, not run (CUDA: stream capture on
     * the compute stream, the copy streams forked from it at the start and
     * joined to it at the end, so the graph's end is the end of all of it).
     * No host wait (event_sync, synchronize, scale_get) may come in between.
     * capture_end hands back the graph. graph_launch: writes s into the
     * step scalars' host-side copy (as step_set does; the synthetic slots'
     * are the caller's to write first, synth_set) and runs the graph on
     * the compute stream, after all work issued before on every stream;
     * an event recorded inside the graph is then complete, for waits on it
     * issued after the launch, once the graph is. graph_destroy frees it. */
    int (*capture_begin)(vd_backend *be, vd_err *e);
    int (*capture_end)(vd_backend *be, void **graph, vd_err *e);
    int (*graph_launch)(vd_backend *be, void *graph, const vd_step_scalars *s, vd_err *e);
    void (*graph_destroy)(vd_backend *be, void *graph);

    /* Dynamic loss scaling (math fp16), PyTorch GradScaler's rule. The state
     * (vd_loss_scale) lives with the backend (CUDA: device memory, so that
     * no step waits for the host); all of these run in stream order on the
     * compute stream. An iteration is: the loss layer's backward scales its
     * dx (vd_op_io.loss_scaled); grad_check on every trainable range of the
     * gradients; update_scaled over the ranges' table; scale_update once. NULL in a
     * backend without fp16 (the executor then fails with VD_EUNSUPPORTED). */
    /* Sets the state (start, --resume); found_inf is cleared. */
    int (*scale_set)(vd_backend *be, const vd_loss_scale *s, vd_err *e);
    /* Reads the state (waits for the compute stream). The executor calls it
     * once per training step, right after the step's loss readback has
     * waited for the compute stream (vd_exec_train_step), so it adds no
     * wait of its own: keep it one small copy. Nothing else reads it. */
    int (*scale_get)(vd_backend *be, vd_loss_scale *s, vd_err *e);
    /* Marks found_inf when grads[offset, offset+count) holds an inf or NaN;
     * `layer` owns the range. The first such call of a run of skipped steps
     * (first_bad still -1) records `layer` in first_bad; later calls keep
     * it (scale_update resets it to -1 at a clean step). So first_bad names
     * where the run of overflows began. The executor checks the ranges in
     * backward order (the layer nearest the loss first: the one where the
     * overflow arose, since the layers after it in the backward pass get
     * its inf/NaN through dx). */
    int (*grad_check)(vd_backend *be, const float *grads, int64_t offset, int64_t count,
                      int layer, vd_err *e);
    /* update with the gradients unscaled (g / scale: g times the reciprocal
     * of the scale computed in double and rounded to float, as GradScaler's
     * unscale_) and nothing done when found_inf: a skipped step is no
     * update, so its caller does not count it (o->t stays the number of the
     * next update that runs, as torch's step count, which GradScaler's
     * skipped optimizer.step() does not advance). */
    int (*update_scaled)(vd_backend *be, const vd_optim_step *o, float *params,
                         const float *grads, float *m, float *v, const void *table, vd_err *e);
    /* The step's end: found_inf -> scale *= 0.5, growth = 0, skipped++,
     * streak++; else growth++, streak = 0, stepped = 1, first_bad = -1, and
     * scale *= 2 when growth reaches VD_LOSS_SCALE_INTERVAL (growth = 0;
     * the scale is kept where doubling it would overflow, as torch's).
     * found_inf is cleared. vd_loss_scale_step is the rule on the host. */
    int (*scale_update)(vd_backend *be, vd_err *e);
};

/* Bind a layer's parameter of role `role` (value p, gradient g or NULL)
 * into io; the executor and the profiler use it. */
static inline void vd_op_io_bind_param(vd_op_io *io, vd_param_role role, float *p, float *g) {
    switch (role) {
    case VD_ROLE_WEIGHT: case VD_ROLE_BN_SCALE: io->w = p; io->dw = g; break;
    case VD_ROLE_BIAS: case VD_ROLE_BN_SHIFT: io->b = p; io->db = g; break;
    case VD_ROLE_RUNNING_MEAN: io->rm = p; break;
    case VD_ROLE_RUNNING_VAR: io->rv = p; break;
    }
}

/* The backend that `name` names: "cpu", "cuda", or "auto" (cuda when this
 * build has it and a device is present, else cpu). Returns "cpu" or "cuda",
 * NULL for an unknown name; *why (may be NULL) says why auto chose what it
 * did, NULL for a name given outright. (backend.c) */
const char *vd_backend_resolve(const char *name, const char **why);
/* Create the backend vd_backend_resolve(name) names, on CUDA device `device`
 * with options o (NULL = the defaults; cpu takes no device and, of o, heeds
 * no_fuse alone). VD_EUSAGE for an
 * unknown name (the message lists the known ones), else as the
 * constructors below. (backend.c) */
int vd_backend_create(vd_backend **out, const char *name, int device, const vd_backend_opts *o,
                      vd_err *e);

/* Constructors. Return VD_EDEVICE / VD_EUNSUPPORTED when unavailable
 * (cuda in a CPU-only build: VD_EUNSUPPORTED with a message saying so). */
int vd_backend_cpu_create(vd_backend **out, vd_err *e);
/* The CPU oracle of a CUDA run whose convs fuse their bias (tests): in math
 * bf16 / fp16, conv layer l with once[l] adds its bias to the fp32 product
 * and rounds the sum once, as a CUDA conv whose cuDNN graph adds the bias
 * before its store (vd_cuda_conv_fused); the others round the product, add
 * the bias and round again, as a separate bias pass (the default; once
 * NULL restores it). Kept across layer_setup. VD_EINTERNAL when be is not
 * the CPU backend, VD_ENOMEM. */
int vd_backend_cpu_bias_rounding(vd_backend *be, int n_layers, const bool *once, vd_err *e);
int vd_backend_cuda_create(vd_backend **out, int device, vd_err *e);
/* Same with options (NULL = the defaults); be->opts = *o. */
int vd_backend_cuda_create_opts(vd_backend **out, int device, const vd_backend_opts *o,
                                vd_err *e);
/* True if this build has CUDA and a device is present. */
bool vd_backend_cuda_available(void);

/* Like vd_profile_analytic (profile/profile.h), but the algorithm options of
 * every layer (label, ids, workspace) and its saved-state bytes are be's
 * (be->layer_algos, be->layer_aux_bytes; option k > 0 is timed as 1.6x
 * option 0). be->layer_setup must already have run for (net, batch). Use
 * this when the plan will be executed on be. *out is owned by the caller
 * (vd_profile_free). (profile_backend.c) */
int vd_profile_backend(const vd_net *net, int batch, vd_backend *be,
                       const vd_device_params *dev, vd_profile *out, vd_err *e);

#endif
