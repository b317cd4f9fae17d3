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
 * docs/results/2026-12-06-s21/bound-gap.md).
 * The first exchange of each recomputed map that fits and
 * predicts a faster iteration is kept; one pass. */
enum { AUTO_EXCHANGE_REACH = 4 };

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
        for (int b = b0; b <= b1 && !spent(c); b++) {
            if (b == a || c->fixed[b] || c->disp[b] != VD_DISP_OFFLOAD || !c->can_rc[b]) continue;
            int tb = tensor_of(c, P, b);
            if (tb < 0) continue;
            double sb = (double)P->tensors[tb].bytes;
            if (!about_size(sa, sb)) continue;
            c->disp[a] = VD_DISP_OFFLOAD;
            c->disp[b] = VD_DISP_RECOMPUTE;
            vd_plan Q;
            vd_err te = {0};
            bool better;
            int rc = search_eval_beats(c, P->sim.iter_s, &Q, &better, &te);
            if (rc || !better) {
                c->disp[a] = VD_DISP_RECOMPUTE;
                c->disp[b] = VD_DISP_OFFLOAD;
                if (rc) { *e = te; return rc; }
                continue;
            }
            vdp_plan_release(P);
            *P = Q;
            break;
        }
    }
    return VD_OK;
}
