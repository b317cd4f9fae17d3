/* lr.h — learning-rate policies (vd_lr_policy in net/net.h).
 *
 * iter is the 0-based index of the training iteration about to run and
 * max_iter the run's total number of iterations (--iters, or derived from
 * --epochs). With base learning rate lr:
 *   fixed      lr
 *   step       lr * gamma^floor(iter / step)
 *   multistep  lr * gamma^k, k = number of milestones m with iter >= m
 *   poly       lr * (1 - iter/max_iter)^power            (Caffe; 0 past the end)
 *   cosine     min_lr + (lr - min_lr) * (1 + cos(pi * iter/max_iter)) / 2
 *              (min_lr past the end)
 * Linear warm-up (warmup = W > 0): for iter < W the value above is
 * multiplied by (iter + 1) / W. */
#ifndef VD_LR_H
#define VD_LR_H

#include <stdint.h>
#include "util/util.h"
#include "net/net.h"

/* The learning rate for iteration iter (computed in double). */
double vd_lr_at(const vd_lr_policy *p, double lr, int64_t iter, int64_t max_iter);

/* Check a policy's parameters (step > 0, milestones increasing, power >= 0,
 * warmup >= 0, ...). VD_EUSAGE with a message naming the bad field. */
int vd_lr_validate(const vd_lr_policy *p, double lr, vd_err *e);

/* "fixed" | "step" | "multistep" | "poly" | "cosine" */
const char *vd_lr_policy_name(const vd_lr_policy *p);

#endif
