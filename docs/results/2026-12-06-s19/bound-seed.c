/* bound-seed.c — build a plan at a budget with some feature maps' dispositions
 * fixed (the rest AUTO: --policy auto searches them, as vdnn-plan does), and
 * print auto's own plan beside it. The fixed ones: a file of "T D" lines,
 * T a tensor index of auto's plan, D R (recompute), O (offload) or K (keep).
 * A measurement tool for bound.md (bound-seed.sh writes the file from the
 * bound's cover), not part of the build. From the repository root, after
 * the CPU build:
 *   gcc -std=c11 -O2 -I. -Isrc -Ibuild-cpu docs/results/2026-12-06-s19/bound-seed.c \
 *       -o /tmp/bound-seed build-cpu/libvdnn.a build-cpu/libvdnn_o3.a \
 *       $(pkg-config --libs yaml-0.1 jansson libturbojpeg zlib openblas) -lm -lpthread
 *   /tmp/bound-seed nets/NET.yaml BUDGET_BYTES PROFILE|analytic FILE A|K MATH
 * (batch 256; the fifth argument: A the rest AUTO, K the rest kept). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "spec/spec.h"
#include "plan/plan_internal.h"

int main(int argc, char **argv) {
    if (argc < 7) return 2;
    vd_err e = {0};
    vd_net net; vd_net_init(&net);
    if (vd_spec_load(argv[1], &net, &e)) goto fail;
    vd_config c; vd_config_init(&c);
    c.batch = 256; c.has_math = true; c.math = !strcmp(argv[6], "bf16") ? VD_MATH_BF16 : VD_MATH_FP32;
    c.budget = strtoull(argv[2], NULL, 10);
    c.profile = strcmp(argv[3], "analytic") ? argv[3] : NULL;
    vd_config_run r; memset(&r, 0, sizeof r);
    if (vd_config_resolve(&c, &net, true, &r, &e)) goto fail;
    vd_profile pa;
    if (vd_config_model_profile(&r, &net, &pa, &e)) goto fail;
    vd_config_budget(&r, NULL, &pa);
    vd_plan P;
    if (vd_plan_build(&net, &pa, &r.plan, &P, &e)) goto fail;
    printf("auto: %.3f ms\n", P.sim.iter_s * 1e3);
    int L = net.n_layers;
    vd_disp *d = calloc((size_t)L + 1, sizeof *d);
    vd_disp rest = argv[5][0] == 'K' ? VD_DISP_KEEP : VD_DISP_AUTO;
    for (int k = 0; k <= L; k++) d[k] = rest;
    for (int i = 0; i < L; i++) if (net.layers[i].inplace) d[i + 1] = VD_DISP_AUTO;
    FILE *f = fopen(argv[4], "r"); int t; char ch;
    if (!f) { perror(argv[4]); return 1; }
    while (fscanf(f, "%d %c", &t, &ch) == 2) {
        int li = P.tensors[t].layer;   /* -1: x */
        int k = P.tensors[t].kind == VD_T_INPUT ? 0 : li + 1;
        d[k] = ch == 'R' ? VD_DISP_RECOMPUTE : ch == 'O' ? VD_DISP_OFFLOAD : VD_DISP_KEEP;
    }
    fclose(f);
    r.plan.disp = d;
    r.plan.policy = VD_POLICY_AUTO;
    vd_plan Q;
    int rc = vd_plan_build(&net, &pa, &r.plan, &Q, &e);
    printf("fixed: rc %d feasible %d %.3f ms hwm %.3f GiB rc %.3f GiB %.3f ms off %.3f GiB\n", rc, Q.feasible, Q.sim.iter_s * 1e3,
           Q.hwm / 1073741824.0, Q.recompute_bytes / 1073741824.0, Q.recompute_s * 1e3, Q.offload_bytes / 1073741824.0);
    return 0;
fail:
    fprintf(stderr, "%s\n", e.msg);
    return 1;
}
