/* plan_internal.h — functions shared between the plan/ sources. Not API. */
#ifndef VD_PLAN_INTERNAL_H
#define VD_PLAN_INTERNAL_H

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include "plan/plan.h"

#define VD_PLAN_ALIGN 256u

/* The offset of the next part, of `bytes`, of a block carved into several
 * arrays (each 16-aligned); *at: the block's size so far. A build, a
 * placement and a replay, each made many times by the auto search,
 * allocate one block each instead of one per array. */
static inline size_t vdp_carve(size_t *at, size_t bytes) {
    size_t o = *at;
    *at += (bytes + 15) / 16 * 16;
    return o;
}

/* A stop signal came (vd_plan_opts.stop). */
static inline bool vdp_stopped(const vd_plan_opts *o) { return o->stop && *o->stop; }

/* Bit j set: lo[j] < a and hi[j] > b, for entries j < cnt <= 64. Eight
 * entries at a time with SSE2 where the compiler has it (every x86-64), the
 * rest one by one. The plan's hot scans test every entry of an array and
 * visit only the few that pass, in order (a branch per test was most of
 * their time): the placement's "overlaps steps [f, l]" is
 * vdp_between_mask(first, last, cnt, l + 1, f - 1); the memory fitting
 * tests the offloaded tensors' steps against the step over the cap. */
static inline uint64_t vdp_between_mask(const int *lo, const int *hi, int cnt, int a, int b) {
    uint64_t mask = 0;
    int j = 0;
#if defined(__SSE2__)
    const __m128i va = _mm_set1_epi32(a), vb = _mm_set1_epi32(b);
    for (; j + 8 <= cnt; j += 8) {
        __m128i m0 = _mm_and_si128(_mm_cmpgt_epi32(va, _mm_loadu_si128((const __m128i *)(lo + j))),
                                   _mm_cmpgt_epi32(_mm_loadu_si128((const __m128i *)(hi + j)), vb));
        __m128i m1 = _mm_and_si128(_mm_cmpgt_epi32(va, _mm_loadu_si128((const __m128i *)(lo + j + 4))),
                                   _mm_cmpgt_epi32(_mm_loadu_si128((const __m128i *)(hi + j + 4)), vb));
        unsigned bits = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(m0)) |
                        (unsigned)_mm_movemask_ps(_mm_castsi128_ps(m1)) << 4;
        mask |= (uint64_t)bits << j;
    }
#endif
    for (; j < cnt; j++) mask |= (uint64_t)((lo[j] < a) & (hi[j] > b)) << j;
    return mask;
}

/* VDP_SORT_FN(name, type, before): defines static void name(type *a, type
 * *tmp, int n), a stable sort of a[0..n-1] by before (where before is a
 * strict total order, every correct sort gives the same order); tmp:
 * scratch [n]. Insertion sort of runs of 16, then bottom-up merges (the
 * comparison inlined: qsort's callback was a sixth of an auto search's time
 * in the placement, a twentieth in the staging). */
#define VDP_SORT_FN(name, type, before)                                                   \
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

/* VDP_HEAP_DOWN_FN(name, type, ctx_type, before): defines static void
 * name(type *h, int n, int i, ctx_type ctx), which sifts h[i] down the
 * binary heap h[0..n-1] whose top comes first by before(ctx, &x, &y) (x
 * strictly before y): the placement's cursors, the fitting's early
 * prefetches and the bound's cover take their next from such heaps. */
#define VDP_HEAP_DOWN_FN(name, type, ctx_type, before)                                    \
    static inline void name(type *h, int n, int i, ctx_type ctx) {                         \
        type v = h[i];                                                                     \
        for (;;) {                                                                         \
            int c = 2 * i + 1;                                                             \
            if (c >= n) break;                                                             \
            if (c + 1 < n && before(ctx, &h[c + 1], &h[c])) c++;                           \
            if (!before(ctx, &h[c], &v)) break;                                            \
            h[i] = h[c];                                                                   \
            i = c;                                                                         \
        }                                                                                  \
        h[i] = v;                                                                          \
    }

/* Assign offsets to intervals iv[0..n-1]: intervals overlapping in time get
 * disjoint [offset, offset+bytes). Intervals with pinned[i] true keep their
 * offset. Tries several orderings (first-fit decreasing by size, by start,
 * by size*duration) and keeps the lowest high-water mark; quick: the first
 * ordering only (for plans that cannot fit anyway). *hwm = max end.
 * fit > 0: only whether the intervals fit in fit bytes is asked. Each
 * ordering stops once its top passes fit while none has fitted; when none
 * fits, *hwm is the lowest top an ordering had when it stopped (a lower
 * bound on the full placement's, above fit) and the offsets are partial.
 * When one fits, the result is the one fit = 0 gives. work (optional):
 * += the orderings' work (intervals placed, placed ones looked at, 0.6 of
 * those scanned: a deterministic measure of its time). */
int vdp_place(vd_interval *iv, int n, const bool *pinned, bool quick, uint64_t fit, uint64_t *hwm,
              double *work, vd_err *e);

/* Replay the plan's actions on three streams with durations from prof
 * (copies: bytes / bandwidth; D2H and H2D in flight together share both_bw,
 * see man vdnn-plan; a RECOMPUTE takes its layer's forward time). Fills
 * p->sim, each step's t_start/t_end/t_rc_start/stall_s and the copies'
 * times. ignore_waits: compute does not wait on copies (gives the
 * stall-free step times that the prefetch scheduler starts from).
 * d2h_done (optional, [n_tensors]): completion time of each tensor's offload. */
int vdp_simulate(vd_plan *p, const vd_profile *prof, bool ignore_waits, double *d2h_done,
                 vd_err *e);
/* vdp_simulate of a plan without input staging as if its input were staged:
 * x's step-0 copy replaced by the staged batch's device copy, and no staging
 * copy (which only adds H2D work). Input staging is kept only when it makes
 * the iteration faster, so the smaller of this and the plain replay is what
 * the plan can reach with staging (vdp_build_screened's screen). */
int vdp_simulate_as_staged(vd_plan *p, const vd_profile *prof, vd_err *e);


/* build.c: the units of chunks (vd_plan_opts.chunks, NULL: none), n_layers
 * when nothing is split, or -1 when out of memory; ra / rb ([n_layers] or
 * NULL): the first and last layer of each layer's run (plan.h, "Split
 * layers"; the layer itself when it is not split). */
int vdp_runs(const vd_net *net, const int *chunks, int *ra, int *rb);

/* inplace.c: how many layers read layer src's output (src -1: the net input). */
int vdp_n_consumers(const vd_net *net, int src);

/* inplace.c: in a forward-only plan, the input of add layer i whose tensor
 * its output may take (plan.h, "A forward-only plan"): one that is a layer's
 * output (not the net input), appears once among i's inputs and has no
 * reader above i (so none after i's step: units run in layer order, and a
 * run of split layers lies wholly below or above a layer that is not split);
 * of those, the latest producer's (its map has no gap before the add that
 * an offload could use, decide_offload_fwd). -1: none, or not an add. */
int vdp_add_inplace_input(const vd_net *net, int i);

/* build.c: the SGD time of an iteration: the profile's (every trainable
 * parameter's) in proportion to the trained ones (vd_param_trained: frozen
 * parameters are not updated). */
double vdp_sgd_s(const vd_net *net, const vd_profile *prof);

/* bound.c: the recompute choice of vd_plan_copy_bound's relaxation at the
 * step where most bytes must leave (vd_plan_bound.leave_step), its best
 * figure there: rc_t[t] (p's tensors, [p->n_tensors]) true for the feature
 * maps its fractional cover makes absent by recomputing them, cheapest per
 * byte first until the bytes that must leave are covered; all false when
 * nothing must leave or no plan fits. *out (may be NULL): the bound as
 * vd_plan_copy_bound's but with that step's copies' figure only (a bound
 * too, at most vd_plan_copy_bound's; one step's figures, not a few dozen,
 * so about that much cheaper). The auto search starts from it (auto.c, the
 * bound's start). */
int vdp_bound_recompute_set(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                            uint64_t budget, bool *rc_t, vd_plan_bound *out, vd_err *e);

/* window.c: every keep / offload / recompute assignment of a window of
 * disposition keys (0: x, i + 1: layer i's output), the rest of the
 * configuration as plan p has it (the other keys' dispositions, the
 * per-pass options, p's split layers), at opts->budget (opts: as p was
 * planned with; its policy is ignored), each one full build
 * (vdp_build_fixed, as auto's search builds a configuration). The window:
 * the n keys at or below top_key (descending) that the search may change
 * and that have a choice besides keep (refine's rules: offload needs two
 * absent steps, recompute one and recomputable writers); fewer where the
 * net has fewer. best (optional): the fastest plan that fits (zeroed when
 * none does; the caller frees it). A measurement (issue 32 item 3: how far the best plan
 * near auto's is from the lower bound), not part of auto's search: up to
 * 3^n builds. Returns 0 or an error (VD_EUSAGE: n outside 1..
 * VDP_WINDOW_MAX). */
enum { VDP_WINDOW_MAX = 12 };
typedef struct vdp_window {
    int n_keys;                      /* the window's keys, keys[0] the highest */
    int keys[VDP_WINDOW_MAX];
    vd_disp base[VDP_WINDOW_MAX];    /* p's dispositions of them */
    vd_disp best[VDP_WINDOW_MAX];    /* the fastest assignment's (when best_s finite) */
    long builds, fits;               /* assignments built (each once), those that fit */
    double base_s;                   /* p's configuration rebuilt (INFINITY: does not fit) */
    double best_s;                   /* the fastest that fits (INFINITY: none) */
} vdp_window;
int vdp_window_search(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                      const vd_plan *p, int top_key, int n, vdp_window *w, vd_plan *best,
                      vd_err *e);

/* The plan's files depend one way: plan.c (entry points) -> auto.c (the auto
 * search's orchestration) -> search_local.c -> search_greedy.c ->
 * search_eval.c (search.h; docs/planner.md) -> policy.c (none / all / conv /
 * dyn) -> build.c (one build, with the steps of builder.h) -> place.c, sim.c.
 *
 * build.c. vdp_plan_release frees a plan's arrays and zeroes it
 * (= vd_plan_free). vdp_build_fixed: one build with fixed algorithms
 * algos[2L] (forward options of layers 0..L-1, then their backward options)
 * and offload policy offload_pol (AUTO: only opts->disp decides), budget
 * opts->budget; pin (optional): a plan whose persistent regions keep their
 * offsets (the evaluation plan's). Returns 0, VD_EBUDGET (out valid,
 * infeasible) or another error (out released). */
void vdp_plan_release(vd_plan *p);
int vdp_build_fixed(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                    vd_policy offload_pol, const int *algos, const vd_plan *pin,
                    vd_plan *out, vd_err *e);

/* Whether vdp_build_fixed's plan (no pin) fits the budget: *fits, the
 * same answer, without the plan. Each variant stops after its placement
 * (one whose live bytes exceed the budget even after the fitting is not
 * placed), and the first that fits answers: nothing of a plan that a
 * caller reads only to learn whether it fits (the dyn policy's greedy over
 * the options) is built. 0 or an error. */
int vdp_build_fits(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                   vd_policy offload_pol, const int *algos, bool *fits, vd_err *e);

/* The tensors of a search's builds: what each build's tensors and liveness
 * (vdp_build_tensors, before any decision) came to, kept for the next build
 * with the same options, split layers and gradient aliasing (build.c,
 * build_tensors; most of a search's builds change only the dispositions,
 * decided after). The same tensors either way. vdp_tcache_new: NULL when
 * out of memory. */
typedef struct vdp_tcache vdp_tcache;
vdp_tcache *vdp_tcache_new(void);
void vdp_tcache_free(vdp_tcache *tc);

/* vdp_build_fixed for a search that only wants plans predicting an
 * iteration faster than screen_s (0: no screen, vdp_build_fixed). Each
 * prefetch variant is replayed (vdp_simulate_as_staged) once its live bytes
 * are fitted and before its placement; a variant that already predicts
 * screen_s or slower there is dropped unplaced (the staging only replaces
 * x's copy; the placement's retries at a tighter cap only delay prefetches
 * and release regions earlier, which nearly always slows the replay; the
 * rare exceptions: docs/planner.md, "Screened builds"). A variant whose live
 * bytes exceed the budget is
 * dropped too (it cannot fit). A configuration that does not fit with the
 * gradients aliased is not built again without (build_fixed's retry):
 * VD_EBUDGET, *exact false.
 * Returns VDP_SCREENED (out released) when every variant is dropped, else
 * like vdp_build_fixed; *lb_s: a bound below which no variant that fits
 * predicts an iteration (the dropped variants' replays, the others' plans;
 * infinite when no variant's live bytes fit the budget: those are dropped
 * too, unplaced, and then the configuration does not fit); *exact: out is the plan
 * vdp_build_fixed gives (nothing dropped, or out fits and beats every
 * dropped variant's replay); *cost: the build's work (actions replayed,
 * intervals placed, tensors built: a deterministic measure of its time);
 * *effort (optional): the same with the placements counted by what they
 * did (vdp_place's work), nearer the time on big nets. tc (may be NULL):
 * the search's tensors.
 * quick_stage: the input staging's issue step is the first its search
 * starts from, which predicts the time the search's step does (the latest
 * as fast), without the search (vdp_add_staging); the plan says so
 * (stage_quick). */
enum { VDP_SCREENED = 100 };
int vdp_build_screened(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_policy offload_pol, const int *algos, double screen_s, bool quick_stage,
                       vdp_tcache *tc, vd_plan *out, bool *exact, double *lb_s, double *cost,
                       double *effort, vd_err *e);

/* vdp_build_fixed for a search that reads of a plan whose live bytes exceed
 * the budget by over 30% only those, its replay and its top's lower bound
 * (greedy's excess): such a plan is not placed (the placement changes only the
 * offsets and the top, which nothing else of the plan reads, and staging,
 * which needs a plan that fits: the same replay), its hwm is its live peak,
 * its offsets unset; *unplaced then. Returns like vdp_build_fixed; *cost,
 * *effort, quick_stage as vdp_build_screened's. */
int vdp_build_unplaced_over(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                            vd_policy offload_pol, const int *algos, bool quick_stage,
                            vdp_tcache *tc, vd_plan *out, bool *unplaced, double *cost,
                            double *effort, vd_err *e);

/* The layers vdp_build_fixed recomputes with opts (opts->disp) and
 * algos[2L]: rc_layer[L], true for each writer of a tensor whose RECOMPUTE is
 * honoured. Depends on opts->disp only (the options change workspaces, not
 * the feature maps' lifetimes). Costs a fraction of one build. tc (may be
 * NULL): the search's tensors. 0 or an error. */
int vdp_recomputed_layers(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                          const int *algos, vdp_tcache *tc, bool *rc_layer, vd_err *e);

/* policy.c. vdp_build_policy / vdp_min_budget_policy: vd_plan_build's search
 * (no eval plan) and vd_plan_min_budget for a policy other than auto (or a
 * forward-only plan), inputs checked. */
int vdp_build_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                     vd_plan *out, vd_err *e);
/* vdp_build_policy for a caller that keeps only whether the plan fits: the
 * same outcome (VD_OK / VD_EBUDGET), but dyn stops at its first candidate
 * that fits, without the greedy over the options that follows (which only
 * keeps options that still fit, one full build each: quadratic in depth).
 * *out is then a plan of that candidate. */
int vdp_fits_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                    vd_plan *out, vd_err *e);
/* Report a step of a smallest-budget search through opts->progress (if
 * set): phase "searching the smallest budget (policy P): step K of about N",
 * N from the bounds lo < hi still open (a binary search to VD_PLAN_ALIGN),
 * evals = K, best_s = -1 (no plan to report). */
void vdp_min_budget_progress(const vd_plan_opts *opts, vd_policy pol, int step, uint64_t lo,
                             uint64_t hi);
int vdp_min_budget_policy(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                          uint64_t *min_budget, vd_err *e);
/* vdp_min_budget_policy for dyn (opts->policy DYN, the algorithms left
 * free) given mins[VD_POLICY_NONE / CONV / ALL], the smallest budgets of
 * those policies under the same opts: dyn's first three candidates are
 * exactly those searches (the fastest options both ways), not run again. */
int vdp_min_budget_dyn_from(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                            const uint64_t *mins, uint64_t *min_budget, vd_err *e);
/* Per pass (bwd false: forward, true: backward): the fastest option, and the
 * option with the least workspace for that pass. */
int vdp_fastest_pass(const vd_profile_layer *pl, bool bwd);
int vdp_minws_pass(const vd_profile_layer *pl, bool bwd);
/* The options opts asks for, algos[2L] = [forward L | backward L]: opts->algos,
 * else fixed_algo, else the fastest (fwd + bwd); backward: opts->algos_bwd,
 * else the forward option. */
void vdp_opts_algos(const vd_profile *prof, const vd_plan_opts *opts, int L, int *algos);

/* The work after which the auto search starts no more kicks without repair
 * (twice it: with repair; see search_work_limit), in vdp_build_screened's
 * cost units (docs/planner.md: about half a second of one core). */
#define AUTO_WORK_BUDGET 3e7

/* The effort (vdp_build_screened's *effort, summed over the search) after
 * which the auto search stops refining, trading and kicking and starts no
 * later start: a whole search in a second or two of one core at every net
 * and budget measured (docs/planner.md; README, "Planning time"). Like the
 * work budget, a count, never a clock: the same inputs, the same plan. */
#define AUTO_EFFORT_CAP 8e7

/* vdp_build_auto's modes: the whole search; feasibility only (stop at the
 * first plan that fits: the result fits iff the whole search's would); the
 * same where the caller keeps only whether it fits, not the plan (the
 * paper's dyn among the fallbacks is then built without its greedy over the
 * options: vdp_fits_policy). */
enum { VDP_SEARCH = 0, VDP_FEASIBLE = 1, VDP_ANSWER = 2 };

/* auto.c: the auto policy's search (opts->policy == AUTO, inputs checked)
 * in mode feasibility_only (VDP_*; true is VDP_FEASIBLE). Returns like
 * vdp_build_fixed. */
int vdp_build_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                   int feasibility_only, vd_plan *out, vd_err *e);
/* The whole search (VDP_SEARCH) on `share` of the effort cap (0 < share
 * <= 1): a quicker look, as plan.c's coarser split takes. */
int vdp_build_auto_share(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                         double share, vd_plan *out, vd_err *e);
/* Smallest budget for which vdp_build_auto fits (binary search bounded by its
 * fallback candidates, to 256 bytes, or to a mebibyte on budgets over 4 MiB). */
int vdp_min_budget_auto(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        uint64_t *min_budget, vd_err *e);
/* The same where only a budget below beat is wanted: beat itself when the
 * search does not fit one resolution step below it (one probe). */
int vdp_min_budget_auto_below(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                              uint64_t beat, uint64_t *min_budget, vd_err *e);
/* The same given dyn_min, dyn's smallest budget under opts (policy DYN),
 * which its upper bound starts from when the algorithms are free. */
int vdp_min_budget_auto_from(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                             uint64_t dyn_min, uint64_t *min_budget, vd_err *e);

#endif
