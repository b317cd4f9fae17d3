/* cuda_stub.c — the CUDA backend in a build without CUDA: fails loudly. */
#include "backend/backend.h"

int vd_backend_cuda_create(vd_backend **out, int device, vd_err *e) {
    (void)device;
    *out = NULL;
    return vd_errf(e, VD_EUNSUPPORTED,
                   "this vdnn was built without CUDA (nvcc/cuDNN/cuBLAS not found at "
                   "configure time); rebuild with -Dcuda=enabled or use --backend cpu");
}

bool vd_backend_cuda_available(void) { return false; }
