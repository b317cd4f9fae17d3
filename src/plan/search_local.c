/* search_local.c — the auto search's local search from a plan that fits:
 * refine (each decision the other ways), the trades (an offloaded map kept,
 * repaired by greedy rounds; or a pair), the shifts (one map's copies for
 * another's) and the kicks (iterated local search: random changes, a
 * focused refine, kept when faster). */
#include <stdlib.h>
#include <string.h>
#include "plan/search.h"

/* stalls below this share of the iteration: none (refine's slower options,
 * the trades' pairs) */
static const double AUTO_NO_STALL = 1e-4;

/* The dispositions a tensor can take, in the order refine tries them. */
static const vd_disp disp_alts[3] = {VD_DISP_KEEP, VD_DISP_OFFLOAD, VD_DISP_RECOMPUTE};

/* ---- refine ------------------------------------------------------------- */

/* Refine's positions: disposition key k at k, the options of layer j (both
 * passes) at j + 1, the position of the map layer j writes. */
static int algo_pos(const actx *c, int k) { return k % c->L + 1; }

/* Mark positions within AUTO_LOOK_WINDOW of pos in look[L + 1]. */
enum { AUTO_LOOK_WINDOW = 8 };
static void look_around(const actx *c, bool *look, int pos) {
    int w = AUTO_LOOK_WINDOW;
    int lo = pos - w < 0 ? 0 : pos - w, hi = pos + w > c->L ? c->L : pos + w;
    for (int q = lo; q <= hi; q++) look[q] = true;
}

/* Mark in look the windows around every position where the current
 * configuration differs from (disp, algos). */
static void look_changes(const actx *c, bool *look, const vd_disp *disp, const int *algos) {
    memset(look, 0, (size_t)(c->L + 1) * sizeof *look);
    for (int k = 0; k <= c->L; k++)
        if (c->disp[k] != disp[k]) look_around(c, look, k);
    for (int k = 0; k < 2 * c->L; k++)
        if (c->algos[k] != algos[k]) look_around(c, look, algo_pos(c, k));
}

static int cmp_gkey(const void *a, const void *b) {
    const gkey *x = a, *y = b;
    if (x->g != y->g) return x->g > y->g ? -1 : 1;
    return x->k - y->k;
}

/* The disposition keys in the order refine tries them (order[L + 1]). by_cost
 * false: in layer order. by_cost: by what the current decision costs,
 * dearest first (a recompute: its writers' forward times; an offload: its
 * copy time times P's stall share, the part of its copies not hidden; a
 * kept map: nothing), so that the likeliest gains come first, and a refine
 * the effort cap stops has tried them. */
static void refine_order(actx *c, const vd_plan *P, bool by_cost, int *order) {
    gkey *g = c->gk;
    double share = P->sim.iter_s > 0 ? P->sim.stall_s / P->sim.iter_s : 0.0;
    for (int k = 0; k <= c->L; k++) {
        double v = 0;
        int t = by_cost ? tensor_of(c, P, k) : -1;
        if (t >= 0 && c->disp[k] == VD_DISP_RECOMPUTE) {
            for (int j = k - 1; j < c->L; j++)
                if (j >= 0 && P->layers[j].y == t) v += vd_profile_rc_s(c->prof, j, c->algos[j]);
        } else if (t >= 0 && c->disp[k] == VD_DISP_OFFLOAD) {
            v = share * (double)P->tensors[t].bytes / c->prof->dev.h2d_bw;
        }
        g[k] = (gkey){v, k};
    }
    if (by_cost) qsort(g, (size_t)c->L + 1, sizeof *g, cmp_gkey);
    for (int k = 0; k <= c->L; k++) order[k] = g[k].k;
}

/* Try the alternatives of decisions of a fitting *P; keep faster ones; up
 * to 3 passes, while one keeps a change. The dispositions first, in
 * refine_order's order (by_cost), then the options. focus NULL: every pass
 * tries every decision. focus ([L + 1], the positions of algo_pos): a focused refine
 * (after a kick): the first pass tries the decisions at those positions, a
 * later one only those within AUTO_LOOK_WINDOW of a change the pass before
 * kept (the "don't look" bits of iterated local search). A kick's full
 * refine cost as much as a start's; most of what it kept was near the kick.
 * A full refine keeps full passes (don't-look passes after a full first
 * pass end in slower plans: docs/planner.md, "Local search"). */
int search_refine(actx *c, vd_plan *P, const bool *focus, bool by_cost, vd_err *e) {
    bool *look = c->look, *next = c->look_next;
    size_t nl = (size_t)(c->L + 1) * sizeof *look;
    if (focus) memcpy(look, focus, nl);
    else for (int q = 0; q <= c->L; q++) look[q] = true;
    for (int pass = 0; pass < 3 && !at_bound(c, P); pass++) {
        bool improved = false;
        memset(next, 0, nl);
        refine_order(c, P, by_cost, c->rorder);
        for (int r = 0; r <= c->L && !spent(c); r++) {
            int k = c->rorder[r];
            int t = c->fixed[k] || !look[k] ? -1 : tensor_of(c, P, k);
            if (t < 0) continue;
            /* steps it could be absent (offload needs two, recompute one) */
            const vd_tensor *T = &P->tensors[t];
            int gap = T->bwd_first >= 0 && T->fwd_last >= 0 ? T->bwd_first - T->fwd_last - 1 : 0;
            if (gap < 1 && c->disp[k] == VD_DISP_KEEP) continue;
            for (int q = 0; q < 3; q++) {
                vd_disp cur = c->disp[k], d = disp_alts[q];
                if (d == cur || (d == VD_DISP_RECOMPUTE && !c->can_rc[k]) ||
                    (d == VD_DISP_OFFLOAD && gap < 2))
                    continue;
                c->disp[k] = d;
                vd_plan Q;
                vd_err te = {0};
                bool better;
                int rc = search_eval_beats(c, P->sim.iter_s, &Q, &better, &te);
                if (rc) { c->disp[k] = cur; *e = te; return rc; }
                if (better) {
                    vdp_plan_release(P);
                    *P = Q;
                    improved = true;
                    look_around(c, next, k);
                } else {
                    c->disp[k] = cur;
                }
            }
        }
        for (int k = 0; c->algo_free && k < 2 * c->L && !spent(c); k++) {
            if (!look[algo_pos(c, k)]) continue;
            /* the other options of this pass, fastest first: a faster one,
             * or a slower one with less workspace (its memory can let a
             * prefetch start earlier and remove a stall that costs more),
             * unless the plan does not stall: its compute stream runs back
             * to back, which a slower option only adds to (ResNet-152 b256
             * bf16 on its measured profile: 100-140 such builds in a
             * start's first pass, a quarter of its effort, none kept);
             * the first that fits and predicts a faster iteration is kept */
            int cur = c->algos[k], n = 0, idx[VD_PROFILE_MAX_ALGOS];
            const vd_profile_layer *pl = &c->prof->layers[k % c->L];
            bool stalls = P->sim.stall_s > AUTO_NO_STALL * P->sim.iter_s;
            for (int a = 0; a < pl->n_algos; a++)
                if (a != cur && (algo_time(c, k, a) < algo_time(c, k, cur) ||
                                 (stalls && algo_ws(c, k, a) < algo_ws(c, k, cur))))
                    idx[n++] = a;
            for (int a = 1; a < n; a++)
                for (int b = a; b > 0 && algo_time(c, k, idx[b]) < algo_time(c, k, idx[b - 1]); b--) {
                    int tmp = idx[b]; idx[b] = idx[b - 1]; idx[b - 1] = tmp;
                }
            for (int a = 0; a < n; a++) {
                c->algos[k] = idx[a];
                vd_plan Q;
                vd_err te = {0};
                bool better;
                int rc = search_eval_beats(c, P->sim.iter_s, &Q, &better, &te);
                if (rc) { c->algos[k] = cur; *e = te; return rc; }
                if (better) {
                    vdp_plan_release(P);
                    *P = Q;
                    improved = true;
                    look_around(c, next, algo_pos(c, k));
                    break;
                }
                c->algos[k] = cur;
            }
        }
        if (!improved) break;
        if (!focus) for (int q = 0; q <= c->L; q++) next[q] = true;
        memcpy(look, next, nl);
    }
    return VD_OK;
}

/* ---- trades and shifts -------------------------------------------------- */

/* Trades: for each tensor offloaded, keep it instead; when the plan then
 * does not fit, repair it by AUTO_SWAP_REPAIR greedy rounds without offload
 * moves (recomputes, leaner options elsewhere; the tensor itself stays
 * kept); keep the result, refined, when it fits and predicts a faster
 * iteration. Refine alone cannot trade one map's copies for another's
 * recompute (keeping the map alone breaks the budget, recomputing the other
 * alone only adds time), and greedy offloads the biggest maps first, while
 * the copies still look free.
 *
 * A plan that does not stall runs its compute stream back to back: such a
 * trade can only add to it (the repair recomputes or takes leaner options,
 * the kept map only takes memory). There the trade is a pair instead: keep
 * the offloaded map and offload a recomputed one (its recompute leaves the
 * compute stream), repaired by greedy rounds that may offload too, refined:
 * it moves between two basins in one step where the kicks' random changes
 * rarely do. Each pair is screened (search_eval_repairable: one whose
 * unplaced replay cannot beat the plan is not placed) and the pairs stop at
 * the first kept; at most AUTO_PAIRS per offloaded map, the recomputed maps
 * nearest it first. Only the trades before the kicks try pairs, and only
 * until the search's work has grown by AUTO_PAIR_WORK there (each pair that
 * fits costs a refine). docs/planner.md, "Local search", has the measured
 * cases. */
enum { AUTO_SWAP_REPAIR = 3, AUTO_PAIRS = 4 };
static const double AUTO_PAIR_SLOWER = 0.3; /* a pair this much slower is not refined */

/* The pairs of offloaded map k (kept) with recomputed maps (offloaded), from
 * the configuration bd/ba of *P; the first that fits and beats *P after its
 * refine replaces *P (*kept). The configuration is bd/ba's again unless
 * kept. */
static int pair_trades(actx *c, vd_plan *P, int k, const vd_disp *bd, const int *ba, bool *kept,
                       vd_err *e) {
    int L = c->L, rc = VD_OK;
    *kept = false;
    for (int tried = 0, dist = 1;
         dist <= L && tried < AUTO_PAIRS && !*kept && rc == VD_OK && !spent(c); dist++) {
        for (int side = 0; side < 2 && tried < AUTO_PAIRS && !*kept; side++) {
            int u = side ? k + dist : k - dist;
            if (u < 0 || u > L || bd[u] != VD_DISP_RECOMPUTE || c->fixed[u]) continue;
            tried++;
            config_copy(c, c->disp, c->algos, bd, ba);
            c->disp[k] = VD_DISP_KEEP;
            c->disp[u] = VD_DISP_OFFLOAD;
            vd_plan Q;
            vd_err te = {0};
            int qrc = search_eval_repairable(c, P->sim.iter_s * (1.0 - 1e-9), &Q, &te);
            if (qrc == VDP_SCREENED) continue;
            if (qrc != VD_OK && qrc != VD_EBUDGET) { *e = te; rc = qrc; break; }
            c->fixed[k] = c->fixed[u] = true;
            if (!Q.feasible) rc = search_greedy(c, &Q, AUTO_SWAP_REPAIR, e);
            if (!rc && Q.feasible && Q.sim.iter_s < P->sim.iter_s * (1.0 + AUTO_PAIR_SLOWER))
                rc = search_refine(c, &Q, NULL, true, e);
            c->fixed[k] = c->fixed[u] = false;
            if (!rc && Q.feasible && Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9)) {
                vdp_plan_release(P);
                *P = Q;
                *kept = true;
            } else {
                vdp_plan_release(&Q);
            }
        }
    }
    if (!*kept) config_copy(c, c->disp, c->algos, bd, ba);
    return rc;
}

int search_trades(actx *c, vd_plan *P, vd_err *e) {
    int L = c->L, rc = VD_OK;
    vd_disp *bd = vd_malloc((size_t)(L + 1) * sizeof *bd, NULL);
    int *ba = vd_malloc(2 * (size_t)L * sizeof *ba, NULL);
    if (!bd || !ba) { vd_free(bd); vd_free(ba); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    for (int k = 0; k <= L && rc == VD_OK && !at_bound(c, P) && !done(c) && !spent(c); k++) {
        if (c->fixed[k] || c->disp[k] != VD_DISP_OFFLOAD) continue;
        search_phase(c, "trades, layer %d of %d", k + 1, L + 1);
        config_copy(c, bd, ba, c->disp, c->algos);
        if (P->sim.stall_s <= AUTO_NO_STALL * P->sim.iter_s) {
            if (c->work >= c->pair_until) break;
            bool kept;
            rc = pair_trades(c, P, k, bd, ba, &kept, e);
            continue;
        }
        c->disp[k] = VD_DISP_KEEP;
        vd_plan Q;
        vd_err te = {0};
        int qrc = search_eval_repairable(c, P->sim.iter_s * (1.0 - 1e-9), &Q, &te);
        if (qrc == VDP_SCREENED) { config_copy(c, c->disp, c->algos, bd, ba); continue; }
        if (qrc != VD_OK && qrc != VD_EBUDGET) { *e = te; rc = qrc; break; }
        if (!Q.feasible) {
            c->no_offload_moves = true;
            c->fixed[k] = true;
            rc = search_greedy(c, &Q, AUTO_SWAP_REPAIR, e);
            c->fixed[k] = false;
            c->no_offload_moves = false;
            if (rc) { vdp_plan_release(&Q); break; }
        }
        bool keep = Q.feasible && Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9);
        /* refined with the map kept (refine would else undo the trade) */
        c->fixed[k] = true;
        if (keep) rc = search_refine(c, &Q, NULL, true, e);
        c->fixed[k] = false;
        if (rc) { vdp_plan_release(&Q); break; }
        if (keep) {
            vdp_plan_release(P);
            *P = Q;
        } else {
            vdp_plan_release(&Q);
            config_copy(c, c->disp, c->algos, bd, ba);
        }
    }
    vd_free(bd);
    vd_free(ba);
    return rc;
}

/* Shifts: an offloaded map kept and a kept map of about its size offloaded
 * instead, in one move (refine changes one decision at a time: keeping the
 * first alone breaks the budget, offloading the second alone only adds
 * copies). "About its size": about_size. The first shift of each offloaded map
 * that fits and predicts a faster iteration is kept; one pass. The trades
 * trade copies for recomputes, these copies of one map for another's (two
 * plans can differ only in which of a few similar maps they offload). */
int search_shifts(actx *c, vd_plan *P, vd_err *e) {
    int L = c->L;
    for (int a = 0; a <= L && !at_bound(c, P) && !spent(c); a++) {
        if (c->fixed[a] || c->disp[a] != VD_DISP_OFFLOAD) continue;
        int ta = tensor_of(c, P, a);
        if (ta < 0) continue;
        double sa = (double)P->tensors[ta].bytes;
        for (int b = 0; b <= L && !spent(c); b++) {
            if (b == a || c->fixed[b] || c->disp[b] != VD_DISP_KEEP) continue;
            int tb = tensor_of(c, P, b);
            if (tb < 0) continue;
            const vd_tensor *T = &P->tensors[tb];
            if (T->bwd_first < 0 || T->fwd_last < 0 || T->bwd_first - T->fwd_last - 1 < 2) continue;
            double sb = (double)T->bytes;
            if (!about_size(sa, sb)) continue;
            c->disp[a] = VD_DISP_KEEP;
            c->disp[b] = VD_DISP_OFFLOAD;
            vd_plan Q;
            vd_err te = {0};
            bool better;
            int rc = search_eval_beats(c, P->sim.iter_s, &Q, &better, &te);
            if (rc) { c->disp[a] = VD_DISP_OFFLOAD; c->disp[b] = VD_DISP_KEEP; *e = te; return rc; }
            if (better) {
                vdp_plan_release(P);
                *P = Q;
                break;
            }
            c->disp[a] = VD_DISP_OFFLOAD;
            c->disp[b] = VD_DISP_KEEP;
        }
    }
    return VD_OK;
}

/* Swaps: a recomputed map that a convolution or fully connected layer
 * writes, kept, and the map its one reader writes (a memory-bound op: batch
 * norm, ReLU, pooling; kept or offloaded) recomputed instead: about the
 * same bytes leave the device, and the re-run reads instead of recomputing
 * the matrix product (ResNets: batch norm's output rebuilt from its
 * convolution's output, not the convolution's output from the map before
 * it). Refine changes one decision at a time and cannot get there: keeping
 * the first alone breaks the budget, recomputing the second alone re-runs
 * both. First every swap at once, then each alone (the first that fits and
 * predicts a faster iteration kept); one pass. */
static bool dear_op(vd_op op) { return op == VD_OP_CONV || op == VD_OP_FC; }

/* The disposition index of the one layer that reads layer a - 1's output,
 * when swapping a with it is a swap (above); else -1. */
static int swap_partner(const actx *c, int a) {
    if (a < 1 || c->fixed[a] || c->disp[a] != VD_DISP_RECOMPUTE ||
        !dear_op(c->net->layers[a - 1].op) || vdp_n_consumers(c->net, a - 1) != 1)
        return -1;
    for (int j = a; j < c->L; j++) {
        const vd_layer *l = &c->net->layers[j];
        bool reads = false;
        for (int q = 0; q < l->n_in; q++) reads |= l->in[q] == a - 1;
        if (!reads) continue;
        bool ok = !c->fixed[j + 1] && c->can_rc[j + 1] && !dear_op(l->op) &&
                  (c->disp[j + 1] == VD_DISP_KEEP || c->disp[j + 1] == VD_DISP_OFFLOAD);
        return ok ? j + 1 : -1;
    }
    return -1;
}

/* The swaps of dispositions a0..a1 at once, kept in *P when the result fits
 * and predicts a faster iteration, else undone (bd: scratch [L + 1]). */
static int try_swaps(actx *c, vd_plan *P, int a0, int a1, vd_disp *bd, vd_err *e) {
    memcpy(bd, c->disp, (size_t)(c->L + 1) * sizeof *bd);
    int n = 0;
    for (int a = a0; a <= a1; a++) {
        int b = swap_partner(c, a);
        if (b < 0) continue;
        c->disp[a] = VD_DISP_KEEP;
        c->disp[b] = VD_DISP_RECOMPUTE;
        n++;
    }
    if (n == 0) return VD_OK;
    vd_plan Q;
    bool better;
    int rc = search_eval_beats(c, P->sim.iter_s, &Q, &better, e);
    if (!rc && better) {
        vdp_plan_release(P);
        *P = Q;
    } else {
        memcpy(c->disp, bd, (size_t)(c->L + 1) * sizeof *bd);
    }
    return rc;
}

int search_swaps(actx *c, vd_plan *P, vd_err *e) {
    vd_disp *bd = vd_malloc((size_t)(c->L + 1) * sizeof *bd, NULL);
    if (!bd) return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    int rc = try_swaps(c, P, 1, c->L, bd, e);
    for (int a = 1; a <= c->L && !rc && !at_bound(c, P) && !spent(c); a++)
        rc = try_swaps(c, P, a, a, bd, e);
    vd_free(bd);
    return rc;
}

/* ---- kicks -------------------------------------------------------------- */

/* Iterated local search: refine stops at a configuration no single change
 * improves. Perturb the best one (AUTO_KICK_MOVES random changes of a
 * disposition or a pass's option, a fixed-seed generator: the same inputs
 * give the same plan), refine that, and keep it when it fits and predicts a
 * faster iteration; AUTO_KICKS rounds. The refine after a kick tries first
 * only the decisions within AUTO_LOOK_WINDOW positions of the changed ones,
 * then only those near what it changed (refine's focus): a full refine per
 * kick cost as much as a start's, and what it kept was mostly near the kick.
 * Then the same with repair: a kicked
 * configuration that does not fit gets AUTO_KICK_REPAIR rounds of greedy
 * before a full refine. That reaches plans that differ in several decisions
 * at once (keeping a big map pays off only with other maps offloaded or
 * recomputed instead), but every kick then costs a refine. So both stop,
 * whatever round they are at, once the
 * search's work (c->work: what vdp_build_screened counts, a pure function of
 * the configurations built) passes search_work_limit: the same inputs, the same
 * plan, on any machine; and all of the search stops at AUTO_EFFORT_CAP
 * (docs/planner.md, "Local search": how many kicks each net runs). */
enum { AUTO_KICKS = 60, AUTO_KICK_MOVES = 4, AUTO_KICK_REPAIR = 2 };
static const double AUTO_KICK_SLOWER = 0.3;
static const double AUTO_WORK = AUTO_WORK_BUDGET, AUTO_STALL_SHARE = 0.1, AUTO_STALL_WORK = 10.0,
                    AUTO_EXTEND_GAIN = 0.002;
enum { AUTO_EXTEND_PATIENCE = 3 };

/* The work after which no more kicks start: the budget for the kicks
 * without repair, twice it for those with (they go on from the plan the
 * others reached). */
double search_work_limit(bool repair) { return repair ? 2.0 * AUTO_WORK : AUTO_WORK; }

/* A plan that stalls for more than AUTO_STALL_SHARE of its iteration: the
 * kicks often still find much there, but not everywhere (docs/planner.md,
 * "Local search"). So past its budget (and at least one stretch of AUTO_WORK
 * into the kicks) such a search goes on by another AUTO_WORK while one of
 * the last AUTO_EXTEND_PATIENCE stretches made P faster by at least
 * AUTO_EXTEND_GAIN (the last one, when these kicks have not made P faster
 * at all: start_s), up to AUTO_STALL_WORK times the budget: where the
 * kicks keep gaining it plans as with ten times the budget, where they do
 * not it stops early.
 * *limit, *mark_s, *idle: the work limit, P's time when it was last
 * extended, the stretches in a row that gained too little. */
static bool stalls(const vd_plan *P) { return P->sim.stall_s > AUTO_STALL_SHARE * P->sim.iter_s; }

static bool extend_work(const vd_plan *P, bool repair, double base, double *limit, double *mark_s,
                        int *idle, double start_s) {
    if (!stalls(P)) return false;
    if (*limit + AUTO_WORK > base + AUTO_STALL_WORK * search_work_limit(repair)) return false;
    /* no gain at all since these kicks began: no patience */
    int patience = P->sim.iter_s < start_s * (1.0 - 1e-9) ? AUTO_EXTEND_PATIENCE : 1;
    if (P->sim.iter_s < *mark_s * (1.0 - AUTO_EXTEND_GAIN)) *idle = 0;
    else if (++*idle >= patience) return false;
    *limit += AUTO_WORK;
    *mark_s = P->sim.iter_s;
    return true;
}

int search_kicks(actx *c, vd_plan *P, bool repair, int chain, double base, vd_err *e) {
    int L = c->L, rc = VD_OK;
    vd_disp *bd = vd_malloc((size_t)(L + 1) * sizeof *bd, NULL);
    int *ba = vd_malloc(2 * (size_t)L * sizeof *ba, NULL);
    if (!bd || !ba) { vd_free(bd); vd_free(ba); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    vd_rng r;
    vd_rng_seed(&r, (repair ? 0x7e9a1u : 0x5eedu) + 0x9e37u * (uint64_t)chain, (uint64_t)L);
    double limit = base + search_work_limit(repair), mark_s = P->sim.iter_s, start_s = P->sim.iter_s;
    int idle = 0;   /* stretches in a row that gained too little */
    /* a stalling plan gets at least one stretch of kicks */
    if (stalls(P) && c->work + AUTO_WORK > limit) limit = c->work + AUTO_WORK;
    for (int round = 0; round < AUTO_KICKS && rc == VD_OK; round++) {
        search_phase(c, repair ? "kicks with repair, %d of %d" : "kicks, %d of %d", round + 1, AUTO_KICKS);
        /* the search's work budget is spent */
        if (c->work > limit && !extend_work(P, repair, base, &limit, &mark_s, &idle, start_s)) break;
        if (at_bound(c, P) || spent(c)) break;   /* no kick could be kept */
        config_copy(c, bd, ba, c->disp, c->algos);
        int changed = 0;
        for (int m = 0, tries = 0; m < AUTO_KICK_MOVES && tries < 64; tries++) {
            bool algo = c->algo_free && vd_rng_u32(&r) % 2;
            if (algo) {
                int k = (int)(vd_rng_u32(&r) % (uint32_t)(2 * L));
                int n = c->prof->layers[k % L].n_algos;
                if (n < 2) continue;
                int a = (int)(vd_rng_u32(&r) % (uint32_t)n);
                if (a == c->algos[k]) continue;
                c->algos[k] = a;
            } else {
                int k = (int)(vd_rng_u32(&r) % (uint32_t)(L + 1));
                if (c->fixed[k] || tensor_of(c, P, k) < 0) continue;
                vd_disp d = disp_alts[vd_rng_u32(&r) % 3];
                if (d == c->disp[k] || (d == VD_DISP_RECOMPUTE && !c->can_rc[k])) continue;
                c->disp[k] = d;
            }
            m++;
            changed++;
        }
        vd_plan Q;
        vd_err te = {0};
        /* without repair, a kick known not to fit is dropped unbuilt */
        const memo_ent *known = changed && !repair ? search_memo_find(c) : NULL;
        if (known && !known->feasible) { changed = 0; c->looks++; }
        /* a kick over AUTO_KICK_SLOWER slower is dropped (below): one that
         * cannot beat that is not placed */
        double slower = P->sim.iter_s * (1.0 + AUTO_KICK_SLOWER);
        int qrc = !changed ? VD_EBUDGET
                : repair ? search_eval_repairable(c, slower, &Q, &te) : search_eval_screened(c, slower, &Q, &te);
        if (changed && qrc == VDP_SCREENED) { changed = 0; qrc = VD_EBUDGET; }
        if (changed && qrc != VD_OK && qrc != VD_EBUDGET) { *e = te; rc = qrc; break; }
        bool keep = false;
        if (repair && changed && !Q.feasible && (rc = search_greedy(c, &Q, AUTO_KICK_REPAIR, e))) {
            vdp_plan_release(&Q);
            break;
        }
        /* a kick that costs much is not refined: refine rarely wins it back */
        if (changed && Q.feasible && Q.sim.iter_s > P->sim.iter_s * (1.0 + AUTO_KICK_SLOWER)) {
            vdp_plan_release(&Q);
            changed = 0;
        }
        if (changed && Q.feasible) {
            /* without repair: focused on the kick's changes; with repair
             * (fewer get here, and the repair's changes are far from the
             * kick's) in full (focused there too ended slower) */
            look_changes(c, c->focus, bd, ba);
            if ((rc = search_refine(c, &Q, repair ? NULL : c->focus, true, e))) { vdp_plan_release(&Q); break; }
            keep = Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9);
        }
        if (keep) {
            vdp_plan_release(P);
            *P = Q;
            if ((rc = search_trades(c, P, e))) break;
            if ((rc = search_shifts(c, P, e))) break;
        } else {
            if (changed) vdp_plan_release(&Q);
            config_copy(c, c->disp, c->algos, bd, ba);
        }
    }
    vd_free(bd);
    vd_free(ba);
    return rc;
}
