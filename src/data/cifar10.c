/* cifar10.c — CIFAR-10, "binary version".
 *
 * Files: DIR/data_batch_1.bin .. data_batch_5.bin (train), DIR/test_batch.bin.
 * Each record is 3073 bytes: label (0..9), then 1024 R, 1024 G, 1024 B bytes
 * (32x32 row-major). A file must hold a whole number of records, 1 to
 * 10000 (the real files hold 10000 each), checked on its size before it is
 * read; labels must be 0..9. Paths are built whole (vd_strfmt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "data/data_impl.h"

/* MAX_RECORDS: what one batch file may hold (the real ones hold 10000) */
enum { REC = 3073, PIX = 1024, MAX_RECORDS = 10000 };

typedef struct cifar {
    uint8_t *rec[2];            /* [n * REC] per split */
    float mean[3], std[3];      /* the normalisation (vd_data_norm_get) */
} cifar;

/* Append the records of the batch file at path to *buf (*n records). Its
 * size is checked first (a whole number of records, 1 to MAX_RECORDS), and
 * its records are read straight into *buf. */
static int append_file(const char *path, uint8_t **buf, int64_t *n, vd_err *e) {
    uint64_t len;
    int fd = vd_data_open_file(path, (uint64_t)MAX_RECORDS * REC, &len, e);
    if (fd < 0) {
        if (-fd == VD_EIO && e) {
            char msg[sizeof e->msg];
            snprintf(msg, sizeof msg, "%s", e->msg);
            return vd_errf(e, VD_EIO, "CIFAR-10: %s (cifar10:DIR needs data_batch_1..5.bin and "
                           "test_batch.bin of the binary version)", msg);
        }
        if (-fd == VD_EDATA && e) /* vd_open_regular's "too large" */
            return vd_err_prefix(e, "not a CIFAR-10 batch (at most %d records of 3073 bytes)",
                                 MAX_RECORDS);
        return -fd;
    }
    if (len == 0 || len % REC != 0) {
        close(fd);
        return vd_errf(e, VD_EDATA, "%s: %llu bytes is not a whole number of 3073-byte "
                       "CIFAR-10 records (truncated or not the binary version?)", path,
                       (unsigned long long)len);
    }
    int64_t k = (int64_t)(len / REC);
    uint8_t *nb = vd_realloc(*buf, (size_t)(*n + k) * REC, e);
    if (!nb) { close(fd); return VD_ENOMEM; }
    *buf = nb;
    uint8_t *r = nb + (size_t)*n * REC;
    int rc = vd_data_pread(fd, path, r, (size_t)len, 0, e);
    close(fd);
    if (rc) return rc;
    for (int64_t i = 0; i < k; i++)
        if (r[i * REC] > 9)
            return vd_errf(e, VD_EDATA, "%s: record %lld has label %d (expected 0..9); "
                           "corrupt file?", path, (long long)i, r[i * REC]);
    *n += k;
    return VD_OK;
}

static int cifar_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                        float *x, int32_t *label, vd_err *e) {
    (void)aug_key; (void)e;
    const cifar *c = ds->impl;
    const uint8_t *r = c->rec[split] + index * REC;
    *label = r[0];
    for (int ch = 0; ch < 3; ch++)
        for (int i = 0; i < PIX; i++)
            x[ch * PIX + i] = ((float)r[1 + ch * PIX + i] / 255.0f - c->mean[ch]) / c->std[ch];
    return VD_OK;
}

static void cifar_close(vd_dataset *ds) {
    cifar *c = ds->impl;
    if (!c) return;
    vd_free(c->rec[0]);
    vd_free(c->rec[1]);
    VD_FREE(ds->impl);
}

int vd_data_open_cifar10(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e) {
    char *what = vd_strfmt(e, "CIFAR-10 data in %s", dir);
    if (!what) return VD_ENOMEM;
    int rc = vd_data_check_shape(what, 3, 32, 32, 10, net, e);
    vd_free(what);
    if (rc) return rc;
    cifar *c = vd_calloc(1, sizeof *c, e);
    if (!c) return VD_ENOMEM;
    ds->impl = c;
    ds->close = cifar_close;
    ds->sample = cifar_sample;
    for (int i = 1; i <= 6 && !rc; i++) {
        /* built whole: a cut path would name another file */
        char *path = i <= 5 ? vd_strfmt(e, "%s/data_batch_%d.bin", dir, i)
                            : vd_strfmt(e, "%s/test_batch.bin", dir);
        if (!path) { rc = VD_ENOMEM; break; }
        int sp = i <= 5 ? 0 : 1;
        rc = append_file(path, &c->rec[sp], &ds->info.n[sp], e);
        vd_free(path);
    }
    if (rc) { cifar_close(ds); return rc; }
    static const float mean[3] = { 0.4914f, 0.4822f, 0.4465f };   /* CIFAR-10's own */
    static const float std[3] = { 0.2470f, 0.2435f, 0.2616f };
    vd_data_norm_get(net, 3, mean, std, c->mean, c->std);
    ds->info.c = 3;
    ds->info.h = 32;
    ds->info.w = 32;
    ds->info.classes = 10;
    snprintf(ds->info.desc, sizeof ds->info.desc, "cifar10:%s (%lld train, %lld test)", dir,
             (long long)ds->info.n[0], (long long)ds->info.n[1]);
    return VD_OK;
}
