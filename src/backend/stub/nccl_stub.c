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

int vd_nccl_unique_id(unsigned char id[VD_NCCL_ID_BYTES], vd_err *e) {
    (void)id;
    return vd_errf(e, VD_EUNSUPPORTED,
                   "vdnn-train --mpi on CUDA devices needs NCCL, and this vdnn was built without "
                   "it; install NCCL and rebuild with -Dnccl=enabled, or use --backend cpu");
}

int vd_allreduce_nccl_create_rank(vd_allreduce **out, int rank, int n, int device,
                                  const unsigned char id[VD_NCCL_ID_BYTES], vd_err *e) {
    (void)rank; (void)n; (void)device; (void)id;
    *out = NULL;
    return vd_nccl_unique_id(NULL, e);
}

bool vd_allreduce_nccl_built(void) { return false; }
