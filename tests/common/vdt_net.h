/* vdt_net.h — building small nets in tests, layer by layer through the
 * public vd_net interface (shared by the CPU op tests and the GPU tests). */
#ifndef VD_TESTS_COMMON_VDT_NET_H
#define VD_TESTS_COMMON_VDT_NET_H

#include <stdbool.h>
#include "data/synth.h"
#include "net/net.h"

/* vd_net_init, then name, input [c,h,w], classes 1 (vdt_finish sets it),
 * train.batch = batch. */
void vdt_net_begin(vd_net *net, const char *name, int c, int h, int w, int batch);
/* Adds l named "l<index>" (line index+1, col 1); fails the test on error.
 * Returns the new layer's index. */
int vdt_add(vd_net *net, vd_layer l);
/* Appends the softmax-xent loss reading `feeds` and finalizes, with classes
 * = numel of feeds' output: that is known only after shape inference, so a
 * first finalize infers the layers before the loss (and fails at the loss
 * when classes is wrong), the second one must pass. Fails the test on error. */
void vdt_finish(vd_net *net, int feeds);

/* *b (its index array kept: the executor's) as net's batch of n synthetic
 * samples first .. first + n - 1 of `split` with `seed`, net's classes, and
 * their labels into labels[n], as the synthetic data set labels them. */
void vdt_synth_batch(vd_synth_batch *b, int32_t *labels, const vd_net *net, uint64_t seed,
                     int split, int n, int64_t first);

/* Layer constructors (fields as in vd_layer; in = producing layer, -1 the
 * input). */
vd_layer vdt_conv(int in, int out, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                  int groups, bool bias);
vd_layer vdt_pool(int in, vd_pool_mode mode, int kh, int kw, int sh, int sw, int ph, int pw,
                  bool ceil_mode);
/* Adaptive pool to [oh, ow], or global (oh, ow ignored). */
vd_layer vdt_adaptive(int in, vd_pool_mode mode, int oh, int ow, bool global);
/* relu, flatten, batchnorm (eps 1e-5, momentum 0.1), dropout (p = 0.5), ... */
vd_layer vdt_simple(int in, vd_op op);
/* Layer with n inputs ins[0..n-1] (add, concat). */
vd_layer vdt_multi(vd_op op, int n, const int *ins);

#endif
