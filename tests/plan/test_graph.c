/* test_graph.c — captured iterations (vd_exec_opts.graph): a training step
 * captured once and replayed (backend.h's capture_begin .. graph_launch) is
 * the eager step bit for bit.
 *
 * The CPU backend emulates a capture faithfully: every call is recorded
 * with its arguments copied, as CUDA bakes a graph's kernel parameters, and
 * a launch replays the records. So a value that changes from step to step
 * and reached a recorded call as an argument (a learning rate of a cosine
 * schedule, AdamW's step number, dropout's iteration, a copy's source
 * buffer when the input pairs swap, the samples of a synthetic batch made
 * by the backend) would be replayed with the value of the captured step,
 * and the replayed training would leave the eager one: graph_bakes_nothing
 * compares them over 20 steps (LeNet with dropout, a cosine lr, the input
 * staged, host batches and synthetic ones made by the backend; SGD with
 * momentum under a plan that offloads every map, AdamW under one that
 * recomputes). replay_reads_step_scalars and replay_reads_synth_slots are
 * the negative checks at the backend: an update captured at one lr and
 * launched at another gives the eager update at the launch's lr, which
 * differs from the one at the captured lr (what a baked lr would give); a
 * synthetic batch captured with some samples and launched after synth_set
 * wrote others is the eager batch of the others. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "plan_common.h"
#include "vdt.h"
#include "vdt_net.h"
#include "data/data.h"
#include "train/train.h"

enum { ITERS = 20, BATCH = 4 };

typedef struct g_out {
    float *params, *state;
    float loss[ITERS];
    vd_exec_stats st;
    int n_recompute_ops, n_offloaded;
    bool stages;
} g_out;

/* The learning rate of step it: a cosine from lr down (every step another). */
static float cosine_lr(float lr, int it) {
    return (float)(lr * 0.5 * (1.0 + cos(M_PI * it / ITERS)));
}

/* Batch it into the executor's current pair (next: its look-ahead pair):
 * host floats (fill_batch), or with synth a synthetic batch for the backend
 * to make, samples BATCH it .. BATCH it + BATCH - 1 of the training split,
 * labelled as the synthetic data set labels them. */
static void put_batch(vd_exec *ex, const vd_net *net, int it, bool next, bool synth) {
    int32_t *lab = next ? vd_exec_next_labels(ex) : vd_exec_input_labels(ex);
    if (!synth) {
        fill_batch(net, BATCH, it, next ? vd_exec_next_x(ex) : vd_exec_input_x(ex), lab);
        return;
    }
    vd_synth_batch *b = next ? vd_exec_next_synth(ex) : vd_exec_input_synth(ex);
    ck_assert_ptr_nonnull(b);
    vdt_synth_batch(b, lab, net, 5, VD_SPLIT_TRAIN, BATCH, (int64_t)it * BATCH);
}

/* ITERS steps of net under a plan of policy pol for device model dev, the
 * next batch staged each step (as vdnn-train's loader does), an evaluation
 * after step 9; graph: vd_exec_opts.graph; synth: the batches made by the
 * backend (put_batch). */
static void run_graph(const vd_net *net, vd_policy pol, const vd_device_params *dev,
                      vd_graph_mode graph, bool synth, g_out *o) {
    memset(o, 0, sizeof *o);
    vd_err e = {0};
    vd_profile prof;
    vd_backend *be = cpu_for_dev(net, BATCH, dev, &prof);
    vd_plan_opts po = plan_opts(BATCH, pol);
    po.fixed_algo = 1;
    uint64_t xb = (uint64_t)BATCH * (uint64_t)vd_net_out_numel(net, -1) * 4u;
    po.budget = cpu_min_budget(net, &po, dev) + xb + 4096;   /* room to stage the input */
    vd_plan plan;
    ck_assert_msg(vd_plan_build(net, &prof, &po, &plan, &e) == 0, "%s", e.msg);
    o->n_recompute_ops = plan.n_recompute_ops;
    for (int t = 0; t < plan.n_tensors; t++) o->n_offloaded += plan.tensors[t].offload;
    vd_exec_opts eo = {.layers_ready = true, .deterministic = true, .math = net->train.math,
                       .graph = graph};
    vd_exec *ex = NULL;
    ck_assert_msg(vd_exec_create(&ex, net, &plan, be, &eo, &e) == 0, "%s", e.msg);
    o->stages = vd_exec_stages(ex);
    size_t ns = (size_t)vd_net_state_floats(net);
    o->params = malloc((size_t)net->param_floats * sizeof(float));
    o->state = malloc(ns * sizeof(float));
    ck_assert(o->params && o->state);
    vd_net_init_params(net, o->params, 42);
    ck_assert_msg(vd_exec_set_state(ex, o->params, NULL, 0, &e) == 0, "%s", e.msg);
    bool have = false;
    for (int it = 0; it < ITERS; it++) {
        if (!have) put_batch(ex, net, it, false, synth);
        bool next = o->stages && it + 1 < ITERS;
        if (next) {
            put_batch(ex, net, it + 1, true, synth);
            vd_exec_next_ready(ex);
        }
        ck_assert_msg(vd_exec_train_step(ex, cosine_lr(net->train.lr, it), it, &o->loss[it],
                                         &e) == 0, "%s", e.msg);
        have = next;
        if (it == 9) {   /* eager, on its own plan; drops the staged batch */
            put_batch(ex, net, 999, false, synth);
            vd_eval_counts ec;
            ck_assert_msg(vd_exec_eval_step(ex, &ec, &e) == 0, "%s", e.msg);
            if (have) put_batch(ex, net, it + 1, false, synth);
        }
    }
    ck_assert_msg(vd_exec_get_state(ex, o->params, o->state, NULL, &e) == 0, "%s", e.msg);
    vd_exec_get_stats(ex, &o->st);
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_profile_free(&prof);
    be->destroy(be);
}

START_TEST(graph_bakes_nothing) {
    vd_net net;
    tn_lenet(&net, BATCH);   /* dropout 0.25: its masks follow the iteration */
    net.train.lr = 0.05f;
    net.train.weight_decay = 1e-3f;
    net.train.beta1 = 0.9f;
    net.train.beta2 = 0.999f;
    net.train.eps = 1e-8f;
    /* SGD with every map offloaded; AdamW where a slow link makes the plan
     * recompute (each pair once: the suite's time) */
    struct { vd_policy pol; const vd_device_params *dev; } plans[] = {
        {VD_POLICY_ALL, &vd_device_h200},
        {VD_POLICY_AUTO, &slow_link},
    };
    bool recomputed = false, offloaded = false;
    for (int opt = 0; opt < 2; opt++) {
        net.train.optimizer = opt ? VD_OPT_ADAMW : VD_OPT_SGD;
        net.train.momentum = opt ? 0.0f : 0.9f;
        size_t ns = (size_t)vd_net_state_floats(&net);
        size_t k = (size_t)opt;   /* the optimizer's plan */
        float host_loss[ITERS];
        int64_t host_launches = 0;
        for (int synth = 0; synth < 2; synth++) {
            g_out a, b;
            run_graph(&net, plans[k].pol, plans[k].dev, VD_GRAPH_OFF, synth, &a);
            run_graph(&net, plans[k].pol, plans[k].dev, VD_GRAPH_ON, synth, &b);
            const char *what = vd_optimizer_name(net.train.optimizer),
                       *data = synth ? "synthetic" : "host";
            ck_assert_msg(b.stages, "%s plan %zu: no input staging", what, k);
            recomputed |= b.n_recompute_ops > 0;
            offloaded |= b.n_offloaded > 0;
            /* captured and replayed: steps 3 to 8 and 13 to 18 (the two
             * input pairs' keys, each seen once eagerly, then captured;
             * the evaluation and the last step, which stages nothing, change
             * the keys); synthetic batches alike (their samples are no part
             * of the key) */
            ck_assert_int_eq(a.st.graph_launches, 0);
            ck_assert_msg(b.st.graph_launches >= ITERS / 2, "%s plan %zu, %s batches: %lld graph "
                          "launches", what, k, data, (long long)b.st.graph_launches);
            if (synth) ck_assert_int_eq(b.st.graph_launches, host_launches);
            host_launches = b.st.graph_launches;
            /* one capture per input pair's key (the launches count them too) */
            ck_assert_int_eq(a.st.graph_captures, 0);
            ck_assert_msg(b.st.graph_captures == 2, "%s plan %zu, %s batches: %lld captures",
                          what, k, data, (long long)b.st.graph_captures);
            for (int i = 0; i < ITERS; i++)
                ck_assert_msg(memcmp(&a.loss[i], &b.loss[i], 4) == 0, "%s plan %zu, %s batches: "
                              "loss %d: %.9g eager, %.9g replayed", what, k, data, i,
                              (double)a.loss[i], (double)b.loss[i]);
            /* the synthetic batches were the ones trained on */
            if (synth) ck_assert(memcmp(a.loss, host_loss, sizeof host_loss) != 0);
            memcpy(host_loss, a.loss, sizeof host_loss);
            ck_assert_msg(!memcmp(a.params, b.params, (size_t)net.param_floats * 4),
                          "%s plan %zu, %s batches: parameters differ", what, k, data);
            ck_assert_msg(!memcmp(a.state, b.state, ns * 4), "%s plan %zu, %s batches: "
                          "optimizer state differs", what, k, data);
            ck_assert_int_eq(a.st.sgd_steps, ITERS);
            ck_assert_int_eq(b.st.sgd_steps, ITERS);
            ck_assert_uint_eq(a.st.offload_bytes_iter, b.st.offload_bytes_iter);
            ck_assert_int_eq(a.st.recompute_ops_iter, b.st.recompute_ops_iter);
            ck_assert_int_eq(a.st.staged_loads, b.st.staged_loads);
            free(a.params); free(a.state); free(b.params); free(b.state);
        }
    }
    ck_assert_msg(recomputed && offloaded, "the plans neither recompute nor offload");
    vd_net_free(&net);
}
END_TEST

/* --graph auto (VD_GRAPH_AUTO): a plan that offloads runs eagerly (a
 * replayed iteration's copies ran slower than eager ones on the GPU:
 * member.c's graph_eligible), one that offloads nothing captures as
 * VD_GRAPH_ON does: one capture per input pair's key, as above; and on
 * captures the offloading plan. The training itself is the same bits either
 * way (graph_bakes_nothing). */
START_TEST(auto_captures_plans_without_offloads) {
    vd_net net;
    tn_lenet(&net, BATCH);
    g_out o;
    run_graph(&net, VD_POLICY_ALL, &vd_device_h200, VD_GRAPH_AUTO, false, &o);
    ck_assert_msg(o.n_offloaded > 0, "policy all offloads nothing");
    ck_assert_int_eq(o.st.graph_captures, 0);
    ck_assert_int_eq(o.st.graph_launches, 0);
    free(o.params); free(o.state);
    run_graph(&net, VD_POLICY_ALL, &vd_device_h200, VD_GRAPH_ON, false, &o);
    ck_assert_int_eq(o.st.graph_captures, 2);
    free(o.params); free(o.state);
    run_graph(&net, VD_POLICY_NONE, &vd_device_h200, VD_GRAPH_AUTO, false, &o);
    ck_assert_int_eq(o.n_offloaded, 0);
    ck_assert_int_eq(o.st.graph_captures, 2);
    ck_assert_msg(o.st.graph_launches >= ITERS / 2, "%lld graph launches", (long long)o.st.graph_launches);
    free(o.params); free(o.state);
    vd_net_free(&net);
}
END_TEST

/* The backend half of the negative check: SGD with momentum on 64 floats,
 * update captured at lr 0.1 (t 2), launched at lr 0.05 (t 2): the eager
 * update at 0.05 bit for bit, and not the one at 0.1. */
START_TEST(replay_reads_step_scalars) {
    vd_backend *be;
    vd_err e = {0};
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    enum { N = 64 };
    float g[N], p0[N], m0[N], p[3][N], m[3][N];
    vd_rng r;
    vd_rng_seed(&r, 7, 0);
    for (int i = 0; i < N; i++) {
        g[i] = vd_rng_normal(&r);
        p0[i] = vd_rng_normal(&r);
        m0[i] = vd_rng_normal(&r);
    }
    vd_optim_step o = {.kind = VD_OPT_SGD, .momentum = 0.9f, .weight_decay = 1e-3f, .t = 2};
    void *table = NULL;
    ck_assert_int_eq(be->ranges_create(be, &(vd_update_range){0, N, 1.0f}, 1, &table, &e), 0);
    /* [0]: eager at 0.05; [1]: eager at 0.1; [2]: captured at 0.1, launched at 0.05 */
    const float lr[3] = {0.05f, 0.1f, 0.1f};
    for (int k = 0; k < 3; k++) {
        memcpy(p[k], p0, sizeof p0);
        memcpy(m[k], m0, sizeof m0);
        o.lr = lr[k];
        vd_step_scalars ss = vd_step_scalars_of(&o, 0);
        if (k == 2) ck_assert_int_eq(be->capture_begin(be, &e), 0);
        ck_assert_int_eq(be->step_set(be, &ss, &e), 0);
        ck_assert_int_eq(be->update(be, &o, p[k], g, m[k], NULL, table, &e), 0);
        if (k < 2) continue;
        ck_assert_mem_eq(p[k], p0, sizeof p0);   /* captured: nothing ran */
        ck_assert_int_eq(be->synchronize(be, &e), VD_EINTERNAL);   /* no host wait in a capture */
        void *graph = NULL;
        ck_assert_int_eq(be->capture_end(be, &graph, &e), 0);
        o.lr = lr[0];
        ss = vd_step_scalars_of(&o, 0);
        ck_assert_int_eq(be->graph_launch(be, graph, &ss, &e), 0);
        be->graph_destroy(be, graph);
    }
    ck_assert_mem_eq(p[2], p[0], sizeof p0);
    ck_assert_mem_eq(m[2], m[0], sizeof m0);
    ck_assert(memcmp(p[2], p[1], sizeof p0) != 0);   /* a baked lr: detected */
    be->ranges_free(be, table);
    be->destroy(be);
}
END_TEST

/* The backend half of the synthetic batches' negative check: a batch of
 * samples A captured through slot 0 and launched after synth_set wrote
 * samples B there is the eager batch of B, not the one of A (what baked
 * indices would give); the slot rules of backend.h's fill_synthetic fail. */
START_TEST(replay_reads_synth_slots) {
    vd_backend *be;
    vd_err e = {0};
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    enum { N = 3, M = 2 * 4 * 4 };
    int64_t ia[N] = {5, 17, 2}, ib[N] = {40, 1, 9}, ic[N + 1] = {0, 1, 2, 3};
    vd_synth_batch a = {.seed = 3, .split = VD_SPLIT_TRAIN, .classes = 10, .sample_numel = M,
                        .channels = 2, .n = N, .index = ia};
    vd_synth_batch b = a, c = a;
    b.index = ib;
    c.n = N + 1;
    c.index = ic;
    /* [0]: eager, samples B; [1]: eager, samples A (through slot 1); [2]: captured with A,
     * launched after synth_set B */
    float x[3][N * M];
    ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_H2D, 0, x[0], VD_DT_F32, &b, &e), 0);
    ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_H2D, 1, x[1], VD_DT_F32, &a, &e), 0);
    ck_assert_int_eq(be->synchronize(be, &e), 0);
    ck_assert(memcmp(x[0], x[1], sizeof x[0]) != 0);
    memset(x[2], 0, sizeof x[2]);
    ck_assert_int_eq(be->capture_begin(be, &e), 0);
    ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_H2D, 0, x[2], VD_DT_F32, &a, &e), 0);
    /* one batch a slot in a capture; no slot grows after one; no synth_set inside one */
    ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_H2D, 0, x[2], VD_DT_F32, &b, &e),
                     VD_EINTERNAL);
    ck_assert_int_eq(be->fill_synthetic(be, VD_STREAM_H2D, 1, x[2], VD_DT_F32, &c, &e),
                     VD_EINTERNAL);
    ck_assert_int_eq(be->synth_set(be, 0, &b, &e), VD_EINTERNAL);
    void *graph = NULL;
    ck_assert_int_eq(be->capture_end(be, &graph, &e), 0);
    float zero[N * M] = {0};
    ck_assert_mem_eq(x[2], zero, sizeof zero);   /* captured: nothing ran */
    ck_assert_int_eq(be->synth_set(be, 0, &b, &e), 0);
    vd_step_scalars ss = {0};
    ck_assert_int_eq(be->graph_launch(be, graph, &ss, &e), 0);
    ck_assert_int_eq(be->synchronize(be, &e), 0);
    ck_assert_mem_eq(x[2], x[0], sizeof x[0]);
    ck_assert_int_eq(be->synth_set(be, 1, &c, &e), VD_EINTERNAL);
    be->graph_destroy(be, graph);
    be->destroy(be);
}
END_TEST

/* vd_train_run's mean iteration time (vd_train_result.mean_iter_s)
 * averages the replays: it leaves out the first iteration and each one that
 * captured its graph (capture and instantiation are not an iteration's
 * cost), which the executor counts (vd_exec_stats.graph_captures). */
START_TEST(train_run_times_replays) {
    enum { RUN = 8 };
    vd_net net;
    tn_lenet(&net, BATCH);
    vd_err e = {0};
    vd_profile prof;
    vd_backend *be = cpu_for_dev(&net, BATCH, &vd_device_h200, &prof);
    vd_plan_opts po = plan_opts(BATCH, VD_POLICY_NONE);
    po.fixed_algo = 1;
    vd_plan plan;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &plan, &e) == 0, "%s", e.msg);
    vd_exec_opts eo = {.layers_ready = true, .deterministic = true, .math = net.train.math,
                       .graph = true};
    vd_exec *ex = NULL;
    ck_assert_msg(vd_exec_create(&ex, &net, &plan, be, &eo, &e) == 0, "%s", e.msg);
    float *params = malloc((size_t)net.param_floats * sizeof(float));
    ck_assert(params != NULL);
    vd_net_init_params(&net, params, 42);
    ck_assert_msg(vd_exec_set_state(ex, params, NULL, 0, &e) == 0, "%s", e.msg);
    /* synthetic batches, made by the backend */
    vd_dataset *ds;
    ck_assert_msg(vd_data_open("synthetic:64,8", &net, BATCH, 1, false, &ds, &e) == 0, "%s",
                  e.msg);
    vd_train_opts to = { .iters = RUN, .log_every = 1000 };
    vd_train_result res;
    ck_assert_msg(vd_train_run(&net, ex, ds, &to, &res, &e) == 0, "%s", e.msg);
    vd_exec_stats st;
    vd_exec_get_stats(ex, &st);
    ck_assert_msg(st.graph_captures > 0 && st.graph_launches > st.graph_captures,
                  "%lld captures, %lld launches", (long long)st.graph_captures,
                  (long long)st.graph_launches);
    ck_assert(res.synth_device);
    ck_assert_int_eq(res.mean_iters, RUN - 1 - st.graph_captures);
    vd_data_close(&ds);
    free(params);
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_profile_free(&prof);
    be->destroy(be);
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("graph", 0, graph_bakes_nothing, auto_captures_plans_without_offloads,
         replay_reads_step_scalars, replay_reads_synth_slots, train_run_times_replays)
