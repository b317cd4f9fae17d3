/* metrics.h — vdnn-train --metrics FILE: one JSON object per line (JSON
 * Lines) for every progress report and every evaluation of the training
 * loop, each line written and flushed as it happens, so that a crash leaves
 * every line before it intact.
 *
 * Records (keys in this order; reals null when not finite):
 *   {"event": "progress", "iteration": N, "total": T, "epoch": P, "loss": L,
 *    "avg_loss": A, "train_accuracy": C, "lr": R, "images_per_s": S,
 *    "step_s": X, "data_wait_s": W, ["loss_scale": Y, "skipped_steps": K,]
 *    "elapsed_s": E}
 *   {"event": "eval", "iteration": N, "total": T, "accuracy": F,
 *    "top5_accuracy": F5, "eval_loss": L, "images": K, "final": B,
 *    "elapsed_s": E}
 * iteration counts completed iterations (as the progress lines do);
 * elapsed_s is the wall time since vd_metrics_open. To add a field, add it
 * to vd_train_event and to metrics_record in metrics.c. */
#ifndef VD_TRAIN_METRICS_H
#define VD_TRAIN_METRICS_H

#include "util/util.h"
#include "train/train.h"

typedef struct vd_metrics vd_metrics;

/* Create (or truncate) path for the records; a symlink is written through,
 * a device, FIFO or directory refused (vd_output_path). VD_EIO, VD_ENOMEM. */
int vd_metrics_open(vd_metrics **m, const char *path, vd_err *e);
/* Write ev's record when it is a PROGRESS or EVAL event (others: nothing);
 * the line is flushed before returning. VD_EIO when writing failed (later
 * calls then do nothing and return VD_EIO again), VD_ENOMEM. */
int vd_metrics_event(vd_metrics *m, const vd_train_event *ev, vd_err *e);
/* Close the file (NULL is fine) and clear *m. VD_EIO when closing failed. */
int vd_metrics_close(vd_metrics **m, vd_err *e);

#endif
