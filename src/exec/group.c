/* group.c — rank threads (vd_ranks) and executor groups (exec.h, "data
 * parallel").
 *
 * vd_ranks: n - 1 worker threads, each waiting for the next job (a
 * generation counter under one mutex); vd_ranks_run publishes the job, runs
 * rank 0's part on the calling thread and waits until every worker has
 * finished its part. No allocation per job.
 *
 * A group runs each call on every member at once through vd_ranks_run; a
 * member that fails aborts the all-reduce (so that the others, waiting for
 * it in a barrier, fail too instead of waiting forever), and the error
 * returned is the first failure's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exec/group.h"

/* ---- rank threads ---------------------------------------------------------- */

typedef struct worker { struct vd_ranks *rk; int rank; pthread_t th; bool started; } worker;

struct vd_ranks {
    int n;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;               /* jobs published */
    int running;                /* workers still inside the current job */
    bool quit;
    int (*fn)(void *ctx, int rank, vd_err *e);
    void (*on_fail)(void *ctx, int rank);
    void *ctx;
    int first;                  /* the rank that failed first in the current job, or -1 */
    int *rc;                    /* [n] */
    vd_err *err;                /* [n] */
    worker *w;                  /* [n] (w[0] unused: rank 0 is the caller) */
};

/* Rank r's part of the current job; records the first failure. */
static void run_part(vd_ranks *rk, int r) {
    rk->err[r].code = 0;
    rk->err[r].msg[0] = 0;
    int rc = rk->fn(rk->ctx, r, &rk->err[r]);
    rk->rc[r] = rc;
    if (!rc) return;
    pthread_mutex_lock(&rk->mu);
    bool first = rk->first < 0;
    if (first) rk->first = r;
    pthread_mutex_unlock(&rk->mu);
    if (first && rk->on_fail) rk->on_fail(rk->ctx, r);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    vd_ranks *rk = w->rk;
    uint64_t seen = 0;
    pthread_mutex_lock(&rk->mu);
    for (;;) {
        while (rk->gen == seen && !rk->quit) pthread_cond_wait(&rk->go, &rk->mu);
        if (rk->quit) break;
        seen = rk->gen;
        pthread_mutex_unlock(&rk->mu);
        run_part(rk, w->rank);
        pthread_mutex_lock(&rk->mu);
        if (--rk->running == 0) pthread_cond_signal(&rk->done);
    }
    pthread_mutex_unlock(&rk->mu);
    return NULL;
}

int vd_ranks_create(vd_ranks **out, int n, vd_err *e) {
    *out = NULL;
    if (n < 1) return vd_errf(e, VD_EINTERNAL, "%d ranks", n);
    vd_ranks *rk = vd_calloc(1, sizeof *rk, e);
    if (!rk) return VD_ENOMEM;
    rk->n = n;
    rk->first = -1;
    rk->rc = vd_calloc((size_t)n, sizeof *rk->rc, e);
    rk->err = vd_calloc((size_t)n, sizeof *rk->err, e);
    rk->w = vd_calloc((size_t)n, sizeof *rk->w, e);
    pthread_mutex_init(&rk->mu, NULL);
    pthread_cond_init(&rk->go, NULL);
    pthread_cond_init(&rk->done, NULL);
    if (!rk->rc || !rk->err || !rk->w) {
        vd_ranks_destroy(&rk);
        return VD_ENOMEM;
    }
    for (int r = 1; r < n; r++) {
        rk->w[r] = (worker){ .rk = rk, .rank = r };
        int err = pthread_create(&rk->w[r].th, NULL, worker_main, &rk->w[r]);
        if (err) {
            vd_ranks_destroy(&rk);
            return vd_errf(e, VD_EINTERNAL, "cannot start the thread of rank %d: %s", r,
                           strerror(err));
        }
        rk->w[r].started = true;
    }
    *out = rk;
    return VD_OK;
}

int vd_ranks_count(const vd_ranks *rk) { return rk->n; }

int vd_ranks_run(vd_ranks *rk, int (*fn)(void *ctx, int rank, vd_err *e),
                 void (*on_fail)(void *ctx, int rank), void *ctx, vd_err *e) {
    pthread_mutex_lock(&rk->mu);
    rk->fn = fn;
    rk->on_fail = on_fail;
    rk->ctx = ctx;
    rk->first = -1;
    rk->running = rk->n - 1;
    rk->gen++;
    pthread_cond_broadcast(&rk->go);
    pthread_mutex_unlock(&rk->mu);
    run_part(rk, 0);
    pthread_mutex_lock(&rk->mu);
    while (rk->running > 0) pthread_cond_wait(&rk->done, &rk->mu);
    int first = rk->first;
    pthread_mutex_unlock(&rk->mu);
    if (first < 0) return VD_OK;
    if (e) {
        *e = rk->err[first];
        if (rk->n > 1) vd_err_prefix(e, "rank %d", first);
    }
    return rk->rc[first];
}

void vd_ranks_destroy(vd_ranks **prk) {
    vd_ranks *rk = *prk;
    if (!rk) return;
    pthread_mutex_lock(&rk->mu);
    rk->quit = true;
    pthread_cond_broadcast(&rk->go);
    pthread_mutex_unlock(&rk->mu);
    for (int r = 1; rk->w && r < rk->n; r++)
        if (rk->w[r].started) pthread_join(rk->w[r].th, NULL);
    pthread_mutex_destroy(&rk->mu);
    pthread_cond_destroy(&rk->go);
    pthread_cond_destroy(&rk->done);
    vd_free(rk->rc);
    vd_free(rk->err);
    vd_free(rk->w);
    vd_free(rk);
    *prk = NULL;
}

/* ---- executor groups --------------------------------------------------------- */

struct vdx_group {
    int n;
    vd_ranks *rk;
    vd_exec **m;                /* [n] members */
    vd_allreduce **ar;          /* [n] (entries may be NULL) */
    /* the current call's arguments and per-rank results */
    const float *params, *momentum;
    int64_t sgd_steps, iter;
    uint64_t seed;
    float lr;
    float *loss;                /* [n] */
    int *correct;               /* [n] */
    /* one process's part of a run over procs processes (vd_exec_group_set_procs) */
    int proc, procs;
    int (*gather)(const void *mine, void *all, size_t bytes, vd_err *e);
    struct rank_out { float loss; int32_t correct; } *mine, *all;   /* [n], [n * procs] */
};

int vdx_group_set_procs(vdx_group *g, int proc, int procs,
                        int (*gather)(const void *mine, void *all, size_t bytes, vd_err *e),
                        vd_err *e) {
    struct rank_out *mine = vd_calloc((size_t)g->n, sizeof *mine, e);
    struct rank_out *all = vd_calloc((size_t)g->n * (size_t)procs, sizeof *all, e);
    if (!mine || !all) {
        vd_free(mine);
        vd_free(all);
        return VD_ENOMEM;
    }
    vd_free(g->mine);
    vd_free(g->all);
    g->mine = mine;
    g->all = all;
    g->proc = proc;
    g->procs = procs;
    g->gather = gather;
    return VD_OK;
}

int vdx_group_procs(const vdx_group *g, int *proc) {
    *proc = g->proc;
    return g->procs;
}

/* Every rank's loss and correct count into g->all (global rank order: process
 * p's rank r at p * n + r) from all processes; *ranks = how many. One
 * process: its own. */
static int gather_out(vdx_group *g, int *ranks, vd_err *e) {
    for (int r = 0; r < g->n; r++) g->mine[r] = (struct rank_out){ g->loss[r], g->correct[r] };
    *ranks = g->n * g->procs;
    if (g->procs == 1) {
        memcpy(g->all, g->mine, sizeof *g->mine * (size_t)g->n);
        return VD_OK;
    }
    return g->gather(g->mine, g->all, sizeof *g->mine * (size_t)g->n, e);
}

int vdx_group_size(const vdx_group *g) { return g->n; }
vd_exec *vdx_group_member(const vdx_group *g, int r) { return g->m[r]; }

void vdx_group_free(vdx_group *g) {
    if (!g) return;
    vd_free(g->m);
    vd_free(g->ar);
    vd_free(g->loss);
    vd_free(g->correct);
    vd_free(g->mine);
    vd_free(g->all);
    vd_free(g);
}

bool vdx_group_stages(const vdx_group *g) {
    for (int r = 0; r < g->n; r++)
        if (!vd_exec_stages(g->m[r])) return false;
    return true;
}

void vdx_group_next_ready(vdx_group *g) {
    for (int r = 0; r < g->n; r++) vd_exec_next_ready(g->m[r]);
}

void vdx_group_drop_staged(vdx_group *g) {
    for (int r = 0; r < g->n; r++) vd_exec_drop_staged(g->m[r]);
}

/* The failing rank releases the others from the all-reduce's barriers. */
static void abort_ar(void *ctx, int rank) {
    vdx_group *g = ctx;
    if (g->ar[rank]) g->ar[rank]->abort(g->ar[rank]);
}

static int set_state_part(void *ctx, int r, vd_err *e) {
    vdx_group *g = ctx;
    return vd_exec_set_state(g->m[r], g->params, g->momentum, g->sgd_steps, e);
}

int vdx_group_set_state(vdx_group *g, const float *params, const float *momentum,
                        int64_t sgd_steps, vd_err *e) {
    g->params = params;
    g->momentum = momentum;
    g->sgd_steps = sgd_steps;
    return vd_ranks_run(g->rk, set_state_part, abort_ar, g, e);
}

static int init_part(void *ctx, int r, vd_err *e) {
    vdx_group *g = ctx;
    return vd_exec_init_params(g->m[r], g->seed, e);
}

int vdx_group_init_params(vdx_group *g, uint64_t seed, vd_err *e) {
    g->seed = seed;
    return vd_ranks_run(g->rk, init_part, abort_ar, g, e);
}

static int train_part(void *ctx, int r, vd_err *e) {
    vdx_group *g = ctx;
    return vd_exec_train_step(g->m[r], g->lr, g->iter, &g->loss[r], e);
}

int vdx_group_train_step(vdx_group *g, float lr, int64_t iter, float *loss, vd_err *e) {
    g->lr = lr;
    g->iter = iter;
    int rc = vd_ranks_run(g->rk, train_part, abort_ar, g, e);
    int n = 0;
    if (!rc) rc = gather_out(g, &n, e);
    if (rc) return rc;
    double sum = 0;             /* the mean of the shards' mean losses: the global mean */
    for (int r = 0; r < n; r++) sum += g->all[r].loss;
    *loss = (float)(sum / n);
    return VD_OK;
}

static int eval_part(void *ctx, int r, vd_err *e) {
    vdx_group *g = ctx;
    return vd_exec_eval_step(g->m[r], &g->correct[r], &g->loss[r], e);
}

int vdx_group_eval_step(vdx_group *g, int *correct, float *loss, vd_err *e) {
    int rc = vd_ranks_run(g->rk, eval_part, abort_ar, g, e);
    int n = 0;
    if (!rc) rc = gather_out(g, &n, e);
    if (rc) return rc;
    double sum = 0;
    int c = 0;
    for (int r = 0; r < n; r++) {
        sum += g->all[r].loss;
        c += g->all[r].correct;
    }
    *correct = c;
    *loss = (float)(sum / n);
    return VD_OK;
}

int vd_exec_group_create(vd_exec **out, vd_ranks *rk, vd_exec *const *members,
                         vd_allreduce *const *ar, vd_err *e) {
    *out = NULL;
    int n = rk->n;
    if (n > 0 && members[0] && vd_exec_loss_scale(members[0], NULL))
        return vd_errf(e, VD_EUNSUPPORTED, "data parallel training (--gpus, --mpi) in math fp16 "
                       "is not supported yet: its loss scale would have to agree between the "
                       "ranks; use bf16, or one device");
    for (int r = 0; r < n; r++)
        if (!members[r] || vd_exec_ranks(members[r]) != 1 ||
            vdx_exec_batch(members[r]) != vdx_exec_batch(members[0]))
            return vd_errf(e, VD_EINTERNAL, "executor group: member %d is missing, a group, or "
                           "planned for another batch than rank 0's", r);
    vdx_group *g = vd_calloc(1, sizeof *g, e);
    if (!g) return VD_ENOMEM;
    g->n = n;
    g->procs = 1;
    g->rk = rk;
    g->m = vd_calloc((size_t)n, sizeof *g->m, e);
    g->ar = vd_calloc((size_t)n, sizeof *g->ar, e);
    g->loss = vd_calloc((size_t)n, sizeof *g->loss, e);
    g->correct = vd_calloc((size_t)n, sizeof *g->correct, e);
    g->mine = vd_calloc((size_t)n, sizeof *g->mine, e);
    g->all = vd_calloc((size_t)n, sizeof *g->all, e);
    if (!g->m || !g->ar || !g->loss || !g->correct || !g->mine || !g->all) {
        vdx_group_free(g);
        return VD_ENOMEM;
    }
    for (int r = 0; r < n; r++) {
        g->m[r] = members[r];
        g->ar[r] = ar ? ar[r] : NULL;
    }
    vd_exec *ex = vdx_exec_wrap(g, e);
    if (!ex) {
        vdx_group_free(g);
        return VD_ENOMEM;
    }
    *out = ex;
    return VD_OK;
}
