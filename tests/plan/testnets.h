/* testnets.h — small nets built in C for the plan/exec tests. */
#ifndef VD_TESTNETS_H
#define VD_TESTNETS_H

#include <stdio.h>
#include <string.h>
#include <check.h>
#include "net/net.h"
#include "util/util.h"

static inline vd_layer tn_layer(const char *name, vd_op op, int in0) {
    vd_layer l;
    memset(&l, 0, sizeof l);
    snprintf(l.name, sizeof l.name, "%s", name);
    l.op = op;
    l.n_in = 1;
    l.in[0] = in0;
    return l;
}

static inline int tn_add(vd_net *net, vd_layer l) {
    vd_err e = {0};
    int i = vd_net_add_layer(net, &l, &e);
    ck_assert_msg(i >= 0, "%s", e.msg);
    return i;
}

static inline int tn_conv(vd_net *net, const char *name, int in, int out, int k, int s, int p) {
    vd_layer l = tn_layer(name, VD_OP_CONV, in);
    l.u.conv.out = out; l.u.conv.kh = l.u.conv.kw = k; l.u.conv.sh = l.u.conv.sw = s;
    l.u.conv.ph = l.u.conv.pw = p; l.u.conv.dh = l.u.conv.dw = 1; l.u.conv.groups = 1;
    l.u.conv.bias = true;
    return tn_add(net, l);
}
static inline int tn_relu(vd_net *net, const char *name, int in) {
    return tn_add(net, tn_layer(name, VD_OP_RELU, in));
}
static inline int tn_pool(vd_net *net, const char *name, int in, vd_pool_mode m, int k, int s) {
    vd_layer l = tn_layer(name, VD_OP_POOL, in);
    l.u.pool.mode = m; l.u.pool.kh = l.u.pool.kw = k; l.u.pool.sh = l.u.pool.sw = s;
    return tn_add(net, l);
}
static inline int tn_bn(vd_net *net, const char *name, int in) {
    vd_layer l = tn_layer(name, VD_OP_BATCHNORM, in);
    l.u.bn.eps = 1e-5f; l.u.bn.momentum = 0.1f;
    return tn_add(net, l);
}
static inline int tn_fc(vd_net *net, const char *name, int in, int out) {
    vd_layer l = tn_layer(name, VD_OP_FC, in);
    l.u.fc.out = out; l.u.fc.bias = true;
    return tn_add(net, l);
}
static inline int tn_dropout(vd_net *net, const char *name, int in, float p) {
    vd_layer l = tn_layer(name, VD_OP_DROPOUT, in);
    l.u.dropout.p = p;
    return tn_add(net, l);
}
static inline int tn_flatten(vd_net *net, const char *name, int in) {
    return tn_add(net, tn_layer(name, VD_OP_FLATTEN, in));
}
static inline int tn_join(vd_net *net, const char *name, vd_op op, int a, int b) {
    vd_layer l = tn_layer(name, op, a);
    l.n_in = 2; l.in[1] = b;
    return tn_add(net, l);
}
static inline int tn_loss(vd_net *net, int in) {
    return tn_add(net, tn_layer("loss", VD_OP_SOFTMAX_XENT, in));
}

static inline void tn_begin(vd_net *net, const char *name, int c, int h, int w, int classes, int batch) {
    vd_net_init(net);
    snprintf(net->name, sizeof net->name, "%s", name);
    net->in_c = c; net->in_h = h; net->in_w = w; net->classes = classes;
    net->train.batch = batch;
    net->train.lr = 0.05f;
    net->train.momentum = 0.9f;
    net->train.weight_decay = 5e-4f;
    net->train.seed = 7;
}

static inline void tn_finish(vd_net *net) {
    vd_err e = {0};
    int rc = vd_net_finalize(net, &e);
    ck_assert_msg(rc == 0, "finalize: %s", e.msg);
}

/* LeNet-5-ish on 1x28x28 (with dropout and both pool modes). */
static inline void tn_lenet(vd_net *net, int batch) {
    tn_begin(net, "lenet", 1, 28, 28, 10, batch);
    int x = tn_conv(net, "conv1", -1, 6, 5, 1, 2);
    x = tn_relu(net, "relu1", x);
    x = tn_pool(net, "pool1", x, VD_POOL_MAX, 2, 2);
    x = tn_conv(net, "conv2", x, 16, 5, 1, 0);
    x = tn_relu(net, "relu2", x);
    x = tn_pool(net, "pool2", x, VD_POOL_AVG, 2, 2);
    x = tn_flatten(net, "flatten", x);
    x = tn_fc(net, "fc1", x, 120);
    x = tn_relu(net, "relu3", x);
    x = tn_dropout(net, "drop", x, 0.25f);
    x = tn_fc(net, "fc2", x, 84);
    x = tn_relu(net, "relu4", x);
    x = tn_fc(net, "fc3", x, 10);
    tn_loss(net, x);
    tn_finish(net);
}

/* A small residual net with batch norm, an add join and a concat join. */
static inline void tn_resnet(vd_net *net, int batch) {
    tn_begin(net, "resnet-tiny", 3, 12, 12, 5, batch);
    int x = tn_conv(net, "stem", -1, 8, 3, 1, 1);
    x = tn_bn(net, "stem_bn", x);
    x = tn_relu(net, "stem_relu", x);
    int a = tn_conv(net, "b1_conv1", x, 8, 3, 1, 1);
    a = tn_bn(net, "b1_bn1", a);
    a = tn_relu(net, "b1_relu1", a);
    a = tn_conv(net, "b1_conv2", a, 8, 3, 1, 1);
    a = tn_bn(net, "b1_bn2", a);
    int s = tn_join(net, "b1_add", VD_OP_ADD, a, x);
    s = tn_relu(net, "b1_relu", s);
    int p = tn_pool(net, "pool", s, VD_POOL_MAX, 2, 2);
    int c1 = tn_conv(net, "br1", p, 4, 1, 1, 0);
    int c2 = tn_conv(net, "br2", p, 6, 3, 1, 1);
    c2 = tn_relu(net, "br2_relu", c2);
    int cc = tn_join(net, "cat", VD_OP_CONCAT, c1, c2);
    int g = tn_pool(net, "gap", cc, VD_POOL_AVG, 6, 6);
    int f = tn_fc(net, "fc", g, 5);
    tn_loss(net, f);
    tn_finish(net);
}

#endif
