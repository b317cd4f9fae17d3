/* allreduce_cpu.c — the CPU stand-in of the all-reduce (see allreduce.h):
 * ranks are threads of one process sharing one communicator.
 *
 * average: every rank publishes its buffer and waits at a barrier; then rank
 * r sums elements [r*count/n, (r+1)*count/n) over the ranks' buffers in rank
 * order (float: ((b0 + b1) + b2) ...), multiplies by 1/n and writes the
 * result into every rank's buffer; a second barrier ends the call. Each
 * element is computed by one rank, in one fixed order: the result is the
 * same bytes whatever the threads' timing. */
#include <pthread.h>
#include <stdlib.h>
#include "backend/allreduce.h"

typedef struct cpu_comm {
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived;                /* ranks at the current barrier */
    uint64_t gen;               /* barriers completed */
    bool aborted;               /* a rank failed: every barrier fails from now on */
    float **buf;                /* [n] published buffers of the current call */
    int64_t *count;             /* [n] their counts */
    int refs;                   /* handles not yet destroyed */
} cpu_comm;

/* All n ranks reach this point; false when the communicator was aborted. */
static bool barrier(cpu_comm *c) {
    pthread_mutex_lock(&c->mu);
    bool ok = !c->aborted;
    if (ok) {
        uint64_t g = c->gen;
        if (++c->arrived == c->n) {
            c->arrived = 0;
            c->gen++;
            pthread_cond_broadcast(&c->cv);
        } else {
            while (c->gen == g && !c->aborted) pthread_cond_wait(&c->cv, &c->mu);
            ok = c->gen != g;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static int peer_failed(vd_err *e) {
    return vd_errf(e, VD_EINTERNAL, "all-reduce: another rank failed");
}

static int cpu_average(vd_allreduce *ar, vd_backend *be, float *buf, int64_t count, vd_err *e) {
    (void)be;
    cpu_comm *c = ar->ctx;
    int n = c->n, r = ar->rank;
    c->buf[r] = buf;
    c->count[r] = count;
    if (!barrier(c)) return peer_failed(e);
    for (int k = 0; k < n; k++)
        if (c->count[k] != count) {
            /* every rank sees the same mismatch: all fail alike */
            vd_errf(e, VD_EINTERNAL, "all-reduce: rank %d averages %lld floats, rank %d %lld",
                    r, (long long)count, k, (long long)c->count[k]);
            barrier(c);
            return VD_EINTERNAL;
        }
    int64_t lo = count * r / n, hi = count * (r + 1) / n;
    float scale = 1.0f / (float)n;
    for (int64_t i = lo; i < hi; i++) {
        float s = c->buf[0][i];
        for (int k = 1; k < n; k++) s += c->buf[k][i];
        s *= scale;
        for (int k = 0; k < n; k++) c->buf[k][i] = s;
    }
    if (!barrier(c)) return peer_failed(e);
    return VD_OK;
}

static int cpu_wait(vd_allreduce *ar, vd_backend *be, vd_err *e) {
    (void)ar; (void)be; (void)e;
    return VD_OK;   /* average has finished when it returns */
}

static void cpu_abort(vd_allreduce *ar) {
    cpu_comm *c = ar->ctx;
    pthread_mutex_lock(&c->mu);
    c->aborted = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void cpu_destroy(vd_allreduce *ar) {
    if (!ar) return;
    cpu_comm *c = ar->ctx;
    pthread_mutex_lock(&c->mu);
    bool last = --c->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        vd_free(c->buf);
        vd_free(c->count);
        vd_free(c);
    }
    vd_free(ar);
}

int vd_allreduce_cpu_create(vd_allreduce **out, int n, vd_err *e) {
    if (n < 1) return vd_errf(e, VD_EINTERNAL, "all-reduce: %d ranks", n);
    for (int r = 0; r < n; r++) out[r] = NULL;
    cpu_comm *c = vd_calloc(1, sizeof *c, e);
    if (!c) return VD_ENOMEM;
    c->n = n;
    c->buf = vd_calloc((size_t)n, sizeof *c->buf, e);
    c->count = vd_calloc((size_t)n, sizeof *c->count, e);
    if (!c->buf || !c->count) {
        vd_free(c->buf);
        vd_free(c->count);
        vd_free(c);
        return VD_ENOMEM;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    for (int r = 0; r < n; r++) {
        vd_allreduce *ar = vd_calloc(1, sizeof *ar, e);
        if (!ar) {
            if (r == 0) {   /* no handle owns the communicator yet */
                pthread_mutex_destroy(&c->mu);
                pthread_cond_destroy(&c->cv);
                vd_free(c->buf);
                vd_free(c->count);
                vd_free(c);
            }
            vd_allreduce_destroy_all(out, r);
            return VD_ENOMEM;
        }
        *ar = (vd_allreduce){ .name = "cpu", .rank = r, .n_ranks = n, .ctx = c,
                              .average = cpu_average, .wait = cpu_wait, .abort = cpu_abort,
                              .destroy = cpu_destroy };
        c->refs++;
        out[r] = ar;
    }
    return VD_OK;
}

void vd_allreduce_destroy_all(vd_allreduce **ar, int n) {
    for (int r = 0; r < n; r++)
        if (ar[r]) {
            ar[r]->destroy(ar[r]);
            ar[r] = NULL;
        }
}
