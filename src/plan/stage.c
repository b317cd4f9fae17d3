/* stage.c — input staging: the next batch's H2D copy late in the backward
 * pass into a region of its own (plan.h, "Input staging"). */
#include <stdlib.h>
#include <string.h>
#include "plan/builder.h"

typedef struct span { uint64_t o, e; int first, last; } span;

static inline bool span_before(const span *x, const span *y) { return x->o < y->o; }
VDP_SORT_FN(sort_by_offset, span, span_before)

/* The first n intervals of p as spans sorted by offset (sp: [2n], the second
 * half scratch), once per plan: stage_offset filters them in that order
 * (which spans of equal offset come first does not change what it finds). */
static void sort_spans(const vd_plan *p, int n, span *sp) {
    for (int k = 0; k < n; k++) {
        const vd_interval *iv = &p->intervals[k];
        sp[k] = (span){iv->offset, iv->offset + iv->bytes, iv->first, iv->last};
    }
    sort_by_offset(sp, sp + n, n);
}

/* Lowest 256-aligned offset for a region of `bytes` that overlaps none of the
 * n spans sp (sort_spans: the plan's intervals by offset) live at a step of
 * [q, n_steps - 1] or at step 0 (the staging region holds the next batch from
 * its copy at q until the next iteration's step 0 has read it); UINT64_MAX
 * when it would end above limit. */
static uint64_t stage_offset(int n, int q, uint64_t bytes, uint64_t limit, const span *sp) {
    uint64_t cand = 0;
    for (int k = 0; k < n; k++) {
        if (!(sp[k].last >= q || sp[k].first <= 0)) continue;
        if (cand + bytes <= sp[k].o) break;
        if (sp[k].e > cand) cand = sp[k].e;
    }
    return cand + bytes <= limit ? cand : UINT64_MAX;
}

/* Put the staging intervals of tensor t at issue step q (offset off; they are
 * the plan's last two intervals, after the first n0), rebuild the actions and
 * simulate. */
static int stage_try(bld *b, int t, int n0, int q, uint64_t off, vd_err *e) {
    vd_plan *p = b->p;
    vd_tensor *T = &p->tensors[t];
    p->n_intervals = n0;
    T->n_iv = 0;
    T->iv[0] = T->iv[1] = -1;
    int ka = vdp_add_interval(b, t, 0, 0, VD_FILL_NONE, 0);
    int kb = vdp_add_interval(b, t, q, p->n_steps - 1, VD_FILL_STAGE, p->n_steps);
    p->intervals[ka].offset = p->intervals[kb].offset = off;
    T->prod_step = q;
    p->stage_step = q;
    vdp_build_actions(b);
    vdp_cost(b, p->n_actions);
    return vdp_simulate(p, b->prof, false, NULL, e);
}

/* What stage_time needs besides the issue step. */
typedef struct stage_ctx {
    bld *b;
    int t, n0;
    uint64_t bytes, limit;
    span *sp;
    int last_q;         /* the issue step the plan holds (-1: none yet) */
    double last_s;      /* its predicted iteration */
} stage_ctx;

/* Predicted iteration with the staging copy issued at step q. */
static int stage_time(stage_ctx *sc, int q, double *iter_s, vd_err *e) {
    const vd_plan *p = sc->b->p;
    if (q == sc->last_q) {   /* the plan is that one already (a build is a pure function of q) */
        *iter_s = sc->last_s;
        return VD_OK;
    }
    uint64_t off = stage_offset(sc->n0, q, sc->bytes, sc->limit, sc->sp);
    sc->last_q = -1;
    int rc = stage_try(sc->b, sc->t, sc->n0, q, off, e);
    if (!rc) { *iter_s = p->sim.iter_s; sc->last_q = q; sc->last_s = *iter_s; }
    return rc;
}

/* The latest issue step in [lo, hi] whose predicted iteration is at most
 * target (binary search: the time only grows with the step there; lo is
 * taken as within it). */
static int stage_latest(stage_ctx *sc, int lo, int hi, double target, int *q, vd_err *e) {
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        double t;
        int rc = stage_time(sc, mid, &t, e);
        if (rc) return rc;
        if (t <= target) lo = mid;
        else hi = mid - 1;
    }
    *q = lo;
    return VD_OK;
}

/* Input staging for a feasible training plan that is otherwise complete
 * (placed, actions built, simulated): the tensor "x:next" and its copy at
 * the step that costs least. Nothing else moves. The region must fit below
 * limit at the issue step q (which holds from some q_fit on: a later q
 * conflicts with fewer intervals). Preferably q is no earlier than the last
 * backward prefetch (the H2D stream serves copies in issue order: an earlier
 * copy delays it), the latest such step whose copy still ends when the
 * iteration does (the predicted time only grows with q from there); when
 * even the earliest of those is slower than issuing at q_fit, the latest
 * step before them as fast as q_fit (binary searches on the simulator).
 * Kept only if the iteration gets faster; p->stage says what happened. */
int vdp_add_staging(bld *b, uint64_t limit, vd_err *e) {
    vd_plan *p = b->p;
    int L = b->L, last = p->n_steps - 1, n0 = p->n_intervals;
    const vd_tensor *X = &p->tensors[p->t_x];
    uint64_t bytes = vdp_iv_size(X->bytes);
    span *sp = vd_malloc(2 * (size_t)(n0 > 0 ? n0 : 1) * sizeof *sp, NULL);
    if (!sp) return vd_errf(e, VD_ENOMEM, "out of memory planning the input staging");
    int rc = VD_OK;
    sort_spans(p, n0, sp);
    if (stage_offset(n0, last, bytes, limit, sp) == UINT64_MAX) {
        p->stage = VD_STAGE_NO_ROOM;
        goto out;
    }
    int q_fit = L;
    if (stage_offset(n0, L, bytes, limit, sp) == UINT64_MAX) {
        int lo = L, hi = last;                 /* !fits(lo), fits(hi) */
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if (stage_offset(n0, mid, bytes, limit, sp) == UINT64_MAX) lo = mid;
            else hi = mid;
        }
        q_fit = hi;
    }
    int q_pf = -1;
    for (int k = 0; k < n0; k++)
        if (p->intervals[k].fill != VD_FILL_NONE && p->intervals[k].first >= L &&
            p->intervals[k].first > q_pf)
            q_pf = p->intervals[k].first;
    int q_lo = q_fit > q_pf ? q_fit : q_pf;
    double base = p->sim.iter_s;
    int t = vdp_add_tensor(b, VD_T_INPUT, -1, X->bytes, "x", ":next");
    p->t_stage = t;
    stage_ctx sc = {b, t, n0, bytes, limit, sp, -1, 0.0};
    double t_lo, t_mid;
    int best_q = q_lo;
    /* b->stage_quick (the auto search's builds): the first step of each
     * binary search, not the latest as fast; the search then predicts the
     * time it would with the latest (within the searches' 1e-9) at one or
     * two replays instead of 6 to 16 (on ResNet-152 the staging search was
     * a fifth to a quarter of the search's refine: docs/results/
     * 2026-12-06-s18/search2.md); the plan it returns is rebuilt with the
     * step searched (search_restage) */
    if ((rc = stage_time(&sc, q_lo, &t_lo, e)) ||
        (!b->stage_quick &&
         (rc = stage_latest(&sc, q_lo, last, t_lo + 1e-12 + 1e-9 * t_lo, &best_q, e))))
        goto out;
    if (q_fit < q_lo) {
        /* ahead of the last prefetches (it queues before them): better only
         * when the copy issued after them cannot end in time; then the latest
         * such step that is as fast as the earliest */
        double t_fit;
        if ((rc = stage_time(&sc, q_fit, &t_fit, e))) goto out;
        if (t_fit < t_lo - 1e-12 - 1e-9 * t_lo) {
            best_q = q_fit;
            if (!b->stage_quick &&
                (rc = stage_latest(&sc, q_fit, q_lo - 1, t_fit + 1e-12 + 1e-9 * t_fit, &best_q, e)))
                goto out;
        }
    }
    p->stage_quick = b->stage_quick;
    if ((rc = stage_time(&sc, best_q, &t_mid, e))) goto out;
    if (t_mid < base) {
        p->stage = VD_STAGE_ON;
    } else {
        /* no faster: the plan as it was */
        p->n_tensors--;
        p->n_intervals = n0;
        p->t_stage = p->stage_step = -1;
        vdp_build_actions(b);
        vdp_cost(b, p->n_actions);
        rc = vdp_simulate(p, b->prof, false, NULL, e);
        p->stage = VD_STAGE_NO_GAIN;
    }
out:
    vd_free(sp);
    return rc;
}
