/* fuzz_profile.c — libFuzzer target: arbitrary bytes as a profile JSON file
 * -> vd_profile_parse (the body of vd_profile_load) for LeNet
 * (nets/lenet.yaml, parsed once) at batch 64. Must never crash, hang or
 * leak, and must keep its contract: VD_OK, or VD_EDATA / VD_ENOMEM with
 * e.code equal to the return value and a message naming the file. A profile
 * it accepts has the net's layers in order, 1..VD_PROFILE_MAX_ALGOS options
 * each, values inside the loader's bounds, and reads back unchanged after
 * vd_profile_save.
 *
 * Build: see tools/fuzz/meson.build. Run:
 *   ./fuzz_profile -max_len=16384 -timeout=5 -dict=tools/fuzz/profile.dict \
 *       CORPUS_DIR tools/fuzz/corpus-profile */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_util.h"
#include "profile/profile.h"
#include "spec/spec.h"

#define T "fuzz_profile"
enum { BATCH = 64 };

static void check(int cond, const char *what, const vd_err *e) { fz_check(cond, T, what, e); }

/* A time, size or bandwidth as the loader bounds it. */
static int ok_num(double v, double max) { return isfinite(v) && v >= 0 && v <= max; }

static void check_accepted(const vd_net *net, const vd_profile *p) {
    check(p->batch == BATCH && p->n_layers == net->n_layers, "batch or layer count", NULL);
    check(p->dev.d2h_bw >= 1 && p->dev.h2d_bw >= 1 && (p->dev.both_bw == 0 || p->dev.both_bw >= 1),
          "a bandwidth below 1 byte/s", NULL);
    check(isfinite(p->dev.d2h_bw) && isfinite(p->dev.h2d_bw) && isfinite(p->dev.both_bw) &&
          isfinite(p->dev.peak_flops) && isfinite(p->dev.mem_bw) && ok_num(p->dev.launch_s, 1e6) &&
          p->dev.mem_bytes <= (1ull << 48) && ok_num(p->sgd_s, 1e6), "a device value", NULL);
    for (int i = 0; i < p->n_layers; i++) {
        const vd_profile_layer *l = &p->layers[i];
        check(strcmp(l->name, net->layers[i].name) == 0, "a layer name", NULL);
        check(l->n_algos >= 1 && l->n_algos <= VD_PROFILE_MAX_ALGOS, "option count", NULL);
        check(l->aux_bytes <= (1ull << 48), "aux_bytes", NULL);
        for (int k = 0; k < l->n_algos; k++) {
            const vd_profile_algo *a = &l->algos[k];
            check(ok_num(a->fwd_s, 1e6) && ok_num(a->bwd_s, 1e6), "a time", NULL);
            check(a->workspace <= (1ull << 48) &&
                  a->workspace == (a->fwd_workspace > a->bwd_workspace ? a->fwd_workspace
                                                                       : a->bwd_workspace),
                  "workspace is not the larger pass's", NULL);
            check(a->fwd_algo >= -1 && a->bwd_data_algo >= -1 && a->bwd_filter_algo >= -1,
                  "an algorithm id", NULL);
        }
    }
}

/* Save p and load it back: the same profile (the source string aside: it is
 * cut at 31 bytes, possibly inside a UTF-8 character). */
static void check_round_trip(const vd_net *net, const vd_profile *p, const char *path) {
    vd_err e;
    memset(&e, 0, sizeof e);
    vd_profile q;
    check(vd_profile_save(path, p, &e) == 0, "cannot save an accepted profile", &e);
    check(vd_profile_load(path, net, BATCH, &q, &e) == 0, "a saved profile does not load", &e);
    const vd_device_params *a = &p->dev, *b = &q.dev;
    check(!strcmp(a->name, b->name) && a->peak_flops == b->peak_flops && a->mem_bw == b->mem_bw &&
          a->d2h_bw == b->d2h_bw && a->h2d_bw == b->h2d_bw && a->both_bw == b->both_bw &&
          a->launch_s == b->launch_s && a->mem_bytes == b->mem_bytes && p->sgd_s == q.sgd_s &&
          a->peak_flops_bf16 == b->peak_flops_bf16 && a->peak_flops_fp16 == b->peak_flops_fp16 &&
          a->peak_flops_tf32 == b->peak_flops_tf32,
          "the device differs after a round trip", NULL);
    for (int i = 0; i < p->n_layers; i++) {
        const vd_profile_layer *x = &p->layers[i], *y = &q.layers[i];
        check(x->n_algos == y->n_algos && x->aux_bytes == y->aux_bytes,
              "a layer differs after a round trip", NULL);
        for (int k = 0; k < x->n_algos; k++) {
            const vd_profile_algo *u = &x->algos[k], *v = &y->algos[k];
            check(!strcmp(u->label, v->label) && u->fwd_s == v->fwd_s && u->bwd_s == v->bwd_s &&
                  u->workspace == v->workspace && u->fwd_workspace == v->fwd_workspace &&
                  u->bwd_workspace == v->bwd_workspace && u->fwd_algo == v->fwd_algo &&
                  u->bwd_data_algo == v->bwd_data_algo && u->bwd_filter_algo == v->bwd_filter_algo,
                  "an option differs after a round trip", NULL);
        }
    }
    vd_profile_free(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static vd_net net;
    static int ready;
    static char saved[96];
    vd_err e;
    memset(&e, 0, sizeof e);
    if (!ready) {
        vd_net_init(&net);
        check(vd_spec_load(VD_FUZZ_NET, &net, &e) == 0, "cannot load " VD_FUZZ_NET, &e);
        snprintf(saved, sizeof saved, "%s/saved.json", fz_scratch_dir("profile"));
        ready = 1;
    }
    vd_profile p;
    int rc = vd_profile_parse((const char *)data, size, "fuzz.json", &net, BATCH, &p, &e);
    if (rc) {
        check(rc == VD_EDATA || rc == VD_ENOMEM, "unexpected error code", &e);
        check(e.code == rc, "e.code differs from the return value", &e);
        check(strncmp(e.msg, "fuzz.json: ", 11) == 0 || rc == VD_ENOMEM,
              "message does not name the file", &e);
        check(p.layers == NULL, "a failed parse left layers behind", &e);
        return 0;
    }
    check_accepted(&net, &p);
    check_round_trip(&net, &p, saved);
    vd_profile_free(&p);
    return 0;
}
