/* predict-offload-sweep.c — the inference floors of a net (vdnn-predict's
 * plan: vd_plan_opts.forward_only) with and without offloads
 * (vd_plan_opts.no_offload) on an analytic profile, and the plans of both at
 * budgets between the floors and the whole batch's need. Built against a
 * CPU build's library (predict-offload.md says how); prints a table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/util.h"
#include "net/net.h"
#include "spec/spec.h"
#include "profile/profile.h"
#include "plan/plan.h"
int main(int argc, char **argv) {
    int B = atoi(argv[2]);
    vd_net net; vd_net_init(&net); vd_err e = {0};
    if (vd_spec_load(argv[1], &net, &e)) { printf("%s\n", e.msg); return 1; }
    vd_schedule_inplace(&net);
    vd_profile prof;
    if (vd_profile_analytic(&net, B, vd_device_find(argv[3]), &prof, &e)) { printf("%s\n", e.msg); return 1; }
    vd_plan_opts o; vd_plan_opts_init(&o); o.batch = B; o.forward_only = true;
    vd_plan p;
    vd_plan_build(&net, &prof, &o, &p, &e);
    uint64_t whole = p.hwm; double tw = p.sim.iter_s;
    vd_plan_free(&p);
    uint64_t f_off, f_split;
    double t0 = vd_now();
    vd_plan_min_budget(&net, &prof, &o, &f_off, &e);
    double t1 = vd_now();
    o.no_offload = true;
    vd_plan_min_budget(&net, &prof, &o, &f_split, &e);
    printf("%s b%d %s: whole %.1f MiB %.2f ms; floor split only %.1f MiB, with offloads %.1f MiB (%.1f s to find)\n",
           net.name, B, argv[3], whole / 1048576.0, tw * 1e3, f_split / 1048576.0, f_off / 1048576.0, t1 - t0);
    printf("budget_MiB\tsplit_units\tsplit_ms\toff_units\toff_maps\toff_MiB\toff_ms\n");
    uint64_t bs[9] = {f_off, f_off + (f_split - f_off) / 4 / 256 * 256, f_off + (f_split - f_off) / 2 / 256 * 256,
                      f_split - 256, f_split, f_split + (whole - f_split) / 4 / 256 * 256,
                      f_split + (whole - f_split) / 2 / 256 * 256, whole - 256, whole};
    for (int i = 0; i < 9; i++) {
        uint64_t b = bs[i];
        o.budget = b;
        double ts = -1, to = -1; int us = 0, uo = 0, no = 0; uint64_t ob = 0;
        o.no_offload = true;
        if (vd_plan_build(&net, &prof, &o, &p, &e) == 0) { ts = p.sim.iter_s; us = p.n_units; }
        vd_plan_free(&p);
        o.no_offload = false;
        if (vd_plan_build(&net, &prof, &o, &p, &e) == 0) {
            to = p.sim.iter_s; uo = p.n_units; ob = p.offload_bytes;
            for (int t = 0; t < p.n_tensors; t++) no += p.tensors[t].offload;
        }
        vd_plan_free(&p);
        printf("%.2f\t%d\t%.2f\t%d\t%d\t%.1f\t%.2f\n", b / 1048576.0, us, ts * 1e3, uo, no, ob / 1048576.0, to * 1e3);
    }
    return 0;
}
