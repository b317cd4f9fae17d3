/* folder.c — ImageNet-style image folders: JPEG decoded with libjpeg-turbo
 * (TurboJPEG API), binary PPM and PGM here (pnm_decode), PNG and BMP with
 * stb_image.
 *
 * DIR/train/<class>/<image> and (optional) DIR/val/<class>/<image>; images
 * are .jpg .jpeg .png .bmp .ppm .pgm (case-insensitive), anything else is
 * skipped. Classes are the train subdirectories sorted by name (byte order);
 * label = index in that list. A val class that has no train directory is an
 * error.
 *
 * Each image is decoded to the net's channel count (1 or 3) and a box of it
 * (crop.c) resampled to the net's input with stb_image_resize (resize.c:
 * area averaging where it shrinks, bilinear where it grows, 8 bits), then
 * normalised through a table per channel (the data set's mean and std, or
 * the spec's data.normalize). The box: the evaluation's centre crop
 * (vd_box_center, torchvision's Resize(S / 0.875) + CenterCrop(S)) for the
 * test split and for training without augment; with augment, train images
 * take torchvision's RandomResizedCrop box and are flipped horizontally
 * with probability 1/2, keyed by (seed, sample counter).
 *
 * JPEG files (recognised by their first bytes, not the name) are decoded at
 * the smallest DCT scale of 1/8, 1/4, 1/2 at which the box still holds the
 * input's pixels (otherwise in full), so a large photo is never decoded in
 * full only to be shrunk; the box is computed on the full size either way
 * (the same crop of the same scene). libjpeg's "Corrupt JPEG
 * data" warnings are tolerated (libjpeg recovers; e.g. extraneous bytes
 * before a marker, as in a few ImageNet files); a truncated file is not. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stb/stb_image.h>
#include <turbojpeg.h>
#include "data/data_impl.h"

typedef struct item { char *path; int32_t label; } item;

/* What decoding one sample needs, kept from sample to sample: allocating
 * the decoded pixels (560 KB for a 500x375 photo, above glibc's mmap
 * threshold) and the file buffer afresh each time made every sample fault
 * in fresh zeroed pages, about a quarter of a loader thread's time (perf,
 * 500x375 JPEGs). One scratch per sample in flight: a sample takes one from
 * the data set's pool and gives it back (a loader thread thus keeps reusing
 * one); buffers grow to the largest image up to SCRATCH_KEEP_BYTES, larger
 * ones are freed after their sample. */
typedef struct scratch {
    struct scratch *next;       /* the pool's free list */
    unsigned char *file;        /* [file_cap] the image file */
    size_t file_cap;
    unsigned char *px;          /* [px_cap] decoded pixels */
    size_t px_cap;
    void *rs;                   /* [rs_cap] the resampled pixels, H x W x C */
    size_t rs_cap;
    void *work;                 /* [work_cap] stb_image_resize's working memory */
    size_t work_cap;
} scratch;

enum { SCRATCH_KEEP_BYTES = 16 << 20 };

typedef struct folder {
    char *dir;                  /* DIR of folder:DIR */
    int n_classes;
    char **classes;             /* [n_classes] sorted names */
    item *items[2];             /* [info.n[split]] */
    int64_t cap[2];
    vd_jpeg_decoder jpeg;       /* VD_JPEG_TURBO unless a test or benchmark chose */
    /* the normalisation of an 8-bit value v of channel c (vd_data_norm_get):
     * v * (1 / (255 std)) - mean / std in float, and that rounded to bf16 */
    float lut[3][256];
    uint16_t lut16[3][256];
    pthread_mutex_t pool_mu;    /* guards pool */
    scratch *pool;              /* free scratches */
} folder;

static void scratch_free(scratch *s) {
    if (!s) return;
    vd_free(s->file);
    vd_free(s->px);
    vd_free(s->rs);
    vd_free(s->work);
    vd_free(s);
}

/* A scratch from f's pool, or a new one (NULL: out of memory, e set). */
static scratch *scratch_get(folder *f, vd_err *e) {
    pthread_mutex_lock(&f->pool_mu);
    scratch *s = f->pool;
    if (s) f->pool = s->next;
    pthread_mutex_unlock(&f->pool_mu);
    return s ? s : vd_calloc(1, sizeof *s, e);
}

/* Back to the pool, without its buffers above SCRATCH_KEEP_BYTES. */
static void scratch_put(folder *f, scratch *s) {
    if (s->file_cap > SCRATCH_KEEP_BYTES) { VD_FREE(s->file); s->file_cap = 0; }
    if (s->px_cap > SCRATCH_KEEP_BYTES) { VD_FREE(s->px); s->px_cap = 0; }
    if (s->rs_cap > SCRATCH_KEEP_BYTES) { VD_FREE(s->rs); s->rs_cap = 0; }
    if (s->work_cap > SCRATCH_KEEP_BYTES) { VD_FREE(s->work); s->work_cap = 0; }
    pthread_mutex_lock(&f->pool_mu);
    s->next = f->pool;
    f->pool = s;
    pthread_mutex_unlock(&f->pool_mu);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_image(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot) return false;
    static const char *const ext[] = { "jpg", "jpeg", "png", "bmp", "ppm", "pgm" };
    for (size_t i = 0; i < VD_ARRAY_LEN(ext); i++) {
        const char *a = dot + 1, *b = ext[i];
        while (*a && *b && tolower((unsigned char)*a) == *b) { a++; b++; }
        if (!*a && !*b) return true;
    }
    return false;
}

/* opendir(dir), or NULL with e set (VD_EIO naming dir, the reason first
 * for a path too long to open). */
static DIR *open_dir(const char *dir, vd_err *e) {
    size_t len = strlen(dir);
    if (len >= PATH_MAX) {
        vd_errf(e, VD_EIO, "path too long (%zu bytes, the system's limit is %d): %s", len,
                PATH_MAX - 1, dir);
        return NULL;
    }
    DIR *d = opendir(dir);
    if (!d) vd_errf(e, VD_EIO, "%s: cannot open directory: %s", dir, strerror(errno));
    return d;
}

/* List the entries of dir (names, sorted): its directories (want_dirs) or
 * its regular files with an image extension. An entry that cannot be
 * looked at (its path too long, no permission) is VD_EIO naming it, never
 * skipped; one that vanished meanwhile (or a dangling link) is skipped. */
static int list_dir(const char *dir, bool want_dirs, char ***out, int64_t *n, vd_err *e) {
    *out = NULL;
    *n = 0;
    DIR *d = open_dir(dir, e);
    if (!d) return VD_EIO;
    int64_t cap = 0;
    char **v = NULL;
    int rc = VD_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *full = vd_strfmt(e, "%s/%s", dir, de->d_name);   /* whole, never cut */
        if (!full) { rc = VD_ENOMEM; break; }
        struct stat st;
        size_t flen = strlen(full);
        if (flen >= PATH_MAX) {
            rc = vd_errf(e, VD_EIO, "path too long (%zu bytes, the system's limit is %d): %s",
                         flen, PATH_MAX - 1, full);
        } else if (stat(full, &st) != 0) {
            if (errno != ENOENT)
                rc = vd_errf(e, VD_EIO, "%s: %s", full, strerror(errno));
            vd_free(full);
            if (rc) break;
            continue;
        }
        vd_free(full);
        if (rc) break;
        if (want_dirs ? !S_ISDIR(st.st_mode) : !(S_ISREG(st.st_mode) && is_image(de->d_name)))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = vd_realloc(v, sizeof(char *) * (size_t)cap, e);
            if (!nv) { rc = VD_ENOMEM; break; }
            v = nv;
        }
        v[*n] = vd_strdup(de->d_name, e);
        if (!v[*n]) { rc = VD_ENOMEM; break; }
        (*n)++;
    }
    closedir(d);
    if (rc) {
        for (int64_t i = 0; i < *n; i++) vd_free(v[i]);
        vd_free(v);
        *n = 0;
        return rc;
    }
    if (*n) qsort(v, (size_t)*n, sizeof(char *), cmp_str);
    *out = v;
    return VD_OK;
}

static void free_names(char **v, int64_t n) {
    for (int64_t i = 0; i < n; i++) vd_free(v[i]);
    vd_free(v);
}

static int add_item(folder *f, int split, int64_t *n, char *path, int32_t label, vd_err *e) {
    if (*n == f->cap[split]) {
        int64_t cap = f->cap[split] ? f->cap[split] * 2 : 1024;
        item *ni = vd_realloc(f->items[split], sizeof(item) * (size_t)cap, e);
        if (!ni) { vd_free(path); return VD_ENOMEM; }
        f->items[split] = ni;
        f->cap[split] = cap;
    }
    f->items[split][*n].path = path;
    f->items[split][*n].label = label;
    (*n)++;
    return VD_OK;
}

static int scan_split(folder *f, int split, const char *root, int64_t *n, vd_err *e) {
    char **cls;
    int64_t nc;
    int rc = list_dir(root, true, &cls, &nc, e);
    if (rc) return rc;
    for (int64_t c = 0; c < nc && !rc; c++) {
        int32_t label = -1;
        for (int k = 0; k < f->n_classes; k++)
            if (strcmp(f->classes[k], cls[c]) == 0) label = k;
        if (label < 0) {
            rc = vd_errf(e, VD_EDATA, "%s/%s: class directory has no counterpart in the "
                         "train directory", root, cls[c]);
            break;
        }
        char *sub = vd_strfmt(e, "%s/%s", root, cls[c]);
        if (!sub) { rc = VD_ENOMEM; break; }
        char **files;
        int64_t nf;
        rc = list_dir(sub, false, &files, &nf, e);
        for (int64_t i = 0; i < nf && !rc; i++) {
            char *p = vd_strfmt(e, "%s/%s", sub, files[i]);
            if (!p) { rc = VD_ENOMEM; break; }
            rc = add_item(f, split, n, p, label, e);
        }
        vd_free(sub);
        free_names(files, nf);
    }
    free_names(cls, nc);
    return rc;
}

/* ---- decoding -------------------------------------------------------------- */

/* Which box of an image a sample takes (crop.c): the evaluation's centre
 * box for an H x W input, or (random: augmented training) RandomResizedCrop's,
 * drawn from key. */
typedef struct crop_req { int H, W; bool random; uint64_t key; } crop_req;

/* q's box of an iw x ih image in its pixels, and *flip (mirror the sample). */
static void crop_box(const crop_req *q, int iw, int ih, vd_box *b, bool *flip) {
    *flip = false;
    if (q->random) vd_box_random_resized(iw, ih, q->key, b, flip);
    else vd_box_center(iw, ih, q->H, q->W, b);
}

/* Read the image file at path (a regular file of at most
 * VD_IMAGE_MAX_FILE_BYTES) into s's buffer, or with s NULL into a new
 * vd_malloc'ed one (*buf, the caller's). */
static int read_file(const char *path, scratch *s, unsigned char **buf, size_t *n, vd_err *e) {
    *buf = NULL;
    *n = 0;
    uint64_t size;
    int fd = vd_data_open_file(path, VD_IMAGE_MAX_FILE_BYTES, &size, e);
    if (fd < 0) return -fd;
    size_t len = (size_t)size;      /* <= 1 GiB */
    unsigned char *b;
    if (s) {
        if (vd_data_grow((void **)&s->file, &s->file_cap, len ? len : 1, e)) {
            close(fd);
            return VD_ENOMEM;
        }
        b = s->file;
    } else {
        b = vd_malloc(len ? len : 1, e);
        if (!b) { close(fd); return VD_ENOMEM; }
    }
    size_t got = 0;
    while (got < len) {             /* the size fstat gave; a file that grows is cut there */
        ssize_t r = read(fd, b + got, len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != len) {
        if (!s) vd_free(b);
        return vd_errf(e, VD_EIO, "%s: read error", path);
    }
    *buf = b;
    *n = len;
    return VD_OK;
}

/* TurboJPEG: decode jpg [n] with tj to C channels at the smallest
 * power-of-two DCT scale (1/8 .. 1) at which q's box (*box, *flip: from the
 * header's size) still holds at least the H x W pixels it is resampled to,
 * into s's pixel buffer (img->borrowed) or, s NULL, a new one. The pixel
 * limit (vd_image_check_size) is checked on TurboJPEG's header.
 *
 * Only the power-of-two scales: libjpeg-turbo (2.1 and 3.0) has SIMD code
 * for the 8x8, 4x4, 2x2 and 1x1 inverse DCTs only; its other M/8 scales
 * run plain C IDCTs and decode slower than in full, more than their smaller
 * box saves in the resize. Nor the fast flags (TJFLAG_FASTDCT,
 * TJFLAG_FASTUPSAMPLE, the YUV-plane decode): they differ from stb_image
 * by more than the tests' tolerances (jpeg_turbo_matches_stb).
 * docs/measurements.md (the folder loader) has the timings. */
static int turbo_decode(const char *path, tjhandle tj, const unsigned char *jpg, size_t n, int C,
                        const crop_req *q, bool full, scratch *s, vd_image *img, vd_box *box,
                        bool *flip, vd_err *e) {
    int iw = 0, ih = 0, sub, cs, rc = VD_OK;
    unsigned char *px = NULL;
    if (n > (size_t)ULONG_MAX ||
        tjDecompressHeader3(tj, jpg, (unsigned long)n, &iw, &ih, &sub, &cs) != 0)
        return vd_image_decode_error(path, tjGetErrorStr2(tj), e);   /* names a truncated JPEG */
    if (iw < 1 || ih < 1)       /* headers cut short: TurboJPEG reports no error */
        return vd_image_decode_error(path, "no image size", e);
    if ((rc = vd_image_check_size(path, iw, ih, e))) return rc;
    crop_box(q, iw, ih, box, flip);
    int denom = 1;
    while (!full && denom < 8 && box->w >= 2.0 * denom * q->W && box->h >= 2.0 * denom * q->H)
        denom *= 2;
    tjscalingfactor f = { 1, denom };
    int sw = TJSCALED(iw, f), sh = TJSCALED(ih, f);
    size_t bytes = (size_t)sw * (size_t)sh * (size_t)C;
    if (s) {
        if (vd_data_grow((void **)&s->px, &s->px_cap, bytes, e)) return VD_ENOMEM;
        px = s->px;
    } else if (!(px = vd_malloc(bytes, e))) {
        return VD_ENOMEM;
    }
    if (tjDecompress2(tj, jpg, (unsigned long)n, px, sw, 0, sh, C == 3 ? TJPF_RGB : TJPF_GRAY,
                      0) != 0) {
        /* libjpeg's "Corrupt JPEG data: ..." warnings (extraneous bytes
         * before a marker, a bad Huffman code) leave a complete image and
         * are accepted, as other loaders do; anything else is an error,
         * among them a file that ends early ("Premature end of JPEG file":
         * the rest would be grey) */
        const char *msg = tjGetErrorStr2(tj);
        if (tjGetErrorCode(tj) != TJERR_WARNING || strncmp(msg, "Corrupt JPEG data", 17) != 0) {
            rc = vd_image_decode_error(path, msg, e);
            if (!s) vd_free(px);
            return rc;
        }
    }
    img->px = px;
    img->borrowed = s != NULL;
    img->w = sw;
    img->h = sh;
    img->full_w = iw;
    img->full_h = ih;
    img->scale_denom = denom;
    return VD_OK;
}

/* Binary PGM / PPM (vd_pnm) to C channels. Read here rather than by
 * stb_image: stb_image 2.27 (Debian's libstb 0.0~git20220908) takes the low
 * byte of 16-bit samples (it reads them in host byte order), reads past its
 * buffer when it converts the channels of 16-bit samples, does not scale by
 * maxval, and returns uninitialised memory as the pixels of a file cut
 * short. Channels convert as stb_image converts them: gray to RGB by
 * copying, RGB to gray with its luma (77 R + 150 G + 29 B) >> 8. */
static int pnm_decode(const char *path, const unsigned char *b, size_t n, int C, vd_image *img,
                      vd_err *e) {
    vd_pnm p;
    int rc = vd_pnm_header(path, b, n, n, &p, e);
    if (rc) return rc;
    size_t px = (size_t)p.w * (size_t)p.h;    /* <= n: the header's samples are in b */
    unsigned char *out = vd_malloc(px * (size_t)C, e);
    if (!out) return VD_ENOMEM;
    const unsigned char *s = b + p.offset;
    unsigned m = (unsigned)p.maxval, two = m > 255;
    for (size_t i = 0; i < px; i++) {
        unsigned v[3];
        for (int k = 0; k < p.comp; k++, s += 1 + two) {
            unsigned x = two ? (unsigned)s[0] << 8 | s[1] : s[0];
            if (x > m) {
                vd_free(out);
                return vd_errf(e, VD_EDATA, "%s: corrupt PPM/PGM: sample %u of pixel %zu is "
                               "above the maxval %u", path, x, i, m);
            }
            v[k] = (x * 255 + m / 2) / m;     /* round(x * 255 / m), exact in unsigned */
        }
        unsigned char *o = out + i * (size_t)C;
        if (C == p.comp)
            for (int k = 0; k < C; k++) o[k] = (unsigned char)v[k];
        else if (C == 3)
            o[0] = o[1] = o[2] = (unsigned char)v[0];
        else
            o[0] = (unsigned char)((77 * v[0] + 150 * v[1] + 29 * v[2]) >> 8);
    }
    img->px = out;
    img->w = img->full_w = p.w;
    img->h = img->full_h = p.h;
    img->scale_denom = 1;
    return VD_OK;
}

/* PNG, BMP and (VD_JPEG_STB) JPEG through stb_image, to C channels. */
static int stb_decode(const char *path, unsigned char *buf, size_t n, int C, vd_image *img,
                      vd_err *e) {
    if (vd_image_kind_of(buf, n) == VD_IMAGE_JPEG) {   /* what would send stb_image past it */
        FILE *f = fmemopen(buf, n, "rb");
        if (!f) return vd_errf(e, VD_ENOMEM, "%s: out of memory", path);
        const char *why = vd_jpeg_stb_check(f, false);
        fclose(f);
        if (why) return vd_errf(e, VD_EDATA, "%s: corrupt JPEG: %s", path, why);
    }
    int iw = 0, ih = 0, comp;
    unsigned char *px = n > (size_t)INT32_MAX ? NULL
                        : stbi_load_from_memory(buf, (int)n, &iw, &ih, &comp, C);
    if (!px)
        return vd_image_decode_error(path, stbi_failure_reason(), e);
    if (iw < 1 || ih < 1) {
        stbi_image_free(px);
        return vd_errf(e, VD_EDATA, "%s: empty image", path);
    }
    img->px = px;
    img->from_stb = true;
    img->w = img->full_w = iw;
    img->h = img->full_h = ih;
    img->scale_denom = 1;
    return VD_OK;
}

/* Decode the image file path's bytes buf [n] (see vd_image_load) for q's
 * box, which goes to *box (in the full-size image's pixels) with *flip; s:
 * the sample's scratch (its pixel buffer) or NULL. buf stays the caller's. */
static int decode(const char *path, unsigned char *buf, size_t n, int C, const crop_req *q,
                  vd_jpeg_decoder dec, scratch *s, vd_image *img, vd_box *box, bool *flip,
                  vd_err *e) {
    memset(img, 0, sizeof *img);
    /* the file against its own lengths (and PNG's CRCs) first: no decoder
     * is given a file cut short; this also keeps stb_image from growing its
     * buffer to the length a PNG chunk claims (up to 2 GiB) before it finds
     * the file shorter */
    int rc = vd_image_check_data(path, buf, n, e);
    if (rc) return rc;
    vd_image_kind kind = vd_image_kind_of(buf, n);
    if (kind == VD_IMAGE_JPEG && dec != VD_JPEG_STB) {
        /* a decompressor per image, never kept: libjpeg keeps the Huffman
         * and quantization tables a file defined for the next one, so a
         * file that leaves one out would decode (or fail) by what the
         * thread decoded before (fuzz_image found it on its seed corpus) */
        tjhandle tj = tjInitDecompress();
        if (!tj) return vd_errf(e, VD_ENOMEM, "%s: cannot start the JPEG decoder", path);
        rc = turbo_decode(path, tj, buf, n, C, q, dec == VD_JPEG_TURBO_FULL, s, img, box, flip,
                          e);
        tjDestroy(tj);
        return rc;
    }
    if (kind == VD_IMAGE_OTHER)     /* stb_image is given only the formats vdnn reads */
        return vd_image_not_supported(path, e);
    rc = kind == VD_IMAGE_PNM ? pnm_decode(path, buf, n, C, img, e)
                              : stb_decode(path, buf, n, C, img, e);
    if (!rc) crop_box(q, img->full_w, img->full_h, box, flip);
    return rc;
}

int vd_image_load(const char *path, int C, int H, int W, vd_jpeg_decoder dec, vd_image *img,
                  vd_err *e) {
    memset(img, 0, sizeof *img);
    unsigned char *buf;
    size_t n;
    int rc = read_file(path, NULL, &buf, &n, e);
    if (rc) return rc;
    crop_req q = { .H = H, .W = W };
    vd_box box;
    bool flip;
    rc = decode(path, buf, n, C, &q, dec, NULL, img, &box, &flip, e);
    vd_free(buf);
    return rc;
}

void vd_image_free(vd_image *img) {
    if (img->from_stb) stbi_image_free(img->px);
    else if (!img->borrowed) vd_free(img->px);
    img->px = NULL;
}

/* ---- samples ----------------------------------------------------------------- */

/* The resampled 8-bit pixels rs [H][W][C] (mirrored with flip) through the
 * normalisation tables into x (float CHW) or, x16 not NULL, x16 (bf16 HWC);
 * a loop per layout and channel count, so that the inner loops decide
 * nothing per value. */
static void normalise(const folder *f, int C, int H, int W, const unsigned char *rs, bool flip,
                      float *restrict x, uint16_t *restrict x16) {
    size_t plane = (size_t)H * W;
    ptrdiff_t step = flip ? -C : C;     /* output column ox reads column ox or W - 1 - ox */
    for (int oy = 0; oy < H; oy++) {
        const unsigned char *p = rs + (size_t)oy * W * C + (flip ? (size_t)(W - 1) * C : 0);
        size_t o = (size_t)oy * W;
        if (x16 && C == 3) {
            uint16_t *d = x16 + o * 3;
            for (int ox = 0; ox < W; ox++, p += step, d += 3) {
                d[0] = f->lut16[0][p[0]];
                d[1] = f->lut16[1][p[1]];
                d[2] = f->lut16[2][p[2]];
            }
        } else if (x16) {
            for (int ox = 0; ox < W; ox++, p += step) x16[o + ox] = f->lut16[0][p[0]];
        } else if (C == 3) {
            float *d0 = x + o, *d1 = d0 + plane, *d2 = d1 + plane;
            for (int ox = 0; ox < W; ox++, p += step) {
                d0[ox] = f->lut[0][p[0]];
                d1[ox] = f->lut[1][p[1]];
                d2[ox] = f->lut[2][p[2]];
            }
        } else {
            for (int ox = 0; ox < W; ox++, p += step) x[o + ox] = f->lut[0][p[0]];
        }
    }
}

/* One sample into x (float CHW) or, x16 not NULL, into x16 (bf16 HWC). */
static int folder_sample_to(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                            float *x, uint16_t *x16, int32_t *label, vd_err *e) {
    folder *f = ds->impl;
    const item *it = &f->items[split][index];
    int C = ds->info.c, H = ds->info.h, W = ds->info.w;
    scratch *s = scratch_get(f, e);
    if (!s) return VD_ENOMEM;
    vd_image im = { 0 };
    unsigned char *buf;
    size_t n;
    crop_req q = { .H = H, .W = W, .random = ds->augment && split == VD_SPLIT_TRAIN,
                   .key = vd_mix64(ds->seed ^ vd_mix64(aug_key ^ 0xA06A06A06ull)) };
    vd_box box;
    bool flip = false;
    int rc = read_file(it->path, s, &buf, &n, e);
    /* the pixel limit (and stb_image's guards) before decoding: a JPEG for
     * TurboJPEG has it checked on TurboJPEG's own reading of its header
     * (turbo_decode), the others by vd_image_check_header */
    if (!rc && (vd_image_kind_of(buf, n) != VD_IMAGE_JPEG || f->jpeg == VD_JPEG_STB))
        rc = vd_image_check_header(it->path, NULL, NULL, e);
    if (!rc) rc = decode(it->path, buf, n, C, &q, f->jpeg, s, &im, &box, &flip, e);
    if (!rc) {
        /* the box in the decoded pixels: pixel k of a 1/d decode covers the
         * full size's [k d, (k + 1) d) (d a power of two: exact) */
        double d = im.scale_denom;
        box = (vd_box){ box.x / d, box.y / d, box.w / d, box.h / d };
        rc = vd_data_grow(&s->rs, &s->rs_cap, (size_t)H * W * C, e);
        if (!rc)
            rc = vd_image_resize(im.px, im.w, im.h, C, &box, s->rs, W, H, &s->work, &s->work_cap,
                                 e);
        if (!rc) normalise(f, C, H, W, s->rs, flip, x, x16);
    }
    vd_image_free(&im);
    scratch_put(f, s);
    if (!rc) *label = it->label;
    return rc;
}

static int folder_sample(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                         float *x, int32_t *label, vd_err *e) {
    return folder_sample_to(ds, split, index, aug_key, x, NULL, label, e);
}

static int folder_sample_bf16(vd_dataset *ds, vd_split split, int64_t index, uint64_t aug_key,
                              uint16_t *x, int32_t *label, vd_err *e) {
    return folder_sample_to(ds, split, index, aug_key, NULL, x, label, e);
}

int vd_data_set_jpeg_decoder(vd_dataset *ds, vd_jpeg_decoder dec, vd_err *e) {
    if (strcmp(ds->info.kind, "folder") != 0)
        return vd_errf(e, VD_EUSAGE, "the JPEG decoder can only be chosen for folder:DIR "
                       "data (this is %s)", ds->info.kind);
    ((folder *)ds->impl)->jpeg = dec;
    return VD_OK;
}

/* A folder data set of one held-out image, path: its sample 0 is the
 * evaluation transform of that file, whatever folder_sample_to does. */
/* f's normalisation tables for C channels: the spec's data.normalize, else
 * ImageNet's mean and std (for grey images their means over the channels). */
static void norm_tables(folder *f, const vd_net *net, int C) {
    static const float mean3[3] = { 0.485f, 0.456f, 0.406f }, std3[3] = { 0.229f, 0.224f, 0.225f };
    static const float mean1[1] = { 0.449f }, std1[1] = { 0.226f };
    float mean[3], sd[3];
    vd_data_norm_get(net, C, C == 3 ? mean3 : mean1, C == 3 ? std3 : std1, mean, sd);
    for (int c = 0; c < C; c++) {
        float a = 1.0f / (255.0f * sd[c]), b = -mean[c] / sd[c];
        for (int v = 0; v < 256; v++) {
            f->lut[c][v] = (float)v * a + b;
            f->lut16[c][v] = vd_f32_to_bf16(f->lut[c][v]);
        }
    }
}

int vd_data_image_eval(const vd_net *net, const char *path, float *x, vd_err *e) {
    int c = net->in_c, h = net->in_h, w = net->in_w;
    if (c != 1 && c != 3)
        return vd_errf(e, VD_EUSAGE, "image files give 1- or 3-channel inputs, not %d", c);
    item it = { .path = (char *)path, .label = 0 };   /* only read */
    folder f = { .n_classes = 1, .jpeg = VD_JPEG_TURBO };
    f.items[VD_SPLIT_TEST] = &it;
    norm_tables(&f, net, c);
    pthread_mutex_init(&f.pool_mu, NULL);
    vd_dataset ds = { .impl = &f };
    snprintf(ds.info.kind, sizeof ds.info.kind, "folder");
    ds.info.c = c;
    ds.info.h = h;
    ds.info.w = w;
    ds.info.classes = 1;
    ds.info.n[VD_SPLIT_TEST] = 1;
    int32_t label;
    int rc = folder_sample_to(&ds, VD_SPLIT_TEST, 0, 0, x, NULL, &label, e);
    scratch_free(f.pool);   /* the one scratch the sample used */
    pthread_mutex_destroy(&f.pool_mu);
    return rc;
}

static void folder_close(vd_dataset *ds) {
    folder *f = ds->impl;
    if (!f) return;
    for (int s = 0; s < 2; s++) {
        for (int64_t i = 0; i < ds->info.n[s]; i++) vd_free(f->items[s][i].path);
        vd_free(f->items[s]);
    }
    free_names(f->classes, f->n_classes);
    vd_free(f->dir);
    while (f->pool) {
        scratch *s = f->pool;
        f->pool = s->next;
        scratch_free(s);
    }
    pthread_mutex_destroy(&f->pool_mu);
    VD_FREE(ds->impl);
}

/* folder:DIR's held-out split from its train images (vd_data_hold_out). */
static int folder_hold_out(vd_dataset *ds, const bool *held, double fraction, vd_err *e) {
    folder *f = ds->impl;
    int64_t n = ds->info.n[VD_SPLIT_TRAIN], kept = 0, out = 0;
    item *val = vd_malloc(sizeof(item) * (size_t)n, e);
    if (!val) return VD_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        if (held[i]) val[out++] = f->items[VD_SPLIT_TRAIN][i];
        else f->items[VD_SPLIT_TRAIN][kept++] = f->items[VD_SPLIT_TRAIN][i];
    }
    vd_free(f->items[VD_SPLIT_TEST]);
    f->items[VD_SPLIT_TEST] = val;
    f->cap[VD_SPLIT_TEST] = n;
    ds->info.n[VD_SPLIT_TRAIN] = kept;
    ds->info.n[VD_SPLIT_TEST] = out;
    snprintf(ds->info.desc, sizeof ds->info.desc, "folder:%s (%d classes, %lld train, %lld val "
             "held out by --val-split %g)", f->dir, f->n_classes, (long long)kept,
             (long long)out, fraction);
    return VD_OK;
}

int vd_data_open_folder(vd_dataset *ds, const char *dir, const vd_net *net, vd_err *e) {
    if (net->in_c != 1 && net->in_c != 3)
        return vd_errf(e, VD_EUSAGE, "folder:%s gives 1- or 3-channel images but net '%s' "
                       "expects %d channels", dir, net->name, net->in_c);
    folder *f = vd_calloc(1, sizeof *f, e);
    if (!f) return VD_ENOMEM;
    pthread_mutex_init(&f->pool_mu, NULL);
    ds->impl = f;
    ds->close = folder_close;
    ds->sample = folder_sample;
    ds->sample_bf16 = folder_sample_bf16;
    ds->hold_out = folder_hold_out;
    if (!(f->dir = vd_strdup(dir, e))) { folder_close(ds); return VD_ENOMEM; }
    /* paths built whole (vd_strfmt): a cut one would name another directory */
    char *root = vd_strfmt(e, "%s/train", dir);
    if (!root) { folder_close(ds); return VD_ENOMEM; }
    int64_t nc;
    int rc = list_dir(root, true, &f->classes, &nc, e);
    if (rc) {
        size_t rl = strlen(root);
        if (rc == VD_EIO && e && strncmp(e->msg, root, rl) == 0 &&
            strncmp(e->msg + rl, ": cannot open directory", 23) == 0) {
            char why[sizeof e->msg];
            snprintf(why, sizeof why, "%s", e->msg + rl + 2);
            vd_errf(e, VD_EIO, "%s: %s (folder:DIR needs DIR/train/<class>/*.jpg)", root, why);
        }
        vd_free(root);
        folder_close(ds);
        return rc;
    }
    f->n_classes = (int)nc;
    if (nc == 0) {
        rc = vd_errf(e, VD_EDATA, "%s: no class subdirectories", root);
        vd_free(root);
        folder_close(ds);
        return rc;
    }
    rc = scan_split(f, VD_SPLIT_TRAIN, root, &ds->info.n[VD_SPLIT_TRAIN], e);
    if (!rc && ds->info.n[VD_SPLIT_TRAIN] == 0)
        rc = vd_errf(e, VD_EDATA, "%s: no images (.jpg .jpeg .png .bmp .ppm .pgm) in the "
                     "class directories", root);
    vd_free(root);
    root = NULL;
    if (!rc && !(root = vd_strfmt(e, "%s/val", dir))) rc = VD_ENOMEM;
    if (!rc) {
        struct stat st;
        if (stat(root, &st) == 0 && S_ISDIR(st.st_mode))
            rc = scan_split(f, VD_SPLIT_TEST, root, &ds->info.n[VD_SPLIT_TEST], e);
    }
    vd_free(root);
    /* every image's header now, not at the iteration that meets it */
    for (int sp = 0; sp < 2 && !rc; sp++)
        for (int64_t i = 0; i < ds->info.n[sp] && !rc; i++)
            rc = vd_image_check_header(f->items[sp][i].path, NULL, NULL, e);
    if (!rc) {
        char *what = vd_strfmt(e, "folder:%s", dir);
        rc = what ? vd_data_check_shape(what, net->in_c, net->in_h, net->in_w, f->n_classes,
                                        net, e)
                  : VD_ENOMEM;
        vd_free(what);
    }
    if (rc) { folder_close(ds); return rc; }
    ds->info.c = net->in_c;
    ds->info.h = net->in_h;
    ds->info.w = net->in_w;
    ds->info.classes = f->n_classes;
    ds->info.class_names = (const char *const *)f->classes;
    norm_tables(f, net, ds->info.c);
    snprintf(ds->info.desc, sizeof ds->info.desc, "folder:%s (%d classes, %lld train, "
             "%lld val)", dir, f->n_classes, (long long)ds->info.n[0], (long long)ds->info.n[1]);
    return VD_OK;
}
