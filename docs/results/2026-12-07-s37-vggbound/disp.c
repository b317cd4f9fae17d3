/* experiment: auto's plan at a budget; then its split with the dispositions
 * given (LAYER=DISP, 1 keep 2 offload 3 recompute; "all=3" every
 * recomputable layer output; the rest as auto's), options searched again */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
    load_shipped_net(&net, getenv("NET") ? getenv("NET") : "vgg16.yaml", 256);
    net.train.math = getenv("BF16") ? VD_MATH_BF16 : VD_MATH_FP32;
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
    for (int t = 0; t < p.n_tensors; t++) {
        vd_tensor *T = &p.tensors[t];
        if (T->kind == VD_T_INPUT) d[0] = T->offload ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
        if (T->kind != VD_T_ACT || T->layer < 0) continue;
        if (p.layers[T->unit].chunk > 0) continue;
        d[T->layer + 1] = T->recompute ? VD_DISP_RECOMPUTE : T->offload ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
    }
    printf("auto %.3f ms (compute %.3f, rc %.3f); disp:", t0, p.sim.compute_s*1e3, 0.0);
    for (int i = 0; i <= L; i++) if (d[i]) printf(" %s=%d", i ? net.layers[i-1].name : "x", d[i]);
    printf("\n");
    if (argc > 3 && !strcmp(argv[3], "time")) {
        struct timespec ta, t1; vd_plan_bound bd;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ta);
        for (int k = 0; k < 5; k++) vd_plan_copy_bound(&net, &prof, &p, budget, &bd, &e);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
        printf("bound %.3f: %.1f ms a call\n", bd.bound_s*1e3, ((t1.tv_sec-ta.tv_sec)*1e3+(t1.tv_nsec-ta.tv_nsec)/1e6)/5);
        return 0;
    }
    if (argc > 3 && !strcmp(argv[3], "bounds")) {   /* the bound of auto's plan (its split) at budgets up to 1.6x */
        for (int k = 0; k <= 40; k++) {
            uint64_t b2 = budget + budget / 100 * (uint64_t)k * 3 / 2;
            vd_plan_bound bd;
            vd_plan_copy_bound(&net, &prof, &p, b2, &bd, &e);
            printf("%llu %.3f (compute %.3f copies %.3f step %d)\n", (unsigned long long)b2, bd.bound_s*1e3, bd.compute_s*1e3, bd.copies_s*1e3, bd.copies_step);
        }
        return 0;
    }
    for (int a = 3; a < argc; a++) {
        char nm[64]; int v; sscanf(argv[a], "%63[^=]=%d", nm, &v);
        if (!strcmp(nm, "chunks")) { for (int i = 0; i < L; i++) if (ch[i] > 1) ch[i] = v; continue; }
        if (!strcmp(nm, "upto")) { for (int i = 0; i < L; i++) ch[i] = i <= v ? ch[0] : 1; continue; }
        d[vd_net_find(&net, nm) + 1] = v;
    }
    if (argc > 3) {
        vd_plan q;
        double tq = build(&net, &prof, budget, ch, d, &q);
        vd_plan_bound qb; vd_plan_copy_bound(&net, &prof, &q, budget, &qb, &e);
        printf("variant bound %.3f; ", qb.bound_s*1e3);
        printf("variant %.3f ms (compute %.3f stall %.3f) offl %.2f GiB rc %.2f GiB\n", tq, 1e3*q.sim.compute_s, 1e3*q.sim.stall_s, q.offload_bytes/1073741824.0, 0.0);
    }
    return 0;
}
