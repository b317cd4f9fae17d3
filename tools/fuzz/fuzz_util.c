/* fuzz_util.c — see fuzz_util.h. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "fuzz_util.h"

int fz_split(const uint8_t *data, size_t size, fz_part *parts, int max) {
    const size_t sl = sizeof FZ_SEP - 1;
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; n < max - 1 && i + sl <= size; i++)
        if (memcmp(data + i, FZ_SEP, sl) == 0) {
            parts[n].p = data + start;
            parts[n].n = i - start;
            n++;
            start = i + sl;
            i = start - 1;
        }
    parts[n].p = data + start;
    parts[n].n = size - start;
    return n + 1;
}

static char scratch[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

static void rm_scratch(void) {
    if (scratch[0]) nftw(scratch, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fz_scratch_dir(const char *tag) {
    if (!scratch[0]) {
        snprintf(scratch, sizeof scratch, "/tmp/fuzz_%s.XXXXXX", tag);
        fz_check(mkdtemp(scratch) != NULL, tag, "cannot make the scratch directory", NULL);
        atexit(rm_scratch);
    }
    return scratch;
}

void fz_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    fz_check(f != NULL, path, "cannot write an input file", NULL);
    fz_check(fwrite(data, 1, n, f) == n && fclose(f) == 0, path, "cannot write an input file",
             NULL);
}

void fz_mkdir(const char *path) {
    fz_check(mkdir(path, 0755) == 0 || errno == EEXIST, path, "cannot make a directory", NULL);
}

void fz_check(int cond, const char *target, const char *what, const vd_err *e) {
    if (!cond) {
        fprintf(stderr, "%s: contract broken: %s (%s)\n", target, what, e ? e->msg : "");
        abort();
    }
}
