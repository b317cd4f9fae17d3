/* search_exchange.c — the auto search's exchanges (search_exchanges). */
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

/* Key b's map's bytes when it is offloaded and may be recomputed, else 0. */
static double offloaded_bytes(const actx *c, const vd_plan *P, int b) {
    if (c->fixed[b] || c->disp[b] != VD_DISP_OFFLOAD || !c->can_rc[b]) return 0;
    int tb = tensor_of(c, P, b);
    return tb < 0 ? 0 : (double)P->tensors[tb].bytes;
}

/* Key a recomputed -> offloaded, keys b and b2 (-1: none) offloaded ->
 * recomputed: *kept when that predicts faster (P replaced), else the
 * dispositions as they were. */
static int exchange(actx *c, vd_plan *P, int a, int b, int b2, bool *kept, vd_err *e) {
    c->disp[a] = VD_DISP_OFFLOAD;
    c->disp[b] = VD_DISP_RECOMPUTE;
    if (b2 >= 0) c->disp[b2] = VD_DISP_RECOMPUTE;
    vd_plan Q;
    vd_err te = {0};
    int rc = search_eval_beats(c, P->sim.iter_s, &Q, kept, &te);
    if (rc || !*kept) {
        c->disp[a] = VD_DISP_RECOMPUTE;
        c->disp[b] = VD_DISP_OFFLOAD;
        if (b2 >= 0) c->disp[b2] = VD_DISP_OFFLOAD;
        *kept = false;
        if (rc) *e = te;
        return rc;
    }
    vdp_plan_release(P);
    *P = Q;
    return VD_OK;
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
