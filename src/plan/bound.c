/* bound.c — lower bounds on the predicted iteration of any training plan of
 * a net and profile at a pool budget: compute only (vd_plan_lower_bound),
 * and with the copies and recomputes the budget forces (vd_plan_copy_bound).
 * man vdnn-plan, LOWER BOUND, has the whole argument; in short:
 *
 * Compute only. The simulator runs the compute steps one after another, each
 * taking its option's profile time; offloads, prefetches and stalls only add
 * to that, and so do recomputes. An op needs, at once, its workspace, every
 * persistent tensor (parameters, gradients, optimizer state) and the tensors it
 * reads and writes (forward: its inputs, output and saved state; backward:
 * what it reads, dy, the input gradients, the saved state). So at budget B
 * a pass can only use options whose workspace fits in B minus those bytes
 * (backward, with the update in the backward pass: the layer's gradients too),
 * and no plan at B is predicted faster than the sum, over the passes, of the
 * fastest such option's time (an ADD's backward left out, as compute_bound
 * in auto.c: the build may scale it to zero), plus the SGD step. Tensors are
 * counted once however many roles they have, so the bound stays a bound.
 *
 * With the copies. A feature map (a layer's output, the input x) is
 * resident in every plan from its first write through its last forward use
 * and from its first backward read through its last; only between (its
 * window) can it be absent, offloaded (a gap of two steps at least) or
 * recomputed (stateless writers only). Saved state is never absent. So at
 * step s the plan holds at least R(s): persistent bytes, the op's
 * gradients, saved state live at s, feature maps live at s outside their
 * windows, and the least workspace of the pass's options; the feature maps
 * whose window holds s make up the rest, and at least M(s) = R(s) + their
 * bytes - B of them are absent at s. Each absent one costs (simulator):
 * - an offload: a D2H copy (launch + bytes / the busy D2H rate at least:
 *   the simulator's rate for a copy with none in the other direction beside
 *   it, vd_device_busy_bw; both ways at once only slows it), issued
 *   after its producer's step, which the compute stream waits for before s
 *   (the region is released); and an H2D copy (launch + bytes / the busy
 *   H2D rate; x:
 *   this one only) that starts after step s's compute (its region is
 *   recorded free at its own, later, step) and ends before the compute
 *   stream reaches its first backward reader;
 * - a recompute (stateless writers; an add that applies its batch norm
 *   re-runs with its saved statistics): its writers' least forward time,
 *   after step s's compute;
 *   and when its producer reads a map with no use at or after s (a source
 *   dead at s: ResNet's batch-norm output before an add), that source kept
 *   on the device at s (its bytes, shared among the maps that need it, off
 *   those this one frees) or brought back (offloaded or recomputed: its
 *   least time, shared likewise), whichever costs less per byte freed.
 * With C(s) each pass's least time (as above, its workspace beside R(s)),
 * for any k1 < s (D2H copies of maps produced at k1 or later all run
 * between the end of step k1 and the start of step s), any k2 > s (H2D
 * copies of maps first read by step k2 run after step s and end before k2,
 * while the compute stream runs steps s+1..k2-1 and the recomputes, before
 * the tail k2..2L-1), and weights mu, l in [0, 1] (max(a, b) >= w a +
 * (1 - w) b):
 *   iter >= mu C(0..k1) + (1-mu) C(0..s-1) + C(s) + (1-l) C(s+1..k2-1)
 *           + C(k2..2L-1) + readback
 *           + sum over absent maps of min(offload: mu [producer >= k1] d2h
 *             + l [first backward read <= k2] h2d, recompute: (1-l) rc),
 * and the sum is at least the fractional cover of M(s) by those costs (a
 * relaxation: its optimum is no larger). The bound is the largest such
 * figure over some steps and a grid of k1, k2, mu, l (each one a bound), and
 * the sum of the C(s) with the SGD step; the SGD time is left out of the
 * copies' figure (it runs at the end or inside the backward steps).
 *
 * The option at s chosen with the absent maps. C(s) is the fastest option
 * whose workspace fits beside R(s), but a plan that runs option o at s
 * holds o's workspace there: at least M(s, o) = M(s) + o's workspace - the
 * least one are absent at s, and step s takes o's time. So the figure with
 * C(s) o's time and M(s, o) for M(s) (maximised over k1, k2, mu, l) bounds
 * every plan that runs o at s, and the least of those figures over the
 * options that fit beside R(s) bounds every plan; it is never below the
 * figure above (o's time >= C(s), M(s, o) >= M(s)). The steps examined are
 * some where M(s) > 0 and the one where M(s, C(s)'s option) is largest (a
 * large workspace beside many maps in their windows: VGG-16's wide
 * convolutions).
 *
 * Replayed plans (vd_plan_copy_bound, where p->graph captures plans that
 * offload nothing and the profile has a launch cut): those plans' ops are
 * shorter (sim.c's captured plans), so the bound is the lower of the
 * figure above and the same figure on the ops as a replay runs them
 * (replayed_profile) with no map offloaded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"

enum { BOUND_MAX_T = 2 * VD_MAX_INPUTS + 4 };

/* Adds tensor t to set[*n] unless it is absent (< 0), persistent or there. */
static void add_t(const vd_plan *p, int t, int *set, int *n) {
    if (t < 0 || t >= p->n_tensors || p->tensors[t].persistent) return;
    for (int k = 0; k < *n; k++)
        if (set[k] == t) return;
    if (*n < BOUND_MAX_T) set[(*n)++] = t;
}

/* Bytes of set[n]; gradients_only: only its gradient tensors (dy, dx, dw). */
static uint64_t set_bytes(const vd_plan *p, const int *set, int n, bool gradients_only) {
    uint64_t b = 0;
    for (int k = 0; k < n; k++) {
        vd_tensor_kind kd = p->tensors[set[k]].kind;
        if (!gradients_only || kd == VD_T_DACT || kd == VD_T_GRADS) b += p->tensors[set[k]].bytes;
    }
    return b;
}

/* The tensors unit u's forward (bwd false) or backward pass touches, but
 * for persistent ones, into set; returns their count. */
static int pass_set(const vd_net *net, const vd_plan *p, int u, bool bwd, int *set) {
    const vd_plan_layer *pl = &p->layers[u];
    int i = pl->layer;
    const vd_layer *l = &net->layers[i];
    int n = 0;
    if (!bwd) {
        for (int k = 0; k < l->n_in; k++) add_t(p, pl->in_t[k], set, &n);
        add_t(p, pl->y, set, &n);
        add_t(p, pl->aux, set, &n);
        return n;
    }
    bool rx = true, ry = true;
    vd_op_bwd_reads(net, i, &rx, &ry);
    for (int k = 0; k < l->n_in && rx; k++) add_t(p, pl->in_t[k], set, &n);
    if (ry) add_t(p, pl->y, set, &n);
    add_t(p, pl->dy, set, &n);
    for (int k = 0; k < l->n_in; k++) add_t(p, pl->dx[k], set, &n);
    add_t(p, pl->aux, set, &n);
    add_t(p, pl->dw, set, &n);
    return n;
}

static uint64_t persistent_bytes(const vd_plan *p) {
    uint64_t b = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].persistent) b += p->tensors[t].bytes;
    return b;
}

/* One option of a pass: its time and workspace on the unit's chunk. */
typedef struct bopt { double t; uint64_t ws; } bopt;

/* The options of unit u of p's pass (bwd) whose workspace fits in avail
 * bytes, each's time and workspace on the unit's chunk
 * (vd_profile_chunk_time: an option may run chunks relatively faster than
 * another), in o[VD_PROFILE_MAX_ALGOS] in the profile's order; their count. */
static int pass_options(const vd_profile *prof, const vd_plan *p, int u, bool bwd, uint64_t avail,
                        bopt *o) {
    const vd_plan_layer *pl = &p->layers[u];
    const vd_profile_layer *pr = &prof->layers[pl->layer];
    int n = 0;
    for (int k = 0; k < pr->n_algos; k++) {
        const vd_profile_algo *a = &pr->algos[k];
        uint64_t w = vd_profile_chunk_ws(prof, pl->layer, k, bwd, pl->n_chunks, p->batch);
        if (w > avail) continue;
        o[n++] = (bopt){vd_profile_chunk_time(prof, pl->layer, k, bwd, bwd ? a->bwd_s : a->fwd_s,
                                              pl->n, p->batch), w};
    }
    return n;
}

/* The fastest time of unit u of p's pass (bwd) among the options whose
 * workspace fits in avail bytes (pass_options); INFINITY when none fits.
 * *ws (may be NULL): that option's workspace (the least of the fastest
 * ones; 0 when none fits). */
static double unit_fastest(const vd_profile *prof, const vd_plan *p, int u, bool bwd,
                           uint64_t avail, uint64_t *ws) {
    bopt o[VD_PROFILE_MAX_ALGOS];
    int n = pass_options(prof, p, u, bwd, avail, o);
    double best = INFINITY;
    uint64_t best_ws = 0;
    for (int k = 0; k < n; k++)
        if (o[k].t < best || (o[k].t == best && o[k].ws < best_ws)) { best = o[k].t; best_ws = o[k].ws; }
    if (ws) *ws = best_ws;
    return best;
}

static bool bound_applies(const vd_net *net, const vd_profile *prof, const vd_plan *p) {
    return !p->forward_only && p->n_layers == net->n_layers && prof->n_layers == net->n_layers;
}

double vd_plan_lower_bound(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                           uint64_t budget) {
    if (!bound_applies(net, prof, p)) return 0.0;
    uint64_t persistent = persistent_bytes(p);
    if (persistent > budget) return INFINITY;
    double sum = vdp_sgd_s(net, prof);
    for (int u = 0; u < p->n_units; u++) {
        int set[BOUND_MAX_T], n = pass_set(net, p, u, false, set);
        uint64_t need = persistent + set_bytes(p, set, n, false);
        if (need > budget) return INFINITY;
        sum += unit_fastest(prof, p, u, false, budget - need, NULL);
        const vd_layer *l = &net->layers[p->layers[u].layer];
        if (vd_op_table[l->op].bwd_is_dy || l->no_grad) continue;
        n = pass_set(net, p, u, true, set);
        need = persistent + set_bytes(p, set, n, false);
        if (need > budget) return INFINITY;
        sum += unit_fastest(prof, p, u, true, budget - need, NULL);
    }
    return sum * (1.0 - 1e-12);   /* the simulator adds in another order */
}

/* ---- with the copies ------------------------------------------------------ */

/* A feature map that may be absent in its window (fwd_last, bwd_first). */
typedef struct fmap {
    uint64_t bytes;
    int prod, fwd_last, bwd_first;  /* steps: first write, last forward touch, first backward read */
    double d2h_s, h2d_s, rc_s;      /* least copy times (d2h 0: the host holds it, x), least
                                       recompute time (INFINITY: none) */
    bool offload;                   /* may be offloaded (a gap of two steps at least) */
    int src[VD_MAX_INPUTS], n_src;  /* the maps its producer reads (its recompute's sources) */
    int t;                          /* its tensor */
} fmap;

/* What a recompute's source costs: any feature map, by tensor. */
typedef struct tmap {
    uint64_t bytes;
    int prod, last;                 /* first write; last touch of the whole iteration */
    double d2h_s, h2d_s, rc_s;      /* as fmap's */
} tmap;

/* A linear function of step_figure's weights: c0 + cm mu + cl l. */
typedef struct plane { double c0, cm, cl; } plane;

/* Per step figures and scratch of one bound. */
typedef struct bctx {
    int S;                          /* 2L: the steps with a pass */
    double *C;                      /* [S] least time of each pass */
    double *pre;                    /* [S + 1] prefix sums of C */
    int64_t *mand, *win;            /* [S + 1] resident bytes outside windows; bytes in windows
                                       (difference arrays, then per step) */
    uint64_t *fixed;                /* [S] R(s) */
    uint64_t *res;                  /* [S] R(s) but the pass's workspace */
    uint64_t *fast;                 /* [S] R(s) with the workspace of the option of C(s) */
    int *pass;                      /* [S] the unit whose pass step s runs (-1: none counted, an
                                       add's or a no_grad layer's backward) */
    fmap *fm; int n_fm;             /* the maps with a window */
    tmap *tm;                       /* [n_tensors] every feature map (recompute sources) */
    int *cand;                      /* [n_fm] scratch: the maps whose window holds a step */
    int *dead;                      /* [n_fm] scratch: its source dead at the step (-1 none,
                                       -2 several) */
    int *n_dead;                    /* [n_tensors] scratch: candidates with that dead source */
    double *cost;                   /* [n_fm] scratch of the fractional cover */
    struct plane *piece;            /* [n_fm] scratch: the piece of cost[k] (step_figure) */
    bool *by_rc;                    /* [n_fm] scratch: cost[k] is the recompute's price */
    struct keyed { double key; int k; } *order;   /* [n_fm] scratch: cost per byte, map */
} bctx;

/* Is x before y: the lower cost per byte, then the lower map. A strict
 * total order (the keys are never NaN: a cost is >= 0 or infinite, a map's
 * bytes > 0): the maps come in the order a sort by it (qsort's, before)
 * gives. */
static inline bool keyed_before(const void *unused, const struct keyed *x, const struct keyed *y) {
    (void)unused;
    return x->key != y->key ? x->key < y->key : x->k < y->k;
}
VDP_HEAP_DOWN_FN(keyed_down, struct keyed, const void *, keyed_before)

/* The maps cand[0..n-1] at costs c->cost[] as a heap in c->order, cheapest
 * per byte first: a cover takes them from it (cover_next) and stops once
 * the bytes are covered, mostly long before the last (instead of a sort of
 * them all). */
static void cover_heap(const bctx *c, const int *cand, int n) {
    for (int k = 0; k < n; k++) {
        c->order[k].key = c->cost[k] / (double)c->fm[cand[k]].bytes;
        c->order[k].k = k;
    }
    for (int i = n / 2 - 1; i >= 0; i--) keyed_down(c->order, n, i, NULL);
}

/* The cheapest map left in cover_heap's heap of *n (> 0), taken out. */
static int cover_next(const bctx *c, int *n) {
    int k = c->order[0].k;
    c->order[0] = c->order[--*n];
    keyed_down(c->order, *n, 0, NULL);
    return k;
}

static void range_add(int64_t *d, int a, int b, uint64_t v) {
    if (a > b) return;
    d[a] += (int64_t)v;
    d[b + 1] -= (int64_t)v;
}

/* The least time to recompute unit u of p (each option's recompute on the
 * unit's chunk). */
static double least_rc(const vd_profile *prof, const vd_plan *p, int u) {
    const vd_plan_layer *pl = &p->layers[u];
    double best = INFINITY;
    for (int k = 0; k < prof->layers[pl->layer].n_algos; k++) {
        double t = vd_profile_chunk_time(prof, pl->layer, k, false,
                                         vd_profile_rc_s(prof, pl->layer, k), pl->n, p->batch);
        if (t < best) best = t;
    }
    return best;
}

/* the least workspace of unit u's options for one pass (on its chunk) */
static uint64_t least_ws(const vd_profile *prof, const vd_plan *p, int u, bool bwd) {
    const vd_plan_layer *pl = &p->layers[u];
    const int n = prof->layers[pl->layer].n_algos;
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < n; k++) {
        uint64_t w = vd_profile_chunk_ws(prof, pl->layer, k, bwd, pl->n_chunks, p->batch);
        if (w < best) best = w;
    }
    return n > 0 ? best : 0;
}

/* The feature maps' touches (first write, last forward touch, first and last
 * backward read: -1 none), from the layers alone: a recompute's reads of
 * its sources, which some plans add, only lengthen a map's residence. */
static void map_touches(const vd_net *net, const vd_plan *p, int *first, int *fl, int *bf, int *bl) {
    int L = p->n_units;
    for (int t = 0; t < p->n_tensors; t++) first[t] = fl[t] = bf[t] = bl[t] = -1;
#define FWD(t, s) do { if ((t) >= 0) { if (first[t] < 0) first[t] = (s); fl[t] = (s); } } while (0)
#define BWD(t, s) do { if ((t) >= 0) { if (bf[t] < 0 || (s) < bf[t]) bf[t] = (s); \
                                       if ((s) > bl[t]) bl[t] = (s); } } while (0)
    for (int i = 0; i < L; i++) {
        const vd_plan_layer *pl = &p->layers[i];
        for (int k = 0; k < net->layers[pl->layer].n_in; k++) FWD(pl->in_t[k], i);
        FWD(pl->y, i);
    }
    for (int i = 0; i < L; i++) {
        const vd_plan_layer *pl = &p->layers[i];
        bool rx = true, ry = true;
        vd_op_bwd_reads(net, pl->layer, &rx, &ry);
        int sb = 2 * L - 1 - i;
        for (int k = 0; k < net->layers[pl->layer].n_in && rx; k++) BWD(pl->in_t[k], sb);
        if (ry) BWD(pl->y, sb);
    }
#undef FWD
#undef BWD
}

/* The least time to recompute map t: its writers' (producer and in-place
 * layers) least recompute times; INFINITY when a writer is not recomputable. */
static double recompute_s(const vd_net *net, const vd_profile *prof, const vd_plan *p, int t) {
    if (p->tensors[t].kind != VD_T_ACT) return INFINITY;
    double s = 0;
    for (int j = 0; j < p->n_units; j++) {
        const vd_plan_layer *pl = &p->layers[j];
        if (pl->y != t) continue;
        if (!vd_op_table[net->layers[pl->layer].op].recomputable) return INFINITY;
        s += least_rc(prof, p, j);
    }
    return s;
}

/* Fills c's per step figures: C, pre, fixed (R), win, the maps. Returns
 * false when some step cannot fit at all (no plan fits the budget). */
static bool step_figures(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                         uint64_t budget, bool no_offload, bctx *c, int *first, int *fl, int *bf,
                         int *bl) {
    int L = p->n_units, S = c->S;
    const vd_device_params *dev = &prof->dev;
    map_touches(net, p, first, fl, bf, bl);
    for (int s = 0; s <= S; s++) c->mand[s] = c->win[s] = 0;
    c->n_fm = 0;
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        if ((T->kind != VD_T_ACT && T->kind != VD_T_INPUT) || first[t] < 0) continue;
        int end_fwd = fl[t];
        tmap *tm = &c->tm[t];
        tm->bytes = T->bytes;
        tm->prod = first[t];
        tm->last = bl[t] > end_fwd ? bl[t] : end_fwd;
        tm->d2h_s = T->kind == VD_T_INPUT ? 0.0 : dev->launch_s + (double)T->bytes /
                                                   vd_device_busy_bw(dev, VD_COPY_D2H);
        tm->h2d_s = dev->launch_s + (double)T->bytes / vd_device_busy_bw(dev, VD_COPY_H2D);
        tm->rc_s = recompute_s(net, prof, p, t);
        range_add(c->mand, first[t], end_fwd, T->bytes);
        if (bf[t] < 0) continue;
        range_add(c->mand, bf[t], bl[t], T->bytes);
        if (bf[t] - end_fwd - 1 < 1) continue;
        fmap m = {.bytes = T->bytes, .prod = first[t], .fwd_last = end_fwd, .bwd_first = bf[t],
                  .d2h_s = tm->d2h_s, .h2d_s = tm->h2d_s, .rc_s = tm->rc_s, .t = t};
        m.offload = !no_offload && bf[t] - end_fwd - 1 >= 2;
        if (T->kind == VD_T_ACT && T->unit >= 0)
            for (int k = 0; k < net->layers[T->layer].n_in; k++) {
                int u = p->layers[T->unit].in_t[k];
                if (u >= 0 && u != t && m.n_src < VD_MAX_INPUTS) m.src[m.n_src++] = u;
            }
        if (!m.offload && !isfinite(m.rc_s)) {   /* it must stay: resident in its window too */
            range_add(c->mand, end_fwd + 1, bf[t] - 1, T->bytes);
            continue;
        }
        range_add(c->win, end_fwd + 1, bf[t] - 1, T->bytes);
        c->fm[c->n_fm++] = m;
    }
    for (int i = 0; i < L; i++)   /* saved state: from its forward to its backward step (none
                                     for a no_grad layer: its backward does not run) */
        if (p->layers[i].aux >= 0)
            range_add(c->mand, i, net->layers[p->layers[i].layer].no_grad ? i : 2 * L - 1 - i,
                      p->tensors[p->layers[i].aux].bytes);
    for (int s = 1; s <= S; s++) { c->mand[s] += c->mand[s - 1]; c->win[s] += c->win[s - 1]; }
    uint64_t persistent = persistent_bytes(p);
    c->pre[0] = 0;
    for (int s = 0; s < S; s++) {
        bool bwd = s >= L;
        int i = bwd ? 2 * L - 1 - s : s;
        int li = p->layers[i].layer;
        /* (an add's backward is counted as nothing, a no_grad layer's is nothing) */
        bool add_bwd = bwd && (vd_op_table[net->layers[li].op].bwd_is_dy ||
                               net->layers[li].no_grad);
        int set[BOUND_MAX_T], n = add_bwd ? 0 : pass_set(net, p, i, bwd, set);
        uint64_t R = persistent + (uint64_t)c->mand[s] + set_bytes(p, set, n, true);
        uint64_t ws = add_bwd ? 0 : least_ws(prof, p, i, bwd);
        if (R > budget || ws > budget - R) return false;
        c->fixed[s] = R + ws;
        c->res[s] = R;
        c->pass[s] = add_bwd ? -1 : i;
        uint64_t fast_ws = 0;
        c->C[s] = add_bwd ? 0.0 : unit_fastest(prof, p, i, bwd, budget - R, &fast_ws);
        c->fast[s] = R + fast_ws;
        c->pre[s + 1] = c->pre[s] + c->C[s];
    }
    return true;
}

/* The least cost of making need bytes absent from maps cand[n] at costs
 * cost[] (per map, all of its bytes), fractionally: the cheapest bytes
 * first. ub (may be NULL): += the same fractions of the maps' pieces
 * (c->piece), c0 INFINITY where a map taken costs that. */
static double fractional_cover(const bctx *c, const int *cand, int n, uint64_t need, plane *ub) {
    cover_heap(c, cand, n);
    double left = (double)need, sum = 0;
    for (int k = 0, h = n; k < n && left > 0; k++) {
        int j = cover_next(c, &h);
        double b = (double)c->fm[cand[j]].bytes;
        double z = b >= left ? left / b : 1.0;
        if (b >= left) { sum += c->cost[j] * left / b; left = 0; }
        else { sum += c->cost[j]; left -= b; }
        if (!ub) continue;
        if (!isfinite(c->cost[j])) ub->c0 = INFINITY;
        ub->c0 += z * c->piece[j].c0;
        ub->cm += z * c->piece[j].cm;
        ub->cl += z * c->piece[j].cl;
    }
    return sum;
}

/* At most BOUND_GRID of the n sorted distinct values v[] (evenly, the
 * first and the last kept) into out; returns their count. */
enum { BOUND_GRID = 6, BOUND_STEPS = 24 };
static int pick_grid(const int *v, int n, int *out) {
    if (n <= BOUND_GRID) { for (int k = 0; k < n; k++) out[k] = v[k]; return n; }
    for (int k = 0; k < BOUND_GRID; k++) out[k] = v[(int)((long)k * (n - 1) / (BOUND_GRID - 1))];
    return BOUND_GRID;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v[n] and drops repeats; returns the new count. */
static int distinct(int *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_int);
    int m = 0;
    for (int k = 0; k < n; k++)
        if (m == 0 || v[m - 1] != v[k]) v[m++] = v[k];
    return m;
}

/* One figure of step s's copies' bound (bound.c's head): the maps
 * cand[n] (need bytes of them absent), the windows k1 < s < k2, the weights
 * mu and l. ub (may be NULL): a plane no less than the figure at any
 * weights with the same windows (the figure is concave in them: each map's
 * cost a minimum of linear pieces, the cover a least sum over fractions;
 * so the pieces each cost takes here, in the fractions its cover takes,
 * bound it everywhere), exact here. */
static double step_figure(const bctx *c, int s, int n, uint64_t need, double readback, int k1,
                          int k2, double mu, double l, plane *ub) {
    double base = mu * c->pre[k1 + 1] + (1.0 - mu) * c->pre[s] + c->C[s] +
                  (1.0 - l) * (c->pre[k2] - c->pre[s + 1]) + (c->pre[c->S] - c->pre[k2]) +
                  readback;
    for (int k = 0; k < n; k++) {
        const fmap *f = &c->fm[c->cand[k]];
        double off = f->offload ? (f->prod >= k1 ? mu * f->d2h_s : 0.0) +
                                  (f->bwd_first <= k2 ? l * f->h2d_s : 0.0)
                                : INFINITY;
        double rc = isfinite(f->rc_s) ? (1.0 - l) * f->rc_s : INFINITY;
        plane po = {0.0, f->prod >= k1 ? f->d2h_s : 0.0, f->bwd_first <= k2 ? f->h2d_s : 0.0};
        plane pr = {f->rc_s, 0.0, -f->rc_s};
        int u = c->dead[k];
        if (isfinite(rc) && u >= 0) {   /* its source must come back too, or stay */
            const tmap *su = &c->tm[u];
            double share = 1.0 / c->n_dead[u], kept_b = (double)f->bytes - share * (double)su->bytes;
            double kept = kept_b > 0 ? rc * (double)f->bytes / kept_b : INFINITY;
            double back = (su->prod >= k1 ? mu * su->d2h_s : 0.0) +
                          (f->bwd_first <= k2 ? l * su->h2d_s : 0.0);
            plane pb = {0.0, su->prod >= k1 ? su->d2h_s : 0.0, f->bwd_first <= k2 ? su->h2d_s : 0.0};
            if (isfinite(su->rc_s) && (1.0 - l) * su->rc_s < back) {
                back = (1.0 - l) * su->rc_s;
                pb = (plane){su->rc_s, 0.0, -su->rc_s};
            }
            double timed = rc + share * back;
            if (kept < timed) {
                double r = (double)f->bytes / kept_b;
                pr = (plane){f->rc_s * r, 0.0, -f->rc_s * r};
            } else {
                pr = (plane){pr.c0 + share * pb.c0, share * pb.cm, pr.cl + share * pb.cl};
            }
            rc = kept < timed ? kept : timed;
        }
        c->cost[k] = off < rc ? off : rc;
        c->by_rc[k] = !(off < rc);
        c->piece[k] = off < rc ? po : pr;
    }
    if (ub)
        *ub = (plane){c->pre[s] + c->C[s] + (c->pre[k2] - c->pre[s + 1]) +
                          (c->pre[c->S] - c->pre[k2]) + readback,
                      c->pre[k1 + 1] - c->pre[s], -(c->pre[k2] - c->pre[s + 1])};
    return base + fractional_cover(c, c->cand, n, need, ub);
}

/* The planes ub[n] (step_figure's, at the windows of the figure asked)
 * show that the figure at weights (mu, l) is no more than best: with a
 * margin for the rounding of the planes and of the figure, far above it. */
static bool planes_below(const plane *ub, int n, double mu, double l, double best, double scale) {
    for (int k = 0; k < n; k++) {
        double v = ub[k].c0 + ub[k].cm * mu + ub[k].cl * l;
        if (v + 1e-9 * (fabs(ub[k].c0) + fabs(ub[k].cm) + fabs(ub[k].cl) + scale) <= best)
            return true;
    }
    return false;
}

/* The best figure's arguments of step_bound: the windows and the weights. */
typedef struct fig_at { int k1, k2; double mu, l; } fig_at;

/* The copies' bound at step s (the maps absent there: need bytes): the
 * largest figure over a grid of k1, k2 and the weights, then over the
 * weights near the best of them (a pattern search: the figure is concave in
 * the weights, a minimum of linear functions; every point is a bound, so
 * where the search stops only decides how tight). from (may be NULL): no
 * grid, the weights' search from these arguments. *at (may be NULL): the
 * best figure's arguments; c->cand then holds step s's *n_cand maps. */
static double step_bound(const bctx *c, int s, uint64_t need, double readback, int *vals,
                         const fig_at *from, fig_at *at, int *n_cand) {
    int n = 0;
    for (int k = 0; k < c->n_fm; k++)
        if (c->fm[k].fwd_last < s && s < c->fm[k].bwd_first) c->cand[n++] = k;
    if (n_cand) *n_cand = n;
    if (n == 0) return 0.0;   /* cannot be: need > 0 comes from these maps */
    /* each candidate's source that is dead at s (no use at or after s: a
     * recompute after s needs it kept, brought back or recomputed), shared
     * by the candidates that have it */
    for (int k = 0; k < n; k++) {
        const fmap *f = &c->fm[c->cand[k]];
        c->dead[k] = -1;
        for (int j = 0; j < f->n_src; j++)
            if (c->tm[f->src[j]].last < s) {
                c->dead[k] = c->dead[k] == -1 ? f->src[j] : -2;
                c->n_dead[f->src[j]] = 0;
            }
    }
    for (int k = 0; k < n; k++)
        if (c->dead[k] >= 0) c->n_dead[c->dead[k]]++;
    int g1[BOUND_GRID + 1], g2[BOUND_GRID + 2], n1, n2, m = 0;
    for (int k = 0; k < n; k++) vals[m++] = c->fm[c->cand[k]].prod;
    m = distinct(vals, m);
    n1 = pick_grid(vals, m, g1);
    g1[n1++] = s - 1;
    m = 0;
    for (int k = 0; k < n; k++)
        if (c->fm[c->cand[k]].bwd_first - 1 > s) vals[m++] = c->fm[c->cand[k]].bwd_first - 1;
    m = distinct(vals, m);
    n2 = pick_grid(vals, m, g2);
    g2[n2++] = s + 1;
    g2[n2++] = c->S - 1;
    double best = 0, bmu = 0, bl = 0;
    int bk1 = s - 1, bk2 = s + 1;
    /* A figure that step_figure's planes (at the same windows) show is no
     * more than the best so far is not worked out: it would not be taken
     * (only a larger one is), so the bound and its arguments are those of
     * the whole grid and search (no figure exceeds an infinite best). The
     * planes of the windows of the best go on to the pattern search. */
    enum { MAX_PLANES = 64 };
    plane ub[MAX_PLANES], bub[MAX_PLANES];
    int nbub = 0;
    double scale = c->pre[c->S];
    if (from) {
        n1 = 0;
        bk1 = from->k1; bk2 = from->k2; bmu = from->mu; bl = from->l;
        best = step_figure(c, s, n, need, readback, bk1, bk2, bmu, bl, &bub[nbub++]);
    }
    for (int a = 0; a < n1; a++)
        for (int b = 0; b < n2; b++) {
            int nub = 0;
            bool improved = false;
            for (int mi = 0; mi <= 4; mi++)
                for (int li = 0; li <= 4; li++) {
                    int k1 = g1[a], k2 = g2[b];
                    double mu = 0.25 * mi, l = 0.25 * li;
                    if (k1 > s - 1 || k2 < s + 1 || k2 > c->S - 1 || (mu == 0 && a > 0)) continue;
                    if (!(best < INFINITY) || planes_below(ub, nub, mu, l, best, scale + best)) continue;
                    double v = step_figure(c, s, n, need, readback, k1, k2, mu, l, &ub[nub++]);
                    if (v > best) { best = v; bk1 = k1; bk2 = k2; bmu = mu; bl = l; improved = true; }
                }
            if (improved) {
                memcpy(bub, ub, (size_t)nub * sizeof *ub);
                nbub = nub;
            }
        }
    for (double h = 0.125; h >= 1.0 / 64; h /= 2) {
        bool moved = true;
        for (int it = 0; moved && it < 8; it++) {
            moved = false;
            for (int dm = -1; dm <= 1; dm++)
                for (int dl = -1; dl <= 1; dl++) {
                    double mu = bmu + dm * h, l = bl + dl * h;
                    if ((dm == 0 && dl == 0) || mu < 0 || mu > 1 || l < 0 || l > 1) continue;
                    if (!(best < INFINITY) || planes_below(bub, nbub, mu, l, best, scale + best))
                        continue;
                    plane pl;
                    double v = step_figure(c, s, n, need, readback, bk1, bk2, mu, l, &pl);
                    if (nbub < MAX_PLANES) bub[nbub++] = pl;
                    if (v > best) { best = v; bmu = mu; bl = l; moved = true; }
                }
        }
    }
    if (at) *at = (fig_at){bk1, bk2, bmu, bl};
    if (n_cand) *n_cand = n;
    return best;
}

static int bopt_cmp(const void *a, const void *b) {
    const bopt *x = a, *y = b;
    return x->t != y->t ? (x->t < y->t ? -1 : 1) : (x->ws < y->ws ? -1 : x->ws > y->ws);
}

/* Step s's copies' bound with its pass's option chosen together with the
 * absent maps (bound.c's head): the least, over the options o whose
 * workspace fits beside R(s), of step_bound's figure with C(s) the time of
 * o and M(s) counting o's workspace; and never below the figure with the
 * least workspace and the fastest time (each is a bound: every plan runs
 * some option at s). Options in the order of their time; one with no less
 * workspace than a faster one is no lower, and once an option's time alone
 * (its figure with nothing absent) reaches the least so far, no later one
 * is lower. */
static double joint_step_bound(const vd_profile *prof, const vd_plan *p, bctx *c, int s,
                               uint64_t budget, double readback, int *vals) {
    uint64_t in = c->fixed[s] + (uint64_t)c->win[s];
    fig_at at;
    bool have_at = in > budget;
    double plain = have_at ? step_bound(c, s, in - budget, readback, vals, NULL, &at, NULL) : 0.0;
    int u = c->pass[s];
    if (u < 0) return plain;
    bopt o[VD_PROFILE_MAX_ALGOS];
    int n = pass_options(prof, p, u, s >= p->n_units, budget - c->res[s], o);
    qsort(o, (size_t)n, sizeof *o, bopt_cmp);
    double best = INFINITY, C_s = c->C[s], rest = c->pre[c->S] - C_s + readback;
    uint64_t least_ws = UINT64_MAX;
    for (int k = 0; k < n && rest + o[k].t < best; k++) {
        if (o[k].ws >= least_ws) continue;
        least_ws = o[k].ws;
        uint64_t in_o = c->res[s] + o[k].ws + (uint64_t)c->win[s];
        c->C[s] = o[k].t;
        double v = rest + o[k].t;
        if (in_o > budget) {
            v = step_bound(c, s, in_o - budget, readback, vals, have_at ? &at : NULL, &at, NULL);
            have_at = true;
        }
        c->C[s] = C_s;
        if (v < best) best = v;
    }
    return best > plain && isfinite(best) ? best : plain;
}

/* The maps the relaxation recomputes at step s (need bytes must leave), at
 * its best figure there (step_bound's, returned in *fig_s): the fractional
 * cover's maps, cheapest per byte first until need is covered (the last one
 * partly covered counted in), those priced at their recompute marked in
 * rc_t[tensor]; returns how many. */
static int cover_recompute(const bctx *c, int s, uint64_t need, double readback, int *vals,
                           bool *rc_t, double *fig_s) {
    fig_at at;
    int n = 0;
    *fig_s = step_bound(c, s, need, readback, vals, NULL, &at, &n);
    if (n == 0) return 0;
    step_figure(c, s, n, need, readback, at.k1, at.k2, at.mu, at.l, NULL);   /* its costs */
    cover_heap(c, c->cand, n);
    double left = (double)need;
    int m = 0;
    for (int q = 0, h = n; q < n && left > 0; q++) {
        int k = cover_next(c, &h);
        const fmap *f = &c->fm[c->cand[k]];
        left -= (double)f->bytes;
        if (c->by_rc[k] && isfinite(c->cost[k])) { rc_t[f->t] = true; m++; }
    }
    return m;
}

/* vd_plan_copy_bound; rc_t (may be NULL, [p->n_tensors], cleared here): the
 * recompute set of vdp_bound_recompute_set, and then only the step where
 * most must leave gets the copies' figure (out->copies_s: that step's). */
static int copy_bound(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                      uint64_t budget, bool no_offload, vd_plan_bound *out, bool *rc_t,
                      vd_err *e) {
    memset(out, 0, sizeof *out);
    if (rc_t) memset(rc_t, 0, (size_t)p->n_tensors * sizeof *rc_t);
    out->leave_step = out->copies_step = -1;
    if (!bound_applies(net, prof, p)) return VD_OK;
    if (budget == 0) budget = p->budget;
    out->compute_s = vd_plan_lower_bound(net, prof, p, budget);
    out->bound_s = out->compute_s;
    if (!isfinite(out->compute_s)) return VD_OK;
    int L = p->n_units, S = 2 * L, nt = p->n_tensors > 0 ? p->n_tensors : 1;
    bctx c = {.S = S};
    c.C = vd_malloc((size_t)S * sizeof *c.C, NULL);
    c.pre = vd_malloc((size_t)(S + 1) * sizeof *c.pre, NULL);
    c.mand = vd_malloc((size_t)(S + 1) * sizeof *c.mand, NULL);
    c.win = vd_malloc((size_t)(S + 1) * sizeof *c.win, NULL);
    c.fixed = vd_malloc((size_t)S * sizeof *c.fixed, NULL);
    c.res = vd_malloc((size_t)S * sizeof *c.res, NULL);
    c.pass = vd_malloc((size_t)S * sizeof *c.pass, NULL);
    c.fast = vd_malloc((size_t)S * sizeof *c.fast, NULL);
    c.fm = vd_malloc((size_t)nt * sizeof *c.fm, NULL);
    c.tm = vd_calloc((size_t)nt, sizeof *c.tm, NULL);
    c.dead = vd_malloc((size_t)nt * sizeof *c.dead, NULL);
    c.n_dead = vd_malloc((size_t)nt * sizeof *c.n_dead, NULL);
    c.cand = vd_malloc((size_t)nt * sizeof *c.cand, NULL);
    c.cost = vd_malloc((size_t)nt * sizeof *c.cost, NULL);
    c.by_rc = vd_malloc((size_t)nt * sizeof *c.by_rc, NULL);
    c.order = vd_malloc((size_t)nt * sizeof *c.order, NULL);
    c.piece = vd_malloc((size_t)nt * sizeof *c.piece, NULL);
    int *touch = vd_malloc((size_t)nt * 4 * sizeof *touch, NULL);
    int *steps = vd_malloc((size_t)(S + 2) * sizeof *steps, NULL);
    int rc = VD_OK;
    if (!c.C || !c.pre || !c.mand || !c.win || !c.fixed || !c.res || !c.pass || !c.fast || !c.fm || !c.tm ||
        !c.dead || !c.n_dead || !c.cand || !c.cost || !c.by_rc || !c.order || !c.piece || !touch || !steps) {
        rc = vd_errf(e, VD_ENOMEM, "out of memory computing the lower bound");
        goto done;
    }
    if (!step_figures(net, prof, p, budget, no_offload, &c, touch, touch + nt, touch + 2 * nt,
                      touch + 3 * nt)) {
        out->bound_s = INFINITY;
        goto done;
    }
    /* the simulator adds in another order: each figure a little lower */
    double compute = (c.pre[S] + vdp_sgd_s(net, prof)) * (1.0 - 1e-12);
    if (compute > out->bound_s) out->bound_s = compute;
    double readback = prof->dev.launch_s + 4.0 / prof->dev.d2h_bw;
    /* the steps where maps must leave; at most BOUND_STEPS of them evenly,
     * and the one where most must leave, get the copies' bound (each is a
     * bound on its own) */
    int n_over = 0;
    for (int s = 0; s < S; s++) {
        uint64_t in = c.fixed[s] + (uint64_t)c.win[s];
        if (in <= budget) continue;
        steps[n_over++] = s;
        if (in - budget > out->leave_bytes) { out->leave_bytes = in - budget; out->leave_step = s; }
    }
    int n_eval = rc_t ? 0 : n_over < BOUND_STEPS ? n_over : BOUND_STEPS;
    for (int k = 0; k < n_eval; k++)   /* in place: the index picked is k or later */
        steps[k] = steps[n_eval > 1 ? (int)((long)k * (n_over - 1) / (n_eval - 1)) : 0];
    if (n_over > 0 && !rc_t) steps[n_eval++] = out->leave_step;
    /* and so does the step where most must leave beside the fastest option
     * (C(s)'s), where the option and the absent maps are chosen together
     * (joint_step_bound), when it is not one of those */
    int most = -1;
    for (int s = 0; s < S && !rc_t; s++) {
        uint64_t in = c.fast[s] + (uint64_t)c.win[s];
        if (in > budget && (most < 0 || in > c.fast[most] + (uint64_t)c.win[most])) most = s;
    }
    for (int k = 0; k < n_eval && most >= 0; k++)
        if (steps[k] == most) most = -1;
    if (most >= 0) steps[n_eval++] = most;
    for (int k = 0; k < n_eval; k++) {
        int s = steps[k];
        double v = joint_step_bound(prof, p, &c, s, budget, readback, touch);
        if (v * (1.0 - 1e-12) > out->copies_s) { out->copies_s = v * (1.0 - 1e-12); out->copies_step = s; }
    }
    if (rc_t && out->leave_step >= 0) {
        int s = out->leave_step;
        double v = 0;
        cover_recompute(&c, s, c.fixed[s] + (uint64_t)c.win[s] - budget, readback, touch, rc_t, &v);
        out->copies_s = v * (1.0 - 1e-12);
        out->copies_step = s;
    }
    if (out->copies_s > out->bound_s) out->bound_s = out->copies_s;
done:
    vd_free(c.C); vd_free(c.pre); vd_free(c.mand); vd_free(c.win); vd_free(c.fixed); vd_free(c.res); vd_free(c.pass); vd_free(c.fast);
    vd_free(c.fm); vd_free(c.tm); vd_free(c.dead); vd_free(c.n_dead); vd_free(c.cand); vd_free(c.cost); vd_free(c.by_rc); vd_free(c.order); vd_free(c.piece);
    vd_free(touch); vd_free(steps);
    return rc;
}

/* prof as a replayed iteration runs its ops (sim.c's captured plans): every
 * op's time as vd_device_replayed_s gives it, the launch itself
 * graph_launch_s. Its layers are the caller's to free. */
static int replayed_profile(const vd_profile *prof, vd_profile *out, vd_err *e) {
    *out = *prof;
    size_t n = (size_t)prof->n_layers;
    out->layers = vd_malloc((n > 0 ? n : 1) * sizeof *out->layers, NULL);
    if (!out->layers) return vd_errf(e, VD_ENOMEM, "out of memory computing the lower bound");
    memcpy(out->layers, prof->layers, n * sizeof *out->layers);
    const vd_device_params *d = &prof->dev;
    out->dev.launch_s = d->graph_launch_s;
    for (size_t i = 0; i < n; i++) {
        vd_profile_layer *pl = &out->layers[i];
        for (int k = 0; k < pl->n_algos; k++) {
            vd_profile_algo *a = &pl->algos[k];
            a->fwd_s = vd_device_replayed_s(d, a->fwd_s);
            a->bwd_s = vd_device_replayed_s(d, a->bwd_s);
            if (a->bwd_alone_s > 0) a->bwd_alone_s = vd_device_replayed_s(d, a->bwd_alone_s);
            for (int q = 0; q < a->n_chunks; q++) {
                a->chunks[q].fwd_s = vd_device_replayed_s(d, a->chunks[q].fwd_s);
                a->chunks[q].bwd_s = vd_device_replayed_s(d, a->chunks[q].bwd_s);
            }
        }
        for (int q = 0; q < pl->n_chunks; q++) {
            pl->chunks[q].fwd_s = vd_device_replayed_s(d, pl->chunks[q].fwd_s);
            pl->chunks[q].bwd_s = vd_device_replayed_s(d, pl->chunks[q].bwd_s);
        }
        if (pl->rc_s > 0) pl->rc_s = vd_device_replayed_s(d, pl->rc_s);
    }
    return VD_OK;
}

int vd_plan_copy_bound(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                       uint64_t budget, vd_plan_bound *out, vd_err *e) {
    int rc = copy_bound(net, prof, p, budget, false, out, NULL, e);
    if (rc || vd_device_launch_cut(&prof->dev) == 0 || !vd_graph_captures(p->graph, 0) ||
        !bound_applies(net, prof, p))
        return rc;
    /* the plans that offload nothing run replayed (vd_plan_opts.graph):
     * their own bound, each op's launch cut, no map offloaded */
    vd_profile rp;
    vd_plan_bound b;
    if ((rc = replayed_profile(prof, &rp, e))) return rc;
    rc = copy_bound(net, &rp, p, budget, true, &b, NULL, e);
    vd_free(rp.layers);
    if (!rc && b.bound_s < out->bound_s) *out = b;
    return rc;
}

int vdp_bound_recompute_set(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                            uint64_t budget, bool *rc_t, vd_plan_bound *out, vd_err *e) {
    vd_plan_bound b;
    int rc = copy_bound(net, prof, p, budget, false, out ? out : &b, rc_t, e);
    if (rc) memset(rc_t, 0, (size_t)p->n_tensors * sizeof *rc_t);
    return rc;
}
