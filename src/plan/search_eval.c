/* search_eval.c — the auto search's context, its memo and its evaluation:
 * building a configuration (in full, unplaced far over the budget, or
 * screened against the plan to beat), the compute bounds that skip builds,
 * the fallbacks (the paper's policies, the extreme configuration) and the
 * floor below which no plan fits. The search's lowest layer: it calls only
 * the builds of build.c and policy.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "plan/search.h"

/* What plan p, which offloads nothing, would predict replayed (sim.c's
 * captured plans): its prediction less the launch cut at each step,
 * recompute and staged input's load timed with a launch. An estimate (a
 * stall or the staging copy may end the iteration instead): the replay of
 * the whole plan decides (vdp_build_auto). */
double vdp_replayed_est(const vd_plan *p, const vd_profile *prof) {
    double saved = 0;
    for (int a = 0; a < p->n_actions; a++) {
        const vd_action *A = &p->actions[a];
        double t = A->kind == VD_A_COMPUTE ? p->steps[A->arg].compute_s
                 : A->kind == VD_A_RECOMPUTE ? p->layers[A->arg].rc_s
                 : A->kind == VD_A_LOAD_STAGED ? prof->dev.launch_s : 0.0;
        saved += t - vd_device_replayed_s(&prof->dev, t);
    }
    return p->sim.iter_s - saved;
}

/* Note a plan built under the true profile: the fastest fitting
 * configuration seen so far, and (vdp_search.replayed) the fastest replayed
 * one that offloads nothing, nothing split (with the gradient array too:
 * vdp_build_auto rebuilds the one it picks under its own options, where it
 * must fit again). */
static void note_seen(actx *c, const vd_plan *p) {
    if (!p->feasible || c->perturbed) return;
    vdp_replayed *r = c->s->replayed;
    if (r && p->offload_bytes == 0 && c->s->jitter_depth == 0 && !c->o.chunks) {
        double est = vdp_replayed_est(p, c->prof);
        if (!r->have || est < r->est_s) {
            config_copy(c, r->disp, r->algos, c->disp, c->algos);
            r->est_s = est;
            r->have = true;
        }
    }
    c->found = true;
    if (c->have_seen && p->sim.iter_s >= c->seen_s) return;
    config_copy(c, c->seen_disp, c->seen_algos, c->disp, c->algos);
    c->seen_s = p->sim.iter_s;
    c->have_seen = true;
}

/* ---- memo (memo_ent, search.h) ----------------------------------------- */

static void hash_config(const actx *c, uint64_t *h1, uint64_t *h2) {
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull ^ (uint64_t)c->L;
    /* words: disp[0..L], algos[0..2L-1], prof_id */
    for (int k = 0; k <= 3 * c->L + 1; k++) {
        uint64_t v = k <= c->L ? (uint64_t)c->disp[k]
                   : k <= 3 * c->L ? (uint64_t)(uint32_t)c->algos[k - c->L - 1]
                   : (uint64_t)(uint32_t)c->prof_id;
        v += (uint64_t)k << 32;
        a = (a ^ v) * 0x100000001b3ull;                       /* FNV-1a over 64-bit words */
        b = (b + v) * 0x9e3779b97f4a7c15ull; b ^= b >> 29;    /* multiply-xorshift */
    }
    *h1 = a ? a : 1;
    *h2 = b;
}

/* The entry of the current configuration, or NULL. */
const memo_ent *search_memo_find(const actx *c) {
    if (!c->memo_cap) return NULL;
    uint64_t h1, h2;
    hash_config(c, &h1, &h2);
    for (size_t i = h1 & (c->memo_cap - 1);; i = (i + 1) & (c->memo_cap - 1)) {
        const memo_ent *m = &c->memo[i];
        if (!m->h1) return NULL;
        if (m->h1 == h1 && m->h2 == h2) return m;
    }
}

/* Record the current configuration's outcome (no-op when out of memory: the
 * memo only saves builds); exact false: iter_s is only a bound (see
 * memo_ent). An exact outcome replaces a bound, a bound a lower bound. */
static void memo_put(actx *c, bool feasible, double iter_s, bool exact) {
    if (2 * (c->memo_n + 1) > c->memo_cap) {
        size_t ncap = c->memo_cap ? 2 * c->memo_cap : 4096;
        memo_ent *nm = vd_calloc(ncap, sizeof *nm, NULL);
        if (!nm) return;
        for (size_t j = 0; j < c->memo_cap; j++) {
            const memo_ent *m = &c->memo[j];
            if (!m->h1) continue;
            size_t i = m->h1 & (ncap - 1);
            while (nm[i].h1) i = (i + 1) & (ncap - 1);
            nm[i] = *m;
        }
        vd_free(c->memo);
        c->memo = nm;
        c->memo_cap = ncap;
    }
    uint64_t h1, h2;
    hash_config(c, &h1, &h2);
    size_t i = h1 & (c->memo_cap - 1);
    for (; c->memo[i].h1; i = (i + 1) & (c->memo_cap - 1)) {
        memo_ent *m = &c->memo[i];
        if (m->h1 != h1 || m->h2 != h2) continue;
        if (!m->exact && (exact || iter_s > m->iter_s))
            *m = (memo_ent){.h1 = h1, .h2 = h2, .iter_s = iter_s, .feasible = feasible, .exact = exact};
        return;
    }
    c->memo[i] = (memo_ent){.h1 = h1, .h2 = h2, .iter_s = iter_s, .feasible = feasible, .exact = exact};
    c->memo_n++;
}

/* ---- evaluation -------------------------------------------------------- */

/* Report progress (opts->progress) for the current phase. */
static void progress(const actx *c) {
    if (!c->o.progress) return;
    double best = c->have_seen ? c->seen_s : 0.0;
    if (c->s->best_s > 0 && (best == 0 || c->s->best_s < best)) best = c->s->best_s;
    c->o.progress(c->o.progress_ctx, c->phase, c->s->evals + c->evals, best);
}

/* Enter a phase: name it and report. */
void search_phase(actx *c, const char *fmt, int a, int b) {
    snprintf(c->phase, sizeof c->phase, fmt, a, b);
    progress(c);
}

/* One more build of the search: counted, and reported now and then. */
static void eval_begin(actx *c) {
    c->evals++;
    c->looks++;
    if (c->evals % 16 == 0) progress(c);
}

/* A build whose outcome is exact (fits or not, its iteration): seen and
 * memoized. */
static void eval_exact(actx *c, const vd_plan *out) {
    note_seen(c, out);
    memo_put(c, out->feasible, out->sim.iter_s, true);
}

/* Build the current configuration at the budget. 0 / VD_EBUDGET: *out valid.
 * (No screen: every outcome is exact.) */
int search_eval(actx *c, vd_plan *out, vd_err *e) {
    return search_eval_screened(c, 0.0, out, e);
}

/* eval for greedy's moves: a plan whose live bytes exceed the budget by over
 * 30% is not placed (vdp_build_unplaced_over; *unplaced then): greedy reads
 * of it the live bytes, the replay and the top, which is then its live
 * peak (excess: the placement's fragmentation above that is left out;
 * nearer the budget, where it decides what fits, plans are placed as
 * before). The placements are most of greedy's time where its moves are
 * far from fitting, and on deep nets that spent the effort cap before the
 * search fitted (docs/planner.md, "Greedy"). The same outcome as eval's
 * (fits, iteration), so the memo keeps it; greedy's last plan is placed
 * (eval) for its callers. Moves over the budget by less are placed: not
 * placing any move over the budget changed which plans the starts reach. */
int search_eval_unplaced(actx *c, vd_plan *out, bool *unplaced, vd_err *e) {
    eval_begin(c);
    double cost = 0, effort = 0;
    int rc = vdp_build_unplaced_over(c->net, c->prof, &c->o, VD_POLICY_AUTO, c->algos,
                                     !c->stage_full, c->tc, out, unplaced, &cost, &effort, e);
    c->work += cost;
    c->effort += effort;
    if (rc == VD_OK || rc == VD_EBUDGET) eval_exact(c, out);
    return rc;
}

/* eval for a search that keeps the configuration only when it fits and
 * predicts an iteration faster than limit_s (vdp_build_screened: variants
 * that cannot are dropped before their placement). VD_OK / VD_EBUDGET: *out
 * valid; VDP_SCREENED: no plan (none faster than limit_s). */
int search_eval_screened(actx *c, double limit_s, vd_plan *out, vd_err *e) {
    eval_begin(c);
    bool exact = false;
    double lb_s = 0, cost = 0;
    double effort = 0;
    int rc = vdp_build_screened(c->net, c->prof, &c->o, VD_POLICY_AUTO, c->algos, limit_s,
                                !c->stage_full, c->tc, out, &exact, &lb_s, &cost, &effort, e);
    c->work += cost;
    c->effort += effort;
    if (rc == VDP_SCREENED) {
        /* no bound at all: no variant's live bytes fit, so it does not fit */
        if (isinf(lb_s)) memo_put(c, false, lb_s, true);
        else memo_put(c, true, lb_s, false);
        return rc;
    }
    if (rc == VD_OK || rc == VD_EBUDGET) {
        if (exact) eval_exact(c, out);
        else memo_put(c, true, lb_s, false);
    }
    return rc;
}

/* eval for a caller that drops the configuration unless it fits and
 * predicts an iteration faster than limit_s, or unless its live bytes do not
 * fit the budget (it repairs those, and needs their plan: greedy reads the
 * excess). A configuration that is neither (its unplaced replay predicts
 * limit_s or slower) is dropped unbuilt, as vdp_build_screened drops it:
 * VDP_SCREENED, no plan. Else like eval, the plan built unscreened when it
 * does not fit. The trades and the kicks skip the placements of the
 * configurations they would drop this way (the kicks' work budget then
 * covers more kicks; the plans are those of the unscreened builds). */
int search_eval_repairable(actx *c, double limit_s, vd_plan *out, vd_err *e) {
    int rc = search_eval_screened(c, limit_s, out, e);
    if (rc == VDP_SCREENED) {
        const memo_ent *m = search_memo_find(c);
        return m && m->exact && !m->feasible ? search_eval(c, out, e) : VDP_SCREENED;
    }
    if (rc == VD_EBUDGET) {   /* behind a screen its placement may have stopped */
        vdp_plan_release(out);
        rc = search_eval(c, out, e);
    }
    return rc;
}

/* ---- bounds that skip builds ------------------------------------------- */

/* A lower bound on the predicted iteration of the current configuration:
 * the compute stream runs every step's op one after another (vdp_simulate:
 * the iteration ends after the compute stream's last op), so the forward
 * and backward times of the options chosen plus the SGD step (no backward
 * for a no_grad layer: it does not run); the adds' backward left out
 * (scale_add_steps scales it down, to 0 when every input shares its
 * tensor), recomputes and stalls left out (they only add). In
 * refine a plan that is compute-bound (no stalls) then skips, unbuilt, every
 * slower option. The factor (1 - 1e-12) against it covers the sum's rounding
 * in another order than the simulator's. 0 for forward-only plans. */
static double compute_bound(actx *c) {
    if (c->o.forward_only) return 0.0;
    if (c->sgd_prof != c->prof) {   /* (a pass over the net's parameters) */
        c->sgd_s = vdp_sgd_s(c->net, c->prof);
        c->sgd_prof = c->prof;
    }
    double t = c->sgd_s;
    for (int i = 0; i < c->L; i++) {
        const vd_profile_layer *pl = &c->prof->layers[i];
        t += pl->algos[c->algos[i]].fwd_s;
        const vd_layer *l = &c->net->layers[i];
        if (!vd_op_table[l->op].bwd_is_dy && !l->no_grad) t += pl->algos[c->algos[c->L + i]].bwd_s;
    }
    return t;
}

/* An upper bound on compute_floor, cheap: compute_bound (cb) plus the
 * slowest recompute of every tensor asked to be recomputed (0 when none
 * is). */
static double floor_upper(const actx *c, double cb) {
    double rc = 0;
    for (int k = 0; k <= c->L; k++)
        if (c->disp[k] == VD_DISP_RECOMPUTE) rc += c->rc_max[k];
    return rc == 0 ? 0.0 : cb + rc;
}

/* A lower bound on the predicted iteration of the current configuration,
 * tighter than compute_bound (cb): that plus the recomputes the build honours
 * (vdp_recomputed_layers: they run on the compute stream too). The set
 * depends on the dispositions only, so it is kept for the last ones asked
 * (refine's option moves share them). */
static int compute_floor(actx *c, double cb, double *floor_s, vd_err *e) {
    size_t nd = (size_t)(c->L + 1) * sizeof *c->disp;
    if (!c->rc_valid || memcmp(c->rc_disp, c->disp, nd)) {
        c->rc_valid = false;
        int rc = vdp_recomputed_layers(c->net, c->prof, &c->o, c->algos, c->tc, c->rc_on, e);
        if (rc) return rc;
        memcpy(c->rc_disp, c->disp, nd);
        c->rc_valid = true;
    }
    double t = cb;
    for (int j = 0; j < c->L; j++)
        if (c->rc_on[j]) t += vd_profile_rc_s(c->prof, j, c->algos[j]);
    *floor_s = t;
    return VD_OK;
}

/* Does the current configuration fit and predict an iteration faster than
 * limit_s (by more than a relative 1e-9)? Known configurations are answered
 * from the memo; otherwise (or when it does beat it) it is built. *better:
 * the answer; when true, *out holds its plan. */
int search_eval_beats(actx *c, double limit_s, vd_plan *out, bool *better, vd_err *e) {
    *better = false;
    /* nothing can beat limit_s: no plan is faster than the bound */
    if (c->lb > 0 && limit_s * (1.0 - 1e-9) <= c->lb) { c->looks++; return VD_OK; }
    const memo_ent *m = search_memo_find(c);
    if (m && !(m->feasible && m->iter_s < limit_s * (1.0 - 1e-9))) { c->looks++; return VD_OK; }
    bool known = m && m->exact;
    double cb = known ? 0.0 : compute_bound(c);
    /* not built either when even its compute alone cannot beat limit_s */
    if (!known && cb * (1.0 - 1e-12) >= limit_s * (1.0 - 1e-9)) { c->looks++; return VD_OK; }
    /* nor when its compute with the recomputes it gets cannot (worked out
     * only where it might: floor_upper reaches limit_s) */
    if (!known && !c->o.forward_only && floor_upper(c, cb) * (1.0 + 1e-12) >= limit_s * (1.0 - 1e-9)) {
        double floor_s = 0;
        int rc = compute_floor(c, cb, &floor_s, e);
        if (rc) return rc;
        if (floor_s * (1.0 - 1e-12) >= limit_s * (1.0 - 1e-9)) { c->looks++; return VD_OK; }
    }
    int rc = search_eval_screened(c, limit_s * (1.0 - 1e-9), out, e);
    if (rc == VDP_SCREENED) return VD_OK;
    if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    if (out->feasible && out->sim.iter_s < limit_s * (1.0 - 1e-9)) *better = true;
    else vdp_plan_release(out);
    return VD_OK;
}

/* The search compares its configurations by their quickly staged plans
 * (the staging copy at the first step of its issue-step search: the time
 * the latest as fast step gives, at a tenth of the replays); the plan it
 * returns has the step searched, as vdp_build_fixed's. The rebuild is
 * taken unless it predicts slower than *P beyond the searches' 1e-9 or
 * fits otherwise (the same configuration: neither is expected), so no plan
 * gets slower by it. */
int search_restage(actx *c, vd_plan *P, vd_err *e) {
    if (!P->stage_quick) return VD_OK;
    search_config_from_plan(c, P);
    c->stage_full = true;
    vd_plan Q;
    int rc = search_eval(c, &Q, e);
    c->stage_full = false;
    if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    if (Q.feasible == P->feasible && Q.sim.iter_s <= P->sim.iter_s * (1.0 + 1e-9)) {
        vdp_plan_release(P);
        *P = Q;
    } else {
        vdp_plan_release(&Q);
    }
    return VD_OK;
}

/* ---- the context ------------------------------------------------------- */

/* Set c's configuration to plan p's decisions: each free disposition key
 * as p keeps, offloads or recomputes its tensor, and (where the search
 * chooses them) p's per-pass options. */
void search_config_from_plan(actx *c, const vd_plan *p) {
    for (int k = 0; k <= c->L; k++) {
        int t = c->fixed[k] ? -1 : tensor_of(c, p, k);
        if (t < 0) continue;
        const vd_tensor *T = &p->tensors[t];
        c->disp[k] = T->offload ? VD_DISP_OFFLOAD : T->recompute ? VD_DISP_RECOMPUTE : VD_DISP_KEEP;
    }
    for (int j = 0; c->algo_free && j < c->L; j++) {
        c->algos[j] = p->layers[p->first_unit[j]].algo_fwd;
        c->algos[c->L + j] = p->layers[p->first_unit[j]].algo_bwd;
    }
}

/* Release c; its plans built and its fastest fitting plan go to its
 * search's progress (a second opinion's fastest does not: it was planned on
 * another profile). */
void search_ctx_free(actx *c) {
    vdp_search *s = c->s;
    s->evals += c->evals;
    s->effort += c->effort - c->effort_base;
    if (s->jitter_depth == 0 && c->have_seen && (s->best_s == 0 || c->seen_s < s->best_s))
        s->best_s = c->seen_s;
    vd_free(c->disp); vd_free(c->algos); vd_free(c->fixed); vd_free(c->can_rc); vd_free(c->rc_max); vd_free(c->rc_disp); vd_free(c->rc_on); vd_free(c->fast);
    vd_free(c->minws); vd_free(c->ex); vd_free(c->mv); vd_free(c->ord); vd_free(c->seen_disp); vd_free(c->seen_algos);
    vd_free(c->memo); vd_free(c->look); vd_free(c->look_next); vd_free(c->focus); vd_free(c->rorder); vd_free(c->gk);
    vdp_tcache_free(c->tc);
}

int search_ctx_init(actx *c, vdp_search *s, const vd_net *net, const vd_profile *prof,
                    const vd_plan_opts *opts, int feas_only, vd_err *e) {
    memset(c, 0, sizeof *c);
    c->s = s;
    int L = net->n_layers;
    c->net = net;
    c->prof = prof;
    c->L = L;
    c->B = opts->budget;
    c->feas_only = feas_only != VDP_SEARCH;
    c->answer_only = feas_only == VDP_ANSWER;
    size_t n1 = (size_t)L + 1;
    c->disp = vd_calloc(n1, sizeof *c->disp, NULL);
    c->seen_disp = vd_calloc(n1, sizeof *c->seen_disp, NULL);
    c->fixed = vd_calloc(n1, sizeof *c->fixed, NULL);
    c->can_rc = vd_calloc(n1, sizeof *c->can_rc, NULL);
    c->rc_max = vd_calloc(n1, sizeof *c->rc_max, NULL);
    c->rc_disp = vd_calloc(n1, sizeof *c->rc_disp, NULL);
    c->rc_on = vd_calloc(n1, sizeof *c->rc_on, NULL);
    c->rc_valid = false;
    c->look = vd_calloc(n1, sizeof *c->look, NULL);
    c->look_next = vd_calloc(n1, sizeof *c->look_next, NULL);
    c->focus = vd_calloc(n1, sizeof *c->focus, NULL);
    c->rorder = vd_calloc(n1, sizeof *c->rorder, NULL);
    c->gk = vd_calloc(n1, sizeof(struct gkey), NULL);
    size_t n2 = 2 * (size_t)(L ? L : 1);
    c->algos = vd_calloc(n2, sizeof *c->algos, NULL);
    c->seen_algos = vd_calloc(n2, sizeof *c->seen_algos, NULL);
    c->fast = vd_calloc(n2, sizeof *c->fast, NULL);
    c->minws = vd_calloc(n2, sizeof *c->minws, NULL);
    int n_units = vdp_runs(net, opts->chunks, NULL, NULL);
    c->ex = n_units < 0 ? NULL : vd_calloc(2 * (size_t)n_units + 2, sizeof *c->ex, NULL);
    c->mv = vd_calloc(4 * n1, sizeof *c->mv, NULL);
    c->ord = vd_calloc(4 * n1, sizeof(ordered), NULL);
    c->tc = vdp_tcache_new();
    if (!c->tc || !c->disp || !c->look || !c->look_next || !c->focus || !c->rorder || !c->gk || !c->seen_disp || !c->fixed || !c->can_rc || !c->rc_max || !c->rc_disp || !c->rc_on || !c->algos || !c->seen_algos ||
        !c->fast || !c->minws || !c->ex || !c->mv || !c->ord) {
        search_ctx_free(c);
        return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    }
    c->algo_free = !opts->algos && !opts->algos_bwd && opts->fixed_algo < 0;
    for (int i = 0; i < L; i++) {
        const vd_profile_layer *pl = &prof->layers[i];
        c->fast[i] = vdp_fastest_pass(pl, false);
        c->fast[L + i] = vdp_fastest_pass(pl, true);
        c->minws[i] = vdp_minws_pass(pl, false);
        c->minws[L + i] = vdp_minws_pass(pl, true);
    }
    if (c->algo_free) memcpy(c->algos, c->fast, 2 * (size_t)L * sizeof *c->algos);
    else vdp_opts_algos(prof, opts, L, c->algos);
    for (int k = 0; k <= L; k++) {
        vd_disp d = opts->disp ? opts->disp[k] : VD_DISP_AUTO;
        c->fixed[k] = d != VD_DISP_AUTO;
        c->disp[k] = c->fixed[k] ? d : VD_DISP_KEEP;
    }
    /* Writers of layer i's output: layer i and the in-place layers after it
     * (found through the net: an in-place layer's input is a writer's output). */
    bool *ip = vd_calloc((size_t)(L ? L : 1), sizeof *ip, NULL);
    if (!ip) { search_ctx_free(c); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    vd_schedule_inplace_flags(net, ip);
    for (int i = 0; i < L; i++) c->can_rc[i + 1] = !ip[i];
    for (int j = 0; j < L; j++) {
        vd_op op = net->layers[j].op;
        if (vd_op_table[op].recomputable) continue;
        int i = j;   /* the producer of the tensor layer j writes */
        while (ip[i]) i = net->layers[i].in[0];
        c->can_rc[i + 1] = false;
    }
    for (int j = 0; j < L; j++) {
        double slowest = 0;   /* layer j's slowest recompute over its forward options */
        for (int a = 0; a < prof->layers[j].n_algos; a++)
            if (vd_profile_rc_s(prof, j, a) > slowest) slowest = vd_profile_rc_s(prof, j, a);
        int i = j;   /* the producer of the tensor layer j writes */
        while (ip[i] && net->layers[i].in[0] >= 0) i = net->layers[i].in[0];
        c->rc_max[i + 1] += slowest;
    }
    for (int i = 0; i < L; i++)
        if (ip[i] && !c->fixed[i + 1]) { c->fixed[i + 1] = true; c->disp[i + 1] = VD_DISP_AUTO; }
    if (!opts->disp || opts->disp[L] == VD_DISP_AUTO) c->disp[L] = VD_DISP_AUTO;
    c->fixed[L] = true;      /* the loss output: read right after it is made */
    vd_free(ip);
    c->o = *opts;
    c->o.policy = VD_POLICY_AUTO;
    c->o.disp = c->disp;
    c->o.algos = NULL;
    c->o.algos_bwd = NULL;
    return VD_OK;
}

/* ---- the fallbacks ----------------------------------------------------- */

/* Keep the better of *best (rc_best) and a candidate (rc): fitting beats not
 * fitting, then faster, then (neither fits) a lower pool top. */
void search_take_better(vd_plan *best, int *rc_best, vd_plan *cand, int rc) {
    bool better;
    if (*rc_best < 0) better = true;
    else if (rc == VD_OK && *rc_best != VD_OK) better = true;
    else if (rc != VD_OK && *rc_best == VD_OK) better = false;
    else if (rc == VD_OK) better = cand->sim.iter_s < best->sim.iter_s;
    else better = cand->hwm < best->hwm;
    if (better) {
        if (*rc_best >= 0) vdp_plan_release(best);
        *best = *cand;
        *rc_best = rc;
    } else {
        vdp_plan_release(cand);
    }
}

/* The paper-policy candidates: dyn, or with caller-fixed algorithms conv and
 * all (none is the search's start). */
int search_paper_candidates(actx *c, const vd_plan_opts *opts, vd_plan *best, int *rc_best,
                            vd_err *e) {
    static const vd_policy fixed_pols[2] = {VD_POLICY_CONV, VD_POLICY_ALL};
    int n = c->algo_free ? 1 : 2;
    for (int k = 0; k < n && !done(c); k++) {
        vd_plan_opts o = *opts;
        o.policy = c->algo_free ? VD_POLICY_DYN : fixed_pols[k];
        o.algos = c->algo_free ? NULL : c->algos;
        o.algos_bwd = c->algo_free ? NULL : c->algos + c->L;
        vd_plan D;
        vd_err te = {0};
        /* dyn's greedy over the options never changes whether it fits:
         * skipped where only that is asked (a build per convolution) */
        int rc = c->answer_only ? vdp_fits_policy(c->net, c->prof, &o, &D, &te)
                                : vdp_build_policy(c->net, c->prof, &o, &D, &te);
        c->evals++;
        if (rc != VD_OK && rc != VD_EBUDGET) { *e = te; return rc; }
        if (rc == VD_OK) c->found = true;
        search_take_better(best, rc_best, &D, rc);
    }
    return VD_OK;
}

/* "Recompute everything recomputable, offload the rest, least workspace"
 * (caller-fixed entries and algorithms kept). */
void search_extreme_config(actx *c) {
    for (int k = 0; k <= c->L; k++)
        if (!c->fixed[k]) c->disp[k] = c->can_rc[k] ? VD_DISP_RECOMPUTE : VD_DISP_OFFLOAD;
    for (int k = 0; c->algo_free && k < 2 * c->L; k++) c->algos[k] = c->minws[k];
}

/* Feasibility only: the paper candidates, then the extreme configuration.
 * VD_OK: one fits, *out its plan; VD_EBUDGET: neither does (the current
 * configuration is left as it was). */
int search_feasible_fallback(actx *c, const vd_plan_opts *opts, vd_plan *out, vd_err *e) {
    vd_plan best;
    memset(&best, 0, sizeof best);
    int rc_best = -1;
    int rc = search_paper_candidates(c, opts, &best, &rc_best, e);
    if (rc) { if (rc_best >= 0) vdp_plan_release(&best); return rc; }
    if (rc_best == VD_OK) { best.policy = VD_POLICY_AUTO; *out = best; return VD_OK; }
    if (rc_best >= 0) vdp_plan_release(&best);
    vd_disp *d = vd_malloc((size_t)(c->L + 1) * sizeof *d, NULL);
    int *a = vd_malloc(2 * (size_t)c->L * sizeof *a + 1, NULL);
    if (!d || !a) { vd_free(d); vd_free(a); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    config_copy(c, d, a, c->disp, c->algos);
    search_extreme_config(c);
    vd_plan X;
    rc = search_eval(c, &X, e);
    config_copy(c, c->disp, c->algos, d, a);
    vd_free(d);
    vd_free(a);
    if (rc == VD_OK) { X.policy = VD_POLICY_AUTO; *out = X; return VD_OK; }
    if (rc == VD_EBUDGET) { vdp_plan_release(&X); }
    return rc;
}

/* ---- the floor --------------------------------------------------------- */

/* A bound no plan of any disposition goes below, from plan p (everything
 * kept): per step, the bytes of tensors whose lifetime no disposition changes
 * (parameters, gradients, optimizer state, feature-map gradients, saved state,
 * workspaces, labels) plus the feature maps the step's op itself reads or
 * writes: *out. VD_ENOMEM. */
static int operand_bound(const vd_net *net, const vd_plan *p, uint64_t *out, vd_err *e) {
    uint64_t bound = 0;
    /* the fixed tensors' bytes at each step: a sweep over their intervals'
     * starts and ends (a sum per step over every interval was quadratic) */
    int64_t *d = vd_calloc((size_t)p->n_steps + 1, sizeof *d, NULL);
    if (!d) return vd_errf(e, VD_ENOMEM, "out of memory");
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        vd_tensor_kind kind = p->tensors[iv->tensor].kind;
        if (kind == VD_T_ACT || kind == VD_T_INPUT || iv->first >= p->n_steps || iv->last < iv->first)
            continue;
        d[iv->first] += (int64_t)iv->bytes;
        if (iv->last + 1 < p->n_steps) d[iv->last + 1] -= (int64_t)iv->bytes;
    }
    int64_t fixed = 0;
    for (int s = 0; s < p->n_steps; s++) {
        fixed += d[s];
        uint64_t m = (uint64_t)fixed;
        const vd_step *st = &p->steps[s];
        if (st->kind == VD_STEP_FWD || st->kind == VD_STEP_BWD) {
            int i = st->layer, u = st->unit;
            bool fwd = st->kind == VD_STEP_FWD, rx, ry;
            vd_op_bwd_reads(net, i, &rx, &ry);
            int ts[VD_MAX_INPUTS + 1], n = 0;
            if (fwd || rx)
                for (int k = 0; k < net->layers[i].n_in; k++) ts[n++] = p->layers[u].in_t[k];
            if (fwd || ry) ts[n++] = p->layers[u].y;
            for (int a = 0; a < n; a++) {
                bool dup = false;
                for (int b = 0; b < a; b++) dup |= ts[b] == ts[a];
                if (!dup) m += p->intervals[p->tensors[ts[a]].iv[0]].bytes;
            }
        }
        if (m > bound) bound = m;
    }
    vd_free(d);
    *out = bound;
    return VD_OK;
}

/* A budget below which no plan of c's net fits, whatever the search does:
 * the operand bound (operand_bound) of everything kept with c's algorithms
 * (the least workspace after search_extreme_config), at least the persistent
 * bytes. One build. */
int search_floor(actx *c, const vd_plan_opts *opts, uint64_t *floor_b, vd_err *e) {
    vd_plan_opts o = *opts;
    o.policy = VD_POLICY_NONE;
    o.budget = 0;
    o.disp = NULL;
    int *a0 = vd_malloc(2 * (size_t)c->L * sizeof *a0, NULL);
    if (!a0) return vd_errf(e, VD_ENOMEM, "out of memory");
    memcpy(a0, c->algos, 2 * (size_t)c->L * sizeof *a0);
    o.algos = a0;
    o.algos_bwd = a0 + c->L;
    vd_plan P;
    int rc = vdp_build_policy(c->net, c->prof, &o, &P, e);
    vd_free(a0);
    if (rc) return rc;
    rc = operand_bound(c->net, &P, floor_b, e);
    if (!rc && P.persistent_bytes > *floor_b) *floor_b = P.persistent_bytes;
    vdp_plan_release(&P);
    return rc;
}
