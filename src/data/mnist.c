/* mnist.c — MNIST in IDX format (uncompressed; .gz is not read).
 *
 * Files: DIR/train-images-idx3-ubyte, DIR/train-labels-idx1-ubyte,
 *        DIR/t10k-images-idx3-ubyte,  DIR/t10k-labels-idx1-ubyte.
 * IDX: big-endian magic 0x00000803 (u8, 3 dims) / 0x00000801 (u8, 1 dim),
 * then the dims as big-endian u32, then the bytes. Every size is checked
 * against the file length exactly; labels must be 0..9. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_impl.h"

typedef struct mnist {
    uint8_t *img[2];            /* [n * rows * cols] per split */
    uint8_t *lab[2];            /* [n] */
    int rows, cols;
} mnist;

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Read an IDX file; *body points into *raw (caller frees *raw). */
static int read_idx(const char *path, int want_dims, uint32_t dims[3], char **raw,
                    const unsigned char **body, vd_err *e) {
    size_t n;
    int rc = vd_read_file(path, raw, &n, e);
    if (rc == VD_EIO && e) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        return vd_errf(e, VD_EIO, "MNIST: %s (mnist:DIR needs the four uncompressed IDX "
                       "files; tools/get-mnist DIR writes them)", msg);
    }
    if (rc) return rc;
    const unsigned char *p = (const unsigned char *)*raw;
    size_t hdr = 4 + 4 * (size_t)want_dims;
    if (n < hdr) {
        rc = vd_errf(e, VD_EDATA, "%s: truncated IDX file (%zu bytes, header needs %zu)",
                     path, n, hdr);
        goto fail;
    }
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
        dims[i] = be32(p + 4 + 4 * i);
        if (dims[i] == 0 || !vd_mul_u64(total, dims[i], &total)) {
            rc = vd_errf(e, VD_EDATA, "%s: bad IDX dimension %d (%u)", path, i, dims[i]);
            goto fail;
        }
    }
    if ((uint64_t)(n - hdr) != total) {
        rc = vd_errf(e, VD_EDATA, "%s: %s IDX file: header promises %llu data bytes, file "
                     "has %zu", path, (uint64_t)(n - hdr) < total ? "truncated" : "oversized",
                     (unsigned long long)total, n - hdr);
        goto fail;
    }
    *body = p + hdr;
    return VD_OK;
fail:
    VD_FREE(*raw);
    return rc;
}

static int load_split(mnist *m, int split, const char *dir, const char *prefix, vd_err *e) {
    char ip[1100], lp[1100];
    snprintf(ip, sizeof ip, "%s/%s-images-idx3-ubyte", dir, prefix);
    snprintf(lp, sizeof lp, "%s/%s-labels-idx1-ubyte", dir, prefix);
    uint32_t di[3] = { 0 }, dl[3] = { 0 };
    char *ri = NULL, *rl = NULL;
    const unsigned char *bi = NULL, *bl = NULL;
    int rc = read_idx(ip, 3, di, &ri, &bi, e);
    if (rc) return rc;
    rc = read_idx(lp, 1, dl, &rl, &bl, e);
    if (rc) { vd_free(ri); return rc; }
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
    for (uint32_t i = 0; i < dl[0]; i++)
        if (bl[i] > 9) {
            rc = vd_errf(e, VD_EDATA, "%s: label %u of sample %u is not a digit 0..9", lp,
                         bl[i], i);
            goto out;
        }
    m->rows = (int)di[1];
    m->cols = (int)di[2];
    /* Keep the raw buffers; the bodies start at fixed header offsets. */
    m->img[split] = (uint8_t *)ri;
    m->lab[split] = (uint8_t *)rl;
    return VD_OK;
out:
    vd_free(ri);
    vd_free(rl);
    return rc;
}

static int mnist_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                        float *x, int32_t *label, vd_err *e) {
    (void)aug_key; (void)e;
    const mnist *m = ds->impl;
    int64_t px = (int64_t)m->rows * m->cols;
    const uint8_t *src = m->img[split] + 16 + index * px;
    for (int64_t i = 0; i < px; i++)
        x[i] = ((float)src[i] / 255.0f - 0.1307f) / 0.3081f;
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
        char what[700];
        snprintf(what, sizeof what, "MNIST data in %s", dir);
        rc = vd_data_check_shape(what, 1, m->rows, m->cols, 10, net, e);
    }
    if (rc) { mnist_close(ds); return rc; }
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
