/* prefetch.c — when offloaded regions are released and prefetched back:
 * the prefetch schedule (ours or the paper's) and fitting the live bytes of
 * every step under a cap. */
#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include "plan/builder.h"

/* Paper rule: consumer unit j is prefetched at the backward step of the
 * largest unit l > j such that units j+1..l-1 contain no conv. */
static int paper_issue_step(const bld *b, int cons_step) {
    int L = b->L;
    int j = 2 * L - 1 - cons_step;          /* consumer unit */
    int l = j + 1;
    while (l + 1 <= L - 1 && vdp_ul(b, l)->op != VD_OP_CONV) l++;
    if (l > L - 1) l = L - 1;
    /* window at layer l covers [conv below l, l-1]; layer l itself conv is fine */
    return vdp_bwd_step(L, l);
}

static int cmp_pf_desc(const void *a, const void *bb) {
    const pf_item *x = a, *y = bb;
    if (x->c != y->c) return y->c - x->c;
    return y->t - x->t;
}

/* Choose prefetch steps. t_start: stall-free compute start time per step. */
void vdp_schedule_prefetch(bld *b, const double *t_start, const double *d2h_done) {
    vd_plan *p = b->p;
    const vd_device_params *dev = &b->prof->dev;
    int n = 0;
    pf_item *items = (pf_item *)b->extra;   /* scratch: pf_item[cap_t] (bld_init) */
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].offload) { items[n].t = t; items[n].c = p->tensors[t].rd_after; n++; }
    qsort(items, (size_t)n, sizeof *items, cmp_pf_desc);
    /* Ours: hold each offloaded region until its copy has drained (no
     * compute stall), as long as that is before the read after its absence
     * (rd_after: its first backward use in a training plan);
     * fit_memory pulls releases back earlier when memory is short. */
    if (b->variant == 0 && d2h_done)
        for (int k = 0; k < n; k++) {
            vd_tensor *T = &p->tensors[items[k].t];
            if (T->host_src) continue;
            for (int s = T->rd_before + 1; s < T->rd_after - 1; s++)
                if (t_start[s] >= d2h_done[items[k].t]) { T->release_step = s; break; }
        }
    double next_start = DBL_MAX;
    int next_q = p->n_steps;
    for (int k = 0; k < n; k++) {
        vd_tensor *T = &p->tensors[items[k].t];
        int c = T->rd_after, r = T->release_step;
        int q;
        if (b->variant == 2) {
            q = paper_issue_step(b, c);
        } else {
            /* the simulator's time for the copy (sim.c: the busy rate) */
            double dur = (double)T->bytes / vd_device_busy_bw(dev, VD_COPY_H2D) + dev->launch_s;
            double deadline = t_start[c] < next_start ? t_start[c] : next_start;
            double start = deadline - dur;
            q = -1;
            for (int s = c; s >= r; s--) {
                double avail = t_start[s];
                if (!T->host_src && d2h_done && d2h_done[items[k].t] > avail) avail = d2h_done[items[k].t];
                if (avail <= start + 1e-12) { q = s; break; }
            }
            if (q < 0) q = r;
            if (q > next_q) q = next_q;       /* H2D issue order follows consumer order */
            next_start = start;
        }
        if (q < r) q = r;
        if (q > c) q = c;
        T->prefetch_step = q;
        if (q < next_q) next_q = q;
    }
}

/* Subtract `bytes` from mem[a..b]. */
static void mem_sub(uint64_t *mem, int a, int b, uint64_t bytes) {
    for (int s = a; s <= b; s++) mem[s] -= bytes;
}

/* Make every step's live bytes fit cap: release held regions earlier and
 * issue prefetches later. Works on the tensors' steps with an incremental
 * memory count (moves only ever lower it), then rebuilds the intervals.
 * Returns true if every step fits. The moves scan the offloaded tensors'
 * steps copied into arrays of their own (b->fit_steps), in tensor order:
 * scanning the tensors themselves was nearly all of --min-budget's time on
 * ResNet-152 (a move per step over the cap, each a scan of every offloaded
 * tensor). Same moves, same order, same result. mem is left holding the
 * live bytes of the steps from the last one scanned on, not before. */
/* mem[s]: what vdp_mem_per_step gives after vdp_build_intervals, taken from
 * the tensors' decisions without writing the intervals (vdp_fit_memory
 * rebuilds them after its moves: writing them twice was a tenth of an auto
 * search). Each tensor's regions are those vdp_build_intervals makes. */
static inline void mem_add(uint64_t *mem, int n, int first, int last, uint64_t bytes) {
    if (first >= n || last < first) return;
    mem[first] += bytes;
    if (last + 1 < n) mem[last + 1] -= bytes;
}

static void mem_from_tensors(const bld *b, uint64_t *mem) {
    const vd_plan *p = b->p;
    int n = p->n_steps;
    for (int s = 0; s < n; s++) mem[s] = 0;
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        int first = b->first_touch[t], last = b->last_touch[t];
        uint64_t sz = vdp_iv_size(T->bytes);
        if (T->recompute) {
            mem_add(mem, n, first, T->fwd_last, sz);
            mem_add(mem, n, T->recompute_step, last, sz);
        } else if (!T->offload) {
            mem_add(mem, n, first, last, sz);
        } else {
            mem_add(mem, n, first, T->release_step - 1, sz);
            mem_add(mem, n, T->prefetch_step, last, sz);
        }
    }
    for (int s = 1; s < n; s++) mem[s] += mem[s - 1];
}

/* Does early prefetch *k wait before *j: the later consumer (bf), the
 * first of them on ties? A total order: the moves take them in it, from a
 * heap (el_down), not from a scan of them all (quadratic in the candidates
 * at a step). */
static inline bool el_before(const int *bf, const int *k, const int *j) {
    return bf[*k] > bf[*j] || (bf[*k] == bf[*j] && *k < *j);
}
VDP_HEAP_DOWN_FN(el_down, int, const int *, el_before)

bool vdp_fit_memory(bld *b, uint64_t cap, uint64_t *mem) {
    vd_plan *p = b->p;
    double looked = 0;   /* candidates looked at, moves, mask chunks: its effort */
    mem_from_tensors(b, mem);
    bool ok = true;
    int over = 0;
    /* only offloaded tensors move: scan just those */
    int *off = (int *)b->fwd_write + b->cap_t;   /* scratch after fwd_write, see alloc */
    int n_off = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].offload) off[n_off++] = t;
    /* per offloaded tensor k: the read before its absence (last forward
     * use), release step (INT_MIN: never released here, a host copy),
     * prefetch step, the read after (first backward use) */
    int *fl = b->fit_steps, *rs = fl + b->cap_t, *ps = rs + b->cap_t, *bf = ps + b->cap_t;
    int *el = bf + b->cap_t;
    for (int k = 0; k < n_off; k++) {
        const vd_tensor *T = &p->tensors[off[k]];
        fl[k] = T->rd_before;
        rs[k] = T->host_src ? INT_MIN : T->release_step;
        ps[k] = T->prefetch_step;
        bf[k] = T->rd_after;
    }
    for (;;) {
        while (over < p->n_steps && mem[over] <= cap) over++;
        if (over >= p->n_steps) break;
        looked += 3.0 + 2.0 * (double)((n_off + 63) / 64);
        /* Regions held after their last forward use (waiting for the copy to
         * drain): release the one held longest at `over` (accept a stall). */
        int rel = -1;
        for (int base = 0; base < n_off; base += 64) {
            int cnt = n_off - base < 64 ? n_off - base : 64;
            for (uint64_t m = vdp_between_mask(fl + base, rs + base, cnt, over, over); m; m &= m - 1) {
                int k = base + __builtin_ctzll(m);
                if (rel < 0 || rs[k] > rs[rel]) rel = k;
            }
        }
        if (rel >= 0) {
            uint64_t sz = vdp_iv_size(p->tensors[off[rel]].bytes);
            int nr = over > fl[rel] + 1 ? over : fl[rel] + 1;
            mem_sub(mem, nr, rs[rel] - 1, sz);
            rs[rel] = nr;
            continue;
        }
        /* Early prefetches covering `over`: the one with the latest consumer
         * waits (the first of them on ties), until `over` fits. Moves here
         * leave the releases alone, so none becomes due at `over` (the scan
         * above would find none again), and a moved prefetch no longer
         * covers `over`: the candidates are collected once (el: indices
         * into them, a heap in el_before's order), each move takes the best
         * left. Most moves are further ones at the same step, which would
         * otherwise rescan every offloaded tensor. */
        int n_el = 0;
        looked += 2.0 * (double)((n_off + 63) / 64);
        for (int base = 0; base < n_off; base += 64) {   /* ps[k] <= over: ps[k] < over + 1 */
            int cnt = n_off - base < 64 ? n_off - base : 64;
            for (uint64_t m = vdp_between_mask(ps + base, bf + base, cnt, over + 1, over); m; m &= m - 1)
                el[n_el++] = base + __builtin_ctzll(m);
        }
        for (int j = n_el / 2 - 1; j >= 0; j--) el_down(el, n_el, j, bf);
        do {
            if (n_el == 0) { ok = false; goto done; }
            looked += 3.0 + (double)n_el;   /* (the scan of every one left it replaced) */
            int best = el[0];
            el[0] = el[--n_el];
            el_down(el, n_el, 0, bf);
            /* its region leaves steps ps[best] .. over; of those only `over`
             * is read again (over only grows, and the caller's mem is
             * scratch) */
            mem[over] -= vdp_iv_size(p->tensors[off[best]].bytes);
            ps[best] = over + 1;
        } while (mem[over] > cap);
    }
done:
    /* the effort only (vdp_build_screened's *effort, not its cost): where
     * the live bytes do not fit, these moves were a third of a search's
     * time (ResNet-152 b256 at 4.0 GB with vdp_build_unplaced_over), which
     * the cost's 2 per tensor does not show; about 15 looked at per unit */
    if (b->effort) *b->effort += looked / 15.0;
    for (int k = 0; k < n_off; k++) {
        vd_tensor *T = &p->tensors[off[k]];
        if (!T->host_src) T->release_step = rs[k];
        T->prefetch_step = ps[k];
    }
    vdp_build_intervals(b);
    return ok;
}
