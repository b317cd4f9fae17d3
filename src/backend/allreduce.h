/* allreduce.h — gradient averaging across the ranks of a data-parallel run.
 *
 * A communicator joins n ranks; each rank holds one vd_allreduce handle and
 * calls it from the one thread that drives its backend. Every rank must make
 * the same calls in the same order with the same counts (the executor's
 * buckets, plan/plan.h vd_dp_layout, are a function of the net alone).
 *
 * average(buf, count): buf[0..count) (floats in be's pool) becomes the mean
 * over the ranks of their buf: the sum in rank order 0, 1, ..., n-1, then
 * scaled by 1/n. With n == 1 the buffer keeps its bytes (x * 1.0f == x), so
 * a single-rank run through this path equals one without it. Issued after
 * the work on be's compute stream so far:
 *   cpu   at once, on the calling thread (the CPU backend's compute has
 *         already run): a barrier, each rank sums a fixed slice of the
 *         elements over all ranks' buffers (so the result does not depend on
 *         thread timing), a second barrier. Ranks are threads of one process.
 *   nccl  asynchronously on the rank's own communication stream, which first
 *         waits for an event recorded on the compute stream:
 *         ncclAllReduce(ncclSum) in place, then (n > 1) a kernel scaling
 *         by 1/n. The compute stream goes on with the rest of the backward
 *         pass meanwhile. With one rank nothing runs on the device.
 * wait(): be's compute stream waits for every average issued so far (nccl:
 * an event on the communication stream; cpu: nothing to wait for).
 * abort(): after a failure on this rank, release the ranks blocked in the
 * cpu stand-in's barriers (their average returns VD_EINTERNAL "another rank
 * failed"); may be called from any thread. nccl: nothing (an NCCL kernel
 * already waiting for a failed peer is NCCL's to time out).
 * destroy(): frees this rank's handle; the last one frees the communicator.
 * Call it only when no rank is inside average. */
#ifndef VD_ALLREDUCE_H
#define VD_ALLREDUCE_H

#include <stdbool.h>
#include <stdint.h>
#include "util/util.h"
#include "backend/backend.h"

typedef struct vd_allreduce vd_allreduce;
struct vd_allreduce {
    const char *name;           /* "cpu" | "nccl" */
    int rank, n_ranks;
    void *ctx;                  /* the implementation's */
    int (*average)(vd_allreduce *ar, vd_backend *be, float *buf, int64_t count, vd_err *e);
    int (*wait)(vd_allreduce *ar, vd_backend *be, vd_err *e);
    void (*abort)(vd_allreduce *ar);
    void (*destroy)(vd_allreduce *ar);
};

/* n handles (out[0..n)) for ranks on the backend vd_backend_resolve(backend)
 * names: NCCL over CUDA devices devices[0..n) for cuda, the CPU stand-in
 * for cpu (devices unused). As the two constructors below; VD_EUSAGE for an
 * unknown backend. (backend.c) */
int vd_allreduce_create(vd_allreduce **out, int n, const char *backend, const int *devices,
                        vd_err *e);

/* The CPU stand-in: n handles (out[0..n)) on one communicator of threads.
 * For the CPU backend and the tests. VD_ENOMEM. */
int vd_allreduce_cpu_create(vd_allreduce **out, int n, vd_err *e);

/* NCCL: n handles (out[0..n)) on one communicator over the CUDA devices
 * devices[0..n) (ncclCommInitAll), each with its own communication stream.
 * Rank r's handle must be used with the CUDA backend on devices[r].
 * VD_EUNSUPPORTED in a build without NCCL (message names NCCL and how to get
 * it), VD_EDEVICE on a CUDA or NCCL error, VD_ENOMEM. (cuda/cuda_nccl.cu;
 * stub/nccl_stub.c without NCCL) */
int vd_allreduce_nccl_create(vd_allreduce **out, int n, const int *devices, vd_err *e);
/* True when this build has NCCL. */
bool vd_allreduce_nccl_built(void);

/* ---- across processes: vdnn-train --mpi (allreduce_mpi.c) ----------------
 * Each process started by mpirun is one rank of MPI_COMM_WORLD. Without MPI
 * in the build (meson -Dmpi) vd_mpi_init is VD_EUNSUPPORTED, naming MPI. */
typedef struct vd_world {
    int rank, size;             /* in MPI_COMM_WORLD */
    int local_rank;             /* among the processes of this node (MPI_COMM_TYPE_SHARED) */
} vd_world;
/* True when this build has MPI. */
bool vd_mpi_built(void);
/* MPI_Init (once per process) and *w. VD_EUNSUPPORTED, VD_EINTERNAL. */
int vd_mpi_init(vd_world *w, vd_err *e);
/* all[k*bytes .. (k+1)*bytes) = process k's mine, on every process
 * (MPI_Allgather of bytes). A collective: every process calls it. */
int vd_mpi_allgather(const void *mine, void *all, size_t bytes, vd_err *e);
/* MPI_Finalize after a clean run; vd_mpi_abort ends every process of the
 * job with status code (MPI_Abort): the others may be waiting in a
 * collective for this one. Both do nothing when vd_mpi_init did not run. */
void vd_mpi_finalize(void);
void vd_mpi_abort(int code);
/* This process's handle (rank w->rank of w->size), for the backend
 * vd_backend_resolve(backend) names:
 *   cpu:  "mpi", on the CPU backend. average gathers every rank's
 *               buffer (MPI_Allgather, in chunks) and sums each element in
 *               rank order, then scales by 1/n: the bits of the CPU stand-in
 *               above for the same buffers.
 *   cuda: "nccl" on CUDA device `device`: rank 0 makes the NCCL unique
 *               id, MPI_Bcast hands it to the others, ncclCommInitRank; then
 *               exactly the NCCL handle above (vd_allreduce_nccl_create_rank).
 * VD_EUNSUPPORTED without MPI (or, cuda, without NCCL), VD_EUSAGE for an
 * unknown backend, VD_EDEVICE, VD_ENOMEM. */
int vd_allreduce_mpi_create(vd_allreduce **out, const vd_world *w, const char *backend, int device,
                            vd_err *e);
/* The NCCL side of that (cuda/cuda_nccl.cu; stub/nccl_stub.c without NCCL):
 * ncclGetUniqueId into id, and one rank's handle on the communicator of n
 * ranks that id names (ncclCommInitRank on `device`; a collective over the n
 * processes). VD_EUNSUPPORTED without NCCL, VD_EDEVICE, VD_ENOMEM. */
enum { VD_NCCL_ID_BYTES = 128 };    /* NCCL_UNIQUE_ID_BYTES */
int vd_nccl_unique_id(unsigned char id[VD_NCCL_ID_BYTES], vd_err *e);
int vd_allreduce_nccl_create_rank(vd_allreduce **out, int rank, int n, int device,
                                  const unsigned char id[VD_NCCL_ID_BYTES], vd_err *e);

/* Destroy handles out[0..n) (NULL entries skipped) and clear them. */
void vd_allreduce_destroy_all(vd_allreduce **ar, int n);

#endif
