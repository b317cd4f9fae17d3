/* experiment: auto plan at a budget, then with its chunks and dispositions fixed, variants */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plan_common.h"
#include "plan/plan.h"
#include "plan/plan_internal.h"
#include "profile/profile.h"

static double build(vd_net *net, vd_profile *prof, uint64_t budget, const int *chunks, const vd_disp *disp, vd_plan *out) {
    vd_plan_opts o = plan_opts(256, VD_POLICY_AUTO);
    o.graph = VD_GRAPH_AUTO; o.budget = budget; o.chunks = chunks; o.disp = disp;
    vd_err e = {0};
    vd_plan p;
    int rc = vd_plan_build(net, prof, &o, &p, &e);
    if (rc) { printf("rc %d %s\n", rc, e.msg); return 0; }
    double t = p.feasible ? p.sim.iter_s * 1e3 : -1;
    if (out) *out = p; else vd_plan_free(&p);
    return t;
}

int main(int argc, char **argv) {
    vd_net net; vd_profile prof;
    load_shipped_net(&net, "vgg16.yaml", 256);
    net.train.math = VD_MATH_FP32;
    vd_err e = {0};
    if (vd_profile_load(argv[1], &net, 256, &prof, &e)) { printf("%s\n", e.msg); return 1; }
    vd_schedule_inplace(&net);
    uint64_t budget = strtoull(argv[2], NULL, 10);
    vd_plan p;
    double t0 = build(&net, &prof, budget, NULL, NULL, &p);
    int L = net.n_layers;
    int *ch = calloc(L, sizeof *ch);
    vd_disp *d = calloc(L + 1, sizeof *d);
    for (int i = 0; i < L; i++) ch[i] = p.layers[p.first_unit[i]].n_chunks;
    /* dispositions per layer output from the plan's tensors (first chunk's) */
    for (int t = 0; t < p.n_tensors; t++) {
        vd_tensor *T = &p.tensors[t];
        if (T->kind == VD_T_INPUT) d[0] = T->offload ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
        if (T->kind != VD_T_ACT || T->layer < 0) continue;
        if (p.layers[T->unit].chunk > 0) continue;
        d[T->layer + 1] = T->recompute ? VD_DISP_RECOMPUTE : T->offload ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
    }
    printf("auto %.3f ms; disp:", t0);
    for (int i = 0; i <= L; i++) printf(" %s%d", i ? net.layers[i-1].name : "x", d[i]);
    printf("\n");
    double tf = build(&net, &prof, budget, ch, d, NULL);
    printf("fixed chunks+disp: %.3f\n", tf);
    if (argc == 3) {   /* each recomputed map offloaded instead, options re-searched */
        for (int i = 1; i <= L; i++) {
            if (d[i] != VD_DISP_RECOMPUTE) continue;
            d[i] = VD_DISP_OFFLOAD;
            printf("%s rc->off: %.3f\n", net.layers[i-1].name, build(&net, &prof, budget, ch, d, NULL));
            d[i] = VD_DISP_RECOMPUTE;
        }
    }
    if (argc > 3) {   /* flips: LAYER=DISP ... then print both plans' options */
        for (int a = 3; a < argc; a++) {
            char nm[64]; int v; sscanf(argv[a], "%63[^=]=%d", nm, &v);
            d[vd_net_find(&net, nm) + 1] = v;
        }
        vd_plan q;
        double tq = build(&net, &prof, budget, ch, d, &q);
        printf("variant %.3f ms (compute %.3f stall %.3f)  base compute %.3f\n", tq, 1e3*q.sim.compute_s, 1e3*q.sim.stall_s, 1e3*p.sim.compute_s);
        for (int u = 0; u < p.n_units; u++) {
            if (p.layers[u].chunk > 0) continue;
            vd_plan_layer *a = &p.layers[u], *b = &q.layers[u];
            if (a->algo_fwd != b->algo_fwd || a->algo_bwd != b->algo_bwd)
                printf("  %s: fwd %d->%d bwd %d->%d (%s -> %s)\n", net.layers[a->layer].name, a->algo_fwd, b->algo_fwd, a->algo_bwd, b->algo_bwd, a->algo_bwd_label, b->algo_bwd_label);
        }
    }
    return 0;
}
