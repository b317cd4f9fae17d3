/* image_check.c — what an image file is, before it is decoded: the header
 * check of the folder data set (every image when the data set opens, and
 * again before each decode) and the diagnosis of a failed decode. Kept apart
 * from the decoders so that any decoder can use it. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stb/stb_image.h>
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

enum { VD_IMAGE_HEADER_SCAN = 1 << 20 };

int vd_image_check_header(const char *path, int *w, int *h, vd_err *e) {
    uint64_t size;
    int fd = vd_open_regular(path, VD_IMAGE_MAX_FILE_BYTES, &size, e);
    if (fd < 0) return -fd;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return vd_errf(e, VD_ENOMEM, "%s: out of memory", path); }
    unsigned char head[VD_PNM_MAX_HEADER];
    size_t nm = fread(head, 1, sizeof head, f);
    int iw = 0, ih = 0, comp = 0, ok;
    const char *bad;
    vd_image_kind kind = vd_image_kind_of(head, nm);
    if (size == 0) {
        fclose(f);
        return vd_errf(e, VD_EDATA, "%s: empty file, not an image", path);
    }
    if (kind == VD_IMAGE_OTHER) { fclose(f); return vd_image_not_supported(path, e); }
    if (kind == VD_IMAGE_PNM) {     /* vdnn reads PNM itself (folder.c) */
        fclose(f);
        vd_pnm p;
        int rc = vd_pnm_header(path, head, nm, size, &p, e);
        if (rc) return rc;
        iw = p.w;
        ih = p.h;
        ok = 1;
    } else if (kind == VD_IMAGE_JPEG && (bad = vd_jpeg_stb_check(f, true))) {
        fclose(f);
        return vd_errf(e, VD_EDATA, "%s: corrupt JPEG: %s", path, bad);
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
        if (!buf) { fclose(f); return VD_ENOMEM; }
        rewind(f);
        size_t got = fread(buf, 1, want, f);
        fclose(f);
        ok = got > 0 && stbi_info_from_memory(buf, (int)got, &iw, &ih, &comp);
        vd_free(buf);
    }
    if (!ok) {
        const char *why = stbi_failure_reason() ? stbi_failure_reason() : "unknown";
        if (is_jpeg_magic(head, nm))
            return vd_errf(e, VD_EDATA, "%s: corrupt or truncated JPEG: its header cannot be "
                           "read (%s)", path, why);
        return vd_errf(e, VD_EDATA, "%s: corrupt %s, or one too large to decode: its header "
                       "cannot be read (%s)", path, kind == VD_IMAGE_PNG ? "PNG" : "BMP", why);
    }
    if (iw < 1 || ih < 1) return vd_errf(e, VD_EDATA, "%s: empty image (%d x %d)", path, iw, ih);
    int rc = vd_image_check_size(path, iw, ih, e);
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
