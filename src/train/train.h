/* train.h — the training loop: data -> executor -> SGD, with LR policy,
 * periodic evaluation, checkpoints, and progress reports.
 *
 * Library code does not print: progress, evaluation results, saves and
 * notes are handed to a callback (the CLI formats them).
 *
 * Determinism: with the same seed, net, batch and data, a run is a pure
 * function of its iteration count. Parameters start from
 * vd_net_init_params(seed); the data order is a function of (seed, sample
 * counter) (data/data.h); dropout masks are vd_hash_uniform(seed, layer,
 * iter, i). So N iterations, save, resume, M more iterations produce the same
 * bytes as N+M iterations in one run (on a deterministic backend). */
#ifndef VD_TRAIN_H
#define VD_TRAIN_H

#include <signal.h>
#include <stdint.h>
#include <stdbool.h>
#include "util/util.h"
#include "net/net.h"
#include "data/data.h"
#include "exec/exec.h"
#include "train/ckpt.h"

typedef enum {
    VD_TEV_START,       /* training is about to start (iter = first iteration) */
    VD_TEV_PROGRESS,    /* every log_every iterations and after the last one */
    VD_TEV_EVAL,        /* an evaluation finished */
    VD_TEV_SAVE,        /* a checkpoint was written (path) */
    VD_TEV_NOTE,        /* informational message (msg) */
    VD_TEV_WARNING,     /* a warning (msg): the run goes on, but not as asked */
} vd_train_event_kind;

/* Where the training loop's time went, over some iterations (a progress
 * window or the whole run). wall_s is the loop's wall clock for those
 * iterations: waiting for data + training steps + the loop's own work;
 * saves and evaluations in between are not counted. So img_per_s is the
 * end-to-end rate a user sees, and step_s / iters the compute-only one. */
typedef struct vd_train_timing {
    int64_t iters;          /* training iterations counted */
    int64_t images;         /* iters * batch */
    double wall_s;          /* wall clock of those iterations (see above) */
    double wait_s;          /* in vd_loader_next: the loop waited for data (this
                               includes copying the batch into the input buffers;
                               synthetic data made on the device: only describing
                               it, the device's work is in the step) */
    double step_s;          /* in vd_exec_train_step: compute only */
    double img_per_s;       /* images / wall_s: end to end (0 when nothing ran) */
    double wait_per_iter_s; /* wait_s / iters */
    double step_per_iter_s; /* step_s / iters */
} vd_train_timing;

typedef struct vd_train_event {
    vd_train_event_kind kind;
    int64_t iter;           /* iterations completed so far */
    int64_t total;          /* iterations the run goes to */
    float loss;             /* PROGRESS: loss of the last iteration */
    double avg_loss;        /* PROGRESS: mean loss over the iterations since the last report */
    double train_acc;       /* PROGRESS: top-1 accuracy of the training batches since the
                               last report (vd_exec_train_correct: train mode) */
    int64_t epoch;          /* PROGRESS: the epoch (from 1) of the last sample trained on */
    int64_t epochs;         /* PROGRESS: the epoch the run's last sample falls in */
    double lr;              /* PROGRESS: learning rate of the last iteration */
    double img_per_s;       /* PROGRESS: end-to-end throughput since the last report
                               (== win.img_per_s) */
    vd_train_timing win;    /* PROGRESS: the iterations since the last report */
    double eta_s;           /* PROGRESS: estimated seconds to the end */
    bool loss_scaled;       /* PROGRESS: math fp16: the two fields below are set */
    double loss_scale;      /* PROGRESS: the loss scale after the last iteration */
    int64_t skipped;        /* PROGRESS: steps skipped (inf/NaN gradients) in the run
                               so far, a resumed run's earlier ones included */
    double eval_acc;        /* EVAL: top-1 accuracy in [0, 1] */
    double eval_acc5;       /* EVAL: top-5 accuracy in [0, 1] */
    double eval_loss;       /* EVAL: mean loss */
    int64_t eval_n;         /* EVAL: images evaluated */
    bool final;             /* PROGRESS/EVAL/SAVE at the end of the run */
    const char *path;       /* SAVE */
    const char *msg;        /* NOTE, WARNING */
} vd_train_event;

typedef void (*vd_train_cb)(const vd_train_event *ev, void *user);

typedef struct vd_train_opts {
    /* batch, lr, lr_policy, seed, the optimizer and its settings: from
     * net->train (the executor reads the optimizer's and the seed there too). */
    int64_t iters;          /* total iterations of the run (>= 0; 0 = only
                               evaluate, e.g. weights from --init); the LR
                               policy's max_iter; a resumed run continues
                               until it reaches this count */
    int64_t stop_at;        /* stop after this iteration count (0 = iters);
                               the LR policy still spans iters, so a run to
                               stop_at, saved and resumed up to iters, equals
                               one uninterrupted run */
    const char *save_path;  /* NULL: no checkpoint */
    int64_t save_every;     /* also save every N iterations (0 = only at the end) */
    int64_t keep;           /* > 0: those periodic saves go to numbered files
                               vd_ckpt_tagged(save_path, ITER) instead of
                               save_path, and only the keep newest of those this
                               run wrote are kept (train.c: rotate) */
    bool save_best;         /* after each evaluation that counts (below) with a
                               higher top-1 accuracy than every earlier one:
                               a checkpoint at vd_ckpt_tagged(save_path, "best") */
    int64_t early_stop;     /* > 0: end the run (saving as at its end) after this
                               many evaluations that count in a row without a
                               higher accuracy than the best (0: never).
                               Evaluations that count: the periodic ones and the
                               one after iteration iters (not the extra one
                               after stop_at, unless it is periodic) */
    vd_ckpt_dtype save_dtype;/* the saved model's weights: F32 (0) or BF16
                               (rounded; the optimizer state stays F32) */
    const char *resume_path;/* weights + optimizer state + iteration + data position */
    const char *init_path;  /* weights only */
    const char *init_skip;  /* with init_path: the tensors this pattern matches stay at
                               their initialisation (vd_ckpt_init_model); NULL: none */
    int64_t eval_every;     /* evaluate every N iterations (0 = only at the end) */
    bool eval_at_end;       /* evaluate after the last iteration */
    int64_t log_every;      /* progress every N iterations (> 0) */
    volatile sig_atomic_t *stop; /* optional: set (e.g. by SIGINT) to stop early;
                                    the run saves (if save_path) and returns */
    int loader_threads;     /* 0 = choose */
    const char *data_spec;  /* the data spec of ds, recorded in FILE.state so
                               that a resume can reuse it (NULL: none) */
    double val_split;       /* ds's --val-split (vd_data_hold_out), recorded with it
                               (0: none) */
    vd_train_cb cb;         /* may be NULL */
    void *user;
} vd_train_opts;

typedef struct vd_train_result {
    int64_t first_iter;     /* iteration the run started from (resume: > 0) */
    int64_t iters_done;     /* iteration count reached */
    float last_loss;
    double train_s;         /* wall time of the training loop */
    double mean_iter_s;     /* mean wall time of vd_exec_train_step, first
                               iteration of the run excluded when there are more,
                               and those that captured the iteration's graph
                               when others remain (compute only: data waits
                               excluded) */
    int64_t mean_iters;     /* the iterations mean_iter_s averages */
    vd_train_timing timing; /* all iterations of this run (the first included),
                               data waits included: the end-to-end figures */
    int loader_threads;     /* worker threads of the training data loader (0: synth_device) */
    bool synth_device;      /* synthetic data generated on the device (vd_exec_can_synth):
                               the loader only described the batches */
    double eval_acc, eval_acc5, eval_loss;
    int64_t eval_n;         /* 0: no evaluation ran */
    bool interrupted;       /* *stop was set */
    bool early_stopped;     /* early_stop ended the run at iters_done */
    vd_train_best best;     /* save_best / early_stop: the best evaluation (a
                               resumed run's earlier ones included) */
    bool loss_scaled;       /* math fp16: the two fields below are set */
    double loss_scale;      /* the loss scale at the end */
    int64_t skipped;        /* steps skipped in all (as vd_train_event.skipped) */
} vd_train_result;

/* Run the training loop on ex (created for net's plan at net->train.batch;
 * or a group of ranks, exec.h, each planned at net->train.batch / ranks:
 * the loader's global batches are split into their shards, in rank order;
 * a group that is one process's part of an MPI job, vd_exec_group_set_procs:
 * its loader makes only this process's shards, and only process 0 writes
 * checkpoints, while every process runs the same loop and evaluations).
 * Errors: VD_ENUMERIC when the loss becomes NaN/Inf (message names the
 * iteration and lr), VD_EDATA/VD_EIO from data and checkpoints, the
 * executor's errors. res may be NULL. */
int vd_train_run(const vd_net *net, vd_exec *ex, vd_dataset *ds, const vd_train_opts *o,
                 vd_train_result *res, vd_err *e);

/* An evaluation's result: top-1 and top-5 accuracy in [0, 1], the mean
 * loss, over n held-out images. */
typedef struct vd_eval_result {
    double acc, acc5, loss;
    int64_t n;              /* 0: the data set has no held-out images (the rest 0) */
} vd_eval_result;

/* Evaluate on the test split: every image, in order, in batches of the
 * net's batch size, the last one filled up with padding (its first images
 * again, not scored: vd_loader_cfg.pad) so that the executor runs whole
 * batches; so n = the split's size. stop (may be NULL): checked before
 * every batch; once set, VD_ESTOP. */
int vd_train_evaluate(const vd_net *net, vd_exec *ex, vd_dataset *ds, int threads,
                      const volatile sig_atomic_t *stop, vd_eval_result *r, vd_err *e);

#endif
