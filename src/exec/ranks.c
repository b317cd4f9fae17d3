/* ranks.c — rank threads (vd_ranks, exec.h "data parallel").
 *
 * n - 1 worker threads, each waiting for the next job (a generation counter
 * under one mutex); vd_ranks_run publishes the job, runs rank 0's part on the
 * calling thread and waits until every worker has finished its part. No
 * allocation per job. */
#include <pthread.h>
#include <string.h>
#include "exec/exec.h"

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
