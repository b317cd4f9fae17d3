/* disp.c — per feature map dispositions of a build: which tensors are
 * offloaded (policy and per-tensor requests) and which are recomputed. */
#include "plan/builder.h"

/* Is tensor t a candidate for offloading under policy pol? */
/* conv_in: [n_tensors] nonzero for the inputs of a convolution (read under
 * policy conv only; NULL: a scan of the layers). */
static bool offload_candidate(const bld *b, int t, vd_policy pol, const int *conv_in) {
    const vd_plan *p = b->p;
    const vd_tensor *T = &p->tensors[t];
    if (pol == VD_POLICY_NONE || pol == VD_POLICY_AUTO || p->forward_only) return false;
    if (T->kind != VD_T_ACT && T->kind != VD_T_INPUT) return false;
    if (T->bwd_first < 0 || T->fwd_last < 0) return false;
    /* It must be absent for at least one step with a prefetch issued after
     * it: gap >= 2 free steps between last forward use and first backward use. */
    if (T->bwd_first - T->fwd_last - 1 < 2) return false;
    /* conv: an input of a convolution */
    if (pol == VD_POLICY_CONV && conv_in) return conv_in[t] != 0;
    if (pol == VD_POLICY_CONV) {
        for (int i = 0; i < b->L; i++) {
            if (vdp_ul(b, i)->op != VD_OP_CONV) continue;
            for (int k = 0; k < vdp_ul(b, i)->n_in; k++)
                if (p->layers[i].in_t[k] == t) return true;
        }
        return false;
    }
    return true;
}

/* The requested disposition of tensor t (AUTO when none was given). */
static vd_disp disp_of(const bld *b, int t) {
    const vd_tensor *T = &b->p->tensors[t];
    if (!b->disp) return VD_DISP_AUTO;
    if (T->kind == VD_T_INPUT) return b->disp[0];
    if (T->kind == VD_T_ACT) return b->disp[T->layer + 1];
    return VD_DISP_AUTO;
}

/* Offload t? An explicit OFFLOAD needs only the gap; so does a RECOMPUTE
 * that could not be honoured (its fallback); KEEP never offloads. */
static bool want_offload(const bld *b, int t, vd_policy pol, const int *conv_in) {
    vd_disp d = disp_of(b, t);
    if (b->p->tensors[t].recompute || d == VD_DISP_KEEP) return false;
    if (d == VD_DISP_OFFLOAD || d == VD_DISP_RECOMPUTE)
        return offload_candidate(b, t, VD_POLICY_ALL, conv_in);
    return offload_candidate(b, t, pol, conv_in);
}

/* Can feature map t be recomputed? It must be a layer output read in
 * backward, absent for at least one step in between, and written only by
 * recomputable forward ops (vd_op_info; batch norm re-runs with the
 * statistics its forward saved, which stay on the device until its
 * backward, after every reader of its output), its producer and the
 * in-place layers after it (not a run's whole output, which each chunk
 * writes a slice of). */
static bool recompute_ok(const bld *b, int t, const int *wnext) {
    const vd_plan *p = b->p;
    const vd_tensor *T = &p->tensors[t];
    if (p->forward_only || T->kind != VD_T_ACT || T->layer < 0) return false;
    if (T->bwd_first < 0 || T->fwd_last < 0) return false;
    if (T->bwd_first - T->fwd_last - 1 < 1) return false;
    for (int j = T->unit; j >= 0; j = wnext[j]) {
        vd_op op = vdp_ul(b, j)->op;
        if (!vd_op_table[op].recomputable) return false;
        if (j != T->unit && !p->layers[j].inplace) return false;
    }
    return true;
}

/* Recompute decisions from b->disp, producers from the last layer down: a
 * recompute at step r reads its producer's inputs at r, which can move their
 * own first backward use (and so their recompute step) earlier. The writers
 * (producer, then the in-place layers that overwrite the tensor) get rc_step
 * and, when they need workspace, a one-step WS tensor at r; each re-run
 * reads its saved state (batch norm's statistics) at r too: a layer whose
 * backward does not run (no_grad, --freeze) would not keep it that long. */
void vdp_decide_recompute(bld *b) {
    vd_plan *p = b->p;
    if (p->forward_only || !b->disp) return;
    /* The writers of each layer's output, in layer order: wnext[j] the next
     * layer above j with the same output tensor (-1 none), from whead[t]
     * (build_actions' scratch, unused until then: [6 * (n_steps + 1)] >=
     * n_tensors, [5 * cap] >= L). A scan of every layer above for each
     * recomputed one was a twentieth of an auto search. */
    int *whead = b->bucket_head, *wnext = b->bucket_next;
    for (int t = 0; t < p->n_tensors; t++) whead[t] = -1;
    for (int j = b->L - 1; j >= 0; j--) {
        int y = p->layers[j].y;
        wnext[j] = y >= 0 ? whead[y] : -1;
        if (y >= 0) whead[y] = j;
    }
    for (int i = b->L - 1; i >= 0; i--) {
        vd_plan_layer *pl = &p->layers[i];
        if (pl->inplace || b->disp[pl->layer + 1] != VD_DISP_RECOMPUTE) continue;
        int t = pl->y;
        /* (unit i writes t first: t's writers are i and the chain above it) */
        if (p->tensors[t].unit != i || !recompute_ok(b, t, wnext)) continue;
        int r = p->tensors[t].bwd_first;
        p->tensors[t].recompute = true;
        p->tensors[t].recompute_step = r;
        p->tensors[t].recompute_s = 0;
        for (int j = i; j >= 0; j = wnext[j]) {
            vd_plan_layer *wl = &p->layers[j];
            wl->rc_step = r;
            p->tensors[t].recompute_s += wl->rc_s;
            if (wl->ws_fwd_bytes) {
                wl->ws_rc = vdp_add_tensor(b, VD_T_WS, j, wl->ws_fwd_bytes, vdp_ul(b, j)->name,
                                           ":ws_rc");
                vdp_touch(b, wl->ws_rc, r);
                p->tensors[wl->ws_rc].prod_step = r;
            }
            vdp_rd(b, wl->aux, r);
            /* an add that applies a batch norm re-runs with its statistics */
            if (wl->bn_unit >= 0) vdp_rd(b, p->layers[wl->bn_unit].aux, r);
            if (j == i)
                for (int k = 0; k < vdp_ul(b, i)->n_in; k++) vdp_rd(b, wl->in_t[k], r);
        }
    }
}

/* A forward-only plan's offloads: each feature map (an activation or x)
 * whose forward touches after its last write leave a gap of at least two
 * steps (absent for one step at least, with a prefetch issued after its
 * release, as training's offload_candidate asks) may be offloaded across
 * the widest such gap (the earliest of equal ones): its rd_before /
 * rd_after name the two reads whatever offload_pol. Under offload_pol ALL
 * every such map is: copied D2H after that write (x: none, the host holds
 * it), released after the read before the gap, prefetched for the read
 * after it; under any other, none is. One pass over the units' reads in
 * step order, in vdp_fit_memory's scratch (free until then: [5 * cap_t]). */
static bool decide_offload_fwd(bld *b, vd_policy offload_pol) {
    vd_plan *p = b->p;
    int *last = b->fit_steps, *lo = last + b->cap_t, *hi = lo + b->cap_t;
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        last[t] = b->fwd_write[t] >= 0 ? b->fwd_write[t] : T->prod_step;
        lo[t] = hi[t] = -1;
    }
    for (int s = 0; s < b->L; s++) {
        const vd_plan_layer *pl = &p->layers[s];
        for (int k = 0; k < vdp_ul(b, s)->n_in; k++) {
            int t = pl->in_t[k];
            if (t < 0 || s <= last[t]) continue;   /* (a read at or before the last write) */
            if (s - last[t] - 1 >= 2 && (hi[t] < 0 || s - last[t] > hi[t] - lo[t])) {
                lo[t] = last[t];
                hi[t] = s;
            }
            last[t] = s;
        }
    }
    bool any = false;
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        if (hi[t] < 0 || (T->kind != VD_T_ACT && T->kind != VD_T_INPUT)) continue;
        T->rd_before = lo[t];
        T->rd_after = hi[t];
        if (offload_pol != VD_POLICY_ALL) continue;
        T->offload = true;
        T->host_src = T->kind == VD_T_INPUT;
        T->offload_step = b->fwd_write[t] >= 0 ? b->fwd_write[t] : T->prod_step;
        T->release_step = lo[t] + 1;
        T->prefetch_step = hi[t];
        any = true;
    }
    return any;
}

bool vdp_decide_offload(bld *b, vd_policy offload_pol) {
    vd_plan *p = b->p;
    if (p->forward_only) return decide_offload_fwd(b, offload_pol);
    bool any = false;
    /* The convolutions' inputs, marked in one pass over the layers (a pass
     * per tensor was quadratic in depth), in build_actions' scratch
     * (vdp_decide_recompute is done with it: [6 * (n_steps + 1)], which
     * holds every plan's tensors; else the scan). */
    int *conv_in = p->n_tensors <= 6 * (p->n_steps + 1) ? b->bucket_head : NULL;
    if (offload_pol == VD_POLICY_CONV && conv_in) {
        for (int t = 0; t < p->n_tensors; t++) conv_in[t] = 0;
        for (int i = 0; i < b->L; i++)
            if (vdp_ul(b, i)->op == VD_OP_CONV)
                for (int k = 0; k < vdp_ul(b, i)->n_in; k++)
                    if (p->layers[i].in_t[k] >= 0) conv_in[p->layers[i].in_t[k]] = 1;
    }
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        if (!want_offload(b, t, offload_pol, conv_in)) continue;
        T->offload = true;
        T->host_src = T->kind == VD_T_INPUT;
        T->offload_step = b->fwd_write[t] >= 0 ? b->fwd_write[t] : T->prod_step;
        T->rd_before = T->fwd_last;
        T->rd_after = T->bwd_first;
        T->release_step = T->fwd_last + 1;
        T->prefetch_step = T->bwd_first;
        any = true;
    }
    return any;
}
