/* tutil.h — helpers shared by the tests in tests/train (header-only). */
#ifndef VD_TEST_TRAIN_TUTIL_H
#define VD_TEST_TRAIN_TUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "net/net.h"
#include "vdt.h"

static inline int tu_add(vd_net *net, const char *name, vd_op op, int in) {
    vd_layer l;
    memset(&l, 0, sizeof l);
    snprintf(l.name, sizeof l.name, "%s", name);
    l.op = op;
    l.n_in = 1;
    l.in[0] = in;
    l.line = l.col = 1;
    vd_err e;
    return vd_net_add_layer(net, &l, &e);
}

/* conv(4, 3x3, pad 1) [-> batchnorm] -> relu -> maxpool 2 -> flatten -> fc(classes)
 * -> loss, on c x h x w inputs. Names are torchvision-like. */
static inline void tu_tiny_net(vd_net *net, int c, int h, int w, int classes, bool bn, int batch) {
    vd_net_init(net);
    snprintf(net->name, sizeof net->name, "tiny");
    net->in_c = c; net->in_h = h; net->in_w = w; net->classes = classes;
    net->train.batch = batch;
    int i = tu_add(net, "features.0", VD_OP_CONV, -1);
    net->layers[i].u.conv.out = 4;
    net->layers[i].u.conv.kh = net->layers[i].u.conv.kw = 3;
    net->layers[i].u.conv.sh = net->layers[i].u.conv.sw = 1;
    net->layers[i].u.conv.ph = net->layers[i].u.conv.pw = 1;
    net->layers[i].u.conv.groups = 1;
    net->layers[i].u.conv.bias = !bn;
    if (bn) i = tu_add(net, "features.1", VD_OP_BATCHNORM, i);
    i = tu_add(net, "features.2", VD_OP_RELU, i);
    i = tu_add(net, "features.3", VD_OP_POOL, i);
    net->layers[i].u.pool.mode = VD_POOL_MAX;
    net->layers[i].u.pool.kh = net->layers[i].u.pool.kw = 2;
    i = tu_add(net, "flatten", VD_OP_FLATTEN, i);
    i = tu_add(net, "classifier", VD_OP_FC, i);
    net->layers[i].u.fc.out = classes;
    net->layers[i].u.fc.bias = true;
    tu_add(net, "loss", VD_OP_SOFTMAX_XENT, i);
    vd_err e;
    int rc = vd_net_finalize(net, &e);
    ck_assert_msg(rc == 0, "finalize: %s", e.msg);
}

/* "PATH.state" (the checkpoint's state file) into buf[n], which must hold it. */
static inline void tu_state_path(const char *path, char *buf, size_t n) {
    ck_assert_msg((size_t)snprintf(buf, n, "%s.state", path) < n, "%s.state: too long", path);
}

static inline void tu_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A PNG whose header (signature, IHDR: 4x4 RGB 8-bit) is good and whose
 * pixel data (IDAT) is not zlib: its header and CRCs check, its decoding
 * fails. */
static inline void tu_write_bad_png(const char *path) {
    static const unsigned char png[] = {
        0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A,
        0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 4, 0, 0, 0, 4, 8, 2, 0, 0, 0,
        0x26, 0x93, 0x09, 0x29,
        0, 0, 0, 4, 'I', 'D', 'A', 'T', 'j', 'u', 'n', 'k', 0xCD, 0x9C, 0xA4, 0x22,
        0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82 };
    tu_write(path, png, sizeof png);
}

/* A valid 4x4 RGB PNG (pixel (x, y) = 40 y + 10 x in every channel; made
 * with Python's zlib) or, bad_crc, the same with one bit of its IDAT
 * chunk's CRC flipped: lengths whole, header fine, the CRC check fails. */
enum { TU_PNG4_LEN = 114, TU_PNG4_IDAT_CRC = 98 };
static const unsigned char tu_png4[TU_PNG4_LEN] = {
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44,
    0x52, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x04, 0x08, 0x02, 0x00, 0x00, 0x00, 0x26,
    0x93, 0x09, 0x29, 0x00, 0x00, 0x00, 0x39, 0x49, 0x44, 0x41, 0x54, 0x78, 0xDA, 0x05, 0xC1,
    0x91, 0x02, 0x00, 0x30, 0x08, 0x05, 0xC0, 0xC7, 0x71, 0x1C, 0x8F, 0xE3, 0x78, 0x1C, 0xC7,
    0xE3, 0x38, 0x8E, 0xE3, 0xBE, 0x77, 0x77, 0x00, 0x40, 0x44, 0xCC, 0x2C, 0x22, 0x38, 0xE7,
    0xA8, 0xAA, 0x99, 0xDD, 0x7B, 0xE1, 0xEE, 0x11, 0xF1, 0xDE, 0xCB, 0x4C, 0x54, 0x55, 0x77,
    0xCF, 0xCC, 0xEE, 0x7E, 0xEC, 0xEC, 0x0E, 0x11, 0x60, 0x50, 0xC1, 0x19, 0x00, 0x00, 0x00,
    0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82 };
static inline void tu_write_png4(const char *path, bool bad_crc) {
    unsigned char b[TU_PNG4_LEN];
    memcpy(b, tu_png4, sizeof b);
    if (bad_crc) b[TU_PNG4_IDAT_CRC + 3] ^= 1;
    tu_write(path, b, sizeof b);
}

/* A folder data set with a train/ split only: dir/train/{a,b,c}, 30
 * side x side gray PGMs, image i (a, b, c in turn) of pixels 8 i + k (k the
 * pixel's index, mod 256): its first pixel tells which image it is. */
static inline void tu_class_folder(const char *dir, int side) {
    char p[1200];
    const char *dirs[] = { "train", "train/a", "train/b", "train/c" };
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, dirs[i]);
        ck_assert_int_eq(mkdir(p, 0755), 0);
    }
    size_t hdr = (size_t)snprintf(NULL, 0, "P5\n%d %d\n255\n", side, side), n = (size_t)(side * side);
    unsigned char *img = malloc(hdr + 1 + n);
    ck_assert(img);
    snprintf((char *)img, hdr + 1, "P5\n%d %d\n255\n", side, side);
    for (int i = 0; i < 30; i++) {
        snprintf(p, sizeof p, "%s/train/%c/%02d.pgm", dir, 'a' + i % 3, i);
        for (size_t k = 0; k < n; k++) img[hdr + k] = (unsigned char)(8 * i + (int)k);
        tu_write(p, img, hdr + n);
    }
    free(img);
}

#endif
