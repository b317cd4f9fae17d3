/* mnist.c — MNIST in IDX format (uncompressed; .gz is not read).
 *
 * Files: DIR/train-images-idx3-ubyte, DIR/train-labels-idx1-ubyte,
 *        DIR/t10k-images-idx3-ubyte,  DIR/t10k-labels-idx1-ubyte.
 * IDX: big-endian magic 0x00000803 (u8, 3 dims) / 0x00000801 (u8, 1 dim),
 * then the dims as big-endian u32, then the bytes. Every size is checked
 * against the file length exactly, from the header alone, before any data
 * is read (a huge file with a bad header costs a few bytes of reading);
 * labels must be 0..9. Paths are built whole (vd_strfmt); one longer than
 * PATH_MAX is VD_EIO naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "data/data_impl.h"

typedef struct mnist {
    uint8_t *img[2];            /* [n * rows * cols] per split */
    uint8_t *lab[2];            /* [n] */
    int rows, cols;
    float mean, std;            /* the normalisation (vd_data_norm_get) */
} mnist;

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* An IDX file whose header was checked against its size: the open file
 * and its dimensions; nothing past the header is read yet. */
typedef struct idx {
    int fd;                     /* -1: not open */
    uint32_t dims[3];
    uint64_t size;              /* of the file: header + the data it declares */
} idx;

/* Open the IDX file at path and check, from its first 4 + 4 * want_dims
 * bytes, its magic (u8 data, want_dims dimensions) and that the data it
 * declares fills the rest of the file exactly: a bad or huge file is
 * answered before its data is read. */
static int idx_open(const char *path, int want_dims, idx *x, vd_err *e) {
    x->fd = -1;
    int fd = vd_data_open_file(path, UINT64_MAX, &x->size, e);
    if (fd < 0) {
        if (-fd == VD_EIO && e) {
            char msg[sizeof e->msg];
            snprintf(msg, sizeof msg, "%s", e->msg);
            return vd_errf(e, VD_EIO, "MNIST: %s (mnist:DIR needs the four uncompressed IDX "
                           "files; tools/get-mnist DIR writes them)", msg);
        }
        return -fd;
    }
    unsigned char p[16];
    size_t hdr = 4 + 4 * (size_t)want_dims;
    int rc = VD_OK;
    if (x->size < hdr) {
        rc = vd_errf(e, VD_EDATA, "%s: truncated IDX file (%llu bytes, header needs %zu)", path,
                     (unsigned long long)x->size, hdr);
        goto fail;
    }
    if ((rc = vd_data_pread(fd, path, p, hdr, 0, e))) goto fail;
    uint32_t magic = be32(p);
    uint32_t want_magic = 0x00000800u | (uint32_t)want_dims;
    if (magic != want_magic) {
        rc = vd_errf(e, VD_EDATA, "%s: not an IDX %s file (magic 0x%08x, expected 0x%08x)%s",
                     path, want_dims == 3 ? "image" : "label", magic, want_magic,
                     (p[0] == 0x1f && p[1] == 0x8b) ? "; it is gzip-compressed: "
                     "gunzip it first" : "");
        goto fail;
    }
    uint64_t total = 1;
    for (int i = 0; i < want_dims; i++) {
        x->dims[i] = be32(p + 4 + 4 * i);
        if (x->dims[i] == 0 || !vd_mul_u64(total, x->dims[i], &total)) {
            rc = vd_errf(e, VD_EDATA, "%s: bad IDX dimension %d (%u)", path, i, x->dims[i]);
            goto fail;
        }
    }
    if (x->size - hdr != total) {
        rc = vd_errf(e, VD_EDATA, "%s: %s IDX file: header promises %llu data bytes, file "
                     "has %llu", path, x->size - hdr < total ? "truncated" : "oversized",
                     (unsigned long long)total, (unsigned long long)(x->size - hdr));
        goto fail;
    }
    x->fd = fd;
    return VD_OK;
fail:
    close(fd);
    return rc;
}

/* The whole file of x (header included) into *raw (vd_free), closing x. */
static int idx_read(idx *x, const char *path, uint8_t **raw, vd_err *e) {
    int rc = VD_OK;
    *raw = x->size < SIZE_MAX ? vd_malloc((size_t)x->size, e) : NULL;
    if (!*raw) rc = x->size < SIZE_MAX ? VD_ENOMEM
                    : vd_errf(e, VD_ENOMEM, "%s: too large for memory", path);
    else if ((rc = vd_data_pread(x->fd, path, *raw, (size_t)x->size, 0, e)))
        VD_FREE(*raw);
    close(x->fd);
    x->fd = -1;
    return rc;
}

static void idx_close(idx *x) {
    if (x->fd >= 0) close(x->fd);
    x->fd = -1;
}

static int load_split(mnist *m, int split, const char *dir, const char *prefix, vd_err *e) {
    /* built whole (vd_strfmt): a cut path would name another file */
    char *ip = vd_strfmt(e, "%s/%s-images-idx3-ubyte", dir, prefix);
    char *lp = ip ? vd_strfmt(e, "%s/%s-labels-idx1-ubyte", dir, prefix) : NULL;
    idx xi = { .fd = -1 }, xl = { .fd = -1 };
    uint8_t *ri = NULL, *rl = NULL;
    int rc = !ip || !lp ? VD_ENOMEM : VD_OK;
    /* both headers before either file's data */
    if (!rc) rc = idx_open(ip, 3, &xi, e);
    if (!rc) rc = idx_open(lp, 1, &xl, e);
    if (rc) goto out;
    const uint32_t *di = xi.dims, *dl = xl.dims;
    if (di[0] != dl[0]) {
        rc = vd_errf(e, VD_EDATA, "%s: %u labels but %s has %u images", lp, dl[0], ip, di[0]);
        goto out;
    }
    if (m->rows && (m->rows != (int)di[1] || m->cols != (int)di[2])) {
        rc = vd_errf(e, VD_EDATA, "%s: images are %ux%u but the training images are %dx%d",
                     ip, di[1], di[2], m->rows, m->cols);
        goto out;
    }
    if (di[1] > 4096 || di[2] > 4096) {
        rc = vd_errf(e, VD_EDATA, "%s: implausible image size %ux%u", ip, di[1], di[2]);
        goto out;
    }
    if ((rc = idx_read(&xl, lp, &rl, e))) goto out;
    for (uint32_t i = 0; i < dl[0]; i++)
        if (rl[8 + i] > 9) {
            rc = vd_errf(e, VD_EDATA, "%s: label %u of sample %u is not a digit 0..9", lp,
                         rl[8 + i], i);
            goto out;
        }
    if ((rc = idx_read(&xi, ip, &ri, e))) goto out;
    m->rows = (int)di[1];
    m->cols = (int)di[2];
    /* Keep the raw buffers; the bodies start at fixed header offsets. */
    m->img[split] = ri;
    m->lab[split] = rl;
    ri = rl = NULL;
out:
    idx_close(&xi);
    idx_close(&xl);
    vd_free(ri);
    vd_free(rl);
    vd_free(ip);
    vd_free(lp);
    return rc;
}

static int mnist_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                        float *x, int32_t *label, vd_err *e) {
    (void)aug_key; (void)e;
    const mnist *m = ds->impl;
    int64_t px = (int64_t)m->rows * m->cols;
    const uint8_t *src = m->img[split] + 16 + index * px;
    for (int64_t i = 0; i < px; i++)
        x[i] = ((float)src[i] / 255.0f - m->mean) / m->std;
    *label = m->lab[split][8 + index];
    return VD_OK;
}

static void mnist_close(vd_dataset *ds) {
    mnist *m = ds->impl;
    if (!m) return;
    for (int s = 0; s < 2; s++) { vd_free(m->img[s]); vd_free(m->lab[s]); }
    VD_FREE(ds->impl);
}

int vd_data_open_mnist(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e) {
    mnist *m = vd_calloc(1, sizeof *m, e);
    if (!m) return VD_ENOMEM;
    ds->impl = m;
    ds->close = mnist_close;
    ds->sample = mnist_sample;
    int rc = load_split(m, VD_SPLIT_TRAIN, dir, "train", e);
    if (!rc) rc = load_split(m, VD_SPLIT_TEST, dir, "t10k", e);
    if (!rc) {
        char *what = vd_strfmt(e, "MNIST data in %s", dir);
        rc = what ? vd_data_check_shape(what, 1, m->rows, m->cols, 10, net, e) : VD_ENOMEM;
        vd_free(what);
    }
    if (rc) { mnist_close(ds); return rc; }
    static const float mean = 0.1307f, std = 0.3081f;   /* MNIST's own */
    vd_data_norm_get(net, 1, &mean, &std, &m->mean, &m->std);
    /* n comes from the label files (validated equal to the image counts) */
    uint32_t ntr = be32(m->lab[0] + 4), nte = be32(m->lab[1] + 4);
    ds->info.c = 1;
    ds->info.h = m->rows;
    ds->info.w = m->cols;
    ds->info.classes = 10;
    ds->info.n[VD_SPLIT_TRAIN] = ntr;
    ds->info.n[VD_SPLIT_TEST] = nte;
    snprintf(ds->info.desc, sizeof ds->info.desc, "mnist:%s (%u train, %u test)", dir, ntr, nte);
    return VD_OK;
}
