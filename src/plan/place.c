/* place.c — static placement of device intervals into the pool: greedy
 * first-fit over several orderings, keeping the lowest high-water mark. */
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"

/* Sort keys for the orderings. */
typedef struct okey { int idx; uint64_t k0, k1, k2, k3; } okey;

/* x before y: k0..k3 descending, then idx ascending (a strict total order,
 * so every correct sort gives the same permutation). */
static inline bool okey_before(const okey *x, const okey *y) {
    if (x->k0 != y->k0) return x->k0 > y->k0;
    if (x->k1 != y->k1) return x->k1 > y->k1;
    if (x->k2 != y->k2) return x->k2 > y->k2;
    if (x->k3 != y->k3) return x->k3 > y->k3;
    return x->idx < y->idx;
}

/* Sort a[0..n-1] by okey_before: merge sort with tmp[n], insertion sort for
 * short runs (the comparison inlined: qsort's calls through a pointer were a
 * sixth of an auto search's time). */
static void sort_okeys(okey *a, okey *tmp, int n) {
    if (n <= 16) {
        for (int i = 1; i < n; i++) {
            okey v = a[i];
            int j = i;
            for (; j > 0 && okey_before(&v, &a[j - 1]); j--) a[j] = a[j - 1];
            a[j] = v;
        }
        return;
    }
    int h = n / 2;
    sort_okeys(a, tmp, h);
    sort_okeys(a + h, tmp, n - h);
    if (!okey_before(&a[h], &a[h - 1])) return;   /* already in order */
    memcpy(tmp, a, (size_t)h * sizeof *a);
    int i = 0, j = h, k = 0;
    while (i < h && j < n) a[k++] = okey_before(&a[j], &tmp[i]) ? a[j++] : tmp[i++];
    while (i < h) a[k++] = tmp[i++];
}

/* Place in the given order. off[] receives offsets; returns hwm. Placed
 * intervals are kept sorted by offset (P[0..m-1]); each placement collects
 * the ones overlapping it in time (branch-free, into ov[]) and takes the
 * lowest gap among them: the first-fit scan over the time-overlapping
 * intervals in offset order. */
typedef struct placed { int first, last; uint64_t off, end; } placed;

static void placed_insert(placed *P, int m, int first, int last, uint64_t o, uint64_t end) {
    int k = m;
    while (k > 0 && P[k - 1].off > o) k--;
    memmove(P + k + 1, P + k, (size_t)(m - k) * sizeof *P);
    P[k] = (placed){first, last, o, end};
}

/* Stops early, returning a value >= give_up, once the high-water mark
 * reaches give_up (the caller keeps only a strictly lower one). */
static uint64_t place_order(const vd_interval *iv, int n, const bool *pinned, const okey *order,
                            uint64_t *off, bool *done, placed *P, uint64_t give_up) {
    uint64_t hwm = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        done[i] = pinned && pinned[i];
        if (done[i]) {
            off[i] = iv[i].offset;
            if (off[i] + iv[i].bytes > hwm) hwm = off[i] + iv[i].bytes;
            placed_insert(P, m++, iv[i].first, iv[i].last, off[i], off[i] + iv[i].bytes);
        }
    }
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi].idx;
        if (done[i]) continue;
        uint64_t cand = 0, bytes = iv[i].bytes;
        int f = iv[i].first, l = iv[i].last;
        /* blocks of 16: collect the time-overlapping ones without branches,
         * then scan those; stop at the first block with a gap that fits */
        bool fit = false;
        int ov[16];
        for (int k0 = 0; k0 < m && !fit; k0 += 16) {
            int k1 = k0 + 16 < m ? k0 + 16 : m, nov = 0;
            for (int k = k0; k < k1; k++) {
                ov[nov] = k;
                nov += (P[k].first <= l) & (P[k].last >= f);
            }
            for (int j = 0; j < nov; j++) {
                const placed *q = &P[ov[j]];
                if (cand + bytes <= q->off) { fit = true; break; }
                if (q->end > cand) cand = q->end;
            }
        }
        off[i] = cand;
        done[i] = true;
        if (cand + bytes > hwm) hwm = cand + bytes;
        if (hwm >= give_up) return hwm;
        placed_insert(P, m++, f, l, cand, cand + bytes);
    }
    return hwm;
}

int vdp_place(vd_interval *iv, int n, const bool *pinned, bool quick, uint64_t *hwm, vd_err *e) {
    /* one block: order [2n] (+ the sort's scratch), P [n], off [n], best [n], done [n] */
    size_t nn = (size_t)(n ? n : 1);
    okey *order = vd_malloc(nn * (2 * sizeof(okey) + sizeof(placed) + 2 * sizeof(uint64_t) +
                                  sizeof(bool)), NULL);
    if (!order) return vd_errf(e, VD_ENOMEM, "out of memory placing tensors");
    placed *P = (placed *)(order + 2 * nn);
    uint64_t *off = (uint64_t *)(P + nn), *best = off + nn;
    bool *done = (bool *)(best + nn);
    uint64_t best_hwm = UINT64_MAX;
    int big = 1 << 30;
    int max_last = 0;
    for (int i = 0; i < n; i++) if (iv[i].last > max_last) max_last = iv[i].last;
    /* Lower bound: the most bytes live at one step. A placement reaching it
     * is optimal and ends the search. */
    uint64_t bound = 0;
    {
        uint64_t *live = vd_calloc((size_t)max_last + 2, sizeof *live, NULL);
        if (live) {
            for (int i = 0; i < n; i++) {
                live[iv[i].first] += iv[i].bytes;
                live[iv[i].last + 1] -= iv[i].bytes;
            }
            uint64_t cur = 0;
            for (int s2 = 0; s2 <= max_last; s2++) { cur += live[s2]; if (cur > bound) bound = cur; }
            vd_free(live);
        }
    }
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
        sort_okeys(order, order + nn, n);
        uint64_t h = place_order(iv, n, pinned, order, off, done, P, best_hwm);
        if (h < best_hwm) { best_hwm = h; memcpy(best, off, (size_t)n * sizeof *off); }
        if (best_hwm <= bound || quick) break;
    }
    for (int i = 0; i < n; i++) iv[i].offset = best[i];
    *hwm = n ? best_hwm : 0;
    vd_free(order);
    return VD_OK;
}
