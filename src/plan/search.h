/* search.h — the auto policy's search as an object (auto.c and the
 * search_*.c files; docs/planner.md says how the search works). Not API. */
#ifndef VD_PLAN_SEARCH_H
#define VD_PLAN_SEARCH_H

#include <string.h>
#include "plan/plan_internal.h"

/* The fastest fitting configuration that offloads nothing, by its price
 * replayed (est_s: vdp_replayed_est), among those the searches of one
 * vdp_build_auto build (vdp_search.replayed). */
typedef struct vdp_replayed {
    bool have;
    double est_s;
    vd_disp *disp;      /* [L + 1] */
    int *algos;         /* [2L] */
} vdp_replayed;

/* What one call of vdp_build_auto carries through all its searches: the
 * progress they report as one, how deep it is nested and the effort it may
 * spend. A nested search (the room, the gradient array, a second opinion)
 * is a child (vdp_search_child) whose progress goes back to its parent
 * (vdp_search_join). */
typedef struct vdp_search {
    int evals;          /* plans built by the searches finished so far */
    double best_s;      /* their fastest fitting plan's iteration (0: none) */
    int update_depth;   /* > 0: a search with the room (the update in the backward pass) */
    int array_phase;    /* > 0: the search with the gradient array, before the update's */
    int jitter_depth;   /* > 0: a second opinion's search, on a jittered profile */
    double cap;         /* a nested search's effort cap, what its parent left
                           (0: the whole cap, vdp_whole_cap) */
    double share;       /* the whole cap is this share of AUTO_EFFORT_CAP (0: all
                           of it; vdp_build_auto_share), in every nested search too */
    bool above_floor;   /* the budget is known not to be below the floor (the
                           smallest-budget search's probes): no floor check */
    double effort;      /* the effort the searches finished so far spent */
    /* Where the options replay the plans that offload nothing
     * (vd_plan_opts.graph) on a profile with a launch cut: the searches
     * note the fastest such configuration here (shared by the children),
     * and vdp_build_auto returns it where it beats its plan replayed
     * (docs/planner.md, "Phases"). NULL: not noted. */
    vdp_replayed *replayed;
} vdp_search;

/* The whole search's effort cap (AUTO_EFFORT_CAP, or its share). */
static inline double vdp_whole_cap(const vdp_search *s) {
    return s->share > 0 ? s->share * AUTO_EFFORT_CAP : AUTO_EFFORT_CAP;
}

/* The effort cap s may spend. */
static inline double vdp_search_cap(const vdp_search *s) {
    return s->cap > 0 ? s->cap : vdp_whole_cap(s);
}

/* A child of s: the same progress so far, the same depths and cap (the
 * caller then sets its own). */
static inline vdp_search vdp_search_child(const vdp_search *s) { return *s; }

/* Take back a finished child's progress into its parent s. */
static inline void vdp_search_join(vdp_search *s, const vdp_search *child) {
    s->evals = child->evals;
    s->best_s = child->best_s;
    s->effort = child->effort;
}

/* ---- one search's context and greedy's moves ---------------------------- */

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

/* One search's context (search_ctx_init): the configuration it looks at
 * (dispositions and options), what it has learnt (the fastest fitting
 * configuration, the memo, the lower bound), its work and effort, and the
 * scratch of its phases. */
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
    bool *can_rc;           /* [L + 1] the tensor's writers are recomputable */
    double *rc_max;         /* [L + 1] the most a recompute of the tensor can take:
                               its writers' slowest forward options */
    bool rc_valid;          /* rc_on holds the recomputed layers of rc_disp */
    vd_disp *rc_disp;       /* [L + 1] */
    bool *rc_on;            /* [L] (vdp_recomputed_layers) */
    vdp_tcache *tc;         /* the tensors of its builds (plan_internal.h) */
    int *fast, *minws;      /* [2L] profile options per pass (same layout as algos) */
    double *ex;             /* [2L + 2] per-step excess of the plan being looked at */
    move *mv;               /* [4L + 4] proposals */
    void *ord;              /* [4L + 4] scratch of propose */
    bool found;             /* some plan evaluated so far fits */
    /* the fastest fitting configuration evaluated so far */
    bool have_seen;
    bool perturbed;         /* prof is a start's perturbed copy: note nothing */
    bool stage_full;        /* builds search the input staging's latest issue step
                               (search_restage); else they stage quickly
                               (vdp_build_screened's quick_stage) */
    double seen_s;
    vd_disp *seen_disp;     /* [L + 1] */
    int *seen_algos;        /* [2L] */
    int evals;              /* plans built */
    int looks;              /* configurations evaluated: built or found in the memo */
    double work;            /* the search's work so far, in full builds times steps
                               (see eval_cost) */
    double effort;          /* the same, the placements counted as they went
                               (vdp_build_screened's *effort) */
    double effort_base;     /* what of effort a search before it spent (to_update) */
    /* memo of evaluated configurations (see search_memo_find) */
    struct memo_ent *memo;
    size_t memo_cap, memo_n;
    int prof_id;            /* which start's profile c->prof is (part of the key) */
    const vd_profile *sgd_prof;   /* sgd_s is vdp_sgd_s of this profile (compute_bound) */
    double sgd_s;
    double lb;              /* no plan at the budget predicts a faster iteration
                               (vd_plan_lower_bound; 0: unknown) */
    char phase[64];         /* what the search is doing (opts->progress) */
    bool no_offload_moves;  /* propose no keep -> offload moves (search_trades's repair) */
    double abandon_s;       /* greedy stops once its plan predicts slower (0: never) */
    double greedy_work;     /* greedy gives up past this much work (0: AUTO_GREEDY_WORK) */
    double pair_until;      /* search_trades tries pairs while c->work is below this (0: none) */
    bool last_resort;       /* no start fitted: greedy's stuck moves too (search_greedy) */
    bool *look, *look_next; /* [L + 1] refine's positions to try (see refine) */
    bool *focus;            /* [L + 1] the kicks' and the trades' changes (look_changes) */
    int *rorder;            /* [L + 1] refine's order of the disposition keys (refine_order) */
    struct gkey *gk;        /* [L + 1] scratch of refine_order */
} actx;

typedef struct ordered { move m; int batch, idx; } ordered;   /* propose's scratch */
typedef struct gkey { double g; int k; } gkey;                  /* refine_order's scratch */

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

/* Copy a configuration (dispositions [L + 1], options [2L]). */
static inline void config_copy(const actx *c, vd_disp *to_disp, int *to_algos, const vd_disp *disp,
                        const int *algos) {
    memcpy(to_disp, disp, (size_t)(c->L + 1) * sizeof *to_disp);
    memcpy(to_algos, algos, 2 * (size_t)c->L * sizeof *to_algos);
}

static inline bool done(const actx *c) { return c->feas_only && c->found; }

/* The whole search's effort is spent (AUTO_EFFORT_CAP): refine, the trades,
 * the shifts, the kicks and the later starts stop; the plan so far stands. */
static inline bool spent(const actx *c) {
    return c->effort > vdp_search_cap(c->s) || vdp_stopped(&c->o);
}

/* No configuration can beat plan P (eval_beats' margin): it is at the lower
 * bound. Refine and the kicks stop there; they would build configurations
 * none of which could be kept. */
static inline bool at_bound(const actx *c, const vd_plan *P) {
    return c->lb > 0 && P->sim.iter_s * (1.0 - 1e-9) <= c->lb;
}

/* Tensor of disposition key k (0: x, i + 1: output of layer i) in p, or -1. */
static inline int tensor_of(const actx *c, const vd_plan *p, int k) {
    if (k == 0) return p->t_x;
    int i = k - 1;
    const vd_plan_layer *pl = &p->layers[p->first_unit[i]];
    if (i >= c->L - 1 || pl->inplace) return -1;
    int t = pl->y;
    return p->tensors[t].layer == i ? t : -1;
}

/* Whether a map of sb bytes is about the size of one of sa, for the moves
 * that put one map's disposition on another (shifts, exchanges): 0.75 to
 * 1.5 times (what the one frees should cover the other). */
static inline bool about_size(double sa, double sb) { return sb >= 0.75 * sa && sb <= 1.5 * sa; }

/* Time of option a in the pass of algos key k (k < L forward, else backward). */
static inline double algo_time(const actx *c, int k, int a) {
    const vd_profile_algo *x = &c->prof->layers[k % c->L].algos[a];
    return k < c->L ? x->fwd_s : x->bwd_s;
}

/* Workspace of option a in the pass of algos key k. */
static inline uint64_t algo_ws(const actx *c, int k, int a) {
    return vd_profile_algo_ws(&c->prof->layers[k % c->L].algos[a], k >= c->L);
}

/* ---- search_eval.c: the context, the memo, evaluation, bounds, fallbacks */

/* Set up c for a search of s at opts->budget in mode feas_only (VDP_*):
 * everything kept, the fastest options (or the caller's). 0 or VD_ENOMEM. */
int search_ctx_init(actx *c, vdp_search *s, const vd_net *net, const vd_profile *prof,
                    const vd_plan_opts *opts, int feas_only, vd_err *e);
void search_ctx_free(actx *c);
/* Name the phase c enters (opts->progress) and report. */
void search_phase(actx *c, const char *fmt, int a, int b);
/* The memo's entry of c's configuration, or NULL. */
const memo_ent *search_memo_find(const actx *c);
/* Build c's configuration at the budget: in full (search_eval), unplaced
 * far over the budget (search_eval_unplaced), screened against limit_s
 * (search_eval_screened, search_eval_repairable), or only when it can beat
 * limit_s (search_eval_beats); the contracts are at their definitions. */
int search_eval(actx *c, vd_plan *out, vd_err *e);
double vdp_replayed_est(const vd_plan *p, const vd_profile *prof);
int search_eval_unplaced(actx *c, vd_plan *out, bool *unplaced, vd_err *e);
int search_eval_screened(actx *c, double limit_s, vd_plan *out, vd_err *e);
int search_eval_repairable(actx *c, double limit_s, vd_plan *out, vd_err *e);
int search_eval_beats(actx *c, double limit_s, vd_plan *out, bool *better, vd_err *e);
/* *P, a plan of c's builds, rebuilt with the input staging's issue step
 * searched (its staging was quick: P->stage_quick); c ends with P's
 * configuration. */
int search_restage(actx *c, vd_plan *P, vd_err *e);
/* c's configuration set to plan p's decisions. */
void search_config_from_plan(actx *c, const vd_plan *p);
/* Keep the better of *best and cand (fitting, then faster, then lower top). */
void search_take_better(vd_plan *best, int *rc_best, vd_plan *cand, int rc);
/* The paper's policies as candidates (dyn; conv and all with fixed options). */
int search_paper_candidates(actx *c, const vd_plan_opts *opts, vd_plan *best, int *rc_best,
                            vd_err *e);
/* c's configuration set to "recompute what can be, offload the rest, least
 * workspace". */
void search_extreme_config(actx *c);
/* The fallbacks alone: VD_OK with the first that fits, else VD_EBUDGET. */
int search_feasible_fallback(actx *c, const vd_plan_opts *opts, vd_plan *out, vd_err *e);
/* A budget below which no plan of c's net fits: *floor_b. */
int search_floor(actx *c, const vd_plan_opts *opts, uint64_t *floor_b, vd_err *e);

/* ---- search_greedy.c */

/* Greedy rounds until *P (c's configuration's plan) fits. */
int search_greedy(actx *c, vd_plan *P, int max_rounds, vd_err *e);

/* ---- search_local.c: refine, trades, shifts, kicks */

/* Each of these improves a fitting *P (c's configuration's plan) and leaves
 * c's configuration at the plan it returns. */
int search_refine(actx *c, vd_plan *P, const bool *focus, bool by_cost, vd_err *e);
int search_trades(actx *c, vd_plan *P, vd_err *e);
int search_shifts(actx *c, vd_plan *P, vd_err *e);
/* search_exchange.c: recomputes and offloads exchanged between maps. */
int search_exchanges(actx *c, vd_plan *P, vd_err *e);
/* search_exchange.c: runs of offloaded maps recomputed together. */
int search_recompute_runs(actx *c, vd_plan *P, vd_err *e);
int search_swaps(actx *c, vd_plan *P, vd_err *e);
int search_kicks(actx *c, vd_plan *P, bool repair, int chain, double base, vd_err *e);
/* The work after which no more kicks start (repair: those with repair). */
double search_work_limit(bool repair);
/* Kick chains of the search (each from the trades' plan, its own seed). */
enum { AUTO_CHAINS = 3 };

#endif
