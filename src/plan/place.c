/* place.c — static placement of device intervals into the pool: greedy
 * first-fit over several orderings, keeping the lowest high-water mark. */
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"

/* Sort keys for the orderings. */
typedef struct okey { int idx; uint64_t k0, k1, k2, k3; } okey;

/* Is x before y? Descending keys, then ascending index: a total order, so
 * every correct sort gives the same ordering. */
static inline bool okey_before(const okey *x, const okey *y) {
    if (x->k0 != y->k0) return x->k0 > y->k0;
    if (x->k1 != y->k1) return x->k1 > y->k1;
    if (x->k2 != y->k2) return x->k2 > y->k2;
    if (x->k3 != y->k3) return x->k3 > y->k3;
    return x->idx < y->idx;
}

/* One key word and the index: the orderings whose keys pack losslessly into
 * 64 bits (see vdp_place). Before: the larger key, then the lower index. */
typedef struct pkey { uint64_t k; int idx; } pkey;

static inline bool pkey_before(const pkey *x, const pkey *y) {
    return x->k != y->k ? x->k > y->k : x->idx < y->idx;
}

/* SORT_FN(name, type, before): sort a[0..n-1] by before; tmp: scratch [n].
 * Insertion sort of runs of 16, then bottom-up merges (the comparison
 * inlined: qsort's callback was a sixth of an auto search's time). */
#define SORT_FN(name, type, before)                                                        \
    static void name(type *a, type *tmp, int n) {                                         \
        enum { RUN = 16 };                                                                 \
        for (int lo = 0; lo < n; lo += RUN) {                                              \
            int hi = lo + RUN < n ? lo + RUN : n;                                          \
            for (int i = lo + 1; i < hi; i++) {                                            \
                type v = a[i];                                                             \
                int j = i;                                                                 \
                for (; j > lo && before(&v, &a[j - 1]); j--) a[j] = a[j - 1];              \
                a[j] = v;                                                                  \
            }                                                                              \
        }                                                                                  \
        type *src = a, *dst = tmp;                                                         \
        for (int w = RUN; w < n; w *= 2) {                                                 \
            for (int lo = 0; lo < n; lo += 2 * w) {                                        \
                int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;   \
                int i = lo, j = mid, k = lo;                                               \
                while (i < mid && j < hi) dst[k++] = before(&src[j], &src[i]) ? src[j++] : src[i++]; \
                while (i < mid) dst[k++] = src[i++];                                       \
                while (j < hi) dst[k++] = src[j++];                                        \
            }                                                                              \
            type *t = src; src = dst; dst = t;                                             \
        }                                                                                  \
        if (src != a) memcpy(a, src, (size_t)n * sizeof *a);                               \
    }
SORT_FN(sort_okeys, okey, okey_before)
SORT_FN(sort_pkeys, pkey, pkey_before)
#undef SORT_FN

/* Place in the given order. off[] receives offsets; returns hwm. The placed
 * intervals are kept sorted by offset in one structure of arrays (first /
 * last step, offset / end), so each placement is one pass in offset order:
 * the lowest gap among the intervals that overlap it in time. The pass looks
 * at 64 entries at a time: first a mask of those that overlap in time
 * (branch-free, on the steps alone), then only those, in order (a quarter of
 * the entries or fewer on the big nets, where the step test is most of the
 * work). The gap found is the same as a scan of every entry finds: the
 * lowest offset, 0 or an overlapping interval's end, that nothing
 * overlapping in time occupies (tests/plan/test_place.c checks this against
 * that scan). */
typedef struct placed {
    uint64_t *o, *e;   /* [cap] offset, end */
    int *f, *l;        /* [cap] first, last step */
} placed;

static void placed_insert(placed *P, int m, int first, int last, uint64_t o, uint64_t end) {
    /* after the last entry with offset <= o: a binary search without
     * branches on the data (conditional moves; the offsets' order is a coin
     * toss for the branch predictor) */
    int k = 0;
    if (m > 0) {
        const uint64_t *b = P->o;
        for (int n = m; n > 1; n -= n / 2) b = b[n / 2] <= o ? b + n / 2 : b;
        k = (int)(b - P->o) + (*b <= o);
    }
    size_t nm = (size_t)(m - k);
    memmove(P->o + k + 1, P->o + k, nm * sizeof *P->o);
    memmove(P->e + k + 1, P->e + k, nm * sizeof *P->e);
    memmove(P->f + k + 1, P->f + k, nm * sizeof *P->f);
    memmove(P->l + k + 1, P->l + k, nm * sizeof *P->l);
    P->o[k] = o; P->e[k] = end; P->f[k] = first; P->l[k] = last;
}

/* The lowest offset for `bytes` over steps [f, l] among the m placed.
 * *visits: how many overlapping entries it looked at. */
static uint64_t lowest_gap(const placed *P, int m, int f, int l, uint64_t bytes, long *visits) {
    uint64_t cand = 0;
    for (int base = 0; base < m; base += 64) {
        int cnt = m - base < 64 ? m - base : 64;
        /* overlapping [f, l]: first <= l and last >= f */
        uint64_t mask = vdp_between_mask(P->f + base, P->l + base, cnt, l + 1, f - 1);
        while (mask) {
            int k = base + __builtin_ctzll(mask);
            mask &= mask - 1;
            ++*visits;
            if (cand + bytes <= P->o[k]) return cand;
            uint64_t e = P->e[k];
            cand = e > cand ? e : cand;
        }
    }
    return cand;
}

/* Stops early, returning a value >= give_up, once the high-water mark
 * reaches give_up (the caller keeps only a strictly lower one). *work += its
 * work (see vdp_place). */
static uint64_t place_order(const vd_interval *iv, int n, const bool *pinned, const int *order,
                            uint64_t *off, bool *done, placed *P, uint64_t give_up, double *work) {
    long visits = 0, scanned = 0;
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
        int i = order[oi];
        if (done[i]) continue;
        uint64_t bytes = iv[i].bytes;
        int f = iv[i].first, l = iv[i].last;
        uint64_t cand = lowest_gap(P, m, f, l, bytes, &visits);
        scanned += m;
        off[i] = cand;
        done[i] = true;
        if (cand + bytes > hwm) hwm = cand + bytes;
        if (hwm >= give_up) break;
        placed_insert(P, m++, f, l, cand, cand + bytes);
    }
    /* an entry scanned (its share of the masks and of the inserts' moves)
     * costs about 0.6 of one visited (fitted on whole searches, see
     * PLACE_EFFORT) */
    *work += (double)n + (double)visits + 0.6 * (double)scanned;
    return hwm;
}

/* Where an ordering stops: at the best top so far (only a strictly lower one
 * is kept), and while none fits `fit` (> 0), as soon as it exceeds fit. */
static inline uint64_t give_up(uint64_t best_hwm, uint64_t fit) {
    return fit && best_hwm > fit ? fit + 1 : best_hwm;
}

int vdp_place(vd_interval *iv, int n, const bool *pinned, bool quick, uint64_t fit, uint64_t *hwm,
              double *work, vd_err *e) {
    double pw = 0;   /* the orderings' work */
    okey *order = vd_malloc(2 * (size_t)(n ? n : 1) * sizeof *order, NULL);   /* + sort scratch */
    pkey *pk = vd_malloc(2 * (size_t)(n ? n : 1) * sizeof *pk, NULL);         /* + sort scratch */
    int *ord = vd_malloc((size_t)(n ? n : 1) * sizeof *ord, NULL);
    /* zeroed: a stopped ordering leaves the intervals after it unplaced */
    uint64_t *off = vd_calloc((size_t)(n ? n : 1), sizeof *off, NULL);
    uint64_t *best = vd_malloc((size_t)(n ? n : 1) * sizeof *best, NULL);
    bool *done = vd_malloc((size_t)(n ? n : 1) * sizeof *done, NULL);
    size_t nn = (size_t)(n ? n : 1);
    placed P = {vd_malloc(nn * sizeof *P.o, NULL), vd_malloc(nn * sizeof *P.e, NULL),
                 vd_malloc(nn * sizeof *P.f, NULL), vd_malloc(nn * sizeof *P.l, NULL)};
    bool pok = P.o && P.e && P.f && P.l;
    if (!order || !pk || !ord || !off || !best || !done || !pok) {
        vd_free(order); vd_free(pk); vd_free(ord); vd_free(off); vd_free(best); vd_free(done);
        vd_free(P.o); vd_free(P.e); vd_free(P.f); vd_free(P.l);
        return vd_errf(e, VD_ENOMEM, "out of memory placing tensors");
    }
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
    /* The keys of orderings 0-2 pack into one word without changing the
     * order when the sizes are whole multiples of 256 below 2^40 and the
     * steps below 65535 (every plan's: vdp_iv_size): (size / 256, 32 bits)
     * and (duration, 65535 - first step, 16 bits each), in the ordering's
     * key order; a sort of 16-byte entries on one compare. Otherwise, and
     * for ordering 3 (area: up to 96 bits), the four keys. Whole-iteration
     * intervals go first either way. */
    bool packs = max_last < 65535;
    for (int i = 0; i < n && packs; i++)
        packs = iv[i].bytes % 256 == 0 && iv[i].bytes / 256 <= UINT32_MAX;
    for (int strategy = 0; strategy < 4; strategy++) {
        if (packs && strategy < 3) {
            int nw = 0, nr = 0;
            for (int i = 0; i < n; i++) {
                if (iv[i].first == 0 && iv[i].last == max_last && max_last > 0) { ord[nw++] = i; continue; }
                uint64_t dur = (uint64_t)(iv[i].last - iv[i].first + 1), sz = iv[i].bytes / 256;
                uint64_t early = 65535u - (uint64_t)iv[i].first;
                uint64_t k = strategy == 0 ? sz << 32 | dur << 16 | early
                           : strategy == 1 ? early << 48 | sz << 16 | dur
                           : dur << 48 | sz << 16 | early;
                pk[nr++] = (pkey){k, i};
            }
            sort_pkeys(pk, pk + nr, nr);
            for (int r = 0; r < nr; r++) ord[nw + r] = pk[r].idx;
            uint64_t h = place_order(iv, n, pinned, ord, off, done, &P, give_up(best_hwm, fit), &pw);
            if (h < best_hwm) { best_hwm = h; memcpy(best, off, (size_t)n * sizeof *off); }
            if (best_hwm <= bound || quick) break;
            continue;
        }
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
        sort_okeys(order, order + n, n);
        for (int i = 0; i < n; i++) ord[i] = order[i].idx;
        uint64_t h = place_order(iv, n, pinned, ord, off, done, &P, give_up(best_hwm, fit), &pw);
        if (h < best_hwm) { best_hwm = h; memcpy(best, off, (size_t)n * sizeof *off); }
        if (best_hwm <= bound || quick) break;
    }
    for (int i = 0; i < n; i++) iv[i].offset = best[i];
    *hwm = n ? best_hwm : 0;
    if (work) *work += pw;
    vd_free(order); vd_free(pk); vd_free(ord); vd_free(off); vd_free(best); vd_free(done);
    vd_free(P.o); vd_free(P.e); vd_free(P.f); vd_free(P.l);
    return VD_OK;
}
