/* test_plan.c — planner invariants on random nets (chains and DAGs), the
 * in-place and accumulation rules, profile JSON round trip, infeasible
 * budgets, and the vdnn-plan command line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "plan_common.h"
#include "util/json.h"
#include "plan/search.h"
#include "vdt.h"

/* ---- random nets -------------------------------------------------------- */

typedef struct shp { int idx, c, h, w; } shp;

static int rnd(vd_rng *r, int lo, int hi) { return lo + (int)(vd_rng_u32(r) % (uint32_t)(hi - lo + 1)); }

/* A random valid net: conv / relu / bn / dropout / pool chains, residual
 * adds (including long skips with several consumers) and concat branches. */
static void random_net(vd_net *net, uint64_t seed, int batch) {
    vd_rng r;
    vd_rng_seed(&r, seed, 99);
    int classes = rnd(&r, 2, 5);
    char name[32];
    snprintf(name, sizeof name, "rand%llu", (unsigned long long)seed);
    tn_begin(net, name, rnd(&r, 1, 3), rnd(&r, 6, 10), 0, classes, batch);
    net->in_w = net->in_h;
    shp cur = {-1, net->in_c, net->in_h, net->in_w};
    shp skip = cur;          /* an older tensor for long skips */
    int nblocks = rnd(&r, 2, 6);
    int id = 0;
    char ln[VD_NAME_MAX];
#define NM(fmt) (snprintf(ln, sizeof ln, fmt "%d", id++), ln)
    for (int b = 0; b < nblocks; b++) {
        int kind = rnd(&r, 0, 5);
        if (kind == 0 || kind == 1) {            /* conv [+bn] [+relu] [+dropout] */
            int k = rnd(&r, 0, 1) ? 3 : 1;
            int out = rnd(&r, 2, 6);
            int x = tn_conv(net, NM("conv"), cur.idx, out, k, 1, k / 2);
            cur.idx = x; cur.c = out;
            if (rnd(&r, 0, 1)) cur.idx = tn_bn(net, NM("bn"), cur.idx);
            if (rnd(&r, 0, 3)) cur.idx = tn_relu(net, NM("relu"), cur.idx);
            if (!rnd(&r, 0, 3)) cur.idx = tn_dropout(net, NM("drop"), cur.idx, 0.3f);
        } else if (kind == 2 && cur.h >= 4) {      /* pool */
            cur.idx = tn_pool(net, NM("pool"), cur.idx, rnd(&r, 0, 1) ? VD_POOL_MAX : VD_POOL_AVG, 2, 2);
            cur.h /= 2; cur.w /= 2;
            skip = cur;
        } else if (kind == 3) {                    /* residual block */
            int a = tn_conv(net, NM("rconv"), cur.idx, cur.c, 3, 1, 1);
            a = tn_relu(net, NM("rrelu"), a);
            a = tn_conv(net, NM("rconv"), a, cur.c, 3, 1, 1);
            int s = tn_join(net, NM("add"), VD_OP_ADD, a, cur.idx);
            cur.idx = s;
            if (rnd(&r, 0, 1)) cur.idx = tn_relu(net, NM("relu"), cur.idx);
        } else if (kind == 4) {                    /* concat branches */
            int c1 = rnd(&r, 1, 4), c2 = rnd(&r, 1, 4);
            int a = tn_conv(net, NM("br"), cur.idx, c1, 1, 1, 0);
            int bb = tn_conv(net, NM("br"), cur.idx, c2, 3, 1, 1);
            bb = tn_relu(net, NM("brelu"), bb);
            cur.idx = tn_join(net, NM("cat"), VD_OP_CONCAT, a, bb);
            cur.c = c1 + c2;
        } else if (skip.idx >= 0 && skip.idx != cur.idx && skip.h == cur.h) {  /* long skip */
            int x = tn_conv(net, NM("proj"), cur.idx, skip.c, 1, 1, 0);
            cur.idx = tn_join(net, NM("skip"), VD_OP_ADD, x, skip.idx);
            cur.c = skip.c;
        } else {
            cur.idx = tn_relu(net, NM("relu"), cur.idx);
        }
        if (!rnd(&r, 0, 2)) skip = cur;
    }
    if (cur.idx < 0) cur.idx = tn_conv(net, NM("conv"), -1, 2, 1, 1, 0);
    int f = tn_fc(net, NM("fc"), cur.idx, classes);
    tn_loss(net, f);
#undef NM
    tn_finish(net);
}

/* ---- invariants --------------------------------------------------------- */

static void need(const vd_plan *p, const vd_net *net, int t, int s, const char *what) {
    if (t < 0) return;
    ck_assert_msg(vd_plan_resident(p, t, s) != NULL, "%s: %s (%s) not resident at step %d",
                  net->name, p->tensors[t].name, what, s);
}

/* Position of the first action of kind k with arg a at or after step s0.. */
static int find_action(const vd_plan *p, vd_action_kind k, int arg) {
    for (int i = 0; i < p->n_actions; i++)
        if (p->actions[i].kind == k && p->actions[i].arg == arg) return i;
    return -1;
}

static int step_of_action(const vd_plan *p, int a) {
    for (int s = 0; s <= p->n_steps; s++)
        if (a >= p->steps[s].first_action && a < p->steps[s].first_action + p->steps[s].n_actions)
            return s;
    return -1;
}

/* Everything about recomputation that the executor relies on. */
static void check_recompute_invariants(const vd_plan *p, const vd_net *net) {
    int U = p->n_units;   /* units: layers, or their chunks (plan.h, "Split layers") */
    int n_ops = 0, n_t = 0;
    uint64_t bytes = 0;
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        if (!T->recompute) { ck_assert_int_eq(T->recompute_step, -1); continue; }
        n_t++;
        bytes += T->bytes;
        ck_assert(!p->forward_only);
        ck_assert(!T->offload);
        ck_assert_int_eq(T->kind, VD_T_ACT);
        ck_assert_int_eq(T->n_iv, 2);
        const vd_interval *i0 = &p->intervals[T->iv[0]], *i1 = &p->intervals[T->iv[1]];
        ck_assert_int_eq(i0->last, T->fwd_last);              /* released right after its last reader */
        ck_assert_int_eq(i1->first, T->recompute_step);
        ck_assert_int_eq(T->recompute_step, T->bwd_first);
        ck_assert_int_lt(i0->last + 1, i1->first);             /* absent for at least one step */
        ck_assert_int_eq(i1->fill, VD_FILL_NONE);
        ck_assert_int_ge(T->recompute_step, U);
        /* its writers: the producer and the in-place layers on it, all re-run */
        for (int j = 0; j < U; j++) {
            if (p->layers[j].y != t) continue;
            ck_assert_int_eq(p->layers[j].rc_step, T->recompute_step);
            vd_op op = net->layers[p->layers[j].layer].op;
            ck_assert_msg(vd_op_table[op].recomputable,
                          "%s: %s recomputed through layer %s, not recomputable", net->name,
                          T->name, net->layers[p->layers[j].layer].name);
            /* a re-run reads the state its forward saved (batch norm's statistics) */
            if (p->layers[j].aux >= 0)
                need(p, net, p->layers[j].aux, T->recompute_step, "saved state");
        }
    }
    for (int j = 0; j < U; j++) {
        const vd_plan_layer *pl = &p->layers[j];
        const vd_layer *lj = &net->layers[pl->layer];
        if (pl->rc_step < 0) { ck_assert_int_eq(pl->ws_rc, -1); continue; }
        ck_assert(p->tensors[pl->y].recompute);
        int s = pl->rc_step;
        /* exactly one RECOMPUTE of j, at step s, before its COMPUTE */
        int a_rc = -1, cnt = 0;
        for (int a = 0; a < p->n_actions; a++)
            if (p->actions[a].kind == VD_A_RECOMPUTE && p->actions[a].arg == j) { a_rc = a; cnt++; }
        ck_assert_int_eq(cnt, 1);
        ck_assert_int_eq(step_of_action(p, a_rc), s);
        ck_assert_int_lt(a_rc, find_action(p, VD_A_COMPUTE, s));
        n_ops++;
        /* every forward operand resident at s */
        for (int k = 0; k < lj->n_in; k++) need(p, net, pl->in_t[k], s, "recompute input");
        need(p, net, pl->y, s, "recompute output");
        need(p, net, p->t_params, s, "recompute params");
        if (pl->ws_fwd_bytes) {
            ck_assert_int_ge(pl->ws_rc, 0);
            need(p, net, pl->ws_rc, s, "recompute workspace");
            const vd_interval *w = &p->intervals[p->tensors[pl->ws_rc].iv[0]];
            ck_assert_int_eq(w->first, s);
            ck_assert_int_eq(w->last, s);
        }
        /* inputs produced earlier in the same step come first; prefetched
         * inputs are waited for before */
        for (int k = 0; k < lj->n_in; k++) {
            int src = pl->in_t[k];
            const vd_interval *iv = vd_plan_resident(p, src, s);
            if (src != pl->y && p->tensors[src].recompute && iv == &p->intervals[p->tensors[src].iv[1]] &&
                iv->first == s) {
                for (int w2 = 0; w2 < U; w2++)
                    if (p->layers[w2].y == src)
                        ck_assert_int_lt(find_action(p, VD_A_RECOMPUTE, w2), a_rc);
            }
            if (iv->fill != VD_FILL_NONE) {
                ck_assert_int_le(iv->need_step, s);
                int a_w = find_action(p, VD_A_WAIT_PREFETCH, (int)(iv - p->intervals));
                ck_assert_int_ge(a_w, 0);
                ck_assert_int_lt(a_w, a_rc);
                ck_assert(iv->t_h2d_end <= p->steps[s].t_rc_start + 1e-12);
            }
        }
        /* a recompute input is not overwritten in place by j unless it is j's own tensor */
        if (pl->inplace) ck_assert_int_eq(pl->in_t[0], pl->y);
    }
    ck_assert_int_eq(n_ops, p->n_recompute_ops);
    ck_assert_int_eq(n_t, p->n_recomputed);
    ck_assert_uint_eq(bytes, p->recompute_bytes);
    /* within a step, recomputes run in layer order (producers before the
     * in-place layers on their output and before their consumers) */
    for (int s = 0; s < p->n_steps; s++) {
        int last = -1;
        const vd_step *st = &p->steps[s];
        for (int a = st->first_action; a < st->first_action + st->n_actions; a++) {
            if (p->actions[a].kind != VD_A_RECOMPUTE) continue;
            ck_assert_int_gt(p->actions[a].arg, last);
            last = p->actions[a].arg;
        }
    }
    double rs = 0;
    for (int s = 0; s < p->n_steps; s++) rs += p->steps[s].recompute_s;
    ck_assert(fabs(rs - p->recompute_s) <= 1e-12 + 1e-9 * rs);   /* same sum, another order */
}

static void check_plan_invariants(const vd_plan *p, const vd_net *net) {
    int L = net->n_layers, U = p->n_units;
    /* 1. within budget */
    if (p->feasible) ck_assert_uint_le(p->hwm, p->budget);
    /* 2. no two time-overlapping intervals overlap in the pool */
    for (int a = 0; a < p->n_intervals; a++) {
        const vd_interval *x = &p->intervals[a];
        ck_assert_uint_eq(x->offset % 256, 0);
        ck_assert_uint_le(x->offset + x->bytes, p->hwm);
        ck_assert_uint_ge(x->bytes, p->tensors[x->tensor].bytes);
        ck_assert_int_le(x->first, x->last);
        for (int b = a + 1; b < p->n_intervals; b++) {
            const vd_interval *y = &p->intervals[b];
            bool t_ovl = x->first <= y->last && y->first <= x->last;
            bool m_ovl = x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
            ck_assert_msg(!(t_ovl && m_ovl), "%s: %s [%d,%d]@%llu and %s [%d,%d]@%llu collide", net->name,
                          p->tensors[x->tensor].name, x->first, x->last, (unsigned long long)x->offset,
                          p->tensors[y->tensor].name, y->first, y->last, (unsigned long long)y->offset);
        }
    }
    /* 3. memory per step, recomputed */
    uint64_t peak = 0;
    for (int s = 0; s < p->n_steps; s++) {
        uint64_t m = 0;
        for (int k = 0; k < p->n_intervals; k++)
            if (p->intervals[k].first <= s && s <= p->intervals[k].last) m += p->intervals[k].bytes;
        ck_assert_uint_eq(m, p->steps[s].mem_in_use);
        if (m > peak) peak = m;
    }
    ck_assert_uint_eq(peak, p->live_peak);
    /* 4. everything an op touches is resident (re-derived from the op table),
     * per unit (a layer, or a chunk of it) */
    for (int i = 0; i < U; i++) {
        const vd_plan_layer *pl = &p->layers[i];
        const vd_layer *l = &net->layers[pl->layer];
        for (int k = 0; k < l->n_in; k++) need(p, net, pl->in_t[k], i, "fwd input");
        need(p, net, pl->y, i, "fwd output");
        need(p, net, pl->aux, i, "fwd aux");
        need(p, net, pl->ws_fwd, i, "fwd workspace");
        if (pl->layer == L - 1) need(p, net, p->t_labels, i, "labels");
        need(p, net, p->t_params, i, "params");
        if (p->forward_only) continue;
        int sb = 2 * U - 1 - i;
        bool rx, ry;
        vd_op_bwd_reads(net, pl->layer, &rx, &ry);
        if (rx)
            for (int k = 0; k < l->n_in; k++) need(p, net, pl->in_t[k], sb, "bwd x");
        if (ry) need(p, net, pl->y, sb, "bwd y");
        need(p, net, pl->dy, sb, "bwd dy");
        for (int k = 0; k < l->n_in; k++) need(p, net, pl->dx[k], sb, "bwd dx");
        need(p, net, pl->aux, sb, "bwd aux");
        need(p, net, pl->ws_bwd, sb, "bwd workspace");
        need(p, net, p->t_grads, sb, "grads");
        if (pl->layer == L - 1) ck_assert_int_eq(pl->dy, -1);
        else ck_assert_int_ge(pl->dy, 0);
    }
    /* 5. accumulation order: per source, exactly one beta-0 writer, and it
     * runs first in backward (highest layer index); a split layer's chunks
     * write their slices as its first unit (check_grad_flow checks them) */
    if (!p->forward_only)
        for (int src = 0; src < L; src++) {
            int first = -1, zeros = 0;
            for (int i = L - 1; i >= 0; i--)
                for (int k = 0; k < net->layers[i].n_in; k++)
                    if (net->layers[i].in[k] == src) {
                        const vd_plan_layer *fl = &p->layers[p->first_unit[i]];
                        if (first < 0) { first = i; ck_assert(fl->dx_beta[k] == 0.0f); }
                        else ck_assert(fl->dx_beta[k] == 1.0f);
                        zeros += fl->dx_beta[k] == 0.0f;
                    }
            if (src < L - 1) ck_assert_int_eq(zeros, 1);
        }
    /* 5b. every backward reads its own gradient (adds share their dy tensor
     * with their inputs' gradients where that is safe) */
    check_grad_flow(p, net);
    /* 6. offload / prefetch dependencies in action order, and in the simulator */
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        if (!T->offload) continue;
        ck_assert_int_eq(T->n_iv, 2);
        const vd_interval *i0 = &p->intervals[T->iv[0]], *i1 = &p->intervals[T->iv[1]];
        ck_assert_int_lt(i0->last, i1->first);
        ck_assert_int_ge(T->release_step, T->fwd_last + 1);
        ck_assert_int_le(i1->first, T->bwd_first);
        int a_pf = find_action(p, VD_A_PREFETCH, T->iv[1]);
        int a_wait = find_action(p, VD_A_WAIT_PREFETCH, T->iv[1]);
        ck_assert_int_ge(a_pf, 0);
        ck_assert_int_ge(a_wait, 0);
        ck_assert_int_lt(a_pf, a_wait);
        ck_assert_int_eq(step_of_action(p, a_wait), T->bwd_first);
        int a_comp = find_action(p, VD_A_COMPUTE, T->bwd_first);
        ck_assert_int_lt(a_wait, a_comp);
        /* prefetch completes before the consumer step's compute-stream work
         * (its recomputes, then its op) starts (simulated) */
        ck_assert_msg(i1->t_h2d_end <= p->steps[T->bwd_first].t_rc_start + 1e-12,
                      "%s: prefetch of %s ends %g after its consumer starts %g", net->name, T->name,
                      i1->t_h2d_end, p->steps[T->bwd_first].t_rc_start);
        /* the copy into the fresh region waits for the region-free event */
        int s_pf = step_of_action(p, a_pf);
        ck_assert_int_ge(p->steps[s_pf].ev_free, 0);
        int a_rec = find_action(p, VD_A_RECORD_FREE, p->steps[s_pf].ev_free);
        ck_assert_int_lt(a_rec, a_pf);
        if (!T->host_src) {
            int a_off = find_action(p, VD_A_OFFLOAD, t);
            int a_wo = find_action(p, VD_A_WAIT_OFFLOAD, t);
            int a_free = find_action(p, VD_A_FREE, T->iv[0]);
            ck_assert_int_ge(a_off, 0);
            ck_assert_int_lt(a_off, a_pf);          /* H2D waits on the D2H event: recorded earlier */
            ck_assert_int_lt(a_off, a_wo);
            ck_assert_int_lt(a_wo, a_free);         /* region reused only after the drain */
            ck_assert_int_eq(step_of_action(p, a_wo), T->release_step);
            ck_assert(T->t_d2h_end <= p->steps[T->release_step].t_start + 1e-12);
            ck_assert(T->t_d2h_end <= i1->t_h2d_start + 1e-12);
            /* the offload is issued after the tensor's last forward write */
            ck_assert_int_ge(step_of_action(p, a_off), T->prod_step);
        }
    }
    /* 7. recomputes: intervals, actions, operands, order */
    check_recompute_invariants(p, net);
    /* 8. each interval is allocated and freed exactly once */
    for (int k = 0; k < p->n_intervals; k++) {
        int na = 0, nf = 0;
        for (int a = 0; a < p->n_actions; a++) {
            na += p->actions[a].kind == VD_A_ALLOC && p->actions[a].arg == k;
            nf += p->actions[a].kind == VD_A_FREE && p->actions[a].arg == k;
        }
        ck_assert_int_eq(na, 1);
        ck_assert_int_eq(nf, 1);
    }
    /* 9. input staging: "x:next" as big as x, its region read at step 0
     * and filled from stage_step to the end at one offset (2. keeps every
     * interval live then out of it), its copy issued at stage_step after the
     * region-free event and awaited by nothing in the iteration, and the
     * device copy into x at step 0 before the op */
    if (p->t_stage < 0) {
        ck_assert_int_ne(p->stage, VD_STAGE_ON);
        ck_assert_int_eq(p->stage_step, -1);
        for (int a = 0; a < p->n_actions; a++) ck_assert_int_ne(p->actions[a].kind, VD_A_LOAD_STAGED);
    } else {
        ck_assert(!p->forward_only);
        const vd_tensor *S = &p->tensors[p->t_stage];
        ck_assert_int_eq(p->stage, VD_STAGE_ON);
        ck_assert_uint_eq(S->bytes, p->tensors[p->t_x].bytes);
        ck_assert_int_eq(S->n_iv, 2);
        const vd_interval *a0 = &p->intervals[S->iv[0]], *a1 = &p->intervals[S->iv[1]];
        ck_assert(a0->first == 0 && a0->last == 0);
        ck_assert(a1->first == p->stage_step && a1->last == p->n_steps - 1);
        ck_assert_int_ge(p->stage_step, L);
        ck_assert_uint_eq(a0->offset, a1->offset);
        ck_assert_int_eq(a1->fill, VD_FILL_STAGE);
        int a_pf = find_action(p, VD_A_PREFETCH, S->iv[1]);
        ck_assert_int_eq(step_of_action(p, a_pf), p->stage_step);
        ck_assert_int_lt(find_action(p, VD_A_RECORD_FREE, p->steps[p->stage_step].ev_free), a_pf);
        ck_assert_int_lt(find_action(p, VD_A_WAIT_PREFETCH, S->iv[1]), 0);
        int a_ld = find_action(p, VD_A_LOAD_STAGED, p->tensors[p->t_x].iv[0]);
        ck_assert_int_eq(step_of_action(p, a_ld), 0);
        ck_assert_int_lt(a_ld, find_action(p, VD_A_COMPUTE, 0));
        ck_assert(p->sim.stage_load_s > 0);
    }
}

/* cpu_for_dev (plan_common.h) with the cpu device's timing model. */
static vd_backend *cpu_for(const vd_net *net, int batch, vd_profile *prof) {
    return cpu_for_dev(net, batch, &vd_device_cpu, prof);
}

/* Seeds first..last of the random nets under every policy (auto twice: with
 * the cpu and the slow-link timing model), both prefetch modes, at three
 * budgets and just below the minimum. Two tests of 12 seeds each, so that
 * they run in parallel (their auto searches take about the same time). */
static void random_nets(uint64_t first, uint64_t last) {
    int auto_rc = 0, auto_off = 0, auto_plans = 0, below_fits = 0;
    for (uint64_t seed = first; seed <= last; seed++) {
        int batch = 1 + (int)(seed % 3);
        vd_net net;
        random_net(&net, seed, batch);
        /* pol == VD_POLICY_COUNT: auto again, with the slow-link timing model */
        for (int pol = 0; pol <= VD_POLICY_COUNT; pol++) {
        vd_profile prof;
        vd_backend *be = cpu_for_dev(&net, batch, pol == VD_POLICY_COUNT ? &slow_link
                                                                         : &vd_device_cpu, &prof);
        vd_err e = {0};
            for (int pf = 0; pf < VD_PREFETCH_COUNT; pf++) {
                vd_plan_opts o;
                vd_plan_opts_init(&o);
                o.batch = batch;
                o.policy = pol == VD_POLICY_COUNT ? VD_POLICY_AUTO : (vd_policy)pol;
                o.prefetch = (vd_prefetch)pf;
                uint64_t mb = 0, none_peak = 0;
                ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &mb, &e) == 0, "%s", e.msg);
                {
                    vd_plan_opts on = o;
                    on.policy = VD_POLICY_NONE;
                    ck_assert(vd_plan_min_budget(&net, &prof, &on, &none_peak, &e) == 0);
                }
                ck_assert_uint_le(mb, none_peak);
                uint64_t budgets[3] = {0, mb, mb + (none_peak - mb) / 2};
                for (int bi = 0; bi < 3; bi++) {
                    o.budget = budgets[bi];
                    vd_plan p;
                    int rc = vd_plan_build(&net, &prof, &o, &p, &e);
                    ck_assert_msg(rc == 0, "%s %s/%s budget %llu: %s", net.name, vd_policy_name(o.policy),
                                  vd_prefetch_name(o.prefetch), (unsigned long long)o.budget, e.msg);
                    ck_assert(p.feasible);
                    check_plan_invariants(&p, &net);
                    /* no plan at a budget beats its lower bound (bound.c) */
                    double lb = vd_plan_lower_bound(&net, &prof, &p, o.budget ? o.budget : p.budget);
                    ck_assert_msg(isfinite(lb) && lb > 0 && lb <= p.sim.iter_s,
                                  "%s %s budget %llu: bound %.17g, predicted %.17g", net.name,
                                  vd_policy_name(o.policy), (unsigned long long)o.budget, lb,
                                  p.sim.iter_s);
                    /* nor the bound with the copies (test_bound has its own tests) */
                    vd_plan_bound cb;
                    ck_assert_msg(vd_plan_copy_bound(&net, &prof, &p, o.budget, &cb, &e) == 0, "%s", e.msg);
                    ck_assert_msg(cb.bound_s >= lb && cb.bound_s <= p.sim.iter_s,
                                  "%s %s budget %llu: bound with the copies %.17g, compute-only "
                                  "%.17g, predicted %.17g", net.name, vd_policy_name(o.policy),
                                  (unsigned long long)o.budget, cb.bound_s, lb, p.sim.iter_s);
                    if (o.policy == VD_POLICY_AUTO && bi > 0) {
                        auto_plans++;
                        auto_rc += p.n_recomputed;
                        for (int t = 0; t < p.n_tensors; t++) auto_off += p.tensors[t].offload;
                        /* never slower than what the paper's dyn predicts at the budget */
                        vd_plan_opts od = o;
                        od.policy = VD_POLICY_DYN;
                        vd_plan d;
                        int rd = vd_plan_build(&net, &prof, &od, &d, &e);
                        if (rd == VD_OK)
                            ck_assert_msg(p.sim.iter_s <= d.sim.iter_s * (1 + 1e-12),
                                          "%s budget %llu: auto %g s slower than dyn %g s", net.name,
                                          (unsigned long long)o.budget, p.sim.iter_s, d.sim.iter_s);
                        if (rd == VD_OK || rd == VD_EBUDGET) vd_plan_free(&d);
                    }
                    ck_assert_ptr_nonnull(p.eval);
                    check_plan_invariants(p.eval, &net);
                    /* eval keeps params and momentum where training has them */
                    ck_assert_uint_eq(p.eval->intervals[p.eval->tensors[p.eval->t_params].iv[0]].offset,
                                      p.intervals[p.tensors[p.t_params].iv[0]].offset);
                    ck_assert_uint_eq(p.eval->intervals[p.eval->tensors[p.eval->t_mom].iv[0]].offset,
                                      p.intervals[p.tensors[p.t_mom].iv[0]].offset);
                    ck_assert_uint_le(p.eval->hwm, p.budget);
                    vd_plan_free(&p);
                }
                /* below the minimum: infeasible. But for one case: auto's
                 * smallest budget is its search's probes (auto.c,
                 * min_budget_auto), and the search is not monotone in the
                 * budget; since the ReLU backward + conv bias gradient
                 * pairing (each conv's gradient tensor live one step
                 * longer, other tensors, other placements) seed 2's auto
                 * with prefetch paper finds a plan one step below it. */
                if (mb > 4096) {
                    o.budget = mb - 256;
                    vd_plan p;
                    int rc = vd_plan_build(&net, &prof, &o, &p, &e);
                    bool known = seed == 2 && pol == VD_POLICY_AUTO && pf == VD_PREFETCH_PAPER;
                    below_fits += known;
                    if (known) {
                        ck_assert_msg(rc == VD_OK, "%s", e.msg);
                        ck_assert(p.feasible && p.hwm <= o.budget);
                        check_plan_invariants(&p, &net);
                    } else {
                        ck_assert_int_eq(rc, VD_EBUDGET);
                        ck_assert(!p.feasible);
                    }
                    vd_plan_free(&p);
                }
            }
        vd_profile_free(&prof);
        be->destroy(be);
        }
        vd_net_free(&net);
    }
    printf("random nets %d-%d, auto at tight budgets: %d plans, %d tensors recomputed, %d offloaded\n",
           (int)first, (int)last, auto_plans, auto_rc, auto_off);
    ck_assert_int_gt(auto_rc, 0);
    ck_assert_int_eq(below_fits, first <= 2 && 2 <= last);   /* the case above was met */
}

START_TEST(test_random_nets_3_4) { random_nets(3, 4); }
END_TEST

/* Suite seeds: the other ten (seed 2, the dearest, holds the one net whose
 * auto finds a plan below its own minimum budget: below_fits). */
START_TEST(test_random_nets_more) {
    random_nets(1, 2);
    random_nets(5, 12);
}
END_TEST

/* Random per-tensor dispositions on random DAGs: chains of recomputes
 * through residual adds, concats, dropout and batch norm (never recomputed),
 * mixed with offloads. The plan keeps every invariant; the executor matches
 * the simulator's memory, re-runs exactly the planned ops and trains
 * byte-identically to policy none (poisoning on). */
START_TEST(test_random_dispositions) {
    int total_rc = 0, total_chain = 0;
    for (uint64_t seed = 1; seed <= 16; seed++) {
        int batch = 1 + (int)(seed % 3);
        vd_net net;
        random_net(&net, seed * 13, batch);
        int L = net.n_layers;
        bool ip[512];
        ck_assert_int_le(L, 512);
        vd_schedule_inplace_flags(&net, ip);
        vd_disp disp[513];
        vd_rng r;
        vd_rng_seed(&r, seed, 5);
        for (int rep = 0; rep < 3; rep++) {
            for (int k = 0; k <= L; k++) {
                uint32_t u = vd_rng_u32(&r) % 4;
                disp[k] = k > 0 && ip[k - 1] ? VD_DISP_AUTO
                        : rep == 0 ? VD_DISP_RECOMPUTE      /* everything: longest chains */
                        : u == 0 ? VD_DISP_KEEP : u == 1 ? VD_DISP_OFFLOAD
                        : u == 2 ? VD_DISP_RECOMPUTE : VD_DISP_AUTO;
            }
            vd_policy pol = rep == 2 ? VD_POLICY_CONV : VD_POLICY_NONE;
            vd_profile prof;
            vd_backend *be = cpu_for(&net, batch, &prof);
            vd_plan_opts o;
            vd_plan_opts_init(&o);
            o.batch = batch;
            o.policy = pol;
            o.disp = disp;
            vd_err e = {0};
            uint64_t mb = 0;
            ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &mb, &e) == 0, "%s", e.msg);
            vd_plan p;
            o.budget = mb;
            ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s: %s", net.name, e.msg);
            check_plan_invariants(&p, &net);
            total_rc += p.n_recomputed;
            for (int j = 0; j < L; j++)   /* a recompute at the same step as its input's */
                if (p.layers[j].rc_step >= 0)
                    for (int k = 0; k < net.layers[j].n_in; k++) {
                        int src = p.layers[j].in_t[k];
                        total_chain += src != p.layers[j].y && p.tensors[src].recompute &&
                                       p.tensors[src].recompute_step == p.layers[j].rc_step;
                    }
            vd_plan_free(&p);
            vd_profile_free(&prof);
            be->destroy(be);
            run_cfg c0 = {.policy = VD_POLICY_NONE, .iters = 2, .poison = true, .fixed_algo = -1};
            run_cfg c = {.policy = pol, .budget = mb, .iters = 2, .poison = true, .fixed_algo = -1,
                         .disp = disp};
            run_out ref, out;
            run_training(&net, batch, &c0, &ref);
            run_training(&net, batch, &c, &out);
            ck_assert_msg(ref.rc == 0 && out.rc == 0, "%s: %s %s", net.name, ref.msg, out.msg);
            ck_assert_uint_eq(out.st.live_peak, out.plan_peak);
            ck_assert_uint_eq(out.st.pool_hwm, out.plan_hwm);
            ck_assert_uint_le(out.st.pool_hwm, mb);
            ck_assert_int_eq(out.st.recompute_ops_iter, out.n_recompute_ops);
            ck_assert_uint_eq(out.st.offload_bytes_iter, out.plan_offload);
            ck_assert_msg(memcmp(out.params, ref.params, (size_t)net.param_floats * 4) == 0,
                          "%s rep %d: parameters differ from policy none", net.name, rep);
            ck_assert(memcmp(out.mom, ref.mom, (size_t)net.param_floats * 4) == 0);
            ck_assert(memcmp(out.loss, ref.loss, 2 * sizeof(float)) == 0);
            run_free(&ref);
            run_free(&out);
        }
        vd_net_free(&net);
    }
    printf("random dispositions: %d tensors recomputed, %d chained recomputes\n", total_rc, total_chain);
    ck_assert_int_gt(total_rc, 0);
    ck_assert_int_gt(total_chain, 0);
}
END_TEST

/* The simulator's memory equals what the executor measures while it walks
 * (random nets of seeds 7 first .. 7 last). */
static void sim_equals_exec(uint64_t first, uint64_t last) {
    int rc_plans = 0;
    for (uint64_t seed = first; seed <= last; seed++) {
        int batch = 2;
        vd_net net;
        random_net(&net, seed * 7, batch);
        /* pol == VD_POLICY_COUNT: auto with the slow-link timing model (recomputes) */
        for (int pol = 0; pol <= VD_POLICY_COUNT; pol++) {
            const vd_device_params *dev = pol == VD_POLICY_COUNT ? &slow_link : &vd_device_cpu;
            vd_profile prof;
            vd_backend *be0 = cpu_for_dev(&net, batch, dev, &prof);
            vd_plan_opts o;
            vd_plan_opts_init(&o);
            o.batch = batch;
            o.policy = pol == VD_POLICY_COUNT ? VD_POLICY_AUTO : (vd_policy)pol;
            uint64_t mb = 0, none_hwm = 0;
            vd_err e = {0};
            ck_assert(vd_plan_min_budget(&net, &prof, &o, &mb, &e) == 0);
            vd_plan_opts on = o;
            on.policy = VD_POLICY_NONE;
            ck_assert(vd_plan_min_budget(&net, &prof, &on, &none_hwm, &e) == 0);
            vd_profile_free(&prof);
            be0->destroy(be0);
            uint64_t budgets[2] = {mb, mb + (none_hwm - mb) / 3};
            for (int bi = 0; bi < 2; bi++) {
                run_cfg c = {.policy = o.policy, .budget = budgets[bi], .iters = 2, .poison = true,
                             .fixed_algo = -1, .dev = dev};
                run_out out;
                run_training(&net, batch, &c, &out);
                ck_assert_msg(out.rc == 0, "%s %s: %s", net.name, vd_policy_name(o.policy), out.msg);
                ck_assert_uint_eq(out.st.live_peak, out.plan_peak);
                ck_assert_uint_eq(out.st.pool_hwm, out.plan_hwm);
                ck_assert_uint_eq(out.st.pool_bytes, budgets[bi]);
                ck_assert_uint_le(out.st.pool_hwm, budgets[bi]);
                ck_assert_uint_eq(out.st.offload_bytes_iter, out.plan_offload);
                ck_assert_int_eq(out.st.recompute_ops_iter, out.n_recompute_ops);
                ck_assert(isfinite(out.loss[0]) && isfinite(out.loss[1]));
                rc_plans += out.n_recomputed > 0;
                run_free(&out);
            }
        }
        vd_net_free(&net);
    }
    printf("sim == exec: %d plans with recomputes\n", rc_plans);
    ck_assert_int_gt(rc_plans, 0);
}

START_TEST(test_sim_equals_exec_1_3) { sim_equals_exec(1, 3); }
END_TEST

START_TEST(test_sim_equals_exec_4_6) { sim_equals_exec(4, 6); }
END_TEST

/* The length of [a0, a1] within [b0, b1]. */
static double span_within(double a0, double a1, double b0, double b1) {
    double lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

/* Compute beside copies (vd_device_params.compute_slow_*): every compute
 * step of a plan whose profile has them takes its profile time plus the
 * factors times the time the plan's own D2H and H2D copies (as the plan
 * records them) run beside it; without them, the same plan predicts what it
 * did before, to the bit. */
START_TEST(test_sim_copy_slowdown) {
    vd_net net;
    load_shipped_net(&net, "vgg16.yaml", 32);
    vd_profile prof;
    analytic_profile(&net, 32, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(32, VD_POLICY_ALL);
    vd_plan a, b;
    vd_err e;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &a, &e) == 0, "%s", e.msg);
    const double sd = 0.25, sh = 0.125;
    prof.dev.compute_slow_d2h = sd;
    prof.dev.compute_slow_h2d = sh;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &b, &e) == 0, "%s", e.msg);
    int checked = 0, beside = 0;
    for (int s = 0; s < b.n_steps; s++) {
        const vd_step *st = &b.steps[s];
        double ov_d = 0, ov_h = 0;
        for (int t = 0; t < b.n_tensors; t++)
            if (b.tensors[t].offload && !b.tensors[t].host_src)
                ov_d += span_within(st->t_start, st->t_end, b.tensors[t].t_d2h_start,
                                    b.tensors[t].t_d2h_end);
        for (int k = 0; k < b.n_intervals; k++)
            if (b.intervals[k].fill != VD_FILL_NONE)
                ov_h += span_within(st->t_start, st->t_end, b.intervals[k].t_h2d_start,
                                    b.intervals[k].t_h2d_end);
        /* the overlaps are taken over the slowed step: solve
         * dur = base + sd * ov_d(base) + sh * ov_h(base) by checking the
         * slowed step's own equation within its rounding (a part of the
         * overlap inside the extension is counted here, not by the
         * simulator, which measures over base): bounded both ways */
        double dur = st->t_end - st->t_start, base = st->compute_s;
        ck_assert_msg(dur >= base * (1 - 1e-12), "step %d: %g s < its profile time %g s", s, dur,
                      base);
        ck_assert_msg(dur <= base + sd * ov_d + sh * ov_h + 1e-12,
                      "step %d: %g s > %g s + %g x %g s (D2H) + %g x %g s (H2D)", s, dur, base, sd,
                      ov_d, sh, ov_h);
        ck_assert_msg(dur >= base + (sd * ov_d + sh * ov_h) / (1 + sd + sh) - 1e-12,
                      "step %d: %g s, too little for the copies beside it", s, dur);
        checked++;
        beside += ov_d + ov_h > 0;
    }
    ck_assert_int_gt(beside, 4);    /* the check saw copies beside compute */
    ck_assert_msg(b.sim.iter_s > a.sim.iter_s, "%g s, without the factors %g s", b.sim.iter_s,
                  a.sim.iter_s);
    vd_plan c;
    prof.dev.compute_slow_d2h = prof.dev.compute_slow_h2d = 0;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &c, &e) == 0, "%s", e.msg);
    ck_assert(c.sim.iter_s == a.sim.iter_s);
    printf("compute beside copies: %d steps, %d with copies beside; %.3f -> %.3f ms\n", checked,
           beside, 1e3 * a.sim.iter_s, 1e3 * b.sim.iter_s);
    vd_plan_free(&a);
    vd_plan_free(&b);
    vd_plan_free(&c);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* Copies at the busy rates (vd_device_params.d2h_bw_busy, ...): with a
 * both-ways rate that never slows them, every D2H copy of a plan takes
 * launch + bytes / d2h_bw_busy and every H2D copy launch + bytes /
 * h2d_bw_busy, the idle rates (three times faster here) unused; the lower
 * bound stays at or below the plan; and busy rates equal to the idle ones
 * predict, to the bit, what no busy rates (0: the idle ones) do. */
START_TEST(test_sim_busy_copies) {
    vd_net net;
    load_shipped_net(&net, "vgg16.yaml", 32);
    vd_schedule_inplace(&net);   /* as the tools plan it */
    vd_profile prof;
    analytic_profile(&net, 32, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(32, VD_POLICY_ALL);
    vd_err e;
    /* at its smallest budget policy all offloads (above it, it keeps what fits) */
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &o.budget, &e) == 0, "%s", e.msg);
    vd_plan a, b, c;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &a, &e) == 0, "%s", e.msg);
    vd_device_params *d = &prof.dev;
    const double d2h = d->d2h_bw / 3, h2d = d->h2d_bw / 3;
    d->d2h_bw_busy = d2h;
    d->h2d_bw_busy = h2d;
    d->both_bw_busy = 4 * (d2h + h2d);   /* half of it above either direction's rate */
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &b, &e) == 0, "%s", e.msg);
    /* end - start of a copy: start + duration rounded once, then subtracted
     * (a few ulps of the iteration's ~0.1 s: far below 1e-12 s) */
    const double tol = 1e-12;
    int nd = 0, nh = 0;
    for (int t = 0; t < b.n_tensors; t++) {
        const vd_tensor *T = &b.tensors[t];
        if (!T->offload || T->host_src) continue;
        double want = d->launch_s + (double)T->bytes / d2h;
        ck_assert_msg(fabs(T->t_d2h_end - T->t_d2h_start - want) <= tol,
                      "%s: D2H %.17g s, want %.17g s", T->name, T->t_d2h_end - T->t_d2h_start, want);
        nd++;
    }
    for (int k = 0; k < b.n_intervals; k++) {
        const vd_interval *iv = &b.intervals[k];
        if (iv->fill == VD_FILL_NONE || iv->t_h2d_end == 0) continue;   /* x staged: no copy */
        double want = d->launch_s + (double)b.tensors[iv->tensor].bytes / h2d;
        ck_assert_msg(fabs(iv->t_h2d_end - iv->t_h2d_start - want) <= tol,
                      "%s: H2D %.17g s, want %.17g s", b.tensors[iv->tensor].name,
                      iv->t_h2d_end - iv->t_h2d_start, want);
        nh++;
    }
    ck_assert_int_gt(nd, 4);   /* at its floor policy all offloads most maps */
    ck_assert_int_ge(nh, nd);  /* each offload comes back, and labels */
    ck_assert_msg(b.sim.iter_s > a.sim.iter_s, "%g s at a third of the rates, %g s at them",
                  b.sim.iter_s, a.sim.iter_s);
    vd_plan_bound bd;
    ck_assert_msg(vd_plan_copy_bound(&net, &prof, &b, b.budget, &bd, &e) == 0, "%s", e.msg);
    ck_assert_msg(bd.bound_s <= b.sim.iter_s, "bound %.17g s > plan %.17g s", bd.bound_s,
                  b.sim.iter_s);
    d->d2h_bw_busy = d->d2h_bw;
    d->h2d_bw_busy = d->h2d_bw;
    d->both_bw_busy = d->both_bw;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &c, &e) == 0, "%s", e.msg);
    ck_assert(c.sim.iter_s == a.sim.iter_s);
    for (int s = 0; s <= c.n_steps; s++) ck_assert(c.steps[s].t_end == a.steps[s].t_end);
    printf("busy copy rates: %d D2H, %d H2D copies; %.3f -> %.3f ms (bound %.3f)\n", nd, nh,
           1e3 * a.sim.iter_s, 1e3 * b.sim.iter_s, 1e3 * bd.bound_s);
    vd_plan_free(&a);
    vd_plan_free(&b);
    vd_plan_free(&c);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_inplace_rules) {
    vd_net net;
    tn_begin(&net, "inplace", 2, 6, 6, 3, 2);
    int r0 = tn_relu(&net, "relu_on_input", -1);            /* net input: never in place */
    int c = tn_conv(&net, "conv", r0, 4, 3, 1, 1);
    int r1 = tn_relu(&net, "relu1", c);                     /* conv bwd needs x only: in place */
    int d = tn_dropout(&net, "drop", r1, 0.5f);             /* relu bwd needs y: not in place */
    int p = tn_pool(&net, "pool", d, VD_POOL_MAX, 2, 2);
    int r2 = tn_relu(&net, "relu2", p);                     /* max pool bwd reads x, not y: in place */
    int c2 = tn_conv(&net, "conv2", r2, 4, 1, 1, 0);
    int a = tn_join(&net, "add", VD_OP_ADD, c2, r2);
    int r3 = tn_relu(&net, "relu3", a);                     /* add bwd needs nothing: in place */
    int d2 = tn_dropout(&net, "drop2", c2, 0.1f);           /* c2 has 2 consumers: not in place */
    int a2 = tn_join(&net, "add2", VD_OP_ADD, r3, d2);
    int f = tn_fc(&net, "fc", a2, 3);
    tn_loss(&net, f);
    tn_finish(&net);
    bool ip[32];
    vd_schedule_inplace_flags(&net, ip);
    ck_assert(!ip[r0]);
    ck_assert(ip[r1]);
    ck_assert(!ip[d]);
    ck_assert(ip[r2]);
    ck_assert(ip[r3]);
    ck_assert(!ip[d2]);
    vd_schedule_inplace(&net);
    ck_assert(net.layers[r1].inplace && !net.layers[r0].inplace);
    /* the plan aliases: one tensor for conv and relu1 */
    vd_profile prof;
    vd_backend *be = cpu_for(&net, 2, &prof);
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = 2;
    vd_plan pl;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &pl, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(pl.layers[r1].y, pl.layers[c].y);
    ck_assert_int_ne(pl.layers[d].y, pl.layers[r1].y);
    ck_assert_int_ne(pl.layers[r1].dy, pl.layers[c].dy);   /* in place shares no gradient */
    check_plan_invariants(&pl, &net);
    vd_plan_free(&pl);
    vd_profile_free(&prof);
    be->destroy(be);
    vd_net_free(&net);
}
END_TEST

/* A tensor with several consumers lives until the last one reads it. */
START_TEST(test_liveness_exact) {
    vd_net net;
    tn_lenet(&net, 2);
    vd_profile prof;
    vd_err e = {0};
    analytic_profile(&net, 2, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(2, VD_POLICY_NONE);
    vd_plan p;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    int L = net.n_layers;   /* 14 */
    ck_assert_int_eq(p.n_steps, 2 * L + 1);
    /* conv1 output (relu1 in place): fwd 0..2 (pool1 reads it at 2), bwd: pool1 (max,
     * needs x) at 2L-1-2, relu1 (needs y) at 2L-1-1 -> last reader step 2L-2 */
    int t = p.layers[0].y;
    ck_assert_int_eq(p.layers[1].y, t);
    const vd_interval *iv = &p.intervals[p.tensors[t].iv[0]];
    ck_assert_int_eq(iv->first, 0);
    ck_assert_int_eq(iv->last, 2 * L - 2);
    /* x: read by conv1 fwd (0) and bwd (2L-1) */
    iv = &p.intervals[p.tensors[p.t_x].iv[0]];
    ck_assert_int_eq(iv->first, 0);
    ck_assert_int_eq(iv->last, 2 * L - 1);
    /* dy of fc3 (layer 12): written by loss bwd (step L), read by fc3 bwd (L+1) */
    iv = &p.intervals[p.tensors[p.layers[12].dy].iv[0]];
    ck_assert_int_eq(iv->first, L);
    ck_assert_int_eq(iv->last, L + 1);
    /* workspace of conv2 (layer 3) fwd: exactly step 3 */
    if (p.layers[3].ws_fwd >= 0) {
        iv = &p.intervals[p.tensors[p.layers[3].ws_fwd].iv[0]];
        ck_assert_int_eq(iv->first, 3);
        ck_assert_int_eq(iv->last, 3);
    }
    /* params persistent for the whole iteration */
    iv = &p.intervals[p.tensors[p.t_params].iv[0]];
    ck_assert_int_eq(iv->first, 0);
    ck_assert_int_eq(iv->last, 2 * L);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_infeasible_message) {
    vd_net net;
    tn_resnet(&net, 2);
    vd_profile prof;
    vd_backend *be = cpu_for(&net, 2, &prof);
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = 2;
    o.policy = VD_POLICY_ALL;
    uint64_t mb = 0;
    vd_err e = {0};
    ck_assert(vd_plan_min_budget(&net, &prof, &o, &mb, &e) == 0);
    o.budget = mb - 1024;
    vd_plan p;
    int rc = vd_plan_build(&net, &prof, &o, &p, &e);
    ck_assert_int_eq(rc, VD_EBUDGET);
    ck_assert_int_eq(e.code, VD_EBUDGET);
    char want[64], fb[32];
    snprintf(want, sizeof want, "smallest budget that fits is %s", vd_fmt_bytes(mb, fb, sizeof fb));
    ck_assert_msg(strstr(e.msg, want), "message lacks '%s': %s", want, e.msg);
    ck_assert_msg(strstr(e.msg, "step "), "no step in: %s", e.msg);
    ck_assert_msg(strstr(e.msg, " over"), "no overshoot in: %s", e.msg);
    ck_assert_msg(strstr(e.msg, "policy all"), "no policy in: %s", e.msg);
    vd_plan_free(&p);
    /* a budget below the persistent state alone */
    o.budget = 1024;
    rc = vd_plan_build(&net, &prof, &o, &p, &e);
    ck_assert_int_eq(rc, VD_EBUDGET);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    be->destroy(be);
    vd_net_free(&net);
}
END_TEST

/* A recompute costs its layer's rc_s where the profile gives one (batch
 * norm's re-run only normalises): every map of a tiny ResNet recomputed
 * under a profile whose batch norms re-run in a quarter of their forward
 * time; each recompute's time and each map's are those closed forms, and
 * the iteration's recompute time is the profile-without-rc_s plan's less
 * three quarters of the recomputed batch norms' forward times. */
START_TEST(test_bn_recompute_time) {
    vd_net net;
    tn_resnet(&net, 4);
    vd_profile prof;
    vd_err e = {0};
    ck_assert(vd_profile_analytic(&net, 4, &vd_device_h200, &prof, &e) == 0);
    vd_disp disp[64];
    bool ip[64];
    ck_assert_int_lt(net.n_layers, 64);
    vd_schedule_inplace_flags(&net, ip);
    disp[0] = VD_DISP_AUTO;
    for (int i = 0; i < net.n_layers; i++) disp[i + 1] = ip[i] ? VD_DISP_AUTO : VD_DISP_RECOMPUTE;
    vd_plan_opts o = plan_opts(4, VD_POLICY_NONE);
    o.disp = disp;
    vd_plan p0, p1;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p0, &e) == 0, "%s", e.msg);
    for (int i = 0; i < net.n_layers; i++)
        if (net.layers[i].op == VD_OP_BATCHNORM)
            prof.layers[i].rc_s = 0.25 * prof.layers[i].algos[0].fwd_s;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p1, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(p0.n_recompute_ops, p1.n_recompute_ops);
    double bn_fwd = 0;
    int n_bn = 0;
    for (int j = 0; j < p1.n_units; j++) {
        const vd_plan_layer *pl = &p1.layers[j];
        bool bn = net.layers[pl->layer].op == VD_OP_BATCHNORM;
        /* the whole batch: vd_profile_chunk_time returns the time unchanged */
        ck_assert(pl->rc_s == (bn ? 0.25 : 1.0) * prof.layers[pl->layer].algos[pl->algo_fwd].fwd_s);
        if (pl->rc_step < 0) continue;
        ck_assert_int_eq(p0.layers[j].rc_step, pl->rc_step);
        if (bn) { n_bn++; bn_fwd += pl->fwd_s; }
    }
    ck_assert_int_ge(n_bn, 2);
    for (int t = 0; t < p1.n_tensors; t++) {
        if (!p1.tensors[t].recompute) continue;
        double want = 0;
        for (int j = 0; j < p1.n_units; j++)
            if (p1.layers[j].y == t) want += p1.layers[j].rc_s;
        /* 1e-15 s: the same few additions in another order */
        ck_assert(fabs(p1.tensors[t].recompute_s - want) <= 1e-15);
    }
    /* 1e-12 s: sums of some tens of times of about 1e-5 s, in other orders */
    ck_assert_msg(fabs(p0.recompute_s - p1.recompute_s - 0.75 * bn_fwd) <= 1e-12,
                  "recompute time %g, without rc_s %g, batch norms' forward %g", p1.recompute_s,
                  p0.recompute_s, bn_fwd);
    vd_plan_free(&p0);
    vd_plan_free(&p1);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The swaps (search_swaps): tiny-resnet with every convolution output
 * recomputed and every batch norm output kept, at a budget everything
 * fits. Swapping a pair keeps the convolution output and recomputes the
 * batch norm output's writers instead, so it pays where those re-run faster
 * than the convolution. This net is launch-bound on the analytic profile:
 * b1_bn2's output has one writer (the add after it is not in place) and
 * is swapped; stem_bn's and b1_bn1's have two (batch norm and the ReLU in
 * place on it), two launches for one, and are not. */
static int disp_of_layer(const actx *c, const vd_net *net, const char *name) {
    for (int i = 0; i < net->n_layers; i++)
        if (!strcmp(net->layers[i].name, name)) return c->disp[i + 1];
    ck_abort_msg("no layer %s", name);
    return -1;
}

START_TEST(test_swaps) {
    vd_net net;
    tn_resnet(&net, 4);
    vd_profile prof;
    vd_err e = {0};
    ck_assert(vd_profile_analytic(&net, 4, &vd_device_h200, &prof, &e) == 0);
    vd_plan_opts o = plan_opts(4, VD_POLICY_AUTO);
    o.budget = 1ull << 30;
    vdp_search s = {0};
    actx c;
    ck_assert_msg(search_ctx_init(&c, &s, &net, &prof, &o, VDP_SEARCH, &e) == 0, "%s", e.msg);
    for (int i = 0; i + 1 < net.n_layers; i++) {
        if (net.layers[i].op != VD_OP_CONV || net.layers[i + 1].op != VD_OP_BATCHNORM) continue;
        c.disp[i + 1] = VD_DISP_RECOMPUTE;   /* the convolution's output */
        c.disp[i + 2] = VD_DISP_KEEP;        /* its batch norm's */
    }
    vd_plan P;
    ck_assert_msg(search_eval(&c, &P, &e) == 0, "%s", e.msg);
    ck_assert(P.feasible);
    double before = P.sim.iter_s;
    ck_assert_msg(search_swaps(&c, &P, &e) == 0, "%s", e.msg);
    ck_assert(P.feasible);
    ck_assert_msg(P.sim.iter_s < before, "swaps: %g s, before %g s", P.sim.iter_s, before);
    ck_assert_int_eq(disp_of_layer(&c, &net, "b1_conv2"), VD_DISP_KEEP);
    ck_assert_int_eq(disp_of_layer(&c, &net, "b1_bn2"), VD_DISP_RECOMPUTE);
    static const char *const kept[2][2] = {{"stem", "stem_bn"}, {"b1_conv1", "b1_bn1"}};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(disp_of_layer(&c, &net, kept[k][0]), VD_DISP_RECOMPUTE);
        ck_assert_int_eq(disp_of_layer(&c, &net, kept[k][1]), VD_DISP_KEEP);
    }
    vdp_plan_release(&P);
    search_ctx_free(&c);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The optimizer's state and update step (net->train.optimizer): AdamW keeps
 * exp_avg and exp_avg_sq, twice SGD's momentum, persistent; every step's
 * memory (the live peak, the pool) grows by exactly the difference; the
 * summary and the JSON name it. The analytic update moves 28 bytes per
 * trainable parameter against SGD's 20 (plus the same launches): the
 * difference is n_trainable * 8 / mem_bw, closed form (1e-12: the sums'
 * rounding). A profile made for SGD serves AdamW with its update time
 * scaled by 28/20; an unknown "optimizer" in a file is refused. */
START_TEST(test_optimizer_state) {
    vd_net net;
    tn_resnet(&net, 4);
    ck_assert(net.param_floats > net.n_trainable);   /* batch-norm buffers: no state */
    vd_profile prof[2];
    vd_plan p[2];
    vd_err e = {0};
    for (int k = 0; k < 2; k++) {
        net.train.optimizer = k ? VD_OPT_ADAMW : VD_OPT_SGD;
        ck_assert(vd_profile_analytic(&net, 4, &vd_device_h200, &prof[k], &e) == 0);
        ck_assert_int_eq(prof[k].optimizer, net.train.optimizer);
        vd_plan_opts o = plan_opts(4, VD_POLICY_NONE);
        ck_assert_msg(vd_plan_build(&net, &prof[k], &o, &p[k], &e) == 0, "%s", e.msg);
        check_plan_invariants(&p[k], &net);
        ck_assert_uint_eq(p[k].tensors[p[k].t_mom].bytes, (uint64_t)(k + 1) * net.param_floats * 4);
        ck_assert_str_eq(p[k].tensors[p[k].t_mom].name, k ? "adamw_state" : "momentum");
        ck_assert(p[k].tensors[p[k].t_mom].persistent);
        /* the summary's persistent line and the JSON name the state */
        char *buf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        ck_assert(f && vd_plan_write_table(f, &p[k], &net, &e) == 0);
        fclose(f);
        ck_assert_msg(strstr(buf, k ? "(parameters, AdamW's exp_avg and exp_avg_sq"
                                    : "(parameters, momentum"), "%s", buf);
        free(buf);
        json_t *j = vd_plan_json(&p[k], &net, NULL);
        ck_assert(j);
        ck_assert_str_eq(json_string_value(json_object_get(j, "optimizer")), k ? "adamw" : "sgd");
        ck_assert(json_integer_value(json_object_get(j, "optimizer_state_bytes")) ==
                  (json_int_t)p[k].tensors[p[k].t_mom].bytes);
        json_decref(j);
    }
    uint64_t pb = (uint64_t)net.param_floats * 4;
    uint64_t more = VD_ALIGN_UP(2 * pb, 256) - VD_ALIGN_UP(pb, 256);
    ck_assert_uint_eq(p[1].persistent_bytes - p[0].persistent_bytes, more);
    ck_assert_uint_eq(p[1].live_peak - p[0].live_peak, more);
    ck_assert_uint_eq(p[1].budget - p[0].budget, more);
    double want = (double)net.n_trainable * 8.0 / vd_device_h200.mem_bw;
    ck_assert_msg(fabs(prof[1].sgd_s - prof[0].sgd_s - want) <= 1e-12 * prof[1].sgd_s,
                  "update %g s (adamw) vs %g s (sgd)", prof[1].sgd_s, prof[0].sgd_s);
    ck_assert(p[1].steps[p[1].n_steps - 1].kind == VD_STEP_SGD);
    /* SGD's profile read for the AdamW net (its file says "optimizer": "sgd") */
    char path[] = "/tmp/vdnn-prof-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    ck_assert_msg(vd_profile_save(path, &prof[0], &e) == 0, "%s", e.msg);
    vd_profile q;
    ck_assert_msg(vd_profile_load(path, &net, 4, &q, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(q.optimizer, VD_OPT_ADAMW);
    ck_assert_double_eq_tol(q.sgd_s, prof[0].sgd_s * 28.0 / 20.0, 1e-15);
    vd_profile_free(&q);
    size_t n;
    char *text = vdt_slurp(path, &n);
    char *at = strstr(text, "\"optimizer\": \"sgd\"");
    ck_assert_msg(at, "no optimizer key in the profile");
    memcpy(at, "\"optimizer\": \"sga\"", 18);
    ck_assert_int_eq(vd_profile_parse(text, n, "x.json", &net, 4, &q, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "\"optimizer\" must be"), "%s", e.msg);
    vd_free(text);
    unlink(path);
    for (int k = 0; k < 2; k++) {
        vd_plan_free(&p[k]);
        vd_profile_free(&prof[k]);
    }
    vd_net_free(&net);
}
END_TEST

START_TEST(test_profile_roundtrip) {
    vd_net net;
    tn_resnet(&net, 4);
    vd_profile a, b;
    vd_err e = {0};
    ck_assert(vd_profile_analytic(&net, 4, &vd_device_h200, &a, &e) == 0);
    /* per-pass workspaces and a recompute's own time survive the round trip */
    a.layers[0].algos[0].fwd_workspace = a.layers[0].algos[0].workspace / 2;
    for (int i = 0; i < a.n_layers; i++)
        if (net.layers[i].op == VD_OP_BATCHNORM) a.layers[i].rc_s = 0.3 * a.layers[i].algos[0].fwd_s;
    ck_assert_uint_gt(a.layers[0].algos[0].workspace, 0);
    char path[] = "/tmp/vdnn-prof-XXXXXX";
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
    ck_assert_msg(vd_profile_save(path, &a, &e) == 0, "%s", e.msg);
    /* no busy copy rates (the analytic profile's): none written, none read */
    size_t n;
    char *text = vdt_slurp(path, &n);
    ck_assert_msg(!strstr(text, "_busy"), "busy rates written for a profile without them");
    vd_free(text);
    ck_assert_msg(vd_profile_load(path, &net, 4, &b, &e) == 0, "%s", e.msg);
    ck_assert(b.dev.d2h_bw_busy == 0 && b.dev.h2d_bw_busy == 0 && b.dev.both_bw_busy == 0);
    ck_assert(vd_device_busy_bw(&b.dev, VD_COPY_D2H) == a.dev.d2h_bw);
    ck_assert(vd_device_busy_bw(&b.dev, VD_COPY_H2D) == a.dev.h2d_bw);
    ck_assert(vd_device_busy_bw(&b.dev, VD_COPY_BOTH) == a.dev.both_bw);
    vd_profile_free(&b);
    /* with them: each survives exactly (%.17g) */
    a.dev.d2h_bw_busy = a.dev.d2h_bw * 0.9;
    a.dev.h2d_bw_busy = a.dev.h2d_bw * 0.97;
    a.dev.both_bw_busy = a.dev.both_bw * 0.93;
    ck_assert_msg(vd_profile_save(path, &a, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_load(path, &net, 4, &b, &e) == 0, "%s", e.msg);
    ck_assert(b.dev.d2h_bw_busy == a.dev.d2h_bw_busy && b.dev.h2d_bw_busy == a.dev.h2d_bw_busy &&
              b.dev.both_bw_busy == a.dev.both_bw_busy);
    ck_assert(vd_device_busy_bw(&b.dev, VD_COPY_D2H) == a.dev.d2h_bw_busy);
    ck_assert(vd_device_busy_bw(&b.dev, VD_COPY_BOTH) == a.dev.both_bw_busy);
    /* a busy rate below 1 byte/s (other than 0) is refused */
    text = vdt_slurp(path, &n);
    char *at = strstr(text, "\"h2d_bw_busy\": ");
    ck_assert_ptr_nonnull(at);
    at += strlen("\"h2d_bw_busy\": ");
    memset(at, ' ', strcspn(at, ",}"));
    at[0] = '0'; at[1] = '.'; at[2] = '5';
    vd_profile c;
    ck_assert_int_eq(vd_profile_parse(text, n, "x.json", &net, 4, &c, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "\"h2d_bw_busy\"") && strstr(e.msg, "at least 1"), "%s", e.msg);
    vd_free(text);
    ck_assert_int_eq(a.n_layers, b.n_layers);
    ck_assert(a.sgd_s == b.sgd_s);
    ck_assert(a.dev.d2h_bw == b.dev.d2h_bw && a.dev.both_bw == b.dev.both_bw);
    for (int i = 0; i < a.n_layers; i++) {
        ck_assert_str_eq(a.layers[i].name, b.layers[i].name);
        ck_assert_int_eq(a.layers[i].n_algos, b.layers[i].n_algos);
        ck_assert_uint_eq(a.layers[i].aux_bytes, b.layers[i].aux_bytes);
        ck_assert(a.layers[i].rc_s == b.layers[i].rc_s);
        for (int k = 0; k < a.layers[i].n_algos; k++) {
            ck_assert(a.layers[i].algos[k].fwd_s == b.layers[i].algos[k].fwd_s);   /* %.17g is exact */
            ck_assert(a.layers[i].algos[k].bwd_s == b.layers[i].algos[k].bwd_s);
            ck_assert_uint_eq(a.layers[i].algos[k].workspace, b.layers[i].algos[k].workspace);
            for (int pass = 0; pass < 2; pass++)
                ck_assert_uint_eq(vd_profile_algo_ws(&a.layers[i].algos[k], pass),
                                  vd_profile_algo_ws(&b.layers[i].algos[k], pass));
        }
    }
    vd_profile_free(&b);
    /* wrong batch, wrong net */
    ck_assert_int_eq(vd_profile_load(path, &net, 8, &b, &e), VD_EDATA);
    ck_assert(strstr(e.msg, "batch"));
    vd_net other;
    tn_lenet(&other, 4);
    ck_assert_int_eq(vd_profile_load(path, &other, 4, &b, &e), VD_EDATA);
    vd_net_free(&other);
    ck_assert_int_eq(vd_profile_load("/nonexistent/prof.json", &net, 4, &b, &e), VD_EIO);
    FILE *f = fopen(path, "w");
    fputs("{\"format\": \"vdnn-profile\", \"version\": 1, \"batch\": 4, ", f);
    fclose(f);
    ck_assert_int_eq(vd_profile_load(path, &net, 4, &b, &e), VD_EDATA);
    unlink(path);
    ck_assert_uint_eq(vd_profile_algo_ws(&a.layers[0].algos[0], false), a.layers[0].algos[0].workspace / 2);
    ck_assert_uint_eq(vd_profile_algo_ws(&a.layers[0].algos[0], true), a.layers[0].algos[0].workspace);
    /* an old profile (no per-pass fields, zeroed): `workspace` for both passes */
    vd_profile_algo old = a.layers[0].algos[0];
    old.fwd_workspace = old.bwd_workspace = 0;
    ck_assert_uint_eq(vd_profile_algo_ws(&old, false), old.workspace);
    ck_assert_uint_eq(vd_profile_algo_ws(&old, true), old.workspace);
    vd_profile_free(&a);
    vd_net_free(&net);
}
END_TEST

/* Per-layer checks of per-pass options: the options, their workspaces (per
 * pass, from the profile), the WS tensors and the step times. */
static void check_per_pass(const vd_plan *p, const vd_net *net, const vd_profile *prof,
                           const int *af, const int *ab) {
    int U = p->n_units;
    for (int u = 0; u < U; u++) {   /* per unit: a layer, or a chunk of a split one */
        const vd_plan_layer *pl = &p->layers[u];
        int i = pl->layer, sf = u, sb = 2 * U - 1 - u;
        bool split = pl->n_chunks > 1;
        const vd_profile_layer *pr = &prof->layers[i];
        if (af) ck_assert_int_eq(pl->algo_fwd, af[i]);
        if (ab) ck_assert_int_eq(pl->algo_bwd, ab[i]);
        uint64_t wf = vd_profile_algo_ws(&pr->algos[pl->algo_fwd], false);
        uint64_t wb = vd_profile_algo_ws(&pr->algos[pl->algo_bwd], true);
        ck_assert_uint_eq(pl->ws_fwd_bytes, wf);
        ck_assert_str_eq(pl->algo_label, pr->algos[pl->algo_fwd].label);
        ck_assert_str_eq(pl->algo_bwd_label, pr->algos[pl->algo_bwd].label);
        ck_assert_int_eq(pl->ws_fwd >= 0, wf > 0);
        if (pl->ws_fwd >= 0) ck_assert_uint_eq(p->tensors[pl->ws_fwd].bytes, wf);
        if (pl->ws_rc >= 0) ck_assert_uint_eq(p->tensors[pl->ws_rc].bytes, wf);
        /* a chunk: its share of the pass, no more than the whole's */
        double tf = pr->algos[pl->algo_fwd].fwd_s;
        if (split) ck_assert(p->steps[sf].compute_s > 0 && p->steps[sf].compute_s <= tf);
        else ck_assert(p->steps[sf].compute_s == tf);
        if (p->forward_only) continue;
        ck_assert_uint_eq(pl->ws_bwd_bytes, wb);
        ck_assert_int_eq(pl->ws_bwd >= 0, wb > 0);
        if (pl->ws_bwd >= 0) ck_assert_uint_eq(p->tensors[pl->ws_bwd].bytes, wb);
        /* an ADD counts its backward for the inputs it still copies into */
        double share = 1.0;
        if (net->layers[i].op == VD_OP_ADD) {
            int want = 0, have = 0;
            for (int k = 0; k < net->layers[i].n_in; k++)
                if (net->layers[i].in[k] >= 0) { want++; have += pl->dx[k] >= 0; }
            share = want ? (double)have / want : 1.0;
        }
        /* the update in the backward pass: the layer's share of the SGD step
         * (after its last chunk), and its gradients (its parameters' span)
         * live in its step only (its chunks' steps) */
        double upd = 0.0;
        const vd_layer *li = &net->layers[i];
        int64_t ntr = 0, span = 0;
        for (int k = li->param_first; k < li->param_first + li->n_params; k++) {
            if (net->params[k].kind == VD_PARAM_WEIGHT) ntr += net->params[k].numel;
            span = net->params[k].offset + net->params[k].numel - net->params[li->param_first].offset;
        }
        if (p->update_in_bwd && ntr && pl->update) upd = prof->sgd_s * (double)ntr / (double)net->n_trainable;
        /* a unit in a fusion pair its plan formed (each flag checked below;
         * a conv whose bias gradient its ReLU reduces, db_unit, too) takes
         * the pair's time, any other the time alone (bwd_alone_s) */
        bool paired = pl->takes_relu || pl->takes_add_relu ||
                      (u + 1 < U && (p->layers[u + 1].takes_relu || p->layers[u + 1].db_unit == u)) ||
                      (u >= 2 && p->layers[u - 2].takes_add_relu);
        double tb = vd_profile_bwd_s(&pr->algos[pl->algo_bwd], paired) * share;
        if (split) ck_assert(p->steps[sb].compute_s > upd && p->steps[sb].compute_s <= tb + upd);
        else ck_assert(p->steps[sb].compute_s == tb + upd);
        ck_assert_int_eq(p->t_grads < 0, p->update_in_bwd);
        ck_assert_int_eq(pl->dw >= 0, p->update_in_bwd && span > 0);
        /* the ReLU backward + bias gradient pair: an in-place ReLU right
         * after a conv with a bias, both whole (the nets here freeze
         * nothing), takes the conv's unit */
        const vd_plan_layer *pc = u > 0 ? &p->layers[u - 1] : NULL;
        bool pair = !p->forward_only && pc && net->layers[i].op == VD_OP_RELU && pl->inplace &&
                    net->layers[i].in[0] == pc->layer && pc->layer == i - 1 &&
                    net->layers[i - 1].op == VD_OP_CONV && net->layers[i - 1].u.conv.bias &&
                    !split && pc->n_chunks == 1;
        ck_assert_int_eq(pl->db_unit, pair ? u - 1 : -1);
        /* the max pool + ReLU backward pair: a whole max pool right after
         * the whole in-place ReLU it alone reads, whose dx is its dy tensor,
         * which the pool writes first */
        const vd_plan_layer *pr_ = u > 0 ? &p->layers[u - 1] : NULL;
        bool pool_pair = !p->forward_only && pr_ && vd_op_pool_relu(net, i) == pr_->layer &&
                         !split && pr_->n_chunks == 1 && pr_->dy >= 0 && pr_->dx[0] == pr_->dy &&
                         pl->dx[0] == pr_->dy && pl->dx_beta[0] == 0.0f;
        ck_assert_int_eq(pl->takes_relu, pool_pair);
        /* the batch norm + add + ReLU backward pair: a whole batch norm, the
         * whole add right after it that writes no input's gradient, the
         * whole in-place ReLU after that whose dx is its dy tensor, which is
         * the add's and the batch norm's dy; the ReLU's y is then live at the
         * batch norm's backward step */
        const vd_plan_layer *pa_ = u + 2 < U ? &p->layers[u + 1] : NULL, *rr_ = pa_ ? pa_ + 1 : NULL;
        bool add_pair = !p->forward_only && pa_ && vd_op_add_relu(net, i) == rr_->layer &&
                        pa_->layer == i + 1 && !split && pa_->n_chunks == 1 &&
                        rr_->n_chunks == 1 && rr_->dy >= 0 && rr_->dx[0] == rr_->dy &&
                        rr_->dx_beta[0] == 0.0f && pa_->dy == rr_->dy && pl->dy == rr_->dy;
        for (int k = 0; add_pair && k < net->layers[pa_->layer].n_in; k++) add_pair &= pa_->dx[k] < 0;
        ck_assert_int_eq(pl->takes_add_relu, add_pair);
        if (add_pair) {
            const vd_tensor *Y = &p->tensors[rr_->y];
            ck_assert(Y->bwd_last >= sb);
        }
        if (pl->dw >= 0) {   /* its own (the largest spans, a split layer), or the one they share */
            const vd_tensor *T = &p->tensors[pl->dw];
            const vd_interval *iv = &p->intervals[T->iv[0]];
            ck_assert(!T->persistent && T->n_iv == 1);
            if (T->layer == i) {
                /* from its first chunk's backward (chunk k-1), or that of the
                 * ReLU that takes its bias gradient (the unit after it), to
                 * its last's */
                int last = 2 * U - 1 - p->first_unit[i], first = last;
                for (int v = 0; v < U; v++) {
                    /* (or the max pool after that ReLU that takes its backward) */
                    bool pooled = v > 0 && p->layers[v].takes_relu &&
                                  p->layers[v - 1].db_unit == u;
                    if ((p->layers[v].layer == i || p->layers[v].db_unit == u || pooled) &&
                        2 * U - 1 - v < first)
                        first = 2 * U - 1 - v;
                }
                ck_assert_uint_eq(T->bytes, (uint64_t)span * 4u);
                ck_assert(iv->first == first && iv->last == last);
            } else {
                ck_assert(!split);
                ck_assert_int_eq(T->layer, -1);
                ck_assert_uint_ge(T->bytes, (uint64_t)span * 4u);
                ck_assert(iv->first <= sb && sb <= iv->last);
            }
        }
    }
    if (!p->forward_only)
        ck_assert(p->steps[2 * U].compute_s == (p->update_in_bwd && net->n_trainable ? 0.0 : prof->sgd_s));
}

/* Random nets x policies with random per-pass options, on a profile whose
 * im2col option needs less workspace forward than backward (and the direct
 * one a little backward only): every invariant holds, the options and
 * workspaces are the requested ones; auto searching the options itself at
 * tight budgets keeps the invariants too and is never slower than dyn. */
static void per_pass_invariants(uint64_t first, uint64_t last) {
    int mixed = 0;
    for (uint64_t seed = first; seed <= last; seed++) {
        int batch = 1 + (int)(seed % 3);
        vd_net net;
        random_net(&net, seed * 13, batch);
        int L = net.n_layers;
        vd_profile prof;
        vd_backend *be = cpu_for_dev(&net, batch, seed % 2 ? &slow_link : &vd_device_cpu, &prof);
        for (int i = 0; i < L; i++) {
            vd_profile_layer *pl = &prof.layers[i];
            if (pl->n_algos < 2) continue;
            pl->algos[0].fwd_workspace = pl->algos[0].workspace / 3;
            pl->algos[0].bwd_workspace = pl->algos[0].workspace;
            pl->algos[1].workspace = pl->algos[1].bwd_workspace = 4096;
            pl->algos[1].fwd_workspace = 0;
            pl->algos[1].bwd_s *= 0.9;   /* direct is the faster backward here */
        }
        /* odd seeds: every option timed alone too, slower than in a pair
         * (check_per_pass: the units the plans leave unpaired take it) */
        for (int i = 0; i < L && seed % 2; i++)
            for (int k = 0; k < prof.layers[i].n_algos; k++)
                prof.layers[i].algos[k].bwd_alone_s = 1.25 * prof.layers[i].algos[k].bwd_s;
        vd_rng r;
        vd_rng_seed(&r, 77, seed);
        int *af = malloc((size_t)L * sizeof *af), *ab = malloc((size_t)L * sizeof *ab);
        ck_assert(af && ab);
        for (int i = 0; i < L; i++) {
            af[i] = rnd(&r, 0, prof.layers[i].n_algos - 1);
            ab[i] = rnd(&r, 0, prof.layers[i].n_algos - 1);
        }
        vd_err e = {0};
        for (int pol = 0; pol < 2 * VD_POLICY_COUNT; pol++) {
            bool free_algos = pol >= VD_POLICY_COUNT;   /* second round: the policy picks */
            vd_plan_opts o;
            vd_plan_opts_init(&o);
            o.batch = batch;
            o.policy = (vd_policy)(pol % VD_POLICY_COUNT);
            o.algos = free_algos ? NULL : af;
            o.algos_bwd = free_algos ? NULL : ab;
            uint64_t mb = 0, none_hwm = 0;
            ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &mb, &e) == 0, "%s", e.msg);
            vd_plan_opts on = o;
            on.policy = VD_POLICY_NONE;
            ck_assert(vd_plan_min_budget(&net, &prof, &on, &none_hwm, &e) == 0);
            if (!free_algos || o.policy != VD_POLICY_DYN) ck_assert_uint_le(mb, none_hwm);
            uint64_t budgets[3] = {0, mb, mb + (none_hwm > mb ? (none_hwm - mb) / 2 : 0)};
            for (int bi = 0; bi < 3; bi++) {
                o.budget = budgets[bi];
                vd_plan p;
                int rc = vd_plan_build(&net, &prof, &o, &p, &e);
                ck_assert_msg(rc == 0, "%s %s budget %llu: %s", net.name, vd_policy_name(o.policy),
                              (unsigned long long)o.budget, e.msg);
                check_plan_invariants(&p, &net);
                check_per_pass(&p, &net, &prof, o.algos, o.algos_bwd);
                check_plan_invariants(p.eval, &net);
                check_per_pass(p.eval, &net, &prof, NULL, NULL);
                if (o.policy == VD_POLICY_DYN && free_algos)   /* the paper's: one option a layer */
                    for (int i = 0; i < L; i++) ck_assert_int_eq(p.layers[i].algo_fwd, p.layers[i].algo_bwd);
                if (o.policy == VD_POLICY_AUTO && free_algos) {
                    for (int i = 0; i < L; i++) mixed += p.layers[i].algo_fwd != p.layers[i].algo_bwd;
                    if (bi > 0) {
                        vd_plan_opts od = o;
                        od.policy = VD_POLICY_DYN;
                        vd_plan d;
                        int rd = vd_plan_build(&net, &prof, &od, &d, &e);
                        if (rd == VD_OK)
                            ck_assert_msg(p.sim.iter_s <= d.sim.iter_s * (1 + 1e-12),
                                          "%s: auto %g s slower than dyn %g s", net.name,
                                          p.sim.iter_s, d.sim.iter_s);
                        if (rd == VD_OK || rd == VD_EBUDGET) vd_plan_free(&d);
                    }
                }
                vd_plan_free(&p);
            }
        }
        free(af);
        free(ab);
        vd_profile_free(&prof);
        be->destroy(be);
        vd_net_free(&net);
    }
    printf("per-pass, seeds %d-%d: auto chose different forward and backward options %d times\n",
           (int)first, (int)last, mixed);
    ck_assert_int_gt(mixed, 0);
}

/* Seeds 1..6 in two tests that run in parallel. */
START_TEST(test_per_pass_invariants_1_2) { per_pass_invariants(1, 2); }
END_TEST

START_TEST(test_per_pass_invariants_3_6) { per_pass_invariants(3, 6); }
END_TEST

/* A synthetic profile where the first convolution's fastest option needs no
 * workspace forward but a large one backward, and its workspace-free option
 * is 3x slower forward, about as fast backward. At the budget of "forward
 * fastest, backward workspace-free" (nothing else to free at that backward
 * step: its operands are x and dy), auto choosing per pass beats every
 * one-option-per-layer plan: the fastest option does not fit, the
 * workspace-free one is slower. */
START_TEST(test_per_pass_beats_one_choice) {
    vd_net net;
    tn_begin(&net, "perpass", 3, 32, 32, 10, 8);
    int x = tn_conv(&net, "big", -1, 16, 3, 1, 1);
    x = tn_relu(&net, "relu", x);
    x = tn_pool(&net, "pool", x, VD_POOL_MAX, 4, 4);
    x = tn_conv(&net, "small", x, 8, 3, 1, 1);
    x = tn_flatten(&net, "flatten", x);
    x = tn_fc(&net, "fc", x, 10);
    tn_loss(&net, x);
    tn_finish(&net);
    int L = net.n_layers, batch = 8;
    vd_profile prof;
    vd_err e = {0};
    ck_assert(vd_profile_analytic(&net, batch, &vd_device_h200, &prof, &e) == 0);
    vd_profile_algo *f = &prof.layers[0].algos[0], *m = &prof.layers[0].algos[1];
    ck_assert_int_eq(prof.layers[0].n_algos, 2);
    uint64_t big = (uint64_t)8 << 20;
    f->fwd_s = 1e-3; f->bwd_s = 2e-3; f->fwd_workspace = 0; f->bwd_workspace = f->workspace = big;
    m->fwd_s = 3e-3; m->bwd_s = 2.2e-3; m->fwd_workspace = m->bwd_workspace = m->workspace = 0;
    int af[16] = {0}, ab[16] = {0};
    ck_assert_int_le(L, 16);
    ab[0] = 1;
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = batch;
    o.policy = VD_POLICY_NONE;
    o.algos = af;
    o.algos_bwd = ab;
    uint64_t B = 0;
    ck_assert(vd_plan_min_budget(&net, &prof, &o, &B, &e) == 0);
    /* auto, free to choose per pass */
    vd_plan_opts oa;
    vd_plan_opts_init(&oa);
    oa.batch = batch;
    oa.policy = VD_POLICY_AUTO;
    oa.budget = B;
    vd_plan pa;
    ck_assert_msg(vd_plan_build(&net, &prof, &oa, &pa, &e) == 0, "%s", e.msg);
    check_plan_invariants(&pa, &net);
    ck_assert_int_eq(pa.layers[0].algo_fwd, 0);
    ck_assert_int_eq(pa.layers[0].algo_bwd, 1);
    /* every one-option-per-layer assignment of the two convolutions, auto's
     * disposition search on top; and dyn */
    double best_one = INFINITY;
    for (int combo = 0; combo < 4; combo++) {
        int a1[16] = {0};
        a1[0] = combo & 1;
        a1[3] = combo >> 1;
        vd_plan_opts o1 = oa;
        o1.algos = a1;
        o1.algos_bwd = a1;
        vd_plan p1;
        int rc = vd_plan_build(&net, &prof, &o1, &p1, &e);
        ck_assert(rc == VD_OK || rc == VD_EBUDGET);
        if (rc == VD_OK && p1.sim.iter_s < best_one) best_one = p1.sim.iter_s;
        if ((combo & 1) == 0) ck_assert_int_eq(rc, VD_EBUDGET);   /* fastest for "big": no room */
        vd_plan_free(&p1);
    }
    vd_plan_opts od = oa;
    od.policy = VD_POLICY_DYN;
    vd_plan pd;
    int rd = vd_plan_build(&net, &prof, &od, &pd, &e);
    if (rd == VD_OK && pd.sim.iter_s < best_one) best_one = pd.sim.iter_s;
    if (rd == VD_OK || rd == VD_EBUDGET) vd_plan_free(&pd);
    ck_assert(isfinite(best_one));
    printf("per-pass auto %.3f ms, best one-option plan %.3f ms\n", pa.sim.iter_s * 1e3, best_one * 1e3);
    /* the forward of "big" alone saves 2 ms: well above the sim's rounding */
    ck_assert_msg(pa.sim.iter_s < best_one - 1e-3, "per-pass %g s, one option %g s", pa.sim.iter_s,
                  best_one);
    vd_plan_free(&pa);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_dyn_prefers_fast) {
    /* With no budget pressure dyn is none with the fastest algorithms. */
    vd_net net;
    tn_resnet(&net, 4);
    vd_profile prof;
    vd_err e = {0};
    analytic_profile(&net, 4, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(4, VD_POLICY_DYN);
    vd_plan p;
    ck_assert(vd_plan_build(&net, &prof, &o, &p, &e) == 0);
    ck_assert_int_eq(p.offload_policy, VD_POLICY_NONE);
    for (int i = 0; i < net.n_layers; i++) ck_assert_int_eq(p.layers[i].algo_fwd, 0);
    uint64_t none_hwm = p.hwm;
    vd_plan_free(&p);
    /* At its minimum budget dyn must offload and/or use min-workspace convs. */
    uint64_t mb;
    ck_assert(vd_plan_min_budget(&net, &prof, &o, &mb, &e) == 0);
    ck_assert_uint_lt(mb, none_hwm);
    o.budget = mb;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    bool changed = p.offload_policy != VD_POLICY_NONE;
    for (int i = 0; i < net.n_layers; i++) changed |= p.layers[i].algo_fwd != 0;
    ck_assert(changed);
    check_plan_invariants(&p, &net);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* VGG-16 at batch 256 on the analytic H200 profile, 12 GiB: auto (ours)
 * predicts a faster iteration than the paper's policies, recomputes the
 * first block's feature map, and stays within 10% of no offload (which needs
 * 16.4 GiB). All predictions go to the test log. */
START_TEST(test_vgg16_auto_beats_dyn) {
    vd_net net;
    load_shipped_net(&net, "vgg16.yaml", 256);
    vd_err e = {0};
    vd_profile prof;
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    double t[VD_POLICY_COUNT];
    uint64_t budget = (uint64_t)12 << 30;
    for (int k = 0; k < VD_POLICY_COUNT; k++) {
        vd_plan_opts o = plan_opts(256, (vd_policy)k);
        o.budget = k == VD_POLICY_NONE ? 0 : budget;
        vd_plan p;
        int rc = vd_plan_build(&net, &prof, &o, &p, &e);
        ck_assert_msg(rc == 0, "vgg16 %s: %s", vd_policy_name(o.policy), e.msg);
        check_plan_invariants(&p, &net);
        t[k] = p.sim.iter_s;
        char b1[32], b2[32];
        int n_off = 0;
        for (int q = 0; q < p.n_tensors; q++) n_off += p.tensors[q].offload;
        printf("vgg16 b256 analytic h200, policy %-4s budget %-9s: predicted %.1f ms/iter, pool %s, "
               "offloaded %d tensors, recomputed %d (%.2f ms)\n",
               vd_policy_name(o.policy), k == VD_POLICY_NONE ? "its own" : vd_fmt_bytes(budget, b1, sizeof b1),
               p.sim.iter_s * 1e3, vd_fmt_bytes(p.hwm, b2, sizeof b2), n_off, p.n_recomputed,
               p.recompute_s * 1e3);
        if (k == VD_POLICY_AUTO) {
            ck_assert_uint_le(p.hwm, budget);
            /* the 3 GiB output of features.0 (relu features.1 in place) is recomputed */
            int f0 = vd_net_find(&net, "features.0");
            ck_assert_int_ge(f0, 0);
            ck_assert_msg(p.tensors[p.layers[f0].y].recompute, "features.0:y is not recomputed");
        }
        vd_plan_free(&p);
    }
    ck_assert_msg(t[VD_POLICY_AUTO] < t[VD_POLICY_DYN], "auto %g s not faster than dyn %g s",
                  t[VD_POLICY_AUTO], t[VD_POLICY_DYN]);
    ck_assert_msg(t[VD_POLICY_AUTO] < t[VD_POLICY_ALL] && t[VD_POLICY_AUTO] < t[VD_POLICY_CONV],
                  "auto slower than a paper policy");
    ck_assert_msg(t[VD_POLICY_AUTO] <= 1.10 * t[VD_POLICY_NONE], "auto %g s more than 10%% over none %g s",
                  t[VD_POLICY_AUTO], t[VD_POLICY_NONE]);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* nets/SPEC at batch 256 in math m with the profile tests/plan/data/FILE
 * (made for m). */
static void load_net_math(const char *spec, const char *file, vd_math m, vd_net *net,
                          vd_profile *prof) {
    load_shipped_net(net, spec, 256);
    net->train.math = m;
    const char *src = getenv("VD_SRCDIR");
    ck_assert_ptr_nonnull(src);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/plan/data/%s", src, file);
    vd_err e = {0};
    ck_assert_msg(vd_profile_load(path, net, 256, prof, &e) == 0, "%s", e.msg);
}

/* The measured profiles in tests/plan/data, made before the busy copy rates
 * existed, still load: no busy rates, so the simulator's copies run at their
 * files' rates (vd_device_busy_bw gives those back), as before. */
START_TEST(test_profiles_without_busy_rates) {
    static const struct { const char *spec, *file; vd_math m; } files[] = {
        {"resnet50.yaml", "resnet50-b256-h200-fp32-s7.json", VD_MATH_FP32},
        {"resnet50.yaml", "resnet50-b256-h200-tf32-s11.json", VD_MATH_TF32},
        {"vgg16.yaml", "vgg16-b256-h100-bf16.json", VD_MATH_BF16},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-api.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-mixed.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-s10c.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-s5.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-s9.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-s9c-perturbed.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-fp32-s9c.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-fp32.json", VD_MATH_FP32},
        {"vgg16.yaml", "vgg16-b256-h200-tf32-s10c.json", VD_MATH_TF32},
    };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        vd_net net;
        vd_profile prof;
        load_net_math(files[k].spec, files[k].file, files[k].m, &net, &prof);
        const vd_device_params *d = &prof.dev;
        ck_assert_msg(d->d2h_bw_busy == 0 && d->h2d_bw_busy == 0 && d->both_bw_busy == 0, "%s",
                      files[k].file);
        ck_assert(vd_device_busy_bw(d, VD_COPY_D2H) == d->d2h_bw);
        ck_assert(vd_device_busy_bw(d, VD_COPY_H2D) == d->h2d_bw);
        ck_assert(vd_device_busy_bw(d, VD_COPY_BOTH) == d->both_bw);
        vd_profile_free(&prof);
        vd_net_free(&net);
    }
}
END_TEST

/* vd_device_busy_from_pass: a direction the pass timed takes the pass's
 * rate, one it did not (0) keeps the kernel's, a profile without busy
 * rates (0: the idle ones serve) stays without, and both ways scale by the
 * mean of the two directions' changes. Exact: the same arithmetic. */
START_TEST(test_busy_from_pass) {
    vd_device_params d = {0};
    d.d2h_bw_busy = 52e9;
    d.h2d_bw_busy = 55e9;
    d.both_bw_busy = 100e9;
    vd_device_busy_from_pass(&d, 48e9, 0);
    ck_assert(d.d2h_bw_busy == 48e9 && d.h2d_bw_busy == 55e9);
    ck_assert(d.both_bw_busy == 100e9 * (0.5 * (48e9 / 52e9 + 1.0)));
    vd_device_busy_from_pass(&d, 0, 0);
    ck_assert(d.d2h_bw_busy == 48e9 && d.h2d_bw_busy == 55e9);
    vd_device_params z = {0};
    z.d2h_bw = z.h2d_bw = 50e9;
    vd_device_busy_from_pass(&z, 40e9, 45e9);
    ck_assert(z.d2h_bw_busy == 0 && z.h2d_bw_busy == 0 && z.both_bw_busy == 0);
    ck_assert(vd_device_busy_bw(&z, VD_COPY_D2H) == 50e9);
}
END_TEST

static void load_vgg16_math(const char *file, vd_math m, vd_net *net, vd_profile *prof) {
    load_net_math("vgg16.yaml", file, m, net, prof);
}

static void load_vgg16_with(const char *file, vd_net *net, vd_profile *prof) {
    load_vgg16_math(file, VD_MATH_FP32, net, prof);
}

/* fp32 VGG-16 b256 on profile file planned as vdnn-plan and vdnn-train
 * plan it (the ReLUs in place, captured plans priced replayed): auto's
 * options at budget. */
static vd_plan_opts load_vgg16_auto(const char *file, uint64_t budget, vd_net *net,
                                    vd_profile *prof) {
    load_vgg16_with(file, net, prof);
    vd_schedule_inplace(net);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.graph = VD_GRAPH_AUTO;
    o.budget = budget;
    return o;
}

/* t[0]: no offload's predicted iteration, t[1]: auto's at 12 GiB; each plan
 * fits (auto's within the budget) and keeps the plan invariants. */
static void none_and_auto_12g(const vd_net *net, const vd_profile *prof, double t[2]) {
    for (int k = 0; k < 2; k++) {
        vd_plan_opts o = plan_opts(256, k ? VD_POLICY_AUTO : VD_POLICY_NONE);
        o.budget = k ? (uint64_t)12 << 30 : 0;
        vd_plan p;
        vd_err e = {0};
        ck_assert_msg(vd_plan_build(net, prof, &o, &p, &e) == 0, "%s", e.msg);
        check_plan_invariants(&p, net);
        ck_assert(p.feasible && (!k || p.hwm <= o.budget));
        t[k] = p.sim.iter_s;
        vd_plan_free(&p);
    }
}

/* VGG-16 at batch 256 with profiles measured on the H200 (fp32; their conv
 * options include the split "b/k" ones): at 12 GiB auto fits, splits the
 * batch (split options, or layers in chunks: on vgg16-b256-h200-fp32.json
 * the split searched after the unsplit plan, 400.0 ms against 404.5 with
 * four split options), and predicts at most max_over over no offload.
 *
 * vgg16-b256-h200-fp32.json (split options whole only): at most 13%.
 * (Measured on the GPU from it: none 0.363 s, auto 0.411 s, predicted
 * 0.408 s.) The bound fails without the refine step that also tries slower
 * options with less workspace: that search stopped at 0.431 s (+19%), with a
 * 14 ms prefetch stall before bwd features.12, whose 3.45 GiB option left the
 * prefetch no room.
 *
 * vgg16-b256-h200-fp32-mixed.json (later, with the mixed split options such
 * as "b/32 w": backward-data at the whole batch, backward-filter in 32
 * chunks): at most 10%, and a mixed option is used. Fails without the kick
 * search after refine (refine alone stops at 407.7 ms, +12%; with it
 * 398.8 ms, +9.5%).
 *
 * vgg16-b256-h200-fp32-api.json (with the per-layer conv API choice,
 * measured in a 12 GiB auto run, 0.399 s there against 0.3495 s without
 * offload): at most 10%. Fails without the search's extra starts and the
 * repaired kicks (393.3 ms against 350.3, +12%; with them 381.4 against
 * 347.5 with input staging, +9.8%). */
static void check_vgg16_measured(const char *file, double max_over, bool want_mixed,
                                 double max_auto_s) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with(file, &net, &prof);
    vd_err e = {0};
    double t[2], lbs[2];
    const uint64_t budget = (uint64_t)12 << 30;
    for (int k = 0; k < 2; k++) {
        vd_plan_opts o = plan_opts(256, k ? VD_POLICY_AUTO : VD_POLICY_NONE);
        o.budget = k ? budget : 0;
        vd_plan p;
        ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
        check_plan_invariants(&p, &net);
        t[k] = p.sim.iter_s;
        lbs[k] = vd_plan_lower_bound(&net, &prof, &p, k ? budget : p.budget);
        ck_assert_msg(lbs[k] <= p.sim.iter_s, "bound %g s over the prediction %g s", lbs[k],
                      p.sim.iter_s);
        int split = 0, mixed = 0;
        for (int l = 0; l < net.n_layers; l++) {
            const char *lab[2] = {p.layers[l].algo_label, p.layers[l].algo_bwd_label};
            for (int q = 0; q < 2; q++) {
                split += !strncmp(lab[q], "b/", 2);
                mixed += !strncmp(lab[q], "b/", 2) && strchr(lab[q], ' ') != NULL;
            }
        }
        printf("vgg16 b256 %s, %s: predicted %.1f ms/iter, pool %.2f GiB, %d passes with a split "
               "option (%d mixed)\n", file, k ? "auto 12 GiB" : "none", p.sim.iter_s * 1e3,
               (double)p.hwm / (1 << 30), split, mixed);
        if (k) {
            ck_assert(p.feasible);
            ck_assert_uint_le(p.hwm, budget);
            ck_assert_msg(split >= 2 || p.n_units > p.n_layers, "%s: the batch not split", file);
            if (want_mixed) ck_assert_int_ge(mixed, 1);
        } else {
            /* no offload: each layer the option of the least forward +
             * backward time, in both passes (a split one where it was timed
             * so: two passes of vgg16-b256-h200-fp32-s5.json) */
            for (int l = 0; l < net.n_layers; l++) {
                const vd_profile_layer *pl = &prof.layers[l];
                double best = pl->algos[0].fwd_s + pl->algos[0].bwd_s;
                for (int a = 1; a < pl->n_algos; a++)
                    if (pl->algos[a].fwd_s + pl->algos[a].bwd_s < best)
                        best = pl->algos[a].fwd_s + pl->algos[a].bwd_s;
                const vd_profile_algo *c = &pl->algos[p.layers[l].algo_fwd];
                ck_assert_msg(p.layers[l].algo_fwd == p.layers[l].algo_bwd &&
                              c->fwd_s + c->bwd_s == best,
                              "%s: layer %s without a budget runs a slower option", file,
                              net.layers[l].name);
            }
        }
        vd_plan_free(&p);
    }
    ck_assert_msg(t[1] <= (1.0 + max_over) * t[0], "%s: auto at 12 GiB %g s more than %.0f%% over "
                  "none %g s", file, t[1], 100.0 * max_over, t[0]);
    /* no slower than the pinned plan (a faster search must plan no worse);
     * 1e-9 relative: the printed value's rounding, not a tolerance of the
     * search */
    if (max_auto_s > 0)
        ck_assert_msg(t[1] <= max_auto_s * (1.0 + 1e-9), "%s: auto at 12 GiB %.6f ms, before %.6f ms",
                      file, t[1] * 1e3, max_auto_s * 1e3);
    /* the bound sees the budget: at 12 GiB features.2's backward cannot have
     * its fastest option's workspace beside its three 3 GiB operands */
    printf("  lower bound: none's budget %.3f ms, 12 GiB %.3f ms\n", lbs[0] * 1e3, lbs[1] * 1e3);
    ck_assert_msg(lbs[1] > lbs[0], "bound at 12 GiB %g s not above none's %g s", lbs[1], lbs[0]);
    vd_profile_free(&prof);
    vd_net_free(&net);
}

/* One test per profile (about 10 s of auto search each): they run in
 * parallel. */
START_TEST(test_vgg16_measured_profile) {
    check_vgg16_measured("vgg16-b256-h200-fp32.json", 0.13, false, 0.0);
}
END_TEST

START_TEST(test_vgg16_measured_profile_mixed) {
    check_vgg16_measured("vgg16-b256-h200-fp32-mixed.json", 0.10, true, 0.0);
}
END_TEST

START_TEST(test_vgg16_measured_profile_api) {
    /* 381.446 ms with one kick chain, 371.387 with three (or four) */
    check_vgg16_measured("vgg16-b256-h200-fp32-api.json", 0.10, true, 371.3875e-3);
}
END_TEST

/* An H200 profile with copies timed beside the net's passes and split
 * options at 8 / 4 / 1 GiB / 256 MiB of workspace: auto at 12 GiB plans
 * 362.542 ms with every start refining its own plan (373.494 when each goes
 * on from the fastest seen before), pinned there. */
START_TEST(test_vgg16_split_options_profile) {
    check_vgg16_measured("vgg16-b256-h200-fp32-s5.json", 0.10, true, 362.5425e-3);
}
END_TEST

/* An H200 VGG-16 profile (vgg16-b256-h200-fp32-s9.json; auto at 12 GiB
 * predicted 357.306 ms, 0.945x of no offload measured), as measured and with
 * every option's pass times scaled by a seeded factor in [0.97, 1.03] (the
 * spread of a pass's time between two measurements). The search has two
 * basins there: 367 ms (features.2:y offloaded, features.5-6 recomputed,
 * 13 ms) and 355-358 (features.2:y kept, features.5:y offloaded). Without
 * the pair trades (swap_search) the kicks leave it in the first on seeds 2,
 * 3 and 4 of these (0.922-0.927x of no offload); the target is 0.94x. */
static double vgg16_perturbed_ratio(uint32_t seed) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with("vgg16-b256-h200-fp32-s9.json", &net, &prof);
    if (seed) {
        vd_rng r;
        vd_rng_seed(&r, seed, 9);
        for (int l = 0; l < prof.n_layers; l++)
            for (int a = 0; a < prof.layers[l].n_algos; a++) {
                vd_profile_algo *al = &prof.layers[l].algos[a];
                al->fwd_s *= 0.97 + 0.06 * vd_rng_uniform(&r);
                al->bwd_s *= 0.97 + 0.06 * vd_rng_uniform(&r);
            }
    }
    double t[2];
    none_and_auto_12g(&net, &prof, t);
    printf("vgg16 b256 perturbed profile, seed %u: none %.3f ms, auto 12 GiB %.3f ms (%.4fx)\n", seed,
           t[0] * 1e3, t[1] * 1e3, t[0] / t[1]);
    vd_profile_free(&prof);
    vd_net_free(&net);
    return t[0] / t[1];
}

/* Auto's plan for net (b256) under prof at budget fits and predicts at
 * most `within` times the lower bound with the copies (what: the
 * printed label). */
static void auto_within_bound(const char *what, const vd_net *net, const vd_profile *prof,
                              uint64_t budget, double within) {
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = budget;
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(net, prof, &o, &p, &e) == 0, "%s", e.msg);
    vd_plan_bound b;
    ck_assert_msg(vd_plan_copy_bound(net, prof, &p, o.budget, &b, &e) == 0, "%s", e.msg);
    printf("%s at %llu: auto %.3f ms, bound %.3f ms\n", what, (unsigned long long)o.budget,
           1e3 * p.sim.iter_s, 1e3 * b.bound_s);
    ck_assert_msg(p.feasible && b.bound_s > 0 && p.sim.iter_s <= within * b.bound_s,
                  "auto %.17g s, bound %.17g s", p.sim.iter_s, b.bound_s);
    vd_plan_free(&p);
}

/* A measured H100 bf16 profile (tests/plan/data/vgg16-b256-h100-bf16.json)
 * at 6 GiB, 6% above auto's floor: the greedy of every start ends over the
 * budget (75-91 ms plans that do not fit), and the search used to fall back
 * on the paper's conv policy, 169.5 ms. Starting from the configurations
 * that fit most easily (fitting_start in auto.c), the local search finds
 * 73.2 ms: within 10% of the lower bound with the copies (69.6 ms). */
START_TEST(test_vgg16_bf16_fitting_start) {
    vd_net net;
    vd_profile prof;
    load_vgg16_math("vgg16-b256-h100-bf16.json", VD_MATH_BF16, &net, &prof);
    auto_within_bound("vgg16 b256 bf16 h100", &net, &prof, 6ull << 30, 1.10);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* VGG-16 b256 bf16 on the analytic H200 profile at 3.14 GiB (the s18
 * grid's second budget): auto's plan within 5% of the lower bound with the
 * copies. It was 5.1% above: one exchange (search_exchanges: features.7's
 * output recomputed -> offloaded, features.5's offloaded -> recomputed,
 * two maps of the same size) makes it 3.4% (140.759 against 136.151 ms;
 * docs/results/2026-12-06-s21/bound-gap.md). */
START_TEST(test_vgg16_bf16_exchange) {
    vd_net net;
    load_shipped_net(&net, "vgg16.yaml", 256);
    net.train.math = VD_MATH_BF16;
    vd_profile prof;
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    auto_within_bound("vgg16 b256 bf16 analytic h200", &net, &prof, 3371894272ull, 1.05);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* VGG-16's chunks (vd_plan_opts.chunks, malloc'd): features.0 .. features.last
 * in k chunks, the rest whole. */
static int *features_chunks(const vd_net *net, int last, int k) {
    int *ch = calloc((size_t)net->n_layers, sizeof *ch);
    ck_assert_ptr_nonnull(ch);
    for (int i = 0; i <= last; i++) {
        char name[32];
        snprintf(name, sizeof name, "features.%d", i);
        int l = vd_net_find(net, name);
        ck_assert_int_ge(l, 0);
        ch[l] = k;
    }
    return ch;
}

/* Auto's coarser split (plan.c split_first): on the measured H100 bf16
 * profile at 5 GiB, below the unsplit floor, the finest split (k = 8 over
 * features.0-23, the layers whose output or an input holds at least an
 * eighth of the largest map) plans 77.15 ms; the next coarser one (k = 4
 * over features.0-16) on an eighth of the effort 76.09. Auto must split
 * some layer in 4 and plan faster than the finest split alone. */
START_TEST(test_vgg16_bf16_coarser_split) {
    vd_net net;
    vd_profile prof;
    load_vgg16_math("vgg16-b256-h100-bf16.json", VD_MATH_BF16, &net, &prof);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = 5ull << 30;
    vd_plan p, f;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    int *ch = features_chunks(&net, 23, 8);
    o.chunks = ch;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &f, &e) == 0, "%s", e.msg);
    int k4 = 0;
    for (int u = 0; u < p.n_units; u++) k4 += p.layers[u].n_chunks == 4;
    printf("vgg16 b256 bf16 h100 at 5 GiB: auto %.3f ms (%d units in 4 chunks), the finest split "
           "alone %.3f ms\n", 1e3 * p.sim.iter_s, k4, 1e3 * f.sim.iter_s);
    ck_assert_int_gt(k4, 0);
    ck_assert_msg(p.sim.iter_s < f.sim.iter_s, "auto %.17g s, k = 8 %.17g s", p.sim.iter_s,
                  f.sim.iter_s);
    free(ch);
    vd_plan_free(&p);
    vd_plan_free(&f);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The coarser split's own effort (plan.c AUTO_COARSER_SHARE): fp32 on
 * session 34's H100 profile at 8 GiB, where the coarser split (k = 4) wins
 * over the finest, planned 410.853 ms with the coarser search on an eighth
 * of the effort cap and plans 393.114 on a quarter (its short search ended
 * far from what a longer one reaches). 400 ms: between the two. */
START_TEST(test_vgg16_fp32_coarser_split_effort) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with("vgg16-b256-h100-fp32-s34.json", &net, &prof);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = 8ull << 30;
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    check_plan_invariants(&p, &net);
    int k4 = 0;
    for (int u = 0; u < p.n_units; u++) k4 += p.layers[u].n_chunks == 4;
    printf("vgg16 b256 fp32 h100 s34 at 8 GiB: auto %.3f ms (%d units in 4 chunks)\n",
           1e3 * p.sim.iter_s, k4);
    ck_assert(p.feasible && p.hwm <= o.budget);
    ck_assert_int_gt(k4, 0);
    ck_assert_msg(p.sim.iter_s < 0.400, "auto %.6f ms", 1e3 * p.sim.iter_s);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The flips (plan.c flip_recomputes): fp32 VGG-16 b256 on session 34's H100
 * profile at 10943349430 bytes (the sweep's budget there), auto's plan
 * (features.0 .. 4 in 4 chunks) recomputes features.2's output, whose
 * writer's forward takes 22.2 ms: offloaded instead, the options searched
 * again, 378.433 -> 357.083 ms against the copies' bound of 345.378
 * (docs/results/2026-12-07-s36-vggfloor). 1.05: the issue's "within 5% of
 * the bound"; without the flips 1.096. */
START_TEST(test_vgg16_fp32_flip) {
    vd_net net;
    vd_profile prof;
    vd_plan_opts o = load_vgg16_auto("vgg16-b256-h100-fp32-s34.json", 10943349430ull, &net, &prof);
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    check_plan_invariants(&p, &net);
    vd_plan_bound b;
    ck_assert_msg(vd_plan_copy_bound(&net, &prof, &p, o.budget, &b, &e) == 0, "%s", e.msg);
    printf("vgg16 b256 fp32 h100 s34 at 10.94 GB: auto %.3f ms, bound %.3f ms\n",
           1e3 * p.sim.iter_s, 1e3 * b.bound_s);
    ck_assert(p.feasible && p.hwm <= o.budget);
    ck_assert_msg(b.bound_s > 0 && p.sim.iter_s <= 1.05 * b.bound_s, "auto %.6f ms, bound %.6f ms",
                  1e3 * p.sim.iter_s, 1e3 * b.bound_s);
    int t = -1;   /* features.2's output (chunk 0's tensor) offloaded */
    for (int k = 0; k < p.n_tensors; k++)
        if (p.tensors[k].kind == VD_T_ACT && p.tensors[k].layer == vd_net_find(&net, "features.2") &&
            p.layers[p.tensors[k].unit].chunk == 0)
            t = k;
    ck_assert_int_ge(t, 0);
    ck_assert(p.tensors[t].offload && !p.tensors[t].recompute);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* A split plan wins over an unsplit one that fits only where it is
 * predicted AUTO_SPLIT_MARGIN (3%) faster (plan.c): fp32 on session 35's
 * H200 profile (chunk times on the options' setup engines, chunk
 * workspaces) at 12 GiB the unsplit search plans 340.920 ms and
 * features.0 .. features.16 in 4 chunks (auto's split at k = 4) 338.685,
 * within the margin (that split plan ran 0.3516 s, session 34's unsplit
 * one 0.3366 on the same card, docs/results/2026-12-07-s35): not taken.
 * The largest maps' layers alone in 4 chunks (features.0 .. features.4,
 * split_largest) plan 327.890, over the margin faster: auto's plan. At 10
 * GiB, where no unsplit plan fits, auto splits too. */
START_TEST(test_vgg16_fp32_split_margin) {
    vd_net net;
    vd_profile prof;
    vd_plan_opts o = load_vgg16_auto("vgg16-b256-h200-fp32-s35.json", 12ull << 30, &net, &prof);
    vd_plan p, f, u;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    check_plan_invariants(&p, &net);
    int *ch = features_chunks(&net, 16, 4), *whole = features_chunks(&net, 0, 1);
    vd_plan_opts fo = o, uo = o;
    fo.chunks = ch;
    uo.chunks = whole;
    ck_assert_msg(vd_plan_build(&net, &prof, &fo, &f, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_plan_build(&net, &prof, &uo, &u, &e) == 0, "%s", e.msg);
    printf("vgg16 b256 fp32 h200 s35 at 12 GiB: auto %.3f ms, unsplit %.3f ms, features.0 .. "
           "16 in 4 chunks %.3f ms\n", 1e3 * p.sim.iter_s, 1e3 * u.sim.iter_s, 1e3 * f.sim.iter_s);
    ck_assert_msg(f.sim.iter_s < u.sim.iter_s && u.sim.iter_s * 0.97 < f.sim.iter_s,
                  "unsplit %.6f ms, split %.6f ms", 1e3 * u.sim.iter_s, 1e3 * f.sim.iter_s);
    int largest = vd_net_find(&net, "features.4");
    for (int i = 0; i < net.n_layers; i++)
        ck_assert_msg(p.layers[p.first_unit[i]].n_chunks == (i <= largest ? 4 : 1),
                      "layer %s in %d chunks", net.layers[i].name,
                      p.layers[p.first_unit[i]].n_chunks);
    ck_assert_msg(p.sim.iter_s < u.sim.iter_s * 0.97, "auto %.6f ms, unsplit %.6f ms",
                  1e3 * p.sim.iter_s, 1e3 * u.sim.iter_s);
    vd_plan_free(&p);
    vd_plan_free(&f);
    vd_plan_free(&u);
    free(ch);
    free(whole);
    o.budget = 10ull << 30;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    int split = 0;
    for (int v = 0; v < p.n_units; v++) split += p.layers[v].n_chunks > 1;
    ck_assert(p.feasible && p.hwm <= o.budget);
    ck_assert_int_gt(split, 0);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* VGG-16 b256 fp32 on the H200 api profile at 7.87 GiB (the s18 grid's
 * second budget): a recomputed map offloaded for two offloaded ones of
 * about its bytes together recomputed (search_exchanges' pairs:
 * features.2's output for features.4's and features.5's) takes auto from
 * 396.132 ms, 9.5% above the bound of 361.873, to 384.288, 6.2% above
 * (docs/results/2026-12-06-s22/bound-gap.md). 1.07: between the two, so
 * that the test fails without the pairs and passes with a plan faster
 * still. */
START_TEST(test_vgg16_api_pair_exchange) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with("vgg16-b256-h200-fp32-api.json", &net, &prof);
    auto_within_bound("vgg16 b256 fp32 api", &net, &prof, 8448573952ull, 1.07);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* GoogLeNet b256 fp32 on the analytic H200 profile at its floor in the s18
 * grid (2520252160 bytes): the copies stall the compute (189 of 244.087
 * ms), and recomputing one offloaded map alone does not gain; runs of
 * them recomputed together (search_recompute_runs, an inception branch at
 * a time) take auto to 146.927 ms (docs/results/2026-12-06-s22/bound-gap.md).
 * 200 ms: between the two, so that the test fails without the runs. */
START_TEST(test_googlenet_floor_runs) {
    vd_net net;
    load_shipped_net(&net, "googlenet.yaml", 256);
    vd_profile prof;
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = 2520252160ull;
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    printf("googlenet b256 fp32 analytic h200 at %llu: auto %.3f ms\n",
           (unsigned long long)o.budget, 1e3 * p.sim.iter_s);
    ck_assert_msg(p.feasible && p.sim.iter_s < 0.200, "auto %.17g s", p.sim.iter_s);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_vgg16_two_basins_perturbed) {
    /* as measured: the plan the H200 ran, pinned (1e-9: rounding) */
    double r = vgg16_perturbed_ratio(0);
    ck_assert_msg(r >= 337.7060e-3 / 357.3061e-3 * (1.0 - 1e-9), "%.5fx", r);
    /* perturbed: at least the 0.94x target on each seed */
    for (uint32_t seed = 2; seed <= 4; seed++) {   /* the three that failed */
        r = vgg16_perturbed_ratio(seed);
        ck_assert_msg(r >= 0.94, "seed %u: auto at 12 GiB %.4fx of no offload", seed, r);
    }
}
END_TEST

/* More memory never plans slower: auto's predicted iteration at b256 fp32
 * over budgets ascending, each plan fitting its budget, is non-increasing
 * (relative slack 1e-9: the same simulation summed in another order), a
 * split plan's counted as auto weighs it against an unsplit one, its
 * prediction over 1 - AUTO_SPLIT_MARGIN (plan.c: split plans run a few
 * percent over their predictions; on the s5 profile 11 GiB plans 356.003
 * ms split, 12 GiB 361.319 unsplit, where the split plan predicts 1.5%
 * faster).
 * VGG-16's two sweeps cross the unsplit floor, below which auto
 * splits the large layers in batch chunks; above it the split plans still
 * fit, and faster where their convolutions' workspace lets them take the
 * fastest options: before plan.c's split_first, the measured H200 profile
 * (s5) planned 357.5 ms at 10 GiB (split), 382.6 at 11 and 361.3 at 12
 * (unsplit), the analytic one 419.8 ms at 8.4 GB (split) and 437.9 at
 * 11.3 GB (unsplit). Not yet everywhere: at 14.2 GB the analytic profile's
 * unsplit search plans 418.06 ms, 0.1% over the split plan at 11.3 GB
 * (docs/results/2026-12-06-s19/search.md). GoogLeNet (analytic H200):
 * 54.47 ms at 4.6 GiB, and 57.30 at 4.98 before auto.c's far_start, whose
 * search refined only its first start (54.29 now); between 4.3 and 4.6 GiB
 * it still plans 0.3% slower with more memory. All predictions go to the
 * test log. */
static void check_monotone(const vd_net *net, const vd_profile *prof, const uint64_t *budgets,
                           int n, const char *what) {
    /* what: "NET PROFILE" */
    const double split_margin = 0.03;   /* plan.c AUTO_SPLIT_MARGIN */
    double prev = INFINITY;
    for (int i = 0; i < n; i++) {
        vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
        o.budget = budgets[i];
        vd_plan p;
        vd_err e = {0};
        ck_assert_msg(vd_plan_build(net, prof, &o, &p, &e) == 0, "%s %llu: %s", what,
                      (unsigned long long)budgets[i], e.msg);
        check_plan_invariants(&p, net);
        ck_assert(p.feasible && p.hwm <= o.budget);
        const bool split = p.n_units > net->n_layers;
        const double t = split ? p.sim.iter_s / (1.0 - split_margin) : p.sim.iter_s;
        printf("%s b256 at %llu B: auto %.3f ms (%d units)\n", what,
               (unsigned long long)budgets[i], p.sim.iter_s * 1e3, p.n_units);
        ck_assert_msg(t <= prev * (1.0 + 1e-9), "%s: auto %.6f ms at %llu B (as weighed), "
                      "%.6f ms at the budget before", what, t * 1e3,
                      (unsigned long long)budgets[i], prev * 1e3);
        prev = t;
        vd_plan_free(&p);
    }
}

START_TEST(test_budget_monotone) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with("vgg16-b256-h200-fp32-s5.json", &net, &prof);
    const uint64_t gib = (uint64_t)1 << 30;
    const uint64_t s5[] = {10 * gib, 11 * gib, 12 * gib, 14 * gib};
    check_monotone(&net, &prof, s5, 4, "vgg16 s5");
    vd_profile_free(&prof);
    vd_net_free(&net);
    load_shipped_net(&net, "vgg16.yaml", 256);
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    /* (docs/results/2026-12-06-s18/grid.tsv's budgets) */
    const uint64_t an[] = {5530283008ull, 8433137664ull, 11335992320ull};
    check_monotone(&net, &prof, an, 3, "vgg16 analytic");
    vd_profile_free(&prof);
    vd_net_free(&net);
    load_shipped_net(&net, "googlenet.yaml", 256);
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    const uint64_t gn[] = {(uint64_t)(4.6 * (double)gib), 5345545984ull};
    check_monotone(&net, &prof, gn, 2, "googlenet analytic");
    vd_profile_free(&prof);
    vd_net_free(&net);
    /* session 16's measured H100 profile: 10 GiB planned 129.8 ms against
     * 123.4 at 9 until the bound's start from the tighter seed
     * (AUTO_SEED_TIGHT), 121.7 now */
    load_net_math("resnet152.yaml", "resnet152-b256-h100-bf16-s16.json", VD_MATH_BF16, &net, &prof);
    const uint64_t r152[] = {9 * gib, 10 * gib};
    check_monotone(&net, &prof, r152, 2, "resnet152 s16");
    vd_profile_free(&prof);
    vd_net_free(&net);
    /* session 28's measured H200 profile: 18.30 GiB planned 91.086 ms
     * against 87.445 at 16.76 GiB while RC_START ran first where the copies'
     * bound recomputes nothing (its refine took the whole effort cap),
     * 86.795 now (docs/results/2026-12-07-s29/starts.md; vdnn-plan's
     * defaults plan 89.233 -> 84.348 there) */
    load_net_math("resnet152.yaml", "resnet152-b256-h200-bf16-s28.json", VD_MATH_BF16, &net, &prof);
    const uint64_t r152s28[] = {18000000000ull, 19653178624ull};
    check_monotone(&net, &prof, r152s28, 2, "resnet152 s28");
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* An H200 fp32 profile (tests/plan/data/vgg16-b256-h200-fp32-s9c.json)
 * whose first search, without a second opinion, ends in the 369.934 ms basin (features.2:y offloaded,
 * features.5-6 recomputed), where a 357.6 ms plan exists (the decisions it
 * plans on copies of this profile 1.5% off). The second opinion (the whole
 * search on a jittered copy, its plan refined under the true profile)
 * finds 357.528 ms; pinned, and at least the 0.94x target of no offload. */
START_TEST(test_vgg16_second_opinion) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with("vgg16-b256-h200-fp32-s9c.json", &net, &prof);
    double t[2];
    none_and_auto_12g(&net, &prof, t);
    printf("vgg16 b256 s9c: none %.3f ms, auto 12 GiB %.3f ms (%.4fx)\n", t[0] * 1e3, t[1] * 1e3,
           t[0] / t[1]);
    /* 1e-9: the printed value's rounding */
    ck_assert_msg(t[1] <= 357.5281e-3 * (1.0 + 1e-9), "predicted %.6f ms", t[1] * 1e3);
    ck_assert_msg(t[0] / t[1] >= 0.94, "%.4fx", t[0] / t[1]);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* VGG-16 b256 fp32 auto at 12 GiB on profile file (as_vdnn_plan: planned
 * as vdnn-plan plans it, the ReLUs in place and the budget a cap): fits,
 * keeps the plan invariants and predicts at most pin_s (the search is
 * deterministic: its result, pinned). */
static void vgg16_auto_12g(const char *file, bool as_vdnn_plan, double pin_s) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with(file, &net, &prof);
    if (as_vdnn_plan) vd_schedule_inplace(&net);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = (uint64_t)12 << 30;
    o.pool_to_need = as_vdnn_plan;
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    check_plan_invariants(&p, &net);
    ck_assert(p.feasible && p.hwm <= o.budget);
    printf("vgg16 b256 %s, auto 12 GiB: %.3f ms\n", file, p.sim.iter_s * 1e3);
    /* 1e-9: the printed value's rounding */
    ck_assert_msg(p.sim.iter_s <= pin_s * (1.0 + 1e-9), "predicted %.6f ms", p.sim.iter_s * 1e3);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}

/* An H100 fp32 profile (tests/plan/data/vgg16-b256-h100-fp32-s31.json,
 * session 31's call 4) whose starts all end in the 375.501 ms basin at 12
 * GiB (x, features.2:y and features.9:y offloaded, features.12's forward
 * split in 8): one H100 apart measured within 1% of it, the search found
 * 367.9 ms (forward at the fastest options, four maps offloaded, the
 * backward passes at split options). The lean start (every pass at its
 * least workspace within 2% of its fastest, auto.c lean_options) reaches
 * that basin: 368.168 ms, pinned, within 2% of the copies' bound. */
START_TEST(test_vgg16_lean_start) {
    vgg16_auto_12g("vgg16-b256-h100-fp32-s31.json", true, 368.1681e-3);
}
END_TEST

/* H200 profiles with the ReLU fused into features.0 (features.1's forward
 * times at nothing). The update in the backward pass leaves no gradient array on the
 * device: persistent bytes are the parameters and momentum. fp32 at 16 GiB:
 * the search's plan and one offloading 6.51 GiB predict 345.199 ms alike;
 * fewer_copies keeps the largest of those maps instead, 4.59 GiB offloaded
 * (pinned <= 4.6 GiB) at the same time (pinned). tf32 at 12 GiB: 174.813 ms
 * (pinned; with the gradient array the search plans 179.5 ms, recomputing
 * features.5-6 too) with none's time beside it: the 0.95x target with
 * margin. */
START_TEST(test_vgg16_update_in_backward) {
    vd_net net;
    vd_profile prof;
    load_vgg16_with("vgg16-b256-h200-fp32-s10c.json", &net, &prof);
    vd_err e = {0};
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = (uint64_t)16 << 30;
    vd_plan p;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    check_plan_invariants(&p, &net);
    ck_assert(p.feasible && p.hwm <= o.budget && p.update_in_bwd && p.t_grads < 0);
    printf("vgg16 b256 s10c fp32 16 GiB: %.3f ms, offload %.3f GiB, persistent %.3f GiB\n",
           p.sim.iter_s * 1e3, (double)p.offload_bytes / (1 << 30),
           (double)p.persistent_bytes / (1 << 30));
    ck_assert_uint_eq(p.persistent_bytes, 2 * VD_ALIGN_UP((uint64_t)net.param_floats * 4u, 256));
    ck_assert_msg(p.sim.iter_s <= 345.1995e-3 * (1.0 + 1e-9), "%.6f ms", p.sim.iter_s * 1e3);
    ck_assert_msg(p.offload_bytes <= (uint64_t)(4.6 * (1 << 30)), "%llu",
                  (unsigned long long)p.offload_bytes);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);

    load_vgg16_math("vgg16-b256-h200-tf32-s10c.json", VD_MATH_TF32, &net, &prof);
    double t[2];
    none_and_auto_12g(&net, &prof, t);
    printf("vgg16 b256 s10c tf32: none %.3f ms, auto 12 GiB %.3f ms (%.4fx)\n", t[0] * 1e3,
           t[1] * 1e3, t[0] / t[1]);
    ck_assert_msg(t[1] <= 174.8135e-3 * (1.0 + 1e-9), "%.6f ms", t[1] * 1e3);
    ck_assert_msg(t[0] / t[1] >= 0.98, "%.4fx", t[0] / t[1]);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The s9c fp32 profile above with every pass time scaled by a uniform
 * factor in [0.985, 1.015] (Python's random.Random(100), stored as it came
 * out): at 12 GiB greedy found no move from any start (features.0:y and
 * features.2:y recomputed together at bwd features.4, resident until bwd
 * features.2, the budget exceeded at bwd features.3 between, where propose
 * looked only at the recompute step), and the search lost to offload all:
 * 639.921 ms predicted. The last resort (a keep-all start then, whose
 * greedy may also offload such maps) planned 356.528 ms, pinned as the most
 * this may predict; the search plans 350.207 today (printed). */
START_TEST(test_vgg16_no_move_last_resort) {
    vgg16_auto_12g("vgg16-b256-h200-fp32-s9c-perturbed.json", false, 356.5282e-3);
}
END_TEST

/* ResNet-50 b256 at 4 GiB on an H200 profile where the live bytes come
 * under the budget and the placement's top does not (3.97 GiB placed in
 * 4.11): greedy's excess counting the top alone finds no move that helps
 * from either start (the fallback's 870.068 ms). The excess also counts the
 * live bytes above the budget less the overshoot: 494.723 ms, pinned. */
START_TEST(test_resnet50_placement_overshoot) {
    vd_net net;
    vd_profile prof;
    load_net_math("resnet50.yaml", "resnet50-b256-h200-fp32-s7.json", VD_MATH_FP32, &net, &prof);
    vd_err e = {0};
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = (uint64_t)4 << 30;
    vd_plan p;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    check_plan_invariants(&p, &net);
    ck_assert(p.feasible && p.hwm <= o.budget);
    /* the search is deterministic: its result, plus rounding slack */
    ck_assert_msg(p.sim.iter_s <= 494.7235e-3, "predicted %.6f s", p.sim.iter_s);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* A plan that offloads nothing runs replayed (--graph auto), at the
 * profile's graph_launch_s a launch (session 33's H100: 0.80 us against
 * 3.94 from the host), bf16 b256, planned as vdnn-plan plans it. Ranked op
 * by op, the search's plans offload; replayed, one that offloads nothing
 * is faster (auto.c replayed_pick), and that is the plan (pinned), captured,
 * within the budget: ResNet-50 at 5500 MiB, 48.142 ms as issued, 47.432
 * replayed (a configuration the search built, vdp_search.replayed);
 * ResNet-152 at 12 GiB, 103.787 as issued, 101.016 replayed (the search's
 * plan with its offloaded maps recomputed: the search built no plan that
 * offloads nothing there). With --graph off the offloading plans stay. */
START_TEST(test_resnet_replayed_pick) {
    static const struct { const char *spec, *file; uint64_t budget; double replayed_s; } cases[] = {
        {"resnet50.yaml", "resnet50-b256-h100-bf16-s33.json", (uint64_t)5500 << 20, 47.4324e-3},
        {"resnet152.yaml", "resnet152-b256-h100-bf16-s33.json", (uint64_t)12 << 30, 101.0159e-3},
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++) {
        vd_net net;
        vd_profile prof;
        load_net_math(cases[k].spec, cases[k].file, VD_MATH_BF16, &net, &prof);
        vd_schedule_inplace(&net);   /* as vdnn-plan plans it: the ReLUs in place, */
        ck_assert(prof.dev.graph_launch_s > 0 && prof.dev.graph_launch_s < prof.dev.launch_s);
        double t[2];
        for (int g = 0; g < 2; g++) {
            vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
            o.budget = cases[k].budget;
            o.pool_to_need = true;   /* its budget a cap, */
            o.fuse_bn_add = true;    /* the batch norms before the adds fused (bf16) */
            o.graph = g ? VD_GRAPH_AUTO : VD_GRAPH_OFF;
            vd_plan p;
            vd_err e = {0};
            ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
            check_plan_invariants(&p, &net);
            ck_assert(p.feasible && p.hwm <= o.budget);
            ck_assert_msg(g ? p.captured && p.offload_bytes == 0 : !p.captured && p.offload_bytes > 0,
                          "%s graph %s: captured %d, %llu bytes offloaded", cases[k].spec,
                          g ? "auto" : "off", p.captured, (unsigned long long)p.offload_bytes);
            t[g] = p.sim.iter_s;
            vd_plan_free(&p);
        }
        printf("%s b256 h100 s33 bf16 at %llu MiB: %.3f ms issued op by op, %.3f ms replayed\n",
               cases[k].spec, (unsigned long long)(cases[k].budget >> 20), t[0] * 1e3, t[1] * 1e3);
        /* 1e-9: the printed values' rounding */
        ck_assert_msg(t[1] < t[0] && t[1] <= cases[k].replayed_s * (1.0 + 1e-9),
                      "%s: replayed %.6f ms, eager %.6f", cases[k].spec, t[1] * 1e3, t[0] * 1e3);
        vd_profile_free(&prof);
        vd_net_free(&net);
    }
}
END_TEST

/* Greedy stuck a little over the budget (search_greedy: no move proposed,
 * or none that helps): ResNet-152 bf16 b256 on session 33's H100 profile at
 * 3 GiB and 2900 MiB, where the recompute start's greedy ended 69 / 144 MiB
 * over the budget at one or two backward steps, every start failed and the search
 * fell back on offloading every map: 772.7 / 776.8 ms predicted (vdnn-plan),
 * the lower bound 113 ms. The last resort (the recompute start again, its
 * greedy with the stuck moves: a recomputed map resident past its
 * recompute step offloaded) fits: 205.5 / 210.0 ms. 300 ms: far from
 * either. That plan fit with the effort cap spent, unrefined; refined
 * again on an effort of its own (refine_again: over 25% above the copies'
 * bound) it reaches 126.3 / 174.8 ms, 1.11 times the copies' bound (113.5
 * ms) at 3 GiB: within 15% of it there, against 1.82 times without. */
START_TEST(test_resnet152_greedy_stuck) {
    static const uint64_t budgets[] = {(uint64_t)3 << 30, (uint64_t)2900 << 20};
    static const double bound_ratio[] = {1.15, 0};   /* 0: not checked */
    vd_net net;
    vd_profile prof;
    load_net_math("resnet152.yaml", "resnet152-b256-h100-bf16-s33.json", VD_MATH_BF16, &net, &prof);
    vd_schedule_inplace(&net);   /* as vdnn-plan plans it: the ReLUs in place, */
    for (size_t k = 0; k < VD_ARRAY_LEN(budgets); k++) {
        vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
        o.budget = budgets[k];
        o.pool_to_need = true;   /* its budget a cap, */
        o.fuse_bn_add = true;    /* the batch norms before the adds fused (bf16) */
        vd_plan p;
        vd_err e = {0};
        ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
        check_plan_invariants(&p, &net);
        ck_assert(p.feasible && p.hwm <= o.budget);
        printf("resnet152 b256 h100 s33 bf16 at %llu MiB: %.3f ms\n",
               (unsigned long long)(budgets[k] >> 20), 1e3 * p.sim.iter_s);
        ck_assert_msg(p.sim.iter_s < 0.300, "%llu MiB: %.3f ms",
                      (unsigned long long)(budgets[k] >> 20), 1e3 * p.sim.iter_s);
        if (bound_ratio[k] > 0) {
            vd_plan_bound bd;
            ck_assert_msg(vd_plan_copy_bound(&net, &prof, &p, o.budget, &bd, &e) == 0, "%s", e.msg);
            ck_assert_msg(bd.bound_s > 0 && p.sim.iter_s <= bound_ratio[k] * bd.bound_s,
                          "%llu MiB: %.3f ms, bound %.3f", (unsigned long long)(budgets[k] >> 20),
                          1e3 * p.sim.iter_s, 1e3 * bd.bound_s);
        }
        vd_plan_free(&p);
    }
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* The same pick on small nets, fast enough for every run (the one above is
 * in suite 'big'): tiny-inception and tiny-resnet b16 on the analytic H200
 * profile with a replayed launch a fifth of launch_s, at 90% of none's
 * need. Issued op by op, the search's plan offloads; replayed, a plan that
 * offloads nothing is faster (tiny-inception: one the search built;
 * tiny-resnet: the search's own with its offloaded maps recomputed, or one
 * it built), and that is the plan, within the budget and above the bound. */
START_TEST(test_tiny_replayed_pick) {
    static const char *const nets[] = {"tiny-inception.yaml", "tiny-resnet.yaml"};
    for (size_t k = 0; k < VD_ARRAY_LEN(nets); k++) {
        vd_net net;
        load_shipped_net(&net, nets[k], 16);
        vd_schedule_inplace(&net);
        vd_profile prof;
        analytic_profile(&net, 16, &vd_device_h200, &prof);
        prof.dev.graph_launch_s = prof.dev.launch_s / 5;
        vd_err e = {0};
        vd_plan p;
        vd_plan_opts o = plan_opts(16, VD_POLICY_NONE);
        ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
        uint64_t budget = p.budget / 10 * 9;
        vd_plan_free(&p);
        double t[2];
        for (int g = 0; g < 2; g++) {
            o = plan_opts(16, VD_POLICY_AUTO);
            o.budget = budget;
            o.pool_to_need = true;
            o.graph = g ? VD_GRAPH_AUTO : VD_GRAPH_OFF;
            ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
            check_plan_invariants(&p, &net);
            ck_assert(p.feasible && p.hwm <= budget);
            ck_assert_msg(g ? p.captured && p.offload_bytes == 0 : !p.captured && p.offload_bytes > 0,
                          "%s graph %s: captured %d, %llu bytes offloaded", nets[k],
                          g ? "auto" : "off", p.captured, (unsigned long long)p.offload_bytes);
            vd_plan_bound b;
            ck_assert_msg(vd_plan_copy_bound(&net, &prof, &p, budget, &b, &e) == 0, "%s", e.msg);
            ck_assert_msg(b.bound_s <= p.sim.iter_s, "%s: bound %.17g above the plan's %.17g",
                          nets[k], b.bound_s, p.sim.iter_s);
            t[g] = p.sim.iter_s;
            vd_plan_free(&p);
        }
        ck_assert_msg(t[1] < t[0], "%s: replayed %.6f ms, eager %.6f", nets[k], t[1] * 1e3,
                      t[0] * 1e3);
        vd_profile_free(&prof);
        vd_net_free(&net);
    }
}
END_TEST

/* More memory never plans slower: at none's smallest budget, everything
 * kept fits only with the adds' gradients copied (not shared), 5% above the
 * lower bound (an H200 ResNet-50 tf32 profile: 118.3 ms, where 21 GB
 * with two maps offloaded plans 112.4 ms). auto searches there too and
 * plans no slower than at 21 GB, and within 2% of the bound (the gap over
 * which it searches; the search reaches the bound itself, 112.426 ms). */
START_TEST(test_resnet50_none_min_no_slower) {
    vd_net net;
    vd_profile prof;
    load_net_math("resnet50.yaml", "resnet50-b256-h200-tf32-s11.json", VD_MATH_TF32, &net, &prof);
    vd_err e = {0};
    vd_plan_opts on = plan_opts(256, VD_POLICY_NONE);
    uint64_t none_min = 0;
    ck_assert_msg(vd_plan_min_budget(&net, &prof, &on, &none_min, &e) == 0, "%s", e.msg);
    on.budget = none_min;
    vd_plan pn, pa, pl;
    ck_assert_msg(vd_plan_build(&net, &prof, &on, &pn, &e) == 0, "%s", e.msg);
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.budget = none_min;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &pa, &e) == 0, "%s", e.msg);
    check_plan_invariants(&pa, &net);
    ck_assert(pa.feasible && pa.hwm <= o.budget);
    double lb = vd_plan_lower_bound(&net, &prof, &pa, o.budget);
    o.budget = 21000000000ull;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &pl, &e) == 0, "%s", e.msg);
    printf("resnet50 b256 s11 tf32 at none's smallest %llu B: none %.3f ms, auto %.3f ms "
           "(bound %.3f); auto at 21 GB %.3f ms\n", (unsigned long long)none_min,
           pn.sim.iter_s * 1e3, pa.sim.iter_s * 1e3, lb * 1e3, pl.sim.iter_s * 1e3);
    /* the case this test is about: none's plan there is over the gap */
    ck_assert_msg(pn.sim.iter_s > lb * 1.02, "none %.6f s, bound %.6f s", pn.sim.iter_s, lb);
    /* relative slack 1e-9: the same simulation, summed in another order */
    ck_assert_msg(pa.sim.iter_s <= pl.sim.iter_s * (1.0 + 1e-9), "auto %.6f s at none's smallest "
                  "budget, %.6f s at 21 GB", pa.sim.iter_s, pl.sim.iter_s);
    ck_assert_msg(pa.sim.iter_s <= lb * 1.02, "auto %.6f s, bound %.6f s", pa.sim.iter_s, lb);
    vd_plan_free(&pn);
    vd_plan_free(&pa);
    vd_plan_free(&pl);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

/* ---- the command line --------------------------------------------------- */

/* vdnn-plan's predicted iteration (--format json) for ARGS after the
 * binary; the plan fits. */
static double cli_predicted(const char *args) {
    const char *src = getenv("VD_SRCDIR"), *bld = getenv("VD_BUILDDIR");
    ck_assert(src && bld);
    char cmd[4096], jerr[256];
    static char out[1 << 22];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/vdnn-plan' %s --batch 256 --quiet --format json", src,
             bld, args);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    json_t *root = vd_json_parse(out, strlen(out), 0, jerr, sizeof jerr);
    ck_assert_msg(root, "%s: %s", args, jerr);
    ck_assert(json_is_true(json_object_get(root, "feasible")));
    double t = json_real_value(json_object_get(root, "predicted_iter_s"));
    printf("vdnn-plan %s: %.3f ms\n", args, t * 1e3);
    json_decref(root);
    return t;
}

/* The split searched after the unsplit plan (plan.c, AUTO_LATE_SPLIT_SHARE),
 * through vdnn-plan's options (its input staging): on the s9c profile
 * VGG-16 fp32 planned 350.6 ms unsplit at 16 GiB, slower than 14 GiB's
 * split 347.3 (346.9 now); GoogLeNet fp32 analytic at 2.52 GB 143.4 ms
 * unsplit (127.7 now: at the limit, the split's smaller steps leave the
 * rest of the net room). */
START_TEST(test_late_split) {
    const char *prof = "--profile tests/plan/data/vgg16-b256-h200-fp32-s9c.json";
    char a[512];
    snprintf(a, sizeof a, "nets/vgg16.yaml %s --budget 14G", prof);
    double t14 = cli_predicted(a);
    snprintf(a, sizeof a, "nets/vgg16.yaml %s --budget 16G", prof);
    double t16 = cli_predicted(a);
    /* 1e-9 relative: the JSON's printed digits, not a tolerance of the search */
    ck_assert_msg(t16 <= t14 * (1.0 + 1e-9), "16 GiB %.3f ms, 14 GiB %.3f ms", t16 * 1e3, t14 * 1e3);
    /* 0.135 s: between the unsplit plan and the split one, room for the
     * search to move */
    double g = cli_predicted("nets/googlenet.yaml --budget 2520252160");
    ck_assert_msg(g < 0.135, "GoogLeNet fp32 at 2.52 GB: %.3f ms", g * 1e3);
}
END_TEST

START_TEST(test_cli_vgg16) {
    const char *src = getenv("VD_SRCDIR"), *bld = getenv("VD_BUILDDIR");
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(bld);
    char spec[1024], cmd[4096], trace[] = "/tmp/vdnn-trace-XXXXXX";
    snprintf(spec, sizeof spec, "%s/nets/vgg16.yaml", src);
    FILE *probe = fopen(spec, "r");
    if (!probe) return;   /* nets/vgg16.yaml not written yet */
    fclose(probe);
    int fd = mkstemp(trace);
    close(fd);
    static char out[1 << 20];
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --batch 256 --device h200 --policy all "
             "--budget 12G --trace %s", bld, spec, trace);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    ck_assert(strstr(out, "summary"));
    ck_assert(strstr(out, "feasible             yes"));
    ck_assert(strstr(out, "offload features."));
    ck_assert(strstr(out, "prefetch features."));
    /* the trace is valid JSON with three tracks and a memory counter */
    size_t n = 0;
    char *text = vdt_slurp(trace, &n);
    char jerr[256];
    json_t *root = vd_json_parse(text, n, 0, jerr, sizeof jerr);
    ck_assert_msg(root, "trace: %s", jerr);
    const json_t *evs = json_object_get(root, "traceEvents");
    ck_assert(json_is_array(evs));
    int seen_tid[3] = {0, 0, 0}, counters = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        const json_t *ev = json_array_get(evs, i);
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        ck_assert(ph);
        if (strcmp(ph, "C") == 0) counters++;
        if (strcmp(ph, "X") == 0) {
            uint64_t v = 9;
            ck_assert(vd_json_u64(json_object_get(ev, "tid"), &v) && v < 3);
            seen_tid[v]++;
            ck_assert(json_is_number(json_object_get(ev, "ts")) &&
                      json_is_number(json_object_get(ev, "dur")));
        }
    }
    ck_assert(seen_tid[0] && seen_tid[1] && seen_tid[2] && counters > 0);
    json_decref(root);
    vd_free(text);
    /* auto at 12G: the recompute in the table and on the trace's compute track */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --batch 256 --device h200 --policy auto "
             "--budget 12G --trace %s", bld, spec, trace);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    ck_assert(strstr(out, "feasible             yes"));
    ck_assert_msg(strstr(out, "recompute features.0+features.1 ("), "no recompute in:\n%s", out);
    ck_assert(strstr(out, "recomputed/iteration"));
    text = vdt_slurp(trace, &n);
    root = vd_json_parse(text, n, 0, jerr, sizeof jerr);
    ck_assert_msg(root, "trace: %s", jerr);
    evs = json_object_get(root, "traceEvents");
    int rc_slices = 0;
    for (size_t i = 0; i < json_array_size(evs); i++) {
        const json_t *ev = json_array_get(evs, i);
        const char *cat = json_string_value(json_object_get(ev, "cat"));
        const char *nm = json_string_value(json_object_get(ev, "name"));
        if (!cat || strcmp(cat, "recompute") != 0) continue;
        uint64_t tid = 9;
        ck_assert(vd_json_u64(json_object_get(ev, "tid"), &tid) && tid == 0);
        ck_assert(nm && strncmp(nm, "recompute ", 10) == 0);
        rc_slices++;
    }
    ck_assert_int_eq(rc_slices, 2);   /* features.0 and features.1 */
    json_decref(root);
    vd_free(text);
    unlink(trace);
    /* minimum budgets: all four, ordered sensibly */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --batch 256 --min-budget --format json", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    root = vd_json_parse(out, strlen(out), 0, jerr, sizeof jerr);
    ck_assert_msg(root, "%s", jerr);
    const json_t *mins = json_object_get(root, "min_budgets");
    uint64_t none = 0, all = 0, conv = 0, dyn = 0, aut = 0;
    ck_assert(vd_json_u64(json_object_get(mins, "none"), &none) &&
              vd_json_u64(json_object_get(mins, "all"), &all) &&
              vd_json_u64(json_object_get(mins, "conv"), &conv) &&
              vd_json_u64(json_object_get(mins, "dyn"), &dyn) &&
              vd_json_u64(json_object_get(mins, "auto"), &aut));
    ck_assert_uint_lt(all, none);
    ck_assert_uint_lt(conv, none);
    ck_assert_uint_le(dyn, all);
    ck_assert_uint_le(dyn, conv);
    ck_assert_uint_le(aut, dyn);
    json_decref(root);
    /* JSON plan with the required keys */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --batch 256 --policy dyn --budget 12G --format json",
             bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    root = vd_json_parse(out, strlen(out), 0, jerr, sizeof jerr);
    ck_assert_msg(root, "%s", jerr);
    static const char *keys[] = {"net", "batch", "policy", "budget", "feasible", "peak_bytes",
                                 "offload_bytes", "predicted_iter_s", "steps", "recompute_bytes",
                                 "recomputed_tensors", "recompute_s"};
    for (size_t k = 0; k < VD_ARRAY_LEN(keys); k++)
        ck_assert_msg(json_object_get(root, keys[k]), "json plan lacks %s", keys[k]);
    json_decref(root);
    /* auto as JSON: features.0:y recomputed at the step of bwd features.2 */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --batch 256 --policy auto --budget 12G --format json",
             bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), 0);
    root = vd_json_parse(out, strlen(out), 0, jerr, sizeof jerr);
    ck_assert_msg(root, "%s", jerr);
    const json_t *ts = json_object_get(root, "tensors"), *sts = json_object_get(root, "steps");
    ck_assert(json_is_array(ts) && json_is_array(sts));
    bool found = false;
    for (size_t i = 0; i < json_array_size(ts); i++) {
        const json_t *t = json_array_get(ts, i);
        const char *nm = json_string_value(json_object_get(t, "name"));
        if (!nm || strcmp(nm, "features.0:y") != 0) continue;
        ck_assert(json_is_true(json_object_get(t, "recompute")));
        uint64_t rs = 0;
        ck_assert(vd_json_u64(json_object_get(t, "recompute_step"), &rs));
        const json_t *rl = json_object_get(json_array_get(sts, rs), "recomputes");
        ck_assert(json_is_array(rl) && json_array_size(rl) == 2);
        ck_assert_str_eq(json_string_value(json_array_get(rl, 0)), "features.0");
        ck_assert_str_eq(json_string_value(json_array_get(rl, 1)), "features.1");
        found = true;
    }
    ck_assert(found);
    json_decref(root);
    /* infeasible: exit 6 and the message */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --batch 256 --policy none --budget 12G 2>&1 >/dev/null",
             bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EBUDGET);
    ck_assert(strstr(out, "smallest budget that fits"));
    /* usage errors */
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --policy allx 2>&1", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EUSAGE);
    ck_assert(strstr(out, "did you mean 'all'"));
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan 2>&1", bld);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EUSAGE);
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s --budget 12Q 2>&1", bld, spec);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EUSAGE);
    snprintf(cmd, sizeof cmd, "%s/vdnn-plan %s/nets/nonexistent.yaml 2>&1", bld, src);
    ck_assert_int_eq(run_cmd(cmd, out, sizeof out), VD_EIO);
}
END_TEST

VDT_MAIN("plan", 300, test_sim_copy_slowdown, test_sim_busy_copies, test_profiles_without_busy_rates, test_busy_from_pass, test_inplace_rules, test_liveness_exact, test_infeasible_message,
         test_profile_roundtrip, test_optimizer_state, test_bn_recompute_time, test_swaps, test_dyn_prefers_fast, test_random_nets_3_4,
         test_random_nets_more, test_sim_equals_exec_1_3, test_sim_equals_exec_4_6, test_random_dispositions,
         test_vgg16_auto_beats_dyn, test_vgg16_measured_profile, test_vgg16_measured_profile_mixed,
         test_vgg16_measured_profile_api, test_vgg16_split_options_profile, test_vgg16_two_basins_perturbed, test_budget_monotone, test_late_split, test_vgg16_bf16_fitting_start, test_vgg16_bf16_exchange,
         test_vgg16_api_pair_exchange, test_googlenet_floor_runs, test_vgg16_bf16_coarser_split,
         test_vgg16_fp32_coarser_split_effort, test_vgg16_fp32_split_margin, test_vgg16_fp32_flip,
         test_vgg16_no_move_last_resort, test_vgg16_second_opinion, test_vgg16_lean_start,
         test_vgg16_update_in_backward, test_resnet50_placement_overshoot, test_resnet_replayed_pick, test_tiny_replayed_pick,
         test_resnet152_greedy_stuck,
         test_resnet50_none_min_no_slower,
         test_per_pass_invariants_1_2,
         test_per_pass_invariants_3_6, test_per_pass_beats_one_choice, test_cli_vgg16)
