/* test_backend.c — CPU backend machinery: pool/host memory, the lazy copy
 * streams and events, algorithm options, aux sizes, SGD, argument checks. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ops_common.h"

static vd_backend *be;
static vd_err e;

static void setup(void) {
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    ck_assert_str_eq(be->name, "cpu");
}
static void teardown(void) { be->destroy(be); be = NULL; }

static bool all_nan(const float *p, int n) {
    for (int i = 0; i < n; i++) if (!isnan(p[i])) return false;
    return true;
}
static bool equals_iota(const float *p, int n, float start) {
    for (int i = 0; i < n; i++) if (p[i] != start + (float)i) return false;
    return true;
}

/* ------------------------------------------------------------------ memory */

START_TEST(pool_and_host_memory) {
    void *pool, *host;
    ck_assert_int_eq(be->pool_create(be, 1000, &pool, &e), 0);
    ck_assert_int_eq((uintptr_t)pool % 256, 0);
    ck_assert(all_nan(pool, 250));   /* poisoned: unwritten memory reads as NaN */
    ck_assert_int_eq(be->host_alloc(be, 4000, &host, &e), 0);
    ck_assert_int_eq((uintptr_t)host % 256, 0);
    ck_assert(all_nan(host, 1000));
    be->host_free(be, host);
    be->pool_destroy(be, pool);
    /* blocks of 2 MiB and more are mapped (not under ASan): the same
     * contract, to the last byte, and host blocks are still counted */
    const uint64_t big = (3u << 20) + 4, bigh = (5u << 20) + 8;
    ck_assert_int_eq(be->pool_create(be, big, &pool, &e), 0);
    ck_assert_int_eq((uintptr_t)pool % 256, 0);
    ck_assert(all_nan(pool, (int)(big / 4)));
    vd_mem_stats s0, s1;
    vd_mem_stats_get(&s0);
    ck_assert_int_eq(be->host_alloc(be, bigh, &host, &e), 0);
    ck_assert_int_eq((uintptr_t)host % 256, 0);
    ck_assert(all_nan(host, (int)(bigh / 4)));
    vd_mem_stats_get(&s1);
    ck_assert_uint_eq(s1.tracked - s0.tracked, bigh);
    memset(pool, 0, big);
    memset(host, 0, bigh);
    be->host_free(be, host);
    vd_mem_stats_get(&s1);
    ck_assert_uint_eq(s1.tracked, s0.tracked);
    be->pool_destroy(be, pool);
    /* a second one after the first was released (the backend's list) */
    ck_assert_int_eq(be->pool_create(be, big, &pool, &e), 0);
    ck_assert(all_nan(pool, (int)(big / 4)));
    be->pool_destroy(be, pool);
}
END_TEST

/* ------------------------------------------------------------------ streams */

enum { N = 64 };

/* Offload: the D2H copy is not done until waited on; the wait does it. */
START_TEST(d2h_lazy_until_wait) {
    float *dev, *host;
    ck_assert_int_eq(be->pool_create(be, N * sizeof(float), (void **)&dev, &e), 0);
    ck_assert_int_eq(be->host_alloc(be, N * sizeof(float), (void **)&host, &e), 0);
    ck_assert_int_eq(be->events_create(be, 4, &e), 0);
    for (int i = 0; i < N; i++) dev[i] = (float)i;
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_D2H, host, dev, N * sizeof(float), &e), 0);
    ck_assert(all_nan(host, N));
    ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_D2H, &e), 0);
    ck_assert(all_nan(host, N));                     /* recording is not waiting */
    ck_assert_int_eq(be->stream_wait(be, VD_STREAM_COMPUTE, 0, &e), 0);
    ck_assert(equals_iota(host, N, 0));
    be->host_free(be, host);
    be->pool_destroy(be, dev);
}
END_TEST

/* A region reused before the offload's wait: the copy runs later and takes
 * the NEW contents — the bug shows deterministically. */
START_TEST(reuse_before_wait_is_visible) {
    float *dev, *host;
    ck_assert_int_eq(be->pool_create(be, N * sizeof(float), (void **)&dev, &e), 0);
    ck_assert_int_eq(be->host_alloc(be, N * sizeof(float), (void **)&host, &e), 0);
    ck_assert_int_eq(be->events_create(be, 1, &e), 0);
    for (int i = 0; i < N; i++) dev[i] = (float)i;
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_D2H, host, dev, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_D2H, &e), 0);
    for (int i = 0; i < N; i++) dev[i] = 1000.0f + (float)i;   /* "compute" overwrites */
    ck_assert_int_eq(be->event_sync(be, 0, &e), 0);
    ck_assert(equals_iota(host, N, 1000));
    be->host_free(be, host);
    be->pool_destroy(be, dev);
}
END_TEST

/* Prefetch chained behind an offload: H2D waits on a D2H event. Nothing
 * runs until the H2D event is synced; then both, in order. */
START_TEST(h2d_waits_on_d2h) {
    float *dev, *host;
    ck_assert_int_eq(be->pool_create(be, 2 * N * sizeof(float), (void **)&dev, &e), 0);
    ck_assert_int_eq(be->host_alloc(be, N * sizeof(float), (void **)&host, &e), 0);
    ck_assert_int_eq(be->events_create(be, 2, &e), 0);
    float *a = dev, *b = dev + N;
    for (int i = 0; i < N; i++) a[i] = (float)i;
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_D2H, host, a, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_D2H, &e), 0);
    ck_assert_int_eq(be->stream_wait(be, VD_STREAM_H2D, 0, &e), 0);
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_H2D, b, host, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->event_record(be, 1, VD_STREAM_H2D, &e), 0);
    ck_assert(all_nan(host, N) && all_nan(b, N));
    ck_assert_int_eq(be->stream_wait(be, VD_STREAM_COMPUTE, 1, &e), 0);
    ck_assert(equals_iota(host, N, 0));
    ck_assert(equals_iota(b, N, 0));
    be->host_free(be, host);
    be->pool_destroy(be, dev);
}
END_TEST

/* A wait only runs the queue up to its mark; later entries stay queued. */
START_TEST(wait_runs_only_up_to_mark) {
    float *dev, *host;
    ck_assert_int_eq(be->pool_create(be, N * sizeof(float), (void **)&dev, &e), 0);
    ck_assert_int_eq(be->host_alloc(be, 2 * N * sizeof(float), (void **)&host, &e), 0);
    ck_assert_int_eq(be->events_create(be, 2, &e), 0);
    for (int i = 0; i < N; i++) host[i] = (float)i;
    for (int i = 0; i < N; i++) host[N + i] = 500.0f + (float)i;
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_H2D, dev, host, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_H2D, &e), 0);
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_H2D, dev, host + N, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->event_record(be, 1, VD_STREAM_H2D, &e), 0);
    ck_assert_int_eq(be->stream_wait(be, VD_STREAM_COMPUTE, 0, &e), 0);
    ck_assert(equals_iota(dev, N, 0));
    ck_assert_int_eq(be->stream_wait(be, VD_STREAM_COMPUTE, 1, &e), 0);
    ck_assert(equals_iota(dev, N, 500));
    /* re-recording event 0 moves it: waiting on it now needs a new copy */
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_H2D, dev, host, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_H2D, &e), 0);
    ck_assert(equals_iota(dev, N, 500));
    ck_assert_int_eq(be->event_sync(be, 0, &e), 0);
    ck_assert(equals_iota(dev, N, 0));
    be->host_free(be, host);
    be->pool_destroy(be, dev);
}
END_TEST

/* Poison and zero: immediate on COMPUTE, queued on copy streams. */
START_TEST(poison_and_zero) {
    float *dev;
    ck_assert_int_eq(be->pool_create(be, N * sizeof(float), (void **)&dev, &e), 0);
    ck_assert_int_eq(be->events_create(be, 1, &e), 0);
    ck_assert_int_eq(be->zero_async(be, VD_STREAM_COMPUTE, dev, N * sizeof(float), &e), 0);
    for (int i = 0; i < N; i++) ck_assert(dev[i] == 0.0f);
    ck_assert_int_eq(be->poison_async(be, VD_STREAM_D2H, dev, N * sizeof(float), &e), 0);
    ck_assert(dev[0] == 0.0f);
    ck_assert_int_eq(be->synchronize(be, &e), 0);
    ck_assert(all_nan(dev, N));
    ck_assert_int_eq(be->zero_async(be, VD_STREAM_H2D, dev, N * sizeof(float), &e), 0);
    ck_assert(all_nan(dev, N));
    ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_H2D, &e), 0);
    ck_assert_int_eq(be->event_sync(be, 0, &e), 0);
    ck_assert(dev[N - 1] == 0.0f);
    ck_assert_int_eq(be->poison_async(be, VD_STREAM_COMPUTE, dev, N * sizeof(float), &e), 0);
    ck_assert(all_nan(dev, N));
    be->pool_destroy(be, dev);
}
END_TEST

/* Device-to-device copies on COMPUTE run at once; same-stream order holds. */
START_TEST(compute_copy_immediate_and_order) {
    float *dev;
    ck_assert_int_eq(be->pool_create(be, 3 * N * sizeof(float), (void **)&dev, &e), 0);
    ck_assert_int_eq(be->events_create(be, 1, &e), 0);
    for (int i = 0; i < N; i++) { dev[i] = (float)i; dev[N + i] = 7.0f + (float)i; }
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_COMPUTE, dev + 2 * N, dev, N * sizeof(float), &e), 0);
    ck_assert(equals_iota(dev + 2 * N, N, 0));
    /* two queued copies into one place: the later one wins */
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_D2H, dev + 2 * N, dev + N, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->copy_async(be, VD_STREAM_D2H, dev + 2 * N, dev, N * sizeof(float), &e), 0);
    ck_assert_int_eq(be->synchronize(be, &e), 0);
    ck_assert(equals_iota(dev + 2 * N, N, 0));
    be->pool_destroy(be, dev);
}
END_TEST

/* Many queued copies without a wait: the queue grows and stays ordered. */
START_TEST(queue_growth) {
    float *dev, *host;
    enum { M = 5000 };
    ck_assert_int_eq(be->pool_create(be, M * sizeof(float), (void **)&dev, &e), 0);
    ck_assert_int_eq(be->host_alloc(be, M * sizeof(float), (void **)&host, &e), 0);
    ck_assert_int_eq(be->events_create(be, 1, &e), 0);
    for (int i = 0; i < M; i++) dev[i] = (float)i;
    for (int i = 0; i < M; i++) {
        ck_assert_int_eq(be->copy_async(be, VD_STREAM_D2H, host + i, dev + i, sizeof(float), &e), 0);
        if (i == M / 2) ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_D2H, &e), 0);
    }
    ck_assert_int_eq(be->event_sync(be, 0, &e), 0);
    ck_assert(host[M / 2] == (float)(M / 2) && isnan(host[M / 2 + 1]));
    ck_assert_int_eq(be->synchronize(be, &e), 0);
    ck_assert(equals_iota(host, M, 0));
    be->host_free(be, host);
    be->pool_destroy(be, dev);
}
END_TEST

START_TEST(event_elapsed_and_errors) {
    ck_assert_int_eq(be->events_create(be, 3, &e), 0);
    ck_assert_int_eq(be->event_record(be, 0, VD_STREAM_COMPUTE, &e), 0);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(be->event_record(be, 1, VD_STREAM_COMPUTE, &e), 0);
    float ms = -1;
    ck_assert_int_eq(be->event_elapsed(be, 0, 1, &ms, &e), 0);
    ck_assert_msg(ms >= 19.0f && ms < 5000.0f, "elapsed %g ms", (double)ms);
    /* a copy-stream event that has not run yet cannot be timed */
    ck_assert_int_eq(be->event_record(be, 2, VD_STREAM_H2D, &e), 0);
    ck_assert_int_eq(be->event_elapsed(be, 0, 2, &ms, &e), VD_EINTERNAL);
    ck_assert_int_eq(be->event_sync(be, 2, &e), 0);
    ck_assert_int_eq(be->event_elapsed(be, 0, 2, &ms, &e), 0);
    ck_assert(ms >= 19.0f);
    /* bad indices */
    ck_assert_int_eq(be->event_record(be, 3, VD_STREAM_COMPUTE, &e), VD_EINTERNAL);
    ck_assert_int_eq(be->event_record(be, 0, 3, &e), VD_EINTERNAL);
    ck_assert_int_eq(be->stream_wait(be, VD_STREAM_COMPUTE, -1, &e), VD_EINTERNAL);
    ck_assert_int_eq(be->copy_async(be, 7, NULL, NULL, 0, &e), VD_EINTERNAL);
    /* waiting on a never-recorded event is a no-op, like CUDA */
    ck_assert_int_eq(be->events_create(be, 1, &e), 0);
    ck_assert_int_eq(be->stream_wait(be, VD_STREAM_COMPUTE, 0, &e), 0);
    ck_assert_int_eq(be->event_sync(be, 0, &e), 0);
}
END_TEST

/* ------------------------------------------------------------------ layers */

START_TEST(algos_and_aux) {
    vd_net net;
    t_net_begin(&net, 3, 8, 7);
    int c = vdt_add(&net, vdt_conv(-1, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, true));   /* -> 4x4x4 */
    int bn = vdt_add(&net, vdt_simple(c, VD_OP_BATCHNORM));
    int r = vdt_add(&net, vdt_simple(bn, VD_OP_RELU));
    vdt_finish(&net, r);
    int loss = net.n_layers - 1;
    ck_assert_int_eq(be->layer_setup(be, &net, 5, VD_MATH_FP32, true, &e), 0);
    const vd_algo_opt *o;
    int n;
    ck_assert_int_eq(be->layer_algos(be, c, &o, &n, &e), 0);
    ck_assert_int_eq(n, 2);
    ck_assert_str_eq(o[0].label, "im2col");
    ck_assert_uint_eq(o[0].workspace, 3u * 3 * 3 * 4 * 4 * sizeof(float));  /* C*kh*kw*OH*OW */
    ck_assert_str_eq(o[1].label, "direct");
    ck_assert_uint_eq(o[1].workspace, 0);
    for (int i = bn; i <= loss; i++) {
        ck_assert_int_eq(be->layer_algos(be, i, &o, &n, &e), 0);
        ck_assert_int_eq(n, 1);
        ck_assert_uint_eq(o[0].workspace, 0);
    }
    ck_assert_int_eq(be->layer_algos(be, loss + 1, &o, &n, &e), VD_EINTERNAL);
    ck_assert_uint_eq(be->layer_aux_bytes(&net, bn, 5), 2 * 4 * sizeof(float));
    /* the loss: its mean and the top-1 hits */
    ck_assert_uint_eq(be->layer_aux_bytes(&net, loss, 5), 2 * sizeof(float));
    ck_assert_uint_eq(be->layer_aux_bytes(&net, c, 5), 0);
    ck_assert_uint_eq(be->layer_aux_bytes(&net, r, 5), 0);

    /* im2col without enough workspace, or a bad algo index, is refused */
    t_op t;
    t_op_init(&t, be, &net, c, 2, 1);
    t.io.ws_bytes = 16;
    ck_assert_int_eq(be->forward(be, &net, c, &t.io, &e), VD_EINTERNAL);
    t.io.algo = 1;
    ck_assert_int_eq(be->forward(be, &net, c, &t.io, &e), 0);
    t.io.algo = 2;
    ck_assert_int_eq(be->forward(be, &net, c, &t.io, &e), VD_EINTERNAL);
    t.io.algo = 1;
    t.io.w = NULL;
    ck_assert_int_eq(be->forward(be, &net, c, &t.io, &e), VD_EINTERNAL);
    ck_assert(strstr(e.msg, "w is NULL") != NULL);
    t_op_free(&t);

    /* a net whose recorded shape disagrees with the backend's is refused */
    net.layers[c].h = 5;
    ck_assert_int_eq(be->layer_setup(be, &net, 5, VD_MATH_FP32, true, &e), VD_EINTERNAL);
    vd_net_free(&net);
}
END_TEST

/* The shape check at layer_setup runs each layer's infer from the op table
 * on the finalized net. A net of every op (pool windowed with ceil_mode,
 * adaptive and global) passes; any stored dimension of any layer, changed
 * by one, fails it with VD_EINTERNAL naming that layer; so do fields that
 * infer refuses (a stride of 0 would divide by zero). Fields left 0 in
 * code got their op's defaults at finalize (vd_op_info.defaults). */
START_TEST(shape_check_runs_infer) {
    vd_net net;
    t_net_begin(&net, 4, 9, 9);
    int cv = vdt_add(&net, vdt_conv(-1, 6, 3, 3, 1, 1, 1, 1, 0, 0, 2, true));   /* 6x9x9 */
    vd_layer bn = vdt_simple(cv, VD_OP_BATCHNORM);
    bn.u.bn.eps = bn.u.bn.momentum = 0;
    int b = vdt_add(&net, bn);
    int r = vdt_add(&net, vdt_simple(b, VD_OP_RELU));
    vd_layer lrn = vdt_simple(r, VD_OP_LRN);
    lrn.u.lrn.size = 3; lrn.u.lrn.alpha = 1e-4f; lrn.u.lrn.beta = 0.75f; lrn.u.lrn.k = 2.0f;
    int ln = vdt_add(&net, lrn);
    int g = vdt_add(&net, vdt_simple(ln, VD_OP_GELU));
    /* stride 0: the kernel's; ceil_mode: (9 + 2 - 3) / 3 rounded up, + 1 = 4 (floor: 3) */
    int pm = vdt_add(&net, vdt_pool(g, VD_POOL_MAX, 3, 3, 0, 0, 1, 1, true));
    int pa = vdt_add(&net, vdt_adaptive(g, VD_POOL_AVG, 4, 4, false));
    int cat = vdt_add(&net, vdt_multi(VD_OP_CONCAT, 2, (const int[]){ pm, pa }));  /* 12x4x4 */
    int d = vdt_add(&net, vdt_simple(cat, VD_OP_DROPOUT));
    int fl = vdt_add(&net, vdt_simple(d, VD_OP_FLATTEN));                        /* 192 */
    vd_layer fc = vdt_simple(fl, VD_OP_FC);
    fc.u.fc.out = 3;
    int f1 = vdt_add(&net, fc);
    int gp = vdt_add(&net, vdt_adaptive(d, VD_POOL_AVG, 0, 0, true));             /* 12x1x1 */
    fc.in[0] = gp;
    int f2 = vdt_add(&net, fc);
    int sum = vdt_add(&net, vdt_multi(VD_OP_ADD, 2, (const int[]){ f1, f2 }));
    vdt_finish(&net, sum);
    const vd_layer *L = net.layers;
    ck_assert(L[cv].u.conv.dh == 1 && L[cv].u.conv.dw == 1);
    ck_assert(L[b].u.bn.eps == 1e-5f && L[b].u.bn.momentum == 0.1f);
    ck_assert(L[pm].u.pool.sh == 3 && L[pm].u.pool.sw == 3);
    ck_assert(L[pm].c == 6 && L[pm].h == 4 && L[pm].w == 4);
    ck_assert(L[fl].c == 192 && L[net.n_layers - 1].c == 3);
    ck_assert_int_eq(be->layer_setup(be, &net, 2, VD_MATH_FP32, true, &e), 0);

    for (int i = 0; i < net.n_layers; i++) {
        int *dims[3] = { &net.layers[i].c, &net.layers[i].h, &net.layers[i].w };
        char name[VD_NAME_MAX + 16];
        snprintf(name, sizeof name, "layer '%s'", net.layers[i].name);
        for (int k = 0; k < 3; k++) {
            (*dims[k])++;
            ck_assert_int_eq(be->layer_setup(be, &net, 2, VD_MATH_FP32, true, &e), VD_EINTERNAL);
            ck_assert_msg(strstr(e.msg, name), "%s, dim %d: %s", name, k, e.msg);
            (*dims[k])--;
        }
    }
    ck_assert_int_eq(be->layer_setup(be, &net, 2, VD_MATH_FP32, true, &e), 0);

    net.layers[cv].u.conv.groups = 4;   /* does not divide out = 6 */
    ck_assert_int_eq(be->layer_setup(be, &net, 2, VD_MATH_FP32, true, &e), VD_EINTERNAL);
    ck_assert_msg(strstr(e.msg, "layer 'l0'") && strstr(e.msg, "groups"), "%s", e.msg);
    net.layers[cv].u.conv.groups = 2;
    net.layers[pm].u.pool.sh = 0;
    ck_assert_int_eq(be->layer_setup(be, &net, 2, VD_MATH_FP32, true, &e), VD_EINTERNAL);
    ck_assert_msg(strstr(e.msg, "stride must be positive"), "%s", e.msg);
    net.layers[pm].u.pool.sh = 3;
    net.layers[pm].u.pool.ceil_mode = false;   /* 3x3 now: the stored 4x4 disagrees */
    ck_assert_int_eq(be->layer_setup(be, &net, 2, VD_MATH_FP32, true, &e), VD_EINTERNAL);
    ck_assert_msg(strstr(e.msg, "4x4, the op table computes 6x3x3") != NULL, "%s", e.msg);
    vd_net_free(&net);
}
END_TEST

/* ------------------------------------------------------------------ op table */

static bool refuse_lrn(vd_backend *b, vd_op op, vd_math math) { return op != VD_OP_LRN; }

/* supports_op: the CPU backend runs every op of the table in both math
 * modes; a backend that refuses an op fails layer_setup with
 * VD_EUNSUPPORTED (exit 8) naming the layer. */
START_TEST(supports_op_checked_at_setup) {
    for (int op = 0; op < VD_OP_COUNT; op++) {
        ck_assert_msg(be->supports_op(be, (vd_op)op, VD_MATH_FP32), "cpu lacks %s", vd_op_table[op].name);
        ck_assert(be->supports_op(be, (vd_op)op, VD_MATH_TF32));
    }
    ck_assert(!be->supports_op(be, VD_OP_COUNT, VD_MATH_FP32));
    vd_net net;
    t_net_begin(&net, 4, 3, 3);
    vd_layer l = vdt_simple(-1, VD_OP_LRN);
    l.u.lrn.size = 3; l.u.lrn.alpha = 1e-4f; l.u.lrn.beta = 0.75f; l.u.lrn.k = 2.0f;
    int i = vdt_add(&net, l);
    snprintf(net.layers[i].name, sizeof net.layers[i].name, "norm1");
    vdt_finish(&net, i);
    ck_assert_int_eq(be->layer_setup(be, &net, 2, VD_MATH_FP32, true, &e), 0);
    vd_backend b = *be;   /* the same backend, refusing lrn */
    b.supports_op = refuse_lrn;
    ck_assert_int_eq(b.layer_setup(&b, &net, 2, VD_MATH_FP32, true, &e), VD_EUNSUPPORTED);
    ck_assert_msg(strstr(e.msg, "layer 'norm1'") && strstr(e.msg, "lrn"), "message: %s", e.msg);
    vd_net_free(&net);
}
END_TEST

/* What backward reads comes from the table (vd_op_bwd_reads), and the CPU
 * backend checks exactly that: average pooling reads neither x nor y, max
 * pooling reads x; aux sizes are vd_op_aux_bytes. */
START_TEST(bwd_reads_from_table) {
    for (int mode = 0; mode < 2; mode++) {
        vd_net net;
        t_net_begin(&net, 2, 6, 6);
        int i = vdt_add(&net, vdt_pool(-1, mode ? VD_POOL_AVG : VD_POOL_MAX, 2, 2, 2, 2, 0, 0, false));
        vdt_finish(&net, i);
        bool rx, ry;
        vd_op_bwd_reads(&net, i, &rx, &ry);
        ck_assert(rx == !mode && !ry);
        ck_assert_uint_eq(be->layer_aux_bytes(&net, i, 2), vd_op_aux_bytes(&net, i, 2));
        t_op t;
        t_op_init(&t, be, &net, i, 2, 5);
        t_fwd(&t);
        t_bwd(&t);
        float *dx = t_copy(t.dx[0], t.xn[0]);
        const float *x = t.io.x[0];
        t.io.x[0] = NULL;
        t.io.y = NULL;
        t.io.dy = t.r;
        t_fill_uniform(t.dx[0], t.xn[0], -1, 1, 3);
        int rc = be->backward(be, &net, i, &t.io, &e);
        if (mode) {   /* average: the same dx without x and y */
            ck_assert_int_eq(rc, 0);
            ck_assert(memcmp(dx, t.dx[0], (size_t)t.xn[0] * sizeof(float)) == 0);
        } else {
            ck_assert_int_eq(rc, VD_EINTERNAL);
            ck_assert_msg(strstr(e.msg, "x[k] is NULL") != NULL, "message: %s", e.msg);
        }
        t.io.x[0] = x;
        free(dx);
        t_op_free(&t);
        vd_net_free(&net);
    }
}
END_TEST

/* ------------------------------------------------------------------ the optimizer */

/* be->update of one range [off, off + cnt) at o's lr and t, through the
 * backend's step scalars and a one-range table (lr_mult 1). */
static int upd(const vd_optim_step *o, float *p, const float *g, float *m, float *v, int64_t off,
               int64_t cnt) {
    void *table = NULL;
    vd_update_range r = {off, cnt, 1.0f};
    vd_step_scalars ss = vd_step_scalars_of(o, 0);
    int rc = be->ranges_create(be, &r, 1, &table, &e);
    if (!rc) rc = be->step_set(be, &ss, &e);
    if (!rc) rc = be->update(be, o, p, g, m, v, table, &e);
    be->ranges_free(be, table);
    return rc;
}

/* SGD's vd_optim_step: update number t. */
static vd_optim_step sgd_of(float lr, float mom, float wd, bool nesterov, int64_t t) {
    return (vd_optim_step){ .kind = VD_OPT_SGD, .lr = lr, .momentum = mom, .weight_decay = wd,
                            .nesterov = nesterov, .t = t };
}

/* torch.optim.SGD(lr, momentum, weight_decay, nesterov), dampening 0,
 * transcribed from torch/optim/sgd.py in float:
 *   d_p = grad + wd * p
 *   buf = d_p (first step) | buf * momentum + d_p
 *   d_p = d_p + momentum * buf (nesterov) | buf
 *   p   = p + (-lr) * d_p
 * Must match bit for bit; only [offset, offset+count) changes. */
START_TEST(sgd_matches_torch) {
    enum { P = 10, OFF = 2, CNT = 6, STEPS = 4 };
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        float p[P], g[P], m[P], rp[P], rm[P];
        t_fill_uniform(p, P, -1, 1, 1);
        memcpy(rp, p, sizeof p);
        memset(m, 0xFF, sizeof m);                      /* poisoned buffer before step 1 */
        const float lr = 0.05f, mom = 0.9f, wd = 5e-4f;
        for (int s = 0; s < STEPS; s++) {
            t_fill_uniform(g, P, -1, 1, 10 + (uint64_t)s);
            vd_optim_step o = sgd_of(lr, mom, wd, nesterov, s + 1);
            ck_assert_int_eq(upd(&o, p, g, m, NULL, OFF, CNT), 0);
            for (int i = OFF; i < OFF + CNT; i++) {
                float d = g[i] + wd * rp[i];
                rm[i] = s == 0 ? d : rm[i] * mom + d;
                float step = nesterov ? d + mom * rm[i] : rm[i];
                rp[i] = rp[i] + (-lr) * step;
            }
            for (int i = 0; i < P; i++)
                ck_assert_msg(p[i] == rp[i], "nesterov %d step %d p[%d]", nesterov, s, i);
            for (int i = OFF; i < OFF + CNT; i++) ck_assert(m[i] == rm[i]);
            ck_assert(isnan(m[0]) && isnan(m[P - 1]));  /* outside the range: untouched */
        }
    }
}
END_TEST

/* A hand-computed case: p=1, g=0.5, lr=0.1, momentum 0.9, wd 0.01.
 * step 1: d = 0.51, buf = 0.51, p = 0.949
 * step 2: d = 0.5 + 0.00949 = 0.50949, buf = 0.459 + 0.50949 = 0.96849,
 *         p = 0.949 - 0.096849 = 0.852151
 * Nesterov: step 1: p = 1 - 0.1 (0.51 + 0.9 * 0.51) = 0.9031;
 *   step 2: d = 0.5 + 0.009031 = 0.509031, buf = 0.459 + 0.509031 = 0.968031,
 *           p = 0.9031 - 0.1 (0.509031 + 0.8712279) = 0.76507411 */
START_TEST(sgd_hand) {
    float p = 1, g = 0.5f, m = NAN;
    vd_optim_step o = sgd_of(0.1f, 0.9f, 0.01f, false, 1);
    ck_assert_int_eq(upd(&o, &p, &g, &m, NULL, 0, 1), 0);
    ck_assert(fabsf(p - 0.949f) < 1e-6f && fabsf(m - 0.51f) < 1e-6f);
    o.t = 2;
    ck_assert_int_eq(upd(&o, &p, &g, &m, NULL, 0, 1), 0);
    ck_assert(fabsf(m - 0.96849f) < 1e-6f);
    ck_assert(fabsf(p - 0.852151f) < 1e-6f);
    /* momentum 0: plain SGD, the (poisoned) buffer is never read */
    float q = 1, mq = NAN;
    o = sgd_of(0.1f, 0.0f, 0.0f, false, 5);
    ck_assert_int_eq(upd(&o, &q, &g, &mq, NULL, 0, 1), 0);
    ck_assert(q == 1.0f - 0.1f * 0.5f);
    /* Nesterov (the tolerance: a few float roundings of values near 1) */
    p = 1;
    m = NAN;
    o = sgd_of(0.1f, 0.9f, 0.01f, true, 1);
    ck_assert_int_eq(upd(&o, &p, &g, &m, NULL, 0, 1), 0);
    ck_assert(fabsf(p - 0.9031f) < 1e-6f && fabsf(m - 0.51f) < 1e-6f);
    o.t = 2;
    ck_assert_int_eq(upd(&o, &p, &g, &m, NULL, 0, 1), 0);
    ck_assert(fabsf(m - 0.968031f) < 1e-6f);
    ck_assert_msg(fabsf(p - 0.76507411f) < 1e-6f, "p %.9g", (double)p);
}
END_TEST

/* AdamW by hand: p = 1, g = 0.5 then -0.25, lr 0.1, betas (0.9, 0.999),
 * eps 1e-8, wd 0.01 (as floats: 1 - 0.999f is 1.3e-5 off 0.001, so the
 * closed forms use the float values). Step 1: the bias-corrected m and v
 * are g and g^2, p = 1 * (1 - 0.001) - 0.1 * 0.5 / (0.5 + 1e-8) =
 * 0.899000002. Step 2: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
 * p = p (1 - lr wd) - lr / (1 - b1^2) * m / (sqrt(v / (1 - b2^2)) + eps).
 * The state outside [offset, offset + count) and the poisoned state at
 * step 1 are not read. Tolerance: relative 1e-6, a few float roundings. */
START_TEST(adamw_hand) {
    float p[3] = {7, 1, 7}, g[3] = {NAN, 0.5f, NAN}, m[3], v[3];
    memset(m, 0xFF, sizeof m);
    memset(v, 0xFF, sizeof v);
    vd_optim_step o = { .kind = VD_OPT_ADAMW, .lr = 0.1f, .weight_decay = 0.01f, .beta1 = 0.9f,
                        .beta2 = 0.999f, .eps = 1e-8f, .t = 1 };
    const double lr = 0.1f, wd = 0.01f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    ck_assert_int_eq(upd(&o, p, g, m, v, 1, 1), 0);
    double wp = 1 - lr * wd - lr * 0.5 / (0.5 + eps), wm = (1 - b1) * 0.5, wv = (1 - b2) * 0.25;
    ck_assert_msg(fabs(p[1] - wp) < 1e-6 * wp && fabs(wp - 0.899000002) < 1e-8, "p %.9g",
                  (double)p[1]);
    ck_assert(fabs(m[1] - wm) < 1e-6 * wm && fabs(v[1] - wv) < 1e-6 * wv);
    ck_assert(p[0] == 7 && p[2] == 7 && isnan(m[0]) && isnan(v[2]));
    g[1] = -0.25f;
    o.t = 2;
    ck_assert_int_eq(upd(&o, p, g, m, v, 1, 1), 0);
    wm = b1 * wm + (1 - b1) * -0.25;
    wv = b2 * wv + (1 - b2) * 0.0625;
    wp = wp * (1 - lr * wd) - lr / (1 - b1 * b1) * wm / (sqrt(wv / (1 - b2 * b2)) + eps);
    ck_assert_msg(fabs(p[1] - wp) < 1e-6 * wp, "p %.9g want %.9g", (double)p[1], wp);
    ck_assert(fabs(m[1] - wm) < 1e-6 * wm && fabs(v[1] - wv) < 1e-6 * wv);
    /* without exp_avg_sq: an internal error, nothing written */
    ck_assert_int_eq(upd(&o, p, g, m, NULL, 1, 1), VD_EINTERNAL);
}
END_TEST

static TCase *case_of(Suite *s, const TTest *t) { return t_case(s, t, setup, teardown); }

static Suite *suite(void) {
    Suite *s = suite_create("ops_backend");
    tcase_add_test(case_of(s, pool_and_host_memory), pool_and_host_memory);
    tcase_add_test(case_of(s, d2h_lazy_until_wait), d2h_lazy_until_wait);
    tcase_add_test(case_of(s, reuse_before_wait_is_visible), reuse_before_wait_is_visible);
    tcase_add_test(case_of(s, h2d_waits_on_d2h), h2d_waits_on_d2h);
    tcase_add_test(case_of(s, wait_runs_only_up_to_mark), wait_runs_only_up_to_mark);
    tcase_add_test(case_of(s, poison_and_zero), poison_and_zero);
    tcase_add_test(case_of(s, compute_copy_immediate_and_order), compute_copy_immediate_and_order);
    tcase_add_test(case_of(s, queue_growth), queue_growth);
    tcase_add_test(case_of(s, event_elapsed_and_errors), event_elapsed_and_errors);
    tcase_add_test(case_of(s, algos_and_aux), algos_and_aux);
    tcase_add_test(case_of(s, shape_check_runs_infer), shape_check_runs_infer);
    tcase_add_test(case_of(s, supports_op_checked_at_setup), supports_op_checked_at_setup);
    tcase_add_test(case_of(s, bwd_reads_from_table), bwd_reads_from_table);
    tcase_add_test(case_of(s, sgd_matches_torch), sgd_matches_torch);
    tcase_add_test(case_of(s, sgd_hand), sgd_hand);
    tcase_add_test(case_of(s, adamw_hand), adamw_hand);
    return s;
}

int main(void) {
    return vdt_run(suite());
}
