/* search_greedy.c — the auto search's greedy phase: while a plan does not
 * fit, propose moves that can free memory at the steps over the budget
 * (offload, recompute, a leaner convolution option), simulate the best few
 * of each kind and apply the one that removes the most excess per second
 * added, then the others on top while they still help. */
#include <stdlib.h>
#include <string.h>
#include "plan/search.h"

/* ---- excess ------------------------------------------------------------- */

/* The live bytes a plan must come under at budget B: B, or when the live
 * bytes fit and only the pool's high-water mark overshoots (placement), B
 * less the overshoot. */
static uint64_t live_target(const vd_plan *p, uint64_t B) {
    uint64_t peak = 0;
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].mem_in_use > peak) peak = p->steps[s].mem_in_use;
    if (peak <= B && p->hwm > B) return p->hwm - B < B ? B - (p->hwm - B) : 0;
    return B;
}

/* Excess of a plan over budget B: live bytes above live_target summed over
 * steps, plus how far the pool's high-water mark overshoots (placement). 0
 * iff it fits. Where only the placement overshoots, the live bytes above B
 * less the overshoot count too: a move that lowers them counts as progress
 * though the placement's top, first-fit's, need not move with it (counting
 * the top alone, greedy can stop there with no move that helps and leave
 * the search to its fallbacks: docs/planner.md, "Greedy"). The terms are
 * whole bytes, exact in a double in any order. */
static double excess(const vd_plan *p, uint64_t B) {
    uint64_t t = live_target(p, B);
    double x = p->hwm > B ? (double)(p->hwm - B) : 0.0;
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].mem_in_use > t) x += (double)(p->steps[s].mem_in_use - t);
    return x;
}

/* Per-step excess to aim proposals at: live bytes above live_target. */
static void step_excess(const vd_plan *p, uint64_t B, double *ex) {
    uint64_t t = live_target(p, B);
    for (int s = 0; s < p->n_steps; s++)
        ex[s] = p->steps[s].mem_in_use > t ? (double)(p->steps[s].mem_in_use - t) : 0.0;
}

static void apply(actx *c, const move *m, int *old) {
    if (m->kind == MV_DISP) { *old = (int)c->disp[m->key]; c->disp[m->key] = (vd_disp)m->val; }
    else { *old = c->algos[m->key]; c->algos[m->key] = m->val; }
}

static void undo(actx *c, const move *m, int old) {
    if (m->kind == MV_DISP) c->disp[m->key] = (vd_disp)old;
    else c->algos[m->key] = old;
}

static int cmp_rank(const void *a, const void *b) {
    const move *x = a, *y = b;
    if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
    if (x->key != y->key) return x->key - y->key;
    return x->val - y->val;
}

static int cmp_score(const void *a, const void *b) {
    const move *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return cmp_rank(a, b);
}

/* ---- proposals ---------------------------------------------------------- */

/* Order of moves for evaluation: batches of the best K of each kind. */
static int batch_of(const move *m, const int *pos) {
    return m->kind == MV_ALGO ? pos[2] / K_ALGO
         : m->val == VD_DISP_OFFLOAD ? pos[0] / K_OFFLOAD : pos[1] / K_RECOMPUTE;
}

static int cmp_batch(const void *a, const void *b) {
    const ordered *x = a, *y = b;
    if (x->batch != y->batch) return x->batch - y->batch;
    return x->idx - y->idx;
}

/* Steps at which offloading t frees its region, estimated on p's timeline:
 * from when the D2H copy after its last forward write has drained to when the
 * H2D copy must start to land before its first backward reader. */
static void offload_window(const actx *c, const vd_plan *p, const vd_tensor *T, int *a, int *z) {
    const vd_device_params *dev = &c->prof->dev;
    double d2h = (double)T->bytes / dev->d2h_bw + dev->launch_s;
    double h2d = (double)T->bytes / dev->h2d_bw + dev->launch_s;
    int w = T->prod_step;
    for (int s = T->prod_step; s <= T->fwd_last; s++)
        if (s == T->prod_step || p->steps[s].t_end <= p->steps[T->fwd_last].t_end) w = s;
    double drained = p->steps[w].t_end + (T->kind == VD_T_INPUT ? 0.0 : d2h);
    double need = p->steps[T->bwd_first].t_rc_start - h2d;
    *a = T->fwd_last + 1;
    while (*a < T->bwd_first && p->steps[*a].t_rc_start < drained) (*a)++;
    *z = T->bwd_first - 1;
    while (*z >= *a && p->steps[*z].t_end > need) (*z)--;
}

/* Moves that can remove excess from plan p, in c->mv in evaluation order
 * (batches of the best K of each kind), the stuck ones too where `stuck`;
 * *n_batches receives the number of batches. Returns how many moves. */
static int propose(actx *c, const vd_plan *p, bool stuck, int *n_batches) {
    const double eps_t = 1e-6;
    int n = 0;
    step_excess(p, c->B, c->ex);
    for (int k = 0; k <= c->L; k++) {
        if (c->fixed[k]) continue;
        int t = tensor_of(c, p, k);
        if (t < 0) continue;
        const vd_tensor *T = &p->tensors[t];
        if (T->bwd_first < 0 || T->fwd_last < 0) continue;
        int a = T->fwd_last + 1, z = T->bwd_first - 1;
        if (a > z) continue;
        double sz = (double)p->intervals[T->iv[0]].bytes, est = 0;
        vd_disp cur = c->disp[k];
        if (cur == VD_DISP_RECOMPUTE) {
            /* Recomputed at a step whose live bytes exceed the budget:
             * offloaded instead, it ends the recompute chains through it.
             * A recomputed map is rebuilt from its writer's inputs, and
             * those from theirs while they are recomputed too: from the
             * recompute start a whole residual trunk can be rebuilt at one
             * backward step, over the budget, where offloading kept maps
             * frees nothing (docs/planner.md, "Greedy"). */
            int rs = T->recompute_step;
            if (rs < 0 || rs >= p->n_steps || c->ex[rs] <= 0 || z - a + 1 < 2 || c->no_offload_moves)
                continue;
            est = c->ex[rs] < sz ? c->ex[rs] : sz;
            c->mv[n++] = (move){.kind = MV_DISP, .key = k, .val = VD_DISP_OFFLOAD, .est = est,
                                .rank = est};
            continue;
        }
        for (int s = a; s <= z; s++)
            if (c->ex[s] > 0 && vd_plan_resident(p, t, s)) est += c->ex[s] < sz ? c->ex[s] : sz;
        if (est <= 0) continue;
        if (cur == VD_DISP_KEEP && z - a + 1 >= 2 && !c->no_offload_moves) {
            int oa, oz;
            offload_window(c, p, T, &oa, &oz);
            double oest = 0;
            for (int s = oa; s <= oz; s++)
                if (c->ex[s] > 0) oest += c->ex[s] < sz ? c->ex[s] : sz;
            /* rank by the estimate on the timeline; a move estimated at 0 still
             * comes (last): the estimate is rough */
            c->mv[n++] = (move){.kind = MV_DISP, .key = k, .val = VD_DISP_OFFLOAD, .est = est,
                                .rank = oest + 1e-3 * est};
        }
        if ((cur == VD_DISP_KEEP || cur == VD_DISP_OFFLOAD) && c->can_rc[k]) {
            double cost = 0;
            for (int u = p->first_unit[k - 1]; u < p->n_units; u++)
                if (p->layers[u].y == t) {
                    const vd_plan_layer *pl = &p->layers[u];
                    double fs = vd_profile_rc_s(c->prof, pl->layer, c->algos[pl->layer]);
                    cost += vd_profile_chunk_time(c->prof, pl->layer, c->algos[pl->layer], false, fs,
                                                  pl->n, p->batch);
                }
            c->mv[n++] = (move){.kind = MV_DISP, .key = k, .val = VD_DISP_RECOMPUTE, .est = est,
                                .rank = est / (cost + eps_t)};
        }
    }
    for (int k = 0; c->algo_free && k < 2 * c->L; k++) {
        int cur = c->algos[k], m = c->minws[k], j = k % c->L;
        uint64_t wc = algo_ws(c, k, cur), wm = algo_ws(c, k, m);
        if (cur == m || wc <= wm) continue;
        double d = (double)(wc - wm);
        /* the steps that use this pass's workspace: forward and recompute,
         * or backward */
        int u = p->first_unit[j];   /* (a split layer's chunk 0 stands for the others) */
        int st[2] = {u, p->layers[u].rc_step};
        if (k >= c->L) { st[0] = 2 * p->n_units - 1 - u; st[1] = -1; }
        double est = 0;
        for (int q = 0; q < 2; q++) {
            if (st[q] < 0 || st[q] >= p->n_steps || (q == 1 && st[1] == st[0])) continue;
            est += c->ex[st[q]] < d ? c->ex[st[q]] : d;
        }
        if (est <= 0) continue;
        double dt = algo_time(c, k, m) - algo_time(c, k, cur);
        c->mv[n++] = (move){.kind = MV_ALGO, .key = k, .val = m, .est = est,
                            .rank = est / (dt > eps_t ? dt : eps_t)};
    }
    /* Stuck in the search's last resort (no start fitted; search_greedy:
     * the moves above were none or none helped): a recomputed map can stay
     * resident past its recompute step (a chain's map, kept for a later
     * reader) at steps over the budget where the moves above do not look (a
     * map recomputed early for a chain and resident until its own reader,
     * the budget exceeded between: docs/planner.md, "Greedy"). Offloading
     * such a map is proposed only there, so that every search a start fits
     * plans as without these moves. */
    for (int k = 0; stuck && k <= c->L; k++) {
        if (c->fixed[k] || c->disp[k] != VD_DISP_RECOMPUTE || c->no_offload_moves) continue;
        int t = tensor_of(c, p, k);
        if (t < 0) continue;
        const vd_tensor *T = &p->tensors[t];
        int rs = T->recompute_step;
        if (T->fwd_last < 0 || rs < 0 || rs >= p->n_steps || rs - T->fwd_last - 1 < 2) continue;
        double sz = (double)p->intervals[T->iv[0]].bytes, est = 0;
        for (int s = rs; s < p->n_steps && s <= T->bwd_last; s++)
            if (c->ex[s] > 0 && vd_plan_resident(p, t, s)) est += c->ex[s] < sz ? c->ex[s] : sz;
        if (est > 0)
            c->mv[n++] = (move){.kind = MV_DISP, .key = k, .val = VD_DISP_OFFLOAD, .est = est,
                                .rank = est};
    }
    /* rank within each kind, then batches of the best K of each kind */
    qsort(c->mv, (size_t)n, sizeof *c->mv, cmp_rank);
    ordered *o = (ordered *)c->ord;
    int pos[3] = {0, 0, 0}, nb = 0;
    for (int i = 0; i < n; i++) {
        const move *m = &c->mv[i];
        int kind = m->kind == MV_ALGO ? 2 : m->val == VD_DISP_OFFLOAD ? 0 : 1;
        o[i].m = *m;
        o[i].batch = batch_of(m, pos);
        o[i].idx = i;
        pos[kind]++;
        if (o[i].batch + 1 > nb) nb = o[i].batch + 1;
    }
    qsort(o, (size_t)n, sizeof *o, cmp_batch);
    for (int i = 0; i < n; i++) { c->mv[i] = o[i].m; c->mv[i].batch = o[i].batch; c->mv[i].score = -1.0; }
    *n_batches = nb;
    return n;
}

/* ---- greedy ------------------------------------------------------------- */

static const double AUTO_GREEDY_WORK = 3.0 * AUTO_WORK_BUDGET;

/* Greedy until *P fits (or no move helps, in the last resort the stuck
 * ones of propose included, or its work passes AUTO_GREEDY_WORK, or
 * c->greedy_work when set). *P is the plan of the current configuration
 * and stays so. */
int search_greedy(actx *c, vd_plan *P, int max_rounds, vd_err *e) {
    double w0 = c->work;
    bool unplaced = false;   /* *P was not placed (search_eval_unplaced) */
    bool stuck = false;      /* this round proposes the stuck moves too (last resort) */
    for (int round = 0; round < max_rounds && !P->feasible && !done(c); round++) {
        /* a start's greedy that has not made the plan fit within
         * AUTO_GREEDY_WORK gives up (the fallbacks or another start fit) */
        if (c->work - w0 > (c->greedy_work > 0 ? c->greedy_work : AUTO_GREEDY_WORK)) break;
        /* past the effort cap once some plan fits, or in a later start
         * while none does (greedy_work set); the first start's greedy runs
         * to its own limit, so that what fits does not depend on the cap */
        if (spent(c) && (c->found || c->greedy_work > 0)) break;
        /* a start already too far behind (one_start: it is not refined) */
        if (c->abandon_s > 0 && P->sim.iter_s > c->abandon_s) break;
        double ex0 = excess(P, c->B);
        double eps = 1e-4 * (P->sim.iter_s > 0 ? P->sim.iter_s : 1e-3);
        int nb = 0;
        int n = propose(c, P, stuck, &nb);
        if (n == 0 && !stuck && c->last_resort) { stuck = true; continue; }
        if (n == 0) break;
        int best = -1;
        vd_plan bestQ;
        memset(&bestQ, 0, sizeof bestQ);
        bool best_unplaced = false;
        int n_eval = 0;
        for (int i = 0; i < n && !done(c); i++) {
            move *m = &c->mv[i];
            /* a new batch only when the evaluated ones did not help */
            if (i > 0 && m->batch != c->mv[i - 1].batch && best >= 0) break;
            n_eval = i + 1;
            int old;
            apply(c, m, &old);
            vd_plan Q;
            vd_err te = {0};
            bool qu = false;
            int rc = search_eval_unplaced(c, &Q, &qu, &te);
            undo(c, m, old);
            if (rc != VD_OK && rc != VD_EBUDGET) {
                if (best >= 0) vdp_plan_release(&bestQ);
                *e = te;
                return rc;
            }
            double ex1 = Q.feasible ? 0.0 : excess(&Q, c->B);
            m->gain = ex0 - ex1;
            m->dt = Q.sim.iter_s - P->sim.iter_s;
            m->score = m->gain > 0 ? m->gain / (m->dt > eps ? m->dt : eps) : -1.0;
            if (m->score > 0 && (best < 0 || m->score > c->mv[best].score)) {
                if (best >= 0) vdp_plan_release(&bestQ);
                bestQ = Q;
                best_unplaced = qu;
                best = i;
            } else {
                vdp_plan_release(&Q);
            }
        }
        for (int i = n_eval; i < n; i++) c->mv[i].score = -1.0;   /* not evaluated */
        if (done(c)) { if (best >= 0) vdp_plan_release(&bestQ); break; }
        if (best < 0 && !stuck && c->last_resort) { stuck = true; continue; }
        if (best < 0) break;
        stuck = false;
        int old;
        apply(c, &c->mv[best], &old);
        vdp_plan_release(P);
        *P = bestQ;
        unplaced = best_unplaced;
        /* the other helpful moves, best first, on top */
        move first = c->mv[best];
        c->mv[best].score = -1.0;
        qsort(c->mv, (size_t)n, sizeof *c->mv, cmp_score);
        int misses = 0;
        for (int i = 0; i < n && c->mv[i].score > 0 && !P->feasible && misses < 2 && !done(c); i++) {
            move *m = &c->mv[i];
            if (m->kind == first.kind && m->key == first.key) continue;
            if (m->kind == MV_DISP && c->disp[m->key] == (vd_disp)m->val) continue;
            double ex = excess(P, c->B);
            int o2;
            apply(c, m, &o2);
            vd_plan Q;
            vd_err te = {0};
            bool qu = false;
            int rc = search_eval_unplaced(c, &Q, &qu, &te);
            if (rc != VD_OK && rc != VD_EBUDGET) { undo(c, m, o2); *e = te; return rc; }
            double gain = ex - (Q.feasible ? 0.0 : excess(&Q, c->B));
            double dt = Q.sim.iter_s - P->sim.iter_s;
            double share = m->gain < ex ? m->gain : ex;
            if (gain > 0 && gain >= 0.5 * share && dt <= (m->dt > 0 ? 2.0 * m->dt : 0.0) + eps) {
                vdp_plan_release(P);
                *P = Q;
                unplaced = qu;
            } else {
                undo(c, m, o2);
                vdp_plan_release(&Q);
                misses++;
            }
        }
    }
    /* the callers get a placed plan */
    if (unplaced) {
        vdp_plan_release(P);
        int rc = search_eval(c, P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    }
    return VD_OK;
}
