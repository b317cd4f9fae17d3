/* train_job.h — one vdnn-train run as one library call.
 *
 * vd_train_job_run does what vdnn-train does between parsing its command
 * line and printing its report: load the spec, apply the flags over its
 * train: section and the defaults (vd_config_resolve; then the optimizer's
 * own flags, checked as torch.optim checks its arguments, and against
 * --resume's optimizer: VD_EUSAGE), open the data, check
 * that no output would overwrite an input, set up data parallelism, the
 * backend, the profile, the plan and the executor, and train. Everything
 * it made stays in the vd_train_job for the report (the session's memory
 * samples, the plan, the executor's statistics) until vd_train_job_close.
 * It prints nothing: notes, warnings and the training's events go to
 * hooks.event, the plan search's progress to hooks.planning's callback. */
#ifndef VD_TRAIN_JOB_H
#define VD_TRAIN_JOB_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "util/util.h"
#include "net/net.h"
#include "data/data.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "train/ckpt.h"
#include "train/dp.h"
#include "train/metrics.h"
#include "train/session.h"
#include "train/train.h"
#include "config/config.h"

/* What vdnn-train's command line gives (vdnn-train(1)); zeroed = nothing. */
typedef struct vd_train_job_opts {
    const char *spec;           /* NET.yaml */
    vd_config cfg;              /* the run's setup, shared with vdnn-plan and vdnn-bench */
    /* over the spec's train: section (the optimizer itself: cfg.optimizer) */
    bool has_lr, has_momentum, has_wd, has_seed;
    double lr, momentum, wd;
    uint64_t seed;
    bool nesterov;              /* --nesterov (SGD) */
    bool has_betas, has_eps;    /* --betas B1,B2 and --eps F (AdamW) */
    double beta1, beta2, eps;
    /* the run's length: --iters or --epochs, else the spec's, else one epoch */
    bool has_iters, has_epochs;
    int64_t iters, epochs;
    int64_t stop_at;            /* --stop-at: 0 = none */
    int64_t save_every;         /* --save-every: 0 = at the end only */
    int64_t keep;               /* --keep: numbered periodic saves, the K newest kept (0: none) */
    bool save_best;             /* --save-best */
    int64_t early_stop;         /* --early-stop: 0 = never */
    bool has_eval_every;        /* --eval-every N: N > 0 every N, -1 never (not at the end) */
    int64_t eval_every;
    bool has_log_every;         /* --log-every; else a twentieth of the run, at most 100 */
    int64_t log_every;
    int loader_threads;         /* --loader-threads: 0 = the loader's choice */
    const char *data, *save, *resume, *init, *plan_json, *metrics;
    const char *step_times_out; /* --step-times-out: the caller writes it after training;
                                   checked here as an output with the others */
    double val_split;           /* --val-split F: hold out F of a folder's train images
                                   (vd_data_hold_out); 0 = none */
    const char *init_skip;      /* --init-skip PATTERN (with init): left at initialisation */
    vd_ckpt_dtype save_dtype;
    bool augment, poison;
    bool mpi;                   /* --mpi: this process is one rank of an mpirun job */
    /* SIGINT and the like: every phase stops at its next check (VD_ESTOP) */
    volatile sig_atomic_t *stop;
} vd_train_job_opts;

typedef struct vd_train_job vd_train_job;

typedef struct vd_train_job_hooks {
    /* Every training event (train.h) and the job's own notes and warnings
     * (VD_TEV_NOTE, VD_TEV_WARNING); --mpi: rank 0's only. */
    vd_train_cb event;
    /* Right before each plan search: set po->progress (and its context). */
    void (*planning)(vd_plan_opts *po, void *ctx);
    /* The job is set up (session, plan, executor); training is next. */
    void (*ready)(const vd_train_job *j, void *ctx);
    void *ctx;                  /* handed to all three */
} vd_train_job_hooks;

struct vd_train_job {
    vd_world world;             /* --mpi: this process's rank (else rank 0 of 1) */
    vd_net net;
    vd_config_run run;          /* the resolved setup */
    vd_dataset *ds;
    const vd_data_info *data_info;
    int64_t iters;              /* the run's length */
    vd_session ses;             /* rank 0's */
    vd_plan plan;               /* rank 0's */
    vd_dp dp;                   /* data parallel (run.dp): the other ranks */
    vd_exec *ex;                /* rank 0's executor */
    vd_exec *grp;               /* data parallel: the group of every rank's; else NULL */
    vd_train_result res;        /* after a training run */
    /* private */
    bool have_ses, have_plan;
    vd_metrics *metrics;
    bool metrics_failed;
    const vd_train_job_hooks *hooks;
    char resume_data[sizeof ((vd_train_state *)0)->data];
    vd_train_state resume_st;   /* --resume: its state file's metadata */
};

/* Run o on *j (which it initializes) and report through hooks (NULL: none).
 * Returns 0 when training ran (j->res says how far: a stop signal ends it
 * early, after saving), else the error (VD_ESTOP: stopped before training);
 * --mpi on a rank > 0 stops after training, with nothing to report. Call
 * vd_train_job_close on *j in every case. */
int vd_train_job_run(vd_train_job *j, const vd_train_job_opts *o, const vd_train_job_hooks *hooks,
                     vd_err *e);
/* Free everything the job made (the other ranks first). Safe on a job that
 * failed anywhere. A warning about --metrics (its last records could not be
 * written) goes to the hooks. */
void vd_train_job_close(vd_train_job *j);

#endif
