/* dp.c — a data-parallel run's setup; see dp.h. */
#include <stdio.h>
#include <string.h>
#include "train/dp.h"

static int dp_alloc(vd_dp *d, int n, const char *backend, int device0, vd_err *e) {
    d->backend = vd_backend_resolve(backend, NULL);
    if (!d->backend)
        return vd_errf(e, VD_EUSAGE, "unknown backend '%s' (expected cpu | cuda | auto)", backend);
    d->n = n;
    d->device0 = device0;
    size_t un = (size_t)n;
    d->ar = vd_calloc(un, sizeof *d->ar, e);
    d->ses = vd_calloc(un, sizeof *d->ses, e);
    d->plan = vd_calloc(un, sizeof *d->plan, e);
    d->ex = vd_calloc(un, sizeof *d->ex, e);
    d->have_ses = vd_calloc(un, sizeof *d->have_ses, e);
    d->have_plan = vd_calloc(un, sizeof *d->have_plan, e);
    return !d->ar || !d->ses || !d->plan || !d->ex || !d->have_ses || !d->have_plan
           ? VD_ENOMEM : VD_OK;
}

int vd_dp_open_mpi(vd_dp *d, const vd_world *w, const char *backend, int device0, vd_err *e) {
    memset(d, 0, sizeof *d);
    int rc = dp_alloc(d, 1, backend, device0 + w->local_rank, e);
    d->mpi = true;
    d->world = *w;
    if (!rc) rc = vd_allreduce_mpi_create(&d->ar[0], w, d->backend, d->device0, e);
    if (!rc) rc = vd_ranks_create(&d->rk, 1, e);
    if (rc) vd_dp_close(d);
    return rc;
}

int vd_dp_open(vd_dp *d, int n, const char *backend, int device0, vd_err *e) {
    memset(d, 0, sizeof *d);
    if (n < 1) return vd_errf(e, VD_EUSAGE, "--gpus must be at least 1");
    int rc = dp_alloc(d, n, backend, device0, e);
    if (rc) {
        vd_dp_close(d);
        return rc;
    }
    size_t un = (size_t)n;
    int *devs = vd_calloc(un, sizeof *devs, e);
    if (!devs) {
        rc = VD_ENOMEM;
        goto fail;
    }
    for (int r = 0; r < n; r++) devs[r] = device0 + r;
    /* the communicator first: a build without NCCL fails here, before any
     * device is set up */
    if ((rc = vd_allreduce_create(d->ar, n, d->backend, devs, e))) goto fail;
    if ((rc = vd_ranks_create(&d->rk, n, e))) goto fail;
    vd_free(devs);
    return VD_OK;
fail:
    vd_free(devs);
    vd_dp_close(d);
    return rc;
}

void vd_dp_session_opts(const vd_dp *d, int r, vd_session_opts *so) {
    so->allreduce = d->ar[r];
    so->rank = d->mpi ? d->world.rank : r;
    so->device = d->device0 + r;
    if (r > 0) so->backend = d->backend;
}

/* Rank r (> 0): session, plan, executor, on the rank's thread. */
static int peer_open(void *ctx, int r, vd_err *e) {
    vd_dp *d = ctx;
    if (r == 0) return VD_OK;
    vd_session_opts so = *d->so;
    vd_dp_session_opts(d, r, &so);
    so.profile_out = NULL;      /* rank 0 writes it */
    so.note = NULL;             /* and shows what it does */
    int rc = vd_session_open(&d->ses[r], d->net, d->po->batch, &so, e);
    if (rc) return rc;
    d->have_ses[r] = true;
    vd_plan_opts po = *d->po;
    po.progress = NULL;         /* rank 0 reports its own search */
    po.progress_ctx = NULL;
    if (!d->budget_given) vd_session_default_budget(&d->ses[r], &po);
    rc = vd_session_plan(&d->ses[r], &po, &d->plan[r], e);
    d->have_plan[r] = rc == VD_OK || rc == VD_EBUDGET;
    if (rc) return rc;
    return vd_session_exec(&d->ses[r], &d->plan[r], d->poison, &d->ex[r], e);
}

int vd_dp_start_peers(vd_dp *d, const vd_net *net, const vd_session_opts *so,
                      const vd_plan_opts *po, bool budget_given, bool poison, vd_err *e) {
    d->net = net;
    d->so = so;
    d->po = po;
    d->budget_given = budget_given;
    d->poison = poison;
    return vd_ranks_run(d->rk, peer_open, NULL, d, e);
}

int vd_dp_group(vd_dp *d, vd_exec *ex0, vd_exec **group, vd_err *e) {
    d->ex[0] = ex0;
    int rc = vd_exec_group_create(group, d->rk, d->ex, d->ar, e);
    if (!rc && d->mpi && (rc = vd_exec_group_set_procs(*group, d->world.rank, d->world.size,
                                                       vd_mpi_allgather, e)))
        vd_exec_destroy(group);
    return rc;
}

static int peer_close(void *ctx, int r, vd_err *e) {
    (void)e;
    vd_dp *d = ctx;
    if (r == 0) return VD_OK;
    vd_exec_destroy(&d->ex[r]);
    if (d->have_plan[r]) vd_plan_free(&d->plan[r]);
    if (d->have_ses[r]) vd_session_close(&d->ses[r]);
    d->have_plan[r] = d->have_ses[r] = false;
    return VD_OK;
}

void vd_dp_close_peers(vd_dp *d) {
    if (d->rk && d->ex) vd_ranks_run(d->rk, peer_close, NULL, d, NULL);
}

void vd_dp_close(vd_dp *d) {
    vd_dp_close_peers(d);
    if (d->ar) vd_allreduce_destroy_all(d->ar, d->n);
    vd_ranks_destroy(&d->rk);
    vd_free(d->ar);
    vd_free(d->ses);
    vd_free(d->plan);
    vd_free(d->ex);
    vd_free(d->have_ses);
    vd_free(d->have_plan);
    memset(d, 0, sizeof *d);
}
