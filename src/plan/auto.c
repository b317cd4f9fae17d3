/* auto.c — the auto policy ("ours"): per feature map keep / offload /
 * recompute, and per convolution and pass (forward, backward) the option
 * to run, searched with the simulator for the fastest predicted plan that
 * fits the budget. This file orchestrates the search (docs/planner.md says
 * how it works and why, with its measured history):
 *
 *  - vdp_build_auto: everything kept, with the room of the update in the
 *    backward pass; if that does not fit (or fits slowly), the search with
 *    the gradient array, its plan taken to the update's mode (to_update),
 *    and the search with the room where that can gain (auto_phases);
 *  - search_auto, one search: from each start (every recomputable map
 *    recomputed; everything kept; everything kept with the copy bandwidths
 *    scaled) greedy until the plan fits (search_greedy.c) and refine; the
 *    fastest start goes on to the swaps, the trades and the shifts, then to
 *    AUTO_CHAINS chains of kicks (search_local.c); then, where the plan is
 *    still far above the copies' bound, a refine on an effort of its own
 *    (refine_again); then the fastest start
 *    left unrefined far behind (far_start); then a second opinion on
 *    a jittered profile; then, where the plan is still over 2% above the
 *    copies' lower bound, the lean start (lean_options: every pass at its
 *    option of least workspace that runs about as fast as its fastest) and
 *    the bound's start (from the maps the bound's relaxation recomputes,
 *    and where that does not fit, from those it recomputes at a tighter
 *    budget), each an added start (added_start); fewer copies, and the paper's policies
 *    and the extreme configuration as fallbacks (search_eval.c). Work
 *    budgets and an effort cap bound it, counts never clocks: the same
 *    inputs, the same plan;
 *  - vdp_min_budget_auto: a bisection of the budget with the search in
 *    feasibility-only mode (it stops at the first fitting plan: a budget
 *    fits there exactly when the full search finds a fitting plan).
 *
 * State of one call lives in a struct vdp_search passed down (search.h);
 * a nested search is a child of it. Caller-given dispositions (opts->disp
 * entries other than AUTO) and algorithms (opts->algos, opts->fixed_algo)
 * are never changed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "plan/search.h"

/* Starts of the search beyond the first: greedy decides from the predicted
 * times, and a small change in them (the copy bandwidths) can send it to a
 * different fitting configuration whose refined plan is much faster. So
 * greedy also runs with the copy bandwidths
 * scaled by each factor here; each configuration it reaches is rebuilt with
 * the true profile and refined, and the fastest refined plan goes on to the
 * kick search. */
static const double start_bw_scale[][2] = {   /* {D2H, H2D} factors */
    {0.8, 0.8}, {1.25, 1.25}, {1.0, 1.04}, {1.04, 1.0}};
/* Start 0 (RC_START): every recomputable map recomputed, the rest kept.
 * Start 1: everything kept. Starts 2..: start 1 with the copy bandwidths
 * scaled (start_bw_scale), run only while the search's work is within
 * AUTO_WORK_BUDGET (on big nets one start's greedy and refine can spend more). A
 * start whose greedy plan is over AUTO_START_BEHIND times as slow as the
 * fastest refined start before it is not refined (refine rarely closes such
 * a gap, and it is a start's dearest part), and its greedy stops once it
 * gets there.
 * Each start refines its own greedy's result (the fastest fitting plan seen
 * only when that does not fit): the starts end in different places, which
 * going on from the fastest plan seen so far would give up.
 * Starts 0 and 1 run in the other order where the copies' bound, its
 * relaxation run on the unsplit plan, recomputes no map at the budget (what
 * must leave the device can all be offloaded in its copy windows; on split
 * plans it does not run, and the late split needs RC_START first: GoogLeNet
 * fp32 analytic at 2.52 GB, test_late_split): there greedy from everything
 * kept offloads what must leave and ends near its refined plan, while the
 * refine from everything recomputed spends the whole effort cap on
 * ResNet-152 undoing recomputes, before the other starts and the kicks
 * could run: it planned more memory slower than less
 * (docs/results/2026-12-07-s29/starts.md). */
enum { RC_START = 0, N_STARTS = 2 + (int)(sizeof start_bw_scale / sizeof start_bw_scale[0]) };
/* The added starts (added_start), after the others: their own effort, this
 * share of the cap on top of what the search spent, refine at most
 * AUTO_SEED_REFINE of it (its greedy alone takes most of the share on the
 * measured ResNet-152 profile; refine's first moves gain almost all that
 * refine gains there: docs/results/2026-12-06-s20/seed.md); left out where
 * its greedy plan is over AUTO_SEED_GATE above the bound, where the bound's
 * relaxation is far from any plan (refine brings greedy plans within the
 * gate near the bound, and rarely those beyond it: docs/planner.md,
 * "Starts", has the measured cases). */
static const double AUTO_SEED_SHARE = 0.2, AUTO_SEED_REFINE = 0.05, AUTO_SEED_GATE = 0.25;
/* The lean start's options: per pass the least workspace among the options
 * within AUTO_LEAN_TIME of the pass's fastest (lean_options). */
static const double AUTO_LEAN_TIME = 0.02;
/* While the plan stays over AUTO_OPINION_GAP above the bound, the bound's
 * start runs again from the maps the bound recomputes at AUTO_SEED_TIGHT
 * of the budget, then at AUTO_SEED_TIGHT of that, AUTO_SEED_RETRIES times
 * at most (a seed the same as the one before skipped): the relaxation is
 * optimistic about memory, and from a seed that recomputes too little
 * greedy fits by worse moves, or not at all (docs/planner.md, "Starts"). */
static const double AUTO_SEED_TIGHT = 0.9;
enum { AUTO_SEED_RETRIES = 3 };
static const double AUTO_START_BEHIND = 2.0;
/* The runs (search_recompute_runs), last before fewer copies: where the
 * plan's stalls are at least AUTO_RUN_STALLS of its iteration (trading
 * copies for recomputes gains only there), on an effort of their own, AUTO_RUN_SHARE of
 * the cap on top of what the search spent (at the floors the search has
 * spent it all by then: GoogLeNet's, docs/results/2026-12-06-s22/bound-gap.md). */
static const double AUTO_RUN_STALLS = 0.1, AUTO_RUN_SHARE = 0.2;
/* The refine again (refine_again), after the kick chains: where the plan is
 * still over AUTO_SEED_GATE above the copies' bound, on an effort of its own,
 * AUTO_AGAIN_SHARE of the cap on top of what the search spent. Near the
 * floor the starts' greedy spends the cap before a start fits, and the
 * plan that fits last is not refined (docs/planner.md, "Starts"). */
static const double AUTO_AGAIN_SHARE = 0.25;
/* the trades before the kicks try pairs until the work has grown by this */
static const double AUTO_PAIR_WORK = 0.2 * AUTO_WORK_BUDGET;

/* Would the effort cap cut a start's refine short? Its first pass tries
 * about 3L configurations (each disposition two ways, each pass's
 * options); counted at the search's effort per build so far. Then it tries
 * the dearest decisions first (refine_order), so that what the cap leaves
 * untried is what mattered least. A refine the cap does not cut goes in
 * layer order (by cost it ended elsewhere, slower); every other refine goes
 * by cost (the trades', the kicks'). docs/planner.md, "Starts", has the
 * measured cases. */
static bool pass_cut(const actx *c) {
    if (c->evals == 0) return false;
    double per_build = c->effort / c->evals;
    return c->effort + 3.0 * c->L * per_build > vdp_whole_cap(c->s);
}

/* No start fitted: the configurations that fit most easily from the start
 * configuration (disp0, algos0): every map offloaded, then the extreme one
 * (search_extreme_config), the first that fits refined into *P. The
 * greedy from the starts can end outside the budget near the floor, where
 * a local search that starts inside it descends (docs/planner.md, the
 * fitting start). VD_EBUDGET: neither fits. */
static int fitting_start(actx *c, const vd_disp *disp0, const int *algos0, vd_plan *P,
                         vd_err *e) {
    for (int k = 0; k < 2 && !done(c); k++) {
        config_copy(c, c->disp, c->algos, disp0, algos0);
        if (k == 0) {
            for (int i = 0; i <= c->L; i++)
                if (!c->fixed[i]) c->disp[i] = VD_DISP_OFFLOAD;
        } else {
            search_extreme_config(c);
        }
        int rc = search_eval(c, P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) return rc;
        if (P->feasible) {
            search_phase(c, "refine, a start that fits", 0, 0);
            if ((rc = search_refine(c, P, NULL, pass_cut(c), e))) vdp_plan_release(P);
            return rc;
        }
        vdp_plan_release(P);
    }
    return VD_EBUDGET;
}

/* The bound's start's seed: the maps the copies' bound's relaxation at
 * `budget` recomputes where most bytes must leave (vdp_bound_recompute_set),
 * from plan P (any plan of c's net and options: the bound reads its
 * structure), as disposition keys in *seed ([L + 1], NULL when it names
 * none the search may recompute); *bound_s (may be NULL): that bound, also
 * where it names none (0 where it is not computed: P split, no budget). */
static int bound_seed(actx *c, const vd_plan *P, uint64_t budget, bool **seed, double *bound_s,
                      vd_err *e) {
    *seed = NULL;
    if (bound_s) *bound_s = 0;
    /* a split plan's maps are its chunks', a key's its first chunk's
     * (tensor_of): the bound's cover does not name keys there */
    if (c->B == 0 || P->n_tensors == 0 || P->n_units != P->n_layers) return VD_OK;
    bool *rc_t = vd_calloc((size_t)P->n_tensors, sizeof *rc_t, NULL);
    bool *sk = vd_calloc((size_t)c->L + 1, sizeof *sk, NULL);
    if (!rc_t || !sk) {
        vd_free(rc_t); vd_free(sk);
        return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    }
    vd_plan_bound bd;
    int rc = vdp_bound_recompute_set(c->net, c->prof, P, budget, rc_t, &bd, e);
    int n = 0;
    for (int k = 0; k <= c->L && !rc; k++) {
        int t = tensor_of(c, P, k);
        sk[k] = t >= 0 && rc_t[t] && !c->fixed[k] && c->can_rc[k];
        n += sk[k];
    }
    vd_free(rc_t);
    if (!rc && bound_s) *bound_s = bd.bound_s;
    if (rc || n == 0) { vd_free(sk); return rc; }
    *seed = sk;
    return VD_OK;
}

/* Greedy from the start configuration with profile prof (c->prof restored
 * after), then, if that configuration fits under the true profile (else the
 * fastest fitting one seen), refine.
 * *P: the plan of the configuration reached, under the true profile;
 * *behind: it fits but was not refined, far behind best_s. */
static int one_start(actx *c, int start, const vd_profile *prof, const vd_disp *disp0,
                     const int *algos0, double best_s, vd_plan *P, bool *behind, vd_err *e) {
    *behind = false;
    const vd_profile *true_prof = c->prof;
    config_copy(c, c->disp, c->algos, disp0, algos0);   /* the start configuration */
    bool rc_start = start == RC_START;
    if (rc_start)
        for (int k = 0; k <= c->L; k++)
            if (!c->fixed[k] && c->can_rc[k]) c->disp[k] = VD_DISP_RECOMPUTE;
    search_phase(c, "greedy, start %d of %d", start + 1, N_STARTS);
    c->prof = prof;
    c->perturbed = prof != true_prof;
    c->prof_id = prof != true_prof ? start : 0;
    int rc = search_eval(c, P, e);
    if (rc == VD_OK || rc == VD_EBUDGET) {
        c->abandon_s = AUTO_START_BEHIND * best_s;   /* 0 for the first start */
        /* a start other than RC_START when none before it has fitted gets
         * one budget (AUTO_WORK_BUDGET, not AUTO_GREEDY_WORK): where only
         * the fallbacks fit, each start's greedy would spend three before
         * giving up; a start that fits needs less (and where start 1 runs
         * first, RC_START's greedy still has its own limit after it) */
        if (start > 0 && !c->have_seen) c->greedy_work = AUTO_WORK_BUDGET;
        rc = search_greedy(c, P, 3 * (c->L + 1), e);
        c->abandon_s = 0;
        c->greedy_work = 0;
        if (rc) vdp_plan_release(P);
    }
    c->prof = true_prof;
    c->perturbed = false;
    c->prof_id = 0;
    if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    if (prof != true_prof) {           /* rebuilt with the true profile */
        vdp_plan_release(P);
        rc = search_eval(c, P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    }
    if (!done(c) && c->have_seen && !P->feasible) {
        /* the fastest fitting configuration seen, rebuilt */
        config_copy(c, c->disp, c->algos, c->seen_disp, c->seen_algos);
        vdp_plan_release(P);
        rc = search_eval(c, P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    }
    /* far behind the starts before it: not refined (refine rarely closes
     * such a gap, and it is the start's dearest part) */
    if (best_s > 0 && P->feasible && P->sim.iter_s > AUTO_START_BEHIND * best_s) {
        *behind = true;
        return VD_OK;
    }
    search_phase(c, "refine, start %d of %d", start + 1, N_STARTS);
    if (P->feasible && !done(c) && (rc = search_refine(c, P, NULL, pass_cut(c), e))) { vdp_plan_release(P); return rc; }
    return VD_OK;
}

/* A second opinion (vdp_build_auto, small searches only): the whole search
 * again on the profile with every option's pass times scaled by seeded
 * factors in [1 - AUTO_JITTER, 1 + AUTO_JITTER], its plan's decisions
 * rebuilt under the true profile and refined, kept in *P when faster. The
 * search's path decides much: a profile a little off can lead it to a basin
 * the true one does not (docs/planner.md, "Second opinion"). It runs as a
 * child search (vdp_search_child) on the effort its caller left; one level
 * deep (jitter_depth); deterministic (a fixed seed). */
static const double AUTO_JITTER = 0.015, AUTO_OPINION_GAP = 0.02, AUTO_OPINION_MIN_S = 0.01;
static int build_auto(vdp_search *s, const vd_net *net, const vd_profile *prof,
                      const vd_plan_opts *opts, int feasibility_only, vd_plan *out, vd_err *e);
static int second_opinion(actx *c, const vd_net *net, const vd_profile *prof,
                          const vd_plan_opts *opts, vd_plan *P, vd_err *e) {
    vd_profile pp = *prof;
    vd_profile_layer *jl = vd_malloc((size_t)prof->n_layers * sizeof *jl, NULL);
    if (!jl) return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    memcpy(jl, prof->layers, (size_t)prof->n_layers * sizeof *jl);
    vd_rng r;
    vd_rng_seed(&r, 0x5ec0dull, (uint64_t)prof->n_layers);
    for (int l = 0; l < prof->n_layers; l++)
        for (int a = 0; a < jl[l].n_algos; a++) {
            jl[l].algos[a].fwd_s *= 1.0 - AUTO_JITTER + 2.0 * AUTO_JITTER * vd_rng_uniform(&r);
            jl[l].algos[a].bwd_s *= 1.0 - AUTO_JITTER + 2.0 * AUTO_JITTER * vd_rng_uniform(&r);
        }
    pp.layers = jl;
    vd_plan J;
    vd_err te = {0};
    vd_plan_opts jo = *opts;
    jo.progress = NULL;    /* the caller's search reports "second opinion" meanwhile */
    vdp_search ch = vdp_search_child(c->s);
    ch.jitter_depth++;
    ch.cap = vdp_search_cap(c->s) - c->effort;
    int rc = build_auto(&ch, net, &pp, &jo, false, &J, &te);
    vdp_search_join(c->s, &ch);
    vd_free(jl);
    if (rc == VD_EBUDGET) { vdp_plan_release(&J); return VD_OK; }
    if (rc) { *e = te; return rc; }
    vd_disp *sd = vd_malloc((size_t)(c->L + 1) * sizeof *sd, NULL);
    int *sa = vd_malloc(2 * (size_t)c->L * sizeof *sa, NULL);
    if (!sd || !sa) {
        vd_free(sd); vd_free(sa); vdp_plan_release(&J);
        return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    }
    config_copy(c, sd, sa, c->disp, c->algos);
    search_config_from_plan(c, &J);
    vdp_plan_release(&J);
    vd_plan Q;
    rc = search_eval(c, &Q, e);
    bool fits = rc == VD_OK;   /* Q valid and fitting */
    if (rc == VD_EBUDGET) { vdp_plan_release(&Q); rc = VD_OK; }
    if (fits && (rc = search_refine(c, &Q, NULL, true, e))) { vdp_plan_release(&Q); fits = false; }
    if (fits && Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9)) {
        vdp_plan_release(P);
        *P = Q;
    } else {
        if (fits) vdp_plan_release(&Q);
        config_copy(c, c->disp, c->algos, sd, sa);
    }
    vd_free(sd);
    vd_free(sa);
    return rc;
}

/* Fewer copies at the same speed: the simulator counts an offload hidden
 * behind compute as free, but copies slow the kernels beside them a little
 * (HBM and PCIe traffic: docs/planner.md, "Fewer copies"). So the plan's
 * offloaded maps, largest first
 * (at most AUTO_TIDY of them), are kept instead one at a time wherever the
 * plan still fits and predicts no slower. P's configuration is set into c
 * first; c ends with the final plan's. */
enum { AUTO_TIDY = 8 };
static int cmp_bytes_desc(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;   /* {bytes, key} */
    return (x[0] < y[0]) - (x[0] > y[0]);
}
static int fewer_copies(actx *c, vd_plan *P, vd_err *e) {
    uint64_t (*cand)[2] = vd_malloc((size_t)(c->L + 1) * sizeof *cand, NULL);
    if (!cand) return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    search_config_from_plan(c, P);
    int n = 0;
    for (int k = 0; k <= c->L; k++) {
        int t = c->fixed[k] ? -1 : tensor_of(c, P, k);
        if (t < 0 || !P->tensors[t].offload) continue;
        cand[n][0] = P->tensors[t].bytes;
        cand[n][1] = (uint64_t)k;
        n++;
    }
    qsort(cand, (size_t)n, sizeof *cand, cmp_bytes_desc);
    int rc = VD_OK;
    for (int i = 0; i < n && i < AUTO_TIDY && !spent(c); i++) {
        int k = (int)cand[i][1];
        c->disp[k] = VD_DISP_KEEP;
        vd_plan Q;
        rc = search_eval(c, &Q, e);
        if (rc != VD_OK && rc != VD_EBUDGET) break;
        if (rc == VD_OK && Q.feasible && Q.sim.iter_s <= P->sim.iter_s * (1.0 + 1e-9) &&
            Q.offload_bytes < P->offload_bytes) {
            vdp_plan_release(P);
            *P = Q;
        } else {
            vdp_plan_release(&Q);
            c->disp[k] = VD_DISP_OFFLOAD;
        }
        rc = VD_OK;
    }
    vd_free(cand);
    return rc;
}

/* The start left far behind, refined last: the starts that one_start
 * leaves unrefined (their greedy plan over AUTO_START_BEHIND times the
 * best refined start's) save the search much time on deep nets, but a
 * greedy plan does not tell how its refined plan ends (docs/planner.md,
 * "Starts"; docs/results/2026-12-06-s19/search.md has the GoogLeNet case
 * that planned slower with more memory). So where the search's plan *P stays over
 * AUTO_OPINION_GAP above the lower bound, the fastest such start's
 * configuration (fd, fa) is refined now, with the effort left, and
 * replaces *P when faster: an added candidate, which no plan can lose by.
 * c ends with *P's configuration. */
static int far_start(actx *c, const vd_disp *fd, const int *fa, vd_plan *P, vd_err *e) {
    config_copy(c, c->disp, c->algos, fd, fa);
    vd_plan Q;
    int rc = search_eval(c, &Q, e);
    bool fits = rc == VD_OK;
    if (rc == VD_EBUDGET) { vdp_plan_release(&Q); rc = VD_OK; }
    if (fits) {
        search_phase(c, "refine, the start far behind", 0, 0);
        if ((rc = search_refine(c, &Q, NULL, pass_cut(c), e))) { vdp_plan_release(&Q); fits = false; }
    }
    if (fits && Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9)) {
        vdp_plan_release(P);
        *P = Q;
    } else if (fits) {
        vdp_plan_release(&Q);
    }
    search_config_from_plan(c, P);
    return rc;
}

/* The lean start's options: each pass at its option of least workspace
 * among those within AUTO_LEAN_TIME of its fastest (c->fast). Split
 * options (b/K) need a fraction of the unsplit algorithms' workspace and
 * many run about as fast; greedy from the fastest options frees that
 * memory by dispositions and slower options instead and can end in a
 * basin that refine, the trades and the kicks do not leave (fp32 VGG-16:
 * docs/planner.md, "Starts"; test_plan's test_vgg16_lean_start). */
static void lean_options(const actx *c, int *lean) {
    memcpy(lean, c->fast, 2 * (size_t)c->L * sizeof *lean);
    for (int k = 0; k < 2 * c->L; k++) {
        int n = c->prof->layers[k % c->L].n_algos;
        if (n < 2) continue;
        double limit = algo_time(c, k, c->fast[k]) * (1.0 + AUTO_LEAN_TIME);
        for (int a = 0; a < n; a++)
            if (algo_time(c, k, a) <= limit && algo_ws(c, k, a) < algo_ws(c, k, lean[k]))
                lean[k] = a;
    }
}

/* A phase on an effort of its own: share of the cap on top of what the
 * search spent (own_effort_begin); its counts put back after
 * (own_effort_end), so that what follows spends and stops as without it,
 * but for the plans it built, which stay counted in the search's progress
 * (the memo keeps what it built, which only saves builds later). */
typedef struct own_effort { double work, effort, cap; int evals, looks; } own_effort;

static own_effort own_effort_begin(actx *c, double share) {
    own_effort o = {c->work, c->effort, c->s->cap, c->evals, c->looks};
    c->s->cap = c->effort + share * vdp_search_cap(c->s);
    return o;
}

static void own_effort_end(actx *c, const own_effort *o) {
    c->s->cap = o->cap;
    c->work = o->work;
    c->effort = o->effort;
    c->s->evals += c->evals - o->evals;
    c->evals = o->evals;
    c->looks = o->looks;
}

/* An added start, a candidate after the search, named what (its phases'
 * names): from (disp0, algos0) with every map of seed recomputed (NULL:
 * none; the bound's start: bound_seed's), greedy until it fits, then
 * refine, on an effort of its own (own_effort): AUTO_SEED_SHARE of the cap
 * in all, refine at most AUTO_SEED_REFINE of it. Greedy gives up, and
 * refine does not run, once its plan is over AUTO_SEED_GATE above bound_s, the bound at the
 * budget; one that does not fit is left out (not the search's fastest
 * configuration seen, as a start's: that is *P's). *fitted: its plan fit
 * within the gate. Replaces *P when faster; c ends with *P's
 * configuration. It runs after the starts, not among them: there it took
 * effort that the other starts and the kicks needed where its plan was not
 * the best (docs/results/2026-12-06-s20/seed.md). */
static int added_start(actx *c, const char *what, const vd_disp *disp0, const int *algos0,
                       const bool *seed, double bound_s, vd_plan *P, bool *fitted, vd_err *e) {
    char greedy_phase[64], refine_phase[64];   /* what has no '%' */
    snprintf(greedy_phase, sizeof greedy_phase, "greedy, %s", what);
    snprintf(refine_phase, sizeof refine_phase, "refine, %s", what);
    double cap = vdp_search_cap(c->s), gate_s = (1.0 + AUTO_SEED_GATE) * bound_s;
    config_copy(c, c->disp, c->algos, disp0, algos0);
    for (int k = 0; seed && k <= c->L; k++)
        if (seed[k]) c->disp[k] = VD_DISP_RECOMPUTE;
    search_phase(c, greedy_phase, 0, 0);
    own_effort own = own_effort_begin(c, AUTO_SEED_SHARE);
    vd_plan Q;
    int rc = search_eval(c, &Q, e);
    bool fits = false;
    if (rc == VD_OK || rc == VD_EBUDGET) {
        c->abandon_s = gate_s;
        rc = search_greedy(c, &Q, 3 * (c->L + 1), e);
        c->abandon_s = 0;
        fits = !rc && Q.feasible && Q.sim.iter_s <= gate_s;
        if (fits) {
            search_phase(c, refine_phase, 0, 0);
            c->s->cap = fmin(c->s->cap, c->effort + AUTO_SEED_REFINE * cap);
            rc = search_refine(c, &Q, NULL, pass_cut(c), e);
        }
        if (rc) vdp_plan_release(&Q);
    }
    own_effort_end(c, &own);
    if (rc) return rc;
    *fitted = fits;
    if (fits && Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9)) {
        vdp_plan_release(P);
        *P = Q;
    } else {
        vdp_plan_release(&Q);
    }
    search_config_from_plan(c, P);
    return VD_OK;
}

/* Refine *P again on an effort of its own (own_effort, AUTO_AGAIN_SHARE),
 * where it is over AUTO_SEED_GATE above bound_s, the copies' bound at the
 * budget (0: not computed, then not): near the floor the starts' greedy
 * can spend the effort cap before any start fits, and the one that fits
 * at last (the last resort, fitting_start) is refined with nothing left,
 * far above the plans a refine reaches from it. */
static int refine_again(actx *c, vd_plan *P, double bound_s, vd_err *e) {
    if (!(bound_s > 0) || P->sim.iter_s <= (1.0 + AUTO_SEED_GATE) * bound_s) return VD_OK;
    search_phase(c, "refine again", 0, 0);
    own_effort own = own_effort_begin(c, AUTO_AGAIN_SHARE);
    int rc = search_refine(c, P, NULL, true, e);
    own_effort_end(c, &own);
    return rc;
}

/* The runs on an effort of their own (own_effort, AUTO_RUN_SHARE), where
 * *P stalls enough (AUTO_RUN_STALLS). */
static int runs_phase(actx *c, vd_plan *P, vd_err *e) {
    if (P->sim.stall_s < AUTO_RUN_STALLS * P->sim.iter_s) return VD_OK;
    search_phase(c, "runs recomputed", 0, 0);
    own_effort own = own_effort_begin(c, AUTO_RUN_SHARE);
    int rc = search_recompute_runs(c, P, e);
    own_effort_end(c, &own);
    return rc;
}

/* The search in opts' mode. probe: only the first configuration (the
 * caller's dispositions, everything else kept): VD_OK when it fits, else
 * VD_EBUDGET (out holds it either way). tidy: the runs (runs_phase) and
 * fewer_copies at the end.
 * *effort_out (may be NULL): the effort spent. */
static int search_auto(vdp_search *s, const vd_net *net, const vd_profile *prof,
                       const vd_plan_opts *opts, int feasibility_only, bool probe, bool tidy,
                       double *effort_out,
                       vd_plan *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    if (effort_out) *effort_out = 0;
    actx c;
    int rc = search_ctx_init(&c, s, net, prof, opts, feasibility_only, e);
    if (rc) return rc;
    vd_plan P;
    rc = search_eval(&c, &P, e);
    if (rc != VD_OK && rc != VD_EBUDGET) { search_ctx_free(&c); return rc; }
    if (rc == VD_OK || c.B == 0 || probe) {   /* it fits as it is */
        int rs = search_restage(&c, &P, e);
        if (rs) { vdp_plan_release(&P); search_ctx_free(&c); return rs; }
        *out = P;
        if (effort_out) *effort_out = c.effort;
        search_ctx_free(&c);
        return rc;
    }
    c.lb = vd_plan_lower_bound(net, prof, &P, c.B);
    bool *seed = NULL;   /* [L + 1] the bound's start: the keys it recomputes (NULL: none) */
    double seed_s = 0;   /* the copies' bound it comes from (0: not computed) */
    if (!feasibility_only) {
        rc = bound_seed(&c, &P, c.B, &seed, &seed_s, e);
        if (rc) { vdp_plan_release(&P); search_ctx_free(&c); return rc; }
    }
    vdp_plan_release(&P);
    if (feasibility_only) {
        /* The search's last resorts first: when one fits, the answer is
         * "fits" either way (vdp_min_budget_auto: the fallbacks fit at its
         * upper end, where the search from the starts may take long on a
         * deep net to fall back on them). */
        rc = search_feasible_fallback(&c, opts, out, e);
        if (rc != VD_EBUDGET) { search_ctx_free(&c); return rc; }
    }
    vd_plan best;
    memset(&best, 0, sizeof best);
    int rc_best = -1;
    /* the start configuration, and the best refined one of the starts */
    vd_disp *d0 = vd_malloc((size_t)(c.L + 1) * sizeof *d0, NULL), *bd = vd_malloc((size_t)(c.L + 1) * sizeof *bd, NULL);
    int *a0 = vd_malloc(2 * (size_t)c.L * sizeof *a0, NULL), *ba = vd_malloc(2 * (size_t)c.L * sizeof *ba, NULL);
    /* the fastest start left far behind (far_start), far_s its greedy plan's */
    vd_disp *fd = vd_malloc((size_t)(c.L + 1) * sizeof *fd, NULL);
    int *fa = vd_malloc(2 * (size_t)c.L * sizeof *fa, NULL);
    double far_s = INFINITY;
    bool behind = false;
    if (!d0 || !bd || !a0 || !ba || !fd || !fa) {
        vd_free(d0); vd_free(bd); vd_free(a0); vd_free(ba); vd_free(fd); vd_free(fa); vd_free(seed); search_ctx_free(&c);
        return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    }
    config_copy(&c, d0, a0, c.disp, c.algos);
    bool have_start = false;     /* best, bd, ba: the best start so far */
    /* starts 0 and 1 swapped (above): the relaxation ran (seed_s: not on a
     * split plan, nor for feasibility only) and recomputes nothing */
    bool kept_first = !seed && seed_s > 0;
    for (int pos = 0; pos < N_STARTS && !done(&c); pos++) {
        int st = kept_first && pos < 2 ? 1 - pos : pos;
        if (pos > 1 && c.work > AUTO_WORK_BUDGET) break;
        if (pos > 0 && spent(&c)) break;
        vd_profile pp = *prof;
        if (st > 1) {                        /* a bandwidth start */
            const double *f = start_bw_scale[st - 2];
            pp.dev.d2h_bw *= f[0];
            pp.dev.h2d_bw *= f[1];
            pp.dev.both_bw *= 0.5 * (f[0] + f[1]);
            pp.dev.d2h_bw_busy *= f[0];   /* the rates the simulator uses (0 stays 0) */
            pp.dev.h2d_bw_busy *= f[1];
            pp.dev.both_bw_busy *= 0.5 * (f[0] + f[1]);
        }
        rc = one_start(&c, st, st > 1 ? &pp : prof, d0, a0, have_start && best.feasible ? best.sim.iter_s : 0.0, &P, &behind, e);
        if (rc) goto fail;
        if (behind && P.sim.iter_s < far_s) {
            far_s = P.sim.iter_s;
            config_copy(&c, fd, fa, c.disp, c.algos);
        }
        /* fitting beats not fitting, then faster */
        bool better = !have_start || (P.feasible && (!best.feasible ||
                                      P.sim.iter_s < best.sim.iter_s * (1.0 - 1e-9)));
        if (better) {
            if (have_start) vdp_plan_release(&best);
            best = P;
            have_start = true;
            config_copy(&c, bd, ba, c.disp, c.algos);
        } else {
            vdp_plan_release(&P);
        }
    }
    /* the last resort: no start fitted; the recompute start again, its
     * greedy with the stuck moves (search_greedy) */
    if (have_start && !best.feasible && !done(&c)) {
        c.last_resort = true;
        rc = one_start(&c, RC_START, prof, d0, a0, 0.0, &P, &behind, e);
        c.last_resort = false;
        if (rc) goto fail;
        if (P.feasible) {
            vdp_plan_release(&best);
            best = P;
            config_copy(&c, bd, ba, c.disp, c.algos);
        } else {
            vdp_plan_release(&P);
        }
    }
    if (have_start && !best.feasible && !done(&c)) {
        rc = fitting_start(&c, d0, a0, &P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) goto fail;
        if (rc == VD_OK) {
            vdp_plan_release(&best);
            best = P;
            config_copy(&c, bd, ba, c.disp, c.algos);
        }
    }
    P = best;
    memset(&best, 0, sizeof best);
    config_copy(&c, c.disp, c.algos, bd, ba);
    if (P.feasible && !done(&c)) {
        rc = search_swaps(&c, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
        c.pair_until = c.work + AUTO_PAIR_WORK;
        rc = search_trades(&c, &P, e);
        c.pair_until = 0;
        if (!rc) rc = search_shifts(&c, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    /* AUTO_CHAINS kick chains, each from the plan the trades reached with
     * its own seed and its own budget, while the work is within the first
     * chain's; the fastest plan wins. One chain's path decides much (on
     * profiles measured apart, one chain ends in different basins; three
     * agree: docs/planner.md, "Kick chains"); on big nets the first chain
     * spends the budget. */
    for (int ch = 0; ch < AUTO_CHAINS && P.feasible && !done(&c); ch++) {
        if (ch > 0 && (c.work > search_work_limit(true) || spent(&c))) break;
        vd_plan Q;
        if (ch == 0) {
            config_copy(&c, bd, ba, c.disp, c.algos);   /* the chains' start */
            Q = P;
            memset(&P, 0, sizeof P);
        } else {
            config_copy(&c, c.disp, c.algos, bd, ba);
            if ((rc = search_eval(&c, &Q, e)) != VD_OK) { if (rc == VD_EBUDGET) vdp_plan_release(&Q); vdp_plan_release(&P); goto fail; }
        }
        double base = ch ? c.work : 0.0;
        rc = search_kicks(&c, &Q, false, ch, base, e);
        if (!rc) rc = search_kicks(&c, &Q, true, ch, base, e);
        if (rc) { vdp_plan_release(&Q); if (ch) vdp_plan_release(&P); goto fail; }
        if (ch == 0 || Q.sim.iter_s < P.sim.iter_s * (1.0 - 1e-9)) {
            if (ch) vdp_plan_release(&P);
            P = Q;
        } else {
            vdp_plan_release(&Q);
        }
    }
    if (P.feasible && !done(&c) && s->jitter_depth == 0 && (rc = refine_again(&c, &P, seed_s, e))) {
        vdp_plan_release(&P);
        goto fail;
    }
    if (isfinite(far_s) && P.feasible && !done(&c) && c.lb > 0 &&
        P.sim.iter_s > c.lb * (1.0 + AUTO_OPINION_GAP)) {
        rc = far_start(&c, fd, fa, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    /* only where it can gain: the plan over 2% above the lower bound, and
     * an iteration of at least AUTO_OPINION_MIN_S (on the tiny nets, LeNet
     * and the tests' random nets, it would double a planning time that
     * already outweighs what it could gain) */
    if (P.feasible && !done(&c) && s->jitter_depth == 0 && s->update_depth == 0 && s->array_phase == 0 &&
        c.effort < vdp_whole_cap(s) / 2 &&
        c.lb > 0 && P.sim.iter_s > c.lb * (1.0 + AUTO_OPINION_GAP) &&
        P.sim.iter_s >= AUTO_OPINION_MIN_S) {
        search_phase(&c, "second opinion", 0, 0);
        rc = second_opinion(&c, net, prof, opts, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    /* the lean start where the options are the search's to choose and the
     * plan is over AUTO_OPINION_GAP above the copies' bound (seed_s: not on
     * split plans, nor for feasibility only) */
    if (c.algo_free && seed_s > 0 && P.feasible && !done(&c) &&
        P.sim.iter_s > seed_s * (1.0 + AUTO_OPINION_GAP)) {
        bool fitted;
        int *lean = vd_malloc(2 * (size_t)c.L * sizeof *lean, NULL);
        if (!lean) {
            vdp_plan_release(&P);
            rc = vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
            goto fail;
        }
        lean_options(&c, lean);
        rc = added_start(&c, "the lean start", d0, lean, NULL, seed_s, &P, &fitted, e);
        vd_free(lean);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    if (seed && P.feasible && !done(&c) && P.sim.iter_s > seed_s * (1.0 + AUTO_OPINION_GAP)) {
        bool fitted = false;
        rc = added_start(&c, "the bound's start", d0, a0, seed, seed_s, &P, &fitted, e);
        double f = 1.0;
        bool *last = seed;   /* the seed run last (a tighter budget may give the same) */
        for (int q = 0; q < AUTO_SEED_RETRIES && !rc && !done(&c) &&
                        P.sim.iter_s > seed_s * (1.0 + AUTO_OPINION_GAP); q++) {
            /* from P: the bound reads only its structure, the same in
             * every plan of this search (bound_seed) */
            bool *tight = NULL;
            f *= AUTO_SEED_TIGHT;
            rc = bound_seed(&c, &P, (uint64_t)(f * (double)c.B), &tight, NULL, e);
            if (!tight) continue;
            if (!rc && memcmp(tight, last, (size_t)(c.L + 1) * sizeof *tight))
                rc = added_start(&c, "the bound's start", d0, a0, tight, seed_s, &P, &fitted, e);
            if (last != seed) vd_free(last);
            last = tight;
        }
        if (last != seed) vd_free(last);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    if (tidy && P.feasible && !done(&c) && s->jitter_depth == 0 && P.offload_bytes > 0) {
        rc = runs_phase(&c, &P, e);
        search_phase(&c, "fewer copies", 0, 0);
        if (!rc) rc = fewer_copies(&c, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    if ((rc = search_restage(&c, &P, e))) { vdp_plan_release(&P); goto fail; }
    search_take_better(&best, &rc_best, &P, P.feasible ? VD_OK : VD_EBUDGET);
    vd_free(d0); vd_free(bd); vd_free(a0); vd_free(ba); vd_free(fd); vd_free(fa); vd_free(seed);
    d0 = bd = fd = NULL; a0 = ba = fa = NULL; seed = NULL;
    if (!done(&c)) {
        rc = search_paper_candidates(&c, opts, &best, &rc_best, e);
        if (rc) { vdp_plan_release(&best); search_ctx_free(&c); return rc; }
    }
    if (rc_best != VD_OK && !done(&c)) {
        search_extreme_config(&c);
        vd_plan X;
        vd_err te = {0};
        rc = search_eval(&c, &X, &te);
        if (rc == VD_OK && (rc = search_restage(&c, &X, &te))) vdp_plan_release(&X);
        if (rc != VD_OK && rc != VD_EBUDGET) { vdp_plan_release(&best); search_ctx_free(&c); *e = te; return rc; }
        search_take_better(&best, &rc_best, &X, rc);
    }
    if (done(&c) && rc_best != VD_OK) {
        /* feasibility only: the search stopped at a fitting configuration */
        config_copy(&c, c.disp, c.algos, c.seen_disp, c.seen_algos);
        vd_plan X;
        vd_err te = {0};
        rc = search_eval(&c, &X, &te);
        if (rc == VD_OK && (rc = search_restage(&c, &X, &te))) vdp_plan_release(&X);
        if (rc != VD_OK && rc != VD_EBUDGET) { vdp_plan_release(&best); search_ctx_free(&c); *e = te; return rc; }
        search_take_better(&best, &rc_best, &X, rc);
    }
    best.policy = VD_POLICY_AUTO;
    *out = best;
    if (effort_out) *effort_out = c.effort;
    search_ctx_free(&c);
    return rc_best == VD_OK ? VD_OK : vd_errf(e, VD_EBUDGET, "the auto policy found no plan that fits");
fail:
    if (have_start) vdp_plan_release(&best);
    vd_free(d0); vd_free(bd); vd_free(a0); vd_free(ba); vd_free(fd); vd_free(fa); vd_free(seed);
    search_ctx_free(&c);
    return rc;
}

/* Plan P of the gradient array's mode (phase one of vdp_build_auto) in the
 * update's mode of opts: the same decisions, which fit there too (the
 * gradients leave the device), then refined with the effort left (from
 * effort) where they can use the room, and fewer copies. P is replaced
 * when that plan fits and predicts no slower; else P stays, a plan with
 * the gradient array, which runs as it is. */
static int to_update(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     int feasibility_only, double *effort, vd_plan *P, vd_err *e) {
    actx c;
    int rc = search_ctx_init(&c, s, net, prof, opts, feasibility_only, e);
    if (rc) return rc;
    c.effort = c.effort_base = *effort;
    search_config_from_plan(&c, P);
    vd_plan Q;
    rc = search_eval(&c, &Q, e);
    *effort = c.effort;
    if (rc && rc != VD_EBUDGET) { search_ctx_free(&c); return rc; }
    bool fits = rc == VD_OK;
    rc = VD_OK;
    c.lb = vd_plan_lower_bound(net, prof, &Q, c.B);
    if (fits && !feasibility_only) {
        search_phase(&c, "the update in the backward pass", 0, 0);
        if (!spent(&c) && !at_bound(&c, &Q)) rc = search_refine(&c, &Q, NULL, true, e);
        /* here, on the plan the search returns, not in the search: before
         * the kicks, they went on from the exchanged plans to slower ones
         * at two grid points (bound-gap.md) */
        if (!rc) rc = search_exchanges(&c, &Q, e);
        if (!rc && Q.offload_bytes > 0) rc = fewer_copies(&c, &Q, e);
        if (rc) { vdp_plan_release(&Q); search_ctx_free(&c); return rc; }
    }
    if (fits && (rc = search_restage(&c, &Q, e))) { vdp_plan_release(&Q); search_ctx_free(&c); return rc; }
    *effort = c.effort;
    /* the same decisions can predict slower there (the same copies, their
     * prefetches timed otherwise, can stall longer), or not fit (another
     * placement, on tiny nets): then P, which runs as it is */
    if (fits && Q.feasible && Q.sim.iter_s <= P->sim.iter_s * (1.0 + 1e-9)) {
        vdp_plan_release(P);
        *P = Q;
    } else {
        vdp_plan_release(&Q);
    }
    /* and never slower than the paper's policy in this mode (as the search) */
    int rc_best = VD_OK;
    rc = search_paper_candidates(&c, opts, P, &rc_best, e);
    P->policy = VD_POLICY_AUTO;
    search_ctx_free(&c);
    return rc;
}

/* The update in the backward pass (vd_plan_opts.grads_persistent false)
 * leaves the search more room than the gradient array did, and the search,
 * a heuristic capped by effort, lands elsewhere, and not always faster
 * (docs/planner.md, "Phases"). So, in three
 * phases: the caller's dispositions fit as they are (everything else kept),
 * with the room: that plan. Else the search runs with the gradient array,
 * as it always did, and its plan goes to the update's mode (to_update: the
 * same decisions, refined with the effort left where the room helps). Only
 * where nothing fits with the array, within the gradients' bytes of the
 * smallest budget, does the search run with the room, on half the effort
 * cap (the same in the feasibility-only search of vdp_min_budget_auto, so
 * that a budget fits there exactly when the full search fits it); and
 * where not even the fallbacks fit with the array, without its search.
 * Where the caller's dispositions fit but over 2% above the lower bound,
 * the phases run too and the faster plan wins. Nets
 * whose iteration (everything kept) is under AUTO_OPINION_MIN_S are
 * searched with the room alone. */
static int auto_phases(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       int feasibility_only, bool small, vd_plan *out, vd_err *e);
static int fallback_fits(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         int feasibility_only, bool *fits, vd_plan *plan, vd_err *e);
static int room_search(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       int feasibility_only, vd_plan *out, vd_err *e);

/* A budget below the floor (search_floor) fits no plan, so no search runs
 * (it would take seconds on a deep net to find nothing): *below, and *out
 * is the plan at that budget of the two that need least memory, the
 * extreme configuration (every recomputable map recomputed, the rest
 * offloaded) and policy all (every map offloaded), both with the least
 * workspace; the one of smaller high-water mark, VD_EBUDGET. Otherwise
 * *below is false and *out untouched. */
static int below_floor(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       int feasibility_only, bool *below, vd_plan *out, vd_err *e) {
    *below = false;
    actx c;
    int rc = search_ctx_init(&c, s, net, prof, opts, feasibility_only, e);
    if (rc) return rc;
    search_extreme_config(&c);
    uint64_t floor_b = 0;
    rc = search_floor(&c, opts, &floor_b, e);
    if (!rc && opts->budget < floor_b) {
        *below = true;
        vd_plan best, X;
        int rc_best = -1;
        vd_plan_opts o = *opts;
        o.policy = VD_POLICY_ALL;
        o.algos = c.algos;
        o.algos_bwd = c.algos + c.L;
        for (int k = 0; k < 2 && (rc == VD_OK || rc == VD_EBUDGET); k++) {
            vd_err te = {0};
            rc = k == 0 ? search_eval(&c, &X, &te) : vdp_build_policy(net, prof, &o, &X, &te);
            if (rc == VD_OK || rc == VD_EBUDGET) search_take_better(&best, &rc_best, &X, rc);
            else *e = te;
        }
        if (rc_best == VD_OK) rc = vd_errf(e, VD_EINTERNAL, "auto: a plan fits below the floor");
        else if (rc == VD_OK || rc == VD_EBUDGET) rc = VD_EBUDGET;
        if (rc_best >= 0 && rc == VD_EBUDGET) {
            best.policy = VD_POLICY_AUTO;
            *out = best;
        } else if (rc_best >= 0) {
            vdp_plan_release(&best);
        }
    }
    search_ctx_free(&c);
    return rc;
}

/* vdp_build_auto in search s: the outermost call (s new) or a second
 * opinion's (a child of the search that asks it). */
static int build_auto(vdp_search *s, const vd_net *net, const vd_profile *prof,
                      const vd_plan_opts *opts, int feasibility_only, vd_plan *out, vd_err *e) {
    if (opts->budget && !s->above_floor && s->update_depth == 0 && s->jitter_depth == 0) {
        bool below;
        int rc = below_floor(s, net, prof, opts, feasibility_only, &below, out, e);
        if (rc || below) return rc;
    }
    if (opts->forward_only || vd_plan_grads_array(net, opts) || s->update_depth)
        return search_auto(s, net, prof, opts, feasibility_only, false, true, NULL, out, e);
    int rc = search_auto(s, net, prof, opts, feasibility_only, true, false, NULL, out, e);
    /* iterations under AUTO_OPINION_MIN_S (the tests' tiny nets, where the
     * phases would double a planning time that outweighs what they gain):
     * the search with the room alone */
    bool small = out->sim.iter_s < AUTO_OPINION_MIN_S;
    if (rc == VD_EBUDGET) {
        vdp_plan_release(out);
        return auto_phases(s, net, prof, opts, feasibility_only, small, out, e);
    }
    if (rc != VD_OK || feasibility_only || small || opts->budget == 0) return rc;
    /* Everything kept fits, but maybe only in a placement that costs time
     * (near none's smallest budget it can copy the adds' gradients instead
     * of sharing them, slower than a plan with a few maps offloaded at less
     * memory). Over 2% above the lower bound, as the second opinion:
     * the search too, and the faster plan, so that more memory never plans
     * slower than the search at less. */
    double lb = vd_plan_lower_bound(net, prof, out, opts->budget);
    if (!(lb > 0) || out->sim.iter_s <= lb * (1.0 + AUTO_OPINION_GAP)) return VD_OK;
    vd_plan K = *out;
    memset(out, 0, sizeof *out);
    rc = auto_phases(s, net, prof, opts, false, false, out, e);
    if (rc == VD_OK && out->feasible && out->sim.iter_s < K.sim.iter_s * (1.0 - 1e-9)) {
        vdp_plan_release(&K);
        return VD_OK;
    }
    if (rc != VD_OK && rc != VD_EBUDGET) { vdp_plan_release(&K); return rc; }
    vdp_plan_release(out);
    *out = K;
    return VD_OK;
}

/* Build c's configuration (its staging searched, as the search's returned
 * plans are) and, where it fits and offloads nothing, replay it
 * (vd_plan.captured); in place of *out where that predicts faster. */
static int replayed_try(actx *c, const vd_profile *prof, vd_plan *out, vd_err *e) {
    c->stage_full = true;
    vd_plan R;
    int rc = search_eval(c, &R, e);
    if (rc == VD_EBUDGET) { vdp_plan_release(&R); return VD_OK; }
    if (rc) return rc;
    if (R.feasible && R.offload_bytes == 0) {
        R.captured = true;
        if ((rc = vdp_simulate(&R, prof, false, NULL, e))) { vdp_plan_release(&R); return rc; }
        if (R.sim.iter_s < out->sim.iter_s * (1.0 - 1e-9)) {
            vdp_plan_release(out);
            *out = R;
            return VD_OK;
        }
    }
    vdp_plan_release(&R);
    return VD_OK;
}

/* Where the search's plan *out offloads: plans that offload nothing,
 * replayed, in its place where faster: *out's own decisions with each
 * offloaded map recomputed instead (where all can be), then the fastest
 * configuration the searches noted (s->replayed, where its estimate beats
 * the plan so far). */
static int replayed_pick(vdp_search *s, const vd_net *net, const vd_profile *prof,
                         const vd_plan_opts *opts, vd_plan *out, vd_err *e) {
    const vdp_replayed *r = s->replayed;
    if (!out->feasible || out->offload_bytes == 0) return VD_OK;
    actx c;
    int rc = search_ctx_init(&c, s, net, prof, opts, VDP_SEARCH, e);
    if (rc) return rc;
    search_config_from_plan(&c, out);
    bool all_rc = true;
    for (int k = 0; k <= c.L; k++)
        if (c.disp[k] == VD_DISP_OFFLOAD) {
            all_rc = all_rc && c.can_rc[k];
            c.disp[k] = VD_DISP_RECOMPUTE;
        }
    if (all_rc) rc = replayed_try(&c, prof, out, e);
    if (!rc && r->have && out->offload_bytes > 0 && r->est_s < out->sim.iter_s) {
        config_copy(&c, c.disp, c.algos, r->disp, r->algos);
        rc = replayed_try(&c, prof, out, e);
    }
    search_ctx_free(&c);
    return rc;
}

int vdp_build_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                   int feasibility_only, vd_plan *out, vd_err *e) {
    vdp_search s = {0};
    /* where the plans that offload nothing run replayed, the fastest such
     * by that price is noted (vdp_search.replayed) */
    vdp_replayed r = {0};
    int L = net->n_layers;
    if (!feasibility_only && !opts->forward_only && !opts->chunks &&
        vd_graph_captures(opts->graph, 0) && vd_device_launch_cut(&prof->dev) > 0) {
        r.disp = vd_malloc((size_t)(L + 1) * sizeof *r.disp, NULL);
        r.algos = vd_malloc(2 * (size_t)L * sizeof *r.algos, NULL);
        if (!r.disp || !r.algos) {
            vd_free(r.disp);
            vd_free(r.algos);
            return vd_errf(e, VD_ENOMEM, "out of memory");
        }
        s.replayed = &r;
    }
    int rc = build_auto(&s, net, prof, opts, feasibility_only, out, e);
    if (rc == VD_OK && s.replayed && (rc = replayed_pick(&s, net, prof, opts, out, e)))
        vdp_plan_release(out);
    if (rc == VD_OK || rc == VD_EBUDGET) out->search_effort = s.effort;
    vd_free(r.disp);
    vd_free(r.algos);
    return rc;
}

int vdp_build_auto_share(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         double share, vd_plan *out, vd_err *e) {
    vdp_search s = {0};
    s.share = share;
    return build_auto(&s, net, prof, opts, VDP_SEARCH, out, e);
}

/* vdp_build_auto's phases after the probe (everything kept, with the room). */
static int auto_phases(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       int feasibility_only, bool small, vd_plan *out, vd_err *e) {
    int rc;
    if (small) {
        vdp_search ch = vdp_search_child(s);
        ch.update_depth++;
        rc = search_auto(&ch, net, prof, opts, feasibility_only, false, true, NULL, out, e);
        vdp_search_join(s, &ch);
        return rc;
    }
    vd_plan_opts po = *opts;
    po.grads_persistent = true;
    /* Where not even the fallbacks fit with the array (the paper's
     * policies, everything recomputed or offloaded in the least
     * workspace), its search would spend the whole effort cap in greedy
     * before it gave up. The search with the room then. */
    bool array_fits = false;
    rc = fallback_fits(s, net, prof, &po, feasibility_only, &array_fits, feasibility_only ? out : NULL, e);
    if (rc) return rc;
    if (!array_fits) return room_search(s, net, prof, opts, feasibility_only, out, e);
    /* feasibility only: that answers it (the array's search would begin by
     * building the same fallbacks, and stop at the first that fits) */
    if (feasibility_only) return VD_OK;
    double effort = 0;
    vd_err te = {0};
    vdp_search ach = vdp_search_child(s);
    ach.array_phase++;
    rc = search_auto(&ach, net, prof, &po, feasibility_only, false, false, &effort, out, &te);
    vdp_search_join(s, &ach);
    if (rc == VD_OK) {
        rc = to_update(s, net, prof, opts, feasibility_only, &effort, out, e);
        /* with effort to spare (under half the cap), the search with the
         * room too, on what is left but at most 0.35 of the cap (a child
         * search), and the faster plan (docs/planner.md, "Phases") */
        double cap = vdp_search_cap(s);
        if (rc || feasibility_only || effort >= 0.5 * cap) return rc;
        /* and where it can gain, as the second opinion: over 2% above the
         * lower bound */
        double lb = vd_plan_lower_bound(net, prof, out, opts->budget);
        if (!(lb > 0) || out->sim.iter_s <= lb * (1.0 + AUTO_OPINION_GAP)) return VD_OK;
        vdp_search ch = vdp_search_child(s);
        ch.cap = fmin(cap - effort, 0.35 * vdp_whole_cap(s));
        ch.update_depth++;
        vd_plan R;
        vd_err re = {0};
        rc = search_auto(&ch, net, prof, opts, false, false, true, NULL, &R, &re);
        vdp_search_join(s, &ch);
        if (rc == VD_OK && R.feasible && R.sim.iter_s < out->sim.iter_s * (1.0 - 1e-9)) {
            vdp_plan_release(out);
            *out = R;
        } else if (rc == VD_OK || rc == VD_EBUDGET) {
            vdp_plan_release(&R);
        } else {
            *e = re;
            vdp_plan_release(out);
            return rc;
        }
        return VD_OK;
    }
    if (rc != VD_EBUDGET) { *e = te; return rc; }
    vdp_plan_release(out);
    return room_search(s, net, prof, opts, feasibility_only, out, e);
}

/* Whether a fallback of the search (search_feasible_fallback) fits under opts;
 * if so and plan is not NULL, *plan is the first that does (as the search
 * in mode feasibility_only builds it). */
static int fallback_fits(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         int feasibility_only, bool *fits, vd_plan *plan, vd_err *e) {
    *fits = false;
    actx c;
    int rc = search_ctx_init(&c, s, net, prof, opts, plan ? feasibility_only : VDP_ANSWER, e);
    if (rc) return rc;
    vd_plan X;
    rc = search_feasible_fallback(&c, opts, &X, e);
    search_ctx_free(&c);
    if (rc == VD_OK) {
        *fits = true;
        if (plan) *plan = X;
        else vdp_plan_release(&X);
    }
    return rc == VD_EBUDGET ? VD_OK : rc;
}

/* The search with the room (the update in the backward pass), on half the
 * effort cap: where nothing fits with the gradient array. */
static int room_search(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       int feasibility_only, vd_plan *out, vd_err *e) {
    vdp_search ch = vdp_search_child(s);
    ch.cap = 0.5 * vdp_whole_cap(s);
    ch.update_depth++;
    int rc = search_auto(&ch, net, prof, opts, feasibility_only, false, true, NULL, out, e);
    vdp_search_join(s, &ch);
    return rc;
}

/* The bisection's resolution: MIN_BUDGET_RES on budgets over four times
 * that, else VD_PLAN_ALIGN. Each probe is a whole search, and on a budget
 * of gigabytes 256-byte steps take about twice the probes a mebibyte's do:
 * the answer is a budget that fits, at most MIN_BUDGET_RES above the
 * smallest the probes would find (man vdnn-plan, --min-budget). Small nets
 * keep the exact search (test_min_budget_exact). */
#define MIN_BUDGET_RES (1u << 20)
static uint64_t min_budget_res(uint64_t hi) {
    return hi > 4ull * MIN_BUDGET_RES ? MIN_BUDGET_RES : VD_PLAN_ALIGN;
}

/* A probe of the bisection: whether auto's search (feasibility only)
 * fits under o at budget (o->budget set to it); one that fits nothing is
 * an answer, not an error. above_floor: the budget is at most a step
 * below the search's floor, which it then does not check again. */
static int probe_fits(const vd_net *net, const vd_profile *prof, vd_plan_opts *o, uint64_t budget,
                      bool above_floor, bool *fits, vd_err *e) {
    vdp_search s = {.above_floor = above_floor};
    vd_plan P;
    vd_err te = {0};
    o->budget = budget;
    int rc = build_auto(&s, net, prof, o, VDP_ANSWER, &P, &te);
    if (rc == VD_OK || rc == VD_EBUDGET) vdp_plan_release(&P);
    *fits = rc == VD_OK;
    if (rc == VD_EBUDGET) return VD_OK;
    if (rc) *e = te;
    return rc;
}

/* known_dyn: dyn's smallest budget when the caller has it (else NULL).
 * beat: where not 0, only a budget below it is wanted (a split's smallest
 * against the unsplit one's): when the search does not fit one resolution
 * step below it, *min_budget is beat, after that one probe instead of the
 * fallbacks' minima and a bisection (fitting taken as monotone in the
 * budget, as the bisection takes it); when it fits, the bisection's upper
 * end is at most that probe. */
static int min_budget_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                           const uint64_t *known_dyn, uint64_t beat, uint64_t *min_budget,
                           vd_err *e) {
    vdp_search s = {0};
    actx c;
    int rc = search_ctx_init(&c, &s, net, prof, opts, true, e);
    if (rc) return rc;
    vd_plan_opts o = *opts;
    o.progress = NULL;
    uint64_t hi = UINT64_MAX, lo = 0, res = min_budget_res(beat), fit_below = 0;
    if (beat > res) {   /* one probe below beat: failing, beat is the answer */
        bool fits;
        vdp_min_budget_progress(opts, VD_POLICY_AUTO, 1, 0, beat);
        if ((rc = probe_fits(net, prof, &o, (beat - res) / VD_PLAN_ALIGN * VD_PLAN_ALIGN, false,
                             &fits, e)))
            goto out;
        if (!fits) { *min_budget = beat; goto out; }
        fit_below = o.budget;
    }
    /* Upper end: the fallback candidates' own minimum budgets. */
    uint64_t m = 0;
    o = *opts;
    o.budget = 0;
    /* the fallbacks' searches report their own steps; the probes below are
     * reported here, not their searches' phases */
    if (c.algo_free) {
        o.policy = VD_POLICY_DYN;
        if (known_dyn) m = *known_dyn;
        else if ((rc = vdp_min_budget_policy(net, prof, &o, &m, e))) goto out;
        hi = m;
    } else {
        static const vd_policy pols[3] = {VD_POLICY_NONE, VD_POLICY_CONV, VD_POLICY_ALL};
        for (int k = 0; k < 3; k++) {
            o.policy = pols[k];
            o.algos = c.algos;
            o.algos_bwd = c.algos + c.L;
            if ((rc = vdp_min_budget_policy(net, prof, &o, &m, e))) goto out;
            if (m < hi) hi = m;
        }
    }
    search_extreme_config(&c);
    o = *opts;
    o.policy = VD_POLICY_NONE;
    o.disp = c.disp;
    o.algos = c.algos;
    o.algos_bwd = c.algos + c.L;
    if ((rc = vdp_min_budget_policy(net, prof, &o, &m, e))) goto out;
    if (m < hi) hi = m;
    /* Lower end: below the operand bound nothing fits. */
    uint64_t floor_b = 0;
    if ((rc = search_floor(&c, opts, &floor_b, e))) goto out;
    lo = floor_b > VD_PLAN_ALIGN ? floor_b - VD_PLAN_ALIGN : 0;
    lo = lo / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
    if (hi <= lo) { *min_budget = hi; goto out; }
    res = min_budget_res(hi);
    /* the probes: at most one step below the floor, where the search itself
     * finds nothing, so its floor is not checked again at every probe */
    o = *opts;
    o.progress = NULL;
    if (fit_below && fit_below < hi) {
        hi = fit_below;   /* (probed: it fits) */
    } else {
        bool fits;
        vdp_min_budget_progress(opts, VD_POLICY_AUTO, 1, lo, hi);
        if ((rc = probe_fits(net, prof, &o, hi, true, &fits, e))) goto out;
        if (!fits) {
            rc = vd_errf(e, VD_EINTERNAL, "auto: no plan at its fallbacks' minimum budget");
            goto out;
        }
    }
    /* The search often fits nothing below its fallbacks' minimum (a binary
     * search's probes there can all fail, each a whole search). So the first
     * probe is one step below hi: failing there, hi is the answer (the
     * binary search takes fitting as monotone in the budget too). */
    bool first = true;
    for (int step = 2; hi - lo > res; step++) {
        vdp_min_budget_progress(opts, VD_POLICY_AUTO, step, lo, hi);
        uint64_t mid = (lo + (hi - lo) / 2) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        if (first) mid = (hi - res) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        first = false;
        if (vdp_stopped(opts)) { rc = vd_errf(e, VD_ESTOP, "the smallest-budget search stopped"); goto out; }
        if (mid <= lo) mid = lo + VD_PLAN_ALIGN;
        bool fits;
        if ((rc = probe_fits(net, prof, &o, mid, true, &fits, e))) goto out;
        if (fits) hi = mid;
        else lo = mid;
    }
    *min_budget = hi;
out:
    search_ctx_free(&c);
    return rc;
}

int vdp_min_budget_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        uint64_t *min_budget, vd_err *e) {
    return min_budget_auto(net, prof, opts, NULL, 0, min_budget, e);
}

int vdp_min_budget_auto_below(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                              uint64_t beat, uint64_t *min_budget, vd_err *e) {
    return min_budget_auto(net, prof, opts, NULL, beat, min_budget, e);
}

int vdp_min_budget_auto_from(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                             uint64_t dyn_min, uint64_t *min_budget, vd_err *e) {
    return min_budget_auto(net, prof, opts, &dyn_min, 0, min_budget, e);
}
