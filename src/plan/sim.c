/* sim.c — replay a plan's actions on three streams (compute, D2H, H2D).
 *
 * Each stream runs its work in issue order; an event's time is the time its
 * stream reached the record. The host never blocks inside an iteration, so
 * issue order is the action order. Copy time = launch + bytes / bandwidth,
 * at the profile's busy rates (vd_device_busy_bw: the rate beside a busy
 * compute stream, the idle one where the profile has none): in an iteration
 * the compute stream has work queued while the copies run (it idles only in
 * a stall), and a copy beside the net's kernels is slower than alone
 * (docs/results/2026-12-06-s19/predict-offload-model.md has the H100's
 * figures). The loss readback, after the last step, runs
 * at the idle rate. While a copy in the other direction is in flight both
 * run at the busy both-ways rate / 2 (when that is slower than the one-way
 * rate). Only the other stream's most recent copy is considered: an
 * approximation, documented in vdnn-plan(1). A RECOMPUTE runs on the compute stream for its layer's
 * forward time (the plan's algorithm). Compute that copies overlap takes
 * longer: dev.compute_slow_d2h (_h2d) times the time a D2H (H2D) copy runs
 * beside it (a copy is issued before the compute it overlaps, so the replay
 * knows it when it reaches that compute; a copy issued later that still
 * starts during the compute is not counted).
 *
 * Input staging (p->t_stage >= 0): the steady state, an iteration whose
 * batch the previous one staged. x's load at step 0 (its PREFETCH and
 * WAIT_PREFETCH) does not happen; LOAD_STAGED takes a device-to-device copy's
 * time on the compute stream (launch + 2 bytes / mem_bw: read and write); the
 * staging copy is an H2D copy like a prefetch, issued at stage_step. The next
 * iteration's LOAD_STAGED waits for it: when it ends after everything else,
 * the iteration ends there (iter_s covers the H2D stream).
 *
 * A captured plan (vd_plan.captured: replayed as a CUDA graph) pays each
 * compute step's launch at the profile's graph_launch_s instead of
 * launch_s: a kernel node starts after the one before it sooner than the
 * host launches back to back. A step the profile timed with a launch (its
 * time at least launch_s; the CUDA profiler adds one to every op that
 * launched a kernel) is that much shorter; one launch per step, though a
 * split step launches one per chunk. */
#include <stdlib.h>
#include <string.h>
#include "plan/plan_internal.h"

typedef struct last_copy { double start, end; } last_copy;

/* Seconds a copy of `bytes` issued at `start` takes (launch not included):
 * at bw_alone (its direction's rate) while no copy of the other direction
 * runs, at both_bw / 2 (both directions' rate, 0 unknown; never above
 * bw_alone) while `other`, that direction's latest copy, does. */
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

/* One direction's copies in issue order ([start, end] pairs: a stream runs
 * them one after another, so both ends only grow), and the first that may
 * still overlap compute starting now (compute only moves forward). */
typedef struct copy_log {
    double *t;                  /* [2 * cap] */
    int n, cap, first;
} copy_log;

static void log_copy(copy_log *l, double start, double end) {
    if (l->n == l->cap) return;   /* sized for every copy a plan can issue */
    l->t[2 * l->n] = start;
    l->t[2 * l->n + 1] = end;
    l->n++;
}

/* The three streams' state while replaying a plan. */
typedef struct sim {
    vd_plan *p;
    const vd_device_params *dev;
    bool replayed;              /* p->captured: steps at vd_device_replayed_s */
    double *ev;                 /* [n_events] event times */
    double c, d, h;             /* when compute, D2H and H2D are next free */
    copy_log dlog, hlog;        /* each direction's copies so far */
    last_copy lastd, lasth;     /* each direction's latest copy */
    double busy[3];             /* per stream busy time */
} sim;

/* PREFETCH of interval k at step st: the H2D copy waits for the step's
 * freed regions and the tensor's offload. */
static void sim_prefetch(sim *S, const vd_step *st, int k) {
    vd_plan *p = S->p;
    const vd_device_params *dev = S->dev;
    const vd_interval *iv = &p->intervals[k];
    const vd_tensor *T = &p->tensors[iv->tensor];
    double start = S->h;
    if (st->ev_free >= 0 && S->ev[st->ev_free] > start) start = S->ev[st->ev_free];
    if (T->ev_d2h >= 0 && S->ev[T->ev_d2h] > start) start = S->ev[T->ev_d2h];
    double dur = dev->launch_s + copy_time(start, T->bytes, vd_device_busy_bw(dev, VD_COPY_H2D),
                                           vd_device_busy_bw(dev, VD_COPY_BOTH), &S->lastd);
    S->h = start + dur;
    log_copy(&S->hlog, start, S->h);
    S->lasth.start = start; S->lasth.end = S->h;
    S->busy[2] += dur;
    if (iv->ev_h2d >= 0) S->ev[iv->ev_h2d] = S->h;
    p->intervals[k].t_h2d_start = start;
    p->intervals[k].t_h2d_end = S->h;
}

/* OFFLOAD of tensor t: the D2H copy after the compute stream's work so far. */
static void sim_offload(sim *S, int t, double *d2h_done) {
    vd_plan *p = S->p;
    const vd_device_params *dev = S->dev;
    const vd_tensor *T = &p->tensors[t];
    if (T->ev_compute >= 0) S->ev[T->ev_compute] = S->c;
    double start = S->d > S->c ? S->d : S->c;
    double dur = dev->launch_s + copy_time(start, T->bytes, vd_device_busy_bw(dev, VD_COPY_D2H),
                                           vd_device_busy_bw(dev, VD_COPY_BOTH), &S->lasth);
    S->d = start + dur;
    log_copy(&S->dlog, start, S->d);
    S->lastd.start = start; S->lastd.end = S->d;
    S->busy[1] += dur;
    if (T->ev_d2h >= 0) S->ev[T->ev_d2h] = S->d;
    if (d2h_done) d2h_done[t] = S->d;
    p->tensors[t].t_d2h_start = start;
    p->tensors[t].t_d2h_end = S->d;
}

/* The length of [a0, a1] within [b0, b1]. */
static double overlap(double a0, double a1, double b0, double b1) {
    double lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

/* The time copies of l run within [c, c + base], c never below an earlier
 * call's. */
static double copies_within(copy_log *l, double c, double base) {
    while (l->first < l->n && l->t[2 * l->first + 1] <= c) l->first++;
    double sum = 0;
    for (int k = l->first; k < l->n && l->t[2 * k] < c + base; k++)
        sum += overlap(c, c + base, l->t[2 * k], l->t[2 * k + 1]);
    return sum;
}

/* Compute of `base` seconds starting now, slowed where copies overlap it. */
static double compute_time(sim *S, double base) {
    const vd_device_params *dev = S->dev;
    double t = base;
    if (dev->compute_slow_d2h > 0) t += dev->compute_slow_d2h * copies_within(&S->dlog, S->c, base);
    if (dev->compute_slow_h2d > 0) t += dev->compute_slow_h2d * copies_within(&S->hlog, S->c, base);
    return t;
}

/* A compute step's profile time t as the plan runs it. */
static double step_s(const sim *S, double t) {
    return S->replayed ? vd_device_replayed_s(S->dev, t) : t;
}

/* LOAD_STAGED's time on the compute stream: a launch and a read and a
 * write of x's bytes (see the top of this file). */
static double load_staged_s(const sim *S, uint64_t bytes) {
    return step_s(S, S->dev->launch_s + 2.0 * (double)bytes / S->dev->mem_bw);
}

/* The compute stream waits for event ev (ignore_waits: it does not);
 * returns the stall. */
static double sim_wait(sim *S, int ev, bool ignore_waits) {
    if (ignore_waits || ev < 0 || S->ev[ev] <= S->c) return 0;
    double stall = S->ev[ev] - S->c;
    S->c = S->ev[ev];
    return stall;
}

/* as_staged: replay an unstaged plan as if its input were staged (x's load
 * at step 0 a device copy, no staging copy): see vdp_simulate_as_staged. */
static int simulate(vd_plan *p, const vd_profile *prof, bool ignore_waits, double *d2h_done,
                    bool as_staged, vd_err *e) {
    const vd_device_params *dev = &prof->dev;
    sim S = {.p = p, .dev = dev, .replayed = p->captured};
    /* at most one D2H copy per tensor and one H2D fill per interval */
    bool slow = dev->compute_slow_d2h > 0 || dev->compute_slow_h2d > 0;
    if (slow) {
        S.dlog.cap = p->n_tensors;
        S.hlog.cap = p->n_intervals;
    }
    /* the event times and the copy logs: one block (vdp_carve) */
    size_t n_ev = (size_t)(p->n_events > 0 ? p->n_events : 1), at = 0;
    size_t o_ev = vdp_carve(&at, n_ev * sizeof *S.ev);
    size_t o_d = vdp_carve(&at, slow ? 2 * (size_t)(S.dlog.cap + 1) * sizeof *S.dlog.t : 0);
    size_t o_h = vdp_carve(&at, slow ? 2 * (size_t)(S.hlog.cap + 1) * sizeof *S.hlog.t : 0);
    char *blk = vd_malloc(at, NULL);
    if (!blk) return vd_errf(e, VD_ENOMEM, "out of memory in the simulator");
    S.ev = (double *)(blk + o_ev);
    memset(S.ev, 0, n_ev * sizeof *S.ev);
    if (slow) {
        S.dlog.t = (double *)(blk + o_d);
        S.hlog.t = (double *)(blk + o_h);
    }
    double stall_total = 0, compute_total = 0, stage_load = 0;
    /* x's step-0 interval: replaced by the staged batch in the steady state */
    int x_iv = (p->t_stage >= 0 || as_staged) && p->t_x >= 0 ? p->tensors[p->t_x].iv[0] : -1;
    if (as_staged && x_iv >= 0) {   /* LOAD_STAGED's time, first on the compute stream */
        double dur = load_staged_s(&S, p->tensors[p->t_x].bytes);
        S.c += dur;
        S.busy[0] += dur;
        compute_total += dur;
        stage_load += dur;
    }
    if (d2h_done)
        for (int t = 0; t < p->n_tensors; t++) d2h_done[t] = 0;
    for (int s = 0; s <= p->n_steps; s++) {
        vd_step *st = &p->steps[s];
        double stall = 0;
        st->t_start = st->t_end = S.c;
        st->t_rc_start = -1;
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
            const vd_action *A = &p->actions[a];
            /* the allocations and frees (most actions) take no time: passed
             * over by a test, not the switch's jump */
            if ((1u << A->kind) & (1u << VD_A_FREE | 1u << VD_A_ALLOC)) continue;
            switch (A->kind) {
            case VD_A_WAIT_OFFLOAD:
                stall += sim_wait(&S, p->tensors[A->arg].ev_d2h, ignore_waits);
                break;
            case VD_A_FREE: case VD_A_ALLOC:   /* (passed over above) */
                break;
            case VD_A_RECORD_FREE:
                S.ev[A->arg] = S.c;
                break;
            case VD_A_PREFETCH:
                if (A->arg == x_iv)
                    p->intervals[A->arg].t_h2d_start = p->intervals[A->arg].t_h2d_end = 0;
                else
                    sim_prefetch(&S, st, A->arg);
                break;
            case VD_A_WAIT_PREFETCH:
                if (A->arg != x_iv)
                    stall += sim_wait(&S, p->intervals[A->arg].ev_h2d, ignore_waits);
                break;
            case VD_A_RECOMPUTE: {
                double dur = compute_time(&S, step_s(&S, p->layers[A->arg].rc_s));
                if (st->t_rc_start < 0) st->t_rc_start = S.c;
                S.c += dur;
                S.busy[0] += dur;
                compute_total += dur;
                break;
            }
            case VD_A_LOAD_STAGED: {
                const vd_interval *iv = &p->intervals[A->arg];
                double dur = load_staged_s(&S, p->tensors[iv->tensor].bytes);
                S.c += dur;
                S.busy[0] += dur;
                compute_total += dur;
                stage_load += dur;
                break;
            }
            case VD_A_COMPUTE: {
                if (st->t_rc_start < 0) st->t_rc_start = S.c;
                st->t_start = S.c;
                double dur = compute_time(&S, step_s(&S, st->compute_s));
                S.c += dur;
                st->t_end = S.c;
                S.busy[0] += dur;
                compute_total += dur;
                break;
            }
            case VD_A_OFFLOAD:
                sim_offload(&S, A->arg, d2h_done);
                break;
            }
        }
        if (s == p->n_steps) { st->t_start = st->t_end = S.c; }
        if (st->t_rc_start < 0) st->t_rc_start = st->t_start;
        st->stall_s = stall;
        stall_total += stall;
    }
    /* Loss readback: D2H waits on the end-of-compute event; the compute
     * stream is done, so the idle rate. */
    {
        double start = S.d > S.c ? S.d : S.c;
        double end = start + dev->launch_s + 4.0 / dev->d2h_bw;
        if (p->ev_end >= 0) S.ev[p->ev_end] = S.c;
        if (p->ev_loss >= 0) S.ev[p->ev_loss] = end;
        double it = end;
        if (S.h > it) it = S.h;
        p->sim.iter_s = it;
    }
    p->sim.compute_s = compute_total;
    p->sim.busy_s[0] = S.busy[0];
    p->sim.busy_s[1] = S.busy[1];
    p->sim.busy_s[2] = S.busy[2];
    p->sim.stall_s = stall_total;
    p->sim.stage_load_s = stage_load;
    vd_free(blk);
    return VD_OK;
}

int vdp_simulate(vd_plan *p, const vd_profile *prof, bool ignore_waits, double *d2h_done,
                 vd_err *e) {
    return simulate(p, prof, ignore_waits, d2h_done, false, e);
}

int vdp_simulate_as_staged(vd_plan *p, const vd_profile *prof, vd_err *e) {
    return simulate(p, prof, false, NULL, true, e);
}
