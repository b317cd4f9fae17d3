/* cuda_common.h — helpers for the GPU tests: build small nets, run one layer
 * on a backend through the public interface (pool, pinned staging, copies),
 * compare CUDA with the CPU reference.
 *
 * The tests run without fork (CUDA contexts do not survive fork) and exit 77
 * (meson: skipped) when no CUDA device is present. */
#ifndef VD_TESTS_CUDA_COMMON_H
#define VD_TESTS_CUDA_COMMON_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include "backend/backend.h"
#include "net/net.h"
#include "vdt_net.h"

/* Net building: vdt_net.h (vdt_add, vdt_finish, vdt_adaptive, ...), plus
 * name "cudatest" and square kernels/strides/padding/dilation here. */
void c_net_begin(vd_net *net, int c, int h, int w, int batch);
vd_layer c_conv(int in, int out, int k, int s, int p, int d, int groups, bool bias);
vd_layer c_pool(int in, vd_pool_mode mode, int k, int s, int p, bool ceil_mode);

/* Host data for one layer run: inputs are filled by c_run_init, outputs by
 * c_run. Param arrays use the layer's params in net order (weight, bias,
 * running_mean, running_var). */
typedef struct c_run_in {
    const vd_net *net;
    int layer, n;
    int64_t xn[VD_MAX_INPUTS], yn, pn, auxn;   /* element counts (batch included) */
    float *x[VD_MAX_INPUTS];   /* [xn[k]] */
    float *dy;                 /* [yn] */
    float *par;                /* [pn] */
    float *dx_init[VD_MAX_INPUTS]; /* [xn[k]]: dx before backward when dx_beta = 1 */
    int32_t *labels;           /* [n] */
} c_run_in;

typedef struct c_run_out {
    float *y, *aux, *dx[VD_MAX_INPUTS], *grad, *par;  /* par: after forward (running stats) */
    float *db;                 /* c_run_opts.bias_db: the conv's bias gradient written */
    float *dy;                 /* c_run_opts.relu_y: dy after the backward (rewritten) */
} c_run_out;

typedef struct c_run_opts {
    vd_math math;
    bool deterministic;
    bool training;
    bool backward;
    bool inplace;              /* y aliases x[0], dx[0] aliases dy (relu, dropout) */
    float dx_beta;             /* 0 or 1, all inputs */
    int algo;
    uint64_t seed;
    int64_t iter;
    bool loss_scaled;          /* vd_op_io.loss_scaled (math fp16): the backend's scale
                                  (set with scale_set beforehand) multiplies the loss's dx */
    const int *chunks;         /* NULL: one call on the whole batch; else the sizes of
                                  chunks of it (0-terminated, summing to n): forward chunk
                                  by chunk, then backward chunk by chunk, in order, with
                                  vd_op_io's n0 and n_batch, dw_beta 1 after the first */
    int setup_n;               /* layer_setup's batch (0: n); a chunk of this size runs
                                  the CUDA conv plans made at setup */
    int loss_n;                /* vd_op_io.loss_n: the loss counts the first loss_n (0: all) */
    bool no_dw;                /* backward without dw and db (frozen parameters), and for
                                  conv and fc without x, which only their dW reads (the
                                  gradient region stays as staged: NaN) */
    bool no_dx;                /* backward without dx (an input that needs no gradient;
                                  out->dx stays NaN) */
    int bias_db;               /* a ReLU's backward: vd_op_io.bias_db, a region of this many
                                  floats (its conv's channels; NaN before), out->db; 0 none */
    bool relu_dx;              /* a max pool's backward: vd_op_io.relu_dx (the backward of the
                                  in-place ReLU before it too; bias_db: with its conv's
                                  bias gradient) */
    const float *relu_y;       /* a batch norm's backward: vd_op_io.relu_y, these [yn]
                                  values (the ReLU after its add's output), staged as the
                                  maps are; out->dy; NULL none */
} c_run_opts;

/* Random inputs (U(-1,1); labels in range; BN running var in [0.5, 1.5]).
 * zeros_frac > 0 sets that fraction of x to exactly 0 (ties for max pool). */
void c_run_init(c_run_in *in, const vd_net *net, int layer, int n, uint64_t seed, float zeros_frac);
void c_run_in_free(c_run_in *in);
void c_run_out_free(c_run_out *out);
/* Run forward (and backward) of in->layer on be; outputs malloc'd in out.
 * Fails the test (ck_assert) on any backend error. Returns the number of
 * algorithm options be lists for the layer. */
int c_run(vd_backend *be, const c_run_in *in, const c_run_opts *o, c_run_out *out);

/* IEEE binary16 bits of f, rounded to nearest even (overflow to inf, NaN
 * kept quiet): what __float2half_rn gives for every number (its NaN is one
 * canonical pattern); the test's own reference, independent of util.h's
 * vd_f32_to_f16 and of the backends. Back: vd_f16_to_f32 (util.h). */
uint16_t c_f32_to_f16(float f);

/* max|a-b| / max(max|b|, 1e-6); NaN anywhere in a or b gives +inf unless
 * both are NaN at the same index. */
double c_nerr(const float *a, const float *b, int64_t n);

vd_backend *c_cpu(void);
vd_backend *c_cuda(void);
/* Make c_cpu() the oracle of c_cuda()'s last layer_setup of net: in math
 * bf16 / fp16 a conv whose cuDNN graph adds its bias before its one store
 * (vd_cuda_conv_fused) rounds its output once on the CPU too
 * (vd_backend_cpu_bias_rounding). NULL: back to the default (twice). Call
 * it after the CUDA run the CPU's is compared to. */
void c_cpu_like_cuda(const vd_net *net);
/* Common main: skip (77) without a device, run the suite without fork. */
int c_main(Suite *s);

#endif
