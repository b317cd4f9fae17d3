/* test_data_harden.c — the data readers against hostile files:
 * every image checked against its own lengths (a file cut short is refused
 * when the data set opens, naming it; PNG CRCs before decoding), no data
 * path ever cut short (long paths work, one past PATH_MAX is exit 4 naming
 * it), and every reader checks its header against the file size before it
 * reads the data (a multi-GiB bad file costs a few bytes of reading: the
 * counted high-water mark stays small). The huge files are sparse
 * (ftruncate): nothing is written but their first bytes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tutil.h"
#include "data/data.h"
#include "data/data_impl.h"

#define GiB (1ull << 30)
/* The most the counted high-water mark may grow while a reader refuses a
 * multi-GiB file: the header check reads at most a megabyte of an image
 * (stb_image's header scan) and a 64 KiB window; reading the file would
 * count gigabytes. */
#define SMALL_PEAK (16ull << 20)

static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

/* An IDX split of n 28 x 28 images (labels i % 10) at DIR/PREFIX-... */
static void write_mnist_split(const char *dir, const char *prefix, uint32_t n) {
    size_t isz = 16 + (size_t)n * 784, lsz = 8 + n;
    unsigned char *img = calloc(1, isz), *lab = calloc(1, lsz);
    ck_assert(img && lab);
    be32(img, 0x803); be32(img + 4, n); be32(img + 8, 28); be32(img + 12, 28);
    be32(lab, 0x801); be32(lab + 4, n);
    for (uint32_t i = 0; i < n; i++) lab[8 + i] = (unsigned char)(i % 10);
    char *p = vd_strfmt(NULL, "%s/%s-images-idx3-ubyte", dir, prefix);
    tu_write(p, img, isz);
    vd_free(p);
    p = vd_strfmt(NULL, "%s/%s-labels-idx1-ubyte", dir, prefix);
    tu_write(p, lab, lsz);
    vd_free(p);
    free(img);
    free(lab);
}

/* A sparse file of size bytes at path whose first n bytes are b. */
static void write_sparse(const char *path, const void *b, size_t n, uint64_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, b, n), (ssize_t)n);
    ck_assert_msg(ftruncate(fd, (off_t)size) == 0, "ftruncate %s: %s", path, strerror(errno));
    close(fd);
}

static uint64_t peak_now(void) {
    vd_mem_stats st;
    vd_mem_stats_get(&st);
    return st.peak;
}

/* Open spec for a c x h x w net; the rc, *ds closed again on success. */
static int open_data(const char *kind, const char *dir, int c, int h, int w, vd_err *e) {
    vd_net net;
    tu_tiny_net(&net, c, h, w, 10, false, 2);
    char *spec = vd_strfmt(NULL, "%s:%s", kind, dir);
    ck_assert_ptr_nonnull(spec);
    vd_dataset *ds = NULL;
    int rc = vd_data_open(spec, &net, 2, 1, false, &ds, e);
    if (!rc) vd_data_close(&ds);
    ck_assert_ptr_null(ds);
    vd_free(spec);
    vd_net_free(&net);
    return rc;
}

/* ---- 6. headers before data ------------------------------------------------ */

/* A sparse 6 GiB MNIST file with a bad magic is answered from its first
 * bytes (a reader that reads the whole file first takes 33 s and 6.3 GB
 * before exit 5). */
START_TEST(mnist_huge_bad_header_answers_from_its_first_bytes) {
    char *d = vdt_tmpdir("vdnn-data-harden");
    write_mnist_split(d, "train", 20);
    write_mnist_split(d, "t10k", 10);
    char *p = vd_strfmt(NULL, "%s/train-images-idx3-ubyte", d);
    vd_err e;
    unsigned char h[16];
    be32(h, 0x0BAD0803); be32(h + 4, 20); be32(h + 8, 28); be32(h + 12, 28);
    write_sparse(p, h, sizeof h, 6 * GiB);
    uint64_t peak0 = peak_now();
    double t0 = vd_now();
    ck_assert_int_eq(open_data("mnist", d, 1, 28, 28, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "magic 0x0bad0803"), "%s", e.msg);
    /* a good magic whose counts do not fill the file: the sizes, not the data */
    be32(h, 0x803);
    write_sparse(p, h, sizeof h, 6 * GiB);
    ck_assert_int_eq(open_data("mnist", d, 1, 28, 28, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "oversized IDX file: header promises 15680 "
                                             "data bytes"), "%s", e.msg);
    /* the labels' header is checked before the images are read */
    write_mnist_split(d, "train", 20);
    vd_free(p);
    p = vd_strfmt(NULL, "%s/train-labels-idx1-ubyte", d);
    be32(h, 0x801); be32(h + 4, 20);
    write_sparse(p, h, 8, 6 * GiB);
    ck_assert_int_eq(open_data("mnist", d, 1, 28, 28, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "oversized"), "%s", e.msg);
    ck_assert_msg(peak_now() - peak0 < SMALL_PEAK, "the high-water mark grew by %llu bytes",
                  (unsigned long long)(peak_now() - peak0));
    /* a generous bound on a loaded machine; reading would take tens of seconds */
    ck_assert_msg(vd_now() - t0 < 5, "took %.1f s", vd_now() - t0);
    write_mnist_split(d, "train", 20);
    ck_assert_msg(open_data("mnist", d, 1, 28, 28, &e) == 0, "%s", e.msg);
    vd_free(p);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* A CIFAR-10 batch holds at most 10000 records: a larger file is refused on
 * its size, before it is read. */
START_TEST(cifar_huge_batch_refused_on_its_size) {
    char *d = vdt_tmpdir("vdnn-data-harden");
    unsigned char rec[3073] = { 3 };
    for (int i = 1; i <= 6; i++) {
        char *p = i <= 5 ? vd_strfmt(NULL, "%s/data_batch_%d.bin", d, i)
                         : vd_strfmt(NULL, "%s/test_batch.bin", d);
        tu_write(p, rec, sizeof rec);
        vd_free(p);
    }
    vd_err e;
    ck_assert_msg(open_data("cifar10", d, 3, 32, 32, &e) == 0, "%s", e.msg);
    char *p = vd_strfmt(NULL, "%s/data_batch_2.bin", d);
    uint64_t peak0 = peak_now();
    write_sparse(p, rec, sizeof rec, 6 * GiB);
    ck_assert_int_eq(open_data("cifar10", d, 3, 32, 32, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "not a CIFAR-10 batch (at most 10000 "
                                             "records"), "%s", e.msg);
    /* 10001 records: one too many, also from the size alone */
    write_sparse(p, rec, sizeof rec, 10001ull * 3073);
    ck_assert_int_eq(open_data("cifar10", d, 3, 32, 32, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "too large"), "%s", e.msg);
    ck_assert_msg(peak_now() - peak0 < SMALL_PEAK, "the high-water mark grew by %llu bytes",
                  (unsigned long long)(peak_now() - peak0));
    /* 10000 records: the real batches' size */
    write_sparse(p, rec, sizeof rec, 10000ull * 3073);
    ck_assert_msg(open_data("cifar10", d, 3, 32, 32, &e) == 0, "%s", e.msg);
    vd_free(p);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* DIR/train/a/ok.pgm (a 28 x 28 grey image) and DIR/train/a/NAME. */
static char *folder_with(const char *name, const void *b, size_t n, uint64_t size, char **path) {
    char *d = vdt_tmpdir("vdnn-data-harden");
    char *p = vd_strfmt(NULL, "%s/train", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    vd_free(p);
    p = vd_strfmt(NULL, "%s/train/a", d);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    vd_free(p);
    p = vd_strfmt(NULL, "%s/train/a/ok.pgm", d);
    unsigned char pgm[15 + 784];
    memcpy(pgm, "P5\n28 28\n255\n\0\0", 15);
    memset(pgm + 13, 100, 784);
    tu_write(p, pgm, 13 + 784);
    vd_free(p);
    *path = vd_strfmt(NULL, "%s/train/a/%s", d, name);
    if (size) write_sparse(*path, b, n, size);
    else tu_write(*path, b, n);
    return d;
}

/* Images: a huge file with a bad signature or a bad header answers from
 * its first bytes (6 GiB: over the 1 GiB a file may have; 900 MiB: under
 * it, refused by its signature or its chunk list). */
START_TEST(folder_huge_images_answer_from_their_first_bytes) {
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A };
    struct { uint64_t size; bool png; const char *want; } cases[] = {
        { 6 * GiB, false, "cat.png: too large" },
        { 900ull << 20, false, "cat.png: not a JPEG, PNG, BMP, PPM or PGM image" },
        /* a good PNG header, then zeros: no chunk where the next one should be */
        { 900ull << 20, true, "cat.png: corrupt PNG: no chunk at offset 33" },
    };
    uint64_t peak0 = peak_now();
    double t0 = vd_now();
    for (size_t k = 0; k < VD_ARRAY_LEN(cases); k++) {
        char *p;
        unsigned char b[33] = "not a PNG at all";
        if (cases[k].png) {
            memcpy(b, tu_png4, 33);     /* signature and IHDR (4 x 4 RGB) */
            ck_assert_mem_eq(b, sig, 8);
        }
        char *d = folder_with("cat.png", b, sizeof b, cases[k].size, &p);
        vd_err e;
        ck_assert_int_eq(open_data("folder", d, 3, 8, 8, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, cases[k].want), "%zu: %s", k, e.msg);
        vd_free(p);
        vdt_rmrf(d);
        vd_free(d);
    }
    ck_assert_msg(peak_now() - peak0 < SMALL_PEAK, "the high-water mark grew by %llu bytes",
                  (unsigned long long)(peak_now() - peak0));
    ck_assert_msg(vd_now() - t0 < 5, "took %.1f s", vd_now() - t0);
}
END_TEST

/* ---- 4. every image against its own lengths --------------------------------- */

/* A w x h BMP (40-byte header) of bpp bits (8: a 256-entry grey palette),
 * top-down when top_down; pixel (x, y) = (x + y) * 4 in every channel.
 * Returns its size; b must hold it. */
static size_t make_bmp(unsigned char *b, int w, int h, int bpp, bool top_down) {
    size_t pal = bpp == 8 ? 1024 : 0, off = 54 + pal;
    size_t stride = ((size_t)w * (size_t)bpp + 31) / 32 * 4, n = off + stride * (size_t)h;
    memset(b, 0, n);
    b[0] = 'B'; b[1] = 'M';
    uint32_t f[] = { (uint32_t)n, 0, (uint32_t)off, 40, (uint32_t)w,
                     top_down ? (uint32_t)-h : (uint32_t)h };
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 4; k++) b[2 + 4 * i + k] = (unsigned char)(f[i] >> (8 * k));
    b[26] = 1;
    b[28] = (unsigned char)bpp;
    for (size_t i = 0; i < pal / 4; i++) b[54 + 4 * i] = b[55 + 4 * i] = b[56 + 4 * i] = (unsigned char)i;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < bpp / 8; c++)
                b[off + (size_t)y * stride + (size_t)x * (size_t)(bpp / 8) + (size_t)c] =
                    (unsigned char)((x + y) * 4);
    return n;
}

/* An image cut short must not train on made-up pixels (a 40 x 30 BMP cut to
 * 60 bytes would, with exit 0). Every accepted format cut short is refused
 * at open, naming the file:
 * BMP (pixel array past the end), PNG (no IEND, a chunk cut), JPEG (tested
 * in test_data.c), PPM / PGM (their samples). Whole files of the same
 * layouts still open and decode. */
START_TEST(truncated_images_refused_at_open) {
    static unsigned char bmp[54 + 1024 + 160 * 30];
    struct { int w, h, bpp; bool top_down; } layouts[] = {
        { 40, 30, 24, false }, { 37, 5, 24, true }, { 13, 7, 8, false }, { 9, 4, 32, false },
    };
    vd_err e;
    for (size_t k = 0; k < VD_ARRAY_LEN(layouts); k++) {
        size_t n = make_bmp(bmp, layouts[k].w, layouts[k].h, layouts[k].bpp, layouts[k].top_down);
        char *p;
        char *d = folder_with("x.bmp", bmp, n, 0, &p);
        ck_assert_msg(open_data("folder", d, 3, 8, 8, &e) == 0, "layout %zu: %s", k, e.msg);
        vd_image im;
        ck_assert_msg(vd_image_load(p, 3, 8, 8, VD_JPEG_TURBO, &im, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(im.w, layouts[k].w);
        ck_assert_int_eq(im.h, layouts[k].h);
        /* pixel (1, 0) of the picture: the file's first row unless bottom-up */
        int y0 = layouts[k].top_down ? 0 : layouts[k].h - 1;
        ck_assert_int_eq(im.px[3], (1 + y0) * 4);
        vd_image_free(&im);
        /* the last row's padding is not needed; one byte of pixels is */
        size_t rowb = ((size_t)layouts[k].w * (size_t)layouts[k].bpp + 7) / 8;
        size_t stride = (rowb + 3) / 4 * 4;
        tu_write(p, bmp, n - (stride - rowb));
        ck_assert_msg(open_data("folder", d, 3, 8, 8, &e) == 0, "layout %zu: %s", k, e.msg);
        tu_write(p, bmp, n - (stride - rowb) - 1);
        ck_assert_int_eq(open_data("folder", d, 3, 8, 8, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "truncated BMP"), "%s", e.msg);
        ck_assert_int_eq(vd_image_load(p, 3, 8, 8, VD_JPEG_TURBO, &im, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, "truncated BMP"), "%s", e.msg);
        vd_free(p);
        vdt_rmrf(d);
        vd_free(d);
    }
    /* the case: 40 x 30, 24 bits, cut to 60 bytes */
    size_t n = make_bmp(bmp, 40, 30, 24, false);
    ck_assert_uint_eq(n, 54 + 120 * 30);
    char *p;
    char *d = folder_with("cut.bmp", bmp, 60, 0, &p);
    ck_assert_int_eq(open_data("folder", d, 3, 8, 8, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "cut.bmp: truncated BMP: 40 x 30 pixels of 24 bits need the file "
                         "to hold 3654 bytes (pixels from offset 54), it has 60"), "%s", e.msg);
    vd_free(p);
    vdt_rmrf(d);
    vd_free(d);

    /* PNG: whole; without IEND; cut inside IDAT; the chunks after a
     * length that is not a chunk's */
    struct { size_t n; const char *want; } png_cuts[] = {
        { TU_PNG4_LEN, NULL },
        { TU_PNG4_LEN - 12, "truncated PNG: the file ends after 102 bytes, before the IEND" },
        { 70, "truncated or corrupt PNG: a chunk of 57 bytes at offset 33 (IDAT) runs past the "
              "end of the file (70 bytes)" },
        { 33, "truncated PNG: the file ends after 33 bytes" },
    };
    for (size_t k = 0; k < VD_ARRAY_LEN(png_cuts); k++) {
        d = folder_with("x.png", tu_png4, png_cuts[k].n, 0, &p);
        int rc = open_data("folder", d, 3, 8, 8, &e);
        if (!png_cuts[k].want) {
            ck_assert_msg(rc == 0, "%s", e.msg);
        } else {
            ck_assert_int_eq(rc, VD_EDATA);
            ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, png_cuts[k].want), "%zu: %s", k,
                          e.msg);
        }
        vd_free(p);
        vdt_rmrf(d);
        vd_free(d);
    }

    /* PPM: its samples */
    static const char ppm[] = "P6 2 2 255\n0123456789a";      /* 11 of 12 sample bytes */
    d = folder_with("x.ppm", ppm, sizeof ppm - 1, 0, &p);
    ck_assert_int_eq(open_data("folder", d, 3, 8, 8, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "x.ppm: truncated PPM/PGM"), "%s", e.msg);
    vd_free(p);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* PNG CRCs: a whole PNG with one bit of a CRC flipped passes the check at
 * open (lengths only: the CRCs need every byte) and is refused before it
 * is decoded, naming the file. */
START_TEST(png_crc_checked_before_decoding) {
    char *p;
    unsigned char png[TU_PNG4_LEN];
    memcpy(png, tu_png4, sizeof png);
    char *d = folder_with("x.png", png, sizeof png, 0, &p);
    vd_err e;
    vd_image im;
    ck_assert_msg(vd_image_load(p, 3, 4, 4, VD_JPEG_TURBO, &im, &e) == 0, "%s", e.msg);
    /* pixel (1, 2): 40 * 2 + 10 * 1 */
    ck_assert_int_eq(im.px[(2 * 4 + 1) * 3], 90);
    vd_image_free(&im);
    /* a bit of each chunk's CRC, then a bit of IDAT's data */
    static const size_t flips[] = { 29, 33 + 8 + 57, 33 + 12 + 57 + 8, 33 + 8 + 20 };
    static const char *const chunk[] = { "IHDR", "IDAT", "IEND", "IDAT" };
    for (size_t k = 0; k < VD_ARRAY_LEN(flips); k++) {
        memcpy(png, tu_png4, sizeof png);
        png[flips[k]] ^= 0x10;
        tu_write(p, png, sizeof png);
        ck_assert_int_eq(vd_image_load(p, 3, 4, 4, VD_JPEG_TURBO, &im, &e), VD_EDATA);
        char want[64];
        snprintf(want, sizeof want, "corrupt PNG: the CRC of the %s chunk", chunk[k]);
        ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, want), "%zu: %s", k, e.msg);
        if (k == 0) continue;       /* IHDR: stbi_info reads it, CRC unchecked, at open */
        vd_net net;
        tu_tiny_net(&net, 3, 4, 4, 10, false, 2);
        char *spec = vd_strfmt(NULL, "folder:%s", d);
        vd_dataset *ds;
        ck_assert_msg(vd_data_open(spec, &net, 2, 1, false, &ds, &e) == 0, "%s", e.msg);
        float x[3 * 16];
        int32_t y;
        /* sorted: ok.pgm, x.png */
        ck_assert_msg(vd_data_sample(ds, VD_SPLIT_TRAIN, 0, 0, x, &y, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(vd_data_sample(ds, VD_SPLIT_TRAIN, 1, 0, x, &y, &e), VD_EDATA);
        ck_assert_msg(strstr(e.msg, p) && strstr(e.msg, want), "%s", e.msg);
        vd_data_close(&ds);
        vd_free(spec);
        vd_net_free(&net);
    }
    vd_free(p);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* JPEG: bytes after the end-of-image marker (padding, an appended video)
 * are fine; the marker must be there. */
START_TEST(jpeg_end_marker_found_past_padding) {
    static const unsigned char jpg[] = {
        0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 'J', 'F',         /* APP0 of 2 bytes */
        0xFF, 0xDA, 0, 8, 1, 1, 0, 0, 0x3F, 0,          /* a scan header */
        0x12, 0xFF, 0x00, 0x34, 0xFF, 0xD3, 0x56,       /* data, a stuffed FF, a restart */
        0xFF, 0xD9 };                                   /* EOI */
    unsigned char b[sizeof jpg + 300];
    memcpy(b, jpg, sizeof jpg);
    memset(b + sizeof jpg, 0, 300);
    b[sizeof jpg + 10] = 0xFF;                          /* padding that is no marker */
    vd_err e;
    /* vd_image_check_data: the lengths alone (the decoders are not run) */
    ck_assert_msg(vd_image_check_data("x.jpg", b, sizeof jpg, &e) == 0, "%s", e.msg);
    ck_assert_msg(vd_image_check_data("x.jpg", b, sizeof b, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(vd_image_check_data("x.jpg", b, sizeof jpg - 2, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "x.jpg: truncated JPEG: no end-of-image marker"), "%s", e.msg);
    ck_assert_int_eq(vd_image_check_data("x.jpg", b, 14, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "x.jpg: truncated JPEG: the segment of marker FF DA at offset 8 "
                         "(8 bytes) runs past the end of the file (14 bytes)"), "%s", e.msg);
    ck_assert_int_eq(vd_image_check_data("x.jpg", b, 8, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "x.jpg: truncated JPEG: the file ends after 8 bytes, before its "
                         "image data"), "%s", e.msg);
    /* the same from a file (the data set's check reads it a window at a time) */
    char *d = vdt_tmpdir("vdnn-data-harden");
    char *p = vd_strfmt(NULL, "%s/x.jpg", d);
    tu_write(p, b, sizeof b);
    ck_assert_int_eq(vd_image_check_header(p, NULL, NULL, &e), VD_EDATA);
    /* its lengths are whole; it has no frame header, which stb_image says */
    ck_assert_msg(strstr(e.msg, "its header cannot be read"), "%s", e.msg);
    tu_write(p, b, sizeof jpg - 1);
    ck_assert_int_eq(vd_image_check_header(p, NULL, NULL, &e), VD_EDATA);
    ck_assert_msg(strstr(e.msg, "x.jpg: truncated JPEG: no end-of-image marker"), "%s", e.msg);
    vd_free(p);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

/* ---- 5. paths ------------------------------------------------------------------ */

/* Directories under base, components of 200 characters, until the path is
 * at least len bytes long; made through descriptors (mkdirat), so that
 * paths past PATH_MAX can be made too. The path (vd_free). */
static char *long_dir(const char *base, size_t len) {
    char comp[201];
    memset(comp, 'd', 200);
    comp[200] = 0;
    char *p = vd_strdup(base, NULL);
    int fd = open(base, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fd, 0);
    for (int i = 0; strlen(p) < len; i++) {
        size_t left = len - strlen(p) - 1;
        comp[0] = (char)('a' + i % 26);
        if (left < 200) comp[left > 0 ? left : 1] = 0;
        ck_assert_msg(mkdirat(fd, comp, 0755) == 0, "mkdirat: %s", strerror(errno));
        int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY);
        ck_assert_int_ge(nfd, 0);
        close(fd);
        fd = nfd;
        char *np = vd_strfmt(NULL, "%s/%s", p, comp);
        vd_free(p);
        p = np;
    }
    close(fd);
    return p;
}

/* No data path is cut short (a fixed 1,100-byte buffer would read the
 * wrong files for longer ones). A data directory of 4000 bytes works (its files'
 * paths are under PATH_MAX); one whose files' paths are longer is exit 4
 * naming the path; a class directory past PATH_MAX is an error, not a
 * class skipped. */
START_TEST(long_paths_work_or_exit_4) {
    char *d = vdt_tmpdir("vdnn-data-harden");
    char *m = long_dir(d, 4000);
    ck_assert_uint_ge(strlen(m), 4000);
    write_mnist_split(m, "train", 20);
    write_mnist_split(m, "t10k", 10);
    vd_err e;
    ck_assert_msg(open_data("mnist", m, 1, 28, 28, &e) == 0, "%s", e.msg);
    /* CIFAR-10 and folders there too */
    unsigned char rec[3073] = { 7 };
    for (int i = 1; i <= 6; i++) {
        char *p = i <= 5 ? vd_strfmt(NULL, "%s/data_batch_%d.bin", m, i)
                         : vd_strfmt(NULL, "%s/test_batch.bin", m);
        tu_write(p, rec, sizeof rec);
        vd_free(p);
    }
    ck_assert_msg(open_data("cifar10", m, 3, 32, 32, &e) == 0, "%s", e.msg);
    char *p = vd_strfmt(NULL, "%s/train", m);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    vd_free(p);
    p = vd_strfmt(NULL, "%s/train/a", m);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    vd_free(p);
    p = vd_strfmt(NULL, "%s/train/a/x.png", m);
    tu_write(p, tu_png4, TU_PNG4_LEN);
    ck_assert_msg(open_data("folder", m, 3, 4, 4, &e) == 0, "%s", e.msg);
    /* a class whose directory's path is past PATH_MAX */
    int fd = open(m, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fd, 0);
    char cls[201];
    memset(cls, 'c', 200);
    cls[200] = 0;
    int tfd = openat(fd, "train", O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(tfd, 0);
    ck_assert_int_eq(mkdirat(tfd, cls, 0755), 0);
    close(tfd);
    close(fd);
    ck_assert_int_eq(open_data("folder", m, 3, 4, 4, &e), VD_EIO);
    ck_assert_msg(strstr(e.msg, "path too long (") && strstr(e.msg, d), "%s", e.msg);
    vd_free(p);

    /* files past PATH_MAX (DIR/train too): exit 4, the reason first, then
     * the path */
    char *tb = vd_strfmt(NULL, "%s/t", d);
    ck_assert_int_eq(mkdir(tb, 0755), 0);
    char *t = long_dir(tb, PATH_MAX - 4);
    vd_free(tb);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(open_data(k == 0 ? "mnist" : k == 1 ? "cifar10" : "folder", t,
                                   k ? 3 : 1, k ? 32 : 28, k ? 32 : 28, &e), VD_EIO);
        ck_assert_msg(strstr(e.msg, "path too long (") && strstr(e.msg, d), "%d: %s", k, e.msg);
    }
    /* and through vdnn-train: exit status 4 */
    const char *b = getenv("VD_BUILDDIR"), *s = getenv("VD_SRCDIR");
    ck_assert(b && s);
    char *train = vd_strfmt(NULL, "%s/vdnn-train", b), *net = vd_strfmt(NULL, "%s/nets/lenet.yaml", s);
    char *data = vd_strfmt(NULL, "mnist:%s", t), *log = vd_strfmt(NULL, "%s/log", d);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int o = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || dup2(o, 1) < 0 || dup2(o, 2) < 0) _exit(126);
        execl(train, train, net, "--data", data, "--iters", "1", (char *)NULL);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    size_t n;
    char *out = vdt_slurp(log, &n);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 4 && strstr(out, "path too long ("),
                  "status %d:\n%s", st, out);
    vd_free(out);
    vd_free(train);
    vd_free(net);
    vd_free(data);
    vd_free(log);
    vd_free(t);
    vd_free(m);
    vdt_rmrf(d);
    vd_free(d);
}
END_TEST

VDT_MAIN("data-harden", 0,
         mnist_huge_bad_header_answers_from_its_first_bytes, cifar_huge_batch_refused_on_its_size,
         folder_huge_images_answer_from_their_first_bytes, truncated_images_refused_at_open,
         png_crc_checked_before_decoding, jpeg_end_marker_found_past_padding,
         long_paths_work_or_exit_4)
