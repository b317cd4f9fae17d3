/* test_mem.c — host memory counting of the allocation wrappers (util.h):
 * live and high-water bytes against malloc_usable_size, vd_free, vd_realloc,
 * and the tracked (pinned) buffers of the backends. Exact counts: this
 * process allocates nothing else through the wrappers while a test runs
 * (check runs each test in a forked child; CK_FORK=no runs them one after
 * another in one thread, which is just as quiet). */
#include <check.h>
#include <malloc.h>
#include <stdlib.h>
#include "util/util.h"
#include "backend/backend.h"
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

VDT_MAIN("mem", 0, wrappers_count_live_and_peak, tracked_buffers_count_until_untracked,
         cpu_host_alloc_is_tracked)
