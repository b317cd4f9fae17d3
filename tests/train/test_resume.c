/* test_resume.c — the training loop on the CPU backend: N iterations + save +
 * resume + M iterations is byte-identical to N+M iterations (SGD, Nesterov
 * SGD, AdamW); offload policies do not change the result; divergence is
 * VD_ENUMERIC. */
#include <math.h>
#include <sys/stat.h>
#include "tutil.h"
#include "backend/backend.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "data/data.h"
#include "train/train.h"
#include "train/ckpt.h"

/* conv -> bn -> relu -> pool -> flatten -> fc -> dropout -> fc -> loss on
 * 3x8x8 synthetic images: BN buffers, momentum and dropout masks all take
 * part in the state that a resume must restore. */
static void build_net(vd_net *net, int batch) {
    vd_net_init(net);
    snprintf(net->name, sizeof net->name, "resnetish");
    net->in_c = 3; net->in_h = 8; net->in_w = 8; net->classes = 5;
    net->train.batch = batch;
    net->train.lr = 0.05f;
    net->train.momentum = 0.9f;
    net->train.weight_decay = 5e-4f;
    net->train.seed = 11;
    net->train.lr_policy.type = VD_LR_COSINE;
    net->train.lr_policy.min_lr = 0.001f;
    net->train.lr_policy.warmup = 2;
    int i = tu_add(net, "features.0", VD_OP_CONV, -1);
    net->layers[i].u.conv.out = 6;
    net->layers[i].u.conv.kh = net->layers[i].u.conv.kw = 3;
    net->layers[i].u.conv.sh = net->layers[i].u.conv.sw = 1;
    net->layers[i].u.conv.ph = net->layers[i].u.conv.pw = 1;
    net->layers[i].u.conv.groups = 1;
    i = tu_add(net, "features.1", VD_OP_BATCHNORM, i);
    i = tu_add(net, "features.2", VD_OP_RELU, i);
    i = tu_add(net, "features.3", VD_OP_POOL, i);
    net->layers[i].u.pool.mode = VD_POOL_MAX;
    net->layers[i].u.pool.kh = net->layers[i].u.pool.kw = 2;
    i = tu_add(net, "flatten", VD_OP_FLATTEN, i);
    i = tu_add(net, "classifier.0", VD_OP_FC, i);
    net->layers[i].u.fc.out = 16;
    net->layers[i].u.fc.bias = true;
    i = tu_add(net, "classifier.1", VD_OP_DROPOUT, i);
    net->layers[i].u.dropout.p = 0.25f;
    i = tu_add(net, "classifier.2", VD_OP_FC, i);
    net->layers[i].u.fc.out = 5;
    net->layers[i].u.fc.bias = true;
    tu_add(net, "loss", VD_OP_SOFTMAX_XENT, i);
    vd_err e;
    ck_assert_msg(vd_net_finalize(net, &e) == 0, "%s", e.msg);
    vd_schedule_inplace(net);
}

typedef struct session {
    vd_backend *be;
    vd_profile prof;
    vd_plan plan;
    vd_exec *ex;
    vd_dataset *ds;
} session;

/* The plan's setup (staging_is_byte_identical changes them): the timing
 * model of the profile (NULL: cpu), the budget, input staging off. */
static const vd_device_params *g_dev;
static uint64_t g_budget;
static bool g_no_stage;
/* synthetic_on_device_is_byte_identical: the loader makes synthetic batches
 * on the host (vd_exec_opts.synth_host), and the math */
static bool g_synth_host;
static vd_math g_math = VD_MATH_FP32;
/* the data (evaluation_scores_every_image changes it) */
static const char *g_data = "synthetic:200,40";

static void open_session(session *s, vd_net *net, vd_policy policy) {
    memset(s, 0, sizeof *s);
    vd_err e;
    ck_assert_msg(vd_backend_cpu_create(&s->be, &e) == 0, "%s", e.msg);
    ck_assert_msg(s->be->layer_setup(s->be, net, net->train.batch, g_math, true, &e) == 0,
                  "%s", e.msg);
    ck_assert_msg(vd_profile_backend(net, net->train.batch, s->be, g_dev ? g_dev : &vd_device_cpu,
                                     &s->prof, &e) == 0, "%s", e.msg);
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.batch = net->train.batch;
    po.policy = policy;
    po.budget = g_budget;
    po.no_stage_input = g_no_stage;
    ck_assert_msg(vd_plan_build(net, &s->prof, &po, &s->plan, &e) == 0, "%s", e.msg);
    vd_exec_opts eo = { .poison = true, .deterministic = true, .layers_ready = true,
                        .math = g_math, .synth_host = g_synth_host };
    ck_assert_msg(vd_exec_create(&s->ex, net, &s->plan, s->be, &eo, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_data_open(g_data, net, net->train.batch, net->train.seed, false, &s->ds,
                               &e) == 0, "%s", e.msg);
}

static void close_session(session *s) {
    vd_exec_destroy(&s->ex);
    vd_plan_free(&s->plan);
    vd_profile_free(&s->prof);
    s->be->destroy(s->be);
    vd_data_close(&s->ds);
}

static int train_to(vd_net *net, vd_policy policy, int64_t iters, int64_t stop_at,
                    const char *save, const char *resume, vd_train_result *res, vd_err *e) {
    session s;
    open_session(&s, net, policy);
    vd_train_opts o = { .iters = iters, .stop_at = stop_at, .save_path = save,
                        .resume_path = resume, .log_every = 1000, .eval_at_end = true };
    int rc = vd_train_run(net, s.ex, s.ds, &o, res, e);
    close_session(&s);
    return rc;
}

static int train(vd_net *net, vd_policy policy, int64_t iters, const char *save,
                 const char *resume, vd_train_result *res, vd_err *e) {
    return train_to(net, policy, iters, 0, save, resume, res, e);
}

/* 60 iterations in one run (saved to full) against 37 (saved to half) and
 * a resume from half to 60 (saved to resumed): the resumed run starts at 37
 * and its model and state files are the one run's, byte for byte, its last
 * loss too. r1, r2, r3: the three runs' results. */
static void split_at_37_is_byte_identical(vd_net *net, const char *full, const char *half,
                                          const char *resumed, vd_train_result *r1,
                                          vd_train_result *r2, vd_train_result *r3) {
    vd_err e;
    char fs[700], rs[700];
    ck_assert_msg(train(net, VD_POLICY_NONE, 60, full, NULL, r1, &e) == 0, "%s", e.msg);
    ck_assert_msg(train_to(net, VD_POLICY_NONE, 60, 37, half, NULL, r2, &e) == 0, "%s", e.msg);
    ck_assert_msg(train(net, VD_POLICY_NONE, 60, resumed, half, r3, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r3->first_iter, 37);
    vdt_assert_same_file(full, resumed);
    tu_state_path(full, fs, sizeof fs);
    tu_state_path(resumed, rs, sizeof rs);
    vdt_assert_same_file(fs, rs);
    ck_assert_msg(memcmp(&r1->last_loss, &r3->last_loss, sizeof(float)) == 0, "loss %g vs %g",
                  (double)r1->last_loss, (double)r3->last_loss);
}

START_TEST(resume_is_byte_identical) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char full[600], half[600], resumed[600], fs[700], rs[700];
    snprintf(full, sizeof full, "%s/full.safetensors", d);
    snprintf(half, sizeof half, "%s/half.safetensors", d);
    snprintf(resumed, sizeof resumed, "%s/resumed.safetensors", d);
    vd_net net;
    build_net(&net, 8);   /* 200 samples / 8 = 25 iterations per epoch */
    vd_err e;
    vd_train_result r1, r2, r3;
    /* 37 + 23 = 60 iterations: the split falls inside epoch 2. The cosine
     * schedule spans 60 iterations in both runs (stop_at) */
    split_at_37_is_byte_identical(&net, full, half, resumed, &r1, &r2, &r3);
    ck_assert_int_eq(r2.iters_done, 37);
    ck_assert_int_eq(r3.iters_done, 60);
    tu_state_path(full, fs, sizeof fs);
    tu_state_path(resumed, rs, sizeof rs);
    ck_assert_int_eq(r1.eval_n, 40);
    ck_assert(r1.eval_acc == r3.eval_acc);
    /* the timing covers exactly the iterations each run trained; the wall
     * clock holds the data waits and the steps (both measured inside it) */
    ck_assert_int_eq(r1.timing.iters, 60);
    ck_assert_int_eq(r3.timing.iters, 23);
    ck_assert_int_eq(r3.timing.images, 23 * 8);
    ck_assert(r3.synth_device && r3.loader_threads == 0);   /* made by the CPU backend */
    const vd_train_timing *tm = &r3.timing;
    ck_assert(tm->wait_s >= 0 && tm->step_s > 0 && tm->wait_s + tm->step_s <= tm->wall_s);
    ck_assert(tm->wall_s <= r3.train_s);
    ck_assert_double_eq_tol(tm->img_per_s, 184.0 / tm->wall_s, 1e-9 * tm->img_per_s);
    ck_assert_double_eq_tol(tm->step_per_iter_s, tm->step_s / 23, 1e-15);
    ck_assert_double_eq_tol(tm->wait_per_iter_s, tm->wait_s / 23, 1e-15);

    /* with a fixed LR the schedule does not depend on the total: --iters 37,
     * then resume with --iters 60 is the same as one run of 60 */
    vd_lr_policy keep = net.train.lr_policy;
    net.train.lr_policy = (vd_lr_policy){ .type = VD_LR_FIXED };
    ck_assert_msg(train(&net, VD_POLICY_NONE, 60, full, NULL, &r1, &e) == 0, "%s", e.msg);
    ck_assert_msg(train(&net, VD_POLICY_NONE, 37, half, NULL, &r2, &e) == 0, "%s", e.msg);
    ck_assert_msg(train(&net, VD_POLICY_NONE, 60, resumed, half, &r3, &e) == 0, "%s", e.msg);
    vdt_assert_same_file(full, resumed);
    vdt_assert_same_file(fs, rs);
    net.train.lr_policy = keep;
    ck_assert_msg(train(&net, VD_POLICY_NONE, 60, full, NULL, &r1, &e) == 0, "%s", e.msg);
    /* the loss went down from ln(5) on this learnable synthetic task */
    ck_assert_msg(r1.last_loss < 1.2f, "loss %g", (double)r1.last_loss);

    /* offloading every activation computes the same bits */
    char all[600];
    snprintf(all, sizeof all, "%s/all.safetensors", d);
    ck_assert_msg(train(&net, VD_POLICY_ALL, 60, all, NULL, &r2, &e) == 0, "%s", e.msg);
    vdt_assert_same_file(full, all);

    /* a different seed gives different weights */
    net.train.seed = 12;
    ck_assert_msg(train(&net, VD_POLICY_NONE, 60, all, NULL, &r2, &e) == 0, "%s", e.msg);
    size_t n1, n2;
    char *a = vdt_slurp(full, &n1), *b = vdt_slurp(all, &n2);
    ck_assert(n1 != n2 || memcmp(a, b, n1) != 0);
    vd_free(a);
    vd_free(b);
    /* resuming with another seed is refused */
    ck_assert_int_eq(train(&net, VD_POLICY_NONE, 60, NULL, half, &r2, &e), VD_EUSAGE);
    ck_assert_msg(strstr(e.msg, "seed"), "%s", e.msg);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* The same for AdamW (its two moments and its step count, which the bias
 * corrections read, in the state file) and for Nesterov SGD: 37 + 23 = 60
 * iterations, byte-identical to 60, under the cosine schedule; the state
 * file names the optimizer and holds exp_avg / exp_avg_sq (v >= 0, not all
 * zero); resuming with another optimizer is refused (VD_EUSAGE), both ways. */
START_TEST(adamw_and_nesterov_resume_are_byte_identical) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char full[600], half[600], resumed[600];
    snprintf(full, sizeof full, "%s/full.safetensors", d);
    snprintf(half, sizeof half, "%s/half.safetensors", d);
    snprintf(resumed, sizeof resumed, "%s/resumed.safetensors", d);
    vd_net net;
    build_net(&net, 8);
    vd_err e;
    vd_train_result r1, r2, r3;
    for (int k = 0; k < 2; k++) {
        if (k == 0) {
            net.train.optimizer = VD_OPT_ADAMW;
            net.train.lr = 0.005f;
            net.train.lr_policy.min_lr = 0.0001f;
            net.train.weight_decay = 0.01f;
            net.train.beta1 = 0.85f;
            net.train.beta2 = 0.995f;
            net.train.eps = 1e-7f;
        } else {
            net.train.optimizer = VD_OPT_SGD;
            net.train.lr = 0.05f;
            net.train.lr_policy.min_lr = 0.001f;
            net.train.weight_decay = 5e-4f;
            net.train.nesterov = true;
        }
        split_at_37_is_byte_identical(&net, full, half, resumed, &r1, &r2, &r3);
        /* it learned (from ln 5) */
        ck_assert_msg(r1.last_loss < 1.2f, "%s: loss %g", vd_optimizer_name(net.train.optimizer),
                      (double)r1.last_loss);
        vd_train_state st;
        ck_assert_msg(vd_ckpt_peek_state(half, &net, &st, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(st.optimizer, net.train.optimizer);
        ck_assert_int_eq(st.sgd_steps, 37);
        if (k == 0) {
            size_t n = (size_t)vd_net_state_floats(&net);
            ck_assert_uint_eq(n, 2 * (size_t)net.param_floats);
            float *p = calloc((size_t)net.param_floats, sizeof(float)), *s2 = calloc(n, sizeof(float));
            ck_assert(p && s2);
            ck_assert_msg(vd_ckpt_load(half, &net, p, s2, &st, &e) == 0, "%s", e.msg);
            int positive = 0, negative = 0;
            for (int64_t i = 0; i < net.param_floats; i++) {
                positive += s2[net.param_floats + i] > 0;
                negative += s2[net.param_floats + i] < 0;
            }
            ck_assert_msg(positive > net.param_floats / 2 && negative == 0,
                          "exp_avg_sq: %d positive, %d negative", positive, negative);
            free(p);
            free(s2);
        }
        /* resuming with the other optimizer */
        net.train.optimizer = k == 0 ? VD_OPT_SGD : VD_OPT_ADAMW;
        ck_assert_int_eq(train(&net, VD_POLICY_NONE, 60, NULL, half, &r3, &e), VD_EUSAGE);
        ck_assert_msg(strstr(e.msg, "trained with optimizer") &&
                      strstr(e.msg, k == 0 ? "optimizer adamw" : "optimizer sgd"), "%s", e.msg);
        net.train.optimizer = k == 0 ? VD_OPT_ADAMW : VD_OPT_SGD;
    }
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

START_TEST(divergence_is_enumeric) {
    vd_net net;
    build_net(&net, 8);
    net.train.lr = 1e30f;
    net.train.lr_policy.type = VD_LR_FIXED;
    net.train.lr_policy.warmup = 0;
    vd_err e;
    vd_train_result r;
    ck_assert_int_eq(train(&net, VD_POLICY_NONE, 50, NULL, NULL, &r, &e), VD_ENUMERIC);
    ck_assert_msg(strstr(e.msg, "iteration") && strstr(e.msg, "lr"), "%s", e.msg);
    ck_assert(r.iters_done < 50);
    vd_net_free(&net);
}
END_TEST

static void write_ppm(const char *path, int w, int h, unsigned char v) {
    char hdr[64];
    int k = snprintf(hdr, sizeof hdr, "P6\n%d %d\n255\n", w, h);
    size_t n = (size_t)k + (size_t)w * h * 3;
    unsigned char *b = malloc(n);
    memcpy(b, hdr, (size_t)k);
    memset(b + k, v, n - (size_t)k);
    tu_write(path, b, n);
    free(b);
}

/* The final checkpoint is written before the final evaluation: an
 * undecodable held-out image fails the run (VD_EDATA naming it) but must not
 * cost it its checkpoint. */
START_TEST(final_save_survives_a_failing_evaluation) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[700], ck[700];
    const char *dirs[] = { "train", "train/c0", "train/c1", "val", "val/c0" };
    for (size_t i = 0; i < VD_ARRAY_LEN(dirs); i++) {
        snprintf(p, sizeof p, "%s/%s", d, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/train/c%d/%d.ppm", d, i % 2, i);
        write_ppm(p, 10, 9, (unsigned char)(40 * i));
    }
    for (int i = 0; i < 8; i++) {         /* one batch of 8 held-out images */
        /* 5: a good header (the data set opens) over pixel data that cannot be decoded */
        snprintf(p, sizeof p, "%s/val/c0/%d.%s", d, i, i == 5 ? "png" : "ppm");
        if (i == 5) tu_write_bad_png(p);
        else write_ppm(p, 8, 8, (unsigned char)(20 * i));
    }
    snprintf(ck, sizeof ck, "%s/ck.safetensors", d);
    vd_net net;
    build_net(&net, 8);
    session s;
    open_session(&s, &net, VD_POLICY_NONE);
    vd_data_close(&s.ds);
    vd_err e;
    snprintf(p, sizeof p, "folder:%s", d);
    ck_assert_msg(vd_data_open(p, &net, 8, net.train.seed, false, &s.ds, &e) == 0, "%s", e.msg);
    vd_train_opts o = { .iters = 3, .save_path = ck, .log_every = 1000, .eval_at_end = true };
    vd_train_result r;
    ck_assert_int_eq(vd_train_run(&net, s.ex, s.ds, &o, &r, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "5.png"), "%s", e.msg);
    ck_assert_int_eq(r.iters_done, 3);
    close_session(&s);
    /* the checkpoint of iteration 3 is there, with its state */
    vd_train_state st;
    ck_assert_msg(vd_ckpt_peek_state(ck, &net, &st, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st.iteration, 3);
    ck_assert_uint_eq(st.samples, 24);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Input staging in the training loop: the next batch is fetched and staged
 * only when the next thing is another training iteration, so saves record
 * the batches trained on, evaluations see the same weights, and a stop,
 * a save + resume, all give the bytes of a run without staging. */
static volatile sig_atomic_t g_stop;
static void stop_after_20(const vd_train_event *ev, void *user) {
    (void)user;
    if (ev->kind == VD_TEV_PROGRESS && ev->iter == 20) g_stop = 1;
}

static int run_opts(vd_net *net, const vd_train_opts *o, vd_train_result *res, vd_stage *stage,
                    int64_t *staged_loads, vd_err *e) {
    session s;
    open_session(&s, net, VD_POLICY_NONE);
    *stage = s.plan.stage;
    int rc = vd_train_run(net, s.ex, s.ds, o, res, e);
    vd_exec_stats st;
    vd_exec_get_stats(s.ex, &st);
    *staged_loads = st.staged_loads;
    close_session(&s);
    return rc;
}

START_TEST(staging_is_byte_identical) {
    char *d = vdt_tmpdir("vdnn-stage-test");
    char ref[600], st[600], half[600], res2[600], a[700], b[700];
    snprintf(ref, sizeof ref, "%s/ref.safetensors", d);
    snprintf(st, sizeof st, "%s/st.safetensors", d);
    snprintf(half, sizeof half, "%s/half.safetensors", d);
    snprintf(res2, sizeof res2, "%s/resumed.safetensors", d);
    vd_net net;
    build_net(&net, 8);
    vd_err e;
    /* the H200's timing model (staging pays there), room for the region */
    g_dev = &vd_device_h200;
    g_budget = (uint64_t)32 << 20;
    vd_train_result r0, r1, r2, r3;
    vd_stage stage;
    int64_t loads;
    vd_train_opts o = { .iters = 60, .save_path = ref, .save_every = 15, .eval_every = 10,
                        .log_every = 1000, .eval_at_end = true };
    g_no_stage = true;
    ck_assert_msg(run_opts(&net, &o, &r0, &stage, &loads, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(stage, VD_STAGE_OFF);
    ck_assert_int_eq(loads, 0);
    g_no_stage = false;
    o.save_path = st;
    ck_assert_msg(run_opts(&net, &o, &r1, &stage, &loads, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(stage, VD_STAGE_ON);
    /* staged: every iteration after one that is not followed by the end, a
     * save (15, 30, 45) or an evaluation (10, 20, ..., 50): 59 - 7 */
    ck_assert_int_eq(loads, 52);
    vdt_assert_same_file(ref, st);
    tu_state_path(ref, a, sizeof a);
    tu_state_path(st, b, sizeof b);
    vdt_assert_same_file(a, b);
    ck_assert(memcmp(&r0.last_loss, &r1.last_loss, 4) == 0);
    ck_assert(r0.eval_acc == r1.eval_acc && r0.eval_loss == r1.eval_loss);

    /* a stop requested after iteration 20: the batch of iteration 21 is
     * already staged, so that one is trained first; the checkpoint records
     * 21 iterations and 21 batches, and resuming gives the same bytes */
    vd_train_opts oh = { .iters = 60, .save_path = half, .log_every = 1, .stop = &g_stop,
                         .cb = stop_after_20 };
    g_stop = 0;
    ck_assert_msg(run_opts(&net, &oh, &r2, &stage, &loads, &e) == 0, "%s", e.msg);
    ck_assert(r2.interrupted);
    ck_assert_int_eq(r2.iters_done, 21);
    ck_assert_int_eq(loads, 20);
    g_stop = 0;
    vd_train_opts orr = { .iters = 60, .save_path = res2, .resume_path = half, .save_every = 15,
                          .eval_every = 10, .log_every = 1000, .eval_at_end = true };
    ck_assert_msg(run_opts(&net, &orr, &r3, &stage, &loads, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r3.first_iter, 21);
    vdt_assert_same_file(ref, res2);
    ck_assert(r3.eval_acc == r0.eval_acc);

    /* stop_at + resume with staging on both sides */
    vd_train_opts os = { .iters = 60, .stop_at = 37, .save_path = half, .log_every = 1000 };
    ck_assert_msg(run_opts(&net, &os, &r2, &stage, &loads, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r2.iters_done, 37);
    ck_assert_int_eq(loads, 36);
    ck_assert_msg(run_opts(&net, &orr, &r3, &stage, &loads, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r3.first_iter, 37);
    vdt_assert_same_file(ref, res2);
    g_dev = NULL;
    g_budget = 0;
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* A checkpoint saved with BF16 weights resumes from exactly those rounded
 * weights with the exact F32 momentum, iteration and data position: the
 * same bytes as resuming an F32 checkpoint that holds the rounded weights.
 * (And not the bytes of resuming the unrounded one: the rounding is real.) */
START_TEST(resume_from_bf16_weights) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char half[600], halfb[600], rounded[600], o1[600], o2[600], o3[600], s1[700], s2[700];
    snprintf(half, sizeof half, "%s/half.safetensors", d);
    snprintf(halfb, sizeof halfb, "%s/half-bf16.safetensors", d);
    snprintf(rounded, sizeof rounded, "%s/rounded.safetensors", d);
    snprintf(o1, sizeof o1, "%s/o1.safetensors", d);
    snprintf(o2, sizeof o2, "%s/o2.safetensors", d);
    snprintf(o3, sizeof o3, "%s/o3.safetensors", d);
    vd_net net;
    build_net(&net, 8);
    vd_err e;
    vd_train_result r;
    ck_assert_msg(train_to(&net, VD_POLICY_NONE, 40, 25, half, NULL, &r, &e) == 0, "%s", e.msg);
    float *p = calloc((size_t)net.param_floats, sizeof(float));
    float *m = calloc((size_t)net.param_floats, sizeof(float));
    vd_train_state st;
    ck_assert_msg(vd_ckpt_load(half, &net, p, m, &st, &e) == 0, "%s", e.msg);
    vd_ckpt_save_opts so = { .dtype = VD_CKPT_BF16 };
    ck_assert_msg(vd_ckpt_save_ex(halfb, &net, p, m, &st, &so, &e) == 0, "%s", e.msg);
    int changed = 0;
    for (int64_t k = 0; k < net.param_floats; k++) {
        float x = vd_bf16_to_f32(vd_f32_to_bf16(p[k]));
        changed += x != p[k];
        p[k] = x;
    }
    ck_assert_int_gt(changed, net.param_floats / 2);   /* trained weights: most are not bf16 */
    ck_assert_msg(vd_ckpt_save(rounded, &net, p, m, &st, &e) == 0, "%s", e.msg);
    ck_assert_msg(train(&net, VD_POLICY_NONE, 40, o1, rounded, &r, &e) == 0, "%s", e.msg);
    ck_assert_msg(train(&net, VD_POLICY_NONE, 40, o2, halfb, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.first_iter, 25);
    ck_assert_int_eq(r.iters_done, 40);
    vdt_assert_same_file(o1, o2);
    tu_state_path(o1, s1, sizeof s1);
    tu_state_path(o2, s2, sizeof s2);
    vdt_assert_same_file(s1, s2);
    ck_assert_msg(train(&net, VD_POLICY_NONE, 40, o3, half, &r, &e) == 0, "%s", e.msg);
    size_t n1, n3;
    char *a = vdt_slurp(o1, &n1), *b = vdt_slurp(o3, &n3);
    ck_assert(n1 == n3 && memcmp(a, b, n1) != 0);
    vd_free(a);
    vd_free(b);
    free(p);
    free(m);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* Synthetic batches made by the backend (fill_synthetic, from the loader's
 * descriptions) train to the bytes of batches made by the loader's threads
 * on the host and copied: with input staging (the look-ahead pair's
 * description swapped in), evaluations and saves between iterations, a
 * stop and resume; without staging under the policy that offloads every
 * activation; and in math bf16 (the batch generated as rounded bf16). */
START_TEST(synthetic_on_device_is_byte_identical) {
    char *d = vdt_tmpdir("vdnn-synth-test");
    char host[600], dev[600], half[600], a[700], b[700];
    snprintf(host, sizeof host, "%s/host.safetensors", d);
    snprintf(dev, sizeof dev, "%s/dev.safetensors", d);
    snprintf(half, sizeof half, "%s/half.safetensors", d);
    vd_net net;
    build_net(&net, 8);
    vd_err e;
    vd_train_result rh, rd;
    vd_stage stage;
    int64_t lh, ld;
    g_dev = &vd_device_h200;               /* staging pays under this model */
    g_budget = (uint64_t)32 << 20;
    vd_train_opts o = { .iters = 30, .save_every = 15, .eval_every = 10, .log_every = 1000,
                        .eval_at_end = true };
    for (int round = 0; round < 2; round++) {
        g_no_stage = round == 1;
        o.save_path = host;
        g_synth_host = true;
        ck_assert_msg(run_opts(&net, &o, &rh, &stage, &lh, &e) == 0, "%s", e.msg);
        ck_assert(!rh.synth_device && rh.loader_threads >= 1);
        o.save_path = dev;
        g_synth_host = false;
        ck_assert_msg(run_opts(&net, &o, &rd, &stage, &ld, &e) == 0, "%s", e.msg);
        ck_assert(rd.synth_device && rd.loader_threads == 0);
        ck_assert_int_eq(stage, (round ? VD_STAGE_OFF : VD_STAGE_ON));
        /* staged: iterations 2..30 less those after an evaluation or a save
         * (10, 15, 20) */
        ck_assert_int_eq(lh, (round ? 0 : 26));
        ck_assert_int_eq(ld, lh);
        vdt_assert_same_file(host, dev);
        tu_state_path(host, a, sizeof a);
        tu_state_path(dev, b, sizeof b);
        vdt_assert_same_file(a, b);
        ck_assert(memcmp(&rh.last_loss, &rd.last_loss, 4) == 0);
        ck_assert_int_eq(rd.eval_n, 40);
        ck_assert(rh.eval_acc == rd.eval_acc && rh.eval_loss == rd.eval_loss);
    }
    /* a stop at 20 and a resume, batches made on the device: the run above */
    vd_train_opts oh = { .iters = 30, .save_path = half, .log_every = 1, .stop = &g_stop,
                         .cb = stop_after_20 };
    g_no_stage = false;
    g_stop = 0;
    ck_assert_msg(run_opts(&net, &oh, &rd, &stage, &ld, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rd.iters_done, 21);
    g_stop = 0;
    vd_train_opts orr = o;
    orr.resume_path = half;
    orr.save_path = dev;
    ck_assert_msg(run_opts(&net, &orr, &rd, &stage, &ld, &e) == 0, "%s", e.msg);
    vdt_assert_same_file(host, dev);
    g_dev = NULL;
    g_budget = 0;
    /* every activation offloaded, no staging: x, when it is loaded again,
     * is generated again */
    g_no_stage = true;
    for (int k = 0; k < 2; k++) {
        g_synth_host = k == 0;
        session s;
        open_session(&s, &net, VD_POLICY_ALL);
        vd_train_opts oa = { .iters = 6, .save_path = k ? dev : host, .log_every = 1000 };
        ck_assert_msg(vd_train_run(&net, s.ex, s.ds, &oa, &rd, &e) == 0, "%s", e.msg);
        ck_assert(rd.synth_device == (k == 1));
        close_session(&s);
    }
    vdt_assert_same_file(host, dev);
    /* math bf16 */
    g_no_stage = false;
    g_math = net.train.math = VD_MATH_BF16;
    for (int k = 0; k < 2; k++) {
        g_synth_host = k == 0;
        vd_train_opts ob = { .iters = 6, .save_path = k ? dev : host, .log_every = 1000,
                             .eval_at_end = true };
        ck_assert_msg(run_opts(&net, &ob, k ? &rd : &rh, &stage, &ld, &e) == 0, "%s", e.msg);
    }
    ck_assert(rd.synth_device && !rh.synth_device);
    vdt_assert_same_file(host, dev);
    ck_assert(rh.eval_acc == rd.eval_acc && rh.eval_loss == rd.eval_loss);
    g_math = VD_MATH_FP32;
    g_synth_host = false;
    g_no_stage = false;
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* With input staging the look-ahead batch is fetched on its own thread
 * while the step runs (train.c, struct ahead). A training image that cannot
 * be decoded, met there, stops the run like one met at the start of an
 * iteration: VD_EDATA naming it, after the same iterations, with the last
 * good checkpoint saved at that iteration; staged and unstaged runs agree. */
START_TEST(staged_fetch_error_keeps_last_iteration) {
    char *d = vdt_tmpdir("vdnn-train-test");
    char p[700], ck[700];
    const char *dirs[] = { "train", "train/c0", "train/c1" };
    for (size_t i = 0; i < VD_ARRAY_LEN(dirs); i++) {
        snprintf(p, sizeof p, "%s/%s", d, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    for (int i = 0; i < 40; i++) {
        snprintf(p, sizeof p, "%s/train/c%d/%02d.ppm", d, i % 2, i);
        write_ppm(p, 10, 9, (unsigned char)(5 * i));
    }
    snprintf(p, sizeof p, "%s/train/c1/bad.png", d);   /* a good header, undecodable */
    tu_write_bad_png(p);
    snprintf(ck, sizeof ck, "%s/ck.safetensors", d);
    vd_net net;
    build_net(&net, 8);
    net.train.seed = 1;   /* puts bad.png past the first batch (seeds 2, 5, 7 do not) */
    g_dev = &vd_device_h200;               /* staging pays under this model */
    g_budget = (uint64_t)32 << 20;
    int64_t done[2];
    for (int round = 0; round < 2; round++) {
        g_no_stage = round == 1;
        unlink(ck);
        session s;
        open_session(&s, &net, VD_POLICY_NONE);
        ck_assert_int_eq(s.plan.stage, round ? VD_STAGE_OFF : VD_STAGE_ON);
        vd_data_close(&s.ds);
        vd_err e;
        snprintf(p, sizeof p, "folder:%s", d);
        ck_assert_msg(vd_data_open(p, &net, 8, net.train.seed, false, &s.ds, &e) == 0, "%s",
                      e.msg);
        vd_train_opts o = { .iters = 12, .save_path = ck, .log_every = 1000 };
        vd_train_result r;
        ck_assert_int_eq(vd_train_run(&net, s.ex, s.ds, &o, &r, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, "bad.png"), "%s", e.msg);
        close_session(&s);
        done[round] = r.iters_done;
        /* past the first batch, so that the staged run met it on the thread */
        ck_assert_msg(r.iters_done >= 1, "the bad image is in the first batch");
        vd_train_state st;
        ck_assert_msg(vd_ckpt_peek_state(ck, &net, &st, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(st.iteration, r.iters_done);
        ck_assert_uint_eq(st.samples, (uint64_t)r.iters_done * 8);
    }
    ck_assert_int_eq(done[0], done[1]);
    g_dev = NULL;
    g_budget = 0;
    g_no_stage = false;
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* The evaluation scores every held-out image: 90 at batch 32 are 3 batches,
 * the last with 26 images and 6 of padding. The net, fc(10 -> 10) with
 * identity weights on 10x1x1 synthetic images, makes each image's logits
 * its pixels, so its top-1 and top-5 hits and its loss follow from the data
 * alone, in double here: the counts must agree exactly, the mean loss to
 * float rounding. With the batches made on the host and on the device (the
 * CPU backend's fill_synthetic). */
START_TEST(evaluation_scores_every_image) {
    vd_net net;
    vd_net_init(&net);
    snprintf(net.name, sizeof net.name, "ident");
    net.in_c = 10; net.in_h = 1; net.in_w = 1; net.classes = 10;
    net.train.batch = 32;
    net.train.seed = 3;
    int i = tu_add(&net, "fc", VD_OP_FC, -1);
    net.layers[i].u.fc.out = 10;
    net.layers[i].u.fc.bias = true;
    tu_add(&net, "loss", VD_OP_SOFTMAX_XENT, i);
    vd_err e;
    ck_assert_msg(vd_net_finalize(&net, &e) == 0, "%s", e.msg);
    float *params = calloc((size_t)net.param_floats, sizeof(float));
    for (int p = 0; p < net.n_params; p++)
        if (!strcmp(net.params[p].name, "fc.weight"))
            for (int k = 0; k < 10; k++) params[net.params[p].offset + k * 10 + k] = 1.0f;
    g_data = "synthetic:64,90";
    for (int host = 0; host < 2; host++) {
        g_synth_host = host;
        session s;
        open_session(&s, &net, VD_POLICY_NONE);
        ck_assert_msg(vd_exec_set_state(s.ex, params, NULL, 0, &e) == 0, "%s", e.msg);
        vd_eval_result r;
        ck_assert_msg(vd_train_evaluate(&net, s.ex, s.ds, 2, NULL, &r, &e) == 0, "%s", e.msg);
        int top1 = 0, top5 = 0;
        double lsum = 0;
        for (int64_t k = 0; k < 90; k++) {
            float x[10];
            int32_t y;
            ck_assert_int_eq(vd_data_sample(s.ds, VD_SPLIT_TEST, k, 0, x, &y, &e), 0);
            int rank = 0;
            double m = x[0], z = 0;
            for (int j = 0; j < 10; j++) {
                rank += x[j] > x[y] || (x[j] == x[y] && j < y);
                m = fmax(m, x[j]);
            }
            for (int j = 0; j < 10; j++) z += exp(x[j] - m);
            top1 += rank < 1;
            top5 += rank < 5;
            lsum += log(z) + m - x[y];
        }
        ck_assert_int_eq(r.n, 90);
        ck_assert_msg(r.acc == top1 / 90.0 && r.acc5 == top5 / 90.0, "top-1 %g top-5 %g, want "
                      "%d and %d of 90", r.acc, r.acc5, top1, top5);
        ck_assert(top1 > 0 && top5 > top1 && top5 < 90);   /* the counts tell the cases apart */
        /* per image the backend's float log-sum-exp, per batch a float mean:
         * relative 1e-6 of a loss about 2.3 */
        ck_assert_msg(fabs(r.loss - lsum / 90) < 1e-5, "loss %.9g, want %.9g", r.loss, lsum / 90);
        close_session(&s);
    }
    g_synth_host = false;
    g_data = "synthetic:200,40";
    free(params);
    vd_net_free(&net);
}
END_TEST

/* The progress events' training accuracy and epoch: the identity net of
 * evaluation_scores_every_image trained at a learning rate too small to
 * move its weights (1e-30, no momentum or decay), one event per iteration:
 * each event's accuracy is its batch's share of images whose largest pixel
 * is the label, the batch drawn in the epoch's order (data.h). 64 training
 * images at batch 32: iterations 1-2 in epoch 1, 3-4 in epoch 2, of 2. */
typedef struct prog_log { int n; double acc[8]; int64_t epoch[8], epochs[8]; } prog_log;
static void on_progress(const vd_train_event *ev, void *user) {
    prog_log *l = user;
    if (ev->kind != VD_TEV_PROGRESS || l->n >= 8) return;
    l->acc[l->n] = ev->train_acc;
    l->epoch[l->n] = ev->epoch;
    l->epochs[l->n++] = ev->epochs;
}

START_TEST(training_accuracy_and_epochs_in_progress) {
    vd_net net;
    vd_net_init(&net);
    snprintf(net.name, sizeof net.name, "ident");
    net.in_c = 10; net.in_h = 1; net.in_w = 1; net.classes = 10;
    net.train.batch = 32;
    net.train.seed = 3;
    net.train.lr = 1e-30f;
    net.train.lr_policy.type = VD_LR_FIXED;
    int i = tu_add(&net, "fc", VD_OP_FC, -1);
    net.layers[i].u.fc.out = 10;
    net.layers[i].u.fc.bias = true;
    tu_add(&net, "loss", VD_OP_SOFTMAX_XENT, i);
    vd_err e;
    ck_assert_msg(vd_net_finalize(&net, &e) == 0, "%s", e.msg);
    char *d = vdt_tmpdir("vdnn-train-test"), init[600];
    snprintf(init, sizeof init, "%s/ident.safetensors", d);
    float *params = calloc((size_t)net.param_floats, sizeof(float));
    for (int p = 0; p < net.n_params; p++)
        if (!strcmp(net.params[p].name, "fc.weight"))
            for (int k = 0; k < 10; k++) params[net.params[p].offset + k * 10 + k] = 1.0f;
    vd_train_state st = { .batch = 32, .seed = 3 };
    ck_assert_msg(vd_ckpt_save(init, &net, params, NULL, &st, &e) == 0, "%s", e.msg);
    g_data = "synthetic:64,8";
    session s;
    open_session(&s, &net, VD_POLICY_NONE);
    prog_log log = { 0 };
    vd_train_opts o = { .iters = 4, .log_every = 1, .init_path = init, .cb = on_progress,
                        .user = &log };
    vd_train_result res;
    ck_assert_msg(vd_train_run(&net, s.ex, s.ds, &o, &res, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(log.n, 4);
    int64_t perm[64];
    int all_hits = 0;
    for (int it = 0; it < 4; it++) {
        vd_data_epoch_perm(64, 3, it / 2, perm);
        int hits = 0;
        for (int k = 0; k < 32; k++) {
            float x[10];
            int32_t y;
            ck_assert_int_eq(vd_data_sample(s.ds, VD_SPLIT_TRAIN, perm[(it % 2) * 32 + k], 0, x,
                                            &y, &e), 0);
            int arg = 0;
            for (int j = 1; j < 10; j++) if (x[j] > x[arg]) arg = j;
            hits += arg == y;
        }
        ck_assert_msg(log.acc[it] == hits / 32.0, "iteration %d: accuracy %g, want %d of 32",
                      it + 1, log.acc[it], hits);
        all_hits += hits;
        ck_assert_int_eq(log.epoch[it], it / 2 + 1);
        ck_assert_int_eq(log.epochs[it], 2);
    }
    ck_assert(all_hits > 0 && all_hits < 4 * 32);   /* neither none nor all: the counts tell */
    close_session(&s);
    g_data = "synthetic:200,40";
    free(params);
    vd_net_free(&net);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("resume", 300, evaluation_scores_every_image, training_accuracy_and_epochs_in_progress,
          synthetic_on_device_is_byte_identical, staging_is_byte_identical,
          resume_is_byte_identical, adamw_and_nesterov_resume_are_byte_identical,
          divergence_is_enumeric,
          final_save_survives_a_failing_evaluation, resume_from_bf16_weights,
          staged_fetch_error_keeps_last_iteration)
