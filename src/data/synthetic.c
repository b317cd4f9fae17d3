/* synthetic.c — deterministic random images and labels for any net shape.
 *
 * Sample i of a split is a pure function of (seed, split, i): the formula of
 * data/synth.h, the same one the backends' fill_synthetic computes on the
 * device (so training can generate its batches there, with no host bytes:
 * train.c). Pixel j is (noise + 0.5 * template[label]) / sqrt(1.25) with
 * ~N(0,1) noise and a fixed template per class: marginally ~N(0,1), and
 * learnable (a net can find the class template), so a loss curve means
 * something. Cost per pixel: two 64-bit hashes, no table, no state. */
#include <stdio.h>
#include "data/data_impl.h"
#include "data/synth.h"

static int synth_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                        float *x, int32_t *label, vd_err *e) {
    (void)aug_key; (void)e;
    uint64_t k = vd_synth_key(ds->seed, (int)split, index);
    int32_t lab = vd_synth_label(k, ds->info.classes);
    uint64_t t = vd_synth_template_key(ds->seed, lab);
    int64_t n = (int64_t)ds->info.c * ds->info.h * ds->info.w;
    for (int64_t j = 0; j < n; j++) x[j] = vd_synth_value(k, t, j);
    *label = lab;
    return VD_OK;
}

int vd_data_open_synthetic(vd_dataset *ds, int64_t n_train, int64_t n_test,
                           const vd_net *net, vd_err *e) {
    (void)e;
    ds->impl = NULL;
    ds->sample = synth_sample;
    ds->close = NULL;
    ds->info.c = net->in_c;
    ds->info.h = net->in_h;
    ds->info.w = net->in_w;
    ds->info.classes = net->classes;
    ds->info.n[VD_SPLIT_TRAIN] = n_train;
    ds->info.n[VD_SPLIT_TEST] = n_test;
    snprintf(ds->info.desc, sizeof ds->info.desc, "synthetic (%lld train, %lld test, %dx%dx%d, "
             "%d classes)", (long long)n_train, (long long)n_test, net->in_c, net->in_h,
             net->in_w, net->classes);
    return VD_OK;
}
