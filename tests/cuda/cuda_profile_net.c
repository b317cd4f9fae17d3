/* cuda_profile_net.c — measure a net's profile on the GPU (vd_profile_measure)
 * and print it; used by tools/gpu-check. Not a test.
 *
 * usage: cuda_profile_net [--conv-debug N] NET.yaml BATCH [fp32|tf32] [OUT.json]
 * (--conv-debug: vd_backend_opts.conv_debug, as vdnn-train's flag)
 * Prints one line per layer and algorithm option (forward / backward ms,
 * workspace), the totals, copy bandwidths, and the driver's memory use
 * before and after. Exit status: 0, or the VD_E* code of the failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "net/net.h"
#include "plan/plan.h"
#include "spec/spec.h"

int main(int argc, char **argv) {
    vd_backend_opts bo = {0};
    if (argc > 2 && !strcmp(argv[1], "--conv-debug")) {
        bo.conv_debug = atoi(argv[2]);
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s [--conv-debug N] NET.yaml BATCH [fp32|tf32] [OUT.json]\n", argv[0]);
        return VD_EUSAGE;
    }
    vd_err e = {0};
    vd_net net;
    vd_net_init(&net);
    int64_t batch = 0;
    int rc = vd_parse_i64(argv[2], &batch, &e);
    if (rc || batch <= 0 || batch > 1 << 20) {
        fprintf(stderr, "bad batch '%s'\n", argv[2]);
        return VD_EUSAGE;
    }
    vd_math math = argc > 3 && !strcmp(argv[3], "tf32") ? VD_MATH_TF32 : VD_MATH_FP32;
    if ((rc = vd_spec_load(argv[1], &net, &e))) goto fail;
    net.train.batch = (int)batch;
    if ((rc = vd_net_finalize(&net, &e))) goto fail;
    vd_schedule_inplace(&net);
    uint64_t fr0 = 0, tot = 0, fr1 = 0, fr2 = 0;
    if ((rc = vd_cuda_mem_info(NULL, &fr0, &tot, &e))) goto fail;
    vd_backend *be = NULL;
    if ((rc = vd_backend_cuda_create_opts(&be, 0, &bo, &e))) goto fail;
    if ((rc = be->layer_setup(be, &net, (int)batch, math, false, &e))) goto fail_be;
    if ((rc = vd_cuda_mem_info(be, &fr1, &tot, &e))) goto fail_be;
    vd_profile prof;
    if ((rc = vd_profile_measure(be, &net, (int)batch, &prof, &e))) goto fail_be;
    if ((rc = vd_cuda_mem_info(be, &fr2, &tot, &e))) goto fail_prof;
    printf("%-28s %-14s %10s %10s %12s\n", "layer", "option", "fwd ms", "bwd ms", "workspace");
    double fwd = 0, bwd = 0;
    for (int i = 0; i < prof.n_layers; i++) {
        const vd_profile_layer *pl = &prof.layers[i];
        for (int a = 0; a < pl->n_algos; a++) {
            const vd_profile_algo *pa = &pl->algos[a];
            char ws[32];
            printf("%-28s %-14s %10.3f %10.3f %12s\n", a ? "" : pl->name, pa->label,
                   pa->fwd_s * 1e3, pa->bwd_s * 1e3, vd_fmt_bytes(pa->workspace, ws, sizeof ws));
        }
        if (pl->n_algos) { fwd += pl->algos[0].fwd_s; bwd += pl->algos[0].bwd_s; }
    }
    char b0[32], b1[32], b2[32], b3[32];
    printf("total (option 0): fwd %.3f ms, bwd %.3f ms, sgd %.3f ms -> compute %.4f s/iter\n",
           fwd * 1e3, bwd * 1e3, prof.sgd_s * 1e3, fwd + bwd + prof.sgd_s);
    printf("copies: d2h %.1f GB/s, h2d %.1f GB/s, both %.1f GB/s; launch %.2f us; device %s\n",
           prof.dev.d2h_bw / 1e9, prof.dev.h2d_bw / 1e9, prof.dev.both_bw / 1e9,
           prof.dev.launch_s * 1e6, prof.dev.name);
    printf("driver memory used: fresh context %s, after layer setup %s, after profiling %s (of %s)\n",
           vd_fmt_bytes(tot - fr0, b0, sizeof b0), vd_fmt_bytes(tot - fr1, b1, sizeof b1),
           vd_fmt_bytes(tot - fr2, b2, sizeof b2), vd_fmt_bytes(tot, b3, sizeof b3));
    if (argc > 4 && (rc = vd_profile_save(argv[4], &prof, &e))) goto fail_prof;
    vd_profile_free(&prof);
    be->destroy(be);
    vd_net_free(&net);
    return 0;
fail_prof:
    vd_profile_free(&prof);
fail_be:
    be->destroy(be);
fail:
    fprintf(stderr, "error: %s\n", e.msg);
    vd_net_free(&net);
    return rc;
}
