/* actions.c — from a build's decisions to the plan: intervals, events, the
 * per-step action lists, memory and copy statistics. */
#include <string.h>
#include "plan/builder.h"

/* Build intervals, events and actions from the decisions recorded in the
 * tensors (offload, release_step, prefetch_step, recompute). Clears previous ones. */
void vdp_build_intervals(bld *b) {
    vd_plan *p = b->p;
    p->n_intervals = 0;
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        T->n_iv = 0;
        T->iv[0] = T->iv[1] = -1;
        int first = b->first_touch[t], last = b->last_touch[t];
        vd_fill f0 = T->kind == VD_T_INPUT ? VD_FILL_INPUT_X
                   : T->kind == VD_T_LABELS ? VD_FILL_LABELS : VD_FILL_NONE;
        if (T->recompute) {
            vdp_add_interval(b, t, first, T->fwd_last, f0, first);
            vdp_add_interval(b, t, T->recompute_step, last, VD_FILL_NONE, T->recompute_step);
        } else if (!T->offload) {
            vdp_add_interval(b, t, first, last, f0, first);
        } else {
            vdp_add_interval(b, t, first, T->release_step - 1, f0, first);
            vdp_add_interval(b, t, T->prefetch_step, last,
                         T->host_src ? VD_FILL_INPUT_X : VD_FILL_HOST_STORE, T->rd_after);
        }
    }
}

/* Live bytes per step from intervals (steps 0..n_steps-1): each interval
 * adds its bytes at its first step and takes them off after its last, then
 * one prefix sum (unsigned wrap-around cancels exactly). */
void vdp_mem_per_step(const vd_plan *p, uint64_t *mem) {
    int n = p->n_steps;
    for (int s = 0; s < n; s++) mem[s] = 0;
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        if (iv->first >= n || iv->last < iv->first) continue;
        mem[iv->first] += iv->bytes;
        if (iv->last + 1 < n) mem[iv->last + 1] -= iv->bytes;
    }
    for (int s = 1; s < n; s++) mem[s] += mem[s - 1];
}

/* Events and action lists. */
void vdp_build_actions(bld *b) {
    vd_plan *p = b->p;
    int ne = 0;
    p->n_actions = 0;
    for (int s = 0; s <= p->n_steps; s++) p->steps[s].ev_free = -1;
    /* the offloaded tensors (with a D2H copy), noted for the buckets below
     * (one pass over the tensors' records instead of two) */
    int *offl = b->fit_steps, n_offl = 0;   /* vdp_fit_memory's scratch, free here */
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        T->ev_compute = T->ev_d2h = -1;
        if (T->offload && !T->host_src) { T->ev_compute = ne++; T->ev_d2h = ne++; offl[n_offl++] = t; }
    }
    for (int k = 0; k < p->n_intervals; k++) {
        vd_interval *iv = &p->intervals[k];
        iv->ev_h2d = -1;
        if (iv->fill != VD_FILL_NONE) {
            iv->ev_h2d = ne++;
            if (p->steps[iv->first].ev_free < 0) p->steps[iv->first].ev_free = ne++;
        }
    }
    p->ev_end = ne++;
    p->ev_loss = ne++;
    p->n_events = ne;

    vd_action *A = p->actions;
    int na = 0;
    /* Bucket intervals by first / last / need step and tensors by release /
     * offload step (linked lists through the scratch arrays). */
    int ns = p->n_steps + 1;
    int *head = b->bucket_head;        /* [6 * ns] */
    int *next = b->bucket_next;        /* [5 * cap] */
    for (int k = 0; k < 6 * ns; k++) head[k] = -1;
    int cap = b->cap_iv > b->cap_t ? b->cap_iv : b->cap_t;
    for (int k = p->n_intervals - 1; k >= 0; k--) {
        const vd_interval *iv = &p->intervals[k];
        next[0 * cap + k] = head[0 * ns + iv->first]; head[0 * ns + iv->first] = k;
        int fr = iv->last + 1;
        next[1 * cap + k] = head[1 * ns + fr]; head[1 * ns + fr] = k;
        if (iv->fill != VD_FILL_NONE) {
            next[2 * cap + k] = head[2 * ns + iv->need_step]; head[2 * ns + iv->need_step] = k;
        }
    }
    for (int j = n_offl - 1; j >= 0; j--) {
        int t = offl[j];
        const vd_tensor *T = &p->tensors[t];
        next[3 * cap + t] = head[3 * ns + T->release_step]; head[3 * ns + T->release_step] = t;
        next[4 * cap + t] = head[4 * ns + T->offload_step]; head[4 * ns + T->offload_step] = t;
    }
    /* Recomputed layers by (step, layer): producers before their consumers.
     * A list per step (head[5 * ns + s], linked through rc_ops), layers in
     * order: an insertion sort over the layers' records was a tenth of this
     * function. */
    for (int j = b->L - 1; j >= 0; j--) {
        int r = p->layers[j].rc_step;
        if (r < 0) continue;
        b->rc_ops[j] = head[5 * ns + r];
        head[5 * ns + r] = j;
    }
#define PUSH(k, a) do { A[na].kind = (k); A[na].arg = (a); na++; } while (0)
    for (int s = 0; s <= p->n_steps; s++) {
        vd_step *st = &p->steps[s];
        st->first_action = na;
        st->recompute_s = 0;
        for (int t = head[3 * ns + s]; t >= 0; t = next[3 * cap + t]) PUSH(VD_A_WAIT_OFFLOAD, t);
        if (s > 0)
            for (int k = head[1 * ns + s]; k >= 0; k = next[1 * cap + k]) PUSH(VD_A_FREE, k);
        if (s < p->n_steps) {
            if (st->ev_free >= 0) PUSH(VD_A_RECORD_FREE, st->ev_free);
            for (int k = head[0 * ns + s]; k >= 0; k = next[0 * cap + k]) PUSH(VD_A_ALLOC, k);
            int pf0 = na;
            for (int k = head[0 * ns + s]; k >= 0; k = next[0 * cap + k])
                if (p->intervals[k].fill != VD_FILL_NONE) PUSH(VD_A_PREFETCH, k);
            /* the H2D queue serves copies in issue order: most urgent first */
            for (int x = pf0 + 1; x < na; x++)
                for (int y = x; y > pf0 && p->intervals[A[y - 1].arg].need_step >
                                           p->intervals[A[y].arg].need_step; y--) {
                    vd_action tmp = A[y]; A[y] = A[y - 1]; A[y - 1] = tmp;
                }
            for (int k = head[2 * ns + s]; k >= 0; k = next[2 * cap + k]) PUSH(VD_A_WAIT_PREFETCH, k);
            if (s == 0 && p->t_stage >= 0) PUSH(VD_A_LOAD_STAGED, p->tensors[p->t_x].iv[0]);
            for (int j = head[5 * ns + s]; j >= 0; j = b->rc_ops[j]) {
                PUSH(VD_A_RECOMPUTE, j);
                st->recompute_s += p->layers[j].rc_s;
            }
            PUSH(VD_A_COMPUTE, s);
            for (int t = head[4 * ns + s]; t >= 0; t = next[4 * cap + t]) PUSH(VD_A_OFFLOAD, t);
        }
        st->n_actions = na - st->first_action;
    }
#undef PUSH
    p->n_actions = na;
}

/* Sum statistics after placement. */
void vdp_finish_stats(vd_plan *p) {
    p->live_peak = 0;
    p->peak_step = 0;
    p->hwm = 0;
    int ns = p->n_steps + 1;
    for (int s = 0; s < ns; s++) { p->steps[s].mem_in_use = 0; p->steps[s].mem_top = 0; }
    /* live bytes: each interval adds at its first step and takes off after
     * its last, then one prefix sum (unsigned wrap-around cancels exactly);
     * each step's top: the intervals' tops as range maxima on a segment tree
     * over the steps (tags on O(log) nodes, pushed down once). Every build
     * of the auto search comes here: a loop over each interval's steps was
     * 8% of it. */
    int N = 1;
    while (N < ns) N *= 2;
    uint64_t *tag = vd_calloc(2 * (size_t)N, sizeof *tag, NULL);
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        uint64_t top = iv->offset + iv->bytes;
        if (top > p->hwm) p->hwm = top;
        if (iv->last < iv->first) continue;
        p->steps[iv->first].mem_in_use += iv->bytes;
        if (iv->last + 1 < ns) p->steps[iv->last + 1].mem_in_use -= iv->bytes;
        if (!tag) {   /* out of memory: step by step */
            for (int s = iv->first; s <= iv->last; s++)
                if (top > p->steps[s].mem_top) p->steps[s].mem_top = top;
            continue;
        }
        for (int a = iv->first + N, b = iv->last + N + 1; a < b; a /= 2, b /= 2) {
            if (a & 1) { if (top > tag[a]) tag[a] = top; a++; }
            if (b & 1) { --b; if (top > tag[b]) tag[b] = top; }
        }
    }
    for (int s = 1; s < ns; s++) p->steps[s].mem_in_use += p->steps[s - 1].mem_in_use;
    if (tag) {
        for (int i = 2; i < 2 * N; i++)
            if (tag[i / 2] > tag[i]) tag[i] = tag[i / 2];
        for (int s = 0; s < ns; s++) p->steps[s].mem_top = tag[N + s];
        vd_free(tag);
    }
    for (int s = 0; s < p->n_steps; s++)
        if (p->steps[s].mem_in_use > p->live_peak) { p->live_peak = p->steps[s].mem_in_use; p->peak_step = s; }
    p->frag = p->hwm ? (double)(p->hwm - p->live_peak) / (double)p->hwm : 0.0;
    p->offload_bytes = p->prefetch_bytes = p->input_bytes = p->host_bytes = 0;
    p->recompute_bytes = 0;
    p->n_recomputed = p->n_recompute_ops = 0;
    p->recompute_s = 0;
    for (int s = 0; s < p->n_steps; s++) p->recompute_s += p->steps[s].recompute_s;
    for (int a = 0; a < p->n_actions; a++) p->n_recompute_ops += p->actions[a].kind == VD_A_RECOMPUTE;
    for (int t = 0; t < p->n_tensors; t++) {
        vd_tensor *T = &p->tensors[t];
        if (T->recompute) { p->recompute_bytes += T->bytes; p->n_recomputed++; }
        T->host_offset = 0;
        if (T->offload && !T->host_src) {
            T->host_offset = p->host_bytes;
            p->host_bytes += VD_ALIGN_UP(T->bytes, (uint64_t)VD_PLAN_ALIGN);
            p->offload_bytes += T->bytes;
        }
    }
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        const vd_tensor *T = &p->tensors[iv->tensor];
        if (iv->fill == VD_FILL_NONE) continue;
        if (T->offload && T->iv[1] == k) p->prefetch_bytes += T->bytes;   /* prefetch back */
        else if (p->t_stage >= 0 && iv->tensor == p->t_x) continue;        /* staged instead */
        else p->input_bytes += T->bytes;                                   /* x (or x:next), labels */
    }
    p->persistent_bytes = 0;
    for (int t = 0; t < p->n_tensors; t++)
        if (p->tensors[t].persistent)
            p->persistent_bytes += p->intervals[p->tensors[t].iv[0]].bytes;
}

const vd_interval *vd_plan_resident(const vd_plan *p, int t, int step) {
    if (t < 0 || t >= p->n_tensors) return NULL;
    const vd_tensor *T = &p->tensors[t];
    for (int k = 0; k < T->n_iv; k++) {
        const vd_interval *iv = &p->intervals[T->iv[k]];
        if (iv->first <= step && step <= iv->last) return iv;
    }
    return NULL;
}
