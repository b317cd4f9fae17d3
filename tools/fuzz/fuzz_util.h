/* fuzz_util.h — shared by the file-reader fuzz targets: a private scratch
 * directory for the files they write, one input cut into several files
 * (fuzz_mnist, fuzz_cifar10), and the contract check. */
#ifndef VD_FUZZ_UTIL_H
#define VD_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include "util/util.h"

/* Where one input splits into files: FZ_SEP between the files' bytes. */
#define FZ_SEP "|FILE|"

typedef struct fz_part {
    const uint8_t *p;
    size_t n;
} fz_part;

/* Cut data[0..size) at each FZ_SEP into at most max parts (the last part
 * keeps any further separators). Returns the number of parts (>= 1). */
int fz_split(const uint8_t *data, size_t size, fz_part *parts, int max);

/* A directory of its own for this process, /tmp/fuzz_TAG.XXXXXX, made on
 * the first call and removed with its files at exit. */
const char *fz_scratch_dir(const char *tag);

/* Write n bytes to path (created or truncated); aborts when it cannot. */
void fz_write(const char *path, const void *data, size_t n);

/* mkdir that aborts on a failure other than EEXIST. */
void fz_mkdir(const char *path);

/* Abort with "TARGET: contract broken: WHAT (e->msg)" unless cond. */
void fz_check(int cond, const char *target, const char *what, const vd_err *e);

#endif
