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
 * Each image is decoded to the net's channel count (1 or 3), scaled so that
 * it covers the net input (for a square input: shorter side = input size)
 * with bilinear interpolation (half-pixel centres, no antialiasing), then
 * center-cropped. With augment, train images take a uniformly random crop
 * position instead and are flipped horizontally with probability 1/2, keyed
 * by (seed, sample counter).
 *
 * JPEG files (recognised by their first bytes, not the name) are decoded at
 * the smallest DCT scale of 1/8, 1/4, 1/2 whose image still covers the
 * resize target (otherwise in full), so a large photo is never decoded in
 * full only to be shrunk; the crop geometry is computed on the full size
 * either way (the same crop of the same scene). libjpeg's "Corrupt JPEG
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
    void *work;                 /* [work_cap] bytes: taps and rows of the resize */
    size_t work_cap;
} scratch;

enum { SCRATCH_KEEP_BYTES = 16 << 20 };

typedef struct folder {
    int n_classes;
    char **classes;             /* [n_classes] sorted names */
    item *items[2];             /* [info.n[split]] */
    int64_t cap[2];
    vd_jpeg_decoder jpeg;       /* VD_JPEG_TURBO unless a test or benchmark chose */
    pthread_mutex_t pool_mu;    /* guards pool */
    scratch *pool;              /* free scratches */
} folder;

static void scratch_free(scratch *s) {
    if (!s) return;
    vd_free(s->file);
    vd_free(s->px);
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
    if (s->work_cap > SCRATCH_KEEP_BYTES) { VD_FREE(s->work); s->work_cap = 0; }
    pthread_mutex_lock(&f->pool_mu);
    s->next = f->pool;
    f->pool = s;
    pthread_mutex_unlock(&f->pool_mu);
}

/* *buf of at least n bytes (its old contents dropped). */
static int grow(void **buf, size_t *cap, size_t n, vd_err *e) {
    if (*cap >= n) return VD_OK;
    vd_free(*buf);
    *cap = 0;
    *buf = vd_malloc(n, e);
    if (!*buf) return VD_ENOMEM;
    *cap = n;
    return VD_OK;
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

/* The size (*rw x *rh) an iw x ih image is resized to so that it covers H x W. */
static void cover_size(int iw, int ih, int H, int W, int *rw, int *rh) {
    double s = fmax((double)H / ih, (double)W / iw);
    *rh = (int)lround(ih * s);
    *rw = (int)lround(iw * s);
    if (*rh < H) *rh = H;
    if (*rw < W) *rw = W;
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
        if (grow((void **)&s->file, &s->file_cap, len ? len : 1, e)) { close(fd); return VD_ENOMEM; }
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
 * power-of-two DCT scale (1/8 .. 1) whose image still covers the resize
 * target of H x W, into s's pixel buffer (img->borrowed) or, s NULL, a new
 * one. The pixel limit (vd_image_check_size) is checked on TurboJPEG's
 * header.
 *
 * Only the power-of-two scales: libjpeg-turbo (2.1 and 3.0) has SIMD code
 * for the 8x8, 4x4, 2x2 and 1x1 inverse DCTs only; the other M/8 scales use
 * its plain C IDCTs and are slower than the full decode (500x375 quality-90
 * 4:2:0 photos, one core: 5/8 1.05 ms, 6/8 1.18 ms, 7/8 1.42 ms, in full
 * 0.90 ms, 1/2 0.74 ms a file). Most of the full decode is the entropy
 * decoding that every scale does (1/8: 0.60 ms). Nor the fast flags: on
 * the same files TJFLAG_FASTDCT and TJFLAG_FASTUPSAMPLE save 0.2 ms of 1.0
 * but differ from stb_image by up to 6 and 18 levels (means 1.07 and 1.03),
 * the accurate decode by up to 3 (mean 0.09): outside the tolerances of
 * the tests (jpeg_turbo_matches_stb). */
static int turbo_decode(const char *path, tjhandle tj, const unsigned char *jpg, size_t n, int C,
                        int H, int W, bool full, scratch *s, vd_image *img, vd_err *e) {
    int iw = 0, ih = 0, sub, cs, rc = VD_OK;
    unsigned char *px = NULL;
    if (n > (size_t)ULONG_MAX ||
        tjDecompressHeader3(tj, jpg, (unsigned long)n, &iw, &ih, &sub, &cs) != 0)
        return vd_image_decode_error(path, tjGetErrorStr2(tj), e);   /* names a truncated JPEG */
    if (iw < 1 || ih < 1)       /* headers cut short: TurboJPEG reports no error */
        return vd_image_decode_error(path, "no image size", e);
    if ((rc = vd_image_check_size(path, iw, ih, e))) return rc;
    int rw, rh;
    cover_size(iw, ih, H, W, &rw, &rh);
    int denom = 1;
    while (!full && denom < 8 && TJSCALED(iw, ((tjscalingfactor){ 1, denom * 2 })) >= rw &&
           TJSCALED(ih, ((tjscalingfactor){ 1, denom * 2 })) >= rh)
        denom *= 2;
    tjscalingfactor f = { 1, denom };
    int sw = TJSCALED(iw, f), sh = TJSCALED(ih, f);
    size_t bytes = (size_t)sw * (size_t)sh * (size_t)C;
    if (s) {
        if (grow((void **)&s->px, &s->px_cap, bytes, e)) return VD_ENOMEM;
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

/* Decode the image file path's bytes buf [n] (see vd_image_load); s: the
 * sample's scratch (its pixel buffer) or NULL. buf
 * stays the caller's. */
static int decode(const char *path, unsigned char *buf, size_t n, int C, int H, int W,
                  vd_jpeg_decoder dec, scratch *s, vd_image *img, vd_err *e) {
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
        rc = turbo_decode(path, tj, buf, n, C, H, W, dec == VD_JPEG_TURBO_FULL, s, img, e);
        tjDestroy(tj);
        return rc;
    }
    if (kind == VD_IMAGE_PNM) return pnm_decode(path, buf, n, C, img, e);
    if (kind == VD_IMAGE_OTHER)     /* stb_image is given only the formats vdnn reads */
        return vd_image_not_supported(path, e);
    if (kind == VD_IMAGE_JPEG) {    /* what would send stb_image past its arrays */
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

int vd_image_load(const char *path, int C, int H, int W, vd_jpeg_decoder dec, vd_image *img,
                  vd_err *e) {
    memset(img, 0, sizeof *img);
    unsigned char *buf;
    size_t n;
    int rc = read_file(path, NULL, &buf, &n, e);
    if (rc) return rc;
    rc = decode(path, buf, n, C, H, W, dec, NULL, img, e);
    vd_free(buf);
    return rc;
}

void vd_image_free(vd_image *img) {
    if (img->from_stb) stbi_image_free(img->px);
    else if (!img->borrowed) vd_free(img->px);
    img->px = NULL;
}

/* ---- samples ----------------------------------------------------------------- */

/* Bilinear taps along one axis: for output o in [0, n), source coordinate
 * (o + off + 0.5) * scale - 0.5 clamped to [0, len - 1] (half-pixel centres),
 * lower tap i0, upper i1, weight of the upper t. */
static void taps(int n, int off, bool flip, float scale, int len, int *i0, int *i1, float *t) {
    for (int o = 0; o < n; o++) {
        int r = flip ? (n - 1 - o) : o;
        float s = ((float)(r + off) + 0.5f) * scale - 0.5f;
        if (s < 0) s = 0;
        if (s > (float)(len - 1)) s = (float)(len - 1);
        int a = (int)s;
        i0[o] = a;
        i1[o] = a + 1 < len ? a + 1 : a;
        t[o] = s - (float)a;
    }
}

/* out[k] = r0[k] (1 - fy) + r1[k] fy for k < n. In blocks of 16 with
 * restrict pointers: GCC's -O2 (its "very cheap" vectoriser) vectorises
 * only loops of a known trip count that need no alias check. */
static void blend_rows(const unsigned char *restrict r0, const unsigned char *restrict r1,
                       float fy, float *restrict out, int n) {
    float gy = 1.0f - fy;
    int k = 0;
    for (; k + 16 <= n; k += 16)
        for (int j = 0; j < 16; j++) out[k + j] = (float)r0[k + j] * gy + (float)r1[k + j] * fy;
    for (; k < n; k++) out[k] = (float)r0[k] * gy + (float)r1[k] * fy;
}

/* Output row oy of resample from the blended source row vrow (which starts
 * at column lo, times C): pixel ox blends vrow at xa[ox] and xb[ox] with
 * weight tx[ox], then v * a[c] + b[c]; to the float planes x (CHW) or, x16
 * not NULL, to orow [W*C] in channels-last order and then rounded to bf16
 * into x16. Both take the same floats, so the bf16 values are
 * vd_f32_to_bf16 of the float ones (ISO C: GCC contracts no a * b + c into
 * an FMA that would differ between the two). Inlined with C a constant (1
 * or 3). */
static inline __attribute__((always_inline)) void
out_row(int C, int H, int W, int oy, const float *restrict vrow, int lo, const int *xa,
        const int *xb, const float *tx, const float *a, const float *b, float *restrict x,
        float *restrict orow, uint16_t *restrict x16) {
    size_t plane = (size_t)H * W;
    float *o = x ? x + (size_t)oy * W : NULL;
    /* the constants in registers: the stores could alias a[] and b[] */
    float a0 = a[0], a1 = C == 3 ? a[1] : 0, a2 = C == 3 ? a[2] : 0;
    float b0 = b[0], b1 = C == 3 ? b[1] : 0, b2 = C == 3 ? b[2] : 0;
    for (int ox = 0; ox < W; ox++) {
        const float *pa = vrow + (xa[ox] - lo), *pb = vrow + (xb[ox] - lo);
        float fx = tx[ox], gx = 1.0f - fx;
        float v0 = (pa[0] * gx + pb[0] * fx) * a0 + b0;
        if (C == 1) {
            if (x16) orow[ox] = v0;
            else o[ox] = v0;
            continue;
        }
        float v1 = (pa[1] * gx + pb[1] * fx) * a1 + b1;
        float v2 = (pa[2] * gx + pb[2] * fx) * a2 + b2;
        if (x16) {
            orow[ox * 3] = v0;
            orow[ox * 3 + 1] = v1;
            orow[ox * 3 + 2] = v2;
        } else {
            o[ox] = v0;
            o[plane + ox] = v1;
            o[2 * plane + ox] = v2;
        }
    }
    if (!x16) return;
    /* the row's floats to bf16, in blocks of 16 (vectorised, as blend_rows) */
    uint16_t *o16 = x16 + (size_t)oy * W * C;
    int k = 0, n = W * C;
    for (; k + 16 <= n; k += 16)
        for (int j = 0; j < 16; j++) o16[k + j] = vd_f32_to_bf16(orow[k + j]);
    for (; k < n; k++) o16[k] = vd_f32_to_bf16(orow[k]);
}

/* Resize + crop im to x (or x16): output pixel (ox, oy) is the bilinear
 * sample of the decoded image at the taps xa/xb/tx (columns, already times
 * C) and ya/yb/ty (rows), normalised per channel as (v / 255 - mean) / std
 * (as v * (1 / (255 std)) - mean / std). Separable: the two source rows of
 * an output row are blended over the columns the taps read (blend_rows),
 * then each output pixel blends two values of that row (out_row). vrow,
 * orow: scratch of im->w * C and W * C floats. */
static void resample(const vd_image *im, int C, int H, int W, const int *xa, const int *xb,
                     const float *tx, const int *ya, const int *yb, const float *ty, float *vrow,
                     float *orow, float *x, uint16_t *x16) {
    static const float mean3[3] = { 0.485f, 0.456f, 0.406f }, std3[3] = { 0.229f, 0.224f, 0.225f };
    float a[3], b[3];
    for (int c = 0; c < C; c++) {
        float m = C == 3 ? mean3[c] : 0.449f, sd = C == 3 ? std3[c] : 0.226f;
        a[c] = 1.0f / (255.0f * sd);
        b[c] = -m / sd;
    }
    /* the columns read: [lo, hi] (times C) */
    int lo = xa[0], hi = xb[0];
    for (int o = 1; o < W; o++) {
        if (xa[o] < lo) lo = xa[o];
        if (xb[o] > hi) hi = xb[o];
    }
    int span = hi - lo + C;
    size_t stride = (size_t)im->w * (size_t)C;
    for (int oy = 0; oy < H; oy++) {
        blend_rows(im->px + (size_t)ya[oy] * stride + lo, im->px + (size_t)yb[oy] * stride + lo,
                   ty[oy], vrow, span);
        if (C == 3) out_row(3, H, W, oy, vrow, lo, xa, xb, tx, a, b, x, orow, x16);
        else out_row(1, H, W, oy, vrow, lo, xa, xb, tx, a, b, x, orow, x16);
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
    int rc = read_file(it->path, s, &buf, &n, e);
    /* the pixel limit (and stb_image's guards) before decoding: a JPEG for
     * TurboJPEG has it checked on TurboJPEG's own reading of its header
     * (turbo_decode), the others by vd_image_check_header */
    if (!rc && (vd_image_kind_of(buf, n) != VD_IMAGE_JPEG || f->jpeg == VD_JPEG_STB))
        rc = vd_image_check_header(it->path, NULL, NULL, e);
    if (!rc) rc = decode(it->path, buf, n, C, H, W, f->jpeg, s, &im, e);
    if (rc) { scratch_put(f, s); return rc; }
    int iw = im.full_w, ih = im.full_h;
    /* scale so the image covers H x W (geometry on the full size) */
    int rw, rh;
    cover_size(iw, ih, H, W, &rw, &rh);
    int y0 = (rh - H) / 2, x0 = (rw - W) / 2;
    bool flip = false;
    if (ds->augment && split == VD_SPLIT_TRAIN) {
        uint64_t k = vd_mix64(ds->seed ^ vd_mix64(aug_key ^ 0xA06A06A06ull));
        y0 = (int)(k % (uint64_t)(rh - H + 1));
        k = vd_mix64(k);
        x0 = (int)(k % (uint64_t)(rw - W + 1));
        flip = (vd_mix64(k) >> 63) != 0;
    }
    /* half-pixel centres: full-size coordinate u is (u + 0.5) / d - 0.5 in a
     * 1/d-scaled decode, so the taps use the scale divided by d (exact: d is
     * a power of two) and the same offset */
    float sx_scale = (float)iw / (float)rw, sy_scale = (float)ih / (float)rh;
    if (im.scale_denom > 1) {
        sx_scale /= (float)im.scale_denom;
        sy_scale /= (float)im.scale_denom;
    }
    /* the work area: the taps xa xb ya yb (ints), tx ty, the blended source
     * row (at most the decoded width) and an output row (floats) */
    size_t ni = 2 * (size_t)(W + H), nf = (size_t)(W + H) + ((size_t)im.w + (size_t)W) * (size_t)C;
    if (grow(&s->work, &s->work_cap, ni * sizeof(int) + nf * sizeof(float), e)) {
        vd_image_free(&im);
        scratch_put(f, s);
        return VD_ENOMEM;
    }
    int *xa = s->work, *xb = xa + W, *ya = xb + W, *yb = ya + H;
    float *tx = (float *)(void *)(yb + H), *ty = tx + W, *vrow = ty + H;
    float *orow = vrow + (size_t)im.w * C;
    taps(W, x0, flip, sx_scale, im.w, xa, xb, tx);
    taps(H, y0, false, sy_scale, im.h, ya, yb, ty);
    for (int o = 0; o < W; o++) { xa[o] *= C; xb[o] *= C; }
    resample(&im, C, H, W, xa, xb, tx, ya, yb, ty, vrow, orow, x, x16);
    vd_image_free(&im);
    scratch_put(f, s);
    *label = it->label;
    return VD_OK;
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
int vd_data_image_eval(const char *path, int c, int h, int w, float *x, vd_err *e) {
    if (c != 1 && c != 3)
        return vd_errf(e, VD_EUSAGE, "image files give 1- or 3-channel inputs, not %d", c);
    item it = { .path = (char *)path, .label = 0 };   /* only read */
    folder f = { .n_classes = 1, .jpeg = VD_JPEG_TURBO };
    f.items[VD_SPLIT_TEST] = &it;
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
    while (f->pool) {
        scratch *s = f->pool;
        f->pool = s->next;
        scratch_free(s);
    }
    pthread_mutex_destroy(&f->pool_mu);
    VD_FREE(ds->impl);
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
    snprintf(ds->info.desc, sizeof ds->info.desc, "folder:%s (%d classes, %lld train, "
             "%lld val)", dir, f->n_classes, (long long)ds->info.n[0], (long long)ds->info.n[1]);
    return VD_OK;
}
