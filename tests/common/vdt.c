/* vdt.c — see vdt.h. */
#include "vdt.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "util/util.h"

int vdt_run(Suite *s) {
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int nf = srunner_ntests_failed(r), nr = srunner_ntests_run(r);
    srunner_free(r);
    if (nr == 0) {   /* CK_RUN_CASE / CK_INCLUDE_TAGS naming no test: a stale name */
        fprintf(stderr, "no test selected (CK_RUN_SUITE, CK_RUN_CASE, CK_INCLUDE_TAGS)\n");
        return 1;
    }
    return nf ? 1 : 0;
}

int vdt_run_tests(const char *name, double timeout_s, const TTest *const *tests, size_t n) {
    Suite *s = suite_create(name);
    for (size_t i = 0; i < n; i++) tcase_add_test(vdt_case(s, tests[i], timeout_s), tests[i]);
    return vdt_run(s);
}

TCase *vdt_case(Suite *s, const TTest *t, double timeout_s) {
    TCase *c = tcase_create(t->name);
    tcase_set_tags(c, t->name);
    if (timeout_s > 0) tcase_set_timeout(c, timeout_s);
    suite_add_tcase(s, c);
    return c;
}

const char *vdt_tmp(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

char *vdt_tmpdir(const char *prefix) {
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/%s-XXXXXX", vdt_tmp(), prefix);
    char *d = vd_strdup(tmpl, NULL);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(mkdtemp(d));
    return d;
}

void vdt_rmrf(const char *dir) {
    if (getenv("KEEP")) return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

char *vdt_slurp(const char *path, size_t *n) {
    char *d;
    vd_err e;
    ck_assert_msg(vd_read_file(path, &d, n, &e) == 0, "%s", e.msg);
    return d;
}

void vdt_assert_same_file(const char *a, const char *b) {
    size_t na, nb;
    char *da = vdt_slurp(a, &na), *db = vdt_slurp(b, &nb);
    ck_assert_msg(na == nb && memcmp(da, db, na) == 0, "%s and %s differ", a, b);
    vd_free(da);
    vd_free(db);
}

static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* One split of vdt_make_mnist: DIR/PREFIX-images-idx3-ubyte and its labels. */
static void write_mnist_split(const char *dir, const char *prefix, uint32_t n) {
    const size_t px = 28 * 28;
    size_t isz = 16 + n * px, lsz = 8 + n;
    unsigned char *img = calloc(1, isz), *lab = calloc(1, lsz);
    ck_assert(img && lab);
    be32(img, 0x803); be32(img + 4, n); be32(img + 8, 28); be32(img + 12, 28);
    be32(lab, 0x801); be32(lab + 4, n);
    for (uint32_t i = 0; i < n; i++) {
        img[16 + i * px] = (unsigned char)i;
        img[16 + i * px + 1] = 255;
        lab[8 + i] = (unsigned char)(i % 10);
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", dir, prefix);
    write_file(p, img, isz);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", dir, prefix);
    write_file(p, lab, lsz);
    free(img);
    free(lab);
}

char *vdt_make_mnist(uint32_t ntr, uint32_t nte) {
    char *d = vdt_tmpdir("vdt-mnist");
    write_mnist_split(d, "train", ntr);
    write_mnist_split(d, "t10k", nte);
    return d;
}

int vdt_run_bin(const char *bin, const char *args, bool merged, char **out) {
    char cmd[4200], log[512], elog[512];
    snprintf(log, sizeof log, "%s/vdt-run-%ld.out", vdt_tmp(), (long)getpid());
    snprintf(elog, sizeof elog, "%s/vdt-run-%ld.err", vdt_tmp(), (long)getpid());
    if (merged) snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", bin, args, log);
    else snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", bin, args, log, elog);
    int st = system(cmd);
    ck_assert_msg(st != -1 && WIFEXITED(st), "cannot run %s", cmd);
    if (out) {
        size_t n1;
        *out = vdt_slurp(log, &n1);
        if (!merged) {
            size_t n2;
            char *o2 = vdt_slurp(elog, &n2);
            char *all = vd_malloc(n1 + n2 + 1, NULL);
            ck_assert_ptr_nonnull(all);
            memcpy(all, *out, n1);
            memcpy(all + n1, o2, n2 + 1);
            vd_free(*out);
            vd_free(o2);
            *out = all;
        }
    }
    unlink(log);
    if (!merged) unlink(elog);
    return WEXITSTATUS(st);
}

void vdt_fsize_limit(unsigned long long bytes) {
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
    rl.rlim_cur = bytes == RLIM_INFINITY || bytes > rl.rlim_max ? rl.rlim_max : (rlim_t)bytes;
    signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}
