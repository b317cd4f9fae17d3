/* vdt.h — helpers shared by the Check tests of every area: the suite runner
 * (one-TCase main), temporary directories, reading whole files, running a
 * CLI binary and capturing its output and exit status. All helpers fail the
 * current test (ck_assert) on any setup error instead of returning one. */
#ifndef VD_TESTS_COMMON_VDT_H
#define VD_TESTS_COMMON_VDT_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

/* Runs s (CK_NORMAL; CK_FORK etc. from the environment) and frees the runner.
 * Returns 0 when every test passed, else 1 (a process exit status). */
int vdt_run(Suite *s);

/* Suite `name` with one TCase `name` holding tests[0..n-1] (timeout_s > 0
 * sets the TCase timeout, 0 keeps Check's default); runs it as vdt_run. */
int vdt_run_tests(const char *name, double timeout_s, const TTest *const *tests, size_t n);

/* main() of a test binary whose suite is one TCase:
 *   VDT_MAIN("lr", 0, fixed_and_step, multistep)
 * NAME is the suite and TCase name, TIMEOUT as in vdt_run_tests, then the
 * START_TEST names. */
#define VDT_MAIN(NAME, TIMEOUT, ...)                                              \
    int main(void) {                                                              \
        const TTest *const vdt_tests_[] = { __VA_ARGS__ };                        \
        return vdt_run_tests(NAME, TIMEOUT, vdt_tests_,                           \
                             sizeof vdt_tests_ / sizeof vdt_tests_[0]);           \
    }

/* A fresh empty directory "/tmp/<prefix>-XXXXXX" (path: release with vd_free). */
char *vdt_tmpdir(const char *prefix);
/* rm -rf dir; KEEP set in the environment keeps it (for debugging). */
void vdt_rmrf(const char *dir);
/* Whole file (vd_read_file's: NUL-terminated, release with vd_free); size in *n. Fails
 * the test with vd_read_file's message when it cannot be read. */
char *vdt_slurp(const char *path, size_t *n);
/* Fails the test unless files a and b hold the same bytes. */
void vdt_assert_same_file(const char *a, const char *b);

/* Runs "'bin' args" through the shell and returns its exit status (fails the
 * test unless it exited normally). If out, its output is returned in *out
 * (release with vd_free): with merged, stdout and stderr interleaved as written (2>&1);
 * otherwise all of stdout followed by all of stderr. */
int vdt_run_bin(const char *bin, const char *args, bool merged, char **out);

#endif
