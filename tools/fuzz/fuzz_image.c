/* fuzz_image.c — libFuzzer target: arbitrary bytes as an image of a folder
 * data set -> the full decode: vd_image_load (JPEG through TurboJPEG at a
 * reduced DCT scale and in full, and through stb_image; PNG and BMP through
 * stb_image; PPM and PGM by vdnn) and vd_data_sample of three folder data sets
 * opened once (3 x 8 x 8 with augmentation, 1 x 5 x 3, 3 x 24 x 40: the
 * resize, crop and flip). stb_image is compiled into this target
 * (stb_image_impl.c) so that its code is instrumented too.
 *
 * Must never crash, hang or leak, and must keep the contracts: VD_OK, or
 * VD_EDATA / VD_ENOMEM with e.code equal to the return value and a message
 * naming the file; a decoded image has the size its header gave
 * vd_image_check_header (the pixel limit is checked on the header), scaled
 * by 1/scale_denom; a sample decodes exactly when vd_image_load does, has
 * label 0 and every value between the normalised black and white.
 *
 * Images over FZ_MAX_PIXELS (by their header) are skipped: a few bytes can
 * declare up to VD_IMAGE_MAX_PIXELS (2^27) pixels, which decode correctly
 * but take seconds under the sanitizers.
 *
 * Build: see tools/fuzz/meson.build. Run:
 *   ./fuzz_image -max_len=16384 -timeout=5 -dict=tools/fuzz/image.dict \
 *       CORPUS_DIR tools/fuzz/corpus-image */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_impl.h"
#include "fuzz_util.h"
#include "spec/spec.h"

#define T "fuzz_image"
#define FZ_MAX_PIXELS (1u << 18)

static void check(int cond, const char *what, const vd_err *e) { fz_check(cond, T, what, e); }

static void check_error(int rc, const char *path, const vd_err *e) {
    check(rc == VD_EDATA || rc == VD_ENOMEM, "unexpected error code", e);
    check(e->code == rc, "e.code differs from the return value", e);
    check(rc == VD_ENOMEM || strncmp(e->msg, path, strlen(path)) == 0,
          "message does not name the file", e);
}

/* The folder data sets: DIR/train/a/image.ppm, one image, one class. */
typedef struct cfg { int c, h, w; bool augment; } cfg;
static const cfg CFGS[] = { { 3, 8, 8, true }, { 1, 5, 3, false }, { 3, 24, 40, false } };
enum { NCFG = sizeof CFGS / sizeof CFGS[0] };

static vd_dataset *open_set(const char *dir, const cfg *c, vd_net *net) {
    char spec[400];
    int n = snprintf(spec, sizeof spec,
                     "name: fz\n"
                     "input: { channels: %d, height: %d, width: %d, classes: 1 }\n"
                     "layers:\n"
                     "  - { name: fc, type: fc, out: 1 }\n"
                     "  - { name: loss, type: softmax_cross_entropy }\n", c->c, c->h, c->w);
    vd_err e;
    memset(&e, 0, sizeof e);
    vd_net_init(net);
    check(vd_spec_parse(spec, (size_t)n, "fz.yaml", net, &e) == 0, "the net", &e);
    char ds_spec[128];
    snprintf(ds_spec, sizeof ds_spec, "folder:%s", dir);
    vd_dataset *ds = NULL;
    check(vd_data_open(ds_spec, net, 1, 7, c->augment, &ds, &e) == 0, "cannot open the data", &e);
    return ds;
}

/* vd_image_load with dec at C channels for an H x W input; returns its rc. */
static int load(const char *path, int C, int H, int W, vd_jpeg_decoder dec, int w, int h) {
    vd_err e;
    memset(&e, 0, sizeof e);
    vd_image im;
    int rc = vd_image_load(path, C, H, W, dec, &im, &e);
    if (rc) { check_error(rc, path, &e); return rc; }
    int d = im.scale_denom;
    check(d == 1 || d == 2 || d == 4 || d == 8, "scale_denom", NULL);
    check(d == 1 || dec == VD_JPEG_TURBO, "a scaled decode that was not asked for", NULL);
    check(im.full_w == w && im.full_h == h, "the decoded size is not the header's", NULL);
    check(im.w == (w + d - 1) / d && im.h == (h + d - 1) / d && im.px != NULL,
          "the scaled size", NULL);
    /* touch every byte (ASan: the buffer is as large as its size says) */
    unsigned sum = 0;
    for (size_t i = 0; i < (size_t)im.w * (size_t)im.h * (size_t)C; i++) sum += im.px[i];
    (void)sum;
    vd_image_free(&im);
    check(im.px == NULL, "vd_image_free did not clear the pointer", NULL);
    return VD_OK;
}

static void sample(vd_dataset *ds, const cfg *c, const char *path, uint64_t key, int want_rc) {
    static float x[3 * 24 * 40];
    vd_err e;
    memset(&e, 0, sizeof e);
    int32_t label = -1;
    int rc = vd_data_sample(ds, VD_SPLIT_TRAIN, 0, key, x, &label, &e);
    if (want_rc >= 0) check(rc == want_rc, "a sample and vd_image_load disagree", &e);
    if (rc) { check_error(rc, path, &e); return; }
    check(label == 0, "the label", NULL);
    static const float mean3[3] = { 0.485f, 0.456f, 0.406f }, std3[3] = { 0.229f, 0.224f, 0.225f };
    for (int ch = 0; ch < c->c; ch++) {
        float m = c->c == 3 ? mean3[ch] : 0.449f, sd = c->c == 3 ? std3[ch] : 0.226f;
        /* 1e-4: the interpolation's float rounding, far below one level (0.017) */
        float lo = (0.0f - m) / sd - 1e-4f, hi = (1.0f - m) / sd + 1e-4f;
        for (int i = 0; i < c->h * c->w; i++) {
            float v = x[ch * c->h * c->w + i];
            check(isfinite(v) && v >= lo && v <= hi, "a value outside black..white", NULL);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static vd_net nets[NCFG];
    static vd_dataset *sets[NCFG];
    static char path[128];
    if (!path[0]) {
        const char *dir = fz_scratch_dir("image");
        char sub[96];
        snprintf(sub, sizeof sub, "%s/train", dir);
        fz_mkdir(sub);
        snprintf(sub, sizeof sub, "%s/train/a", dir);
        fz_mkdir(sub);
        snprintf(path, sizeof path, "%s/image.ppm", sub);
        static const char ppm[] = "P6\n1 1\n255\n\x10\x80\xf0";
        fz_write(path, ppm, sizeof ppm - 1);
        for (int k = 0; k < NCFG; k++) sets[k] = open_set(dir, &CFGS[k], &nets[k]);
    }
    fz_write(path, data, size);
    vd_err e;
    memset(&e, 0, sizeof e);
    int w = 0, h = 0;
    int rc = vd_image_check_header(path, &w, &h, &e);
    if (rc) { check_error(rc, path, &e); return 0; }
    if ((uint64_t)w * (uint64_t)h > FZ_MAX_PIXELS) return 0;
    bool jpeg = size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
    uint64_t key = size * 0x9E3779B97F4A7C15ull;   /* the crop and flip */
    /* the 3 x 8 x 8 set with every decoder a JPEG can take (others: stb) */
    static const vd_jpeg_decoder decs[3] = { VD_JPEG_TURBO, VD_JPEG_TURBO_FULL, VD_JPEG_STB };
    for (int k = 0; k < (jpeg ? 3 : 1); k++) {
        int lrc = load(path, 3, 8, 8, decs[k], w, h);
        check(vd_data_set_jpeg_decoder(sets[0], decs[k], &e) == 0, "choosing the decoder", &e);
        sample(sets[0], &CFGS[0], path, key, lrc);
    }
    check(vd_data_set_jpeg_decoder(sets[0], VD_JPEG_TURBO, &e) == 0, "choosing the decoder", &e);
    for (int k = 1; k < NCFG; k++) sample(sets[k], &CFGS[k], path, key, -1);
    return 0;
}
