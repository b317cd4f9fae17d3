/* dp.h — a data-parallel run's setup: one rank per device in this process.
 *
 * Rank 0 is the caller's own session, plan and executor, made on the main
 * thread exactly as for a single-device run (with the session options of
 * vd_dp_session_opts); ranks 1..N-1 each get a thread (exec/exec.h
 * vd_ranks) that opens its session (its own backend: CUDA device
 * --device + r, or a CPU backend), plans for the same budget on its own
 * device (or its own default budget when none was given) at the shard
 * batch, and creates its executor. The group (vd_exec_group_create) then
 * stands for all of them: vd_train_run trains it like one executor of the
 * global batch, rank 0 writes the checkpoints, logs and metrics.
 *
 * The all-reduce (backend/allreduce.h): NCCL on the cuda backend
 * (VD_EUNSUPPORTED in a build without NCCL), the CPU stand-in on the cpu
 * backend.
 *
 *     vd_dp dp;  vd_dp_open(&dp, run.ranks, "cuda", device, &e);
 *     vd_dp_session_opts(&dp, 0, &run.session);   // rank 0: allreduce, rank
 *     vd_session_open(&ses, ...); plan; vd_session_exec(&ses, &plan, ..., &ex);
 *     vd_dp_start_peers(&dp, &net, &run.session, &run.plan, run.budget_given, poison, &e);
 *     vd_exec *g;  vd_dp_group(&dp, ex, &g, &e);
 *     vd_train_run(&net, g, ...);
 *     vd_exec_destroy(&g); vd_dp_close_peers(&dp); ...rank 0's...; vd_dp_close(&dp);
 */
#ifndef VD_TRAIN_DP_H
#define VD_TRAIN_DP_H

#include "util/util.h"
#include "net/net.h"
#include "backend/allreduce.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "train/session.h"

typedef struct vd_dp {
    int n;                      /* ranks */
    const char *backend;        /* every rank's: "cpu" | "cuda" (vd_backend_resolve) */
    int device0;                /* rank r runs on CUDA device device0 + r */
    vd_ranks *rk;
    vd_allreduce **ar;          /* [n] */
    /* ranks 1..n-1 (index 0 unused: rank 0 is the caller's) */
    vd_session *ses;            /* [n] */
    vd_plan *plan;              /* [n] */
    vd_exec **ex;               /* [n]; ex[0] = the caller's, set by vd_dp_group */
    bool *have_ses, *have_plan; /* [n] */
    /* vd_dp_start_peers' arguments, read by the rank threads */
    const vd_net *net;
    const vd_session_opts *so;
    const vd_plan_opts *po;
    bool budget_given, poison;
    /* vd_dp_open_mpi: this process is rank world.rank of world.size */
    bool mpi;
    vd_world world;
} vd_dp;

/* n ranks on backend ("cpu" | "cuda"; "auto" as vd_session_open resolves
 * it), rank r on CUDA device device0 + r: the rank threads and the
 * communicator. Errors: VD_EUNSUPPORTED (cuda without NCCL in this build),
 * VD_EDEVICE (fewer devices than ranks, NCCL), VD_ENOMEM. On failure *d
 * holds nothing (vd_dp_close is harmless). */
int vd_dp_open(vd_dp *d, int n, const char *backend, int device0, vd_err *e);
/* vdnn-train --mpi: this process as one rank of an MPI job (w from
 * vd_mpi_init): n = 1 local rank, rank w->rank of w->size, on CUDA device
 * device0 + w->local_rank; the all-reduce of vd_allreduce_mpi_create (NCCL
 * bootstrapped over MPI on cuda, gather-and-sum over MPI on cpu); the group
 * of vd_dp_group shards the data and gathers the losses across the
 * processes (vd_exec_group_set_procs). Errors as vd_dp_open. */
int vd_dp_open_mpi(vd_dp *d, const vd_world *w, const char *backend, int device0, vd_err *e);
/* Rank r's session options: so->allreduce, so->rank, so->device. */
void vd_dp_session_opts(const vd_dp *d, int r, vd_session_opts *so);
/* Ranks 1..n-1, each on its thread: vd_session_open(net, po->batch, a copy
 * of so made for the rank), its plan (a copy of po without the progress
 * callback; without budget_given the rank's own vd_session_default_budget)
 * and vd_session_exec(poison). The first failure is returned (prefixed with
 * its rank). */
int vd_dp_start_peers(vd_dp *d, const vd_net *net, const vd_session_opts *so,
                      const vd_plan_opts *po, bool budget_given, bool poison, vd_err *e);
/* The group of ex0 (rank 0's executor) and the peers' executors. */
int vd_dp_group(vd_dp *d, vd_exec *ex0, vd_exec **group, vd_err *e);
/* Destroy the peers' executors, plans and sessions (each on its thread). */
void vd_dp_close_peers(vd_dp *d);
/* Everything else: the communicator and the threads. Call after rank 0's
 * executor and session are gone. */
void vd_dp_close(vd_dp *d);

#endif
