/* test_alias.c — gradient aliasing through adds and in-place ReLUs: an add's
 * input whose gradient the add writes first shares the add's dy tensor (the
 * add's backward then writes nothing for it), where that is safe; where it is
 * not (the add's other branch reads the shared tensor while an input's other
 * consumer would write it, the same input twice) each keeps its own tensor.
 * An in-place ReLU after a batch norm (vd_op_info.bwd_takes_relu) gives the
 * batch norm's gradient its dy tensor (dx == dy), but where its input has
 * another consumer (not in place) or a sibling would read the rewritten
 * tensor; a ReLU after another op keeps its input's gradient apart.
 * Plans on small nets (tensor ids, dx, dx_beta), the symbolic gradient flow
 * (check_grad_flow) on them and on random DAGs of adds, one training step of
 * the executor against a reference that runs the CPU backend's ops with one
 * gradient buffer per layer output (byte identity), and ResNet-50's gradient
 * tensors and budgets. */
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "testnets.h"
#include "exec_util.h"
#include "plan_common.h"
#include "vdt.h"

/* ---- nets ---------------------------------------------------------------- */

/* a = add(u, v) where v = conv(u): u's gradient can be a's dy tensor (v adds
 * its contribution after a and v have read it), v's cannot (v would read
 * the shared tensor as dy and write u's gradient into it). */
static void net_branch_reads_input(vd_net *net, int batch) {
    tn_begin(net, "branch-reads-input", 2, 5, 5, 3, batch);
    int u = tn_conv(net, "u", -1, 4, 3, 1, 1);
    int v = tn_conv(net, "v", u, 4, 3, 1, 1);
    int a = tn_join(net, "a", VD_OP_ADD, u, v);
    int f = tn_fc(net, "fc", a, 3);
    tn_loss(net, f);
    tn_finish(net);
}

/* f = add(e, a), e = add(cu, cv), a = add(u, v), cu = conv(u), cv = conv(v):
 * one tensor for f, e, a, cu and cv (a chain of adds); not for u and v,
 * whose other consumers (cu, cv) read the shared tensor between a's read
 * and u's (v's). */
static void net_cousins(vd_net *net, int batch) {
    tn_begin(net, "cousins", 2, 5, 5, 3, batch);
    int x = tn_conv(net, "x", -1, 4, 3, 1, 1);
    int u = tn_conv(net, "u", x, 4, 3, 1, 1);
    int v = tn_conv(net, "v", x, 4, 1, 1, 0);
    int cu = tn_conv(net, "cu", u, 4, 3, 1, 1);
    int cv = tn_conv(net, "cv", v, 4, 1, 1, 0);
    int a = tn_join(net, "a", VD_OP_ADD, u, v);
    int e = tn_join(net, "e", VD_OP_ADD, cu, cv);
    int f = tn_join(net, "f", VD_OP_ADD, e, a);
    int g = tn_fc(net, "fc", f, 3);
    tn_loss(net, g);
    tn_finish(net);
}

/* s2 = add(s1, c), c = conv(s1), s1 = add(u, v): s1, u and v share s2's
 * tensor (a chain of adds, s1 with a second consumer); c keeps its own. */
static void net_chain(vd_net *net, int batch) {
    tn_begin(net, "chain", 2, 5, 5, 3, batch);
    int u = tn_conv(net, "u", -1, 4, 3, 1, 1);
    int v = tn_conv(net, "v", -1, 4, 1, 1, 0);
    int s1 = tn_join(net, "s1", VD_OP_ADD, u, v);
    int c = tn_conv(net, "c", s1, 4, 3, 1, 1);
    int s2 = tn_join(net, "s2", VD_OP_ADD, s1, c);
    int f = tn_fc(net, "fc", s2, 3);
    tn_loss(net, f);
    tn_finish(net);
}

/* add(r, r): the same input twice is never aliased (the add writes its
 * gradient, beta 0 then 1). */
static void net_twice(vd_net *net, int batch) {
    tn_begin(net, "twice", 2, 5, 5, 3, batch);
    int a = tn_conv(net, "a", -1, 3, 3, 1, 1);
    int r = tn_relu(net, "r", a);
    int s = tn_join(net, "s", VD_OP_ADD, r, r);
    int f = tn_fc(net, "fc", s, 3);
    tn_loss(net, f);
    tn_finish(net);
}

/* In-place ReLUs after batch norms (ru, rc, rq), one not in place (rv) and
 * one after a conv (rz):
 *   u = conv(x), bu = bn(u), ru = relu(bu), v = conv(ru), bv = bn(v),
 *   rv = relu(bv), w = conv(bv), z = conv(ru), rz = relu(z), c = conv(ru),
 *   bc = bn(c), rc = relu(bc), s = add(rc, rz), t = add(rv, w),
 *   q = add(s, t), bq = bn(q), rq = relu(bq), fc, loss.
 * bq shares rq's tensor, bu ru's; q's own tensor passes through the adds to
 * s, t, rc, rz, rv and w; rv's input bv has two consumers (rv is not in
 * place: it adds to w's write, beta 1); rc keeps bc's gradient apart, as rz,
 * rv and w (below rc, outside its subtree) read the tensor after rc would
 * have rewritten it; rz's input z keeps its own (a conv takes no ReLU). */
static void net_relu_cases(vd_net *net, int batch) {
    tn_begin(net, "relu-cases", 2, 5, 5, 3, batch);
    int u = tn_conv(net, "u", -1, 3, 3, 1, 1);
    int bu = tn_bn(net, "bu", u);
    int ru = tn_relu(net, "ru", bu);
    int v = tn_conv(net, "v", ru, 3, 3, 1, 1);
    int bv = tn_bn(net, "bv", v);
    int rv = tn_relu(net, "rv", bv);
    int w = tn_conv(net, "w", bv, 3, 1, 1, 0);
    int z = tn_conv(net, "z", ru, 3, 1, 1, 0);
    int rz = tn_relu(net, "rz", z);
    int c = tn_conv(net, "c", ru, 3, 3, 1, 1);
    int bc = tn_bn(net, "bc", c);
    int rc = tn_relu(net, "rc", bc);
    int s = tn_join(net, "s", VD_OP_ADD, rc, rz);
    int t = tn_join(net, "t", VD_OP_ADD, rv, w);
    int q = tn_join(net, "q", VD_OP_ADD, s, t);
    int bq = tn_bn(net, "bq", q);
    int rq = tn_relu(net, "rq", bq);
    int f = tn_fc(net, "fc", rq, 3);
    tn_loss(net, f);
    tn_finish(net);
}

typedef void (*net_fn)(vd_net *, int);

static int rnd(vd_rng *r, int lo, int hi) { return lo + (int)(vd_rng_u32(r) % (uint32_t)(hi - lo + 1)); }

/* A random DAG of same-shape tensors: convs (3x3 or 1x1), relus, batch
 * norms and adds of 2 or 3 earlier tensors (the same one twice allowed),
 * their inputs drawn from the last few layers or from all; the tensors
 * nothing reads are summed by final adds (at most 8 inputs each) before
 * fc -> loss. Chains of adds, inputs read again by a sibling's branch,
 * cousins, forks: every case the rule has to tell apart. */
static void random_add_net(vd_net *net, uint64_t seed, int batch) {
    vd_rng r;
    vd_rng_seed(&r, seed, 7);
    char name[32], ln[VD_NAME_MAX];
    snprintf(name, sizeof name, "adds%llu", (unsigned long long)seed);
    tn_begin(net, name, 2, 4, 4, 3, batch);
    const int C = 3;
    int used[64] = {0};
    int n = 0;
#define NM(s) (snprintf(ln, sizeof ln, "%s%d", s, n), ln)
#define PICK() (rnd(&r, 0, 1) ? n - 1 - rnd(&r, 0, n - 1 < 2 ? n - 1 : 2) : rnd(&r, 0, n - 1))
    n = tn_conv(net, NM("c"), -1, C, 3, 1, 1) + 1;
    int nl = rnd(&r, 5, 16);
    for (int j = 0; j < nl; j++) {
        int kind = rnd(&r, 0, 9), in = PICK(), id;
        if (kind <= 3) {
            vd_layer l = tn_layer(NM("add"), VD_OP_ADD, in);
            l.n_in = rnd(&r, 2, 3);
            for (int k = 1; k < l.n_in; k++) l.in[k] = PICK();
            for (int k = 0; k < l.n_in; k++) used[l.in[k]]++;
            id = tn_add(net, l);
        } else {
            used[in]++;
            if (kind <= 6) id = tn_conv(net, NM("c"), in, C, kind == 6 ? 1 : 3, 1, kind == 6 ? 0 : 1);
            else if (kind <= 8) id = tn_relu(net, NM("r"), in);
            else id = tn_bn(net, NM("bn"), in);
        }
        n = id + 1;
    }
    /* sum what nothing reads */
    for (;;) {
        vd_layer l = tn_layer(NM("sum"), VD_OP_ADD, -1);
        l.n_in = 0;
        for (int i = 0; i < n && l.n_in < VD_MAX_INPUTS; i++)
            if (!used[i]) { l.in[l.n_in++] = i; used[i]++; }
        if (l.n_in == 0) break;
        if (l.n_in == 1) { used[l.in[0]]--; break; }
        n = tn_add(net, l) + 1;
    }
#undef PICK
#undef NM
    int last = n - 1;
    ck_assert_int_eq(used[last], 0);
    int f = tn_fc(net, "fc", last, 3);
    tn_loss(net, f);
    tn_finish(net);
}

/* ---- plans --------------------------------------------------------------- */

static int count_dact(const vd_plan *p) {
    int n = 0;
    for (int t = 0; t < p->n_tensors; t++) n += p->tensors[t].kind == VD_T_DACT;
    return n;
}

/* Policy none with room to spare (a budget, so no fallback to unaliased
 * gradients for the placement's sake), analytic profile. */
static void plan_none(const vd_net *net, int batch, vd_plan *p) {
    vd_profile prof;
    analytic_profile(net, batch, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(batch, VD_POLICY_NONE);
    o.budget = 1ull << 30;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(net, &prof, &o, p, &e) == 0, "%s", e.msg);
    vd_profile_free(&prof);
}

/* The number of in-place ReLUs whose input gradient is their dy tensor. */
static int count_relu_shares(const vd_plan *p, const vd_net *net) {
    int n = 0;
    for (int i = 0; i < net->n_layers; i++) {
        const vd_plan_layer *pl = &p->layers[p->first_unit[i]];
        n += net->layers[i].op == VD_OP_RELU && pl->dy >= 0 && pl->dx[0] == pl->dy;
    }
    return n;
}

/* The small residual net of testnets.h: b1_add(b1_bn2, stem_relu) with
 * stem_relu also read by b1_conv1 (the fork), then a concat; its four ReLUs
 * run in place, two after a batch norm. */
START_TEST(test_alias_resnet) {
    vd_net net;
    tn_resnet(&net, 2);
    int L = net.n_layers;
    int stem_bn = 1, stem_relu = 2, b1_conv1 = 3, b1_bn1 = 4, b1_relu1 = 5, b1_bn2 = 7, add = 8,
        b1_relu = 9, pool = 10, br1 = 11, br2 = 12, br2_relu = 13, cat = 14;
    ck_assert_int_eq(net.layers[add].op, VD_OP_ADD);
    ck_assert_int_eq(net.layers[add].in[0], b1_bn2);
    ck_assert_int_eq(net.layers[add].in[1], stem_relu);
    ck_assert_int_eq(net.layers[cat].op, VD_OP_CONCAT);
    vd_plan p;
    plan_none(&net, 2, &p);
    /* one gradient tensor per layer output but the loss's (L - 1 = 17),
     * less the add's two inputs and the two batch norms' before a ReLU */
    ck_assert_int_eq(count_dact(&p), L - 1 - 2 - 2);
    ck_assert_int_eq(check_grad_flow(&p, &net), 2);
    ck_assert_int_eq(count_relu_shares(&p, &net), 2);
    /* one tensor from the add down: the add's inputs, and stem_relu's input
     * (stem_relu's other consumer, b1_conv1, adds to it after b1_bn2 has read
     * it); b1_relu, after an add, keeps the add's gradient apart */
    int s = p.layers[add].dy;
    ck_assert_int_ge(s, 0);
    ck_assert_str_eq(p.tensors[s].name, "b1_add:dy");
    ck_assert_int_eq(p.tensors[s].layer, add);
    ck_assert_int_ne(p.layers[b1_relu].dy, s);
    ck_assert_int_eq(p.layers[b1_bn2].dy, s);
    ck_assert_int_eq(p.layers[stem_relu].dy, s);
    ck_assert_int_eq(p.layers[stem_bn].dy, s);
    ck_assert_int_eq(p.layers[stem_relu].dx[0], s);
    ck_assert_int_eq(p.layers[b1_bn1].dy, p.layers[b1_relu1].dy);
    ck_assert_int_ne(p.layers[b1_relu1].dy, s);
    ck_assert_int_ne(p.layers[br2].dy, p.layers[br2_relu].dy);
    /* the add writes nothing */
    ck_assert_int_eq(p.layers[add].dx[0], -1);
    ck_assert_int_eq(p.layers[add].dx[1], -1);
    /* so the add's backward step costs nothing in the simulator */
    ck_assert(p.steps[2 * net.n_layers - 1 - add].kind == VD_STEP_BWD);
    ck_assert(p.steps[2 * net.n_layers - 1 - add].compute_s == 0.0);
    /* b1_relu rewrites it in place (beta 0), the fork's other consumer adds
     * to it (beta 1) */
    ck_assert_int_eq(p.layers[b1_relu].dx[0], s);
    ck_assert(p.layers[b1_relu].dx_beta[0] == 0.0f);
    ck_assert_int_eq(p.layers[b1_conv1].dx[0], s);
    ck_assert(p.layers[b1_conv1].dx_beta[0] == 1.0f);
    /* a concat passes slices: its inputs keep their tensors */
    ck_assert_int_eq(p.layers[cat].dx[0], p.layers[br1].dy);
    ck_assert_int_eq(p.layers[cat].dx[1], p.layers[br2_relu].dy);
    ck_assert_int_ne(p.layers[br1].dy, p.layers[cat].dy);
    ck_assert_int_ne(p.layers[br2_relu].dy, p.layers[cat].dy);
    /* pool feeds two convs: its own tensor, br2 first */
    ck_assert_int_eq(p.layers[br2].dx[0], p.layers[pool].dy);
    ck_assert(p.layers[br2].dx_beta[0] == 0.0f);
    ck_assert_int_eq(p.layers[br1].dx[0], p.layers[pool].dy);
    ck_assert(p.layers[br1].dx_beta[0] == 1.0f);
    /* the shared tensor lives from the add's consumer's backward to
     * stem_bn's */
    const vd_interval *iv = &p.intervals[p.tensors[s].iv[0]];
    ck_assert_int_eq(p.tensors[s].n_iv, 1);
    ck_assert_int_eq(iv->first, 2 * L - 1 - b1_relu);
    ck_assert_int_eq(iv->last, 2 * L - 1 - stem_bn);
    vd_plan_free(&p);
    vd_net_free(&net);
}
END_TEST

START_TEST(test_alias_unsafe) {
    vd_net net;
    vd_plan p;
    /* branch reads input: u (k 0) aliased, v (k 1) not */
    net_branch_reads_input(&net, 2);
    {
        int u = 0, v = 1, a = 2;
        plan_none(&net, 2, &p);
        ck_assert_int_eq(check_grad_flow(&p, &net), 1);
        int s = p.layers[a].dy;
        ck_assert_int_eq(p.layers[u].dy, s);
        ck_assert_int_eq(p.layers[a].dx[0], -1);
        ck_assert_int_ne(p.layers[v].dy, s);
        ck_assert_int_eq(p.layers[a].dx[1], p.layers[v].dy);
        ck_assert(p.layers[a].dx_beta[1] == 0.0f);
        ck_assert_int_eq(p.layers[v].dx[0], s);       /* v adds u's other contribution */
        ck_assert(p.layers[v].dx_beta[0] == 1.0f);
        ck_assert_int_eq(count_dact(&p), net.n_layers - 1 - 1);
        vd_plan_free(&p);
    }
    vd_net_free(&net);
    /* cousins: f, e, a, cu, cv share one tensor; u and v keep theirs */
    net_cousins(&net, 2);
    {
        int u = 1, v = 2, cu = 3, cv = 4, a = 5, e = 6, f = 7;
        plan_none(&net, 2, &p);
        ck_assert_int_eq(check_grad_flow(&p, &net), 4);
        int s = p.layers[f].dy;
        ck_assert_str_eq(p.tensors[s].name, "f:dy");
        ck_assert_int_eq(p.layers[e].dy, s);
        ck_assert_int_eq(p.layers[a].dy, s);
        ck_assert_int_eq(p.layers[cu].dy, s);
        ck_assert_int_eq(p.layers[cv].dy, s);
        ck_assert_int_ne(p.layers[u].dy, s);
        ck_assert_int_ne(p.layers[v].dy, s);
        ck_assert_int_ne(p.layers[u].dy, p.layers[v].dy);
        ck_assert_int_eq(p.layers[a].dx[0], p.layers[u].dy);
        ck_assert_int_eq(p.layers[a].dx[1], p.layers[v].dy);
        ck_assert(p.layers[a].dx_beta[0] == 0.0f && p.layers[a].dx_beta[1] == 0.0f);
        ck_assert_int_eq(p.layers[cu].dx[0], p.layers[u].dy);
        ck_assert(p.layers[cu].dx_beta[0] == 1.0f);
        for (int k = 0; k < 2; k++) {
            ck_assert_int_eq(p.layers[e].dx[k], -1);
            ck_assert_int_eq(p.layers[f].dx[k], -1);
        }
        ck_assert_int_eq(count_dact(&p), net.n_layers - 1 - 4);
        vd_plan_free(&p);
    }
    vd_net_free(&net);
    /* chain: s1, u, v in s2's tensor; c keeps its own */
    net_chain(&net, 2);
    {
        int u = 0, v = 1, s1 = 2, c = 3, s2 = 4;
        plan_none(&net, 2, &p);
        ck_assert_int_eq(check_grad_flow(&p, &net), 3);
        int s = p.layers[s2].dy;
        ck_assert_int_eq(p.layers[s1].dy, s);
        ck_assert_int_eq(p.layers[u].dy, s);
        ck_assert_int_eq(p.layers[v].dy, s);
        ck_assert_int_ne(p.layers[c].dy, s);
        ck_assert_int_eq(p.layers[s2].dx[0], -1);
        ck_assert_int_eq(p.layers[s2].dx[1], p.layers[c].dy);
        ck_assert_int_eq(p.layers[c].dx[0], s);
        ck_assert(p.layers[c].dx_beta[0] == 1.0f);
        ck_assert_int_eq(p.layers[s1].dx[0], -1);
        ck_assert_int_eq(p.layers[s1].dx[1], -1);
        vd_plan_free(&p);
    }
    vd_net_free(&net);
    /* the same input twice */
    net_twice(&net, 2);
    {
        int r = 1, s2 = 2;
        plan_none(&net, 2, &p);
        ck_assert_int_eq(check_grad_flow(&p, &net), 0);
        ck_assert_int_ne(p.layers[r].dy, p.layers[s2].dy);
        ck_assert_int_eq(p.layers[s2].dx[0], p.layers[r].dy);
        ck_assert_int_eq(p.layers[s2].dx[1], p.layers[r].dy);
        ck_assert(p.layers[s2].dx_beta[0] == 0.0f && p.layers[s2].dx_beta[1] == 1.0f);
        /* (r, after a conv, keeps a's gradient apart) */
        ck_assert_int_eq(count_dact(&p), net.n_layers - 1);
        ck_assert_int_ne(p.layers[r].dx[0], p.layers[r].dy);
        /* the add still copies into both: its whole profiled backward time */
        const vd_step *sb = &p.steps[2 * net.n_layers - 1 - s2];
        ck_assert(sb->kind == VD_STEP_BWD && sb->layer == s2);
        ck_assert(sb->compute_s > 0.0);
        vd_plan_free(&p);
    }
    vd_net_free(&net);
}
END_TEST

/* The ReLU cases (net_relu_cases): exact tensors, dx and dx_beta. */
START_TEST(test_alias_relu) {
    vd_net net;
    net_relu_cases(&net, 2);
    enum { u, bu, ru, v, bv, rv, w, z, rz, c, bc, rc, s, t, q, bq, rq, fc };
    vd_plan p;
    plan_none(&net, 2, &p);
    ck_assert(p.layers[ru].inplace && p.layers[rc].inplace && p.layers[rq].inplace &&
              p.layers[rz].inplace);
    ck_assert(!p.layers[rv].inplace);
    /* the adds' six inputs share q's tensor */
    ck_assert_int_eq(check_grad_flow(&p, &net), 6);
    ck_assert_int_eq(count_relu_shares(&p, &net), 2);
    /* 18 outputs but the loss's, less the six add inputs, bu and bq */
    ck_assert_int_eq(count_dact(&p), 18 - 6 - 2);
    /* a ReLU after a batch norm: bq's gradient is rq's dy tensor */
    int T = p.layers[rq].dy;
    ck_assert_str_eq(p.tensors[T].name, "rq:dy");
    ck_assert_int_eq(p.layers[bq].dy, T);
    ck_assert_int_eq(p.layers[rq].dx[0], T);
    ck_assert(p.layers[rq].dx_beta[0] == 0.0f);
    /* q keeps its own (bq writes it), and the adds pass it on */
    int Q = p.layers[q].dy;
    ck_assert_str_eq(p.tensors[Q].name, "q:dy");
    ck_assert_int_eq(p.layers[bq].dx[0], Q);
    for (int i = t; i >= rv; i--)
        if (i != c && i != bc && i != z)
            ck_assert_msg(p.layers[i].dy == Q, "%s", net.layers[i].name);
    for (int k = 0; k < 2; k++)
        ck_assert(p.layers[q].dx[k] == -1 && p.layers[s].dx[k] == -1 && p.layers[t].dx[k] == -1);
    /* after a conv: z keeps its own, rz writes it */
    ck_assert(p.layers[z].dy != Q && p.layers[z].dy != p.layers[rz].dy);
    ck_assert_int_eq(p.layers[rz].dx[0], p.layers[z].dy);
    /* ru in place after bu: bu's gradient is ru's dy tensor */
    int R = p.layers[ru].dy;
    ck_assert_str_eq(p.tensors[R].name, "ru:dy");
    ck_assert_int_eq(p.layers[bu].dy, R);
    ck_assert_int_eq(p.layers[ru].dx[0], R);
    ck_assert(p.layers[ru].dx_beta[0] == 0.0f);
    ck_assert(R != T && R != Q);
    /* bv read twice (rv not in place): bv's own tensor, w first, rv adds */
    int V = p.layers[bv].dy;
    ck_assert(V != T && V != R && V != Q);
    ck_assert_int_eq(p.layers[w].dx[0], V);
    ck_assert(p.layers[w].dx_beta[0] == 0.0f);
    ck_assert_int_eq(p.layers[rv].dx[0], V);
    ck_assert(p.layers[rv].dx_beta[0] == 1.0f);
    /* rc's rewrite would come before rz, rv and w read: bc's own tensor */
    int C = p.layers[bc].dy;
    ck_assert(C != T && C != R && C != V && C != Q);
    ck_assert_int_eq(p.layers[rc].dx[0], C);
    ck_assert(p.layers[rc].dx_beta[0] == 0.0f);
    /* rq:dy lives from fc's backward (its first write) to bq's (its last
     * read) */
    const vd_interval *iv = &p.intervals[p.tensors[T].iv[0]];
    ck_assert_int_eq(p.tensors[T].n_iv, 1);
    ck_assert_int_eq(iv->first, 2 * net.n_layers - 1 - fc);
    ck_assert_int_eq(iv->last, 2 * net.n_layers - 1 - bq);
    vd_plan_free(&p);
    vd_net_free(&net);
}
END_TEST

/* ---- training ------------------------------------------------------------ */

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* One training step without a plan: the CPU backend's ops on separate
 * buffers, one gradient buffer per layer output, the first backward writer
 * of each overwriting it (beta 0) and the later ones adding (beta 1), in
 * backward order. The parameters (seed 42), the batch (iteration 0) and the
 * options (min(fixed_algo, n - 1) per layer) are run_training's. grads
 * receives the parameter gradients, *loss the loss. */
static void reference_step(const vd_net *net, int batch, int fixed_algo, float *grads, float *loss) {
    vd_err e = {0};
    vd_backend *be = NULL;
    ck_assert(vd_backend_cpu_create(&be, &e) == 0);
    ck_assert_msg(be->layer_setup(be, net, batch, VD_MATH_FP32, true, &e) == 0, "%s", e.msg);
    int L = net->n_layers;
    float *params = malloc((size_t)net->param_floats * sizeof *params);
    float *x = malloc((size_t)batch * (size_t)vd_net_out_numel(net, -1) * sizeof *x);
    int32_t *lab = malloc((size_t)batch * sizeof *lab);
    float **y = calloc((size_t)L, sizeof *y), **dy = calloc((size_t)L, sizeof *dy);
    float **aux = calloc((size_t)L, sizeof *aux);
    void **ws = calloc((size_t)L, sizeof *ws);
    const vd_algo_opt **opt = calloc((size_t)L, sizeof *opt);
    int *algo = calloc((size_t)L, sizeof *algo);
    bool *written = calloc((size_t)L, sizeof *written);
    ck_assert(params && x && lab && y && dy && aux && ws && opt && algo && written);
    vd_net_init_params(net, params, 42);
    memset(grads, 0, (size_t)net->param_floats * sizeof *grads);
    fill_batch(net, batch, 0, x, lab);
    for (int i = 0; i < L; i++) {
        size_t n = (size_t)batch * (size_t)vd_net_out_numel(net, i);
        y[i] = malloc(n * sizeof(float));
        dy[i] = malloc(n * sizeof(float));
        uint64_t ab = be->layer_aux_bytes(net, i, batch);
        aux[i] = ab ? malloc(ab) : NULL;
        int na = 0;
        ck_assert(be->layer_algos(be, i, &opt[i], &na, &e) == 0);
        algo[i] = fixed_algo < na - 1 ? fixed_algo : na - 1;
        opt[i] += algo[i];
        uint64_t wb = vd_algo_ws(opt[i], false) > vd_algo_ws(opt[i], true)
                    ? vd_algo_ws(opt[i], false) : vd_algo_ws(opt[i], true);
        ws[i] = wb ? malloc(wb) : NULL;
        ck_assert(y[i] && dy[i] && (!ab || aux[i]) && (!wb || ws[i]));
    }
    for (int s = 0; s < 2 * L; s++) {
        bool bwd = s >= L;
        int i = bwd ? 2 * L - 1 - s : s;
        const vd_layer *l = &net->layers[i];
        vd_op_io io;
        memset(&io, 0, sizeof io);
        io.n = batch;
        io.seed = net->train.seed;
        io.iter = 0;
        io.training = true;
        io.algo = algo[i];
        for (int k = 0; k < l->n_in; k++) io.x[k] = l->in[k] < 0 ? x : y[l->in[k]];
        io.y = y[i];
        io.aux = aux[i];
        if (l->op == VD_OP_SOFTMAX_XENT) io.labels = lab;
        io.ws_bytes = vd_algo_ws(opt[i], bwd);
        io.ws = io.ws_bytes ? ws[i] : NULL;
        for (int k = 0; k < l->n_params; k++) {
            const vd_param *pr = &net->params[l->param_first + k];
            if (ends_with(pr->name, ".weight")) { io.w = params + pr->offset; if (bwd) io.dw = grads + pr->offset; }
            else if (ends_with(pr->name, ".bias")) { io.b = params + pr->offset; if (bwd) io.db = grads + pr->offset; }
            else if (ends_with(pr->name, ".running_mean")) io.rm = params + pr->offset;
            else if (ends_with(pr->name, ".running_var")) io.rv = params + pr->offset;
        }
        if (bwd) {
            if (l->op != VD_OP_SOFTMAX_XENT) io.dy = dy[i];
            for (int k = 0; k < l->n_in; k++) {
                int src = l->in[k];
                if (src < 0) continue;
                io.dx[k] = dy[src];
                io.dx_beta[k] = written[src] ? 1.0f : 0.0f;
                written[src] = true;
            }
        }
        int rc = bwd ? be->backward(be, net, i, &io, &e) : be->forward(be, net, i, &io, &e);
        ck_assert_msg(rc == 0, "%s %s: %s", bwd ? "backward" : "forward", l->name, e.msg);
    }
    *loss = aux[L - 1][0];
    for (int i = 0; i < L; i++) { free(y[i]); free(dy[i]); free(aux[i]); free(ws[i]); }
    free(y); free(dy); free(aux); free(ws); free(opt); free(algo); free(written);
    free(params); free(x); free(lab);
    be->destroy(be);
}

/* Add inputs the plan of run_training's configuration c aliases. */
static int plan_aliases(const vd_net *net, int batch, const run_cfg *c) {
    vd_profile prof;
    vd_backend *be = cpu_for_dev(net, batch, c->dev, &prof);
    vd_plan_opts o = plan_opts(batch, c->policy);
    o.budget = c->budget;
    o.fixed_algo = c->fixed_algo;
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    int n = check_grad_flow(&p, net);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    be->destroy(be);
    return n;
}

/* One training step of the executor under none (unbounded), all and auto
 * (slow link: recomputes) at their minimum budgets: with weight decay 0 the
 * momentum after SGD's first step is the gradient, which must be the
 * reference's byte for byte, and so must the loss. Returns the add inputs
 * aliased by the none plan. Frees net. */
static int train_net(vd_net *netp, int batch) {
    const int algo = 1;
    vd_net net = *netp;
    net.train.weight_decay = 0.0f;
    float *g = malloc((size_t)net.param_floats * sizeof *g);
    ck_assert_ptr_nonnull(g);
    float ref_loss;
    reference_step(&net, batch, algo, g, &ref_loss);
    static const vd_policy pols[] = {VD_POLICY_NONE, VD_POLICY_ALL, VD_POLICY_AUTO};
    int n_none = 0;
    for (size_t k = 0; k < VD_ARRAY_LEN(pols); k++) {
        run_cfg c = {.policy = pols[k], .iters = 1, .poison = true, .fixed_algo = algo,
                     .dev = pols[k] == VD_POLICY_AUTO ? &slow_link : NULL};
        if (pols[k] != VD_POLICY_NONE) {
            vd_plan_opts o = plan_opts(batch, pols[k]);
            o.fixed_algo = algo;
            c.budget = cpu_min_budget(&net, &o, c.dev);
        }
        int n = plan_aliases(&net, batch, &c);
        if (pols[k] == VD_POLICY_NONE) n_none = n;
        run_out o;
        run_training(&net, batch, &c, &o);
        ck_assert_msg(o.rc == 0, "%s %s: %s", net.name, vd_policy_name(pols[k]), o.msg);
        ck_assert_msg(memcmp(o.mom, g, (size_t)net.param_floats * sizeof *g) == 0,
                      "%s %s (%d aliased add inputs): gradients differ from the reference",
                      net.name, vd_policy_name(pols[k]), n);
        ck_assert_msg(memcmp(&o.loss[0], &ref_loss, sizeof ref_loss) == 0, "%s %s: loss %g vs %g",
                      net.name, vd_policy_name(pols[k]), (double)o.loss[0], (double)ref_loss);
        run_free(&o);
    }
    free(g);
    vd_net_free(&net);
    return n_none;
}

static int train_case(net_fn mk) {
    vd_net net;
    mk(&net, 3);
    return train_net(&net, 3);
}

START_TEST(test_alias_trains_like_reference) {
    ck_assert_int_eq(train_case(tn_resnet), 2);
    ck_assert_int_eq(train_case(net_branch_reads_input), 1);
    ck_assert_int_eq(train_case(net_cousins), 4);
    ck_assert_int_eq(train_case(net_chain), 3);
    ck_assert_int_eq(train_case(net_twice), 0);
    ck_assert_int_eq(train_case(net_relu_cases), 6);
}
END_TEST

/* Random add DAGs: every plan's backward reads its own gradients (the
 * symbolic flow), under every policy at its minimum budget too, and a third
 * of the nets train one step byte-identically to the reference. */
static void alias_random_dags(uint64_t first, uint64_t last) {
    int aliased = 0, kept = 0, trained = 0;
    for (uint64_t seed = first; seed <= last; seed++) {
        const int batch = 2;
        vd_net net;
        random_add_net(&net, seed, batch);
        vd_plan p;
        plan_none(&net, batch, &p);
        int n = check_grad_flow(&p, &net);
        aliased += n;
        for (int i = 0; i < net.n_layers; i++)
            if (net.layers[i].op == VD_OP_ADD)
                for (int k = 0; k < net.layers[i].n_in; k++) kept += p.layers[i].dx[k] >= 0;
        vd_plan_free(&p);
        vd_profile prof;
        analytic_profile(&net, batch, &vd_device_h200, &prof);
        for (int pol = 0; pol < VD_POLICY_COUNT; pol++) {
            vd_plan_opts o = plan_opts(batch, (vd_policy)pol);
            vd_err e = {0};
            ck_assert_msg(vd_plan_min_budget(&net, &prof, &o, &o.budget, &e) == 0, "%s", e.msg);
            ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s %s: %s", net.name,
                          vd_policy_name(o.policy), e.msg);
            check_grad_flow(&p, &net);
            vd_plan_free(&p);
        }
        vd_profile_free(&prof);
        if (seed % 3 == 0) { train_net(&net, batch); trained++; }
        else vd_net_free(&net);
    }
    printf("random add DAGs %d-%d: %d add inputs aliased, %d kept apart, %d nets trained\n",
           (int)first, (int)last, aliased, kept, trained);
    ck_assert_int_gt(aliased, 0);
    ck_assert_int_gt(kept, 0);
}

/* Seeds 1..24 in two tests that run in parallel (the second in suite seeds). */
START_TEST(test_alias_random_dags_1_6) { alias_random_dags(1, 6); }
END_TEST

START_TEST(test_alias_random_dags_7_24) { alias_random_dags(7, 24); }
END_TEST

/* ---- ResNet-50 ----------------------------------------------------------- */

/* nets/resnet50.yaml, batch 256, analytic H200 profile: its 16 adds share
 * their dy tensor with both inputs (32 fewer gradient tensors), its 33
 * in-place ReLUs after a batch norm theirs with the batch norm (33 fewer);
 * policy none's need stays (its peak is at the last block's ReLU after its
 * add, which keeps its tensors), and all fits budgets it did not before. */
START_TEST(test_alias_resnet50) {
    vd_net net;
    load_shipped_net(&net, "resnet50.yaml", 256);
    int L = net.n_layers, n_add = 0;
    for (int i = 0; i < L; i++) n_add += net.layers[i].op == VD_OP_ADD;
    ck_assert_int_eq(n_add, 16);
    vd_profile prof;
    analytic_profile(&net, 256, &vd_device_h200, &prof);
    vd_plan_opts o = plan_opts(256, VD_POLICY_NONE);
    vd_plan p;
    vd_err e = {0};
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(check_grad_flow(&p, &net), 2 * n_add);
    ck_assert_int_eq(count_relu_shares(&p, &net), 33);
    ck_assert_int_eq(count_dact(&p), L - 1 - 2 * n_add - 33);
    /* without the aliasing: peak (live) and high-water mark 22092749824 bytes */
    ck_assert_uint_le(p.live_peak, 22092749824ull);
    ck_assert_uint_le(p.hwm, 22092749824ull);
    vd_plan_free(&p);
    /* policy all at 3.5 GiB: without the aliasing its minimum is 3.92 GiB
     * (4212222976 bytes) */
    o.policy = VD_POLICY_ALL;
    o.budget = 3584ull << 20;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(check_grad_flow(&p, &net), 2 * n_add);
    vd_plan_free(&p);
    /* with the in-place flags a run sets (vd_schedule_inplace): the 16
     * ReLUs after the adds share too, and the layer right before each add,
     * a batch norm (12 bn3, 4 downsample.1), takes that ReLU's backward
     * (vd_plan_layer.takes_add_relu) where the batch norm + add fusion is
     * on (fuse_bn_add, as the CLI sets it in bf16, fp16 and tf32) */
    vd_schedule_inplace(&net);
    o.policy = VD_POLICY_NONE;
    o.budget = 0;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(count_relu_shares(&p, &net), 33);   /* without it: no pairs */
    for (int u = 0; u < p.n_units; u++) ck_assert(!p.layers[u].takes_add_relu);
    vd_plan_free(&p);
    o.fuse_bn_add = true;
    ck_assert_msg(vd_plan_build(&net, &prof, &o, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(check_grad_flow(&p, &net), 2 * n_add);
    ck_assert_int_eq(count_relu_shares(&p, &net), 33 + n_add);
    int n_bn3 = 0, n_ds = 0;
    for (int u = 0; u < p.n_units; u++) {
        if (!p.layers[u].takes_add_relu) continue;
        const char *nm = net.layers[p.layers[u].layer].name;
        size_t k = strlen(nm);
        n_bn3 += k > 4 && !strcmp(nm + k - 4, ".bn3");
        n_ds += k > 13 && !strcmp(nm + k - 13, ".downsample.1");
        ck_assert_int_eq(net.layers[p.layers[u].layer + 1].op, VD_OP_ADD);
    }
    ck_assert_int_eq(n_bn3, 12);
    ck_assert_int_eq(n_ds, 4);
    vd_plan_free(&p);
    vd_profile_free(&prof);
    vd_net_free(&net);
}
END_TEST

VDT_MAIN("alias", 300, test_alias_resnet, test_alias_unsafe, test_alias_relu,
         test_alias_trains_like_reference,
         test_alias_random_dags_1_6, test_alias_random_dags_7_24,
         test_alias_resnet50)
