/* test_stage.c — input staging: the next batch uploaded during the current
 * iteration into a planned staging region (plan.h, exec.h).
 *
 *  - training with staging is byte-identical to training without it (every
 *    policy, offloaded x included), with an evaluation pass in between;
 *  - the plan has the staging interval and copy exactly when the region fits
 *    the budget (checked against a brute-force search for a hole);
 *  - the simulator charges the staging copy on the H2D stream and the
 *    device-to-device copy at step 0 instead of x's load (hand computation
 *    on LeNet with an edited profile);
 *  - the staging region overlaps nothing live from its copy to the next
 *    iteration's step 0. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "plan_common.h"
#include "vdt.h"

/* The staging tensor's structure and the region's isolation (also what the
 * executor checks), independently of the planner. */
static void check_staging(const vd_plan *p) {
    if (p->t_stage < 0) {
        ck_assert_int_eq(p->stage_step, -1);
        ck_assert_int_ne(p->stage, VD_STAGE_ON);
        for (int a = 0; a < p->n_actions; a++) ck_assert_int_ne(p->actions[a].kind, VD_A_LOAD_STAGED);
        for (int k = 0; k < p->n_intervals; k++) ck_assert_int_ne(p->intervals[k].fill, VD_FILL_STAGE);
        return;
    }
    int L = p->n_units, n = p->n_steps;
    ck_assert_int_eq(p->stage, VD_STAGE_ON);
    const vd_tensor *S = &p->tensors[p->t_stage], *X = &p->tensors[p->t_x];
    ck_assert_uint_eq(S->bytes, X->bytes);
    ck_assert_int_eq(S->n_iv, 2);
    const vd_interval *a = &p->intervals[S->iv[0]], *b = &p->intervals[S->iv[1]];
    ck_assert_int_eq(a->first, 0);
    ck_assert_int_eq(a->last, 0);
    ck_assert_int_eq(b->first, p->stage_step);
    ck_assert_int_eq(b->last, n - 1);
    ck_assert_int_ge(p->stage_step, L);            /* in the backward pass or the SGD step */
    ck_assert_uint_eq(a->offset, b->offset);
    ck_assert_int_eq(b->fill, VD_FILL_STAGE);
    ck_assert_uint_le(b->offset + b->bytes, p->budget);
    /* the region: nothing else live at step 0 or from the copy to the end */
    for (int k = 0; k < p->n_intervals; k++) {
        const vd_interval *iv = &p->intervals[k];
        if (iv->tensor == p->t_stage) continue;
        bool t_ovl = iv->first <= 0 || iv->last >= p->stage_step;
        bool m_ovl = iv->offset < b->offset + b->bytes && b->offset < iv->offset + iv->bytes;
        ck_assert_msg(!(t_ovl && m_ovl), "staging region overlaps %s [%d,%d]",
                      p->tensors[iv->tensor].name, iv->first, iv->last);
    }
    /* actions: the copy at stage_step after its region-free event, no wait
     * for it in this iteration; LOAD_STAGED of x at step 0 before COMPUTE */
    int n_pf = 0, n_load = 0;
    for (int s = 0; s <= n; s++) {
        const vd_step *st = &p->steps[s];
        int rec = -1, comp = -1;
        for (int i = st->first_action; i < st->first_action + st->n_actions; i++) {
            const vd_action *A = &p->actions[i];
            if (A->kind == VD_A_RECORD_FREE) rec = i;
            if (A->kind == VD_A_COMPUTE) comp = i;
            if (A->kind == VD_A_PREFETCH && A->arg == S->iv[1]) {
                n_pf++;
                ck_assert_int_eq(s, p->stage_step);
                ck_assert_int_ge(rec, st->first_action);
                ck_assert_int_eq(p->actions[rec].arg, st->ev_free);
            }
            ck_assert(!(A->kind == VD_A_WAIT_PREFETCH && A->arg == S->iv[1]));
            if (A->kind == VD_A_LOAD_STAGED) {
                n_load++;
                ck_assert_int_eq(s, 0);
                ck_assert_int_eq(A->arg, X->iv[0]);
                ck_assert_int_lt(comp, 0);         /* before COMPUTE */
            }
        }
    }
    ck_assert_int_eq(n_pf, 1);
    ck_assert_int_eq(n_load, 1);
    /* the copy lands in the simulator's timeline (steady state) */
    ck_assert(b->t_h2d_end > b->t_h2d_start);
    ck_assert(b->t_h2d_start >= p->steps[p->stage_step].t_rc_start - 1e-12 - p->steps[p->stage_step].stall_s);
    ck_assert(p->sim.stage_load_s > 0);
}

/* Can a region of x's size be placed at some issue step q in [L, 2L] below
 * budget without overlapping p's intervals live at step 0 or in [q, 2L]?
 * Brute force over candidate offsets (0 and every interval's end). */
static bool stage_hole_exists(const vd_plan *p, uint64_t budget) {
    uint64_t bytes = p->intervals[p->tensors[p->t_x].iv[0]].bytes;
    int L = p->n_units;   /* (the backward steps: one per unit) */
    for (int q = L; q <= 2 * L; q++)
        for (int c = -1; c < p->n_intervals; c++) {
            uint64_t off = c < 0 ? 0 : p->intervals[c].offset + p->intervals[c].bytes;
            if (off + bytes > budget) continue;
            bool ok = true;
            for (int k = 0; k < p->n_intervals && ok; k++) {
                const vd_interval *iv = &p->intervals[k];
                if (iv->tensor == p->t_stage) continue;
                bool t_ovl = iv->first <= 0 || iv->last >= q;
                bool m_ovl = iv->offset < off + bytes && off < iv->offset + iv->bytes;
                ok = !(t_ovl && m_ovl);
            }
            if (ok) return true;
        }
    return false;
}

/* ---- training: staging vs not ------------------------------------------- */

/* The CPU backend's options timed with the H200's model: there a device
 * copy is far cheaper than the host link, so staging pays (with the cpu
 * model's equal memory and copy bandwidths it never does: the D2D copy reads
 * and writes). */
#define DEV (&vd_device_h200)

typedef struct st_out {
    float *params, *mom;
    float loss[32];
    int eval_correct;
    float eval_loss;
    vd_exec_stats st;
    vd_stage stage;
    int stage_step;
} st_out;

/* iters training steps on batches fill_batch(it) (LeNet-style protocol of
 * exec.h); staging: the plan may stage and the loop uses the look-ahead
 * buffers; eval_after >= 0: an evaluation pass after that iteration (which
 * had staged the next batch: the pass drops it, the loop refills the
 * current buffers). */
static void run_stage(const vd_net *net, int batch, vd_policy pol, uint64_t budget, bool staging,
                      int iters, int eval_after, st_out *o) {
    memset(o, 0, sizeof *o);
    vd_err e = {0};
    vd_profile prof;
    vd_backend *be = cpu_for_dev(net, batch, DEV, &prof);
    vd_plan_opts po = plan_opts(batch, pol);
    po.budget = budget;
    po.fixed_algo = pol == VD_POLICY_DYN ? -1 : 1;
    po.no_stage_input = !staging;
    vd_plan plan;
    ck_assert_msg(vd_plan_build(net, &prof, &po, &plan, &e) == 0, "%s", e.msg);
    check_staging(&plan);
    o->stage = plan.stage;
    o->stage_step = plan.stage_step;
    vd_exec_opts eo = {.poison = true, .layers_ready = true, .deterministic = true,
                       .math = net->train.math};
    vd_exec *ex = NULL;
    ck_assert_msg(vd_exec_create(&ex, net, &plan, be, &eo, &e) == 0, "%s", e.msg);
    ck_assert(vd_exec_stages(ex) == (plan.t_stage >= 0));
    ck_assert(vd_exec_stages(ex) || vd_exec_next_x(ex) == NULL);
    o->params = malloc((size_t)net->param_floats * sizeof(float));
    o->mom = malloc((size_t)net->param_floats * sizeof(float));
    ck_assert(o->params && o->mom);
    vd_net_init_params(net, o->params, 42);
    ck_assert_msg(vd_exec_set_state(ex, o->params, NULL, 0, &e) == 0, "%s", e.msg);
    bool have = false;
    for (int it = 0; it < iters; it++) {
        vd_dtype bf = vd_exec_input_dtype(ex);
        bool cl = vd_exec_input_nhwc(ex);
        if (!have) fill_batch_as(net, batch, it, vd_exec_input_x(ex), bf, cl, vd_exec_input_labels(ex));
        bool next = vd_exec_stages(ex) && it + 1 < iters;
        if (next) {
            fill_batch_as(net, batch, it + 1, vd_exec_next_x(ex), bf, cl, vd_exec_next_labels(ex));
            vd_exec_next_ready(ex);
        }
        ck_assert_msg(vd_exec_train_step(ex, net->train.lr, it, &o->loss[it], &e) == 0, "%s", e.msg);
        have = next;
        if (it == eval_after) {
            fill_batch_as(net, batch, 999, vd_exec_input_x(ex), bf, cl, vd_exec_input_labels(ex));
            vd_eval_counts ec;
            ck_assert_msg(vd_exec_eval_step(ex, &ec, &e) == 0, "%s", e.msg);
            o->eval_correct = ec.top1;
            o->eval_loss = ec.loss;
            /* the evaluation batch replaced the staged one: refill it */
            if (have) fill_batch_as(net, batch, it + 1, vd_exec_input_x(ex), bf, cl, vd_exec_input_labels(ex));
        }
    }
    ck_assert_msg(vd_exec_get_state(ex, o->params, o->mom, NULL, &e) == 0, "%s", e.msg);
    vd_exec_get_stats(ex, &o->st);
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_profile_free(&prof);
    be->destroy(be);
}

static void same(const vd_net *net, const st_out *a, const st_out *b, int iters, const char *what) {
    ck_assert_msg(memcmp(a->params, b->params, (size_t)net->param_floats * 4) == 0,
                  "%s: parameters differ", what);
    ck_assert_msg(memcmp(a->mom, b->mom, (size_t)net->param_floats * 4) == 0, "%s: momentum differs", what);
    for (int i = 0; i < iters; i++)
        ck_assert_msg(memcmp(&a->loss[i], &b->loss[i], 4) == 0, "%s: loss %d differs", what, i);
    ck_assert_int_eq(a->eval_correct, b->eval_correct);
    ck_assert(memcmp(&a->eval_loss, &b->eval_loss, 4) == 0);
}

static void st_free(st_out *o) { free(o->params); free(o->mom); }

static void identity_case(vd_net *net, int batch) {
    const int iters = 6;
    static const vd_policy pols[] = {VD_POLICY_NONE, VD_POLICY_ALL, VD_POLICY_CONV, VD_POLICY_AUTO};
    for (size_t k = 0; k < VD_ARRAY_LEN(pols); k++) {
        vd_plan_opts mo = plan_opts(batch, pols[k]);
        mo.fixed_algo = 1;
        uint64_t mb = cpu_min_budget(net, &mo, DEV);
        vd_plan_opts no = plan_opts(batch, VD_POLICY_NONE);
        no.fixed_algo = 1;
        uint64_t peak = cpu_min_budget(net, &no, DEV);
        uint64_t xb = (uint64_t)batch * (uint64_t)vd_net_out_numel(net, -1) *
                      vd_math_act_bytes(net->train.math);
        /* room for the staging region on top of the tightest plan */
        uint64_t budget = pols[k] == VD_POLICY_NONE ? peak + xb + 4096 : mb + xb + 4096;
        for (int ev = 0; ev < 2; ev++) {
            int eval_after = ev ? 2 : -1;
            st_out ref, st;
            run_stage(net, batch, pols[k], budget, false, iters, eval_after, &ref);
            run_stage(net, batch, pols[k], budget, true, iters, eval_after, &st);
            ck_assert_int_eq(ref.stage, VD_STAGE_OFF);
            ck_assert_msg(st.stage == VD_STAGE_ON, "%s %s: no staging (%s)", net->name,
                          vd_policy_name(pols[k]), vd_stage_name(st.stage));
            /* every step but the first (and the one after the evaluation) staged */
            ck_assert_int_eq(st.st.staged_loads, iters - 1 - ev);
            ck_assert_int_eq(ref.st.staged_loads, 0);
            /* the same work otherwise: activations copied, memory walked */
            ck_assert_uint_eq(st.st.offload_bytes_iter, ref.st.offload_bytes_iter);
            ck_assert_uint_eq(st.st.prefetch_bytes_iter, ref.st.prefetch_bytes_iter);
            char what[96];
            snprintf(what, sizeof what, "%s %s%s", net->name, vd_policy_name(pols[k]),
                     ev ? " with an evaluation" : "");
            same(net, &ref, &st, iters, what);
            st_free(&ref);
            st_free(&st);
        }
    }
}

START_TEST(test_stage_identity_lenet) {
    vd_net net;
    tn_lenet(&net, 4);
    identity_case(&net, 4);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_stage_identity_resnet) {
    vd_net net;
    tn_resnet(&net, 3);
    identity_case(&net, 3);
    vd_net_free(&net);
}
END_TEST

/* bf16 math: the staged batch is bf16 (half the staging region and copy) */
START_TEST(test_stage_identity_bf16) {
    vd_net net;
    tn_resnet(&net, 3);
    net.train.math = VD_MATH_BF16;
    identity_case(&net, 3);
    vd_net_free(&net);
}
END_TEST

/* Without vd_exec_next_ready the executor stages nothing and loads x from
 * the host every step (the staging copy is skipped, its region unused). */
START_TEST(test_stage_protocol_optional) {
    vd_net net;
    tn_lenet(&net, 4);
    vd_err e = {0};
    vd_profile prof;
    vd_backend *be = cpu_for_dev(&net, 4, DEV, &prof);
    vd_plan_opts po = plan_opts(4, VD_POLICY_NONE);
    po.fixed_algo = 1;
    po.budget = (uint64_t)64 << 20;
    vd_plan plan;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &plan, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(plan.stage, VD_STAGE_ON);
    vd_exec_opts eo = {.poison = true, .layers_ready = true, .deterministic = true};
    vd_exec *ex = NULL;
    ck_assert_msg(vd_exec_create(&ex, &net, &plan, be, &eo, &e) == 0, "%s", e.msg);
    float *p = malloc((size_t)net.param_floats * sizeof(float));
    ck_assert_ptr_nonnull(p);
    vd_net_init_params(&net, p, 42);
    ck_assert(vd_exec_set_state(ex, p, NULL, 0, &e) == 0);
    float *x0 = vd_exec_input_x(ex);
    float loss[4];
    for (int it = 0; it < 4; it++) {
        fill_batch(&net, 4, it, vd_exec_input_x(ex), vd_exec_input_labels(ex));
        ck_assert(vd_exec_train_step(ex, net.train.lr, it, &loss[it], &e) == 0);
        ck_assert_ptr_eq(vd_exec_input_x(ex), x0);     /* no swap */
    }
    vd_exec_stats st;
    vd_exec_get_stats(ex, &st);
    ck_assert_int_eq(st.staged_loads, 0);
    /* the same four steps staged: same losses */
    st_out o;
    vd_exec_destroy(&ex);
    run_stage(&net, 4, VD_POLICY_NONE, po.budget, true, 4, -1, &o);
    ck_assert_int_eq(o.st.staged_loads, 3);
    for (int it = 0; it < 4; it++) ck_assert(memcmp(&o.loss[it], &loss[it], 4) == 0);
    st_free(&o);
    free(p);
    vd_plan_free(&plan);
    vd_profile_free(&prof);
    be->destroy(be);
    vd_net_free(&net);
}
END_TEST

/* ---- the plan: staging exactly when it fits ------------------------------ */

/* A net whose input is its largest tensor: a plan without a budget (its
 * own need) has no room for a second x. */
static void pool_net(vd_net *net, int batch) {
    tn_begin(net, "poolnet", 16, 16, 16, 10, batch);
    int x = tn_pool(net, "pool", -1, VD_POOL_MAX, 2, 2);
    x = tn_flatten(net, "flatten", x);
    x = tn_fc(net, "fc", x, 10);
    tn_loss(net, x);
    tn_finish(net);
}

/* Plans of several policies and budgets of net: staging exactly when the
 * region fits. Counts plans with staging and without room. */
static void fits_case(vd_net *net, int B, int *n_on, int *n_room) {
    vd_err e = {0};
    vd_profile prof;
    vd_backend *be = cpu_for_dev(net, B, DEV, &prof);
    static const vd_policy pols[] = {VD_POLICY_NONE, VD_POLICY_ALL, VD_POLICY_DYN, VD_POLICY_AUTO};
    for (size_t k = 0; k < VD_ARRAY_LEN(pols); k++) {
        vd_plan_opts po = plan_opts(B, pols[k]);
        uint64_t mb = cpu_min_budget(net, &po, DEV);
        vd_plan_opts no = plan_opts(B, VD_POLICY_NONE);
        uint64_t peak = cpu_min_budget(net, &no, DEV);
        uint64_t xb = (uint64_t)B * (uint64_t)vd_net_out_numel(net, -1) * 4u;
        uint64_t budgets[] = {0, mb, mb + xb / 2, mb + xb, peak, peak + xb, peak + 2 * xb};
        for (size_t bi = 0; bi < VD_ARRAY_LEN(budgets); bi++) {
            po.budget = budgets[bi];
            vd_plan with, without;
            ck_assert_msg(vd_plan_build(net, &prof, &po, &with, &e) == 0, "%s", e.msg);
            vd_plan_opts po2 = po;
            po2.no_stage_input = true;
            ck_assert_msg(vd_plan_build(net, &prof, &po2, &without, &e) == 0, "%s", e.msg);
            check_staging(&with);
            check_staging(&without);
            ck_assert_int_eq(without.stage, VD_STAGE_OFF);
            ck_assert_int_eq(without.t_stage, -1);
            /* budget 0: the region must fit below the plan's own need */
            uint64_t limit = budgets[bi] ? budgets[bi] : with.budget;
            ck_assert_uint_eq(with.budget, budgets[bi] ? budgets[bi] : with.hwm);
            /* staged exactly when a hole exists for it (and then it pays) */
            bool hole = stage_hole_exists(&with, limit);
            ck_assert_msg((with.stage != VD_STAGE_NO_ROOM) == hole, "%s budget %llu: stage %s, hole %d",
                          vd_policy_name(pols[k]), (unsigned long long)budgets[bi],
                          vd_stage_name(with.stage), hole);
            ck_assert(with.stage != VD_STAGE_NA && with.stage != VD_STAGE_OFF);
            if (with.stage == VD_STAGE_ON) {
                ck_assert(with.sim.iter_s <= without.sim.iter_s);
                ck_assert_uint_eq(with.input_bytes, without.input_bytes);
            }
            *n_on += with.stage == VD_STAGE_ON;
            *n_room += with.stage == VD_STAGE_NO_ROOM;
            ck_assert_uint_le(with.hwm, limit);
            /* a generous budget always has room */
            if (budgets[bi] >= peak + xb) ck_assert_int_ne(with.stage, VD_STAGE_NO_ROOM);
            vd_plan_free(&with);
            vd_plan_free(&without);
        }
    }
    vd_profile_free(&prof);
    be->destroy(be);
}

START_TEST(test_stage_when_it_fits) {
    vd_net net;
    int n_on = 0, n_room = 0;
    tn_lenet(&net, 8);
    fits_case(&net, 8, &n_on, &n_room);
    vd_net_free(&net);
    int on_lenet = n_on;
    pool_net(&net, 8);
    fits_case(&net, 8, &n_on, &n_room);
    printf("staging: %d plans with it, %d without room\n", n_on, n_room);
    ck_assert_int_gt(on_lenet, 0);
    ck_assert_int_gt(n_on, on_lenet);
    ck_assert_int_gt(n_room, 0);
    /* its own need (budget 0): x and its pooled copy fill it at step 0 */
    vd_profile prof;
    vd_backend *be = cpu_for_dev(&net, 8, DEV, &prof);
    vd_plan_opts po = plan_opts(8, VD_POLICY_NONE);
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(p.stage, VD_STAGE_NO_ROOM);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    be->destroy(be);
    vd_net_free(&net);
}
END_TEST

/* ---- the simulator: hand computation ------------------------------------- */

/* LeNet at batch 8 with every op 1 ms (the SGD step too), x's H2D copy
 * 2.5 ms, the device-to-device copy 0.1 ms, no launch overhead, the loss
 * readback 4 bytes at 1 TB/s. Policy none, plenty of budget.
 *   without staging: x loads at step 0 (2.5 ms stall), the labels at the
 *     loss's forward step (their copy a stall), 2L+1 ops, the readback;
 *   with staging: the D2D copy instead of the 2.5 ms, and the next batch's
 *     copy at step 2L-2 (the latest whose 2.5 ms end before the iteration:
 *     2L-1 would end 0.5 ms minus the readback after it). */
START_TEST(test_stage_sim_hand) {
    vd_net net;
    tn_lenet(&net, 8);
    int L = net.n_layers, B = 8;
    vd_profile prof;
    analytic_profile(&net, B, &vd_device_h200, &prof);
    double xb = (double)B * 28 * 28 * 4, lb = (double)B * 4;
    prof.dev.launch_s = 0;
    prof.dev.h2d_bw = xb / 2.5e-3;
    prof.dev.d2h_bw = 1e12;
    prof.dev.both_bw = 2e12;
    prof.dev.mem_bw = 2.0 * xb / 1e-4;
    for (int i = 0; i < L; i++)
        for (int a = 0; a < prof.layers[i].n_algos; a++)
            prof.layers[i].algos[a].fwd_s = prof.layers[i].algos[a].bwd_s = 1e-3;
    prof.sgd_s = 1e-3;
    double ops = (2 * L + 1) * 1e-3, lab = lb / prof.dev.h2d_bw, rb = 4.0 / prof.dev.d2h_bw;
    vd_err e = {0};
    vd_plan_opts po = plan_opts(B, VD_POLICY_NONE);
    po.budget = (uint64_t)64 << 20;
    po.no_stage_input = true;
    po.grads_persistent = true;   /* the SGD step's 1 ms its own, as counted above */
    vd_plan p0, p1;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &p0, &e) == 0, "%s", e.msg);
    po.no_stage_input = false;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &p1, &e) == 0, "%s", e.msg);
    check_staging(&p1);
    double tol = 1e-12;
    double want0 = 2.5e-3 + lab + ops + rb;
    printf("staging, hand computation: without %.6f ms (want %.6f), with %.6f ms (want %.6f), "
           "copy at step %d\n", p0.sim.iter_s * 1e3, want0 * 1e3, p1.sim.iter_s * 1e3,
           (1e-4 + lab + ops + rb) * 1e3, p1.stage_step);
    ck_assert_int_eq(p0.t_stage, -1);
    ck_assert_msg(fabs(p0.sim.iter_s - want0) < tol, "without: %.12g vs %.12g", p0.sim.iter_s, want0);
    ck_assert(fabs(p0.sim.stall_s - (2.5e-3 + lab)) < tol);
    ck_assert(fabs(p0.steps[0].stall_s - 2.5e-3) < tol);
    ck_assert(fabs(p0.sim.busy_s[2] - (2.5e-3 + lab)) < tol);
    ck_assert(p0.sim.stage_load_s == 0);

    ck_assert_int_eq(p1.stage, VD_STAGE_ON);
    ck_assert_int_eq(p1.stage_step, 2 * L - 2);
    double want1 = 1e-4 + lab + ops + rb;
    ck_assert_msg(fabs(p1.sim.iter_s - want1) < tol, "with: %.12g vs %.12g", p1.sim.iter_s, want1);
    ck_assert(fabs(p1.sim.stage_load_s - 1e-4) < tol);
    ck_assert(p1.steps[0].stall_s == 0);                       /* no load stall at step 0 */
    ck_assert(fabs(p1.steps[0].t_start - 1e-4) < tol);         /* the op starts after the D2D */
    ck_assert(fabs(p1.sim.stall_s - lab) < tol);               /* only the labels */
    ck_assert(fabs(p1.sim.compute_s - (ops + 1e-4)) < tol);
    /* the staging copy: issued at step 2L-2, 2.5 ms on the H2D stream */
    const vd_interval *b = &p1.intervals[p1.tensors[p1.t_stage].iv[1]];
    double t_issue = 1e-4 + lab + (2 * L - 2) * 1e-3;
    ck_assert(fabs(p1.steps[2 * L - 2].t_start - t_issue) < tol);
    ck_assert(fabs(b->t_h2d_start - t_issue) < tol);
    ck_assert(fabs(b->t_h2d_end - (t_issue + 2.5e-3)) < tol);
    ck_assert(fabs(p1.sim.busy_s[2] - (2.5e-3 + lab)) < tol);  /* the H2D stream: staging + labels */
    ck_assert_uint_eq(p1.input_bytes, p0.input_bytes);          /* x once per iteration */
    /* auto (which keeps everything here) returns the same staging: its
     * builds stage quickly, and it rebuilds its plan with the step searched
     * (search_restage) */
    vd_plan pa;
    po.policy = VD_POLICY_AUTO;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &pa, &e) == 0, "%s", e.msg);
    ck_assert(!pa.stage_quick);
    ck_assert_int_eq(pa.stage_step, 2 * L - 2);
    ck_assert(fabs(pa.sim.iter_s - want1) < tol);
    vd_plan_free(&pa);
    po.policy = VD_POLICY_NONE;

    /* a slower link: the copy cannot hide behind the last steps; the latest
     * issue step that ends in time is earlier, still in the backward pass */
    vd_plan_free(&p1);
    prof.dev.h2d_bw = xb / 4.5e-3;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &p1, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(p1.stage_step, 2 * L - 4);
    lab = lb / prof.dev.h2d_bw;
    ck_assert(fabs(p1.sim.iter_s - (1e-4 + lab + ops + rb)) < tol);
    /* a very slow one: the copy overruns whatever the step; the iteration
     * ends when it lands (the next step 0 waits for it), still faster than
     * a stall of the whole copy at step 0 */
    vd_plan_free(&p1);
    vd_plan_free(&p0);
    prof.dev.h2d_bw = xb / 40e-3;
    lab = lb / prof.dev.h2d_bw;
    po.no_stage_input = true;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &p0, &e) == 0, "%s", e.msg);
    po.no_stage_input = false;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &p1, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(p1.stage_step, L);                      /* as early as allowed */
    double issue = 1e-4 + lab + L * 1e-3;
    ck_assert(fabs(p1.sim.iter_s - (issue + 40e-3)) < 1e-9);
    ck_assert(p1.sim.iter_s < p0.sim.iter_s);
    vd_plan_free(&p1);
    vd_plan_free(&p0);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("stage", 0, test_stage_identity_lenet, test_stage_identity_resnet, test_stage_identity_bf16,
         test_stage_protocol_optional, test_stage_when_it_fits, test_stage_sim_hand)
