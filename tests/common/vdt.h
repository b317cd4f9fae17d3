/* vdt.h — helpers shared by the Check tests of every area: the suite runner
 * (one TCase per test), temporary directories, reading whole files, running a
 * CLI binary and capturing its output and exit status. All helpers fail the
 * current test (ck_assert) on any setup error instead of returning one. */
#ifndef VD_TESTS_COMMON_VDT_H
#define VD_TESTS_COMMON_VDT_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Check's ck_assert_msg (which every ck_assert_* expands to) records each
 * passing assertion's file and line with a write() to its message file, so
 * that a test that crashes can name the last assertion it passed. The plan
 * tests assert inside loops over plan intervals and actions, millions of
 * times: those writes were a quarter of their CPU time (random nets 13-24:
 * 18.8 s -> 13.7 s). Here a passing assertion costs its comparison only; a
 * failing one is reported exactly as before (_ck_assert_failed: file, line,
 * expression, message). A crash is still reported as one, located by the
 * test's name (and by the sanitizers' stack trace in the ASan/UBSan run)
 * instead of by the last assertion passed. Include this header after (or
 * instead of) <check.h>. */
#undef ck_assert_msg
#define ck_assert_msg(expr, ...) \
    ((expr) ? (void)0 : _ck_assert_failed(__FILE__, __LINE__, "Assertion '" #expr "' failed", \
                                          ##__VA_ARGS__))

/* Runs s (CK_NORMAL; CK_FORK etc. from the environment) and frees the runner.
 * Returns 0 when every test passed, else 1 (a process exit status); also 1
 * when the environment selected no test at all. */
int vdt_run(Suite *s);

/* Suite `name` with one TCase per test in tests[0..n-1], named and tagged
 * after the test (timeout_s > 0 sets the TCase timeouts, 0 keeps Check's
 * default); runs it as vdt_run. The tags let a meson test run some of a
 * binary's tests (CK_INCLUDE_TAGS="a b") or all but some (CK_EXCLUDE_TAGS),
 * so that the slow ones run in parallel with the rest. */
int vdt_run_tests(const char *name, double timeout_s, const TTest *const *tests, size_t n);

/* A TCase named and tagged after test t, added to s (timeout_s as in
 * vdt_run_tests), for a suite that needs more than vdt_run_tests gives: the
 * caller adds t to it (tcase_add_test, or tcase_add_loop_test) and any
 * fixture. One TCase per test is what lets CK_RUN_CASE=NAME run one test. */
TCase *vdt_case(Suite *s, const TTest *t, double timeout_s);

/* main() of a test binary, one TCase per test:
 *   VDT_MAIN("lr", 0, fixed_and_step, multistep)
 * NAME is the suite name, TIMEOUT as in vdt_run_tests, then the START_TEST
 * names. */
#define VDT_MAIN(NAME, TIMEOUT, ...)                                              \
    int main(void) {                                                              \
        const TTest *const vdt_tests_[] = { __VA_ARGS__ };                        \
        return vdt_run_tests(NAME, TIMEOUT, vdt_tests_,                           \
                             sizeof vdt_tests_ / sizeof vdt_tests_[0]);           \
    }

/* The directory for temporary files: $TMPDIR, else /tmp. tests/meson.build
 * points TMPDIR at a tmpfs (/dev/shm) where there is one: the tests rewrite
 * files thousands of times (truncate + write), and on ext4 each such rewrite
 * is flushed to the disk on close (auto_da_alloc), seconds per test on a
 * busy disk; what the tests check (bytes, renames, error codes) is the same
 * on any file system. */
const char *vdt_tmp(void);
/* A fresh empty directory "<vdt_tmp()>/<prefix>-XXXXXX" (path: release with vd_free). */
char *vdt_tmpdir(const char *prefix);
/* rm -rf dir; KEEP set in the environment keeps it (for debugging). */
void vdt_rmrf(const char *dir);
/* Whole file (vd_read_file's: NUL-terminated, release with vd_free); size in *n. Fails
 * the test with vd_read_file's message when it cannot be read. */
char *vdt_slurp(const char *path, size_t *n);
/* Limit the size of the files this process writes to bytes (RLIMIT_FSIZE;
 * RLIM_INFINITY lifts it): a write beyond fails with EFBIG, as one on a
 * full disk fails with ENOSPC (SIGXFSZ is ignored). Child processes
 * inherit it. */
void vdt_fsize_limit(unsigned long long bytes);
/* Fails the test unless files a and b hold the same bytes. */
void vdt_assert_same_file(const char *a, const char *b);
/* A fresh directory (vdt_tmpdir; release with vd_free) holding an MNIST data
 * set in IDX files (vdnn-train --data mnist:DIR) of ntr train and nte test
 * 28x28 samples: sample i's pixel 0 holds i (mod 256), pixel 1 holds 255,
 * the rest 0; label i % 10. */
char *vdt_make_mnist(uint32_t ntr, uint32_t nte);

/* Runs "'bin' args" through the shell and returns its exit status (fails the
 * test unless it exited normally). If out, its output is returned in *out
 * (release with vd_free): with merged, stdout and stderr interleaved as written (2>&1);
 * otherwise all of stdout followed by all of stderr. */
int vdt_run_bin(const char *bin, const char *args, bool merged, char **out);

/* A float's bits and back (memcpy: no aliasing questions). */
static inline float vdt_f32_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static inline uint32_t vdt_bits_of(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

#endif
