/* search_exchange.c — the auto search's exchanges (search_exchanges) and its
 * runs of offloaded maps recomputed together (search_recompute_runs). */
#include "plan/search.h"

/* Exchanges: a recomputed map offloaded and an offloaded map of about its
 * size near it (within AUTO_EXCHANGE_REACH disposition keys) recomputed
 * instead, in one move: about the same bytes leave the device, the copies
 * and the recompute move to the other map. Refine changes one decision at a
 * time and cannot get there (offloading the first alone only adds copies,
 * recomputing the second alone only a recompute); the shifts exchange
 * offloads with keeps, the swaps recomputes with keeps. "About its size":
 * about_size, as the shifts (two neighbouring convolutions' outputs, say:
 * docs/results/2026-12-06-s21/bound-gap.md). Where no single map's
 * exchange is kept, two offloaded maps near it, each under 0.75 its size
 * (a larger one is tried alone), of about its size together (VGG-16's
 * features.4 and features.5 for features.2: 112x112 maps of 64 and 128
 * channels for a 224x224 map of 64; docs/results/2026-12-06-s22/bound-gap.md).
 * The first exchange of each recomputed map that fits and predicts a
 * faster iteration is kept; one pass. */
enum { AUTO_EXCHANGE_REACH = 4 };
/* The most maps in a run (search_recompute_runs): the most keys a move of
 * this file sets (an exchange sets three at most). */
enum { AUTO_RUN_MAX = 6 };

/* Key b's map's bytes when it is offloaded and may be recomputed, else 0. */
static double offloaded_bytes(const actx *c, const vd_plan *P, int b) {
    if (c->fixed[b] || c->disp[b] != VD_DISP_OFFLOAD || !c->can_rc[b]) return 0;
    int tb = tensor_of(c, P, b);
    return tb < 0 ? 0 : (double)P->tensors[tb].bytes;
}

/* Keys keys[n] set to the dispositions to[n] at once: *kept when that
 * fits and predicts faster than P (P replaced), else the dispositions as
 * they were. */
static int try_disps(actx *c, vd_plan *P, const int *keys, const vd_disp *to, int n, bool *kept,
                     vd_err *e) {
    vd_disp was[AUTO_RUN_MAX];
    for (int k = 0; k < n; k++) {
        was[k] = c->disp[keys[k]];
        c->disp[keys[k]] = to[k];
    }
    vd_plan Q;
    vd_err te = {0};
    int rc = search_eval_beats(c, P->sim.iter_s, &Q, kept, &te);
    if (rc || !*kept) {
        for (int k = 0; k < n; k++) c->disp[keys[k]] = was[k];
        *kept = false;
        if (rc) *e = te;
        return rc;
    }
    vdp_plan_release(P);
    *P = Q;
    return VD_OK;
}

/* Key a recomputed -> offloaded, keys b and b2 (-1: none) offloaded ->
 * recomputed (try_disps). */
static int exchange(actx *c, vd_plan *P, int a, int b, int b2, bool *kept, vd_err *e) {
    int keys[3] = {a, b, b2};
    vd_disp to[3] = {VD_DISP_OFFLOAD, VD_DISP_RECOMPUTE, VD_DISP_RECOMPUTE};
    return try_disps(c, P, keys, to, b2 >= 0 ? 3 : 2, kept, e);
}

int search_exchanges(actx *c, vd_plan *P, vd_err *e) {
    int L = c->L;
    for (int a = 0; a <= L && !at_bound(c, P) && !spent(c); a++) {
        if (c->fixed[a] || c->disp[a] != VD_DISP_RECOMPUTE) continue;
        int ta = tensor_of(c, P, a);
        if (ta < 0) continue;
        const vd_tensor *A = &P->tensors[ta];
        if (A->bwd_first < 0 || A->fwd_last < 0 || A->bwd_first - A->fwd_last - 1 < 2) continue;
        double sa = (double)A->bytes;
        int b0 = a > AUTO_EXCHANGE_REACH ? a - AUTO_EXCHANGE_REACH : 0;
        int b1 = a + AUTO_EXCHANGE_REACH < L ? a + AUTO_EXCHANGE_REACH : L;
        bool kept = false;
        for (int b = b0; b <= b1 && !kept && !spent(c); b++) {
            double sb = b == a ? 0 : offloaded_bytes(c, P, b);
            if (sb > 0 && about_size(sa, sb)) {
                int rc = exchange(c, P, a, b, -1, &kept, e);
                if (rc) return rc;
            }
        }
        for (int b = b0; b <= b1 && !kept && !spent(c); b++) {
            double sb = b == a ? 0 : offloaded_bytes(c, P, b);
            if (sb <= 0 || sb >= 0.75 * sa) continue;   /* a pair's maps: each under 0.75 its size */
            for (int b2 = b + 1; b2 <= b1 && !kept && !spent(c); b2++) {
                double sb2 = b2 == a ? 0 : offloaded_bytes(c, P, b2);
                if (sb2 <= 0 || sb2 >= 0.75 * sa || !about_size(sa, sb + sb2)) continue;
                int rc = exchange(c, P, a, b, b2, &kept, e);
                if (rc) return rc;
            }
        }
    }
    return VD_OK;
}

/* Runs: consecutive offloaded maps (a key without a map of its own, an
 * in-place layer's, skipped), AUTO_RUN_MAX at most, recomputed together.
 * Where the copies stall the compute, fewer copies gain, but one map alone
 * recomputed may not fit or gain where its recompute reads the map before
 * it, offloaded too: a run of them, an inception branch, does (GoogLeNet
 * at its floor: docs/results/2026-12-06-s22/bound-gap.md). From each key the shortest
 * run of two maps or more that fits and predicts a faster iteration is
 * kept; one pass, c set to P's configuration first and ending with the
 * final plan's. */
int search_recompute_runs(actx *c, vd_plan *P, vd_err *e) {
    int L = c->L;
    vd_disp to[AUTO_RUN_MAX];
    for (int k = 0; k < AUTO_RUN_MAX; k++) to[k] = VD_DISP_RECOMPUTE;
    search_config_from_plan(c, P);
    for (int a = 0; a <= L && !at_bound(c, P) && !spent(c); a++) {
        if (offloaded_bytes(c, P, a) <= 0) continue;
        int keys[AUTO_RUN_MAX], n = 0;
        bool kept = false;
        for (int b = a; b <= L && n < AUTO_RUN_MAX && !kept && !spent(c); b++) {
            if (b > a && tensor_of(c, P, b) < 0) continue;
            if (offloaded_bytes(c, P, b) <= 0) break;
            keys[n++] = b;
            if (n < 2) continue;   /* one alone: refine's */
            int rc = try_disps(c, P, keys, to, n, &kept, e);
            if (rc) return rc;
        }
    }
    return VD_OK;
}
