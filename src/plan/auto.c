/* auto.c — the auto policy ("ours"): per feature map keep / offload /
 * recompute, and per convolution and pass (forward, backward) the fastest or
 * the least-workspace algorithm (or, in refine, any option in between),
 * searched with the simulator for the fastest predicted plan that
 * fits the budget.
 *
 *  1. Start: everything kept, fastest algorithms (policy none). If that fits,
 *     it is the plan.
 *  2. Greedy, while the plan does not fit. The excess of a plan is the sum
 *     over steps of its pool top above the budget (byte-steps). Moves that
 *     can free memory at over-budget steps are proposed -- keep -> offload,
 *     keep / offload -> recompute, fastest -> least-workspace convolution
 *     option of one pass (the forward option also serves the recompute) --
 *     with an estimate of the excess they remove (bytes of the tensor at the
 *     over-budget steps where it would be absent, capped by each step's
 *     excess). The best few of each kind (recomputes and algorithms ranked by
 *     estimate / added forward time, offloads by estimate) are simulated: a
 *     full build at the budget (prefetch schedule, memory fitting,
 *     placement, three streams). The move with the most excess removed per
 *     second of predicted iteration time added is applied; the other
 *     simulated moves are then tried on top in that order and kept while
 *     they still remove at least half their share without costing much more
 *     than simulated alone (fewer rounds on big nets).
 *  3. Refine, once a plan fits: try each decision the other ways (offload,
 *     recompute, keep) and each pass's convolution option at every option
 *     faster for that pass or needing less workspace (slower alone, but the
 *     memory it frees can start a prefetch earlier), fastest first; keep
 *     what still fits and predicts a faster iteration. The dispositions go
 *     in layer order in a start's refine, dearest decision first elsewhere
 *     (refine_order, pass_cut: and in a start's too where the effort cap
 *     would cut its pass). Steps 2 and 3 run
 *     from several starts: every recomputable map recomputed (RC_START:
 *     ResNet-152 b256 at 16 GiB, 432 ms predicted after its refine against
 *     547 from everything kept); everything kept; and, while the work is
 *     within AUTO_WORK, everything kept with the copy bandwidths scaled
 *     (start_bw_scale, each result rebuilt with the true profile and
 *     refined); each start refines its own greedy's plan unless that is
 *     far behind the starts before it. The fastest goes on to the trades (swap_search: each
 *     offloaded map kept instead, the memory found by greedy rounds without
 *     offloads, refined; ResNet-50 b256 at 4 GiB 374 -> 312 ms; in a plan
 *     that does not stall, pairs instead: the map kept and a recomputed one
 *     offloaded, VGG-16 b256 at 12 GiB 367 -> 356 ms), then to
 *     the shifts (shift_search: each offloaded map kept and a kept map of
 *     about its size offloaded instead, in one move; ResNet-50 4 GiB 311.7
 *     -> 306.6 ms), then to the kicks (an iterated local search): AUTO_KICKS
 *     times, change AUTO_KICK_MOVES random decisions of the best plan
 *     (fixed seed: same inputs, same plan), refine only around the changed
 *     decisions (refine's focus: "don't look" bits), keep it if it fits and
 *     is faster (then the trades and the shifts again); then as many again
 *     where a kick that does not fit is first repaired by a few greedy
 *     rounds (and refined in full). A kick
 *     that predicts over AUTO_KICK_SLOWER slower is not refined. The kicks
 *     stop once the search's work passes a budget (work_limit:
 *     AUTO_WORK_BUDGET units of vdp_build_screened's deterministic cost,
 *     about 0.5 s on one core, for the kicks without repair, twice that for
 *     all; while the best plan stalls for more than a tenth of its
 *     iteration, more while the kicks still make it faster, up to ten
 *     times as much (extend_work); never a clock: the same inputs, the
 *     same plan), and refine
 *     and the kicks stop at vd_plan_lower_bound (nothing can beat a plan
 *     there). VGG-16 b256 at 12 GiB on its measured H200 profile: 393.3 ms
 *     predicted without the starts and the repair, 381.4 with them (no
 *     offload 360). Refine and the kicks skip, unbuilt, configurations the
 *     memo knows (an outcome, or a bound, per configuration) and those
 *     whose compute alone, or with the recomputes the build honours, is
 *     slower (compute_bound, compute_floor); refine builds the others with
 *     a screen (vdp_build_screened: each prefetch variant whose live bytes
 *     exceed the budget, or whose replay before its placement already
 *     predicts no faster an iteration than the plan refine holds, is dropped
 *     unplaced; 95% of ResNet-50 8 GiB's builds are). Over all of it, a
 *     total effort cap (AUTO_EFFORT_CAP, vdp_build_screened's *effort: the
 *     cost with the placements and the memory fitting counted by what they
 *     did; 1.0-1.5 s on one core, a count, never a clock): past it refine,
 *     the trades, the shifts
 *     and the kicks stop, no later start begins, and a later start's greedy
 *     stops (the first start's runs to its own limit, so that what fits
 *     does not depend on the cap; greedy's moves far over the budget are
 *     not placed: eval_unplaced) (issue 13: plan in 2 s; ResNet-152 b256
 *     at 14.5 GB took 15-20 s, its starts' refine and trades 9 s of it:
 *     518.9 ms predicted then, 506.4 now with refine_order; ResNet-50 at 4
 *     GiB 5 s: 290.6 ms then, 288.1 now). Planning times: the README's
 *     table, tools/plan-bench.
 *     A search that has spent under half its effort cap, with its plan over
 *     2% above the lower bound and an iteration of 10 ms or more (VGG-16,
 *     AlexNet), then asks a second opinion (second_opinion): the whole search on the profile
 *     with its pass times jittered by 1.5%, that plan's decisions rebuilt
 *     under the true profile and refined, kept when faster (VGG-16 b256 12
 *     GiB on session 9's call C profile: 369.9 -> 357.5 ms).
 *     When no start fits, the keep-all start runs once more with propose's
 *     last-resort moves (offload a recomputed map resident over the budget
 *     after its recompute step; VGG-16 b256 12 GiB on a profile 1.5% off a
 *     measured one: 640 ms, offload all, before; 356.5 ms).
 *  4. The paper's dyn (with caller-fixed algorithms: conv and all) is built
 *     too, and when nothing fits yet, "recompute everything recomputable,
 *     offload the rest, least workspace". The fastest plan that fits wins;
 *     the fastest fitting plan seen anywhere in the search counts too.
 *
 * Caller-given dispositions (opts->disp entries other than AUTO) and
 * algorithms (opts->algos, opts->fixed_algo) are never changed.
 * vdp_min_budget_auto binary-searches the budget with this same search (in
 * feasibility-only mode, which stops at the first fitting plan: a budget fits
 * in that mode exactly when the full search finds a fitting plan). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "plan/search.h"

enum { MV_DISP, MV_ALGO };
enum { K_OFFLOAD = 6, K_RECOMPUTE = 6, K_ALGO = 4 };   /* simulated per round */

typedef struct move {
    int kind, key, val;     /* MV_DISP: disp[key] = val; MV_ALGO: algos[key] = val
                               (key < L: forward option of layer key, else the
                               backward option of layer key - L) */
    double est;             /* estimated excess removed (byte-steps) */
    double rank;            /* ordering key among moves of one kind */
    double gain, dt, score; /* simulated: excess removed, seconds added, gain / dt */
    int batch;              /* evaluation batch */
} move;

typedef struct actx {
    vdp_search *s;          /* the search this context belongs to */
    const vd_net *net;
    const vd_profile *prof;
    vd_plan_opts o;         /* the caller's opts: policy auto, disp -> disp */
    int L;
    uint64_t B;
    bool algo_free;         /* the search may change algorithms */
    bool feas_only;
    bool answer_only;       /* VDP_ANSWER: whether a plan fits is all the caller keeps */
    vd_disp *disp;          /* [L + 1] current dispositions */
    int *algos;             /* [2L] current options: forward of layers 0..L-1, then backward */
    bool *fixed;            /* [L + 1] given by the caller */
    bool *can_rc;           /* [L + 1] the tensor's writers are stateless */
    double *rc_max;         /* [L + 1] the most a recompute of the tensor can take:
                               its writers' slowest forward options */
    bool rc_valid;          /* rc_on holds the recomputed layers of rc_disp */
    vd_disp *rc_disp;       /* [L + 1] */
    bool *rc_on;            /* [L] (vdp_recomputed_layers) */
    int *fast, *minws;      /* [2L] profile options per pass (same layout as algos) */
    double *ex;             /* [2L + 2] per-step excess of the plan being looked at */
    move *mv;               /* [4L + 4] proposals */
    void *ord;              /* [4L + 4] scratch of propose */
    bool found;             /* some plan evaluated so far fits */
    /* the fastest fitting configuration evaluated so far */
    bool have_seen;
    bool perturbed;         /* prof is a start's perturbed copy: note nothing */
    double seen_s;
    vd_disp *seen_disp;     /* [L + 1] */
    int *seen_algos;        /* [2L] */
    int evals;              /* plans built */
    int looks;              /* configurations evaluated: built or found in the memo */
    double work;            /* the search's work so far, in full builds times steps
                               (see eval_cost) */
    double effort;          /* the same, the placements counted as they went
                               (vdp_build_screened's *effort) */
    /* memo of evaluated configurations (see memo_find) */
    struct memo_ent *memo;
    size_t memo_cap, memo_n;
    int prof_id;            /* which start's profile c->prof is (part of the key) */
    double lb;              /* no plan at the budget predicts a faster iteration
                               (vd_plan_lower_bound; 0: unknown) */
    char phase[64];         /* what the search is doing (opts->progress) */
    bool no_offload_moves;  /* propose no keep -> offload moves (swap_search's repair) */
    double abandon_s;       /* greedy stops once its plan predicts slower (0: never) */
    double greedy_work;     /* greedy gives up past this much work (0: AUTO_GREEDY_WORK) */
    double pair_until;      /* swap_search tries pairs while c->work is below this (0: none) */
    bool last_resort;       /* no start fitted: propose's last resort moves too */
    bool *look, *look_next; /* [L + 1] refine's positions to try (see refine) */
    bool *focus;            /* [L + 1] the kicks' and the trades' changes (look_changes) */
    int *rorder;            /* [L + 1] refine's order of the disposition keys (refine_order) */
    struct gkey *gk;        /* [L + 1] scratch of refine_order */
} actx;

/* ---- helpers ------------------------------------------------------------ */

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
 * though the placement's top, first-fit's, need not move with it. Counting
 * the top alone, greedy stopped there with no move that helps: ResNet-50
 * b256 at 4 GiB on an H200 profile (session 7, call E) ended at the
 * fallback's 870.1 ms with live bytes of 3.97 GiB placed in 4.11; 494.7 ms
 * now. (The terms are whole bytes, exact in a double in any order.) */
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

/* Copy a configuration (dispositions [L + 1], options [2L]). */
static void config_copy(const actx *c, vd_disp *to_disp, int *to_algos, const vd_disp *disp,
                        const int *algos) {
    memcpy(to_disp, disp, (size_t)(c->L + 1) * sizeof *to_disp);
    memcpy(to_algos, algos, 2 * (size_t)c->L * sizeof *to_algos);
}

/* The dispositions a tensor can take, in the order refine tries them. */
static const vd_disp disp_alts[3] = {VD_DISP_KEEP, VD_DISP_OFFLOAD, VD_DISP_RECOMPUTE};

static void note_seen(actx *c, const vd_plan *p) {
    if (!p->feasible || c->perturbed) return;
    c->found = true;
    if (c->have_seen && p->sim.iter_s >= c->seen_s) return;
    config_copy(c, c->seen_disp, c->seen_algos, c->disp, c->algos);
    c->seen_s = p->sim.iter_s;
    c->have_seen = true;
}

/* ---- memo --------------------------------------------------------------
 * The search meets many configurations more than once (refine after a kick
 * tries undoing the kick's changes, the starts reach the same plans, refine's
 * passes retry what did not change). A build is a pure function of the
 * configuration (dispositions, options) and the profile, so its outcome is
 * kept: refine and the kicks skip a configuration known not to beat the
 * current plan without building it. The key is two independent 64-bit hashes
 * of the configuration and the profile's start index (a 128-bit key: for two
 * configurations to be confused both hashes must collide, about 2^-128 per
 * pair; the table holds at most a few hundred thousand entries). */
typedef struct memo_ent {
    uint64_t h1, h2;        /* h1 == 0: empty slot (hash_config never gives 0) */
    double iter_s;          /* exact: the plan's; else no plan of it that fits is faster */
    bool feasible;          /* exact: it fits; else true (not known) */
    bool exact;             /* a full build's outcome, not a screened one's bound */
} memo_ent;

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
static const memo_ent *memo_find(const actx *c) {
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

/* Report progress (opts->progress) for the current phase. */
static void progress(const actx *c) {
    if (!c->o.progress) return;
    double best = c->have_seen ? c->seen_s : 0.0;
    if (c->s->best_s > 0 && (best == 0 || c->s->best_s < best)) best = c->s->best_s;
    c->o.progress(c->o.progress_ctx, c->phase, c->s->evals + c->evals, best);
}

/* Enter a phase: name it and report. */
static void phase(actx *c, const char *fmt, int a, int b) {
    snprintf(c->phase, sizeof c->phase, fmt, a, b);
    progress(c);
}

/* Build the current configuration at the budget. 0 / VD_EBUDGET: *out valid. */
static int eval(actx *c, vd_plan *out, vd_err *e) {
    c->evals++;
    c->looks++;
    if (c->evals % 16 == 0) progress(c);
    bool exact = false;
    double lb_s = 0, cost = 0;
    double effort = 0;
    int rc = vdp_build_screened(c->net, c->prof, &c->o, VD_POLICY_AUTO, c->algos, 0.0, out, &exact,
                                &lb_s, &cost, &effort, e);
    c->work += cost;
    c->effort += effort;
    if (rc == VD_OK || rc == VD_EBUDGET) {
        note_seen(c, out);
        memo_put(c, out->feasible, out->sim.iter_s, true);
    }
    return rc;
}

/* eval for greedy's moves: a plan whose live bytes exceed the budget by over
 * 30% is not placed (vdp_build_unplaced_over; *unplaced then): greedy reads
 * of it the live bytes, the replay and the top, which is then its live
 * peak (excess: the placement's fragmentation above that is left out;
 * nearer the budget, where it decides what fits, plans are placed as
 * before). The placements were most of greedy's time where its moves are
 * far from fitting: ResNet-152 b256 at 8 GiB, whose first start's greedy
 * spent nine tenths of the effort cap, 751.8 ms predicted before, 686.5
 * now; at 4.0 and 5 GiB the search now fits (1139.5, 1080.0 ms against the
 * fallbacks' 1678.0, 1550.0). The same outcome as eval's (fits, iteration),
 * so the memo keeps it; greedy's last plan is placed (eval) for its
 * callers. (The moves not placed at all over the budget: that changed the
 * first start's plan of ResNet-152 at 14.5 GB, which then refined to 540
 * ms instead of 506.) */
static int eval_unplaced(actx *c, vd_plan *out, bool *unplaced, vd_err *e) {
    c->evals++;
    c->looks++;
    if (c->evals % 16 == 0) progress(c);
    double cost = 0, effort = 0;
    int rc = vdp_build_unplaced_over(c->net, c->prof, &c->o, VD_POLICY_AUTO, c->algos, out, unplaced,
                                     &cost, &effort, e);
    c->work += cost;
    c->effort += effort;
    if (rc == VD_OK || rc == VD_EBUDGET) {
        note_seen(c, out);
        memo_put(c, out->feasible, out->sim.iter_s, true);
    }
    return rc;
}

/* eval for a search that keeps the configuration only when it fits and
 * predicts an iteration faster than limit_s (vdp_build_screened: variants
 * that cannot are dropped before their placement). VD_OK / VD_EBUDGET: *out
 * valid; VDP_SCREENED: no plan (none faster than limit_s). */
static int eval_screened(actx *c, double limit_s, vd_plan *out, vd_err *e) {
    c->evals++;
    c->looks++;
    if (c->evals % 16 == 0) progress(c);
    bool exact = false;
    double lb_s = 0, cost = 0;
    double effort = 0;
    int rc = vdp_build_screened(c->net, c->prof, &c->o, VD_POLICY_AUTO, c->algos, limit_s, out,
                                &exact, &lb_s, &cost, &effort, e);
    c->work += cost;
    c->effort += effort;
    if (rc == VDP_SCREENED) {
        /* no bound at all: no variant's live bytes fit, so it does not fit */
        if (isinf(lb_s)) memo_put(c, false, lb_s, true);
        else memo_put(c, true, lb_s, false);
        return rc;
    }
    if (rc == VD_OK || rc == VD_EBUDGET) {
        if (exact) {
            note_seen(c, out);
            memo_put(c, out->feasible, out->sim.iter_s, true);
        } else {
            memo_put(c, true, lb_s, false);
        }
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
 * configurations they would drop this way (the same plans at every default
 * point of tools/plan-bench and ResNet-152 at 16 / 32 GiB; the kicks' work
 * budget then covers more kicks). */
static int eval_or_repairable(actx *c, double limit_s, vd_plan *out, vd_err *e) {
    int rc = eval_screened(c, limit_s, out, e);
    if (rc == VDP_SCREENED) {
        const memo_ent *m = memo_find(c);
        return m && m->exact && !m->feasible ? eval(c, out, e) : VDP_SCREENED;
    }
    if (rc == VD_EBUDGET) {   /* behind a screen its placement may have stopped */
        vdp_plan_release(out);
        rc = eval(c, out, e);
    }
    return rc;
}

/* A lower bound on the predicted iteration of the current configuration:
 * the compute stream runs every step's op one after another (vdp_simulate:
 * the iteration ends after the compute stream's last op), so the forward
 * and backward times of the options chosen plus the SGD step; the adds'
 * backward left out (scale_add_steps scales it down, to 0 when every input
 * shares its tensor), recomputes and stalls left out (they only add). In
 * refine a plan that is compute-bound (no stalls) then skips, unbuilt, every
 * slower option. The factor (1 - 1e-12) against it covers the sum's rounding
 * in another order than the simulator's. 0 for forward-only plans. */
static double compute_bound(const actx *c) {
    if (c->o.forward_only) return 0.0;
    double t = c->prof->sgd_s;
    for (int i = 0; i < c->L; i++) {
        const vd_profile_layer *pl = &c->prof->layers[i];
        t += pl->algos[c->algos[i]].fwd_s;
        if (c->net->layers[i].op != VD_OP_ADD) t += pl->algos[c->algos[c->L + i]].bwd_s;
    }
    return t;
}

/* An upper bound on compute_floor, cheap: compute_bound plus the slowest
 * recompute of every tensor asked to be recomputed (0 when none is). */
static double floor_upper(const actx *c) {
    double rc = 0;
    for (int k = 0; k <= c->L; k++)
        if (c->disp[k] == VD_DISP_RECOMPUTE) rc += c->rc_max[k];
    return rc == 0 ? 0.0 : compute_bound(c) + rc;
}

/* A lower bound on the predicted iteration of the current configuration,
 * tighter than compute_bound: that plus the recomputes the build honours
 * (vdp_recomputed_layers: they run on the compute stream too). The set
 * depends on the dispositions only, so it is kept for the last ones asked
 * (refine's option moves share them). */
static int compute_floor(actx *c, double *floor_s, vd_err *e) {
    size_t nd = (size_t)(c->L + 1) * sizeof *c->disp;
    if (!c->rc_valid || memcmp(c->rc_disp, c->disp, nd)) {
        c->rc_valid = false;
        int rc = vdp_recomputed_layers(c->net, c->prof, &c->o, c->algos, c->rc_on, e);
        if (rc) return rc;
        memcpy(c->rc_disp, c->disp, nd);
        c->rc_valid = true;
    }
    double t = compute_bound(c);
    for (int j = 0; j < c->L; j++)
        if (c->rc_on[j]) t += c->prof->layers[j].algos[c->algos[j]].fwd_s;
    *floor_s = t;
    return VD_OK;
}

/* Does the current configuration fit and predict an iteration faster than
 * limit_s (by more than a relative 1e-9)? Known configurations are answered
 * from the memo; otherwise (or when it does beat it) it is built. *better:
 * the answer; when true, *out holds its plan. */
static int eval_beats(actx *c, double limit_s, vd_plan *out, bool *better, vd_err *e) {
    *better = false;
    /* nothing can beat limit_s: no plan is faster than the bound */
    if (c->lb > 0 && limit_s * (1.0 - 1e-9) <= c->lb) { c->looks++; return VD_OK; }
    const memo_ent *m = memo_find(c);
    if (m && !(m->feasible && m->iter_s < limit_s * (1.0 - 1e-9))) { c->looks++; return VD_OK; }
    bool known = m && m->exact;
    /* not built either when even its compute alone cannot beat limit_s */
    if (!known && compute_bound(c) * (1.0 - 1e-12) >= limit_s * (1.0 - 1e-9)) { c->looks++; return VD_OK; }
    /* nor when its compute with the recomputes it gets cannot (worked out
     * only where it might: floor_upper reaches limit_s) */
    if (!known && !c->o.forward_only && floor_upper(c) * (1.0 + 1e-12) >= limit_s * (1.0 - 1e-9)) {
        double floor_s = 0;
        int rc = compute_floor(c, &floor_s, e);
        if (rc) return rc;
        if (floor_s * (1.0 - 1e-12) >= limit_s * (1.0 - 1e-9)) { c->looks++; return VD_OK; }
    }
    int rc = eval_screened(c, limit_s * (1.0 - 1e-9), out, e);
    if (rc == VDP_SCREENED) return VD_OK;
    if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    if (out->feasible && out->sim.iter_s < limit_s * (1.0 - 1e-9)) *better = true;
    else vdp_plan_release(out);
    return VD_OK;
}

static bool done(const actx *c) { return c->feas_only && c->found; }

/* The whole search's effort is spent (AUTO_EFFORT_CAP): refine, the trades,
 * the shifts, the kicks and the later starts stop; the plan so far stands. */
static bool spent(const actx *c) {
    return c->effort > vdp_search_cap(c->s) || vdp_stopped(&c->o);
}

/* No configuration can beat plan P (eval_beats' margin): it is at the lower
 * bound. Refine and the kicks stop there; they would build configurations
 * none of which could be kept. */
static bool at_bound(const actx *c, const vd_plan *P) {
    return c->lb > 0 && P->sim.iter_s * (1.0 - 1e-9) <= c->lb;
}

/* Tensor of disposition key k (0: x, i + 1: output of layer i) in p, or -1. */
static int tensor_of(const actx *c, const vd_plan *p, int k) {
    if (k == 0) return p->t_x;
    int i = k - 1;
    if (i >= c->L - 1 || p->layers[i].inplace) return -1;
    int t = p->layers[i].y;
    return p->tensors[t].layer == i ? t : -1;
}

/* Set c's configuration to plan p's decisions: each free disposition key
 * as p keeps, offloads or recomputes its tensor, and (where the search
 * chooses them) p's per-pass options. */
static void config_from_plan(actx *c, const vd_plan *p) {
    for (int k = 0; k <= c->L; k++) {
        int t = c->fixed[k] ? -1 : tensor_of(c, p, k);
        if (t < 0) continue;
        const vd_tensor *T = &p->tensors[t];
        c->disp[k] = T->offload ? VD_DISP_OFFLOAD : T->recompute ? VD_DISP_RECOMPUTE : VD_DISP_KEEP;
    }
    for (int j = 0; c->algo_free && j < c->L; j++) {
        c->algos[j] = p->layers[j].algo_fwd;
        c->algos[c->L + j] = p->layers[j].algo_bwd;
    }
}

/* Time of option a in the pass of algos key k (k < L forward, else backward). */
static double algo_time(const actx *c, int k, int a) {
    const vd_profile_algo *x = &c->prof->layers[k % c->L].algos[a];
    return k < c->L ? x->fwd_s : x->bwd_s;
}

/* Workspace of option a in the pass of algos key k. */
static uint64_t algo_ws(const actx *c, int k, int a) {
    return vd_profile_algo_ws(&c->prof->layers[k % c->L].algos[a], k >= c->L);
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

typedef struct ordered { move m; int batch, idx; } ordered;

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
 * (batches of the best K of each kind); *n_batches receives the number of
 * batches. Returns how many moves. */
static int propose(actx *c, const vd_plan *p, int *n_batches) {
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
             * recompute start, ResNet-152 b256 at 14.5 GB rebuilt all of
             * layer3's residual trunk (72 maps) at one backward step, 1.4
             * GiB over the budget, and greedy had no move left (it only
             * offloaded kept maps). With these moves that start fits there
             * (518.9 ms predicted against 543.1 from the other start), and
             * ResNet-50 plans 368.0 ms at 3.59 GB instead of its fallback's
             * 811.7. */
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
            for (int j = k - 1; j < c->L; j++)
                if (p->layers[j].y == t) cost += c->prof->layers[j].algos[c->algos[j]].fwd_s;
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
        int st[2] = {j, p->layers[j].rc_step};
        if (k >= c->L) { st[0] = 2 * c->L - 1 - j; st[1] = -1; }
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
    /* No move at all, in the search's last resort (no start fitted): a
     * recomputed map can stay resident past its recompute step (a chain's
     * map, kept for a later reader) at steps over the budget where the moves
     * above do not look. VGG-16 b256 at 12 GiB on its s9 call C profile with
     * the pass times 1.5% off (docs/results/h200-2026-12-03-s9, seed 100):
     * features.0:y recomputed at bwd features.4 with features.2:y, resident
     * until bwd features.2, the budget exceeded at bwd features.3 between;
     * greedy had no move from any start and the search fell back on offload
     * all, 640 ms against 368 with these. Only there, so every search that
     * fitted before plans as before. */
    bool none = n == 0 && c->last_resort;
    for (int k = 0; none && k <= c->L; k++) {
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

/* ---- phases ------------------------------------------------------------- */

static const double AUTO_GREEDY_WORK = 3.0 * AUTO_WORK_BUDGET;

/* Greedy until *P fits (or no move helps, or its work passes
 * AUTO_GREEDY_WORK, or c->greedy_work when set). *P is the plan of the current
 * configuration and stays so. */
static int greedy(actx *c, vd_plan *P, int max_rounds, vd_err *e) {
    double w0 = c->work;
    bool unplaced = false;   /* *P was not placed (eval_unplaced) */
    for (int round = 0; round < max_rounds && !P->feasible && !done(c); round++) {
        /* a start's greedy that has not made the plan fit within
         * AUTO_GREEDY_WORK gives up (the fallbacks or another start fit) */
        if (c->work - w0 > (c->greedy_work > 0 ? c->greedy_work : AUTO_GREEDY_WORK)) break;
        /* past the effort cap once some plan fits (ResNet-152 b256 at 14
         * GiB on its measured profile: the keep-all start's greedy took the
         * search from 1.3 to 2.1 s), or in a later start while none does
         * (greedy_work set: ResNet-152 at 6 GiB, where only the fallbacks
         * fit, 1.8 s); the first start's greedy runs to its own limit */
        if (spent(c) && (c->found || c->greedy_work > 0)) break;
        /* a start already too far behind (one_start: it is not refined) */
        if (c->abandon_s > 0 && P->sim.iter_s > c->abandon_s) break;
        double ex0 = excess(P, c->B);
        double eps = 1e-4 * (P->sim.iter_s > 0 ? P->sim.iter_s : 1e-3);
        int nb = 0;
        int n = propose(c, P, &nb);
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
            int rc = eval_unplaced(c, &Q, &qu, &te);
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
        if (best < 0) break;
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
            int rc = eval_unplaced(c, &Q, &qu, &te);
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
        int rc = eval(c, P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    }
    return VD_OK;
}

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

typedef struct gkey { double g; int k; } gkey;

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
                if (j >= 0 && P->layers[j].y == t) v += c->prof->layers[j].algos[c->algos[j]].fwd_s;
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
 * (Don't-look passes after a full first pass too, tried: ResNet-50 b256 at
 * 8 GiB 165.3 ms instead of 158.4.) */
static int refine(actx *c, vd_plan *P, const bool *focus, bool by_cost, vd_err *e) {
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
                int rc = eval_beats(c, P->sim.iter_s, &Q, &better, &te);
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
             * prefetch start earlier and remove a stall that costs more);
             * the first that fits and predicts a faster iteration is kept */
            int cur = c->algos[k], n = 0, idx[VD_PROFILE_MAX_ALGOS];
            const vd_profile_layer *pl = &c->prof->layers[k % c->L];
            for (int a = 0; a < pl->n_algos; a++)
                if (a != cur && (algo_time(c, k, a) < algo_time(c, k, cur) ||
                                 algo_ws(c, k, a) < algo_ws(c, k, cur)))
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
                int rc = eval_beats(c, P->sim.iter_s, &Q, &better, &te);
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

/* Trades: for each tensor offloaded, keep it instead; when the plan then
 * does not fit, repair it by AUTO_SWAP_REPAIR greedy rounds without offload
 * moves (recomputes, leaner options elsewhere; the tensor itself stays
 * kept); keep the result, refined, when it fits and predicts a faster
 * iteration. Refine alone cannot trade one map's copies for another's
 * recompute (keeping the map alone breaks the budget, recomputing the other
 * alone only adds time), and greedy offloads the biggest maps first, while
 * the copies still look free: ResNet-50 b256 at 4 GiB, 374.1 ms after the
 * starts' refine, 311.7 after one pass of trades (a third of the starts'
 * builds).
 *
 * A plan that does not stall runs its compute stream back to back: such a
 * trade can only add to it (the repair recomputes or takes leaner options,
 * the kept map only takes memory). There the trade is a pair instead: keep
 * the offloaded map and offload a recomputed one (its recompute leaves the
 * compute stream), repaired by greedy rounds that may offload too, refined.
 * VGG-16 b256 at 12 GiB on its H200 fp32 profile: two basins, 367 ms
 * (features.2:y offloaded, features.5-6 recomputed, 13 ms) and 356 ms
 * (features.2:y kept, features.5:y offloaded); the kicks' four random
 * changes leave the first on a fifth of the profiles measured or perturbed
 * by 1.5-3% (0.917x of no offload on the H200 once), a pair reaches the
 * second in one step. Each pair is screened (eval_or_repairable: one whose
 * unplaced replay cannot beat the plan is not placed) and the pairs stop at
 * the first kept; at most AUTO_PAIRS per offloaded map, the recomputed maps
 * nearest it first. Only the trades before the kicks try pairs, and only
 * until the search's work has grown by AUTO_PAIR_WORK there (each pair that
 * fits costs a refine: ResNet-152 b256 at 32 GiB planned in 8.6 s with
 * every pair, 1.1 s so; VGG-16's pairs take a tenth of a budget). */
enum { AUTO_SWAP_REPAIR = 3, AUTO_PAIRS = 4 };
static const double AUTO_NO_STALL = 1e-4;   /* stalls below this share: none */
static const double AUTO_PAIR_SLOWER = 0.3; /* a pair this much slower is not refined */
static const double AUTO_PAIR_WORK = 0.2 * AUTO_WORK_BUDGET;

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
            int qrc = eval_or_repairable(c, P->sim.iter_s * (1.0 - 1e-9), &Q, &te);
            if (qrc == VDP_SCREENED) continue;
            if (qrc != VD_OK && qrc != VD_EBUDGET) { *e = te; rc = qrc; break; }
            c->fixed[k] = c->fixed[u] = true;
            if (!Q.feasible) rc = greedy(c, &Q, AUTO_SWAP_REPAIR, e);
            if (!rc && Q.feasible && Q.sim.iter_s < P->sim.iter_s * (1.0 + AUTO_PAIR_SLOWER))
                rc = refine(c, &Q, NULL, true, e);
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

static int swap_search(actx *c, vd_plan *P, vd_err *e) {
    int L = c->L, rc = VD_OK;
    vd_disp *bd = vd_malloc((size_t)(L + 1) * sizeof *bd, NULL);
    int *ba = vd_malloc(2 * (size_t)L * sizeof *ba, NULL);
    if (!bd || !ba) { vd_free(bd); vd_free(ba); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    for (int k = 0; k <= L && rc == VD_OK && !at_bound(c, P) && !done(c) && !spent(c); k++) {
        if (c->fixed[k] || c->disp[k] != VD_DISP_OFFLOAD) continue;
        phase(c, "trades, layer %d of %d", k + 1, L + 1);
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
        int qrc = eval_or_repairable(c, P->sim.iter_s * (1.0 - 1e-9), &Q, &te);
        if (qrc == VDP_SCREENED) { config_copy(c, c->disp, c->algos, bd, ba); continue; }
        if (qrc != VD_OK && qrc != VD_EBUDGET) { *e = te; rc = qrc; break; }
        if (!Q.feasible) {
            c->no_offload_moves = true;
            c->fixed[k] = true;
            rc = greedy(c, &Q, AUTO_SWAP_REPAIR, e);
            c->fixed[k] = false;
            c->no_offload_moves = false;
            if (rc) { vdp_plan_release(&Q); break; }
        }
        bool keep = Q.feasible && Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9);
        /* refined with the map kept (refine would else undo the trade) */
        c->fixed[k] = true;
        if (keep) rc = refine(c, &Q, NULL, true, e);
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
 * copies). "About its size": 0.75 to 1.5 times its bytes (the memory it
 * frees should cover the kept map's). The first shift of each offloaded map
 * that fits and predicts a faster iteration is kept; one pass. The trades
 * trade copies for recomputes, these copies of one map for another's: the
 * ResNet-50 b256 plan at 4 GiB of the uncapped search (290.6 ms) offloaded
 * the adds of layer3.3-3.5 where a 310 ms one offloaded those of 3.0-3.2.
 * Shifts after the trades: ResNet-50 at 8 GiB 158.150 ms, 3.34 GB 404.8
 * (158.361, 412.071 before), and at 4 GiB 306.6 ms where the trades left
 * 311.7. */
static int shift_search(actx *c, vd_plan *P, vd_err *e) {
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
            if (sb < 0.75 * sa || sb > 1.5 * sa) continue;
            c->disp[a] = VD_DISP_KEEP;
            c->disp[b] = VD_DISP_OFFLOAD;
            vd_plan Q;
            vd_err te = {0};
            bool better;
            int rc = eval_beats(c, P->sim.iter_s, &Q, &better, &te);
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
 * before a full refine. That reaches plans that differ in several decisions at once
 * (VGG-16 b256 at 12 GiB on the measured profile: keeping the 3 GiB
 * features.2:y instead of offloading it pays off only with other maps
 * offloaded or recomputed instead, 393 -> 384 ms predicted), but every kick
 * then costs a refine. So both stop, whatever round they are at, once the
 * search's work (c->work: what vdp_build_screened counts, a pure function of
 * the configurations built) passes work_limit: the same inputs, the same
 * plan, on any machine; and all of the search stops at AUTO_EFFORT_CAP.
 * VGG-16 b256 runs all its kicks within the budget; ResNet-50 at 8 GiB and
 * GoogLeNet at 4 GiB a few (under 1 s on one core here), ResNet-50 at 4 GiB
 * (a stalling plan) until the effort cap (1.5 s; 5 s without it, 290.6 ms
 * predicted then, 288.1 now); ResNet-152 at 16 GiB none (its starts spend
 * the budget). */
enum { AUTO_KICKS = 60, AUTO_KICK_MOVES = 4, AUTO_KICK_REPAIR = 2 };
static const double AUTO_KICK_SLOWER = 0.3;
static const double AUTO_WORK = AUTO_WORK_BUDGET, AUTO_STALL_SHARE = 0.1, AUTO_STALL_WORK = 10.0,
                    AUTO_EXTEND_GAIN = 0.002;
enum { AUTO_EXTEND_PATIENCE = 3, AUTO_CHAINS = 3 };

/* The work after which no more kicks start: the budget for the kicks
 * without repair, twice it for those with (they go on from the plan the
 * others reached). The budget was 5 times as large before the trades and
 * the recompute start (ResNet-50 8 GiB: 162.672 ms then with 29,136 plans
 * built, 158.361 now with 3,498). */
static double work_limit(bool repair) { return repair ? 2.0 * AUTO_WORK : AUTO_WORK; }

/* A plan that stalls for more than AUTO_STALL_SHARE of its iteration: the
 * kicks still find much there (ResNet-50 b256 at 4 GiB, 312 ms predicted
 * after the trades, stalls 35%; 305-311 ms at the budget with 4 different
 * kick seeds, 289-292 at ten times it), but not everywhere (GoogLeNet b256
 * at its smallest budget, 2.4 GiB: 164.533 ms at the budget and at ten
 * times it). So past its budget (and at least one stretch of AUTO_WORK
 * into the kicks) such a search goes on by another AUTO_WORK while one of
 * the last AUTO_EXTEND_PATIENCE stretches made P faster by at least
 * AUTO_EXTEND_GAIN (the last one, when these kicks have not made P faster
 * at all: start_s), up to AUTO_STALL_WORK times the budget (ResNet-50
 * 4 GiB 290.564 ms, as at ten times the budget; GoogLeNet's smallest
 * budget in 3 s instead of 10; patience 2: ResNet-50 4 GiB 295.4 ms).
 * *limit, *mark_s, *idle: the work limit, P's time when it was last
 * extended, the stretches in a row that gained too little. */
static bool stalls(const vd_plan *P) { return P->sim.stall_s > AUTO_STALL_SHARE * P->sim.iter_s; }

static bool extend_work(const vd_plan *P, bool repair, double base, double *limit, double *mark_s,
                        int *idle, double start_s) {
    if (!stalls(P)) return false;
    if (*limit + AUTO_WORK > base + AUTO_STALL_WORK * work_limit(repair)) return false;
    /* no gain at all since these kicks began: no patience */
    int patience = P->sim.iter_s < start_s * (1.0 - 1e-9) ? AUTO_EXTEND_PATIENCE : 1;
    if (P->sim.iter_s < *mark_s * (1.0 - AUTO_EXTEND_GAIN)) *idle = 0;
    else if (++*idle >= patience) return false;
    *limit += AUTO_WORK;
    *mark_s = P->sim.iter_s;
    return true;
}

static int kick_search(actx *c, vd_plan *P, bool repair, int chain, double base, vd_err *e) {
    int L = c->L, rc = VD_OK;
    vd_disp *bd = vd_malloc((size_t)(L + 1) * sizeof *bd, NULL);
    int *ba = vd_malloc(2 * (size_t)L * sizeof *ba, NULL);
    if (!bd || !ba) { vd_free(bd); vd_free(ba); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    vd_rng r;
    vd_rng_seed(&r, (repair ? 0x7e9a1u : 0x5eedu) + 0x9e37u * (uint64_t)chain, (uint64_t)L);
    double limit = base + work_limit(repair), mark_s = P->sim.iter_s, start_s = P->sim.iter_s;
    int idle = 0;   /* stretches in a row that gained too little */
    /* a stalling plan gets at least one stretch of kicks */
    if (stalls(P) && c->work + AUTO_WORK > limit) limit = c->work + AUTO_WORK;
    for (int round = 0; round < AUTO_KICKS && rc == VD_OK; round++) {
        phase(c, repair ? "kicks with repair, %d of %d" : "kicks, %d of %d", round + 1, AUTO_KICKS);
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
        const memo_ent *known = changed && !repair ? memo_find(c) : NULL;
        if (known && !known->feasible) { changed = 0; c->looks++; }
        /* a kick over AUTO_KICK_SLOWER slower is dropped (below): one that
         * cannot beat that is not placed */
        double slower = P->sim.iter_s * (1.0 + AUTO_KICK_SLOWER);
        int qrc = !changed ? VD_EBUDGET
                : repair ? eval_or_repairable(c, slower, &Q, &te) : eval_screened(c, slower, &Q, &te);
        if (changed && qrc == VDP_SCREENED) { changed = 0; qrc = VD_EBUDGET; }
        if (changed && qrc != VD_OK && qrc != VD_EBUDGET) { *e = te; rc = qrc; break; }
        bool keep = false;
        if (repair && changed && !Q.feasible && (rc = greedy(c, &Q, AUTO_KICK_REPAIR, e))) {
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
             * kick's) in full (focused there too: GoogLeNet b256 at 4 GiB
             * 61.471 ms instead of 60.111; the other plan-bench points the
             * same or within 0.6%) */
            look_changes(c, c->focus, bd, ba);
            if ((rc = refine(c, &Q, repair ? NULL : c->focus, true, e))) { vdp_plan_release(&Q); break; }
            keep = Q.sim.iter_s < P->sim.iter_s * (1.0 - 1e-9);
        }
        if (keep) {
            vdp_plan_release(P);
            *P = Q;
            if ((rc = swap_search(c, P, e))) break;
            if ((rc = shift_search(c, P, e))) break;
        } else {
            if (changed) vdp_plan_release(&Q);
            config_copy(c, c->disp, c->algos, bd, ba);
        }
    }
    vd_free(bd);
    vd_free(ba);
    return rc;
}

/* ---- entry points ------------------------------------------------------- */

/* Release c; its plans built and its fastest fitting plan go to its
 * search's progress (a second opinion's fastest does not: it was planned on
 * another profile). */
static void ctx_free(actx *c) {
    vdp_search *s = c->s;
    s->evals += c->evals;
    if (s->jitter_depth == 0 && c->have_seen && (s->best_s == 0 || c->seen_s < s->best_s))
        s->best_s = c->seen_s;
    vd_free(c->disp); vd_free(c->algos); vd_free(c->fixed); vd_free(c->can_rc); vd_free(c->rc_max); vd_free(c->rc_disp); vd_free(c->rc_on); vd_free(c->fast);
    vd_free(c->minws); vd_free(c->ex); vd_free(c->mv); vd_free(c->ord); vd_free(c->seen_disp); vd_free(c->seen_algos);
    vd_free(c->memo); vd_free(c->look); vd_free(c->look_next); vd_free(c->focus); vd_free(c->rorder); vd_free(c->gk);
}

static int ctx_init(actx *c, vdp_search *s, const vd_net *net, const vd_profile *prof,
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
    c->ex = vd_calloc(2 * n1 + 1, sizeof *c->ex, NULL);
    c->mv = vd_calloc(4 * n1, sizeof *c->mv, NULL);
    c->ord = vd_calloc(4 * n1, sizeof(ordered), NULL);
    if (!c->disp || !c->look || !c->look_next || !c->focus || !c->rorder || !c->gk || !c->seen_disp || !c->fixed || !c->can_rc || !c->rc_max || !c->rc_disp || !c->rc_on || !c->algos || !c->seen_algos ||
        !c->fast || !c->minws || !c->ex || !c->mv || !c->ord) {
        ctx_free(c);
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
    if (!ip) { ctx_free(c); return vd_errf(e, VD_ENOMEM, "out of memory"); }
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
        double slowest = 0;   /* layer j's slowest forward option */
        for (int a = 0; a < prof->layers[j].n_algos; a++)
            if (prof->layers[j].algos[a].fwd_s > slowest) slowest = prof->layers[j].algos[a].fwd_s;
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

/* Keep the better of *best (rc_best) and a candidate (rc): fitting beats not
 * fitting, then faster, then (neither fits) a lower pool top. */
static void take_better(vd_plan *best, int *rc_best, vd_plan *cand, int rc) {
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
static int paper_candidates(actx *c, const vd_plan_opts *opts, vd_plan *best, int *rc_best,
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
        take_better(best, rc_best, &D, rc);
    }
    return VD_OK;
}

/* "Recompute everything recomputable, offload the rest, least workspace"
 * (caller-fixed entries and algorithms kept). */
static void extreme_config(actx *c) {
    for (int k = 0; k <= c->L; k++)
        if (!c->fixed[k]) c->disp[k] = c->can_rc[k] ? VD_DISP_RECOMPUTE : VD_DISP_OFFLOAD;
    for (int k = 0; c->algo_free && k < 2 * c->L; k++) c->algos[k] = c->minws[k];
}

/* Feasibility only: the paper candidates, then the extreme configuration.
 * VD_OK: one fits, *out its plan; VD_EBUDGET: neither does (the current
 * configuration is left as it was). */
static int feasible_fallback(actx *c, const vd_plan_opts *opts, vd_plan *out, vd_err *e) {
    vd_plan best;
    memset(&best, 0, sizeof best);
    int rc_best = -1;
    int rc = paper_candidates(c, opts, &best, &rc_best, e);
    if (rc) { if (rc_best >= 0) vdp_plan_release(&best); return rc; }
    if (rc_best == VD_OK) { best.policy = VD_POLICY_AUTO; *out = best; return VD_OK; }
    if (rc_best >= 0) vdp_plan_release(&best);
    vd_disp *d = vd_malloc((size_t)(c->L + 1) * sizeof *d, NULL);
    int *a = vd_malloc(2 * (size_t)c->L * sizeof *a + 1, NULL);
    if (!d || !a) { vd_free(d); vd_free(a); return vd_errf(e, VD_ENOMEM, "out of memory"); }
    config_copy(c, d, a, c->disp, c->algos);
    extreme_config(c);
    vd_plan X;
    rc = eval(c, &X, e);
    config_copy(c, c->disp, c->algos, d, a);
    vd_free(d);
    vd_free(a);
    if (rc == VD_OK) { X.policy = VD_POLICY_AUTO; *out = X; return VD_OK; }
    if (rc == VD_EBUDGET) { vdp_plan_release(&X); }
    return rc;
}

/* Starts of the search beyond the first: greedy decides from the predicted
 * times, and a small change in them (the copy bandwidths) can send it to a
 * different fitting configuration whose refined plan is much faster (VGG-16
 * b256 at 12 GiB: 393 against 374 ms predicted, from two profiles whose H2D
 * bandwidths differ by 3%). So greedy also runs with the copy bandwidths
 * scaled by each factor here; each configuration it reaches is rebuilt with
 * the true profile and refined, and the fastest refined plan goes on to the
 * kick search. */
static const double start_bw_scale[][2] = {   /* {D2H, H2D} factors */
    {0.8, 0.8}, {1.25, 1.25}, {1.0, 1.04}, {1.04, 1.0}};
/* Start 0 (RC_START): every recomputable map recomputed, the rest kept.
 * Start 1: everything kept. Starts 2..: start 1 with the copy bandwidths
 * scaled (start_bw_scale), run only while the search's work is within
 * AUTO_WORK (on big nets one start's greedy and refine can spend more). A
 * start whose greedy plan is over AUTO_START_BEHIND times as slow as the
 * fastest refined start before it is not refined, and its greedy stops
 * once it gets there (ResNet-152 b256 at 16 GiB: start 1's greedy plan
 * 1072 ms against start 0's 432: 3.7 s of planning instead of 7.1, the
 * same plan).
 * Each start refines its own greedy's result (the fastest fitting plan seen
 * only when that does not fit): the starts end in different places (VGG-16
 * b256 at 12 GiB on the profile of tests/plan/data/vgg16-b256-h200-fp32-s5.json,
 * 362.5 ms against 373.5 when every start went on from the fastest plan
 * seen so far). */
enum { RC_START = 0, N_STARTS = 2 + (int)(sizeof start_bw_scale / sizeof start_bw_scale[0]) };
static const double AUTO_START_BEHIND = 2.0;

/* Would the effort cap cut a start's refine short? Its first pass tries
 * about 3L configurations (each disposition two ways, each pass's
 * options); counted at the search's effort per build so far. Then it tries
 * the dearest decisions first (refine_order): ResNet-152 b256 at 14.5 GB,
 * whose start's refine the cap stops, 502.6 ms instead of 541.7 (at 16 GiB,
 * also cut, 433.7 against 430.8; both with the cap at 7.5e7 and scanned
 * entries at a quarter of a visit, see PLACE_EFFORT). A refine the cap does not cut goes in
 * layer order: by cost, it ended elsewhere, slower (ResNet-50 at 8 GiB
 * 167.8 ms against 158.1). Every other refine goes by cost (the trades',
 * the kicks'): ResNet-50 at 4 GiB 288.1 ms against 296.5, at 8.2 GB 167.9
 * against 169.9, GoogLeNet at 4 GiB 59.6 against 60.1. */
static bool pass_cut(const actx *c) {
    if (c->evals == 0) return false;
    double per_build = c->effort / c->evals;
    return c->effort + 3.0 * c->L * per_build > AUTO_EFFORT_CAP;
}

/* Greedy from the start configuration with profile prof (c->prof restored
 * after), then, if that configuration fits under the true profile (else the
 * fastest fitting one seen), refine.
 * *P: the plan of the configuration reached, under the true profile. */
static int one_start(actx *c, int start, const vd_profile *prof, const vd_disp *disp0,
                     const int *algos0, double best_s, vd_plan *P, vd_err *e) {
    const vd_profile *true_prof = c->prof;
    config_copy(c, c->disp, c->algos, disp0, algos0);   /* the start configuration */
    bool rc_start = start == RC_START;
    if (rc_start)
        for (int k = 0; k <= c->L; k++)
            if (!c->fixed[k] && c->can_rc[k]) c->disp[k] = VD_DISP_RECOMPUTE;
    phase(c, "greedy, start %d of %d", start + 1, N_STARTS);
    c->prof = prof;
    c->perturbed = prof != true_prof;
    c->prof_id = prof != true_prof ? start : 0;
    int rc = eval(c, P, e);
    if (rc == VD_OK || rc == VD_EBUDGET) {
        c->abandon_s = AUTO_START_BEHIND * best_s;   /* 0 for the first start */
        /* a later start when none before it has fitted gets one budget:
         * where only the fallbacks fit (ResNet-152 b256 at its smallest
         * budget, 4.0 GB), each start's greedy spent three before giving up
         * (2.8 s; 1.8 now, the same plan). A start that fits needs less
         * (ResNet-50 at 4 GiB: the keep-all start after the recompute
         * start failed, a fifth of a budget). */
        if (start > 0 && !c->have_seen) c->greedy_work = AUTO_WORK_BUDGET;
        rc = greedy(c, P, 3 * (c->L + 1), e);
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
        rc = eval(c, P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    }
    if (!done(c) && c->have_seen && !P->feasible) {
        /* the fastest fitting configuration seen, rebuilt */
        config_copy(c, c->disp, c->algos, c->seen_disp, c->seen_algos);
        vdp_plan_release(P);
        rc = eval(c, P, e);
        if (rc != VD_OK && rc != VD_EBUDGET) return rc;
    }
    /* far behind the starts before it: not refined (refine rarely closes
     * such a gap, and it is the start's dearest part) */
    if (best_s > 0 && P->feasible && P->sim.iter_s > AUTO_START_BEHIND * best_s) return VD_OK;
    phase(c, "refine, start %d of %d", start + 1, N_STARTS);
    if (P->feasible && !done(c) && (rc = refine(c, P, NULL, pass_cut(c), e))) { vdp_plan_release(P); return rc; }
    return VD_OK;
}

/* A second opinion (vdp_build_auto, small searches only): the whole search
 * again on the profile with every option's pass times scaled by seeded
 * factors in [1 - AUTO_JITTER, 1 + AUTO_JITTER], its plan's decisions
 * rebuilt under the true profile and refined, kept in *P when faster. The
 * search's path decides much on VGG-16 b256 at 12 GiB: on the fp32 profile
 * of session 9's call C it ends at 369.9 ms (features.2:y offloaded,
 * features.5-6 recomputed) while a 357.6 ms plan exists there (the
 * decisions of the plan it finds on that profile 1.5% off, 7 seeds of 8);
 * H200: 0.916x of no offload measured against issue 13's 0.94. One level
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
    config_from_plan(c, &J);
    vdp_plan_release(&J);
    vd_plan Q;
    rc = eval(c, &Q, e);
    bool fits = rc == VD_OK;   /* Q valid and fitting */
    if (rc == VD_EBUDGET) { vdp_plan_release(&Q); rc = VD_OK; }
    if (fits && (rc = refine(c, &Q, NULL, true, e))) { vdp_plan_release(&Q); fits = false; }
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
 * (HBM and PCIe traffic; VGG-16 b256 at 16 GiB on the H200 ran 1.0% over its
 * prediction offloading 6.5 GiB, 0.4% offloading 5.4 GiB in a plan predicted
 * the same to the microsecond). So the plan's offloaded maps, largest first
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
    config_from_plan(c, P);
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
        rc = eval(c, &Q, e);
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

/* The search in opts' mode. probe: only the first configuration (the
 * caller's dispositions, everything else kept): VD_OK when it fits, else
 * VD_EBUDGET (out holds it either way). tidy: fewer_copies at the end.
 * *effort_out (may be NULL): the effort spent. */
static int search_auto(vdp_search *s, const vd_net *net, const vd_profile *prof,
                       const vd_plan_opts *opts, int feasibility_only, bool probe, bool tidy,
                       double *effort_out,
                       vd_plan *out, vd_err *e) {
    memset(out, 0, sizeof *out);
    if (effort_out) *effort_out = 0;
    actx c;
    int rc = ctx_init(&c, s, net, prof, opts, feasibility_only, e);
    if (rc) return rc;
    vd_plan P;
    rc = eval(&c, &P, e);
    if (rc != VD_OK && rc != VD_EBUDGET) { ctx_free(&c); return rc; }
    if (rc == VD_OK || c.B == 0 || probe) {   /* it fits as it is */
        *out = P;
        if (effort_out) *effort_out = c.effort;
        ctx_free(&c);
        return rc;
    }
    c.lb = vd_plan_lower_bound(net, prof, &P, c.B);
    vdp_plan_release(&P);
    if (feasibility_only) {
        /* The search's last resorts first: when one fits, the answer is
         * "fits" either way (vdp_min_budget_auto: the fallbacks fit at its
         * upper end, where the search from the starts may take a minute on
         * ResNet-152 to fall back on them). */
        rc = feasible_fallback(&c, opts, out, e);
        if (rc != VD_EBUDGET) { ctx_free(&c); return rc; }
    }
    vd_plan best;
    memset(&best, 0, sizeof best);
    int rc_best = -1;
    /* the start configuration, and the best refined one of the starts */
    vd_disp *d0 = vd_malloc((size_t)(c.L + 1) * sizeof *d0, NULL), *bd = vd_malloc((size_t)(c.L + 1) * sizeof *bd, NULL);
    int *a0 = vd_malloc(2 * (size_t)c.L * sizeof *a0, NULL), *ba = vd_malloc(2 * (size_t)c.L * sizeof *ba, NULL);
    if (!d0 || !bd || !a0 || !ba) {
        vd_free(d0); vd_free(bd); vd_free(a0); vd_free(ba); ctx_free(&c);
        return vd_errf(e, VD_ENOMEM, "out of memory in the auto policy search");
    }
    config_copy(&c, d0, a0, c.disp, c.algos);
    bool have_start = false;     /* best, bd, ba: the best start so far */
    for (int st = 0; st < N_STARTS && !done(&c); st++) {
        if (st > 1 && c.work > AUTO_WORK) break;
        if (st > 0 && spent(&c)) break;
        vd_profile pp = *prof;
        if (st > 1) {                        /* a bandwidth start */
            const double *f = start_bw_scale[st - 2];
            pp.dev.d2h_bw *= f[0];
            pp.dev.h2d_bw *= f[1];
            pp.dev.both_bw *= 0.5 * (f[0] + f[1]);
        }
        rc = one_start(&c, st, st > 1 ? &pp : prof, d0, a0, have_start && best.feasible ? best.sim.iter_s : 0.0, &P, e);
        if (rc) goto fail;
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
    /* the last resort (propose): no start fitted; the keep-all start again */
    if (have_start && !best.feasible && !done(&c)) {
        c.last_resort = true;
        rc = one_start(&c, 1, prof, d0, a0, 0.0, &P, e);
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
    P = best;
    memset(&best, 0, sizeof best);
    config_copy(&c, c.disp, c.algos, bd, ba);
    if (P.feasible && !done(&c)) {
        c.pair_until = c.work + AUTO_PAIR_WORK;
        rc = swap_search(&c, &P, e);
        c.pair_until = 0;
        if (!rc) rc = shift_search(&c, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    /* AUTO_CHAINS kick chains, each from the plan the trades reached with
     * its own seed and its own budget, while the work is within the first
     * chain's; the fastest plan wins. One chain's path decides much: VGG-16
     * b256 at 12 GiB on six H200 profiles measured in two sessions, one chain
     * ends at 362.5-364.2 ms on three and 373.7-381.4 on the others; three
     * chains (or four; two are not enough) at 362.5-364.2 on all but the
     * -api one (371.4); ResNet-50 and ResNet-152 run one (the first spends
     * the budget). */
    for (int ch = 0; ch < AUTO_CHAINS && P.feasible && !done(&c); ch++) {
        if (ch > 0 && (c.work > work_limit(true) || spent(&c))) break;
        vd_plan Q;
        if (ch == 0) {
            config_copy(&c, bd, ba, c.disp, c.algos);   /* the chains' start */
            Q = P;
            memset(&P, 0, sizeof P);
        } else {
            config_copy(&c, c.disp, c.algos, bd, ba);
            if ((rc = eval(&c, &Q, e)) != VD_OK) { if (rc == VD_EBUDGET) vdp_plan_release(&Q); vdp_plan_release(&P); goto fail; }
        }
        double base = ch ? c.work : 0.0;
        rc = kick_search(&c, &Q, false, ch, base, e);
        if (!rc) rc = kick_search(&c, &Q, true, ch, base, e);
        if (rc) { vdp_plan_release(&Q); if (ch) vdp_plan_release(&P); goto fail; }
        if (ch == 0 || Q.sim.iter_s < P.sim.iter_s * (1.0 - 1e-9)) {
            if (ch) vdp_plan_release(&P);
            P = Q;
        } else {
            vdp_plan_release(&Q);
        }
    }
    /* only where it can gain: the plan over 2% above the lower bound, and
     * an iteration of at least AUTO_OPINION_MIN_S (on the tiny nets, LeNet
     * and the tests' random nets, it would double a planning time that
     * already outweighs what it could gain) */
    if (P.feasible && !done(&c) && s->jitter_depth == 0 && s->update_depth == 0 && s->array_phase == 0 &&
        c.effort < AUTO_EFFORT_CAP / 2 &&
        c.lb > 0 && P.sim.iter_s > c.lb * (1.0 + AUTO_OPINION_GAP) &&
        P.sim.iter_s >= AUTO_OPINION_MIN_S) {
        phase(&c, "second opinion", 0, 0);
        rc = second_opinion(&c, net, prof, opts, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    if (tidy && P.feasible && !done(&c) && s->jitter_depth == 0 && P.offload_bytes > 0) {
        phase(&c, "fewer copies", 0, 0);
        rc = fewer_copies(&c, &P, e);
        if (rc) { vdp_plan_release(&P); goto fail; }
    }
    take_better(&best, &rc_best, &P, P.feasible ? VD_OK : VD_EBUDGET);
    vd_free(d0); vd_free(bd); vd_free(a0); vd_free(ba);
    d0 = bd = NULL; a0 = ba = NULL;
    if (!done(&c)) {
        rc = paper_candidates(&c, opts, &best, &rc_best, e);
        if (rc) { vdp_plan_release(&best); ctx_free(&c); return rc; }
    }
    if (rc_best != VD_OK && !done(&c)) {
        extreme_config(&c);
        vd_plan X;
        vd_err te = {0};
        rc = eval(&c, &X, &te);
        if (rc != VD_OK && rc != VD_EBUDGET) { vdp_plan_release(&best); ctx_free(&c); *e = te; return rc; }
        take_better(&best, &rc_best, &X, rc);
    }
    if (done(&c) && rc_best != VD_OK) {
        /* feasibility only: the search stopped at a fitting configuration */
        config_copy(&c, c.disp, c.algos, c.seen_disp, c.seen_algos);
        vd_plan X;
        vd_err te = {0};
        rc = eval(&c, &X, &te);
        if (rc != VD_OK && rc != VD_EBUDGET) { vdp_plan_release(&best); ctx_free(&c); *e = te; return rc; }
        take_better(&best, &rc_best, &X, rc);
    }
    best.policy = VD_POLICY_AUTO;
    *out = best;
    if (effort_out) *effort_out = c.effort;
    ctx_free(&c);
    return rc_best == VD_OK ? VD_OK : vd_errf(e, VD_EBUDGET, "the auto policy found no plan that fits");
fail:
    if (have_start) vdp_plan_release(&best);
    vd_free(d0); vd_free(bd); vd_free(a0); vd_free(ba);
    ctx_free(&c);
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
    int rc = ctx_init(&c, s, net, prof, opts, feasibility_only, e);
    if (rc) return rc;
    c.effort = *effort;
    config_from_plan(&c, P);
    vd_plan Q;
    rc = eval(&c, &Q, e);
    *effort = c.effort;
    if (rc && rc != VD_EBUDGET) { ctx_free(&c); return rc; }
    bool fits = rc == VD_OK;
    rc = VD_OK;
    c.lb = vd_plan_lower_bound(net, prof, &Q, c.B);
    if (fits && !feasibility_only) {
        phase(&c, "the update in the backward pass", 0, 0);
        if (!spent(&c) && !at_bound(&c, &Q)) rc = refine(&c, &Q, NULL, true, e);
        if (!rc && Q.offload_bytes > 0) rc = fewer_copies(&c, &Q, e);
        if (rc) { vdp_plan_release(&Q); ctx_free(&c); return rc; }
    }
    *effort = c.effort;
    /* the same decisions can predict slower there (ResNet-50 b256 at 4144
     * MiB: the same copies stall 212 ms instead of 153, their prefetches
     * timed otherwise), or not fit (another placement, on tiny nets): then
     * P, which runs as it is */
    if (fits && Q.feasible && Q.sim.iter_s <= P->sim.iter_s * (1.0 + 1e-9)) {
        vdp_plan_release(P);
        *P = Q;
    } else {
        vdp_plan_release(&Q);
    }
    /* and never slower than the paper's policy in this mode (as the search) */
    int rc_best = VD_OK;
    rc = paper_candidates(&c, opts, P, &rc_best, e);
    P->policy = VD_POLICY_AUTO;
    ctx_free(&c);
    return rc;
}

/* The update in the backward pass (vd_plan_opts.grads_persistent false)
 * leaves the search more room than the gradient array did, and the search,
 * a heuristic capped by effort, lands elsewhere: ResNet-50 b256 at 4 GiB
 * planned 298.7 ms searched with the room, 288.1 with the array, where
 * budgets 16-48 MiB apart plan 288-313 ms in either mode. So, in three
 * phases: the caller's dispositions fit as they are (everything else kept),
 * with the room: that plan. Else the search runs with the gradient array,
 * as it always did, and its plan goes to the update's mode (to_update: the
 * same decisions, refined with the effort left where the room helps: VGG-16
 * tf32 at 12 GiB keeps features.5-6 instead of recomputing them). Only
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
static int auto_floor(actx *c, const vd_plan_opts *opts, uint64_t *floor_b, vd_err *e);

/* A budget below the floor (auto_floor) fits no plan, so no search runs
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
    int rc = ctx_init(&c, s, net, prof, opts, feasibility_only, e);
    if (rc) return rc;
    extreme_config(&c);
    uint64_t floor_b = 0;
    rc = auto_floor(&c, opts, &floor_b, e);
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
            rc = k == 0 ? eval(&c, &X, &te) : vdp_build_policy(net, prof, &o, &X, &te);
            if (rc == VD_OK || rc == VD_EBUDGET) take_better(&best, &rc_best, &X, rc);
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
    ctx_free(&c);
    return rc;
}

/* vdp_build_auto in search s: the outermost call (s new) or a second
 * opinion's (a child of the search that asks it). */
static int build_auto(vdp_search *s, const vd_net *net, const vd_profile *prof,
                      const vd_plan_opts *opts, int feasibility_only, vd_plan *out, vd_err *e) {
    if (opts->budget && s->update_depth == 0 && s->jitter_depth == 0) {
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
    /* Everything kept fits, but maybe only in a placement that costs time:
     * ResNet-50 tf32 b256 at none's smallest budget (20.52 GiB on session
     * 11's profile) copies the adds' gradients instead of sharing them,
     * 118.3 ms, where 20.0 GB with three maps offloaded plans 112.6 (the
     * bound, 112.4). Over 2% above the lower bound, as the second opinion:
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

int vdp_build_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                   int feasibility_only, vd_plan *out, vd_err *e) {
    vdp_search s = {0};
    return build_auto(&s, net, prof, opts, feasibility_only, out, e);
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
     * before it gave up: ResNet-152 b256 at its smallest budget (3.52 GB)
     * planned in 2.5 s, 1.4 of them there. The search with the room then. */
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
        /* with effort to spare (under half the cap: VGG-16, not ResNet-50
         * at 4 GiB), the search with the room too, on what is left, and
         * the faster plan: VGG-16 tf32 at 12 GiB offloads instead of
         * recomputing features.5-6 there (s10c: 174.8 against 179.5 ms).
         * On at most 0.35 of the cap: VGG-16 then plans in about 0.9 s
         * (with all that is left, 1.0-1.1 s; with 0.25, tf32 176.0 ms) */
        double cap = vdp_search_cap(s);
        if (rc || feasibility_only || effort >= 0.5 * cap) return rc;
        /* and where it can gain, as the second opinion: over 2% above the
         * lower bound (VGG-16 fp32 at 12 GiB on the s9 profile: 2.0%, not) */
        double lb = vd_plan_lower_bound(net, prof, out, opts->budget);
        if (!(lb > 0) || out->sim.iter_s <= lb * (1.0 + AUTO_OPINION_GAP)) return VD_OK;
        vdp_search ch = vdp_search_child(s);
        ch.cap = fmin(cap - effort, 0.35 * AUTO_EFFORT_CAP);
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

/* Whether a fallback of the search (feasible_fallback) fits under opts;
 * if so and plan is not NULL, *plan is the first that does (as the search
 * in mode feasibility_only builds it). */
static int fallback_fits(vdp_search *s, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         int feasibility_only, bool *fits, vd_plan *plan, vd_err *e) {
    *fits = false;
    actx c;
    int rc = ctx_init(&c, s, net, prof, opts, plan ? feasibility_only : VDP_ANSWER, e);
    if (rc) return rc;
    vd_plan X;
    rc = feasible_fallback(&c, opts, &X, e);
    ctx_free(&c);
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
    ch.cap = 0.5 * AUTO_EFFORT_CAP;
    ch.update_depth++;
    int rc = search_auto(&ch, net, prof, opts, feasibility_only, false, true, NULL, out, e);
    vdp_search_join(s, &ch);
    return rc;
}

/* A bound no plan of any disposition goes below, from plan p (everything
 * kept): per step, the bytes of tensors whose lifetime no disposition changes
 * (parameters, gradients, momentum, feature-map gradients, saved state,
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
            int i = st->layer;
            bool fwd = st->kind == VD_STEP_FWD, rx, ry;
            vd_op_bwd_reads(net, i, &rx, &ry);
            int ts[VD_MAX_INPUTS + 1], n = 0;
            if (fwd || rx)
                for (int k = 0; k < net->layers[i].n_in; k++) ts[n++] = p->layers[i].in_t[k];
            if (fwd || ry) ts[n++] = p->layers[i].y;
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
 * (the least workspace after extreme_config), at least the persistent
 * bytes. One build. */
static int auto_floor(actx *c, const vd_plan_opts *opts, uint64_t *floor_b, vd_err *e) {
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

/* known_dyn: dyn's smallest budget when the caller has it (else NULL). */
static int min_budget_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                           const uint64_t *known_dyn, uint64_t *min_budget, vd_err *e) {
    vdp_search s = {0};
    actx c;
    int rc = ctx_init(&c, &s, net, prof, opts, true, e);
    if (rc) return rc;
    /* Upper bound: the fallback candidates' own minimum budgets. */
    uint64_t hi = UINT64_MAX, m = 0;
    vd_plan_opts o = *opts;
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
    extreme_config(&c);
    o = *opts;
    o.policy = VD_POLICY_NONE;
    o.disp = c.disp;
    o.algos = c.algos;
    o.algos_bwd = c.algos + c.L;
    if ((rc = vdp_min_budget_policy(net, prof, &o, &m, e))) goto out;
    if (m < hi) hi = m;
    /* Lower end: below the operand bound nothing fits. */
    vd_plan P;
    uint64_t floor_b = 0;
    if ((rc = auto_floor(&c, opts, &floor_b, e))) goto out;
    uint64_t lo = floor_b > VD_PLAN_ALIGN ? floor_b - VD_PLAN_ALIGN : 0;
    lo = lo / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
    if (hi <= lo) { *min_budget = hi; goto out; }
    o = *opts;
    o.budget = hi;
    o.progress = NULL;
    vdp_min_budget_progress(opts, VD_POLICY_AUTO, 1, lo, hi);
    rc = vdp_build_auto(net, prof, &o, VDP_ANSWER, &P, e);
    if (rc == VD_OK || rc == VD_EBUDGET) vdp_plan_release(&P);
    if (rc == VD_EBUDGET) rc = vd_errf(e, VD_EINTERNAL, "auto: no plan at its fallbacks' minimum budget");
    if (rc) goto out;
    /* The search often fits nothing below its fallbacks' minimum (ResNet-50:
     * the binary search's 22 probes all failed, 0.8 s each). So the first
     * probe is one step below hi: failing there, hi is the answer (the
     * binary search takes fitting as monotone in the budget too). */
    bool first = true;
    for (int step = 2; hi - lo > VD_PLAN_ALIGN; step++) {
        vdp_min_budget_progress(opts, VD_POLICY_AUTO, step, lo, hi);
        uint64_t mid = (lo + (hi - lo) / 2) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        if (first) mid = (hi - VD_PLAN_ALIGN) / VD_PLAN_ALIGN * VD_PLAN_ALIGN;
        first = false;
        if (vdp_stopped(opts)) { rc = vd_errf(e, VD_ESTOP, "the smallest-budget search stopped"); goto out; }
        if (mid <= lo) mid = lo + VD_PLAN_ALIGN;
        o.budget = mid;
        vd_err te = {0};
        rc = vdp_build_auto(net, prof, &o, VDP_ANSWER, &P, &te);
        if (rc == VD_OK || rc == VD_EBUDGET) vdp_plan_release(&P);
        if (rc == VD_OK) hi = mid;
        else if (rc == VD_EBUDGET) lo = mid;
        else { *e = te; goto out; }
        rc = VD_OK;
    }
    *min_budget = hi;
out:
    ctx_free(&c);
    return rc;
}

int vdp_min_budget_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        uint64_t *min_budget, vd_err *e) {
    return min_budget_auto(net, prof, opts, NULL, min_budget, e);
}

int vdp_min_budget_auto_from(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                             uint64_t dyn_min, uint64_t *min_budget, vd_err *e) {
    return min_budget_auto(net, prof, opts, &dyn_min, min_budget, e);
}
