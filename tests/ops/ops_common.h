/* ops_common.h — helpers for the CPU op tests: build a one-op net, hold
 * its buffers, run forward/backward, finite-difference gradient checks. */
#ifndef VD_TESTS_OPS_COMMON_H
#define VD_TESTS_OPS_COMMON_H

#include <check.h>
#include <stdint.h>
#include "backend/backend.h"
#include "net/net.h"
#include "vdt.h"
#include "vdt_net.h"

/* Nets are built with vdt_net.h (vdt_add, vdt_finish, vdt_conv, ...);
 * t_net_begin: input [c,h,w], batch 2, name "optest". */
void t_net_begin(vd_net *net, int c, int h, int w);
/* A net of layer l on an input [c,h,w] (t_net_begin's); returns l's index. */
int t_net_one(vd_net *net, int c, int h, int w, vd_layer l);
/* A net whose op `op` takes n_in inputs, each a 1x1 convolution of a
 * [2,3,4] input to chans[k] channels; returns the op's index. */
int t_net_multi(vd_net *net, vd_op op, int n_in, const int *chans);
/* Test t in a TCase of its own (vdt_case: CK_RUN_CASE=NAME runs one) with
 * the file's fixture. */
TCase *t_case(Suite *s, const TTest *t, void (*setup)(void), void (*teardown)(void));
/* Adaptive (not global) pool to [oh, ow]. */
vd_layer t_adaptive(int in, vd_pool_mode mode, int oh, int ow);

/* Everything one layer's forward/backward needs, host allocated (exact
 * sizes, so ASan catches overruns). */
typedef struct t_op {
    vd_backend *be;
    const vd_net *net;
    int layer, n;
    int n_in;
    int64_t xn[VD_MAX_INPUTS], yn, wn, bn, auxn;  /* element counts */
    float *x[VD_MAX_INPUTS], *y, *w, *b, *rm, *rv, *aux;
    float *dy, *dx[VD_MAX_INPUTS], *dw, *db;
    float *r;                  /* [yn] fixed random projection: L = sum r*y */
    int32_t *labels;           /* [n] */
    void *ws; uint64_t ws_bytes;
    vd_op_io io;               /* pointers above; edit training/algo/seed/iter as needed */
} t_op;

/* Allocates, fills x/w/b/r with U(-1,1) (seeded), rm=U(-.5,.5), rv=U(.5,1.5),
 * labels U{0..classes-1}, outputs NaN. Calls layer_setup. */
void t_op_init(t_op *t, vd_backend *be, const vd_net *net, int layer, int n, uint64_t seed);
void t_op_free(t_op *t);
void t_fwd(t_op *t);
/* dy = r; dx, dw, db NaN-filled first; dx_beta as currently in t->io. */
void t_bwd(t_op *t);
/* L = aux[0] for the loss layer, else sum_i r_i y_i, in double. Runs forward. */
double t_loss(t_op *t);

/* Compare the analytic gradient `ana` (count values) of tensor `v` with
 * central differences of t_loss (step h; the actually representable step is
 * used as denominator). Returns max|ana-num| / max(max|num|, max|ana|, 1e-6). */
double t_fd_err(t_op *t, float *v, const float *ana, int64_t count, float h);
/* Same comparison, numeric gradient precomputed. */
double t_cmp(const float *ana, const double *num, int64_t count);
/* Numeric gradient of v into num[count]. */
void t_fd(t_op *t, float *v, double *num, int64_t count, float h);

void t_fill_uniform(float *p, int64_t n, float lo, float hi, uint64_t seed);
/* Distinct values: a random permutation of {0..n-1} * step + lo. */
void t_fill_distinct(float *p, int64_t n, float lo, float step, uint64_t seed);
float *t_alloc(int64_t n);     /* n floats, NaN-filled; aborts the test on failure */
float *t_copy(const float *p, int64_t n);

#endif
