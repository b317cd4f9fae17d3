/* exec.h — the executor: walks a plan on a backend.
 *
 * An executor has n >= 1 ranks, one per device (vd_exec_create: one; a
 * data-parallel group, vd_exec_group_create: n). Each rank owns its pool (one
 * region of exactly the plan's budget), the pinned host store for offloaded
 * tensors and the input batch, and the events the plan names. Nothing is
 * allocated inside vd_exec_train_step. */
#ifndef VD_EXEC_H
#define VD_EXEC_H

#include <stdint.h>
#include <stdbool.h>
#include "util/util.h"
#include "net/net.h"
#include "backend/backend.h"
#include "backend/allreduce.h"
#include "data/data.h"
#include "plan/plan.h"

typedef struct vd_exec vd_exec;

/* Whether mode (plan/plan.h's vd_graph_mode) asks for plan's training
 * iterations to be captured (vd_graph_captures). The executor captures
 * only where the step allows it too (vd_exec_opts.graph). */
bool vd_exec_graph_asked(vd_graph_mode mode, const struct vd_plan *plan);

typedef struct vd_exec_opts {
    bool poison;        /* NaN-fill regions on release and before prefetch lands */
    int fault;          /* test-only fault injection: VD_FAULT_* */
    bool sync_debug;    /* synchronize after each op (debugging) */
    vd_math math;       /* passed to be->layer_setup (default FP32) */
    bool deterministic; /* passed to be->layer_setup */
    bool layers_ready;  /* caller already ran be->layer_setup(net, batch, ...):
                           vd_exec_create then skips it */
    /* Optional (NULL = none): called once after the pinned host buffers
     * exist and before the pool is allocated (the session samples device
     * memory there), with before_pool_ctx. */
    void (*before_pool)(void *ctx);
    void *before_pool_ctx;
    /* Optional (NULL = none), for debugging: called after each step of a
     * training or evaluation pass has been issued (step == the plan's
     * n_steps: the SGD update / the end of an evaluation pass), with
     * after_step_ctx. The session's memory trace synchronizes there.
     * captured (at a training pass's end): the pass captured its CUDA graph
     * (graph), whose executable the driver keeps in device memory outside
     * the pool; false at every other call. */
    void (*after_step)(void *ctx, int step, bool eval, bool captured);
    void *after_step_ctx;
    /* Measure when each step of a training pass ends on the compute stream:
     * one more event per step, recorded after the step's actions (no
     * synchronization); read with vd_exec_step_times after the step. */
    bool step_times;
    /* Never generate synthetic input on the device (vd_exec_can_synth
     * false): the caller's loader makes it on the host, as other data (to
     * compare the two paths). */
    bool synth_host;
    /* Data parallel (NULL = a single rank, as before): this rank's handle on
     * the communicator. After the backward step that completes a gradient
     * bucket (plan.h vd_dp_layout at bucket_bytes, 0 = VD_DP_BUCKET_BYTES)
     * the bucket is averaged across the ranks (allreduce->average, on its
     * own stream under NCCL), and the SGD step first waits for all of them
     * (allreduce->wait). With one rank the averages keep every byte. */
    vd_allreduce *allreduce;
    uint64_t bucket_bytes;
    /* Capture the training iteration and replay it (be->capture_begin; the
     * CUDA graph of a step): steps that make the same host-side choices
     * replay one graph instead of issuing every operation, where the mode
     * asks for it (vd_exec_graph_asked; VD_GRAPH_AUTO is vdnn-train's and
     * vdnn-bench's default, --graph auto). Steps run eagerly where the
     * backend has no capture, and always with poison, fault, sync_debug,
     * step_times without event_mark, or allreduce (member.c's
     * graph_eligible). The results are the same bits either way. */
    vd_graph_mode graph;
    /* The rank (0 = the first): dropout masks of rank r > 0 use the seed
     * vd_exec_rank_seed(seed, r), so that the ranks' shards draw different
     * masks; rank 0 uses the run's seed (a single rank is unchanged). */
    int rank;
} vd_exec_opts;
/* SKIP_RECOMPUTE: RECOMPUTE actions are not run (their consumers read the
 * freed, possibly poisoned region). */
enum { VD_FAULT_NONE = 0, VD_FAULT_SKIP_PREFETCH_WAIT = 1, VD_FAULT_SKIP_OFFLOAD_WAIT = 2,
       VD_FAULT_SKIP_RECOMPUTE = 3 };

typedef struct vd_exec_stats {
    uint64_t pool_bytes;          /* the budget actually allocated */
    uint64_t pool_hwm;            /* max offset+size used (measured) */
    uint64_t live_peak;           /* max bytes live at once (measured) */
    uint64_t offload_bytes_iter;  /* D2H bytes per training iteration */
    uint64_t prefetch_bytes_iter; /* H2D bytes per training iteration (activations) */
    uint64_t host_store_bytes;    /* pinned host store size */
    double last_iter_s;           /* wall time of the last train step */
    uint64_t eval_live_peak;      /* same, measured during eval steps */
    uint64_t eval_pool_hwm;
    int64_t sgd_steps;            /* optimizer updates applied so far (SGD's or AdamW's) */
    int64_t train_steps, eval_steps; /* calls completed */
    int64_t recompute_ops_iter;   /* forward ops re-run per training iteration (measured) */
    int64_t staged_loads;         /* training steps that started from a staged batch */
    int64_t graph_launches;       /* training steps run by replaying a captured graph
                                     (vd_exec_opts.graph) */
    int64_t graph_captures;       /* training steps that captured their graph (then
                                     launched it): slower than a replay by the
                                     capture and the graph's instantiation */
} vd_exec_stats;

/* Create an executor for plan on be: a training plan (with its evaluation
 * plan, plan->eval), or a forward-only plan (vd_plan_opts.forward_only: an
 * inference executor, which evaluates only; no momentum, so vd_exec_set_state
 * and vd_exec_get_state take none, and vd_exec_train_step is VD_EINTERNAL).
 * The plan and net must outlive it.
 * Calls be->layer_setup(net, plan->batch, opts->math, opts->deterministic)
 * unless opts->layers_ready. opts may be NULL (all defaults). Checks that
 * the plan's algorithm choices, workspaces and aux sizes suit be (a plan made
 * from vd_profile_backend(be) always does); VD_EUNSUPPORTED otherwise.
 * opts->math must store feature maps as the plan does (net->train.math:
 * bf16 with bf16, fp16 with fp16, fp32 or tf32 with either); VD_EINTERNAL
 * otherwise.
 * Allocates, in this order: the pinned host buffers (the host store, the
 * input, loss and evaluation-output buffers), then, after calling
 * opts->before_pool, the pool (exactly plan->budget bytes), plan->n_events
 * events and the operand sets of the plan's RECOMPUTE actions. Uploads
 * nothing. */
int vd_exec_create(vd_exec **out, const vd_net *net, const struct vd_plan *plan,
                   vd_backend *be, const vd_exec_opts *opts, vd_err *e);
void vd_exec_destroy(vd_exec **ex);

/* Upload parameters (net->param_floats floats) and optionally the
 * optimizer's state (vd_net_state_floats(net) floats: SGD's momentum, or
 * AdamW's exp_avg then exp_avg_sq, each in the parameters' layout; NULL =
 * zero, and the next update is the optimizer's first). sgd_steps: the
 * updates that made the state (the next is update sgd_steps + 1: AdamW's
 * bias correction counts it; 0 = the next is the first). */
int vd_exec_set_state(vd_exec *ex, const float *params, const float *state,
                      int64_t sgd_steps, vd_err *e);
/* vd_exec_set_state(ex, params, NULL, 0, e) with the parameters of
 * vd_net_init_params(net, params, seed), without a host array of them: they
 * are made and uploaded 4 MiB at a time (vd_net_init_params_range; AlexNet:
 * 244 MB of host memory neither allocated nor written). */
int vd_exec_init_params(vd_exec *ex, uint64_t seed, vd_err *e);
/* Download parameters and the optimizer's state (as vd_exec_set_state;
 * either may be NULL). Synchronizes. */
int vd_exec_get_state(vd_exec *ex, float *params, float *state,
                      int64_t *sgd_steps, vd_err *e);

/* Math fp16's dynamic loss scaling (backend.h's vd_loss_scale). The run
 * stops (vd_exec_train_step: VD_ENUMERIC, naming the layer of first_bad)
 * after this many skipped steps in a row, or when the scale falls below
 * VD_LOSS_SCALE_MIN (2^-24, the smallest binary16 subnormal: a loss scaled
 * by less loses every gradient). */
#define VD_LOSS_SCALE_MAX_STREAK 50
#define VD_LOSS_SCALE_MIN 5.9604644775390625e-8f
/* The state as the last training step read it back (with the loss: no
 * synchronisation of its own), or as set; true in math fp16 (s may be NULL
 * to ask only that), false otherwise (*s then a fresh state). */
bool vd_exec_loss_scale(const vd_exec *ex, vd_loss_scale *s);
/* Set the state (--resume); found_inf is cleared, the next update is the
 * optimizer's first when !s->stepped. Synchronizes. VD_EINTERNAL outside math fp16. Call
 * after vd_exec_set_state, which starts a fresh state. */
int vd_exec_set_loss_scale(vd_exec *ex, const vd_loss_scale *s, vd_err *e);

/* Pinned host buffers for the next step's batch: x [batch*C*H*W], labels
 * [batch] (with input staging: the current pair, see below). x holds floats
 * (NCHW in math fp32, channels-last in tf32), or 16-bit elements (uint16_t,
 * channels-last) of vd_exec_input_dtype's type (math bf16, fp16). Asking for x means the caller writes it: the step
 * copies x from there (see vd_exec_input_synth). */
void *vd_exec_input_x(vd_exec *ex);
/* The element type of x: VD_DT_F32, or vd_math_act_dtype of the math. */
vd_dtype vd_exec_input_dtype(const vd_exec *ex);
/* Is x channels-last (vd_math_nhwc of the math: tf32's floats, bf16's and
 * fp16's 16-bit elements), else NCHW floats (fp32)? */
bool vd_exec_input_nhwc(const vd_exec *ex);
int32_t *vd_exec_input_labels(vd_exec *ex);

/* Input staging. When the plan stages (vd_exec_stages: the plan's t_stage
 * >= 0), a second, look-ahead pair of pinned buffers exists (NULL
 * otherwise). Protocol, per training step:
 *
 *     fill vd_exec_input_x/labels with batch i   (only when not staged, below)
 *     fill vd_exec_next_x/labels with batch i+1  (only when the next call
 *     vd_exec_next_ready(ex);                     will be a training step on it)
 *     vd_exec_train_step(ex, ...);                // trains batch i, uploads i+1
 *
 * After a step told vd_exec_next_ready, the pairs have swapped: the current
 * buffers (vd_exec_input_x/labels) hold batch i+1, already on the device;
 * do not change them (the labels and, under offload, x are still read from
 * there); the next training step starts from the device copy. The look-ahead
 * buffers may be written between steps only (a buffer is no longer read once
 * the step after the one that staged from it has returned). Without
 * vd_exec_next_ready the step stages nothing (the next one loads x from the
 * host, as without staging). An evaluation step, vd_exec_set_state or
 * vd_exec_drop_staged drops a staged batch: the next training step loads x
 * from the current buffers again (an evaluation step overwrites them with
 * its own batch: refill them). Results are byte-identical either way. */
bool vd_exec_stages(const vd_exec *ex);

/* Whether ex's training steps are captured (vd_exec_opts.graph, where the
 * steps allow it): each of a step's keys runs eagerly once, is captured the
 * next time (vd_exec_stats.graph_captures: a slower step) and replayed
 * after (graph_launches - graph_captures). */
bool vd_exec_captures(const vd_exec *ex);
void *vd_exec_next_x(vd_exec *ex);
int32_t *vd_exec_next_labels(vd_exec *ex);
/* The look-ahead buffers hold the next training step's batch: the coming
 * vd_exec_train_step stages it (no-op when the plan does not stage). */
void vd_exec_next_ready(vd_exec *ex);
/* Called by the executor for each rank (on the thread that runs the rank's
 * step: ex's rank `rank`) just before it uploads or generates that rank's
 * look-ahead batch of vd_exec_next_ready: a caller that fills the look-ahead
 * buffers on another thread, overlapping the step, waits there for them.
 * Returns 0 when the buffers are ready; anything else and the rank does not
 * stage (its next step loads its batch itself; the caller reports its own
 * error after the step). NULL (the default): the buffers were filled before
 * the step. */
typedef int (*vd_exec_stage_hook)(void *ctx, vd_exec *ex, int rank);
void vd_exec_set_stage_hook(vd_exec *ex, vd_exec_stage_hook fn, void *ctx);
/* The host waits until rank r's compute stream has run the work enqueued so
 * far; call on rank r's thread (a stage hook's rank). For a caller about to
 * block (a stage hook whose batch is not ready): the time spent here is the
 * device's work, the time blocked after it is the device waiting
 * (vdnn-train's "waiting for data"). */
int vd_exec_rank_drain(vd_exec *ex, int r, vd_err *e);
/* Forget a staged batch (e.g. the current buffers are to be refilled). */
void vd_exec_drop_staged(vd_exec *ex);

/* Synthetic input generated on the device. vd_exec_can_synth: the backend
 * has fill_synthetic (and not opts.synth_host). Then vd_exec_input_synth
 * (the current pair) and vd_exec_next_synth (the look-ahead pair; NULL when
 * the plan does not stage) return that pair's batch description, whose
 * index array holds batch entries, for the caller to fill
 * (vd_loader_next_synth); the pair's x is then generated on the device from
 * it (be->fill_synthetic, where it would have been copied from the pair's x
 * buffer), the labels still come from the pair's label buffer. Asking for
 * the pair's x buffer (vd_exec_input_x / vd_exec_next_x) returns it to
 * copying x from there. The descriptions move with the pairs and obey the
 * buffers' rules above. NULL when !vd_exec_can_synth. */
bool vd_exec_can_synth(const vd_exec *ex);
vd_synth_batch *vd_exec_input_synth(vd_exec *ex);
vd_synth_batch *vd_exec_next_synth(vd_exec *ex);

/* One training iteration on the batch in the input buffers: forward,
 * backward, the optimizer's update (net->train.optimizer) with learning
 * rate lr. *loss = mean cross-entropy. */
int vd_exec_train_step(vd_exec *ex, float lr, int64_t iter, float *loss, vd_err *e);
/* The top-1 hits of the last training step (all ranks): the samples whose
 * logits' argmax, the first of equal maxima, is the label (the loss
 * layer's count, train mode: dropout, batch statistics). 0 before any. */
int vd_exec_train_correct(const vd_exec *ex);

/* What an evaluation step scored. */
typedef struct vd_eval_counts {
    int scored;         /* samples scored: those before the padding */
    int top1, top5;     /* of them, those whose label is among the 1 / 5 classes of
                           highest probability (ties: the lower class first) */
    float loss;         /* their mean loss (0 when none) */
} vd_eval_counts;
/* Forward only (inference mode: BN running stats, no dropout) on the batch
 * in the input buffers. A batch may end in padding (the last batch of a
 * held-out split, filled up to the batch size): samples labelled
 * VD_LABEL_PAD (data/data.h), after every scored one, are computed but not
 * scored; their labels in the input buffers are overwritten (class 0). */
int vd_exec_eval_step(vd_exec *ex, vd_eval_counts *out, vd_err *e);
/* The output of the loss layer (the softmax of its input: each sample's
 * class probabilities) of the latest vd_exec_eval_step, as floats (math
 * bf16 / fp16: the 16-bit values it stored, widened exactly):
 * probs[batch * classes], sample-major, the ranks' shards in rank order. */
void vd_exec_eval_probs(const vd_exec *ex, float *probs);

void vd_exec_get_stats(const vd_exec *ex, vd_exec_stats *st);

/* opts.step_times: the latest training pass's measured end of each step on
 * the compute stream, in ms from just before its first step (end_ms[s] for
 * s < the plan's n_steps, the last the SGD update); the simulator's
 * counterpart is the plan's steps[s].t_end. Returns the count (the plan's
 * n_steps; 0 when off or before the first training step). */
int vd_exec_step_times(const vd_exec *ex, const double **end_ms);

/* opts.step_times: the copies of the latest training pass, in ms from the
 * same origin as vd_exec_step_times: each offload (D2H of tensor `tensor`,
 * interval -1) and each fill of an interval (H2D: prefetch, input, staging)
 * that pass issued, from when its stream began it (after the waits before
 * it) to its end. The simulator's counterparts: the tensor's
 * t_d2h_start / t_d2h_end, the interval's t_h2d_start / t_h2d_end. Returns
 * the count (0 when off or before the first training step). */
typedef struct vd_exec_copy_time {
    int tensor, interval;   /* plan indices; interval -1 for a D2H copy */
    bool h2d;
    double start_ms, end_ms;
} vd_exec_copy_time;
int vd_exec_copy_times(const vd_exec *ex, const vd_exec_copy_time **ct);

/* ---- data parallel: rank threads and executor groups ---------------------
 * A data-parallel run has one rank per device, all in this process: rank 0
 * is driven by the calling (main) thread, ranks 1..n-1 each by a thread of
 * a vd_ranks. A rank's backend, session, plan and executor are created,
 * used and destroyed on its own thread only (a CUDA backend's device is the
 * current device of the thread that created it). */
typedef struct vd_ranks vd_ranks;
/* n ranks: n - 1 worker threads (none for n == 1). VD_ENOMEM, VD_EINTERNAL
 * (no thread). */
int vd_ranks_create(vd_ranks **out, int n, vd_err *e);
int vd_ranks_count(const vd_ranks *rk);
/* Run fn(ctx, r, e_r) for every rank r at once, rank 0 on the calling
 * thread, and wait for all. When a rank fails, on_fail(ctx, r) (if not NULL)
 * runs once, at the first failure, on that rank's thread: it must release
 * the ranks that wait for the failed one (an all-reduce abort). Returns 0 or
 * the error of the rank that failed first (*e its message, prefixed with
 * "rank R" when n > 1). */
int vd_ranks_run(vd_ranks *rk, int (*fn)(void *ctx, int rank, vd_err *e),
                 void (*on_fail)(void *ctx, int rank), void *ctx, vd_err *e);
/* Stop and join the threads (no vd_ranks_run may be running); clears *rk. */
void vd_ranks_destroy(vd_ranks **rk);

/* Every executor has n >= 1 ranks, and every function above works on it
 * as on one executor of the global batch:
 *   vd_exec_train_step / vd_exec_eval_step   every rank at once, each on its
 *       thread; training: *loss = the mean of the ranks' losses (rank
 *       order), vd_exec_train_correct their hits' sum (a failed training
 *       step still sets *loss, NaN for a rank that failed before reading its
 *       loss); evaluation: the counts summed, the loss the ranks' means
 *       weighted by their scored samples
 *   vd_exec_set_state / vd_exec_init_params  every rank (same state)
 *   vd_exec_get_state, vd_exec_get_stats, vd_exec_step_times,
 *   vd_exec_copy_times, vd_exec_loss_scale, vd_exec_set_loss_scale,
 *   vd_exec_can_synth, vd_exec_input_* / vd_exec_next_*   rank 0's
 *   vd_exec_stages                           true when every rank stages
 *   vd_exec_next_ready, vd_exec_drop_staged,
 *   vd_exec_set_stage_hook                   every rank
 * and each rank's input buffers (its shard) are reached with
 * vd_exec_rank_input_x(ex, r) and the like. vd_exec_create makes an executor
 * of one rank, on the calling thread, that vd_exec_destroy destroys (call it
 * on the same thread).
 *
 * A group: the ranks of members[0..n) (n = vd_ranks_count(rk); each an
 * executor of one rank from vd_exec_create on rank r's thread, with
 * opts.allreduce = ar[r]; ar may be NULL, or hold NULL entries, for a group
 * without all-reduce), rank r run on rk's thread r. The group borrows them:
 * members, rk and ar must outlive it, vd_exec_destroy on the group frees the
 * group only, and each member is destroyed by its caller afterwards, on its
 * own rank's thread. VD_ENOMEM; VD_EINTERNAL when a member has several ranks
 * or the members' plans are not for one batch; VD_EUNSUPPORTED in math
 * fp16. */
int vd_exec_group_create(vd_exec **out, vd_ranks *rk, vd_exec *const *members,
                         vd_allreduce *const *ar, vd_err *e);
/* Ranks behind ex: 1 from vd_exec_create, n for a group. */
int vd_exec_ranks(const vd_exec *ex);
/* An executor that is one process's part of a run over `procs` processes
 * (vdnn-train --mpi: each process a group of its one executor): its ranks
 * are process `proc`'s, the global batch is shared by procs *
 * vd_exec_ranks(ex) ranks (process p's rank r is rank p * vd_exec_ranks + r;
 * its loader takes every procs-th shard, vd_loader_cfg.ranks), and the
 * losses and correct counts of every step are gathered from all processes
 * with gather (an all-gather of bytes, e.g. vd_mpi_allgather) and combined in
 * rank order as one process combines its ranks'. VD_EINTERNAL when proc is
 * not one of procs or gather is NULL; VD_ENOMEM. */
int vd_exec_group_set_procs(vd_exec *ex, int proc, int procs,
                            int (*gather)(const void *mine, void *all, size_t bytes, vd_err *e),
                            vd_err *e);
/* The processes of ex's run (1 unless vd_exec_group_set_procs) and this
 * process's number in *proc. */
int vd_exec_procs(const vd_exec *ex, int *proc);
/* Rank r's input buffers (r < vd_exec_ranks(ex); r = 0: the same as
 * vd_exec_input_x ...): the shard of the global batch that rank r
 * trains on, samples [r * B/n, (r + 1) * B/n) of each global batch of B. */
void *vd_exec_rank_input_x(vd_exec *ex, int r);
int32_t *vd_exec_rank_input_labels(vd_exec *ex, int r);
void *vd_exec_rank_next_x(vd_exec *ex, int r);
int32_t *vd_exec_rank_next_labels(vd_exec *ex, int r);
/* vd_exec_input_synth / vd_exec_next_synth of rank r (rank 0: those). */
vd_synth_batch *vd_exec_rank_input_synth(vd_exec *ex, int r);
vd_synth_batch *vd_exec_rank_next_synth(vd_exec *ex, int r);
/* The dropout seed of rank r (r == 0: seed itself). */
uint64_t vd_exec_rank_seed(uint64_t seed, int r);

#endif
