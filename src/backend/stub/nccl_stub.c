/* nccl_stub.c — the NCCL all-reduce in a build without NCCL: fails loudly. */
#include "backend/allreduce.h"

int vd_allreduce_nccl_create(vd_allreduce **out, int n, const int *devices, vd_err *e) {
    (void)devices;
    for (int r = 0; r < n; r++) out[r] = NULL;
    return vd_errf(e, VD_EUNSUPPORTED,
                   "data-parallel training on CUDA devices (--gpus N) needs NCCL, and this vdnn "
                   "was built without it (nccl.h and libnccl were not found under /usr/local/cuda "
                   "at configure time); install NCCL and rebuild with -Dnccl=enabled, or use "
                   "--backend cpu");
}

bool vd_allreduce_nccl_built(void) { return false; }
