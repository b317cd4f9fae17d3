/* image_check.c — what an image file is, before it is decoded: the header
 * check of the folder data set (every image when the data set opens, and
 * again before each decode) and the diagnosis of a failed decode. Kept apart
 * from the decoders so that any decoder can use it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stb/stb_image.h>
#include "data/data_impl.h"

/* A JPEG starts with the SOI marker FF D8 FF. */
static bool is_jpeg_magic(const unsigned char *b, size_t n) {
    return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

int vd_image_check_header(const char *path, int *w, int *h, vd_err *e) {
    uint64_t size;
    int fd = vd_open_regular(path, VD_IMAGE_MAX_FILE_BYTES, &size, e);
    if (fd < 0) return -fd;
    FILE *f = fdopen(fd, "rb");
    if (!f) { close(fd); return vd_errf(e, VD_ENOMEM, "%s: out of memory", path); }
    unsigned char magic[4] = {0};
    size_t nm = fread(magic, 1, sizeof magic, f);
    rewind(f);
    int iw = 0, ih = 0, comp = 0;
    int ok = stbi_info_from_file(f, &iw, &ih, &comp);
    fclose(f);
    if (size == 0) return vd_errf(e, VD_EDATA, "%s: empty file, not an image", path);
    if (!ok) {
        const char *why = stbi_failure_reason() ? stbi_failure_reason() : "unknown";
        if (is_jpeg_magic(magic, nm))
            return vd_errf(e, VD_EDATA, "%s: corrupt or truncated JPEG: its header cannot be "
                           "read (%s)", path, why);
        return vd_errf(e, VD_EDATA, "%s: not a JPEG, PNG, BMP, PPM or PGM image, or one too "
                       "large to decode (the header cannot be read: %s)", path, why);
    }
    if (iw < 1 || ih < 1) return vd_errf(e, VD_EDATA, "%s: empty image (%d x %d)", path, iw, ih);
    if ((uint64_t)iw * (uint64_t)ih > VD_IMAGE_MAX_PIXELS)
        return vd_errf(e, VD_EDATA, "%s: %d x %d pixels, more than the %llu that an image may "
                       "have; scale it down", path, iw, ih, (unsigned long long)VD_IMAGE_MAX_PIXELS);
    if (w) *w = iw;
    if (h) *h = ih;
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
