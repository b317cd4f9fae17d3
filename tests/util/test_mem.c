/* test_mem.c — host memory counting of the allocation wrappers (util.h):
 * live and high-water bytes against malloc_usable_size, vd_free, vd_realloc,
 * and the tracked (pinned) buffers of the backends. Exact counts: this
 * process allocates nothing else through the wrappers while a test runs
 * (check runs each test in a forked child; CK_FORK=no runs them one after
 * another in one thread, which is just as quiet). */
#include <check.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include "util/util.h"
#include "backend/backend.h"
#include "config/config.h"
#include "data/data.h"
#include "exec/exec.h"
#include "plan/plan.h"
#include "profile/profile.h"
#include "spec/spec.h"
#include "train/ckpt.h"
#include "train/session.h"
#include "train/train.h"
#include "vdt.h"

START_TEST(wrappers_count_live_and_peak) {
    vd_err e = {0};
    vd_mem_stats s0, s;
    vd_mem_stats_get(&s0);
    char *a = vd_malloc(1000, &e);
    char *b = vd_calloc(10, 300, &e);
    ck_assert(a && b);
    uint64_t ua = malloc_usable_size(a), ub = malloc_usable_size(b);
    ck_assert_uint_ge(ua, 1000);
    ck_assert_uint_ge(ub, 3000);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live - s0.live, ua + ub);
    ck_assert_uint_ge(s.peak, s.live);
    uint64_t peak_ab = s.live;
    vd_free(a);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live - s0.live, ub);
    ck_assert_uint_ge(s.peak, peak_ab);            /* the peak stays */
    b = vd_realloc(b, 100000, &e);
    ck_assert(b);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live - s0.live, malloc_usable_size(b));
    ck_assert_uint_ge(s.peak - s0.live, malloc_usable_size(b));
    vd_free(b);
    vd_free(NULL);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live, s0.live);
}
END_TEST

START_TEST(tracked_buffers_count_until_untracked) {
    vd_mem_stats s0, s;
    vd_mem_stats_get(&s0);
    static char x[1], y[1];
    ck_assert(vd_mem_track(x, 5u << 20));
    ck_assert(vd_mem_track(y, 7));
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live - s0.live, (5u << 20) + 7);
    ck_assert_uint_eq(s.tracked - s0.tracked, (5u << 20) + 7);
    ck_assert_uint_ge(s.peak, s0.live + (5u << 20) + 7);
    vd_mem_untrack(x);
    vd_mem_untrack(x);                             /* unknown now: nothing */
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live - s0.live, 7);
    vd_mem_untrack(y);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live, s0.live);
    ck_assert_uint_eq(s.tracked, s0.tracked);
}
END_TEST

/* The CPU backend's host buffers (the executor's host store) are counted. */
START_TEST(cpu_host_alloc_is_tracked) {
    vd_err e = {0};
    vd_backend *be = NULL;
    ck_assert_int_eq(vd_backend_cpu_create(&be, &e), 0);
    vd_mem_stats s0, s;
    vd_mem_stats_get(&s0);
    void *p = NULL;
    ck_assert_int_eq(be->host_alloc(be, 123456, &p, &e), 0);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.tracked - s0.tracked, 123456);
    be->host_free(be, p);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.tracked, s0.tracked);
    be->destroy(be);
}
END_TEST

/* vdnn-train's path through the library on the CPU backend, then everything
 * released: spec, configuration, synthetic data (loader threads allocate
 * too), session with its profile saved (jansson allocates through the
 * wrappers) and loaded back, a policy-all plan (a pinned host store),
 * its JSON and trace, the executor, three training iterations with a
 * checkpoint, the checkpoint loaded back. Afterwards the live count must be
 * exactly where it started: a counted block released with plain free()
 * leaves it higher, a block uncounted twice (or one the wrappers never
 * counted, released with vd_free) lower. The guard block keeps the count
 * above 0, where the saturation at 0 cannot hide a subtraction too many. */
START_TEST(library_run_returns_to_the_start_exactly) {
    vd_err e = {0};
    char *guard = vd_malloc(4096, &e);
    ck_assert_ptr_nonnull(guard);
    vd_mem_stats s0, s;
    vd_mem_stats_get(&s0);
    ck_assert_uint_gt(s0.live, 0);

    char *dir = vdt_tmpdir("vd-mem");
    char spec[1100], prof[1100], ckpt[1100], trace[1100];
    snprintf(spec, sizeof spec, "%s/nets/lenet.yaml", getenv("VD_SRCDIR"));
    snprintf(prof, sizeof prof, "%s/profile.json", dir);
    snprintf(ckpt, sizeof ckpt, "%s/lenet.ckpt", dir);
    snprintf(trace, sizeof trace, "%s/trace.json", dir);
    vd_net net;
    vd_net_init(&net);
    ck_assert_msg(vd_spec_load(spec, &net, &e) == 0, "%s", e.msg);
    vd_config c;
    vd_config_init(&c);
    c.batch = 16;
    c.backend = "cpu";
    c.has_policy = true;
    c.policy = VD_POLICY_ALL;
    c.profile_out = prof;
    vd_config_run run;
    ck_assert_msg(vd_config_resolve(&c, &net, false, &run, &e) == 0, "%s", e.msg);
    vd_dataset *ds = NULL;
    ck_assert_msg(vd_data_open("synthetic:256,32", &net, run.batch, 1, false, &ds, &e) == 0,
                  "%s", e.msg);
    vd_session ses;
    ck_assert_msg(vd_session_open(&ses, &net, run.batch, &run.session, &e) == 0, "%s", e.msg);
    vd_config_budget(&run, &ses, NULL);
    vd_plan plan;
    ck_assert_msg(vd_session_plan(&ses, &run.plan, &plan, &e) == 0, "%s", e.msg);
    ck_assert_uint_gt(plan.host_bytes, 0);
    char *js = NULL;
    size_t jn = 0;
    FILE *f = open_memstream(&js, &jn);
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(vd_plan_write_json(f, &plan, &net, NULL, &e) == 0, "%s", e.msg);
    fclose(f);
    free(js);                        /* open_memstream's buffer: libc's, not counted */
    ck_assert_msg(vd_plan_write_trace(trace, &plan, &net, &ses.prof, &e) == 0, "%s", e.msg);
    vd_exec *ex = NULL;
    ck_assert_msg(vd_session_exec(&ses, &plan, false, &ex, &e) == 0, "%s", e.msg);
    vd_train_opts to = {
        .iters = 3, .save_path = ckpt, .eval_at_end = true, .log_every = 1,
        .loader_threads = 2, .data_spec = "synthetic:256,32",
    };
    vd_train_result res;
    ck_assert_msg(vd_train_run(&net, ex, ds, &to, &res, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(res.iters_done, 3);
    vd_mem_stats_get(&s);
    ck_assert_uint_gt(s.live, s0.live);
    /* during training the host store, the training loop's parameters and
     * momentum (train.c) and the guard were live at once */
    uint64_t pbytes = (uint64_t)net.param_floats * sizeof(float);
    ck_assert_uint_ge(s.peak, s0.live + plan.host_bytes + 2 * pbytes);
    ck_assert_uint_ge(s.largest, plan.host_bytes);
    ck_assert_uint_ge(s.peak, s.largest);

    vd_profile p2;
    ck_assert_msg(vd_profile_load(prof, &net, run.batch, &p2, &e) == 0, "%s", e.msg);
    vd_profile_free(&p2);
    float *params = vd_malloc((size_t)pbytes, &e), *mom = vd_malloc((size_t)pbytes, &e);
    ck_assert(params && mom);
    vd_train_state st;
    ck_assert_msg(vd_ckpt_load(ckpt, &net, params, mom, &st, &e) == 0, "%s", e.msg);
    vd_free(params);
    vd_free(mom);

    vd_exec_destroy(&ex);
    vd_plan_free(&plan);
    vd_session_close(&ses);
    vd_data_close(&ds);
    vd_net_free(&net);
    vdt_rmrf(dir);
    vd_free(dir);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.live, s0.live);
    ck_assert_uint_eq(s.tracked, s0.tracked);
    vd_free(guard);
}
END_TEST

/* The largest block: the usable size of a wrapper block, the bytes of a
 * tracked one; never lowered. */
START_TEST(largest_block) {
    vd_err e = {0};
    vd_mem_stats s;
    char *a = vd_malloc(3 << 20, &e);
    ck_assert_ptr_nonnull(a);
    vd_mem_stats_get(&s);
    ck_assert_uint_ge(s.largest, malloc_usable_size(a));
    ck_assert_uint_ge(s.peak, s.largest);
    static char x[1];
    ck_assert(vd_mem_track(x, 64u << 20));
    vd_mem_stats_get(&s);
    ck_assert_uint_ge(s.largest, 64u << 20);
    uint64_t largest = s.largest;
    vd_mem_untrack(x);
    vd_free(a);
    vd_mem_stats_get(&s);
    ck_assert_uint_eq(s.largest, largest);
    ck_assert_uint_ge(s.peak, 64u << 20);
}
END_TEST

VDT_MAIN("mem", 0, wrappers_count_live_and_peak, tracked_buffers_count_until_untracked,
         cpu_host_alloc_is_tracked, library_run_returns_to_the_start_exactly, largest_block)
