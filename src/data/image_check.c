/* image_check.c — what an image file is, before it is decoded: the header
 * check of the folder data set (every image when the data set opens, and
 * again before each decode) and the diagnosis of a failed decode. Kept apart
 * from the decoders so that any decoder can use it. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stb/stb_image.h>
#include <zlib.h>
#include "data/data_impl.h"

/* A JPEG starts with the SOI marker FF D8 FF. */
static bool is_jpeg_magic(const unsigned char *b, size_t n) {
    return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

vd_image_kind vd_image_kind_of(const unsigned char *b, size_t n) {
    static const unsigned char png[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n' };
    if (is_jpeg_magic(b, n)) return VD_IMAGE_JPEG;
    if (n >= 8 && memcmp(b, png, 8) == 0) return VD_IMAGE_PNG;
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return VD_IMAGE_BMP;
    if (vd_is_pnm(b, n)) return VD_IMAGE_PNM;
    return VD_IMAGE_OTHER;
}

int vd_image_not_supported(const char *path, vd_err *e) {
    return vd_errf(e, VD_EDATA, "%s: not a JPEG, PNG, BMP, PPM or PGM image (its first bytes "
                   "are none of theirs)", path);
}

/* The markers as stb_image 2.27 reads them: junk before a marker skipped,
 * FF fill bytes, stuffed zeros and restart markers in the entropy-coded data
 * passed over, every other marker's segment skipped by its length (a
 * superset of the segments stb_image reads: it stops at an unknown marker or
 * a segment it finds corrupt); a byte past the end reads as 0, as in
 * stb_image. In a valid JPEG these are its segments, so it passes. */
static int jpeg_byte(FILE *f) {
    int c = getc(f);
    return c == EOF ? 0 : c;
}

const char *vd_jpeg_stb_check(FILE *f, bool header_only) {
    bool dht[2][4] = { { false } }, dqt[4] = { false }, frame = false, progressive = false;
    int tq[256];                        /* quantization table of component id (-1: none) */
    for (int i = 0; i < 256; i++) tq[i] = -1;
    if (fseek(f, 2, SEEK_SET) != 0) return NULL;     /* after SOI */
    for (;;) {
        int c;
        while ((c = getc(f)) != EOF && c != 0xFF) {}
        while (c == 0xFF) c = getc(f);
        if (c == EOF || c == 0xD9) return NULL;         /* the end, EOI */
        if (c == 0x00 || c == 0x01 || (c >= 0xD0 && c <= 0xD8)) continue;   /* no segment */
        int hi = getc(f), lo = getc(f);
        if (lo == EOF) return NULL;
        long len = (long)hi << 8 | lo, start = ftell(f);
        if (len < 2 || start < 0) return NULL;         /* stb_image stops there */
        if (c == 0xC4) {                                /* DHT: tables while length is left */
            long left = len - 2;
            while (left > 0) {
                int q = jpeg_byte(f);
                if ((q >> 4) > 1 || (q & 15) > 3) return NULL;     /* stb_image stops */
                long codes = 0;
                for (int k = 0; k < 16; k++) codes += jpeg_byte(f);
                if (codes > 256) return "a Huffman table (DHT) of more than 256 codes";
                dht[q >> 4][q & 15] = true;
                if (fseek(f, codes, SEEK_CUR) != 0) return NULL;
                left -= 17 + codes;
            }
            if (left != 0) return NULL;                 /* stb_image stops: corrupt */
        } else if (c == 0xDB) {                         /* DQT: 65 or 129 bytes a table */
            for (long left = len - 2; left > 0;) {
                int q = jpeg_byte(f);
                if ((q >> 4) > 1 || (q & 15) > 3) return NULL;
                dqt[q & 15] = true;
                long n = (q >> 4) ? 128 : 64;
                if (fseek(f, n, SEEK_CUR) != 0) return NULL;
                left -= 1 + n;
            }
        } else if (c >= 0xC0 && c <= 0xC2) {            /* SOF0-2: what stb_image decodes */
            if (header_only) return NULL;               /* stbi_info stops here */
            if (frame) return NULL;                     /* a second frame: stb_image stops */
            frame = true;
            progressive = c == 0xC2;
            jpeg_byte(f);                               /* precision, height, width */
            for (int k = 0; k < 4; k++) jpeg_byte(f);
            int nc = jpeg_byte(f);
            for (int k = 0; k < nc && k < 4; k++) {
                int id = jpeg_byte(f);
                jpeg_byte(f);                           /* sampling */
                tq[id] = jpeg_byte(f);
            }
        } else if (c == 0xDA && frame) {                /* SOS: the tables the scan reads */
            int ns = jpeg_byte(f), id[4], t[4];
            if (ns < 1 || ns > 4) return NULL;
            for (int k = 0; k < ns; k++) {
                id[k] = jpeg_byte(f);
                t[k] = jpeg_byte(f);
            }
            int ss = jpeg_byte(f);
            jpeg_byte(f);
            int ah = jpeg_byte(f) >> 4;
            for (int k = 0; k < ns; k++) {
                int dc = t[k] >> 4, ac = t[k] & 15;
                if (dc > 3 || ac > 3) return NULL;      /* stb_image stops */
                /* progressive: a first DC scan reads DC tables, AC scans AC tables */
                bool need_dc = !progressive || (ss == 0 && ah == 0);
                bool need_ac = !progressive || ss > 0;
                if ((need_dc && !dht[0][dc]) || (need_ac && !dht[1][ac]))
                    return "a scan reads a Huffman table that is not defined";
                if (tq[id[k]] >= 0 && (tq[id[k]] > 3 || !dqt[tq[id[k]]]))
                    return "a component's quantization table is not defined";
            }
        }
        if (fseek(f, start + len - 2, SEEK_SET) != 0) return NULL;
    }
}

bool vd_is_pnm(const unsigned char *b, size_t n) {
    return n >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6');
}

static bool pnm_space(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Skip whitespace and comments from *i; false when b ends first. */
static bool pnm_skip(const unsigned char *b, size_t n, size_t *i) {
    while (*i < n) {
        if (b[*i] == '#')
            while (*i < n && b[*i] != '\n' && b[*i] != '\r') (*i)++;
        else if (pnm_space(b[*i]))
            (*i)++;
        else
            return true;
    }
    return false;
}

int vd_pnm_header(const char *path, const unsigned char *b, size_t n, uint64_t file_size,
                  vd_pnm *p, vd_err *e) {
    static const char *const what[3] = { "width", "height", "maxval" };
    static const int64_t max[3] = { INT_MAX, INT_MAX, 65535 };
    memset(p, 0, sizeof *p);
    if (n > VD_PNM_MAX_HEADER) n = VD_PNM_MAX_HEADER;
    if (!vd_is_pnm(b, n)) return vd_errf(e, VD_EDATA, "%s: not a PPM or PGM (P6, P5)", path);
    int64_t v[3];
    size_t i = 2;
    for (int k = 0; k < 3; k++) {
        size_t start = i;
        if (!pnm_skip(b, n, &i)) goto cut;
        if (i == start)
            return vd_errf(e, VD_EDATA, "%s: corrupt PPM/PGM header: no whitespace before the "
                           "%s", path, what[k]);
        if (b[i] < '0' || b[i] > '9')
            return vd_errf(e, VD_EDATA, "%s: corrupt PPM/PGM header: the %s is not a number",
                           path, what[k]);
        v[k] = 0;
        while (i < n && b[i] >= '0' && b[i] <= '9') {
            v[k] = v[k] * 10 + (b[i++] - '0');
            if (v[k] > max[k])
                return vd_errf(e, VD_EDATA, "%s: corrupt PPM/PGM header: the %s is larger than "
                               "%lld", path, what[k], (long long)max[k]);
        }
        if (v[k] == 0)
            return vd_errf(e, VD_EDATA, "%s: corrupt PPM/PGM header: the %s is 0", path,
                           what[k]);
    }
    if (i >= n) goto cut;
    if (!pnm_space(b[i]))
        return vd_errf(e, VD_EDATA, "%s: corrupt PPM/PGM header: no whitespace after the "
                       "maxval", path);
    p->w = (int)v[0];
    p->h = (int)v[1];
    p->maxval = (int)v[2];
    p->comp = b[1] == '6' ? 3 : 1;
    p->offset = i + 1;
    /* w, h < 2^31, comp * bytes per sample <= 6: no overflow */
    p->bytes = (uint64_t)p->w * (uint64_t)p->h * (uint64_t)p->comp * (p->maxval > 255 ? 2u : 1u);
    if (file_size < p->offset || file_size - p->offset < p->bytes)
        return vd_errf(e, VD_EDATA, "%s: truncated PPM/PGM: %d x %d pixels need %llu bytes of "
                       "samples, the file has %llu", path, p->w, p->h,
                       (unsigned long long)p->bytes,
                       (unsigned long long)(file_size > p->offset ? file_size - p->offset : 0));
    return VD_OK;
cut:
    if (n == VD_PNM_MAX_HEADER && file_size > n)
        return vd_errf(e, VD_EDATA, "%s: PPM/PGM header longer than %d bytes", path,
                       VD_PNM_MAX_HEADER);
    return vd_errf(e, VD_EDATA, "%s: truncated PPM/PGM header (%llu bytes)", path,
                   (unsigned long long)file_size);
}

/* ---- the file's own lengths --------------------------------------------
 * Each format is checked against the lengths it declares before it is
 * decoded, so that a file cut short is refused instead of decoded from made
 * up bytes (stb_image reads zeros past the end of a BMP). Only the container
 * is walked (chunk, segment and pixel-array lengths, PNG's CRCs); the
 * decoders read the rest. The same walk runs on an open file (at the data
 * set's check: a window of it at a time) and on the file's bytes in memory
 * (before each decode). */

enum { SRC_WIN = 1 << 16 };

/* The bytes of one image file: all of it in memory, or an open file read a
 * window at a time. */
typedef struct img_src {
    const char *path;
    uint64_t size;              /* of the file */
    const unsigned char *mem;   /* [size] the whole file, or NULL: read fd */
    int fd;
    unsigned char *win;         /* [SRC_WIN] bytes of the file from win_off */
    uint64_t win_off;
    size_t win_len;
    int rc;                     /* VD_EIO / VD_ENOMEM once a read failed (e set) */
    vd_err *e;
} img_src;

/* The n (<= SRC_WIN) bytes of the file at off, or NULL when they run past
 * its end (or could not be read: s->rc set). */
static const unsigned char *src_get(img_src *s, uint64_t off, size_t n) {
    if (off > s->size || n > s->size - off) return NULL;
    if (s->mem) return s->mem + off;
    if (n > SRC_WIN) return NULL;
    if (off >= s->win_off && off + n <= s->win_off + s->win_len) return s->win + (off - s->win_off);
    if (!s->win && !(s->win = vd_malloc(SRC_WIN, s->e))) { s->rc = VD_ENOMEM; return NULL; }
    size_t want = s->size - off < SRC_WIN ? (size_t)(s->size - off) : SRC_WIN;
    int rc = vd_data_pread(s->fd, s->path, s->win, want, off, s->e);
    if (rc) {
        s->rc = rc;
        s->win_len = 0;
        return NULL;
    }
    s->win_off = off;
    s->win_len = want;
    return s->win;
}

/* The bytes of the file from off (< size) that are at hand: *n >= 1 of them
 * (the rest of the window, loading one at off when off is outside it), or
 * NULL when they could not be read (s->rc set). For scans that take the
 * file in whatever pieces come. */
static const unsigned char *src_span(img_src *s, uint64_t off, size_t *n) {
    if (!s->mem && off >= s->win_off && off < s->win_off + s->win_len) {
        *n = (size_t)(s->win_off + s->win_len - off);
        return s->win + (off - s->win_off);
    }
    *n = s->size - off < SRC_WIN ? (size_t)(s->size - off) : SRC_WIN;
    return src_get(s, off, *n);
}

static uint32_t get_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint32_t get_le32(const unsigned char *p) {
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* PNG: from the signature, chunks (length, type, data, CRC) up to IEND,
 * each inside the file; with crc, each chunk's CRC-32 (zlib's crc32, over
 * type and data) must match. Bytes after IEND are ignored, as decoders do. */
static int png_check(img_src *s, bool crc) {
    const char *path = s->path;
    vd_err *e = s->e;
    for (uint64_t pos = 8;;) {
        const unsigned char *c = src_get(s, pos, 8);
        if (!c) {
            if (s->rc) return s->rc;
            return vd_errf(e, VD_EDATA, "%s: truncated PNG: the file ends after %llu bytes, "
                           "before the IEND chunk", path, (unsigned long long)s->size);
        }
        uint32_t len = get_be32(c);
        char type[5] = { (char)c[4], (char)c[5], (char)c[6], (char)c[7], 0 };
        bool letters = true;
        for (int k = 0; k < 4; k++)
            letters &= (type[k] >= 'A' && type[k] <= 'Z') || (type[k] >= 'a' && type[k] <= 'z');
        if (!letters || len > 0x7FFFFFFFu)
            return vd_errf(e, VD_EDATA, "%s: corrupt PNG: no chunk at offset %llu (its type is "
                           "not four letters or its length is above 2^31 - 1)", path,
                           (unsigned long long)pos);
        if ((uint64_t)len + 12 > s->size - pos)
            return vd_errf(e, VD_EDATA, "%s: truncated or corrupt PNG: a chunk of %u bytes at "
                           "offset %llu (%s) runs past the end of the file (%llu bytes)", path,
                           len, (unsigned long long)pos, type, (unsigned long long)s->size);
        if (crc) {                  /* only on the whole file in memory */
            const unsigned char *d = s->mem + pos + 4;
            uint32_t want = get_be32(d + 4 + len);
            uint32_t got = (uint32_t)crc32(crc32(0L, Z_NULL, 0), d, (uInt)(4 + len));
            if (got != want)
                return vd_errf(e, VD_EDATA, "%s: corrupt PNG: the CRC of the %s chunk at offset "
                               "%llu does not match its bytes (stored %08x, computed %08x)",
                               path, type, (unsigned long long)pos, want, got);
        }
        if (memcmp(type, "IEND", 4) == 0) return VD_OK;
        pos += 12 + (uint64_t)len;
    }
}

/* BMP: the pixel array that its header declares (from the offset the file
 * header gives, rows padded to 4 bytes; the last row's padding may be
 * missing) lies inside the file. Only the layouts stb_image decodes are
 * measured (uncompressed or bit fields; 1, 4, 8, 16, 24, 32 bits); stb_image
 * refuses the others. */
static int bmp_check(img_src *s) {
    const char *path = s->path;
    vd_err *e = s->e;
    const unsigned char *b = src_get(s, 0, 18);
    if (!b) return s->rc ? s->rc : vd_errf(e, VD_EDATA, "%s: truncated BMP: %llu bytes, not "
                                            "even its headers", path, (unsigned long long)s->size);
    uint32_t offset = get_le32(b + 10), hsz = get_le32(b + 14);
    if (hsz != 12 && hsz != 40 && hsz != 56 && hsz != 108 && hsz != 124) return VD_OK;
    if (!(b = src_get(s, 0, 14 + hsz)))
        return s->rc ? s->rc : vd_errf(e, VD_EDATA, "%s: truncated BMP: %llu bytes, its headers "
                                       "need %u", path, (unsigned long long)s->size, 14 + hsz);
    uint64_t w, h, bpp, compress = 0;
    if (hsz == 12) {
        w = (uint64_t)(b[18] | b[19] << 8);
        h = (uint64_t)(b[20] | b[21] << 8);
        bpp = (uint64_t)(b[24] | b[25] << 8);
    } else {
        int32_t sw = (int32_t)get_le32(b + 18), sh = (int32_t)get_le32(b + 22);
        w = sw < 0 ? 0 : (uint64_t)sw;
        h = sh < 0 ? (uint64_t)(-(int64_t)sh) : (uint64_t)sh;     /* negative: top-down */
        bpp = (uint64_t)(b[28] | b[29] << 8);
        compress = get_le32(b + 30);
    }
    if (w == 0 || h == 0 || (compress != 0 && compress != 3) ||
        !(bpp == 1 || bpp == 4 || bpp == 8 || bpp == 16 || bpp == 24 || bpp == 32))
        return VD_OK;               /* not one stb_image decodes: it says so */
    /* the rows before the last, padded, then the last one's bytes (2^64 - 1
     * when that overflows: no file is so large) */
    uint64_t bits = 0, rows = 0, pixels = 0, need = UINT64_MAX;
    if (!vd_mul_u64(w, bpp, &bits) || !vd_mul_u64((bits + 31) / 32 * 4, h - 1, &rows) ||
        !vd_add_u64(rows, (bits + 7) / 8, &pixels) || !vd_add_u64(pixels, offset, &need))
        need = UINT64_MAX;
    if (need > s->size)
        return vd_errf(e, VD_EDATA, "%s: truncated BMP: %llu x %llu pixels of %llu bits need "
                       "the file to hold %llu bytes (pixels from offset %u), it has %llu", path,
                       (unsigned long long)w, (unsigned long long)h, (unsigned long long)bpp,
                       (unsigned long long)need, offset,
                       (unsigned long long)s->size);
    return VD_OK;
}

/* JPEG: from SOI, the segments (a marker FF xx and a length that counts
 * itself) each inside the file, up to the first scan (SOS); after it,
 * entropy-coded data up to the next marker other than a stuffed zero
 * (FF 00) or a restart (FF D0-D7), and so on to the end-of-image marker
 * (FF D9), which must be there. A file that ends in FF D9 is not scanned
 * past its first SOS segment: the search for EOI is for the rare file with
 * bytes after it (padding, an appended video), or cut short. Other bytes
 * between segments ("extraneous bytes", which libjpeg skips with a
 * warning) are skipped, at most MAX_JUNK in a row before the first scan. */
enum { MAX_JUNK = 1 << 16 };
static int jpeg_check(img_src *s) {
    const char *path = s->path;
    vd_err *e = s->e;
    bool scan = false;
    uint64_t pos = 2, junk = 0;
    for (;;) {
        /* the next FF */
        for (;;) {
            if (pos >= s->size) goto end;
            size_t n;
            const unsigned char *w = src_span(s, pos, &n);
            if (!w) return s->rc ? s->rc : vd_errf(e, VD_EINTERNAL, "%s: the JPEG check lost its "
                                                   "place (offset %llu)", path,
                                                   (unsigned long long)pos);
            const unsigned char *ff = memchr(w, 0xFF, n);
            size_t skip = ff ? (size_t)(ff - w) : n;
            pos += skip;
            if (!scan && (junk += skip) > MAX_JUNK)
                return vd_errf(e, VD_EDATA, "%s: corrupt JPEG: more than %d bytes that are no "
                               "marker before offset %llu, in its headers", path, MAX_JUNK,
                               (unsigned long long)pos);
            if (ff) break;
        }
        const unsigned char *c;
        do {                        /* FF fill bytes */
            if (!(c = src_get(s, ++pos, 1))) goto end;
        } while (*c == 0xFF);
        int m = *c;
        uint64_t at = pos - 1;      /* where the marker's FF is */
        pos++;
        if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue;    /* no segment */
        if (m == 0xD9) {
            if (scan) return VD_OK;
            return vd_errf(e, VD_EDATA, "%s: corrupt JPEG: its end-of-image marker (offset %llu) "
                           "comes before any image data", path, (unsigned long long)at);
        }
        const unsigned char *l = src_get(s, pos, 2);
        if (!l) goto end;
        unsigned len = (unsigned)l[0] << 8 | l[1];
        if (len < 2)
            return vd_errf(e, VD_EDATA, "%s: corrupt JPEG: the segment of marker FF %02X at offset "
                           "%llu has length %u", path, m, (unsigned long long)at, len);
        if (len > s->size - pos)
            return vd_errf(e, VD_EDATA, "%s: truncated JPEG: the segment of marker FF %02X at "
                           "offset %llu (%u bytes) runs past the end of the file (%llu bytes)",
                           path, m, (unsigned long long)at, len, (unsigned long long)s->size);
        pos += len;
        junk = 0;
        if (m == 0xDA && !scan) {
            scan = true;
            const unsigned char *t = src_get(s, s->size - 2, 2);
            if (!t && s->rc) return s->rc;
            if (t && t[0] == 0xFF && t[1] == 0xD9) return VD_OK;
        }
    }
end:
    if (s->rc) return s->rc;
    if (!scan)
        return vd_errf(e, VD_EDATA, "%s: truncated JPEG: the file ends after %llu bytes, before "
                       "its image data (no scan)", path, (unsigned long long)s->size);
    return vd_errf(e, VD_EDATA, "%s: truncated JPEG: no end-of-image marker after its image data "
                   "(the file ends after %llu bytes)", path, (unsigned long long)s->size);
}

/* The length checks of kind on s (with crc, PNG's CRCs too); PNM is
 * checked by vd_pnm_header. */
static int lengths_check(img_src *s, vd_image_kind kind, bool crc) {
    switch (kind) {
    case VD_IMAGE_PNG: return png_check(s, crc);
    case VD_IMAGE_BMP: return bmp_check(s);
    case VD_IMAGE_JPEG: return jpeg_check(s);
    default: return VD_OK;
    }
}

int vd_image_check_data(const char *path, const unsigned char *b, size_t n, vd_err *e) {
    vd_image_kind kind = vd_image_kind_of(b, n);
    if (kind == VD_IMAGE_OTHER) return vd_image_not_supported(path, e);
    if (kind == VD_IMAGE_PNM) {
        vd_pnm p;
        return vd_pnm_header(path, b, n, n, &p, e);
    }
    img_src s = { .path = path, .size = n, .mem = b, .fd = -1, .e = e };
    /* all lengths before any CRC: a file cut short is named truncated */
    int rc = lengths_check(&s, kind, false);
    if (!rc && kind == VD_IMAGE_PNG) rc = png_check(&s, true);
    return rc;
}

enum { VD_IMAGE_HEADER_SCAN = 1 << 20 };

int vd_image_check_header(const char *path, int *w, int *h, vd_err *e) {
    uint64_t size;
    int fd = vd_data_open_file(path, VD_IMAGE_MAX_FILE_BYTES, &size, e);
    if (fd < 0) return -fd;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return vd_errf(e, VD_ENOMEM, "%s: out of memory", path); }
    unsigned char head[VD_PNM_MAX_HEADER];
    size_t nm = fread(head, 1, sizeof head, f);
    int iw = 0, ih = 0, comp = 0, ok = 0, rc = VD_OK;
    const char *bad;
    vd_image_kind kind = vd_image_kind_of(head, nm);
    /* pread on fd beside f's reads: pread leaves the file offset alone */
    img_src src = { .path = path, .size = size, .fd = fd, .e = e };
    if (size == 0) {
        rc = vd_errf(e, VD_EDATA, "%s: empty file, not an image", path);
    } else if (kind == VD_IMAGE_OTHER) {
        rc = vd_image_not_supported(path, e);
    } else if (kind == VD_IMAGE_PNM) {     /* vdnn reads PNM itself (folder.c) */
        vd_pnm p;
        rc = vd_pnm_header(path, head, nm, size, &p, e);
        iw = p.w;
        ih = p.h;
        ok = 1;
    } else if (kind == VD_IMAGE_JPEG && (rc = jpeg_check(&src))) {
        /* its segments first: the walk below reads as far as a frame header */
    } else if (kind == VD_IMAGE_JPEG && (bad = vd_jpeg_stb_check(f, true))) {
        rc = vd_errf(e, VD_EDATA, "%s: corrupt JPEG: %s", path, bad);
    } else {
        /* from memory, not stbi_info_from_file: when one format's probe fails,
         * stb "rewinds" a file-backed context only to its buffer, so the next
         * format (PNM included) parses bytes from later in the file; found by
         * fuzz_image (a signed overflow in stb's PNM number parser after a
         * failed JPEG probe). The header lies in the first VD_IMAGE_HEADER_SCAN
         * bytes of any PNG or BMP and of JPEGs short of a megabyte of
         * metadata before their frame header. */
        size_t want = size < VD_IMAGE_HEADER_SCAN ? (size_t)size : VD_IMAGE_HEADER_SCAN;
        unsigned char *buf = vd_malloc(want ? want : 1, e);
        if (!buf) {
            rc = VD_ENOMEM;
        } else {
            rewind(f);
            size_t got = fread(buf, 1, want, f);
            ok = got > 0 && stbi_info_from_memory(buf, (int)got, &iw, &ih, &comp);
            vd_free(buf);
        }
    }
    if (!rc && !ok) {
        const char *why = stbi_failure_reason() ? stbi_failure_reason() : "unknown";
        if (kind == VD_IMAGE_JPEG)
            rc = vd_errf(e, VD_EDATA, "%s: corrupt or truncated JPEG: its header cannot be "
                         "read (%s)", path, why);
        else
            rc = vd_errf(e, VD_EDATA, "%s: corrupt %s, or one too large to decode: its header "
                         "cannot be read (%s)", path, kind == VD_IMAGE_PNG ? "PNG" : "BMP", why);
    }
    /* stb_image's stbi_info gives a top-down BMP (stored with a negative
     * height) that height; its decoder flips it */
    if (!rc && kind == VD_IMAGE_BMP && ih < 0 && ih > INT_MIN) ih = -ih;
    if (!rc && (iw < 1 || ih < 1))
        rc = vd_errf(e, VD_EDATA, "%s: empty image (%d x %d)", path, iw, ih);
    if (!rc) rc = vd_image_check_size(path, iw, ih, e);
    /* the pixel limit before the walk: a header's claim is cheaper to refuse */
    if (!rc && (kind == VD_IMAGE_PNG || kind == VD_IMAGE_BMP)) rc = lengths_check(&src, kind, false);
    fclose(f);
    vd_free(src.win);
    if (rc) return rc;
    if (w) *w = iw;
    if (h) *h = ih;
    return VD_OK;
}

int vd_image_check_size(const char *path, int w, int h, vd_err *e) {
    if ((uint64_t)w * (uint64_t)h > VD_IMAGE_MAX_PIXELS)
        return vd_errf(e, VD_EDATA, "%s: %d x %d pixels, more than the %llu that an image may "
                       "have; scale it down", path, w, h, (unsigned long long)VD_IMAGE_MAX_PIXELS);
    return VD_OK;
}

int vd_image_decode_error(const char *path, const char *reason, vd_err *e) {
    FILE *f = fopen(path, "rb");
    unsigned char head[3] = {0}, tail[2] = {0};
    size_t nh = 0, nt = 0;
    if (f) {
        nh = fread(head, 1, sizeof head, f);
        if (fseek(f, -2, SEEK_END) == 0) nt = fread(tail, 1, sizeof tail, f);
        fclose(f);
    }
    /* a JPEG ends with the EOI marker FF D9 (a few writers pad after it, so
     * this is said only when the decode failed too) */
    if (is_jpeg_magic(head, nh) && !(nt == 2 && tail[0] == 0xFF && tail[1] == 0xD9))
        return vd_errf(e, VD_EDATA, "%s: truncated JPEG (no end-of-image marker; the decoder "
                       "says: %s)", path, reason ? reason : "unknown");
    if (is_jpeg_magic(head, nh))
        return vd_errf(e, VD_EDATA, "%s: corrupt JPEG (%s)", path, reason ? reason : "unknown");
    return vd_errf(e, VD_EDATA, "%s: cannot decode image (%s)", path,
                   reason ? reason : "unknown reason");
}
