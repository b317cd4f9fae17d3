/* fuzz_mnist.c — libFuzzer target: arbitrary bytes as the four MNIST IDX
 * files -> vd_data_open("mnist:DIR") -> vd_data_sample. The input is
 * train-images FZ_SEP train-labels FZ_SEP t10k-images FZ_SEP t10k-labels; a
 * test file that is missing repeats the train file of its kind (a missing
 * train label file: the images). The net is 1 x ROWS x COLS, from the train
 * images' header where it names at most 4096 x 4096 (28 x 28 otherwise).
 * Must never crash, hang or leak, and must keep its contract: VD_OK, or
 * VD_EDATA / VD_EUSAGE (shape) / VD_ENOMEM with e.code equal to the return
 * value and a message naming the directory; an opened data set returns the
 * files' bytes, normalised, and their labels.
 *
 * Build: see tools/fuzz/meson.build. Run:
 *   ./fuzz_mnist -max_len=16384 -timeout=5 -dict=tools/fuzz/mnist.dict \
 *       CORPUS_DIR tools/fuzz/corpus-mnist */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data.h"
#include "fuzz_util.h"
#include "spec/spec.h"

#define T "fuzz_mnist"

static void check(int cond, const char *what, const vd_err *e) { fz_check(cond, T, what, e); }

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The net 1 x rows x cols, 10 classes (parsed again only when the shape changes). */
static const vd_net *net_for(uint32_t rows, uint32_t cols) {
    static vd_net net;
    static uint32_t have_r, have_c;
    if (rows == have_r && cols == have_c) return &net;
    vd_net_free(&net);
    vd_net_init(&net);
    char spec[400];
    int n = snprintf(spec, sizeof spec,
                     "name: fz\n"
                     "input: { channels: 1, height: %u, width: %u, classes: 10 }\n"
                     "layers:\n"
                     "  - { name: fc, type: fc, out: 10 }\n"
                     "  - { name: loss, type: softmax_cross_entropy }\n", rows, cols);
    vd_err e;
    memset(&e, 0, sizeof e);
    check(vd_spec_parse(spec, (size_t)n, "fz.yaml", &net, &e) == 0, "the net", &e);
    have_r = rows;
    have_c = cols;
    return &net;
}

/* Sample `index` of split: the file's pixels, normalised, and its label. */
static void check_sample(vd_dataset *ds, vd_split split, int64_t index, const fz_part *img,
                         const fz_part *lab, float *x) {
    const vd_data_info *in = vd_data_get_info(ds);
    int64_t px = (int64_t)in->h * in->w;
    vd_err e;
    memset(&e, 0, sizeof e);
    int32_t label = -1;
    check(vd_data_sample(ds, split, index, 0, x, &label, &e) == 0, "a sample fails", &e);
    check(label == lab->p[8 + index], "the label is not the file's", NULL);
    const uint8_t *src = img->p + 16 + index * px;
    for (int64_t i = 0; i < px; i++)
        check(x[i] == ((float)src[i] / 255.0f - 0.1307f) / 0.3081f, "a pixel is not the file's",
              NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const names[4] = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" };
    const char *dir = fz_scratch_dir("mnist");
    fz_part parts[4], file[4];
    int np = fz_split(data, size, parts, 4);
    for (int k = 0; k < 4; k++) {
        file[k] = parts[k < np ? k : k >= 2 && k - 2 < np ? k - 2 : 0];
        char path[128];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        fz_write(path, file[k].p, file[k].n);
    }
    uint32_t rows = 28, cols = 28;
    if (file[0].n >= 16) {
        uint32_t r = be32(file[0].p + 8), c = be32(file[0].p + 12);
        if (r >= 1 && r <= 4096 && c >= 1 && c <= 4096) { rows = r; cols = c; }
    }
    const vd_net *net = net_for(rows, cols);
    char spec[128];
    snprintf(spec, sizeof spec, "mnist:%s", dir);
    vd_dataset *ds = NULL;
    vd_err e;
    memset(&e, 0, sizeof e);
    int rc = vd_data_open(spec, net, 1, 0, false, &ds, &e);
    if (rc) {
        check(rc == VD_EDATA || rc == VD_EUSAGE || rc == VD_ENOMEM, "unexpected error code", &e);
        check(e.code == rc, "e.code differs from the return value", &e);
        check(strstr(e.msg, dir) != NULL || rc == VD_ENOMEM, "message does not name the data", &e);
        check(ds == NULL, "a failed open left a data set", &e);
        return 0;
    }
    const vd_data_info *in = vd_data_get_info(ds);
    check(in->c == 1 && in->h == (int)rows && in->w == (int)cols && in->classes == 10,
          "shape or classes", NULL);
    check(in->n[0] >= 1 && in->n[1] >= 1, "an empty split", NULL);
    float *x = malloc(sizeof(float) * (size_t)rows * cols);
    check(x != NULL, "out of memory", NULL);
    for (int s = 0; s < 2; s++) {
        int64_t n = in->n[s];
        check(n == be32(file[2 * s + 1].p + 4) && n == be32(file[2 * s].p + 4),
              "sample count is not the files'", NULL);
        check_sample(ds, (vd_split)s, 0, &file[2 * s], &file[2 * s + 1], x);
        check_sample(ds, (vd_split)s, n - 1, &file[2 * s], &file[2 * s + 1], x);
    }
    free(x);
    vd_data_close(&ds);
    check(ds == NULL, "vd_data_close did not clear the pointer", NULL);
    return 0;
}
