/* sim.c — replay a plan's actions on three streams (compute, D2H, H2D).
 *
 * Each stream runs its work in issue order; an event's time is the time its
 * stream reached the record. The host never blocks inside an iteration, so
 * issue order is the action order. Copy time = launch + bytes / bandwidth;
 * while a copy in the other direction is in flight both run at both_bw / 2
 * (when that is slower than the one-way bandwidth). Only the other stream's
 * most recent copy is considered: an approximation, documented in
 * vdnn-plan(1). A RECOMPUTE runs on the compute stream for its layer's
 * forward time (the plan's algorithm).
 *
 * Input staging (p->t_stage >= 0): the steady state, an iteration whose
 * batch the previous one staged. x's load at step 0 (its PREFETCH and
 * WAIT_PREFETCH) does not happen; LOAD_STAGED takes a device-to-device copy's
 * time on the compute stream (launch + 2 bytes / mem_bw: read and write); the
 * staging copy is an H2D copy like a prefetch, issued at stage_step. The next
 * iteration's LOAD_STAGED waits for it: when it ends after everything else,
 * the iteration ends there (iter_s covers the H2D stream). */
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"

typedef struct last_copy { double start, end; } last_copy;

static double copy_time(double start, uint64_t bytes, double bw_alone, double both_bw,
                        const last_copy *other) {
    double shared = both_bw > 0 ? both_bw / 2.0 : bw_alone;
    if (shared > bw_alone) shared = bw_alone;
    double b = (double)bytes;
    double t = start;
    /* phase 1: alone until the other copy starts */
    if (other->end > t && other->start > t) {
        double moved = (other->start - t) * bw_alone;
        if (moved >= b) return b / bw_alone;
        b -= moved;
        t = other->start;
    }
    /* phase 2: shared until the other copy ends */
    if (other->end > t) {
        double moved = (other->end - t) * shared;
        if (moved >= b) return (t - start) + b / shared;
        b -= moved;
        t = other->end;
    }
    return (t - start) + b / bw_alone;
}

static int push_span(vd_copy_span **spans, int *n, int *cap, int stream, int tensor,
                     uint64_t bytes, double s, double t, vd_err *e) {
    if (!spans) return VD_OK;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        vd_copy_span *ns = vd_realloc(*spans, (size_t)nc * sizeof *ns, e);
        if (!ns) return VD_ENOMEM;
        *spans = ns;
        *cap = nc;
    }
    (*spans)[*n].stream = stream;
    (*spans)[*n].tensor = tensor;
    (*spans)[*n].bytes = bytes;
    (*spans)[*n].t_start = s;
    (*spans)[*n].t_end = t;
    (*n)++;
    return VD_OK;
}

int vdp_simulate(vd_plan *p, const vd_profile *prof, bool ignore_waits, double *d2h_done,
                 vd_copy_span **copies, int *n_copies, vd_err *e) {
    const vd_device_params *dev = &prof->dev;
    double *ev = calloc((size_t)(p->n_events > 0 ? p->n_events : 1), sizeof *ev);
    if (!ev) return vd_errf(e, VD_ENOMEM, "out of memory in the simulator");
    if (copies) *copies = NULL;
    int ncp = 0, capcp = 0;
    double c = 0, d = 0, h = 0;
    last_copy lastd = {0, 0}, lasth = {0, 0};
    double busy[3] = {0, 0, 0};
    double stall_total = 0, compute_total = 0, stage_load = 0;
    int rc = VD_OK;
    /* x's step-0 interval: replaced by the staged batch in the steady state */
    int x_iv = p->t_stage >= 0 && p->t_x >= 0 ? p->tensors[p->t_x].iv[0] : -1;
    if (d2h_done)
        for (int t = 0; t < p->n_tensors; t++) d2h_done[t] = 0;
    for (int s = 0; s <= p->n_steps; s++) {
        vd_step *st = &p->steps[s];
        double stall = 0;
        st->t_start = st->t_end = c;
        st->t_rc_start = -1;
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
            const vd_action *A = &p->actions[a];
            switch (A->kind) {
            case VD_A_WAIT_OFFLOAD: {
                const vd_tensor *T = &p->tensors[A->arg];
                if (!ignore_waits && T->ev_d2h >= 0 && ev[T->ev_d2h] > c) {
                    stall += ev[T->ev_d2h] - c;
                    c = ev[T->ev_d2h];
                }
                break;
            }
            case VD_A_FREE: case VD_A_ALLOC:
                break;
            case VD_A_RECORD_FREE:
                ev[A->arg] = c;
                break;
            case VD_A_PREFETCH: {
                const vd_interval *iv = &p->intervals[A->arg];
                const vd_tensor *T = &p->tensors[iv->tensor];
                if (A->arg == x_iv) {
                    p->intervals[A->arg].t_h2d_start = p->intervals[A->arg].t_h2d_end = 0;
                    break;
                }
                double start = h;
                if (st->ev_free >= 0 && ev[st->ev_free] > start) start = ev[st->ev_free];
                if (T->ev_d2h >= 0 && ev[T->ev_d2h] > start) start = ev[T->ev_d2h];
                double dur = dev->launch_s + copy_time(start, T->bytes, dev->h2d_bw, dev->both_bw, &lastd);
                h = start + dur;
                lasth.start = start; lasth.end = h;
                busy[2] += dur;
                if (iv->ev_h2d >= 0) ev[iv->ev_h2d] = h;
                p->intervals[A->arg].t_h2d_start = start;
                p->intervals[A->arg].t_h2d_end = h;
                rc = push_span(copies, &ncp, &capcp, 2, iv->tensor, T->bytes, start, h, e);
                if (rc) goto out;
                break;
            }
            case VD_A_WAIT_PREFETCH: {
                const vd_interval *iv = &p->intervals[A->arg];
                if (A->arg == x_iv) break;
                if (!ignore_waits && iv->ev_h2d >= 0 && ev[iv->ev_h2d] > c) {
                    stall += ev[iv->ev_h2d] - c;
                    c = ev[iv->ev_h2d];
                }
                break;
            }
            case VD_A_RECOMPUTE: {
                const vd_plan_layer *pl = &p->layers[A->arg];
                double dur = prof->layers[A->arg].algos[pl->algo].fwd_s;
                if (st->t_rc_start < 0) st->t_rc_start = c;
                c += dur;
                busy[0] += dur;
                compute_total += dur;
                break;
            }
            case VD_A_LOAD_STAGED: {
                const vd_interval *iv = &p->intervals[A->arg];
                double dur = dev->launch_s + 2.0 * (double)p->tensors[iv->tensor].bytes / dev->mem_bw;
                c += dur;
                busy[0] += dur;
                compute_total += dur;
                stage_load += dur;
                break;
            }
            case VD_A_COMPUTE:
                if (st->t_rc_start < 0) st->t_rc_start = c;
                st->t_start = c;
                c += st->compute_s;
                st->t_end = c;
                busy[0] += st->compute_s;
                compute_total += st->compute_s;
                break;
            case VD_A_OFFLOAD: {
                const vd_tensor *T = &p->tensors[A->arg];
                if (T->ev_compute >= 0) ev[T->ev_compute] = c;
                double start = d > c ? d : c;
                double dur = dev->launch_s + copy_time(start, T->bytes, dev->d2h_bw, dev->both_bw, &lasth);
                d = start + dur;
                lastd.start = start; lastd.end = d;
                busy[1] += dur;
                if (T->ev_d2h >= 0) ev[T->ev_d2h] = d;
                if (d2h_done) d2h_done[A->arg] = d;
                p->tensors[A->arg].t_d2h_start = start;
                p->tensors[A->arg].t_d2h_end = d;
                rc = push_span(copies, &ncp, &capcp, 1, A->arg, T->bytes, start, d, e);
                if (rc) goto out;
                break;
            }
            }
        }
        if (s == p->n_steps) { st->t_start = st->t_end = c; }
        if (st->t_rc_start < 0) st->t_rc_start = st->t_start;
        st->stall_s = stall;
        stall_total += stall;
    }
    /* Loss readback: D2H waits on the end-of-compute event. */
    {
        double start = d > c ? d : c;
        double end = start + dev->launch_s + 4.0 / dev->d2h_bw;
        if (p->ev_end >= 0) ev[p->ev_end] = c;
        if (p->ev_loss >= 0) ev[p->ev_loss] = end;
        double it = end;
        if (h > it) it = h;
        p->sim.iter_s = it;
    }
    p->sim.compute_s = compute_total;
    p->sim.busy_s[0] = busy[0];
    p->sim.busy_s[1] = busy[1];
    p->sim.busy_s[2] = busy[2];
    p->sim.stall_s = stall_total;
    p->sim.stage_load_s = stage_load;
out:
    free(ev);
    if (rc) {
        if (copies) { free(*copies); *copies = NULL; }
        return rc;
    }
    if (n_copies) *n_copies = ncp;
    return VD_OK;
}

int vd_plan_simulate(vd_plan *p, const vd_profile *prof, vd_copy_span **copies,
                     int *n_copies, vd_err *e) {
    return vdp_simulate(p, prof, false, NULL, copies, n_copies, e);
}
