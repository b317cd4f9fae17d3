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

/* The orderings whose keys and index pack losslessly into one word (see
 * vdp_place): the larger word first. */
static inline bool pkey_before(const uint64_t *x, const uint64_t *y) { return *x > *y; }

VDP_SORT_FN(sort_okeys, okey, okey_before)
VDP_SORT_FN(sort_pkeys, uint64_t, pkey_before)

/* The bits that hold v (0 for 0). */
static inline int bits_of(uint64_t v) { return v ? 64 - __builtin_clzll(v) : 0; }

/* Place in the given order. off[] receives offsets; returns hwm. Each
 * placement takes the lowest gap among the placed intervals that overlap it
 * in time: a pass over those in offset order, from 0, stopping at the first
 * gap that holds it (an offset, 0 or an overlapping interval's end, that
 * nothing overlapping in time occupies; tests/plan/test_place.c checks this
 * against a scan of every entry).
 *
 * The placed intervals sit in a tree over the steps (a perfect binary tree of
 * 2^H leaves of 2^PLACE_LEAF_SHIFT steps each, heap-numbered: node 1 the
 * root): each in the lowest node whose range of steps holds all of it, each
 * node's entries sorted by offset. A small placement, or one of long lives,
 * has the root alone (PLACE_FLAT_N, PLACE_FLAT_LIVE): one offset-sorted
 * array, scanned 64 entries at a time (a mask of those overlapping in time,
 * branch-free, then only those, in order), as before the tree, whose merge
 * costs more than that scan there. Its newest entries, up to PLACE_PEND,
 * wait in a short offset-sorted list that the scan merges with the array's
 * entries, and join the array together in one merge: an insert into the
 * array moved every entry above it, the merge moves each once per
 * PLACE_PEND inserts (docs/results/2026-12-06-s22/plantime.md). The
 * intervals overlapping steps [f, l] all lie in the nodes whose range meets
 * [f, l] (those inside it overlap it whole; the few on its borders are
 * tested), and a merge of those nodes' runs by offset visits them in offset
 * order. A pass therefore looks only at the steps near its own instead of at
 * every placed interval: on a deep chain the whole placement is near linear
 * in the intervals, where the offset-sorted array it replaced scanned (and
 * moved, at each insert) every entry, quadratic per placement. The order of
 * entries at equal offsets differs, which changes neither the gap found nor
 * how many were visited before it (the first of them either holds the gap or
 * makes every one at that offset fail). */
enum { PLACE_PEND = 32 };   /* at most 64: the scan's mask of them */

typedef struct placed {
    int w;               /* each leaf holds 2^w steps */
    int H;               /* levels below the root: 2^H leaves hold every step */
    int *start;          /* [2^(H+1)] each node's first slot in o / e / f / l */
    int *cnt, *sub;      /* [2^(H+1)] entries in the node, in its subtree */
    uint64_t *o, *e;     /* [n] slots: offset, end (each node's run by offset) */
    int *f, *l;          /* [n] first, last step */
    int *cpos, *cend;    /* [2^(H+1)] the merge's cursors: next slot, run end */
    bool *cflt;          /* [2^(H+1)] the cursor's run needs the step test */
    int *heap;           /* [2^(H+1)] cursors, a min-heap on their offset */
    /* per block of 64 slots (runs start at whole blocks), over the run's
     * entries in it: the largest first step, the smallest last step, the
     * largest end, and whether it is gapless (each entry's offset at most
     * the largest end of those before it in the block) */
    int *bmaxf, *bminl;  /* [slots / 64] */
    int *bminf, *bmaxl;  /* [slots / 64] the smallest first step, the largest last step */
    uint64_t *bmaxe;     /* [slots / 64] */
    bool *bgap;          /* [slots / 64] true: gapless */
    /* the root alone: the entries not yet in the array, by offset */
    uint64_t po[PLACE_PEND], pe[PLACE_PEND];   /* offset, end */
    int pf[PLACE_PEND], pl[PLACE_PEND];        /* first, last step */
    int np;                                    /* how many */
} placed;

/* log2 of the steps a leaf holds. Placements of fewer than PLACE_FLAT_STEPS
 * steps or at most PLACE_FLAT_N intervals get the root alone (see above):
 * the scan of one array is faster there (ResNet-50's auto search at 4 GiB
 * took twice as long with a tree), the tree from a few thousand intervals
 * on (a 1,000-layer chain's). So do placements of long lives, where the
 * intervals live at a step (whole-iteration ones aside) number at least one
 * in PLACE_FLAT_LIVE of all: a gap search then visits about that many
 * wherever the intervals sit, and the tree's merge of its nodes costs more
 * per visit than the scan's masks of 64 cost per entry scanned: ResNet-152
 * b256's plans (about 2,000 intervals, a hundred live at a step: the maps
 * kept from the forward pass to the backward) are such placements (timed
 * in docs/results/2026-12-06-s18/search.md). A chain's plans, whose
 * maps are recomputed or offloaded near their use, live a few steps each
 * (test_place's deep chain: about 4 live at a step) and keep the tree. */
enum { PLACE_LEAF_SHIFT = 4, PLACE_FLAT_STEPS = 256, PLACE_FLAT_N = 2048, PLACE_FLAT_LIVE = 64 };

/* The node holding steps [f, l]: the lowest whose range covers both. */
static inline int placed_node(const placed *P, int f, int l) {
    f >>= P->w;
    l >>= P->w;
    int lev = f == l ? 0 : 32 - __builtin_clz((unsigned)(f ^ l));
    return (1 << (P->H - lev)) + (f >> lev);
}

/* The root alone: the pending entries into the array, one merge from the
 * top down (the array's slots hold every interval). */
static void placed_merge_pending(placed *P) {
    int s = P->start[1], i = P->cnt[1] - 1, j = P->np - 1;
    for (int k = s + i + j + 1; j >= 0; k--) {
        if (i >= 0 && P->o[s + i] > P->po[j]) {
            P->o[k] = P->o[s + i]; P->e[k] = P->e[s + i]; P->f[k] = P->f[s + i]; P->l[k] = P->l[s + i];
            i--;
        } else {
            P->o[k] = P->po[j]; P->e[k] = P->pe[j]; P->f[k] = P->pf[j]; P->l[k] = P->pl[j];
            j--;
        }
    }
    P->cnt[1] += P->np;
    P->np = 0;
}

static void placed_insert(placed *P, int first, int last, uint64_t o, uint64_t end) {
    if (P->H == 0) {   /* the root alone: into the pending list */
        if (P->np == PLACE_PEND) placed_merge_pending(P);
        int k = P->np++;
        for (; k > 0 && P->po[k - 1] > o; k--) {
            P->po[k] = P->po[k - 1]; P->pe[k] = P->pe[k - 1]; P->pf[k] = P->pf[k - 1]; P->pl[k] = P->pl[k - 1];
        }
        P->po[k] = o; P->pe[k] = end; P->pf[k] = first; P->pl[k] = last;
        return;
    }
    int nd = placed_node(P, first, last);
    int s = P->start[nd], m = P->cnt[nd];
    /* after the last entry of the run with offset <= o: a bisection whose
     * steps select without a branch (the branch mispredicted about every
     * other step) */
    const uint64_t *a = P->o + s;
    size_t len = (size_t)m;
    while (len > 1) {
        size_t half = len / 2;
        a += a[half - 1] <= o ? half : 0;
        len -= half;
    }
    int lo = (int)(a - (P->o + s)) + (len == 1 && a[0] <= o);
    int k = s + lo;
    size_t nm = (size_t)(m - lo);
    memmove(P->o + k + 1, P->o + k, nm * sizeof *P->o);
    memmove(P->e + k + 1, P->e + k, nm * sizeof *P->e);
    memmove(P->f + k + 1, P->f + k, nm * sizeof *P->f);
    memmove(P->l + k + 1, P->l + k, nm * sizeof *P->l);
    P->o[k] = o; P->e[k] = end; P->f[k] = first; P->l[k] = last;
    P->cnt[nd]++;
    for (int b = k >> 6, z = s + m + 1; b << 6 < z; b++) {
        int j = b << 6, jz = j + 64 < z ? j + 64 : z;
        int mf = P->f[j], ml = P->l[j], nf = P->f[j], xl = P->l[j];
        uint64_t me = P->e[j];
        bool gapless = true;
        for (j++; j < jz; j++) {
            gapless &= P->o[j] <= me;
            me = P->e[j] > me ? P->e[j] : me;
            mf = P->f[j] > mf ? P->f[j] : mf;
            ml = P->l[j] < ml ? P->l[j] : ml;
            nf = P->f[j] < nf ? P->f[j] : nf;
            xl = P->l[j] > xl ? P->l[j] : xl;
        }
        P->bmaxf[b] = mf; P->bminl[b] = ml; P->bmaxe[b] = me; P->bgap[b] = gapless;
        P->bminf[b] = nf; P->bmaxl[b] = xl;
    }
    for (; nd >= 1; nd >>= 1) P->sub[nd]++;
}

/* The first slot from k (below z) overlapping [f, l], or z: whole blocks
 * whose entries all lie apart from [f, l] skipped at once. */
static inline int skip_apart(const placed *P, int k, int z, int f, int l) {
    while (k < z) {
        if (!(k & 63) && k + 64 <= z && (P->bminf[k >> 6] > l || P->bmaxl[k >> 6] < f)) {
            k += 64;
            continue;
        }
        if (P->f[k] <= l && P->l[k] >= f) break;
        k++;
    }
    return k;
}

/* The cursor c's next slot overlapping [f, l] (from cpos), or false. */
static inline bool cursor_next(placed *P, int c, int f, int l) {
    int k = P->cpos[c], z = P->cend[c];
    if (P->cflt[c]) k = skip_apart(P, k, z, f, l);
    P->cpos[c] = k;
    return k < z;
}

/* Is cursor *a's slot at a lower offset than *b's (the gap search's heap
 * of cursors, lowest first)? */
static inline bool cursor_before(const placed *P, const int *a, const int *b) {
    return P->o[P->cpos[*a]] < P->o[P->cpos[*b]];
}
VDP_HEAP_DOWN_FN(heap_down, int, const placed *, cursor_before)

/* One visit of the gap search: true when the gap at *cand holds `bytes`
 * below the entry [o, e), else *cand passes over the entry. */
static inline bool gap_below(uint64_t o, uint64_t e, uint64_t bytes, uint64_t *cand, long *visits) {
    ++*visits;
    if (*cand + bytes <= o) return true;
    *cand = e > *cand ? e : *cand;
    return false;
}

/* The gap search's cursor over the pending entries that overlap it in time:
 * the next one (j, -1 past the last) and its offset (UINT64_MAX past the
 * last), the mask of those after it. */
typedef struct pcursor { uint64_t mask, next; int j; } pcursor;

static inline void pcursor_step(const placed *P, pcursor *c) {
    c->j = c->mask ? __builtin_ctzll(c->mask) : -1;
    c->next = c->mask ? P->po[c->j] : UINT64_MAX;
    c->mask &= c->mask - 1;
}

/* The gap search's visits of the pending entries at offsets up to lim, in
 * offset order: true when the gap is found. */
static inline bool pending_upto(const placed *P, pcursor *c, uint64_t lim, uint64_t bytes,
                                uint64_t *cand, long *visits) {
    for (; c->next <= lim && c->j >= 0; pcursor_step(P, c))
        if (gap_below(c->next, P->pe[c->j], bytes, cand, visits)) return true;
    return false;
}

/* The lowest offset for `bytes` over steps [f, l] among the placed.
 * *visits: how many overlapping entries it looked at. */
static uint64_t lowest_gap(placed *P, int f, int l, uint64_t bytes, long *visits) {
    if (P->H == 0) {   /* the root alone: the scan of one array and the pending list */
        uint64_t cand = 0;
        int m = P->cnt[1], s0 = P->start[1];
        /* overlapping [f, l]: first <= l and last >= f */
        pcursor pc = {vdp_between_mask(P->pf, P->pl, P->np, l + 1, f - 1), 0, 0};
        pcursor_step(P, &pc);
        for (int base = 0; base < m; base += 64) {
            int cnt = m - base < 64 ? m - base : 64;
            const int b0 = s0 + base;
            uint64_t mask = vdp_between_mask(P->f + b0, P->l + b0, cnt, l + 1, f - 1);
            if (!mask) continue;
            /* The block's overlapping entries at once where each would fail
             * the test in turn: the highest of them lies below cand + bytes
             * (cand only grows, so none holds the gap below it) and no
             * pending entry comes before it. Counted, cand past them all:
             * the same visits and cand as one by one. */
            uint64_t otop = P->o[b0 + 63 - __builtin_clzll(mask)];
            if (otop < cand + bytes && pc.next > otop) {
                *visits += __builtin_popcountll(mask);
                for (; mask; mask &= mask - 1) {
                    uint64_t e = P->e[b0 + __builtin_ctzll(mask)];
                    cand = e > cand ? e : cand;
                }
                continue;
            }
            while (mask) {
                int k = b0 + __builtin_ctzll(mask);
                mask &= mask - 1;
                if (pending_upto(P, &pc, P->o[k], bytes, &cand, visits) ||
                    gap_below(P->o[k], P->e[k], bytes, &cand, visits))
                    return cand;
            }
        }
        pending_upto(P, &pc, UINT64_MAX, bytes, &cand, visits);
        return cand;
    }
    int nc = 0;
    int stack[2 * 34], sp = 0;   /* (node, level) pairs; depth at most H + 2 */
    stack[sp++] = 1; stack[sp++] = P->H;
    while (sp) {
        int lev = stack[--sp], nd = stack[--sp];
        if (!P->sub[nd]) continue;
        int lo = ((nd - (1 << (P->H - lev))) << lev) << P->w;
        int hi = lo + (1 << (lev + P->w)) - 1;
        if (hi < f || lo > l) continue;
        if (P->cnt[nd]) {
            P->cpos[nc] = P->start[nd];
            P->cend[nc] = P->start[nd] + P->cnt[nd];
            P->cflt[nc] = lo < f || hi > l;
            if (cursor_next(P, nc, f, l)) P->heap[nc] = nc, nc++;
        }
        if (lev > 0) {
            stack[sp++] = 2 * nd; stack[sp++] = lev - 1;
            stack[sp++] = 2 * nd + 1; stack[sp++] = lev - 1;
        }
    }
    for (int i = nc / 2 - 1; i >= 0; i--) heap_down(P->heap, nc, i, P);
    uint64_t cand = 0;
    while (nc) {
        /* the top cursor's run, up to the next cursor's offset, in one loop
         * (entries at equal offsets may come in either order: see above) */
        int c = P->heap[0], k = P->cpos[c], z = P->cend[c];
        uint64_t lim = UINT64_MAX;
        if (nc > 1) lim = P->o[P->cpos[P->heap[1]]];
        if (nc > 2 && P->o[P->cpos[P->heap[2]]] < lim) lim = P->o[P->cpos[P->heap[2]]];
        bool flt = P->cflt[c];
        for (;;) {
            /* A whole block at once where the scan would only step through
             * it: every entry overlaps [f, l], it is gapless, it lies below
             * the other cursors and the gap sought starts at or above its
             * first offset. Then each entry fails the test (cand stays at or
             * above its offset, bytes > 0): counted, cand past them all. */
            while (!(k & 63) && k + 64 <= z && bytes > 0 && cand >= P->o[k] &&
                   P->bgap[k >> 6] && P->o[k + 63] <= lim &&
                   (!flt || (P->bmaxf[k >> 6] <= l && P->bminl[k >> 6] >= f))) {
                *visits += 64;
                cand = P->bmaxe[k >> 6] > cand ? P->bmaxe[k >> 6] : cand;
                k += 64;
            }
            if (flt) k = skip_apart(P, k, z, f, l);
            if (k >= z || P->o[k] > lim) break;
            if (gap_below(P->o[k], P->e[k], bytes, &cand, visits)) return cand;
            k++;
        }
        P->cpos[c] = k;
        if (k >= z) P->heap[0] = P->heap[--nc];
        if (nc) heap_down(P->heap, nc, 0, P);
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
    size_t nodes = (size_t)2 << P->H;
    memset(P->cnt, 0, nodes * sizeof *P->cnt);
    memset(P->sub, 0, nodes * sizeof *P->sub);
    P->np = 0;
    for (int i = 0; i < n; i++) {
        done[i] = pinned && pinned[i];
        if (done[i]) {
            off[i] = iv[i].offset;
            if (off[i] + iv[i].bytes > hwm) hwm = off[i] + iv[i].bytes;
            placed_insert(P, iv[i].first, iv[i].last, off[i], off[i] + iv[i].bytes);
            m++;
        }
    }
    for (int oi = 0; oi < n; oi++) {
        int i = order[oi];
        if (done[i]) continue;
        uint64_t bytes = iv[i].bytes;
        int f = iv[i].first, l = iv[i].last;
        uint64_t cand = lowest_gap(P, f, l, bytes, &visits);
        scanned += m;
        off[i] = cand;
        done[i] = true;
        if (cand + bytes > hwm) hwm = cand + bytes;
        if (hwm >= give_up) break;
        placed_insert(P, f, l, cand, cand + bytes);
        m++;
    }
    /* The work counts what the offset-sorted array this replaced did: every
     * placed entry scanned (its share of the step masks and of the inserts'
     * moves, about 0.6 of one visited, fitted on whole searches: see
     * PLACE_EFFORT) and the overlapping ones visited. The auto search's
     * effort cap reads it: the same count, the same plans. */
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
    size_t nn = (size_t)(n ? n : 1);
    int max_last = 0;
    for (int i = 0; i < n; i++) if (iv[i].last > max_last) max_last = iv[i].last;
    placed P = {0};
    /* the steps the intervals live, whole-iteration ones aside */
    double lives = 0;
    for (int i = 0; i < n; i++)
        if (iv[i].first > 0 || iv[i].last < max_last) lives += iv[i].last - iv[i].first + 1;
    bool flat = max_last < PLACE_FLAT_STEPS || n <= PLACE_FLAT_N ||
                PLACE_FLAT_LIVE * lives >= (double)n * (max_last + 1);
    P.w = flat ? 30 : PLACE_LEAF_SHIFT;
    while ((1 << P.H) <= max_last >> P.w) P.H++;
    size_t nodes = (size_t)2 << P.H;
    /* the slots: each node's run rounded up to whole blocks of 64 */
    size_t slots = nn + 64 * (n < (int)nodes ? (size_t)n : nodes) + 64, nb = slots / 64 + 1;
    /* every array in one block (vdp_carve) */
    size_t nbytes = 0;
    size_t o_order = vdp_carve(&nbytes, 2 * nn * sizeof(okey));    /* + sort scratch */
    size_t o_pk = vdp_carve(&nbytes, 2 * nn * sizeof(uint64_t));   /* + sort scratch */
    size_t o_ord = vdp_carve(&nbytes, nn * sizeof(int));
    size_t o_off = vdp_carve(&nbytes, nn * sizeof(uint64_t)), o_best = vdp_carve(&nbytes, nn * sizeof(uint64_t));
    size_t o_done = vdp_carve(&nbytes, nn * sizeof(bool));
    size_t o_live = vdp_carve(&nbytes, ((size_t)max_last + 2) * sizeof(uint64_t));
    size_t o_start = vdp_carve(&nbytes, nodes * sizeof *P.start), o_cnt = vdp_carve(&nbytes, nodes * sizeof *P.cnt);
    size_t o_sub = vdp_carve(&nbytes, nodes * sizeof *P.sub), o_cpos = vdp_carve(&nbytes, nodes * sizeof *P.cpos);
    size_t o_cend = vdp_carve(&nbytes, nodes * sizeof *P.cend), o_heap = vdp_carve(&nbytes, nodes * sizeof *P.heap);
    size_t o_cflt = vdp_carve(&nbytes, nodes * sizeof *P.cflt);
    size_t o_o = vdp_carve(&nbytes, slots * sizeof *P.o), o_e = vdp_carve(&nbytes, slots * sizeof *P.e);
    size_t o_f = vdp_carve(&nbytes, slots * sizeof *P.f), o_l = vdp_carve(&nbytes, slots * sizeof *P.l);
    size_t o_bmaxf = vdp_carve(&nbytes, nb * sizeof *P.bmaxf), o_bminl = vdp_carve(&nbytes, nb * sizeof *P.bminl);
    size_t o_bmaxe = vdp_carve(&nbytes, nb * sizeof *P.bmaxe), o_bgap = vdp_carve(&nbytes, nb * sizeof *P.bgap);
    size_t o_bminf = vdp_carve(&nbytes, nb * sizeof *P.bminf), o_bmaxl = vdp_carve(&nbytes, nb * sizeof *P.bmaxl);
    char *blk = vd_malloc(nbytes, NULL);
    if (!blk) return vd_errf(e, VD_ENOMEM, "out of memory placing tensors");
    okey *order = (okey *)(blk + o_order);
    uint64_t *pk = (uint64_t *)(blk + o_pk);
    int *ord = (int *)(blk + o_ord);
    /* zeroed: a stopped ordering leaves the intervals after it unplaced */
    uint64_t *off = (uint64_t *)(blk + o_off);
    memset(off, 0, nn * sizeof *off);
    uint64_t *best = (uint64_t *)(blk + o_best);
    bool *done = (bool *)(blk + o_done);
    P.start = (int *)(blk + o_start);
    P.cnt = (int *)(blk + o_cnt);
    P.sub = (int *)(blk + o_sub);
    P.cpos = (int *)(blk + o_cpos);
    P.cend = (int *)(blk + o_cend);
    P.heap = (int *)(blk + o_heap);
    P.cflt = (bool *)(blk + o_cflt);
    P.o = (uint64_t *)(blk + o_o);
    P.e = (uint64_t *)(blk + o_e);
    P.f = (int *)(blk + o_f);
    P.l = (int *)(blk + o_l);
    P.bmaxf = (int *)(blk + o_bmaxf);
    P.bminl = (int *)(blk + o_bminl);
    P.bmaxe = (uint64_t *)(blk + o_bmaxe);
    P.bgap = (bool *)(blk + o_bgap);
    P.bminf = (int *)(blk + o_bminf);
    P.bmaxl = (int *)(blk + o_bmaxl);
    /* each node's run: room for every interval it can hold */
    memset(P.cnt, 0, nodes * sizeof *P.cnt);
    for (int i = 0; i < n; i++) P.cnt[placed_node(&P, iv[i].first, iv[i].last)]++;
    for (size_t k = 0, at = 0; k < nodes; k++) {
        P.start[k] = (int)at;
        at += ((size_t)P.cnt[k] + 63) / 64 * 64;
    }
    uint64_t best_hwm = UINT64_MAX;
    int big = 1 << 30;
    /* Lower bound: the most bytes live at one step. A placement reaching it
     * is optimal and ends the search. */
    uint64_t bound = 0;
    {
        uint64_t *live = (uint64_t *)(blk + o_live);
        memset(live, 0, ((size_t)max_last + 2) * sizeof *live);
        for (int i = 0; i < n; i++) {
            live[iv[i].first] += iv[i].bytes;
            live[iv[i].last + 1] -= iv[i].bytes;
        }
        uint64_t cur = 0;
        for (int s2 = 0; s2 <= max_last; s2++) { cur += live[s2]; if (cur > bound) bound = cur; }
    }
    /* The keys of orderings 0-2 and the index pack into one word without
     * changing the order: (size / 256, duration, max_last - first step) in
     * the ordering's key order, each in the bits its largest value needs,
     * then n - 1 - index (the lower index first on equal keys), when the
     * sizes are whole multiples of 256 (every plan's: vdp_iv_size) and all
     * of it fits 63 bits; a sort of 8-byte words on one compare. Otherwise,
     * and for ordering 3 (area: up to 96 bits), the four keys.
     * Whole-iteration intervals go first either way. */
    uint64_t msz = 0, mdur = 0, mearly = 0;
    bool packs = true;
    for (int i = 0; i < n && packs; i++) {
        uint64_t dur = (uint64_t)(iv[i].last - iv[i].first + 1), early = (uint64_t)(max_last - iv[i].first);
        packs = iv[i].bytes % 256 == 0;
        if (iv[i].bytes / 256 > msz) msz = iv[i].bytes / 256;
        if (dur > mdur) mdur = dur;
        if (early > mearly) mearly = early;
    }
    int bsz = bits_of(msz), bd = bits_of(mdur), be = bits_of(mearly), bi = bits_of((uint64_t)(n > 0 ? n - 1 : 0));
    packs = packs && bsz + bd + be + bi <= 63;
    for (int strategy = 0; strategy < 4; strategy++) {
        if (packs && strategy < 3) {
            int nw = 0, nr = 0;
            for (int i = 0; i < n; i++) {
                if (iv[i].first == 0 && iv[i].last == max_last && max_last > 0) { ord[nw++] = i; continue; }
                uint64_t dur = (uint64_t)(iv[i].last - iv[i].first + 1), sz = iv[i].bytes / 256;
                uint64_t early = (uint64_t)(max_last - iv[i].first);
                uint64_t k = strategy == 0 ? (sz << bd | dur) << be | early
                           : strategy == 1 ? (early << bsz | sz) << bd | dur
                           : (dur << bsz | sz) << be | early;
                pk[nr++] = k << bi | (uint64_t)(n - 1 - i);
            }
            sort_pkeys(pk, pk + nr, nr);
            uint64_t imask = ((uint64_t)1 << bi) - 1;
            for (int r = 0; r < nr; r++) ord[nw + r] = n - 1 - (int)(pk[r] & imask);
            uint64_t h = place_order(iv, n, pinned, ord, off, done, &P, give_up(best_hwm, fit), &pw);
            if (h < best_hwm) { best_hwm = h; memcpy(best, off, (size_t)n * sizeof *off); }
            if (best_hwm <= bound || quick) break;
            continue;
        }
        for (int i = 0; i < n; i++) {
            uint64_t dur = (uint64_t)(iv[i].last - iv[i].first + 1);
            order[i].idx = i;
            /* whole-iteration intervals (params, optimizer state, grads) always go
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
    vd_free(blk);
    return VD_OK;
}
