/* data_util.c — what the data set readers share: opening and reading their
 * files, the check of a data set's shape against the net, its normalisation
 * and scratch buffers. The readers
 * (mnist.c, cifar10.c, folder.c, image_check.c) call these and never data.c,
 * which dispatches to them: the calls run one way. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include "data/data_impl.h"

int vd_data_check_shape(const char *what, int c, int h, int w, int classes,
                        const vd_net *net, vd_err *e) {
    if (net->in_c != c || net->in_h != h || net->in_w != w)
        return vd_errf(e, VD_EUSAGE,
                       "%s has %dx%dx%d images (CxHxW) but net '%s' expects input "
                       "%dx%dx%d; use a net whose input: matches the data", what,
                       c, h, w, net->name, net->in_c, net->in_h, net->in_w);
    if (classes > net->classes)
        return vd_errf(e, VD_EUSAGE,
                       "%s has %d classes but net '%s' outputs only %d", what, classes,
                       net->name, net->classes);
    return VD_OK;
}

void vd_data_norm_get(const vd_net *net, int C, const float *dflt_mean, const float *dflt_std,
                      float *mean, float *std) {
    for (int c = 0; c < C; c++) {
        mean[c] = net->norm.n ? net->norm.mean[c] : dflt_mean[c];
        std[c] = net->norm.n ? net->norm.std[c] : dflt_std[c];
    }
}

int vd_data_grow(void **buf, size_t *cap, size_t n, vd_err *e) {
    if (*cap >= n) return VD_OK;
    vd_free(*buf);
    *cap = 0;
    *buf = vd_malloc(n, e);
    if (!*buf) return VD_ENOMEM;
    *cap = n;
    return VD_OK;
}

int vd_data_open_file(const char *path, uint64_t max, uint64_t *size, vd_err *e) {
    size_t len = strlen(path);
    if (len >= PATH_MAX)
        return -vd_errf(e, VD_EIO, "path too long (%zu bytes, the system's limit is %d): %s",
                        len, PATH_MAX - 1, path);
    return vd_open_regular(path, max, size, e);
}

int vd_data_pread(int fd, const char *path, void *buf, size_t n, uint64_t off, vd_err *e) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return vd_errf(e, VD_EIO, "%s: read error: %s", path, strerror(errno));
        if (r == 0)
            return vd_errf(e, VD_EDATA, "%s: the file ended at %llu bytes while being read (did "
                           "it change?)", path, (unsigned long long)(off + got));
        got += (size_t)r;
    }
    return VD_OK;
}
