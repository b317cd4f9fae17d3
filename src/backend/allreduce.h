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

/* Destroy handles out[0..n) (NULL entries skipped) and clear them. */
void vd_allreduce_destroy_all(vd_allreduce **ar, int n);

#endif
