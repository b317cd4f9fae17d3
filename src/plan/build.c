/* build.c — one build with a fixed offload policy and fixed algorithms
 * (vdp_build_fixed): the builder's steps (builder.h) in order, three prefetch
 * variants, the gradient aliasing (adds, in-place ReLUs) retried without when
 * it packs worse.
 * The policies (policy.c, auto.c) search over such builds. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan/builder.h"

void vdp_plan_release(vd_plan *p) {
    if (!p) return;
    vd_free(p->tensors);
    vd_free(p->intervals);
    vd_free(p->actions);
    vd_free(p->steps);
    vd_free(p->layers);
    vd_free(p->first_unit);
    if (p->eval) { vdp_plan_release(p->eval); vd_free(p->eval); }
    memset(p, 0, sizeof *p);
}

void vd_plan_free(vd_plan *p) { vdp_plan_release(p); }

static void bld_free(bld *B) { vd_free(B->scratch); }

/* (plan_internal.h) A run goes on while the next layer has the same count
 * and reads only the layer before it, which nothing else reads. */
int vdp_runs(const vd_net *net, const int *chunks, int *ra, int *rb) {
    int NL = net->n_layers, U = 0;
    int *n_cons = NULL;
    if (chunks) {
        n_cons = vd_calloc((size_t)NL + 1, sizeof *n_cons, NULL);
        if (!n_cons) return -1;
        for (int i = 0; i < NL; i++)
            for (int k = 0; k < net->layers[i].n_in; k++)
                if (net->layers[i].in[k] >= 0) n_cons[net->layers[i].in[k]]++;
    }
    for (int i = 0; i < NL;) {
        int k = chunks && chunks[i] > 1 ? chunks[i] : 1, j = i + 1;
        while (k > 1 && j < NL && chunks[j] == k && net->layers[j].n_in == 1 &&
               net->layers[j].in[0] == j - 1 && n_cons[j - 1] == 1)
            j++;
        for (int l = i; l < j && ra; l++) { ra[l] = i; rb[l] = j - 1; }
        U += k * (j - i);
        i = j;
    }
    vd_free(n_cons);
    return U;
}

/* Each unit's layer, chunk and samples, each layer's first unit. */
static void fill_units(vd_plan *p, const vd_net *net, const int *chunks, const int *rb) {
    int u = 0, B = p->batch;
    for (int i = 0; i < net->n_layers;) {
        int k = chunks && chunks[i] > 1 ? chunks[i] : 1;
        for (int c = 0; c < k; c++)
            for (int l = i; l <= rb[i]; l++, u++) {
                vd_plan_layer *pl = &p->layers[u];
                pl->layer = l;
                pl->chunk = c;
                pl->n_chunks = k;
                pl->n0 = (int)((int64_t)c * B / k);
                pl->n = (int)((int64_t)(c + 1) * B / k) - pl->n0;
                pl->dw_beta = c == k - 1 ? 0.0f : 1.0f;   /* backward: chunk k-1 first */
                pl->update = c == 0;
                if (c == 0) p->first_unit[l] = u;
            }
        i = rb[i] + 1;
    }
}

/* The plan's header and arrays (sized for every tensor, interval and action
 * a build can add), the builder's scratch, the units; clone: for bld_clone,
 * which copies the steps and layers and has its tensors (nothing zeroed
 * that it overwrites).
 * On failure the caller frees both (bld_free, vdp_plan_release). */
static int bld_init(bld *B, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                    vd_policy offload_pol, int variant, bool alias, bool clone, vd_plan *out,
                    vd_err *e) {
    memset(out, 0, sizeof *out);
    memset(B, 0, sizeof *B);
    int NL = net->n_layers, L = vdp_runs(net, opts->chunks, NULL, NULL);
    if (L < 0) return vd_errf(e, VD_ENOMEM, "out of memory building the plan");
    B->net = net; B->prof = prof; B->opts = opts; B->p = out; B->L = L; B->NL = NL;
    B->variant = variant;
    B->alias = alias;
    B->disp = opts->forward_only ? NULL : opts->disp;
    vd_plan *p = out;
    vdp_copy_str(p->net, sizeof p->net, net->name);
    p->policy = opts->policy;
    p->offload_policy = offload_pol;
    p->prefetch = opts->prefetch;
    p->batch = opts->batch;
    p->n_layers = NL;
    p->n_units = L;
    p->forward_only = opts->forward_only;
    p->n_steps = opts->forward_only ? L : 2 * L + 1;
    p->loss_layer = NL - 1;
    p->t_stage = p->stage_step = -1;
    p->stage = opts->forward_only ? VD_STAGE_NA : opts->no_stage_input ? VD_STAGE_OFF : VD_STAGE_NA;
    int cap_t = 6 + 7 * L + 2 * NL; /* params, optim state, grads, x, labels, x:next; per
                                  unit: y, dy, aux, ws_fwd, ws_bwd, ws_rc, dw; per layer:
                                  a run's whole output and its gradient */
    int cap_iv = 2 * cap_t;
    int cap_a = 4 * cap_iv + 2 * cap_t + 2 * (p->n_steps + 1) + L + 8;
    /* not zeroed: vdp_add_tensor / vdp_add_interval clear each entry they add
     * and vdp_build_actions writes each action (zeroing the capacity was a
     * fifth of an auto search's time) */
    p->tensors = vd_malloc((size_t)cap_t * sizeof *p->tensors, NULL);
    p->intervals = vd_malloc((size_t)cap_iv * sizeof *p->intervals, NULL);
    p->actions = vd_malloc((size_t)cap_a * sizeof *p->actions, NULL);
    /* a clone's are copied whole (bld_clone) */
    p->steps = clone ? vd_malloc(((size_t)p->n_steps + 1) * sizeof *p->steps, NULL)
                     : vd_calloc((size_t)p->n_steps + 1, sizeof *p->steps, NULL);
    /* a clone's are its source's (bld_clone) */
    p->layers = clone ? NULL : vd_calloc((size_t)L, sizeof *p->layers, NULL);
    p->first_unit = vd_malloc((size_t)(NL > 0 ? NL : 1) * sizeof *p->first_unit, NULL);
    /* the builder's arrays: one block (see vdp_carve) */
    size_t ns = (size_t)p->n_steps + 1, nl = (size_t)(L > 0 ? L : 1), nnl = (size_t)(NL > 0 ? NL : 1);
    size_t ct = (size_t)cap_t, civ = (size_t)cap_iv, at = 0;
    size_t o_lact = vdp_carve(&at, nnl * 6 * sizeof(int));
    size_t o_act = vdp_carve(&at, nl * sizeof(int)), o_dact = vdp_carve(&at, nl * sizeof(int));
    size_t o_fw = vdp_carve(&at, ct * 2 * sizeof(int));   /* + fit_memory scratch */
    size_t o_ft = vdp_carve(&at, ct * sizeof(int)), o_lt = vdp_carve(&at, ct * sizeof(int));
    /* extra: inplace flags (L bools as ints), later pf_item[cap_t] (prefetch.c) */
    size_t o_extra = vdp_carve(&at, (ct > nl ? ct : nl) * sizeof(pf_item));
    size_t o_bh = vdp_carve(&at, 6 * ns * sizeof(int));
    size_t o_bn = vdp_carve(&at, 5 * (civ > ct ? civ : ct) * sizeof(int));
    size_t o_mem = vdp_carve(&at, ns * sizeof *B->mem), o_ts = vdp_carve(&at, ns * sizeof *B->t_start);
    size_t o_d2h = vdp_carve(&at, ct * sizeof *B->d2h);
    size_t o_pin = vdp_carve(&at, civ * sizeof *B->pinned);
    size_t o_fs = vdp_carve(&at, 5 * ct * sizeof *B->fit_steps);
    size_t o_tn = vdp_carve(&at, 2 * ct * sizeof *B->tname);
    size_t o_rc = vdp_carve(&at, nl * sizeof *B->rc_ops);
    char *blk = B->scratch = vd_malloc(at, NULL);
    B->cap_t = cap_t;
    B->cap_iv = cap_iv;
    if (!p->tensors || !p->intervals || !p->actions || !p->steps || (!clone && !p->layers) ||
        !p->first_unit || !blk)
        return vd_errf(e, VD_ENOMEM, "out of memory building the plan");
    B->lact = (int *)(blk + o_lact);
    B->ldact = B->lact + NL;
    B->run_a = B->lact + 2 * NL;
    B->run_b = B->lact + 3 * NL;
    B->bn_fold = B->lact + 4 * NL;
    B->add_relu = B->lact + 5 * NL;
    B->act_of = (int *)(blk + o_act);
    B->dact_of = (int *)(blk + o_dact);
    B->fwd_write = (int *)(blk + o_fw);
    B->first_touch = (int *)(blk + o_ft);
    B->last_touch = (int *)(blk + o_lt);
    B->extra = (int *)(blk + o_extra);
    B->bucket_head = (int *)(blk + o_bh);
    B->bucket_next = (int *)(blk + o_bn);
    B->mem = (uint64_t *)(blk + o_mem);
    B->t_start = (double *)(blk + o_ts);
    B->d2h = (double *)(blk + o_d2h);
    B->pinned = (bool *)(blk + o_pin);
    memset(B->pinned, 0, civ * sizeof *B->pinned);
    B->fit_steps = (int *)(blk + o_fs);
    B->tname = (const char **)(blk + o_tn);
    B->rc_ops = (int *)(blk + o_rc);
    if (vdp_runs(net, opts->chunks, B->run_a, B->run_b) < 0)
        return vd_errf(e, VD_ENOMEM, "out of memory building the plan");
    if (!clone) fill_units(p, net, opts->chunks, B->run_b);
    return VD_OK;
}

/* Step kinds, units and profile times of the options algos[2 n_layers]
 * (a chunk's: vd_profile_chunk_time; none for the backward of a no_grad
 * layer, which does not run). */
static void init_steps(vd_plan *p, const vd_net *net, const vd_profile *prof, const int *algos) {
    int U = p->n_units, NL = p->n_layers;
    for (int s = 0; s < p->n_steps; s++) {
        vd_step *st = &p->steps[s];
        if (s < 2 * U) {
            bool bwd = s >= U;
            int u = bwd ? 2 * U - 1 - s : s;
            const vd_plan_layer *pl = &p->layers[u];
            int ai = algos[pl->layer + (bwd ? NL : 0)];
            const vd_profile_algo *a = &prof->layers[pl->layer].algos[ai];
            st->kind = bwd ? VD_STEP_BWD : VD_STEP_FWD;
            st->unit = u;
            st->layer = pl->layer;
            st->compute_s = bwd && net->layers[pl->layer].no_grad ? 0.0
                          : vd_profile_chunk_time(prof, pl->layer, ai, bwd,
                                                  bwd ? a->bwd_s : a->fwd_s, pl->n, p->batch);
        } else {
            st->kind = VD_STEP_SGD; st->layer = st->unit = -1; st->compute_s = vdp_sgd_s(net, prof);
        }
    }
    p->steps[p->n_steps].kind = VD_STEP_END;
    p->steps[p->n_steps].layer = p->steps[p->n_steps].unit = -1;
}

/* An ADD's backward copies dy only into the gradients of the inputs that do
 * not share its tensor (alias_grads): its profiled time (the profile
 * times every input's copy) counts for the share it still writes; none when
 * all share. */
static void scale_add_steps(bld *B) {
    vd_plan *p = B->p;
    for (int i = 0; i < B->L && !p->forward_only; i++) {
        const vd_layer *l = vdp_ul(B, i);
        if (!vd_op_table[l->op].bwd_is_dy) continue;
        int want = 0, have = 0;
        for (int k = 0; k < l->n_in; k++)
            if (l->in[k] >= 0) { want++; have += p->layers[i].dx[k] >= 0; }
        if (want) p->steps[vdp_bwd_step(B->L, i)].compute_s *= (double)have / want;
    }
}

/* The backward of a unit that the profile timed in a fusion pair
 * (vd_profile_algo.bwd_alone_s) but the build did not pair (a split layer,
 * or the pair's other conditions unmet: vdp_unit_paired) runs alone: its
 * step takes that time (init_steps gave it the pair's). */
static void unpaired_steps(bld *B, const vd_profile *prof, const int *algos) {
    vd_plan *p = B->p;
    for (int u = 0; u < B->L && !p->forward_only; u++) {
        const vd_plan_layer *pl = &p->layers[u];
        int ai = algos[pl->layer + p->n_layers];
        const vd_profile_algo *a = &prof->layers[pl->layer].algos[ai];
        if (a->bwd_alone_s <= 0 || B->net->layers[pl->layer].no_grad || vdp_unit_paired(p, u))
            continue;
        p->steps[vdp_bwd_step(B->L, u)].compute_s =
            vd_profile_chunk_time(prof, pl->layer, ai, true, a->bwd_alone_s, pl->n, p->batch);
    }
}

/* Pin persistent regions to the reference plan's offsets (eval). */
static void pin_persistent(bld *B, const vd_plan *pin) {
    vd_plan *p = B->p;
    for (int k = 0; k < p->n_intervals; k++) B->pinned[k] = false;
    if (!pin) return;
    for (int t = 0; t < p->n_tensors; t++) {
        const vd_tensor *T = &p->tensors[t];
        if (!T->persistent) continue;
        int pt = T->kind == VD_T_PARAMS ? pin->t_params
               : T->kind == VD_T_OPTIM ? pin->t_mom : pin->t_grads;
        if (pt < 0) continue;
        p->intervals[T->iv[0]].offset = pin->intervals[pin->tensors[pt].iv[0]].offset;
        B->pinned[T->iv[0]] = true;
    }
}

/* The most live bytes at any step. */
static uint64_t max_live(bld *B) {
    uint64_t live = 0;
    vdp_mem_per_step(B->p, B->mem);
    for (int s = 0; s < B->p->n_steps; s++) if (B->mem[s] > live) live = B->mem[s];
    return live;
}

/* max_live of the intervals built last, worked out at the first call after
 * they were built (*known false until then): an attempt of fit_and_place
 * asks up to three times, its placement changing only their offsets. */
static uint64_t attempt_live(bld *B, bool *known, uint64_t *live) {
    if (!*known) {
        *live = max_live(B);
        *known = true;
    }
    return *live;
}

/* fit_and_place asks the placement by how much it overshoots only up to this
 * share of the budget (see there). */
static const double PLACE_OVER_SHARE = 0.1;

/* vdp_build_unplaced_over skips the placements of variants whose live bytes
 * exceed the budget by more than this share. */
static const double UNPLACED_SHARE = 0.3;

/* The effort (vdp_build_screened's *effort) of one unit of vdp_place's
 * *work: fitted with the other terms' weights (and vdp_place's own: placed
 * ones visited, 0.6 per one scanned) on the user CPU seconds of 11 whole
 * auto searches (ResNet-50, ResNet-152, GoogLeNet, VGG-16 b256 at several
 * budgets: 6.0e7 to 7.8e7 effort a second on one core of the 2-core build
 * machine, the startup included). The cost counts 24 per interval
 * instead: right on ResNet-50, a third of the time on ResNet-152, whose
 * 1,500 intervals each scan more placed ones. */
static const double PLACE_EFFORT = 0.036;

/* Memory: delay prefetches until the live bytes fit, then place; if the
 * placement overshoots (fragmentation), tighten the cap and retry.
 * *live_fit: the live bytes fit the budget (whether the placement does or
 * not; false without a budget). */
static int fit_and_place(bld *B, bool any_offload, const vd_plan *pin, bool *live_fit, vd_err *e) {
    vd_plan *p = B->p;
    uint64_t budget = B->opts->budget;
    uint64_t cap = budget ? budget : UINT64_MAX;
    int *saved_q = NULL, *saved_r = NULL;   /* the scheduled prefetch / release steps */
    if (any_offload) {
        saved_q = vd_malloc(2 * (size_t)p->n_tensors * sizeof *saved_q, NULL);
        if (!saved_q) return vd_errf(e, VD_ENOMEM, "out of memory");
        saved_r = saved_q + p->n_tensors;
        for (int t = 0; t < p->n_tensors; t++) saved_q[t] = p->tensors[t].prefetch_step;
        for (int t = 0; t < p->n_tensors; t++) saved_r[t] = p->tensors[t].release_step;
    }
    uint64_t hwm = 0;
    int rc = VD_OK;
    bool partial = false;   /* the last placement stopped (see stop below) */
    for (int attempt = 0; attempt < 12; attempt++) {
        if (saved_q)
            for (int t = 0; t < p->n_tensors; t++) {
                p->tensors[t].prefetch_step = saved_q[t];
                p->tensors[t].release_step = saved_r[t];
                p->tensors[t].offload = p->tensors[t].release_step >= 0;
            }
        bool fits_cap = true;
        bool live_known = false;   /* attempt_live */
        uint64_t live = 0;
        if (any_offload) {
            fits_cap = vdp_fit_memory(B, cap, B->mem);
            /* An offload whose prefetch is issued when its region is released
             * saves nothing: keep the tensor resident instead (same memory,
             * no copies). */
            bool changed = false;
            for (int t = 0; t < p->n_tensors && B->variant == 0; t++) {
                vd_tensor *T = &p->tensors[t];
                if (T->offload && T->prefetch_step <= T->release_step) { T->offload = false; changed = true; }
            }
            if (changed) vdp_build_intervals(B);
        } else {
            vdp_build_intervals(B);
        }
        if (B->screen_s > 0) {
            /* the screen (vdp_build_screened): a variant whose live bytes
             * exceed the budget cannot fit (the placement's top is at least
             * the live bytes, and it is not retried: no tighter cap helps);
             * else it is replayed unplaced, at every attempt (a tighter cap
             * only delays prefetches further) */
            if (attempt == 0 && budget) {
                *live_fit = attempt_live(B, &live_known, &live) <= budget;
                if (!*live_fit) { B->screen_lb = INFINITY; rc = VDP_SCREENED; break; }
            }
            vdp_build_actions(B);
            vdp_cost(B, p->n_actions);
            if (attempt == 0 && B->early) *B->early += p->n_actions;
            bool stage = !p->forward_only && !B->opts->no_stage_input;
            rc = stage ? vdp_simulate_as_staged(p, B->prof, e) : vdp_simulate(p, B->prof, false, NULL, e);
            if (rc) break;
            double lb = p->sim.iter_s;
            /* staging is kept only when faster: the smaller of the two
             * replays bounds the plan. The staged one starts the compute
             * stream earlier (its device copy of x is faster than x's H2D
             * copy, which is gone too) whenever 2 / mem_bw <= 1 / h2d_bw, as
             * on every device: then it is the smaller one. */
            const vd_device_params *dv = &B->prof->dev;
            if (stage && 2.0 * dv->h2d_bw > dv->mem_bw) {
                rc = vdp_simulate(p, B->prof, false, NULL, e);
                if (rc) break;
                if (p->sim.iter_s < lb) lb = p->sim.iter_s;
            }
            if (attempt == 0) B->replay0 = lb;
            if (lb >= B->screen_s) { B->screen_lb = lb; rc = VDP_SCREENED; break; }
        }
        /* vdp_build_unplaced_over: live bytes over the budget, not placed */
        if (attempt == 0 && budget && B->unplaced_over && !(B->screen_s > 0) &&
            attempt_live(B, &live_known, &live) > budget + (uint64_t)(UNPLACED_SHARE * (double)budget)) {
            *live_fit = false;
            B->unplaced = true;
            B->unplaced_live = live;
            vdp_build_actions(B);
            break;
        }
        pin_persistent(B, pin);
        /* (the screen above counted the same intervals' live bytes) */
        if (attempt == 0 && budget && !(B->screen_s > 0))
            *live_fit = attempt_live(B, &live_known, &live) <= budget;
        /* live bytes over the budget: infeasible whatever the placement */
        /* up to four orderings, each costlier than a replay per interval
         * (calibrated on ResNet-50 at 4 GiB, where most builds' placements
         * fail: ~6 replayed actions' time per interval and ordering) */
        if (B->cost) *B->cost += 24.0 * p->n_intervals;
        double pw = 0;
        bool quick = budget && !fits_cap && cap == budget;
        /* vdp_build_fits: live bytes over the budget and no retry (quick)
         * fit no placement (its top is at least the live bytes) */
        if (B->fit_only && quick && !*live_fit) { hwm = UINT64_MAX; break; }
        /* Asked only whether it fits, and by how much it overshoots when
         * that is under PLACE_OVER_SHARE of the budget (the retry's cap
         * reads it): a placement ordering stops once its top passes that
         * (see vdp_place), and hwm is then where it stopped, a lower bound
         * on its top. Past that share a retry very rarely fits (ResNet-50
         * b256 at 4 GiB: 3 of 2,100 builds overshooting 10-30%, none of 40
         * over 30%): it gets a cap as tight as for that share. */
        uint64_t stop = quick || !budget ? 0 : budget + (uint64_t)(PLACE_OVER_SHARE * (double)budget);
        rc = vdp_place(p->intervals, p->n_intervals, B->pinned, quick, stop, &hwm, &pw, e);
        if (B->effort) *B->effort += PLACE_EFFORT * pw;
        if (rc) break;
        if (!budget || hwm <= budget) break;
        partial = hwm > stop && stop;
        /* the live bytes alone exceed the budget: no tighter cap can help */
        if (quick) break;
        uint64_t over = hwm - budget;
        attempt_live(B, &live_known, &live);
        uint64_t newcap = live > over + VD_PLAN_ALIGN ? live - over - VD_PLAN_ALIGN : 0;
        if (!any_offload || newcap >= cap) break;
        cap = newcap;
    }
    /* It does not fit, and the last placement stopped: placed in full (the
     * offsets and the top that the report and the search's excess read),
     * except behind a screen, whose caller drops a plan that does not fit
     * (its top is at least the stopped one: above the budget). */
    if (!rc && partial && !(B->screen_s > 0) && !B->fit_only)
        rc = vdp_place(p->intervals, p->n_intervals, B->pinned, false, 0, &hwm, NULL, e);
    if (B->fit_only) p->hwm = hwm;   /* what vdp_finish_stats would find, or over the budget */
    vd_free(saved_q);
    return rc;
}

double vdp_sgd_s(const vd_net *net, const vd_profile *prof) {
    int64_t trained = 0;
    for (int k = 0; k < net->n_params; k++)
        if (vd_param_trained(&net->params[k])) trained += net->params[k].numel;
    return trained == net->n_trainable || net->n_trainable <= 0
         ? prof->sgd_s : prof->sgd_s * (double)trained / (double)net->n_trainable;
}

/* The update in the backward pass (vd_plan.update_in_bwd): each layer's
 * backward step also runs its parameters' SGD update, the profile's SGD time
 * in proportion to its trained parameters (frozen ones are not updated); the
 * SGD step runs nothing. */
static void update_steps(bld *B, const vd_profile *prof) {
    vd_plan *p = B->p;
    const vd_net *net = B->net;
    if (!p->update_in_bwd || net->n_trainable <= 0) return;
    for (int i = 0; i < B->L; i++) {
        const vd_layer *l = vdp_ul(B, i);
        if (!p->layers[i].update) continue;
        int64_t n = 0;
        for (int k = l->param_first; k < l->param_first + l->n_params; k++)
            if (vd_param_trained(&net->params[k])) n += net->params[k].numel;
        if (n) p->steps[vdp_bwd_step(B->L, i)].compute_s += prof->sgd_s * (double)n / (double)net->n_trainable;
    }
    p->steps[2 * B->L].compute_s = 0.0;
}

/* Copy n tensors without their names (written at the end of a build:
 * vdp_name_tensors; half of each record), each left empty. */
static void copy_unnamed(vd_tensor *dst, const vd_tensor *src, int n) {
    const size_t keep = offsetof(vd_tensor, kind);
    for (int t = 0; t < n; t++) {
        memcpy((char *)&dst[t] + keep, (const char *)&src[t] + keep, sizeof *dst - keep);
        dst[t].name[0] = '\0';
    }
}

/* ---- a search's tensors (vdp_tcache) ------------------------------------ */

/* What vdp_build_tensors made of one build: its key, everything it reads
 * that a search's builds may change (the options algos[2 NL], the split
 * layers, whether the gradients alias) or that could differ between callers
 * (the net, profile, pin, batch and the options it reads), and its result:
 * the tensors, the units, the plan's fixed tensors, the builder's arrays it
 * writes. */
typedef struct tc_ent {
    bool valid;
    const vd_net *net;
    const vd_profile *prof;
    const vd_plan *pin;
    int batch, L, NL, cap_t;
    bool forward_only, fuse_bn_add, grads_persistent, has_chunks;
    int *algos;               /* [2 NL] */
    int *chunks;              /* [NL] */
    int n_tensors, t_params, t_mom, t_grads, t_x, t_labels;
    bool update_in_bwd;
    vd_tensor *tensors;       /* [cap_t] */
    vd_plan_layer *layers;    /* [L] */
    int *act_of, *dact_of;    /* [L] */
    int *lact;                /* [2 NL]: lact, then ldact */
    int *touch;               /* [3 cap_t]: fwd_write, first_touch, last_touch */
    const char **tname;       /* [2 cap_t] */
    unsigned gen;             /* how many results it has held (tc_store) */
    /* the names vdp_name_tensors wrote of this result's tensors and units'
     * options (name_build): a function of the key like the rest */
    bool named;
    char (*names)[sizeof ((vd_tensor *)0)->name];   /* [cap_t] */
    char (*labels)[2][sizeof ((vd_plan_layer *)0)->algo_label];   /* [L] */
    /* the steps (build_steps) of this result, likewise */
    bool stepped;
    vd_step *steps;           /* [2 L + 2] */
} tc_ent;

struct vdp_tcache { tc_ent ent[2]; };   /* by bld.alias */

vdp_tcache *vdp_tcache_new(void) { return vd_calloc(1, sizeof(vdp_tcache), NULL); }

static void tc_ent_free(tc_ent *c) {
    vd_free(c->algos); vd_free(c->chunks); vd_free(c->tensors); vd_free(c->layers);
    vd_free(c->act_of); vd_free(c->dact_of); vd_free(c->lact); vd_free(c->touch); vd_free(c->tname);
    vd_free(c->names); vd_free(c->labels); vd_free(c->steps);
    unsigned gen = c->gen;
    memset(c, 0, sizeof *c);
    c->gen = gen + 1;
}

void vdp_tcache_free(vdp_tcache *tc) {
    if (!tc) return;
    tc_ent_free(&tc->ent[0]);
    tc_ent_free(&tc->ent[1]);
    vd_free(tc);
}

/* Does entry c hold what vdp_build_tensors makes of B (after bld_init) and
 * algos? */
static bool tc_match(const tc_ent *c, const bld *B, const int *algos) {
    const vd_plan_opts *o = B->opts;
    size_t nl = (size_t)B->NL;
    return c->valid && c->net == B->net && c->prof == B->prof && c->pin == B->pin &&
           c->batch == o->batch && c->L == B->L && c->NL == B->NL && c->cap_t == B->cap_t &&
           c->forward_only == o->forward_only && c->fuse_bn_add == o->fuse_bn_add &&
           c->grads_persistent == o->grads_persistent && c->has_chunks == (o->chunks != NULL) &&
           !memcmp(c->algos, algos, 2 * nl * sizeof *algos) &&
           (!o->chunks || !memcmp(c->chunks, o->chunks, nl * sizeof *o->chunks));
}

/* Keep what vdp_build_tensors made of B and algos in c (nothing when out of
 * memory: the next build makes its own). */
static void tc_store(tc_ent *c, const bld *B, const int *algos) {
    const vd_plan *p = B->p;
    const vd_plan_opts *o = B->opts;
    size_t L = (size_t)B->L, nl = (size_t)B->NL, ct = (size_t)B->cap_t;
    if (!c->tensors || c->L != B->L || c->NL != B->NL || c->cap_t != B->cap_t) {
        tc_ent_free(c);
        c->algos = vd_malloc(2 * (nl ? nl : 1) * sizeof *c->algos, NULL);
        c->chunks = vd_malloc((nl ? nl : 1) * sizeof *c->chunks, NULL);
        c->tensors = vd_malloc(ct * sizeof *c->tensors, NULL);
        c->layers = vd_malloc((L ? L : 1) * sizeof *c->layers, NULL);
        c->act_of = vd_malloc((L ? L : 1) * sizeof *c->act_of, NULL);
        c->dact_of = vd_malloc((L ? L : 1) * sizeof *c->dact_of, NULL);
        c->lact = vd_malloc(2 * (nl ? nl : 1) * sizeof *c->lact, NULL);
        c->touch = vd_malloc(3 * ct * sizeof *c->touch, NULL);
        c->tname = vd_malloc(2 * ct * sizeof *c->tname, NULL);
        c->names = vd_malloc(ct * sizeof *c->names, NULL);
        c->labels = vd_malloc((L ? L : 1) * sizeof *c->labels, NULL);
        c->steps = vd_malloc((2 * L + 2) * sizeof *c->steps, NULL);
        if (!c->algos || !c->chunks || !c->tensors || !c->layers || !c->act_of || !c->dact_of ||
            !c->lact || !c->touch || !c->tname || !c->names || !c->labels || !c->steps) {
            tc_ent_free(c);
            return;
        }
        c->L = B->L; c->NL = B->NL; c->cap_t = B->cap_t;
    }
    c->net = B->net; c->prof = B->prof; c->pin = B->pin; c->batch = o->batch;
    c->forward_only = o->forward_only; c->fuse_bn_add = o->fuse_bn_add;
    c->grads_persistent = o->grads_persistent; c->has_chunks = o->chunks != NULL;
    memcpy(c->algos, algos, 2 * nl * sizeof *algos);
    if (o->chunks) memcpy(c->chunks, o->chunks, nl * sizeof *o->chunks);
    size_t nt = (size_t)p->n_tensors;
    c->n_tensors = p->n_tensors;
    c->t_params = p->t_params; c->t_mom = p->t_mom; c->t_grads = p->t_grads;
    c->t_x = p->t_x; c->t_labels = p->t_labels; c->update_in_bwd = p->update_in_bwd;
    copy_unnamed(c->tensors, p->tensors, p->n_tensors);
    memcpy(c->layers, p->layers, L * sizeof *p->layers);
    memcpy(c->act_of, B->act_of, L * sizeof *B->act_of);
    memcpy(c->dact_of, B->dact_of, L * sizeof *B->dact_of);
    memcpy(c->lact, B->lact, 2 * nl * sizeof *B->lact);
    memcpy(c->touch, B->fwd_write, nt * sizeof *c->touch);
    memcpy(c->touch + ct, B->first_touch, nt * sizeof *c->touch);
    memcpy(c->touch + 2 * ct, B->last_touch, nt * sizeof *c->touch);
    memcpy(c->tname, B->tname, 2 * nt * sizeof *c->tname);
    c->valid = true;
    c->named = c->stepped = false;
    c->gen++;
}

/* vdp_build_tensors, or its result for the same key from tc (NULL: none),
 * which keeps the result for the next build. A search's builds change
 * mostly the dispositions (read after: vdp_decide_recompute,
 * vdp_decide_offload). */
static int build_tensors(bld *B, const int *algos, vdp_tcache *tc, vd_err *e) {
    tc_ent *c = tc ? &tc->ent[B->alias] : NULL;
    B->tce = NULL;
    if (!c || !tc_match(c, B, algos)) {
        int rc = vdp_build_tensors(B, algos, e);
        if (!rc && c) tc_store(c, B, algos);
        if (!rc && c && c->valid) { B->tce = c; B->tc_gen = c->gen; }
        return rc;
    }
    B->tce = c;
    B->tc_gen = c->gen;
    vd_plan *p = B->p;
    size_t L = (size_t)B->L, nl = (size_t)B->NL, ct = (size_t)B->cap_t, nt = (size_t)c->n_tensors;
    p->n_tensors = c->n_tensors;
    p->t_params = c->t_params; p->t_mom = c->t_mom; p->t_grads = c->t_grads;
    p->t_x = c->t_x; p->t_labels = c->t_labels; p->update_in_bwd = c->update_in_bwd;
    copy_unnamed(p->tensors, c->tensors, c->n_tensors);
    memcpy(p->layers, c->layers, L * sizeof *p->layers);
    memcpy(B->act_of, c->act_of, L * sizeof *B->act_of);
    memcpy(B->dact_of, c->dact_of, L * sizeof *B->dact_of);
    memcpy(B->lact, c->lact, 2 * nl * sizeof *B->lact);
    memcpy(B->fwd_write, c->touch, nt * sizeof *c->touch);
    memcpy(B->first_touch, c->touch + ct, nt * sizeof *c->touch);
    memcpy(B->last_touch, c->touch + 2 * ct, nt * sizeof *c->touch);
    memcpy(B->tname, c->tname, 2 * nt * sizeof *c->tname);
    return VD_OK;
}

/* The steps' kinds, units and times (init_steps, then as the tensors
 * change them: unpaired_steps, scale_add_steps, update_steps), after
 * build_tensors: like its result, a function of the options and split,
 * copied from the search's tensors where the build took them from there
 * and a build before stepped them (a split step's time is interpolated
 * between the profile's chunks). */
static void build_steps(bld *B, const vd_profile *prof, const int *algos) {
    vd_plan *p = B->p;
    tc_ent *c = B->tce;
    size_t bytes = ((size_t)p->n_steps + 1) * sizeof *p->steps;
    if (c && c->stepped) {
        memcpy(p->steps, c->steps, bytes);
        return;
    }
    init_steps(p, B->net, prof, algos);
    unpaired_steps(B, prof, algos);
    scale_add_steps(B);
    update_steps(B, prof);
    if (c) {
        memcpy(c->steps, p->steps, bytes);
        c->stepped = true;
    }
}

/* vdp_name_tensors of a build's plan, the names of the tensors and options
 * that build_tensors gave it copied from the search's tensors where it
 * took them from there (and noted there by the first build named), the
 * tensors the build added after (disp.c's, the staging's) written: every
 * build of a search names the variant it keeps. */
static void name_build(bld *B) {
    tc_ent *c = B->tce;
    vd_plan *p = B->p;
    if (!c || c->gen != B->tc_gen) {
        vdp_name_tensors(B, 0);
        return;
    }
    int nt = c->n_tensors;
    if (!c->named) {
        vdp_name_tensors(B, 0);
        for (int t = 0; t < nt; t++) memcpy(c->names[t], p->tensors[t].name, sizeof c->names[t]);
        for (int u = 0; u < B->L; u++) {
            memcpy(c->labels[u][0], p->layers[u].algo_label, sizeof c->labels[u][0]);
            memcpy(c->labels[u][1], p->layers[u].algo_bwd_label, sizeof c->labels[u][1]);
        }
        c->named = true;
        return;
    }
    for (int t = 0; t < nt; t++) memcpy(p->tensors[t].name, c->names[t], sizeof c->names[t]);
    for (int u = 0; u < B->L; u++) {
        memcpy(p->layers[u].algo_label, c->labels[u][0], sizeof c->labels[u][0]);
        memcpy(p->layers[u].algo_bwd_label, c->labels[u][1], sizeof c->labels[u][1]);
    }
    vdp_name_tensors(B, nt);
}

/* The part of a build that does not depend on the prefetch variant: steps,
 * tensors, decisions and (with offloads) the stall-free timeline in
 * B->t_start and B->d2h. On failure the caller frees B and *out. */
static int build_prefix(bld *B, const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                        vd_policy offload_pol, const int *algos, const vd_plan *pin, int variant,
                        bool alias, vdp_tcache *tc, vd_plan *out, bool *any_offload, vd_err *e) {
    *any_offload = false;
    int rc = bld_init(B, net, prof, opts, offload_pol, variant, alias, false, out, e);
    if (rc) return rc;
    B->pin = pin;
    vd_plan *p = out;
    rc = build_tensors(B, algos, tc, e);
    if (rc) return rc;
    build_steps(B, prof, algos);
    vdp_decide_recompute(B);
    /* offloads released as early as possible (the paper's rule) */
    *any_offload = vdp_decide_offload(B, offload_pol);

    /* Stall-free timeline with just-in-time prefetches (scheduled in
     * build_suffix). */
    if (*any_offload) {
        vdp_build_intervals(B);
        vdp_build_actions(B);
        rc = vdp_simulate(p, prof, true, B->d2h, e);
        if (rc) return rc;
        /* when each step's compute-stream work (recomputes, then the op) begins */
        for (int s = 0; s <= p->n_steps; s++) B->t_start[s] = p->steps[s].t_rc_start;
    }
    return VD_OK;
}

/* A copy of a build after build_prefix (S, its plan) as D with variant
 * `variant`, its plan *out: the plan's arrays and what the builder's steps
 * after the prefix read (the rest of the builder is scratch), but for the
 * units (layers), which no step after the prefix writes: *out's are S's
 * plan's (build_variants: drop_variant). On failure the caller frees D and
 * *out. */
static int bld_clone(bld *D, const bld *S, int variant, vd_plan *out, vd_err *e) {
    const vd_plan *sp = S->p;
    int rc = bld_init(D, S->net, S->prof, S->opts, sp->offload_policy, variant, S->alias, true, out,
                      e);
    if (rc) return rc;
    D->pin = S->pin;
    D->tce = S->tce;
    D->tc_gen = S->tc_gen;
    vd_plan *p = out;
    vd_tensor *tensors = p->tensors;
    vd_interval *intervals = p->intervals;
    vd_action *actions = p->actions;
    vd_step *steps = p->steps;
    int *first_unit = p->first_unit;
    *p = *sp;   /* (the layers too: borrowed, see build_variants) */
    p->tensors = tensors; p->intervals = intervals; p->actions = actions;
    p->steps = steps; p->first_unit = first_unit;
    /* The tensors without their names (not written yet: vdp_name_tensors,
     * at the end of a build; half of each record). Not the intervals nor
     * the actions: build_suffix builds them again before it reads them
     * (vdp_fit_memory counts the live bytes from the tensors). The copies
     * were a twentieth of an auto search. */
    copy_unnamed(p->tensors, sp->tensors, sp->n_tensors);
    memcpy(p->steps, sp->steps, ((size_t)sp->n_steps + 1) * sizeof *p->steps);
    memcpy(p->first_unit, sp->first_unit, (size_t)sp->n_layers * sizeof *p->first_unit);
    memcpy(D->lact, S->lact, 2 * (size_t)sp->n_layers * sizeof *D->lact);
    size_t nt = (size_t)sp->n_tensors, L = (size_t)S->L;
    memcpy(D->act_of, S->act_of, L * sizeof *D->act_of);
    memcpy(D->dact_of, S->dact_of, L * sizeof *D->dact_of);
    memcpy(D->fwd_write, S->fwd_write, nt * sizeof *D->fwd_write);
    memcpy(D->first_touch, S->first_touch, nt * sizeof *D->first_touch);
    memcpy(D->last_touch, S->last_touch, nt * sizeof *D->last_touch);
    memcpy(D->t_start, S->t_start, ((size_t)sp->n_steps + 1) * sizeof *D->t_start);
    memcpy(D->d2h, S->d2h, nt * sizeof *D->d2h);
    memcpy(D->tname, S->tname, 2 * nt * sizeof *D->tname);
    return VD_OK;
}

/* The top of a placed build before its staging, as vdp_finish_stats would
 * find it: the intervals' highest end, or where it is not placed, its
 * top's lower bound, the most live bytes (offsets unset, build_stats).
 * Sets p->budget and p->feasible (the staging keeps both: its region fits
 * below the budget). */
static void plan_top(bld *B) {
    vd_plan *p = B->p;
    uint64_t top = 0;
    if (B->unplaced) {
        top = B->unplaced_live;
    } else {
        for (int k = 0; k < p->n_intervals; k++)
            if (p->intervals[k].offset + p->intervals[k].bytes > top)
                top = p->intervals[k].offset + p->intervals[k].bytes;
    }
    p->hwm = top;
    p->budget = B->opts->budget ? B->opts->budget : p->hwm;
    p->feasible = p->hwm <= p->budget;
}

/* The replay and input staging of a placed build whose top plan_top took. */
static int replay_build(bld *B, vd_err *e) {
    vd_plan *p = B->p;
    const vd_plan_opts *opts = B->opts;
    int rc = vdp_simulate(p, B->prof, false, NULL, e);
    if (rc) return rc;
    if (p->feasible && !p->forward_only && !opts->no_stage_input)
        rc = vdp_add_staging(B, opts->budget ? opts->budget : p->hwm, e);
    return rc;
}

/* The statistics of a replayed build (vdp_finish_stats; p->hwm as plan_top
 * took it where it is not placed). Neither the replays nor the staging nor
 * build_variants' choice read them: gathered for the plan kept only. */
static void build_stats(bld *B) {
    vdp_finish_stats(B->p);
    if (B->unplaced) B->p->hwm = B->p->live_peak;
}

/* The rest of a build after build_prefix: prefetch schedule (B->variant),
 * memory fitting, placement, actions, simulation, input staging and (not
 * defer) the statistics. The tensors are named by the caller
 * (vdp_name_tensors), for the variant it keeps. defer (build_variants,
 * which ends the variant it keeps: build_stats, and replay_build where
 * B->unfinished): no statistics, and a plan that does not fit stops at its
 * top (plan_top: what build_variants compares such variants by), most
 * variants that do not fit being dropped. */
static int build_suffix(bld *B, const vd_plan *pin, bool any_offload, bool defer, bool *live_fit,
                        vd_err *e) {
    vd_plan *p = B->p;
    const vd_plan_opts *opts = B->opts;
    *live_fit = false;
    B->unfinished = false;
    vdp_cost(B, 2.0 * p->n_tensors);   /* the schedule and the fitting */
    if (B->early) *B->early += 2.0 * p->n_tensors;
    if (any_offload) vdp_schedule_prefetch(B, B->t_start, B->d2h);
    int rc = fit_and_place(B, any_offload, pin, live_fit, e);
    if (rc) return rc;
    if (B->fit_only) {   /* vdp_build_fits: the plan stops here */
        p->budget = opts->budget;
        p->feasible = !p->budget || p->hwm <= p->budget;
        return p->feasible ? VD_OK : VD_EBUDGET;
    }

    /* With a screen, fit_and_place built the actions of the intervals it
     * placed (the placement changes only their offsets, which the actions do
     * not read, nor does the screen's replay change what they are built
     * from): not built again. The work counted stays the same. */
    if (!(B->screen_s > 0) && !B->unplaced) vdp_build_actions(B);
    vdp_cost(B, 2.0 * p->n_actions);   /* with the statistics */
    plan_top(B);
    B->unfinished = defer && !p->feasible;
    if (!B->unfinished && (rc = replay_build(B, e))) return rc;
    if (!defer) build_stats(B);
    return p->feasible ? VD_OK : VD_EBUDGET;
}

/* A build's screen (vdp_build_screened): s the screen (0: none); lb no
 * variant that fits predicts faster; dlb the same over the dropped variants
 * alone; how many were dropped. */
typedef struct screen {
    double s, lb, dlb, cost, effort;
    int dropped, dropped_fit;
    bool exact;
    bool unplaced_over, unplaced;   /* vdp_build_unplaced_over: asked, some variant not placed */
    bool quick_stage;               /* bld.stage_quick of every variant */
    bool fit_only;                  /* vdp_build_fits (bld.fit_only of every variant) */
    double early;                   /* cost's share up to each variant's first screen replay
                                       (the prefix, the schedules and fittings, the first
                                       actions: build_fixed's estimate of a retry) */
    double rlb;                     /* the least first replay of the variants that beat the
                                       screen and did not fit (bld.replay0) */
    vdp_tcache *tc;                 /* the search's tensors (build_tensors), or NULL */
} screen;

static int build_mode(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                      vd_policy offload_pol, const int *algos, const vd_plan *pin,
                      int variant, bool alias, bool *live_fit, screen *scr, vd_plan *out, vd_err *e) {
    *live_fit = false;
    bld B;
    bool any_offload;
    int rc = build_prefix(&B, net, prof, opts, offload_pol, algos, pin, variant, alias, scr->tc,
                          out, &any_offload, e);
    B.screen_s = scr->s;
    B.unplaced_over = scr->unplaced_over;
    B.stage_quick = scr->quick_stage;
    B.fit_only = scr->fit_only;
    B.cost = &scr->cost;
    B.effort = &scr->effort;
    B.early = &scr->early;
    B.replay0 = INFINITY;
    vdp_cost(&B, 4.0 * out->n_tensors);   /* the prefix */
    scr->early += 4.0 * out->n_tensors;
    if (!rc) rc = build_suffix(&B, pin, any_offload, false, live_fit, e);
    if (rc == VD_EBUDGET && B.replay0 < scr->rlb) scr->rlb = B.replay0;
    if ((rc == VD_OK || rc == VD_EBUDGET) && !B.fit_only) name_build(&B);
    if (rc == VD_EBUDGET && B.unplaced) scr->unplaced = true;
    if (rc == VDP_SCREENED) { scr->lb = scr->dlb = B.screen_lb; scr->dropped++; scr->dropped_fit += *live_fit; }
    else if (rc == VD_OK) scr->lb = out->sim.iter_s;
    bld_free(&B);
    if (rc != VD_OK && rc != VD_EBUDGET) vdp_plan_release(out);
    return rc;
}

/* Release a variant plan of build_variants: its units (layers) are the
 * prefix's, every variant's (bld_clone, instead of a copy each), left to
 * the plan kept. */
static void drop_variant(vd_plan *q) {
    q->layers = NULL;
    vdp_plan_release(q);
}

/* --prefetch auto: three candidate schedules, simulated; the fastest that
 * fits wins (or, if none fits, the one that overshoots least):
 *   0  ours: regions held until their offload drained (no forward stall)
 *      while memory allows, prefetches as late as still hides the copy
 *      (H2D queueing included), offloads that save nothing dropped;
 *   1  the same prefetch rule with releases right after the last forward
 *      use and every offload kept (least memory);
 *   2  the paper's prefetch rule.
 * --prefetch paper: variant 2 only. */
static int build_variants(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                          vd_policy offload_pol, const int *algos, const vd_plan *pin,
                          bool alias, bool *live_fit, screen *scr, vd_plan *out, vd_err *e) {
    scr->lb = scr->dlb = scr->rlb = INFINITY;
    scr->dropped = scr->dropped_fit = 0;
    /* per-tensor requests may offload (a RECOMPUTE that cannot be honoured too) */
    bool disp_offload = false;
    for (int i = 0; opts->disp && i <= net->n_layers; i++)
        disp_offload |= opts->disp[i] == VD_DISP_OFFLOAD || opts->disp[i] == VD_DISP_RECOMPUTE;
    bool no_offload = (offload_pol == VD_POLICY_NONE || offload_pol == VD_POLICY_AUTO) && !disp_offload;
    /* (a forward-only plan: variant 0, whose releases vdp_fit_memory moves
     * as memory needs; the paper's rule places backward prefetches) */
    if (opts->prefetch == VD_PREFETCH_PAPER || no_offload || opts->forward_only)
        return build_mode(net, prof, opts, offload_pol, algos, pin,
                          opts->prefetch == VD_PREFETCH_PAPER && !opts->forward_only ? 2 : 0,
                          alias, live_fit, scr, out, e);
    int best_rc = -1;
    memset(out, 0, sizeof *out);
    *live_fit = false;
    /* the variants share everything before the prefetch schedule: built
     * once, copied for variants 0 and 1, used itself by variant 2 */
    bld B0;
    vd_plan P0;
    bool any_offload;
    int rc0 = build_prefix(&B0, net, prof, opts, offload_pol, algos, pin, 2, alias, scr->tc, &P0,
                           &any_offload, e);
    if (rc0) {
        bld_free(&B0);
        vdp_plan_release(&P0);
        return rc0;
    }
    vd_plan_layer *units = P0.layers;   /* every variant's (bld_clone): the plan kept's */
    scr->cost += 4.0 * P0.n_tensors;   /* the prefix */
    scr->effort += 4.0 * P0.n_tensors;
    scr->early += 4.0 * P0.n_tensors;
    /* vdp_build_fits asks only whether some variant fits, which their
     * order does not change: the paper's rule first, the one that fits in
     * the dyn policy's greedy, where every map is offloaded
     * (docs/results/2026-12-06-s23/plantime.md), each variant a copy of
     * the prefix */
    static const int fit_order[3] = {2, 0, 1};
    bool own0 = true;   /* B0 and P0 are still this loop's to free */
    bld Bk;             /* the builder of *out (while best_rc >= 0) */
    for (int i = 0; i < 3; i++) {
        int v = scr->fit_only ? fit_order[i] : i;
        vd_plan alt;
        vd_err te = {0};
        bool lf = false;
        bld B;
        int rc;
        if (v < 2 || scr->fit_only) {
            rc = bld_clone(&B, &B0, v, &alt, &te);
        } else {
            B = B0;
            alt = P0;
            B.p = &alt;
            own0 = false;
            rc = VD_OK;
        }
        B.screen_s = scr->s;
        B.unplaced_over = scr->unplaced_over;
        B.stage_quick = scr->quick_stage;
        B.fit_only = scr->fit_only;
        B.unplaced = false;
        B.cost = &scr->cost;
        B.effort = &scr->effort;
        B.early = &scr->early;
        B.replay0 = INFINITY;
        if (!rc) rc = build_suffix(&B, pin, any_offload, !scr->fit_only, &lf, &te);
        if (rc == VD_EBUDGET && B.replay0 < scr->rlb) scr->rlb = B.replay0;
        bool unplaced = B.unplaced;
        double dropped_lb = B.screen_lb;
        if (rc != VD_OK && rc != VD_EBUDGET) { bld_free(&B); drop_variant(&alt); }
        if (rc == VDP_SCREENED) {   /* no faster than the screen: dropped */
            if (dropped_lb < scr->lb) scr->lb = dropped_lb;
            if (dropped_lb < scr->dlb) scr->dlb = dropped_lb;
            scr->dropped++;
            scr->dropped_fit += lf;
            *live_fit |= lf;
            continue;
        }
        if (rc == VD_OK && alt.sim.iter_s < scr->lb) scr->lb = alt.sim.iter_s;
        *live_fit |= lf;
        if (rc != VD_OK && rc != VD_EBUDGET) {
            if (own0) { bld_free(&B0); drop_variant(&P0); }
            if (best_rc >= 0) { drop_variant(out); bld_free(&Bk); }
            vd_free(units);
            *e = te;
            return rc;
        }
        bool better;
        if (best_rc < 0) better = true;
        else if (rc == VD_OK && best_rc != VD_OK) better = true;
        else if (rc != VD_OK && best_rc == VD_OK) better = false;
        else if (rc == VD_OK) better = alt.sim.iter_s < out->sim.iter_s;
        else better = alt.hwm < out->hwm;
        if (better) {
            if (best_rc >= 0) { drop_variant(out); bld_free(&Bk); }
            *out = alt;
            Bk = B;
            best_rc = rc;
            scr->unplaced = unplaced;
            if (rc) *e = te;
        } else {
            drop_variant(&alt);
            bld_free(&B);
        }
        /* vdp_build_fits: the first variant that fits answers */
        if (scr->fit_only && rc == VD_OK) break;
    }
    if (own0) { bld_free(&B0); drop_variant(&P0); }
    if (best_rc < 0) {
        vd_free(units);
        return VDP_SCREENED;
    }
    Bk.p = out;
    /* ended and named only now, the variant kept (build_suffix's defer) */
    if (!scr->fit_only) {
        vd_err te = {0};
        int rc = Bk.unfinished ? replay_build(&Bk, &te) : VD_OK;
        if (rc) {
            vdp_plan_release(out);
            bld_free(&Bk);
            *e = te;
            return rc;
        }
        build_stats(&Bk);
        name_build(&Bk);
    }
    bld_free(&Bk);
    out->prefetch = opts->prefetch;
    return best_rc;
}

int vdp_recomputed_layers(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                          const int *algos, vdp_tcache *tc, bool *rc_layer, vd_err *e) {
    bld B;
    vd_plan p;
    int rc = bld_init(&B, net, prof, opts, VD_POLICY_AUTO, 0, true, false, &p, e);
    if (!rc) rc = build_tensors(&B, algos, tc, e);   /* (the steps are not read) */
    if (!rc) {
        vdp_decide_recompute(&B);
        for (int j = 0; j < B.NL; j++) rc_layer[j] = false;
        for (int j = 0; j < B.L; j++) rc_layer[p.layers[j].layer] |= p.layers[j].rc_step >= 0;
    }
    bld_free(&B);
    vdp_plan_release(&p);
    return rc;
}

/* Does plan p alias an input gradient: an add's (an input with no dx) or
 * an in-place ReLU's (dx its dy)? */
static bool has_grad_alias(const vd_plan *p, const vd_net *net) {
    for (int u = 0; u < p->n_units && !p->forward_only; u++) {
        const vd_plan_layer *pl = &p->layers[u];
        const vd_layer *l = &net->layers[pl->layer];
        for (int k = 0; k < l->n_in; k++)
            if (l->in[k] >= 0 && (pl->dx[k] < 0 || pl->dx[k] == pl->dy)) return true;
    }
    return false;
}

/* build_variants with the gradient aliasing of adds and in-place ReLUs.
 * Sharing one tensor never raises the bytes live at a step, but its region
 * spans what were two (the add's or ReLU's dy and its input's gradient),
 * which the placement may pack worse.
 * So when the placement is what fails (the live bytes fit the budget, the
 * high-water mark does not) or, without a budget, what sets the need above
 * the live peak, the plan is built again without the aliasing (as before
 * it), and that one is taken if it fits (needs less). */
static int build_fixed(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_policy offload_pol, const int *algos, const vd_plan *pin, screen *scr,
                       vd_plan *out, vd_err *e) {
    bool live_fit = false;
    int rc = build_variants(net, prof, opts, offload_pol, algos, pin, true, &live_fit, scr, out, e);
    if (rc != VD_OK && rc != VD_EBUDGET && rc != VDP_SCREENED) return rc;
    /* Every variant dropped: the retry is not built either. Without the
     * aliasing, the same decisions keep at least as many bytes live (the
     * fitting delays at least as many prefetches) and the adds' backward
     * copies into every input: its variants replay no faster than the
     * aliased ones, which did not beat the screen. */
    if (rc == VDP_SCREENED) return rc;
    bool no_fit = rc == VD_EBUDGET;
    bool retry = no_fit ? live_fit : rc == VD_OK && !opts->budget && out->hwm > out->live_peak;
    if (!retry || !has_grad_alias(out, net)) return rc;
    /* Behind a screen, no retry either. Its variants replay no faster than
     * the aliased ones (above), so only those whose aliased variant beat
     * the screen and did not fit could beat it; in the searches measured
     * none did (every such retry had all its variants dropped:
     * docs/results/2026-12-06-s23/plantime.md). The outcome is then
     * a bound (a dropped variant's): no plan of the configuration that
     * fits predicts faster than the least replay of its variants (scr->lb,
     * with scr->rlb). The cost counted for it is what the retry's would
     * be with each variant dropped at its first screen, taken as the
     * aliased build's up to there (scr->early), so that the search's work
     * budgets and effort cap cut about where they did. */
    if (no_fit && scr->s > 0) {
        scr->cost += scr->early;
        scr->effort += scr->early;
        scr->dropped++;
        if (scr->rlb < scr->lb) scr->lb = scr->rlb;
        if (scr->rlb < scr->dlb) scr->dlb = scr->rlb;
        return rc;
    }
    /* a dropped variant whose live bytes fit may fit placed: then the
     * unscreened build would not retry */
    bool unsure = no_fit && scr->dropped_fit > 0;
    vd_plan alt;
    vd_err te = {0};
    screen s2 = {.s = scr->s, .tc = scr->tc, .fit_only = scr->fit_only};
    int rc2 = build_variants(net, prof, opts, offload_pol, algos, pin, false, &live_fit, &s2, &alt, &te);
    /* the bound and the drops of both builds */
    if (s2.lb < scr->lb) scr->lb = s2.lb;
    if (s2.dlb < scr->dlb) scr->dlb = s2.dlb;
    scr->dropped += s2.dropped;
    scr->dropped_fit += s2.dropped_fit;
    scr->cost += s2.cost;
    scr->effort += s2.effort;
    if (rc2 == VD_OK && (no_fit || alt.hwm < out->hwm)) {
        if (unsure && alt.sim.iter_s < scr->s) {
            /* the retry is faster than the screen, and is the answer only
             * when no aliased variant fits: build the dropped ones after all */
            vd_plan A;
            screen s3 = {.tc = scr->tc};
            bool lf3 = false;
            vd_err t3 = {0};
            int rc3 = build_variants(net, prof, opts, offload_pol, algos, pin, true, &lf3, &s3, &A, &t3);
            scr->cost += s3.cost;
            scr->effort += s3.effort;
            if (rc3 != VD_OK && rc3 != VD_EBUDGET) { vdp_plan_release(&alt); if (rc == VD_EBUDGET) vdp_plan_release(out); *e = t3; return rc3; }
            if (rc3 == VD_OK) {   /* it fits: no retry */
                vdp_plan_release(&alt);
                if (rc == VD_EBUDGET) vdp_plan_release(out);
                *out = A;
                scr->exact = true;
                return VD_OK;
            }
            vdp_plan_release(&A);
        }
        if (rc == VD_EBUDGET || rc == VD_OK) vdp_plan_release(out);
        *out = alt;
        if (unsure) scr->exact = true;   /* (the alternative above was ruled out) */
        return VD_OK;
    }
    if (rc2 == VD_OK || rc2 == VD_EBUDGET) vdp_plan_release(&alt);
    return rc;   /* the aliased plan's outcome (another error of the retry: ignored) */
}

int vdp_build_fixed(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                    vd_policy offload_pol, const int *algos, const vd_plan *pin,
                    vd_plan *out, vd_err *e) {
    screen scr = {0};
    return build_fixed(net, prof, opts, offload_pol, algos, pin, &scr, out, e);
}

int vdp_build_fits(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                   vd_policy offload_pol, const int *algos, bool *fits, vd_err *e) {
    screen scr = {.fit_only = true};
    vd_plan p;
    int rc = build_fixed(net, prof, opts, offload_pol, algos, NULL, &scr, &p, e);
    if (rc == VD_OK || rc == VD_EBUDGET) vdp_plan_release(&p);
    *fits = rc == VD_OK;
    return rc == VD_EBUDGET ? VD_OK : rc;
}

int vdp_build_unplaced_over(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                            vd_policy offload_pol, const int *algos, bool quick_stage,
                            vdp_tcache *tc, vd_plan *out, bool *unplaced, double *cost,
                            double *effort, vd_err *e) {
    screen scr = {.unplaced_over = true, .quick_stage = quick_stage, .tc = tc};
    int rc = build_fixed(net, prof, opts, offload_pol, algos, NULL, &scr, out, e);
    *unplaced = (rc == VD_EBUDGET) && scr.unplaced;
    *cost = scr.cost;
    if (effort) *effort = scr.effort;
    return rc;
}

int vdp_build_screened(const vd_net *net, const vd_profile *prof, const vd_plan_opts *opts,
                       vd_policy offload_pol, const int *algos, double screen_s, bool quick_stage,
                       vdp_tcache *tc, vd_plan *out, bool *exact, double *lb_s, double *cost,
                       double *effort, vd_err *e) {
    screen scr = {.s = screen_s, .quick_stage = quick_stage, .tc = tc};
    int rc = build_fixed(net, prof, opts, offload_pol, algos, NULL, &scr, out, e);
    *lb_s = scr.lb;
    *cost = scr.cost;
    if (effort) *effort = scr.effort;
    *exact = scr.exact || scr.dropped == 0 || (rc == VD_OK && out->sim.iter_s < scr.dlb);
    return rc;
}
