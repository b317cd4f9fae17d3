/* synthetic.c — deterministic random images and labels for any net shape.
 *
 * A bank of 2^20 N(0,1) floats is drawn once from the seed. Sample i of a
 * split gets key k = mix(seed, split, i); its label is k mod classes; its
 * noise is bank[(off + j*stride) mod 2^20] for pixel j (off, odd stride from
 * k); each class has a fixed template bank[(t_label + j) mod 2^20]. Pixel j is
 * (noise + 0.5 * template) / sqrt(1.25): marginally N(0,1), and learnable
 * (a net can find the class template), so a loss curve means something.
 * Cost per sample: two table lookups per pixel, no transcendental calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_impl.h"

enum { BANK_BITS = 20 };
#define BANK_N ((uint64_t)1 << BANK_BITS)
#define BANK_MASK (BANK_N - 1)

typedef struct synth {
    float *bank;                /* [BANK_N] N(0,1) */
} synth;

static int synth_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                        float *x, int32_t *label, vd_err *e) {
    (void)aug_key; (void)e;
    const synth *s = ds->impl;
    uint64_t k = vd_mix64(ds->seed ^ vd_mix64(((uint64_t)split << 56) ^ (uint64_t)index));
    int32_t lab = (int32_t)(k % (uint64_t)ds->info.classes);
    uint64_t off = vd_mix64(k) & BANK_MASK;
    uint64_t stride = (vd_mix64(k ^ 0x57121DEull) & BANK_MASK) | 1;
    uint64_t toff = vd_mix64(ds->seed ^ vd_mix64(0x7E3B1A7Eull + (uint64_t)lab)) & BANK_MASK;
    int64_t n = (int64_t)ds->info.c * ds->info.h * ds->info.w;
    const float scale = 0.894427190999916f;   /* 1/sqrt(1.25) */
    for (int64_t j = 0; j < n; j++) {
        float noise = s->bank[(off + (uint64_t)j * stride) & BANK_MASK];
        float tmpl = s->bank[(toff + (uint64_t)j) & BANK_MASK];
        x[j] = (noise + 0.5f * tmpl) * scale;
    }
    *label = lab;
    return VD_OK;
}

static void synth_close(vd_dataset *ds) {
    synth *s = ds->impl;
    if (!s) return;
    vd_free(s->bank);
    VD_FREE(ds->impl);
}

int vd_data_open_synthetic(vd_dataset *ds, int64_t n_train, int64_t n_test,
                           const vd_net *net, vd_err *e) {
    synth *s = vd_calloc(1, sizeof *s, e);
    if (!s) return VD_ENOMEM;
    s->bank = vd_malloc(sizeof(float) * BANK_N, e);
    if (!s->bank) { vd_free(s); return VD_ENOMEM; }
    vd_rng r;
    vd_rng_seed(&r, ds->seed, 0x5E7E71Cull);
    for (uint64_t i = 0; i < BANK_N; i++) s->bank[i] = vd_rng_normal(&r);
    ds->impl = s;
    ds->sample = synth_sample;
    ds->close = synth_close;
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
