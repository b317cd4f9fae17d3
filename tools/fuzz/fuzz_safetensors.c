/* fuzz_safetensors.c — libFuzzer target: arbitrary bytes as a checkpoint
 * file -> vd_ckpt_load_model_ex (header length, JSON header, dtypes, shapes,
 * offsets, the net match, finite values, the class names of the "classes"
 * metadata) for a small fixed net, and vd_ckpt_init_model with --init-skip
 * '^fc\.' (the file's size not bounded by the net's, its fc tensors
 * skipped). Must never crash, hang or leak, and must keep its contract:
 * VD_OK, or VD_EDATA / VD_ENOMEM with e.code equal to the return value and
 * a message naming the file.
 *
 * Build: see tools/fuzz/meson.build. Run:
 *   ./fuzz_safetensors -max_len=8192 -timeout=5 -dict=tools/fuzz/safetensors.dict \
 *       CORPUS_DIR tools/fuzz/corpus-safetensors */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_util.h"
#include "spec/spec.h"
#include "train/ckpt.h"

static const char NET[] =
    "name: tiny\n"
    "input: { channels: 1, height: 4, width: 4, classes: 3 }\n"
    "layers:\n"
    "  - { name: conv, type: conv, out: 2, kernel: 3, pad: 1 }\n"
    "  - { name: bn, type: batchnorm }\n"
    "  - { name: fc, type: fc, out: 3 }\n"
    "  - { name: loss, type: softmax_cross_entropy }\n";

static void check(int cond, const char *what, const vd_err *e) {
    if (!cond) {
        fprintf(stderr, "fuzz_safetensors: contract broken: %s (%s)\n", what, e ? e->msg : "");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static vd_net net;
    static float *params;
    static char path[96];
    vd_err e;
    memset(&e, 0, sizeof e);
    if (!params) {
        vd_net_init(&net);
        check(vd_spec_parse(NET, sizeof NET - 1, "tiny.yaml", &net, &e) == 0, "the net", &e);
        params = calloc((size_t)net.param_floats, sizeof *params);
        check(params != NULL, "out of memory", NULL);
        snprintf(path, sizeof path, "%s/input.safetensors", fz_scratch_dir("safetensors"));
    }
    fz_write(path, data, size);
    for (int skip = 0; skip < 2; skip++) {
        int64_t it = -1;
        char summary[1024];
        vd_ckpt_classes names = { 0 };
        memset(&e, 0, sizeof e);
        int rc = skip ? vd_ckpt_init_model(path, &net, params, "^fc\\.", 1, summary,
                                           sizeof summary, &e)
                      : vd_ckpt_load_model_ex(path, &net, params, &it, &names, &e);
        check(names.n >= 0 && names.n <= net.classes, "more class names than classes", &e);
        for (int i = 0; i < names.n; i++) check(names.names[i] != NULL, "a class name is missing", &e);
        vd_ckpt_classes_free(&names);
        if (rc) {
            check(rc == VD_EDATA || rc == VD_ENOMEM, "unexpected error code", &e);
            check(e.code == rc, "e.code differs from the return value", &e);
            check(strstr(e.msg, path) != NULL || rc == VD_ENOMEM, "message does not name the file", &e);
        } else {
            for (int64_t i = 0; i < net.param_floats; i++)
                check(params[i] == params[i] && params[i] - params[i] == 0, "a loaded value is not finite", &e);
        }
    }
    return 0;
}
