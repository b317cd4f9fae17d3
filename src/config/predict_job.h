/* predict_job.h — one vdnn-predict run as library calls: classify image
 * files, or every image of a data set's held-out split, with a trained net.
 *
 * vd_predict_job_open does what vdnn-predict does between parsing its
 * command line and classifying: load the spec, resolve the run's setup as
 * vdnn-train does (vd_config_resolve), load the weights and the class names,
 * open the data, check that --profile-out overwrites no input, set up the
 * backend and the profile (train/session.h), make the inference plan (a
 * forward-only plan: each feature map freed after its last reader, nothing
 * offloaded; a budget it does not fit is VD_EBUDGET naming the smallest
 * that does) and its executor. vd_predict_job_run then classifies every
 * image in batches (the last one padded: every image is scored) and hands
 * each image's result to a callback, in order. An image that cannot be
 * read or decoded is a result with its error; the others are still
 * classified. Nothing is printed. */
#ifndef VD_PREDICT_JOB_H
#define VD_PREDICT_JOB_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "util/util.h"
#include "net/net.h"
#include "data/data.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "train/ckpt.h"
#include "train/session.h"
#include "config/config.h"

/* What vdnn-predict's command line gives (vdnn-predict(1)). */
typedef struct vd_predict_opts {
    const char *spec;           /* NET.yaml */
    vd_config cfg;              /* batch, backend, math, budget, profile ...; the
                                   batch (--batch, else the spec's) is capped at the
                                   number of image files */
    const char *init;           /* the weights (safetensors) */
    const char *const *images;  /* [n_images] image files, or */
    int n_images;
    const char *data;           /* a data spec: its held-out split (vd_data_open) */
    const char *labels;         /* NULL, or a file of class names, one a line */
    int top_k;                  /* classes per result (>= 1; at most the net's) */
    int loader_threads;         /* data: 0 = the loader's choice */
    volatile sig_atomic_t *stop;/* set by a stop signal: the run ends at the next batch */
} vd_predict_opts;

/* One image's result. */
typedef struct vd_predict_result {
    const char *image;          /* image files: its path */
    int64_t index;              /* its position: in the list, or in the held-out split */
    int32_t label;              /* data: its true label (-1: unknown, it failed); -1 for
                                   image files */
    int rc;                     /* 0, or why it was not classified (VD_EDATA: cannot be
                                   decoded, VD_EIO: cannot be read) with error */
    const char *error;
    const float *probs;         /* rc 0: [classes] the softmax of the net's output */
    const int *top;             /* rc 0: [k] class indices, most probable first (ties:
                                   the lower index first) */
    int k;
} vd_predict_result;

typedef struct vd_predict_job vd_predict_job;

typedef struct vd_predict_hooks {
    void (*note)(const char *msg, bool warning, void *ctx);   /* notes and warnings */
    void (*planning)(vd_plan_opts *po, void *ctx);   /* right before the plan is made */
    void (*result)(const vd_predict_result *r, void *ctx);   /* each image, in order */
    void *ctx;
} vd_predict_hooks;

struct vd_predict_job {
    vd_net net;
    vd_config_run run;          /* the resolved setup (run.batch: images per pass) */
    vd_dataset *ds;             /* --data, else NULL */
    int64_t n_images;           /* to classify */
    int k;                      /* classes per result: min(top_k, net classes) */
    vd_session ses;
    vd_plan plan;               /* the inference plan */
    vd_exec *ex;
    /* after vd_predict_job_run */
    int64_t n_done, n_failed;   /* classified; not (read or decode errors) */
    int64_t hits1, hits_k;      /* data: true label first, among the top k */
    int first_rc;               /* the first failure's code (0: none) */
    /* private */
    const vd_predict_opts *o;
    const vd_predict_hooks *hooks;
    vd_ckpt_classes ckpt_names; /* recorded in --init */
    char **label_names;         /* --labels [net classes] */
    int n_label_names;
    bool have_ses, have_plan;
};

/* Set up o on *j (which it initializes; o and hooks must outlive it).
 * Errors: VD_EUSAGE (no --init, both or neither of images and data, an
 * empty held-out split, --labels whose count is not the net's classes, an
 * output over an input), the spec's, the checkpoint's (VD_EIO, VD_EDATA),
 * the data set's, the backend's, VD_EBUDGET (the forward pass does not fit
 * the budget: the message names the step and the smallest budget),
 * VD_ESTOP. Call vd_predict_job_close on *j in every case. */
int vd_predict_job_open(vd_predict_job *j, const vd_predict_opts *o,
                        const vd_predict_hooks *hooks, vd_err *e);
/* Classify every image, each result to hooks->result. Images that fail
 * are results with their error (counted in n_failed, first_rc); the
 * return is 0 then. Errors: the backend's, VD_ENOMEM, VD_ESTOP (a stop
 * signal: the images before the batch it came in are reported). */
int vd_predict_job_run(vd_predict_job *j, vd_err *e);
/* The name of class i: --labels, else the names --init records, else the
 * data set's; NULL when none is known. */
const char *vd_predict_class_name(const vd_predict_job *j, int i);
/* Free everything. Safe on a job that failed anywhere. */
void vd_predict_job_close(vd_predict_job *j);

/* The k largest of probs[0..n) into top[0..k), largest first, ties to the
 * lower index (k <= n). */
void vd_predict_topk(const float *probs, int n, int k, int *top);

#endif
