/* data_impl.h — private: the dataset vtable shared by the data/ sources,
 * the readers' entry points (called by data.c's dispatch) and the helpers
 * the readers share (data_util.c, image_check.c, folder.c). */
#ifndef VD_DATA_IMPL_H
#define VD_DATA_IMPL_H

#include <stdio.h>
#include "data/data.h"

struct vd_dataset {
    vd_data_info info;
    uint64_t seed;
    bool augment;
    void *impl;                 /* owned by the kind */
    /* One sample; see vd_data_sample. Must be safe to call concurrently. */
    int (*sample)(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                  float *x, int32_t *label, vd_err *e);
    /* Optional (NULL: the loader converts sample's floats): the same sample
     * as bf16 channels-last (HWC), each value vd_f32_to_bf16 of sample's
     * float, for a loader whose consumer takes bf16 (vd_loader_next_as). */
    int (*sample_bf16)(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                       uint16_t *x, int32_t *label, vd_err *e);
    /* Optional (NULL: the kind has its own test split): make the train
     * samples i with held[i] the test split, the others the train split,
     * each keeping its order; update info.n and info.desc (vd_data_hold_out,
     * fraction: for the description). */
    int (*hold_out)(vd_dataset *ds, const bool *held, double fraction, vd_err *e);
    void (*close)(vd_dataset *ds);   /* frees impl */
};

/* Each kind fills ds (info, impl, sample, close) or returns an error.
 * ds->seed and ds->augment are set before the call. */
int vd_data_open_mnist(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e);
int vd_data_open_cifar10(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e);
int vd_data_open_folder(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e);
int vd_data_open_synthetic(vd_dataset *ds, int64_t n_train, int64_t n_test,
                           const vd_net *net, vd_err *e);

/* Data files (data_util.c). vd_open_regular (at most max bytes; the descriptor
 * or minus a VD_E* code) for a file of a data set, after a check of the
 * path's length: a path of PATH_MAX bytes or more is VD_EIO "path too long
 * (N bytes, ...): PATH" (the reason first: the message is cut at
 * sizeof(vd_err.msg), the path is never cut before it is opened). */
int vd_data_open_file(const char *path, uint64_t max, uint64_t *size, vd_err *e);
/* Read exactly n bytes at offset off of fd (path: for messages). VD_EIO on
 * a read error, VD_EDATA when the file ends first (it shrank). */
int vd_data_pread(int fd, const char *path, void *buf, size_t n, uint64_t off, vd_err *e);

/* Common check (data_util.c): net input must be c x h x w, and the net must
 * output at least `classes` classes. VD_EUSAGE with a clear message
 * otherwise. */
int vd_data_check_shape(const char *what, int c, int h, int w, int classes,
                        const vd_net *net, vd_err *e);
/* The normalisation of a reader's C-channel images (data_util.c): the
 * spec's data.normalize (net->norm) where it gives one, else the kind's
 * own dflt_mean[C] / dflt_std[C]; into mean[C], std[C] (x/255 - mean) / std. */
void vd_data_norm_get(const vd_net *net, int C, const float *dflt_mean, const float *dflt_std,
                      float *mean, float *std);
/* *buf of at least n bytes, its old contents dropped (data_util.c): a
 * scratch buffer that grows to the largest need. VD_ENOMEM (then *buf NULL,
 * *cap 0). */
int vd_data_grow(void **buf, size_t *cap, size_t n, vd_err *e);

/* ---- folder samples: where they come from in the image (crop.c) and the
 * resampling (resize.c). A box is a rectangle of an image's pixel
 * coordinates (pixel (i, j) covers [i, i + 1) x [j, j + 1)): x, y its
 * top-left corner, w, h > 0 its size, inside the image. */
typedef struct vd_box { double x, y, w, h; } vd_box;
/* Evaluation (and training without augmentation): torchvision's
 * Resize(round(size / VD_EVAL_CROP_FRACTION)) + CenterCrop(size), the
 * ImageNet convention (256 -> 224). */
#define VD_EVAL_CROP_FRACTION 0.875
/* The centre box of an iw x ih image that an H x W input sees in
 * evaluation: the image scaled by s so that it covers (H, W) /
 * VD_EVAL_CROP_FRACTION, then its centre H x W; in the image's pixels
 * H / s x W / s, centred. */
void vd_box_center(int iw, int ih, int H, int W, vd_box *b);
/* torchvision's RandomResizedCrop(scale=(0.08, 1), ratio=(3/4, 4/3)) box of
 * an iw x ih image and RandomHorizontalFlip's coin, drawn from key: up to
 * VD_RRC_ATTEMPTS tries of an area fraction uniform in the scale range and
 * an aspect ratio (w / h) log-uniform in the ratio range, w and h rounded
 * to whole pixels, the first that fits placed uniformly (whole pixels);
 * else the centre box of the whole image clipped to the ratio range. */
#define VD_RRC_SCALE_MIN 0.08
#define VD_RRC_SCALE_MAX 1.0
#define VD_RRC_RATIO_MIN (3.0 / 4.0)
#define VD_RRC_RATIO_MAX (4.0 / 3.0)
#define VD_RRC_ATTEMPTS 10
void vd_box_random_resized(int iw, int ih, uint64_t key, vd_box *b, bool *flip);
/* Box b of px [ih][iw][C] (8-bit) resampled to out [H][W][C] with
 * stb_image_resize, per axis: where the box shrinks, area averaging (each
 * output pixel the mean of the box's area under it: anti-aliased); where
 * it grows, bilinear interpolation (half-pixel centres); pixels outside the
 * box's whole pixels are taken as the nearest edge pixel of them. Rounded to
 * 8 bits, as torchvision's resize of an 8-bit image. *work, *work_cap:
 * stb's working memory (vd_data_grow). VD_ENOMEM. */
int vd_image_resize(const unsigned char *px, int iw, int ih, int C, const vd_box *b,
                    unsigned char *out, int W, int H, void **work, size_t *work_cap, vd_err *e);

/* An 8-bit image decoded by vd_image_load: px [h][w][C]. */
typedef struct vd_image {
    unsigned char *px;          /* vd_malloc'ed, stb_image's or borrowed; vd_image_free */
    bool from_stb;              /* px is stb_image's */
    bool borrowed;              /* px is a folder data set's scratch buffer (not freed) */
    int w, h;                   /* decoded size */
    int full_w, full_h;         /* the file's size (== w, h unless scaled) */
    int scale_denom;            /* 1, 2, 4 or 8: decoded at 1/scale_denom */
} vd_image;

/* Decode the image file at path to C (1 or 3) channels. A JPEG (by its first
 * bytes) goes through TurboJPEG unless dec is VD_JPEG_STB, at the smallest
 * DCT scale 1/8, 1/4, 1/2 at which the evaluation's centre box for an H x W
 * input (vd_box_center) still holds H x W pixels (never scaled with
 * VD_JPEG_TURBO_FULL); a binary PPM / PGM (vd_pnm) is read by vdnn itself;
 * PNG and BMP go through stb_image, after the checks that keep it in bounds
 * (vd_image_check_data, vd_jpeg_stb_check for JPEG with VD_JPEG_STB); any
 * other file is VD_EDATA (vd_image_kind_of). Every file passes
 * vd_image_check_data first. Errors: VD_EIO (cannot read), VD_EDATA naming
 * the path (cannot decode, truncated, a PNG CRC that does not match),
 * VD_ENOMEM. */
int vd_image_load(const char *path, int C, int H, int W, vd_jpeg_decoder dec, vd_image *img,
                  vd_err *e);
void vd_image_free(vd_image *img);

/* Images (image_check.c). Limits, documented in vdnn-train(1): */
#define VD_IMAGE_MAX_PIXELS (1ull << 27)      /* width x height (134 M, e.g. 11585 x 11585) */
#define VD_IMAGE_MAX_FILE_BYTES (1ull << 30)  /* one image file */
/* Check the image file at path without decoding it: a regular file of at
 * most VD_IMAGE_MAX_FILE_BYTES whose header a decoder reads (JPEG, PNG,
 * BMP, PPM, PGM), whose width x height is at most VD_IMAGE_MAX_PIXELS, and
 * that holds what its header declares (the length checks of
 * vd_image_check_data, without PNG's CRCs): a file cut short is refused
 * here. Reads the first bytes, then only what the walk needs (a window at a
 * time; a JPEG that ends in FF D9 is read to its first scan header, a PNG
 * chunk's data is skipped). *w, *h (may be NULL) its size. VD_EDATA naming
 * the file and the problem ("truncated PNG", "truncated BMP", "truncated
 * JPEG", "corrupt or truncated JPEG" for a header that cannot be read),
 * VD_EIO when it cannot be opened or is not a regular file. */
int vd_image_check_header(const char *path, int *w, int *h, vd_err *e);
/* Check the image file at path, whose bytes are b[0..n), against its own
 * lengths before it is decoded: a kind vdnn reads (vd_image_kind_of, else
 * vd_image_not_supported); PNG: chunks whole up to IEND and each chunk's
 * CRC-32; BMP: the pixel array its header declares inside the file; JPEG:
 * each segment inside the file, a scan, and the end-of-image marker after
 * it; PPM / PGM: vd_pnm_header. VD_EDATA naming path. */
int vd_image_check_data(const char *path, const unsigned char *b, size_t n, vd_err *e);
/* The limits on an image of w x h (>= 1) pixels: VD_EDATA naming path when
 * w x h > VD_IMAGE_MAX_PIXELS (the message of vd_image_check_header). */
int vd_image_check_size(const char *path, int w, int h, vd_err *e);
/* Set e for an image at path that a decoder failed on (reason: the
 * decoder's words, may be NULL): a JPEG without its end-of-image marker is
 * named a truncated JPEG. Returns VD_EDATA. */
int vd_image_decode_error(const char *path, const char *reason, vd_err *e);

/* What an image file is, by its first bytes: JPEG FF D8 FF, PNG's
 * signature, BMP "BM", binary PNM "P5" / "P6". Only these are decoded
 * (vd_image_check_header, vd_image_load); stb_image reads more formats (GIF,
 * PSD, TGA, HDR, PIC; TGA without a signature, so that random bytes may pass
 * for one) and is never given the others. */
typedef enum {
    VD_IMAGE_OTHER, VD_IMAGE_JPEG, VD_IMAGE_PNG, VD_IMAGE_BMP, VD_IMAGE_PNM
} vd_image_kind;
vd_image_kind vd_image_kind_of(const unsigned char *b, size_t n);
/* VD_EDATA: "PATH: not a JPEG, PNG, BMP, PPM or PGM image ...". */
int vd_image_not_supported(const char *path, vd_err *e);
/* Check the JPEG in f (from its start) for what stb_image 2.27 (Debian's
 * libstb 0.0~git20220908) does not check and then reads or writes out of
 * bounds: a Huffman table (DHT) of more than 256 codes (copied into arrays
 * of 256: it overwrites the decoder's state, in stbi_info too), a scan that
 * decodes with a Huffman table that was never defined (its uninitialised
 * limits send the decoder past its arrays) or a component whose
 * quantization table was never defined (uninitialised memory in the
 * pixels). header_only: up to the first frame header (SOF0-2), as far as
 * stbi_info reads; else the whole file (a progressive JPEG has tables
 * between its scans). NULL when none is found, else what was found. Leaves
 * f's position anywhere. */
const char *vd_jpeg_stb_check(FILE *f, bool header_only);

/* Binary Netpbm (P5 PGM: comp 1, P6 PPM: comp 3), read by vdnn itself (see
 * folder.c): "P5" or "P6", then width, height and maxval as decimal numbers
 * after whitespace ('#' starts a comment to the end of the line), one
 * whitespace character, and width x height x comp samples of one byte
 * (maxval < 256) or two, big-endian. A sample is at most maxval and is
 * scaled to 0..255 as round(sample * 255 / maxval). */
typedef struct vd_pnm {
    int w, h;                   /* >= 1 */
    int comp;                   /* 1 or 3 */
    int maxval;                 /* 1..65535 */
    size_t offset;              /* where the samples start */
    uint64_t bytes;             /* of the samples: w * h * comp * (1 or 2) */
} vd_pnm;
#define VD_PNM_MAX_HEADER 4096  /* bytes up to the samples (comments included) */
/* Does b[0..n) start like a binary PNM ("P5", "P6")? */
bool vd_is_pnm(const unsigned char *b, size_t n);
/* Parse the PNM header at the start of b[0..n): the whole file, or at least
 * its first VD_PNM_MAX_HEADER bytes, of file_size bytes. VD_EDATA naming
 * path when the header is malformed or longer than VD_PNM_MAX_HEADER, or
 * when the file does not hold the samples it promises ("truncated PPM/PGM"). */
int vd_pnm_header(const char *path, const unsigned char *b, size_t n, uint64_t file_size,
                  vd_pnm *p, vd_err *e);

/* splitmix64: a good 64-bit mixer for stateless per-sample keys. */
static inline uint64_t vd_mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif
