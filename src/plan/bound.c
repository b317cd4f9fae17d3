/* bound.c — a lower bound on the predicted iteration of any training plan
 * of a net and profile at a pool budget (vd_plan_lower_bound, plan.h).
 *
 * The simulator runs the compute steps one after another, each taking its
 * option's profile time; offloads, prefetches and stalls only add to that,
 * and so do recomputes. An op needs, at once, its workspace, every
 * persistent tensor (parameters, gradients, momentum) and the tensors it
 * reads and writes (forward: its inputs, output and saved state; backward:
 * what it reads, dy, the input gradients, the saved state). So at budget B
 * a pass can only use options whose workspace fits in B minus those bytes
 * (backward, with the update in the backward pass: the layer's gradients too),
 * and no plan at B is predicted faster than the sum, over the passes, of the
 * fastest such option's time (an ADD's backward left out, as compute_bound
 * in auto.c: the build may scale it to zero), plus the SGD step. Tensors are
 * counted once however many roles they have, so the bound stays a bound. */
#include <math.h>
#include "plan/plan.h"

enum { BOUND_MAX_T = 2 * VD_MAX_INPUTS + 4 };

/* Adds tensor t to set[*n] unless it is absent (< 0), persistent or there. */
static void add_t(const vd_plan *p, int t, int *set, int *n) {
    if (t < 0 || t >= p->n_tensors || p->tensors[t].persistent) return;
    for (int k = 0; k < *n; k++)
        if (set[k] == t) return;
    if (*n < BOUND_MAX_T) set[(*n)++] = t;
}

static uint64_t set_bytes(const vd_plan *p, const int *set, int n) {
    uint64_t b = 0;
    for (int k = 0; k < n; k++) b += p->tensors[set[k]].bytes;
    return b;
}

/* The fastest option of layer pl for one pass whose workspace fits in avail
 * bytes; INFINITY when none does. */
static double fastest_within(const vd_profile_layer *pl, bool bwd, uint64_t avail) {
    double best = INFINITY;
    for (int k = 0; k < pl->n_algos; k++) {
        const vd_profile_algo *a = &pl->algos[k];
        double t = bwd ? a->bwd_s : a->fwd_s;
        if (vd_profile_algo_ws(a, bwd) <= avail && t < best) best = t;
    }
    return best;
}

double vd_plan_lower_bound(const vd_net *net, const vd_profile *prof, const vd_plan *p,
                           uint64_t budget) {
    if (p->forward_only || p->n_layers != net->n_layers || prof->n_layers != net->n_layers)
        return 0.0;
    uint64_t persistent = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].persistent) persistent += p->tensors[t].bytes;
    if (persistent > budget) return INFINITY;
    double sum = prof->sgd_s;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_layer *l = &net->layers[i];
        const vd_plan_layer *pl = &p->layers[i];
        int set[BOUND_MAX_T], n = 0;
        for (int k = 0; k < l->n_in; k++) add_t(p, pl->in_t[k], set, &n);
        add_t(p, pl->y, set, &n);
        add_t(p, pl->aux, set, &n);
        uint64_t need = persistent + set_bytes(p, set, n);
        if (need > budget) return INFINITY;
        sum += fastest_within(&prof->layers[i], false, budget - need);
        if (vd_op_table[l->op].bwd_is_dy) continue;
        bool rx = true, ry = true;
        vd_op_bwd_reads(net, i, &rx, &ry);
        n = 0;
        for (int k = 0; k < l->n_in && rx; k++) add_t(p, pl->in_t[k], set, &n);
        if (ry) add_t(p, pl->y, set, &n);
        add_t(p, pl->dy, set, &n);
        for (int k = 0; k < l->n_in; k++) add_t(p, pl->dx[k], set, &n);
        add_t(p, pl->aux, set, &n);
        add_t(p, pl->dw, set, &n);
        need = persistent + set_bytes(p, set, n);
        if (need > budget) return INFINITY;
        sum += fastest_within(&prof->layers[i], true, budget - need);
    }
    return sum * (1.0 - 1e-12);   /* the simulator adds in another order */
}
