/* crop.c — where a folder sample comes from in its image: the evaluation's
 * centre box and torchvision's RandomResizedCrop box (data_impl.h). Pure
 * functions of the image size (and the augmentation key). */
#include <math.h>
#include "data/data_impl.h"

void vd_box_center(int iw, int ih, int H, int W, vd_box *b) {
    /* torchvision's Resize(H / f) + CenterCrop(H) for a square input: the
     * image scaled by s so that it covers (H / f) x (W / f), the H x W
     * centre of it taken; in the image's pixels a box of H / s x W / s */
    double f = VD_EVAL_CROP_FRACTION;
    double s = fmax((double)H / (f * ih), (double)W / (f * iw));
    b->w = W / s;
    b->h = H / s;
    b->x = (iw - b->w) / 2;
    b->y = (ih - b->h) / 2;
}

/* Uniform in [0, 1) from 53 bits of r. */
static double uniform(vd_rng *r) {
    uint64_t v = ((uint64_t)vd_rng_u32(r) << 32) | vd_rng_u32(r);
    return (double)(v >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n]. */
static int upto(vd_rng *r, int n) {
    return (int)(((uint64_t)vd_rng_u32(r) * ((uint64_t)n + 1)) >> 32);
}

void vd_box_random_resized(int iw, int ih, uint64_t key, vd_box *b, bool *flip) {
    vd_rng r;
    vd_rng_seed(&r, key, 0xC20BB0C5ull);
    *flip = uniform(&r) < 0.5;
    const double smin = VD_RRC_SCALE_MIN, smax = VD_RRC_SCALE_MAX;
    const double lr0 = log(VD_RRC_RATIO_MIN), lr1 = log(VD_RRC_RATIO_MAX);
    double area = (double)iw * ih;
    for (int attempt = 0; attempt < VD_RRC_ATTEMPTS; attempt++) {
        double target = area * (smin + (smax - smin) * uniform(&r));
        double ar = exp(lr0 + (lr1 - lr0) * uniform(&r));
        long w = lround(sqrt(target * ar)), h = lround(sqrt(target / ar));
        if (w > 0 && w <= iw && h > 0 && h <= ih) {
            b->w = (double)w;
            b->h = (double)h;
            b->y = upto(&r, ih - (int)h);
            b->x = upto(&r, iw - (int)w);
            return;
        }
    }
    /* ten misses (a very long or tall image): the centre box of the whole
     * image clipped to the ratio range */
    double in_ratio = (double)iw / ih;
    long w = iw, h = ih;
    if (in_ratio < VD_RRC_RATIO_MIN) h = lround(w / VD_RRC_RATIO_MIN);
    else if (in_ratio > VD_RRC_RATIO_MAX) w = lround(h * VD_RRC_RATIO_MAX);
    b->w = (double)w;
    b->h = (double)h;
    b->x = (double)((iw - w) / 2);
    b->y = (double)((ih - h) / 2);
}
