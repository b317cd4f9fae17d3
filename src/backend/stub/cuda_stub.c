/* cuda_stub.c — the CUDA backend in a build without CUDA: fails loudly. */
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

int vd_backend_cuda_create(vd_backend **out, int device, vd_err *e) {
    return vd_backend_cuda_create_opts(out, device, NULL, e);
}

int vd_backend_cuda_create_opts(vd_backend **out, int device, const vd_backend_opts *o,
                                vd_err *e) {
    (void)device;
    (void)o;
    *out = NULL;
    return vd_errf(e, VD_EUNSUPPORTED,
                   "this vdnn was built without CUDA (nvcc/cuDNN/cuBLAS not found at "
                   "configure time); rebuild with -Dcuda=enabled or use --backend cpu");
}

bool vd_backend_cuda_available(void) { return false; }

bool vd_cuda_relu_fused(vd_backend *be, int layer) {
    (void)be; (void)layer;
    return false;
}

bool vd_cuda_relu_bwd_fused(vd_backend *be, int layer) {
    (void)be; (void)layer;
    return false;
}

bool vd_cuda_relu_bias_fused(vd_backend *be, int layer) {
    (void)be; (void)layer;
    return false;
}

bool vd_cuda_conv_fused(vd_backend *be, int layer) {
    (void)be; (void)layer;
    return false;
}

int vd_cuda_mem_info(vd_backend *be, uint64_t *free_b, uint64_t *total_b, vd_err *e) {
    (void)be; (void)free_b; (void)total_b;
    return vd_errf(e, VD_EUNSUPPORTED, "device memory info needs the CUDA backend (CPU-only build)");
}

int vd_profile_measure(vd_backend *be, const vd_net *net, int batch, vd_profile *out, vd_err *e) {
    (void)be; (void)net; (void)batch; (void)out;
    return vd_errf(e, VD_EUNSUPPORTED,
                   "measuring a profile needs the CUDA backend (this build has none); "
                   "use an analytic profile (--analytic-profile, vdnn-plan --gpu-model) or a "
                   "saved one (--profile FILE)");
}
