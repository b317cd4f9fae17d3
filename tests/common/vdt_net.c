/* vdt_net.c — see vdt_net.h. */
#include "vdt_net.h"
#include <check.h>
#include <stdio.h>

void vdt_net_begin(vd_net *net, const char *name, int c, int h, int w, int batch) {
    vd_net_init(net);
    snprintf(net->name, sizeof net->name, "%s", name);
    net->in_c = c;
    net->in_h = h;
    net->in_w = w;
    net->classes = 1;
    net->train.batch = batch;
}

int vdt_add(vd_net *net, vd_layer l) {
    vd_err e = {0};
    snprintf(l.name, sizeof l.name, "l%d", net->n_layers);
    l.line = net->n_layers + 1;
    l.col = 1;
    int i = vd_net_add_layer(net, &l, &e);
    ck_assert_msg(i >= 0, "add layer: %s", e.msg);
    return i;
}

void vdt_finish(vd_net *net, int feeds) {
    vd_err e = {0};
    vd_layer loss = {0};
    loss.op = VD_OP_SOFTMAX_XENT;
    loss.n_in = 1;
    loss.in[0] = feeds;
    vdt_add(net, loss);
    net->classes = 1;
    int rc = vd_net_finalize(net, &e);
    if (rc) {
        int64_t numel = vd_net_out_numel(net, feeds);
        ck_assert_msg(numel > 0, "finalize: %s", e.msg);
        net->classes = (int)numel;
        rc = vd_net_finalize(net, &e);
    }
    ck_assert_msg(rc == 0, "finalize: %s", e.msg);
}

vd_layer vdt_conv(int in, int out, int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                  int groups, bool bias) {
    vd_layer l = {0};
    l.op = VD_OP_CONV;
    l.n_in = 1;
    l.in[0] = in;
    l.u.conv.out = out;
    l.u.conv.kh = kh; l.u.conv.kw = kw;
    l.u.conv.sh = sh; l.u.conv.sw = sw;
    l.u.conv.ph = ph; l.u.conv.pw = pw;
    l.u.conv.dh = dh; l.u.conv.dw = dw;
    l.u.conv.groups = groups;
    l.u.conv.bias = bias;
    return l;
}

vd_layer vdt_pool(int in, vd_pool_mode mode, int kh, int kw, int sh, int sw, int ph, int pw,
                  bool ceil_mode) {
    vd_layer l = {0};
    l.op = VD_OP_POOL;
    l.n_in = 1;
    l.in[0] = in;
    l.u.pool.mode = mode;
    l.u.pool.kh = kh; l.u.pool.kw = kw;
    l.u.pool.sh = sh; l.u.pool.sw = sw;
    l.u.pool.ph = ph; l.u.pool.pw = pw;
    l.u.pool.ceil_mode = ceil_mode;
    return l;
}

vd_layer vdt_adaptive(int in, vd_pool_mode mode, int oh, int ow, bool global) {
    vd_layer l = {0};
    l.op = VD_OP_POOL;
    l.n_in = 1;
    l.in[0] = in;
    l.u.pool.mode = mode;
    l.u.pool.global = global;
    l.u.pool.out_h = global ? 0 : oh;
    l.u.pool.out_w = global ? 0 : ow;
    return l;
}

vd_layer vdt_simple(int in, vd_op op) {
    vd_layer l = {0};
    l.op = op;
    l.n_in = 1;
    l.in[0] = in;
    if (op == VD_OP_BATCHNORM) { l.u.bn.eps = 1e-5f; l.u.bn.momentum = 0.1f; }
    if (op == VD_OP_DROPOUT) l.u.dropout.p = 0.5f;
    return l;
}

vd_layer vdt_multi(vd_op op, int n, const int *ins) {
    vd_layer l = {0};
    l.op = op;
    l.n_in = n;
    for (int k = 0; k < n; k++) l.in[k] = ins[k];
    return l;
}

void vdt_synth_batch(vd_synth_batch *b, int32_t *labels, const vd_net *net, uint64_t seed,
                     int split, int n, int64_t first) {
    *b = (vd_synth_batch){.seed = seed, .split = split, .classes = net->classes,
                          .sample_numel = vd_net_out_numel(net, -1), .channels = net->in_c,
                          .n = n, .index = b->index};
    for (int i = 0; i < n; i++) {
        b->index[i] = first + i;
        labels[i] = vd_synth_label(vd_synth_key(seed, split, b->index[i]), net->classes);
    }
}
