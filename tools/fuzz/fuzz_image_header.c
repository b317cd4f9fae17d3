/* fuzz_image_header.c — libFuzzer target: arbitrary bytes as an image file
 * -> vd_image_check_header (the folder data set's check of every image,
 * before any decode) and vd_image_decode_error (its diagnosis of a failed
 * decode). Must never crash, hang or leak, and must keep the contracts: the
 * check gives VD_OK with 1 <= width, height and width x height <=
 * VD_IMAGE_MAX_PIXELS, or VD_EDATA with e.code set and a message naming the
 * file; a file that passes it passes vd_image_check_data on its bytes (the
 * same length checks, on the whole file in memory) but for a PNG CRC; the
 * diagnosis is always VD_EDATA naming the file, and calls a file with JPEG's
 * first bytes but no end-of-image marker a truncated JPEG.
 *
 * Build: see tools/fuzz/meson.build. Run:
 *   ./fuzz_image_header -max_len=16384 -timeout=5 -dict=tools/fuzz/image.dict \
 *       CORPUS_DIR tools/fuzz/corpus-image */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/data_impl.h"
#include "fuzz_util.h"

#define T "fuzz_image_header"

static void check(int cond, const char *what, const vd_err *e) { fz_check(cond, T, what, e); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[96];
    if (!path[0]) snprintf(path, sizeof path, "%s/image.png", fz_scratch_dir("image_header"));
    fz_write(path, data, size);
    vd_err e;
    memset(&e, 0, sizeof e);
    int w = -1, h = -1;
    int rc = vd_image_check_header(path, &w, &h, &e);
    if (rc) {
        check(rc == VD_EDATA, "unexpected error code", &e);
        check(e.code == rc, "e.code differs from the return value", &e);
        check(strncmp(e.msg, path, strlen(path)) == 0, "message does not name the file", &e);
    } else {
        check(w >= 1 && h >= 1 && (uint64_t)w * (uint64_t)h <= VD_IMAGE_MAX_PIXELS,
              "size outside the limits", NULL);
        /* the same length checks on the bytes in memory (read a window at a
         * time above, whole here) agree; only PNG's CRCs are added */
        memset(&e, 0, sizeof e);
        rc = vd_image_check_data(path, data, size, &e);
        int png = vd_image_kind_of(data, size) == VD_IMAGE_PNG;
        check(rc == 0 || (rc == VD_EDATA && png && strstr(e.msg, "corrupt PNG: the CRC")),
              "the checks at open and before decoding disagree", &e);
        if (rc) check(strncmp(e.msg, path, strlen(path)) == 0, "message does not name the file", &e);
    }
    memset(&e, 0, sizeof e);
    rc = vd_image_decode_error(path, (size & 1) ? "a reason" : NULL, &e);
    check(rc == VD_EDATA && e.code == VD_EDATA, "the diagnosis is not VD_EDATA", &e);
    check(strncmp(e.msg, path, strlen(path)) == 0, "the diagnosis does not name the file", &e);
    int jpeg = size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
    int eoi = size >= 2 && data[size - 2] == 0xFF && data[size - 1] == 0xD9;
    check((strstr(e.msg, "truncated JPEG") != NULL) == (jpeg && !eoi),
          "a truncated JPEG is not named so, or another file is", &e);
    return 0;
}
