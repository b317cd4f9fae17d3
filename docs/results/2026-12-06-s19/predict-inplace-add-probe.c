/* the floor plan of NET at batch B (analytic CPU profile): its fullest step */
#include <stdio.h>
#include <stdlib.h>
#include "spec/spec.h"
#include "plan/plan.h"
#include "profile/profile.h"
int main(int argc, char **argv) {
    vd_net net; vd_net_init(&net); vd_err e = {0};
    int B = atoi(argv[2]);
    if (vd_spec_load(argv[1], &net, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    vd_schedule_inplace(&net);
    vd_profile prof;
    if (vd_profile_analytic(&net, B, &vd_device_cpu, &prof, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    vd_plan_opts o; vd_plan_opts_init(&o); o.batch = B; o.forward_only = true;
    if (vd_plan_min_budget(&net, &prof, &o, &o.budget, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    vd_plan p;
    if (vd_plan_build(&net, &prof, &o, &p, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    int sm = 0, split = 0, ip = 0;
    for (int s = 0; s < p.n_steps; s++) if (p.steps[s].mem_in_use > p.steps[sm].mem_in_use) sm = s;
    for (int u = 0; u < p.n_units; u++) { split += p.layers[u].n_chunks > 1 && p.layers[u].chunk == 0; ip += p.layers[u].inplace && net.layers[p.layers[u].layer].op == VD_OP_ADD; }
    printf("floor %llu hwm %llu live_peak %llu; fullest step %d (%s) %llu; %d layers split, %d units, adds in place %d, offload %llu B\n",
           (unsigned long long)o.budget, (unsigned long long)p.hwm, (unsigned long long)p.live_peak, sm,
           net.layers[p.steps[sm].layer].name, (unsigned long long)p.steps[sm].mem_in_use, split, p.n_units, ip,
           (unsigned long long)p.offload_bytes);
    return 0;
}
