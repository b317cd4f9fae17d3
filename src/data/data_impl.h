/* data_impl.h — private: the dataset vtable shared by the data/ sources. */
#ifndef VD_DATA_IMPL_H
#define VD_DATA_IMPL_H

#include "data/data.h"

struct vd_dataset {
    vd_data_info info;
    uint64_t seed;
    bool augment;
    void *impl;                 /* owned by the kind */
    /* One sample; see vd_data_sample. Must be safe to call concurrently. */
    int (*sample)(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                  float *x, int32_t *label, vd_err *e);
    void (*close)(vd_dataset *ds);   /* frees impl */
};

/* Each kind fills ds (info, impl, sample, close) or returns an error.
 * ds->seed and ds->augment are set before the call. */
int vd_data_open_mnist(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e);
int vd_data_open_cifar10(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e);
int vd_data_open_folder(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e);
int vd_data_open_synthetic(vd_dataset *ds, int64_t n_train, int64_t n_test,
                           const vd_net *net, vd_err *e);

/* Common check: net input must be c x h x w, and the net must output at
 * least `classes` classes. VD_EUSAGE with a clear message otherwise. */
int vd_data_check_shape(const char *what, int c, int h, int w, int classes,
                        const vd_net *net, vd_err *e);

/* An 8-bit image decoded by vd_image_load: px [h][w][C]. */
typedef struct vd_image {
    unsigned char *px;          /* vd_malloc'ed or stb_image's; vd_image_free */
    bool from_stb;              /* px is stb_image's */
    int w, h;                   /* decoded size */
    int full_w, full_h;         /* the file's size (== w, h unless scaled) */
    int scale_denom;            /* 1, 2, 4 or 8: decoded at 1/scale_denom */
} vd_image;

/* Decode the image file at path to C (1 or 3) channels. A JPEG (by its first
 * bytes) goes through TurboJPEG unless dec is VD_JPEG_STB, at the smallest
 * DCT scale 1/8, 1/4, 1/2 whose size still covers the size the image is
 * resized to for an H x W input (cover_size in folder.c; never scaled with
 * VD_JPEG_TURBO_FULL); anything else through stb_image. Errors: VD_EIO
 * (cannot read), VD_EDATA naming the path (cannot decode, truncated JPEG),
 * VD_ENOMEM. */
int vd_image_load(const char *path, int C, int H, int W, vd_jpeg_decoder dec, vd_image *img,
                  vd_err *e);
void vd_image_free(vd_image *img);

/* Images (image_check.c). Limits, documented in vdnn-train(1): */
#define VD_IMAGE_MAX_PIXELS (1ull << 27)      /* width x height (134 M, e.g. 11585 x 11585) */
#define VD_IMAGE_MAX_FILE_BYTES (1ull << 30)  /* one image file */
/* Check the image file at path without decoding it: a regular file of at
 * most VD_IMAGE_MAX_FILE_BYTES whose header a decoder reads (JPEG, PNG,
 * BMP, PPM, PGM) and whose width x height is at most VD_IMAGE_MAX_PIXELS;
 * *w, *h (may be NULL) its size. VD_EDATA naming the file and the problem
 * (a JPEG whose header is cut: "corrupt or truncated JPEG"), VD_EIO when it
 * cannot be opened or is not a regular file. */
int vd_image_check_header(const char *path, int *w, int *h, vd_err *e);
/* Set e for an image at path that a decoder failed on (reason: the
 * decoder's words, may be NULL): a JPEG without its end-of-image marker is
 * named a truncated JPEG. Returns VD_EDATA. */
int vd_image_decode_error(const char *path, const char *reason, vd_err *e);

/* splitmix64: a good 64-bit mixer for stateless per-sample keys. */
static inline uint64_t vd_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif
