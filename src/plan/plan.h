/* plan.h — schedule, liveness, profile, policies, placement, simulator.
 *
 * The plan is a value: vdnn-plan prints exactly the object vdnn-train runs.
 *
 * Steps: forward of layers 0..L-1 (steps 0..L-1), backward of layers L-1..0
 * (steps L..2L-1), then the SGD update (step 2L). Every device tensor has one
 * or two device intervals [first_step, last_step] (two when it is offloaded
 * during forward and prefetched back for backward, or recomputed), an offset
 * into the pool for each interval, and a size. Memory in use at step s is the
 * sum of sizes of intervals containing s; the pool high-water mark is
 * max(offset + size).
 *
 * Each feature map has a disposition: keep (resident from its producer to its
 * last reader), offload (D2H after its last forward write, region released,
 * H2D prefetch before its first backward reader) or recompute (region
 * released after its last forward reader, no copy; at the start of its first
 * backward reader's step the forward ops that wrote it -- the producer and the
 * in-place layers after it -- run again from sources resident then: kept,
 * prefetched, or recomputed at the same or an earlier step). A recompute reads
 * its sources at that step, so their liveness extends to it. Batch norm
 * re-runs with the batch statistics its forward saved (no new statistics,
 * no running-statistics update: vd_op_io.recompute); the loss is never
 * recomputed; dropout re-runs with the same hash mask (seed, layer,
 * iteration). Same algorithm, same inputs: the recomputed bytes equal the
 * originals.
 *
 * A forward-only plan (vd_plan_opts.forward_only: inference) has no backward
 * reader: a map it offloads is one whose forward readers leave a gap (a
 * residual block's input waiting for the add, an inception branch's output
 * waiting for the concat). It is copied D2H after its last write, its region
 * released after the read before the gap (the widest one after that write),
 * prefetched back during the forward pass and waited for before the reader
 * after it: the same actions, events and streams as training's offloads,
 * with vd_tensor.rd_before / rd_after naming the two reads. An add that is
 * not split writes its output over one of its inputs there when nothing
 * reads that input after it (the latest-produced such input): its step holds
 * the inputs and no third map (a residual block's add, ResNet's floor). The
 * backends' add reads each element of every input before it writes that
 * element of y, so y may be any x[k].
 *
 * Typical use (training loop):
 *
 *     vd_profile prof;  vd_profile_analytic(net, batch, &vd_device_cpu, &prof, &e);
 *                       // or vd_profile_backend(...) after be->layer_setup
 *     vd_plan_opts o;   vd_plan_opts_init(&o);
 *     o.batch = batch; o.policy = VD_POLICY_ALL; o.budget = bytes; // 0 = auto
 *     vd_plan plan;     vd_plan_build(net, &prof, &o, &plan, &e);
 *     vd_exec_create(&ex, net, &plan, be, &eopts, &e);  // exec/exec.h
 *     ...
 *     vd_exec_destroy(&ex); vd_plan_free(&plan); vd_profile_free(&prof);
 *
 * Per-step action lists (what the executor does and the simulator replays),
 * in this order at the start of step s:
 *   WAIT_OFFLOAD t   compute waits on t's D2H event (t's first interval ends at s-1)
 *   FREE iv          interval iv ended at s-1: its region may be reused now
 *                    (debug: poisoned on the compute stream)
 *   RECORD_FREE      compute records the "regions freed up to s" event (only
 *                    when a copy into a fresh region is issued at s)
 *   ALLOC iv         interval iv starts at s (region reserved)
 *   PREFETCH iv      H2D waits RECORD_FREE's event (and the D2H event of the
 *                    tensor's offload when it has one), [poisons the region],
 *                    copies host -> device, records the interval's H2D event
 *   WAIT_PREFETCH iv compute waits on iv's H2D event (iv's first reader is s)
 *   RECOMPUTE u      re-run unit u's forward (training mode, same algorithm,
 *                    workspace l's ws_rc) into its output's recomputed
 *                    interval; ascending unit order within a step
 *   COMPUTE          forward / backward / SGD of step s
 *   OFFLOAD t        after the producer step: compute records an event, D2H
 *                    waits on it, copies device -> host store, records t's D2H event
 *   LOAD_STAGED iv   (step 0, after the waits, before COMPUTE; only in a plan
 *                    with input staging) when this iteration's batch was staged
 *                    by the previous one: compute waits on the staging copy's
 *                    H2D event and copies the staging region into x's first
 *                    interval iv (device to device); x's own PREFETCH and
 *                    WAIT_PREFETCH at step 0 are then skipped. Otherwise a no-op
 *                    and x is loaded from the pinned input buffer as usual.
 *
 * Input staging: a training plan may carry one more tensor, "x:next" (kind
 * input, t_stage), the next iteration's batch. Its interval [stage_step,
 * n_steps - 1] is filled by an H2D copy (VD_FILL_STAGE, from the executor's
 * look-ahead input buffer) issued at stage_step, late in the backward pass;
 * its interval [0, 0], at the same offset, is the region the next iteration's
 * LOAD_STAGED reads. Both are ordinary intervals of the pool (placed, counted
 * in the memory per step), so nothing live from stage_step to the end of the
 * iteration or at step 0 overlaps the region. The planner adds it only when
 * it fits the budget without moving anything else (a plan with budget 0
 * keeps its own need: the region must fit below it) and makes the
 * iteration faster; stage_step is the latest step whose copy still ends
 * before the iteration does (no earlier than the last activation prefetch,
 * so it never queues ahead of one). vd_plan_opts.no_stage_input turns it off.
 * The simulator models the steady state (iteration >= 1): the staging copy
 * on the H2D stream, the device-to-device copy instead of x's load at step 0.
 * The final pseudo-step (index n_steps) holds the FREEs of intervals ending at
 * the last step; the executor runs it after the loss readback.
 *
 * Split layers (vd_plan_opts.chunks; docs/chunking.md): a run of consecutive
 * layers [a, b] may execute in k batch chunks, chunk c on samples
 * [floor(c*B/k), floor((c+1)*B/k)) of the batch B. The plan's
 * unit is then (layer, chunk): vd_plan.layers holds one entry per unit, the
 * run's units ordered chunk by chunk (for c: for l in a..b), and the steps
 * are the units' forwards, then their backwards in reverse (for c from k-1
 * down: for l from b down to a), then SGD: with U units, step s < U is the
 * forward of unit s, U <= s < 2U the backward of unit 2U-1-s. With nothing
 * split, unit i is layer i. Inside a run every unit's output and output
 * gradient is a tensor of its own chunk, kept, offloaded or recomputed on
 * its own; at the run's edges the tensors are the whole batch's (its input
 * and input gradient, its last layer's output and output gradient) and a
 * unit reads or writes its slice (vd_plan_operand). Parameter gradients of
 * a split layer add up over its chunks (dw_beta) in a fixed order; the
 * update follows its last chunk's backward. Batch norm and the loss are
 * never split (batch statistics, the loss's sum), but a forward-only plan
 * splits batch norm (its evaluation normalises each sample with the running
 * statistics: vd_op_chunkable). */
#ifndef VD_PLAN_H
#define VD_PLAN_H

#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>
#include "util/util.h"
#include "net/net.h"
#include "profile/profile.h"

/* none / all / conv / dyn: the vDNN paper's policies (offload only).
 * auto ("ours"): per feature map keep / offload / recompute and per conv and pass the
 * fastest or least-workspace algorithm, searched with the simulator for the
 * fastest predicted plan that fits the budget (auto.c,
 * vdnn-plan(1)). With budget 0 (auto budget) it is none. */
typedef enum { VD_POLICY_NONE, VD_POLICY_ALL, VD_POLICY_CONV, VD_POLICY_DYN,
               VD_POLICY_AUTO, VD_POLICY_COUNT } vd_policy;
const char *vd_policy_name(vd_policy p);
/* Parse "none" | "all" | "conv" | "dyn" | "auto". Returns 0 or VD_EUSAGE
 * (with a suggestion for near misses). */
int vd_policy_parse(const char *s, vd_policy *out, vd_err *e);

/* When prefetches are issued. AUTO: from the profile, latest issue step that
 * still hides the copy (H2D queueing included) within the budget. PAPER: the
 * vDNN paper's rule: at the backward step of layer l, prefetch every offloaded
 * tensor whose consumer lies between l-1 and the next conv layer below l. */
typedef enum { VD_PREFETCH_AUTO, VD_PREFETCH_PAPER, VD_PREFETCH_COUNT } vd_prefetch;
const char *vd_prefetch_name(vd_prefetch p);
int vd_prefetch_parse(const char *s, vd_prefetch *out, vd_err *e);

/* ---- schedule ----------------------------------------------------------- */

/* Step kinds. Step s: s < L forward of layer s; L <= s < 2L backward of layer
 * 2L-1-s; s == 2L SGD. */
typedef enum { VD_STEP_FWD, VD_STEP_BWD, VD_STEP_SGD, VD_STEP_END } vd_step_kind;

/* Which layers run in place (output aliases input 0): op table can_inplace,
 * the layer's backward reads neither its input nor (it's an alias) anything
 * overwritten, its input has exactly one consumer, is not the net input, and
 * the producer's backward does not read its output. Fills inplace[n_layers].
 * vd_schedule_inplace sets net->layers[i].inplace accordingly (call it once
 * after vd_net_finalize so that backends can see the flag; the plan computes
 * the same thing itself and never depends on the flag). */
void vd_schedule_inplace_flags(const vd_net *net, bool *inplace);
void vd_schedule_inplace(vd_net *net);

typedef enum {
    VD_T_PARAMS,     /* all parameters, flat (net->param_floats floats) — persistent */
    VD_T_OPTIM,      /* the optimizer's state (vd_net_state_floats floats: SGD's momentum,
                        AdamW's exp_avg then exp_avg_sq), same layout — persistent */
    VD_T_GRADS,      /* parameter gradients: all, same layout, persistent ("grads",
                        vd_plan_opts.grads_persistent); else one layer's, live in its
                        backward step only ("LAYER:dw", vd_plan_layer.dw) */
    VD_T_INPUT,      /* net input x [N, in_c, in_h, in_w] */
    VD_T_LABELS,     /* int32 [N] */
    VD_T_ACT,        /* a layer's output y [N, c, h, w] (in-place chains share one) */
    VD_T_DACT,       /* gradient of a layer's output dy [N, c, h, w] (an add and the
                        inputs whose gradient it passes on may share one) */
    VD_T_AUX,        /* per-layer saved state (backend->layer_aux_bytes) */
    VD_T_WS,         /* one step's conv workspace */
    VD_T_KIND_COUNT
} vd_tensor_kind;
const char *vd_tensor_kind_name(vd_tensor_kind k);

/* Where an interval's contents come from when it starts. */
typedef enum {
    VD_FILL_NONE,        /* written by compute */
    VD_FILL_INPUT_X,     /* H2D from the executor's pinned input x buffer */
    VD_FILL_LABELS,      /* H2D from the pinned labels buffer */
    VD_FILL_HOST_STORE,  /* H2D from the tensor's slot in the pinned host store */
    VD_FILL_STAGE,       /* input staging: H2D from the executor's look-ahead x
                            buffer (the next batch); need_step is n_steps (read
                            by the next iteration's LOAD_STAGED, no wait here) */
} vd_fill;

typedef struct vd_interval {
    int tensor;
    int first, last;            /* steps, inclusive */
    uint64_t offset;            /* bytes into the pool (256-aligned) */
    uint64_t bytes;             /* 256-aligned size */
    vd_fill fill;               /* != NONE: filled by an H2D copy at step first */
    int need_step;              /* fill: compute waits on the copy before this step */
    int ev_h2d;                 /* event recorded after that copy (-1 none) */
    double t_h2d_start, t_h2d_end; /* simulator: the fill copy (seconds) */
} vd_interval;

typedef struct vd_tensor {
    char name[VD_NAME_MAX + 16]; /* "x", "labels", "features.0:y", "features.0:dy", ... */
    vd_tensor_kind kind;
    int layer;                  /* owning/producing layer; -1 for x, labels, params;
                                   a shared gradient: the add it is named after */
    int unit;                   /* the unit (vd_plan.layers) of that layer that made it:
                                   its first writer (-1 with layer -1) */
    int samples;                /* a feature map (ACT, DACT, INPUT): the samples it holds,
                                   the batch, or a chunk's n (a chunk's own tensor); 0
                                   for the others */
    uint64_t bytes;             /* logical bytes */
    bool persistent;            /* lives for the whole iteration and across iterations */
    int prod_step;              /* first step that needs it resident (producer / fill) */
    int fwd_last;               /* last forward step reading it (-1 none) */
    int bwd_first, bwd_last;    /* backward steps reading it (-1 none) */
    /* offload (only if offload): */
    bool offload;
    bool host_src;              /* the host already holds it (input x): no D2H copy */
    int offload_step;           /* D2H issued right after this step (= producer step) */
    int release_step;           /* compute waits on the D2H event before this step */
    int prefetch_step;          /* H2D issued at the start of this step */
    uint64_t host_offset;       /* byte offset of its slot in the pinned host store */
    int ev_compute;             /* compute event after offload_step (-1 none) */
    int ev_d2h;                 /* D2H completion event (-1 none) */
    int rd_before, rd_after;    /* the reads around its absence: the last before (its
                                   region released after it: release_step > rd_before)
                                   and the first after (its prefetch's consumer, need_step
                                   of its second interval): fwd_last and bwd_first; in a
                                   forward-only plan two forward steps, set on every map
                                   it could offload, offloaded or not (-1: none) */
    int n_iv;
    int iv[2];                  /* interval indices: [0] first, [1] after prefetch
                                   or recompute */
    double t_d2h_start, t_d2h_end; /* simulator: the offload copy (seconds) */
    /* recompute (only if recompute; never together with offload): region
     * released at fwd_last + 1, re-produced at the start of recompute_step
     * (= bwd_first) by the RECOMPUTE actions of its writers */
    bool recompute;
    int recompute_step;         /* -1 none */
    double recompute_s;         /* profile time of its writers' recomputes (vd_plan_layer.rc_s) */
} vd_tensor;

/* Whether a plan stages the next batch, or why not. */
typedef enum {
    VD_STAGE_ON,         /* the plan has the staging copy */
    VD_STAGE_OFF,        /* vd_plan_opts.no_stage_input */
    VD_STAGE_NO_ROOM,    /* the staging region does not fit the budget */
    VD_STAGE_NO_GAIN,    /* it fits but would not make the iteration faster */
    VD_STAGE_NA,         /* forward-only or infeasible plan */
} vd_stage;
const char *vd_stage_name(vd_stage s);   /* "on", "off", "no room", "no gain", "n/a" */

/* Per-tensor disposition requested through vd_plan_opts.disp. */
typedef enum { VD_DISP_AUTO = 0, VD_DISP_KEEP, VD_DISP_OFFLOAD, VD_DISP_RECOMPUTE,
               VD_DISP_COUNT } vd_disp;

typedef enum {
    VD_A_WAIT_OFFLOAD, VD_A_FREE, VD_A_RECORD_FREE, VD_A_ALLOC, VD_A_PREFETCH,
    VD_A_WAIT_PREFETCH, VD_A_COMPUTE, VD_A_OFFLOAD, VD_A_RECOMPUTE,
    VD_A_LOAD_STAGED
} vd_action_kind;

typedef struct vd_action {
    vd_action_kind kind;
    int arg;                    /* WAIT_OFFLOAD/OFFLOAD: tensor; FREE/ALLOC/PREFETCH/
                                   WAIT_PREFETCH: interval; RECORD_FREE: event; COMPUTE: step;
                                   RECOMPUTE: unit; LOAD_STAGED: x's first interval */
} vd_action;

typedef struct vd_step {
    vd_step_kind kind;
    int layer;                  /* net layer; -1 for SGD / END */
    int unit;                   /* its unit (vd_plan.layers); -1 for SGD / END */
    int first_action, n_actions; /* range in plan->actions */
    int ev_free;                /* RECORD_FREE event at this step (-1 none) */
    uint64_t mem_in_use;        /* bytes of intervals containing this step */
    uint64_t mem_top;           /* max offset+size of intervals containing it */
    double compute_s;           /* profile time of the step's op */
    double recompute_s;         /* profile time of its RECOMPUTE actions (before the op) */
    /* filled by the simulator: */
    double t_start, t_end;      /* compute stream (the op itself), seconds from iteration start */
    double t_rc_start;          /* when its RECOMPUTE actions start (= t_start if none) */
    double stall_s;             /* compute waiting on copies before this step */
} vd_step;

/* Per layer: the tensors its ops touch, the chosen algorithms. A conv may
 * use different options for its forward (and recompute) and its backward
 * call: io->algo is algo_fwd for forward / recompute, algo_bwd for backward. */
typedef struct vd_plan_layer {
    int algo_fwd, algo_bwd;     /* options of the forward (and recompute) / backward call:
                                   indices into the profile's / backend's algo list */
    char algo_label[32];        /* the profile's label of algo_fwd */
    char algo_bwd_label[32];    /* the profile's label of algo_bwd */
    uint64_t ws_fwd_bytes, ws_bwd_bytes; /* workspace of each pass's option (bytes;
                                   ws_fwd_bytes also the recompute's) */
    bool inplace;               /* output aliases input 0 (a forward-only plan's add:
                                   the input vdp_add_inplace_input names, y == in_t[k]) */
    int in_t[VD_MAX_INPUTS];    /* tensor of input k (ACT or INPUT) */
    int y;                      /* ACT tensor of its output */
    int dy;                     /* DACT tensor of its output gradient (-1: loss layer).
                                   An add or in-place ReLU that writes an input's
                                   gradient first (safe cases, tensors.c alias_grads)
                                   shares its dy tensor with that input's producer */
    int dx[VD_MAX_INPUTS];      /* DACT tensor of input k's gradient (-1: net input, or
                                   an add's input whose gradient is the add's dy
                                   tensor: nothing to write; an in-place ReLU's may be
                                   its dy tensor: dx == dy, beta 0) */
    float dx_beta[VD_MAX_INPUTS]; /* 0 first backward writer, 1 later ones */
    int aux;                    /* AUX tensor (-1 none) */
    int ws_fwd, ws_bwd;         /* WS tensors of its two steps (-1 none) */
    int dw;                     /* the update in the backward pass (vd_plan.update_in_bwd):
                                   GRADS tensor of its parameters' gradients, live in
                                   its backward step, laid out as its parameters from
                                   float dw_base of the parameter array; -1 none */
    int64_t dw_base;
    int db_unit;                /* a ReLU whose backward may reduce the bias gradient of
                                   the conv right before it (vd_op_bias_taker, vd_op_io.
                                   bias_db): that conv's unit, both unchunked and adjacent
                                   (no backward between them writes the conv's gradient
                                   tensor); its dw is then live from this unit's backward
                                   step; -1 none */
    int bn_unit;                /* an add that applies a batch norm itself (the batch norm
                                   + add fusion, vd_plan_opts.fuse_bn_add): that batch
                                   norm's unit, which runs in place (inplace: its output
                                   tensor is its input's, never written: its forward
                                   computes the statistics alone, vd_op_io.bn_stats);
                                   this add reads its x (in_t), aux and parameters
                                   (vd_op_io.bn_aux) at its forward step; -1 none */
    bool takes_relu;            /* a max pool whose backward may take that of the in-place
                                   ReLU right before it (vd_op_pool_relu, vd_op_io.relu_dx):
                                   both unchunked and adjacent, the ReLU's dx its dy tensor
                                   (alias_grads), which this unit's dx is, beta 0; with
                                   the ReLU's db_unit that conv's dw is live from this
                                   unit's backward step (two before the conv's) */
    bool takes_add_relu;        /* a batch norm whose backward may take that of the ReLU
                                   after the add right after it (vd_op_add_relu,
                                   vd_op_io.relu_y), in a plan with vd_plan_opts.fuse_bn_add:
                                   the three unchunked and adjacent, the
                                   add's backward writing nothing (every input's gradient
                                   its dy tensor, alias_grads), the ReLU's dx its dy
                                   tensor, which is this unit's dy; this unit's backward
                                   step reads the ReLU's y (two steps after the ReLU's) */
    int rc_step;                /* step whose RECOMPUTE re-runs its forward (-1 none) */
    int ws_rc;                  /* WS tensor of that re-run (-1 none) */
    /* The unit: net layer `layer` on samples [n0, n0 + n) of the batch, chunk
     * `chunk` of n_chunks (1: the whole batch, chunk 0). See "Split layers"
     * above. */
    int layer, chunk, n_chunks, n0, n;
    float dw_beta;              /* 0: its backward overwrites the parameter gradients (the
                                   first of the layer's chunks in backward), 1: adds */
    bool update;                /* update_in_bwd: the layer's update follows this unit's
                                   backward (its last chunk there, chunk 0) */
    double fwd_s;               /* profile time of its forward option on its n samples */
    double rc_s;                /* profile time of a recompute of it (vd_profile_rc_s) on
                                   its n samples */
} vd_plan_layer;

/* Simulator result for a plan (seconds). */
typedef struct vd_sim_result {
    double iter_s;              /* predicted iteration time (all streams done) */
    double compute_s;           /* sum of op times (no stalls; the staged batch's copy at
                                   step 0 included) */
    double busy_s[3];           /* per stream (compute, d2h, h2d) busy time */
    double stall_s;             /* compute waiting on copies */
    double stage_load_s;        /* input staging: the device-to-device copy at step 0
                                   (0 without staging) */
} vd_sim_result;

/* How the executor runs a training iteration (vd_exec_opts.graph,
 * vd_plan_opts.graph): OFF issues every operation (0: opts that do not name
 * it run eagerly); ON captures it once and replays the CUDA graph; AUTO
 * (vdnn-train's default) captures plans that offload nothing. */
typedef enum { VD_GRAPH_OFF = 0, VD_GRAPH_ON = 1, VD_GRAPH_AUTO = 2 } vd_graph_mode;

/* Whether mode captures the iterations of a training plan that offloads
 * offload_bytes per iteration: ON always, AUTO where it offloads nothing (a
 * replayed iteration's copies run slower than the same copies issued one
 * by one, by more than the launches the replay saves:
 * docs/measurements.md). */
static inline bool vd_graph_captures(vd_graph_mode mode, uint64_t offload_bytes) {
    return mode == VD_GRAPH_ON || (mode == VD_GRAPH_AUTO && offload_bytes == 0);
}

typedef struct vd_plan_opts {
    int batch;                  /* required (> 0) */
    vd_policy policy;
    vd_prefetch prefetch;
    uint64_t budget;            /* pool bytes; 0 = auto (exactly the plan's need) */
    /* true: budget is only the cap the plan must fit under (vdnn-train's
     * default on CUDA, "all the device can give"); the plan's pool
     * (vd_plan.budget) is then what it needs, the larger high-water mark of
     * its training and evaluation placements, not the whole cap. */
    bool pool_to_need;
    int fixed_algo;             /* -1 = policy chooses (fastest except dyn);
                                   else every conv uses min(fixed_algo, n-1) */
    int *algos;                 /* optional [n_layers] explicit per-layer options
                                   (overrides fixed_algo/dyn search); NULL = none.
                                   With algos_bwd set: the forward options only */
    /* Forward steps only, no gradients: vd_plan_build makes an inference
     * plan (the executor's forward passes, vd_exec_eval_step; no
     * momentum region): each feature map freed after its last reader,
     * whatever opts->policy, each layer's fastest forward option, or its
     * least-workspace one when that does not fit (algos, fixed_algo,
     * prefetch, disp and the backward options ignored). With a budget, a
     * plan that does not fit whole splits its large layers in the fewest
     * batch chunks that fit (2, 4, 8, ..., the batch; without chunks
     * given), and offloads maps between their readers (plan.h, above)
     * where that fits with fewer chunks or is predicted faster
     * (plan.c, "inference's split layers and offloads"; vd_plan_min_budget
     * counts both). */
    bool forward_only;
    /* forward_only: never offload, only split (for comparisons: the floor
     * and plan that splitting alone gives). */
    bool no_offload;
    /* Optional [n_layers + 1] per feature map dispositions: [0] the net
     * input x, [i + 1] the output of layer i. An entry other than AUTO
     * overrides the policy for that tensor (auto keeps it fixed in its
     * search); AUTO lets the policy decide. Entries of in-place layers
     * (their output is their producer's tensor) must be AUTO. A request
     * that cannot be honoured falls back: RECOMPUTE of x, of a tensor written
     * by batch norm or the loss, or with no absent step, to offload, or keep
     * when that cannot be; OFFLOAD with fewer than two absent steps to keep.
     * NULL = none. */
    const vd_disp *disp;
    /* Optional [n_layers] explicit backward options (the forward ones
     * come from algos / fixed_algo / the policy). NULL = the backward call
     * uses the forward option, except under auto, which then searches both
     * passes (when algos and fixed_algo leave it free). */
    const int *algos_bwd;
    /* true = no input staging (the plan loads x at step 0 every
     * iteration); false (default) = stage the next batch when it fits and
     * pays. Ignored for forward-only plans. */
    bool no_stage_input;
    /* false (default): the SGD update of each layer's parameters runs in its
     * backward step, right after the op, and each layer's gradients live in
     * that step only (vd_plan_layer.dw): no gradient array stays on the device
     * (the weights a backward step updates are used by no later step of the
     * iteration, so the result is bit-identical). true: one persistent gradient
     * array, updated by the SGD step at the end, as data parallel needs (its
     * all-reduce averages the gradients between the backward pass and the
     * update). */
    bool grads_persistent;
    /* Optional: the auto search reports how it goes (the library prints
     * nothing): phase names what it is searching ("greedy, start 2 of 6",
     * "refine", "trades, layer 7 of 176", "kicks 12 of 60", ...), evals
     * the plans built so far, best_s the fastest fitting plan's predicted
     * iteration so far (0: none fits yet). Called at each phase and every
     * few builds; keep it cheap. The smallest-budget searches
     * (vd_plan_min_budget, and vd_plan_build's explanation of a budget
     * that does not fit) report each step of their search the same way,
     * with best_s -1 and evals the step ("searching the smallest budget
     * (policy all): step 5 of about 17"). NULL = none. */
    void (*progress)(void *ctx, const char *phase, int evals, double best_s);
    void *progress_ctx;
    /* Optional: once *stop is set (a stop signal), the auto search winds
     * down as when its effort is spent, and the smallest-budget searches
     * end with VD_ESTOP. NULL = never. */
    const volatile sig_atomic_t *stop;
    /* Optional [n_layers]: split layers (see "Split layers" above). Entry
     * i >= 2 runs layer i in that many batch chunks; a run goes on while the
     * next layer has the same count and reads only the layer before it,
     * which nothing else reads. 0 or 1: whole. vd_plan_chunks_check says
     * what may be split; vd_plan_chunks_all splits all it can. NULL =
     * nothing split. */
    const int *chunks;
    /* true: a training plan's add applies the batch norm before it
     * (vd_op_bn_folded: a batch norm's output that the add alone reads)
     * itself, where both are whole (not split in chunks): the batch norm's
     * output is never stored (vd_plan_layer.bn_unit). The CLI sets it
     * unless --no-fuse, in bf16, fp16 and tf32 (CUDA's fp32 batch norm is
     * cuDNN's, which has no statistics-only pass); the CPU backend runs it
     * in every math. false (zeroed): every batch norm writes its output. */
    bool fuse_bn_add;
    /* How the executor will run the plan (its vd_exec_opts.graph). The
     * search ranks plans as issued op by op; where the mode replays the
     * chosen plan's iteration and that plan offloads nothing (a replay
     * keeps the launches' savings there only), its prediction prices each
     * op's launch at the profile's graph_launch_s (vd_plan.captured; sim.c)
     * and vd_plan_copy_bound counts such plans too. OFF (zeroed): eager. */
    vd_graph_mode graph;
} vd_plan_opts;
void vd_plan_opts_init(vd_plan_opts *o);
/* Whether a training plan for net keeps one gradient array: when
 * o->grads_persistent, and always in math fp16, whose loss scaling checks
 * every gradient for inf/NaN before any update may run (backend.h's
 * grad_check): the planner counts the array's memory. Here, not in the
 * callers, so that vdnn-plan and vdnn-train plan the same. */
static inline bool vd_plan_grads_array(const vd_net *net, const vd_plan_opts *o) {
    return o->grads_persistent || net->train.math == VD_MATH_FP16;
}

/* A lower bound that also counts what must leave the device at the budget
 * (vd_plan_copy_bound). */
typedef struct vd_plan_bound {
    double bound_s;             /* the bound: no training plan at the budget is predicted
                                   faster (>= compute_s; INFINITY: none fits; 0: forward-only) */
    double compute_s;           /* compute only: vd_plan_lower_bound */
    double copies_s;            /* the copies' and recomputes' part (0: nothing must leave) */
    int copies_step;            /* the step whose absent maps give copies_s (-1 none) */
    uint64_t leave_bytes;       /* the most feature map bytes that must be absent at one step
                                   (offloaded or recomputed) */
    int leave_step;             /* that step (-1 none) */
} vd_plan_bound;

typedef struct vd_plan {
    char net[VD_NAME_MAX];
    vd_policy policy;           /* as requested (dyn stays dyn) */
    vd_policy offload_policy;   /* what decided the offloads (dyn: none/conv/all;
                                   auto: auto = its per-tensor search, or the
                                   paper policy of the fallback it chose) */
    vd_prefetch prefetch;
    int batch;
    int n_layers;
    int n_units;                /* units (vd_plan.layers): n_layers when nothing is split */
    int *first_unit;            /* [n_layers]: each layer's first unit (its chunk 0) */
    int n_steps;                /* 2U+1 for U units (forward_only: U) */
    bool forward_only;
    uint64_t budget;            /* pool size to allocate (= hwm when auto) */
    bool feasible;              /* hwm <= budget */
    uint64_t live_peak;         /* max over steps of bytes in use */
    int peak_step;
    uint64_t hwm;               /* max offset + size (placement) */
    double frag;                /* (hwm - live_peak) / hwm */
    uint64_t persistent_bytes;  /* params + optimizer state (+ grads) regions */
    bool update_in_bwd;         /* training plan without grads_persistent: each layer's
                                   update in its backward step (t_grads -1, the SGD
                                   step only counts the step) */
    uint64_t offload_bytes;     /* D2H bytes per iteration */
    uint64_t prefetch_bytes;    /* H2D bytes per iteration (activations, not x/labels) */
    uint64_t input_bytes;       /* H2D bytes of x and labels per iteration (x counted
                                   once: by its staging copy when the plan stages) */
    uint64_t host_bytes;        /* pinned host store */
    uint64_t recompute_bytes;   /* bytes of recomputed tensors per iteration */
    int n_recomputed;           /* recomputed tensors */
    int n_recompute_ops;        /* RECOMPUTE actions */
    double recompute_s;         /* their profile time per iteration */
    int n_events;
    int ev_end;                 /* compute event after the last step */
    int ev_loss;                /* D2H event after the loss readback */
    int loss_layer;             /* index of the softmax_xent layer (never split: its unit
                                   is n_units - 1) */
    int n_tensors; vd_tensor *tensors;       /* [n_tensors] */
    int n_intervals; vd_interval *intervals; /* [n_intervals] */
    int n_actions; vd_action *actions;       /* [n_actions] */
    vd_step *steps;             /* [n_steps + 1], the last is the END pseudo-step */
    vd_plan_layer *layers;      /* [n_units], one per unit (see "Split layers") */
    int t_params, t_grads, t_mom, t_x, t_labels; /* tensor indices (-1 none); t_mom: the
                                   optimizer's state (VD_T_OPTIM) */
    vd_sim_result sim;
    /* vd_plan_build's opts->graph (OFF in the plans the search builds), and
     * whether this plan runs replayed and offloads nothing (sim.c prices
     * each compute step's launch at the profile's graph_launch_s). */
    vd_graph_mode graph;
    bool captured;
    char note[512];             /* infeasibility explanation ("" when feasible) */
    double search_effort;       /* auto: the effort its search spent, in AUTO_EFFORT_CAP's
                                   units (counts, not clocks); 0 for the other policies */
    /* Input staging (see above): the tensor "x:next" and the step whose start
     * issues its H2D copy, or -1 / -1 when the plan has none (stage says why). */
    int t_stage, stage_step;
    vd_stage stage;
    /* The auto search's own builds: stage_step is the first step that the
     * issue-step search starts from (as fast as the latest, which is not
     * searched); the search rebuilds its plan with the step searched before
     * it returns it, and keeps this one only if that predicted slower (not
     * seen on the 72 points of issue 32's grid). */
    bool stage_quick;
    /* vd_plan_copy_bound at the budget, where the caller stored it for the
     * reports (vdnn-plan, vdnn-train --plan-json: the table's "lower bound"
     * line, the JSON's bound_s); all 0 otherwise (the planner never fills
     * it). */
    vd_plan_bound bound;
    struct vd_plan *eval;       /* forward-only plan sharing params/optimizer state
                                   offsets (NULL for a forward-only plan, which
                                   has no optimizer state: t_mom -1) */
    struct vd_dp_sim {          /* data parallel (vd_plan_dp); all 0 for one rank */
        int ranks;              /* ranks (GPUs); this plan is one rank's, at batch/ranks */
        int n_buckets, n_calls; /* gradient buckets; all-reduce calls (contiguous ranges) */
        uint64_t grad_bytes;    /* trainable gradient bytes all-reduced per iteration */
        double bw, lat_s;       /* bus bandwidth (bytes/s) and per-call latency used */
        double allreduce_s;     /* the all-reduces' time on the communication stream */
        double exposed_s;       /* how long the SGD step waits for the last one */
        double iter_s;          /* sim.iter_s + exposed_s: the predicted iteration */
    } dp;
} vd_plan;

/* Build the plan for net under profile prof and opts. On success *out is
 * owned by the caller (vd_plan_free). If the budget cannot be met the call
 * returns VD_EBUDGET with a message naming the step that does not fit, by
 * how much, and the smallest budget that would; *out is then still a valid,
 * infeasible plan (feasible = false) that the caller must free. Other errors
 * leave *out zeroed. The net must have exactly one softmax_xent layer, last. */
int vd_plan_build(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                  vd_plan *out, vd_err *e);
void vd_plan_free(vd_plan *p);

/* Smallest budget (bytes, 256-aligned) for which vd_plan_build succeeds with
 * opts (opts->budget ignored). Binary search over the budget. */
int vd_plan_min_budget(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       uint64_t *min_budget, vd_err *e);

/* vd_plan_min_budget of every policy: mins[VD_POLICY_COUNT], indexed by
 * policy (opts->policy and opts->budget ignored). The same numbers, in
 * about half the time: dyn's search starts from none's, conv's and all's,
 * and auto's from dyn's, which the separate calls search again. */
int vd_plan_min_budgets(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        uint64_t *mins, vd_err *e);

/* Whether vd_plan_build with opts would fit opts->budget (> 0), without
 * the whole search: the auto policy's search stops at its first plan that
 * fits (it fits exactly when the full search finds one), other policies
 * build once; then the evaluation placement, as vd_plan_build. *fits is
 * set; returns 0 (fitting or not) or an error other than VD_EBUDGET. */
int vd_plan_fits(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                 bool *fits, vd_err *e);

/* A lower bound on the predicted iteration (plan.sim.iter_s) of every
 * training plan of net and prof at pool budget `budget`: each pass's fastest
 * option whose workspace fits beside the persistent tensors and the pass's
 * own operands, summed with the SGD step (bound.c says why it holds). p: any
 * training plan of net and prof (its tensors' sizes are used). INFINITY when
 * some pass's operands alone exceed the budget; 0 for a forward-only plan. */
double vd_plan_lower_bound(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                           uint64_t budget);

/* A lower bound on the predicted iteration (plan.sim.iter_s) of every
 * training plan of net and prof at pool budget `budget` with p's gradient
 * mode (vd_plan.update_in_bwd), for any policy and prefetch mode: at each
 * step, the feature map bytes that must be absent there (what the step
 * needs beside them over the budget) are offloaded, their copies running
 * in the windows the simulator gives them, or recomputed; the cheapest
 * fractional way, against the compute of the passes around it (bound.c and
 * vdnn-plan(1), LOWER BOUND, say why it holds). p: any training plan of net
 * and prof (its tensors are used); budget 0: p's pool (p->budget, the plan's
 * own need under an auto budget). Fills *out (all 0 but the steps, -1, for
 * a forward-only plan). Returns 0 or VD_ENOMEM. */
int vd_plan_copy_bound(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                       uint64_t budget, vd_plan_bound *out, vd_err *e);

/* Whether chunks[n_layers] (vd_plan_opts.chunks) can be planned at batch:
 * each split layer chunkable (vd_op_info) and not the loss, at most batch
 * chunks, and no layer that runs in place (vd_schedule_inplace_flags) first
 * or last in its run (it shares its producer's tensor, and CUDA fuses a
 * ReLU into the convolution before it). VD_EUSAGE naming the layer and
 * why; NULL: 0. */
int vd_plan_chunks_check(const vd_net *net, int batch, const int *chunks, vd_err *e);
/* chunks[n_layers] splitting every layer it can in k chunks (k <= batch):
 * runs as long as they go, without a layer that runs in place at either
 * end; the others 1. VD_ENOMEM. */
int vd_plan_chunks_all(const vd_net *net, int batch, int k, int *chunks, vd_err *e);

/* Whether unit u's backward is run by the other unit of its fusion pair:
 * a ReLU whose max pool (the next unit's takes_relu) or whose batch norm
 * before its add (takes_add_relu two units before) takes its backward (its
 * own step then does nothing: vd_op_io.bwd_done). */
static inline bool vd_plan_unit_taken(const vd_plan *p, int u) {
    return (u + 1 < p->n_units && p->layers[u + 1].takes_relu) ||
           (u >= 2 && p->layers[u - 2].takes_add_relu);
}

/* The byte offset of unit u's operand t inside t's region: its slice, when u
 * is a chunk and t holds the whole batch (a run's edge); else 0. */
static inline uint64_t vd_plan_operand(const vd_plan *p, int u, int t) {
    const vd_plan_layer *pl = &p->layers[u];
    if (t < 0 || pl->n_chunks <= 1) return 0;
    const vd_tensor *T = &p->tensors[t];
    if (T->samples != p->batch) return 0;
    return (uint64_t)pl->n0 * (T->bytes / (uint64_t)p->batch);
}

/* Interval of tensor t that contains step s, or NULL if t is not resident. */
const vd_interval *vd_plan_resident(const vd_plan *p, int t, int step);
/* Which layers the plan splits (plan.h, "Split layers"): "none", or "12
 * layers in 8 batch chunks (features.0 .. features.16)". */
const char *vd_plan_split_summary(const vd_plan *p, const vd_net *net, char *buf, size_t n);
/* Unit u's name: its layer's, and for a chunk "features.2 ×8 #3" (chunk 3 of 8). */
const char *vd_plan_unit_name(const vd_plan *p, const vd_net *net, int u, char *buf, size_t n);
/* Human description of step s ("fwd features.0", "bwd loss", "sgd",
 * "fwd features.2 ×8 #3"). */
const char *vd_plan_step_label(const vd_plan *p, const vd_net *net, int s, char *buf, size_t n);

/* ---- reports (used by vdnn-plan) ---------------------------------------- */
/* Per-step table and summary. */
int vd_plan_write_table(FILE *f, const vd_plan *p, const vd_net *net, vd_err *e);
/* JSON object (keys: net, batch, policy, prefetch, budget, feasible,
 * peak_bytes, hwm_bytes, fragmentation, offload_bytes, prefetch_bytes,
 * host_bytes, recompute_bytes, recomputed_tensors, recompute_s,
 * predicted_iter_s, bound_s (where the caller stored p->bound), predicted,
 * input_staging, steps[...], tensors[...]).
 * min_budgets: [VD_POLICY_COUNT] or NULL; written as "min_budgets" when set. */
int vd_plan_write_json(FILE *f, const vd_plan *p, const vd_net *net,
                       const uint64_t *min_budgets, vd_err *e);
/* The object vd_plan_write_json writes, as jansson's json_t (util/json.h),
 * for a caller that adds keys before writing it; NULL when out of memory.
 * The caller owns it (json_decref). */
struct json_t *vd_plan_json(const vd_plan *p, const vd_net *net, const uint64_t *min_budgets);
/* Chrome trace event JSON (Perfetto): one track per stream, a memory counter;
 * recomputes are "recompute <layer>" slices on the compute track. */
int vd_plan_write_trace(const char *path, const vd_plan *p, const vd_net *net,
                        const vd_profile *prof, vd_err *e);

/* ---- data parallel (dp.c) ------------------------------------------------
 * With --gpus N each rank runs its own plan at batch/N; after the backward
 * step that completes a bucket, the executor averages the bucket's
 * gradients across the ranks (backend/allreduce.h). Buckets follow the
 * backward order: the trainable parameters of the layers whose backward
 * step has run are added until a bucket holds at least bucket_bytes, and the
 * last backward step with parameters closes the last bucket. A bucket is
 * averaged as its parameters' contiguous ranges of the gradient array (one
 * call each: parameters of adjacent layers merge; batch norm's running
 * statistics, which have no gradient, split them). A function of the net
 * and the step order alone, so every rank makes the same calls. */
#define VD_DP_BUCKET_BYTES ((uint64_t)25 << 20)   /* PyTorch DDP's default bucket */
typedef struct vd_dp_range { int64_t offset, count; } vd_dp_range;   /* floats */
typedef struct vd_dp_bucket {
    int step;                   /* the backward step after whose op it is averaged */
    int first_range, n_ranges;  /* in vd_dp_layout.ranges */
    uint64_t bytes;
} vd_dp_bucket;
typedef struct vd_dp_layout {
    int n_buckets; vd_dp_bucket *buckets;   /* in issue order */
    int n_ranges; vd_dp_range *ranges;
    uint64_t bytes;             /* all trained gradients (frozen parameters have none) */
} vd_dp_layout;
/* The buckets of plan p (a training plan of net) at bucket_bytes (0 =
 * VD_DP_BUCKET_BYTES). *out is the caller's (vd_dp_layout_free). VD_ENOMEM. */
int vd_dp_layout_build(const vd_net *net, const vd_plan *p, uint64_t bucket_bytes,
                       vd_dp_layout *out, vd_err *e);
void vd_dp_layout_free(vd_dp_layout *l);

/* The all-reduce's time on top of p's simulation, for `ranks` ranks:
 * fills p->dp (ranks <= 1: p->dp zeroed, nothing else changes). Ring
 * all-reduce: each call takes lat + 2 (N-1)/N * bytes / bw, with bw the
 * profile's device allreduce_bw (0: the H200 model's) and lat its
 * allreduce_lat_s (likewise). Calls run in issue order on one
 * communication stream, a bucket's no earlier than the end of its backward
 * step (p->steps[].t_end), so all but the tail overlap the rest of the
 * backward pass; the SGD step waits for the last: exposed_s = max(0, end of
 * the last call - the SGD step's start), iter_s = sim.iter_s + exposed_s.
 * Not modelled: the all-reduce kernels' use of the GPU's SMs and memory
 * bandwidth (they slow the overlapped compute a little). VD_ENOMEM. */
int vd_plan_dp(vd_plan *p, const vd_net *net, const vd_profile *prof, int ranks,
               uint64_t bucket_bytes, vd_err *e);

#endif
