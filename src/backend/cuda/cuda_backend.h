/* cuda_backend.h — what the CUDA backend offers beyond backend.h.
 *
 * Plain C declarations, usable from C and C++. In a CPU-only build the same
 * functions are provided by src/backend/stub (they fail with VD_EUNSUPPORTED),
 * so callers need no #if. */
#ifndef VD_CUDA_BACKEND_H
#define VD_CUDA_BACKEND_H

#include <stdint.h>
#include "util/util.h"
#include "net/net.h"
#include "backend/backend.h"
#include "profile/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The process's real device memory as the driver sees it (cudaMemGetInfo on
 * be's device): *free_b and *total_b in bytes. This includes what lives
 * outside the pool (CUDA context, cuDNN/cuBLAS handles), so the CLI can print
 * it beside the pool's high-water mark. be may be NULL: then the current
 * device is asked (this creates the CUDA context if none exists yet).
 * Returns 0, VD_EDEVICE, or VD_EUNSUPPORTED (CPU-only build / cpu backend). */
int vd_cuda_mem_info(vd_backend *be, uint64_t *free_b, uint64_t *total_b, vd_err *e);

/* Measure a profile on the GPU: per layer and per algorithm option (in the
 * order layer_algos lists them, so algos[k] is option k), the median forward
 * and backward time over a few repetitions (CUDA events on the compute
 * stream), the workspace; the SGD step over all parameters; pinned-copy
 * bandwidths D2H, H2D and both directions at once (256 MiB transfers), and
 * the launch overhead.
 *
 * Preconditions: be is a CUDA backend on which layer_setup(net, batch, ...)
 * has been called (the math mode and determinism of that call are what is
 * measured). Takes its own scratch device memory (one cudaMalloc, freed
 * before returning) and pinned host memory: call it before the pool is
 * created, never during training. out is filled (out->layers is malloc'd,
 * release with vd_profile_free). Returns 0, VD_EDEVICE (incl. not enough free
 * device memory for the largest layer), VD_ENOMEM, VD_EUSAGE (not set up for
 * this net/batch) or VD_EUNSUPPORTED (CPU-only build). */
int vd_profile_measure(vd_backend *be, const vd_net *net, int batch, vd_profile *out,
                       vd_err *e);

/* Whether layer (a ReLU) runs fused into its producer's forward after the
 * last layer_setup: the ReLU runs in place after a conv whose every option
 * adds the bias in its forward (the direct kernel or a fused cuDNN graph),
 * after a batch norm in math bf16 / fp16 or after an add, and the backend
 * was not created with no_fuse (cuda_internal.h, cu_layer.relu_fused).
 * false for other layers, other backends, and in a CPU-only build. */
bool vd_cuda_relu_fused(vd_backend *be, int layer);
/* Whether layer (a ReLU) has its backward taken by the batch norm before it
 * (cu_layer.relu_bwd_fused: channels-last maps, not no_fuse): a no-op where the
 * plan gives it dx == dy. false as vd_cuda_relu_fused. */
bool vd_cuda_relu_bwd_fused(vd_backend *be, int layer);
/* Whether layer (a ReLU) takes the bias gradient of the conv before it in
 * its backward after the last layer_setup (cu_layer.bias_bwd: in place
 * after a conv with a bias, not no_fuse, and where setup timed the pair,
 * faster so). false as vd_cuda_relu_fused. */
bool vd_cuda_relu_bias_fused(vd_backend *be, int layer);
/* Whether conv layer's forward runs as one cuDNN graph with its bias (and a
 * following ReLU) fused after the last layer_setup (cuda_convgraph.h,
 * CG_EPI_*). false for other layers, other backends, a CPU-only build. */
bool vd_cuda_conv_fused(vd_backend *be, int layer);

#ifdef __cplusplus
}
#endif

#endif
