/* cuda_nccl.cu — the all-reduce of allreduce.h over NCCL (built when meson
 * finds nccl.h and libnccl; -Dnccl).
 *
 * One communicator of n ranks from ncclCommInitAll over the devices given
 * (one process; each rank's thread drives its own device). Per rank: a
 * non-blocking communication stream on its device and two events (no
 * timing). average: record `ready` on the backend's compute stream, make the
 * communication stream wait for it, ncclAllReduce(buf, buf, count,
 * ncclFloat, ncclSum) there and, with n > 1 ranks, a kernel multiplying by
 * 1/n after it; the compute stream runs on. wait: record `done` on the
 * communication stream, the compute stream waits for it. Re-recording an
 * event is safe: a wait captures the record before it.
 *
 * Sum then scale, as the CPU stand-in (not ncclAvg, which multiplies each
 * rank's values by 1/n before adding: the same for n a power of two, but
 * with one rank it would still run a kernel over the buffer). With one rank
 * NCCL's in-place sum does nothing: the buffer keeps its bytes. Between
 * ranks the order of the additions is NCCL's (ring or tree), so with n > 1
 * the result is the mean up to rounding, identical on every rank.
 *
 * Across processes (vdnn-train --mpi): vd_allreduce_nccl_create_rank makes
 * one rank's communicator with ncclCommInitRank from a unique id that
 * allreduce_mpi.c broadcast over MPI; average, wait and destroy are the
 * same. */
#include <stdio.h>
#include <string.h>
#include <nccl.h>
#include "backend/cuda/cuda_internal.h"

extern "C" {
#include "backend/allreduce.h"
}

/* The communicators of all ranks: destroyed together, by the last handle. */
typedef struct nccl_set {
    int n;
    ncclComm_t *comms;          /* [n] */
    int refs;                   /* handles not yet destroyed */
} nccl_set;

typedef struct nccl_rank {
    nccl_set *set;
    ncclComm_t comm;
    int device;
    cudaStream_t stream;        /* communication stream on device */
    cudaEvent_t ready, done;
} nccl_rank;

#define NCCL_CHECK(e, expr)                                                          \
    do {                                                                             \
        ncclResult_t st_ = (expr);                                                   \
        if (st_ != ncclSuccess)                                                      \
            return vd_errf((e), VD_EDEVICE, "NCCL error %s in %s at %s:%d: %s%s%s",   \
                           ncclGetErrorString(st_), __func__, __FILE__, __LINE__,     \
                           #expr, ncclGetLastError(NULL) ? ": " : "",                 \
                           ncclGetLastError(NULL) ? ncclGetLastError(NULL) : "");     \
    } while (0)

static __global__ void nccl_scale_kernel(float *x, int64_t n, float s) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

static int nccl_average(vd_allreduce *ar, vd_backend *be, float *buf, int64_t count, vd_err *e) {
    nccl_rank *k = (nccl_rank *)ar->ctx;
    cu_ctx *c = (cu_ctx *)be->ctx;
    if (count <= 0) return VD_OK;
    if (c->device != k->device)
        return vd_errf(e, VD_EINTERNAL, "NCCL rank %d is on device %d, its backend on %d",
                       ar->rank, k->device, c->device);
    CUDA_CHECK(e, cudaEventRecord(k->ready, cu_compute(c)));
    CUDA_CHECK(e, cudaStreamWaitEvent(k->stream, k->ready, 0));
    NCCL_CHECK(e, ncclAllReduce(buf, buf, (size_t)count, ncclFloat, ncclSum, k->comm, k->stream));
    if (ar->n_ranks > 1) {
        int64_t blocks = (count + 255) / 256;
        if (blocks > 4 * (int64_t)c->sm_count) blocks = 4 * (int64_t)c->sm_count;
        nccl_scale_kernel<<<(unsigned)blocks, 256, 0, k->stream>>>(buf, count, 1.0f / (float)ar->n_ranks);
        KERNEL_CHECK(e);
    }
    if (c->sync_debug) {
        CUDA_CHECK(e, cudaStreamSynchronize(k->stream));
        CUDA_CHECK(e, cudaGetLastError());
    }
    return VD_OK;
}

static int nccl_wait(vd_allreduce *ar, vd_backend *be, vd_err *e) {
    nccl_rank *k = (nccl_rank *)ar->ctx;
    cu_ctx *c = (cu_ctx *)be->ctx;
    CUDA_CHECK(e, cudaEventRecord(k->done, k->stream));
    CUDA_CHECK(e, cudaStreamWaitEvent(cu_compute(c), k->done, 0));
    return VD_OK;
}

static void nccl_abort(vd_allreduce *ar) { (void)ar; }

/* Destroying a communicator is an intra-node collective (NCCL finalizes it
 * with its peers): one thread finalizes all of them in one group, then
 * destroys each (a local operation once finalized). */
static void set_free(nccl_set *set) {
    ncclGroupStart();
    for (int r = 0; r < set->n; r++)
        if (set->comms[r]) ncclCommFinalize(set->comms[r]);
    ncclGroupEnd();
    for (int r = 0; r < set->n; r++)
        if (set->comms[r]) ncclCommDestroy(set->comms[r]);
    vd_free(set->comms);
    vd_free(set);
}

static void nccl_destroy(vd_allreduce *ar) {
    if (!ar) return;
    nccl_rank *k = (nccl_rank *)ar->ctx;
    if (k) {
        cudaSetDevice(k->device);
        if (k->stream) cudaStreamSynchronize(k->stream);
        if (k->ready) cudaEventDestroy(k->ready);
        if (k->done) cudaEventDestroy(k->done);
        if (k->stream) cudaStreamDestroy(k->stream);
        if (k->set && --k->set->refs == 0) set_free(k->set);
        vd_free(k);
    }
    vd_free(ar);
}

/* Streams and events of rank r on its device (current device restored by
 * the caller). */
static int rank_init(nccl_rank *k, vd_err *e) {
    CUDA_CHECK(e, cudaSetDevice(k->device));
    CUDA_CHECK(e, cudaStreamCreateWithFlags(&k->stream, cudaStreamNonBlocking));
    CUDA_CHECK(e, cudaEventCreateWithFlags(&k->ready, cudaEventDisableTiming));
    CUDA_CHECK(e, cudaEventCreateWithFlags(&k->done, cudaEventDisableTiming));
    return VD_OK;
}

/* Handle ar of rank `rank` of n over communicator comm of set (one more
 * reference to it) on device. */
static void bind(vd_allreduce *ar, nccl_rank *k, nccl_set *set, ncclComm_t comm, int device,
                 int rank, int n) {
    k->set = set;
    set->refs++;
    k->comm = comm;
    k->device = device;
    ar->name = "nccl";
    ar->rank = rank;
    ar->n_ranks = n;
    ar->ctx = k;
    ar->average = nccl_average;
    ar->wait = nccl_wait;
    ar->abort = nccl_abort;
    ar->destroy = nccl_destroy;
}

static int comm_init(ncclComm_t *comms, int n, const int *devices, vd_err *e) {
    NCCL_CHECK(e, ncclCommInitAll(comms, n, devices));
    return VD_OK;
}

static int comm_init_rank(ncclComm_t *comm, int n, ncclUniqueId id, int rank, vd_err *e) {
    NCCL_CHECK(e, ncclCommInitRank(comm, n, id, rank));
    return VD_OK;
}

extern "C" int vd_allreduce_nccl_create(vd_allreduce **out, int n, const int *devices, vd_err *e) {
    if (n < 1) return vd_errf(e, VD_EINTERNAL, "all-reduce: %d ranks", n);
    for (int r = 0; r < n; r++) out[r] = NULL;
    int ndev = 0, cur = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess) {
        cudaGetLastError();
        ndev = 0;
    }
    for (int r = 0; r < n; r++)
        if (devices[r] < 0 || devices[r] >= ndev)
            return vd_errf(e, VD_EDEVICE, "rank %d needs CUDA device %d, but this machine has "
                           "%d device%s (--gpus N uses devices --device .. --device + N - 1)",
                           r, devices[r], ndev, ndev == 1 ? "" : "s");
    cudaGetDevice(&cur);
    nccl_set *set = (nccl_set *)vd_calloc(1, sizeof *set, e);
    ncclComm_t *comms = set ? (ncclComm_t *)vd_calloc((size_t)n, sizeof *comms, e) : NULL;
    if (!comms) {
        vd_free(set);
        return VD_ENOMEM;
    }
    set->n = n;
    set->comms = comms;
    int rc = comm_init(comms, n, devices, e);
    if (rc) {
        for (int r = 0; r < n; r++) comms[r] = NULL;   /* none was made */
        set_free(set);
        cudaSetDevice(cur);
        return rc;
    }
    for (int r = 0; r < n && !rc; r++) {
        vd_allreduce *ar = (vd_allreduce *)vd_calloc(1, sizeof *ar, e);
        nccl_rank *k = ar ? (nccl_rank *)vd_calloc(1, sizeof *k, e) : NULL;
        if (!k) {
            vd_free(ar);
            rc = VD_ENOMEM;
            break;
        }
        bind(ar, k, set, comms[r], devices[r], r, n);
        out[r] = ar;
        rc = rank_init(k, e);
    }
    if (rc) {
        if (set->refs == 0) set_free(set);         /* no handle holds the communicators */
        vd_allreduce_destroy_all(out, n);           /* the last one frees them */
    }
    cudaSetDevice(cur);
    return rc;
}

static_assert(sizeof(ncclUniqueId) == VD_NCCL_ID_BYTES, "VD_NCCL_ID_BYTES is NCCL_UNIQUE_ID_BYTES");

extern "C" int vd_nccl_unique_id(unsigned char id[VD_NCCL_ID_BYTES], vd_err *e) {
    ncclUniqueId u;
    NCCL_CHECK(e, ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
    return VD_OK;
}

/* One process's rank of a communicator across processes (vdnn-train --mpi,
 * allreduce_mpi.c): a set of one communicator, the rest as above. */
extern "C" int vd_allreduce_nccl_create_rank(vd_allreduce **out, int rank, int n, int device,
                                             const unsigned char id[VD_NCCL_ID_BYTES], vd_err *e) {
    *out = NULL;
    int ndev = 0, cur = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess) {
        cudaGetLastError();
        ndev = 0;
    }
    if (device < 0 || device >= ndev)
        return vd_errf(e, VD_EDEVICE, "rank %d needs CUDA device %d, but its node has %d "
                       "device%s (--mpi: the node-local rank + --device)", rank, device, ndev,
                       ndev == 1 ? "" : "s");
    cudaGetDevice(&cur);
    vd_allreduce *ar = (vd_allreduce *)vd_calloc(1, sizeof *ar, e);
    nccl_rank *k = ar ? (nccl_rank *)vd_calloc(1, sizeof *k, e) : NULL;
    nccl_set *set = k ? (nccl_set *)vd_calloc(1, sizeof *set, e) : NULL;
    ncclComm_t *comms = set ? (ncclComm_t *)vd_calloc(1, sizeof *comms, e) : NULL;
    if (!comms) {
        vd_free(set);
        vd_free(k);
        vd_free(ar);
        return VD_ENOMEM;
    }
    set->n = 1;
    set->comms = comms;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    int rc = cudaSetDevice(device) == cudaSuccess ? VD_OK
             : vd_errf(e, VD_EDEVICE, "cudaSetDevice(%d) failed", device);
    if (!rc) rc = comm_init_rank(&comms[0], n, u, rank, e);
    if (rc) {
        comms[0] = NULL;
        set_free(set);
        vd_free(k);
        vd_free(ar);
        cudaSetDevice(cur);
        return rc;
    }
    bind(ar, k, set, comms[0], device, rank, n);   /* the set's only reference */
    rc = rank_init(k, e);
    if (rc) nccl_destroy(ar);
    else *out = ar;
    cudaSetDevice(cur);
    return rc;
}

extern "C" bool vd_allreduce_nccl_built(void) { return true; }
