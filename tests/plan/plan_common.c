/* plan_common.c — see plan_common.h. */
#include "plan_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include "vdt.h"
#include "spec/spec.h"
#include "util/util.h"

vd_backend *cpu_for_dev(const vd_net *net, int batch, const vd_device_params *dev, vd_profile *prof) {
    vd_err e = {0};
    vd_backend *be = NULL;
    ck_assert(vd_backend_cpu_create(&be, &e) == 0);
    ck_assert_msg(be->layer_setup(be, net, batch, net->train.math, true, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_profile_backend(net, batch, be, dev ? dev : &vd_device_cpu, prof, &e) == 0,
                  "%s", e.msg);
    return be;
}

uint64_t cpu_min_budget(const vd_net *net, const vd_plan_opts *o, const vd_device_params *dev) {
    vd_profile prof;
    vd_backend *be = cpu_for_dev(net, o->batch, dev, &prof);
    vd_err e = {0};
    uint64_t mb = 0;
    ck_assert_msg(vd_plan_min_budget(net, &prof, o, &mb, &e) == 0, "%s", e.msg);
    vd_profile_free(&prof);
    be->destroy(be);
    return mb;
}

void analytic_profile(const vd_net *net, int batch, const vd_device_params *dev, vd_profile *prof) {
    vd_err e = {0};
    ck_assert_msg(vd_profile_analytic(net, batch, dev, prof, &e) == 0, "%s", e.msg);
}

vd_plan_opts plan_opts(int batch, vd_policy policy) {
    vd_plan_opts o;
    vd_plan_opts_init(&o);
    o.batch = batch;
    o.policy = policy;
    return o;
}

void load_shipped_net(vd_net *net, const char *file, int batch) {
    const char *src = getenv("VD_SRCDIR");
    ck_assert_ptr_nonnull(src);
    char path[1024];
    snprintf(path, sizeof path, "%s/nets/%s", src, file);
    vd_net_init(net);
    vd_err e = {0};
    ck_assert_msg(vd_spec_load(path, net, &e) == 0, "%s", e.msg);
    net->train.batch = batch;
    ck_assert_msg(vd_net_finalize(net, &e) == 0, "%s", e.msg);
}

/* Expressions for check_grad_flow, interned: node k is (kind, a, b), kind 0
 * a term (layer a, input b), kind 1 the sum of expressions a and b. */
typedef struct gf_expr { int n, cap; int (*node)[3]; } gf_expr;

static int gf_intern(gf_expr *g, int kind, int a, int b) {
    for (int k = 0; k < g->n; k++)
        if (g->node[k][0] == kind && g->node[k][1] == a && g->node[k][2] == b) return k;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 256;
        g->node = realloc(g->node, (size_t)g->cap * sizeof *g->node);
        ck_assert_ptr_nonnull(g->node);
    }
    g->node[g->n][0] = kind; g->node[g->n][1] = a; g->node[g->n][2] = b;
    return g->n++;
}

int check_grad_flow(const vd_plan *p, const vd_net *net) {
    if (p->forward_only) return 0;
    int L = net->n_layers, n_alias = 0;
    gf_expr g = {0};
    int *ref = malloc((size_t)L * sizeof *ref);          /* per layer output, one tensor each */
    int *want = malloc((size_t)L * sizeof *want);        /* what layer i's backward reads */
    int *cell = malloc((size_t)p->n_tensors * sizeof *cell);
    ck_assert(ref && want && cell);
    for (int i = 0; i < L; i++) ref[i] = -1;
    for (int t = 0; t < p->n_tensors; t++) cell[t] = -1;
    for (int i = L - 1; i >= 0; i--) {
        const vd_layer *l = &net->layers[i];
        /* (a no_grad layer's output needs no gradient: --freeze) */
        want[i] = i == p->loss_layer || l->no_grad ? -1 : ref[i];
        if (i != p->loss_layer && !l->no_grad) ck_assert_int_ge(want[i], 0);   /* a consumer */
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k];
            if (src < 0 || net->layers[src].no_grad) continue;
            int c = l->op == VD_OP_ADD ? want[i] : gf_intern(&g, 0, i, k);
            ref[src] = ref[src] < 0 ? c : gf_intern(&g, 1, ref[src], c);
        }
    }
    /* The plan's side per unit, backward order, per sample: a split layer's
     * chunks read and write their slices of the whole-batch tensors, their
     * own tensors whole (vd_plan_operand); every chunk of a layer must see
     * the layer's gradient. */
    int B = p->batch;
    free(cell);
    cell = malloc((size_t)p->n_tensors * (size_t)B * sizeof *cell);
    ck_assert_ptr_nonnull(cell);
    for (int64_t q = 0; q < (int64_t)p->n_tensors * B; q++) cell[q] = -1;
    for (int u = p->n_units - 1; u >= 0; u--) {
        const vd_plan_layer *pl = &p->layers[u];
        int i = pl->layer;
        const vd_layer *l = &net->layers[i];
        int dy = pl->dy;
        if (i == p->loss_layer || l->no_grad) ck_assert_int_eq(dy, -1);
        else {
            ck_assert_int_ge(dy, 0);
            ck_assert_int_eq(p->tensors[dy].kind, VD_T_DACT);
            ck_assert_uint_eq(p->tensors[dy].bytes,
                              (uint64_t)p->tensors[dy].samples * (uint64_t)vd_net_out_numel(net, i) *
                                  vd_math_act_bytes(net->train.math));
        }
        /* the samples [s0, s0 + n) of tensor t that unit u touches */
#define SPAN(t, s0, n) do { s0 = p->tensors[t].samples == B ? pl->n0 : 0; n = pl->n; } while (0)
        int s0, n, got = -1;
        if (dy >= 0) {
            SPAN(dy, s0, n);
            got = cell[(int64_t)dy * B + s0];
            for (int q = s0; q < s0 + n; q++)
                ck_assert_msg(cell[(int64_t)dy * B + q] == got, "%s: '%s' reads a gradient whose "
                              "samples differ", net->name, l->name);
        }
        ck_assert_msg(got == want[i], "%s: the backward of '%s' reads a gradient other than its own "
                      "from '%s'", net->name, l->name, dy >= 0 ? p->tensors[dy].name : "-");
        for (int k = 0; k < l->n_in; k++) {
            int src = l->in[k], t = pl->dx[k];
            if (src < 0 || net->layers[src].no_grad) { ck_assert_int_eq(t, -1); continue; }
            if (t < 0) {   /* the add's dy tensor is the input's gradient: nothing to write */
                ck_assert_msg(l->op == VD_OP_ADD, "%s: '%s' writes no gradient for input %d",
                              net->name, l->name, k);
                ck_assert(pl->dx_beta[k] == 0.0f);
                n_alias += p->first_unit[i] == u;
                continue;
            }
            /* (but an in-place ReLU, beta 0: its op reads each element before it writes
             * it, and the tensor then holds its input's gradient) */
            ck_assert_msg(t != dy || (vd_op_table[l->op].bwd_inplace && pl->inplace &&
                                      pl->dx_beta[k] == 0.0f),
                          "%s: '%s' writes the tensor it reads as dy", net->name, l->name);
            ck_assert_int_eq(p->tensors[t].kind, VD_T_DACT);
            int c = l->op == VD_OP_ADD ? got : gf_intern(&g, 0, i, k);
            SPAN(t, s0, n);
            for (int q = s0; q < s0 + n; q++) {
                int *x = &cell[(int64_t)t * B + q];
                if (pl->dx_beta[k] == 0.0f) {
                    *x = c;
                } else {
                    ck_assert(pl->dx_beta[k] == 1.0f);
                    ck_assert_msg(*x >= 0, "%s: '%s' accumulates into unwritten '%s'", net->name,
                                  l->name, p->tensors[t].name);
                    *x = gf_intern(&g, 1, *x, c);
                }
            }
        }
#undef SPAN
    }
    free(ref); free(want); free(cell); free(g.node);
    return n_alias;
}

int run_cmd(const char *cmd, char *out, size_t n) {
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
