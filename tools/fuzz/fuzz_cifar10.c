/* fuzz_cifar10.c — libFuzzer target: arbitrary bytes as the six CIFAR-10
 * binary files -> vd_data_open("cifar10:DIR") -> vd_data_sample. The input
 * is data_batch_1 FZ_SEP ... data_batch_5 FZ_SEP test_batch; the files the
 * input does not reach repeat its last part (so one 3073-byte record is a
 * whole data set). The net is 3 x 32 x 32, 10 classes. Must never crash,
 * hang or leak, and must keep its contract: VD_OK, or VD_EDATA / VD_ENOMEM
 * with e.code equal to the return value and a message naming the file; an
 * opened data set returns the files' records, normalised, in file order.
 *
 * Build: see tools/fuzz/meson.build. Run:
 *   ./fuzz_cifar10 -max_len=16384 -timeout=5 -dict=tools/fuzz/cifar10.dict \
 *       CORPUS_DIR tools/fuzz/corpus-cifar10 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data.h"
#include "fuzz_util.h"
#include "spec/spec.h"

#define T "fuzz_cifar10"
enum { REC = 3073, PIX = 1024 };

static const char NET[] =
    "name: fz\n"
    "input: { channels: 3, height: 32, width: 32, classes: 10 }\n"
    "layers:\n"
    "  - { name: fc, type: fc, out: 10 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";

static void check(int cond, const char *what, const vd_err *e) { fz_check(cond, T, what, e); }

/* Sample `index` of split is record r of the split's files. */
static void check_sample(vd_dataset *ds, vd_split split, int64_t index, const uint8_t *r,
                         float *x) {
    static const float mean[3] = { 0.4914f, 0.4822f, 0.4465f };
    static const float sd[3] = { 0.2470f, 0.2435f, 0.2616f };
    vd_err e;
    memset(&e, 0, sizeof e);
    int32_t label = -1;
    check(vd_data_sample(ds, split, index, 0, x, &label, &e) == 0, "a sample fails", &e);
    check(label == r[0], "the label is not the file's", NULL);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < PIX; i++)
            check(x[c * PIX + i] == ((float)r[1 + c * PIX + i] / 255.0f - mean[c]) / sd[c],
                  "a pixel is not the file's", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static vd_net net;
    static float x[3 * PIX];
    static int ready;
    vd_err e;
    memset(&e, 0, sizeof e);
    if (!ready) {
        vd_net_init(&net);
        check(vd_spec_parse(NET, sizeof NET - 1, "fz.yaml", &net, &e) == 0, "the net", &e);
        ready = 1;
    }
    const char *dir = fz_scratch_dir("cifar10");
    fz_part parts[6], file[6];
    int np = fz_split(data, size, parts, 6);
    for (int k = 0; k < 6; k++) {
        file[k] = parts[k < np ? k : np - 1];
        char path[128];
        if (k < 5) snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, k + 1);
        else snprintf(path, sizeof path, "%s/test_batch.bin", dir);
        fz_write(path, file[k].p, file[k].n);
    }
    char spec[128];
    snprintf(spec, sizeof spec, "cifar10:%s", dir);
    vd_dataset *ds = NULL;
    int rc = vd_data_open(spec, &net, 1, 0, false, &ds, &e);
    if (rc) {
        check(rc == VD_EDATA || rc == VD_ENOMEM, "unexpected error code", &e);
        check(e.code == rc, "e.code differs from the return value", &e);
        check(strstr(e.msg, dir) != NULL || rc == VD_ENOMEM, "message does not name the file", &e);
        check(ds == NULL, "a failed open left a data set", &e);
        return 0;
    }
    const vd_data_info *in = vd_data_get_info(ds);
    check(in->c == 3 && in->h == 32 && in->w == 32 && in->classes == 10, "shape or classes", NULL);
    int64_t want = 0;
    for (int k = 0; k < 5; k++) want += (int64_t)(file[k].n / REC);
    check(in->n[0] == want && in->n[1] == (int64_t)(file[5].n / REC),
          "sample count is not the files'", NULL);
    /* the first and last record of each file, train files concatenated */
    int64_t base = 0;
    for (int k = 0; k < 6; k++) {
        int64_t nk = (int64_t)(file[k].n / REC);
        vd_split s = k < 5 ? VD_SPLIT_TRAIN : VD_SPLIT_TEST;
        if (k == 5) base = 0;
        check_sample(ds, s, base, file[k].p, x);
        check_sample(ds, s, base + nk - 1, file[k].p + (size_t)(nk - 1) * REC, x);
        base += nk;
    }
    vd_data_close(&ds);
    return 0;
}
