/* test_dp.c — data parallel on the CPU (train/dp.h, exec.h groups,
 * backend/allreduce.h's CPU stand-in, plan.h vd_dp_layout / vd_plan_dp):
 *
 * - the stand-in's average against a closed form, and one rank keeping bytes;
 * - LeNet trained by 2 ranks at global batch 2B equals one rank at batch 2B
 *   within a stated tolerance (several buckets, offload policy, poison);
 *   through the all-reduce with one rank: the same bytes as without it;
 * - the CLI: --gpus 1 gives the same checkpoint as no --gpus, a batch that
 *   --gpus does not divide is exit 3, cuda without NCCL is exit 8;
 * - the planner's all-reduce term against its closed form; one rank changes
 *   nothing. */
#include <math.h>
#include <pthread.h>
#include "tutil.h"
#include "vd_config.h"
#include "backend/allreduce.h"
#include "plan/plan.h"
#include "exec/exec.h"
#include "spec/spec.h"
#include "data/data.h"
#include "train/train.h"
#include "train/session.h"
#include "train/dp.h"

static char g_train[1024], g_plan[1024], g_net[1024];

static void setup(void) {
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert_msg(b && s, "VD_BUILDDIR / VD_SRCDIR not set (run through meson test)");
    snprintf(g_train, sizeof g_train, "%s/vdnn-train", b);
    snprintf(g_plan, sizeof g_plan, "%s/vdnn-plan", b);
    snprintf(g_net, sizeof g_net, "%s/nets/lenet.yaml", s);
}

/* ---- the CPU stand-in ---------------------------------------------------- */

enum { AR_RANKS = 3, AR_COUNT = 1001 };
typedef struct ar_arg { vd_allreduce *ar; float *buf; int rc; } ar_arg;

static void *ar_thread(void *p) {
    ar_arg *a = p;
    vd_err e;
    a->rc = a->ar->average(a->ar, NULL, a->buf, AR_COUNT, &e);
    if (!a->rc) a->rc = a->ar->wait(a->ar, NULL, &e);
    return NULL;
}

START_TEST(cpu_allreduce_averages) {
    vd_allreduce *ar[AR_RANKS];
    vd_err e;
    ck_assert_int_eq(vd_allreduce_cpu_create(ar, AR_RANKS, &e), 0);
    static float buf[AR_RANKS][AR_COUNT];
    for (int r = 0; r < AR_RANKS; r++)
        for (int i = 0; i < AR_COUNT; i++) buf[r][i] = (float)(i % 17) * 0.25f + (float)r * (float)i;
    pthread_t th[AR_RANKS];
    ar_arg a[AR_RANKS];
    for (int r = 0; r < AR_RANKS; r++) {
        a[r] = (ar_arg){ ar[r], buf[r], -1 };
        ck_assert_int_eq(pthread_create(&th[r], NULL, ar_thread, &a[r]), 0);
    }
    for (int r = 0; r < AR_RANKS; r++) {
        pthread_join(th[r], NULL);
        ck_assert_int_eq(a[r].rc, 0);
    }
    /* the documented order: ((b0 + b1) + b2) * (1/3) in float, on every rank */
    for (int i = 0; i < AR_COUNT; i++) {
        float b0 = (float)(i % 17) * 0.25f, s = b0;
        for (int r = 1; r < AR_RANKS; r++) s += b0 + (float)r * (float)i;
        s *= 1.0f / 3.0f;
        for (int r = 0; r < AR_RANKS; r++)
            ck_assert_msg(vdt_bits_of(buf[r][i]) == vdt_bits_of(s), "rank %d element %d: %g, "
                          "expected %g", r, i, (double)buf[r][i], (double)s);
    }
    vd_allreduce_destroy_all(ar, AR_RANKS);
    /* one rank: every bit stays (NaN payloads and -0 included) */
    vd_allreduce *one;
    ck_assert_int_eq(vd_allreduce_cpu_create(&one, 1, &e), 0);
    uint32_t bits[5] = { 0x80000000u, 0x7fc00001u, 0x00000001u, 0x3f800001u, 0xff7fffffu };
    float x[5];
    memcpy(x, bits, sizeof x);
    ck_assert_int_eq(one->average(one, NULL, x, 5, &e), 0);
    ck_assert_int_eq(memcmp(x, bits, sizeof x), 0);
    vd_allreduce_destroy_all(&one, 1);
}
END_TEST

/* A rank that fails releases the others from the barrier (abort). */
START_TEST(cpu_allreduce_abort_releases_peers) {
    vd_allreduce *ar[2];
    vd_err e;
    ck_assert_int_eq(vd_allreduce_cpu_create(ar, 2, &e), 0);
    static float buf[AR_COUNT];
    ar_arg a = { ar[1], buf, -1 };
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, ar_thread, &a), 0);
    ar[0]->abort(ar[0]);        /* rank 0 "failed" before its average */
    pthread_join(th, NULL);
    ck_assert_int_eq(a.rc, VD_EINTERNAL);
    vd_allreduce_destroy_all(ar, 2);
}
END_TEST

/* ---- training: ranks against one rank ------------------------------------- */

enum { GB = 16, ITERS = 6 };

/* LeNet on synthetic data at global batch GB for ITERS iterations on the
 * CPU with optimizer opt (AdamW: torch's defaults), then evaluated on 30
 * held-out images (two batches, the second with 14 of 16 scored: 8 + 6 on
 * 2 ranks, 4 + 4 + 4 + 2 on 4): one executor (ranks 0) or through vd_dp
 * with `ranks` ranks; returns the parameters (vd_malloc'd) and the result
 * (res_out, may be NULL) and, for ranks > 1, checks that every rank holds
 * the same bytes. */
static float *train_lenet(int ranks, vd_policy pol, uint64_t bucket, vd_optimizer opt,
                          int64_t *n_floats, vd_train_result *res_out) {
    vd_err e;
    vd_net net;
    vd_net_init(&net);
    ck_assert_msg(vd_spec_load(g_net, &net, &e) == 0, "%s", e.msg);
    net.train.batch = GB;
    if (opt == VD_OPT_ADAMW) {   /* the spec's SGD lr and weight decay make way for AdamW's */
        net.train.optimizer = opt;
        net.train.has_lr = net.train.has_weight_decay = false;
        vd_train_optimizer_defaults(&net.train);
    }
    ck_assert_msg(vd_net_finalize(&net, &e) == 0, "%s", e.msg);
    vd_schedule_inplace(&net);
    vd_dataset *ds;
    ck_assert_msg(vd_data_open("synthetic:256,30", &net, GB, net.train.seed, false, &ds, &e) == 0,
                  "%s", e.msg);
    vd_dp d;
    memset(&d, 0, sizeof d);
    vd_session_opts so;
    vd_session_opts_init(&so);
    so.backend = "cpu";
    so.bucket_bytes = bucket;
    int n = ranks > 0 ? ranks : 1;
    if (ranks > 0) {
        ck_assert_msg(vd_dp_open(&d, ranks, "cpu", 0, &e) == 0, "%s", e.msg);
        vd_dp_session_opts(&d, 0, &so);
    }
    vd_session s;
    ck_assert_msg(vd_session_open(&s, &net, GB / n, &so, &e) == 0, "%s", e.msg);
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.policy = pol;
    vd_plan plan;
    ck_assert_msg(vd_session_plan(&s, &po, &plan, &e) == 0, "%s", e.msg);
    vd_exec *ex, *g = NULL;
    ck_assert_msg(vd_session_exec(&s, &plan, true, &ex, &e) == 0, "%s", e.msg);
    if (ranks > 0) {
        ck_assert_msg(vd_dp_start_peers(&d, &net, &so, &po, false, true, &e) == 0, "%s", e.msg);
        ck_assert_msg(vd_dp_group(&d, ex, &g, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(vd_exec_ranks(g), ranks);
    }
    vd_train_opts to = { .iters = ITERS, .log_every = 1000, .eval_at_end = true };
    vd_train_result res;
    ck_assert_msg(vd_train_run(&net, g ? g : ex, ds, &to, &res, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(res.iters_done, ITERS);
    ck_assert_int_eq(res.eval_n, 30);
    /* the mean iteration time leaves out the first iteration (and those that
     * captured a graph: none here, poison fills run eagerly; test_graph's
     * train_run_times_replays has them) */
    vd_exec_stats st;
    vd_exec_get_stats(g ? g : ex, &st);
    ck_assert_int_eq(st.graph_captures, 0);
    ck_assert_int_eq(res.mean_iters, ITERS - 1);
    if (res_out) *res_out = res;
    *n_floats = net.param_floats;
    size_t bytes = (size_t)net.param_floats * sizeof(float);
    float *p = vd_malloc(bytes, NULL), *q = vd_malloc(bytes, NULL);
    ck_assert(p && q);
    ck_assert_msg(vd_exec_get_state(g ? g : ex, p, NULL, NULL, &e) == 0, "%s", e.msg);
    for (int r = 1; r < n; r++) {   /* the all-reduce keeps the replicas identical */
        ck_assert_msg(vd_exec_get_state(d.ex[r], q, NULL, NULL, &e) == 0, "%s", e.msg);
        ck_assert_msg(memcmp(p, q, bytes) == 0, "rank %d's parameters differ from rank 0's", r);
    }
    vd_free(q);
    vd_exec_destroy(&g);
    vd_dp_close_peers(&d);
    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_session_close(&s);
    vd_dp_close(&d);
    vd_data_close(&ds);
    vd_net_free(&net);
    return p;
}

START_TEST(two_ranks_match_one) {
    setup();
    int64_t n1, n2, n3;
    vd_train_result r1, r2, r4;
    float *one = train_lenet(0, VD_POLICY_NONE, 0, VD_OPT_SGD, &n1, &r1);
    /* 2 ranks at GB/2 each; 1 KiB buckets: one per layer with parameters;
     * offloads and NaN poison in the ranks' plans */
    float *two = train_lenet(2, VD_POLICY_ALL, 1024, VD_OPT_SGD, &n2, &r2);
    /* 4 ranks of 4 samples, the default bucket (one for LeNet) */
    float *four = train_lenet(4, VD_POLICY_NONE, 0, VD_OPT_SGD, &n3, &r4);
    ck_assert_int_eq(n1, n2);
    ck_assert_int_eq(n1, n3);
    /* Tolerance: the ranks sum their shard's per-sample gradient terms
     * (each already divided by its shard's batch), then the all-reduce adds
     * the shards and scales by 1/N; one rank sums all GB terms at once. Same
     * terms, another order of float additions: ~1e-7 relative per step,
     * measured at most 1.5e-8 absolute on LeNet's weights (|w| < 0.5) after
     * 20 steps. 1e-6 leaves that a wide margin and is far below what a
     * wrong shard, a missing 1/N or a skipped bucket does after one step
     * (lr 0.01 times gradients of 1e-3 and more: 1e-5 and more). */
    double worst2 = 0, worst4 = 0;
    for (int64_t i = 0; i < n1; i++) {
        worst2 = fmax(worst2, fabs((double)one[i] - (double)two[i]));
        worst4 = fmax(worst4, fabs((double)one[i] - (double)four[i]));
    }
    ck_assert_msg(worst2 <= 1e-6, "2 ranks: max |w - w_single| = %g", worst2);
    ck_assert_msg(worst4 <= 1e-6, "4 ranks: max |w - w_single| = %g", worst4);
    ck_assert_msg(memcmp(one, two, (size_t)n1 * 4) != 0,
                  "2 ranks gave the same bytes as one: was the all-reduce path taken?");
    /* the evaluation of the padded last batch: every rank scores its own
     * part of the 14 (none of rank 3's last 2), and the loss is the mean over
     * the 30 images, each rank's weighted by its count. The weights differ by
     * 1e-8 (above): the same predictions, the loss within 1e-5 (float sums
     * of a loss about 2.3; the ranks' means weighted equally instead of by
     * 8 and 6 would move it by about 1e-3) */
    ck_assert(r1.eval_acc == r2.eval_acc && r1.eval_acc == r4.eval_acc);
    ck_assert(r1.eval_acc5 == r2.eval_acc5 && r1.eval_acc5 == r4.eval_acc5);
    ck_assert_msg(fabs(r1.eval_loss - r2.eval_loss) < 1e-5 &&
                  fabs(r1.eval_loss - r4.eval_loss) < 1e-5, "eval loss %.9g, 2 ranks %.9g, 4 ranks %.9g", r1.eval_loss, r2.eval_loss,
                  r4.eval_loss);
    vd_free(one);
    vd_free(two);
    vd_free(four);
}
END_TEST

/* One rank through the all-reduce (the gradient array, the update at the
 * end) gives the bytes of the plain run (each layer's update in its
 * backward step), with SGD and with AdamW; and AdamW's update in the
 * data-parallel path keeps 2 ranks' replicas identical (train_lenet). */
START_TEST(one_rank_through_the_allreduce_is_the_same_bytes) {
    setup();
    for (int k = 0; k < 2; k++) {
        vd_optimizer opt = k ? VD_OPT_ADAMW : VD_OPT_SGD;
        int64_t n1, n2;
        float *plain = train_lenet(0, VD_POLICY_NONE, 0, opt, &n1, NULL);
        float *dp1 = train_lenet(1, VD_POLICY_ALL, 1024, opt, &n2, NULL);
        ck_assert_int_eq(n1, n2);
        ck_assert_msg(memcmp(plain, dp1, (size_t)n1 * 4) == 0,
                      "%s: one rank through the all-reduce changed the parameters",
                      vd_optimizer_name(opt));
        vd_free(plain);
        vd_free(dp1);
    }
    int64_t n;
    vd_free(train_lenet(2, VD_POLICY_NONE, 0, VD_OPT_ADAMW, &n, NULL));
}
END_TEST

/* ---- the command line ----------------------------------------------------- */

static int run(const char *bin, char **out, const char *fmt, const char *a1, const char *a2) {
    char args[3072];
    snprintf(args, sizeof args, fmt, a1, a2);
    return vdt_run_bin(bin, args, true, out);
}

START_TEST(cli_gpus) {
    setup();
    char *dir = vdt_tmpdir("dp"), a[1100], b[1100], sa[1200], sb[1200], *out;
    snprintf(a, sizeof a, "%s/a.safetensors", dir);
    snprintf(b, sizeof b, "%s/b.safetensors", dir);
    int rc = run(g_train, &out, "%s --backend cpu --batch 16 --iters 4 --quiet --save %s", g_net, a);
    ck_assert_msg(rc == 0, "%s", out);
    vd_free(out);
    rc = run(g_train, &out, "%s --backend cpu --batch 16 --iters 4 --quiet --gpus 1 --save %s",
             g_net, b);
    ck_assert_msg(rc == 0 && strstr(out, "data parallel: 1 rank"), "%s", out);
    vd_free(out);
    vdt_assert_same_file(a, b);
    snprintf(sa, sizeof sa, "%s.state", a);
    snprintf(sb, sizeof sb, "%s.state", b);
    vdt_assert_same_file(sa, sb);
    /* 2 ranks train and save (rank 0) */
    rc = run(g_train, &out, "%s --backend cpu --batch 16 --iters 2 --gpus 2 --save %s", g_net, b);
    ck_assert_msg(rc == 0 && strstr(out, "2 ranks") && strstr(out, "8 samples each"), "%s", out);
    vd_free(out);
    /* math fp16 (its loss scale is one rank's state): refused with exit 8 */
    rc = run(g_train, &out, "%s --backend cpu --batch 16 --iters 2 --gpus 2 --math fp16%s", g_net, "");
    ck_assert_msg(rc == VD_EUNSUPPORTED && strstr(out, "in math fp16 is not supported"),
                  "exit %d: %s", rc, out);
    vd_free(out);
    /* a global batch that --gpus does not divide: exit 3, in both tools */
    rc = run(g_train, &out, "%s --backend cpu --batch 15 --iters 1 --gpus 2%s", g_net, "");
    ck_assert_msg(rc == VD_ESPEC && strstr(out, "not divisible by --gpus 2"), "exit %d: %s", rc, out);
    vd_free(out);
    rc = run(g_plan, &out, "%s --gpu-model cpu --batch 64 --gpus 3%s", g_net, "");
    ck_assert_msg(rc == VD_ESPEC && strstr(out, "not divisible by --gpus 3"), "exit %d: %s", rc, out);
    vd_free(out);
#if !VD_HAVE_NCCL
    /* cuda without NCCL in this build: exit 8 naming NCCL (checked before
     * any device is touched, so also in a build without CUDA) */
    rc = run(g_train, &out, "%s --backend cuda --batch 16 --iters 1 --gpus 2%s", g_net, "");
    ck_assert_msg(rc == VD_EUNSUPPORTED && strstr(out, "NCCL"), "exit %d: %s", rc, out);
    vd_free(out);
#endif
    /* --help and the man pages of both tools name --gpus */
    const char *tools[2] = { g_train, g_plan }, *pages[2] = { "vdnn-train.1", "vdnn-plan.1" };
    for (int t = 0; t < 2; t++) {
        ck_assert_int_eq(vdt_run_bin(tools[t], "--help", true, &out), 0);
        ck_assert_msg(strstr(out, "--gpus N"), "%s --help does not mention --gpus", tools[t]);
        vd_free(out);
        char man[1200];
        snprintf(man, sizeof man, "%s/man/%s", getenv("VD_SRCDIR"), pages[t]);
        size_t mn;
        char *page = vdt_slurp(man, &mn);
        ck_assert_msg(strstr(page, "\\-\\-gpus"), "%s does not mention --gpus", pages[t]);
        vd_free(page);
    }
    /* vdnn-plan --gpus 1 prints the plan without it, except that the
     * all-reduce path keeps one gradient array (the update at the end, not
     * in the backward pass): no data-parallel section, the same tensors but
     * the per-layer gradients, and the same predicted time to the rounding
     * of the SGD step's time moved into the backward steps */
    char *p0, *p1;
    ck_assert_int_eq(run(g_plan, &p0, "%s --gpu-model cpu --batch 32 --format json%s", g_net, ""), 0);
    ck_assert_int_eq(run(g_plan, &p1, "%s --gpu-model cpu --batch 32 --format json --gpus 1%s",
                         g_net, ""), 0);
    ck_assert_msg(strstr(p0, "\"update_in_backward\": true") && !strstr(p0, "\"data_parallel\""),
                  "without --gpus: not the update in the backward pass");
    ck_assert_msg(strstr(p1, "\"update_in_backward\": false") && !strstr(p1, "\"data_parallel\"") &&
                  strstr(p1, "\"name\": \"grads\"") && !strstr(p0, "\"name\": \"grads\""),
                  "--gpus 1: not one gradient array");
    vd_free(p0);
    vd_free(p1);
    ck_assert_int_eq(run(g_plan, &p1, "%s --gpu-model cpu --batch 32 --format json --gpus 2%s",
                         g_net, ""), 0);
    ck_assert_msg(strstr(p1, "\"data_parallel\"") && strstr(p1, "\"global_batch\": 32") &&
                  strstr(p1, "\"batch\": 16"), "%s", p1);
    vd_free(p1);
    vdt_rmrf(dir);
    vd_free(dir);
}
END_TEST

/* ---- the planner ------------------------------------------------------------ */

START_TEST(planner_allreduce_term) {
    vd_net net;
    tu_tiny_net(&net, 1, 8, 8, 3, true, 4);   /* conv -> BN -> relu -> pool -> fc */
    vd_schedule_inplace(&net);
    vd_err e;
    vd_profile prof;
    ck_assert_int_eq(vd_profile_analytic(&net, 4, &vd_device_cpu, &prof, &e), 0);
    prof.dev.allreduce_bw = 1e9;
    prof.dev.allreduce_lat_s = 1e-5;
    vd_plan_opts po;
    vd_plan_opts_init(&po);
    po.batch = 4;
    vd_plan p;
    ck_assert_msg(vd_plan_build(&net, &prof, &po, &p, &e) == 0, "%s", e.msg);
    vd_sim_result before = p.sim;

    /* one rank: nothing */
    ck_assert_int_eq(vd_plan_dp(&p, &net, &prof, 1, 0, &e), 0);
    ck_assert_int_eq(p.dp.ranks, 0);
    ck_assert(memcmp(&before, &p.sim, sizeof before) == 0);

    /* the layout: one bucket by default, closed by the last backward step
     * (layer 0's); two ranges: [conv.weight, bn.weight, bn.bias] and
     * [fc.weight, fc.bias] (BN's running statistics between them) */
    vd_dp_layout lay;
    ck_assert_int_eq(vd_dp_layout_build(&net, &p, 0, &lay, &e), 0);
    ck_assert_int_eq(lay.n_buckets, 1);
    ck_assert_int_eq(lay.n_ranges, 2);
    int last_bwd = -1, sgd = -1;
    for (int s = 0; s < p.n_steps; s++) {
        if (p.steps[s].kind == VD_STEP_BWD) last_bwd = s;
        if (p.steps[s].kind == VD_STEP_SGD) sgd = s;
    }
    ck_assert_int_eq(lay.buckets[0].step, last_bwd);
    ck_assert_int_eq(p.steps[last_bwd].layer, 0);
    ck_assert_uint_eq(lay.bytes, (uint64_t)net.n_trainable * 4u);
    ck_assert_int_eq(lay.ranges[0].count + lay.ranges[1].count, net.n_trainable);
    vd_dp_layout_free(&lay);
    /* 1-byte buckets: one per layer with parameters (fc, bn, conv), in
     * backward order, each covering exactly its layer */
    ck_assert_int_eq(vd_dp_layout_build(&net, &p, 1, &lay, &e), 0);
    ck_assert_int_eq(lay.n_buckets, 3);
    int64_t sum = 0;
    for (int b = 0; b < 3; b++) {
        const vd_layer *l = &net.layers[p.steps[lay.buckets[b].step].layer];
        ck_assert_int_eq(lay.buckets[b].n_ranges, 1);
        ck_assert_int_eq(lay.ranges[lay.buckets[b].first_range].offset,
                         net.params[l->param_first].offset);
        sum += lay.ranges[lay.buckets[b].first_range].count;
        if (b) ck_assert_int_gt(lay.buckets[b].step, lay.buckets[b - 1].step);
    }
    ck_assert_int_eq(sum, net.n_trainable);
    vd_dp_layout_free(&lay);

    /* the closed form, 4 ranks, one bucket of two calls after the last
     * backward step: 2 lat + 2 (4-1)/4 * bytes / bw, exposed from the SGD
     * step's start */
    ck_assert_int_eq(vd_plan_dp(&p, &net, &prof, 4, 0, &e), 0);
    double bytes = (double)net.n_trainable * 4.0;
    double ar = 2 * 1e-5 + 1.5 * bytes / 1e9;
    double exposed = p.steps[last_bwd].t_end + ar - p.steps[sgd].t_start;
    ck_assert_int_eq(p.dp.ranks, 4);
    ck_assert_int_eq(p.dp.n_calls, 2);
    ck_assert(fabs(p.dp.allreduce_s - ar) <= 1e-15);
    ck_assert(exposed > 0);
    ck_assert(fabs(p.dp.exposed_s - exposed) <= 1e-15);
    ck_assert(fabs(p.dp.iter_s - (p.sim.iter_s + exposed)) <= 1e-15);
    ck_assert(memcmp(&before, &p.sim, sizeof before) == 0);   /* the plan is untouched */
    /* a bandwidth from nowhere near: no time, nothing exposed */
    prof.dev.allreduce_bw = 1e30;
    prof.dev.allreduce_lat_s = 0;
    ck_assert_int_eq(vd_plan_dp(&p, &net, &prof, 2, 0, &e), 0);
    ck_assert(p.dp.exposed_s == 0 && p.dp.iter_s == p.sim.iter_s);
    /* no measured bandwidth: the H200 model's */
    prof.dev.allreduce_bw = 0;
    ck_assert_int_eq(vd_plan_dp(&p, &net, &prof, 2, 0, &e), 0);
    ck_assert(p.dp.bw == vd_device_h200.allreduce_bw && p.dp.lat_s == vd_device_h200.allreduce_lat_s);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

START_TEST(rank_seeds) {
    ck_assert_uint_eq(vd_exec_rank_seed(12345, 0), 12345);
    ck_assert_uint_ne(vd_exec_rank_seed(12345, 1), 12345);
    ck_assert_uint_ne(vd_exec_rank_seed(12345, 1), vd_exec_rank_seed(12345, 2));
}
END_TEST

VDT_MAIN("dp", 0, cpu_allreduce_averages, cpu_allreduce_abort_releases_peers, two_ranks_match_one,
         one_rank_through_the_allreduce_is_the_same_bytes, cli_gpus, planner_allreduce_term,
         rank_seeds)
