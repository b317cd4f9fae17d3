/* tutil.h — helpers shared by the tests in tests/train (header-only). */
#ifndef VD_TEST_TRAIN_TUTIL_H
#define VD_TEST_TRAIN_TUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
 * pixel data (IDAT) is not zlib: its header reads, its decoding fails. */
static inline void tu_write_bad_png(const char *path) {
    static const unsigned char png[] = {
        0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A,
        0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 4, 0, 0, 0, 4, 8, 2, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 4, 'I', 'D', 'A', 'T', 'j', 'u', 'n', 'k', 0, 0, 0, 0,
        0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82 };
    tu_write(path, png, sizeof png);
}

#endif
