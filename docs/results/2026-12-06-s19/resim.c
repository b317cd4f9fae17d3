/* resim.c — plan with profile A (as vdnn-plan / vdnn-train do), then replay
 * that same plan's actions in the simulator with profile B (B should differ
 * from A only in its device fields: the steps keep A's compute times).
 * Prints both iterations; writes OUT.steps.tsv (per step: duration and end
 * under A and B, B's stall) and OUT.copies.tsv (per copy: start and end
 * under A and B). A measurement tool for predict-offload-model.md, not part
 * of the build. From the repository root, after the CPU build:
 *   gcc -std=c11 -O2 -I. -Isrc -Ibuild-cpu docs/results/2026-12-06-s19/resim.c \
 *       -o /tmp/resim build-cpu/libvdnn.a build-cpu/libvdnn_o3.a \
 *       $(pkg-config --libs yaml-0.1 jansson libturbojpeg zlib openblas) -lm -lpthread
 *   /tmp/resim nets/NET.yaml MATH BUDGET_GIB A.json B.json OUT
 * (batch 256; MATH bf16 or fp32). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "spec/spec.h"
#include "plan/plan_internal.h"

int main(int argc, char **argv) {
    if (argc < 7) { fprintf(stderr, "usage: resim NET.yaml MATH BUDGET_GIB PROFILE_A PROFILE_B OUT_PREFIX\n"); return 2; }
    vd_err e = {0};
    vd_net net; vd_net_init(&net);
    if (vd_spec_load(argv[1], &net, &e)) goto fail;
    vd_config c; vd_config_init(&c);
    c.batch = 256; c.has_math = true;
    c.math = !strcmp(argv[2], "bf16") ? VD_MATH_BF16 : VD_MATH_FP32;
    c.budget = (uint64_t)(atof(argv[3]) * (1ull << 30));
    c.profile = argv[4];
    vd_config_run r; memset(&r, 0, sizeof r);
    if (vd_config_resolve(&c, &net, true, &r, &e)) goto fail;
    vd_profile pa, pb;
    if (vd_config_model_profile(&r, &net, &pa, &e)) goto fail;
    vd_config_budget(&r, NULL, &pa);
    vd_plan P;
    if (vd_plan_build(&net, &pa, &r.plan, &P, &e)) goto fail;
    int ns = P.n_steps;
    double *a_end = malloc(sizeof(double) * (size_t)(ns + 1));
    double *a_d2h = malloc(sizeof(double) * 2 * (size_t)P.n_tensors);
    double *a_h2d = malloc(sizeof(double) * 2 * (size_t)P.n_intervals);
    for (int s = 0; s <= ns; s++) a_end[s] = P.steps[s].t_end;
    for (int t = 0; t < P.n_tensors; t++) { a_d2h[2*t] = P.tensors[t].t_d2h_start; a_d2h[2*t+1] = P.tensors[t].t_d2h_end; }
    for (int k = 0; k < P.n_intervals; k++) { a_h2d[2*k] = P.intervals[k].t_h2d_start; a_h2d[2*k+1] = P.intervals[k].t_h2d_end; }
    double a_iter = P.sim.iter_s, a_stall = P.sim.stall_s;
    if (vd_profile_load(argv[5], &net, r.batch, &pb, &e)) goto fail;
    if (vdp_simulate(&P, &pb, false, NULL, &e)) goto fail;
    printf("%s %s %s: A %.4f s (stall %.2f ms)  B %.4f s (stall %.2f ms)\n", net.name, argv[2], argv[3],
           a_iter, 1e3 * a_stall, P.sim.iter_s, 1e3 * P.sim.stall_s);
    char path[512];
    snprintf(path, sizeof path, "%s.steps.tsv", argv[6]);
    FILE *f = fopen(path, "w");
    fprintf(f, "step\top\tdur_a_ms\tdur_b_ms\tend_a_ms\tend_b_ms\tstall_b_ms\n");
    for (int s = 0; s < ns; s++) {
        char lab[160];
        vd_plan_step_label(&P, &net, s, lab, sizeof lab);
        double pa_ = s ? a_end[s-1] : 0, pb_ = s ? P.steps[s-1].t_end : 0;
        fprintf(f, "%d\t%s\t%.4f\t%.4f\t%.4f\t%.4f\t%.4f\n", s, lab, 1e3*(a_end[s]-pa_), 1e3*(P.steps[s].t_end-pb_),
                1e3*a_end[s], 1e3*P.steps[s].t_end, 1e3*P.steps[s].stall_s);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s.copies.tsv", argv[6]);
    f = fopen(path, "w");
    fprintf(f, "dir\ttensor\tMiB\tstart_a\tend_a\tstart_b\tend_b\n");
    for (int t = 0; t < P.n_tensors; t++)
        if (P.tensors[t].offload && !P.tensors[t].host_src)
            fprintf(f, "D2H\t%s\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\n", P.tensors[t].name, P.tensors[t].bytes/1048576.0,
                    1e3*a_d2h[2*t], 1e3*a_d2h[2*t+1], 1e3*P.tensors[t].t_d2h_start, 1e3*P.tensors[t].t_d2h_end);
    for (int k = 0; k < P.n_intervals; k++)
        if (P.intervals[k].fill != VD_FILL_NONE)
            fprintf(f, "H2D\t%s\t%.2f\t%.3f\t%.3f\t%.3f\t%.3f\n", P.tensors[P.intervals[k].tensor].name,
                    P.tensors[P.intervals[k].tensor].bytes/1048576.0,
                    1e3*a_h2d[2*k], 1e3*a_h2d[2*k+1], 1e3*P.intervals[k].t_h2d_start, 1e3*P.intervals[k].t_h2d_end);
    fclose(f);
    return 0;
fail:
    fprintf(stderr, "resim: %s\n", e.msg);
    return 1;
}
