/* cpu_internal.h — pieces shared by the CPU reference backend's files.
 *
 * Not a public header: only src/backend/cpu/ includes it. The ops take the
 * same (net, layer, io) triple as vd_backend.forward/backward; shapes come
 * from net->layers[layer] (output) and vd_cpu_in_shape (inputs). */
#ifndef VD_CPU_INTERNAL_H
#define VD_CPU_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "backend/backend.h"

/* Conv algorithm indices (vd_op_io.algo and vd_algo_opt.*_algo). */
enum { VD_CPU_CONV_IM2COL = 0, VD_CPU_CONV_DIRECT = 1, VD_CPU_CONV_N_ALGOS = 2 };

/* Per-sample shape of an input or output: [c, h, w]. */
typedef struct vd_cpu_shape { int c, h, w; } vd_cpu_shape;

/* Shape of input k of layer `layer` (the net input when in[k] == -1). */
vd_cpu_shape vd_cpu_in_shape(const vd_net *net, int layer, int k);
/* c*h*w as int64. */
static inline int64_t vd_cpu_numel(vd_cpu_shape s) { return (int64_t)s.c * s.h * s.w; }

/* Check `layer`'s structure (op, input count, inputs earlier layers) and
 * that the output shape the net recorded is the one its op table entry's
 * infer computes from the layer's fields; VD_EINTERNAL naming the layer if
 * not (an infer error too). */
int vd_cpu_check_shape(const vd_net *net, int layer, vd_err *e);

/* Scratch bytes conv algorithm `algo` needs for `layer` (fwd and bwd max). */
uint64_t vd_cpu_conv_ws_bytes(const vd_net *net, int layer, int algo);

/* Row-major single-precision matrix product
 *   C[M,N] = op(A)[M,K] * op(B)[K,N] + (beta ? C : 0)
 * op(A) = A (lda >= K) or A^T (A stored [K,M], lda >= M); same for B.
 * beta is 0 (C is overwritten, its old contents — even NaN — ignored) or 1.
 * Uses OpenBLAS when VD_HAVE_BLAS, plain loops otherwise; deterministic for
 * a fixed OpenBLAS thread count. */
void vd_cpu_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                 const float *A, int64_t lda, const float *B, int64_t ldb,
                 int beta, float *C, int64_t ldc);

/* Ops. Forward or backward of one layer: (net, layer, io) as in
 * vd_backend.forward / backward; scratch holds the op's scratch_doubles
 * doubles (NULL when it has none). Return 0 or a VD_E* code with e filled. */
typedef int (*vd_cpu_op_fn)(const vd_net *net, int layer, const vd_op_io *io, double *scratch,
                            vd_err *e);
typedef struct vd_cpu_op {
    vd_cpu_op_fn fwd, bwd;
    size_t (*scratch_doubles)(const vd_net *net, int layer);  /* NULL: none */
} vd_cpu_op;
/* The dispatch array, indexed by vd_op (cpu_ops.c). An op without an entry
 * is one this backend does not support (layer_setup fails with
 * VD_EUNSUPPORTED). */
extern const vd_cpu_op vd_cpu_ops[VD_OP_COUNT];

/* Conv (cpu_conv.c). */
int vd_cpu_conv_forward(const vd_net *net, int layer, const vd_op_io *io, double *scratch,
                        vd_err *e);
int vd_cpu_conv_backward(const vd_net *net, int layer, const vd_op_io *io, double *scratch,
                         vd_err *e);

/* The batch norm + add fusion (vd_op_io.bn_aux): y = batch norm bn's output
 * of x (NCHW floats, n samples; y may be x) with statistics aux, gamma g and
 * beta b, in its forward's float line, rounded to store (not VD_DT_F32) as
 * the 16-bit path stores it. */
void vd_cpu_bn_apply(const vd_net *net, int bn, const float *x, float *y, int n,
                     const float *aux, const float *g, const float *b, vd_dtype store);
/* A conv's bias gradient: db[c] (beta: vd_cpu_put) = the sum over the n
 * samples and hw positions of channel c of the NCHW fp32 d, in double,
 * rounded to float once. The conv's backward (of its dy) and the ReLU's
 * that takes it (vd_op_io.bias_db, of its dx: the same values) both call
 * it, so the two give the same bits. */
void vd_cpu_bias_grad(const float *d, int64_t n, int64_t c, int64_t hw, float beta, float *db);

/* softmax_cross_entropy's backward with its gradient multiplied by scale
 * (math fp16's loss scaling, vd_op_io.loss_scaled; the table's backward is
 * scale 1). cpu_ops.c. */
int vd_cpu_xent_backward_scaled(const vd_net *net, int layer, const vd_op_io *io, float scale,
                                vd_err *e);

/* dx_beta helper: 0 overwrites (ignoring old contents, even NaN), 1 adds. */
static inline void vd_cpu_put(float *dst, float beta, float v) {
    *dst = beta != 0.0f ? *dst + v : v;
}

#endif
