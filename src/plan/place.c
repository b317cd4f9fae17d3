/* place.c — static placement of device intervals into the pool: greedy
 * first-fit over several orderings, keeping the lowest high-water mark. */
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"

typedef struct span { uint64_t off, end; } span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off ? 1 : 0;
}

/* Sort keys for the orderings. */
typedef struct okey { int idx; uint64_t k0, k1, k2, k3; } okey;

static int cmp_okey(const void *a, const void *b) {
    const okey *x = a, *y = b;
    if (x->k0 != y->k0) return x->k0 > y->k0 ? -1 : 1;
    if (x->k1 != y->k1) return x->k1 > y->k1 ? -1 : 1;   /* descending */
    if (x->k2 != y->k2) return x->k2 > y->k2 ? -1 : 1;
    if (x->k3 != y->k3) return x->k3 > y->k3 ? -1 : 1;
    return x->idx - y->idx;
}

static bool overlap_time(const vd_interval *a, const vd_interval *b) {
    return a->first <= b->last && b->first <= a->last;
}

/* Place in the given order. off[] receives offsets; returns hwm. */
static uint64_t place_order(const vd_interval *iv, int n, const bool *pinned, const okey *order,
                            uint64_t *off, bool *done, span *tmp) {
    uint64_t hwm = 0;
    for (int i = 0; i < n; i++) {
        done[i] = pinned && pinned[i];
        if (done[i]) {
            off[i] = iv[i].offset;
            if (off[i] + iv[i].bytes > hwm) hwm = off[i] + iv[i].bytes;
        }
    }
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi].idx;
        if (done[i]) continue;
        int m = 0;
        for (int j = 0; j < n; j++)
            if (done[j] && overlap_time(&iv[i], &iv[j])) {
                tmp[m].off = off[j];
                tmp[m].end = off[j] + iv[j].bytes;
                m++;
            }
        qsort(tmp, (size_t)m, sizeof *tmp, cmp_span);
        uint64_t cand = 0;
        for (int k = 0; k < m; k++) {
            if (cand + iv[i].bytes <= tmp[k].off) break;
            if (tmp[k].end > cand) cand = tmp[k].end;
        }
        off[i] = cand;
        done[i] = true;
        if (cand + iv[i].bytes > hwm) hwm = cand + iv[i].bytes;
    }
    return hwm;
}

int vdp_place(vd_interval *iv, int n, const bool *pinned, uint64_t *hwm, vd_err *e) {
    okey *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    uint64_t *off = malloc((size_t)(n ? n : 1) * sizeof *off);
    uint64_t *best = malloc((size_t)(n ? n : 1) * sizeof *best);
    bool *done = malloc((size_t)(n ? n : 1) * sizeof *done);
    span *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!order || !off || !best || !done || !tmp) {
        free(order); free(off); free(best); free(done); free(tmp);
        return vd_errf(e, VD_ENOMEM, "out of memory placing tensors");
    }
    uint64_t best_hwm = UINT64_MAX;
    int big = 1 << 30;
    int max_last = 0;
    for (int i = 0; i < n; i++) if (iv[i].last > max_last) max_last = iv[i].last;
    for (int strategy = 0; strategy < 4; strategy++) {
        for (int i = 0; i < n; i++) {
            uint64_t dur = (uint64_t)(iv[i].last - iv[i].first + 1);
            order[i].idx = i;
            /* whole-iteration intervals (params, momentum, grads) always go
             * first, in index order, at the bottom of the pool */
            order[i].k0 = iv[i].first == 0 && iv[i].last == max_last && max_last > 0 ? 1 : 0;
            if (order[i].k0) { order[i].k1 = order[i].k2 = order[i].k3 = 0; continue; }
            switch (strategy) {
            case 0: /* first-fit decreasing size */
                order[i].k1 = iv[i].bytes; order[i].k2 = dur; order[i].k3 = (uint64_t)(big - iv[i].first);
                break;
            case 1: /* by start time (linear scan), larger first on ties */
                order[i].k1 = (uint64_t)(big - iv[i].first); order[i].k2 = iv[i].bytes; order[i].k3 = dur;
                break;
            case 2: /* longest lifetime first */
                order[i].k1 = dur; order[i].k2 = iv[i].bytes; order[i].k3 = (uint64_t)(big - iv[i].first);
                break;
            default: /* by area */
                order[i].k1 = iv[i].bytes / 256 * dur; order[i].k2 = iv[i].bytes; order[i].k3 = dur;
                break;
            }
        }
        qsort(order, (size_t)n, sizeof *order, cmp_okey);
        uint64_t h = place_order(iv, n, pinned, order, off, done, tmp);
        if (h < best_hwm) { best_hwm = h; memcpy(best, off, (size_t)n * sizeof *off); }
    }
    for (int i = 0; i < n; i++) iv[i].offset = best[i];
    *hwm = n ? best_hwm : 0;
    free(order); free(off); free(best); free(done); free(tmp);
    return VD_OK;
}
